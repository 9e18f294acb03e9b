//! A local cluster of processes through the CLI: `up --detach`, put/get,
//! status, `pg ls`, the key-value store, typed errors, one OSD killed and started
//! again, garbage on an OSD port, `down`, and `up` again
//! on the same directory keeping the data.

mod common;

use common::{loligo, ok};
use std::io::Write;

#[test]
fn local_cluster_round_trip_restart_and_errors() {
    let (root, dir, guard) = common::start("cli-cluster", 3, 16);
    let d = dir.to_string_lossy().into_owned();
    let up_owned = common::up_args(&dir, 3, 16);
    let up: Vec<&str> = up_owned.iter().map(String::as_str).collect();
    // Starting it twice is refused.
    let again = loligo(&dir, &up);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already running"));

    let file = root.join("in.bin");
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&file, &data).unwrap();
    ok(&dir, &["put", "blob", file.to_str().unwrap()]);
    let out = root.join("out.bin");
    ok(&dir, &["get", "blob", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), data);
    assert!(ok(&dir, &["ls"]).lines().any(|l| l == "blob"));

    let s: serde_json::Value = serde_json::from_str(&ok(&dir, &["status", "--json"])).unwrap();
    assert_eq!(s["osdmap"]["num_up_osds"], 3, "{s}");
    assert_eq!(s["osdmap"]["num_in_osds"], 3);
    assert!(s["health"]["status"].is_string());
    assert!(s["pgs"]["by_state"].is_object());

    // `pg ls`: every PG, each with its primary's report once it comes;
    // the one holding "blob" counts it.
    let t0 = std::time::Instant::now();
    loop {
        let rows: serde_json::Value =
            serde_json::from_str(&ok(&dir, &["pg", "ls", "--json"])).unwrap();
        let rows = rows.as_array().unwrap().clone();
        assert_eq!(rows.len() as u64, s["pgs"]["total"].as_u64().unwrap());
        let objects: u64 = rows.iter().map(|r| r["objects"].as_u64().unwrap()).sum();
        if rows.iter().all(|r| r["state"] == "active+clean") && objects >= 1 {
            assert!(rows
                .iter()
                .all(|r| r["acting"].as_array().unwrap().len() == 3));
            break;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "PGs never all active+clean with the object counted: {rows:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let table = ok(&dir, &["pg", "ls", "--state", "clean"]);
    assert!(table.starts_with("PG "), "{table}");
    ceph_report_verbs_print_the_cluster(&dir);
    assert!(ok(&dir, &["pg", "ls", "--state", "down"]).lines().count() == 1);
    let e = loligo(&dir, &["pg", "ls", "nope"]);
    assert_eq!(e.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&e.stderr).contains("pool 'nope' does not exist"));
    let e = loligo(&dir, &["pg", "ls", "--state", "sleepy"]);
    assert_eq!(e.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&e.stderr).contains("unknown PG state 'sleepy'"));

    // Typed errors, exit code 2, nothing written.
    let e = loligo(&dir, &["-p", "nope", "put", "x", file.to_str().unwrap()]);
    assert_eq!(e.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&e.stderr).contains("pool 'nope' does not exist"));
    let e = loligo(&dir, &["get", "missing", root.join("m").to_str().unwrap()]);
    assert_eq!(e.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&e.stderr).contains("not found"));
    assert!(!root.join("m").exists(), "no partial output file");
    // The key-value store on object maps.
    ok(&dir, &["kv", "create", "s", "--k", "2"]);
    let e = loligo(&dir, &["kv", "create", "s"]);
    assert_eq!(e.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&e.stderr).contains("exists already"));
    for (k, v) in [("b", "2"), ("a", "1"), ("c", "3")] {
        ok(&dir, &["kv", "put", "s", k, v]);
    }
    assert_eq!(ok(&dir, &["kv", "get", "s", "a"]), "1");
    let e = loligo(&dir, &["kv", "get", "s", "zz"]);
    assert_eq!(e.status.code(), Some(1), "a missing key is exit 1");
    assert!(String::from_utf8_lossy(&e.stderr).contains("no key 'zz'"));
    ok(&dir, &["kv", "rm", "s", "b"]);
    assert_eq!(loligo(&dir, &["kv", "rm", "s", "b"]).status.code(), Some(1));
    assert_eq!(ok(&dir, &["kv", "scan", "s"]), "a\t1\nc\t3\n");
    assert_eq!(ok(&dir, &["kv", "scan", "s", "--start", "b"]), "c\t3\n");
    // k = 2: nodes hold 2-4 entries, so ten more keys split nodes.
    for k in ["d", "e", "f", "g", "h", "i", "j", "k", "l", "m"] {
        ok(&dir, &["kv", "put", "s", k, k]);
    }
    ok(&dir, &["kv", "rm", "s", "m"]);
    assert_eq!(
        ok(&dir, &["kv", "scan", "s", "--start", "f", "--end", "i"]),
        "f\tf\ng\tg\nh\th\n"
    );
    let st: serde_json::Value =
        serde_json::from_str(&ok(&dir, &["kv", "stats", "s", "--json"])).unwrap();
    assert_eq!(st["entries"].as_u64(), Some(11), "{st}");
    assert!(st["nodes"].as_u64().unwrap() >= 3, "{st}");
    let check = ok(&dir, &["kv", "check", "s"]);
    assert!(check.contains("11 entries; 0 problems"), "{check}");
    assert!(ok(&dir, &["kv", "clean", "s"]).contains("0 rolled back"));
    // The OSDs count the store's class calls, for the metrics.
    let url = prometheus_url(&dir);
    wait_for(30, "the key-value store's calls counted", || {
        let (_, t) = http_get(&url);
        (per_osd_sum(&t, "loligo_osd_kv_calls") >= 10.0).then_some(())
    });
    let e = loligo(&dir, &["kv", "get", "nostore", "a"]);
    assert_eq!(e.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&e.stderr).contains("no key-value store 'nostore'"));

    // Garbage on an OSD's port crashes nothing.
    let st: toml::Value =
        toml::from_str(&std::fs::read_to_string(dir.join("cluster.toml")).unwrap()).unwrap();
    let osd0 = st["osd_addrs"][0].as_str().unwrap().to_string();
    if let Ok(mut c) = std::net::TcpStream::connect(&osd0) {
        let _ = c.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\xff garbage garbage");
    }
    ok(&dir, &["get", "blob", out.to_str().unwrap()]);

    // One daemon at a time: a crashed (killed) OSD, then started again,
    // comes back up; data stays readable meanwhile.
    let e = loligo(&dir, &["stop", "osd.9", "--data-dir", &d]);
    assert_eq!(e.status.code(), Some(2), "no such daemon");
    ok(&dir, &["stop", "osd.2", "--kill", "--data-dir", &d]);
    assert!(ok(&dir, &["stop", "osd.2", "--data-dir", &d]).contains("not running"));
    ok(&dir, &["get", "blob", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), data);
    ok(&dir, &["start", "osd.2", "--data-dir", &d]);
    let again = loligo(&dir, &["start", "osd.2", "--data-dir", &d]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("already running"));
    // A clean stop tells the monitors at once; starting it again brings
    // it back up.
    let up_osds = |want: u64| {
        let t0 = std::time::Instant::now();
        loop {
            let s: serde_json::Value =
                serde_json::from_str(&ok(&dir, &["status", "--json"])).unwrap();
            if s["osdmap"]["num_up_osds"] == want {
                return;
            }
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(60),
                "never {want} OSDs up: {s}"
            );
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    };
    ok(&dir, &["stop", "osd.2", "--data-dir", &d]);
    up_osds(2);
    ok(&dir, &["get", "blob", out.to_str().unwrap()]);
    ok(&dir, &["start", "osd.2", "--data-dir", &d]);
    up_osds(3);
    ok(&dir, &["get", "blob", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), data);

    // Stop, start again: same data.
    ok(&dir, &["down", "--data-dir", &d]);
    // An OSD that cannot start (another process took its port) is named
    // at once, with its log, instead of a wait for every OSD to come up.
    let state: toml::Table =
        toml::from_str(&std::fs::read_to_string(dir.join("cluster.toml")).unwrap()).unwrap();
    let osd0 = state["osd_addrs"][0].as_str().unwrap().to_string();
    let taken = std::net::TcpListener::bind(&osd0).unwrap();
    let t0 = std::time::Instant::now();
    let blocked = loligo(&dir, &["up", "--detach", "--data-dir", &d]);
    let err = String::from_utf8_lossy(&blocked.stderr).into_owned();
    assert!(
        !blocked.status.success(),
        "up with osd.0's port taken: {err}"
    );
    assert!(
        err.contains("osd.0 exited") && err.contains("osd.0.log"),
        "{err}"
    );
    assert!(t0.elapsed() < std::time::Duration::from_secs(50), "{err}");
    drop(taken);
    ok(&dir, &["up", "--detach", "--data-dir", &d]);
    ok(&dir, &["get", "blob", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), data);
    drop(guard);
}

/// Ceph's report verbs on a clean 3-OSD, 16-PG cluster holding one
/// 300,000-byte object in pool `default`: each as text and as JSON.
fn ceph_report_verbs_print_the_cluster(dir: &std::path::Path) {
    let json = |args: &[&str]| -> serde_json::Value {
        let mut a = args.to_vec();
        a.push("--json");
        serde_json::from_str(&ok(dir, &a)).unwrap()
    };
    let df = json(&["df"]);
    let pool = (df["pools"].as_array().unwrap().iter())
        .find(|p| p["name"] == "default")
        .unwrap_or_else(|| panic!("no pool 'default' in {df}"));
    let s = &pool["stats"];
    assert!(s["objects"].as_u64().unwrap() >= 1, "{df}");
    let stored = s["stored"].as_u64().unwrap();
    assert!(stored >= 300_000, "{df}");
    assert_eq!(s["bytes_used"].as_u64().unwrap(), 3 * stored, "{df}");
    assert!(s["max_avail"].as_u64().unwrap() > 0, "{df}");
    assert!(df["stats"]["total_bytes"].as_u64().unwrap() > 0, "{df}");
    let text = ok(dir, &["df"]);
    assert!(text.starts_with("--- RAW STORAGE ---\nCLASS"), "{text}");
    assert!(text.contains("\n--- POOLS ---\nPOOL"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("default ")), "{text}");
    assert!(ok(dir, &["df", "detail"]).contains("QUOTA OBJECTS"));

    let stat = ok(dir, &["pg", "stat"]);
    assert!(stat.starts_with("16 pgs: 16 active+clean; "), "{stat}");
    assert!(stat.contains(" KiB data, "), "the object's 293 KiB: {stat}");
    let summary = &json(&["pg", "stat"])["pg_summary"];
    assert_eq!(summary["num_pgs"], 16);
    assert_eq!(summary["num_bytes"], stored, "as df counts it");
    let brief = ok(dir, &["pg", "dump", "pgs_brief"]);
    assert!(brief.starts_with("PG_STAT  STATE"), "{brief}");
    assert_eq!(brief.lines().count(), 17, "{brief}");
    let rows = json(&["pg", "dump", "pgs_brief"]);
    let rows = rows["pg_stats"].as_array().unwrap();
    assert_eq!(rows.len(), 16);
    for r in rows {
        let acting = r["acting"].as_array().unwrap();
        assert_eq!(acting.len(), 3, "{r}");
        assert!(acting.contains(&r["acting_primary"]), "{r}");
    }
    let dump = json(&["pg", "dump"]);
    assert_eq!(dump["pg_map"]["pg_stats"].as_array().unwrap().len(), 16);

    let perf = ok(dir, &["osd", "perf"]);
    assert!(
        perf.starts_with("osd  commit_latency(ms)  apply_latency(ms)"),
        "{perf}"
    );
    assert_eq!(perf.lines().count(), 4, "{perf}");
    let infos = json(&["osd", "perf"]);
    assert_eq!(
        infos["osdstats"]["osd_perf_infos"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    let dump = ok(dir, &["osd", "dump"]);
    assert!(dump.starts_with("epoch "), "{dump}");
    assert!(
        dump.contains("\npool 1 'default' replicated size 3 min_size 2 "),
        "{dump}"
    );
    assert!(dump.contains("\nmax_osd 3\n"), "{dump}");
    for id in 0..3 {
        assert!(
            dump.contains(&format!("\nosd.{id} up in weight ")),
            "{dump}"
        );
    }
}

/// Poll `f` every 200 ms until it returns `Some`, for at most `secs`.
fn wait_for<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t0.elapsed().as_secs() < secs, "{what} within {secs} s");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// osd.`id`'s entry in `osd dump`.
fn osd_entry(dir: &std::path::Path, id: u64) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(&ok(dir, &["osd", "dump", "--json"])).unwrap();
    let osds = v["osds"].as_array().unwrap();
    (osds.iter().find(|o| o["id"] == id).cloned()).unwrap_or_else(|| panic!("no osd.{id}: {v}"))
}

