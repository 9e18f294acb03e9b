//! Buckets: their records in the registry object (one omap entry each,
//! set only if absent, so two gateways creating one name cannot both
//! win), and deletion (every index shard sealed first, so no entry lands
//! in a bucket being deleted).
//!
//! It must never delete a bucket that holds an object.

use crate::names::{self, BUCKET, REGISTRY};
use crate::{internal, Gateway};
use loligo_client::{ClientError, IoCtx};
use loligo_types::ops::{Cmp, OpError, SubOp};
use loligo_types::s3::{
    omap_key, Grant, LockMode, Permission, Retention, Versioning, S3_NOT_EMPTY, SEALED,
};
use s3s::{s3_error, S3Error};
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

/// One bucket, as the registry keeps it (JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketRecord {
    pub name: String,
    /// This instance's id: a bucket deleted and made again gets a new
    /// one, so nothing of the old can be read as the new's.
    pub id: String,
    /// The owner's user id.
    pub owner: String,
    /// Milliseconds since the Unix epoch.
    pub created_ms: u64,
    pub shards: u32,
    /// The canned ACL (`private`, `public-read`, ...), when `grants` is
    /// not given.
    #[serde(default)]
    pub acl: Option<String>,
    /// The access control list, when given grant by grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grants: Option<Vec<Grant>>,
    /// Whether it keeps versions.
    #[serde(default)]
    pub versioning: Versioning,
    /// The bucket's tags.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub tags: crate::tags::Tags,
    /// What of public access is blocked (S3's public access block).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_block: Option<PublicBlock>,
    /// Who owns what is written (S3's object ownership): `ObjectWriter`,
    /// `BucketOwnerPreferred` or `BucketOwnerEnforced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<String>,
    /// The bucket policy (a JSON document, checked when set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// S3's object lock, if the bucket was made with it (it then keeps
    /// versions for good).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_lock: Option<ObjectLock>,
    /// The bucket's CORS rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cors: Vec<crate::cors::Rule>,
}

/// A bucket's object lock: the retention new versions get by default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectLock {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<DefaultRetention>,
}

/// The retention a bucket's object lock gives new versions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefaultRetention {
    pub mode: LockMode,
    /// Days, or (`years`) years of 365 days.
    pub days: u32,
    pub years: bool,
}

impl DefaultRetention {
    /// The retention of a version made at `now_ms`.
    pub fn from(&self, now_ms: u64) -> Retention {
        let days = u64::from(self.days).saturating_mul(if self.years { 365 } else { 1 });
        Retention {
            mode: self.mode,
            until_ms: now_ms.saturating_add(days.saturating_mul(86_400_000)),
        }
    }
}

/// S3's public access block of a bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicBlock {
    /// ACLs that open the bucket or an object to the public are refused.
    pub block_public_acls: bool,
    /// Grants to the public are not honoured.
    pub ignore_public_acls: bool,
    /// Bucket policies that open the bucket are refused.
    pub block_public_policy: bool,
    /// Public access by policy is limited to the owner's account.
    pub restrict_public_buckets: bool,
}

/// The object ownership under which ACLs are not used: the bucket's
/// owner owns and alone reaches everything.
pub const OWNER_ENFORCED: &str = "BucketOwnerEnforced";

impl BucketRecord {
    /// The index object holding `key`'s entry.
    pub fn shard_object(&self, key: &str) -> String {
        names::index_object(&self.id, names::shard_of(key, self.shards))
    }

    /// Every index object of the bucket.
    pub fn shard_objects(&self) -> Vec<String> {
        (0..self.shards)
            .map(|s| names::index_object(&self.id, s))
            .collect()
    }

    /// The grants in force.
    pub fn grants(&self) -> Vec<Grant> {
        let g = crate::acl::effective(
            self.acl.as_deref(),
            self.grants.as_deref(),
            &self.owner,
            &self.owner,
        );
        self.honoured(g)
    }

    /// Of the grants of the bucket or one of its objects, those honoured:
    /// none but the bucket owner's when ACLs are not used, none to the
    /// public when the public access block ignores public ACLs.
    pub fn honoured(&self, mut g: Vec<Grant>) -> Vec<Grant> {
        if self.acls_disabled() {
            return crate::acl::canned("private", &self.owner, &self.owner).unwrap_or_default();
        }
        if self
            .public_block
            .as_ref()
            .is_some_and(|p| p.ignore_public_acls)
        {
            g.retain(|g| !crate::acl::is_public(std::slice::from_ref(g)));
        }
        g
    }

