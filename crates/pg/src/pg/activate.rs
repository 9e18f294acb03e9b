//! Peering's last step, on the primary: once every member it asked has
//! answered, take the authoritative head from their infos, then either
//! catch this copy up first (its log is behind, it moved, or it is
//! mid-backfill: pull, take another's log, or hand the PG over) or
//! activate with the members' logs (each merges or is backfilled).
//!
//! It must never take a head below an acknowledged write: the head comes
//! from the recorded write set's members only (`authoritative_head`).

use super::{Effect, PeerInfo, Pg, Role};
use crate::msg::PeerMsg;
use loligo_store::ObjectStore;
use loligo_types::ops::Version;
use std::collections::BTreeMap;

/// What peering heard: each asked member's info (`None`: no copy), the
/// same with no copy as an empty log, this copy's own, and the head
/// taken from them.
pub(super) struct Heard {
    pub asked: BTreeMap<i32, Option<PeerInfo>>,
    pub infos: BTreeMap<i32, PeerInfo>,
    pub mine: PeerInfo,
    pub newest: Version,
}

/// Whether a copy with info `i` holds every object at head `newest`.
fn complete_at(i: &PeerInfo, newest: Version) -> bool {
    i.info.last_update == newest && i.missing == 0 && !i.backfill
}

impl Pg {
    /// Peering is done once every member asked has answered: activate,
    /// or catch this copy up first.
    pub(super) fn maybe_activate(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if !matches!(&self.role, Role::Peering { want, .. } if want.is_empty()) {
            return;
        }
        // Its own transactions from an earlier interval must be durable
        // first: reads follow at once, and the store must show all this
        // copy claims (an object pulled in the interval before was read at
        // its older version).
        if !self.settled() {
            return;
        }
        // The store is read for this copy's info only once its own
        // transactions of this interval are durable too: a merge earlier
        // in the interval may have rolled entries back in memory, and the
        // store shows them until it lands (on an EC pool, a peering
        // restarted by a map within the interval took the rolled-back head
        // from the store, and the primary activated at a head whose
        // objects it had just rolled back, losing an acknowledged write).
        if !self.synced && !self.settled_all() {
            return;
        }
        self.sync_with_store(s);
        let Role::Peering { infos, .. } = &self.role else {
            return;
        };
        let short = self.record_short();
        if let Some(osds) = self.record_unheard(infos, short) {
            return self.down_waiting_for(osds);
        }
        // No copy at all is an empty log: complete while the PG has never
        // been written, behind once it has.
        let asked = infos.clone();
        let infos: BTreeMap<i32, PeerInfo> = infos
            .iter()
            .map(|(o, i)| (*o, i.unwrap_or_default()))
            .collect();
        // The authoritative log is the longest among the recorded write
        // set's members: their logs are prefixes of one history. A copy
        // outside it that reaches further holds writes from a branch that
        // was never acknowledged, however new their epoch looks.
        let mine = PeerInfo {
            info: self.info,
            missing: self.lacks_beyond_unfound() as u64,
            backfill: self.backfill.is_some() || self.ecs.moved,
            moved_shard: self.moved_shard(),
            shard: None,
            leases: super::LeasesLeft::default(),
        };
        tracing::debug!(
            "pg {}: peering in interval {}: acting {:?}, record {:?}, this copy {mine:?}, others {infos:?}",
            self.id,
            self.map.interval,
            self.map.acting,
            self.map.record
        );
        self.rec.record_few_whole = self.record_few_whole(&asked, &mine, short);
        let newest = match self.authoritative_head(&infos, &mine, short) {
            Ok(v) => v,
            Err(osds) => return self.down_waiting_for(osds),
        };
        let is_complete = |i: &PeerInfo| complete_at(i, newest);
        let complete: Vec<i32> = infos
            .iter()
            .filter(|(_, i)| is_complete(i))
            .map(|(o, _)| *o)
            .collect();
        if self.ec.is_some() {
            self.note_moved(&infos, &mine, newest);
        }
        // Copies outside the acting set said which shard they hold: their
        // shards are read as strays' (with OSDs declared lost, the only
        // other shard of an unacknowledged write was on a record member
        // out of the acting set that had not asked this primary yet, and
        // the write was rolled back while the backfill targets took only
        // the log, which left the object on one shard).
        let strays: Vec<(i32, usize)> = infos
            .iter()
            .filter(|(o, _)| self.ec.is_some() && !self.map.acting.contains(o))
            .filter_map(|(o, i)| Some((*o, i.shard? as usize)))
            .collect();
        self.rec.strays.extend(strays.iter().copied());
        self.rec.empty_strays = infos
            .iter()
            .filter(|(o, _)| self.ec.is_some() && !self.map.acting.contains(o))
            .filter(|(_, i)| i.shard.is_none() && i.info.objects == 0 && is_complete(i))
            .map(|(o, _)| *o)
            .collect();
        let heard = Heard {
            asked,
            infos,
            mine,
            newest,
        };
        if !is_complete(&heard.mine) {
            return self.catch_up_first(s, heard, complete, fx);
        }
        self.activate_members(s, &heard, complete, strays, fx);
    }

