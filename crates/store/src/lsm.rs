//! `LsmKv`: the block store's metadata engine, an LSM tree (the
//! `lsm-tree` crate, the engine under fjall) with no journal of its own.
//!
//! Why: the block store's journal ([`crate::wal`]) holds every batch until
//! the engine persists it and replays what the engine lost, so a second
//! journal inside the engine (fjall's) only wrote every metadata byte to
//! the device once more, and spent CPU doing so.
//!
//! How. A batch goes into the tree's memtable under one sequence number
//! and is published whole: readers read at the sequence published after
//! the last whole batch, so they see all of a batch or none of it. A
//! memtable grown past its limit is sealed between two batches and written
//! to a table on a background thread, which then compacts (leveled);
//! `persist` seals the memtable and writes every sealed one itself. After
//! a crash the engine holds exactly the batches of the tables it wrote,
//! which are a prefix of its batches, as [`crate::kv`] requires: memtables
//! are sealed in order, and each flush writes all the sealed ones and
//! registers their tables in one step.
//!
//! Old versions. A reader reads at its sequence number `s` from the tree's
//! version (memtables and tables) of the latest change numbered below `s`.
//! The tree numbers its own changes (a flush's or a compaction's new
//! tables) from the same counter as the batches, after the batches they
//! hold, so a change that dropped a key's older versions is never the one a
//! reader who needs them reads from. This is why the tree and the batches
//! must share one counter. Readers register their numbers, and the tree
//! forgets its old versions only below the least of them.
//!
//! Must never: seal a memtable inside a batch; let a reader see part of a
//! batch; drop a version a reader may still need; accept a write after a
//! failed flush (the tables and the journal could disagree).

use crate::error::{Result, StoreError};
use crate::kv::{Kv, KvOp, Visitor};
use lsm_tree::compaction::{CompactionStrategy, Leveled};
use lsm_tree::config::{
    BlockSizePolicy, BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry,
};
use lsm_tree::{
    AbstractTree, AnyTree, Cache, CompressionType, Guard, SeqNo, SequenceNumberCounter,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// The file an open engine holds locked.
pub const LOCK_FILE: &str = "LOCK";
/// A memtable this large is sealed and written to a table.
pub const MEMTABLE_BYTES: u64 = 64 << 20;
/// The tree's block cache (fjall's default).
const CACHE_BYTES: u64 = 32 << 20;
/// Level-0 runs past which a write waits a little for compaction.
const L0_STALL_RUNS: usize = 20;
/// The longest a write waits for compaction, in 1 ms steps.
const STALL_STEPS: usize = 100;
/// Compactions run per wake-up of the background thread, at most.
const COMPACTIONS_PER_WAKE: usize = 64;

fn io(e: impl std::fmt::Debug) -> StoreError {
    StoreError::Io(format!("kv: {e:?}"))
}

/// What the caller and the background thread share.
struct Shared {
    tree: AnyTree,
    /// The next sequence number, for batches and the tree's own version
    /// changes alike.
    seqno: SequenceNumberCounter,
    /// Readers read below this: it moves only after a whole batch.
    visible: SequenceNumberCounter,
    /// Held while a batch goes in, and to seal a memtable between batches.
    write: Mutex<()>,
    /// Sequence numbers readers hold now, with counts.
    readers: Mutex<BTreeMap<SeqNo, usize>>,
    /// Why the engine refuses writes, once a flush failed (or the
    /// background thread died).
    failed: Mutex<Option<String>>,
    /// Set when the engine is dropped: the background thread stops at
    /// its next step.
    stop: AtomicBool,
    /// The last compaction's failure, if it failed (compactions are tried
    /// again; this says why level 0 grows).
    compaction_error: Mutex<Option<String>>,
    memtable_max: u64,
    /// Called after a batch's first insert (tests: a reader runs there).
    #[cfg(test)]
    mid_batch: Mutex<Option<Box<dyn Fn() + Send>>>,
}

/// A reader's registered sequence number, released on drop.
struct Snapshot<'a> {
    shared: &'a Shared,
    seq: SeqNo,
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        let mut r = self.shared.readers();
        if let Some(n) = r.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                r.remove(&self.seq);
            }
        }
    }
}

