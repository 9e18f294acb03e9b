//! The behavioural suite every `ObjectStore` must pass. Each check takes
//! a fresh, empty store; `store_suite!` turns them into tests for one
//! store type.
#![allow(dead_code)]

use loligo_store::*;
use std::collections::BTreeMap;

pub fn c1() -> CollectionId {
    CollectionId::pg(1, 0x1f)
}

pub fn oid(hash: u32, name: &str) -> ObjectId {
    ObjectId::new(hash, name)
}

fn setup(s: &dyn ObjectStore) {
    if s.collection_exists(c1()).expect("collection_exists") {
        return;
    }
    let mut t = Transaction::new();
    t.create_collection(c1());
    s.apply(t).expect("create collection");
}

fn read_all(s: &dyn ObjectStore, o: &ObjectId) -> Vec<u8> {
    s.read(c1(), o, &[(0, u64::MAX)]).expect("read").remove(0)
}

pub fn data_ops(s: &dyn ObjectStore) {
    setup(s);
    let o = oid(7, "obj");
    let mut t = Transaction::new();
    t.write(c1(), &o, 0, b"hello world".to_vec());
    s.apply(t).unwrap();
    assert_eq!(read_all(s, &o), b"hello world");
    assert_eq!(s.stat(c1(), &o).unwrap().size, 11);
    // Overwrite in the middle, then write past the end (a hole of zeros).
    let mut t = Transaction::new();
    t.write(c1(), &o, 6, b"WORLD".to_vec())
        .write(c1(), &o, 20, b"!".to_vec());
    s.apply(t).unwrap();
    let mut want = b"hello WORLD".to_vec();
    want.resize(20, 0);
    want.push(b'!');
    assert_eq!(read_all(s, &o), want);
    // Several extents in one read; past the end is cut short.
    let r = s
        .read(c1(), &o, &[(0, 5), (18, 10), (100, 5), (6, 0)])
        .unwrap();
    assert_eq!(r, vec![b"hello".to_vec(), vec![0, 0, b'!'], vec![], vec![]]);
    // Zero, truncate (shrink and extend), write_full.
    let mut t = Transaction::new();
    t.zero(c1(), &o, 0, 5).truncate(c1(), &o, 8);
    s.apply(t).unwrap();
    assert_eq!(read_all(s, &o), b"\0\0\0\0\0 WO");
    let mut t = Transaction::new();
    t.truncate(c1(), &o, 10);
    s.apply(t).unwrap();
    assert_eq!(read_all(s, &o), b"\0\0\0\0\0 WO\0\0");
    let mut t = Transaction::new();
    t.write_full(c1(), &o, b"new".to_vec());
    s.apply(t).unwrap();
    assert_eq!(read_all(s, &o), b"new");
    // Touch creates an empty object; remove deletes; reads then fail.
    let e = oid(8, "empty");
    let mut t = Transaction::new();
    t.touch(c1(), &e);
    s.apply(t).unwrap();
    assert_eq!(s.stat(c1(), &e).unwrap().size, 0);
    let mut t = Transaction::new();
    t.remove(c1(), &e);
    s.apply(t).unwrap();
    assert!(!s.exists(c1(), &e).unwrap());
    assert!(matches!(s.stat(c1(), &e), Err(StoreError::NoObject { .. })));
    assert!(matches!(
        s.read(c1(), &e, &[(0, 1)]),
        Err(StoreError::NoObject { .. })
    ));
}

