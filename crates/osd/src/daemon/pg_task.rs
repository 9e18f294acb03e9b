//! A PG's task: the only code that feeds the PG state machine. It takes
//! inputs from the PG's mailbox and a periodic tick, hands them to
//! `Pg::handle`, and performs the effects through the PG crate's one
//! router (`pg::route`): answers to waiters, store commits, messages to
//! other OSDs (through `peers`), write-set records and pg_temp requests
//! (through `monitor`).
//!
//! It must never decide what a PG decides: it only performs effects.

use super::mailbox::{self, Inbox, Mailbox, PgMsg, Waiter, PG_REQUESTS_MAX};
use super::{lock, monitor, peers, OsdShared};
use crate::msg::{PeerMsg, PeerReply};
use crate::pg::{Host, Input, ListResult, MonAsk, Pg};
use loligo_store::Transaction;
use loligo_types::ops::OpReply;
use loligo_types::PgId;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How often a PG ticks (op deadlines, peering retries).
const PG_TICK_MS: u64 = 250;

/// Start PG `pg`'s task (its collection is created first); `None` if the
/// store cannot hold it.
pub(super) fn spawn(s: &Arc<OsdShared>, pg: PgId) -> Option<Mailbox> {
    // (A retiring PG's copy is another's to take over or remove: none is
    // made for it either.)
    if super::retire::retiring(s, pg) {
        return None;
    }
    let made_now = match s.ensure_collection(pg) {
        Ok(made) => made,
        Err(e) => {
            tracing::error!("pg {pg}: cannot create its collection: {e}");
            return None;
        }
    };
    let coll = loligo_store::CollectionId::pg(pg.pool, pg.ps);
    match crate::pg::repair_records(&*s.store, coll) {
        Ok(None) => {}
        Ok(Some(e)) => tracing::error!(
            "pg {pg}: {e}: this copy starts over as a backfill target (its objects stay; \
             the primary copies every object that differs)"
        ),
        Err(e) => {
            tracing::error!("pg {pg}: cannot read or repair its info and log records: {e}");
            return None;
        }
    }
    let info = s.read_info(pg).unwrap_or_default();
    let mut core = Pg::new(pg, s.cfg.id, info);
    // An op that waits (its PG down, or not yet peered) is answered
    // with why a little before a client with the same timeout (the
    // CLI's is 30 s, as the OSD's default) gives up on it: otherwise the
    // client's "timed out" wins the race, and the OSDs a down PG waits
    // for are never named.
    core.op_timeout_ms = s.cfg.op_timeout.as_millis() as u64 * 5 / 6;
    core.read_aside_min = s.cfg.read_aside_min;
    core.log_entries_max = s.cfg.pg_log_entries.max(1);
    core.backfill_chunk_objects = s.cfg.backfill_chunk_objects.max(1);
    core.recovery_sleep_ms = s.cfg.recovery_sleep.as_millis() as u64;
    // The PG clock is this OSD's: it reads 0 at the OSD's start. A copy
    // that was here before this start may have granted a lease it no
    // longer remembers, so for one lease after the start it reports a
    // grant to any primary. A copy made now granted nothing before (a
    // grant is made by a copy's task, and a task starts only with its
    // collection): it reports none, so a new pool's PGs on freshly
    // started OSDs serve as soon as they peer instead of waiting out a
    // lease nobody holds.
    core.set_read_lease(s.cfg.read_lease_ms(), (!made_now).then_some(0));
    // Erasure-coded pools keep no trees.
    let ec = s.map().and_then(|m| {
        m.pools
            .get(&pg.pool)
            .map(|p| matches!(p.kind, loligo_types::PoolKind::Erasure { .. }))
    });
    core.scrub_interval_ms = s.cfg.scrub_interval.as_millis() as u64;
    core.clock_base_unix_ms = s.clock_base_unix_ms;
    core.scrub_schedule = s.cfg.scrub_schedule;
    core.scrub_sleep_ms = s.cfg.scrub_sleep.as_millis() as u64;
    core.scrub_auto_repair = s.cfg.scrub_auto_repair;
    core.scrub_slots = s.scrub_slots.clone();
    core.merkle_leaves = if ec == Some(true) {
        0
    } else {
        s.cfg.merkle_leaves
    };
    let (mb, inbox) = mailbox::mailbox(PG_REQUESTS_MAX);
    {
        let mut pgs = lock(&s.pgs);
        // Two callers may race to start it: the first one wins.
        if let Some(m) = pgs.get(&pg) {
            return Some(m.clone());
        }
        // (Under the lock `merge::mark_sources` takes it out with.)
        if super::retire::retiring(s, pg) {
            return None;
        }
        pgs.insert(pg, mb.clone());
    }
    // A split's child keeps the grants of its parent's copy here (taken
    // by the caller that won the start only: a loser's would be lost).
    core.inherit_lease(&super::handed::take(s, |p| *p == pg));
    tokio::spawn(run(s.clone(), mb.clone(), inbox, core));
    Some(mb)
}

