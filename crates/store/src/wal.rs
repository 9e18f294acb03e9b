//! `WalKv`: the block store's own journal, in front of the KV engine.
//!
//! Why: an engine's own journal (fjall's) is a file that grows, so every
//! sync of it also commits the allocation of the blocks just written. On this
//! project's test VM a 44 KiB write and `fdatasync` into a file sized with
//! `set_len` (as fjall does) took 193 us at the median, against 104 us
//! with O_DIRECT over blocks written before (BENCHMARKS.md, "Object
//! store"). This journal is a ring inside a file
//! written whole when it is created; records go to it with O_DIRECT and
//! are made durable by `fdatasync`, which then only has to flush the
//! device. The engine gets every batch unsynced and is made durable
//! (`Kv::persist`) only at a checkpoint, when the ring needs room; the
//! block store's engine ([`crate::lsm`]) keeps no journal at all, so this
//! is the only copy of a batch until the engine writes its tables.
//!
//! Values under one key prefix (`logged`: the block store's deferred
//! writes, 4 KiB of data each and deleted soon after) live only in the
//! journal: the engine holds a stub naming the record and the value's
//! place in it. Their bytes then reach the device once before they are
//! written in place, not once here and again in the engine's journal.
//!
//! Recovery, at open. Every batch the engine receives carries its record's
//! sequence number under [`SEQ_KEY`], and the engine keeps a prefix of its
//! batches across a crash (see `kv`); so the records after the engine's
//! number are exactly the batches it lost, and they are applied again in
//! order. Then every stub is replaced by its value, the engine is
//! persisted, and the ring starts empty in a new epoch. A record carries
//! its epoch, so bytes left from an earlier epoch are never taken for a
//! record of this one.
//!
//! Must never: overwrite a record whose sequence is above the engine's
//! last persist, or that a live stub names; apply a record of another
//! epoch or out of order; acknowledge a synced batch before its record is
//! durable; go on after a failed write (the journal and the engine could
//! disagree: every later call fails).

use crate::block::codec::csum as crc;
use crate::block::AlignedBuf;
use crate::error::{Result, StoreError};
use crate::kv::{Kv, KvOp, Visitor};
use crate::media::{Device, Media};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// The journal's file name beside the engine's directory.
pub const WAL_FILE: &str = "wal";
/// The ring's size unless a store says otherwise.
pub const DEFAULT_WAL_SIZE: u64 = 64 << 20;
/// The smallest ring accepted.
pub const MIN_WAL_SIZE: u64 = 64 << 10;
/// The engine key holding the sequence number of the last batch applied
/// to it. The block store's keys start with an upper-case letter.
pub const SEQ_KEY: &[u8] = b"\x00loligo-journal-seq";

const PAGE: u64 = 4096;
/// Two superblock pages (written in turn), then the ring.
const RING_START: u64 = 2 * PAGE;
const SUPER_MAGIC: &[u8; 8] = b"LOLWAL01";
/// A record header of the first layout (no durability mark), still read.
const REC_MAGIC_V1: u32 = 0x4c57_4c52;
const HEADER_V1: usize = 40;
/// The record header written now: the first layout's fields, then the
/// sequence known durable when the record was written.
const REC_MAGIC: u32 = 0x4c57_4c53;
const HEADER: usize = 48;
/// Payload stored lz4-compressed.
const F_LZ4: u32 = 1;
/// Engine values under the logged prefix: the value follows ...
const V_FULL: u8 = 0;
/// ... or a stub naming it in the journal.
const V_STUB: u8 = 1;
const OP_PUT: u8 = 1;
const OP_DEL: u8 = 2;

fn io(e: impl std::fmt::Display) -> StoreError {
    StoreError::Io(format!("journal: {e}"))
}

fn corrupt(m: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("journal: {m}"))
}

/// Little-endian fields at `i` of a slice the caller has checked is long
/// enough.
fn le32(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

fn le64(b: &[u8], i: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(x)
}

/// A logged value as the engine stores it whole.
fn full(v: &[u8]) -> Vec<u8> {
    let mut w = Vec::with_capacity(v.len() + 1);
    w.push(V_FULL);
    w.extend_from_slice(v);
    w
}

fn pad(n: u64) -> u64 {
    n.div_ceil(PAGE) * PAGE
}

/// A record's header, at the start of its first page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    epoch: u64,
    seq: u64,
    /// Payload bytes as stored (compressed or not).
    stored: u32,
    /// Payload bytes once decompressed.
    raw: u32,
    flags: u32,
    payload_crc: u32,
    /// Every record of this epoch through this sequence was durable when
    /// this one was written (`None`: a record of the first layout, which
    /// says nothing). A valid record whose mark reaches past a damaged one
    /// proves the damage is not a torn, unacknowledged write.
    durable: Option<u64>,
}

impl Header {
    fn encode(&self, out: &mut [u8]) {
        debug_assert!(self.durable.is_some_and(|d| d < self.seq));
        out[0..4].copy_from_slice(&REC_MAGIC.to_le_bytes());
        out[4..12].copy_from_slice(&self.epoch.to_le_bytes());
        out[12..20].copy_from_slice(&self.seq.to_le_bytes());
        out[20..24].copy_from_slice(&self.stored.to_le_bytes());
        out[24..28].copy_from_slice(&self.raw.to_le_bytes());
        out[28..32].copy_from_slice(&self.flags.to_le_bytes());
        out[32..36].copy_from_slice(&self.payload_crc.to_le_bytes());
        out[36..44].copy_from_slice(&self.durable.unwrap_or(0).to_le_bytes());
        let c = crc(&out[0..44]);
        out[44..48].copy_from_slice(&c.to_le_bytes());
    }

    /// `None` for anything that is not a whole, valid header of either
    /// layout.
    fn decode(b: &[u8]) -> Option<Header> {
        let (len, durable) = match le32(b.get(0..4)?, 0) {
            REC_MAGIC_V1 => (HEADER_V1, None),
            REC_MAGIC => {
                let b = b.get(0..HEADER)?;
                (HEADER, Some(le64(b, 36)))
            }
            _ => return None,
        };
        let b = b.get(0..len)?;
        if le32(b, len - 4) != crc(&b[0..len - 4]) {
            return None;
        }
        Some(Header {
            epoch: le64(b, 4),
            seq: le64(b, 12),
            stored: le32(b, 20),
            raw: le32(b, 24),
            flags: le32(b, 28),
            payload_crc: le32(b, 32),
            durable,
        })
    }

    /// Header bytes before the payload.
    fn len(&self) -> usize {
        if self.durable.is_some() {
            HEADER
        } else {
            HEADER_V1
        }
    }

    /// Bytes the record takes in the ring.
    fn span(&self) -> u64 {
        pad(self.len() as u64 + u64::from(self.stored))
    }
}

