//! `FileStore`: an object store in the shape of Ceph's FileStore, the
//! baseline the block store is measured against. Each object's data is a
//! file on the host file system; attributes, omaps and records live in an
//! embedded KV (FileStore kept xattrs on the file and omaps in LevelDB);
//! every transaction is written to a journal, and made durable there,
//! before it touches them (FileStore's write-ahead mode), so each byte
//! written reaches the disk twice.
//!
//! Three stages, each on its own thread for the store's queue:
//!
//! - the journal thread takes the queued transactions in batches, checks
//!   each against the state after those before it (`check`: a
//!   transaction that would fail is refused here, whole, and never
//!   journaled), appends the batch to the ring and `fdatasync`s it;
//! - the apply thread applies each to the files and the KV (buffered),
//!   then completes its commit (reads see it from then on);
//! - the sync thread checkpoints (`apply`) what has been applied every
//!   `sync_interval`, or when half the ring is used: `syncfs`, then a
//!   synced KV batch naming where replay starts, while applying goes on;
//! - a mount replays the journal from the last checkpoint.
//!
//! Must never: complete a commit before its transaction is both durable
//! in the journal and applied; journal a transaction that fails; go on
//! applying after a failed write (every later commit fails, and the next
//! mount applies what the journal holds: a transaction whose commit
//! reported the failure may be there).

mod apply;
mod check;
mod journal;
mod layout;

use crate::block::codec::{coll_prefix, decode_coll, decode_object, prefix_end};
use crate::error::{Result, StoreError};
use crate::kv::{FjallKv, Kv};
use crate::names::{CollectionId, Limits, ObjectId, ObjectRead, ObjectStat, StoreStats};
use crate::store::{Commit, Completer, ObjectStore};
use crate::txn::Transaction;
use apply::Disk;
use check::Pending;
use journal::{record_len, Cursor, Journal, MOUNT_GAP};
use layout::*;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use layout::TYPE as FILESTORE_TYPE;

/// How a file store is made and run.
#[derive(Clone, Copy, Debug)]
pub struct FileConfig {
    /// The journal file's size (at mkfs).
    pub journal_size: u64,
    /// The longest time between checkpoints (Ceph's
    /// `filestore_max_sync_interval`).
    pub sync_interval: Duration,
    pub limits: Limits,
}

/// The journal size unless a store says otherwise.
pub const DEFAULT_JOURNAL_SIZE: u64 = 256 << 20;

impl Default for FileConfig {
    fn default() -> FileConfig {
        FileConfig {
            journal_size: DEFAULT_JOURNAL_SIZE,
            sync_interval: Duration::from_secs(5),
            limits: Limits::default(),
        }
    }
}

/// Most transactions the journal thread takes in one batch.
const BATCH_MAX: usize = 256;

struct Queued {
    t: Transaction,
    done: Completer,
}

struct Journaled {
    seq: u64,
    /// The ring positions of its record's start and of the byte after it.
    start: u64,
    end: u64,
    t: Transaction,
    done: Completer,
}

/// How far the apply thread has got.
#[derive(Clone, Copy)]
struct Progress {
    /// The record after the last one applied (every one before applied).
    applied: Cursor,
    /// The apply thread has stopped.
    closed: bool,
}

struct Shared {
    disk: Disk,
    /// Held to apply a transaction, shared to read: a read sees each
    /// transaction whole or not at all.
    view: RwLock<()>,
    pending: Mutex<Pending>,
    limits: Limits,
    ring: u64,
    sync_interval: Duration,
    /// The first failure of a write; every later commit fails with it.
    failed: Mutex<Option<StoreError>>,
    /// The checkpointed ring position: the journal may write up to a
    /// ring's length past it.
    tail: Mutex<u64>,
    tail_moved: Condvar,
    want_checkpoint: AtomicBool,
    /// What the apply thread has applied, for the sync thread.
    progress: Mutex<Progress>,
    progress_moved: Condvar,
    /// Stop without the final checkpoint (tests of replay).
    abandon: AtomicBool,
    read_bytes: AtomicU64,
    read_ops: AtomicU64,
    commits: AtomicU64,
    commit_us: AtomicU64,
}

