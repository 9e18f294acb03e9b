//! Registers written and read by lab clients, every op recorded
//! (invoked, returned, answer; a write that failed has an unknown
//! outcome), and each register's history checked for linearizability
//! (`loligo_testkit::lincheck`): objects of a replicated pool, of an
//! erasure-coded pool, and keys of a key-value store.

use super::{Lab, Session};
use loligo_testkit::lincheck::{self, Op, Register, RegisterIn, RegisterOut};
use loligo_testkit::Rng;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The key-value store KV clients share (made by [`Kind::prepare`]).
pub const KV_STORE: &str = "labkv";
/// Search steps per register history before it is reported undecided.
pub const CHECK_BUDGET: u64 = 2_000_000;

/// What the clients work on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Replicated,
    Erasure,
    Kv,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 3] = [Kind::Replicated, Kind::Erasure, Kind::Kv];

    /// The kind's name in keys and reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Replicated => "replicated",
            Kind::Erasure => "erasure",
            Kind::Kv => "kv",
        }
    }

    /// The pool a session of this kind opens.
    pub fn pool(self) -> &'static str {
        match self {
            Kind::Erasure => "ecrs",
            Kind::Replicated | Kind::Kv => "default",
        }
    }

    fn write(self, key: &str, value: u64) -> String {
        match self {
            Kind::Kv => format!("kvput {KV_STORE} {key} {value}"),
            _ => format!("put {key} {value}"),
        }
    }

    fn read(self, key: &str) -> String {
        match self {
            Kind::Kv => format!("kvget {KV_STORE} {key}"),
            _ => format!("get {key}"),
        }
    }

    /// Make what this kind needs beyond the lab's pool: the erasure-coded
    /// pool (Reed-Solomon 2+1, min_size 2, not yet clean), the KV store.
    pub fn prepare(self, lab: &mut Lab) {
        match self {
            Kind::Replicated => {}
            Kind::Erasure => {
                crate::common::ec_profiles(&lab.dir);
                crate::common::create_ecrs_pool(&lab.dir, Some(2));
            }
            Kind::Kv => {
                let mut s = lab.client(lab.client_host());
                assert_eq!(s.ask(&format!("kvcreate {KV_STORE}")), "ok");
            }
        }
    }
}

/// One op on a register, as the checker takes it.
pub type RegOp = Op<RegisterIn<u64>, RegisterOut<u64>>;

/// Every op of every client: ((kind, register key), op).
pub type History = Arc<Mutex<Vec<((Kind, String), RegOp)>>>;

/// Ms since `t0`, the clock every op is stamped with.
pub fn ms(t0: Instant) -> u64 {
    t0.elapsed().as_millis() as u64
}

/// A session's answer to a read, as the register's output (`None`: it
/// failed, and tells nothing).
fn read_answer(a: &str) -> Option<Option<u64>> {
    if a == "absent" {
        return Some(None);
    }
    a.strip_prefix("value ")
        .and_then(|v| v.trim().parse().ok())
        .map(Some)
}

/// One client's work: on registers `KIND-gGEN-rI` (I below `registers`,
/// GEN the current `gen`) it writes unique values (client `id`'s) and
/// reads, about half each, until `stop`.
pub struct Client {
    /// What it works on.
    pub kind: Kind,
    /// Its id, the high part of every value it writes (unique values).
    pub id: u64,
    /// How many registers of its kind it picks from.
    pub registers: u64,
    /// The registers' generation (renamed after each fault).
    pub gen: Arc<AtomicU64>,
    /// Set to stop it.
    pub stop: Arc<AtomicBool>,
    /// Where it records its ops.
    pub history: History,
    /// The clock its ops are stamped with.
    pub t0: Instant,
    /// Its generator's seed.
    pub seed: u64,
}

impl Client {
    /// Run on session `s` until stopped: (ops answered, ops failed).
    pub fn run(self, s: &mut Session) -> (u64, u64) {
        let mut rng = Rng::new(self.seed);
        let (mut done, mut failed) = (0, 0);
        let mut n = 0;
        while !self.stop.load(Ordering::Relaxed) {
            let key = format!(
                "{}-g{}-r{}",
                self.kind.name(),
                self.gen.load(Ordering::Relaxed),
                rng.below(self.registers)
            );
            let call = ms(self.t0);
            let op = if rng.chance(500) {
                n += 1;
                let value = self.id * 1_000_000_000 + n;
                let answer = s.ask(&self.kind.write(&key, value));
                let ok = answer == "ok";
                if !ok {
                    failed += 1;
                    eprintln!(
                        "{} write of {key} at {call} ms failed: {answer}",
                        self.kind.name()
                    );
                }
                Op {
                    input: RegisterIn::Write(value),
                    output: ok.then_some(RegisterOut::Written),
                    call,
                    ret: ms(self.t0),
                }
            } else {
                let answer = s.ask(&self.kind.read(&key));
                let Some(v) = read_answer(&answer) else {
                    failed += 1;
                    eprintln!(
                        "{} read of {key} at {call} ms failed: {answer}",
                        self.kind.name()
                    );
                    continue;
                };
                Op {
                    input: RegisterIn::Read,
                    output: Some(RegisterOut::Read(v)),
                    call,
                    ret: ms(self.t0),
                }
            };
            done += 1;
            self.history.lock().unwrap().push(((self.kind, key), op));
        }
        (done, failed)
    }
}

