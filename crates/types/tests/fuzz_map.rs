//! Structure-aware fuzzing of maps as a receiver gets them (a watch
//! stream, a monitor's snapshot): a valid map is bent in the ways a
//! hostile or broken sender could (ids out of range or disagreeing with
//! their keys, PG tables naming pools, PGs or OSDs that do not exist,
//! pools whose shape is impossible, CRUSH devices with huge ids) or its
//! encoding damaged, then decoded with `decode_map`. Whatever it accepts
//! must be usable: placement of its PGs, the OSD table, re-encoding,
//! with no panic and no allocation sized by a hostile number.
//!
//! 500 cases by default; `LOLIGO_FUZZ_CASES=N` for a longer run,
//! `LOLIGO_FUZZ_SEED=S` to start elsewhere.

use loligo_crush::map::Device;
use loligo_crush::ITEM_NONE;
use loligo_testkit::{damage, random_damage, Rng};
use loligo_types::{
    decode_map, encode, Change, Incremental, OsdInfo, OsdMap, PgId, WriteSetRecord,
};

fn base() -> OsdMap {
    let mut m = OsdMap::new("fsid-fuzz", "osd").unwrap();
    let boots = (0..6)
        .map(|id| Change::OsdBoot {
            id,
            addr: format!("127.0.0.1:{}", 6800 + id),
            host: "local".into(),
            crush_weight: 0x10000,
        })
        .collect();
    let step = |m: &mut OsdMap, changes| {
        let inc = Incremental {
            epoch: m.epoch + 1,
            changes,
        };
        m.apply(&inc).unwrap();
    };
    step(&mut m, boots);
    let p = m.replicated_pool("rbd", 16, 3, 2);
    step(&mut m, vec![Change::PoolCreate(p)]);
    let p = m.replicated_pool("two", 8, 2, 1);
    step(&mut m, vec![Change::PoolCreate(p)]);
    m
}

/// An OSD id: mostly plausible, sometimes hostile.
fn osd_id(r: &mut Rng) -> i32 {
    match r.below(8) {
        0 => -1 - r.below(5) as i32,
        1 => ITEM_NONE,
        2 => i32::MAX - r.below(3) as i32,
        3 => loligo_types::osdmap::OSDS_MAX + r.below(3) as i32 - 1,
        4 => r.below(1 << 20) as i32,
        _ => r.below(8) as i32,
    }
}

fn pg_id(r: &mut Rng) -> PgId {
    let pool = r.below(4);
    let ps = match r.below(4) {
        0 => u32::MAX - r.below(3) as u32,
        1 => r.below(1 << 20) as u32,
        _ => r.below(20) as u32,
    };
    PgId { pool, ps }
}

fn osd_list(r: &mut Rng) -> Vec<i32> {
    let n = if r.chance(100) {
        r.index(80)
    } else {
        r.index(5)
    };
    (0..n).map(|_| osd_id(r)).collect()
}

