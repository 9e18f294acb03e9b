//! The crate graph obeys the layering in ARCHITECTURE.md: checked on
//! Cargo.lock (which lists normal and dev dependencies alike, so the check
//! is if anything stricter than `cargo tree`).

use std::collections::{BTreeMap, BTreeSet};

/// package name -> names of its dependencies, from the workspace's lock file.
fn lock_graph() -> BTreeMap<String, Vec<String>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock");
    let text = std::fs::read_to_string(path).expect("read Cargo.lock");
    let lock: toml::Value = toml::from_str(&text).expect("parse Cargo.lock");
    let mut g = BTreeMap::new();
    for p in lock["package"].as_array().expect("packages") {
        let name = p["name"].as_str().expect("name").to_string();
        let deps = p
            .get("dependencies")
            .and_then(|d| d.as_array())
            .into_iter()
            .flatten()
            // "name", or "name version" when several versions are locked.
            .filter_map(|d| d.as_str()?.split(' ').next().map(str::to_string))
            .collect::<Vec<_>>();
        g.entry(name).or_insert_with(Vec::new).extend(deps);
    }
    g
}

fn reachable(g: &BTreeMap<String, Vec<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_string()];
    while let Some(n) = todo.pop() {
        for d in g.get(&n).into_iter().flatten() {
            if seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    seen
}

#[test]
fn crates_link_only_the_layers_below_them() {
    let g = lock_graph();
    let never: &[(&str, &[&str])] = &[
        // An embedded client builds no Raft server, monitor, OSD or store.
        (
            "loligo-client",
            &[
                "openraft",
                "fjall",
                "loligo-mon",
                "loligo-osd",
                "loligo-store",
            ],
        ),
        ("loligo-monc", &["openraft", "fjall", "loligo-mon"]),
        // The S3 gateway is a client: stateless, it links no server.
        (
            "loligo-s3",
            &[
                "openraft",
                "fjall",
                "loligo-mon",
                "loligo-osd",
                "loligo-pg",
                "loligo-store",
            ],
        ),
        // The Python binding is a client too: no monitor. (The lock file
        // also holds the key-value store's dev-dependencies, an OSD for
        // its tests; the next test checks run-time links alone.)
        ("loligo-python", &["openraft", "loligo-mon"]),
        ("loligo-osd", &["openraft", "loligo-mon"]),
        // The PG core is sans-I/O: no runtime, no network, no monitor;
        // the daemon and the simulator run the same code.
        (
            "loligo-pg",
            &[
                "tokio",
                "tonic",
                "loligo-proto",
                "loligo-monc",
                "loligo-osd",
            ],
        ),
        // The simulator runs the sans-I/O core on simulated time: no
        // runtime, no network, no daemon.
        (
            "loligo-sim",
            &[
                "tokio",
                "tonic",
                "loligo-proto",
                "loligo-monc",
                "loligo-osd",
                "loligo-mon",
            ],
        ),
        // The monitor keeps its log in fjall itself, not in the block store.
        ("loligo-mon", &["loligo-store", "loligo-osd"]),
        // The pure libraries do no I/O and need no runtime.
        ("loligo-crush", &["tokio", "tonic", "fjall"]),
        ("loligo-ec", &["tokio", "tonic", "fjall"]),
        ("loligo-types", &["tokio", "tonic", "fjall"]),
        ("loligo-store", &["tokio", "tonic", "loligo-types"]),
        // The wire's payload helper sits under the store and the types.
        (
            "loligo-bulk",
            &["tokio", "tonic", "loligo-store", "loligo-types"],
        ),
    ];
    for (krate, banned) in never {
        assert!(g.contains_key(*krate), "{krate} is not in Cargo.lock");
        let r = reachable(&g, krate);
        for b in *banned {
            assert!(!r.contains(*b), "{krate} depends on {b}");
        }
    }
    // The check sees real edges: the monitor does link Raft.
    assert!(reachable(&g, "loligo-mon").contains("openraft"));
}

/// The `[dependencies]` table of each workspace crate's manifest (run-time
/// dependencies only: not dev or build).
fn runtime_dependencies() -> BTreeMap<String, toml::Table> {
    let crates = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates");
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(crates).expect("read crates/") {
        let manifest = e.expect("an entry").path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        let m: toml::Table = toml::from_str(&text).expect("parse a manifest");
        let name = m["package"]["name"].as_str().expect("a name").to_string();
        let deps = m
            .get("dependencies")
            .and_then(|d| d.as_table())
            .cloned()
            .unwrap_or_default();
        out.insert(name, deps);
    }
    out
}

#[test]
fn the_client_side_crates_link_no_server_at_run_time() {
    // Run-time dependencies among workspace crates, followed through:
    // the Python binding and the S3 gateway are clients of the cluster.
    let all = runtime_dependencies();
    let closure = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(n) = todo.pop() {
            for d in all.get(&n).into_iter().flat_map(|t| t.keys()) {
                if all.contains_key(d) && seen.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        seen
    };
    for krate in ["loligo-python", "loligo-s3", "loligo-kv", "loligo-client"] {
        let r = closure(krate);
        for server in [
            "loligo-mon",
            "loligo-osd",
            "loligo-pg",
            "loligo-store",
            "loligo-sim",
        ] {
            assert!(!r.contains(server), "{krate} links {server} at run time");
        }
    }
    // The check sees real edges: the binding links the client library.
    assert!(closure("loligo-python").contains("loligo-client"));
}

#[test]
fn run_time_code_does_not_link_the_test_kit() {
    // The test kit's generator and temporary folders are for tests,
    // benchmarks and workload tools: a library takes it only as an
    // optional dependency (a feature for the tools), and only the CLI,
    // which runs those tools, and the simulator, which is a test tool,
    // link it outright.
    let all = runtime_dependencies();
    assert!(all.len() >= 10, "{} crates found", all.len());
    for (krate, deps) in &all {
        let Some(kit) = deps.get("loligo-testkit") else {
            continue;
        };
        let optional = kit.get("optional").and_then(|o| o.as_bool()) == Some(true);
        assert!(
            optional || krate == "loligo-cli" || krate == "loligo-sim",
            "{krate} links loligo-testkit at run time"
        );
    }
    // The check sees real entries: the store's workloads are optional.
    assert!(all["loligo-store"].contains_key("loligo-testkit"));
}
