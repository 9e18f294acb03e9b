//! The S3 gateway's users and their keys (`loligo s3 user create`): who
//! may sign S3 requests, kept by the monitors in the replicated state
//! beside the cluster map but outside it, since every OSD and client reads
//! the map and a secret key must reach only the gateways.
//!
//! A user is a `uid` with a display name and up to [`KEYS_PER_USER_MAX`]
//! key pairs. An access key names one user across the cluster; its secret
//! key is what a request's Signature V4 is checked with, so the monitors
//! keep it as given (a hash would not do: the gateway recomputes the
//! signature). Only callers with mon `allow *` manage users; a gateway
//! (`client.rgw.NAME`, mon `allow rw`) may look one secret up by its
//! access key; nothing else answers a secret.
//!
//! Pure: no I/O, no clock (callers pass the time), no randomness (the
//! leader makes keys and passes them in). Applying a command is
//! deterministic; a command that the records refuse (an access key taken
//! by a change committed just before) changes nothing.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most users kept.
pub const USERS_MAX: usize = 100_000;
/// Most key pairs per user.
pub const KEYS_PER_USER_MAX: usize = 16;
/// Longest user id, display name, access key or secret key, in bytes.
pub const FIELD_MAX: usize = 128;
/// Characters in an access key the leader makes (as AWS's and RGW's).
pub const ACCESS_KEY_LEN: usize = 20;
/// Characters in a secret key the leader makes.
pub const SECRET_KEY_LEN: usize = 40;

/// One key pair.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct S3Key {
    pub access_key: String,
    pub secret_key: String,
}

/// One user: everything but its keys (kept by access key).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRecord {
    pub display_name: String,
    /// Seconds since the Unix epoch.
    pub created: u64,
}

/// A change to the users, as the Raft log carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum S3Cmd {
    /// A new user with its first key.
    UserCreate {
        uid: String,
        record: UserRecord,
        key: S3Key,
    },
    /// Forget a user and every key of it.
    UserRm { uid: String },
    /// Give a user another key.
    KeyAdd { uid: String, key: S3Key },
    /// Withdraw one key.
    KeyRm { access_key: String },
}

/// What `s3 user info` and `s3 user create` print (as `radosgw-admin`
/// does: the user with its keys).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserInfo {
    pub user: String,
    pub display_name: String,
    pub created: u64,
    pub keys: Vec<S3Key>,
}

/// The users the monitors hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct S3Users {
    users: BTreeMap<String, UserRecord>,
    /// Access key -> (uid, secret key).
    keys: BTreeMap<String, (String, String)>,
}

/// Whether `s` is 1..=[`FIELD_MAX`] printable ASCII characters without
/// spaces (what access keys, secret keys and user ids may hold).
fn token_ok(s: &str) -> bool {
    !s.is_empty() && s.len() <= FIELD_MAX && s.bytes().all(|b| b.is_ascii_graphic())
}

/// Check a user id (RGW's `TENANT$USER` form is taken as a plain id:
/// Loligo has one namespace of buckets).
pub fn check_uid(uid: &str) -> Result<(), String> {
    match token_ok(uid) && !uid.contains(':') {
        true => Ok(()),
        false => Err(format!(
            "user id '{uid}' must be 1-{FIELD_MAX} printable ASCII characters without spaces or ':'"
        )),
    }
}

/// Check a key pair given by an operator (`--access-key`, `--secret-key`).
pub fn check_key(key: &S3Key) -> Result<(), String> {
    if !token_ok(&key.access_key) || key.access_key.contains(':') {
        return Err(format!(
            "access key '{}' must be 1-{FIELD_MAX} printable ASCII characters without spaces or ':'",
            key.access_key
        ));
    }
    if !token_ok(&key.secret_key) {
        return Err(format!(
            "a secret key must be 1-{FIELD_MAX} printable ASCII characters without spaces"
        ));
    }
    Ok(())
}

/// A key pair made from `random` bytes (at least [`ACCESS_KEY_LEN`] +
/// [`SECRET_KEY_LEN`] of them, from a secure source): an access key of
/// upper-case letters and digits, a secret of letters and digits.
pub fn key_from(random: &[u8]) -> S3Key {
    debug_assert!(random.len() >= ACCESS_KEY_LEN + SECRET_KEY_LEN);
    const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    // Bias of `b % n` for n <= 62 is below 1/4 per symbol: fine for keys
    // of 20 and 40 symbols (over 100 and 230 bits of entropy).
    let pick = |set: &[u8], b: u8| set[b as usize % set.len()] as char;
    let (a, s) = random.split_at(ACCESS_KEY_LEN);
    S3Key {
        access_key: a.iter().map(|&b| pick(UPPER, b)).collect(),
        secret_key: s[..SECRET_KEY_LEN]
            .iter()
            .map(|&b| pick(ALNUM, b))
            .collect(),
    }
}

