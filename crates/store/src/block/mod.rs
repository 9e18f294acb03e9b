//! `BlockStore`: the BlueStore-style store. Object data lives on one large
//! file used as a block device, with the store's own allocator; metadata
//! (onodes with extent maps and xattrs, blobs with checksums, omap,
//! records, the free-space map, deferred writes) lives in the KV store.
//! Objects of at most `inline_max` bytes keep their data inside their
//! onode instead (with its own crc32c): a small object's write is one
//! KV put, with no allocation, blob, deferred record or device write.
//!
//! Assumptions about the medium: `pwrite` followed by `fdatasync` makes
//! data durable; a KV batch commits atomically, durably if synced, and
//! a synced batch makes every earlier one durable too (see `kv`).
//!
//! Write path (one committer thread, group commit): transactions queued
//! by any thread are prepared in batches. Large writes go to newly
//! allocated space (copy-on-write) and are synced once per batch before
//! the batch's single KV commit makes them visible: no double write.
//! Writes of at most `deferred_max` bytes go one of two ways (see
//! [`SmallWrites`]; by default, by how well the data compresses):
//! copy-on-write like large ones (an overwrite of an unshared extent
//! moves the blocks within their blob, so the extent map does not grow,
//! and frees their old places), or as deferred records committed in the
//! KV (in place when they overwrite an unshared extent),
//! written to the device after the commit and synced lazily (with a
//! batch's large writes, at 1,024 records, or once much freed space
//! waits for their deletion); until their
//! records are deleted (after a sync), a crash is repaired at mount by
//! replaying them. Large `write_full`s are written into reserved space by
//! a small pool of writer threads (or, with `writers: 0`, by the caller's
//! thread before queueing): `queue` returns at once, so a caller on an
//! async runtime is never blocked by the device, and several such writes
//! are on the device at a time. The committer takes jobs in queue order
//! and waits for each one's writes before it prepares it.
//!
//! A transaction queued unsynced (`queue_unsynced`) completes once its
//! batch is committed without the KV's sync, if that batch put nothing on
//! the device and no deferred record in the KV; the next synced batch
//! makes it durable (the KV's journal keeps batches in order).
//!
//! Invariants: space freed by a batch stays unallocatable until a later
//! batch has committed, the freeing batch is durable, and every deferred
//! record of that batch or earlier is durably deleted (so a crash can never expose metadata pointing at
//! reused space, and no replay can land on reused space); every block of
//! every blob has a crc32c checked on every read; bytes past an object's
//! size inside its last block are zero.

pub mod alloc;
mod cache;
pub mod codec;
mod commit;

use crate::device_class::DeviceClass;
use crate::error::{Result, StoreError};
use crate::hint::{AllocHint, ALLOC_HINT_ATTR};
use crate::kv::{Kv, KvOp};
use crate::kvcache::CachedKv;
use crate::media::{Device, DirMedia, Media};
use crate::names::{CollectionId, Limits, ObjectId, ObjectStat, StoreStats, WholeObject};
use crate::store::{Commit, Completer, ObjectStore};
use crate::txn::{Op, Transaction};
use crate::wal::WalKv;
use alloc::Allocator;
use bytes::Bytes;
use codec::*;
use commit::{Committer, Syncer};
pub(crate) use loligo_bulk::aligned::{AlignedBuf, BufPool, ALIGN as DIRECT_ALIGN};
use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

/// The largest `inline_max` honoured: an onode is read whole for every
/// stat and attribute, so its data stays small.
pub const INLINE_MAX_LIMIT: u64 = 16 << 10;

/// Bytes of collection, onode, blob and checksum records kept in memory
/// (see [`crate::kvcache`]).
pub const META_CACHE: usize = 32 << 20;

/// [`BlockConfig::read_cache`] unless set: a size-3 pool of four OSDs on
/// one machine then keeps 1 GiB of reads.
pub const DEFAULT_READ_CACHE: u64 = 256 << 20;

/// [`BlockConfig::writers`] unless set. Measured on the project's 2-core
/// VM with four OSDs sharing one disk (BENCHMARKS.md): every count from
/// two to twelve beat writing in the caller's thread, and past two they
/// were alike within the disk's noise.
pub const DEFAULT_WRITERS: usize = 4;

pub use crate::media::{BLOCK_FILE, KV_DIR, LSM_DIR};
/// The metadata journal's file name inside the store directory (see
/// [`crate::wal`]).
pub const JOURNAL_FILE: &str = crate::wal::WAL_FILE;
const MAGIC: &[u8] = b"loligo-blockstore-v1";

/// How a store is laid out (fixed at mkfs) and tuned (may change at mount).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockConfig {
    /// Bytes of the block file (mkfs only).
    pub size: u64,
    /// Allocation and checksum unit (mkfs only; a power of two >= 512).
    pub block_size: u64,
    /// Writes of at most this many bytes are small: they go to the device
    /// as [`BlockConfig::small_writes`] says; larger ones always to newly
    /// allocated space, written before their metadata commits.
    pub deferred_max: u64,
    /// How small writes reach the device. May change at mount.
    pub small_writes: SmallWrites,
    /// Objects of at most this many bytes keep their data inside their
    /// onode: no blob, no allocation, no device write (0: never). May
    /// change at mount; at most [`INLINE_MAX_LIMIT`].
    pub inline_max: u64,
    /// Most transactions in one group commit.
    pub batch_max: usize,
    /// Threads that write large `write_full`s to the device beside the
    /// committer (0: the thread that queues one writes it first, blocked
    /// until the device has it).
    pub writers: usize,
    /// Bytes of large reads kept in memory for reads that come again (0:
    /// none). May change at mount.
    pub read_cache: u64,
    /// What a reader runs a large device read inside (see [`DeviceWait`]).
    pub device_wait: DeviceWait,
    pub limits: Limits,
}

/// How a thread waits for a large device read: the store runs each read
/// of at least 128 KiB that goes to the device inside this function. A
/// caller on an async runtime's worker thread sets one that first hands
/// the worker's other tasks to another thread (`tokio::task::block_in_place`),
/// so a read of megabytes does not hold up every task queued behind it.
/// The default runs the read as it is.
#[derive(Clone, Copy)]
pub struct DeviceWait(pub fn(&mut dyn FnMut()));

impl DeviceWait {
    /// Run the device read `f` as this hook says.
    fn read(self, f: impl FnOnce() -> std::io::Result<()>) -> std::io::Result<()> {
        let mut f = Some(f);
        let mut out = None;
        (self.0)(&mut || {
            if let Some(f) = f.take() {
                out = Some(f());
            }
        });
        out.unwrap_or_else(|| {
            Err(std::io::Error::other(
                "the store's device-wait hook did not run the read",
            ))
        })
    }
}

fn run_now(f: &mut dyn FnMut()) {
    f();
}

impl Default for DeviceWait {
    fn default() -> DeviceWait {
        DeviceWait(run_now)
    }
}

impl std::fmt::Debug for DeviceWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeviceWait")
    }
}

impl PartialEq for DeviceWait {
    fn eq(&self, other: &DeviceWait) -> bool {
        std::ptr::fn_addr_eq(self.0, other.0)
    }
}

impl Eq for DeviceWait {}

impl Default for BlockConfig {
    fn default() -> BlockConfig {
        BlockConfig {
            size: 1 << 30,
            block_size: 4096,
            deferred_max: BlockConfig::deferred_max_for(DeviceClass::Ssd),
            small_writes: SmallWrites::default(),
            inline_max: 4096,
            batch_max: 128,
            writers: DEFAULT_WRITERS,
            read_cache: DEFAULT_READ_CACHE,
            device_wait: DeviceWait::default(),
            limits: Limits::default(),
        }
    }
}

impl BlockConfig {
    /// The deferred-write threshold for data on a disk of class `class`:
    /// 64 KiB on a spinning disk, 32 KiB on solid state. Ceph's BlueStore
    /// defers writes of up to 64 KiB on hard disks
    /// (`bluestore_prefer_deferred_size_hdd`) and prefers new space on
    /// solid state; how a small write goes is [`BlockConfig::small_writes`]'
    /// choice ([`BlockConfig::small_writes_for`] gives the class's).
    pub fn deferred_max_for(class: DeviceClass) -> u64 {
        match class {
            DeviceClass::Hdd => 64 << 10,
            DeviceClass::Ssd => 32 << 10,
        }
    }

    /// How small writes go on a disk of class `class`: all deferred on a
    /// spinning disk (committed in the journal, then written in place in
    /// batches: one sync per commit and no seek to new space), by how well
    /// they compress on solid state ([`SmallWrites::Auto`]).
    pub fn small_writes_for(class: DeviceClass) -> SmallWrites {
        match class {
            DeviceClass::Hdd => SmallWrites::Deferred,
            DeviceClass::Ssd => SmallWrites::Auto,
        }
    }
}

/// How writes of at most [`BlockConfig::deferred_max`] bytes reach the
/// device. Either way a write is durable before it completes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SmallWrites {
    /// Deferred when the data compresses to a quarter of its size or less
    /// (the journal then holds it for little), else copy-on-write: each
    /// byte costs the device at most about 1.5 bytes written, and data
    /// that compresses keeps the deferred path's one sync per commit.
    #[default]
    Auto,
    /// Copy-on-write, as large writes: the blocks go to newly allocated
    /// places (an overwrite's old places are freed) and the batch syncs
    /// the device once before its metadata commits. Each byte is written
    /// to the device once.
    CopyOnWrite,
    /// Through the KV: the data is committed in a deferred record, then
    /// written in place and synced lazily. Each byte is written twice
    /// (the metadata journal compresses what compresses), but a batch's
    /// commit waits for one sync instead of two.
    Deferred,
}

