//! Monitors in-process on loopback ports: the first map, OSD boot, admin
//! commands and their typed errors, failure reports and beacons, restart
//! from disk, a three-member group losing its leader, and groups of three
//! and five whose members are stopped and started under load.

use loligo_crush::placement::holes_as_minus_one;
use loligo_mon::protocol::{Admin, MonError, MonRequest, RecordAsk};
use loligo_mon::{MonClient, MonConfig, MonHandle, Monitor};
use loligo_testkit::TempDir;
use loligo_types::{MapError, OsdMap, OsdReport};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use tokio::net::TcpListener;

fn tempdir(tag: &str) -> TempDir {
    TempDir::new(&format!("mon-{tag}")).unwrap()
}

async fn listeners(n: usize) -> (Vec<TcpListener>, BTreeMap<u64, String>) {
    let mut ls = Vec::new();
    let mut members = BTreeMap::new();
    for i in 0..n {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        members.insert(i as u64, l.local_addr().unwrap().to_string());
        ls.push(l);
    }
    (ls, members)
}

fn cfg(id: u64, members: &BTreeMap<u64, String>, dir: &Path) -> MonConfig {
    let mut c = MonConfig::new(
        id,
        members.clone(),
        dir.join(format!("mon.{id}")),
        "test-fsid",
    );
    c.failure_domain = "osd".into();
    c.create = true;
    c
}

async fn boot(c: &mut MonClient, id: i32) -> u64 {
    c.call(MonRequest::OsdBoot {
        id,
        addr: format!("127.0.0.1:{}", 7000 + id),
        host: "local".into(),
        crush_weight: 0x10000,
    })
    .await
    .unwrap()
    .epoch
}

fn admin(a: Admin) -> MonRequest {
    MonRequest::Admin(a)
}

fn create(name: &str) -> MonRequest {
    admin(Admin::PoolCreate {
        name: name.into(),
        pg_num: 16,
        size: 3,
        min_size: None,
        erasure_profile: None,
    })
}

/// A new group of `n` monitors in `dir`: their handles and addresses.
async fn group(n: usize, dir: &Path) -> (Vec<Option<MonHandle>>, BTreeMap<u64, String>) {
    let (ls, members) = listeners(n).await;
    let mut hs = Vec::new();
    for (i, l) in ls.into_iter().enumerate() {
        let h = Monitor::start(cfg(i as u64, &members, dir), l)
            .await
            .unwrap();
        hs.push(Some(h));
    }
    (hs, members)
}

