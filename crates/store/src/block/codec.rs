//! Byte encodings of the block store's metadata: KV keys (ordered so that
//! scans follow (collection, hash, name)) and records (onodes, blobs).
//! Decoding never panics: truncated or foreign bytes are `Corrupt`.

use crate::error::{Result, StoreError};
use crate::names::{CollectionId, ObjectId};
use std::collections::BTreeMap;

/// Key tags: the first byte of every key.
pub const T_SUPER: u8 = b'S';
pub const T_COLL: u8 = b'C';
pub const T_ONODE: u8 = b'O';
pub const T_OMAP: u8 = b'M';
pub const T_RECORD: u8 = b'R';
pub const T_BLOB: u8 = b'B';
pub const T_FREE: u8 = b'F';
pub const T_DEFERRED: u8 = b'W';
pub const T_IDS: u8 = b'N';
/// A chunk of a large blob's checksums (see [`CSUM_CHUNK`]).
pub const T_CSUM: u8 = b'K';

/// A blob with more checksum blocks than this keeps its checksums beside
/// its record, this many to a key (256 KiB of data with 4 KiB blocks), so
/// that a small overwrite of a large blob rewrites 256 bytes of checksums
/// instead of all of them (4 KiB for a 4 MiB blob, which was half of what
/// a deferred 4 KiB overwrite wrote to the device).
pub const CSUM_CHUNK: usize = 64;

/// Append-only encoder (LEB128 varints).
#[derive(Default)]
pub struct Enc(pub Vec<u8>);

impl Enc {
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub fn var(&mut self, mut v: u64) -> &mut Self {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(b);
                return self;
            }
            self.0.push(b | 0x80);
        }
    }
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.var(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    pub fn u32le(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
}

/// Decoder over a record; every read checks bounds.
pub struct Dec<'a> {
    b: &'a [u8],
    p: usize,
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("truncated or malformed {what}"))
}

impl<'a> Dec<'a> {
    pub fn new(b: &'a [u8]) -> Dec<'a> {
        Dec { b, p: 0 }
    }
    pub fn u8(&mut self) -> Result<u8> {
        let v = *self.b.get(self.p).ok_or_else(|| corrupt("byte"))?;
        self.p += 1;
        Ok(v)
    }
    pub fn var(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(corrupt("varint"))
    }
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = usize::try_from(self.var()?).map_err(|_| corrupt("length"))?;
        let end = self
            .p
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| corrupt("bytes"))?;
        let s = &self.b[self.p..end];
        self.p = end;
        Ok(s)
    }
    pub fn u32le(&mut self) -> Result<u32> {
        let end = self.p + 4;
        let s = self.b.get(self.p..end).ok_or_else(|| corrupt("u32"))?;
        self.p = end;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    pub fn done(&self) -> bool {
        self.p == self.b.len()
    }
}

/// `tag` + collection (13 bytes, big-endian so keys sort by collection).
/// The checksum of one block: CRC-32C (Castagnoli, as iSCSI and ext4
/// use it), so the on-disk values are the standard ones.
pub fn csum(block: &[u8]) -> u32 {
    // The algorithm's value is 32 bits wide; the crate returns it in a u64.
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, block) as u32
}

pub fn coll_prefix(tag: u8, c: CollectionId) -> Vec<u8> {
    let mut k = Vec::with_capacity(32);
    k.push(tag);
    k.extend_from_slice(&c.pool.to_be_bytes());
    k.extend_from_slice(&c.pg.to_be_bytes());
    k.push(c.shard);
    k
}

/// Decode the collection of a `coll_prefix` key.
pub fn decode_coll(k: &[u8]) -> Result<CollectionId> {
    if k.len() < 14 {
        return Err(corrupt("collection key"));
    }
    let mut pool = [0u8; 8];
    pool.copy_from_slice(&k[1..9]);
    let mut pg = [0u8; 4];
    pg.copy_from_slice(&k[9..13]);
    Ok(CollectionId {
        pool: u64::from_be_bytes(pool),
        pg: u32::from_be_bytes(pg),
        shard: k[13],
    })
}

