//! S3's object lock (write once, read many): a bucket made with it keeps
//! versions for good and may give new versions a default retention;
//! each version may carry a retention (governance or compliance mode,
//! until a date) and a legal hold. The `s3.vremove` class method refuses
//! to remove a locked version, so no race with a lock being set can
//! remove one; this module reads and changes the settings.

use crate::bucket::{BucketRecord, DefaultRetention as BucketDefault, ObjectLock};
use crate::Gateway;
use loligo_types::s3::{IndexEntry, LockMode, Permission, Retention};
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

fn mode_of(m: &str) -> S3Result<LockMode> {
    match m {
        ObjectLockRetentionMode::GOVERNANCE => Ok(LockMode::Governance),
        ObjectLockRetentionMode::COMPLIANCE => Ok(LockMode::Compliance),
        other => Err(s3_error!(MalformedXML, "'{other}' is not a retention mode")),
    }
}

fn mode_name(m: LockMode) -> &'static str {
    match m {
        LockMode::Governance => ObjectLockRetentionMode::GOVERNANCE,
        LockMode::Compliance => ObjectLockRetentionMode::COMPLIANCE,
    }
}

fn ms_of(t: &Timestamp) -> u64 {
    let ns = time::OffsetDateTime::from(t.clone()).unix_timestamp_nanos();
    u64::try_from(ns / 1_000_000).unwrap_or(0)
}

fn hold_of(s: &str) -> S3Result<bool> {
    match s {
        ObjectLockLegalHoldStatus::ON => Ok(true),
        ObjectLockLegalHoldStatus::OFF => Ok(false),
        other => Err(s3_error!(MalformedXML, "'{other}' is not ON or OFF")),
    }
}

/// Refused unless bucket `b` was made with object lock.
fn lock_enabled(b: &BucketRecord) -> S3Result<&ObjectLock> {
    (b.object_lock.as_ref()).ok_or_else(|| {
        s3_error!(
            InvalidRequest,
            "bucket '{}' was not made with object lock",
            b.name
        )
    })
}

/// The lock a new version in `b` gets from a write's headers (or else
/// the bucket's default retention).
pub(super) fn of_put(
    b: &BucketRecord,
    mode: Option<&ObjectLockMode>,
    until: Option<&Timestamp>,
    hold: Option<&ObjectLockLegalHoldStatus>,
) -> S3Result<(Option<Retention>, bool)> {
    if mode.is_none() && until.is_none() && hold.is_none() {
        let default = b.object_lock.as_ref().and_then(|l| l.default.as_ref());
        return Ok((default.map(|d| d.from(crate::now_ms())), false));
    }
    lock_enabled(b)?;
    let retention = match (mode, until) {
        (None, None) => None,
        (Some(m), Some(t)) => Some(Retention {
            mode: mode_of(m.as_str())?,
            until_ms: ms_of(t),
        }),
        _ => {
            return Err(s3_error!(
                InvalidArgument,
                "give the object lock mode and its retain-until date together"
            ))
        }
    };
    let hold = hold.map(|h| hold_of(h.as_str())).transpose()?;
    Ok((retention, hold.unwrap_or(false)))
}

/// Refused unless retention `new` may replace `old` at `now_ms`: a
/// retention in force may only be lengthened in its mode, unless it is
/// governance and `bypass` is asked.
fn check_change(
    old: Option<&Retention>,
    new: &Retention,
    now_ms: u64,
    bypass: bool,
) -> S3Result<()> {
    let Some(old) = old.filter(|o| o.until_ms > now_ms) else {
        return Ok(());
    };
    let kept = new.mode == old.mode && new.until_ms >= old.until_ms;
    match (old.mode, kept, bypass) {
        (_, true, _) | (LockMode::Governance, false, true) => Ok(()),
        _ => Err(s3_error!(
            AccessDenied,
            "the version's retention may not be shortened or its mode changed"
        )),
    }
}

impl Gateway {
    /// The version a lock call names, if `who` may change it (`want`).
    async fn locked_version(
        &self,
        bucket: &str,
        key: &str,
        version: Option<&str>,
        who: &super::Caller,
        want: Permission,
    ) -> S3Result<(BucketRecord, IndexEntry)> {
        let b = self.bucket(bucket).await?;
        lock_enabled(&b)?;
        let (e, _) = self.object_allowing(&b, key, version, who, want).await?;
        Ok((b, e))
    }

