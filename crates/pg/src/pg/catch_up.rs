//! A primary that is behind: it takes a complete member's log and pulls
//! the objects it lacks (or, with OSDs declared lost, goes on from its
//! own log and gives up what no copy holds).
//!
//! It must never take a head below an acknowledged write.

use super::*;

impl Pg {
    /// An erasure-coded primary that cannot catch up now (a pull failed,
    /// or no acting member can take a primary_temp): it peers again after
    /// a while.
    pub(super) fn ec_behind(&mut self, why: &str) {
        tracing::warn!(pg = %self.id, "erasure-coded primary is behind: {why}; peering again shortly");
        self.role = Role::Behind;
        self.rec.peer_again_ms = self.now_ms + RECOVERY_RETRY_MS;
    }

    /// Pulling: a pull or the log failed, or the logs do not overlap.
    pub(super) fn pull_failed(&mut self, why: &str, fx: &mut Vec<Effect>) {
        if let Role::Pulling { from, complete, .. } = &self.role {
            tracing::info!(
                "pg {}: pulling from osd.{from}: {why}; handing over",
                self.id
            );
            let complete = complete.clone();
            self.hand_over(complete, fx);
        }
    }

    /// Erasure-coded pulling: no member could give `name` at the version
    /// this copy needs, or its shards could not be rebuilt. With every
    /// failure definitive (a copy lacked it) and no OSD that may hold more
    /// (`unfound_fate`): it is unfound, and given up (removed or rolled
    /// back) once the PG activates. Otherwise the pulling fails as before.
    pub(super) fn pull_unfound(
        &mut self,
        s: &dyn ObjectStore,
        name: String,
        why: &str,
        found: Option<usize>,
        proven: &BTreeSet<i32>,
        fx: &mut Vec<Effect>,
    ) {
        let need = self.missing.get(&name).copied().unwrap_or_default();
        let fate = self.unfound_fate(s, &name, need, found, proven);
        let doubt = self.rec.pull_doubt.contains(&name);
        if fate == erasure::Unfound::Wait || doubt {
            if !doubt {
                self.ecs.unfound_waiting.insert(name.clone());
            }
            return self.pull_failed(why, fx);
        }
        self.ecs.unfound_waiting.remove(&name);
        tracing::warn!(
            pg = %self.id,
            "'{name}' is on fewer than k up OSDs ({why}), and no OSD that may hold more is \
             coming back: it will be given up ({fate:?})"
        );
        self.ecs.unfound.insert(name, fate);
        self.pull_some(s, fx);
    }

    /// Erasure-coded: this copy's log reaches the head and no other whole
    /// copy's does (with the record short of k members; or with it whole,
    /// when every other copy's log is past the head or mid-backfill). A
    /// copy mid-backfill is taken as it is (`adopt_backfilled`, short
    /// record only); then it pulls what it lacks from the acting members
    /// and strays in turn, and what none can give is unfound
    /// (`pull_unfound`).
    pub(super) fn ec_pull_own(
        &mut self,
        s: &dyn ObjectStore,
        asked: BTreeMap<i32, Option<PeerInfo>>,
        fx: &mut Vec<Effect>,
    ) {
        if self.backfill.is_some() {
            let Some(log) = self.own_log(s) else {
                return self.ec_behind("the store does not show the whole log");
            };
            // With the record whole, only a log that names every write
            // the PG ever took: nothing may be given up, so no object the
            // log no longer names may be missed either.
            if !self.may_give_up() && log.tail() > 0 {
                return self.ec_behind(
                    "a copy mid-backfill whose log was trimmed is taken as it is only once the \
                     record is short of k",
                );
            }
            if let Err(e) = self.adopt_backfilled(s, &log, fx) {
                return self.ec_behind(&e);
            }
        }
        let Some(from) = self
            .map
            .acting
            .iter()
            .copied()
            .find(|&o| o >= 0 && o != self.whoami)
        else {
            return self.wait_for_record();
        };
        tracing::warn!(
            pg = %self.id,
            "no other copy is whole at the head: going on from this copy's log, pulling {} \
             objects",
            self.missing.len()
        );
        self.role = Role::Pulling {
            from,
            complete: Vec::new(),
            infos: asked,
            log_tid: 0,
            pulls: BTreeMap::new(),
        };
        self.pull_some(s, fx);
    }