fn status(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&ok(dir, &["status", "--json"])).unwrap()
}

/// `osd ok-to-stop`, and the maintenance flags on a live cluster with a
/// 2-second down-out interval: under `noout` a stopped OSD stays in past the interval (and
/// health names the flag); without it the monitor marks it out, and its
/// next boot marks it in again; under `noup` a started OSD stays down
/// until the flag is cleared; under `norecover` a returning OSD's PGs
/// wait in recovery_wait until it is cleared. The cluster ends clean.
#[test]
fn maintenance_flags_hold_outs_boots_and_recovery() {
    let (root, dir, _guard) = common::start_with("flags", 3, 8, &["--down-out-interval", "2"]);
    let d = dir.to_string_lossy().into_owned();
    let clean = |what: &str| wait_for(60, what, || common::not_clean(&dir).is_none().then_some(()));
    clean("clean at the start");
    let file = root.join("in.bin");
    std::fs::write(&file, vec![7u8; 10_000]).unwrap();
    let put_some = |tag: &str| {
        for i in 0..16 {
            ok(
                &dir,
                &["put", &format!("{tag}-{i}"), file.to_str().unwrap()],
            );
        }
    };
    put_some("a");
    // ok-to-stop: one of three may stop (size 3, min_size 2), two not.
    let said = ok(&dir, &["osd", "ok-to-stop", "0"]);
    assert!(said.contains("are ok to stop"), "{said}");
    let e = loligo(&dir, &["osd", "ok-to-stop", "0", "1"]);
    assert_eq!(e.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&e.stderr).contains("unsafe to stop osd(s)"));

    // noout: down past the interval, still in.
    ok(&dir, &["osd", "set", "noout"]);
    let s = status(&dir);
    assert_eq!(s["osdmap"]["flags"], serde_json::json!(["noout"]), "{s}");
    assert_eq!(
        s["health"]["checks"]["OSDMAP_FLAGS"]["summary"]["message"], "noout flag(s) set",
        "{s}"
    );
    ok(&dir, &["stop", "osd.2", "--data-dir", &d]);
    wait_for(20, "osd.2 down", || {
        (osd_entry(&dir, 2)["up"] == false).then_some(())
    });
    std::thread::sleep(std::time::Duration::from_secs(5));
    assert!(
        osd_entry(&dir, 2)["weight"].as_u64() > Some(0),
        "noout: osd.2 stays in"
    );
    ok(&dir, &["start", "osd.2", "--data-dir", &d]);
    clean("clean after a restart under noout");
    ok(&dir, &["osd", "unset", "noout"]);

    // Without it: out after the interval, in again at its boot.
    ok(&dir, &["stop", "osd.2", "--data-dir", &d]);
    wait_for(30, "osd.2 marked out by the monitor", || {
        let v: serde_json::Value =
            serde_json::from_str(&ok(&dir, &["osd", "dump", "--json"])).unwrap();
        (v["auto_out"] == serde_json::json!([2])).then_some(())
    });
    assert_eq!(osd_entry(&dir, 2)["weight"], 0);
    ok(&dir, &["start", "osd.2", "--data-dir", &d]);
    clean("clean after the monitor's out is undone at boot");

    // noup: a started OSD waits down.
    ok(&dir, &["osd", "set", "noup"]);
    ok(&dir, &["stop", "osd.1", "--data-dir", &d]);
    wait_for(20, "osd.1 down", || {
        (osd_entry(&dir, 1)["up"] == false).then_some(())
    });
    ok(&dir, &["start", "osd.1", "--data-dir", &d]);
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(osd_entry(&dir, 1)["up"], false, "noup: osd.1 stays down");
    ok(&dir, &["osd", "unset", "noup"]);
    clean("clean once noup is cleared");

    // norecover: what osd.0 missed waits until the flag is cleared.
    ok(&dir, &["osd", "set", "norecover"]);
    ok(&dir, &["stop", "osd.0", "--data-dir", &d]);
    wait_for(20, "osd.0 down", || {
        (osd_entry(&dir, 0)["up"] == false).then_some(())
    });
    put_some("b");
    ok(&dir, &["start", "osd.0", "--data-dir", &d]);
    wait_for(30, "PGs waiting in recovery_wait", || {
        let s = status(&dir);
        let waiting =
            (s["pgs"]["by_state"].as_object().unwrap().keys()).any(|k| k.contains("recovery_wait"));
        (waiting && s["osdmap"]["num_up_osds"] == 3).then_some(())
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(
        common::not_clean(&dir).is_some(),
        "norecover: still not clean"
    );
    ok(&dir, &["osd", "unset", "norecover"]);
    clean("clean once norecover is cleared");
    let out = root.join("out.bin");
    ok(&dir, &["get", "b-15", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), vec![7u8; 10_000]);
    // Bad flags and ratios are refused, naming what is wanted.
    let e = loligo(&dir, &["osd", "set", "nosuch"]);
    assert!(String::from_utf8_lossy(&e.stderr).contains("unknown flag 'nosuch'"));
    let e = loligo(&dir, &["osd", "set-nearfull-ratio", "0.99"]);
    assert!(
        String::from_utf8_lossy(&e.stderr).contains("nearfull <= backfillfull <= full"),
        "{}",
        String::from_utf8_lossy(&e.stderr)
    );
    ok(&dir, &["osd", "set-full-ratio", "0.97"]);
    let v: serde_json::Value = serde_json::from_str(&ok(&dir, &["osd", "dump", "--json"])).unwrap();
    assert_eq!(v["full_ratio"], 0.97);
}

/// `up --mons 3`: a local cluster with a group of three monitors, which
/// goes on with its leader stopped (clients and OSDs turn to the others;
/// the map still changes) and takes the monitor back. `--mons 2` is
/// refused.
#[test]
fn three_monitors_go_on_with_the_leader_stopped() {
    let (root, dir, _guard) = common::start_with("mons3", 3, 8, &["--mons", "3"]);
    let d = dir.to_string_lossy().into_owned();
    let s = status(&dir);
    assert_eq!(
        s["monitors"]["members"],
        serde_json::json!([0, 1, 2]),
        "{s}"
    );
    let leader = s["monitors"]["leader"].as_u64().expect("a leader");
    let file = root.join("in.bin");
    std::fs::write(&file, b"three monitors").unwrap();
    ok(&dir, &["put", "a", file.to_str().unwrap()]);
    ok(&dir, &["stop", &format!("mon.{leader}"), "--data-dir", &d]);
    let other = wait_for(30, "a new leader", || {
        let o = loligo(&dir, &["status", "--json"]);
        let s: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
        s["monitors"]["leader"].as_u64().filter(|&l| l != leader)
    });
    assert_ne!(other, leader);
    // The map still changes, and data still flows.
    ok(&dir, &["osd", "set", "noscrub"]);
    ok(&dir, &["put", "b", file.to_str().unwrap()]);
    let out = root.join("out.bin");
    ok(&dir, &["get", "a", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), b"three monitors");
    ok(&dir, &["start", &format!("mon.{leader}"), "--data-dir", &d]);
    ok(&dir, &["osd", "unset", "noscrub"]);
    wait_for(60, "clean with every monitor back", || {
        common::not_clean(&dir).is_none().then_some(())
    });
    let e = loligo(
        &dir,
        &[
            "up",
            "--mons",
            "2",
            "--data-dir",
            &root.join("two").to_string_lossy(),
        ],
    );
    assert_eq!(e.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&e.stderr).contains("--mons must be 1, 3 or 5"));
}

