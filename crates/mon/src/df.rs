//! Pool usage as Ceph's `df` reports it: what each pool stores (before
//! replication or coding), what that takes raw, and how much more it can
//! take before the first OSD reaches the full ratio (`max_avail`). A pure
//! function of the map, the PG census and the OSDs' reports, for `loligo
//! df` and the metrics.
//!
//! It must never promise room the fullest OSD does not have: new data
//! spreads by CRUSH weight, so the OSD with the least room for its share
//! bounds every pool.

use crate::health::Census;
use loligo_monc::protocol::{DfPool, DfPoolStats, DfReport, DfStats};
use loligo_types::osdmap::{PoolKind, RatioKind};
use loligo_types::{crush_edit, OsdMap, OsdReport, Pool};
use std::collections::BTreeMap;

/// Share of a pool's raw bytes that is its data (1/size replicated, k/size
/// erasure-coded).
pub fn data_share(map: &OsdMap, p: &Pool) -> f64 {
    let size = f64::from(p.size.max(1));
    match &p.kind {
        PoolKind::Replicated => 1.0 / size,
        PoolKind::Erasure { profile } => map
            .ec_profiles
            .get(profile)
            .map_or(1.0 / size, |e| f64::from(e.k) / size),
    }
}

/// Raw bytes the up and in OSDs can still take before the first reaches
/// the full ratio, when new data spreads by CRUSH weight (Ceph's
/// projection for `max_avail`); 0 without reports.
pub fn raw_avail(map: &OsdMap, reports: &[&OsdReport]) -> f64 {
    let weights: BTreeMap<i32, u32> = (crush_edit::tree(&map.crush).into_iter())
        .filter(|r| r.1 >= 0)
        .map(|(_, id, _, _, w)| (id, w))
        .collect();
    let full = map.full_ratios.get(RatioKind::Full);
    let live: Vec<(f64, f64)> = (reports.iter())
        .filter(|r| map.osds.get(&r.osd).is_some_and(|o| o.up && o.is_in()))
        .filter_map(|r| {
            let w = f64::from(*weights.get(&r.osd)?);
            let room = (r.bytes_total as f64 * full - r.bytes_used as f64).max(0.0);
            (w > 0.0).then_some((w, room))
        })
        .collect();
    let total: f64 = live.iter().map(|(w, _)| w).sum();
    (live.iter())
        .map(|(w, room)| room * total / w)
        .reduce(f64::min)
        .unwrap_or(0.0)
}

/// Every pool's usage, in pool id order.
pub fn pools(map: &OsdMap, census: &Census, reports: &[&OsdReport]) -> Vec<DfPool> {
    let avail = raw_avail(map, reports);
    (map.pools.values())
        .map(|p| {
            let c = census.pools.get(&p.id).cloned().unwrap_or_default();
            let share = data_share(map, p);
            let raw = c.bytes as f64 / share;
            DfPool {
                name: p.name.clone(),
                id: p.id,
                pgs: p.pg_num,
                stats: DfPoolStats {
                    stored: c.bytes,
                    objects: c.objects,
                    bytes_used: raw as u64,
                    kb_used: (raw / 1024.0).ceil() as u64,
                    percent_used: match raw + avail {
                        x if x > 0.0 => raw / x,
                        _ => 0.0,
                    },
                    max_avail: (avail * share) as u64,
                },
            }
        })
        .collect()
}

/// The whole `df`: the up OSDs' space, and every pool.
pub fn report(map: &OsdMap, census: &Census, reports: &[&OsdReport]) -> DfReport {
    let up: Vec<&&OsdReport> = (reports.iter()).filter(|r| map.is_up(r.osd)).collect();
    let total = up
        .iter()
        .map(|r| r.bytes_total)
        .fold(0, u64::saturating_add);
    let used = up.iter().map(|r| r.bytes_used).fold(0, u64::saturating_add);
    DfReport {
        stats: DfStats {
            total_bytes: total,
            total_avail_bytes: total.saturating_sub(used),
            total_used_bytes: used,
            total_used_raw_bytes: used,
            total_used_raw_ratio: match total {
                0 => 0.0,
                t => used as f64 / t as f64,
            },
            num_osds: map.osds.len(),
        },
        pools: pools(map, census, reports),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::PoolCensus;

    fn report(osd: i32, used: u64, total: u64) -> OsdReport {
        OsdReport {
            osd,
            bytes_used: used,
            bytes_total: total,
            ..Default::default()
        }
    }

    /// A 3-copy pool storing 300 bytes takes 900 raw; the room it has
    /// left is bounded by the fullest OSD, not the sum of free space.
    #[test]
    fn pools_count_copies_and_the_fullest_osd_bounds_max_avail() {
        let m = OsdMap::test_cluster(3, 8);
        let mut census = Census::default();
        census.pools.insert(
            1,
            PoolCensus {
                objects: 2,
                bytes: 300,
                ..Default::default()
            },
        );
        let even = [report(0, 0, 1000), report(1, 0, 1000), report(2, 0, 1000)];
        let refs: Vec<&OsdReport> = even.iter().collect();
        let full = m.full_ratios.get(RatioKind::Full);
        // Equal weights, empty disks: each can take `1000 * full` raw.
        assert!((raw_avail(&m, &refs) - 3000.0 * full).abs() < 1e-6);
        let r = super::report(&m, &census, &refs);
        let p = &r.pools[0];
        assert_eq!((p.name.as_str(), p.id, p.pgs), ("p", 1, 8));
        assert_eq!(
            (p.stats.stored, p.stats.objects, p.stats.bytes_used),
            (300, 2, 900)
        );
        assert_eq!(p.stats.max_avail, (1000.0 * full) as u64);
        assert_eq!(r.stats.total_bytes, 3000);
        // One OSD nearly full: new data still lands a third on it, so
        // the pool's room shrinks to three times that OSD's.
        let skew = [report(0, 0, 1000), report(1, 0, 1000), report(2, 900, 1000)];
        let refs: Vec<&OsdReport> = skew.iter().collect();
        let room = (1000.0 * full - 900.0).max(0.0);
        assert!((raw_avail(&m, &refs) - 3.0 * room).abs() < 1e-6);
        let r = super::report(&m, &census, &refs);
        assert_eq!(r.pools[0].stats.max_avail, room as u64);
        assert_eq!(r.stats.total_used_bytes, 900);
        // No reports: no room promised.
        assert_eq!(raw_avail(&m, &[]), 0.0);
    }

    #[test]
    fn an_erasure_coded_pools_data_share_is_k_over_size() {
        let mut m = OsdMap::test_cluster(3, 8);
        let p = m.pools.get(&1).cloned().expect("the test pool");
        assert!((data_share(&m, &p) - 1.0 / 3.0).abs() < 1e-9);
        let profile = loligo_types::osdmap::EcProfile {
            name: "x".into(),
            plugin: loligo_types::osdmap::EcPlugin::ReedSolomon,
            k: 4,
            m: 2,
            s: 0,
            l: 0,
            optimal: false,
            alignment: 4096,
            stripe_unit: 0,
        };
        let ec = Pool {
            kind: PoolKind::Erasure {
                profile: "x".into(),
            },
            size: 6,
            ..p
        };
        m.ec_profiles.insert("x".into(), profile);
        assert!((data_share(&m, &ec) - 4.0 / 6.0).abs() < 1e-9);
    }
}
