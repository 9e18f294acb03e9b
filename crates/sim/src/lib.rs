//! A seeded simulation of three PGs on four OSDs (six once a split run,
//! `Run::splits`, doubles the pool's PG count: each OSD splits its copies
//! in place as the daemon does, and pgp_num then climbs; the monitors'
//! leader may merge them back): the real `Pg` state
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
    MonAsk, Pg, PgInfo, RepError,
};
use loligo_pg::reserve::Reserver;
use loligo_store::{CollectionId, ObjectStore, Transaction};
use loligo_types::ops::{ClientOp, OpError, OpReply, ReqId, SubOp, SubResult, Version};
use loligo_types::osdmap::{EcPlugin, EcProfile, PoolKind};
use loligo_types::{Change, Epoch, OsdMap, PgId, PgState, Pool, RecordAsk};
use monitor::{members, primary_of, ModelMon, Monitor, RealMon, Seen, Steer};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

mod check;
mod client;
mod disk;
mod election;
mod faults;
mod monitor;
mod run;
mod scrub;

use client::{Kind, Pending};
pub use run::{Monitors, Run};

pub(crate) const OSDS: usize = 4;
/// The pool's PGs as a run starts.
pub(crate) const PGS: usize = 3;
/// Its PGs once a split run (`Run::splits`) has grown it.
pub(crate) const PGS_MAX: usize = 6;
const OBJECTS: usize = 9;
const POOL: u64 = 1;
const STEP_MS: u64 = 5;
/// Chance (per mille) that one OSD's copy of a new map comes late, and how
/// late at least (steps).
const MAP_LATE_PER_MILLE: u64 = 60;
const MAP_LATE_STEPS_MIN: u64 = 40;

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

/// The PG an object lives in while the pool has [`PGS`] PGs.
fn pg_of(obj: usize) -> usize {
    obj % PGS
}

/// The PG object `obj` lives in when the pool has `pg_num` PGs (its
/// name's hash, as on a cluster: after a split, [`pg_of`]'s or one of its
/// children).
pub(crate) fn pg_in(obj: usize, pg_num: usize) -> usize {
    static HASHES: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    let hashes = HASHES.get_or_init(|| {
        (0..OBJECTS)
            .map(|o| loligo_crush::hash::str_hash_rjenkins(obj_name(o).as_bytes()))
            .collect()
    });
    loligo_crush::placement::ancestor(hashes[obj], pg_num as u32) as usize
}

/// Object `obj`'s name: `o{obj}`, with a suffix `_{k}` (the first `k`
/// that does it) where that is needed for the name to hash into
/// [`pg_of`]'s PG, as every name does on a cluster (a PG passes over
/// objects that hash to another PG, as after a split).
pub(crate) fn obj_name(obj: usize) -> String {
    let fits = |n: &str| {
        let h = loligo_crush::hash::str_hash_rjenkins(n.as_bytes());
        loligo_crush::placement::ancestor(h, PGS as u32) as usize == pg_of(obj)
    };
    let plain = format!("o{obj}");
    if fits(&plain) {
        return plain;
    }
    (1..)
        .map(|k| format!("o{obj}_{k}"))
        .find(|n| fits(n))
        .unwrap_or(plain)
}

