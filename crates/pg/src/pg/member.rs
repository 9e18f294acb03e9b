//! A member's side: replica writes, the authoritative log and pushes
//! from its primary, and its answers to a primary that is behind (its
//! log, its copies).
//!
//! It must never take a write out of the primary's order, nor one from an
//! interval it has left.

use super::*;

/// What a member holds back until it can answer, and the newest
/// peering it answered.
#[derive(Default)]
pub(super) struct Held {
    /// Peering queries waiting for a newer map.
    pub queries: Vec<PendingQuery>,
    /// The newest map epoch of a peering query this copy answered: a
    /// message sent under an older epoch belongs to an earlier interval
    /// (a primary sends queries only while peering, before it writes),
    /// and taking it would change this copy behind the answer a new
    /// primary peered with (on an EC pool, an old interval's write taken
    /// after the answer left a log entry the new primary had rolled back,
    /// and the object's shards at two versions).
    pub answered_epoch: Epoch,
    /// Per primary, the newest interval it peered in that this copy
    /// answered: a message it sent in an earlier interval is refused even
    /// under the same epoch (a primary that restarts its interval within
    /// an epoch, when a member said the interval was over, had an old
    /// interval's write on its way; taken after the answer, it left this
    /// copy past what the new peering heard, and the primary peered
    /// again from that answer for good). A primary's own intervals are
    /// ordered, whatever other OSDs count.
    pub answered_intervals: BTreeMap<i32, Epoch>,
    /// Authoritative logs waiting for this copy's map or commits.
    pub logs: Vec<HeldLog>,
    /// Pushes and chunks waiting for this copy's log to catch up.
    pub copies: Vec<HeldCopy>,
}

impl Pg {
    /// A write from a primary to this copy: refused if it comes from a
    /// primary this PG's map has left behind, applied in the primary's
    /// order, held a bounded time while an earlier one is on its way.
    pub(super) fn on_rep_op(
        &mut self,
        s: &dyn ObjectStore,
        w: replica::RepWrite,
        fx: &mut Vec<Effect>,
    ) {
        let token = w.token;
        let fail = |e: RepError| Effect::ack(token, Err(e));
        if let Err(e) = self.fence(w.from, &w.ctx, "write from") {
            return fx.push(fail(e));
        }
        if let Some(e) = replica::check_txn(self.coll, self.owner(), &w.txn) {
            return fx.push(fail(RepError::Failed(format!("pg {}: {e}", self.id))));
        }
        if self.rep.merging() {
            // It follows the log being merged.
            if self.rep.waiting.len() >= WAITING_MAX {
                return fx.push(fail(RepError::Failed(format!(
                    "pg {}: too many writes out of order",
                    self.id
                ))));
            }
            return self.rep.waiting.push(w);
        }
        // What this copy holds or has queued, as a primary or a replica.
        self.rep.high = self.rep.high.max(self.info.last_update);
        match replica_step(s, self.coll, &mut self.rep.high, &w.ctx) {
            ReplicaStep::Apply => {
                if let Some(info) = replica::info_in(self.coll, &w.txn) {
                    self.info = info;
                }
                // An object given up (`ec_give_up`) is no longer missing
                // here: its removal clears the record, and memory follows
                // (with OSDs declared lost, a member that kept it went on
                // to pull the old version as primary, over the removal).
                for name in replica::missing_cleared(self.coll, &w.txn) {
                    self.missing.remove(&name);
                }
                let tid = self.take_tid();
                let mut txn = w.txn;
                let coll = self.coll;
                let version = w.ctx.version.v;
                if let Some(k) = self.kept() {
                    // Only a member that takes the object's ops (not just
                    // the PG's records) changes its leaf; any member's
                    // trim may need its pages.
                    let changed = w.ctx.change.as_ref().and_then(|c| {
                        let o = recovery::oid(&c.name);
                        txn.ops
                            .iter()
                            .any(|op| loligo_store::txn::op_object(op) == Some(&o))
                            .then_some((o, c))
                    });
                    match changed {
                        Some((o, c)) => {
                            let own = k.change_logged(coll, &o, c.old, c.new, tid, version, &txn);
                            txn.ops.extend(own.ops);
                        }
                        None => k.guard(coll, &mut txn),
                    }
                }
                self.rep
                    .committing
                    .insert(tid, self.commit(token, CommitKind::Write));
                fx.push(Effect::Apply {
                    tid,
                    txn,
                    sync: true,
                });
                // Its successors may be waiting for it, and copies read
                // after it.
                self.rerun_rep_waiting(s, fx);
                self.rerun_held_copies(s, fx);
            }
            ReplicaStep::Duplicate => {
                // Durable once everything queued before it is.
                let tid = self.take_tid();
                self.rep
                    .committing
                    .insert(tid, self.commit(token, CommitKind::Write));
                fx.push(Effect::Apply {
                    tid,
                    txn: Transaction::new(),
                    sync: true,
                });
            }
            ReplicaStep::Refuse { have } => fx.push(fail(RepError::Failed(format!(
                "pg {}: this replica's log ends at {have:?}, the write follows {:?}",
                self.id, w.ctx.prev
            )))),
            ReplicaStep::Wait if self.rep.waiting.len() >= WAITING_MAX => fx.push(fail(
                RepError::Failed(format!("pg {}: too many writes out of order", self.id)),
            )),
            ReplicaStep::Wait => self.rep.waiting.push(w),
        }
    }

