//! The simulated cluster's monitors: the map at every epoch, and what they
//! make of the OSDs' asks (pg_temp, primary_temp, write-set records) and of
//! the simulation's events (boots, failures, fullness, `osd lost`, `pg
//! mark-unfound-lost`, auto-out), all as [`Change`]s.
//!
//! Two monitors take the same changes. [`RealMon`] is the monitors' own
//! logic: a real [`OsdMap`] with real CRUSH applies each epoch's
//! incremental, the functions the monitor service calls decide which asks
//! are taken (`loligo_types::asks`), and each PG's map input is built as
//! the daemon builds it (`pg::map_input`, with the epochs an OSD has seen
//! without a gap). Random runs use it. [`ModelMon`] is the simulator's
//! first monitor, a model with its own placement rule (each PG's set
//! counts up from its own OSD; an erasure-coded set takes a spare or
//! leaves a hole, and may swap positions) and its own copy of the late
//! record rule: the seeds that found bugs under it replay their histories
//! only there, so it stays for them.
//!
//! It must never read the clock or the OS's randomness.

use crate::{pg_id, OSDS, PGS};
use loligo_crush::placement::{holes_as_minus_one, PgMapping};
use loligo_crush::ITEM_NONE;
use loligo_ec::stripe::Striper;
use loligo_pg::pg::{map_input, seen_since, Input};
use loligo_types::asks::{self, Gather, INCS_KEPT};
use loligo_types::osdmap::{EcProfile, PoolKind};
use loligo_types::{
    Change, Epoch, Fullness, Incremental, LazyPlacer, OsdMap, PgId, Pool, RecordAsk, WriteSetRecord,
};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// One epoch of the map as the simulation reads it.
#[derive(Clone)]
pub(crate) struct MapAt {
    /// Per PG: acting set, primary, primary_temp, pg_temp, write-set
    /// record, CRUSH's set.
    pub acting: Vec<Vec<i32>>,
    pub primary: Vec<Option<i32>>,
    pub primary_temp: Vec<Option<i32>>,
    pub pg_temp: Vec<Option<Vec<i32>>>,
    pub record: Vec<Option<WriteSetRecord>>,
    /// The epoch of the operator's last `pg mark-unfound-lost` (0: none).
    pub unfound_lost: Vec<Epoch>,
    pub crush: Vec<Vec<i32>>,
    /// Which OSDs are up, and each one's last boot epoch.
    pub up: [bool; OSDS],
    pub up_from: [Epoch; OSDS],
    /// Which OSDs are in (CRUSH places data on them).
    pub is_in: [bool; OSDS],
    /// Which devices are too full to backfill onto.
    pub toofull: [bool; OSDS],
}

/// What the maps one OSD has seen say of the next one (the daemon's
/// bookkeeping, kept per process).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seen {
    /// The newest epoch it holds.
    pub newest: Option<Epoch>,
    /// The first epoch from which it has seen every map.
    pub since: Epoch,
}

/// What the monitors made of a write-set record ask.
pub(crate) struct Judged {
    /// The changes to commit (none when the record is held already or
    /// left out).
    pub changes: Vec<Change>,
    /// Whether the PG's record is the asked one once they are in.
    pub held: bool,
    /// Whether it was left out as late (its interval ended while the
    /// PG's record was short, naming none of its members).
    pub late: bool,
}

/// What an OSD asks of a PG's overrides.
pub(crate) enum Steer {
    PgTemp(Vec<i32>),
    PrimaryTemp(Option<i32>),
}

