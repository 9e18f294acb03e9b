//! What the cluster does about a copy that silently went bad: bytes
//! flipped in an OSD's block file while it was stopped (the store's block
//! checksum then fails the read).

use super::*;

/// The OSDs holding `name` of pool 1, primary first.
fn holders(c: &Cluster, name: &str) -> Vec<i32> {
    let m = c.map();
    let pg = m.pools[&1].object_pg(name.as_bytes());
    m.placer().unwrap().map_pg(pg).unwrap().acting
}

/// Flip one byte of `data`'s copy in OSD `i`'s block file (stopped): the
/// copy is found at a block boundary by its first 64 bytes.
fn flip_in_block_file(t: &TestCluster, i: usize, data: &[u8]) {
    let path = t.dirs[i].join("block");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    use std::os::unix::fs::FileExt;
    let len = f.metadata().unwrap().len();
    let mut head = [0u8; 64];
    let at = (0..len / 4096)
        .map(|b| b * 4096)
        .find(|&off| f.read_exact_at(&mut head, off).is_ok() && head[..] == data[..64])
        .unwrap_or_else(|| panic!("osd.{i}: the object's bytes are not in its block file"));
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at + 5000).unwrap();
    f.write_all_at(&[b[0] ^ 0x04], at + 5000).unwrap();
    f.sync_all().unwrap();
}

/// A 1 MiB object whose copy on its primary rotted while the OSD was
/// stopped reads back right at once: the primary's checksum failure pulls
/// a good copy from a replica and writes it over the bad one. With every
/// copy rotten the read fails with `Damaged` (EIO), not wrong bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_of_a_copy_rotten_on_the_primary_is_served_from_a_good_one() {
    let mut t = TestCluster::start("mend", 3).await;
    let c = client(&t).await;
    let p = c.pool("rbd").unwrap();
    wait_clean(&c).await;
    let data: Vec<u8> = loligo_testkit::Rng::new(68).bytes(1 << 20);
    p.write_full("rotten", data.clone()).await.unwrap();
    let all = holders(&c, "rotten");
    let primary = all[0] as usize;
    t.kill(primary).await;
    flip_in_block_file(&t, primary, &data);
    t.revive(primary).await;
    wait_clean(&c).await;
    assert_eq!(holders(&c, "rotten")[0], primary as i32);
    assert_eq!(p.read("rotten", 0, 0).await.unwrap(), data);
    // The primary's own copy was mended.
    let coll = loligo_store::CollectionId::pg(1, c.map().pools[&1].object_pg(b"rotten").ps);
    let o = loligo_store::ObjectId::new(
        loligo_crush::hash::str_hash_rjenkins(b"rotten"),
        "rotten".to_string(),
    );
    assert_eq!(
        t.stores[primary].read(coll, &o, &[(0, 1 << 20)]).unwrap()[0],
        data
    );

    // Every copy rotten: EIO.
    let bad: Vec<u8> = data.iter().map(|b| !b).collect();
    p.write_full("rotten2", bad.clone()).await.unwrap();
    let all = holders(&c, "rotten2");
    for &i in &all {
        t.kill(i as usize).await;
        flip_in_block_file(&t, i as usize, &bad);
        t.revive(i as usize).await;
    }
    wait_clean(&c).await;
    match p.read("rotten2", 0, 0).await {
        Err(ClientError::Op(OpError::Damaged(why))) => assert!(why.contains("checksum"), "{why}"),
        other => panic!("a read with every copy rotten gave {other:?}"),
    }
}

/// The PG of `name` in pool 1.
fn pg_of(c: &Cluster, name: &str) -> loligo_types::PgId {
    c.map().pools[&1].object_pg(name.as_bytes())
}

/// Object `name` of pool 1 in the store's terms.
fn oid(name: &str) -> loligo_store::ObjectId {
    loligo_store::ObjectId::new(
        loligo_crush::hash::str_hash_rjenkins(name.as_bytes()),
        name.to_string(),
    )
}

