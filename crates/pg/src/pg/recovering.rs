//! Log recovery as the primary runs it: the authoritative log sent to
//! members, pushes of what they lack, and the OSD's recovery slots.
//!
//! It must never push an object to a member while a write to it is in
//! flight.

use super::*;

impl Pg {
    /// Send the authoritative log to the members waiting for it, once this
    /// copy's own commits have settled (the log is read from the store).
    pub(super) fn send_logs(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        self.send_logs_with(s, None, fx)
    }

    /// [`Pg::send_logs`] with this copy's log already read (`log`: as
    /// `own_log` gave it in this same step), so activation reads it once.
    pub(super) fn send_logs_with(
        &mut self,
        s: &dyn ObjectStore,
        log: Option<AuthLog>,
        fx: &mut Vec<Effect>,
    ) {
        let due: Vec<i32> = self
            .rec
            .merging
            .iter()
            .filter(|(_, t)| **t == 0)
            .map(|(o, _)| *o)
            .collect();
        if due.is_empty() || !self.settled() || self.now_ms < self.rec.log_retry_ms {
            return;
        }
        let Some(log) = log.or_else(|| self.own_log(s)) else {
            // The store does not show the whole log yet.
            self.rec.log_retry_ms = self.now_ms + PEER_RETRY_MS;
            return;
        };
        let ctx = self.rep_ctx();
        for to in due {
            let tid = self.take_tid();
            self.rec.merging.insert(to, tid);
            let msg = PeerMsg::Log {
                pg: self.id,
                from: self.whoami,
                ctx: ctx.clone(),
                log: log.clone(),
            };
            self.send(tid, to, msg, fx);
        }
    }

    pub(super) fn on_log_done(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        from: i32,
        result: Result<LogAnswer, RepError>,
        fx: &mut Vec<Effect>,
    ) {
        if self.rec.merging.get(&from) != Some(&tid) {
            return;
        }
        match result {
            Ok(a) => {
                self.rec.merging.remove(&from);
                // (Each answer replaces the last: a proof is never kept
                // past the merge that gave it.)
                if a.never_took.is_empty() {
                    self.rec.never_took.remove(&from);
                } else {
                    let names = a.never_took.into_iter().collect();
                    self.rec.never_took.insert(from, names);
                }
                if !a.missing.is_empty() {
                    self.rec
                        .missing
                        .insert(from, a.missing.into_iter().collect());
                }
                if let Some(done) = a.backfill {
                    tracing::info!(
                        "pg {}: backfilling osd.{from} from {done} (acting {:?})",
                        self.id,
                        self.map.acting
                    );
                    self.rec.backfill.insert(
                        from,
                        Backfill {
                            done,
                            step: BfStep::Idle,
                            retry_ms: 0,
                            leaves: Leaves::Unknown {
                                dirty: BTreeSet::new(),
                            },
                            cost: BfCost::default(),
                        },
                    );
                }
            }
            Err(_) => {
                self.rec.merging.insert(from, 0);
                self.rec.log_retry_ms = self.now_ms + RECOVERY_RETRY_MS;
            }
        }
        self.maybe_go_active(s, fx);
        self.backfill_some(s, fx);
        self.rerecord(fx);
        self.maybe_clear_temp(fx);
    }

    /// Start pushes until `RECOVERY_PUSHES_MAX` are in flight.
    pub(super) fn recover_some(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if !matches!(self.role, Role::Primary { .. })
            || !self.settled()
            || self.rec.missing.is_empty()
            || self.map.holds.recovery
            || !self.may_copy(fx)
        {
            return;
        }
        let now = self.now_ms;
        let mut names: BTreeSet<&String> = BTreeSet::new();
        for m in self.rec.missing.values() {
            names.extend(m.keys());
        }
        let todo: Vec<String> = names
            .into_iter()
            .filter(|n| !self.ops.busy.contains_key(*n))
            .filter(|n| self.rec.retry.get(*n).is_none_or(|at| *at <= now))
            .take(RECOVERY_PUSHES_MAX.saturating_sub(self.rec.pushing.len()))
            .cloned()
            .collect();
        for name in todo {
            self.push_now(s, name, fx);
        }
    }

