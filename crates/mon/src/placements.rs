//! The leader's PG placements, carried from map to map: `status`,
//! `health`, `df`, `pg ls`, `ok-to-stop` and the tick's health check each
//! look at every PG, and mapping each through CRUSH again made every one
//! of them cost a full CRUSH pass (333,333 PGs at 10,000 OSDs: most of
//! the monitor's time). [`PgMappings`] keeps every PG's CRUSH step and
//! runs CRUSH again only where a new map can move a PG.
//!
//! It must never answer a mapping other than [`OsdMap::placer`]'s on the
//! same map (`PgMappings` holds to that, and a test here checks it after
//! a change).

use loligo_types::mapping::PgMappings;
use loligo_types::{LazyPlacer, MapError, MapPg, OsdMap, OsdStates, PgId, PgMapping};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The mappings of the last map asked about.
#[derive(Default)]
pub struct Placements(Mutex<Option<PgMappings>>);

impl std::fmt::Debug for Placements {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Placements")
    }
}

/// A placer over the carried mappings, for one map (holds them locked:
/// do not ask `Placements` for another while it lives).
pub struct CachedPlacer<'a> {
    mappings: MutexGuard<'a, Option<PgMappings>>,
    map: &'a OsdMap,
    states: OsdStates,
}

impl Placements {
    /// Drop the carried mappings (built again when next asked for); not
    /// while another holds them (asked again later).
    pub fn clear(&self) {
        if let Ok(mut g) = self.0.try_lock() {
            *g = None;
        }
    }

    /// A placer for `map`, the carried mappings brought up to it first.
    pub fn placer<'a>(&'a self, map: &'a OsdMap) -> Result<CachedPlacer<'a>, MapError> {
        let mut mappings = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match mappings.as_mut() {
            Some(m) => {
                m.advance(map)?;
            }
            None => *mappings = Some(PgMappings::new(map)?),
        }
        Ok(CachedPlacer {
            mappings,
            map,
            states: map.osd_states(),
        })
    }

    /// A placer for a few of `map`'s PGs (a request's): the carried
    /// mappings when they are free, built, and their CRUSH steps hold for
    /// `map` (the same CRUSH map, OSDs, reweights and pool placements: the
    /// rest of a mapping is made from `map` when asked); otherwise CRUSH
    /// for each PG asked. It never waits for the mappings, never moves
    /// them (no CRUSH pass over a pool, at 10,000 OSDs seconds), and never
    /// maps a PG through CRUSH that they carry (at 10,000 OSDs, 40 us a
    /// PG). The choice is made when the first PG is asked: a request that
    /// asks none (a batch of boots) costs nothing.
    pub fn few<'a>(&'a self, map: &'a OsdMap) -> FewPlacer<'a> {
        FewPlacer {
            source: Some(self),
            map,
            chosen: None,
        }
    }
}

/// What [`Placements::few`] gives: a placer that picks, on the first PG
/// asked, the carried mappings or CRUSH. Having picked the carried ones,
/// it holds them locked until it is dropped (do not ask `Placements` for
/// a placer meanwhile).
pub struct FewPlacer<'a> {
    source: Option<&'a Placements>,
    map: &'a OsdMap,
    chosen: Option<Chosen<'a>>,
}

enum Chosen<'a> {
    /// The carried mappings.
    Carried(CachedPlacer<'a>),
    /// CRUSH, compiled on first use.
    Fresh(Box<LazyPlacer<'a>>),
}

impl<'a> FewPlacer<'a> {
    /// A placer that maps each PG asked through CRUSH (no carried
    /// mappings to look at).
    pub fn fresh(map: &'a OsdMap) -> Self {
        FewPlacer {
            source: None,
            map,
            chosen: None,
        }
    }

    /// Whether the PGs asked are (or will be) answered from the carried
    /// mappings; makes the choice if no PG was asked yet.
    pub fn carried(&mut self) -> bool {
        matches!(self.choose(), Chosen::Carried(_))
    }

    fn choose(&mut self) -> &mut Chosen<'a> {
        let (source, map) = (self.source, self.map);
        self.chosen.get_or_insert_with(|| {
            let states = map.osd_states();
            let carried = source
                .and_then(|p| p.0.try_lock().ok())
                .filter(|g| g.as_ref().is_some_and(|m| m.crush_steps_hold(map, &states)));
            match carried {
                Some(mappings) => Chosen::Carried(CachedPlacer {
                    mappings,
                    map,
                    states,
                }),
                None => Chosen::Fresh(Box::new(LazyPlacer::new(map))),
            }
        })
    }
}

impl MapPg for FewPlacer<'_> {
    fn map_pg(&mut self, pg: PgId) -> Result<PgMapping, MapError> {
        match self.choose() {
            Chosen::Carried(p) => p.map_pg(pg),
            Chosen::Fresh(p) => p.map_pg(pg),
        }
    }
}

