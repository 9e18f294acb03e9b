//! Striping: objects of any size as shards, reads (healthy and degraded),
//! shard rebuilds by the codes' plans, and partial writes that re-encode
//! only the stripes they touch, all checked against a fresh encode.

mod common;

use common::{bytes, subsets};
use loligo_ec::code::ErasureCode;
use loligo_ec::linear::LinearCode;
use loligo_ec::plan::Coalesce;
use loligo_ec::stripe::{Fetched, ShardReads, Striper};
use loligo_ec::zigzag::{Construction, Zigzag};
use loligo_testkit::Rng;
use std::sync::Arc;

/// Small alignments keep the tests fast while every element stays aligned.
fn codes() -> Vec<Arc<dyn ErasureCode>> {
    vec![
        Arc::new(LinearCode::reed_solomon(4, 2).unwrap().with_alignment(64)),
        Arc::new(LinearCode::reed_solomon(3, 3).unwrap().with_alignment(64)),
        Arc::new(LinearCode::pyramid(4, 2, 2).unwrap().with_alignment(64)),
        Arc::new(
            Zigzag::new(4, 2, 1, Construction::Basic)
                .unwrap()
                .with_alignment(64),
        ),
        Arc::new(
            Zigzag::new(5, 3, 2, Construction::Basic)
                .unwrap()
                .with_alignment(64),
        ),
    ]
}

/// Stripers with the smallest unit and with two units' worth.
fn stripers() -> Vec<Striper> {
    let mut out = Vec::new();
    for c in codes() {
        let grain = (c.rows() * c.alignment()) as u64;
        out.push(Striper::new(c.clone(), grain).unwrap());
        out.push(Striper::new(c, 2 * grain).unwrap());
    }
    out
}

fn sizes(s: &Striper) -> Vec<u64> {
    let w = s.width();
    vec![0, 1, 63, w - 1, w, w + 1, 2 * w + w / 3, 3 * w]
}

/// Whether the code can rebuild `lost` from the other chunks (LRC cannot
/// for every pattern of m losses), by the code's own whole-object decode.
fn decodable(s: &Striper, lost: &[usize]) -> bool {
    let code = s.code();
    let obj = bytes(s.width() as usize, 5);
    let (layout, chunks) = code.encode(&obj).unwrap();
    let avail: loligo_ec::layout::Available = (0..chunks.len())
        .filter(|c| !lost.contains(c))
        .map(|c| (c, loligo_ec::layout::ChunkExtents::full(&chunks[c])))
        .collect();
    code.decode(&layout, &avail, lost).is_ok()
}

/// Fetch exactly what a plan names from the shards.
fn fetch(shards: &[Vec<u8>], reads: &ShardReads) -> Fetched<Vec<u8>> {
    reads
        .iter()
        .map(|(&c, exts)| {
            let v = exts
                .iter()
                .map(|&(o, l)| (o, shards[c][o as usize..(o + l) as usize].to_vec()))
                .collect();
            (c, v)
        })
        .collect()
}

#[test]
fn shards_have_the_sizes_the_striper_says_and_padding_is_not_stored() {
    for s in stripers() {
        for size in sizes(&s) {
            let obj = bytes(size as usize, size);
            let shards = s.encode(&obj).unwrap();
            assert_eq!(shards.len(), s.shards());
            let mut data = 0;
            for (c, sh) in shards.iter().enumerate() {
                assert_eq!(
                    sh.len() as u64,
                    s.shard_len(size, c).unwrap(),
                    "{s:?} size {size} shard {c}"
                );
                if c < s.k() {
                    data += sh.len() as u64;
                }
            }
            assert_eq!(data, size, "{s:?}: data shards hold exactly the object");
        }
    }
}