impl Shared {
    /// The registry of readers. A panic elsewhere leaves its counts whole,
    /// so a poisoned lock is taken as it is.
    fn readers(&self) -> MutexGuard<'_, BTreeMap<SeqNo, usize>> {
        self.readers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Register a reader at the sequence published now.
    fn snapshot(&self) -> Snapshot<'_> {
        let mut r = self.readers();
        let seq = self.visible.get();
        *r.entry(seq).or_insert(0) += 1;
        Snapshot { shared: self, seq }
    }

    /// The least sequence number any reader holds now or can take later:
    /// versions shadowed below it are dead.
    fn watermark(&self) -> SeqNo {
        let r = self.readers();
        let w = r
            .keys()
            .next()
            .copied()
            .unwrap_or_else(|| self.visible.get());
        debug_assert!(w <= self.visible.get());
        w
    }

    fn check(&self) -> Result<()> {
        let f = self
            .failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match f.as_ref() {
            Some(why) => Err(StoreError::Io(format!(
                "kv: an earlier flush failed ({why}); reopen the store"
            ))),
            None => Ok(()),
        }
    }

    fn fail(&self, why: String) -> StoreError {
        let mut f = self
            .failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f.get_or_insert_with(|| why.clone());
        StoreError::Io(format!("kv: {why}"))
    }

    /// Seal the memtable, between two batches.
    fn seal(&self) -> Result<()> {
        let _w = self
            .write
            .lock()
            .map_err(|_| io("a thread panicked writing a batch"))?;
        self.check()?;
        self.tree.rotate_memtable();
        Ok(())
    }

    /// Write every sealed memtable to tables, durably.
    fn flush(&self) -> Result<()> {
        let lock = self.tree.get_flush_lock();
        self.check()?;
        match self.tree.flush(&lock, self.watermark()) {
            Ok(_) => Ok(()),
            Err(e) => Err(self.fail(format!("flush: {e:?}"))),
        }
    }

    /// Compact until the strategy has nothing to do, a memtable waits to
    /// be written (flushes come first: a checkpoint would have to write
    /// it), or enough was done for one wake-up. A failed compaction
    /// changes no table; it is tried again at the next wake-up.
    fn compact(&self, strategy: &Arc<dyn CompactionStrategy>) {
        for _ in 0..COMPACTIONS_PER_WAKE {
            if self.stop.load(Ordering::Relaxed) || self.tree.sealed_memtable_count() > 0 {
                return;
            }
            let before = self.tree.current_version().id();
            if let Err(e) = self.tree.compact(strategy.clone(), self.watermark()) {
                let mut last = self
                    .compaction_error
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                *last = Some(format!("{e:?}"));
                return;
            }
            if self.tree.current_version().id() == before {
                return;
            }
        }
    }
}

/// [`Kv`] on an LSM tree with no journal: durable only through
/// [`Kv::persist`] (or a synced commit, which persists), so it must sit
/// under a journal that replays what a crash loses ([`crate::wal::WalKv`]).
pub struct LsmKv {
    shared: Arc<Shared>,
    /// Held locked while open: one process at a time.
    _lock: std::fs::File,
    /// Wakes the background thread; dropping it stops the thread.
    wake: Option<mpsc::Sender<()>>,
    worker: Option<JoinHandle<()>>,
}

impl LsmKv {
    /// Open (or create) the tree in `dir`.
    pub fn open(dir: &Path) -> Result<LsmKv> {
        LsmKv::open_with(dir, MEMTABLE_BYTES)
    }

