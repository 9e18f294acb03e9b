//! Merging a pool's PGs, as the map records it (Ceph's PG merge, in
//! the way of `pg_num_pending` and `last_pg_merge_meta`). A merge to `to`
//! PGs folds every PG whose seed is `to` or more (a *source*) into its
//! ancestor below `to` (its *target*), the split run backwards. It goes
//! in three changes, each the leader's once the last one's work is done:
//!
//! 1. [`Change::PgMergeTarget`]: the operator's target. The leader steps
//!    pgp_num down to it, so each source comes to sit on its target's
//!    OSDs (their placement seeds become the same).
//! 2. [`Change::PgMergeReady`]: the sources and targets hold new writes
//!    from this epoch on (their interval ends, so none is half done), peer
//!    and report their versions once clean.
//! 3. [`Change::PgMerged`]: pg_num falls to the target. The sources'
//!    per-PG entries go; each joining PG's version at readiness is kept
//!    ([`PgMerged`]), and a copy whose versions are not those merges into
//!    a copy to be backfilled, never into one that serves.
//!
//! It must never lower pg_num before every joining PG reported ready.

use super::*;
use crate::ops::Version;
use loligo_crush::placement::split_children;

/// A merge of a pool's PGs under way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgMerge {
    /// The pg_num asked for.
    pub to: u32,
    /// The epoch from which the PGs that join hold their writes (0:
    /// pgp_num is still stepping down to `to`).
    pub ready_since: Epoch,
}

/// A pool's last merge: what a copy that merges checks its versions
/// against (one that merges later, at an OSD that was down, too).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgMerged {
    /// The epoch pg_num fell in.
    pub epoch: Epoch,
    pub from: u32,
    pub to: u32,
    /// Each joining PG's `last_update` when it was ready, by seed.
    pub versions: BTreeMap<u32, Version>,
}

impl PgMerge {
    /// Whether PG seed `ps` of a pool of `pg_num` PGs joins this merge:
    /// a source, or the target of one.
    pub fn joins(&self, ps: u32, pg_num: u32) -> bool {
        ps < pg_num && (ps >= self.to || merge_sources(ps, self.to, pg_num).next().is_some())
    }
}

/// The seeds that merge into target `ps` when a pool's pg_num falls from
/// `from` to `to` (the children a split from `to` to `from` makes).
pub fn merge_sources(ps: u32, to: u32, from: u32) -> impl Iterator<Item = u32> {
    split_children(ps, to, from)
}

impl OsdMap {
    /// [`Change::PgMergeTarget`].
    pub(super) fn merge_target(&mut self, pool: u64, to: u32) -> Result<()> {
        let p = (self.pools.get(&pool)).ok_or_else(|| MapError::NoSuchPool(pool.to_string()))?;
        if to == p.pg_num {
            self.pg_merges.remove(&pool);
            return Ok(());
        }
        if to == 0 || to > p.pg_num {
            return Err(MapError::Invalid(format!(
                "a merge of pool '{}' to {to} PGs: it has {}",
                p.name, p.pg_num
            )));
        }
        // (Another target while ready: the holds start over.)
        let ready_since = match self.pg_merges.get(&pool) {
            Some(m) if m.to == to => m.ready_since,
            _ => 0,
        };
        self.pg_merges.insert(pool, PgMerge { to, ready_since });
        Ok(())
    }

    /// [`Change::PgMergeReady`].
    pub(super) fn merge_ready(&mut self, pool: u64) -> Result<()> {
        let p = (self.pools.get(&pool)).ok_or_else(|| MapError::NoSuchPool(pool.to_string()))?;
        let pgp_num = p.pgp_num;
        let m = (self.pg_merges.get_mut(&pool))
            .ok_or_else(|| MapError::Invalid(format!("pool {pool} has no merge under way")))?;
        if pgp_num != m.to {
            return Err(MapError::Invalid(format!(
                "pool {pool}: pgp_num {pgp_num} is not the merge's {} yet",
                m.to
            )));
        }
        m.ready_since = self.epoch;
        Ok(())
    }

