//! Who may ask a monitor what: the entity a connection's certificate
//! names (see `loligo_proto::tls`) against the request. An OSD speaks only
//! for itself (boots, reports, marks itself down, reports failures as the
//! reporter); requests only OSDs make come only from OSDs; admin
//! commands come only from clients; Raft messages only from monitors of
//! this group. Anyone of the cluster may read the map.
//!
//! Pure: no I/O. It must never let an entity act as another, and never
//! decide anything when the server runs without TLS (`entity` is then
//! `None`: the documented opt-out, where anyone may do anything).
//! Capabilities per client (read-only users, per-pool rights) are not
//! here yet: every client is an administrator.

use loligo_monc::{MonError, MonRequest};
use loligo_proto::tls::{mon_of, osd_of};

fn denied(entity: &str, what: &str) -> MonError {
    MonError::Denied(format!("{entity} may not {what}"))
}

/// Whether `entity` may make request `req`.
pub fn authorize(entity: Option<&str>, req: &MonRequest) -> Result<(), MonError> {
    let Some(e) = entity else {
        return Ok(());
    };
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
        MonRequest::Admin(_) => {
            if e.starts_with("client.") {
                Ok(())
            } else {
                Err(denied(e, "run admin commands"))
            }
        }
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
    use loligo_types::OsdReport;

    #[test]
    fn osds_speak_for_themselves_clients_administer_monitors_vote() {
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
        let ws = MonRequest::RecordWriteSets { items: Vec::new() };
        // Without TLS: anything (the opt-out).
        for r in [boot(3), fail(3), report(3), admin.clone(), ws.clone()] {
            assert!(authorize(None, &r).is_ok());
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
            assert!(authorize(Some("osd.3"), &r).is_ok(), "{r:?}");
        }
        // ... never as another, and never an admin.
        for r in [
            boot(4),
            fail(4),
            report(4),
            MonRequest::OsdMarkMeDown { id: 4 },
            admin.clone(),
        ] {
            let e = authorize(Some("osd.3"), &r).unwrap_err();
            assert!(matches!(e, MonError::Denied(_)), "{r:?}");
        }
        // A client administers and reads, and is no OSD.
        assert!(authorize(Some("client.admin"), &admin).is_ok());
        assert!(authorize(Some("client.admin"), &MonRequest::GetMap).is_ok());
        for r in [boot(0), fail(0), report(0), ws.clone()] {
            assert!(authorize(Some("client.admin"), &r).is_err(), "{r:?}");
        }
        // A monitor is neither.
        assert!(authorize(Some("mon.0"), &boot(0)).is_err());
        assert!(authorize(Some("mon.0"), &admin).is_err());
        // Raft: members of the group only.
        assert!(authorize_raft(None, [0]).is_ok());
        assert!(authorize_raft(Some("mon.1"), [0, 1, 2]).is_ok());
        assert!(authorize_raft(Some("mon.3"), [0, 1, 2]).is_err());
        assert!(authorize_raft(Some("osd.1"), [0, 1, 2]).is_err());
        assert!(authorize_raft(Some("client.admin"), [0, 1, 2]).is_err());
    }
}