    /// Push object `name` to every member that lacks it, holding client
    /// ops on it until they all have it (unless a write or push of it is
    /// already in flight).
    pub(super) fn push_now(&mut self, s: &dyn ObjectStore, name: String, fx: &mut Vec<Effect>) {
        // (Nor while a read holds it: the push, or a mend of a damaged
        // source, would take over the read's busy entry and free it.)
        if self.ops.inflight.values().any(|f| f.name == name)
            || self.rec.pushing.values().any(|(n, _)| *n == name)
            || self.reading(&name)
        {
            return;
        }
        let targets: BTreeSet<i32> = self
            .rec
            .missing
            .iter()
            .filter(|(_, m)| m.contains_key(&name))
            .map(|(o, _)| *o)
            .collect();
        if targets.is_empty() {
            return;
        }
        if self.ec.is_some() {
            // Each target lacks its own shard: rebuild, then push.
            return self.ec_push(s, name, targets, fx);
        }
        let push = match recovery::read_copy(s, self.coll, &name) {
            Ok(p) => p,
            Err(StoreError::Checksum { .. }) if self.may_mend(&name) => {
                // (The members that lack it cannot give it back.)
                return self.mend_source(s, name, &targets, fx);
            }
            Err(e) => {
                tracing_error(self.id, &format!("cannot read {name} to recover it: {e}"));
                self.rec.retry.insert(name, self.now_ms + RECOVERY_RETRY_MS);
                return;
            }
        };
        let tid = self.take_tid();
        let ctx = self.rep_ctx();
        for &to in &targets {
            let msg = PeerMsg::Push {
                pg: self.id,
                from: self.whoami,
                ctx: ctx.clone(),
                push: push.clone(),
            };
            self.send(tid, to, msg, fx);
        }
        self.rec.retry.remove(&name);
        self.ops.busy.entry(name.clone()).or_default();
        self.rec.pushing.insert(tid, (name, targets));
    }

    pub(super) fn on_push_done(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        from: i32,
        result: Result<(), RepError>,
        fx: &mut Vec<Effect>,
    ) {
        let Some((name, waiting)) = self.rec.pushing.get_mut(&tid) else {
            return;
        };
        if !waiting.remove(&from) {
            return;
        }
        let name = name.clone();
        let left = waiting.len();
        self.rec.next_copy_ms = self.now_ms + self.recovery_sleep_ms;
        match result {
            Ok(()) => {
                self.rec.pushed += 1;
                if let Some(m) = self.rec.missing.get_mut(&from) {
                    m.remove(&name);
                    if m.is_empty() {
                        self.rec.missing.remove(&from);
                    }
                }
                if let Some(m) = self.rec.never_took.get_mut(&from) {
                    m.remove(&name);
                    if m.is_empty() {
                        self.rec.never_took.remove(&from);
                    }
                }
            }
            Err(_) => {
                self.rec
                    .retry
                    .insert(name.clone(), self.now_ms + RECOVERY_RETRY_MS);
            }
        }
        if left == 0 {
            self.rec.pushing.remove(&tid);
            let queued = self.ops.busy.get(&name).is_some_and(|q| !q.is_empty());
            if !self.rec.retry.contains_key(&name) || !queued {
                // Ops on it go on (one still lacking it starts a push).
                self.release(s, &name, fx);
            }
        }
        self.rerecord(fx);
        self.recover_some(s, fx);
        self.maybe_clear_temp(fx);
    }

    /// Logs and pushes whose retry time has come.
    pub(super) fn retry_recovery(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if !self.is_primary() {
            return;
        }
        self.send_logs(s, fx);
        let now = self.now_ms;
        let due: Vec<String> = self
            .rec
            .retry
            .iter()
            .filter(|(n, at)| **at <= now && self.ops.busy.contains_key(*n))
            .map(|(n, _)| n.clone())
            .collect();
        if matches!(self.role, Role::Primary { .. }) && self.settled() {
            for name in due {
                self.push_now(s, name, fx);
            }
        }
        self.recover_some(s, fx);
        self.backfill_some(s, fx);
    }