fn io(e: impl std::fmt::Display) -> StoreError {
    StoreError::Io(e.to_string())
}

struct Shared {
    kv: CachedKv<WalKv<Box<dyn Kv>>>,
    /// Where the store lives (asked for the metadata's space).
    media: Arc<dyn Media>,
    dev: Arc<dyn Device>,
    /// The same device opened with O_DIRECT for large copy-on-write
    /// writes (no page-cache copy); `None` where the medium refuses it.
    dev_direct: Option<Arc<dyn Device>>,
    /// Aligned buffers for writers' copies (see `prepare_write`).
    buf_pool: BufPool,
    /// Aligned buffers large reads are read into with O_DIRECT; each goes
    /// back here when the last reader of its bytes drops them.
    read_pool: Arc<BufPool>,
    /// Large runs read lately (see [`cache`]).
    cache: cache::ReadCache,
    size: u64,
    bs: u64,
    deferred_max: u64,
    small_writes: SmallWrites,
    inline_max: u64,
    limits: Limits,
    device_wait: DeviceWait,
    /// Readers hold it shared while they read metadata and data; the
    /// committer holds it exclusively while it commits and while it moves
    /// deferred data to the device.
    view: RwLock<()>,
    /// Deferred block contents committed but not yet on the device.
    deferred: Mutex<HashMap<u64, Arc<Vec<u8>>>>,
    free_bytes: AtomicU64,
    csum_errors: AtomicU64,
    /// Bytes and requests read from the device.
    read_bytes: AtomicU64,
    read_ops: AtomicU64,
    /// Transactions committed, and their microseconds from queueing to
    /// completion, summed.
    commits: AtomicU64,
    commit_us: AtomicU64,
    failed: AtomicBool,
    /// Shared by the committer and by writers that reserve space and
    /// write large objects in their own thread before queueing.
    alloc: Mutex<Allocator>,
}

/// Work done beside the committer for a large `write_full`: space
/// reserved (still free on disk until the commit), the data written there
/// with O_DIRECT, and its checksums. Such writes thus go to the device in
/// parallel; the committer only commits metadata.
pub(crate) struct Prepared {
    pub(crate) pieces: Vec<(u64, u64)>,
    /// Each piece's checksums, in units of `2^csum_shift` blocks.
    pub(crate) csums: Vec<Vec<u32>>,
    pub(crate) csum_shift: u8,
}

/// The checksum unit (as a [`Blob::csum_shift`]) for new data of the
/// object whose onode is `on`, from its allocation hint.
pub(crate) fn csum_shift(on: &Onode, bs: u64) -> u8 {
    AllocHint::of_attrs(&on.attrs).map_or(0, |h| h.csum_shift(bs, CSUM_SHIFT_MAX))
}

/// The allocation hint object `oid` of `coll` has when op `ops.len()` of
/// a transaction runs: set or removed by an earlier op (`ops`), else as
/// stored. Advice only: a hint a clone or move brings is not looked for.
fn hint_before(s: &Shared, ops: &[Op], coll: CollectionId, oid: &ObjectId) -> Option<AllocHint> {
    for op in ops.iter().rev() {
        match op {
            Op::SetAttrs {
                coll: c,
                oid: o,
                attrs,
            } if *c == coll && o == oid => {
                if let Some((_, v)) = attrs.iter().rev().find(|(k, _)| k == ALLOC_HINT_ATTR) {
                    return AllocHint::decode(v);
                }
            }
            Op::RmAttr {
                coll: c,
                oid: o,
                name,
            } if *c == coll && o == oid && name == ALLOC_HINT_ATTR => return None,
            Op::Remove(c, o) if *c == coll && o == oid => return None,
            _ => {}
        }
    }
    let on = get_onode(&s.kv, coll, oid).ok()??;
    AllocHint::of_attrs(&on.attrs)
}

/// One op's [`Prepared`] work: done (or none to do), or under way in a
/// writer thread.
enum Pre {
    Done(Option<Prepared>),
    Writing(mpsc::Receiver<Option<Prepared>>),
}

impl Pre {
    /// Wait for the writer. One that went away without an answer leaves
    /// the op to the committer, as any write that could not be prepared.
    fn wait(self) -> Option<Prepared> {
        match self {
            Pre::Done(p) => p,
            Pre::Writing(rx) => rx.recv().ok().flatten(),
        }
    }
}

/// A large `write_full` handed to the writer threads.
struct WriteWork {
    coll: CollectionId,
    data: Bytes,
    /// Checksum units for the data ([`Blob::csum_shift`]).
    csum_shift: u8,
    reply: mpsc::SyncSender<Option<Prepared>>,
}

/// A queued transaction: its completer, the space its large writes go to
/// ahead of it, and whether it must be durable when complete.
struct Job {
    txn: Transaction,
    done: Completer,
    pre: Vec<Pre>,
    sync: bool,
}

/// The BlueStore-style store. Dropping it stops the committer after the
/// queued transactions.
pub struct BlockStore {
    shared: Arc<Shared>,
    tx: Mutex<Option<Sender<Job>>>,
    committer: Mutex<Option<JoinHandle<()>>>,
    /// Where large writes go to be written (`None`: in the caller's thread).
    writer_tx: Mutex<Option<Sender<WriteWork>>>,
    writers: Mutex<Vec<JoinHandle<()>>>,
}

impl BlockStore {
    /// Objects whose hash is in one of `hashes` (sorted, disjoint) from
    /// `start`, at most `limit`, each with its attribute `attr` if one is
    /// named (read from the listed metadata itself), and the next object
    /// after the page. One key-value iteration covers all the ranges:
    /// objects between them are passed over by their key's hash bytes,
    /// without decoding or copying them.
    #[allow(clippy::type_complexity)] // the listing's page and its next
    fn list_onodes(
        &self,
        c: CollectionId,
        hashes: &[Range<u64>],
        start: Option<&ObjectId>,
        limit: usize,
        attr: Option<&str>,
    ) -> Result<(Vec<(ObjectId, Option<Vec<u8>>)>, Option<ObjectId>)> {
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        self.need_coll(c)?;
        let after = start.map(|s| u64::from(s.hash));
        let ranges: Vec<&Range<u64>> = hashes
            .iter()
            .filter(|r| r.start < r.end && r.start <= u64::from(u32::MAX))
            .filter(|r| after.is_none_or(|h| r.end > h))
            .collect();
        let (Some(first), Some(last)) = (ranges.first(), ranges.last()) else {
            return Ok((Vec::new(), None));
        };
        let Some(from) = crate::store::list_from(first, start) else {
            return Ok((Vec::new(), None));
        };
        let p = coll_prefix(T_ONODE, c);
        // The scan ends where the last range does (keys start with the
        // hash, big-endian): a small range reads only its own objects.
        let end = match u32::try_from(last.end) {
            Ok(h) => {
                let mut e = p.clone();
                e.extend_from_slice(&h.to_be_bytes());
                e
            }
            Err(_) => prefix_end(&p),
        };
        let mut k = p.clone();
        push_object(&mut k, &from);
        let want = limit.saturating_add(1);
        let mut out = Vec::new();
        let mut at = 0;
        self.shared.kv.visit(&k, Some(&end), &mut |key, value| {
            let h = key
                .get(p.len()..p.len() + 4)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(|b| u64::from(u32::from_be_bytes(b)))
                .ok_or_else(|| StoreError::Corrupt("onode key without a hash".into()))?;
            while ranges.get(at).is_some_and(|r| r.end <= h) {
                at += 1;
            }
            let Some(r) = ranges.get(at) else {
                return Ok(false);
            };
            if h < r.start {
                return Ok(true);
            }
            let (oid, _) = decode_object(key, p.len())?;
            let a = match attr {
                Some(name) => Onode::decode(value)?.attrs.remove(name),
                None => None,
            };
            out.push((oid, a));
            Ok(out.len() < want)
        })?;
        let next = if out.len() > limit {
            out.pop().map(|(o, _)| o)
        } else {
            None
        };
        Ok((out, next))
    }

    /// Create a new store in `dir` (which must not hold one already).
    pub fn mkfs(dir: &Path, cfg: &BlockConfig) -> Result<()> {
        BlockStore::mkfs_on(dir, cfg, None)
    }

