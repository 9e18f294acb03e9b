//! `loligo osdmap scale --peering`: how long the PGs take to peer again
//! after one OSD fails, in a cluster of N simulated OSDs against a real
//! monitor. Every OSD runs the real PG state machines (`loligo_osd::pg`)
//! over an in-memory store, takes the real monitor's incrementals, and
//! picks the PGs to tell of each map as the daemon does
//! (`loligo_osd::daemon::pgs_to_tell`); only the network and the tasks
//! are simulated, in one thread.
//!
//! Time is virtual, and measured: each OSD is one processor, and each of
//! its steps (a map, a message to a PG) costs what the real code took in
//! this process, timed around the call; a message takes `net_us` one
//! way; a store commit `sync_us`; the monitor is one processor whose
//! commits take what the real one took (its Raft log synced on this
//! machine's disk). Every OSD applies an incremental as the daemon does,
//! but the work is done once and its measured cost charged to each (the
//! result is the same on every OSD). The failure is a monitor commit of
//! `osd down` (detection, the heartbeat grace, is not part of it); the
//! PGs are empty, so peering is the protocol's cost, not log transfer.
//!
//! It must never report a time it did not measure in this run, and never
//! fake a message it cannot route: an effect it does not model is an
//! error.

use crate::CliError;
use loligo_mon::{MonError, MonRequest, Monitor};
use loligo_monc::protocol::{MapUpdate, RecordAsk, WRITE_SETS_PER_REQUEST_MAX};
use loligo_osd::daemon::reserve::Reserver;
use loligo_osd::daemon::{pgs_to_tell, RECOVERY_MAX_ACTIVE};
use loligo_osd::msg::{PeerMsg, PeerReply};
use loligo_osd::pg::{
    map_input, route, stored_info, CommandResult, Host, Input, ListResult, MonAsk, Pg, RepError,
};
use loligo_store::{CollectionId, MemStore, ObjectStore, Transaction};
use loligo_types::mapping::{Changed, PgMappings};
use loligo_types::ops::OpReply;
use loligo_types::{decode, decode_map, Epoch, Incremental, OsdMap, OsdStates, PgId, PgState};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

/// Virtual time, in nanoseconds.
type Ns = u64;

/// One OSD's write sets for the monitor to record.
type Records = Vec<RecordAsk>;

/// How long the simulation may run (virtual) before it gives up.
const VIRTUAL_LIMIT_NS: Ns = 120_000_000_000;
/// A PG's tick (as the daemon's `PG_TICK_MS`).
const TICK_NS: Ns = 250_000_000;
/// A peer that cannot answer a query yet is asked again after this (the
/// daemon's `PEER_RESEND_MS`).
const RESEND_NS: Ns = 200_000_000;

/// What one failure cost.
pub struct PeerRow {
    pub osds: u32,
    pub pgs: u64,
    /// PGs whose acting set held the failed OSD.
    pub affected: usize,
    /// From the monitor starting the `osd down` commit to the last
    /// affected PG serving reads (peered) and writes (its write set
    /// recorded), virtual ms.
    pub peered_ms: f64,
    pub active_ms: f64,
    /// Map epochs the monitor made until then.
    pub epochs: u64,
    /// Messages between OSDs, and requests to the monitor.
    pub messages: u64,
    pub mon_requests: u64,
    /// The busiest OSD's processing time, and all OSDs' together (ms).
    pub osd_busy_max_ms: f64,
    pub osd_busy_total_ms: f64,
    /// The monitor's busy time (ms).
    pub mon_busy_ms: f64,
    /// The largest single charge: one OSD step (a map, a message to a
    /// PG) and one monitor turn (ms). A step far above the others is
    /// likely this process's hiccup (a page fault storm, the monitor's
    /// own tasks) measured into virtual time, and delays what waits on
    /// that OSD or the monitor.
    pub osd_step_max_ms: f64,
    pub mon_step_max_ms: f64,
    /// Wall time of the setup (every PG created and peered) and of the
    /// measured phase (s).
    pub setup_s: f64,
    pub sim_s: f64,
}

/// One map epoch as every OSD gets it.
struct EpochRec {
    map: Arc<OsdMap>,
    states: OsdStates,
    changed: Changed,
    /// Decoding and applying its incremental, and advancing the carried
    /// mappings: charged to every OSD that takes it.
    cost_ns: Ns,
}

/// A message in flight between OSDs, found again by its answer's token.
struct Pending {
    /// The OSD and PG that sent it, the OSD it went to, and its send id.
    from: i32,
    pg: PgId,
    to: i32,
    id: u64,
    /// A peering query, kept to ask again while it cannot be answered.
    query: Option<PeerMsg>,
}

