//! Structure-aware fuzzing of the admin commands a monitor decodes and
//! plans: sequences of commands with hostile values (empty, long and
//! odd names; pg_num, size and min_size at 0 and at their type's limit;
//! weights that are NaN, infinite or negative; OSD ids out of range;
//! erasure-code profiles with extreme k, m, l, s, alignment and stripe
//! unit; users with odd names and caps texts) are decoded from their
//! JSON (sometimes damaged), planned against
//! the current map, and their changes applied as the next epoch. Nothing
//! may panic; a change the map accepts leaves a map that checks out and
//! places every PG.
//!
//! 300 sequences of 12 commands by default; `LOLIGO_FUZZ_CASES=N` for a
//! longer run, `LOLIGO_FUZZ_SEED=S` to start elsewhere.

use loligo_mon::admin::{plan, Outcome};
use loligo_mon::Admin;
use loligo_testkit::{damage, random_damage, Rng};
use loligo_types::{Change, EcPlugin, Incremental, OsdMap, PgId};

fn base() -> OsdMap {
    let mut m = OsdMap::new("fsid-fuzz", "osd").unwrap();
    let boots = (0..5)
        .map(|id| Change::OsdBoot {
            id,
            addr: format!("127.0.0.1:{}", 6800 + id),
            host: "local".into(),
            crush_weight: 0x10000,
        })
        .collect();
    m.apply(&Incremental {
        epoch: 2,
        changes: boots,
    })
    .unwrap();
    m
}

fn name(r: &mut Rng) -> String {
    match r.below(7) {
        0 => String::new(),
        1 => "x".repeat(200),
        2 => "p\u{e9}ol".into(),
        3 => "a b".into(),
        4 => "osd.3".into(),
        5 => "local".into(),
        _ => ["rbd", "data", "ec", "backups"][r.index(4)].into(),
    }
}

fn u32_hostile(r: &mut Rng) -> u32 {
    [0, 1, 2, 3, 4, 8, 64, 255, 1 << 16, u32::MAX][r.index(10)]
}

fn id(r: &mut Rng) -> i32 {
    [-1, 0, 1, 4, 5, 9, 1 << 16, i32::MAX, i32::MIN][r.index(9)]
}

fn weight(r: &mut Rng) -> f64 {
    [0.0, 0.5, 1.0, -1.0, 65536.0, f64::NAN, f64::INFINITY, 1e300][r.index(8)]
}

fn command(r: &mut Rng) -> Admin {
    match r.below(20) {
        0 | 1 => Admin::PoolCreate {
            name: name(r),
            pg_num: u32_hostile(r),
            size: u32_hostile(r),
            min_size: r.chance(500).then(|| u32_hostile(r)),
            erasure_profile: r.chance(300).then(|| name(r)),
        },
        2 => {
            let n = name(r);
            Admin::PoolDelete {
                confirm: if r.chance(700) { n.clone() } else { name(r) },
                name: n,
            }
        }
        3 => Admin::PoolSet {
            name: name(r),
            key: [
                "size",
                "min_size",
                "pg_num",
                "crush_rule",
                "object_size_max",
                "compression_mode",
                "compression_algorithm",
                "read_coalesce",
                "bogus",
            ][r.index(9)]
            .into(),
            value: [
                "0",
                "1",
                "3",
                "-1",
                "4294967296",
                "NaN",
                "",
                "force",
                "lz4",
                "snappy",
                "aggressive",
            ][r.index(11)]
            .into(),
        },
        4 => Admin::OsdDown {
            ids: (0..r.index(4)).map(|_| id(r)).collect(),
        },
        5 => Admin::OsdOut {
            ids: (0..r.index(4)).map(|_| id(r)).collect(),
        },
        6 => Admin::OsdIn {
            ids: (0..r.index(4)).map(|_| id(r)).collect(),
        },
        7 => Admin::OsdReweight {
            id: id(r),
            weight: weight(r),
        },
        8 => Admin::OsdRm { id: id(r) },
        9 if r.chance(500) => Admin::OsdLost {
            id: id(r),
            confirm: r.chance(500),
        },
        9 => Admin::PgMarkUnfoundLost {
            pg: if r.chance(500) {
                format!("{}.{:x}", r.below(4), r.below(64))
            } else {
                name(r)
            },
            confirm: r.chance(500),
        },
        10 => Admin::CrushAdd {
            id: id(r),
            host: name(r),
            weight: weight(r),
        },
        11 if r.chance(300) => Admin::CrushSet {
            map: if r.chance(500) {
                serde_json::to_string(&base().crush).unwrap()
            } else {
                name(r)
            },
        },
        11 => Admin::CrushMove {
            name: name(r),
            parent: name(r),
        },
        12 => match r.below(3) {
            0 => Admin::CrushRm { name: name(r) },
            1 => Admin::CrushSetLocation {
                id: id(r),
                location: (0..r.index(3))
                    .map(|_| {
                        format!(
                            "{}={}",
                            ["host", "rack", "root", "osd", ""][r.index(5)],
                            name(r)
                        )
                    })
                    .collect(),
            },
            _ => Admin::CrushReweight {
                id: id(r),
                weight: weight(r),
            },
        },
        13 | 14 => Admin::EcProfileSet {
            name: name(r),
            plugin: [EcPlugin::ReedSolomon, EcPlugin::Zigzag, EcPlugin::Lrc][r.index(3)],
            k: u32_hostile(r),
            m: u32_hostile(r),
            s: u32_hostile(r),
            l: u32_hostile(r),
            optimal: r.chance(500),
            alignment: u32_hostile(r),
            stripe_unit: u32_hostile(r),
        },
        15 if r.chance(200) => Admin::Balancer {
            on: Some(r.chance(500)),
        },
        15 => Admin::EcProfileRm { name: name(r) },
        16 => match r.below(3) {
            0 => Admin::OsdDestroy {
                id: id(r),
                confirm: r.chance(700),
                force: r.chance(500),
            },
            1 => Admin::OsdPurge {
                id: id(r),
                confirm: r.chance(700),
                force: r.chance(500),
            },
            _ => Admin::OsdNew {
                id: r.chance(700).then(|| id(r)),
                serial: None,
            },
        },
        17 => Admin::AuthAdd {
            entity: user(r),
            caps: caps(r),
        },
        18 => Admin::AuthCaps {
            entity: user(r),
            caps: caps(r),
        },
        19 => match r.below(3) {
            0 => Admin::AuthRm { entity: user(r) },
            1 => Admin::AuthRotate { entity: user(r) },
            _ => Admin::AuthGet { entity: user(r) },
        },
        _ => Admin::OsdMapObject {
            pool: name(r),
            name: name(r),
        },
    }
}

