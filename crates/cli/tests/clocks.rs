//! Clocks that disagree change nothing: daemons and clients on hosts of
//! their own (`lab`), some with their wall clocks offset by Debian's
//! libfaketime. Needs root, iproute2, nftables and libfaketime (CI runs
//! as root; `.ci/run` installs `nftables` and `faketime`); without them
//! the test says so and stops.

mod common;
mod lab;

use lab::{hosts_or_skip, Lab, Session, LIBFAKETIME};
use loligo_testkit::lincheck::{self, Op, Register, RegisterIn, RegisterOut};
use loligo_testkit::Rng;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Keys the clients share: enough that nodes of 8..16 entries split.
const KEYS: u64 = 64;
const STORE: &str = "clocked";

type RegOp = Op<RegisterIn<u64>, RegisterOut<u64>>;

/// One client: writes unique values to and reads random keys for `run`;
/// every op with its times on the shared clock `t0`.
fn kv_client(
    mut s: Session,
    id: u64,
    run: Duration,
    t0: Instant,
    history: Arc<Mutex<Vec<(u64, RegOp)>>>,
) {
    let mut rng = Rng::new(id);
    let mut n = 0;
    while t0.elapsed() < run {
        let key = rng.below(KEYS);
        let call = t0.elapsed().as_millis() as u64;
        let op = if rng.chance(600) {
            n += 1;
            let value = id * 1_000_000 + n;
            let ok = s.ask(&format!("kvput {STORE} k{key} {value}")) == "ok";
            Op {
                input: RegisterIn::Write(value),
                output: ok.then_some(RegisterOut::Written),
                call,
                ret: t0.elapsed().as_millis() as u64,
            }
        } else {
            let a = s.ask(&format!("kvget {STORE} k{key}"));
            let v = match a.as_str() {
                "absent" => None,
                _ => match a.strip_prefix("value ").and_then(|v| v.parse().ok()) {
                    Some(v) => Some(v),
                    None => continue,
                },
            };
            Op {
                input: RegisterIn::Read,
                output: Some(RegisterOut::Read(v)),
                call,
                ret: t0.elapsed().as_millis() as u64,
            }
        };
        history.lock().unwrap().push((key, op));
    }
}

/// osd.0's wall clock runs an hour ahead and osd.1's an hour behind; of
/// two clients of one key-value store, one's runs 15 s behind (more
/// than the store's 10 s timeout: a client that judged another's split
/// stale by comparing their clocks would roll the behind one's live
/// splits back). Both write and read 64 keys for 20 s, with nodes of
/// 8..16 entries so that they split; every key's history is
/// linearizable, and every key reads back its last value.
#[test]
fn clocks_that_disagree_across_daemons_and_clients_change_nothing() {
    if !hosts_or_skip() {
        return;
    }
    if !std::path::Path::new(LIBFAKETIME).exists() {
        eprintln!("skipped: needs Debian's faketime ({LIBFAKETIME})");
        return;
    }
    let mut lab = Lab::start_clocked("lc", 1, 3, &[("osd.0", "+1h"), ("osd.1", "-1h")]);
    let host = lab.client_host();
    let mut first = lab.client(host);
    assert_eq!(first.ask(&format!("kvcreate {STORE}")), "ok");
    let behind = lab.client_clocked(host, "default", Some("-15s"));
    let t0 = Instant::now();
    let run = Duration::from_secs(20);
    let history: Arc<Mutex<Vec<(u64, RegOp)>>> = Arc::default();
    let workers: Vec<_> = [(first, 1), (behind, 2)]
        .into_iter()
        .map(|(s, id)| {
            let h = history.clone();
            std::thread::spawn(move || kv_client(s, id, run, t0, h))
        })
        .collect();
    for w in workers {
        w.join().expect("a client");
    }
    let mut history = std::mem::take(&mut *history.lock().unwrap());
    let mut last = lab.client(host);
    for key in 0..KEYS {
        let call = t0.elapsed().as_millis() as u64;
        let a = last.ask(&format!("kvget {STORE} k{key}"));
        let v = match a.as_str() {
            "absent" => None,
            _ => Some(
                a.strip_prefix("value ")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("the last read of k{key}: {a}")),
            ),
        };
        let op = Op {
            input: RegisterIn::Read,
            output: Some(RegisterOut::Read(v)),
            call,
            ret: t0.elapsed().as_millis() as u64,
        };
        history.push((key, op));
    }
    let stats = common::ok(&lab.dir, &["kv", "stats", STORE, "--json"]);
    let stats: serde_json::Value = serde_json::from_str(&stats).expect("kv stats --json");
    let nodes = stats["nodes"].as_u64().unwrap_or(0);
    assert!(nodes > 1, "the store never split: {stats}");
    let check = common::loligo(&lab.dir, &["kv", "check", STORE]);
    assert!(
        check.status.success(),
        "kv check: {}",
        String::from_utf8_lossy(&check.stdout)
    );
    let writes = history
        .iter()
        .filter(|(_, op)| op.output == Some(RegisterOut::Written))
        .count();
    eprintln!(
        "{} ops, {writes} writes acknowledged, {nodes} nodes",
        history.len()
    );
    assert!(writes > 100, "too few writes to show anything: {writes}");
    let mut by_key: BTreeMap<u64, Vec<RegOp>> = BTreeMap::new();
    for (k, op) in history {
        by_key.entry(k).or_default().push(op);
    }
    let model = Register::<u64>::new();
    for (k, ops) in &by_key {
        assert_eq!(
            lincheck::check(&model, ops, 5_000_000),
            Some(true),
            "k{k}'s history: {ops:?}"
        );
    }
}
