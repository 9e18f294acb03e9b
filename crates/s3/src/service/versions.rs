//! S3's versioning on the gateway: a bucket's versioning status
//! (GetBucketVersioning, PutBucketVersioning), reading one version of an
//! object, the delete-marker answers, and ListObjectVersions. The trait
//! methods in `service.rs` call these; the class methods `s3.vcommit`,
//! `s3.vcomplete` and `s3.vremove` keep the versions.
//!
//! A change of status reaches another gateway within the time it keeps
//! a bucket's record (2 s), as S3 too asks clients to wait after
//! enabling versioning before writing.

use super::{etag, timestamp, Enc};
use crate::bucket::BucketRecord;
use crate::list::{Page, Starts};
use crate::{internal, Gateway};
use loligo_types::s3::{
    omap_key, version_data_key, version_key, version_prefix, vseq_of_id, IndexEntry, Permission,
    Versioning, ENTRY, VERSION,
};
use s3s::dto::*;
use s3s::{s3_error, S3Error, S3Request, S3Response, S3Result};

/// The most older versions of one key read to find its `null` version.
const HISTORY_READ: u32 = 10_000;

/// The `versionId` S3 shows for `e` (`null` for the null version).
pub(super) fn shown_id(e: &IndexEntry) -> String {
    e.version_id.clone().unwrap_or_else(|| "null".into())
}

/// The version id a response carries for `e` in `b`: its id, or `null`
/// in a bucket that keeps versions (none where they are suspended or
/// were never kept, as S3 answers).
pub(super) fn response_id(b: &BucketRecord, e: &IndexEntry) -> Option<String> {
    (b.versioning == Versioning::Enabled || e.version_id.is_some()).then(|| shown_id(e))
}

/// S3's answer to reading a delete marker: `code`, with the marker's
/// headers.
fn marker_error(code: s3s::S3ErrorCode, m: &IndexEntry, msg: String) -> S3Error {
    let mut err = S3Error::with_message(code, msg);
    let mut h = http::HeaderMap::new();
    h.insert(
        "x-amz-delete-marker",
        http::HeaderValue::from_static("true"),
    );
    if let Ok(v) = http::HeaderValue::from_str(&shown_id(m)) {
        h.insert("x-amz-version-id", v);
    }
    err.set_headers(h);
    err
}

impl Gateway {
    /// `key`'s older versions and delete markers, newest first, with
    /// their omap keys.
    async fn history(
        &self,
        b: &BucketRecord,
        key: &str,
        limit: u32,
    ) -> S3Result<Vec<(Vec<u8>, IndexEntry)>> {
        let start = version_prefix(key);
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
        for (k, v) in got.into_iter().take_while(|(k, _)| k.starts_with(&start)) {
            let e: IndexEntry = serde_json::from_slice(&v)
                .map_err(|e| s3_error!(InternalError, "a version of '{key}': {e}"))?;
            out.push((k, e));
        }
        Ok(out)
    }

    /// The miss of `key` in a bucket that keeps versions: `NoSuchKey`,
    /// with the delete marker's headers when one is the newest version.
    pub(super) async fn missing(&self, b: &BucketRecord, key: &str) -> S3Error {
        let plain = || {
            let mut e = s3_error!(NoSuchKey, "'{key}' does not exist");
            // As RGW answers: no delete marker stands in for the key.
            let mut h = http::HeaderMap::new();
            h.insert(
                "x-amz-delete-marker",
                http::HeaderValue::from_static("false"),
            );
            e.set_headers(h);
            e
        };
        if b.versioning == Versioning::Off {
            return plain();
        }
        match self.history(b, key, 1).await {
            Ok(h) => match h.first() {
                Some((_, m)) if m.delete_marker => marker_error(
                    s3s::S3ErrorCode::NoSuchKey,
                    m,
                    format!("'{key}' was deleted (its newest version is a delete marker)"),
                ),
                _ => plain(),
            },
            Err(e) => e,
        }
    }

