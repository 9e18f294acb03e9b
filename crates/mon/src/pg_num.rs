//! pgp_num following pg_num. `pool set NAME pg_num N` splits a pool's
//! PGs in place: the new PGs keep their parents' placement seeds, so they
//! sit on their parents' OSDs and nothing moves. Raising pgp_num gives
//! them seeds of their own, and CRUSH moves them; the leader raises it in
//! steps, as Ceph's manager does, each moving at most 5% of all PG copies
//! (`target_max_misplaced_ratio`), the next one only once every PG is
//! active+clean again. A pure function of the map and the PG states; the
//! leader runs it at each tick.
//!
//! It must never step while a PG is not active+clean, or while
//! `norebalance` or `nobackfill` holds data where it is.

use crate::balancer::TARGET_MAX_MISPLACED_RATIO;
use loligo_types::osdmap::OsdFlag;
use loligo_types::{Change, OsdMap};

/// One look at the map: the step to propose, if any, and what it says
/// (for `pg_num status` in words: empty when no pool is stepping).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Step {
    pub changes: Vec<Change>,
    pub note: String,
}

/// The step for `map`, whose PGs number `not_clean` that are not
/// active+clean by reports since the last step (unknown ones count).
pub fn step(map: &OsdMap, not_clean: u64) -> Step {
    let Some(pool) = map.pools.values().find(|p| p.pgp_num < p.pg_num) else {
        return Step::default();
    };
    let waiting = |why: String| Step {
        changes: Vec::new(),
        note: format!(
            "pool '{}': pgp_num {} of pg_num {}: {why}",
            pool.name, pool.pgp_num, pool.pg_num
        ),
    };
    if let Some(f) = [OsdFlag::NoRebalance, OsdFlag::NoBackfill]
        .into_iter()
        .find(|f| map.flags.contains(f))
    {
        return waiting(format!("held by {}", f.name()));
    }
    if not_clean > 0 {
        return waiting(format!("waiting for {not_clean} PGs to be active+clean"));
    }
    let copies: u64 = (map.pools.values())
        .map(|p| u64::from(p.pg_num) * u64::from(p.size))
        .sum();
    let budget = (copies as f64 * TARGET_MAX_MISPLACED_RATIO) as u64;
    let most = (budget / u64::from(pool.size.max(1))).max(1);
    // The largest pgp_num whose step reseeds at most `most` PGs (at
    // least one more): a step reseeds every PG whose seed folds anew,
    // more than the step's size once pg_num is past pgp_num's power of two.
    // (What a step reseeds only grows with it: a binary search.)
    let (mut lo, mut hi) = (pool.pgp_num + 1, pool.pg_num);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if reseeded(pool.pg_num, pool.pgp_num, mid) <= most {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let to = lo;
    let mut p = pool.clone();
    p.pgp_num = to;
    Step {
        note: format!(
            "pool '{}': pgp_num {} -> {to} of pg_num {}",
            pool.name, pool.pgp_num, pool.pg_num
        ),
        changes: vec![Change::PoolUpdate(p)],
    }
}

/// How many of `pg_num` PGs a change of pgp_num from `from` to `to`
/// (larger) gives another placement seed: those whose seed under `to` is
/// `from` or more (a seed below `from` folds to itself under `from`).
fn reseeded(pg_num: u32, from: u32, to: u32) -> u64 {
    use loligo_crush::placement::ancestor;
    debug_assert!(from <= to);
    (0..pg_num).filter(|&ps| ancestor(ps, to) >= from).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_crush::placement::ancestor;
    use loligo_types::{Incremental, Pool};

    fn map_with(pg_num: u32, pgp_num: u32) -> OsdMap {
        let mut m = OsdMap::new("f", "osd").unwrap();
        let boot = |id| Change::OsdBoot {
            id,
            addr: format!("127.0.0.1:{}", 6800 + id),
            host: format!("h{id}"),
            crush_weight: 0x10000,
        };
        let mut p = m.replicated_pool("p", pg_num, 3, 2);
        p.pgp_num = pgp_num;
        let changes = (0..4).map(boot).chain([Change::PoolCreate(p)]).collect();
        m.apply(&Incremental { epoch: 2, changes }).unwrap();
        m
    }

    fn pgp(s: &Step) -> Option<u32> {
        match s.changes.as_slice() {
            [Change::PoolUpdate(Pool { pgp_num, .. })] => Some(*pgp_num),
            [] => None,
            other => panic!("{other:?}"),
        }
    }

    /// Steps move at most 5% of PG copies (at least one PG), only when
    /// every PG is clean, never past pg_num, and not under norebalance.
    #[test]
    fn pgp_num_rises_in_bounded_steps_while_clean() {
        assert_eq!(step(&map_with(32, 32), 0), Step::default());
        // 128 PGs x 3: 5% is 19 copies, 6 PGs; past 32, each pgp_num
        // reseeds two PGs (ps and ps + 64), so three steps of one.
        assert_eq!(pgp(&step(&map_with(128, 32), 0)), Some(35));
        assert_eq!(reseeded(128, 32, 35), 6);
        for to in 32..=128 {
            let moved = (0..128u32)
                .filter(|&ps| ancestor(ps, 32) != ancestor(ps, to))
                .count() as u64;
            assert_eq!(reseeded(128, 32, to), moved, "to {to}");
        }
        assert_eq!(pgp(&step(&map_with(32, 8), 0)), Some(9));
        assert_eq!(pgp(&step(&map_with(128, 125), 0)), Some(128));
        let s = step(&map_with(128, 32), 3);
        assert_eq!(pgp(&s), None);
        assert!(s.note.contains("3 PGs"), "{}", s.note);
        let mut m = map_with(128, 32);
        m.apply(&Incremental {
            epoch: 3,
            changes: vec![Change::OsdFlag {
                flag: OsdFlag::NoRebalance,
                on: true,
            }],
        })
        .unwrap();
        let s = step(&m, 0);
        assert_eq!(pgp(&s), None);
        assert!(s.note.contains("norebalance"), "{}", s.note);
    }
}
