//! The committer: prepares queued transactions against an overlay of the
//! KV, group-commits them, then writes deferred data to the device.
//!
//! It must never complete a transaction before the KV batch holding it
//! is durable, nor write into space another committed extent uses.

use super::codec::*;
use super::{
    csum_shift, ids, io, read_blocks, read_logical_into, AlignedBuf, Allocator, Job, Pre, Prepared,
    Shared, SmallWrites,
};
use crate::error::{Result, StoreError};
use crate::hint::AllocHint;
use crate::kv::{Kv, KvOp};
use crate::names::{CollectionId, Compression, ObjectId};
use crate::txn::{Op, Transaction};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;

/// Pending KV changes: `None` deletes.
type Overlay = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// The committer's first half: it takes queued transactions and prepares
/// each batch against the KV and the batch so far, then hands the batch
/// to the [`Syncer`] in the same thread.
pub(super) struct Committer {
    pub(super) s: Arc<Shared>,
    pub(super) next_blob: u64,
    pub(super) next_seq: u64,
    pub(super) batch_max: usize,
}

/// The committer's second half: commits each prepared batch to the KV,
/// waits for it to be durable, writes its deferred data in place and
/// completes its transactions. It owns what decides when freed space is
/// reusable.
pub(super) struct Syncer {
    pub(super) s: Arc<Shared>,
    /// Freed extents with the batch that freed them; reusable once a later
    /// batch has committed, their batch is durable (see `durable`) and no
    /// deferred record of their batch or earlier is left (see
    /// `deleted_through`).
    pub(super) quarantine: Vec<(u64, u64, u64)>,
    /// Deferred records already on the device, deleted with the next batch.
    pub(super) delete_next: Vec<Vec<u8>>,
    /// Deferred records whose data is written to the device but not yet
    /// synced, with their batch.
    pub(super) unsynced: Vec<(u64, Vec<u8>)>,
    /// Batches committed so far.
    pub(super) batch_no: u64,
    /// Every batch numbered below it is durable (a batch committed
    /// without the KV's sync is not, until a synced one follows it).
    pub(super) durable: u64,
    /// Every deferred record of batches `< deleted_through` is deleted
    /// durably.
    pub(super) deleted_through: u64,
    /// The blob and sequence counters as of the last batch committed.
    pub(super) ids: (u64, u64),
    /// A device sync running beside the commits for deferred records
    /// already written in place.
    pub(super) flushing: Option<Flush>,
}

/// A background sync of deferred data written in place.
pub(super) struct Flush {
    /// What `deleted_through` becomes once the records are deleted.
    upto: u64,
    /// The records whose data it makes durable.
    keys: Vec<Vec<u8>>,
    /// Where the sync's result comes.
    done: Receiver<std::io::Result<()>>,
}

/// State of one batch being prepared.
#[derive(Default)]
struct Batch {
    kv: Overlay,
    /// Deferred block contents by device offset.
    deferred: HashMap<u64, Arc<Vec<u8>>>,
    /// Deferred records: key -> (device offset, bytes).
    records: Vec<(Vec<u8>, u64, Vec<u8>)>,
    freed: Vec<(u64, u64)>,
    wrote_data: bool,
}

/// A prepared batch on its way to the syncer.
struct Handoff {
    batch: Batch,
    /// The free-space keys this batch's allocations and frees changed,
    /// taken when its preparation ended (the next batch's come later).
    alloc_ops: Vec<KvOp>,
    ids: (u64, u64),
    sync: bool,
    /// An idle committer's empty batch: deferred data is synced too, so
    /// that quarantined space can go.
    release: bool,
    done: Vec<(Completer, Result<()>)>,
    prepared_in: std::time::Duration,
}

/// How long an idle committer waits before it commits an empty batch to
/// release quarantined freed space.
const IDLE_RELEASE: std::time::Duration = std::time::Duration::from_millis(200);

/// Most empty batches an idle committer commits before it waits for a
/// job again (one usually releases everything; a second is needed when a
/// background flush of deferred data was running).
const IDLE_RELEASES_MAX: u32 = 3;

