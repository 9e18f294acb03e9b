//! Objects' data and entries: writing an upload's data (in the index when
//! small, else a pending record and then 4 MiB data objects under a
//! fresh tag), setting or removing its entry with one `s3` class call,
//! and reading a range back as a stream.
//!
//! It must never set an entry before the data it names is durable, and
//! never write data under a tag another upload uses.

use crate::bucket::BucketRecord;
use crate::{internal, names, now_ms, Gateway};
use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use loligo_client::ClientError;
use loligo_types::ops::{Cmp, OpError, SubOp};
use loligo_types::s3::{
    omap_key, Commit, Condition, Garbage, IndexEntry, Layout, Remove, Removed, Segment, Tails,
    VersionedCommit, VersionedRemove, Versioning, ENTRY, INLINE, S3_BUCKET_GONE, S3_LOCKED,
    S3_NO_SUCH_KEY, S3_NO_SUCH_VERSION, S3_PENDING_GONE, S3_PRECONDITION,
};
use s3s::{s3_error, S3Error};
use serde_bytes::ByteBuf;

/// Data objects written at once by one upload.
const WRITES_IN_FLIGHT: usize = 4;
/// Data objects read ahead by one download.
const READS_AHEAD: usize = 2;

/// An upload's data, written but not yet named by an entry.
#[derive(Debug)]
pub enum Written {
    /// Small: goes into the index with the entry.
    Inline(Bytes),
    /// In data objects, with the pending record `tag`.
    Striped { tag: String, segment: Segment },
}

impl Written {
    /// The layout an entry naming this data has.
    pub fn layout(&self) -> Layout {
        match self {
            Written::Inline(_) => Layout::Inline,
            Written::Striped { segment, .. } => Layout::Striped {
                stripe: crate::STRIPE,
                segments: vec![segment.clone()],
            },
        }
    }
}

/// How many times an entry's update is tried against writers racing it.
const UPDATE_ATTEMPTS: usize = 8;

/// The version id a versioned commit answers.
pub(crate) fn version_of_output(out: &[u8]) -> Result<Option<String>, S3Error> {
    postcard::from_bytes(out).map_err(|e| s3_error!(InternalError, "a commit's answer: {e}"))
}

/// An S3 error for a refused `s3` class call.
fn refusal(e: ClientError, bucket: &str, key: &str) -> S3Error {
    match e {
        ClientError::Op(OpError::MethodRefused { code, message, .. }) => match code {
            S3_PRECONDITION => s3_error!(PreconditionFailed, "{message}"),
            S3_NO_SUCH_KEY => s3_error!(NoSuchKey, "'{key}' does not exist"),
            S3_NO_SUCH_VERSION => s3_error!(NoSuchVersion, "{message}"),
            S3_LOCKED => s3_error!(AccessDenied, "{message}"),
            S3_BUCKET_GONE => s3_error!(NoSuchBucket, "bucket '{bucket}' was deleted"),
            S3_PENDING_GONE => s3_error!(
                InternalError,
                "the upload took too long and was collected: send it again"
            ),
            _ => s3_error!(InternalError, "{message}"),
        },
        e => internal(e),
    }
}

/// The tag a new version of bucket `b` is numbered with: `None` for an
/// unversioned bucket, `Some(None)` for the `null` version (versioning
/// suspended), `Some(Some(tag))` for a fresh version id.
pub(crate) fn version_tag(b: &BucketRecord) -> Result<Option<Option<String>>, S3Error> {
    match b.versioning {
        Versioning::Off => Ok(None),
        Versioning::Suspended => Ok(Some(None)),
        Versioning::Enabled => {
            let t = names::new_tag().map_err(|m| s3_error!(InternalError, "{m}"))?;
            Ok(Some(Some(t)))
        }
    }
}

/// A delete marker made by `owner` now (the class numbers it).
fn marker(owner: &str) -> IndexEntry {
    IndexEntry {
        size: 0,
        etag: String::new(),
        mtime_ms: now_ms(),
        owner: owner.to_string(),
        layout: Layout::Inline,
        content_type: None,
        meta: Default::default(),
        headers: Default::default(),
        checksums: Default::default(),
        acl: None,
        grants: None,
        parts: 0,
        tags: Default::default(),
        version_id: None,
        vseq: 0,
        delete_marker: true,
        checksum_type: None,
        retention: None,
        legal_hold: false,
    }
}