    /// Roll this copy back to `head`, a version its own log holds: its own
    /// log up to there is merged in as the authority's would be (entries
    /// past it are rolled back, their objects missing where they cannot
    /// be). The object and byte counts stay this copy's own: the log does
    /// not say what the rolled-back writes changed.
    pub(super) fn rewind_own(
        &mut self,
        s: &dyn ObjectStore,
        head: Version,
        fx: &mut Vec<Effect>,
    ) -> Result<(), String> {
        if !self.settled() {
            return Err("this copy's commits are not durable yet".into());
        }
        let Some(mut log) = self.own_log(s) else {
            return Err("the store does not show the whole log".into());
        };
        log.entries.retain(|e| e.version.v <= head.v);
        if log.entries.last().map(|e| e.version) != Some(head) {
            return Err(format!("its log does not hold {head:?}"));
        }
        log.info.last_update = head;
        let merged = recovery::merge_owned(
            s,
            self.coll,
            self.info.last_update,
            &self.missing,
            None,
            &log,
            true,
            self.owner(),
        )?;
        let recovery::Merge::Merged { txn, missing, info } = merged else {
            return Err("its own log does not overlap itself".into());
        };
        // (Pulling an object at no known version goes round for good.)
        if let Some((name, _)) = missing.iter().find(|(_, v)| v.v == 0) {
            return Err(format!(
                "rolled back, '{name}' would be at no known version"
            ));
        }
        tracing::warn!(
            pg = %self.id,
            "rolling this copy back from {:?} to the head {head:?}, which k copies share",
            self.info.last_update
        );
        self.take_merged(txn, missing, info, fx);
        Ok(())
    }

    /// Queue a merge's transaction on this (primary's) copy and take its
    /// missing set and info as this copy's.
    pub(super) fn take_merged(
        &mut self,
        mut txn: Transaction,
        missing: BTreeMap<String, Version>,
        info: PgInfo,
        fx: &mut Vec<Effect>,
    ) {
        self.mark_shard(&mut txn);
        self.guard_log(&mut txn);
        self.missing = missing;
        self.info = info;
        // Writes it held past the authority's head were rolled back: as a
        // replica later, its log ends here (else a stale mark refuses
        // every write of the next primary).
        self.rep.high = info.last_update;
        self.apply_own(txn, true, fx);
    }

    /// Objects this copy lacks other than unfound ones (those are removed
    /// as the PG goes active).
    pub(super) fn lacks_beyond_unfound(&self) -> usize {
        self.missing
            .keys()
            .filter(|n| !self.ecs.unfound.contains_key(*n))
            .count()
    }

    /// The OSDs an erasure-coded pull may ask, in turn: the other acting
    /// members, then strays.
    pub(super) fn pull_candidates(&self) -> Vec<i32> {
        let strays = self
            .rec
            .strays
            .keys()
            .filter(|o| !self.map.acting.contains(o));
        self.map
            .acting
            .iter()
            .chain(strays)
            .copied()
            .filter(|&o| o >= 0 && o != self.whoami)
            .collect()
    }

    /// Erasure-coded pulling: ask the next member for `name` (its copy
    /// gives the object's xattrs and size; the data is rebuilt from the
    /// shards). Whether there was one left to ask.
    pub(super) fn ec_pull_next(&mut self, name: &str, fx: &mut Vec<Effect>) -> bool {
        // Strays last: a member of the recorded write set out of the
        // acting set may be the only one left that took the write (with
        // OSDs declared lost, every acting member lacked the object, and
        // the primary role went back and forth between them for good).
        let candidates = self.pull_candidates();
        let tries = self.rec.pull_tries.entry(name.to_string()).or_insert(0);
        *tries += 1;
        let Some(&to) = candidates.get(*tries - 1) else {
            self.rec.pull_tries.remove(name);
            return false;
        };
        let tid = self.take_tid();
        self.pull(tid, to, name, fx);
        if let Role::Pulling { pulls, .. } = &mut self.role {
            pulls.insert(tid, name.to_string());
        }
        true
    }

