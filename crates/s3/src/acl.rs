//! Access control lists in S3's way: who may do what to a bucket or an
//! object. A bucket or object keeps either a canned ACL's name or its
//! grants; [`effective`] turns either into grants, and [`allows`] judges
//! a request by them. Pure: no I/O (display names are looked up by the
//! caller).
//!
//! It must never let an ACL give more than its grants say: the owner of a
//! bucket or object may always read and change its ACL (as in S3), and
//! nothing else is implied.

use loligo_types::s3::{Grant, Grantee, Permission};

/// The URI of S3's `AllUsers` group.
pub const ALL_USERS: &str = "http://acs.amazonaws.com/groups/global/AllUsers";
/// The URI of S3's `AuthenticatedUsers` group.
pub const AUTHENTICATED_USERS: &str = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers";
/// The URI of S3's `LogDelivery` group.
pub const LOG_DELIVERY: &str = "http://acs.amazonaws.com/groups/s3/LogDelivery";
/// The owner of what an anonymous request writes (S3 and RGW name it so).
pub const ANONYMOUS: &str = "anonymous";

/// Canned ACLs a bucket may be given.
pub const BUCKET_CANNED: &[&str] = &[
    "private",
    "public-read",
    "public-read-write",
    "authenticated-read",
    "log-delivery-write",
];
/// Canned ACLs an object may be given.
pub const OBJECT_CANNED: &[&str] = &[
    "private",
    "public-read",
    "public-read-write",
    "authenticated-read",
    "bucket-owner-read",
    "bucket-owner-full-control",
];

/// An ACL as a request gives it: a canned name, or grants (never both).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Given {
    pub canned: Option<String>,
    pub grants: Option<Vec<Grant>>,
}

fn grant(grantee: Grantee, permission: Permission) -> Grant {
    Grant {
        grantee,
        permission,
    }
}

/// The grants of canned ACL `name` on something `owner` owns in a bucket
/// `bucket_owner` owns (groups first, then the owner, as RGW lists them),
/// or `None` for a name that is not a canned ACL.
pub fn canned(name: &str, owner: &str, bucket_owner: &str) -> Option<Vec<Grant>> {
    use Permission::*;
    let mut g = match name {
        "private" => vec![],
        "public-read" => vec![grant(Grantee::AllUsers, Read)],
        "public-read-write" => vec![
            grant(Grantee::AllUsers, Read),
            grant(Grantee::AllUsers, Write),
        ],
        "authenticated-read" => vec![grant(Grantee::AuthenticatedUsers, Read)],
        "log-delivery-write" => vec![
            grant(Grantee::LogDelivery, Write),
            grant(Grantee::LogDelivery, ReadAcp),
        ],
        "bucket-owner-read" | "bucket-owner-full-control" => vec![],
        _ => return None,
    };
    g.push(grant(Grantee::User(owner.to_string()), FullControl));
    if owner != bucket_owner {
        match name {
            "bucket-owner-read" => g.push(grant(Grantee::User(bucket_owner.into()), Read)),
            "bucket-owner-full-control" => {
                g.push(grant(Grantee::User(bucket_owner.into()), FullControl))
            }
            _ => {}
        }
    }
    Some(g)
}

/// The grants in force: `grants` when given, else those of the canned
/// ACL (`private` when none is kept).
pub fn effective(
    canned_name: Option<&str>,
    grants: Option<&[Grant]>,
    owner: &str,
    bucket_owner: &str,
) -> Vec<Grant> {
    if let Some(g) = grants {
        return g.to_vec();
    }
    let name = canned_name.unwrap_or("private");
    // A name kept is one that was accepted: an unknown one (which cannot
    // be stored) gives the owner alone.
    canned(name, owner, bucket_owner)
        .unwrap_or_else(|| vec![grant(Grantee::User(owner.into()), Permission::FullControl)])
}

/// Whether `who` (`None`: an anonymous request) may do what `want` names
/// on something `owner` owns, under `grants`.
pub fn allows(grants: &[Grant], owner: &str, who: Option<&str>, want: Permission) -> bool {
    if who == Some(owner) && matches!(want, Permission::ReadAcp | Permission::WriteAcp) {
        return true;
    }
    grants.iter().any(|g| {
        let covers = g.permission == want || g.permission == Permission::FullControl;
        let applies = match &g.grantee {
            Grantee::User(id) => who == Some(id.as_str()),
            Grantee::AllUsers => true,
            Grantee::AuthenticatedUsers => who.is_some(),
            Grantee::LogDelivery => false,
        };
        covers && applies
    })
}

/// Whether `grants` open anything to everyone or to every signed user
/// (what S3's public access block calls public).
pub fn is_public(grants: &[Grant]) -> bool {
    (grants.iter()).any(|g| matches!(g.grantee, Grantee::AllUsers | Grantee::AuthenticatedUsers))
}

/// The grantee of a group's URI.
pub fn group(uri: &str) -> Option<Grantee> {
    match uri {
        ALL_USERS => Some(Grantee::AllUsers),
        AUTHENTICATED_USERS => Some(Grantee::AuthenticatedUsers),
        LOG_DELIVERY => Some(Grantee::LogDelivery),
        _ => None,
    }
}

/// The URI of a group grantee (`None` for a user).
pub fn uri(g: &Grantee) -> Option<&'static str> {
    match g {
        Grantee::User(_) => None,
        Grantee::AllUsers => Some(ALL_USERS),
        Grantee::AuthenticatedUsers => Some(AUTHENTICATED_USERS),
        Grantee::LogDelivery => Some(LOG_DELIVERY),
    }
}

