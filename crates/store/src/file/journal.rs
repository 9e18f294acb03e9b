//! The file store's write-ahead journal: a ring inside a file written
//! whole when the store is made, as FileStore's journal was. Every
//! transaction is appended here, and the append made durable, before any
//! of it touches an object file; a checkpoint (see `apply`) then lets the
//! ring reuse what it covers.
//!
//! Layout: page 0 is the superblock (magic, ring size, checksum); the
//! ring follows. A record starts on a page boundary: a 32-byte header
//! (magic, payload length, sequence number, payload checksum, header
//! checksum), the payload, zeros to the next page. A record never wraps:
//! one that does not fit before the ring's end starts the next lap.
//!
//! Positions are virtual: a byte count that only grows; the physical
//! offset is `position % ring`. A reader knows the sequence number it
//! expects next, so bytes left from an earlier lap (lower numbers) or
//! torn by a crash (bad checksum) end the log. A store starts each mount's
//! numbering [`MOUNT_GAP`] past the last record it replayed, so a record
//! written but never made durable before a crash is not taken for one of
//! the next mount's.
//!
//! Must never: report a batch durable before `fdatasync` returned; hand
//! out a record whose checksums fail; read past the first record that is
//! not the one expected.

use crate::block::codec::csum;
use crate::error::{Result, StoreError};
use loligo_bulk::aligned::AlignedBuf;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

const PAGE: u64 = 4096;
const SUPER_MAGIC: &[u8; 8] = b"LOLFSJ01";
const REC_MAGIC: u32 = 0x4c46_534a;
const HEADER: usize = 32;
/// How far past the last replayed record a mount starts numbering: more
/// than the records a ring of [`MAX_RING`] bytes can hold.
pub const MOUNT_GAP: u64 = 1 << 24;
/// The largest ring accepted (so [`MOUNT_GAP`] stays larger than the
/// records it can hold).
pub const MAX_RING: u64 = MOUNT_GAP * PAGE;
/// The smallest journal file accepted.
pub const MIN_JOURNAL: u64 = 64 * PAGE;

fn io(e: impl std::fmt::Display) -> StoreError {
    StoreError::Io(format!("journal: {e}"))
}

fn corrupt(m: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("journal: {m}"))
}

/// Bytes a record of `payload` bytes takes in the ring.
pub fn record_len(payload: usize) -> u64 {
    (HEADER as u64 + payload as u64).div_ceil(PAGE) * PAGE
}

/// The open journal file.
pub struct Journal {
    file: File,
    /// Ring bytes (the file less its superblock page).
    ring: u64,
}

/// Where the next record goes (or is expected): its virtual position and
/// sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub pos: u64,
    pub seq: u64,
}

