//! The copies of deleted pools: when a map no longer has a pool this
//! OSD holds copies of (Ceph's PG deletion), each copy's task stops and
//! the copy is removed in the background, a batch of objects per
//! transaction, so the space comes back without a long stall.
//!
//! Pool ids are never reused, so a pool the map lacks whose id is at most
//! the map's largest is gone for good; a copy of a pool past it (a map
//! older than the copy) is kept.
//!
//! It must never remove a copy of a pool the map has, nor one whose task
//! still runs.

use super::{lock, pg_copies, retire, OsdShared};
use loligo_store::{CollectionId, Transaction};
use loligo_types::{OsdMap, PgId};
use std::sync::Arc;
use std::time::Duration;

/// Objects removed per transaction.
const BATCH: usize = 256;

/// How often a removal looks whether the copy's task has stopped.
const STOPPED_POLL_MS: u64 = 10;

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
    for pg in copies.into_iter().filter(|pg| gone(pg.pool)) {
        if !lock(&s.removing).insert(pg) {
            continue;
        }
        retire::mark(s, pg);
        tokio::spawn(remove(s.clone(), pg));
    }
}

/// Remove PG `pg`'s copy here once its task has stopped.
async fn remove(s: Arc<OsdShared>, pg: PgId) {
    while !retire::stopped(&s, pg) {
        tokio::time::sleep(Duration::from_millis(STOPPED_POLL_MS)).await;
    }
    let coll = CollectionId::pg(pg.pool, pg.ps);
    let mut removed = 0usize;
    let result = loop {
        if s.stopped.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let (batch, next) = match s.store.list(coll, None, BATCH) {
            Ok(x) => x,
            Err(loligo_store::StoreError::NoCollection(_)) => break Ok(()),
            Err(e) => break Err(e.to_string()),
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
        if let Err(e) = s.store.queue_transaction(t).await {
            break Err(e.to_string());
        }
        if last {
            break Ok(());
        }
        // (The PGs that serve go first.)
        tokio::task::yield_now().await;
    };
    match result {
        Ok(()) => tracing::info!("pg {pg}: its pool is gone; copy removed ({removed} objects)"),
        Err(e) => tracing::error!("pg {pg}: its pool is gone, but removing its copy failed: {e}"),
    }
    lock(&s.retiring).remove(&pg);
    lock(&s.removing).remove(&pg);
}
