//! Properties of CRUSH that users rely on: determinism, minimal data
//! movement when a weight changes, positional stability of indep rules,
//! and typed errors (never panics) for bad maps and bad requests.

mod common;

use loligo_crush::map::{
    Bucket, BucketAlg, BucketItem, BucketType, ChooseMode, CrushMap, Device, Rule, Step, Tunables,
};
use loligo_crush::{text, CompiledMap, CrushError, Workspace, ITEM_NONE};
use proptest::prelude::*;

fn map_of(case: &str) -> CompiledMap {
    let p = common::vectors_dir()
        .join("crush")
        .join(case)
        .join("map.txt");
    let txt = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    CompiledMap::compile(&text::parse(&txt).unwrap()).unwrap()
}

fn all_in(map: &CompiledMap) -> Vec<u32> {
    vec![0x10000; map.max_devices() as usize]
}

fn mapping(
    map: &CompiledMap,
    rule: i32,
    x: u32,
    n: usize,
    w: &[u32],
    ws: &mut Workspace,
) -> Vec<i32> {
    let mut out = Vec::new();
    map.do_rule(rule, x, n, w, None, ws, &mut out).unwrap();
    out
}

/// Root (straw2) over `hosts` hosts (straw2) of `per_host` OSDs.
fn two_level(host_weights: &[Vec<u32>]) -> CrushMap {
    let mut map = CrushMap {
        tunables: Tunables::OPTIMAL,
        types: vec![
            BucketType {
                id: 0,
                name: "osd".into(),
            },
            BucketType {
                id: 1,
                name: "host".into(),
            },
            BucketType {
                id: 2,
                name: "root".into(),
            },
        ],
        ..CrushMap::default()
    };
    let mut root = Vec::new();
    let mut next = 0;
    for (h, ws) in host_weights.iter().enumerate() {
        let mut items = Vec::new();
        for &w in ws {
            map.devices.push(Device {
                id: next,
                name: format!("osd.{next}"),
                class: None,
            });
            items.push(BucketItem {
                id: next,
                weight: w,
            });
            next += 1;
        }
        let id = -2 - h as i32;
        root.push(BucketItem {
            id,
            weight: ws.iter().sum(),
        });
        map.buckets.push(Bucket {
            id,
            name: format!("host{h}"),
            type_id: 1,
            alg: BucketAlg::Straw2,
            hash: 0,
            items,
            class_ids: Default::default(),
        });
    }
    map.buckets.push(Bucket {
        id: -1,
        name: "root".into(),
        type_id: 2,
        alg: BucketAlg::Straw2,
        hash: 0,
        items: root,
        class_ids: Default::default(),
    });
    for (id, leaf, mode) in [
        (0, true, ChooseMode::Firstn),
        (1, true, ChooseMode::Indep),
        (2, false, ChooseMode::Firstn),
    ] {
        map.rules.push(Rule {
            id,
            name: format!("r{id}"),
            rule_type: 1,
            min_size: 1,
            max_size: 10,
            steps: vec![
                Step::Take {
                    item: -1,
                    class: None,
                },
                Step::Choose {
                    leaf,
                    mode,
                    count: 0,
                    type_id: if leaf { 1 } else { 0 },
                },
                Step::Emit,
            ],
        });
    }
    map
}

