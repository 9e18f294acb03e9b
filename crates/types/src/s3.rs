//! The S3 gateway's bucket index as the OSDs see it: the records kept in
//! an index shard's object map, the RADOS objects an S3 object's data
//! lives in, and the inputs and refusal codes of the `s3` object class
//! methods that change a shard atomically (`loligo_pg::cls`).
//!
//! An index shard is one RADOS object of the index pool; its omap holds,
//! by key prefix:
//!
//! | prefix | key after it | value |
//! | --- | --- | --- |
//! | [`ENTRY`] | the S3 object key | [`IndexEntry`] (JSON) |
//! | [`INLINE`] | the S3 object key | the data of a small object |
//! | [`PENDING`] | an upload's tag | [`Garbage`]: tails being written |
//! | [`GARBAGE`] | `{ms:020}.{tag}` | [`Garbage`]: tails to delete |
//! | [`UPLOAD`] | key, 0, upload id | [`Upload`]: a multipart upload |
//! | [`PART`] | upload id, 0, part number | [`Part`]: one uploaded part |
//! | [`VERSION`] | key, 0, [`version_order`] | [`IndexEntry`]: an older version or a delete marker |
//! | [`VERSION_DATA`] | key, 0, [`version_order`] | the data of a small older version |
//!
//! In a versioned bucket the [`ENTRY`] is the current version; the
//! versions before it, and delete markers, are kept under [`VERSION`],
//! newest first. When the current version goes (deleted, or a delete
//! marker put over it), the newest older version that is not a delete
//! marker becomes current again only if it is the newest of all.
//!
//! The entry is the commit point: an object exists once its entry is
//! set, and every set or removal moves the tails the old entry named to
//! the garbage list in the same transaction, so data is never lost to an
//! overwrite and never leaked by one. Tails are written under a fresh tag
//! before the entry names them, with a pending record first, so a writer
//! that dies leaves a record for the collector.
//!
//! Stored records are JSON (they live for years and grow fields); method
//! inputs are postcard, like the other classes'. Pure: no I/O.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Omap key prefix of an object's entry.
pub const ENTRY: u8 = b'o';
/// Omap key prefix of a small object's data kept in the index.
pub const INLINE: u8 = b'd';
/// Omap key prefix of an upload's pending record.
pub const PENDING: u8 = b'p';
/// Omap key prefix of a garbage record.
pub const GARBAGE: u8 = b'g';
/// Omap key set on every shard of a bucket being deleted (`s3.seal`; its
/// value is the deletion's token): no entry is set in a sealed shard.
pub const SEALED: &[u8] = b"!sealed";
/// Omap key prefix of a multipart upload's record.
pub const UPLOAD: u8 = b'u';
/// Omap key prefix of an uploaded part's record.
pub const PART: u8 = b'm';
/// Omap key prefix of an older version or a delete marker.
pub const VERSION: u8 = b'v';
/// Omap key prefix of a small older version's data.
pub const VERSION_DATA: u8 = b'w';

/// How a version's sequence number sorts: newest first, in 16 hex digits.
pub fn version_order(vseq: u64) -> String {
    format!("{:016x}", u64::MAX - vseq)
}

/// Every [`VERSION`] key of `key` starts with this.
pub fn version_prefix(key: &str) -> Vec<u8> {
    let mut k = omap_key(VERSION, key.as_bytes());
    k.push(0);
    k
}

/// The [`VERSION`] key of `key`'s version `vseq`.
pub fn version_key(key: &str, vseq: u64) -> Vec<u8> {
    let mut k = version_prefix(key);
    k.extend_from_slice(version_order(vseq).as_bytes());
    k
}

/// The [`VERSION_DATA`] key of `key`'s version `vseq`.
pub fn version_data_key(key: &str, vseq: u64) -> Vec<u8> {
    let mut k = version_key(key, vseq);
    k[0] = VERSION_DATA;
    k
}

/// The id of version `vseq` made with `tag` (S3's `versionId`: its
/// first 16 characters are the version's order, so it is found by one
/// read).
pub fn version_id(vseq: u64, tag: &str) -> String {
    format!("{}{tag}", version_order(vseq))
}

/// The sequence number a version id names, if it is one of ours.
pub fn vseq_of_id(id: &str) -> Option<u64> {
    let order = u64::from_str_radix(id.get(..16)?, 16).ok()?;
    Some(u64::MAX - order)
}

/// Whether a bucket keeps versions (S3's versioning status; `Off`: never
/// enabled).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Versioning {
    #[default]
    Off,
    Enabled,
    Suspended,
}

/// The most parts of a multipart upload (S3's).
pub const PARTS_MAX: u32 = 10_000;

