//! Who may ask a monitor what: the identity a connection's certificate
//! gives (see `loligo_proto::tls`) against the request and the map. A
//! daemon acts only with the key the map records for it (any of its keys
//! before the first is recorded). An OSD speaks only for itself (boots,
//! reports, marks itself down, reports failures as the reporter);
//! requests only OSDs make come only from OSDs; a monitor joins only as
//! itself; Raft messages come only from monitors of this group. Daemons
//! may read the map. A client may do what its caps in the map allow, with the one
//! certificate the map records for it (`mon 'allow r'`: the map and
//! reads; `allow rw`: admin commands; `allow *`: users too).
//!
//! Pure: no I/O. It must never let an entity act as another, never allow
//! anything to a caller a secured monitor could not identify, and never
//! decide anything when the server runs without TLS ([`Caller::Anyone`]:
//! the documented opt-out, where anyone may do anything).

use crate::placements::{FewPlacer, Placements};
use loligo_monc::{MonError, MonRequest};
use loligo_proto::net::Caller;
use loligo_proto::tls::{mon_of, osd_of};
use loligo_types::caps::{is_daemon, Caps, MonCap, ADMIN};
use loligo_types::{asks, OsdMap};

/// The entities that may look up S3 secrets (with mon 'allow rw').
pub const S3_GATEWAY_PREFIX: &str = "client.rgw.";

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

/// The identity a secured monitor needs and did not get.
fn unidentified() -> MonError {
    MonError::Denied("a request without an identity on a secured monitor".into())
}

/// Whether `caller` may make request `req` under `map` (the monitor's,
/// `None` before the first).
pub fn authorize(
    caller: Caller<'_>,
    map: Option<&OsdMap>,
    req: &MonRequest,
) -> Result<(), MonError> {
    authorize_placed(caller, map, req, None)
}

/// [`authorize`], with the leader's carried placements to tell a PG's
/// primary (else CRUSH maps it).
pub fn authorize_placed(
    caller: Caller<'_>,
    map: Option<&OsdMap>,
    req: &MonRequest,
    placements: Option<&Placements>,
) -> Result<(), MonError> {
    let (e, serial) = match caller {
        Caller::Anyone => return Ok(()),
        Caller::Unidentified => return Err(unidentified()),
        Caller::Entity { entity, serial } => (entity, serial),
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
        // An S3 secret signs as its user: only gateways look one up
        // (and the users' own administrators, who may read them anyway).
        let secret = matches!(
            req,
            MonRequest::Admin(loligo_monc::protocol::Admin::S3Secret { .. })
        );
        if secret && !e.starts_with(S3_GATEWAY_PREFIX) && have < MonCap::All {
            return Err(denied(
                e,
                &format!("look up S3 secrets: only gateways ({S3_GATEWAY_PREFIX}NAME) may"),
            ));
        }
        return Ok(());
    }
    if let (Some(m), true) = (map, is_daemon(e)) {
        m.daemon_key_valid(e, serial).map_err(MonError::Denied)?;
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
        MonRequest::PgTemp { pg, .. } | MonRequest::PrimaryTemp { pg, .. } => match me {
            Some(osd) => {
                let map =
                    map.ok_or_else(|| denied(e, "ask for PG overrides before the first map"))?;
                let mut placer = match placements {
                    Some(p) => p.few(map),
                    None => FewPlacer::fresh(map),
                };
                asks::may_steer(map, &mut placer, *pg, osd).map_err(|why| denied(e, &why))
            }
            None => Err(denied(e, "ask for PG overrides")),
        },
        MonRequest::RecordWriteSets { items } => match me {
            Some(osd) => {
                let epoch = map.ok_or(MonError::NoMap)?.epoch;
                items
                    .iter()
                    .try_for_each(|a| asks::may_record(a, osd, epoch))
                    .map_err(|why| denied(e, &why))
            }
            None => Err(denied(e, "record write sets")),
        },
        MonRequest::Admin(_) => Err(denied(e, "run admin commands")),
        MonRequest::MonJoin { id } => {
            let member = map.is_none_or(|m| m.mons.is_empty() || m.mons.contains_key(id));
            if mon_of(e) == Some(*id) && member {
                Ok(())
            } else {
                Err(denied(e, &format!("join as mon.{id}")))
            }
        }
    }
}

