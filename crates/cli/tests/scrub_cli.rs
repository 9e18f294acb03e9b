//! Scrub, deep scrub and repair of a local cluster of processes, through
//! the CLI as an operator would run them: a replica's copy given wrong
//! bytes with valid checksums (`store set-bytes`: only the digest
//! comparison sees it) and another's rotted in its block file (the store's
//! checksum fails the read), each found by `pg deep-scrub`, named by
//! `list-inconsistent-obj`, counted in `status`, mended by `pg repair`;
//! a read error injected into a running replica (`tell osd.N
//! injectdataerr`) named `read_error` and ended by a repair; the
//! primary's copy rotted reads back right at once; an omap value
//! changed on one replica (`store set-omap`) and the copy removed from
//! another (`store remove`), named `omap_digest_mismatch` and `missing`
//! and mended by one repair; and the `noscrub`
//! flag set, shown and cleared. Then the same of an erasure-coded pool's
//! shards: wrong bytes caught by the shard hashes (`ec_hash_error`), rot
//! in the primary's own shard found and rebuilt by a repair, rot in a
//! member's shard and the primary's read around at once and rebuilt after
//! the read, and in partially overwritten objects (no shard hashes) wrong
//! bytes found by re-encoding the parity, named with two parity shards.

mod common;

use common::{loligo, ok};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// PG, acting set and primary of `name` in the default pool.
fn placement(dir: &Path, name: &str) -> (String, Vec<i64>, i64) {
    placement_in(dir, "default", name)
}

/// PG, acting set and primary of `name` in `pool`.
fn placement_in(dir: &Path, pool: &str, name: &str) -> (String, Vec<i64>, i64) {
    let v: Value = serde_json::from_str(&ok(dir, &["osd", "map", pool, name, "--json"])).unwrap();
    let acting = v["acting"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_i64().unwrap())
        .collect();
    let pg = v["pgid"].as_str().unwrap().to_string();
    (pg, acting, v["acting_primary"].as_i64().unwrap())
}

/// PG `pg`'s row in `pg ls --json`.
fn pg_row(dir: &Path, pg: &str) -> Value {
    let rows: Value = serde_json::from_str(&ok(dir, &["pg", "ls", "--json"])).unwrap();
    (rows.as_array().unwrap().iter())
        .find(|r| r["pg"] == pg)
        .cloned()
        .unwrap_or_else(|| panic!("pg {pg} not listed: {rows}"))
}

