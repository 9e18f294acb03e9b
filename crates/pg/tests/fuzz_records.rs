//! Structure-aware fuzzing of a PG's own records (info, log entries with
//! and without a Merkle leaf stamp, missing-object records, backfill
//! cursors, tree shapes and pages): valid records are generated, encoded,
//! then damaged (bytes flipped, cut, inserted, repeated). Decoding must
//! give the record back when undamaged, and a typed error or some record
//! (never a panic, never an allocation the input cannot pay for) when
//! damaged; a tree shape that decodes is still checked by the tree before
//! use. Hostile values that encode validly (extreme versions, names with
//! NULs and multi-byte characters) must round-trip.
//!
//! Cases per run: `LOLIGO_FUZZ_CASES` (default 500).

use loligo_pg::pg::backfill::Cursor;
use loligo_pg::pg::merkle::{Tree, LEAVES_MAX, LEAVES_MIN};
use loligo_pg::pg::record::{self, LeafStamp};
use loligo_pg::pg::{Before, GaveUp, LogEntry, PgInfo};
use loligo_store::ObjectId;
use loligo_testkit::{damage, Damage};
use loligo_types::ops::{ReqId, Version};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn version() -> impl Strategy<Value = Version> {
    prop_oneof![
        (any::<u64>(), any::<u64>()).prop_map(|(epoch, v)| Version { epoch, v }),
        Just(Version {
            epoch: u64::MAX,
            v: u64::MAX
        }),
        Just(Version::default()),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_.0-9]{0,24}",
        // NULs, multi-byte characters, and a long name.
        Just("a\u{0}b\u{0}".to_string()),
        Just("ü€𝄞".repeat(3)),
        Just("x".repeat(2048)),
    ]
}

fn info() -> impl Strategy<Value = PgInfo> {
    (version(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
        |(last_update, last_epoch_started, objects, bytes)| PgInfo {
            last_update,
            last_epoch_started,
            objects,
            bytes,
        },
    )
}

fn entry() -> impl Strategy<Value = LogEntry> {
    (
        version(),
        name(),
        any::<bool>(),
        proptest::option::of(any::<(u64, u64)>()),
        proptest::option::of(prop_oneof![
            version().prop_map(GaveUp::Object),
            Just(GaveUp::Copy)
        ]),
        prop_oneof![
            Just(Before::Unknown),
            Just(Before::Absent),
            version().prop_map(Before::At)
        ],
        proptest::option::of(version()),
    )
        .prop_map(
            |(version, name, removed, reqid, gave_up, before, prev)| LogEntry {
                version,
                name,
                removed,
                reqid: reqid.map(|(client, tid)| ReqId { client, tid }),
                gave_up,
                before,
                prev,
            },
        )
}

fn stamp() -> impl Strategy<Value = LeafStamp> {
    (any::<u64>(), any::<u32>(), any::<u64>()).prop_map(|(seq, leaf, value)| LeafStamp {
        seq,
        leaf,
        value,
    })
}

fn cursor() -> impl Strategy<Value = Cursor> {
    prop_oneof![
        Just(Cursor::Start),
        Just(Cursor::End),
        (any::<u32>(), name()).prop_map(|(hash, n)| Cursor::At(ObjectId::new(hash, n))),
    ]
}

fn damages() -> impl Strategy<Value = Vec<Damage>> {
    let i = 0usize..4096;
    let one = prop_oneof![
        (i.clone(), 1u8..=255).prop_map(|(a, b)| Damage::Flip(a, b)),
        i.clone().prop_map(Damage::Cut),
        (i.clone(), any::<u8>()).prop_map(|(a, b)| Damage::Insert(a, b)),
        (i, 1usize..8).prop_map(|(a, b)| Damage::Repeat(a, b)),
    ];
    proptest::collection::vec(one, 1..4)
}

fn runner() -> TestRunner {
    let cases = std::env::var("LOLIGO_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

#[test]
fn info_records() {
    runner()
        .run(&(info(), damages()), |(i, ds)| {
            let b = record::encode_info(&i);
            prop_assert_eq!(record::decode_info(&b), Ok(i));
            let _ = record::decode_info(&damage(b, &ds));
            Ok(())
        })
        .unwrap();
}

#[test]
fn log_records_with_and_without_a_stamp() {
    runner()
        .run(&(entry(), stamp(), damages()), |(e, s, ds)| {
            let b = record::encode_log(&e);
            prop_assert_eq!(record::decode_log(&b), Ok(e.clone()));
            prop_assert_eq!(record::decode_log_stamped(&b), Ok((e.clone(), None)));
            if e.gave_up.is_some() {
                // An entry that gave its object up takes no stamp.
                prop_assert!(record::stamp_log(&b, &s).is_err());
                let _ = record::decode_log_stamped(&damage(b, &ds));
                return Ok(());
            }
            let stamped = record::stamp_log(&b, &s).unwrap();
            prop_assert_eq!(
                record::decode_log_stamped(&stamped),
                Ok((e.clone(), Some(s)))
            );
            // The entry reads the same through the plain decoder.
            prop_assert_eq!(record::decode_log(&stamped), Ok(e));
            for damaged in [damage(b, &ds), damage(stamped, &ds)] {
                let _ = record::decode_log(&damaged);
                let _ = record::decode_log_stamped(&damaged);
                let _ = record::stamp_log(&damaged, &s);
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn missing_and_cursor_records() {
    runner()
        .run(&(version(), cursor(), damages()), |(v, c, ds)| {
            let m = record::encode_missing(&v);
            prop_assert_eq!(record::decode_missing(&m), Ok(v));
            let b = record::encode_cursor(&c);
            prop_assert_eq!(record::decode_cursor(&b), Ok(c));
            let _ = record::decode_missing(&damage(m, &ds));
            let _ = record::decode_cursor(&damage(b, &ds));
            Ok(())
        })
        .unwrap();
}

#[test]
fn tree_shapes_and_pages() {
    let shape = prop_oneof![
        (10u32..=16).prop_map(|d| 1u32 << d),
        any::<u32>(),
        Just(0u32),
    ];
    runner()
        .run(
            &(
                shape,
                any::<u32>(),
                any::<u64>(),
                proptest::collection::vec(any::<u64>(), 0..300),
                damages(),
            ),
            |(n, per_page, as_of, leaves, ds)| {
                let b = record::encode_tree(n, per_page);
                prop_assert_eq!(record::decode_tree(&b), Ok((n, Some(per_page))));
                // Whatever shape a damaged record decodes to, the tree
                // takes only a power of two in its range.
                if let Ok((m, _)) = record::decode_tree(&damage(b, &ds)) {
                    let ok = Tree::new(m).is_ok();
                    prop_assert_eq!(
                        ok,
                        m.is_power_of_two() && (LEAVES_MIN..=LEAVES_MAX).contains(&m)
                    );
                }
                let p = record::encode_page(as_of, &leaves);
                let count = leaves.len() as u32;
                prop_assert_eq!(record::decode_page(&p, count), Ok((as_of, leaves)));
                // A page read for another leaf count, or damaged, is refused
                // or read at its own length: never past its bytes.
                let _ = record::decode_page(&p, count + 1);
                let _ = record::decode_page(&p, u32::MAX);
                let damaged = damage(p, &ds);
                if let Ok((_, got)) = record::decode_page(&damaged, count) {
                    prop_assert_eq!(got.len(), count as usize);
                }
                Ok(())
            },
        )
        .unwrap();
}
