//! The cluster map: incrementals applied in order give the same map on
//! every holder, refused changes change nothing, encoding round-trips and
//! rejects garbage, placement follows OSD state and overrides.

use loligo_crush::{ITEM_NONE, MAX_NUM_REP};
use loligo_types::osdmap::OSDS_MAX;
use loligo_types::*;
use proptest::prelude::*;

fn boot(id: i32, host: &str) -> Change {
    Change::OsdBoot {
        id,
        addr: format!("127.0.0.1:{}", 6800 + id),
        host: host.into(),
        crush_weight: 0x10000,
    }
}

fn step(m: &mut OsdMap, changes: Vec<Change>) -> Result<Incremental> {
    let inc = Incremental {
        epoch: m.epoch + 1,
        changes,
    };
    m.apply(&inc)?;
    Ok(inc)
}

fn cluster(osds: i32) -> OsdMap {
    let mut m = OsdMap::new("fsid-1", "osd").unwrap();
    step(&mut m, (0..osds).map(|i| boot(i, "local")).collect()).unwrap();
    let p = m.replicated_pool("rbd", 32, 3, 2);
    step(&mut m, vec![Change::PoolCreate(p)]).unwrap();
    m
}

#[test]
fn boot_creates_osds_in_crush_and_pools_place_on_up_osds() {
    let mut m = cluster(4);
    assert_eq!(m.epoch, 3);
    assert_eq!(m.up_in(), (4, 4));
    let pool = m.pool_by_name("rbd").unwrap().clone();
    let pg = pool.object_pg(b"hello");
    assert!(pg.ps < 32);
    let acting = m.placer().unwrap().map_pg(pg).unwrap().acting;
    assert_eq!(acting.len(), 3);
    let down = acting[0];
    step(&mut m, vec![Change::OsdDown { id: down }]).unwrap();
    let after = m.placer().unwrap().map_pg(pg).unwrap();
    assert!(!after.acting.contains(&down));
    assert_eq!(after.acting.len(), 2, "down but in: CRUSH still picks it");
    step(&mut m, vec![Change::OsdOut { id: down }]).unwrap();
    let out = m.placer().unwrap().map_pg(pg).unwrap();
    assert_eq!(out.acting.len(), 3, "out: CRUSH picks another");
    assert!(!out.acting.contains(&down));
}

#[test]
fn refused_incremental_changes_nothing() {
    let mut m = cluster(3);
    let before = m.clone();
    let p = m.replicated_pool("rbd", 8, 3, 2);
    assert_eq!(
        step(&mut m, vec![Change::PoolCreate(p)]).unwrap_err(),
        MapError::PoolExists("rbd".into())
    );
    // A valid change followed by an invalid one: neither is kept.
    let p2 = m.replicated_pool("other", 8, 3, 4);
    let e = step(
        &mut m,
        vec![Change::OsdOut { id: 0 }, Change::PoolCreate(p2)],
    )
    .unwrap_err();
    assert!(matches!(e, MapError::Invalid(_)), "{e}");
    assert_eq!(m, before);
    for bad in [
        Change::OsdDown { id: 9 },
        Change::PoolDelete { id: 7 },
        Change::EcProfileRm {
            name: "nope".into(),
        },
        Change::OsdRemove { id: 0 },
        Change::PgTemp {
            pg: PgId { pool: 1, ps: 99 },
            osds: vec![0],
        },
    ] {
        assert!(step(&mut m, vec![bad.clone()]).is_err(), "{bad:?}");
        assert_eq!(m, before);
    }
    let gap = Incremental {
        epoch: m.epoch + 2,
        changes: vec![],
    };
    assert!(matches!(m.apply(&gap), Err(MapError::EpochGap { .. })));
}

#[test]
fn bad_names_and_sizes_are_refused() {
    let mut m = cluster(3);
    for (name, size, min) in [
        ("bad name", 3, 2),
        ("", 3, 2),
        ("x", 0, 0),
        ("y", 3, 0),
        ("z", 20, 2),
    ] {
        let p = m.replicated_pool(name, 8, size, min);
        assert!(step(&mut m, vec![Change::PoolCreate(p)]).is_err(), "{name}");
    }
}

#[test]
fn ec_profiles_are_validated_and_guarded() {
    let mut m = cluster(6);
    let prof = EcProfile {
        name: "zz".into(),
        plugin: EcPlugin::Zigzag,
        k: 4,
        m: 2,
        s: 1,
        l: 0,
        optimal: false,
        alignment: 4096,
        stripe_unit: 0,
    };
    let bad = EcProfile {
        k: 0,
        ..prof.clone()
    };
    assert!(matches!(
        step(&mut m, vec![Change::EcProfileSet(bad)]),
        Err(MapError::InvalidProfile(_))
    ));
    // A stripe unit that does not hold whole elements is refused.
    let odd = EcProfile {
        stripe_unit: 4096 * 8 + 1,
        ..prof.clone()
    };
    assert!(matches!(
        step(&mut m, vec![Change::EcProfileSet(odd)]),
        Err(MapError::InvalidProfile(_))
    ));
    step(&mut m, vec![Change::EcProfileSet(prof.clone())]).unwrap();
    let mut p = m.replicated_pool("ec", 8, 5, 4);
    p.kind = PoolKind::Erasure {
        profile: "zz".into(),
    };
    assert!(
        step(&mut m, vec![Change::PoolCreate(p.clone())]).is_err(),
        "size 5 != 6"
    );
    p.size = 6;
    // Shards are positions: the replicated (firstn) rule is refused.
    let e = step(&mut m, vec![Change::PoolCreate(p.clone())]).unwrap_err();
    assert!(e.to_string().contains("indep"), "{e}");
    let mut crush = (*m.crush).clone();
    let (rule, added) = crush_edit::ensure_erasure_rule(&mut crush).unwrap();
    assert!(added);
    assert_eq!(
        crush_edit::ensure_erasure_rule(&mut crush).unwrap(),
        (rule, false)
    );
    step(&mut m, vec![Change::CrushSet(crush)]).unwrap();
    p.crush_rule = rule;
    // Fewer than k shards to write on is refused.
    p.min_size = 3;
    assert!(step(&mut m, vec![Change::PoolCreate(p.clone())]).is_err());
    p.min_size = 5;
    step(&mut m, vec![Change::PoolCreate(p)]).unwrap();
    assert!(matches!(
        step(&mut m, vec![Change::EcProfileRm { name: "zz".into() }]),
        Err(MapError::ProfileInUse(..))
    ));
}