    /// Pulling: the complete member's log is here; merge it into this copy
    /// (as a member would), then pull what this copy lacks.
    pub(super) fn on_get_log_done(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        from: i32,
        result: Result<AuthLog, RepError>,
        fx: &mut Vec<Effect>,
    ) {
        if !matches!(&self.role, Role::Pulling { from: f, log_tid, .. } if *f == from && *log_tid == tid)
        {
            return;
        }
        let auth = match result {
            Ok(a) => a,
            Err(e) => return self.pull_failed(&format!("{e:?}"), fx),
        };
        if !self.settled() {
            return self.pull_failed("this copy's commits are not durable yet", fx);
        }
        let mine = match stored_info(s, self.coll) {
            Ok(i) => i.unwrap_or_default().last_update,
            Err(e) => return self.pull_failed(&format!("this copy's info: {e}"), fx),
        };
        let merged = recovery::merge_owned(
            s,
            self.coll,
            mine,
            &self.missing,
            self.backfill.as_ref(),
            &auth,
            self.ec.is_some(),
            self.owner(),
        );
        match merged {
            Ok(recovery::Merge::Merged { txn, missing, info }) => {
                self.take_merged(txn, missing, info, fx);
                if let Role::Pulling { log_tid, .. } = &mut self.role {
                    *log_tid = 0;
                }
                self.pull_some(s, fx);
            }
            Ok(recovery::Merge::NoOverlap) if self.ec.is_some() => {
                // Erasure-coded: this copy needs a backfill, which another
                // primary must do.
                let complete = match &self.role {
                    Role::Pulling { complete, .. } => complete.clone(),
                    _ => Vec::new(),
                };
                self.hand_over(complete, fx)
            }
            Ok(recovery::Merge::NoOverlap) => self.pull_failed("the logs do not overlap", fx),
            Err(e) => self.pull_failed(&e.to_string(), fx),
        }
    }

    /// Pulling: ask for the next objects this copy lacks; once it lacks
    /// none and all is durable, activate as peering would have.
    pub(super) fn pull_some(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let Role::Pulling {
            from,
            log_tid: 0,
            pulls,
            ..
        } = &self.role
        else {
            return;
        };
        let (from, busy) = (*from, pulls.len());
        if self.lacks_beyond_unfound() == 0 {
            // Every pulled object must be in the store (reads follow).
            if busy == 0 && self.applying.is_empty() && self.settled() {
                if let Role::Pulling { infos, .. } = std::mem::replace(&mut self.role, Role::Stray)
                {
                    tracing::info!("pg {}: pulled what it lacked from osd.{from}", self.id);
                    // The merge may have rolled back writes this copy had
                    // logged: retries of those must not be answered as
                    // done.
                    self.load_recent(s);
                    self.role = Role::Peering {
                        want: BTreeSet::new(),
                        infos,
                    };
                    self.maybe_activate(s, fx);
                }
            }
            return;
        }
        if self.rec.lost.is_some() {
            return self.lost_pull_some(s, fx);
        }
        let todo: Vec<String> = self
            .missing
            .keys()
            .filter(|n| !pulls.values().any(|p| p == *n) && !self.ecs.unfound.contains_key(*n))
            .take(RECOVERY_PUSHES_MAX.saturating_sub(busy))
            .cloned()
            .collect();
        for name in todo {
            let tid = self.take_tid();
            self.pull(tid, from, &name, fx);
            if let Role::Pulling { pulls, .. } = &mut self.role {
                pulls.insert(tid, name);
            }
        }
    }

