//! Crash test for the block store: `loligo store torture` applies a
//! deterministic workload and prints each durable commit (and each
//! unsynced one applied, durable once its thread commits a later one);
//! this test kills
//! it with SIGKILL at random moments, remounts, and checks that every
//! acknowledged transaction is fully visible, none is half-applied, and
//! fsck (deep) is clean. Cycles take turns at the store's ways of writing
//! small writes (auto, copy-on-write, deferred). 50 cycles by default;
//! `LOLIGO_CRASH_CYCLES=N` for a longer run.

use loligo_store::{torture, BlockConfig, BlockStore, FileConfig, FileStore, ObjectStore};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Writer threads of the workload (a thread is `n % THREADS`).
const THREADS: u64 = 4;

/// Which store a crash test runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Block,
    File,
}

#[test]
fn kill_9_at_random_moments_loses_nothing_acknowledged() {
    kill_9_at_random_moments(Kind::Block);
}

/// The file store replays its journal onto whatever the killed process
/// had applied; clones in the workload test its replay guards.
#[test]
fn a_killed_file_store_loses_nothing_acknowledged() {
    kill_9_at_random_moments(Kind::File);
}

fn kill_9_at_random_moments(kind: Kind) {
    let cycles: u64 = std::env::var("LOLIGO_CRASH_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let tag = if kind == Kind::Block { "block" } else { "file" };
    let dir = std::env::temp_dir().join(format!("loligo-crash-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = BlockConfig {
        size: 256 << 20,
        ..BlockConfig::default()
    };
    let fcfg = FileConfig::default();
    match kind {
        Kind::Block => BlockStore::mkfs(&dir, &cfg).expect("mkfs"),
        Kind::File => FileStore::mkfs(&dir, &fcfg).expect("mkfs"),
    }
    let mut acked: BTreeMap<u64, u64> = BTreeMap::new();
    let mut next = 0u64;
    let mut rng = loligo_testkit::Rng::new(0);
    let mut total_acked = 0u64;
    // Unsynced transactions applied but not known durable at the kill.
    let mut total_unsure = 0u64;
    for cycle in 0..cycles {
        let run_ms = 5 + rng.below(150);
        // Each way of writing small writes in turn, over the same store:
        // each mount reads what the others left.
        let mode = ["auto", "cow", "deferred"][(cycle % 3) as usize];
        let mut child = Command::new(env!("CARGO_BIN_EXE_loligo"))
            .args(["store", "torture", "--threads", &THREADS.to_string()])
            .args(["--small-writes", mode])
            .arg(&dir)
            .args(["--start", &next.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn torture");
        let stdout = child.stdout.take().expect("stdout");
        let reader = std::thread::spawn(move || {
            // Durable: each committed transaction, and the unsynced ones
            // its thread applied before it.
            let (mut got, mut applied) = (Vec::new(), Vec::new());
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let num = |p: &str| line.strip_prefix(p).and_then(|s| s.parse::<u64>().ok());
                if let Some(n) = num("applied ") {
                    applied.push(n);
                } else if let Some(m) = num("committed ") {
                    got.push(m);
                    applied.retain(|&n| {
                        let durable = n % THREADS == m % THREADS && n < m;
                        if durable {
                            got.push(n);
                        }
                        !durable
                    });
                }
            }
            (got, applied.len())
        });
        std::thread::sleep(Duration::from_millis(run_ms));
        child.kill().expect("SIGKILL");
        let status = child.wait().expect("wait");
        let (got, unsure) = reader.join().expect("reader");
        total_unsure += unsure as u64;
        assert!(
            !status.success(),
            "cycle {cycle}: torture exited on its own: {status:?}"
        );
        total_acked += got.len() as u64;
        for n in got {
            let o = n % torture::OBJECTS;
            let e = acked.entry(o).or_insert(n);
            *e = (*e).max(n);
        }
        if kind == Kind::File {
            let s = FileStore::mount(&dir, &fcfg)
                .unwrap_or_else(|e| panic!("cycle {cycle}: remount: {e}"));
            next = torture::verify(&s as &dyn ObjectStore, &acked)
                .unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
        } else {
            let s = BlockStore::mount(&dir, &cfg)
                .unwrap_or_else(|e| panic!("cycle {cycle}: remount: {e}"));
            next = torture::verify(&s, &acked).unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
            let r = s.fsck(true).expect("fsck");
            assert!(r.errors.is_empty(), "cycle {cycle}: fsck: {:?}", r.errors);
        }
        next = next.max(acked.values().max().map_or(0, |m| m + 1));
    }
    assert!(
        total_acked > cycles,
        "the workload barely ran: {total_acked} commits in {cycles} cycles"
    );
    eprintln!("{total_acked} transactions durable, {total_unsure} applied unsynced at a kill");
    let _ = std::fs::remove_dir_all(&dir);
}
