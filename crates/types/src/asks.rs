//! The monitors' answers to what OSDs ask of the map for their PGs:
//! pg_temp and primary_temp overrides, and write-set records (who may ask,
//! and which records are taken). Pure functions of the map and the
//! incrementals the monitors keep: the monitor service calls them before
//! proposing, and the simulator calls the same functions, so what it
//! tests is what the monitors decide.
//!
//! It must never change the map or do I/O: it returns `Change`s.

use crate::osdmap::{
    Change, Epoch, Incremental, LazyPlacer, MapPg, OsdMap, Reach, RecordAsk, WriteSetRecord,
};
use crate::PgId;
use loligo_crush::placement::holes_as_minus_one;
use std::collections::{HashMap, HashSet, VecDeque};

/// How many incrementals the monitors keep (to tell what may have moved
/// since a record was asked, and to send OSDs the epochs they missed).
pub const INCS_KEPT: usize = 512;

/// Whether `ask` is left out as late (see [`gathered_changes`]): its
/// interval ended while its PG's record was short, and it names none of
/// that record's members.
pub fn is_late(map: &OsdMap, incs: &VecDeque<Incremental>, ask: &RecordAsk) -> bool {
    let moves = Moves::after(incs, ask.as_of, map.epoch);
    late_ask(map, &moves, &mut LazyPlacer::new(map), ask)
}

/// The change asking for PG `pg`'s pg_temp `osds` makes on `map`: none
/// when the map holds that one already (an empty `osds` clears it).
pub fn pg_temp_changes(map: &OsdMap, pg: PgId, osds: Vec<i32>) -> Vec<Change> {
    let same = map.pg_temp.get(&pg).map(Vec::as_slice).unwrap_or(&[]) == osds.as_slice();
    if same {
        vec![]
    } else {
        vec![Change::PgTemp { pg, osds }]
    }
}

/// The change asking for PG `pg`'s primary_temp `osd` makes on `map`:
/// none when the map holds that one already.
pub fn primary_temp_changes(map: &OsdMap, pg: PgId, osd: Option<i32>) -> Vec<Change> {
    if map.primary_temp.get(&pg).copied() == osd {
        vec![]
    } else {
        vec![Change::PrimaryTemp { pg, osd }]
    }
}

/// Whether OSD `osd` may ask for PG `pg`'s overrides (pg_temp,
/// primary_temp) under `map`. The PG core asks from three roles only: the
/// acting primary (hands the PG over, or drops a pg_temp once CRUSH's
/// members are complete), the first OSD of the acting set (an
/// erasure-coded PG's primary without its primary_temp, which hands over
/// and takes back), and the first OSD of the up set (CRUSH's primary,
/// whose copy may be behind). An OSD in none of them in the monitors' map
/// asks from an older interval: that map has started a new one, whose
/// primary asks for what it needs. `placer` maps PGs under `map`.
pub fn may_steer(map: &OsdMap, placer: &mut impl MapPg, pg: PgId, osd: i32) -> Result<(), String> {
    let m = placer
        .map_pg(pg)
        .map_err(|e| format!("ask for overrides of pg {pg}: {e}"))?;
    let first = |set: &[i32]| set.iter().copied().find(|&o| o >= 0);
    if m.acting_primary == osd || first(&m.acting) == Some(osd) || first(&m.up) == Some(osd) {
        return Ok(());
    }
    Err(format!(
        "ask for overrides of pg {pg}: at epoch {} its primary is osd.{} (acting {:?}, up {:?})",
        map.epoch, m.acting_primary, m.acting, m.up
    ))
}

/// Whether OSD `osd` may ask for write-set record `ask` while the
/// monitors' map is at `epoch`: only as the interval's primary, and for an
/// interval and a map it can have seen (a record from the future would
/// make every genuine record older, and its PG would take no writes).
pub fn may_record(ask: &RecordAsk, osd: i32, epoch: u64) -> Result<(), String> {
    let pg = ask.pg;
    if ask.primary != osd {
        return Err(format!(
            "record pg {pg}'s write set as its primary osd.{}",
            ask.primary
        ));
    }
    if !ask.acting.contains(&osd) {
        return Err(format!(
            "record pg {pg}'s write set for an acting set without itself ({:?})",
            ask.acting
        ));
    }
    if ask.record.interval > ask.as_of || ask.as_of > epoch {
        return Err(format!(
            "record pg {pg}'s write set of interval {} as of epoch {}: the map is at epoch {epoch}",
            ask.record.interval, ask.as_of
        ));
    }
    Ok(())
}

