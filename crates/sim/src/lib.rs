//! A seeded simulation of three PGs on four OSDs: the real `Pg` state
//! machines (primary, replica, peering-query and recovery paths, the same
//! code the daemon runs) over one store per OSD (a `MemStore` with a model
//! of what a crash keeps, or the `BlockStore` on simulated media whose
//! crashes are power losses: `disk`), with the OSD's commit
//! queue and recovery slots (the daemon's own `Reserver`, one or two
//! slots) shared by its PGs; monitors (the `monitor` module: the monitors'
//! own map logic over real CRUSH in random runs, the first model for the
//! seeds found under it) that mark failed OSDs down after a delay and out
//! after a while, take pg_temp, primary_temp and write-set record asks,
//! and mark OSDs out and in as an operator would; a client writing and
//! reading a few objects with compound ops
//! (data, xattr and omap together), and faults: OSD crashes (commits in
//! flight, replica writes included, and backfill chunks applied but not
//! yet synced are kept or lost at random, a prefix of them in queue
//! order; an OSD holding unsynced chunks crashes more often),
//! restarts, partitions between two OSDs (`Run::partitions`: one side
//! marked down while it runs, now and then, and booting again), the
//! monitors' leader failing mid-commit (`Run::elections`: see
//! `election`), power losses under the block store (`Run::stores`), object
//! reads that fail with EIO (a bad sector: client reads,
//! reads for a write, for a push, a pull or a backfill chunk), store
//! commits that fail (an I/O error or a full device: the OSD stops
//! itself), message delays and reordering, recovery messages between OSDs
//! lost (0.3% of logs, pushes, scans, chunks, peering answers and their
//! replies; a lost reply means the receiver acted but the sender's call
//! failed), maps reaching one OSD late (an old primary goes on while a new
//! one peers), and clients on older maps sending to old primaries. Writes
//! come in three shapes with one outcome (full write; truncate + append;
//! partial write + truncate, each with omap removals before the set).
//!
//! Checked: a read never returns less than the newest value acknowledged
//! before the read was sent (no acknowledged write is lost, no stale copy
//! answers), never a value not yet written, never a torn compound write;
//! once every OSD is back, every object reads back at least its newest
//! acknowledged value; and then every PG goes active+clean by itself (log
//! recovery: divergent entries rolled back, missing objects pushed,
//! pg_temp dropped; in half the seeds the PG log is a few entries long,
//! so copies that were away are backfilled, a chunk of one to three
//! objects at a time, while writes go on), every member on record, every
//! member's copy equal (objects, data, xattrs, omap, log, head, no
//! missing record, no backfill cursor), stray copies removed, and no
//! recovery slot held or asked for. A failing
//! seed replays exactly:
//! `LOLIGO_SIM_SEED=N cargo test -p loligo-sim --test pg`.
//!
//! The OSDs perform their PGs' effects through the PG crate's one router
//! (`pg::route`, a `Host` per OSD), as the daemon does. The simulator must
//! never read the clock or the OS's randomness: every choice comes from
//! the seed, so a seed replays exactly. It is a test tool: it checks with
//! `assert!` and panics on the first violation.

use disk::Disk;
pub use disk::Stores;
use election::{Elections, Taken, ELECTION_PER_MILLE, RECORD_RETRY_MS};
use loligo_ec::plan::Coalesce;
use loligo_ec::stripe::{Fetched, Striper};
use loligo_pg::msg::{PeerMsg, PeerReply};
use loligo_pg::pg::{
    backfill::rebuild_tree, merkle, route, stored_info, tree::Kept, Host, Input, ListResult,
    MonAsk, Pg, RepError,
};
use loligo_pg::reserve::Reserver;
use loligo_store::{CollectionId, ObjectStore, Transaction};
use loligo_types::ops::{ClientOp, OpError, OpReply, ReqId, SubOp, SubResult, Version};
use loligo_types::osdmap::{EcPlugin, EcProfile, PoolKind};
use loligo_types::{Change, Epoch, OsdMap, PgId, PgState, Pool, RecordAsk};
use monitor::{members, primary_of, ModelMon, Monitor, RealMon, Seen, Steer};

mod disk;
mod election;
mod monitor;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub(crate) const OSDS: usize = 4;
pub(crate) const PGS: usize = 3;
const OBJECTS: usize = 9;
const POOL: u64 = 1;
const STEP_MS: u64 = 5;
const CLIENT_RESEND_MS: u64 = 3_000;
/// Chance (per mille) that one OSD's copy of a new map comes late, and how
/// late at least (steps).
const MAP_LATE_PER_MILLE: u64 = 60;
const MAP_LATE_STEPS_MIN: u64 = 40;
/// Chance (per mille) per step that a stopped OSD is declared lost (in
/// `lost_osds_let_pgs_go_on`).
const LOSE_PER_MILLE: u64 = 3;
/// Chance (per mille) per step that the operator marks a PG's unfound
/// objects lost while its primary reports some (in the lost runs).
const MARK_UNFOUND_PER_MILLE: u64 = 50;
/// How long the operator waits before marking the same PG again (ms).
const MARK_UNFOUND_AGAIN_MS: u64 = 5_000;
/// Chance (per mille) per step that the operator marks an OSD out or
/// back in (the real monitors' runs only).
const OPERATOR_OUT_PER_MILLE: u64 = 2;
/// Chance (per mille) per step that two OSDs are cut off from each other
/// (`Run::partitions`).
const PARTITION_PER_MILLE: u64 = 3;
/// Chance (per mille) that an op is sent under an older map.
const STALE_CLIENT_PER_MILLE: u64 = 100;
/// Chance (per mille) that a write to an object that exists removes it.
const REMOVE_PER_MILLE: u64 = 150;

use loligo_testkit::Rng;

pub(crate) fn pg_id(p: usize) -> PgId {
    PgId {
        pool: POOL,
        ps: p as u32,
    }
}

fn coll(p: usize) -> CollectionId {
    CollectionId::pg(POOL, p as u32)
}

/// The PG an object lives in.
fn pg_of(obj: usize) -> usize {
    obj % PGS
}

/// Chance (per mille) per step that a device's backfillfull mark flips.
const TOOFULL_PER_MILLE: u64 = 2;

/// Chance (per mille), at each step, that an OSD holding unsynced
/// backfill chunks crashes.
const VOLATILE_CRASH_PER_MILLE: u64 = 100;

/// Chance (per mille) that an input's handling meets a read error.
const EIO_PER_MILLE: u64 = 10;

struct Osd {
    /// Its disk: the store, what is queued for it, what a crash keeps.
    disk: Disk,
    /// Its PGs by PG number while it runs (none while stopped).
    pgs: Vec<Pg>,
    /// Incremented at every start: messages to an older process are lost.
    gen: u64,
    /// Recovery-slot asks its PGs made and have not given back (granted
    /// or not), as (PG, ask): clean PGs hold none.
    asks: BTreeSet<(usize, u64)>,
    /// Its recovery slots, shared by its PGs (the daemon's reserver).
    slots: Reserver,
    /// The maps this process has seen.
    seen: Seen,
}

impl Osd {
    fn running(&self) -> bool {
        !self.pgs.is_empty()
    }
}

/// Messages in flight; each is delivered at a random later step.
#[derive(Debug)]
enum Ev {
    Map {
        osd: usize,
        gen: u64,
        input_epoch: Epoch,
    },
    LocalDone {
        pg: usize,
        osd: usize,
        gen: u64,
        tid: u64,
    },
    /// A message between OSDs on its way to its receiver.
    Peer(Msg),
    /// The receiver's answer (or why there is none), back to the
    /// sender's PG (`to`) as the input its host reports.
    Answer {
        pg: usize,
        to: usize,
        gen: u64,
        from: usize,
        id: u64,
        reply: Result<PeerReply, RepError>,
    },
    Record {
        pg: usize,
        from: usize,
        gen: u64,
        ask: RecordAsk,
    },
    Recorded {
        pg: usize,
        to: usize,
        gen: u64,
        interval: Epoch,
    },
    /// The daemon asks again for a record the monitors could not take
    /// (while they elected a leader), if it is still its newest.
    RecordAgain {
        pg: usize,
        from: usize,
    },
    PgTemp {
        pg: usize,
        from: usize,
        osds: Vec<i32>,
    },
    PrimaryTemp {
        pg: usize,
        from: usize,
        osd: Option<i32>,
    },
    /// The OSD grants its PG's ask for a recovery slot (the daemon's
    /// grants come from another task, so they too arrive late, possibly
    /// after the ask was given up).
    Grant {
        pg: usize,
        osd: usize,
        gen: u64,
        ask: u64,
    },
    MarkDown {
        osd: usize,
        gen: u64,
    },
    /// Its peers' failure reports reach the monitors: they mark it down
    /// whether or not it runs (a partition between OSDs).
    Reported {
        osd: usize,
    },
    Op {
        pg: usize,
        to: usize,
        req: u64,
        op: ClientOp,
    },
    Reply {
        req: u64,
        reply: OpReply,
    },
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Write `value`, or (`remove`) remove the object: a remove takes a
    /// value too, so every acknowledged state is ordered.
    Write {
        obj: usize,
        value: u64,
        remove: bool,
    },
    Read {
        obj: usize,
        floor: u64,
    },
}

struct Pending {
    kind: Kind,
    reqid: ReqId,
    sent_ms: u64,
    /// Token of the latest send (earlier sends' replies still count).
    req: u64,
}

/// A message between OSDs: on its way, or held by the receiver's PG
/// until it answers (sent again if the receiver crashes first, as the
/// daemon's shell sends again a message whose call failed).
#[derive(Clone, Debug)]
struct Msg {
    pg: usize,
    from: usize,
    /// The sender's generation: an answer to an earlier process is lost.
    gen: u64,
    to: usize,
    /// The sender's send id (`Effect::Send { id }`).
    id: u64,
    msg: PeerMsg,
}

impl Msg {
    /// The answer to this message from its receiver.
    fn answer(&self, reply: Result<PeerReply, RepError>) -> Ev {
        Ev::Answer {
            pg: self.pg,
            to: self.from,
            gen: self.gen,
            from: self.to,
            id: self.id,
            reply,
        }
    }
}

