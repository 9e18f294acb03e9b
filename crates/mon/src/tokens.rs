//! Dashboard access tokens: what lets a browser read the cluster's view
//! as a user with mon `allow r` (`loligo dashboard create-token`).
//!
//! A token is 32 random bytes, shown once, in hex. The monitors keep only
//! its SHA-256 with the user it speaks for, that user's certificate
//! serial when it was made, and when it expires; the records live in the
//! replicated state (not the map, which OSDs and clients read), so every
//! monitor knows every token and a new leader honours the old leader's.
//! A token is good while it has not expired, its user still exists with
//! the same key (rotating a user's key or removing it revokes its tokens
//! for good: a serial is never reused) and has mon `allow r` (taking the
//! right away suspends them until it is given back).
//!
//! Pure: no I/O, no clock (callers pass the time), no randomness (the
//! caller makes the token). It must never keep a token itself, nor let a
//! record outlive its expiry past the next change.

use loligo_types::caps::{is_client, Caps, MonCap};
use loligo_types::OsdMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Bytes of randomness in a token.
pub const TOKEN_BYTES: usize = 32;
/// Most tokens kept at once (expired ones are dropped first).
pub const TOKENS_MAX: usize = 256;
/// How long a token lasts unless asked otherwise (Ceph's dashboard
/// `jwt_token_ttl`: 8 hours).
pub const TTL_DEFAULT_SECS: u64 = 8 * 3600;
/// The longest a token may last.
pub const TTL_MAX_SECS: u64 = 366 * 24 * 3600;
/// The shortest a token may last.
pub const TTL_MIN_SECS: u64 = 60;

/// One token's record: everything but the token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// The client it speaks for (`client.NAME`).
    pub user: String,
    /// That client's certificate serial when the token was made (empty:
    /// `client.admin` without an entry of its own).
    pub serial: String,
    /// Seconds since the Unix epoch.
    pub created: u64,
    pub expires: u64,
}

/// A change to the token records, as the Raft log carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenCmd {
    /// Keep a new token's record under its hash (hex SHA-256).
    Add { hash: String, record: TokenRecord },
    /// Drop the tokens of `user`, or every token.
    Revoke { user: Option<String> },
}

/// Why a token was not accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("no token given (Authorization: Bearer TOKEN)")]
    Missing,
    #[error("not a dashboard token, or one revoked (`loligo dashboard create-token` makes one)")]
    Unknown,
    #[error("the token expired; make a new one (`loligo dashboard create-token`)")]
    Expired,
    #[error("the token's user may no longer read the cluster: {0}")]
    User(String),
}

/// The token records the monitors hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// By hex SHA-256 of the token.
    by_hash: BTreeMap<String, TokenRecord>,
}

/// The hex SHA-256 of `token`: the key its record is kept under.
pub fn hash(token: &str) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref())
}

/// `bytes` in lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// A new token from `random` ([`TOKEN_BYTES`] bytes from a secure source).
pub fn token_from(random: &[u8; TOKEN_BYTES]) -> String {
    hex(random)
}

/// The caps `user` (with the certificate `serial` recorded for it) has
/// under `map`, if it may read.
fn reader_caps<'m>(map: &'m OsdMap, user: &str, serial: &str) -> Result<&'m Caps, String> {
    let caps = map.caps_of(user, serial)?;
    match caps.mon >= MonCap::Read {
        true => Ok(caps),
        false => Err(format!("{user} does not have mon 'allow r'")),
    }
}

impl Tokens {
    /// How many records are kept.
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Whether no record is kept.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// Apply a committed change (every monitor, in log order).
    pub fn apply(&mut self, cmd: &TokenCmd) {
        match cmd {
            TokenCmd::Add { hash, record } => {
                self.by_hash.retain(|_, r| r.expires > record.created);
                self.by_hash.insert(hash.clone(), record.clone());
                // The leader refuses a token past the limit; two made at
                // once may still pass it: drop the oldest.
                while self.by_hash.len() > TOKENS_MAX {
                    let oldest = (self.by_hash.iter())
                        .min_by_key(|(h, r)| (r.created, (*h).clone()))
                        .map(|(h, _)| h.clone());
                    match oldest {
                        Some(h) => self.by_hash.remove(&h),
                        None => break,
                    };
                }
            }
            TokenCmd::Revoke { user: None } => self.by_hash.clear(),
            TokenCmd::Revoke { user: Some(u) } => self.by_hash.retain(|_, r| &r.user != u),
        }
        debug_assert!(self.by_hash.len() <= TOKENS_MAX);
    }

