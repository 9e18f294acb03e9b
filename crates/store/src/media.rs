//! Where a block store keeps its bytes: its data device and its journal,
//! each a [`Device`] (positioned reads and writes, and a sync), and its
//! metadata engine, a [`Kv`]. [`DirMedia`] is the real one, a directory
//! of files; [`crate::sim_media::SimMedia`] keeps the same three in memory
//! and can lose power.
//!
//! What the store may assume of a device (and a medium must provide): a
//! read sees every write before it; a write is durable once a later
//! `sync_data` of the same device has returned; a power loss keeps any
//! subset of the writes not yet synced, each whole, torn or lost. A new
//! journal appears whole or not at all. Nothing is ordered between
//! devices but by a sync.
//!
//! A medium must never acknowledge a sync it has not made durable.

use crate::error::{Result, StoreError};
use crate::kv::{FjallKv, Kv};
use crate::lsm::LsmKv;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file or disk the store addresses by byte offset.
pub trait Device: Send + Sync {
    /// Fill `buf` from `off`.
    fn read_exact_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()>;
    /// Write all of `buf` at `off`.
    fn write_all_at(&self, buf: &[u8], off: u64) -> std::io::Result<()>;
    /// Make every write so far durable.
    fn sync_data(&self) -> std::io::Result<()>;
    /// Its size in bytes.
    fn size(&self) -> std::io::Result<u64>;
    /// A hint that `[off, off + len)` is about to be read. A failure
    /// changes nothing.
    fn prefetch(&self, off: u64, len: usize) {
        let _ = (off, len);
    }
}

impl Device for File {
    fn read_exact_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        FileExt::read_exact_at(self, buf, off)
    }

    fn write_all_at(&self, buf: &[u8], off: u64) -> std::io::Result<()> {
        FileExt::write_all_at(self, buf, off)
    }

    fn sync_data(&self) -> std::io::Result<()> {
        File::sync_data(self)
    }

    /// The length of a file or of a block device (whose metadata says 0).
    fn size(&self) -> std::io::Result<u64> {
        use std::io::{Seek, SeekFrom};
        let mut f = self;
        f.seek(SeekFrom::End(0))
    }

    /// Ask the kernel to read the range into the page cache now, all of
    /// it at once: a cold read of a large object then waits for one batch
    /// of device reads instead of growing readahead windows.
    fn prefetch(&self, off: u64, len: usize) {
        let (Ok(off), Ok(len)) = (libc::off_t::try_from(off), libc::off_t::try_from(len)) else {
            return;
        };
        let _ = nix::fcntl::posix_fadvise(
            self,
            off,
            len,
            nix::fcntl::PosixFadviseAdvice::POSIX_FADV_WILLNEED,
        );
    }
}

/// The space the metadata takes and what its host has (for `statfs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MetaSpace {
    /// Bytes of the engine's files and the journal.
    pub meta: u64,
    /// The host file system's space as an unprivileged writer sees it
    /// (used plus available: blocks kept for root count as neither),
    /// without the data device if it is a file there.
    pub host_total: u64,
    /// What an unprivileged writer may still use there.
    pub host_free: u64,
}

/// A block store's three places.
pub trait Media: Send + Sync {
    /// Open the metadata engine.
    fn engine(&self) -> Result<Box<dyn Kv>>;
    /// The data device.
    fn block(&self) -> Result<Arc<dyn Device>>;
    /// The data device for large aligned transfers that skip the page
    /// cache (`None` where the medium has no such way).
    fn block_direct(&self) -> Option<Arc<dyn Device>>;
    /// The journal, if it was created.
    fn journal(&self) -> Result<Option<Arc<dyn Device>>>;
    /// Create the journal: `len` bytes, zero but for `head` at offset 0,
    /// durable whole before it appears.
    fn create_journal(&self, len: u64, head: &[u8]) -> Result<()>;
    /// How the journal is named in errors.
    fn journal_name(&self) -> String;
    /// The space the metadata takes.
    fn space(&self) -> MetaSpace;
}

/// Device file name inside a store directory.
pub const BLOCK_FILE: &str = "block";
/// The directory of a store's engine when it is fjall (stores made
/// before [`LSM_DIR`]; they keep it).
pub const KV_DIR: &str = "kv";
/// The directory of a store's engine when it is [`LsmKv`] (new stores).
pub const LSM_DIR: &str = "lsm";

fn io(e: impl std::fmt::Display) -> StoreError {
    StoreError::Io(e.to_string())
}

/// A store's directory: the block file (or a link to a device), the
/// engine's directory and the journal file.
pub struct DirMedia {
    dir: PathBuf,
}

impl DirMedia {
    pub fn new(dir: &Path) -> DirMedia {
        DirMedia {
            dir: dir.to_path_buf(),
        }
    }

    fn journal_path(&self) -> PathBuf {
        self.dir.join(crate::wal::WAL_FILE)
    }

    /// The engine's directory: fjall's if the store has one, else the
    /// journal-less tree's. A directory that cannot be looked at, or that
    /// holds both, is refused (guessing could open an empty engine beside
    /// the store's).
    fn engine_dir(&self) -> Result<PathBuf> {
        let fjall = self.dir.join(KV_DIR);
        let lsm = self.dir.join(LSM_DIR);
        let has = |p: &Path| {
            p.try_exists()
                .map_err(|e| StoreError::Io(format!("{}: {e}", p.display())))
        };
        match (has(&fjall)?, has(&lsm)?) {
            (true, true) => Err(StoreError::Corrupt(format!(
                "{} holds two metadata engines ({KV_DIR}/ and {LSM_DIR}/)",
                self.dir.display()
            ))),
            (true, false) => Ok(fjall),
            (false, _) => Ok(lsm),
        }
    }

