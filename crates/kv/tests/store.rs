//! The key-value store over an in-process pool: each object op runs
//! through the OSD's own op executor and object classes on a MemStore, all
//! or nothing, as a PG's primary runs it. Random ops against a `BTreeMap`
//! model, and the refusals a user meets.

use loligo_kv::{KvError, KvStore, Objects};
use loligo_osd::exec::{execute, obj_state, validate};
use loligo_store::{CollectionId, MemStore, ObjectId, ObjectStore, Transaction};
use loligo_types::ops::{SubOp, SubResult};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// One PG's worth of objects, ops applied one at a time.
struct MemObjects {
    s: Mutex<MemStore>,
}

fn coll() -> CollectionId {
    CollectionId::pg(1, 0)
}

impl MemObjects {
    fn new() -> MemObjects {
        let s = MemStore::new();
        let mut t = Transaction::new();
        t.create_collection(coll());
        s.apply(t).unwrap();
        MemObjects { s: Mutex::new(s) }
    }

    fn names(&self) -> Vec<String> {
        let s = self.s.lock().unwrap();
        s.list(coll(), None, 100_000)
            .unwrap()
            .0
            .into_iter()
            .map(|o| o.name)
            .collect()
    }
}

impl Objects for MemObjects {
    async fn operate(&self, name: &str, ops: Vec<SubOp>) -> loligo_kv::Result<Vec<SubResult>> {
        let s = self.s.lock().unwrap();
        validate(name, &ops).map_err(KvError::Op)?;
        let o = ObjectId::new(7, name);
        let st = obj_state(&*s, coll(), &o).map_err(KvError::Op)?;
        let out = execute(&*s, coll(), &o, &st, &ops, 1 << 30).map_err(KvError::Op)?;
        s.apply(out.txn).unwrap();
        Ok(out.results)
    }
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[tokio::test]
async fn random_ops_match_a_model() {
    for seed in 1..=20u64 {
        let kv = KvStore::create(MemObjects::new(), "t", 50).await.unwrap();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        for i in 0..400 {
            // 90 keys at most: the store's one node (2k = 100) never fills.
            let key = format!("key{:03}", rng.below(90)).into_bytes();
            match rng.below(4) {
                0 => assert_eq!(
                    kv.get(&key).await.unwrap(),
                    model.get(&key).cloned(),
                    "seed {seed} op {i}"
                ),
                1 => {
                    let v = format!("v{seed}.{i}").into_bytes();
                    kv.put(&key, &v).await.unwrap();
                    model.insert(key, v);
                }
                2 => assert_eq!(kv.remove(&key).await.unwrap(), model.remove(&key).is_some()),
                3 if rng.below(2) == 0 => {
                    // A batch, keys repeated: the last value wins.
                    let batch: Vec<(Vec<u8>, Vec<u8>)> = (0..1 + rng.below(8))
                        .map(|j| {
                            let k = format!("key{:03}", rng.below(90)).into_bytes();
                            (k, format!("b{seed}.{i}.{j}").into_bytes())
                        })
                        .collect();
                    kv.put_many(batch.clone()).await.unwrap();
                    model.extend(batch);
                }
                _ => {
                    let a = format!("key{:03}", rng.below(100)).into_bytes();
                    let b = format!("key{:03}", rng.below(100)).into_bytes();
                    let limit = 1 + rng.below(30) as usize;
                    let end = (rng.below(3) > 0).then_some(b.as_slice());
                    let want: Vec<(Vec<u8>, Vec<u8>)> = model
                        .range(a.clone()..)
                        .take_while(|(k, _)| end.is_none_or(|e| k.as_slice() < e))
                        .take(limit)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    assert_eq!(
                        kv.scan(&a, end, limit).await.unwrap(),
                        want,
                        "seed {seed} op {i}"
                    );
                }
            }
        }
        let st = kv.stats().await.unwrap();
        assert_eq!((st.nodes, st.entries, st.depth), (1, model.len() as u64, 2));
        let c = kv.check().await.unwrap();
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(
            (c.nodes, c.entries, c.underfull),
            (1, model.len() as u64, 0)
        );
        assert_eq!(kv.scan(b"", None, 1000).await.unwrap().len(), model.len());
    }
}

#[tokio::test]
async fn refusals_are_clear_and_change_nothing() {
    let objs = MemObjects::new();
    let kv = KvStore::create(&objs, "s", 2).await.unwrap();
    assert!(matches!(
        KvStore::create(&objs, "s", 2).await,
        Err(KvError::Exists(_))
    ));
    // The failed create left no orphan node behind.
    assert_eq!(objs.names().len(), 2, "{:?}", objs.names());
    assert!(matches!(
        KvStore::open(&objs, "nope").await,
        Err(KvError::NoStore(_))
    ));
    assert!(matches!(
        KvStore::create(&objs, "x", 1).await,
        Err(KvError::Invalid(_))
    ));
    let again = KvStore::open(&objs, "s").await.unwrap();
    assert_eq!(again.k(), 2);
    assert!(matches!(kv.put(b"", b"v").await, Err(KvError::Invalid(_))));
    assert!(matches!(
        kv.put(&[7; 1025], b"v").await,
        Err(KvError::Invalid(_))
    ));
    assert!(matches!(kv.get(&[7; 1025]).await, Err(KvError::Invalid(_))));
    // k = 2: four entries fill the only node; a fifth key is refused as
    // not built yet, and nothing of it is written; updates still go.
    for k in ["a", "b", "c", "d"] {
        kv.put(k.as_bytes(), b"1").await.unwrap();
    }
    let e = kv.put(b"e", b"1").await.unwrap_err();
    assert!(
        matches!(&e, KvError::NotSupported(m) if m.contains("splitting")),
        "{e}"
    );
    assert_eq!(again.get(b"e").await.unwrap(), None);
    kv.put(b"a", b"2").await.unwrap();
    assert_eq!(again.get(b"a").await.unwrap(), Some(b"2".to_vec()));
    assert!(!kv.remove(b"zz").await.unwrap());
    assert_eq!(kv.stats().await.unwrap().entries, 4);
}

/// A store of three nodes (bounds "f", "m" and the last), made by hand
/// until splits make them: keys route to their node, scans and batches
/// cross node bounds.
#[tokio::test]
async fn keys_route_to_their_nodes_and_scans_cross_them() {
    use loligo_kv::index::{index_key, IndexEntry};
    use loligo_types::cls::KV_COUNT_XATTR;
    use serde_bytes::ByteBuf;
    let objs = MemObjects::new();
    KvStore::create(&objs, "m", 50).await.unwrap();
    for (node, high) in [("m.node.a", "f"), ("m.node.b", "m")] {
        objs.operate(
            node,
            vec![SubOp::SetXattr {
                name: KV_COUNT_XATTR.into(),
                value: 0u64.to_le_bytes().to_vec(),
            }],
        )
        .await
        .unwrap();
        let e = IndexEntry {
            node: node.into(),
            intent: None,
        };
        objs.operate(
            "m.index",
            vec![SubOp::OmapSet(vec![(
                ByteBuf::from(index_key(Some(high.as_bytes()))),
                ByteBuf::from(e.encode()),
            )])],
        )
        .await
        .unwrap();
    }
    let kv = KvStore::open(&objs, "m").await.unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = Rng(77);
    let key = |rng: &mut Rng| {
        let c = b'a' + rng.below(26) as u8;
        vec![c, b'0' + rng.below(3) as u8]
    };
    for i in 0..600 {
        match rng.below(4) {
            0 => {
                let batch: Vec<(Vec<u8>, Vec<u8>)> = (0..1 + rng.below(12))
                    .map(|j| (key(&mut rng), format!("{i}.{j}").into_bytes()))
                    .collect();
                kv.put_many(batch.clone()).await.unwrap();
                model.extend(batch);
            }
            1 => {
                let k = key(&mut rng);
                assert_eq!(kv.remove(&k).await.unwrap(), model.remove(&k).is_some());
            }
            2 => {
                let k = key(&mut rng);
                assert_eq!(kv.get(&k).await.unwrap(), model.get(&k).cloned());
            }
            _ => {
                let (a, b) = (key(&mut rng), key(&mut rng));
                let limit = 1 + rng.below(40) as usize;
                let want: Vec<(Vec<u8>, Vec<u8>)> = model
                    .range(a.clone()..)
                    .take_while(|(k, _)| k.as_slice() < b.as_slice())
                    .take(limit)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(kv.scan(&a, Some(&b), limit).await.unwrap(), want, "op {i}");
            }
        }
    }
    // Each node holds exactly the keys of its range.
    let st = kv.stats().await.unwrap();
    assert_eq!((st.nodes, st.entries), (3, model.len() as u64));
    {
        let s = objs.s.lock().unwrap();
        for (node, lo, hi) in [("m.node.a", &b""[..], &b"f"[..]), ("m.node.b", b"f", b"m")] {
            for (k, _) in s
                .omap_range(coll(), &ObjectId::new(7, node), b"", None, 1000)
                .unwrap()
            {
                assert!(
                    k.as_slice() > lo && k.as_slice() <= hi,
                    "{node} holds {k:?}"
                );
            }
        }
    }
    let c = kv.check().await.unwrap();
    assert!(c.problems.is_empty(), "{:?}", c.problems);
    assert_eq!(c.entries, model.len() as u64);
    // The check finds what is broken: a key outside its node's range (and
    // so a count that is off), and a node the index names that is gone.
    objs.operate(
        "m.node.a",
        vec![SubOp::OmapSet(vec![(
            ByteBuf::from(b"zz".to_vec()),
            ByteBuf::from(b"x".to_vec()),
        )])],
    )
    .await
    .unwrap();
    objs.operate("m.node.b", vec![SubOp::Remove]).await.unwrap();
    let c = kv.check().await.unwrap();
    let all = c.problems.join("; ");
    assert!(
        all.contains("m.node.a: key zz is outside its range"),
        "{all}"
    );
    assert!(all.contains("m.node.a: its count says"), "{all}");
    assert!(all.contains("node m.node.b is missing"), "{all}");
}