/// PG `pg`'s row in `pg ls`.
async fn pg_row(c: &Cluster, pg: loligo_types::PgId) -> loligo_monc::protocol::PgRow {
    let v = c
        .mon(MonRequest::Admin(Admin::PgLs { pool: None }))
        .await
        .unwrap()
        .value;
    let rows: Vec<loligo_monc::protocol::PgRow> = serde_json::from_value(v).unwrap();
    rows.into_iter().find(|r| r.pg == pg.to_string()).unwrap()
}

/// Run a scrub of `kind` on `pg` through its primary and wait for its
/// report; what the primary then lists as inconsistent.
async fn scrub(
    c: &Cluster,
    pg: loligo_types::PgId,
    deep: bool,
    repair: bool,
) -> Vec<loligo_types::scrub::Inconsistent> {
    use loligo_types::scrub::{PgCommand, PgCommandReply};
    let stamp = |r: &loligo_monc::protocol::PgRow| {
        if deep {
            r.last_deep_scrub_stamp
        } else {
            r.last_scrub_stamp
        }
    };
    let before = stamp(&pg_row(c, pg).await);
    let r = c
        .pg_command(pg, PgCommand::Scrub { deep, repair })
        .await
        .unwrap();
    assert_eq!(r, PgCommandReply::Queued);
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if stamp(&pg_row(c, pg).await) > before {
            break;
        }
    }
    assert!(
        stamp(&pg_row(c, pg).await) > before,
        "pg {pg}: no scrub reported in 20 s"
    );
    match c.pg_command(pg, PgCommand::ListInconsistent).await.unwrap() {
        PgCommandReply::Inconsistent(f) => f,
        other => panic!("{other:?}"),
    }
}

