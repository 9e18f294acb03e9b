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
use loligo_types::s3::{Condition, Grant, IndexEntry, Permission};
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
/// Kept as seconds since the Unix epoch.
const EXPIRES: &str = "expires";
/// What S3 answers as the type of an object stored without one.
const DEFAULT_CONTENT_TYPE: &str = "binary/octet-stream";

/// The `Expires` of `e`, if it was given one.
fn expires_of(e: &IndexEntry) -> Option<Timestamp> {
    let secs: u64 = e.headers.get(EXPIRES)?.parse().ok()?;
    Some(timestamp(secs.saturating_mul(1000)))
}

mod acl;
mod attributes;
mod config;
mod lock;
mod multipart;
mod tagging;
mod versions;

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
    expires: Option<&Timestamp>,
) -> BTreeMap<String, String> {
    let encoding = encoding.map(|e| {
        let tokens: Vec<&str> = e.split(',').map(str::trim).collect();
        match tokens.iter().any(|t| t.eq_ignore_ascii_case("aws-chunked")) {
            false => e,
            true => (tokens.into_iter())
                .filter(|t| !t.eq_ignore_ascii_case("aws-chunked"))
                .collect::<Vec<_>>()
                .join(", "),
        }
    });
    [
        (CONTENT_ENCODING, encoding),
        (CONTENT_DISPOSITION, disposition),
        (CONTENT_LANGUAGE, language),
        (CACHE_CONTROL, cache_control),
        (EXPIRES, expires.map(|t| secs_of(t).to_string())),
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

/// The `x-amz-grant-*` headers of a write of an object, in
/// `acl::from_headers`' order (an object has no WRITE to grant).
macro_rules! object_grant_headers {
    ($i:expr) => {
        [
            $i.grant_read.as_deref(),
            None,
            $i.grant_read_acp.as_deref(),
            $i.grant_write_acp.as_deref(),
            $i.grant_full_control.as_deref(),
        ]
    };
}
pub(super) use object_grant_headers;

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

/// The bytes of part `n` of `e` (a single PUT is its part 1).
fn part_range(e: &IndexEntry, n: i32) -> S3Result<std::ops::Range<u64>> {
    let invalid = || s3_error!(InvalidPart, "the object has no part {n}");
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(invalid)?;
    let segments = match &e.layout {
        loligo_types::s3::Layout::Striped { segments, .. } if e.parts > 0 => segments,
        _ if n == 1 => return Ok(0..e.size),
        _ => return Err(invalid()),
    };
    let at: u64 = segments.iter().take(n - 1).map(|s| s.size).sum();
    let s = segments.get(n - 1).ok_or_else(invalid)?;
    Ok(at..at + s.size)
}

/// The bytes a GET asks for (a range or a part; the whole object
/// without either), with the Content-Range to answer.
fn asked_range(
    e: &IndexEntry,
    range: Option<&Range>,
    part: Option<i32>,
) -> S3Result<(std::ops::Range<u64>, Option<String>)> {
    let got = match (range, part) {
        (None, None) => return Ok((0..e.size, None)),
        (Some(_), Some(_)) => {
            return Err(s3_error!(
                InvalidRequest,
                "ask for a range or a part, not both"
            ))
        }
        (Some(r), None) => r.check(e.size).map_err(|_| {
            s3_error!(
                InvalidRange,
                "the range is outside the object's {} bytes",
                e.size
            )
        })?,
        (None, Some(n)) => part_range(e, n)?,
    };
    let cr = format!(
        "bytes {}-{}/{}",
        got.start,
        got.end.saturating_sub(1),
        e.size
    );
    Ok((got, Some(cr)))
}

/// Refused: what a PUT asks for that the gateway does not do (rather
/// than store the object without it).
fn refuse_unsupported_put(sse: bool, sse_customer: bool, kms: bool) -> S3Result<()> {
    let what = [
        (sse || kms, "server-side encryption"),
        (sse_customer, "server-side encryption with a customer key"),
    ];
    match what.iter().find(|(asked, _)| *asked) {
        Some((_, name)) => Err(s3_error!(NotImplemented, "{name} is not supported yet")),
        None => Ok(()),
    }
}

/// The tags of an `x-amz-tagging` header (none without one).
fn tags_of(header: Option<&str>) -> S3Result<crate::tags::Tags> {
    match header {
        None => Ok(Default::default()),
        Some(h) => crate::tags::from_header(h).map_err(|m| s3_error!(InvalidTag, "{m}")),
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
    acl: crate::acl::Given,
    tags: crate::tags::Tags,
    retention: Option<loligo_types::s3::Retention>,
    legal_hold: bool,
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
    sums_in(&e.checksums)
}

/// Checksums kept by key (`sha256`) as S3's DTO.
fn sums_in(c: &BTreeMap<String, String>) -> Checksum {
    let get = |k: &str| c.get(k).cloned();
    Checksum {
        checksum_crc32: get("crc32"),
        checksum_crc32c: get("crc32c"),
        checksum_sha1: get("sha1"),
        checksum_sha256: get("sha256"),
        checksum_crc64nvme: get("crc64nvme"),
        ..Default::default()
    }
}

/// The checksums a GET or HEAD shows (only when asked, by
/// `x-amz-checksum-mode: ENABLED`): part `part`'s, or the object's when
/// all of it is read.
fn shown_sums(
    e: &IndexEntry,
    part: Option<i32>,
    whole: bool,
    mode: Option<&ChecksumMode>,
) -> (Checksum, Option<ChecksumType>) {
    if mode.is_none_or(|m| m.as_str() != ChecksumMode::ENABLED) {
        return (Checksum::default(), None);
    }
    let ty = e.checksum_type.clone().map(ChecksumType::from);
    let segment = match (&e.layout, part) {
        (loligo_types::s3::Layout::Striped { segments, .. }, Some(n)) if e.parts > 0 => {
            usize::try_from(n)
                .ok()
                .and_then(|n| segments.get(n.checked_sub(1)?))
        }
        _ => None,
    };
    match segment {
        Some(s) => (sums_in(&s.checksums), ty),
        None if whole => (sums_of(e), ty),
        None => (Checksum::default(), None),
    }
}

/// Stored header `name` of `e`.
fn header(e: &IndexEntry, name: &str) -> Option<String> {
    e.headers.get(name).cloned()
}

fn user_meta(e: &IndexEntry) -> Option<Metadata> {
    (!e.meta.is_empty()).then(|| e.meta.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
}

/// Who owns what `writer` writes into `b` with ACL `acl` (refused if
/// that ACL may not be set there): the bucket's owner when ACLs are not
/// used, when it prefers to and is given full control, or when the
/// writer is anonymous.
fn new_owner(b: &BucketRecord, writer: &str, acl: &crate::acl::Given) -> S3Result<String> {
    b.check_acl(acl, writer)?;
    let preferred = b.ownership.as_deref() == Some("BucketOwnerPreferred")
        && acl.canned.as_deref() == Some("bucket-owner-full-control");
    // No one could manage what an anonymous request wrote: its bucket's
    // owner owns it (as RGW does).
    let anonymous = writer == crate::acl::ANONYMOUS;
    match b.acls_disabled() || preferred || anonymous {
        true => Ok(b.owner.clone()),
        false => Ok(writer.to_string()),
    }
}

/// The grants of `e` in bucket `b`.
fn entry_grants(b: &BucketRecord, e: &IndexEntry) -> Vec<Grant> {
    b.honoured(crate::acl::effective(
        e.acl.as_deref(),
        e.grants.as_deref(),
        &e.owner,
        &b.owner,
    ))
}

/// Whether `e`'s ACL lets `who` do `want`.
fn entry_allows(b: &BucketRecord, e: &IndexEntry, who: &Caller, want: Permission) -> bool {
    let owner = if b.acls_disabled() {
        &b.owner
    } else {
        &e.owner
    };
    who.by_policy || crate::acl::allows(&entry_grants(b, e), owner, who.uid(), want)
}

/// Who asks: the user who signed the request (`None`: anonymous), and
/// whether the bucket's policy allowed the request (then the ACLs are
/// not asked; a policy's denial never reaches a handler).
#[derive(Clone, Debug, Default)]
pub(crate) struct Caller {
    uid: Option<String>,
    by_policy: bool,
}

impl Caller {
    /// The signing user.
    pub fn uid(&self) -> Option<&str> {
        self.uid.as_deref()
    }

    /// The signing user, or `AccessDenied` for an anonymous request.
    pub fn signed(&self) -> S3Result<String> {
        (self.uid.clone()).ok_or_else(|| s3_error!(AccessDenied, "sign this request"))
    }

    /// This caller as judged without the bucket's policy (for what only
    /// the owner may ask, whatever the policy says).
    pub fn without_policy(self) -> Caller {
        Caller {
            by_policy: false,
            ..self
        }
    }

    /// What this caller writes is owned by (the anonymous user's id for
    /// an anonymous request).
    pub fn writer(&self) -> &str {
        self.uid().unwrap_or(crate::acl::ANONYMOUS)
    }
}

impl Gateway {
    /// Who asks `req` (what the access check let through), and whether
    /// the bucket's policy allowed it.
    async fn caller<T>(&self, req: &S3Request<T>) -> S3Result<Caller> {
        let uid = match &req.credentials {
            Some(c) => Some(self.secrets().user_of(&c.access_key).await?),
            None => None,
        };
        let by_policy = req
            .extensions
            .get::<crate::access::PolicyAllowed>()
            .is_some();
        Ok(Caller { uid, by_policy })
    }

    /// Bucket `name` if `who` owns it (what only an owner may do, unless
    /// the bucket's policy allows it: delete it, read or set its
    /// configuration).
    async fn bucket_owned(&self, name: &str, who: &Caller) -> S3Result<BucketRecord> {
        let b = self.bucket(name).await?;
        if who.by_policy || who.uid() == Some(b.owner.as_str()) {
            return Ok(b);
        }
        Err(s3_error!(AccessDenied, "bucket '{name}' is not yours"))
    }

    /// Bucket `name` if its policy or ACL lets `who` do `want`.
    async fn bucket_allowing(
        &self,
        name: &str,
        who: &Caller,
        want: Permission,
    ) -> S3Result<BucketRecord> {
        let b = self.bucket(name).await?;
        if who.by_policy || b.allows(who.uid(), want) {
            return Ok(b);
        }
        Err(s3_error!(
            AccessDenied,
            "bucket '{name}''s ACL does not allow you {}",
            crate::acl::permission_name(want)
        ))
    }

    /// What S3 shows for user `uid`: its id and display name.
    pub(super) async fn owner_of(&self, uid: &str) -> S3Result<Owner> {
        let name = self.secrets().display_name(uid).await?;
        Ok(Owner {
            display_name: Some(name.unwrap_or_else(|| uid.to_string())),
            id: Some(uid.to_string()),
        })
    }

    /// The owners of the entries of `page`, for a listing that shows them.
    async fn owners_of(&self, page: &Page) -> S3Result<BTreeMap<String, Owner>> {
        let mut out = BTreeMap::new();
        for (_, e) in &page.entries {
            if !out.contains_key(&e.owner) {
                out.insert(e.owner.clone(), self.owner_of(&e.owner).await?);
            }
        }
        Ok(out)
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
        let b = self.bucket(bucket).await?;
        // The request's policy check was of its destination: the source
        // is judged by its own bucket's.
        let action = match version_id {
            Some(_) => "s3:GetObjectVersion",
            None => "s3:GetObject",
        };
        let ask = crate::access::Ask {
            action,
            key: Some(key),
            version: version_id.as_deref(),
            user: Some(uid),
            context: Default::default(),
        };
        let by_policy = match crate::access::judge(self, &b, ask).await? {
            crate::policy::Decision::Deny => {
                return Err(s3_error!(
                    AccessDenied,
                    "the source bucket's policy denies it"
                ))
            }
            d => d == crate::policy::Decision::Allow,
        };
        let who = Caller {
            uid: Some(uid.to_string()),
            by_policy,
        };
        let (e, inline) = self
            .object_allowing(&b, key, version_id.as_deref(), &who, Permission::Read)
            .await?;
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

    /// `key` of bucket `b` if the object's ACL lets `uid` (`None`:
    /// anonymous) do `want` (a bucket's ACL lets one list it, not read
    /// its objects, as in S3). Where the caller may not list the bucket,
    /// a missing key is `AccessDenied` too (as S3 answers without the
    /// right to list).
    /// Version `version` of `key` (the current one without), as
    /// [`Gateway::entry_allowing`] finds it.
    pub(super) async fn object_allowing(
        &self,
        b: &BucketRecord,
        key: &str,
        version: Option<&str>,
        who: &Caller,
        want: Permission,
    ) -> S3Result<(IndexEntry, bytes::Bytes)> {
        match version {
            Some(v) => self.version_allowing(b, key, v, who, want).await,
            None => self.entry_allowing(b, key, who, want).await,
        }
    }

    async fn entry_allowing(
        &self,
        b: &BucketRecord,
        key: &str,
        who: &Caller,
        want: Permission,
    ) -> S3Result<(IndexEntry, bytes::Bytes)> {
        let open = who.by_policy || b.allows(who.uid(), Permission::Read);
        match self.entry(b, key).await {
            Ok((e, d)) if entry_allows(b, &e, who, want) => Ok((e, d)),
            Ok(_) => Err(s3_error!(
                AccessDenied,
                "the ACL of '{key}' does not allow you {}",
                crate::acl::permission_name(want)
            )),
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
        let b = self.bucket_fresh(&b.name).await?;
        Err(self.missing(&b, key).await)
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
            acl: h.acl.canned,
            grants: h.acl.grants,
            parts: 0,
            tags: h.tags,
            version_id: None,
            vseq: 0,
            delete_marker: false,
            checksum_type: None,
            retention: h.retention,
            legal_hold: h.legal_hold,
        };
        self.commit(b, key, entry, written, cond).await
    }

    /// Give up data written for an upload that will not commit.
    async fn drop_written(&self, b: &BucketRecord, key: &str, w: Written) {
        if let Written::Striped { tag, .. } = w {
            self.abandon(&b.shard_object(key), &tag).await;
        }
    }

    /// A request `req` as the bucket's policy judges it: `action` on
    /// `key` (and `version`), asked by `who`.
    pub(super) fn ask<'a, T>(
        &self,
        req: &S3Request<T>,
        action: &'static str,
        key: Option<&'a str>,
        version: Option<&'a str>,
        who: &'a Caller,
    ) -> crate::access::Ask<'a> {
        let secure = req.extensions.get::<crate::access::Secure>().is_some();
        let query = crate::access::query_of(&req.uri);
        crate::access::Ask {
            action,
            key,
            version,
            user: who.uid(),
            context: crate::access::context_of(&req.headers, &query, secure),
        }
    }

    /// Whether `who` may bypass governance retention on `key`: the
    /// bucket's owner, or one its policy allows
    /// `s3:BypassGovernanceRetention` there.
    pub(super) async fn may_bypass<T>(
        &self,
        req: &S3Request<T>,
        b: &BucketRecord,
        who: &Caller,
        key: &str,
        version: Option<&str>,
    ) -> S3Result<bool> {
        if who.uid() == Some(b.owner.as_str()) {
            return Ok(true);
        }
        let ask = self.ask(req, "s3:BypassGovernanceRetention", Some(key), version, who);
        let d = crate::access::judge(self, b, ask).await?;
        Ok(d == crate::policy::Decision::Allow)
    }

    /// Delete `key` of `b` for `by`: the object (a bucket that never kept
    /// versions), a delete marker over it (one that keeps versions), or
    /// version `version` for good. Whether a delete marker was made or
    /// removed, and the version id S3 answers.
    async fn delete_one(
        &self,
        b: &BucketRecord,
        key: &str,
        version: Option<&str>,
        by: &str,
        cond: Condition,
        bypass: bool,
    ) -> S3Result<(bool, Option<String>)> {
        use loligo_types::s3::Versioning;
        crate::names::check_object_key(key).map_err(|m| s3_error!(InvalidArgument, "{m}"))?;
        if version.is_none() && b.versioning == Versioning::Off {
            self.remove_object(b, key, cond).await?;
            return Ok((false, None));
        }
        if cond != Condition::default() {
            return Err(s3_error!(
                NotImplemented,
                "a conditional delete in a bucket that keeps versions"
            ));
        }
        let r = self.remove_version(b, key, version, by, bypass).await?;
        let id = match version {
            Some(v) => Some(v.to_string()),
            None => Some(r.version_id.unwrap_or_else(|| "null".into())),
        };
        Ok((r.delete_marker, id))
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

/// The objects of a listing, with their owners when `owners` is given.
fn contents(page: &Page, owners: Option<&BTreeMap<String, Owner>>) -> Vec<Object> {
    (page.entries.iter())
        .map(|(k, e)| Object {
            key: Some(k.clone()),
            e_tag: Some(etag(e)),
            last_modified: Some(timestamp(e.mtime_ms)),
            size: Some(e.size as i64),
            owner: owners.and_then(|o| o.get(&e.owner).cloned()),
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
        let who = self.caller(&req).await?;
        let uid = who.signed()?;
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
            owner: Some(self.owner_of(&uid).await?),
            ..Default::default()
        }))
    }

    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        let who = self.caller(&req).await?;
        let uid = who.signed()?;
        let i = &req.input;
        let acl = self
            .given_acl(
                i.acl.as_ref().map(|a| a.as_str()),
                crate::acl::BUCKET_CANNED,
                [
                    i.grant_read.as_deref(),
                    i.grant_write.as_deref(),
                    i.grant_read_acp.as_deref(),
                    i.grant_write_acp.as_deref(),
                    i.grant_full_control.as_deref(),
                ],
            )
            .await?;
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
        let ownership = match i.object_ownership.as_ref().map(|o| o.as_str()) {
            None => None,
            Some(o) => Some(config::ownership(o)?),
        };
        if ownership.as_deref() == Some(crate::bucket::OWNER_ENFORCED)
            && crate::acl::is_public(&crate::acl::effective(
                acl.canned.as_deref(),
                acl.grants.as_deref(),
                &uid,
                &uid,
            ))
        {
            return Err(s3_error!(
                InvalidBucketAclWithObjectOwnership,
                "a bucket whose owner owns every object (BucketOwnerEnforced) takes no public ACL"
            ));
        }
        let lock = i.object_lock_enabled_for_bucket.unwrap_or(false);
        self.create_bucket(&i.bucket, &uid, acl, ownership, lock)
            .await?;
        Ok(S3Response::new(CreateBucketOutput {
            location: Some(format!("/{}", i.bucket)),
        }))
    }

    async fn delete_bucket(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        let who = self.caller(&req).await?;
        let b = self.bucket_owned(&req.input.bucket, &who).await?;
        self.delete_bucket(&b).await?;
        Ok(S3Response::new(DeleteBucketOutput {}))
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        let uid = self.caller(&req).await?;
        (self.bucket_allowing(&req.input.bucket, &uid, Permission::Read)).await?;
        Ok(S3Response::new(HeadBucketOutput {
            bucket_region: Some(self.config().region.clone()),
            ..Default::default()
        }))
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        let who = self.caller(&req).await?;
        self.bucket_owned(&req.input.bucket, &who).await?;
        Ok(S3Response::new(GetBucketLocationOutput {
            location_constraint: Some(BucketLocationConstraint::from(self.config().region.clone())),
        }))
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let who = self.caller(&req).await?;
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
        )?;
        let tags = tags_of(i.tagging.as_deref())?;
        let b = (self.bucket_allowing(&i.bucket, &who, Permission::Write)).await?;
        let (retention, legal_hold) = lock::of_put(
            &b,
            i.object_lock_mode.as_ref(),
            i.object_lock_retain_until_date.as_ref(),
            i.object_lock_legal_hold_status.as_ref(),
        )?;
        let writer = who.writer().to_string();
        let acl = self
            .given_acl(
                i.acl.as_ref().map(|a| a.as_str()),
                crate::acl::OBJECT_CANNED,
                object_grant_headers!(i),
            )
            .await?;
        let uid = new_owner(&b, &writer, &acl)?;
        let cond = write_condition(i.if_match.as_ref(), i.if_none_match.as_ref())?;
        let headers = content_headers(
            i.content_encoding,
            i.content_disposition,
            i.content_language,
            i.cache_control,
            i.expires.as_ref(),
        );
        let h = PutHeaders {
            content_type: i.content_type,
            meta: i.metadata,
            headers,
            acl,
            tags,
            retention,
            legal_hold,
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
            version_id: versions::response_id(&b, &e),
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
        let uid = self.caller(&req).await?;
        let i = &req.input;
        let b = self.bucket(&i.bucket).await?;
        let (e, inline) = self
            .object_allowing(&b, &i.key, i.version_id.as_deref(), &uid, Permission::Read)
            .await?;
        check_read_conditions(
            &e,
            i.if_match.as_ref(),
            i.if_none_match.as_ref(),
            i.if_modified_since.as_ref(),
            i.if_unmodified_since.as_ref(),
        )?;
        let (range, content_range) = asked_range(&e, i.range.as_ref(), i.part_number)?;
        let whole = range.start == 0 && range.end == e.size;
        let len = range.end - range.start;
        let body = self.read_range(&e, inline, range);
        let (s, checksum_type) = shown_sums(&e, i.part_number, whole, i.checksum_mode.as_ref());
        let lock = lock::shown(&e);
        Ok(S3Response::new(GetObjectOutput {
            checksum_type,
            body: Some(StreamingBlob::wrap(body)),
            content_length: Some(len as i64),
            content_range,
            accept_ranges: Some("bytes".into()),
            last_modified: Some(timestamp(e.mtime_ms)),
            e_tag: Some(etag(&e)),
            version_id: versions::response_id(&b, &e),
            tag_count: (!e.tags.is_empty()).then_some(e.tags.len() as i32),
            object_lock_mode: lock.0,
            object_lock_retain_until_date: lock.1,
            object_lock_legal_hold_status: lock.2,
            parts_count: (i.part_number.is_some() && e.parts > 0).then_some(e.parts as i32),
            metadata: user_meta(&e),
            // A presigned link may ask for other response headers.
            content_type: (i.response_content_type.clone())
                .or_else(|| e.content_type.clone())
                .or_else(|| Some(DEFAULT_CONTENT_TYPE.into())),
            expires: (i.response_expires.clone()).or_else(|| expires_of(&e)),
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
        let uid = self.caller(&req).await?;
        let i = &req.input;
        let b = self.bucket(&i.bucket).await?;
        let (e, _) = self
            .object_allowing(&b, &i.key, i.version_id.as_deref(), &uid, Permission::Read)
            .await?;
        check_read_conditions(
            &e,
            i.if_match.as_ref(),
            i.if_none_match.as_ref(),
            i.if_modified_since.as_ref(),
            i.if_unmodified_since.as_ref(),
        )?;
        let (s, checksum_type) = shown_sums(&e, i.part_number, true, i.checksum_mode.as_ref());
        let (range, _) = asked_range(&e, None, i.part_number)?;
        let lock = lock::shown(&e);
        let mut resp = S3Response::new(HeadObjectOutput {
            checksum_type,
            object_lock_mode: lock.0,
            object_lock_retain_until_date: lock.1,
            object_lock_legal_hold_status: lock.2,
            content_length: Some((range.end - range.start) as i64),
            parts_count: (i.part_number.is_some() && e.parts > 0).then_some(e.parts as i32),
            accept_ranges: Some("bytes".into()),
            last_modified: Some(timestamp(e.mtime_ms)),
            e_tag: Some(etag(&e)),
            version_id: versions::response_id(&b, &e),
            metadata: user_meta(&e),
            content_type: (e.content_type.clone()).or_else(|| Some(DEFAULT_CONTENT_TYPE.into())),
            expires: expires_of(&e),
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
        });
        // S3 answers a HEAD with the tag count too (s3s has no field).
        if !e.tags.is_empty() {
            resp.headers
                .insert("x-amz-tagging-count", http::HeaderValue::from(e.tags.len()));
        }
        Ok(resp)
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let b = (self.bucket_allowing(&i.bucket, &who, Permission::Write)).await?;
        let cond = write_condition(i.if_match.as_ref(), None)?;
        let by = who.writer();
        let v = i.version_id.as_deref();
        let asked = i.bypass_governance_retention.unwrap_or(false);
        let bypass = asked && self.may_bypass(&req, &b, &who, &i.key, v).await?;
        let (marker, version_id) = self.delete_one(&b, &i.key, v, by, cond, bypass).await?;
        Ok(S3Response::new(DeleteObjectOutput {
            delete_marker: marker.then_some(true),
            version_id,
            ..Default::default()
        }))
    }

    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let b = self.bucket(&i.bucket).await?;
        let policy = crate::access::policy_of(&b)?;
        let acl_write = who.by_policy || b.allows(who.uid(), Permission::Write);
        if policy.is_none() && !acl_write {
            return Err(s3_error!(
                AccessDenied,
                "bucket '{}''s ACL does not allow you WRITE",
                b.name
            ));
        }
        if i.delete.objects.len() > 1000 {
            return Err(s3_error!(
                MalformedXML,
                "at most 1000 keys per DeleteObjects"
            ));
        }
        let quiet = i.delete.quiet.unwrap_or(false);
        let mut deleted = Vec::new();
        let mut errors = Vec::new();
        let by = who.writer();
        let asked = i.bypass_governance_retention.unwrap_or(false);
        for o in &i.delete.objects {
            let v = o.version_id.as_deref();
            // Each key is judged by the policy on its own resource.
            let one = async {
                let action = crate::access::action_of("DeleteObject", v.is_some());
                let d = match action {
                    Some(action) if policy.is_some() => {
                        let ask = self.ask(&req, action, Some(&o.key), v, &who);
                        crate::access::judge(self, &b, ask).await?
                    }
                    _ => crate::policy::Decision::Silent,
                };
                let allowed = match d {
                    crate::policy::Decision::Deny => false,
                    crate::policy::Decision::Allow => true,
                    crate::policy::Decision::Silent => acl_write,
                };
                if !allowed {
                    return Err(s3_error!(AccessDenied, "you may not delete '{}'", o.key));
                }
                let bypass = asked && self.may_bypass(&req, &b, &who, &o.key, v).await?;
                (self.delete_one(&b, &o.key, v, by, Condition::default(), bypass)).await
            };
            match one.await {
                Ok(_) if quiet => {}
                Ok((marker, id)) => deleted.push(DeletedObject {
                    key: Some(o.key.clone()),
                    delete_marker: marker.then_some(true),
                    delete_marker_version_id: id.clone().filter(|_| marker && v.is_none()),
                    version_id: v.map(str::to_string),
                }),
                Err(e) => errors.push(Error {
                    code: Some(e.code().as_str().to_string()),
                    key: Some(o.key.clone()),
                    message: e.message().map(str::to_string),
                    version_id: o.version_id.clone(),
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
        let who = self.caller(&req).await?;
        let uid = who.signed()?;
        let i = req.input;
        let conditions = CopyConditions {
            if_match: i.copy_source_if_match.as_ref(),
            if_none_match: i.copy_source_if_none_match.as_ref(),
            if_modified_since: i.copy_source_if_modified_since.as_ref(),
            if_unmodified_since: i.copy_source_if_unmodified_since.as_ref(),
        };
        let (src_b, src, inline) = self.copy_source(&uid, &i.copy_source, conditions).await?;
        let onto_itself = matches!(&i.copy_source, CopySource::Bucket { bucket, key, .. }
            if bucket.as_ref() == i.bucket && key.as_ref() == i.key);
        let dst_b = (self.bucket_allowing(&i.bucket, &who, Permission::Write)).await?;
        let replace = i.metadata_directive.as_ref().map(|d| d.as_str()) == Some("REPLACE");
        let (retention, legal_hold) = lock::of_put(
            &dst_b,
            i.object_lock_mode.as_ref(),
            i.object_lock_retain_until_date.as_ref(),
            i.object_lock_legal_hold_status.as_ref(),
        )?;
        let tags = match i.tagging_directive.as_ref().map(|d| d.as_str()) {
            Some("REPLACE") => tags_of(i.tagging.as_deref())?,
            _ => src.tags.clone(),
        };
        let acl = self
            .given_acl(
                i.acl.as_ref().map(|a| a.as_str()),
                crate::acl::OBJECT_CANNED,
                object_grant_headers!(i),
            )
            .await?;
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
                i.expires.as_ref(),
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
            acl,
            tags,
            retention,
            legal_hold,
            content_md5: None,
            sums: Checksum::default(),
            algorithm: None,
        };
        let owner = new_owner(&dst_b, &uid, &h.acl)?;
        let body = StreamingBlob::wrap(self.read_range(&src, inline, 0..src.size));
        let e = (self.put(
            &dst_b,
            &i.key,
            &owner,
            Some(body),
            Some(src.size as i64),
            h,
            Condition::default(),
            None,
        ))
        .await?;
        Ok(S3Response::new(CopyObjectOutput {
            version_id: versions::response_id(&dst_b, &e),
            copy_source_version_id: versions::response_id(&src_b, &src),
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
        let uid = self.caller(&req).await?;
        let i = req.input;
        let b = (self.bucket_allowing(&i.bucket, &uid, Permission::Read)).await?;
        let q = Gateway::listing_query(
            i.prefix.clone(),
            i.delimiter.clone(),
            i.marker.clone(),
            i.max_keys,
        )?;
        let enc = Enc::of(i.encoding_type.as_ref());
        let page = enc.page(self.list(&b, &q).await?);
        let owners = self.owners_of(&page).await?;
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
            contents: Some(contents(&page, Some(&owners))),
            common_prefixes: prefixes(&page),
            encoding_type: i.encoding_type,
            ..Default::default()
        }))
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        let uid = self.caller(&req).await?;
        let i = req.input;
        let b = (self.bucket_allowing(&i.bucket, &uid, Permission::Read)).await?;
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
        let owners = match i.fetch_owner {
            Some(true) => Some(self.owners_of(&page).await?),
            _ => None,
        };
        let c = contents(&page, owners.as_ref());
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
        self.s3_list_object_versions(req).await
    }

    async fn get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        self.s3_get_bucket_versioning(req).await
    }

    async fn put_bucket_versioning(
        &self,
        req: S3Request<PutBucketVersioningInput>,
    ) -> S3Result<S3Response<PutBucketVersioningOutput>> {
        self.s3_put_bucket_versioning(req).await
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

    async fn get_bucket_acl(
        &self,
        req: S3Request<GetBucketAclInput>,
    ) -> S3Result<S3Response<GetBucketAclOutput>> {
        self.s3_get_bucket_acl(req).await
    }

    async fn put_bucket_acl(
        &self,
        req: S3Request<PutBucketAclInput>,
    ) -> S3Result<S3Response<PutBucketAclOutput>> {
        self.s3_put_bucket_acl(req).await
    }

    async fn get_object_acl(
        &self,
        req: S3Request<GetObjectAclInput>,
    ) -> S3Result<S3Response<GetObjectAclOutput>> {
        self.s3_get_object_acl(req).await
    }

    async fn put_object_acl(
        &self,
        req: S3Request<PutObjectAclInput>,
    ) -> S3Result<S3Response<PutObjectAclOutput>> {
        self.s3_put_object_acl(req).await
    }

    async fn get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        self.s3_get_object_tagging(req).await
    }

    async fn put_object_tagging(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        self.s3_put_object_tagging(req).await
    }

    async fn delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        self.s3_delete_object_tagging(req).await
    }

    async fn get_bucket_tagging(
        &self,
        req: S3Request<GetBucketTaggingInput>,
    ) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        self.s3_get_bucket_tagging(req).await
    }

    async fn put_bucket_tagging(
        &self,
        req: S3Request<PutBucketTaggingInput>,
    ) -> S3Result<S3Response<PutBucketTaggingOutput>> {
        self.s3_put_bucket_tagging(req).await
    }

    async fn delete_bucket_tagging(
        &self,
        req: S3Request<DeleteBucketTaggingInput>,
    ) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
        self.s3_delete_bucket_tagging(req).await
    }

    async fn get_public_access_block(
        &self,
        req: S3Request<GetPublicAccessBlockInput>,
    ) -> S3Result<S3Response<GetPublicAccessBlockOutput>> {
        self.s3_get_public_access_block(req).await
    }

    async fn put_public_access_block(
        &self,
        req: S3Request<PutPublicAccessBlockInput>,
    ) -> S3Result<S3Response<PutPublicAccessBlockOutput>> {
        self.s3_put_public_access_block(req).await
    }

    async fn delete_public_access_block(
        &self,
        req: S3Request<DeletePublicAccessBlockInput>,
    ) -> S3Result<S3Response<DeletePublicAccessBlockOutput>> {
        self.s3_delete_public_access_block(req).await
    }

    async fn get_bucket_ownership_controls(
        &self,
        req: S3Request<GetBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<GetBucketOwnershipControlsOutput>> {
        self.s3_get_bucket_ownership_controls(req).await
    }

    async fn put_bucket_ownership_controls(
        &self,
        req: S3Request<PutBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<PutBucketOwnershipControlsOutput>> {
        self.s3_put_bucket_ownership_controls(req).await
    }

    async fn delete_bucket_ownership_controls(
        &self,
        req: S3Request<DeleteBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<DeleteBucketOwnershipControlsOutput>> {
        self.s3_delete_bucket_ownership_controls(req).await
    }

    async fn get_bucket_policy(
        &self,
        req: S3Request<GetBucketPolicyInput>,
    ) -> S3Result<S3Response<GetBucketPolicyOutput>> {
        self.s3_get_bucket_policy(req).await
    }

    async fn put_bucket_policy(
        &self,
        req: S3Request<PutBucketPolicyInput>,
    ) -> S3Result<S3Response<PutBucketPolicyOutput>> {
        self.s3_put_bucket_policy(req).await
    }

    async fn delete_bucket_policy(
        &self,
        req: S3Request<DeleteBucketPolicyInput>,
    ) -> S3Result<S3Response<DeleteBucketPolicyOutput>> {
        self.s3_delete_bucket_policy(req).await
    }

    async fn get_bucket_policy_status(
        &self,
        req: S3Request<GetBucketPolicyStatusInput>,
    ) -> S3Result<S3Response<GetBucketPolicyStatusOutput>> {
        self.s3_get_bucket_policy_status(req).await
    }

    async fn put_object_lock_configuration(
        &self,
        req: S3Request<PutObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<PutObjectLockConfigurationOutput>> {
        self.s3_put_object_lock_configuration(req).await
    }

    async fn get_object_lock_configuration(
        &self,
        req: S3Request<GetObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<GetObjectLockConfigurationOutput>> {
        self.s3_get_object_lock_configuration(req).await
    }

    async fn put_object_retention(
        &self,
        req: S3Request<PutObjectRetentionInput>,
    ) -> S3Result<S3Response<PutObjectRetentionOutput>> {
        self.s3_put_object_retention(req).await
    }

    async fn get_object_retention(
        &self,
        req: S3Request<GetObjectRetentionInput>,
    ) -> S3Result<S3Response<GetObjectRetentionOutput>> {
        self.s3_get_object_retention(req).await
    }

    async fn put_object_legal_hold(
        &self,
        req: S3Request<PutObjectLegalHoldInput>,
    ) -> S3Result<S3Response<PutObjectLegalHoldOutput>> {
        self.s3_put_object_legal_hold(req).await
    }

    async fn get_object_legal_hold(
        &self,
        req: S3Request<GetObjectLegalHoldInput>,
    ) -> S3Result<S3Response<GetObjectLegalHoldOutput>> {
        self.s3_get_object_legal_hold(req).await
    }

    async fn get_bucket_cors(
        &self,
        req: S3Request<GetBucketCorsInput>,
    ) -> S3Result<S3Response<GetBucketCorsOutput>> {
        self.s3_get_bucket_cors(req).await
    }

    async fn put_bucket_cors(
        &self,
        req: S3Request<PutBucketCorsInput>,
    ) -> S3Result<S3Response<PutBucketCorsOutput>> {
        self.s3_put_bucket_cors(req).await
    }

    async fn delete_bucket_cors(
        &self,
        req: S3Request<DeleteBucketCorsInput>,
    ) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
        self.s3_delete_bucket_cors(req).await
    }

    async fn get_object_attributes(
        &self,
        req: S3Request<GetObjectAttributesInput>,
    ) -> S3Result<S3Response<GetObjectAttributesOutput>> {
        self.s3_get_object_attributes(req).await
    }

    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        self.s3_list_multipart_uploads(req).await
    }
}