    /// Version `id` (`"null"`: the null version) of `key` with its data
    /// if kept inline, if `who` may do `want` to it; a delete marker is
    /// refused as S3 refuses reading one (405).
    pub(super) async fn version_allowing(
        &self,
        b: &BucketRecord,
        key: &str,
        id: &str,
        who: &super::Caller,
        want: Permission,
    ) -> S3Result<(IndexEntry, bytes::Bytes)> {
        let found = self.version(b, key, id).await?;
        let (e, _) = &found;
        if e.delete_marker {
            return Err(marker_error(
                s3s::S3ErrorCode::MethodNotAllowed,
                e,
                format!("version {id} of '{key}' is a delete marker"),
            ));
        }
        if !super::entry_allows(b, e, who, want) {
            return Err(s3_error!(
                AccessDenied,
                "the ACL of version {id} of '{key}' does not allow you {}",
                crate::acl::permission_name(want)
            ));
        }
        Ok(found)
    }

    /// The tags of version `version` of `key` (the current one without),
    /// if it exists.
    pub(crate) async fn tags_of(
        &self,
        b: &BucketRecord,
        key: &str,
        version: Option<&str>,
    ) -> S3Result<Option<crate::tags::Tags>> {
        match version {
            None => Ok(self.lookup(b, key).await?.map(|(e, _)| e.tags)),
            Some(v) => match self.version(b, key, v).await {
                Ok((e, _)) => Ok(Some(e.tags)),
                Err(e) if e.code() == &s3s::S3ErrorCode::NoSuchVersion => Ok(None),
                Err(e) => Err(e),
            },
        }
    }

    /// Change what version `e` of `key` (current or older) says of
    /// itself with `change`, if it is still that version.
    pub(super) async fn change_version(
        &self,
        b: &BucketRecord,
        key: &str,
        e: &IndexEntry,
        change: impl Fn(&mut IndexEntry) -> S3Result<()>,
    ) -> S3Result<IndexEntry> {
        let older = self.older(b, key, e).await?;
        self.update_entry(b, key, older, |entry| {
            if entry.version_id != e.version_id {
                return Err(s3_error!(OperationAborted, "'{key}' changed: try again"));
            }
            change(entry)
        })
        .await
    }

    /// Where version `e` of `key` is kept: `None` if it is the current
    /// version, else its number among the older ones.
    pub(super) async fn older(
        &self,
        b: &BucketRecord,
        key: &str,
        e: &IndexEntry,
    ) -> S3Result<Option<u64>> {
        let current = self.lookup(b, key).await?;
        match current {
            Some((c, _)) if c.version_id == e.version_id => Ok(None),
            _ => Ok(Some(e.vseq)),
        }
    }

    /// Version `id` of `key` (current or older), with its inline data.
    async fn version(
        &self,
        b: &BucketRecord,
        key: &str,
        id: &str,
    ) -> S3Result<(IndexEntry, bytes::Bytes)> {
        let want = (id != "null").then_some(id);
        let none = || s3_error!(NoSuchVersion, "'{key}' has no version {id}");
        let vseq = match want {
            Some(w) => Some(vseq_of_id(w).ok_or_else(none)?),
            None => None,
        };
        if let Some(found) = self.lookup(b, key).await? {
            if found.0.version_id.as_deref() == want {
                return Ok(found);
            }
        }
        let vseq = match vseq {
            Some(v) => v,
            None => {
                let h = self.history(b, key, HISTORY_READ).await?;
                let (_, e) = (h.into_iter())
                    .find(|(_, e)| e.version_id.is_none())
                    .ok_or_else(none)?;
                e.vseq
            }
        };
        let (vk, dk) = (version_key(key, vseq), version_data_key(key, vseq));
        let mut got = match (self.index())
            .omap_get(&b.shard_object(key), vec![vk.clone(), dk.clone()])
            .await
        {
            Ok(g) => g,
            Err(e) if e.is_not_found() => return Err(none()),
            Err(e) => return Err(internal(e)),
        };
        let raw = got.remove(&vk).ok_or_else(none)?;
        let e: IndexEntry = serde_json::from_slice(&raw)
            .map_err(|e| s3_error!(InternalError, "a version of '{key}': {e}"))?;
        if e.version_id.as_deref() != want {
            return Err(none());
        }
        let data = got.remove(&dk).map(bytes::Bytes::from).unwrap_or_default();
        Ok((e, data))
    }