/// The monitors as the simulation drives them.
pub(crate) trait Monitor {
    /// The newest epoch.
    fn epoch(&self) -> Epoch;
    /// The map of `epoch`, if there is one.
    fn at(&self, epoch: Epoch) -> Option<&MapAt>;
    /// The newest map.
    fn newest(&self) -> &MapAt {
        self.at(self.epoch()).expect("the newest map is kept")
    }
    /// Commit `changes` as the next epoch: whether there was one (none
    /// for no changes).
    fn commit(&mut self, changes: Vec<Change>) -> bool;
    /// What an OSD that has seen maps as `seen` says feeds its PGs for the
    /// map of `epoch`; `None` when it passes over that map.
    fn inputs(
        &self,
        epoch: Epoch,
        seen: &mut Seen,
        striper: &Option<Arc<Striper>>,
        now_ms: u64,
    ) -> Option<Vec<Input>>;
    /// The changes OSD `from`'s ask for PG `p`'s overrides makes.
    fn steer(&self, from: usize, p: usize, ask: Steer) -> Vec<Change>;
    /// What OSD `from`'s ask to record `ask` comes to.
    fn judge(&self, from: usize, p: usize, ask: &RecordAsk) -> Judged;
    /// The pool as the newest map has it (`None`: the model, whose pool
    /// never changes).
    fn pool(&self) -> Option<Pool> {
        None
    }
    /// The newest map (`None`: the model, which keeps no real one).
    fn map(&self) -> Option<&OsdMap> {
        None
    }
    /// Whether these are the monitors' own logic: the faults that only
    /// they take (auto-out, an operator's out and in, partitions with
    /// reboots, lost pg_temp asks) apply; the model takes none, so its
    /// seeds replay.
    fn real(&self) -> bool;
}

/// How an OSD boots: at a fixed address, one host per OSD, weight 1.
pub(crate) fn boot(o: usize) -> Change {
    Change::OsdBoot {
        id: o as i32,
        addr: format!("sim:{}", 6800 + o),
        host: format!("h{o}"),
        crush_weight: 0x10000,
    }
}

/// The fullness change that marks `o` too full to backfill onto, or not.
pub(crate) fn fullness(o: usize, toofull: bool) -> Change {
    let fullness = match toofull {
        true => Fullness::BackfillFull,
        false => Fullness::Ok,
    };
    Change::OsdFullness {
        id: o as i32,
        fullness,
    }
}

/// The primary of an acting set: its first OSD that is not a hole.
pub(crate) fn primary_of(acting: &[i32]) -> Option<i32> {
    acting.iter().copied().find(|&o| o != ITEM_NONE)
}

/// The OSDs of a set, holes left out.
pub(crate) fn members(set: &[i32]) -> impl Iterator<Item = i32> + '_ {
    set.iter().copied().filter(|&o| o != ITEM_NONE)
}

/// The monitors' own logic over a real map and real CRUSH.
pub(crate) struct RealMon {
    map: OsdMap,
    /// The incrementals kept, as the monitors keep them.
    incs: VecDeque<Incremental>,
    /// Every epoch's map and its reading, by epoch.
    maps: BTreeMap<Epoch, (Arc<OsdMap>, MapAt, Vec<PgMapping>)>,
    pool: Pool,
}

impl RealMon {
    /// A map (CRUSH failure domain `host`, one host per OSD, none booted)
    /// holding the simulation's pool, replicated (size 3, min_size 2) or
    /// erasure-coded with `profile` (min_size k): epoch 1.
    pub fn new(profile: Option<&EcProfile>) -> RealMon {
        let empty = OsdMap::new("sim", "host").expect("a new map");
        let mut pool = empty.replicated_pool("p", PGS as u32, 3, 2);
        let mut changes = Vec::new();
        if let Some(prof) = profile {
            let mut crush = (*empty.crush).clone();
            let (rule, added) =
                loligo_types::crush_edit::ensure_erasure_rule(&mut crush).expect("an EC rule");
            if added {
                changes.push(Change::CrushSet(crush));
            }
            changes.push(Change::EcProfileSet(prof.clone()));
            pool.kind = PoolKind::Erasure {
                profile: prof.name.clone(),
            };
            pool.size = prof.k + prof.m;
            pool.min_size = prof.k;
            pool.crush_rule = rule;
        }
        changes.push(Change::PoolCreate(pool.clone()));
        let mut m = RealMon {
            map: empty,
            incs: VecDeque::new(),
            maps: BTreeMap::new(),
            pool,
        };
        assert!(m.commit(changes), "the pool is created");
        m
    }

