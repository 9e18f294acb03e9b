//! The multipart operations of the S3 API: create, upload part (and
//! upload part copy), complete, abort, list parts, list uploads. The
//! trait methods in `service.rs` call these.

use super::{
    body_length, checksums_of, content_headers, timestamp, write_condition, Digests, PutHeaders,
};
use crate::multipart::NamedPart;
use crate::Gateway;
use std::collections::BTreeMap;

/// The checksums a request gives, by key (`sha256`).
fn given_sums(c: Checksum) -> BTreeMap<String, String> {
    [
        ("crc32", c.checksum_crc32),
        ("crc32c", c.checksum_crc32c),
        ("sha1", c.checksum_sha1),
        ("sha256", c.checksum_sha256),
        ("crc64nvme", c.checksum_crc64nvme),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_string(), v?)))
    .collect()
}

/// The checksum algorithm and type an upload is made with (S3's
/// default type: full-object for CRC-64/NVME, else composite).
fn upload_checksum(
    alg: Option<&ChecksumAlgorithm>,
    ty: Option<&ChecksumType>,
) -> S3Result<(Option<String>, Option<String>)> {
    use crate::checksum::Algorithm;
    let Some(alg) = alg else {
        return match ty {
            Some(_) => Err(s3_error!(
                InvalidRequest,
                "a checksum type needs an algorithm"
            )),
            None => Ok((None, None)),
        };
    };
    let a = Algorithm::parse(alg.as_str()).ok_or_else(|| {
        s3_error!(
            InvalidRequest,
            "unknown checksum algorithm {}",
            alg.as_str()
        )
    })?;
    let ty = match ty.map(|t| t.as_str()) {
        Some(t @ ("COMPOSITE" | "FULL_OBJECT")) => t,
        Some(other) => return Err(s3_error!(InvalidRequest, "unknown checksum type {other}")),
        None if a == Algorithm::Crc64Nvme => "FULL_OBJECT",
        None => "COMPOSITE",
    };
    let crc = matches!(
        a,
        Algorithm::Crc32 | Algorithm::Crc32c | Algorithm::Crc64Nvme
    );
    match (ty, a) {
        ("FULL_OBJECT", _) if !crc => Err(s3_error!(
            InvalidRequest,
            "a full-object checksum is a CRC's"
        )),
        ("COMPOSITE", Algorithm::Crc64Nvme) => Err(s3_error!(
            InvalidRequest,
            "CRC-64/NVME makes full-object checksums only"
        )),
        _ => Ok((Some(alg.as_str().to_string()), Some(ty.to_string()))),
    }
}
use loligo_types::s3::{Part, Permission, Tails, Upload, PARTS_MAX};
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

/// The most parts or uploads one listing page holds.
const PAGE_MAX: usize = 1000;

/// `bytes=FIRST-LAST` of a part copy's source, as a range of `size`.
fn copy_range(r: Option<&str>, size: u64) -> S3Result<std::ops::Range<u64>> {
    let Some(r) = r else {
        return Ok(0..size);
    };
    let bad = || {
        s3_error!(
            InvalidArgument,
            "x-amz-copy-source-range '{r}' is not bytes=FIRST-LAST"
        )
    };
    let (a, b) = r
        .strip_prefix("bytes=")
        .and_then(|s| s.split_once('-'))
        .ok_or_else(bad)?;
    let (a, b): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if a > b || b >= size {
        return Err(s3_error!(
            InvalidRange,
            "the copy range {a}-{b} is outside the source's {size} bytes"
        ));
    }
    Ok(a..b + 1)
}

/// A part as S3's DTO.
fn part_dto(n: u32, p: &Part) -> s3s::dto::Part {
    let get = |k: &str| p.checksums.get(k).cloned();
    s3s::dto::Part {
        part_number: Some(n as i32),
        e_tag: Some(ETag::Strong(p.etag.clone())),
        size: Some(p.size as i64),
        last_modified: Some(timestamp(p.mtime_ms)),
        checksum_crc32: get("crc32"),
        checksum_crc32c: get("crc32c"),
        checksum_sha1: get("sha1"),
        checksum_sha256: get("sha256"),
        checksum_crc64nvme: get("crc64nvme"),
    }
}