/// Append an object's (hash, name) so that byte order is (hash, name)
/// order: the hash big-endian, the name with 0x00 escaped as 00 FF and
/// terminated by 00 01.
pub fn push_object(k: &mut Vec<u8>, o: &ObjectId) {
    k.extend_from_slice(&o.hash.to_be_bytes());
    for &b in o.name.as_bytes() {
        k.push(b);
        if b == 0 {
            k.push(0xFF);
        }
    }
    k.extend_from_slice(&[0, 1]);
}

/// Decode the object at `k[at..]`; returns it and the offset after it.
pub fn decode_object(k: &[u8], at: usize) -> Result<(ObjectId, usize)> {
    let h = k.get(at..at + 4).ok_or_else(|| corrupt("object key"))?;
    let hash = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
    let mut name = Vec::new();
    let mut p = at + 4;
    loop {
        let b = *k.get(p).ok_or_else(|| corrupt("object name"))?;
        if b == 0 {
            match k.get(p + 1) {
                Some(0xFF) => name.push(0),
                Some(1) => break,
                _ => return Err(corrupt("object name escape")),
            }
            p += 2;
        } else {
            name.push(b);
            p += 1;
        }
    }
    let name = String::from_utf8(name).map_err(|_| corrupt("object name utf-8"))?;
    Ok((ObjectId { hash, name }, p + 2))
}

pub fn onode_key(c: CollectionId, o: &ObjectId) -> Vec<u8> {
    let mut k = coll_prefix(T_ONODE, c);
    push_object(&mut k, o);
    k
}

pub fn omap_prefix(c: CollectionId, o: &ObjectId) -> Vec<u8> {
    let mut k = coll_prefix(T_OMAP, c);
    push_object(&mut k, o);
    k
}

pub fn record_key(c: CollectionId, key: &[u8]) -> Vec<u8> {
    let mut k = coll_prefix(T_RECORD, c);
    k.extend_from_slice(key);
    k
}

pub fn u64_key(tag: u8, v: u64) -> Vec<u8> {
    let mut k = vec![tag];
    k.extend_from_slice(&v.to_be_bytes());
    k
}

pub fn decode_u64_key(k: &[u8]) -> Result<u64> {
    let s = k.get(1..9).ok_or_else(|| corrupt("numeric key"))?;
    let mut b = [0u8; 8];
    b.copy_from_slice(s);
    Ok(u64::from_be_bytes(b))
}

/// The smallest key greater than every key starting with `p`.
pub fn prefix_end(p: &[u8]) -> Vec<u8> {
    let mut e = p.to_vec();
    while let Some(last) = e.pop() {
        if last < 0xFF {
            e.push(last + 1);
            return e;
        }
    }
    vec![0xFF; p.len() + 1]
}

/// A piece of an object's data: `len` bytes at logical `loff`, stored in
/// blob `blob` at offset `boff`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub loff: u64,
    pub len: u64,
    pub blob: u64,
    pub boff: u64,
}

/// A deferred write's record: the device offset and the bytes to write
/// there. Trailing zeros are not stored (a small object fills a block
/// with them, and the record goes through the key-value journal): the
/// record keeps the full length and replay writes them back.
pub fn encode_deferred(off: u64, bytes: &[u8]) -> Vec<u8> {
    let kept = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    let mut e = Enc::default();
    e.var(off).bytes(&bytes[..kept]).var(bytes.len() as u64);
    e.0
}

/// The offset and full bytes of a deferred record. Records written
/// before trailing zeros were trimmed have no length after the bytes.
pub fn decode_deferred(v: &[u8]) -> Result<(u64, Vec<u8>)> {
    let mut d = Dec::new(v);
    let off = d.var()?;
    let mut bytes = d.bytes()?.to_vec();
    if !d.done() {
        let len = d.var()?;
        if len < bytes.len() as u64 || len > 1 << 32 || !d.done() {
            return Err(corrupt("deferred record length"));
        }
        bytes.resize(len as usize, 0);
    }
    Ok((off, bytes))
}

