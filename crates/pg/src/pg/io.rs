//! What goes into a PG and what comes out of it: its inputs, its
//! effects, and the one router that hands effects to a host (the daemon,
//! the simulator, the tests, the scale bench).
//!
//! Messages between copies of a PG are defined once, as `PeerMsg` and
//! `PeerReply` (`crate::msg`): the PG emits `Effect::Send` of a message
//! and takes its answer as `Input::Reply`; it takes another copy's message
//! as `Input::Peer` and answers it with `Effect::Answer`. A new message is
//! one variant of `PeerMsg`, not one of each enum here.
//!
//! Vocabulary and routing only: it must never decide anything a PG
//! decides.

use super::read::ReadJob;
use super::tree;
use crate::msg::{PeerMsg, PeerReply};
use loligo_ec::stripe::Striper;
use loligo_store::{StoreError, Transaction};
use loligo_types::ops::{ClientOp, OpError, OpReply, SubResult, Version};
use loligo_types::{Epoch, Pool, RecordAsk, WriteSetRecord};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What a replica needs to know about a write besides its transaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepCtx {
    /// The interval (as the primary counts it) the write belongs to.
    pub interval: Epoch,
    /// The primary's map epoch and the PG's acting set in it.
    pub epoch: Epoch,
    pub acting: Vec<i32>,
    /// The PG's last version before this write: replicas apply writes in
    /// this order, so equal `last_update`s mean equal logs.
    pub prev: Version,
    pub version: Version,
    /// On a replicated pool's client write: the object it changes, for the
    /// replica's Merkle tree (a member that takes only the PG's records
    /// ignores it).
    pub change: Option<tree::ObjChange>,
}

/// A PG's place in the map as its OSD last processed it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PgView {
    pub epoch: Epoch,
    pub interval: Epoch,
    pub acting: Vec<i32>,
    pub primary: i32,
    /// Interval of the write set on record (0: none).
    pub record_interval: Epoch,
    /// The latest boot epoch among the acting set's OSDs.
    pub acting_up_from: Epoch,
}

/// Why a replica did not take a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepError {
    /// It is in a newer interval: this primary's map is old; the client
    /// retries under the new map.
    Stale(String),
    /// It failed to apply the write or could not be reached.
    Failed(String),
    /// It answered, and holds no copy of what was asked at the version
    /// asked (a shard read): unlike `Failed`, asking again changes
    /// nothing while its copy stays as it is.
    Absent(String),
    /// As `Absent`, from a copy that never took the write at the version
    /// asked either (`Pg::never_took`): neither its object nor its
    /// rollback copy, whichever shard they hold, is at that version or
    /// past it. From a member of the recorded write set, this proves the
    /// write was never acknowledged.
    NeverTook(String),
    /// It answered, and its copy of the object asked for is damaged (its
    /// data fails its checksum): proof that this copy is no good one.
    Damaged(String),
}

/// Background copying an operator holds back with the map's flags
/// (`osd set norecover|nobackfill|norebalance`): a PG waits in
/// `recovery_wait` or `backfill_wait` with its slot given back; pushes and
/// chunks under way are finished, and an object a client op waits for
/// is still recovered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Holds {
    /// `norecover`: no log recovery.
    pub recovery: bool,
    /// `nobackfill`: no backfill.
    pub backfill: bool,
    /// `norebalance`: no backfill of a PG that lacks no copy (only
    /// misplaced ones).
    pub rebalance: bool,
    /// The PG joins a merge of its pool's PGs that is getting ready
    /// (`osdmap::PgMerge`): no write starts (they wait), and the
    /// primary, once clean, reports its version.
    pub merge: bool,
}