/// The simulation: OSDs, the monitor model, the client and the network.
/// Random runs (`run_seed_as`) drive it with faults; scenarios
/// (`Sim::scripted`) drive it step by step.
pub struct Sim {
    rng: Rng,
    now_ms: u64,
    osds: Vec<Osd>,
    mon: Box<dyn Monitor>,
    queue: Vec<(u64, Ev)>,
    /// Client state: per object, the next value to write, the newest
    /// acknowledged value, and whether a write is outstanding.
    next_value: [u64; OBJECTS],
    acked: [u64; OBJECTS],
    writing: [bool; OBJECTS],
    /// Per object, the values that were removes, and whether it exists
    /// after its last acknowledged write.
    removes: Vec<BTreeSet<u64>>,
    exists: [bool; OBJECTS],
    pending: BTreeMap<u64, Pending>,
    /// req token -> pending key.
    reqs: BTreeMap<u64, u64>,
    next_req: u64,
    next_client_tid: u64,
    /// Messages handed to the receiver's PG and not yet answered, by
    /// the token it was given.
    held: BTreeMap<u64, Msg>,
    next_token: u64,
    /// Recovery slots per OSD (one or two).
    slots: usize,
    stats: Stats,
    /// Print every delivery (LOLIGO_SIM_TRACE=1).
    trace: bool,
    /// PG log length (short in half the seeds, so copies that were away
    /// long need a backfill) and objects per backfill chunk.
    log_max: u64,
    chunk_objects: usize,
    /// Faults stopped: every OSD is started and stays up.
    healing: bool,
    /// A scenario drives the run: no random faults, no lost messages,
    /// no late maps, no client on an older map unless it asks.
    scripted: bool,
    /// OSDs cut off from the monitors (and only from them): they hear of
    /// no new map, and their requests to the monitors are lost.
    cut_off: [bool; OSDS],
    /// The map epoch the client sends under (`None`: the newest).
    client_epoch: Option<Epoch>,
    /// Links that lose every message, as (from, to): a partition cuts
    /// both ways, a one-way one only one.
    apart: BTreeSet<(usize, usize)>,
    /// Random partitions (`Run::partitions`, some one-way with
    /// `Run::one_way`), and when each cut link heals.
    partitions: bool,
    one_way: bool,
    heals: BTreeMap<(usize, usize), u64>,
    /// The monitors' leader failing now and then (`Run::elections`).
    elections: Elections,
    /// The pool's striping when it is erasure-coded.
    ec: Option<Arc<Striper>>,
    /// Each acknowledged write's value, by object and version.
    written: BTreeMap<(usize, Version), u64>,
    /// EC shards a primary sent a member (pushes and backfill chunks):
    /// object, version, shard, bytes. Each one whose version was
    /// acknowledged must be exactly its shard of the value written there
    /// (checked at the end: later writes may hide a wrong one from the
    /// final check of the stores).
    shipped: Vec<(usize, Version, usize, Vec<u8>)>,
    /// Down OSDs are declared lost now and then (`lost_osds_let_pgs_go_on`).
    lose: bool,
    /// How long an OSD stays down before the monitors mark it out, and
    /// since when each one is down and in.
    out_after_ms: u64,
    down_since_ms: [Option<u64>; OSDS],
    /// When the operator last marked each PG's unfound objects lost.
    marked_ms: [Option<u64>; PGS],
    /// Per object, values below which an acknowledgement binds nothing:
    /// they were written before the PG's whole recorded write set was
    /// declared lost.
    lost_upto: [u64; OBJECTS],
}

#[derive(Default, Debug)]
pub struct Stats {
    pub acked_writes: u64,
    pub good_reads: u64,
    pub crashes: u64,
    pub clean_checks: u64,
    /// Backfill chunks applied.
    pub chunks: u64,
    /// Objects backfill chunks named as lacked by their primary (the
    /// target records them missing, see `Chunk::lacks`).
    pub chunk_lacks: u64,
    /// Erasure-coded primaries that kept moved members waiting outside
    /// the write set (`Pg::moved_waiting`).
    pub moved_waits: u64,
    /// Transactions committed unsynced (backfill chunks) that a crash
    /// lost.
    pub chunks_lost: u64,
    /// Inputs after which a primary had two chunks on their way.
    pub pipelined: u64,
    /// Most chunks a copy held at once for overtaking the chunk before
    /// them.
    pub overtaken: u64,
    /// Backfill scans a target answered before the chunk they follow
    /// was queued there.
    pub scans_ahead: u64,
    /// Store transactions that failed (their OSD stopped).
    pub store_failures: u64,
    /// Objects a primary that was behind pulled.
    pub pulls: u64,
    /// Object reads that failed with EIO.
    pub read_errors: u64,
    /// Devices marked too full to backfill onto, or no longer.
    pub toofull_flips: u64,
    /// EC shard reads answered.
    pub shard_reads: u64,
    /// EC shards shipped to members checked against their encoding.
    pub shards_checked: u64,
    /// Shard read answers sent ahead of an earlier one from the same OSD
    /// to the same gather.
    pub shard_answers_overtaken: u64,
    /// EC primaries handed over by primary_temp.
    pub primary_temps: u64,
    /// pg_temps asked for (erasure-coded: a stray put back at its shard).
    pub pg_temps: u64,
    /// Erasure-coded pg_temps that took a spare OSD (one neither CRUSH's
    /// set nor the acting set named) so that two members could swap
    /// positions.
    pub spare_temps: u64,
    /// Copies whose Merkle tree was checked against a rebuild.
    pub trees_checked: u64,
    /// Removes acknowledged.
    pub removes: u64,
    /// OSDs declared lost (`LOLIGO_SIM_LOST`), records that left empty,
    /// and objects PGs then rolled back or removed.
    pub lost_osds: u64,
    pub records_emptied: u64,
    /// Write-set records the monitors refused as late: the PG's interval
    /// had ended, its record was short, and they named none of its
    /// members (any of them, with `Sim::strict_late`).
    pub records_late: u64,
    pub given_up: u64,
    /// The most objects a PG's primary held unfound at once.
    pub unfound_most: u64,
    /// `pg mark-unfound-lost`s the operator made.
    pub unfound_marked: u64,
    /// Merkle root comparisons a primary made with a member.
    pub scrubs: u64,
    /// Partitions between two OSDs, and running OSDs that booted again
    /// after a map showed them down.
    pub partitions: u64,
    pub reboots: u64,
    /// Partitions that cut one direction only.
    pub one_way: u64,
    /// Times the monitors' leader failed; OSD asks whose call failed
    /// while they elected another; of those, asks the failed leader had
    /// taken, committed once a new one was in.
    pub elections: u64,
    pub asks_failed: u64,
    pub taken_mid_commit: u64,
}

/// A number from the environment, if set and a number.
pub fn env_u64_opt(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// A number from the environment, or `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    env_u64_opt(name).unwrap_or(default)
}

impl Stats {
    /// Add one seed's counts to a total (`overtaken`: the most in any
    /// one seed).
    pub fn add(&mut self, st: &Stats) {
        self.acked_writes += st.acked_writes;
        self.good_reads += st.good_reads;
        self.crashes += st.crashes;
        self.clean_checks += st.clean_checks;
        self.chunks += st.chunks;
        self.chunk_lacks += st.chunk_lacks;
        self.moved_waits += st.moved_waits;
        self.chunks_lost += st.chunks_lost;
        self.pipelined += st.pipelined;
        self.overtaken = self.overtaken.max(st.overtaken);
        self.scans_ahead += st.scans_ahead;
        self.store_failures += st.store_failures;
        self.pulls += st.pulls;
        self.read_errors += st.read_errors;
        self.toofull_flips += st.toofull_flips;
        self.shard_reads += st.shard_reads;
        self.shards_checked += st.shards_checked;
        self.shard_answers_overtaken += st.shard_answers_overtaken;
        self.primary_temps += st.primary_temps;
        self.pg_temps += st.pg_temps;
        self.spare_temps += st.spare_temps;
        self.trees_checked += st.trees_checked;
        self.removes += st.removes;
        self.scrubs += st.scrubs;
        self.lost_osds += st.lost_osds;
        self.records_emptied += st.records_emptied;
        self.records_late += st.records_late;
        self.given_up += st.given_up;
        self.unfound_most = self.unfound_most.max(st.unfound_most);
        self.unfound_marked += st.unfound_marked;
        self.partitions += st.partitions;
        self.reboots += st.reboots;
        self.one_way += st.one_way;
        self.elections += st.elections;
        self.asks_failed += st.asks_failed;
        self.taken_mid_commit += st.taken_mid_commit;
    }
}

/// Remove and return (in token order) the entries `held` selects.
/// OSD `o`'s PG `p`'s effects, as the simulated OSD performs them.
struct Shell<'a> {
    sim: &'a mut Sim,
    o: usize,
    p: usize,
    gen: u64,
}

impl Host for Shell<'_> {
    fn reply(&mut self, token: u64, reply: OpReply) {
        if self.sim.trace {
            eprintln!(
                "{:>6}ms   osd.{} pg {} answers req {token}: {:?} {:?}",
                self.sim.now_ms, self.o, self.p, reply.result, reply.version
            );
        }
        self.sim.send(Ev::Reply { req: token, reply });
    }

    fn list_reply(&mut self, _token: u64, _result: ListResult) {}

    fn send(&mut self, id: u64, to: i32, msg: PeerMsg) {
        match &msg {
            PeerMsg::Push { push, .. } => self.sim.ship(push),
            PeerMsg::Chunk { chunk, .. } => {
                for push in &chunk.pushes {
                    self.sim.ship(push);
                }
            }
            _ => {}
        }
        let (pg, from, gen) = (self.p, self.o, self.gen);
        let to = to as usize;
        self.sim.send(Ev::Peer(Msg {
            pg,
            from,
            gen,
            to,
            id,
            msg,
        }));
    }

    /// The answer to a message this OSD's PG held: back to its sender
    /// (or, for a peering query not answerable yet, asked again, as the
    /// daemon's shell does).
    fn answer(&mut self, token: u64, reply: PeerReply) {
        let Some(m) = self.sim.held.remove(&token) else {
            return;
        };
        let ev = match (&m.msg, &reply) {
            (PeerMsg::GetInfo { .. }, PeerReply::Refused(_)) => Ev::Peer(m),
            _ => m.answer(Ok(reply)),
        };
        self.sim.send(ev);
    }

    fn apply(&mut self, tid: u64, txn: Transaction, sync: bool) {
        let (o, p, gen) = (self.o, self.p, self.gen);
        self.sim.osds[o].disk.queued.push_back((p, tid, txn, sync));
        self.sim.send(Ev::LocalDone {
            pg: p,
            osd: o,
            gen,
            tid,
        });
    }

    fn monitor(&mut self, ask: MonAsk) {
        let (pg, from, gen) = (self.p, self.o, self.gen);
        if self.sim.cut_off[from] {
            return;
        }
        let ev = match ask {
            MonAsk::PgTemp(osds) => Ev::PgTemp { pg, from, osds },
            MonAsk::PrimaryTemp(osd) => Ev::PrimaryTemp { pg, from, osd },
            MonAsk::Record(ask) => Ev::Record { pg, from, gen, ask },
        };
        self.sim.send(ev);
    }

    /// The OSD's reserver decides; its grants reach the PGs later (the
    /// daemon's come from another task).
    fn reserve(&mut self, ask: u64, priority: u64) {
        let (o, p) = (self.o, self.p);
        self.sim.osds[o].asks.insert((p, ask));
        let granted = self.sim.osds[o].slots.ask((pg_id(p), ask), priority);
        self.sim.grant(o, granted);
    }

    fn release(&mut self, ask: u64) {
        let (o, p) = (self.o, self.p);
        self.sim.osds[o].asks.remove(&(p, ask));
        let granted = self.sim.osds[o].slots.release((pg_id(p), ask));
        self.sim.grant(o, granted);
    }
}

/// Steps a scenario waits at most for the cluster to settle or an op to
/// be answered.
const SCENARIO_STEPS: usize = 4_000;

/// Driving the simulation step by step, for named scenarios: every OSD
/// up, the PGs peered, then what the scenario does.
impl Sim {
    /// A replicated cluster with no random faults, settled.
    pub fn scripted(seed: u64) -> Sim {
        let mut s = Sim::new(&Run::replicated(seed));
        s.scripted = true;
        s.healing = true;
        s.settle();
        s
    }

    /// Run until every PG is clean (at most `SCENARIO_STEPS` steps).
    pub fn settle(&mut self) {
        for _ in 0..SCENARIO_STEPS {
            if (0..PGS).all(|p| self.pg_clean(p)) {
                return;
            }
            self.step();
        }
    }

    /// The newest map epoch.
    pub fn epoch(&self) -> Epoch {
        self.mon.epoch()
    }