    /// [`LsmKv::open`] sealing memtables at `memtable_max` bytes.
    pub fn open_with(dir: &Path, memtable_max: u64) -> Result<LsmKv> {
        std::fs::create_dir_all(dir).map_err(io)?;
        let lock = lock(dir)?;
        let seqno = SequenceNumberCounter::default();
        // The tree publishes its own version changes here; readers use
        // `visible`, which only whole batches move.
        let versions_published = SequenceNumberCounter::default();
        let tree = lsm_tree::Config::new(dir, seqno.clone(), versions_published)
            .use_cache(Arc::new(Cache::with_capacity_bytes(CACHE_BYTES)))
            .data_block_size_policy(BlockSizePolicy::all(4096))
            .filter_policy(FilterPolicy::new([
                FilterPolicyEntry::Bloom(BloomConstructionPolicy::FalsePositiveRate(0.0001)),
                FilterPolicyEntry::Bloom(BloomConstructionPolicy::BitsPerKey(10.0)),
            ]))
            .data_block_compression_policy(CompressionPolicy::new([
                CompressionType::None,
                CompressionType::None,
                CompressionType::Lz4,
            ]))
            .open()
            .map_err(io)?;
        seqno.fetch_max(tree.get_highest_seqno().map_or(0, |s| s + 1));
        let visible = SequenceNumberCounter::new(seqno.get());
        let shared = Arc::new(Shared {
            tree,
            seqno,
            visible,
            write: Mutex::new(()),
            readers: Mutex::new(BTreeMap::new()),
            failed: Mutex::new(None),
            stop: AtomicBool::new(false),
            compaction_error: Mutex::new(None),
            memtable_max,
            #[cfg(test)]
            mid_batch: Mutex::new(None),
        });
        let (tx, rx) = mpsc::channel();
        let bg = shared.clone();
        let worker = std::thread::Builder::new()
            .name("kv-flush".into())
            .spawn(move || background(&bg, &rx))
            .map_err(io)?;
        Ok(LsmKv {
            shared,
            _lock: lock,
            wake: Some(tx),
            worker: Some(worker),
        })
    }

    fn wake(&self) {
        if let Some(w) = &self.wake {
            let _ = w.send(());
        }
    }

    /// Tables on level 0 (for tests and the curious).
    pub fn l0_runs(&self) -> usize {
        self.shared.tree.l0_run_count()
    }

    /// Why the last compaction failed, if it did.
    pub fn compaction_error(&self) -> Option<String> {
        self.shared
            .compaction_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Wait a little while level 0 is deeper than compaction keeps up with.
    fn stall(&self) {
        for _ in 0..STALL_STEPS {
            if self.shared.tree.l0_run_count() <= L0_STALL_RUNS || self.shared.check().is_err() {
                return;
            }
            self.wake();
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The lock file in `dir`, locked: a second opener (another OSD process
/// given the same directory) is refused instead of writing beside it.
fn lock(dir: &Path) -> Result<std::fs::File> {
    let path = dir.join(LOCK_FILE);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| StoreError::Io(format!("{}: {e}", path.display())))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::Io(format!(
            "{} is open in another process",
            dir.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(StoreError::Io(format!("{}: {e}", path.display())))
        }
    }
}

/// The background thread: on each wake-up, write the sealed memtables,
/// then compact. Ends when the engine is dropped or a flush fails; if it
/// panics, the engine refuses writes from then on (nothing would write
/// its memtables or compact).
fn background(shared: &Shared, wake: &mpsc::Receiver<()>) {
    let strategy: Arc<dyn CompactionStrategy> = Arc::new(Leveled::default());
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        while wake.recv().is_ok() && !shared.stop.load(Ordering::Relaxed) {
            while wake.try_recv().is_ok() {}
            if shared.flush().is_err() {
                return;
            }
            shared.compact(&strategy);
        }
    }));
    if run.is_err() {
        shared.fail("the background flush thread panicked".into());
    }
}

impl Drop for LsmKv {
    /// Stops the background thread. Nothing is flushed: what was not
    /// persisted is lost, as in a crash, and the journal replays it.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        drop(self.wake.take());
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

impl Kv for LsmKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let snap = self.shared.snapshot();
        let v = self.shared.tree.get(key, snap.seq).map_err(io)?;
        Ok(v.map(|v| v.to_vec()))
    }

    fn visit(&self, start: &[u8], end: Option<&[u8]>, visit: &mut Visitor<'_>) -> Result<()> {
        if end.is_some_and(|e| e <= start) {
            return Ok(());
        }
        let snap = self.shared.snapshot();
        let it = match end {
            Some(e) => self.shared.tree.range(start..e, snap.seq, None),
            None => self.shared.tree.range(start.., snap.seq, None),
        };
        for g in it {
            let (k, v) = g.into_inner().map_err(io)?;
            if !visit(&k, &v)? {
                break;
            }
        }
        Ok(())
    }