/// The object a name from [`obj_name`] names.
pub(crate) fn obj_of(name: &str) -> Option<usize> {
    let n = name.strip_prefix('o')?;
    n.split('_').next()?.parse().ok()
}

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
    /// Its scrub slots (one, Ceph's default `osd_max_scrubs`).
    scrub_slots: std::sync::Arc<loligo_pg::scrub_slots::ScrubSlots>,
    /// PGs its scrub slots woke (the slots' hook leaves them here; the
    /// simulation tells them after the input that gave a slot back).
    woken: std::sync::Arc<std::sync::Mutex<Vec<PgId>>>,
    /// The maps this process has seen.
    seen: Seen,
    /// When this process started (ms): as the daemon's PG clock reads 0
    /// at its OSD's start, the copies it held then and those its splits
    /// make report a grant to any primary until one lease after it.
    started_ms: u64,
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
    /// A PG's `Effect::Continue`.
    Continue {
        pg: usize,
        osd: usize,
        gen: u64,
    },
    /// A PG's `Effect::Read`, run against its OSD's store as it is when
    /// this is delivered (the daemon runs it on another thread, while the
    /// PG goes on), then reported back; `interval` is the PG's when it
    /// handed the read aside.
    ReadDone {
        pg: usize,
        osd: usize,
        gen: u64,
        tid: u64,
        job: loligo_pg::pg::ReadJob,
        interval: Epoch,
    },
    /// A scrub slot the PG waited for was given back.
    ScrubSlotFree {
        pg: usize,
        osd: usize,
        gen: u64,
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
    /// A history that is not linearizable fails the run (else counted).
    linearizable: bool,
    /// Every client op, by object: what it asked, when, and its answer
    /// (checked for linearizability at the end).
    history: Vec<(
        usize,
        loligo_testkit::lincheck::OpOf<loligo_testkit::lincheck::Register<u64>>,
    )>,
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
    /// Every replicated read runs beside its PG's task (`Effect::Read`),
    /// as the daemon's of large objects do: replicated runs of even seeds.
    reads_aside: bool,
    chunk_objects: usize,
    /// Faults stopped: every OSD is started and stays up.
    healing: bool,
    /// A scenario drives the run: no random faults, no lost messages,
    /// no late maps, no client on an older map unless it asks.
    scripted: bool,
    /// OSDs cut off from the monitors (and only from them): they hear of
    /// no new map, their pg_temp asks are lost and their write-set
    /// record asks wait (`deferred`, as the daemon asks again) until the
    /// cut heals (`mon_heals`, in random runs).
    cut_off: [bool; OSDS],
    deferred: Vec<Ev>,
    mon_heals: BTreeMap<usize, u64>,
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
    /// Scrubs asked for now and then (`Run::scrubs`), and copies rotting
    /// (`Run::rot`).
    scrubs: bool,
    /// Erasure-coded objects span several stripes (`Run::stripes`).
    ec_stripes: bool,
    /// The pool's PGs split mid-run (`Run::splits`).
    splits: bool,
    /// In split runs, when the last map sent to each OSD is due.
    map_due: [u64; OSDS],
    rot: bool,
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
    marked_ms: [Option<u64>; PGS_MAX],
    /// Per object, values below which an acknowledgement binds nothing:
    /// they were written before the PG's whole recorded write set was
    /// declared lost.
    lost_upto: [u64; OBJECTS],
}