    /// [`Change::PgMerged`]: every joining PG's version is named.
    pub(super) fn merged(&mut self, pool: u64, versions: &BTreeMap<u32, Version>) -> Result<()> {
        let bad = |m: String| Err(MapError::Invalid(m));
        let Some(m) = self.pg_merges.get(&pool).cloned() else {
            return bad(format!("pool {pool} has no merge under way"));
        };
        let p =
            (self.pools.get_mut(&pool)).ok_or_else(|| MapError::NoSuchPool(pool.to_string()))?;
        if m.ready_since == 0 || p.pgp_num != m.to {
            return bad(format!("pool '{}': its PGs are not ready to merge", p.name));
        }
        let from = p.pg_num;
        let joining: Vec<u32> = (0..from).filter(|&ps| m.joins(ps, from)).collect();
        if !versions.keys().copied().eq(joining.iter().copied()) {
            return bad(format!(
                "pool '{}': a merge to {} names the versions of PGs {:?}, not those that join",
                p.name,
                m.to,
                versions.keys().collect::<Vec<_>>()
            ));
        }
        p.pg_num = m.to;
        let gone = |pg: &PgId| pg.pool == pool && pg.ps >= m.to;
        self.pg_temp.retain(|pg, _| !gone(pg));
        self.primary_temp.retain(|pg, _| !gone(pg));
        self.pg_upmap_items.retain(|pg, _| !gone(pg));
        self.unfound_lost.retain(|pg, _| !gone(pg));
        self.write_sets = std::mem::take(&mut self.write_sets)
            .into_iter()
            .filter(|(pg, _)| !gone(pg))
            .collect();
        self.pg_merges.remove(&pool);
        let merged = PgMerged {
            epoch: self.epoch,
            from,
            to: m.to,
            versions: versions.clone(),
        };
        self.pg_merged.insert(pool, merged);
        Ok(())
    }

