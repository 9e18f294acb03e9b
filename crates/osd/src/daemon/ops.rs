//! The client ops this OSD is serving now (Ceph's op tracker): what
//! `tell osd.N dump_ops_in_flight` lists, and what the reports count as
//! slow ops for the monitors' `SLOW_OPS` check: in flight longer than
//! the complaint time (Ceph's `osd_op_complaint_time`), or ended so
//! within the last complaint time. (A Loligo op stuck in its PG is
//! answered after five sixths of the op timeout and the client asks
//! again; counting the ones that ended slow keeps a stuck PG's slow ops
//! counted between one attempt and the next.)
//!
//! It must never outlive an op: each entry is removed by the guard the
//! op holds, however the op ends (answered, failed or dropped).

use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One op in flight.
#[derive(Clone, Debug)]
struct Tracked {
    /// The pool it is on (a caller sees the ops of pools it may read).
    pool: u64,
    started: Instant,
    /// Unix milliseconds when it came.
    started_ms: u64,
    description: String,
}

/// Ops in flight, by a number each gets as it comes, and the ages of
/// those that ended slow lately.
pub struct OpTracker {
    next: AtomicU64,
    ops: Mutex<BTreeMap<u64, Tracked>>,
    complaint: Duration,
    /// (when it ended, how long it took) of ops that ended slow within
    /// the last `complaint`, oldest first; at most [`ENDED_SLOW_MAX`].
    ended_slow: Mutex<std::collections::VecDeque<(Instant, Duration)>>,
}

/// Most slow ops remembered after they end.
const ENDED_SLOW_MAX: usize = 10_000;

/// Held by an op while it is served; its drop takes the op off.
pub struct OpGuard {
    tracker: Arc<OpTracker>,
    id: u64,
}

impl Drop for OpGuard {
    fn drop(&mut self) {
        let Some(t) = self.tracker.lock().remove(&self.id) else {
            return;
        };
        let now = Instant::now();
        let age = now.saturating_duration_since(t.started);
        if age > self.tracker.complaint {
            let mut ended = self.tracker.ended();
            ended.push_back((now, age));
            while ended.len() > ENDED_SLOW_MAX {
                ended.pop_front();
            }
        }
    }
}

/// One op as `dump_ops_in_flight` shows it (Ceph's field names).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpDump {
    pub description: String,
    /// Unix milliseconds when it came.
    pub initiated_at_ms: u64,
    /// Seconds in flight so far.
    pub age: f64,
}

/// `dump_ops_in_flight`'s answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpsInFlight {
    pub ops: Vec<OpDump>,
    pub num_ops: usize,
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl OpTracker {
    /// A tracker counting ops slow past `complaint`.
    pub fn new(complaint: Duration) -> OpTracker {
        OpTracker {
            next: AtomicU64::new(0),
            ops: Mutex::default(),
            complaint,
            ended_slow: Mutex::default(),
        }
    }

    fn ended(&self) -> std::sync::MutexGuard<'_, std::collections::VecDeque<(Instant, Duration)>> {
        self.ended_slow.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Tracked>> {
        self.ops.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Track an op from now until the guard drops.
    pub fn track(self: &Arc<Self>, pool: u64, description: String) -> OpGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let t = Tracked {
            pool,
            started: Instant::now(),
            started_ms: unix_ms(),
            description,
        };
        self.lock().insert(id, t);
        OpGuard {
            tracker: self.clone(),
            id,
        }
    }

    /// Every op in flight on a pool `visible` lets through, oldest
    /// first, with its age at `now`.
    pub fn dump(&self, now: Instant, visible: impl Fn(u64) -> bool) -> OpsInFlight {
        let mut ops: Vec<OpDump> = (self.lock().values())
            .filter(|t| visible(t.pool))
            .map(|t| OpDump {
                description: t.description.clone(),
                initiated_at_ms: t.started_ms,
                age: now.saturating_duration_since(t.started).as_secs_f64(),
            })
            .collect();
        // (Numbers are taken before the clock is read: two ops may come
        // out of order by a hair.)
        ops.sort_by(|a, b| b.age.total_cmp(&a.age));
        OpsInFlight {
            num_ops: ops.len(),
            ops,
        }
    }

    /// How many ops are slow at `now` (in flight past the complaint
    /// time, or ended so within the last complaint time), and the
    /// oldest one's age (zero when none).
    pub fn slow(&self, now: Instant) -> (u64, Duration) {
        let complaint = self.complaint;
        let mut ages: Vec<Duration> = (self.lock().values())
            .map(|t| now.saturating_duration_since(t.started))
            .filter(|a| *a > complaint)
            .collect();
        let mut ended = self.ended();
        while ended
            .front()
            .is_some_and(|(at, _)| now.saturating_duration_since(*at) > complaint)
        {
            ended.pop_front();
        }
        ages.extend(ended.iter().map(|(_, age)| *age));
        (
            ages.len() as u64,
            ages.iter().copied().max().unwrap_or_default(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_are_listed_while_served_and_counted_slow_past_the_complaint_time() {
        let t = Arc::new(OpTracker::new(Duration::from_millis(20)));
        let a = t.track(1, "osd_op(a)".into());
        std::thread::sleep(Duration::from_millis(30));
        let b = t.track(2, "osd_op(b)".into());
        let now = Instant::now();
        let all = |_| true;
        let d = t.dump(now, all);
        assert_eq!(d.num_ops, 2);
        assert_eq!(d.ops[0].description, "osd_op(a)", "oldest first");
        assert!(d.ops[0].age >= 0.03);
        let (n, oldest) = t.slow(now);
        assert_eq!(n, 1, "only the first is past 20 ms");
        assert!(oldest >= Duration::from_millis(30));
        let pool_2 = t.dump(now, |p| p == 2);
        assert_eq!(pool_2.num_ops, 1, "a caller sees the pools it may read");
        assert_eq!(pool_2.ops[0].description, "osd_op(b)");
        drop(a);
        assert_eq!(t.dump(now, all).ops[0].description, "osd_op(b)");
        drop(b);
        assert_eq!(
            t.dump(Instant::now(), all).num_ops,
            0,
            "the guards took them off"
        );
    }
}