impl Shared {
    fn failure(&self) -> Option<StoreError> {
        self.failed
            .lock()
            .map_or(Some(StoreError::Closed), |g| g.clone())
    }

    fn fail(&self, e: &StoreError) {
        if let Ok(mut g) = self.failed.lock() {
            g.get_or_insert_with(|| e.clone());
        }
        self.tail_moved.notify_all();
    }

    /// Checkpoint at op `at`, whose record starts at ring position
    /// `pos`, unless one at or past it is recorded; then the journal may
    /// reuse the ring up to `pos`.
    fn checkpoint(&self, at: Pos, pos: u64) -> Result<()> {
        if self.disk.checkpoint(at, pos)? {
            if let Ok(mut t) = self.tail.lock() {
                *t = (*t).max(pos);
            }
            self.tail_moved.notify_all();
        }
        Ok(())
    }

    fn complete(&self, done: Completer, r: Result<()>) {
        if r.is_ok() {
            self.commits.fetch_add(1, Ordering::Relaxed);
            (self.commit_us).fetch_add(done.age().as_micros() as u64, Ordering::Relaxed);
        }
        done.complete(r);
    }
}

/// The FileStore-like store.
pub struct FileStore {
    shared: Arc<Shared>,
    queue: Mutex<Option<Sender<Queued>>>,
    threads: Vec<JoinHandle<()>>,
}

impl FileStore {
    /// Make an empty store in `dir` (which must not hold one).
    pub fn mkfs(dir: &Path, cfg: &FileConfig) -> Result<()> {
        if dir.join(TYPE_FILE).exists() || dir.join(JOURNAL_FILE).exists() {
            return Err(StoreError::Invalid(format!(
                "{} already holds a store",
                dir.display()
            )));
        }
        for b in 0..=255u8 {
            let d = dir.join(OBJECTS_DIR).join(format!("{b:02x}"));
            std::fs::create_dir_all(&d).map_err(|e| io(d.display(), e))?;
        }
        Journal::create(&dir.join(JOURNAL_FILE), cfg.journal_size)?;
        let kv = Box::new(FjallKv::open(&dir.join(KV_DIR))?);
        let disk = Disk::new(dir, kv, Pos::default());
        disk.checkpoint(Pos { seq: 1, op: 0 }, 0)?;
        drop(disk);
        let t = dir.join(TYPE_FILE);
        std::fs::write(&t, format!("{TYPE}\n")).map_err(|e| io(t.display(), e))?;
        std::fs::File::open(&t)
            .and_then(|f| f.sync_all())
            .and_then(|()| std::fs::File::open(dir)?.sync_all())
            .map_err(|e| io(t.display(), e))
    }

    /// Whether `dir` holds a file store.
    pub fn is_filestore(dir: &Path) -> bool {
        std::fs::read_to_string(dir.join(TYPE_FILE)).is_ok_and(|s| s.trim() == TYPE)
    }

