//! The narrow key-value interface the block store keeps its metadata in,
//! and its implementation on fjall (an LSM tree with a write-ahead
//! journal). Another engine can be measured by implementing [`Kv`].
//!
//! Assumptions about the engine: a batch commits atomically (all keys or
//! none, also across a crash); with `sync` the batch is durable when
//! `commit` returns, and so is every batch committed before it (a crash
//! keeps a prefix of the batches: fjall appends them to one journal, which
//! it syncs before sealing it for a new one); reads see every committed
//! batch.
//!
//! Callers must never rely on anything else (no transactions across
//! batches, no iteration stability across commits).

use crate::error::{Result, StoreError};
use std::path::Path;

/// One change in a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvOp {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

/// What [`Kv::visit`] hands each pair to: `Ok(false)` stops the scan.
pub type Visitor<'a> = dyn FnMut(&[u8], &[u8]) -> Result<bool> + 'a;

/// An ordered byte-key store with atomic batches.
pub trait Kv: Send + Sync {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Pairs with `start <= key < end` (`end: None` = no bound), in key
    /// order, at most `limit`.
    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        self.visit(start, end, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            Ok(out.len() < limit)
        })?;
        Ok(out)
    }
    /// Pairs with `start <= key < end` (`end: None` = no bound) in key
    /// order, each handed to `visit` without a copy, until it returns
    /// `Ok(false)` or an error. For listings that skip most of what they
    /// pass.
    fn visit(&self, start: &[u8], end: Option<&[u8]>, visit: &mut Visitor<'_>) -> Result<()>;
    /// Apply a batch atomically; durable on return when `sync`.
    fn commit(&self, batch: Vec<KvOp>, sync: bool) -> Result<()>;
    /// Make every batch committed so far durable.
    fn persist(&self) -> Result<()>;
}

impl<K: Kv + ?Sized> Kv for Box<K> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        (**self).get(key)
    }
    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        (**self).scan(start, end, limit)
    }
    fn visit(&self, start: &[u8], end: Option<&[u8]>, visit: &mut Visitor<'_>) -> Result<()> {
        (**self).visit(start, end, visit)
    }
    fn commit(&self, batch: Vec<KvOp>, sync: bool) -> Result<()> {
        (**self).commit(batch, sync)
    }
    fn persist(&self) -> Result<()> {
        (**self).persist()
    }
}

fn io(e: impl std::fmt::Display) -> StoreError {
    StoreError::Io(format!("kv: {e}"))
}

/// [`Kv`] on one fjall keyspace.
pub struct FjallKv {
    db: fjall::Database,
    ks: fjall::Keyspace,
}

/// Most bytes of journal the engine keeps before it flushes its memtables
/// and drops the journal (fjall's least; its default is 512 MiB, which a
/// small metadata file system could not hold).
pub const JOURNAL_BYTES_MAX: u64 = 64 << 20;

/// Background threads the engine flushes and compacts on. One: with more
/// (fjall's default is one per core, up to four), its first worker hands
/// every compaction request back to the queue for the others and takes
/// it again at once, so it spins for as long as they compact (a fifth of
/// a loaded 2-core OSD host's CPU, measured with `perf` under 4 KiB
/// writes). A single worker flushes between compactions, not beside
/// them; 4 KiB write throughput rose with it all the same.
const ENGINE_WORKERS: usize = 1;

impl FjallKv {
    /// Open (or create) the database in `dir`.
    pub fn open(dir: &Path) -> Result<FjallKv> {
        let db = fjall::Database::builder(dir)
            .max_journaling_size(JOURNAL_BYTES_MAX)
            .worker_threads(ENGINE_WORKERS)
            .open()
            .map_err(io)?;
        let ks = db
            .keyspace("meta", fjall::KeyspaceCreateOptions::default)
            .map_err(io)?;
        Ok(FjallKv { db, ks })
    }
}

impl Kv for FjallKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.ks.get(key).map_err(io)?.map(|v| v.to_vec()))
    }

    fn visit(&self, start: &[u8], end: Option<&[u8]>, visit: &mut Visitor<'_>) -> Result<()> {
        if end.is_some_and(|e| e <= start) {
            return Ok(());
        }
        let it = match end {
            Some(e) => self.ks.range(start.to_vec()..e.to_vec()),
            None => self.ks.range(start.to_vec()..),
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
        if batch.is_empty() && !sync {
            return Ok(());
        }
        let mut b = self.db.batch();
        if sync {
            b = b.durability(Some(fjall::PersistMode::SyncData));
        }
        for op in batch {
            match op {
                KvOp::Put(k, v) => b.insert(&self.ks, k, v),
                KvOp::Delete(k) => b.remove(&self.ks, k),
            }
        }
        b.commit().map_err(io)
    }

    fn persist(&self) -> Result<()> {
        self.db.persist(fjall::PersistMode::SyncData).map_err(io)
    }
}