impl Committer {
    pub(super) fn run(&mut self, rx: Receiver<Job>, mut syncer: Syncer) {
        use std::sync::mpsc::RecvTimeoutError;
        // Empty batches since the last job (a few at most).
        let mut idle = 0;
        loop {
            // Idle with freed space in quarantine: an empty batch, synced
            // with the deferred data, lets it go (it waits for a later
            // batch; on an idle store none came, and freed space never
            // showed as free).
            let first = match syncer.quarantine.is_empty() || idle >= IDLE_RELEASES_MAX {
                true => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                false => rx.recv_timeout(IDLE_RELEASE),
            };
            let first = match first {
                Ok(j) => j,
                Err(RecvTimeoutError::Timeout) => {
                    idle += 1;
                    if let Some(mut h) = self.batch(Vec::new()) {
                        (h.sync, h.release) = (true, true);
                        syncer.handle(&mut h);
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            };
            idle = 0;
            let mut jobs = vec![first];
            while jobs.len() < self.batch_max {
                match rx.try_recv() {
                    Ok(j) => jobs.push(j),
                    Err(_) => break,
                }
            }
            if let Some(mut h) = self.batch(jobs) {
                syncer.handle(&mut h);
            }
        }
        syncer.close();
    }

    /// Prepare a batch; `None` when the store failed earlier (every job
    /// is then completed with the error).
    fn batch(&mut self, jobs: Vec<Job>) -> Option<Handoff> {
        if self.s.failed.load(Ordering::Relaxed) {
            fail_all(
                jobs.into_iter().map(|j| (j.done, Ok(()))).collect(),
                StoreError::Io("store failed earlier; remount".into()),
            );
            return None;
        }
        let mut b = Batch::default();
        let mut done: Vec<(Completer, Result<()>)> = Vec::new();
        let t0 = std::time::Instant::now();
        let mut sync = false;
        for j in jobs {
            sync |= j.sync;
            let pre: Vec<Option<Prepared>> = j.pre.into_iter().map(Pre::wait).collect();
            let r = self.prepare(&j.txn, &pre, &mut b);
            done.push((j.done, r));
        }
        let alloc_ops = match self.s.alloc.lock() {
            Ok(mut a) => a.persist(),
            Err(_) => {
                fail_all(done, StoreError::Closed);
                self.s.failed.store(true, Ordering::Relaxed);
                return None;
            }
        };
        Some(Handoff {
            batch: b,
            alloc_ops,
            ids: (self.next_blob, self.next_seq),
            sync,
            release: false,
            done,
            prepared_in: t0.elapsed(),
        })
    }

    /// Prepare one transaction into the batch; on error nothing of it
    /// stays (its overlay is dropped and its allocations returned).
    fn prepare(&mut self, t: &Transaction, pre: &[Option<Prepared>], b: &mut Batch) -> Result<()> {
        t.validate(&self.s.limits)?;
        let mut cx = Ctx {
            s: &self.s,
            batch: b,
            kv: Overlay::new(),
            onodes: HashMap::new(),
            deferred: HashMap::new(),
            records: Vec::new(),
            freed: Vec::new(),
            allocated: Vec::new(),
            consumed: Vec::new(),
            alloc: &self.s.alloc,
            next_blob: &mut self.next_blob,
            next_seq: &mut self.next_seq,
            wrote_data: false,
            known_coll: std::cell::Cell::new(None),
        };
        let r = t
            .ops
            .iter()
            .enumerate()
            .try_for_each(|(i, op)| match (op, pre.get(i)) {
                // Prepared data is already on the device (uncompressed even
                // if compression was switched on meanwhile: best effort).
                (Op::WriteFull { coll, oid, data }, Some(Some(p))) => {
                    cx.write_full_prepared(*coll, oid, data.len() as u64, p)
                }
                _ => cx.op(op),
            });
        match r {
            Ok(()) => {
                cx.flush_onodes();
                let Ctx {
                    kv,
                    deferred,
                    records,
                    freed,
                    wrote_data,
                    ..
                } = cx;
                b.kv.extend(kv);
                b.deferred.extend(deferred);
                b.records.extend(records);
                b.freed.extend(freed);
                b.wrote_data |= wrote_data;
                Ok(())
            }
            Err(e) => {
                // Undo this transaction's allocator changes: space it took
                // is free again, space it freed is not.
                if let Ok(mut a) = self.s.alloc.lock() {
                    // Freed first: space this transaction both took and
                    // freed (a write, then a remove) is then free again
                    // once, not handed out while the free map lacks it.
                    for &(off, len) in &cx.freed {
                        a.commit_reserved(&[(off, len)]);
                    }
                    for (off, len) in std::mem::take(&mut cx.allocated) {
                        a.free(off, len);
                        a.make_available(off, len);
                    }
                    // Caller reservations this transaction never used.
                    for p in pre.iter().flatten() {
                        if !cx.consumed.contains(&p.pieces) {
                            a.unreserve(&p.pieces);
                        }
                    }
                }
                Err(e)
            }
        }
    }
}

/// Whether `LOLIGO_STORE_TRACE` asks for a line per batch on stderr (read
/// once: a lookup per batch cost a measurable share of the committer).
fn trace() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("LOLIGO_STORE_TRACE").is_some())
}

impl Syncer {
    /// Commit a prepared batch and complete its transactions.
    fn handle(&mut self, h: &mut Handoff) {
        let t0 = std::time::Instant::now();
        let res = self.commit(h);
        if trace() {
            eprintln!(
                "batch {} txns: prepare {:?} commit {:?}",
                h.done.len(),
                h.prepared_in,
                t0.elapsed()
            );
        }
        if let Err(e) = res {
            // The device or KV failed: nothing of this batch is known to
            // be durable; stop accepting work.
            self.s.failed.store(true, Ordering::Relaxed);
            fail_all(std::mem::take(&mut h.done), e);
            return;
        }
        let done = std::mem::take(&mut h.done);
        let us: u64 = (done.iter())
            .map(|(c, _)| u64::try_from(c.age().as_micros()).unwrap_or(u64::MAX))
            .fold(0, u64::saturating_add);
        self.s
            .commits
            .fetch_add(done.len() as u64, Ordering::Relaxed);
        self.s.commit_us.fetch_add(us, Ordering::Relaxed);
        for (c, r) in done {
            c.complete(r);
        }
    }

    /// Closed: what was committed unsynced is made durable.
    pub(super) fn close(&mut self) {
        if self.durable < self.batch_no && !self.s.failed.load(Ordering::Relaxed) {
            let ids = KvOp::Put(vec![T_IDS], ids(self.ids.0, self.ids.1));
            if self.s.kv.commit(vec![ids], true).is_ok() {
                self.durable = self.batch_no;
            }
        }
    }