async fn run(s: Arc<OsdShared>, me: Mailbox, mut inbox: Inbox, mut core: Pg) {
    let pg = core.id;
    let mut waiters: HashMap<u64, Waiter> = HashMap::new();
    let mut next_token = 1u64;
    let mut tick = tokio::time::interval(Duration::from_millis(PG_TICK_MS));
    // The pg_num this copy is split for, once a map's was checked.
    let mut split_for: Option<u32> = None;
    let multi_thread = tokio::runtime::Handle::current().runtime_flavor()
        == tokio::runtime::RuntimeFlavor::MultiThread;
    loop {
        let msg = tokio::select! {
            m = inbox.recv() => match m { Some(m) => m, None => return },
            _ = tick.tick() => PgMsg { input: Input::Tick { now_ms: s.now_ms() }, reply: None },
        };
        if s.stopped.load(Ordering::Relaxed) {
            return;
        }
        if super::retire::retiring(&s, pg) {
            // Merged away or its pool deleted: its copy is taken over
            // once the task is gone.
            // (Its grants go to the copy that takes its objects in.)
            super::handed::hand(&s, pg, &core.lease_grants());
            return super::retire::task_ended(&s, pg);
        }
        if matches!(msg.input, Input::Continue) {
            // (Work a piece at a time: the PGs beside this one go first.)
            tokio::task::yield_now().await;
        }
        let mut input = msg.input;

        if matches!(input, Input::Tick { .. }) {
            core.scrub_load_ok = s.scrub_load_ok.load(Ordering::Relaxed);
            core.scrub_flags = crate::pg::scrub::ScrubFlags {
                no_scrub: s.no_scrub.load(Ordering::Relaxed),
                no_deep_scrub: s.no_deep_scrub.load(Ordering::Relaxed),
            };
        }
        if let Some(w) = msg.reply {
            let token = next_token;
            next_token += 1;
            if let Some(t) = input.token_mut() {
                *t = token;
            }
            waiters.insert(token, w);
        }
        let is_map = matches!(input, Input::Map { .. });
        // A map that changed the pool's pg_num: this copy splits, or
        // takes its merge sources in, before taking it.
        let mut children = Vec::new();
        if let Input::Map { pool, epoch, .. } = &input {
            if split_for != Some(pool.pg_num) {
                let (n, kind) = (pool.pg_num, &pool.kind);
                let merged = super::merge::merge_before_map(&s, &mut core, *epoch, n).await;
                if let Err(e) = merged {
                    return s.fail(format!("pg {pg}: cannot merge its sources' copies in: {e}"));
                }
                match super::split::split_before_map(&s, &mut core, *epoch, n, kind) {
                    Ok(c) => children = c,
                    Err(e) => return s.fail(format!("pg {pg}: cannot split its copy: {e}")),
                }
                split_for = Some(pool.pg_num);
            }
        }
        // Stats for the monitors are refreshed on every input but the
        // per-op ones (ticks come every PG_TICK_MS): building them for
        // each op cost a few allocations on the read path.
        let per_op = match &input {
            Input::Op { .. }
            | Input::LocalDone { .. }
            | Input::ReadDone { .. }
            | Input::List { .. } => true,
            Input::Peer { msg, .. } => matches!(
                msg,
                PeerMsg::RepOp { .. } | PeerMsg::GetInfo { .. } | PeerMsg::Push { .. }
            ),
            Input::Reply { id, .. } => core.awaits_write_ack(*id),
            _ => false,
        };
        // (A lease is judged by when its op is served, not queued.)
        core.clock(s.now_ms());
        let fx = if matches!(input, Input::Continue) && multi_thread {
            // A piece of a scrub reads megabytes: the tasks queued behind
            // this one on its worker thread move to another meanwhile
            // (they would wait out the read, clients' among them).
            tokio::task::block_in_place(|| core.handle(s.store.as_ref(), input))
        } else {
            core.handle(s.store.as_ref(), input)
        };
        let (shards, theory, fetched) = core.take_rebuilt();
        if shards > 0 {
            let c = &s.counters;
            c.rebuilt_shards.fetch_add(shards, Ordering::Relaxed);
            c.rebuild_theory_bytes.fetch_add(theory, Ordering::Relaxed);
            c.rebuild_fetched_bytes
                .fetch_add(fetched, Ordering::Relaxed);
        }
        let bf = core.take_backfills();
        if bf.finished > 0 {
            let c = &s.counters;
            c.backfills.fetch_add(bf.finished, Ordering::Relaxed);
            c.backfills_by_tree.fetch_add(bf.by_tree, Ordering::Relaxed);
            c.backfill_tree_nodes
                .fetch_add(bf.tree_nodes, Ordering::Relaxed);
            c.backfill_listed.fetch_add(bf.listed, Ordering::Relaxed);
            c.backfill_copied.fetch_add(bf.copied, Ordering::Relaxed);
        }
        if is_map {
            lock(&s.views).insert(pg, core.view());
        }
        let mut shell = Shell {
            s: &s,
            me: &me,
            pg,
            waiters: &mut waiters,
        };
        crate::pg::route(fx, &mut shell);
        if !children.is_empty() {
            super::split::start_children(&s, &children);
        }
        if per_op {
            continue;
        }
        let mut st = lock(&s.stats);
        let old = match core.stat() {
            Some(x) => {
                let state = x.state;
                st.insert(pg, x).map(|o| o.state) != Some(state)
            }
            None => st.remove(&pg).is_some(),
        };
        if old {
            s.stats_changed.notify_one();
        }
    }
}

