//! Client ops on the primary: reads, writes (one at a time per object,
//! acknowledged once every write-set member has them), listings, and
//! what waits for the PG to serve.
//!
//! It must never acknowledge a write before every member of the write set
//! has it durable.

use super::*;

/// Client ops on the primary: writes in flight and the ops queued
/// behind them, ops and listings waiting for the PG to serve, and the
/// request ids of the writes the log holds.
#[derive(Default)]
pub(super) struct Ops {
    /// Writes in flight, by tid.
    pub inflight: BTreeMap<u64, InFlight>,
    /// Reads in flight beside the PG's task, by tid (see `read`).
    pub reads: BTreeMap<u64, read::Reading>,
    /// Objects with a write (or a read beside the task, or a mend) in
    /// flight, and the ops queued behind it.
    pub busy: BTreeMap<String, VecDeque<Pending>>,
    /// Ops waiting for the PG to accept writes.
    pub waiting: VecDeque<Pending>,
    /// Listings waiting for the PG to serve.
    pub lists: VecDeque<PendingList>,
    /// Request ids of the writes in the PG log, with their versions and
    /// whether the whole write set has them (oldest first in
    /// `recent_order`; at most `Pg::log_entries_max`).
    pub recent: HashMap<ReqId, (Version, bool)>,
    pub recent_order: VecDeque<ReqId>,
}

impl Pg {
    pub(super) fn on_op(&mut self, s: &dyn ObjectStore, p: Pending, fx: &mut Vec<Effect>) {
        let epoch = self.map.epoch;
        let fail = |p: &Pending, e: OpError| reply(p.token, Err(e), Version::default(), epoch);
        if p.op.epoch > self.map.epoch {
            return fx.push(fail(&p, OpError::Behind { epoch }));
        }
        if !self.is_primary() {
            return fx.push(fail(&p, OpError::WrongPrimary { epoch }));
        }
        // An op queued before a split, for an object a child took: the
        // client sends it again to the child's primary.
        if !self.owner().owns(&p.op.name) {
            return fx.push(fail(&p, OpError::WrongPrimary { epoch }));
        }
        if let Err(e) = exec::validate(&p.op.name, &p.op.ops) {
            return fx.push(fail(&p, e));
        }
        if let Some(q) = self.ops.busy.get_mut(&p.op.name) {
            if q.len() >= WAITING_MAX {
                return fx.push(fail(
                    &p,
                    OpError::Unavailable {
                        pg: self.id.to_string(),
                        have: 0,
                        need: 0,
                    },
                ));
            }
            q.push_back(p);
            return;
        }
        let writes = p.op.ops.iter().any(crate::exec::writes);
        let p = if writes {
            match self.scrub_holds(p) {
                Some(p) => p,
                // (Held while its object's chunk is compared.)
                None => return,
            }
        } else {
            p
        };
        if writes && self.rec.blocks(&recovery::oid(&p.op.name)) {
            // A backfill chunk covering this object is on its way: the
            // write follows it (so the target gets it whole).
            if self.rec.bf_blocked.len() >= WAITING_MAX {
                return fx.push(fail(&p, self.unavailable()));
            }
            self.rec.bf_blocked.push(p);
            return;
        }
        if matches!(self.role, Role::Primary { .. }) && self.rec.lacks(&p.op.name) {
            // A member lacks this object: recover it first (the op waits
            // behind the push; ops on other objects go on).
            let name = p.op.name.clone();
            if self.settled() {
                self.push_now(s, name.clone(), fx);
            }
            let q = self.ops.busy.entry(name).or_default();
            if q.len() >= WAITING_MAX {
                return fx.push(fail(&p, self.unavailable()));
            }
            q.push_back(p);
            return;
        }
        // A retry of a write in the agreed log is answered even while a
        // merge's hold makes new writes wait (the log goes with the
        // merge; it would be applied again after).
        if writes && self.map.holds.merge && self.active() && self.writable() {
            if let Some(r) = self.retry_answer(&p, true) {
                return fx.push(r);
            }
        }
        // (An unfound object is removed as the PG goes active.)
        // Nothing is served without the read lease (see `lease`).
        if !self.active()
            || !self.lease_holds()
            || (writes && !self.can_write())
            || self.ecs.unfound.contains_key(&p.op.name)
        {
            if self.ops.waiting.len() >= WAITING_MAX {
                return fx.push(fail(&p, self.unavailable()));
            }
            self.ops.waiting.push_back(p);
            return self.lease_hurry(fx);
        }
        self.execute(s, p, fx);
    }

