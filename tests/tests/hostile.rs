//! Hostile peers: one test per attack by someone who holds a key the
//! cluster's authority signed (or none), each checking that the attack
//! gets nothing, not only that it fails in the end.
//!
//! The impostor servers here complete a TLS handshake with whoever dials
//! them if the dialler lets them; a dialler that checks who it reached
//! aborts the handshake, so the impostor counts no completed handshake
//! and receives no request.

use bytes::Bytes;
use loligo_proto::direct::{Call, Conns, Message};
use loligo_proto::net::{Channels, Security};
use loligo_proto::tls::{Acceptor, Authority, Expect, Keyring};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// A TLS server on a loopback port presenting `k`'s certificate: counts
/// the handshakes it completes and the bytes diallers then send it.
async fn impostor(k: &Keyring) -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    serve_impostor(l, k)
}

/// [`impostor`] on listener `l`.
fn serve_impostor(
    l: tokio::net::TcpListener,
    k: &Keyring,
) -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let addr = l.local_addr().unwrap().to_string();
    let acc = Acceptor::new(k).unwrap();
    let (shakes, bytes) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (s2, b2) = (shakes.clone(), bytes.clone());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            let (acc, s2, b2) = (acc.clone(), s2.clone(), b2.clone());
            tokio::spawn(async move {
                if let Ok((mut s, _who)) = acc.accept(tcp).await {
                    s2.fetch_add(1, Ordering::SeqCst);
                    let mut b = vec![0u8; 64 << 10];
                    while let Ok(n @ 1..) = s.read(&mut b).await {
                        b2.fetch_add(n, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    (addr, shakes, bytes)
}

struct Keys {
    ca: Authority,
    admin: Security,
}

fn keys() -> Keys {
    let ca = Authority::generate("hostile").unwrap();
    let admin = Security::new(ca.issue("client.admin").unwrap()).unwrap();
    Keys { ca, admin }
}

/// Dial the monitor at `addr` as the admin, with a short deadline.
async fn ask_monitor(admin: &Security, addr: &str) -> bool {
    let mut mc = loligo_monc::MonClient::new(vec![addr.to_string()])
        .unwrap()
        .secured(Some(admin));
    mc.deadline = Duration::from_secs(2);
    mc.get_map().await.is_ok()
}

fn assert_untouched(what: &str, shakes: &AtomicUsize, bytes: &AtomicUsize) {
    assert_eq!(
        shakes.load(Ordering::SeqCst),
        0,
        "{what}: the dialler finished a handshake with the impostor"
    );
    assert_eq!(
        bytes.load(Ordering::SeqCst),
        0,
        "{what}: the dialler sent the impostor its requests"
    );
}

#[tokio::test]
async fn a_users_key_cannot_pose_as_a_monitor() {
    let k = keys();
    // A read-only user's key, and one the monitors never heard of: the
    // same to a dialler, which has no user table before it has a map.
    for user in ["client.probe", "client.never-added"] {
        let (addr, shakes, bytes) = impostor(&k.ca.issue(user).unwrap()).await;
        assert!(!ask_monitor(&k.admin, &addr).await);
        assert_untouched(user, &shakes, &bytes);
    }
}

#[tokio::test]
async fn an_osds_key_cannot_pose_as_a_monitor() {
    let k = keys();
    let (addr, shakes, bytes) = impostor(&k.ca.issue("osd.1").unwrap()).await;
    assert!(!ask_monitor(&k.admin, &addr).await);
    assert_untouched("osd.1 as a monitor", &shakes, &bytes);
}

fn probe() -> Message {
    Message {
        body: Bytes::from_static(&[0]),
        bulk: vec![Bytes::from(vec![7u8; 4096])],
    }
}

#[tokio::test]
async fn no_key_but_its_own_can_pose_as_an_osd_on_the_direct_path() {
    let k = keys();
    let osd2 = Security::new(k.ca.issue("osd.2").unwrap()).unwrap();
    for (who, dialler) in [
        ("client.probe", &k.admin),
        ("osd.3", &osd2),
        ("mon.0", &k.admin),
    ] {
        let (addr, shakes, bytes) = impostor(&k.ca.issue(who).unwrap()).await;
        let conns = Conns::new(Duration::from_secs(2)).secured(Some(dialler));
        let r = conns
            .call(
                &Expect::osd(1),
                &addr,
                Call::Op,
                probe(),
                Duration::from_secs(2),
            )
            .await;
        assert!(r.is_err(), "{who} answered as osd.1");
        assert_untouched(&format!("{who} as osd.1"), &shakes, &bytes);
    }
}

#[tokio::test]
async fn no_key_but_its_own_can_pose_as_an_osd_on_grpc() {
    let k = keys();
    for who in ["client.probe", "osd.3", "mon.0"] {
        let (addr, shakes, bytes) = impostor(&k.ca.issue(who).unwrap()).await;
        let ch = Channels::new(Duration::from_secs(2), Some(Duration::from_secs(2)))
            .secured(Some(&k.admin));
        if let Ok(mut c) = ch.osd(&addr, &Expect::osd(1)).await {
            let _ = c
                .op(loligo_proto::v1::Raw {
                    body: Bytes::from_static(&[0]),
                    bulk: Vec::new(),
                })
                .await;
        }
        assert_untouched(&format!("{who} as osd.1"), &shakes, &bytes);
    }
}

/// A secured one-monitor group on a loopback port, as mon.0 with
/// `keyring`; its data in `dir`.
async fn monitor(
    keyring: Keyring,
    dir: &std::path::Path,
    addr: Option<&str>,
) -> (loligo_mon::MonHandle, String) {
    let l = tokio::net::TcpListener::bind(addr.unwrap_or("127.0.0.1:0"))
        .await
        .unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let members = [(0, addr.clone())].into();
    let mut cfg = loligo_mon::MonConfig::new(0, members, dir.join("mon.0"), "hostile");
    cfg.failure_domain = "osd".into();
    cfg.create = true;
    cfg.security = Some(Security::new(keyring).unwrap());
    let h = loligo_mon::Monitor::start(cfg, l).await.unwrap();
    (h, addr)
}

/// The map once the monitor has written its monitor map and its key.
async fn map_with_monitors(mc: &mut loligo_monc::MonClient) -> loligo_types::OsdMap {
    for _ in 0..100 {
        let m = mc.get_map().await.unwrap();
        if !m.mons.is_empty() && m.daemon_serial("mon.0").is_some() {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the monitor never wrote its monitor map and key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitors_old_key_cannot_pose_as_it_to_a_client_with_the_map() {
    let k = keys();
    let dir = loligo_testkit::TempDir::new("hostile-mon").unwrap();
    let old = k.ca.issue("mon.0").unwrap();
    let current = k.ca.issue("mon.0").unwrap();
    let serial = current.identity().unwrap().serial;
    let (h, addr) = monitor(current, dir.path(), None).await;
    let mut mc = loligo_monc::MonClient::new(vec![addr.clone()])
        .unwrap()
        .secured(Some(&k.admin));
    mc.deadline = Duration::from_secs(3);
    let m = map_with_monitors(&mut mc).await;
    assert_eq!(m.mons.get(&0), Some(&addr));
    assert_eq!(m.daemon_serial("mon.0"), Some(serial.as_str()));
    // The monitor goes; a server with mon.0's old key takes its address.
    h.stop().await;
    let (imp_addr, shakes, bytes) = impostor_at(&old, &addr).await;
    assert_eq!(imp_addr, addr);
    assert!(mc.get_map().await.is_err());
    assert_untouched("mon.0's old key at its address", &shakes, &bytes);
}

/// [`impostor`], on address `addr`.
async fn impostor_at(k: &Keyring, addr: &str) -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let mut tries = 0;
    let l = loop {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => break l,
            Err(_) if tries < 50 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{addr}: {e}"),
        }
    };
    serve_impostor(l, k)
}

#[tokio::test]
async fn an_osds_old_key_cannot_pose_as_it_once_the_map_names_its_key() {
    let k = keys();
    let old = k.ca.issue("osd.1").unwrap();
    let current = k.ca.issue("osd.1").unwrap().identity().unwrap().serial;
    let expect = Expect::daemon("osd.1", Some(&current));
    let (addr, shakes, bytes) = impostor(&old).await;
    let conns = Conns::new(Duration::from_secs(2)).secured(Some(&k.admin));
    let r = conns
        .call(&expect, &addr, Call::Op, probe(), Duration::from_secs(2))
        .await;
    assert!(r.is_err(), "osd.1's old key answered on the direct path");
    let ch =
        Channels::new(Duration::from_secs(2), Some(Duration::from_secs(2))).secured(Some(&k.admin));
    assert!(ch.osd(&addr, &expect).await.is_err());
    assert_untouched("osd.1's old key", &shakes, &bytes);
}