/// Where a logged value lives: record `seq` of `epoch` at ring offset
/// `off`, bytes `pos..pos + len` of its decompressed payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stub {
    epoch: u64,
    seq: u64,
    off: u64,
    pos: u32,
    len: u32,
}

impl Stub {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(33);
        v.push(V_STUB);
        v.extend_from_slice(&self.epoch.to_le_bytes());
        v.extend_from_slice(&self.seq.to_le_bytes());
        v.extend_from_slice(&self.off.to_le_bytes());
        v.extend_from_slice(&self.pos.to_le_bytes());
        v.extend_from_slice(&self.len.to_le_bytes());
        v
    }

    fn decode(b: &[u8]) -> Result<Stub> {
        if b.len() != 32 {
            return Err(corrupt(format!("a stub of {} bytes", b.len())));
        }
        Ok(Stub {
            epoch: le64(b, 0),
            seq: le64(b, 8),
            off: le64(b, 16),
            pos: le32(b, 24),
            len: le32(b, 28),
        })
    }
}

/// A batch's payload: its ops, each `tag, key length, [value length],
/// key, [value]`, lengths u32 little-endian.
fn encode_ops(batch: &[KvOp], out: &mut Vec<u8>, mut logged_at: impl FnMut(usize, u32, u32)) {
    for (i, op) in batch.iter().enumerate() {
        match op {
            KvOp::Put(k, v) => {
                out.push(OP_PUT);
                out.extend_from_slice(&(k.len() as u32).to_le_bytes());
                out.extend_from_slice(&(v.len() as u32).to_le_bytes());
                out.extend_from_slice(k);
                logged_at(i, out.len() as u32, v.len() as u32);
                out.extend_from_slice(v);
            }
            KvOp::Delete(k) => {
                out.push(OP_DEL);
                out.extend_from_slice(&(k.len() as u32).to_le_bytes());
                out.extend_from_slice(k);
            }
        }
    }
}

fn decode_ops(mut b: &[u8]) -> Result<Vec<KvOp>> {
    let mut ops = Vec::new();
    let bad = || corrupt("a record's operations are cut short");
    let take = |b: &mut &[u8], n: usize| -> Result<Vec<u8>> {
        if b.len() < n {
            return Err(bad());
        }
        let (x, rest) = b.split_at(n);
        *b = rest;
        Ok(x.to_vec())
    };
    let len = |b: &mut &[u8]| -> Result<usize> {
        let x = b.get(0..4).ok_or_else(bad)?;
        let n = u32::from_le_bytes([x[0], x[1], x[2], x[3]]) as usize;
        *b = &b[4..];
        Ok(n)
    };
    while let Some((&tag, rest)) = b.split_first() {
        b = rest;
        match tag {
            OP_PUT => {
                let kl = len(&mut b)?;
                let vl = len(&mut b)?;
                let k = take(&mut b, kl)?;
                let v = take(&mut b, vl)?;
                ops.push(KvOp::Put(k, v));
            }
            OP_DEL => {
                let kl = len(&mut b)?;
                ops.push(KvOp::Delete(take(&mut b, kl)?));
            }
            t => return Err(corrupt(format!("unknown operation {t}"))),
        }
    }
    Ok(ops)
}

/// A record in the ring the journal may still need.
#[derive(Clone, Copy, Debug)]
struct Rec {
    seq: u64,
    off: u64,
    /// Bytes it takes (read by the tests).
    #[cfg_attr(not(test), allow(dead_code))]
    span: u64,
    /// Live stubs naming it.
    live: u32,
}

/// What the superblock says: where the first record a replay may need is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Super {
    /// Bumped on every write; the newer valid page wins.
    version: u64,
    epoch: u64,
    ring_end: u64,
    start_seq: u64,
    start_off: u64,
}

impl Super {
    fn encode(&self) -> [u8; 56] {
        let mut b = [0u8; 56];
        b[0..8].copy_from_slice(SUPER_MAGIC);
        b[8..16].copy_from_slice(&self.version.to_le_bytes());
        b[16..24].copy_from_slice(&self.epoch.to_le_bytes());
        b[24..32].copy_from_slice(&self.ring_end.to_le_bytes());
        b[32..40].copy_from_slice(&self.start_seq.to_le_bytes());
        b[40..48].copy_from_slice(&self.start_off.to_le_bytes());
        let c = crc(&b[0..48]);
        b[48..52].copy_from_slice(&c.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Super> {
        let b = b.get(0..56)?;
        if &b[0..8] != SUPER_MAGIC || le32(b, 48) != crc(&b[0..48]) {
            return None;
        }
        Some(Super {
            version: le64(b, 8),
            epoch: le64(b, 16),
            ring_end: le64(b, 24),
            start_seq: le64(b, 32),
            start_off: le64(b, 40),
        })
    }
}

/// The ring's state; all of it under one lock, with the engine's commits,
/// so batches reach the engine in sequence order.
struct Ring {
    file: Arc<dyn Device>,
    end: u64,
    sup: Super,
    head: u64,
    next_seq: u64,
    /// The engine holds every batch through this sequence durably.
    persisted: u64,
    /// Every batch through this sequence is durable, in the ring or in
    /// the engine (the mark each record carries).
    durable: u64,
    recs: VecDeque<Rec>,
    /// Logged keys whose engine value is a stub, and the record it names.
    live: HashMap<Vec<u8>, u64>,
    buf: AlignedBuf,
    broken: bool,
    counts: Counts,
    lz4: Lz4Gate,
}

/// What the ring has done since open (for tests and traces).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Engine persists to make room.
    pub checkpoints: u64,
    /// Stubs turned into whole values to make room.
    pub materialized: u64,
    /// Batches larger than the ring, committed to the engine directly.
    pub bypassed: u64,
    /// Records written at the ring's start after its end.
    pub wraps: u64,
    /// Records stored lz4-compressed.
    pub compressed: u64,
    /// Records not offered to lz4 (see [`Lz4Gate`]).
    pub lz4_skipped: u64,
    /// Damaged records the open's replay passed over because the engine
    /// already held their batches.
    pub damaged_skipped: u64,
}

/// Whether a record is worth offering to lz4. Incompressible data (an
/// encrypted or compressed payload in every deferred write) would pay
/// for a compression attempt on every record and keep none of them: after
/// [`Lz4Gate::MISSES`] attempts in a row that save too little, the next
/// [`Lz4Gate::SKIP`] records are stored as they are, then lz4 is tried
/// again. Only records of at least [`Lz4Gate::GATED_BYTES`] count.
#[derive(Clone, Copy, Debug, Default)]
struct Lz4Gate {
    misses: u32,
    skip: u32,
}

impl Lz4Gate {
    const MISSES: u32 = 8;
    const SKIP: u32 = 64;
    /// Records shorter than this are always tried and never counted.
    const GATED_BYTES: usize = 1024;

