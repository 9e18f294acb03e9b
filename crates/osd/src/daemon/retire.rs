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
    lock(&s.retiring).entry(pg).or_insert(false);
    if lock(&s.pgs).remove(&pg).is_none() {
        lock(&s.retiring).insert(pg, true);
    }
}

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
