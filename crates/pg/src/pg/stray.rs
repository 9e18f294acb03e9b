//! A copy outside the acting set: it asks the primary whether the PG is
//! clean without it, then removes itself in batches.
//!
//! It must never remove itself on any word but the current primary's.

use super::*;

/// A stray copy's own state.
#[derive(Default)]
pub(super) struct Stray {
    /// When the primary was last asked whether the PG is clean without
    /// this copy.
    pub asked_ms: u64,
    /// The removal transaction in flight.
    pub removing: Option<u64>,
}

impl Pg {
    /// As primary: the epoch at which the PG is clean without `osd` (not
    /// acting, not in CRUSH's set, not on record), if it is and this map
    /// is at least `epoch`.
    pub(super) fn clean_without(&self, osd: i32, epoch: Epoch) -> Option<Epoch> {
        let named = self.map.acting.contains(&osd)
            || self.map.up.contains(&osd)
            || self
                .map
                .record
                .as_ref()
                .is_some_and(|r| r.osds.contains(&osd));
        (self.is_clean() && !named && self.map.epoch >= epoch).then_some(self.map.epoch)
    }

    /// As a copy outside the acting set that still holds something: ask
    /// the primary now and then whether it may go.
    pub(super) fn check_stray(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if self.role != Role::Stray
            || self.map.primary < 0
            || self.stray.removing.is_some()
            || self.now_ms < self.stray.asked_ms + STRAY_CHECK_MS
        {
            return;
        }
        let holds = self.info.last_update > Version::default()
            || !self.missing.is_empty()
            || self.backfill.is_some()
            || s.records(self.coll, b"", 1).is_ok_and(|r| !r.is_empty())
            || s.list(self.coll, None, 1).is_ok_and(|(l, _)| !l.is_empty());
        if holds {
            self.stray.asked_ms = self.now_ms;
            let shard = self.ec.as_ref().and_then(|_| self.shard_held(s));
            let msg = PeerMsg::StrayCheck {
                pg: self.id,
                from: self.whoami,
                epoch: self.map.epoch,
                shard,
            };
            self.send(0, self.map.primary, msg, fx);
        }
    }

    /// As a stray copy the PG no longer needs: delete the next batch. The
    /// first batch takes every record (info, log, missing, cursor) with
    /// it, so a copy cut short by a crash or a new map is an empty copy
    /// (peering backfills it) that may hold leftover objects (backfill
    /// compares and removes them). The collection itself stays, empty.
    pub(super) fn remove_some(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if self.role != Role::Stray || self.stray.removing.is_some() || !self.settled() {
            return;
        }
        let mut t = Transaction::new();
        let records = match s.records(self.coll, b"", usize::MAX) {
            Ok(r) => r,
            Err(e) => return tracing_error(self.id, &format!("listing a stray copy: {e}")),
        };
        let (objects, last) = match s.list(self.coll, None, REMOVE_BATCH) {
            Ok((objects, next)) => (objects, next.is_none()),
            Err(e) => return tracing_error(self.id, &format!("listing a stray copy: {e}")),
        };
        // The tree's records stay while objects do (it follows each
        // removal down to empty), then go with the last batch.
        let (tree_records, records): (Vec<Vec<u8>>, Vec<Vec<u8>>) = records
            .into_iter()
            .map(|(k, _)| k)
            .partition(|k| k.starts_with(tree::TREE_KEY));
        if !records.is_empty() {
            tracing::info!(
                "pg {}: removing this copy (the PG is clean without it)",
                self.id
            );
        }
        for k in &records {
            t.rm_record(self.coll, k);
        }
        let tid = self.take_tid();
        for o in &objects {
            t.remove(self.coll, o);
        }
        let gone: Vec<(ObjectId, tree::ObjVersion)> = objects
            .iter()
            .filter(|o| !crate::ec::is_internal(&o.name))
            .map(|o| (o.clone(), None))
            .collect();
        if let Err(e) = self.tree_changes(s, &gone, tid, &mut t) {
            return tracing_error(self.id, &format!("removing a stray copy: {e}"));
        }
        // The log goes: leaves only it held go to the pages.
        self.guard_log(&mut t);
        if last {
            // Pages this batch wrote and the ones on disk go, after them.
            t.ops.retain(|op| {
                !matches!(op, loligo_store::txn::Op::SetRecord { key, .. }
                    if key.starts_with(tree::TREE_KEY))
            });
            for k in &tree_records {
                t.rm_record(self.coll, k);
            }
            if let Some(k) = self.kept() {
                k.unshape();
            }
        }
        if t.is_empty() {
            return;
        }
        self.info = PgInfo::default();
        self.missing.clear();
        self.backfill = None;
        self.rep.high = Version::default();
        self.rep.merged = None;
        self.applying.insert(tid, self.map.interval);
        self.stray.removing = Some(tid);
        fx.push(Effect::Apply {
            tid,
            txn: t,
            sync: true,
        });
    }
}