    /// Whether to try this record (counts a skipped one down).
    fn try_now(&mut self) -> bool {
        if self.skip > 0 {
            self.skip -= 1;
            false
        } else {
            true
        }
    }

    /// The outcome of an attempt.
    fn saw(&mut self, kept: bool) {
        if kept {
            self.misses = 0;
        } else {
            self.misses += 1;
            if self.misses >= Self::MISSES {
                self.misses = 0;
                self.skip = Self::SKIP;
            }
        }
    }
}

/// A [`Kv`] whose batches are made durable by a journal of its own; see
/// the module's comment.
pub struct WalKv<K: Kv> {
    inner: K,
    logged: Option<u8>,
    ring: Mutex<Ring>,
    /// For reading stubs' records without the ring's lock.
    reader: Arc<dyn Device>,
    /// The ring's end (fixed at creation).
    end: u64,
}

/// Read `len` bytes (a multiple of the page) at `off` into an aligned
/// buffer.
fn read_at(f: &dyn Device, off: u64, len: u64) -> Result<AlignedBuf> {
    let n = usize::try_from(len).map_err(io)?;
    let mut b = AlignedBuf::zeroed(n);
    f.read_exact_at(b.as_mut_slice(), off).map_err(io)?;
    Ok(b)
}

/// A record's decompressed payload, if the record at `off` is whole and is
/// record `seq` of `epoch` (`None` otherwise).
fn read_record(
    f: &dyn Device,
    off: u64,
    end: u64,
    epoch: u64,
    seq: u64,
) -> Result<Option<(Header, Vec<u8>)>> {
    if off + PAGE > end {
        return Ok(None);
    }
    let first = read_at(f, off, PAGE)?;
    let Some(h) = Header::decode(first.as_slice()) else {
        return Ok(None);
    };
    if h.epoch != epoch || h.seq != seq || off + h.span() > end {
        return Ok(None);
    }
    let whole = if h.span() > PAGE {
        read_at(f, off, h.span())?
    } else {
        first
    };
    let stored = &whole.as_slice()[h.len()..h.len() + h.stored as usize];
    if crc(stored) != h.payload_crc {
        return Ok(None);
    }
    let raw = if h.flags & F_LZ4 != 0 {
        lz4_flex::block::decompress(stored, h.raw as usize)
            .map_err(|e| corrupt(format!("record {seq}: {e}")))?
    } else {
        stored.to_vec()
    };
    if raw.len() != h.raw as usize {
        return Err(corrupt(format!(
            "record {seq}: payload of {} bytes, header says {}",
            raw.len(),
            h.raw
        )));
    }
    Ok(Some((h, raw)))
}

impl<K: Kv> WalKv<K> {
    /// Open the journal of `media` in front of `inner` (creating it, of
    /// `size` bytes, if missing), replaying what `inner` lost. Values
    /// under the key prefix `logged` are kept in the journal only.
    pub fn open(inner: K, media: &dyn Media, size: u64, logged: Option<u8>) -> Result<WalKv<K>> {
        let engine_seq = match inner.get(SEQ_KEY)? {
            Some(v) => u64::from_le_bytes(
                v.as_slice()
                    .try_into()
                    .map_err(|_| corrupt("a bad sequence key"))?,
            ),
            None => 0,
        };
        let file = match media.journal()? {
            Some(f) => f,
            None => {
                if engine_seq != 0 {
                    return Err(corrupt(format!(
                        "{} is missing, and the metadata says batches went through it",
                        media.journal_name()
                    )));
                }
                create(media, size.max(MIN_WAL_SIZE), &inner, logged)?
            }
        };
        let reader = file.clone();
        let sup = read_super(file.as_ref())?;
        let end = sup.ring_end;
        if file.size().map_err(io)? < end {
            return Err(corrupt(format!(
                "{} is shorter than its superblock says",
                media.journal_name()
            )));
        }
        let mut skipped = 0;
        let engine_seq = replay(
            &inner,
            file.as_ref(),
            &sup,
            engine_seq,
            logged,
            &mut skipped,
        )?;
        let next_seq = engine_seq + 1;
        if let Some(p) = logged {
            materialize(&inner, reader.as_ref(), end, p)?;
        }
        inner.persist()?;
        let mut ring = Ring {
            file,
            end,
            sup,
            head: RING_START,
            next_seq,
            persisted: next_seq - 1,
            durable: next_seq - 1,
            recs: VecDeque::new(),
            live: HashMap::new(),
            buf: AlignedBuf::zeroed(256 << 10),
            broken: false,
            counts: Counts::default(),
            lz4: Lz4Gate::default(),
        };
        ring.counts.damaged_skipped = skipped;
        // Everything before is in the engine, durably: a new epoch starts
        // with an empty ring.
        ring.sup.epoch += 1;
        ring.sup.start_seq = next_seq;
        ring.sup.start_off = RING_START;
        ring.write_super()?;
        Ok(WalKv {
            inner,
            logged,
            ring: Mutex::new(ring),
            reader,
            end,
        })
    }

    /// The engine below.
    pub fn inner(&self) -> &K {
        &self.inner
    }

    /// What the ring has done since open.
    pub fn counts(&self) -> Counts {
        self.lock().map(|r| r.counts).unwrap_or_default()
    }

    fn is_logged(&self, k: &[u8]) -> bool {
        self.logged.is_some_and(|p| k.first() == Some(&p))
    }