    /// The acting set of object `obj`'s PG in the newest map.
    pub fn acting_of(&self, obj: usize) -> Vec<i32> {
        self.mon.newest().acting[pg_of(obj)].clone()
    }

    /// A replica of object `obj`'s PG in the newest map: an acting
    /// member other than the primary.
    pub fn replica_of(&self, obj: usize) -> Option<usize> {
        let primary = self.primary_of(obj)?;
        members(&self.acting_of(obj))
            .map(|o| o as usize)
            .find(|&o| o != primary)
    }

    /// The primary of object `obj`'s PG in the newest map.
    pub fn primary_of(&self, obj: usize) -> Option<usize> {
        self.mon.newest().primary[pg_of(obj)].map(|o| o as usize)
    }

    /// Write the next value of object `obj` and wait for its answer: the
    /// value, once acknowledged (`None`: no answer in time).
    pub fn write(&mut self, obj: usize) -> Option<u64> {
        let value = self.next_value[obj];
        self.next_value[obj] += 1;
        self.writing[obj] = true;
        self.submit(Kind::Write {
            obj,
            value,
            remove: false,
        });
        self.drain(SCENARIO_STEPS);
        (self.acked[obj] == value).then_some(value)
    }

    /// Read object `obj` under map `epoch` (sent to that map's primary),
    /// checked as every read is: never older than what was acknowledged
    /// before it was sent.
    pub fn read_at(&mut self, obj: usize, epoch: Epoch) {
        self.client_epoch = Some(epoch);
        let floor = self.acked[obj];
        self.submit(Kind::Read { obj, floor });
        self.drain(SCENARIO_STEPS);
        self.client_epoch = None;
    }

    /// Cut OSD `o` off from the monitors, and only from them: it hears of
    /// no new map and its requests to them are lost; OSDs and clients
    /// still reach it.
    pub fn cut_from_monitors(&mut self, o: usize) {
        self.cut_off[o] = true;
    }

    /// Wait for every op in flight to be answered: whether they all were.
    pub fn finish(&mut self) -> bool {
        self.drain(SCENARIO_STEPS);
        self.pending.is_empty()
    }

    /// The newest value of object `obj` acknowledged to the client.
    pub fn acked(&self, obj: usize) -> u64 {
        self.acked[obj]
    }

    /// Cut OSDs `a` and `b` off from each other (both ways); each still
    /// reaches the monitors and the clients.
    pub fn partition(&mut self, a: usize, b: usize) {
        self.apart.insert((a, b));
        self.apart.insert((b, a));
    }

    /// Join OSDs `a` and `b` again.
    pub fn join(&mut self, a: usize, b: usize) {
        self.apart.remove(&(a, b));
        self.apart.remove(&(b, a));
    }

    /// The monitors mark OSD `o` down (as its peers' failure reports
    /// would), whether or not it is running.
    pub fn mark_down(&mut self, o: usize) {
        self.propose(vec![Change::OsdDown { id: o as i32 }]);
    }

    /// OSD `o`, running all along, boots again (as an OSD that finds
    /// itself marked down does): the monitors mark it up with a new boot
    /// epoch.
    pub fn mark_up(&mut self, o: usize) {
        self.propose(vec![monitor::boot(o)]);
    }

    /// OSD `o` reaches the monitors again and hears of the newest map
    /// only, every map in between skipped.
    pub fn reconnect(&mut self, o: usize) {
        self.cut_off[o] = false;
        let ev = Ev::Map {
            osd: o,
            gen: self.osds[o].gen,
            input_epoch: self.mon.epoch(),
        };
        self.send(ev);
    }

    /// The checks of every random run's end: every object reads at least
    /// its newest acknowledged value, and every PG goes clean with equal
    /// copies.
    pub fn verify(&mut self) {
        self.heal_and_check();
        self.check_clean();
    }
}

/// The simulation's pool: replicated (size 3, min_size 2), or on an
/// erasure-coded run Reed-Solomon 2+1 on even seeds (three of the four
/// OSDs) and Zigzag 2+2 (element-level rebuilds, all four) on odd ones,
/// min_size 2 (= k: a write set of two shards takes writes, so losing one
/// of them leaves the PG down until it returns, the hardest case); with
/// its profile.
fn sim_pool(seed: u64, ec: bool) -> (Pool, Option<EcProfile>) {
    let mut pool = OsdMap::new("sim", "osd")
        .unwrap()
        .replicated_pool("p", PGS as u32, 3, 2);
    assert_eq!(pool.id, POOL);
    if !ec {
        return (pool, None);
    }
    let (name, plugin, m) = if seed.is_multiple_of(2) {
        ("rs21", EcPlugin::ReedSolomon, 1)
    } else {
        ("zz22", EcPlugin::Zigzag, 2)
    };
    pool.kind = PoolKind::Erasure {
        profile: name.into(),
    };
    pool.size = 2 + m;
    let prof = EcProfile {
        name: name.into(),
        plugin,
        k: 2,
        m,
        s: 1,
        l: 0,
        optimal: false,
        alignment: 64,
        stripe_unit: 0,
    };
    (pool, Some(prof))
}

/// Every PG's collection, as each disk starts.
fn colls() -> Vec<CollectionId> {
    (0..PGS).map(coll).collect()
}

fn take_held<T>(m: &mut BTreeMap<u64, T>, held: impl Fn(&T) -> bool) -> Vec<T> {
    let tokens: Vec<u64> = m.iter().filter(|(_, v)| held(v)).map(|(t, _)| *t).collect();
    tokens.into_iter().filter_map(|t| m.remove(&t)).collect()
}

fn value_of(data: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    if data.len() == 8 {
        b.copy_from_slice(data);
    }
    u64::from_le_bytes(b)
}

impl Sim {
    fn new(run: &Run) -> Sim {
        let (seed, ec) = (run.seed, run.ec);
        let (pool, profile) = sim_pool(seed, ec);
        let striper = profile
            .as_ref()
            .map(|prof| Arc::new(prof.striper().unwrap()));
        let mut rng = Rng::new(seed);
        let log_max = if rng.chance(500) {
            2 + rng.below(20)
        } else {
            100_000
        };
        let chunk_objects = 1 + rng.index(3);
        let slots = 1 + rng.index(2);
        // Zigzag seeds (the set fills all four OSDs): with moving
        // positions (`ec_with_moving_positions_every_pg_heals`, or
        // LOLIGO_SIM_EC_MOVES set), positions move while an OSD is down in
        // half of them (a seed that leaves 3 divided by 4).
        let ec_moves = ec && seed % 4 == 3 && run.moves;
        let mon: Box<dyn Monitor> = match run.monitor {
            Monitors::Real => Box::new(RealMon::new(profile.as_ref())),
            Monitors::Model => Box::new(ModelMon::new(
                pool,
                striper.as_ref().map(|st| st.k()),
                ec_moves,
                run.strict_late,
            )),
        };
        // How long an OSD stays down before the monitors mark it out (the
        // real monitors only): from a quarter of a second, shorter than
        // most downs, to three seconds, longer than most.
        let real = mon.real();
        let out_after_ms = match real {
            true => 250 + rng.below(12) * 250,
            false => u64::MAX,
        };
        let mut osds = Vec::new();
        for _ in 0..OSDS {
            osds.push(Osd {
                disk: Disk::new(run.stores, &colls()),
                pgs: Vec::new(),
                gen: 0,
                asks: BTreeSet::new(),
                slots: Reserver::new(slots),
                seen: Seen::default(),
            });
        }
        let mut s = Sim {
            slots,
            log_max,
            chunk_objects,
            healing: false,
            scripted: false,
            cut_off: [false; OSDS],
            client_epoch: None,
            apart: BTreeSet::new(),
            partitions: run.partitions,
            one_way: run.one_way,
            heals: BTreeMap::new(),
            elections: Elections::new(run.elections && real),
            rng,
            now_ms: 0,
            osds,
            mon,
            out_after_ms,
            down_since_ms: [None; OSDS],
            queue: Vec::new(),
            next_value: [1; OBJECTS],
            acked: [0; OBJECTS],
            writing: [false; OBJECTS],
            removes: vec![BTreeSet::new(); OBJECTS],
            exists: [false; OBJECTS],
            pending: BTreeMap::new(),
            reqs: BTreeMap::new(),
            next_req: 1,
            next_client_tid: 1,
            held: BTreeMap::new(),
            next_token: 1,
            stats: Stats::default(),
            trace: std::env::var("LOLIGO_SIM_TRACE").is_ok(),
            ec: striper,
            written: BTreeMap::new(),
            shipped: Vec::new(),
            lose: run.lose,
            marked_ms: [None; PGS],
            lost_upto: [0; OBJECTS],
        };
        for o in 0..OSDS {
            s.start(o);
        }
        s
    }

    fn send(&mut self, ev: Ev) {
        let ev = if !self.scripted && self.rng.chance(LOSS_PER_MILLE) {
            match lost(ev, self.mon.real()) {
                Some(ev) => ev,
                None => return,
            }
        } else {
            ev
        };
        let delay = 1 + self.rng.index(20) as u64;
        let mut at = self.now_ms + delay * STEP_MS;
        // One gather may read two shards from one OSD; the daemon sends
        // each read on its own, so the answers may come in either order.
        // Here the later answer always overtakes the earlier one.
        if let Ev::Answer {
            pg,
            to,
            from,
            reply: Ok(PeerReply::ShardData(_)),
            ..
        } = &ev
        {
            let now = self.now_ms;
            let mut overtaken = false;
            for (t, e) in self.queue.iter_mut() {
                if let Ev::Answer {
                    pg: p2,
                    to: t2,
                    from: f2,
                    reply: Ok(PeerReply::ShardData(_)),
                    ..
                } = e
                {
                    if (*p2, *t2, *f2) == (*pg, *to, *from) {
                        *t = (*t).max(now + 2 * STEP_MS);
                        overtaken = true;
                    }
                }
            }
            if overtaken {
                at = now + STEP_MS;
                self.stats.shard_answers_overtaken += 1;
            }
        }
        self.queue.push((at, ev));
    }

    /// The monitors commit `changes` as the next epoch, and every OSD
    /// hears of it (nothing when there are none).
    fn propose(&mut self, changes: Vec<Change>) {
        if self.elections.electing() {
            self.elections.defer(changes);
            return;
        }
        if self.mon.commit(changes) {
            self.publish();
        }
    }

    fn publish(&mut self) {
        for o in 0..OSDS {
            if self.osds[o].running() {
                let gen = self.osds[o].gen;
                let input_epoch = self.mon.epoch();
                let ev = Ev::Map {
                    osd: o,
                    gen,
                    input_epoch,
                };
                // Now and then one OSD hears of a map much later than the
                // others (a slow link to the monitors): an old primary then
                // goes on serving while a new one peers.
                if self.cut_off[o] {
                    continue;
                }
                if !self.scripted && self.rng.chance(MAP_LATE_PER_MILLE) {
                    let steps = MAP_LATE_STEPS_MIN + self.rng.below(MAP_LATE_STEPS_MIN * 4);
                    self.queue.push((self.now_ms + steps * STEP_MS, ev));
                } else {
                    self.send(ev);
                }
            }
        }
    }