impl Gateway {
    /// Change what `key`'s entry (or, with `older`, that older version's)
    /// says of itself (not where its data is: its ACL, tags) with
    /// `change`, stored only if the entry is still the one read (compared
    /// as stored; a race is retried). The entry as changed.
    pub async fn update_entry(
        &self,
        b: &BucketRecord,
        key: &str,
        older: Option<u64>,
        change: impl Fn(&mut IndexEntry) -> Result<(), S3Error>,
    ) -> Result<IndexEntry, S3Error> {
        let ek = match older {
            None => omap_key(ENTRY, key.as_bytes()),
            Some(vseq) => loligo_types::s3::version_key(key, vseq),
        };
        let shard = b.shard_object(key);
        for _ in 0..UPDATE_ATTEMPTS {
            let got = match self.index().omap_get(&shard, vec![ek.clone()]).await {
                Ok(mut g) => g.remove(&ek),
                Err(e) if e.is_not_found() => None,
                Err(e) => return Err(internal(e)),
            };
            let Some(raw) = got else {
                return Err(s3_error!(NoSuchKey, "'{key}' does not exist"));
            };
            let mut entry: IndexEntry = serde_json::from_slice(&raw)
                .map_err(|e| s3_error!(InternalError, "the entry of '{key}': {e}"))?;
            let layout = entry.layout.clone();
            change(&mut entry)?;
            debug_assert!(entry.layout == layout, "an entry update moved data");
            let value = serde_json::to_vec(&entry).map_err(|e| s3_error!(InternalError, "{e}"))?;
            let ops = vec![
                SubOp::CmpOmap {
                    key: ek.clone(),
                    cmp: Cmp::Eq,
                    value: raw,
                },
                SubOp::OmapSet(vec![(ByteBuf::from(ek.clone()), ByteBuf::from(value))]),
            ];
            match self.index().operate(&shard, ops).await {
                Ok(_) => return Ok(entry),
                Err(ClientError::Op(OpError::AssertFailed { .. })) => continue,
                Err(e) => return Err(internal(e)),
            }
        }
        Err(s3_error!(
            OperationAborted,
            "'{key}' kept changing while this request changed it: try again"
        ))
    }

    /// `key`'s entry in bucket `b`, with its data if kept inline.
    pub async fn lookup(
        &self,
        b: &BucketRecord,
        key: &str,
    ) -> Result<Option<(IndexEntry, Bytes)>, S3Error> {
        let (ek, dk) = (
            omap_key(ENTRY, key.as_bytes()),
            omap_key(INLINE, key.as_bytes()),
        );
        let shard = b.shard_object(key);
        let mut got = match self
            .index()
            .omap_get(&shard, vec![ek.clone(), dk.clone()])
            .await
        {
            Ok(g) => g,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(internal(e)),
        };
        let Some(v) = got.remove(&ek) else {
            return Ok(None);
        };
        let entry: IndexEntry = serde_json::from_slice(&v)
            .map_err(|e| s3_error!(InternalError, "the entry of '{key}': {e}"))?;
        let inline = got.remove(&dk).map(Bytes::from).unwrap_or_default();
        if matches!(entry.layout, Layout::Inline) && inline.len() as u64 != entry.size {
            return Err(s3_error!(
                InternalError,
                "the inline data of '{key}' is damaged"
            ));
        }
        Ok(Some((entry, inline)))
    }