    pub(super) async fn s3_get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        let who = self.caller(&req).await?;
        let b = self.bucket_owned(&req.input.bucket, &who).await?;
        let status = match b.versioning {
            Versioning::Off => None,
            Versioning::Enabled => Some(BucketVersioningStatus::ENABLED),
            Versioning::Suspended => Some(BucketVersioningStatus::SUSPENDED),
        };
        Ok(S3Response::new(GetBucketVersioningOutput {
            status: status.map(BucketVersioningStatus::from_static),
            mfa_delete: None,
        }))
    }

    pub(super) async fn s3_put_bucket_versioning(
        &self,
        req: S3Request<PutBucketVersioningInput>,
    ) -> S3Result<S3Response<PutBucketVersioningOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let b = self.bucket_owned(&i.bucket, &who).await?;
        let c = &i.versioning_configuration;
        if c.mfa_delete
            .as_ref()
            .is_some_and(|m| m.as_str() == MFADelete::ENABLED)
        {
            return Err(s3_error!(NotImplemented, "MFA delete is not supported"));
        }
        let to = match c.status.as_ref().map(|s| s.as_str()) {
            Some(BucketVersioningStatus::ENABLED) => Versioning::Enabled,
            Some(BucketVersioningStatus::SUSPENDED) => Versioning::Suspended,
            Some(other) => {
                return Err(s3_error!(
                    MalformedXML,
                    "versioning status '{other}' is neither Enabled nor Suspended"
                ))
            }
            None => return Err(s3_error!(MalformedXML, "a versioning status is needed")),
        };
        if b.object_lock.is_some() && to != Versioning::Enabled {
            return Err(s3_error!(
                InvalidBucketState,
                "a bucket with object lock keeps versions"
            ));
        }
        self.update_bucket(&b.name, |r| {
            if r.id != b.id {
                return Err(s3_error!(NoSuchBucket, "bucket '{}' was deleted", b.name));
            }
            // Judged again on the record as stored: the lock may have
            // been set since the cached record was read.
            if r.object_lock.is_some() && to != Versioning::Enabled {
                return Err(s3_error!(
                    InvalidBucketState,
                    "a bucket with object lock keeps versions"
                ));
            }
            // A bucket that kept versions never goes back to keeping none.
            r.versioning = to;
            Ok(())
        })
        .await?;
        Ok(S3Response::new(PutBucketVersioningOutput::default()))
    }

    /// Where a listing of versions resumes after `key` (and, with
    /// `version`, after that version of it).
    async fn version_starts(
        &self,
        b: &BucketRecord,
        prefix: &str,
        key: Option<&str>,
        version: Option<&str>,
    ) -> S3Result<Starts> {
        let Some(k) = key.filter(|k| *k >= prefix) else {
            return Ok(Starts {
                current: Some(omap_key(ENTRY, prefix.as_bytes())),
                versions: Some(omap_key(VERSION, prefix.as_bytes())),
            });
        };
        let mut current = omap_key(ENTRY, k.as_bytes());
        current.push(0);
        // Past every version of the key.
        let mut versions = omap_key(VERSION, k.as_bytes());
        versions.push(1);
        if let Some(v) = version {
            let want = (v != "null").then_some(v);
            let cur = self.lookup(b, k).await?;
            if cur.is_some_and(|(e, _)| e.version_id.as_deref() == want) {
                versions = version_prefix(k);
            } else if let Some(vseq) = want.and_then(vseq_of_id) {
                versions = version_key(k, vseq);
                versions.push(0);
            } else if want.is_none() {
                let h = self.history(b, k, HISTORY_READ).await?;
                if let Some((vk, _)) = h.into_iter().find(|(_, e)| e.version_id.is_none()) {
                    versions = vk;
                    versions.push(0);
                }
            }
        }
        Ok(Starts {
            current: Some(current),
            versions: Some(versions),
        })
    }

    pub(super) async fn s3_list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        let uid = self.caller(&req).await?;
        let i = req.input;
        let b = (self.bucket_allowing(&i.bucket, &uid, Permission::Read)).await?;
        let q = Gateway::listing_query(
            i.prefix.clone(),
            i.delimiter.clone(),
            i.key_marker.clone(),
            i.max_keys,
        )?;
        let (key_marker, version_marker) = (
            i.key_marker.as_deref().filter(|k| !k.is_empty()),
            i.version_id_marker.as_deref().filter(|v| !v.is_empty()),
        );
        let starts = (self.version_starts(&b, &q.prefix, key_marker, version_marker)).await?;
        let page = self.list_from(&b, &q, starts).await?;
        let owners = self.owners_of(&page).await?;
        let last_version = (page.entries.last())
            .filter(|(k, _)| page.last.as_deref() == Some(k.as_str()))
            .map(|(_, e)| shown_id(e));
        let (versions, markers) = version_rows(&page, &owners, version_marker.and(key_marker));
        let enc = Enc::of(i.encoding_type.as_ref());
        let page = enc.page(page);
        let versions = (versions.into_iter())
            .map(|mut v| {
                v.key = enc.opt(v.key.as_deref());
                v
            })
            .collect();
        let markers: Vec<DeleteMarkerEntry> = (markers.into_iter())
            .map(|mut m| {
                m.key = enc.opt(m.key.as_deref());
                m
            })
            .collect();
        Ok(S3Response::new(ListObjectVersionsOutput {
            name: Some(i.bucket),
            prefix: Some(enc.s(&q.prefix)),
            key_marker: enc.opt(i.key_marker.as_deref()),
            version_id_marker: i.version_id_marker,
            max_keys: Some(q.max_keys as i32),
            delimiter: enc.opt(q.delimiter.as_deref()),
            is_truncated: Some(page.truncated),
            next_key_marker: page.truncated.then(|| page.last.clone()).flatten(),
            next_version_id_marker: page.truncated.then_some(last_version).flatten(),
            versions: Some(versions),
            delete_markers: (!markers.is_empty()).then_some(markers),
            common_prefixes: super::prefixes(&page),
            encoding_type: i.encoding_type,
            ..Default::default()
        }))
    }
}

