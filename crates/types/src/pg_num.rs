//! pgp_num following pg_num, and merges. `pool set NAME pg_num N` up
//! splits a pool's PGs in place: the new PGs keep their parents'
//! placement seeds, so they sit on their parents' OSDs and nothing moves.
//! Raising pgp_num gives them seeds of their own, and CRUSH moves them.
//! `pool set NAME pg_num N` down sets a merge target: pgp_num falls to
//! it, so each PG that merges away (a source) comes to sit where the PG it
//! merges into (its target) does, and then the merge goes as
//! [`loligo_types::osdmap::PgMerge`] tells. The leader moves pgp_num in
//! steps, as Ceph's manager does, each moving at most 5% of all PG copies
//! (`target_max_misplaced_ratio`), the next one only once every PG is
//! active+clean again. A pure function of the map and the PG reports; the
//! leader runs it at each tick (and the simulator, as its leader).
//!
//! It must never step while a PG is not active+clean, or while
//! `norebalance` or `nobackfill` holds data where it is, and never lower
//! pg_num before every PG that joins the merge reported ready under it.

use crate::osdmap::{OsdFlag, PgMerge};
use crate::{Change, OsdMap, PgId, PgStat, Pool};
use loligo_crush::placement::ancestor;
use std::collections::{BTreeMap, HashMap};

/// Most PG copies one step may move, as a share of all of them (Ceph's
/// `target_max_misplaced_ratio`): pgp_num steps here, and the monitors'
/// balancer's rounds.
pub const TARGET_MAX_MISPLACED_RATIO: f64 = 0.05;

/// One look at the map: the step to propose, if any, and what it says
/// (for `pg_num status` in words: empty when no pool is stepping).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Step {
    pub changes: Vec<Change>,
    pub note: String,
}

