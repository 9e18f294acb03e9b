//! An in-process cluster (one monitor, four OSDs on BlockStores, loopback
//! ports) driven through the client library: objects from 0 B to 16 MiB,
//! compound ops all or nothing, serialized concurrent writers, OSD
//! failures against min_size (a copy that missed writes never answers),
//! and bad requests.

use loligo_client::{ClientError, Cluster};
use loligo_mon::{MonConfig, Monitor};
use loligo_monc::protocol::{Admin, MonRequest};
use loligo_osd::{OsdConfig, OsdHandle};
use loligo_store::{BlockConfig, BlockStore, FaultyStore, Limits, MemStore, ObjectStore};
use loligo_testkit::TempDir;
use loligo_types::ops::{Cmp, OpError, SubOp, SubResult};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

#[path = "cluster/integrity.rs"]
mod integrity;

struct TestCluster {
    _dir: TempDir,
    mon_addr: String,
    _mon: loligo_mon::MonHandle,
    osds: Vec<Option<OsdHandle>>,
    stores: Vec<Arc<dyn ObjectStore>>,
    addrs: Vec<String>,
    /// Each OSD's store folder (a revived OSD mounts it again).
    dirs: Vec<std::path::PathBuf>,
    /// PG log entries each OSD keeps.
    log_entries: u64,
    /// What a test changes in each OSD's configuration.
    tune: fn(&mut OsdConfig),
}

fn store_cfg() -> BlockConfig {
    BlockConfig {
        size: 256 << 20,
        ..BlockConfig::default()
    }
}

fn osd_cfg(id: i32, addr: &str, mon: &str, log_entries: u64) -> OsdConfig {
    let mut c = OsdConfig::new(id, addr, vec![mon.to_string()]);
    c.pg_log_entries = log_entries;
    c.backfill_chunk_objects = 2;
    c.heartbeat_interval = Duration::from_millis(300);
    c.heartbeat_grace = Duration::from_millis(1500);
    c.op_timeout = Duration::from_secs(3);
    c.report_interval = Duration::from_millis(500);
    // One incoming recovery copy at a time: every test that heals also
    // shows that copies waiting for their turn (or refused and retried)
    // still get through.
    c.recovery_max_incoming = 1;
    c
}

impl TestCluster {
    async fn start(tag: &str, n: usize) -> TestCluster {
        TestCluster::start_with(tag, n, loligo_osd::pg::LOG_ENTRIES_MAX).await
    }

    /// A cluster whose OSDs keep `log_entries` PG log entries (a short
    /// log makes copies that were away backfill).
    async fn start_with(tag: &str, n: usize, log_entries: u64) -> TestCluster {
        TestCluster::start_tuned(tag, n, log_entries, |_| {}).await
    }

    /// As `start_with`, each OSD's configuration changed by `tune`.
    async fn start_tuned(
        tag: &str,
        n: usize,
        log_entries: u64,
        tune: fn(&mut OsdConfig),
    ) -> TestCluster {
        let tmp = TempDir::new(&format!("cl-{tag}")).unwrap();
        let dir = tmp.path().to_path_buf();
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mon_addr = l.local_addr().unwrap().to_string();
        let members: BTreeMap<u64, String> = [(0, mon_addr.clone())].into();
        let mut mc = MonConfig::new(0, members, dir.join("mon"), "fsid-test");
        mc.create = true;
        mc.failure_domain = "osd".into();
        mc.min_down_reporters = 1;
        mc.heartbeat_grace = Duration::from_millis(1500);
        let mon = Monitor::start(mc, l).await.unwrap();
        let mut t = TestCluster {
            _dir: tmp,
            mon_addr,
            _mon: mon,
            osds: Vec::new(),
            stores: Vec::new(),
            addrs: Vec::new(),
            dirs: Vec::new(),
            log_entries,
            tune,
        };
        for i in 0..n {
            let sd = dir.join(format!("osd.{i}"));
            BlockStore::mkfs(&sd, &store_cfg()).unwrap();
            let s: Arc<dyn ObjectStore> = Arc::new(BlockStore::mount(&sd, &store_cfg()).unwrap());
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap().to_string();
            let mut cfg = osd_cfg(i as i32, &addr, &t.mon_addr, log_entries);
            tune(&mut cfg);
            let h = loligo_osd::start(cfg, s.clone(), l).await.unwrap();
            t.osds.push(Some(h));
            t.stores.push(s);
            t.addrs.push(addr);
            t.dirs.push(sd);
        }
        t
    }

