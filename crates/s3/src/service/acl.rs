//! The ACL operations of the S3 API (GetBucketAcl, PutBucketAcl,
//! GetObjectAcl, PutObjectAcl) and the reading of an ACL a request gives
//! (a canned name, `x-amz-grant-*` headers or an `AccessControlPolicy`).
//! The trait methods in `service.rs` call these.

use crate::acl::{self, Given, HeaderError};
use crate::Gateway;
use loligo_types::s3 as idx;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

/// The grant headers of an ACL request, in [`acl::from_headers`]' order.
macro_rules! grant_headers {
    ($i:expr) => {
        [
            $i.grant_read.as_deref(),
            $i.grant_write.as_deref(),
            $i.grant_read_acp.as_deref(),
            $i.grant_write_acp.as_deref(),
            $i.grant_full_control.as_deref(),
        ]
    };
}

impl Gateway {
    /// The ACL a request gives: a canned name (one of `allowed`) or grant
    /// headers naming users that exist, not both; neither is `private`.
    pub(super) async fn given_acl(
        &self,
        canned: Option<&str>,
        allowed: &[&str],
        headers: [Option<&str>; 5],
    ) -> S3Result<Given> {
        let grants = acl::from_headers(headers).map_err(|e| match e {
            HeaderError::Malformed(m) => s3_error!(InvalidArgument, "a grant header: {m}"),
            HeaderError::Email(a) => s3_error!(
                UnresolvableGrantByEmailAddress,
                "no user has the e-mail address '{a}' (users here have none)"
            ),
        })?;
        if let Some(c) = canned {
            if grants.is_some() {
                return Err(s3_error!(
                    InvalidRequest,
                    "give a canned ACL or grant headers, not both"
                ));
            }
            if !allowed.contains(&c) {
                return Err(s3_error!(InvalidArgument, "'{c}' is not a canned ACL here"));
            }
        }
        if let Some(g) = &grants {
            self.check_grantees(g).await?;
        }
        Ok(Given {
            canned: canned.map(str::to_string),
            grants,
        })
    }

    /// Refused unless every user `grants` names exists.
    async fn check_grantees(&self, grants: &[idx::Grant]) -> S3Result<()> {
        for g in grants {
            if let idx::Grantee::User(id) = &g.grantee {
                if self.secrets().display_name(id).await?.is_none() {
                    return Err(s3_error!(InvalidArgument, "no user has the id '{id}'"));
                }
            }
        }
        Ok(())
    }

    /// `grants` as S3 shows them, users with their display names (groups
    /// first, as RGW lists them).
    async fn grants_dto(&self, grants: &[idx::Grant]) -> S3Result<Vec<Grant>> {
        let mut out = Vec::with_capacity(grants.len());
        let (groups, users): (Vec<_>, Vec<_>) =
            (grants.iter()).partition(|g| !matches!(g.grantee, idx::Grantee::User(_)));
        for g in groups.into_iter().chain(users) {
            let grantee = match &g.grantee {
                idx::Grantee::User(id) => {
                    let o = self.owner_of(id).await?;
                    Grantee {
                        display_name: o.display_name,
                        id: o.id,
                        type_: Type::from_static(Type::CANONICAL_USER),
                        email_address: None,
                        uri: None,
                    }
                }
                group => Grantee {
                    display_name: None,
                    id: None,
                    type_: Type::from_static(Type::GROUP),
                    email_address: None,
                    uri: acl::uri(group).map(str::to_string),
                },
            };
            out.push(Grant {
                grantee: Some(grantee),
                permission: Some(Permission::from_static(acl::permission_name(g.permission))),
            });
        }
        Ok(out)
    }

    /// The grants of an `AccessControlPolicy` body, for something `owner`
    /// owns (a policy naming another owner is refused: ownership does
    /// not change by ACL).
    async fn policy_grants(
        &self,
        p: &AccessControlPolicy,
        owner: &str,
    ) -> S3Result<Vec<idx::Grant>> {
        if let Some(id) = p.owner.as_ref().and_then(|o| o.id.as_deref()) {
            if id != owner {
                return Err(s3_error!(
                    AccessDenied,
                    "the policy names '{id}' as owner; the owner is '{owner}'"
                ));
            }
        }
        let mut out = Vec::new();
        for g in p.grants.iter().flatten() {
            let (Some(grantee), Some(perm)) = (&g.grantee, &g.permission) else {
                return Err(s3_error!(
                    MalformedACLError,
                    "a grant without grantee or permission"
                ));
            };
            let permission = acl::permission(perm.as_str()).ok_or_else(|| {
                s3_error!(MalformedACLError, "unknown permission {}", perm.as_str())
            })?;
            let who = match grantee.type_.as_str() {
                Type::CANONICAL_USER => match &grantee.id {
                    Some(id) => idx::Grantee::User(id.clone()),
                    None => return Err(s3_error!(MalformedACLError, "a user grantee without ID")),
                },
                Type::GROUP => (grantee.uri.as_deref().and_then(acl::group))
                    .ok_or_else(|| s3_error!(MalformedACLError, "an unknown group"))?,
                Type::AMAZON_CUSTOMER_BY_EMAIL => {
                    return Err(s3_error!(
                        UnresolvableGrantByEmailAddress,
                        "no user has the e-mail address '{}' (users here have none)",
                        grantee.email_address.as_deref().unwrap_or_default()
                    ))
                }
                t => return Err(s3_error!(MalformedACLError, "unknown grantee type {t}")),
            };
            out.push(idx::Grant {
                grantee: who,
                permission,
            });
        }
        self.check_grantees(&out).await?;
        Ok(out)
    }