/// Whether `caller` may send Raft messages to this monitor: a monitor of
/// this cluster (its certificate signed by the cluster's authority, which
/// the connection proved), with the key `map` (this monitor's, `None`
/// before the first) records for it, if any. Which monitors are members
/// is Raft's to judge, not this gate's: a monitor just added, which a
/// member coming back has not heard of yet, must be heard.
pub fn authorize_raft(caller: Caller<'_>, map: Option<&OsdMap>) -> Result<(), MonError> {
    let (e, serial) = match caller {
        Caller::Anyone => return Ok(()),
        Caller::Unidentified => return Err(unidentified()),
        Caller::Entity { entity, serial } => (entity, serial),
    };
    match (mon_of(e), map) {
        (Some(_), Some(m)) => m.daemon_key_valid(e, serial).map_err(MonError::Denied),
        (Some(_), None) => Ok(()),
        (None, _) => Err(denied(e, "send Raft messages to this monitor group")),
    }
}

#[cfg(test)]
pub(crate) mod tests {
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
                user("client.rgw.a", "allow rw"),
                user("client.rgw.weak", "allow r"),
            ],
        })
        .unwrap();
        m
    }

    /// An S3 secret goes to a gateway (client.rgw.NAME with mon 'allow
    /// rw'), not to any client that may change the map.
    #[test]
    fn only_gateways_look_up_s3_secrets() {
        let m = map_with_users();
        let ask = MonRequest::Admin(Admin::S3Secret {
            access_key: "AK".into(),
        });
        let as_ = |entity: &'static str| Caller::Entity {
            entity,
            serial: "aa",
        };
        assert!(authorize(as_("client.rgw.a"), Some(&m), &ask).is_ok());
        for who in ["client.ops", "client.reader", "client.rgw.weak"] {
            let e = authorize(as_(who), Some(&m), &ask).unwrap_err();
            assert!(matches!(e, MonError::Denied(_)), "{who}: {e}");
        }
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
            MonRequest::OsdReport(Box::new(OsdReport {
                osd,
                ..OsdReport::default()
            }))
        };
        let admin = MonRequest::Admin(Admin::Status);
        let create = MonRequest::Admin(Admin::PoolLs);
        let delete = MonRequest::Admin(Admin::OsdDown { ids: vec![1] });
        let users = MonRequest::Admin(Admin::AuthLs);
        let ws = MonRequest::RecordWriteSets { items: Vec::new() };
        let m = map_with_users();
        let map = Some(&m);
        let as_ = |entity: &'static str| Caller::Entity {
            entity,
            serial: "aa",
        };
        // Without TLS: anything (the opt-out); with TLS and no identity:
        // nothing.
        for r in [boot(3), fail(3), report(3), admin.clone(), ws.clone()] {
            assert!(authorize(Caller::Anyone, map, &r).is_ok());
            let e = authorize(Caller::Unidentified, map, &r).unwrap_err();
            assert!(matches!(e, MonError::Denied(_)), "{r:?}");
        }
        assert!(authorize(Caller::Unidentified, map, &MonRequest::GetMap).is_err());
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
                let got = authorize(
                    Caller::Entity {
                        entity: who,
                        serial: "aa",
                    },
                    map,
                    r,
                );
                assert_eq!(got.is_ok(), ok, "{who} {r:?}: {got:?}");
                if let Err(e) = got {
                    assert!(matches!(e, MonError::Denied(_)), "{e:?}");
                }
            }
        }
        let rotated = Caller::Entity {
            entity: "client.ops",
            serial: "bb",
        };
        let e = authorize(rotated, map, &create).unwrap_err();
        assert!(e.to_string().contains("rotated"), "{e}");
        assert_eq!(
            authorize(as_("client.reader"), None, &MonRequest::GetMap),
            Err(MonError::NoMap)
        );
        // A monitor is neither.
        assert!(authorize(as_("mon.0"), map, &boot(0)).is_err());
        assert!(authorize(as_("mon.0"), map, &admin).is_err());
        // Raft: members of the group only.
        assert!(authorize_raft(Caller::Anyone, None).is_ok());
        assert!(authorize_raft(Caller::Unidentified, None).is_err());
        assert!(authorize_raft(as_("mon.1"), None).is_ok());
        // A monitor the group added since (Raft judges membership).
        assert!(authorize_raft(as_("mon.3"), None).is_ok());
        assert!(authorize_raft(as_("osd.1"), None).is_err());
        assert!(authorize_raft(as_("client.admin"), None).is_err());
        // Once the map records a monitor's key, only that key speaks for
        // it: an old key of mon.1 (rotated away) is refused.
        let mut m = OsdMap::new("f", "osd").unwrap();
        let rec = |entity: &str, serial: &str| Change::AuthPut {
            entity: entity.into(),
            entry: AuthEntry {
                caps: Caps::default(),
                serial: serial.into(),
            },
        };
        m.apply(&Incremental {
            epoch: 2,
            changes: vec![rec("mon.1", "bb")],
        })
        .unwrap();
        let key = |e: &'static str, s: &'static str| Caller::Entity {
            entity: e,
            serial: s,
        };
        assert!(authorize_raft(key("mon.1", "bb"), Some(&m)).is_ok());
        assert!(authorize_raft(key("mon.1", "aa"), Some(&m)).is_err());
        // A member whose key is not recorded yet is taken by name.
        assert!(authorize_raft(key("mon.2", "cc"), Some(&m)).is_ok());
        // The same for its other requests, and it joins only as itself.
        let join = |id| MonRequest::MonJoin { id };
        assert!(authorize(key("mon.1", "bb"), Some(&m), &join(1)).is_ok());
        assert!(authorize(key("mon.1", "aa"), Some(&m), &join(1)).is_err());
        assert!(authorize(key("mon.1", "aa"), Some(&m), &MonRequest::GetMap).is_err());
        assert!(authorize(key("mon.2", "cc"), Some(&m), &join(1)).is_err());
        assert!(authorize(key("osd.1", "cc"), Some(&m), &join(1)).is_err());
        assert!(authorize(key("client.admin", "cc"), Some(&m), &join(1)).is_err());
        // Not a monitor of the map's monitor map.
        m.apply(&Incremental {
            epoch: 3,
            changes: vec![Change::MonMap {
                mons: [(0, "h:1".to_string()), (1, "h:2".to_string())].into(),
            }],
        })
        .unwrap();
        assert!(authorize(key("mon.2", "cc"), Some(&m), &join(2)).is_err());
        assert!(authorize(key("mon.1", "bb"), Some(&m), &join(1)).is_ok());
    }

    /// Five OSDs, a pool of 8 PGs with 3 replicas, at epoch 3.
    pub(crate) fn cluster() -> OsdMap {
        let mut m = OsdMap::new("f", "osd").unwrap();
        let boots = (0..5)
            .map(|id| Change::OsdBoot {
                id,
                addr: format!("127.0.0.1:{}", 6800 + id),
                host: "h".into(),
                crush_weight: 0x10000,
            })
            .collect();
        m.apply(&Incremental {
            epoch: 2,
            changes: boots,
        })
        .unwrap();
        let p = m.replicated_pool("rbd", 8, 3, 2);
        m.apply(&Incremental {
            epoch: 3,
            changes: vec![Change::PoolCreate(p)],
        })
        .unwrap();
        m
    }

    #[test]
    fn pg_overrides_come_only_from_the_pgs_primaries() {
        let mut m = cluster();
        let pg = loligo_types::PgId { pool: 1, ps: 3 };
        let placed = m.placer().unwrap().map_pg(pg).unwrap();
        let up = placed.up.clone();
        let stranger = (0..5).find(|o| !up.contains(o)).unwrap();
        let osd = |id: i32| Caller::Entity {
            entity: Box::leak(format!("osd.{id}").into_boxed_str()),
            serial: "x",
        };
        let temp = MonRequest::PgTemp {
            pg,
            osds: vec![up[1], up[0], up[2]],
        };
        let ptemp = MonRequest::PrimaryTemp {
            pg,
            osd: Some(up[1]),
        };
        for r in [&temp, &ptemp] {
            assert!(authorize(osd(up[0]), Some(&m), r).is_ok(), "{r:?}");
            for o in [up[1], up[2], stranger] {
                let e = authorize(osd(o), Some(&m), r).unwrap_err();
                assert!(e.to_string().contains("its primary is"), "{e}");
            }
            // A PG that does not exist, and no map yet.
            let none = match r {
                MonRequest::PgTemp { osds, .. } => MonRequest::PgTemp {
                    pg: loligo_types::PgId { pool: 9, ps: 0 },
                    osds: osds.clone(),
                },
                _ => MonRequest::PrimaryTemp {
                    pg: loligo_types::PgId { pool: 1, ps: 99 },
                    osd: None,
                },
            };
            assert!(authorize(osd(up[0]), Some(&m), &none).is_err(), "{none:?}");
            assert!(authorize(osd(up[0]), None, r).is_err());
        }
        // With the pg_temp in place, its primary may drop it, and CRUSH's
        // primary may still ask (its request again, or another).
        m.apply(&Incremental {
            epoch: 4,
            changes: vec![Change::PgTemp {
                pg,
                osds: vec![up[1], up[0], up[2]],
            }],
        })
        .unwrap();
        let clear = MonRequest::PgTemp {
            pg,
            osds: Vec::new(),
        };
        assert!(authorize(osd(up[1]), Some(&m), &clear).is_ok());
        assert!(authorize(osd(up[0]), Some(&m), &clear).is_ok());
        assert!(authorize(osd(up[2]), Some(&m), &clear).is_err());
        // A primary_temp's primary and the acting set's first both may.
        m.apply(&Incremental {
            epoch: 5,
            changes: vec![Change::PrimaryTemp {
                pg,
                osd: Some(up[2]),
            }],
        })
        .unwrap();
        let drop = MonRequest::PrimaryTemp { pg, osd: None };
        for o in [up[2], up[1], up[0]] {
            assert!(authorize(osd(o), Some(&m), &drop).is_ok(), "osd.{o}");
        }
        assert!(authorize(osd(stranger), Some(&m), &drop).is_err());
    }

    #[test]
    fn write_sets_are_recorded_only_by_their_primary_and_never_from_the_future() {
        let m = cluster();
        let pg = loligo_types::PgId { pool: 1, ps: 3 };
        let ask = |primary: i32, interval: u64, as_of: u64| loligo_types::RecordAsk {
            pg,
            record: loligo_types::WriteSetRecord {
                interval,
                osds: vec![primary, 4],
            },
            as_of,
            acting: vec![primary, 4],
            primary,
        };
        let by = |osd: &'static str, a| {
            authorize(
                Caller::Entity {
                    entity: osd,
                    serial: "x",
                },
                Some(&m),
                &MonRequest::RecordWriteSets { items: vec![a] },
            )
        };
        assert!(by("osd.1", ask(1, 3, 3)).is_ok());
        assert!(by("osd.1", ask(1, 2, 3)).is_ok());
        for (who, a, why) in [
            ("osd.2", ask(1, 3, 3), "as its primary osd.1"),
            ("osd.1", ask(1, u64::MAX, u64::MAX), "the map is at epoch 3"),
            ("osd.1", ask(1, 4, 3), "the map is at epoch 3"),
            ("osd.1", ask(1, 3, 4), "the map is at epoch 3"),
        ] {
            let e = by(who, a).unwrap_err();
            assert!(e.to_string().contains(why), "{e} (wanted: {why})");
        }
        let mut outside = ask(1, 3, 3);
        outside.acting = vec![2, 4];
        assert!(by("osd.1", outside)
            .unwrap_err()
            .to_string()
            .contains("without itself"));
        // One bad ask spoils the batch: the OSD sent it, nothing is taken.
        let e = authorize(
            Caller::Entity {
                entity: "osd.1",
                serial: "x",
            },
            Some(&m),
            &MonRequest::RecordWriteSets {
                items: vec![ask(1, 3, 3), ask(1, 9, 9)],
            },
        );
        assert!(e.is_err());
    }

    #[test]
    fn an_osd_acts_only_with_the_key_the_map_records_for_it() {
        let mut m = cluster();
        let as_osd1 = |serial: &'static str| Caller::Entity {
            entity: "osd.1",
            serial,
        };
        let boot = MonRequest::OsdBoot {
            id: 1,
            addr: "a:1".into(),
            host: "h".into(),
            crush_weight: 1,
        };
        // None recorded yet: any key of the authority (its first boot
        // records it).
        assert!(authorize(as_osd1("aa"), Some(&m), &boot).is_ok());
        let put = |serial: &str| Change::AuthPut {
            entity: "osd.1".into(),
            entry: AuthEntry {
                caps: Caps::default(),
                serial: serial.into(),
            },
        };
        m.apply(&Incremental {
            epoch: 4,
            changes: vec![put("aa")],
        })
        .unwrap();
        for r in [
            &boot,
            &MonRequest::GetMap,
            &MonRequest::OsdMarkMeDown { id: 1 },
        ] {
            assert!(authorize(as_osd1("aa"), Some(&m), r).is_ok(), "{r:?}");
            let e = authorize(as_osd1("bb"), Some(&m), r).unwrap_err();
            assert!(e.to_string().contains("rotated"), "{e}");
        }
        // Removed: every key of it refused.
        m.apply(&Incremental {
            epoch: 5,
            changes: vec![put(loligo_types::caps::REVOKED_SERIAL)],
        })
        .unwrap();
        for serial in ["aa", "bb"] {
            let e = authorize(as_osd1(serial), Some(&m), &boot).unwrap_err();
            assert!(e.to_string().contains("revoked"), "{e}");
        }
        // Another OSD's key is its own business.
        let osd2 = Caller::Entity {
            entity: "osd.2",
            serial: "cc",
        };
        assert!(authorize(osd2, Some(&m), &MonRequest::GetMap).is_ok());
        // An OSD's entry has no caps, and no caps make an OSD's entry.
        let with_caps = Change::AuthPut {
            entity: "osd.2".into(),
            entry: AuthEntry {
                caps: Caps::all(),
                serial: "cc".into(),
            },
        };
        assert!(m
            .apply(&Incremental {
                epoch: 6,
                changes: vec![with_caps],
            })
            .is_err());
    }
}
