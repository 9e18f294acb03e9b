//! Listing a bucket: the entries of all its index shards merged in key
//! order, with S3's prefix, delimiter (keys rolled up into common
//! prefixes), marker and page size. Each shard is read a page at a time,
//! only as far as the merge needs, all shards running low read together.
//!
//! It must never skip or repeat a key between pages (a page ends at a
//! key or a common prefix, and the next starts after it).

use crate::bucket::BucketRecord;
use crate::{internal, Gateway};
use loligo_types::s3::{omap_key, IndexEntry, ENTRY, VERSION};
use s3s::{s3_error, S3Error};
use std::collections::VecDeque;

/// The most keys one listing page holds (S3's).
pub const MAX_KEYS: usize = 1000;

/// What a listing asks.
#[derive(Clone, Debug, Default)]
pub struct Query {
    pub prefix: String,
    pub delimiter: Option<String>,
    /// Keys after this one (exclusive): the marker, start-after or
    /// continuation token.
    pub after: Option<String>,
    pub max_keys: usize,
}

/// One listing page.
#[derive(Debug, Default)]
pub struct Page {
    /// Keys with their entries (a listing of versions holds a key once
    /// per version, its current version first, then newest first).
    pub entries: Vec<(String, IndexEntry)>,
    pub prefixes: Vec<String>,
    pub truncated: bool,
    /// The last key or common prefix of the page: where the next starts.
    pub last: Option<String>,
}

/// One shard's read-ahead of the records under one omap key prefix
/// ([`ENTRY`], or [`VERSION`] whose keys after the prefix are the S3 key,
/// NUL and the version's order: they sort after the current entry's).
struct Cursor {
    object: String,
    kind: u8,
    buf: VecDeque<(String, Vec<u8>)>,
    /// The omap key to read from next (inclusive); `None`: no more.
    next: Option<Vec<u8>>,
}

/// The smallest omap key under `kind` after every key that starts with
/// `prefix` (keys are UTF-8, which never holds byte 0xFF).
fn past(kind: u8, prefix: &str) -> Vec<u8> {
    let mut k = omap_key(kind, prefix.as_bytes());
    k.push(0xFF);
    k
}

/// The S3 key of a record's sort string (before the NUL of a version).
fn s3_key(sort: &str) -> &str {
    sort.split('\0').next().unwrap_or(sort)
}

/// Where a listing starts, for each kind of record it reads.
pub struct Starts {
    /// The omap key the current entries are read from (`None`: they
    /// are not read).
    pub current: Option<Vec<u8>>,
    /// The omap key older versions are read from (`None`: not read).
    pub versions: Option<Vec<u8>>,
}

impl Starts {
    /// The current entries only, after `q`'s marker.
    pub fn current(q: &Query) -> Starts {
        let start = match &q.after {
            Some(a) if a.as_str() >= q.prefix.as_str() => {
                let mut k = omap_key(ENTRY, a.as_bytes());
                k.push(0);
                k
            }
            _ => omap_key(ENTRY, q.prefix.as_bytes()),
        };
        Starts {
            current: Some(start),
            versions: None,
        }
    }
}

impl Cursor {
    /// Whether the merge must wait for this shard: nothing buffered, more
    /// to read.
    fn starved(&self) -> bool {
        self.buf.is_empty() && self.next.is_some()
    }

    /// Read another page if fewer than `low` entries are buffered and the
    /// shard has more.
    async fn fill(&mut self, gw: &Gateway, page: u32, low: usize) -> Result<(), S3Error> {
        let Some(start) = self.next.clone().filter(|_| self.buf.len() < low) else {
            return Ok(());
        };
        let got = match gw.index().omap_list(&self.object, &start, page).await {
            Ok(g) => g,
            Err(e) if e.is_not_found() => Vec::new(),
            Err(e) => return Err(internal(e)),
        };
        let full = got.len() == page as usize;
        self.next = None;
        for (k, v) in got {
            if k.first() != Some(&self.kind) {
                return Ok(());
            }
            let key = String::from_utf8(k[1..].to_vec())
                .map_err(|_| s3_error!(InternalError, "an index key is not UTF-8"))?;
            let mut n = k;
            n.push(0);
            self.next = full.then_some(n);
            self.buf.push_back((key, v));
        }
        Ok(())
    }