/// Inputs to a PG.
#[derive(Debug)]
pub enum Input {
    /// A map epoch: the PG's acting set and primary under it.
    Map {
        epoch: Epoch,
        /// CRUSH's set for the PG (`acting` differs while a pg_temp holds).
        up: Vec<i32>,
        acting: Vec<i32>,
        /// The newest boot epoch among the acting members: a member that
        /// booted after the interval began restarted inside it, so the
        /// interval has changed even if this OSD never saw the maps
        /// where it was down.
        acting_up_from: Epoch,
        primary: i32,
        pool: Pool,
        /// The PG's recorded write set in this map, if any.
        record: Option<WriteSetRecord>,
        /// The members of `record` that are up in this map.
        record_up: Vec<i32>,
        /// OSDs of `up` and `acting` whose devices are backfillfull or
        /// full: nothing is backfilled onto them.
        toofull: Vec<i32>,
        /// The background copying the cluster's flags hold back.
        holds: Holds,
        /// For an erasure-coded PG: OSDs up, in and with room that CRUSH's
        /// set does not name (a few), which a pg_temp may take for a while
        /// so that two members can swap positions
        /// (`erasure::ec_temp_step`).
        spares: Vec<i32>,
        /// For an erasure-coded pool: how its profile stripes objects
        /// into shards (shard i on the i-th OSD of `acting`).
        striper: Option<Arc<Striper>>,
        /// The PG's primary_temp in this map, in effect or not.
        primary_temp: Option<i32>,
        /// The epoch of the operator's last `pg mark-unfound-lost` of
        /// this PG (0: never; `OsdMap::unfound_lost`).
        unfound_lost: Epoch,
        now_ms: u64,
    },
    /// The monitors hold the write set this primary asked to record for
    /// `interval`.
    WriteSetRecorded {
        interval: Epoch,
    },
    /// A client op (answered with `Effect::Reply`).
    Op {
        op: ClientOp,
        token: u64,
        now_ms: u64,
    },
    /// List the PG's objects after `start` (exclusive), at most `limit`;
    /// answered with `Effect::ListReply`.
    List {
        start: Option<String>,
        limit: u32,
        token: u64,
        now_ms: u64,
    },
    /// An operator's command (answered with `Effect::CommandReply`).
    Command {
        cmd: loligo_types::scrub::PgCommand,
        token: u64,
    },
    /// The local store made transaction `tid` durable (or failed).
    LocalDone {
        tid: u64,
        result: Result<(), StoreError>,
    },
    /// A message from another copy of this PG (`msg.sender()`), answered
    /// with `Effect::Answer { token }`, at once or later.
    Peer {
        msg: PeerMsg,
        token: u64,
        now_ms: u64,
    },
    /// The answer to `Effect::Send { id }`, or why there is none (the
    /// member was unreachable, or refused: `PeerReply::into_result`
    /// turns a refusal into its `RepError`).
    Reply {
        id: u64,
        reply: Result<PeerReply, RepError>,
    },
    Tick {
        now_ms: u64,
    },
    /// The OSD granted this PG's ask `ask` for a recovery slot.
    Reserved {
        ask: u64,
    },
    /// The PG asked to go on (`Effect::Continue`).
    Continue,
    /// The read of `Effect::Read { tid }` ended: the results of its
    /// sub-ops, or why none.
    ReadDone {
        tid: u64,
        result: Result<Vec<SubResult>, OpError>,
    },
    /// A scrub slot of this OSD was given back while this PG waited for
    /// one (see `ScrubSlots::take_or_wait`): it may take it now.
    ScrubSlotFree {
        now_ms: u64,
    },
}

impl Input {
    /// Where the answer to this input goes, for inputs that are answered
    /// (a host sets it to its own waiter's token).
    pub fn token_mut(&mut self) -> Option<&mut u64> {
        match self {
            Input::Op { token, .. }
            | Input::List { token, .. }
            | Input::Peer { token, .. }
            | Input::Command { token, .. } => Some(token),
            _ => None,
        }
    }
}

/// Names listed, and whether the PG has more after them.
pub type ListResult = Result<(Vec<String>, bool), OpError>;

/// A PG's answer to an operator's command.
pub type CommandResult = Result<loligo_types::scrub::PgCommandReply, OpError>;

