//! What OSDs report to the monitors about their PGs and themselves, and
//! the status summary built from it.

use crate::osdmap::Epoch;
use crate::pg_state::PgState;
use loligo_crush::placement::PgId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One PG as its primary sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgStat {
    pub pg: PgId,
    /// Epoch of the map the primary reported under.
    pub epoch: Epoch,
    pub state: PgState,
    pub acting: Vec<i32>,
    pub objects: u64,
    pub bytes: u64,
    /// Object copies short of the pool's size: lacked by members, or
    /// absent because the acting set is undersized (recovery pending).
    pub degraded: u64,
    /// Object copies that members lack while enough other members hold
    /// them (data moving to where CRUSH wants it).
    #[serde(default)]
    pub misplaced: u64,
    /// A `down` PG: the OSDs it waits for, any one of which holds its
    /// latest writes (empty: no up OSD does and none is named).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<i32>,
    /// Objects no up copy can give at the version the log names (an
    /// erasure-coded object with fewer than k shards of it up): reads of
    /// them wait for the OSDs that hold the rest (Ceph's unfound objects).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unfound: u64,
    /// Objects the last scrub found inconsistent and no repair has mended
    /// (Ceph's scrub errors of the PG).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub scrub_errors: u64,
    /// When the last scrub and deep scrub ended (Unix milliseconds; 0:
    /// never since the primary started).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub last_scrub_stamp: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub last_deep_scrub_stamp: u64,
    /// A PG that joins a merge, holding its writes, clean and with none
    /// in flight: its `last_update` (what its copies must hold to merge
    /// into one that serves; see `osdmap::PgMerged`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_ready: Option<crate::ops::Version>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl PgStat {
    /// PG `pg`'s report in `state` on `acting` under the map of `epoch`,
    /// with nothing counted, no scrub stamp and no merge readiness.
    pub fn new(pg: PgId, epoch: Epoch, state: PgState, acting: Vec<i32>) -> PgStat {
        PgStat {
            pg,
            epoch,
            state,
            acting,
            objects: 0,
            bytes: 0,
            degraded: 0,
            misplaced: 0,
            waiting_for: Vec::new(),
            unfound: 0,
            scrub_errors: 0,
            last_scrub_stamp: 0,
            last_deep_scrub_stamp: 0,
            merge_ready: None,
        }
    }
}

impl OsdReport {
    /// The (used, total) its fullness is judged by.
    pub fn fill(&self) -> (u64, u64) {
        if self.fill_total == 0 {
            (self.bytes_used, self.bytes_total)
        } else {
            (self.fill_used, self.fill_total)
        }
    }
}

/// One OSD's report: its primary PGs, usage and cumulative I/O counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsdReport {
    pub osd: i32,
    pub epoch: Epoch,
    pub pgs: Vec<PgStat>,
    /// What the store holds (data and metadata), and its data space with
    /// the metadata counted in.
    pub bytes_used: u64,
    pub bytes_total: u64,
    /// The fuller of the store's spaces (see `StoreStats::fill`: its data
    /// space, or the file system its metadata grows on), as (used,
    /// total): what its fullness is judged by. (0, 0): by `bytes_used`
    /// and `bytes_total`.
    #[serde(default)]
    pub fill_used: u64,
    /// See `fill_used`.
    #[serde(default)]
    pub fill_total: u64,
    /// Client ops and bytes served since the OSD started.
    pub read_ops: u64,
    pub write_ops: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Objects and bytes this OSD sent to recover or backfill other
    /// copies since it started.
    #[serde(default)]
    pub recovery_objects: u64,
    #[serde(default)]
    pub recovery_bytes: u64,
    /// Bytes and read requests this OSD's store read from its device
    /// since it started (page cache and readahead cannot hide a read).
    #[serde(default)]
    pub device_read_bytes: u64,
    #[serde(default)]
    pub device_reads: u64,
    /// Erasure-coded rebuilds this OSD led as primary: shards rebuilt,
    /// the bytes the code's plans read in theory, and the bytes fetched.
    #[serde(default)]
    pub rebuilt_shards: u64,
    #[serde(default)]
    pub rebuild_theory_bytes: u64,
    #[serde(default)]
    pub rebuild_fetched_bytes: u64,
    /// Shard bytes this OSD sent in answer to other OSDs' shard reads.
    #[serde(default)]
    pub shard_bytes_sent: u64,
    /// Frame bytes the OSD process sent and received on its direct data
    /// connections since it started (client ops and OSD-to-OSD calls;
    /// Ceph's `msgr_send_bytes` and `msgr_recv_bytes`).
    #[serde(default)]
    pub msgr_send_bytes: u64,
    #[serde(default)]
    pub msgr_recv_bytes: u64,
    /// Microseconds its client reads and writes took, summed since it
    /// started (from the op's arrival to its answer; divide by
    /// `read_ops`/`write_ops` for the mean).
    #[serde(default)]
    pub read_latency_us: u64,
    #[serde(default)]
    pub write_latency_us: u64,
    /// Mean microseconds its store took to commit a transaction durably
    /// over the interval since its last report (0: none committed).
    #[serde(default)]
    pub commit_latency_us: u64,
    /// Client ops in flight longer than the OSD's complaint time, and
    /// the oldest one's age in ms (Ceph's slow ops).
    #[serde(default)]
    pub slow_ops: u64,
    #[serde(default)]
    pub oldest_slow_op_ms: u64,
    /// The device or file its store's data lives on (Ceph's
    /// `ceph_disk_occupation`); empty when not known.
    #[serde(default)]
    pub device: String,
    /// That device's class (`hdd` or `ssd`: Ceph's device classes);
    /// empty when not known.
    #[serde(default)]
    pub device_class: String,
    /// Per pool id, the client ops it served as primary and what it
    /// sent to recover copies, since it started (Ceph's pool stats).
    #[serde(default)]
    pub pool_io: BTreeMap<u64, PoolIo>,
    /// Backfills it finished as primary since it started, those that
    /// compared Merkle trees and scanned only differing leaves, and what
    /// they cost: tree nodes the targets sent, objects the targets'
    /// scans listed, objects copied or removed.
    #[serde(default)]
    pub backfills: u64,
    #[serde(default)]
    pub backfills_by_tree: u64,
    #[serde(default)]
    pub backfill_tree_nodes: u64,
    #[serde(default)]
    pub backfill_listed: u64,
    #[serde(default)]
    pub backfill_copied: u64,
    /// Calls of the key-value store's object class (`kv`) it served as
    /// primary since it started.
    #[serde(default)]
    pub kv_calls: u64,
    /// Where the OSD serves its own metrics (`HOST:PORT`), empty when it
    /// does not: what the monitors' service discovery names.
    #[serde(default)]
    pub metrics_addr: String,
}

