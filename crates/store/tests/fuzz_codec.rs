//! Structure-aware fuzzing of the block store's on-disk records: valid
//! onodes, blobs, deferred-write records and keys are generated, encoded,
//! then damaged (bytes flipped, cut, inserted, repeated). Decoding must
//! give the record back when undamaged, and a typed error or some record
//! (never a panic, never an allocation the input cannot pay for) when
//! damaged: a bit flipped on disk is found by the store's checks, not by
//! a crash.
//!
//! Cases per run: `LOLIGO_FUZZ_CASES` (default 500).

use loligo_store::block::codec::{
    decode_coll, decode_deferred, decode_object, encode_deferred, onode_key, Blob, CsumPlace,
    Extent, Onode, CSUM_CHUNK,
};
use loligo_store::{CollectionId, ObjectId};
use loligo_testkit::{damage, Damage};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn onode() -> impl Strategy<Value = Onode> {
    (
        any::<u64>(),
        proptest::collection::vec(any::<(u64, u64, u64, u64)>(), 0..6),
        proptest::collection::btree_map(
            "[a-z_.]{0,12}",
            proptest::collection::vec(any::<u8>(), 0..20),
            0..4,
        ),
        proptest::collection::vec(any::<u8>(), 0..16),
        any::<bool>(),
        // A small object's data kept inline (then no extents).
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
    )
        .prop_map(|(size, ext, attrs, header, omap, inline)| Onode {
            size: inline.as_ref().map_or(size, |d| d.len() as u64),
            extents: match inline {
                Some(_) => Vec::new(),
                None => ext
                    .into_iter()
                    .map(|(loff, len, blob, boff)| Extent {
                        loff,
                        len,
                        blob,
                        boff,
                    })
                    .collect(),
            },
            attrs,
            header,
            omap,
            inline,
        })
}

fn blob() -> impl Strategy<Value = Blob> {
    (
        any::<(u64, u64, u64)>(),
        proptest::collection::vec(any::<u32>(), 0..8),
        0u8..4,
        any::<(u64, u64)>(),
        proptest::collection::btree_map(0u64..8, any::<u64>(), 0..4),
        0u8..=loligo_store::block::codec::CSUM_SHIFT_MAX,
    )
        .prop_map(
            |((disk_off, len, refs), csums, comp, (clen, raw_len), mut moved, shift)| {
                // Only uncompressed blobs move blocks, and only their own;
                // only uncompressed blobs without moved blocks have
                // checksum units larger than a block.
                moved.retain(|&i, _| comp == 0 && i < csums.len() as u64);
                let csum_shift = if comp == 0 && moved.is_empty() {
                    shift
                } else {
                    0
                };
                Blob {
                    disk_off,
                    len,
                    refs,
                    csums,
                    comp,
                    clen: if comp == 0 { 0 } else { clen },
                    raw_len: if comp == 0 { 0 } else { raw_len },
                    moved,
                    csum_shift,
                }
            },
        )
}

fn one_damage() -> impl Strategy<Value = Damage> {
    let i = 0usize..4096;
    prop_oneof![
        (i.clone(), 1u8..=255).prop_map(|(a, b)| Damage::Flip(a, b)),
        i.clone().prop_map(Damage::Cut),
        (i.clone(), any::<u8>()).prop_map(|(a, b)| Damage::Insert(a, b)),
        (i.clone(), 1usize..8).prop_map(|(a, b)| Damage::Repeat(a, b)),
    ]
}

fn damages() -> impl Strategy<Value = Vec<Damage>> {
    proptest::collection::vec(one_damage(), 1..4)
}

fn cases() -> u32 {
    std::env::var("LOLIGO_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500)
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    })
}

#[test]
fn damaged_onodes_and_blobs_decode_or_are_typed_errors() {
    runner()
        .run(&(onode(), damages()), |(o, ds)| {
            let e = o.encode();
            prop_assert_eq!(Onode::decode(&e).unwrap(), o.clone());
            let _ = Onode::decode(&damage(e, &ds));
            Ok(())
        })
        .unwrap();
    runner()
        .run(&(blob(), damages()), |(b, ds)| {
            let e = b.encode_head();
            prop_assert_eq!(
                Blob::decode_head(&e).unwrap(),
                (b.clone(), CsumPlace::Inline)
            );
            let _ = Blob::decode_head(&damage(e, &ds));
            Ok(())
        })
        .unwrap();
    // Large blobs: the record without the checksums, which come back
    // from their chunks.
    let large = (
        blob(),
        proptest::collection::vec(any::<u32>(), CSUM_CHUNK + 1..4 * CSUM_CHUNK),
    );
    runner()
        .run(&(large, damages()), |((mut b, csums), ds)| {
            b.len = csums.len() as u64 * 4096;
            if b.comp == 0 && b.csum_shift == 0 {
                // A moved block in the last chunk as well as the first's.
                b.moved.insert(csums.len() as u64 - 1, b.disk_off ^ 1 << 20);
            }
            b.csums = csums;
            let e = b.encode_head();
            let (mut back, place) = Blob::decode_head(&e).unwrap();
            prop_assert_eq!(place.chunks(), b.csums.len().div_ceil(CSUM_CHUNK) as u64);
            for i in 0..place.chunks() {
                back.fill_chunk(i, &b.csum_chunk(i)).unwrap();
            }
            prop_assert_eq!(&back, &b);
            let _ = Blob::decode_head(&damage(e, &ds));
            for i in 0..place.chunks() {
                let _ = back.fill_chunk(i, &damage(b.csum_chunk(i), &ds));
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn damaged_deferred_records_and_keys_decode_or_are_typed_errors() {
    let rec = (any::<u64>(), proptest::collection::vec(0u8..3, 0..300));
    runner()
        .run(&(rec, damages()), |((off, bytes), ds)| {
            let e = encode_deferred(off, &bytes);
            prop_assert_eq!(decode_deferred(&e).unwrap(), (off, bytes.clone()));
            if let Ok((_, b)) = decode_deferred(&damage(e, &ds)) {
                // A length field cannot make replay write unbounded bytes.
                prop_assert!(b.len() as u64 <= 1 << 32);
            }
            Ok(())
        })
        .unwrap();
    let key = (
        any::<(u64, u32, u8)>(),
        any::<u32>(),
        "[a-z\\x00\\xff]{0,20}",
    );
    runner()
        .run(
            &(key, damages()),
            |(((pool, pg, shard), hash, name), ds)| {
                let c = CollectionId { pool, pg, shard };
                let o = ObjectId::new(hash, name);
                let k = onode_key(c, &o);
                prop_assert_eq!(decode_coll(&k).unwrap(), c);
                prop_assert_eq!(decode_object(&k, 14).unwrap().0, o);
                let bad = damage(k, &ds);
                let _ = decode_coll(&bad);
                for at in [0, 13, 14, 15, bad.len(), bad.len() + 3] {
                    let _ = decode_object(&bad, at);
                }
                Ok(())
            },
        )
        .unwrap();
}
