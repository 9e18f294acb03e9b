//! The S3 API on a [`Gateway`]: each operation's request checked (who
//! asks, whether they may, S3's limits and conditions), carried out by
//! the gateway, and answered in S3's terms. `s3s` parses requests, checks
//! signatures and writes responses and errors as S3's XML.
//!
//! It must never answer an operation it does not carry out: what is not
//! built yet is refused with `NotImplemented` (s3s's default).

use crate::bucket::BucketRecord;
use crate::list::{Page, Query, MAX_KEYS};
use crate::object::Written;
use crate::Gateway;
use base64::Engine as _;
use loligo_types::s3::{Condition, IndexEntry};
use s3s::crypto::Checksum as _;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result, S3};
use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

/// Stored headers beside content-type, by their lower-case names.
const CONTENT_ENCODING: &str = "content-encoding";
const CONTENT_DISPOSITION: &str = "content-disposition";
const CONTENT_LANGUAGE: &str = "content-language";
const CACHE_CONTROL: &str = "cache-control";

mod multipart;

/// The length of a request's body: its Content-Length, or for an
/// `aws-chunked` body sent without one (boto3's trailing checksums over
/// HTTPS) its `x-amz-decoded-content-length`.
fn body_length(headers: &http::HeaderMap, given: Option<i64>, has_body: bool) -> S3Result<u64> {
    if let Some(n) = given.filter(|&n| n >= 0) {
        return Ok(n as u64);
    }
    if let Some(v) = headers.get("x-amz-decoded-content-length") {
        return (v.to_str().ok().and_then(|s| s.parse().ok())).ok_or_else(|| {
            s3_error!(
                InvalidArgument,
                "x-amz-decoded-content-length is not a number"
            )
        });
    }
    match has_body {
        false => Ok(0),
        true => Err(s3_error!(MissingContentLength)),
    }
}

/// The content headers a PUT stores, by their lower-case names
/// (`aws-chunked`, a transfer detail, is not kept as an encoding).
fn content_headers(
    encoding: Option<String>,
    disposition: Option<String>,
    language: Option<String>,
    cache_control: Option<String>,
) -> BTreeMap<String, String> {
    let encoding = encoding.map(|e| {
        (e.split(','))
            .map(str::trim)
            .filter(|t| !t.eq_ignore_ascii_case("aws-chunked"))
            .collect::<Vec<_>>()
            .join(",")
    });
    [
        (CONTENT_ENCODING, encoding),
        (CONTENT_DISPOSITION, disposition),
        (CONTENT_LANGUAGE, language),
        (CACHE_CONTROL, cache_control),
    ]
    .into_iter()
    .filter_map(|(n, v)| Some((n.to_string(), v.filter(|v| !v.is_empty())?)))
    .collect()
}

fn timestamp(ms: u64) -> Timestamp {
    Timestamp::from(UNIX_EPOCH + Duration::from_millis(ms))
}

/// Seconds since the Unix epoch of an HTTP date.
fn secs_of(t: &Timestamp) -> i64 {
    time::OffsetDateTime::from(t.clone()).unix_timestamp()
}

fn owner(uid: &str) -> Owner {
    Owner {
        display_name: Some(uid.to_string()),
        id: Some(uid.to_string()),
    }
}

fn etag(e: &IndexEntry) -> ETag {
    ETag::Strong(e.etag.clone())
}

/// Whether an `If-Match`/`If-None-Match` condition names `e`.
fn matches(c: &ETagCondition, e: &IndexEntry) -> bool {
    match c {
        ETagCondition::Any => true,
        ETagCondition::ETag(t) => t.value() == e.etag,
    }
}

/// The `x-amz-checksum-*` values a request input carries (PutObject and
/// UploadPart have the same fields), moved out of it.
macro_rules! checksums_of {
    ($i:expr) => {
        Checksum {
            checksum_crc32: $i.checksum_crc32,
            checksum_crc32c: $i.checksum_crc32c,
            checksum_sha1: $i.checksum_sha1,
            checksum_sha256: $i.checksum_sha256,
            checksum_crc64nvme: $i.checksum_crc64nvme,
            ..Default::default()
        }
    };
}
pub(super) use checksums_of;

/// The `x-amz-copy-source-if-*` conditions of a copy.
pub(super) struct CopyConditions<'a> {
    pub if_match: Option<&'a ETagCondition>,
    pub if_none_match: Option<&'a ETagCondition>,
    pub if_modified_since: Option<&'a Timestamp>,
    pub if_unmodified_since: Option<&'a Timestamp>,
}

