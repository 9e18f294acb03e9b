//! Helpers shared by the erasure-code tests.
#![allow(dead_code)]

use loligo_ec::code::ErasureCode;
use loligo_ec::layout::{Available, ChunkExtents};
use loligo_ec::plan::PlanOptions;

/// Deterministic pseudo-random bytes.
pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
    loligo_testkit::Rng::new(seed).bytes(len)
}

/// Every subset of `0..n` with at most `max` members (the empty one too),
/// smallest first.
pub fn subsets(n: usize, max: usize) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    let mut level: Vec<Vec<usize>> = vec![Vec::new()];
    for _ in 0..max.min(n) {
        let mut next = Vec::new();
        for s in &level {
            let from = s.last().map_or(0, |&l| l + 1);
            for i in from..n {
                let mut t = s.clone();
                t.push(i);
                next.push(t);
            }
        }
        out.extend(next.iter().cloned());
        level = next;
    }
    out
}

/// Encode `obj`, then for every erasure pattern of up to `max_lost` chunks
/// decode the lost ones from the rest and compare; also check the object
/// reassembles. Returns the number of patterns checked.
pub fn round_trip_all(code: &dyn ErasureCode, obj: &[u8], max_lost: usize) -> usize {
    let (layout, chunks) = code.encode(obj).expect("encode");
    assert_eq!(chunks.len(), code.k() + code.m());
    assert_eq!(
        chunks[..code.k()].concat(),
        obj,
        "data chunks are the object"
    );
    let n = chunks.len();
    let mut count = 0;
    for lost in subsets(n, max_lost) {
        if lost.is_empty() {
            continue;
        }
        let avail: Available = (0..n)
            .filter(|c| !lost.contains(c))
            .map(|c| (c, ChunkExtents::full(&chunks[c])))
            .collect();
        let got = code
            .decode(&layout, &avail, &lost)
            .unwrap_or_else(|e| panic!("{}: lost {lost:?}: {e}", code.profile()));
        for &c in &lost {
            assert_eq!(
                got[&c],
                chunks[c],
                "{}: lost {lost:?}, chunk {c}",
                code.profile()
            );
        }
        count += 1;
    }
    count
}

/// For every single lost chunk: plan a recovery, hand the decoder only the
/// bytes the plan reads, and check the chunk comes back.
pub fn plan_then_decode(code: &dyn ErasureCode, obj: &[u8], opts: &PlanOptions) {
    let (layout, chunks) = code.encode(obj).expect("encode");
    let n = chunks.len();
    for lost in 0..n {
        let others: Vec<usize> = (0..n).filter(|&c| c != lost).collect();
        let plan = code
            .read_plan(&layout, &[lost], &others, opts)
            .unwrap_or_else(|e| panic!("{}: plan for {lost}: {e}", code.profile()));
        let mut avail: Available = Available::new();
        for (&c, r) in &plan.reads {
            let ex = r
                .ios
                .iter()
                .map(|&(off, len)| (off as usize, &chunks[c][off as usize..(off + len) as usize]))
                .collect();
            avail.insert(c, ChunkExtents { extents: ex });
        }
        if opts.object_read {
            for c in (0..code.k()).filter(|&c| c != lost) {
                avail.insert(c, ChunkExtents::full(&chunks[c]));
            }
        }
        let got = code.decode(&layout, &avail, &[lost]).unwrap_or_else(|e| {
            panic!("{}: decode {lost} from plan {plan:?}: {e}", code.profile())
        });
        assert_eq!(
            got[&lost],
            chunks[lost],
            "{}: chunk {lost} from its plan",
            code.profile()
        );
    }
}