pub fn large_and_unaligned(s: &dyn ObjectStore) {
    setup(s);
    let o = oid(1, "big");
    let big: Vec<u8> = (0..3 << 20)
        .map(|i: u32| (i * 7 + i / 4096) as u8)
        .collect();
    let mut t = Transaction::new();
    t.write_full(c1(), &o, big.clone());
    s.apply(t).unwrap();
    // Small unaligned overwrites across block boundaries.
    let mut want = big.clone();
    let mut t = Transaction::new();
    for (off, len) in [(4095u64, 2usize), (8190, 10), (100_000, 5000), (3 << 20, 7)] {
        let d = vec![0xAB; len];
        t.write(c1(), &o, off, d.clone());
        let end = off as usize + len;
        if want.len() < end {
            want.resize(end, 0);
        }
        want[off as usize..end].copy_from_slice(&d);
    }
    s.apply(t).unwrap();
    assert_eq!(read_all(s, &o), want);
    let r = s.read(c1(), &o, &[(4000, 300), (8100, 200)]).unwrap();
    assert_eq!(r[0], want[4000..4300]);
    assert_eq!(r[1], want[8100..8300]);
    // Shared-buffer reads see the same bytes: large and aligned (with the
    // small overwrites just made laid over them), unaligned, past the end.
    for (off, len) in [
        (0u64, u64::MAX),
        (4096, 1 << 20),
        (4000, 300_000),
        (1 << 20, 8192),
    ] {
        let end = off.saturating_add(len).min(want.len() as u64) as usize;
        let got = s.read_bytes(c1(), &o, off, len).unwrap();
        assert_eq!(got, want[off as usize..end], "read_bytes({off}, {len})");
    }
    assert!(s.read_bytes(c1(), &o, 10 << 20, 5).unwrap().is_empty());
}

pub fn xattrs(s: &dyn ObjectStore) {
    setup(s);
    let o = oid(3, "x");
    let mut t = Transaction::new();
    t.setattr(c1(), &o, "a", b"1".to_vec())
        .setattr(c1(), &o, "b", b"2".to_vec());
    s.apply(t).unwrap();
    assert_eq!(s.getattr(c1(), &o, "a").unwrap(), b"1");
    let all = s.getattrs(c1(), &o).unwrap();
    assert_eq!(all.keys().cloned().collect::<Vec<_>>(), vec!["a", "b"]);
    let mut t = Transaction::new();
    t.rmattr(c1(), &o, "a");
    s.apply(t).unwrap();
    assert!(matches!(
        s.getattr(c1(), &o, "a"),
        Err(StoreError::NoAttr { .. })
    ));
    let mut t = Transaction::new();
    t.rmattr(c1(), &o, "a");
    assert!(matches!(s.apply(t), Err(StoreError::NoAttr { .. })));
    // Size and one attribute at once.
    let (st, b) = s.stat_attr(c1(), &o, "b").unwrap().unwrap();
    assert_eq!((st.size, b), (0, Some(b"2".to_vec())));
    let (_, a) = s.stat_attr(c1(), &o, "a").unwrap().unwrap();
    assert_eq!(a, None);
    assert!(s.stat_attr(c1(), &oid(3, "nope"), "a").unwrap().is_none());
    let missing = CollectionId::pg(77, 7);
    assert!(matches!(
        s.stat_attr(missing, &o, "a"),
        Err(StoreError::NoCollection(_))
    ));
    assert!(matches!(
        s.stat(missing, &o),
        Err(StoreError::NoCollection(_))
    ));
}

/// `read_whole` gives what the single calls give, data or not.
pub fn whole(s: &dyn ObjectStore) {
    setup(s);
    let o = oid(3, "w");
    assert_eq!(s.read_whole(c1(), &o, true).unwrap(), None);
    let mut t = Transaction::new();
    t.write(c1(), &o, 10, b"data".to_vec())
        .setattr(c1(), &o, "a", b"1".to_vec())
        .omap_setheader(c1(), &o, b"hdr".to_vec());
    s.apply(t).unwrap();
    let w = s.read_whole(c1(), &o, true).unwrap().unwrap();
    assert_eq!(w.size, 14);
    assert_eq!(w.data, s.read(c1(), &o, &[(0, 14)]).unwrap()[0]);
    assert_eq!(&w.data[10..], b"data");
    assert_eq!(w.attrs, s.getattrs(c1(), &o).unwrap());
    assert_eq!(w.omap_header, b"hdr".to_vec());
    let w = s.read_whole(c1(), &o, false).unwrap().unwrap();
    assert!(w.data.is_empty());
    assert_eq!(w.size, 14);
}