/// Wait (a minute at most) until `ready` holds.
fn wait_for(what: &str, mut ready: impl FnMut() -> Option<String>) {
    let t0 = Instant::now();
    loop {
        let Some(why) = ready() else { return };
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "never {what}: {why}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn wait_clean(dir: &Path) {
    wait_for("all active+clean", || common::not_clean(dir));
}

/// `pg deep-scrub PG` (or `pg repair PG`), and wait until it ended.
fn deep_scrub(dir: &Path, pg: &str, verb: &str) {
    let before = pg_row(dir, pg)["last_deep_scrub_stamp"].as_u64().unwrap();
    let said = ok(dir, &["pg", verb, pg]);
    assert!(
        said.contains(&format!("instructing pg {pg} to {verb}")),
        "{said}"
    );
    wait_for("the deep scrub's stamp", || {
        let row = pg_row(dir, pg);
        let now = row["last_deep_scrub_stamp"].as_u64().unwrap();
        (now <= before).then(|| row.to_string())
    });
}

/// What `list-inconsistent-obj PG --json` lists.
fn inconsistent(dir: &Path, pg: &str) -> Vec<Value> {
    let v: Value =
        serde_json::from_str(&ok(dir, &["list-inconsistent-obj", pg, "--json"])).unwrap();
    v["inconsistents"].as_array().unwrap().clone()
}

/// The errors `list` gives OSD `osd`'s copy of its one object.
fn errors_of(list: &[Value], osd: i64) -> Vec<String> {
    assert_eq!(list.len(), 1, "{list:?}");
    let shard = (list[0]["shards"].as_array().unwrap().iter())
        .find(|s| s["osd"] == osd)
        .unwrap_or_else(|| panic!("no shard of osd.{osd}: {list:?}"));
    (shard["errors"].as_array().unwrap().iter())
        .map(|e| e.as_str().unwrap().to_string())
        .collect()
}

/// Stop OSD `osd`, let `f` change its store folder, start it again and
/// wait until the cluster is clean.
fn with_osd_stopped(dir: &Path, osd: i64, f: impl FnOnce(&Path)) {
    let d = dir.to_string_lossy().into_owned();
    let name = format!("osd.{osd}");
    ok(dir, &["stop", &name, "--data-dir", &d]);
    f(&dir.join(&name));
    ok(dir, &["start", &name, "--data-dir", &d]);
    wait_clean(dir);
}

/// `store set-bytes` on OSD `osd`'s copy of `name` (the OSD stopped
/// meanwhile): `file`'s bytes at `offset`, under valid checksums.
fn set_bytes(dir: &Path, osd: i64, name: &str, offset: u64, file: &Path) {
    with_osd_stopped(dir, osd, |d| {
        let d = d.to_string_lossy().into_owned();
        let off = offset.to_string();
        let file = file.to_str().unwrap();
        ok(dir, &["store", "set-bytes", &d, name, &off, file]);
    });
}

/// Flip a byte of `data`'s copy in a stopped OSD's block file: in every
/// block that starts with 64 bytes of `data` at a 4 KiB boundary of it
/// (a replica's copy, or an erasure-coded shard of 4 KiB units; blocks
/// of copies written over before too, which the store no longer reads).
fn flip_in_block_file(osd_dir: &Path, data: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(osd_dir.join("block"))
        .unwrap();
    let len = f.metadata().unwrap().len();
    let heads: std::collections::HashSet<&[u8]> = data.chunks(4096).map(|c| &c[..64]).collect();
    let mut head = [0u8; 64];
    let found: Vec<u64> = (0..len / 4096)
        .map(|b| b * 4096)
        .filter(|&off| f.read_exact_at(&mut head, off).is_ok() && heads.contains(&head[..]))
        .collect();
    assert!(
        !found.is_empty(),
        "{}: the object is not in the block file",
        osd_dir.display()
    );
    for at in found {
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, at + 1000).unwrap();
        f.write_all_at(&[b[0] ^ 0x04], at + 1000).unwrap();
    }
    f.sync_all().unwrap();
}

/// A deep scrub of `pg` finds its one object `name` bad on each OSD of
/// `bad` with those errors exactly; a repair mends it, and a second deep
/// scrub is clean.
fn found_then_repaired(dir: &Path, pg: &str, name: &str, bad: &[(i64, &[&str])]) {
    deep_scrub(dir, pg, "deep-scrub");
    let found = inconsistent(dir, pg);
    assert_eq!(found[0]["object"]["name"], name, "{found:?}");
    for (osd, errors) in bad {
        assert_eq!(errors_of(&found, *osd), *errors, "{found:?}");
    }
    deep_scrub(dir, pg, "repair");
    deep_scrub(dir, pg, "deep-scrub");
    assert!(inconsistent(dir, pg).is_empty());
}

/// The health status and each check as `CODE: summary`.
fn health(dir: &Path) -> (String, Vec<String>) {
    let s: Value = serde_json::from_str(&ok(dir, &["status", "--json"])).unwrap();
    let checks = (s["health"]["checks"].as_object().unwrap().iter())
        .map(|(code, c)| format!("{code}: {}", c["summary"]["message"].as_str().unwrap()))
        .collect();
    (s["health"]["status"].as_str().unwrap().to_string(), checks)
}