    /// Open the store in `dir`, replaying its journal.
    pub fn mount(dir: &Path, cfg: &FileConfig) -> Result<FileStore> {
        if !FileStore::is_filestore(dir) {
            return Err(StoreError::Invalid(format!(
                "{} holds no file store (no `{TYPE_FILE}` file saying {TYPE})",
                dir.display()
            )));
        }
        if cfg.limits.ops_per_txn_max > OPS_MAX {
            return Err(StoreError::Invalid(format!(
                "a file store takes at most {OPS_MAX} ops per transaction"
            )));
        }
        let kv = Box::new(FjallKv::open(&dir.join(KV_DIR))?);
        let (start, pos) = match kv.get(COMMIT_KEY)? {
            Some(v) => decode_commit(&v)?,
            None => return Err(StoreError::Corrupt("no checkpoint record".into())),
        };
        let disk = Disk::new(dir, kv, start);
        let journal = Journal::open(&dir.join(JOURNAL_FILE))?;
        let next = replay(&disk, &journal, start, pos)?;
        let shared = Arc::new(Shared {
            disk,
            view: RwLock::new(()),
            pending: Mutex::new(Pending::default()),
            limits: cfg.limits,
            ring: journal.ring(),
            sync_interval: cfg.sync_interval,
            failed: Mutex::new(None),
            tail: Mutex::new(next.pos),
            tail_moved: Condvar::new(),
            want_checkpoint: AtomicBool::new(false),
            progress: Mutex::new(Progress {
                applied: next,
                closed: false,
            }),
            progress_moved: Condvar::new(),
            abandon: AtomicBool::new(false),
            read_bytes: AtomicU64::new(0),
            read_ops: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            commit_us: AtomicU64::new(0),
        });
        let (qtx, qrx) = mpsc::channel::<Queued>();
        let (atx, arx) = mpsc::channel::<Journaled>();
        let sh = shared.clone();
        let jt = std::thread::Builder::new()
            .name("fs-journal".into())
            .spawn(move || journal_loop(&sh, &journal, next, qrx, atx))
            .map_err(|e| io("journal thread", e))?;
        let sh = shared.clone();
        let at = std::thread::Builder::new()
            .name("fs-apply".into())
            .spawn(move || apply_loop(&sh, arx))
            .map_err(|e| io("apply thread", e))?;
        let sh = shared.clone();
        let st = std::thread::Builder::new()
            .name("fs-sync".into())
            .spawn(move || sync_loop(&sh, next))
            .map_err(|e| io("sync thread", e))?;
        Ok(FileStore {
            shared,
            queue: Mutex::new(Some(qtx)),
            threads: vec![jt, at, st],
        })
    }

    /// Stop as a killed process would: without the final checkpoint, so
    /// the next mount replays the journal (for tests of replay).
    pub fn abandon(self) {
        self.shared.abandon.store(true, Ordering::SeqCst);
    }

    fn need_coll(&self, c: CollectionId) -> Result<()> {
        match self.shared.disk.coll(c)? {
            Some(_) => Ok(()),
            None => Err(StoreError::NoCollection(c)),
        }
    }

    fn need_obj(&self, c: CollectionId, o: &ObjectId) -> Result<Meta> {
        self.need_coll(c)?;
        self.shared
            .disk
            .meta(c, o)?
            .ok_or_else(|| StoreError::NoObject {
                coll: c,
                oid: o.clone(),
            })
    }

    fn read_view(&self) -> Result<std::sync::RwLockReadGuard<'_, ()>> {
        self.shared.view.read().map_err(|_| StoreError::Closed)
    }

    fn attrs(&self, c: CollectionId, o: &ObjectId) -> Result<BTreeMap<String, Vec<u8>>> {
        self.shared.disk.attrs(c, o)
    }

    fn read_file(
        &self,
        o: &ObjectId,
        m: Meta,
        extents: &[(u64, u64)],
    ) -> Result<(u64, Vec<Vec<u8>>)> {
        let f = self.shared.disk.open(m.fid)?;
        let size = f.metadata().map_err(|e| io(o, e))?.len();
        let mut out = Vec::with_capacity(extents.len());
        for &(off, len) in extents {
            let end = off.saturating_add(len).min(size);
            let mut buf = vec![0u8; end.saturating_sub(off) as usize];
            if !buf.is_empty() {
                f.read_exact_at(&mut buf, off).map_err(|e| io(o, e))?;
                self.shared.read_ops.fetch_add(1, Ordering::Relaxed);
                (self.shared.read_bytes).fetch_add(buf.len() as u64, Ordering::Relaxed);
            }
            out.push(buf);
        }
        Ok((size, out))
    }
}