    /// [`BlockStore::mkfs`] with the data on `device` (a block device or
    /// an existing file), linked as `DIR/block`. The store uses
    /// `min(cfg.size, device size)` bytes of it. Its contents are
    /// overwritten.
    pub fn mkfs_on(dir: &Path, cfg: &BlockConfig, device: Option<&Path>) -> Result<()> {
        check_block_size(cfg.block_size)?;
        std::fs::create_dir_all(dir).map_err(io)?;
        let bpath = dir.join(BLOCK_FILE);
        if bpath.exists() || dir.join(KV_DIR).exists() || dir.join(LSM_DIR).exists() {
            return Err(StoreError::Invalid(format!(
                "{} already holds a store",
                dir.display()
            )));
        }
        match device {
            Some(dev) => {
                let dev = dev
                    .canonicalize()
                    .map_err(|e| StoreError::Invalid(format!("{}: {e}", dev.display())))?;
                // It must open as the store will open it.
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&dev)
                    .map_err(io)?;
                std::os::unix::fs::symlink(&dev, &bpath).map_err(io)?;
            }
            None => {
                // Refuse up front rather than fill the disk halfway.
                let free = free_bytes(dir).map_err(io)?;
                let needed = cfg.size + MKFS_KV_RESERVE_BYTES;
                if free < needed {
                    return Err(StoreError::NoSpace { needed, free });
                }
                let f = OpenOptions::new()
                    .create_new(true)
                    .read(true)
                    .write(true)
                    .open(&bpath)
                    .map_err(io)?;
                // Its length and allocation durable too (`sync_all`).
                let allocated = f
                    .set_len(cfg.size)
                    .map_err(io)
                    .and_then(|()| preallocate(&f, cfg.size))
                    .and_then(|()| f.sync_all().map_err(io));
                drop(f);
                if let Err(e) = allocated {
                    let _ = std::fs::remove_file(&bpath);
                    return Err(e);
                }
            }
        }
        let made = BlockStore::mkfs_media(&DirMedia::new(dir), cfg);
        if made.is_err() {
            let _ = std::fs::remove_file(&bpath);
        }
        made
    }

    /// Create a new store on `media`, whose data device exists: the store
    /// uses `min(cfg.size, its length)` bytes of it (whole blocks). Its
    /// engine must hold no store.
    pub fn mkfs_media(media: &dyn Media, cfg: &BlockConfig) -> Result<()> {
        check_block_size(cfg.block_size)?;
        let dev = media.block()?;
        let avail = dev.size().map_err(io)?;
        let size = cfg.size.min(avail) / cfg.block_size * cfg.block_size;
        if size < 16 * cfg.block_size {
            return Err(StoreError::Invalid(format!(
                "device of {size} usable bytes is too small"
            )));
        }
        dev.sync_data().map_err(io)?;
        let kv = media.engine()?;
        if kv.get(&[T_SUPER])?.is_some() {
            return Err(StoreError::Invalid(
                "the medium holds a store already".into(),
            ));
        }
        let mut sup = Enc::default();
        sup.bytes(MAGIC).var(size).var(cfg.block_size);
        let mut free = Enc::default();
        free.var(size);
        kv.commit(
            vec![
                KvOp::Put(vec![T_SUPER], sup.0),
                KvOp::Put(u64_key(T_FREE, 0), free.0),
                KvOp::Put(vec![T_IDS], ids(1, 1)),
            ],
            true,
        )?;
        Ok(())
    }

    /// Open the store in `dir`: replay deferred writes, start the committer.
    pub fn mount(dir: &Path, cfg: &BlockConfig) -> Result<BlockStore> {
        BlockStore::mount_media(Arc::new(DirMedia::new(dir)), cfg)
    }

    /// [`BlockStore::mount`] on any medium.
    pub fn mount_media(media: Arc<dyn Media>, cfg: &BlockConfig) -> Result<BlockStore> {
        let engine = media.engine()?;
        let sup = engine
            .get(&[T_SUPER])?
            .ok_or_else(|| StoreError::Corrupt("no superblock: not a store".into()))?;
        let mut d = Dec::new(&sup);
        if d.bytes()? != MAGIC {
            return Err(StoreError::Corrupt("not a loligo block store".into()));
        }
        let size = d.var()?;
        let bs = d.var()?;
        // The metadata's journal (created at the first mount): a
        // sixteenth of the device, between 64 KiB and 64 MiB.
        let kv = WalKv::open(
            engine,
            media.as_ref(),
            (size / 16).clamp(crate::wal::MIN_WAL_SIZE, crate::wal::DEFAULT_WAL_SIZE),
            Some(T_DEFERRED),
        )?;
        // The records every small write reads before it changes them.
        let kv = CachedKv::new(kv, &[T_COLL, T_ONODE, T_BLOB, T_CSUM], META_CACHE);
        let dev = media.block()?;
        let dev_direct = if (bs as usize).is_multiple_of(DIRECT_ALIGN) {
            media.block_direct()
        } else {
            None
        };
        if dev.size().map_err(io)? < size {
            return Err(StoreError::Corrupt(
                "block file is shorter than the superblock says".into(),
            ));
        }
        let (next_blob, next_seq) = load_ids(&kv, dev.as_ref())?;
        let free = kv
            .scan(&[T_FREE], Some(&[T_FREE + 1]), usize::MAX)?
            .into_iter()
            .map(|(k, v)| Ok((decode_u64_key(&k)?, Dec::new(&v).var()?)))
            .collect::<Result<Vec<_>>>()?;
        let alloc = Allocator::load(free);
        let shared = Arc::new(Shared {
            kv,
            media,
            dev,
            dev_direct,
            size,
            bs,
            deferred_max: cfg.deferred_max.max(bs) / bs * bs,
            small_writes: cfg.small_writes,
            inline_max: cfg.inline_max.min(INLINE_MAX_LIMIT),
            limits: cfg.limits,
            device_wait: cfg.device_wait,
            view: RwLock::new(()),
            deferred: Mutex::new(HashMap::new()),
            free_bytes: AtomicU64::new(alloc.free_bytes()),
            csum_errors: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
            read_ops: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            commit_us: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            alloc: Mutex::new(alloc),
            buf_pool: BufPool::default(),
            read_pool: Arc::default(),
            cache: cache::ReadCache::new(usize::try_from(cfg.read_cache).unwrap_or(usize::MAX)),
        });
        let (tx, rx) = mpsc::channel::<Job>();
        let mut c = Committer {
            s: shared.clone(),
            next_blob,
            next_seq,
            batch_max: cfg.batch_max.max(1),
        };
        let syncer = Syncer {
            s: shared.clone(),
            quarantine: Vec::new(),
            delete_next: Vec::new(),
            unsynced: Vec::new(),
            batch_no: 0,
            durable: 0,
            deleted_through: 0,
            ids: (next_blob, next_seq),
            flushing: None,
        };
        let handle = std::thread::Builder::new()
            .name("loligo-store-commit".into())
            .spawn(move || c.run(rx, syncer))
            .map_err(io)?;
        let (writers, writer_tx) = spawn_writers(&shared, cfg.writers);
        Ok(BlockStore {
            shared,
            tx: Mutex::new(Some(tx)),
            committer: Mutex::new(Some(handle)),
            writer_tx: Mutex::new(writer_tx),
            writers: Mutex::new(writers),
        })
    }

    /// Blocks whose checksum did not match since mount.
    pub fn checksum_errors(&self) -> u64 {
        self.shared.csum_errors.load(Ordering::Relaxed)
    }

    /// Check the store's consistency (see [`FsckReport`]); `deep` also
    /// reads every allocated block and checks its checksum.
    pub fn fsck(&self, deep: bool) -> Result<FsckReport> {
        let _g = self.shared.view.write().map_err(|_| StoreError::Closed)?;
        fsck(&self.shared, deep)
    }

    /// The device offset of a data block of an object (for tests that
    /// corrupt data on purpose).
    pub fn data_location(&self, c: CollectionId, o: &ObjectId, off: u64) -> Result<Option<u64>> {
        let s = &self.shared;
        let Some(on) = get_onode(&s.kv, c, o)? else {
            return Ok(None);
        };
        for x in &on.extents {
            if off >= x.loff && off < x.loff + x.len {
                let b = get_blob(&s.kv, x.blob)?;
                let at = x.boff + (off - x.loff);
                return Ok(Some(b.block_at(at / s.bs, s.bs) + at % s.bs));
            }
        }
        Ok(None)
    }

    fn read_blocks(&self, disk_off: u64, n: u64) -> Result<Vec<u8>> {
        read_blocks(&self.shared, &HashMap::new(), disk_off, n)
    }

    /// A large object in one run on the device, read whole with
    /// O_DIRECT without holding the view while the device reads: the
    /// committer (which takes the view alone, and syncs inside it) need
    /// not wait out megabytes of a scrub's or a recovery's read. Its onode
    /// and blob are read before and after; `None` if either changed, or a
    /// block fails its checksum (deferred data may have moved to the
    /// device meanwhile): the caller reads again holding the view, which
    /// tells rot from a race.
    fn read_whole_unheld(&self, c: CollectionId, o: &ObjectId) -> Result<Option<WholeObject>> {
        let s = &self.shared;
        let (on, blob, b, first, blocks) = {
            let _g = s.view.read().map_err(|_| StoreError::Closed)?;
            let Some(on) = get_onode(&s.kv, c, o)? else {
                return Ok(None);
            };
            if on.size < DIRECT_READ_MIN {
                return Ok(None);
            }
            let Some(r) = one_run(s, &on, 0, on.size, &mut |id| get_blob(&s.kv, id))? else {
                return Ok(None);
            };
            let (blob, first, blocks) = (r.extent.blob, r.first, r.blocks);
            (on.clone(), blob, r.blob, first, blocks)
        };
        let Some(buf) = read_blocks_direct(s, b.disk_off + first * s.bs, blocks)? else {
            return Ok(None);
        };
        let same = {
            let _g = s.view.read().map_err(|_| StoreError::Closed)?;
            get_onode(&s.kv, c, o)?.as_ref() == Some(&on) && get_blob(&s.kv, blob)? == b
        };
        let run = buf.as_slice();
        let whole = same && bad_block(s, &b, first, run).is_none();
        let data = whole.then(|| run[..on.size as usize].to_vec());
        s.read_pool.put(buf);
        Ok(data.map(|data| WholeObject {
            size: on.size,
            data,
            attrs: on.attrs,
            omap_header: on.header,
            omap: on.omap,
        }))
    }

    /// An object's whole data. A large object in one run on the device
    /// is read with O_DIRECT (a scrub or a recovery reads every object
    /// once: through the page cache it would cost a zero-fill and a copy
    /// per page and evict what clients read) and kept out of the read
    /// cache for the same reason.
    fn read_whole_data(&self, o: &ObjectId, on: &Onode) -> Result<Vec<u8>> {
        let s = &self.shared;
        let blob = &mut |id| get_blob(&s.kv, id);
        if on.size >= DIRECT_READ_MIN {
            if let Some(r) = one_run(s, on, 0, on.size, blob)? {
                let disk_off = r.blob.disk_off + r.first * s.bs;
                if let Some(buf) = read_blocks_direct(s, disk_off, r.blocks)? {
                    let run = buf.as_slice();
                    let checked = check_run(s, o, r.extent, &r.blob, r.first, run);
                    let data = run[..on.size as usize].to_vec();
                    s.read_pool.put(buf);
                    checked?;
                    return Ok(data);
                }
            }
        }
        read_logical(s, o, on, 0, on.size, blob, &mut |d, n| {
            self.read_blocks(d, n)
        })
    }

    fn queue(&self, txn: Transaction, sync: bool) -> Commit {
        let (commit, done) = Commit::pending();
        let pre = (txn.ops.iter().enumerate())
            .map(|(i, op)| self.start_write(op, &txn.ops[..i]))
            .collect();
        let job = Job {
            txn,
            done,
            pre,
            sync,
        };
        match self.tx.lock() {
            Ok(g) => match g.as_ref() {
                Some(tx) => {
                    // A send error drops the completer, which reports Closed.
                    let _ = tx.send(job);
                }
                None => job.done.complete(Err(StoreError::Closed)),
            },
            Err(_) => job.done.complete(Err(StoreError::Closed)),
        }
        commit
    }
}