    /// Whether ACLs are not used (`BucketOwnerEnforced`).
    pub fn acls_disabled(&self) -> bool {
        self.ownership.as_deref() == Some(OWNER_ENFORCED)
    }

    /// Refused if ACL `acl` may not be set on the bucket or on an object
    /// of it owned by `owner`: a public one under a public access block
    /// that blocks public ACLs, any but the owner's own when ACLs are
    /// not used.
    pub fn check_acl(&self, acl: &crate::acl::Given, owner: &str) -> Result<(), S3Error> {
        let g = crate::acl::effective(
            acl.canned.as_deref(),
            acl.grants.as_deref(),
            owner,
            &self.owner,
        );
        if self.acls_disabled() {
            let own = matches!(
                acl.canned.as_deref(),
                Some("bucket-owner-full-control" | "private")
            ) || *acl == crate::acl::Given::default();
            if !own {
                return Err(s3_error!(
                    AccessControlListNotSupported,
                    "bucket '{}' does not use ACLs (BucketOwnerEnforced)",
                    self.name
                ));
            }
        }
        if self
            .public_block
            .as_ref()
            .is_some_and(|p| p.block_public_acls)
            && crate::acl::is_public(&g)
        {
            return Err(s3_error!(
                AccessDenied,
                "bucket '{}' blocks public ACLs",
                self.name
            ));
        }
        Ok(())
    }

    /// Whether `who` (`None`: anonymous) may do `want` to the bucket.
    pub fn allows(&self, who: Option<&str>, want: Permission) -> bool {
        crate::acl::allows(&self.grants(), &self.owner, who, want)
    }
}

/// How many times a deletion seals a bucket's shards before it gives up
/// to another deletion sealing them at the same time.
const SEAL_ATTEMPTS: u64 = 6;

/// How many times a change of a bucket's record is tried against others
/// changing it at the same time.
const UPDATE_ATTEMPTS: usize = 8;

fn record_key(name: &str) -> Vec<u8> {
    omap_key(BUCKET, name.as_bytes())
}

/// The omap of `obj`, treating a missing object as empty.
fn absent_is_empty<T: Default>(r: Result<T, ClientError>) -> Result<T, S3Error> {
    match r {
        Err(e) if e.is_not_found() => Ok(T::default()),
        r => r.map_err(internal),
    }
}

/// Bucket `name`'s record, if it exists.
pub async fn get(index: &IoCtx, name: &str) -> Result<Option<BucketRecord>, S3Error> {
    Ok(get_raw(index, name).await?.map(|(r, _)| r))
}

/// Bucket `name`'s record and its bytes as stored, if it exists.
async fn get_raw(index: &IoCtx, name: &str) -> Result<Option<(BucketRecord, Vec<u8>)>, S3Error> {
    let k = record_key(name);
    let mut got = absent_is_empty(index.omap_get(REGISTRY, vec![k.clone()]).await)?;
    match got.remove(&k) {
        Some(v) => serde_json::from_slice(&v)
            .map(|r| Some((r, v)))
            .map_err(|e| s3_error!(InternalError, "bucket record of '{name}': {e}")),
        None => Ok(None),
    }
}

/// Every bucket, in name order.
pub async fn list(index: &IoCtx) -> Result<Vec<BucketRecord>, S3Error> {
    let mut out = Vec::new();
    let mut start = vec![BUCKET];
    loop {
        let page = absent_is_empty(index.omap_list(REGISTRY, &start, 1000).await)?;
        let full = page.len() == 1000;
        for (k, v) in page {
            if k.first() != Some(&BUCKET) {
                return Ok(out);
            }
            let r: BucketRecord = serde_json::from_slice(&v)
                .map_err(|e| s3_error!(InternalError, "a bucket record: {e}"))?;
            start = k;
            start.push(0);
            out.push(r);
        }
        if !full {
            return Ok(out);
        }
    }
}

