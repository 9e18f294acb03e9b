//! PG merges on this OSD: when a map lowers a pool's pg_num, each source
//! PG's task here stops (its copy stays on the store), and its target's
//! task merges the sources' copies into its own (`loligo_pg::pg::merge`)
//! before it takes that map.
//!
//! A source is *retiring* (`retire`) from the moment the map is seen,
//! before it is published. Its target waits for its task to end, then for
//! what it queued to land, then plans the merge.
//!
//! It must never merge a source's copy while a task of that source runs.

use super::{handed, lock, pg_copies, retire, split, OsdShared};
use crate::pg::merge;
use crate::pg::split::stored_pg_num;
use crate::pg::{Grants, Pg};
use loligo_crush::placement::ancestor;
use loligo_store::{CollectionId, Transaction};
use loligo_types::{OsdMap, PgId};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Mark retiring the source PGs here of every pool `map` lowers pg_num
/// of (with `old`, the map before it, `None` at the first: then the
/// copies on the store say so), called before `map` is published. Returns
/// the targets here that merge: each gets a copy (its collection made,
/// for the old count, if it had none), so its task merges the sources in.
pub(super) fn mark_sources(s: &OsdShared, old: Option<&OsdMap>, map: &OsdMap) -> BTreeSet<PgId> {
    let shrunk = |pool: u64, pg_num: u32| {
        old.is_none_or(|o| o.pools.get(&pool).is_none_or(|q| q.pg_num > pg_num))
    };
    let pools: Vec<(u64, u32)> = (map.pools.values())
        .filter(|p| shrunk(p.id, p.pg_num))
        .map(|p| (p.id, p.pg_num))
        .collect();
    let mut targets = BTreeSet::new();
    if pools.is_empty() {
        return targets;
    }
    let mut copies = match pg_copies(&*s.store) {
        Ok(h) => h,
        Err(e) => {
            tracing::error!("cannot list the PG copies here: {e}");
            return targets;
        }
    };
    copies.extend(lock(&s.pgs).keys().copied());
    for &(pool, pg_num) in &pools {
        let old_num = old.and_then(|o| o.pools.get(&pool)).map(|p| p.pg_num);
        let sources: Vec<PgId> = (copies.iter())
            .filter(|pg| pg.pool == pool && pg.ps >= pg_num)
            .copied()
            .collect();
        for pg in &sources {
            retire::mark(s, *pg);
            let runs = !retire::stopped(s, *pg);
            let target = PgId {
                pool,
                ps: ancestor(pg.ps, pg_num),
            };
            let coll = CollectionId::pg(pool, pg.ps);
            if !copies.contains(&target) && merge::is_empty_copy(&*s.store, coll).unwrap_or(false) {
                // A stray's leftover (its objects and records removed):
                // nothing to merge; gone now if no task holds it.
                if !runs {
                    let mut t = Transaction::new();
                    t.remove_collection(coll);
                    if let Err(e) = s.store.apply(t) {
                        tracing::warn!("pg {pg}: cannot remove its empty copy: {e}");
                    }
                }
                continue;
            }
            if !copies.contains(&target) {
                // Made for the count the source's copy was made for.
                let from = match stored_pg_num(&*s.store, coll) {
                    Ok(Some(n)) => n,
                    _ => old_num.unwrap_or(pg.ps + 1),
                };
                // (Empty: its merge takes the sources in, to be backfilled.)
                if let Err(e) = s.make_copy(target, Some(from)) {
                    tracing::error!("pg {target}: cannot make its copy to merge into: {e}");
                    continue;
                }
                copies.insert(target);
            }
            targets.insert(target);
        }
    }
    targets
}

/// Before target `core` takes a map in which its pool has `pg_num` PGs:
/// merge its sources' copies here into its own if it was made for more.
/// `Err` when the store cannot do it (the OSD then stops).
pub(super) async fn merge_before_map(
    s: &Arc<OsdShared>,
    core: &mut Pg,
    epoch: loligo_types::Epoch,
    pg_num: u32,
) -> Result<(), String> {
    let pg = core.id;
    let coll = CollectionId::pg(pg.pool, pg.ps);
    if pg.ps >= pg_num || !s.store.collection_exists(coll).map_err(|e| e.to_string())? {
        return Ok(());
    }
    let from = match stored_pg_num(&*s.store, coll)? {
        Some(n) if n > pg_num => n,
        _ => return Ok(()),
    };
    // Every copy here that folds into this PG: its sources, and any left
    // by an earlier merge this OSD missed.
    let folds = |p: &PgId| p.pool == pg.pool && p.ps >= pg_num && ancestor(p.ps, pg_num) == pg.ps;
    if !retire::wait_stopped(s, &format!("pg {pg}: merging"), &folds).await {
        return Err("the OSD stops".into());
    }
    // Their copies' read-lease grants are this copy's now; and a source
    // whose copy had no task since this OSD started hands none: it may
    // have granted a lease before the start, as any copy held then.
    core.inherit_lease(&handed::take(s, folds));
    core.inherit_lease(&Grants::restarted(s.cfg.read_lease_ms(), 0));
    // What the sources and this PG queued lands first (the store commits
    // in queue order): the plan must see every object they wrote.
    split::wait(&*s.store, Transaction::new())?;
    let merged = s.map().and_then(|m| m.pg_merged.get(&pg.pool).cloned());
    let dups_max = usize::try_from(core.log_entries_max).unwrap_or(usize::MAX);
    let plan = merge::plan(&*s.store, pg, from, pg_num, merged.as_ref(), dups_max)?;
    if !plan.joins {
        return split::wait(&*s.store, plan.txn);
    }
    match &plan.incomplete {
        None => tracing::info!(
            "pg {pg}: merging {} sources for pg_num {pg_num} (from {from}): {} objects moved in",
            plan.sources.len(),
            plan.moved
        ),
        Some(why) => tracing::warn!(
            "pg {pg}: merging {} sources for pg_num {pg_num} (from {from}); this copy is to be \
             backfilled: {why}",
            plan.sources.len()
        ),
    }
    split::wait(&*s.store, plan.txn)?;
    core.reshaped(plan.info, epoch);
    let mut retiring = lock(&s.retiring);
    for p in &plan.sources {
        retiring.remove(p);
    }
    Ok(())
}