/// One pool's I/O counters on one OSD since it started (or, summed by a
/// monitor, since it began leading): client ops served as primary, and
/// objects and bytes sent to recover or backfill other copies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolIo {
    #[serde(default)]
    pub read_ops: u64,
    #[serde(default)]
    pub write_ops: u64,
    #[serde(default)]
    pub read_bytes: u64,
    #[serde(default)]
    pub write_bytes: u64,
    #[serde(default)]
    pub recovery_objects: u64,
    #[serde(default)]
    pub recovery_bytes: u64,
}

impl PoolIo {
    fn fields(&self) -> [u64; 6] {
        [
            self.read_ops,
            self.write_ops,
            self.read_bytes,
            self.write_bytes,
            self.recovery_objects,
            self.recovery_bytes,
        ]
    }

    fn from_fields(f: [u64; 6]) -> PoolIo {
        PoolIo {
            read_ops: f[0],
            write_ops: f[1],
            read_bytes: f[2],
            write_bytes: f[3],
            recovery_objects: f[4],
            recovery_bytes: f[5],
        }
    }

    /// What was counted since `before`, the same OSD's earlier counters:
    /// the difference, or all of these if any counter went back (the
    /// OSD restarted and counts from zero again).
    pub fn since(&self, before: &PoolIo) -> PoolIo {
        let (now, then) = (self.fields(), before.fields());
        if now.iter().zip(&then).any(|(n, t)| n < t) {
            return *self;
        }
        PoolIo::from_fields(std::array::from_fn(|i| now[i] - then[i]))
    }

    /// Add `other`'s counts (saturating: reports are the OSDs' word).
    pub fn add(&mut self, other: &PoolIo) {
        let (a, b) = (self.fields(), other.fields());
        *self = PoolIo::from_fields(std::array::from_fn(|i| a[i].saturating_add(b[i])));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_io_since_takes_differences_and_restarts_count_from_zero() {
        let before = PoolIo {
            read_ops: 10,
            write_bytes: 100,
            ..PoolIo::default()
        };
        let now = PoolIo {
            read_ops: 15,
            write_bytes: 160,
            recovery_objects: 2,
            ..PoolIo::default()
        };
        let d = now.since(&before);
        assert_eq!((d.read_ops, d.write_bytes, d.recovery_objects), (5, 60, 2));
        // Restarted: fewer reads than before, so all of these are new.
        let restarted = PoolIo {
            read_ops: 3,
            write_bytes: 500,
            ..PoolIo::default()
        };
        assert_eq!(restarted.since(&before), restarted);
        let mut total = PoolIo {
            read_ops: u64::MAX - 1,
            ..PoolIo::default()
        };
        total.add(&now);
        assert_eq!(total.read_ops, u64::MAX, "saturates");
        assert_eq!(total.write_bytes, 160);
    }
}