    /// The record for a new token for `user`, made at `now` to last
    /// `ttl_secs`, if `map` lets that user read and there is room.
    pub fn plan_add(
        &self,
        map: &OsdMap,
        user: &str,
        ttl_secs: u64,
        now: u64,
    ) -> Result<TokenRecord, String> {
        if !(TTL_MIN_SECS..=TTL_MAX_SECS).contains(&ttl_secs) {
            return Err(format!(
                "a token lasts {TTL_MIN_SECS} s to {TTL_MAX_SECS} s, not {ttl_secs} s"
            ));
        }
        if !is_client(user) {
            return Err(format!(
                "'{user}' is not a client (client.NAME): tokens are for users"
            ));
        }
        let serial = map
            .auth
            .get(user)
            .map(|e| e.serial.clone())
            .unwrap_or_default();
        reader_caps(map, user, &serial)?;
        let live = self.by_hash.values().filter(|r| r.expires > now).count();
        if live >= TOKENS_MAX {
            return Err(format!(
                "{TOKENS_MAX} dashboard tokens are in force; revoke some first (`loligo dashboard revoke-tokens`)"
            ));
        }
        Ok(TokenRecord {
            user: user.to_string(),
            serial,
            created: now,
            expires: now.saturating_add(ttl_secs),
        })
    }

    /// The user `token` speaks for at `now` under `map`.
    pub fn check(&self, map: &OsdMap, token: &str, now: u64) -> Result<String, TokenError> {
        if token.is_empty() {
            return Err(TokenError::Missing);
        }
        let r = self.by_hash.get(&hash(token)).ok_or(TokenError::Unknown)?;
        if r.expires <= now {
            return Err(TokenError::Expired);
        }
        reader_caps(map, &r.user, &r.serial).map_err(TokenError::User)?;
        Ok(r.user.clone())
    }

    /// How many records of `user` (or of anyone) are unexpired at `now`:
    /// what a revocation of them revokes.
    pub fn live(&self, user: Option<&str>, now: u64) -> usize {
        (self.by_hash.values())
            .filter(|r| r.expires > now && user.is_none_or(|u| r.user == u))
            .count()
    }