    /// Whether this primary has members to recover or backfill that no
    /// flag holds back (or pushes under way).
    pub(super) fn wants_slot(&self) -> bool {
        let recovery = !self.rec.missing.is_empty()
            && (!self.map.holds.recovery || !self.rec.pushing.is_empty());
        matches!(self.role, Role::Primary { .. } | Role::Activating { .. })
            && (recovery
                || (self.rec.backfill.keys()).any(|&to| !self.backfill_toofull(to))
                    && !self.backfill_flagged())
    }

    /// Whether backfill target `to` waits for room: its device is too
    /// full and no chunk of it is under way (one under way is finished).
    pub(super) fn backfill_toofull(&self, to: i32) -> bool {
        self.map.toofull.contains(&to) && self.backfill_idle(to)
    }

    /// Whether no chunk of backfill target `to` is under way.
    fn backfill_idle(&self, to: i32) -> bool {
        (self.rec.backfill.get(&to)).is_some_and(|b| matches!(b.step, BfStep::Idle))
    }

    /// Whether the map's flags hold this PG's backfill back (`nobackfill`,
    /// or `norebalance` when it lacks no copy) with no chunk under way.
    pub(super) fn backfill_flagged(&self) -> bool {
        self.backfill_flags_hold() && self.rec.backfill.keys().all(|&to| self.backfill_idle(to))
    }

    /// Whether the map's flags hold back new backfill steps of this PG.
    pub(super) fn backfill_flags_hold(&self) -> bool {
        self.map.holds.backfill || (self.map.holds.rebalance && !self.lacks_copies())
    }

    /// Whether fewer than the pool's size of this primary's write set are
    /// complete (Ceph's degraded, as against only misplaced).
    fn lacks_copies(&self) -> bool {
        let (Role::Primary { write_set } | Role::Activating { write_set, .. }) = &self.role else {
            return false;
        };
        let size = self.map.pool.as_ref().map_or(0, |p| p.size as usize);
        self.complete_of(write_set).len() < size
    }

    /// Whether pushes and chunks no client op waits for may start now:
    /// this PG holds one of its OSD's recovery slots (asked for here when
    /// it has none) and the recovery sleep since the last one is over.
    pub(super) fn may_copy(&mut self, fx: &mut Vec<Effect>) -> bool {
        match self.rec.slot {
            Slot::Held(_) => self.now_ms >= self.rec.next_copy_ms,
            Slot::Asked(_) => false,
            Slot::None => {
                let ask = self.next_ask;
                self.next_ask += 1;
                self.rec.slot = Slot::Asked(ask);
                fx.push(Effect::Reserve {
                    ask,
                    priority: self.recovery_priority(),
                });
                false
            }
        }
    }

    /// The most degraded PGs recover first: by the full copies the write
    /// set is short of the pool's size (0: only misplaced copies), then by
    /// degraded object copies.
    pub(super) fn recovery_priority(&self) -> u64 {
        let (Role::Primary { write_set } | Role::Activating { write_set, .. }) = &self.role else {
            return 0;
        };
        let size = self.map.pool.as_ref().map_or(0, |p| p.size as usize);
        let short = size.saturating_sub(self.complete_of(write_set).len()) as u64;
        let objects = self.info.objects;
        let (degraded, _) = copies_short(objects, size, write_set.len(), self.rec.lacking(objects));
        (short << 40) | degraded.min((1 << 40) - 1)
    }

    /// A new recovery (new interval or peering): the old one's slot is
    /// given back.
    pub(super) fn reset_recovery(&mut self, fx: &mut Vec<Effect>) {
        if let Slot::Asked(ask) | Slot::Held(ask) = self.rec.slot {
            fx.push(Effect::Release { ask });
        }
        self.rec = Recovery::default();
    }
}
