//! The `ObjectStore` trait every store implements, and `Commit`, the
//! handle that reports when a queued transaction is durable.
//!
//! A store must never complete a `Commit` with `Ok` before the
//! transaction is durable (for [`ObjectStore::queue_unsynced`]: before it
//! is applied), nor make a transaction durable without every transaction
//! queued before it.

use crate::error::{Result, StoreError};
use crate::names::{
    CollectionId, Limits, ObjectId, ObjectRead, ObjectStat, StoreStats, WholeObject,
};
use crate::txn::Transaction;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};

/// Every hash, as a listing range.
pub const ALL_HASHES: Range<u64> = 0..1 << 32;

/// A local object store: collections of objects with data, xattrs and an
/// omap, changed only by atomic transactions.
///
/// Reads see every transaction whose [`Commit`] has completed with `Ok`.
pub trait ObjectStore: Send + Sync {
    /// The limits transactions are checked against.
    fn limits(&self) -> &Limits;

    /// Queue a transaction. It is applied all or nothing; the handle
    /// completes with `Ok` once it is durable, or with the error that made
    /// the store reject it (then nothing of it was applied).
    fn queue_transaction(&self, t: Transaction) -> Commit;

    /// Queue a transaction that need not be durable yet: the handle
    /// completes with `Ok` once it is applied (reads see it). It becomes
    /// durable once a transaction queued after it through
    /// [`ObjectStore::queue_transaction`] completes: a store commits in
    /// queue order, so a crash keeps a prefix of what was queued, and an
    /// unsynced transaction is never durable without every one queued
    /// before it. Stores without a cheaper path make it durable at once.
    fn queue_unsynced(&self, t: Transaction) -> Commit {
        self.queue_transaction(t)
    }

    /// Queue a transaction and wait until it is durable.
    fn apply(&self, t: Transaction) -> Result<()> {
        self.queue_transaction(t).wait()
    }