/// What may share an epoch with others of its kind.
#[derive(Clone, Debug)]
pub enum Gather {
    /// An OSD's boot.
    Boot(Change),
    /// One OSD's batch of PG write sets (`RecordWriteSets`).
    Records(Vec<RecordAsk>),
}

/// Where the kept incrementals say PGs may have moved: a record asked at
/// an epoch before one of these moves may be late (its interval may have
/// ended), and the PG's placement is computed to tell.
struct Moves {
    /// The map's epoch.
    now: Epoch,
    /// The oldest epoch whose changes are known (the first kept
    /// incremental's); before it, anything may have moved.
    known_from: Epoch,
    /// The newest epoch that may have moved every PG, one pool's, or one
    /// PG's.
    all: Epoch,
    pools: HashMap<u64, Epoch>,
    pgs: HashMap<PgId, Epoch>,
}

impl Moves {
    /// The moves in `incs` after epoch `since` (the earliest any record
    /// in hand was asked at), up to the map's epoch `now`.
    fn after(incs: &VecDeque<Incremental>, since: Epoch, now: Epoch) -> Moves {
        let mut m = Moves {
            now,
            known_from: incs.front().map_or(now + 1, |i| i.epoch),
            all: 0,
            pools: HashMap::new(),
            pgs: HashMap::new(),
        };
        for inc in incs.iter().filter(|i| i.epoch > since) {
            for c in &inc.changes {
                match c.reach() {
                    Reach::Nothing => {}
                    Reach::All => m.all = m.all.max(inc.epoch),
                    Reach::Pool(p) => {
                        let e = m.pools.entry(p).or_default();
                        *e = (*e).max(inc.epoch);
                    }
                    Reach::Pg(pg) => {
                        let e = m.pgs.entry(pg).or_default();
                        *e = (*e).max(inc.epoch);
                    }
                }
            }
        }
        m
    }

    /// Whether a change after epoch `as_of` may have moved PG `pg`.
    fn moved(&self, pg: PgId, as_of: Epoch) -> bool {
        if as_of >= self.now {
            return false;
        }
        as_of + 1 < self.known_from
            || self.all > as_of
            || self.pools.get(&pg.pool).is_some_and(|&e| e > as_of)
            || self.pgs.get(&pg).is_some_and(|&e| e > as_of)
    }
}

/// Whether `ask` is late and would give up what is left: its PG's record
/// is short (`OsdMap::record_short`), the ask names none of that record's
/// members (its primary went on without their copies), and the ask's
/// interval has ended in `map` (the PG's acting set or primary is no
/// longer the interval's). `moves` says whether anything since the ask's
/// epoch may have moved the PG; only then is its placement computed
/// (with `placer`, built once per batch).
fn late_ask(map: &OsdMap, moves: &Moves, placer: &mut impl MapPg, ask: &RecordAsk) -> bool {
    let keeps_some = (map.write_sets.get(&ask.pg))
        .is_some_and(|r| r.members().any(|o| ask.record.osds.contains(&o)));
    if !map.record_short(ask.pg) || keeps_some || !moves.moved(ask.pg, ask.as_of) {
        return false;
    }
    match placer.map_pg(ask.pg) {
        Ok(m) => holes_as_minus_one(&m.acting) != ask.acting || m.acting_primary != ask.primary,
        Err(_) => true,
    }
}

/// Whether `ask`'s claim (its PG's acting set and primary as of its epoch)
/// agrees with `map`, where the map can tell: when nothing since the ask's
/// epoch may have moved the PG, its placement then is its placement now.
/// (The auth check has made sure the asker is the primary it claims; this
/// makes sure the claim is the map's, so an OSD records only a PG it is
/// the primary of.) A claim the map contradicts is left out.
fn claim_holds(moves: &Moves, placer: &mut impl MapPg, ask: &RecordAsk) -> bool {
    if moves.moved(ask.pg, ask.as_of) {
        return true;
    }
    match placer.map_pg(ask.pg) {
        Ok(m) => holes_as_minus_one(&m.acting) == ask.acting && m.acting_primary == ask.primary,
        Err(_) => false,
    }
}