pub fn omap(s: &dyn ObjectStore) {
    setup(s);
    let o = oid(3, "m");
    let kv = |k: &str, v: &str| (k.as_bytes().to_vec(), v.as_bytes().to_vec());
    let mut t = Transaction::new();
    t.omap_setkeys(
        c1(),
        &o,
        vec![
            kv("a", "1"),
            kv("b", "2"),
            kv("c", "3"),
            kv("d", "4"),
            kv("e", "5"),
        ],
    )
    .omap_setheader(c1(), &o, b"hdr".to_vec());
    s.apply(t).unwrap();
    assert_eq!(s.omap_header(c1(), &o).unwrap(), b"hdr");
    let got = s
        .omap_get(c1(), &o, &[b"b".to_vec(), b"zz".to_vec()])
        .unwrap();
    assert_eq!(got, BTreeMap::from([kv("b", "2")]));
    let page = s.omap_range(c1(), &o, b"b", None, 2).unwrap();
    assert_eq!(page, vec![kv("b", "2"), kv("c", "3")]);
    let page = s.omap_range(c1(), &o, b"", Some(b"c"), 100).unwrap();
    assert_eq!(page, vec![kv("a", "1"), kv("b", "2")]);
    let mut t = Transaction::new();
    t.omap_rmkeys(c1(), &o, vec![b"a".to_vec(), b"nope".to_vec()])
        .omap_rmrange(c1(), &o, b"c", b"e");
    s.apply(t).unwrap();
    assert_eq!(
        s.omap_range(c1(), &o, b"", None, 100).unwrap(),
        vec![kv("b", "2"), kv("e", "5")]
    );
    let mut t = Transaction::new();
    t.omap_clear(c1(), &o);
    s.apply(t).unwrap();
    assert!(s.omap_range(c1(), &o, b"", None, 100).unwrap().is_empty());
    assert!(s.omap_header(c1(), &o).unwrap().is_empty());
    // Keys set again after a clear are found again.
    let mut t = Transaction::new();
    t.omap_setkeys(c1(), &o, vec![kv("f", "6")]);
    s.apply(t).unwrap();
    assert_eq!(
        s.omap_range(c1(), &o, b"", None, 100).unwrap(),
        vec![kv("f", "6")]
    );
    // A clone of an object without keys over one with keys, and a
    // removed object made again, carry none of the old keys.
    let plain = oid(3, "plain");
    let mut t = Transaction::new();
    t.write_full(c1(), &plain, b"x".to_vec())
        .clone_object(c1(), &plain, &o);
    s.apply(t).unwrap();
    assert!(s.omap_range(c1(), &o, b"", None, 100).unwrap().is_empty());
    let mut t = Transaction::new();
    t.omap_setkeys(c1(), &o, vec![kv("g", "7")]);
    s.apply(t).unwrap();
    let mut t = Transaction::new();
    t.remove(c1(), &o).write_full(c1(), &o, b"y".to_vec());
    s.apply(t).unwrap();
    assert!(s.omap_range(c1(), &o, b"", None, 100).unwrap().is_empty());
    assert!(s.omap_get(c1(), &o, &[b"g".to_vec()]).unwrap().is_empty());
}

pub fn clone_independence(s: &dyn ObjectStore) {
    setup(s);
    let (a, b) = (oid(5, "src"), oid(5, "dst"));
    let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
    let mut t = Transaction::new();
    t.write_full(c1(), &a, data.clone())
        .setattr(c1(), &a, "x", b"1".to_vec())
        .omap_setkeys(c1(), &a, vec![(b"k".to_vec(), b"v".to_vec())]);
    s.apply(t).unwrap();
    let mut t = Transaction::new();
    t.clone_object(c1(), &a, &b);
    s.apply(t).unwrap();
    assert_eq!(read_all(s, &b), data);
    assert_eq!(s.getattr(c1(), &b, "x").unwrap(), b"1");
    // Overwrite the source: the clone keeps the old bytes, and vice versa.
    let mut t = Transaction::new();
    t.write(c1(), &a, 10, vec![0xFF; 5000])
        .setattr(c1(), &a, "x", b"2".to_vec())
        .omap_setkeys(c1(), &a, vec![(b"k".to_vec(), b"w".to_vec())]);
    s.apply(t).unwrap();
    assert_eq!(read_all(s, &b), data);
    assert_eq!(s.getattr(c1(), &b, "x").unwrap(), b"1");
    assert_eq!(
        s.omap_get(c1(), &b, &[b"k".to_vec()]).unwrap()[&b"k".to_vec()],
        b"v"
    );
    let mut t = Transaction::new();
    t.write(c1(), &b, 0, vec![0xEE; 100]);
    s.apply(t).unwrap();
    let mut want_a = data.clone();
    want_a[10..5010].fill(0xFF);
    assert_eq!(read_all(s, &a), want_a);
    // Removing the source leaves the clone intact.
    let mut t = Transaction::new();
    t.remove(c1(), &a);
    s.apply(t).unwrap();
    let mut want_b = data;
    want_b[..100].fill(0xEE);
    assert_eq!(read_all(s, &b), want_b);
}

