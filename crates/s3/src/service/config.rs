//! A bucket's access settings beside its ACL: the public access block
//! and object ownership (S3's). Both are kept in the bucket's record and
//! honoured by every access check (`BucketRecord::honoured`,
//! `BucketRecord::check_acl`). The trait methods in `service.rs` call
//! these.

use crate::bucket::{BucketRecord, PublicBlock, OWNER_ENFORCED};
use crate::Gateway;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

/// The object ownership S3 names `o`, or a refusal.
pub(super) fn ownership(o: &str) -> S3Result<String> {
    match o {
        ObjectOwnership::BUCKET_OWNER_ENFORCED
        | ObjectOwnership::BUCKET_OWNER_PREFERRED
        | ObjectOwnership::OBJECT_WRITER => Ok(o.to_string()),
        other => Err(s3_error!(
            InvalidArgument,
            "'{other}' is not an object ownership"
        )),
    }
}

impl Gateway {
    /// Change bucket `name`'s record with `change`, if `who` owns it (or
    /// its policy allows the request).
    pub(super) async fn configure(
        &self,
        name: &str,
        who: &super::Caller,
        change: impl Fn(&mut BucketRecord) -> S3Result<()>,
    ) -> S3Result<()> {
        let b = self.bucket_owned(name, who).await?;
        self.update_bucket(&b.name, |r| {
            if r.id != b.id {
                return Err(s3_error!(NoSuchBucket, "bucket '{}' was deleted", b.name));
            }
            change(r)
        })
        .await
        .map(|_| ())
    }

    pub(super) async fn s3_get_bucket_cors(
        &self,
        req: S3Request<GetBucketCorsInput>,
    ) -> S3Result<S3Response<GetBucketCorsOutput>> {
        let who = self.caller(&req).await?;
        let b = self.bucket_owned(&req.input.bucket, &who).await?;
        if b.cors.is_empty() {
            return Err(s3_error!(
                NoSuchCORSConfiguration,
                "bucket '{}' has no CORS rules",
                b.name
            ));
        }
        let rules = (b.cors.into_iter())
            .map(|r| CORSRule {
                id: r.id,
                allowed_methods: r.methods,
                allowed_origins: r.origins,
                allowed_headers: (!r.headers.is_empty()).then_some(r.headers),
                expose_headers: (!r.expose.is_empty()).then_some(r.expose),
                max_age_seconds: r.max_age_secs,
            })
            .collect();
        Ok(S3Response::new(GetBucketCorsOutput {
            cors_rules: Some(rules),
        }))
    }