/// Effects for the host to perform (see [`route`]).
#[derive(Debug)]
pub enum Effect {
    /// The answer to client op `token`.
    Reply { token: u64, reply: OpReply },
    /// The answer to a `List`.
    ListReply { token: u64, result: ListResult },
    /// The answer to a `Command`.
    CommandReply { token: u64, result: CommandResult },
    /// Send `msg` to OSD `to`. The host reports `Input::Reply { id }`
    /// once: the answer, or why there is none. A peering query or a
    /// stray's question may go unanswered (the PG asks again on its
    /// own); every other message must be answered or failed, or what
    /// waits for it waits for good.
    Send { id: u64, to: i32, msg: PeerMsg },
    /// The answer to the peer message taken as `Input::Peer { token }`.
    Answer { token: u64, reply: PeerReply },
    /// Queue `txn` on the local store; report `LocalDone` once it is
    /// durable, or (`sync: false`) once it is applied: it is durable then
    /// once a transaction queued after it with `sync` is (the store
    /// commits in queue order, and a crash keeps a prefix).
    Apply {
        tid: u64,
        txn: Transaction,
        sync: bool,
    },
    /// Ask the monitors to make `osds` the acting set (a complete OSD
    /// first, so that it is primary).
    RequestPgTemp { osds: Vec<i32> },
    /// Erasure-coded: ask the monitors to make `osd` the PG's primary for
    /// now (`None`: CRUSH's primary again).
    RequestPrimaryTemp { osd: Option<i32> },
    /// Ask the monitors to record a write set of this PG's interval
    /// (with the map epoch this PG has, and the interval's acting set and
    /// primary); report `WriteSetRecorded` once they hold it.
    RecordWriteSet(RecordAsk),
    /// Ask the OSD for one of its recovery slots (higher `priority` first;
    /// among equals, first asked first); report `Reserved { ask }`.
    Reserve { ask: u64, priority: u64 },
    /// Give back the slot of `ask`, or withdraw `ask` if not granted yet.
    Release { ask: u64 },
    /// Hand the PG `Input::Continue` once what it has queued before is
    /// taken (work done a piece at a time, such as a scrub map).
    Continue,
    /// Run `job` against the local store off the PG's own thread and
    /// report `Input::ReadDone { tid }` (a large object's read: the PG
    /// serves other ops meanwhile; the object takes no write until then).
    Read { tid: u64, job: ReadJob },
}

impl Effect {
    /// The answer to peer message `token`: `ok` of the value, or the
    /// error as the wire says it.
    pub fn answer<T>(
        token: u64,
        result: Result<T, RepError>,
        ok: impl FnOnce(T) -> PeerReply,
    ) -> Effect {
        let reply = match result {
            Ok(v) => ok(v),
            Err(e) => PeerReply::from_error(e),
        };
        Effect::Answer { token, reply }
    }

    /// The acknowledgement of a write, push or chunk `token` (or why not).
    pub fn ack(token: u64, result: Result<(), RepError>) -> Effect {
        Effect::answer(token, result, |()| PeerReply::RepDone(Ok(())))
    }
}

/// A request to the monitors on a PG's behalf.
#[derive(Debug)]
pub enum MonAsk {
    /// `Effect::RequestPgTemp`.
    PgTemp(Vec<i32>),
    /// `Effect::RequestPrimaryTemp`.
    PrimaryTemp(Option<i32>),
    /// `Effect::RecordWriteSet`.
    Record(RecordAsk),
}