/// The move of an OSD that boots with another host than the CRUSH
/// bucket it is under (Ceph's `osd_crush_update_on_start`): its data
/// follows to the new place. Decided when the boot is proposed and
/// logged as its own change, so a boot replays as it first applied.
fn moved_host(map: &OsdMap, boot: &Change) -> Option<Change> {
    let Change::OsdBoot { id, host, .. } = boot else {
        return None;
    };
    let under = crate::crush_edit::parent_name(&map.crush, *id)?;
    if under == host {
        return None;
    }
    let location = vec![("host".to_string(), host.clone())];
    // Only a move the map takes: one it refuses (no root `default`, a
    // bucket of another type by that name) must not refuse the boot.
    let mut crush = (*map.crush).clone();
    crate::crush_edit::set_location(&mut crush, *id, &location).ok()?;
    loligo_crush::CompiledMap::compile(&crush).ok()?;
    Some(Change::CrushSetLocation { id: *id, location })
}

/// The changes `items` make on `map`, in order, and each item's reply
/// value: for records, the PGs whose record holds once the changes are
/// in. A record is left out when it is older than the map's (or than an
/// earlier item's): its PG has moved on; or when it is late and gives up
/// what is left (`late_ask`; `incs`, the kept incrementals, say whether
/// its PG may have moved): its interval ended while the PG's record was
/// short, and it names none of that record's members. A newer interval's
/// primary may have gone on from those members' copies, and taking the
/// late record would declare other copies whole after that primary chose
/// (on an EC pool with positions moving: a newer primary went on from its
/// own copy under a short record, then the late one named two empty copies
/// as the whole ones, and once that primary's OSD was lost they were all
/// that was left, mid-backfill). A primary acts on its record only once it
/// is taken, so nothing was acknowledged under a refused one. Other late
/// records are still taken: docs/peering.md (write-set records) says why.
/// `placer` maps PGs under `map` (a few of them: those whose claims the
/// map can check).
pub fn gathered_changes(
    map: &OsdMap,
    incs: &VecDeque<Incremental>,
    items: &[Gather],
    placer: &mut impl MapPg,
) -> (Vec<Change>, Vec<Option<Vec<PgId>>>) {
    let mut changes = Vec::new();
    let mut values = Vec::with_capacity(items.len());
    let mut recorded: HashMap<PgId, &WriteSetRecord> = HashMap::new();
    // OSDs these changes boot: a record naming one is late (the map
    // refuses it, and with it every change of the epoch).
    let mut booted: HashSet<i32> = HashSet::new();
    let since = items
        .iter()
        .filter_map(|i| match i {
            Gather::Records(r) => r.iter().map(|a| a.as_of).min(),
            Gather::Boot(_) => None,
        })
        .min()
        .unwrap_or(map.epoch);
    let moves = Moves::after(incs, since, map.epoch);
    // Daemons whose key these changes record: a key is recorded once (a
    // daemon's first start); a second record in the batch, or one for a
    // daemon the map has a key of, would replace it.
    let mut keyed: HashSet<&str> = HashSet::new();
    for item in items {
        match item {
            Gather::Boot(c) => {
                if let Change::OsdBoot { id, .. } = c {
                    if map.flags.contains(&crate::osdmap::OsdFlag::NoUp) {
                        // `noup` set since the boot was asked: it is left
                        // out (the caller is told the flag holds it).
                        values.push(None);
                        continue;
                    }
                    booted.insert(*id);
                }
                let replaces = matches!(c, Change::AuthPut { entity, .. }
                    if map.auth.contains_key(entity) || !keyed.insert(entity.as_str()));
                if !replaces {
                    changes.push(c.clone());
                }
                if let Some(moved) = moved_host(map, c) {
                    changes.push(moved);
                }
                values.push(None);
            }
            Gather::Records(records) => {
                let mut held = Vec::new();
                for ask in records {
                    let (pg, record) = (&ask.pg, &ask.record);
                    if map.pool_of(*pg).is_err()
                        || !claim_holds(&moves, placer, ask)
                        || map.late_member(record).is_some()
                        || record.osds.iter().any(|o| booted.contains(o))
                        || late_ask(map, &moves, placer, ask)
                    {
                        continue;
                    }
                    let old = recorded.get(pg).copied().or_else(|| map.write_sets.get(pg));
                    match old {
                        Some(old) if old.interval > record.interval => continue,
                        Some(old) if old == record => {}
                        _ => {
                            changes.push(Change::RecordWriteSet {
                                pg: *pg,
                                record: record.clone(),
                            });
                            recorded.insert(*pg, record);
                        }
                    }
                    held.push(*pg);
                }
                values.push(Some(held));
            }
        }
    }
    (changes, values)
}