    pub(super) fn commit(&self, token: u64, kind: CommitKind) -> Commit {
        Commit {
            token,
            interval: self.map.interval,
            kind,
        }
    }

    /// A primary's transaction is durable here (or failed): answer it.
    pub(super) fn on_member_commit(
        &mut self,
        s: &dyn ObjectStore,
        c: Commit,
        result: Result<(), RepError>,
        fx: &mut Vec<Effect>,
    ) {
        let stored = result.is_ok();
        let result = if c.interval == self.map.interval {
            result
        } else {
            Err(RepError::Stale(format!(
                "pg {}: interval {} ended (now {}) before the transaction was durable",
                self.id, c.interval, self.map.interval
            )))
        };
        match c.kind {
            CommitKind::Write => fx.push(Effect::ack(c.token, result)),
            CommitKind::Push(name) => {
                if stored {
                    self.missing.remove(&name);
                }
                fx.push(Effect::ack(c.token, result));
            }
            CommitKind::Chunk(next) => {
                if stored {
                    // Chunks are durable in the order they were queued,
                    // but their answers from the store may come in any
                    // order (several can be on their way): the cursor only
                    // moves forward.
                    self.backfill = match (self.backfill.take(), next) {
                        (Some(c), Some(n)) => Some(c.max(n)),
                        // Done (by this chunk or one after it).
                        (_, None) | (None, _) => None,
                    };
                } else if !stored {
                    self.load_missing(s);
                }
                fx.push(Effect::ack(c.token, result));
            }
            CommitKind::Log => {
                if !stored {
                    // The store refused the merge: believe the disk again.
                    self.rep.merged = None;
                    match stored_info(s, self.coll) {
                        Ok(i) => self.info = i.unwrap_or_default(),
                        // Kept as it is in memory; the PG task repairs
                        // the record when it starts.
                        Err(e) => tracing_error(self.id, &format!("info record: {e}")),
                    }
                    self.rep.high = self.info.last_update;
                    self.load_missing(s);
                }
                let result = result.map(|()| self.log_answer(s));
                fx.push(Effect::answer(c.token, result, PeerReply::Merged));
                self.rerun_rep_waiting(s, fx);
            }
        }
    }

    /// What this copy lacks after a merge.
    pub(super) fn log_answer(&self, s: &dyn ObjectStore) -> LogAnswer {
        let never_took = match self.ec {
            Some(_) => self
                .missing
                .iter()
                .filter(|(name, need)| self.never_took(s, name, **need))
                .map(|(name, _)| name.clone())
                .collect(),
            None => Vec::new(),
        };
        LogAnswer {
            missing: self.missing.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            backfill: self.backfill.clone(),
            never_took,
        }
    }