    fn start(&mut self, o: usize) {
        let ec = self.ec.is_some();
        let osd = &mut self.osds[o];
        osd.gen += 1;
        for p in 0..PGS {
            let info = stored_info(osd.disk.inner(), coll(p))
                .expect("info records read")
                .unwrap_or_default();
            let mut pg = Pg::new(pg_id(p), o as i32, info);
            pg.op_timeout_ms = 2_000;
            pg.log_entries_max = self.log_max;
            pg.backfill_chunk_objects = self.chunk_objects;
            // The smallest trees: a PG's few objects share leaves.
            pg.merkle_leaves = if ec { 0 } else { merkle::LEAVES_MIN };
            // Roots compared often: a false difference fails the run.
            pg.scrub_interval_ms = 1_000;
            osd.pgs.push(pg);
        }
        osd.seen = Seen::default();
        // An OSD the monitors marked out is marked in as it boots (as an
        // operator's `osd in`, or Ceph's auto-out-in, would).
        let mut changes = vec![monitor::boot(o)];
        let out = self.mon.at(self.mon.epoch()).is_some_and(|at| !at.is_in[o]);
        if out {
            changes.push(Change::OsdIn { id: o as i32 });
        }
        self.propose(changes);
    }

    fn crash(&mut self, o: usize) {
        self.stats.crashes += 1;
        let gen = self.osds[o].gen;
        // Commits in flight and unsynced ones: a prefix of them made it
        // to disk.
        let c = self.osds[o].disk.crash(&mut self.rng);
        if self.trace {
            println!(
                "  osd.{o} crashes: {} volatile, {} queued, {} kept, {} lost",
                c.volatile, c.queued, c.kept, c.lost
            );
        }
        self.stats.chunks_lost += c.lost as u64;
        self.take_scrubs(o);
        self.osds[o].pgs.clear();
        self.osds[o].asks.clear();
        self.osds[o].slots = Reserver::new(self.slots);
        // Messages it held unanswered: the senders' calls fail and they
        // send them again.
        for m in take_held(&mut self.held, |m| m.to == o) {
            self.send(Ev::Peer(m));
        }
        // The monitors notice after a grace period.
        self.send(Ev::MarkDown { osd: o, gen });
    }

    /// Feed `input` to OSD `o`'s PG `p`; then, once every transaction of
    /// that OSD is durable, its kept Merkle tree must be the one a rebuild
    /// from its objects computes (not only after healing: after every
    /// input, so a wrong leaf is caught where it is made).
    fn feed(&mut self, o: usize, p: usize, input: Input) {
        let what = self.trace.then(|| format!("{input:?}"));
        self.feed_one(o, p, input);
        let osd = &self.osds[o];
        if !osd.disk.queued.is_empty() {
            return;
        }
        let Some(kept) = osd.pgs.get(p).and_then(|pg| pg.tree()) else {
            return;
        };
        let rebuilt = rebuild_tree(osd.disk.inner(), coll(p), kept, None).unwrap();
        assert!(
            kept == &rebuilt,
            "{}ms osd.{o} pg {p}: the kept tree differs from a rebuild after {:?} (leaves {:?})",
            self.now_ms,
            what,
            kept.diff(&rebuilt)
        );
    }

    /// Hand `input` to OSD `o`'s PG `p` and send what it says.
    fn feed_one(&mut self, o: usize, p: usize, input: Input) {
        let gen = self.osds[o].gen;
        // Now and then one of the object reads this input makes fails.
        let eio = !self.healing && self.rng.chance(EIO_PER_MILLE);
        let osd = &mut self.osds[o];
        let Some(pg) = osd.pgs.get_mut(p) else { return };
        if eio {
            osd.disk.store.fail_read_in(1 + self.rng.below(3));
        }
        let before = self
            .trace
            .then(|| format!("{:?}", pg.stat().map(|s| s.state)));
        let ahead_before = pg.chunk_pipeline().2;
        let waiting_before = pg.moved_waiting();
        let fx = pg.handle(&osd.disk.store, input);
        self.stats.moved_waits += u64::from(waiting_before == 0 && pg.moved_waiting() > 0);
        osd.disk.store.fail_read_in(0);
        let unfound = pg.unfound_count();
        self.stats.unfound_most = self.stats.unfound_most.max(unfound);
        if unfound > 0 {
            // Unfound objects are object copies the PG lacks: counted as
            // degraded (as `ceph -s` does), whichever copy lacks them,
            // once the PG is active or peered (peering counts no copies,
            // and activating only the absent members' until the others
            // answer).
            let serving = PgState::ACTIVE | PgState::PEERED;
            if let Some(st) = pg.stat().filter(|st| st.state.intersects(serving)) {
                assert!(
                    st.degraded >= unfound && st.state.contains(PgState::DEGRADED),
                    "{}ms osd.{o} pg {p}: {unfound} unfound objects, {} degraded copies, state {}",
                    self.now_ms,
                    st.degraded,
                    st.state
                );
            }
        }
        let (flying, held, ahead) = pg.chunk_pipeline();
        self.stats.scans_ahead += ahead - ahead_before;
        self.stats.pipelined += u64::from(flying >= 2);
        self.stats.overtaken = self.stats.overtaken.max(held as u64);
        if let Some(before) = before {
            let after = format!("{:?}", pg.stat().map(|s| s.state));
            if after != before {
                eprintln!("{:>6}ms   osd.{o} pg {p}: {before} -> {after}", self.now_ms);
            }
        }
        let mut shell = Shell {
            sim: self,
            o,
            p,
            gen,
        };
        route(fx, &mut shell);
    }

    /// Tell OSD `o`'s PGs of the slots its reserver granted them.
    fn grant(&mut self, o: usize, granted: Vec<(PgId, u64)>) {
        let gen = self.osds[o].gen;
        for (pg, ask) in granted {
            self.send(Ev::Grant {
                pg: pg.ps as usize,
                osd: o,
                gen,
                ask,
            });
        }
    }

    /// Whether a partition keeps OSDs `a` and `b` apart.
    /// Whether messages from OSD `a` to OSD `b` are lost.
    fn apart(&self, a: usize, b: usize) -> bool {
        !self.apart.is_empty() && self.apart.contains(&(a, b))
    }

    fn alive(&self, o: usize, gen: u64) -> bool {
        self.osds[o].running() && self.osds[o].gen == gen
    }

    fn deliver(&mut self, ev: Ev) {
        if self.trace {
            let mut line = format!("{:>6}ms {ev:?}", self.now_ms);
            line.truncate(1000);
            eprintln!("{line}");
        }
        match ev {
            Ev::Map {
                osd,
                gen,
                input_epoch,
            } => self.deliver_map(osd, gen, input_epoch),
            Ev::LocalDone { pg, osd, gen, tid } => self.deliver_local_done(pg, osd, gen, tid),
            Ev::Peer(m) => self.deliver_peer(m),
            Ev::Answer {
                pg,
                to,
                gen,
                from,
                id,
                reply,
            } => {
                // An answer a partition cut off: the sender's call fails.
                let reply = match self.apart(from, to) {
                    true => Err(RepError::Failed("partitioned".into())),
                    false => reply,
                };
                if self.alive(to, gen) {
                    self.stats.pulls += u64::from(matches!(reply, Ok(PeerReply::Pulled(_))));
                    self.stats.shard_reads +=
                        u64::from(matches!(reply, Ok(PeerReply::ShardData(_))));
                    self.feed(to, pg, Input::Reply { id, reply });
                }
            }
            Ev::Record { pg, from, gen, ask } => {
                self.elections.asked(from, pg);
                if self.elections.electing() {
                    self.record_call_failed(pg, from, gen, ask);
                    return;
                }
                let judged = self.mon.judge(from, pg, &ask);
                self.stats.records_late += u64::from(judged.late);
                self.propose(judged.changes);
                if judged.held {
                    self.send(Ev::Recorded {
                        pg,
                        to: from,
                        gen,
                        interval: ask.record.interval,
                    });
                }
            }
            Ev::RecordAgain { pg, from } => {
                if let Some((gen, ask)) = self.elections.retry(from, pg) {
                    if self.alive(from, gen) {
                        self.deliver(Ev::Record { pg, from, gen, ask });
                    }
                }
            }
            Ev::Recorded {
                pg,
                to,
                gen,
                interval,
            } => {
                if self.alive(to, gen) {
                    self.feed(to, pg, Input::WriteSetRecorded { interval });
                }
            }
            Ev::Grant { pg, osd, gen, ask } => {
                if self.alive(osd, gen) {
                    self.feed(osd, pg, Input::Reserved { ask });
                }
            }
            Ev::PrimaryTemp { pg, from, osd } if self.elections.electing() => {
                self.temp_call_failed(Taken::PrimaryTemp { pg, from, osd });
            }
            Ev::PgTemp { pg, from, osds } if self.elections.electing() => {
                self.temp_call_failed(Taken::PgTemp { pg, from, osds });
            }
            Ev::PrimaryTemp { pg, from, osd } => {
                let changes = self.mon.steer(from, pg, Steer::PrimaryTemp(osd));
                self.stats.primary_temps += u64::from(!changes.is_empty() && osd.is_some());
                self.propose(changes);
            }
            Ev::PgTemp { pg, from, osds } => {
                let set = !osds.is_empty();
                let at = self.mon.newest();
                let spare = members(&osds)
                    .any(|o| !at.crush[pg].contains(&o) && !at.acting[pg].contains(&o));
                let changes = self.mon.steer(from, pg, Steer::PgTemp(osds));
                self.stats.pg_temps += u64::from(!changes.is_empty() && set);
                let ec = self.ec.is_some();
                self.stats.spare_temps += u64::from(!changes.is_empty() && spare && ec);
                self.propose(changes);
            }
            Ev::Reported { osd } => {
                if self.mon.newest().up[osd] && !self.healing {
                    self.propose(vec![Change::OsdDown { id: osd as i32 }]);
                }
            }
            Ev::MarkDown { osd, gen } => {
                // Only if that process is still the one that is gone.
                let up = self.mon.newest().up[osd];
                if self.osds[osd].gen == gen && !self.osds[osd].running() && up {
                    self.propose(vec![Change::OsdDown { id: osd as i32 }]);
                }
            }
            Ev::Op { pg, to, req, op } => {
                if self.osds[to].running() {
                    let now_ms = self.now_ms;
                    self.feed(
                        to,
                        pg,
                        Input::Op {
                            op,
                            token: req,
                            now_ms,
                        },
                    );
                }
            }
            Ev::Reply { req, reply } => self.on_reply(req, reply),
        }
    }

    /// A map reaches OSD `osd`: its PGs take it, and a running OSD the
    /// map shows down boots again.
    fn deliver_map(&mut self, osd: usize, gen: u64, input_epoch: Epoch) {
        if !self.alive(osd, gen) {
            return;
        }
        let mut seen = self.osds[osd].seen;
        let now_ms = self.now_ms;
        let inputs = self.mon.inputs(input_epoch, &mut seen, &self.ec, now_ms);
        self.osds[osd].seen = seen;
        let fed = inputs.is_some();
        for (p, input) in inputs.into_iter().flatten().enumerate() {
            self.feed(osd, p, input);
        }
        if fed {
            self.reboot_if_marked_down(osd);
        }
    }

    /// OSD `osd`'s store made PG `pg`'s transaction `tid` durable (with
    /// everything queued before it), or now and then failed it.
    fn deliver_local_done(&mut self, pg: usize, osd: usize, gen: u64, tid: u64) {
        if !self.alive(osd, gen) {
            return;
        }
        let running = (0..OSDS).filter(|&o| self.osds[o].running()).count();
        if !self.healing && running > 1 && self.rng.chance(1) {
            // The store fails this transaction (an I/O error, a
            // full device): the OSD stops itself, as the daemon
            // does, with exactly what was committed before it.
            self.osds[osd].disk.fail_at(pg, tid);
            self.stats.store_failures += 1;
            self.crash(osd);
            return;
        }
        // Durable with everything queued before it.
        self.osds[osd].disk.commit_through(pg, tid);
        self.feed(
            osd,
            pg,
            Input::LocalDone {
                tid,
                result: Ok(()),
            },
        );
    }

