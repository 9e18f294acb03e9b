//! Backfill as the state machine runs it: the primary's scans, chunks
//! and Merkle comparisons per target, and the target's answers.
//!
//! It must never copy an object the primary lacks, nor move a target's
//! cursor backwards.

use super::*;

impl Pg {
    /// Members of `write_set` that count toward `min_size`: all but
    /// backfill targets (their copies are not whole yet).
    pub(super) fn serving(&self, write_set: &[i32]) -> usize {
        write_set
            .iter()
            .filter(|o| !self.rec.backfill.contains_key(o))
            .count()
    }

    /// Move every backfill along: scan a member that waits, build the
    /// chunk for a member whose scan is here (once no write to its range
    /// is in flight).
    pub(super) fn backfill_some(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if !matches!(self.role, Role::Primary { .. })
            || !self.settled()
            || self
                .rec
                .backfill
                .keys()
                .all(|&to| self.backfill_toofull(to))
            || self.backfill_flagged()
        {
            return;
        }
        // A chunk sent again holds writes to its range: not slept on.
        let resend = self.rec.backfill.values().any(|b| {
            matches!(&b.step, BfStep::Copying { flights, .. } if flights.first().is_some_and(Flight::resend_due))
        });
        let held = matches!(self.rec.slot, Slot::Held(_));
        if !(self.may_copy(fx) || (resend && held)) {
            return;
        }
        let targets: Vec<i32> = self.rec.backfill.keys().copied().collect();
        // A flag holds back every step but the chunks under way.
        let held = self.backfill_flags_hold();
        // This copy's tree's leaf count (`None`: no tree).
        let tree_leaves = self.tree().map(merkle::Tree::leaf_count);
        for to in targets {
            if let Some(b) = self.rec.backfill.get_mut(&to) {
                if tree_leaves.is_none() && matches!(b.leaves, Leaves::Unknown { .. }) {
                    // No tree here: every object.
                    b.leaves = Leaves::All;
                }
            }
            let Some(b) = self.rec.backfill.get(&to) else {
                continue;
            };
            let limit = self.backfill_chunk_objects.max(1);
            match &b.step {
                BfStep::Idle
                    if self.now_ms >= b.retry_ms
                        && !self.map.toofull.contains(&to)
                        && !held
                        && matches!(b.leaves, Leaves::Unknown { .. }) =>
                {
                    // First the trees: the target's root.
                    if let Some(leaves) = tree_leaves {
                        self.compare_roots(to, leaves, fx);
                    }
                }
                BfStep::Idle
                    if self.now_ms >= b.retry_ms && !self.map.toofull.contains(&to) && !held =>
                {
                    let after = b.done.clone();
                    self.start_scan(s, to, &after, tree_leaves, limit, fx);
                }
                BfStep::Scanned { .. } if held => {
                    // Held: the listing is dropped and made again from
                    // the cursor once the flag is cleared (it holds no
                    // slot meanwhile).
                    if let Some(b) = self.rec.backfill.get_mut(&to) {
                        b.step = BfStep::Idle;
                    }
                }
                BfStep::Scanned { theirs, mine } => {
                    let (after, theirs) = (b.done.clone(), theirs.clone());
                    let mine = self.still_listed(mine.as_ref());
                    let chunk = match self.next_chunk(s, to, &after, &theirs, mine, tree_leaves) {
                        Ok(Some(c)) => c,
                        Ok(None) => continue,
                        Err(()) => {
                            self.bf_retry(to);
                            continue;
                        }
                    };
                    if let Some(b) = self.rec.backfill.get_mut(&to) {
                        b.step = BfStep::Copying {
                            flights: Vec::new(),
                            ahead: Ahead::None,
                        };
                    }
                    self.launch_chunk(s, to, chunk, fx);
                    self.backfill_ahead(s, to, tree_leaves, fx);
                }
                BfStep::Copying { flights, .. }
                    if flights.first().is_some_and(Flight::resend_due) =>
                {
                    self.resend_first_chunk(to, fx)
                }
                BfStep::Copying { .. } => {
                    // Chunks already built are under way: a flag holds
                    // back only what comes after them (a chunk rebuilt
                    // while the one before it waited to be sent again
                    // would otherwise wait for the flag, and writes to
                    // its range with it).
                    self.send_ready(to, fx);
                    if !held {
                        self.backfill_ahead(s, to, tree_leaves, fx)
                    }
                }
                _ => {}
            }
        }
    }

    /// A backfill's first step with trees on both sides: ask target `to`
    /// for its tree's root.
    fn compare_roots(&mut self, to: i32, leaves: u32, fx: &mut Vec<Effect>) {
        let filter = Filter::Nodes {
            leaves,
            level: 0,
            idx: vec![0],
        };
        let tid = self.send_scan(to, Cursor::End, filter, fx);
        if let Some(b) = self.rec.backfill.get_mut(&to) {
            b.step = BfStep::Comparing { tid, descent: None };
        }
    }

