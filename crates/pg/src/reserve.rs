//! An OSD's recovery slots: at most `slots` of its primary PGs push or
//! backfill at once (Ceph's local reservation, `osd_recovery_max_active`
//! in spirit). A PG asks for a slot with a priority (the most degraded
//! first, see `Pg::recovery_priority`); asks wait in priority order, first
//! come first served among equals, and a PG gives its slot back when its
//! recovery is done or its interval ends.
//!
//! It only counts and orders: it never decides whether a PG needs
//! recovery, and a grant goes to the PG's task as an input like any other.

use loligo_types::PgId;
use std::collections::{BTreeMap, BTreeSet};

/// One PG's ask, named by the PG's ask number.
pub type Ask = (PgId, u64);

/// The slots and the asks waiting for one.
#[derive(Debug)]
pub struct Reserver {
    slots: usize,
    held: BTreeSet<Ask>,
    /// Waiting asks by (priority, highest first; arrival order).
    waiting: BTreeMap<(std::cmp::Reverse<u64>, u64), Ask>,
    arrivals: u64,
}

impl Reserver {
    /// `slots` PGs at once (at least one).
    pub fn new(slots: usize) -> Reserver {
        Reserver {
            slots: slots.max(1),
            held: BTreeSet::new(),
            waiting: BTreeMap::new(),
            arrivals: 0,
        }
    }

    /// Queue `ask`; the asks granted now.
    pub fn ask(&mut self, ask: Ask, priority: u64) -> Vec<Ask> {
        if !self.held.contains(&ask) && !self.waiting.values().any(|a| *a == ask) {
            self.arrivals += 1;
            self.waiting
                .insert((std::cmp::Reverse(priority), self.arrivals), ask);
        }
        self.grant()
    }

    /// Free `ask`'s slot or withdraw it (unknown asks are ignored); the
    /// asks granted now.
    pub fn release(&mut self, ask: Ask) -> Vec<Ask> {
        if !self.held.remove(&ask) {
            self.waiting.retain(|_, a| *a != ask);
        }
        self.grant()
    }

    /// Free every slot PG `pg` holds and withdraw its asks (its task
    /// ended); the asks granted now.
    pub fn release_pg(&mut self, pg: PgId) -> Vec<Ask> {
        self.held.retain(|a| a.0 != pg);
        self.waiting.retain(|_, a| a.0 != pg);
        self.grant()
    }

    /// PGs holding a slot.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Asks waiting for a slot.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    fn grant(&mut self) -> Vec<Ask> {
        let mut granted = Vec::new();
        while self.held.len() < self.slots {
            let Some((_, ask)) = self.waiting.pop_first() else {
                break;
            };
            self.held.insert(ask);
            granted.push(ask);
        }
        granted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg(ps: u32) -> PgId {
        PgId { pool: 1, ps }
    }

    #[test]
    fn slots_go_to_the_most_degraded_first_then_in_order() {
        let mut r = Reserver::new(2);
        assert_eq!(r.ask((pg(0), 1), 5), vec![(pg(0), 1)]);
        assert_eq!(r.ask((pg(1), 1), 0), vec![(pg(1), 1)]);
        // Full: these wait.
        assert!(r.ask((pg(2), 1), 1).is_empty());
        assert!(r.ask((pg(3), 1), 9).is_empty());
        assert!(r.ask((pg(4), 1), 1).is_empty());
        // Asking twice changes nothing.
        assert!(r.ask((pg(4), 1), 1).is_empty());
        assert_eq!((r.held(), r.waiting()), (2, 3));
        // The most degraded first, then first come first served.
        assert_eq!(r.release((pg(1), 1)), vec![(pg(3), 1)]);
        assert_eq!(r.release((pg(0), 1)), vec![(pg(2), 1)]);
        // A withdrawn ask is never granted; an unknown release is a no-op.
        assert!(r.release((pg(4), 1)).is_empty());
        assert!(r.release((pg(9), 7)).is_empty());
        assert_eq!(r.release((pg(3), 1)), vec![]);
        assert_eq!((r.held(), r.waiting()), (1, 0));
        // The same PG's later ask is another ask.
        assert_eq!(r.ask((pg(3), 2), 0), vec![(pg(3), 2)]);
    }
}
