//! A PG's task: the only code that feeds the PG state machine. It takes
//! inputs from the PG's mailbox and a periodic tick, hands them to
//! `Pg::handle`, and performs the effects: answers to waiters, store
//! commits, replica writes and info queries (through `peers`), write-set
//! records and pg_temp requests (through `monitor`).
//!
//! It must never decide what a PG decides: it only performs effects.

use super::mailbox::{self, Inbox, Mailbox, PgMsg, Waiter, PG_REQUESTS_MAX};
use super::{lock, monitor, peers, OsdShared};
use crate::msg::{PeerMsg, PeerReply};
use crate::pg::{Effect, Input, Pg};
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
    if let Err(e) = s.ensure_collection(pg) {
        tracing::error!("pg {pg}: cannot create its collection: {e}");
        return None;
    }
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
    core.log_entries_max = s.cfg.pg_log_entries.max(1);
    core.backfill_chunk_objects = s.cfg.backfill_chunk_objects.max(1);
    core.recovery_sleep_ms = s.cfg.recovery_sleep.as_millis() as u64;
    // Erasure-coded pools keep no trees.
    let ec = s.map().and_then(|m| {
        m.pools
            .get(&pg.pool)
            .map(|p| matches!(p.kind, loligo_types::PoolKind::Erasure { .. }))
    });
    core.scrub_interval_ms = s.cfg.scrub_interval.as_millis() as u64;
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
        pgs.insert(pg, mb.clone());
    }
    tokio::spawn(run(s.clone(), mb.clone(), inbox, core));
    Some(mb)
}