    /// Ask target `to` for its objects after `after` (see `bf_scan`); a
    /// scan that cannot be made is tried again later.
    fn start_scan(
        &mut self,
        s: &dyn ObjectStore,
        to: i32,
        after: &Cursor,
        tree_leaves: Option<u32>,
        limit: usize,
        fx: &mut Vec<Effect>,
    ) {
        match self.bf_scan(s, to, after, tree_leaves, limit, fx) {
            Ok(Some((tid, upto, mine))) => {
                if let Some(b) = self.rec.backfill.get_mut(&to) {
                    b.step = BfStep::Scanning { tid, upto, mine };
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing_error(self.id, &format!("backfill scan: {e}"));
                self.bf_retry(to);
            }
        }
    }

    /// The first chunk to `to` not answered goes again once its retry is
    /// due (the ones after it wait for its answer).
    fn resend_first_chunk(&mut self, to: i32, fx: &mut Vec<Effect>) {
        let Some(Backfill {
            step: BfStep::Copying { flights, .. },
            retry_ms,
            ..
        }) = self.rec.backfill.get(&to)
        else {
            return;
        };
        let Some(first) = flights.first().filter(|_| self.now_ms >= *retry_ms) else {
            return;
        };
        debug_assert!(first.resend_due(), "only a chunk sent before is sent again");
        let chunk = first.chunk.clone();
        let tid = self.emit_chunk(to, chunk, fx);
        if let Some(Backfill {
            step: BfStep::Copying { flights, .. },
            ..
        }) = self.rec.backfill.get_mut(&to)
        {
            flights[0].tid = tid;
        }
    }

    /// Ask target `to` for its objects after `after` up to where this
    /// copy's next `limit` objects (of the leaves to scan) end; the tid
    /// and that end, with this copy's objects there (`None`: a malformed
    /// leaf set, nothing asked).
    pub(super) fn bf_scan(
        &mut self,
        s: &dyn ObjectStore,
        to: i32,
        after: &Cursor,
        tree_leaves: Option<u32>,
        limit: usize,
        fx: &mut Vec<Effect>,
    ) -> Result<Option<(u64, Cursor, Option<Listed>)>, StoreError> {
        let Some(b) = self.rec.backfill.get(&to) else {
            return Ok(None);
        };
        let leaves = tree_leaves.unwrap_or(0);
        let Some(hashes) = b.leaves.filter(leaves, after, &Cursor::End).hashes() else {
            return Ok(None);
        };
        let mine = backfill::scan_in(s, self.coll, after, &Cursor::End, limit, None, &hashes)?;
        let upto = mine.end;
        // The target lists (after, upto]: only the leaves there.
        let filter = b.leaves.filter(leaves, after, &upto);
        let tid = self.send_scan_from(to, after.clone(), upto.clone(), filter, fx);
        let mine = Listed {
            gen: self.store_gen,
            objects: mine.objects,
        };
        Ok(Some((tid, upto, Some(mine))))
    }

    /// The next chunk after `after` for target `to`, from its listing
    /// `theirs` and this copy's objects in the same range (`mine`: as
    /// listed then, if the store has not changed since); `Err` when this
    /// copy's objects could not be read (logged).
    fn next_chunk(
        &mut self,
        s: &dyn ObjectStore,
        to: i32,
        after: &Cursor,
        theirs: &Scan,
        mine: Option<Vec<(ObjectId, Version)>>,
        tree_leaves: Option<u32>,
    ) -> Result<Option<Chunk>, ()> {
        self.bf_plan(s, to, after, theirs, mine.as_deref(), tree_leaves)
            .map_err(|e| tracing_error(self.id, &format!("backfill read: {e}")))
    }

    /// A listing of this copy's objects if it is still what the store
    /// holds (nothing applied since it was made).
    pub(super) fn still_listed(&self, mine: Option<&Listed>) -> Option<Vec<(ObjectId, Version)>> {
        mine.filter(|m| m.gen == self.store_gen)
            .map(|m| m.objects.clone())
    }

    /// The objects in (after, end] this copy lacks (missing, or unfound
    /// and to be given up), each with the version its log needs (`None`:
    /// the log no longer says for one of them); and those waiting unfound
    /// (as one whose rollback waits for k members past it) that the log
    /// names and the target's listing `theirs` does not show at the
    /// version needed.
    pub(super) fn lacks_in(
        &self,
        s: &dyn ObjectStore,
        after: &Cursor,
        end: &Cursor,
        theirs: &Scan,
    ) -> Option<Vec<(String, Version)>> {
        let in_range = |name: &str| {
            let o = recovery::oid(name);
            !after.covers(&o) && end.covers(&o)
        };
        let names: BTreeSet<&String> = self
            .missing
            .keys()
            .chain(self.ecs.unfound.keys())
            .filter(|n| in_range(n))
            .collect();
        // (With OSDs declared lost, an object on one shard at a write
        // never acknowledged was to be rolled back; the rollback waited
        // for both backfill targets to pass it, and each chunk with it
        // failed to rebuild it, for good.)
        let waiting: BTreeSet<&String> = (self.ecs.unfound_waiting.iter())
            .filter(|n| in_range(n) && !names.contains(n))
            .collect();
        if names.is_empty() && waiting.is_empty() {
            return Some(Vec::new());
        }
        // An unfound object this copy no longer lists missing (one being
        // rolled back) needs what its newest log entry wrote.
        let mut log: Option<AuthLog> = None;
        let mut out = Vec::with_capacity(names.len() + waiting.len());
        let mut newest = |s: &dyn ObjectStore, name: &str| -> Option<Option<Version>> {
            if log.is_none() {
                log = Some(self.own_log(s)?);
            }
            let entries = log.as_ref().map_or(&[][..], |l| &l.entries[..]);
            Some(
                entries
                    .iter()
                    .rev()
                    .find(|e| e.name == name)
                    .map(|e| e.version),
            )
        };
        for name in names {
            let need = match self.missing.get(name) {
                Some(v) => *v,
                None => newest(s, name)??,
            };
            out.push((name.clone(), need));
        }
        // A waiting object the log no longer names is rebuilt as any
        // other (the version it needs is not known here); one the target
        // holds at the version needed keeps it (its shard may be one the
        // object lacks).
        for name in waiting {
            let Some(need) = newest(s, name)? else {
                continue;
            };
            let oid = recovery::oid(name);
            if !theirs.objects.iter().any(|(o, v)| *o == oid && *v == need) {
                out.push((name.clone(), need));
            }
        }
        Some(out)
    }

    /// The chunk for target `to` after `after`, from its listing
    /// `theirs` (`None`: a write to the range is in flight; planned once
    /// that is done). Objects this copy lacks go as `Chunk::lacks`, not
    /// copied. Counts the chunk in the backfill's cost.
    pub(super) fn bf_plan(
        &mut self,
        s: &dyn ObjectStore,
        to: i32,
        after: &Cursor,
        theirs: &Scan,
        mine: Option<&[(ObjectId, Version)]>,
        tree_leaves: Option<u32>,
    ) -> Result<Option<Chunk>, StoreError> {
        let limit = self.backfill_chunk_objects.max(1);
        let in_range = |name: &str| {
            let o = recovery::oid(name);
            !after.covers(&o) && theirs.end.covers(&o)
        };
        let busy = self.ops.inflight.values().any(|f| in_range(&f.name))
            || self.ec_writes_gathering(in_range);
        let Some(b) = self.rec.backfill.get(&to) else {
            return Ok(None);
        };
        if busy {
            return Ok(None);
        }
        // The leaves as the scan had them: a write that adds one in the
        // scanned range starts the scan again.
        let filter = b
            .leaves
            .filter(tree_leaves.unwrap_or(0), after, &theirs.end);
        let Some(hashes) = filter.hashes() else {
            return Ok(None);
        };
        let mut chunk = backfill::plan_chunk(
            s,
            self.coll,
            after,
            theirs,
            limit,
            backfill::CHUNK_BYTES,
            self.ec.is_none(),
            &hashes,
            mine,
        )?;
        // Objects this copy lacks are not copied: its own copy may be
        // older than its log says, and the target would hold it as whole
        // (with OSDs declared lost, a primary whose object was to be
        // rolled back pushed its older copy to two backfill targets whose
        // logs still named the write being undone; one became primary and
        // answered a retry of that write as done while serving the older
        // value). Nor does the backfill wait for them: a rollback waits
        // for k members past the object, and so would wait for the
        // backfill (the case above stalled once backfill waited). The
        // target records each missing instead, at the version the log
        // needs. (So too for objects an erasure-coded copy holds but
        // cannot rebuild for now: see `lacks_in`.)
        let Some(lacks) = self.lacks_in(s, after, &chunk.end, theirs) else {
            return Ok(None);
        };
        chunk
            .pushes
            .retain(|p| !lacks.iter().any(|(n, _)| *n == p.name));
        chunk.lacks = lacks;
        Ok(Some(chunk))
    }

    /// The pipeline of a backfill whose chunks are under way: the target
    /// lists the range after the last one meanwhile, and once listed its
    /// chunk is launched too (up to `CHUNKS_IN_FLIGHT`).
    pub(super) fn backfill_ahead(
        &mut self,
        s: &dyn ObjectStore,
        to: i32,
        tree_leaves: Option<u32>,
        fx: &mut Vec<Effect>,
    ) {
        let limit = self.backfill_chunk_objects.max(1);
        // At most one chunk planned per call, then one scan asked.
        for _ in 0..2 {
            let Some(Backfill {
                step: BfStep::Copying { flights, ahead },
                ..
            }) = self.rec.backfill.get(&to)
            else {
                return;
            };
            if flights.iter().any(Flight::resend_due) {
                return;
            }
            let Some(after) = flights.last().map(|f| f.chunk.end.clone()) else {
                return;
            };
            if after == Cursor::End {
                return;
            }
            match ahead {
                Ahead::None => {
                    let asked = self.bf_scan(s, to, &after, tree_leaves, limit, fx);
                    if let Some(Backfill {
                        step: BfStep::Copying { ahead, .. },
                        ..
                    }) = self.rec.backfill.get_mut(&to)
                    {
                        match asked {
                            Ok(Some((tid, upto, mine))) => {
                                *ahead = Ahead::Scanning { tid, upto, mine }
                            }
                            Ok(None) => {}
                            Err(e) => {
                                tracing_error(self.id, &format!("backfill scan: {e}"));
                                *ahead = Ahead::Refused;
                            }
                        }
                    }
                    return;
                }
                Ahead::Scanned { theirs, mine } if flights.len() < CHUNKS_IN_FLIGHT => {
                    let theirs = theirs.clone();
                    let mine = self.still_listed(mine.as_ref());
                    let chunk = match self.next_chunk(s, to, &after, &theirs, mine, tree_leaves) {
                        Ok(Some(c)) => c,
                        Ok(None) => return,
                        Err(()) => {
                            if let Some(Backfill {
                                step: BfStep::Copying { ahead, .. },
                                ..
                            }) = self.rec.backfill.get_mut(&to)
                            {
                                *ahead = Ahead::Refused;
                            }
                            return;
                        }
                    };
                    if let Some(Backfill {
                        step: BfStep::Copying { ahead, .. },
                        ..
                    }) = self.rec.backfill.get_mut(&to)
                    {
                        *ahead = Ahead::None;
                    }
                    self.launch_chunk(s, to, chunk, fx);
                }
                _ => return,
            }
        }
    }

    /// Ask backfill target `to` for its objects after its cursor up to
    /// `upto` that `filter` covers (or its tree's nodes); the tid.
    pub(super) fn send_scan(
        &mut self,
        to: i32,
        upto: Cursor,
        filter: Filter,
        fx: &mut Vec<Effect>,
    ) -> u64 {
        let after = self
            .rec
            .backfill
            .get(&to)
            .map_or(Cursor::Start, |b| b.done.clone());
        self.send_scan_from(to, after, upto, filter, fx)
    }

    /// As `send_scan`, after `after` (the end of the chunks on their way).
    pub(super) fn send_scan_from(
        &mut self,
        to: i32,
        after: Cursor,
        upto: Cursor,
        filter: Filter,
        fx: &mut Vec<Effect>,
    ) -> u64 {
        let tid = self.take_tid();
        tracing::debug!(
            "pg {}: scan osd.{to} tid {tid} ({after}, {upto}] {}",
            self.id,
            filter.describe()
        );
        let msg = PeerMsg::Scan {
            pg: self.id,
            from: self.whoami,
            ctx: self.rep_ctx(),
            after,
            upto,
            limit: self.backfill_chunk_objects.max(1) as u32,
            filter,
        };
        self.send(tid, to, msg, fx);
        tid
    }

    /// The target's tree nodes answered: the next step of the comparison,
    /// or the leaves to scan once it is done.
    pub(super) fn on_nodes(&mut self, to: i32, theirs: Option<Vec<u64>>, fx: &mut Vec<Effect>) {
        let Some(b) = self.rec.backfill.get_mut(&to) else {
            return;
        };
        let TreeState::Kept(kept) = &self.tree else {
            b.leaves = Leaves::All;
            b.step = BfStep::Idle;
            return;
        };
        let mine = kept.tree();
        let BfStep::Comparing { descent, .. } = &mut b.step else {
            return;
        };
        b.cost.nodes += theirs.as_ref().map_or(0, |n| n.len() as u64);
        let Some(theirs) = theirs else {
            // The target keeps no tree of this shape: every object.
            tracing::info!(
                "pg {}: osd.{to} keeps no comparable Merkle tree; scanning all",
                self.id
            );
            b.leaves = Leaves::All;
            b.step = BfStep::Idle;
            return;
        };
        let ok = match descent.as_mut() {
            None if theirs.len() == 1 => {
                *descent = Some(merkle::Descent::new(mine.depth(), mine.root(), theirs[0]));
                true
            }
            Some(d) => match d.wants() {
                Some((level, idx)) if idx.len() == theirs.len() => {
                    d.step(&mine.nodes_at(level, &idx), &theirs);
                    true
                }
                _ => false,
            },
            None => false,
        };
        let next = match descent.as_ref().filter(|_| ok) {
            Some(d) => match d.wants() {
                None => Err(d.ranges().into_iter().flatten().collect()),
                Some((level, idx)) => Ok((level, idx)),
            },
            // An answer of the wrong size: compare nothing, scan all.
            None => Err((0..mine.leaf_count()).collect::<BTreeSet<u32>>()),
        };
        match next {
            Err(mut set) => {
                if let Leaves::Unknown { dirty } = &mut b.leaves {
                    set.append(dirty);
                }
                tracing::info!(
                    "pg {}: osd.{to}'s Merkle tree differs in {} of {} leaves",
                    self.id,
                    set.len(),
                    mine.leaf_count()
                );
                b.leaves = Leaves::Some(set);
                b.step = BfStep::Idle;
            }
            Ok((level, idx)) => {
                let filter = Filter::Nodes {
                    leaves: mine.leaf_count(),
                    level,
                    idx,
                };
                let tid = self.send_scan(to, Cursor::End, filter, fx);
                if let Some(b) = self.rec.backfill.get_mut(&to) {
                    if let BfStep::Comparing { tid: t, .. } = &mut b.step {
                        *t = tid;
                    }
                }
            }
        }
    }

    /// Put `chunk` under way to `to` after the chunks already there
    /// (the backfill is `Copying`): a replicated one goes at once; an
    /// erasure-coded one carries this copy's shards, and goes once the
    /// target's are rebuilt in their place.
    pub(super) fn launch_chunk(
        &mut self,
        s: &dyn ObjectStore,
        to: i32,
        chunk: Chunk,
        fx: &mut Vec<Effect>,
    ) {
        let (rebuilding, gathers) = match self.ec {
            Some(_) => match self.ec_chunk_gathers(to, &chunk) {
                Some(g) => g,
                None => return self.chunk_failed(to, None),
            },
            None => Default::default(),
        };
        let Some(Backfill {
            step: BfStep::Copying { flights, .. },
            ..
        }) = self.rec.backfill.get_mut(&to)
        else {
            return;
        };
        debug_assert!(
            flights.len() < CHUNKS_IN_FLIGHT,
            "backfill chunks past the limit"
        );
        debug_assert!(
            flights.last().is_none_or(|f| f.chunk.end == chunk.after),
            "backfill chunks not back to back"
        );
        flights.push(Flight {
            tid: 0,
            chunk,
            first: Some(rebuilding),
        });
        // The flight is in place first: a gather may end at once.
        for g in gathers {
            self.gather(s, g, fx);
        }
        self.send_ready(to, fx);
    }

    /// Send each chunk to `to` that is ready and has every chunk before
    /// it on its way.
    pub(super) fn send_ready(&mut self, to: i32, fx: &mut Vec<Effect>) {
        loop {
            let Some(Backfill {
                step: BfStep::Copying { flights, .. },
                ..
            }) = self.rec.backfill.get(&to)
            else {
                return;
            };
            let Some(j) = flights.iter().position(|f| f.tid == 0) else {
                return;
            };
            if !flights[j].ready_first() {
                return;
            }
            let chunk = flights[j].chunk.clone();
            // Counted once, when first sent (a chunk dropped unsent and
            // planned again is not counted twice).
            let copied = chunk.pushes.len() as u64;
            let tid = self.emit_chunk(to, chunk, fx);
            self.rec.pushed += copied;
            if let Some(Backfill {
                step: BfStep::Copying { flights, .. },
                cost,
                ..
            }) = self.rec.backfill.get_mut(&to)
            {
                flights[j].tid = tid;
                flights[j].first = None;
                cost.copied += copied;
                cost.chunks += 1;
            }
        }
    }

    /// A chunk to `to` could not be built (the flight at `at`, or one
    /// not launched yet: `None`): it and the chunks after it, none of
    /// them sent, are dropped, and the range is planned again later
    /// (once the chunks left are answered and the retry pause has
    /// passed). Ops that waited for a dropped chunk go on at the next
    /// tick (`release_bf_blocked`).
    pub(super) fn chunk_failed(&mut self, to: i32, at: Option<usize>) {
        let now = self.now_ms;
        let Some(b) = self.rec.backfill.get_mut(&to) else {
            return;
        };
        let BfStep::Copying { flights, ahead } = &mut b.step else {
            return self.bf_retry(to);
        };
        let at = at.unwrap_or(flights.len()).min(flights.len());
        debug_assert!(
            flights[at..].iter().all(|f| f.first.is_some()),
            "a chunk on its way dropped"
        );
        flights.truncate(at);
        *ahead = Ahead::Refused;
        b.retry_ms = now + RECOVERY_RETRY_MS;
        if flights.is_empty() {
            self.bf_retry(to);
        }
    }

    /// The effect that sends `chunk` to `to`; its tid.
    pub(super) fn emit_chunk(&mut self, to: i32, chunk: Chunk, fx: &mut Vec<Effect>) -> u64 {
        let tid = self.take_tid();
        tracing::debug!(
            "pg {}: chunk to osd.{to} tid {tid} ({}, {}]: {} pushes",
            self.id,
            chunk.after,
            chunk.end,
            chunk.pushes.len()
        );
        let msg = PeerMsg::Chunk {
            pg: self.id,
            from: self.whoami,
            ctx: self.rep_ctx(),
            chunk,
        };
        self.send(tid, to, msg, fx);
        tid
    }

    pub(super) fn bf_retry(&mut self, to: i32) {
        if let Some(b) = self.rec.backfill.get_mut(&to) {
            b.step = BfStep::Idle;
            b.retry_ms = self.now_ms + RECOVERY_RETRY_MS;
        }
    }

    pub(super) fn on_scan_done(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        from: i32,
        result: Result<Scan, RepError>,
        fx: &mut Vec<Effect>,
    ) {
        if self.on_scrub_answer(tid, from, &result) {
            return;
        }
        tracing::debug!(
            "pg {}: scan answer from osd.{from} tid {tid}: {:?} objects, {:?} nodes",
            self.id,
            result.as_ref().map(|sc| sc.objects.len()),
            result.as_ref().map(|sc| sc.nodes.as_ref().map(Vec::len))
        );
        let Some(b) = self.rec.backfill.get_mut(&from) else {
            return;
        };
        if matches!(b.step, BfStep::Comparing { tid: t, .. } if t == tid) {
            match result {
                Ok(sc) => self.on_nodes(from, sc.nodes, fx),
                Err(_) => self.bf_retry(from),
            }
            return self.backfill_some(s, fx);
        }
        if let BfStep::Copying { flights, ahead } = &mut b.step {
            // The scan of the range after the chunks on their way.
            let Ahead::Scanning { tid: t, mine, .. } = ahead else {
                return;
            };
            if *t != tid {
                return;
            }
            let mine = mine.take();
            let after = flights.last().map(|f| f.chunk.end.clone());
            *ahead = match result {
                Ok(theirs) if after.is_some_and(|a| theirs.end > a) => {
                    b.cost.listed += theirs.objects.len() as u64;
                    Ahead::Scanned { theirs, mine }
                }
                _ => Ahead::Refused,
            };
            return self.backfill_some(s, fx);
        }
        let BfStep::Scanning { tid: t, mine, .. } = &mut b.step else {
            return;
        };
        if *t != tid {
            return;
        }
        let mine = mine.take();
        match result {
            Ok(theirs) if theirs.end > b.done => {
                b.cost.listed += theirs.objects.len() as u64;
                b.step = BfStep::Scanned { theirs, mine };
            }
            Ok(_) => {
                tracing_error(self.id, &format!("osd.{from}'s backfill scan went nowhere"));
                self.bf_retry(from);
            }
            Err(_) => self.bf_retry(from),
        }
        self.backfill_some(s, fx);
    }

    pub(super) fn on_chunk_done(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        from: i32,
        result: Result<(), RepError>,
        fx: &mut Vec<Effect>,
    ) {
        tracing::debug!(
            "pg {}: chunk answer from osd.{from} tid {tid}: {result:?}",
            self.id
        );
        let Some(b) = self.rec.backfill.get_mut(&from) else {
            return;
        };
        let BfStep::Copying { flights, ahead } = &mut b.step else {
            return;
        };
        let Some(i) = flights.iter().position(|f| f.tid != 0 && f.tid == tid) else {
            return;
        };
        if let Err(e) = &result {
            tracing::warn!(
                "pg {}: backfill chunk to osd.{from} failed ({e:?}); sending it again in {} ms",
                self.id,
                RECOVERY_RETRY_MS
            );
            // Sent again, the same chunks in order, after a pause; writes
            // to their range keep waiting. (A chunk after this one may
            // have been applied: the target answers it at once then.)
            for f in &mut flights[i..] {
                f.tid = 0;
            }
            *ahead = Ahead::None;
            b.retry_ms = self.now_ms + RECOVERY_RETRY_MS;
            return;
        }
        // The target applies chunks in order (each one starts where the
        // one before it ends): this one answered, those before it are
        // durable too.
        let end = flights[i].chunk.end.clone();
        let lacks: Vec<(String, Version)> =
            flights.drain(..=i).flat_map(|f| f.chunk.lacks).collect();
        let next = if flights.is_empty() {
            match std::mem::take(ahead) {
                Ahead::Scanning { tid, upto, mine } => Some(BfStep::Scanning { tid, upto, mine }),
                Ahead::Scanned { theirs, mine } => Some(BfStep::Scanned { theirs, mine }),
                Ahead::None | Ahead::Refused => Some(BfStep::Idle),
            }
        } else {
            if matches!(ahead, Ahead::Refused) {
                *ahead = Ahead::None;
            }
            None
        };
        self.rec.next_copy_ms = self.now_ms + self.recovery_sleep_ms;
        if end == Cursor::End {
            let c = &b.cost;
            let by_tree = matches!(b.leaves, Leaves::Some(_));
            let how = match &b.leaves {
                Leaves::Some(set) => format!("{} differing Merkle leaves", set.len()),
                _ => "a full scan".to_string(),
            };
            let done = &mut self.backfills_done;
            done.finished += 1;
            done.by_tree += u64::from(by_tree);
            done.tree_nodes = done.tree_nodes.saturating_add(c.nodes);
            done.listed = done.listed.saturating_add(c.listed);
            done.copied = done.copied.saturating_add(c.copied);
            tracing::info!(
                "pg {}: osd.{from} backfilled by {how}: {} tree nodes exchanged, {} of its objects listed, {} copied or removed in {} chunks",
                self.id,
                c.nodes,
                c.listed,
                c.copied,
                c.chunks
            );
            self.rec.backfill.remove(&from);
        } else {
            // A target's cursor on the primary never goes back: a chunk
            // answered covers everything before its end.
            debug_assert!(
                end >= b.done,
                "backfill cursor back: {:?} -> {end:?}",
                b.done
            );
            b.done = end;
            if let Some(step) = next {
                b.step = step;
            }
        }
        // The target now lacks what this copy lacked (before the writes
        // that waited go on: one to such an object waits for its push).
        if !lacks.is_empty() {
            self.rec.missing.entry(from).or_default().extend(lacks);
        }
        // Writes that waited for the chunk go on.
        self.release_bf_blocked(s, fx);
        self.backfill_some(s, fx);
        self.recover_some(s, fx);
        self.rerecord(fx);
        self.maybe_clear_temp(fx);
    }

    /// Ops that waited for a backfill chunk go on (in the order they
    /// came) once any of them is no longer held back: its chunk was
    /// answered, or dropped (a chunk that could not be built, a backfill
    /// started over). Those still held back wait again, in order.
    pub(super) fn release_bf_blocked(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let free =
            (self.rec.bf_blocked.iter()).any(|p| !self.rec.blocks(&recovery::oid(&p.op.name)));
        if free {
            for p in std::mem::take(&mut self.rec.bf_blocked) {
                self.on_op(s, p, fx);
            }
        }
    }

    /// A primary's scan of this backfilling copy: its objects after
    /// `after` up to `upto`, with their versions.
    #[allow(clippy::too_many_arguments)] // the scan request's fields
    pub(super) fn on_scan(
        &mut self,
        s: &dyn ObjectStore,
        from: i32,
        ctx: &RepCtx,
        after: &Cursor,
        upto: &Cursor,
        limit: u32,
        filter: &Filter,
    ) -> Result<Scan, RepError> {
        self.fence(from, ctx, "scan from")?;
        // A tree question needs no backfill (a scrub asks members too).
        let tree_only = matches!(filter, Filter::Nodes { .. });
        // From the cursor durable or queued, or from further on: the
        // primary lists the range after the chunks it has sent while they
        // travel and commit. Objects after the queued cursor change only
        // by a chunk that covers them (writes reach them as log entries
        // only), and each chunk covers only (its after, its end]: a
        // listing after a chunk not here yet is what this copy will
        // still hold once that chunk is applied.
        let queued = self.queued_cursor();
        let at =
            self.backfill.as_ref() == Some(after) || queued.as_ref().is_some_and(|c| c <= after);
        if self.map.epoch < ctx.epoch || (!tree_only && !at) {
            return Err(RepError::Failed(format!(
                "pg {}: scan after {after} at epoch {}, this copy's backfill is at {:?} (epoch {})",
                self.id, ctx.epoch, self.backfill, self.map.epoch
            )));
        }
        if let Filter::Nodes { leaves, level, idx } = filter {
            if idx.len() > backfill::NODES_MAX {
                return Err(RepError::Failed(format!(
                    "pg {}: {} tree nodes asked for at once",
                    self.id,
                    idx.len()
                )));
            }
            let nodes = self
                .tree()
                .filter(|t| t.leaf_count() == *leaves && *level <= t.depth())
                .map(|t| {
                    if idx.is_empty() {
                        t.nodes_at(*level, &(0..1u32 << level).collect::<Vec<_>>())
                    } else {
                        t.nodes_at(*level, idx)
                    }
                });
            return Ok(Scan {
                objects: Vec::new(),
                end: after.clone(),
                nodes,
            });
        }
        let Some(hashes) = filter.hashes() else {
            return Err(RepError::Failed(format!(
                "pg {}: a malformed backfill scan filter",
                self.id
            )));
        };
        let shard = self.ec.as_ref().and_then(|_| self.shard_of(self.whoami));
        if queued.as_ref().is_some_and(|c| c < after) {
            self.scans_ahead += 1;
        }
        backfill::scan_in(s, self.coll, after, upto, limit as usize, shard, &hashes)
            .map_err(|e| RepError::Failed(format!("pg {}: {e}", self.id)))
    }

    /// A chunk of backfill: applied if it starts at this copy's cursor
    /// (one already applied is answered once durable).
    pub(super) fn on_chunk(
        &mut self,
        s: &dyn ObjectStore,
        from: i32,
        ctx: &RepCtx,
        chunk: Chunk,
        token: u64,
        fx: &mut Vec<Effect>,
    ) {
        let fail = |e: RepError| Effect::ack(token, Err(e));
        if let Err(e) = self.fence(from, ctx, "backfill from") {
            return fx.push(fail(e));
        }
        // The cursor with the chunks queued here counted (`self.backfill`
        // moves only once a chunk is applied: until then this copy does
        // not claim the chunk's objects).
        let cursor = self.queued_cursor();
        // A copy whose backfill ended in the primary's interval has every
        // chunk of it (several may have been on their way when an answer
        // was lost). The primary's interval, as its messages name it: this
        // copy's own count of intervals may differ (it may not have seen
        // every map the primary did).
        let applied = match &cursor {
            None => chunk.end == Cursor::End || self.backfilled_in == Some(ctx.interval),
            Some(c) => *c >= chunk.end,
        };
        if applied {
            // A resend: durable once everything queued before it is.
            let tid = self.take_tid();
            let c = self.commit(token, CommitKind::Write);
            self.rep.committing.insert(tid, c);
            return fx.push(Effect::Apply {
                tid,
                txn: Transaction::new(),
                sync: true,
            });
        }
        if self.map.epoch < ctx.epoch || self.behind(ctx) {
            let what = CopyMsg::Chunk(chunk);
            return self.hold_copy(from, ctx.clone(), what, token, fx);
        }
        if matches!(&cursor, Some(c) if *c < chunk.after) {
            // It overtook the chunk before it (several are on their way):
            // it waits for that one.
            let what = CopyMsg::Chunk(chunk);
            return self.hold_copy(from, ctx.clone(), what, token, fx);
        }
        if cursor.as_ref() != Some(&chunk.after) {
            return fx.push(fail(RepError::Failed(format!(
                "pg {}: backfill chunk after {} at epoch {}, this copy's cursor is {:?} (epoch {})",
                self.id, chunk.after, ctx.epoch, cursor, self.map.epoch
            ))));
        }
        let names = chunk.pushes.iter().map(|p| &p.name);
        for name in names.chain(chunk.lacks.iter().map(|(n, _)| n)) {
            let o = recovery::oid(name);
            if let Err(e) = exec::validate(name, &[SubOp::Stat]) {
                return fx.push(fail(RepError::Failed(format!("pg {}: {e}", self.id))));
            }
            if chunk.after.covers(&o) || !chunk.end.covers(&o) {
                return fx.push(fail(RepError::Failed(format!(
                    "pg {}: backfill chunk ({}, {}] carries {name}",
                    self.id, chunk.after, chunk.end
                ))));
            }
        }
        if let Some((name, _)) = chunk
            .lacks
            .iter()
            .find(|(n, _)| chunk.pushes.iter().any(|p| p.name == *n))
        {
            return fx.push(fail(RepError::Failed(format!(
                "pg {}: backfill chunk both copies and lacks {name}",
                self.id
            ))));
        }
        let tid = self.take_tid();
        let mut txn = backfill::chunk_txn(self.coll, &chunk, |p| self.push_prior(s, p));
        let txn = self
            .push_tree_changes(s, &chunk.pushes, tid, &mut txn)
            .map(|()| txn);
        match txn {
            Ok(txn) => {
                // What the primary lacks, this copy lacks too (its missing
                // records are in the chunk's transaction).
                for (name, need) in chunk.lacks {
                    self.missing.insert(name, need);
                }
                let next = (chunk.end != Cursor::End).then_some(chunk.end);
                if next.is_none() {
                    self.backfilled_in = Some(ctx.interval);
                }
                let c_end = next.clone();
                let c = self.commit(token, CommitKind::Chunk(next));
                self.rep.committing.insert(tid, c);
                // Answered once applied, not synced: the chunk that ends
                // the backfill (and any write after this one) is synced,
                // and the store makes every transaction queued before a
                // synced one durable with it. A crash before that loses a
                // suffix of chunks, each with the cursor it moved: the
                // copy resumes from the last one kept.
                fx.push(Effect::Apply {
                    tid,
                    txn,
                    sync: c_end.is_none(),
                });
                // A chunk that overtook this one goes on.
                if self.held.copies.iter().any(
                    |h| matches!(&h.what, CopyMsg::Chunk(c) if Some(&c.after) == c_end.as_ref()),
                ) {
                    self.rerun_held_copies(s, fx);
                }
            }
            Err(e) => fx.push(fail(RepError::Failed(format!("pg {}: {e}", self.id)))),
        }
    }
}