impl S3Users {
    /// How many users are kept.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether no user is kept.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// Every user id, in order.
    pub fn uids(&self) -> Vec<String> {
        self.users.keys().cloned().collect()
    }

    /// A user with its keys.
    pub fn info(&self, uid: &str) -> Option<UserInfo> {
        let r = self.users.get(uid)?;
        let keys = (self.keys.iter())
            .filter(|(_, (u, _))| u == uid)
            .map(|(a, (_, s))| S3Key {
                access_key: a.clone(),
                secret_key: s.clone(),
            })
            .collect();
        Some(UserInfo {
            user: uid.to_string(),
            display_name: r.display_name.clone(),
            created: r.created,
            keys,
        })
    }

    /// The display name of user `uid`.
    pub fn display_name(&self, uid: &str) -> Option<&str> {
        self.users.get(uid).map(|r| r.display_name.as_str())
    }

    /// The user and secret key of `access_key`.
    pub fn secret(&self, access_key: &str) -> Option<(&str, &str)> {
        let (u, s) = self.keys.get(access_key)?;
        Some((u.as_str(), s.as_str()))
    }

    fn key_count(&self, uid: &str) -> usize {
        self.keys.values().filter(|(u, _)| u == uid).count()
    }

    /// Whether `cmd` may be applied now: the leader asks before it
    /// proposes, and every member asks again when it applies.
    pub fn check(&self, cmd: &S3Cmd) -> Result<(), String> {
        let key_free = |k: &S3Key| match self.keys.get(&k.access_key) {
            Some((u, _)) => Err(format!(
                "access key '{}' is already in use (by user '{u}')",
                k.access_key
            )),
            None => Ok(()),
        };
        match cmd {
            S3Cmd::UserCreate { uid, record, key } => {
                check_uid(uid)?;
                check_key(key)?;
                if record.display_name.len() > FIELD_MAX {
                    return Err(format!("a display name is at most {FIELD_MAX} bytes"));
                }
                if self.users.contains_key(uid) {
                    return Err(format!("user '{uid}' already exists"));
                }
                if self.users.len() >= USERS_MAX {
                    return Err(format!("already {USERS_MAX} users"));
                }
                key_free(key)
            }
            S3Cmd::UserRm { uid } => match self.users.contains_key(uid) {
                true => Ok(()),
                false => Err(format!("user '{uid}' does not exist")),
            },
            S3Cmd::KeyAdd { uid, key } => {
                check_key(key)?;
                if !self.users.contains_key(uid) {
                    return Err(format!("user '{uid}' does not exist"));
                }
                if self.key_count(uid) >= KEYS_PER_USER_MAX {
                    return Err(format!("user '{uid}' already has {KEYS_PER_USER_MAX} keys"));
                }
                key_free(key)
            }
            S3Cmd::KeyRm { access_key } => match self.keys.contains_key(access_key) {
                true => Ok(()),
                false => Err(format!("access key '{access_key}' does not exist")),
            },
        }
    }

