//! A `loligo up` cluster's ports speak mutual TLS only: plain text to the
//! monitor's and every OSD's port (an HTTP/2 preface, the direct path's
//! magic) gets no service, a client without a key or with another
//! cluster's key is refused, and the cluster serves its own members
//! throughout.

mod common;

use common::{loligo, ok};
use loligo_proto::net::Security;
use loligo_proto::tls::Authority;
use std::io::{Read, Write};
use std::time::Duration;

const ADMIN: &str = "client.admin";

/// What a server answers to `hello` sent as plain text (until it closes,
/// or 5 s).
fn plain_answer(addr: &str, hello: &[u8]) -> Vec<u8> {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(hello);
    let mut b = Vec::new();
    let _ = s.read_to_end(&mut b);
    b
}

#[test]
fn a_local_cluster_takes_only_its_own_members() {
    let (root, dir, _guard) = common::start("cli-security", 3, 8);
    let file = root.join("in.bin");
    std::fs::write(&file, b"members only").unwrap();
    ok(&dir, &["put", "x", file.to_str().unwrap()]);

    let state: toml::Value =
        toml::from_str(&std::fs::read_to_string(dir.join("cluster.toml")).unwrap()).unwrap();
    let mon = state["mon_addr"].as_str().unwrap().to_string();
    let osds: Vec<String> = state["osd_addrs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    // Every key file is its owner's only.
    for e in std::fs::read_dir(dir.join("keys")).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "ca.pem" {
            use std::os::unix::fs::PermissionsExt;
            let mode = e.metadata().unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{:?}", e.file_name());
        }
    }

    // Plain text to any port: no HTTP/2 settings frame, no direct-path
    // answer; at most a TLS alert (a record of type 21), then the end.
    let preface: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
    let magic: &[u8] = b"LOLIGO\x01\n\0\0\0\0\0\0\0\x01\x01\0\0\0\0\0\0\0";
    for addr in std::iter::once(&mon).chain(&osds) {
        for hello in [preface, magic] {
            let b = plain_answer(addr, hello);
            assert!(
                b.is_empty() || b[0] == 21,
                "{addr}: answered {:?}",
                &b[..b.len().min(16)]
            );
        }
    }

    // No key: refused, with a hint.
    let o = loligo(&dir, &["--mon", &mon, "status"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no keyring given"), "{err}");

    // Another cluster's keys, even naming this cluster's admin and OSDs.
    let other = Authority::generate("other").unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let admin = Security::new(other.issue("client.admin").unwrap()).unwrap();
        let mut mc = loligo_monc::MonClient::new(vec![mon.clone()])
            .unwrap()
            .secured(Some(&admin));
        mc.deadline = Duration::from_secs(2);
        assert!(mc.get_map().await.is_err());
        let osd = Security::new(other.issue("osd.0").unwrap()).unwrap();
        let conns = loligo_proto::direct::Conns::new(Duration::from_secs(2)).secured(Some(&osd));
        for addr in &osds {
            let msg = loligo_proto::direct::Message {
                body: bytes::Bytes::from_static(b"{}"),
                bulk: Vec::new(),
            };
            let r = conns
                .call(
                    addr,
                    loligo_proto::direct::Call::Peer,
                    msg,
                    Duration::from_secs(2),
                )
                .await;
            assert!(r.is_err(), "{addr} answered a stranger");
        }
    });

    // Members speak only for themselves: an OSD message must come from
    // the OSD it names, OSD requests to the monitors from that OSD, admin
    // commands from a client.
    rt.block_on(async {
        use loligo_monc::{Admin, MonError, MonRequest};
        use loligo_osd::msg::{PeerMsg, PeerReply};
        use loligo_types::ops::{decode_wire, encode_wire};
        let keys = dir.join("keys");
        let sec = |e: &str| Security::load(&keys.join(format!("{e}.keyring"))).unwrap();
        let ping = |conns: loligo_proto::direct::Conns, from: i32| {
            let addr = osds[1].clone();
            async move {
                let (body, bulk) = encode_wire(&PeerMsg::Ping { from, epoch: 0 });
                let msg = loligo_proto::direct::Message {
                    body: body.into(),
                    bulk,
                };
                let r = conns
                    .call(
                        &addr,
                        loligo_proto::direct::Call::Peer,
                        msg,
                        Duration::from_secs(5),
                    )
                    .await
                    .unwrap();
                decode_wire::<PeerReply>(&r.body, r.bulk).unwrap()
            }
        };
        let conns = |e: &str| {
            loligo_proto::direct::Conns::new(Duration::from_secs(2)).secured(Some(&sec(e)))
        };
        assert!(matches!(
            ping(conns("osd.2"), 2).await,
            PeerReply::Pong { .. }
        ));
        assert!(matches!(
            ping(conns("osd.2"), 0).await,
            PeerReply::Refused(_)
        ));
        assert!(matches!(ping(conns(ADMIN), 0).await, PeerReply::Refused(_)));
        let mon_as = |e: &str| {
            let mut mc = loligo_monc::MonClient::new(vec![mon.clone()])
                .unwrap()
                .secured(Some(&sec(e)));
            mc.deadline = Duration::from_secs(5);
            mc
        };
        let boot0 = MonRequest::OsdBoot {
            id: 0,
            addr: "127.0.0.1:1".into(),
            host: "evil".into(),
            crush_weight: 1,
        };
        for (who, req) in [
            ("osd.2", MonRequest::OsdMarkMeDown { id: 0 }),
            ("osd.2", boot0.clone()),
            ("osd.2", MonRequest::Admin(Admin::Status)),
            (ADMIN, boot0.clone()),
            ("mon.0", MonRequest::Admin(Admin::Status)),
        ] {
            let r = mon_as(who).call(req).await;
            assert!(matches!(r, Err(MonError::Denied(_))), "{who}: {r:?}");
        }
        assert!(mon_as("osd.2").get_map().await.is_ok());
    });

    // A new client's keyring from the cluster's authority: it gets in.
    let backup = root.join("client.backup.keyring");
    let keys = dir.join("keys");
    let (k, b) = (keys.to_str().unwrap(), backup.to_str().unwrap());
    ok(
        &dir,
        &["auth", "keyring", "client.backup", "--ca", k, "-o", b],
    );
    let o = loligo(
        &dir,
        &["auth", "keyring", "client.backup", "--ca", k, "-o", b],
    );
    assert!(!o.status.success(), "an existing keyring is never replaced");
    let o = loligo(&dir, &["auth", "ca", k]);
    assert!(
        !o.status.success(),
        "an existing authority is never replaced"
    );
    let s = ok(&dir, &["--mon", &mon, "--keyring", b, "status", "--json"]);
    assert!(s.contains("num_up_osds"), "{s}");

    // The cluster's own members go on as before.
    let out = root.join("out.bin");
    ok(&dir, &["get", "x", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), b"members only");
    let s: serde_json::Value = serde_json::from_str(&ok(&dir, &["status", "--json"])).unwrap();
    assert_eq!(s["osdmap"]["num_up_osds"], 3, "{s}");
}
