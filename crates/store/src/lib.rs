//! Loligo's local object store: the `ObjectStore` trait and transactions,
//! `MemStore` (in memory, for tests and as a CPU ceiling), and the
//! BlueStore-style store on a block file and an embedded KV (`block`),
//! the FileStore-like baseline (a journal and a file per object: `file`);
//! with the `workloads` feature, the benchmark and crash-test workloads
//! the CLI runs (`bench`, `torture`).
//!
//! A store knows nothing of PGs, pools or the network: collections and
//! objects are names to it. It must never return data it cannot vouch for
//! (checksums) or apply part of a transaction.

pub mod block;
pub mod device_class;
pub mod error;
pub mod faulty;
pub mod file;
pub mod hint;
pub mod mem;
pub mod names;
pub mod store;
pub mod txn;

pub use block::{
    aligned_bytes, free_bytes, BlockConfig, BlockStore, DeviceWait, FsckReport, SmallWrites,
    DEFAULT_READ_CACHE,
};
pub use device_class::DeviceClass;
pub use error::{Result, StoreError};
pub use faulty::FaultyStore;
pub use file::{FileConfig, FileStore};
pub use hint::{AllocHint, ALLOC_HINT_ATTR};
pub use mem::MemStore;
pub use names::{
    CollectionId, Compression, Limits, ObjectId, ObjectRead, ObjectStat, StoreStats, WholeObject,
};
pub use store::{Commit, Completer, ObjectStore};
pub use txn::{Op, Transaction};
#[cfg(feature = "workloads")]
pub mod bench;
pub mod kv;
pub mod kvcache;
pub mod lsm;
pub mod media;
pub mod sim_media;
#[cfg(feature = "workloads")]
pub mod torture;
pub mod wal;