    /// The records good at `now` under `map` (never the tokens), for
    /// `dashboard ls-tokens`: user, created, expires, and the hash's
    /// first 8 digits to tell them apart. A record whose user lost its
    /// mon read right is left out (it is refused while the right is
    /// missing, and good again if it is given back).
    pub fn list(&self, map: &OsdMap, now: u64) -> Vec<(String, &TokenRecord)> {
        let mut v: Vec<_> = (self.by_hash.iter())
            .filter(|(_, r)| r.expires > now && reader_caps(map, &r.user, &r.serial).is_ok())
            .map(|(h, r)| (h.chars().take(8).collect(), r))
            .collect();
        v.sort_by(|a, b| (a.1.created, &a.0).cmp(&(b.1.created, &b.0)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_types::caps::AuthEntry;

    fn map_with(user: &str, mon: MonCap) -> OsdMap {
        let mut m = OsdMap::new("fsid", "host").expect("map");
        let caps = Caps {
            mon,
            ..Caps::default()
        };
        let entry = AuthEntry {
            caps,
            serial: "s1".into(),
        };
        m.auth.insert(user.to_string(), entry);
        m
    }

    fn add(t: &mut Tokens, map: &OsdMap, user: &str, token: &str, now: u64) {
        let record = t.plan_add(map, user, 3600, now).expect("plan");
        t.apply(&TokenCmd::Add {
            hash: hash(token),
            record,
        });
    }

    #[test]
    fn a_token_reads_as_its_user_until_it_expires() {
        let map = map_with("client.view", MonCap::Read);
        let mut t = Tokens::default();
        add(&mut t, &map, "client.view", "abc", 1000);
        assert_eq!(t.check(&map, "abc", 1000), Ok("client.view".into()));
        assert_eq!(t.check(&map, "abd", 1000), Err(TokenError::Unknown));
        assert_eq!(t.check(&map, "", 1000), Err(TokenError::Missing));
        assert_eq!(t.check(&map, "abc", 4600), Err(TokenError::Expired));
    }

    #[test]
    fn only_readers_get_tokens_and_losing_the_right_revokes() {
        let map = map_with("client.none", MonCap::None);
        let t = Tokens::default();
        let e = t.plan_add(&map, "client.none", 3600, 0).unwrap_err();
        assert!(e.contains("allow r"), "{e}");
        let e = t.plan_add(&map, "client.ghost", 3600, 0).unwrap_err();
        assert!(e.contains("not a user"), "{e}");
        let e = t.plan_add(&map, "osd.0", 3600, 0).unwrap_err();
        assert!(e.contains("not a client"), "{e}");

        let mut map = map_with("client.view", MonCap::Read);
        let mut t = Tokens::default();
        add(&mut t, &map, "client.view", "tok", 0);
        assert_eq!(t.list(&map, 1).len(), 1);
        assert_eq!(t.live(Some("client.view"), 1), 1);
        assert_eq!(t.live(Some("client.other"), 1), 0);
        // Rotating the key revokes.
        if let Some(e) = map.auth.get_mut("client.view") {
            e.serial = "s2".into();
        }
        assert!(matches!(t.check(&map, "tok", 1), Err(TokenError::User(_))));
        assert!(t.list(&map, 1).is_empty(), "a refused token is not listed");
        // So does removing the user; taking its read right suspends it.
        let map = map_with("client.view", MonCap::None);
        assert!(matches!(t.check(&map, "tok", 1), Err(TokenError::User(_))));
        let map = map_with("client.other", MonCap::Read);
        assert!(matches!(t.check(&map, "tok", 1), Err(TokenError::User(_))));
    }

    #[test]
    fn revoking_drops_a_users_tokens_or_all() {
        let mut map = map_with("client.a", MonCap::Read);
        map.auth.insert(
            "client.b".into(),
            AuthEntry {
                caps: Caps::all(),
                serial: "s9".into(),
            },
        );
        let mut t = Tokens::default();
        add(&mut t, &map, "client.a", "ta", 0);
        add(&mut t, &map, "client.b", "tb", 0);
        t.apply(&TokenCmd::Revoke {
            user: Some("client.a".into()),
        });
        assert_eq!(t.check(&map, "ta", 1), Err(TokenError::Unknown));
        assert_eq!(t.check(&map, "tb", 1), Ok("client.b".into()));
        t.apply(&TokenCmd::Revoke { user: None });
        assert!(t.is_empty());
    }

    #[test]
    fn records_are_bounded_and_expired_ones_go_first() {
        let map = map_with("client.a", MonCap::Read);
        let mut t = Tokens::default();
        for i in 0..TOKENS_MAX {
            add(&mut t, &map, "client.a", &format!("t{i}"), 0);
        }
        assert!(t.plan_add(&map, "client.a", 3600, 10).is_err());
        // Once they expired, a new one fits and the old ones go.
        add(&mut t, &map, "client.a", "new", 3600);
        assert_eq!(t.len(), 1);
        // Past the limit in the log (two leaders' worth), the oldest goes.
        for i in 0..TOKENS_MAX + 3 {
            let record = TokenRecord {
                user: "client.a".into(),
                serial: "s1".into(),
                created: 4000 + i as u64,
                expires: 9000,
            };
            t.apply(&TokenCmd::Add {
                hash: hash(&format!("x{i}")),
                record,
            });
        }
        assert_eq!(t.len(), TOKENS_MAX);
        assert_eq!(t.check(&map, "new", 4000), Err(TokenError::Unknown));
        assert!(t.check(&map, &format!("x{}", TOKENS_MAX + 2), 4000).is_ok());
    }

    #[test]
    fn tokens_are_the_hex_of_their_bytes_and_lists_never_show_them() {
        let tok = token_from(&[0xab; TOKEN_BYTES]);
        assert_eq!(tok.len(), 2 * TOKEN_BYTES);
        assert!(tok.starts_with("abab"));
        let map = map_with("client.a", MonCap::Read);
        let mut t = Tokens::default();
        add(&mut t, &map, "client.a", &tok, 0);
        let l = t.list(&map, 1);
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].0, hash(&tok)[..8]);
        assert!(!serde_json::to_string(&t).expect("json").contains(&tok));
    }
}