/// S3's name of a permission.
pub fn permission_name(p: Permission) -> &'static str {
    match p {
        Permission::Read => "READ",
        Permission::Write => "WRITE",
        Permission::ReadAcp => "READ_ACP",
        Permission::WriteAcp => "WRITE_ACP",
        Permission::FullControl => "FULL_CONTROL",
    }
}

/// The permission S3 names `name`.
pub fn permission(name: &str) -> Option<Permission> {
    Some(match name {
        "READ" => Permission::Read,
        "WRITE" => Permission::Write,
        "READ_ACP" => Permission::ReadAcp,
        "WRITE_ACP" => Permission::WriteAcp,
        "FULL_CONTROL" => Permission::FullControl,
        _ => return None,
    })
}

/// Why a grant header could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum HeaderError {
    /// Not `key="value", ...` with keys `id`, `uri`, `emailAddress`.
    Malformed(String),
    /// A grant to an e-mail address (users here have none).
    Email(String),
}

/// The grantees of one `x-amz-grant-*` header: `id="..."`, `uri="..."`
/// or `emailAddress="..."`, separated by commas.
pub fn header_grantees(v: &str) -> Result<Vec<Grantee>, HeaderError> {
    let mut out = Vec::new();
    for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, val) = (item.split_once('='))
            .ok_or_else(|| HeaderError::Malformed(format!("'{item}' is not key=\"value\"")))?;
        let val = val.trim().trim_matches('"');
        match k.trim() {
            "id" => out.push(Grantee::User(val.to_string())),
            "uri" => out.push(
                group(val).ok_or_else(|| HeaderError::Malformed(format!("unknown group {val}")))?,
            ),
            "emailAddress" => return Err(HeaderError::Email(val.to_string())),
            other => {
                return Err(HeaderError::Malformed(format!(
                    "unknown grantee kind {other}"
                )))
            }
        }
    }
    Ok(out)
}

/// The grants of a request's `x-amz-grant-*` headers, in the order read,
/// write, read-acp, write-acp, full-control; `None` when none is given.
pub fn from_headers(h: [Option<&str>; 5]) -> Result<Option<Vec<Grant>>, HeaderError> {
    use Permission::*;
    if h.iter().all(Option::is_none) {
        return Ok(None);
    }
    let mut out = Vec::new();
    for (v, p) in h
        .into_iter()
        .zip([Read, Write, ReadAcp, WriteAcp, FullControl])
    {
        for g in header_grantees(v.unwrap_or_default())? {
            out.push(grant(g, p));
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Permission::*;

    fn user(u: &str) -> Grantee {
        Grantee::User(u.into())
    }

    #[test]
    fn canned_acls_list_groups_then_the_owner() {
        let g = canned("public-read-write", "alice", "alice").unwrap();
        assert_eq!(
            g,
            vec![
                grant(Grantee::AllUsers, Read),
                grant(Grantee::AllUsers, Write),
                grant(user("alice"), FullControl)
            ]
        );
        assert_eq!(canned("private", "a", "a").unwrap().len(), 1);
        assert!(canned("everyone-may", "a", "a").is_none());
        // The bucket owner's grant only when someone else owns the object.
        assert_eq!(canned("bucket-owner-read", "a", "a").unwrap().len(), 1);
        let g = canned("bucket-owner-full-control", "bob", "alice").unwrap();
        assert_eq!(g[1], grant(user("alice"), FullControl));
    }

    #[test]
    fn grants_allow_what_they_name_and_no_more() {
        let g = canned("public-read", "alice", "alice").unwrap();
        assert!(allows(&g, "alice", Some("alice"), Write));
        assert!(allows(&g, "alice", None, Read));
        assert!(!allows(&g, "alice", None, Write));
        assert!(!allows(&g, "alice", Some("bob"), ReadAcp));
        let g = canned("authenticated-read", "alice", "alice").unwrap();
        assert!(allows(&g, "alice", Some("bob"), Read));
        assert!(!allows(&g, "alice", None, Read));
        // An owner who gave away every grant still reads and sets the ACL.
        let g = vec![grant(user("bob"), Read)];
        assert!(allows(&g, "alice", Some("alice"), WriteAcp));
        assert!(!allows(&g, "alice", Some("alice"), Read));
        assert!(allows(&g, "alice", Some("bob"), Read));
        assert!(!allows(&g, "alice", Some("bob"), ReadAcp));
    }

    #[test]
    fn grant_headers_are_read_and_bad_ones_refused() {
        let got = from_headers([
            Some(r#"id="bob", uri="http://acs.amazonaws.com/groups/global/AllUsers""#),
            None,
            None,
            None,
            Some("id=alice"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            got,
            vec![
                grant(user("bob"), Read),
                grant(Grantee::AllUsers, Read),
                grant(user("alice"), FullControl)
            ]
        );
        assert_eq!(from_headers([None; 5]), Ok(None));
        assert!(matches!(
            from_headers([Some("emailAddress=\"a@b\""), None, None, None, None]),
            Err(HeaderError::Email(_))
        ));
        assert!(from_headers([Some("bob"), None, None, None, None]).is_err());
        assert!(from_headers([Some("uri=\"http://x/y\""), None, None, None, None]).is_err());
    }
}