    /// What the map holds of merges is consistent: each for a pool it
    /// has, below its pg_num (see [`OsdMap::validate`]).
    pub(super) fn check_merges(&self) -> Result<()> {
        for (id, m) in &self.pg_merges {
            let p = (self.pools.get(id)).ok_or_else(|| MapError::NoSuchPool(id.to_string()))?;
            let held_off = m.ready_since > 0 && p.pgp_num != m.to;
            if m.to == 0 || m.to >= p.pg_num || m.ready_since > self.epoch || held_off {
                return Err(MapError::Invalid(format!(
                    "pool '{}': a merge to {} PGs of {} (pgp_num {}, ready since {})",
                    p.name, m.to, p.pg_num, p.pgp_num, m.ready_since
                )));
            }
        }
        for (id, m) in &self.pg_merged {
            let p = (self.pools.get(id)).ok_or_else(|| MapError::NoSuchPool(id.to_string()))?;
            if m.to == 0 || m.to >= m.from || m.epoch > self.epoch {
                return Err(MapError::Invalid(format!(
                    "pool '{}': a last merge from {} to {} PGs at epoch {}",
                    p.name, m.from, m.to, m.epoch
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map_with(pg_num: u32) -> OsdMap {
        OsdMap::test_cluster(4, pg_num)
    }

    fn next(m: &mut OsdMap, changes: Vec<Change>) -> Result<()> {
        let epoch = m.epoch + 1;
        m.apply(&Incremental { epoch, changes })
    }

    fn set_pgp(m: &mut OsdMap, n: u32) {
        let mut p = m.pool_by_name("p").unwrap().clone();
        p.pgp_num = n;
        next(m, vec![Change::PoolUpdate(p)]).unwrap();
    }

    /// A merge goes target, pgp_num down, ready, merged: pg_num falls only
    /// with every joining PG's version named, the sources' entries go,
    /// and the versions stay for copies that merge later.
    #[test]
    fn a_merge_lowers_pg_num_only_once_ready_with_every_version() {
        let mut m = map_with(8);
        let pool = m.pool_by_name("p").unwrap().id;
        let pg = |ps| PgId { pool, ps };
        assert!(next(&mut m, vec![Change::PgMergeTarget { pool, to: 0 }]).is_err());
        assert!(next(&mut m, vec![Change::PgMergeTarget { pool, to: 9 }]).is_err());
        next(&mut m, vec![Change::PgMergeTarget { pool, to: 3 }]).unwrap();
        // pg_num moves only by the merge now.
        let mut grown = m.pool_by_name("p").unwrap().clone();
        grown.pg_num = 16;
        assert!(next(&mut m, vec![Change::PoolUpdate(grown)]).is_err());
        // Not ready before pgp_num is down.
        assert!(next(&mut m, vec![Change::PgMergeReady { pool }]).is_err());
        set_pgp(&mut m, 3);
        let versions: BTreeMap<u32, Version> = (0..8)
            .filter(|&ps| m.pg_merges[&pool].joins(ps, 8))
            .map(|ps| {
                (
                    ps,
                    Version {
                        epoch: 2,
                        v: u64::from(ps),
                    },
                )
            })
            .collect();
        // Seeds 3..8 and their targets 0..3 (3 -> 1, 4 -> 0, ...).
        assert_eq!(versions.len(), 8);
        assert!(next(
            &mut m,
            vec![Change::PgMerged {
                pool,
                versions: versions.clone()
            }]
        )
        .is_err());
        next(&mut m, vec![Change::PgMergeReady { pool }]).unwrap();
        assert_eq!(m.pg_merges[&pool].ready_since, m.epoch);
        let entries = vec![
            Change::PgUpmapItems {
                pg: pg(5),
                items: vec![(0, 1)],
            },
            Change::PgTemp {
                pg: pg(6),
                osds: vec![1, 2, 3],
            },
            Change::PgUpmapItems {
                pg: pg(1),
                items: vec![(0, 2)],
            },
        ];
        next(&mut m, entries).unwrap();
        let mut short = versions.clone();
        short.remove(&7);
        assert!(next(
            &mut m,
            vec![Change::PgMerged {
                pool,
                versions: short
            }]
        )
        .is_err());
        next(
            &mut m,
            vec![Change::PgMerged {
                pool,
                versions: versions.clone(),
            }],
        )
        .unwrap();
        let p = m.pool_by_name("p").unwrap();
        assert_eq!((p.pg_num, p.pgp_num), (3, 3));
        assert!(m.pg_merges.is_empty());
        assert_eq!(m.pg_merged[&pool].versions, versions);
        assert_eq!((m.pg_merged[&pool].from, m.pg_merged[&pool].to), (8, 3));
        assert!(!m.pg_upmap_items.contains_key(&pg(5)));
        assert!(m.pg_temp.is_empty());
        assert_eq!(m.pg_upmap_items[&pg(1)], vec![(0, 2)]);
        m.validate().unwrap();
        let back = super::super::decode_map(&super::super::encode(&m)).unwrap();
        assert_eq!(back, m);
    }

    /// Only sources and the targets that have one join: of 8 PGs merging
    /// to 6, seeds 6 and 7 fold into 2 and 3.
    #[test]
    fn only_sources_and_their_targets_join() {
        let merge = PgMerge {
            to: 6,
            ready_since: 0,
        };
        let joining: Vec<u32> = (0..8).filter(|&ps| merge.joins(ps, 8)).collect();
        assert_eq!(joining, vec![2, 3, 6, 7]);
        assert_eq!(merge_sources(2, 6, 8).collect::<Vec<_>>(), vec![6]);
        assert!(!merge.joins(8, 8));
    }
}