/// S3's read conditions (RFC 9110's order): `If-Match` and
/// `If-Unmodified-Since` fail with 412, `If-None-Match` and
/// `If-Modified-Since` with 304.
fn check_read_conditions(
    e: &IndexEntry,
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
    if_modified_since: Option<&Timestamp>,
    if_unmodified_since: Option<&Timestamp>,
) -> S3Result<()> {
    let mtime = (e.mtime_ms / 1000) as i64;
    match if_match {
        Some(c) if !matches(c, e) => return Err(s3_error!(PreconditionFailed)),
        Some(_) => {}
        None => {
            if if_unmodified_since.is_some_and(|t| mtime > secs_of(t)) {
                return Err(s3_error!(PreconditionFailed));
            }
        }
    }
    match if_none_match {
        Some(c) if matches(c, e) => Err(not_modified(e)),
        Some(_) => Ok(()),
        None if if_modified_since.is_some_and(|t| mtime <= secs_of(t)) => Err(not_modified(e)),
        None => Ok(()),
    }
}

/// S3's 304: "Not Modified", with the object's ETag and date (clients
/// keep their copy by them).
fn not_modified(e: &IndexEntry) -> s3s::S3Error {
    let mut err = s3s::S3Error::with_message(s3s::S3ErrorCode::NotModified, "Not Modified");
    let mut h = http::HeaderMap::new();
    if let Ok(v) = http::HeaderValue::from_str(&format!("\"{}\"", e.etag)) {
        h.insert(http::header::ETAG, v);
    }
    err.set_headers(h);
    err
}

/// Refused: reading one part of a multipart object, or a version
/// (objects have one, `null`).
fn refuse_part_and_version(part: Option<i32>, version: Option<&str>) -> S3Result<()> {
    if part.is_some() {
        return Err(s3_error!(
            NotImplemented,
            "reading one part (partNumber): read its byte range instead"
        ));
    }
    match version {
        Some(v) if v != "null" => Err(s3_error!(
            NoSuchVersion,
            "this gateway keeps one version of an object, 'null'"
        )),
        _ => Ok(()),
    }
}

/// Refused: what a PUT asks for that the gateway does not do (rather
/// than store the object without it).
fn refuse_unsupported_put(
    sse: bool,
    sse_customer: bool,
    kms: bool,
    tagging: bool,
    lock: bool,
) -> S3Result<()> {
    let what = [
        (sse || kms, "server-side encryption"),
        (sse_customer, "server-side encryption with a customer key"),
        (tagging, "object tagging"),
        (lock, "object lock"),
    ];
    match what.iter().find(|(asked, _)| *asked) {
        Some((_, name)) => Err(s3_error!(NotImplemented, "{name} is not supported yet")),
        None => Ok(()),
    }
}

/// The write condition of a PUT's `If-Match` / `If-None-Match`.
fn write_condition(
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
) -> S3Result<Condition> {
    let if_match = if_match.map(|c| match c {
        ETagCondition::Any => "*".to_string(),
        ETagCondition::ETag(t) => t.value().to_string(),
    });
    let if_none_match = match if_none_match {
        None => false,
        Some(ETagCondition::Any) => true,
        Some(ETagCondition::ETag(_)) => {
            return Err(s3_error!(
                NotImplemented,
                "If-None-Match on a write takes only '*'"
            ))
        }
    };
    Ok(Condition {
        if_match,
        if_none_match,
    })
}

/// The digests of an upload, computed as its body streams by.
#[derive(Default)]
struct Digests {
    md5: s3s::crypto::Md5,
    sums: s3s::checksum::ChecksumHasher,
}

/// What a PUT names beside its data.
struct PutHeaders {
    content_type: Option<String>,
    meta: Option<Metadata>,
    headers: BTreeMap<String, String>,
    acl: Option<String>,
    content_md5: Option<String>,
    /// Checksums the request carries (its headers), by algorithm.
    sums: Checksum,
    algorithm: Option<ChecksumAlgorithm>,
}

impl Digests {
    /// Hashers for the checksums `h` asks for.
    fn for_put(h: &PutHeaders) -> S3Result<Digests> {
        let mut d = Digests::default();
        let s = &h.sums;
        let mut want = |alg: &str| -> S3Result<()> {
            match alg {
                ChecksumAlgorithm::CRC32 => d.sums.crc32 = Some(Default::default()),
                ChecksumAlgorithm::CRC32C => d.sums.crc32c = Some(Default::default()),
                ChecksumAlgorithm::SHA1 => d.sums.sha1 = Some(Default::default()),
                ChecksumAlgorithm::SHA256 => d.sums.sha256 = Some(Default::default()),
                ChecksumAlgorithm::CRC64NVME => d.sums.crc64nvme = Some(Default::default()),
                other => {
                    return Err(s3_error!(
                        InvalidArgument,
                        "unknown checksum algorithm {other}"
                    ))
                }
            }
            Ok(())
        };
        for (given, alg) in [
            (s.checksum_crc32.is_some(), ChecksumAlgorithm::CRC32),
            (s.checksum_crc32c.is_some(), ChecksumAlgorithm::CRC32C),
            (s.checksum_sha1.is_some(), ChecksumAlgorithm::SHA1),
            (s.checksum_sha256.is_some(), ChecksumAlgorithm::SHA256),
            (s.checksum_crc64nvme.is_some(), ChecksumAlgorithm::CRC64NVME),
        ] {
            if given {
                want(alg)?;
            }
        }
        if let Some(a) = &h.algorithm {
            want(a.as_str())?;
        }
        Ok(d)
    }

