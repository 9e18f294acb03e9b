//! Balancing a pool's PGs across OSDs: distribution statistics, the
//! adaptive balance-parameter search for `linear` buckets (after the ceph-devel proposal of an optimized CRUSH with a "linear" bucket), and an
//! upmap balancer that computes `pg_upmap_items` overrides.
//!
//! Pure functions of (CRUSH map, pool, OSD states). The upmap balancer must
//! never place two replicas of a PG in one failure domain, and never map to
//! an OSD that is out, down, absent, outside the rule's root, or of zero
//! CRUSH weight.

use crate::compiled::CompiledMap;
use crate::error::{CrushError, Result};
use crate::map::{ItemId, Step};
use crate::mapper::{Workspace, BALANCE_ONE, ITEM_NONE};
use crate::placement::{map_pg_with_upmap, OsdStates, PoolPlacement};
use std::collections::{BTreeMap, BTreeSet};

/// Upmap overrides: PG seed -> `(from, to)` replacements.
pub type UpmapItems = BTreeMap<u32, Vec<(ItemId, ItemId)>>;

/// Most balance parameters the adaptive search may try.
pub const MAX_TRIALS: u32 = 4096;

/// The up set of every PG of the pool, with overrides applied.
pub fn pg_up_sets(
    crush: &CompiledMap,
    pool: &PoolPlacement,
    osds: &OsdStates,
    upmaps: &UpmapItems,
) -> Result<Vec<Vec<ItemId>>> {
    pool.validate()?;
    let mut ws = Workspace::new(crush);
    (0..pool.pg_num)
        .map(|ps| {
            let items = upmaps.get(&ps).map_or(&[][..], |v| &v[..]);
            map_pg_with_upmap(crush, pool, osds, ps, items, &mut ws).map(|m| m.up)
        })
        .collect()
}

/// The OSDs a rule can place data on, with their failure domain (the
/// ancestor of the rule's first choose type) and CRUSH weight.
#[derive(Clone, Debug)]
pub struct Eligible {
    /// OSD -> (failure-domain item, CRUSH weight in the rule's tree).
    pub osds: BTreeMap<ItemId, (ItemId, u32)>,
}

impl Eligible {
    /// Walk the rule's `take` subtrees; OSDs with zero CRUSH weight or
    /// that are out/down/absent are left out.
    pub fn for_rule(crush: &CompiledMap, rule: i32, osds: &OsdStates) -> Result<Eligible> {
        let src = crush.source();
        let r = src.rule(rule).ok_or(CrushError::UnknownRule(rule))?;
        let domain_type = r
            .steps
            .iter()
            .find_map(|s| match s {
                Step::Choose { type_id, .. } => Some(*type_id),
                _ => None,
            })
            .unwrap_or(0);
        let summaries = crush.bucket_summaries();
        let by_id: BTreeMap<ItemId, &crate::compiled::BucketSummary> =
            summaries.iter().map(|b| (b.id, b)).collect();
        let mut out = BTreeMap::new();
        let takes = crush
            .rules
            .get(&rule)
            .into_iter()
            .flatten()
            .filter_map(|s| match s {
                crate::compiled::CStep::Take(id) => Some(*id),
                _ => None,
            });
        for root in takes {
            // (item, weight in parent, current failure-domain ancestor)
            let mut stack: Vec<(ItemId, u32, Option<ItemId>)> = vec![(root, u32::MAX, None)];
            let mut guard = 0usize;
            while let Some((id, w, dom)) = stack.pop() {
                guard += 1;
                if guard > 10_000_000 {
                    return Err(CrushError::Invalid("hierarchy too large to walk".into()));
                }
                if id >= 0 {
                    let dom = if domain_type == 0 {
                        id
                    } else {
                        dom.unwrap_or(id)
                    };
                    let up_in = osds.weight.get(id as usize).is_some_and(|&x| x > 0)
                        && osds.up.get(id as usize).copied().unwrap_or(false)
                        && osds.exists.get(id as usize).copied().unwrap_or(false);
                    if w > 0 && up_in {
                        out.insert(id, (dom, w));
                    }
                    continue;
                }
                let Some(b) = by_id.get(&id) else { continue };
                let dom = if b.type_id == domain_type {
                    Some(id)
                } else {
                    dom
                };
                for &(child, cw) in &b.items {
                    stack.push((child, cw, dom));
                }
            }
        }
        Ok(Eligible { osds: out })
    }