/// What a host does for a PG: the I/O its effects ask for. Each method
/// must only start the I/O; what comes of it goes back to the PG as an
/// input (`LocalDone`, `Reply`, `WriteSetRecorded`, `Reserved`).
pub trait Host {
    /// Answer client op `token`.
    fn reply(&mut self, token: u64, reply: OpReply);
    /// Answer listing `token`.
    fn list_reply(&mut self, token: u64, result: ListResult);
    /// Answer an operator's command.
    fn command_reply(&mut self, token: u64, result: CommandResult);
    /// Send `msg` to `to`; report `Input::Reply { id }` once (see
    /// `Effect::Send`).
    fn send(&mut self, id: u64, to: i32, msg: PeerMsg);
    /// Answer the peer message taken as `token`.
    fn answer(&mut self, token: u64, reply: PeerReply);
    /// Queue `txn` on the local store (see `Effect::Apply`).
    fn apply(&mut self, tid: u64, txn: Transaction, sync: bool);
    /// Ask the monitors.
    fn monitor(&mut self, ask: MonAsk);
    /// Ask for a recovery slot.
    fn reserve(&mut self, ask: u64, priority: u64);
    /// Give a recovery slot (or an ask) back.
    fn release(&mut self, ask: u64);
    /// Hand the PG `Input::Continue` (see `Effect::Continue`).
    fn continue_later(&mut self);
    /// Run `job` and report `Input::ReadDone { tid }` (see `Effect::Read`).
    fn read(&mut self, tid: u64, job: ReadJob);
}

/// Hand each effect to `host`, in order: the one place effects become
/// I/O.
pub fn route(fx: Vec<Effect>, host: &mut impl Host) {
    for e in fx {
        match e {
            Effect::Reply { token, reply } => host.reply(token, reply),
            Effect::ListReply { token, result } => host.list_reply(token, result),
            Effect::CommandReply { token, result } => host.command_reply(token, result),
            Effect::Send { id, to, msg } => host.send(id, to, msg),
            Effect::Answer { token, reply } => host.answer(token, reply),
            Effect::Apply { tid, txn, sync } => host.apply(tid, txn, sync),
            Effect::RequestPgTemp { osds } => host.monitor(MonAsk::PgTemp(osds)),
            Effect::RequestPrimaryTemp { osd } => host.monitor(MonAsk::PrimaryTemp(osd)),
            Effect::RecordWriteSet(ask) => host.monitor(MonAsk::Record(ask)),
            Effect::Reserve { ask, priority } => host.reserve(ask, priority),
            Effect::Release { ask } => host.release(ask),
            Effect::Continue => host.continue_later(),
            Effect::Read { tid, job } => host.read(tid, job),
        }
    }
}

/// What a PG sent a message for, kept until its answer comes: the answer
/// goes to the handler of that kind, with the operation's `tid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sent {
    pub tid: u64,
    pub to: i32,
    pub asked: Asked,
    /// The sender's interval when it sent it.
    pub interval: Epoch,
}

/// The kind of a message sent, as its answer is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asked {
    RepOp,
    Info { interval: Epoch },
    Log,
    Push,
    Scan,
    Chunk,
    GetLog,
    Pull,
    ReadShard { shard: usize },
    ScrubMap,
    Repair,
    ScrubReserve { round: u64 },
    ScrubRelease,
    StrayCheck,
    Lease,
}

impl Asked {
    /// The kind of `msg` (`None`: a message no PG sends).
    pub fn of(msg: &PeerMsg) -> Option<Asked> {
        Some(match msg {
            PeerMsg::Ping { .. } => return None,
            PeerMsg::RepOp { .. } => Asked::RepOp,
            PeerMsg::GetInfo { interval, .. } => Asked::Info {
                interval: *interval,
            },
            PeerMsg::Log { .. } => Asked::Log,
            PeerMsg::Push { .. } => Asked::Push,
            PeerMsg::Scan { .. } => Asked::Scan,
            PeerMsg::Chunk { .. } => Asked::Chunk,
            PeerMsg::GetLog { .. } => Asked::GetLog,
            PeerMsg::Pull { .. } => Asked::Pull,
            PeerMsg::ReadShard { shard, .. } => Asked::ReadShard { shard: *shard },
            PeerMsg::ScrubMap { .. } => Asked::ScrubMap,
            PeerMsg::Repair { .. } => Asked::Repair,
            PeerMsg::ScrubReserve { round, .. } => Asked::ScrubReserve { round: *round },
            PeerMsg::ScrubRelease { .. } => Asked::ScrubRelease,
            PeerMsg::StrayCheck { .. } => Asked::StrayCheck,
            PeerMsg::Lease { .. } => Asked::Lease,
        })
    }
}