    /// The recorded write set's members not heard from, if peering must
    /// wait for them.
    /// Every acknowledged write is on each member of the
    /// recorded write set: without one of them, any answer could be
    /// stale. Erasure-coded, with members declared lost until fewer
    /// than k are left: the ones left are all there is of its
    /// acknowledged writes, and every one of them must answer (what
    /// they hold together with the others' shards is all that can be
    /// read).
    fn record_unheard(
        &self,
        infos: &BTreeMap<i32, Option<PeerInfo>>,
        short: bool,
    ) -> Option<Vec<i32>> {
        if let Some(record) = &self.map.record {
            let heard = |o: &i32| *o == self.whoami || infos.get(o).is_some_and(Option::is_some);
            let unheard = record.osds.iter().filter(|o| !heard(o)).count();
            if unheard == record.osds.len() || (short && unheard > 0) {
                return Some(record.osds.clone());
            }
        }
        None
    }

    /// Erasure-coded, the record at k members or more: every member it
    /// has left answered with a copy, and fewer than k of those copies
    /// are whole (where they stand or at another position), the others
    /// mid-backfill (`Pg::may_go_on`).
    fn record_few_whole(
        &self,
        asked: &BTreeMap<i32, Option<PeerInfo>>,
        mine: &PeerInfo,
        short: bool,
    ) -> bool {
        match (&self.ec, &self.map.record) {
            (Some(st), Some(r)) if !short => {
                let member = |o: &i32| match *o == self.whoami {
                    true => Some(mine),
                    false => asked.get(o).and_then(Option::as_ref),
                };
                let members: Vec<Option<&PeerInfo>> =
                    r.osds.iter().filter(|&&o| o >= 0).map(member).collect();
                members.iter().all(Option::is_some)
                    && (members.iter().flatten())
                        .filter(|i| !i.backfill || i.moved_shard.is_some())
                        .count()
                        < st.k()
            }
            _ => false,
        }
    }

