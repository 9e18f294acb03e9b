//! What a PG reports: its state, counts and progress, for the monitors
//! and for tests.
//!
//! It must never change the PG: it only reads.

use super::*;

impl Pg {
    /// Whether the PG has nothing in flight or waiting.
    /// Erasure-coded rebuilds finished since the last call: (shards
    /// rebuilt, bytes the code's plans read in theory, bytes fetched).
    pub fn take_rebuilt(&mut self) -> (u64, u64, u64) {
        std::mem::take(&mut self.ecs.rebuilt)
    }

    /// Backfills finished as primary since the last call, summed.
    pub fn take_backfills(&mut self) -> BackfillCounts {
        std::mem::take(&mut self.backfills_done)
    }

    pub fn idle(&self) -> bool {
        self.ops.inflight.is_empty()
            && self.ops.reads.is_empty()
            && self.ecs.gathers.is_empty()
            && self.ops.waiting.is_empty()
            && self.ops.busy.is_empty()
            && self.rep.waiting.is_empty()
            && self.rep.committing.is_empty()
            && self.ops.lists.is_empty()
            && self.held.queries.is_empty()
            && self.held.logs.is_empty()
            && self.held.copies.is_empty()
            && self.rec.pushing.is_empty()
            && self.rec.bf_blocked.is_empty()
    }

    /// Whether this primary's PG is active with every member complete and
    /// CRUSH's set in charge (or, erasure-coded, a whole set that cannot
    /// move toward CRUSH's without a spare OSD: see
    /// `erasure::stuck_in_place`).
    pub fn is_clean(&self) -> bool {
        self.stat()
            .is_some_and(|st| st.state.contains(PgState::CLEAN))
    }

    /// The PG's state for the monitors (primaries only).
    pub fn stat(&self) -> Option<PgStat> {
        if !self.is_primary() {
            return None;
        }
        let size = self.map.pool.as_ref().map_or(0, |p| p.size as usize);
        // Only an active set's copies are counted (peering knows none
        // yet): the members' and this copy's own lacked objects (an
        // erasure-coded primary may serve while it lacks some: unfound,
        // or to be rolled back).
        let (degraded, misplaced) = match &self.role {
            Role::Primary { write_set } | Role::Activating { write_set, .. } => {
                let (degraded, misplaced) = copies_short(
                    self.info.objects,
                    size,
                    write_set.len(),
                    self.rec.lacking(self.info.objects) + self.missing.len() as u64,
                );
                // An unfound object has no copy to be misplaced from: its
                // lacked copies are degraded even while the write set has
                // more members than the pool's size (remapped; on a
                // replicated pool with OSDs declared lost, such a PG showed
                // 1 unfound, 0 degraded), and it is at least one degraded
                // copy however this copy counts its objects (an
                // undersized, peered PG too).
                let unfound = self.unfound_count();
                let moved = unfound.min(misplaced);
                ((degraded + moved).max(unfound), misplaced - moved)
            }
            _ => (0, 0),
        };
        let state = match &self.role {
            Role::Peering { .. } => PgState::PEERING,
            Role::Behind => PgState::PEERING | PgState::WAIT_PG_TEMP,
            Role::Pulling { .. } => PgState::PEERING | PgState::RECOVERING,
            Role::Down { .. } => PgState::DOWN,
            Role::Activating { write_set, .. } => {
                let mut st = PgState::ACTIVATING;
                if write_set.len() < size {
                    st |= PgState::UNDERSIZED | PgState::DEGRADED;
                }
                if degraded > 0 {
                    st |= PgState::DEGRADED;
                }
                st
            }
            Role::Primary { write_set } => self.active_state(write_set, size),
            _ => return None,
        };
        let state = if !matches!(self.role, Role::Primary { .. } | Role::Activating { .. }) {
            state
        } else if self.lease_wait() {
            state | PgState::WAIT
        } else if self.lease_laggy() {
            state | PgState::LAGGY
        } else {
            state
        };
        Some(PgStat {
            pg: self.id,
            epoch: self.map.epoch,
            state,
            acting: self.map.acting.clone(),
            objects: self.info.objects,
            bytes: self.info.bytes,
            degraded,
            misplaced,
            waiting_for: match &self.role {
                Role::Down { osds } => osds.clone(),
                _ => Vec::new(),
            },
            unfound: self.unfound_count(),
            scrub_errors: self.scrubber.errors() as u64,
            last_scrub_stamp: self.wall_ms(self.scrubber.last_ms),
            last_deep_scrub_stamp: self.wall_ms(self.scrubber.last_deep_ms),
            merge_ready: self.merge_ready(state),
        })
    }

    /// A primary holding writes for a merge, clean, with none in flight:
    /// its version, which its members hold too (see `Holds::merge`).
    fn merge_ready(&self, state: PgState) -> Option<Version> {
        let ready = self.map.holds.merge
            && state.contains(PgState::ACTIVE | PgState::CLEAN)
            && matches!(self.role, Role::Primary { .. })
            && self.ops.inflight.is_empty()
            && self.settled_all();
        ready.then_some(self.info.last_update)
    }

    /// A stamp of `wall_now`'s clock as Unix milliseconds (0: none, or
    /// no wall clock given).
    fn wall_ms(&self, ms: Option<u64>) -> u64 {
        match (ms, self.clock_base_unix_ms) {
            (Some(ms), base) if base > 0 => ms,
            _ => 0,
        }
    }

