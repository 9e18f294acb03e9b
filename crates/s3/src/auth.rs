//! Who signed a request: secret keys looked up at the monitors by access
//! key (`S3Secret`, which needs the gateway's mon `allow rw`), kept for
//! [`SECRET_TTL`] so that a busy gateway asks once per key, not once per
//! request. A key removed with `s3 key rm` stops working within that time.
//!
//! It must never log or answer a secret, and never take a failure to ask
//! for an unknown key (a monitor that does not answer refuses the
//! request with 503, not 403).

use loligo_client::{ClientError, Cluster};
use loligo_monc::protocol::{Admin, MonError, MonRequest};
use s3s::auth::{S3Auth, SecretKey};
use s3s::{s3_error, S3Result};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a secret is used before the monitors are asked again.
pub const SECRET_TTL: Duration = Duration::from_secs(10);
/// How long an unknown access key is remembered as unknown.
const UNKNOWN_TTL: Duration = Duration::from_secs(2);
/// Most keys remembered (the oldest are dropped beyond it).
const CACHE_MAX: usize = 10_000;

/// A looked-up key: its user and secret, or unknown.
#[derive(Clone)]
enum Found {
    Key { user: String, secret: String },
    Unknown,
}

/// The secret lookups of one gateway.
pub struct Secrets {
    cluster: Cluster,
    cache: Mutex<HashMap<String, (Instant, Found)>>,
    /// Display names by user id (`None`: no such user), kept as long.
    names: Mutex<HashMap<String, (Instant, Option<String>)>>,
}

impl Secrets {
    pub fn new(cluster: Cluster) -> Secrets {
        Secrets {
            cluster,
            cache: Mutex::new(HashMap::new()),
            names: Mutex::new(HashMap::new()),
        }
    }

    fn remember_name(&self, uid: &str, name: Option<String>) {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        if names.len() >= CACHE_MAX {
            names.retain(|_, (at, _)| at.elapsed() < SECRET_TTL);
        }
        if names.len() < CACHE_MAX {
            names.insert(uid.to_string(), (Instant::now(), name));
        }
    }

    /// The display name of user `uid`, or `None` if there is no such
    /// user (the anonymous user's name is its id).
    pub async fn display_name(&self, uid: &str) -> S3Result<Option<String>> {
        if uid == crate::acl::ANONYMOUS {
            return Ok(Some(uid.to_string()));
        }
        {
            let names = self.names.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((at, n)) = names.get(uid) {
                let ttl = if n.is_some() { SECRET_TTL } else { UNKNOWN_TTL };
                if at.elapsed() < ttl {
                    return Ok(n.clone());
                }
            }
        }
        let req = MonRequest::Admin(Admin::S3UserName {
            uid: uid.to_string(),
        });
        let name = match self.cluster.mon(req).await {
            Ok(r) => Some(r.value["display_name"].as_str().unwrap_or(uid).to_string()),
            Err(ClientError::Mon(MonError::NotFound(_))) => None,
            Err(e) => return Err(s3_error!(ServiceUnavailable, "the monitors: {e}")),
        };
        self.remember_name(uid, name.clone());
        Ok(name)
    }

    fn cached(&self, access_key: &str) -> Option<Found> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let (at, f) = cache.get(access_key)?;
        let ttl = match f {
            Found::Key { .. } => SECRET_TTL,
            Found::Unknown => UNKNOWN_TTL,
        };
        (at.elapsed() < ttl).then(|| f.clone())
    }

    fn remember(&self, access_key: &str, f: Found) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHE_MAX {
            cache.retain(|_, (at, _)| at.elapsed() < SECRET_TTL);
        }
        if cache.len() < CACHE_MAX {
            cache.insert(access_key.to_string(), (Instant::now(), f));
        }
    }

    async fn lookup(&self, access_key: &str) -> S3Result<Found> {
        if let Some(f) = self.cached(access_key) {
            return Ok(f);
        }
        let req = MonRequest::Admin(Admin::S3Secret {
            access_key: access_key.to_string(),
        });
        let found = match self.cluster.mon(req).await {
            Ok(r) => match (r.value["user"].as_str(), r.value["secret_key"].as_str()) {
                (Some(u), Some(s)) => {
                    if let Some(n) = r.value["display_name"].as_str() {
                        self.remember_name(u, Some(n.to_string()));
                    }
                    Found::Key {
                        user: u.to_string(),
                        secret: s.to_string(),
                    }
                }
                _ => return Err(s3_error!(InternalError, "the monitors answered no secret")),
            },
            Err(ClientError::Mon(MonError::NotFound(_))) => Found::Unknown,
            Err(ClientError::Mon(MonError::Denied(why))) => {
                return Err(s3_error!(
                    InternalError,
                    "this gateway may not look up keys (give it mon 'allow rw'): {why}"
                ))
            }
            Err(e) => return Err(s3_error!(ServiceUnavailable, "the monitors: {e}")),
        };
        self.remember(access_key, found.clone());
        Ok(found)
    }

    /// The user id of `access_key`, if it is a key.
    pub async fn user_of(&self, access_key: &str) -> S3Result<String> {
        match self.lookup(access_key).await? {
            Found::Key { user, .. } => Ok(user),
            Found::Unknown => Err(s3_error!(InvalidAccessKeyId)),
        }
    }
}

/// The `S3Auth` of a gateway: secrets from [`Secrets`].
pub struct Auth(pub crate::Gateway);

#[async_trait::async_trait]
impl S3Auth for Auth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        match self.0.secrets().lookup(access_key).await? {
            Found::Key { secret, .. } => Ok(SecretKey::from(secret)),
            Found::Unknown => Err(s3_error!(
                InvalidAccessKeyId,
                "the access key does not exist in our records"
            )),
        }
    }
}