    /// The authoritative head: the newest version the recorded write
    /// set's members hold (erasure-coded: that k of them hold), or the
    /// OSDs peering must wait for (`Err`).
    fn authoritative_head(
        &self,
        infos: &BTreeMap<i32, PeerInfo>,
        mine: &PeerInfo,
        short: bool,
    ) -> Result<Version, Vec<i32>> {
        let authority =
            |o: &i32| short || self.map.record.as_ref().is_none_or(|r| r.osds.contains(o));
        let mut heads: Vec<Version> = infos
            .iter()
            .chain([(&self.whoami, mine)])
            .filter(|(o, _)| authority(o))
            .map(|(_, i)| i.info.last_update)
            .collect();
        heads.sort_unstable_by(|a, b| b.cmp(a));
        let newest = match &self.ec {
            None => heads.first().copied().unwrap_or_default(),
            // Erasure-coded: a write is readable only from k shards, so the
            // head is the newest version k of them hold. An acknowledged
            // write is on every member of the record, so it is among them;
            // newer entries reached fewer than k shards, were never
            // acknowledged, and are rolled back where they landed.
            Some(st) => match heads.get(st.k() - 1) {
                // With the record short of k members (or emptied) there is
                // no acknowledged write left to keep: when no copy that can
                // give its log (mid-backfill ones refuse) stands at that
                // head, the nearest newer one that can is taken, and
                // objects no k copies hold at its versions are given up
                // (with OSDs declared lost, the only copy at the head was
                // mid-backfill, and the PG asked for pg_temps forever).
                // So too with every member the record has left here and
                // fewer than k of them whole (`may_go_on`), where nothing
                // acknowledged is given up: each acknowledged write is on
                // all of them, so the head taken is never below one.
                // With none, the nearest acting copy mid-backfill (not
                // moved), which goes on from its own log (with OSDs
                // declared lost, the copy at the head was a stray's).
                // The record members left (short of k) hold all that is
                // left of its acknowledged writes: the head is never below
                // the lowest of theirs that have history and can give
                // their logs. Copies with an empty log (a new OSD's) hold
                // no version of that history (after OSDs were declared
                // lost, with the record's one member left, whole at 86'22,
                // and two empty copies, the head was taken as 0'0, the
                // version k copies "held"; the empty primary recorded
                // itself and the other empty copy, and the member's
                // history was past the head for good). With no record
                // (emptied), or no member with history that can give its
                // log, the version k copies reach stands: the PG goes on
                // from whatever is there (counting every copy's history,
                // as a first try of this did, kept one off the record that
                // no k shards could back, and the PG waited for good).
                Some(&v) if self.may_go_on() => {
                    let copies = infos.iter().chain([(&self.whoami, mine)]);
                    // A copy mid-backfill goes on only at its own
                    // position: one whose OSD moved (its backfill begun
                    // at another position, or not begun) never does, and
                    // a head at its version left no copy to go on from
                    // (with OSDs declared lost, the copy at the k-th
                    // newest version had moved mid-backfill, the one in
                    // place was past it, and the PG waited for good).
                    let gives_log = |o: &i32, i: &PeerInfo, whole: bool| match whole {
                        true => !i.backfill,
                        false => self.map.acting.contains(o) && !self.copy_moved(*o, i),
                    };
                    let member =
                        |o: &i32| self.map.record.as_ref().is_some_and(|r| r.osds.contains(o));
                    let floor = copies
                        .clone()
                        .filter(|(o, i)| member(o) && i.info.last_update != Version::default())
                        .filter(|(o, i)| gives_log(o, i, true) || gives_log(o, i, false))
                        .map(|(_, i)| i.info.last_update)
                        .min();
                    let v = floor.map_or(v, |h| h.max(v));
                    let nearest = |whole: bool| {
                        copies
                            .clone()
                            .filter(|(o, i)| gives_log(o, i, whole))
                            .map(|(_, i)| i.info.last_update)
                            .filter(|h| *h >= v)
                            .min()
                    };
                    nearest(true).or_else(|| nearest(false)).unwrap_or(v)
                }
                Some(v) => *v,
                None => {
                    let osds = self.map.record.as_ref().map_or_else(
                        || {
                            self.map
                                .acting
                                .iter()
                                .copied()
                                .filter(|&o| o >= 0)
                                .collect()
                        },
                        |r| r.osds.clone(),
                    );
                    return Err(osds);
                }
            },
        };
        Ok(newest)
    }

    /// Erasure-coded: which acting copies hold another position's shard,
    /// whole at the head or at least at it.
    fn note_moved(&mut self, infos: &BTreeMap<i32, PeerInfo>, mine: &PeerInfo, newest: Version) {
        // The shard a moved member holds: a whole copy's, or (at the
        // head, complete or not) a mid-backfill copy's, as its shard
        // record says (with positions moving and OSDs declared lost,
        // the record's one member left was mid-backfill at the head,
        // its OSD had moved, every other copy was empty, and nobody
        // sent it back to its shard's position, where it goes on from
        // its own log).
        let held = |o: &i32, i: &PeerInfo, whole: bool| {
            let mid = match *o == self.whoami {
                true => self.ecs.held_shard.filter(|_| self.ecs.moved),
                false => self.held_elsewhere(*o, i),
            };
            i.moved_shard.or(mid.filter(|_| !whole))
        };
        let moved = |whole: bool| {
            infos
                .iter()
                .chain([(&self.whoami, mine)])
                .filter(|(o, i)| {
                    self.map.acting.contains(o)
                        && match whole {
                            true => i.info.last_update == newest && i.missing == 0,
                            false => i.info.last_update >= newest,
                        }
                })
                .filter_map(|(o, i)| Some((*o, held(o, i, whole)? as usize)))
                .collect()
        };
        let (whole, at_head): (BTreeMap<i32, usize>, BTreeMap<i32, usize>) =
            (moved(true), moved(false));
        // A position whose member holds its own shard there keeps it: a
        // moved copy of that shard at the head does not go back to it (two
        // copies mid-backfill held one shard, and each primary in turn put
        // the one elsewhere back in place of the other, for good).
        let in_place = |shard: usize| match self.map.acting.get(shard) {
            Some(&o) if o == self.whoami => self.ecs.held_shard.map(usize::from) == Some(shard),
            Some(o) => infos.get(o).is_some_and(|i| {
                i.moved_shard.is_none() && i.shard.map(usize::from) == Some(shard)
            }),
            None => false,
        };
        self.rec.moved_complete = whole;
        self.rec.moved_at_head = (at_head.into_iter())
            .filter(|&(_, shard)| !in_place(shard))
            .collect();
    }

