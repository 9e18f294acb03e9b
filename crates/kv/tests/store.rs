//! The key-value store over an in-process pool: each object op runs
//! through the OSD's own op executor and object classes on a MemStore, all
//! or nothing, as a PG's primary runs it, on a simulated clock. Random ops
//! against a `BTreeMap` model; splits and rebalances with clients killed
//! at every step; many clients at once, every read checked against the
//! acknowledged writes; and the refusals a user meets.

use loligo_kv::{KvError, KvStore, Objects};
use loligo_osd::exec::{execute, obj_state, validate};
use loligo_store::{CollectionId, MemStore, ObjectId, ObjectStore, Transaction};
use loligo_types::ops::{SubOp, SubResult};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::task::Poll;

/// One PG's worth of objects, ops applied one at a time, on a clock that
/// moves 1 ms per op and by every pause. With `shuffle`, each op first
/// yields a seeded number of times, so concurrent clients interleave
/// differently per seed (and the same way for a seed).
struct MemObjects {
    s: Mutex<MemStore>,
    clock: AtomicU64,
    shuffle: Mutex<Option<Rng>>,
    /// Nodes made by splits and rebalances, and marks removed (by
    /// rollbacks and orphan clearing): how much of the protocol a run met.
    made: AtomicU64,
    unmarked: AtomicU64,
}

fn coll() -> CollectionId {
    CollectionId::pg(1, 0)
}

impl MemObjects {
    fn new() -> MemObjects {
        let s = MemStore::new();
        let mut t = Transaction::new();
        t.create_collection(coll());
        s.apply(t).unwrap();
        MemObjects {
            s: Mutex::new(s),
            clock: AtomicU64::new(1_000_000),
            shuffle: Mutex::new(None),
            made: AtomicU64::new(0),
            unmarked: AtomicU64::new(0),
        }
    }

    fn shuffled(seed: u64) -> MemObjects {
        let m = MemObjects::new();
        *m.shuffle.lock().unwrap() = Some(Rng::new(seed));
        m
    }

    fn names(&self) -> BTreeSet<String> {
        let s = self.s.lock().unwrap();
        s.list(coll(), None, 100_000)
            .unwrap()
            .0
            .into_iter()
            .map(|o| o.name)
            .collect()
    }

    fn advance(&self, ms: u64) {
        self.clock.fetch_add(ms, Ordering::Relaxed);
    }

    fn apply(&self, name: &str, ops: Vec<SubOp>) -> loligo_kv::Result<Vec<SubResult>> {
        self.advance(1);
        let s = self.s.lock().unwrap();
        validate(name, &ops).map_err(KvError::Op)?;
        let o = ObjectId::new(7, name);
        let st = obj_state(&*s, coll(), &o).map_err(KvError::Op)?;
        let out = execute(&*s, coll(), &o, &st, &ops, 1 << 30).map_err(KvError::Op)?;
        s.apply(out.txn).unwrap();
        if name.contains(".x.") && ops.first() == Some(&SubOp::AssertNotExists) {
            self.made.fetch_add(1, Ordering::Relaxed);
        }
        if ops
            .iter()
            .any(|o| matches!(o, SubOp::RmXattr(n) if n == "kv.unwritable"))
        {
            self.unmarked.fetch_add(1, Ordering::Relaxed);
        }
        Ok(out.results)
    }

    async fn interleave(&self) {
        let n = match self.shuffle.lock().unwrap().as_mut() {
            Some(r) => r.below(3),
            None => 0,
        };
        for _ in 0..n {
            tokio::task::yield_now().await;
        }
    }
}

impl Objects for MemObjects {
    async fn operate(&self, name: &str, ops: Vec<SubOp>) -> loligo_kv::Result<Vec<SubResult>> {
        self.interleave().await;
        self.apply(name, ops)
    }

    fn now_ms(&self) -> u64 {
        self.clock.load(Ordering::Relaxed)
    }

    async fn pause(&self, ms: u64) {
        self.advance(ms);
        tokio::task::yield_now().await;
    }
}

/// A client process that dies after `left` more ops: its last op is
/// either not sent or applied with the answer lost (`applies`); every op
/// after fails. Or, `revives`, a client whose op meets a network fault
/// there (a timeout, applied or not) and whose later ops all go through.
struct Mortal<'a> {
    objs: &'a MemObjects,
    left: AtomicU64,
    applies: bool,
    revives: bool,
}

const KILLED: &str = "killed";
const TIMED_OUT: &str = "timed out";