async fn run(s: Arc<OsdShared>, me: Mailbox, mut inbox: Inbox, mut core: Pg) {
    let pg = core.id;
    let mut waiters: HashMap<u64, Waiter> = HashMap::new();
    let mut next_token = 1u64;
    let mut tick = tokio::time::interval(Duration::from_millis(PG_TICK_MS));
    loop {
        let msg = tokio::select! {
            m = inbox.recv() => match m { Some(m) => m, None => return },
            _ = tick.tick() => PgMsg { input: Input::Tick { now_ms: s.now_ms() }, reply: None },
        };
        if s.stopped.load(Ordering::Relaxed) {
            return;
        }
        let mut input = msg.input;
        if let Some(w) = msg.reply {
            let token = next_token;
            next_token += 1;
            match &mut input {
                Input::Op { token: t, .. }
                | Input::RepOp { token: t, .. }
                | Input::List { token: t, .. }
                | Input::Log { token: t, .. }
                | Input::Push { token: t, .. }
                | Input::Scan { token: t, .. }
                | Input::Chunk { token: t, .. }
                | Input::StrayCheck { token: t, .. }
                | Input::GetLog { token: t, .. }
                | Input::Pull { token: t, .. }
                | Input::ShardRead { token: t, .. }
                | Input::Query { token: t, .. } => *t = token,
                _ => {}
            }
            waiters.insert(token, w);
        }
        let is_map = matches!(input, Input::Map { .. });
        // Stats for the monitors are refreshed on every input but the
        // per-op ones (ticks come every PG_TICK_MS): building them for
        // each op cost a few allocations on the read path.
        let per_op = matches!(
            input,
            Input::Op { .. }
                | Input::LocalDone { .. }
                | Input::RepDone { .. }
                | Input::RepOp { .. }
                | Input::List { .. }
                | Input::Query { .. }
                | Input::Push { .. }
                | Input::PushDone { .. }
        );
        let fx = core.handle(s.store.as_ref(), input);
        let (shards, theory, fetched) = core.take_rebuilt();
        if shards > 0 {
            let c = &s.counters;
            c.rebuilt_shards.fetch_add(shards, Ordering::Relaxed);
            c.rebuild_theory_bytes.fetch_add(theory, Ordering::Relaxed);
            c.rebuild_fetched_bytes
                .fetch_add(fetched, Ordering::Relaxed);
        }
        if is_map {
            lock(&s.views).insert(pg, core.view());
        }
        perform(&s, &me, pg, &mut waiters, fx);
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
fn count_recovery(s: &OsdShared, pushes: &[crate::pg::Push]) {
    let bytes: u64 = pushes
        .iter()
        .filter_map(|p| p.copy.as_ref())
        .map(crate::pg::recovery::ObjectCopy::payload_len)
        .sum();
    let c = &s.counters;
    c.recovery_objects
        .fetch_add(pushes.len() as u64, Ordering::Relaxed);
    c.recovery_bytes.fetch_add(bytes, Ordering::Relaxed);
}

fn answer(waiters: &mut HashMap<u64, Waiter>, token: u64, f: impl FnOnce(Waiter)) {
    if let Some(w) = waiters.remove(&token) {
        f(w);
    }
}

/// Tell the PGs whose asks were granted; a PG whose task has ended
/// gives its slot back at once.
fn grant(s: &Arc<OsdShared>, mut granted: Vec<(PgId, u64)>) {
    while let Some((pg, ask)) = granted.pop() {
        let mb = lock(&s.pgs).get(&pg).cloned();
        if !mb.is_some_and(|m| m.control(Input::Reserved { ask })) {
            granted.extend(lock(&s.reserver).release((pg, ask)));
        }
    }
}

fn perform(
    s: &Arc<OsdShared>,
    me: &Mailbox,
    pg: PgId,
    waiters: &mut HashMap<u64, Waiter>,
    fx: Vec<Effect>,
) {
    for e in fx {
        match e {
            Effect::Reply { token, reply } => answer(waiters, token, |w| {
                if let Waiter::Op(w) = w {
                    let _ = w.send(reply);
                }
            }),
            Effect::RepReply { token, result } => answer(waiters, token, |w| {
                if let Waiter::Rep(w) = w {
                    let _ = w.send(result);
                }
            }),
            Effect::ListReply { token, result } => answer(waiters, token, |w| {
                if let Waiter::List(w) = w {
                    let _ = w.send(result);
                }
            }),
            Effect::InfoReply { token, result } => answer(waiters, token, |w| {
                if let Waiter::Info(w) = w {
                    let _ = w.send(result);
                }
            }),
            Effect::FetchLog { tid, to, ctx } => {
                let msg = PeerMsg::GetLog {
                    pg,
                    from: s.cfg.id,
                    ctx,
                };
                let take = |r| match r {
                    PeerReply::OwnLog(l) => Some(l),
                    _ => None,
                };
                let done = move |result| Input::GetLogDone {
                    tid,
                    from: to,
                    result,
                };
                tokio::spawn(peers::fetch(s.clone(), me.clone(), pg, to, msg, take, done));
            }
            Effect::Pull {
                tid,
                to,
                ctx,
                name,
                need,
            } => {
                let msg = PeerMsg::Pull {
                    pg,
                    from: s.cfg.id,
                    ctx,
                    name,
                    need,
                };
                let take = |r| match r {
                    PeerReply::Pulled(p) => Some(p),
                    _ => None,
                };
                let done = move |result| Input::PullDone {
                    tid,
                    from: to,
                    result,
                };
                tokio::spawn(peers::fetch(s.clone(), me.clone(), pg, to, msg, take, done));
            }
            Effect::ReadShard {
                tid,
                to,
                epoch,
                name,
                extents,
                version,
                shard,
            } => {
                let msg = PeerMsg::ReadShard {
                    pg,
                    from: s.cfg.id,
                    epoch,
                    name,
                    extents,
                    version,
                    shard,
                };
                let take = |r| match r {
                    PeerReply::ShardData(d) => Some(d.into_iter().map(|b| b.0).collect()),
                    _ => None,
                };
                let done = move |result| Input::ShardReadDone {
                    tid,
                    from: to,
                    shard,
                    result,
                };
                tokio::spawn(peers::fetch(s.clone(), me.clone(), pg, to, msg, take, done));
            }
            Effect::ShardReadReply { token, result } => answer(waiters, token, |w| {
                if let Waiter::ShardData(w) = w {
                    let _ = w.send(result);
                }
            }),
            Effect::OwnLogReply { token, result } => answer(waiters, token, |w| {
                if let Waiter::OwnLog(w) = w {
                    let _ = w.send(result);
                }
            }),
            Effect::PullReply { token, result } => answer(waiters, token, |w| {
                if let Waiter::Pulled(w) = w {
                    let _ = w.send(result);
                }
            }),
            Effect::AskClean { to, epoch, shard } => {
                tokio::spawn(peers::ask_clean(
                    s.clone(),
                    me.clone(),
                    pg,
                    to,
                    epoch,
                    shard,
                ));
            }
            Effect::CleanReply { token, clean } => answer(waiters, token, |w| {
                if let Waiter::Clean(w) = w {
                    let _ = w.send(clean);
                }
            }),
            Effect::Reserve { ask, priority } => {
                let granted = lock(&s.reserver).ask((pg, ask), priority);
                grant(s, granted);
            }
            Effect::Release { ask } => {
                let granted = lock(&s.reserver).release((pg, ask));
                grant(s, granted);
            }
            Effect::Apply { tid, txn, sync } => {
                let commit = if sync {
                    s.store.queue_transaction(txn)
                } else {
                    s.store.queue_unsynced(txn)
                };
                let me = me.clone();
                let s = s.clone();
                tokio::spawn(async move {
                    let result = commit.await;
                    if let Err(e) = &result {
                        // Fail-stop: the PG already counts this
                        // transaction (its versions, its log); a copy
                        // that lost it must not go on serving.
                        s.fail(format!("pg {pg}: a store transaction failed: {e}"));
                        return;
                    }
                    me.control(Input::LocalDone { tid, result });
                });
            }
            Effect::Replicate { tid, to, ctx, txn } => {
                let interval = ctx.interval;
                let from = s.cfg.id;
                let msg = PeerMsg::RepOp { pg, from, ctx, txn };
                let done = move |result| Input::RepDone {
                    tid,
                    from: to,
                    result,
                };
                tokio::spawn(peers::send_acked(
                    s.clone(),
                    me.clone(),
                    pg,
                    interval,
                    to,
                    msg,
                    done,
                ));
            }
            Effect::QueryInfo {
                to,
                interval,
                epoch,
            } => {
                let q = peers::query_info(s.clone(), me.clone(), pg, to, interval, epoch);
                tokio::spawn(q);
            }
            Effect::LogReply { token, result } => answer(waiters, token, |w| {
                if let Waiter::Log(w) = w {
                    let _ = w.send(result);
                }
            }),
            Effect::SendLog { tid, to, ctx, log } => {
                tokio::spawn(peers::send_log(
                    s.clone(),
                    me.clone(),
                    pg,
                    tid,
                    to,
                    ctx,
                    log,
                ));
            }
            Effect::Push { tid, to, ctx, push } => {
                count_recovery(s, std::slice::from_ref(&push));
                let interval = ctx.interval;
                let from = s.cfg.id;
                let msg = PeerMsg::Push {
                    pg,
                    from,
                    ctx,
                    push,
                };
                let done = move |result| Input::PushDone {
                    tid,
                    from: to,
                    result,
                };
                tokio::spawn(peers::send_acked(
                    s.clone(),
                    me.clone(),
                    pg,
                    interval,
                    to,
                    msg,
                    done,
                ));
            }
            Effect::SendChunk {
                tid,
                to,
                ctx,
                chunk,
            } => {
                count_recovery(s, &chunk.pushes);
                let interval = ctx.interval;
                let from = s.cfg.id;
                let msg = PeerMsg::Chunk {
                    pg,
                    from,
                    ctx,
                    chunk,
                };
                let done = move |result| Input::ChunkDone {
                    tid,
                    from: to,
                    result,
                };
                tokio::spawn(peers::send_acked(
                    s.clone(),
                    me.clone(),
                    pg,
                    interval,
                    to,
                    msg,
                    done,
                ));
            }
            Effect::SendScan {
                tid,
                to,
                ctx,
                after,
                upto,
                limit,
                filter,
            } => {
                let msg = PeerMsg::Scan {
                    pg,
                    from: s.cfg.id,
                    ctx,
                    after,
                    upto,
                    limit,
                    filter,
                };
                tokio::spawn(peers::scan(s.clone(), me.clone(), pg, tid, to, msg));
            }
            Effect::ScanReply { token, result } => answer(waiters, token, |w| {
                if let Waiter::Scan(w) = w {
                    let _ = w.send(result);
                }
            }),
            Effect::RecordWriteSet(ask) => monitor::ask_record(s, ask, me.clone()),
            Effect::RequestPgTemp { osds } => monitor::request_pg_temp(s, pg, osds),
            Effect::RequestPrimaryTemp { osd } => monitor::request_primary_temp(s, pg, osd),
        }
    }
}