    /// This copy is not complete at the head: take another's log and pull
    /// what it lacks, go on from its own, or hand the PG over.
    fn catch_up_first(
        &mut self,
        s: &dyn ObjectStore,
        heard: Heard,
        complete: Vec<i32>,
        fx: &mut Vec<Effect>,
    ) {
        let Heard {
            asked,
            infos,
            mine,
            newest,
        } = heard;
        let (complete, log_source) = self.log_sources(&infos, newest, &complete);
        let asked = match self.ec_goes_on(s, asked, &infos, &mine, newest, log_source, fx) {
            Ok(()) => return,
            Err(asked) => asked,
        };
        // (Every log source is at the head.)
        let Some(from) = log_source else {
            // Only this copy is at the head, and it moved or is
            // mid-backfill: it hands over (with positions moving, the
            // one other record member was past the head, and the PG
            // stayed down with every OSD up).
            // Replicated, and every member of the recorded write set
            // answered (or each was declared lost): no copy that
            // holds every object at the head is coming back.
            if self.ec.is_none() && self.record_all_heard(&asked) {
                return self.pull_what_is_left(s, newest, &mine, asked, fx);
            }
            if mine.backfill && mine.info.last_update == newest {
                return self.hand_over(complete, fx);
            }
            // Nobody holds every object at the authoritative head (the
            // copies that did are away): wait for one to return.
            tracing::debug!(
                "pg {}: down: no log source at head {newest} (mine {mine:?}, peers {infos:?})",
                self.id
            );
            return self.wait_for_record();
        };
        // A member has writes or objects this primary lacks (or this
        // primary's log went another way): take that member's log and
        // pull what it lacks, unless it is mid-backfill (then, or if
        // the logs turn out not to overlap, it hands over).
        if mine.backfill {
            return self.hand_over(complete, fx);
        }
        let log_tid = self.take_tid();
        let msg = PeerMsg::GetLog {
            pg: self.id,
            from: self.whoami,
            ctx: self.rep_ctx(),
        };
        self.send(log_tid, from, msg, fx);
        self.role = Role::Pulling {
            from,
            complete,
            infos: asked,
            log_tid,
            pulls: BTreeMap::new(),
        };
    }