#[test]
fn deep_scrub_finds_bad_copies_repair_mends_them_through_the_cli() {
    let (root, dir, guard) = common::start_with("scrub-cli", 3, 8, &["--debug-inject-read-err"]);
    let mut data: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    data[..31].copy_from_slice(b"loligo scrub test object, head.");
    let file = root.join("a.bin");
    std::fs::write(&file, &data).unwrap();
    ok(&dir, &["put", "a", file.to_str().unwrap()]);
    wait_clean(&dir);
    let (pg, acting, primary) = placement(&dir, "a");
    assert_eq!(acting.len(), 3, "{acting:?}");
    assert_eq!(acting[0], primary);

    // Wrong bytes with valid checksums on a replica: only the digests
    // tell.
    let wrong = root.join("wrong.bin");
    std::fs::write(&wrong, b"not what was written").unwrap();
    set_bytes(&dir, acting[1], "a", 1000, &wrong);
    deep_scrub(&dir, &pg, "deep-scrub");
    let found = inconsistent(&dir, &pg);
    assert_eq!(found[0]["object"]["name"], "a", "{found:?}");
    assert!(
        errors_of(&found, acting[1]).contains(&"data_digest_mismatch".to_string()),
        "{found:?}"
    );
    assert_eq!(found[0]["selected_object_info"]["rule"], "data_digest");
    assert!(pg_row(&dir, &pg)["state"]
        .as_str()
        .unwrap()
        .contains("inconsistent"));
    let (status, checks) = health(&dir);
    assert_eq!(status, "HEALTH_ERR", "{checks:?}");
    assert!(
        checks
            .iter()
            .any(|c| c == "OSD_SCRUB_ERRORS: 1 scrub errors"),
        "{checks:?}"
    );
    assert!(
        checks.iter().any(|c| c.starts_with("PG_DAMAGED")),
        "{checks:?}"
    );
    let text = ok(&dir, &["list-inconsistent-obj", &pg]);
    assert!(
        text.contains(&format!("osd.{}: data_digest_mismatch", acting[1])),
        "{text}"
    );
    deep_scrub(&dir, &pg, "repair");
    deep_scrub(&dir, &pg, "deep-scrub");
    assert!(inconsistent(&dir, &pg).is_empty());
    // The scrub's checks clear; others (a test machine's nearly full
    // disk makes every OSD nearfull) are not this test's to judge.
    wait_for("the scrub errors cleared", || {
        let (status, checks) = health(&dir);
        let scrub = |c: &String| c.starts_with("OSD_SCRUB_ERRORS") || c.starts_with("PG_DAMAGED");
        (status == "HEALTH_ERR" || checks.iter().any(scrub)).then(|| format!("{status} {checks:?}"))
    });

    // Rot in the other replica's block file: a read error.
    with_osd_stopped(&dir, acting[2], |osd| flip_in_block_file(osd, &data));
    found_then_repaired(&dir, &pg, "a", &[(acting[2], &["read_error"])]);

    // A read error injected into a replica's copy of the running OSD
    // (`tell osd.N injectdataerr`): named, and a repair's rewrite ends it.
    let osd = format!("osd.{}", acting[1]);
    let said = ok(&dir, &["tell", &osd, "injectdataerr", "default", "a"]);
    assert!(said.contains("injected a read error"), "{said}");
    found_then_repaired(&dir, &pg, "a", &[(acting[1], &["read_error"])]);

    // Rot on the primary: a read gets the right bytes at once.
    with_osd_stopped(&dir, primary, |osd| flip_in_block_file(osd, &data));
    let out = root.join("out.bin");
    ok(&dir, &["get", "a", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), data);
    deep_scrub(&dir, &pg, "deep-scrub");
    assert!(inconsistent(&dir, &pg).is_empty(), "the read mended it");

    // An omap value changed on one replica, under valid checksums, and
    // the copy gone from the other: an omap digest mismatch and a
    // missing copy, both mended from the primary's.
    ok(&dir, &["put", "m", wrong.to_str().unwrap()]);
    ok(&dir, &["omap", "set", "m", "k", "the value written"]);
    wait_clean(&dir);
    let (pg_m, acting_m, _) = placement(&dir, "m");
    let bad = root.join("bad-value.bin");
    std::fs::write(&bad, b"not the value written").unwrap();
    with_osd_stopped(&dir, acting_m[1], |d| {
        let (d, bad) = (d.to_str().unwrap(), bad.to_str().unwrap());
        ok(&dir, &["store", "set-omap", d, "m", "k", bad]);
    });
    with_osd_stopped(&dir, acting_m[2], |d| {
        ok(&dir, &["store", "remove", d.to_str().unwrap(), "m"]);
    });
    let bad: [(i64, &[&str]); 2] = [
        (acting_m[1], &["omap_digest_mismatch"]),
        (acting_m[2], &["missing"]),
    ];
    found_then_repaired(&dir, &pg_m, "m", &bad);
    assert_eq!(
        ok(&dir, &["omap", "get", "m", "k"]).trim(),
        "the value written"
    );

    // The noscrub flag: set, shown, warned about, cleared; a flag not
    // built yet is refused.
    assert!(ok(&dir, &["osd", "set", "noscrub"]).contains("done"));
    let s: Value = serde_json::from_str(&ok(&dir, &["status", "--json"])).unwrap();
    assert_eq!(s["osdmap"]["flags"], serde_json::json!(["noscrub"]), "{s}");
    assert!(ok(&dir, &["status"]).contains("flags noscrub"));
    assert!(health(&dir)
        .1
        .iter()
        .any(|c| c == "OSDMAP_FLAGS: noscrub flag(s) set"));
    let e = loligo(&dir, &["osd", "set", "pause"]);
    assert_eq!(e.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&e.stderr).contains("not supported yet"));
    ok(&dir, &["osd", "unset", "noscrub"]);
    let s: Value = serde_json::from_str(&ok(&dir, &["status", "--json"])).unwrap();
    assert_eq!(s["osdmap"]["flags"], serde_json::json!([]), "{s}");
    drop(guard);
}

