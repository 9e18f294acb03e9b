//! Multipart uploads: an upload's record and its parts' records live in
//! the shard of the object's key, each part's data in its own data
//! objects under a fresh tag (a part uploaded again replaces the record,
//! and the old data goes to the garbage list). Completing names the
//! parts' data objects, where they were written, in the object's entry:
//! nothing is copied.
//!
//! It must never complete with a part other than the one the client
//! named (the `s3.complete` call checks each segment against its part's
//! record in the same transaction), and never leave an upload's data
//! without a record that leads the collector to it.

use crate::bucket::BucketRecord;
use crate::object::Written;
use crate::{internal, names, now_ms, Gateway};
use bytes::Bytes;
use futures::Stream;
use loligo_client::ClientError;
use loligo_types::ops::OpError;
use loligo_types::s3::{
    part_key, part_prefix, upload_key, Abort, Complete, Condition, IndexEntry, Layout, Part,
    PutPart, Segment, Upload, VersionedComplete, PARTS_MAX, S3_BUCKET_GONE, S3_INVALID_PART,
    S3_LOCKED, S3_NO_SUCH_UPLOAD, S3_PENDING_GONE, S3_PRECONDITION, UPLOAD,
};
use s3s::crypto::Checksum as _;
use s3s::{s3_error, S3Error, S3Result};
use std::collections::BTreeMap;

/// The smallest part but the last (S3's 5 MiB).
pub const PART_MIN: u64 = 5 << 20;

/// An S3 error for a refused multipart class call.
fn refusal(e: ClientError, bucket: &str, key: &str, id: &str) -> S3Error {
    match e {
        ClientError::Op(OpError::MethodRefused { code, message, .. }) => match code {
            S3_NO_SUCH_UPLOAD => s3_error!(NoSuchUpload, "no upload {id} of '{key}'"),
            S3_INVALID_PART => s3_error!(InvalidPart, "{message}"),
            S3_PRECONDITION => s3_error!(PreconditionFailed, "{message}"),
            S3_BUCKET_GONE => s3_error!(NoSuchBucket, "bucket '{bucket}' was deleted"),
            S3_LOCKED => s3_error!(AccessDenied, "{message}"),
            S3_PENDING_GONE => s3_error!(
                InternalError,
                "the part took too long and was collected: send it again"
            ),
            _ => s3_error!(InternalError, "{message}"),
        },
        e => internal(e),
    }
}

/// Refused unless `id` is an upload id this gateway makes (32 hex
/// digits): records are keyed by it, so nothing else may pass.
fn check_upload_id(id: &str) -> S3Result<()> {
    match id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        true => Ok(()),
        false => Err(s3_error!(NoSuchUpload, "'{id}' is not an upload id")),
    }
}

/// One upload in progress, as listings show it.
#[derive(Clone, Debug)]
pub struct UploadInfo {
    pub key: String,
    pub id: String,
    pub upload: Upload,
}

/// The ETag of a multipart object: the MD5 of its parts' MD5s, and the
/// part count.
/// A part a completion names: its number, ETag, and checksums (by key,
/// `sha256`) as the request gives them.
#[derive(Clone, Debug, Default)]
pub struct NamedPart {
    pub number: u32,
    pub etag: String,
    pub checksums: BTreeMap<String, String>,
}

/// The checksum of an upload made an object from the parts `named` (as
/// uploaded) and `asked` (as the completion names them), and how it was
/// made: none unless the upload was made with an algorithm; then every
/// part's checksum the completion names is the one it was uploaded
/// with, and the checksum the request gives (if it gives one) is the
/// one computed.
fn object_checksum(
    upload: &Upload,
    named: &[(u32, &Part)],
    asked: &[NamedPart],
    whole: &BTreeMap<String, String>,
) -> S3Result<(BTreeMap<String, String>, Option<String>)> {
    use crate::checksum::{composite, full_object, Algorithm};
    let Some(name) = &upload.checksum_algorithm else {
        return Ok((BTreeMap::new(), None));
    };
    let alg = (Algorithm::parse(name))
        .ok_or_else(|| s3_error!(InternalError, "the upload's algorithm {name} is unknown"))?;
    let k = alg.key();
    let mut sums = Vec::with_capacity(named.len());
    for ((n, p), a) in named.iter().zip(asked) {
        match (p.checksums.get(k), a.checksums.get(k)) {
            (Some(have), given) if given.is_none_or(|g| g == have) => {
                sums.push((have.as_str(), p.size))
            }
            _ => {
                return Err(s3_error!(
                    BadDigest,
                    "part {n}'s {name} checksum is not the one it was uploaded with"
                ))
            }
        }
    }
    let ty = upload.checksum_type.as_deref().unwrap_or("COMPOSITE");
    let value = match ty {
        "FULL_OBJECT" => full_object(alg, &sums),
        _ => composite(alg, &sums.iter().map(|(s, _)| *s).collect::<Vec<_>>()),
    }
    .map_err(|m| s3_error!(InvalidRequest, "{m}"))?;
    if whole.get(k).is_some_and(|g| *g != value) {
        return Err(s3_error!(
            BadDigest,
            "the object's {name} checksum is not {value}"
        ));
    }
    Ok((
        BTreeMap::from([(k.to_string(), value)]),
        Some(ty.to_string()),
    ))
}