    pub(super) fn on_pull_done(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        from: i32,
        result: Result<Push, RepError>,
        fx: &mut Vec<Effect>,
    ) {
        if let Some((name, to, rest)) = self.rec.revert_pulls.remove(&tid) {
            return self.revert_source_pulled(s, name, to, rest, result, fx);
        }
        if self.on_mend_pulled(s, tid, from, &result, fx) {
            return;
        }
        let ec = self.ec.is_some();
        let lost = self.rec.lost.is_some();
        let Role::Pulling { from: f, pulls, .. } = &mut self.role else {
            return;
        };
        // Erasure-coded pulls may go to any member (see `ec_pull_next`),
        // and so may pulls of what is left (see `pull_what_is_left`).
        if *f != from && !ec && !lost {
            return;
        }
        let Some(name) = pulls.remove(&tid) else {
            return;
        };
        if lost {
            return self.lost_pulled(s, name, result, fx);
        }
        let push = match result {
            Ok(p) => p,
            Err(e) => {
                if !matches!(e, RepError::Absent(_) | RepError::NeverTook(_)) {
                    self.rec.pull_doubt.insert(name.clone());
                }
                if matches!(e, RepError::NeverTook(_)) {
                    let proven = self.rec.pull_never_took.entry(name.clone()).or_default();
                    proven.insert(from);
                }
                if ec && self.ec_pull_next(&name, fx) {
                    return;
                }
                // Every member and stray asked said it lacks the object
                // (unless a failure put it in doubt): no shard found.
                let proven = self.rec.pull_never_took.remove(&name).unwrap_or_default();
                return self.pull_unfound(s, name, &format!("{e:?}"), Some(0), &proven, fx);
            }
        };
        let need = self.missing.get(&name).copied().unwrap_or_default();
        // An object the log removes comes back absent (version zero).
        let removed = push.copy.is_none() && need.v > 0 && self.log_removes(s, &name, need);
        // Erasure-coded: the shards are gathered at the pushed version, so
        // it must be the one the log needs (a member's newer one may be a
        // divergent write it has yet to roll back). With the version
        // unknown (the log was trimmed), only a member whose log reaches
        // the head answers for it (one that lacks the object refuses the
        // pull): else a new, empty member's absence is taken, and an
        // acknowledged object removed.
        let at_head = |o: i32| match &self.role {
            Role::Pulling { infos, .. } => infos
                .get(&o)
                .copied()
                .flatten()
                .is_some_and(|i| !i.backfill && i.info.last_update == self.info.last_update),
            _ => false,
        };
        let wrong = if ec && !removed {
            if need.v > 0 {
                push.version != need
            } else {
                !at_head(from) || push.version.v > self.info.last_update.v
            }
        } else {
            push.version < need && !removed
        };
        if push.name != name || wrong {
            if ec && push.name == name && self.ec_pull_next(&name, fx) {
                return;
            }
            if push.name != name {
                self.rec.pull_doubt.insert(name.clone());
            }
            let why = format!(
                "osd.{from} holds {name} at {:?}, need {need:?}",
                push.version
            );
            // Erasure-coded, with every member asked: a record member that
            // proved it never took the write still decides its fate (with
            // OSDs declared lost, the one copy not lacking the object held
            // a newer, divergent version, the proof was dropped, and the
            // two record members handed the PG to each other for good).
            let (found, proven) = match ec && push.name == name {
                true => (
                    Some(0),
                    self.rec.pull_never_took.remove(&name).unwrap_or_default(),
                ),
                false => (None, BTreeSet::new()),
            };
            return self.pull_unfound(s, name, &why, found, &proven, fx);
        }
        if self.ec.is_some() {
            // The member sent its own shard: this primary's is rebuilt.
            return self.ec_pulled(s, push, fx);
        }
        self.apply_pulled(s, push, fx);
    }

    /// Pulling: apply a copy of an object this primary lacked, then pull
    /// more.
    pub(super) fn apply_pulled(&mut self, s: &dyn ObjectStore, push: Push, fx: &mut Vec<Effect>) {
        match self.land_pulled(s, push, Transaction::new(), fx) {
            Ok(()) => self.pull_some(s, fx),
            Err(e) if self.rec.lost.is_some() => self.lost_failed(&e.to_string()),
            Err(e) => self.pull_failed(&e.to_string(), fx),
        }
    }

    /// Pulling what is left met an error of this copy's store: there is
    /// no complete copy to hand over to, so it peers (and pulls) again
    /// after a while.
    pub(super) fn lost_failed(&mut self, why: &str) {
        tracing::warn!(
            "pg {}: pulling what is left: {why}; peering again shortly",
            self.id
        );
        self.role = Role::Behind;
        self.rec.lost = None;
        self.rec.lost_retry = true;
        self.rec.peer_again_ms = self.now_ms + RECOVERY_RETRY_MS;
    }

