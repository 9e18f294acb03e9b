//! Peering, as the primary and members run it: intervals from maps,
//! the info queries, the write-set records, activation's end, and the
//! pg_temp and primary_temp a primary asks for.
//!
//! It must never let a primary serve before it has heard from a member
//! of the recorded write set.

use super::*;

impl Pg {
    /// Start a new interval under the current map (its acting set
    /// unchanged).
    pub(super) fn end_interval(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let Some(pool) = self.map.pool.clone() else {
            self.interval_ended = true;
            return;
        };
        let m = MapView {
            epoch: self.map.epoch,
            acting: self.map.acting.clone(),
            primary: self.map.primary,
            restarted: true,
        };
        self.on_map(s, m, pool, false, fx);
    }

    /// A member refused this primary's message because it holds the
    /// interval over: it saw the interval end in a map this copy skipped
    /// (maps can arrive out of order: one whose acting set changed and
    /// changed back was never seen here), or, having skipped maps itself,
    /// took its interval to start after the gap (`seen_since`). Sending
    /// again would be refused for good (a backfill target that skipped a
    /// map refused every chunk, and the PG waited in backfill_wait with
    /// every OSD up): a new interval peers again, under this copy's map if
    /// it is past the interval's start, else under the next one.
    pub(super) fn member_ended_interval(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if self.map.epoch > self.map.interval {
            return self.end_interval(s, fx);
        }
        self.interval_ended = true;
    }

    /// A map that leaves the interval as it was: peer again if min_size
    /// moved (the write set may now allow writes) or if the recorded write
    /// set's members came or went while this primary waits for them (a
    /// pulling primary too: it would peer against the old record's
    /// members once done, and wait for ones it never asked); take a
    /// record the map shows before its reply; ask again for what the map
    /// does not show.
    fn same_interval(
        &mut self,
        s: &dyn ObjectStore,
        min_size_changed: bool,
        record_changed: bool,
        fx: &mut Vec<Effect>,
    ) {
        let waiting_for_rw = matches!(
            self.role,
            Role::Peering { .. } | Role::Down { .. } | Role::Pulling { .. }
        );
        if self.is_primary() && (min_size_changed || (record_changed && waiting_for_rw)) {
            self.start_peering(s, fx);
        } else if let (Role::Activating { write_set, .. }, Some(record)) =
            (&self.role, &self.map.record)
        {
            // The record arrived with the map before the reply did.
            if record.interval == self.map.interval && record.osds == self.complete_of(write_set) {
                self.on_rw_recorded(s, self.map.interval, fx);
            }
        }
        // CRUSH's set may have moved under the pg_temp, and the map
        // shows what the monitors really hold (an ask may have lost a
        // race with an older one: ask again).
        self.maybe_clear_temp(fx);
        let shown = self.map.record.as_ref().map(|r| (r.interval, &r.osds));
        if shown.is_some_and(|(i, o)| {
            i == self.map.interval && Some(o) != self.rec.record_asked.as_ref()
        }) {
            self.rec.record_asked = None;
        }
        self.rerecord(fx);
    }

    pub(super) fn on_map(
        &mut self,
        s: &dyn ObjectStore,
        m: MapView,
        pool: Pool,
        record_changed: bool,
        fx: &mut Vec<Effect>,
    ) {
        let MapView {
            epoch,
            acting,
            primary,
            restarted,
        } = m;
        debug_assert!(
            epoch >= self.map.epoch,
            "pg {}: map epoch {epoch} after {}",
            self.id,
            self.map.epoch
        );
        self.map.epoch = epoch;
        let min_size_changed = self
            .map
            .pool
            .as_ref()
            .is_some_and(|p| p.min_size != pool.min_size);
        self.map.pool = Some(pool);
        if acting == self.map.acting
            && primary == self.map.primary
            && self.map.interval > 0
            && !restarted
        {
            return self.same_interval(s, min_size_changed, record_changed, fx);
        }
        // A new interval: writes in flight are abandoned (their clients
        // retry under the new map); queued ops are re-examined.
        self.map.interval = epoch;
        self.interval_ended = false;
        self.lease.new_interval();
        self.map.acting = acting;
        self.map.primary = primary;
        self.reset_recovery(fx);
        self.abandon_gathers(epoch, fx);
        // Roots are compared again once the new interval is clean.
        self.scrub.asked.clear();
        self.scrub.differ.clear();
        self.scrub.next_ms = self.now_ms + self.scrub_interval_ms;
        self.mend.new_interval();
        self.scrub_new_interval(fx);
        // (Copies of writes of earlier intervals stay until their objects
        // are written again.)
        self.ecs.rb_live.clear();
        for (_, f) in std::mem::take(&mut self.ops.inflight) {
            if let Some(token) = f.token {
                fx.push(reply(
                    token,
                    Err(OpError::WrongPrimary { epoch }),
                    f.version,
                    epoch,
                ));
            }
        }
        self.drop_reads(fx);
        let queued: Vec<Pending> = std::mem::take(&mut self.ops.busy)
            .into_values()
            .flatten()
            .collect();
        self.ops.waiting.extend(queued);
        if self.is_primary() {
            self.start_peering(s, fx);
        } else {
            self.role = if self.map.acting.contains(&self.whoami) {
                Role::Replica
            } else {
                Role::Stray
            };
            for p in std::mem::take(&mut self.ops.waiting) {
                fx.push(reply(
                    p.token,
                    Err(OpError::WrongPrimary { epoch }),
                    Version::default(),
                    epoch,
                ));
            }
            self.rerun_lists(s, fx);
        }
        // Writes from the old primary that wait here are judged again
        // under this map.
        self.rerun_rep_waiting(s, fx);
    }

