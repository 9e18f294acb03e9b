//! What one map says to one PG: its place in the map as the PG's
//! `Input::Map`, and from which epoch an OSD has seen every map (an
//! interval that spans maps it never saw must end). The daemon, the
//! simulator and the scale bench build a PG's map input here, so a PG
//! sees the same thing under each.
//!
//! It must never do I/O.

use super::{Holds, Input};
use loligo_crush::placement::PgMapping;
use loligo_ec::stripe::Striper;
use loligo_types::osdmap::OsdFlag;
use loligo_types::{Epoch, Fullness, OsdMap, PgId, Pool};
use std::sync::Arc;

/// PG `pg`'s place in `map` (`pm`), as its task's input (also what the
/// scale bench's simulated OSDs feed their PGs).
pub fn map_input(
    map: &OsdMap,
    pool: &Pool,
    pg: PgId,
    pm: &PgMapping,
    striper: Option<Arc<Striper>>,
    seen_since: Epoch,
    now_ms: u64,
) -> Input {
    let record = map.write_sets.get(&pg).cloned();
    let record_up = record
        .iter()
        .flat_map(|r| r.osds.iter().copied())
        .filter(|&o| map.is_up(o))
        .collect();
    Input::Map {
        epoch: map.epoch,
        up: pm.up.clone(),
        acting: pm.acting.clone(),
        // The epoch this acting set has held from without a break, as far
        // as this OSD can tell: its members' restarts, and the first
        // epoch of the maps it has seen without a gap (an A -> B -> A
        // change in epochs it never saw must end the interval too).
        acting_up_from: pm
            .acting
            .iter()
            .filter_map(|o| map.osds.get(o).map(|i| i.up_from))
            .max()
            .unwrap_or(0)
            .max(seen_since),
        primary: pm.acting_primary,
        pool: pool.clone(),
        record,
        record_up,
        toofull: pm
            .up
            .iter()
            .chain(&pm.acting)
            .copied()
            .filter(|o| {
                map.osds
                    .get(o)
                    .is_some_and(|i| i.fullness >= Fullness::BackfillFull)
            })
            .collect(),
        holds: Holds {
            recovery: map.flags.contains(&OsdFlag::NoRecover),
            backfill: map.flags.contains(&OsdFlag::NoBackfill),
            rebalance: map.flags.contains(&OsdFlag::NoRebalance),
            merge: (map.pg_merges.get(&pg.pool))
                .is_some_and(|m| m.ready_since > 0 && m.joins(pg.ps, pool.pg_num)),
        },
        spares: match striper.is_some() {
            true => spares(map, pg, pm),
            false => Vec::new(),
        },
        striper,
        primary_temp: map.primary_temp.get(&pg).copied(),
        unfound_lost: map.unfound_lost.get(&pg).copied().unwrap_or(0),
        now_ms,
    }
}

/// OSDs an erasure-coded PG's pg_temp may take for a while: up, in, with
/// room to be backfilled onto, and not in CRUSH's set. A pg_temp holds at
/// most as many as CRUSH's set, so one more than that always leaves one
/// free; the search starts at an OSD that depends on the PG, so PGs do
/// not all lean on the lowest ids.
fn spares(map: &OsdMap, pg: PgId, pm: &PgMapping) -> Vec<i32> {
    let start = i32::try_from(pg.ps).unwrap_or(0) % map.osds.len().max(1) as i32;
    let fit = |o: &&loligo_types::OsdInfo| {
        o.up && o.is_in() && o.fullness < Fullness::BackfillFull && !pm.up.contains(&o.id)
    };
    (map.osds.range(start..).chain(map.osds.range(..start)))
        .map(|(_, o)| o)
        .filter(fit)
        .map(|o| o.id)
        .take(pm.up.len() + 1)
        .collect()
}