    /// Each eligible OSD's share of `total` replicas, by CRUSH weight.
    pub fn targets(&self, total: u64) -> BTreeMap<ItemId, f64> {
        let sum: f64 = self.osds.values().map(|&(_, w)| f64::from(w)).sum();
        self.osds
            .iter()
            .map(|(&o, &(_, w))| {
                (
                    o,
                    if sum > 0.0 {
                        total as f64 * f64::from(w) / sum
                    } else {
                        0.0
                    },
                )
            })
            .collect()
    }
}

/// Distribution of PG replicas over the eligible OSDs.
#[derive(Clone, Debug, PartialEq)]
pub struct Distribution {
    pub per_osd: BTreeMap<ItemId, u64>,
    pub mean: f64,
    /// Population standard deviation of the per-OSD counts.
    pub stdev: f64,
    pub min: u64,
    pub max: u64,
    /// Largest |count - weighted target| over the eligible OSDs.
    pub max_deviation: f64,
}

/// Count replicas per eligible OSD (OSDs outside the rule count nowhere).
pub fn distribution(sets: &[Vec<ItemId>], eligible: &Eligible) -> Distribution {
    let mut per_osd: BTreeMap<ItemId, u64> = eligible.osds.keys().map(|&o| (o, 0)).collect();
    for s in sets {
        for &o in s {
            if let Some(c) = per_osd.get_mut(&o) {
                *c += 1;
            }
        }
    }
    let n = per_osd.len().max(1) as f64;
    let total: u64 = per_osd.values().sum();
    let mean = total as f64 / n;
    let var = per_osd
        .values()
        .map(|&c| (c as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    let targets = eligible.targets(total);
    let max_deviation = per_osd
        .iter()
        .map(|(o, &c)| (c as f64 - targets.get(o).copied().unwrap_or(0.0)).abs())
        .fold(0.0, f64::max);
    Distribution {
        min: per_osd.values().copied().min().unwrap_or(0),
        max: per_osd.values().copied().max().unwrap_or(0),
        per_osd,
        mean,
        stdev: var.sqrt(),
        max_deviation,
    }
}

/// Search the `linear` balance parameter that minimises the stdev of PGs
/// per OSD for this pool (the proposal's §2.3): tries `1 + k/64` for
/// `k in 0..trials` and keeps the best (ties: the smallest parameter).
/// Returns `(parameter, stdev)`.
pub fn adaptive_balance_param(
    crush: &CompiledMap,
    pool: &PoolPlacement,
    osds: &OsdStates,
    trials: u32,
) -> Result<(u32, f64)> {
    if trials == 0 || trials > MAX_TRIALS {
        return Err(CrushError::Placement(format!(
            "trials must be in 1..={MAX_TRIALS}"
        )));
    }
    let eligible = Eligible::for_rule(crush, pool.crush_rule, osds)?;
    let mut best = (BALANCE_ONE, f64::INFINITY);
    for k in 0..trials {
        let param = BALANCE_ONE + k * (BALANCE_ONE / 64);
        let p = PoolPlacement {
            balance_param: param,
            ..*pool
        };
        let sets = pg_up_sets(crush, &p, osds, &UpmapItems::new())?;
        let d = distribution(&sets, &eligible);
        if d.stdev < best.1 {
            best = (param, d.stdev);
        }
    }
    Ok(best)
}

/// Result of the upmap balancer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UpmapPlan {
    pub items: UpmapItems,
    /// Replica moves the plan makes (one per `(from, to)` pair).
    pub moves: usize,
}

/// Compute `pg_upmap_items` that bring every eligible OSD within
/// `max_deviation` PGs of its weighted target, moving one replica at a
/// time from the fullest OSD to the emptiest one that keeps the PG's
/// failure domains distinct. Stops when balanced, when no move improves
/// the balance, or after `max_moves`.
pub fn upmap_balance(
    crush: &CompiledMap,
    pool: &PoolPlacement,
    osds: &OsdStates,
    max_deviation: f64,
    max_moves: usize,
) -> Result<UpmapPlan> {
    upmap_balance_from(
        crush,
        pool,
        osds,
        max_deviation,
        max_moves,
        &UpmapItems::new(),
    )
}

/// [`upmap_balance`] starting from existing overrides (those that still
/// apply are kept), as a running cluster's balancer does after a change:
/// it only adds the moves the new state needs.
pub fn upmap_balance_from(
    crush: &CompiledMap,
    pool: &PoolPlacement,
    osds: &OsdStates,
    max_deviation: f64,
    max_moves: usize,
    existing: &UpmapItems,
) -> Result<UpmapPlan> {
    if !(max_deviation >= 0.0 && max_deviation.is_finite()) {
        return Err(CrushError::Placement(
            "max deviation must be a number >= 0".into(),
        ));
    }
    let eligible = Eligible::for_rule(crush, pool.crush_rule, osds)?;
    let original = pg_up_sets(crush, pool, osds, &UpmapItems::new())?;
    let mut sets = pg_up_sets(crush, pool, osds, existing)?;
    // Like Ceph's clean-up of stale upmaps: a PG whose overrides now land
    // on an unusable OSD or share a failure domain goes back to CRUSH.
    for (ps, set) in sets.iter_mut().enumerate() {
        if !existing.contains_key(&(ps as u32)) {
            continue;
        }
        let mut doms = BTreeSet::new();
        let ok = set.iter().all(|o| match eligible.osds.get(o) {
            Some(&(dom, _)) => doms.insert(dom),
            None => original[ps].contains(o),
        });
        if !ok {
            set.clone_from(&original[ps]);
        }
    }
    let mut counts: BTreeMap<ItemId, i64> = eligible.osds.keys().map(|&o| (o, 0)).collect();
    let mut pgs_on: BTreeMap<ItemId, BTreeSet<u32>> = BTreeMap::new();
    for (ps, s) in sets.iter().enumerate() {
        for &o in s {
            if let Some(c) = counts.get_mut(&o) {
                *c += 1;
                pgs_on.entry(o).or_default().insert(ps as u32);
            }
        }
    }
    let total: i64 = counts.values().sum();
    let targets = eligible.targets(total as u64);
    let dev = |counts: &BTreeMap<ItemId, i64>, o: ItemId| counts[&o] as f64 - targets[&o];
    let mut moves = 0usize;
    while moves < max_moves {
        let mut order: Vec<ItemId> = counts.keys().copied().collect();
        order.sort_by(|a, b| dev(&counts, *b).total_cmp(&dev(&counts, *a)).then(a.cmp(b)));
        let (Some(&hi), Some(&lo)) = (order.first(), order.last()) else {
            break;
        };
        if dev(&counts, hi) <= max_deviation && dev(&counts, lo) >= -max_deviation {
            break;
        }
        let mut applied = None;
        'search: for &src in &order {
            let ds = dev(&counts, src);
            for &dst in order.iter().rev() {
                let dd = dev(&counts, dst);
                // Only moves that strictly reduce the sum of squared
                // deviations: guarantees termination.
                if ds - dd <= 1.0 {
                    break;
                }
                let dst_dom = eligible.osds[&dst].0;
                for &ps in pgs_on.get(&src).into_iter().flatten() {
                    let set = &sets[ps as usize];
                    if set.contains(&dst) {
                        continue;
                    }
                    let clash = set.iter().any(|&o| {
                        o != src
                            && o != ITEM_NONE
                            && eligible.osds.get(&o).map(|e| e.0) == Some(dst_dom)
                    });
                    if !clash {
                        applied = Some((ps, src, dst));
                        break 'search;
                    }
                }
            }
        }
        let Some((ps, src, dst)) = applied else { break };
        let set = &mut sets[ps as usize];
        if let Some(slot) = set.iter_mut().find(|o| **o == src) {
            *slot = dst;
        }
        *counts.get_mut(&src).expect("src is eligible") -= 1;
        *counts.get_mut(&dst).expect("dst is eligible") += 1;
        pgs_on.entry(src).or_default().remove(&ps);
        pgs_on.entry(dst).or_default().insert(ps);
        moves += 1;
    }
    // Express the final sets as (from, to) pairs against plain CRUSH.
    let mut items = UpmapItems::new();
    for (ps, (orig, now)) in original.iter().zip(&sets).enumerate() {
        let pairs: Vec<(ItemId, ItemId)> = orig
            .iter()
            .zip(now)
            .filter(|(a, b)| a != b)
            .map(|(&a, &b)| (a, b))
            .collect();
        if !pairs.is_empty() {
            items.insert(ps as u32, pairs);
        }
    }
    Ok(UpmapPlan { items, moves })
}