impl Drop for BlockStore {
    fn drop(&mut self) {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        // Writers finish what is queued (the committer may wait for it),
        // then see the channel closed.
        if let Ok(mut tx) = self.writer_tx.lock() {
            tx.take();
        }
        if let Ok(mut h) = self.committer.lock() {
            if let Some(h) = h.take() {
                let _ = h.join();
            }
        }
        if let Ok(mut ws) = self.writers.lock() {
            for h in ws.drain(..) {
                let _ = h.join();
            }
        }
    }
}

/// A writer thread: prepares large writes until the store is dropped.
fn write_loop(s: &Shared, rx: &Mutex<mpsc::Receiver<WriteWork>>) {
    loop {
        // The lock is held while waiting: one writer waits on the channel,
        // the others on the lock.
        let work = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(w) = work else { return };
        let _ = w
            .reply
            .send(prepare_write(s, w.coll, &w.data, w.csum_shift));
    }
}

/// The blob and sequence counters a mount goes on from: the id record's,
/// past every blob and every deferred write a crash left behind (those
/// are written to the device again and dropped first).
fn load_ids(kv: &dyn Kv, dev: &dyn Device) -> Result<(u64, u64)> {
    let (mut next_blob, mut next_seq) = match kv.get(&[T_IDS])? {
        Some(v) => {
            let mut d = Dec::new(&v);
            (d.var()?, d.var()?)
        }
        None => return Err(StoreError::Corrupt("no id record".into())),
    };
    let mut replayed = Vec::new();
    for (k, v) in kv.scan(&[T_DEFERRED], Some(&[T_DEFERRED + 1]), usize::MAX)? {
        let (off, bytes) = decode_deferred(&v)?;
        dev.write_all_at(&bytes, off).map_err(io)?;
        next_seq = next_seq.max(decode_u64_key(&k)? + 1);
        replayed.push(KvOp::Delete(k));
    }
    if !replayed.is_empty() {
        dev.sync_data().map_err(io)?;
        kv.commit(replayed, true)?;
    }
    for (k, _) in kv.scan(&[T_BLOB], Some(&[T_BLOB + 1]), usize::MAX)? {
        next_blob = next_blob.max(decode_u64_key(&k)? + 1);
    }
    Ok((next_blob, next_seq))
}

/// Up to `n` threads that write large `write_full`s beside the
/// committer, and where to send them work (`None`: no thread started;
/// callers then write in their own thread).
fn spawn_writers(
    shared: &Arc<Shared>,
    n: usize,
) -> (Vec<JoinHandle<()>>, Option<Sender<WriteWork>>) {
    if n == 0 {
        return (Vec::new(), None);
    }
    let (wtx, wrx) = mpsc::channel::<WriteWork>();
    let wrx = Arc::new(Mutex::new(wrx));
    let mut writers = Vec::new();
    for i in 0..n {
        let (s, wrx) = (shared.clone(), wrx.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("loligo-store-write-{i}"))
            .spawn(move || write_loop(&s, &wrx));
        match spawned {
            Ok(h) => writers.push(h),
            // Fewer writers (or none: callers write) still work.
            Err(_) => break,
        }
    }
    let tx = (!writers.is_empty()).then_some(wtx);
    (writers, tx)
}

/// A block size the store can use.
fn check_block_size(bs: u64) -> Result<()> {
    if !bs.is_power_of_two() || !(512..=1 << 20).contains(&bs) {
        return Err(StoreError::Invalid(format!(
            "block size {bs} must be a power of two in 512..=1MiB"
        )));
    }
    Ok(())
}

/// Reserve the block file's space up front so the first write to each
/// block does not allocate (a sparse file measured 4-5x slower on first
/// writes). Best effort: where fallocate is unsupported the file stays
/// sparse and still works.
/// Space `mkfs` wants free beside the block file (the KV store's start).
const MKFS_KV_RESERVE_BYTES: u64 = 256 << 20;

/// Bytes an unprivileged writer may still use on the file system of `path`.
pub fn free_bytes(path: &Path) -> std::io::Result<u64> {
    let st = nix::sys::statvfs::statvfs(path).map_err(std::io::Error::from)?;
    Ok(st.blocks_available().saturating_mul(st.fragment_size()))
}

/// Reserve the block file's space so that later writes cannot fail for
/// lack of it. A file system without fallocate keeps the file sparse; a
/// full one is an error.
fn preallocate(f: &File, size: u64) -> Result<()> {
    use std::os::unix::io::AsRawFd;
    let Ok(len) = libc::off_t::try_from(size) else {
        return Ok(());
    };
    // SAFETY: fallocate on a file descriptor we own, mode 0 (allocate),
    // range inside the file; it only changes the file's allocation.
    let r = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, len) };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => Err(StoreError::NoSpace {
            needed: size,
            free: 0,
        }),
        _ => Ok(()),
    }
}

fn ids(blob: u64, seq: u64) -> Vec<u8> {
    let mut e = Enc::default();
    e.var(blob).var(seq);
    e.0
}

fn get_onode(kv: &dyn Kv, c: CollectionId, o: &ObjectId) -> Result<Option<Onode>> {
    kv.get(&onode_key(c, o))?
        .map(|v| Onode::decode(&v))
        .transpose()
}

fn get_blob(kv: &dyn Kv, id: u64) -> Result<Blob> {
    let v = kv
        .get(&u64_key(T_BLOB, id))?
        .ok_or_else(|| StoreError::Corrupt(format!("blob {id} is referenced but missing")))?;
    let (mut b, place) = Blob::decode_head(&v)?;
    let chunks = place.chunks();
    if chunks > 0 {
        // One scan over the blob's chunk keys, which sort together.
        let mut next = 0;
        kv.visit(
            &csum_key(id, 0),
            Some(&csum_key(id, chunks)),
            &mut |k, v| {
                let (_, i) = decode_csum_key(k)?;
                if i != next {
                    return Ok(false);
                }
                b.fill_chunk(i, v)?;
                next += 1;
                Ok(true)
            },
        )?;
        if next != chunks {
            return Err(StoreError::Corrupt(format!(
                "blob {id}: checksum chunk {next} missing"
            )));
        }
    }
    Ok(b)
}

/// Reads at least this long tell the device the whole range first
/// ([`Device::prefetch`]; measured with four threads reading 4 MiB at
/// random places: 1.06 -> 1.7 GB/s).
const PREFETCH_MIN: usize = 256 << 10;

/// `n` consecutive device blocks from `disk_off` in one read, with pending
/// deferred data laid over the blocks that have some.
fn read_blocks(
    s: &Shared,
    pending: &HashMap<u64, Arc<Vec<u8>>>,
    disk_off: u64,
    n: u64,
) -> Result<Vec<u8>> {
    let bs = s.bs as usize;
    let len = usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_mul(bs))
        .ok_or_else(|| StoreError::Corrupt(format!("read of {n} blocks")))?;
    let mut buf = vec![0u8; len];
    if len >= PREFETCH_MIN {
        s.dev.prefetch(disk_off, len);
    }
    let mut read = || s.dev.read_exact_at(&mut buf, disk_off);
    if len as u64 >= DIRECT_READ_MIN {
        s.device_wait.read(read)
    } else {
        read()
    }
    .map_err(io)?;
    overlay_deferred(s, pending, disk_off, &mut buf)?;
    Ok(buf)
}

/// Count a device read of `buf` from `disk_off`, then lay the deferred
/// data not yet on the device (`pending`: this commit's; the store's
/// committed set) over the blocks that have some.
fn overlay_deferred(
    s: &Shared,
    pending: &HashMap<u64, Arc<Vec<u8>>>,
    disk_off: u64,
    buf: &mut [u8],
) -> Result<()> {
    let bs = s.bs as usize;
    s.read_bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
    s.read_ops.fetch_add(1, Ordering::Relaxed);
    let deferred = s.deferred.lock().map_err(|_| StoreError::Closed)?;
    if pending.is_empty() && deferred.is_empty() {
        return Ok(());
    }
    for (i, chunk) in buf.chunks_exact_mut(bs).enumerate() {
        let at = disk_off + (i * bs) as u64;
        if let Some(b) = pending.get(&at).or_else(|| deferred.get(&at)) {
            let m = b.len().min(bs);
            chunk[..m].copy_from_slice(&b[..m]);
        }
    }
    Ok(())
}

/// Reads at least this long go to the device with O_DIRECT.
const DIRECT_READ_MIN: u64 = 128 << 10;