/// Objects moved to another collection keep their data, xattrs, omap and
/// header there and are gone from the first; a move onto an object the
/// destination holds, or of a missing one, fails and moves nothing.
pub fn move_objects(s: &dyn ObjectStore) {
    setup(s);
    let c2 = CollectionId::pg(1, 9);
    let (a, b, stay) = (oid(7, "a"), oid(9, "b"), oid(7, "stay"));
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let mut t = Transaction::new();
    t.create_collection(c2)
        .write_full(c1(), &a, big.clone())
        .setattr(c1(), &a, "x", b"1".to_vec())
        .omap_setkeys(c1(), &a, vec![(b"k".to_vec(), b"v".to_vec())])
        .omap_setheader(c1(), &a, b"h".to_vec())
        .write_full(c1(), &b, b"small".to_vec())
        .write_full(c1(), &stay, b"here".to_vec());
    s.apply(t).unwrap();
    let mut t = Transaction::new();
    t.move_objects(c1(), c2, vec![a.clone(), b.clone()]);
    s.apply(t).unwrap();
    for o in [&a, &b] {
        assert!(!s.exists(c1(), o).unwrap(), "{o} left behind");
        assert!(s.exists(c2, o).unwrap(), "{o} not moved");
    }
    assert_eq!(s.read_bytes(c2, &a, 0, big.len() as u64).unwrap(), big);
    assert_eq!(s.getattr(c2, &a, "x").unwrap(), b"1");
    assert_eq!(s.omap_header(c2, &a).unwrap(), b"h");
    let kv = s.omap_range(c2, &a, b"", None, 10).unwrap();
    assert_eq!(kv.len(), 1);
    assert_eq!(&s.read_bytes(c2, &b, 0, 5).unwrap()[..], b"small");
    assert_eq!(&s.read_bytes(c1(), &stay, 0, 4).unwrap()[..], b"here");
    let (listed, _) = s.list(c1(), None, 10).unwrap();
    assert_eq!(listed, vec![stay.clone()]);
    // Writing the moved object where it went works, and changes nothing
    // in the first collection.
    let mut t = Transaction::new();
    t.write(c2, &a, 0, b"NEW".to_vec());
    s.apply(t).unwrap();
    assert_eq!(&s.read_bytes(c2, &a, 0, 3).unwrap()[..], b"NEW");
    // Refused whole: a move onto an object there, beside a good one.
    let mut t = Transaction::new();
    t.write_full(c1(), &b, b"again".to_vec());
    s.apply(t).unwrap();
    let mut t = Transaction::new();
    t.move_objects(c1(), c2, vec![stay.clone(), b.clone()]);
    assert!(s.apply(t).is_err());
    assert!(s.exists(c1(), &stay).unwrap());
    assert_eq!(&s.read_bytes(c2, &b, 0, 5).unwrap()[..], b"small");
    let mut t = Transaction::new();
    t.move_objects(c1(), c2, vec![oid(3, "missing")]);
    assert!(matches!(s.apply(t), Err(StoreError::NoObject { .. })));
    let mut t = Transaction::new();
    t.move_objects(c1(), c1(), vec![stay]);
    assert!(matches!(s.apply(t), Err(StoreError::Invalid(_))));
}