/// A disk replaced under its OSD's id: `safe-to-destroy` says no while
/// PGs are placed on the OSD and yes once it is out and they moved;
/// `destroy` is refused while it is up or unconfirmed, then marks it
/// destroyed and revokes its key; `osd new` gives the id a new keyring,
/// and a fresh store started under it boots in and is backfilled, every
/// object readable. `osd new` with no id takes the lowest unused one;
/// `purge` of an OSD PGs still need is refused without --force, and with
/// it the OSD leaves the map and the cluster ends clean without it.
#[test]
fn a_destroyed_osd_is_replaced_under_its_id_and_backfilled() {
    let (root, dir, _guard) = common::start("replace", 4, 8);
    let d = dir.to_string_lossy().into_owned();
    let clean = |what: &str| wait_for(90, what, || common::not_clean(&dir).is_none().then_some(()));
    clean("clean at the start");
    let file = root.join("in.bin");
    for i in 0..24 {
        std::fs::write(&file, format!("object {i}").repeat(100)).unwrap();
        ok(&dir, &["put", &format!("o{i}"), file.to_str().unwrap()]);
    }
    let refused = |args: &[&str], why: &str| {
        let o = loligo(&dir, args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(!o.status.success() && err.contains(why), "{args:?}: {err}");
    };
    refused(&["osd", "safe-to-destroy", "3"], "not safe to destroy");
    refused(&["osd", "destroy", "3", "--yes-i-really-mean-it"], "is up");
    ok(&dir, &["osd", "out", "3"]);
    wait_for(90, "every PG clean with osd.3 out", || {
        let s = status(&dir);
        (s["pgs"]["by_state"]["active+clean"] == s["pgs"]["total"]).then_some(())
    });
    wait_for(30, "osd.3 safe to destroy", || {
        loligo(&dir, &["osd", "safe-to-destroy", "3"])
            .status
            .success()
            .then_some(())
    });
    ok(&dir, &["stop", "osd.3", "--data-dir", &d]);
    wait_for(20, "osd.3 down", || {
        (osd_entry(&dir, 3)["up"] == false).then_some(())
    });
    refused(&["osd", "destroy", "3"], "--yes-i-really-mean-it");
    ok(&dir, &["osd", "destroy", "3", "--yes-i-really-mean-it"]);
    let tree = ok(&dir, &["osd", "tree"]);
    assert!(
        tree.lines()
            .any(|l| l.contains("osd.3") && l.contains("destroyed")),
        "{tree}"
    );
    refused(&["osd", "new", "2"], "not destroyed");
    // The disk is replaced: a fresh store, a new key.
    std::fs::remove_dir_all(dir.join("osd.3")).unwrap();
    let keyring = dir.join("keys").join("osd.3.keyring");
    refused(
        &["osd", "new", "3", "-o", keyring.to_str().unwrap()],
        "exists",
    );
    std::fs::remove_file(&keyring).unwrap();
    let id = ok(&dir, &["osd", "new", "3", "-o", keyring.to_str().unwrap()]);
    assert_eq!(id.trim(), "3");
    ok(&dir, &["start", "osd.3", "--data-dir", &d]);
    wait_for(30, "the replacement up and in", || {
        let o = osd_entry(&dir, 3);
        (o["up"] == true && o["weight"].as_u64() > Some(0)).then_some(())
    });
    clean("clean with the replacement backfilled");
    let rows: serde_json::Value = serde_json::from_str(&ok(&dir, &["pg", "ls", "--json"])).unwrap();
    let on_3 = (rows.as_array().unwrap().iter())
        .filter(|r| {
            r["acting"]
                .as_array()
                .unwrap()
                .contains(&serde_json::json!(3))
        })
        .count();
    assert!(on_3 > 0, "no PG on the replacement: {rows}");
    let out = root.join("out.bin");
    for i in 0..24 {
        ok(&dir, &["get", &format!("o{i}"), out.to_str().unwrap()]);
        assert_eq!(
            std::fs::read(&out).unwrap(),
            format!("object {i}").repeat(100).into_bytes()
        );
    }
    // `osd new` with no id: the lowest no OSD has (its keyring printed).
    let o = ok(&dir, &["osd", "new"]);
    assert_eq!(o.lines().next(), Some("4"), "{o}");
    assert!(o.contains("osd.4"), "{o}");
    // A purge of an OSD PGs still need: only with --force.
    ok(&dir, &["stop", "osd.3", "--data-dir", &d]);
    wait_for(20, "osd.3 down again", || {
        (osd_entry(&dir, 3)["up"] == false).then_some(())
    });
    refused(&["osd", "purge", "3", "--yes-i-really-mean-it"], "--force");
    ok(
        &dir,
        &["osd", "purge", "3", "--yes-i-really-mean-it", "--force"],
    );
    let v: serde_json::Value = serde_json::from_str(&ok(&dir, &["osd", "dump", "--json"])).unwrap();
    assert!(
        !(v["osds"].as_array().unwrap().iter()).any(|o| o["id"] == 3),
        "{v}"
    );
    clean("clean without osd.3");
}

/// A three-monitor group changes shape while a client writes: a
/// follower's store is lost (health says `MON_DOWN`), `start` refuses to
/// bring it back while it is a member, `mon rm` removes it, and it joins
/// anew (`start` makes a store to join; `mon add` makes it a voter once
/// it caught up); then the leader removes itself, another leads, and the
/// old leader, wiped, joins again. `mon stat` and `quorum_status` say
/// who is in; every acknowledged write reads back.
#[test]
fn monitors_are_removed_replaced_and_added_while_the_cluster_serves() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (root, dir, _guard) = common::start_with("monmove", 3, 8, &["--mons", "3"]);
    let d = dir.to_string_lossy().into_owned();
    let quorum = |n: usize, what: &str| {
        wait_for(60, what, || {
            let o = loligo(&dir, &["quorum_status"]);
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
            (v["quorum"].as_array()?.len() == n && v["monmap"]["mons"].as_array()?.len() == n)
                .then_some(v)
        })
    };
    let v = quorum(3, "three monitors in quorum");
    let addr_of = |id: u64| -> String {
        (v["monmap"]["mons"].as_array().unwrap().iter())
            .find(|m| m["rank"] == id)
            .and_then(|m| m["addr"].as_str())
            .unwrap()
            .to_string()
    };
    let addrs: Vec<String> = (0..3).map(addr_of).collect();
    let stat = ok(&dir, &["mon", "stat"]);
    assert!(stat.contains(": 3 mons at {0="), "{stat}");
    let stat: serde_json::Value =
        serde_json::from_str(&ok(&dir, &["mon", "stat", "--json"])).unwrap();
    assert_eq!(stat["num_mons"], 3, "{stat}");
    assert_eq!(stat["quorum"].as_array().map(Vec::len), Some(3), "{stat}");
    // A client writes all along.
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writer = {
        let (dir, root, stop) = (dir.clone(), root.clone(), stop.clone());
        let count = count.clone();
        std::thread::spawn(move || {
            let mut acked = Vec::new();
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let f = root.join("w.bin");
                std::fs::write(&f, format!("write {i}")).unwrap();
                let name = format!("w{i}");
                if loligo(&dir, &["put", &name, f.to_str().unwrap()])
                    .status
                    .success()
                {
                    acked.push(i);
                    count.fetch_add(1, Ordering::Relaxed);
                }
            }
            acked
        })
    };
    let leader = |v: &serde_json::Value| -> u64 {
        let name = v["quorum_leader_name"].as_str().unwrap();
        name[4..].parse().unwrap()
    };
    let first_leader = leader(&v);
    let victim = (0..3).find(|&i| i != first_leader).unwrap();
    // A follower's disk is lost.
    ok(
        &dir,
        &["stop", &format!("mon.{victim}"), "--kill", "--data-dir", &d],
    );
    wait_for(30, "MON_DOWN", || {
        let s = status(&dir);
        let down = s["health"]["checks"]["MON_DOWN"]["summary"]["message"].to_string();
        down.contains("1/3 mons down").then_some(())
    });
    std::fs::remove_dir_all(dir.join(format!("mon.{victim}"))).unwrap();
    let o = loligo(&dir, &["start", &format!("mon.{victim}"), "--data-dir", &d]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("still a member"),
        "{err}"
    );
    let said = ok(&dir, &["mon", "rm", &victim.to_string()]);
    assert!(said.contains("removed"), "{said}");
    quorum(2, "two monitors after the removal");
    let said = ok(&dir, &["start", &format!("mon.{victim}"), "--data-dir", &d]);
    assert!(said.contains("mon add"), "{said}");
    let said = ok(
        &dir,
        &["mon", "add", &victim.to_string(), &addrs[victim as usize]],
    );
    assert!(said.contains("added"), "{said}");
    let v = quorum(3, "three monitors with the replacement");
    let o = loligo(
        &dir,
        &["mon", "add", &victim.to_string(), &addrs[victim as usize]],
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("a member already"));
    // The leader removes itself; another leads.
    let old = leader(&v);
    let t = std::time::Instant::now();
    ok(&dir, &["mon", "rm", &old.to_string()]);
    let v = quorum(2, "two monitors without the old leader");
    assert_ne!(leader(&v), old);
    eprintln!(
        "the leader removed itself; another led, its quorum answering, {:?} after the command",
        t.elapsed()
    );
    ok(&dir, &["stop", &format!("mon.{old}"), "--data-dir", &d]);
    std::fs::remove_dir_all(dir.join(format!("mon.{old}"))).unwrap();
    ok(&dir, &["start", &format!("mon.{old}"), "--data-dir", &d]);
    ok(
        &dir,
        &["mon", "add", &old.to_string(), &addrs[old as usize]],
    );
    quorum(3, "three monitors again");
    let before = count.load(Ordering::Relaxed);
    wait_for(60, "writes going on after the changes", || {
        (count.load(Ordering::Relaxed) >= before + 5).then_some(())
    });
    stop.store(true, Ordering::Relaxed);
    let acked = writer.join().unwrap();
    assert!(acked.len() >= 5, "only {} writes acknowledged", acked.len());
    let out = root.join("out.bin");
    for i in acked {
        ok(&dir, &["get", &format!("w{i}"), out.to_str().unwrap()]);
        assert_eq!(
            std::fs::read(&out).unwrap(),
            format!("write {i}").into_bytes()
        );
    }
    let s = status(&dir);
    assert!(s["health"]["checks"].get("MON_DOWN").is_none(), "{s}");
}