    /// Whether ops are served: activated (the write set on record and
    /// every recovering member has merged the authoritative log), with at
    /// least min_size members serving (Ceph's `active`). While
    /// activating, or below min_size (`peered`), not even reads are
    /// served: this copy's log may end in writes no other member holds,
    /// which the next peering may roll back if this primary fails (a read
    /// of one that a later read did not see again broke linearizability
    /// in the simulator, both ways). Erasure-coded pools alike: a read
    /// below min_size decoded a write whose shards only this copy and a
    /// stray held; the stray went down, the next peering rolled the write
    /// back, and a later read returned the value before it.
    pub(super) fn active(&self) -> bool {
        match &self.role {
            Role::Primary { write_set } => self.serving(write_set) >= self.min_size(),
            _ => false,
        }
    }

    pub(super) fn unavailable(&self) -> OpError {
        let have = match &self.role {
            Role::Primary { write_set } | Role::Activating { write_set, .. } => {
                self.serving(write_set) as u32
            }
            Role::Down { osds } => {
                return OpError::Down {
                    pg: self.id.to_string(),
                    osds: osds.clone(),
                }
            }
            _ => 0,
        };
        OpError::Unavailable {
            pg: self.id.to_string(),
            have,
            need: self.min_size() as u32,
        }
    }

    /// The answer to write `p` if it is a retry of one already in the
    /// log: never applied again. One that failed on a replica is in no
    /// agreed log yet: the client retries after peering (with
    /// `committed_only`, no answer: it waits with the other writes).
    fn retry_answer(&self, p: &Pending, committed_only: bool) -> Option<Effect> {
        let epoch = self.map.epoch;
        let (v, committed) = p.op.reqid.and_then(|r| self.ops.recent.get(&r).copied())?;
        if committed_only && !committed {
            return None;
        }
        let result = if committed {
            Ok(vec![SubResult::None; p.op.ops.len()])
        } else {
            Err(OpError::WrongPrimary { epoch })
        };
        Some(reply(p.token, result, v, epoch))
    }

    pub(super) fn execute(&mut self, s: &dyn ObjectStore, p: Pending, fx: &mut Vec<Effect>) {
        debug_assert!(self.active(), "pg {}: an op ran while not active", self.id);
        debug_assert!(
            self.lease_holds(),
            "pg {}: an op ran without the read lease",
            self.id
        );
        let epoch = self.map.epoch;
        let Some(pool) = self.map.pool.as_ref() else {
            return fx.push(reply(
                p.token,
                Err(OpError::NoPool(self.id.pool)),
                Version::default(),
                epoch,
            ));
        };
        let size_max = pool.object_size_max;
        let oid = ObjectId::new(
            loligo_crush::hash::str_hash_rjenkins(p.op.name.as_bytes()),
            p.op.name.clone(),
        );
        let writes = p.op.ops.iter().any(crate::exec::writes);
        if writes {
            if let Some(r) = self.retry_answer(&p, false) {
                return fx.push(r);
            }
        }
        if self.ec.is_some() {
            return self.ec_execute(s, p, oid, fx);
        }
        if !writes {
            return self.read(s, p, oid, size_max, fx);
        }
        let (st, out) = match self
            .backend
            .execute(s, self.coll, &oid, &p.op.ops, size_max)
        {
            Ok(x) => x,
            Err(OpError::Damaged(why)) if self.may_mend(&p.op.name) => {
                return self.mend(s, p, why, fx)
            }
            Err(e) => return fx.push(reply(p.token, Err(e), Version::default(), epoch)),
        };
        if out.txn.is_empty() {
            return fx.push(reply(p.token, Ok(out.results), st.version, epoch));
        }
        // (Written over: a read finds out again whether it is damaged.)
        self.mend.unfound.remove(&p.op.name);
        self.write(Writer::Client(p), oid, &st, out, None, fx);
    }