    /// Drop what starts with `prefix`, and read on after it.
    fn skip(&mut self, prefix: &str) {
        while self.buf.front().is_some_and(|(k, _)| k.starts_with(prefix)) {
            self.buf.pop_front();
        }
        if self.buf.is_empty() && self.next.is_some() {
            self.next = Some(past(self.kind, prefix));
        }
    }
}

impl Gateway {
    /// A page of bucket `b`'s listing.
    pub async fn list(&self, b: &BucketRecord, q: &Query) -> Result<Page, S3Error> {
        self.list_from(b, q, Starts::current(q)).await
    }

    /// A page of bucket `b`'s listing of what `starts` names, read from
    /// there.
    pub async fn list_from(
        &self,
        b: &BucketRecord,
        q: &Query,
        starts: Starts,
    ) -> Result<Page, S3Error> {
        let max = q.max_keys.min(MAX_KEYS);
        if max == 0 {
            return Ok(Page::default());
        }
        // Each shard is asked for its share of the page and a quarter more
        // (keys hash evenly over shards; what is read and not listed is
        // thrown away, so more costs the OSDs work, less costs rounds).
        let per = (max / b.shards.max(1) as usize * 5 / 4 + 8).min(MAX_KEYS + 1) as u32;
        let kinds = [(ENTRY, starts.current), (VERSION, starts.versions)];
        let mut cursors: Vec<Cursor> = Vec::new();
        for (kind, start) in kinds.into_iter().filter_map(|(k, s)| Some((k, s?))) {
            cursors.extend(b.shard_objects().into_iter().map(|object| Cursor {
                object,
                kind,
                buf: VecDeque::new(),
                next: Some(start.clone()),
            }));
        }
        let mut page = Page::default();
        let mut count = 0;
        // Shards run down at about the same pace: when one is starved,
        // every shard below half a read is read ahead in the same round,
        // so a page waits on one round of reads, not one per shard.
        let low = (per as usize / 2).max(1);
        loop {
            if cursors.iter().any(Cursor::starved) {
                let fills = cursors.iter_mut().map(|c| c.fill(self, per, low));
                futures::future::try_join_all(fills).await?;
            }
            let Some(i) = (0..cursors.len())
                .filter(|&i| !cursors[i].buf.is_empty())
                .min_by(|&a, &b| cursors[a].buf[0].0.cmp(&cursors[b].buf[0].0))
            else {
                return Ok(page);
            };
            let key = s3_key(&cursors[i].buf[0].0).to_string();
            if !key.starts_with(&q.prefix) {
                return Ok(page);
            }
            if count == max {
                page.truncated = true;
                return Ok(page);
            }
            let rolled = (q.delimiter.as_deref())
                .filter(|d| !d.is_empty())
                .and_then(|d| {
                    let rest = &key[q.prefix.len()..];
                    rest.find(d)
                        .map(|at| key[..q.prefix.len() + at + d.len()].to_string())
                });
            match rolled {
                Some(cp) => {
                    for c in &mut cursors {
                        c.skip(&cp);
                    }
                    // The previous page ended at this common prefix.
                    if q.after.as_deref().is_some_and(|a| cp.as_str() <= a) {
                        continue;
                    }
                    page.last = Some(cp.clone());
                    page.prefixes.push(cp);
                }
                None => {
                    let Some((k, v)) = cursors[i].buf.pop_front() else {
                        continue;
                    };
                    let e: IndexEntry = serde_json::from_slice(&v)
                        .map_err(|e| s3_error!(InternalError, "the entry of '{k}': {e}"))?;
                    page.last = Some(key.clone());
                    page.entries.push((key, e));
                }
            }
            count += 1;
        }
    }
}