impl<'a> Mortal<'a> {
    fn new(objs: &'a MemObjects, left: u64, applies: bool) -> Mortal<'a> {
        Mortal {
            objs,
            left: AtomicU64::new(left),
            applies,
            revives: false,
        }
    }

    fn timing_out(objs: &'a MemObjects, left: u64, applies: bool) -> Mortal<'a> {
        Mortal {
            revives: true,
            ..Mortal::new(objs, left, applies)
        }
    }
}

impl Objects for Mortal<'_> {
    async fn operate(&self, name: &str, ops: Vec<SubOp>) -> loligo_kv::Result<Vec<SubResult>> {
        self.objs.interleave().await;
        let left = self.left.load(Ordering::Relaxed);
        if left == 0 {
            if self.revives {
                return self.objs.apply(name, ops);
            }
            return Err(KvError::Client(KILLED.into()));
        }
        self.left.store(left - 1, Ordering::Relaxed);
        if left == 1 {
            if self.applies {
                let _ = self.objs.apply(name, ops);
            }
            let why = if self.revives { TIMED_OUT } else { KILLED };
            return Err(KvError::Client(why.into()));
        }
        self.objs.apply(name, ops)
    }

    fn now_ms(&self) -> u64 {
        self.objs.now_ms()
    }

    async fn pause(&self, ms: u64) {
        self.objs.pause(ms).await
    }
}

/// A slow client: each of its ops takes `ms` of the clock.
struct Slow<'a> {
    objs: &'a MemObjects,
    ms: u64,
}

impl Objects for Slow<'_> {
    async fn operate(&self, name: &str, ops: Vec<SubOp>) -> loligo_kv::Result<Vec<SubResult>> {
        self.objs.advance(self.ms);
        self.objs.operate(name, ops).await
    }

    fn now_ms(&self) -> u64 {
        self.objs.now_ms()
    }

    async fn pause(&self, ms: u64) {
        self.objs.pause(ms).await
    }
}

/// A client whose splits take longer than the timeout (each op a quarter
/// of it) keeps them alive by renewing its intents, while another client
/// cleans the store all along, rolling back any intent it finds older than
/// the timeout: it finds none, and every op of the slow client succeeds.
#[tokio::test]
async fn a_slow_replacement_is_renewed_not_rolled_back() {
    const TIMEOUT: u64 = 900;
    let objs = MemObjects::shuffled(9);
    let slow = Slow {
        objs: &objs,
        ms: TIMEOUT / 4,
    };
    renewed_while_a_cleaner_cleans(&slow, &objs, TIMEOUT).await;
}

/// 40 writes through `writer` (over `objs`) while another client cleans
/// all along, both with `timeout`: the cleaner rolls back none of the
/// writer's replacements, every write succeeds, and the store ends sound.
async fn renewed_while_a_cleaner_cleans<O: Objects>(writer: &O, objs: &MemObjects, timeout: u64) {
    KvStore::create(objs, "r", 2).await.unwrap();
    let a = KvStore::open(writer, "r")
        .await
        .unwrap()
        .with_timeout(timeout);
    let cleaner = KvStore::open(objs, "r")
        .await
        .unwrap()
        .with_timeout(timeout);
    let done = std::sync::atomic::AtomicBool::new(false);
    let (a, cleaner, done, o) = (&a, &cleaner, &done, objs);
    let writes = async move {
        for i in 0..40u32 {
            let key = format!("k{:02}", (i * 7) % 30);
            a.put(key.as_bytes(), b"a")
                .await
                .unwrap_or_else(|e| panic!("op {i}: {e}"));
        }
        done.store(true, Ordering::Relaxed);
        0
    };
    let cleans = async move {
        let mut rolled_back = 0;
        while !done.load(Ordering::Relaxed) {
            rolled_back += cleaner.clean().await.unwrap().rolled_back;
            o.pause(5).await;
        }
        rolled_back
    };
    let writes: Pin<Box<dyn Future<Output = u64>>> = Box::pin(writes);
    let cleans: Pin<Box<dyn Future<Output = u64>>> = Box::pin(cleans);
    let r = join_all(vec![writes, cleans]).await;
    assert_eq!(r[1], 0, "the cleaner rolled back live replacements");
    assert!(objs.made.load(Ordering::Relaxed) >= 10);
    sound(cleaner, objs, "r", timeout).await;
}

/// A slow client whose clock is `behind_ms` behind everyone else's.
struct Behind<'a> {
    slow: Slow<'a>,
    behind_ms: u64,
}

impl Objects for Behind<'_> {
    async fn operate(&self, name: &str, ops: Vec<SubOp>) -> loligo_kv::Result<Vec<SubResult>> {
        self.slow.operate(name, ops).await
    }

    fn now_ms(&self) -> u64 {
        self.slow.now_ms() - self.behind_ms
    }

    async fn pause(&self, ms: u64) {
        self.slow.pause(ms).await
    }
}

