//! PGs whose tasks stop for good on this OSD while their copies stay on
//! the store for a while: merge sources (their targets take them in,
//! `merge`) and the PGs of deleted pools (removed in the background,
//! `gone`). A retiring PG gets no task again, and a running one ends at
//! its next input; whoever takes its copy over waits for that.
//!
//! It must never let a retiring PG's task run past the input after it
//! was marked.

use super::{lock, OsdShared};
use loligo_types::PgId;
use std::sync::Arc;

/// Whether `pg` is retiring here (no task starts for it; a running one
/// stops).
pub(super) fn retiring(s: &OsdShared, pg: PgId) -> bool {
    lock(&s.retiring).contains_key(&pg)
}

/// Mark `pg` retiring and take its task out of the PG table: a running
/// one stops at its next input. Marked first, so that no task starts for
/// it in between (`pg_task::spawn` looks under the table's lock).
pub(super) fn mark(s: &OsdShared, pg: PgId) {
    {
        // (Marked already: its task's state is known.)
        let mut r = lock(&s.retiring);
        if r.contains_key(&pg) {
            return;
        }
        r.insert(pg, false);
    }
    if lock(&s.pgs).remove(&pg).is_none() {
        lock(&s.retiring).insert(pg, true);
    }
}

/// Wait until no retiring PG for which `which` holds has a task left
/// (false: the OSD stopped first). Says so now and then while it waits.
pub(super) async fn wait_stopped(s: &OsdShared, what: &str, which: impl Fn(&PgId) -> bool) -> bool {
    let mut waited = 0u64;
    loop {
        let running = (lock(&s.retiring).iter()).any(|(p, stopped)| which(p) && !stopped)
            || lock(&s.pgs).keys().any(&which);
        if !running {
            return true;
        }
        if s.stopped.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(STOPPED_POLL_MS)).await;
        waited += STOPPED_POLL_MS;
        if waited.is_multiple_of(10_000) {
            tracing::warn!("{what}: waiting {} s for PG tasks to stop", waited / 1000);
        }
    }
}

/// How often a waiter looks whether the tasks it waits for have stopped.
const STOPPED_POLL_MS: u64 = 10;

/// Whether `pg`'s task has stopped (or it had none): its copy is free to
/// take over.
pub(super) fn stopped(s: &OsdShared, pg: PgId) -> bool {
    lock(&s.retiring).get(&pg) != Some(&false)
}

/// Retiring `pg`'s task ends: nothing of it is reported or reserved any
/// more, and whoever takes its copy over may go on.
pub(super) fn task_ended(s: &Arc<OsdShared>, pg: PgId) {
    lock(&s.stats).remove(&pg);
    lock(&s.views).remove(&pg);
    let granted = lock(&s.reserver).release_pg(pg);
    super::pg_task::grant(s, granted);
    if let Some(done) = lock(&s.retiring).get_mut(&pg) {
        *done = true;
    }
}