/// Objects and bytes sent to other copies, for the monitors' recovery
/// rate.
fn count_recovery(s: &OsdShared, pool: u64, pushes: &[crate::pg::Push]) {
    let bytes: u64 = pushes
        .iter()
        .filter_map(|p| p.copy.as_ref())
        .map(crate::pg::recovery::ObjectCopy::payload_len)
        .sum();
    let c = &s.counters;
    c.recovery_objects
        .fetch_add(pushes.len() as u64, Ordering::Relaxed);
    c.recovery_bytes.fetch_add(bytes, Ordering::Relaxed);
    let p = c.pool(pool);
    p.recovery_objects
        .fetch_add(pushes.len() as u64, Ordering::Relaxed);
    p.recovery_bytes.fetch_add(bytes, Ordering::Relaxed);
}

/// Tell the PGs whose asks were granted; a PG whose task has ended
/// gives its slot back at once.
pub(super) fn grant(s: &Arc<OsdShared>, mut granted: Vec<(PgId, u64)>) {
    while let Some((pg, ask)) = granted.pop() {
        let mb = lock(&s.pgs).get(&pg).cloned();
        if !mb.is_some_and(|m| m.control(Input::Reserved { ask })) {
            granted.extend(lock(&s.reserver).release((pg, ask)));
        }
    }
}

/// The daemon's side of the PG's effects: waiters answered, store
/// transactions queued, messages sent through `peers`, asks to the
/// monitors and to the OSD's reserver.
struct Shell<'a> {
    s: &'a Arc<OsdShared>,
    me: &'a Mailbox,
    pg: PgId,
    waiters: &'a mut HashMap<u64, Waiter>,
}