    pub(super) fn start_peering(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        self.synced = false;
        // (Pulls of what is left end with the peering that chose them.)
        self.rec.lost = None;
        self.rec.lost_retry = false;
        self.rec.ask_again_ms = 0;
        // (A pull that failed for good in an earlier round may work now.)
        self.ecs.unfound.clear();
        self.rec.pull_doubt.clear();
        self.rec.pull_tries.clear();
        self.rec.pull_never_took.clear();
        // The acting members, and the recorded write set's members that
        // are up (one of them has every acknowledged write).
        let want: BTreeSet<i32> = self
            .map
            .acting
            .iter()
            .chain(&self.map.record_up)
            .copied()
            .filter(|&o| o != self.whoami && o >= 0)
            .collect();
        for &to in &want {
            self.query_info(to, fx);
        }
        self.lease.peering();
        self.role = Role::Peering {
            want,
            infos: BTreeMap::new(),
        };
        self.peer_asked_ms = self.now_ms;
        self.maybe_activate(s, fx);
    }

    /// Once per peering, with this copy's own transactions durable: take
    /// the info on disk if it is ahead (replica writes went straight to
    /// the store while this OSD was not primary; memory may also be ahead
    /// by writes in flight here: the newer is kept, so that no version is
    /// ever handed out twice), and index the log's request ids. Not
    /// before they are durable: a merge that rolled writes back is in
    /// memory first, and the store would bring them back (a rolled-back
    /// write came back as the PG's head, one no other copy had, and the PG
    /// stayed down).
    pub(super) fn sync_with_store(&mut self, s: &dyn ObjectStore) {
        if self.synced {
            return;
        }
        self.synced = true;
        if let Ok(Some(i)) = stored_info(s, self.coll) {
            if i.last_update > self.info.last_update {
                self.info = i;
            }
        }
        self.load_recent(s);
    }

    pub(super) fn on_info(
        &mut self,
        s: &dyn ObjectStore,
        from: i32,
        interval: Epoch,
        info: Option<PeerInfo>,
        fx: &mut Vec<Effect>,
    ) {
        if interval != self.map.interval {
            return;
        }
        let info = info.map(|i| self.against_acting(from, i));
        if let Role::Peering { want, infos } = &mut self.role {
            if want.remove(&from) {
                let left = info.map(|i| i.leases).unwrap_or_default();
                self.lease.heard(from, &left, self.now_ms);
                infos.insert(from, info);
            }
        }
        self.maybe_activate(s, fx);
    }

    pub(super) fn on_rw_recorded(
        &mut self,
        s: &dyn ObjectStore,
        interval: Epoch,
        fx: &mut Vec<Effect>,
    ) {
        if interval != self.map.interval {
            return;
        }
        let write_set = match &mut self.role {
            Role::Activating {
                write_set,
                recorded,
            } => {
                *recorded = true;
                write_set.clone()
            }
            Role::Primary { write_set } => write_set.clone(),
            _ => return,
        };
        // What was asked, not what is complete now: a member may have
        // completed since, and then needs its own record.
        let osds = self
            .rec
            .record_asked
            .clone()
            .unwrap_or_else(|| self.complete_of(&write_set));
        self.map.record = Some(WriteSetRecord { interval, osds });
        self.maybe_go_active(s, fx);
        self.rerecord(fx);
        if self.ec.is_some() {
            // Writes that waited for a record of k complete members.
            self.rerun_waiting(s, fx);
        }
    }