    /// Write `len` bytes from `body` for `key` of bucket `b`, calling
    /// `seen` on every chunk (the digests). More or fewer bytes than
    /// `len` is an error, and the data written so far is left to the
    /// collector.
    pub async fn write_body<S, E>(
        &self,
        b: &BucketRecord,
        key: &str,
        body: S,
        len: u64,
        seen: &mut (dyn FnMut(&[u8]) + Send),
    ) -> Result<Written, S3Error>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        if len > crate::PUT_MAX {
            return Err(s3_error!(
                EntityTooLarge,
                "{len} bytes: one PUT carries at most 5 GiB (use a multipart upload)"
            ));
        }
        if len <= self.config().inline_max {
            let data = read_all(body, len, seen).await?;
            return Ok(Written::Inline(data));
        }
        self.write_striped(b, key, body, len, seen).await
    }

    /// Write `len` bytes from `body` in data objects under a fresh tag,
    /// with a pending record first (what a crash leaves for the
    /// collector).
    pub(crate) async fn write_striped<S, E>(
        &self,
        b: &BucketRecord,
        key: &str,
        body: S,
        len: u64,
        seen: &mut (dyn FnMut(&[u8]) + Send),
    ) -> Result<Written, S3Error>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let tag = names::new_tag().map_err(|m| s3_error!(InternalError, "{m}"))?;
        let tails = Tails {
            prefix: names::tails_prefix(&b.id, &tag),
            count: len.div_ceil(crate::STRIPE) as u32,
        };
        let pending = Garbage {
            tails: vec![tails.clone()],
            ms: now_ms(),
            key: key.to_string(),
        };
        let record = serde_json::to_vec(&pending).map_err(|e| s3_error!(InternalError, "{e}"))?;
        let begin = loligo_types::s3::Begin {
            tag: tag.clone(),
            record,
        };
        let input = postcard::to_stdvec(&begin).map_err(|e| s3_error!(InternalError, "{e}"))?;
        match self
            .index()
            .exec(&b.shard_object(key), "s3", "begin", input)
            .await
        {
            Ok(_) => {}
            Err(e) => {
                self.forget_bucket(&b.name);
                return Err(refusal(e, &b.name, key));
            }
        }
        if let Err(e) = self.write_stripes(body, len, &tails, seen).await {
            // Handed to the collector now, rather than after
            // `pending_max_age`.
            self.abandon(&b.shard_object(key), &tag).await;
            return Err(e);
        }
        Ok(Written::Striped {
            tag,
            segment: Segment {
                size: len,
                tails,
                checksums: Default::default(),
            },
        })
    }

    /// Write `body` over `tails`' objects, a few at once.
    async fn write_stripes<S, E>(
        &self,
        mut body: S,
        len: u64,
        tails: &Tails,
        seen: &mut (dyn FnMut(&[u8]) + Send),
    ) -> Result<(), S3Error>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let stripe = crate::STRIPE as usize;
        let mut buf = BytesMut::with_capacity(stripe.min(len as usize));
        let mut writes = futures::stream::FuturesUnordered::new();
        let (mut n, mut total) = (0u32, 0u64);
        let data = self.data().clone();
        loop {
            let chunk = match body.next().await {
                Some(Ok(c)) => Some(c),
                Some(Err(e)) => return Err(s3_error!(IncompleteBody, "reading the body: {e}")),
                None => None,
            };
            let end = chunk.is_none();
            if let Some(c) = chunk {
                total += c.len() as u64;
                if total > len {
                    return Err(s3_error!(
                        IncompleteBody,
                        "more than the {len} bytes announced"
                    ));
                }
                seen(&c);
                buf.extend_from_slice(&c);
            }
            while buf.len() >= stripe || (end && !buf.is_empty()) {
                let part = buf.split_to(stripe.min(buf.len())).freeze();
                let (d, name) = (data.clone(), tails.object(n));
                writes.push(async move { d.write_full(&name, part).await });
                n += 1;
                if writes.len() >= WRITES_IN_FLIGHT {
                    if let Some(r) = writes.next().await {
                        r.map_err(internal)?;
                    }
                }
            }
            if end {
                break;
            }
        }
        while let Some(r) = writes.next().await {
            r.map_err(internal)?;
        }
        if total != len {
            return Err(s3_error!(
                IncompleteBody,
                "{total} of the {len} bytes announced"
            ));
        }
        debug_assert_eq!(n, tails.count);
        Ok(())
    }

    /// Name `written` by `entry` as `key`'s, if `condition` holds: the
    /// object's commit point.
    pub async fn commit(
        &self,
        b: &BucketRecord,
        key: &str,
        mut entry: IndexEntry,
        written: Written,
        condition: Condition,
    ) -> Result<IndexEntry, S3Error> {
        entry.layout = written.layout();
        let (inline, pending, tails) = match written {
            Written::Inline(d) => (Some(d.to_vec()), None, None),
            Written::Striped { tag, segment } => (None, Some(tag), Some(segment.tails)),
        };
        let c = Commit {
            key: key.to_string(),
            entry: serde_json::to_vec(&entry).map_err(|e| s3_error!(InternalError, "{e}"))?,
            inline,
            pending: pending.clone(),
            condition,
            now_ms: now_ms(),
        };
        let versioned = version_tag(b)?;
        let (method, input) = match versioned.clone() {
            None => ("commit", postcard::to_stdvec(&c)),
            Some(tag) => (
                "vcommit",
                postcard::to_stdvec(&VersionedCommit { commit: c, tag }),
            ),
        };
        let input = input.map_err(|e| s3_error!(InternalError, "{e}"))?;
        let shard = b.shard_object(key);
        match self.index().exec(&shard, "s3", method, input).await {
            Ok(out) => {
                if versioned.is_some() {
                    entry.version_id = version_of_output(&out)?;
                }
                Ok(entry)
            }
            Err(e) => {
                if let (Some(tag), Some(tails)) = (pending, &tails) {
                    self.give_up(&shard, &tag, tails, &e).await;
                }
                if matches!(&e, ClientError::Op(OpError::MethodRefused { code, .. }) if *code == S3_BUCKET_GONE)
                {
                    self.forget_bucket(&b.name);
                }
                Err(refusal(e, &b.name, key))
            }
        }
    }

    /// After a refused commit of the data objects `tails` written under
    /// `tag`: data that no record leads the collector to any more (the
    /// bucket was deleted, or the collector took the pending record, and
    /// perhaps deleted what was written until then) is deleted now;
    /// otherwise the pending record goes to the garbage list.
    pub(crate) async fn give_up(&self, shard: &str, tag: &str, tails: &Tails, e: &ClientError) {
        let orphaned = matches!(e, ClientError::Op(OpError::MethodRefused { code, .. })
            if *code == S3_BUCKET_GONE || *code == S3_PENDING_GONE);
        if !orphaned {
            self.abandon(shard, tag).await;
            return;
        }
        for n in 0..tails.count {
            if let Err(err) = self.data().remove(&tails.object(n)).await {
                if !err.is_not_found() {
                    tracing::warn!("{}: left behind ({err})", tails.object(n));
                }
            }
        }
    }

    /// Hand an upload that will not commit to the collector now (best
    /// effort: otherwise it is taken after `pending_max_age`).
    pub(crate) async fn abandon(&self, shard: &str, tag: &str) {
        let a = loligo_types::s3::Abandon {
            tag: tag.to_string(),
            now_ms: now_ms(),
        };
        if let Ok(input) = postcard::to_stdvec(&a) {
            let _ = self.index().exec(shard, "s3", "abandon", input).await;
        }
    }

    /// Remove `key` from bucket `b` if `condition` holds: whether it
    /// existed.
    pub async fn remove_object(
        &self,
        b: &BucketRecord,
        key: &str,
        condition: Condition,
    ) -> Result<bool, S3Error> {
        let r = Remove {
            key: key.to_string(),
            condition,
            now_ms: now_ms(),
        };
        let input = postcard::to_stdvec(&r).map_err(|e| s3_error!(InternalError, "{e}"))?;
        match self
            .index()
            .exec(&b.shard_object(key), "s3", "remove", input)
            .await
        {
            Ok(out) => Ok(postcard::from_bytes(&out).unwrap_or(false)),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(refusal(e, &b.name, key)),
        }
    }

    /// Remove version `version_id` (`"null"`: the null version) of `key`
    /// for good, or (without one) put a delete marker over it: in a
    /// bucket that keeps versions, or any bucket given a version.
    pub async fn remove_version(
        &self,
        b: &BucketRecord,
        key: &str,
        version_id: Option<&str>,
        who: &str,
        bypass_governance: bool,
    ) -> Result<Removed, S3Error> {
        let tag = match version_id {
            Some(_) => None,
            None => version_tag(b)?.flatten(),
        };
        let r = VersionedRemove {
            key: key.to_string(),
            version_id: version_id.map(str::to_string),
            marker: serde_json::to_vec(&marker(who))
                .map_err(|e| s3_error!(InternalError, "{e}"))?,
            tag,
            now_ms: now_ms(),
            bypass_governance,
        };
        let input = postcard::to_stdvec(&r).map_err(|e| s3_error!(InternalError, "{e}"))?;
        match (self.index())
            .exec(&b.shard_object(key), "s3", "vremove", input)
            .await
        {
            Ok(out) => postcard::from_bytes(&out)
                .map_err(|e| s3_error!(InternalError, "a removal's answer: {e}")),
            Err(e) if e.is_not_found() => Ok(Removed::default()),
            Err(e) => Err(refusal(e, &b.name, key)),
        }
    }

    /// Bytes `range` of the object `entry` describes (`inline`: its data
    /// when kept in the index), as a stream read a little ahead.
    pub fn read_range(
        &self,
        entry: &IndexEntry,
        inline: Bytes,
        range: std::ops::Range<u64>,
    ) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + Sync + 'static {
        let (tx, rx) = tokio::sync::mpsc::channel(READS_AHEAD);
        let pieces = pieces(entry, range.clone());
        let data = self.data().clone();
        let whole = matches!(entry.layout, Layout::Inline);
        tokio::spawn(async move {
            if whole {
                let (s, e) = (range.start as usize, range.end as usize);
                let _ = tx.send(Ok(inline.slice(s..e))).await;
                return;
            }
            let mut reads = futures::stream::iter(pieces.into_iter().map(|(name, off, len)| {
                let d = data.clone();
                async move {
                    let got = d.read(&name, off, len).await;
                    (name, len, got)
                }
            }))
            .buffered(READS_AHEAD);
            while let Some((name, len, got)) = reads.next().await {
                let item = match got {
                    Ok(b) if b.len() as u64 == len => Ok(b),
                    Ok(b) => Err(std::io::Error::other(format!(
                        "data object {name} is short: {} of {len} bytes",
                        b.len()
                    ))),
                    Err(e) => Err(std::io::Error::other(format!("reading {name}: {e}"))),
                };
                let failed = item.is_err();
                if tx.send(item).await.is_err() || failed {
                    return;
                }
            }
        });
        tokio_stream::wrappers::ReceiverStream::new(rx)
    }
}