/// Until the primary lists nothing inconsistent in `pg` (a repair's
/// pushes are acknowledged after its scrub reports).
async fn wait_consistent(c: &Cluster, pg: loligo_types::PgId) {
    use loligo_types::scrub::{PgCommand, PgCommandReply};
    for _ in 0..100 {
        match c.pg_command(pg, PgCommand::ListInconsistent).await.unwrap() {
            PgCommandReply::Inconsistent(f) if f.is_empty() => return,
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    panic!("pg {pg} still inconsistent 20 s after its repair");
}

/// Bytes flipped two ways on a replica, an omap value changed on one, and
/// an object removed from one: a deep scrub names each object, OSD and
/// error kind (a read error for rot the block checksum catches, a digest
/// mismatch for wrong bytes under valid checksums), the PG shows
/// `inconsistent`, a repair mends every copy, and the next deep scrub is
/// clean. A shallow scrub reads no data, so it sees the missing copy but
/// not the wrong bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_scrub_finds_bad_copies_and_repair_mends_them() {
    use loligo_types::scrub::{AuthRule, ShardError};
    let mut t = TestCluster::start("scrub", 3).await;
    let c = client(&t).await;
    let p = c.pool("rbd").unwrap();
    wait_clean(&c).await;
    // Four objects in one PG.
    let mut names = Vec::new();
    let first = pg_of(&c, "o0");
    for i in 0.. {
        let n = format!("o{i}");
        if pg_of(&c, &n) == first {
            names.push(n);
        }
        if names.len() == 4 {
            break;
        }
    }
    let pg = first;
    let coll = loligo_store::CollectionId::pg(1, pg.ps);
    let datas: Vec<Vec<u8>> = (0..4)
        .map(|i| loligo_testkit::Rng::new(100 + i).bytes(256 << 10))
        .collect();
    for (n, d) in names.iter().zip(&datas) {
        p.write_full(n, d.clone()).await.unwrap();
    }
    p.omap_set(&names[2], vec![(b"k".to_vec(), b"v".to_vec())])
        .await
        .unwrap();
    let set = holders(&c, &names[0]);
    let (primary, r1, r2) = (set[0], set[1] as usize, set[2] as usize);
    assert!(
        scrub(&c, pg, true, false).await.is_empty(),
        "a fresh PG is consistent"
    );

    // names[0]: rot in r1's block file; names[1]: wrong bytes, valid
    // checksums, on r2; names[2]: an omap value on r1; names[3]: gone on r2.
    t.kill(r1).await;
    flip_in_block_file(&t, r1, &datas[0]);
    t.revive(r1).await;
    wait_clean(&c).await;
    let mut tx = loligo_store::Transaction::new();
    tx.write(
        coll,
        &oid(&names[1]),
        1000,
        bytes::Bytes::from_static(b"evil"),
    );
    t.stores[r2].apply(tx).unwrap();
    let mut tx = loligo_store::Transaction::new();
    tx.omap_setkeys(coll, &oid(&names[2]), vec![(b"k".to_vec(), b"w".to_vec())]);
    t.stores[r1].apply(tx).unwrap();
    let mut tx = loligo_store::Transaction::new();
    tx.remove(coll, &oid(&names[3]));
    t.stores[r2].apply(tx).unwrap();

    let shallow = scrub(&c, pg, false, false).await;
    let got: Vec<(&str, Vec<ShardError>)> = shallow
        .iter()
        .map(|i| (i.name.as_str(), i.errors()))
        .collect();
    assert_eq!(
        got,
        vec![(names[3].as_str(), vec![ShardError::Missing])],
        "{shallow:?}"
    );

    let found = scrub(&c, pg, true, false).await;
    let by_name = |n: &str| {
        found
            .iter()
            .find(|i| i.name == n)
            .unwrap_or_else(|| panic!("{n} not found: {found:?}"))
    };
    assert_eq!(found.len(), 4, "{found:?}");
    let rot = by_name(&names[0]);
    assert_eq!(rot.bad.keys().copied().collect::<Vec<_>>(), vec![r1 as i32]);
    assert_eq!(rot.bad[&(r1 as i32)], vec![ShardError::ReadError]);
    assert_eq!(rot.rule, AuthRule::DataDigest);
    assert!(rot.auth.contains(&primary));
    let wrong = by_name(&names[1]);
    assert_eq!(
        wrong.bad[&(r2 as i32)],
        vec![
            ShardError::DataDigestMismatch,
            ShardError::DataDigestMismatchInfo
        ]
    );
    assert_eq!(wrong.rule, AuthRule::DataDigest);
    let omap = by_name(&names[2]);
    assert_eq!(omap.bad[&(r1 as i32)], vec![ShardError::OmapDigestMismatch]);
    assert_eq!(omap.rule, AuthRule::Majority);
    assert_eq!(
        by_name(&names[3]).bad[&(r2 as i32)],
        vec![ShardError::Missing]
    );
    let row = pg_row(&c, pg).await;
    assert!(
        row.state.contains(loligo_types::PgState::INCONSISTENT),
        "{}",
        row.state
    );
    assert_eq!(row.scrub_errors, 4);
    let mut health = serde_json::Value::Null;
    for _ in 0..50 {
        health = c.mon(MonRequest::Admin(Admin::Status)).await.unwrap().value["health"].clone();
        if health["checks"]["OSD_SCRUB_ERRORS"]["summary"]["message"] == "4 scrub errors" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        health["checks"]["OSD_SCRUB_ERRORS"]["summary"]["message"], "4 scrub errors",
        "{health}"
    );
    assert!(health["checks"].get("PG_DAMAGED").is_some(), "{health}");

    scrub(&c, pg, true, true).await;
    wait_consistent(&c, pg).await;
    assert!(
        scrub(&c, pg, true, false).await.is_empty(),
        "a repaired PG is consistent"
    );
    for (n, d) in names.iter().zip(&datas) {
        for &osd in &set {
            let got = t.stores[osd as usize]
                .read(coll, &oid(n), &[(0, 1 << 20)])
                .unwrap();
            assert_eq!(&got[0], d, "{n} on osd.{osd}");
        }
    }
    assert_eq!(
        p.omap_get(&names[2], vec![b"k".to_vec()]).await.unwrap(),
        BTreeMap::from([(b"k".to_vec(), b"v".to_vec())])
    );
    let row = pg_row(&c, pg).await;
    assert!(
        !row.state.contains(loligo_types::PgState::INCONSISTENT),
        "{}",
        row.state
    );
}