    /// A logged key's engine value as the caller stored it.
    fn logged_value(&self, v: &[u8]) -> Result<Vec<u8>> {
        match v.split_first() {
            Some((&V_FULL, rest)) => Ok(rest.to_vec()),
            Some((&V_STUB, rest)) => resolve(self.reader.as_ref(), self.end, &Stub::decode(rest)?),
            _ => Err(corrupt("a logged value without its mark")),
        }
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Ring>> {
        self.ring
            .lock()
            .map_err(|_| io("a thread panicked holding the journal"))
    }
}

/// Create the journal (written whole, with its superblock, before it
/// appears) for an engine that has never had one.
fn create<K: Kv>(
    media: &dyn Media,
    size: u64,
    inner: &K,
    logged: Option<u8>,
) -> Result<Arc<dyn Device>> {
    let sup = Super {
        version: 1,
        epoch: 1,
        ring_end: RING_START + pad(size),
        start_seq: 1,
        start_off: RING_START,
    };
    media.create_journal(sup.ring_end, &sup.encode())?;
    if let Some(p) = logged {
        // A store from before the journal: its logged values are bare;
        // mark them whole.
        let mut ops = Vec::new();
        inner.visit(&[p], Some(&[p + 1]), &mut |k, v| {
            ops.push(KvOp::Put(k.to_vec(), full(v)));
            Ok(true)
        })?;
        inner.commit(ops, true)?;
    }
    media
        .journal()?
        .ok_or_else(|| io(format!("{} vanished once created", media.journal_name())))
}

/// Apply again what the engine lost: the records of the ring's epoch after
/// the engine's sequence number `engine_seq`. Returns the number of the
/// last batch the engine now holds; counts damaged records passed over in
/// `skipped`.
///
/// The chain of records ends where the next one is not whole. That is the
/// journal's end unless a valid record written later marks the missing one
/// durable (see [`Header::durable`]): then the record was damaged after it
/// was acknowledged. If the engine already holds it, the replay goes on
/// from the record after it; otherwise acknowledged batches would be lost
/// and the journal is refused with an error naming the damage.
fn replay<K: Kv>(
    inner: &K,
    file: &dyn Device,
    sup: &Super,
    engine_seq: u64,
    logged: Option<u8>,
    skipped: &mut u64,
) -> Result<u64> {
    let end = sup.ring_end;
    let mut off = sup.start_off;
    let mut seq = sup.start_seq;
    let mut later: Option<BTreeMap<u64, (u64, u64)>> = None;
    loop {
        let rec = match read_record(file, off, end, sup.epoch, seq)? {
            Some(r) => Some(r),
            None if off != RING_START => {
                // The writer goes back to the start when a record does
                // not fit before the end.
                read_record(file, RING_START, end, sup.epoch, seq)?.inspect(|_| off = RING_START)
            }
            None => None,
        };
        let Some((h, raw)) = rec else {
            let later = match &mut later {
                Some(l) => l,
                None => later.insert(records_after(file, sup, seq)?),
            };
            let proof = later
                .range(seq + 1..)
                .find(|(_, &(_, durable))| durable >= seq)
                .map(|(&s, _)| s);
            let Some(by) = proof else {
                // The end: nothing after it was ever acknowledged.
                break;
            };
            if seq > engine_seq {
                let last = later.keys().next_back().copied().unwrap_or(by);
                return Err(corrupt(format!(
                    "record {seq} of epoch {} (at ring offset {off} or after) is damaged, \
                     and record {by}, written after it, says it was durable: batches \
                     {seq}..={last} would be lost, so the store is not opened",
                    sup.epoch
                )));
            }
            // The engine holds this batch: go on from the next record.
            *skipped += 1;
            match later.get(&(seq + 1)) {
                Some(&(o, _)) => off = o,
                None => off = end,
            }
            seq += 1;
            continue;
        };
        if seq > engine_seq {
            let mut ops = decode_ops(&raw)?;
            for op in &mut ops {
                if let KvOp::Put(k, v) = op {
                    if logged.is_some_and(|p| k.first() == Some(&p)) {
                        *v = full(v);
                    }
                }
            }
            ops.push(KvOp::Put(SEQ_KEY.to_vec(), seq.to_le_bytes().to_vec()));
            inner.commit(ops, false)?;
        }
        off += h.span();
        seq += 1;
    }
    Ok((seq - 1).max(engine_seq))
}

/// Every whole record of the ring's epoch numbered above `seq`, wherever
/// it lies: its offset and its durability mark (0 for the first layout).
fn records_after(file: &dyn Device, sup: &Super, seq: u64) -> Result<BTreeMap<u64, (u64, u64)>> {
    const READ: u64 = 1 << 20;
    let mut found = BTreeMap::new();
    let mut heads = Vec::new();
    let mut at = RING_START;
    while at < sup.ring_end {
        let len = READ.min(sup.ring_end - at);
        let b = read_at(file, at, len)?;
        for (i, page) in b.as_slice().chunks(PAGE as usize).enumerate() {
            if let Some(h) = Header::decode(page) {
                if h.epoch == sup.epoch && h.seq > seq {
                    heads.push((at + i as u64 * PAGE, h.seq));
                }
            }
        }
        at += len;
    }
    for (off, s) in heads {
        // Only a record whose payload is whole too counts.
        if let Some((h, _)) = read_record(file, off, sup.ring_end, sup.epoch, s)? {
            found.insert(s, (off, h.durable.unwrap_or(0)));
        }
    }
    Ok(found)
}

/// Replace every stub under the prefix `p` by its value: the ring then
/// starts empty.
fn materialize<K: Kv>(inner: &K, reader: &dyn Device, end: u64, p: u8) -> Result<()> {
    let mut stubs = Vec::new();
    inner.visit(&[p], Some(&[p + 1]), &mut |k, v| {
        if v.first() == Some(&V_STUB) {
            stubs.push((k.to_vec(), Stub::decode(&v[1..])?));
        }
        Ok(true)
    })?;
    let mut ops = Vec::new();
    for (k, s) in stubs {
        ops.push(KvOp::Put(k, full(&resolve(reader, end, &s)?)));
    }
    inner.commit(ops, false)
}

fn read_super(f: &dyn Device) -> Result<Super> {
    let b = read_at(f, 0, RING_START)?;
    let s = b.as_slice();
    let a = Super::decode(&s[0..PAGE as usize]);
    let c = Super::decode(&s[PAGE as usize..]);
    match (a, c) {
        (Some(a), Some(c)) => Ok(if a.version >= c.version { a } else { c }),
        (Some(x), None) | (None, Some(x)) => Ok(x),
        (None, None) => Err(corrupt("no valid superblock")),
    }
    .and_then(|s| {
        if s.ring_end < RING_START + PAGE || s.start_off < RING_START || s.start_off >= s.ring_end {
            Err(corrupt(format!("a superblock out of range: {s:?}")))
        } else {
            Ok(s)
        }
    })
}

/// A stub's value, read from its record.
fn resolve(f: &dyn Device, end: u64, s: &Stub) -> Result<Vec<u8>> {
    let (_, raw) = read_record(f, s.off, end, s.epoch, s.seq)?
        .ok_or_else(|| corrupt(format!("record {} named by a stub is gone", s.seq)))?;
    let r = s.pos as usize..s.pos as usize + s.len as usize;
    raw.get(r)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| corrupt(format!("a stub past the end of record {}", s.seq)))
}

impl Ring {
    fn write_super(&mut self) -> Result<()> {
        self.sup.version += 1;
        let mut b = AlignedBuf::zeroed(PAGE as usize);
        b.as_mut_slice()[..56].copy_from_slice(&self.sup.encode());
        let slot = (self.sup.version % 2) * PAGE;
        self.file.write_all_at(b.as_slice(), slot).map_err(io)?;
        self.sync()
    }

    /// Make every record written so far durable.
    fn sync(&mut self) -> Result<()> {
        self.file.sync_data().map_err(io)?;
        self.durable = self.next_seq - 1;
        Ok(())
    }