/// The longest single read an O_DIRECT read is made of (bytes; a
/// multiple of every block size). Sequential reads of this size run as
/// fast as of 4 MiB on this project's test machine, and client writes
/// behind them on the same disk lost 0-20% of their rate under a paced
/// stream of them, against 30% under 4 MiB ones.
const DIRECT_READ_STRIDE: usize = 512 << 10;

/// `n` consecutive device blocks from `disk_off`, read with O_DIRECT into
/// a pooled aligned buffer, deferred data laid over them. A buffered read
/// of the same blocks costs the CPU twice over: the kernel zero-fills
/// fresh page-cache pages, then copies them into the caller's fresh
/// (again zero-filled) buffer; profiled on cold 4 MiB reads, the two took
/// half of both cores. `None` where the device refuses O_DIRECT: the
/// caller reads through the page cache instead.
fn read_blocks_direct(s: &Shared, disk_off: u64, n: u64) -> Result<Option<AlignedBuf>> {
    let Some(dev) = &s.dev_direct else {
        return Ok(None);
    };
    let len = usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_mul(s.bs as usize))
        .ok_or_else(|| StoreError::Corrupt(format!("read of {n} blocks")))?;
    let mut buf = s.read_pool.take_any(len);
    let read = || {
        // (In strides, as Ceph's deep scrub reads: a sync write queued
        // behind one waits out half a MiB, not megabytes.)
        let mut at = disk_off;
        for part in buf.as_mut_slice().chunks_mut(DIRECT_READ_STRIDE) {
            dev.read_exact_at(part, at)?;
            at += part.len() as u64;
        }
        Ok(())
    };
    match s.device_wait.read(read) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            s.read_pool.put(buf);
            return Ok(None);
        }
        Err(e) => return Err(io(e)),
    }
    overlay_deferred(s, &HashMap::new(), disk_off, buf.as_mut_slice())?;
    Ok(Some(buf))
}

/// Logical bytes `[off, off + len)` of an object (zeros for holes and
/// past the end), checking every block's checksum.
fn read_logical(
    s: &Shared,
    oid: &ObjectId,
    on: &Onode,
    off: u64,
    len: u64,
    blob: &mut dyn FnMut(u64) -> Result<Blob>,
    blocks: &mut dyn FnMut(u64, u64) -> Result<Vec<u8>>,
) -> Result<Vec<u8>> {
    // The common case: one uncompressed extent holds the whole range and
    // the range starts on a block of its blob. The blocks read are then
    // the answer once checked and cut to length: no second buffer to
    // zero-fill and copy into (megabytes per large read).
    if let Some(r) = one_run(s, on, off, len, blob)? {
        let mut run = blocks(r.blob.disk_off + r.first * s.bs, r.blocks)?;
        check_run(s, oid, r.extent, &r.blob, r.first, &run)?;
        run.truncate(len as usize);
        return Ok(run);
    }
    let mut out = vec![0u8; len as usize];
    read_logical_into(s, oid, on, off, &mut out, blob, blocks)?;
    Ok(out)
}

/// Where a range that one uncompressed extent holds, starting on a block
/// of its blob, lies on the device.
struct Run<'a> {
    extent: &'a Extent,
    blob: Blob,
    /// The blob's first block the range covers, and how many it covers.
    first: u64,
    blocks: u64,
}

/// `[off, off + len)` as one [`Run`], if the common case holds.
fn one_run<'a>(
    s: &Shared,
    on: &'a Onode,
    off: u64,
    len: u64,
    blob: &mut dyn FnMut(u64) -> Result<Blob>,
) -> Result<Option<Run<'a>>> {
    let end = off.saturating_add(len);
    let Some(x) = on
        .extents
        .iter()
        .find(|x| len > 0 && x.loff <= off && end <= x.loff + x.len)
    else {
        return Ok(None);
    };
    let b = blob(x.blob)?;
    let start = x.boff + (off - x.loff);
    // The run starts on a checksum unit, and ends on one (or the blob's
    // end), so that every unit it holds can be checked.
    let unit = b.csum_unit(s.bs);
    // (An extent past its blob's end is damage: the general path says so.)
    if b.comp != 0 || !start.is_multiple_of(unit) || start.saturating_add(len) > b.len {
        return Ok(None);
    }
    let first = start / s.bs;
    let end = (start + len).div_ceil(unit).saturating_mul(unit).min(b.len);
    let last = end.div_ceil(s.bs).max(first + 1) - 1;
    if b.moved.range(first..=last).next().is_some() {
        // Not one run on the device.
        return Ok(None);
    }
    Ok(Some(Run {
        extent: x,
        blob: b,
        first,
        blocks: last - first + 1,
    }))
}

/// Check blocks `first..` of extent `x`'s blob `b`, read as `run`,
/// against the blob's checksums.
fn check_run(
    s: &Shared,
    oid: &ObjectId,
    x: &Extent,
    b: &Blob,
    first: u64,
    run: &[u8],
) -> Result<()> {
    let Some(bi) = bad_block(s, b, first, run) else {
        return Ok(());
    };
    s.csum_errors.fetch_add(1, Ordering::Relaxed);
    let logical = x.loff + (bi * s.bs).saturating_sub(x.boff);
    Err(StoreError::Checksum {
        oid: oid.clone(),
        offset: logical,
    })
}

/// The first block of the first checksum unit of blob `b` that fails its
/// checksum, of the units from block `first` (the start of one) read as
/// `run` (whole units, the last maybe cut by the blob's end).
fn bad_block(s: &Shared, b: &Blob, first: u64, run: &[u8]) -> Option<u64> {
    let per_unit = 1u64 << b.csum_shift;
    debug_assert!(first.is_multiple_of(per_unit));
    let unit = b.csum_unit(s.bs) as usize;
    (first / per_unit..)
        .zip(run.chunks(unit))
        .find(|&(ui, data)| b.csums.get(ui as usize).copied() != Some(csum(data)))
        .map(|(ui, _)| ui * per_unit)
}

/// Inline data `d` from `off` into `out` (zeros past its end).
fn copy_inline(d: &[u8], off: u64, out: &mut [u8]) {
    let start = usize::try_from(off).unwrap_or(usize::MAX).min(d.len());
    let n = (d.len() - start).min(out.len());
    out[..n].copy_from_slice(&d[start..start + n]);
}

/// Blocks `first..=last` of uncompressed blob `b`, read run by run of
/// consecutive places on the device (blocks moved by copy-on-write are
/// elsewhere).
fn blob_blocks(
    s: &Shared,
    b: &Blob,
    first: u64,
    last: u64,
    blocks: &mut dyn FnMut(u64, u64) -> Result<Vec<u8>>,
) -> Result<Vec<u8>> {
    let bs = s.bs;
    if b.moved.range(first..=last).next().is_none() {
        return blocks(b.disk_off + first * bs, last - first + 1);
    }
    let places: Vec<u64> = (first..=last).map(|i| b.block_at(i, bs)).collect();
    let runs = runs(&places, bs);
    if runs.len() > 1 {
        // Scattered runs: the kernel reads them all at once, not one after
        // another (cold reads of an object after random copy-on-write
        // overwrites went from 0.32x to 0.69x of its speed before them).
        for &(at, len) in &runs {
            s.dev.prefetch(at, len as usize);
        }
    }
    let mut out = Vec::with_capacity(places.len() * bs as usize);
    for (at, len) in runs {
        out.extend_from_slice(&blocks(at, len / bs)?);
    }
    Ok(out)
}

/// [`read_logical`] into a zeroed buffer of the wanted length.
fn read_logical_into(
    s: &Shared,
    oid: &ObjectId,
    on: &Onode,
    off: u64,
    out: &mut [u8],
    blob: &mut dyn FnMut(u64) -> Result<Blob>,
    blocks: &mut dyn FnMut(u64, u64) -> Result<Vec<u8>>,
) -> Result<()> {
    if let Some(d) = &on.inline {
        copy_inline(d, off, out);
        return Ok(());
    }
    let len = out.len() as u64;
    let end = off + len;
    for x in &on.extents {
        let (xs, xe) = (x.loff, x.loff + x.len);
        if xe <= off || xs >= end {
            continue;
        }
        let b = blob(x.blob)?;
        let (s0, e0) = (xs.max(off), xe.min(end));
        if b.comp != 0 {
            // A compressed blob is read and checked whole, then unpacked.
            let packed = blocks(b.disk_off, b.len / s.bs)?;
            for (bi, data) in packed.chunks_exact(s.bs as usize).enumerate() {
                if b.csums.get(bi).copied() != Some(csum(data)) {
                    s.csum_errors.fetch_add(1, Ordering::Relaxed);
                    return Err(StoreError::Checksum {
                        oid: oid.clone(),
                        offset: xs,
                    });
                }
            }
            let clen =
                usize::try_from(b.clen).map_err(|_| StoreError::Corrupt("blob length".into()))?;
            let raw = lz4_flex::block::decompress(
                packed.get(..clen).unwrap_or(&packed),
                b.raw_len as usize,
            )
            .map_err(|e| StoreError::Corrupt(format!("blob {}: {e}", x.blob)))?;
            let from = (x.boff + (s0 - xs)) as usize;
            let to = (x.boff + (e0 - xs)) as usize;
            let src = raw.get(from..to).ok_or_else(|| {
                StoreError::Corrupt(format!("extent past blob {}'s data", x.blob))
            })?;
            out[(s0 - off) as usize..(e0 - off) as usize].copy_from_slice(src);
            continue;
        }
        // Whole checksum units covering [s0, e0) within the blob.
        if x.boff.saturating_add(e0 - xs) > b.len {
            return Err(StoreError::Corrupt(format!(
                "an extent of {oid} runs past blob {}'s end",
                x.blob
            )));
        }
        let unit = b.csum_unit(s.bs);
        let first = (x.boff + (s0 - xs)) / unit * unit / s.bs;
        let end = (x.boff + (e0 - xs)).div_ceil(unit).saturating_mul(unit);
        let last = end.min(b.len).div_ceil(s.bs).max(first + 1) - 1;
        let run = blob_blocks(s, &b, first, last, blocks)?;
        check_run(s, oid, x, &b, first, &run)?;
        for (bi, data) in (first..=last).zip(run.chunks_exact(s.bs as usize)) {
            // This block's bytes map to logical [ls, le).
            let bstart = bi * s.bs; // within blob
            let ls = xs as i128 + bstart as i128 - x.boff as i128;
            let from = (s0 as i128).max(ls);
            let to = (e0 as i128).min(ls + s.bs as i128);
            if from >= to {
                continue;
            }
            let src = (from - ls) as usize..(to - ls) as usize;
            let dst = (from - off as i128) as usize..(to - off as i128) as usize;
            out[dst].copy_from_slice(&data[src]);
        }
    }
    Ok(())
}

