//! GetObjectAttributes: what HEAD says of an object and more (its parts,
//! with their sizes and checksums, a page at a time), as asked. The trait
//! method in `service.rs` calls this.

use crate::Gateway;
use loligo_types::s3::{Layout, Permission};
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result};

/// The most parts one answer lists (S3's).
const PARTS_MAX: usize = 1000;

impl Gateway {
    pub(super) async fn s3_get_object_attributes(
        &self,
        req: S3Request<GetObjectAttributesInput>,
    ) -> S3Result<S3Response<GetObjectAttributesOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let b = self.bucket(&i.bucket).await?;
        let (e, _) = self
            .object_allowing(&b, &i.key, i.version_id.as_deref(), &who, Permission::Read)
            .await?;
        // The header's list may come as one comma-separated value.
        let asked = |a: &str| {
            (i.object_attributes.iter())
                .flat_map(|x| x.as_str().split(','))
                .any(|x| x.trim() == a)
        };
        let checksum =
            (asked(ObjectAttributes::CHECKSUM) && !e.checksums.is_empty()).then(|| Checksum {
                checksum_type: e.checksum_type.clone().map(ChecksumType::from),
                ..super::sums_of(&e)
            });
        let parts = match &e.layout {
            Layout::Striped { segments, .. }
                if e.parts > 0 && asked(ObjectAttributes::OBJECT_PARTS) =>
            {
                let max = i
                    .max_parts
                    .map_or(PARTS_MAX, |m| (m.max(0) as usize).min(PARTS_MAX));
                let after = i.part_number_marker.map_or(0, |m| m.max(0) as usize);
                let page: Vec<ObjectPart> = (segments.iter().enumerate())
                    .skip(after)
                    .take(max)
                    .map(|(n, s)| {
                        let c = super::sums_in(&s.checksums);
                        ObjectPart {
                            part_number: Some(n as i32 + 1),
                            size: Some(s.size as i64),
                            checksum_crc32: c.checksum_crc32,
                            checksum_crc32c: c.checksum_crc32c,
                            checksum_sha1: c.checksum_sha1,
                            checksum_sha256: c.checksum_sha256,
                            checksum_crc64nvme: c.checksum_crc64nvme,
                        }
                    })
                    .collect();
                let last = page.last().and_then(|p| p.part_number);
                let truncated = after + page.len() < segments.len();
                Some(GetObjectAttributesParts {
                    is_truncated: Some(truncated),
                    max_parts: Some(max as i32),
                    next_part_number_marker: last.filter(|_| truncated),
                    part_number_marker: i.part_number_marker,
                    parts: Some(page),
                    total_parts_count: Some(e.parts as i32),
                })
            }
            _ => None,
        };
        Ok(S3Response::new(GetObjectAttributesOutput {
            e_tag: asked(ObjectAttributes::ETAG).then(|| ETag::Strong(e.etag.clone())),
            object_size: asked(ObjectAttributes::OBJECT_SIZE).then_some(e.size as i64),
            storage_class: asked(ObjectAttributes::STORAGE_CLASS)
                .then(|| StorageClass::from_static(StorageClass::STANDARD)),
            checksum,
            object_parts: parts,
            last_modified: Some(super::timestamp(e.mtime_ms)),
            version_id: super::versions::response_id(&b, &e),
            ..Default::default()
        }))
    }
}