    /// The answer of this copy, which lacks `name` at version `v` (`why`),
    /// to a shard read or a pull: erasure-coded, with nothing of its own in
    /// flight (the store then shows all it took), it says whether it never
    /// took that write (`NeverTook`, a proof the asker may act on), for an
    /// object its PG owns only: once a split moved the object to a child,
    /// its absence here proves nothing (a primary still on the map before
    /// the split took it for proof and removed an acknowledged object;
    /// found by the simulator).
    pub(super) fn lacks(
        &self,
        s: &dyn ObjectStore,
        name: &str,
        v: Version,
        why: String,
    ) -> RepError {
        let proves = self.ec.is_some() && self.owner().owns(name) && self.settled_all();
        match proves && self.never_took(s, name, v) {
            true => RepError::NeverTook(why),
            false => RepError::Absent(why),
        }
    }

    /// Whether this copy never took the write at `v` to `name`: neither
    /// the object nor its rollback copy (whichever shard they hold) is at
    /// a version that far down the log or past it. A copy that took the
    /// write and then one after it still holds one of the two there; one
    /// whose later merge rolled the write back again was told so by an
    /// authority that lacked it, and an acknowledged write is on every
    /// member that can be an authority. (A store error says no.)
    pub(super) fn never_took(&self, s: &dyn ObjectStore, name: &str, v: Version) -> bool {
        if v.v == 0 {
            return false;
        }
        let o = recovery::oid(name);
        // (A corrupt version attribute proves nothing.)
        [crate::ec::rollback_oid(&o), o].iter().all(|x| {
            match s.stat_attr(self.coll, x, VERSION_ATTR) {
                Ok(None) | Ok(Some((_, None))) => true,
                Ok(Some((_, Some(b)))) => {
                    postcard::from_bytes::<Version>(&b).is_ok_and(|h| h.v < v.v)
                }
                Err(_) => false,
            }
        })
    }

    /// The authoritative log from a primary: merged into this copy once
    /// this copy has the primary's map (the same fence as a peering query)
    /// and its earlier transactions are durable (the merge reads its log).
    pub(super) fn on_log(&mut self, s: &dyn ObjectStore, h: HeldLog, fx: &mut Vec<Effect>) {
        let token = h.token;
        let fail = |e: RepError| Effect::answer(token, Err(e), PeerReply::Merged);
        if let Err(e) = self.fence(h.from, &h.ctx, "log from") {
            return fx.push(fail(e));
        }
        let head = h.log.info.last_update;
        if self.rep.merged == Some((h.ctx.interval, h.from, head)) && !self.rep.merging() {
            return fx.push(Effect::answer(
                token,
                Ok(self.log_answer(s)),
                PeerReply::Merged,
            ));
        }
        if self.map.epoch < h.ctx.epoch || !self.settled() || !self.applying.is_empty() {
            if self.held.logs.len() >= WAITING_MAX {
                return fx.push(fail(RepError::Failed(format!(
                    "pg {}: too many logs waiting",
                    self.id
                ))));
            }
            return self.held.logs.push(h);
        }
        let mine = match stored_info(s, self.coll) {
            Ok(i) => i.unwrap_or_default().last_update,
            Err(e) => {
                return fx.push(fail(RepError::Failed(format!(
                    "pg {}: this copy's info: {e}",
                    self.id
                ))))
            }
        };
        // An EC copy that held another shard before (its OSD moved to
        // another position) cannot merge: its objects are another shard's.
        // It is backfilled, and its scans show those objects as differing.
        let moved = match self.shard_moved(s) {
            Ok(m) => m,
            Err(e) => return fx.push(fail(RepError::Failed(format!("pg {}: {e}", self.id)))),
        };
        let merged = if moved {
            Ok(recovery::Merge::NoOverlap)
        } else {
            recovery::merge_owned(
                s,
                self.coll,
                mine,
                &self.missing,
                self.backfill.as_ref(),
                &h.log,
                self.ec.is_some(),
                self.owner(),
            )
        };
        match merged {
            Err(e) => fx.push(fail(RepError::Failed(format!("pg {}: {e}", self.id)))),
            Ok(recovery::Merge::NoOverlap) => match backfill::restart(s, self.coll, &h.log) {
                // The logs share nothing: this copy starts a backfill
                // (its log becomes the authority's, its objects are
                // compared one chunk at a time).
                Ok((mut txn, info)) => {
                    self.mark_shard(&mut txn);
                    self.guard_log(&mut txn);
                    self.missing.clear();
                    self.backfill = Some(Cursor::Start);
                    self.info = info;
                    self.rep.high = head;
                    self.rep.merged = Some((h.ctx.interval, h.from, head));
                    let tid = self.take_tid();
                    self.rep
                        .committing
                        .insert(tid, self.commit(token, CommitKind::Log));
                    fx.push(Effect::Apply {
                        tid,
                        txn,
                        sync: true,
                    });
                }
                Err(e) => fx.push(fail(RepError::Failed(format!("pg {}: {e}", self.id)))),
            },
            Ok(recovery::Merge::Merged {
                mut txn,
                missing,
                info,
            }) => {
                self.mark_shard(&mut txn);
                self.guard_log(&mut txn);
                self.missing = missing;
                self.info = info;
                self.rep.high = head;
                self.rep.merged = Some((h.ctx.interval, h.from, head));
                let tid = self.take_tid();
                self.rep
                    .committing
                    .insert(tid, self.commit(token, CommitKind::Log));
                fx.push(Effect::Apply {
                    tid,
                    txn,
                    sync: true,
                });
            }
        }
    }