    /// Queue the transaction that puts a pulled copy of an object (or its
    /// absence) in place of this copy's, and no longer count it missing;
    /// `more`'s ops go in the same transaction (if they rewrite the log,
    /// the kept tree's pages go with them).
    pub(super) fn land_pulled(
        &mut self,
        s: &dyn ObjectStore,
        push: Push,
        more: Transaction,
        fx: &mut Vec<Effect>,
    ) -> Result<(), StoreError> {
        let t = self.take_tid();
        let mut txn = recovery::push_txn(self.coll, &push, self.push_prior(s, &push));
        self.push_tree_changes(s, std::slice::from_ref(&push), t, &mut txn)?;
        txn.ops.extend(more.ops);
        self.guard_log(&mut txn);
        self.missing.remove(&push.name);
        self.rec.pushed += 1;
        self.applying.insert(t, self.map.interval);
        fx.push(Effect::Apply {
            tid: t,
            txn,
            sync: true,
        });
        Ok(())
    }

    /// Every member of the recorded write set is this copy or answered
    /// the peering with a copy of the PG (true without a record).
    pub(super) fn record_all_heard(&self, asked: &BTreeMap<i32, Option<PeerInfo>>) -> bool {
        self.map.record.as_ref().is_none_or(|r| {
            r.osds
                .iter()
                .all(|o| *o == self.whoami || asked.get(o).is_some_and(Option::is_some))
        })
    }

    /// Replicated, at peering: no copy is complete at the head `newest`,
    /// and every member of the recorded write set answered with its copy
    /// (or there is no record: each member was declared lost, `osd lost`).
    /// Each record member holds every acknowledged write, so an object
    /// none of them holds at the version the log names was written by a
    /// write never acknowledged, or held only by OSDs since declared
    /// lost: no copy that has it is coming back. The PG goes on with what
    /// the up copies hold. A primary at the head pulls what its copy lacks
    /// from any up copy that holds it; an object none holds at the logged
    /// version is rolled back to the newest older copy of it found (a
    /// record member's, if any: the acknowledged version), or removed, by
    /// a new log entry every copy then follows (what Ceph's
    /// `mark_unfound_lost revert` does; declaring the OSDs lost gave up
    /// the writes only they held). A primary behind the head hands over
    /// to a copy at it; with only copies mid-backfill there, one is taken
    /// as it is (`adopt_backfilled`); with none, the PG is down.
    pub(super) fn pull_what_is_left(
        &mut self,
        s: &dyn ObjectStore,
        newest: Version,
        mine: &PeerInfo,
        asked: BTreeMap<i32, Option<PeerInfo>>,
        fx: &mut Vec<Effect>,
    ) {
        let at_head = |backfill: bool| -> Vec<i32> {
            asked
                .iter()
                .filter_map(|(o, i)| Some((*o, (*i)?)))
                .filter(|(_, i)| i.backfill == backfill && i.info.last_update == newest)
                .map(|(o, _)| o)
                .collect()
        };
        let (whole, backfilling) = (at_head(false), at_head(true));
        let mine_at_head = mine.info.last_update == newest;
        if !mine_at_head || mine.backfill {
            if !whole.is_empty() {
                return self.hand_over(whole, fx);
            }
            // Only copies mid-backfill reach the head: one of them is
            // taken as it is (this one if it can, below).
            if !mine_at_head {
                if !backfilling.is_empty() {
                    return self.hand_over(backfilling, fx);
                }
                tracing::warn!(
                    "pg {}: down: no up copy holds the log up to {newest}, and none that \
                     did is coming back",
                    self.id
                );
                self.role = Role::Down { osds: Vec::new() };
                return;
            }
        }
        let Some(log) = self.own_log(s) else {
            return self.lost_failed("the store does not show the whole log");
        };
        if mine.backfill {
            if let Err(e) = self.adopt_backfilled(s, &log, fx) {
                return self.lost_failed(&e);
            }
        }
        let mut sources: Vec<(Version, i32)> = asked
            .iter()
            .filter_map(|(o, i)| Some((*o, (*i)?)))
            .filter(|(_, i)| !i.backfill && i.info.last_update.v > 0)
            .map(|(o, i)| (i.info.last_update, o))
            .collect();
        sources.sort_unstable_by(|a, b| b.cmp(a));
        tracing::warn!(
            "pg {}: no copy is complete at the head and none that was is coming back: \
             pulling {} objects from any up copy ({} to ask); what none holds at its \
             logged version is rolled back or removed",
            self.id,
            self.missing.len(),
            sources.len()
        );
        let mut history: BTreeMap<String, BTreeSet<Version>> = BTreeMap::new();
        let mut removals: BTreeMap<String, BTreeSet<Version>> = BTreeMap::new();
        let mut befores = BTreeMap::new();
        let owner = self.owner();
        for e in (log.entries.iter()).filter(|e| !e.is_reset() && owner.owns(&e.name)) {
            let to = if e.removed {
                &mut removals
            } else {
                befores.insert((e.name.clone(), e.version), e.before);
                &mut history
            };
            to.entry(e.name.clone()).or_default().insert(e.version);
        }
        self.rec.lost = Some(LostPulls {
            sources: sources.into_iter().map(|(_, o)| o).collect(),
            tried: BTreeMap::new(),
            history,
            removals,
            befores,
            tail: log.tail(),
        });
        self.role = Role::Pulling {
            from: self.whoami,
            complete: Vec::new(),
            infos: asked,
            log_tid: 0,
            pulls: BTreeMap::new(),
        };
        self.pull_some(s, fx);
    }