    fn read(map: &OsdMap) -> (MapAt, Vec<PgMapping>) {
        let mut placer = map.placer().expect("the map's CRUSH compiles");
        // (The pool's PGs at this epoch: more after a split.)
        let pgs = map
            .pools
            .get(&pg_id(0).pool)
            .map_or(PGS, |p| p.pg_num as usize);
        let pms: Vec<PgMapping> = (0..pgs)
            .map(|p| placer.map_pg(pg_id(p)).expect("every PG is placed"))
            .collect();
        let osd = |o: usize| map.osds.get(&(o as i32));
        let at = MapAt {
            acting: pms.iter().map(|m| m.acting.clone()).collect(),
            primary: pms
                .iter()
                .map(|m| Some(m.acting_primary).filter(|&o| o >= 0 && o != ITEM_NONE))
                .collect(),
            primary_temp: (0..pgs)
                .map(|p| map.primary_temp.get(&pg_id(p)).copied())
                .collect(),
            pg_temp: (0..pgs)
                .map(|p| map.pg_temp.get(&pg_id(p)).cloned())
                .collect(),
            record: (0..pgs)
                .map(|p| map.write_sets.get(&pg_id(p)).cloned())
                .collect(),
            unfound_lost: (0..pgs)
                .map(|p| map.unfound_lost.get(&pg_id(p)).copied().unwrap_or(0))
                .collect(),
            crush: pms.iter().map(|m| m.up.clone()).collect(),
            up: std::array::from_fn(|o| osd(o).is_some_and(|i| i.up)),
            up_from: std::array::from_fn(|o| osd(o).map_or(0, |i| i.up_from)),
            is_in: std::array::from_fn(|o| osd(o).is_some_and(|i| i.is_in())),
            toofull: std::array::from_fn(|o| {
                osd(o).is_some_and(|i| i.fullness >= Fullness::BackfillFull)
            }),
        };
        (at, pms)
    }
}

impl Monitor for RealMon {
    fn pool(&self) -> Option<Pool> {
        self.map.pools.get(&self.pool.id).cloned()
    }

    fn map(&self) -> Option<&OsdMap> {
        Some(&self.map)
    }

    fn epoch(&self) -> Epoch {
        self.map.epoch
    }

    fn at(&self, epoch: Epoch) -> Option<&MapAt> {
        self.maps.get(&epoch).map(|(_, at, _)| at)
    }

    fn commit(&mut self, changes: Vec<Change>) -> bool {
        if changes.is_empty() {
            return false;
        }
        let inc = Incremental {
            epoch: self.map.epoch + 1,
            changes,
        };
        // The monitors propose only what applies; the simulation asks
        // only for that too, so a refusal is the simulation's bug.
        self.map
            .apply(&inc)
            .unwrap_or_else(|e| panic!("the map refuses {inc:?}: {e}"));
        self.incs.push_back(inc);
        while self.incs.len() > INCS_KEPT {
            self.incs.pop_front();
        }
        let (at, pms) = RealMon::read(&self.map);
        let map = Arc::new(self.map.clone());
        self.maps.insert(self.map.epoch, (map, at, pms));
        true
    }

    /// As the daemon: maps older than the newest it holds are passed
    /// over (its map watch sends only newer ones), and a map past the
    /// next epoch starts every interval again (`seen_since`).
    fn inputs(
        &self,
        epoch: Epoch,
        seen: &mut Seen,
        striper: &Option<Arc<Striper>>,
        now_ms: u64,
    ) -> Option<Vec<Input>> {
        if seen.newest.is_some_and(|n| epoch <= n) {
            return None;
        }
        let (map, _, pms) = self.maps.get(&epoch)?;
        seen.since = seen_since(seen.newest, seen.since, epoch);
        seen.newest = Some(epoch);
        let pool = map.pools.get(&self.pool.id)?;
        Some(
            (0..pool.pg_num as usize)
                .map(|p| {
                    let st = striper.clone();
                    map_input(map, pool, pg_id(p), &pms[p], st, seen.since, now_ms)
                })
                .collect(),
        )
    }

    fn steer(&self, from: usize, p: usize, ask: Steer) -> Vec<Change> {
        let pg = pg_id(p);
        // An OSD not in a role that may steer is refused (it asks from
        // an older interval), as the monitors' auth check refuses it.
        if asks::may_steer(&self.map, &mut LazyPlacer::new(&self.map), pg, from as i32).is_err() {
            return vec![];
        }
        match ask {
            Steer::PgTemp(osds) => asks::pg_temp_changes(&self.map, pg, osds),
            Steer::PrimaryTemp(osd) => asks::primary_temp_changes(&self.map, pg, osd),
        }
    }