/// A copy of `data` in memory aligned for O_DIRECT. A large `write_full`
/// whose data is such a buffer (and whole blocks long) is written to the
/// device without another copy: callers that receive object data into
/// their own buffers (the OSD) can allocate them this way.
pub fn aligned_bytes(data: &[u8]) -> bytes::Bytes {
    bytes::Bytes::from_owner(AlignedBuf::with_content(0, data, data.len()))
}

/// What `fsck` found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsckReport {
    pub onodes: u64,
    pub blobs: u64,
    pub omap_keys: u64,
    pub used_bytes: u64,
    pub free_bytes: u64,
    /// Checksums verified, each of a block or of a larger unit (deep
    /// only).
    pub blocks_checked: u64,
    /// Blocks that copy-on-write overwrites moved out of their blob's
    /// range: how scattered the data is (each is read apart).
    pub moved_blocks: u64,
    /// Deferred writes whose records are still in the KV (their data not
    /// yet known synced in place; a mount replays them). Bounded while the
    /// store runs: it syncs and deletes them every 1,024 or so.
    pub deferred_records: u64,
    /// Everything wrong, one line each; empty when clean.
    pub errors: Vec<String>,
}

fn fsck(s: &Shared, deep: bool) -> Result<FsckReport> {
    let mut r = FsckReport::default();
    let blobs = fsck_blobs(s, &mut r)?;
    let refs = fsck_objects(s, &mut r, &blobs)?;
    fsck_space(s, &mut r, &blobs, &refs)?;
    r.deferred_records = scan_all(s, T_DEFERRED)?.len() as u64;
    if deep {
        let none = HashMap::new();
        for (id, b) in &blobs {
            let per_unit = 1u64 << b.csum_shift;
            for (i, &want) in b.csums.iter().enumerate() {
                let first = i as u64 * per_unit;
                let n = per_unit.min((b.len / s.bs).saturating_sub(first));
                // (Blocks of a blob with larger units never move.)
                let data = read_blocks(s, &none, b.block_at(first, s.bs), n)?;
                r.blocks_checked += 1;
                if csum(&data) != want {
                    r.errors
                        .push(format!("blob {id} checksum unit {i}: checksum mismatch"));
                }
            }
        }
    }
    Ok(r)
}

/// Every record of type `t`.
fn scan_all(s: &Shared, t: u8) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    s.kv.scan(&[t], Some(&[t + 1]), usize::MAX)
}

/// Every blob with its checksums; each blob must have exactly the
/// checksum chunks its record names.
fn fsck_blobs(s: &Shared, r: &mut FsckReport) -> Result<BTreeMap<u64, Blob>> {
    let mut blobs: BTreeMap<u64, Blob> = BTreeMap::new();
    let mut chunks_of: BTreeMap<u64, u64> = BTreeMap::new();
    for (k, v) in scan_all(s, T_BLOB)? {
        let (b, place) = Blob::decode_head(&v)?;
        let id = decode_u64_key(&k)?;
        chunks_of.insert(id, place.chunks());
        blobs.insert(id, b);
    }
    let mut seen: BTreeMap<u64, u64> = BTreeMap::new();
    for (k, v) in scan_all(s, T_CSUM)? {
        let (id, i) = decode_csum_key(&k)?;
        match (blobs.get_mut(&id), chunks_of.get(&id)) {
            (Some(b), Some(&n)) if i < n => {
                if let Err(e) = b.fill_chunk(i, &v) {
                    r.errors.push(format!("blob {id} checksum chunk {i}: {e}"));
                }
                *seen.entry(id).or_default() += 1;
            }
            _ => r.errors.push(format!(
                "checksum chunk {i} of blob {id}, which has no such chunk"
            )),
        }
    }
    for (id, &n) in &chunks_of {
        let have = seen.get(id).copied().unwrap_or(0);
        if have != n {
            r.errors.push(format!(
                "blob {id}: {have} of its {n} checksum chunks present"
            ));
        }
    }
    r.blobs = blobs.len() as u64;
    Ok(blobs)
}

/// Onodes (in existing collections, extents in order, inside their blobs
/// and their object's size), omap keys (of objects that say they have
/// an omap) and records (of existing collections); the references found
/// to each blob.
fn fsck_objects(
    s: &Shared,
    r: &mut FsckReport,
    blobs: &BTreeMap<u64, Blob>,
) -> Result<BTreeMap<u64, u64>> {
    let colls: Vec<CollectionId> = scan_all(s, T_COLL)?
        .iter()
        .map(|(k, _)| decode_coll(k))
        .collect::<Result<_>>()?;
    let mut refs: BTreeMap<u64, u64> = BTreeMap::new();
    let mut onodes: BTreeMap<Vec<u8>, bool> = BTreeMap::new();
    for (k, v) in scan_all(s, T_ONODE)? {
        r.onodes += 1;
        let c = decode_coll(&k)?;
        let (oid, _) = decode_object(&k, 14)?;
        if !colls.contains(&c) {
            r.errors
                .push(format!("object {oid} in missing collection {c}"));
        }
        let on = Onode::decode(&v)?;
        let mut prev_end = 0;
        for x in &on.extents {
            *refs.entry(x.blob).or_default() += 1;
            if x.loff < prev_end {
                r.errors
                    .push(format!("{c}/{oid}: overlapping extents at {}", x.loff));
            }
            prev_end = x.loff + x.len;
            match blobs.get(&x.blob) {
                None => r.errors.push(format!(
                    "{c}/{oid}: extent refers to missing blob {}",
                    x.blob
                )),
                Some(b) if x.boff + x.len > if b.comp != 0 { b.raw_len } else { b.len } => r
                    .errors
                    .push(format!("{c}/{oid}: extent past the end of blob {}", x.blob)),
                _ => {}
            }
        }
        if prev_end > on.size.div_ceil(s.bs) * s.bs {
            r.errors
                .push(format!("{c}/{oid}: extents past the object's size"));
        }
        let mut p = k.clone();
        p[0] = T_OMAP;
        onodes.insert(p, on.omap);
    }
    for (k, _) in scan_all(s, T_OMAP)? {
        r.omap_keys += 1;
        let (_, end) = decode_object(&k, 14)?;
        match onodes.get(&k[..end]) {
            None => r.errors.push("omap key of a missing object".to_string()),
            Some(false) => r
                .errors
                .push("omap key of an object whose onode says it has none".to_string()),
            Some(true) => {}
        }
    }
    for (k, _) in scan_all(s, T_RECORD)? {
        let c = decode_coll(&k)?;
        if !colls.contains(&c) {
            r.errors.push(format!("record of missing collection {c}"));
        }
    }
    Ok(refs)
}

/// Space: blobs (their reference counts and checksums right) and free
/// extents tile the device exactly.
fn fsck_space(
    s: &Shared,
    r: &mut FsckReport,
    blobs: &BTreeMap<u64, Blob>,
    refs: &BTreeMap<u64, u64>,
) -> Result<()> {
    let mut spans: Vec<(u64, u64, String)> = Vec::new();
    for (id, b) in blobs {
        let n = refs.get(id).copied().unwrap_or(0);
        if n != b.refs {
            r.errors.push(format!(
                "blob {id}: {} references recorded, {n} found",
                b.refs
            ));
        }
        if b.csums.len() as u64 != Blob::csum_count(b.len, b.csum_unit(s.bs)) {
            r.errors.push(format!(
                "blob {id}: {} checksums for {} bytes",
                b.csums.len(),
                b.len
            ));
        }
        r.used_bytes += b.len;
        r.moved_blocks += b.moved.len() as u64;
        for (i, off) in &b.moved {
            if !off.is_multiple_of(s.bs) || *i >= b.len / s.bs {
                r.errors
                    .push(format!("blob {id}: block {i} moved to {off}, not a block"));
            }
        }
        for (off, len) in b.spans(s.bs) {
            spans.push((off, len, format!("blob {id}")));
        }
    }
    for (k, v) in scan_all(s, T_FREE)? {
        let (off, len) = (decode_u64_key(&k)?, Dec::new(&v).var()?);
        r.free_bytes += len;
        spans.push((off, len, "free extent".to_string()));
    }
    spans.sort();
    let mut at = 0;
    for (off, len, what) in &spans {
        if *off < at {
            r.errors
                .push(format!("{what} at {off} overlaps the previous allocation"));
        } else if *off > at {
            r.errors.push(format!(
                "{} bytes at {at} are neither free nor used (leaked)",
                off - at
            ));
        }
        at = at.max(off + len);
    }
    if at != s.size {
        r.errors
            .push(format!("allocations end at {at}, device is {}", s.size));
    }
    Ok(())
}