/// Per-object metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Onode {
    pub size: u64,
    /// Sorted by `loff`, non-overlapping; gaps are holes (zeros).
    pub extents: Vec<Extent>,
    pub attrs: std::collections::BTreeMap<String, Vec<u8>>,
    pub header: Vec<u8>,
    /// Whether the object may have omap keys. False means it has none,
    /// so removing or cloning it skips the omap range scan (a key-value
    /// range scan costs about as much as the rest of a small object's
    /// replacement). Sticky: set by the first key, cleared only when the
    /// omap is cleared or the object removed.
    pub omap: bool,
    /// A small object's data kept in the onode itself (no blob, no
    /// device write): exactly `size` bytes, and then `extents` is empty.
    pub inline: Option<Vec<u8>>,
}

/// Version 1 onodes (no omap flag) decode as `omap: true`.
const ONODE_V1: u8 = 1;
/// Version 2 adds the omap flag.
const ONODE_V2: u8 = 2;
/// Version 3 adds inline data (written only for an onode that has it,
/// so a store without inline objects stays readable by version 2).
const ONODE_V3: u8 = 3;

impl Onode {
    pub fn encode(&self) -> Vec<u8> {
        // Sized once: an inline object's data would otherwise grow it.
        let attrs: usize = self.attrs.iter().map(|(k, v)| k.len() + v.len() + 4).sum();
        let inline = self.inline.as_ref().map_or(0, |d| d.len() + 10);
        let mut e = Enc(Vec::with_capacity(
            24 + self.extents.len() * 24 + attrs + self.header.len() + inline,
        ));
        let version = if self.inline.is_some() {
            ONODE_V3
        } else {
            ONODE_V2
        };
        e.u8(version).var(self.size).var(self.extents.len() as u64);
        for x in &self.extents {
            e.var(x.loff).var(x.len).var(x.blob).var(x.boff);
        }
        e.var(self.attrs.len() as u64);
        for (k, v) in &self.attrs {
            e.bytes(k.as_bytes()).bytes(v);
        }
        e.bytes(&self.header);
        e.u8(u8::from(self.omap));
        if let Some(d) = &self.inline {
            e.bytes(d).u32le(csum(d));
        }
        e.0
    }

    pub fn decode(b: &[u8]) -> Result<Onode> {
        let mut d = Dec::new(b);
        let version = d.u8()?;
        if !(ONODE_V1..=ONODE_V3).contains(&version) {
            return Err(StoreError::Corrupt("unknown onode version".into()));
        }
        let size = d.var()?;
        let n = d.var()?;
        let mut extents = Vec::new();
        for _ in 0..n {
            extents.push(Extent {
                loff: d.var()?,
                len: d.var()?,
                blob: d.var()?,
                boff: d.var()?,
            });
        }
        let na = d.var()?;
        let mut attrs = std::collections::BTreeMap::new();
        for _ in 0..na {
            let k = String::from_utf8(d.bytes()?.to_vec()).map_err(|_| corrupt("xattr name"))?;
            attrs.insert(k, d.bytes()?.to_vec());
        }
        let header = d.bytes()?.to_vec();
        let omap = match version {
            ONODE_V1 => true,
            _ => match d.u8()? {
                0 => false,
                1 => true,
                _ => return Err(corrupt("onode omap flag")),
            },
        };
        let inline = if version == ONODE_V3 {
            let data = d.bytes()?;
            if d.u32le()? != csum(data) {
                return Err(corrupt("onode inline data checksum"));
            }
            if data.len() as u64 != size || !extents.is_empty() {
                return Err(corrupt("onode inline data beside extents or not its size"));
            }
            Some(data.to_vec())
        } else {
            None
        };
        if !d.done() {
            return Err(corrupt("onode (trailing bytes)"));
        }
        Ok(Onode {
            size,
            extents,
            attrs,
            header,
            omap,
            inline,
        })
    }
}