    /// Commit the batch; without `sync` (every job unsynced) the KV's sync
    /// is skipped if nothing else needs it.
    fn commit(&mut self, h: &mut Handoff) -> Result<()> {
        let sync = h.sync;
        let b = &mut h.batch;
        let s = self.s.clone();
        let n = self.batch_no;
        // Deferred data written after earlier commits is synced only when
        // it rides along a data sync anyway, when there are many records,
        // or when much freed space waits for their deletion (space freed
        // while a deferred record of its batch or an earlier one lives is
        // not reused: a crash would replay the record into it). Until then
        // the records stay (a crash replays them) and one device flush per
        // batch (the KV's) suffices.
        let quarantined: u64 = self.quarantine.iter().map(|q| q.2).sum();
        let free = s.free_bytes.load(Ordering::Relaxed);
        let pressure = !self.quarantine.is_empty() && quarantined >= QUARANTINE_MAX.min(free / 8);
        let flush_deferred = !self.unsynced.is_empty()
            && (b.wrote_data || self.unsynced.len() >= DEFERRED_SYNC_MAX || pressure || h.release);
        // Data on the device (new extents, deferred records written in
        // place after the commit) must never outlive a lost commit of the
        // metadata it replaces: a batch that put any there is synced. So
        // is one under quarantine pressure (freed space waits for the
        // batch that freed it to be durable).
        let mut synced_through = None;
        // A background sync of deferred data that has ended (or, before a
        // sync here, that is waited for): its records go.
        if let Some(f) = self.flushing.take() {
            let r = if b.wrote_data || flush_deferred || h.release {
                Some(f.done.recv().unwrap_or_else(|_| Err(closed_flusher())))
            } else {
                f.done.try_recv().ok()
            };
            match r {
                Some(r) => {
                    r.map_err(io)?;
                    self.delete_next.extend(f.keys);
                    synced_through = Some(f.upto);
                }
                None => self.flushing = Some(f),
            }
        }
        if b.wrote_data || flush_deferred {
            s.dev.sync_data().map_err(io)?;
        }
        if flush_deferred {
            self.delete_next
                .extend(self.unsynced.drain(..).map(|(_, k)| k));
            synced_through = Some(n);
        }
        // Deletions of deferred records are made durable at once (so
        // `deleted_through` may move).
        let sync = sync
            || b.wrote_data
            || flush_deferred
            || !b.records.is_empty()
            || pressure
            || !self.delete_next.is_empty();
        let mut ops: Vec<KvOp> = std::mem::take(&mut b.kv)
            .into_iter()
            .map(|(k, v)| match v {
                Some(v) => KvOp::Put(k, v),
                None => KvOp::Delete(k),
            })
            .collect();
        ops.append(&mut h.alloc_ops);
        for (k, off, bytes) in &b.records {
            ops.push(KvOp::Put(k.clone(), encode_deferred(*off, bytes)));
        }
        ops.extend(self.delete_next.drain(..).map(KvOp::Delete));
        self.ids = h.ids;
        ops.push(KvOp::Put(vec![T_IDS], ids(h.ids.0, h.ids.1)));
        if trace() {
            let (keys, values) = ops.iter().fold((0, 0), |(k, v), op| match op {
                KvOp::Put(key, val) => (k + key.len(), v + val.len()),
                KvOp::Delete(key) => (k + key.len(), v),
            });
            eprintln!(
                "batch kv: {} ops, {keys} key bytes, {values} value bytes",
                ops.len()
            );
        }
        {
            let _g = s.view.write().map_err(|_| StoreError::Closed)?;
            // Cached reads of what this batch changes in place or frees
            // go before any reader can see the batch.
            for (_, off, bytes) in &b.records {
                s.cache.invalidate(*off, bytes.len() as u64);
            }
            for &(off, len) in &b.freed {
                s.cache.invalidate(off, len);
            }
            s.kv.commit(ops, sync)?;
            s.deferred
                .lock()
                .map_err(|_| StoreError::Closed)?
                .extend(std::mem::take(&mut b.deferred));
        }
        if sync {
            self.durable = n + 1;
        }
        if let Some(t) = synced_through {
            self.deleted_through = self.deleted_through.max(t);
        } else if self.unsynced.is_empty() && self.flushing.is_none() {
            self.deleted_through = n;
        }
        if !b.records.is_empty() {
            // Into the page cache now (readers then see it there), onto
            // the platter with a later sync.
            for (_, off, bytes) in &b.records {
                s.dev.write_all_at(bytes, *off).map_err(io)?;
            }
            let _g = s.view.write().map_err(|_| StoreError::Closed)?;
            s.deferred.lock().map_err(|_| StoreError::Closed)?.clear();
            self.unsynced.extend(b.records.drain(..).map(|r| (n, r.0)));
        }
        let mut a = s.alloc.lock().map_err(|_| StoreError::Closed)?;
        let (dt, durable) = (self.deleted_through, self.durable);
        let ready = |&(f, _, _): &(u64, u64, u64)| f < n && f < dt && f < durable;
        for &(_, off, len) in self.quarantine.iter().filter(|q| ready(q)) {
            a.make_available(off, len);
        }
        self.quarantine.retain(|q| !ready(q));
        self.quarantine
            .extend(b.freed.drain(..).map(|(o, l)| (n, o, l)));
        s.free_bytes.store(a.free_bytes(), Ordering::Relaxed);
        drop(a);
        self.batch_no += 1;
        if self.flushing.is_none() && self.unsynced.len() >= DEFERRED_SYNC_MAX {
            // Many records written in place: sync them beside the next
            // commits instead of stalling one (a sync of 1,024 scattered
            // blocks took about 20 ms, a quarter of the committer's time).
            // Every record of batches up to this one is among them.
            let keys = self.unsynced.drain(..).map(|(_, k)| k).collect();
            let (tx, rx) = std::sync::mpsc::channel();
            let s2 = s.clone();
            let spawned = std::thread::Builder::new()
                .name("loligo-store-flush".into())
                .spawn(move || {
                    let _ = tx.send(s2.dev.sync_data());
                });
            let done = if spawned.is_err() {
                // No thread: sync here.
                s.dev.sync_data().map_err(io)?;
                let (tx, rx2) = std::sync::mpsc::channel();
                let _ = tx.send(Ok(()));
                rx2
            } else {
                rx
            };
            self.flushing = Some(Flush {
                upto: n + 1,
                keys,
                done,
            });
        }
        Ok(())
    }
}

fn closed_flusher() -> std::io::Error {
    std::io::Error::other("the deferred data's sync thread ended without an answer")
}

/// Complete every job with `e`.
fn fail_all(done: Vec<(Completer, Result<()>)>, e: StoreError) {
    for (c, _) in done {
        c.complete(Err(e.clone()));
    }
}

/// Unsynced deferred records that force a sync at the next commit.
const DEFERRED_SYNC_MAX: usize = 1024;
/// Freed bytes waiting for deferred records' deletion that force a sync
/// at the next commit (or an eighth of the free space, if less).
const QUARANTINE_MAX: u64 = 64 << 20;

use crate::store::Completer;

/// One transaction being prepared: reads see the KV, then the batch, then
/// this transaction's own changes.
struct Ctx<'a> {
    s: &'a Shared,
    batch: &'a Batch,
    kv: Overlay,
    /// Onodes this transaction changed (`None`: removed), decoded: an
    /// object's ops read and change it here, and it is encoded once.
    onodes: HashMap<Vec<u8>, Option<Onode>>,
    deferred: HashMap<u64, Arc<Vec<u8>>>,
    records: Vec<(Vec<u8>, u64, Vec<u8>)>,
    freed: Vec<(u64, u64)>,
    /// Space this transaction committed (reserved pieces included).
    allocated: Vec<(u64, u64)>,
    /// Caller reservations this transaction used.
    consumed: Vec<Vec<(u64, u64)>>,
    alloc: &'a std::sync::Mutex<Allocator>,
    next_blob: &'a mut u64,
    next_seq: &'a mut u64,
    wrote_data: bool,
    /// A collection this transaction found to exist (until an op creates
    /// or removes one).
    known_coll: std::cell::Cell<Option<CollectionId>>,
}

