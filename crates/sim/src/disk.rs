//! An OSD's disk in the simulator: its store behind a fault injector
//! (reads that fail with EIO), the transactions queued and not yet
//! committed, and what a crash keeps.
//!
//! Two kinds. `Mem`: a `MemStore` with the simulator's model of the
//! store's contract (a crash keeps a prefix, in queue order, of the
//! transactions committed unsynced and then of those queued). `Block`:
//! the real `BlockStore` on simulated media (`loligo_store::sim_media`),
//! whose crash is a power loss: queued transactions up to a random point
//! are committed, then the media keep what was synced and, of the rest,
//! what the seed says; the store is mounted again and must pass a deep
//! fsck. Its data goes to the device (no inline objects, copy-on-write
//! small writes, one thread of its own) so that a seed replays exactly.
//!
//! A disk must never keep a transaction without every one committed or
//! queued before it.

use loligo_store::sim_media::SimMedia;
use loligo_store::{
    BlockConfig, BlockStore, CollectionId, FaultyStore, MemStore, ObjectStore, SmallWrites,
    Transaction,
};
use loligo_testkit::Rng;
use std::collections::VecDeque;
use std::sync::Arc;

/// Which store a disk runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stores {
    /// `MemStore` with the simulator's crash model.
    Mem,
    /// `BlockStore` on simulated media that lose power.
    Block,
}

enum Kind {
    Mem {
        mem: Arc<MemStore>,
        /// Transactions committed unsynced (visible, not yet durable), in
        /// order; a crash keeps a prefix of them (and of the queue only
        /// if it keeps them all).
        volatile: Vec<Transaction>,
        /// The store as it was before `volatile` (what a crash goes back
        /// to).
        base: Option<MemStore>,
    },
    Block {
        media: SimMedia,
        /// Transactions committed unsynced since the last synced one.
        volatile: usize,
    },
}

/// What a crash did to a disk.
pub struct Crashed {
    /// Committed unsynced at the crash.
    pub volatile: usize,
    /// Queued at the crash.
    pub queued: usize,
    /// Of those queued, how many were kept (committed before the cut).
    pub kept: usize,
    /// Unsynced ones known lost (the model's count; the media do not
    /// tell).
    pub lost: usize,
}

/// An OSD's disk.
pub struct Disk {
    /// Its store: object reads fail when the simulation says so (a bad
    /// sector answers EIO).
    pub store: FaultyStore<Arc<dyn ObjectStore>>,
    /// Local transactions queued and not yet committed, in queue order,
    /// as (PG, tid, transaction, synced): a store commits in that order,
    /// all PGs together.
    pub queued: VecDeque<(usize, u64, Transaction, bool)>,
    kind: Kind,
    /// Read faults of the stores this disk had before (a power loss
    /// mounts a new one).
    read_faults_before: u64,
}

/// The collections of `pgs` PGs, as every disk starts.
fn create_colls(s: &dyn ObjectStore, colls: &[CollectionId]) {
    let mut t = Transaction::new();
    for &c in colls {
        t.create_collection(c);
    }
    if let Err(e) = s.apply(t) {
        panic!("a new disk refused its collections: {e}");
    }
}

fn block_cfg() -> BlockConfig {
    BlockConfig {
        size: 16 << 20,
        inline_max: 0,
        small_writes: SmallWrites::CopyOnWrite,
        writers: 0,
        read_cache: 0,
        batch_max: 1,
        ..BlockConfig::default()
    }
}

fn mount(media: &SimMedia) -> BlockStore {
    BlockStore::mount_media(Arc::new(media.clone()), &block_cfg())
        .unwrap_or_else(|e| panic!("a simulated disk does not mount after a power loss: {e}"))
}

impl Disk {
    /// An empty disk of `kind` with the collections `colls`.
    pub fn new(kind: Stores, colls: &[CollectionId]) -> Disk {
        let (store, kind): (Arc<dyn ObjectStore>, Kind) = match kind {
            Stores::Mem => {
                let mem = Arc::new(MemStore::new());
                let kind = Kind::Mem {
                    mem: mem.clone(),
                    volatile: Vec::new(),
                    base: None,
                };
                (mem, kind)
            }
            Stores::Block => {
                let cfg = block_cfg();
                let media = SimMedia::new(cfg.size);
                if let Err(e) = BlockStore::mkfs_media(&media, &cfg) {
                    panic!("mkfs on simulated media: {e}");
                }
                let kind = Kind::Block {
                    media: media.clone(),
                    volatile: 0,
                };
                (Arc::new(mount(&media)), kind)
            }
        };
        create_colls(store.as_ref(), colls);
        Disk {
            store: FaultyStore::new(store),
            queued: VecDeque::new(),
            kind,
            read_faults_before: 0,
        }
    }

    /// The same kind of disk, empty: a replaced one.
    pub fn replaced(&self, colls: &[CollectionId]) -> Disk {
        let kind = match self.kind {
            Kind::Mem { .. } => Stores::Mem,
            Kind::Block { .. } => Stores::Block,
        };
        Disk {
            read_faults_before: self.read_faults(),
            ..Disk::new(kind, colls)
        }
    }

