//! Pool usage as Ceph's `df` reports it: what each pool stores (before
//! replication or coding), what that takes raw, and how much more it can
//! take before the first OSD reaches the full ratio (`max_avail`). A pure
//! function of the map, the PG census and the OSDs' reports, for `loligo
//! df` and the metrics.
//!
//! It must never promise room the fullest OSD does not have: new data
//! spreads by CRUSH weight (times reweight) over the OSDs the pool's rule
//! places on, so the one of them with the least room for its share
//! bounds the pool.

use crate::health::Census;
use loligo_crush::balance::Eligible;
use loligo_monc::protocol::{DfPool, DfPoolStats, DfReport, DfStats};
use loligo_types::osdmap::{PoolKind, RatioKind};
use loligo_types::{OsdMap, OsdReport, Pool};
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

/// Raw bytes the OSDs that CRUSH rule `rule` places on can still take
/// before the first reaches the full ratio, when new data spreads by
/// CRUSH weight times reweight (Ceph's projection for `max_avail`). 0
/// when an OSD it places on has not reported: its room is not known, so
/// none is promised.
pub fn raw_avail(map: &OsdMap, rule: i32, reports: &[&OsdReport]) -> f64 {
    let Ok(crush) = loligo_crush::CompiledMap::compile(&map.crush) else {
        return 0.0;
    };
    let Ok(eligible) = Eligible::for_rule(&crush, rule, &map.osd_states()) else {
        return 0.0;
    };
    let by_osd: BTreeMap<i32, &OsdReport> = reports.iter().map(|r| (r.osd, *r)).collect();
    let full = map.full_ratios.get(RatioKind::Full);
    let mut live: Vec<(f64, f64)> = Vec::new();
    for (osd, (_, crush_weight)) in &eligible.osds {
        let reweight = map
            .osds
            .get(osd)
            .map_or(0.0, |o| f64::from(o.weight) / 65536.0);
        let w = f64::from(*crush_weight) * reweight;
        if w <= 0.0 {
            continue;
        }
        let Some(r) = by_osd.get(osd) else {
            return 0.0;
        };
        let room = (r.bytes_total as f64 * full - r.bytes_used as f64).max(0.0);
        live.push((w, room));
    }
    let total: f64 = live.iter().map(|(w, _)| w).sum();
    (live.iter())
        .map(|(w, room)| room * total / w)
        .reduce(f64::min)
        .unwrap_or(0.0)
}

/// Raw bytes `stored` bytes of pool `p` take: each copy, or each of the
/// `size` shards of every `k` data chunks (exact, saturating).
pub fn raw_of(map: &OsdMap, p: &Pool, stored: u64) -> u64 {
    let size = u128::from(p.size.max(1));
    let k = match &p.kind {
        PoolKind::Replicated => 1,
        PoolKind::Erasure { profile } => map
            .ec_profiles
            .get(profile)
            .map_or(1, |e| u128::from(e.k.max(1))),
    };
    u64::try_from(u128::from(stored) * size / k).unwrap_or(u64::MAX)
}

/// Every pool's usage, in pool id order.
pub fn pools(map: &OsdMap, census: &Census, reports: &[&OsdReport]) -> Vec<DfPool> {
    let mut avail_of_rule: BTreeMap<i32, f64> = BTreeMap::new();
    (map.pools.values())
        .map(|p| {
            let avail = *(avail_of_rule.entry(p.crush_rule))
                .or_insert_with(|| raw_avail(map, p.crush_rule, reports));
            let c = census.pools.get(&p.id).cloned().unwrap_or_default();
            let raw = raw_of(map, p, c.bytes);
            DfPool {
                name: p.name.clone(),
                id: p.id,
                pgs: p.pg_num,
                stats: DfPoolStats {
                    stored: c.bytes,
                    objects: c.objects,
                    bytes_used: raw,
                    kb_used: raw.div_ceil(1024),
                    percent_used: match raw as f64 + avail {
                        x if x > 0.0 => raw as f64 / x,
                        _ => 0.0,
                    },
                    max_avail: (avail * data_share(map, p)) as u64,
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
        assert!((raw_avail(&m, 0, &refs) - 3000.0 * full).abs() < 1e-6);
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
        assert!((raw_avail(&m, 0, &refs) - 3.0 * room).abs() < 1e-6);
        let r = super::report(&m, &census, &refs);
        assert_eq!(r.pools[0].stats.max_avail, room as u64);
        assert_eq!(r.stats.total_used_bytes, 900);
        // An OSD the rule places on has not reported: no room promised.
        assert_eq!(raw_avail(&m, 0, &refs[..2]), 0.0);
        assert_eq!(raw_avail(&m, 0, &[]), 0.0);
        // Reweighted to a half, the nearly full OSD takes a sixth of new
        // data (weights 1, 1, 0.5 of 2.5 -> 0.2): the room is five times
        // its own.
        let mut m = m;
        m.apply(&loligo_types::Incremental {
            epoch: m.epoch + 1,
            changes: vec![loligo_types::Change::OsdReweight {
                id: 2,
                weight: 0x8000,
            }],
        })
        .unwrap();
        assert!((raw_avail(&m, 0, &refs) - 5.0 * room).abs() < 1e-6);
    }

    #[test]
    fn raw_bytes_are_exact_for_copies_and_shards() {
        let mut m = OsdMap::test_cluster(3, 8);
        let mut p = m.pools.get(&1).cloned().expect("the test pool");
        p.size = 5;
        assert_eq!(raw_of(&m, &p, 3), 15, "never a byte short");
        assert_eq!(raw_of(&m, &p, u64::MAX), u64::MAX, "saturates");
        m.ec_profiles.insert("x".into(), profile());
        p.kind = PoolKind::Erasure {
            profile: "x".into(),
        };
        p.size = 6;
        assert_eq!(raw_of(&m, &p, 4096), 6144);
    }

    fn profile() -> loligo_types::osdmap::EcProfile {
        loligo_types::osdmap::EcProfile {
            name: "x".into(),
            plugin: loligo_types::osdmap::EcPlugin::ReedSolomon,
            k: 4,
            m: 2,
            s: 0,
            l: 0,
            optimal: false,
            alignment: 4096,
            stripe_unit: 0,
        }
    }

    #[test]
    fn an_erasure_coded_pools_data_share_is_k_over_size() {
        let mut m = OsdMap::test_cluster(3, 8);
        let p = m.pools.get(&1).cloned().expect("the test pool");
        assert!((data_share(&m, &p) - 1.0 / 3.0).abs() < 1e-9);
        let ec = Pool {
            kind: PoolKind::Erasure {
                profile: "x".into(),
            },
            size: 6,
            ..p
        };
        m.ec_profiles.insert("x".into(), profile());
        assert!((data_share(&m, &ec) - 4.0 / 6.0).abs() < 1e-9);
    }
}