pub fn failed_transaction_applies_nothing(s: &dyn ObjectStore) {
    setup(s);
    let o = oid(1, "keep");
    let mut t = Transaction::new();
    t.write_full(c1(), &o, b"before".to_vec())
        .set_record(c1(), b"r", b"1".to_vec());
    s.apply(t).unwrap();
    // Many good ops, then one that fails (remove of a missing object).
    let mut t = Transaction::new();
    t.write_full(c1(), &o, b"after".to_vec())
        .setattr(c1(), &o, "a", b"x".to_vec())
        .write(c1(), &oid(2, "new"), 0, b"n".to_vec())
        .omap_setkeys(c1(), &o, vec![(b"k".to_vec(), b"v".to_vec())])
        .set_record(c1(), b"r", b"2".to_vec())
        .create_collection(CollectionId::pg(9, 9))
        .remove(c1(), &oid(3, "missing"));
    assert!(matches!(s.apply(t), Err(StoreError::NoObject { .. })));
    assert_eq!(read_all(s, &o), b"before");
    assert!(s.getattrs(c1(), &o).unwrap().is_empty());
    assert!(!s.exists(c1(), &oid(2, "new")).unwrap());
    assert!(s.omap_range(c1(), &o, b"", None, 10).unwrap().is_empty());
    assert_eq!(s.record(c1(), b"r").unwrap(), Some(b"1".to_vec()));
    assert!(!s.collection_exists(CollectionId::pg(9, 9)).unwrap());
    // Limits: an oversized write is refused whole, before anything runs.
    let max = s.limits().object_size_max;
    let mut t = Transaction::new();
    t.write(c1(), &o, 0, b"x".to_vec())
        .write(c1(), &o, max, b"y".to_vec());
    assert!(matches!(s.apply(t), Err(StoreError::TooLarge(_))));
    let mut t = Transaction::new();
    t.touch(c1(), &oid(1, ""));
    assert!(matches!(s.apply(t), Err(StoreError::Invalid(_))));
    assert_eq!(read_all(s, &o), b"before");
}

pub fn listing_order(s: &dyn ObjectStore) {
    setup(s);
    let names = [
        (0x9u32, "b"),
        (0x1, "z"),
        (0x9, "a"),
        (0xffff_ffff, "last"),
        (0x0, "first"),
        (0x5, "m"),
    ];
    let mut t = Transaction::new();
    for (h, n) in names {
        t.touch(c1(), &oid(h, n));
    }
    s.apply(t).unwrap();
    let (all, next) = s.list(c1(), None, 100).unwrap();
    let want = vec![
        oid(0, "first"),
        oid(1, "z"),
        oid(5, "m"),
        oid(9, "a"),
        oid(9, "b"),
        oid(0xffff_ffff, "last"),
    ];
    assert_eq!(all, want);
    assert_eq!(next, None);
    // Pages of two, continuing from `next`.
    let mut got = Vec::new();
    let mut cursor: Option<ObjectId> = None;
    loop {
        let (page, next) = s.list(c1(), cursor.as_ref(), 2).unwrap();
        assert!(page.len() <= 2);
        got.extend(page);
        match next {
            Some(n) => cursor = Some(n),
            None => break,
        }
    }
    assert_eq!(got, want);
    // By hash range [5, 10).
    let (r, _) = s.list_range(c1(), 5..10, None, 100).unwrap();
    assert_eq!(r, vec![oid(5, "m"), oid(9, "a"), oid(9, "b")]);
    let (r, _) = s.list_range(c1(), 0xffff_ffff..1 << 32, None, 100).unwrap();
    assert_eq!(r, vec![oid(0xffff_ffff, "last")]);
    // With an attribute: pages as `list_range` gives them, each object's
    // value (or none).
    let mut t = Transaction::new();
    t.setattr(c1(), &oid(9, "a"), "v", b"9a".to_vec()).setattr(
        c1(),
        &oid(5, "m"),
        "w",
        b"other".to_vec(),
    );
    s.apply(t).unwrap();
    let five_to_ten = std::slice::from_ref(&(5..10));
    let (r, next) = s.list_ranges_attr(c1(), five_to_ten, None, 2, "v").unwrap();
    assert_eq!(
        r,
        vec![(oid(5, "m"), None), (oid(9, "a"), Some(b"9a".to_vec()))]
    );
    assert_eq!(next, Some(oid(9, "b")));
    let (r, next) = s
        .list_ranges_attr(c1(), five_to_ten, next.as_ref(), 2, "v")
        .unwrap();
    assert_eq!(r, vec![(oid(9, "b"), None)]);
    assert_eq!(next, None);
    // Several ranges: only their objects, pages continuing across the
    // gaps between them, `next` never an object outside them.
    let ranges = [0..2, 6..9, 9..10, 0xffff_ffff..1 << 32];
    let want = vec![
        oid(0, "first"),
        oid(1, "z"),
        oid(9, "a"),
        oid(9, "b"),
        oid(0xffff_ffff, "last"),
    ];
    for page in 1..=6 {
        let mut got = Vec::new();
        let mut cursor: Option<ObjectId> = None;
        loop {
            let (r, next) = s
                .list_ranges_attr(c1(), &ranges, cursor.as_ref(), page, "v")
                .unwrap();
            assert!(r.len() <= page);
            got.extend(r.into_iter().map(|(o, _)| o));
            if let Some(n) = &next {
                assert!(want.contains(n), "next {n} is outside the ranges");
            }
            match next {
                Some(n) => cursor = Some(n),
                None => break,
            }
        }
        assert_eq!(got, want, "pages of {page}");
    }
    let (r, next) = s
        .list_ranges_attr(c1(), &[2..5, 6..9], None, 10, "v")
        .unwrap();
    assert!(r.is_empty() && next.is_none());
    let (r, _) = s
        .list_ranges_attr(c1(), &[0..3, 4..10], Some(&oid(9, "a")), 10, "v")
        .unwrap();
    assert_eq!(
        r,
        vec![(oid(9, "a"), Some(b"9a".to_vec())), (oid(9, "b"), None)]
    );
}