    fn judge(&self, from: usize, p: usize, ask: &RecordAsk) -> Judged {
        let refused = Judged {
            changes: vec![],
            held: false,
            late: false,
        };
        if ask.pg != pg_id(p) || asks::may_record(ask, from as i32, self.map.epoch).is_err() {
            return refused;
        }
        let items = [Gather::Records(vec![ask.clone()])];
        let (changes, held) = asks::gathered_changes(
            &self.map,
            &self.incs,
            &items,
            &mut LazyPlacer::new(&self.map),
        );
        let held = held
            .first()
            .and_then(Option::as_ref)
            .is_some_and(|h| h.contains(&ask.pg));
        Judged {
            changes,
            held,
            late: !held && asks::is_late(&self.map, &self.incs, ask),
        }
    }

    fn real(&self) -> bool {
        true
    }
}

/// The simulator's first monitor: a model of the map with its own
/// placement rule, kept so that the seeds that found bugs under it
/// replay their histories.
pub(crate) struct ModelMon {
    epoch: Epoch,
    up: [bool; OSDS],
    up_from: [Epoch; OSDS],
    toofull: [bool; OSDS],
    /// Per PG.
    pg_temp: Vec<Option<Vec<i32>>>,
    primary_temp: Vec<Option<i32>>,
    record: Vec<Option<WriteSetRecord>>,
    /// The epoch of each PG's last `pg mark-unfound-lost` (0: none).
    unfound_lost: Vec<Epoch>,
    /// Maps by epoch.
    maps: BTreeMap<Epoch, MapAt>,
    pool: Pool,
    /// Erasure-coded: positions are shards, a down OSD leaves a hole or
    /// is replaced by the spare.
    ec: bool,
    /// Shards a read needs (1 for a replicated pool).
    k: usize,
    /// Whether the spare takes a down OSD's position (when the set
    /// leaves one out: RS 2+1 on four OSDs).
    ec_spare: bool,
    /// Whether positions move while an OSD is down, as CRUSH's indep
    /// rules move them when retries collide (the thrash test saw acting
    /// [0, 1, 2, 3] become [3, 1, 2, 0]): with one OSD of a full set
    /// down, the OSDs after and before its position swap places, a data
    /// position with a parity one for Zigzag 2+2.
    ec_moves: bool,
    /// Every late record is refused while the PG's record is short, not
    /// only one that names none of its members (`LOLIGO_SIM_STRICT_LATE`).
    strict_late: bool,
}

impl ModelMon {
    pub fn new(pool: Pool, k: Option<usize>, ec_moves: bool, strict_late: bool) -> ModelMon {
        ModelMon {
            epoch: 0,
            up: [false; OSDS],
            up_from: [0; OSDS],
            toofull: [false; OSDS],
            pg_temp: vec![None; PGS],
            primary_temp: vec![None; PGS],
            unfound_lost: vec![0; PGS],
            record: vec![None; PGS],
            maps: BTreeMap::new(),
            pool,
            ec: k.is_some(),
            k: k.unwrap_or(1),
            ec_spare: true,
            ec_moves,
            strict_late,
        }
    }

    /// PG `p`'s primary: its primary_temp while that is in the acting
    /// set and up, else the acting set's first OSD.
    fn primary(&self, p: usize) -> Option<i32> {
        let acting = self.acting(p);
        match self.primary_temp[p] {
            Some(t) if acting.contains(&t) && self.up[t as usize] => Some(t),
            _ => primary_of(&acting),
        }
    }

