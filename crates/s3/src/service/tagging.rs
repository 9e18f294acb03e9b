//! The tagging operations of the S3 API: an object's tags (kept in its
//! entry) and a bucket's (kept in its record). The trait methods in
//! `service.rs` call these.

use crate::tags::{self, Tags, BUCKET_TAGS_MAX, OBJECT_TAGS_MAX};
use crate::Gateway;
use loligo_types::s3::Permission;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

/// The tag set of a `Tagging` body, checked against S3's limits.
fn tags_of_body(t: &Tagging, max: usize) -> S3Result<Tags> {
    let pairs = (t.tag_set.iter())
        .map(|t| {
            (
                t.key.clone().unwrap_or_default(),
                t.value.clone().unwrap_or_default(),
            )
        })
        .collect();
    tags::check(pairs, max).map_err(|m| s3_error!(InvalidTag, "{m}"))
}

fn tag_set(t: &Tags) -> TagSet {
    (t.iter())
        .map(|(k, v)| Tag {
            key: Some(k.clone()),
            value: Some(v.clone()),
        })
        .collect()
}

impl Gateway {
    /// Set the tags of version `version` of `key` (the current one
    /// without).
    async fn set_object_tags(
        &self,
        bucket: &str,
        key: &str,
        version: Option<&str>,
        who: &super::Caller,
        t: Tags,
    ) -> S3Result<Option<String>> {
        let b = self.bucket(bucket).await?;
        let (e, _) = (self.object_allowing(&b, key, version, who, Permission::Write)).await?;
        let e = self
            .change_version(&b, key, &e, |entry| {
                entry.tags = t.clone();
                Ok(())
            })
            .await?;
        Ok(super::versions::response_id(&b, &e))
    }

    pub(super) async fn s3_get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let b = self.bucket(&i.bucket).await?;
        let (e, _) = self
            .object_allowing(&b, &i.key, i.version_id.as_deref(), &who, Permission::Read)
            .await?;
        Ok(S3Response::new(GetObjectTaggingOutput {
            tag_set: tag_set(&e.tags),
            version_id: super::versions::response_id(&b, &e),
        }))
    }

    pub(super) async fn s3_put_object_tagging(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let t = tags_of_body(&i.tagging, OBJECT_TAGS_MAX)?;
        let (b, k, v) = (&i.bucket, &i.key, i.version_id.as_deref());
        let version_id = self.set_object_tags(b, k, v, &who, t).await?;
        Ok(S3Response::new(PutObjectTaggingOutput { version_id }))
    }

    pub(super) async fn s3_delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let (b, k, v) = (&i.bucket, &i.key, i.version_id.as_deref());
        let version_id = (self.set_object_tags(b, k, v, &who, Tags::new())).await?;
        Ok(S3Response::new(DeleteObjectTaggingOutput { version_id }))
    }

    pub(super) async fn s3_get_bucket_tagging(
        &self,
        req: S3Request<GetBucketTaggingInput>,
    ) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        let who = self.caller(&req).await?;
        let b = self.bucket_owned(&req.input.bucket, &who).await?;
        if b.tags.is_empty() {
            return Err(s3_error!(NoSuchTagSet, "bucket '{}' has no tags", b.name));
        }
        Ok(S3Response::new(GetBucketTaggingOutput {
            tag_set: tag_set(&b.tags),
        }))
    }

    /// Set bucket `name`'s tags, if `who` owns it (or its policy allows).
    async fn set_bucket_tags(&self, name: &str, who: &super::Caller, t: Tags) -> S3Result<()> {
        let b = self.bucket_owned(name, who).await?;
        self.update_bucket(&b.name, |r| {
            if r.id != b.id {
                return Err(s3_error!(NoSuchBucket, "bucket '{}' was deleted", b.name));
            }
            r.tags = t.clone();
            Ok(())
        })
        .await
        .map(|_| ())
    }

    pub(super) async fn s3_put_bucket_tagging(
        &self,
        req: S3Request<PutBucketTaggingInput>,
    ) -> S3Result<S3Response<PutBucketTaggingOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let t = tags_of_body(&i.tagging, BUCKET_TAGS_MAX)?;
        self.set_bucket_tags(&i.bucket, &who, t).await?;
        Ok(S3Response::new(PutBucketTaggingOutput {}))
    }

    pub(super) async fn s3_delete_bucket_tagging(
        &self,
        req: S3Request<DeleteBucketTaggingInput>,
    ) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
        let who = self.caller(&req).await?;
        (self.set_bucket_tags(&req.input.bucket, &who, Tags::new())).await?;
        Ok(S3Response::new(DeleteBucketTaggingOutput {}))
    }
}