    /// The ACL a PutBucketAcl or PutObjectAcl sets: its canned name, its
    /// headers or its body (exactly one).
    async fn acl_to_set(
        &self,
        canned: Option<&str>,
        allowed: &[&str],
        headers: [Option<&str>; 5],
        policy: Option<&AccessControlPolicy>,
        owner: &str,
    ) -> S3Result<Given> {
        let given = self.given_acl(canned, allowed, headers).await?;
        match policy {
            Some(_) if given != Given::default() => Err(s3_error!(
                InvalidRequest,
                "give an ACL by canned name, headers or body: one of them"
            )),
            Some(p) => Ok(Given {
                canned: None,
                grants: Some(self.policy_grants(p, owner).await?),
            }),
            None if given == Given::default() => Err(s3_error!(
                MissingSecurityHeader,
                "give an ACL: x-amz-acl, x-amz-grant-* or an AccessControlPolicy body"
            )),
            None => Ok(given),
        }
    }

    pub(super) async fn s3_get_bucket_acl(
        &self,
        req: S3Request<GetBucketAclInput>,
    ) -> S3Result<S3Response<GetBucketAclOutput>> {
        let who = self.caller(&req).await?;
        let b = (self.bucket_allowing(&req.input.bucket, &who, idx::Permission::ReadAcp)).await?;
        Ok(S3Response::new(GetBucketAclOutput {
            grants: Some(self.grants_dto(&b.grants()).await?),
            owner: Some(self.owner_of(&b.owner).await?),
        }))
    }

    pub(super) async fn s3_put_bucket_acl(
        &self,
        req: S3Request<PutBucketAclInput>,
    ) -> S3Result<S3Response<PutBucketAclOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let b = (self.bucket_allowing(&i.bucket, &who, idx::Permission::WriteAcp)).await?;
        let set = self
            .acl_to_set(
                i.acl.as_ref().map(|a| a.as_str()),
                acl::BUCKET_CANNED,
                grant_headers!(i),
                i.access_control_policy.as_ref(),
                &b.owner,
            )
            .await?;
        b.check_acl(&set, &b.owner)?;
        self.update_bucket(&b.name, |r| {
            if r.id != b.id {
                return Err(s3_error!(NoSuchBucket, "bucket '{}' was deleted", b.name));
            }
            r.acl = set.canned.clone();
            r.grants = set.grants.clone();
            Ok(())
        })
        .await?;
        Ok(S3Response::new(PutBucketAclOutput::default()))
    }

    pub(super) async fn s3_get_object_acl(
        &self,
        req: S3Request<GetObjectAclInput>,
    ) -> S3Result<S3Response<GetObjectAclOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let b = self.bucket(&i.bucket).await?;
        let (e, _) = self
            .object_allowing(
                &b,
                &i.key,
                i.version_id.as_deref(),
                &who,
                idx::Permission::ReadAcp,
            )
            .await?;
        Ok(S3Response::new(GetObjectAclOutput {
            grants: Some(self.grants_dto(&super::entry_grants(&b, &e)).await?),
            owner: Some(self.owner_of(&e.owner).await?),
            ..Default::default()
        }))
    }

    pub(super) async fn s3_put_object_acl(
        &self,
        req: S3Request<PutObjectAclInput>,
    ) -> S3Result<S3Response<PutObjectAclOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let b = self.bucket(&i.bucket).await?;
        let (e, _) = self
            .object_allowing(
                &b,
                &i.key,
                i.version_id.as_deref(),
                &who,
                idx::Permission::WriteAcp,
            )
            .await?;
        let set = self
            .acl_to_set(
                i.acl.as_ref().map(|a| a.as_str()),
                acl::OBJECT_CANNED,
                grant_headers!(i),
                i.access_control_policy.as_ref(),
                &e.owner,
            )
            .await?;
        b.check_acl(&set, &e.owner)?;
        self.change_version(&b, &i.key, &e, |entry| {
            // Judged again on the entry changed: its ACL may have changed
            // since it was read.
            if !super::entry_allows(&b, entry, &who, idx::Permission::WriteAcp) {
                return Err(s3_error!(AccessDenied, "the ACL of '{}' changed", i.key));
            }
            entry.acl = set.canned.clone();
            entry.grants = set.grants.clone();
            Ok(())
        })
        .await?;
        Ok(S3Response::new(PutObjectAclOutput::default()))
    }
}