pub fn collections(s: &dyn ObjectStore) {
    setup(s);
    let mut t = Transaction::new();
    t.create_collection(c1());
    assert!(matches!(s.apply(t), Err(StoreError::CollectionExists(_))));
    let other = CollectionId::pg(2, 1);
    let mut t = Transaction::new();
    t.touch(other, &oid(1, "x"));
    assert!(matches!(s.apply(t), Err(StoreError::NoCollection(_))));
    let mut t = Transaction::new();
    t.touch(c1(), &oid(1, "x"));
    s.apply(t).unwrap();
    let mut t = Transaction::new();
    t.remove_collection(c1());
    assert!(matches!(s.apply(t), Err(StoreError::CollectionNotEmpty(_))));
    let mut t = Transaction::new();
    t.remove(c1(), &oid(1, "x"))
        .set_record(c1(), b"log", b"1".to_vec())
        .remove_collection(c1());
    s.apply(t).unwrap();
    assert!(s.collections().unwrap().is_empty());
    // An op after its collection's removal, in the same transaction,
    // fails it whole.
    setup(s);
    let mut t = Transaction::new();
    t.touch(c1(), &oid(1, "x"))
        .remove(c1(), &oid(1, "x"))
        .remove_collection(c1())
        .touch(c1(), &oid(2, "y"));
    assert!(matches!(s.apply(t), Err(StoreError::NoCollection(_))));
    assert_eq!(s.collections().unwrap(), vec![c1()]);
    let mut t = Transaction::new();
    t.remove_collection(c1());
    s.apply(t).unwrap();
    // Re-created collections start empty (records included).
    setup(s);
    assert_eq!(s.record(c1(), b"log").unwrap(), None);
    assert_eq!(s.collections().unwrap(), vec![c1()]);
}

pub fn records(s: &dyn ObjectStore) {
    setup(s);
    let mut t = Transaction::new();
    for i in 0..10u8 {
        t.set_record(c1(), &[b'p', i], vec![i]);
    }
    t.write(c1(), &oid(1, "o"), 0, b"d".to_vec());
    s.apply(t).unwrap();
    assert_eq!(s.record(c1(), &[b'p', 3]).unwrap(), Some(vec![3]));
    let page = s.records(c1(), &[b'p', 8], 10).unwrap();
    assert_eq!(
        page,
        vec![(vec![b'p', 8], vec![8]), (vec![b'p', 9], vec![9])]
    );
    let mut t = Transaction::new();
    t.rm_record(c1(), &[b'p', 3]);
    s.apply(t).unwrap();
    assert_eq!(s.record(c1(), &[b'p', 3]).unwrap(), None);
    assert_eq!(s.records(c1(), b"", 100).unwrap().len(), 9);
}