/// The key of upload `id` of object `key` (uploads sort by key, then id).
pub fn upload_key(key: &str, id: &str) -> Vec<u8> {
    let mut k = omap_key(UPLOAD, key.as_bytes());
    k.push(0);
    k.extend_from_slice(id.as_bytes());
    k
}

/// The key of part `n` of upload `id` (parts sort by number).
pub fn part_key(id: &str, n: u32) -> Vec<u8> {
    let mut k = part_prefix(id);
    k.extend_from_slice(format!("{n:05}").as_bytes());
    k
}

/// Every part key of upload `id` starts with this.
pub fn part_prefix(id: &str) -> Vec<u8> {
    let mut k = omap_key(PART, id.as_bytes());
    k.push(0);
    k
}

/// `prefix` followed by `rest`: an omap key.
pub fn omap_key(prefix: u8, rest: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(rest.len() + 1);
    k.push(prefix);
    k.extend_from_slice(rest);
    k
}

/// The key of a garbage record made at `ms` for `tag` (records sort by
/// time, so the collector reads the old ones first).
pub fn garbage_key(ms: u64, tag: &str) -> Vec<u8> {
    omap_key(GARBAGE, format!("{ms:020}.{tag}").as_bytes())
}

/// The time a garbage key was made at, if it is one.
pub fn garbage_time(key: &[u8]) -> Option<u64> {
    let rest = key.strip_prefix(&[GARBAGE])?;
    std::str::from_utf8(rest.get(..20)?).ok()?.parse().ok()
}

/// A run of data objects: `{prefix}.0` .. `{prefix}.{count - 1}` in the
/// data pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tails {
    pub prefix: String,
    pub count: u32,
}

impl Tails {
    /// The name of the `n`th object of the run.
    pub fn object(&self, n: u32) -> String {
        debug_assert!(n < self.count);
        format!("{}.{n}", self.prefix)
    }
}

/// What a pending or garbage record holds: the data objects to delete
/// (in the data pool) once the record is old enough, and when it was made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Garbage {
    pub tails: Vec<Tails>,
    /// Milliseconds since the Unix epoch, by the gateway that wrote it.
    pub ms: u64,
    /// The S3 key the data was for (for an operator reading the records).
    #[serde(default)]
    pub key: String,
}

/// One part of an object's data, in order: `size` bytes striped over
/// `tails` in objects of the entry's stripe size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub size: u64,
    pub tails: Tails,
    /// The checksums its part was uploaded with (a multipart object's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub checksums: BTreeMap<String, String>,
}

/// Where an object's data is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// In the index shard itself, under [`INLINE`] + key.
    Inline,
    /// In data objects of `stripe` bytes (the last of a segment shorter).
    Striped { stripe: u64, segments: Vec<Segment> },
}

/// Who an ACL grant is for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Grantee {
    /// One user, by id.
    User(String),
    /// Anyone, signed or not (S3's `AllUsers` group).
    AllUsers,
    /// Any request signed by a user (`AuthenticatedUsers`).
    AuthenticatedUsers,
    /// S3's `LogDelivery` group (no one here writes logs as it).
    LogDelivery,
}

/// What an ACL grant allows (S3's permissions; `FullControl` is all).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    Read,
    Write,
    ReadAcp,
    WriteAcp,
    FullControl,
}

/// One grant of an access control list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub grantee: Grantee,
    pub permission: Permission,
}

/// An object lock's retention mode (S3's): `Governance` may be lifted by
/// a user who asks to bypass it, `Compliance` by no one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockMode {
    Governance,
    Compliance,
}

/// Until when a version may not be deleted (S3's object lock retention).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    pub mode: LockMode,
    /// Milliseconds since the Unix epoch.
    pub until_ms: u64,
}

/// Why version `e` may not be deleted at `now_ms` (`bypass`: the
/// request asks to bypass governance retention), if it may not.
pub fn lock_refusal(e: &IndexEntry, now_ms: u64, bypass: bool) -> Option<&'static str> {
    if e.legal_hold {
        return Some("the version is under a legal hold");
    }
    match &e.retention {
        Some(r) if r.until_ms > now_ms => match (r.mode, bypass) {
            (LockMode::Governance, true) => None,
            (LockMode::Governance, false) => Some("the version is retained (governance mode)"),
            (LockMode::Compliance, _) => Some("the version is retained (compliance mode)"),
        },
        _ => None,
    }
}