#[test]
fn mapping_is_deterministic_and_workspace_reuse_is_invisible() {
    // Uniform buckets cache permutations in the workspace: visiting inputs
    // in a different order must not change any answer.
    for case in [
        "s09_uniform_hosts",
        "s17_build_uniform_list_tree",
        "s03_straw2_racks_nonuniform",
    ] {
        let map = map_of(case);
        let w = all_in(&map);
        for rule in map.rule_ids().collect::<Vec<_>>() {
            let mut ws1 = Workspace::new(&map);
            let forward: Vec<Vec<i32>> = (0..2000)
                .map(|x| mapping(&map, rule, x, 3, &w, &mut ws1))
                .collect();
            let mut ws2 = Workspace::new(&map);
            for x in (0..2000u32).rev().step_by(7) {
                let fresh = mapping(&map, rule, x, 3, &w, &mut Workspace::new(&map));
                assert_eq!(
                    mapping(&map, rule, x, 3, &w, &mut ws2),
                    forward[x as usize],
                    "{case} x {x}"
                );
                assert_eq!(fresh, forward[x as usize]);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// In one straw2 bucket, changing one item's weight only moves inputs
    /// to or from that item.
    #[test]
    fn straw2_weight_change_moves_only_that_item(
        weights in prop::collection::vec(1u32..0x40000, 2..12),
        which in any::<prop::sample::Index>(),
        new_weight in 0u32..0x40000,
    ) {
        let k = which.index(weights.len());
        let before = CompiledMap::compile(&two_level(std::slice::from_ref(&weights))).unwrap();
        let mut changed = weights.clone();
        changed[k] = new_weight;
        let after = CompiledMap::compile(&two_level(&[changed])).unwrap();
        let (mut ws1, mut ws2) = (Workspace::new(&before), Workspace::new(&after));
        let w = all_in(&before);
        let k = k as i32;
        for x in 0..3000 {
            let a = mapping(&before, 2, x, 1, &w, &mut ws1);
            let b = mapping(&after, 2, x, 1, &w, &mut ws2);
            if a != b {
                prop_assert!(a == vec![k] || b == vec![k], "x {x}: {a:?} -> {b:?} without osd {k}");
            }
        }
    }

    /// In a hierarchy, changing one OSD's weight (and so its host's)
    /// moves inputs only through that host.
    #[test]
    fn hierarchy_weight_change_moves_only_through_ancestors(
        hosts in prop::collection::vec(prop::collection::vec(0x8000u32..0x30000, 1..6), 2..6),
        host in any::<prop::sample::Index>(),
        dev in any::<prop::sample::Index>(),
        new_weight in 0u32..0x30000,
    ) {
        let h = host.index(hosts.len());
        let d = dev.index(hosts[h].len());
        let before = CompiledMap::compile(&two_level(&hosts)).unwrap();
        let mut changed = hosts.clone();
        changed[h][d] = new_weight;
        let after = CompiledMap::compile(&two_level(&changed)).unwrap();
        let first: i32 = hosts[..h].iter().map(|v| v.len() as i32).sum();
        let in_host = |o: i32| o >= first && o < first + hosts[h].len() as i32;
        let (mut ws1, mut ws2) = (Workspace::new(&before), Workspace::new(&after));
        let w = all_in(&before);
        for x in 0..3000 {
            let a = mapping(&before, 0, x, 1, &w, &mut ws1);
            let b = mapping(&after, 0, x, 1, &w, &mut ws2);
            if a != b {
                prop_assert!(a.iter().chain(&b).any(|&o| in_host(o)), "x {x}: {a:?} -> {b:?} outside host {h}");
            }
        }
    }
}

/// Marking one device out changes nothing for inputs that did not use it,
/// and for inputs that did, an indep rule keeps the other positions.
#[test]
fn marking_out_keeps_other_positions() {
    for (case, rule, n) in [
        ("s06_ec_chooseleaf_indep", 0, 6),
        ("s07_ec_choose_indep_rack_host", 1, 5),
        ("s03_straw2_racks_nonuniform", 0, 3),
    ] {
        let map = map_of(case);
        let w = all_in(&map);
        let mut ws = Workspace::new(&map);
        for out_dev in [0, 5, 17] {
            let mut w_out = w.clone();
            w_out[out_dev] = 0;
            let (mut used, mut kept) = (0, 0);
            for x in 0..4000 {
                let a = mapping(&map, rule, x, n, &w, &mut ws);
                let b = mapping(&map, rule, x, n, &w_out, &mut ws);
                assert!(
                    !b.contains(&(out_dev as i32)),
                    "{case}: out device still chosen"
                );
                match a.iter().position(|&o| o == out_dev as i32) {
                    None => assert_eq!(
                        a, b,
                        "{case} x {x}: mapping moved without using osd.{out_dev}"
                    ),
                    Some(q) => {
                        used += 1;
                        let indep = case != "s03_straw2_racks_nonuniform";
                        if indep
                            && a.len() == b.len()
                            && (0..a.len()).all(|i| i == q || a[i] == b[i])
                        {
                            kept += 1;
                        }
                    }
                }
            }
            if case != "s03_straw2_racks_nonuniform" {
                assert!(used > 0, "{case}: osd.{out_dev} never used");
                // Positional stability; CRUSH allows rare exceptions when
                // a retry collides, so require it for at least 98%.
                assert!(
                    kept * 100 >= used * 98,
                    "{case} osd.{out_dev}: kept {kept} of {used}"
                );
            }
        }
    }
}

#[test]
fn bad_requests_are_typed_errors() {
    let map = map_of("s01_tiny_3osd_straw2");
    let w = all_in(&map);
    let mut ws = Workspace::new(&map);
    let mut out = Vec::new();
    assert_eq!(
        map.do_rule(7, 1, 3, &w, None, &mut ws, &mut out),
        Err(CrushError::UnknownRule(7))
    );
    assert!(matches!(
        map.do_rule(0, 1, 0, &w, None, &mut ws, &mut out),
        Err(CrushError::BadNumRep { .. })
    ));
    assert!(matches!(
        map.do_rule(0, 1, 65, &w, None, &mut ws, &mut out),
        Err(CrushError::BadNumRep { .. })
    ));
    // A short weight vector means the missing devices are out, not a panic.
    map.do_rule(0, 1, 3, &[], None, &mut ws, &mut out).unwrap();
    assert!(out.is_empty());
}

#[test]
fn bad_maps_are_typed_errors() {
    let base =
        std::fs::read_to_string(common::vectors_dir().join("crush/s01_tiny_3osd_straw2/map.txt"))
            .unwrap();
    let cases: &[(&str, &str, &str)] = &[
        (
            "dangling item",
            "item osd.2 weight 1.000",
            "item osd.9 weight 1.000",
        ),
        (
            "negative weight",
            "item osd.1 weight 1.000",
            "item osd.1 weight -1.000",
        ),
        (
            "bad weight",
            "item osd.1 weight 1.000",
            "item osd.1 weight nan",
        ),
        ("unknown alg", "alg straw2", "alg straw3"),
        ("unknown take", "step take default", "step take nowhere"),
        ("unknown type", "type host", "type hots"),
        (
            "unknown tunable",
            "tunable chooseleaf_stable 1",
            "tunable chooseleaf_stabel 1",
        ),
        ("truncated", "# end crush map", "rule x {"),
    ];
    for (what, from, to) in cases {
        assert!(base.contains(from), "{what}");
        let bad = base.replacen(from, to, 1);
        let r = text::parse(&bad).and_then(|m| CompiledMap::compile(&m));
        assert!(r.is_err(), "{what}: accepted");
    }
    // A cycle can only be written in the JSON form (text requires children first).
    let mut map = text::parse(&base).unwrap();
    let root = map.buckets.iter().find(|b| b.name == "default").unwrap().id;
    map.buckets[0].items.push(BucketItem {
        id: root,
        weight: 0x10000,
    });
    assert!(
        matches!(CompiledMap::compile(&map), Err(CrushError::Invalid(m)) if m.contains("cycle"))
    );
    // Dangling bucket reference in JSON.
    let mut map = text::parse(&base).unwrap();
    map.buckets[0].items.push(BucketItem { id: -99, weight: 1 });
    assert!(CompiledMap::compile(&map).is_err());
    // Absurd retry counts are refused rather than spun on.
    let mut map = text::parse(&base).unwrap();
    map.tunables.choose_total_tries = u32::MAX;
    assert!(CompiledMap::compile(&map).is_err());
    // Zero-weight everything maps to nothing, without error.
    let mut map = text::parse(&base).unwrap();
    for b in &mut map.buckets {
        for it in &mut b.items {
            it.weight = 0;
        }
    }
    let c = CompiledMap::compile(&map).unwrap();
    let mut out = Vec::new();
    c.do_rule(
        0,
        3,
        3,
        &all_in(&c),
        None,
        &mut Workspace::new(&c),
        &mut out,
    )
    .unwrap();
    assert!(out.len() <= 3);
}

/// Mutations of real maps: the parser and compiler return errors or maps,
/// and any map that compiles can be evaluated without panicking.
fn mutate(text: &str, ops: &[(u8, usize, u16)]) -> String {
    let mut toks: Vec<String> = text
        .split_inclusive(|c: char| c.is_whitespace())
        .map(str::to_string)
        .collect();
    let junk = [
        "{",
        "}",
        "[",
        "]",
        "-1",
        "0",
        "4294967296",
        "-2147483648",
        "item",
        "weight",
        "step",
        "take",
        "choose",
        "indep",
        "firstn",
        "emit",
        "type",
        "id",
        "class",
        "alg",
        "uniform",
        "tree",
        "list",
        "straw",
        "1e39",
        "0.000001",
        "#",
        "\n",
        "rule",
        "choose_args",
        "bucket_id",
        "weight_set",
        "ids",
        "pos",
        "999",
    ];
    for &(op, at, v) in ops {
        if toks.is_empty() {
            break;
        }
        let i = at % toks.len();
        match op % 3 {
            0 => {
                toks.remove(i);
            }
            1 => toks.insert(i, format!("{} ", junk[v as usize % junk.len()])),
            _ => {
                let j = (i + v as usize) % toks.len();
                toks.swap(i, j);
            }
        }
    }
    toks.concat()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn parser_and_mapper_never_panic_on_mutated_maps(
        case in 0usize..19,
        ops in prop::collection::vec((any::<u8>(), any::<usize>(), any::<u16>()), 1..8),
        xs in prop::collection::vec(any::<u32>(), 1..4),
        n in 0usize..70,
    ) {
        let dirs = common::cases("crush");
        let txt = std::fs::read_to_string(dirs[case % dirs.len()].join("map.txt")).unwrap();
        let bad = mutate(&txt, &ops);
        if let Ok(map) = text::parse(&bad) {
            let _ = text::write(&map);
            if let Ok(c) = CompiledMap::compile(&map) {
                let mut ws = Workspace::new(&c);
                let mut out = Vec::new();
                let w = all_in(&c);
                let args = c.choose_args_for(-1);
                for rule in c.rule_ids().collect::<Vec<_>>() {
                    for &x in &xs {
                        if c.do_rule(rule, x, n, &w, args, &mut ws, &mut out).is_ok() {
                            prop_assert!(out.len() <= n);
                            prop_assert!(out.iter().all(|&o| o == ITEM_NONE || o < c.max_devices()));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn parser_never_panics_on_arbitrary_text(s in "\\PC{0,400}") {
        let _ = text::parse(&s);
    }
}