    /// A message reaches OSD `m.to`: its PG answers, as in the daemon;
    /// an unreachable OSD fails the sender's call, but a peering query
    /// is asked again while the map shows the OSD up (as the daemon's
    /// shell does), and a query to a down one is given up.
    fn deliver_peer(&mut self, m: Msg) {
        if let PeerMsg::Chunk { chunk, .. } = &m.msg {
            self.stats.chunks += 1;
            self.stats.chunk_lacks += chunk.lacks.len() as u64;
        }
        let query = matches!(m.msg, PeerMsg::GetInfo { .. });
        if query && !self.alive(m.from, m.gen) {
            return;
        }
        if !self.osds[m.to].running() || self.apart(m.from, m.to) {
            if query && self.mon.newest().up[m.to] {
                return self.send(Ev::Peer(m));
            }
            let ev = m.answer(Err(RepError::Failed("unreachable".into())));
            return self.send(ev);
        }
        let token = self.next_token;
        self.next_token += 1;
        let (to, pg, msg) = (m.to, m.pg, m.msg.clone());
        self.held.insert(token, m);
        let now_ms = self.now_ms;
        self.feed(to, pg, Input::Peer { msg, token, now_ms });
    }

    /// Keep an EC shard a primary sends (see `shipped`).
    fn ship(&mut self, push: &loligo_pg::pg::Push) {
        let (Some(_), Some(copy)) = (&self.ec, &push.copy) else {
            return;
        };
        let Some(obj) = push.name.strip_prefix('o').and_then(|n| n.parse().ok()) else {
            return;
        };
        let shard = copy
            .attrs
            .iter()
            .find(|(k, _)| k == loligo_pg::ec::SHARD_ATTR)
            .and_then(|(_, v)| v.first().copied());
        if let Some(shard) = shard {
            self.shipped
                .push((obj, push.version, shard as usize, copy.data.to_vec()));
        }
    }

    /// Every shard shipped at an acknowledged version is that version's.
    fn check_shipped(&mut self) {
        let Some(st) = self.ec.clone() else {
            return;
        };
        for (obj, version, shard, data) in &self.shipped {
            let Some(value) = self.written.get(&(*obj, *version)) else {
                continue;
            };
            let want = st.encode(&value.to_le_bytes()).unwrap();
            assert!(
                want.get(*shard) == Some(data),
                "o{obj} at {version}: a primary shipped {data:?} as shard {shard}, which is {:?} (value {value})",
                want.get(*shard)
            );
            self.stats.shards_checked += 1;
        }
    }

    fn on_reply(&mut self, req: u64, reply: OpReply) {
        let Some(&key) = self.reqs.get(&req) else {
            return;
        };
        let Some(p) = self.pending.get(&key) else {
            return;
        };
        let kind = p.kind;
        match (&reply.result, kind) {
            // A remove applied before whose answer was lost and whose
            // request id is no longer in the log runs again: absent is
            // what it wanted.
            (Ok(_), Kind::Write { obj, value, remove })
            | (
                Err(OpError::NotFound),
                Kind::Write {
                    obj,
                    value,
                    remove: remove @ true,
                },
            ) => {
                self.pending.remove(&key);
                self.writing[obj] = false;
                if !remove && reply.result.is_ok() {
                    self.written.insert((obj, reply.version), value);
                }
                if value >= self.lost_upto[obj] {
                    self.acked[obj] = self.acked[obj].max(value);
                }
                self.exists[obj] = !remove;
                self.stats.acked_writes += 1;
                self.stats.removes += u64::from(remove);
            }
            (Ok(r), Kind::Read { obj, floor }) => {
                self.pending.remove(&key);
                let (data, xattr, omap) = match &r[..] {
                    [SubResult::Data(d), SubResult::Data(x), SubResult::Omap(o)] => (
                        value_of(d),
                        value_of(x),
                        o.first().map_or(0, |(_, v)| value_of(v)),
                    ),
                    // EC: no omap.
                    [SubResult::Data(d), SubResult::Data(x)] if self.ec.is_some() => {
                        (value_of(d), value_of(x), value_of(x))
                    }
                    other => panic!("object {obj}: unexpected read result {other:?}"),
                };
                assert!(
                    data == xattr && xattr == omap,
                    "object {obj}: torn compound write: data {data}, xattr {xattr}, omap {omap}"
                );
                self.check_read(obj, floor, data);
            }
            (Err(OpError::NotFound), Kind::Read { obj, floor }) => {
                self.pending.remove(&key);
                // Absent: never written as far as the reader knows, or
                // removed by a write at or after the newest it knew of.
                assert!(
                    floor == 0 || self.removes[obj].range(floor..).next().is_some(),
                    "object {obj}: not found, but {floor} was acknowledged before the read was sent"
                );
                self.stats.good_reads += 1;
            }
            (Err(e), _) => {
                let retryable = matches!(
                    e,
                    OpError::WrongPrimary { .. }
                        | OpError::Behind { .. }
                        | OpError::Unavailable { .. }
                        | OpError::Down { .. }
                        | OpError::Io(_)
                );
                assert!(retryable, "unexpected error {e:?} for {kind:?}");
                // Resend soon (same request id).
                if let Some(p) = self.pending.get_mut(&key) {
                    p.sent_ms = self.now_ms.saturating_sub(CLIENT_RESEND_MS) + 50;
                }
            }
        }
    }

    fn check_read(&mut self, obj: usize, floor: u64, got: u64) {
        assert!(
            !self.removes[obj].contains(&got),
            "object {obj}: read {got}, which was a remove"
        );
        assert!(
            got >= floor,
            "object {obj}: read {got}, but {floor} was acknowledged before the read was sent"
        );
        assert!(
            got < self.next_value[obj],
            "object {obj}: read {got}, never written"
        );
        self.stats.good_reads += 1;
    }

    fn send_op(&mut self, key: u64) {
        // Now and then the client is on an older map: it sends to that
        // map's primary, with that epoch.
        let mut epoch = self.mon.epoch();
        if let Some(e) = self.client_epoch {
            epoch = e;
        } else if !self.scripted && self.rng.chance(STALE_CLIENT_PER_MILLE) {
            epoch = epoch.saturating_sub(1 + self.rng.below(3)).max(1);
        }
        let pg = pg_of(match self.pending[&key].kind {
            Kind::Write { obj, .. } | Kind::Read { obj, .. } => obj,
        });
        let primary = match self.mon.at(epoch) {
            Some(at) => at.primary[pg],
            None => self.mon.newest().primary[pg],
        };
        let Some(primary) = primary else {
            return;
        };
        let p = &self.pending[&key];
        // A write is one compound op: the value as the data, as an xattr
        // and as an omap entry; a read gets all three back, and they must
        // agree (an op is applied whole or not at all, on every copy).
        let (obj, ops) = match p.kind {
            Kind::Write {
                obj, remove: true, ..
            } => (obj, vec![SubOp::Remove]),
            Kind::Write { obj, value, .. } => {
                let v = value.to_le_bytes().to_vec();
                let xattr = SubOp::SetXattr {
                    name: "v".into(),
                    value: v.clone(),
                };
                let omap = SubOp::OmapSet(vec![(b"v".to_vec().into(), v.clone().into())]);
                // Three shapes with one outcome (the value as data, xattr
                // and omap entry): a full write; truncate + append with the
                // omap cleared first; a partial write cut to size with the
                // key removed first. The last two need the object to exist.
                let shape = if self.exists[obj] {
                    self.rng.index(3)
                } else {
                    0
                };
                let ec = self.ec.is_some();
                let ops = match shape {
                    // No omap on EC pools: data and xattr only.
                    0 if ec => vec![SubOp::WriteFull(v.into()), xattr],
                    1 if ec => vec![SubOp::Truncate(0), SubOp::Append(v.into()), xattr],
                    _ if ec => vec![
                        SubOp::Write {
                            offset: 0,
                            data: v.into(),
                        },
                        SubOp::Truncate(8),
                        xattr,
                    ],
                    0 => vec![SubOp::WriteFull(v.into()), xattr, omap],
                    1 => vec![
                        SubOp::Truncate(0),
                        SubOp::Append(v.into()),
                        xattr,
                        SubOp::OmapClear,
                        omap,
                    ],
                    _ => vec![
                        SubOp::Write {
                            offset: 0,
                            data: v.into(),
                        },
                        SubOp::Truncate(8),
                        xattr,
                        SubOp::OmapRm(vec![b"v".to_vec().into()]),
                        omap,
                    ],
                };
                (obj, ops)
            }
            Kind::Read { obj, .. } => {
                let mut ops = vec![
                    SubOp::Read { offset: 0, len: 0 },
                    SubOp::GetXattr("v".into()),
                ];
                if self.ec.is_none() {
                    ops.push(SubOp::OmapGetKeys(vec![b"v".to_vec().into()]));
                }
                (obj, ops)
            }
        };
        let op = ClientOp {
            pool: POOL,
            name: format!("o{obj}"),
            epoch,
            ops,
            reqid: Some(p.reqid),
        };
        let req = self.next_req;
        self.next_req += 1;
        self.reqs.insert(req, key);
        if let Some(p) = self.pending.get_mut(&key) {
            p.req = req;
            p.sent_ms = self.now_ms;
        }
        self.send(Ev::Op {
            pg,
            to: primary as usize,
            req,
            op,
        });
    }

    fn client_step(&mut self) {
        // New ops: a write to an idle object, or a read.
        if self.pending.len() < 6 && self.rng.chance(300) {
            let obj = self.rng.index(OBJECTS);
            let kind = if !self.writing[obj] && self.rng.chance(600) {
                let value = self.next_value[obj];
                self.next_value[obj] += 1;
                self.writing[obj] = true;
                let remove = self.exists[obj] && self.rng.chance(REMOVE_PER_MILLE);
                if remove {
                    self.removes[obj].insert(value);
                }
                Kind::Write { obj, value, remove }
            } else {
                Kind::Read {
                    obj,
                    floor: self.acked[obj],
                }
            };
            self.submit(kind);
        }
        self.resend_late();
    }

    /// A new client op with its own request id, sent now.
    fn submit(&mut self, kind: Kind) {
        let key = self.next_client_tid;
        self.next_client_tid += 1;
        self.pending.insert(
            key,
            Pending {
                kind,
                reqid: ReqId {
                    client: 1,
                    tid: key,
                },
                sent_ms: 0,
                req: 0,
            },
        );
        self.send_op(key);
    }