#[test]
fn every_read_with_up_to_m_shards_lost_returns_the_object_bytes() {
    let mut rng = Rng::new(7);
    for s in stripers() {
        let m = s.shards() - s.k();
        for size in sizes(&s) {
            let obj = bytes(size as usize, size + 1);
            let shards = s.encode(&obj).unwrap();
            for lost in subsets(s.shards(), m) {
                let avail: Vec<usize> = (0..s.shards()).filter(|c| !lost.contains(c)).collect();
                let ok = decodable(&s, &lost);
                let mut ranges = Vec::new();
                ranges.push(0..size);
                for _ in 0..3 {
                    let a = rng.below(size + 1);
                    let b = rng.below(size + 1);
                    ranges.push(a.min(b)..a.max(b));
                }
                for r in ranges {
                    // A pattern the code cannot decode may still leave
                    // some ranges readable; it never gives wrong bytes.
                    let plan = match s.plan_read(size, r.clone(), &avail, Coalesce::Conservative) {
                        Ok(p) => p,
                        Err(e) => {
                            assert!(!ok, "{s:?} size {size} lost {lost:?} {r:?}: {e}");
                            continue;
                        }
                    };
                    assert!(
                        plan.reads.keys().all(|c| !lost.contains(c)),
                        "plan reads a lost shard"
                    );
                    let got = s.decode_read(&plan, &fetch(&shards, &plan.reads)).unwrap();
                    assert_eq!(
                        got,
                        &obj[r.start as usize..r.end as usize],
                        "{s:?} size {size} lost {lost:?} {r:?}"
                    );
                    if lost.iter().all(|&c| c >= s.k()) {
                        assert_eq!(
                            plan.bytes(),
                            r.end - r.start,
                            "a healthy read fetches only the bytes asked"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_read_with_too_many_shards_lost_is_an_error() {
    let s = &stripers()[0];
    let size = 3 * s.width();
    let avail: Vec<usize> = (3..s.shards()).collect();
    assert!(s
        .plan_read(size, 0..size, &avail, Coalesce::Conservative)
        .is_err());
    assert!(s
        .plan_read(size, 0..size + 1, &[0, 1, 2, 3], Coalesce::Conservative)
        .is_err());
    // Bytes missing from what was fetched are an error, not zeros.
    let obj = bytes(size as usize, 3);
    let shards = s.encode(&obj).unwrap();
    let all: Vec<usize> = (0..s.shards()).collect();
    let plan = s
        .plan_read(size, 0..size, &all, Coalesce::Conservative)
        .unwrap();
    let mut f = fetch(&shards, &plan.reads);
    f.remove(&1);
    assert!(s.decode_read(&plan, &f).is_err());
}

#[test]
fn rebuilds_return_the_lost_shards_reading_what_the_plans_say() {
    for s in stripers() {
        let m = s.shards() - s.k();
        for size in sizes(&s) {
            let obj = bytes(size as usize, size + 2);
            let shards = s.encode(&obj).unwrap();
            for lost in subsets(s.shards(), m) {
                if lost.is_empty() {
                    continue;
                }
                let avail: Vec<usize> = (0..s.shards()).filter(|c| !lost.contains(c)).collect();
                if !decodable(&s, &lost) {
                    continue;
                }
                for co in [
                    Coalesce::Naive,
                    Coalesce::Conservative,
                    Coalesce::Aggressive,
                ] {
                    let plan = s.plan_rebuild(size, &lost, &avail, co).unwrap();
                    assert!(plan.reads.keys().all(|c| avail.contains(c)));
                    // Merging extents across stripes never reads more than
                    // the per-stripe plans.
                    assert!(plan.bytes() <= plan.theory);
                    if co != Coalesce::Aggressive {
                        assert_eq!(plan.bytes(), plan.theory, "{s:?} {lost:?}");
                    }
                    let got = s
                        .decode_rebuild(&plan, &fetch(&shards, &plan.reads))
                        .unwrap();
                    for &c in &lost {
                        assert_eq!(
                            got[&c], shards[c],
                            "{s:?} size {size} lost {lost:?} shard {c} {co:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_rebuild_works_while_another_shard_is_also_down() {
    for s in stripers() {
        let size = 2 * s.width() + 5;
        let obj = bytes(size as usize, 9);
        let shards = s.encode(&obj).unwrap();
        for down in 0..s.shards() {
            for lost in (0..s.shards()).filter(|&c| c != down) {
                let avail: Vec<usize> = (0..s.shards())
                    .filter(|&c| c != down && c != lost)
                    .collect();
                if !decodable(&s, &[down, lost]) {
                    continue;
                }
                let plan = s
                    .plan_rebuild(size, &[lost], &avail, Coalesce::Conservative)
                    .unwrap();
                let got = s
                    .decode_rebuild(&plan, &fetch(&shards, &plan.reads))
                    .unwrap();
                assert_eq!(got.len(), 1);
                assert_eq!(got[&lost], shards[lost], "{s:?} down {down} lost {lost}");
            }
        }
    }
}

#[test]
fn zigzag_rebuilds_a_data_shard_reading_the_codes_ratio_of_the_helpers() {
    let code: Arc<dyn ErasureCode> = Arc::new(
        Zigzag::new(4, 2, 1, Construction::Basic)
            .unwrap()
            .with_alignment(64),
    );
    let s = Striper::new(code.clone(), 4 * (code.rows() * 64) as u64).unwrap();
    let size = 5 * s.width();
    for lost in 0..s.k() {
        let avail: Vec<usize> = (0..s.shards()).filter(|&c| c != lost).collect();
        let plan = s
            .plan_rebuild(size, &[lost], &avail, Coalesce::Conservative)
            .unwrap();
        let helpers: u64 = avail.iter().map(|&c| s.shard_len(size, c).unwrap()).sum();
        let ratio = plan.bytes() as f64 / helpers as f64;
        let rs = s.k() as f64 / (s.shards() - 1) as f64;
        assert!(
            ratio < 0.7 * rs,
            "shard {lost}: read {ratio:.3} of the helpers (RS reads {rs:.3})"
        );
    }
}

#[test]
fn partial_writes_reencode_only_touched_stripes_and_match_a_fresh_encode() {
    let mut rng = Rng::new(11);
    for s in stripers() {
        let w = s.width();
        let mut model: Vec<u8> = Vec::new();
        let mut shards: Vec<Vec<u8>> = vec![Vec::new(); s.shards()];
        for step in 0..40 {
            let old = model.len() as u64;
            let mut writes = Vec::new();
            match rng.below(4) {
                0 => {
                    // Overwrite or extend at a random offset.
                    let off = rng.below(old + w);
                    let len = 1 + rng.below(w + w / 2);
                    let data = bytes(len as usize, step);
                    let end = (off + len) as usize;
                    if model.len() < end {
                        model.resize(end, 0);
                    }
                    model[off as usize..end].copy_from_slice(&data);
                    writes.push(off..off + len);
                }
                1 => {
                    let len = 1 + rng.below(2 * w);
                    model.extend(bytes(len as usize, step + 100));
                    writes.push(old..old + len);
                }
                2 => {
                    // Truncate, shrinking or growing with zeros.
                    let to = rng.below(old + w + 1);
                    model.resize(to as usize, 0);
                }
                _ => {
                    // Two distant small writes in one op.
                    for i in 0..2 {
                        let off = rng.below(old.max(1));
                        let len = 1 + rng.below(17);
                        let end = (off + len) as usize;
                        if model.len() < end {
                            model.resize(end, 0);
                        }
                        model[off as usize..end]
                            .copy_from_slice(&bytes(len as usize, step * 3 + i));
                        writes.push(off..off + len);
                    }
                }
            }
            let new = model.len() as u64;
            let rmw = s.rmw(old, new, &writes).unwrap();
            for run in &rmw.runs {
                assert!(run.read.end <= old && run.bytes.end <= new);
                let enc = s
                    .encode_range(
                        new,
                        run.stripes.start,
                        &model[run.bytes.start as usize..run.bytes.end as usize],
                    )
                    .unwrap();
                for (c, part) in enc.iter().enumerate() {
                    let at = (run.stripes.start * s.unit()) as usize;
                    if shards[c].len() < at + part.len() {
                        shards[c].resize(at + part.len(), 0);
                    }
                    shards[c][at..at + part.len()].copy_from_slice(part);
                }
            }
            for (c, sh) in shards.iter_mut().enumerate() {
                sh.resize(s.shard_len(new, c).unwrap() as usize, 0);
            }
            let fresh = s.encode(&model).unwrap();
            assert_eq!(
                shards, fresh,
                "{s:?} step {step}: {old} -> {new} bytes, writes {writes:?}"
            );
        }
    }
}

#[test]
fn bad_units_and_requests_are_errors() {
    let code: Arc<dyn ErasureCode> = Arc::new(Zigzag::new(4, 2, 1, Construction::Basic).unwrap());
    let grain = (code.rows() * code.alignment()) as u64;
    assert!(Striper::new(code.clone(), 0).is_err());
    assert!(Striper::new(code.clone(), grain + 1).is_err());
    assert!(Striper::new(code.clone(), grain / 2).is_err());
    let s = Striper::new(code.clone(), Striper::default_unit(&*code)).unwrap();
    assert!(s.unit() >= 1 << 20);
    assert!(s.shard_len(1, s.shards()).is_err());
    assert!(s.encode_range(10, 1, &[0; 3]).is_err());
    assert!(s.encode_range(s.width() * 2, 0, &[0; 3]).is_err());
    let rs: Arc<dyn ErasureCode> = Arc::new(LinearCode::reed_solomon(4, 2).unwrap());
    assert_eq!(Striper::default_unit(&*rs), 4096);
}

#[test]
fn a_reencode_finds_a_wrong_byte_in_any_shard_and_names_it() {
    use loligo_ec::check::ShardCheck;
    let mut stripers = stripers();
    let rs41: Arc<dyn ErasureCode> =
        Arc::new(LinearCode::reed_solomon(4, 1).unwrap().with_alignment(64));
    stripers.push(Striper::new(rs41, 64).unwrap());
    for s in stripers {
        let m = s.shards() - s.k();
        for size in sizes(&s).into_iter().filter(|&z| z > 0) {
            let obj = bytes(size as usize, size);
            let shards = s.encode(&obj).unwrap();
            let all = 0..s.stripes(size);
            assert_eq!(
                s.check_shards(size, all.clone(), &shards).unwrap(),
                ShardCheck::Consistent,
                "{s:?} size {size}"
            );
            for c in 0..s.shards() {
                if shards[c].is_empty() {
                    continue;
                }
                let mut bad = shards.clone();
                let at = (size as usize * 7 + c) % bad[c].len();
                bad[c][at] ^= 0x20;
                // (With one parity shard it is named only where padding,
                // known to be zeros, tells; it is never another shard.)
                let got = s.check_shards(size, all.clone(), &bad).unwrap();
                let ok = got == ShardCheck::Bad(c) || (m < 2 && got == ShardCheck::Unlocated);
                assert!(ok, "{s:?} size {size}, shard {c} byte {at}: {got:?}");
                if m < 2 && size >= s.width() && at < 64 {
                    assert_eq!(got, ShardCheck::Unlocated, "{s:?} size {size}");
                }
            }
            // Two shards wrong at once are seen (two parity shards or
            // more: with one, two flips may cancel).
            if m >= 2 && !shards[0].is_empty() && !shards[s.k()].is_empty() {
                let mut bad = shards.clone();
                bad[0][0] ^= 1;
                bad[s.k()][0] ^= 1;
                let got = s.check_shards(size, all.clone(), &bad).unwrap();
                assert_ne!(got, ShardCheck::Consistent, "{s:?} size {size}");
            }
        }
    }
}

#[test]
fn a_run_of_stripes_is_checked_as_an_object_of_its_own() {
    use loligo_ec::check::ShardCheck;
    for s in stripers() {
        let w = s.width();
        let size = 3 * w + w / 3;
        let obj = bytes(size as usize, 9);
        let shards = s.encode(&obj).unwrap();
        for run in [0..1, 1..3, 2..4, 3..4, 0..4] {
            let from = (run.start * s.unit()) as usize;
            let part = |c: usize, sh: &Vec<u8>| {
                let rs = s.run_size(size, &run).unwrap();
                let len = s.shard_len(rs, c).unwrap() as usize;
                sh[from..from + len].to_vec()
            };
            let cut: Vec<Vec<u8>> = shards
                .iter()
                .enumerate()
                .map(|(c, sh)| part(c, sh))
                .collect();
            assert_eq!(
                s.check_shards(size, run.clone(), &cut).unwrap(),
                ShardCheck::Consistent,
                "{s:?} stripes {run:?}"
            );
            let mut bad = cut.clone();
            let last = bad[s.k()].len() - 1;
            bad[s.k()][last] ^= 4;
            assert_ne!(
                s.check_shards(size, run.clone(), &bad).unwrap(),
                ShardCheck::Consistent,
                "{s:?} stripes {run:?}"
            );
        }
        assert!(s.check_shards(size, 4..5, &shards).is_err());
        assert!(s.check_shards(size, 0..4, &shards[1..]).is_err());
        let mut short = shards.clone();
        short[0].pop();
        assert!(s.check_shards(size, 0..4, &short).is_err());
    }
}
