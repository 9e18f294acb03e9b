//! Each pool's I/O: client ops and recovery per second over the OSDs'
//! last two reports (Ceph's `osd pool stats`), and each pool's counters
//! as this leader sums them (the `ceph_pool_rd`, `_wr`, ... series): the
//! OSDs' counts since they started, as it first saw them, plus what
//! followed.
//!
//! Pure: no I/O, no clock (callers pass the intervals). It must never
//! count a pool's I/O twice (an OSD counts the client ops it served as
//! primary, so summing OSDs counts each op once) nor let an OSD's restart
//! read as a fall.

use crate::health::Census;
use loligo_types::{OsdMap, PoolIo};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// One pool's I/O per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct PoolRates {
    pub read_ops_s: f64,
    pub write_ops_s: f64,
    pub read_bytes_s: f64,
    pub write_bytes_s: f64,
    pub recovery_objects_s: f64,
    pub recovery_bytes_s: f64,
}

impl PoolRates {
    /// Add what `delta` counted over `dt` seconds (`dt` > 0).
    pub fn add(&mut self, delta: &PoolIo, dt: f64) {
        debug_assert!(dt > 0.0);
        let r = |n: u64| n as f64 / dt;
        self.read_ops_s += r(delta.read_ops);
        self.write_ops_s += r(delta.write_ops);
        self.read_bytes_s += r(delta.read_bytes);
        self.write_bytes_s += r(delta.write_bytes);
        self.recovery_objects_s += r(delta.recovery_objects);
        self.recovery_bytes_s += r(delta.recovery_bytes);
    }
}

/// Per pool, what `now` counted since `before` (the same OSD's previous
/// report's counters; all of `now` for a pool it did not count before).
pub fn deltas<'a>(
    now: &'a BTreeMap<u64, PoolIo>,
    before: Option<&'a BTreeMap<u64, PoolIo>>,
) -> impl Iterator<Item = (u64, PoolIo)> + 'a {
    now.iter().map(move |(pool, io)| {
        let was = before
            .and_then(|b| b.get(pool))
            .copied()
            .unwrap_or_default();
        (*pool, io.since(&was))
    })
}

/// A JSON object of the pairs whose value is not zero (Ceph's pool stats
/// leave out what is not going on).
fn nonzero(pairs: &[(&str, f64)]) -> Value {
    let m: Map<String, Value> = (pairs.iter())
        .map(|(k, v)| (k, v.round() as u64))
        .filter(|(_, v)| *v > 0)
        .map(|(k, v)| ((*k).to_string(), json!(v)))
        .collect();
    Value::Object(m)
}

/// `osd pool stats` in Ceph's JSON shape: per pool of `map` (or only
/// `only`), its degraded and misplaced copies from `census`, its
/// recovery and client I/O rates from `rates`.
pub fn ceph_json(
    map: &OsdMap,
    census: &Census,
    rates: &BTreeMap<u64, PoolRates>,
    only: Option<u64>,
) -> Value {
    let rows: Vec<Value> = (map.pools.values())
        .filter(|p| only.is_none_or(|id| id == p.id))
        .map(|p| {
            let r = rates.get(&p.id).copied().unwrap_or_default();
            let c = census.pools.get(&p.id);
            let copies = c.map_or(0, |c| c.copies);
            let mut recovery = Map::new();
            for (name, n) in [
                ("degraded", c.map_or(0, |c| c.degraded)),
                ("misplaced", c.map_or(0, |c| c.misplaced)),
            ] {
                if n > 0 && copies > 0 {
                    recovery.insert(format!("{name}_objects"), json!(n));
                    recovery.insert(format!("{name}_total"), json!(copies));
                    recovery.insert(format!("{name}_ratio"), json!(n as f64 / copies as f64));
                }
            }
            json!({
                "pool_name": p.name,
                "pool_id": p.id,
                "recovery": recovery,
                "recovery_rate": nonzero(&[
                    ("recovering_objects_per_sec", r.recovery_objects_s),
                    ("recovering_bytes_per_sec", r.recovery_bytes_s),
                ]),
                "client_io_rate": nonzero(&[
                    ("read_bytes_sec", r.read_bytes_s),
                    ("write_bytes_sec", r.write_bytes_s),
                    ("read_op_per_sec", r.read_ops_s),
                    ("write_op_per_sec", r.write_ops_s),
                ]),
            })
        })
        .collect();
    Value::Array(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(read_ops: u64, write_bytes: u64) -> PoolIo {
        PoolIo {
            read_ops,
            write_bytes,
            ..PoolIo::default()
        }
    }

    #[test]
    fn deltas_count_new_pools_whole_and_restarts_from_zero() {
        let before: BTreeMap<u64, PoolIo> = [(1, io(10, 100))].into();
        let now: BTreeMap<u64, PoolIo> = [(1, io(14, 180)), (2, io(3, 0))].into();
        let d: BTreeMap<u64, PoolIo> = deltas(&now, Some(&before)).collect();
        assert_eq!(d[&1], io(4, 80));
        assert_eq!(d[&2], io(3, 0), "a pool new to this OSD counts whole");
        let restarted: BTreeMap<u64, PoolIo> = [(1, io(2, 10))].into();
        let d: BTreeMap<u64, PoolIo> = deltas(&restarted, Some(&before)).collect();
        assert_eq!(d[&1], io(2, 10));
        let d: BTreeMap<u64, PoolIo> = deltas(&now, None).collect();
        assert_eq!(d[&1], io(14, 180));
    }

    #[test]
    fn json_in_cephs_shape_names_only_what_is_going_on() {
        let map = OsdMap::test_cluster(3, 8);
        let pool = *map.pools.keys().next().expect("a pool");
        let mut census = Census::default();
        let c = census.pools.entry(pool).or_default();
        (c.copies, c.degraded) = (30, 3);
        let mut r = PoolRates::default();
        r.add(&io(10, 4096), 2.0);
        let rates: BTreeMap<u64, PoolRates> = [(pool, r)].into();
        let v = ceph_json(&map, &census, &rates, None);
        let row = &v[0];
        assert_eq!(row["pool_id"], pool);
        assert_eq!(row["client_io_rate"]["read_op_per_sec"], 5);
        assert_eq!(row["client_io_rate"]["write_bytes_sec"], 2048);
        assert!(row["client_io_rate"].get("write_op_per_sec").is_none());
        assert_eq!(row["recovery"]["degraded_objects"], 3);
        assert_eq!(row["recovery"]["degraded_total"], 30);
        assert!(row["recovery"].get("misplaced_objects").is_none());
        assert_eq!(row["recovery_rate"], json!({}));
        assert_eq!(ceph_json(&map, &census, &rates, Some(999)), json!([]));
    }
}
