//! Who may ask a monitor what: the identity a connection's certificate
//! gives (see `loligo_proto::tls`) against the request and the map. An
//! OSD speaks only for itself (boots, reports, marks itself down, reports
//! failures as the reporter); requests only OSDs make come only from
//! OSDs; Raft messages only from monitors of this group. Daemons may read
//! the map. A client may do what its caps in the map allow, with the one
//! certificate the map records for it (`mon 'allow r'`: the map and
//! reads; `allow rw`: admin commands; `allow *`: users too).
//!
//! Pure: no I/O. It must never let an entity act as another, and never
//! decide anything when the server runs without TLS (the peer is then
//! `None`: the documented opt-out, where anyone may do anything).

use loligo_monc::{MonError, MonRequest};
use loligo_proto::tls::{mon_of, osd_of};
use loligo_types::caps::{Caps, MonCap, ADMIN};
use loligo_types::OsdMap;

fn denied(entity: &str, what: &str) -> MonError {
    MonError::Denied(format!("{entity} may not {what}"))
}

/// The caps of client `e` with certificate `serial` under `map`.
fn client_caps(e: &str, serial: &str, map: Option<&OsdMap>) -> Result<Caps, MonError> {
    match map {
        Some(m) => m.caps_of(e, serial).cloned().map_err(MonError::Denied),
        None if e == ADMIN => Ok(Caps::all()),
        None => Err(MonError::NoMap),
    }
}

fn cap_text(c: MonCap) -> &'static str {
    match c {
        MonCap::None => "no rights",
        MonCap::Read => "'allow r'",
        MonCap::ReadWrite => "'allow rw'",
        MonCap::All => "'allow *'",
    }
}

/// Whether the peer (entity, certificate serial) may make request `req`
/// under `map` (the monitor's, `None` before the first).
pub fn authorize(
    peer: Option<(&str, &str)>,
    map: Option<&OsdMap>,
    req: &MonRequest,
) -> Result<(), MonError> {
    let Some((e, serial)) = peer else {
        return Ok(());
    };
    if e.starts_with("client.") {
        let (need, what) = match req {
            MonRequest::GetMap => (MonCap::Read, "read the map".to_string()),
            MonRequest::Admin(a) => (a.needs(), "run this command".to_string()),
            _ => return Err(denied(e, "make requests only OSDs make")),
        };
        let have = client_caps(e, serial, map)?.mon;
        if have < need {
            return Err(denied(
                e,
                &format!(
                    "{what}: it needs mon {}, {e} has {}",
                    cap_text(need),
                    cap_text(have)
                ),
            ));
        }
        return Ok(());
    }
    let me = osd_of(e);
    let as_osd = |id: i32, what: &str| {
        if me == Some(id) {
            Ok(())
        } else {
            Err(denied(e, &format!("{what} for osd.{id}")))
        }
    };
    match req {
        MonRequest::GetMap => Ok(()),
        MonRequest::OsdBoot { id, .. } => as_osd(*id, "boot"),
        MonRequest::OsdMarkMeDown { id } => as_osd(*id, "mark down"),
        MonRequest::OsdFailure { reporter, .. } => as_osd(*reporter, "report a failure"),
        MonRequest::OsdReport(r) => as_osd(r.osd, "send the report"),
        MonRequest::PgTemp { .. }
        | MonRequest::PrimaryTemp { .. }
        | MonRequest::RecordWriteSets { .. } => match me {
            Some(_) => Ok(()),
            None => Err(denied(e, "ask for PG overrides or record write sets")),
        },
        MonRequest::Admin(_) => Err(denied(e, "run admin commands")),
    }
}