    /// Where a record of `span` bytes can go now, if anywhere.
    fn place(&self, span: u64) -> Option<u64> {
        let Some(tail) = self.recs.front().map(|r| r.off) else {
            return if self.head + span <= self.end {
                Some(self.head)
            } else if RING_START + span <= self.end {
                Some(RING_START)
            } else {
                None
            };
        };
        if self.head > tail {
            if self.head + span <= self.end {
                Some(self.head)
            } else if RING_START + span <= tail {
                Some(RING_START)
            } else {
                None
            }
        } else if self.head < tail && self.head + span <= tail {
            Some(self.head)
        } else {
            None
        }
    }

    /// Drop the records nothing needs any more, and say in the superblock
    /// where a replay starts.
    fn reclaim(&mut self) -> Result<()> {
        while let Some(r) = self.recs.front() {
            if r.seq <= self.persisted && r.live == 0 {
                self.recs.pop_front();
            } else {
                break;
            }
        }
        let first = self.recs.iter().find(|r| r.seq > self.persisted);
        let (seq, off) = first.map_or((self.next_seq, self.head), |r| (r.seq, r.off));
        self.sup.start_seq = seq;
        self.sup.start_off = if off >= self.end { RING_START } else { off };
        self.write_super()
    }

    /// The keys `ops` write or delete no longer name their old stubs.
    fn forget(&mut self, ops: &[KvOp]) {
        for op in ops {
            let (KvOp::Put(k, _) | KvOp::Delete(k)) = op;
            if let Some(seq) = self.live.remove(k) {
                if let Ok(i) = self.recs.binary_search_by_key(&seq, |r| r.seq) {
                    self.recs[i].live = self.recs[i].live.saturating_sub(1);
                }
            }
        }
    }
}

impl<K: Kv> WalKv<K> {
    /// Make room for `span` bytes: persist the engine, then if need be put
    /// the oldest stubs' values into it. `None`: the record can never fit.
    fn make_room(&self, r: &mut Ring, span: u64) -> Result<Option<u64>> {
        if let Some(p) = r.place(span) {
            return Ok(Some(p));
        }
        self.inner.persist()?;
        r.counts.checkpoints += 1;
        r.persisted = r.next_seq - 1;
        r.reclaim()?;
        while r.place(span).is_none() {
            let Some(front) = r.recs.front().copied() else {
                return Ok(None);
            };
            // Its stubs become whole values in the engine.
            let keys: Vec<Vec<u8>> = r
                .live
                .iter()
                .filter(|(_, s)| **s == front.seq)
                .map(|(k, _)| k.clone())
                .collect();
            let mut ops = Vec::new();
            for k in keys {
                if let Some(v) = self.inner.get(&k)? {
                    let whole = full(&self.logged_value(&v)?);
                    ops.push(KvOp::Put(k.clone(), whole));
                }
                r.live.remove(&k);
                r.counts.materialized += 1;
            }
            self.inner.commit(ops, false)?;
            self.inner.persist()?;
            r.recs[0].live = 0;
            r.reclaim()?;
        }
        Ok(r.place(span))
    }