/// One structural change a sender could make.
fn bend(m: &mut OsdMap, r: &mut Rng) {
    match r.below(15) {
        0 => {
            let key = osd_id(r);
            let id = if r.chance(500) { key } else { osd_id(r) };
            m.osds.insert(
                key,
                OsdInfo {
                    id,
                    addr: "x:1".into(),
                    up: r.chance(500),
                    weight: r.next_u64() as u32,
                    up_from: r.below(10),
                    down_at: 0,
                    fullness: Default::default(),
                },
            );
        }
        1 => {
            let nth = m.osds.keys().nth(r.index(6)).copied();
            if let Some(o) = nth.and_then(|id| m.osds.get_mut(&id)) {
                o.id = osd_id(r);
            }
        }
        2..=4 => {
            let key = *m.pools.keys().nth(r.index(2)).unwrap();
            let p = m.pools.get_mut(&key).unwrap();
            match r.below(7) {
                0 => p.pg_num = [0, 1, 3, 1 << 16, u32::MAX][r.index(5)],
                1 => p.pgp_num = [0, 1, p.pg_num, u32::MAX][r.index(4)],
                2 => p.size = [0, 1, 3, 11, 64, u32::MAX][r.index(6)],
                3 => p.min_size = [0, 1, 2, 4, u32::MAX][r.index(5)],
                4 => p.crush_rule = [-1, 0, 1, 7, i32::MAX][r.index(5)],
                5 => p.id = r.below(5),
                _ => p.object_size_max = [0, 1, u64::MAX][r.index(3)],
            }
        }
        5 => m.pool_max = r.below(3),
        6 => {
            let pg = pg_id(r);
            let v = osd_list(r);
            m.pg_temp.insert(pg, v);
        }
        7 => {
            let pg = pg_id(r);
            let o = osd_id(r);
            m.primary_temp.insert(pg, o);
        }
        8 => {
            let pg = pg_id(r);
            let v = osd_list(r);
            let pairs = v.chunks(2).map(|c| (c[0], *c.last().unwrap())).collect();
            m.pg_upmap_items.insert(pg, pairs);
        }
        9 => {
            let pg = pg_id(r);
            let osds = osd_list(r);
            m.write_sets.insert(
                pg,
                WriteSetRecord {
                    interval: r.below(10),
                    osds,
                },
            );
        }
        10 => {
            let id = osd_id(r);
            std::sync::Arc::make_mut(&mut m.crush).devices.push(Device {
                id,
                name: format!("osd.{id}"),
                class: None,
            });
        }
        11 => {
            if !m.crush.rules.is_empty() && r.chance(500) {
                let i = r.index(m.crush.rules.len());
                std::sync::Arc::make_mut(&mut m.crush).rules.remove(i);
            }
        }
        12 => {
            if let Some(b) = std::sync::Arc::make_mut(&mut m.crush)
                .buckets
                .get_mut(r.index(4))
            {
                if let Some(it) = b.items.first_mut() {
                    it.id = osd_id(r);
                }
            }
        }
        13 => {
            // A user: sometimes valid, sometimes no client, a bad serial,
            // grants without rights or pools with impossible names.
            use loligo_types::caps::{AuthEntry, Caps, MonCap, OsdGrant};
            let entity = [
                "client.a",
                "client.",
                "osd.1",
                "client.a b",
                "client.\u{e9}",
            ][r.index(5)]
            .to_string();
            let serial = ["ab12", "", "xyz", &"f".repeat(80)][r.index(4)].to_string();
            let grants = (0..[0, 1, 2, 70][r.index(4)])
                .map(|_| OsdGrant {
                    read: r.chance(500),
                    write: r.chance(500),
                    exec: r.chance(200),
                    pool: match r.below(3) {
                        0 => None,
                        1 => Some(String::new()),
                        _ => Some("x".repeat([1, 128, 129][r.index(3)])),
                    },
                })
                .collect();
            let mon = [MonCap::None, MonCap::Read, MonCap::All][r.index(3)];
            let caps = Caps { mon, osd: grants };
            m.auth.insert(entity, AuthEntry { caps, serial });
        }
        _ => {
            // A plausible change, so that bent maps are not all refused.
            let pg = PgId {
                pool: 1,
                ps: r.below(16) as u32,
            };
            m.pg_temp
                .insert(pg, vec![r.below(6) as i32, r.below(6) as i32]);
        }
    }
}

/// What a receiver does with a map it accepted: none of it may panic.
fn use_map(m: &OsdMap) {
    let states = m.osd_states();
    assert!(states.exists.len() <= loligo_types::osdmap::OSDS_MAX as usize);
    let _ = m.up_in();
    if let Ok(mut placer) = m.placer() {
        for p in m.pools.values() {
            for ps in 0..p.pg_num.min(64) {
                let _ = placer.map_pg(PgId { pool: p.id, ps });
            }
        }
    }
    let back = decode_map(&encode(m)).expect("an accepted map re-encodes and checks out");
    assert_eq!(&back, m);
}

#[test]
fn bent_and_damaged_maps_are_refused_or_usable() {
    let seeds = loligo_testkit::fuzz_seeds(500);
    let cases = seeds.end - seeds.start;
    let good = base();
    use_map(&good);
    let (mut accepted, mut refused) = (0u64, 0u64);
    for seed in seeds {
        let mut r = Rng::new(seed);
        let mut m = good.clone();
        for _ in 0..1 + r.index(3) {
            bend(&mut m, &mut r);
        }
        let mut bytes = encode(&m);
        if r.chance(300) {
            bytes = damage(bytes, &random_damage(&mut r));
        }
        let got = std::panic::catch_unwind(|| match decode_map(&bytes) {
            Ok(m) => {
                use_map(&m);
                true
            }
            Err(_) => false,
        });
        match got {
            Ok(true) => accepted += 1,
            Ok(false) => refused += 1,
            Err(_) => panic!("seed {seed}: a map panicked its receiver (LOLIGO_FUZZ_SEED={seed} LOLIGO_FUZZ_CASES=1 replays it)"),
        }
    }
    eprintln!("{cases} maps: {accepted} accepted, {refused} refused");
    // Both sides were explored.
    assert!(
        accepted > cases / 20 && refused > cases / 4,
        "{accepted} / {refused}"
    );
}