    /// An active primary's state flags, as Ceph names them.
    fn active_state(&self, write_set: &[i32], size: usize) -> PgState {
        let mut st = if self.serving(write_set) < self.min_size() {
            PgState::PEERED
        } else {
            PgState::ACTIVE
        };
        if write_set.len() < size {
            st |= PgState::UNDERSIZED | PgState::DEGRADED;
        }
        if !self.rec.backfill.is_empty() {
            st |= self.backfill_state(write_set, size);
        }
        // (Unfound objects are degraded copies, whoever lacks them: they
        // may be neither missing here nor on a member's list.)
        if !self.missing.is_empty() || self.unfound_count() > 0 {
            st |= PgState::DEGRADED;
        }
        if !self.rec.missing.is_empty() {
            st |= PgState::DEGRADED;
            st |= if self.rec.pushing.is_empty() {
                PgState::RECOVERY_WAIT
            } else {
                PgState::RECOVERING
            };
        }
        let temp_primary =
            self.ec.is_some() && self.crush_primary().is_some_and(|c| c != self.whoami);
        if (!self.map.up.is_empty() && self.map.up != self.map.acting) || temp_primary {
            st |= PgState::REMAPPED;
        }
        if st == PgState::ACTIVE
            || (st == PgState::ACTIVE | PgState::REMAPPED && self.stuck_in_place())
        {
            st |= PgState::CLEAN;
        }
        if !self.scrub.differ.is_empty() || self.scrubber.errors() > 0 {
            st |= PgState::INCONSISTENT;
        }
        if let Some(deep) = self.scrubber.running() {
            st |= PgState::SCRUBBING;
            if deep {
                st |= PgState::DEEP;
            }
        }
        st
    }

    /// An erasure-coded primary whose whole, settled pg_temp cannot walk
    /// toward CRUSH's set (see `erasure::stuck_in_place`).
    fn stuck_in_place(&self) -> bool {
        let (Some(ec), Some(pool)) = (self.ec.as_ref(), self.map.pool.as_ref()) else {
            return false;
        };
        self.rec.nothing_left()
            && erasure::stuck_in_place(
                &self.map.acting,
                &self.map.up,
                ec.k(),
                pool.size as usize,
                &self.map.spares,
            )
    }

    /// The flags of a primary with backfill targets: toofull, backfilling
    /// or waiting to (every target's next step waits out a retry), and
    /// degraded while fewer than `size` members are complete.
    fn backfill_state(&self, write_set: &[i32], size: usize) -> PgState {
        // (No flag yet: the zero value, which alone prints `unknown`.)
        let mut st = PgState::UNKNOWN;
        let toofull = |to: &i32| self.backfill_toofull(*to);
        if self.rec.backfill.keys().any(toofull) {
            st |= PgState::BACKFILL_TOOFULL;
        }
        let copying = matches!(self.rec.slot, Slot::Held(_))
            && !self.backfill_flagged()
            && self
                .rec
                .backfill
                .iter()
                .any(|(to, b)| !toofull(to) && b.retry_ms <= self.now_ms);
        if copying {
            st |= PgState::BACKFILLING;
        } else if !self.rec.backfill.keys().all(toofull) {
            st |= PgState::BACKFILL_WAIT;
        }
        if self.complete_of(write_set).len() < size {
            st |= PgState::DEGRADED;
        }
        st
    }

    /// Erasure-coded primary: acting members whose OSDs moved that wait
    /// outside the write set for the others to be whole (see
    /// `Pg::moved_to_wait`).
    pub fn moved_waiting(&self) -> usize {
        match self.role {
            Role::Primary { .. } | Role::Activating { .. } => self.rec.waiting_moved.len(),
            _ => 0,
        }
    }

    /// Objects no up copy can give at the version the log names, that
    /// wait (`PgStat::unfound`; for erasure-coded rebuilds, none once the
    /// PG, active, lacks nothing), and objects whose copies here and on
    /// every member asked are damaged (`Mend::unfound`).
    pub fn unfound_count(&self) -> u64 {
        let whole = matches!(self.role, Role::Primary { .. })
            && self.missing.is_empty()
            && self.rec.missing.values().all(BTreeMap::is_empty)
            && self.rec.backfill.is_empty();
        let rebuilds = match whole {
            true => 0,
            false => self.ecs.unfound_waiting.len(),
        };
        let damaged = match self.is_primary() {
            true => self.mend.unfound.len(),
            false => 0,
        };
        (rebuilds + damaged) as u64
    }

    /// Objects this copy rolled back to an older copy or removed since it
    /// started, because no copy that held them at their logged version
    /// was coming back (`pull_what_is_left`).
    pub fn given_up(&self) -> u64 {
        self.given_up
    }

    /// Root comparisons made with members, and how many found a
    /// different root.
    pub fn scrubs(&self) -> (u64, u64) {
        (self.scrub.compared, self.scrub.differed)
    }

    /// Backfill chunks under way from this primary (all targets: sent,
    /// or still being built),
    /// chunks this copy holds because they overtook the chunk before
    /// them, and scans it answered before the chunk they follow was
    /// queued here (the simulator's coverage counters).
    pub fn chunk_pipeline(&self) -> (usize, usize, u64) {
        let flying = self
            .rec
            .backfill
            .values()
            .map(|b| match &b.step {
                BfStep::Copying { flights, .. } => flights.len(),
                _ => 0,
            })
            .sum();
        let held = self
            .held
            .copies
            .iter()
            .filter(|h| matches!(h.what, CopyMsg::Chunk(_)))
            .count();
        (flying, held, self.scans_ahead)
    }
}