/// A contiguous allocation on the device, shared by the extents that
/// reference it (`refs` counts those extent pieces), with one crc32c per
/// checksum unit: a device block, or `2^csum_shift` of them for data a
/// client hinted it writes whole and reads in sequence ([`Blob::csum_unit`];
/// the last unit ends with the blob).
///
/// A block overwritten by copy-on-write lives elsewhere from then on: its
/// place is in `moved`, and its old place was freed. The blob then holds
/// its range minus those places, plus the places in `moved` (see
/// [`Blob::spans`]). Only uncompressed blobs move blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    pub disk_off: u64,
    /// Bytes allocated on the device (a multiple of the block size).
    pub len: u64,
    pub refs: u64,
    pub csums: Vec<u32>,
    /// `Compression::code()`; 0 = stored as is.
    pub comp: u8,
    /// Compressed bytes at the blob's start (when compressed).
    pub clen: u64,
    /// Logical bytes the blob holds once decompressed (when compressed).
    pub raw_len: u64,
    /// Blocks moved by copy-on-write overwrites: block index -> device
    /// offset. Kept with the checksums of the same blocks (in the record,
    /// or in the block's checksum chunk).
    pub moved: BTreeMap<u64, u64>,
    /// Blocks per checksum unit, as a power of two. A blob with a shift is
    /// uncompressed and never has blocks rewritten: no block moves.
    pub csum_shift: u8,
}

/// The largest [`Blob::csum_shift`]: 1,024 blocks (4 MiB of 4 KiB blocks).
pub const CSUM_SHIFT_MAX: u8 = 10;

/// The flag on a stored blob's compression byte that says a
/// [`Blob::csum_shift`] byte follows it (records without it have one
/// checksum per block).
const CSUM_SHIFT_FLAG: u8 = 0x80;

/// `places` (device offsets of `bs`-byte blocks, in order) as runs of
/// consecutive blocks: (offset, bytes).
pub fn runs(places: &[u64], bs: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &p in places {
        match out.last_mut() {
            Some(r) if r.0 + r.1 == p => r.1 += bs,
            _ => out.push((p, bs)),
        }
    }
    out
}

/// Where a blob's stored record keeps its checksums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CsumPlace {
    /// In the record itself (decoded with it).
    Inline,
    /// In `ceil(blocks / CSUM_CHUNK)` keys [`csum_key`]`(id, i)` beside it.
    Chunked { blocks: u64 },
}

impl CsumPlace {
    /// Number of chunk keys.
    pub fn chunks(self) -> u64 {
        match self {
            CsumPlace::Inline => 0,
            CsumPlace::Chunked { blocks } => blocks.div_ceil(CSUM_CHUNK as u64),
        }
    }
}

/// The key of chunk `chunk` of blob `blob`'s checksums.
pub fn csum_key(blob: u64, chunk: u64) -> Vec<u8> {
    let mut k = u64_key(T_CSUM, blob);
    k.extend_from_slice(&chunk.to_be_bytes());
    k
}

/// The (blob, chunk) a checksum chunk key names.
pub fn decode_csum_key(k: &[u8]) -> Result<(u64, u64)> {
    let c = k.get(9..17).ok_or_else(|| corrupt("checksum key"))?;
    let mut b = [0u8; 8];
    b.copy_from_slice(c);
    Ok((decode_u64_key(k)?, u64::from_be_bytes(b)))
}

impl Blob {
    /// Bytes each checksum covers (the last may cover fewer: the blob's
    /// end).
    pub fn csum_unit(&self, bs: u64) -> u64 {
        bs << self.csum_shift
    }

    /// How many checksums a blob of `len` bytes has with units of `unit`.
    pub fn csum_count(len: u64, unit: u64) -> u64 {
        len.div_ceil(unit.max(1))
    }

    /// Where this blob's checksums are stored.
    pub fn csum_place(&self) -> CsumPlace {
        if self.csums.len() > CSUM_CHUNK {
            CsumPlace::Chunked {
                blocks: self.csums.len() as u64,
            }
        } else {
            CsumPlace::Inline
        }
    }