impl Drop for FileStore {
    fn drop(&mut self) {
        // Closing the queue stops the journal thread, which closes the
        // apply thread's queue in turn.
        if let Ok(mut q) = self.queue.lock() {
            q.take();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Apply the journal's ops from the checkpoint (op `from` of the record
/// at ring position `pos`) again; returns where this mount's records
/// start.
fn replay(disk: &Disk, j: &Journal, from: Pos, pos: u64) -> Result<Cursor> {
    let mut at = Cursor { pos, seq: from.seq };
    let mut first_op = from.op;
    while let Some((start, payload)) = j.read(at)? {
        let t: Transaction = postcard::from_bytes(&payload)
            .map_err(|e| StoreError::Corrupt(format!("journal record {}: {e}", at.seq)))?;
        let mut barrier = |p: Pos| disk.checkpoint(p, start).map(|_| ());
        disk.apply(at.seq, &t, first_op, true, &mut barrier)?;
        first_op = 0;
        at = Cursor {
            pos: start + record_len(payload.len()),
            seq: at.seq + 1,
        };
    }
    disk.unlink_doomed()?;
    let next = Cursor {
        pos: at.pos,
        seq: at.seq + MOUNT_GAP,
    };
    disk.checkpoint(
        Pos {
            seq: next.seq,
            op: 0,
        },
        next.pos,
    )?;
    Ok(next)
}

fn journal_loop(
    sh: &Shared,
    j: &Journal,
    mut at: Cursor,
    rx: Receiver<Queued>,
    tx: Sender<Journaled>,
) {
    // Queued transactions not yet taken into a batch.
    let mut batch: VecDeque<Queued> = VecDeque::new();
    loop {
        if batch.is_empty() {
            match rx.recv() {
                Ok(q) => batch.push_back(q),
                Err(_) => return,
            }
        }
        while batch.len() < BATCH_MAX {
            match rx.try_recv() {
                Ok(q) => batch.push_back(q),
                Err(_) => break,
            }
        }
        if let Some(e) = sh.failure() {
            for q in batch.drain(..) {
                sh.complete(q.done, Err(e.clone()));
            }
            continue;
        }
        let mut ok: Vec<(Queued, Vec<u8>)> = Vec::with_capacity(batch.len());
        // Where the records taken so far end in the ring. A batch spans at
        // most half the ring (a single record may span up to all of it:
        // at most half, plus what it skips at the ring's end), so it fits
        // once everything before it is checkpointed.
        let mut end = at.pos;
        {
            let Ok(mut p) = sh.pending.lock() else {
                sh.fail(&StoreError::Closed);
                continue;
            };
            while let Some(q) = batch.pop_front() {
                let b = match encode(&q.t, sh.ring) {
                    Ok(b) => b,
                    Err(e) => {
                        sh.complete(q.done, Err(e));
                        continue;
                    }
                };
                let len = record_len(b.len());
                let next_end = j.place(end, len) + len;
                if !ok.is_empty() && next_end - at.pos > sh.ring / 2 {
                    // The rest waits for the next batch.
                    batch.push_front(q);
                    break;
                }
                let seq = at.seq + ok.len() as u64;
                match p.check(&q.t, seq, &sh.disk) {
                    Ok(()) => {
                        end = next_end;
                        ok.push((q, b));
                    }
                    Err(e) => sh.complete(q.done, Err(e)),
                }
            }
        }
        debug_assert!(end - at.pos <= sh.ring);
        if ok.is_empty() {
            continue;
        }
        let payloads: Vec<Vec<u8>> = ok.iter_mut().map(|(_, b)| std::mem::take(b)).collect();
        let r = wait_for_room(sh, j, at, &payloads).and_then(|()| j.append(&mut at, &payloads));
        match r {
            Ok(starts) => {
                let first_seq = at.seq - ok.len() as u64;
                for (i, ((q, _), start)) in ok.into_iter().zip(starts).enumerate() {
                    let jr = Journaled {
                        seq: first_seq + i as u64,
                        start,
                        end: start + record_len(payloads[i].len()),
                        t: q.t,
                        done: q.done,
                    };
                    if let Err(mpsc::SendError(jr)) = tx.send(jr) {
                        sh.complete(jr.done, Err(StoreError::Closed));
                    }
                }
            }
            Err(e) => {
                sh.fail(&e);
                for (q, _) in ok {
                    sh.complete(q.done, Err(e.clone()));
                }
            }
        }
    }
}

/// The record's payload: the transaction, encoded; too large a one is
/// refused (a record must fit in half the ring).
fn encode(t: &Transaction, ring: u64) -> Result<Vec<u8>> {
    let b = postcard::to_allocvec(t).map_err(|e| StoreError::Invalid(format!("encode: {e}")))?;
    if record_len(b.len()) > ring / 2 {
        return Err(StoreError::TooLarge(format!(
            "transaction of {} bytes (the journal takes {} at most)",
            b.len(),
            ring / 2
        )));
    }
    Ok(b)
}

/// Block until the ring can take `payloads` from `at` without
/// overwriting a record after the checkpoint.
fn wait_for_room(sh: &Shared, j: &Journal, at: Cursor, payloads: &[Vec<u8>]) -> Result<()> {
    let mut end = at.pos;
    for p in payloads {
        let len = record_len(p.len());
        end = j.place(end, len) + len;
    }
    let mut tail = sh.tail.lock().map_err(|_| StoreError::Closed)?;
    while end - *tail > sh.ring {
        if let Some(e) = sh.failure() {
            return Err(e);
        }
        sh.want_checkpoint.store(true, Ordering::SeqCst);
        tail = (sh.tail_moved)
            .wait_timeout(tail, Duration::from_millis(50))
            .map_err(|_| StoreError::Closed)?
            .0;
    }
    Ok(())
}

fn apply_loop(sh: &Shared, rx: Receiver<Journaled>) {
    while let Ok(jr) = rx.recv() {
        let at = Cursor {
            pos: jr.end,
            seq: jr.seq + 1,
        };
        apply_one(sh, jr);
        if let Ok(mut p) = sh.progress.lock() {
            p.applied = at;
        }
        sh.progress_moved.notify_all();
    }
    if let Ok(mut p) = sh.progress.lock() {
        p.closed = true;
    }
    sh.progress_moved.notify_all();
}

/// Checkpoint what the apply thread has applied, every sync interval,
/// when half the ring is used or the journal waits for room, and (but
/// after a failure, or when abandoned) once it stops. Applying goes on
/// during a checkpoint, as FileStore's did.
fn sync_loop(sh: &Shared, start: Cursor) {
    let mut committed = start;
    let mut last = Instant::now();
    loop {
        let p = match sh.progress.lock() {
            Ok(g) => match sh.progress_moved.wait_timeout(g, Duration::from_millis(20)) {
                Ok((g, _)) => *g,
                Err(_) => return,
            },
            Err(_) => return,
        };
        if sh.failure().is_some() || (p.closed && sh.abandon.load(Ordering::SeqCst)) {
            return;
        }
        let due = p.applied != committed
            && (p.closed
                || sh.want_checkpoint.swap(false, Ordering::SeqCst)
                || p.applied.pos - committed.pos > sh.ring / 2
                || last.elapsed() >= sh.sync_interval);
        if due {
            let at = Pos {
                seq: p.applied.seq,
                op: 0,
            };
            match sh.checkpoint(at, p.applied.pos) {
                Ok(()) => {
                    committed = p.applied;
                    last = Instant::now();
                }
                Err(e) => sh.fail(&e),
            }
        }
        if p.closed {
            return;
        }
    }
}

fn apply_one(sh: &Shared, jr: Journaled) {
    if let Some(e) = sh.failure() {
        sh.complete(jr.done, Err(e));
        return;
    }
    let start = jr.start;
    let mut barrier = |at: Pos| sh.checkpoint(at, start);
    let r = match sh.view.write() {
        Ok(_w) => sh.disk.apply(jr.seq, &jr.t, 0, false, &mut barrier),
        Err(_) => Err(StoreError::Closed),
    };
    if let Ok(mut p) = sh.pending.lock() {
        p.applied(jr.seq);
    }
    if let Err(e) = &r {
        sh.fail(e);
    }
    sh.complete(jr.done, r);
}

impl ObjectStore for FileStore {
    fn limits(&self) -> &Limits {
        &self.shared.limits
    }

    fn queue_transaction(&self, t: Transaction) -> Commit {
        if let Err(e) = t.validate(&self.shared.limits) {
            return Commit::ready(Err(e));
        }
        let (commit, done) = Commit::pending();
        let q = self.queue.lock().ok().and_then(|g| g.clone());
        match q {
            Some(q) => {
                if let Err(mpsc::SendError(q)) = q.send(Queued { t, done }) {
                    q.done.complete(Err(StoreError::Closed));
                }
            }
            None => done.complete(Err(StoreError::Closed)),
        }
        commit
    }

    fn collections(&self) -> Result<Vec<CollectionId>> {
        let _g = self.read_view()?;
        (self.shared.disk.under(&[T_COLL])?.into_iter())
            .map(|(k, _)| decode_coll(&k))
            .collect()
    }

    fn collection_exists(&self, c: CollectionId) -> Result<bool> {
        let _g = self.read_view()?;
        Ok(self.shared.disk.coll(c)?.is_some())
    }

    fn exists(&self, c: CollectionId, o: &ObjectId) -> Result<bool> {
        let _g = self.read_view()?;
        self.need_coll(c)?;
        Ok(self.shared.disk.meta(c, o)?.is_some())
    }

    fn stat(&self, c: CollectionId, o: &ObjectId) -> Result<ObjectStat> {
        let _g = self.read_view()?;
        let m = self.need_obj(c, o)?;
        let f = self.shared.disk.open(m.fid)?;
        Ok(ObjectStat {
            size: f.metadata().map_err(|e| io(o, e))?.len(),
        })
    }

    fn read(&self, c: CollectionId, o: &ObjectId, extents: &[(u64, u64)]) -> Result<Vec<Vec<u8>>> {
        let _g = self.read_view()?;
        let m = self.need_obj(c, o)?;
        Ok(self.read_file(o, m, extents)?.1)
    }

    fn read_with_attrs(
        &self,
        c: CollectionId,
        o: &ObjectId,
        extents: &[(u64, u64)],
    ) -> Result<Option<ObjectRead>> {
        let _g = self.read_view()?;
        self.need_coll(c)?;
        let Some(m) = self.shared.disk.meta(c, o)? else {
            return Ok(None);
        };
        let (size, extents) = self.read_file(o, m, extents)?;
        Ok(Some(ObjectRead {
            size,
            attrs: self.attrs(c, o)?,
            extents: extents.into_iter().map(bytes::Bytes::from).collect(),
        }))
    }

    fn getattr(&self, c: CollectionId, o: &ObjectId, name: &str) -> Result<Vec<u8>> {
        let _g = self.read_view()?;
        self.need_obj(c, o)?;
        let k = obj_sub_key(T_ATTR, c, o, name.as_bytes());
        self.shared
            .disk
            .kv
            .get(&k)?
            .ok_or_else(|| StoreError::NoAttr {
                oid: o.clone(),
                name: name.to_string(),
            })
    }

    fn getattrs(&self, c: CollectionId, o: &ObjectId) -> Result<BTreeMap<String, Vec<u8>>> {
        let _g = self.read_view()?;
        self.need_obj(c, o)?;
        self.attrs(c, o)
    }

    fn omap_header(&self, c: CollectionId, o: &ObjectId) -> Result<Vec<u8>> {
        let _g = self.read_view()?;
        self.need_obj(c, o)?;
        Ok(self
            .shared
            .disk
            .kv
            .get(&obj_key(T_HEAD, c, o))?
            .unwrap_or_default())
    }

    fn omap_get(
        &self,
        c: CollectionId,
        o: &ObjectId,
        keys: &[Vec<u8>],
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        let _g = self.read_view()?;
        self.need_obj(c, o)?;
        let mut out = BTreeMap::new();
        for k in keys {
            if let Some(v) = self.shared.disk.kv.get(&obj_sub_key(T_OMAP, c, o, k))? {
                out.insert(k.clone(), v);
            }
        }
        Ok(out)
    }

    fn omap_range(
        &self,
        c: CollectionId,
        o: &ObjectId,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let _g = self.read_view()?;
        self.need_obj(c, o)?;
        let p = obj_key(T_OMAP, c, o);
        let s = obj_sub_key(T_OMAP, c, o, start);
        let e = match end {
            Some(e) => obj_sub_key(T_OMAP, c, o, e),
            None => prefix_end(&p),
        };
        Ok((self.shared.disk.kv.scan(&s, Some(&e), limit)?.into_iter())
            .map(|(k, v)| (k[p.len()..].to_vec(), v))
            .collect())
    }

    fn list_range(
        &self,
        c: CollectionId,
        hashes: Range<u64>,
        start: Option<&ObjectId>,
        limit: usize,
    ) -> Result<(Vec<ObjectId>, Option<ObjectId>)> {
        let _g = self.read_view()?;
        self.need_coll(c)?;
        let Some(from) = crate::store::list_from(&hashes, start) else {
            return Ok((Vec::new(), None));
        };
        let p = coll_prefix(T_META, c);
        let mut out: Vec<ObjectId> = Vec::new();
        let want = limit.saturating_add(1);
        self.shared.disk.kv.visit(
            &obj_key(T_META, c, &from),
            Some(&prefix_end(&p)),
            &mut |k, _| {
                let (o, _) = decode_object(k, p.len())?;
                if u64::from(o.hash) >= hashes.end {
                    return Ok(false);
                }
                out.push(o);
                Ok(out.len() < want)
            },
        )?;
        let next = if out.len() > limit { out.pop() } else { None };
        Ok((out, next))
    }

    fn record(&self, c: CollectionId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let _g = self.read_view()?;
        self.need_coll(c)?;
        let mut k = coll_prefix(T_REC, c);
        k.extend_from_slice(key);
        self.shared.disk.kv.get(&k)
    }

    fn records(
        &self,
        c: CollectionId,
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let _g = self.read_view()?;
        self.need_coll(c)?;
        let p = coll_prefix(T_REC, c);
        let mut s = p.clone();
        s.extend_from_slice(start);
        Ok((self
            .shared
            .disk
            .kv
            .scan(&s, Some(&prefix_end(&p)), limit)?
            .into_iter())
        .map(|(k, v)| (k[p.len()..].to_vec(), v))
        .collect())
    }

    /// The host file system's space, as FileStore reported it.
    fn statfs(&self) -> Result<StoreStats> {
        let s = nix::sys::statvfs::statvfs(&self.shared.disk.dir).map_err(|e| io("statvfs", e))?;
        let frag = s.fragment_size() as u64;
        let total = (s.blocks() as u64).saturating_mul(frag);
        let free = (s.blocks_available() as u64).saturating_mul(frag);
        let used = total.saturating_sub((s.blocks_free() as u64).saturating_mul(frag));
        Ok(StoreStats {
            total,
            used,
            free,
            ..StoreStats::default()
        })
    }

    /// Bytes and requests read from object files (through the page
    /// cache: this store has no device of its own).
    fn device_reads(&self) -> (u64, u64) {
        (
            self.shared.read_bytes.load(Ordering::Relaxed),
            self.shared.read_ops.load(Ordering::Relaxed),
        )
    }

    fn commit_latency(&self) -> (u64, u64) {
        (
            self.shared.commits.load(Ordering::Relaxed),
            self.shared.commit_us.load(Ordering::Relaxed),
        )
    }
}