#[derive(Default, Debug)]
pub struct Stats {
    /// Runs whose client history was checked linearizable, runs whose
    /// check ran out of search steps, and runs whose history was not
    /// linearizable (see `Run::linearizable`).
    pub histories_checked: u64,
    pub histories_undecided: u64,
    pub histories_bad: u64,
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
    /// OSDs cut off from the monitors alone for a while.
    pub monitor_cuts: u64,
    /// Times the monitors' leader failed; OSD asks whose call failed
    /// while they elected another; of those, asks the failed leader had
    /// taken, committed once a new one was in.
    pub elections: u64,
    pub asks_failed: u64,
    pub taken_mid_commit: u64,
    /// Scrubs the operator asked for, copies that rotted, deep scrubs of
    /// the clean check, and copies repaired or mended.
    pub scrubs_asked: u64,
    /// Scrubs the PGs alive at the clean check had ended, and had asked
    /// for by their schedule.
    pub scrubs_done: u64,
    pub scrubs_scheduled: u64,
    pub rotted: u64,
    pub deep_scrubs: u64,
    pub repaired: u64,
    /// Erasure-coded objects whose damaged shards a client read went
    /// around and its primary then rebuilt.
    pub read_repairs: u64,
    /// Reads run beside their PG's task (`Effect::Read`: replicated runs
    /// of even seeds), and those of them that ended after their PG's
    /// interval did (answered with a retry when it ended).
    pub reads_aside: u64,
    pub reads_aside_late: u64,
    /// Erasure-coded objects whose parity a deep scrub checked against
    /// their data (those whose shards keep no hash).
    pub parity_checked: u64,
    /// Runs that ended with an object whose only copy at its version
    /// rotted (its twins were rolled back or overwritten after): reads
    /// of it wait, and the run's clean checks are skipped.
    pub rot_lost: u64,
    /// Scrub slots a primary asked for and was refused (its own OSD's or
    /// a member's: another scrub held it), by the PGs alive at the clean
    /// check.
    pub scrub_slots_refused: u64,
    /// PG copies split in place (`Run::splits`), objects they moved to
    /// children, and pgp_num steps taken.
    pub splits: u64,
    pub split_objects: u64,
    pub pgp_steps: u64,
    /// PG copies that took their merge sources in (`Run::splits`, after a
    /// split), objects they took, and merged copies left to be
    /// backfilled (they missed writes).
    pub merges: u64,
    pub merged_objects: u64,
    pub merged_incomplete: u64,
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
        self.splits += st.splits;
        self.split_objects += st.split_objects;
        self.pgp_steps += st.pgp_steps;
        self.merges += st.merges;
        self.merged_objects += st.merged_objects;
        self.merged_incomplete += st.merged_incomplete;
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
        self.histories_checked += st.histories_checked;
        self.histories_undecided += st.histories_undecided;
        self.histories_bad += st.histories_bad;
        self.given_up += st.given_up;
        self.unfound_most = self.unfound_most.max(st.unfound_most);
        self.unfound_marked += st.unfound_marked;
        self.partitions += st.partitions;
        self.reboots += st.reboots;
        self.one_way += st.one_way;
        self.monitor_cuts += st.monitor_cuts;
        self.elections += st.elections;
        self.asks_failed += st.asks_failed;
        self.taken_mid_commit += st.taken_mid_commit;
        self.scrubs_asked += st.scrubs_asked;
        self.scrubs_done += st.scrubs_done;
        self.scrubs_scheduled += st.scrubs_scheduled;
        self.rotted += st.rotted;
        self.deep_scrubs += st.deep_scrubs;
        self.repaired += st.repaired;
        self.read_repairs += st.read_repairs;
        self.reads_aside += st.reads_aside;
        self.reads_aside_late += st.reads_aside_late;
        self.parity_checked += st.parity_checked;
        self.rot_lost += st.rot_lost;
        self.scrub_slots_refused += st.scrub_slots_refused;
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
    fn command_reply(&mut self, _token: u64, _result: loligo_pg::pg::CommandResult) {}

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
        let cut = self.sim.cut_off[from];
        let ev = match ask {
            MonAsk::PgTemp(_) | MonAsk::PrimaryTemp(_) if cut => return,
            MonAsk::PgTemp(osds) => Ev::PgTemp { pg, from, osds },
            MonAsk::PrimaryTemp(osd) => Ev::PrimaryTemp { pg, from, osd },
            MonAsk::Record(ask) => Ev::Record { pg, from, gen, ask },
        };
        if cut {
            return self.sim.deferred.push(ev);
        }
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

    fn continue_later(&mut self) {
        let (osd, pg, gen) = (self.o, self.p, self.gen);
        self.sim.send(Ev::Continue { pg, osd, gen });
    }

    fn read(&mut self, tid: u64, job: loligo_pg::pg::ReadJob) {
        let (osd, pg, gen) = (self.o, self.p, self.gen);
        let interval = self.sim.osds[osd].pgs[pg].view().interval;
        self.sim.send(Ev::ReadDone {
            pg,
            osd,
            gen,
            tid,
            job,
            interval,
        });
    }
}

/// Steps a scenario waits at most for the cluster to settle or an op to
/// be answered.
const SCENARIO_STEPS: usize = 4_000;

/// The PGs' read lease (ms): shorter than the daemon's, as the simulated
/// monitors mark a crashed OSD down within 100 ms, not a heartbeat grace.
const READ_LEASE_MS: u64 = 1_000;