#[test]
fn pg_temp_and_upmap_override_placement() {
    let mut m = cluster(5);
    let pg = PgId { pool: 1, ps: 3 };
    let base = m.placer().unwrap().map_pg(pg).unwrap();
    let spare = (0..5).find(|o| !base.up.contains(o)).unwrap();
    step(
        &mut m,
        vec![Change::PgUpmapItems {
            pg,
            items: vec![(base.up[1], spare)],
        }],
    )
    .unwrap();
    let up = m.placer().unwrap().map_pg(pg).unwrap().up;
    assert_eq!(up[1], spare);
    step(
        &mut m,
        vec![Change::PgTemp {
            pg,
            osds: vec![base.up[2], base.up[0]],
        }],
    )
    .unwrap();
    let mm = m.placer().unwrap().map_pg(pg).unwrap();
    assert_eq!(mm.acting, vec![base.up[2], base.up[0]]);
    assert_eq!(mm.acting_primary, base.up[2]);
    step(&mut m, vec![Change::PgTemp { pg, osds: vec![] }]).unwrap();
    assert_eq!(m.placer().unwrap().map_pg(pg).unwrap().acting, up);
}

#[test]
fn primary_temp_moves_the_primary_only_while_it_is_an_up_member() {
    let mut m = cluster(5);
    let pg = PgId { pool: 1, ps: 4 };
    let base = m.placer().unwrap().map_pg(pg).unwrap();
    let second = base.acting[1];
    step(
        &mut m,
        vec![Change::PrimaryTemp {
            pg,
            osd: Some(second),
        }],
    )
    .unwrap();
    let mm = m.placer().unwrap().map_pg(pg).unwrap();
    // Positions stay (erasure-coded shards); only the primary moves.
    assert_eq!(mm.acting, base.acting);
    assert_eq!(mm.acting_primary, second);
    // Down, it is not the primary (the map still holds it).
    step(&mut m, vec![Change::OsdDown { id: second }]).unwrap();
    let down = m.placer().unwrap().map_pg(pg).unwrap();
    assert_ne!(down.acting_primary, second);
    assert_eq!(m.primary_temp.get(&pg), Some(&second));
    // An OSD that does not exist is refused; clearing restores CRUSH's.
    let before = m.clone();
    assert!(step(&mut m, vec![Change::PrimaryTemp { pg, osd: Some(99) }]).is_err());
    assert_eq!(m.primary_temp, before.primary_temp);
    step(&mut m, vec![Change::PrimaryTemp { pg, osd: None }]).unwrap();
    assert!(m.primary_temp.is_empty());
    // A deleted pool takes its entries with it.
    step(
        &mut m,
        vec![Change::PrimaryTemp {
            pg,
            osd: Some(base.acting[0]),
        }],
    )
    .unwrap();
    step(&mut m, vec![Change::PoolDelete { id: 1 }]).unwrap();
    assert!(m.primary_temp.is_empty());
}

#[test]
fn pg_write_sets_only_move_forward_and_go_with_their_pool() {
    let mut m = cluster(5);
    let pg = PgId { pool: 1, ps: 2 };
    let rw = |interval, osds: Vec<i32>| Change::RecordWriteSet {
        pg,
        record: WriteSetRecord { interval, osds },
    };
    step(&mut m, vec![rw(5, vec![0, 1])]).unwrap();
    step(&mut m, vec![rw(5, vec![0, 1, 2])]).unwrap();
    assert_eq!(m.write_sets[&pg].osds, vec![0, 1, 2]);
    assert!(matches!(
        step(&mut m, vec![rw(4, vec![3])]),
        Err(MapError::Invalid(_))
    ));
    assert!(matches!(
        step(&mut m, vec![rw(9, vec![])]),
        Err(MapError::Invalid(_))
    ));
    assert_eq!(m.write_sets[&pg].interval, 5);
    let back: OsdMap = decode("map", &encode(&m)).unwrap();
    assert_eq!(back.write_sets, m.write_sets);
    // Declaring an OSD lost: refused while it is up; once down, records
    // stop naming it and a record of only lost OSDs goes away.
    let other = PgId { pool: 1, ps: 3 };
    step(
        &mut m,
        vec![Change::RecordWriteSet {
            pg: other,
            record: WriteSetRecord {
                interval: 6,
                osds: vec![2],
            },
        }],
    )
    .unwrap();
    assert!(matches!(
        step(&mut m, vec![Change::OsdLost { id: 2 }]),
        Err(MapError::Invalid(_))
    ));
    step(&mut m, vec![Change::OsdDown { id: 2 }]).unwrap();
    step(&mut m, vec![Change::OsdLost { id: 2 }]).unwrap();
    assert_eq!(m.write_sets[&pg].osds, vec![0, 1]);
    assert!(!m.write_sets.contains_key(&other));
    // A late record of an interval osd.2 was in (it went down since, and
    // was declared lost) is refused, also once it boots again (its disk
    // replaced): it would name a copy that no longer holds the writes.
    assert!(matches!(
        step(&mut m, vec![rw(7, vec![0, 2])]),
        Err(MapError::Invalid(_))
    ));
    step(&mut m, vec![boot(2, "local")]).unwrap();
    let booted = m.epoch;
    assert!(matches!(
        step(&mut m, vec![rw(booted - 1, vec![0, 2])]),
        Err(MapError::Invalid(_))
    ));
    assert_eq!(m.write_sets[&pg].osds, vec![0, 1]);
    // A record of an interval that began after its boot is taken.
    step(&mut m, vec![rw(booted, vec![0, 2])]).unwrap();
    step(&mut m, vec![Change::PoolDelete { id: 1 }]).unwrap();
    assert!(m.write_sets.is_empty());
}