    fn faults(&mut self) {
        let running: Vec<usize> = (0..OSDS).filter(|&o| self.osds[o].running()).collect();
        if running.len() > 1 && self.rng.chance(4) {
            let o = running[self.rng.index(running.len())];
            self.crash(o);
        }
        // An OSD holding backfill chunks applied but not yet durable
        // crashes more often (the window lasts until its next synced
        // commit, which another PG's write soon brings).
        let holding = running.iter().find(|&&o| self.osds[o].disk.volatile() > 0);
        if let Some(&o) = holding.filter(|_| running.len() > 1) {
            if self.rng.chance(VOLATILE_CRASH_PER_MILLE) {
                self.crash(o);
            }
        }
        // Now and then a device fills past the backfill threshold, or
        // has room again (the monitors' map says so).
        if self.rng.chance(TOOFULL_PER_MILLE) {
            let o = self.rng.index(OSDS);
            let toofull = !self.mon.newest().toofull[o];
            self.stats.toofull_flips += 1;
            self.propose(vec![monitor::fullness(o, toofull)]);
        }
        self.partition_faults();
        self.election_faults();
        let electing = self.elections.electing();
        if self.lose && !electing && self.rng.chance(MARK_UNFOUND_PER_MILLE) {
            self.mark_unfound_lost();
        }
        let stopped: Vec<usize> = (0..OSDS).filter(|&o| !self.osds[o].running()).collect();
        if self.lose && !electing && !stopped.is_empty() && self.rng.chance(LOSE_PER_MILLE) {
            let o = stopped[self.rng.index(stopped.len())];
            // Only a down OSD can be declared lost.
            if !self.mon.newest().up[o] {
                self.declare_lost(o);
            }
        }
        if !stopped.is_empty() && self.rng.chance(6) {
            let o = stopped[self.rng.index(stopped.len())];
            // Start again only once the monitors marked it down (as a
            // real OSD's boot would).
            if !self.mon.newest().up[o] {
                self.start(o);
            }
        }
        self.auto_out();
    }

    /// A running OSD that a map shows down boots again, as the daemon does
    /// (the random runs on the real monitors; scenarios say when).
    fn reboot_if_marked_down(&mut self, o: usize) {
        if !self.mon.real() || self.scripted || self.cut_off[o] || self.mon.newest().up[o] {
            return;
        }
        let mut changes = vec![monitor::boot(o)];
        if !self.mon.newest().is_in[o] {
            changes.push(Change::OsdIn { id: o as i32 });
        }
        self.stats.reboots += 1;
        self.propose(changes);
    }

    /// Now and then two OSDs cannot reach each other for a while (both
    /// still reach the monitors and the clients), with `Run::one_way` in
    /// half of them in one direction only (a question gets through, its
    /// answer does not); in half of them their failure reports lead the
    /// monitors to mark one side down, which boots again when it hears
    /// (`Run::partitions`).
    fn partition_faults(&mut self) {
        if !self.partitions || self.healing || !self.mon.real() {
            return;
        }
        let now = self.now_ms;
        let healed: Vec<(usize, usize)> = (self.heals.iter())
            .filter(|(_, &at)| at <= now)
            .map(|(link, _)| *link)
            .collect();
        for link in healed {
            self.heals.remove(&link);
            self.apart.remove(&link);
        }
        if !self.rng.chance(PARTITION_PER_MILLE) {
            return;
        }
        let a = self.rng.index(OSDS);
        let b = (a + 1 + self.rng.index(OSDS - 1)) % OSDS;
        if self.apart.contains(&(a, b)) || self.apart.contains(&(b, a)) {
            return;
        }
        self.stats.partitions += 1;
        let lasts = 500 + self.rng.below(10) * 500;
        let one_way = self.one_way && self.rng.chance(500);
        self.stats.one_way += u64::from(one_way);
        let links = if one_way {
            vec![(a, b)]
        } else {
            vec![(a, b), (b, a)]
        };
        for link in links {
            self.apart.insert(link);
            self.heals.insert(link, now + lasts);
        }
        if self.rng.chance(500) {
            let osd = if self.rng.chance(500) { a } else { b };
            let at = now + (5 + self.rng.below(40)) * STEP_MS;
            self.queue.push((at, Ev::Reported { osd }));
        }
    }

    /// Now and then the monitors' leader fails, and a new one is in
    /// after 0.2 to 3 s (`Run::elections`; see `election`).
    fn election_faults(&mut self) {
        if !self.elections.on() || self.healing {
            return;
        }
        if self.elections.due(self.now_ms) {
            self.end_election();
        } else if !self.elections.electing() && self.rng.chance(ELECTION_PER_MILLE) {
            let lasts = 200 + self.rng.below(15) * 200;
            if self.trace {
                println!("  the monitors' leader fails for {lasts}ms");
            }
            self.stats.elections += 1;
            self.elections.start(self.now_ms + lasts);
        }
    }

    /// A new leader is in: it commits what the failed one had taken, then
    /// what was asked for meanwhile.
    fn end_election(&mut self) {
        let ended = self.elections.end();
        self.stats.taken_mid_commit += ended.taken.len() as u64;
        for t in ended.taken {
            let changes = match t {
                Taken::Record { pg, from, ask } => {
                    let judged = self.mon.judge(from, pg, &ask);
                    self.stats.records_late += u64::from(judged.late);
                    judged.changes
                }
                Taken::PgTemp { pg, from, osds } => self.mon.steer(from, pg, Steer::PgTemp(osds)),
                Taken::PrimaryTemp { pg, from, osd } => {
                    self.mon.steer(from, pg, Steer::PrimaryTemp(osd))
                }
            };
            self.propose(changes);
        }
        for changes in ended.deferred {
            self.propose(changes);
        }
    }

    /// A record ask reached the monitors while they elected a leader: the
    /// call fails (the failing leader may have taken it), and the daemon
    /// asks again later.
    fn record_call_failed(&mut self, pg: usize, from: usize, gen: u64, ask: RecordAsk) {
        self.stats.asks_failed += 1;
        if self.rng.chance(500) {
            let ask = ask.clone();
            self.elections.take(Taken::Record { pg, from, ask });
        }
        self.elections.failed(from, pg, gen, ask);
        let at = self.now_ms + RECORD_RETRY_MS;
        self.queue.push((at, Ev::RecordAgain { pg, from }));
    }

    /// A pg_temp or primary_temp ask reached the monitors while they
    /// elected a leader: the call fails, the failing leader may have taken
    /// it, and the PG asks again on its own if it still needs it.
    fn temp_call_failed(&mut self, ask: Taken) {
        self.stats.asks_failed += 1;
        if self.rng.chance(500) {
            self.elections.take(ask);
        }
    }

    /// The monitors mark an OSD out once it has been down for
    /// `out_after_ms` (their `mon_osd_down_out_interval`): CRUSH then
    /// places its PGs elsewhere, and it is backfilled when it returns.
    fn auto_out(&mut self) {
        if !self.mon.real() {
            return;
        }
        // Now and then the operator marks an OSD out (to drain it) or
        // back in: CRUSH moves PGs onto OSDs without their data, which
        // are backfilled while writes go on. One OSD out at most, so a
        // size-3 set stays whole.
        if !self.healing && self.rng.chance(OPERATOR_OUT_PER_MILLE) {
            let o = self.rng.index(OSDS);
            let at = self.mon.newest();
            let outs = (0..OSDS).filter(|&i| !at.is_in[i]).count();
            if !at.is_in[o] && at.up[o] {
                self.propose(vec![Change::OsdIn { id: o as i32 }]);
            } else if at.is_in[o] && outs == 0 {
                self.propose(vec![Change::OsdOut { id: o as i32 }]);
            }
        }
        for o in 0..OSDS {
            let at = self.mon.newest();
            if at.up[o] || !at.is_in[o] {
                self.down_since_ms[o] = None;
                continue;
            }
            let since = *self.down_since_ms[o].get_or_insert(self.now_ms);
            if self.now_ms >= since.saturating_add(self.out_after_ms) {
                self.propose(vec![Change::OsdOut { id: o as i32 }]);
            }
        }
    }

    /// `osd lost O`: its disk is gone (it starts again empty, as a
    /// replaced one), and the monitors take it out of every write-set
    /// record (`Change::OsdLost`). A PG whose record leaves empty goes on
    /// with what the up copies hold: what was acknowledged before in it
    /// may be gone (reads in flight and later ones expect nothing of it),
    /// but never a value not written, a torn one or a removed one, and
    /// what is acknowledged from then on must survive as before.
    fn declare_lost(&mut self, o: usize) {
        if self.trace {
            println!("  osd.{o} declared lost");
        }
        self.stats.lost_osds += 1;
        self.osds[o].disk = self.osds[o].disk.replaced(&colls());
        let before = self.mon.newest().record.clone();
        self.propose(vec![Change::OsdLost { id: o as i32 }]);
        // A record left with fewer members than can read anything back
        // (one copy, or k shards): what was acknowledged before may be
        // gone.
        let floor = self.ec.as_ref().map_or(1, |st| st.k());
        for (p, r) in before.iter().enumerate() {
            let Some(r) = r else { continue };
            let after = self.mon.newest().record[p].as_ref();
            let left = after.map_or(0, |r| members(&r.osds).count());
            if left >= floor || members(&r.osds).count() < floor {
                continue;
            }
            self.stats.records_emptied += 1;
            self.may_have_lost(p);
        }
    }

    /// PG `p`'s acknowledged writes so far may be gone: reads in flight
    /// and later ones expect nothing of them (never a value not written,
    /// a torn one or a removed one).
    fn may_have_lost(&mut self, p: usize) {
        for obj in (0..OBJECTS).filter(|&obj| pg_of(obj) == p) {
            self.lost_upto[obj] = self.next_value[obj];
            self.acked[obj] = 0;
        }
        for pending in self.pending.values_mut() {
            if let Kind::Read { obj, floor } = &mut pending.kind {
                if pg_of(*obj) == p {
                    *floor = 0;
                }
            }
        }
    }

    /// `pg mark-unfound-lost P delete` for a PG whose primary reports
    /// unfound objects (as an operator who gave up waiting would): the
    /// primary removes what it cannot find, so what was acknowledged in
    /// the PG may be gone.
    fn mark_unfound_lost(&mut self) {
        // An operator gives the last mark time to act (each mark is a
        // new map, which restarts what recovery has in flight).
        let now = self.now_ms;
        let unfound: Vec<usize> = (0..PGS)
            .filter(|&p| self.marked_ms[p].is_none_or(|t| now >= t + MARK_UNFOUND_AGAIN_MS))
            .filter(|&p| {
                let primary = self.mon.newest().primary[p];
                primary
                    .and_then(|o| self.osds[o as usize].pgs.get(p))
                    .is_some_and(|pg| pg.stat().is_some_and(|s| s.unfound > 0))
            })
            .collect();
        if unfound.is_empty() {
            return;
        }
        let p = unfound[self.rng.index(unfound.len())];
        if self.trace {
            println!("  pg {p}'s unfound objects marked lost");
        }
        self.stats.unfound_marked += 1;
        self.marked_ms[p] = Some(now);
        self.may_have_lost(p);
        self.propose(vec![Change::PgMarkUnfoundLost { pg: pg_id(p) }]);
    }

    /// Deliver every message due now, in random order.
    fn step(&mut self) {
        self.now_ms += STEP_MS;
        loop {
            let due: Vec<usize> = self
                .queue
                .iter()
                .enumerate()
                .filter(|(_, (at, _))| *at <= self.now_ms)
                .map(|(i, _)| i)
                .collect();
            if due.is_empty() {
                break;
            }
            let i = due[self.rng.index(due.len())];
            let (_, ev) = self.queue.swap_remove(i);
            self.deliver(ev);
        }
        if self.now_ms.is_multiple_of(250) {
            let now_ms = self.now_ms;
            for o in 0..OSDS {
                for p in 0..PGS {
                    self.feed(o, p, Input::Tick { now_ms });
                }
            }
        }
    }

    fn run(&mut self, steps: usize) {
        for _ in 0..steps {
            self.faults();
            self.client_step();
            self.step();
        }
    }