    fn update(&mut self, b: &[u8]) {
        self.md5.update(b);
        self.sums.update(b);
    }

    /// The ETag, and the checksums to keep once every given one (in the
    /// headers or the trailer) matched.
    fn finish(
        self,
        h: &PutHeaders,
        trailer: Option<&http::HeaderMap>,
    ) -> S3Result<(String, BTreeMap<String, String>)> {
        let md5 = self.md5.finalize();
        if let Some(given) = &h.content_md5 {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(given)
                .map_err(|_| s3_error!(InvalidDigest, "Content-MD5 is not base64"))?;
            if raw.as_slice() != md5.as_slice() {
                return Err(s3_error!(
                    BadDigest,
                    "the Content-MD5 you gave did not match"
                ));
            }
        }
        let got = self.sums.finalize();
        let mut kept = BTreeMap::new();
        let pairs = [
            ("crc32", &h.sums.checksum_crc32, got.checksum_crc32),
            ("crc32c", &h.sums.checksum_crc32c, got.checksum_crc32c),
            ("sha1", &h.sums.checksum_sha1, got.checksum_sha1),
            ("sha256", &h.sums.checksum_sha256, got.checksum_sha256),
            (
                "crc64nvme",
                &h.sums.checksum_crc64nvme,
                got.checksum_crc64nvme,
            ),
        ];
        for (name, given, computed) in pairs {
            let Some(computed) = computed else { continue };
            let header = format!("x-amz-checksum-{name}");
            let from_trailer = trailer
                .and_then(|t| t.get(header.as_str()))
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            match given.clone().or(from_trailer) {
                Some(g) if g != computed => {
                    return Err(s3_error!(
                        BadDigest,
                        "the {name} checksum you gave did not match"
                    ))
                }
                _ => {}
            }
            kept.insert(name.to_string(), computed);
        }
        Ok((crate::names::hex(&md5), kept))
    }
}

/// The checksums of `e` as S3's DTO.
fn sums_of(e: &IndexEntry) -> Checksum {
    let get = |k: &str| e.checksums.get(k).cloned();
    Checksum {
        checksum_crc32: get("crc32"),
        checksum_crc32c: get("crc32c"),
        checksum_sha1: get("sha1"),
        checksum_sha256: get("sha256"),
        checksum_crc64nvme: get("crc64nvme"),
        ..Default::default()
    }
}

/// Stored header `name` of `e`.
fn header(e: &IndexEntry, name: &str) -> Option<String> {
    e.headers.get(name).cloned()
}