    fn commit(&self, batch: Vec<KvOp>, sync: bool) -> Result<()> {
        if !batch.is_empty() {
            self.stall();
            let s = &self.shared;
            let _w = s
                .write
                .lock()
                .map_err(|_| io("a thread panicked writing a batch"))?;
            s.check()?;
            let seq = s.seqno.next();
            debug_assert!(seq >= s.visible.get(), "a batch below what readers see");
            for (i, op) in batch.into_iter().enumerate() {
                match op {
                    KvOp::Put(k, v) => {
                        s.tree.insert(k, v, seq);
                    }
                    KvOp::Delete(k) => {
                        s.tree.remove(k, seq);
                    }
                }
                #[cfg(test)]
                if i == 0 {
                    if let Some(f) = s.mid_batch.lock().unwrap().as_ref() {
                        f();
                    }
                }
                #[cfg(not(test))]
                let _ = i;
            }
            s.visible.fetch_max(seq + 1);
            if s.tree.active_memtable().size() >= s.memtable_max {
                s.tree.rotate_memtable();
                self.wake();
            }
        }
        if sync {
            self.persist()?;
        }
        Ok(())
    }

    fn persist(&self) -> Result<()> {
        self.shared.seal()?;
        self.shared.flush()?;
        self.wake();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::DirMedia;
    use crate::sim_media::{apply, Map};
    use crate::wal::WalKv;
    use loligo_testkit::{Rng, TempDir};

    fn everything(kv: &dyn Kv) -> Map {
        kv.scan(&[], None, usize::MAX)
            .unwrap()
            .into_iter()
            .collect()
    }

    /// Batch `i`: its number under `seq`, then puts and deletes among a
    /// few hundred keys with values of up to 2 KiB (memtables fill fast).
    fn batch(r: &mut Rng, i: u64) -> Vec<KvOp> {
        let mut b = vec![KvOp::Put(b"seq".to_vec(), i.to_le_bytes().to_vec())];
        for _ in 0..1 + r.below(8) {
            let k = format!("k{:04}", r.below(300)).into_bytes();
            if r.below(4) == 0 {
                b.push(KvOp::Delete(k));
            } else {
                let len = r.below(2048) as usize;
                b.push(KvOp::Put(k, vec![(i % 251) as u8; len]));
            }
        }
        b
    }

    #[test]
    fn a_crash_keeps_a_prefix_of_the_batches_through_the_last_persist() {
        for seed in 1..=4u64 {
            let dir = TempDir::new("lsm").unwrap();
            let mut r = Rng::new(seed);
            let mut batches = Vec::new();
            let mut persisted = 0u64;
            {
                // Small memtables: background flushes and compactions run
                // between the persists.
                let kv = LsmKv::open_with(dir.path(), 64 << 10).unwrap();
                for i in 1..=600u64 {
                    let b = batch(&mut r, i);
                    batches.push(b.clone());
                    kv.commit(b, false).unwrap();
                    if r.below(100) == 0 {
                        kv.persist().unwrap();
                        persisted = i;
                    }
                }
            }
            let kv = LsmKv::open(dir.path()).unwrap();
            let got = everything(&kv);
            let held = got
                .get(&b"seq"[..])
                .map_or(0, |v| u64::from_le_bytes(v.as_slice().try_into().unwrap()));
            assert!(
                held >= persisted,
                "lost persisted batches: holds {held}, persisted {persisted}"
            );
            let mut want = Map::new();
            for b in &batches[..held as usize] {
                apply(&mut want, b);
            }
            assert_eq!(got, want, "not the state after batch {held}");
        }
    }

    #[test]
    fn a_second_open_of_the_same_directory_is_refused() {
        let dir = TempDir::new("lsm").unwrap();
        let kv = LsmKv::open(dir.path()).unwrap();
        let Err(e) = LsmKv::open(dir.path()) else {
            panic!("opened twice")
        };
        assert!(e.to_string().contains("open in another process"), "{e}");
        drop(kv);
        LsmKv::open(dir.path()).unwrap();
    }

    #[test]
    fn a_synced_commit_survives_and_later_writes_shadow_it_after_reopen() {
        let dir = TempDir::new("lsm").unwrap();
        for round in 0..5u8 {
            let kv = LsmKv::open_with(dir.path(), 4 << 10).unwrap();
            if round > 0 {
                assert_eq!(kv.get(b"key").unwrap(), Some(vec![round - 1; 100]));
            }
            // Many versions, so flushes and compactions drop old ones.
            for _ in 0..50 {
                kv.commit(vec![KvOp::Put(b"key".to_vec(), vec![round; 100])], false)
                    .unwrap();
            }
            kv.commit(vec![KvOp::Put(b"other".to_vec(), vec![round])], true)
                .unwrap();
        }
        let kv = LsmKv::open(dir.path()).unwrap();
        assert_eq!(kv.get(b"key").unwrap(), Some(vec![4; 100]));
        assert_eq!(kv.get(b"other").unwrap(), Some(vec![4]));
    }

    #[test]
    fn readers_see_whole_batches_while_tables_are_written_and_compacted() {
        const KEYS: usize = 40;
        let dir = TempDir::new("lsm").unwrap();
        let kv = Arc::new(LsmKv::open_with(dir.path(), 32 << 10).unwrap());
        let batch = |i: u64| -> Vec<KvOp> {
            let mut v = i.to_le_bytes().to_vec();
            v.resize(100, 7);
            (0..KEYS)
                .map(|k| KvOp::Put(format!("k{k:02}").into_bytes(), v.clone()))
                .collect()
        };
        // Before the readers start: an empty store is no batch in part.
        kv.commit(batch(0), false).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let kv = kv.clone();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut last = 0u64;
                    let mut seen = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        // A batch writes every key to one number: a scan
                        // sees them equal, and never going back.
                        let all = kv.scan(b"k", Some(b"l"), 2 * KEYS).unwrap();
                        assert_eq!(all.len(), KEYS, "a batch seen in part");
                        let n = u64::from_le_bytes(all[0].1[..8].try_into().unwrap());
                        for (k, v) in &all {
                            let m = u64::from_le_bytes(v[..8].try_into().unwrap());
                            assert_eq!(m, n, "{k:?} of another batch");
                        }
                        assert!(n >= last, "went back from {last} to {n}");
                        last = n;
                        let p = kv.get(b"k07").unwrap().unwrap();
                        let m = u64::from_le_bytes(p[..8].try_into().unwrap());
                        assert!(m >= last, "a point read went back");
                        seen += 1;
                    }
                    seen
                })
            })
            .collect();
        for i in 1..2000u64 {
            kv.commit(batch(i), i % 500 == 499).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        assert!(kv.l0_runs() <= L0_STALL_RUNS + 1);
    }

    /// A reader in the middle of a batch (its first key in the memtable,
    /// the rest not yet) sees none of it, by point read or scan, until
    /// the batch is published whole.
    #[test]
    fn a_batch_half_inserted_is_not_seen() {
        let dir = TempDir::new("lsm").unwrap();
        let kv = Arc::new(LsmKv::open_with(dir.path(), 32 << 10).unwrap());
        let batch = |v: u8| -> Vec<KvOp> {
            (0..10)
                .map(|k| KvOp::Put(format!("k{k}").into_bytes(), vec![v]))
                .collect()
        };
        kv.commit(batch(1), false).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (reader, log) = (kv.clone(), seen.clone());
        *kv.shared.mid_batch.lock().unwrap() = Some(Box::new(move || {
            let first = reader.get(b"k0").unwrap();
            let all = reader.scan(b"k", Some(b"l"), 100).unwrap();
            log.lock().unwrap().push((first, all));
        }));
        kv.commit(batch(2), false).unwrap();
        *kv.shared.mid_batch.lock().unwrap() = None;
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "the hook ran once, mid-batch");
        let (first, all) = &seen[0];
        assert_eq!(
            first.as_deref(),
            Some(&[1u8][..]),
            "a point read saw part of a batch"
        );
        assert!(
            all.iter().all(|(_, v)| v == &[1]),
            "a scan saw part of a batch"
        );
        assert_eq!(kv.get(b"k0").unwrap(), Some(vec![2]));
    }

    #[test]
    fn under_the_journal_every_synced_batch_survives_a_crash() {
        let dir = TempDir::new("lsm").unwrap();
        let media = DirMedia::new(dir.path());
        let engine = |d: &Path| Box::new(LsmKv::open_with(&d.join("lsm"), 64 << 10).unwrap());
        let mut r = Rng::new(77);
        let mut want = Map::new();
        for round in 0..4u64 {
            let kv = WalKv::open(engine(dir.path()), &media, 256 << 10, None).unwrap();
            assert_eq!(everything(&kv), want, "round {round}: synced batches lost");
            for i in 0..400u64 {
                let b = batch(&mut r, round * 1000 + i);
                apply(&mut want, &b);
                kv.commit(b, true).unwrap();
            }
            // Dropped with its engine unpersisted since the last
            // checkpoint: a crash, for the engine.
        }
    }
}
