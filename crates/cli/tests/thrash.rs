//! Thrash a local cluster of real processes: while clients write and read
//! counters in objects (each client owns its objects and checks every
//! answer against a model; four on a replicated pool, two on a
//! Reed-Solomon 2+1 pool with min_size 2, two on a Zigzag 2+2 pool), OSDs
//! are killed with SIGKILL and started again
//! and marked out and in, one at a time, while two pools' PG counts are
//! doubled and halved again (PG split and merge). The model: a read returns at
//! least the newest value acknowledged before it was sent and never a
//! value that was not written. Afterwards every PG must be active+clean
//! within a bound and every object must read back its newest acknowledged
//! value (none lost, none stale).
//!
//!
//! Beside them, three clients share four registers (an xattr of each of
//! four objects in the replicated pool): they read, write and
//! compare-and-set them (a compare of the xattr and its set in one op),
//! and the history of every op (invoked, returned, answer; an op whose
//! answer never came has none) is checked for linearizability, register
//! by register (`loligo_testkit::lincheck`).
//!
//! `LOLIGO_THRASH_SECS` (default 30) sets how long the thrashing lasts;
//! `LOLIGO_THRASH_LOG` (default 16) the PG log length, short so that
//! restarted OSDs are both log-recovered and backfilled;
//! `LOLIGO_THRASH_SEED` (default 0) varies the clients' and the
//! thrasher's choices. A failed run keeps its cluster (logs, stores).

mod common;

use common::{ec_profiles, not_clean, ok};
use loligo_client::ClientError;
use loligo_testkit::lincheck::{self, Op, Register, RegisterIn, RegisterOut};
use loligo_testkit::Rng;
use loligo_types::ops::OpError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const OSDS: usize = 4;
/// Clients per pool: the replicated `default`, then the EC pools.
const POOLS: [(&str, usize); 3] = [("default", 4), ("ecrs", 2), ("eczz", 2)];
const OBJECTS_PER_CLIENT: usize = 6;
/// The PG counts the thrasher asks for, one step early and one half way:
/// splits, then merges back (the Zigzag pool keeps its count).
const PG_NUMS: [&[(&str, u32)]; 2] = [
    &[("default", 32), ("ecrs", 16)],
    &[("default", 16), ("ecrs", 8)],
];

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What one client knows of one object.
#[derive(Clone, Copy, Default)]
struct Model {
    /// Newest value acknowledged.
    acked: u64,
    /// Newest value ever sent (acknowledged or not).
    sent: u64,
}

#[derive(Default)]
struct Tally {
    writes_acked: u64,
    writes_failed: u64,
    reads_checked: u64,
    reads_failed: u64,
}

fn obj_name(client: usize, k: usize) -> String {
    format!("c{client}-o{k}")
}

/// Object `k`'s content for value `v`: `v` once, or for every third
/// object `v` repeated over 256 KiB, so that large payloads (page-aligned
/// buffers, TLS records opened in the reader's buffer) go through the
/// thrashing too.
fn content(k: usize, v: u64) -> Vec<u8> {
    let words = if k.is_multiple_of(3) { 32 << 10 } else { 1 };
    v.to_le_bytes().repeat(words)
}

/// The value object `k`'s `data` holds; `None` if it is torn (words that
/// differ, or not the length [`content`] gives).
fn value(k: usize, data: &[u8]) -> Option<u64> {
    if data.len() != content(k, 0).len() {
        return None;
    }
    let mut words = data.chunks(8);
    let first = u64::from_le_bytes(words.next()?.try_into().ok()?);
    for w in words {
        if u64::from_le_bytes(w.try_into().ok()?) != first {
            return None;
        }
    }
    Some(first)
}