impl Gateway {
    /// Make bucket `name` for `owner`.
    pub async fn create_bucket(
        &self,
        name: &str,
        owner: &str,
        acl: crate::acl::Given,
        ownership: Option<String>,
        lock: bool,
    ) -> Result<BucketRecord, S3Error> {
        names::check_bucket_name(name).map_err(|m| s3_error!(InvalidBucketName, "{m}"))?;
        let rec = BucketRecord {
            name: name.to_string(),
            id: names::new_tag().map_err(|m| s3_error!(InternalError, "{m}"))?,
            owner: owner.to_string(),
            created_ms: crate::now_ms(),
            shards: self.config().shards,
            acl: acl.canned,
            grants: acl.grants,
            versioning: match lock {
                true => Versioning::Enabled,
                false => Versioning::Off,
            },
            tags: Default::default(),
            public_block: None,
            ownership,
            policy: None,
            object_lock: lock.then(ObjectLock::default),
            cors: Vec::new(),
        };
        let value = serde_json::to_vec(&rec).map_err(|e| s3_error!(InternalError, "{e}"))?;
        let k = record_key(name);
        let ops = vec![
            SubOp::CmpOmap {
                key: k.clone(),
                cmp: Cmp::Eq,
                value: Vec::new(),
            },
            SubOp::OmapSet(vec![(ByteBuf::from(k), ByteBuf::from(value))]),
        ];
        let mut r = self.index().operate(REGISTRY, ops.clone()).await;
        if r.as_ref().is_err_and(|e| e.is_not_found()) {
            // The first bucket: make the registry, then ask again.
            (self.index().operate(REGISTRY, vec![SubOp::Create]).await).map_err(internal)?;
            r = self.index().operate(REGISTRY, ops).await;
        }
        match r {
            Ok(_) => Ok(rec),
            Err(ClientError::Op(OpError::AssertFailed { .. })) => {
                // As RGW and S3's first region: making again a bucket one
                // owns, as it is, succeeds and changes nothing.
                match get(self.index(), name).await? {
                    Some(r) if r.owner == owner && r.acl == rec.acl && r.grants == rec.grants => {
                        Ok(r)
                    }
                    Some(r) if r.owner == owner => Err(s3_error!(
                        BucketAlreadyExists,
                        "you own bucket '{name}' already, with another ACL"
                    )),
                    _ => Err(s3_error!(
                        BucketAlreadyExists,
                        "bucket '{name}' exists and is another user's"
                    )),
                }
            }
            Err(e) => Err(internal(e)),
        }
    }

    /// Change bucket `name`'s record with `change` (which may refuse),
    /// stored only if no one changed it meanwhile (compared as stored,
    /// byte for byte; a race is retried). The record as changed.
    pub async fn update_bucket(
        &self,
        name: &str,
        change: impl Fn(&mut BucketRecord) -> Result<(), S3Error>,
    ) -> Result<BucketRecord, S3Error> {
        for _ in 0..UPDATE_ATTEMPTS {
            let Some((mut rec, raw)) = get_raw(self.index(), name).await? else {
                return Err(s3_error!(NoSuchBucket, "bucket '{name}' does not exist"));
            };
            change(&mut rec)?;
            let value = serde_json::to_vec(&rec).map_err(|e| s3_error!(InternalError, "{e}"))?;
            let k = record_key(name);
            let ops = vec![
                SubOp::CmpOmap {
                    key: k.clone(),
                    cmp: Cmp::Eq,
                    value: raw,
                },
                SubOp::OmapSet(vec![(ByteBuf::from(k), ByteBuf::from(value))]),
            ];
            match self.index().operate(REGISTRY, ops).await {
                Ok(_) => {
                    self.forget_bucket(name);
                    return Ok(rec);
                }
                Err(ClientError::Op(OpError::AssertFailed { .. })) => continue,
                Err(e) => return Err(internal(e)),
            }
        }
        Err(s3_error!(
            OperationAborted,
            "bucket '{name}' kept changing while this request changed it: try again"
        ))
    }