    /// Log and distribute a write: `out.txn` for every member, or, on
    /// an erasure-coded pool, `shards[i]` for the member holding shard i
    /// (either way with the version attribute and the PG's records).
    pub(super) fn write(
        &mut self,
        by: Writer,
        oid: ObjectId,
        st: &ObjState,
        out: exec::Outcome,
        mut shards: Option<Vec<Transaction>>,
        fx: &mut Vec<Effect>,
    ) {
        let prev = self.info.last_update;
        let mut out = out;
        let mut txn = std::mem::replace(&mut out.txn, Transaction::new());
        if self.ec.is_none() {
            scrub_map::keep_data_digest(&mut txn, &oid);
        }
        let (t, version) = self.log_write(&by, &oid, st, txn, &out);
        if !matches!(self.role, Role::Primary { .. }) {
            return;
        }
        if let Some(shards) = &mut shards {
            self.trim_rollbacks(shards, by.name(), version);
        }
        let log_only = self.log_only_targets(&oid);
        let Role::Primary { write_set } = &self.role else {
            return;
        };
        // Not `take_tid`: `write_set` borrows the role.
        let tid = self.next_tid;
        self.next_tid += 1;
        self.applying.insert(tid, self.map.interval);
        // The Merkle tree: this copy's leaf stamp (its log entry again,
        // stamped) goes in its own transaction only; each replica stamps
        // its own leaf from the same change, which is the write's, not
        // this copy's tree's: it goes out even when this copy keeps no
        // tree (one whose load failed sent none, and its members' trees
        // missed the write).
        let c = tree::ObjChange {
            name: by.name().to_string(),
            old: st.exists.then_some(st.version),
            new: out.exists_after.then_some(version),
        };
        let own = match &mut self.tree {
            TreeState::Kept(k) => {
                k.change_logged(self.coll, &oid, c.old, c.new, tid, version.v, &t)
            }
            _ => Transaction::new(),
        };
        let change = Some(c);
        let ctx = RepCtx {
            interval: self.map.interval,
            epoch: self.map.epoch,
            acting: self.map.acting.clone(),
            prev,
            version,
            change,
        };
        let d = self.backend.distribute(WritePlan {
            acting: &self.map.acting,
            txn: t,
            own,
            write_set,
            log_only: &log_only,
            me: self.whoami,
            shards,
        });
        let waiting = write_set.iter().copied().collect();
        // Data is shared (`Bytes`): keeping the sends costs no copy.
        for (to, txn) in &d.members {
            let (pg, from) = (self.id, self.whoami);
            let (ctx, txn) = (ctx.clone(), txn.clone());
            self.send(tid, *to, PeerMsg::RepOp { pg, from, ctx, txn }, fx);
        }
        fx.push(Effect::Apply {
            tid,
            txn: d.own,
            sync: true,
        });
        let sent = d.members.into_iter().collect();
        self.ops.inflight.insert(
            tid,
            InFlight {
                token: by.token(),
                reqid: by.reqid(),
                name: by.name().to_string(),
                waiting,
                version,
                results: out.results,
                failed: None,
                ctx,
                sent,
                resend: BTreeMap::new(),
            },
        );
        // One write at a time per object: ops behind it queue in `busy`,
        // and a new entry here would drop them.
        debug_assert!(
            !self.ops.busy.contains_key(by.name()),
            "a second write to '{}' while one is in flight",
            by.name()
        );
        self.ops.busy.insert(by.name().to_string(), VecDeque::new());
    }

    /// The write's version and log entry: the PG's info moves on, and `t`
    /// (the op's changes) comes back as every member applies it, with the
    /// object's version attribute, the log entry and info.
    fn log_write(
        &mut self,
        by: &Writer,
        oid: &ObjectId,
        st: &ObjState,
        mut t: Transaction,
        out: &exec::Outcome,
    ) -> (Transaction, Version) {
        let prev = self.info.last_update;
        let version = self.next_version();
        if out.exists_after {
            t.setattr(
                self.coll,
                oid,
                VERSION_ATTR,
                postcard::to_stdvec(&version).unwrap_or_default(),
            );
        }
        self.info.last_update = version;
        match (st.exists, out.exists_after) {
            (false, true) => self.info.objects += 1,
            (true, false) => self.info.objects = self.info.objects.saturating_sub(1),
            _ => {}
        }
        self.info.bytes = (self.info.bytes as i64 + out.bytes_delta).max(0) as u64;
        let entry = LogEntry {
            version,
            name: by.name().to_string(),
            removed: !out.exists_after,
            reqid: by.reqid(),
            gave_up: by.gave_up(),
            // A give-up's object may be in any state on this copy; the
            // log below it is what it undoes.
            before: match by {
                Writer::Client(_) => Before::of(st),
                Writer::GiveUp(..) => Before::Unknown,
            },
            prev: Some(prev),
        };
        if let Some(r) = by.reqid() {
            self.remember(r, version, false);
        }
        self.log_into(&mut t, &entry, &self.info);
        (t, version)
    }