    /// Erasure-coded cases in which this copy goes on from its own log or
    /// hands over to a copy mid-backfill at the head (see the comments);
    /// `Err` with what it asked when none applies.
    #[allow(clippy::too_many_arguments)]
    fn ec_goes_on(
        &mut self,
        s: &dyn ObjectStore,
        asked: BTreeMap<i32, Option<PeerInfo>>,
        infos: &BTreeMap<i32, PeerInfo>,
        mine: &PeerInfo,
        newest: Version,
        log_source: Option<i32>,
        fx: &mut Vec<Effect>,
    ) -> Result<(), BTreeMap<i32, Option<PeerInfo>>> {
        // Erasure-coded, with the record short of k members (or every
        // member it has left here, fewer than k of them whole:
        // `may_go_on`), and no other copy whole at the head: this copy
        // goes on from its own log if it reaches the head (taken as it
        // is if mid-backfill, as a replicated PG's `adopt_backfilled`),
        // pulling what it lacks and giving up what no k up copies hold
        // (only with the record short; else they are unfound); else it hands
        // over to an acting copy mid-backfill at the head (with OSDs
        // declared lost, only such copies reached the head; they
        // refuse to give their logs, and the PG asked for pg_temps
        // forever).
        let whole_at_head = infos
            .iter()
            .any(|(_, i)| !i.backfill && i.info.last_update == newest);
        if self.ec.is_some() && self.may_go_on() && !whole_at_head {
            if mine.info.last_update == newest && !self.ecs.moved {
                {
                    self.ec_pull_own(s, asked, fx);
                    return Ok(());
                }
            }
            // Not one whose OSD moved: it would not go on either, and
            // may hand the PG to another such copy (with positions
            // moving and OSDs declared lost, when `ec_temp_unstick`'s
            // rule was first tried inside `ec_temp_step`: two moved
            // copies mid-backfill at the head handed the PG to each
            // other for good). Such copies go back to their shards'
            // positions instead (`hand_over`).
            let backfilling: Vec<i32> = infos
                .iter()
                .filter(|(o, i)| {
                    i.backfill
                        && !self.copy_moved(**o, i)
                        && i.info.last_update == newest
                        && self.map.acting.contains(o)
                })
                .map(|(o, _)| *o)
                .collect();
            if !backfilling.is_empty() {
                {
                    self.hand_over(backfilling, fx);
                    return Ok(());
                }
            }
        }
        // Erasure-coded, at or past the head, with no whole copy at it
        // and no log source but copies mid-backfill (which refuse their
        // logs): this copy's own log up to the head is the history the
        // head's k copies share, and it goes on from there, pulling
        // what it lacks (with OSDs declared lost, a rollback of a
        // write never acknowledged was torn, the members that took it
        // were past the head, and the PG stayed down with every OSD
        // up; and when the record's one other member was mid-backfill
        // at the head, the primary asked it for its log for good).
        // Only when each object it lacks is at a version its log
        // names: one at a version the log no longer names only a copy
        // at the head can give (else pulling goes round for good).
        // Past the head, it first rolls its own entries past it back,
        // which only a copy sure they were never acknowledged may do:
        // every record member answered (on an EC pool, a primary whose
        // only record company was mid-backfill rolled back a write
        // that it, a member off the record and a record member yet to
        // answer held). The head is then the record's: an entry past
        // it is on fewer than k of them, and an acknowledged write is
        // on every one, so copies off the record past it hold nothing
        // acknowledged either (with OSDs declared lost, a rollback's
        // write-back was durable on every acting member, but its
        // primary crashed before it was recorded; the one other record
        // member was mid-backfill at the old head, and with others
        // past the head too, nobody went on).
        let refuses = |o: &i32| {
            infos
                .get(o)
                .is_some_and(|i| i.backfill && i.moved_shard.is_none())
        };
        if self.ec.is_some()
            && !whole_at_head
            && log_source.as_ref().is_none_or(refuses)
            && mine.info.last_update >= newest
            && !mine.backfill
            && self.missing.values().all(|v| v.v > 0)
        {
            if mine.info.last_update == newest {
                {
                    self.ec_pull_own(s, asked, fx);
                    return Ok(());
                }
            }
            if self.record_all_heard(&asked) {
                match self.rewind_own(s, newest, fx) {
                    Ok(()) => {
                        self.ec_pull_own(s, asked, fx);
                        return Ok(());
                    }
                    Err(e) => tracing::debug!("pg {}: not rolled back: {e}", self.id),
                }
            }
        }
        Err(asked)
    }

    /// The members a copy behind may take the log from, best first, and
    /// the one it asks (`None`: none can give it).
    /// Erasure-coded: a member whose log reaches the head is enough
    /// to take the log from, objects it lacks or not (each object
    /// is rebuilt from whichever shards hold it; the only member at
    /// the head may itself be recovering, and the PG would stay
    /// down with every OSD up).
    /// After them, acting members whose logs reach past the head:
    /// never a source of the log, but a primary_temp may go to one
    /// (as primary it rolls its extra entries back; the only member
    /// at the head may be a stray).
    /// Last, members at the head whose copies moved to another
    /// position or are mid-backfill: their objects are not their
    /// position's, but their logs are the PG's history all the
    /// same, and the shards they hold are read by their labels
    /// (with positions moving, the only members at the head had
    /// both moved, the one other member was past it, and the PG
    /// stayed down with every OSD up). Never a target of a
    /// hand-over.
    fn log_sources(
        &self,
        infos: &BTreeMap<i32, PeerInfo>,
        newest: Version,
        complete: &[i32],
    ) -> (Vec<i32>, Option<i32>) {
        if self.ec.is_some() {
            // Those that lack nothing first: a hand-over to one that
            // lacks what this copy cannot pull either comes back
            // (with OSDs declared lost, two members each lacking the
            // one object no k shards held handed the PG to each other
            // for good, while a third held all of it).
            let mut at_head: Vec<(&i32, &PeerInfo)> = infos
                .iter()
                .filter(|(_, i)| i.info.last_update == newest && !i.backfill)
                .collect();
            at_head.sort_by_key(|(_, i)| i.missing > 0);
            let at_head = at_head.into_iter().map(|(o, _)| *o);
            let past_head = infos
                .iter()
                .filter(|(o, i)| {
                    i.info.last_update > newest && !i.backfill && self.map.acting.contains(o)
                })
                .map(|(o, _)| *o);
            let c: Vec<i32> = at_head.chain(past_head).collect();
            let log_source = c
                .first()
                .copied()
                .filter(|o| infos.get(o).is_some_and(|i| i.info.last_update == newest))
                .or_else(|| {
                    // A moved copy before a mid-backfill one: the
                    // latter refuses to give its log (its entries may
                    // be log-only, the objects not there), and asking
                    // it first left the PG handed back and forth for
                    // good (with positions moving, two members past
                    // the head handed it to each other).
                    let behind = infos
                        .iter()
                        .filter(|(_, i)| i.info.last_update == newest && i.backfill);
                    behind
                        .clone()
                        .find(|(_, i)| i.moved_shard.is_some())
                        .or_else(|| behind.clone().next())
                        .map(|(o, _)| *o)
                });
            (c, log_source)
        } else {
            (complete.to_vec(), complete.first().copied())
        }
    }

