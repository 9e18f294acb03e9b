//! Checking an object's shards against each other: the data shards are
//! encoded again and the parity compared, and where they disagree, the
//! one shard whose rebuild from the others makes them all agree is named.
//! A deep scrub uses it for objects whose per-shard hashes were not kept
//! (partially overwritten since they were last written whole).
//!
//! Stripes are independent (see [`crate::stripe`]), so a run of stripes
//! is checked as an object of its own: stripes `first..end` of an object
//! of `size` bytes look like the stripes of an object of
//! `min(size, end * width) - first * width` bytes, their shard bytes
//! starting at shard offset 0. A caller may so check a large object a run
//! at a time.
//!
//! Like the rest of the crate it never does I/O and never panics on caller
//! input.

use crate::error::{EcError, Result};
use crate::plan::Coalesce;
use crate::stripe::{Fetched, Striper};
use std::ops::Range;

/// What re-encoding a run of stripes says of its shards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShardCheck {
    /// Every parity chunk is the encode of the data chunks.
    Consistent,
    /// They disagree, and this shard is the one: rebuilt from the others,
    /// all agree (and with no other left out do they).
    Bad(usize),
    /// They disagree, and no single shard explains it (several are wrong,
    /// or the code has too little parity to tell which: one parity
    /// shard).
    Unlocated,
}

impl Striper {
    /// The object bytes stripes `stripes` of an object of `size` bytes
    /// hold, as the size of an object of those stripes alone.
    pub fn run_size(&self, size: u64, stripes: &Range<u64>) -> Result<u64> {
        let w = self.width();
        let start = stripes.start.checked_mul(w);
        let end = stripes.end.checked_mul(w).map(|e| e.min(size));
        match (start, end) {
            (Some(s), Some(e)) if stripes.start < stripes.end && s < e => Ok(e - s),
            _ => Err(EcError::InvalidRequest(format!(
                "stripes {}..{} of an object of {size} bytes",
                stripes.start, stripes.end
            ))),
        }
    }

    /// Check stripes `stripes` of an object of `size` bytes: `shards[c]`
    /// holds shard `c`'s bytes of those stripes (from shard offset
    /// `stripes.start * unit`), every shard of the code given.
    pub fn check_shards<B: AsRef<[u8]>>(
        &self,
        size: u64,
        stripes: Range<u64>,
        shards: &[B],
    ) -> Result<ShardCheck> {
        let run = self.run_size(size, &stripes)?;
        if shards.len() != self.shards() {
            return Err(EcError::InvalidRequest(format!(
                "{} shards given to a code of {}",
                shards.len(),
                self.shards()
            )));
        }
        for (c, b) in shards.iter().enumerate() {
            let want = self.shard_len(run, c)?;
            if b.as_ref().len() as u64 != want {
                return Err(EcError::InvalidRequest(format!(
                    "shard {c} has {} bytes of a run whose shard holds {want}",
                    b.as_ref().len()
                )));
            }
        }
        let all: Vec<&[u8]> = shards.iter().map(|b| b.as_ref()).collect();
        if self.agree(run, &all)? {
            return Ok(ShardCheck::Consistent);
        }
        let mut fits = Vec::new();
        for c in 0..self.shards() {
            let Some(rebuilt) = self.rebuild_one(run, &all, c) else {
                continue;
            };
            let mut with = all.clone();
            with[c] = &rebuilt;
            if self.agree(run, &with)? {
                fits.push(c);
            }
        }
        Ok(match fits.as_slice() {
            [c] => ShardCheck::Bad(*c),
            _ => ShardCheck::Unlocated,
        })
    }

    /// Whether the parity of an object of `size` bytes is the encode of
    /// its data, its shards given whole.
    fn agree(&self, size: u64, shards: &[&[u8]]) -> Result<bool> {
        let data: Vec<usize> = (0..self.k()).collect();
        let plan = self.plan_read(size, 0..size, &data, Coalesce::Conservative)?;
        let object = self.decode_read(&plan, &whole(shards, None))?;
        let encoded = self.encode(&object)?;
        Ok(encoded.iter().zip(shards).all(|(e, s)| e.as_slice() == *s))
    }

    /// Shard `c` rebuilt from every other (`None`: the code cannot).
    fn rebuild_one(&self, size: u64, shards: &[&[u8]], c: usize) -> Option<Vec<u8>> {
        let others: Vec<usize> = (0..self.shards()).filter(|&o| o != c).collect();
        let plan = self
            .plan_rebuild(size, &[c], &others, Coalesce::Conservative)
            .ok()?;
        let mut out = self.decode_rebuild(&plan, &whole(shards, Some(c))).ok()?;
        out.remove(&c)
    }
}

/// Whole shards as fetched bytes at offset 0, `skip` left out.
fn whole<'a>(shards: &[&'a [u8]], skip: Option<usize>) -> Fetched<&'a [u8]> {
    (shards.iter().enumerate())
        .filter(|(c, _)| Some(*c) != skip)
        .map(|(c, b)| (c, vec![(0, *b)]))
        .collect()
}