/// Random transactions applied to the store and to a `MemStore` model
/// must leave both with the same visible state. A third store gets only
/// the transactions that succeeded: failed ones must leave no trace, so it
/// must end up equal too (this checks rollback, even for `MemStore`).
pub fn random_against_model(s: &dyn ObjectStore, seed: u64, txns: usize) {
    let model = MemStore::with_limits(*s.limits(), u64::MAX);
    let replay = MemStore::with_limits(*s.limits(), u64::MAX);
    setup(s);
    setup(&model);
    setup(&replay);
    let mut rng = loligo_testkit::Rng::new(seed);
    let mut rnd = move |n: u64| rng.below(n.max(1));
    let names: Vec<ObjectId> = (0..6u64)
        .map(|i| oid((i * 0x3000_0000) as u32, &format!("o{i}")))
        .collect();
    for _ in 0..txns {
        let mut t = Transaction::new();
        for _ in 0..1 + rnd(4) {
            let o = &names[rnd(names.len() as u64) as usize];
            let off = rnd(3) * 4096 + rnd(5000);
            let big = rnd(4) == 0;
            let len = 1 + rnd(if big { 300_000 } else { 6000 }) as usize;
            let byte = rnd(256) as u8;
            match rnd(12) {
                0..=2 => t.write(c1(), o, off, vec![byte; len]),
                3 => t.write_full(c1(), o, vec![byte; len]),
                4 => t.zero(c1(), o, off, len as u64),
                5 => {
                    let sz = rnd(20_000);
                    t.truncate(c1(), o, sz)
                }
                6 => t.remove(c1(), o),
                7 => {
                    let d = &names[rnd(names.len() as u64) as usize];
                    t.clone_object(c1(), o, d)
                }
                8 if byte < 64 => {
                    // An allocation hint: block stores checksum the
                    // object's new data in larger units, or compress it.
                    use loligo_store::hint::{flags, AllocHint};
                    let hint = AllocHint {
                        expected_object_size: 1 << 20,
                        expected_write_size: 4096 << rnd(8),
                        flags: match byte % 4 {
                            0 => flags::SEQUENTIAL_READ | flags::APPEND_ONLY,
                            1 => flags::SEQUENTIAL_READ | flags::IMMUTABLE,
                            2 => flags::COMPRESSIBLE,
                            _ => flags::RANDOM_READ,
                        },
                    };
                    t.setattr(c1(), o, loligo_store::ALLOC_HINT_ATTR, hint.encode())
                }
                8 => {
                    let (n, l) = (rnd(3), rnd(50) as usize);
                    t.setattr(c1(), o, &format!("a{n}"), vec![byte; l])
                }
                9 => {
                    let l = rnd(40) as usize;
                    t.omap_setkeys(c1(), o, vec![(vec![byte % 8], vec![byte; l])])
                }
                10 => {
                    let (a, b) = (rnd(4) as u8, 4 + rnd(4) as u8);
                    t.omap_rmrange(c1(), o, &[a], &[b])
                }
                _ => t.set_record(c1(), &[byte % 16], vec![byte]),
            };
        }
        // Unsynced or not, a transaction reads back the same once applied.
        let done = if rnd(3) == 0 {
            s.queue_unsynced(t.clone())
        } else {
            s.queue_transaction(t.clone())
        };
        let a = done.wait().map_err(|e| std::mem::discriminant(&e));
        let b = model
            .apply(t.clone())
            .map_err(|e| std::mem::discriminant(&e));
        assert_eq!(a, b, "transaction outcome differs from the model");
        if a.is_ok() {
            replay
                .apply(t)
                .expect("a transaction that succeeded replays");
        }
        // Reads between transactions see each one (a store that keeps
        // what it read must drop what a transaction changes).
        for _ in 0..2 {
            let o = &names[rnd(names.len() as u64) as usize];
            let (off, len) = match rnd(3) {
                0 => (0, u64::MAX),
                1 => (rnd(3) * 4096, 131_072 + rnd(200_000)),
                _ => (rnd(300_000), rnd(300_000)),
            };
            let got = s
                .read_bytes(c1(), o, off, len)
                .map(|b| b.to_vec())
                .map_err(|e| std::mem::discriminant(&e));
            let want = model
                .read(c1(), o, &[(off, len)])
                .map(|mut v| v.remove(0))
                .map_err(|e| std::mem::discriminant(&e));
            assert_eq!(
                got, want,
                "read_bytes({o:?}, {off}, {len}) after a transaction"
            );
        }
    }
    same_state(s, &model);
    same_state(s, &replay);
}