fn user(r: &mut Rng) -> String {
    match r.below(4) {
        0 => format!("client.{}", name(r)),
        1 => name(r),
        2 => "client.admin".into(),
        _ => ["client.a", "client.b"][r.index(2)].into(),
    }
}

fn caps(r: &mut Rng) -> Vec<(String, String)> {
    (0..r.index(4))
        .map(|_| {
            let service = ["mon", "osd", "mgr", ""][r.index(4)].to_string();
            let text = [
                "allow r",
                "allow rw",
                "allow *",
                "allow rwx pool=backups",
                "allow r pool=",
                "allow",
                "deny r",
                "allow r, allow w pool=x",
            ][r.index(8)];
            let text = if r.chance(100) {
                format!("{text} pool={}", name(r))
            } else {
                text.to_string()
            };
            (service, text)
        })
        .collect()
}

/// Every PG of every pool (the first 64 of each) places without panic.
fn places(m: &OsdMap) {
    if let Ok(mut p) = m.placer() {
        for pool in m.pools.values() {
            for ps in 0..pool.pg_num.min(64) {
                let _ = p.map_pg(PgId { pool: pool.id, ps });
            }
        }
    }
}

#[test]
fn hostile_admin_commands_are_refused_or_leave_a_valid_map() {
    let seeds = loligo_testkit::fuzz_seeds(300);
    let cases = seeds.end - seeds.start;
    let (mut applied, mut refused, mut undecoded) = (0u64, 0u64, 0u64);
    for seed in seeds {
        let run = std::panic::catch_unwind(|| {
            let mut r = Rng::new(seed);
            let mut m = base();
            let mut counts = (0u64, 0u64, 0u64);
            for _ in 0..12 {
                let cmd = command(&mut r);
                let mut json = serde_json::to_vec(&cmd).unwrap();
                if r.chance(150) {
                    json = damage(json, &random_damage(&mut r));
                }
                let Ok(cmd) = serde_json::from_slice::<Admin>(&json) else {
                    counts.2 += 1;
                    continue;
                };
                let changes = match plan(&m, &cmd) {
                    Ok(Outcome::Changes(c)) => c,
                    Ok(Outcome::Answer(_)) => continue,
                    // What the monitor proposes once it made the key.
                    Ok(Outcome::Issue { entity, caps, also }) => {
                        let put = Change::AuthPut {
                            entity,
                            entry: loligo_types::caps::AuthEntry {
                                caps,
                                serial: format!("{:x}", r.next_u64() | 1),
                            },
                        };
                        also.into_iter().chain([put]).collect()
                    }
                    Err(_) => {
                        counts.1 += 1;
                        continue;
                    }
                };
                let inc = Incremental {
                    epoch: m.epoch + 1,
                    changes,
                };
                match m.apply(&inc) {
                    Ok(()) => {
                        counts.0 += 1;
                        m.validate().expect("an applied change leaves a valid map");
                        places(&m);
                    }
                    Err(_) => counts.1 += 1,
                }
            }
            counts
        });
        match run {
            Ok((a, b, c)) => {
                applied += a;
                refused += b;
                undecoded += c;
            }
            Err(_) => panic!(
                "seed {seed}: a command panicked the monitor's planning \
                 (LOLIGO_FUZZ_SEED={seed} LOLIGO_FUZZ_CASES=1 replays it)"
            ),
        }
    }
    eprintln!("{cases} sequences: {applied} applied, {refused} refused, {undecoded} undecodable");
    // Both sides were explored (about one command in ten applies).
    assert!(
        applied > cases / 2 && refused > cases,
        "{applied} / {refused}"
    );
}