/// The first epoch from which an OSD has seen every map, after a map of
/// epoch `new` when it held mappings of epoch `carried` and had seen every
/// map from `since`. A map that jumps past the next epoch (the monitors
/// had trimmed those between, or the OSD starts) leaves unknown what
/// changed in between: a PG's acting set may have gone A -> B -> A, so
/// every interval is taken to start at `new`. (Ceph computes past
/// intervals from every epoch; an OSD that lacks some cannot.)
pub fn seen_since(carried: Option<Epoch>, since: Epoch, new: Epoch) -> Epoch {
    match carried {
        Some(c) if new <= c + 1 => since,
        _ => new,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_epochs_end_every_interval() {
        // The first map: the history starts there.
        assert_eq!(seen_since(None, 0, 7), 7);
        // Every next epoch (or the same again): it goes on.
        assert_eq!(seen_since(Some(7), 7, 8), 7);
        assert_eq!(seen_since(Some(8), 7, 8), 7);
        // A jump (epochs 9 and 10 never seen): it starts again, so a
        // PG whose set went A -> B -> A in between peers anew.
        assert_eq!(seen_since(Some(8), 7, 11), 11);
        // An input built then carries the new floor.
        let mut m = loligo_types::OsdMap::new("f", "osd").unwrap();
        let boot = |id| loligo_types::Change::OsdBoot {
            id,
            addr: format!("127.0.0.1:{}", 6800 + id),
            host: format!("h{id}"),
            crush_weight: 0x10000,
        };
        let pool = m.replicated_pool("p", 8, 3, 2);
        m.apply(&loligo_types::Incremental {
            epoch: 2,
            changes: (0..3)
                .map(boot)
                .chain([loligo_types::Change::PoolCreate(pool)])
                .collect(),
        })
        .unwrap();
        let pool = m.pool_by_name("p").unwrap().clone();
        let pg = loligo_types::PgId {
            pool: pool.id,
            ps: 0,
        };
        let pm = m.placer().unwrap().map_pg(pg).unwrap();
        let up_from = |input| match input {
            Input::Map { acting_up_from, .. } => acting_up_from,
            _ => unreachable!(),
        };
        assert_eq!(up_from(map_input(&m, &pool, pg, &pm, None, 0, 0)), 2);
        assert_eq!(up_from(map_input(&m, &pool, pg, &pm, None, 11, 0)), 11);
    }

    /// An erasure-coded PG's input names spares: OSDs up, in and with room
    /// that CRUSH's set does not name, at most one more than the set; a
    /// replicated PG's names none.
    #[test]
    fn erasure_coded_inputs_name_spares_outside_crushs_set() {
        use loligo_types::{Change, Incremental};
        let mut m = loligo_types::OsdMap::new("f", "osd").unwrap();
        let boot = |id| Change::OsdBoot {
            id,
            addr: format!("127.0.0.1:{}", 6800 + id),
            host: format!("h{id}"),
            crush_weight: 0x10000,
        };
        let pool = m.replicated_pool("p", 8, 3, 2);
        let changes = (0..6).map(boot).chain([Change::PoolCreate(pool)]);
        m.apply(&Incremental {
            epoch: 2,
            changes: changes.collect(),
        })
        .unwrap();
        let full = Change::OsdFullness {
            id: 5,
            fullness: Fullness::BackfillFull,
        };
        let out = Change::OsdOut { id: 4 };
        m.apply(&Incremental {
            epoch: 3,
            changes: vec![full, out, Change::OsdDown { id: 3 }],
        })
        .unwrap();
        let pool = m.pool_by_name("p").unwrap().clone();
        let striper = loligo_types::EcProfile {
            name: "rs21".into(),
            plugin: loligo_types::EcPlugin::ReedSolomon,
            k: 2,
            m: 1,
            s: 1,
            l: 0,
            optimal: false,
            alignment: 64,
            stripe_unit: 0,
        }
        .striper()
        .unwrap();
        let spares_of = |input| match input {
            Input::Map { spares, up, .. } => (spares, up),
            _ => unreachable!(),
        };
        for ps in 0..8 {
            let pg = PgId { pool: pool.id, ps };
            let pm = m.placer().unwrap().map_pg(pg).unwrap();
            let st = Some(Arc::new(striper.clone()));
            let (spares, up) = spares_of(map_input(&m, &pool, pg, &pm, st, 0, 0));
            // Of six OSDs: one down, one out, one too full; three up and
            // in, of which CRUSH's set takes what it names.
            assert!(spares.len() <= up.len() + 1, "{spares:?}");
            for o in &spares {
                assert!(
                    !up.contains(o) && ![3, 4, 5].contains(o),
                    "{o} in {spares:?}"
                );
            }
            let free = (0..3).filter(|o| !up.contains(o)).count();
            assert_eq!(spares.len(), free, "pg {pg}: {spares:?} against up {up:?}");
            let (none, _) = spares_of(map_input(&m, &pool, pg, &pm, None, 0, 0));
            assert!(none.is_empty());
        }
    }
}