/// A three-monitor group loses two members for good: nothing can change
/// the map (status says there is no quorum). The survivor's map is taken
/// (`osd getmap --mon`), and a new group of one is started from it
/// (`mon run --mkfs --restore`): the OSDs, still running, follow its
/// map (its epoch moved on by 100,000), every object reads back, writes
/// go on, and the lost monitors join the new group anew.
#[test]
fn a_group_that_lost_its_majority_is_restored_from_a_survivors_map() {
    let (root, dir, _guard) = common::start_with("monlost", 3, 8, &["--mons", "3"]);
    let d = dir.to_string_lossy().into_owned();
    let file = root.join("in.bin");
    for i in 0..8 {
        std::fs::write(&file, format!("before {i}")).unwrap();
        ok(&dir, &["put", &format!("b{i}"), file.to_str().unwrap()]);
    }
    let v: serde_json::Value = serde_json::from_str(&ok(&dir, &["quorum_status"])).unwrap();
    let addrs: Vec<String> = (0..3u64)
        .map(|id| {
            (v["monmap"]["mons"].as_array().unwrap().iter())
                .find(|m| m["rank"] == id)
                .and_then(|m| m["addr"].as_str())
                .unwrap()
                .to_string()
        })
        .collect();
    let dump: serde_json::Value =
        serde_json::from_str(&ok(&dir, &["osd", "dump", "--json"])).unwrap();
    let (fsid, epoch) = (
        dump["fsid"].as_str().unwrap().to_string(),
        dump["epoch"].as_u64().unwrap(),
    );
    for id in [1, 2] {
        ok(
            &dir,
            &["stop", &format!("mon.{id}"), "--kill", "--data-dir", &d],
        );
    }
    let o = loligo(&dir, &["osd", "set", "noscrub"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("quorum"), "{err}");
    let map = root.join("survivor.map");
    ok(
        &dir,
        &[
            "osd",
            "getmap",
            "--mon",
            &addrs[0],
            "-o",
            map.to_str().unwrap(),
        ],
    );
    ok(&dir, &["stop", "mon.0", "--data-dir", &d]);
    std::fs::rename(dir.join("mon.0"), root.join("mon.0.old")).unwrap();
    let keys = dir.join("keys");
    let log = std::fs::File::create(dir.join("mon.0.log")).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_loligo"))
        .args([
            "mon",
            "run",
            "--id",
            "0",
            "--members",
            &format!("0={}", addrs[0]),
            "--data",
            dir.join("mon.0").to_str().unwrap(),
            "--fsid",
            &fsid,
            "--failure-domain",
            "osd",
            "--min-down-reporters",
            "2",
            "--mkfs",
            "--restore",
            map.to_str().unwrap(),
            "--keyring",
            keys.join("mon.0.keyring").to_str().unwrap(),
            "--authority",
            keys.to_str().unwrap(),
        ])
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    // `loligo down` stops it with the others.
    std::fs::write(dir.join("mon.0.pid"), child.id().to_string()).unwrap();
    let restored = wait_for(60, "the restored group answering", || {
        let o = loligo(&dir, &["osd", "dump", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
        v["epoch"].as_u64().filter(|&e| e >= epoch + 100_000)
    });
    eprintln!("restored at epoch {restored} from {epoch}");
    wait_for(90, "every PG clean under the new group", || {
        let s = status(&dir);
        (s["pgs"]["by_state"]["active+clean"] == s["pgs"]["total"]).then_some(())
    });
    let out = root.join("out.bin");
    for i in 0..8 {
        ok(&dir, &["get", &format!("b{i}"), out.to_str().unwrap()]);
        assert_eq!(
            std::fs::read(&out).unwrap(),
            format!("before {i}").into_bytes()
        );
    }
    ok(&dir, &["put", "after", file.to_str().unwrap()]);
    // The lost monitors join the new group anew.
    for id in [1u64, 2] {
        std::fs::remove_dir_all(dir.join(format!("mon.{id}"))).unwrap();
        ok(&dir, &["start", &format!("mon.{id}"), "--data-dir", &d]);
        ok(&dir, &["mon", "add", &id.to_string(), &addrs[id as usize]]);
    }
    wait_for(60, "three monitors in quorum again", || {
        let o = loligo(&dir, &["quorum_status"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
        (v["quorum"].as_array()?.len() == 3).then_some(())
    });
    ok(&dir, &["stop", "mon.0", "--data-dir", &d]);
    let _ = child.wait();
}

/// CRUSH changes on a live cluster: `osd crush set-location` puts an OSD
/// under a new host (made under the root), `osd crush reweight` changes
/// its share, `osd crush move` takes an OSD too; the data follows each
/// (PGs clean, every object readable), and an OSD restarted with its
/// old `--host` moves back under it on its own.
#[test]
fn crush_locations_change_live_and_a_restarted_osd_follows_its_host() {
    let (root, dir, _guard) = common::start("crushloc", 3, 8);
    let d = dir.to_string_lossy().into_owned();
    let file = root.join("in.bin");
    for i in 0..12 {
        std::fs::write(&file, format!("object {i}")).unwrap();
        ok(&dir, &["put", &format!("o{i}"), file.to_str().unwrap()]);
    }
    let under = |osd: &str| -> String {
        // The bucket the OSD's row follows in `osd tree --json`.
        let rows: serde_json::Value =
            serde_json::from_str(&ok(&dir, &["osd", "tree", "--json"])).unwrap();
        let rows = rows.as_array().unwrap();
        let i = rows.iter().position(|r| r["name"] == osd).unwrap();
        let depth = rows[i]["depth"].as_u64().unwrap();
        let parent = rows[..i]
            .iter()
            .rev()
            .find(|r| r["depth"].as_u64() == Some(depth - 1));
        parent.unwrap()["name"].as_str().unwrap().to_string()
    };
    let settled = |what: &str| {
        wait_for(60, what, || common::not_clean(&dir).is_none().then_some(()));
        let out = root.join("out.bin");
        for i in 0..12 {
            ok(&dir, &["get", &format!("o{i}"), out.to_str().unwrap()]);
            assert_eq!(
                std::fs::read(&out).unwrap(),
                format!("object {i}").into_bytes()
            );
        }
    };
    settled("clean at the start");
    let home = under("osd.2");
    ok(&dir, &["osd", "crush", "set-location", "osd.2", "host=h2"]);
    assert_eq!(under("osd.2"), "h2");
    settled("clean with osd.2 under h2");
    ok(&dir, &["osd", "crush", "reweight", "osd.2", "0.5"]);
    let rows: serde_json::Value =
        serde_json::from_str(&ok(&dir, &["osd", "tree", "--json"])).unwrap();
    let row = (rows.as_array().unwrap().iter())
        .find(|r| r["name"] == "osd.2")
        .unwrap();
    assert_eq!(row["crush_weight"], 0.5, "{row}");
    settled("clean with osd.2 reweighted");
    ok(&dir, &["osd", "crush", "move", "osd.1", "h2"]);
    assert_eq!(under("osd.1"), "h2");
    settled("clean with osd.1 moved");
    let e = loligo(&dir, &["osd", "crush", "set-location", "osd.1", "hostx"]);
    assert!(String::from_utf8_lossy(&e.stderr).contains("TYPE=NAME"));
    // Restarted with its --host, osd.2 goes home.
    ok(&dir, &["stop", "osd.2", "--data-dir", &d]);
    ok(&dir, &["start", "osd.2", "--data-dir", &d]);
    wait_for(30, "osd.2 back under its host", || {
        (under("osd.2") == home).then_some(())
    });
    settled("clean with osd.2 home");
}

/// A CRUSH map installed live (`crush set -i`): the running map, taken
/// as text (`crush get --text`), with its host bucket made linear, is
/// installed (a warning names the linear bucket while chooseleaf_vary_r
/// is not 0), a pool's `balance_param` set; the data moves where the new
/// map places it and every object reads back. PGs per OSD from the live
/// map (`osd df`) are what `crush map-pgs` computes offline for the same
/// map, and the adaptive parameter spreads them no worse than straw2. A
/// map that does not hold every OSD is refused.
#[test]
fn a_crush_map_with_linear_buckets_installed_live_serves() {
    let (root, dir, _guard) = common::start("crushset", 4, 64);
    let file = root.join("in.bin");
    for i in 0..16 {
        std::fs::write(&file, format!("object {i}")).unwrap();
        ok(&dir, &["put", &format!("o{i}"), file.to_str().unwrap()]);
    }
    let settled = |what: &str| {
        wait_for(90, what, || common::not_clean(&dir).is_none().then_some(()));
        let out = root.join("out.bin");
        for i in 0..16 {
            ok(&dir, &["get", &format!("o{i}"), out.to_str().unwrap()]);
            assert_eq!(
                std::fs::read(&out).unwrap(),
                format!("object {i}").into_bytes()
            );
        }
    };
    settled("clean at the start");
    // PGs per OSD from the live map (`osd df`) are what the offline tool
    // computes from the same CRUSH map and pool: (per OSD, stdev).
    let pool = |k: &str| -> serde_json::Value {
        let v: serde_json::Value =
            serde_json::from_str(&ok(&dir, &["pool", "get", "default"])).unwrap();
        v[k].clone()
    };
    let live = || -> (Vec<u64>, f64) {
        let v: serde_json::Value =
            serde_json::from_str(&ok(&dir, &["osd", "df", "--json"])).unwrap();
        let per = (v["nodes"].as_array().unwrap().iter())
            .map(|n| n["pgs"].as_u64().unwrap())
            .collect();
        (per, v["summary"]["pgs_dev"].as_f64().unwrap())
    };
    let offline = || -> (Vec<u64>, f64) {
        let map = root.join("live.txt");
        std::fs::write(&map, ok(&dir, &["crush", "get", "--text"])).unwrap();
        let bp = pool("balance_param").as_f64().unwrap() / 65536.0;
        let (id, pg_num, size) = (pool("id"), pool("pg_num"), pool("size"));
        let args = [
            "crush",
            "map-pgs",
            "-i",
            map.to_str().unwrap(),
            "--pool-id",
            &id.to_string(),
            "--pg-num",
            &pg_num.to_string(),
            "--size",
            &size.to_string(),
            "--balance-param",
            &bp.to_string(),
            "--json",
        ];
        let v: serde_json::Value = serde_json::from_str(&ok(&dir, &args)).unwrap();
        let per = (v["per_osd"].as_object().unwrap().values())
            .map(|c| c.as_u64().unwrap())
            .collect();
        (per, v["stdev"].as_f64().unwrap())
    };
    let straw2 = live();
    assert_eq!(straw2.0.iter().sum::<u64>(), 64 * 3, "{straw2:?}");
    assert_eq!(straw2, offline());
    let text = ok(&dir, &["crush", "get", "--text"]);
    assert!(text.contains("alg straw2"), "{text}");
    let linear = root.join("linear.txt");
    std::fs::write(&linear, text.replace("alg straw2", "alg linear")).unwrap();
    let o = loligo(&dir, &["crush", "set", "-i", linear.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("is linear and chooseleaf_vary_r is 1"),
        "{err}"
    );
    let got = ok(&dir, &["crush", "get", "--text"]);
    assert!(
        got.contains("alg linear") && !got.contains("alg straw2"),
        "{got}"
    );
    settled("clean on the linear map");
    ok(&dir, &["pool", "set", "default", "balance_param", "1.5"]);
    let v: serde_json::Value =
        serde_json::from_str(&ok(&dir, &["pool", "get", "default"])).unwrap();
    assert_eq!(v["balance_param"], 98304, "{v}");
    settled("clean with the balance parameter");
    let e = loligo(&dir, &["pool", "set", "default", "balance_param", "0.5"]);
    assert!(String::from_utf8_lossy(&e.stderr).contains("balance_param must be in"));
    // The adaptive parameter: the live spread is the offline one, and no
    // worse than straw2's on this cluster.
    ok(&dir, &["pool", "set", "default", "balance_param", "auto"]);
    settled("clean with the adaptive balance parameter");
    let adaptive = live();
    eprintln!("PGs per OSD: straw2 {straw2:?}, linear with the adaptive parameter {adaptive:?}");
    assert_eq!(adaptive, offline());
    assert!(adaptive.1 <= straw2.1, "{adaptive:?} against {straw2:?}");
    // A map without osd.3 is refused, and changes nothing.
    let without: String = (got.lines())
        .filter(|l| !l.contains("osd.3"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&linear, without).unwrap();
    let o = loligo(&dir, &["crush", "set", "-i", linear.to_str().unwrap()]);
    assert!(!o.status.success(), "a map without osd.3 was taken");
    assert_eq!(ok(&dir, &["crush", "get", "--text"]), got);
}

/// The upmap balancer on a live cluster: CRUSH alone leaves the 4 OSDs'
/// PG counts apart; `balancer on` brings every OSD within one PG of its
/// target (spread of at most 2 between the fullest and the emptiest) by
/// pg_upmap_items, the cluster ends clean and every object reads back;
/// `balancer status` says it is on and what its last run did.
#[test]
fn the_balancer_evens_a_skewed_cluster() {
    let (root, dir, _guard) = common::start("balance", 4, 64);
    let file = root.join("in.bin");
    for i in 0..16 {
        std::fs::write(&file, format!("object {i}")).unwrap();
        ok(&dir, &["put", &format!("o{i}"), file.to_str().unwrap()]);
    }
    let spread = || -> i64 {
        let rows: serde_json::Value =
            serde_json::from_str(&ok(&dir, &["pg", "ls", "--json"])).unwrap();
        let mut per = std::collections::BTreeMap::<i64, i64>::new();
        for r in rows.as_array().unwrap() {
            for o in r["up"].as_array().unwrap() {
                *per.entry(o.as_i64().unwrap()).or_default() += 1;
            }
        }
        per.values().max().unwrap() - per.values().min().unwrap()
    };
    wait_for(60, "clean at the start", || {
        common::not_clean(&dir).is_none().then_some(())
    });
    let before = spread();
    assert!(
        before > 2,
        "CRUSH alone is even here ({before}): nothing to test"
    );
    ok(&dir, &["balancer", "on"]);
    wait_for(120, "balanced and clean", || {
        (spread() <= 2 && common::not_clean(&dir).is_none()).then_some(())
    });
    let v: serde_json::Value = serde_json::from_str(&ok(&dir, &["balancer", "status"])).unwrap();
    assert_eq!(v["active"], true, "{v}");
    assert!(v["pg_upmap_items"].as_u64() > Some(0), "{v}");
    eprintln!("spread {before} -> {}; {v}", spread());
    let out = root.join("out.bin");
    for i in 0..16 {
        ok(&dir, &["get", &format!("o{i}"), out.to_str().unwrap()]);
        assert_eq!(
            std::fs::read(&out).unwrap(),
            format!("object {i}").into_bytes()
        );
    }
    ok(&dir, &["balancer", "off"]);
}

/// `pool set NAME pg_num` on a replicated and an erasure-coded pool of 8
/// PGs: 8 -> 32 splits every PG in place, the monitors raise pgp_num to
/// 32 in steps, the new PGs move, the cluster ends clean with 32 PGs per
/// pool, and every object reads back; a pgp_num other than pg_num is
/// refused. 32 -> 12 -> 8 then lowers pgp_num in steps and merges: clean
/// with 12, then 8 PGs per pool, every joining copy merged complete,
/// every object reads back, and new writes land.
#[test]
fn pg_num_grows_and_shrinks_on_replicated_and_erasure_coded_pools() {
    let (root, dir, _guard) = common::start("split", 4, 8);
    common::ec_profiles(&dir);
    common::create_ecrs_pool(&dir, None);
    common::put_objects(&dir, &root, None, "r", 40);
    common::put_objects(&dir, &root, Some("ecrs"), "e", 40);
    wait_for(60, "clean at the start", || {
        common::not_clean(&dir).is_none().then_some(())
    });
    let pool = |name: &str| -> serde_json::Value {
        serde_json::from_str(&ok(&dir, &["pool", "get", name])).unwrap()
    };
    for name in ["default", "ecrs"] {
        ok(&dir, &["pool", "set", name, "pg_num", "32"]);
        assert_eq!(pool(name)["pg_num"], 32);
        assert!(pool(name)["pgp_num"].as_u64().unwrap() < 32);
    }
    // The objects are there at once (the split moves none off its OSDs).
    common::read_back(&dir, &root, None, "r", 40);
    common::read_back(&dir, &root, Some("ecrs"), "e", 40);
    wait_for(240, "pgp_num 32 and clean", || {
        let done = ["default", "ecrs"].iter().all(|n| pool(n)["pgp_num"] == 32);
        (done && common::not_clean(&dir).is_none()).then_some(())
    });
    assert_eq!(status(&dir)["pgs"]["total"], 64);
    common::read_back(&dir, &root, None, "r", 40);
    common::read_back(&dir, &root, Some("ecrs"), "e", 40);
    let e = loligo(&dir, &["pool", "set", "ecrs", "pgp_num", "16"]);
    assert!(String::from_utf8_lossy(&e.stderr).contains("pgp_num follows pg_num"));
    let e = loligo(&dir, &["pool", "set", "default", "pg_num", "0"]);
    assert!(String::from_utf8_lossy(&e.stderr).contains("at least 1"));
    // Down again: pgp_num falls, then the PGs merge; 32 -> 12 -> 8 (in the
    // second, PGs 1.4 to 1.7 have no sources: their copies stay as they
    // are).
    let logs = || -> String {
        (0..4)
            .map(|i| std::fs::read_to_string(dir.join(format!("osd.{i}.log"))).unwrap_or_default())
            .collect()
    };
    for (n, joining) in [(12u64, 12), (8, 4)] {
        for name in ["default", "ecrs"] {
            ok(&dir, &["pool", "set", name, "pg_num", &n.to_string()]);
            assert_eq!(pool(name)["pg_num_target"], n);
        }
        wait_for(300, &format!("pg_num {n} and clean"), || {
            let done = ["default", "ecrs"]
                .iter()
                .all(|p| pool(p)["pg_num"] == n && pool(p)["pgp_num"] == n);
            (done && common::not_clean(&dir).is_none()).then_some(())
        });
        assert_eq!(status(&dir)["pgs"]["total"], 2 * n);
        // Each joining PG's three members merged complete copies: the PGs
        // held their writes and were clean, so none had to be backfilled
        // (a stray's leftovers may merge into one that is, then removed).
        // (Polled: the daemons' log lines may land after the states.)
        let complete = || {
            (logs().lines())
                .filter(|l| l.contains(&format!("sources for pg_num {n} ")))
                .filter(|l| l.contains("objects moved in"))
                .count()
        };
        wait_for(30, "every joining member's copy merged complete", || {
            (complete() >= 2 * joining * 3).then_some(())
        });
        common::read_back(&dir, &root, None, "r", 40);
        common::read_back(&dir, &root, Some("ecrs"), "e", 40);
    }
    common::read_back(&dir, &root, None, "r", 40);
    common::read_back(&dir, &root, Some("ecrs"), "e", 40);
    // And the merged PGs take writes.
    common::put_objects(&dir, &root, None, "r2", 10);
    common::put_objects(&dir, &root, Some("ecrs"), "e2", 10);
    common::read_back(&dir, &root, None, "r2", 10);
    common::read_back(&dir, &root, Some("ecrs"), "e2", 10);
}

/// `pool rm` gives the pool's space back: each OSD stops the deleted
/// pool's PGs and removes their copies in the background (`osd df` shows
/// the space freed), and the other pool's objects still read.
#[test]
fn a_deleted_pools_copies_are_removed_and_its_space_comes_back() {
    let (root, dir, _guard) = common::start("poolrm", 3, 8);
    let file = root.join("big.in");
    std::fs::write(&file, vec![7u8; 1 << 20]).unwrap();
    let used_mib = || -> u64 {
        let v: serde_json::Value =
            serde_json::from_str(&ok(&dir, &["osd", "df", "--json"])).unwrap();
        v["summary"]["total_kb_used"].as_u64().unwrap() / 1024
    };
    // (Every OSD's report counted, and no later one changing it: the
    // first reading past a floor could leave a report out.)
    let steady_used = |what: &str, floor: u64| {
        let mut last = u64::MAX;
        wait_for(60, what, || {
            let u = used_mib();
            let steady = u >= floor && u == last;
            last = u;
            // (An OSD reports every 2 s: two readings apart by more.)
            if !steady {
                std::thread::sleep(std::time::Duration::from_millis(2500));
            }
            steady.then_some(u)
        })
    };
    pool_compression_reaches_the_stores(&dir, &file, &steady_used);
    ok(&dir, &["pool", "create", "big", "--pg-num", "8"]);
    for i in 0..24 {
        ok(
            &dir,
            &["put", &format!("b{i}"), file.to_str().unwrap(), "-p", "big"],
        );
    }
    common::put_objects(&dir, &root, None, "r", 10);
    // (The big pool is not compressed: its 72 MiB are all there.)
    let before = steady_used("the big pool's 72 MiB used, steady", 70);
    ok(&dir, &["pool", "rm", "big", "big"]);
    let after = wait_for(60, "the big pool's space back", || {
        let u = used_mib();
        (u + 60 <= before).then_some(u)
    });
    eprintln!("used: {before} MiB, then {after} MiB after the pool was deleted");
    let removed = || -> usize {
        (0..3)
            .map(|i| std::fs::read_to_string(dir.join(format!("osd.{i}.log"))).unwrap_or_default())
            .map(|l| l.matches("its pool is gone; copy removed").count())
            .sum()
    };
    // (The packed pool's 8 PGs, and the big pool's.)
    wait_for(30, "every copy of the 16 PGs removed", || {
        (removed() == 16 * 3).then_some(())
    });
    common::read_back(&dir, &root, None, "r", 10);
}

/// `pool set NAME compression_mode aggressive` (Ceph's verb and values)
/// reaches every OSD's store: 24 MiB of compressible objects in such a
/// pool take a small part of their size, and read back whole. Ceph's
/// algorithms the stores lack, and unknown modes, are refused.
fn pool_compression_reaches_the_stores(
    dir: &std::path::Path,
    file: &std::path::Path,
    steady_used: &dyn Fn(&str, u64) -> u64,
) {
    ok(dir, &["pool", "create", "packed", "--pg-num", "8"]);
    let e = loligo(
        dir,
        &["pool", "set", "packed", "compression_algorithm", "snappy"],
    );
    assert!(!e.status.success());
    assert!(
        String::from_utf8_lossy(&e.stderr).contains("lz4 only"),
        "{e:?}"
    );
    let e = loligo(
        dir,
        &["pool", "set", "packed", "compression_mode", "always"],
    );
    assert!(
        String::from_utf8_lossy(&e.stderr).contains("aggressive"),
        "{e:?}"
    );
    ok(
        dir,
        &["pool", "set", "packed", "compression_mode", "aggressive"],
    );
    let p: serde_json::Value = serde_json::from_str(&ok(dir, &["pool", "get", "packed"])).unwrap();
    assert_eq!(p["compression_mode"], "aggressive", "{p}");
    assert_eq!(p["compression_algorithm"], "lz4", "{p}");
    let told = || {
        (0..3)
            .map(|i| std::fs::read_to_string(dir.join(format!("osd.{i}.log"))).unwrap_or_default())
            .filter(|l| l.contains("compression settings given to"))
            .count()
    };
    wait_for(30, "every OSD's store given the setting", || {
        (told() == 3).then_some(())
    });
    let empty = steady_used("the cluster's use before the packed pool's writes", 0);
    for i in 0..24 {
        ok(
            dir,
            &[
                "put",
                &format!("p{i}"),
                file.to_str().unwrap(),
                "-p",
                "packed",
            ],
        );
    }
    let full = steady_used("the packed pool's use", 0);
    eprintln!("24 MiB x 3 copies compressed: {empty} MiB used, then {full} MiB");
    assert!(
        full < empty + 12,
        "{empty} MiB, then {full} MiB: not compressed"
    );
    let back = dir.join("p7.out");
    ok(dir, &["-p", "packed", "get", "p7", back.to_str().unwrap()]);
    assert!(std::fs::read(&back).unwrap() == std::fs::read(file).unwrap());
    passive_compression_follows_hints(dir, file, steady_used);
    ok(dir, &["pool", "rm", "packed", "packed"]);
}

/// In `passive` mode only objects a client hinted compressible (`loligo
/// set-alloc-hint NAME SIZE WRITE_SIZE --flags compressible`, as `rados
/// set-alloc-hint`) are compressed; the hint outlives a full rewrite.
fn passive_compression_follows_hints(
    dir: &std::path::Path,
    file: &std::path::Path,
    steady_used: &dyn Fn(&str, u64) -> u64,
) {
    let told = |i: usize| {
        let log = std::fs::read_to_string(dir.join(format!("osd.{i}.log"))).unwrap_or_default();
        log.matches("compression settings given to").count()
    };
    let before: Vec<usize> = (0..3).map(told).collect();
    ok(
        dir,
        &["pool", "set", "packed", "compression_mode", "passive"],
    );
    wait_for(30, "every OSD's store given the passive setting", || {
        (0..3).all(|i| told(i) > before[i]).then_some(())
    });
    let e = loligo(
        dir,
        &[
            "set-alloc-hint",
            "x",
            "1",
            "1",
            "--flags",
            "squishy",
            "-p",
            "packed",
        ],
    );
    assert!(
        String::from_utf8_lossy(&e.stderr).contains("unknown allocation hint flag"),
        "{e:?}"
    );
    let put = |name: &str| ok(dir, &["put", name, file.to_str().unwrap(), "-p", "packed"]);
    let used0 = steady_used("the use before hinted writes", 0);
    for i in 0..8 {
        let name = format!("h{i}");
        let hint = ["set-alloc-hint", &name, "1048576", "1048576"];
        ok(
            dir,
            &[&hint[..], &["--flags", "compressible", "-p", "packed"]].concat(),
        );
        put(&name);
        put(&name);
    }
    let used1 = steady_used("the use after hinted writes", 0);
    for i in 0..8 {
        put(&format!("u{i}"));
    }
    let used2 = steady_used("the use after writes without a hint", used1 + 20);
    eprintln!("8 MiB x 3 hinted compressible, then not: {used0}, {used1}, {used2} MiB used");
    assert!(
        used1 < used0 + 6,
        "{used0} then {used1} MiB: hinted objects not compressed"
    );
}

/// An erasure-coded pool with one parity shard on exactly k+m OSDs: a
/// pgp_num step moves some PGs' shards among their own OSDs, which an OSD
/// holding one collection per PG cannot do without a spare OSD. Those PGs
/// keep their places, fully redundant (active+clean+remapped), so pgp_num
/// still reaches pg_num; a merge, which would have to move them, is
/// refused with the reason instead of waiting for good.
#[test]
fn erasure_pgs_that_cannot_rotate_without_a_spare_stay_clean_in_place() {
    let (root, dir, _guard) = common::start("ekm", 3, 8);
    common::ec_profiles(&dir);
    common::create_ecrs_pool(&dir, None);
    common::put_objects(&dir, &root, Some("ecrs"), "e", 40);
    wait_for(60, "clean at the start", || {
        common::not_clean(&dir).is_none().then_some(())
    });
    let pool = || -> serde_json::Value {
        serde_json::from_str(&ok(&dir, &["pool", "get", "ecrs"])).unwrap()
    };
    ok(&dir, &["pool", "set", "ecrs", "pg_num", "16"]);
    let clean = |s: &serde_json::Value| -> u64 {
        let states = s["pgs"]["by_state"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        (states.iter())
            .filter(|(k, _)| k.split('+').any(|f| f == "clean"))
            .map(|(_, n)| n.as_u64().unwrap_or(0))
            .sum()
    };
    let s = wait_for(240, "pgp_num 16 with every PG clean", || {
        let s = status(&dir);
        (pool()["pgp_num"] == 16 && Some(clean(&s)) == s["pgs"]["total"].as_u64()).then_some(s)
    });
    assert_eq!(s["pgs"]["total"], 24);
    // `health` as Ceph's: the status first; --json in the report's shape.
    assert!(ok(&dir, &["health"]).starts_with("HEALTH_"));
    let h: serde_json::Value =
        serde_json::from_str(&ok(&dir, &["health", "detail", "--json"])).unwrap();
    assert!(h["status"].as_str().unwrap().starts_with("HEALTH_"), "{h}");
    assert!(h["checks"].is_object(), "{h}");
    common::read_back(&dir, &root, Some("ecrs"), "e", 40);
    let e = loligo(&dir, &["pool", "set", "ecrs", "pg_num", "8"]);
    let err = String::from_utf8_lossy(&e.stderr);
    assert!(
        err.contains("one parity shard") && err.contains("add an OSD"),
        "{err}"
    );
    assert_eq!(pool()["pg_num"], 16);
}

/// The status line and body of `GET url` (plain HTTP; `url` as
/// `http://HOST:PORT/PATH`); `None` if nothing answers.
fn try_http_get(url: &str) -> Option<(String, String)> {
    use std::io::Read;
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut s = std::net::TcpStream::connect(host).ok()?;
    write!(s, "GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    Some((
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    ))
}

/// [`try_http_get`] of a server that must answer.
fn http_get(url: &str) -> (String, String) {
    try_http_get(url).unwrap_or_else(|| panic!("nothing answers {url}"))
}

/// The value of sample `series` (exactly as sent, labels included).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// The sum of a per-OSD family's samples.
fn per_osd_sum(text: &str, family: &str) -> f64 {
    let prefix = format!("{family}{{ceph_daemon=\"osd.");
    (text.lines())
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The leader's metrics URL, from `mgr services`.
fn prometheus_url(dir: &std::path::Path) -> String {
    let v: serde_json::Value = serde_json::from_str(&ok(dir, &["mgr", "services"])).unwrap();
    v["prometheus"]
        .as_str()
        .expect("a prometheus URL")
        .to_string()
}

/// Ceph's metrics, served by the leading monitor over HTTP: `mgr
/// services` names them; followers serve an empty page (each series
/// once to a Prometheus that scrapes every monitor); they pass
/// `promtool check metrics` where promtool is installed; client writes
/// move the OSDs' op counters and latency sums; an OSD stopped reads
/// `ceph_osd_up` 0 and raises OSD_DOWN (in `health detail` too, naming
/// it), cleared when it is back; when the leader stops, the next one
/// serves and counts the stopped monitor out of quorum.
#[test]
fn the_leader_serves_cephs_metrics_and_they_follow_the_cluster() {
    let (_root, dir, _guard) = common::start_with("metrics", 3, 8, &["--mons", "3"]);
    let d = dir.to_string_lossy().into_owned();
    let url = prometheus_url(&dir);
    let (line, text) = http_get(&url);
    assert!(line.contains("200"), "{line}");
    assert!(text.contains("# TYPE ceph_health_status untyped"), "{text}");
    assert_eq!(
        sample(&text, "ceph_osd_up{ceph_daemon=\"osd.2\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "ceph_pg_total{pool_id=\"1\"}"),
        Some(8.0),
        "{text}"
    );
    // Followers: an empty page.
    let state = std::fs::read_to_string(dir.join("cluster.toml")).unwrap();
    let http: Vec<String> = (state.lines())
        .find(|l| l.starts_with("http_addrs"))
        .expect("the monitors' HTTP addresses")
        .split('"')
        .skip(1)
        .step_by(2)
        .map(|a| format!("http://{a}/metrics"))
        .collect();
    assert_eq!(http.len(), 3, "{state}");
    assert!(http.contains(&url), "{url} not among {http:?}");
    for other in http.iter().filter(|u| **u != url) {
        let (line, body) = http_get(other);
        assert!(
            line.contains("200") && body.is_empty(),
            "{other}: {line} {body}"
        );
    }
    // Writes move the counters (the OSDs report every few seconds).
    let before = per_osd_sum(&text, "ceph_osd_op_w");
    let b: serde_json::Value = serde_json::from_str(&ok(
        &dir,
        &["bench", "2", "write", "-b", "4096", "-t", "4", "--json"],
    ))
    .unwrap();
    let ops = b["ops"].as_f64().unwrap();
    assert!(ops > 0.0, "{b}");
    let text = wait_for(30, "the writes counted", || {
        let (_, t) = http_get(&url);
        (per_osd_sum(&t, "ceph_osd_op_w") >= before + ops).then_some(t)
    });
    assert!(
        per_osd_sum(&text, "ceph_osd_op_w_latency_sum") > 0.0,
        "{text}"
    );
    assert!(
        per_osd_sum(&text, "ceph_osd_op_w_in_bytes") >= ops * 4096.0,
        "{text}"
    );
    assert!(per_osd_sum(&text, "ceph_osd_stat_bytes") > 0.0, "{text}");
    // Each OSD names the class of its disk as the kernel reports it
    // (none where it does not say).
    let class =
        loligo_store::DeviceClass::of(&dir.join("osd.0").join("block")).map_or("", |c| c.name());
    let meta: Vec<&str> = (text.lines())
        .filter(|l| l.starts_with("ceph_osd_metadata{"))
        .collect();
    assert_eq!(meta.len(), 3, "{text}");
    for l in meta {
        assert!(l.contains(&format!("device_class=\"{class}\"")), "{l}");
    }
    // Each op is counted once, by its primary, into its pool too.
    let pool_wr = sample(&text, "ceph_pool_wr{pool_id=\"1\"}").unwrap_or(0.0);
    // (One pool: the pool's writes are every OSD's, none twice.)
    assert!(
        pool_wr >= ops && pool_wr == per_osd_sum(&text, "ceph_osd_op_w"),
        "ceph_pool_wr {pool_wr}, {ops} writes: {text}"
    );
    let osd_page = each_osd_serves_its_own_metrics(&url, &http, &text);
    cephs_grafana_dashboards_find_their_series(&(text.clone() + &osd_page));
    pool_stats_show_client_io(&dir);
    a_write_run_cut_short_leaves_what_it_wrote(&dir);
    if let Ok(out) = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(text.as_bytes())?;
            c.wait_with_output()
        })
    {
        let problems = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(promtool_ok(&problems), "promtool check metrics: {problems}");
    } else {
        assert!(!prometheus_required(), "promtool is required here");
        eprintln!(
            "promtool not installed: the exposition's syntax is checked by the unit tests only"
        );
    }
    // `-w` follows the cluster log from here on.
    let mut watcher = std::process::Command::new(env!("CARGO_BIN_EXE_loligo"))
        .arg("-w")
        .env("LOLIGO_CONF", dir.join("loligo.conf"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("loligo -w");
    std::thread::sleep(std::time::Duration::from_secs(2));
    // An OSD stopped: down, OSD_DOWN raised and named.
    ok(&dir, &["stop", "osd.2", "--data-dir", &d]);
    wait_for(30, "osd.2 down in the metrics", || {
        let (_, t) = http_get(&url);
        (sample(&t, "ceph_osd_up{ceph_daemon=\"osd.2\"}") == Some(0.0)
            && sample(
                &t,
                "ceph_health_detail{name=\"OSD_DOWN\",severity=\"HEALTH_WARN\"}",
            ) == Some(1.0))
        .then_some(())
    });
    let detail = ok(&dir, &["health", "detail"]);
    assert!(detail.contains("[WRN] OSD_DOWN: 1 osds down"), "{detail}");
    assert!(detail.contains("    osd.2 ("), "{detail}");
    ok(&dir, &["start", "osd.2", "--data-dir", &d]);
    wait_for(60, "OSD_DOWN cleared", || {
        let (_, t) = http_get(&url);
        (sample(
            &t,
            "ceph_health_detail{name=\"OSD_DOWN\",severity=\"HEALTH_WARN\"}",
        ) == Some(0.0))
        .then_some(())
    });
    // The cluster log says it all once, in Ceph's words, and `-w` saw
    // it as it happened.
    let said = |what: &str| {
        let v: serde_json::Value =
            serde_json::from_str(&ok(&dir, &["log", "last", "200", "--json"])).unwrap();
        (v.as_array().unwrap().iter())
            .filter(|e| e["message"].as_str().unwrap().contains(what))
            .count()
    };
    let events = [
        "osd.2 marked down",
        "Health check failed: 1 osds down (OSD_DOWN)",
        "Health check cleared: OSD_DOWN (was: 1 osds down)",
    ];
    wait_for(10, "the log to say OSD_DOWN cleared", || {
        (said(events[2]) >= 1).then_some(())
    });
    // (Each at least once: a loaded machine may see osd.2 marked down
    // and boot again before this, and the log says so.)
    for e in events {
        assert!(said(e) >= 1, "{e}: {}", ok(&dir, &["log", "last", "200"]));
    }
    // If osd.2 went down once more, the count below is taken once that
    // OSD_DOWN has cleared too (else the next leader's clearing of it
    // would look like a repeat).
    wait_for(60, "every OSD_DOWN said cleared", || {
        (said(events[2]) == said(events[1])).then_some(())
    });
    let said_before: Vec<usize> = events.iter().map(|e| said(e)).collect();
    let entries = || -> Vec<(u64, String)> {
        let v: serde_json::Value =
            serde_json::from_str(&ok(&dir, &["log", "last", "200", "--json"])).unwrap();
        (v.as_array().unwrap().iter())
            .map(|e| {
                let m = e["message"].as_str().unwrap().to_string();
                (e["seq"].as_u64().unwrap(), m)
            })
            .collect()
    };
    let before = entries();
    assert!(said("osd.2 127.0.0.1:") >= 1, "its boot");
    let text = ok(&dir, &["log", "last", "200"]);
    assert!(
        text.lines()
            .any(|l| l.contains(" : cluster [WRN] Health check failed: 1 osds down")),
        "{text}"
    );
    watcher.kill().unwrap();
    let out = watcher.wait_with_output().unwrap();
    let watched = String::from_utf8_lossy(&out.stdout);
    assert!(watched.contains("health:"), "the status first: {watched}");
    assert!(
        watched.contains("[INF] osd.2 marked down") && watched.contains("OSD_DOWN"),
        "{watched}"
    );
    // The leader stopped: the next serves, and counts it out.
    let leader = status(&dir)["monitors"]["leader"].as_u64().unwrap();
    ok(&dir, &["stop", &format!("mon.{leader}"), "--data-dir", &d]);
    let next = wait_for(30, "a new leader's metrics", || {
        let o = loligo(&dir, &["mgr", "services"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
        let u = v["prometheus"].as_str()?.to_string();
        (u != url).then_some(u)
    });
    wait_for(30, "the stopped monitor out of quorum", || {
        let (_, t) = http_get(&next);
        let series = format!("ceph_mon_quorum_status{{ceph_daemon=\"mon.{leader}\"}}");
        (sample(&t, &series) == Some(0.0)
            && sample(
                &t,
                "ceph_health_detail{name=\"MON_DOWN\",severity=\"HEALTH_WARN\"}",
            ) == Some(1.0))
        .then_some(())
    });
    let (_, old) = http_get(&next);
    assert!(
        old.contains("ceph_mon_metadata{ceph_daemon=\"mon.0\""),
        "{old}"
    );
    // The next leader carries the log on: what was said stays, once, and
    // the monitor's absence is said.
    wait_for(30, "MON_DOWN in the log", || {
        (said("(MON_DOWN)") >= 1).then_some(())
    });
    let after = entries();
    for b in &before {
        assert!(
            after.contains(b),
            "{b:?} kept by the next leader: {after:?}"
        );
    }
    // Nothing said again by the next leader (unless osd.2 really went
    // down again meanwhile, on a loaded machine).
    let said_after: Vec<usize> = events.iter().map(|e| said(e)).collect();
    if said_after[0] == said_before[0] {
        assert_eq!(said_after, said_before, "nothing said again: {after:?}");
    }
    // A majority lost: the monitor left answers 503, so that the scrape
    // fails (and alerts do not resolve on a cluster gone dark).
    let second = status(&dir)["monitors"]["leader"].as_u64().unwrap();
    ok(&dir, &["stop", &format!("mon.{second}"), "--data-dir", &d]);
    let last = (0..3u64).find(|m| *m != leader && *m != second).unwrap();
    wait_for(30, "503 from the monitor left alone", || {
        let (line, _) = try_http_get(&http[last as usize])?;
        line.contains("503").then_some(())
    });
}

/// The series Ceph's Grafana dashboards for RADOS (Debian's
/// ceph-grafana-dashboards: cluster, hosts, OSDs, pools) query that
/// Loligo does not send: BlueStore's internals, and the host panels'
/// CephFS and RGW daemons.
const GRAFANA_NOT_SENT: [&str; 5] = [
    "ceph_bluefs_wal_total_bytes",
    "ceph_bluestore_onode_hits",
    "ceph_bluestore_onode_misses",
    "ceph_mds_inodes",
    "ceph_rgw_metadata",
];

/// Where Debian's ceph-grafana-dashboards puts Ceph's dashboards.
const GRAFANA_DIR: &str = "/etc/grafana/dashboards/ceph-dashboard";

/// Every `ceph_` series name in `text` (a dashboard's JSON), but labels
/// and template variables (`ceph_hosts`, used as `$ceph_hosts`).
fn ceph_series_in(text: &str) -> std::collections::BTreeSet<String> {
    const LABELS: [&str; 3] = ["ceph_daemon", "ceph_version", "ceph_hosts"];
    let b = text.as_bytes();
    let mut out = std::collections::BTreeSet::new();
    let mut at = 0;
    while let Some(i) = text[at..].find("ceph_").map(|i| at + i) {
        let before = i.checked_sub(1).map(|j| b[j]);
        let end = (i..b.len())
            .find(|&j| !(b[j].is_ascii_lowercase() || b[j].is_ascii_digit() || b[j] == b'_'))
            .unwrap_or(b.len());
        let name = &text[i..end];
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'$')
            && !LABELS.contains(&name)
        {
            out.insert(name.to_string());
        }
        at = end.max(i + 1);
    }
    out
}

/// Ceph's own Grafana dashboards for the cluster, its hosts, OSDs and
/// pools find every series they query in what a live cluster serves (the
/// leader's page and an OSD's own), but those [`GRAFANA_NOT_SENT`] names;
/// the dashboards of services Loligo lacks (CephFS, RGW, RBD) are not
/// read.
fn cephs_grafana_dashboards_find_their_series(served: &str) {
    const RADOS: [&str; 7] = [
        "ceph-cluster.json",
        "host-details.json",
        "hosts-overview.json",
        "osd-device-details.json",
        "osds-overview.json",
        "pool-detail.json",
        "pool-overview.json",
    ];
    let dir = std::path::Path::new(GRAFANA_DIR);
    if !dir.exists() {
        assert!(!prometheus_required(), "{GRAFANA_DIR} is required here");
        eprintln!("{GRAFANA_DIR} missing (apt-get install ceph-grafana-dashboards): skipped");
        return;
    }
    let families: std::collections::BTreeSet<&str> = (served.lines())
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let mut unsent_seen = std::collections::BTreeSet::new();
    for file in RADOS {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        for series in ceph_series_in(&text) {
            if GRAFANA_NOT_SENT.contains(&series.as_str()) {
                unsent_seen.insert(series);
                continue;
            }
            assert!(
                families.contains(series.as_str()),
                "{file} queries {series}, not sent"
            );
        }
    }
    let listed: std::collections::BTreeSet<String> =
        GRAFANA_NOT_SENT.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        unsent_seen, listed,
        "the not-sent list names only what they query"
    );
}

/// The leader's service discovery names the three OSDs' own endpoints
/// (the followers' none); each serves its own counters under Ceph's
/// names, no fewer writes than the leader's page counted for it. One
/// OSD's page.
fn each_osd_serves_its_own_metrics(url: &str, monitors: &[String], leader_text: &str) -> String {
    let sd = |metrics_url: &str| -> Vec<String> {
        let base = metrics_url.trim_end_matches("metrics");
        let (line, body) = http_get(&format!(
            "{base}sd/prometheus/sd-config?service=ceph-exporter"
        ));
        assert!(line.contains("200"), "{line} {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        (v[0]["targets"].as_array().unwrap().iter())
            .map(|t| t.as_str().unwrap().to_string())
            .collect()
    };
    let targets = sd(url);
    assert_eq!(targets.len(), 3, "{targets:?}");
    let mut page = String::new();
    for other in monitors.iter().filter(|u| *u != url) {
        assert!(sd(other).is_empty(), "a follower names no targets");
    }
    for (osd, target) in targets.iter().enumerate() {
        let series = format!("ceph_osd_op_w{{ceph_daemon=\"osd.{osd}\"}}");
        let leader = sample(leader_text, &series).unwrap_or(0.0);
        let (line, own) = http_get(&format!("http://{target}/metrics"));
        assert!(line.contains("200"), "{target}: {line}");
        let mine = sample(&own, &series).unwrap_or_else(|| panic!("{series} in {own}"));
        assert!(mine >= leader, "osd.{osd}: {mine} < the leader's {leader}");
        assert!(
            own.contains("# TYPE loligo_osd_rebuild_fetched_bytes counter"),
            "{own}"
        );
        assert_eq!(
            own.matches("# TYPE ").count(),
            27,
            "one OSD's families: {own}"
        );
        // Its data connections carried the writes (and its replies).
        let sent = format!("loligo_osd_msgr_send_bytes{{ceph_daemon=\"osd.{osd}\"}}");
        assert!(sample(&own, &sent).unwrap_or(0.0) > 0.0, "{own}");
        page = own;
    }
    page
}

/// `osd pool stats` shows a pool's client reads while they go on, and
/// says "nothing is going on" of a pool without any.
fn pool_stats_show_client_io(dir: &std::path::Path) {
    ok(dir, &["pool", "create", "quiet", "8"]);
    // Reads: the OSDs are small.
    let write = ["bench", "10", "write", "-b", "4096", "--max-objects", "100"];
    ok(dir, &[&write[..], &["--no-cleanup"]].concat());
    let mut bench = std::process::Command::new(env!("CARGO_BIN_EXE_loligo"))
        .args(["bench", "40", "rand", "-t", "2"])
        .env("LOLIGO_CONF", dir.join("loligo.conf"))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let v = wait_for(35, "pool stats never showed the reads", || {
        let v: serde_json::Value =
            serde_json::from_str(&ok(dir, &["osd", "pool", "stats", "--json"])).unwrap();
        (v[0]["client_io_rate"]["read_op_per_sec"].as_u64() > Some(0)).then_some(v)
    });
    assert_eq!(v[0]["pool_name"], "default", "{v}");
    assert_eq!(v[1]["pool_name"], "quiet", "{v}");
    assert_eq!(v[1]["client_io_rate"], serde_json::json!({}), "{v}");
    let text = ok(dir, &["pool", "stats", "quiet"]);
    assert!(
        text.contains("pool quiet id 2\n  nothing is going on"),
        "{text}"
    );
    let _ = bench.kill();
    let _ = bench.wait();
    ok(dir, &["pool", "rm", "quiet", "quiet"]);
}

/// A write run whose time ends before its --max-objects are written says
/// how many it wrote: a seq run reads exactly those, and a rand run finds
/// every object it picks.
fn a_write_run_cut_short_leaves_what_it_wrote(dir: &std::path::Path) {
    let json = |args: &[&str]| -> serde_json::Value {
        serde_json::from_str(&ok(dir, &[args, &["--json"]].concat())).unwrap()
    };
    let w = json(&[
        "bench",
        "1",
        "write",
        "-b",
        "4096",
        "--max-objects",
        "10000000",
        "--no-cleanup",
    ]);
    let written = w["ops"].as_u64().unwrap();
    assert!(written > 0 && written < 10_000_000, "{w}");
    let seq = json(&["bench", "60", "seq", "-t", "4"]);
    assert_eq!(seq["ops"].as_u64(), Some(written), "{seq}");
    let rand = json(&["bench", "1", "rand", "-t", "4"]);
    assert!(rand["ops"].as_u64() > Some(0), "{rand}");
}

/// An OSD that missed more writes than the PG logs keep is backfilled by
/// comparing Merkle trees; the primaries count it, and the leader's
/// metrics show it under Loligo's own names.
#[test]
fn merkle_backfills_show_in_the_metrics() {
    let (root, dir, _guard) =
        common::start_with("merkle-metrics", 3, 8, &["--pg-log-entries", "2"]);
    let d = dir.to_string_lossy().into_owned();
    common::put_objects(&dir, &root, None, "before", 16);
    wait_for(60, "clean before", || {
        common::not_clean(&dir).is_none().then_some(())
    });
    ok(&dir, &["osd", "set", "noout"]);
    ok(&dir, &["stop", "osd.2", "--data-dir", &d]);
    // Far more writes per PG than the logs keep.
    common::put_objects(&dir, &root, None, "while-down", 80);
    ok(&dir, &["start", "osd.2", "--data-dir", &d]);
    wait_for(120, "clean after", || {
        common::not_clean(&dir).is_none().then_some(())
    });
    let url = prometheus_url(&dir);
    let text = wait_for(30, "the backfills counted", || {
        let (_, t) = http_get(&url);
        (per_osd_sum(&t, "loligo_osd_backfills_by_merkle_tree") >= 1.0).then_some(t)
    });
    let backfills = per_osd_sum(&text, "loligo_osd_backfills");
    assert!(backfills >= per_osd_sum(&text, "loligo_osd_backfills_by_merkle_tree"));
    assert!(
        per_osd_sum(&text, "loligo_osd_backfill_merkle_nodes") > 0.0,
        "{text}"
    );
    assert!(
        per_osd_sum(&text, "loligo_osd_backfill_objects_copied") >= 1.0,
        "{text}"
    );
    common::read_back(&dir, &root, None, "while-down", 80);
}

/// Whether the environment says Prometheus' tools are installed, so
/// the tests that use them must not skip (`.ci/run` sets it).
fn prometheus_required() -> bool {
    std::env::var_os("LOLIGO_REQUIRE_PROMETHEUS").is_some()
}

/// Whether promtool's `check metrics` output holds only the naming notes
/// Ceph's own exposition draws too (it keeps Ceph's names so that its
/// dashboards and rules work: `ceph_osd_op_r` without `_total`,
/// `ceph_pg_total` a gauge, `ceph_osd_commit_latency_ms`,
/// `ceph_osd_op_r_latency_sum` outside a summary); a format error reads
/// otherwise ("error while linting").
fn promtool_ok(out: &str) -> bool {
    const NAMING: [&str; 4] = [
        "metrics should have \"_total\" suffix",
        "metrics should not have \"_total\" suffix",
        "metric names should not contain abbreviated units",
        "non-histogram and non-summary metrics should not have",
    ];
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .all(|l| NAMING.iter().any(|n| l.contains(n)))
}

/// Ceph's own alert rules (Debian's ceph-prometheus-alerts), in a
/// Prometheus server (Debian's) scraping a live cluster's leader: none
/// fires while the cluster is healthy; stopping an OSD fires
/// CephOSDDown, and OSDs past the full ratio fire CephOSDFull and
/// CephHealthError, as they would on Ceph. The rules' `for:` waits are
/// set to 0 so that the test need not wait minutes; their expressions
/// are Ceph's.
#[test]
fn cephs_alert_rules_fire_on_a_live_cluster() {
    const RULES: &str = "/etc/prometheus/ceph/ceph_default_alerts.yml";
    let have = |cmd: &str| {
        std::process::Command::new(cmd)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !have("prometheus") || !std::path::Path::new(RULES).exists() {
        assert!(
            !prometheus_required(),
            "prometheus and {RULES} are required here"
        );
        eprintln!("prometheus or {RULES} not installed (.ci/run installs them): not run");
        return;
    }
    let (root, dir, _guard) = common::start("alerts", 3, 8);
    let d = dir.to_string_lossy().into_owned();
    let target = prometheus_url(&dir)
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_string();
    let rules: String = (std::fs::read_to_string(RULES).unwrap().lines())
        .map(|l| match l.trim_start().starts_with("for:") {
            true => format!("{}for: 0s\n", &l[..l.len() - l.trim_start().len()]),
            false => format!("{l}\n"),
        })
        .collect();
    std::fs::write(root.join("rules.yml"), rules).unwrap();
    std::fs::write(
        root.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files: [\"rules.yml\"]\n\
             scrape_configs:\n  - job_name: ceph\n    honor_labels: true\n    \
             static_configs:\n      - targets: [\"{target}\"]\n"
        ),
    )
    .unwrap();
    let web = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _prom = Kill(
        std::process::Command::new("prometheus")
            .current_dir(&root)
            .args([
                "--config.file=prometheus.yml",
                "--storage.tsdb.path=tsdb",
                &format!("--web.listen-address={web}"),
            ])
            .stdout(std::fs::File::create(root.join("prometheus.log")).unwrap())
            .stderr(std::process::Stdio::from(
                std::fs::File::options()
                    .append(true)
                    .open(root.join("prometheus.log"))
                    .unwrap(),
            ))
            .spawn()
            .unwrap(),
    );
    // The alerts firing, by name.
    let firing = || -> Option<Vec<String>> {
        let (line, body) = try_http_get(&format!("http://{web}/api/v1/alerts"))?;
        if !line.contains("200") {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let mut names: Vec<String> = (v["data"]["alerts"].as_array()?.iter())
            .filter(|a| a["state"] == "firing")
            .filter_map(|a| Some(a["labels"]["alertname"].as_str()?.to_string()))
            .collect();
        names.sort();
        names.dedup();
        Some(names)
    };
    let scraped = || {
        let q = format!("http://{web}/api/v1/query?query=ceph_health_status");
        try_http_get(&q).is_some_and(|(l, b)| l.contains("200") && b.contains("\"value\""))
    };
    wait_for(60, "Prometheus scraping the leader", || {
        scraped().then_some(())
    });
    wait_for(60, "the cluster clean", || {
        common::not_clean(&dir).is_none().then_some(())
    });
    // A few evaluations of a healthy cluster: nothing fires.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let calm = firing().expect("the alerts API answers");
    assert!(calm.is_empty(), "alerts on a healthy cluster: {calm:?}");
    ok(&dir, &["stop", "osd.2", "--data-dir", &d]);
    // (Rule groups are evaluated each on its own, so the two may fire a
    // second apart.)
    let has = |f: &[String], n: &str| f.iter().any(|x| x == n);
    wait_for(60, "CephOSDDown and CephHealthWarning", || {
        firing().filter(|f| has(f, "CephOSDDown") && has(f, "CephHealthWarning"))
    });
    ok(&dir, &["start", "osd.2", "--data-dir", &d]);
    wait_for(60, "the cluster clean again", || {
        common::not_clean(&dir).is_none().then_some(())
    });
    for (verb, r) in [
        ("set-nearfull-ratio", "0.0001"),
        ("set-backfillfull-ratio", "0.0001"),
        ("set-full-ratio", "0.0001"),
    ] {
        ok(&dir, &["osd", verb, r]);
    }
    let full = wait_for(60, "CephOSDFull, CephPoolFull and CephHealthError", || {
        firing().filter(|f| {
            has(f, "CephOSDFull") && has(f, "CephPoolFull") && has(f, "CephHealthError")
        })
    });
    assert!(
        !full.iter().any(|n| n == "CephOSDDown"),
        "osd.2 is back: {full:?}"
    );
    for (verb, r) in [
        ("set-full-ratio", "0.95"),
        ("set-backfillfull-ratio", "0.90"),
        ("set-nearfull-ratio", "0.85"),
    ] {
        ok(&dir, &["osd", verb, r]);
    }
    wait_for(60, "every alert resolved", || {
        firing().filter(|f| f.is_empty()).map(|_| ())
    });
}

/// A write stuck on a frozen replica (SIGSTOP, under `nodown` so it is
/// not marked down): its primary counts the op slow past the 1-second
/// complaint time, SLOW_OPS names the primary, `tell osd.N
/// dump_ops_in_flight` lists the op, the slow-ops series counts it; once
/// the replica runs again the write completes and SLOW_OPS clears.
#[test]
fn a_write_stuck_on_a_frozen_replica_raises_slow_ops() {
    let (root, dir, _guard) = common::start_with("slowops", 3, 8, &["--op-complaint-time", "1"]);
    let url = prometheus_url(&dir);
    ok(&dir, &["osd", "set", "nodown"]);
    // An object whose primary is not osd.2: osd.2 holds a copy of every
    // PG (3 OSDs, size 3).
    let (name, primary) = (0..100)
        .find_map(|i| {
            let name = format!("stuck-{i}");
            let v: serde_json::Value =
                serde_json::from_str(&ok(&dir, &["osd", "map", "default", &name, "--json"]))
                    .unwrap();
            let p = v["acting_primary"].as_i64().unwrap();
            (p != 2).then_some((name, p))
        })
        .expect("an object with another primary");
    let pid = std::fs::read_to_string(dir.join("osd.2.pid")).unwrap();
    let signal = |sig: &str| {
        let s = std::process::Command::new("kill")
            .args([sig, pid.trim()])
            .status()
            .unwrap();
        assert!(s.success(), "kill {sig}");
    };
    signal("-STOP");
    let file = root.join("in.bin");
    std::fs::write(&file, vec![7u8; 4096]).unwrap();
    let put = std::process::Command::new(env!("CARGO_BIN_EXE_loligo"))
        .args(["put", &name, file.to_str().unwrap()])
        .env("LOLIGO_CONF", dir.join("loligo.conf"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let detail = wait_for(20, "SLOW_OPS raised", || {
        let d = ok(&dir, &["health", "detail"]);
        d.contains("[WRN] SLOW_OPS: 1 slow ops").then_some(d)
    });
    assert!(
        detail.contains(&format!(", osd.{primary} has slow ops")),
        "{detail}"
    );
    let dump: serde_json::Value = serde_json::from_str(&ok(
        &dir,
        &["tell", &format!("osd.{primary}"), "dump_ops_in_flight"],
    ))
    .unwrap();
    assert_eq!(dump["num_ops"], 1, "{dump}");
    let op = &dump["ops"][0];
    assert!(
        op["description"]
            .as_str()
            .unwrap()
            .contains(&format!(":{name} [writefull")),
        "{dump}"
    );
    assert!(op["age"].as_f64().unwrap() > 1.0, "{dump}");
    wait_for(10, "the slow-ops series", || {
        let (_, t) = http_get(&url);
        (sample(&t, "ceph_healthcheck_slow_ops") == Some(1.0)).then_some(())
    });
    signal("-CONT");
    let out = put.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the write completes: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for(20, "SLOW_OPS cleared", || {
        (!ok(&dir, &["health", "detail"]).contains("SLOW_OPS")).then_some(())
    });
    let dump: serde_json::Value = serde_json::from_str(&ok(
        &dir,
        &["tell", &format!("osd.{primary}"), "dump_ops_in_flight"],
    ))
    .unwrap();
    assert_eq!(dump["num_ops"], 0, "{dump}");
    ok(&dir, &["osd", "unset", "nodown"]);
}

/// A cluster on the FileStore-like baseline (`--osd-objectstore
/// filestore`) serves writes, 4 KiB overwrites and reads; an OSD killed
/// during writes replays its journal when started again and the cluster
/// comes back clean with every object readable.
#[test]
fn a_filestore_cluster_serves_and_a_killed_osd_replays_its_journal() {
    let (root, dir, _guard) =
        common::start_with("filestore", 3, 8, &["--osd-objectstore", "filestore"]);
    let d = dir.to_string_lossy().into_owned();
    for i in 0..3 {
        let t = std::fs::read_to_string(dir.join(format!("osd.{i}")).join("type")).unwrap();
        assert_eq!(t.trim(), "filestore");
    }
    wait_for(60, "a clean cluster", || {
        common::not_clean(&dir).is_none().then_some(())
    });
    common::put_objects(&dir, &root, None, "fs", 10);
    let write = ["bench", "3", "write", "-b", "65536", "--max-objects", "40"];
    ok(&dir, &[&write[..], &["--no-cleanup"]].concat());
    let bench = std::process::Command::new(env!("CARGO_BIN_EXE_loligo"))
        .args(["bench", "6", "randwrite", "-t", "4", "--json"])
        .env("LOLIGO_CONF", dir.join("loligo.conf"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    ok(&dir, &["stop", "osd.1", "--kill", "--data-dir", &d]);
    ok(&dir, &["start", "osd.1", "--data-dir", &d]);
    let out = bench.wait_with_output().unwrap();
    assert!(out.status.success(), "randwrite bench failed");
    let b: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(b["ops"].as_u64() > Some(0), "{b}");
    assert_eq!(b["mode"], "randwrite", "{b}");
    assert_eq!(b["block_size"], 4096, "{b}");
    wait_for(90, "clean again after the kill", || {
        common::not_clean(&dir).is_none().then_some(())
    });
    common::read_back(&dir, &root, None, "fs", 10);
    // Each benchmark object is still whole: 64 KiB.
    for i in [0, 17, 39] {
        let name = format!("benchmark_data_{i}");
        let st = ok(&dir, &["stat", &name]);
        assert!(st.contains("65536"), "{name}: {st}");
    }
}