    fn commit_locked(&self, r: &mut Ring, batch: Vec<KvOp>, sync: bool) -> Result<()> {
        let seq = r.next_seq;
        let epoch = r.sup.epoch;
        let mut raw = Vec::with_capacity(batch.iter().map(op_len).sum());
        let mut logged_at = Vec::new();
        encode_ops(&batch, &mut raw, |i, pos, len| {
            if let KvOp::Put(k, _) = &batch[i] {
                if self.is_logged(k) {
                    logged_at.push((i, pos, len));
                }
            }
        });
        let raw_len = raw.len();
        // Small records (metadata alone) are always tried and never count:
        // they cost little and say nothing about the data.
        let gated = raw_len >= Lz4Gate::GATED_BYTES;
        let compressed = if !gated || r.lz4.try_now() {
            let c = lz4_flex::block::compress(&raw);
            let kept = c.len() + raw_len / 8 < raw_len;
            if gated {
                r.lz4.saw(kept);
            }
            kept.then_some(c)
        } else {
            r.counts.lz4_skipped += 1;
            None
        };
        let (stored, flags) = match compressed {
            Some(c) => {
                r.counts.compressed += 1;
                (c, F_LZ4)
            }
            None => (raw, 0),
        };
        let h = Header {
            epoch,
            seq,
            stored: u32::try_from(stored.len()).map_err(|_| io("a batch over 4 GiB"))?,
            raw: u32::try_from(raw_len).map_err(|_| io("a batch over 4 GiB"))?,
            flags,
            payload_crc: crc(&stored),
            durable: Some(r.durable),
        };
        let span = h.span();
        let Some(off) = self.make_room(r, span)? else {
            // Larger than the ring: straight to the engine, synced, with
            // the replay to start after it.
            let mut ops: Vec<KvOp> = batch
                .into_iter()
                .map(|op| match op {
                    KvOp::Put(k, v) if self.is_logged(&k) => KvOp::Put(k, full(&v)),
                    op => op,
                })
                .collect();
            r.forget(&ops);
            ops.push(KvOp::Put(SEQ_KEY.to_vec(), seq.to_le_bytes().to_vec()));
            self.inner.commit(ops, true)?;
            r.counts.bypassed += 1;
            r.next_seq += 1;
            r.persisted = seq;
            r.durable = seq;
            return r.reclaim();
        };
        let n = usize::try_from(span).map_err(io)?;
        if r.buf.as_slice().len() < n {
            r.buf = AlignedBuf::zeroed(n.next_power_of_two());
        }
        {
            let b = &mut r.buf.as_mut_slice()[..n];
            h.encode(&mut b[..HEADER]);
            b[HEADER..HEADER + stored.len()].copy_from_slice(&stored);
            b[HEADER + stored.len()..].fill(0);
        }
        if off < r.head {
            r.counts.wraps += 1;
        }
        r.file
            .write_all_at(&r.buf.as_slice()[..n], off)
            .map_err(io)?;
        r.next_seq += 1;
        if sync {
            r.sync()?;
        }
        r.recs.push_back(Rec {
            seq,
            off,
            span,
            live: 0,
        });
        r.head = off + span;
        // What the engine gets: stubs for logged values.
        let mut ops = batch;
        r.forget(&ops);
        for &(i, pos, len) in &logged_at {
            if let KvOp::Put(k, v) = &mut ops[i] {
                *v = Stub {
                    epoch,
                    seq,
                    off,
                    pos,
                    len,
                }
                .encode();
                if r.live.insert(k.clone(), seq) != Some(seq) {
                    if let Some(rec) = r.recs.back_mut() {
                        rec.live += 1;
                    }
                }
            }
        }
        ops.push(KvOp::Put(SEQ_KEY.to_vec(), seq.to_le_bytes().to_vec()));
        self.inner.commit(ops, false)
    }
}

fn op_len(op: &KvOp) -> usize {
    match op {
        KvOp::Put(k, v) => 9 + k.len() + v.len(),
        KvOp::Delete(k) => 5 + k.len(),
    }
}

impl<K: Kv> Kv for WalKv<K> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if key == SEQ_KEY {
            return Ok(None);
        }
        let mut v = self.inner.get(key)?;
        if !self.is_logged(key) {
            return Ok(v);
        }
        loop {
            let Some(x) = v else { return Ok(None) };
            match self.logged_value(&x) {
                Ok(val) => return Ok(Some(val)),
                Err(e) => {
                    // A stub's record is reused only once the key is
                    // deleted or rewritten: if it was, read it again.
                    let now = self.inner.get(key)?;
                    if now.as_ref() == Some(&x) {
                        return Err(e);
                    }
                    v = now;
                }
            }
        }
    }

    fn visit(&self, start: &[u8], end: Option<&[u8]>, visit: &mut Visitor<'_>) -> Result<()> {
        self.inner.visit(start, end, &mut |k, v| {
            if k == SEQ_KEY {
                return Ok(true);
            }
            if self.is_logged(k) {
                let v = self.logged_value(v)?;
                visit(k, &v)
            } else {
                visit(k, v)
            }
        })
    }

    fn commit(&self, batch: Vec<KvOp>, sync: bool) -> Result<()> {
        let mut r = self.lock()?;
        if r.broken {
            return Err(io("an earlier write failed; reopen the store"));
        }
        let res = if batch.is_empty() {
            if sync {
                r.sync()
            } else {
                Ok(())
            }
        } else {
            self.commit_locked(&mut r, batch, sync)
        };
        if res.is_err() {
            r.broken = true;
        }
        res
    }

    fn persist(&self) -> Result<()> {
        self.commit(Vec::new(), true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::DirMedia;
    use crate::sim_media::{apply, Map, SimKv as ModelKv};
    use loligo_testkit::{Rng, TempDir};
    use std::fs::OpenOptions;
    use std::os::unix::fs::FileExt;

    fn everything(kv: &dyn Kv) -> Map {
        kv.scan(&[], None, usize::MAX)
            .unwrap()
            .into_iter()
            .collect()
    }

    fn random_batch(r: &mut Rng) -> Vec<KvOp> {
        let n = 1 + r.index(6);
        (0..n)
            .map(|_| {
                let logged = r.chance(500);
                let mut k = vec![if logged { b'W' } else { b'O' }];
                k.extend_from_slice(&r.below(24).to_be_bytes());
                if r.chance(250) {
                    KvOp::Delete(k)
                } else {
                    // Some compress, some do not; now and then larger
                    // than the whole ring.
                    let len = match r.below(40) {
                        0 => 80 << 10,
                        x if x < 10 => r.index(6000),
                        _ => r.index(300),
                    };
                    let v = if r.chance(500) {
                        vec![r.below(256) as u8; len]
                    } else {
                        r.bytes(len)
                    };
                    KvOp::Put(k, v)
                }
            })
            .collect()
    }

    /// Batches, synced or not, with crashes that keep any prefix of the
    /// engine's batches and every journal write (a process crash): after
    /// each reopen the store holds every batch, and goes on working, across
    /// ring wraps, checkpoints, stubs turned whole and batches larger than
    /// the ring.
    #[test]
    fn every_batch_survives_a_crash_of_the_engine() {
        let mut total_materialized = 0;
        for seed in 0..12u64 {
            let dir = TempDir::new("wal-crash").unwrap();
            let mut r = Rng::new(seed);
            let mut engine = ModelKv::default();
            let mut kv = WalKv::open(
                engine.clone(),
                &DirMedia::new(dir.path()),
                MIN_WAL_SIZE,
                Some(b'W'),
            )
            .unwrap();
            let mut model = Map::new();
            let mut counts = Counts::default();
            for round in 0..8 {
                for _ in 0..r.index(120) {
                    let b = random_batch(&mut r);
                    apply(&mut model, &b);
                    kv.commit(b, r.chance(600)).unwrap();
                }
                assert_eq!(
                    everything(&kv),
                    model,
                    "seed {seed} round {round} before the crash"
                );
                let extra = r.index(engine.pending() + 1);
                let c = kv.counts();
                counts.checkpoints += c.checkpoints;
                counts.materialized += c.materialized;
                counts.bypassed += c.bypassed;
                counts.wraps += c.wraps;
                drop(kv);
                engine = engine.crash(extra);
                kv = WalKv::open(
                    engine.clone(),
                    &DirMedia::new(dir.path()),
                    MIN_WAL_SIZE,
                    Some(b'W'),
                )
                .unwrap();
                assert_eq!(
                    everything(&kv),
                    model,
                    "seed {seed} round {round} after the crash"
                );
            }
            eprintln!("seed {seed}: {counts:?}");
            assert!(
                counts.checkpoints > 0 && counts.wraps > 0 && counts.bypassed > 0,
                "seed {seed}: {counts:?}"
            );
            total_materialized += counts.materialized;
        }
        assert!(total_materialized > 0, "no stub was ever turned whole");
    }

    /// Incompressible records stop being offered to lz4 after a run of
    /// misses, are offered again after the skip window, and read back
    /// whole either way.
    #[test]
    fn incompressible_records_skip_lz4_for_a_while() {
        let dir = TempDir::new("wal-lz4").unwrap();
        let mut r = Rng::new(7);
        let engine = ModelKv::default();
        let kv = WalKv::open(
            engine.clone(),
            &DirMedia::new(dir.path()),
            8 << 20,
            Some(b'W'),
        )
        .unwrap();
        let mut model = Map::new();
        let mut put = |kv: &WalKv<ModelKv>, i: u32, v: Vec<u8>| {
            let b = vec![KvOp::Put([b"W".as_slice(), &i.to_be_bytes()].concat(), v)];
            apply(&mut model, &b);
            kv.commit(b, true).unwrap();
        };
        for i in 0..Lz4Gate::MISSES {
            put(&kv, i, r.bytes(4096));
        }
        let c = kv.counts();
        assert_eq!((c.compressed, c.lz4_skipped), (0, 0), "{c:?}");
        // Small records are tried inside the window, and do not use it up.
        put(&kv, 99, vec![5; 600]);
        assert_eq!(kv.counts().compressed, 1, "a small record is always tried");
        for i in 0..Lz4Gate::SKIP {
            put(&kv, 100 + i, vec![7; 4096]);
        }
        let c = kv.counts();
        assert_eq!((c.compressed, c.lz4_skipped), (1, u64::from(Lz4Gate::SKIP)));
        put(&kv, 1000, vec![9; 4096]);
        assert_eq!(kv.counts().compressed, 2, "lz4 is offered again");
        assert_eq!(everything(&kv), model);
        drop(kv);
        let kv = WalKv::open(
            engine.crash(0),
            &DirMedia::new(dir.path()),
            8 << 20,
            Some(b'W'),
        )
        .unwrap();
        assert_eq!(everything(&kv), model, "after a crash");
    }

    /// A torn last record (its write never finished) is not applied, and
    /// nothing before it is lost.
    #[test]
    fn a_torn_last_record_is_dropped_whole() {
        for seed in 0..20u64 {
            let dir = TempDir::new("wal-torn").unwrap();
            let path = dir.path().join(WAL_FILE);
            let mut r = Rng::new(seed);
            let engine = ModelKv::default();
            let kv = WalKv::open(
                engine.clone(),
                &DirMedia::new(dir.path()),
                1 << 20,
                Some(b'W'),
            )
            .unwrap();
            let mut states = vec![Map::new()];
            let mut last_synced = 0;
            for i in 0..(2 + r.index(40)) {
                let b = random_batch(&mut r);
                let mut m = states.last().unwrap().clone();
                apply(&mut m, &b);
                states.push(m);
                let sync = r.chance(500);
                if sync {
                    last_synced = i + 1;
                }
                kv.commit(b, sync).unwrap();
            }
            let (off, span, seq) = {
                let g = kv.ring.lock().unwrap();
                let last = g.recs.back().copied();
                (last.map(|l| l.off), last.map(|l| l.span), g.next_seq - 1)
            };
            drop(kv);
            let engine = engine.crash(0);
            let torn = last_synced < states.len() - 1;
            if let (true, Some(off), Some(span)) = (torn, off, span) {
                // The last record's final page never reached the disk.
                let f = OpenOptions::new().write(true).open(&path).unwrap();
                FileExt::write_all_at(&f, &vec![0xa5; PAGE as usize], off + span - PAGE).unwrap();
            }
            let kv = WalKv::open(
                engine.clone(),
                &DirMedia::new(dir.path()),
                1 << 20,
                Some(b'W'),
            )
            .unwrap();
            let got = everything(&kv);
            let want = if torn && off.is_some() && seq as usize == states.len() - 1 {
                &states[states.len() - 2]
            } else {
                states.last().unwrap()
            };
            assert_eq!(&got, want, "seed {seed}");
        }
    }

    /// Records of an earlier epoch left in the ring are never applied: a
    /// reopen after fewer, shorter records must not pick up the old ones
    /// that follow them.
    #[test]
    fn records_of_an_earlier_epoch_are_never_replayed() {
        let dir = TempDir::new("wal-epoch").unwrap();
        let engine = ModelKv::default();
        let kv = WalKv::open(engine.clone(), &DirMedia::new(dir.path()), 1 << 20, None).unwrap();
        for i in 0..10u8 {
            kv.commit(vec![KvOp::Put(vec![b'A', i], vec![i; 100])], true)
                .unwrap();
        }
        drop(kv);
        // The engine lost all ten; the journal gives them back.
        let engine = engine.crash(0);
        let kv = WalKv::open(engine.clone(), &DirMedia::new(dir.path()), 1 << 20, None).unwrap();
        assert_eq!(everything(&kv).len(), 10);
        // A new epoch writes from the ring's start again, over the old
        // records; one delete, then a crash that loses it in the engine.
        kv.commit(vec![KvOp::Delete(vec![b'A', 0])], true).unwrap();
        drop(kv);
        let engine = engine.crash(0);
        let kv = WalKv::open(engine.clone(), &DirMedia::new(dir.path()), 1 << 20, None).unwrap();
        let got = everything(&kv);
        assert_eq!(got.len(), 9, "{got:?}");
        assert!(!got.contains_key(&vec![b'A', 0]));
    }

    /// A record of an earlier epoch sitting exactly where the next record
    /// of this epoch would be, with the very sequence number expected
    /// there (a torn record ended the earlier epoch's chain), is not
    /// applied.
    #[test]
    fn a_stale_record_with_the_expected_number_is_not_applied() {
        let dir = TempDir::new("wal-stale").unwrap();
        let path = dir.path().join(WAL_FILE);
        let engine = ModelKv::default();
        let kv = WalKv::open(engine.clone(), &DirMedia::new(dir.path()), 1 << 20, None).unwrap();
        for (k, sync) in [(&b"one"[..], true), (b"two", false), (b"stale", false)] {
            kv.commit(vec![KvOp::Put(k.to_vec(), b"x".to_vec())], sync)
                .unwrap();
        }
        drop(kv);
        // Record 2 (the second page of the ring), never synced, was torn;
        // the engine kept nothing.
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        FileExt::write_all_at(&f, &[0x5a; PAGE as usize], RING_START + PAGE).unwrap();
        let engine = engine.crash(0);
        let kv = WalKv::open(engine.clone(), &DirMedia::new(dir.path()), 1 << 20, None).unwrap();
        assert_eq!(everything(&kv).len(), 1);
        // The new epoch's record 2 takes two pages: record 3 is then
        // expected on the page where the old epoch's record 3 still is.
        let big = Rng::new(7).bytes(5000);
        kv.commit(vec![KvOp::Put(b"big".to_vec(), big)], true)
            .unwrap();
        assert_eq!(kv.ring.lock().unwrap().head, RING_START + 2 * PAGE);
        drop(kv);
        let kv = WalKv::open(engine.crash(0), &DirMedia::new(dir.path()), 1 << 20, None).unwrap();
        let got = everything(&kv);
        assert!(got.contains_key(b"big".as_slice()));
        assert!(!got.contains_key(b"stale".as_slice()), "{:?}", got.keys());
    }

    /// Ten synced batches, the engine's copy of them lost: the offsets of
    /// their records, by sequence.
    fn ten_synced(dir: &TempDir, engine: &ModelKv, persist_after: usize) -> (Map, Vec<u64>) {
        let kv = WalKv::open(engine.clone(), &DirMedia::new(dir.path()), 1 << 20, None).unwrap();
        let mut model = Map::new();
        for i in 0..10u8 {
            let b = vec![KvOp::Put(vec![b'A', i], vec![i; 3000])];
            apply(&mut model, &b);
            kv.commit(b, true).unwrap();
            if usize::from(i) + 1 == persist_after {
                kv.inner().persist().unwrap();
            }
        }
        let offs = kv.ring.lock().unwrap().recs.iter().map(|r| r.off).collect();
        (model, offs)
    }

    fn flip(dir: &TempDir, off: u64) {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.path().join(WAL_FILE))
            .unwrap();
        let mut b = [0u8; 1];
        FileExt::read_exact_at(&f, &mut b, off).unwrap();
        FileExt::write_all_at(&f, &[b[0] ^ 0x10], off).unwrap();
    }

    /// A synced record damaged in the middle of the ring, with later
    /// synced records intact: the replay would silently drop them, so the
    /// open is refused with an error naming the record.
    #[test]
    fn damage_in_the_middle_of_the_ring_refuses_the_open() {
        for at in [HEADER as u64 + 5, 20] {
            let dir = TempDir::new("wal-damage").unwrap();
            let engine = ModelKv::default();
            let (_, offs) = ten_synced(&dir, &engine, 0);
            // Record 5: a payload byte, then (second round) a header byte.
            flip(&dir, offs[4] + at);
            let err = WalKv::open(engine.crash(0), &DirMedia::new(dir.path()), 1 << 20, None)
                .err()
                .expect("a damaged journal opened");
            let msg = err.to_string();
            assert!(
                msg.contains("record 5 ") && msg.contains("damaged"),
                "{msg}"
            );
            assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
        }
    }

    /// A damaged record whose batch the engine holds durably is passed
    /// over, and the records after it are replayed.
    #[test]
    fn a_damaged_record_the_engine_holds_is_passed_over() {
        let dir = TempDir::new("wal-damage-held").unwrap();
        let engine = ModelKv::default();
        let (model, offs) = ten_synced(&dir, &engine, 6);
        flip(&dir, offs[3] + HEADER as u64 + 7);
        let kv = WalKv::open(engine.crash(0), &DirMedia::new(dir.path()), 1 << 20, None).unwrap();
        assert_eq!(everything(&kv), model);
        assert_eq!(kv.counts().damaged_skipped, 1);
    }

    /// A record of the first header layout (40 bytes, no durability mark)
    /// left by older code is replayed.
    #[test]
    fn a_record_of_the_first_layout_is_replayed() {
        let dir = TempDir::new("wal-v1").unwrap();
        let engine = ModelKv::default();
        drop(WalKv::open(engine.clone(), &DirMedia::new(dir.path()), 1 << 20, None).unwrap());
        let f = DirMedia::new(dir.path()).journal().unwrap().unwrap();
        let sup = read_super(f.as_ref()).unwrap();
        let mut payload = Vec::new();
        encode_ops(
            &[KvOp::Put(b"old".to_vec(), b"layout".to_vec())],
            &mut payload,
            |_, _, _| {},
        );
        let mut page = AlignedBuf::zeroed(PAGE as usize);
        let b = page.as_mut_slice();
        b[0..4].copy_from_slice(&REC_MAGIC_V1.to_le_bytes());
        b[4..12].copy_from_slice(&sup.epoch.to_le_bytes());
        b[12..20].copy_from_slice(&sup.start_seq.to_le_bytes());
        b[20..24].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        b[24..28].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        b[32..36].copy_from_slice(&crc(&payload).to_le_bytes());
        let c = crc(&b[0..36]);
        b[36..40].copy_from_slice(&c.to_le_bytes());
        b[40..40 + payload.len()].copy_from_slice(&payload);
        f.write_all_at(page.as_slice(), sup.start_off).unwrap();
        let kv = WalKv::open(engine.crash(0), &DirMedia::new(dir.path()), 1 << 20, None).unwrap();
        assert_eq!(kv.get(b"old").unwrap().as_deref(), Some(&b"layout"[..]));
    }

    /// A store from before the journal: its engine holds logged values
    /// bare. The first open keeps them readable as they were.
    #[test]
    fn a_store_from_before_the_journal_keeps_its_logged_values() {
        let dir = TempDir::new("wal-upgrade").unwrap();
        let engine = ModelKv::default();
        // Bare values, one of them starting with the stub mark.
        engine
            .commit(
                vec![
                    KvOp::Put(b"W1".to_vec(), vec![V_STUB, 2, 3]),
                    KvOp::Put(b"W2".to_vec(), b"data".to_vec()),
                    KvOp::Put(b"O1".to_vec(), b"meta".to_vec()),
                ],
                true,
            )
            .unwrap();
        let kv = WalKv::open(
            engine.clone(),
            &DirMedia::new(dir.path()),
            1 << 20,
            Some(b'W'),
        )
        .unwrap();
        assert_eq!(kv.get(b"W1").unwrap().unwrap(), vec![V_STUB, 2, 3]);
        assert_eq!(kv.get(b"W2").unwrap().unwrap(), b"data");
        assert_eq!(kv.get(b"O1").unwrap().unwrap(), b"meta");
        drop(kv);
        let kv = WalKv::open(
            engine.crash(0),
            &DirMedia::new(dir.path()),
            1 << 20,
            Some(b'W'),
        )
        .unwrap();
        assert_eq!(kv.get(b"W1").unwrap().unwrap(), vec![V_STUB, 2, 3]);
    }

    /// A journal file gone while the engine says batches went through it is
    /// an error, not an empty journal.
    #[test]
    fn a_missing_journal_is_refused() {
        let dir = TempDir::new("wal-missing").unwrap();
        let path = dir.path().join(WAL_FILE);
        let engine = ModelKv::default();
        let kv = WalKv::open(engine.clone(), &DirMedia::new(dir.path()), 1 << 20, None).unwrap();
        kv.commit(vec![KvOp::Put(b"A".to_vec(), b"x".to_vec())], true)
            .unwrap();
        drop(kv);
        std::fs::remove_file(&path).unwrap();
        let e = WalKv::open(engine.crash(1), &DirMedia::new(dir.path()), 1 << 20, None)
            .err()
            .unwrap();
        assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
    }

    /// Logged values reach the engine as stubs only (the data is written
    /// once, to the journal), and read back whole.
    #[test]
    fn logged_values_stay_in_the_journal() {
        let dir = TempDir::new("wal-logged").unwrap();
        let engine = ModelKv::default();
        let kv = WalKv::open(
            engine.clone(),
            &DirMedia::new(dir.path()),
            1 << 20,
            Some(b'W'),
        )
        .unwrap();
        let data = Rng::new(1).bytes(4096);
        kv.commit(
            vec![
                KvOp::Put(b"W1".to_vec(), data.clone()),
                KvOp::Put(b"O1".to_vec(), b"meta".to_vec()),
            ],
            true,
        )
        .unwrap();
        let raw = engine.get(b"W1").unwrap().unwrap();
        assert!(raw.len() < 64, "the engine holds {} bytes", raw.len());
        assert_eq!(kv.get(b"W1").unwrap().unwrap(), data);
        assert_eq!(kv.get(b"O1").unwrap().unwrap(), b"meta");
        assert_eq!(kv.get(SEQ_KEY).unwrap(), None);
    }
}