impl ObjectStore for BlockStore {
    fn limits(&self) -> &Limits {
        &self.shared.limits
    }

    fn queue_transaction(&self, t: Transaction) -> Commit {
        self.queue(t, true)
    }

    /// A batch of unsynced transactions skips the KV's sync when it
    /// wrote nothing to the device and left no deferred record (a batch
    /// that did is synced as usual: its data must not outlive a lost
    /// commit of the metadata it replaces).
    fn queue_unsynced(&self, t: Transaction) -> Commit {
        self.queue(t, false)
    }

    fn collections(&self) -> Result<Vec<CollectionId>> {
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        self.shared
            .kv
            .scan(&[T_COLL], Some(&[T_COLL + 1]), usize::MAX)?
            .iter()
            .map(|(k, _)| decode_coll(k))
            .collect()
    }

    fn collection_exists(&self, c: CollectionId) -> Result<bool> {
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        Ok(self.shared.kv.get(&coll_prefix(T_COLL, c))?.is_some())
    }

    fn exists(&self, c: CollectionId, o: &ObjectId) -> Result<bool> {
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        if self.shared.kv.get(&onode_key(c, o))?.is_some() {
            return Ok(true);
        }
        self.need_coll(c)?;
        Ok(false)
    }

    fn stat_attr(
        &self,
        c: CollectionId,
        o: &ObjectId,
        name: &str,
    ) -> Result<Option<(ObjectStat, Option<Vec<u8>>)>> {
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        match get_onode(&self.shared.kv, c, o)? {
            Some(mut on) => Ok(Some((ObjectStat { size: on.size }, on.attrs.remove(name)))),
            None => {
                self.need_coll(c)?;
                Ok(None)
            }
        }
    }

    fn stat(&self, c: CollectionId, o: &ObjectId) -> Result<ObjectStat> {
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        Ok(ObjectStat {
            size: self.onode(c, o)?.size,
        })
    }

    fn read(&self, c: CollectionId, o: &ObjectId, extents: &[(u64, u64)]) -> Result<Vec<Vec<u8>>> {
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        let on = self.onode(c, o)?;
        self.read_extents(o, &on, extents)
    }

    fn read_with_attrs(
        &self,
        c: CollectionId,
        o: &ObjectId,
        extents: &[(u64, u64)],
    ) -> Result<Option<crate::ObjectRead>> {
        // One view of the store: the onode and the blocks it names.
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        let Some(on) = get_onode(&self.shared.kv, c, o)? else {
            self.need_coll(c)?;
            return Ok(None);
        };
        let extents = (extents.iter())
            .map(|&(off, len)| self.read_range(o, &on, off, len))
            .collect::<Result<_>>()?;
        Ok(Some(crate::ObjectRead {
            size: on.size,
            attrs: on.attrs,
            extents,
        }))
    }

    fn read_bytes(&self, c: CollectionId, o: &ObjectId, off: u64, len: u64) -> Result<Bytes> {
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        let on = self.onode(c, o)?;
        self.read_range(o, &on, off, len)
    }

    fn getattr(&self, c: CollectionId, o: &ObjectId, name: &str) -> Result<Vec<u8>> {
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        self.onode(c, o)?
            .attrs
            .remove(name)
            .ok_or_else(|| StoreError::NoAttr {
                oid: o.clone(),
                name: name.to_string(),
            })
    }

    fn getattrs(&self, c: CollectionId, o: &ObjectId) -> Result<BTreeMap<String, Vec<u8>>> {
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        Ok(self.onode(c, o)?.attrs)
    }

    fn read_whole(&self, c: CollectionId, o: &ObjectId, data: bool) -> Result<Option<WholeObject>> {
        if data {
            if let Some(w) = self.read_whole_unheld(c, o)? {
                return Ok(Some(w));
            }
        }
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        let Some(on) = get_onode(&self.shared.kv, c, o)? else {
            self.need_coll(c)?;
            return Ok(None);
        };
        let bytes = if data {
            self.read_whole_data(o, &on)?
        } else {
            Vec::new()
        };
        Ok(Some(WholeObject {
            size: on.size,
            data: bytes,
            attrs: on.attrs,
            omap_header: on.header,
            omap: on.omap,
        }))
    }

    fn omap_header(&self, c: CollectionId, o: &ObjectId) -> Result<Vec<u8>> {
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        Ok(self.onode(c, o)?.header)
    }