/// As `a_slow_replacement_is_renewed_not_rolled_back`, with the slow
/// client's clock 15 s behind the cleaner's: clocks that disagree must
/// not make live replacements look old (each client judges an intent's
/// age by how long it has itself seen its stamp unchanged).
#[tokio::test]
async fn a_client_whose_clock_is_behind_keeps_its_replacements() {
    const TIMEOUT: u64 = 900;
    let objs = MemObjects::shuffled(11);
    let behind = Behind {
        slow: Slow {
            objs: &objs,
            ms: TIMEOUT / 4,
        },
        behind_ms: 15_000,
    };
    renewed_while_a_cleaner_cleans(&behind, &objs, TIMEOUT).await;
}

fn killed<T: std::fmt::Debug>(r: &loligo_kv::Result<T>) -> bool {
    matches!(r, Err(KvError::Client(m)) if m == KILLED)
}

struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Poll every future in turn until all are done (a deterministic
/// interleaving: the order is fixed, each yields where it awaits).
async fn join_all<F: Future>(futs: Vec<F>) -> Vec<F::Output> {
    let mut futs: Vec<Pin<Box<F>>> = futs.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in futs.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *o = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

/// After `clean` (with the clock past the timeout): the tree's invariants
/// hold and the pool holds the index, the nodes the index names and
/// nothing else.
async fn sound<O: Objects>(kv: &KvStore<O>, objs: &MemObjects, name: &str, timeout: u64) {
    // Rollbacks leave tombs for a timeout (for slow owners' late
    // creates): clean twice, a timeout apart.
    for _ in 0..2 {
        objs.advance(3 * timeout);
        kv.clean().await.unwrap();
    }
    let c = kv.check().await.unwrap();
    assert!(c.problems.is_empty(), "{:#?}", c.problems);
    assert!(objs.names().contains(&format!("{name}.index")));
    let all = kv.scan(b"", None, usize::MAX).await.unwrap();
    assert_eq!(all.len() as u64, c.entries);
    let have = objs.names();
    assert_eq!(
        have.len() as u64,
        c.nodes + 1,
        "orphaned objects: {have:?} for {} nodes",
        c.nodes
    );
}

#[tokio::test]
async fn random_ops_match_a_model_through_splits_and_rebalances() {
    for seed in 1..=20u64 {
        let objs = MemObjects::new();
        let k = 2 + seed % 4;
        // Odd seeds write nodes with plain ops instead of `kv.write`;
        // every third seed caches at most a few index entries, so lookups
        // meet evicted neighbours (and find a later node) all the time.
        let kv = KvStore::create(&objs, "t", k)
            .await
            .unwrap()
            .with_plain_writes(seed % 2 == 1);
        let kv = match seed % 3 {
            0 => kv.with_cache(1 + (seed as usize / 3) % 4),
            _ => kv,
        };
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut rng = Rng::new(seed);
        let mut most_nodes = 0;
        for i in 0..500 {
            let key = format!("key{:03}", rng.below(60)).into_bytes();
            match rng.below(5) {
                0 => assert_eq!(
                    kv.get(&key).await.unwrap(),
                    model.get(&key).cloned(),
                    "seed {seed} op {i}"
                ),
                1 => {
                    let v = format!("v{seed}.{i}").into_bytes();
                    kv.put(&key, &v).await.unwrap();
                    model.insert(key, v);
                }
                2 => assert_eq!(kv.remove(&key).await.unwrap(), model.remove(&key).is_some()),
                3 if rng.below(2) == 0 => {
                    // A batch, keys repeated: the last value wins.
                    let batch: Vec<(Vec<u8>, Vec<u8>)> = (0..1 + rng.below(12))
                        .map(|j| {
                            let k = format!("key{:03}", rng.below(60)).into_bytes();
                            (k, format!("b{seed}.{i}.{j}").into_bytes())
                        })
                        .collect();
                    kv.put_many(batch.clone()).await.unwrap();
                    model.extend(batch);
                }
                3 => {
                    let v = format!("i{seed}.{i}").into_bytes();
                    let fresh = !model.contains_key(&key);
                    assert_eq!(kv.insert(&key, &v).await.unwrap(), fresh);
                    if fresh {
                        model.insert(key, v);
                    }
                }
                _ => {
                    let a = format!("key{:03}", rng.below(70)).into_bytes();
                    let b = format!("key{:03}", rng.below(70)).into_bytes();
                    let limit = 1 + rng.below(40) as usize;
                    let end = (rng.below(3) > 0).then_some(b.as_slice());
                    let want: Vec<(Vec<u8>, Vec<u8>)> = model
                        .range(a.clone()..)
                        .take_while(|(k, _)| end.is_none_or(|e| k.as_slice() < e))
                        .take(limit)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    assert_eq!(
                        kv.scan(&a, end, limit).await.unwrap(),
                        want,
                        "seed {seed} op {i}"
                    );
                }
            }
            if i % 50 == 49 {
                let c = kv.check().await.unwrap();
                assert!(
                    c.problems.is_empty(),
                    "seed {seed} op {i}: {:#?}",
                    c.problems
                );
                assert_eq!(c.entries, model.len() as u64);
                most_nodes = most_nodes.max(c.nodes);
            }
        }
        assert!(most_nodes >= 4, "seed {seed}: only {most_nodes} nodes");
        let st = kv.stats().await.unwrap();
        assert_eq!((st.entries, st.depth), (model.len() as u64, 2));
        // Empty it: rebalances merge the nodes back to one.
        let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
        for key in keys {
            assert!(kv.remove(&key).await.unwrap());
        }
        let c = kv.check().await.unwrap();
        assert!(c.problems.is_empty(), "{:#?}", c.problems);
        assert_eq!((c.nodes, c.entries), (1, 0));
        sound(&kv, &objs, "t", loligo_kv::DEFAULT_TIMEOUT_MS).await;
    }
}

/// The writes of the runs that kill a client or time its op out, by key:
/// (key, value or removal).
type Script = Vec<(Vec<u8>, Option<Vec<u8>>)>;

fn kill_script() -> Script {
    let mut rng = Rng::new(5);
    (0..100)
        .map(|i| {
            let key = format!("k{:02}", rng.below(24)).into_bytes();
            let v = (rng.below(3) > 0).then(|| format!("v{i}").into_bytes());
            (key, v)
        })
        .collect()
}

/// How many object ops `script` takes without a fault (enough to meet
/// splits and rebalances).
async fn script_ops(script: &Script, timeout: u64) -> u64 {
    let objs = MemObjects::new();
    KvStore::create(&objs, "s", 2).await.unwrap();
    let before = objs.clock.load(Ordering::Relaxed);
    let kv = KvStore::open(&objs, "s")
        .await
        .unwrap()
        .with_timeout(timeout);
    for (k, v) in script {
        match v {
            Some(v) => kv.put(k, v).await.unwrap(),
            None => drop(kv.remove(k).await.unwrap()),
        }
    }
    let total = objs.clock.load(Ordering::Relaxed) - before;
    assert!(total > 150, "{total} ops");
    total
}

/// One client is killed at its n-th op of a run of writes that splits and
/// rebalances nodes, for every n, its last op applied or not; another
/// client then carries on with the same keys (waiting out or rolling back
/// what the dead one left) and cleans up. Every acknowledged write is
/// there, the unacknowledged one is all there or not at all, and nothing
/// is left behind.
#[tokio::test]
async fn a_client_killed_at_any_step_leaves_a_sound_store() {
    const TIMEOUT: u64 = 500;
    let script = kill_script();
    let total = script_ops(&script, TIMEOUT).await;
    eprintln!("killing the client at each of its {total} ops, its last applied or not");
    for n in 1..=total {
        for applies in [false, true] {
            let objs = MemObjects::new();
            KvStore::create(&objs, "s", 2).await.unwrap();
            let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            // The op that was under way when the client died.
            let mut pending: Option<(Vec<u8>, Option<Vec<u8>>)> = None;
            let dying = KvStore::open(Mortal::new(&objs, n + 1, applies), "s")
                .await
                .unwrap()
                .with_timeout(TIMEOUT);
            for (k, v) in &script {
                let r = match v {
                    Some(v) => dying.put(k, v).await,
                    None => dying.remove(k).await.map(|_| ()),
                };
                if killed(&r) {
                    pending = Some((k.clone(), v.clone()));
                    break;
                }
                r.unwrap();
                match v {
                    Some(v) => model.insert(k.clone(), v.clone()),
                    None => model.remove(k),
                };
            }
            let kv = KvStore::open(&objs, "s")
                .await
                .unwrap()
                .with_timeout(TIMEOUT);
            // The interrupted op took effect or not: see which, by its key.
            if let Some((k, v)) = pending {
                let now = kv.get(&k).await.unwrap();
                if now != model.get(&k).cloned() {
                    assert_eq!(now, v, "n {n} applies {applies}: key {k:?}");
                    match v {
                        Some(v) => model.insert(k, v),
                        None => model.remove(&k),
                    };
                }
            }
            // Carry on: the same run again from another client.
            for (k, v) in &script {
                match v {
                    Some(v) => {
                        kv.put(k, v).await.unwrap();
                        model.insert(k.clone(), v.clone());
                    }
                    None => assert_eq!(
                        kv.remove(k).await.unwrap(),
                        model.remove(k).is_some(),
                        "n {n} applies {applies}"
                    ),
                }
            }
            let all = kv.scan(b"", None, usize::MAX).await.unwrap();
            let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
            assert_eq!(all, want, "n {n} applies {applies}");
            sound(&kv, &objs, "s", TIMEOUT).await;
        }
    }
}

/// One client's op meets a timeout at its n-th object op of a run of
/// writes that splits and rebalances nodes, for every n, the op applied
/// or not, and the client goes on with the run. Every acknowledged write
/// is there, the one that failed is all there or not at all, and after a
/// clean nothing is left behind: a client that gives up on a replacement
/// whose commit it could not confirm must not undo it. With a timeout of
/// a few ops, replacements renew their intents at nearly every step, so
/// renewals meet the timeouts too.
#[tokio::test]
async fn a_client_whose_op_times_out_at_any_step_goes_on_soundly() {
    let script = kill_script();
    for timeout in [500, 8] {
        let total = script_ops(&script, timeout).await;
        eprintln!("timeout {timeout} ms: timing out the client's op at each of its {total} ops");
        let (mut fired, mut failed) = (0, 0);
        for n in 1..=total {
            for applies in [false, true] {
                let (f, e) = time_out_one_op(&script, timeout, n, applies).await;
                fired += u64::from(f);
                failed += u64::from(e);
            }
        }
        // (A fault after a commit, in its cleanup, fails no write.)
        assert!(
            fired > total && failed > total / 2,
            "{fired} fired, {failed} failed"
        );
    }
}

/// One run of [`a_client_whose_op_times_out_at_any_step_goes_on_soundly`]:
/// whether the fault fired, and whether a write met it.
async fn time_out_one_op(script: &Script, timeout: u64, n: u64, applies: bool) -> (bool, bool) {
    let objs = MemObjects::new();
    KvStore::create(&objs, "s", 2).await.unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let flaky = Mortal::timing_out(&objs, n + 1, applies);
    let kv = KvStore::open(&flaky, "s")
        .await
        .unwrap()
        .with_timeout(timeout);
    let mut failed = false;
    let at = format!("timeout {timeout} n {n} applies {applies}");
    for (k, v) in script {
        let r = match v {
            Some(v) => kv.put(k, v).await,
            None => kv.remove(k).await.map(|_| ()),
        };
        match r {
            Ok(()) => {}
            Err(KvError::Client(m)) if m == TIMED_OUT => {
                failed = true;
                // It took effect or not: see which, by its key.
                let now = kv.get(k).await.unwrap();
                if now == model.get(k).cloned() {
                    continue;
                }
                assert_eq!(&now, v, "{at}: key {k:?}");
            }
            Err(e) => panic!("{at}: {e}"),
        }
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
    // (A run that took fewer ops never met the fault.)
    let fired = flaky.left.swap(0, Ordering::Relaxed) == 0;
    let all = kv.scan(b"", None, usize::MAX).await.unwrap();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
    assert_eq!(all, want, "{at}");
    sound(&kv, &objs, "s", timeout).await;
    (fired, failed)
}

/// An event of the concurrent run: a key's write (value, `None` for a
/// removal) or read, and when it was invoked and answered (`None`: the
/// client died; it may have happened any time after it was invoked).
#[derive(Clone, Debug)]
struct Event {
    key: Vec<u8>,
    write: bool,
    value: Option<Vec<u8>>,
    start: u64,
    end: Option<u64>,
}

/// Each read saw the value of a write (or the initial absence) invoked
/// before the read was answered, and not one that a later write had
/// already replaced before the read began.
fn linearizable_reads(events: &[Event]) {
    let mut by_key: BTreeMap<&[u8], Vec<&Event>> = BTreeMap::new();
    for e in events {
        by_key.entry(&e.key).or_default().push(e);
    }
    for (key, evs) in by_key {
        let writes: Vec<&Event> = evs.iter().copied().filter(|e| e.write).collect();
        for r in evs.iter().filter(|e| !e.write) {
            let r_end = r.end.unwrap_or(u64::MAX);
            // Candidate writes that produced what the read saw.
            let initial = Event {
                key: key.to_vec(),
                write: true,
                value: None,
                start: 0,
                end: Some(0),
            };
            let sources: Vec<&Event> = std::iter::once(&initial)
                .chain(writes.iter().copied())
                .filter(|w| w.value == r.value && w.start < r_end)
                .collect();
            let ok = sources.iter().any(|w| {
                // No write began after `w` ended and ended before `r` began.
                let w_end = w.end.unwrap_or(u64::MAX);
                !writes
                    .iter()
                    .any(|w2| w2.start > w_end && w2.end.is_some_and(|e| e < r.start))
            });
            assert!(
                ok,
                "key {:?}: read {:?} over [{}, {r_end}] is not linearizable; writes {writes:#?}",
                String::from_utf8_lossy(key),
                r.value
                    .as_ref()
                    .map(|v| String::from_utf8_lossy(v).into_owned()),
                r.start
            );
        }
    }
}

/// Many clients at once, each killed now and then (its op unanswered,
/// applied or not) and replaced, or meeting a timeout (the same) and
/// going on: every read is linearizable against the
/// writes, the final contents are the result of some order of them, and
/// after cleanup the tree's invariants hold and nothing is orphaned.
#[tokio::test]
async fn concurrent_clients_with_deaths_stay_linearizable() {
    const TIMEOUT: u64 = 2_000;
    let seeds: u64 = std::env::var("LOLIGO_KV_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    // LOLIGO_KV_SEED replays one seed.
    let only: Option<u64> = std::env::var("LOLIGO_KV_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let seeds = if only.is_some() { 1 } else { seeds };
    let (mut kills, mut timed_out, mut made, mut unmarked, mut reads, mut gave_up) =
        (0, 0, 0, 0, 0, 0);
    for seed in only.map_or(1..=seeds, |s| s..=s) {
        let objs = MemObjects::shuffled(seed);
        let k = 2 + seed % 3;
        KvStore::create(&objs, "c", k).await.unwrap();
        let tick = AtomicU64::new(0);
        let deaths = AtomicU64::new(0);
        let busy = AtomicU64::new(0);
        let timeouts = AtomicU64::new(0);
        let events: Mutex<Vec<Event>> = Mutex::new(Vec::new());
        let workers: Vec<_> = (0..4u64)
            .map(|w| {
                let (objs, tick, events) = (&objs, &tick, &events);
                let (deaths, busy, timeouts) = (&deaths, &busy, &timeouts);
                async move {
                    let mut rng = Rng::new(seed * 100 + w);
                    let mut ops = 0;
                    while ops < 80 {
                        let left = match rng.below(3) {
                            0 => u64::MAX,
                            _ => 1 + rng.below(60),
                        };
                        // Half the clients meet a timeout instead of
                        // dying, and go on.
                        let applies = rng.below(2) == 0;
                        let mortal = match rng.below(2) {
                            0 => Mortal::new(objs, left, applies),
                            _ => Mortal::timing_out(objs, left, applies),
                        };
                        let kv = match KvStore::open(&mortal, "c").await {
                            // Some clients write with plain ops.
                            Ok(kv) => kv.with_timeout(TIMEOUT).with_plain_writes(w == 3),
                            Err(KvError::Client(m)) if m == KILLED || m == TIMED_OUT => continue,
                            Err(e) => panic!("{e}"),
                        };
                        while ops < 80 {
                            ops += 1;
                            let key = format!("k{:02}", rng.below(30)).into_bytes();
                            let start = tick.fetch_add(1, Ordering::Relaxed);
                            let value = format!("w{w}.{ops}").into_bytes();
                            let (write, value, r) = match rng.below(4) {
                                0 => {
                                    let r = kv.get(&key).await;
                                    let v = r.as_ref().ok().cloned().flatten();
                                    (false, v, r.map(|_| ()))
                                }
                                1 => (true, Some(value.clone()), kv.put(&key, &value).await),
                                2 => match kv.remove(&key).await {
                                    // A removal of an absent key read it absent.
                                    Ok(was) => (was, None, Ok(())),
                                    Err(e) => (true, None, Err(e)),
                                },
                                _ => match kv.insert(&key, &value).await {
                                    Ok(true) => (true, Some(value.clone()), Ok(())),
                                    // Saw it present: a read of an unknown value.
                                    Ok(false) => continue,
                                    Err(e) => (true, Some(value.clone()), Err(e)),
                                },
                            };
                            // Gave up waiting on a node whose replacement
                            // kept dying: nothing of the op was applied.
                            if let Err(KvError::Busy(_)) = &r {
                                busy.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                            let timed_out = matches!(&r, Err(KvError::Client(m)) if m == TIMED_OUT);
                            let dead = killed(&r);
                            if let Err(e) = &r {
                                assert!(dead || timed_out, "seed {seed} worker {w}: {e}");
                            }
                            if timed_out {
                                timeouts.fetch_add(1, Ordering::Relaxed);
                                if write {
                                    events.lock().unwrap().push(Event {
                                        key,
                                        write,
                                        value,
                                        start,
                                        end: None,
                                    });
                                }
                                continue;
                            }
                            if !dead || write {
                                let end = (!dead).then(|| tick.fetch_add(1, Ordering::Relaxed));
                                events.lock().unwrap().push(Event {
                                    key,
                                    write,
                                    value,
                                    start,
                                    end,
                                });
                            }
                            if dead {
                                deaths.fetch_add(1, Ordering::Relaxed);
                                break;
                            }
                        }
                    }
                }
            })
            .collect();
        join_all(workers).await;
        let kv = KvStore::open(&objs, "c")
            .await
            .unwrap()
            .with_timeout(TIMEOUT);
        sound(&kv, &objs, "c", TIMEOUT).await;
        // The final contents, read as reads at the end.
        let mut events = events.into_inner().unwrap();
        let keys: BTreeSet<Vec<u8>> = events.iter().map(|e| e.key.clone()).collect();
        for key in keys {
            let start = tick.fetch_add(1, Ordering::Relaxed);
            let value = kv.get(&key).await.unwrap();
            let end = Some(tick.fetch_add(1, Ordering::Relaxed));
            events.push(Event {
                key,
                write: false,
                value,
                start,
                end,
            });
        }
        linearizable_reads(&events);
        kills += deaths.load(Ordering::Relaxed);
        timed_out += timeouts.load(Ordering::Relaxed);
        gave_up += busy.load(Ordering::Relaxed);
        made += objs.made.load(Ordering::Relaxed);
        unmarked += objs.unmarked.load(Ordering::Relaxed);
        reads += events.iter().filter(|e| !e.write).count();
    }
    eprintln!(
        "{seeds} seeds: {kills} clients killed, {timed_out} ops timed out, {made} nodes made by splits and \
         rebalances, {unmarked} marks removed, {reads} reads checked, {gave_up} ops \
         gave up waiting"
    );
    // Giving up takes a chain of dying clients on one node: rare.
    assert!(gave_up * 200 <= seeds * 320, "{gave_up} ops gave up");
    if only.is_none() {
        assert!(
            kills > seeds
                && timed_out > seeds
                && made > 10 * seeds
                && unmarked > 0
                && reads > 50 * seeds as usize
        );
    }
}

#[tokio::test]
async fn refusals_are_clear_and_change_nothing() {
    let objs = MemObjects::new();
    let kv = KvStore::create(&objs, "s", 2).await.unwrap();
    assert!(matches!(
        KvStore::create(&objs, "s", 2).await,
        Err(KvError::Exists(_))
    ));
    // The failed create left no orphan node behind.
    assert_eq!(objs.names().len(), 2, "{:?}", objs.names());
    assert!(matches!(
        KvStore::open(&objs, "nope").await,
        Err(KvError::NoStore(_))
    ));
    assert!(matches!(
        KvStore::create(&objs, "x", 1).await,
        Err(KvError::Invalid(_))
    ));
    let again = KvStore::open(&objs, "s").await.unwrap();
    assert_eq!(again.k(), 2);
    assert!(matches!(kv.put(b"", b"v").await, Err(KvError::Invalid(_))));
    assert!(matches!(
        kv.put(&[7; 1025], b"v").await,
        Err(KvError::Invalid(_))
    ));
    assert!(matches!(kv.get(&[7; 1025]).await, Err(KvError::Invalid(_))));
    assert!(matches!(
        kv.put(b"a", &vec![0; loligo_kv::VALUE_MAX + 1]).await,
        Err(KvError::Invalid(_))
    ));
    assert!(!kv.remove(b"zz").await.unwrap());
    assert_eq!(kv.stats().await.unwrap().entries, 0);
    // A store with a smaller value bound keeps it across opens.
    assert!(matches!(
        KvStore::create_with(&objs, "v", 2, 0).await,
        Err(KvError::Invalid(_))
    ));
    assert!(matches!(
        KvStore::create_with(&objs, "v", 2, loligo_kv::VALUE_MAX + 1).await,
        Err(KvError::Invalid(_))
    ));
    KvStore::create_with(&objs, "v", 2, 10).await.unwrap();
    let v = KvStore::open(&objs, "v").await.unwrap();
    assert_eq!(v.value_max(), 10);
    v.put(b"a", &[1; 10]).await.unwrap();
    assert!(matches!(
        v.put(b"b", &[1; 11]).await,
        Err(KvError::Invalid(_))
    ));
    assert!(matches!(
        v.put_many(vec![(b"c".to_vec(), vec![1]), (b"d".to_vec(), vec![1; 11])])
            .await,
        Err(KvError::Invalid(_))
    ));
    assert_eq!(
        v.scan(b"", None, 10).await.unwrap().len(),
        1,
        "nothing of a refused batch"
    );
    assert_eq!(again.value_max(), loligo_kv::VALUE_MAX);
}

/// Keys land in the node whose range holds them, a client with a stale
/// view of the index is refused by the node and re-reads, and the check
/// finds what is broken by hand.
#[tokio::test]
async fn nodes_hold_their_ranges_and_the_check_finds_damage() {
    use loligo_types::cls::NodeRange;
    let objs = MemObjects::new();
    let kv = KvStore::create(&objs, "m", 2).await.unwrap();
    // A second client reads the index now (one node) and keeps it cached.
    let stale = KvStore::open(&objs, "m").await.unwrap();
    assert_eq!(stale.get(b"a").await.unwrap(), None);
    let keys: Vec<String> = (b'a'..=b'z').map(|c| (c as char).to_string()).collect();
    for k in &keys {
        kv.put(k.as_bytes(), k.as_bytes()).await.unwrap();
    }
    let c = kv.check().await.unwrap();
    assert!(c.problems.is_empty(), "{:#?}", c.problems);
    assert!(c.nodes >= 6, "{} nodes", c.nodes);
    // The stale client's cached node is gone: it finds the new ones.
    for k in &keys {
        assert_eq!(
            stale.get(k.as_bytes()).await.unwrap(),
            Some(k.clone().into_bytes())
        );
    }
    stale.put(b"m2", b"x").await.unwrap();
    assert_eq!(kv.get(b"m2").await.unwrap(), Some(b"x".to_vec()));
    // Each node object holds exactly the keys of its range.
    let nodes: Vec<String> = objs
        .names()
        .into_iter()
        .filter(|n| n != "m.index")
        .collect();
    {
        let s = objs.s.lock().unwrap();
        let mut seen = 0;
        for node in &nodes {
            let o = ObjectId::new(7, node);
            let range: NodeRange =
                postcard::from_bytes(&s.getattr(coll(), &o, "kv.range").unwrap()).unwrap();
            for (k, _) in s.omap_range(coll(), &o, b"", None, 1000).unwrap() {
                assert!(range.holds(&k), "{node} {range:?} holds {k:?}");
                seen += 1;
            }
        }
        assert_eq!(seen, 27);
    }
    // Break it by hand: a key outside its node's range (so its count is
    // off too), a node the index names removed.
    let (a, b) = (&nodes[0], &nodes[1]);
    objs.operate(
        a,
        vec![SubOp::OmapSet(vec![(
            serde_bytes::ByteBuf::from(vec![0xffu8; 3]),
            serde_bytes::ByteBuf::from(b"x".to_vec()),
        )])],
    )
    .await
    .unwrap();
    objs.operate(b, vec![SubOp::Remove]).await.unwrap();
    let c = kv.check().await.unwrap();
    let all = c.problems.join("; ");
    assert!(
        all.contains(&format!("{a}: key")) && all.contains("outside its range"),
        "{all}"
    );
    assert!(all.contains(&format!("{a}: its count says")), "{all}");
    assert!(all.contains(&format!("node {b} is missing")), "{all}");
}

/// Tombs of clients that died, more than one page of the index listing
/// (1,500): `clean` sees them all in its first pass, so its second, a
/// timeout later, finishes them all (a sweep that stopped after a first
/// page of tombs not old yet saw the rest only in that second pass, and
/// left them).
#[tokio::test]
async fn clean_sees_every_tomb_not_only_the_first_page() {
    use loligo_kv::index::{tomb_key, Tomb};
    const TIMEOUT: u64 = 1_000;
    let objs = MemObjects::new();
    let kv = KvStore::create(&objs, "t", 4)
        .await
        .unwrap()
        .with_timeout(TIMEOUT);
    let started_ms = objs.now_ms();
    use serde_bytes::ByteBuf;
    let tombs: Vec<(ByteBuf, ByteBuf)> = (0..1_500)
        .map(|i| {
            let t = Tomb {
                started_ms,
                nodes: vec![format!("t.gone{i}")],
            };
            (
                ByteBuf::from(tomb_key(&format!("dead{i:05}"))),
                ByteBuf::from(t.encode()),
            )
        })
        .collect();
    objs.operate("t.index", vec![SubOp::OmapSet(tombs)])
        .await
        .unwrap();
    let done = kv.clean().await.unwrap();
    assert_eq!(done.tombs, 1_500, "{done:?}");
}

/// A tomb that does not decode is passed over (and named by `check`),
/// not the end of the sweep; one whose token is not UTF-8 is finished
/// like any other (its nodes deleted, the tomb removed).
#[tokio::test]
async fn clean_passes_a_corrupt_tomb_and_finishes_one_not_named_in_utf8() {
    use loligo_kv::index::{tomb_key, Tomb};
    use serde_bytes::ByteBuf;
    const TIMEOUT: u64 = 1_000;
    let objs = MemObjects::new();
    let kv = KvStore::create(&objs, "t", 4)
        .await
        .unwrap()
        .with_timeout(TIMEOUT);
    objs.operate("t.gone", vec![SubOp::WriteFull(vec![1u8].into())])
        .await
        .unwrap();
    let mut odd = tomb_key("x");
    odd.pop();
    odd.extend_from_slice(&[0xff, 0xfe]);
    let good = Tomb {
        started_ms: objs.now_ms(),
        nodes: vec!["t.gone".into()],
    };
    let tombs = vec![
        (
            ByteBuf::from(tomb_key("a-corrupt")),
            ByteBuf::from(vec![0xffu8; 3]),
        ),
        (ByteBuf::from(odd), ByteBuf::from(good.encode())),
    ];
    objs.operate("t.index", vec![SubOp::OmapSet(tombs)])
        .await
        .unwrap();
    for _ in 0..2 {
        objs.advance(3 * TIMEOUT);
        kv.clean().await.unwrap();
    }
    assert!(!objs.names().contains("t.gone"), "{:?}", objs.names());
    let c = kv.check().await.unwrap();
    assert_eq!(
        c.problems,
        vec![
            "1 tomb(s) of replaced nodes are left to delete (1 of them does not decode)"
                .to_string()
        ]
    );
}
