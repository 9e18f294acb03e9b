//! Balanced placement (the ceph-devel proposal of an optimized CRUSH with a "linear" bucket, and the upmap balancer): the pps bijection
//! is a bijection, linear + adaptive meets the proposal's numbers on its
//! topology, and upmap overrides never break failure domains or use OSDs
//! that cannot hold data.

use loligo_crush::balance::{
    adaptive_balance_param, distribution, pg_up_sets, upmap_balance, upmap_balance_from, Eligible,
    UpmapItems,
};
use loligo_crush::placement::{pps_bijection, OsdStates, PoolPlacement, PpsMode};
use loligo_crush::{text, CompiledMap};
use proptest::prelude::*;
use std::fmt::Write as _;

/// `hosts` hosts of `per_host` OSDs (weights from `weight`), root straw2,
/// host buckets of `alg`; rule 0 = chooseleaf firstn 0 type host (with
/// `set_chooseleaf_vary_r 0` for linear hosts, see the linear docs).
fn topology(hosts: usize, per_host: usize, alg: &str, weight: impl Fn(usize) -> u32) -> String {
    let mut s = String::from("tunable choose_local_tries 0\ntunable choose_local_fallback_tries 0\ntunable choose_total_tries 50\ntunable chooseleaf_descend_once 1\ntunable chooseleaf_vary_r 1\ntunable chooseleaf_stable 1\ntunable straw_calc_version 1\ntunable allowed_bucket_algs 54\n");
    for d in 0..hosts * per_host {
        let _ = writeln!(s, "device {d} osd.{d}");
    }
    s.push_str("type 0 osd\ntype 1 host\ntype 2 root\n");
    for h in 0..hosts {
        let _ = writeln!(s, "host host{h} {{\n\tid -{}\n\talg {alg}\n\thash 0", h + 2);
        for i in 0..per_host {
            let d = h * per_host + i;
            let w = weight(d);
            let _ = writeln!(s, "\titem osd.{d} weight {}.{:03}", w / 1000, w % 1000);
        }
        s.push_str("}\n");
    }
    s.push_str("root default {\n\tid -1\n\talg straw2\n\thash 0\n");
    for h in 0..hosts {
        let _ = writeln!(s, "\titem host{h}");
    }
    s.push_str("}\nrule rep {\n\tid 0\n\ttype replicated\n\tmin_size 1\n\tmax_size 10\n");
    if alg == "linear" {
        s.push_str("\tstep set_chooseleaf_vary_r 0\n");
    }
    s.push_str("\tstep take default\n\tstep chooseleaf firstn 0 type host\n\tstep emit\n}\n");
    s
}

fn compile(txt: &str) -> CompiledMap {
    CompiledMap::compile(&text::parse(txt).unwrap()).unwrap()
}

#[test]
fn bijection_is_a_bijection_up_to_2_pow_20() {
    for bits in 0..=20u32 {
        for pool in [1u64, 7, 1 << 40] {
            let n = 1usize << bits;
            let mut seen = vec![false; n];
            let high = pps_bijection(0, bits, pool) >> bits;
            for x in 0..n as u32 {
                let y = pps_bijection(x, bits, pool);
                let low = (u64::from(y) & ((1u64 << bits) - 1)) as usize;
                assert!(!seen[low], "bits {bits} pool {pool}: {x} collides");
                seen[low] = true;
                // Same pool-specific high part for every input.
                assert_eq!(y >> bits, high);
            }
        }
    }
    // Different pools get different inputs.
    assert_ne!(pps_bijection(5, 11, 1) >> 11, pps_bijection(5, 11, 2) >> 11);
}

#[test]
fn seed_topology_linear_adaptive_meets_the_seed() {
    let straw2 = compile(&topology(4, 10, "straw2", |_| 1000));
    let linear = compile(&topology(4, 10, "linear", |_| 1000));
    let osds = OsdStates::all_up_in(40);
    for (size, seed_target) in [(2u32, 6.50), (3, 5.17)] {
        let plain = PoolPlacement::replicated(1, 2048, size, 0);
        let e = Eligible::for_rule(&straw2, 0, &osds).unwrap();
        let base = distribution(
            &pg_up_sets(&straw2, &plain, &osds, &UpmapItems::new()).unwrap(),
            &e,
        );
        let pool = PoolPlacement {
            pps_mode: PpsMode::Bijection,
            ..plain
        };
        let (bp, stdev) = adaptive_balance_param(&linear, &pool, &osds, 256).unwrap();
        let chosen = PoolPlacement {
            balance_param: bp,
            ..pool
        };
        let d = distribution(
            &pg_up_sets(&linear, &chosen, &osds, &UpmapItems::new()).unwrap(),
            &e,
        );
        assert!((d.stdev - stdev).abs() < 1e-9);
        assert!(
            d.stdev <= seed_target,
            "size {size}: stdev {} (straw2 {})",
            d.stdev,
            base.stdev
        );
        assert!(
            base.stdev > 9.0,
            "straw2 baseline looks wrong: {}",
            base.stdev
        );
        assert_eq!(d.per_osd.values().sum::<u64>(), 2048 * u64::from(size));
    }
}