    /// The record kept under the blob's key: everything, or everything
    /// but the checksums when they go in chunks ([`Blob::csum_chunk`]).
    pub fn encode_head(&self) -> Vec<u8> {
        let mut e = Enc::default();
        e.var(self.disk_off).var(self.len).var(self.refs);
        let place = self.csum_place();
        if place == CsumPlace::Inline {
            e.var(self.csums.len() as u64);
            for &c in &self.csums {
                e.u32le(c);
            }
        } else {
            e.var(0);
        }
        debug_assert!(self.comp & CSUM_SHIFT_FLAG == 0);
        debug_assert!(self.csum_shift == 0 || (self.comp == 0 && self.moved.is_empty()));
        if self.csum_shift == 0 {
            e.u8(self.comp);
        } else {
            e.u8(self.comp | CSUM_SHIFT_FLAG).u8(self.csum_shift);
        }
        if self.comp != 0 {
            e.var(self.clen).var(self.raw_len);
        }
        match place {
            CsumPlace::Chunked { blocks } => {
                // After the fields of the older record (which always has
                // at least one checksum inline, so a 0 count never meant
                // this).
                e.var(blocks);
            }
            CsumPlace::Inline if !self.moved.is_empty() => {
                // Moved blocks of a small blob follow its checksums' record
                // (records without them end before).
                e.var(self.moved.len() as u64);
                for (&i, &off) in &self.moved {
                    e.var(i).var(off);
                }
            }
            CsumPlace::Inline => {}
        }
        e.0
    }

    /// Where block `i` of the blob is on the device, `bs` bytes a block.
    pub fn block_at(&self, i: u64, bs: u64) -> u64 {
        match self.moved.get(&i) {
            Some(&off) => off,
            None => self.disk_off + i * bs,
        }
    }

    /// The device extents the blob holds, in order of its blocks: its
    /// range without the places of moved blocks, and those blocks'
    /// current places.
    pub fn spans(&self, bs: u64) -> Vec<(u64, u64)> {
        if self.moved.is_empty() {
            return vec![(self.disk_off, self.len)];
        }
        let places: Vec<u64> = (0..self.len / bs).map(|i| self.block_at(i, bs)).collect();
        runs(&places, bs)
    }

    /// Chunk `i` of the checksums as stored (little-endian u32s), then the
    /// moved blocks among them (index in the chunk, device offset).
    pub fn csum_chunk(&self, i: u64) -> Vec<u8> {
        let from = (i as usize)
            .saturating_mul(CSUM_CHUNK)
            .min(self.csums.len());
        let to = from.saturating_add(CSUM_CHUNK).min(self.csums.len());
        let mut e = Enc(self.csums[from..to]
            .iter()
            .flat_map(|c| c.to_le_bytes())
            .collect());
        for (&b, &off) in self.moved.range(from as u64..to as u64) {
            e.var(b - from as u64).var(off);
        }
        e.0
    }

    /// Decode a blob's record. With [`CsumPlace::Chunked`] the checksums
    /// are not in it: `csums` holds zeros until [`Blob::fill_chunk`] has
    /// put every chunk in.
    pub fn decode_head(b: &[u8]) -> Result<(Blob, CsumPlace)> {
        let mut d = Dec::new(b);
        let disk_off = d.var()?;
        let len = d.var()?;
        let refs = d.var()?;
        let n = d.var()?;
        let mut csums = Vec::new();
        for _ in 0..n {
            csums.push(d.u32le()?);
        }
        let mut comp = d.u8()?;
        let mut csum_shift = 0;
        if comp & CSUM_SHIFT_FLAG != 0 {
            comp &= !CSUM_SHIFT_FLAG;
            csum_shift = d.u8()?;
            if comp != 0 || csum_shift == 0 || csum_shift > CSUM_SHIFT_MAX {
                return Err(corrupt("blob (checksum unit)"));
            }
        }
        let (clen, raw_len) = if comp != 0 {
            (d.var()?, d.var()?)
        } else {
            (0, 0)
        };
        let mut place = CsumPlace::Inline;
        let mut moved = BTreeMap::new();
        if n == 0 && !d.done() {
            let blocks = d.var()?;
            // Bounded before anything is allocated for it.
            if blocks <= CSUM_CHUNK as u64 || blocks > len / 512 || blocks > 1 << 24 {
                return Err(corrupt("blob (checksum block count)"));
            }
            csums = vec![0; blocks as usize];
            place = CsumPlace::Chunked { blocks };
        } else if !d.done() {
            let count = d.var()?;
            if count == 0 || count > n || comp != 0 || csum_shift != 0 {
                return Err(corrupt("blob (moved block count)"));
            }
            let mut last = None;
            for _ in 0..count {
                let (i, off) = (d.var()?, d.var()?);
                if i >= n || last.is_some_and(|l| i <= l) {
                    return Err(corrupt("blob (moved block index)"));
                }
                last = Some(i);
                moved.insert(i, off);
            }
        }
        if !d.done() {
            return Err(corrupt("blob (trailing bytes)"));
        }
        let b = Blob {
            disk_off,
            len,
            refs,
            csums,
            comp,
            clen,
            raw_len,
            moved,
            csum_shift,
        };
        Ok((b, place))
    }