    pub(super) fn rerun_held_logs(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        for h in std::mem::take(&mut self.held.logs) {
            self.on_log(s, h, fx);
        }
    }

    /// This copy's backfill cursor once the chunks queued here are durable.
    pub(super) fn queued_cursor(&self) -> Option<Cursor> {
        // Not backfilling, or done (a chunk after the ones still
        // committing may have reached the end first): `None`.
        let durable = self.backfill.clone()?;
        let c = self
            .rep
            .committing
            .values()
            .filter_map(|c| match &c.kind {
                // `None` (done) is the end of the order.
                CommitKind::Chunk(next) => Some(next.clone().unwrap_or(Cursor::End)),
                _ => None,
            })
            .fold(durable, Cursor::max);
        (c != Cursor::End).then_some(c)
    }

    /// Whether this copy's log lacks writes the primary had when it read
    /// the objects it sends under `ctx`: an object copied ahead of its
    /// log entry could hold a write that a later merge cannot see (and so
    /// never roll back). The copy waits for those writes first (and for
    /// the primary's map: `hold_copy` is also used for that).
    pub(super) fn behind(&self, ctx: &RepCtx) -> bool {
        self.rep.high.max(self.info.last_update) < ctx.version
    }

    pub(super) fn hold_copy(
        &mut self,
        from: i32,
        ctx: RepCtx,
        what: CopyMsg,
        token: u64,
        fx: &mut Vec<Effect>,
    ) {
        if self.held.copies.len() >= WAITING_MAX {
            return fx.push(Effect::ack(
                token,
                Err(RepError::Failed(format!(
                    "pg {}: too many copies waiting",
                    self.id
                ))),
            ));
        }
        self.held.copies.push(HeldCopy {
            from,
            ctx,
            what,
            token,
            deadline_ms: self.now_ms + self.op_timeout_ms,
        });
    }

    /// Pushes and chunks that waited for this copy's log: offered again.
    pub(super) fn rerun_held_copies(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        for h in std::mem::take(&mut self.held.copies) {
            match h.what {
                CopyMsg::Push(p) => self.on_push(s, h.from, h.ctx, p, h.token, fx),
                CopyMsg::Chunk(c) => self.on_chunk(s, h.from, &h.ctx, c, h.token, fx),
            }
        }
    }

    /// What this copy keeps, as the rollback copy, of the object `push`
    /// replaces (see [`recovery::Prior`]). Keeping it is a safeguard, not
    /// a duty: a store that cannot say drops it, as it always did, and
    /// the push goes on.
    pub(super) fn push_prior(&self, s: &dyn ObjectStore, push: &Push) -> recovery::Prior {
        if self.ec.is_none() {
            return recovery::Prior::Replicated;
        }
        recovery::prior_to_keep(s, self.coll, push).unwrap_or_else(|e| {
            tracing::warn!(pg = %self.id, "'{}': keeping no rollback copy: {e}", push.name);
            recovery::Prior::Drop
        })
    }