impl Host for Shell<'_> {
    fn reply(&mut self, token: u64, reply: OpReply) {
        if let Some(Waiter::Op(w)) = self.waiters.remove(&token) {
            let _ = w.send(reply);
        }
    }

    fn list_reply(&mut self, token: u64, result: ListResult) {
        if let Some(Waiter::List(w)) = self.waiters.remove(&token) {
            let _ = w.send(result);
        }
    }

    fn command_reply(&mut self, token: u64, result: crate::pg::CommandResult) {
        if let Some(Waiter::Command(w)) = self.waiters.remove(&token) {
            let _ = w.send(result);
        }
    }

    fn send(&mut self, id: u64, to: i32, msg: PeerMsg) {
        match &msg {
            PeerMsg::Push { push, .. } => {
                count_recovery(self.s, self.pg.pool, std::slice::from_ref(push))
            }
            PeerMsg::Chunk { chunk, .. } => count_recovery(self.s, self.pg.pool, &chunk.pushes),
            _ => {}
        }
        let send = peers::send(self.s.clone(), self.me.clone(), self.pg, id, to, msg);
        tokio::spawn(send);
    }

    fn answer(&mut self, token: u64, reply: PeerReply) {
        if let Some(Waiter::Peer(w)) = self.waiters.remove(&token) {
            let _ = w.send(reply);
        }
    }

    fn apply(&mut self, tid: u64, txn: Transaction, sync: bool) {
        let (s, pg) = (self.s, self.pg);
        let commit = if sync {
            s.store.queue_transaction(txn)
        } else {
            s.store.queue_unsynced(txn)
        };
        let me = self.me.clone();
        // (Weak: the call may run on a store thread, which must never
        // drop the OSD, and with it the store that joins that thread.)
        let s = Arc::downgrade(s);
        let rt = tokio::runtime::Handle::current();
        // Straight from the store's committer to the PG's mailbox: no
        // task per transaction waits for it.
        commit.on_complete(move |result| {
            if let Err(e) = &result {
                // Fail-stop at once: the PG already counts this
                // transaction (its versions, its log); a copy that lost
                // it must not go on serving.
                if let Some(s) = s.upgrade() {
                    let _rt = rt.enter();
                    s.fail(format!("pg {pg}: a store transaction failed: {e}"));
                    // (Handed to the runtime: never dropped here.)
                    rt.spawn(async move { drop(s) });
                }
                return;
            }
            me.control(Input::LocalDone { tid, result });
        });
    }

    fn monitor(&mut self, ask: MonAsk) {
        let (s, pg) = (self.s, self.pg);
        match ask {
            MonAsk::Record(ask) => monitor::ask_record(s, ask, self.me.clone()),
            MonAsk::PgTemp(osds) => monitor::request_pg_temp(s, pg, osds),
            MonAsk::PrimaryTemp(osd) => monitor::request_primary_temp(s, pg, osd),
        }
    }

    fn reserve(&mut self, ask: u64, priority: u64) {
        let granted = lock(&self.s.reserver).ask((self.pg, ask), priority);
        grant(self.s, granted);
    }

    fn release(&mut self, ask: u64) {
        let granted = lock(&self.s.reserver).release((self.pg, ask));
        grant(self.s, granted);
    }

    /// Behind the requests already queued (the request lane: the control
    /// lane goes first, and would keep a PG's clients and peers waiting
    /// for a whole map build), and (clients using this OSD) after the
    /// busy pause: work done a piece at a time (scrubs) goes below client
    /// I/O.
    fn continue_later(&mut self) {
        let s = self.s;
        let pause = s.cfg.scrub_busy_sleep;
        let busy = s.now_ms() < s.client_io_ms.load(Ordering::Relaxed) + super::CLIENT_BUSY_MS;
        let pause = (busy && !pause.is_zero()).then_some(pause);
        let me = self.me.clone();
        tokio::spawn(async move {
            if let Some(p) = pause {
                tokio::time::sleep(p).await;
            }
            let msg = PgMsg {
                input: Input::Continue,
                reply: None,
            };
            me.request(msg).await;
        });
    }

    /// On the runtime's blocking pool: reads of many objects wait on the
    /// device at once, and this PG's task goes on meanwhile.
    fn read(&mut self, tid: u64, job: crate::pg::ReadJob) {
        let store = self.s.store.clone();
        let me = self.me.clone();
        tokio::task::spawn_blocking(move || {
            // (A read that panicked is answered all the same: without its
            // ReadDone its object would stay busy for the interval.)
            let run = std::panic::AssertUnwindSafe(|| job.run(store.as_ref()));
            let result = std::panic::catch_unwind(run).unwrap_or_else(|_| {
                Err(loligo_types::ops::OpError::Io(
                    "the object's read failed".into(),
                ))
            });
            me.control(Input::ReadDone { tid, result });
        });
    }
}