/// An incremental is checked by its changes (the map's write sets are
/// not walked on every epoch): a record naming an OSD id out of range, a
/// PG past its pool's pg_num or a pool that does not exist is refused
/// by the change itself, and the map stays as it was. The write sets
/// encode as an ordinary map, so maps written before they were a
/// persistent map decode the same.
#[test]
fn write_set_records_are_checked_by_their_change_and_encode_as_a_map() {
    let mut m = cluster(5);
    let rec = |pool: u64, ps: u32, osds: Vec<i32>| Change::RecordWriteSet {
        pg: PgId { pool, ps },
        record: WriteSetRecord { interval: 3, osds },
    };
    step(&mut m, vec![rec(1, 0, vec![0, 1, 2])]).unwrap();
    let before = m.clone();
    for bad in [
        rec(1, 1, vec![0, OSDS_MAX]),
        rec(1, 1, vec![-5]),
        rec(1, 1, (0..MAX_NUM_REP as i32 + 1).collect()),
        rec(1, 32, vec![0]),
        rec(9, 0, vec![0]),
    ] {
        let what = format!("{bad:?}");
        assert!(
            step(&mut m, vec![rec(1, 2, vec![1]), bad]).is_err(),
            "{what}"
        );
        assert_eq!(m, before, "{what}");
    }
    // A record of an absent member (ITEM_NONE) is an EC shard nobody holds.
    step(&mut m, vec![rec(1, 3, vec![0, ITEM_NONE, 2])]).unwrap();
    let plain: std::collections::BTreeMap<PgId, WriteSetRecord> =
        m.write_sets.iter().map(|(k, v)| (*k, v.clone())).collect();
    assert_eq!(plain.len(), 2);
    assert_eq!(
        postcard::to_stdvec(&plain).unwrap(),
        postcard::to_stdvec(&m.write_sets).unwrap()
    );
}

