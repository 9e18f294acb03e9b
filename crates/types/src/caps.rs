//! Capabilities: what a client entity may do, in the grammar Ceph's users
//! know (`mon 'allow r'`, `osd 'allow rw pool=backups'`). Parsed here,
//! kept in the cluster map per client (with the serial of its one valid
//! certificate, [`AuthEntry`]), checked where an op runs: by the monitors
//! for map reads and admin commands, by the OSDs for every client op.
//!
//! Pure: no I/O. A capability text that does not parse is refused whole
//! (never half-granted), and nothing is allowed that no grant names.

use crate::osdmap::NAME_LEN_MAX;
use serde::{Deserialize, Serialize};

/// Rights on the monitors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum MonCap {
    /// Nothing (not even the map).
    #[default]
    None,
    /// Read the map and status.
    Read,
    /// Read, and change the map (admin commands).
    ReadWrite,
    /// Everything, users and their keys too (`allow *`, `allow rwx`).
    All,
}

impl MonCap {
    /// The text that grants it (`None` for no rights).
    fn text(self) -> Option<&'static str> {
        match self {
            MonCap::None => None,
            MonCap::Read => Some("allow r"),
            MonCap::ReadWrite => Some("allow rw"),
            MonCap::All => Some("allow *"),
        }
    }
}

/// One grant on the OSDs: rights, in one pool or in all.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsdGrant {
    pub read: bool,
    pub write: bool,
    /// Object class calls.
    pub exec: bool,
    /// The pool the grant is for (`None`: every pool).
    pub pool: Option<String>,
}

/// An entity's capabilities.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caps {
    pub mon: MonCap,
    pub osd: Vec<OsdGrant>,
}

/// Longest capability text per service.
pub const CAP_TEXT_MAX: usize = 4096;
/// Most grants per service.
pub const GRANTS_MAX: usize = 64;

/// `r`, `w`, `x` in any order and combination, or `*` (all of them).
fn rights(s: &str) -> Option<(bool, bool, bool)> {
    if s == "*" {
        return Some((true, true, true));
    }
    let (mut r, mut w, mut x) = (false, false, false);
    for c in s.chars() {
        let slot = match c {
            'r' => &mut r,
            'w' => &mut w,
            'x' => &mut x,
            _ => return None,
        };
        if *slot {
            return None;
        }
        *slot = true;
    }
    (!s.is_empty()).then_some((r, w, x))
}

/// The grants of one service's text: `allow RIGHTS [pool=NAME]`, comma
/// separated.
fn grants(service: &str, text: &str) -> Result<Vec<OsdGrant>, String> {
    let bad = |why: &str| format!("{service} caps '{text}': {why}");
    if text.len() > CAP_TEXT_MAX {
        return Err(bad(&format!("longer than {CAP_TEXT_MAX} bytes")));
    }
    let mut out = Vec::new();
    for g in text.split(',') {
        let words: Vec<&str> = g.split_whitespace().collect();
        let (rw, pool) = match words.as_slice() {
            ["allow", rw] => (*rw, None),
            ["allow", rw, p] => {
                let Some(name) = p.strip_prefix("pool=") else {
                    return Err(bad(&format!("'{p}' is not pool=NAME")));
                };
                if name.is_empty() || name.len() > NAME_LEN_MAX {
                    return Err(bad("a pool name is 1-128 bytes"));
                }
                (*rw, Some(name.to_string()))
            }
            _ => return Err(bad("each grant is `allow RIGHTS [pool=NAME]`")),
        };
        let (read, write, exec) =
            rights(rw).ok_or_else(|| bad(&format!("rights '{rw}' are r, w, x or *")))?;
        out.push(OsdGrant {
            read,
            write,
            exec,
            pool,
        });
    }
    if out.len() > GRANTS_MAX {
        return Err(bad(&format!("more than {GRANTS_MAX} grants")));
    }
    Ok(out)
}

impl Caps {
    /// Every right (the admin's).
    pub fn all() -> Caps {
        Caps {
            mon: MonCap::All,
            osd: vec![OsdGrant {
                read: true,
                write: true,
                exec: true,
                pool: None,
            }],
        }
    }