/// Driving the simulation step by step, for named scenarios: every OSD
/// up, the PGs peered, then what the scenario does.
impl Sim {
    /// A replicated cluster with no random faults, settled.
    pub fn scripted(seed: u64) -> Sim {
        Sim::scripted_run(&Run::replicated(seed))
    }

    /// As [`Sim::scripted`], on a pool the scenario may split
    /// (`Sim::split_pool`).
    pub fn scripted_splitting(seed: u64) -> Sim {
        Sim::scripted_run(&Run::replicated(seed).splitting())
    }

    /// `run`'s cluster with no random faults, settled.
    fn scripted_run(run: &Run) -> Sim {
        let mut s = Sim::new(run);
        s.scripted = true;
        s.healing = true;
        s.settle();
        s
    }

    /// The operator doubles the pool's PG count (`pool set p pg_num`;
    /// pgp_num stays): each OSD splits its copies as it takes the map.
    pub fn split_pool(&mut self) {
        let pool = self.mon.pool().expect("the pool exists");
        assert!((pool.pg_num as usize) < PGS_MAX, "split once");
        self.propose(vec![Change::PoolUpdate(Pool {
            pg_num: PGS_MAX as u32,
            ..pool
        })]);
    }

    /// The objects that move to a child PG when the pool's PG count
    /// doubles from where a run starts.
    pub fn objects_split_off() -> Vec<usize> {
        (0..OBJECTS)
            .filter(|&o| pg_in(o, PGS_MAX) != pg_of(o))
            .collect()
    }

    /// Run until every PG is clean (at most `SCENARIO_STEPS` steps).
    pub fn settle(&mut self) {
        for _ in 0..SCENARIO_STEPS {
            if (0..self.pg_count()).all(|p| self.pg_clean(p)) {
                return;
            }
            self.step();
        }
    }

    /// Run until object `obj`'s PG is active at its primary in the
    /// newest map (at most `SCENARIO_STEPS` steps): whether it is.
    pub fn await_active(&mut self, obj: usize) -> bool {
        for _ in 0..SCENARIO_STEPS {
            let p = self.pg_now(obj);
            let active = (self.primary_of(obj))
                .and_then(|o| self.osds[o].pgs.get(p)?.stat())
                .is_some_and(|st| st.state.contains(PgState::ACTIVE) && st.epoch == self.epoch());
            if active {
                return true;
            }
            self.step();
        }
        false
    }

    /// The newest map epoch.
    pub fn epoch(&self) -> Epoch {
        self.mon.epoch()
    }

    /// The pool's PGs in the newest map.
    pub(crate) fn pg_count(&self) -> usize {
        self.mon.newest().acting.len()
    }

    /// The PG object `obj` lives in under the newest map.
    pub fn pg_now(&self, obj: usize) -> usize {
        pg_in(obj, self.pg_count())
    }