/// `addr` bound again after the monitor that served it stopped (its
/// accept task closes the port a moment after `stop` returns).
async fn rebind(addr: &str) -> TcpListener {
    for _ in 0..100 {
        match TcpListener::bind(addr).await {
            Ok(l) => return l,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("bind {addr}: {e}"),
        }
    }
    panic!("{addr} still in use 5 s after its monitor stopped")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_monitor_serves_maps_and_commands() {
    let d = tempdir("one");
    let (mut ls, members) = listeners(1).await;
    let h = Monitor::start(cfg(0, &members, d.path()), ls.remove(0))
        .await
        .unwrap();
    let mut c = MonClient::new(vec![members[&0].clone()]).unwrap();
    for i in 0..4 {
        boot(&mut c, i).await;
    }
    c.call(create("rbd")).await.unwrap();
    let m = c.get_map().await.unwrap();
    assert_eq!(m.fsid, "test-fsid");
    assert_eq!(m.up_in(), (4, 4));
    let p = m.pool_by_name("rbd").unwrap();
    assert_eq!((p.size, p.min_size, p.pg_num), (3, 2, 16));

    // Creating it again (a retry after a lost reply) is done already;
    // other settings under the same name are refused.
    let epoch = m.epoch;
    let r = c.call(create("rbd")).await.unwrap();
    assert_eq!(r.value["message"], "pool 'rbd' already exists");
    assert_eq!(r.epoch, epoch, "nothing changed");
    let e = c
        .call(admin(Admin::PoolCreate {
            name: "rbd".into(),
            pg_num: 16,
            size: 2,
            min_size: None,
            erasure_profile: None,
        }))
        .await
        .unwrap_err();
    assert!(
        matches!(e, MonError::Invalid(ref m) if m.contains("other settings")),
        "{e}"
    );
    // Deleting a pool that is gone is done already.
    let r = c
        .call(admin(Admin::PoolDelete {
            name: "gone".into(),
            confirm: "gone".into(),
        }))
        .await
        .unwrap();
    assert_eq!(r.value["message"], "pool 'gone' does not exist");
    // Declaring an OSD lost needs the confirmation, and it must be down.
    let e = c
        .call(admin(Admin::OsdLost {
            id: 1,
            confirm: false,
        }))
        .await
        .unwrap_err();
    assert!(
        matches!(e, MonError::Invalid(ref m) if m.contains("yes-i-really-mean-it")),
        "{e}"
    );
    let e = c
        .call(admin(Admin::OsdLost {
            id: 1,
            confirm: true,
        }))
        .await
        .unwrap_err();
    assert!(
        matches!(e, MonError::Map(MapError::Invalid(ref m)) if m.contains("is up")),
        "{e}"
    );
    // Marking a PG's unfound objects lost: confirmed, a PG that exists,
    // and the map records the epoch.
    let mark = |pg: &str, confirm| {
        admin(Admin::PgMarkUnfoundLost {
            pg: pg.into(),
            confirm,
        })
    };
    let e = c.call(mark("1.0", false)).await.unwrap_err();
    assert!(
        matches!(e, MonError::Invalid(ref m) if m.contains("yes-i-really-mean-it")),
        "{e}"
    );
    let e = c.call(mark("1.zz", true)).await.unwrap_err();
    assert!(
        matches!(e, MonError::Invalid(ref m) if m.contains("not a PG id")),
        "{e}"
    );
    let e = c.call(mark("77.0", true)).await.unwrap_err();
    assert!(matches!(e, MonError::Map(MapError::NoSuchPool(_))), "{e}");
    let epoch = c.call(mark("1.0", true)).await.unwrap().epoch;
    let m = c.get_map().await.unwrap();
    let pg = loligo_types::PgId { pool: 1, ps: 0 };
    assert_eq!(m.unfound_lost.get(&pg), Some(&epoch));
    let dump = c.call(admin(Admin::OsdDump)).await.unwrap().value;
    assert_eq!(
        dump["pg_unfound_lost"],
        serde_json::json!([{"pg": "1.0", "epoch": epoch}])
    );

    // Typed refusals, and nothing changes.
    assert!(matches!(
        c.call(create("bad name")).await,
        Err(MonError::Map(MapError::Invalid(_)))
    ));
    let e = c
        .call(admin(Admin::PoolDelete {
            name: "rbd".into(),
            confirm: "no".into(),
        }))
        .await
        .unwrap_err();
    assert!(matches!(e, MonError::Invalid(_)), "{e}");
    assert!(matches!(
        c.call(admin(Admin::PoolGet {
            name: "nope".into()
        }))
        .await,
        Err(MonError::Map(MapError::NoSuchPool(_)))
    ));
    assert!(matches!(
        c.call(admin(Admin::OsdOut { ids: vec![42] })).await,
        Err(MonError::Map(MapError::NoSuchOsd(42)))
    ));
    assert_eq!(c.get_map().await.unwrap().epoch, m.epoch);

    // Out and in.
    c.call(admin(Admin::OsdOut { ids: vec![3] })).await.unwrap();
    assert_eq!(c.get_map().await.unwrap().up_in(), (4, 3));
    c.call(admin(Admin::OsdIn { ids: vec![3] })).await.unwrap();

    // Status: OSDs up, PGs unknown until their primaries report.
    let s = c.call(admin(Admin::Status)).await.unwrap().value;
    assert_eq!(s["osdmap"]["num_up_osds"], 4);
    assert_eq!(s["pgs"]["total"], 16);
    assert_eq!(s["health"]["status"], "HEALTH_WARN");

    // The tree lists the root, the host and four OSDs.
    let t = c.call(admin(Admin::OsdTree)).await.unwrap().value;
    assert_eq!(t.as_array().unwrap().len(), 6);

    // Garbage on the RPC port: a typed error, the monitor keeps serving.
    let mut raw =
        loligo_proto::v1::mon_client::MonClient::connect(format!("http://{}", members[&0]))
            .await
            .unwrap();
    let r = raw
        .call(loligo_proto::v1::Raw {
            body: b"\x00\xffgarbage".to_vec().into(),
            bulk: Vec::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let r: Result<serde_json::Value, MonError> = serde_json::from_slice(&r.body).unwrap();
    assert!(matches!(r, Err(MonError::Invalid(_))));
    let bad = raw
        .raft(loligo_proto::v1::RaftMessage {
            kind: "append".into(),
            body: b"{".to_vec().into(),
        })
        .await;
    assert!(bad.is_err());
    c.get_map().await.unwrap();

    // Restart from disk: the same map.
    let epoch = c.get_map().await.unwrap().epoch;
    h.stop().await;
    let l = rebind(&members[&0]).await;
    let again = MonConfig {
        create: false,
        ..cfg(0, &members, d.path())
    };
    let h = Monitor::start(again, l).await.unwrap();
    let m2 = c.get_map().await.unwrap();
    assert_eq!(m2.epoch, epoch);
    assert!(m2.pool_by_name("rbd").is_some());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_reports_and_silence_mark_osds_down_then_out() {
    let d = tempdir("fail");
    let (mut ls, members) = listeners(1).await;
    let mut conf = cfg(0, &members, d.path());
    conf.min_down_reporters = 2;
    conf.report_timeout = Duration::from_secs(3);
    conf.down_out_interval = Duration::from_secs(2);
    let h = Monitor::start(conf, ls.remove(0)).await.unwrap();
    let mut c = MonClient::new(vec![members[&0].clone()]).unwrap();
    for i in 0..4 {
        boot(&mut c, i).await;
    }
    let report = |osd| {
        MonRequest::OsdReport(Box::new(OsdReport {
            osd,
            ..Default::default()
        }))
    };
    let fail = |reporter| MonRequest::OsdFailure {
        reporter,
        target: 3,
        failed_for_ms: 25_000,
    };
    c.call(fail(0)).await.unwrap();
    c.call(fail(0)).await.unwrap();
    assert!(
        c.get_map().await.unwrap().is_up(3),
        "one reporter is not enough"
    );
    c.call(fail(1)).await.unwrap();
    assert!(!c.get_map().await.unwrap().is_up(3));

    // OSDs 0-2 keep reporting; 3 stays down and is marked out; nobody
    // else is marked down.
    for _ in 0..10 {
        for o in 0..3 {
            c.call(report(o)).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let m = c.get_map().await.unwrap();
    assert!(!m.osds[&3].is_in(), "auto-out after the interval");
    assert_eq!(m.up_in(), (3, 3));

    // Silence: OSD 2 stops reporting and is marked down.
    for _ in 0..10 {
        for o in 0..2 {
            c.call(report(o)).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let m = c.get_map().await.unwrap();
    assert!(!m.is_up(2));
    assert!(m.is_up(0) && m.is_up(1));

    // A reboot marks it up again.
    boot(&mut c, 2).await;
    assert!(c.get_map().await.unwrap().is_up(2));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_monitors_survive_the_loss_of_the_leader() {
    let d = tempdir("three");
    let (mut hs, members) = group(3, d.path()).await;
    let addrs: Vec<String> = members.values().cloned().collect();
    let mut c = MonClient::new(addrs.clone()).unwrap();
    boot(&mut c, 0).await;
    c.call(create("before")).await.unwrap();
    let e1 = c.get_map().await.unwrap().epoch;

    // Every member holds the committed epoch.
    let mut all_have = false;
    for _ in 0..50 {
        all_have = hs.iter().flatten().all(|h: &MonHandle| h.mon.epoch() >= e1);
        if all_have {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(all_have);

    let li = hs
        .iter()
        .position(|h| h.as_ref().is_some_and(|h| h.mon.is_leader()))
        .expect("a leader");
    if let Some(h) = hs[li].take() {
        h.stop().await;
    }
    // The others elect a leader and keep committing.
    c.call(create("after")).await.unwrap();
    let m = c.get_map().await.unwrap();
    assert!(
        m.pool_by_name("before").is_some(),
        "no committed epoch lost"
    );
    assert!(m.pool_by_name("after").is_some());
    assert!(m.epoch > e1);

    // A watcher sees the next epoch.
    let mut w = c.clone();
    let target = m.epoch + 1;
    let watcher = tokio::spawn(async move {
        let mut seen = 0;
        w.watch(None, |m| {
            seen = m.epoch;
            m.epoch < target
        })
        .await;
        seen
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.call(create("watched")).await.unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(10), watcher)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(seen, target);
    for h in hs.into_iter().flatten() {
        h.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitor_whose_store_was_wiped_refuses_to_rejoin_under_its_id() {
    let d = tempdir("wiped");
    let (mut ls, members) = listeners(1).await;
    let addr = members[&0].clone();
    let h = Monitor::start(cfg(0, &members, d.path()), ls.remove(0))
        .await
        .unwrap();
    let mut c = MonClient::new(vec![addr.clone()]).unwrap();
    c.get_map().await.unwrap();
    h.stop().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let restart = |create| MonConfig {
        create,
        ..cfg(0, &members, d.path())
    };
    // --mkfs over a store that exists: refused.
    let l = TcpListener::bind(&addr).await.unwrap();
    let e = Monitor::start(restart(true), l)
        .await
        .err()
        .expect("refused");
    assert!(e.contains("already holds a monitor store"), "{e}");
    // The store wiped: without --mkfs it does not start, and says why.
    std::fs::remove_dir_all(d.path().join("mon.0")).unwrap();
    let l = TcpListener::bind(&addr).await.unwrap();
    let e = Monitor::start(restart(false), l)
        .await
        .err()
        .expect("refused");
    assert!(e.contains("must not rejoin under its old id"), "{e}");
    // A plain restart of a made store still works.
    let l = TcpListener::bind(&addr).await.unwrap();
    let h = Monitor::start(restart(true), l).await.unwrap();
    h.stop().await;
    let l = rebind(&addr).await;
    let h = Monitor::start(restart(false), l).await.unwrap();
    c.get_map().await.unwrap();
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_watches_past_the_limit_are_refused_and_the_monitor_serves_on() {
    use loligo_proto::v1::mon_client::MonClient as Raw;
    use loligo_proto::v1::WatchRequest;
    let d = tempdir("watches");
    let (mut ls, members) = listeners(1).await;
    let mut conf = cfg(0, &members, d.path());
    conf.watches_max = 2;
    let h = Monitor::start(conf, ls.remove(0)).await.unwrap();
    let addr = format!("http://{}", members[&0]);
    let mut c = MonClient::new(vec![members[&0].clone()]).unwrap();
    c.get_map().await.unwrap();
    let mut raw = Raw::connect(addr.clone()).await.unwrap();
    let w1 = raw.watch(WatchRequest { have: 0 }).await.unwrap();
    let _w2 = raw.watch(WatchRequest { have: 0 }).await.unwrap();
    // A third is refused with a typed status; the monitor serves on.
    let Err(e) = raw.watch(WatchRequest { have: 0 }).await else {
        panic!("a third watch is taken");
    };
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e}");
    c.call(create("during")).await.unwrap();
    // A watcher that goes gives its place back (without waiting for an
    // epoch).
    drop(w1);
    let mut again = None;
    for _ in 0..50 {
        if let Ok(w) = raw.watch(WatchRequest { have: 0 }).await {
            again = Some(w);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut s = again.expect("a freed place is taken again").into_inner();
    assert!(
        s.message().await.unwrap().is_some(),
        "the watch streams maps"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_monitor_with_tls_bounds_each_entitys_watches_and_refuses_forgeries() {
    use loligo_proto::net::{Channels, Security};
    use loligo_proto::tls::Authority;
    use loligo_proto::v1::WatchRequest;
    let ca = Authority::generate("t").unwrap();
    let sec = |e: &str| Security::new(ca.issue(e).unwrap()).unwrap();
    let d = tempdir("tls-watches");
    let (mut ls, members) = listeners(1).await;
    let mut conf = cfg(0, &members, d.path());
    conf.security = Some(sec("mon.0"));
    conf.watches_per_entity_max = 2;
    let h = Monitor::start(conf, ls.remove(0)).await.unwrap();
    let addr = members[&0].clone();
    let admin = sec("client.admin");
    let mut c = MonClient::new(vec![addr.clone()])
        .unwrap()
        .secured(Some(&admin));
    c.get_map().await.unwrap();
    // Plain: refused at the handshake.
    let mut plain = MonClient::new(vec![addr.clone()]).unwrap();
    plain.deadline = Duration::from_secs(2);
    assert!(plain.get_map().await.is_err());
    // An OSD's keyring may not run admin commands, nor boot another OSD.
    let mut osd1 = MonClient::new(vec![addr.clone()])
        .unwrap()
        .secured(Some(&sec("osd.1")));
    let r = osd1.call(create("nope")).await;
    assert!(matches!(r, Err(MonError::Denied(_))), "{r:?}");
    // An oversized request is refused before it is parsed; the monitor
    // serves on.
    let huge = create(&"p".repeat(loligo_mon::server::CALL_BYTES_MAX));
    let r = c.call(huge).await;
    assert!(
        matches!(&r, Err(MonError::Invalid(m)) if m.contains("at most")),
        "{r:?}"
    );
    // One far larger is refused from its frame's header, before its body
    // is read (and not tried again on another monitor).
    let larger = create(&"p".repeat(4 * loligo_mon::server::CALL_BYTES_MAX));
    let r = c.call(larger).await;
    assert!(
        matches!(&r, Err(MonError::Invalid(m)) if m.contains("too large")),
        "{r:?}"
    );
    c.get_map().await.unwrap();
    // Two watches per entity; a third of the same entity is refused, and
    // another entity is served.
    let raw = |s: &Security| {
        let ch = Channels::new(Duration::from_secs(2), None).secured(Some(s));
        let a = addr.clone();
        async move {
            ch.mon(&a, &loligo_proto::tls::Expect::AnyMonitor)
                .await
                .unwrap()
        }
    };
    let mut a = raw(&admin).await;
    let w1 = a.watch(WatchRequest { have: 0 }).await.unwrap();
    let _w2 = a.watch(WatchRequest { have: 0 }).await.unwrap();
    let Err(e) = a.watch(WatchRequest { have: 0 }).await else {
        panic!("a third watch of one entity is taken");
    };
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e}");
    assert!(e.message().contains("client.admin"), "{e}");
    // Raft messages from anyone but a monitor are refused before they
    // are read (a client, an OSD); a vote asked by a monitor outside the
    // group is refused too.
    let vote = serde_json::json!({
        "vote": {"leader_id": {"term": 99, "node_id": 7}, "committed": false},
        "last_log_id": null
    });
    for who in ["client.admin", "osd.1", "mon.5"] {
        let mut m = raw(&sec(who)).await;
        let r = m
            .raft(loligo_proto::v1::RaftMessage {
                kind: "vote".into(),
                body: serde_json::to_vec(&vote).unwrap().into(),
            })
            .await;
        let Err(e) = r else {
            panic!("{who}'s Raft vote was taken");
        };
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{who}: {e}");
    }
    // A client the map does not know reads nothing.
    let mut stranger = raw(&sec("client.b")).await;
    let Err(e) = stranger.watch(WatchRequest { have: 0 }).await else {
        panic!("a stranger watches the map");
    };
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
    let mut b = raw(&sec("osd.1")).await;
    let mut s = b
        .watch(WatchRequest { have: 0 })
        .await
        .unwrap()
        .into_inner();
    assert!(s.message().await.unwrap().is_some());
    // One that goes gives its entity's place back.
    drop(w1);
    let mut again = false;
    for _ in 0..50 {
        if a.watch(WatchRequest { have: 0 }).await.is_ok() {
            again = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(again, "a freed place is taken again");
    h.stop().await;
}

/// A one-member monitor group that leads and has its first map (its
/// folder, its handle, its address).
async fn one_member(tag: &str) -> (TempDir, MonHandle, BTreeMap<u64, String>) {
    let d = tempdir(tag);
    let (mut ls, members) = listeners(1).await;
    let h = Monitor::start(cfg(0, &members, d.path()), ls.remove(0))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !(h.mon.is_leader() && h.mon.epoch() > 0) {
        assert!(std::time::Instant::now() < deadline, "no leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (d, h, members)
}

/// OSDs booting together share epochs (a whole cluster starting makes a
/// few maps, not one per OSD), and a boot the map refuses fails alone:
/// the others of its batch are committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boots_arriving_together_share_an_epoch_and_fail_alone() {
    let (_d, h, members) = one_member("boots").await;
    let mon = h.mon.clone();
    let boot = |id: i32, addr: String| MonRequest::OsdBoot {
        id,
        addr,
        host: format!("h{}", id / 4),
        crush_weight: 0x10000,
    };
    // Boots 0..40 at once; then 40..80, one of them (57) with an address
    // no map takes (empty).
    for round in 0..2 {
        let before = mon.epoch();
        let mut tasks = tokio::task::JoinSet::new();
        for id in round * 40..(round + 1) * 40 {
            let addr = if id == 57 {
                String::new()
            } else {
                format!("127.0.0.1:{}", 7000 + id)
            };
            let (m, req) = (mon.clone(), boot(id, addr));
            tasks.spawn(async move { (id, m.call(req).await) });
        }
        while let Some(r) = tasks.join_next().await {
            let (id, r) = r.unwrap();
            if id == 57 {
                assert!(matches!(r, Err(MonError::Map(_))), "osd.57: {r:?}");
            } else {
                assert!(r.is_ok(), "osd.{id}: {r:?}");
            }
        }
        if round == 0 {
            // Fewer epochs than boots: they were proposed together.
            let epochs = mon.epoch() - before;
            assert!(epochs < 20, "{epochs} epochs for 40 boots");
        }
    }
    let mut c = MonClient::new(vec![members[&0].clone()]).unwrap();
    let map = c.get_map().await.unwrap();
    for id in 0..80 {
        assert_eq!(map.is_up(id), id != 57, "osd.{id}");
    }
    h.stop().await;
}

/// Write-set records from many OSDs arriving together (the PGs an OSD
/// failure moves) share epochs, and each caller hears which of its own
/// PGs' records hold: a record older than the map's is left out, the
/// others of its batch go in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_arriving_together_share_an_epoch() {
    use loligo_types::{PgId, WriteSetRecord};
    let (_d, h, members) = one_member("records").await;
    let mon = h.mon.clone();
    for id in 0..3 {
        let boot = MonRequest::OsdBoot {
            id,
            addr: format!("127.0.0.1:{}", 7000 + id),
            host: format!("h{id}"),
            crush_weight: 0x10000,
        };
        mon.call(boot).await.unwrap();
    }
    mon.call(MonRequest::Admin(Admin::PoolCreate {
        name: "p".into(),
        pg_num: 128,
        size: 3,
        min_size: None,
        erasure_profile: None,
    }))
    .await
    .unwrap();
    let mut c = MonClient::new(vec![members[&0].clone()]).unwrap();
    let map = c.get_map().await.unwrap();
    let pool = map.pools.values().find(|p| p.name == "p").unwrap().id;
    let pg = |ps: u32| PgId { pool, ps };
    let record = |interval: u64| WriteSetRecord {
        interval,
        osds: vec![0, 1, 2],
    };
    // An ask as PG `ps`'s primary makes it under map `m`.
    let ask_with = |m: &OsdMap, ps: u32, r: WriteSetRecord| {
        let pm = m.placer().unwrap().map_pg(pg(ps)).unwrap();
        RecordAsk {
            pg: pg(ps),
            record: r,
            as_of: m.epoch,
            acting: holes_as_minus_one(&pm.acting),
            primary: pm.acting_primary,
        }
    };
    let ask = |m: &OsdMap, ps: u32, interval: u64| ask_with(m, ps, record(interval));
    // PG 0 holds a record of interval 5 first.
    let first = MonRequest::RecordWriteSets {
        items: vec![ask(&map, 0, 5)],
    };
    mon.call(first).await.unwrap();
    // 40 callers at once, each two PGs; caller 7 also sends PG 0 at
    // interval 3 (stale: the map holds 5).
    let before = mon.epoch();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..40u32 {
        // As of the map before the first record: records move no PG.
        let mut items = vec![ask(&map, 1 + 2 * i, 10), ask(&map, 2 + 2 * i, 10)];
        if i == 7 {
            items.push(ask(&map, 0, 3));
        }
        let m = mon.clone();
        tasks.spawn(async move {
            let r = m.call(MonRequest::RecordWriteSets { items }).await;
            (i, r)
        });
    }
    while let Some(r) = tasks.join_next().await {
        let (i, r) = r.unwrap();
        let held: Vec<PgId> = serde_json::from_value(r.unwrap().value).unwrap();
        assert_eq!(held, vec![pg(1 + 2 * i), pg(2 + 2 * i)], "caller {i}");
    }
    let epochs = mon.epoch() - before;
    assert!((1..20).contains(&epochs), "{epochs} epochs for 40 callers");
    let map = c.get_map().await.unwrap();
    assert_eq!(map.write_sets[&pg(0)].interval, 5);
    for ps in 1..81 {
        assert_eq!(map.write_sets[&pg(ps)].interval, 10, "pg {ps}");
    }
    // A record naming an OSD that is not up (down, or booted again, since
    // its interval began) is left out; the rest of its request goes in.
    let late = WriteSetRecord {
        interval: 20,
        osds: vec![0, 5],
    };
    let r = mon
        .call(MonRequest::RecordWriteSets {
            items: vec![ask_with(&map, 90, late), ask(&map, 91, 20)],
        })
        .await
        .unwrap();
    let held: Vec<PgId> = serde_json::from_value(r.value).unwrap();
    assert_eq!(held, vec![pg(91)]);
    let map = c.get_map().await.unwrap();
    assert!(!map.write_sets.contains_key(&pg(90)));
    assert_eq!(map.write_sets[&pg(91)].interval, 20);
    // Late records that would give up what is left go out. An
    // erasure-coded pool (k = 2): a PG whose record is down to one member
    // (the others declared lost) is short.
    mon.call(MonRequest::Admin(Admin::EcProfileSet {
        name: "k2".into(),
        plugin: loligo_types::EcPlugin::ReedSolomon,
        k: 2,
        m: 1,
        s: 1,
        l: 0,
        optimal: false,
        alignment: 4096,
        stripe_unit: 0,
    }))
    .await
    .unwrap();
    mon.call(MonRequest::Admin(Admin::PoolCreate {
        name: "ec".into(),
        pg_num: 16,
        size: 0,
        min_size: None,
        erasure_profile: Some("k2".into()),
    }))
    .await
    .unwrap();
    let map = c.get_map().await.unwrap();
    let ec = map.pools.values().find(|p| p.name == "ec").unwrap().id;
    let epg = |ps: u32| PgId { pool: ec, ps };
    let ec_ask = |m: &OsdMap, ps: u32, osds: Vec<i32>| {
        let pm = m.placer().unwrap().map_pg(epg(ps)).unwrap();
        RecordAsk {
            pg: epg(ps),
            record: WriteSetRecord {
                interval: m.epoch,
                osds,
            },
            as_of: m.epoch,
            acting: holes_as_minus_one(&pm.acting),
            primary: pm.acting_primary,
        }
    };
    // Records of one member each for PGs 0-3 (short of k = 2).
    let items = (0..4).map(|ps| ec_ask(&map, ps, vec![0])).collect();
    mon.call(MonRequest::RecordWriteSets { items })
        .await
        .unwrap();
    let before = c.get_map().await.unwrap();
    assert!((0..4).all(|ps| before.record_short(epg(ps))));
    // PGs 0, 1 and 2 move (a primary_temp); then asks from before arrive:
    // PG 0's names none of its short record's members (its primary went
    // on without osd.0's copy): late, it goes out. PG 1's keeps osd.0,
    // PG 2's is for a PG whose record then is whole, PG 3's PG did not
    // move: those go in, as before.
    let whole = ec_ask(&before, 2, vec![0, 1]);
    mon.call(MonRequest::RecordWriteSets { items: vec![whole] })
        .await
        .unwrap();
    for ps in 0..3 {
        let pm = before.placer().unwrap().map_pg(epg(ps)).unwrap();
        let other = pm.acting[1];
        mon.call(MonRequest::PrimaryTemp {
            pg: epg(ps),
            osd: Some(other),
        })
        .await
        .unwrap();
    }
    let now = c.get_map().await.unwrap();
    assert!(
        (0..3).all(|ps| ec_ask(&now, ps, vec![]).primary != ec_ask(&before, ps, vec![]).primary)
    );
    let items = vec![
        ec_ask(&before, 0, vec![1, 2]),
        ec_ask(&before, 1, vec![0, 2]),
        ec_ask(&before, 2, vec![1, 2]),
        ec_ask(&before, 3, vec![1, 2]),
    ];
    let r = mon
        .call(MonRequest::RecordWriteSets { items })
        .await
        .unwrap();
    let held: Vec<PgId> = serde_json::from_value(r.value).unwrap();
    assert_eq!(held, vec![epg(1), epg(2), epg(3)], "pg 0's record is late");
    let map = c.get_map().await.unwrap();
    assert_eq!(map.write_sets[&epg(0)].osds, vec![0]);
    // Asked again by the new interval's primary, PG 0's goes in.
    let r = mon
        .call(MonRequest::RecordWriteSets {
            items: vec![ec_ask(&map, 0, vec![1, 2])],
        })
        .await
        .unwrap();
    let held: Vec<PgId> = serde_json::from_value(r.value).unwrap();
    assert_eq!(held, vec![epg(0)]);
    // A change that may move any PG (a fourth OSD boots): the placement
    // of each PG with a short record is computed, and only the late asks
    // of PGs the boot moved go out.
    let items = (4..16).map(|ps| ec_ask(&map, ps, vec![0])).collect();
    mon.call(MonRequest::RecordWriteSets { items })
        .await
        .unwrap();
    let before = c.get_map().await.unwrap();
    mon.call(MonRequest::OsdBoot {
        id: 3,
        addr: "127.0.0.1:7003".into(),
        host: "h3".into(),
        crush_weight: 0x10000,
    })
    .await
    .unwrap();
    let after = c.get_map().await.unwrap();
    let pss: Vec<u32> = (4..16).collect();
    let moved: Vec<PgId> = pss
        .iter()
        .filter(|&&ps| {
            let (a, b) = (ec_ask(&before, ps, vec![]), ec_ask(&after, ps, vec![]));
            (a.acting, a.primary) != (b.acting, b.primary)
        })
        .map(|&ps| epg(ps))
        .collect();
    assert!(!moved.is_empty() && moved.len() < pss.len(), "{moved:?}");
    let items = pss
        .iter()
        .map(|&ps| ec_ask(&before, ps, vec![1, 2]))
        .collect();
    let r = mon
        .call(MonRequest::RecordWriteSets { items })
        .await
        .unwrap();
    let held: Vec<PgId> = serde_json::from_value(r.value).unwrap();
    let stayed: Vec<PgId> = pss
        .iter()
        .map(|&ps| epg(ps))
        .filter(|p| !moved.contains(p))
        .collect();
    assert_eq!(
        held, stayed,
        "only PGs the boot moved lose their late records"
    );
    h.stop().await;
}

/// Three secured monitors: each one's key is recorded (the leader its
/// own, the others by joining), the monitor map names them, and a member
/// started with a key of its name that the map does not record gets no
/// Raft traffic from the others (it falls behind) until it runs with its
/// own key again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secured_monitors_record_their_keys_and_take_raft_only_from_those() {
    use loligo_proto::net::Security;
    use loligo_proto::tls::Authority;
    let ca = Authority::generate("t").unwrap();
    let keys: Vec<_> = (0..3)
        .map(|i| ca.issue(&format!("mon.{i}")).unwrap())
        .collect();
    let d = tempdir("three-keys");
    let (ls, members) = listeners(3).await;
    let conf = |i: usize, k: &loligo_proto::tls::Keyring, create: bool| {
        let mut c = cfg(i as u64, &members, d.path());
        c.security = Some(Security::new(k.clone()).unwrap());
        c.create = create;
        c
    };
    let mut hs = Vec::new();
    for (i, l) in ls.into_iter().enumerate() {
        hs.push(Some(
            Monitor::start(conf(i, &keys[i], true), l).await.unwrap(),
        ));
    }
    let admin = Security::new(ca.issue("client.admin").unwrap()).unwrap();
    let mut c = MonClient::new(members.values().cloned().collect())
        .unwrap()
        .secured(Some(&admin));
    let serial = |i: usize| keys[i].identity().unwrap().serial;
    let mut m = c.get_map().await.unwrap();
    for _ in 0..100 {
        if m.mons == members && (0..3).all(|i| m.daemon_serial(&format!("mon.{i}")).is_some()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        m = c.get_map().await.unwrap();
    }
    assert_eq!(m.mons, members, "the monitor map names the group");
    for i in 0..3 {
        assert_eq!(
            m.daemon_serial(&format!("mon.{i}")),
            Some(serial(i).as_str()),
            "mon.{i}'s key"
        );
    }
    // A follower restarted with another key of its name.
    let f = hs
        .iter()
        .position(|h| h.as_ref().is_some_and(|h| !h.mon.is_leader()))
        .unwrap();
    if let Some(h) = hs[f].take() {
        h.stop().await;
    }
    let l = rebind(&members[&(f as u64)]).await;
    let other = ca.issue(&format!("mon.{f}")).unwrap();
    let h = Monitor::start(conf(f, &other, false), l).await.unwrap();
    c.call(create("while-refused")).await.unwrap();
    let e = c.get_map().await.unwrap().epoch;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        h.mon.epoch() < e,
        "a member with a key the map does not record got epoch {} of {e}",
        h.mon.epoch()
    );
    // With its own key again, it catches up.
    h.stop().await;
    let l = rebind(&members[&(f as u64)]).await;
    let h = Monitor::start(conf(f, &keys[f], false), l).await.unwrap();
    let mut caught_up = false;
    for _ in 0..100 {
        caught_up = h.mon.epoch() >= e;
        if caught_up {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        caught_up,
        "mon.{f} with its own key stayed at {}",
        h.mon.epoch()
    );
    // A client's key gets nothing from the Raft service: refused before
    // its message is read.
    let ch = loligo_proto::net::Channels::new(Duration::from_secs(2), Some(Duration::from_secs(5)))
        .secured(Some(&admin));
    let mut raft = ch
        .mon_peer(&members[&0], &loligo_proto::tls::Expect::AnyMonitor)
        .await
        .unwrap();
    let r = raft
        .raft(loligo_proto::v1::RaftMessage {
            kind: "vote".into(),
            body: vec![b'x'; 32 << 20].into(),
        })
        .await;
    assert_eq!(
        r.map(|_| ()).unwrap_err().code(),
        tonic::Code::PermissionDenied
    );
    h.stop().await;
    for h in hs.into_iter().flatten() {
        h.stop().await;
    }
}

/// Monitors under fire: members of a 3- and a 5-member group are stopped
/// (the leader among them) and started again from their stores, at most
/// a minority down at once, while a client creates pools and boots OSDs
/// through whichever member answers, and another watches the map. No
/// acknowledged change is lost, the watcher's epochs only ever go up, and
/// every member ends with the same incremental for every epoch (the map
/// never forked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitors_stopped_and_restarted_never_fork_or_lose_a_commit() {
    for (n, seed) in [(3, 1), (5, 2)] {
        under_fire(n, seed, Duration::from_secs(8)).await;
    }
}

async fn under_fire(n: usize, seed: u64, lasts: Duration) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let d = tempdir(&format!("fire{n}"));
    let (mut hs, members) = group(n, d.path()).await;
    let addrs: Vec<String> = members.values().cloned().collect();
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let epochs: Arc<Mutex<Vec<u64>>> = Arc::default();
    let writer = {
        let (stop, acked, addrs) = (stop.clone(), acked.clone(), addrs.clone());
        tokio::spawn(async move {
            let mut c = MonClient::new(addrs).unwrap();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let name = format!("p{i}");
                i += 1;
                let call = c.call(create(&name));
                if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(5), call).await {
                    acked.lock().unwrap().push(name);
                }
                if i % 3 == 0 {
                    let b = boot(&mut c, i % 8);
                    let _ = tokio::time::timeout(Duration::from_secs(5), b).await;
                }
            }
        })
    };
    let watcher = {
        let (epochs, addrs) = (epochs.clone(), addrs.clone());
        tokio::spawn(async move {
            let mut c = MonClient::new(addrs).unwrap();
            c.watch(None, |m| {
                epochs.lock().unwrap().push(m.epoch);
                true
            })
            .await;
        })
    };
    let mut rng = loligo_testkit::Rng::new(seed);
    let t0 = std::time::Instant::now();
    let mut stops = 0;
    while t0.elapsed() < lasts {
        tokio::time::sleep(Duration::from_millis(200 + rng.below(800))).await;
        let down: Vec<usize> = (0..n).filter(|&i| hs[i].is_none()).collect();
        let i = rng.index(n);
        match hs[i].take() {
            Some(h) if down.len() < (n - 1) / 2 => {
                h.stop().await;
                stops += 1;
            }
            Some(h) => hs[i] = Some(h),
            None => {
                let l = rebind(&members[&(i as u64)]).await;
                let c = MonConfig {
                    create: false,
                    ..cfg(i as u64, &members, d.path())
                };
                hs[i] = Some(Monitor::start(c, l).await.unwrap());
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    for (i, h) in hs.iter_mut().enumerate() {
        if h.is_none() {
            let l = rebind(&members[&(i as u64)]).await;
            let c = MonConfig {
                create: false,
                ..cfg(i as u64, &members, d.path())
            };
            *h = Some(Monitor::start(c, l).await.unwrap());
        }
    }
    let mut c = MonClient::new(addrs).unwrap();
    let m = c.get_map().await.unwrap();
    let acked = acked.lock().unwrap().clone();
    for name in &acked {
        assert!(
            m.pool_by_name(name).is_some(),
            "{n} monitors: pool {name} acknowledged, then lost"
        );
    }
    // Every member catches up with the newest epoch.
    let hs: Vec<MonHandle> = hs.into_iter().flatten().collect();
    for _ in 0..100 {
        if hs.iter().all(|h| h.mon.epoch() >= m.epoch) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        hs.iter().all(|h| h.mon.epoch() >= m.epoch),
        "a member never caught up"
    );
    // One history: the same incremental for each epoch on every member.
    let mut compared = 0;
    for e in 2..=m.epoch {
        let incs: Vec<Vec<u8>> = hs
            .iter()
            .filter_map(|h| match h.mon.updates_since(e - 1).into_iter().next() {
                Some(loligo_mon::protocol::MapUpdate::Inc(b)) => Some(b),
                _ => None,
            })
            .collect();
        if incs.len() > 1 {
            assert!(
                incs.windows(2).all(|w| w[0] == w[1]),
                "{n} monitors: epoch {e} forked"
            );
            compared += 1;
        }
    }
    watcher.abort();
    let seen = epochs.lock().unwrap().clone();
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "{n} monitors: the watcher's epochs went back: {seen:?}"
    );
    eprintln!(
        "{n} monitors: {stops} stopped and started, {} pools acknowledged, epoch {}, {compared} epochs compared, {} seen by the watcher",
        acked.len(),
        m.epoch,
        seen.len()
    );
    assert!(stops >= 2, "{n} monitors: only {stops} stops");
    assert!(acked.len() > 10, "{n} monitors: only {} pools", acked.len());
    assert!(compared > 10, "{n} monitors: {compared} epochs compared");
    for h in hs {
        h.stop().await;
    }
}

/// A monitor cut off from the others' majority (here: the only one of
/// three running) changes nothing, and a client it answers is told why:
/// no leader, how many answered, and that without a quorum the map
/// cannot change. Once a second member is back, the two commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minority_of_monitors_changes_nothing_and_says_why() {
    let d = tempdir("minority");
    let (mut hs, members) = group(3, d.path()).await;
    let addrs: Vec<String> = members.values().cloned().collect();
    let mut c = MonClient::new(addrs.clone()).unwrap();
    c.call(create("before")).await.unwrap();
    let e0 = c.get_map().await.unwrap().epoch;
    for h in hs.iter_mut().skip(1) {
        if let Some(h) = h.take() {
            h.stop().await;
        }
    }
    let mut c = MonClient::new(addrs.clone()).unwrap();
    c.deadline = Duration::from_secs(4);
    for req in [admin(Admin::Status), create("during")] {
        match c.call(req).await {
            Err(MonError::NoQuorum(why)) => assert!(why.contains("cannot change"), "{why}"),
            other => panic!("a minority answered {other:?}"),
        }
    }
    if let Some(h) = &hs[0] {
        assert_eq!(h.mon.epoch(), e0, "the minority changed the map");
    }
    // A second member back: a majority again.
    let l = rebind(&members[&1]).await;
    let restart = MonConfig {
        create: false,
        ..cfg(1, &members, d.path())
    };
    hs[1] = Some(Monitor::start(restart, l).await.unwrap());
    let mut c = MonClient::new(addrs).unwrap();
    c.call(create("after")).await.unwrap();
    let m = c.get_map().await.unwrap();
    assert!(m.pool_by_name("before").is_some() && m.pool_by_name("after").is_some());
    assert!(m.pool_by_name("during").is_none());
    for h in hs.into_iter().flatten() {
        h.stop().await;
    }
}

/// A leader that no longer hears from a majority takes no OSD reports:
/// it answers `NoQuorum` (its lease from the majority is older than an
/// election timeout), so an OSD's report goes on to the monitors that
/// elect a new leader, which would otherwise mark the OSD down for
/// silence while the old leader took its reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_the_majority_takes_no_osd_reports() {
    let d = tempdir("cutleader");
    let (mut hs, members) = group(3, d.path()).await;
    let addrs: Vec<String> = members.values().cloned().collect();
    let mut c = MonClient::new(addrs).unwrap();
    boot(&mut c, 0).await;
    let li = hs
        .iter()
        .position(|h| h.as_ref().is_some_and(|h| h.mon.is_leader()))
        .expect("a leader");
    let report = || {
        MonRequest::OsdReport(Box::new(OsdReport {
            osd: 0,
            ..Default::default()
        }))
    };
    let mut to_leader = MonClient::new(vec![members[&(li as u64)].clone()]).unwrap();
    to_leader.call(report()).await.unwrap();
    for (i, h) in hs.iter_mut().enumerate() {
        if i != li {
            if let Some(h) = h.take() {
                h.stop().await;
            }
        }
    }
    // (Past an election timeout without the majority's acks.)
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    to_leader.deadline = Duration::from_secs(2);
    match to_leader.call(report()).await {
        Err(MonError::NoQuorum(why)) => assert!(why.contains("cannot change"), "{why}"),
        other => panic!("the cut-off leader answered {other:?}"),
    }
    for h in hs.into_iter().flatten() {
        h.stop().await;
    }
}