    /// The ask to record `osds` as this interval's write set.
    pub(super) fn record_ask(&self, osds: Vec<i32>) -> Effect {
        Effect::RecordWriteSet(RecordAsk {
            pg: self.id,
            record: WriteSetRecord {
                interval: self.map.interval,
                osds,
            },
            as_of: self.map.epoch,
            acting: self.map.acting.clone(),
            primary: self.map.primary,
        })
    }

    /// The members of `write_set` whose copy is complete (this primary
    /// first): the ones a record may name.
    pub(super) fn complete_of(&self, write_set: &[i32]) -> Vec<i32> {
        write_set
            .iter()
            .copied()
            .filter(|o| {
                !self.rec.merging.contains_key(o)
                    && !self.rec.missing.contains_key(o)
                    && !self.rec.backfill.contains_key(o)
            })
            .collect()
    }

    /// Activating -> primary once the write set is on record and every
    /// recovering member has merged the log (so its missing set is known
    /// before any write reaches it).
    pub(super) fn maybe_go_active(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let Role::Activating {
            write_set,
            recorded,
        } = &self.role
        else {
            return;
        };
        if !*recorded || !self.rec.merging.is_empty() {
            return;
        }
        self.role = Role::Primary {
            write_set: write_set.clone(),
        };
        // Objects no k up copies hold go first (ops on them wait). One
        // that cannot be removed now is still missing here: the PG peers
        // again rather than serve as if this copy held it (on an EC pool
        // with positions moving and OSDs declared lost, a read error left
        // it out, and recovery pushed members its absence with no log
        // entry).
        // One rolled back stays unfound here until its older version is
        // written back (`revert_decoded`): this copy lacks it meanwhile, so
        // ops on it wait and recovery leaves it alone (with OSDs declared
        // lost, recovery pushed the primary's own older copy as the head,
        // and a retry of the write being rolled back was answered as
        // done).
        for (name, fate) in std::mem::take(&mut self.ecs.unfound) {
            if matches!(fate, erasure::Unfound::RevertTo(_)) {
                self.ecs.unfound.insert(name.clone(), fate);
            }
            if !self.settle_unfound(s, name, fate, fx) {
                return self.ec_behind("an unfound object could not be given up");
            }
        }
        self.activate(s, fx);
        self.recover_some(s, fx);
        self.backfill_some(s, fx);
        self.rerecord(fx);
        self.maybe_clear_temp(fx);
    }

    /// Erasure-coded, and the recorded write set is down to fewer than k
    /// members (the others were declared lost): no k of its copies hold
    /// the acknowledged writes any more. The PG goes on with whatever
    /// k up copies hold, and gives up objects no k of them hold.
    pub(super) fn record_short(&self) -> bool {
        let Some(st) = &self.ec else {
            return false;
        };
        self.map
            .record
            .as_ref()
            .is_some_and(|r| r.members().count() < st.k())
    }

    /// Ask the monitors to record the complete members again once more of
    /// them are (a member finished recovery).
    pub(super) fn rerecord(&mut self, fx: &mut Vec<Effect>) {
        let Role::Primary { write_set } = &self.role else {
            return;
        };
        if self.serving(write_set) < self.min_size() {
            return;
        }
        let osds = self.complete_of(write_set);
        if self.ec.as_ref().is_some_and(|st| osds.len() < st.k()) {
            return;
        }
        // Not while an unfound object's removal is on its way: until it
        // is durable, this copy still lacks the object. Nor once a member
        // said the interval is over: a write it refused is not on it.
        if self.interval_ended
            || !self.ecs.unfound.is_empty()
            || self.ops.inflight.values().any(|f| f.token.is_none())
        {
            return;
        }
        let held = self
            .map
            .record
            .as_ref()
            .is_some_and(|r| r.interval == self.map.interval && r.osds == osds);
        if !held && self.rec.record_asked.as_ref() != Some(&osds) {
            self.ask_record(osds, fx);
        }
    }

    /// Ask the monitors to record `osds` as this interval's write set,
    /// once every member knows the leases this primary waits out (until
    /// then it is held: see `lease`).
    pub(super) fn ask_record(&mut self, osds: Vec<i32>, fx: &mut Vec<Effect>) {
        if !self.lease_told() {
            self.rec.record_held = Some(osds);
            return;
        }
        self.rec.record_held = None;
        self.rec.record_asked = Some(osds.clone());
        fx.push(self.record_ask(osds));
    }