    /// Apply a committed change (every monitor, in log order): refused
    /// whole, changing nothing, if [`S3Users::check`] refuses it.
    pub fn apply(&mut self, cmd: &S3Cmd) -> Result<(), String> {
        self.check(cmd)?;
        match cmd {
            S3Cmd::UserCreate { uid, record, key } => {
                self.users.insert(uid.clone(), record.clone());
                let pair = (uid.clone(), key.secret_key.clone());
                self.keys.insert(key.access_key.clone(), pair);
            }
            S3Cmd::UserRm { uid } => {
                self.users.remove(uid);
                self.keys.retain(|_, (u, _)| u != uid);
            }
            S3Cmd::KeyAdd { uid, key } => {
                let pair = (uid.clone(), key.secret_key.clone());
                self.keys.insert(key.access_key.clone(), pair);
            }
            S3Cmd::KeyRm { access_key } => {
                self.keys.remove(access_key);
            }
        }
        debug_assert!(self.keys.values().all(|(u, _)| self.users.contains_key(u)));
        debug_assert!(self.users.len() <= USERS_MAX);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(a: &str, s: &str) -> S3Key {
        S3Key {
            access_key: a.into(),
            secret_key: s.into(),
        }
    }

    fn create(uid: &str, k: S3Key) -> S3Cmd {
        S3Cmd::UserCreate {
            uid: uid.into(),
            record: UserRecord {
                display_name: format!("{uid}'s name"),
                created: 7,
            },
            key: k,
        }
    }

    #[test]
    fn users_keep_their_keys_and_removal_takes_them() {
        let mut u = S3Users::default();
        u.apply(&create("alice", key("AK1", "s1"))).unwrap();
        u.apply(&S3Cmd::KeyAdd {
            uid: "alice".into(),
            key: key("AK2", "s2"),
        })
        .unwrap();
        u.apply(&create("bob", key("BK1", "t1"))).unwrap();
        assert_eq!(u.secret("AK2"), Some(("alice", "s2")));
        let info = u.info("alice").unwrap();
        assert_eq!(info.keys, vec![key("AK1", "s1"), key("AK2", "s2")]);
        u.apply(&S3Cmd::KeyRm {
            access_key: "AK1".into(),
        })
        .unwrap();
        assert_eq!(u.secret("AK1"), None);
        u.apply(&S3Cmd::UserRm {
            uid: "alice".into(),
        })
        .unwrap();
        assert_eq!(u.secret("AK2"), None);
        assert_eq!(u.uids(), vec!["bob".to_string()]);
        assert_eq!(u.info("alice"), None);
    }

    #[test]
    fn a_refused_change_changes_nothing() {
        let mut u = S3Users::default();
        u.apply(&create("alice", key("AK1", "s1"))).unwrap();
        let before = u.clone();
        // An access key names one user.
        let e = u.apply(&create("bob", key("AK1", "other"))).unwrap_err();
        assert!(e.contains("already in use"), "{e}");
        let e = (u.apply(&S3Cmd::KeyAdd {
            uid: "alice".into(),
            key: key("AK1", "x"),
        }))
        .unwrap_err();
        assert!(e.contains("already in use"), "{e}");
        assert!(u.apply(&create("alice", key("AK9", "s"))).is_err());
        assert!(u
            .apply(&S3Cmd::UserRm {
                uid: "nobody".into()
            })
            .is_err());
        assert!(u
            .apply(&S3Cmd::KeyAdd {
                uid: "nobody".into(),
                key: key("AK3", "s")
            })
            .is_err());
        assert!(u
            .apply(&S3Cmd::KeyRm {
                access_key: "AK7".into()
            })
            .is_err());
        for bad in ["", "has space", "a:b", &"x".repeat(FIELD_MAX + 1)] {
            assert!(u.apply(&create(bad, key("AK5", "s"))).is_err(), "{bad:?}");
        }
        assert!(u.apply(&create("carol", key("A K", "s"))).is_err());
        assert!(u.apply(&create("carol", key("AK5", ""))).is_err());
        assert_eq!(u, before);
    }

    #[test]
    fn a_user_has_a_bounded_number_of_keys() {
        let mut u = S3Users::default();
        u.apply(&create("alice", key("K0", "s"))).unwrap();
        for i in 1..KEYS_PER_USER_MAX {
            let k = key(&format!("K{i}"), "s");
            u.apply(&S3Cmd::KeyAdd {
                uid: "alice".into(),
                key: k,
            })
            .unwrap();
        }
        let k = key("K-over", "s");
        let e = u
            .apply(&S3Cmd::KeyAdd {
                uid: "alice".into(),
                key: k,
            })
            .unwrap_err();
        assert!(e.contains("already has"), "{e}");
    }

    #[test]
    fn made_keys_have_the_expected_shape_and_differ_by_input() {
        let r1: Vec<u8> = (0..60u8).collect();
        let r2: Vec<u8> = (0..60u8)
            .map(|b| b.wrapping_mul(7).wrapping_add(3))
            .collect();
        let (k1, k2) = (key_from(&r1), key_from(&r2));
        assert_eq!(k1.access_key.len(), ACCESS_KEY_LEN);
        assert_eq!(k1.secret_key.len(), SECRET_KEY_LEN);
        assert!(k1
            .access_key
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()));
        assert!(k1.secret_key.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_ne!(k1, k2);
        assert!(check_key(&k1).is_ok());
    }

    #[test]
    fn the_records_survive_a_serde_round_trip() {
        let mut u = S3Users::default();
        u.apply(&create("alice", key("AK1", "s1"))).unwrap();
        let text = serde_json::to_string(&u).unwrap();
        let back: S3Users = serde_json::from_str(&text).unwrap();
        assert_eq!(back, u);
    }
}