fn user_meta(e: &IndexEntry) -> Option<Metadata> {
    (!e.meta.is_empty()).then(|| e.meta.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
}

fn canned_object_acl(acl: Option<&ObjectCannedACL>) -> S3Result<Option<String>> {
    match acl.map(|a| a.as_str()) {
        None => Ok(None),
        Some(a @ (ObjectCannedACL::PRIVATE | ObjectCannedACL::PUBLIC_READ)) => {
            Ok(Some(a.to_string()))
        }
        Some(a) => Err(s3_error!(
            NotImplemented,
            "canned ACL '{a}' (private and public-read are)"
        )),
    }
}

impl Gateway {
    /// The user who signed `req`, or `AccessDenied` for an anonymous one.
    async fn requester<T>(&self, req: &S3Request<T>) -> S3Result<String> {
        match &req.credentials {
            Some(c) => self.secrets().user_of(&c.access_key).await,
            None => Err(s3_error!(AccessDenied, "anonymous requests are not served")),
        }
    }

    /// The user who signed `req`, or `None` for an anonymous read (what
    /// the access check lets through).
    async fn reader<T>(&self, req: &S3Request<T>) -> S3Result<Option<String>> {
        match &req.credentials {
            Some(c) => self.secrets().user_of(&c.access_key).await.map(Some),
            None => Ok(None),
        }
    }

    /// Bucket `name` if `uid` owns it (or, for a read, it is public).
    async fn bucket_for(&self, name: &str, uid: &str, read: bool) -> S3Result<BucketRecord> {
        self.bucket_as(name, Some(uid), read).await
    }

    /// Bucket `name` if `uid` (`None`: anyone) owns it, or, for a read,
    /// it is public.
    async fn bucket_as(&self, name: &str, uid: Option<&str>, read: bool) -> S3Result<BucketRecord> {
        let b = self.bucket(name).await?;
        if uid == Some(b.owner.as_str()) || (read && b.public_read()) {
            return Ok(b);
        }
        Err(s3_error!(
            AccessDenied,
            "bucket '{name}' is not yours to reach"
        ))
    }

    /// The object a copy reads (`uid` must be allowed to read it), with
    /// its bucket and inline data, its conditions met (a condition that
    /// would make a GET answer 304 fails the copy with 412, as S3 does).
    pub(super) async fn copy_source(
        &self,
        uid: &str,
        source: &CopySource,
        c: CopyConditions<'_>,
    ) -> S3Result<(BucketRecord, IndexEntry, bytes::Bytes)> {
        let CopySource::Bucket {
            bucket,
            key,
            version_id,
        } = source
        else {
            return Err(s3_error!(NotImplemented, "copying from an access point"));
        };
        if version_id.as_deref().is_some_and(|v| v != "null") {
            return Err(s3_error!(NoSuchVersion, "this gateway keeps no versions"));
        }
        let b = self.bucket(bucket).await?;
        let (e, inline) = self.readable(&b, key, Some(uid)).await?;
        let met = check_read_conditions(
            &e,
            c.if_match,
            c.if_none_match,
            c.if_modified_since,
            c.if_unmodified_since,
        );
        met.map_err(|e| match e.code() {
            s3s::S3ErrorCode::NotModified => s3_error!(PreconditionFailed),
            _ => e,
        })?;
        Ok((b, e, inline))
    }

    /// `key` of bucket `b` if `uid` (`None`: anonymous) may read it: the
    /// bucket's owner, or anyone on a `public-read` object (a bucket's
    /// `public-read` lets anyone list it, not read its objects, as in
    /// S3). Where the caller may not list the bucket, a missing key is
    /// `AccessDenied` too (as S3 answers without the right to list).
    async fn readable(
        &self,
        b: &BucketRecord,
        key: &str,
        uid: Option<&str>,
    ) -> S3Result<(IndexEntry, bytes::Bytes)> {
        let owner = uid == Some(b.owner.as_str());
        let open = owner || b.public_read();
        match self.entry(b, key).await {
            Ok((e, d)) if owner || e.acl.as_deref() == Some("public-read") => Ok((e, d)),
            Ok(_) => Err(s3_error!(AccessDenied, "'{key}' is not yours to read")),
            Err(e) if !open && e.code() == &s3s::S3ErrorCode::NoSuchKey => Err(s3_error!(
                AccessDenied,
                "bucket '{}' is not yours to read",
                b.name
            )),
            Err(e) => Err(e),
        }
    }

    /// `key`'s entry, or `NoSuchKey` (after making sure the bucket's
    /// record was not stale).
    async fn entry(&self, b: &BucketRecord, key: &str) -> S3Result<(IndexEntry, bytes::Bytes)> {
        if let Some(found) = self.lookup(b, key).await? {
            return Ok(found);
        }
        // A miss refreshes the cached record: a bucket deleted and made
        // again (perhaps by another user) is found by the next request,
        // whose access is then judged on the new record.
        self.bucket_fresh(&b.name).await?;
        Err(s3_error!(NoSuchKey, "'{key}' does not exist"))
    }

    /// Store `body` as `key` with `h`: the new entry.
    #[allow(clippy::too_many_arguments)]
    async fn put(
        &self,
        b: &BucketRecord,
        key: &str,
        uid: &str,
        body: Option<StreamingBlob>,
        len: Option<i64>,
        h: PutHeaders,
        cond: Condition,
        trailer: Option<s3s::TrailingHeaders>,
    ) -> S3Result<IndexEntry> {
        crate::names::check_object_key(key).map_err(|m| s3_error!(KeyTooLongError, "{m}"))?;
        let len = match (len, &body) {
            (Some(n), _) if n >= 0 => n as u64,
            (_, None) => 0,
            _ => return Err(s3_error!(MissingContentLength)),
        };
        let mut d = Digests::for_put(&h)?;
        let mut seen = |c: &[u8]| d.update(c);
        let written = match body {
            Some(s) => self.write_body(b, key, s, len, &mut seen).await?,
            None => {
                let empty = futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>();
                self.write_body(b, key, empty, 0, &mut seen).await?
            }
        };
        let trailer = trailer.and_then(|t| t.take());
        let (etag, checksums) = match d.finish(&h, trailer.as_ref()) {
            Ok(v) => v,
            Err(e) => {
                self.drop_written(b, key, written).await;
                return Err(e);
            }
        };
        let entry = IndexEntry {
            size: len,
            etag,
            mtime_ms: crate::now_ms(),
            owner: uid.to_string(),
            layout: written.layout(),
            content_type: h.content_type,
            meta: h.meta.unwrap_or_default().into_iter().collect(),
            headers: h.headers,
            checksums,
            acl: h.acl,
            parts: 0,
        };
        self.commit(b, key, entry, written, cond).await
    }

    /// Give up data written for an upload that will not commit.
    async fn drop_written(&self, b: &BucketRecord, key: &str, w: Written) {
        if let Written::Striped { tag, .. } = w {
            self.abandon(&b.shard_object(key), &tag).await;
        }
    }

    fn listing_query(
        prefix: Option<String>,
        delimiter: Option<String>,
        after: Option<String>,
        max_keys: Option<i32>,
    ) -> S3Result<Query> {
        let max_keys = match max_keys {
            None => MAX_KEYS,
            Some(n) if n < 0 => return Err(s3_error!(InvalidArgument, "max-keys is negative")),
            Some(n) => (n as usize).min(MAX_KEYS),
        };
        Ok(Query {
            prefix: prefix.unwrap_or_default(),
            delimiter: delimiter.filter(|d| !d.is_empty()),
            after: after.filter(|a| !a.is_empty()),
            max_keys,
        })
    }
}

/// Whether a listing answers with its keys URL-encoded
/// (`encoding-type=url`, which boto3 asks for and decodes).
struct Enc(bool);

impl Enc {
    fn of(t: Option<&EncodingType>) -> Enc {
        Enc(t.is_some_and(|t| t.as_str() == EncodingType::URL))
    }

    /// `s`, encoded if asked: everything but unreserved characters and
    /// '/' as %XX.
    fn s(&self, s: &str) -> String {
        if !self.0 {
            return s.to_string();
        }
        let mut out = String::with_capacity(s.len());
        for b in s.bytes() {
            match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                    out.push(b as char)
                }
                _ => out.push_str(&format!("%{b:02X}")),
            }
        }
        out
    }

    fn opt(&self, s: Option<&str>) -> Option<String> {
        s.map(|s| self.s(s))
    }

    /// The page with its keys and prefixes encoded if asked.
    fn page(&self, mut p: Page) -> Page {
        if self.0 {
            p.entries.iter_mut().for_each(|(k, _)| *k = self.s(k));
            p.prefixes.iter_mut().for_each(|c| *c = self.s(c));
            p.last = self.opt(p.last.as_deref());
        }
        p
    }
}