impl Ctx<'_> {
    fn get(&self, k: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.kv.get(k) {
            return Ok(v.clone());
        }
        if let Some(v) = self.batch.kv.get(k) {
            return Ok(v.clone());
        }
        self.s.kv.get(k)
    }

    fn put(&mut self, k: Vec<u8>, v: Vec<u8>) {
        self.kv.insert(k, Some(v));
    }

    fn del(&mut self, k: Vec<u8>) {
        self.kv.insert(k, None);
    }

    /// Every live pair with a key in `[start, end)`, merged over the layers.
    fn scan(&self, start: &[u8], end: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut m: BTreeMap<Vec<u8>, Option<Vec<u8>>> = self
            .s
            .kv
            .scan(start, Some(end), usize::MAX)?
            .into_iter()
            .map(|(k, v)| (k, Some(v)))
            .collect();
        for layer in [&self.batch.kv, &self.kv] {
            for (k, v) in layer.range(start.to_vec()..end.to_vec()) {
                m.insert(k.clone(), v.clone());
            }
        }
        Ok(m.into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect())
    }

    fn onode(&self, c: CollectionId, o: &ObjectId) -> Result<Option<Onode>> {
        let k = onode_key(c, o);
        if let Some(on) = self.onodes.get(&k) {
            return Ok(on.clone());
        }
        self.get(&k)?.map(|v| Onode::decode(&v)).transpose()
    }

    fn need_coll(&self, c: CollectionId) -> Result<()> {
        // Most transactions touch one collection, op after op.
        if self.known_coll.get() == Some(c) {
            return Ok(());
        }
        match self.get(&coll_prefix(T_COLL, c))? {
            Some(_) => {
                self.known_coll.set(Some(c));
                Ok(())
            }
            None => Err(StoreError::NoCollection(c)),
        }
    }

    /// A blob's record; with [`CsumPlace::Chunked`] its `csums` are zeros
    /// (see [`Ctx::blob`] for all of it).
    fn blob_head(&self, id: u64) -> Result<(Blob, CsumPlace)> {
        let v = self
            .get(&u64_key(T_BLOB, id))?
            .ok_or_else(|| StoreError::Corrupt(format!("blob {id} is referenced but missing")))?;
        Blob::decode_head(&v)
    }

    /// A blob with all its checksums.
    fn blob(&self, id: u64) -> Result<Blob> {
        let (mut b, place) = self.blob_head(id)?;
        for i in 0..place.chunks() {
            self.load_chunk(id, &mut b, i)?;
        }
        Ok(b)
    }

    fn load_chunk(&self, id: u64, b: &mut Blob, i: u64) -> Result<()> {
        let v = self
            .get(&csum_key(id, i))?
            .ok_or_else(|| StoreError::Corrupt(format!("blob {id}: checksum chunk {i} missing")))?;
        b.fill_chunk(i, &v)
    }

    /// Store a blob whole: its record and every checksum chunk.
    fn put_blob(&mut self, id: u64, b: &Blob) {
        self.put(u64_key(T_BLOB, id), b.encode_head());
        for i in 0..b.csum_place().chunks() {
            self.put(csum_key(id, i), b.csum_chunk(i));
        }
    }

    /// Store a blob's record only, its checksums being unchanged and
    /// stored at `stored`. A record of an older store that kept a large
    /// blob's checksums inline is rewritten whole, into chunks.
    fn put_blob_head(&mut self, id: u64, b: &Blob, stored: CsumPlace) {
        if stored != b.csum_place() {
            self.put_blob(id, b);
            return;
        }
        self.put(u64_key(T_BLOB, id), b.encode_head());
    }

    /// Replace blocks `first..` of blob `id` (uncompressed, referenced by
    /// one extent; `b` and `place` its record as [`Ctx::blob_head`] read
    /// it) with `buf`, whole blocks: copy-on-write into newly allocated
    /// places, the old ones freed (`cow`), or in place through deferred
    /// records. Rewrites only the blob's record or the checksum chunks the
    /// blocks fall in.
    fn rewrite_blocks(
        &mut self,
        id: u64,
        (mut b, place): (Blob, CsumPlace),
        first: u64,
        buf: &[u8],
        cow: bool,
    ) -> Result<()> {
        let bs = self.s.bs;
        let n = buf.len() as u64 / bs;
        let last = first + n;
        if n == 0 || last > b.csums.len() as u64 {
            return Err(StoreError::Corrupt(format!(
                "blob {id}: block {last} past its end"
            )));
        }
        let chunk = CSUM_CHUNK as u64;
        let chunks = match place {
            CsumPlace::Inline => 0..0,
            CsumPlace::Chunked { .. } => first / chunk..(last - 1) / chunk + 1,
        };
        // The chunks' moved blocks are needed whatever is rewritten.
        for i in chunks.clone() {
            self.load_chunk(id, &mut b, i)?;
        }
        for (i, blk) in (first..).zip(buf.chunks(bs as usize)) {
            b.csums[i as usize] = csum(blk);
        }
        let old: Vec<u64> = (first..last).map(|i| b.block_at(i, bs)).collect();
        if cow {
            let mut i = first;
            for (doff, dlen) in self.allocate(n * bs)? {
                let from = ((i - first) * bs) as usize;
                // Through the page cache: the batch's one sync writes every
                // such block before its metadata commits.
                self.s
                    .dev
                    .write_all_at(&buf[from..from + dlen as usize], doff)
                    .map_err(io)?;
                for at in (doff..doff + dlen).step_by(bs as usize) {
                    if at == b.disk_off + i * bs {
                        b.moved.remove(&i);
                    } else {
                        b.moved.insert(i, at);
                    }
                    i += 1;
                }
            }
            self.wrote_data = true;
            for (off, len) in runs(&old, bs) {
                // Space a damaged record names twice is freed once.
                if self.lock()?.free(off, len) {
                    self.freed.push((off, len));
                }
            }
        } else {
            let mut from = 0usize;
            for (off, len) in runs(&old, bs) {
                let to = from + len as usize;
                self.defer(off, buf[from..to].to_vec());
                from = to;
            }
        }
        if chunks.is_empty() {
            self.put_blob_head(id, &b, place);
        } else {
            for i in chunks {
                self.put(csum_key(id, i), b.csum_chunk(i));
            }
        }
        Ok(())
    }

    /// Add `delta` extent references to a blob; free it at zero.
    fn refs(&mut self, id: u64, delta: i64) -> Result<()> {
        if delta == 0 {
            return Ok(());
        }
        let (mut b, place) = self.blob_head(id)?;
        let n = b.refs as i64 + delta;
        if n < 0 {
            return Err(StoreError::Corrupt(format!(
                "blob {id} reference count below zero"
            )));
        }
        if n == 0 {
            // Moved blocks of a large blob are listed in its chunks.
            let b = match place {
                CsumPlace::Inline => b,
                CsumPlace::Chunked { .. } => self.blob(id)?,
            };
            self.del(u64_key(T_BLOB, id));
            for i in 0..place.chunks() {
                self.del(csum_key(id, i));
            }
            for (off, len) in b.spans(self.s.bs) {
                // Space a damaged record names twice is freed once.
                if self.lock()?.free(off, len) {
                    self.freed.push((off, len));
                }
            }
        } else {
            b.refs = n as u64;
            self.put_blob_head(id, &b, place);
        }
        Ok(())
    }

    fn read_obj(&self, oid: &ObjectId, on: &Onode, off: u64, len: u64) -> Result<AlignedBuf> {
        let s = self.s;
        let mut buf = AlignedBuf::zeroed(len as usize);
        if on.inline.is_none()
            && on
                .extents
                .iter()
                .all(|x| x.loff + x.len <= off || x.loff >= off + len)
        {
            return Ok(buf);
        }
        let mut pending: HashMap<u64, Arc<Vec<u8>>> = self.batch.deferred.clone();
        pending.extend(self.deferred.iter().map(|(k, v)| (*k, v.clone())));
        read_logical_into(
            s,
            oid,
            on,
            off,
            buf.as_mut_slice(),
            &mut |id| self.blob(id),
            &mut |d, n| read_blocks(s, &pending, d, n),
        )?;
        Ok(buf)
    }

    /// Drop `[a, b)` (block aligned) from the extent map.
    fn punch(&mut self, on: &mut Onode, a: u64, b: u64) -> Result<()> {
        let mut out = Vec::with_capacity(on.extents.len() + 1);
        for x in std::mem::take(&mut on.extents) {
            let (xs, xe) = (x.loff, x.loff + x.len);
            if xe <= a || xs >= b {
                out.push(x);
                continue;
            }
            let mut pieces = 0i64;
            if xs < a {
                out.push(Extent { len: a - xs, ..x });
                pieces += 1;
            }
            if xe > b {
                out.push(Extent {
                    loff: b,
                    len: xe - b,
                    blob: x.blob,
                    boff: x.boff + (b - xs),
                });
                pieces += 1;
            }
            self.refs(x.blob, pieces - 1)?;
        }
        out.sort_by_key(|x| x.loff);
        on.extents = out;
        Ok(())
    }

    /// Write `data` at `off`, keeping whole blocks: in place through the KV
    /// for small overwrites of unshared data, else into new space.
    fn write(
        &mut self,
        oid: &ObjectId,
        on: &mut Onode,
        off: u64,
        data: &[u8],
        comp: Compression,
    ) -> Result<()> {
        let bs = self.s.bs;
        let end = off + data.len() as u64;
        if data.is_empty() {
            on.size = on.size.max(end);
            return Ok(());
        }
        let a = off / bs * bs;
        let b = end.div_ceil(bs) * bs;
        // Old bytes are needed only where the write leaves part of a block.
        let whole = off == a && end == b;
        let covered = on.extents.iter().any(|x| x.loff < b && x.loff + x.len > a);
        let abuf = if covered && !whole {
            let mut abuf = self.read_obj(oid, on, a, b - a)?;
            let buf = abuf.as_mut_slice();
            // Bytes past the object's end inside the block stay zero.
            let keep = on.size.max(end);
            if keep < b {
                buf[(keep - a) as usize..].fill(0);
            }
            buf[(off - a) as usize..(end - a) as usize].copy_from_slice(data);
            abuf
        } else {
            // Nothing stored there yet, or all of it replaced: the blocks
            // are zeros around the data.
            AlignedBuf::with_content((off - a) as usize, data, (b - a) as usize)
        };
        let buf = abuf.as_slice();
        let small = b - a <= self.s.deferred_max;
        if small {
            if let Some(x) = on
                .extents
                .iter()
                .find(|x| x.loff <= a && x.loff + x.len >= b)
                .copied()
            {
                let head = self.blob_head(x.blob)?;
                // (Blocks of a blob with larger checksum units are never
                // rewritten: the write goes to new space.)
                if head.0.refs == 1 && head.0.comp == 0 && head.0.csum_shift == 0 {
                    let boff = x.boff + (a - x.loff);
                    let cow = self.cow(buf);
                    self.rewrite_blocks(x.blob, head, boff / bs, buf, cow)?;
                    on.size = on.size.max(end);
                    return Ok(());
                }
            }
        }
        if !small && comp == Compression::Lz4 && self.write_compressed(on, a, buf)? {
            on.size = on.size.max(end);
            return Ok(());
        }
        let pieces = self.allocate(b - a)?;
        let cow = small && self.cow(buf);
        let shift = csum_shift(on, bs);
        self.punch(on, a, b)?;
        let mut lo = a;
        for (doff, dlen) in pieces {
            let part = &buf[(lo - a) as usize..(lo - a + dlen) as usize];
            let csums = part.chunks((bs << shift) as usize).map(csum).collect();
            let id = self.new_blob(doff, dlen, csums, shift);
            if cow {
                // Through the page cache, synced with the batch.
                self.s.dev.write_all_at(part, doff).map_err(io)?;
                self.wrote_data = true;
            } else if small {
                self.defer(doff, part.to_vec());
            } else {
                // Large: straight to the device, bypassing the page cache
                // when O_DIRECT is available (offsets, lengths and the
                // buffer are block aligned).
                let dev = self.s.dev_direct.as_ref().unwrap_or(&self.s.dev);
                dev.write_all_at(part, doff).map_err(io)?;
                self.wrote_data = true;
            }
            on.extents.push(Extent {
                loff: lo,
                len: dlen,
                blob: id,
                boff: 0,
            });
            lo += dlen;
        }
        on.extents.sort_by_key(|x| x.loff);
        on.size = on.size.max(end);
        Ok(())
    }

    /// Whether small write `buf` goes copy-on-write (else deferred): see
    /// [`SmallWrites`].
    fn cow(&self, buf: &[u8]) -> bool {
        match self.s.small_writes {
            SmallWrites::CopyOnWrite => true,
            SmallWrites::Deferred => false,
            SmallWrites::Auto => lz4_flex::block::compress(buf).len() * 4 > buf.len(),
        }
    }

    /// `write_full` of a large object whose data the caller already wrote
    /// to space it reserved, with its checksums.
    fn write_full_prepared(
        &mut self,
        c: CollectionId,
        oid: &ObjectId,
        len: u64,
        p: &Prepared,
    ) -> Result<()> {
        let mut on = self.obj(c, oid, true)?;
        self.punch(&mut on, 0, u64::MAX)?;
        on.inline = None;
        self.lock()?.commit_reserved(&p.pieces);
        self.allocated.extend(p.pieces.iter().copied());
        self.consumed.push(p.pieces.clone());
        let mut lo = 0u64;
        debug_assert_eq!(p.pieces.len(), p.csums.len());
        for (&(doff, dlen), csums) in p.pieces.iter().zip(&p.csums) {
            let id = self.new_blob(doff, dlen, csums.clone(), p.csum_shift);
            on.extents.push(Extent {
                loff: lo,
                len: dlen,
                blob: id,
                boff: 0,
            });
            lo += dlen;
        }
        self.wrote_data = true;
        on.size = len;
        self.save(c, oid, on);
        Ok(())
    }

    /// A new uncompressed blob with one reference and checksum units of
    /// `2^csum_shift` blocks; returns its id.
    fn new_blob(&mut self, disk_off: u64, len: u64, csums: Vec<u32>, csum_shift: u8) -> u64 {
        debug_assert_eq!(
            csums.len() as u64,
            Blob::csum_count(len, self.s.bs << csum_shift)
        );
        let id = *self.next_blob;
        *self.next_blob += 1;
        self.put_blob(
            id,
            &Blob {
                disk_off,
                len,
                refs: 1,
                csums,
                comp: 0,
                clen: 0,
                raw_len: 0,
                moved: BTreeMap::new(),
                csum_shift,
            },
        );
        id
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Allocator>> {
        self.alloc.lock().map_err(|_| StoreError::Closed)
    }

    /// Allocate (and commit) space for this transaction.
    fn allocate(&mut self, len: u64) -> Result<Vec<(u64, u64)>> {
        let mut a = self.lock()?;
        let free = a.free_bytes();
        let pieces = a
            .alloc(len)
            .ok_or(StoreError::NoSpace { needed: len, free })?;
        drop(a);
        self.allocated.extend(pieces.iter().copied());
        Ok(pieces)
    }

    /// Store `buf` (logical `[a, a + len)`, block aligned) LZ4-compressed
    /// in one new blob if that saves at least an eighth; `false` (nothing
    /// done) otherwise.
    fn write_compressed(&mut self, on: &mut Onode, a: u64, buf: &[u8]) -> Result<bool> {
        let bs = self.s.bs;
        let packed = lz4_flex::block::compress(buf);
        let stored = (packed.len() as u64).div_ceil(bs) * bs;
        if stored * 8 > buf.len() as u64 * 7 {
            return Ok(false);
        }
        let pieces = {
            let mut a = self.lock()?;
            match a.reserve(stored) {
                Some(p) if p.len() == 1 => {
                    a.commit_reserved(&p);
                    p
                }
                Some(p) => {
                    a.unreserve(&p);
                    return Ok(false);
                }
                None => return Ok(false),
            }
        };
        let doff = pieces[0].0;
        self.allocated.push((doff, stored));
        self.punch(on, a, a + buf.len() as u64)?;
        let out = AlignedBuf::with_content(0, &packed, stored as usize);
        let dev = self.s.dev_direct.as_ref().unwrap_or(&self.s.dev);
        dev.write_all_at(out.as_slice(), doff).map_err(io)?;
        self.wrote_data = true;
        let id = *self.next_blob;
        *self.next_blob += 1;
        let csums = out.as_slice().chunks(bs as usize).map(csum).collect();
        self.put_blob(
            id,
            &Blob {
                disk_off: doff,
                len: stored,
                refs: 1,
                csums,
                comp: Compression::Lz4.code(),
                clen: packed.len() as u64,
                raw_len: buf.len() as u64,
                moved: BTreeMap::new(),
                csum_shift: 0,
            },
        );
        on.extents.push(Extent {
            loff: a,
            len: buf.len() as u64,
            blob: id,
            boff: 0,
        });
        on.extents.sort_by_key(|x| x.loff);
        Ok(true)
    }

    /// How writes to object `on` of collection `c` are stored: `Lz4`
    /// when the collection's setting applies to the object's allocation
    /// hint, else `None`.
    fn compression(&self, c: CollectionId, on: &Onode) -> Result<Compression> {
        let v = self
            .get(&coll_prefix(T_COLL, c))?
            .ok_or(StoreError::NoCollection(c))?;
        let set = Compression::from_code(v.first().copied().unwrap_or(0))
            .ok_or_else(|| StoreError::Corrupt(format!("unknown compression on {c}")))?;
        Ok(if set.applies(AllocHint::of_attrs(&on.attrs).as_ref()) {
            Compression::Lz4
        } else {
            Compression::None
        })
    }

    fn defer(&mut self, disk_off: u64, bytes: Vec<u8>) {
        let bs = self.s.bs as usize;
        for (i, blk) in bytes.chunks(bs).enumerate() {
            self.deferred
                .insert(disk_off + (i * bs) as u64, Arc::new(blk.to_vec()));
        }
        let seq = *self.next_seq;
        *self.next_seq += 1;
        self.records
            .push((u64_key(T_DEFERRED, seq), disk_off, bytes));
    }

    /// Zero `[off, off + len)`: whole blocks become holes, partial ones are
    /// rewritten.
    fn zero(&mut self, oid: &ObjectId, on: &mut Onode, off: u64, len: u64) -> Result<()> {
        let bs = self.s.bs;
        let end = off + len;
        let (a, b) = (off.div_ceil(bs) * bs, end / bs * bs);
        if a < b {
            self.punch(on, a, b)?;
            let head = (off, a - off);
            let tail = (b, end - b);
            for (o, l) in [head, tail] {
                if l > 0 && o < on.size {
                    let l = l.min(on.size - o);
                    self.write(oid, on, o, &vec![0; l as usize], Compression::None)?;
                }
            }
        } else if off < on.size {
            let l = len.min(on.size - off);
            self.write(oid, on, off, &vec![0; l as usize], Compression::None)?;
        }
        on.size = on.size.max(end);
        Ok(())
    }

    fn truncate(&mut self, oid: &ObjectId, on: &mut Onode, size: u64) -> Result<()> {
        let bs = self.s.bs;
        if size < on.size {
            let cut = size.div_ceil(bs) * bs;
            self.punch(on, cut, u64::MAX)?;
            if size < cut && size < on.size {
                let l = cut.min(on.size) - size;
                self.write(oid, on, size, &vec![0; l as usize], Compression::None)?;
            }
        }
        on.size = size;
        Ok(())
    }

    /// Whether `on` can hold its data inline once it is `new_size` bytes,
    /// making it inline if it was only holes. `false`: its data goes to
    /// blocks (see [`Ctx::spill`]).
    fn inline_for(&self, on: &mut Onode, new_size: u64) -> bool {
        if new_size > self.s.inline_max {
            return false;
        }
        if on.inline.is_none() {
            if !on.extents.is_empty() {
                return false;
            }
            // Holes only (or nothing yet): as inline zeros, at most as
            // many as the result keeps (a sparse object of any size may
            // be truncated to a small one).
            on.inline = Some(vec![0; on.size.min(new_size) as usize]);
        }
        true
    }

    /// Move an inline object's data to blocks (it grows past the inline
    /// limit, or the limit went down).
    fn spill(&mut self, oid: &ObjectId, on: &mut Onode, comp: Compression) -> Result<()> {
        if let Some(d) = on.inline.take() {
            on.size = 0;
            self.write(oid, on, 0, &d, comp)?;
        }
        Ok(())
    }

    fn remove_obj(&mut self, c: CollectionId, o: &ObjectId, on: &Onode) -> Result<()> {
        for x in &on.extents {
            self.refs(x.blob, -1)?;
        }
        if on.omap {
            let p = omap_prefix(c, o);
            for (k, _) in self.scan(&p, &prefix_end(&p))? {
                self.del(k);
            }
        }
        self.onodes.insert(onode_key(c, o), None);
        Ok(())
    }

    fn obj(&self, c: CollectionId, o: &ObjectId, create: bool) -> Result<Onode> {
        self.need_coll(c)?;
        match self.onode(c, o)? {
            Some(on) => Ok(on),
            None if create => Ok(Onode::default()),
            None => Err(StoreError::NoObject {
                coll: c,
                oid: o.clone(),
            }),
        }
    }

    /// Keep `on` as the object's onode (encoded once, when the
    /// transaction's ops are done: see [`Ctx::flush_onodes`]).
    fn save(&mut self, c: CollectionId, o: &ObjectId, on: Onode) {
        self.onodes.insert(onode_key(c, o), Some(on));
    }

    /// Write the onodes this transaction changed into its overlay.
    fn flush_onodes(&mut self) {
        for (k, on) in std::mem::take(&mut self.onodes) {
            self.kv.insert(k, on.map(|on| on.encode()));
        }
    }

    fn op(&mut self, op: &Op) -> Result<()> {
        if matches!(op, Op::CreateCollection(_) | Op::RemoveCollection(_)) {
            self.known_coll.set(None);
        }
        match op {
            Op::CreateCollection(c) => {
                if self.get(&coll_prefix(T_COLL, *c))?.is_some() {
                    return Err(StoreError::CollectionExists(*c));
                }
                self.put(coll_prefix(T_COLL, *c), Vec::new());
            }
            Op::RemoveCollection(c) => self.remove_coll(*c)?,
            Op::SetCompression(c, algo) => {
                self.need_coll(*c)?;
                self.put(coll_prefix(T_COLL, *c), vec![algo.code()]);
            }
            Op::Touch(c, o) => {
                let on = self.obj(*c, o, true)?;
                self.save(*c, o, on);
            }
            Op::Write {
                coll,
                oid,
                offset,
                data,
            } => self.write_op(*coll, oid, *offset, Some(data), data.len() as u64)?,
            Op::WriteFull { coll, oid, data } => self.write_full_op(*coll, oid, data)?,
            Op::Zero {
                coll,
                oid,
                offset,
                len,
            } => self.write_op(*coll, oid, *offset, None, *len)?,
            Op::Truncate { coll, oid, size } => self.truncate_op(*coll, oid, *size)?,
            Op::Remove(c, o) => {
                let on = self.obj(*c, o, false)?;
                self.remove_obj(*c, o, &on)?;
            }
            Op::Clone { coll, src, dst } => self.clone_op(*coll, src, dst)?,
            Op::MoveObjects { from, to, oids } => {
                self.need_coll(*to)?;
                for o in oids {
                    self.move_op(*from, *to, o)?;
                }
            }
            Op::SetAttrs { coll, oid, attrs } => {
                let mut on = self.obj(*coll, oid, true)?;
                for (k, v) in attrs {
                    on.attrs.insert(k.clone(), v.clone());
                }
                self.save(*coll, oid, on);
            }
            Op::RmAttr { coll, oid, name } => {
                let mut on = self.obj(*coll, oid, false)?;
                if on.attrs.remove(name).is_none() {
                    return Err(StoreError::NoAttr {
                        oid: oid.clone(),
                        name: name.clone(),
                    });
                }
                self.save(*coll, oid, on);
            }
            Op::OmapSetKeys { coll, oid, kvs } => {
                let mut on = self.obj(*coll, oid, true)?;
                on.omap |= !kvs.is_empty();
                self.save(*coll, oid, on);
                let p = omap_prefix(*coll, oid);
                for (k, v) in kvs {
                    let mut key = p.clone();
                    key.extend_from_slice(k);
                    self.put(key, v.clone());
                }
            }
            Op::OmapRmKeys { coll, oid, keys } => {
                self.obj(*coll, oid, false)?;
                let p = omap_prefix(*coll, oid);
                for k in keys {
                    let mut key = p.clone();
                    key.extend_from_slice(k);
                    self.del(key);
                }
            }
            Op::OmapRmRange {
                coll,
                oid,
                start,
                end,
            } => {
                self.obj(*coll, oid, false)?;
                let p = omap_prefix(*coll, oid);
                let (mut s, mut e) = (p.clone(), p);
                s.extend_from_slice(start);
                e.extend_from_slice(end);
                for (k, _) in self.scan(&s, &e)? {
                    self.del(k);
                }
            }
            Op::OmapClear(c, o) => {
                let mut on = self.obj(*c, o, false)?;
                if on.omap {
                    let p = omap_prefix(*c, o);
                    for (k, _) in self.scan(&p, &prefix_end(&p))? {
                        self.del(k);
                    }
                }
                on.header.clear();
                on.omap = false;
                self.save(*c, o, on);
            }
            Op::OmapSetHeader { coll, oid, header } => {
                let mut on = self.obj(*coll, oid, true)?;
                on.header = header.clone();
                self.save(*coll, oid, on);
            }
            Op::SetRecord { coll, key, value } => {
                self.need_coll(*coll)?;
                self.put(record_key(*coll, key), value.clone());
            }
            Op::RmRecord { coll, key } => {
                self.need_coll(*coll)?;
                self.del(record_key(*coll, key));
            }
        }
        Ok(())
    }

    /// Remove an empty collection and its records.
    fn remove_coll(&mut self, c: CollectionId) -> Result<()> {
        self.need_coll(c)?;
        // The scan reads the overlay: this transaction's onodes go there
        // first.
        self.flush_onodes();
        let p = coll_prefix(T_ONODE, c);
        if !self.scan(&p, &prefix_end(&p))?.is_empty() {
            return Err(StoreError::CollectionNotEmpty(c));
        }
        let r = coll_prefix(T_RECORD, c);
        for (k, _) in self.scan(&r, &prefix_end(&r))? {
            self.del(k);
        }
        self.del(coll_prefix(T_COLL, c));
        self.known_coll.set(None);
        Ok(())
    }

    /// Write `data` (`None`: `len` zeros) at `offset`: inline while the
    /// object fits its onode, else through blobs (spilled first).
    fn write_op(
        &mut self,
        coll: CollectionId,
        oid: &ObjectId,
        offset: u64,
        data: Option<&[u8]>,
        len: u64,
    ) -> Result<()> {
        let mut on = self.obj(coll, oid, true)?;
        let end = offset.saturating_add(len);
        let grown = on.size.max(end);
        if self.inline_for(&mut on, grown) {
            let (o, e) = (offset as usize, end as usize);
            let d = on.inline.get_or_insert_with(Vec::new);
            if d.len() < e {
                d.resize(e, 0);
            }
            match data {
                Some(data) => d[o..e].copy_from_slice(data),
                None => d[o..e].fill(0),
            }
            on.size = d.len() as u64;
        } else {
            let comp = self.compression(coll, &on)?;
            self.spill(oid, &mut on, comp)?;
            match data {
                Some(data) => self.write(oid, &mut on, offset, data, comp)?,
                None => self.zero(oid, &mut on, offset, len)?,
            }
        }
        self.save(coll, oid, on);
        Ok(())
    }

    /// Replace the object's data with `data`.
    fn write_full_op(&mut self, coll: CollectionId, oid: &ObjectId, data: &[u8]) -> Result<()> {
        let mut on = self.obj(coll, oid, true)?;
        self.punch(&mut on, 0, u64::MAX)?;
        on.size = 0;
        on.inline = None;
        if data.len() as u64 <= self.s.inline_max {
            on.inline = Some(data.to_vec());
            on.size = data.len() as u64;
        } else {
            let comp = self.compression(coll, &on)?;
            self.write(oid, &mut on, 0, data, comp)?;
        }
        self.save(coll, oid, on);
        Ok(())
    }

    fn truncate_op(&mut self, coll: CollectionId, oid: &ObjectId, size: u64) -> Result<()> {
        let max = self.s.limits.object_size_max;
        if size > max {
            return Err(StoreError::TooLarge(format!(
                "object of {size} bytes (limit {max})"
            )));
        }
        let mut on = self.obj(coll, oid, true)?;
        if self.inline_for(&mut on, size) {
            let d = on.inline.get_or_insert_with(Vec::new);
            d.resize(size as usize, 0);
            on.size = size;
        } else {
            let comp = self.compression(coll, &on)?;
            self.spill(oid, &mut on, comp)?;
            self.truncate(oid, &mut on, size)?;
        }
        self.save(coll, oid, on);
        Ok(())
    }

    /// `dst` becomes a copy of `src` sharing its blobs (its old self
    /// removed first), with a copy of its omap.
    /// Object `o` goes from collection `from` to `to`: its onode and omap
    /// rows are keyed anew; its blobs (and their references) stay.
    fn move_op(&mut self, from: CollectionId, to: CollectionId, o: &ObjectId) -> Result<()> {
        let on = self.obj(from, o, false)?;
        if self.onode(to, o)?.is_some() {
            return Err(StoreError::Invalid(format!(
                "object {o} moved into {to}, which holds it already"
            )));
        }
        if on.omap {
            let (sp, dp) = (omap_prefix(from, o), omap_prefix(to, o));
            for (k, v) in self.scan(&sp, &prefix_end(&sp))? {
                let mut nk = dp.clone();
                nk.extend_from_slice(&k[sp.len()..]);
                self.del(k);
                self.put(nk, v);
            }
        }
        self.onodes.insert(onode_key(from, o), None);
        self.save(to, o, on);
        Ok(())
    }

    fn clone_op(&mut self, coll: CollectionId, src: &ObjectId, dst: &ObjectId) -> Result<()> {
        let on = self.obj(coll, src, false)?;
        if src == dst {
            return Ok(());
        }
        if let Some(old) = self.onode(coll, dst)? {
            self.remove_obj(coll, dst, &old)?;
        }
        for x in &on.extents {
            self.refs(x.blob, 1)?;
        }
        if on.omap {
            let (sp, dp) = (omap_prefix(coll, src), omap_prefix(coll, dst));
            for (k, v) in self.scan(&sp, &prefix_end(&sp))? {
                let mut nk = dp.clone();
                nk.extend_from_slice(&k[sp.len()..]);
                self.put(nk, v);
            }
        }
        self.save(coll, dst, on);
        Ok(())
    }
}