    pub(super) async fn s3_put_bucket_cors(
        &self,
        req: S3Request<PutBucketCorsInput>,
    ) -> S3Result<S3Response<PutBucketCorsOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let rules: Vec<crate::cors::Rule> = (i.cors_configuration.cors_rules.iter())
            .map(|r| crate::cors::Rule {
                id: r.id.clone(),
                methods: r.allowed_methods.clone(),
                origins: r.allowed_origins.clone(),
                headers: r.allowed_headers.clone().unwrap_or_default(),
                expose: r.expose_headers.clone().unwrap_or_default(),
                max_age_secs: r.max_age_seconds,
            })
            .collect();
        crate::cors::check(&rules).map_err(|m| s3_error!(InvalidRequest, "{m}"))?;
        self.configure(&i.bucket, &who, |r| {
            r.cors = rules.clone();
            Ok(())
        })
        .await?;
        Ok(S3Response::new(PutBucketCorsOutput {}))
    }

    pub(super) async fn s3_delete_bucket_cors(
        &self,
        req: S3Request<DeleteBucketCorsInput>,
    ) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
        let who = self.caller(&req).await?;
        self.configure(&req.input.bucket, &who, |r| {
            r.cors.clear();
            Ok(())
        })
        .await?;
        Ok(S3Response::new(DeleteBucketCorsOutput {}))
    }

    pub(super) async fn s3_get_bucket_policy(
        &self,
        req: S3Request<GetBucketPolicyInput>,
    ) -> S3Result<S3Response<GetBucketPolicyOutput>> {
        // Only the owner, whatever the policy allows (a policy cannot
        // hand out the power to change the policy or what guards it).
        let who = self.caller(&req).await?.without_policy();
        let b = self.bucket_owned(&req.input.bucket, &who).await?;
        let policy = b
            .policy
            .ok_or_else(|| s3_error!(NoSuchBucketPolicy, "bucket '{}' has no policy", b.name))?;
        Ok(S3Response::new(GetBucketPolicyOutput {
            policy: Some(policy),
        }))
    }

    pub(super) async fn s3_put_bucket_policy(
        &self,
        req: S3Request<PutBucketPolicyInput>,
    ) -> S3Result<S3Response<PutBucketPolicyOutput>> {
        // Only the owner, whatever the policy allows (a policy cannot
        // hand out the power to change the policy or what guards it).
        let who = self.caller(&req).await?.without_policy();
        let i = &req.input;
        let p = crate::policy::Policy::parse(&i.policy)
            .map_err(|m| s3_error!(MalformedPolicy, "{m}"))?;
        let public = p.is_public();
        self.configure(&i.bucket, &who, |r| {
            if public
                && r.public_block
                    .as_ref()
                    .is_some_and(|b| b.block_public_policy)
            {
                return Err(s3_error!(
                    AccessDenied,
                    "bucket '{}' blocks public policies",
                    r.name
                ));
            }
            r.policy = Some(i.policy.clone());
            Ok(())
        })
        .await?;
        Ok(S3Response::new(PutBucketPolicyOutput {}))
    }

    pub(super) async fn s3_delete_bucket_policy(
        &self,
        req: S3Request<DeleteBucketPolicyInput>,
    ) -> S3Result<S3Response<DeleteBucketPolicyOutput>> {
        // Only the owner, whatever the policy allows (a policy cannot
        // hand out the power to change the policy or what guards it).
        let who = self.caller(&req).await?.without_policy();
        self.configure(&req.input.bucket, &who, |r| {
            r.policy = None;
            Ok(())
        })
        .await?;
        Ok(S3Response::new(DeleteBucketPolicyOutput {}))
    }

    pub(super) async fn s3_get_bucket_policy_status(
        &self,
        req: S3Request<GetBucketPolicyStatusInput>,
    ) -> S3Result<S3Response<GetBucketPolicyStatusOutput>> {
        let who = self.caller(&req).await?;
        let b = self.bucket_owned(&req.input.bucket, &who).await?;
        let public = match crate::access::policy_of(&b)? {
            Some(p) => p.is_public(),
            None => false,
        };
        Ok(S3Response::new(GetBucketPolicyStatusOutput {
            policy_status: Some(PolicyStatus {
                is_public: Some(public),
            }),
        }))
    }

    pub(super) async fn s3_get_public_access_block(
        &self,
        req: S3Request<GetPublicAccessBlockInput>,
    ) -> S3Result<S3Response<GetPublicAccessBlockOutput>> {
        // Only the owner, whatever the policy allows (a policy cannot
        // hand out the power to change the policy or what guards it).
        let who = self.caller(&req).await?.without_policy();
        let b = self.bucket_owned(&req.input.bucket, &who).await?;
        let p = b.public_block.ok_or_else(|| {
            crate::custom_error(
                "NoSuchPublicAccessBlockConfiguration",
                http::StatusCode::NOT_FOUND,
                format!("bucket '{}' has no public access block", b.name),
            )
        })?;
        Ok(S3Response::new(GetPublicAccessBlockOutput {
            public_access_block_configuration: Some(PublicAccessBlockConfiguration {
                block_public_acls: Some(p.block_public_acls),
                ignore_public_acls: Some(p.ignore_public_acls),
                block_public_policy: Some(p.block_public_policy),
                restrict_public_buckets: Some(p.restrict_public_buckets),
            }),
        }))
    }

    pub(super) async fn s3_put_public_access_block(
        &self,
        req: S3Request<PutPublicAccessBlockInput>,
    ) -> S3Result<S3Response<PutPublicAccessBlockOutput>> {
        // Only the owner, whatever the policy allows (a policy cannot
        // hand out the power to change the policy or what guards it).
        let who = self.caller(&req).await?.without_policy();
        let i = &req.input;
        let c = &i.public_access_block_configuration;
        let p = PublicBlock {
            block_public_acls: c.block_public_acls.unwrap_or(false),
            ignore_public_acls: c.ignore_public_acls.unwrap_or(false),
            block_public_policy: c.block_public_policy.unwrap_or(false),
            restrict_public_buckets: c.restrict_public_buckets.unwrap_or(false),
        };
        self.configure(&i.bucket, &who, |r| {
            r.public_block = Some(p.clone());
            Ok(())
        })
        .await?;
        Ok(S3Response::new(PutPublicAccessBlockOutput {}))
    }

    pub(super) async fn s3_delete_public_access_block(
        &self,
        req: S3Request<DeletePublicAccessBlockInput>,
    ) -> S3Result<S3Response<DeletePublicAccessBlockOutput>> {
        // Only the owner, whatever the policy allows (a policy cannot
        // hand out the power to change the policy or what guards it).
        let who = self.caller(&req).await?.without_policy();
        self.configure(&req.input.bucket, &who, |r| {
            r.public_block = None;
            Ok(())
        })
        .await?;
        Ok(S3Response::new(DeletePublicAccessBlockOutput {}))
    }

    pub(super) async fn s3_get_bucket_ownership_controls(
        &self,
        req: S3Request<GetBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<GetBucketOwnershipControlsOutput>> {
        let who = self.caller(&req).await?;
        let b = self.bucket_owned(&req.input.bucket, &who).await?;
        let o = b.ownership.ok_or_else(|| {
            s3_error!(
                OwnershipControlsNotFoundError,
                "bucket '{}' has no ownership controls",
                b.name
            )
        })?;
        Ok(S3Response::new(GetBucketOwnershipControlsOutput {
            ownership_controls: Some(OwnershipControls {
                rules: vec![OwnershipControlsRule {
                    object_ownership: ObjectOwnership::from(o),
                }],
            }),
        }))
    }

    pub(super) async fn s3_put_bucket_ownership_controls(
        &self,
        req: S3Request<PutBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<PutBucketOwnershipControlsOutput>> {
        // Only the owner, whatever the policy allows (a policy cannot
        // hand out the power to change the policy or what guards it).
        let who = self.caller(&req).await?.without_policy();
        let i = &req.input;
        let [rule] = i.ownership_controls.rules.as_slice() else {
            return Err(s3_error!(MalformedXML, "ownership controls hold one rule"));
        };
        let o = ownership(rule.object_ownership.as_str())?;
        self.configure(&i.bucket, &who, |r| {
            if o == OWNER_ENFORCED && crate::acl::is_public(&r.grants()) {
                return Err(s3_error!(
                    InvalidBucketAclWithObjectOwnership,
                    "bucket '{}' has a public ACL: make it private first",
                    r.name
                ));
            }
            r.ownership = Some(o.clone());
            Ok(())
        })
        .await?;
        Ok(S3Response::new(PutBucketOwnershipControlsOutput {}))
    }

    pub(super) async fn s3_delete_bucket_ownership_controls(
        &self,
        req: S3Request<DeleteBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<DeleteBucketOwnershipControlsOutput>> {
        // Only the owner, whatever the policy allows (a policy cannot
        // hand out the power to change the policy or what guards it).
        let who = self.caller(&req).await?.without_policy();
        self.configure(&req.input.bucket, &who, |r| {
            r.ownership = None;
            Ok(())
        })
        .await?;
        Ok(S3Response::new(DeleteBucketOwnershipControlsOutput {}))
    }
}
