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

    // No key (no config to take one from): refused, with a hint.
    let o = loligo(
        &dir,
        &["-c", "/nonexistent/loligo.conf", "--mon", &mon, "status"],
    );
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
        for (id, addr) in osds.iter().enumerate() {
            let msg = loligo_proto::direct::Message {
                body: bytes::Bytes::from_static(b"{}"),
                bulk: Vec::new(),
            };
            let r = conns
                .call(
                    &loligo_proto::tls::Expect::osd(id as i32),
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
        let ping_raw = |conns: loligo_proto::direct::Conns, from: i32| {
            let addr = osds[1].clone();
            async move {
                let (body, bulk) = encode_wire(&PeerMsg::Ping { from, epoch: 0 });
                let msg = loligo_proto::direct::Message {
                    body: body.into(),
                    bulk,
                };
                let r = conns
                    .call(
                        &loligo_proto::tls::Expect::osd(1),
                        &addr,
                        loligo_proto::direct::Call::Peer,
                        msg,
                        Duration::from_secs(5),
                    )
                    .await?;
                Ok::<_, String>(decode_wire::<PeerReply>(&r.body, r.bulk).unwrap())
            }
        };
        let ping = |conns, from| async move { ping_raw(conns, from).await.unwrap() };
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
        // A client's connection that sends an OSD message is closed
        // before the message is read.
        assert!(ping_raw(conns(ADMIN), 0).await.is_err());
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

    // A client keyring made offline is signed by the authority but is no
    // user: refused until `auth add`.
    let stray = root.join("client.backup.keyring");
    let keys = dir.join("keys");
    let (k, st) = (keys.to_str().unwrap(), stray.to_str().unwrap());
    ok(
        &dir,
        &["auth", "keyring", "client.backup", "--ca", k, "-o", st],
    );
    let o = loligo(
        &dir,
        &["auth", "keyring", "client.backup", "--ca", k, "-o", st],
    );
    assert!(!o.status.success(), "an existing keyring is never replaced");
    let o = loligo(&dir, &["auth", "ca", k]);
    assert!(
        !o.status.success(),
        "an existing authority is never replaced"
    );
    let o = loligo(&dir, &["--mon", &mon, "--keyring", st, "status"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not a user"), "{err}");

    users_have_their_caps_and_lose_them(&root, &dir, &mon, &rt);
    servers_prove_who_they_are(&root, &dir, &rt);
    an_osds_rotated_key_is_refused_and_its_new_one_serves(&root, &dir, &mon, &osds, &rt);

    // The cluster's own members go on as before.
    let out = root.join("out.bin");
    ok(&dir, &["get", "x", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), b"members only");
    let s: serde_json::Value = serde_json::from_str(&ok(&dir, &["status", "--json"])).unwrap();
    assert_eq!(s["osdmap"]["num_up_osds"], 3, "{s}");
}

/// Each OSD's first boot recorded its certificate's serial; `auth rotate
/// osd.2` gives it a new key, and the old one is refused by the monitors
/// and by the other OSDs (on connections opened before, too); osd.2
/// started with the new keyring serves again.
fn an_osds_rotated_key_is_refused_and_its_new_one_serves(
    root: &std::path::Path,
    dir: &std::path::Path,
    mon: &str,
    osds: &[String],
    rt: &tokio::runtime::Runtime,
) {
    use loligo_osd::msg::{PeerMsg, PeerReply};
    use loligo_types::ops::{decode_wire, encode_wire};
    let keys = dir.join("keys");
    let old = loligo_proto::tls::Keyring::load(&keys.join("osd.2.keyring")).unwrap();
    let users: serde_json::Value =
        serde_json::from_str(&ok(dir, &["auth", "ls", "--json"])).unwrap();
    let recorded = users
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["entity"] == "osd.2")
        .unwrap_or_else(|| panic!("osd.2 has no entry: {users}"));
    assert_eq!(recorded["serial"], old.identity().unwrap().serial.as_str());
    // A connection of the old key, opened before the rotation.
    let sec = Security::new(old).unwrap();
    let conns = std::sync::Arc::new(
        loligo_proto::direct::Conns::new(Duration::from_secs(2)).secured(Some(&sec)),
    );
    let ping = |conns: std::sync::Arc<loligo_proto::direct::Conns>| {
        let (body, bulk) = encode_wire(&PeerMsg::Ping { from: 2, epoch: 0 });
        let msg = loligo_proto::direct::Message {
            body: body.into(),
            bulk,
        };
        let addr = osds[1].clone();
        async move {
            let r = conns
                .call(
                    &loligo_proto::tls::Expect::osd(1),
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
    assert!(matches!(
        rt.block_on(ping(conns.clone())),
        PeerReply::Pong { .. }
    ));
    let new = root.join("osd.2.new.keyring");
    ok(
        dir,
        &["auth", "rotate", "osd.2", "-o", new.to_str().unwrap()],
    );
    rt.block_on(async {
        // The OSDs learn the rotation with the map: within a few seconds.
        let mut refused = false;
        for _ in 0..50 {
            if let PeerReply::Refused(why) = ping(conns.clone()).await {
                assert!(why.contains("rotated"), "{why}");
                refused = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(refused, "osd.1 still takes osd.2's old key");
        let mut mc = loligo_monc::MonClient::new(vec![mon.to_string()])
            .unwrap()
            .secured(Some(&sec));
        mc.deadline = Duration::from_secs(5);
        let r = mc.get_map().await;
        assert!(matches!(r, Err(loligo_monc::MonError::Denied(_))), "{r:?}");
    });
    // osd.2 itself is refused now: restarted with its new keyring, it
    // serves again.
    let d = dir.to_str().unwrap();
    ok(dir, &["stop", "osd.2", "--data-dir", d]);
    std::fs::rename(&new, keys.join("osd.2.keyring")).unwrap();
    ok(dir, &["start", "osd.2", "--data-dir", d]);
    let t0 = std::time::Instant::now();
    loop {
        let s: serde_json::Value = serde_json::from_str(&ok(dir, &["status", "--json"])).unwrap();
        if s["osdmap"]["num_up_osds"] == 3 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "osd.2 did not come back: {s}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The CLI, as the admin, pointed at a server that presents a read-only
/// user's key, or an OSD's, as if it were the monitor: it finishes no
/// handshake with it, so sends it nothing, and says why.
fn servers_prove_who_they_are(
    root: &std::path::Path,
    dir: &std::path::Path,
    rt: &tokio::runtime::Runtime,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let probe = root.join("probe.keyring");
    let p = probe.to_str().unwrap();
    ok(
        dir,
        &["auth", "add", "client.probe", "mon", "allow r", "-o", p],
    );
    let osd = dir.join("keys/osd.1.keyring");
    for key in [probe.clone(), osd] {
        let k = loligo_proto::tls::Keyring::load(&key).unwrap();
        let shakes = Arc::new(AtomicUsize::new(0));
        let addr = rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap().to_string();
            let acc = loligo_proto::tls::Acceptor::new(&k).unwrap();
            let shakes = shakes.clone();
            tokio::spawn(async move {
                while let Ok((tcp, _)) = l.accept().await {
                    if acc.accept(tcp).await.is_ok() {
                        shakes.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
            addr
        });
        let admin = dir.join("keys/client.admin.keyring");
        let o = loligo(
            dir,
            &[
                "--keyring",
                admin.to_str().unwrap(),
                "--mon",
                &addr,
                "status",
            ],
        );
        assert!(!o.status.success(), "{} served as the monitor", k.entity);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("certificate"), "{}: {err}", k.entity);
        assert_eq!(
            shakes.load(Ordering::SeqCst),
            0,
            "{} finished a handshake",
            k.entity
        );
    }
}

/// `auth add` makes a user with caps that the monitors and OSDs enforce;
/// `auth caps` changes them, `auth rotate` replaces the key (the old one
/// is refused), `auth rm` ends every right, on open connections too.
fn users_have_their_caps_and_lose_them(
    root: &std::path::Path,
    dir: &std::path::Path,
    mon: &str,
    rt: &tokio::runtime::Runtime,
) {
    let path = |n: &str| root.join(n).to_str().unwrap().to_string();
    let (b1, b2) = (path("backup1.keyring"), path("backup2.keyring"));
    let file = path("data.bin");
    std::fs::write(&file, b"backed up").unwrap();
    ok(dir, &["pool", "create", "backups", "--pg-num", "8"]);
    // Refused: an output file that exists (before any key is made),
    // malformed caps, non-clients, cutting the admin.
    let taken = path("client.backup.keyring");
    for bad in [
        &["auth", "add", "client.backup", "-o", taken.as_str()][..],
        &["auth", "add", "client.x", "osd", "allow q"][..],
        &["auth", "add", "client.x", "mon"][..],
        &["auth", "add", "osd.7", "mon", "allow r"][..],
        &["auth", "add", ADMIN][..],
        &["auth", "rm", ADMIN][..],
        &["auth", "caps", ADMIN, "mon", "allow r"][..],
    ] {
        let o = loligo(dir, bad);
        assert!(!o.status.success(), "{bad:?} was accepted");
    }
    let o = loligo(dir, &["auth", "ls"]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("client.backup"));
    ok(
        dir,
        &[
            "auth",
            "add",
            "client.backup",
            "mon",
            "allow r",
            "osd",
            "allow rw pool=backups",
            "-o",
            &b1,
        ],
    );
    let got = ok(dir, &["auth", "get", "client.backup"]);
    assert!(
        got.contains("caps osd = \"allow rw pool=backups\""),
        "{got}"
    );
    assert!(ok(dir, &["auth", "ls"]).contains("[client.backup]"));
    let as_ = |k: &str, args: &[&str]| {
        let mut v = vec!["--mon", mon, "--keyring", k];
        v.extend_from_slice(args);
        loligo(dir, &v)
    };
    let works = |k: &str, args: &[&str]| {
        let o = as_(k, args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let refused = |k: &str, args: &[&str]| {
        let o = as_(k, args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} was allowed");
        assert!(err.contains("permission denied"), "{args:?}: {err}");
    };
    // What the caps name, and nothing else.
    works(&b1, &["status"]);
    works(&b1, &["-p", "backups", "put", "b", &file]);
    works(&b1, &["-p", "backups", "get", "b", &path("b.out")]);
    works(&b1, &["-p", "backups", "ls"]);
    assert_eq!(std::fs::read(path("b.out")).unwrap(), b"backed up");
    refused(&b1, &["put", "y", &file]);
    refused(&b1, &["get", "x", &path("x.out")]);
    refused(&b1, &["ls"]);
    refused(&b1, &["pool", "create", "mine", "--pg-num", "8"]);
    refused(&b1, &["auth", "ls"]);
    // New caps: reads only.
    ok(
        dir,
        &[
            "auth",
            "caps",
            "client.backup",
            "mon",
            "allow r",
            "osd",
            "allow r pool=backups",
        ],
    );
    refused(&b1, &["-p", "backups", "put", "b", &file]);
    works(&b1, &["-p", "backups", "get", "b", &path("b.out")]);

    // An open connection loses its rights when the map says so.
    rt.block_on(async {
        let sec = Security::load(std::path::Path::new(&b1)).unwrap();
        let c = loligo_client::Cluster::connect_secured(
            vec![mon.to_string()],
            Duration::from_secs(10),
            Some(sec),
        )
        .await
        .unwrap();
        let io = c.pool("backups").unwrap();
        assert_eq!(&io.read("b", 0, 0).await.unwrap()[..], b"backed up");
        let w = io.write_full("b", b"nope".to_vec()).await;
        assert!(
            matches!(&w, Err(e) if e.to_string().contains("permission denied")),
            "{w:?}"
        );
        ok(dir, &["auth", "rotate", "client.backup", "-o", &b2]);
        let mut last = None;
        for _ in 0..100 {
            match io.read("b", 0, 0).await {
                Ok(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(e) => {
                    last = Some(e.to_string());
                    break;
                }
            }
        }
        let e = last.expect("the rotated-away key still reads");
        assert!(
            e.contains("permission denied") && e.contains("rotated"),
            "{e}"
        );
    });
    refused(&b1, &["status"]);
    works(&b2, &["-p", "backups", "get", "b", &path("b.out")]);
    // An OSD's key sends no client ops.
    let osd2 = dir.join("keys").join("osd.2.keyring");
    refused(osd2.to_str().unwrap(), &["get", "x", &path("x.out")]);
    // Removed: nothing.
    ok(dir, &["auth", "rm", "client.backup"]);
    refused(&b2, &["status"]);
    refused(&b2, &["-p", "backups", "get", "b", &path("b.out")]);
    let o = loligo(dir, &["auth", "get", "client.backup"]);
    assert!(!o.status.success());
}