    /// Every OSD back, nothing new: every object reads at least its
    /// newest acknowledged value.
    fn heal_and_check(&mut self) {
        self.healing = true;
        if self.elections.electing() {
            self.end_election();
        }
        if self.partitions {
            self.apart.clear();
            self.heals.clear();
        }
        let toofull = self.mon.newest().toofull;
        let room = (0..OSDS).filter(|&o| toofull[o]);
        let room = room.map(|o| monitor::fullness(o, false)).collect();
        self.propose(room);
        // Every OSD in again (one the operator marked out, or one that
        // is up and was out).
        let at = self.mon.newest();
        let back = (0..OSDS).filter(|&o| at.up[o] && !at.is_in[o]);
        let back = back.map(|o| Change::OsdIn { id: o as i32 }).collect();
        self.propose(back);
        for o in 0..OSDS {
            if !self.osds[o].running() {
                // Let the monitors mark it down first.
                for _ in 0..100 {
                    if !self.mon.newest().up[o] {
                        break;
                    }
                    self.step();
                }
                self.start(o);
            }
        }
        // Finish outstanding ops, then read everything.
        self.drain(4_000);
        for obj in 0..OBJECTS {
            let floor = self.acked[obj];
            self.submit(Kind::Read { obj, floor });
        }
        self.drain(4_000);
        // LOLIGO_SIM_HEAL_MARK=1 (never in the default run): a PG still
        // waiting for unfound objects is marked lost, as an operator
        // would, and the ops waiting on it must then be answered (tells a
        // PG stuck for good from one an operator can release).
        if std::env::var_os("LOLIGO_SIM_HEAL_MARK").is_some() {
            let waiting = |sim: &Sim| {
                sim.pending
                    .values()
                    .any(|p| matches!(p.kind, Kind::Read { .. }))
            };
            for _ in 0..PGS {
                if !waiting(self) {
                    break;
                }
                self.marked_ms = [None; PGS];
                self.mark_unfound_lost();
                self.drain(4_000);
            }
        }
        let left: Vec<Kind> = self.pending.values().map(|p| p.kind).collect();
        assert!(
            left.iter().all(|k| matches!(k, Kind::Write { .. })),
            "reads still unanswered with every OSD up: {left:?} (acting sets {:?}, CRUSH's {:?}, \
             records {:?}, up {:?}, in {:?}, each primary's PGs as (pg, state, unfound): {:?})",
            self.mon.newest().acting,
            self.mon.newest().crush,
            self.mon.newest().record,
            self.mon.newest().up,
            self.mon.newest().is_in,
            (self.osds.iter())
                .map(|o| (o.pgs.iter().enumerate())
                    .filter_map(|(p, pg)| Some((p, pg.stat()?)))
                    .map(|(p, s)| (p, s.state.to_string(), s.unfound))
                    .collect::<Vec<_>>())
                .collect::<Vec<_>>()
        );
    }

    /// After healing, with no client ops: every PG goes active+clean with
    /// CRUSH's set in charge within a bound, and every member then holds
    /// the same objects (data, xattrs, omap), the same log, the same head,
    /// and no missing record.
    fn check_clean(&mut self) {
        let mut clean = false;
        for _ in 0..CLEAN_STEPS {
            if (0..PGS).all(|p| self.is_clean(p)) {
                clean = true;
                break;
            }
            self.step();
        }
        for p in 0..PGS {
            let at = self.mon.newest().clone();
            let acting = at.acting[p].clone();
            let primary = at.primary_temp[p]
                .or_else(|| primary_of(&acting))
                .unwrap_or(0);
            let state = self.osds[primary as usize]
                .pgs
                .get(p)
                .and_then(|pg| pg.stat())
                .map(|st| st.state.to_string());
            // The first PG that is not clean names itself.
            assert!(
                clean || self.pg_clean(p),
                "not clean {CLEAN_STEPS} steps after healing: pg {p}'s primary osd.{} in state {state:?}, acting {acting:?}, pg_temp {:?}, CRUSH's set {:?}",
                primary,
                at.pg_temp[p],
                at.crush[p]
            );
            // Every member is on record: any one of them alone can serve.
            let mut recorded = at.record[p].as_ref().map_or(vec![], |r| r.osds.clone());
            recorded.sort_unstable();
            let mut members = acting.clone();
            members.sort_unstable();
            assert_eq!(
                recorded, members,
                "pg {p} clean, but the record is not the acting set"
            );
            let ec = self.ec.is_some();
            let snap = |o: i32| copy_of(self.osds[o as usize].disk.inner(), coll(p), ec);
            let first = snap(primary);
            if let Some(st) = &self.ec {
                check_shards(st, &self.osds, &acting, coll(p));
            }
            assert!(first.missing.is_empty(), "pg {p}: {first:?}");
            let unfound = self.osds[primary as usize]
                .pgs
                .get(p)
                .map(Pg::unfound_count);
            assert_eq!(
                unfound,
                Some(0),
                "pg {p} clean, but its primary reports unfound objects"
            );
            for o in acting
                .iter()
                .copied()
                .filter(|&o| o != loligo_crush::ITEM_NONE && o != primary)
            {
                let other = snap(o);
                assert_eq!(
                    first.head, other.head,
                    "pg {p}: osd.{o}'s head differs from the primary's"
                );
                assert_eq!(
                    first.missing, other.missing,
                    "pg {p}: osd.{o} still lacks objects"
                );
                assert_eq!(
                    first.objects, other.objects,
                    "pg {p}: osd.{o}'s objects differ"
                );
                // The logs agree entry for entry.
                assert_eq!(first.log, other.log, "pg {p}: osd.{o}'s log differs");
            }
        }
        // Copies outside the acting set go once the PG is clean without
        // them (the primary says so when they ask, every couple of
        // seconds).
        let stray = |sim: &Sim, o: usize, p: usize| {
            let c = copy_of(sim.osds[o].disk.inner(), coll(p), false);
            !sim.mon.newest().acting[p].contains(&(o as i32))
                && (c.head > Version::default()
                    || !c.objects.is_empty()
                    || !c.log.is_empty()
                    || !c.missing.is_empty())
        };
        let any_stray = |sim: &Sim| (0..OSDS).any(|o| (0..PGS).any(|p| stray(sim, o, p)));
        for _ in 0..STRAY_STEPS {
            if !any_stray(self) {
                break;
            }
            self.step();
        }
        for o in 0..OSDS {
            for p in 0..PGS {
                assert!(
                    !stray(self, o, p),
                    "osd.{o} still holds a stray copy of pg {p}"
                );
            }
        }
        if self.ec.is_none() {
            // A few scrub intervals on the clean cluster.
            for _ in 0..(3_000 / STEP_MS) {
                self.step();
            }
            self.check_trees();
            for o in 0..OSDS {
                self.take_scrubs(o);
            }
        }
        for (o, osd) in self.osds.iter().enumerate() {
            assert!(
                osd.asks.is_empty() && osd.slots.held() == 0 && osd.slots.waiting() == 0,
                "clean, but osd.{o}'s PGs hold recovery-slot asks {:?} ({} slots held, {} asks waiting)",
                osd.asks,
                osd.slots.held(),
                osd.slots.waiting()
            );
        }
        self.stats.clean_checks += 1;
        self.stats.read_errors = self.osds.iter().map(|o| o.disk.read_faults()).sum();
    }

    /// The root comparisons OSD `o`'s PGs made (counted once: the
    /// counters go with the PGs); none may have found a difference, since
    /// every tree is right and a comparison is made only between writes.
    fn take_scrubs(&mut self, o: usize) {
        self.stats.given_up += self.osds[o].pgs.iter().map(Pg::given_up).sum::<u64>();
        for (p, pg) in self.osds[o].pgs.iter().enumerate() {
            let (compared, differed) = pg.scrubs();
            assert_eq!(
                differed, 0,
                "pg {p}: osd.{o} found a member's Merkle root different from its own"
            );
            self.stats.scrubs += compared;
        }
    }

    /// Every copy's Merkle tree, as kept in memory and as persisted, is
    /// the one a rebuild from its objects computes; the members of a PG
    /// agree on the root.
    fn check_trees(&mut self) {
        for p in 0..PGS {
            let mut roots = BTreeMap::new();
            for (o, osd) in self.osds.iter().enumerate() {
                let Some(pg) = osd.pgs.get(p) else { continue };
                let kept = pg.tree().expect("a replicated copy keeps a tree");
                let s = osd.disk.inner();
                let rebuilt = rebuild_tree(s, coll(p), kept, None).unwrap();
                assert!(
                    kept == &rebuilt,
                    "pg {p}: osd.{o}'s kept tree differs from a rebuild (leaves {:?})",
                    kept.diff(&rebuilt)
                );
                let (loaded, fix) = Kept::load(s, coll(p), kept.leaf_count()).unwrap();
                assert!(fix.is_none(), "pg {p}: osd.{o}'s tree needed a rebuild");
                assert!(
                    loaded.tree() == &rebuilt,
                    "pg {p}: osd.{o}'s persisted tree differs from a rebuild (leaves {:?})",
                    loaded.tree().diff(&rebuilt)
                );
                if self.mon.newest().acting[p].contains(&(o as i32)) {
                    roots.insert(o, kept.root());
                } else {
                    assert_eq!(kept.root(), 0, "pg {p}: osd.{o}'s removed copy has a tree");
                }
            }
            let distinct: BTreeSet<u64> = roots.values().copied().collect();
            assert!(
                distinct.len() <= 1,
                "pg {p}: members' roots differ: {roots:?}"
            );
            self.stats.trees_checked += roots.len() as u64;
        }
    }

    /// CRUSH's set in charge of PG `p` and its primary's PG clean, on the
    /// newest map, with nothing in flight.
    fn is_clean(&self, p: usize) -> bool {
        self.queue.is_empty() && self.pg_clean(p)
    }

    /// Whether PG `p` is clean, messages in flight or not.
    fn pg_clean(&self, p: usize) -> bool {
        let at = self.mon.newest();
        let acting = &at.acting[p];
        if *acting != at.crush[p] || at.primary_temp[p].is_some() {
            return false;
        }
        let Some(pg) = primary_of(acting).and_then(|o| self.osds[o as usize].pgs.get(p)) else {
            return false;
        };
        pg.view().epoch == self.mon.epoch() && pg.is_clean()
    }

    /// Run until nothing is pending (at most `steps`), sending nothing new.
    fn drain(&mut self, steps: usize) {
        for _ in 0..steps {
            if self.pending.is_empty() {
                break;
            }
            self.resend_late();
            self.step();
        }
    }

    /// Resend what waited too long (a lost reply, a dead primary).
    fn resend_late(&mut self) {
        let late: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| self.now_ms >= p.sent_ms + CLIENT_RESEND_MS)
            .map(|(k, _)| *k)
            .collect();
        for k in late {
            self.send_op(k);
        }
    }
}

/// Chance (per mille) that a message between OSDs is lost: the sender's
/// call then fails (a lost reply: the receiver did act on it).
const LOSS_PER_MILLE: u64 = 3;