    fn acting(&self, p: usize) -> Vec<i32> {
        if self.ec {
            // A pg_temp keeps positions: a member that is not up is a hole.
            if let Some(t) = &self.pg_temp[p] {
                let a: Vec<i32> = t
                    .iter()
                    .map(|&o| {
                        if o >= 0 && o != ITEM_NONE && self.up[o as usize] {
                            o
                        } else {
                            ITEM_NONE
                        }
                    })
                    .collect();
                if a.len() == self.pool.size as usize && a.iter().any(|&o| o != ITEM_NONE) {
                    return a;
                }
            }
            return self.crush_up(p);
        }
        if let Some(t) = &self.pg_temp[p] {
            let a: Vec<i32> = t.iter().copied().filter(|&o| self.up[o as usize]).collect();
            if !a.is_empty() {
                return a;
            }
        }
        self.crush_up(p)
    }

    /// CRUSH's set for PG `p`: the first `size` OSDs that are up, counting
    /// from OSD `p`.
    fn crush_up(&self, p: usize) -> Vec<i32> {
        if self.ec {
            // As CRUSH's indep rules: position i is OSD p + i while it is
            // up; the first down one is taken by the spare (the OSD after
            // the set) when there is one and it is up, the rest are holes.
            let size = self.pool.size as usize;
            let spare = (p + size) % OSDS;
            let mut spare_free = self.ec_spare && size < OSDS && self.up[spare];
            let mut set: Vec<i32> = (0..size)
                .map(|i| {
                    let o = (i + p) % OSDS;
                    if self.up[o] {
                        o as i32
                    } else if spare_free {
                        spare_free = false;
                        spare as i32
                    } else {
                        ITEM_NONE
                    }
                })
                .collect();
            let holes: Vec<usize> = (0..size).filter(|&i| set[i] == ITEM_NONE).collect();
            if self.ec_moves && size == OSDS && holes.len() == 1 {
                let j = holes[0];
                set.swap((j + 1) % size, (j + size - 1) % size);
            }
            return set;
        }
        (0..OSDS)
            .map(|i| (i + p) % OSDS)
            .filter(|&o| self.up[o])
            .map(|o| o as i32)
            .take(self.pool.size as usize)
            .collect()
    }

    /// Whether a map after epoch `as_of` may have moved PG `pg`, as the
    /// monitors judge it from their changes: any OSD going up or down
    /// (that may move every PG), or the PG's own acting set or primary
    /// (a pg_temp or primary_temp).
    fn moved_after(&self, pg: usize, as_of: Epoch) -> bool {
        (as_of + 1..=self.epoch).any(|e| {
            let (Some(a), Some(b)) = (self.maps.get(&(e - 1)), self.maps.get(&e)) else {
                return true;
            };
            a.up != b.up
                || a.up_from != b.up_from
                || a.acting[pg] != b.acting[pg]
                || a.primary[pg] != b.primary[pg]
        })
    }

    fn change(&mut self, c: Change) {
        let next = self.epoch + 1;
        let p = |pg: PgId| pg.ps as usize;
        match c {
            Change::OsdBoot { id, .. } => {
                self.up[id as usize] = true;
                self.up_from[id as usize] = next;
            }
            Change::OsdDown { id } => self.up[id as usize] = false,
            Change::OsdFullness { id, fullness } => {
                self.toofull[id as usize] = fullness >= Fullness::BackfillFull;
            }
            Change::PgTemp { pg, osds } => {
                self.pg_temp[p(pg)] = Some(osds).filter(|o| !o.is_empty());
            }
            Change::PrimaryTemp { pg, osd } => self.primary_temp[p(pg)] = osd,
            Change::RecordWriteSet { pg, record } => self.record[p(pg)] = Some(record),
            Change::PgMarkUnfoundLost { pg } => self.unfound_lost[p(pg)] = next,
            Change::OsdLost { id } => {
                for r in &mut self.record {
                    if let Some(rec) = r {
                        rec.osds.retain(|&m| m != id);
                        if members(&rec.osds).count() == 0 {
                            *r = None;
                        }
                    }
                }
            }
            other => panic!("the model monitor takes no {other:?}"),
        }
    }
}

impl Monitor for ModelMon {
    fn epoch(&self) -> Epoch {
        self.epoch
    }

    fn at(&self, epoch: Epoch) -> Option<&MapAt> {
        self.maps.get(&epoch)
    }