    /// Ask for the write set held by `ask_record` if every member knows
    /// now.
    pub(super) fn ask_held_record(&mut self, fx: &mut Vec<Effect>) {
        if self.rec.record_held.is_none() || !self.lease_told() {
            return;
        }
        if let Some(osds) = self.rec.record_held.take() {
            self.ask_record(osds, fx);
        }
    }

    /// While a pg_temp holds: first bring CRUSH's members into the acting
    /// set (so recovery reaches them), then drop the pg_temp once they are
    /// all complete here: CRUSH's primary then takes over with nothing
    /// left to recover.
    pub(super) fn maybe_clear_temp(&mut self, fx: &mut Vec<Effect>) {
        if !self.rec.waiting_moved.is_empty() {
            // (Moved members wait: the PG peers again before any temp
            // goes.)
            return self.waiting_moved_done();
        }
        let Role::Primary { write_set } = &self.role else {
            return;
        };
        if self.ec.is_some() {
            // Erasure-coded: a primary_temp goes once the primary without
            // it holds every object: the acting set's first member, a
            // pg_temp's if one holds (with positions moving, CRUSH's first
            // OSD held the primary_temp while a pg_temp named another
            // first, took it for stale and dropped it, and the two handed
            // the PG back and forth for good).
            let natural = self.map.acting.iter().copied().find(|&o| o >= 0);
            let settled = self.rec.nothing_left();
            let done = settled && natural.is_some_and(|c| write_set.contains(&c));
            // One in effect goes once that primary is complete; one not
            // in effect (its OSD left the set) goes at once.
            let stale = self.map.primary_temp.is_some() && natural == Some(self.whoami);
            let in_effect = natural.is_some_and(|c| c != self.whoami);
            if ((in_effect && done) || stale) && !self.rec.primary_temp_cleared {
                self.rec.primary_temp_cleared = true;
                self.rec.temp_asked_ms = self.now_ms;
                fx.push(Effect::RequestPrimaryTemp { osd: None });
            }
            // A pg_temp (a stray or moved members put back at their
            // shards' positions) walks toward CRUSH's set: see
            // `ec_temp_step`.
            if self.map.acting == self.map.up || self.map.up.is_empty() {
                return;
            }
            let k = self.ec.as_ref().map_or(1, |st| st.k());
            let spares = &self.map.spares;
            let next = erasure::ec_temp_step(&self.map.acting, &self.map.up, k, settled, spares)
                .or_else(|| {
                    settled
                        .then(|| {
                            erasure::ec_temp_unstick(&self.map.acting, &self.map.up, k, spares)
                        })
                        .flatten()
                });
            if let Some(osds) = next {
                self.ask_pg_temp(osds, fx);
            }
            return;
        }
        if self.map.up.is_empty() || self.map.up == self.map.acting {
            return;
        }
        let absent: Vec<i32> = self
            .map
            .up
            .iter()
            .copied()
            .filter(|o| !self.map.acting.contains(o))
            .collect();
        let osds = if !absent.is_empty() {
            let mut osds = self.map.acting.clone();
            osds.extend(absent);
            osds
        } else if self.rec.nothing_left() && self.map.up.iter().all(|o| write_set.contains(o)) {
            Vec::new()
        } else {
            return;
        };
        self.ask_pg_temp(osds, fx);
    }

    /// Ask the monitors for pg_temp `osds` (empty: drop it), unless this
    /// PG asked for that already.
    /// Down, erasure-coded, under a pg_temp with holes whose CRUSH OSDs
    /// are free: the holes take them (`ec_temp_step`'s first rule, safe at
    /// any time: they join as backfill targets), so that the PG can reach
    /// the copies it needs. The walk toward CRUSH's set runs only while
    /// the PG is active; a pg_temp that left too few members to activate
    /// (its other members gone, as OSDs declared lost) held the PG down
    /// for good with every OSD up.
    pub(super) fn down_fill_holes(&mut self, fx: &mut Vec<Effect>) {
        let Some(k) = self.ec.as_ref().map(|st| st.k()) else {
            return;
        };
        if !matches!(self.role, Role::Down { .. })
            || self.map.up.is_empty()
            || self.map.acting == self.map.up
        {
            return;
        }
        if let Some(osds) = erasure::ec_temp_step(&self.map.acting, &self.map.up, k, false, &[]) {
            self.ask_pg_temp(osds, fx);
        }
    }