    /// Stop OSD `i` as a crash would, and close its store: a revived OSD
    /// mounts it again from disk.
    async fn kill(&mut self, i: usize) {
        if let Some(h) = self.osds[i].take() {
            h.stop(false).await;
        }
        let t0 = std::time::Instant::now();
        while Arc::strong_count(&self.stores[i]) > 1 {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "osd.{i}'s store is still in use 10 s after it stopped"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Unmount (the stand-in holds nothing of it).
        self.stores[i] = Arc::new(loligo_store::MemStore::new());
    }

    async fn revive(&mut self, i: usize) {
        let s: Arc<dyn ObjectStore> =
            Arc::new(BlockStore::mount(&self.dirs[i], &store_cfg()).unwrap());
        self.stores[i] = s.clone();
        let l = TcpListener::bind(&self.addrs[i]).await.unwrap();
        let mut cfg = osd_cfg(i as i32, &self.addrs[i], &self.mon_addr, self.log_entries);
        (self.tune)(&mut cfg);
        let h = loligo_osd::start(cfg, s, l).await.unwrap();
        self.osds[i] = Some(h);
    }
}

async fn client(t: &TestCluster) -> Cluster {
    let c = Cluster::connect_with(vec![t.mon_addr.clone()], Duration::from_secs(10))
        .await
        .unwrap();
    let r = c
        .mon(MonRequest::Admin(Admin::PoolCreate {
            name: "rbd".into(),
            pg_num: 16,
            size: 3,
            min_size: None,
            erasure_profile: None,
        }))
        .await;
    if let Ok(r) = r {
        c.wait_for_epoch(r.epoch).await;
    }
    c
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Pool `rbd`'s min_size set to 1, as an operator lets one surviving
/// copy serve (below min_size a PG serves nothing, reads included).
async fn min_size_one(c: &Cluster) {
    let set = Admin::PoolSet {
        name: "rbd".into(),
        key: "min_size".into(),
        value: "1".into(),
    };
    c.mon(MonRequest::Admin(set)).await.unwrap();
}

/// Until every PG of pool 1 reports active+clean; fails the test, with
/// the last status, when that takes longer than 20 s.
async fn wait_clean(c: &Cluster) {
    let mut last = serde_json::Value::Null;
    for _ in 0..100 {
        if let Ok(r) = c.mon(MonRequest::Admin(Admin::Status)).await {
            if r.value["pgs"]["by_state"]["active+clean"] == 16 {
                return;
            }
            last = r.value;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("PGs not active+clean after 20 s: {last}");
}

/// A new pool's PGs on OSDs that never ran before serve as soon as they
/// peer: their copies were made after the OSDs started, so they granted
/// no read lease a restart could have made them forget, and no primary
/// waits one out (it would: 8 s here, from each OSD's start).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_pool_on_fresh_osds_serves_without_waiting_out_a_lease() {
    let t = TestCluster::start_tuned("fresh-lease", 3, loligo_osd::pg::LOG_ENTRIES_MAX, |c| {
        // A lease of 8 s: a wait would stand out from peering's time.
        c.heartbeat_grace = Duration::from_secs(10);
        c.op_timeout = Duration::from_secs(30);
    })
    .await;
    let started = std::time::Instant::now();
    let c = client(&t).await;
    let p = c.pool("rbd").unwrap();
    p.write_full("first", b"at once".to_vec()).await.unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(4),
        "the first write took {took:?}: a PG waited out a lease no copy granted"
    );
    let r = c.mon(MonRequest::Admin(Admin::Status)).await.unwrap();
    let states = r.value["pgs"]["by_state"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert!(
        states.keys().all(|k| !k.split('+').any(|s| s == "wait")),
        "PGs wait for a lease: {states:?}"
    );
    assert_eq!(p.read("first", 0, 0).await.unwrap(), &b"at once"[..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_round_trip_and_compound_ops_are_atomic() {
    let t = TestCluster::start("rt", 4).await;
    let c = client(&t).await;
    let p = c.pool("rbd").unwrap();
    for (i, len) in [0usize, 1, 4095, 4096, 65_537, 1 << 20, 16 << 20]
        .into_iter()
        .enumerate()
    {
        let name = format!("obj-{len}");
        let data = pattern(len, i as u8);
        p.write_full(&name, data.clone()).await.unwrap();
        assert_eq!(p.read(&name, 0, 0).await.unwrap(), data, "{len}");
        assert_eq!(p.stat(&name).await.unwrap().0, len as u64);
    }
    // Partial writes, append, ranges.
    p.write_full("a", b"hello".to_vec()).await.unwrap();
    p.append("a", b" world".to_vec()).await.unwrap();
    p.write("a", 0, b"J".to_vec()).await.unwrap();
    assert_eq!(p.read("a", 0, 0).await.unwrap(), &b"Jello world"[..]);
    assert_eq!(p.read("a", 6, 3).await.unwrap(), &b"wor"[..]);

    // xattrs and omap.
    p.set_xattr("a", "color", b"blue".to_vec()).await.unwrap();
    assert_eq!(p.get_xattr("a", "color").await.unwrap(), b"blue");
    assert_eq!(
        p.get_xattrs("a").await.unwrap().len(),
        1,
        "the version attr is hidden"
    );
    p.omap_set(
        "a",
        (0..20u8).map(|i| (vec![b'k', i], vec![i; 100])).collect(),
    )
    .await
    .unwrap();
    let page = p.omap_list("a", &[b'k', 5], 4).await.unwrap();
    assert_eq!(
        page.iter().map(|(k, _)| k[1]).collect::<Vec<_>>(),
        vec![5, 6, 7, 8]
    );
    p.omap_rm("a", vec![vec![b'k', 5]]).await.unwrap();
    assert!(p
        .omap_get("a", vec![vec![b'k', 5]])
        .await
        .unwrap()
        .is_empty());

    // A compound op whose assert fails applies nothing.
    let (_, v) = p.stat("a").await.unwrap();
    let e = p
        .operate(
            "a",
            vec![
                SubOp::WriteFull(b"clobbered".to_vec().into()),
                SubOp::SetXattr {
                    name: "color".into(),
                    value: b"red".to_vec(),
                },
                SubOp::CmpXattr {
                    name: "color".into(),
                    cmp: Cmp::Eq,
                    value: b"green".to_vec(),
                },
            ],
        )
        .await
        .unwrap_err();
    assert_eq!(e, ClientError::Op(OpError::AssertFailed { index: 2 }));
    assert_eq!(p.read("a", 0, 0).await.unwrap(), &b"Jello world"[..]);
    assert_eq!(p.get_xattr("a", "color").await.unwrap(), b"blue");
    assert_eq!(p.stat("a").await.unwrap().1, v, "version unchanged");
    // Version assert: passes with the current version, then fails.
    p.operate(
        "a",
        vec![SubOp::AssertVersion(v), SubOp::Append(b"!".to_vec().into())],
    )
    .await
    .unwrap();
    let e = p
        .operate(
            "a",
            vec![SubOp::AssertVersion(v), SubOp::Append(b"?".to_vec().into())],
        )
        .await
        .unwrap_err();
    assert!(matches!(e, ClientError::Op(OpError::AssertFailed { .. })));
    // Exclusive create.
    let e = p
        .operate("a", vec![SubOp::AssertNotExists, SubOp::Create])
        .await
        .unwrap_err();
    assert_eq!(e, ClientError::Op(OpError::Exists));

    // Remove, not found.
    p.remove("obj-1").await.unwrap();
    assert!(p.read("obj-1", 0, 0).await.unwrap_err().is_not_found());
    assert!(p.remove("obj-1").await.unwrap_err().is_not_found());

    // Listing.
    let mut names = p.list().await.unwrap();
    names.sort();
    assert_eq!(names.len(), 7);
    assert!(names.contains(&"a".to_string()));

    // Bad requests get typed errors.
    let long = "x".repeat(5000);
    assert!(matches!(
        p.write_full(&long, vec![1]).await,
        Err(ClientError::Op(OpError::Invalid(_)))
    ));
    let e = p
        .operate(
            "a",
            vec![SubOp::SetXattr {
                name: "_v".into(),
                value: vec![],
            }],
        )
        .await
        .unwrap_err();
    assert!(matches!(e, ClientError::Op(OpError::Invalid(_))));
    let e = p.write("big", 200 << 20, vec![1]).await.unwrap_err();
    assert!(
        matches!(e, ClientError::Op(OpError::TooLarge { .. })),
        "{e}"
    );
    assert!(matches!(c.pool("nope"), Err(ClientError::NoPool(_))));

    // Garbage, unknown pools and epochs from the future on the OSD port:
    // typed errors, and the OSD keeps serving.
    let mut raw =
        loligo_proto::v1::osd_client::OsdClient::connect(format!("http://{}", t.addrs[0]))
            .await
            .unwrap();
    let send_bulk = |body: Vec<u8>, bulk: Vec<bytes::Bytes>| {
        let mut raw = raw.clone();
        async move {
            let r = raw
                .op(loligo_proto::v1::Raw {
                    body: body.into(),
                    bulk,
                })
                .await
                .unwrap()
                .into_inner()
                .body;
            match loligo_types::ops::decode_msg::<loligo_types::ops::ClientReply>(&r).unwrap() {
                loligo_types::ops::ClientReply::Op(r) => r.result.unwrap_err(),
                other => panic!("{other:?}"),
            }
        }
    };
    let send = |body: Vec<u8>| send_bulk(body, Vec::new());
    assert!(matches!(
        send(b"\xff\x00garbage".to_vec()).await,
        OpError::Invalid(_)
    ));
    let op = |pool, epoch| {
        loligo_types::ops::encode_msg(&loligo_types::ops::ClientRequest::Op(
            loligo_types::ops::ClientOp {
                pool,
                name: "a".into(),
                epoch,
                ops: vec![SubOp::Stat],
                reqid: None,
            },
        ))
    };
    assert_eq!(send(op(99, 1)).await, OpError::NoPool(99));
    // A write whose payload travels beside the body: without it, with a
    // wrong length or with one too many, it is refused, never applied.
    let (body, bulk) = loligo_types::ops::encode_wire(&loligo_types::ops::ClientRequest::Op(
        loligo_types::ops::ClientOp {
            pool: 1,
            name: "a".into(),
            epoch: 1,
            ops: vec![SubOp::WriteFull(bytes::Bytes::from_static(b"torn"))],
            reqid: None,
        },
    ));
    assert_eq!(bulk.len(), 1);
    let mut extra = bulk.clone();
    extra.push(bytes::Bytes::from_static(b"x"));
    let wrong_bulks = [Vec::new(), vec![bytes::Bytes::from_static(b"to")], extra];
    for bad in wrong_bulks.clone() {
        let e = send_bulk(body.clone(), bad).await;
        assert!(matches!(e, OpError::Invalid(_)), "{e:?}");
    }
    assert!(matches!(
        send(op(1, 1_000_000)).await,
        OpError::Behind { .. }
    ));
    let _ = raw
        .peer(loligo_proto::v1::Raw {
            body: vec![7; 100].into(),
            bulk: vec![vec![1; 10].into()],
        })
        .await;
    assert_eq!(p.read("a", 0, 5).await.unwrap(), &b"Jello"[..]);

    // The same on the direct data path: a body with the wrong payloads is
    // a typed refusal; a frame over the size limit or a bad call kind
    // closes that connection only.
    use loligo_proto::direct;
    let dc = direct::Conns::new(Duration::from_secs(2));
    for bad in wrong_bulks {
        let msg = direct::Message {
            body: body.clone().into(),
            bulk: bad,
        };
        let r = dc
            .call(
                &loligo_proto::tls::Expect::osd(0),
                &t.addrs[0],
                direct::Call::Op,
                msg,
                Duration::from_secs(10),
            )
            .await
            .unwrap();
        let reply: loligo_types::ops::ClientReply =
            loligo_types::ops::decode_wire(&r.body, r.bulk).unwrap();
        match reply {
            loligo_types::ops::ClientReply::Op(r) => {
                assert!(matches!(r.result, Err(OpError::Invalid(_))), "{r:?}")
            }
            other => panic!("{other:?}"),
        }
    }
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(&t.addrs[0]).await.unwrap();
        s.write_all(&direct::MAGIC).await.unwrap();
        // id, call 1, flags, one payload, empty body, payload of 4 GiB - 1.
        let mut h = vec![0u8; 8];
        h.extend_from_slice(&[1, 0, 1, 0, 0, 0, 0, 0]);
        h.extend_from_slice(&u32::MAX.to_le_bytes());
        s.write_all(&h).await.unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got).await;
        assert!(got.is_empty());
    }
    assert_eq!(p.read("a", 0, 5).await.unwrap(), &b"Jello"[..]);

    // Every replica holds the same bytes.
    let name = "obj-65537";
    let pool = c.map().pool_by_name("rbd").unwrap().clone();
    let pg = pool.object_pg(name.as_bytes());
    let acting = c.map().placer().unwrap().map_pg(pg).unwrap().acting;
    assert_eq!(acting.len(), 3);
    let oid =
        loligo_store::ObjectId::new(loligo_crush::hash::str_hash_rjenkins(name.as_bytes()), name);
    let coll = loligo_store::CollectionId::pg(pg.pool, pg.ps);
    for o in acting {
        let got = t.stores[o as usize]
            .read(coll, &oid, &[(0, 1 << 20)])
            .unwrap();
        assert_eq!(got[0], pattern(65_537, 4), "osd.{o}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_to_one_object_are_serialized() {
    let t = TestCluster::start("conc", 3).await;
    let c = client(&t).await;
    let p = c.pool("rbd").unwrap();
    p.write_full("log", Vec::new()).await.unwrap();
    let mut hs = Vec::new();
    for w in 0..8u8 {
        let p = p.clone();
        hs.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            for i in 0..10u8 {
                let v = p.append("log", vec![w * 16 + i]).await.unwrap();
                acked.push((v, w * 16 + i));
            }
            acked
        }));
    }
    let mut all = Vec::new();
    for h in hs {
        all.extend(h.await.unwrap());
    }
    all.sort();
    let order: Vec<u8> = all.iter().map(|(_, b)| *b).collect();
    let data = p.read("log", 0, 0).await.unwrap();
    assert_eq!(data.len(), 80);
    assert_eq!(data, order, "acknowledged (version) order = read order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_osds_against_min_size() {
    let mut t = TestCluster::start("fail", 3).await;
    let c = client(&t).await;
    let p = c.pool("rbd").unwrap();
    wait_clean(&c).await;
    for i in 0..20 {
        p.write_full(&format!("o{i}"), pattern(5000, i))
            .await
            .unwrap();
    }
    // Lose one: reads and writes continue (min_size 2 of 3).
    t.kill(2).await;
    for i in 0..20 {
        assert_eq!(
            p.read(&format!("o{i}"), 0, 0).await.unwrap(),
            pattern(5000, i as u8)
        );
        p.write_full(&format!("o{i}"), pattern(5000, i as u8 + 100))
            .await
            .unwrap();
    }
    let s = c.mon(MonRequest::Admin(Admin::Status)).await.unwrap().value;
    assert_eq!(s["osdmap"]["num_up_osds"], 2, "{s}");
    // Lose a second: writes stop with a clear error (reads too: below
    // min_size a PG serves nothing).
    t.kill(1).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The PG holds the write for its op timeout (3 s), then refuses it;
    // the client waits longer (10 s), so this is the PG's answer, typed.
    let e = p.write_full("o0", b"no".to_vec()).await.unwrap_err();
    assert!(
        matches!(e, ClientError::Op(OpError::Unavailable { .. })),
        "{e}"
    );
    // The last one fails too; then the one that missed the overwrites
    // comes back alone. It must serve nothing, reads included (they fail,
    // typed): the copies that have every acknowledged write are away.
    t.kill(0).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    t.revive(2).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    for name in ["o0", "o7"] {
        match p.read(name, 0, 0).await {
            Err(ClientError::Op(OpError::Down { osds, .. })) => {
                assert!(osds.contains(&0) || osds.contains(&1), "{osds:?}")
            }
            other => panic!(
                "a stale copy answered for {name}: {:?}",
                other.map(|d| d.len())
            ),
        }
    }
    let s = c.mon(MonRequest::Admin(Admin::Status)).await.unwrap().value;
    assert!(
        s["pgs"]["by_state"]["down"].as_u64().unwrap_or(0) > 0,
        "{s}"
    );
    // The others return: everything acknowledged reads back, and the
    // cluster heals by itself (osd.2 recovers what it missed).
    t.revive(0).await;
    t.revive(1).await;
    for i in 0..20 {
        assert_eq!(
            p.read(&format!("o{i}"), 0, 0).await.unwrap(),
            pattern(5000, i as u8 + 100)
        );
    }
    wait_clean(&c).await;
    assert_copies_agree(&t, &c, 20);
    // osd.2 really holds the data now: alone again, it serves it.
    min_size_one(&c).await;
    t.kill(0).await;
    t.kill(1).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    for i in 0..20 {
        assert_eq!(
            p.read(&format!("o{i}"), 0, 0).await.unwrap(),
            pattern(5000, i as u8 + 100),
            "o{i} from the recovered copy"
        );
    }
    let _ = SubResult::None;
}

/// Until every PG of pool 1 reports active+clean, no pg_temp is left and
/// `placed` holds for the current map; fails the test after 30 s. Reports
/// made before the map change may still say clean: give them time first.
async fn wait_settled(c: &Cluster, placed: impl Fn() -> bool) {
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut last = serde_json::Value::Null;
    for _ in 0..150 {
        let st = c.mon(MonRequest::Admin(Admin::Status)).await.unwrap().value;
        let d = c
            .mon(MonRequest::Admin(Admin::OsdDump))
            .await
            .unwrap()
            .value;
        let clean = st["pgs"]["by_state"]["active+clean"] == 16;
        let no_temp = d["pg_temp"].as_array().is_some_and(|a| a.is_empty());
        if clean && no_temp && placed() {
            return;
        }
        last = serde_json::json!({"status": st["pgs"], "pg_temp": d["pg_temp"]});
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("not settled after 30 s: {last}");
}

/// Every PG's acting members hold the same objects (names and data) in
/// their stores, and together all `n` objects written.
fn assert_copies_agree(t: &TestCluster, c: &Cluster, n: usize) {
    let m = c.map();
    let mut placer = m.placer().unwrap();
    let mut total = 0;
    for ps in 0..16u32 {
        let pm = placer.map_pg(loligo_types::PgId { pool: 1, ps }).unwrap();
        let coll = loligo_store::CollectionId::pg(1, ps);
        let copy = |osd: i32| {
            let s = &t.stores[osd as usize];
            let (names, _) = s.list(coll, None, 10_000).unwrap();
            names
                .into_iter()
                .map(|o| {
                    let data = s.read(coll, &o, &[(0, 1 << 20)]).unwrap();
                    (o.name, data)
                })
                .collect::<Vec<_>>()
        };
        let first = copy(pm.acting[0]);
        for &o in &pm.acting[1..] {
            assert_eq!(
                first,
                copy(o),
                "pg 1.{ps}: osd.{o} differs from the primary"
            );
        }
        total += first.len();
    }
    assert_eq!(total, n);
}

/// Copies left on OSDs that no longer hold their PG are removed once it is
/// clean: in time every one of the `n` objects is on exactly `size` OSDs.
async fn wait_strays_removed(t: &TestCluster, n: usize, size: usize) {
    let count = || -> usize {
        t.stores
            .iter()
            .map(|s| {
                (0..16u32)
                    .map(|ps| {
                        let coll = loligo_store::CollectionId::pg(1, ps);
                        s.list(coll, None, 10_000)
                            .map_or(0, |(names, _)| names.len())
                    })
                    .sum::<usize>()
            })
            .sum()
    };
    let mut have = 0;
    for _ in 0..150 {
        have = count();
        if have == n * size {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{have} object copies on the OSDs 30 s after clean, want {n} x {size}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn osd_out_and_in_move_data_and_end_clean() {
    // Two log entries per PG: an OSD new to a PG, or back after the
    // overwrites, is backfilled (most PGs) or recovered from the log.
    let t = TestCluster::start_with("outin", 4, 2).await;
    let c = client(&t).await;
    let p = c.pool("rbd").unwrap();
    wait_clean(&c).await;
    for i in 0..24 {
        p.write_full(&format!("o{i}"), pattern(3000, i))
            .await
            .unwrap();
    }
    let holds = |osd: i32| {
        let m = c.map();
        let mut placer = m.placer().unwrap();
        (0..16u32).any(|ps| {
            let pm = placer.map_pg(loligo_types::PgId { pool: 1, ps }).unwrap();
            pm.acting.contains(&osd)
        })
    };
    assert!(holds(3), "osd.3 serves some PG before it is marked out");
    let r = c
        .mon(MonRequest::Admin(Admin::OsdOut { ids: vec![3] }))
        .await
        .unwrap();
    c.wait_for_epoch(r.epoch).await;
    // Its PGs move to the other three, which receive the objects.
    wait_settled(&c, || !holds(3)).await;
    assert_copies_agree(&t, &c, 24);
    // osd.3's old copies go.
    wait_strays_removed(&t, 24, 3).await;
    for i in 0..24 {
        assert_eq!(
            p.read(&format!("o{i}"), 0, 0).await.unwrap(),
            pattern(3000, i as u8)
        );
        p.write_full(&format!("o{i}"), pattern(3000, i as u8 + 50))
            .await
            .unwrap();
    }
    // Back in: its PGs return to it, with the writes made meanwhile.
    let r = c
        .mon(MonRequest::Admin(Admin::OsdIn { ids: vec![3] }))
        .await
        .unwrap();
    c.wait_for_epoch(r.epoch).await;
    wait_settled(&c, || holds(3)).await;
    assert_copies_agree(&t, &c, 24);
    wait_strays_removed(&t, 24, 3).await;
    for i in 0..24 {
        assert_eq!(
            p.read(&format!("o{i}"), 0, 0).await.unwrap(),
            pattern(3000, i as u8 + 50)
        );
    }
}

/// An OSD that missed more writes than the PG log keeps is backfilled:
/// after it returns, its copies equal the primary's — overwritten objects
/// replaced, removed ones gone, new ones there — and alone it serves them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_past_the_log_is_backfilled() {
    let mut t = TestCluster::start_with("backfill", 3, 2).await;
    let c = client(&t).await;
    let p = c.pool("rbd").unwrap();
    wait_clean(&c).await;
    for i in 0..40 {
        p.write_full(&format!("o{i}"), pattern(2000, i))
            .await
            .unwrap();
    }
    t.kill(2).await;
    // Three rounds of overwrites (more than the log's two entries in
    // every PG), a few removals and new objects.
    for round in 1..=3u8 {
        for i in 0..40u8 {
            p.write_full(&format!("o{i}"), pattern(2000, i.wrapping_add(round * 60)))
                .await
                .unwrap();
        }
    }
    for i in 0..10 {
        p.remove(&format!("o{i}")).await.unwrap();
    }
    for i in 40..50u8 {
        p.write_full(&format!("o{i}"), pattern(3000, i))
            .await
            .unwrap();
    }
    t.revive(2).await;
    wait_clean(&c).await;
    assert_copies_agree(&t, &c, 40);
    // osd.2 alone serves every object (its copy is whole).
    min_size_one(&c).await;
    t.kill(0).await;
    t.kill(1).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    for i in 10..40u8 {
        assert_eq!(
            p.read(&format!("o{i}"), 0, 0).await.unwrap(),
            pattern(2000, i.wrapping_add(180)),
            "o{i} from the backfilled copy"
        );
    }
    for i in 40..50u8 {
        assert_eq!(
            p.read(&format!("o{i}"), 0, 0).await.unwrap(),
            pattern(3000, i)
        );
    }
    assert!(matches!(
        p.read("o3", 0, 0).await,
        Err(ClientError::Op(OpError::NotFound))
    ));
}

/// An OSD whose PG records were damaged while it was down (every PG it
/// holds: the info record, or the newest log entry) starts each copy over
/// as a backfill target: the cluster ends clean with every copy equal,
/// and that OSD alone then serves every object. (Read as a default, the
/// damaged info made a copy that claimed no writes while holding them.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_osd_with_damaged_pg_info_and_log_records_is_backfilled_whole() {
    let mut t = TestCluster::start_with("badinfo", 3, 2).await;
    let c = client(&t).await;
    let p = c.pool("rbd").unwrap();
    wait_clean(&c).await;
    for i in 0..30u8 {
        p.write_full(&format!("o{i}"), pattern(1500, i))
            .await
            .unwrap();
    }
    t.kill(2).await;
    {
        let s = BlockStore::mount(&t.dirs[2], &store_cfg()).unwrap();
        let mut tx = loligo_store::Transaction::new();
        let (mut damaged, mut logs) = (0, 0);
        for (i, coll) in s.collections().unwrap().into_iter().enumerate() {
            if s.record(coll, b"info").unwrap().is_none() {
                continue;
            }
            damaged += 1;
            // Every other copy: its newest log entry cut short instead.
            let rows = s.records(coll, b"log/", 10_000).unwrap();
            let newest = rows.into_iter().rfind(|(k, _)| k.starts_with(b"log/"));
            match newest.filter(|_| i % 2 == 1) {
                Some((k, v)) => {
                    tx.set_record(coll, &k, v[..v.len() / 2].to_vec());
                    logs += 1;
                }
                None => {
                    tx.set_record(coll, b"info", b"LPI1\xff\xff\xff".to_vec());
                }
            }
        }
        assert!(
            damaged > logs && logs > 0,
            "osd.2 holds PG copies with logs"
        );
        s.apply(tx).unwrap();
    }
    // A few more writes while it is away (some PGs move on, some not).
    for i in 0..10u8 {
        p.write_full(&format!("o{i}"), pattern(1500, i.wrapping_add(90)))
            .await
            .unwrap();
    }
    t.revive(2).await;
    wait_clean(&c).await;
    assert_copies_agree(&t, &c, 30);
    // Alone, osd.2 serves every object.
    min_size_one(&c).await;
    t.kill(0).await;
    t.kill(1).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    for i in 0..30u8 {
        let want = if i < 10 {
            pattern(1500, i.wrapping_add(90))
        } else {
            pattern(1500, i)
        };
        assert_eq!(
            p.read(&format!("o{i}"), 0, 0).await.unwrap(),
            want,
            "o{i} from the repaired copy"
        );
    }
}

/// A store transaction that fails (an I/O error) stops its OSD, as a
/// crash would (a copy that lost a transaction its PG counts must not
/// serve): the PGs go on without it, nothing acknowledged is lost, and
/// every PG ends clean on the other OSDs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_osd_whose_store_fails_a_commit_stops_and_the_cluster_goes_on() {
    let t = TestCluster::start("failstop", 4).await;
    let faulty = Arc::new(FaultyStore::new(MemStore::new()));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = loligo_osd::start(osd_cfg(4, &addr, &t.mon_addr, 1000), faulty.clone(), l)
        .await
        .unwrap();
    let c = client(&t).await;
    let p = c.pool("rbd").unwrap();
    wait_clean(&c).await;
    // osd.4's third transaction from now fails.
    faulty.fail_commit_in(3);
    let mut written = 0u8;
    let why = loop {
        assert!(written < 100, "osd.4 never failed");
        p.write_full(&format!("o{written}"), pattern(64 << 10, written))
            .await
            .unwrap();
        written += 1;
        if let Ok(why) = tokio::time::timeout(Duration::from_millis(1), h.failed()).await {
            break why;
        }
    };
    assert_eq!(faulty.commit_faults(), 1);
    assert!(why.contains("store transaction failed"), "{why}");
    // Its supervisor (the CLI) stops it, marked down; its PGs go on
    // undersized, and once it is marked out they heal on the others.
    h.stop(true).await;
    let r = c
        .mon(MonRequest::Admin(Admin::OsdOut { ids: vec![4] }))
        .await
        .unwrap();
    c.wait_for_epoch(r.epoch).await;
    for i in written..written + 10 {
        p.write_full(&format!("o{i}"), pattern(64 << 10, i))
            .await
            .unwrap();
    }
    wait_clean(&c).await;
    for i in 0..written + 10 {
        assert_eq!(
            p.read(&format!("o{i}"), 0, 0).await.unwrap(),
            pattern(64 << 10, i),
            "o{i}"
        );
    }
}

/// An OSD whose device fills up is not stopped by it: before it is full
/// (95% used) the monitors mark it full in the map, and its PGs' writes
/// that take space are refused with a clear error while deletes go on;
/// once space is freed, writes are taken again. Nothing written is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_osd_refuses_writes_without_stopping_and_deletes_free_it() {
    let t = TestCluster::start("full", 4).await;
    // osd.4 on a 4 MiB device: it fills up long before the others.
    const CAP: u64 = 4 << 20;
    let small = Arc::new(MemStore::with_limits(Limits::default(), CAP));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = loligo_osd::start(osd_cfg(4, &addr, &t.mon_addr, 1000), small.clone(), l)
        .await
        .unwrap();
    let c = client(&t).await;
    let p = c.pool("rbd").unwrap();
    wait_clean(&c).await;
    let used = || small.statfs().unwrap().used;
    let not_failed = |h: &OsdHandle| {
        assert!(
            h.failed_now().is_none(),
            "osd.4 stopped: {:?}",
            h.failed_now()
        )
    };
    // Fast to 80%, then small writes until one is refused.
    let mut names: Vec<(String, Vec<u8>)> = Vec::new();
    let mut i = 0u32;
    while used() < CAP * 8 / 10 {
        let (n, d) = (format!("big{i}"), pattern(64 << 10, i as u8));
        p.write_full(&n, d.clone()).await.unwrap();
        names.push((n, d));
        i += 1;
        assert!(i < 1000, "osd.4 does not fill");
    }
    let refused = loop {
        let (n, d) = (format!("small{i}"), pattern(4 << 10, i as u8));
        match p.write_full(&n, d.clone()).await {
            Ok(_) => names.push((n, d)),
            Err(ClientError::Op(e @ OpError::Full { .. })) => break e,
            Err(e) => panic!("write {n}: {e}"),
        }
        not_failed(&h);
        i += 1;
        assert!(i < 5000, "no write was refused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(refused, OpError::Full { osd: 4 });
    assert!(refused.to_string().contains("osd.4 is full"), "{refused}");
    assert!(used() <= CAP, "the device overflowed");
    not_failed(&h);
    // The map and health say so.
    let mut health = serde_json::Value::Null;
    for _ in 0..50 {
        health = c.mon(MonRequest::Admin(Admin::Status)).await.unwrap().value["health"].clone();
        if health["checks"]["OSD_FULL"]["detail"][0]["message"]
            .to_string()
            .contains("osd.4 is full")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(health["status"], "HEALTH_ERR", "{health}");
    assert_eq!(
        health["checks"]["OSD_FULL"]["summary"]["message"], "1 full osd(s)",
        "{health}"
    );
    // Deletes go on; once osd.4 has room again, writes are taken.
    while used() > CAP * 7 / 10 {
        let (n, _) = names.remove(0);
        p.remove(&n).await.unwrap();
    }
    let mut again = false;
    for _ in 0..100 {
        match p.write_full("after", pattern(4 << 10, 7)).await {
            Ok(_) => {
                again = true;
                break;
            }
            Err(ClientError::Op(OpError::Full { .. })) => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => panic!("write after deletes: {e}"),
        }
    }
    assert!(again, "writes still refused 10 s after space was freed");
    not_failed(&h);
    for (n, d) in &names {
        assert_eq!(&p.read(n, 0, 0).await.unwrap(), d, "{n}");
    }
}

/// An OSD the maps mark down again and again while it runs (a flapping
/// one: here by `osd down`, which it answers by booting again) stops once
/// it was marked down more than Ceph's markdown count within the period,
/// saying why, instead of starting new intervals in all its PGs forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flapping_osd_stops_after_the_markdown_count() {
    let t = TestCluster::start("flap", 3).await;
    let c = client(&t).await;
    let count = loligo_osd::daemon::MAX_MARKDOWN_COUNT;
    for round in 0..=count {
        let t0 = std::time::Instant::now();
        while !c.map().is_up(0) {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "osd.0 not up again (round {round})"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        c.mon(MonRequest::Admin(Admin::OsdDown { ids: vec![0] }))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let h = t.osds[0].as_ref().expect("osd.0 runs");
    let why = tokio::time::timeout(Duration::from_secs(10), h.failed())
        .await
        .expect("osd.0 stops");
    assert!(
        why.contains(&format!("marked down {} times", count + 1)),
        "{why}"
    );
}