    /// An object this copy lacks, whole, from the primary.
    pub(super) fn on_push(
        &mut self,
        s: &dyn ObjectStore,
        from: i32,
        ctx: RepCtx,
        push: Push,
        token: u64,
        fx: &mut Vec<Effect>,
    ) {
        if let Err(e) = self.fence(from, &ctx, "push from") {
            return fx.push(Effect::ack(token, Err(e)));
        }
        if self.map.epoch < ctx.epoch || self.behind(&ctx) {
            let what = CopyMsg::Push(push);
            return self.hold_copy(from, ctx, what, token, fx);
        }
        if !self.missing.contains_key(&push.name) {
            // Already here (a resend, or recovered by an earlier push).
            return fx.push(Effect::ack(token, Ok(())));
        }
        self.take_push(s, push, token, fx);
    }

    /// The authoritative copy of an object a scrub found bad here.
    pub(super) fn on_repair(
        &mut self,
        s: &dyn ObjectStore,
        from: i32,
        ctx: RepCtx,
        push: Push,
        token: u64,
        fx: &mut Vec<Effect>,
    ) {
        if let Err(e) = self.fence(from, &ctx, "repair from") {
            return fx.push(Effect::ack(token, Err(e)));
        }
        if self.map.epoch < ctx.epoch || self.behind(&ctx) {
            // (A repair follows a scrub of a clean PG: this copy is not
            // behind it but for a map; the primary repairs again later.)
            let why = format!("pg {}: a repair before this copy caught up", self.id);
            return fx.push(Effect::ack(token, Err(RepError::Failed(why))));
        }
        self.take_push(s, push, token, fx);
    }

    /// Write a pushed copy over this one, acknowledged once durable.
    fn take_push(&mut self, s: &dyn ObjectStore, push: Push, token: u64, fx: &mut Vec<Effect>) {
        let fail = |e: RepError| Effect::ack(token, Err(e));
        if let Err(e) = exec::validate(&push.name, &[SubOp::Stat]) {
            return fx.push(fail(RepError::Failed(format!("pg {}: {e}", self.id))));
        }
        let tid = self.take_tid();
        let mut txn = recovery::push_txn(self.coll, &push, self.push_prior(s, &push));
        let txn = self
            .push_tree_changes(s, std::slice::from_ref(&push), tid, &mut txn)
            .map(|()| txn);
        match txn {
            Ok(txn) => {
                let c = self.commit(token, CommitKind::Push(push.name));
                self.rep.committing.insert(tid, c);
                fx.push(Effect::Apply {
                    tid,
                    txn,
                    sync: true,
                });
            }
            Err(e) => fx.push(fail(RepError::Failed(format!("pg {}: {e}", self.id)))),
        }
    }

    pub(super) fn rerun_rep_waiting(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        for w in std::mem::take(&mut self.rep.waiting) {
            self.on_rep_op(s, w, fx);
        }
    }

    /// As a complete member: this copy's log for a primary that is behind
    /// (once this copy has the primary's map and its commits are durable).
    pub(super) fn on_get_log(
        &self,
        s: &dyn ObjectStore,
        from: i32,
        ctx: &RepCtx,
    ) -> Result<AuthLog, RepError> {
        self.fence(from, ctx, "log asked by")?;
        if self.map.epoch < ctx.epoch
            || !self.settled()
            || (!self.missing.is_empty() && self.ec.is_none())
            || self.backfill.is_some()
        {
            return Err(RepError::Failed(format!(
                "pg {}: this copy is not complete and settled under epoch {}",
                self.id, ctx.epoch
            )));
        }
        self.own_log(s).ok_or_else(|| {
            RepError::Failed(format!(
                "pg {}: the store does not show the whole log",
                self.id
            ))
        })
    }

