//! The monitor's on-disk store: one fjall keyspace that holds the Raft
//! log, the vote and the last snapshot (`raft::MonStore` decides the
//! keys). The monitor links fjall directly, not the OSDs' block store.
//!
//! Assumed of fjall: a batch commits atomically (across a crash too) and,
//! with `sync`, is durable when `commit` returns, with every batch before
//! it. This module must never hold a batch back or reorder batches: Raft's
//! promises (a vote or an entry saved before it is answered) rest on it.

use std::path::Path;

/// One change in a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvOp {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

/// A failure of the store's engine (I/O, a damaged file).
#[derive(Debug, thiserror::Error)]
#[error("monitor store: {0}")]
pub struct KvError(String);

fn io(e: impl std::fmt::Display) -> KvError {
    KvError(e.to_string())
}

/// Most bytes of journal fjall keeps before it flushes its memtables (its
/// least; the default of 512 MiB is more than a monitor's disk should
/// hold for a log it purges).
const JOURNAL_BYTES_MAX: u64 = 64 << 20;

/// The keyspace's name (stores made by earlier releases use it too).
const KEYSPACE: &str = "meta";

/// Key-value pairs read by a scan, in key order.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// The store: an ordered byte-key map with atomic batches.
pub struct MonKv {
    db: fjall::Database,
    ks: fjall::Keyspace,
}

impl MonKv {
    /// Open (or create) the store in `dir`.
    pub fn open(dir: &Path) -> Result<MonKv, KvError> {
        let db = fjall::Database::builder(dir)
            .max_journaling_size(JOURNAL_BYTES_MAX)
            // One background thread: with more, fjall's first worker spins
            // handing compactions to the others while they compact.
            .worker_threads(1)
            .open()
            .map_err(io)?;
        let ks = db
            .keyspace(KEYSPACE, fjall::KeyspaceCreateOptions::default)
            .map_err(io)?;
        Ok(MonKv { db, ks })
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        Ok(self.ks.get(key).map_err(io)?.map(|v| v.to_vec()))
    }

    /// Pairs with `start <= key < end`, in key order, at most `limit`.
    pub fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<Pairs, KvError> {
        let mut out = Vec::new();
        if end <= start {
            return Ok(out);
        }
        for g in self.ks.range(start.to_vec()..end.to_vec()).take(limit) {
            let (k, v) = g.into_inner().map_err(io)?;
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }

    /// Apply `batch` atomically; durable on return when `sync`.
    pub fn commit(&self, batch: Vec<KvOp>, sync: bool) -> Result<(), KvError> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_apply_whole_and_ranges_read_in_order() {
        let dir = loligo_testkit::TempDir::new("mon-kv").unwrap();
        {
            let kv = MonKv::open(dir.path()).unwrap();
            let put = |k: &str, v: &str| KvOp::Put(k.into(), v.into());
            kv.commit(vec![put("l/2", "b"), put("l/1", "a"), put("v", "x")], true)
                .unwrap();
            kv.commit(vec![KvOp::Delete(b"v".to_vec()), put("l/3", "c")], true)
                .unwrap();
            assert_eq!(kv.get(b"v").unwrap(), None);
            let all = kv.scan(b"l/", b"l0", usize::MAX).unwrap();
            let keys: Vec<_> = all.iter().map(|(k, _)| k.as_slice()).collect();
            assert_eq!(keys, [&b"l/1"[..], b"l/2", b"l/3"]);
            assert_eq!(kv.scan(b"l/", b"l0", 1).unwrap().len(), 1);
            assert!(kv.scan(b"l0", b"l/", 9).unwrap().is_empty());
        }
        // Reopened: what was synced is there.
        let kv = MonKv::open(dir.path()).unwrap();
        assert_eq!(kv.get(b"l/3").unwrap(), Some(b"c".to_vec()));
    }
}
