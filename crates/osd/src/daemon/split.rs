//! PG splits on this OSD: when a map grows a pool's pg_num, each PG copy
//! here splits in place (`loligo_pg::pg::split`) in its own task, before
//! the PG takes that map, so no write of the old interval lands after
//! it; the children start once the split is durable.
//!
//! Until its parent's copy here has split, a child is *pending*: it gets
//! no task, and peers asking about it are told to ask again, never that
//! this OSD holds no copy (which would have it backfilled from nothing
//! while the parent's objects wait to move in).
//!
//! It must never start a child before its parent's split is durable.

use super::{lock, OsdShared};
use crate::pg::split::{self, stored_pg_num};
use crate::pg::Pg;
use loligo_store::{CollectionId, ObjectStore, Transaction};
use loligo_types::{OsdMap, PgId, PoolKind};
use std::sync::Arc;

/// Mark pending the children of the copies on this OSD's store whose
/// pools `map` grew (with `old`, the map before it, `None` at the first):
/// called before `map` is published, so nothing starts a child first. The
/// store, not the running PGs, says which copies there are: a child just
/// split has a copy before its task runs.
pub(super) fn mark_pending(s: &OsdShared, old: Option<&OsdMap>, map: &OsdMap) {
    let grown: Vec<(u64, u32)> = (map.pools.values())
        .filter(|p| old.is_none_or(|o| o.pools.get(&p.id).is_none_or(|q| q.pg_num < p.pg_num)))
        .map(|p| (p.id, p.pg_num))
        .collect();
    if grown.is_empty() {
        return;
    }
    let held = match super::pg_copies(&*s.store) {
        Ok(h) => h,
        Err(e) => {
            tracing::error!("cannot list the PG copies here: {e}");
            return;
        }
    };
    // Merge sources of these pools whose tasks stopped and that no merge
    // took in (a stray's leftovers) are PGs like any other again.
    lock(&s.retiring).retain(|pg, stopped| !(*stopped && grown.iter().any(|g| g.0 == pg.pool)));
    let mut pending = lock(&s.splitting);
    for &(pool, pg_num) in &grown {
        for pg in held.iter().filter(|pg| pg.pool == pool && pg.ps < pg_num) {
            let coll = CollectionId::pg(pg.pool, pg.ps);
            let from = match stored_pg_num(&*s.store, coll) {
                Ok(Some(n)) if n < pg_num && pg.ps < n => n,
                Ok(_) => continue,
                Err(e) => {
                    tracing::error!("pg {pg}: {e}");
                    continue;
                }
            };
            for ps in loligo_crush::placement::split_children(pg.ps, from, pg_num) {
                pending.insert(PgId { pool, ps });
            }
        }
    }
}

/// Whether `pg` waits for its parent's split here.
pub(super) fn pending(s: &OsdShared, pg: PgId) -> bool {
    lock(&s.splitting).contains(&pg)
}

/// Before PG `core` takes a map in which its pool has `pg_num` PGs: split
/// its copy if it was made for fewer (a copy with no record, from before
/// splits, is taken to be made for `pg_num`). Returns the children to
/// start once the PG has the map; `Err` when the store cannot do it (the
/// OSD then stops: its copies would be split by halves).
pub(super) fn split_before_map(
    s: &OsdShared,
    core: &mut Pg,
    epoch: loligo_types::Epoch,
    pg_num: u32,
    kind: &PoolKind,
) -> Result<Vec<PgId>, String> {
    let pg = core.id;
    let coll = CollectionId::pg(pg.pool, pg.ps);
    let store: &dyn ObjectStore = &*s.store;
    if !store.collection_exists(coll).map_err(|e| e.to_string())? {
        return Ok(Vec::new());
    }
    let from = match stored_pg_num(store, coll)? {
        Some(n) => n,
        None => {
            let mut t = Transaction::new();
            t.set_record(
                coll,
                split::PG_NUM_KEY,
                crate::pg::record::encode_pg_num(pg_num),
            );
            wait(store, t)?;
            return Ok(Vec::new());
        }
    };
    if from >= pg_num || pg.ps >= from {
        return Ok(Vec::new());
    }
    // What this PG queued before lands first (the store commits in queue
    // order): the plan must see every object it wrote.
    wait(store, Transaction::new())?;
    let ec = matches!(kind, PoolKind::Erasure { .. });
    let plan = split::plan(store, pg, from, pg_num, ec)?;
    tracing::info!(
        "pg {pg}: splitting for pg_num {pg_num} (from {from}): {} objects to {} children",
        plan.moved,
        plan.children.len()
    );
    wait(store, plan.txn)?;
    core.reshaped(plan.info, epoch);
    let grants = core.lease_grants();
    for &c in &plan.children {
        super::handed::hand(s, c, &grants);
    }
    Ok(plan.children)
}

/// Start the children of a split that is durable.
pub(super) fn start_children(s: &Arc<OsdShared>, children: &[PgId]) {
    {
        let mut pending = lock(&s.splitting);
        for c in children {
            pending.remove(c);
        }
    }
    for &c in children {
        if s.pg(c, true).is_none() {
            tracing::error!("pg {c}: split here, but its task did not start");
        }
    }
}

/// Apply `t` and wait until it is durable (off the async workers when
/// the runtime has others to run them).
pub(super) fn wait(store: &dyn ObjectStore, t: Transaction) -> Result<(), String> {
    let run = || store.queue_transaction(t).wait().map_err(|e| e.to_string());
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(run),
        _ => run(),
    }
}
