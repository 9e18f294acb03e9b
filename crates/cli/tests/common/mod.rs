//! What the tests that drive a local cluster through the CLI share: run
//! `loligo` against a cluster directory, a guard that takes the cluster
//! down, the EC profiles they use, and the "all clean" check.
//!
//! (Each test binary uses a part of it.)
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Run `loligo ARGS` against the cluster in `dir`.
pub fn loligo(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loligo"))
        .args(args)
        .env("LOLIGO_CONF", dir.join("loligo.conf"))
        .current_dir(dir.parent().unwrap_or(dir))
        .output()
        .expect("run loligo")
}

/// As `loligo`, which must succeed; its standard output.
pub fn ok(dir: &Path, args: &[&str]) -> String {
    let o = loligo(dir, args);
    assert!(
        o.status.success(),
        "loligo {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Takes the cluster in its directory down, and removes the directory's
/// parent, when dropped.
pub struct Cluster(pub PathBuf);

impl Drop for Cluster {
    fn drop(&mut self) {
        let d = self.0.to_string_lossy().into_owned();
        let _ = loligo(&self.0, &["down", "--data-dir", &d]);
        // A failed test keeps its cluster's logs and stores to look at.
        if std::thread::panicking() {
            eprintln!("test failed: cluster kept in {d}");
            return;
        }
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap_or(&self.0));
    }
}

/// `loligo up` of a detached cluster of `osds` OSDs of 256 MiB and a
/// default pool of `pg_num` PGs in `dir`.
pub fn up_args(dir: &Path, osds: u32, pg_num: u32) -> Vec<String> {
    [
        "up".to_string(),
        "--detach".into(),
        "--osds".into(),
        osds.to_string(),
        "--osd-size".into(),
        (256u64 << 20).to_string(),
        "--pg-num".into(),
        pg_num.to_string(),
        "--data-dir".into(),
        dir.to_string_lossy().into_owned(),
        // No S3 gateway (and its pools): tests of it start their own.
        "--s3".into(),
        "off".into(),
    ]
    .to_vec()
}

/// A fresh folder for test `tag` (its root) and such a cluster started in
/// its `c` folder: (root, cluster folder, the guard that takes it down).
pub fn start(tag: &str, osds: u32, pg_num: u32) -> (PathBuf, PathBuf, Cluster) {
    start_with(tag, osds, pg_num, &[])
}

/// [`start`], with `extra` arguments to `loligo up`.
pub fn start_with(
    tag: &str,
    osds: u32,
    pg_num: u32,
    extra: &[&str],
) -> (PathBuf, PathBuf, Cluster) {
    let root = std::env::temp_dir().join(format!("loligo-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let dir = root.join("c");
    let guard = Cluster(dir.clone());
    let mut args = up_args(&dir, osds, pg_num);
    args.extend(extra.iter().map(|a| a.to_string()));
    ok(&dir, &args.iter().map(String::as_str).collect::<Vec<_>>());
    (root, dir, guard)
}

/// Profiles `rs21` (Reed-Solomon 2+1) and `zz22` (Zigzag 2+2).
pub fn ec_profiles(dir: &Path) {
    for (name, plugin, m) in [("rs21", "rs", "1"), ("zz22", "zigzag", "2")] {
        ok(
            dir,
            &[
                "ec-profile",
                "set",
                name,
                "--plugin",
                plugin,
                "--k",
                "2",
                "--m",
                m,
            ],
        );
    }
}

/// Pool `ecrs` of 8 PGs on profile `rs21` (Reed-Solomon 2+1; made by
/// [`ec_profiles`]) with min_size `min_size` (Some(2), k: a PG with one
/// OSD down still serves; None: the default, k + 1).
pub fn create_ecrs_pool(dir: &Path, min_size: Option<u32>) {
    let min = min_size.map(|m| m.to_string());
    let mut args = vec![
        "pool",
        "create",
        "ecrs",
        "--pg-num",
        "8",
        "--erasure",
        "rs21",
    ];
    if let Some(m) = &min {
        args.extend(["--min-size", m.as_str()]);
    }
    ok(dir, &args);
}

/// Why the cluster is not all up, in and active+clean (`None`: it is).
pub fn not_clean(dir: &Path) -> Option<String> {
    let o = loligo(dir, &["status", "--json"]);
    let Ok(s) = serde_json::from_slice::<serde_json::Value>(&o.stdout) else {
        return Some(String::from_utf8_lossy(&o.stderr).into_owned());
    };
    let clean = s["pgs"]["by_state"]["active+clean"].as_u64().unwrap_or(0);
    let all = Some(clean) == s["pgs"]["total"].as_u64()
        && s["osdmap"]["num_up_osds"] == s["osdmap"]["num_osds"]
        && s["osdmap"]["num_in_osds"] == s["osdmap"]["num_osds"];
    (!all).then(|| s["pgs"].to_string())
}

/// Put objects `{tag}{i}` (`i` in `0..n`) holding "{tag} object {i}"
/// into `pool` (`None`: the default pool), through files under `root`.
pub fn put_objects(dir: &Path, root: &Path, pool: Option<&str>, tag: &str, n: usize) {
    let file = root.join(format!("{tag}.in"));
    for i in 0..n {
        std::fs::write(&file, format!("{tag} object {i}")).unwrap();
        let name = format!("{tag}{i}");
        let mut args = vec!["put", name.as_str(), file.to_str().unwrap()];
        if let Some(p) = pool {
            args.extend(["-p", p]);
        }
        ok(dir, &args);
    }
}

/// Read back every object [`put_objects`] put, asserting its bytes.
pub fn read_back(dir: &Path, root: &Path, pool: Option<&str>, tag: &str, n: usize) {
    let file = root.join(format!("{tag}.out"));
    for i in 0..n {
        let name = format!("{tag}{i}");
        let mut args = vec!["get", name.as_str(), file.to_str().unwrap()];
        if let Some(p) = pool {
            args.extend(["-p", p]);
        }
        ok(dir, &args);
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            format!("{tag} object {i}"),
            "{name} in {pool:?}"
        );
    }
}