    /// As a complete member: an object for a primary that is behind,
    /// which needs it at version `need`.
    pub(super) fn on_pull(
        &self,
        s: &dyn ObjectStore,
        from: i32,
        ctx: &RepCtx,
        name: &str,
        need: Version,
    ) -> Result<Push, RepError> {
        self.fence(from, ctx, "pull from")?;
        // (A copy mid-backfill may hold an older copy than the log says;
        // with the record short of k members the puller checks versions
        // and would rather take what there is.)
        let behind = self.backfill.is_some() && !(self.ec.is_some() && self.may_give_up());
        // A copy that holds the object at exactly the version needed
        // gives it all the same, though it lacks a newer one or is mid-
        // backfill (erasure-coded, the puller takes only its xattrs, and
        // gathers the shards at that version: with OSDs declared lost, the
        // only member besides the primary holding the shard was
        // mid-backfill, and the PG went round for good; replicated, a
        // stray's whole copy was the only good one left to mend a rotten
        // primary's from).
        let holds = need.v > 0
            && recovery::stored_version(s, self.coll, &recovery::oid(name))
                .is_ok_and(|v| v == Some(Some(need)));
        // Or whose rollback copy does (its object moved on past it).
        if let Some(p) = (!holds)
            .then(|| self.rollback_copy_at(s, name, need))
            .flatten()
        {
            return Ok(p);
        }
        if (self.missing.contains_key(name) || behind) && !holds {
            let why = format!("pg {}: this copy lacks {name}", self.id);
            return Err(self.lacks(s, name, need, why));
        }
        if let Err(e) = exec::validate(name, &[SubOp::Stat]) {
            return Err(RepError::Failed(format!("pg {}: {e}", self.id)));
        }
        // Erasure-coded: the puller rebuilds its shard from the shards;
        // this copy's bytes would be read for nothing.
        recovery::read_copy_with(s, self.coll, name, self.ec.is_none()).map_err(|e| match e {
            // (Answered: this copy holds no good one.)
            StoreError::Checksum { .. } => {
                RepError::Damaged(format!("pg {}: this copy is damaged: {e}", self.id))
            }
            e => RepError::Failed(format!("pg {}: {e}", self.id)),
        })
    }

    /// Erasure-coded: this copy's rollback copy of `name`, without its
    /// data, when it is at exactly version `need` (what a pull of that
    /// version gives when the object itself is not: a primary rolling an
    /// object back to it takes its xattrs from there).
    pub(super) fn rollback_copy_at(
        &self,
        s: &dyn ObjectStore,
        name: &str,
        need: Version,
    ) -> Option<Push> {
        if self.ec.is_none() || need.v == 0 {
            return None;
        }
        let rb = crate::ec::rollback_oid(&recovery::oid(name));
        if recovery::stored_version(s, self.coll, &rb).ok()? != Some(Some(need)) {
            return None;
        }
        let whole = s.read_whole(self.coll, &rb, false).ok()??;
        Some(Push {
            name: name.to_string(),
            version: need,
            copy: Some(recovery::ObjectCopy {
                data: bytes::Bytes::new(),
                attrs: whole.attrs.into_iter().collect(),
                omap_header: Vec::new(),
                omap: Vec::new(),
            }),
        })
    }

    /// This copy's log as an authority sends it: the run of entries that
    /// ends at its head (`None`: the store does not show it all yet).
    pub(super) fn own_log(&self, s: &dyn ObjectStore) -> Option<AuthLog> {
        let max = (self.log_entries_max as usize).saturating_add(64);
        let tail = self
            .log_tail(s)
            .max(self.info.last_update.v.saturating_sub(max as u64));
        let mut entries = recovery::read_log(s, self.coll, tail, max).ok()?;
        // The log is the run of entries that ends at the head (an entry
        // older than a gap is not part of it).
        let run = entries
            .windows(2)
            .rposition(|w| w[1].version.v != w[0].version.v + 1)
            .map_or(0, |i| i + 1);
        entries.drain(..run);
        let tail = entries.first().map_or(tail, |e| e.version.v - 1);
        let head = entries.last().map_or(Version::default(), |e| e.version);
        if head != self.info.last_update && !(entries.is_empty() && tail == self.info.last_update.v)
        {
            return None;
        }
        Some(AuthLog {
            info: self.info,
            entries,
        })
    }
}