#[test]
fn upmap_reaches_max_deviation_one_on_the_seed_topology() {
    let map = compile(&topology(4, 10, "straw2", |_| 1000));
    let osds = OsdStates::all_up_in(40);
    for size in [2u32, 3] {
        let pool = PoolPlacement::replicated(1, 2048, size, 0);
        let plan = upmap_balance(&map, &pool, &osds, 1.0, 1_000_000).unwrap();
        let e = Eligible::for_rule(&map, 0, &osds).unwrap();
        let d = distribution(&pg_up_sets(&map, &pool, &osds, &plan.items).unwrap(), &e);
        assert!(d.max_deviation <= 1.0, "size {size}: {}", d.max_deviation);
        // Each move fixes one replica; no PG needs more moves than replicas.
        assert!(plan.items.values().all(|v| v.len() <= size as usize));
        assert!(plan.items.values().map(Vec::len).sum::<usize>() <= plan.moves);
    }
}

/// After an OSD fails, rebalancing from the old overrides keeps those that
/// still apply, drops every one that pointed at the failed OSD, and gets
/// back within one PG of the target.
#[test]
fn upmap_from_existing_overrides_after_a_failure() {
    let map = compile(&topology(4, 10, "straw2", |_| 1000));
    let all = OsdStates::all_up_in(40);
    let pool = PoolPlacement::replicated(1, 1024, 3, 0);
    let before = upmap_balance(&map, &pool, &all, 1.0, 1_000_000).unwrap();
    let failed_osd = before
        .items
        .values()
        .flatten()
        .map(|&(_, to)| to)
        .next()
        .expect("the proposal's topology needs overrides");
    let mut failed = all.clone();
    failed.mark_down(failed_osd).unwrap();
    failed.mark_out(failed_osd).unwrap();
    let after = upmap_balance_from(&map, &pool, &failed, 1.0, 1_000_000, &before.items).unwrap();
    let e = Eligible::for_rule(&map, 0, &failed).unwrap();
    let sets = pg_up_sets(&map, &pool, &failed, &after.items).unwrap();
    assert!(sets.iter().all(|s| !s.contains(&failed_osd)));
    assert!(after
        .items
        .values()
        .flatten()
        .all(|&(_, to)| to != failed_osd));
    let d = distribution(&sets, &e);
    assert!(d.max_deviation <= 1.0, "{}", d.max_deviation);
    let kept = after
        .items
        .iter()
        .filter(|(ps, v)| before.items.get(ps) == Some(v))
        .count();
    assert!(
        kept * 2 > before.items.len(),
        "kept only {kept} of {}",
        before.items.len()
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Whatever the weights and OSD states, upmap never puts two replicas
    /// in one host and never maps to an out, down, or zero-weight OSD.
    #[test]
    fn upmap_respects_failure_domains_and_usable_osds(
        hosts in 3usize..7,
        per_host in 1usize..5,
        weights in prop::collection::vec(0u32..3000, 28),
        outs in prop::collection::vec(0usize..28, 0..4),
        downs in prop::collection::vec(0usize..28, 0..2),
        size in 2u32..4,
        pg_num in 16u32..300,
    ) {
        let n = hosts * per_host;
        let map = compile(&topology(hosts, per_host, "straw2", |d| weights[d % weights.len()]));
        let mut osds = OsdStates::all_up_in(n as i32);
        for &o in &outs { if o < n { osds.mark_out(o as i32).unwrap(); } }
        for &o in &downs { if o < n { osds.mark_down(o as i32).unwrap(); } }
        let pool = PoolPlacement::replicated(3, pg_num, size, 0);
        let plan = upmap_balance(&map, &pool, &osds, 1.0, 100_000).unwrap();
        let e = Eligible::for_rule(&map, 0, &osds).unwrap();
        let sets = pg_up_sets(&map, &pool, &osds, &plan.items).unwrap();
        for (ps, set) in sets.iter().enumerate() {
            let mut hosts_seen = std::collections::BTreeSet::new();
            for o in set {
                let (dom, w) = e.osds.get(o).copied().unwrap_or((i32::MIN, 0));
                let usable = osds.weight[*o as usize] > 0 && osds.up[*o as usize] && w > 0;
                if plan.items.get(&(ps as u32)).is_some_and(|v| v.iter().any(|p| p.1 == *o)) {
                    prop_assert!(usable, "pg {ps}: upmapped to unusable osd.{o}");
                }
                if usable {
                    prop_assert!(hosts_seen.insert(dom), "pg {ps}: two replicas in domain {dom}: {set:?}");
                }
            }
        }
    }
}