/// Whether `entity` may send Raft messages to a group whose members are
/// `members` (ids).
pub fn authorize_raft(
    entity: Option<&str>,
    members: impl IntoIterator<Item = u64>,
) -> Result<(), MonError> {
    let Some(e) = entity else {
        return Ok(());
    };
    match mon_of(e) {
        Some(id) if members.into_iter().any(|m| m == id) => Ok(()),
        _ => Err(denied(e, "send Raft messages to this monitor group")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_monc::Admin;
    use loligo_types::caps::AuthEntry;
    use loligo_types::{Change, Incremental, OsdReport};

    fn map_with_users() -> OsdMap {
        let mut m = OsdMap::new("f", "osd").unwrap();
        let user = |name: &str, mon: &str| {
            let pairs = vec![("mon".to_string(), mon.to_string())];
            Change::AuthPut {
                entity: name.into(),
                entry: AuthEntry {
                    caps: Caps::parse(&pairs).unwrap(),
                    serial: "aa".into(),
                },
            }
        };
        m.apply(&Incremental {
            epoch: 2,
            changes: vec![
                user("client.reader", "allow r"),
                user("client.ops", "allow rw"),
            ],
        })
        .unwrap();
        m
    }

    #[test]
    fn osds_speak_for_themselves_clients_have_their_caps_monitors_vote() {
        let boot = |id| MonRequest::OsdBoot {
            id,
            addr: "a:1".into(),
            host: "h".into(),
            crush_weight: 1,
        };
        let fail = |reporter| MonRequest::OsdFailure {
            reporter,
            target: 9,
            failed_for_ms: 1,
        };
        let report = |osd| {
            MonRequest::OsdReport(OsdReport {
                osd,
                ..OsdReport::default()
            })
        };
        let admin = MonRequest::Admin(Admin::Status);
        let create = MonRequest::Admin(Admin::PoolLs);
        let delete = MonRequest::Admin(Admin::OsdDown { ids: vec![1] });
        let users = MonRequest::Admin(Admin::AuthLs);
        let ws = MonRequest::RecordWriteSets { items: Vec::new() };
        let m = map_with_users();
        let map = Some(&m);
        let as_ = |e: &'static str| Some((e, "aa"));
        // Without TLS: anything (the opt-out).
        for r in [boot(3), fail(3), report(3), admin.clone(), ws.clone()] {
            assert!(authorize(None, map, &r).is_ok());
        }
        // An OSD as itself.
        for r in [
            boot(3),
            fail(3),
            report(3),
            MonRequest::OsdMarkMeDown { id: 3 },
            ws.clone(),
            MonRequest::GetMap,
        ] {
            assert!(authorize(as_("osd.3"), map, &r).is_ok(), "{r:?}");
        }
        // ... never as another, and never an admin.
        for r in [
            boot(4),
            fail(4),
            report(4),
            MonRequest::OsdMarkMeDown { id: 4 },
            admin.clone(),
        ] {
            let e = authorize(as_("osd.3"), map, &r).unwrap_err();
            assert!(matches!(e, MonError::Denied(_)), "{r:?}");
        }
        // The bootstrap admin does everything a client may, and is no OSD.
        for r in [&admin, &create, &delete, &users, &MonRequest::GetMap] {
            assert!(authorize(as_("client.admin"), map, r).is_ok(), "{r:?}");
            assert!(authorize(as_("client.admin"), None, r).is_ok(), "{r:?}");
        }
        for r in [boot(0), fail(0), report(0), ws.clone()] {
            assert!(authorize(as_("client.admin"), map, &r).is_err(), "{r:?}");
        }
        // Users: what their caps say, with their recorded certificate.
        for (who, ok) in [
            ("client.reader", [true, true, false, false]),
            ("client.ops", [true, true, true, false]),
            ("client.stranger", [false, false, false, false]),
        ] {
            for (r, ok) in [&MonRequest::GetMap, &create, &delete, &users]
                .into_iter()
                .zip(ok)
            {
                let got = authorize(Some((who, "aa")), map, r);
                assert_eq!(got.is_ok(), ok, "{who} {r:?}: {got:?}");
                if let Err(e) = got {
                    assert!(matches!(e, MonError::Denied(_)), "{e:?}");
                }
            }
        }
        let e = authorize(Some(("client.ops", "bb")), map, &create).unwrap_err();
        assert!(e.to_string().contains("rotated"), "{e}");
        assert_eq!(
            authorize(as_("client.reader"), None, &MonRequest::GetMap),
            Err(MonError::NoMap)
        );
        // A monitor is neither.
        assert!(authorize(as_("mon.0"), map, &boot(0)).is_err());
        assert!(authorize(as_("mon.0"), map, &admin).is_err());
        // Raft: members of the group only.
        assert!(authorize_raft(None, [0]).is_ok());
        assert!(authorize_raft(Some("mon.1"), [0, 1, 2]).is_ok());
        assert!(authorize_raft(Some("mon.3"), [0, 1, 2]).is_err());
        assert!(authorize_raft(Some("osd.1"), [0, 1, 2]).is_err());
        assert!(authorize_raft(Some("client.admin"), [0, 1, 2]).is_err());
    }
}