impl MapPg for CachedPlacer<'_> {
    /// PG `pg`'s mapping, as [`loligo_types::Placer::map_pg`] gives it.
    fn map_pg(&mut self, pg: PgId) -> Result<PgMapping, MapError> {
        self.map.pool_of(pg)?;
        self.mappings
            .as_ref()
            .and_then(|m| m.mapping_in(self.map, &self.states, pg))
            .ok_or_else(|| MapError::Invalid(format!("pg {pg} has no carried mapping")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asked again after each kind of change (an OSD down, a pool made,
    /// pg_num raised, an upmap item, a pg_temp, a reweight, a pool
    /// removed), it answers what a fresh placer does for every PG.
    #[test]
    fn carried_mappings_answer_as_a_fresh_placer() {
        let mut map = OsdMap::test_cluster(6, 32);
        let p = Placements::default();
        let check = |p: &Placements, map: &OsdMap, what: &str| {
            let mut fresh = map.placer().unwrap();
            let mut ours = p.placer(map).unwrap();
            for pool in map.pools.values() {
                for ps in 0..pool.pg_num {
                    let pg = PgId { pool: pool.id, ps };
                    let want = fresh.map_pg(pg).unwrap();
                    assert_eq!(ours.map_pg(pg).unwrap(), want, "{what}: {pg}");
                }
                let past = PgId {
                    pool: pool.id,
                    ps: pool.pg_num,
                };
                assert!(ours.map_pg(past).is_err(), "{what}");
            }
        };
        check(&p, &map, "first");
        type Change<'a> = (&'a str, &'a dyn Fn(&mut OsdMap));
        let changes: [Change; 7] = [
            ("osd down", &|m| m.osds.get_mut(&2).unwrap().up = false),
            ("pool made", &|m| {
                let mut pool = m.pools[&1].clone();
                pool.id = 2;
                pool.pg_num = 16;
                pool.pgp_num = 16;
                m.pools.insert(2, pool);
            }),
            ("pg_num raised", &|m| {
                let pool = m.pools.get_mut(&1).unwrap();
                pool.pg_num = 48;
                pool.pgp_num = 48;
            }),
            ("upmap", &|m| {
                let pg = PgId { pool: 1, ps: 3 };
                let from = m.placer().unwrap().map_pg(pg).unwrap().up[0];
                let to = (0..6).find(|o| *o != from).unwrap();
                m.pg_upmap_items.insert(pg, vec![(from, to)]);
            }),
            ("pg_temp", &|m| {
                m.pg_temp.insert(PgId { pool: 2, ps: 5 }, vec![0, 1, 3]);
            }),
            ("reweight", &|m| m.osds.get_mut(&4).unwrap().weight = 0x8000),
            ("pool removed", &|m| {
                m.pools.remove(&2);
            }),
        ];
        for (what, change) in changes {
            map.epoch += 1;
            change(&mut map);
            check(&p, &map, what);
        }
    }

    /// A request's few PGs are mapped from the carried mappings when they
    /// are built, free, and CRUSH's inputs are unchanged; otherwise by
    /// CRUSH, without building the mappings or waiting for them. Either
    /// way the answer is a fresh placer's.
    #[test]
    fn a_few_pgs_are_mapped_from_carried_mappings_only_when_cheap() {
        let mut map = OsdMap::test_cluster(6, 32);
        let p = Placements::default();
        let pg = PgId { pool: 1, ps: 7 };
        let same_as_fresh = |placer: &mut FewPlacer, map: &OsdMap| {
            let want = map.placer().unwrap().map_pg(pg).unwrap();
            assert_eq!(placer.map_pg(pg).unwrap(), want);
        };
        // Not built: CRUSH, and nothing is built.
        let mut few = p.few(&map);
        assert!(!few.carried());
        same_as_fresh(&mut few, &map);
        drop(few);
        assert!(p.0.lock().unwrap().is_none(), "few() never builds");
        drop(p.placer(&map).unwrap());
        // Built; an OSD down since: carried (its CRUSH steps hold), the
        // rest of the mapping made from the new map.
        map.epoch += 1;
        map.osds.get_mut(&2).unwrap().up = false;
        let mut few = p.few(&map);
        assert!(p.0.try_lock().is_ok(), "nothing taken before a PG is asked");
        assert!(few.carried());
        same_as_fresh(&mut few, &map);
        // Held by another (a report looking at every PG): CRUSH.
        let mut other = p.few(&map);
        assert!(!other.carried());
        drop((few, other));
        // CRUSH's inputs changed (a reweight): CRUSH, the mappings left
        // for a caller that needs every PG.
        map.epoch += 1;
        map.osds.get_mut(&4).unwrap().weight = 0x8000;
        let mut few = p.few(&map);
        assert!(!few.carried());
        same_as_fresh(&mut few, &map);
        drop(few);
        // A pool's placement changed (pg_num raised): CRUSH, the carried
        // mappings not moved (a pass over the pool is not a request's).
        map.osds.get_mut(&4).unwrap().weight = loligo_types::osdmap::WEIGHT_IN;
        drop(p.placer(&map).unwrap());
        map.epoch += 1;
        let pool = map.pools.get_mut(&1).unwrap();
        pool.pg_num = 48;
        pool.pgp_num = 48;
        let mut few = p.few(&map);
        assert!(!few.carried());
        same_as_fresh(&mut few, &map);
        drop(few);
        // An older map than the carried one's (a request's map while a
        // report moved them on): carried while the steps hold.
        let mut older = map.clone();
        older.epoch -= 1;
        older.osds.get_mut(&2).unwrap().up = true;
        drop(p.placer(&map).unwrap());
        let mut few = p.few(&older);
        assert!(few.carried());
        same_as_fresh(&mut few, &older);
    }
}