    pub(super) async fn s3_put_object_lock_configuration(
        &self,
        req: S3Request<PutObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<PutObjectLockConfigurationOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let b = self.bucket_owned(&i.bucket, &who).await?;
        if b.object_lock.is_none() && b.versioning != loligo_types::s3::Versioning::Enabled {
            return Err(s3_error!(
                InvalidBucketState,
                "object lock needs a bucket that keeps versions: enable versioning first"
            ));
        }
        let c = i.object_lock_configuration.as_ref();
        let enabled = c.and_then(|c| c.object_lock_enabled.as_ref());
        if enabled.map(|e| e.as_str()) != Some(ObjectLockEnabled::ENABLED) {
            return Err(s3_error!(MalformedXML, "ObjectLockEnabled must be Enabled"));
        }
        let default = match c
            .and_then(|c| c.rule.as_ref())
            .and_then(|r| r.default_retention.as_ref())
        {
            None => None,
            Some(d) => {
                let mode = mode_of(d.mode.as_ref().map_or("", |m| m.as_str()))?;
                let (days, years) = match (d.days, d.years) {
                    (Some(n), None) => (n, false),
                    (None, Some(n)) => (n, true),
                    _ => {
                        return Err(s3_error!(
                            MalformedXML,
                            "a default retention has Days or Years, one of them"
                        ))
                    }
                };
                let most = if years { 100 } else { 36_500 };
                let days = u32::try_from(days)
                    .ok()
                    .filter(|&n| n > 0 && n <= most)
                    .ok_or_else(|| {
                        crate::custom_error(
                            "InvalidRetentionPeriod",
                            http::StatusCode::BAD_REQUEST,
                            format!(
                                "a retention period is 1 to {most} {}",
                                if years { "years" } else { "days" }
                            ),
                        )
                    })?;
                Some(BucketDefault { mode, days, years })
            }
        };
        self.configure(&i.bucket, &who, |r| {
            if r.versioning != loligo_types::s3::Versioning::Enabled {
                return Err(s3_error!(
                    InvalidBucketState,
                    "versioning was suspended meanwhile"
                ));
            }
            r.object_lock = Some(ObjectLock {
                default: default.clone(),
            });
            Ok(())
        })
        .await?;
        Ok(S3Response::new(PutObjectLockConfigurationOutput::default()))
    }

    pub(super) async fn s3_get_object_lock_configuration(
        &self,
        req: S3Request<GetObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<GetObjectLockConfigurationOutput>> {
        let who = self.caller(&req).await?;
        let b = self.bucket_owned(&req.input.bucket, &who).await?;
        let Some(lock) = b.object_lock else {
            return Err(s3_error!(
                ObjectLockConfigurationNotFoundError,
                "bucket '{}' was not made with object lock",
                b.name
            ));
        };
        let rule = lock.default.map(|d| ObjectLockRule {
            default_retention: Some(DefaultRetention {
                mode: Some(ObjectLockRetentionMode::from_static(mode_name(d.mode))),
                days: (!d.years).then_some(d.days as i32),
                years: d.years.then_some(d.days as i32),
            }),
        });
        Ok(S3Response::new(GetObjectLockConfigurationOutput {
            object_lock_configuration: Some(ObjectLockConfiguration {
                object_lock_enabled: Some(ObjectLockEnabled::from_static(
                    ObjectLockEnabled::ENABLED,
                )),
                rule,
            }),
        }))
    }

    pub(super) async fn s3_put_object_retention(
        &self,
        req: S3Request<PutObjectRetentionInput>,
    ) -> S3Result<S3Response<PutObjectRetentionOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let (b, e) = self
            .locked_version(
                &i.bucket,
                &i.key,
                i.version_id.as_deref(),
                &who,
                Permission::WriteAcp,
            )
            .await?;
        let r = i.retention.as_ref();
        let new = Retention {
            mode: mode_of(r.and_then(|r| r.mode.as_ref()).map_or("", |m| m.as_str()))?,
            until_ms: (r.and_then(|r| r.retain_until_date.as_ref()))
                .map(ms_of)
                .ok_or_else(|| s3_error!(MalformedXML, "a retention has a RetainUntilDate"))?,
        };
        let asked = i.bypass_governance_retention.unwrap_or(false);
        let v = i.version_id.as_deref();
        let bypass = asked && self.may_bypass(&req, &b, &who, &i.key, v).await?;
        let now = crate::now_ms();
        check_change(e.retention.as_ref(), &new, now, bypass)?;
        self.change_version(&b, &i.key, &e, |entry| {
            check_change(entry.retention.as_ref(), &new, now, bypass)?;
            entry.retention = Some(new.clone());
            Ok(())
        })
        .await?;
        Ok(S3Response::new(PutObjectRetentionOutput::default()))
    }