    /// All collections, sorted.
    fn collections(&self) -> Result<Vec<CollectionId>>;
    fn collection_exists(&self, c: CollectionId) -> Result<bool>;
    fn exists(&self, c: CollectionId, o: &ObjectId) -> Result<bool>;
    fn stat(&self, c: CollectionId, o: &ObjectId) -> Result<ObjectStat>;
    /// Read several `(offset, length)` extents; each result is cut short at
    /// the end of the object (empty past it).
    fn read(&self, c: CollectionId, o: &ObjectId, extents: &[(u64, u64)]) -> Result<Vec<Vec<u8>>>;
    /// One extent, as [`ObjectStore::read`] reads it, in a shared buffer.
    /// Stores override it to hand large reads over without a copy (the
    /// block store reads them from the device straight into the buffer,
    /// and may answer from its cache of recent reads: what must check the
    /// device itself, a scrub, reads with [`ObjectStore::read`]).
    fn read_bytes(&self, c: CollectionId, o: &ObjectId, off: u64, len: u64) -> Result<Bytes> {
        Ok(Bytes::from(
            self.read(c, o, &[(off, len)])?.pop().unwrap_or_default(),
        ))
    }
    /// Extents of an object with its size and attributes, as of one
    /// moment: no transaction commits between reading them (`None`: no
    /// object). A caller that judges the bytes by the attributes needs
    /// this, since reads made one after another may straddle a commit
    /// (an EC shard read saw one shard's labels and, after a backfill
    /// chunk committed between, another shard's bytes).
    fn read_with_attrs(
        &self,
        c: CollectionId,
        o: &ObjectId,
        extents: &[(u64, u64)],
    ) -> Result<Option<ObjectRead>>;
    fn getattr(&self, c: CollectionId, o: &ObjectId, name: &str) -> Result<Vec<u8>>;
    fn getattrs(&self, c: CollectionId, o: &ObjectId) -> Result<BTreeMap<String, Vec<u8>>>;
    /// An object's size and one attribute (`None`: no object; no such
    /// attribute: `Some((stat, None))`). Stores override it to look the
    /// object up once.
    fn stat_attr(
        &self,
        c: CollectionId,
        o: &ObjectId,
        name: &str,
    ) -> Result<Option<(ObjectStat, Option<Vec<u8>>)>> {
        if !self.exists(c, o)? {
            return Ok(None);
        }
        let st = self.stat(c, o)?;
        match self.getattr(c, o, name) {
            Ok(v) => Ok(Some((st, Some(v)))),
            Err(StoreError::NoAttr { .. }) => Ok(Some((st, None))),
            Err(e) => Err(e),
        }
    }
    fn omap_header(&self, c: CollectionId, o: &ObjectId) -> Result<Vec<u8>>;
    /// An object's size, data (if `data`), attributes and omap header
    /// (`None`: no object). Stores override it to look the object up once.
    fn read_whole(&self, c: CollectionId, o: &ObjectId, data: bool) -> Result<Option<WholeObject>> {
        if !self.exists(c, o)? {
            return Ok(None);
        }
        let size = self.stat(c, o)?.size;
        let data = if data {
            self.read(c, o, &[(0, size)])?.pop().unwrap_or_default()
        } else {
            Vec::new()
        };
        Ok(Some(WholeObject {
            size,
            data,
            attrs: self.getattrs(c, o)?,
            omap_header: self.omap_header(c, o)?,
            omap: true,
        }))
    }
    /// The values of the given keys that exist.
    fn omap_get(
        &self,
        c: CollectionId,
        o: &ObjectId,
        keys: &[Vec<u8>],
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>>;
    /// Keys in `[start, end)` (`end: None` = to the last), in order, at most
    /// `limit` of them.
    fn omap_range(
        &self,
        c: CollectionId,
        o: &ObjectId,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// Objects whose hash is in `hashes`, from `start` (inclusive) in
    /// (hash, name) order, at most `limit`; also the next object after the
    /// page, if any, to continue from.
    fn list_range(
        &self,
        c: CollectionId,
        hashes: Range<u64>,
        start: Option<&ObjectId>,
        limit: usize,
    ) -> Result<(Vec<ObjectId>, Option<ObjectId>)>;
    /// As [`ObjectStore::list_range`] over the objects whose hash is in
    /// any of `hashes` (sorted, disjoint), with each object's attribute
    /// `name` (`None`: no such attribute). Stores override it to read each
    /// object's metadata once, in the listing, and to pass over the
    /// objects between the ranges in one iteration.
    #[allow(clippy::type_complexity)] // the listing's page and its next
    fn list_ranges_attr(
        &self,
        c: CollectionId,
        hashes: &[Range<u64>],
        start: Option<&ObjectId>,
        limit: usize,
        name: &str,
    ) -> Result<(Vec<(ObjectId, Option<Vec<u8>>)>, Option<ObjectId>)> {
        // Up to one object more than asked: it is the next page's start.
        let want = limit.saturating_add(1);
        let mut ids: Vec<ObjectId> = Vec::new();
        for r in hashes {
            if start.is_some_and(|s| r.end <= u64::from(s.hash)) {
                continue;
            }
            let from = start.filter(|s| r.contains(&u64::from(s.hash)));
            let (page, next) = self.list_range(c, r.clone(), from, want - ids.len())?;
            ids.extend(page);
            if let Some(n) = next {
                ids.push(n);
            }
            if ids.len() >= want {
                break;
            }
        }
        ids.truncate(want);
        let next = if ids.len() > limit { ids.pop() } else { None };
        let mut out = Vec::with_capacity(ids.len());
        for o in ids {
            let a = self.stat_attr(c, &o, name)?.and_then(|(_, v)| v);
            out.push((o, a));
        }
        Ok((out, next))
    }
    /// [`ObjectStore::list_range`] over every hash.
    fn list(
        &self,
        c: CollectionId,
        start: Option<&ObjectId>,
        limit: usize,
    ) -> Result<(Vec<ObjectId>, Option<ObjectId>)> {
        self.list_range(c, ALL_HASHES, start, limit)
    }
    fn record(&self, c: CollectionId, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Records with keys >= `start`, in order, at most `limit`.
    fn records(
        &self,
        c: CollectionId,
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// Space on the device.
    fn statfs(&self) -> Result<StoreStats>;
    /// Bytes and read requests the store has read from its device since
    /// it was opened (what recovery experiments hold to a read plan's
    /// theory; a store with no device reads nothing).
    fn device_reads(&self) -> (u64, u64) {
        (0, 0)
    }

    /// Transactions the store has committed durably since it was opened,
    /// and the microseconds they took in all, from queueing to
    /// completion (Ceph's commit latency; a store that does not measure
    /// says (0, 0)).
    fn commit_latency(&self) -> (u64, u64) {
        (0, 0)
    }
}

/// A shared store is a store: every call goes to the one it shares (for
/// callers that hold a store and hand it on, e.g. to a fault-injecting
/// wrapper).
impl<S: ObjectStore + ?Sized> ObjectStore for Arc<S> {
    fn limits(&self) -> &Limits {
        (**self).limits()
    }
    fn queue_transaction(&self, t: Transaction) -> Commit {
        (**self).queue_transaction(t)
    }
    fn queue_unsynced(&self, t: Transaction) -> Commit {
        (**self).queue_unsynced(t)
    }
    fn apply(&self, t: Transaction) -> Result<()> {
        (**self).apply(t)
    }
    fn collections(&self) -> Result<Vec<CollectionId>> {
        (**self).collections()
    }
    fn collection_exists(&self, c: CollectionId) -> Result<bool> {
        (**self).collection_exists(c)
    }
    fn exists(&self, c: CollectionId, o: &ObjectId) -> Result<bool> {
        (**self).exists(c, o)
    }
    fn stat(&self, c: CollectionId, o: &ObjectId) -> Result<ObjectStat> {
        (**self).stat(c, o)
    }
    fn read(&self, c: CollectionId, o: &ObjectId, extents: &[(u64, u64)]) -> Result<Vec<Vec<u8>>> {
        (**self).read(c, o, extents)
    }
    fn read_bytes(&self, c: CollectionId, o: &ObjectId, off: u64, len: u64) -> Result<Bytes> {
        (**self).read_bytes(c, o, off, len)
    }
    fn read_with_attrs(
        &self,
        c: CollectionId,
        o: &ObjectId,
        extents: &[(u64, u64)],
    ) -> Result<Option<ObjectRead>> {
        (**self).read_with_attrs(c, o, extents)
    }
    fn getattr(&self, c: CollectionId, o: &ObjectId, name: &str) -> Result<Vec<u8>> {
        (**self).getattr(c, o, name)
    }
    fn getattrs(&self, c: CollectionId, o: &ObjectId) -> Result<BTreeMap<String, Vec<u8>>> {
        (**self).getattrs(c, o)
    }
    fn stat_attr(
        &self,
        c: CollectionId,
        o: &ObjectId,
        name: &str,
    ) -> Result<Option<(ObjectStat, Option<Vec<u8>>)>> {
        (**self).stat_attr(c, o, name)
    }
    fn omap_header(&self, c: CollectionId, o: &ObjectId) -> Result<Vec<u8>> {
        (**self).omap_header(c, o)
    }
    fn read_whole(&self, c: CollectionId, o: &ObjectId, data: bool) -> Result<Option<WholeObject>> {
        (**self).read_whole(c, o, data)
    }
    fn omap_get(
        &self,
        c: CollectionId,
        o: &ObjectId,
        keys: &[Vec<u8>],
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        (**self).omap_get(c, o, keys)
    }
    fn omap_range(
        &self,
        c: CollectionId,
        o: &ObjectId,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        (**self).omap_range(c, o, start, end, limit)
    }
    fn list_range(
        &self,
        c: CollectionId,
        hashes: Range<u64>,
        start: Option<&ObjectId>,
        limit: usize,
    ) -> Result<(Vec<ObjectId>, Option<ObjectId>)> {
        (**self).list_range(c, hashes, start, limit)
    }
    #[allow(clippy::type_complexity)] // the listing's page and its next
    fn list_ranges_attr(
        &self,
        c: CollectionId,
        hashes: &[Range<u64>],
        start: Option<&ObjectId>,
        limit: usize,
        name: &str,
    ) -> Result<(Vec<(ObjectId, Option<Vec<u8>>)>, Option<ObjectId>)> {
        (**self).list_ranges_attr(c, hashes, start, limit, name)
    }
    fn list(
        &self,
        c: CollectionId,
        start: Option<&ObjectId>,
        limit: usize,
    ) -> Result<(Vec<ObjectId>, Option<ObjectId>)> {
        (**self).list(c, start, limit)
    }
    fn record(&self, c: CollectionId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        (**self).record(c, key)
    }
    fn records(
        &self,
        c: CollectionId,
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        (**self).records(c, start, limit)
    }
    fn statfs(&self) -> Result<StoreStats> {
        (**self).statfs()
    }
    fn device_reads(&self) -> (u64, u64) {
        (**self).device_reads()
    }
    fn commit_latency(&self) -> (u64, u64) {
        (**self).commit_latency()
    }
}

struct CommitState {
    slot: Mutex<Slot>,
    cv: Condvar,
}

/// A commit's outcome once known, and who waits for it.
#[derive(Default)]
struct Slot {
    result: Option<Result<()>>,
    waiter: Waiter,
}

/// Who is told when a commit completes (besides threads in `wait`).
#[derive(Default)]
enum Waiter {
    #[default]
    None,
    /// A task that polled the commit.
    Task(Waker),
    /// A call to make with the outcome (`Commit::on_complete`).
    Call(Box<dyn FnOnce(Result<()>) + Send>),
}

/// Completes when a transaction is durable (or rejected). Wait on it from
/// a thread, `.await` it, or have it call a function
/// (`Commit::on_complete`).
pub struct Commit {
    state: Arc<CommitState>,
}

/// The store's side of a [`Commit`]. Dropping it without completing
/// completes the commit with [`StoreError::Closed`].
pub struct Completer {
    state: Option<Arc<CommitState>>,
    /// When the commit was made (queued): its age at completion is the
    /// store's commit latency.
    born: std::time::Instant,
}

impl Commit {
    /// A commit that is already complete.
    pub fn ready(r: Result<()>) -> Commit {
        let (c, done) = Commit::pending();
        done.complete(r);
        c
    }

    /// A commit and the completer the store fires later.
    pub fn pending() -> (Commit, Completer) {
        let state = Arc::new(CommitState {
            slot: Mutex::new(Slot::default()),
            cv: Condvar::new(),
        });
        (
            Commit {
                state: state.clone(),
            },
            Completer {
                state: Some(state),
                born: std::time::Instant::now(),
            },
        )
    }

    /// Block until complete.
    pub fn wait(self) -> Result<()> {
        let mut g = self.state.slot.lock().map_err(|_| StoreError::Closed)?;
        loop {
            if let Some(r) = g.result.take() {
                return r;
            }
            g = self.state.cv.wait(g).map_err(|_| StoreError::Closed)?;
        }
    }

    /// Call `f` with the outcome once the commit completes: at once, in
    /// this thread, if it has; else in the thread that completes it or
    /// drops its completer (a store thread, perhaps holding the store's
    /// locks). So `f` must be short, must not block or call into the
    /// store, and must not drop the last handle on the store (whose drop
    /// joins that thread). Saves a task that would only wait for the
    /// commit and pass its outcome on.
    pub fn on_complete(self, f: impl FnOnce(Result<()>) + Send + 'static) {
        let now = match self.state.slot.lock() {
            Ok(mut g) => match g.result.take() {
                Some(r) => Some(r),
                None => {
                    g.waiter = Waiter::Call(Box::new(f));
                    return;
                }
            },
            Err(_) => Some(Err(StoreError::Closed)),
        };
        if let Some(r) = now {
            f(r);
        }
    }
}

impl Future for Commit {
    type Output = Result<()>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let Ok(mut g) = self.state.slot.lock() else {
            return Poll::Ready(Err(StoreError::Closed));
        };
        match g.result.take() {
            Some(r) => Poll::Ready(r),
            None => {
                g.waiter = Waiter::Task(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Completer {
    /// How long since the commit was made.
    pub fn age(&self) -> std::time::Duration {
        self.born.elapsed()
    }

    /// Report the outcome.
    pub fn complete(mut self, r: Result<()>) {
        self.fire(r);
    }

    fn fire(&mut self, r: Result<()>) {
        let Some(state) = self.state.take() else {
            return;
        };
        // (The waiter is told outside the lock: a call may take long.)
        let waiter = match state.slot.lock() {
            Ok(mut g) => match std::mem::take(&mut g.waiter) {
                Waiter::Call(f) => Some(Ok((f, r))),
                w => {
                    g.result = Some(r);
                    Some(Err(w))
                }
            },
            Err(_) => None,
        };
        state.cv.notify_all();
        match waiter {
            Some(Ok((f, r))) => f(r),
            Some(Err(Waiter::Task(w))) => w.wake(),
            _ => {}
        }
    }
}

impl Drop for Completer {
    fn drop(&mut self) {
        self.fire(Err(StoreError::Closed));
    }
}

/// Where a `list_range` scan starts: the later of `start` and the first
/// possible id of `hashes`; `None` when the range is empty.
pub fn list_from(hashes: &Range<u64>, start: Option<&ObjectId>) -> Option<ObjectId> {
    if hashes.start > u64::from(u32::MAX) || hashes.start >= hashes.end {
        return None;
    }
    let lo = ObjectId::new(hashes.start as u32, "");
    Some(match start {
        Some(s) if *s > lo => s.clone(),
        _ => lo,
    })
}

#[cfg(test)]
mod commit_tests {
    use super::*;
    use std::sync::mpsc;

    /// The outcome reaches a call registered before completion (in the
    /// completing thread), one registered after it (at once), and a call
    /// whose completer was dropped (as closed).
    #[test]
    fn on_complete_calls_with_the_outcome_whenever_it_was_registered() {
        let (tx, rx) = mpsc::channel();
        let (c, done) = Commit::pending();
        let t = tx.clone();
        c.on_complete(move |r| t.send((r.is_ok(), std::thread::current().id())).unwrap());
        assert!(rx.try_recv().is_err(), "not called before completion");
        let completer = std::thread::spawn(move || {
            done.complete(Ok(()));
            std::thread::current().id()
        });
        let completer = completer.join().unwrap();
        assert_eq!(rx.recv().unwrap(), (true, completer));

        let t = tx.clone();
        Commit::ready(Err(StoreError::Io("x".into())))
            .on_complete(move |r| t.send((r.is_ok(), std::thread::current().id())).unwrap());
        assert_eq!(rx.try_recv().unwrap(), (false, std::thread::current().id()));

        let (c, done) = Commit::pending();
        c.on_complete(move |r| {
            tx.send((
                matches!(r, Err(StoreError::Closed)),
                std::thread::current().id(),
            ))
            .unwrap()
        });
        drop(done);
        assert_eq!(rx.try_recv().unwrap(), (true, std::thread::current().id()));
    }

    /// Waiting threads and polling tasks still get the outcome, and a
    /// task that polled is woken.
    #[test]
    fn wait_and_poll_still_see_the_outcome() {
        let (c, done) = Commit::pending();
        let h = std::thread::spawn(move || c.wait());
        done.complete(Ok(()));
        assert!(h.join().unwrap().is_ok());

        struct Count(std::sync::atomic::AtomicU32);
        impl std::task::Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let count = Arc::new(Count(Default::default()));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let (mut c, done) = Commit::pending();
        assert!(Pin::new(&mut c).poll(&mut cx).is_pending());
        done.complete(Err(StoreError::Io("x".into())));
        assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(matches!(
            Pin::new(&mut c).poll(&mut cx),
            Poll::Ready(Err(StoreError::Io(_)))
        ));
    }
}