    /// Pulling what is left (replicated), or going on from its own log
    /// (erasure-coded, `ec_pull_own`): no copy but mid-backfill ones
    /// holds the log up to the head, and this is one of them. It is taken as it
    /// is: its backfill ends where it stands, and every object whose
    /// newest log entry it does not hold as logged counts as missing
    /// (then pulled, rolled back or removed as any other). Objects the
    /// backfill had yet to copy that the log no longer names are gone
    /// (Ceph leaves such a PG `incomplete` until an operator marks a copy
    /// complete; declaring the OSDs lost already said to go on).
    pub(super) fn adopt_backfilled(
        &mut self,
        s: &dyn ObjectStore,
        log: &AuthLog,
        fx: &mut Vec<Effect>,
    ) -> Result<(), String> {
        let mut newest: BTreeMap<&str, &LogEntry> = BTreeMap::new();
        let owner = self.owner();
        for e in (log.entries.iter()).filter(|e| !e.is_reset() && owner.owns(&e.name)) {
            newest.insert(&e.name, e);
        }
        let mut t = Transaction::new();
        let mut missing = self.missing.clone();
        // Erasure-coded: an object holds its version only as this copy's
        // position's shard. One mid-backfill after its OSD moved still has
        // its old position's shards where the backfill has not reached
        // (with OSDs declared lost, such objects were taken as held, the
        // copy went active without its own shards, and reads of them
        // waited for good).
        let position = self.shard_of(self.whoami);
        for (name, e) in newest {
            if missing.contains_key(name) {
                continue;
            }
            let oid = recovery::oid(name);
            let held =
                recovery::stored_version(s, self.coll, &oid).map_err(|x| format!("{name}: {x}"))?;
            let right_shard = match (&self.ec, position, held) {
                (None, _, _) | (Some(_), _, None) => true,
                (Some(_), None, Some(_)) => false,
                (Some(_), Some(c), Some(_)) => crate::ec::holds_shard(s, self.coll, &oid, c)
                    .map_err(|x| format!("{name}: {x}"))?,
            };
            let as_logged = right_shard
                && match held {
                    None => e.removed,
                    Some(v) => !e.removed && v == Some(e.version),
                };
            if !as_logged {
                missing.insert(name.to_string(), e.version);
                t.set_record(
                    self.coll,
                    &recovery::missing_key(name),
                    record::encode_missing(&e.version),
                );
            }
        }
        // Erasure-coded: objects the log no longer names may hold another
        // position's shard too (the case above): each is missing at the
        // version it holds, so its own shard is rebuilt (or it is given
        // up) before the copy counts as complete.
        if self.ec.is_some() {
            let logged: HashSet<&str> = log.entries.iter().map(|e| e.name.as_str()).collect();
            let mut start: Option<ObjectId> = None;
            loop {
                let (page, next) = s
                    .list(self.coll, start.as_ref(), 1024)
                    .map_err(|x| x.to_string())?;
                for o in page {
                    if crate::ec::is_internal(&o.name)
                        || missing.contains_key(&o.name)
                        || logged.contains(o.name.as_str())
                    {
                        continue;
                    }
                    let own = match position {
                        Some(c) => crate::ec::holds_shard(s, self.coll, &o, c)
                            .map_err(|x| format!("{}: {x}", o.name))?,
                        None => false,
                    };
                    let held = recovery::stored_version(s, self.coll, &o)
                        .map_err(|x| format!("{}: {x}", o.name))?
                        .flatten();
                    if let (false, Some(v)) = (own, held) {
                        t.set_record(
                            self.coll,
                            &recovery::missing_key(&o.name),
                            record::encode_missing(&v),
                        );
                        missing.insert(o.name, v);
                    }
                }
                match next {
                    Some(n) => start = Some(n),
                    None => break,
                }
            }
        }
        t.rm_record(self.coll, backfill::BACKFILL_KEY);
        // The entry that says so: copies whose logs do not reach it are
        // backfilled from this one (objects the log does not name may
        // differ between them).
        let version = self.next_version();
        let reset = LogEntry {
            version,
            name: String::new(),
            removed: false,
            reqid: None,
            gave_up: Some(GaveUp::Copy),
            before: Before::Unknown,
            prev: Some(self.info.last_update),
        };
        self.info.last_update = version;
        self.rep.high = version;
        self.log_into(&mut t, &reset, &self.info);
        self.guard_log(&mut t);
        tracing::warn!(
            "pg {}: only copies mid-backfill reach the head and none that was complete is \
             coming back: taking this one as it is ({} objects it does not hold as logged)",
            self.id,
            missing.len()
        );
        self.missing = missing;
        self.backfill = None;
        self.apply_own(t, true, fx);
        Ok(())
    }