    /// A pg_temp or primary_temp ask that no map has answered for a while
    /// is made again: the daemon sends an ask once, and one the monitors
    /// never took (their leader changed mid-commit, the call failed) left
    /// the PG remapped for good with every OSD up. An active primary asks
    /// again now (asking for what the map holds changes nothing); an
    /// erasure-coded primary behind forgets its ask, so that the pg_temp
    /// it asks for when it peers again goes out again (it asked once per
    /// interval, and with that ask lost, waited for good).
    pub(super) fn ask_temps_again(&mut self, fx: &mut Vec<Effect>) {
        if self.now_ms < self.rec.temp_asked_ms.saturating_add(TEMP_ASK_AGAIN_MS) {
            return;
        }
        match self.role {
            Role::Primary { .. } => {
                let pending = self.rec.temp_asked.take().is_some();
                let cleared = std::mem::take(&mut self.rec.primary_temp_cleared);
                if pending || cleared {
                    self.rec.temp_asked_ms = self.now_ms;
                    self.maybe_clear_temp(fx);
                }
            }
            Role::Behind if self.ec.is_some() && self.rec.temp_asked.take().is_some() => {
                self.rec.temp_asked_ms = self.now_ms;
            }
            _ => {}
        }
    }

    pub(super) fn ask_pg_temp(&mut self, osds: Vec<i32>, fx: &mut Vec<Effect>) {
        if self.rec.temp_asked.as_ref() != Some(&osds) {
            self.rec.temp_asked = Some(osds.clone());
            self.rec.temp_asked_ms = self.now_ms;
            fx.push(Effect::RequestPgTemp { osds });
        }
    }

    /// CRUSH's primary: the first OSD of the up set (holes skipped).
    pub(super) fn crush_primary(&self) -> Option<i32> {
        self.map.up.iter().copied().find(|&o| o >= 0)
    }