#[test]
fn users_are_recorded_checked_and_revoked() {
    use loligo_types::caps::{AuthEntry, Caps, ADMIN};
    let mut m = cluster(3);
    let pairs = |t: &[(&str, &str)]| -> Vec<(String, String)> {
        t.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    let caps = Caps::parse(&pairs(&[("mon", "allow r"), ("osd", "allow rw pool=rbd")])).unwrap();
    let put = |serial: &str| Change::AuthPut {
        entity: "client.backup".into(),
        entry: AuthEntry {
            caps: caps.clone(),
            serial: serial.into(),
        },
    };
    // Unknown clients have nothing; the bootstrap admin everything until
    // it has an entry.
    assert!(m.caps_of("client.backup", "ab").is_err());
    assert_eq!(m.caps_of(ADMIN, "anything").unwrap(), &Caps::all());
    step(&mut m, vec![put("ab12")]).unwrap();
    assert_eq!(m.caps_of("client.backup", "ab12").unwrap(), &caps);
    // A rotated key: the old serial is refused.
    step(&mut m, vec![put("cd34")]).unwrap();
    let e = m.caps_of("client.backup", "ab12").unwrap_err();
    assert!(e.contains("rotated"), "{e}");
    assert!(m.caps_of("client.backup", "cd34").is_ok());
    // Texts read back to the same caps.
    assert_eq!(Caps::parse(&caps.texts()).unwrap(), caps);
    assert_eq!(Caps::parse(&Caps::all().texts()).unwrap(), Caps::all());
    // The map round-trips with its users, and a map decoded with a bad
    // entry is refused.
    let back = decode_map(&encode(&m)).unwrap();
    assert_eq!(back, m);
    let mut bad = m.clone();
    bad.auth.insert(
        "osd.1".into(),
        AuthEntry {
            caps: Caps::all(),
            serial: "1".into(),
        },
    );
    assert!(decode_map(&encode(&bad)).is_err());
    // Refused changes: not a client, bad serials, removing a stranger.
    let before = m.clone();
    for c in [
        Change::AuthPut {
            entity: "osd.1".into(),
            entry: AuthEntry {
                caps: Caps::all(),
                serial: "1".into(),
            },
        },
        Change::AuthPut {
            entity: "client.x".into(),
            entry: AuthEntry {
                caps: Caps::all(),
                serial: "not hex".into(),
            },
        },
        Change::AuthPut {
            entity: "client.x".into(),
            entry: AuthEntry {
                caps: Caps::all(),
                serial: String::new(),
            },
        },
        Change::AuthRm {
            entity: "client.nobody".into(),
        },
    ] {
        assert!(step(&mut m, vec![c.clone()]).is_err(), "{c:?}");
        assert_eq!(m, before);
    }
    step(
        &mut m,
        vec![Change::AuthRm {
            entity: "client.backup".into(),
        }],
    )
    .unwrap();
    assert!(m.caps_of("client.backup", "cd34").is_err());
}

#[test]
fn a_boot_places_an_osd_once_and_never_with_a_giant_weight() {
    use loligo_types::osdmap::{check_boot, BOOT_WEIGHT_MAX};
    let mut m = cluster(3);
    let weight_of = |m: &OsdMap, id: i32| {
        m.crush
            .buckets
            .iter()
            .flat_map(|b| &b.items)
            .find(|it| it.id == id)
            .map(|it| it.weight)
    };
    let boot_as = |id: i32, host: &str, w: u32| Change::OsdBoot {
        id,
        addr: format!("127.0.0.1:{}", 6800 + id),
        host: host.into(),
        crush_weight: w,
    };
    // A later boot with another weight or host changes neither.
    step(&mut m, vec![Change::OsdDown { id: 1 }]).unwrap();
    step(&mut m, vec![boot_as(1, "elsewhere", 40 << 16)]).unwrap();
    assert_eq!(weight_of(&m, 1), Some(0x10000));
    assert!(crush_edit::item_id(&m.crush, "elsewhere").is_none());
    // A first boot past the bound, or malformed, is refused alone,
    // before boots are gathered (the monitor's check); applying refuses
    // what it always did and changes nothing then (a boot already in a
    // Raft log replays as it first applied).
    let before = m.clone();
    for (c, why, apply_refuses) in [
        (boot_as(7, "h7", BOOT_WEIGHT_MAX + 1), "weight", false),
        // (This one overflows its bucket's weight, which apply refuses.)
        (boot_as(7, "h7", u32::MAX), "weight", true),
        (boot_as(7, "", 0x10000), "host", true),
        (boot_as(7, "two words", 0x10000), "host", true),
        (boot_as(7, &"h".repeat(200), 0x10000), "host", false),
        (boot_as(-1, "h", 0x10000), "id", true),
    ] {
        let Change::OsdBoot {
            id,
            addr,
            host,
            crush_weight,
        } = &c
        else {
            unreachable!()
        };
        let e = check_boot(*id, addr, host, *crush_weight).unwrap_err();
        assert!(e.to_string().contains(why), "{e}");
        let mut after = m.clone();
        assert_eq!(
            step(&mut after, vec![c.clone()]).is_err(),
            apply_refuses,
            "{c:?}"
        );
        assert_eq!(m, before);
    }
    // At the bound: placed with that weight.
    step(&mut m, vec![boot_as(7, "h7", BOOT_WEIGHT_MAX)]).unwrap();
    assert_eq!(weight_of(&m, 7), Some(BOOT_WEIGHT_MAX));
}

#[test]
fn users_and_daemon_keys_are_limited_apart() {
    use loligo_types::caps::{AuthEntry, Caps};
    use loligo_types::osdmap::AUTH_ENTRIES_MAX;
    let mut m = cluster(3);
    let entry = |serial: u64| AuthEntry {
        caps: Caps::default(),
        serial: format!("{serial:x}"),
    };
    // A full table of users, in one step.
    let users = (0..AUTH_ENTRIES_MAX as u64)
        .map(|i| Change::AuthPut {
            entity: format!("client.u{i}"),
            entry: entry(i + 1),
        })
        .collect();
    step(&mut m, users).unwrap();
    assert_eq!(m.auth_counts(), (AUTH_ENTRIES_MAX, 0));
    // One user more is refused; the daemons' keys still have room.
    let more = Change::AuthPut {
        entity: "client.one-more".into(),
        entry: entry(7),
    };
    let e = step(&mut m, vec![more]).unwrap_err();
    assert!(e.to_string().contains("users"), "{e}");
    let daemons = (0..3)
        .map(|i| Change::AuthPut {
            entity: format!("osd.{i}"),
            entry: entry(100 + i),
        })
        .chain([Change::AuthPut {
            entity: "mon.0".into(),
            entry: entry(9),
        }])
        .collect();
    step(&mut m, daemons).unwrap();
    assert_eq!(m.auth_counts(), (AUTH_ENTRIES_MAX, 4));
    // A user's key may still be rotated, and the map reads back.
    step(
        &mut m,
        vec![Change::AuthPut {
            entity: "client.u0".into(),
            entry: entry(0xabc),
        }],
    )
    .unwrap();
    assert_eq!(decode_map(&encode(&m)).unwrap(), m);
}

#[test]
fn maps_of_the_previous_formats_still_read() {
    // An LGM9 map is today's without the pools' options (one byte, the
    // empty table's length); an LGM8 map that without the PG merges (two
    // bytes, the empty tables' lengths); an LGM7 map that without the destroyed OSDs (one byte, the
    // empty set's length) and the balancer's switch (one byte); an LGM6 map that without the monitors' outs
    // (one byte) and the full ratios (three varints of three bytes at
    // their defaults); an LGM5 map that without the flags, an LGM4 map
    // that without the monitor map, an LGM3 map that without the
    // unfound-lost marks, and an LGM2 map that without the user table;
    // postcard ends each with one byte (the empty table's length).
    let m = cluster(3);
    let now = encode(&m);
    assert_eq!(&now[..4], b"LGMA");
    const LGMA_TAIL: usize = 1;
    const LGM9_TAIL: usize = LGMA_TAIL + 2;
    const LGM8_TAIL: usize = LGM9_TAIL + 2;
    const LGM7_TAIL: usize = LGM8_TAIL + 1 + 3 * 3;
    assert_eq!(
        now[now.len() - LGM7_TAIL - 4..now.len() - 9 - LGM8_TAIL],
        [0, 0, 0, 0, 0]
    );
    // An older map with a user: its table reads back.
    use loligo_types::caps::{AuthEntry, Caps};
    let mut users = m.clone();
    step(
        &mut users,
        vec![Change::AuthPut {
            entity: "client.backup".into(),
            entry: AuthEntry {
                caps: Caps::all(),
                serial: "ab12".into(),
            },
        }],
    )
    .unwrap();
    let with_users = encode(&users);
    for (magic, cut, want) in [
        (b"LGM9", LGMA_TAIL, &users),
        (b"LGM8", LGM9_TAIL, &users),
        (b"LGM7", LGM8_TAIL, &users),
        (b"LGM6", LGM7_TAIL, &users),
        (b"LGM5", LGM7_TAIL + 1, &users),
        (b"LGM4", LGM7_TAIL + 2, &users),
        (b"LGM3", LGM7_TAIL + 3, &users),
        (b"LGM2", LGM7_TAIL + 4, &m),
    ] {
        let bytes = if magic == b"LGM2" { &now } else { &with_users };
        let mut old = magic.to_vec();
        old.extend_from_slice(&bytes[4..bytes.len() - cut]);
        assert_eq!(&decode_map(&old).unwrap(), want, "{magic:?}");
        // And one that lies about its version is refused.
        let mut lie = magic.to_vec();
        lie.extend_from_slice(&bytes[4..]);
        assert!(decode_map(&lie).is_err(), "{magic:?}");
    }
}

/// A destroyed OSD is out, named by no write-set record and refused at
/// boot until `osd new` makes way for its replacement, which boots in
/// under the same id and CRUSH place; an up OSD is never destroyed;
/// `osd new` of any other OSD is refused. The maps read back.
#[test]
fn a_destroyed_osd_boots_again_only_after_osd_new() {
    use loligo_types::WriteSetRecord;
    let mut m = cluster(4);
    let boot = |id: i32| Change::OsdBoot {
        id,
        addr: format!("127.0.0.1:{}", 6800 + id),
        host: format!("h{id}"),
        crush_weight: 0x10000,
    };
    let pg = loligo_types::PgId { pool: 1, ps: 0 };
    let record = WriteSetRecord {
        interval: 2,
        osds: vec![3, 1, 2],
    };
    step(&mut m, vec![Change::RecordWriteSet { pg, record }]).unwrap();
    let crush_before = m.crush.clone();
    let e = step(&mut m, vec![Change::OsdDestroy { id: 3 }]).unwrap_err();
    assert!(e.to_string().contains("is up"), "{e}");
    step(&mut m, vec![Change::OsdDown { id: 3 }]).unwrap();
    step(&mut m, vec![Change::OsdDestroy { id: 3 }]).unwrap();
    assert!(m.destroyed.contains(&3) && !m.osds[&3].is_in());
    assert_eq!(
        m.write_sets.get(&pg).map(|r| r.osds.clone()),
        Some(vec![1, 2])
    );
    assert_eq!(m.crush, crush_before, "its CRUSH place stays");
    assert_eq!(decode_map(&encode(&m)).unwrap(), m);
    let e = step(&mut m, vec![boot(3)]).unwrap_err();
    assert!(e.to_string().contains("destroyed"), "{e}");
    let e = step(&mut m, vec![Change::OsdNew { id: 1 }]).unwrap_err();
    assert!(e.to_string().contains("not destroyed"), "{e}");
    step(&mut m, vec![Change::OsdNew { id: 3 }]).unwrap();
    assert!(m.destroyed.is_empty());
    step(&mut m, vec![boot(3)]).unwrap();
    assert!(
        m.osds[&3].up && m.osds[&3].is_in(),
        "the replacement boots in"
    );
    assert_eq!(m.crush, crush_before);
    // Only a destroyed OSD is made way for.
    let e = step(&mut m, vec![Change::OsdNew { id: 7 }]).unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
    step(&mut m, vec![boot(7)]).unwrap();
    // Removal forgets a destroyed OSD.
    step(&mut m, vec![Change::OsdDown { id: 7 }]).unwrap();
    step(&mut m, vec![Change::OsdDestroy { id: 7 }]).unwrap();
    step(&mut m, vec![Change::OsdRemove { id: 7 }]).unwrap();
    assert!(m.destroyed.is_empty() && !m.osds.contains_key(&7));
    assert_eq!(decode_map(&encode(&m)).unwrap(), m);
}

/// `osd set` and `osd unset` keep a flag in the map, which encodes it;
/// Ceph's flags not built yet are refused by name.
#[test]
fn flags_are_set_and_cleared_and_unknown_ones_refused() {
    use loligo_types::osdmap::OsdFlag;
    let mut m = cluster(3);
    let set = |flag, on| vec![Change::OsdFlag { flag, on }];
    step(&mut m, set(OsdFlag::NoDeepScrub, true)).unwrap();
    step(&mut m, set(OsdFlag::NoScrub, true)).unwrap();
    assert_eq!(
        m.flags.iter().copied().collect::<Vec<_>>(),
        vec![OsdFlag::NoScrub, OsdFlag::NoDeepScrub]
    );
    assert_eq!(decode_map(&encode(&m)).unwrap(), m);
    step(&mut m, set(OsdFlag::NoScrub, false)).unwrap();
    step(&mut m, set(OsdFlag::NoScrub, false)).unwrap();
    assert_eq!(m.flags.len(), 1);
    assert_eq!(OsdFlag::parse("nodeep-scrub"), Ok(OsdFlag::NoDeepScrub));
    for f in OsdFlag::ALL {
        assert_eq!(OsdFlag::parse(f.name()), Ok(f));
    }
    assert!(OsdFlag::parse("pause")
        .unwrap_err()
        .contains("not supported yet"));
    assert!(OsdFlag::parse("nosuch")
        .unwrap_err()
        .contains("unknown flag"));
}

/// An OSD the monitors marked out comes back in when it boots, unless
/// `noin` is set; one an operator marked out stays out; with `noin` a
/// new OSD starts out. The maps read back.
#[test]
fn monitors_outs_come_back_in_at_boot_unless_noin() {
    use loligo_types::osdmap::OsdFlag;
    let mut m = cluster(4);
    let boot = |id: i32| Change::OsdBoot {
        id,
        addr: format!("127.0.0.1:{}", 6800 + id),
        host: format!("h{id}"),
        crush_weight: 0x10000,
    };
    let down = |id| Change::OsdDown { id };
    step(&mut m, vec![down(0), down(1), down(2)]).unwrap();
    step(
        &mut m,
        vec![
            Change::OsdAutoOut { id: 0 },
            Change::OsdAutoOut { id: 1 },
            Change::OsdOut { id: 2 },
        ],
    )
    .unwrap();
    assert_eq!(m.auto_out.iter().copied().collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(decode_map(&encode(&m)).unwrap(), m);
    step(
        &mut m,
        vec![Change::OsdFlag {
            flag: OsdFlag::NoIn,
            on: true,
        }],
    )
    .unwrap();
    step(&mut m, vec![boot(1), boot(2), boot(9)]).unwrap();
    let is_in = |m: &loligo_types::OsdMap, id| m.osds[&id].is_in();
    assert!(!is_in(&m, 1) && !is_in(&m, 2) && !is_in(&m, 9));
    assert!(
        m.auto_out.contains(&1),
        "noin keeps the mark for a later boot"
    );
    step(
        &mut m,
        vec![Change::OsdFlag {
            flag: OsdFlag::NoIn,
            on: false,
        }],
    )
    .unwrap();
    step(&mut m, vec![boot(0)]).unwrap();
    assert!(is_in(&m, 0) && !m.auto_out.contains(&0));
    step(&mut m, vec![down(2)]).unwrap();
    step(&mut m, vec![boot(2)]).unwrap();
    assert!(!is_in(&m, 2), "an operator's out stays out");
    // An operator's in clears the monitors' mark; removal forgets it.
    step(&mut m, vec![Change::OsdIn { id: 1 }]).unwrap();
    assert!(is_in(&m, 1) && !m.auto_out.contains(&1));
    step(&mut m, vec![down(3)]).unwrap();
    step(&mut m, vec![Change::OsdAutoOut { id: 3 }]).unwrap();
    step(&mut m, vec![Change::OsdRemove { id: 3 }]).unwrap();
    assert!(m.auto_out.is_empty());
    assert_eq!(decode_map(&encode(&m)).unwrap(), m);
}

/// The full ratios are set one at a time and must stay in order; the
/// fullness of a device follows them exactly at the edges.
#[test]
fn full_ratios_stay_in_order_and_decide_fullness() {
    use loligo_types::osdmap::{FullRatios, RatioKind};
    use loligo_types::Fullness;
    let mut m = cluster(3);
    assert_eq!(m.full_ratios, FullRatios::default());
    let set = |kind, ppm| vec![Change::FullRatio { kind, ppm }];
    step(&mut m, set(RatioKind::Full, 970_000)).unwrap();
    step(&mut m, set(RatioKind::BackfillFull, 930_000)).unwrap();
    let e = step(&mut m, set(RatioKind::NearFull, 940_000)).unwrap_err();
    assert!(
        e.to_string().contains("nearfull <= backfillfull <= full"),
        "{e}"
    );
    assert!(step(&mut m, set(RatioKind::Full, 1_000_001)).is_err());
    assert!(step(&mut m, set(RatioKind::NearFull, 0)).is_err());
    assert_eq!(m.full_ratios.full, 970_000);
    assert_eq!(decode_map(&encode(&m)).unwrap(), m);
    let r = m.full_ratios;
    assert_eq!(r.fullness(97, 100), Fullness::Full);
    assert_eq!(r.fullness(96, 100), Fullness::BackfillFull);
    assert_eq!(r.fullness(93, 100), Fullness::BackfillFull);
    assert_eq!(r.fullness(929_999, 1_000_000), Fullness::NearFull);
    assert_eq!(r.fullness(84, 100), Fullness::Ok);
    assert_eq!(r.fullness(u64::MAX, u64::MAX), Fullness::Full);
    assert_eq!(r.fullness(5, 0), Fullness::Ok);
    assert_eq!(Fullness::of(95, 100), Fullness::Full);
    assert_eq!(Fullness::of(94, 100), Fullness::BackfillFull);
}

#[test]
fn the_monitor_map_is_set_whole_and_checked() {
    let mut m = cluster(3);
    let mons: std::collections::BTreeMap<u64, String> = [
        (0, "10.0.0.1:6789".to_string()),
        (1, "mon-b.example:6789".to_string()),
    ]
    .into();
    step(&mut m, vec![Change::MonMap { mons: mons.clone() }]).unwrap();
    assert_eq!(m.mons, mons);
    assert_eq!(decode_map(&encode(&m)).unwrap(), m);
    let before = m.clone();
    let too_many = (0..17).map(|i| (i, format!("h:{}", 6789 + i))).collect();
    for bad in [
        [(0, "no-port".to_string())].into(),
        [(0, ":6789".to_string())].into(),
        [(0, "h:99999".to_string())].into(),
        [(u64::MAX, "h:6789".to_string())].into(),
        too_many,
    ] {
        assert!(step(&mut m, vec![Change::MonMap { mons: bad }]).is_err());
        assert_eq!(m, before);
    }
    // A daemon's recorded key is what its diallers insist on.
    use loligo_types::caps::{AuthEntry, Caps};
    assert_eq!(m.daemon_serial("mon.0"), None);
    step(
        &mut m,
        vec![Change::AuthPut {
            entity: "mon.0".into(),
            entry: AuthEntry {
                caps: Caps::default(),
                serial: "ab12".into(),
            },
        }],
    )
    .unwrap();
    assert_eq!(m.daemon_serial("mon.0"), Some("ab12"));
    assert!(m.daemon_key_valid("mon.0", "ab12").is_ok());
    assert!(m.daemon_key_valid("mon.0", "cd34").is_err());
}

#[test]
fn marking_a_pgs_unfound_objects_lost_records_the_epoch() {
    let mut m = cluster(3);
    let pg = PgId { pool: 1, ps: 2 };
    let e = m.epoch + 1;
    step(&mut m, vec![Change::PgMarkUnfoundLost { pg }]).unwrap();
    assert_eq!(m.unfound_lost.get(&pg), Some(&e));
    // Through the encoding and back.
    assert_eq!(decode_map(&encode(&m)).unwrap(), m);
    // Marked again: the newer epoch.
    step(&mut m, vec![Change::PgMarkUnfoundLost { pg }]).unwrap();
    assert_eq!(m.unfound_lost.get(&pg), Some(&(e + 1)));
    // No such PG: refused, and the map is unchanged.
    let before = m.clone();
    let past = PgId {
        pool: 1,
        ps: 10_000,
    };
    assert!(step(&mut m, vec![Change::PgMarkUnfoundLost { pg: past }]).is_err());
    let none = PgId { pool: 99, ps: 0 };
    assert!(step(&mut m, vec![Change::PgMarkUnfoundLost { pg: none }]).is_err());
    assert_eq!(m, before);
    // A mark from the future is a malformed map.
    let mut bad = m.clone();
    bad.unfound_lost.insert(pg, bad.epoch + 5);
    assert!(decode_map(&encode(&bad)).is_err());
}

#[test]
fn encoding_round_trips_and_rejects_garbage() {
    let m = cluster(4);
    let b = encode(&m);
    let back: OsdMap = decode("map", &b).unwrap();
    assert_eq!(back, m);
    assert!(b.len() < 2048, "compact: {} bytes", b.len());
    assert!(decode::<OsdMap>("map", &b[..b.len() / 2]).is_err());
    assert!(decode::<OsdMap>("map", b"garbage").is_err());
    let mut flipped = b.clone();
    flipped[0] ^= 1;
    assert!(decode::<OsdMap>("map", &flipped).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any bytes decode to an error or a value, never a panic.
    #[test]
    fn decode_never_panics(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut b = if body.first().is_some_and(|x| x % 2 == 0) {
            b"LGM2".to_vec()
        } else {
            b"LGM3".to_vec()
        };
        b.extend(body);
        let _ = decode::<OsdMap>("map", &b);
        let _ = decode::<Incremental>("incremental", &b);
    }

    /// A follower that applies the encoded incrementals holds the same map
    /// as the leader, whatever changes were refused along the way.
    #[test]
    fn followers_converge(ops in proptest::collection::vec((0u8..7, 0i32..6), 1..40)) {
        let mut leader = OsdMap::new("f", "osd").unwrap();
        let mut follower = leader.clone();
        for (op, id) in ops {
            let c = match op {
                0 => boot(id, "h"),
                1 => Change::OsdDown { id },
                2 => Change::OsdOut { id },
                3 => Change::OsdIn { id },
                4 => Change::PoolCreate(leader.replicated_pool(&format!("p{id}"), 8, 2, 1)),
                5 => Change::PoolDelete { id: id as u64 },
                _ => Change::OsdRemove { id },
            };
            if let Ok(inc) = step(&mut leader, vec![c]) {
                let wire: Incremental = decode("incremental", &encode(&inc)).unwrap();
                follower.apply(&wire).unwrap();
            }
        }
        prop_assert_eq!(&leader, &follower);
        leader.validate().unwrap();
    }
}

/// Add an erasure-coded pool `name` of `pg_num` PGs (Reed-Solomon 2+1,
/// profile "rs", with the erasure rule).
fn add_rs21_pool(m: &mut OsdMap, name: &str, pg_num: u32) {
    let prof = EcProfile {
        name: "rs".into(),
        plugin: EcPlugin::ReedSolomon,
        k: 2,
        m: 1,
        s: 1,
        l: 0,
        optimal: false,
        alignment: 4096,
        stripe_unit: 0,
    };
    if !m.ec_profiles.contains_key("rs") {
        step(m, vec![Change::EcProfileSet(prof)]).unwrap();
    }
    let mut crush = (*m.crush).clone();
    let (rule, _) = crush_edit::ensure_erasure_rule(&mut crush).unwrap();
    step(m, vec![Change::CrushSet(crush)]).unwrap();
    let mut p = m.replicated_pool(name, pg_num, 3, 3);
    p.kind = PoolKind::Erasure {
        profile: "rs".into(),
    };
    p.crush_rule = rule;
    step(m, vec![Change::PoolCreate(p)]).unwrap();
}

/// An erasure-coded pg_temp keeps positions: it names one OSD (or a hole)
/// per shard, and an OSD that goes down leaves a hole, never a shift.
#[test]
fn erasure_coded_pg_temp_keeps_shard_positions() {
    let mut m = cluster(7);
    add_rs21_pool(&mut m, "ec", 8);
    let pool = m.pool_by_name("ec").unwrap().id;
    let pg = PgId { pool, ps: 1 };
    let base = m.placer().unwrap().map_pg(pg).unwrap();
    let stray = (0..7).find(|o| !base.up.contains(o)).unwrap();
    // A pg_temp must name every shard.
    let before = m.clone();
    let short = vec![base.up[0], stray];
    assert!(step(&mut m, vec![Change::PgTemp { pg, osds: short }]).is_err());
    assert!(step(
        &mut m,
        vec![Change::PgTemp {
            pg,
            osds: vec![base.up[0], 99, -1]
        }]
    )
    .is_err());
    assert_eq!(m.pg_temp, before.pg_temp);
    // The stray goes back to shard 1; -1 is stored as CRUSH's none.
    let osds = vec![base.up[0], stray, -1];
    step(&mut m, vec![Change::PgTemp { pg, osds }]).unwrap();
    assert_eq!(m.pg_temp[&pg], vec![base.up[0], stray, ITEM_NONE]);
    let mm = m.placer().unwrap().map_pg(pg).unwrap();
    assert_eq!(mm.acting, vec![base.up[0], stray, ITEM_NONE]);
    assert_eq!(mm.up, base.up, "CRUSH's set is unchanged");
    assert_eq!(mm.acting_primary, base.up[0]);
    // The first goes down: a hole at its shard, the stray stays at 1.
    step(&mut m, vec![Change::OsdDown { id: base.up[0] }]).unwrap();
    let down = m.placer().unwrap().map_pg(pg).unwrap();
    assert_eq!(down.acting, vec![ITEM_NONE, stray, ITEM_NONE]);
    assert_eq!(down.acting_primary, stray);
    step(&mut m, vec![Change::PgTemp { pg, osds: vec![] }]).unwrap();
    assert_eq!(
        m.placer().unwrap().map_pg(pg).unwrap().acting,
        m.placer().unwrap().map_pg(pg).unwrap().up
    );
}

/// A record is short when it names fewer members than hold every
/// acknowledged write: k for an erasure-coded pool, one for a replicated
/// pool; holes do not count. No record is not a short one.
#[test]
fn a_pgs_record_is_short_below_k_members() {
    let mut m = cluster(5);
    add_rs21_pool(&mut m, "ec", 4);
    let rep = m.replicated_pool("rep", 4, 3, 2);
    step(&mut m, vec![Change::PoolCreate(rep)]).unwrap();
    let ec = PgId {
        pool: m.pool_by_name("ec").unwrap().id,
        ps: 0,
    };
    let rep = PgId {
        pool: m.pool_by_name("rep").unwrap().id,
        ps: 0,
    };
    assert!(!m.record_short(ec) && !m.record_short(rep), "no record yet");
    let record = |osds: Vec<i32>| WriteSetRecord {
        interval: 100,
        osds,
    };
    let set = |m: &mut OsdMap, pg, osds| {
        step(
            m,
            vec![Change::RecordWriteSet {
                pg,
                record: record(osds),
            }],
        )
        .unwrap()
    };
    set(&mut m, ec, vec![0, ITEM_NONE]);
    assert!(m.record_short(ec), "one member of k = 2");
    set(&mut m, ec, vec![0, ITEM_NONE, 1]);
    assert!(!m.record_short(ec));
    set(&mut m, rep, vec![3]);
    assert!(!m.record_short(rep), "one replica holds every write");
    // What each change may move.
    assert_eq!(boot(9, "h9").reach(), Reach::All);
    let temp = Change::PgTemp {
        pg: ec,
        osds: vec![],
    };
    assert!(temp.reach().covers(ec) && !temp.reach().covers(rep));
    let pool = Change::PoolDelete { id: rep.pool };
    assert!(pool.reach().covers(rep) && !pool.reach().covers(ec));
    let rec = Change::RecordWriteSet {
        pg: ec,
        record: record(vec![0]),
    };
    assert_eq!(rec.reach(), Reach::Nothing);
}

/// `osd crush set-location` makes the buckets it names that are missing,
/// each under the next (the highest under the root), up to the first
/// that exists, and moves the OSD there with its weight; a device type,
/// a bucket of another type or an unplaced OSD is refused; `osd crush
/// move` takes an OSD too; `osd crush reweight` sets its weight. The
/// map compiles after each and reads back.
#[test]
fn an_osd_is_placed_moved_and_reweighted_in_crush() {
    use loligo_types::crush_edit::{parent_name, tree};
    let mut m = cluster(4);
    let loc = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let set = |id, pairs: &[(&str, &str)]| Change::CrushSetLocation {
        id,
        location: loc(pairs),
    };
    let weight_of = |m: &loligo_types::OsdMap, id: i32| {
        (m.crush.buckets.iter())
            .flat_map(|b| &b.items)
            .find(|it| it.id == id)
            .map(|it| it.weight)
    };
    let w3 = weight_of(&m, 3);
    step(&mut m, vec![set(3, &[("host", "h9")])]).unwrap();
    assert_eq!(parent_name(&m.crush, 3), Some("h9"));
    assert_eq!(weight_of(&m, 3), w3, "its weight stays");
    // A rack made under the root, a new host under it.
    step(&mut m, vec![set(2, &[("rack", "r1"), ("host", "h8")])]).unwrap();
    assert_eq!(parent_name(&m.crush, 2), Some("h8"));
    let rows = tree(&m.crush);
    let depth = |name: &str| rows.iter().find(|r| r.3 == name).map(|r| r.0);
    assert_eq!(depth("r1"), Some(1));
    assert_eq!(depth("h8"), Some(2));
    assert_eq!(depth("osd.2"), Some(3));
    // An existing host stays where it is; only the OSD moves.
    step(&mut m, vec![set(1, &[("rack", "r2"), ("host", "h8")])]).unwrap();
    assert_eq!(parent_name(&m.crush, 1), Some("h8"));
    assert_eq!(depth("h8"), Some(2));
    for bad in [
        set(1, &[("osd", "x")]),
        set(1, &[("host", "r1")]),
        set(1, &[]),
        set(9, &[("host", "h1")]),
        set(1, &[("nosuchtype", "x")]),
        set(-2, &[("host", "h9")]),
        set(1, &[("host", "osd.0")]),
    ] {
        assert!(step(&mut m, vec![bad.clone()]).is_err(), "{bad:?}");
    }
    // `crush move` of an OSD, then a reweight.
    step(
        &mut m,
        vec![Change::CrushMove {
            name: "osd.1".into(),
            parent: "h9".into(),
        }],
    )
    .unwrap();
    assert_eq!(parent_name(&m.crush, 1), Some("h9"));
    step(
        &mut m,
        vec![Change::CrushReweight {
            id: 1,
            weight: 0x28000,
        }],
    )
    .unwrap();
    assert_eq!(weight_of(&m, 1), Some(0x28000));
    assert!(step(&mut m, vec![Change::CrushReweight { id: 9, weight: 1 }]).is_err());
    assert!(step(&mut m, vec![Change::CrushReweight { id: -1, weight: 1 }]).is_err());
    assert!(m.placer().is_ok());
    assert_eq!(decode_map(&encode(&m)).unwrap(), m);
}

/// A larger pg_num splits a pool's PGs: with pgp_num unchanged each new
/// PG maps exactly as its parent does, its parent's pg_temp and upmap
/// items included; pg_num cannot go down, and a count past any pool's is
/// refused and changes nothing.
#[test]
fn a_split_gives_new_pgs_their_parents_place() {
    let mut m = cluster(5);
    let parent = PgId { pool: 1, ps: 3 };
    let base = m.placer().unwrap().map_pg(parent).unwrap();
    let spare = (0..5).find(|o| !base.up.contains(o)).unwrap();
    step(
        &mut m,
        vec![
            Change::PgUpmapItems {
                pg: parent,
                items: vec![(base.up[1], spare)],
            },
            Change::PgTemp {
                pg: parent,
                osds: vec![base.up[2], base.up[0], spare],
            },
        ],
    )
    .unwrap();
    let before = m.placer().unwrap().map_pg(parent).unwrap();
    let mut p = m.pool_by_name("rbd").unwrap().clone();
    p.pg_num = 128;
    step(&mut m, vec![Change::PoolUpdate(p.clone())]).unwrap();
    assert_eq!(m.pool_by_name("rbd").unwrap().pgp_num, 32);
    let mut placer = m.placer().unwrap();
    for ps in [35u32, 67, 99] {
        let child = PgId { pool: 1, ps };
        let cm = placer.map_pg(child).unwrap();
        assert_eq!(
            (cm.up, cm.acting),
            (before.up.clone(), before.acting.clone()),
            "{child}"
        );
    }
    let epoch = m.epoch;
    for bad in [64, 1 << 25] {
        p.pg_num = bad;
        assert!(
            step(&mut m, vec![Change::PoolUpdate(p.clone())]).is_err(),
            "{bad}"
        );
    }
    assert_eq!(
        (m.epoch, m.pool_by_name("rbd").unwrap().pg_num),
        (epoch, 128)
    );
}

/// A pool's store options: set for a pool the map has (refused for one
/// it lacks), cleared by the defaults, gone with the pool; a map holding
/// them reads back.
#[test]
fn pool_options_follow_their_pool() {
    use loligo_types::osdmap::{CompressionAlgorithm, CompressionMode, PoolOpts, ReadCoalesce};
    let mut m = cluster(3);
    let id = m.pool_by_name("rbd").unwrap().id;
    let opts = PoolOpts {
        compression_mode: CompressionMode::Force,
        compression_algorithm: CompressionAlgorithm::Lz4,
        read_coalesce: ReadCoalesce::Aggressive,
    };
    let set = |pool: u64, opts: PoolOpts| vec![Change::PoolOpts { pool, opts }];
    assert!(step(&mut m, set(id + 1, opts)).is_err());
    step(&mut m, set(id, opts)).unwrap();
    assert!(m.pool_opts[&id].compresses());
    assert_eq!(decode_map(&encode(&m)).unwrap(), m);
    step(&mut m, set(id, PoolOpts::default())).unwrap();
    assert!(m.pool_opts.is_empty());
    let passive = PoolOpts {
        compression_mode: CompressionMode::Passive,
        ..opts
    };
    step(&mut m, set(id, passive)).unwrap();
    assert!(
        m.pool_opts[&id].compresses(),
        "what clients hint compressible"
    );
    let no_algorithm = PoolOpts {
        compression_algorithm: CompressionAlgorithm::None,
        ..opts
    };
    step(&mut m, set(id, no_algorithm)).unwrap();
    assert!(!m.pool_opts[&id].compresses());
    step(&mut m, vec![Change::PoolDelete { id }]).unwrap();
    assert!(m.pool_opts.is_empty());
}