/// One object's index entry: what HEAD answers and where its data is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    pub size: u64,
    /// Without quotes: hex MD5, or `{hex}-{parts}` for a multipart object.
    pub etag: String,
    /// Last modified, milliseconds since the Unix epoch.
    pub mtime_ms: u64,
    /// The owner's user id.
    pub owner: String,
    pub layout: Layout,
    #[serde(default)]
    pub content_type: Option<String>,
    /// User metadata (`x-amz-meta-*`, names lower-case, without prefix).
    #[serde(default)]
    pub meta: BTreeMap<String, String>,
    /// Other stored headers (content-encoding, -disposition, -language,
    /// cache-control), by their lower-case names.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Checksums given and checked at upload (`crc32` -> base64).
    #[serde(default)]
    pub checksums: BTreeMap<String, String>,
    /// The canned ACL (`private`, `public-read`, ...), when `grants` is
    /// not given.
    #[serde(default)]
    pub acl: Option<String>,
    /// The access control list, when given grant by grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grants: Option<Vec<Grant>>,
    /// Parts of a multipart object (0: a single PUT).
    #[serde(default)]
    pub parts: u32,
    /// The object's tags.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The version's id (`None`: S3's `null` version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    /// The version's place among the key's versions (higher: newer; 0
    /// for an entry made before its bucket kept versions).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub vseq: u64,
    /// A delete marker (no data), kept only among older versions.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delete_marker: bool,
    /// How a multipart object's checksum was made from its parts'
    /// (`COMPOSITE`, `FULL_OBJECT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_type: Option<String>,
    /// The version's object lock retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Retention>,
    /// Whether the version is under an object lock legal hold.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub legal_hold: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl IndexEntry {
    /// The data objects this entry names.
    pub fn tails(&self) -> Vec<Tails> {
        match &self.layout {
            Layout::Inline => Vec::new(),
            Layout::Striped { segments, .. } => segments.iter().map(|s| s.tails.clone()).collect(),
        }
    }
}

/// A multipart upload in progress: what the object will carry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upload {
    pub owner: String,
    /// Milliseconds since the Unix epoch.
    pub initiated_ms: u64,
    #[serde(default)]
    pub content_type: Option<String>,
    #[serde(default)]
    pub meta: BTreeMap<String, String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub acl: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grants: Option<Vec<Grant>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Retention>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub legal_hold: bool,
    /// The checksum algorithm every part carries (S3's name, `SHA256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_algorithm: Option<String>,
    /// How the object's checksum is made from the parts'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_type: Option<String>,
}

/// One uploaded part.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    pub size: u64,
    /// Hex MD5 of the part, without quotes.
    pub etag: String,
    pub mtime_ms: u64,
    pub tails: Tails,
    #[serde(default)]
    pub checksums: BTreeMap<String, String>,
}

/// Input of `s3.part`: keep part `number` of upload `upload_id` (of
/// `key`), whose data the pending record `pending` names; a part of the
/// same number uploaded before goes to the garbage list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutPart {
    pub key: String,
    pub upload_id: String,
    pub number: u32,
    /// The part, JSON ([`Part`]).
    pub part: Vec<u8>,
    pub pending: String,
    pub now_ms: u64,
}

/// Input of `s3.complete`: make upload `upload_id` object `key` with
/// `entry`, whose segments must be the records of `parts`, in order; the
/// upload's other parts go to the garbage list, with the data of the
/// entry it replaces.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Complete {
    pub key: String,
    pub upload_id: String,
    /// The entry, JSON ([`IndexEntry`]).
    pub entry: Vec<u8>,
    pub parts: Vec<u32>,
    pub condition: Condition,
    pub now_ms: u64,
}

/// Input of `s3.abort`: drop upload `upload_id` of `key`, its parts' data
/// to the garbage list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Abort {
    pub key: String,
    pub upload_id: String,
    pub now_ms: u64,
}

/// A condition a write of an entry must meet (S3's conditional PUT and
/// DELETE), checked in the same transaction as the write.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    /// The object must exist with this ETag (`If-Match`; `Some("*")`:
    /// exist at all).
    pub if_match: Option<String>,
    /// The object must not exist (`If-None-Match: *`).
    pub if_none_match: bool,
}

/// Input of `s3.commit`: set `key`'s entry (and its inline data, or
/// remove a stale one), moving the old entry's tails to the garbage list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commit {
    pub key: String,
    /// The entry, JSON ([`IndexEntry`]).
    pub entry: Vec<u8>,
    /// The object's data when its layout is inline.
    pub inline: Option<Vec<u8>>,
    /// The pending record of the upload that wrote the tails: it must
    /// still be there (the collector has not taken it) and goes.
    pub pending: Option<String>,
    pub condition: Condition,
    /// The gateway's clock, for the garbage record.
    pub now_ms: u64,
}

/// Input of `s3.remove`: remove `key`'s entry and inline data, moving its
/// tails to the garbage list. Output: postcard `bool`, whether it existed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remove {
    pub key: String,
    pub condition: Condition,
    pub now_ms: u64,
}

/// Input of `s3.vcommit`: [`Commit`] in a bucket that keeps versions.
/// The entry becomes the current version (numbered by the class); the
/// one it replaces becomes an older version, unless both are the `null`
/// version (then its tails go to the garbage list). With `tag` the new
/// version gets an id ([`version_id`]); without, it is the `null`
/// version, and an older `null` version is dropped too (S3's suspended
/// versioning). Output: postcard `Option<String>`, the version's id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionedCommit {
    pub commit: Commit,
    pub tag: Option<String>,
}