    /// Hand the primary role to a complete member (it recovers this copy):
    /// ask for a pg_temp that puts `complete` first.
    pub(super) fn hand_over(&mut self, complete: Vec<i32>, fx: &mut Vec<Effect>) {
        if let Some(k) = self.ec.as_ref().map(|e| e.k()) {
            // Positions are shards: a complete member becomes primary in
            // place (primary_temp), and recovers or backfills this copy.
            // It must be in the acting set (the first complete copy was a
            // stray's, the map ignored it, and the PG asked again
            // forever).
            if let Some(&osd) = complete.iter().find(|o| self.map.acting.contains(o)) {
                fx.push(Effect::RequestPrimaryTemp { osd: Some(osd) });
                return self.ec_behind("handing over with a primary_temp");
            }
            // None is, but members whose OSDs moved hold complete copies
            // of other shards: they go back to those shards' positions for
            // now (a pg_temp that swaps them with the positions' OSDs, as
            // Ceph's choose_acting keeps each shard where a complete copy
            // of it is), and the next interval peers from them (with
            // positions moving, two members swapped positions while the
            // others were mid-backfill, and the PG waited forever).
            if let Some(osds) = self.moved_back() {
                self.ask_pg_temp(osds, fx);
                return self.ec_behind("moved members go back to their shards' positions");
            }
            // With the record short of k (the PG goes on with what is
            // left), or every member it has left here and fewer than k of
            // them whole (`may_go_on`, as when the two left had swapped
            // positions and neither was whole), a moved member at or past
            // the head goes back too, whether it lacks objects or not,
            // mid-backfill or not (this copy included, as when the
            // record's one member left was mid-backfill at the head after
            // its OSD moved): its log is the history to go on from, and at
            // its shard's position it goes on from it, giving up what
            // nobody holds (with positions moving and OSDs declared lost,
            // the one copy past the head had been taken as it was, then
            // CRUSH moved it to another position; the primary,
            // mid-backfill, asked for pg_temps that named nobody, for
            // good). Only to a pg_temp that can walk back to CRUSH's set
            // (with OSDs declared lost, on a first version of this, a swap
            // left a hole whose CRUSH OSD sat elsewhere in the set, and
            // the pg_temp held for good).
            if self.may_go_on() {
                let moved = &self.rec.moved_at_head;
                let back = erasure::moved_back(&self.map.acting, &self.map.up, moved);
                if let Some(osds) = back.filter(|t| self.walks_back(t, k)) {
                    self.ask_pg_temp(osds, fx);
                    return self.ec_behind("a moved copy at the head goes back to its shard");
                }
            }
            // Nor that: a stray that holds a shard at the head goes back to
            // that shard's position for now (a pg_temp that keeps the
            // other positions, as Ceph's choose_acting does), and takes
            // the primary_temp in the next interval (the only complete
            // copy was a stray, and the PG waited forever).
            let spot = complete.iter().find_map(|o| {
                let shard = *self.rec.strays.get(o)?;
                let now = *self.map.acting.get(shard)?;
                (now < 0 || !complete.contains(&now)).then_some((shard, *o))
            });
            if let Some((shard, osd)) = spot {
                let mut osds: Vec<i32> = self.acting_as_temp();
                osds[shard] = osd;
                self.ask_pg_temp(osds, fx);
                return self.ec_behind("a stray's shard goes back to its position");
            }
            // Nor that: a complete stray whose copy is empty (the PG holds
            // no object at the head, so it is every shard's) takes this
            // copy's position for now, and is primary in the next interval
            // (with OSDs declared lost, no write was ever acknowledged;
            // this primary's log, past the head, was trimmed below its own
            // unacknowledged writes, so it could not roll them back and
            // needed a backfill; the one complete copy was an empty stray,
            // which no rule above puts in the acting set). Only to a
            // pg_temp that walks back to CRUSH's set, as above.
            let here = self.map.acting.iter().position(|&o| o == self.whoami);
            let empty = complete.iter().find(|o| self.rec.empty_strays.contains(o));
            if let (Some(at), Some(&osd)) = (here, empty) {
                let mut osds: Vec<i32> = self.acting_as_temp();
                osds[at] = osd;
                if self.walks_back(&osds, k) {
                    self.ask_pg_temp(osds, fx);
                    return self.ec_behind("an empty complete stray takes this copy's position");
                }
            }
            return self.ec_behind("no acting member is complete; asking for a pg_temp");
        }
        // Replicated, and nobody to hand over to (this copy, mid-backfill,
        // alone reaches the head): a pg_temp of the acting set as it is
        // would change nothing, and the PG would wait for a map that never
        // comes. It waits for the recorded write set's members instead,
        // and peers again as they come and go.
        if complete.is_empty() {
            tracing::debug!("pg {}: down: no complete copy to hand over to", self.id);
            return self.wait_for_record();
        }
        let size = self.map.pool.as_ref().map_or(1, |p| p.size as usize).max(1);
        let mut osds = complete.clone();
        osds.extend(self.map.acting.iter().filter(|o| !complete.contains(o)));
        osds.truncate(size);
        fx.push(Effect::RequestPgTemp { osds });
        self.role = Role::Behind;
        // Peers again (and asks again) if no map answers: the daemon sends
        // the ask once, and one the monitors never took left the PG
        // waiting for good with every OSD up.
        self.rec.ask_again_ms = self.now_ms.saturating_add(TEMP_ASK_AGAIN_MS);
    }

    /// Erasure-coded, a complete primary about to activate (`complete`:
    /// the other members complete at the head): the pg_temp that first
    /// puts moved members back at their shards' positions, if it should.
    ///
    /// A member whose OSD moved is backfilled at its new position, and
    /// the log it is sent relabels its copy: the shard it held is gone.
    /// Unless k members hold their own positions' shards of every object,
    /// some object may need that shard to be rebuilt (with positions
    /// moving, the primary and a moved member held the only two shards of
    /// an object, the moved one was backfilled, and the PG stayed down
    /// with every OSD up). A moved member whose shard's position a
    /// complete member holds stays (two members held shard 0, and each
    /// primary in turn put the other back at position 0, for good). Only a
    /// pg_temp that can walk back to CRUSH's set later (with one parity
    /// shard, a member put back at its shard's position could never leave
    /// it again).
    ///
    /// Complete copies out of the acting set (`strays`: OSD -> the shard
    /// it holds) go back too, in place of moved members whose relabel
    /// would cost a shard no whole member holds (`erasure::strays_back`):
    /// with OSDs declared lost, a primary whole alone backfilled a moved
    /// member holding the only up copy of a shard at the position of a
    /// shard a complete stray held; once the primary's OSD was declared
    /// lost too, the two left held one shard of an object between them,
    /// and the PG waited for good.
    pub(super) fn moved_back_before_activating(
        &self,
        complete: &[i32],
        strays: &[(i32, usize)],
        infos: &BTreeMap<i32, PeerInfo>,
    ) -> Option<Vec<i32>> {
        let k = self.ec.as_ref()?.k();
        let whole = self.whole_in_place(complete);
        if whole.len() >= k {
            return None;
        }
        let taken = |shard: usize| {
            self.map
                .acting
                .get(shard)
                .is_some_and(|o| whole.contains(o))
        };
        let moved: BTreeMap<i32, usize> = self
            .rec
            .moved_complete
            .iter()
            .filter(|&(_, &shard)| !taken(shard))
            .map(|(&o, &shard)| (o, shard))
            .collect();
        let swapped = erasure::moved_back(&self.map.acting, &self.map.up, &moved);
        let mut osds = swapped.clone().unwrap_or_else(|| self.acting_as_temp());
        let strays: BTreeMap<i32, usize> = (strays.iter())
            .filter(|(o, _)| complete.contains(o))
            .copied()
            .collect();
        let held: BTreeMap<i32, usize> = (infos.iter())
            .filter_map(|(&o, i)| Some((o, self.held_elsewhere(o, i)? as usize)))
            .collect();
        // Whole in place: the whole members, and the moved ones the swap
        // put at their shards' positions.
        let back = |o: &i32, shard: &usize| osds.get(*shard) == Some(o);
        let kept: Vec<i32> = (moved.iter().filter(|(o, s)| back(o, s)).map(|(o, _)| *o))
            .chain(whole.iter().copied())
            .collect();
        let swapped = swapped.filter(|t| self.walks_back(t, k));
        // A set with strays put back that cannot walk back to CRUSH's
        // falls back to the swap alone (which is judged on its own).
        match erasure::strays_back(&mut osds, &strays, &held, &kept) {
            true if self.walks_back(&osds, k) => Some(osds),
            _ => swapped,
        }
    }