async fn client_loop(
    io: loligo_client::IoCtx,
    me: usize,
    until: Instant,
    models: Arc<Mutex<Vec<Model>>>,
    tally: Arc<Mutex<Tally>>,
    seed: u64,
) {
    let mut rng = Rng::new(seed * 1000 + me as u64 + 1);
    while Instant::now() < until {
        let k = rng.index(OBJECTS_PER_CLIENT);
        let name = obj_name(me, k);
        let m = models.lock().unwrap()[k];
        if rng.chance(500) {
            let v = m.sent + 1;
            models.lock().unwrap()[k].sent = v;
            match io.write_full(&name, content(k, v)).await {
                Ok(_) => {
                    models.lock().unwrap()[k].acked = v;
                    tally.lock().unwrap().writes_acked += 1;
                }
                Err(e) => {
                    eprintln!("write {name} failed: {e}");
                    tally.lock().unwrap().writes_failed += 1
                }
            }
        } else {
            let got = match io.read(&name, 0, 0).await {
                Ok(d) => value(k, &d)
                    .unwrap_or_else(|| panic!("{name}: torn value of {} bytes", d.len())),
                Err(ClientError::Op(OpError::NotFound)) => 0,
                Err(e) => {
                    eprintln!("read {name} failed: {e}");
                    tally.lock().unwrap().reads_failed += 1;
                    continue;
                }
            };
            let now = models.lock().unwrap()[k];
            assert!(
                got >= m.acked,
                "{name}: read {got}, but {} was acknowledged before the read",
                m.acked
            );
            if got > now.sent {
                // Read again: a value that stays says a shard is wrong
                // on disk; one that goes, that the read mixed versions.
                let again = io.read(&name, 0, 0).await.map(|d| value(k, &d));
                panic!("{name}: read {got}, never written (sent {}, acknowledged {}; read again: {again:?})", now.sent, m.acked);
            }
            tally.lock().unwrap().reads_checked += 1;
        }
    }
}

/// Clients and registers of the shared-register history.
const SHARED_CLIENTS: u64 = 3;
const REGISTERS: usize = 4;

/// One op of the shared registers' history: (register, op).
type SharedOp = (usize, Op<RegisterIn<u64>, RegisterOut<u64>>);