fn contents(page: &Page, fetch_owner: bool) -> Vec<Object> {
    (page.entries.iter())
        .map(|(k, e)| Object {
            key: Some(k.clone()),
            e_tag: Some(etag(e)),
            last_modified: Some(timestamp(e.mtime_ms)),
            size: Some(e.size as i64),
            owner: fetch_owner.then(|| owner(&e.owner)),
            storage_class: Some(ObjectStorageClass::from_static(
                ObjectStorageClass::STANDARD,
            )),
            ..Default::default()
        })
        .collect()
}

fn prefixes(page: &Page) -> Option<Vec<CommonPrefix>> {
    let v: Vec<CommonPrefix> = (page.prefixes.iter())
        .map(|p| CommonPrefix {
            prefix: Some(p.clone()),
        })
        .collect();
    (!v.is_empty()).then_some(v)
}

/// A v2 continuation token for the key or common prefix `last`.
fn token_of(last: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(last)
}

fn token_key(t: &str) -> S3Result<String> {
    let raw = (base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(t))
        .map_err(|_| s3_error!(InvalidArgument, "not a continuation token of this gateway"))?;
    String::from_utf8(raw).map_err(|_| s3_error!(InvalidArgument, "not a continuation token"))
}

#[async_trait::async_trait]
impl S3 for Gateway {
    async fn list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        let uid = self.requester(&req).await?;
        let mine: Vec<Bucket> = (crate::bucket::list(self.index()).await?.into_iter())
            .filter(|b| b.owner == uid)
            .map(|b| Bucket {
                name: Some(b.name),
                creation_date: Some(timestamp(b.created_ms)),
                bucket_region: Some(self.config().region.clone()),
            })
            .collect();
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(mine),
            owner: Some(owner(&uid)),
            ..Default::default()
        }))
    }

    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        let uid = self.requester(&req).await?;
        let i = &req.input;
        let acl = match i.acl.as_ref().map(|a| a.as_str()) {
            None => None,
            Some(a @ (BucketCannedACL::PRIVATE | BucketCannedACL::PUBLIC_READ)) => {
                Some(a.to_string())
            }
            Some(a) => {
                return Err(s3_error!(
                    NotImplemented,
                    "canned ACL '{a}' (private and public-read are)"
                ))
            }
        };
        let wanted = (i.create_bucket_configuration.as_ref())
            .and_then(|c| c.location_constraint.as_ref())
            .map(|l| l.as_str().to_string());
        if let Some(l) = wanted.filter(|l| !l.is_empty() && *l != self.config().region) {
            return Err(s3_error!(
                InvalidLocationConstraint,
                "this gateway serves region '{}', not '{l}'",
                self.config().region
            ));
        }
        self.create_bucket(&i.bucket, &uid, acl).await?;
        Ok(S3Response::new(CreateBucketOutput {
            location: Some(format!("/{}", i.bucket)),
        }))
    }

    async fn delete_bucket(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        let uid = self.requester(&req).await?;
        let b = self.bucket_for(&req.input.bucket, &uid, false).await?;
        self.delete_bucket(&b).await?;
        Ok(S3Response::new(DeleteBucketOutput {}))
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        let uid = self.reader(&req).await?;
        self.bucket_as(&req.input.bucket, uid.as_deref(), true)
            .await?;
        Ok(S3Response::new(HeadBucketOutput {
            bucket_region: Some(self.config().region.clone()),
            ..Default::default()
        }))
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        let uid = self.requester(&req).await?;
        self.bucket_for(&req.input.bucket, &uid, false).await?;
        Ok(S3Response::new(GetBucketLocationOutput {
            location_constraint: Some(BucketLocationConstraint::from(self.config().region.clone())),
        }))
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let uid = self.requester(&req).await?;
        let trailer = req.trailing_headers.clone();
        let len = body_length(
            &req.headers,
            req.input.content_length,
            req.input.body.is_some(),
        )?;
        let i = req.input;
        refuse_unsupported_put(
            i.server_side_encryption.is_some(),
            i.sse_customer_algorithm.is_some(),
            i.ssekms_key_id.is_some(),
            i.tagging.is_some(),
            i.object_lock_mode.is_some() || i.object_lock_legal_hold_status.is_some(),
        )?;
        let b = self.bucket_for(&i.bucket, &uid, false).await?;
        let cond = write_condition(i.if_match.as_ref(), i.if_none_match.as_ref())?;
        let headers = content_headers(
            i.content_encoding,
            i.content_disposition,
            i.content_language,
            i.cache_control,
        );
        let h = PutHeaders {
            content_type: i.content_type,
            meta: i.metadata,
            headers,
            acl: canned_object_acl(i.acl.as_ref())?,
            content_md5: i.content_md5,
            sums: checksums_of!(i),
            algorithm: i.checksum_algorithm,
        };
        let (body, len) = (i.body, Some(len as i64));
        let e = self
            .put(&b, &i.key, &uid, body, len, h, cond, trailer)
            .await?;
        let s = sums_of(&e);
        Ok(S3Response::new(PutObjectOutput {
            e_tag: Some(etag(&e)),
            checksum_crc32: s.checksum_crc32,
            checksum_crc32c: s.checksum_crc32c,
            checksum_sha1: s.checksum_sha1,
            checksum_sha256: s.checksum_sha256,
            checksum_crc64nvme: s.checksum_crc64nvme,
            ..Default::default()
        }))
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let uid = self.reader(&req).await?;
        let i = &req.input;
        refuse_part_and_version(i.part_number, i.version_id.as_deref())?;
        let b = self.bucket(&i.bucket).await?;
        let (e, inline) = self.readable(&b, &i.key, uid.as_deref()).await?;
        check_read_conditions(
            &e,
            i.if_match.as_ref(),
            i.if_none_match.as_ref(),
            i.if_modified_since.as_ref(),
            i.if_unmodified_since.as_ref(),
        )?;
        let (range, content_range) = match &i.range {
            None => (0..e.size, None),
            Some(r) => {
                let got = r.check(e.size).map_err(|_| {
                    s3_error!(
                        InvalidRange,
                        "the range is outside the object's {} bytes",
                        e.size
                    )
                })?;
                let cr = format!(
                    "bytes {}-{}/{}",
                    got.start,
                    got.end.saturating_sub(1),
                    e.size
                );
                (got, Some(cr))
            }
        };
        let whole = range.start == 0 && range.end == e.size;
        let len = range.end - range.start;
        let body = self.read_range(&e, inline, range);
        let s = if whole {
            sums_of(&e)
        } else {
            Checksum::default()
        };
        Ok(S3Response::new(GetObjectOutput {
            body: Some(StreamingBlob::wrap(body)),
            content_length: Some(len as i64),
            content_range,
            accept_ranges: Some("bytes".into()),
            last_modified: Some(timestamp(e.mtime_ms)),
            e_tag: Some(etag(&e)),
            metadata: user_meta(&e),
            // A presigned link may ask for other response headers.
            content_type: (i.response_content_type.clone()).or_else(|| e.content_type.clone()),
            content_encoding: (i.response_content_encoding.clone())
                .or_else(|| header(&e, CONTENT_ENCODING)),
            content_disposition: (i.response_content_disposition.clone())
                .or_else(|| header(&e, CONTENT_DISPOSITION)),
            content_language: (i.response_content_language.clone())
                .or_else(|| header(&e, CONTENT_LANGUAGE)),
            cache_control: (i.response_cache_control.clone()).or_else(|| header(&e, CACHE_CONTROL)),
            checksum_crc32: s.checksum_crc32,
            checksum_crc32c: s.checksum_crc32c,
            checksum_sha1: s.checksum_sha1,
            checksum_sha256: s.checksum_sha256,
            checksum_crc64nvme: s.checksum_crc64nvme,
            ..Default::default()
        }))
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        let uid = self.reader(&req).await?;
        let i = &req.input;
        refuse_part_and_version(i.part_number, i.version_id.as_deref())?;
        let b = self.bucket(&i.bucket).await?;
        let (e, _) = self.readable(&b, &i.key, uid.as_deref()).await?;
        check_read_conditions(
            &e,
            i.if_match.as_ref(),
            i.if_none_match.as_ref(),
            i.if_modified_since.as_ref(),
            i.if_unmodified_since.as_ref(),
        )?;
        let s = sums_of(&e);
        Ok(S3Response::new(HeadObjectOutput {
            content_length: Some(e.size as i64),
            accept_ranges: Some("bytes".into()),
            last_modified: Some(timestamp(e.mtime_ms)),
            e_tag: Some(etag(&e)),
            metadata: user_meta(&e),
            content_type: e.content_type.clone(),
            content_encoding: header(&e, CONTENT_ENCODING),
            content_disposition: header(&e, CONTENT_DISPOSITION),
            content_language: header(&e, CONTENT_LANGUAGE),
            cache_control: header(&e, CACHE_CONTROL),
            checksum_crc32: s.checksum_crc32,
            checksum_crc32c: s.checksum_crc32c,
            checksum_sha1: s.checksum_sha1,
            checksum_sha256: s.checksum_sha256,
            checksum_crc64nvme: s.checksum_crc64nvme,
            ..Default::default()
        }))
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let uid = self.requester(&req).await?;
        let i = &req.input;
        let b = self.bucket_for(&i.bucket, &uid, false).await?;
        let cond = write_condition(i.if_match.as_ref(), None)?;
        self.remove_object(&b, &i.key, cond).await?;
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let uid = self.requester(&req).await?;
        let i = &req.input;
        let b = self.bucket_for(&i.bucket, &uid, false).await?;
        if i.delete.objects.len() > 1000 {
            return Err(s3_error!(
                MalformedXML,
                "at most 1000 keys per DeleteObjects"
            ));
        }
        let quiet = i.delete.quiet.unwrap_or(false);
        let mut deleted = Vec::new();
        let mut errors = Vec::new();
        for o in &i.delete.objects {
            match self.remove_object(&b, &o.key, Condition::default()).await {
                Ok(_) if quiet => {}
                Ok(_) => deleted.push(DeletedObject {
                    key: Some(o.key.clone()),
                    ..Default::default()
                }),
                Err(e) => errors.push(Error {
                    code: Some(e.code().as_str().to_string()),
                    key: Some(o.key.clone()),
                    message: e.message().map(str::to_string),
                    version_id: None,
                }),
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: Some(deleted),
            errors: (!errors.is_empty()).then_some(errors),
            ..Default::default()
        }))
    }

    async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        let uid = self.requester(&req).await?;
        let i = req.input;
        let conditions = CopyConditions {
            if_match: i.copy_source_if_match.as_ref(),
            if_none_match: i.copy_source_if_none_match.as_ref(),
            if_modified_since: i.copy_source_if_modified_since.as_ref(),
            if_unmodified_since: i.copy_source_if_unmodified_since.as_ref(),
        };
        let (_, src, inline) = self.copy_source(&uid, &i.copy_source, conditions).await?;
        let onto_itself = matches!(&i.copy_source, CopySource::Bucket { bucket, key, .. }
            if bucket.as_ref() == i.bucket && key.as_ref() == i.key);
        let dst_b = self.bucket_for(&i.bucket, &uid, false).await?;
        let replace = i.metadata_directive.as_ref().map(|d| d.as_str()) == Some("REPLACE");
        if !replace && onto_itself {
            return Err(s3_error!(
                InvalidRequest,
                "copying an object onto itself changes nothing: give MetadataDirective REPLACE"
            ));
        }
        let (content_type, meta, headers) = if replace {
            let headers = content_headers(
                i.content_encoding,
                i.content_disposition,
                i.content_language,
                i.cache_control,
            );
            (i.content_type, i.metadata, headers)
        } else {
            (
                src.content_type.clone(),
                user_meta(&src),
                src.headers.clone(),
            )
        };
        let h = PutHeaders {
            content_type,
            meta,
            headers,
            acl: canned_object_acl(i.acl.as_ref())?,
            content_md5: None,
            sums: Checksum::default(),
            algorithm: None,
        };
        let body = StreamingBlob::wrap(self.read_range(&src, inline, 0..src.size));
        let e = (self.put(
            &dst_b,
            &i.key,
            &uid,
            Some(body),
            Some(src.size as i64),
            h,
            Condition::default(),
            None,
        ))
        .await?;
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(CopyObjectResult {
                e_tag: Some(etag(&e)),
                last_modified: Some(timestamp(e.mtime_ms)),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        let uid = self.reader(&req).await?;
        let i = req.input;
        let b = self.bucket_as(&i.bucket, uid.as_deref(), true).await?;
        let q = Gateway::listing_query(
            i.prefix.clone(),
            i.delimiter.clone(),
            i.marker.clone(),
            i.max_keys,
        )?;
        let enc = Enc::of(i.encoding_type.as_ref());
        let page = enc.page(self.list(&b, &q).await?);
        let next_marker = (page.truncated && q.delimiter.is_some())
            .then(|| page.last.clone())
            .flatten();
        Ok(S3Response::new(ListObjectsOutput {
            name: Some(i.bucket),
            prefix: Some(enc.s(&q.prefix)),
            marker: Some(enc.s(i.marker.as_deref().unwrap_or_default())),
            max_keys: Some(q.max_keys as i32),
            delimiter: enc.opt(q.delimiter.as_deref()),
            is_truncated: Some(page.truncated),
            next_marker,
            contents: Some(contents(&page, true)),
            common_prefixes: prefixes(&page),
            encoding_type: i.encoding_type,
            ..Default::default()
        }))
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        let uid = self.reader(&req).await?;
        let i = req.input;
        let b = self.bucket_as(&i.bucket, uid.as_deref(), true).await?;
        let after = match &i.continuation_token {
            Some(t) => Some(token_key(t)?),
            None => i.start_after.clone(),
        };
        let q = Gateway::listing_query(i.prefix.clone(), i.delimiter.clone(), after, i.max_keys)?;
        let page = self.list(&b, &q).await?;
        let next = (page.truncated)
            .then(|| page.last.as_deref().map(token_of))
            .flatten();
        let enc = Enc::of(i.encoding_type.as_ref());
        let page = enc.page(page);
        let c = contents(&page, i.fetch_owner.unwrap_or(false));
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(i.bucket),
            prefix: Some(enc.s(&q.prefix)),
            max_keys: Some(q.max_keys as i32),
            key_count: Some((page.entries.len() + page.prefixes.len()) as i32),
            continuation_token: i.continuation_token,
            start_after: enc.opt(i.start_after.as_deref()),
            is_truncated: Some(page.truncated),
            next_continuation_token: next,
            contents: Some(c),
            common_prefixes: prefixes(&page),
            delimiter: enc.opt(q.delimiter.as_deref()),
            encoding_type: i.encoding_type,
            ..Default::default()
        }))
    }

    async fn list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        let uid = self.reader(&req).await?;
        let i = req.input;
        let b = self.bucket_as(&i.bucket, uid.as_deref(), true).await?;
        let q = Gateway::listing_query(
            i.prefix.clone(),
            i.delimiter.clone(),
            i.key_marker.clone(),
            i.max_keys,
        )?;
        let enc = Enc::of(i.encoding_type.as_ref());
        let page = enc.page(self.list(&b, &q).await?);
        // An unversioned bucket: each object is its one version, "null".
        let versions: Vec<ObjectVersion> = (page.entries.iter())
            .map(|(k, e)| ObjectVersion {
                key: Some(k.clone()),
                version_id: Some("null".into()),
                is_latest: Some(true),
                e_tag: Some(etag(e)),
                last_modified: Some(timestamp(e.mtime_ms)),
                size: Some(e.size as i64),
                owner: Some(owner(&e.owner)),
                storage_class: Some(ObjectVersionStorageClass::from_static(
                    ObjectVersionStorageClass::STANDARD,
                )),
                ..Default::default()
            })
            .collect();
        Ok(S3Response::new(ListObjectVersionsOutput {
            name: Some(i.bucket),
            prefix: Some(enc.s(&q.prefix)),
            key_marker: enc.opt(i.key_marker.as_deref()),
            max_keys: Some(q.max_keys as i32),
            delimiter: enc.opt(q.delimiter.as_deref()),
            is_truncated: Some(page.truncated),
            next_key_marker: page.truncated.then(|| page.last.clone()).flatten(),
            next_version_id_marker: page.truncated.then(|| "null".to_string()),
            versions: Some(versions),
            common_prefixes: prefixes(&page),
            encoding_type: i.encoding_type,
            ..Default::default()
        }))
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        self.s3_create_multipart_upload(req).await
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        self.s3_upload_part(req).await
    }

    async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        self.s3_upload_part_copy(req).await
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        self.s3_complete_multipart_upload(req).await
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        self.s3_abort_multipart_upload(req).await
    }

    async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        self.s3_list_parts(req).await
    }

    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        self.s3_list_multipart_uploads(req).await
    }
}
