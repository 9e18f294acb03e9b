//! The `loligo` binary end to end: crushtool- and osdmaptool-identical
//! output on Ceph's vectors (testdata/ceph), and one-line errors with exit code 2.

use std::path::PathBuf;
use std::process::{Command, Output};

fn vectors() -> PathBuf {
    let dir = std::env::var("LOLIGO_VECTORS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/ceph"));
    assert!(dir.is_dir(), "test vectors not found at {}", dir.display());
    dir
}

fn loligo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loligo"))
        .args(args)
        .output()
        .expect("run loligo")
}

fn ok_stdout(args: &[&str]) -> String {
    let o = loligo(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn crush_test_prints_crushtool_lines() {
    for case in [
        "s06_ec_chooseleaf_indep",
        "s08_multi_take_emit",
        "s19_choose_args_compat",
    ] {
        let dir = vectors().join("crush").join(case);
        let map = dir.join("map.txt");
        let mut got = String::new();
        for line in std::fs::read_to_string(dir.join("args")).unwrap().lines() {
            let mut args = vec!["crush", "test", "-i", map.to_str().unwrap()];
            args.extend(line.split_whitespace());
            got.push_str(&ok_stdout(&args));
        }
        assert_eq!(
            got,
            std::fs::read_to_string(dir.join("mappings.txt")).unwrap(),
            "{case}"
        );
    }
}

#[test]
fn compile_decompile_round_trip() {
    let dir = vectors().join("crush/s15_device_classes");
    let tmp = std::env::temp_dir().join(format!("loligo-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let json = tmp.join("map.json");
    let map = dir.join("map.txt");
    ok_stdout(&[
        "crush",
        "compile",
        "-i",
        map.to_str().unwrap(),
        "-o",
        json.to_str().unwrap(),
    ]);
    let back = ok_stdout(&["crush", "decompile", "-i", json.to_str().unwrap()]);
    assert_eq!(back, std::fs::read_to_string(&map).unwrap());
    let tree = ok_stdout(&["crush", "tree", "-i", json.to_str().unwrap()]);
    assert!(tree.lines().next().unwrap().contains("TYPE NAME"));
    assert!(
        tree.contains("root default") && tree.contains("osd.29"),
        "{tree}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn osdmap_commands_match_osdmaptool() {
    let dir = vectors().join("placement/p04_pg128_pool1_out");
    let crush = dir.join("crush.txt");
    let common = [
        "--crush",
        crush.to_str().unwrap(),
        "--pool-id",
        "1",
        "--pg-num",
        "128",
        "--size",
        "2",
        "--max-osd",
        "16",
        "--mark-out",
        "9",
    ];
    let mut args = vec!["osdmap", "test-map-pgs-dump-all"];
    args.extend(common);
    assert_eq!(
        ok_stdout(&args),
        std::fs::read_to_string(dir.join("pgs.txt")).unwrap()
    );
    let objects = std::fs::read_to_string(dir.join("objects.txt")).unwrap();
    for line in objects.lines().take(20) {
        let name = line.split('\'').nth(1).unwrap();
        let mut args = vec!["osdmap", "test-map-object", name];
        args.extend(common);
        assert_eq!(ok_stdout(&args), format!("{line}\n"));
    }
    let dir = vectors().join("placement/p06_pg768_pgp384_pool1");
    let crush = dir.join("crush.txt");
    let out = ok_stdout(&[
        "osdmap",
        "test-map-pgs-dump-all",
        "--crush",
        crush.to_str().unwrap(),
        "--pool-id",
        "1",
        "--pg-num",
        "768",
        "--pgp-num",
        "384",
        "--size",
        "3",
    ]);
    assert_eq!(out, std::fs::read_to_string(dir.join("pgs.txt")).unwrap());
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let map = vectors().join("crush/s01_tiny_3osd_straw2/map.txt");
    let m = map.to_str().unwrap();
    let garbage = std::env::temp_dir().join(format!("loligo-garbage-{}.txt", std::process::id()));
    std::fs::write(&garbage, "host h {\n\tid -1\n\titem osd.0\n").unwrap();
    let g = garbage.to_str().unwrap();
    let cases: Vec<String> = vec![
        format!("crush test -i {m} --rule 9 --num-rep 3 --show-mappings"),
        format!("crush test -i {m} --num-rep 0"),
        format!("crush test -i {m} --num-rep 65"),
        format!("crush test -i {m} --bogus"),
        "crush test -i /nonexistent/map.txt".to_string(),
        format!("crush test -i {g}"),
        format!("osdmap test-map-object x --crush {m} --pool-id 1 --pg-num 0 --size 3"),
        format!(
            "osdmap test-map-object x --crush {m} --pool-id 1 --pg-num 8 --size 3 --mark-out 99"
        ),
        // Usage errors from the argument parser are one line too.
        "crush test".to_string(),
        "crush frobnicate".to_string(),
        format!("osdmap test-map-object x --crush {m} --pool-id one --pg-num 8 --size 3"),
        "ec plan --plugin zigzag --k 8 --m 5".to_string(),
        "ec plan --plugin zigzag --k 8 --m 2 --s 5".to_string(),
        "ec plan --plugin rs --k 2 --m 3".to_string(),
        "ec plan --plugin rs --k 0 --m 1".to_string(),
        "ec plan --plugin zigzag --k 8 --m 2 --construction optimal".to_string(),
        "ec plan --plugin lrc --k 4 --m 2 --l 9".to_string(),
        "ec plan --plugin raid6 --k 4 --m 2".to_string(),
        "ec bench --plugin rs --k 4 --m 2 --size 0".to_string(),
        "ec bench --plugin rs --k 4 --m 2 --backend neon".to_string(),
        "ec bench --plugin zigzag --k 4 --m 2 --peer /bin/true".to_string(),
        "ec bench --plugin rs --k 4 --m 2 --size 4096 --seconds 0.01 --peer /nonexistent/peer"
            .to_string(),
        // Allocation hints: unknown flags, and a hint on reads, are
        // refused before any cluster is looked for.
        "set-alloc-hint x 4096 4096 --flags squishy".to_string(),
        "bench 1 write --alloc-hint compressible,squishy".to_string(),
        "bench 1 seq --alloc-hint compressible".to_string(),
    ];
    for case in &cases {
        let args: Vec<&str> = case.split_whitespace().collect();
        let o = loligo(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("loligo: error: "), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    let _ = std::fs::remove_file(&garbage);
    // Every subcommand explains itself.
    for args in [
        vec!["--help"],
        vec!["crush", "test", "--help"],
        vec!["osdmap", "test-map-pgs-dump-all", "--help"],
        vec!["crush", "bench", "--help"],
        vec!["ec", "plan", "--help"],
        vec!["ec", "bench", "--help"],
    ] {
        let o = loligo(&args);
        assert!(o.status.success() && !o.stdout.is_empty(), "{args:?}");
    }
}

/// A daemon without a keyring refuses to start unless told `--insecure`,
/// and touches nothing first; a keyring of a client, or of another
/// daemon, is refused too.
/// `osd run` as osd.0 on `data`, its monitor an address nothing serves,
/// then `extra`: for the checks an OSD makes before it reaches one.
fn osd_run<'a>(data: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "osd",
        "run",
        "--id",
        "0",
        "--addr",
        "127.0.0.1:1",
        "--mon",
        "127.0.0.1:2",
        "--data",
        data,
    ];
    args.extend_from_slice(extra);
    args
}

#[test]
fn daemons_refuse_to_start_without_their_keyring() {
    let dir = std::env::temp_dir().join(format!("loligo-nokey-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("data");
    let d = data.to_str().unwrap();
    for args in [
        osd_run(d, &[]),
        vec![
            "mon",
            "run",
            "--id",
            "0",
            "--members",
            "0=127.0.0.1:2",
            "--data",
            d,
            "--fsid",
            "f",
            "--mkfs",
        ],
    ] {
        let o = loligo(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("--keyring") && err.contains("--insecure"),
            "{err}"
        );
        assert!(!data.exists(), "{args:?} made its data directory");
    }
    let ca = dir.join("ca");
    ok_stdout(&["auth", "ca", ca.to_str().unwrap(), "--fsid", "f"]);
    for (entity, why) in [
        ("client.admin", "client.admin's, not osd.0's"),
        ("osd.1", "osd.1's, not osd.0's"),
    ] {
        let k = dir.join(format!("{entity}.keyring"));
        let k = k.to_str().unwrap();
        ok_stdout(&[
            "auth",
            "keyring",
            entity,
            "--ca",
            ca.to_str().unwrap(),
            "-o",
            k,
        ]);
        let args = osd_run(d, &["--keyring", k]);
        let o = loligo(&args);
        assert!(!o.status.success(), "{entity}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(why), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The FileStore-like baseline journals every write: the block store's
/// small-write settings are refused for it, not silently ignored, and
/// nothing is made on disk.
#[test]
fn a_filestore_osd_refuses_the_block_stores_small_write_settings() {
    let dir = std::env::temp_dir().join(format!("loligo-fs-opts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("data");
    let d = data.to_str().unwrap();
    for extra in [["--small-writes", "cow"], ["--deferred-max", "65536"]] {
        let mut args = osd_run(d, &["--insecure", "--objectstore", "filestore"]);
        args.extend(extra);
        let o = loligo(&args);
        assert!(!o.status.success(), "{extra:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("apply to --objectstore bluestore only"),
            "{err}"
        );
        assert!(!data.join("type").exists(), "{extra:?} made a store");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--deferred-max` takes whole 4 KiB blocks up to 512 KiB: anything
/// else is refused before the OSD starts (a huge one would send large
/// writes through the metadata journal).
#[test]
fn osd_run_refuses_a_deferred_max_out_of_range() {
    for bad in ["0", "1000", "4097", "1048576", "lots"] {
        let o = loligo(&osd_run(
            "/nonexistent/loligo-deferred-max",
            &["--insecure", "--deferred-max", bad],
        ));
        assert_eq!(o.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--deferred-max"), "{bad}: {err}");
    }
}

/// Parse one number out of `"key": value` in a JSON object's text.
fn json_num(json: &str, key: &str) -> f64 {
    let v: serde_json::Value = serde_json::from_str(json).expect("valid JSON");
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {json}"))
}

#[test]
fn ec_plan_reports_the_theory() {
    // Zigzag (6,4): 8 rows, rebuilding ratio 1/2, Table 3.1 distances 6
    // (basic) and 5 (optimal); object a multiple of k * rows * 4 KiB.
    let size = (4 * 8 * 4096).to_string();
    for (con, dist) in [("basic", 6.0), ("optimal", 5.0)] {
        let out = ok_stdout(&[
            "ec",
            "plan",
            "--plugin",
            "zigzag",
            "--k",
            "4",
            "--m",
            "2",
            "--construction",
            con,
            "--object-size",
            &size,
            "--json",
        ]);
        assert_eq!(json_num(&out, "rows"), 8.0);
        assert!((json_num(&out, "rebuilding_ratio") - 0.5).abs() < 1e-12);
        assert!((json_num(&out, "effective_rebuilding_ratio") - 0.5).abs() < 1e-12);
        assert!(
            (json_num(&out, "avg_read_distance") - dist).abs() < 1e-12,
            "{con}"
        );
        assert!(json_num(&out, "avg_ios") > 0.0);
        let vs_rs = json_num(&out, "bytes_read_vs_rs");
        assert!(vs_rs > 0.5 && vs_rs < 1.0, "{vs_rs}");
    }
    // RS reads k whole chunks for every failure.
    let out = ok_stdout(&[
        "ec", "plan", "--plugin", "rs", "--k", "4", "--m", "2", "--json",
    ]);
    assert!((json_num(&out, "bytes_read_vs_rs") - 1.0).abs() < 1e-12);
    assert!((json_num(&out, "rebuilding_ratio") - 0.8).abs() < 1e-12);
    let text = ok_stdout(&["ec", "plan", "--plugin", "lrc", "--k", "6", "--m", "2"]);
    assert!(text.contains("local"), "{text}");
}

#[test]
fn ec_bench_reports_speeds() {
    let out = ok_stdout(&[
        "ec",
        "bench",
        "--plugin",
        "zigzag",
        "--k",
        "4",
        "--m",
        "2",
        "--size",
        "100000",
        "--seconds",
        "0.02",
        "--backend",
        "all",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    let results = v["results"].as_array().expect("a result per backend");
    // Every backend this CPU has (at least the scalar one), each measured.
    let names: Vec<&str> = results
        .iter()
        .map(|r| r["backend"].as_str().expect("a backend name"))
        .collect();
    assert_eq!(names.first(), Some(&"scalar"), "{out}");
    for r in results {
        assert!(r["encode_gbps"].as_f64().is_some_and(|g| g > 0.0), "{out}");
        assert!(r["decode_gbps"].as_f64().is_some_and(|g| g > 0.0), "{out}");
        assert!(r["klauspost_encode_gbps"].is_null(), "{out}");
    }
}

/// `--peer` runs the peer program with the matching instruction set and
/// reads its answer (a stand-in peer here: Go need not be installed).
#[test]
fn ec_bench_compares_with_a_peer_per_backend() {
    let dir = std::env::temp_dir().join(format!("loligo-ec-peer-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let peer = dir.join("peer.sh");
    let log = dir.join("args");
    std::fs::write(
        &peer,
        format!(
            "#!/bin/sh\necho \"$@\" >> {}\necho '{{\"encode_gbps\": 2.5}}'\n",
            log.display()
        ),
    )
    .expect("write peer");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&peer, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = ok_stdout(&[
        "ec",
        "bench",
        "--plugin",
        "rs",
        "--k",
        "4",
        "--m",
        "2",
        "--size",
        "65536",
        "--seconds",
        "0.02",
        "--backend",
        "scalar",
        "--peer",
        peer.to_str().expect("utf-8 path"),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    let r = &v["results"][0];
    assert_eq!(r["klauspost_encode_gbps"].as_f64(), Some(2.5), "{out}");
    let enc = r["compared_encode_gbps"].as_f64().expect("encode speed");
    let ratio = r["encode_vs_klauspost"].as_f64().expect("a ratio");
    assert!((ratio - enc / 2.5).abs() < 1e-9, "{out}");
    // K M SHARD SECONDS ISA, the shard the object's k-th part, once per
    // round.
    let args = std::fs::read_to_string(&log).expect("the peer ran");
    assert_eq!(
        args.lines().collect::<Vec<_>>(),
        ["4 2 16384 0.5 scalar"; 3]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn up_refuses_block_files_the_disk_cannot_hold() {
    let dir = std::env::temp_dir().join(format!("loligo-up-full-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    // 1 PB per OSD: no test machine has it.
    let o = loligo(&[
        "up",
        "--detach",
        "--data-dir",
        d,
        "--osd-size",
        "1000000000000000",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("GiB free") && err.contains("--osd-size"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(&dir)
        .map(|r| r.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "nothing started or written: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Run `osdmap scale ARGS --csv FILE`; the CSV's rows, each a map from
/// column name to value (two sizes asked, two rows wanted).
fn scale_rows(args: &[&str], heading: &str) -> Vec<std::collections::HashMap<String, String>> {
    let csv = std::env::temp_dir().join(format!("loligo-scale-{}.csv", std::process::id()));
    let mut all = vec!["osdmap", "scale"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--csv", csv.to_str().unwrap()]);
    let out = ok_stdout(&all);
    assert!(out.contains(heading), "{out}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let _ = std::fs::remove_file(&csv);
    let mut lines = text
        .lines()
        .map(|l| l.split(',').map(String::from).collect::<Vec<_>>());
    let names = lines.next().expect("a heading line");
    let rows: Vec<_> = lines
        .map(|vals| names.iter().cloned().zip(vals).collect())
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    rows
}

#[test]
fn osdmap_scale_measures_each_size_and_refuses_nonsense() {
    let num = |r: &std::collections::HashMap<String, String>, k: &str| -> f64 {
        r[k].parse().unwrap_or_else(|_| panic!("{k}: {r:?}"))
    };
    let rows = scale_rows(&["--osds", "10,40", "--reps", "1"], "apply ms");
    for (row, osds) in rows.iter().zip([10.0, 40.0]) {
        assert_eq!(num(row, "osds"), osds);
        // About 100 PG copies per OSD in size-3 pools.
        let pgs = num(row, "pgs");
        assert_eq!(pgs, (osds * 100.0 / 3.0).floor());
        // One OSD down names some PGs, never all.
        let changed = num(row, "changed_pgs");
        assert!(changed > 0.0 && changed < pgs, "{row:?}");
    }
    // More PGs than one pool may have: two pools, one after the other.
    let rows = scale_rows(
        &["--osds", "10,11", "--pgs-per-osd", "20000", "--reps", "1"],
        "apply ms",
    );
    for (row, osds) in rows.iter().zip([10.0f64, 11.0]) {
        assert_eq!(num(row, "pgs"), (osds * 20000.0 / 3.0).floor(), "{row:?}");
    }
    let o = loligo(&["osdmap", "scale", "--osds", "0"]);
    assert_eq!(o.status.code(), Some(2));

    // Against a real monitor: every OSD booted, the pools made, commits
    // timed.
    let rows = scale_rows(&["--osds", "10,30", "--reps", "2", "--monitor"], "down ms");
    for (row, osds) in rows.iter().zip([10.0, 30.0]) {
        assert_eq!(num(row, "osds"), osds);
        // Boots that wait together share epochs: at least one, at most
        // one per OSD.
        let epochs = num(row, "epochs");
        assert!(epochs >= 1.0 && epochs <= osds, "{row:?}");
        assert_eq!(num(row, "pgs"), (osds * 100.0 / 3.0).floor());
        for c in ["down_commit_ms", "boot_commit_ms"] {
            let v = num(row, c);
            assert!(v > 0.0 && v < 5_000.0, "{c}: {row:?}");
        }
    }

    // Simulated OSDs against a real monitor: every PG peered, one OSD
    // marked down, the PGs it served peered again.
    let rows = scale_rows(&["--osds", "30,60", "--peering"], "active ms");
    for (row, osds) in rows.iter().zip([30.0, 60.0]) {
        assert_eq!(num(row, "osds"), osds);
        // The victim held about 100 PG copies.
        let affected = num(row, "affected_pgs");
        assert!((50.0..=200.0).contains(&affected), "{row:?}");
        let (peered, active) = (num(row, "peered_ms"), num(row, "active_ms"));
        assert!(
            peered > 0.0 && active >= peered && active < 10_000.0,
            "{row:?}"
        );
        // The down, then the write sets, gathered: fewer epochs than
        // requests to the monitor.
        let (epochs, reqs) = (num(row, "epochs"), num(row, "mon_requests"));
        assert!(epochs >= 2.0 && epochs <= reqs, "{row:?}");
        assert!(num(row, "messages") >= affected, "{row:?}");
        // The largest single charges are parts of the busy times.
        let (step, busy) = (num(row, "osd_step_max_ms"), num(row, "osd_busy_max_ms"));
        assert!(step > 0.0 && step <= busy + 0.01, "{row:?}");
        let (step, busy) = (num(row, "mon_step_max_ms"), num(row, "mon_busy_ms"));
        assert!(step > 0.0 && step <= busy + 0.01, "{row:?}");
    }
    // Size-3 pools over hosts of 10 OSDs need 3 hosts.
    let o = loligo(&["osdmap", "scale", "--osds", "20", "--peering"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("at least 30"), "{err}");
}

/// `store mkfs --device` puts the data on the file it names (linked as
/// DIR/block, at most --size of it used), and `store fsck` reads it back.
#[test]
fn store_mkfs_on_a_device() {
    let base = std::env::temp_dir().join(format!("loligo-cli-mkfs-dev-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let (dir, dev) = (base.join("store"), base.join("device"));
    std::fs::File::create(&dev)
        .unwrap()
        .set_len(128 << 20)
        .unwrap();
    let (d, v) = (dir.to_string_lossy(), dev.to_string_lossy());
    ok_stdout(&["store", "mkfs", &d, "--size", "67108864", "--device", &v]);
    let link = std::fs::read_link(dir.join("block")).expect("DIR/block links to the device");
    assert_eq!(link, dev.canonicalize().unwrap());
    ok_stdout(&["store", "fsck", &d]);
    let _ = std::fs::remove_dir_all(&base);
}

/// `store set-bytes` writes a file's bytes into a stopped store's object
/// through the store (its checksums valid, so fsck stays clean), finds
/// the object by name, and refuses a name no collection holds.
#[test]
fn store_set_bytes_writes_through_the_store() {
    use loligo_store::{BlockConfig, BlockStore, CollectionId, ObjectId, ObjectStore, Transaction};
    let base = std::env::temp_dir().join(format!("loligo-cli-set-bytes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let dir = base.join("store");
    let d = dir.to_string_lossy().to_string();
    ok_stdout(&["store", "mkfs", &d, "--size", "67108864"]);
    let (c, o) = (CollectionId::pg(1, 7), ObjectId::new(0x2a71_654e, "o6"));
    {
        let s = BlockStore::mount(&dir, &BlockConfig::default()).unwrap();
        let mut t = Transaction::new();
        t.create_collection(c);
        t.write_full(c, &o, vec![b'a'; 100]);
        s.apply(t).unwrap();
    }
    let file = base.join("evil");
    std::fs::write(&file, b"evil").unwrap();
    let f = file.to_string_lossy().to_string();
    let out = ok_stdout(&["store", "set-bytes", &d, "o6", "10", &f]);
    assert!(
        out.contains("wrote 4 bytes at offset 10 of 'o6' in pg 1.7"),
        "{out}"
    );
    {
        let s = BlockStore::mount(&dir, &BlockConfig::default()).unwrap();
        let got = s.read(c, &o, &[(0, 100)]).unwrap().remove(0);
        let mut want = vec![b'a'; 100];
        want[10..14].copy_from_slice(b"evil");
        assert_eq!(got, want);
    }
    ok_stdout(&["store", "fsck", &d, "--deep"]);
    let bad = loligo(&["store", "set-bytes", &d, "nothing", "0", &f]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no object 'nothing'"));
    let _ = std::fs::remove_dir_all(&base);
}

/// `store bench --incompressible` runs every workload on a scratch store,
/// says in its JSON which payload it used, counts the device bytes of the
/// random overwrites, reads the overwritten objects back, and removes its
/// store.
#[test]
fn store_bench_with_incompressible_overwrites() {
    let dir = std::env::temp_dir().join(format!("loligo-cli-store-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_string_lossy().to_string();
    let out = ok_stdout(&[
        "store",
        "bench",
        &d,
        "--seconds",
        "0.2",
        "--size",
        "268435456",
        "--json",
        "--incompressible",
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["incompressible"], serde_json::Value::Bool(true));
    assert!(v["rand_write_iops"].as_f64().unwrap() > 0.0, "{v}");
    if std::path::Path::new("/proc/self/io").exists() {
        // Each overwrite is written in place at least.
        assert!(v["write_amplification_4k"].as_f64().unwrap() >= 1.0, "{v}");
    }
    // The overwritten objects are read back whole, before and after.
    for k in ["fresh_read_mbps", "overwritten_read_mbps"] {
        assert!(v[k].as_f64().unwrap() > 0.0, "{k}: {v}");
    }
    assert!(!dir.join("loligo-bench-store").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// crushtool's editing verbs, offline: an item added at a location of
/// new and existing buckets, found there by `show-location`, reweighted,
/// another removed, a replicated rule added (and mapping through it);
/// `check` passes, and fails with a --max-id below the devices'; bad
/// input is refused and writes nothing.
#[test]
fn crush_edit_adds_moves_removes_and_checks_as_crushtool() {
    let map = vectors().join("crush/s03_straw2_racks_nonuniform/map.txt");
    let m = map.to_str().unwrap();
    let dir = std::env::temp_dir().join(format!("loligo-crush-edit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("e.txt");
    let o = out.to_str().unwrap();
    let loc = ok_stdout(&["crush", "show-location", "-i", m, "osd.0"]);
    assert_eq!(loc, "host\thost0\nrack\track0\nroot\tdefault\n");
    ok_stdout(&[
        "crush",
        "edit",
        "-i",
        m,
        "-o",
        o,
        "--add-item",
        "99",
        "1.5",
        "osd.99",
        "--loc",
        "host",
        "newhost",
        "--loc",
        "rack",
        "rack0",
        "--create-replicated-rule",
        "r2",
        "default",
        "host",
    ]);
    let loc = ok_stdout(&["crush", "show-location", "-i", o, "osd.99"]);
    assert_eq!(loc, "host\tnewhost\nrack\track0\nroot\tdefault\n");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("rule r2 {"), "{text}");
    assert!(text.contains("item osd.99 weight 1.500\n"), "{text}");
    let maps = ok_stdout(&[
        "crush",
        "test",
        "-i",
        o,
        "--rule",
        "3",
        "--num-rep",
        "3",
        "--x",
        "7",
        "--show-mappings",
    ]);
    assert!(maps.starts_with("CRUSH rule 3 x 7 ["), "{maps}");
    let edited = ok_stdout(&[
        "crush",
        "edit",
        "-i",
        o,
        "--reweight-item",
        "osd.99",
        "2",
        "--remove-item",
        "osd.0",
    ]);
    assert!(edited.contains("item osd.99 weight 2.000\n"), "{edited}");
    assert!(!edited.contains("item osd.0 "), "{edited}");
    ok_stdout(&["crush", "check", "-i", o]);
    let e = loligo(&["crush", "check", "-i", o, "--max-id", "10"]);
    assert!(!e.status.success());
    for bad in [
        vec!["--add-item", "99", "1", "osd.99b", "--loc", "host", "h"],
        vec![
            "--add-item",
            "100",
            "1",
            "osd.100",
            "--loc",
            "nosuchtype",
            "h",
        ],
        vec!["--reweight-item", "nosuch", "1"],
        vec!["--remove-item", "rack0"],
        vec!["--create-replicated-rule", "r2", "default", "host"],
        vec!["--loc", "host", "h"],
    ] {
        let mut args = vec!["crush", "edit", "-i", o];
        args.extend(bad.iter());
        let e = loligo(&args);
        assert!(!e.status.success() && e.stdout.is_empty(), "{bad:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