    /// Delete bucket `rec`: refused if it holds an object. Every shard is
    /// sealed under this deletion's token; then, if every seal is still
    /// its own (no other deletion of the bucket sealed a shard since), its
    /// uploads in progress are aborted, its garbage collected, and its
    /// record removed. The sealed shards of a deleted bucket stay (empty
    /// but for the seal): a gateway holding a stale record of it must
    /// find its writes refused, not a fresh shard.
    ///
    /// Seals are taken back only when a shard holds an object: then no
    /// other deletion can have finished (it would have had to seal that
    /// shard after the object went and then find every seal its own). A
    /// deletion that fails after sealing leaves the seals, and the bucket
    /// refuses writes until DeleteBucket is tried again. Two deletions
    /// whose seals interleave each seal again after a random pause, a few
    /// times, so one of them finds every seal its own.
    pub async fn delete_bucket(&self, rec: &BucketRecord) -> Result<(), S3Error> {
        let token = names::new_tag().map_err(|m| s3_error!(InternalError, "{m}"))?;
        for attempt in 1..=SEAL_ATTEMPTS {
            self.seal_all(rec, &token).await?;
            if self.holds_every_seal(rec, &token).await? {
                return self.empty_and_forget(rec).await;
            }
            if attempt < SEAL_ATTEMPTS {
                let jitter = u64::from(names::new_tag().map_or(0, |t| t.as_bytes()[0]) % 50);
                tokio::time::sleep(std::time::Duration::from_millis(20 * attempt + jitter)).await;
            }
        }
        Err(s3_error!(
            OperationAborted,
            "another deletion of bucket '{}' kept sealing it at the same time: try again",
            rec.name
        ))
    }

    /// Whether every shard of `rec` holds the seal of `token`.
    async fn holds_every_seal(&self, rec: &BucketRecord, token: &str) -> Result<bool, S3Error> {
        let seal = SEALED.to_vec();
        for s in &rec.shard_objects() {
            let held = (self.index().omap_get(s, vec![seal.clone()]).await)
                .map_err(internal)?
                .remove(&seal);
            if held.as_deref() != Some(token.as_bytes()) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Seal every shard of `rec` with `token`; if one holds an object,
    /// take back this deletion's seals and answer BucketNotEmpty.
    async fn seal_all(&self, rec: &BucketRecord, token: &str) -> Result<(), S3Error> {
        let shards = rec.shard_objects();
        for (i, s) in shards.iter().enumerate() {
            match self
                .index()
                .exec(s, "s3", "seal", token.as_bytes().to_vec())
                .await
            {
                Ok(_) => {}
                Err(ClientError::Op(OpError::MethodRefused { code, .. }))
                    if code == S3_NOT_EMPTY =>
                {
                    for t in &shards[..i] {
                        // Best effort: a seal left behind refuses writes
                        // until the deletion is tried again.
                        let _ = (self.index())
                            .exec(t, "s3", "unseal", token.as_bytes().to_vec())
                            .await;
                    }
                    let name = &rec.name;
                    return Err(s3_error!(BucketNotEmpty, "bucket '{name}' is not empty"));
                }
                Err(e) => return Err(internal(e)),
            }
        }
        Ok(())
    }

    /// The rest of a deletion once every shard is sealed: uploads
    /// aborted, garbage collected, the record removed (if it is still
    /// this instance's: compared as stored, byte for byte).
    async fn empty_and_forget(&self, rec: &BucketRecord) -> Result<(), S3Error> {
        self.forget_bucket(&rec.name);
        // Uploads in progress are dropped with the bucket.
        let (uploads, _) = self.list_uploads(rec, "", None, usize::MAX).await?;
        for u in uploads {
            match self.abort_upload(rec, &u.key, &u.id).await {
                Ok(()) => {}
                Err(e) if e.code() == &s3s::S3ErrorCode::NoSuchUpload => {}
                Err(e) => return Err(e),
            }
        }
        for s in &rec.shard_objects() {
            self.collect_shard(s, u64::MAX, u64::MAX).await?;
        }
        let current = match get_raw(self.index(), &rec.name).await? {
            Some((now, raw)) if now.id == rec.id => raw,
            // Gone, or made again by someone: this instance is deleted.
            _ => return Ok(()),
        };
        let k = record_key(&rec.name);
        let ops = vec![
            SubOp::CmpOmap {
                key: k.clone(),
                cmp: Cmp::Eq,
                value: current,
            },
            SubOp::OmapRm(vec![ByteBuf::from(k)]),
        ];
        match self.index().operate(REGISTRY, ops).await {
            Ok(_) | Err(ClientError::Op(OpError::AssertFailed { .. })) => Ok(()),
            Err(e) => Err(internal(e)),
        }
    }
}