#[test]
fn deep_scrub_finds_bad_ec_shards_and_repair_rebuilds_them() {
    let (root, dir, guard) = common::start("scrub-ec-cli", 4, 8);
    // OSDs not started for fault injection refuse it.
    let e = loligo(&dir, &["tell", "osd.0", "injectdataerr", "default", "a"]);
    assert_eq!(e.status.code(), Some(2));
    let said = String::from_utf8_lossy(&e.stderr);
    assert!(said.contains("--debug-inject-read-err"), "{said}");
    common::ec_profiles(&dir);
    common::create_ecrs_pool(&dir, None);
    let mut data: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    data[..31].copy_from_slice(b"loligo EC scrub object, head...");
    let file = root.join("a.bin");
    std::fs::write(&file, &data).unwrap();
    ok(&dir, &["-p", "ecrs", "put", "a", file.to_str().unwrap()]);
    wait_clean(&dir);
    let (pg, acting, primary) = placement_in(&dir, "ecrs", "a");
    assert_eq!(acting.len(), 3, "{acting:?}");
    assert_eq!(acting[0], primary);
    deep_scrub(&dir, &pg, "deep-scrub");
    assert!(
        inconsistent(&dir, &pg).is_empty(),
        "a fresh object is clean"
    );

    // Wrong bytes with valid checksums in a member's shard: its hash
    // tells.
    let wrong = root.join("wrong.bin");
    std::fs::write(&wrong, b"not what was encoded").unwrap();
    set_bytes(&dir, acting[1], "a", 1000, &wrong);
    deep_scrub(&dir, &pg, "deep-scrub");
    let found = inconsistent(&dir, &pg);
    assert_eq!(
        errors_of(&found, acting[1]),
        vec!["ec_hash_error"],
        "{found:?}"
    );
    assert!(pg_row(&dir, &pg)["state"]
        .as_str()
        .unwrap()
        .contains("inconsistent"));
    deep_scrub(&dir, &pg, "repair");
    deep_scrub(&dir, &pg, "deep-scrub");
    assert!(inconsistent(&dir, &pg).is_empty());

    // Rot in the primary's own shard: a deep scrub finds it, a repair
    // rebuilds it.
    with_osd_stopped(&dir, primary, |osd| flip_in_block_file(osd, &data));
    found_then_repaired(&dir, &pg, "a", &[(primary, &["read_error"])]);
    let out = root.join("out.bin");
    ok(&dir, &["-p", "ecrs", "get", "a", out.to_str().unwrap()]);
    assert!(std::fs::read(&out).unwrap() == data);

    // Rot in a member's data shard, and in the primary's: each read
    // decodes around the bad shard at once and rebuilds it after, so
    // the next deep scrub finds nothing.
    for osd in [acting[1], primary] {
        with_osd_stopped(&dir, osd, |d| flip_in_block_file(d, &data));
        ok(&dir, &["-p", "ecrs", "get", "a", out.to_str().unwrap()]);
        assert!(
            std::fs::read(&out).unwrap() == data,
            "the read decoded around osd.{osd}'s rot"
        );
        deep_scrub(&dir, &pg, "deep-scrub");
        let found = inconsistent(&dir, &pg);
        assert!(found.is_empty(), "osd.{osd}'s shard rebuilt: {found:?}");
    }

    // A partial overwrite keeps no shard hashes: wrong bytes in a shard
    // are found by encoding the data again and comparing the parity.
    // With one parity shard the bad one cannot be named: every shard is
    // reported, none is authoritative, and a repair leaves the object.
    let patch = root.join("patch.bin");
    std::fs::write(&patch, b"a partial overwrite").unwrap();
    ok(
        &dir,
        &[
            "-p",
            "ecrs",
            "put",
            "a",
            patch.to_str().unwrap(),
            "--offset",
            "4096",
        ],
    );
    set_bytes(&dir, acting[1], "a", 70000, &wrong);
    deep_scrub(&dir, &pg, "deep-scrub");
    let found = inconsistent(&dir, &pg);
    for &o in &acting {
        assert_eq!(errors_of(&found, o), vec!["ec_hash_error"], "{found:?}");
    }
    assert_eq!(
        found[0]["selected_object_info"]["rule"], "none",
        "{found:?}"
    );
    deep_scrub(&dir, &pg, "repair");
    assert_eq!(
        inconsistent(&dir, &pg).len(),
        1,
        "a repair with no good shard writes nothing"
    );
    ok(&dir, &["-p", "ecrs", "put", "a", file.to_str().unwrap()]);
    deep_scrub(&dir, &pg, "deep-scrub");
    assert!(inconsistent(&dir, &pg).is_empty());

    // With two parity shards the bad one is named (by the `parity` rule)
    // and a repair rebuilds it from the others.
    ok(
        &dir,
        &[
            "pool",
            "create",
            "ec22",
            "--pg-num",
            "8",
            "--erasure",
            "zz22",
        ],
    );
    // (Three stripes of Zigzag's 1 MiB unit: the overwrite re-encodes
    // one, so no hash is kept.)
    let big: Vec<u8> = (0..5u32 << 20)
        .map(|i| (i.wrapping_mul(2_246_822_519) >> 11) as u8)
        .collect();
    let big_file = root.join("b.bin");
    std::fs::write(&big_file, &big).unwrap();
    ok(
        &dir,
        &["-p", "ec22", "put", "b", big_file.to_str().unwrap()],
    );
    ok(
        &dir,
        &[
            "-p",
            "ec22",
            "put",
            "b",
            patch.to_str().unwrap(),
            "--offset",
            "4096",
        ],
    );
    wait_clean(&dir);
    let (pg, acting, _) = placement_in(&dir, "ec22", "b");
    deep_scrub(&dir, &pg, "deep-scrub");
    assert!(
        inconsistent(&dir, &pg).is_empty(),
        "a patched object is clean"
    );
    set_bytes(&dir, acting[2], "b", 70000, &wrong);
    deep_scrub(&dir, &pg, "deep-scrub");
    let found = inconsistent(&dir, &pg);
    assert_eq!(
        errors_of(&found, acting[2]),
        vec!["ec_hash_error"],
        "{found:?}"
    );
    assert!(errors_of(&found, acting[0]).is_empty(), "{found:?}");
    assert_eq!(
        found[0]["selected_object_info"]["rule"], "parity",
        "{found:?}"
    );
    deep_scrub(&dir, &pg, "repair");
    deep_scrub(&dir, &pg, "deep-scrub");
    assert!(inconsistent(&dir, &pg).is_empty());
    let mut want = big;
    want[4096..4096 + 19].copy_from_slice(b"a partial overwrite");
    ok(&dir, &["-p", "ec22", "get", "b", out.to_str().unwrap()]);
    assert!(std::fs::read(&out).unwrap() == want);
    drop(guard);
}