/// What the sender of `ev` sees when `ev` is lost (`None`: nothing, the
/// sender asks again on its own): a lost message or answer fails the
/// sender's call (a lost answer: the receiver did act on it); a lost
/// stray question, or the answer to a peering or stray question, is
/// silence (the primary asks again after a while; so does a stray copy).
/// Peering questions are not lost (the daemon's shell asks again).
fn lost(ev: Ev, real: bool) -> Option<Ev> {
    let e = || Err(RepError::Failed("lost".into()));
    Some(match ev {
        // On the real monitors, a pg_temp or primary_temp ask the
        // monitors never took (their leader changed mid-commit and the
        // call failed): the daemon sends it once, and the PG asks again if
        // it still needs it.
        Ev::PgTemp { .. } | Ev::PrimaryTemp { .. } if real => return None,
        Ev::Peer(m) if matches!(m.msg, PeerMsg::GetInfo { .. }) => Ev::Peer(m),
        Ev::Peer(m) if matches!(m.msg, PeerMsg::StrayCheck { .. }) => return None,
        Ev::Peer(m) => m.answer(e()),
        Ev::Answer {
            reply: Ok(PeerReply::Info(_) | PeerReply::Clean(_)),
            ..
        } => return None,
        Ev::Answer {
            pg,
            to,
            gen,
            from,
            id,
            ..
        } => Ev::Answer {
            pg,
            to,
            gen,
            from,
            id,
            reply: e(),
        },
        other => other,
    })
}

/// Steps the PG may take to go clean once every OSD is back.
const CLEAN_STEPS: usize = 8_000;

/// Steps a clean PG's stray copies may take to be removed.
const STRAY_STEPS: usize = 4_000;

/// One object: name, data, xattrs, omap.
type ObjectState = (
    String,
    Vec<u8>,
    Vec<(String, Vec<u8>)>,
    Vec<(Vec<u8>, Vec<u8>)>,
);

/// What a member's copy holds, for comparing copies.
#[derive(Debug, PartialEq)]
struct Copy {
    head: Version,
    objects: Vec<ObjectState>,
    /// The log's entries (each copy's Merkle leaf stamps left out: they
    /// are its own).
    log: BTreeMap<Vec<u8>, loligo_pg::pg::LogEntry>,
    missing: Vec<Vec<u8>>,
}

/// A member's copy; `ec`: as a shard (its data and shard attribute are
/// its own, and rollback copies are its own business), compared without
/// them.
fn copy_of(s: &dyn ObjectStore, c: CollectionId, ec: bool) -> Copy {
    let (names, _) = s.list(c, None, 10_000).unwrap();
    let objects = names
        .into_iter()
        .filter(|o| !(ec && loligo_pg::ec::is_internal(&o.name)))
        .map(|o| {
            let size = s.stat(c, &o).unwrap().size;
            let data = if ec {
                Vec::new()
            } else {
                s.read(c, &o, &[(0, size)]).unwrap().pop().unwrap()
            };
            let attrs = s
                .getattrs(c, &o)
                .unwrap()
                .into_iter()
                .filter(|(k, _)| !(ec && k == loligo_pg::ec::SHARD_ATTR))
                .collect();
            let omap = s.omap_range(c, &o, &[], None, 10_000).unwrap();
            (o.name, data, attrs, omap)
        })
        .collect();
    let rows = s.records(c, b"", 1_000_000).unwrap();
    let log = rows
        .iter()
        .filter(|(k, _)| k.starts_with(b"log/"))
        .map(|(k, v)| (k.clone(), loligo_pg::pg::record::decode_log(v).unwrap()))
        .collect();
    let missing = rows
        .iter()
        .filter(|(k, _)| k.starts_with(b"missing/") || k == b"backfill")
        .map(|(k, _)| k.clone())
        .collect();
    Copy {
        head: stored_info(s, c)
            .expect("info records read")
            .unwrap_or_default()
            .last_update,
        objects,
        log,
        missing,
    }
}

/// Every EC object's shards, as the acting set's members hold them, are
/// exactly the encoding of the object their data shards hold.
fn check_shards(st: &Striper, osds: &[Osd], acting: &[i32], c: CollectionId) {
    let primary = primary_of(acting).unwrap_or(0) as usize;
    let (names, _) = osds[primary].disk.inner().list(c, None, 10_000).unwrap();
    for o in names
        .iter()
        .filter(|o| !loligo_pg::ec::is_internal(&o.name))
    {
        let size_attr = osds[primary]
            .disk
            .inner()
            .getattr(c, o, loligo_pg::ec::SIZE_ATTR)
            .unwrap();
        let size: u64 = postcard::from_bytes(&size_attr).unwrap();
        let shards: Vec<Vec<u8>> = acting
            .iter()
            .map(|&m| {
                let s = osds[m as usize].disk.inner();
                let len = s.stat(c, o).unwrap().size;
                s.read(c, o, &[(0, len)]).unwrap().pop().unwrap()
            })
            .collect();
        let data: Vec<usize> = (0..st.k()).collect();
        let plan = st
            .plan_read(size, 0..size, &data, Coalesce::Conservative)
            .unwrap();
        let fetched: Fetched<Vec<u8>> = plan
            .reads
            .iter()
            .map(|(&i, exts)| {
                let v = exts
                    .iter()
                    .map(|&(off, len)| {
                        (off, shards[i][off as usize..(off + len) as usize].to_vec())
                    })
                    .collect();
                (i, v)
            })
            .collect();
        let object = st.decode_read(&plan, &fetched).unwrap();
        let want = st.encode(&object).unwrap();
        for (i, &m) in acting.iter().enumerate() {
            assert!(
                shards[i] == want[i],
                "{}: osd.{m}'s shard {i} is not the encoding of the object",
                o.name
            );
            assert!(
                loligo_pg::ec::holds_shard(osds[m as usize].disk.inner(), c, o, i).unwrap(),
                "{}: osd.{m} holds shard {i} not marked as such",
                o.name
            );
        }
    }
}

/// Which monitors a run has (see the `monitor` module).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Monitors {
    /// The monitors' own map logic, real CRUSH: random runs.
    Real,
    /// The simulator's first monitor model: the seeds that found bugs
    /// under it (`LOLIGO_SIM_MODEL=1` replays one).
    Model,
}

/// One random run: its seed and what it simulates.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub seed: u64,
    /// An erasure-coded pool (Reed-Solomon 2+1 on even seeds, Zigzag 2+2
    /// on odd ones), else replicated (size 3).
    pub ec: bool,
    /// Down OSDs are declared lost now and then, and PGs' unfound objects
    /// marked lost.
    pub lose: bool,
    pub monitor: Monitors,
    /// The model's Zigzag positions move while an OSD is down (as CRUSH's
    /// indep rules move them), in a seed that leaves 3 divided by 4.
    pub moves: bool,
    /// The model refuses every late record while the PG's record is
    /// short, not only one that names none of its members: a stricter
    /// rule than the monitors', whose histories reach corners theirs does
    /// not.
    pub strict_late: bool,
    /// Two OSDs now and then cannot reach each other for a while (the
    /// real monitors only; `LOLIGO_SIM_PARTITIONS=1`).
    pub partitions: bool,
    /// Half the partitions cut one direction only
    /// (`LOLIGO_SIM_ONE_WAY=1`).
    pub one_way: bool,
    /// The OSDs' stores (`LOLIGO_SIM_BLOCK=1`: the block store on media
    /// that lose power).
    pub stores: Stores,
    /// The monitors' leader fails now and then, mid-commit (the real
    /// monitors only; `LOLIGO_SIM_ELECTIONS=1`).
    pub elections: bool,
}

impl Run {
    /// A replicated run with the real monitors.
    pub fn replicated(seed: u64) -> Run {
        Run {
            seed,
            ec: false,
            lose: false,
            monitor: Monitors::Real,
            moves: false,
            strict_late: false,
            partitions: false,
            one_way: false,
            stores: Stores::Mem,
            elections: false,
        }
    }

    /// With the monitors' leader failing now and then.
    pub fn electing(self) -> Run {
        Run {
            elections: true,
            ..self
        }
    }

    /// On the block store, each crash a power loss.
    pub fn on_block_store(self) -> Run {
        Run {
            stores: Stores::Block,
            ..self
        }
    }

    /// With partitions between OSDs.
    pub fn partitioned(self) -> Run {
        Run {
            partitions: true,
            ..self
        }
    }

    /// With partitions between OSDs, half of them one-way.
    pub fn partitioned_one_way(self) -> Run {
        Run {
            partitions: true,
            one_way: true,
            ..self
        }
    }

    /// An erasure-coded run with the real monitors.
    pub fn ec(seed: u64) -> Run {
        Run {
            ec: true,
            ..Run::replicated(seed)
        }
    }

    /// With OSDs declared lost.
    pub fn losing(self) -> Run {
        Run { lose: true, ..self }
    }

    /// On the model monitor, positions moving or not, with the strict
    /// late rule or not.
    pub fn on_model(self, moves: bool, strict_late: bool) -> Run {
        Run {
            monitor: Monitors::Model,
            moves,
            strict_late,
            ..self
        }
    }

    /// As the environment asks for a replay: `LOLIGO_SIM_MODEL=1` for
    /// the model monitor, `LOLIGO_SIM_EC_MOVES=1` (model) for moving
    /// positions, `LOLIGO_SIM_STRICT_LATE=1` (model) for the strict rule.
    pub fn as_asked(self) -> Run {
        let set = |v: &str| std::env::var_os(v).is_some();
        let (moves, strict) = (set("LOLIGO_SIM_EC_MOVES"), set("LOLIGO_SIM_STRICT_LATE"));
        let run = match (set("LOLIGO_SIM_PARTITIONS"), set("LOLIGO_SIM_ONE_WAY")) {
            (_, true) => self.partitioned_one_way(),
            (true, false) => self.partitioned(),
            (false, false) => self,
        };
        let run = match set("LOLIGO_SIM_BLOCK") {
            true => run.on_block_store(),
            false => run,
        };
        let run = match set("LOLIGO_SIM_ELECTIONS") {
            true => run.electing(),
            false => run,
        };
        match set("LOLIGO_SIM_MODEL") || moves || strict {
            true => run.on_model(moves, strict),
            false => run,
        }
    }

    /// The environment that replays this run with the test that runs
    /// its kind (`SEED` names the test's seed variable).
    pub fn replay(&self, seed_var: &str) -> String {
        let mut env = String::new();
        if self.monitor == Monitors::Model {
            env += "LOLIGO_SIM_MODEL=1 ";
        }
        if self.moves {
            env += "LOLIGO_SIM_EC_MOVES=1 ";
        }
        if self.strict_late {
            env += "LOLIGO_SIM_STRICT_LATE=1 ";
        }
        if self.one_way {
            env += "LOLIGO_SIM_ONE_WAY=1 ";
        } else if self.partitions {
            env += "LOLIGO_SIM_PARTITIONS=1 ";
        }
        if self.stores == Stores::Block {
            env += "LOLIGO_SIM_BLOCK=1 ";
        }
        if self.elections {
            env += "LOLIGO_SIM_ELECTIONS=1 ";
        }
        format!("{env}{seed_var}={}", self.seed)
    }

    /// Run it: its counts, or a panic at the first violation.
    pub fn go(self) -> Stats {
        if std::env::var_os("LOLIGO_SIM_TRACE").is_some() {
            // The PGs' own log lines, between the simulator's events.
            let _ = tracing_subscriber::fmt()
                .with_test_writer()
                .without_time()
                .with_ansi(false)
                .with_max_level(tracing::Level::DEBUG)
                .try_init();
        }
        let mut s = Sim::new(&self);
        s.run(6_000);
        s.heal_and_check();
        s.check_clean();
        s.check_shipped();
        s.stats
    }

    /// Run it; a failure names the run and how to replay it.
    pub fn go_named(self, seed_var: &str) -> Stats {
        std::panic::catch_unwind(|| self.go()).unwrap_or_else(|_| {
            panic!(
                "{:?} seed {} failed: {} replays it",
                self.monitor,
                self.seed,
                self.replay(seed_var)
            )
        })
    }
}