    /// This copy is complete at the head: every other member gets the
    /// authoritative log, the write set is recorded, and the PG activates.
    fn activate_members(
        &mut self,
        s: &dyn ObjectStore,
        heard: &Heard,
        complete: Vec<i32>,
        strays: Vec<(i32, usize)>,
        fx: &mut Vec<Effect>,
    ) {
        let (infos, newest) = (&heard.infos, heard.newest);
        let is_complete = |i: &PeerInfo| complete_at(i, newest);
        // Erasure-coded: moved members whose shards may be needed go back
        // to their shards' positions before any is relabeled.
        if let Some(osds) = self.moved_back_before_activating(&complete, &strays, infos) {
            self.ask_pg_temp(osds, fx);
            return self.ec_behind("moved members go back to their shards' positions");
        }
        // Nor that: such members wait outside the write set, read as
        // strays of the shards they hold, until k members are whole at
        // their positions (`moved_to_wait`).
        let wait = self.moved_to_wait(&complete, infos);
        // Every other member gets the authoritative log: one whose log
        // overlaps it merges and recovers the objects it lacks; one whose
        // log does not (or that is mid-backfill) is backfilled.
        let recoverable: Vec<i32> = self
            .map
            .acting
            .iter()
            .copied()
            .filter(|&o| o != self.whoami && o >= 0 && !wait.contains_key(&o))
            .filter(|o| infos.get(o).is_some_and(|i| !is_complete(i)))
            .collect();
        let mut write_set = vec![self.whoami];
        write_set.extend(complete.iter().filter(|o| self.map.acting.contains(o)));
        write_set.extend(&recoverable);
        self.reset_recovery(fx);
        self.rec.strays.extend(strays);
        self.rec.strays.extend(&wait);
        self.rec.waiting_moved = wait.into_keys().collect();
        for &o in &recoverable {
            self.rec.merging.insert(o, 0);
        }
        let osds = self.complete_of(&write_set);
        // Backfill targets are found only once their logs are answered:
        // until then every recovering member might count.
        // Erasure-coded: a record of fewer than k complete members could
        // never be peered from (a new primary takes the head k record
        // members hold) and would not hold every object's shards; such a
        // PG goes active without one, recovers, and records (and takes
        // writes) once k members are complete (a record naming recovering
        // members held log entries whose objects no record member had).
        // Nor while objects are unfound here: this copy is complete only
        // once their removals are durable (`ec_give_up`).
        let too_few =
            self.ec.as_ref().is_some_and(|st| osds.len() < st.k()) || !self.ecs.unfound.is_empty();
        let recorded = write_set.len() < self.min_size()
            || too_few
            || self
                .map
                .record
                .as_ref()
                .is_some_and(|r| r.interval == self.map.interval && r.osds == osds);
        self.role = Role::Activating {
            write_set,
            recorded,
        };
        self.lease_begin(fx);
        if !recorded {
            self.ask_record(osds, fx);
        }
        let log = self.drop_stale_log(s, fx);
        self.send_logs_with(s, log, fx);
        self.maybe_go_active(s, fx);
    }
}