    /// Erasure-coded: rollback copies of writes every member has go with
    /// this write of `name` (each object's newest write only; a member
    /// without one removes nothing), and this write's becomes live.
    fn trim_rollbacks(&mut self, shards: &mut [Transaction], name: &str, version: Version) {
        let done: Vec<String> = self
            .ecs
            .rb_live
            .iter()
            .filter(|(n, (_, acked))| *acked && n.as_str() != name)
            .map(|(n, _)| n.clone())
            .take(RB_TRIMS_PER_WRITE)
            .collect();
        for n in &done {
            let rb = crate::ec::rollback_oid(&recovery::oid(n));
            for t in shards.iter_mut() {
                t.touch(self.coll, &rb).remove(self.coll, &rb);
            }
            self.ecs.rb_live.remove(n);
        }
        self.ecs.rb_live.insert(name.to_string(), (version, false));
    }

    /// Backfill targets whose cursor has not reached `oid`: they take a
    /// write's log entry only (the chunk that passes it copies it whole).
    /// Their objects there now differ from this copy's: the leaf is
    /// scanned whatever the trees said (and a scan of a range that left it
    /// out is made again).
    fn log_only_targets(&mut self, oid: &ObjectId) -> Vec<i32> {
        let log_only: Vec<i32> = self
            .rec
            .backfill
            .iter()
            .filter(|(_, b)| !b.done.covers(oid))
            .map(|(o, _)| *o)
            .collect();
        let Some(leaf) = self.tree().map(|t| t.leaf_of(oid.hash)) else {
            return log_only;
        };
        for to in &log_only {
            let Some(b) = self.rec.backfill.get_mut(to) else {
                continue;
            };
            if !b.leaves.dirty(leaf) {
                continue;
            }
            match &mut b.step {
                BfStep::Scanning { upto, .. } if upto.covers(oid) => {
                    b.step = BfStep::Idle;
                }
                BfStep::Scanned { theirs, .. } if theirs.end.covers(oid) => {
                    b.step = BfStep::Idle;
                }
                BfStep::Copying { ahead, .. } => {
                    let scanned = match ahead {
                        Ahead::Scanning { upto, .. } => upto.covers(oid),
                        Ahead::Scanned { theirs, .. } => theirs.end.covers(oid),
                        _ => false,
                    };
                    if scanned {
                        *ahead = Ahead::None;
                    }
                }
                _ => {}
            }
        }
        log_only
    }

    pub(super) fn done(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        from: i32,
        result: Result<(), RepError>,
        fx: &mut Vec<Effect>,
    ) {
        let Some(f) = self.ops.inflight.get_mut(&tid) else {
            return;
        };
        if let (Err(RepError::Failed(why)), true) = (&result, f.sent.contains_key(&from)) {
            // The message or its answer was lost, or the member could not
            // take it yet: the interval goes on, so the write must reach
            // every member of the write set. Send it again (a member
            // applies writes in order and answers a resend of one it
            // holds as a duplicate) until it is durable there or a new
            // map ends the interval.
            let tries = f.resend.get(&from).map_or(0, |r| r.1) + 1;
            if tries >= REP_TRIES_WARN {
                tracing::warn!(
                    pg = %self.id,
                    "write {:?} to osd.{from} failed {tries} times ({why}); sending again",
                    f.version
                );
            }
            f.resend.insert(from, (self.now_ms + REP_RETRY_MS, tries));
            return;
        }
        f.waiting.remove(&from);
        if let Err(e) = result {
            let e = match e {
                RepError::Stale(m) => RepError::Stale(format!("osd.{from}: {m}")),
                RepError::Failed(m)
                | RepError::Absent(m)
                | RepError::NeverTook(m)
                | RepError::Damaged(m) => RepError::Failed(format!("osd.{from}: {m}")),
            };
            // A stale-interval refusal decides the answer (retryable).
            if f.failed.is_none() || matches!(e, RepError::Stale(_)) {
                f.failed = Some(e);
            }
        }
        if !f.waiting.is_empty() {
            return;
        }
        let Some(f) = self.ops.inflight.remove(&tid) else {
            return;
        };
        let stale = matches!(f.failed, Some(RepError::Stale(_)));
        let durable = f.failed.is_none();
        let result = match f.failed {
            None => {
                if let Some(r) = f.reqid.and_then(|r| self.ops.recent.get_mut(&r)) {
                    r.1 = true;
                }
                if let Some(live) = self.ecs.rb_live.get_mut(&f.name) {
                    if live.0 == f.version {
                        live.1 = true;
                    }
                }
                Ok(f.results)
            }
            Some(RepError::Stale(_)) => Err(OpError::WrongPrimary {
                epoch: self.map.epoch,
            }),
            Some(
                RepError::Failed(e)
                | RepError::Absent(e)
                | RepError::NeverTook(e)
                | RepError::Damaged(e),
            ) => Err(OpError::Io(e)),
        };
        if let Some(token) = f.token {
            fx.push(reply(token, result, f.version, self.map.epoch));
        }
        if stale && matches!(self.role, Role::Primary { .. }) {
            // The write is on some members only: a new interval peers
            // again, so none stays behind while the PG shows clean (which
            // the Merkle root comparison of the copies caught).
            return self.member_ended_interval(s, fx);
        }
        if f.token.is_none() && durable {
            // An object given up is gone on every member: the complete
            // ones may be on record now. Not if a member refused it: on
            // record, the members would make the give-up a divergent
            // entry, rolled back, and the object would be waited for
            // again with nothing left to give it up (with OSDs declared
            // lost, a member refused two give-ups as stale, the record
            // named it anyway, and the PG waited for good).
            self.rerecord(fx);
        }
        // The next op on this object, if any.
        self.release(s, &f.name, fx);
        // A backfill chunk may have waited for this write.
        if self.rec.backfill.values().any(|b| {
            matches!(
                b.step,
                BfStep::Scanned { .. }
                    | BfStep::Copying {
                        ahead: Ahead::Scanned { .. },
                        ..
                    }
            )
        }) {
            self.backfill_some(s, fx);
        }
    }