    /// Pulling what is left: an answer for `name`. The copy at the
    /// logged version is taken; an older one is kept as the object's
    /// fallback; then the next source is asked (`pull_some`).
    pub(super) fn lost_pulled(
        &mut self,
        s: &dyn ObjectStore,
        name: String,
        result: Result<Push, RepError>,
        fx: &mut Vec<Effect>,
    ) {
        let Some(need) = self.missing.get(&name).copied() else {
            return self.pull_some(s, fx);
        };
        if let Ok(push) = result {
            if push.name == name && push.copy.is_some() {
                if push.version == need {
                    return self.apply_pulled(s, push, fx);
                }
                let lost = self.rec.lost.as_mut().filter(|l| {
                    push.version < need && push.version.v > 0 && l.on_history(&name, push.version)
                });
                if let Some((_, older)) = lost.and_then(|l| l.tried.get_mut(&name)) {
                    if older.as_ref().is_none_or(|o| o.version < push.version) {
                        *older = Some(push);
                    }
                }
            }
        }
        self.pull_some(s, fx);
    }

    /// Pulling what is left: for each object this copy lacks and has
    /// not asked for, ask the next source, or, with none left, settle it
    /// here (an object the log removes is removed; one no source held at
    /// the logged version is rolled back or removed by a new log entry).
    pub(super) fn lost_pull_some(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let Role::Pulling { pulls, .. } = &self.role else {
            return;
        };
        let todo: Vec<(String, Version)> = self
            .missing
            .iter()
            .filter(|(n, _)| !pulls.values().any(|p| p == *n))
            .map(|(n, v)| (n.clone(), *v))
            .collect();
        let mut busy = pulls.len();
        for (name, need) in todo {
            if self.log_removes(s, &name, need) {
                let gone = Push {
                    name,
                    version: Version::default(),
                    copy: None,
                };
                if let Err(e) = self.land_pulled(s, gone, Transaction::new(), fx) {
                    return self.lost_failed(&e.to_string());
                }
                continue;
            }
            let Some(lost) = self.rec.lost.as_mut() else {
                return;
            };
            let tried = lost.tried.entry(name.clone()).or_insert((0, None));
            if let Some(&to) = lost.sources.get(tried.0) {
                if busy >= RECOVERY_PUSHES_MAX {
                    continue;
                }
                tried.0 += 1;
                busy += 1;
                let tid = self.take_tid();
                self.pull(tid, to, &name, fx);
                if let Role::Pulling { pulls, .. } = &mut self.role {
                    pulls.insert(tid, name);
                }
                continue;
            }
            if let Err(e) = self.give_up_object(s, &name, need, fx) {
                return self.lost_failed(&e.to_string());
            }
        }
    }