/// The step for `map`, whose PGs number `not_clean` that are not
/// active+clean by reports since the last step (unknown ones count);
/// `ready` holds the reports of acting primaries that say their PG is
/// ready to merge.
pub fn step(map: &OsdMap, not_clean: u64, ready: &HashMap<PgId, PgStat>) -> Step {
    // A merge whose PGs hold their writes first, then pgp_num steps, then
    // merges that may start holding.
    let merges = |holding: bool| {
        (map.pg_merges.iter())
            .filter(move |(_, m)| (m.ready_since > 0) == holding)
            .filter_map(|(id, m)| Some((map.pools.get(id)?, m)))
            .filter(|(p, m)| p.pgp_num == m.to)
    };
    if let Some((pool, m)) = merges(true).next() {
        return merge_step(map, pool, m, not_clean, ready);
    }
    let Some((pool, target)) = map.pools.values().find_map(|p| {
        let target = map.pg_merges.get(&p.id).map_or(p.pg_num, |m| m.to);
        (p.pgp_num != target).then_some((p, target))
    }) else {
        return match merges(false).next() {
            Some((pool, m)) => merge_step(map, pool, m, not_clean, ready),
            None => Step::default(),
        };
    };
    let waiting = |why: String| Step {
        changes: Vec::new(),
        note: format!(
            "pool '{}': pgp_num {} of {target}: {why}",
            pool.name, pool.pgp_num
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
    // The pgp_num nearest the target whose step reseeds at most `most`
    // PGs (at least one step): a step reseeds every PG whose seed folds
    // anew, more than the step's size once pg_num is past pgp_num's power
    // of two. (What a step reseeds only grows with its length: a binary
    // search.)
    let from = pool.pgp_num;
    let (mut near, mut far) = if target > from {
        (from + 1, target)
    } else {
        (from - 1, target)
    };
    while near != far {
        let mid = if far > near {
            near + (far - near).div_ceil(2)
        } else {
            near - (near - far).div_ceil(2)
        };
        if reseeded(pool.pg_num, from, mid) <= most {
            near = mid;
        } else if far > near {
            far = mid - 1;
        } else {
            far = mid + 1;
        }
    }
    let to = near;
    let mut p = pool.clone();
    p.pgp_num = to;
    Step {
        note: format!("pool '{}': pgp_num {from} -> {to} of {target}", pool.name),
        changes: vec![Change::PoolUpdate(p)],
    }
}

/// How many of `pg_num` PGs a change of pgp_num from `from` to `to`
/// gives another placement seed.
fn reseeded(pg_num: u32, from: u32, to: u32) -> u64 {
    (0..pg_num)
        .filter(|&ps| ancestor(ps, from) != ancestor(ps, to))
        .count() as u64
}

/// The merge's next step once pgp_num is at its target: the sources'
/// overrides made their targets' (so each sits where its target does),
/// then the PGs asked to get ready, then pg_num lowered once each one
/// that joins reported ready, under the same acting set as its target.
fn merge_step(
    map: &OsdMap,
    pool: &Pool,
    m: &PgMerge,
    not_clean: u64,
    ready: &HashMap<PgId, PgStat>,
) -> Step {
    let from = pool.pg_num;
    let note = |what: String| {
        format!(
            "pool '{}': merging {from} -> {} PGs: {what}",
            pool.name, m.to
        )
    };
    let waiting = |why: String| Step {
        changes: Vec::new(),
        note: note(why),
    };
    let pg = |ps| PgId { pool: pool.id, ps };
    if m.ready_since == 0 {
        if not_clean > 0 {
            return waiting(format!("waiting for {not_clean} PGs to be active+clean"));
        }
        let items = |ps| map.pg_upmap_items.get(&pg(ps)).cloned().unwrap_or_default();
        let align: Vec<Change> = (m.to..from)
            .filter(|&ps| items(ps) != items(ancestor(ps, m.to)))
            .map(|ps| Change::PgUpmapItems {
                pg: pg(ps),
                items: items(ancestor(ps, m.to)),
            })
            .collect();
        if !align.is_empty() {
            return Step {
                note: note(format!(
                    "{} PGs given their targets' upmap items",
                    align.len()
                )),
                changes: align,
            };
        }
        // No write is held until every source sits where its target does,
        // acting set and all: a source kept elsewhere by a pg_temp (an
        // erasure-coded one that cannot move its shards without a spare
        // OSD, clean in place) never reports ready beside its target, and
        // its writes would wait for good.
        let apart = match sources_apart(map, pool, m) {
            Ok(a) => a,
            Err(e) => return waiting(format!("cannot place its PGs: {e}")),
        };
        if let Some(&ps) = apart.first() {
            return waiting(format!(
                "{} PGs are not yet on their targets' OSDs (pg {})",
                apart.len(),
                pg(ps)
            ));
        }
        return Step {
            note: note("its PGs hold writes until they merge".into()),
            changes: vec![Change::PgMergeReady { pool: pool.id }],
        };
    }
    let mut versions = BTreeMap::new();
    let mut short = Vec::new();
    for ps in (0..from).filter(|&ps| m.joins(ps, from)) {
        let target = ready.get(&pg(ancestor(ps, m.to)));
        let ok = ready.get(&pg(ps)).filter(|st| {
            let record = map.write_sets.get(&st.pg);
            st.epoch >= m.ready_since
                && record.is_some_and(|r| r.interval >= m.ready_since)
                && target.is_some_and(|t| t.acting == st.acting)
        });
        match ok.and_then(|st| st.merge_ready) {
            Some(v) => {
                versions.insert(ps, v);
            }
            None => short.push(ps),
        }
    }
    if !short.is_empty() {
        let first: Vec<String> = short.iter().take(4).map(|&ps| pg(ps).to_string()).collect();
        return waiting(format!(
            "waiting for {} of its PGs to be ready ({}{})",
            short.len(),
            first.join(", "),
            if short.len() > 4 { ", ..." } else { "" }
        ));
    }
    Step {
        note: note("merged".into()),
        changes: vec![Change::PgMerged {
            pool: pool.id,
            versions,
        }],
    }
}

/// The seeds of merge `m`'s sources whose acting sets (pg_temp and all)
/// are not their targets'.
fn sources_apart(map: &OsdMap, pool: &Pool, m: &PgMerge) -> Result<Vec<u32>, String> {
    let mut placer = map.placer().map_err(|e| e.to_string())?;
    let mut acting = |ps: u32| {
        placer
            .map_pg(PgId { pool: pool.id, ps })
            .map(|p| p.acting)
            .map_err(|e| e.to_string())
    };
    let mut apart = Vec::new();
    for ps in (m.to..pool.pg_num).filter(|&ps| m.joins(ps, pool.pg_num)) {
        if acting(ps)? != acting(ancestor(ps, m.to))? {
            apart.push(ps);
        }
    }
    Ok(apart)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Version;
    use crate::{Incremental, PgState, WriteSetRecord};

    fn map_with(pg_num: u32, pgp_num: u32) -> OsdMap {
        let mut m = OsdMap::test_cluster(4, pg_num);
        if pgp_num != pg_num {
            let mut p = m.pool_by_name("p").unwrap().clone();
            p.pgp_num = pgp_num;
            apply(&mut m, vec![Change::PoolUpdate(p)]);
        }
        m
    }

    fn step_(m: &OsdMap, not_clean: u64) -> Step {
        step(m, not_clean, &HashMap::new())
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
        assert_eq!(step_(&map_with(32, 32), 0), Step::default());
        // 128 PGs x 3: 5% is 19 copies, 6 PGs; past 32, each pgp_num
        // reseeds two PGs (ps and ps + 64), so three steps of one.
        assert_eq!(pgp(&step_(&map_with(128, 32), 0)), Some(35));
        assert_eq!(reseeded(128, 32, 35), 6);
        for to in 32..=128 {
            let moved = (0..128u32)
                .filter(|&ps| ancestor(ps, 32) != ancestor(ps, to))
                .count() as u64;
            assert_eq!(reseeded(128, 32, to), moved, "to {to}");
        }
        assert_eq!(pgp(&step_(&map_with(32, 8), 0)), Some(9));
        assert_eq!(pgp(&step_(&map_with(128, 125), 0)), Some(128));
        let s = step_(&map_with(128, 32), 3);
        assert_eq!(pgp(&s), None);
        assert!(s.note.contains("3 PGs"), "{}", s.note);
        let mut m = map_with(128, 32);
        apply(
            &mut m,
            vec![Change::OsdFlag {
                flag: OsdFlag::NoRebalance,
                on: true,
            }],
        );
        let s = step_(&m, 0);
        assert_eq!(pgp(&s), None);
        assert!(s.note.contains("norebalance"), "{}", s.note);
    }

    fn apply(m: &mut OsdMap, changes: Vec<Change>) {
        let epoch = m.epoch + 1;
        m.apply(&Incremental { epoch, changes }).unwrap();
    }

    /// A ready report of PG `ps` under `m`, acting on `acting`.
    fn ready(m: &OsdMap, ps: u32, acting: Vec<i32>) -> PgStat {
        let pg = PgId { pool: 1, ps };
        PgStat {
            merge_ready: Some(Version {
                epoch: 2,
                v: u64::from(ps) + 10,
            }),
            ..PgStat::new(pg, m.epoch, PgState::ACTIVE | PgState::CLEAN, acting)
        }
    }

    /// A merge 8 -> 4: pgp_num falls in bounded steps while clean; then
    /// the sources take their targets' upmap items; then the PGs are
    /// asked to get ready; pg_num falls only once every joining PG
    /// reported ready since then, under its target's acting set, with a
    /// write set recorded since then.
    #[test]
    fn a_merge_steps_pgp_num_down_then_waits_for_every_pg_ready() {
        let mut m = map_with(8, 8);
        apply(&mut m, vec![Change::PgMergeTarget { pool: 1, to: 4 }]);
        let none = HashMap::new();
        assert_eq!(pgp(&step(&m, 2, &none)), None);
        let mut steps = 0;
        while m.pools[&1].pgp_num != 4 {
            let s = step(&m, 0, &none);
            let to = pgp(&s).unwrap();
            let from = m.pools[&1].pgp_num;
            assert!(to < from && to >= 4, "{from} -> {to}");
            // (8 PGs x 3 copies: 5% is one PG a step.)
            assert!(reseeded(8, from, to) <= 1 || from - to == 1);
            apply(&mut m, s.changes);
            steps += 1;
        }
        assert!(steps >= 2, "{steps} steps");
        // A source with an override of its own gets its target's.
        apply(
            &mut m,
            vec![Change::PgUpmapItems {
                pg: PgId { pool: 1, ps: 5 },
                items: vec![(0, 3)],
            }],
        );
        let s = step(&m, 0, &none);
        assert_eq!(
            s.changes,
            vec![Change::PgUpmapItems {
                pg: PgId { pool: 1, ps: 5 },
                items: Vec::new(),
            }]
        );
        apply(&mut m, s.changes);
        assert!(step(&m, 1, &none).changes.is_empty());
        // A source held elsewhere by a pg_temp (clean there, as an EC PG
        // that cannot move its shards without a spare OSD is): no write
        // is held until it sits on its target's OSDs.
        let target = m.placer().unwrap().map_pg(PgId { pool: 1, ps: 1 }).unwrap();
        let mut elsewhere = target.acting.clone();
        elsewhere.reverse();
        let temp = |osds: Vec<i32>| Change::PgTemp {
            pg: PgId { pool: 1, ps: 5 },
            osds,
        };
        apply(&mut m, vec![temp(elsewhere)]);
        let s = step(&m, 0, &none);
        assert!(s.changes.is_empty(), "{s:?}");
        assert!(
            s.note.contains("not yet on their targets' OSDs (pg 1.5)"),
            "{}",
            s.note
        );
        apply(&mut m, vec![temp(Vec::new())]);
        let s = step(&m, 0, &none);
        assert_eq!(s.changes, vec![Change::PgMergeReady { pool: 1 }]);
        apply(&mut m, s.changes);
        let since = m.pg_merges[&1].ready_since;
        // Reports: all ready, but no write set recorded since.
        let acting = vec![0, 1, 2];
        let mut reports: HashMap<PgId, PgStat> = (0..8)
            .map(|ps| (PgId { pool: 1, ps }, ready(&m, ps, acting.clone())))
            .collect();
        let s = step(&m, 0, &reports);
        assert!(
            s.changes.is_empty() && s.note.contains("8 of its PGs"),
            "{}",
            s.note
        );
        let records = (0..8)
            .map(|ps| Change::RecordWriteSet {
                pg: PgId { pool: 1, ps },
                record: WriteSetRecord {
                    interval: since,
                    osds: acting.clone(),
                },
            })
            .collect();
        apply(&mut m, records);
        // A source under another acting set than its target's waits.
        reports.get_mut(&PgId { pool: 1, ps: 6 }).unwrap().acting = vec![0, 1, 3];
        let s = step(&m, 0, &reports);
        assert!(
            s.note.contains("1 of its PGs to be ready (1.6)"),
            "{}",
            s.note
        );
        reports.insert(PgId { pool: 1, ps: 6 }, ready(&m, 6, acting.clone()));
        let s = step(&m, 0, &reports);
        let [Change::PgMerged { pool: 1, versions }] = s.changes.as_slice() else {
            panic!("{s:?}");
        };
        assert_eq!(versions.len(), 8);
        assert_eq!(versions[&7], Version { epoch: 2, v: 17 });
        apply(&mut m, s.changes);
        assert_eq!(m.pools[&1].pg_num, 4);
        assert_eq!(step(&m, 0, &none), Step::default());
    }
}