    /// Replica writes whose resend is due go out again.
    pub(super) fn resend_writes(&mut self, fx: &mut Vec<Effect>) {
        let now = self.now_ms;
        let (pg, from) = (self.id, self.whoami);
        let mut due = Vec::new();
        for (&tid, f) in &mut self.ops.inflight {
            for (&to, (at, _)) in &mut f.resend {
                let Some(txn) = f.sent.get(&to) else {
                    continue;
                };
                if *at <= now && *at != u64::MAX {
                    // Sent: the next failure schedules it again.
                    *at = u64::MAX;
                    let ctx = f.ctx.clone();
                    let txn = txn.clone();
                    due.push((tid, to, PeerMsg::RepOp { pg, from, ctx, txn }));
                }
            }
        }
        for (tid, to, msg) in due {
            self.send(tid, to, msg, fx);
        }
    }

    /// Whether writes are served: [`Pg::writable`], and no merge's hold.
    pub(super) fn can_write(&self) -> bool {
        self.writable() && !self.map.holds.merge
    }

    /// Whether writes could be served but for a merge's hold.
    fn writable(&self) -> bool {
        let Role::Primary { write_set } = &self.role else {
            return false;
        };
        // Erasure-coded: only under a record of this interval naming at
        // least k complete members (see `maybe_activate`).
        let recorded = self.ec.as_ref().is_none_or(|st| {
            self.map
                .record
                .as_ref()
                .is_some_and(|r| r.interval == self.map.interval && r.osds.len() >= st.k())
        });
        recorded && self.serving(write_set) >= self.min_size() && !self.rec.waiting_moved_drain
    }

    pub(super) fn min_size(&self) -> usize {
        self.map
            .pool
            .as_ref()
            .map_or(usize::MAX, |p| p.min_size as usize)
    }

    /// A listing: served by an active primary (like a read), waits while
    /// the PG peers, refused by anyone else.
    pub(super) fn on_list(&mut self, s: &dyn ObjectStore, l: PendingList, fx: &mut Vec<Effect>) {
        let token = l.token;
        if !self.is_primary() {
            let result = Err(OpError::WrongPrimary {
                epoch: self.map.epoch,
            });
            return fx.push(Effect::ListReply { token, result });
        }
        // (As ops: not below min_size, nor without the read lease.)
        if !self.active() || !self.lease_holds() {
            if self.ops.lists.len() >= WAITING_MAX {
                let result = Err(self.unavailable());
                return fx.push(Effect::ListReply { token, result });
            }
            return self.ops.lists.push_back(l);
        }
        let result = list(s, self.coll, l.start, l.limit);
        fx.push(Effect::ListReply { token, result });
    }

    pub(super) fn rerun_lists(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        for l in std::mem::take(&mut self.ops.lists) {
            self.on_list(s, l, fx);
        }
    }

