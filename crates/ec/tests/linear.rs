//! Reed-Solomon and Pyramid LRC: exhaustive round trips, read plans that
//! suffice to decode, and profile errors.

mod common;
use common::*;
use loligo_ec::code::ErasureCode;
use loligo_ec::error::EcError;
use loligo_ec::layout::Available;
use loligo_ec::linear::LinearCode;
use loligo_ec::plan::{Coalesce, PlanOptions};

const SIZES: [usize; 5] = [0, 1, 1000, 4096 * 3 + 17, 65_537];

#[test]
fn rs_every_pattern_up_to_m() {
    for (k, m) in [
        (1, 1),
        (2, 1),
        (2, 2),
        (4, 2),
        (6, 3),
        (8, 3),
        (8, 4),
        (10, 4),
    ] {
        for (i, &size) in SIZES.iter().enumerate() {
            let code = LinearCode::reed_solomon(k, m)
                .unwrap()
                .with_alignment(if i % 2 == 0 { 4096 } else { 16 });
            round_trip_all(&code, &bytes(size, (k * 100 + m + i) as u64), m);
        }
    }
    // Wide codes: a sample of patterns would do, but m is small enough
    // here to try them all on one size.
    let code = LinearCode::reed_solomon(32, 2).unwrap().with_alignment(8);
    round_trip_all(&code, &bytes(3333, 7), 2);
}

#[test]
fn rs_single_failure_reads_k_chunks_and_plans_suffice() {
    let code = LinearCode::reed_solomon(8, 3).unwrap();
    let layout = code.layout(8 * 4096 * 4).unwrap();
    for lost in 0..11 {
        let others: Vec<usize> = (0..11).filter(|&c| c != lost).collect();
        let p = code
            .read_plan(&layout, &[lost], &others, &PlanOptions::default())
            .unwrap();
        assert_eq!(p.reads.len(), 8, "lost {lost}");
        assert_eq!(p.bytes(), 8 * layout.chunk_size() as u64);
    }
    for co in [
        Coalesce::Naive,
        Coalesce::Conservative,
        Coalesce::Aggressive,
    ] {
        let opts = PlanOptions {
            coalesce: co,
            ..PlanOptions::default()
        };
        plan_then_decode(&code, &bytes(100_000, 3), &opts);
    }
}

#[test]
fn lrc_every_pattern_up_to_m_and_local_repair() {
    for (k, m, l) in [(6, 2, 2), (6, 3, 3), (8, 2, 2), (10, 3, 2), (4, 1, 2)] {
        let code = LinearCode::pyramid(k, m, l).unwrap().with_alignment(64);
        for (i, &size) in SIZES.iter().enumerate() {
            round_trip_all(&code, &bytes(size, i as u64), m);
        }
        plan_then_decode(&code, &bytes(12_345, 9), &PlanOptions::default());
        let layout = code.layout(k as u64 * 64 * 10).unwrap();
        let n = code.k() + code.m();
        let others: Vec<usize> = (1..n).collect();
        let p = code
            .read_plan(&layout, &[0], &others, &PlanOptions::default())
            .unwrap();
        assert_eq!(p.method, "local");
        assert_eq!(
            p.reads.len(),
            k / l,
            "{k} {m} {l}: group of chunk 0 minus it, plus its parity"
        );
    }
}

#[test]
fn bad_profiles_and_requests_are_typed_errors() {
    for (k, m) in [(0, 1), (3, 0), (3, 4), (33, 2)] {
        assert!(matches!(
            LinearCode::reed_solomon(k, m),
            Err(EcError::InvalidProfile(_))
        ));
    }
    assert!(matches!(
        LinearCode::pyramid(6, 2, 7),
        Err(EcError::InvalidProfile(_))
    ));
    let code = LinearCode::reed_solomon(4, 2).unwrap();
    let (layout, chunks) = code.encode(&bytes(5000, 1)).unwrap();
    let avail: Available = [(0, loligo_ec::layout::ChunkExtents::full(&chunks[0]))].into();
    assert!(matches!(
        code.decode(&layout, &avail, &[1]),
        Err(EcError::NotDecodable(_))
    ));
    assert!(matches!(
        code.decode(&layout, &avail, &[9]),
        Err(EcError::InvalidRequest(_))
    ));
    let too_long = vec![0u8; layout.chunk_size() + 1];
    let bad: Available = [(4, loligo_ec::layout::ChunkExtents::full(&too_long))].into();
    assert!(matches!(
        code.decode(&layout, &bad, &[0]),
        Err(EcError::BadChunk { .. })
    ));
    let other = code.layout(50_000).unwrap();
    assert!(code.decode(&other, &avail, &[0]).is_err());
    assert!(code
        .read_plan(&layout, &[], &[0], &PlanOptions::default())
        .is_err());
    assert!(code
        .read_plan(&layout, &[0, 1, 2], &[3, 4, 5], &PlanOptions::default())
        .is_err());
}

#[test]
fn rs_sweep_every_small_profile() {
    // Every (k, m) with k <= 12 and m <= min(k, 4), every erasure pattern
    // of up to m chunks, on one odd-sized object.
    for k in 1..=12 {
        for m in 1..=k.min(4) {
            let code = LinearCode::reed_solomon(k, m).unwrap().with_alignment(1);
            round_trip_all(&code, &bytes(k * 3 + 1, (k * 16 + m) as u64), m);
        }
    }
}

#[test]
fn parity_of_an_object_is_that_of_it_padded_to_whole_chunks() {
    // Encode reads each data chunk only as far as it is stored and treats
    // the rest as zeros: its parity must equal that of the same bytes
    // padded with zeros to whole chunks (where every chunk is full).
    for (k, m) in [(4, 2), (8, 3), (10, 4)] {
        let code = LinearCode::reed_solomon(k, m).unwrap().with_alignment(64);
        for size in [
            1,
            63,
            64 * k - 1,
            64 * k + 1,
            1000 * k + 333,
            64 * 40 * k - 4097,
        ] {
            let obj = bytes(size, (k * 1000 + size) as u64);
            let (layout, chunks) = code.encode(&obj).expect("encode");
            let mut whole = obj.clone();
            whole.resize(layout.chunk_size() * k, 0);
            let (_, padded) = code.encode(&whole).expect("encode padded");
            assert_eq!(
                chunks[k..],
                padded[k..],
                "RS {k}+{m}, {size} bytes: parity differs from the padded object's"
            );
        }
    }
}
