//! `PgMappings` carried across epochs answers what a fresh `Placer`
//! answers, for every PG, after random sequences of changes (OSDs down,
//! up, out, in, reweighted, new, moved in CRUSH; overrides; pools made,
//! resized, dropped); and a PG it does not name as changed kept its
//! mapping. `LOLIGO_FUZZ_CASES=N` runs more sequences.

use loligo_testkit::Rng;
use loligo_types::mapping::{Changed, PgMappings};
use loligo_types::{Change, Incremental, OsdMap, PgId};
use std::collections::BTreeMap;

fn boot(id: i32) -> Change {
    Change::OsdBoot {
        id,
        addr: format!("127.0.0.1:{}", 6800 + id),
        host: format!("h{}", id % 4),
        crush_weight: 0x10000,
    }
}

fn base() -> OsdMap {
    let mut m = OsdMap::new("fsid", "host").unwrap();
    m.apply(&Incremental {
        epoch: 2,
        changes: (0..12).map(boot).collect(),
    })
    .unwrap();
    for (name, pg_num) in [("a", 32), ("b", 16)] {
        let p = m.replicated_pool(name, pg_num, 3, 2);
        m.apply(&Incremental {
            epoch: m.epoch + 1,
            changes: vec![Change::PoolCreate(p)],
        })
        .unwrap();
    }
    m
}

fn all(m: &OsdMap) -> BTreeMap<PgId, loligo_types::PgMapping> {
    let mut p = m.placer().unwrap();
    let mut out = BTreeMap::new();
    for pool in m.pools.values() {
        for ps in 0..pool.pg_num {
            let pg = PgId { pool: pool.id, ps };
            out.insert(pg, p.map_pg(pg).unwrap());
        }
    }
    out
}

fn some_pg(r: &mut Rng, m: &OsdMap) -> PgId {
    let pools: Vec<_> = m.pools.values().collect();
    let p = pools[r.index(pools.len())];
    PgId {
        pool: p.id,
        ps: r.below(u64::from(p.pg_num)) as u32,
    }
}

fn change(r: &mut Rng, m: &OsdMap) -> Change {
    let osd = r.below(14) as i32;
    match r.below(12) {
        0 | 1 => Change::OsdDown { id: osd },
        2 | 3 => boot(osd),
        4 => Change::OsdOut { id: osd },
        5 => Change::OsdIn { id: osd },
        6 => Change::OsdReweight {
            id: osd,
            weight: [0, 0x8000, 0x10000][r.index(3)],
        },
        7 => Change::PgTemp {
            pg: some_pg(r, m),
            osds: if r.chance(300) {
                vec![]
            } else {
                vec![r.below(12) as i32, r.below(12) as i32]
            },
        },
        8 => Change::PrimaryTemp {
            pg: some_pg(r, m),
            osd: r.chance(700).then(|| r.below(12) as i32),
        },
        9 => Change::PgUpmapItems {
            pg: some_pg(r, m),
            items: if r.chance(300) {
                vec![]
            } else {
                vec![(r.below(12) as i32, r.below(12) as i32)]
            },
        },
        10 => {
            let mut p = m.pools.values().next().unwrap().clone();
            p.pg_num = [8, 16, 32, 64][r.index(4)];
            p.pgp_num = p.pg_num;
            Change::PoolUpdate(p)
        }
        _ => {
            if m.pools.len() < 3 || r.chance(500) {
                let n = format!("p{}", m.pool_max + 1);
                Change::PoolCreate(m.replicated_pool(&n, 8, 2, 1))
            } else {
                Change::PoolDelete {
                    id: *m.pools.keys().last().unwrap(),
                }
            }
        }
    }
}