/// A register's value as its xattr holds it (`None`: no object, or no
/// xattr yet), or why it could not be read.
async fn read_register(io: &loligo_client::IoCtx, name: &str) -> Result<Option<u64>, ClientError> {
    match io.get_xattr(name, "v").await {
        Ok(v) => Ok(std::str::from_utf8(&v).ok().and_then(|s| s.parse().ok())),
        Err(ClientError::Op(OpError::NotFound | OpError::NoXattr(_))) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A shared-register client: reads, writes (values unique to it) and
/// compare-and-sets (expecting the value it last read), each recorded with
/// its call and return times in microseconds since `t0`.
async fn register_loop(
    io: loligo_client::IoCtx,
    me: u64,
    t0: Instant,
    until: Instant,
    history: Arc<Mutex<Vec<SharedOp>>>,
    seed: u64,
) {
    let mut rng = Rng::new(seed * 7919 + me + 1);
    let mut next = 1;
    let mut last_read: Vec<Option<u64>> = vec![None; REGISTERS];
    let us = |t: Instant| t.duration_since(t0).as_micros() as u64;
    while Instant::now() < until {
        let r = rng.index(REGISTERS);
        let name = format!("shared-{r}");
        let value = (me + 1) * 1_000_000 + next;
        next += 1;
        let call = Instant::now();
        let (input, output) = match rng.below(3) {
            0 => match read_register(&io, &name).await {
                Ok(v) => {
                    last_read[r] = v;
                    (RegisterIn::Read, Some(RegisterOut::Read(v)))
                }
                // A failed read changed nothing: not part of the history.
                Err(_) => continue,
            },
            1 => {
                let w = io
                    .set_xattr(&name, "v", value.to_string().into_bytes())
                    .await;
                (
                    RegisterIn::Write(value),
                    w.ok().map(|_| RegisterOut::Written),
                )
            }
            _ => {
                let expect = last_read[r];
                let bytes = expect
                    .map(|v| v.to_string().into_bytes())
                    .unwrap_or_default();
                let c = io
                    .cas_xattr(&name, "v", bytes, value.to_string().into_bytes())
                    .await;
                let out = match c {
                    Ok(()) => Some(RegisterOut::Cas(true)),
                    Err(ClientError::Op(OpError::AssertFailed { .. })) => {
                        Some(RegisterOut::Cas(false))
                    }
                    Err(_) => None,
                };
                (RegisterIn::Cas { expect, new: value }, out)
            }
        };
        let ret = us(Instant::now());
        let op = Op {
            input,
            output,
            call: us(call),
            ret,
        };
        history.lock().unwrap().push((r, op));
    }
}

#[test]
fn kill_9_and_out_in_under_load_lose_nothing_and_end_clean() {
    let secs = env_or("LOLIGO_THRASH_SECS", 30);
    let seed = env_or("LOLIGO_THRASH_SEED", 0);
    let log = env_or("LOLIGO_THRASH_LOG", 16).to_string();
    let root = std::env::temp_dir().join(format!("loligo-thrash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let dir = root.join("c");
    let d = dir.to_string_lossy().into_owned();
    let _guard = common::Cluster(dir.clone());
    ok(
        &dir,
        &[
            "up",
            "--detach",
            "--s3",
            "off",
            "--osds",
            &OSDS.to_string(),
            "--osd-size",
            "536870912",
            "--pg-num",
            "16",
            "--pg-log-entries",
            &log,
            "--data-dir",
            &d,
        ],
    );
    // EC pools: RS 2+1 on four OSDs has a spare for a down OSD's position
    // (min_size k, so writes go on with a position empty); Zigzag 2+2
    // has none (a down OSD leaves a hole).
    ec_profiles(&dir);
    common::create_ecrs_pool(&dir, Some(2));
    ok(
        &dir,
        &[
            "pool",
            "create",
            "eczz",
            "--pg-num",
            "8",
            "--erasure",
            "zz22",
        ],
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tally = Arc::new(Mutex::new(Tally::default()));
    let c = rt
        .block_on(loligo_client::Cluster::connect_conf(
            &dir.join("loligo.conf"),
        ))
        .unwrap();
    // Each client: its pool's handle and its model.
    let ios: Vec<loligo_client::IoCtx> = POOLS
        .iter()
        .flat_map(|&(pool, n)| std::iter::repeat_n(pool, n))
        .map(|pool| c.pool(pool).unwrap())
        .collect();
    let all_models: Vec<Arc<Mutex<Vec<Model>>>> = ios
        .iter()
        .map(|_| Arc::new(Mutex::new(vec![Model::default(); OBJECTS_PER_CLIENT])))
        .collect();
    let until = Instant::now() + Duration::from_secs(secs);
    let history: Arc<Mutex<Vec<SharedOp>>> = Arc::default();
    let t0 = Instant::now();
    let shared: Vec<_> = (0..SHARED_CLIENTS)
        .map(|me| {
            let io = c.pool("default").unwrap();
            rt.spawn(register_loop(io, me, t0, until, history.clone(), seed))
        })
        .collect();
    let clients: Vec<_> = ios
        .iter()
        .enumerate()
        .map(|(me, io)| {
            rt.spawn(client_loop(
                io.clone(),
                me,
                until,
                all_models[me].clone(),
                tally.clone(),
                seed,
            ))
        })
        .collect();
    // The thrasher: one OSD at a time killed (SIGKILL) and started again,
    // or marked out and back in; early on the replicated pool and the RS
    // pool double their PG counts (splits, then pgp_num steps), and half
    // way they halve them again (pgp_num steps, then merges, each once
    // its PGs are clean), all while OSDs die.
    let mut rng = Rng::new(99 + seed);
    let mut events = Vec::new();
    let mut pg_nums = PG_NUMS.iter();
    let mut next_pg_num = Instant::now() + Duration::from_secs(2);
    while Instant::now() + Duration::from_secs(6) < until {
        if Instant::now() >= next_pg_num {
            if let Some(nums) = pg_nums.next() {
                for (pool, n) in *nums {
                    ok(&dir, &["pool", "set", pool, "pg_num", &n.to_string()]);
                    events.push(format!("{pool} pg_num {n}"));
                }
                next_pg_num = Instant::now() + Duration::from_secs(secs / 2);
            }
        }
        let osd = rng.index(OSDS).to_string();
        std::thread::sleep(Duration::from_millis(1000 + rng.below(2000)));
        if rng.chance(300) {
            ok(&dir, &["osd", "out", &osd]);
            std::thread::sleep(Duration::from_millis(2000 + rng.below(2000)));
            ok(&dir, &["osd", "in", &osd]);
            events.push(format!("out/in osd.{osd}"));
        } else {
            let name = format!("osd.{osd}");
            ok(&dir, &["stop", "--kill", &name, "--data-dir", &d]);
            std::thread::sleep(Duration::from_millis(1000 + rng.below(3000)));
            ok(&dir, &["start", &name, "--data-dir", &d]);
            events.push(format!("kill -9/start {name}"));
        }
    }
    for h in clients.into_iter().chain(shared) {
        rt.block_on(h).unwrap();
    }
    // The shared registers' history is linearizable.
    let history = std::mem::take(&mut *history.lock().unwrap());
    let ops = history.len();
    let unknown = history.iter().filter(|(_, o)| o.output.is_none()).count();
    match lincheck::check_by_key(&Register::new(), history.clone(), 5_000_000) {
        lincheck::Verdict::Linearizable => {}
        lincheck::Verdict::Undecided(r) => {
            eprintln!("register {r}: the checker ran out of steps (not a failure)")
        }
        lincheck::Verdict::NotLinearizable(r) => {
            let of_r: Vec<_> = history.iter().filter(|(k, _)| *k == r).collect();
            panic!("register {r}: history not linearizable ({events:?}): {of_r:?}");
        }
    }
    assert!(ops > 100, "the register clients did little: {ops} ops");
    // Healing: every PG active+clean within a bound, with no manual step,
    // and every pool at the PG count last asked (pgp_num steps and merges
    // wait for clean PGs, so some finish only now).
    let heal0 = Instant::now();
    // (The last count asked of each pool.)
    let asked: std::collections::BTreeMap<&str, u32> = (PG_NUMS[..PG_NUMS.len() - pg_nums.len()]
        .iter())
    .flat_map(|nums| nums.iter().copied())
    .collect();
    let at_counts = || {
        asked.iter().all(|(&pool, &n)| {
            let v: serde_json::Value =
                serde_json::from_str(&ok(&dir, &["pool", "get", pool])).unwrap_or_default();
            v["pg_num"] == n && v["pgp_num"] == n
        })
    };
    let mut last = not_clean(&dir);
    loop {
        let state = match &last {
            Some(state) => state.clone(),
            None if at_counts() => break,
            None => "PG counts not reached yet".to_string(),
        };
        assert!(
            heal0.elapsed() < Duration::from_secs(150),
            "not clean 150 s after thrashing ({events:?}): {state}"
        );
        std::thread::sleep(Duration::from_millis(500));
        last = not_clean(&dir);
    }
    let healed = heal0.elapsed();
    // Nothing acknowledged lost, nothing stale.
    for (me, models) in all_models.iter().enumerate() {
        for (k, m) in models.lock().unwrap().iter().enumerate() {
            let name = obj_name(me, k);
            let got = match rt.block_on(ios[me].read(&name, 0, 0)) {
                Ok(d) => value(k, &d).unwrap(),
                Err(ClientError::Op(OpError::NotFound)) => 0,
                Err(e) => panic!("{name} unreadable after healing: {e}"),
            };
            assert!(
                got >= m.acked && got <= m.sent,
                "{name}: {got} after healing, acknowledged {}, sent {}",
                m.acked,
                m.sent
            );
        }
    }
    let t = tally.lock().unwrap();
    eprintln!(
        "thrash {secs}s: {events:?}; writes acked {}, failed {}; reads checked {}, failed {}; clean {:.1}s after; {ops} register ops ({unknown} unknown) linearizable",
        t.writes_acked,
        t.writes_failed,
        t.reads_checked,
        t.reads_failed,
        healed.as_secs_f64()
    );
    assert!(t.writes_acked > 50, "the load did little");
    // Every pool took writes.
    let mut first = 0;
    for &(pool, n) in &POOLS {
        let acked: u64 = all_models[first..first + n]
            .iter()
            .map(|m| m.lock().unwrap().iter().map(|x| x.acked).sum::<u64>())
            .sum();
        assert!(acked > 5, "pool {pool}: {acked} writes acknowledged");
        first += n;
    }
    assert!(t.reads_checked > 50, "the load did little");
    // No EC shard read found a shard object of the wrong length (the
    // read goes around it, so only the OSDs' logs tell).
    for i in 0..OSDS {
        let log = std::fs::read_to_string(dir.join(format!("osd.{i}.log"))).unwrap_or_default();
        let bad: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("wrong length for its shard"))
            .take(3)
            .collect();
        assert!(bad.is_empty(), "osd.{i}: {bad:?}");
    }
    assert!(events.len() >= 3, "{events:?}");
    // Every copy's Merkle tree is the one its objects make (the OSDs
    // stopped first: the check reads their stores).
    drop(t);
    for i in 0..OSDS {
        ok(&dir, &["stop", &format!("osd.{i}"), "--data-dir", &d]);
    }
    let mut trees = 0;
    for i in 0..OSDS {
        let store = dir.join(format!("osd.{i}"));
        let out = ok(&dir, &["store", "fsck", &store.to_string_lossy()]);
        trees += out
            .lines()
            .find_map(|l| l.strip_suffix(" PG Merkle trees checked against their objects"))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("osd.{i}: no tree check in {out}"));
    }
    // 24 objects in the replicated pool's 16 PGs: about 12 PGs hold
    // some, three copies each.
    assert!(trees >= 24, "{trees} trees checked");
}