    fn commit(&mut self, changes: Vec<Change>) -> bool {
        if changes.is_empty() {
            return false;
        }
        for c in changes {
            self.change(c);
        }
        self.epoch += 1;
        let at = MapAt {
            acting: (0..PGS).map(|p| self.acting(p)).collect(),
            primary: (0..PGS).map(|p| self.primary(p)).collect(),
            primary_temp: self.primary_temp.clone(),
            pg_temp: self.pg_temp.clone(),
            record: self.record.clone(),
            unfound_lost: self.unfound_lost.clone(),
            crush: (0..PGS).map(|p| self.crush_up(p)).collect(),
            up: self.up,
            up_from: self.up_from,
            is_in: [true; OSDS],
            toofull: self.toofull,
        };
        self.maps.insert(self.epoch, at);
        true
    }

    /// Every map, in the order it arrives; a PG's interval ends when a
    /// member booted since it began.
    fn inputs(
        &self,
        epoch: Epoch,
        _seen: &mut Seen,
        striper: &Option<Arc<Striper>>,
        now_ms: u64,
    ) -> Option<Vec<Input>> {
        let at = self.maps.get(&epoch)?;
        let input = |p: usize| {
            let acting = at.acting[p].clone();
            let acting_up_from = members(&acting)
                .map(|o| at.up_from[o as usize])
                .max()
                .unwrap_or(0);
            let record = at.record[p].clone();
            let record_up = record
                .iter()
                .flat_map(|r| r.osds.iter().copied())
                .filter(|&o| at.up[o as usize])
                .collect();
            Input::Map {
                epoch,
                up: at.crush[p].clone(),
                acting_up_from,
                primary: at.primary[p].unwrap_or(-1),
                acting,
                pool: self.pool.clone(),
                record,
                record_up,
                toofull: members(&at.crush[p])
                    .chain(members(&at.acting[p]))
                    .filter(|&o| at.toofull[o as usize])
                    .collect(),
                // The model sets no flags and names no spares: its seeds
                // replay as found.
                holds: Default::default(),
                spares: vec![],
                striper: striper.clone(),
                primary_temp: at.primary_temp[p],
                unfound_lost: at.unfound_lost[p],
                now_ms,
            }
        };
        Some((0..PGS).map(input).collect())
    }

    fn steer(&self, _from: usize, p: usize, ask: Steer) -> Vec<Change> {
        let pg = pg_id(p);
        match ask {
            Steer::PgTemp(osds) => {
                let want = Some(osds.clone()).filter(|o| !o.is_empty());
                match self.pg_temp[p] != want {
                    true => vec![Change::PgTemp { pg, osds }],
                    false => vec![],
                }
            }
            Steer::PrimaryTemp(osd) => match self.primary_temp[p] != osd {
                true => vec![Change::PrimaryTemp { pg, osd }],
                false => vec![],
            },
        }
    }

    /// As the monitors do: a record naming a member that went down or
    /// booted again since its interval began is late; so is one whose
    /// interval has ended (the PG's acting set or primary moved since:
    /// judged when a change since the ask may have moved the PG) while
    /// the PG's record is short of k members, if it names none of them.
    fn judge(&self, _from: usize, p: usize, ask: &RecordAsk) -> Judged {
        let RecordAsk {
            record,
            as_of,
            acting,
            primary,
            ..
        } = ask;
        let gives_up = self.record[p].as_ref().is_some_and(|r| {
            r.members().count() < self.k
                && (self.strict_late || !r.members().any(|o| record.osds.contains(&o)))
        });
        let ended = gives_up
            && self.moved_after(p, *as_of)
            && (holes_as_minus_one(&self.acting(p)) != *acting
                || self.primary(p).unwrap_or(-1) != *primary);
        let late = ended
            || members(&record.osds)
                .any(|o| !self.up[o as usize] || self.up_from[o as usize] > record.interval);
        let (changes, held) = match &self.record[p] {
            _ if late => (vec![], false),
            Some(old) if old.interval > record.interval => (vec![], false),
            Some(old) if old == record => (vec![], true),
            _ => {
                let pg = pg_id(p);
                let record = record.clone();
                (vec![Change::RecordWriteSet { pg, record }], true)
            }
        };
        Judged {
            changes,
            held,
            late: ended,
        }
    }

    fn real(&self) -> bool {
        false
    }
}
