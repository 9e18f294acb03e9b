//! Erasure-coded pools on a local cluster of processes, through the CLI:
//! a Reed-Solomon 2+1 and a Zigzag 2+2 pool on four OSDs; objects of one
//! and of several stripes written and read back; omap refused with a
//! clear error; reads with m OSDs killed (kill -9) return the right
//! bytes (min_size k); the OSDs started again, every PG returns to active+clean and
//! the objects read the same; writes after recovery land; two OSDs
//! then declared lost, the RS PGs left with one shard are down and
//! every other PG goes on, its objects intact.

mod common;

use common::{ec_profiles, loligo, not_clean, ok};
use std::path::Path;
use std::time::{Duration, Instant};

fn wait_clean(dir: &Path, within: Duration) {
    let t0 = Instant::now();
    while let Some(why) = not_clean(dir) {
        assert!(t0.elapsed() < within, "not clean after {within:?}: {why}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Wait until the map shows `n` OSDs up.
fn wait_up(dir: &Path, n: u64) {
    let t0 = Instant::now();
    loop {
        let s: serde_json::Value = serde_json::from_str(&ok(dir, &["status", "--json"])).unwrap();
        if s["osdmap"]["num_up_osds"] == n {
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "still up: {s}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// `get` of `name` from `pool` equals `want`.
fn check(dir: &Path, root: &Path, pool: &str, name: &str, want: &[u8]) {
    let out = root.join(format!("{pool}-{name}.out"));
    ok(dir, &["-p", pool, "get", name, out.to_str().unwrap()]);
    let got = std::fs::read(&out).unwrap();
    assert!(
        got == want,
        "{pool}/{name}: {} bytes back, {} written",
        got.len(),
        want.len()
    );
}

#[test]
fn ec_pools_serve_with_m_osds_down_and_heal() {
    let (root, dir, guard) = common::start("ec-cluster", 4, 8);
    let d = dir.to_string_lossy().into_owned();
    ec_profiles(&dir);
    // --size is the profile's business.
    let e = loligo(
        &dir,
        &["pool", "create", "x", "--erasure", "rs21", "--size", "3"],
    );
    assert_eq!(e.status.code(), Some(2));
    // (min_size k: with m OSDs down a PG still serves; below min_size it
    // would serve nothing, as in Ceph.)
    common::create_ecrs_pool(&dir, Some(2));
    // Ceph's positional form: PG_NUM PGP_NUM erasure PROFILE.
    ok(
        &dir,
        &["pool", "create", "eczz", "8", "8", "erasure", "zz22"],
    );
    let p: serde_json::Value = serde_json::from_str(&ok(&dir, &["pool", "get", "eczz"])).unwrap();
    assert_eq!(
        (
            p["size"].as_u64(),
            p["min_size"].as_u64(),
            p["pg_num"].as_u64()
        ),
        (Some(4), Some(3), Some(8)),
        "{p}"
    );
    assert_eq!(p["read_coalesce"], "conservative", "{p}");
    // Degraded reads and rebuilds below group each shard's elements into
    // one read from the first needed to the last.
    ok(
        &dir,
        &["pool", "set", "eczz", "read_coalesce", "aggressive"],
    );
    let p: serde_json::Value = serde_json::from_str(&ok(&dir, &["pool", "get", "eczz"])).unwrap();
    assert_eq!(p["read_coalesce"], "aggressive", "{p}");
    wait_clean(&dir, Duration::from_secs(60));
    // Where an object's shards live: four positions, the primary first.
    let m: serde_json::Value =
        serde_json::from_str(&ok(&dir, &["osd", "map", "eczz", "small", "--json"])).unwrap();
    let acting = m["acting"].as_array().unwrap();
    assert_eq!(acting.len(), 4, "{m}");
    assert_eq!(m["acting_primary"], acting[0], "{m}");
    assert!(ok(&dir, &["osd", "map", "eczz", "small"]).contains("-> pg 3."));
    let e = loligo(&dir, &["osd", "map", "nope", "small"]);
    assert_eq!(e.status.code(), Some(2));

    // Objects of one stripe, of many (RS: 8 KiB stripes), and of several
    // Zigzag stripes (about 2 MiB each), with an odd tail.
    let small: Vec<u8> = (0..5_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let big: Vec<u8> = (0..4_500_001u32)
        .map(|i| (i % 253) as u8 ^ (i >> 12) as u8)
        .collect();
    let (fs, fb) = (root.join("small"), root.join("big"));
    std::fs::write(&fs, &small).unwrap();
    std::fs::write(&fb, &big).unwrap();
    for pool in ["ecrs", "eczz"] {
        ok(&dir, &["-p", pool, "put", "small", fs.to_str().unwrap()]);
        ok(&dir, &["-p", pool, "put", "big", fb.to_str().unwrap()]);
        check(&dir, &root, pool, "small", &small);
        check(&dir, &root, pool, "big", &big);
        // Omap is refused on EC pools, with a one-line error.
        let e = loligo(&dir, &["-p", pool, "omap", "set", "small", "k", "v"]);
        assert_eq!(e.status.code(), Some(2), "{e:?}");
        let msg = String::from_utf8_lossy(&e.stderr);
        assert!(msg.contains("omap") && msg.lines().count() == 1, "{msg}");
        // Xattrs are kept on every shard.
        ok(
            &dir,
            &["-p", pool, "xattr", "set", "small", "color", "teal"],
        );
    }

    // One OSD killed: both pools read (RS 2+1 has m = 1).
    ok(&dir, &["stop", "osd.3", "--kill", "--data-dir", &d]);
    for pool in ["ecrs", "eczz"] {
        check(&dir, &root, pool, "small", &small);
        check(&dir, &root, pool, "big", &big);
    }
    // Two killed: Zigzag 2+2 still reads everything, before and after
    // the map shows them down (their positions then holes), once its
    // min_size is k (below min_size a PG serves nothing, as in Ceph).
    ok(&dir, &["pool", "set", "eczz", "min_size", "2"]);
    ok(&dir, &["stop", "osd.1", "--kill", "--data-dir", &d]);
    check(&dir, &root, "eczz", "small", &small);
    check(&dir, &root, "eczz", "big", &big);
    wait_up(&dir, 2);
    check(&dir, &root, "eczz", "small", &small);
    check(&dir, &root, "eczz", "big", &big);
    let v = ok(&dir, &["-p", "eczz", "xattr", "get", "small", "color"]);
    assert_eq!(v.trim(), "teal");

    // Back: every PG heals, the objects read the same, writes land.
    ok(&dir, &["start", "osd.3", "--data-dir", &d]);
    ok(&dir, &["start", "osd.1", "--data-dir", &d]);
    wait_clean(&dir, Duration::from_secs(120));
    for pool in ["ecrs", "eczz"] {
        check(&dir, &root, pool, "small", &small);
        check(&dir, &root, pool, "big", &big);
        ok(&dir, &["-p", pool, "put", "small2", fb.to_str().unwrap()]);
        check(&dir, &root, pool, "small2", &big);
    }

    // Two OSDs' disks gone for good (`osd lost`). An RS 2+1 PG left with
    // one shard of each object (it had both) is down for good, naming no
    // OSD to wait for; every other PG goes on (reported by its primary,
    // a hole at its first position or not), and its objects read as
    // before; so does all of Zigzag 2+2 (two shards of four left).
    let objects = [("small", &small), ("big", &big), ("small2", &big)];
    let both_lost: Vec<bool> = objects
        .iter()
        .map(|(name, _)| {
            let m: serde_json::Value =
                serde_json::from_str(&ok(&dir, &["osd", "map", "ecrs", name, "--json"])).unwrap();
            let acting = m["acting"].as_array().unwrap();
            [1, 3]
                .iter()
                .all(|o| acting.contains(&serde_json::json!(o)))
        })
        .collect();
    ok(&dir, &["stop", "osd.1", "--kill", "--data-dir", &d]);
    ok(&dir, &["stop", "osd.3", "--kill", "--data-dir", &d]);
    wait_up(&dir, 2);
    for id in ["1", "3"] {
        ok(&dir, &["osd", "lost", id, "--yes-i-really-mean-it"]);
    }
    let t0 = Instant::now();
    loop {
        let rows: serde_json::Value =
            serde_json::from_str(&ok(&dir, &["pg", "ls", "ecrs", "--json"])).unwrap();
        let rows = rows.as_array().unwrap();
        let settled = rows.iter().all(|r| {
            let st = r["state"].as_str().unwrap_or_default();
            let up = r["acting"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|o| o.as_i64() >= Some(0))
                .count();
            if up < 2 {
                st == "down" && r["waiting_for"].as_array().is_none_or(Vec::is_empty)
            } else {
                (st.contains("active") || st.contains("peered"))
                    && !st.contains("recover")
                    && !st.contains("peering")
            }
        });
        if settled {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "ecrs PGs not settled after osd lost: {rows:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // An op on a down PG waits for a map that changes it, then fails
    // saying so, before the client's own timeout.
    if let Some(i) = both_lost.iter().position(|&g| g) {
        let e = loligo(&dir, &["-p", "ecrs", "stat", objects[i].0]);
        let msg = String::from_utf8_lossy(&e.stderr);
        assert!(!e.status.success() && msg.contains("down"), "{msg}");
    }
    for ((name, data), gone) in objects.iter().zip(&both_lost) {
        if !gone {
            check(&dir, &root, "ecrs", name, data);
        }
        check(&dir, &root, "eczz", name, data);
    }
    // Unfound objects: none here (what could not be read was removed
    // with the lost OSDs' record), and marking them lost is refused for a
    // PG without any, for a PG that does not exist, and for a mode Loligo
    // does not have.
    let rows: serde_json::Value =
        serde_json::from_str(&ok(&dir, &["pg", "ls", "eczz", "--json"])).unwrap();
    let first = rows[0]["pg"].as_str().unwrap().to_string();
    assert!(
        rows.as_array().unwrap().iter().all(|r| r["unfound"] == 0),
        "{rows}"
    );
    assert!(ok(&dir, &["pg", "ls"])
        .lines()
        .next()
        .unwrap()
        .contains("UNFOUND"));
    assert!(!ok(&dir, &["status"]).contains("unfound"));
    for (args, why) in [
        (
            vec![first.as_str(), "delete", "--yes-i-really-mean-it"],
            "has no unfound objects",
        ),
        (
            vec!["99.0", "delete", "--yes-i-really-mean-it"],
            "does not exist",
        ),
        (vec!["1.zz", "delete"], "not a PG id"),
        (vec![first.as_str(), "revert"], "not built"),
        (vec![first.as_str(), "forget"], "the mode is `delete`"),
    ] {
        let mut a = vec!["pg", "mark-unfound-lost"];
        a.extend(args);
        let e = loligo(&dir, &a);
        let msg = String::from_utf8_lossy(&e.stderr);
        assert!(!e.status.success() && msg.contains(why), "{a:?}: {msg}");
    }
    drop(guard);
}
