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