    /// A complete primary about to activate: the members whole at their
    /// own positions (`complete`, the other members complete at the head,
    /// that are in the acting set), and this primary.
    pub(super) fn whole_in_place(&self, complete: &[i32]) -> Vec<i32> {
        complete
            .iter()
            .copied()
            .filter(|o| self.map.acting.contains(o))
            .chain([self.whoami])
            .collect()
    }

    /// Erasure-coded, a complete primary about to activate (`complete`:
    /// the other members complete at the head; `infos`: this peering's
    /// answers): acting members whose OSDs moved and whose copies hold a
    /// shard that no member whole at its own position holds, with that
    /// shard, while fewer than k members are whole at their positions.
    ///
    /// The log a moved member is sent relabels its copy, and its backfill
    /// then overwrites the shard it held; until k members are whole at
    /// their positions, some object may need that shard (with OSDs
    /// declared lost and every late record refused, the primary and a
    /// moved record member one object short held the only two shards of
    /// every object; the member was relabeled, both backfill targets went
    /// down before they were done, and the PG stayed down with every OSD
    /// up). So such members wait: out of the write set, their shards read
    /// as strays', until the others are whole (then the PG peers again and
    /// they are backfilled; `waiting_moved_done`). Only while enough
    /// positions are left for k whole members without them
    /// (`erasure::moved_to_wait`).
    pub(super) fn moved_to_wait(
        &self,
        complete: &[i32],
        infos: &BTreeMap<i32, PeerInfo>,
    ) -> BTreeMap<i32, usize> {
        let Some(k) = self.ec.as_ref().map(|st| st.k()) else {
            return BTreeMap::new();
        };
        let whole = self.whole_in_place(complete);
        let moved: BTreeMap<i32, usize> = infos
            .iter()
            .filter(|(o, _)| **o != self.whoami)
            .filter_map(|(&o, i)| Some((o, i.moved_shard? as usize)))
            .collect();
        erasure::moved_to_wait(&self.map.acting, &whole, &moved, k)
    }

    /// Erasure-coded primary with moved members waiting outside the write
    /// set (`moved_to_wait`): once every other member is whole, k or more
    /// of them, and on record, new writes wait, and once none is in flight
    /// the PG peers again and the waiting members are backfilled at their
    /// positions (new writes waiting meanwhile: under a steady stream of
    /// them, a moment with none in flight might never come).
    pub(super) fn waiting_moved_done(&mut self) {
        let Role::Primary { write_set } = &self.role else {
            return;
        };
        let Some(k) = self.ec.as_ref().map(|st| st.k()) else {
            return;
        };
        if self.rec.waiting_moved.is_empty() || !self.rec.nothing_left() {
            return;
        }
        let whole = self.complete_of(write_set);
        let on_record = self
            .map
            .record
            .as_ref()
            .is_some_and(|r| r.interval == self.map.interval && r.osds == whole);
        self.rec.waiting_moved_drain |= whole.len() >= k && on_record;
        if self.rec.waiting_moved_drain && self.ops.inflight.is_empty() {
            self.role = Role::Behind;
            self.rec.peer_again_ms = self.now_ms;
        }
    }