/// Everything visible in `a` equals `b`.
pub fn same_state(a: &dyn ObjectStore, b: &dyn ObjectStore) {
    assert_eq!(a.collections().unwrap(), b.collections().unwrap());
    for c in b.collections().unwrap() {
        let (la, _) = a.list(c, None, usize::MAX).unwrap();
        let (lb, _) = b.list(c, None, usize::MAX).unwrap();
        assert_eq!(la, lb, "listing of {c}");
        for o in &lb {
            assert_eq!(
                a.read_bytes(c, o, 0, u64::MAX).unwrap(),
                b.read(c, o, &[(0, u64::MAX)]).unwrap().remove(0),
                "read_bytes of {o:?}"
            );
            assert_eq!(
                a.read(c, o, &[(0, u64::MAX)]).unwrap(),
                b.read(c, o, &[(0, u64::MAX)]).unwrap(),
                "{o}"
            );
            assert_eq!(a.getattrs(c, o).unwrap(), b.getattrs(c, o).unwrap(), "{o}");
            assert_eq!(
                a.omap_range(c, o, b"", None, usize::MAX).unwrap(),
                b.omap_range(c, o, b"", None, usize::MAX).unwrap(),
                "{o}"
            );
            assert_eq!(a.omap_header(c, o).unwrap(), b.omap_header(c, o).unwrap());
        }
        assert_eq!(
            a.records(c, b"", usize::MAX).unwrap(),
            b.records(c, b"", usize::MAX).unwrap()
        );
    }
}

/// How a test gets at the store inside whatever `$make` returns.
pub trait AsStore {
    fn as_store(&self) -> &dyn ObjectStore;
}

impl AsStore for MemStore {
    fn as_store(&self) -> &dyn ObjectStore {
        self
    }
}

/// One test per check above, for a store made by `$make`.
#[macro_export]
macro_rules! store_suite {
    ($make:expr) => {
        #[test]
        fn data_ops() {
            suite::data_ops(suite::AsStore::as_store(&$make));
        }
        #[test]
        fn large_and_unaligned() {
            suite::large_and_unaligned(suite::AsStore::as_store(&$make));
        }
        #[test]
        fn xattrs() {
            suite::xattrs(suite::AsStore::as_store(&$make));
        }
        #[test]
        fn omap() {
            suite::omap(suite::AsStore::as_store(&$make));
        }
        #[test]
        fn whole() {
            suite::whole(suite::AsStore::as_store(&$make));
        }
        #[test]
        fn clone_independence() {
            suite::clone_independence(suite::AsStore::as_store(&$make));
        }
        #[test]
        fn move_objects() {
            suite::move_objects(suite::AsStore::as_store(&$make));
        }
        #[test]
        fn failed_transaction_applies_nothing() {
            suite::failed_transaction_applies_nothing(suite::AsStore::as_store(&$make));
        }
        #[test]
        fn listing_order() {
            suite::listing_order(suite::AsStore::as_store(&$make));
        }
        #[test]
        fn collections() {
            suite::collections(suite::AsStore::as_store(&$make));
        }
        #[test]
        fn records() {
            suite::records(suite::AsStore::as_store(&$make));
        }
        #[test]
        fn random_against_model() {
            for seed in 1..=4 {
                suite::random_against_model(suite::AsStore::as_store(&$make), seed, 150);
            }
        }
    };
}