impl Journal {
    /// Make a journal of `size` bytes at `path`, zero but for its
    /// superblock, durable before it returns.
    pub fn create(path: &Path, size: u64) -> Result<()> {
        let size = size / PAGE * PAGE;
        if !(MIN_JOURNAL..=MAX_RING + PAGE).contains(&size) {
            return Err(StoreError::Invalid(format!(
                "journal size {size} bytes: between {MIN_JOURNAL} and {} bytes",
                MAX_RING + PAGE
            )));
        }
        let f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| io(format!("{}: {e}", path.display())))?;
        let zeros = vec![0u8; 1 << 20];
        let mut off = 0;
        while off < size {
            let n = (size - off).min(zeros.len() as u64) as usize;
            f.write_all_at(&zeros[..n], off).map_err(io)?;
            off += n as u64;
        }
        let mut sb = [0u8; 24];
        sb[..8].copy_from_slice(SUPER_MAGIC);
        sb[8..16].copy_from_slice(&(size - PAGE).to_le_bytes());
        let c = csum(&sb[..16]);
        sb[16..20].copy_from_slice(&c.to_le_bytes());
        f.write_all_at(&sb, 0).map_err(io)?;
        f.sync_all().map_err(io)
    }

    /// Open the journal at `path` (with O_DIRECT where the file system
    /// has it, so appends skip the page cache).
    pub fn open(path: &Path) -> Result<Journal> {
        let direct = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path);
        let file = match direct {
            Ok(f) => f,
            Err(_) => OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .map_err(|e| io(format!("{}: {e}", path.display())))?,
        };
        let mut page = AlignedBuf::zeroed(PAGE as usize);
        file.read_exact_at(page.as_mut_slice(), 0).map_err(io)?;
        let sb = page.as_slice();
        if &sb[..8] != SUPER_MAGIC {
            return Err(corrupt("no superblock"));
        }
        if csum(&sb[..16]).to_le_bytes() != sb[16..20] {
            return Err(corrupt("superblock checksum"));
        }
        let ring = u64::from_le_bytes(sb[8..16].try_into().map_err(corrupt)?);
        let len = file.metadata().map_err(io)?.len();
        if !ring.is_multiple_of(PAGE)
            || !(MIN_JOURNAL - PAGE..=MAX_RING).contains(&ring)
            || ring + PAGE > len
        {
            return Err(corrupt(format!("ring of {ring} bytes in a file of {len}")));
        }
        Ok(Journal { file, ring })
    }

    /// The ring's size in bytes.
    pub fn ring(&self) -> u64 {
        self.ring
    }

    /// Where a record of `len` ring bytes starting at or after `pos`
    /// goes: `pos`, or the next lap's start when it would not fit before
    /// the ring's end.
    pub fn place(&self, pos: u64, len: u64) -> u64 {
        debug_assert!(pos.is_multiple_of(PAGE) && len.is_multiple_of(PAGE) && len <= self.ring);
        if pos % self.ring + len > self.ring {
            pos.div_ceil(self.ring) * self.ring
        } else {
            pos
        }
    }

    /// Append one record per payload from `at`, in one write where they
    /// are contiguous, and make them durable. Returns each record's start
    /// and advances `at` past the last. The caller has checked the ring
    /// has room (nothing between `at` and the checkpointed tail is
    /// overwritten).
    pub fn append(&self, at: &mut Cursor, payloads: &[Vec<u8>]) -> Result<Vec<u64>> {
        let mut starts = Vec::with_capacity(payloads.len());
        // Runs of records that are contiguous in the file.
        let mut run: Vec<(u64, &Vec<u8>, u64)> = Vec::new();
        for p in payloads {
            let len = record_len(p.len());
            if len > self.ring {
                return Err(StoreError::TooLarge(format!(
                    "transaction of {} bytes in a journal ring of {}",
                    p.len(),
                    self.ring
                )));
            }
            let pos = self.place(at.pos, len);
            if pos != at.pos {
                self.write_run(&mut run)?;
            }
            run.push((pos, p, at.seq));
            starts.push(pos);
            at.pos = pos + len;
            at.seq += 1;
        }
        self.write_run(&mut run)?;
        self.file.sync_data().map_err(io)?;
        Ok(starts)
    }

    fn write_run(&self, run: &mut Vec<(u64, &Vec<u8>, u64)>) -> Result<()> {
        let Some(&(first, _, _)) = run.first() else {
            return Ok(());
        };
        let total: u64 = run.iter().map(|(_, p, _)| record_len(p.len())).sum();
        let mut buf = AlignedBuf::zeroed(total as usize);
        let out = buf.as_mut_slice();
        let mut at = 0usize;
        for (_, p, seq) in run.iter() {
            let h = &mut out[at..at + HEADER];
            h[0..4].copy_from_slice(&REC_MAGIC.to_le_bytes());
            h[4..8].copy_from_slice(&(p.len() as u32).to_le_bytes());
            h[8..16].copy_from_slice(&seq.to_le_bytes());
            h[16..20].copy_from_slice(&csum(p).to_le_bytes());
            let hc = csum(&h[..20]);
            h[20..24].copy_from_slice(&hc.to_le_bytes());
            out[at + HEADER..at + HEADER + p.len()].copy_from_slice(p);
            at += record_len(p.len()) as usize;
        }
        let phys = PAGE + first % self.ring;
        debug_assert!(first % self.ring + total <= self.ring);
        self.file.write_all_at(buf.as_slice(), phys).map_err(io)?;
        run.clear();
        Ok(())
    }

    /// The record expected at `at` (at `at.pos`, or at the next lap's
    /// start), if it is there whole: its start and payload.
    pub fn read(&self, at: Cursor) -> Result<Option<(u64, Vec<u8>)>> {
        if let Some(p) = self.read_at(at.pos, at.seq)? {
            return Ok(Some((at.pos, p)));
        }
        let lap = at.pos.div_ceil(self.ring) * self.ring;
        if lap != at.pos {
            if let Some(p) = self.read_at(lap, at.seq)? {
                return Ok(Some((lap, p)));
            }
        }
        Ok(None)
    }

    fn read_at(&self, pos: u64, seq: u64) -> Result<Option<Vec<u8>>> {
        let off = pos % self.ring;
        let mut page = AlignedBuf::zeroed(PAGE as usize);
        self.file
            .read_exact_at(page.as_mut_slice(), PAGE + off)
            .map_err(io)?;
        let h = &page.as_slice()[..HEADER];
        let word = |a: usize| u32::from_le_bytes([h[a], h[a + 1], h[a + 2], h[a + 3]]);
        if word(0) != REC_MAGIC || csum(&h[..20]) != word(20) {
            return Ok(None);
        }
        let mut s = [0u8; 8];
        s.copy_from_slice(&h[8..16]);
        let len = word(4) as usize;
        if u64::from_le_bytes(s) != seq || off + record_len(len) > self.ring {
            return Ok(None);
        }
        let total = record_len(len) as usize;
        let mut buf = AlignedBuf::zeroed(total);
        self.file
            .read_exact_at(buf.as_mut_slice(), PAGE + off)
            .map_err(io)?;
        let payload = &buf.as_slice()[HEADER..HEADER + len];
        if csum(payload) != word(16) {
            return Ok(None);
        }
        Ok(Some(payload.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_testkit::TempDir;

    #[test]
    fn records_round_trip_and_wrap_onto_the_next_lap() {
        let d = TempDir::new("fs-journal").unwrap();
        let p = d.path().join("j");
        Journal::create(&p, MIN_JOURNAL + PAGE).unwrap();
        let j = Journal::open(&p).unwrap();
        assert_eq!(j.ring(), MIN_JOURNAL);
        let mut at = Cursor { pos: 0, seq: 7 };
        let big = vec![5u8; 20_000];
        let mut expect = Vec::new();
        for i in 0..40u8 {
            let pl = vec![vec![i; 100], big.clone()];
            let starts = j.append(&mut at, &pl).unwrap();
            expect.push((starts[0], pl[0].clone()));
            expect.push((starts[1], pl[1].clone()));
        }
        assert!(at.pos > 2 * j.ring(), "the test wraps the ring twice");
        // The last laps' records read back in order from a cursor.
        let keep = (j.ring() / 24_576) as usize - 1;
        let from = expect.len() - keep;
        let mut cur = Cursor {
            pos: expect[from].0,
            seq: 7 + from as u64,
        };
        for (start, pl) in &expect[from..] {
            let (s, got) = j.read(cur).unwrap().expect("record");
            assert_eq!((s, &got), (*start, pl));
            cur = Cursor {
                pos: s + record_len(got.len()),
                seq: cur.seq + 1,
            };
        }
        assert_eq!(j.read(cur).unwrap(), None, "the log ends after the last");
        // A wrong sequence number is not the record expected.
        let stale = Cursor {
            pos: expect[from].0,
            seq: 6 + from as u64,
        };
        assert_eq!(j.read(stale).unwrap(), None);
    }

    #[test]
    fn a_torn_record_ends_the_log() {
        let d = TempDir::new("fs-journal-torn").unwrap();
        let p = d.path().join("j");
        Journal::create(&p, MIN_JOURNAL + PAGE).unwrap();
        let j = Journal::open(&p).unwrap();
        let mut at = Cursor { pos: 0, seq: 1 };
        j.append(&mut at, &[vec![1; 5000], vec![2; 10]]).unwrap();
        // Tear the first record's payload (its second page).
        let raw = OpenOptions::new().write(true).open(&p).unwrap();
        raw.write_all_at(&[9u8; 16], PAGE + PAGE + 16).unwrap();
        drop(raw);
        let j = Journal::open(&p).unwrap();
        assert_eq!(j.read(Cursor { pos: 0, seq: 1 }).unwrap(), None);
    }

    #[test]
    fn a_bad_superblock_or_size_is_refused() {
        let d = TempDir::new("fs-journal-bad").unwrap();
        let p = d.path().join("j");
        assert!(Journal::create(&p, PAGE).is_err());
        std::fs::write(&p, vec![0u8; 8192]).unwrap();
        assert!(matches!(Journal::open(&p), Err(StoreError::Corrupt(_))));
    }
}