enum Ev {
    /// Map `epoch` reaches an OSD.
    Map {
        osd: i32,
        epoch: Epoch,
    },
    /// An input for one PG of an OSD.
    Pg {
        osd: i32,
        pg: PgId,
        input: Input,
    },
    /// A request that needs a token (the asked OSD's side).
    Ask {
        to: i32,
        pg: PgId,
        token: u64,
        input: Input,
    },
    /// An OSD's batch of write sets reaches the monitor.
    Record {
        osd: i32,
        items: Records,
    },
    /// The monitor's answer: the PGs whose record holds.
    Recorded {
        osd: i32,
        held: Vec<(PgId, Epoch)>,
    },
    /// Another request to the monitor (pg_temp, primary_temp).
    Mon(MonRequest),
    /// The monitor is free to serve what waits.
    MonTurn,
    Tick {
        osd: i32,
    },
}

struct SimOsd {
    up: bool,
    store: MemStore,
    pgs: BTreeMap<PgId, Pg>,
    slots: Reserver,
    /// When this OSD's processor is free next.
    free_at: Ns,
    epoch: Epoch,
    busy_ns: Ns,
    record_asks: BTreeMap<PgId, RecordAsk>,
    recording: bool,
}

struct Sim {
    mon: Arc<Monitor>,
    net_ns: Ns,
    sync_ns: Ns,
    osds: Vec<SimOsd>,
    epochs: BTreeMap<Epoch, EpochRec>,
    mappings: PgMappings,
    queue: BTreeMap<(Ns, u64), Ev>,
    seq: u64,
    /// Events in the queue other than ticks.
    live: usize,
    /// Events handled other than ticks, and ticks handled.
    handled: u64,
    ticks: u64,
    pending: HashMap<u64, Pending>,
    next_token: u64,
    mon_free_at: Ns,
    mon_busy_ns: Ns,
    /// The largest single OSD step and monitor turn charged.
    osd_step_max_ns: Ns,
    mon_step_max_ns: Ns,
    /// Requests waiting for the monitor (with the OSD and records of a
    /// `RecordWriteSets`), and whether its turn is in the queue.
    mon_inbox: Vec<(Option<(i32, Records)>, MonRequest)>,
    mon_turn_due: bool,
    messages: u64,
    mon_requests: u64,
    /// Setup: record asks go to one pool, committed when all is quiet.
    setup: bool,
    setup_asks: Vec<(i32, RecordAsk)>,
    /// The PGs being watched, and when each last became peered / active.
    watch: BTreeSet<PgId>,
    peered_at: Ns,
    active_at: Ns,
}

fn err(e: impl std::fmt::Display) -> CliError {
    CliError(format!("peering sim: {e}"))
}

fn elapsed_ns(t: Instant) -> Ns {
    t.elapsed().as_nanos() as Ns
}

impl Sim {
    fn push(&mut self, at: Ns, ev: Ev) {
        if !matches!(ev, Ev::Tick { .. }) {
            self.live += 1;
        }
        self.seq += 1;
        self.queue.insert((at, self.seq), ev);
    }