    /// Whether pg_temp `t` can walk back to CRUSH's set (see
    /// [`erasure::walks_to_crush`]). A hole in CRUSH's set takes an OSD
    /// again (the one that went down coming back, or its replacement once
    /// it is out): the walk is judged with a newcomer there (with
    /// positions moving, CRUSH's set had a hole, the walk back was judged
    /// impossible for it, and the moved member was relabeled).
    pub(super) fn walks_back(&self, t: &[i32], k: usize) -> bool {
        let up: Vec<i32> = (self.map.up.iter().enumerate())
            .map(|(i, &o)| match o {
                o if o >= 0 && o != loligo_crush::ITEM_NONE => o,
                _ => NEWCOMER_BASE + i as i32,
            })
            .collect();
        erasure::walks_to_crush(t, &up, k, &self.map.spares)
    }

    /// See [`erasure::moved_back`].
    pub(super) fn moved_back(&self) -> Option<Vec<i32>> {
        erasure::moved_back(&self.map.acting, &self.map.up, &self.rec.moved_complete)
    }

    /// The acting set as a pg_temp asks for it (holes as `ITEM_NONE`).
    pub(super) fn acting_as_temp(&self) -> Vec<i32> {
        erasure::as_temp(&self.map.acting)
    }

    /// Down, waiting for a member of the recorded write set to answer (it
    /// peers again as they come and go).
    pub(super) fn wait_for_record(&mut self) {
        let osds = self
            .map
            .record
            .as_ref()
            .map_or_else(Vec::new, |r| r.osds.clone());
        self.down_waiting_for(osds);
    }

    /// Down, waiting for one of `osds`: named (to clients and in the
    /// PG's report) are those that have not answered this peering with a
    /// copy; the others are up and already heard, and waiting for them
    /// would tell an operator to bring back an OSD that is there. None
    /// left: no up OSD holds what the PG needs, and none named is coming.
    pub(super) fn down_waiting_for(&mut self, osds: Vec<i32>) {
        let heard: BTreeSet<i32> = match &self.role {
            Role::Peering { infos, .. } | Role::Pulling { infos, .. } => infos
                .iter()
                .filter(|(_, i)| i.is_some())
                .map(|(o, _)| *o)
                .collect(),
            _ => BTreeSet::new(),
        };
        let osds = osds
            .into_iter()
            .filter(|o| *o != self.whoami && !heard.contains(o))
            .collect();
        self.role = Role::Down { osds };
    }

    /// A peering query: answered with this copy's info once this PG's map
    /// has reached the query's epoch (writes it accepted count, durable or
    /// not: any that were not durable yet will not be acknowledged to
    /// their old primary).
    pub(super) fn on_query(&mut self, q: PendingQuery, fx: &mut Vec<Effect>) {
        // Under the querier's map, and with every transaction this copy
        // queued durable: the answer must not claim a write a crash can
        // still take away (a replica answered with a write it had applied
        // but not made durable, crashed and lost it; the new primary
        // counted it complete, answered a retry of that write as done, and
        // the acknowledged write was lost).
        if self.map.epoch < q.epoch || !self.settled_all() {
            return self.held.queries.push(q);
        }
        self.held.answered_epoch = self.held.answered_epoch.max(q.epoch);
        let answered = self.held.answered_intervals.entry(q.from).or_default();
        *answered = (*answered).max(q.interval);
        let info = PeerInfo {
            info: self.info,
            missing: self.missing.len() as u64,
            backfill: self.backfill.is_some() || self.ecs.moved,
            moved_shard: self.moved_shard(),
            shard: self.ecs.held_shard,
            leases: self.leases_left(),
        };
        fx.push(peer::info_answer(q.token, Ok(Some(info))));
    }

    pub(super) fn rerun_queries(&mut self, fx: &mut Vec<Effect>) {
        for q in std::mem::take(&mut self.held.queries) {
            self.on_query(q, fx);
        }
    }

    /// Serve as primary: persist the activation, run what waited.
    pub(super) fn activate(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if self.can_write() {
            self.info.last_epoch_started = self.map.epoch;
            let mut t = Transaction::new();
            t.set_record(self.coll, INFO_KEY, record::encode_info(&self.info));
            self.mark_shard(&mut t);
            self.apply_own(t, true, fx);
        }
        self.rerun_waiting(s, fx);
    }
}