    /// The acting set of object `obj`'s PG in the newest map.
    pub fn acting_of(&self, obj: usize) -> Vec<i32> {
        self.mon.newest().acting[self.pg_now(obj)].clone()
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
        self.mon.newest().primary[self.pg_now(obj)].map(|o| o as usize)
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

    /// Read object `obj` under map `epoch` (sent, and sent again after
    /// each error, to that map's primary), checked as every read is:
    /// never older than what was acknowledged before it was sent.
    /// Whether it was answered with the object's value (else it is
    /// still pending).
    pub fn read_at(&mut self, obj: usize, epoch: Epoch) -> bool {
        self.client_epoch = Some(epoch);
        let floor = self.acked[obj];
        let key = self.next_client_tid;
        self.submit(Kind::Read { obj, floor });
        self.drain(SCENARIO_STEPS);
        self.client_epoch = None;
        !self.pending.contains_key(&key)
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
        self.mon_heals.remove(&o);
        let (asks, rest) = std::mem::take(&mut self.deferred)
            .into_iter()
            .partition(|ev| matches!(ev, Ev::Record { from, .. } if *from == o));
        self.deferred = rest;
        for ev in asks {
            self.send(ev);
        }
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
        if self.heal_and_check() {
            self.check_clean();
        }
    }
}

/// The simulation's pool: replicated (size 3, min_size 2), or on an
/// erasure-coded run Reed-Solomon 2+1 on even seeds (three of the four
/// OSDs) and Zigzag 2+2 (element-level rebuilds, all four) on odd ones,
/// min_size 2 (= k: a write set of two shards takes writes, so losing one
/// of them leaves the PG down until it returns, the hardest case); with
/// its profile (with `stripes`, a 128-byte stripe unit: see
/// `Run::stripes`).
fn sim_pool(seed: u64, ec: bool, stripes: bool) -> (Pool, Option<EcProfile>) {
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
        // (With `stripes`, small ones: an object of `client::EC_DATA_LEN`
        // bytes spans four, whichever the code.)
        stripe_unit: if stripes { 128 } else { 0 },
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

impl Sim {
    fn new(run: &Run) -> Sim {
        let (seed, ec) = (run.seed, run.ec);
        let (pool, profile) = sim_pool(seed, ec, run.stripes);
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
            let scrub_slots = loligo_pg::scrub_slots::ScrubSlots::new(1);
            let woken = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let w = woken.clone();
            scrub_slots.set_wake(Box::new(move |pg| {
                if let Ok(mut w) = w.lock() {
                    w.push(pg);
                }
            }));
            osds.push(Osd {
                disk: Disk::new(run.stores, &colls()),
                pgs: Vec::new(),
                gen: 0,
                asks: BTreeSet::new(),
                slots: Reserver::new(slots),
                scrub_slots,
                woken,
                seen: Seen::default(),
                started_ms: 0,
            });
        }
        let mut s = Sim {
            slots,
            log_max,
            reads_aside: !ec && seed % 2 == 0,
            chunk_objects,
            healing: false,
            scripted: false,
            cut_off: [false; OSDS],
            deferred: Vec::new(),
            mon_heals: BTreeMap::new(),
            client_epoch: None,
            apart: BTreeSet::new(),
            partitions: run.partitions,
            one_way: run.one_way,
            heals: BTreeMap::new(),
            elections: Elections::new(run.elections && real),
            scrubs: run.scrubs,
            rot: run.rot,
            linearizable: run.linearizable,
            ec_stripes: run.stripes,
            splits: run.splits && real,
            map_due: [0; OSDS],
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
            history: Vec::new(),
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
            marked_ms: [None; PGS_MAX],
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
        let at = self.in_order(&ev, at);
        self.queue.push((at, ev));
    }

    /// When map `ev` (any other event: as it is) may reach its OSD: in a
    /// split run, after every map sent to that OSD before it, as the
    /// monitors' map stream delivers them. (Other runs reorder maps, and
    /// an OSD that gets a later map first restarts every interval: with
    /// twice the PGs asking for write-set records, each record a map,
    /// the reordered maps restarted intervals faster than the PGs peered.)
    fn in_order(&mut self, ev: &Ev, at: u64) -> u64 {
        match ev {
            Ev::Map { osd, .. } if self.splits => {
                let at = at.max(self.map_due[*osd] + STEP_MS);
                self.map_due[*osd] = at;
                at
            }
            _ => at,
        }
    }

    /// The monitors commit `changes` as the next epoch, and every OSD
    /// hears of it (nothing when there are none).
    fn propose(&mut self, changes: Vec<Change>) {
        if self.elections.electing() {
            self.elections.defer(changes);
            return;
        }
        if self.trace && !changes.is_empty() {
            eprintln!("{:>6}ms commit {changes:?}", self.now_ms);
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
                    let at = self.in_order(&ev, self.now_ms + steps * STEP_MS);
                    self.queue.push((at, ev));
                } else {
                    self.send(ev);
                }
            }
        }
    }