/// The (data object, offset, length) reads that make bytes `range` of a
/// striped entry, in order.
pub fn pieces(entry: &IndexEntry, range: std::ops::Range<u64>) -> Vec<(String, u64, u64)> {
    let Layout::Striped { stripe, segments } = &entry.layout else {
        return Vec::new();
    };
    let stripe = (*stripe).max(1);
    let mut out = Vec::new();
    let mut base = 0u64;
    for seg in segments {
        let (s, e) = (range.start.max(base), range.end.min(base + seg.size));
        let mut at = s;
        while at < e {
            let within = at - base;
            let n = (within / stripe) as u32;
            let off = within % stripe;
            let len = (stripe - off).min(e - at);
            out.push((seg.tails.object(n), off, len));
            at += len;
        }
        base += seg.size;
    }
    out
}

/// All of `body`, which must be `len` bytes, calling `seen` on each chunk.
async fn read_all<S, E>(
    mut body: S,
    len: u64,
    seen: &mut (dyn FnMut(&[u8]) + Send),
) -> Result<Bytes, S3Error>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let mut buf = BytesMut::with_capacity(len as usize);
    while let Some(c) = body.next().await {
        let c = c.map_err(|e| s3_error!(IncompleteBody, "reading the body: {e}"))?;
        if (buf.len() + c.len()) as u64 > len {
            return Err(s3_error!(
                IncompleteBody,
                "more than the {len} bytes announced"
            ));
        }
        seen(&c);
        buf.extend_from_slice(&c);
    }
    if buf.len() as u64 != len {
        return Err(s3_error!(
            IncompleteBody,
            "{} of the {len} bytes announced",
            buf.len()
        ));
    }
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn striped(stripe: u64, sizes: &[u64]) -> IndexEntry {
        let segments = sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| Segment {
                size,
                tails: Tails {
                    prefix: format!("p{i}"),
                    count: size.div_ceil(stripe) as u32,
                },
                checksums: Default::default(),
            })
            .collect();
        IndexEntry {
            size: sizes.iter().sum(),
            etag: String::new(),
            mtime_ms: 0,
            owner: String::new(),
            layout: Layout::Striped { stripe, segments },
            content_type: None,
            meta: BTreeMap::new(),
            headers: BTreeMap::new(),
            checksums: BTreeMap::new(),
            acl: None,
            grants: None,
            parts: 0,
            tags: Default::default(),
            version_id: None,
            vseq: 0,
            delete_marker: false,
            checksum_type: None,
            retention: None,
            legal_hold: false,
        }
    }

    #[test]
    fn a_range_maps_to_the_data_objects_that_hold_it() {
        let e = striped(4, &[10]);
        assert_eq!(
            pieces(&e, 0..10),
            vec![
                ("p0.0".into(), 0, 4),
                ("p0.1".into(), 0, 4),
                ("p0.2".into(), 0, 2)
            ]
        );
        assert_eq!(
            pieces(&e, 3..6),
            vec![("p0.0".into(), 3, 1), ("p0.1".into(), 0, 2)]
        );
        // Across segments (a multipart object), each striped from its start.
        let m = striped(4, &[6, 5]);
        assert_eq!(
            pieces(&m, 5..8),
            vec![("p0.1".into(), 1, 1), ("p1.0".into(), 0, 2)]
        );
        assert!(pieces(&m, 4..4).is_empty());
        let total: u64 = pieces(&m, 0..11).iter().map(|p| p.2).sum();
        assert_eq!(total, 11);
    }
}