    /// Offer every waiting op again (after a change of role).
    pub(super) fn rerun_waiting(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let waiting: Vec<Pending> = std::mem::take(&mut self.ops.waiting).into();
        for p in waiting {
            self.on_op(s, p, fx);
        }
        self.rerun_lists(s, fx);
    }

    /// Run the next op queued on object `name`, if any.
    pub(super) fn release(&mut self, s: &dyn ObjectStore, name: &str, fx: &mut Vec<Effect>) {
        let Some(mut q) = self.ops.busy.remove(name) else {
            return;
        };
        if q.is_empty() && self.ecs.read_damaged.contains_key(name) {
            return self.ec_repair_read_damage(s, name, fx);
        }
        if let Some(next) = q.pop_front() {
            self.on_op(s, next, fx);
            if let Some(rest) = self.ops.busy.get_mut(name) {
                rest.extend(q);
            } else {
                for p in q {
                    self.on_op(s, p, fx);
                }
            }
        }
    }

    /// After a commit: what waited for this copy's commits to settle.
    pub(super) fn on_settled(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if self.settled_all() {
            if !self.ecs.moved_fresh && self.ec.is_some() {
                // A map that came while an older interval's transactions
                // were in flight read the shard this copy holds before
                // they landed (with positions moving, a copy still empty
                // at the map took its old position's first write after,
                // and counted as complete at its new one). Read again now
                // that all have landed.
                self.ecs.moved_fresh = true;
                let acting = self.map.acting.clone();
                self.read_moved(s, &acting);
            }
            self.rerun_queries(fx);
        }
        if !self.settled() {
            return;
        }
        self.rerun_held_logs(s, fx);
        if self.is_primary() {
            // (It waits for this interval's transactions too.)
            self.maybe_activate(s, fx);
            self.pull_some(s, fx);
            self.send_logs(s, fx);
            self.recover_some(s, fx);
            self.backfill_some(s, fx);
            self.scrub_step(s, fx);
        }
    }

    /// Everything that waited past its deadline is answered: ops and
    /// listings with why the PG cannot serve, replica writes whose
    /// predecessor never came, queries this PG's map never caught up with.
    pub(super) fn expire(&mut self, fx: &mut Vec<Effect>) {
        let now = self.now_ms;
        let err = self.unavailable();
        let epoch = self.map.epoch;
        for p in take_expired(&mut self.ops.waiting, now, |p| p.deadline_ms) {
            fx.push(reply(p.token, Err(err.clone()), Version::default(), epoch));
        }
        if let Role::Peering { want, .. } = &self.role {
            // Infos that never came: ask again (a query can be lost with
            // a member that restarted between two maps this OSD saw).
            if now >= self.peer_asked_ms + PEER_RETRY_MS {
                for to in want.clone() {
                    self.query_info(to, fx);
                }
                self.peer_asked_ms = now;
            }
        }

        for w in take_expired(&mut self.rep.waiting, now, |w| w.deadline_ms) {
            fx.push(Effect::ack(
                w.token,
                Err(RepError::Failed(format!(
                    "pg {}: write {:?} waited for {:?}, which never came",
                    self.id, w.ctx.version, w.ctx.prev
                ))),
            ));
        }
        for q in take_expired(&mut self.held.queries, now, |q| q.deadline_ms) {
            fx.push(peer::info_answer(
                q.token,
                Err(format!(
                    "pg {}: this OSD's map is at epoch {epoch}, the query needs {}",
                    self.id, q.epoch
                )),
            ));
        }
        for h in take_expired(&mut self.held.copies, now, |h| h.deadline_ms) {
            fx.push(Effect::ack(
                h.token,
                Err(RepError::Failed(format!(
                    "pg {}: a copy from osd.{} follows writes up to {:?} that never came",
                    self.id, h.from, h.ctx.version
                ))),
            ));
        }
        for h in take_expired(&mut self.held.logs, now, |h| h.deadline_ms) {
            fx.push(Effect::answer(
                h.token,
                Err(RepError::Failed(format!(
                    "pg {}: the log from osd.{} waited for this copy's map or commits",
                    self.id, h.from
                ))),
                PeerReply::Merged,
            ));
        }
        for l in take_expired(&mut self.ops.lists, now, |l| l.deadline_ms) {
            fx.push(Effect::ListReply {
                token: l.token,
                result: Err(err.clone()),
            });
        }
    }
}
