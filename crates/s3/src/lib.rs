//! Loligo's S3 gateway (in the way of Ceph's RGW): S3 requests, checked
//! with Signature V4 against the users the monitors keep, served over
//! the client library. Gateways hold no state of their own: any number
//! may serve one cluster, and one restarted loses nothing acknowledged.
//!
//! Layout (see `docs/s3.md`): a registry object lists the buckets; each
//! bucket has an index of `shards` objects in a replicated pool whose
//! omaps hold the objects' entries ([`loligo_types::s3`]); data lives in
//! tails in a data pool (which may be erasure-coded), small objects in
//! the index itself. An entry is set by one object class call that also
//! moves the data it replaces to a garbage list, which [`gc`] empties.
//!
//! It must never acknowledge a PUT before its entry is durable, never
//! let a reader see part of an object, and never delete data an entry
//! names.

pub mod access;
pub mod acl;
pub mod auth;
pub mod bucket;
pub mod checksum;
pub mod cors;
pub mod gc;
pub mod list;
pub mod multipart;
pub mod names;
pub mod object;
pub mod policy;
pub mod serve;
pub mod service;
pub mod tags;

use bucket::BucketRecord;
use loligo_client::{ClientError, Cluster, IoCtx};
use loligo_types::ops::OpError;
use s3s::{s3_error, S3Error};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes per data object of a striped upload (RGW's stripe size).
pub const STRIPE: u64 = 4 << 20;
/// The largest object one PUT may carry (S3's limit).
pub const PUT_MAX: u64 = 5 << 30;
/// Index shards of a new bucket (RGW's default).
pub const SHARDS_DEFAULT: u32 = 11;
/// Objects up to this size are kept in the index, not in the data pool.
pub const INLINE_MAX_DEFAULT: u64 = 16 << 10;
/// How long a bucket's record is used before it is read again (a stale
/// one cannot lose a write: a deleted bucket's shards refuse entries).
const BUCKET_CACHE: Duration = Duration::from_secs(2);

/// How a gateway stores and collects.
#[derive(Clone, Debug)]
pub struct Config {
    /// The replicated pool of the registry and the bucket indexes.
    pub index_pool: String,
    /// The pool of object data (replicated or erasure-coded).
    pub data_pool: String,
    /// Index shards of a bucket made by this gateway.
    pub shards: u32,
    /// Objects up to this many bytes are kept in the index.
    pub inline_max: u64,
    /// How often the collector runs.
    pub gc_interval: Duration,
    /// How long deleted data stays before the collector removes it
    /// (readers that started before the delete finish first).
    pub gc_min_wait: Duration,
    /// How long an upload may go without committing before the collector
    /// takes it for abandoned (its gateway died).
    pub pending_max_age: Duration,
    /// The region buckets report (`GetBucketLocation`).
    pub region: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            index_pool: "s3.index".into(),
            data_pool: "s3.data".into(),
            shards: SHARDS_DEFAULT,
            inline_max: INLINE_MAX_DEFAULT,
            gc_interval: Duration::from_secs(60),
            gc_min_wait: Duration::from_secs(2 * 3600),
            pending_max_age: Duration::from_secs(24 * 3600),
            region: "default".into(),
        }
    }
}

/// A gateway: the pools it stores in and what it remembers for a moment
/// (bucket records, secrets). Cheap to clone.
#[derive(Clone)]
pub struct Gateway(Arc<Inner>);

struct Inner {
    index: IoCtx,
    data: IoCtx,
    cfg: Config,
    buckets: Mutex<HashMap<String, (Instant, BucketRecord)>>,
    secrets: auth::Secrets,
}

/// An S3 error for a failed client call.
pub fn internal(e: ClientError) -> S3Error {
    match e {
        ClientError::Timeout(..)
        | ClientError::Unreachable(_)
        | ClientError::Op(
            OpError::Unavailable { .. }
            | OpError::Down { .. }
            | OpError::Timeout(_)
            | OpError::Behind { .. },
        ) => s3_error!(
            ServiceUnavailable,
            "the cluster did not answer in time: {e}"
        ),
        ClientError::Op(OpError::Full { .. } | OpError::NoSpace) => {
            s3_error!(ServiceUnavailable, "the cluster is full: {e}")
        }
        e => s3_error!(InternalError, "{e}"),
    }
}

/// An S3 error whose code `s3s` does not name, answered with `status`.
pub fn custom_error(code: &'static str, status: http::StatusCode, message: String) -> S3Error {
    let mut e = S3Error::with_message(s3s::S3ErrorCode::Custom(code.into()), message);
    e.set_status_code(status);
    e
}

/// The wall clock in milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Gateway {
    /// A gateway on `cluster` storing in `cfg`'s pools, which must exist.
    pub fn new(cluster: Cluster, cfg: Config) -> Result<Gateway, ClientError> {
        let index = cluster.pool(&cfg.index_pool)?;
        let data = cluster.pool(&cfg.data_pool)?;
        let secrets = auth::Secrets::new(cluster.clone());
        Ok(Gateway(Arc::new(Inner {
            index,
            data,
            cfg,
            buckets: Mutex::new(HashMap::new()),
            secrets,
        })))
    }

    pub fn config(&self) -> &Config {
        &self.0.cfg
    }

    pub(crate) fn index(&self) -> &IoCtx {
        &self.0.index
    }

    pub(crate) fn data(&self) -> &IoCtx {
        &self.0.data
    }

    /// The secret lookups (for `S3Auth`).
    pub fn secrets(&self) -> &auth::Secrets {
        &self.0.secrets
    }

    /// Bucket `name`'s record, from the cache when fresh.
    pub async fn bucket(&self, name: &str) -> Result<BucketRecord, S3Error> {
        {
            let cache = self.0.buckets.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((at, r)) = cache.get(name) {
                if at.elapsed() < BUCKET_CACHE {
                    return Ok(r.clone());
                }
            }
        }
        self.bucket_fresh(name).await
    }

    /// Bucket `name`'s record, read from the registry now.
    pub async fn bucket_fresh(&self, name: &str) -> Result<BucketRecord, S3Error> {
        let r = bucket::get(self.index(), name).await?;
        let mut cache = self.0.buckets.lock().unwrap_or_else(|p| p.into_inner());
        match r {
            Some(r) => {
                cache.insert(name.to_string(), (Instant::now(), r.clone()));
                Ok(r)
            }
            None => {
                cache.remove(name);
                Err(s3_error!(NoSuchBucket, "bucket '{name}' does not exist"))
            }
        }
    }

    /// Forget the cached record of `name`.
    pub(crate) fn forget_bucket(&self, name: &str) {
        let mut cache = self.0.buckets.lock().unwrap_or_else(|p| p.into_inner());
        cache.remove(name);
    }
}