    /// Parse `(service, text)` pairs as `loligo auth add ENTITY mon 'allow
    /// r' osd 'allow rw pool=backups'` gives them. Services: `mon`, `osd`,
    /// each at most once; one missing grants nothing there.
    pub fn parse(pairs: &[(String, String)]) -> Result<Caps, String> {
        let mut caps = Caps::default();
        let mut seen = Vec::new();
        for (service, text) in pairs {
            if seen.contains(service) {
                return Err(format!("{service} caps given twice"));
            }
            seen.push(service.clone());
            let gs = grants(service, text)?;
            match service.as_str() {
                "mon" => {
                    let refuse = || {
                        format!(
                            "mon caps '{text}': the monitors take `allow r`, `allow rw` or `allow *`"
                        )
                    };
                    for g in gs {
                        let all = g.read && g.write && g.exec;
                        let cap = match (g.read, g.write, g.exec) {
                            _ if g.pool.is_some() => return Err(refuse()),
                            _ if all => MonCap::All,
                            (true, true, false) => MonCap::ReadWrite,
                            (true, false, false) => MonCap::Read,
                            _ => return Err(refuse()),
                        };
                        caps.mon = caps.mon.max(cap);
                    }
                }
                "osd" => caps.osd = gs,
                other => return Err(format!("unknown service '{other}' (mon, osd)")),
            }
        }
        Ok(caps)
    }

    /// Whether an op on pool `pool` that reads, writes and calls classes
    /// as asked is allowed: one grant must cover all it asks.
    pub fn allows_osd(&self, pool: &str, read: bool, write: bool, exec: bool) -> bool {
        self.osd.iter().any(|g| {
            g.pool.as_deref().is_none_or(|p| p == pool)
                && (g.read || !read)
                && (g.write || !write)
                && (g.exec || !exec)
        })
    }

    /// The `(service, text)` pairs that grant exactly these caps (what
    /// [`Caps::parse`] reads back to the same caps).
    pub fn texts(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(t) = self.mon.text() {
            out.push(("mon".to_string(), t.to_string()));
        }
        if !self.osd.is_empty() {
            let grants: Vec<String> = self
                .osd
                .iter()
                .map(|g| {
                    let rights: String = [(g.read, 'r'), (g.write, 'w'), (g.exec, 'x')]
                        .iter()
                        .filter(|(on, _)| *on)
                        .map(|(_, c)| *c)
                        .collect();
                    match &g.pool {
                        Some(p) => format!("allow {rights} pool={p}"),
                        None => format!("allow {rights}"),
                    }
                })
                .collect();
            out.push(("osd".to_string(), grants.join(", ")));
        }
        out
    }

    /// Check caps decoded from a map: what [`Caps::parse`] could have
    /// made (bounded grants, each with a right, valid pool names).
    pub fn validate(&self) -> Result<(), String> {
        if self.osd.len() > GRANTS_MAX {
            return Err(format!(
                "{} osd grants (at most {GRANTS_MAX})",
                self.osd.len()
            ));
        }
        for g in &self.osd {
            if !(g.read || g.write || g.exec) {
                return Err("an osd grant without rights".into());
            }
            if let Some(p) = &g.pool {
                if p.is_empty() || p.len() > NAME_LEN_MAX {
                    return Err(format!("a grant's pool name of {} bytes", p.len()));
                }
            }
        }
        Ok(())
    }
}

/// Longest client name (after `client.`).
pub const CLIENT_NAME_MAX: usize = 64;

/// Whether `entity` names a client (`client.NAME`, NAME 1-64 characters
/// of A-Z a-z 0-9 - _ .), the only entities that have caps.
pub fn is_client(entity: &str) -> bool {
    entity.strip_prefix("client.").is_some_and(|n| {
        !n.is_empty()
            && n.len() <= CLIENT_NAME_MAX
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    })
}

/// The bootstrap administrator `loligo up` makes: it has every right
/// while the map has no entry for it (see [`AuthEntry`]).
pub const ADMIN: &str = "client.admin";

/// Longest certificate serial (hex digits).
pub const SERIAL_LEN_MAX: usize = 64;
/// The serial an OSD's entry holds once the OSD is removed (`osd rm`): no
/// certificate has it (the authority's serials are 32 hex digits, the
/// first above 3), so every key of that OSD is refused until `auth rotate
/// osd.N` records a new one (or `auth rm osd.N` lets the next boot's key
/// in).
pub const REVOKED_SERIAL: &str = "0";