    fn osd(&mut self, id: i32) -> Result<&mut SimOsd, CliError> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.osds.get_mut(i))
            .ok_or_else(|| err(format!("no osd.{id}")))
    }

    fn is_up(&self, id: i32) -> bool {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.osds.get(i))
            .is_some_and(|o| o.up)
    }

    /// Take the monitor's new epochs: each incremental decoded and applied
    /// once (its cost measured, to be charged to every OSD), the carried
    /// mappings advanced; every up OSD gets the newest at `at`.
    fn take_epochs(&mut self, at: Ns) -> Result<(), CliError> {
        let have = self.epochs.keys().next_back().copied().unwrap_or(0);
        let updates = self.mon.updates_since(have);
        if updates.is_empty() {
            return Ok(());
        }
        for u in updates {
            let t = Instant::now();
            let prev = self.epochs.values().next_back().map(|r| r.map.clone());
            let map = match (u, prev) {
                (MapUpdate::Inc(b), Some(prev)) => {
                    let inc: Incremental = decode("incremental", &b).map_err(err)?;
                    // As an OSD does: its map watch applies the
                    // incremental in place, and the OSD keeps a copy.
                    let mut m = (*prev).clone();
                    m.apply(&inc).map_err(err)?;
                    m
                }
                (MapUpdate::Full(b), _) => decode_map(&b).map_err(err)?,
                (MapUpdate::Inc(_), None) => return Err(err("an incremental without a map")),
            };
            let changed = self.mappings.advance(&map).map_err(err)?;
            // OSDs read every epoch's mappings from the newest carried
            // ones: past setup, an epoch must keep CRUSH's inputs.
            if let (false, Some(prev)) = (self.setup, self.epochs.values().next_back()) {
                if !self.mappings.crush_steps_hold(&prev.map, &prev.states) {
                    return Err(err(format!(
                        "epoch {} changes CRUSH's inputs, which this simulation does not model",
                        map.epoch
                    )));
                }
            }
            let states = map.osd_states();
            let cost_ns = elapsed_ns(t);
            let epoch = map.epoch;
            self.epochs.insert(
                epoch,
                EpochRec {
                    map: Arc::new(map),
                    states,
                    changed,
                    cost_ns,
                },
            );
        }
        let newest = self.epochs.keys().next_back().copied().unwrap_or(0);
        for o in 0..self.osds.len() {
            if self.osds[o].up {
                self.push(
                    at + self.net_ns,
                    Ev::Map {
                        osd: o as i32,
                        epoch: newest,
                    },
                );
            }
        }
        Ok(())
    }

    /// OSD `o` takes every epoch after its own up to `epoch` (in setup,
    /// only the newest, as an OSD that was away does).
    fn on_map(&mut self, o: i32, epoch: Epoch, now: Ns) -> Result<(), CliError> {
        let have = self.osd(o)?.epoch;
        // Setup: straight to the newest (the epochs its many commits
        // made would otherwise be taken one after another).
        let epoch = match self.epochs.keys().next_back() {
            Some(&newest) if self.setup => newest,
            _ => epoch,
        };
        if epoch <= have {
            return Ok(());
        }
        let steps: Vec<Epoch> = if self.setup {
            vec![epoch]
        } else {
            self.epochs
                .range(have + 1..=epoch)
                .map(|(e, _)| *e)
                .collect()
        };
        for e in steps {
            let Some(rec) = self.epochs.get(&e) else {
                return Err(err(format!("epoch {e} was never taken")));
            };
            let (map, states, cost) = (rec.map.clone(), rec.states.clone(), rec.cost_ns);
            // Setup skips epochs; what they changed is summed, unless they
            // name more PGs than the OSD's own (the PGs whose CRUSH step,
            // pg_temp or upmap names it, and those it holds, which cover
            // every changed PG it is in): then it looks at its own only,
            // as for a change of all. Summing alone cost every OSD every
            // PG a commit named, O(OSDs x PGs) at 10,000 OSDs.
            let changed = if self.setup {
                let skipped = || self.epochs.range(have + 1..=e).map(|(_, r)| &r.changed);
                let named = skipped().fold(0usize, |n, c| n.saturating_add(c.len()));
                let own = self.osds.get(o as usize).map_or(0, |s| s.pgs.len())
                    + self.mappings.pgs_of(o).len();
                if named > own {
                    Changed::All
                } else {
                    let mut v = BTreeSet::new();
                    for c in skipped() {
                        if let Changed::Pgs(p) = c {
                            v.extend(p.iter().copied());
                        }
                    }
                    Changed::Pgs(v.into_iter().collect())
                }
            } else {
                rec.changed.clone()
            };
            let t = Instant::now();
            let held: Vec<PgId> = self.osd(o)?.pgs.keys().copied().collect();
            let tell = pgs_to_tell(o, &map, &self.mappings, &changed, held);
            let now_ms = now / 1_000_000;
            let mut inputs = Vec::new();
            for pg in tell {
                let (Some(pool), Some(pm)) = (
                    map.pools.get(&pg.pool),
                    self.mappings.mapping_in(&map, &states, pg),
                ) else {
                    continue;
                };
                let osd = self.osd(o)?;
                let mine = pm.acting.contains(&o) || pm.up.contains(&o);
                if !osd.pgs.contains_key(&pg) && !mine {
                    continue;
                }
                inputs.push((pg, map_input(&map, pool, pg, &pm, None, 0, now_ms)));
            }
            self.osd(o)?.epoch = e;
            let shell = elapsed_ns(t);
            self.charge(o, now, cost + shell)?;
            for (pg, input) in inputs {
                self.feed(o, pg, input, now)?;
            }
        }
        Ok(())
    }

    /// Add `ns` of work to OSD `o`, starting no earlier than `now`.
    fn charge(&mut self, o: i32, now: Ns, ns: Ns) -> Result<(), CliError> {
        let osd = self.osd(o)?;
        osd.free_at = osd.free_at.max(now) + ns;
        osd.busy_ns += ns;
        self.osd_step_max_ns = self.osd_step_max_ns.max(ns);
        Ok(())
    }

    /// OSD `o`'s PG `pg` (made, with its collection, if it has none).
    fn ensure_pg(&mut self, o: i32, pg: PgId) -> Result<(), CliError> {
        let osd = self.osd(o)?;
        if osd.pgs.contains_key(&pg) {
            return Ok(());
        }
        let c = CollectionId::pg(pg.pool, pg.ps);
        if !osd.store.collection_exists(c).map_err(err)? {
            let mut t = Transaction::new();
            t.create_collection(c);
            osd.store.apply(t).map_err(err)?;
        }
        let info = stored_info(&osd.store, c).map_err(err)?.unwrap_or_default();
        let mut core = Pg::new(pg, o, info);
        // (OSDs that never ran before: no lease forgotten in a restart.)
        core.set_read_lease(loligo_osd::pg::READ_LEASE_MS, None);
        // The trees matter to backfill, not to peering; in memory they
        // would cost 256 KiB per PG copy.
        core.merkle_leaves = 0;
        osd.pgs.insert(pg, core);
        Ok(())
    }

    /// Hand `input` to OSD `o`'s PG `pg` at `now` and route its effects.
    fn feed(&mut self, o: i32, pg: PgId, input: Input, now: Ns) -> Result<(), CliError> {
        if !self.is_up(o) {
            return Ok(());
        }
        let t = Instant::now();
        self.ensure_pg(o, pg)?;
        let osd = self.osd(o)?;
        let Some(core) = osd.pgs.get_mut(&pg) else {
            return Ok(());
        };
        let before = core.stat().map(|s| s.state);
        let fx = core.handle(&osd.store, input);
        let after = core.stat().map(|s| s.state);
        let cost = elapsed_ns(t);
        self.charge(o, now, cost)?;
        if before != after {
            self.note_state(o, pg, before, after)?;
        }
        let at = self.osd(o)?.free_at;
        let mut out = Out {
            sim: self,
            o,
            pg,
            at,
            failed: None,
        };
        route(fx, &mut out);
        out.failed.map_or(Ok(()), Err)
    }

    /// A watched PG's primary on OSD `o` changed state: note when it
    /// became peered (serving reads) or active (serving writes).
    fn note_state(
        &mut self,
        o: i32,
        pg: PgId,
        before: Option<PgState>,
        after: Option<PgState>,
    ) -> Result<(), CliError> {
        if !self.watch.contains(&pg) {
            return Ok(());
        }
        let at = self.osd(o)?.free_at;
        let active = |s: Option<PgState>| s.is_some_and(|s| s.contains(PgState::ACTIVE));
        let peered = |s: Option<PgState>| {
            s.is_some_and(|s| s.contains(PgState::ACTIVE) || s.contains(PgState::ACTIVATING))
        };
        if active(after) && !active(before) {
            self.active_at = self.active_at.max(at);
        }
        if peered(after) && !peered(before) {
            self.peered_at = self.peered_at.max(at);
        }
        Ok(())
    }

    /// Send message `id` of OSD `from`'s PG `pg` to OSD `to` (an
    /// unreachable one answers with a failure at once, as a refused
    /// connection does).
    fn ask(&mut self, from: i32, pg: PgId, to: i32, id: u64, msg: PeerMsg, at: Ns) {
        self.next_token += 1;
        let token = self.next_token;
        self.messages += 1;
        let query = matches!(msg, PeerMsg::GetInfo { .. }).then(|| msg.clone());
        let p = Pending {
            from,
            pg,
            to,
            id,
            query,
        };
        self.pending.insert(token, p);
        if self.is_up(to) {
            let input = Input::Peer {
                msg,
                token,
                now_ms: 0,
            };
            let ev = Ev::Ask {
                to,
                pg,
                token,
                input,
            };
            self.push(at + self.net_ns, ev);
        } else {
            self.answer_failed(token, at);
        }
    }

    /// The asked OSD cannot be reached: its asker hears so (a peering
    /// query, as the daemon's gives up on a member the map shows down,
    /// hears nothing more; peering goes on once that map arrives).
    fn answer_failed(&mut self, token: u64, at: Ns) {
        let Some(p) = self.pending.remove(&token) else {
            return;
        };
        let reply = Err(RepError::Failed(format!("osd.{} unreachable", p.to)));
        let input = Input::Reply { id: p.id, reply };
        let ev = Ev::Pg {
            osd: p.from,
            pg: p.pg,
            input,
        };
        self.push(at + self.net_ns, ev);
    }

    /// An answer from OSD `o` to the message `token`: back to its sender
    /// (a peering query not answerable yet is asked again, as the daemon
    /// does).
    fn answer(&mut self, o: i32, token: u64, reply: PeerReply, at: Ns) {
        let Some(p) = self.pending.remove(&token) else {
            return;
        };
        self.messages += 1;
        if let (Some(q), PeerReply::Refused(_)) = (p.query, &reply) {
            return self.ask(p.from, p.pg, o, p.id, q, at + RESEND_NS);
        }
        let input = Input::Reply {
            id: p.id,
            reply: Ok(reply),
        };
        let ev = Ev::Pg {
            osd: p.from,
            pg: p.pg,
            input,
        };
        self.push(at + self.net_ns, ev);
    }

    fn grant(&mut self, o: i32, granted: Vec<(PgId, u64)>, at: Ns) {
        for (pg, ask) in granted {
            let input = Input::Reserved { ask };
            self.push(at, Ev::Pg { osd: o, pg, input });
        }
    }

    /// OSD `o`'s recorder: one request at a time, carrying every ask
    /// that waits (as the daemon's `record_write_sets`).
    fn send_records(&mut self, o: i32, at: Ns) -> Result<(), CliError> {
        let osd = self.osd(o)?;
        if osd.recording || osd.record_asks.is_empty() {
            return Ok(());
        }
        let mut items = Vec::new();
        while items.len() < WRITE_SETS_PER_REQUEST_MAX {
            let Some((_, ask)) = osd.record_asks.pop_first() else {
                break;
            };
            items.push(ask);
        }
        osd.recording = true;
        self.push(at + self.net_ns, Ev::Record { osd: o, items });
        Ok(())
    }

    /// The monitor serves `req` arriving at `at`: its commit takes what
    /// the real one takes, one at a time. Returns the reply's value and
    /// when it was sent.
    async fn mon_call(
        &mut self,
        req: MonRequest,
        at: Ns,
    ) -> Result<(serde_json::Value, Ns), CliError> {
        self.mon_requests += 1;
        let t = Instant::now();
        let r = self.mon.call(req).await;
        let done = self.mon_done(at, elapsed_ns(t))?;
        match r {
            Ok(r) => Ok((r.value, done)),
            Err(MonError::Map(e)) => Err(err(format!("monitor refused: {e}"))),
            Err(e) => Err(err(format!("monitor: {e}"))),
        }
    }

    /// The monitor worked `cost` on what reached it at `at` (once free):
    /// when it is done, with the epochs it made taken and sent out then.
    fn mon_done(&mut self, at: Ns, cost: Ns) -> Result<Ns, CliError> {
        self.mon_free_at = self.mon_free_at.max(at) + cost;
        self.mon_busy_ns += cost;
        self.mon_step_max_ns = self.mon_step_max_ns.max(cost);
        let done = self.mon_free_at;
        self.take_epochs(done)?;
        Ok(done)
    }

    /// Requests have reached the monitor at `at`: it serves them when it
    /// is free.
    fn mon_turn(&mut self, at: Ns) {
        if !self.mon_turn_due {
            self.mon_turn_due = true;
            let when = at.max(self.mon_free_at);
            self.push(when, Ev::MonTurn);
        }
    }

    /// The monitor serves every request waiting at `at`, all at once, as
    /// concurrent callers of the real one (which gathers what arrives
    /// together into as few epochs as it can); its busy time is what
    /// that took.
    async fn mon_serve(&mut self, at: Ns) -> Result<(), CliError> {
        self.mon_turn_due = false;
        let batch = std::mem::take(&mut self.mon_inbox);
        self.mon_requests += batch.len() as u64;
        let t = Instant::now();
        let mut calls = tokio::task::JoinSet::new();
        for (i, (_, req)) in batch.iter().enumerate() {
            let (mon, req) = (self.mon.clone(), req.clone());
            calls.spawn(async move { (i, mon.call(req).await) });
        }
        let mut results = vec![None; batch.len()];
        while let Some(r) = calls.join_next().await {
            let (i, r) = r.map_err(err)?;
            if let Some(slot) = results.get_mut(i) {
                *slot = Some(r);
            }
        }
        let done = self.mon_done(at, elapsed_ns(t))?;
        for ((who, _), r) in batch.into_iter().zip(results) {
            let r = match r {
                Some(Ok(r)) => r,
                Some(Err(e)) => return Err(err(format!("monitor: {e}"))),
                None => return Err(err("a monitor call was lost")),
            };
            if let Some((osd, items)) = who {
                let held: Vec<PgId> = serde_json::from_value(r.value).unwrap_or_default();
                let held = items
                    .into_iter()
                    .filter(|a| held.contains(&a.pg))
                    .map(|a| (a.pg, a.record.interval))
                    .collect();
                self.push(done + self.net_ns, Ev::Recorded { osd, held });
            }
        }
        Ok(())
    }

    /// Handle the next event; `false` when there is none.
    async fn step(&mut self) -> Result<bool, CliError> {
        let Some(((at, _), ev)) = self.queue.pop_first() else {
            return Ok(false);
        };
        if at > VIRTUAL_LIMIT_NS {
            return Err(err(format!(
                "PGs did not peer within {} s of virtual time: {}",
                VIRTUAL_LIMIT_NS / 1_000_000_000,
                self.stuck()
            )));
        }
        if matches!(ev, Ev::Tick { .. }) {
            self.ticks += 1;
        } else {
            self.live -= 1;
            self.handled += 1;
        }
        match ev {
            Ev::Map { osd, epoch } => {
                if self.is_up(osd) {
                    self.on_map(osd, epoch, at)?
                }
            }
            Ev::Pg { osd, pg, input } => self.feed(osd, pg, input, at)?,
            Ev::Ask {
                to,
                pg,
                token,
                input,
            } => {
                if !self.is_up(to) {
                    self.answer_failed(token, at);
                } else if is_query(&input) && !self.has_copy(to, pg)? {
                    // The daemon answers a query for a PG it holds no
                    // copy of at once.
                    self.answer(to, token, PeerReply::Info(None), at);
                } else {
                    // Requests carry the receiver's clock.
                    let mut input = input;
                    if let Input::Peer { now_ms, .. } = &mut input {
                        *now_ms = at / 1_000_000;
                    }
                    self.feed(to, pg, input, at)?;
                }
            }
            Ev::Record { osd, items } => {
                let req = MonRequest::RecordWriteSets {
                    items: items.clone(),
                };
                self.mon_inbox.push((Some((osd, items)), req));
                self.mon_turn(at);
            }
            Ev::MonTurn => self.mon_serve(at).await?,
            Ev::Recorded { osd, held } => {
                for (pg, interval) in held {
                    self.feed(osd, pg, Input::WriteSetRecorded { interval }, at)?;
                }
                if self.is_up(osd) {
                    self.osd(osd)?.recording = false;
                    let free = self.osd(osd)?.free_at.max(at);
                    self.send_records(osd, free)?;
                }
            }
            Ev::Mon(req) => {
                self.mon_inbox.push((None, req));
                self.mon_turn(at);
            }
            Ev::Tick { osd } => {
                if self.is_up(osd) {
                    let pgs: Vec<PgId> = self.osd(osd)?.pgs.keys().copied().collect();
                    let now_ms = at / 1_000_000;
                    for pg in pgs {
                        self.feed(osd, pg, Input::Tick { now_ms }, at)?;
                    }
                    self.push(at + TICK_NS, Ev::Tick { osd });
                }
            }
        }
        Ok(true)
    }

    /// What the watched PGs' primaries under the newest map say, for an
    /// error: a count per state, and the first PG in each.
    fn stuck(&self) -> String {
        let Some(rec) = self.epochs.values().next_back() else {
            return "no map".into();
        };
        let mut by: BTreeMap<String, (usize, PgId)> = BTreeMap::new();
        for &pg in &self.watch {
            let what = match self.mappings.mapping_in(&rec.map, &rec.states, pg) {
                None => "no mapping".to_string(),
                Some(pm) => {
                    let p = pm.acting_primary;
                    match usize::try_from(p).ok().and_then(|i| self.osds.get(i)) {
                        None => "no primary".to_string(),
                        Some(o) => format!(
                            "osd epoch {} of {}, {:?}",
                            o.epoch,
                            rec.map.epoch,
                            o.pgs.get(&pg).and_then(Pg::stat).map(|s| s.state)
                        ),
                    }
                }
            };
            by.entry(what).or_insert((0, pg)).0 += 1;
        }
        by.into_iter()
            .map(|(w, (n, pg))| format!("{n} PGs ({w}, e.g. {pg})"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn has_copy(&mut self, o: i32, pg: PgId) -> Result<bool, CliError> {
        let osd = self.osd(o)?;
        let c = CollectionId::pg(pg.pool, pg.ps);
        // As the daemon's `read_info`: a collection without an info
        // record is an empty copy.
        Ok(stored_info(&osd.store, c).map_err(err)?.is_some()
            || osd.store.collection_exists(c).map_err(err)?)
    }

    /// Run until nothing but ticks is left and every watched PG is active
    /// on its primary under the newest map.
    ///
    /// The check walks every watched PG, so it runs only when something
    /// happened since the last one: an event other than a tick, or a
    /// whole round of ticks (which may retry what was waiting).
    async fn settle(&mut self) -> Result<(), CliError> {
        let mut checked = None;
        loop {
            if self.live == 0 {
                if self.setup && !self.setup_asks.is_empty() {
                    self.commit_setup_asks().await?;
                    continue;
                }
                let now = (self.handled, self.ticks / self.osds.len().max(1) as u64);
                if checked != Some(now) {
                    checked = Some(now);
                    if self.watched_active()? {
                        return Ok(());
                    }
                }
            }
            if !self.step().await? {
                return Err(err("nothing left to do, yet PGs are not active"));
            }
        }
    }

    /// Setup: commit every waiting record in as few requests as allowed.
    async fn commit_setup_asks(&mut self) -> Result<(), CliError> {
        let asks = std::mem::take(&mut self.setup_asks);
        let at = self.queue.keys().next().map_or(0, |k| k.0);
        for chunk in asks.chunks(WRITE_SETS_PER_REQUEST_MAX) {
            let items = chunk.iter().map(|(_, a)| a.clone()).collect();
            let (value, done) = self
                .mon_call(MonRequest::RecordWriteSets { items }, at)
                .await?;
            let held: BTreeSet<PgId> = serde_json::from_value(value).unwrap_or_default();
            for (o, a) in chunk {
                if held.contains(&a.pg) {
                    let input = Input::WriteSetRecorded {
                        interval: a.record.interval,
                    };
                    self.push(
                        done,
                        Ev::Pg {
                            osd: *o,
                            pg: a.pg,
                            input,
                        },
                    );
                }
            }
        }
        Ok(())
    }

    /// Whether every watched PG's primary under the newest map holds it
    /// active, having taken that map.
    fn watched_active(&self) -> Result<bool, CliError> {
        let Some(rec) = self.epochs.values().next_back() else {
            return Ok(false);
        };
        let (map, states) = (rec.map.clone(), rec.states.clone());
        for &pg in &self.watch {
            let Some(pm) = self.mappings.mapping_in(&map, &states, pg) else {
                return Err(err(format!("pg {pg} has no mapping")));
            };
            let p = pm.acting_primary;
            if p < 0 {
                return Ok(false);
            }
            let osd = usize::try_from(p)
                .ok()
                .and_then(|i| self.osds.get(i))
                .ok_or_else(|| err(format!("no osd.{p}")))?;
            let active = osd.epoch == map.epoch
                && osd
                    .pgs
                    .get(&pg)
                    .and_then(Pg::stat)
                    .is_some_and(|s| s.state.contains(PgState::ACTIVE));
            if !active {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// OSD `o`'s PG `pg`'s effects, its step done at `at`, as the bench
/// performs them (the first error is kept).
struct Out<'a> {
    sim: &'a mut Sim,
    o: i32,
    pg: PgId,
    at: Ns,
    failed: Option<CliError>,
}

impl Out<'_> {
    fn keep(&mut self, r: Result<(), CliError>) {
        if let Err(e) = r {
            self.failed.get_or_insert(e);
        }
    }
}

impl Host for Out<'_> {
    fn reply(&mut self, _token: u64, _reply: OpReply) {}

    fn list_reply(&mut self, _token: u64, _result: ListResult) {}
    fn command_reply(&mut self, _token: u64, _result: CommandResult) {}

    fn send(&mut self, id: u64, to: i32, msg: PeerMsg) {
        self.sim.ask(self.o, self.pg, to, id, msg, self.at);
    }

    fn answer(&mut self, token: u64, reply: PeerReply) {
        self.sim.answer(self.o, token, reply, self.at);
    }

    fn apply(&mut self, tid: u64, txn: Transaction, sync: bool) {
        let (o, pg, at) = (self.o, self.pg, self.at);
        let r = self
            .sim
            .osd(o)
            .and_then(|osd| osd.store.apply(txn).map_err(err));
        if r.is_ok() {
            let input = Input::LocalDone {
                tid,
                result: Ok(()),
            };
            let when = at + if sync { self.sim.sync_ns } else { 0 };
            self.sim.push(when, Ev::Pg { osd: o, pg, input });
        }
        self.keep(r);
    }

    fn monitor(&mut self, ask: MonAsk) {
        let (o, pg, at) = (self.o, self.pg, self.at);
        let sim = &mut *self.sim;
        let req = match ask {
            MonAsk::PgTemp(osds) => MonRequest::PgTemp { pg, osds },
            MonAsk::PrimaryTemp(osd) => MonRequest::PrimaryTemp { pg, osd },
            MonAsk::Record(ask) => {
                if sim.setup {
                    sim.setup_asks.push((o, ask));
                    return;
                }
                let r = sim.osd(o).map(|osd| {
                    osd.record_asks.insert(pg, ask);
                });
                let r = r.and_then(|()| sim.send_records(o, at));
                return self.keep(r);
            }
        };
        sim.push(at + sim.net_ns, Ev::Mon(req));
    }

    fn reserve(&mut self, ask: u64, priority: u64) {
        let (o, pg, at) = (self.o, self.pg, self.at);
        match self.sim.osd(o) {
            Ok(osd) => {
                let granted = osd.slots.ask((pg, ask), priority);
                self.sim.grant(o, granted, at);
            }
            Err(e) => self.keep(Err(e)),
        }
    }

    fn release(&mut self, ask: u64) {
        let (o, pg, at) = (self.o, self.pg, self.at);
        match self.sim.osd(o) {
            Ok(osd) => {
                let granted = osd.slots.release((pg, ask));
                self.sim.grant(o, granted, at);
            }
            Err(e) => self.keep(Err(e)),
        }
    }

    /// (Only scrubs ask to go on, and this bench runs none.)
    fn continue_later(&mut self) {
        let (o, pg) = (self.o, self.pg);
        self.keep(Err(err(format!(
            "osd.{o} pg {pg}: a PG asked to go on in a bench without scrubs"
        ))));
    }

    fn read(&mut self, tid: u64, job: loligo_osd::pg::ReadJob) {
        let (o, pg, at) = (self.o, self.pg, self.at);
        match self.sim.osd(o) {
            Ok(osd) => {
                let result = job.run(&osd.store);
                let input = Input::ReadDone { tid, result };
                self.sim.push(at, Ev::Pg { osd: o, pg, input });
            }
            Err(e) => self.keep(Err(e)),
        }
    }
}

/// Whether `input` is a peering query.
fn is_query(input: &Input) -> bool {
    matches!(
        input,
        Input::Peer {
            msg: PeerMsg::GetInfo { .. },
            ..
        }
    )
}

/// Peer every PG of the monitor's cluster on `osds` simulated OSDs, mark
/// OSD `victim` down, and time the PGs' peering again.
pub async fn measure(
    mon: Arc<Monitor>,
    osds: u32,
    pgs: u64,
    victim: i32,
    net_us: u64,
    sync_us: u64,
) -> Result<PeerRow, CliError> {
    let t_setup = Instant::now();
    let reply = mon.call(MonRequest::GetMap).await.map_err(err)?;
    let map = decode_map(&reply.map.unwrap_or_default()).map_err(err)?;
    let mappings = PgMappings::new(&map).map_err(err)?;
    let mut sim = Sim {
        mon,
        net_ns: net_us * 1_000,
        sync_ns: sync_us * 1_000,
        osds: (0..osds as i32)
            .map(|_| SimOsd {
                up: true,
                store: MemStore::new(),
                pgs: BTreeMap::new(),
                slots: Reserver::new(RECOVERY_MAX_ACTIVE),
                free_at: 0,
                epoch: 0,
                busy_ns: 0,
                record_asks: BTreeMap::new(),
                recording: false,
            })
            .collect(),
        epochs: BTreeMap::new(),
        mappings,
        queue: BTreeMap::new(),
        seq: 0,
        live: 0,
        handled: 0,
        ticks: 0,
        pending: HashMap::new(),
        next_token: 0,
        mon_free_at: 0,
        mon_busy_ns: 0,
        osd_step_max_ns: 0,
        mon_step_max_ns: 0,
        mon_inbox: Vec::new(),
        mon_turn_due: false,
        messages: 0,
        mon_requests: 0,
        setup: true,
        setup_asks: Vec::new(),
        watch: BTreeSet::new(),
        peered_at: 0,
        active_at: 0,
    };
    let states = map.osd_states();
    let epoch = map.epoch;
    sim.epochs.insert(
        epoch,
        EpochRec {
            map: Arc::new(map),
            states,
            changed: Changed::All,
            cost_ns: 0,
        },
    );
    // Every PG created and peered (the setup, not measured).
    for o in 0..osds as i32 {
        sim.push(0, Ev::Map { osd: o, epoch });
        sim.push(TICK_NS + u64::from(o as u32) * 1_000, Ev::Tick { osd: o });
    }
    let (map, states) = {
        let rec = sim
            .epochs
            .values()
            .next_back()
            .ok_or_else(|| err("no map"))?;
        (rec.map.clone(), rec.states.clone())
    };
    sim.watch = map
        .pools
        .iter()
        .flat_map(|(&pool, p)| (0..p.pg_num).map(move |ps| PgId { pool, ps }))
        .collect();
    if sim.watch.len() as u64 != pgs {
        return Err(err(format!(
            "{} PGs in the map, {pgs} expected",
            sim.watch.len()
        )));
    }
    sim.settle().await?;
    // A leader has looked at every PG by now (its health check, each
    // tick once every OSD has reported; `status`): it carries every PG's
    // placement into the failure's epochs. The simulated OSDs send no
    // reports, so the harness asks for the status once.
    sim.mon
        .call(MonRequest::Admin(loligo_monc::protocol::Admin::Status))
        .await
        .map_err(|e| err(format!("monitor: status: {e}")))?;
    let setup_s = t_setup.elapsed().as_secs_f64();

    // The failure: the PGs whose acting set holds the victim.
    sim.setup = false;
    sim.watch = sim
        .watch
        .iter()
        .copied()
        .filter(|&pg| {
            sim.mappings
                .mapping_in(&map, &states, pg)
                .is_some_and(|m| m.acting.contains(&victim))
        })
        .collect();
    let affected = sim.watch.len();
    let start = sim
        .osds
        .iter()
        .map(|o| o.free_at)
        .max()
        .unwrap_or(0)
        .max(sim.mon_free_at)
        .max(sim.queue.keys().next().map_or(0, |k| k.0));
    let first_epoch = sim.epochs.keys().next_back().copied().unwrap_or(0);
    let busy0: Vec<Ns> = sim.osds.iter().map(|o| o.busy_ns).collect();
    let mon_busy0 = sim.mon_busy_ns;
    (sim.osd_step_max_ns, sim.mon_step_max_ns) = (0, 0);
    let (messages0, requests0) = (sim.messages, sim.mon_requests);
    sim.osd(victim)?.up = false;
    sim.peered_at = start;
    sim.active_at = start;
    let t_sim = Instant::now();
    sim.mon_call(MonRequest::OsdMarkMeDown { id: victim }, start)
        .await?;
    sim.settle().await?;
    let busy: Vec<Ns> = sim
        .osds
        .iter()
        .zip(&busy0)
        .map(|(o, b)| o.busy_ns - b)
        .collect();
    let ms = |ns: Ns| ns as f64 / 1e6;
    Ok(PeerRow {
        osds,
        pgs,
        affected,
        peered_ms: ms(sim.peered_at - start),
        active_ms: ms(sim.active_at - start),
        epochs: sim.epochs.keys().next_back().copied().unwrap_or(0) - first_epoch,
        messages: sim.messages - messages0,
        mon_requests: sim.mon_requests - requests0,
        osd_busy_max_ms: ms(busy.iter().copied().max().unwrap_or(0)),
        osd_busy_total_ms: ms(busy.iter().sum()),
        mon_busy_ms: ms(sim.mon_busy_ns - mon_busy0),
        osd_step_max_ms: ms(sim.osd_step_max_ns),
        mon_step_max_ms: ms(sim.mon_step_max_ns),
        setup_s,
        sim_s: t_sim.elapsed().as_secs_f64(),
    })
}
