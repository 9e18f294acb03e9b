//! What the dashboard page shows: the JSON its script polls
//! (`/api/dashboard`), from the same leader view `/metrics` renders: the
//! status report (health with its checks, PG states, client and recovery
//! I/O, progress), each OSD's row, each pool's space, and the cluster
//! log's last lines.
//!
//! Pure: no I/O. It must never carry a secret (a key, a token) nor more
//! than a user with mon `allow r` may read.

use crate::health::Census;
use crate::pool_stats::PoolRates;
use loligo_monc::protocol::{DfReport, LogEntry, StatusReport};
use loligo_types::OsdMap;
use loligo_types::OsdReport;
use serde::Serialize;
use std::collections::BTreeMap;

/// Cluster log lines the page shows.
pub const LOG_LINES: usize = 15;

/// One OSD as the page's table shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OsdRow {
    pub id: i32,
    /// Its CRUSH host ("" without one).
    pub host: String,
    pub up: bool,
    #[serde(rename = "in")]
    pub is_in: bool,
    /// The override weight, 0 to 1 (`osd reweight`).
    pub reweight: f64,
    /// Placement groups it is in the acting set of.
    pub numpg: u64,
    /// From its last report (zero without one, or while it is down).
    pub bytes_used: u64,
    pub bytes_total: u64,
    /// Mean store commit time over its last report's interval.
    pub commit_latency_ms: f64,
    /// Mean client read and write time since it started.
    pub read_latency_ms: f64,
    pub write_latency_ms: f64,
    pub slow_ops: u64,
}

/// What the leader's soft state gives the page.
#[derive(Clone, Debug, Serialize)]
pub struct LeaderView {
    pub status: StatusReport,
    pub df: DfReport,
    pub osds: Vec<OsdRow>,
    /// Per pool id, its I/O per second now.
    pub pool_io: BTreeMap<u64, PoolRates>,
}

/// Everything the page shows at one poll.
#[derive(Clone, Debug, Serialize)]
pub struct View {
    /// Who the token speaks for, and which monitor answered.
    pub user: String,
    pub mon: u64,
    #[serde(flatten)]
    pub leader: LeaderView,
    /// Oldest first.
    pub log: Vec<LogEntry>,
}

fn mean_ms(total_us: u64, n: u64) -> f64 {
    match n {
        0 => 0.0,
        n => total_us as f64 / n as f64 / 1e3,
    }
}

/// Each OSD of `map`, with its PG count from `census` and its counters
/// from its last report among `reports` (counted only while it is up).
pub fn osd_rows(map: &OsdMap, census: &Census, reports: &[&OsdReport]) -> Vec<OsdRow> {
    let by_osd: BTreeMap<i32, &OsdReport> = reports.iter().map(|r| (r.osd, *r)).collect();
    let locations = loligo_types::crush_edit::Locations::new(&map.crush);
    (map.osds.values())
        .map(|o| {
            let r = by_osd.get(&o.id).filter(|_| o.up);
            let get = |f: fn(&OsdReport) -> u64| r.map_or(0, |r| f(r));
            OsdRow {
                id: o.id,
                host: crate::metrics::host_of(&locations, o.id),
                up: o.up,
                is_in: o.is_in(),
                reweight: f64::from(o.weight) / 65536.0,
                numpg: census.numpg.get(&o.id).copied().unwrap_or(0),
                bytes_used: get(|r| r.bytes_used),
                bytes_total: get(|r| r.bytes_total),
                commit_latency_ms: get(|r| r.commit_latency_us) as f64 / 1e3,
                read_latency_ms: mean_ms(get(|r| r.read_latency_us), get(|r| r.read_ops)),
                write_latency_ms: mean_ms(get(|r| r.write_latency_us), get(|r| r.write_ops)),
                slow_ops: get(|r| r.slow_ops),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_name_every_osd_and_count_only_up_ones_reports() {
        let mut map = OsdMap::test_cluster(3, 8);
        if let Some(o) = map.osds.get_mut(&2) {
            o.up = false;
        }
        let mut census = Census::default();
        census.numpg.insert(0, 5);
        let report = |osd| OsdReport {
            osd,
            bytes_used: 10,
            bytes_total: 100,
            read_ops: 4,
            read_latency_us: 8000,
            ..OsdReport::default()
        };
        let (r0, r2) = (report(0), report(2));
        let rows = osd_rows(&map, &census, &[&r0, &r2]);
        assert_eq!(rows.len(), 3);
        assert_eq!((rows[0].numpg, rows[0].bytes_used), (5, 10));
        assert!((rows[0].read_latency_ms - 2.0).abs() < 1e-9);
        assert_eq!(rows[0].write_latency_ms, 0.0, "no writes: no mean");
        assert_eq!((rows[1].bytes_total, rows[1].numpg), (0, 0), "no report");
        assert!(!rows[2].up);
        assert_eq!(
            rows[2].bytes_used, 0,
            "a down OSD's old report is not shown"
        );
        let v = serde_json::to_value(&rows[0]).expect("json");
        assert_eq!(v["in"], true);
    }
}