    pub(super) async fn s3_get_object_retention(
        &self,
        req: S3Request<GetObjectRetentionInput>,
    ) -> S3Result<S3Response<GetObjectRetentionOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let (_, e) = self
            .locked_version(
                &i.bucket,
                &i.key,
                i.version_id.as_deref(),
                &who,
                Permission::Read,
            )
            .await?;
        let Some(r) = e.retention else {
            return Err(s3_error!(
                NoSuchObjectLockConfiguration,
                "'{}' has no retention",
                i.key
            ));
        };
        Ok(S3Response::new(GetObjectRetentionOutput {
            retention: Some(ObjectLockRetention {
                mode: Some(ObjectLockRetentionMode::from_static(mode_name(r.mode))),
                retain_until_date: Some(super::timestamp(r.until_ms)),
            }),
        }))
    }

    pub(super) async fn s3_put_object_legal_hold(
        &self,
        req: S3Request<PutObjectLegalHoldInput>,
    ) -> S3Result<S3Response<PutObjectLegalHoldOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let status = i.legal_hold.as_ref().and_then(|h| h.status.as_ref());
        let hold = hold_of(status.map_or("", |s| s.as_str()))?;
        let (b, e) = self
            .locked_version(
                &i.bucket,
                &i.key,
                i.version_id.as_deref(),
                &who,
                Permission::WriteAcp,
            )
            .await?;
        self.change_version(&b, &i.key, &e, |entry| {
            entry.legal_hold = hold;
            Ok(())
        })
        .await?;
        Ok(S3Response::new(PutObjectLegalHoldOutput::default()))
    }

    pub(super) async fn s3_get_object_legal_hold(
        &self,
        req: S3Request<GetObjectLegalHoldInput>,
    ) -> S3Result<S3Response<GetObjectLegalHoldOutput>> {
        let who = self.caller(&req).await?;
        let i = &req.input;
        let (_, e) = self
            .locked_version(
                &i.bucket,
                &i.key,
                i.version_id.as_deref(),
                &who,
                Permission::Read,
            )
            .await?;
        let status = match e.legal_hold {
            true => ObjectLockLegalHoldStatus::ON,
            false => ObjectLockLegalHoldStatus::OFF,
        };
        Ok(S3Response::new(GetObjectLegalHoldOutput {
            legal_hold: Some(ObjectLockLegalHold {
                status: Some(ObjectLockLegalHoldStatus::from_static(status)),
            }),
        }))
    }
}

/// What a GET or HEAD says of `e`'s lock: its mode, until when, and
/// whether it is held.
pub(super) fn shown(
    e: &IndexEntry,
) -> (
    Option<ObjectLockMode>,
    Option<Timestamp>,
    Option<ObjectLockLegalHoldStatus>,
) {
    let mode = (e.retention.as_ref()).map(|r| ObjectLockMode::from_static(mode_name(r.mode)));
    let until = (e.retention.as_ref()).map(|r| super::timestamp(r.until_ms));
    let hold = e
        .legal_hold
        .then(|| ObjectLockLegalHoldStatus::from_static(ObjectLockLegalHoldStatus::ON));
    (mode, until, hold)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retention_in_force_only_lengthens_unless_governance_is_bypassed() {
        let r = |mode, until_ms| Retention { mode, until_ms };
        let (g, c) = (LockMode::Governance, LockMode::Compliance);
        assert!(check_change(None, &r(g, 5), 10, false).is_ok());
        assert!(
            check_change(Some(&r(c, 5)), &r(g, 1), 10, false).is_ok(),
            "ended"
        );
        assert!(check_change(Some(&r(g, 20)), &r(g, 30), 10, false).is_ok());
        assert!(check_change(Some(&r(g, 20)), &r(g, 15), 10, false).is_err());
        assert!(check_change(Some(&r(g, 20)), &r(g, 15), 10, true).is_ok());
        assert!(check_change(Some(&r(g, 20)), &r(c, 30), 10, false).is_err());
        assert!(check_change(Some(&r(c, 20)), &r(c, 30), 10, false).is_ok());
        assert!(check_change(Some(&r(c, 20)), &r(c, 15), 10, true).is_err());
        assert!(check_change(Some(&r(c, 20)), &r(g, 30), 10, true).is_err());
    }
}