/// Input of `s3.vcomplete`: [`Complete`] in a bucket that keeps versions,
/// the version numbered as `s3.vcommit` does. Output: as `s3.vcommit`'s.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionedComplete {
    pub complete: Complete,
    pub tag: Option<String>,
}

/// Input of `s3.vremove`: a DELETE in a bucket that keeps (or kept)
/// versions. With `version_id` (`"null"` for the null version), that
/// version goes for good (its tails to the garbage list); the newest
/// older version becomes current if no version is newer. Without, a
/// delete marker (`marker`, JSON [`IndexEntry`]) becomes the newest
/// version, with an id made from `tag` (without a tag: the `null`
/// version, replacing the older `null` one). Output: postcard
/// [`Removed`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionedRemove {
    pub key: String,
    pub version_id: Option<String>,
    pub marker: Vec<u8>,
    pub tag: Option<String>,
    pub now_ms: u64,
    /// Governance retention is bypassed (the caller may and asked to).
    pub bypass_governance: bool,
}

/// What `s3.vremove` did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removed {
    /// The version removed or the delete marker made (`None`: the
    /// `null` version, or nothing was there to remove).
    pub version_id: Option<String>,
    /// Whether that version is a delete marker.
    pub delete_marker: bool,
    /// Whether a version was removed or a marker made.
    pub done: bool,
}

/// Input of `s3.begin`: keep pending record `tag` ([`Garbage`], JSON)
/// before an upload writes its data, unless the shard is sealed (refused
/// with [`S3_BUCKET_GONE`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Begin {
    pub tag: String,
    pub record: Vec<u8>,
}

/// Input of `s3.abandon`: move pending record `tag` to the garbage list
/// if it is still there (a writer that has not committed for too long).
/// Output: postcard `bool`, whether it was.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Abandon {
    pub tag: String,
    pub now_ms: u64,
}

/// `s3.commit` refusal: the upload's pending record is gone (the
/// collector took it, with the tails); the upload must start again.
pub const S3_PENDING_GONE: u32 = 1;
/// `s3.commit` and `s3.remove` refusal: the condition does not hold.
pub const S3_PRECONDITION: u32 = 2;
/// `s3.remove` with a condition: the object does not exist.
pub const S3_NO_SUCH_KEY: u32 = 3;
/// `s3.commit` refusal: the shard is sealed (its bucket is being or was
/// deleted); the gateway's record of the bucket is stale.
pub const S3_BUCKET_GONE: u32 = 4;
/// `s3.seal` refusal: the shard holds an object.
pub const S3_NOT_EMPTY: u32 = 5;
/// `s3.part`, `s3.complete`, `s3.abort` refusal: no such upload (never
/// made, completed or aborted).
pub const S3_NO_SUCH_UPLOAD: u32 = 6;
/// `s3.complete` refusal: a part named is not the one uploaded (missing,
/// or uploaded again since the gateway read it).
pub const S3_INVALID_PART: u32 = 7;
/// `s3.vremove` refusal: the version id is not one of ours.
pub const S3_NO_SUCH_VERSION: u32 = 8;
/// `s3.vremove` refusal: the version is locked ([`lock_refusal`]).
pub const S3_LOCKED: u32 = 9;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_keys_sort_by_time_and_read_back() {
        let a = garbage_key(999, "zz");
        let b = garbage_key(1_000, "aa");
        assert!(a < b, "older records come first whatever their tags");
        assert_eq!(garbage_time(&a), Some(999));
        assert_eq!(garbage_time(&b), Some(1_000));
        assert_eq!(garbage_time(b"o/x"), None);
        assert_eq!(garbage_time(b"g12"), None);
    }

    #[test]
    fn entries_read_with_fields_they_lack() {
        let e = IndexEntry {
            size: 5,
            etag: "abc".into(),
            mtime_ms: 1,
            owner: "u".into(),
            layout: Layout::Striped {
                stripe: 4,
                segments: vec![Segment {
                    size: 5,
                    tails: Tails {
                        prefix: "b.t".into(),
                        count: 2,
                    },
                    checksums: Default::default(),
                }],
            },
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
        };
        let text = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<IndexEntry>(&text).unwrap(), e);
        let minimal = r#"{"size":1,"etag":"x","mtime_ms":2,"owner":"u","layout":"inline"}"#;
        let m: IndexEntry = serde_json::from_str(minimal).unwrap();
        assert!(m.tails().is_empty() && m.meta.is_empty() && m.parts == 0);
        assert_eq!(e.tails()[0].object(1), "b.t.1");
    }
}