    /// The store, without faults (what the simulator itself reads).
    pub fn inner(&self) -> &dyn ObjectStore {
        self.store.inner().as_ref()
    }

    /// Object reads that failed by the simulation's choice, on every
    /// store this disk has had.
    pub fn read_faults(&self) -> u64 {
        self.read_faults_before + self.store.read_faults()
    }

    /// Transactions committed unsynced and not yet durable.
    pub fn volatile(&self) -> usize {
        match &self.kind {
            Kind::Mem { volatile, .. } => volatile.len(),
            Kind::Block { volatile, .. } => *volatile,
        }
    }

    /// The store commits `txn`: durable with everything before it if
    /// `sync`, else only visible.
    pub fn commit(&mut self, txn: Transaction, sync: bool) {
        self.store.heal(&txn);
        let copy = txn.clone();
        let done = match &mut self.kind {
            Kind::Mem {
                mem,
                volatile,
                base,
            } => {
                if sync {
                    volatile.clear();
                    *base = None;
                } else {
                    if base.is_none() {
                        *base = Some(mem.snapshot().expect("a memory snapshot"));
                    }
                    volatile.push(txn.clone());
                }
                mem.apply(txn)
            }
            Kind::Block { volatile, .. } => {
                *volatile = if sync { 0 } else { *volatile + 1 };
                let s = self.store.inner();
                match sync {
                    true => s.queue_transaction(txn),
                    false => s.queue_unsynced(txn),
                }
                .wait()
            }
        };
        if let Err(e) = done {
            panic!("{e}: {copy:?}");
        }
    }

    /// Commit queued transactions up to and including PG `pg`'s `tid`
    /// (all of them if it is not queued).
    pub fn commit_through(&mut self, pg: usize, tid: u64) {
        if !self.queued.iter().any(|(p, t, _, _)| (*p, *t) == (pg, tid)) {
            return;
        }
        while let Some((p, t, txn, sync)) = self.queued.pop_front() {
            self.commit(txn, sync);
            if (p, t) == (pg, tid) {
                break;
            }
        }
    }

    /// The store fails PG `pg`'s `tid`: what was queued before it is
    /// committed, it and everything after it dropped.
    pub fn fail_at(&mut self, pg: usize, tid: u64) {
        while let Some((p, t, txn, sync)) = self.queued.pop_front() {
            if (p, t) == (pg, tid) {
                break;
            }
            self.commit(txn, sync);
        }
        self.queued.clear();
    }

    /// The OSD crashes: what the disk keeps of its unsynced and queued
    /// transactions, chosen by `rng`.
    pub fn crash(&mut self, rng: &mut Rng) -> Crashed {
        let queued = std::mem::take(&mut self.queued);
        let (v, n) = (self.volatile(), queued.len());
        // (Rot is of the data written: an object a lost commit wrote is
        // back to what it was, whole, and one a replayed commit writes is
        // whole as ever.)
        let faulty = &self.store;
        match &mut self.kind {
            Kind::Mem {
                mem,
                volatile,
                base,
            } => {
                // A prefix of the unsynced commits, then of the queue.
                let kept = if v + n == 0 { 0 } else { rng.index(v + n + 1) };
                let volatile = std::mem::take(volatile);
                let base = base.take();
                if kept < v {
                    let base = base.expect("a base under unsynced commits");
                    mem.restore(&base).expect("restore");
                    for (i, txn) in volatile.into_iter().enumerate() {
                        faulty.heal(&txn);
                        if i < kept {
                            mem.apply(txn).expect("replay");
                        }
                    }
                    return Crashed {
                        volatile: v,
                        queued: n,
                        kept: 0,
                        lost: v - kept,
                    };
                }
                for (_, _, txn, _) in queued.into_iter().take(kept - v) {
                    faulty.heal(&txn);
                    mem.apply(txn).expect("replay");
                }
                Crashed {
                    volatile: v,
                    queued: n,
                    kept: kept - v,
                    lost: 0,
                }
            }
            Kind::Block { .. } => {
                // Queued ones reach the store up to a point, then the
                // power goes.
                let kept = rng.index(n + 1);
                for (_, _, txn, sync) in queued.into_iter().take(kept) {
                    self.commit(txn, sync);
                }
                let Kind::Block { media, volatile } = &mut self.kind else {
                    unreachable!("matched above")
                };
                let after = media.power_loss(rng.next_u64());
                *media = after.clone();
                *volatile = 0;
                let store = mount(&after);
                match store.fsck(true) {
                    Ok(r) if r.errors.is_empty() => {}
                    Ok(r) => panic!("fsck after a power loss: {:?}", r.errors),
                    Err(e) => panic!("fsck after a power loss: {e}"),
                }
                self.read_faults_before += self.store.read_faults();
                self.store = FaultyStore::new(Arc::new(store));
                Crashed {
                    volatile: v,
                    queued: n,
                    kept,
                    lost: 0,
                }
            }
        }
    }
}