#[test]
fn carried_mappings_equal_fresh_ones_and_name_every_change() {
    let seeds = loligo_testkit::fuzz_seeds(60);
    let (mut partial, mut full, mut named) = (0u64, 0u64, 0u64);
    for seed in seeds {
        let mut r = Rng::new(seed);
        let mut m = base();
        let mut cache = PgMappings::new(&m).unwrap();
        // A client's: unindexed steps kept while they hold.
        let mut client = PgMappings::unindexed(&m).unwrap();
        let mut before = all(&m);
        for step in 0..25 {
            let changes = (0..1 + r.index(3)).map(|_| change(&mut r, &m)).collect();
            let inc = Incremental {
                epoch: m.epoch + 1,
                changes,
            };
            if m.apply(&inc).is_err() {
                continue;
            }
            let changed = cache.advance(&m).unwrap();
            assert_eq!(cache.epoch(), m.epoch);
            let now = all(&m);
            for (pg, want) in &now {
                let got = cache.mapping(&m, *pg);
                assert_eq!(
                    got.as_ref(),
                    Some(want),
                    "seed {seed} step {step}: pg {pg} after {inc:?}"
                );
            }
            let states = m.osd_states();
            let held = client.crush_steps_hold(&m, &states);
            if !held {
                client = PgMappings::unindexed(&m).unwrap();
            }
            for (pg, want) in &now {
                assert_eq!(
                    client.mapping_in(&m, &states, *pg).as_ref(),
                    Some(want),
                    "seed {seed} step {step}: the client's pg {pg} (steps kept: {held})"
                );
            }
            // Steps that hold are advances that need no pass.
            assert!(
                !held || matches!(changed, Changed::Pgs(_)),
                "seed {seed} step {step}"
            );
            match &changed {
                Changed::All => full += 1,
                Changed::Pgs(pgs) => {
                    partial += 1;
                    named += pgs.len() as u64;
                    for (pg, want) in &now {
                        if before.get(pg) != Some(want) {
                            assert!(
                                pgs.binary_search(pg).is_ok(),
                                "seed {seed} step {step}: pg {pg} moved unnamed after {inc:?}"
                            );
                        }
                    }
                }
            }
            before = now;
        }
    }
    println!("{partial} partial advances naming {named} PGs, {full} full");
    assert!(partial > 0 && full > 0);
}

#[test]
fn an_osd_going_down_names_only_its_pgs() {
    let mut m = base();
    let mut cache = PgMappings::new(&m).unwrap();
    let of_3 = cache.pgs_of(3).to_vec();
    m.apply(&Incremental {
        epoch: m.epoch + 1,
        changes: vec![Change::OsdDown { id: 3 }],
    })
    .unwrap();
    let Changed::Pgs(pgs) = cache.advance(&m).unwrap() else {
        panic!("a down OSD made a full pass");
    };
    let mut want = of_3.clone();
    want.sort();
    assert_eq!(pgs, want);
    assert!(!pgs.is_empty() && pgs.len() < 48);
    for pg in pgs {
        let got = cache.mapping(&m, pg).unwrap();
        assert!(!got.up.contains(&3) && !got.acting.contains(&3));
    }
}

/// An erasure-coded pool whose rule places fewer shards than the pool's
/// size (here 2 of 4): carried mappings answer what a fresh placer does,
/// and each position still names one shard (the missing ones blank).
#[test]
fn an_erasure_rule_short_of_the_pool_size_maps_the_same_carried_or_fresh() {
    use loligo_crush::map::{ChooseMode, Rule, Step};
    use loligo_crush::ITEM_NONE;
    use loligo_types::osdmap::{EcPlugin, EcProfile};
    use loligo_types::PoolKind;
    let mut m = base();
    let mut crush = (*m.crush).clone();
    let root = loligo_types::crush_edit::item_id(&crush, "default").unwrap();
    let host = crush.types.iter().find(|t| t.name == "host").unwrap().id;
    crush.rules.push(Rule {
        id: 7,
        name: "two_hosts".into(),
        rule_type: 3,
        min_size: 1,
        max_size: 10,
        steps: vec![
            Step::Take {
                item: root,
                class: None,
            },
            Step::Choose {
                leaf: true,
                mode: ChooseMode::Indep,
                count: 2,
                type_id: host,
            },
            Step::Emit,
        ],
    });
    let mut pool = m.replicated_pool("ec", 16, 4, 3);
    pool.kind = PoolKind::Erasure {
        profile: "default".into(),
    };
    pool.crush_rule = 7;
    m.apply(&Incremental {
        epoch: m.epoch + 1,
        changes: vec![
            Change::CrushSet(crush),
            Change::EcProfileSet(EcProfile {
                name: "default".into(),
                plugin: EcPlugin::ReedSolomon,
                k: 2,
                m: 2,
                s: 0,
                l: 0,
                optimal: false,
                alignment: 4096,
                stripe_unit: 0,
            }),
            Change::PoolCreate(pool),
        ],
    })
    .unwrap();
    let id = m.pool_by_name("ec").unwrap().id;
    let cache = PgMappings::new(&m).unwrap();
    let fresh = all(&m);
    for ps in 0..16 {
        let pg = PgId { pool: id, ps };
        let got = cache.mapping(&m, pg).unwrap();
        assert_eq!(got, fresh[&pg], "{pg}");
        assert_eq!(got.up.len(), 4, "{pg}: one position per shard");
        assert_eq!(
            got.up.iter().filter(|&&o| o != ITEM_NONE).count(),
            2,
            "{pg}"
        );
    }
}