    /// Put stored chunk `i` (from [`Blob::csum_chunk`]) into `csums` and
    /// `moved` (whose entries for the chunk's blocks it replaces).
    pub fn fill_chunk(&mut self, i: u64, v: &[u8]) -> Result<()> {
        let from = (i as usize).saturating_mul(CSUM_CHUNK);
        let want = self.csums.len().saturating_sub(from).min(CSUM_CHUNK);
        // Only blobs of one checksum per block, uncompressed, move blocks.
        let moves = self.comp == 0 && self.csum_shift == 0;
        if want == 0 || v.len() < want * 4 || (!moves && v.len() > want * 4) {
            return Err(corrupt("blob checksum chunk"));
        }
        let (sums, rest) = v.split_at(want * 4);
        for (c, b) in self.csums[from..from + want]
            .iter_mut()
            .zip(sums.chunks_exact(4))
        {
            *c = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        let (lo, hi) = (from as u64, (from + want) as u64);
        let stale: Vec<u64> = self.moved.range(lo..hi).map(|(&b, _)| b).collect();
        for b in stale {
            self.moved.remove(&b);
        }
        let mut d = Dec::new(rest);
        let mut last = None;
        while !d.done() {
            let (b, off) = (d.var()?, d.var()?);
            if b >= want as u64 || last.is_some_and(|l| b <= l) {
                return Err(corrupt("blob checksum chunk (moved block index)"));
            }
            last = Some(b);
            self.moved.insert(lo + b, off);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csum_is_standard_crc32c() {
        // The catalogue's check value, and a value a bitwise reference gives.
        assert_eq!(csum(b"123456789"), 0xE306_9283);
        let block: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut crc = !0u32;
        for &b in &block {
            crc ^= b as u32;
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0x82F6_3B78
                } else {
                    crc >> 1
                };
            }
        }
        assert_eq!(csum(&block), !crc);
    }

    #[test]
    fn object_keys_sort_like_object_ids() {
        let ids = [
            ObjectId::new(1, "a"),
            ObjectId::new(1, "a\0"),
            ObjectId::new(1, "a\0b"),
            ObjectId::new(1, "ab"),
            ObjectId::new(1, "b"),
            ObjectId::new(2, ""),
        ];
        let c = CollectionId::pg(1, 2);
        for w in ids.windows(2) {
            assert!(w[0] < w[1]);
            assert!(
                onode_key(c, &w[0]) < onode_key(c, &w[1]),
                "{:?} {:?}",
                w[0],
                w[1]
            );
        }
        for id in &ids {
            let k = onode_key(c, id);
            assert_eq!(decode_object(&k, 14).unwrap().0, *id);
            assert_eq!(decode_coll(&k).unwrap(), c);
        }
    }

    #[test]
    fn records_round_trip_and_reject_garbage() {
        let mut o = Onode {
            size: 12345,
            ..Onode::default()
        };
        o.extents.push(Extent {
            loff: 0,
            len: 4096,
            blob: 7,
            boff: 0,
        });
        o.attrs.insert("x".into(), vec![1, 2]);
        o.header = b"h".to_vec();
        assert_eq!(Onode::decode(&o.encode()).unwrap(), o);
        let b = Blob {
            disk_off: 1 << 40,
            len: 8192,
            refs: 2,
            csums: vec![1, 2],
            comp: 1,
            clen: 5000,
            raw_len: 65536,
            moved: BTreeMap::new(),
            csum_shift: 0,
        };
        assert_eq!(
            Blob::decode_head(&b.encode_head()).unwrap(),
            (b.clone(), CsumPlace::Inline)
        );
        let enc = o.encode();
        for cut in 0..enc.len() {
            assert!(Onode::decode(&enc[..cut]).is_err());
        }
        assert!(Blob::decode_head(&[0xff; 20]).is_err());
    }

    /// A blob with checksum units of several blocks says so behind a flag
    /// on its compression byte (records without the flag are as before),
    /// inline or chunked; a unit on a compressed blob, beside moved
    /// blocks, of zero or too large a shift is refused.
    #[test]
    fn checksum_units_round_trip_behind_a_flag() {
        let mut b = Blob {
            disk_off: 1 << 30,
            len: 100 << 12,
            refs: 1,
            csums: vec![7; 7],
            comp: 0,
            clen: 0,
            raw_len: 0,
            moved: BTreeMap::new(),
            csum_shift: 4,
        };
        assert_eq!(b.csum_unit(4096), 64 << 10);
        assert_eq!(Blob::csum_count(b.len, b.csum_unit(4096)), 7);
        let head = b.encode_head();
        assert_eq!(
            Blob::decode_head(&head).unwrap(),
            (b.clone(), CsumPlace::Inline)
        );
        b.csums = vec![9; 3 * CSUM_CHUNK];
        b.len = (3 * CSUM_CHUNK as u64) << 16;
        let (mut back, place) = Blob::decode_head(&b.encode_head()).unwrap();
        assert!(matches!(place, CsumPlace::Chunked { .. }));
        for i in 0..place.chunks() {
            back.fill_chunk(i, &b.csum_chunk(i)).unwrap();
        }
        assert_eq!(back, b);
        // The flag and shift sit right after the checksums.
        let at = head.len() - 2;
        assert_eq!(head[at..], [CSUM_SHIFT_FLAG, 4]);
        for (flag, shift) in [(CSUM_SHIFT_FLAG, 0), (CSUM_SHIFT_FLAG, CSUM_SHIFT_MAX + 1)] {
            let mut bad = head.clone();
            bad[at..].copy_from_slice(&[flag, shift]);
            assert!(Blob::decode_head(&bad).is_err(), "{flag:#x} {shift}");
        }
        // A compressed blob's record (its lengths after the byte) with the
        // flag and a shift: refused for the compression, not the lengths.
        let mut packed = head[..at].to_vec();
        packed.extend_from_slice(&[CSUM_SHIFT_FLAG | 1, 4, 10, 20]);
        let mut plain = head[..at].to_vec();
        plain.extend_from_slice(&[1, 10, 20]);
        assert!(Blob::decode_head(&plain).is_ok(), "the same, unflagged");
        assert!(
            Blob::decode_head(&packed).is_err(),
            "a unit on a compressed blob"
        );
        let mut moved = head.clone();
        moved.extend_from_slice(&[1, 0, 5]);
        assert!(Blob::decode_head(&moved).is_err(), "a moved block");
        // Nor may a checksum chunk of such a blob list moved blocks.
        let mut chunk = b.csum_chunk(0);
        chunk.extend_from_slice(&[0, 5]);
        let (mut back, _) = Blob::decode_head(&b.encode_head()).unwrap();
        assert!(
            back.fill_chunk(0, &chunk).is_err(),
            "a moved block in a chunk"
        );
    }

    #[test]
    fn large_blobs_keep_checksums_in_chunks_that_round_trip() {
        let b = Blob {
            disk_off: 4096,
            len: 200 * 4096,
            refs: 1,
            csums: (0..200u32).map(|i| i.wrapping_mul(0x9E37_79B9)).collect(),
            comp: 0,
            clen: 0,
            raw_len: 0,
            moved: BTreeMap::new(),
            csum_shift: 0,
        };
        let place = b.csum_place();
        assert_eq!(place, CsumPlace::Chunked { blocks: 200 });
        assert_eq!(place.chunks(), 4);
        let head = b.encode_head();
        assert!(head.len() < 32, "the record leaves the checksums out");
        let (mut back, p2) = Blob::decode_head(&head).unwrap();
        assert_eq!(p2, place);
        assert_ne!(back, b, "checksums are not in the record");
        for i in 0..place.chunks() {
            back.fill_chunk(i, &b.csum_chunk(i)).unwrap();
        }
        assert_eq!(back, b);
        // The last chunk is short; a chunk of the wrong length is refused.
        assert_eq!(b.csum_chunk(3).len(), 8 * 4);
        assert!(back.fill_chunk(3, &b.csum_chunk(0)).is_err());
        assert!(back.fill_chunk(4, &[]).is_err());
        // A small blob keeps them inline; a count no larger than a chunk is
        // not a chunked record.
        let small = Blob {
            csums: vec![5; CSUM_CHUNK],
            len: CSUM_CHUNK as u64 * 4096,
            ..b.clone()
        };
        assert_eq!(small.csum_place(), CsumPlace::Inline);
        let mut bad = Enc::default();
        bad.var(0).var(1 << 20).var(1).var(0).u8(0).var(3);
        assert!(Blob::decode_head(&bad.0).is_err());
        assert_eq!(decode_csum_key(&csum_key(7, 9)).unwrap(), (7, 9));
        assert!(csum_key(7, 0) > u64_key(T_CSUM, 7) && csum_key(7, 1) < u64_key(T_CSUM, 8));
    }

    #[test]
    fn deferred_records_drop_trailing_zeros_and_read_old_records() {
        let mut block = vec![0u8; 4096];
        block[..1000].fill(7);
        block[10] = 0;
        let enc = encode_deferred(8192, &block);
        assert!(enc.len() < 1100, "{} bytes", enc.len());
        assert_eq!(decode_deferred(&enc).unwrap(), (8192, block.clone()));
        for b in [vec![0u8; 4096], vec![1u8; 4096], Vec::new()] {
            assert_eq!(
                decode_deferred(&encode_deferred(4096, &b)).unwrap(),
                (4096, b)
            );
        }
        // A record from before the trimming: offset and bytes only.
        let mut old = Enc::default();
        old.var(4096).bytes(&[5u8, 0, 0]);
        assert_eq!(decode_deferred(&old.0).unwrap(), (4096, vec![5, 0, 0]));
        // A length shorter than the stored bytes, or absurd, is corruption.
        let mut bad = Enc::default();
        bad.var(0).bytes(&[1u8, 2, 3]).var(2);
        assert!(decode_deferred(&bad.0).is_err());
        let mut bad = Enc::default();
        bad.var(0).bytes(&[1u8]).var(1 << 40);
        assert!(decode_deferred(&bad.0).is_err());
        // Cut short: an error (or, cut just before the length, an old
        // record), never a panic.
        let enc = encode_deferred(0, &block);
        for cut in 0..enc.len() {
            if let Ok((_, b)) = decode_deferred(&enc[..cut]) {
                assert_eq!(b, block[..1000], "cut at {cut}");
            }
        }
    }

    #[test]
    fn omap_flag_round_trips_and_version_1_onodes_may_have_omap_keys() {
        for omap in [false, true] {
            let o = Onode {
                size: 3,
                omap,
                ..Onode::default()
            };
            assert_eq!(Onode::decode(&o.encode()).unwrap(), o);
        }
        // A version 1 onode (written before the flag existed): same
        // fields, no flag byte. Its omap must still be looked at.
        let mut v1 = Enc::default();
        v1.u8(ONODE_V1).var(3).var(0).var(0).bytes(b"");
        let on = Onode::decode(&v1.0).unwrap();
        assert!(on.omap);
        assert_eq!(on.size, 3);
        // A flag byte other than 0 or 1 is corruption, not "true".
        let mut enc = Onode::default().encode();
        *enc.last_mut().unwrap() = 2;
        assert!(Onode::decode(&enc).is_err());
    }
}
