//! The copies of deleted pools: when a map no longer has a pool this
//! OSD holds copies of (Ceph's PG deletion), the pool's PG tasks stop
//! (`retire`) and its copies are removed in the background, a batch of
//! objects per transaction, so the space comes back without a long stall.
//!
//! Pool ids are never reused, so a pool the map lacks whose id is at most
//! the map's largest is gone for good; a copy of a pool past it (a map
//! older than the copy) is kept. A removal that fails is tried again when
//! the OSD next starts.
//!
//! It must never remove a copy of a pool the map has, nor touch one while
//! any task of its pool still runs (a merge target may be reading its
//! sources, a split writing its children).

use super::{lock, pg_copies, retire, OsdShared};
use loligo_store::{CollectionId, Transaction};
use loligo_types::{OsdMap, PgId};
use std::sync::Arc;

/// Objects removed per transaction.
const BATCH: usize = 256;

/// Start removing the copies here of pools `map` no longer has (called
/// before `map` is published, with `old` the map before it, `None` at the
/// first: then the store says which copies there are).
pub(super) fn mark(s: &Arc<OsdShared>, old: Option<&OsdMap>, map: &OsdMap) {
    let gone = |pool: u64| pool <= map.pool_max && !map.pools.contains_key(&pool);
    if old.is_some_and(|o| !o.pools.keys().any(|&p| gone(p))) {
        return;
    }
    let mut copies = match pg_copies(&*s.store) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("cannot list the PG copies here: {e}");
            return;
        }
    };
    copies.extend(lock(&s.pgs).keys().copied());
    let copies: Vec<PgId> = copies.into_iter().filter(|pg| gone(pg.pool)).collect();
    for pg in &copies {
        retire::mark(s, *pg);
    }
    let mut pools: Vec<u64> = copies.iter().map(|pg| pg.pool).collect();
    pools.sort_unstable();
    pools.dedup();
    for pool in pools {
        if lock(&s.removing).insert(pool) {
            tokio::spawn(remove_pool(s.clone(), pool));
        }
    }
}

/// Remove every copy here of deleted pool `pool`, once none of its tasks
/// runs.
async fn remove_pool(s: Arc<OsdShared>, pool: u64) {
    let what = format!("pool {pool} (deleted)");
    if !retire::wait_stopped(&s, &what, |pg| pg.pool == pool).await {
        return;
    }
    // (Listed again: a split or merge under way may have made copies.)
    let copies = match pg_copies(&*s.store) {
        Ok(c) => c,
        Err(e) => return tracing::error!("{what}: cannot list the PG copies here: {e}"),
    };
    let mut copies: Vec<PgId> = copies.into_iter().filter(|pg| pg.pool == pool).collect();
    copies.sort();
    for pg in copies {
        match remove_copy(&s, pg).await {
            Ok(Some(n)) => tracing::info!("pg {pg}: its pool is gone; copy removed ({n} objects)"),
            Ok(None) => return,
            Err(e) => {
                tracing::error!("pg {pg}: its pool is gone, but removing its copy failed: {e}")
            }
        }
    }
    lock(&s.retiring).retain(|pg, _| pg.pool != pool);
    lock(&s.removing).remove(&pool);
}

/// Remove copy `pg` a batch at a time: how many objects it held (`None`:
/// the OSD stopped first).
async fn remove_copy(s: &OsdShared, pg: PgId) -> Result<Option<usize>, String> {
    let coll = CollectionId::pg(pg.pool, pg.ps);
    let mut removed = 0usize;
    loop {
        if s.stopped.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(None);
        }
        let (batch, next) = match s.store.list(coll, None, BATCH) {
            Ok(x) => x,
            Err(loligo_store::StoreError::NoCollection(_)) => return Ok(Some(removed)),
            Err(e) => return Err(e.to_string()),
        };
        let mut t = Transaction::new();
        for o in &batch {
            t.remove(coll, o);
        }
        removed += batch.len();
        let last = next.is_none();
        if last {
            t.remove_collection(coll);
        }
        s.store
            .queue_transaction(t)
            .await
            .map_err(|e| e.to_string())?;
        if last {
            return Ok(Some(removed));
        }
        // (The PGs that serve go first.)
        tokio::task::yield_now().await;
    }
}
