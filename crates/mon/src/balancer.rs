//! The monitors' upmap balancer (Ceph's balancer in `upmap` mode): while
//! it is on and every PG is active+clean, the leader adds
//! `pg_upmap_items` that bring each OSD within one PG of its weighted
//! target (`loligo_crush::balance`), a few replica moves at a time so
//! that what is misplaced stays under 5% of all PG copies (Ceph's
//! `target_max_misplaced_ratio`). A pure function of the map and the PG
//! states; the leader runs it every few seconds.
//!
//! It must never propose while any PG is not active+clean (unknown,
//! degraded, recovering or still moving from its last run).

use loligo_crush::balance::{upmap_balance_from, UpmapItems};
use loligo_crush::CompiledMap;
use loligo_types::{Change, OsdMap, PgId};
use std::time::Duration;

/// Most PGs an OSD may be from its weighted target once balanced.
pub const MAX_DEVIATION: f64 = 1.0;
pub use loligo_types::pg_num::TARGET_MAX_MISPLACED_RATIO;
/// How often the leader runs it.
pub const EVERY: Duration = Duration::from_secs(5);

/// What one run decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Run {
    /// The overrides to propose (an empty item list removes a PG's).
    pub changes: Vec<Change>,
    /// Replica moves they make.
    pub moves: usize,
    /// What happened, in words (`balancer status`).
    pub note: String,
}

/// One run on `map`, whose PGs number `not_clean` that are not
/// active+clean (by their primaries' reports; unknown ones count).
pub fn run(map: &OsdMap, not_clean: u64) -> Result<Run, String> {
    if !map.balancer {
        return Ok(Run {
            note: "off".into(),
            ..Run::default()
        });
    }
    if not_clean > 0 {
        return Ok(Run {
            note: format!("{not_clean} PGs are not active+clean: waiting"),
            ..Run::default()
        });
    }
    let copies: u64 = (map.pools.values())
        .map(|p| u64::from(p.pg_num) * u64::from(p.size))
        .sum();
    let budget = ((copies as f64 * TARGET_MAX_MISPLACED_RATIO) as usize).max(1);
    let crush = CompiledMap::compile(&map.crush).map_err(|e| e.to_string())?;
    let states = map.osd_states();
    let mut out = Run::default();
    // (Not a pool whose PGs split or merge: pgp_num steps move its PGs,
    // and a merge's sources must sit where their targets do.)
    let settled =
        |p: &&loligo_types::Pool| p.pgp_num == p.pg_num && !map.pg_merges.contains_key(&p.id);
    for pool in map.pools.values().filter(settled) {
        let left = budget.saturating_sub(out.moves);
        if left == 0 {
            break;
        }
        let existing: UpmapItems = (map.pg_upmap_items.iter())
            .filter(|(pg, _)| pg.pool == pool.id)
            .map(|(pg, items)| (pg.ps, items.clone()))
            .collect();
        let plan = upmap_balance_from(
            &crush,
            &pool.placement(),
            &states,
            MAX_DEVIATION,
            left,
            &existing,
        )
        .map_err(|e| format!("pool '{}': {e}", pool.name))?;
        out.moves += plan.moves;
        for ps in existing.keys().chain(plan.items.keys()) {
            let (old, new) = (existing.get(ps), plan.items.get(ps));
            if old != new && !out.changes.iter().any(|c| is_for(c, pool.id, *ps)) {
                out.changes.push(Change::PgUpmapItems {
                    pg: PgId {
                        pool: pool.id,
                        ps: *ps,
                    },
                    items: new.cloned().unwrap_or_default(),
                });
            }
        }
    }
    out.note = match out.changes.len() {
        0 => {
            format!("balanced: every OSD within {MAX_DEVIATION} PG of its target, or no move helps")
        }
        n => format!(
            "{n} PG overrides changed, {} replica moves (at most {budget})",
            out.moves
        ),
    };
    Ok(out)
}

fn is_for(c: &Change, pool: u64, ps: u32) -> bool {
    matches!(c, Change::PgUpmapItems { pg, .. } if pg.pool == pool && pg.ps == ps)
}