    fn start(&mut self, o: usize) {
        self.osds[o].gen += 1;
        self.osds[o].started_ms = self.now_ms;
        // A copy for each PG whose collection the disk holds (a split
        // made its children's; a new disk holds the first PGs').
        let disk = self.osds[o].disk.inner();
        let held = (0..PGS_MAX)
            .take_while(|&p| disk.collection_exists(coll(p)).unwrap_or(false))
            .count();
        for p in 0..held {
            let info = stored_info(self.osds[o].disk.inner(), coll(p))
                .expect("info records read")
                .unwrap_or_default();
            let pg = self.make_pg(o, p, info);
            self.osds[o].pgs.push(pg);
        }
        let osd = &mut self.osds[o];
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

    /// OSD `o`'s state machine for PG `p`, whose copy holds `info`: as
    /// the daemon's, a copy on the store at its OSD's start, or cut from
    /// a parent since, reports a grant to any primary for one lease from
    /// that start (a split's child also takes its parent's grants).
    fn make_pg(&self, o: usize, p: usize, info: PgInfo) -> Pg {
        let mut pg = Pg::new(pg_id(p), o as i32, info);
        pg.op_timeout_ms = 2_000;
        if self.reads_aside {
            pg.read_aside_min = 0;
        }
        pg.set_read_lease(READ_LEASE_MS, Some(self.osds[o].started_ms));
        pg.log_entries_max = self.log_max;
        pg.backfill_chunk_objects = self.chunk_objects;
        // The smallest trees: a PG's few objects share leaves.
        pg.merkle_leaves = match self.ec {
            Some(_) => 0,
            None => merkle::LEAVES_MIN,
        };
        // Roots compared often: a false difference fails the run.
        pg.scrub_interval_ms = 1_000;
        if self.scrubs {
            // Scrubs come due on their own too, every few seconds.
            pg.scrub_schedule = scrub::SIM_SCHEDULE;
        }
        pg.scrub_slots = self.osds[o].scrub_slots.clone();
        pg
    }

    /// OSD `o` takes the map of `epoch`, in which the pool has `to` PGs,
    /// more than its copies were made for: as the daemon, each copy
    /// splits in place (`split::plan`, durable) before its PG takes the
    /// map, and the children's PGs start. What its PGs queued is
    /// committed first (the store commits in queue order): each plan sees
    /// every object written.
    fn split(&mut self, o: usize, to: usize, epoch: Epoch) {
        let from = self.osds[o].pgs.len();
        if self.trace {
            eprintln!(
                "{:>6}ms osd.{o}: split {from} -> {to} at epoch {epoch}",
                self.now_ms
            );
        }
        debug_assert!(from < to && to <= PGS_MAX, "osd.{o}: split {from} -> {to}");
        if let Some(&(pg, tid, ..)) = self.osds[o].disk.queued.back() {
            self.osds[o].disk.commit_through(pg, tid);
        }
        let ec = self.ec.is_some();
        for p in 0..from {
            let disk = &mut self.osds[o].disk;
            let plan =
                loligo_pg::pg::split::plan(disk.inner(), pg_id(p), from as u32, to as u32, ec)
                    .unwrap_or_else(|e| panic!("osd.{o} pg {p}: the split cannot be planned: {e}"));
            self.stats.splits += 1;
            self.stats.split_objects += plan.moved;
            disk.commit(plan.txn, true);
            self.osds[o].pgs[p].reshaped(plan.info, epoch);
        }
        for c in from..to {
            let info = stored_info(self.osds[o].disk.inner(), coll(c))
                .expect("info records read")
                .unwrap_or_default();
            let mut pg = self.make_pg(o, c, info);
            // As the daemon: the child keeps its parent's lease grants.
            let parent = loligo_crush::placement::ancestor(c as u32, from as u32) as usize;
            pg.inherit_lease(&self.osds[o].pgs[parent].lease_grants());
            self.osds[o].pgs.push(pg);
        }
    }

    /// OSD `o` takes the map of `epoch`, in which the pool has `to` PGs,
    /// fewer than its copies were made for: as the daemon, the merged-away
    /// PGs stop here (their recovery slots go; messages they held are
    /// sent again, to be told to ask the PGs their objects are in now),
    /// and each remaining copy takes in its sources' (`merge::plan`,
    /// durable) before its PG takes the map.
    fn merge(&mut self, o: usize, to: usize, epoch: Epoch) {
        let from = self.osds[o].pgs.len();
        debug_assert!(to < from, "osd.{o}: merge {from} -> {to}");
        if self.trace {
            eprintln!(
                "{:>6}ms osd.{o}: merge {from} -> {to} at epoch {epoch}",
                self.now_ms
            );
        }
        if let Some(&(pg, tid, ..)) = self.osds[o].disk.queued.back() {
            self.osds[o].disk.commit_through(pg, tid);
        }
        for p in to..from {
            let granted = self.osds[o].slots.release_pg(pg_id(p));
            self.grant(o, granted);
            // As the daemon: the target keeps its sources' lease grants.
            let g = self.osds[o].pgs[p].lease_grants();
            let t = loligo_crush::placement::ancestor(p as u32, to as u32) as usize;
            self.osds[o].pgs[t].inherit_lease(&g);
        }
        self.osds[o].asks.retain(|&(p, _)| p < to);
        self.osds[o].pgs.truncate(to);
        for m in take_held(&mut self.held, |m| m.to == o && m.pg >= to) {
            self.send(Ev::Peer(m));
        }
        let merged = (self.mon.map()).and_then(|m| m.pg_merged.get(&POOL).cloned());
        let dups_max = usize::try_from(self.log_max).unwrap_or(usize::MAX);
        for t in 0..to {
            let disk = &mut self.osds[o].disk;
            let plan = loligo_pg::pg::merge::plan(
                disk.inner(),
                pg_id(t),
                from as u32,
                to as u32,
                merged.as_ref(),
                dups_max,
            )
            .unwrap_or_else(|e| panic!("osd.{o} pg {t}: the merge cannot be planned: {e}"));
            disk.commit(plan.txn, true);
            if plan.joins {
                self.stats.merges += 1;
                self.stats.merged_objects += plan.moved;
                self.stats.merged_incomplete += u64::from(plan.incomplete.is_some());
                self.osds[o].pgs[t].reshaped(plan.info, epoch);
            }
        }
    }

    /// The monitors' leader steps pgp_num toward a merge's target and
    /// drives the merge (`pg_num::step`), from the PGs' reports: each
    /// PG's state as its primary in the newest map has it.
    pub(crate) fn pg_num_leader(&mut self) {
        if !self.splits || self.elections.electing() {
            return;
        }
        let Some(map) = self.mon.map() else { return };
        if map.pg_merges.is_empty() {
            return;
        }
        let at = self.mon.newest();
        let mut ready = std::collections::HashMap::new();
        let mut not_clean = 0;
        for p in 0..at.acting.len() {
            let primary = at.primary[p].map(|o| o as usize);
            let stat = primary.and_then(|o| self.osds[o].pgs.get(p)?.stat());
            let clean = stat.as_ref().is_some_and(|st| {
                st.state.contains(PgState::ACTIVE | PgState::CLEAN) && st.epoch == map.epoch
            });
            not_clean += u64::from(!clean);
            if let Some(st) = stat {
                ready.insert(pg_id(p), st);
            }
        }
        let step = loligo_types::pg_num::step(map, not_clean, &ready);
        if !step.changes.is_empty() {
            if self.trace {
                eprintln!("{:>6}ms leader: {}", self.now_ms, step.note);
            }
            self.stats.pgp_steps += u64::from(
                step.changes
                    .iter()
                    .any(|c| matches!(c, Change::PoolUpdate(_))),
            );
            self.propose(step.changes);
        }
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
        pg.clock(self.now_ms);
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
        let woken = match self.osds[o].woken.lock() {
            Ok(mut w) => std::mem::take(&mut *w),
            Err(_) => Vec::new(),
        };
        for pg in woken {
            let pg = pg.ps as usize;
            self.send(Ev::ScrubSlotFree { pg, osd: o, gen });
        }
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
            ev @ (Ev::Record { .. }
            | Ev::RecordAgain { .. }
            | Ev::PgTemp { .. }
            | Ev::PrimaryTemp { .. }
            | Ev::Reported { .. }
            | Ev::MarkDown { .. }) => self.deliver_to_monitors(ev),
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
            Ev::Continue { pg, osd, gen } => {
                if self.alive(osd, gen) {
                    self.feed(osd, pg, Input::Continue);
                }
            }
            Ev::ReadDone {
                pg,
                osd,
                gen,
                tid,
                job,
                interval,
            } => self.deliver_read_done(pg, osd, gen, tid, &job, interval),
            Ev::ScrubSlotFree { pg, osd, gen } => {
                if self.alive(osd, gen) {
                    let now_ms = self.now_ms;
                    self.feed(osd, pg, Input::ScrubSlotFree { now_ms });
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

    /// An event for the monitors: an OSD's ask (a write-set record, a
    /// pg_temp, a primary_temp), failure reports, a failed OSD's grace
    /// period ending.
    fn deliver_to_monitors(&mut self, ev: Ev) {
        match ev {
            Ev::Record { pg, from, gen, ask } => {
                self.elections.asked(from, pg, gen, &ask);
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
            other => unreachable!("{other:?} is not for the monitors"),
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
        let pgs = inputs.as_ref().map_or(0, Vec::len);
        if pgs > self.osds[osd].pgs.len() {
            self.split(osd, pgs, input_epoch);
        } else if pgs > 0 && pgs < self.osds[osd].pgs.len() {
            self.merge(osd, pgs, input_epoch);
        }
        for (p, input) in inputs.into_iter().flatten().enumerate() {
            self.feed(osd, p, input);
        }
        if fed {
            self.reboot_if_marked_down(osd);
        }
    }

    /// OSD `osd`'s PG `pg`'s read `tid` runs now, against the store as it
    /// is (now and then failing with EIO), and the PG takes its result.
    fn deliver_read_done(
        &mut self,
        pg: usize,
        osd: usize,
        gen: u64,
        tid: u64,
        job: &loligo_pg::pg::ReadJob,
        interval: Epoch,
    ) {
        if !self.alive(osd, gen) {
            return;
        }
        let eio = !self.healing && self.rng.chance(EIO_PER_MILLE);
        let o = &mut self.osds[osd];
        let Some(copy) = o.pgs.get(pg) else { return };
        self.stats.reads_aside += 1;
        self.stats.reads_aside_late += u64::from(copy.view().interval != interval);
        if eio {
            o.disk.store.fail_read_in(1);
        }
        let result = job.run(&o.disk.store);
        o.disk.store.fail_read_in(0);
        self.feed(osd, pg, Input::ReadDone { tid, result });
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
        if m.pg >= self.osds[m.to].pgs.len() {
            // A PG this OSD's map does not have (a split on its way, or
            // merged away): as the daemon, ask again, never "no copy"; a
            // peering query is asked again by the sender's shell.
            if query && self.mon.newest().up[m.to] {
                return self.send(Ev::Peer(m));
            }
            let why = format!(
                "pg {}: not in this OSD's map (a split on its way, or merged away); ask again",
                pg_id(m.pg)
            );
            let reply = match m.msg {
                PeerMsg::GetInfo { .. } => PeerReply::Refused(why),
                PeerMsg::StrayCheck { .. } => PeerReply::Clean(None),
                _ => PeerReply::RepDone(Err(why)),
            };
            let ev = m.answer(Ok(reply));
            return self.send(ev);
        }
        let token = self.next_token;
        self.next_token += 1;
        let (to, pg, msg) = (m.to, m.pg, m.msg.clone());
        self.held.insert(token, m);
        let now_ms = self.now_ms;
        self.feed(to, pg, Input::Peer { msg, token, now_ms });
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
            self.pg_num_leader();
            let now_ms = self.now_ms;
            for o in 0..OSDS {
                // (A stopped OSD's PGs too, as if there: each feed draws
                // from the seed, and a run without splits replays as
                // before they existed.)
                for p in 0..self.osds[o].pgs.len().max(PGS) {
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

/// One object: name, data, xattrs, omap.
type ObjectState = (
    String,
    Vec<u8>,
    Vec<(String, Vec<u8>)>,
    Vec<(Vec<u8>, Vec<u8>)>,
);