/// Clients on the client host, one per kind of `kinds` (ids from 1,
/// two registers each), working from their start until stopped.
pub struct Workload {
    stop: Arc<AtomicBool>,
    history: History,
    t0: Instant,
    workers: Vec<std::thread::JoinHandle<((u64, u64), Session)>>,
}

impl Workload {
    /// Start the clients.
    pub fn start(lab: &mut Lab, kinds: &[Kind]) -> Workload {
        let (t0, stop, history) = (
            Instant::now(),
            Arc::new(AtomicBool::new(false)),
            History::default(),
        );
        let mut workers = Vec::new();
        for (i, &kind) in kinds.iter().enumerate() {
            let mut s = lab.client_on(lab.client_host(), kind.pool());
            let client = Client {
                kind,
                id: i as u64 + 1,
                registers: 2,
                gen: Arc::default(),
                stop: stop.clone(),
                history: history.clone(),
                t0,
                seed: i as u64,
            };
            workers.push(std::thread::spawn(move || (client.run(&mut s), s)));
        }
        Workload {
            stop,
            history,
            t0,
            workers,
        }
    }

    /// Stop the clients: ops answered, ops failed, their sessions.
    pub fn stop(&mut self) -> (u64, u64, Vec<Session>) {
        self.stop.store(true, Ordering::Relaxed);
        let (mut done, mut failed, mut sessions) = (0, 0, Vec::new());
        for w in self.workers.drain(..) {
            let ((d, f), s) = w.join().expect("a client thread");
            done += d;
            failed += f;
            sessions.push(s);
        }
        (done, failed, sessions)
    }

    /// Read every register once more and check the histories: panics
    /// unless more than 100 ops were answered (`done`), every history is
    /// linearizable and no acknowledged write is lost.
    pub fn check(&mut self, lab: &mut Lab, done: u64, failed: u64) {
        let mut history = std::mem::take(&mut *self.history.lock().unwrap());
        let lost = final_reads(lab, &mut history, self.t0);
        let checked = check(history);
        eprintln!(
            "{done} ops answered, {failed} failed; {} histories, {} undecided",
            checked.histories, checked.undecided
        );
        assert!(done > 100, "only {done} ops answered");
        assert!(
            checked.bad.is_empty(),
            "not linearizable: {:?}",
            checked.bad
        );
        assert_eq!(lost, 0, "acknowledged writes lost");
    }
}

/// Read every register of `history` once more through fresh sessions
/// from the client host, after everything, and add the reads to it: an
/// acknowledged write that is gone shows here. Returns how many
/// registers read absent after an acknowledged write.
pub fn final_reads(lab: &mut Lab, history: &mut Vec<((Kind, String), RegOp)>, t0: Instant) -> u64 {
    let keys: Vec<(Kind, String)> = {
        let mut k: Vec<_> = history.iter().map(|(k, _)| k.clone()).collect();
        k.sort();
        k.dedup();
        k
    };
    let mut sessions: BTreeMap<Kind, Session> = BTreeMap::new();
    let mut lost = 0;
    for (kind, key) in &keys {
        let s = match sessions.entry(*kind) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(lab.client_on(lab.client_host(), kind.pool()))
            }
        };
        let call = ms(t0);
        let answer = s.ask(&kind.read(key));
        let v = read_answer(&answer)
            .unwrap_or_else(|| panic!("the final read of {key} failed: {answer}"));
        let acked = history
            .iter()
            .any(|((k, r), op)| k == kind && r == key && op.output == Some(RegisterOut::Written));
        if v.is_none() && acked {
            lost += 1;
            eprintln!("lost: {key} reads absent after acknowledged writes");
        }
        history.push((
            (*kind, key.clone()),
            Op {
                input: RegisterIn::Read,
                output: Some(RegisterOut::Read(v)),
                call,
                ret: ms(t0),
            },
        ));
    }
    lost
}

/// What checking the histories found.
pub struct Checked {
    /// Registers checked.
    pub histories: usize,
    /// Registers whose histories are not linearizable.
    pub bad: Vec<String>,
    /// Registers whose check ran out of its budget.
    pub undecided: usize,
}

/// Check each register's history on its own (P-compositionality).
pub fn check(history: Vec<((Kind, String), RegOp)>) -> Checked {
    let mut by_key: BTreeMap<(Kind, String), Vec<RegOp>> = BTreeMap::new();
    for (k, op) in history {
        by_key.entry(k).or_default().push(op);
    }
    let model = Register::<u64>::new();
    let (mut bad, mut undecided) = (Vec::new(), 0);
    for (k, ops) in &by_key {
        match lincheck::check(&model, ops, CHECK_BUDGET) {
            Some(true) => {}
            Some(false) => bad.push(k.1.clone()),
            None => undecided += 1,
        }
    }
    Checked {
        histories: by_key.len(),
        bad,
        undecided,
    }
}