    /// Pulling what is left: no up copy holds `name` at `need`. Roll
    /// it back to the newest older copy a source answered with or this
    /// copy holds, or remove it, by a new log entry past the head.
    pub(super) fn give_up_object(
        &mut self,
        s: &dyn ObjectStore,
        name: &str,
        need: Version,
        fx: &mut Vec<Effect>,
    ) -> Result<(), StoreError> {
        let Some(lost) = self.rec.lost.as_mut() else {
            return Ok(());
        };
        let answered = lost.tried.remove(name).and_then(|(_, older)| older);
        let here = recovery::read_copy(s, self.coll, name)?;
        // The newest state before `need` that is still to be had: a copy,
        // or the object's absence after a removal (always to be had).
        // Rolling back past a removal, which may have been acknowledged,
        // would bring the removed object back (on a replicated pool with
        // OSDs declared lost, the removal had left the log, the lost
        // write's entry still said the object was absent before it).
        let removed_at = lost
            .removals
            .get(name)
            .and_then(|r| r.range(..need).next_back().copied());
        let before = lost
            .befores
            .get(&(name.to_string(), need))
            .copied()
            .unwrap_or_default();
        let older = [answered, Some(here)]
            .into_iter()
            .flatten()
            .filter(|p| p.copy.is_some() && p.version.v > 0 && p.version < need)
            .filter(|p| lost.on_history(name, p.version))
            .filter(|p| removed_at.is_none_or(|r| p.version > r))
            .filter(|p| match before {
                Before::Absent => false,
                Before::At(v) => p.version <= v,
                Before::Unknown => true,
            })
            .max_by_key(|p| p.version);
        let version = self.next_version();
        let from = older.as_ref().map(|p| p.version);
        let copy = older.and_then(|p| p.copy).map(|mut c| {
            c.attrs.retain(|(k, _)| k != VERSION_ATTR);
            c.attrs.push((
                VERSION_ATTR.to_string(),
                postcard::to_stdvec(&version).unwrap_or_default(),
            ));
            c
        });
        let entry = LogEntry {
            version,
            name: name.to_string(),
            removed: copy.is_none(),
            reqid: None,
            gave_up: Some(GaveUp::Object(from.unwrap_or_default())),
            before: Before::Unknown,
            prev: Some(self.info.last_update),
        };
        // This copy's state changes only once the transaction is built
        // (a read error on the way changes nothing, and the PG peers
        // again).
        let mut info = self.info;
        if entry.removed {
            info.objects = info.objects.saturating_sub(1);
        }
        info.last_update = version;
        let mut more = Transaction::new();
        self.log_into(&mut more, &entry, &info);
        let push = Push {
            name: name.to_string(),
            version,
            copy,
        };
        self.forget_undone(s, name, from.unwrap_or_default())?;
        self.land_pulled(s, push, more, fx)?;
        self.info = info;
        self.rep.high = version;
        self.given_up += 1;
        match from {
            Some(v) => tracing::warn!(
                "pg {}: {name} at {need} is on no up OSD: rolled back to {v} (as {version})",
                self.id
            ),
            None => tracing::warn!(
                "pg {}: {name} at {need} is on no up OSD, nor an older copy: removed (at {version})",
                self.id
            ),
        }
        Ok(())
    }
}
