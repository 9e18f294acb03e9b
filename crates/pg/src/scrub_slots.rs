//! An OSD's scrub slots (Ceph's `osd_max_scrubs`): at most `max` scrubs
//! at once hold one, whether this OSD runs them as primary or serves them
//! as a member. A slot is taken at once or not at all; a PG that found
//! none free may leave its name, and when a slot is given back every PG
//! that left one is woken (through the hook the OSD installs), so a scrub
//! waiting for a slot starts the moment one frees, not at a tick. A slot
//! goes back when its [`ScrubSlot`] is dropped, so a PG that ends or
//! forgets its scrub never leaks one.
//!
//! It only counts and wakes: it never decides which PG scrubs, and a
//! woken PG must find the slot free again itself (another may have
//! taken it first).

use loligo_types::PgId;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// What the OSD does for a PG woken by a slot given back.
pub type Wake = Box<dyn Fn(PgId) + Send + Sync>;

/// An OSD's scrub slots, and the PGs waiting for one.
pub struct ScrubSlots {
    max: usize,
    held: AtomicUsize,
    /// PGs that found no slot free and asked to be woken.
    waiting: Mutex<BTreeSet<PgId>>,
    wake: OnceLock<Wake>,
}

impl std::fmt::Debug for ScrubSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScrubSlots")
            .field("max", &self.max)
            .field("held", &self.held())
            .finish()
    }
}

impl ScrubSlots {
    /// `max` scrubs at once (at least one).
    pub fn new(max: usize) -> Arc<ScrubSlots> {
        Arc::new(ScrubSlots {
            max: max.max(1),
            held: AtomicUsize::new(0),
            waiting: Mutex::new(BTreeSet::new()),
            wake: OnceLock::new(),
        })
    }

    /// As many as ask (what a PG without a host's slots uses).
    pub fn unbounded() -> Arc<ScrubSlots> {
        ScrubSlots::new(usize::MAX)
    }

    /// Install what wakes a waiting PG (once; later calls are ignored).
    /// Without one, waiting PGs find a slot at their next tick.
    pub fn set_wake(&self, wake: Wake) {
        let _ = self.wake.set(wake);
    }

    /// A slot, if one is free.
    pub fn try_take(self: &Arc<ScrubSlots>) -> Option<ScrubSlot> {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()
            .map(|_| ScrubSlot(self.clone()))
    }

    /// A slot for `pg`, or (none free) `pg` is woken once one is given
    /// back.
    pub fn take_or_wait(self: &Arc<ScrubSlots>, pg: PgId) -> Option<ScrubSlot> {
        if let Some(slot) = self.try_take() {
            return Some(slot);
        }
        if let Ok(mut w) = self.waiting.lock() {
            w.insert(pg);
        }
        // (A slot given back between the first try and the name left:
        // its wake may have missed `pg`, so look once more.)
        let slot = self.try_take()?;
        if let Ok(mut w) = self.waiting.lock() {
            w.remove(&pg);
        }
        Some(slot)
    }

    /// Slots held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// PGs waiting to be woken.
    pub fn waiting(&self) -> usize {
        self.waiting.lock().map_or(0, |w| w.len())
    }

    fn give_back(&self) {
        let prev = self.held.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(prev > 0, "a scrub slot given back twice");
        let Some(wake) = self.wake.get() else {
            return;
        };
        let woken = match self.waiting.lock() {
            Ok(mut w) => std::mem::take(&mut *w),
            Err(_) => return,
        };
        for pg in woken {
            wake(pg);
        }
    }
}

/// One scrub slot, given back when dropped.
#[derive(Debug)]
pub struct ScrubSlot(Arc<ScrubSlots>);

impl Drop for ScrubSlot {
    fn drop(&mut self) {
        self.0.give_back();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg(ps: u32) -> PgId {
        PgId { pool: 1, ps }
    }

    #[test]
    fn scrub_slots_are_bounded_and_come_back_when_dropped() {
        let slots = ScrubSlots::new(2);
        let a = slots.try_take().unwrap();
        let b = slots.try_take().unwrap();
        assert!(slots.try_take().is_none());
        assert_eq!(slots.held(), 2);
        drop(a);
        let c = slots.try_take().unwrap();
        assert!(slots.try_take().is_none());
        drop((b, c));
        assert_eq!(slots.held(), 0);
    }

    #[test]
    fn a_slot_given_back_wakes_every_pg_that_waited_once() {
        let slots = ScrubSlots::new(1);
        let woken = Arc::new(Mutex::new(Vec::new()));
        let w = woken.clone();
        slots.set_wake(Box::new(move |pg| w.lock().unwrap().push(pg)));
        let held = slots.take_or_wait(pg(0)).unwrap();
        assert!(slots.take_or_wait(pg(1)).is_none());
        assert!(slots.take_or_wait(pg(2)).is_none());
        assert!(slots.take_or_wait(pg(1)).is_none());
        assert_eq!(slots.waiting(), 2);
        drop(held);
        assert_eq!(*woken.lock().unwrap(), vec![pg(1), pg(2)]);
        assert_eq!(slots.waiting(), 0);
        // Woken once: a slot given back again wakes nobody.
        drop(slots.try_take().unwrap());
        assert_eq!(woken.lock().unwrap().len(), 2);
        // A PG that found one free is not left waiting.
        assert!(slots.take_or_wait(pg(3)).is_some());
        assert_eq!(slots.waiting(), 0);
    }
}