    fn omap_get(
        &self,
        c: CollectionId,
        o: &ObjectId,
        keys: &[Vec<u8>],
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        self.onode(c, o)?;
        let p = omap_prefix(c, o);
        let mut out = BTreeMap::new();
        for k in keys {
            let mut key = p.clone();
            key.extend_from_slice(k);
            if let Some(v) = self.shared.kv.get(&key)? {
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
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        if !self.onode(c, o)?.omap {
            return Ok(Vec::new());
        }
        let p = omap_prefix(c, o);
        let mut s = p.clone();
        s.extend_from_slice(start);
        let e = match end {
            Some(e) => {
                let mut k = p.clone();
                k.extend_from_slice(e);
                k
            }
            None => prefix_end(&p),
        };
        Ok(self
            .shared
            .kv
            .scan(&s, Some(&e), limit)?
            .into_iter()
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
        let (page, next) = self.list_onodes(c, &[hashes], start, limit, None)?;
        Ok((page.into_iter().map(|(o, _)| o).collect(), next))
    }

    fn list_ranges_attr(
        &self,
        c: CollectionId,
        hashes: &[Range<u64>],
        start: Option<&ObjectId>,
        limit: usize,
        name: &str,
    ) -> Result<(Vec<(ObjectId, Option<Vec<u8>>)>, Option<ObjectId>)> {
        self.list_onodes(c, hashes, start, limit, Some(name))
    }

    fn record(&self, c: CollectionId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        self.need_coll(c)?;
        self.shared.kv.get(&record_key(c, key))
    }

    fn records(
        &self,
        c: CollectionId,
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let _g = self.shared.view.read().map_err(|_| StoreError::Closed)?;
        self.need_coll(c)?;
        let p = coll_prefix(T_RECORD, c);
        let mut s = p.clone();
        s.extend_from_slice(start);
        Ok(self
            .shared
            .kv
            .scan(&s, Some(&prefix_end(&p)), limit)?
            .into_iter()
            .map(|(k, v)| (k[p.len()..].to_vec(), v))
            .collect())
    }

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

    fn statfs(&self) -> Result<StoreStats> {
        let free = self.shared.free_bytes.load(Ordering::Relaxed);
        let space = self.shared.media.space();
        Ok(StoreStats {
            total: self.shared.size,
            used: self.shared.size.saturating_sub(free),
            free,
            meta: space.meta,
            host_total: space.host_total,
            host_free: space.host_free,
        })
    }
}

impl BlockStore {
    /// Start an op's [`Prepared`] work: a large `write_full` goes to the
    /// writer threads (or, without them, is written here).
    /// Start op `before.len()` of a transaction (`before`: the ops ahead
    /// of it) if it is a large `write_full`.
    fn start_write(&self, op: &Op, before: &[Op]) -> Pre {
        let Op::WriteFull { coll, oid, data } = op else {
            return Pre::Done(None);
        };
        let s = &self.shared;
        if (data.len() as u64) <= s.deferred_max {
            return Pre::Done(None);
        }
        let hint = hint_before(s, before, *coll, oid);
        let (reply, rx) = mpsc::sync_channel(1);
        let work = WriteWork {
            coll: *coll,
            data: data.clone(),
            csum_shift: hint.map_or(0, |h| h.csum_shift(s.bs, CSUM_SHIFT_MAX)),
            reply,
        };
        let unsent = match self.writer_tx.lock() {
            Ok(tx) => match tx.as_ref() {
                Some(tx) => tx.send(work).err().map(|e| e.0),
                None => Some(work),
            },
            Err(_) => Some(work),
        };
        match unsent {
            None => Pre::Writing(rx),
            Some(w) => Pre::Done(prepare_write(s, w.coll, &w.data, w.csum_shift)),
        }
    }

    fn need_coll(&self, c: CollectionId) -> Result<()> {
        match self.shared.kv.get(&coll_prefix(T_COLL, c))? {
            Some(_) => Ok(()),
            None => Err(StoreError::NoCollection(c)),
        }
    }

    /// Extents of object `o` as onode `on` describes it, each clipped to
    /// its size (the caller holds the view lock).
    fn read_extents(
        &self,
        o: &ObjectId,
        on: &Onode,
        extents: &[(u64, u64)],
    ) -> Result<Vec<Vec<u8>>> {
        let s = &self.shared;
        extents
            .iter()
            .map(|&(off, len)| {
                let st = off.min(on.size);
                let e = off.saturating_add(len).min(on.size);
                read_logical(
                    s,
                    o,
                    on,
                    st,
                    e - st,
                    &mut |id| get_blob(&s.kv, id),
                    &mut |d, n| self.read_blocks(d, n),
                )
            })
            .collect()
    }

    /// Logical bytes `[off, off + len)` of an object, clipped to its
    /// size, with the view held. A range of at least `DIRECT_READ_MIN`
    /// bytes in one run on the device comes from the read cache or is
    /// read with O_DIRECT into a pooled buffer, handed on without a copy
    /// (`read_blocks_direct`: a buffered read costs a zero-filled page
    /// cache page, a copy into a zero-filled buffer, and the page cache's
    /// upkeep); any other through `read_logical`.
    fn read_range(&self, o: &ObjectId, on: &Onode, off: u64, len: u64) -> Result<Bytes> {
        let s = &self.shared;
        let st = off.min(on.size);
        let len = off.saturating_add(len).min(on.size) - st;
        let blob = &mut |id| get_blob(&s.kv, id);
        if len >= DIRECT_READ_MIN {
            if let Some(r) = one_run(s, on, st, len, blob)? {
                let disk_off = r.blob.disk_off + r.first * s.bs;
                if let Some(hit) = s.cache.get(disk_off, len as usize) {
                    return Ok(hit);
                }
                if let Some(buf) = read_blocks_direct(s, disk_off, r.blocks)? {
                    let run = s.read_pool.bytes(buf);
                    check_run(s, o, r.extent, &r.blob, r.first, &run)?;
                    // Inserted while the view is held: see `cache`.
                    s.cache.insert(disk_off, run.clone());
                    return Ok(run.slice(..len as usize));
                }
            }
        }
        let v = read_logical(s, o, on, st, len, blob, &mut |d, n| self.read_blocks(d, n))?;
        Ok(Bytes::from(v))
    }

    /// An object's onode. Its collection is checked only when there is
    /// none (an object keeps its collection from being removed).
    fn onode(&self, c: CollectionId, o: &ObjectId) -> Result<Onode> {
        if let Some(on) = get_onode(&self.shared.kv, c, o)? {
            return Ok(on);
        }
        self.need_coll(c)?;
        Err(StoreError::NoObject {
            coll: c,
            oid: o.clone(),
        })
    }
}

/// For a large `write_full` (see `start_write`) into an uncompressed
/// collection: reserve space, write the data there, compute checksums.
/// `None` leaves the op to the committer (a failed store, compression, no
/// space, errors).
fn prepare_write(s: &Shared, coll: CollectionId, data: &[u8], csum_shift: u8) -> Option<Prepared> {
    if s.failed.load(Ordering::Relaxed) {
        return None;
    }
    let comp = s.kv.get(&coll_prefix(T_COLL, coll)).ok()??;
    if comp.first().copied().unwrap_or(0) != 0 {
        return None;
    }
    let bs = s.bs as usize;
    let len = data.len().div_ceil(bs) * bs;
    // A caller's buffer that is aligned and whole blocks long (see
    // [`aligned_bytes`]) goes to the device as it is; anything else is
    // copied into a pooled aligned buffer.
    let direct = len == data.len() && (data.as_ptr() as usize).is_multiple_of(DIRECT_ALIGN);
    let pooled = if direct {
        None
    } else {
        Some(s.buf_pool.take(data, len))
    };
    let src: &[u8] = match &pooled {
        Some(b) => b.as_slice(),
        None => data,
    };
    let unit = (s.bs as usize) << csum_shift;
    let written = (|| {
        let pieces = s.alloc.lock().ok()?.reserve(len as u64)?;
        let dev = s.dev_direct.as_ref().unwrap_or(&s.dev);
        let mut at = 0usize;
        let mut csums = Vec::with_capacity(pieces.len());
        for &(off, n) in &pieces {
            let piece = &src[at..at + n as usize];
            csums.push(piece.chunks(unit).map(csum).collect());
            if dev.write_all_at(piece, off).is_err() {
                if let Ok(mut a) = s.alloc.lock() {
                    a.unreserve(&pieces);
                }
                return None;
            }
            at += n as usize;
        }
        Some((pieces, csums))
    })();
    if let Some(b) = pooled {
        s.buf_pool.put(b);
    }
    let (pieces, csums) = written?;
    Some(Prepared {
        pieces,
        csums,
        csum_shift,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 64 MiB store in a fresh directory named after `name`.
    fn temp_store(name: &str) -> (std::path::PathBuf, BlockConfig, BlockStore) {
        let dir = std::env::temp_dir().join(format!("loligo-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cfg = BlockConfig {
            size: 64 << 20,
            ..BlockConfig::default()
        };
        BlockStore::mkfs(&dir, &cfg).unwrap();
        let s = BlockStore::mount(&dir, &cfg).unwrap();
        (dir, cfg, s)
    }

    /// A missing or stray checksum chunk is corruption: the blob's reads
    /// say so, and fsck names the blob.
    #[test]
    fn missing_and_stray_checksum_chunks_are_reported() {
        let (dir, _, s) = temp_store("chunk-loss");
        let c = CollectionId::pg(1, 0);
        let o = ObjectId::new(1, "chunky");
        let mut t = Transaction::new();
        t.create_collection(c).write_full(c, &o, vec![3u8; 1 << 20]);
        s.apply(t).unwrap();
        assert!(s.fsck(true).unwrap().errors.is_empty());
        let kv = &s.shared.kv;
        let chunks = kv.scan(&[T_CSUM], Some(&[T_CSUM + 1]), usize::MAX).unwrap();
        assert_eq!(chunks.len(), 4, "a 1 MiB blob has 4 chunks");
        let (k2, _) = &chunks[2];
        let (id, _) = decode_csum_key(k2).unwrap();
        kv.commit(
            vec![
                KvOp::Delete(k2.clone()),
                KvOp::Put(csum_key(id + 100, 0), vec![0; 8]),
            ],
            true,
        )
        .unwrap();
        match s.read(c, &o, &[(0, 4096)]) {
            Err(StoreError::Corrupt(m)) => assert!(m.contains("checksum chunk 2"), "{m}"),
            other => panic!("expected corruption, got {other:?}"),
        }
        let r = s.fsck(false).unwrap();
        assert_eq!(r.errors.len(), 2, "{:?}", r.errors);
        assert!(r.errors.iter().any(|e| e.contains("3 of its 4")));
        assert!(r
            .errors
            .iter()
            .any(|e| e.contains(&format!("blob {}", id + 100))));
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An extent that runs past its blob's end (a damaged record) fails
    /// every read path with an error, never a panic or unchecked bytes.
    #[test]
    fn an_extent_past_its_blob_is_an_error_on_every_read_path() {
        let (dir, _, s) = temp_store("short-blob");
        let c = CollectionId::pg(1, 0);
        let o = ObjectId::new(1, "long");
        let mut t = Transaction::new();
        t.create_collection(c)
            .write_full(c, &o, vec![5u8; 256 << 10]);
        s.apply(t).unwrap();
        let kv = &s.shared.kv;
        let blobs = kv.scan(&[T_BLOB], Some(&[T_BLOB + 1]), usize::MAX).unwrap();
        assert_eq!(blobs.len(), 1);
        let (k, v) = &blobs[0];
        let (mut b, _) = Blob::decode_head(v).unwrap();
        b.len = 64 << 10;
        b.csums.truncate(16);
        kv.commit(vec![KvOp::Put(k.clone(), b.encode_head())], true)
            .unwrap();
        for (off, len) in [(0, 256 << 10), (64 << 10, 4096), (0, u64::MAX)] {
            assert!(s.read(c, &o, &[(off, len)]).is_err(), "read {off}+{len}");
            assert!(
                s.read_bytes(c, &o, off, len).is_err(),
                "read_bytes {off}+{len}"
            );
        }
        assert_eq!(
            s.read(c, &o, &[(0, 4096)]).unwrap()[0],
            vec![5u8; 4096],
            "what the blob holds still reads"
        );
        assert!(s.read_whole(c, &o, true).is_err());
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A store written before checksums went into chunks kept a large
    /// blob's checksums in its record: such a blob still reads, and its
    /// first small overwrite moves them into chunks.
    #[test]
    fn a_large_blob_with_checksums_in_its_record_reads_and_moves_to_chunks() {
        let (dir, cfg, s) = temp_store("legacy-blob");
        let c = CollectionId::pg(1, 0);
        let o = ObjectId::new(1, "legacy");
        let mut model: Vec<u8> = (0..1u32 << 20).map(|i| (i % 253) as u8).collect();
        let mut t = Transaction::new();
        t.create_collection(c).write_full(c, &o, model.clone());
        s.apply(t).unwrap();
        // Rewrite every chunked blob's record the old way.
        let kv = &s.shared.kv;
        let mut ops = Vec::new();
        for (k, v) in kv.scan(&[T_BLOB], Some(&[T_BLOB + 1]), usize::MAX).unwrap() {
            let id = decode_u64_key(&k).unwrap();
            let (mut b, place) = Blob::decode_head(&v).unwrap();
            for i in 0..place.chunks() {
                b.fill_chunk(i, &kv.get(&csum_key(id, i)).unwrap().unwrap())
                    .unwrap();
                ops.push(KvOp::Delete(csum_key(id, i)));
            }
            let mut e = Enc::default();
            e.var(b.disk_off)
                .var(b.len)
                .var(b.refs)
                .var(b.csums.len() as u64);
            for &x in &b.csums {
                e.u32le(x);
            }
            e.u8(0);
            ops.push(KvOp::Put(k, e.0));
        }
        assert!(ops.len() > 1, "the 1 MiB object has a chunked blob");
        kv.commit(ops, true).unwrap();
        // Mounted again, as an older store's records are met.
        drop(s);
        let s = BlockStore::mount(&dir, &cfg).unwrap();
        let kv = &s.shared.kv;
        assert!(kv
            .scan(&[T_CSUM], Some(&[T_CSUM + 1]), usize::MAX)
            .unwrap()
            .is_empty());
        assert_eq!(s.read(c, &o, &[(0, 1 << 20)]).unwrap()[0], model);
        assert!(s.fsck(true).unwrap().errors.is_empty());
        let mut t = Transaction::new();
        t.write(c, &o, 70 * 4096, vec![0x5a; 4096]);
        s.apply(t).unwrap();
        model[70 * 4096..71 * 4096].fill(0x5a);
        assert_eq!(s.read(c, &o, &[(0, 1 << 20)]).unwrap()[0], model);
        assert!(!kv
            .scan(&[T_CSUM], Some(&[T_CSUM + 1]), usize::MAX)
            .unwrap()
            .is_empty());
        let r = s.fsck(true).unwrap();
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