pub fn multipart_etag(part_etags: &[&str]) -> Result<String, String> {
    let mut md5 = s3s::crypto::Md5::default();
    for e in part_etags {
        let raw = (0..e.len())
            .step_by(2)
            .map(|i| e.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
            .collect::<Option<Vec<u8>>>()
            .filter(|r| r.len() == 16)
            .ok_or_else(|| format!("'{e}' is not a part's ETag"))?;
        md5.update(&raw);
    }
    Ok(format!(
        "{}-{}",
        names::hex(&md5.finalize()),
        part_etags.len()
    ))
}

impl Gateway {
    /// Start an upload of `key`: its id.
    pub async fn create_upload(
        &self,
        b: &BucketRecord,
        key: &str,
        upload: &Upload,
    ) -> S3Result<String> {
        crate::names::check_object_key(key).map_err(|m| s3_error!(KeyTooLongError, "{m}"))?;
        let id = names::new_tag().map_err(|m| s3_error!(InternalError, "{m}"))?;
        let value = serde_json::to_vec(upload).map_err(|e| s3_error!(InternalError, "{e}"))?;
        (self
            .index()
            .omap_set(&b.shard_object(key), vec![(upload_key(key, &id), value)]))
        .await
        .map_err(internal)?;
        Ok(id)
    }

    /// Upload `id` of `key`, or `NoSuchUpload`.
    pub async fn upload(&self, b: &BucketRecord, key: &str, id: &str) -> S3Result<Upload> {
        check_upload_id(id)?;
        let k = upload_key(key, id);
        let got = match self
            .index()
            .omap_get(&b.shard_object(key), vec![k.clone()])
            .await
        {
            Ok(mut g) => g.remove(&k),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(internal(e)),
        };
        let v = got.ok_or_else(|| s3_error!(NoSuchUpload, "no upload {id} of '{key}'"))?;
        serde_json::from_slice(&v).map_err(|e| s3_error!(InternalError, "upload record: {e}"))
    }

    /// Write part data (`len` bytes of `body`) for upload `id` of `key`:
    /// always in data objects, with a pending record first.
    pub async fn write_part<S, E>(
        &self,
        b: &BucketRecord,
        key: &str,
        number: i32,
        body: S,
        len: u64,
        seen: &mut (dyn FnMut(&[u8]) + Send),
    ) -> S3Result<Written>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        if !(1..=PARTS_MAX as i32).contains(&number) {
            return Err(s3_error!(
                InvalidArgument,
                "part numbers are 1 to {PARTS_MAX}"
            ));
        }
        self.write_striped(b, key, body, len, seen).await
    }

    /// Keep `part` as part `number` of upload `id` (its data `written`).
    pub async fn commit_part(
        &self,
        b: &BucketRecord,
        key: &str,
        id: &str,
        number: u32,
        part: &Part,
        written: Written,
    ) -> S3Result<()> {
        let Written::Striped { tag, segment } = written else {
            return Err(s3_error!(InternalError, "a part's data is always striped"));
        };
        let p = PutPart {
            key: key.to_string(),
            upload_id: id.to_string(),
            number,
            part: serde_json::to_vec(part).map_err(|e| s3_error!(InternalError, "{e}"))?,
            pending: tag.clone(),
            now_ms: now_ms(),
        };
        let input = postcard::to_stdvec(&p).map_err(|e| s3_error!(InternalError, "{e}"))?;
        let shard = b.shard_object(key);
        match self.index().exec(&shard, "s3", "part", input).await {
            Ok(_) => Ok(()),
            Err(e) => {
                self.give_up(&shard, &tag, &segment.tails, &e).await;
                Err(refusal(e, &b.name, key, id))
            }
        }
    }

    /// The parts of upload `id` after number `after`, at most `max`, and
    /// whether there are more.
    pub async fn list_parts(
        &self,
        b: &BucketRecord,
        key: &str,
        id: &str,
        after: u32,
        max: usize,
    ) -> S3Result<(Vec<(u32, Part)>, bool)> {
        self.upload(b, key, id).await?;
        self.parts_after(b, key, id, after, max).await
    }

    /// [`Gateway::list_parts`] of an upload known to exist.
    async fn parts_after(
        &self,
        b: &BucketRecord,
        key: &str,
        id: &str,
        after: u32,
        max: usize,
    ) -> S3Result<(Vec<(u32, Part)>, bool)> {
        let prefix = part_prefix(id);
        let start = part_key(id, after.saturating_add(1));
        let limit = (max + 1).min(PARTS_MAX as usize + 1) as u32;
        let got = match self
            .index()
            .omap_list(&b.shard_object(key), &start, limit)
            .await
        {
            Ok(g) => g,
            Err(e) if e.is_not_found() => Vec::new(),
            Err(e) => return Err(internal(e)),
        };
        let mut out = Vec::new();
        for (k, v) in got.into_iter().take_while(|(k, _)| k.starts_with(&prefix)) {
            let n = std::str::from_utf8(&k[prefix.len()..])
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| s3_error!(InternalError, "a part key without a number"))?;
            let p: Part = serde_json::from_slice(&v)
                .map_err(|e| s3_error!(InternalError, "part record: {e}"))?;
            out.push((n, p));
        }
        let more = out.len() > max;
        out.truncate(max);
        Ok((out, more))
    }

    /// Make upload `id` object `key` from `parts`, which must be in
    /// ascending order, each uploaded, each but the last at least 5 MiB;
    /// `whole`: the object's checksums as the request gives them.
    pub async fn complete_upload(
        &self,
        b: &BucketRecord,
        key: &str,
        id: &str,
        parts: &[NamedPart],
        whole: &BTreeMap<String, String>,
        condition: Condition,
    ) -> S3Result<IndexEntry> {
        let upload = self.upload(b, key, id).await?;
        if parts.is_empty() {
            return Err(s3_error!(
                MalformedXML,
                "a completion names at least one part"
            ));
        }
        if parts.windows(2).any(|w| w[0].number >= w[1].number) {
            return Err(s3_error!(
                InvalidPartOrder,
                "parts are listed in ascending order"
            ));
        }
        let (have, _) = self.parts_after(b, key, id, 0, PARTS_MAX as usize).await?;
        let have: std::collections::BTreeMap<u32, Part> = have.into_iter().collect();
        // Every part named must be the one uploaded, before any size is
        // judged.
        let named = (parts.iter())
            .map(|np| {
                let (n, etag) = (np.number, &np.etag);
                (have.get(&n))
                    .filter(|p| p.etag == etag.trim_matches('"'))
                    .map(|p| (n, p))
                    .ok_or_else(|| {
                        s3_error!(InvalidPart, "part {n} was not uploaded with ETag {etag}")
                    })
            })
            .collect::<S3Result<Vec<_>>>()?;
        let mut segments = Vec::with_capacity(parts.len());
        let mut etags = Vec::with_capacity(parts.len());
        for (i, &(n, p)) in named.iter().enumerate() {
            if i + 1 < parts.len() && p.size < PART_MIN {
                return Err(s3_error!(
                    EntityTooSmall,
                    "part {n} is {} bytes: each part but the last is at least 5 MiB",
                    p.size
                ));
            }
            segments.push(Segment {
                size: p.size,
                tails: p.tails.clone(),
                checksums: p.checksums.clone(),
            });
            etags.push(p.etag.as_str());
        }
        let (checksums, checksum_type) = object_checksum(&upload, &named, parts, whole)?;
        let mut entry = IndexEntry {
            size: segments.iter().map(|s| s.size).sum(),
            etag: multipart_etag(&etags).map_err(|m| s3_error!(InternalError, "{m}"))?,
            mtime_ms: now_ms(),
            owner: upload.owner,
            layout: Layout::Striped {
                stripe: crate::STRIPE,
                segments,
            },
            content_type: upload.content_type,
            meta: upload.meta,
            headers: upload.headers,
            checksums,
            acl: upload.acl,
            grants: upload.grants,
            parts: parts.len() as u32,
            tags: upload.tags,
            version_id: None,
            vseq: 0,
            delete_marker: false,
            checksum_type,
            retention: upload.retention,
            legal_hold: upload.legal_hold,
        };
        let c = Complete {
            key: key.to_string(),
            upload_id: id.to_string(),
            entry: serde_json::to_vec(&entry).map_err(|e| s3_error!(InternalError, "{e}"))?,
            parts: parts.iter().map(|p| p.number).collect(),
            condition,
            now_ms: now_ms(),
        };
        let versioned = crate::object::version_tag(b)?;
        let (method, input) = match versioned.clone() {
            None => ("complete", postcard::to_stdvec(&c)),
            Some(tag) => (
                "vcomplete",
                postcard::to_stdvec(&VersionedComplete { complete: c, tag }),
            ),
        };
        let input = input.map_err(|e| s3_error!(InternalError, "{e}"))?;
        match (self.index())
            .exec(&b.shard_object(key), "s3", method, input)
            .await
        {
            Ok(out) => {
                if versioned.is_some() {
                    entry.version_id = crate::object::version_of_output(&out)?;
                }
                Ok(entry)
            }
            Err(e) => Err(refusal(e, &b.name, key, id)),
        }
    }

    /// Drop upload `id` of `key`; its parts' data goes to the collector.
    pub async fn abort_upload(&self, b: &BucketRecord, key: &str, id: &str) -> S3Result<()> {
        check_upload_id(id)?;
        let a = Abort {
            key: key.to_string(),
            upload_id: id.to_string(),
            now_ms: now_ms(),
        };
        let input = postcard::to_stdvec(&a).map_err(|e| s3_error!(InternalError, "{e}"))?;
        match self
            .index()
            .exec(&b.shard_object(key), "s3", "abort", input)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Err(s3_error!(NoSuchUpload, "no upload {id}")),
            Err(e) => Err(refusal(e, &b.name, key, id)),
        }
    }

    /// The uploads in progress of bucket `b` with keys starting `prefix`,
    /// in (key, id) order, after (`key_marker`, `id_marker`), at most
    /// `max`; and whether there are more. Each shard is read from the
    /// marker on and for at most `max + 1` uploads (enough to merge).
    pub async fn list_uploads(
        &self,
        b: &BucketRecord,
        prefix: &str,
        marker: Option<(&str, &str)>,
        max: usize,
    ) -> S3Result<(Vec<UploadInfo>, bool)> {
        let mut all = Vec::new();
        let mut from = upload_key(prefix, "");
        from.pop();
        if let Some((k, id)) = marker {
            // The first record after the marker's, if that is further on.
            let mut after = upload_key(k, id);
            after.push(0);
            from = from.max(after);
        }
        let per_shard = max.saturating_add(1);
        for shard in b.shard_objects() {
            let mut start = from.clone();
            let mut taken = 0;
            while taken < per_shard {
                let limit = (per_shard - taken).min(1000);
                let got = match self.index().omap_list(&shard, &start, limit as u32).await {
                    Ok(g) => g,
                    Err(e) if e.is_not_found() => Vec::new(),
                    Err(e) => return Err(internal(e)),
                };
                let full = got.len() == limit;
                let mut stop = !full;
                for (k, v) in got {
                    if k.first() != Some(&UPLOAD) {
                        stop = true;
                        break;
                    }
                    let rest = &k[1..];
                    let Some(z) = rest.iter().position(|&c| c == 0) else {
                        continue;
                    };
                    let key = String::from_utf8_lossy(&rest[..z]).into_owned();
                    if !key.starts_with(prefix) {
                        stop = true;
                        break;
                    }
                    let id = String::from_utf8_lossy(&rest[z + 1..]).into_owned();
                    let upload: Upload = serde_json::from_slice(&v)
                        .map_err(|e| s3_error!(InternalError, "upload record: {e}"))?;
                    start = k;
                    start.push(0);
                    all.push(UploadInfo { key, id, upload });
                    taken += 1;
                    if taken == per_shard {
                        break;
                    }
                }
                if stop {
                    break;
                }
            }
        }
        all.sort_by(|a, b| (&a.key, &a.id).cmp(&(&b.key, &b.id)));
        if let Some((k, id)) = marker {
            all.retain(|u| (u.key.as_str(), u.id.as_str()) > (k, id));
        }
        let more = all.len() > max;
        all.truncate(max);
        Ok((all, more))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multipart_etag_is_the_md5_of_the_parts_md5s() {
        // Two parts "a" and "b": MD5(MD5("a") || MD5("b")), then "-2".
        let a = names::hex(&s3s::crypto::Md5::checksum(b"a"));
        let b = names::hex(&s3s::crypto::Md5::checksum(b"b"));
        let mut both = s3s::crypto::Md5::checksum(b"a").to_vec();
        both.extend_from_slice(&s3s::crypto::Md5::checksum(b"b"));
        let want = format!("{}-2", names::hex(&s3s::crypto::Md5::checksum(&both)));
        assert_eq!(multipart_etag(&[&a, &b]).unwrap(), want);
        assert!(multipart_etag(&["zz"]).is_err());
    }
}