impl Gateway {
    pub(super) async fn s3_create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let who = self.caller(&req).await?;
        let uid = who.signed()?;
        let i = req.input;
        super::refuse_unsupported_put(
            i.server_side_encryption.is_some(),
            i.sse_customer_algorithm.is_some(),
            i.ssekms_key_id.is_some(),
        )?;
        let tags = super::tags_of(i.tagging.as_deref())?;
        let (checksum_algorithm, checksum_type) =
            upload_checksum(i.checksum_algorithm.as_ref(), i.checksum_type.as_ref())?;
        let b = (self.bucket_allowing(&i.bucket, &who, Permission::Write)).await?;
        let (retention, legal_hold) = super::lock::of_put(
            &b,
            i.object_lock_mode.as_ref(),
            i.object_lock_retain_until_date.as_ref(),
            i.object_lock_legal_hold_status.as_ref(),
        )?;
        let acl = self
            .given_acl(
                i.acl.as_ref().map(|a| a.as_str()),
                crate::acl::OBJECT_CANNED,
                super::object_grant_headers!(i),
            )
            .await?;
        let upload = Upload {
            owner: super::new_owner(&b, &uid, &acl)?,
            initiated_ms: crate::now_ms(),
            content_type: i.content_type,
            meta: i.metadata.unwrap_or_default().into_iter().collect(),
            headers: content_headers(
                i.content_encoding,
                i.content_disposition,
                i.content_language,
                i.cache_control,
                i.expires.as_ref(),
            ),
            acl: acl.canned,
            grants: acl.grants,
            tags,
            retention,
            legal_hold,
            checksum_algorithm,
            checksum_type,
        };
        let id = self.create_upload(&b, &i.key, &upload).await?;
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(i.bucket),
            key: Some(i.key),
            upload_id: Some(id),
            checksum_algorithm: upload.checksum_algorithm.map(ChecksumAlgorithm::from),
            checksum_type: upload.checksum_type.map(ChecksumType::from),
            ..Default::default()
        }))
    }

    pub(super) async fn s3_upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        let who = self.caller(&req).await?;
        let trailer = req.trailing_headers.clone();
        let len = body_length(
            &req.headers,
            req.input.content_length,
            req.input.body.is_some(),
        )?;
        let i = req.input;
        let b = (self.bucket_allowing(&i.bucket, &who, Permission::Write)).await?;
        let upload = self.upload(&b, &i.key, &i.upload_id).await?;
        // A part of an upload made with an algorithm is checksummed by it.
        let algorithm = (i.checksum_algorithm)
            .or_else(|| upload.checksum_algorithm.map(ChecksumAlgorithm::from));
        let h = PutHeaders {
            content_type: None,
            meta: None,
            headers: Default::default(),
            acl: Default::default(),
            tags: Default::default(),
            retention: None,
            legal_hold: false,
            content_md5: i.content_md5,
            sums: checksums_of!(i),
            algorithm,
        };
        if len > crate::PUT_MAX {
            return Err(s3_error!(EntityTooLarge, "a part is at most 5 GiB"));
        }
        let mut d = Digests::for_put(&h)?;
        let mut seen = |c: &[u8]| d.update(c);
        let body = i
            .body
            .map(futures::StreamExt::boxed)
            .unwrap_or_else(|| futures::StreamExt::boxed(futures::stream::empty()));
        let written = self
            .write_part(&b, &i.key, i.part_number, body, len, &mut seen)
            .await?;
        let trailer = trailer.and_then(|t| t.take());
        let (etag, checksums) = match d.finish(&h, trailer.as_ref()) {
            Ok(v) => v,
            Err(e) => {
                self.drop_written(&b, &i.key, written).await;
                return Err(e);
            }
        };
        let part = Part {
            size: len,
            etag,
            mtime_ms: crate::now_ms(),
            tails: written_tails(&written)?,
            checksums,
        };
        let n = i.part_number as u32;
        self.commit_part(&b, &i.key, &i.upload_id, n, &part, written)
            .await?;
        let get = |k: &str| part.checksums.get(k).cloned();
        Ok(S3Response::new(UploadPartOutput {
            e_tag: Some(ETag::Strong(part.etag.clone())),
            checksum_crc32: get("crc32"),
            checksum_crc32c: get("crc32c"),
            checksum_sha1: get("sha1"),
            checksum_sha256: get("sha256"),
            checksum_crc64nvme: get("crc64nvme"),
            ..Default::default()
        }))
    }

    pub(super) async fn s3_upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        let who = self.caller(&req).await?;
        let uid = who.signed()?;
        let i = req.input;
        let conditions = super::CopyConditions {
            if_match: i.copy_source_if_match.as_ref(),
            if_none_match: i.copy_source_if_none_match.as_ref(),
            if_modified_since: i.copy_source_if_modified_since.as_ref(),
            if_unmodified_since: i.copy_source_if_unmodified_since.as_ref(),
        };
        let (_, src, inline) = self.copy_source(&uid, &i.copy_source, conditions).await?;
        let range = copy_range(i.copy_source_range.as_deref(), src.size)?;
        if range.end - range.start > crate::PUT_MAX {
            return Err(s3_error!(EntityTooLarge, "a part is at most 5 GiB"));
        }
        let b = (self.bucket_allowing(&i.bucket, &who, Permission::Write)).await?;
        self.upload(&b, &i.key, &i.upload_id).await?;
        let len = range.end - range.start;
        let mut md5 = s3s::crypto::Md5::default();
        let mut seen = |c: &[u8]| s3s::crypto::Checksum::update(&mut md5, c);
        let body = Box::pin(self.read_range(&src, inline, range));
        let written = self
            .write_part(&b, &i.key, i.part_number, body, len, &mut seen)
            .await?;
        let part = Part {
            size: len,
            etag: crate::names::hex(&s3s::crypto::Checksum::finalize(md5)),
            mtime_ms: crate::now_ms(),
            tails: written_tails(&written)?,
            checksums: Default::default(),
        };
        let n = i.part_number as u32;
        self.commit_part(&b, &i.key, &i.upload_id, n, &part, written)
            .await?;
        Ok(S3Response::new(UploadPartCopyOutput {
            copy_part_result: Some(CopyPartResult {
                e_tag: Some(ETag::Strong(part.etag)),
                last_modified: Some(timestamp(part.mtime_ms)),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    pub(super) async fn s3_complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let who = self.caller(&req).await?;
        let i = req.input;
        let b = (self.bucket_allowing(&i.bucket, &who, Permission::Write)).await?;
        let cond = write_condition(i.if_match.as_ref(), i.if_none_match.as_ref())?;
        let named = (i.multipart_upload.and_then(|m| m.parts)).unwrap_or_default();
        let mut parts = Vec::with_capacity(named.len());
        for p in named {
            let n = p
                .part_number
                .filter(|n| (1..=PARTS_MAX as i32).contains(n))
                .ok_or_else(|| s3_error!(InvalidPart, "a part without a valid number"))?;
            let etag = p
                .e_tag
                .as_ref()
                .map(|e| e.value().to_string())
                .unwrap_or_default();
            parts.push(NamedPart {
                number: n as u32,
                etag,
                checksums: given_sums(checksums_of!(p)),
            });
        }
        let whole = given_sums(checksums_of!(i));
        let done = self.complete_upload(&b, &i.key, &i.upload_id, &parts, &whole, cond);
        let e = match done.await {
            Ok(e) => e,
            Err(err) if err.code() == &s3s::S3ErrorCode::NoSuchUpload => self
                .completed_before(&b, &i.key, &parts)
                .await?
                .ok_or(err)?,
            Err(err) => return Err(err),
        };
        let s = super::sums_of(&e);
        Ok(S3Response::new(CompleteMultipartUploadOutput {
            bucket: Some(i.bucket.clone()),
            key: Some(i.key.clone()),
            version_id: super::versions::response_id(&b, &e),
            checksum_crc32: s.checksum_crc32,
            checksum_crc32c: s.checksum_crc32c,
            checksum_sha1: s.checksum_sha1,
            checksum_sha256: s.checksum_sha256,
            checksum_crc64nvme: s.checksum_crc64nvme,
            checksum_type: e.checksum_type.clone().map(ChecksumType::from),
            e_tag: Some(ETag::Strong(e.etag)),
            location: Some(format!("/{}/{}", i.bucket, i.key)),
            ..Default::default()
        }))
    }

    /// The current version of `key`, if it is what completing `parts`
    /// made (a completion sent again, as a client whose answer was lost
    /// does, is answered as the first was).
    async fn completed_before(
        &self,
        b: &crate::bucket::BucketRecord,
        key: &str,
        parts: &[NamedPart],
    ) -> S3Result<Option<loligo_types::s3::IndexEntry>> {
        let etags: Vec<&str> = parts.iter().map(|p| p.etag.as_str()).collect();
        let Ok(want) = crate::multipart::multipart_etag(&etags) else {
            return Ok(None);
        };
        let current = self.lookup(b, key).await?;
        Ok(current.map(|(e, _)| e).filter(|e| e.etag == want))
    }

    pub(super) async fn s3_abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let b = (self.bucket_allowing(&i.bucket, &who, Permission::Write)).await?;
        self.abort_upload(&b, &i.key, &i.upload_id).await?;
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }

    pub(super) async fn s3_list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        let who = self.caller(&req).await?;
        let i = req.input;
        let b = (self.bucket_allowing(&i.bucket, &who, Permission::Write)).await?;
        let max = i
            .max_parts
            .map_or(PAGE_MAX, |m| m.clamp(0, PAGE_MAX as i32) as usize);
        let after = i.part_number_marker.unwrap_or(0).max(0) as u32;
        let upload = self.upload(&b, &i.key, &i.upload_id).await?;
        let owner = self.owner_of(&upload.owner).await?;
        let (parts, more) = match max {
            0 => (Vec::new(), false),
            _ => (self.list_parts(&b, &i.key, &i.upload_id, after, max)).await?,
        };
        let next = parts.last().map(|(n, _)| *n as i32);
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(i.bucket),
            key: Some(i.key),
            upload_id: Some(i.upload_id),
            max_parts: Some(max as i32),
            part_number_marker: i.part_number_marker,
            next_part_number_marker: next,
            is_truncated: Some(more),
            parts: Some(parts.iter().map(|(n, p)| part_dto(*n, p)).collect()),
            owner: Some(owner.clone()),
            initiator: Some(Initiator {
                display_name: owner.display_name,
                id: owner.id,
            }),
            storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
            ..Default::default()
        }))
    }

    pub(super) async fn s3_list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        let who = self.caller(&req).await?;
        let i = req.input;
        if i.delimiter.as_deref().is_some_and(|d| !d.is_empty()) {
            return Err(s3_error!(
                NotImplemented,
                "listing uploads with a delimiter is not supported yet"
            ));
        }
        let b = (self.bucket_allowing(&i.bucket, &who, Permission::Write)).await?;
        let max = i
            .max_uploads
            .map_or(PAGE_MAX, |m| m.clamp(0, PAGE_MAX as i32) as usize);
        let prefix = i.prefix.clone().unwrap_or_default();
        let marker = (i.key_marker.as_deref())
            .filter(|k| !k.is_empty())
            .map(|k| (k, i.upload_id_marker.as_deref().unwrap_or("\u{10FFFF}")));
        let (ups, more) = self.list_uploads(&b, &prefix, marker, max).await?;
        let last = ups.last().map(|u| (u.key.clone(), u.id.clone()));
        let mut uploads = Vec::with_capacity(ups.len());
        for u in ups {
            let owner = self.owner_of(&u.upload.owner).await?;
            uploads.push(MultipartUpload {
                key: Some(u.key),
                upload_id: Some(u.id),
                initiated: Some(timestamp(u.upload.initiated_ms)),
                owner: Some(owner.clone()),
                initiator: Some(Initiator {
                    display_name: owner.display_name,
                    id: owner.id,
                }),
                storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
                ..Default::default()
            });
        }
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(i.bucket),
            prefix: i.prefix,
            key_marker: i.key_marker,
            upload_id_marker: i.upload_id_marker,
            max_uploads: Some(max as i32),
            is_truncated: Some(more),
            next_key_marker: last.as_ref().filter(|_| more).map(|l| l.0.clone()),
            next_upload_id_marker: last.filter(|_| more).map(|l| l.1),
            uploads: Some(uploads),
            ..Default::default()
        }))
    }
}

/// The data objects a part's upload wrote.
fn written_tails(w: &crate::object::Written) -> S3Result<Tails> {
    match w {
        crate::object::Written::Striped { segment, .. } => Ok(segment.tails.clone()),
        crate::object::Written::Inline(_) => {
            Err(s3_error!(InternalError, "a part's data is always striped"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_ranges_read_as_s3_writes_them() {
        assert_eq!(copy_range(None, 10).unwrap(), 0..10);
        assert_eq!(copy_range(Some("bytes=2-5"), 10).unwrap(), 2..6);
        assert!(copy_range(Some("bytes=5-2"), 10).is_err());
        assert!(copy_range(Some("bytes=0-10"), 10).is_err());
        assert!(copy_range(Some("2-5"), 10).is_err());
    }
}