/// Whether `entity` names an OSD (`osd.N`): its entry in the user table
/// holds only the serial of its one valid certificate, no caps.
pub fn is_osd(entity: &str) -> bool {
    entity
        .strip_prefix("osd.")
        .is_some_and(|n| !n.is_empty() && n.len() <= 10 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `entity` names a monitor (`mon.N`): like an OSD's, its entry
/// holds only the serial of its one valid certificate.
pub fn is_mon(entity: &str) -> bool {
    entity
        .strip_prefix("mon.")
        .is_some_and(|n| !n.is_empty() && n.len() <= 10 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `entity` names a daemon (an OSD or a monitor): no caps, a
/// serial only.
pub fn is_daemon(entity: &str) -> bool {
    is_osd(entity) || is_mon(entity)
}

/// A client the cluster knows (or a daemon: no caps; see
/// [`crate::OsdMap::daemon_key_valid`]): its caps, and the serial (hex) of
/// the one certificate it may connect with. A new key (`auth rotate`) changes the
/// serial, and every older certificate of the entity is refused from the
/// epoch that records it; `auth rm` removes the entry and with it every
/// right. [`ADMIN`] without an entry has every right with any
/// certificate of the cluster's authority (so `loligo up` needs no step
/// after the monitors start); rotating its key records an entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthEntry {
    pub caps: Caps,
    pub serial: String,
}

impl AuthEntry {
    /// Check an entry decoded from a map or asked for in a change.
    pub fn validate(&self, entity: &str) -> Result<(), String> {
        if is_daemon(entity) {
            if self.caps != Caps::default() {
                return Err(format!("{entity}: a daemon has no caps"));
            }
        } else if !is_client(entity) {
            return Err(format!(
                "'{entity}' is not a client entity (client.NAME, NAME 1-{CLIENT_NAME_MAX} characters of A-Z a-z 0-9 - _ .) nor a daemon (osd.N, mon.N)"
            ));
        }
        let hex = self.serial.chars().all(|c| c.is_ascii_hexdigit());
        if self.serial.is_empty() || self.serial.len() > SERIAL_LEN_MAX || !hex {
            return Err(format!(
                "{entity}: a serial of 1-{SERIAL_LEN_MAX} hex digits"
            ));
        }
        self.caps.validate().map_err(|e| format!("{entity}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(pairs: &[(&str, &str)]) -> Result<Caps, String> {
        let v: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        Caps::parse(&v)
    }

    #[test]
    fn grants_parse_and_allow_what_they_name_only() {
        let c = caps(&[
            ("mon", "allow r"),
            ("osd", "allow rw pool=backups, allow r"),
        ])
        .unwrap();
        assert_eq!(c.mon, MonCap::Read);
        assert!(c.allows_osd("backups", true, true, false));
        assert!(!c.allows_osd("backups", false, false, true), "no exec");
        assert!(c.allows_osd("other", true, false, false));
        assert!(!c.allows_osd("other", false, true, false));
        let admin = caps(&[("mon", "allow *"), ("osd", "allow *")]).unwrap();
        assert_eq!(admin, Caps::all());
        // Nothing given: nothing allowed.
        let none = caps(&[]).unwrap();
        assert_eq!(none.mon, MonCap::None);
        assert!(!none.allows_osd("p", true, false, false));
        assert_eq!(caps(&[("mon", "allow rw")]).unwrap().mon, MonCap::ReadWrite);
        assert!(caps(&[("osd", " allow  rwx   pool=a ")])
            .unwrap()
            .allows_osd("a", true, true, true));
    }

    #[test]
    fn malformed_caps_are_refused_whole() {
        for (s, t) in [
            ("osd", "allow"),
            ("osd", "allow rr"),
            ("osd", "allow q"),
            ("osd", "allow rw pool="),
            ("osd", "allow rw namespace=x"),
            ("osd", "deny r"),
            ("osd", "allow r,"),
            ("mon", "allow x"),
            ("mon", "allow w"),
            ("mon", "allow r pool=a"),
            ("mgr", "allow r"),
        ] {
            assert!(caps(&[(s, t)]).is_err(), "{s} '{t}'");
        }
        assert!(caps(&[("osd", "allow r"), ("osd", "allow w")]).is_err());
        let long = format!("allow r pool={}", "a".repeat(CAP_TEXT_MAX));
        assert!(caps(&[("osd", &long)]).is_err());
        let many = vec!["allow r"; GRANTS_MAX + 1].join(",");
        assert!(caps(&[("osd", &many)]).is_err());
    }
}