/// The versions and delete markers of a page, each key's first (its
/// newest) marked latest, unless the page resumes within `resumed`.
fn version_rows(
    page: &Page,
    owners: &std::collections::BTreeMap<String, Owner>,
    resumed: Option<&str>,
) -> (Vec<ObjectVersion>, Vec<DeleteMarkerEntry>) {
    let (mut versions, mut markers) = (Vec::new(), Vec::new());
    let mut prev: Option<&str> = resumed;
    for (k, e) in &page.entries {
        let latest = prev != Some(k.as_str());
        prev = Some(k.as_str());
        let owner = owners.get(&e.owner).cloned();
        if e.delete_marker {
            markers.push(DeleteMarkerEntry {
                is_latest: Some(latest),
                key: Some(k.clone()),
                last_modified: Some(timestamp(e.mtime_ms)),
                owner,
                version_id: Some(shown_id(e)),
            });
            continue;
        }
        versions.push(ObjectVersion {
            key: Some(k.clone()),
            version_id: Some(shown_id(e)),
            is_latest: Some(latest),
            e_tag: Some(etag(e)),
            last_modified: Some(timestamp(e.mtime_ms)),
            size: Some(e.size as i64),
            owner,
            storage_class: Some(ObjectVersionStorageClass::from_static(
                ObjectVersionStorageClass::STANDARD,
            )),
            ..Default::default()
        });
    }
    (versions, markers)
}