    fn open_block(&self, direct: bool) -> std::io::Result<File> {
        let mut o = OpenOptions::new();
        o.read(true).write(true);
        if direct {
            o.custom_flags(libc::O_DIRECT);
        }
        o.open(self.dir.join(BLOCK_FILE))
    }
}

impl Media for DirMedia {
    fn engine(&self) -> Result<Box<dyn Kv>> {
        let dir = self.engine_dir()?;
        if dir.ends_with(KV_DIR) {
            Ok(Box::new(FjallKv::open(&dir)?))
        } else {
            Ok(Box::new(LsmKv::open(&dir)?))
        }
    }

    fn block(&self) -> Result<Arc<dyn Device>> {
        Ok(Arc::new(self.open_block(false).map_err(io)?))
    }

    fn block_direct(&self) -> Option<Arc<dyn Device>> {
        let f = self.open_block(true).ok()?;
        Some(Arc::new(f))
    }

    fn journal(&self) -> Result<Option<Arc<dyn Device>>> {
        let path = self.journal_path();
        if !path.exists() {
            return Ok(None);
        }
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .map_err(|e| StoreError::Io(format!("journal: {e}")))?;
        Ok(Some(Arc::new(f)))
    }

    /// Written whole (so later syncs flush data only) under another name,
    /// synced, then renamed into place and the directory synced.
    fn create_journal(&self, len: u64, head: &[u8]) -> Result<()> {
        let path = self.journal_path();
        let tmp = path.with_extension("new");
        let f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&tmp)
            .map_err(io)?;
        let zeros = vec![0u8; 1 << 20];
        let mut off = 0;
        while off < len {
            let n = (len - off).min(zeros.len() as u64) as usize;
            FileExt::write_all_at(&f, &zeros[..n], off).map_err(io)?;
            off += n as u64;
        }
        FileExt::write_all_at(&f, head, 0).map_err(io)?;
        f.sync_all().map_err(io)?;
        drop(f);
        std::fs::rename(&tmp, &path).map_err(io)?;
        File::open(&self.dir).and_then(|d| d.sync_all()).map_err(io)
    }

    fn journal_name(&self) -> String {
        self.journal_path().display().to_string()
    }

    fn space(&self) -> MetaSpace {
        let dir = &self.dir;
        let engine = self.engine_dir().unwrap_or_else(|_| dir.join(LSM_DIR));
        let meta = dir_bytes(&engine).saturating_add(file_bytes(&self.journal_path()));
        // The file system the metadata grows on (a failure to ask leaves
        // the data space alone to judge by). (statvfs's field types
        // differ between platforms: u64 here.)
        #[allow(clippy::unnecessary_cast)]
        let (host_total, host_free) = nix::sys::statvfs::statvfs(&engine).map_or((0, 0), |v| {
            user_space(
                v.blocks() as u64,
                v.blocks_free() as u64,
                v.blocks_available() as u64,
                v.fragment_size() as u64,
            )
        });
        // A block file on that file system is the data space's, counted
        // there: the file system is judged by the rest of it (a block file
        // preallocated on it would make an empty store look full).
        let block = dir.join(BLOCK_FILE);
        let same_fs = |a: &Path, b: &Path| {
            use std::os::unix::fs::MetadataExt;
            match (std::fs::metadata(a), std::fs::metadata(b)) {
                (Ok(x), Ok(y)) => x.dev() == y.dev() && x.is_file(),
                _ => false,
            }
        };
        let host_total = if same_fs(&block, &engine) {
            host_total.saturating_sub(file_bytes(&block))
        } else {
            host_total
        };
        MetaSpace {
            meta,
            host_total,
            host_free: host_free.min(host_total),
        }
    }
}

/// A file system's (total, free) bytes as its unprivileged users see it,
/// from statvfs's blocks, free blocks, blocks available to them and block
/// size: the blocks kept back for root (a few percent on ext4, far more on
/// some hosts) count as neither, as `df` counts them, so a file system
/// with a large reserve does not look full while most of what the store
/// may use is free.
fn user_space(blocks: u64, free: u64, available: u64, unit: u64) -> (u64, u64) {
    let available = available.min(free).min(blocks);
    let used = blocks.saturating_sub(free);
    (
        used.saturating_add(available).saturating_mul(unit),
        available.saturating_mul(unit),
    )
}

/// Bytes a file takes on its file system (its allocated blocks: a sparse
/// file counts what it holds, a preallocated one all of it); 0 if absent.
fn file_bytes(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p).map_or(0, |m| m.blocks().saturating_mul(512))
}

/// Bytes the files under `dir` take on their file system (links not
/// followed).
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => file_bytes(&e.path()),
            _ => 0,
        })
        .fold(0u64, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::user_space;

    #[test]
    fn blocks_reserved_for_root_count_as_neither_used_nor_free() {
        // 100 blocks, 20 in use, 80 free of which only 10 are available
        // to users: 20 used of 30 (what df shows as 67%), not 90 of 100.
        assert_eq!(user_space(100, 80, 10, 4096), (30 * 4096, 10 * 4096));
        // No reserve: all of it.
        assert_eq!(user_space(100, 80, 80, 512), (100 * 512, 80 * 512));
        // A nonsensical answer (more available than free) stays bounded.
        assert_eq!(user_space(100, 80, 90, 1), (100, 80));
    }
}
