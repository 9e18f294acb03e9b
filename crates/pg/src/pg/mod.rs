//! One placement group as a sans-I/O state machine: inputs (map changes,
//! client ops, commit and replication completions, peer infos, ticks) in,
//! effects (replies, transactions to apply, messages to send) out. The
//! daemon shell performs the effects; a simulator can drive it alone.
//!
//! Invariants: a write is acknowledged only when every member of the
//! write set (the primary and the acting replicas whose log is complete)
//! has it durable; writes need at least `min_size` complete members;
//! writes to one object are applied in arrival order, one at a time; an
//! acting OSD whose log is behind is left out of the write set and never
//! counts toward `min_size` (recovery, the next layer, brings it back).
//! Before the first write of an interval the monitors record its write
//! set (`WriteSetRecord`); a primary serves nothing (reads included) until it has
//! heard from a member of the recorded write set, so a copy that missed
//! writes never answers for the PG.
//! It must never read the clock or do I/O other than reads of the store.

pub mod backfill;
mod erasure;
pub mod merkle;
pub mod record;
pub mod recovery;
mod replica;
pub mod tree;

pub use backfill::{Chunk, Cursor, Filter, Scan};
use bytes::Bytes;
pub use erasure::SHARD_KEY;
pub use recovery::{AuthLog, Push};
pub use replica::{replica_accepts, replica_step, ReplicaStep};
use replica::{Commit, CommitKind};

use crate::backend::{Backend, Erasure, Replicated, WritePlan};
use crate::exec::{self, ObjState, VERSION_ATTR};
use loligo_ec::stripe::Striper;
use loligo_store::{CollectionId, ObjectId, ObjectStore, StoreError, Transaction};
use loligo_types::ops::{ClientOp, OpError, OpReply, ReqId, SubOp, SubResult, Version};
use loligo_types::{Epoch, PgId, PgStat, PgState, Pool, RecordAsk, WriteSetRecord};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

/// PG log entries kept by default (older ones are trimmed in the same
/// transaction as each write; `Pg::log_entries_max` sets it per PG).
pub const LOG_ENTRIES_MAX: u64 = 1000;

/// Erasure-coded: most objects whose rollback copies one write removes.
const RB_TRIMS_PER_WRITE: usize = 32;
/// Ops waiting per PG (for activation or behind a write to their object).
pub const WAITING_MAX: usize = 4096;
/// How long peering waits for an info before asking again (ms).
pub const PEER_RETRY_MS: u64 = 3_000;
/// Record key of the PG info.
pub const INFO_KEY: &[u8] = b"info";

/// What a PG persists about itself (in the same transaction as writes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgInfo {
    /// Version of the newest write this copy has.
    pub last_update: Version,
    /// Epoch this PG last went active.
    pub last_epoch_started: Epoch,
    pub objects: u64,
    pub bytes: u64,
}

/// A member's answer to a peering query: its info, how many objects its
/// copy lacks, and whether it is backfilling (a copy whose head is the
/// authority's may still be recovering objects or be mid-backfill).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerInfo {
    pub info: PgInfo,
    pub missing: u64,
    pub backfill: bool,
    /// Erasure-coded: the shard this copy's objects hold when its OSD
    /// moved to another position and no backfill has started there
    /// (`backfill` is then true, yet the copy may be a complete copy of
    /// that shard: peering can put it back at the shard's position).
    pub moved_shard: Option<u8>,
    /// Erasure-coded: the shard this copy's objects hold, as its shard
    /// record says. The querier reads the answer against its own acting
    /// set (`Pg::against_acting`): the copy judged `backfill` and
    /// `moved_shard` by its own map, which may be newer (on an EC pool
    /// with OSDs declared lost, a copy out of the acting set in its map,
    /// at position 0 in the querier's, answered as complete and not moved,
    /// and the write set was recorded with two members holding shard 1). A
    /// copy outside the querier's acting set is read as a stray holding it
    /// (else a rollback may be decided before the stray asks, and the
    /// write's only other shard go unread).
    pub shard: Option<u8>,
}

impl From<PgInfo> for PeerInfo {
    /// A complete copy's info (nothing missing).
    fn from(info: PgInfo) -> PeerInfo {
        PeerInfo {
            info,
            missing: 0,
            backfill: false,
            moved_shard: None,
            shard: None,
        }
    }
}

/// A member's answer to the authoritative log, once merged: the objects
/// its copy lacks now (with the versions needed), and, when its log did
/// not overlap the authority's (or it was already backfilling), the
/// backfill cursor it resumes from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogAnswer {
    pub missing: Vec<(String, Version)>,
    pub backfill: Option<Cursor>,
    /// Erasure-coded: objects of `missing` whose needed write this copy
    /// never took (`Pg::never_took`). From a member of the recorded write
    /// set, that proves the write was never acknowledged.
    pub never_took: Vec<String>,
}

/// One PG log entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    pub version: Version,
    pub name: String,
    /// The object no longer exists after this entry.
    pub removed: bool,
    /// The client request that made it (for answering retries).
    pub reqid: Option<ReqId>,
    /// Set on an entry a primary wrote because no copy that was complete
    /// was coming back (`Pg::pull_what_is_left`).
    pub gave_up: Option<GaveUp>,
    /// The object just before this entry, as the primary that wrote it
    /// held it (Ceph's `prior_version`): what undoing the entry restores,
    /// known even once the log below it is trimmed.
    pub before: Before,
    /// The version of the entry just below this one in the log of the
    /// primary that wrote it (`None`: written before entries said so).
    /// Once that entry is trimmed, this is where the log joins another
    /// copy's (Ceph's log tail): a copy whose log begins past another's
    /// head still merges with it if its oldest entry was written on top
    /// of that head.
    pub prev: Option<Version>,
}

/// What a log entry's object was just before the entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Before {
    /// Not recorded: an entry stored by a format from before this field,
    /// one that names no object, or an object no op of ours wrote. The
    /// log below the entry is the only witness.
    #[default]
    Unknown,
    /// The object did not exist.
    Absent,
    /// The object was at this version.
    At(Version),
}

impl Before {
    /// What an object in state `st` is, as an entry's `before`.
    pub fn of(st: &exec::ObjState) -> Before {
        match (st.exists, st.version.v) {
            (false, _) => Before::Absent,
            (true, 0) => Before::Unknown,
            (true, _) => Before::At(st.version),
        }
    }

    /// As `state_before` answers: unknown (`None`), absent (`Some(None)`)
    /// or at a version.
    pub fn known(self) -> Option<Option<Version>> {
        match self {
            Before::Unknown => None,
            Before::Absent => Some(None),
            Before::At(v) => Some(Some(v)),
        }
    }
}

/// What a log entry that gave something up did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GaveUp {
    /// The entry's object was rolled back to the copy at this version
    /// (zero: removed). Its writes after that version and before this
    /// entry are undone, so their request ids no longer answer retries.
    Object(Version),
    /// The primary's copy, mid-backfill, was taken as it was (its log has
    /// every write; objects the log no longer names may differ from other
    /// copies'): every copy whose log does not reach this entry is
    /// backfilled rather than merged. The entry names no object (its
    /// name is empty).
    Copy,
}

impl LogEntry {
    /// The entry of a copy taken as it was (`GaveUp::Copy`).
    pub fn is_reset(&self) -> bool {
        self.gave_up == Some(GaveUp::Copy)
    }
}

/// Record key of the log entry for version counter `v`.
pub fn log_key(v: u64) -> Vec<u8> {
    let mut k = b"log/".to_vec();
    k.extend_from_slice(&v.to_be_bytes());
    k
}

/// The version counter a log record key names (`None`: not a log key).
pub fn log_counter(k: &[u8]) -> Option<u64> {
    let b: [u8; 8] = k.strip_prefix(b"log/")?.try_into().ok()?;
    Some(u64::from_be_bytes(b))
}

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

/// The info record a store holds for `coll` (`None`: no record; an
/// error: the record or the store cannot be read, never read as a
/// default; see [`repair_records`]).
pub fn stored_info(s: &dyn ObjectStore, coll: CollectionId) -> Result<Option<PgInfo>, String> {
    match s.record(coll, INFO_KEY) {
        Ok(Some(b)) => record::decode_info(&b).map(Some).map_err(|e| e.to_string()),
        Ok(None) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// A copy whose info record or any log entry cannot be read starts over
/// as a backfill target: its info goes back to none (it claims no write),
/// its backfill cursor to the start, its log entries go (the backfill
/// gives it the primary's), and its Merkle tree is rebuilt from its
/// objects (log entries carry the tree's newest leaves). Peering then never
/// takes it as a source of the log and the primary copies every object
/// that differs (its objects stay, compared by version). Without this, a
/// damaged info read as none while the copy's log and objects went on (a
/// copy that claims less than it holds, whose next writes would reuse
/// versions), and a damaged log entry was skipped when the copy looked
/// for duplicate requests. Returns what was wrong (`None`: every record
/// reads, or there is none).
pub fn repair_records(s: &dyn ObjectStore, coll: CollectionId) -> Result<Option<String>, String> {
    let mut damage = None;
    if let Some(b) = s.record(coll, INFO_KEY).map_err(|e| e.to_string())? {
        if let Err(e) = record::decode_info(&b) {
            damage = Some(e.to_string());
        }
    }
    let logs = recovery::records_with(s, coll, b"log/", None)?;
    for (k, v) in &logs {
        if damage.is_some() {
            break;
        }
        if k.len() != log_key(0).len() {
            damage = Some(format!("log record key {k:?} is malformed"));
        } else if let Err(e) = record::decode_log(v) {
            damage = Some(format!("{e} (key {k:?})"));
        }
    }
    let Some(d) = damage else {
        return Ok(None);
    };
    let mut t = Transaction::new();
    t.set_record(coll, INFO_KEY, record::encode_info(&PgInfo::default()));
    t.set_record(
        coll,
        backfill::BACKFILL_KEY,
        record::encode_cursor(&Cursor::Start),
    );
    for (k, _) in &logs {
        t.rm_record(coll, k);
    }
    t.rm_record(coll, tree::TREE_KEY);
    s.apply(t).map_err(|e| e.to_string())?;
    Ok(Some(d))
}

/// The parts of a map that decide whether a PG's interval changed.
struct MapView {
    epoch: Epoch,
    acting: Vec<i32>,
    primary: i32,
    /// An acting member booted after the current interval began.
    restarted: bool,
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
    Op {
        op: ClientOp,
        token: u64,
        now_ms: u64,
    },
    /// The local store made transaction `tid` durable (or failed).
    LocalDone {
        tid: u64,
        result: Result<(), StoreError>,
    },
    /// Replica `from` made `tid` durable (or refused / was unreachable).
    RepDone {
        tid: u64,
        from: i32,
        result: Result<(), RepError>,
    },
    /// A member's info for the interval that started at `interval`
    /// (`None`: unreachable or no copy of the PG).
    Info {
        from: i32,
        interval: Epoch,
        info: Option<PeerInfo>,
    },
    /// The authoritative log from primary `from`: merge it into this copy
    /// (answered with `LogReply` once durable).
    Log {
        from: i32,
        ctx: RepCtx,
        log: AuthLog,
        token: u64,
        now_ms: u64,
    },
    /// An object this copy lacks, whole, from primary `from` (answered
    /// with `RepReply` once durable).
    Push {
        from: i32,
        ctx: RepCtx,
        push: Push,
        token: u64,
        now_ms: u64,
    },
    /// Member `from`'s answer to the log sent as `tid`.
    LogDone {
        tid: u64,
        from: i32,
        result: Result<LogAnswer, RepError>,
    },
    /// Member `from` made the push sent as `tid` durable (or not).
    PushDone {
        tid: u64,
        from: i32,
        result: Result<(), RepError>,
    },
    /// A backfilling copy's objects after `after` up to `upto`, at most
    /// `limit`, for primary `from` (answered with `ScanReply`).
    Scan {
        from: i32,
        ctx: RepCtx,
        after: Cursor,
        upto: Cursor,
        limit: u32,
        filter: Filter,
        token: u64,
        now_ms: u64,
    },
    /// A chunk of backfill from primary `from` (answered with `RepReply`
    /// once durable).
    Chunk {
        from: i32,
        ctx: RepCtx,
        chunk: Chunk,
        token: u64,
        now_ms: u64,
    },
    /// A primary of an erasure-coded PG asks for extents of this copy's
    /// shard of `name`, which must be at `version` (answered with
    /// `ShardReadReply`).
    ShardRead {
        from: i32,
        epoch: Epoch,
        name: String,
        extents: Vec<(u64, u64)>,
        version: Version,
        shard: usize,
        token: u64,
    },
    /// Member `from`'s answer to the read of shard `shard` sent as
    /// `tid`: the bytes of each extent asked for. (One gather may ask one
    /// OSD for several shards, and the answers may come in any order.)
    ShardReadDone {
        tid: u64,
        from: i32,
        shard: usize,
        result: Result<Vec<Bytes>, RepError>,
    },
    /// Member `from`'s answer to the scan sent as `tid`.
    ScanDone {
        tid: u64,
        from: i32,
        result: Result<Scan, RepError>,
    },
    /// Member `from` made the chunk sent as `tid` durable (or not).
    ChunkDone {
        tid: u64,
        from: i32,
        result: Result<(), RepError>,
    },
    /// A write from primary `from` to this OSD's copy; answered with
    /// `RepReply` once durable here (or refused).
    RepOp {
        from: i32,
        ctx: RepCtx,
        txn: Transaction,
        token: u64,
        now_ms: u64,
    },
    /// List the PG's objects after `start` (exclusive), at most `limit`;
    /// answered with `ListReply`.
    List {
        start: Option<String>,
        limit: u32,
        token: u64,
        now_ms: u64,
    },
    /// A primary peering the interval that started at `interval` (its map
    /// at `epoch`) asks for this copy's info. It is answered only once
    /// this PG has that map: from then on this copy refuses (and never
    /// acknowledges) writes from any earlier interval, so nothing the new
    /// primary was told can grow behind its back.
    Query {
        from: i32,
        epoch: Epoch,
        token: u64,
        now_ms: u64,
    },
    Tick {
        now_ms: u64,
    },
    /// The OSD granted this PG's ask `ask` for a recovery slot.
    Reserved {
        ask: u64,
    },
    /// A primary that is behind asks this complete member for its log
    /// (answered with `OwnLogReply`).
    GetLog {
        from: i32,
        ctx: RepCtx,
        token: u64,
        now_ms: u64,
    },
    /// Member `from`'s log, asked for as `tid` (or why not).
    GetLogDone {
        tid: u64,
        from: i32,
        result: Result<AuthLog, RepError>,
    },
    /// A primary that is behind asks this complete member for an object
    /// (answered with `PullReply`), which it needs at version `need`.
    Pull {
        from: i32,
        ctx: RepCtx,
        name: String,
        need: Version,
        token: u64,
        now_ms: u64,
    },
    /// Member `from`'s copy of the object pulled as `tid` (or why not).
    PullDone {
        tid: u64,
        from: i32,
        result: Result<Push, RepError>,
    },
    /// A copy outside the acting set asks this primary whether the PG is
    /// clean without it (answered with `CleanReply`).
    StrayCheck {
        from: i32,
        epoch: Epoch,
        /// The EC shard the stray's copy holds: the primary may read it
        /// to recover objects no member has enough shards of.
        shard: Option<u8>,
        token: u64,
    },
    /// The primary's answer to this stray copy's `AskClean`: the epoch at
    /// which it found the PG clean without this copy (`None`: not clean,
    /// not known, or unreachable).
    StrayAnswer {
        from: i32,
        clean: Option<Epoch>,
    },
}

/// Names listed, and whether the PG has more after them.
pub type ListResult = Result<(Vec<String>, bool), OpError>;

/// Effects for the shell to perform.
#[derive(Debug)]
pub enum Effect {
    Reply {
        token: u64,
        reply: OpReply,
    },
    /// The answer to a replica write (`RepOp`).
    RepReply {
        token: u64,
        result: Result<(), RepError>,
    },
    /// The answer to a `List`.
    ListReply {
        token: u64,
        result: ListResult,
    },
    /// Queue `txn` on the local store; report `LocalDone` once it is
    /// durable, or (`sync: false`) once it is applied: it is durable then
    /// once a transaction queued after it with `sync` is (the store
    /// commits in queue order, and a crash keeps a prefix).
    Apply {
        tid: u64,
        txn: Transaction,
        sync: bool,
    },
    /// Send `txn` to replica `to`; report `RepDone`.
    Replicate {
        tid: u64,
        to: i32,
        ctx: RepCtx,
        txn: Transaction,
    },
    /// Ask `to` for its info (it answers once its map reaches `epoch`);
    /// report `Info`.
    QueryInfo {
        to: i32,
        interval: Epoch,
        epoch: Epoch,
    },
    /// The answer to a peering query (`Query`): this copy's info (`None`:
    /// no copy), or why there is none (its map did not reach the query's
    /// epoch in time).
    InfoReply {
        token: u64,
        result: Result<Option<PeerInfo>, String>,
    },
    /// Send the authoritative log to member `to`; report `LogDone`.
    SendLog {
        tid: u64,
        to: i32,
        ctx: RepCtx,
        log: AuthLog,
    },
    /// Send an object to member `to`; report `PushDone`.
    Push {
        tid: u64,
        to: i32,
        ctx: RepCtx,
        push: Push,
    },
    /// The answer to a `Log`.
    LogReply {
        token: u64,
        result: Result<LogAnswer, RepError>,
    },
    /// Ask backfill target `to` for its objects in (after, upto]; report
    /// `ScanDone`.
    SendScan {
        tid: u64,
        to: i32,
        ctx: RepCtx,
        after: Cursor,
        upto: Cursor,
        limit: u32,
        filter: Filter,
    },
    /// Ask member `to` for extents of its shard of `name` at `version`;
    /// report `ShardReadDone`.
    ReadShard {
        tid: u64,
        to: i32,
        epoch: Epoch,
        name: String,
        extents: Vec<(u64, u64)>,
        version: Version,
        shard: usize,
    },
    /// The answer to a `ShardRead`.
    ShardReadReply {
        token: u64,
        result: Result<Vec<Bytes>, RepError>,
    },
    /// The answer to a `Scan`.
    ScanReply {
        token: u64,
        result: Result<Scan, RepError>,
    },
    /// Send a chunk of backfill to `to`; report `ChunkDone`.
    SendChunk {
        tid: u64,
        to: i32,
        ctx: RepCtx,
        chunk: Chunk,
    },
    /// Ask the monitors to make `osds` the acting set (a complete OSD
    /// first, so that it is primary).
    RequestPgTemp {
        osds: Vec<i32>,
    },
    /// Erasure-coded: ask the monitors to make `osd` the PG's primary for
    /// now (`None`: CRUSH's primary again).
    RequestPrimaryTemp {
        osd: Option<i32>,
    },
    /// Ask the monitors to record a write set of this PG's interval
    /// (with the map epoch this PG has, and the interval's acting set and
    /// primary); report `WriteSetRecorded` once they hold it.
    RecordWriteSet(RecordAsk),
    /// Ask the OSD for one of its recovery slots (higher `priority` first;
    /// among equals, first asked first); report `Reserved { ask }`.
    Reserve {
        ask: u64,
        priority: u64,
    },
    /// Give back the slot of `ask`, or withdraw `ask` if not granted yet.
    Release {
        ask: u64,
    },
    /// Ask complete member `to` for its log; report `GetLogDone`.
    FetchLog {
        tid: u64,
        to: i32,
        ctx: RepCtx,
    },
    /// The answer to a `GetLog`.
    OwnLogReply {
        token: u64,
        result: Result<AuthLog, RepError>,
    },
    /// Ask complete member `to` for object `name`, needed at version
    /// `need`; report `PullDone`.
    Pull {
        tid: u64,
        to: i32,
        ctx: RepCtx,
        name: String,
        need: Version,
    },
    /// The answer to a `Pull`.
    PullReply {
        token: u64,
        result: Result<Push, RepError>,
    },
    /// Ask primary `to` whether the PG is clean without this copy (sent
    /// with this copy's map epoch); report `StrayAnswer`.
    AskClean {
        to: i32,
        epoch: Epoch,
        shard: Option<u8>,
    },
    /// The answer to a `StrayCheck`.
    CleanReply {
        token: u64,
        clean: Option<Epoch>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    /// Not in the acting set.
    Stray,
    Replica,
    /// Waiting for members' infos (`None`: the member has no copy).
    Peering {
        want: BTreeSet<i32>,
        infos: BTreeMap<i32, Option<PeerInfo>>,
    },
    /// Peered; serves reads while the monitors record the write set and
    /// recovering members merge the authoritative log.
    Activating {
        write_set: Vec<i32>,
        recorded: bool,
    },
    /// Primary with its write set (itself first): the members that take
    /// every write, recovering ones included (the record lists only the
    /// complete ones).
    Primary {
        write_set: Vec<i32>,
    },
    /// This primary's log is behind a complete member's (`from`) but
    /// overlaps it: it merges that log (`log_tid` in flight; 0 once
    /// merged) and pulls the objects it lacks (`pulls` in flight), then
    /// activates with the infos peering gathered.
    Pulling {
        from: i32,
        /// The complete members (`from` first): a hand-over puts them first.
        complete: Vec<i32>,
        infos: BTreeMap<i32, Option<PeerInfo>>,
        log_tid: u64,
        pulls: BTreeMap<u64, String>,
    },
    /// This primary's log is behind: it asked for a pg_temp.
    Behind,
    /// No member of the recorded write set `osds` can be heard from:
    /// nothing is served until one returns.
    Down {
        osds: Vec<i32>,
    },
}

struct Pending {
    op: ClientOp,
    token: u64,
    deadline_ms: u64,
}

/// Whom a write is for: a client op (answered once every member has
/// it), or this primary giving an object up (answered to nobody).
enum Writer {
    Client(Pending),
    /// Giving the object up: removed (version zero) or rolled back to
    /// this version.
    GiveUp(String, Version),
}

impl Writer {
    fn name(&self) -> &str {
        match self {
            Writer::Client(p) => &p.op.name,
            Writer::GiveUp(name, _) => name,
        }
    }

    fn reqid(&self) -> Option<ReqId> {
        match self {
            Writer::Client(p) => p.op.reqid,
            Writer::GiveUp(..) => None,
        }
    }

    fn token(&self) -> Option<u64> {
        match self {
            Writer::Client(p) => Some(p.token),
            Writer::GiveUp(..) => None,
        }
    }

    /// A give-up removes the object (zero) or rolls it back.
    fn gave_up(&self) -> Option<GaveUp> {
        match self {
            Writer::Client(_) => None,
            Writer::GiveUp(_, to) => Some(GaveUp::Object(*to)),
        }
    }
}

/// A listing waiting for the PG to serve.
struct PendingList {
    start: Option<String>,
    limit: u32,
    token: u64,
    deadline_ms: u64,
}

/// Most names one listing returns.
pub const LIST_NAMES_MAX: u32 = 10_000;

/// A peering query waiting for this PG's map to reach its epoch.
struct PendingQuery {
    epoch: Epoch,
    token: u64,
    deadline_ms: u64,
}

/// A primary's recovery of its members in one interval.
#[derive(Default)]
struct Recovery {
    /// Members the authoritative log goes to, with the tid of the send in
    /// flight (0: to be sent, at `log_retry_ms`).
    merging: BTreeMap<i32, u64>,
    log_retry_ms: u64,
    /// Per member, the objects its copy lacks (and the versions needed).
    missing: BTreeMap<i32, BTreeMap<String, Version>>,
    /// Per member, the objects of `missing` whose needed write its copy
    /// never took (`LogAnswer::never_took`, as of its last answer).
    never_took: BTreeMap<i32, BTreeSet<String>>,
    /// Pushes in flight: tid -> (object, members yet to answer).
    pushing: BTreeMap<u64, (String, BTreeSet<i32>)>,
    /// Objects whose push failed, and when to try again.
    retry: BTreeMap<String, u64>,
    /// Objects copied so far (for progress and stats).
    pushed: u64,
    /// The write set this interval last asked the monitors to record.
    record_asked: Option<Vec<i32>>,
    /// The pg_temp this interval last asked the monitors for.
    temp_asked: Option<Vec<i32>>,
    /// Members being backfilled.
    backfill: BTreeMap<i32, Backfill>,
    /// Writes waiting for a backfill chunk that covers their object.
    bf_blocked: Vec<Pending>,
    /// This PG's recovery slot on its OSD.
    slot: Slot,
    /// No push or chunk starts before this (the recovery sleep).
    next_copy_ms: u64,
    /// An erasure-coded primary that is behind peers again at this time.
    peer_again_ms: u64,
    /// Erasure-coded pulling: per object, the members asked so far.
    pull_tries: BTreeMap<String, usize>,
    /// Erasure-coded pulling: objects a pull or shard read of failed for
    /// another reason than a copy lacking them (never given up).
    pull_doubt: BTreeSet<String>,
    /// Erasure-coded pulling: per object, the OSDs whose pull answers said
    /// they never took the write this copy needs (`RepError::NeverTook`).
    pull_never_took: BTreeMap<String, BTreeSet<i32>>,
    /// Erasure-coded: pulls of an object's xattrs at the version a
    /// rollback writes back, which this primary's copy never held
    /// (`Pg::ec_revert`): by tid, the object, that version, and the OSDs
    /// still to ask after this one.
    revert_pulls: BTreeMap<u64, (String, Version, Vec<i32>)>,
    /// This interval asked to clear the primary_temp.
    primary_temp_cleared: bool,
    /// Erasure-coded: stray copies that asked, with the shard each holds
    /// (recovery may read them).
    strays: BTreeMap<i32, usize>,
    /// Erasure-coded, from the last peering: acting members (this one
    /// included) whose OSD moved to another position and whose copy is
    /// complete at the head for the shard it holds, with that shard.
    moved_complete: BTreeMap<i32, usize>,
    /// Likewise, those at or past the head, complete or not, and
    /// mid-backfill ones by the shard their shard record names (with the
    /// record short of k, the history to go on from may be one of them).
    moved_at_head: BTreeMap<i32, usize>,
    /// Erasure-coded: acting members whose OSDs moved, kept out of the
    /// write set (and read as strays) until k others are whole at their
    /// positions (`Pg::moved_to_wait`).
    waiting_moved: BTreeSet<i32>,
    /// Their wait is over: new writes wait too, and the PG peers again
    /// once those in flight are done (`Pg::waiting_moved_done`).
    waiting_moved_drain: bool,
    /// Erasure-coded, from the last peering: strays whose copies hold no
    /// object and lack nothing, complete at their heads (an empty copy is
    /// every shard's at once).
    empty_strays: BTreeSet<i32>,
    /// Erasure-coded, from the last peering: with the record at k members
    /// or more, every member it has left answered, and fewer than k of
    /// their copies are whole (`Pg::may_go_on`).
    record_few_whole: bool,
    /// Replicated, pulling what is left (`Pg::pull_what_is_left`): whom
    /// to ask for what.
    lost: Option<LostPulls>,
    /// That failed on this copy's store: peer again at `peer_again_ms`.
    lost_retry: bool,
}

/// A replicated primary pulling what its copy lacks when no copy is
/// complete at the head and none that could be is coming back
/// (`Pg::pull_what_is_left`): any up copy may hold an object, and what
/// none holds at the version the log names is rolled back to the newest
/// older copy found, or removed.
struct LostPulls {
    /// Up copies to ask, newest logs first.
    sources: Vec<i32>,
    /// Per object: how many sources were asked, and the newest copy older
    /// than the log's version, and on its history, one of them answered
    /// with.
    tried: BTreeMap<String, (usize, Option<Push>)>,
    /// The versions the log names for each object it does not remove,
    /// and the version counter its entries start after: a copy at a
    /// version the log does not name, yet above that tail, is from a
    /// divergent write (never acknowledged) and is never rolled back to.
    history: BTreeMap<String, BTreeSet<Version>>,
    /// The versions at which the log removes each object: a copy older
    /// than a removal the log holds before the lost version is not rolled
    /// back to (that removal may have been acknowledged; the object is
    /// removed instead).
    removals: BTreeMap<String, BTreeSet<Version>>,
    /// What each logged write found (`LogEntry::before`): a lost write
    /// of an object that was absent rolls back to its removal, and one
    /// that found version v to a copy no newer than v, whatever the log's
    /// tail lets through.
    befores: BTreeMap<(String, Version), Before>,
    tail: u64,
}

impl LostPulls {
    /// Whether a copy of `name` at `v` is on the PG's history.
    fn on_history(&self, name: &str, v: Version) -> bool {
        v.v <= self.tail || self.history.get(name).is_some_and(|h| h.contains(&v))
    }
}

/// A primary's hold on one of its OSD's recovery slots: pushes and
/// backfill chunks that no client op waits for run only while it is held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Slot {
    #[default]
    None,
    Asked(u64),
    Held(u64),
}

/// A primary's backfill of one member.
struct Backfill {
    /// The member's cursor as it last made it durable.
    done: Cursor,
    step: BfStep,
    /// When to start again after a failure.
    retry_ms: u64,
    /// Which leaves of this primary's tree the backfill must scan.
    leaves: Leaves,
    /// What it cost so far (logged when it ends).
    cost: BfCost,
}

/// What one backfill cost.
#[derive(Default)]
struct BfCost {
    /// Tree nodes the target sent.
    nodes: u64,
    /// Objects the target's scans listed.
    listed: u64,
    /// Objects copied or removed.
    copied: u64,
    chunks: u64,
}

/// What a backfill scans, from comparing the primary's Merkle tree with
/// the target's.
enum Leaves {
    /// Not compared yet. `dirty`: leaves of writes that reached the
    /// target as log entries only meanwhile (its objects there fell
    /// behind the primary's, whatever the comparison finds).
    Unknown { dirty: BTreeSet<u32> },
    /// Every object (a side keeps no tree, or not of the same shape).
    All,
    /// Only these leaves: where the trees differed, and where writes
    /// went as log entries only since.
    Some(BTreeSet<u32>),
}

impl Leaves {
    /// A write to an object of leaf `i` reached the target as its log
    /// entry only; whether the leaf is new to the set to scan.
    fn dirty(&mut self, i: u32) -> bool {
        match self {
            Leaves::Unknown { dirty } => {
                dirty.insert(i);
                false
            }
            Leaves::Some(set) => set.insert(i),
            Leaves::All => false,
        }
    }

    /// The scan filter for the leaves from the one `after` lies in to
    /// the one `upto` lies in.
    fn filter(&self, leaves: u32, after: &Cursor, upto: &Cursor) -> Filter {
        let Leaves::Some(set) = self else {
            return Filter::All;
        };
        let leaf = |c: &Cursor, or: u32| match c {
            Cursor::At(o) => merkle::Tree::leaf_of_hash(leaves, o.hash),
            _ => or,
        };
        let (first, last) = (leaf(after, 0), leaf(upto, u32::MAX));
        if first > last {
            return Filter::Leaves {
                leaves,
                ranges: Vec::new(),
            };
        }
        let ranges = merkle::leaf_ranges(set.range(first..=last).copied());
        if ranges.len() > backfill::RANGES_MAX {
            return Filter::All;
        }
        Filter::Leaves { leaves, ranges }
    }
}

enum BfStep {
    /// Next: scan the member after `done`.
    Idle,
    /// The member's listing after `done` up to `upto` is on its way
    /// (`mine`: this copy's, made to find `upto`).
    Scanning {
        tid: u64,
        upto: Cursor,
        mine: Option<Listed>,
    },
    /// The member's Merkle tree nodes are on their way: its root first
    /// (`descent` none yet), then the descendants of the nodes that
    /// differ, a few levels down per step.
    Comparing {
        tid: u64,
        descent: Option<merkle::Descent>,
    },
    /// The member's listing is here; the chunk is built once no write
    /// to its range is in flight.
    Scanned { theirs: Scan, mine: Option<Listed> },
    /// Erasure-coded: the chunk is built, and the target's shards of
    /// the objects named in `waiting` are being rebuilt (writes to the
    /// range wait, as for a chunk on its way).
    Rebuilding {
        chunk: Chunk,
        waiting: BTreeSet<String>,
    },
    /// Chunks on their way, oldest first (at most `CHUNKS_IN_FLIGHT`):
    /// the first starts at `done`, each next one where the one before
    /// ends. Writes to (done, last chunk's end] wait. A chunk whose answer
    /// was lost may have been applied: until the member answers, its
    /// cursor may be anywhere up to the last chunk's end, so only those
    /// same chunks are ever sent again, in order (a member that has one
    /// answers at once). `ahead`: the scan of what follows the last
    /// chunk, made meanwhile (a pipeline: the member lists the next range
    /// while it commits the chunks before it).
    Copying { flights: Vec<Flight>, ahead: Ahead },
}

/// This copy's objects in a backfill scan's range (after, upto], listed
/// to find `upto`, as of store generation `gen` (see `Pg::store_gen`):
/// the chunk's plan uses them instead of listing again if nothing was
/// applied since.
struct Listed {
    gen: u64,
    objects: Vec<(ObjectId, Version)>,
}

/// A backfill chunk on its way (`tid` 0: to be sent again at `retry_ms`
/// once every chunk before it is answered).
struct Flight {
    tid: u64,
    chunk: Chunk,
}

/// The scan of the range after a backfill's last chunk on its way.
#[derive(Default)]
enum Ahead {
    /// None yet (or the last chunk ends the backfill).
    #[default]
    None,
    /// Asked; the member's listing up to `upto` is on its way.
    Scanning {
        tid: u64,
        upto: Cursor,
        mine: Option<Listed>,
    },
    /// The member's listing is here.
    Scanned { theirs: Scan, mine: Option<Listed> },
    /// The member refused (it may not have queued the chunk before it
    /// yet): asked again once a chunk is answered.
    Refused,
}

/// Backfill chunks a primary keeps on their way to one target (a
/// replicated pool's; an erasure-coded primary rebuilds each chunk's
/// shards first and sends one at a time).
pub const CHUNKS_IN_FLIGHT: usize = 2;

impl Recovery {
    fn lacks(&self, name: &str) -> bool {
        self.missing.values().any(|m| m.contains_key(name))
    }

    /// No member merging its log, lacking an object or being backfilled.
    fn nothing_left(&self) -> bool {
        self.merging.is_empty() && self.missing.is_empty() && self.backfill.is_empty()
    }

    /// Objects some member lacks, counted once per member (a backfill
    /// target's share estimated from its cursor's place in the hash
    /// space).
    fn lacking(&self, objects: u64) -> u64 {
        let bf: f64 = self
            .backfill
            .values()
            .map(|b| (objects as f64 * b.done.left()).ceil())
            .sum();
        self.missing.values().map(|m| m.len() as u64).sum::<u64>() + bf as u64
    }

    /// Whether a write to `o` must wait: a backfill chunk covering it is
    /// on its way.
    fn blocks(&self, o: &ObjectId) -> bool {
        self.backfill.values().any(|b| match &b.step {
            BfStep::Rebuilding { chunk, .. } => !b.done.covers(o) && chunk.end.covers(o),
            BfStep::Copying { flights, .. } => {
                !b.done.covers(o) && flights.last().is_some_and(|f| f.chunk.end.covers(o))
            }
            _ => false,
        })
    }
}

/// Pushes in flight per PG.
pub const RECOVERY_PUSHES_MAX: usize = 4;
/// How long a failed push, scan or backfill chunk waits before it is
/// tried again (ms).
pub const RECOVERY_RETRY_MS: u64 = 1_000;

/// Stand-in OSD ids for the holes of CRUSH's set where a peering decision
/// asks what happens once they are filled (no OSD has such an id: the
/// map holds none of `loligo_types::osdmap::OSDS_MAX` or more).
const NEWCOMER_BASE: i32 = loligo_types::osdmap::OSDS_MAX;

/// How long a replica write whose message or answer failed waits before it
/// is sent again (ms).
pub const REP_RETRY_MS: u64 = 250;

/// Failed sends of one replica write to one member after which each
/// further failure is logged as a warning.
const REP_TRIES_WARN: u32 = 8;

struct InFlight {
    /// The client op's reply token (`None`: the primary's own write).
    token: Option<u64>,
    reqid: Option<ReqId>,
    name: String,
    waiting: BTreeSet<i32>,
    version: Version,
    results: Vec<loligo_types::ops::SubResult>,
    failed: Option<RepError>,
    /// What was sent, to resend to a member whose answer failed.
    ctx: RepCtx,
    sent: BTreeMap<i32, Transaction>,
    /// Members to send to again, with when (ms) and how many sends failed.
    resend: BTreeMap<i32, (u64, u32)>,
}

/// The PG state machine.
pub struct Pg {
    pub id: PgId,
    whoami: i32,
    coll: CollectionId,
    pool: Option<Pool>,
    epoch: Epoch,
    interval: Epoch,
    acting: Vec<i32>,
    primary: i32,
    role: Role,
    info: PgInfo,
    next_tid: u64,
    /// Bumped whenever this PG queues a store transaction and whenever
    /// one completes: a listing of its objects made at one value is
    /// still the store's while the value stays.
    store_gen: u64,
    inflight: BTreeMap<u64, InFlight>,
    /// Objects with a write in flight, and the ops queued behind it.
    busy: BTreeMap<String, VecDeque<Pending>>,
    /// Ops waiting for the PG to accept writes.
    waiting: VecDeque<Pending>,
    /// How long an op may wait (ms).
    pub op_timeout_ms: u64,
    /// The pool type's data layout.
    backend: Box<dyn Backend>,
    /// For an erasure-coded pool: its striping.
    ec: Option<Arc<Striper>>,
    /// Client ops of an erasure-coded pool waiting for shard reads.
    gathers: BTreeMap<u64, erasure::Gather>,
    /// Erasure-coded: this copy holds another shard than its position in
    /// the current map (it must be backfilled before it counts).
    moved: bool,
    /// Erasure-coded: the shard this copy holds, as its shard record
    /// says (if known).
    held_shard: Option<u8>,
    /// `moved` was read with nothing of this copy in flight since the
    /// last map (see `on_settled`).
    moved_fresh: bool,
    /// Erasure-coded primary: objects whose newest write of this interval
    /// left rollback copies on the shards, with that write's version and
    /// whether the whole write set has it (then the copies are no longer
    /// needed: peering never rolls it back, and the next write removes
    /// them).
    rb_live: BTreeMap<String, (Version, bool)>,
    /// Erasure-coded rebuilds finished since the shell last took them:
    /// shards rebuilt, the plans' theory bytes, the bytes fetched.
    rebuilt: (u64, u64, u64),
    /// The PG's primary_temp in the current map.
    primary_temp: Option<i32>,
    /// Request ids of the writes in the PG log, with their versions and
    /// whether the whole write set has them (oldest first in
    /// `recent_order`; at most `LOG_ENTRIES_MAX`).
    recent: HashMap<ReqId, (Version, bool)>,
    recent_order: VecDeque<ReqId>,
    now_ms: u64,
    /// The recorded write set and its members that are up, as of `epoch`.
    record: Option<WriteSetRecord>,
    record_up: Vec<i32>,
    /// The epoch of the operator's last `pg mark-unfound-lost` (0: none).
    unfound_lost: Epoch,
    /// Erasure-coded, as primary: objects whose last rebuild or pull
    /// found fewer than k shards, every other up copy saying it lacks its
    /// shard (no I/O error or lost message in doubt), and that wait
    /// (`PgStat::unfound`). Kept across this primary's peerings (a PG
    /// handed back and forth still shows them); a gather of the object
    /// or its give-up takes it out, and so does no longer leading.
    unfound_waiting: BTreeSet<String>,
    /// When peering last asked members for their infos.
    peer_asked_ms: u64,
    /// Writes from a primary to this copy.
    rep: replica::Lane,
    /// Listings waiting for the PG to serve.
    lists: VecDeque<PendingList>,
    /// Peering queries waiting for a newer map.
    queries: Vec<PendingQuery>,
    /// The newest map epoch of a peering query this copy answered: a
    /// message sent under an older epoch belongs to an earlier interval
    /// (a primary sends queries only while peering, before it writes),
    /// and taking it would change this copy behind the answer a new
    /// primary peered with (on an EC pool, an old interval's write taken
    /// after the answer left a log entry the new primary had rolled back,
    /// and the object's shards at two versions).
    answered_epoch: Epoch,
    /// CRUSH's set for the PG in the current map.
    up: Vec<i32>,
    /// The latest boot epoch among the acting set's OSDs in that map.
    acting_up_from: Epoch,
    /// Members too full to backfill onto, in that map.
    toofull: Vec<i32>,
    /// This peering took the store's info and log (see `sync_with_store`).
    synced: bool,
    /// Objects this copy lacks (loaded from its `missing/` records on the
    /// first input).
    missing: BTreeMap<String, Version>,
    missing_loaded: bool,
    /// This OSD's own transactions as primary not yet durable, with the
    /// interval that queued them.
    applying: BTreeMap<u64, Epoch>,
    /// As primary: the members being recovered.
    rec: Recovery,
    /// Authoritative logs waiting for this copy's map or commits.
    held_logs: Vec<HeldLog>,
    /// Pushes and chunks waiting for this copy's log to catch up.
    held_copies: Vec<HeldCopy>,
    /// PG log entries kept.
    pub log_entries_max: u64,
    /// As a backfill target: the persisted cursor (`None`: not
    /// backfilling).
    backfill: Option<Cursor>,
    /// The interval in which this copy took its backfill's last chunk.
    backfilled_in: Option<Epoch>,
    /// Backfill scans answered before the chunk they follow was queued.
    scans_ahead: u64,
    /// Objects per backfill scan and chunk.
    pub backfill_chunk_objects: usize,
    /// Pause after each push or backfill chunk before the next (ms;
    /// pushes a client op waits for are not delayed).
    pub recovery_sleep_ms: u64,
    /// The number of the next recovery-slot ask.
    next_ask: u64,
    /// As a stray copy: when the primary was last asked whether the PG is
    /// clean without it.
    stray_asked_ms: u64,
    /// As a stray copy: the removal transaction in flight.
    removing: Option<u64>,
    /// A member refused a write as stale, and this copy's map had not
    /// moved past the interval: the next map starts a new interval even
    /// with the same acting set.
    interval_ended: bool,
    /// Leaves of this copy's Merkle tree (0: no tree; erasure-coded pools
    /// keep none).
    pub merkle_leaves: u32,
    tree: TreeState,
    /// How often a clean primary compares its members' Merkle roots with
    /// its own (ms; 0: never).
    pub scrub_interval_ms: u64,
    scrub: Scrub,
    /// Objects this copy rolled back or removed because no up copy held
    /// them at their logged version (`pull_what_is_left`).
    given_up: u64,
    /// Erasure-coded, pulling: objects this primary lacks that no k up
    /// copies hold, and that are to be given up (removed or rolled back,
    /// see `Pg::unfound_fate`). It activates without them and gives each
    /// up at once.
    unfound: BTreeMap<String, erasure::Unfound>,
}

/// Default `Pg::scrub_interval_ms`: a root comparison is one small
/// message per member.
pub const SCRUB_INTERVAL_MS: u64 = 60_000;

/// A primary's comparisons of its members' Merkle roots with its own.
#[derive(Default)]
struct Scrub {
    /// When the next comparison starts.
    next_ms: u64,
    /// Members asked for their root: the tid, and this copy's head then
    /// (a write since makes the answer incomparable).
    asked: BTreeMap<i32, (u64, Version)>,
    /// Members whose root differed at the last comparison.
    differ: BTreeSet<i32>,
    /// Comparisons made, and how many differed.
    compared: u64,
    differed: u64,
}

/// Whether a copy keeps a Merkle tree.
enum TreeState {
    /// Loaded (or rebuilt) on the first input.
    Unloaded,
    Off,
    Kept(Box<tree::Kept>),
}

/// How often a copy outside the acting set asks the primary whether it
/// may go (ms).
pub const STRAY_CHECK_MS: u64 = 2_000;

/// Objects (or records) one removal transaction of a stray copy deletes.
pub const REMOVE_BATCH: usize = 256;

/// A push or backfill chunk a member holds until its log has every
/// write the primary had when it read the objects.
struct HeldCopy {
    from: i32,
    ctx: RepCtx,
    what: CopyMsg,
    token: u64,
    deadline_ms: u64,
}

enum CopyMsg {
    Push(Push),
    Chunk(Chunk),
}

/// An authoritative log a member holds until it can merge it.
struct HeldLog {
    from: i32,
    ctx: RepCtx,
    log: AuthLog,
    token: u64,
    deadline_ms: u64,
}

fn reply(
    token: u64,
    result: Result<Vec<loligo_types::ops::SubResult>, OpError>,
    version: Version,
    epoch: Epoch,
) -> Effect {
    Effect::Reply {
        token,
        reply: OpReply {
            result,
            version,
            epoch,
        },
    }
}

impl Pg {
    /// A PG this OSD holds a copy of (or is about to), with its info as
    /// persisted.
    pub fn new(id: PgId, whoami: i32, info: PgInfo) -> Pg {
        Pg {
            id,
            whoami,
            coll: CollectionId::pg(id.pool, id.ps),
            pool: None,
            epoch: 0,
            interval: 0,
            acting: Vec::new(),
            primary: -1,
            role: Role::Stray,
            info,
            next_tid: 1,
            store_gen: 0,
            inflight: BTreeMap::new(),
            busy: BTreeMap::new(),
            waiting: VecDeque::new(),
            op_timeout_ms: 30_000,
            now_ms: 0,
            backend: Box::new(Replicated),
            ec: None,
            gathers: BTreeMap::new(),
            moved: false,
            held_shard: None,
            moved_fresh: false,
            rb_live: BTreeMap::new(),
            rebuilt: (0, 0, 0),
            primary_temp: None,
            recent: HashMap::new(),
            recent_order: VecDeque::new(),
            record: None,
            record_up: Vec::new(),
            unfound_lost: 0,
            unfound_waiting: BTreeSet::new(),
            peer_asked_ms: 0,
            rep: replica::Lane::default(),
            lists: VecDeque::new(),
            queries: Vec::new(),
            answered_epoch: 0,
            up: Vec::new(),
            acting_up_from: 0,
            toofull: Vec::new(),
            synced: false,
            missing: BTreeMap::new(),
            missing_loaded: false,
            applying: BTreeMap::new(),
            rec: Recovery::default(),
            held_logs: Vec::new(),
            held_copies: Vec::new(),
            backfilled_in: None,
            scans_ahead: 0,
            log_entries_max: LOG_ENTRIES_MAX,
            backfill: None,
            backfill_chunk_objects: backfill::CHUNK_OBJECTS,
            recovery_sleep_ms: 0,
            next_ask: 1,
            stray_asked_ms: 0,
            removing: None,
            interval_ended: false,
            merkle_leaves: merkle::LEAVES_DEFAULT,
            tree: TreeState::Unloaded,
            scrub_interval_ms: SCRUB_INTERVAL_MS,
            scrub: Scrub::default(),
            given_up: 0,
            unfound: BTreeMap::new(),
        }
    }

    /// Start a new interval under the current map (its acting set
    /// unchanged).
    fn end_interval(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let Some(pool) = self.pool.clone() else {
            self.interval_ended = true;
            return;
        };
        let m = MapView {
            epoch: self.epoch,
            acting: self.acting.clone(),
            primary: self.primary,
            restarted: true,
        };
        self.on_map(s, m, pool, false, fx);
    }

    /// Root comparisons made with members, and how many found a
    /// different root.
    pub fn scrubs(&self) -> (u64, u64) {
        (self.scrub.compared, self.scrub.differed)
    }

    /// Objects this copy rolled back to an older copy or removed since it
    /// started, because no copy that held them at their logged version
    /// was coming back (`pull_what_is_left`).
    pub fn given_up(&self) -> u64 {
        self.given_up
    }

    /// Backfill chunks on their way from this primary (all targets),
    /// chunks this copy holds because they overtook the chunk before
    /// them, and scans it answered before the chunk they follow was
    /// queued here (the simulator's coverage counters).
    pub fn chunk_pipeline(&self) -> (usize, usize, u64) {
        let flying = self
            .rec
            .backfill
            .values()
            .map(|b| match &b.step {
                BfStep::Copying { flights, .. } => flights.len(),
                _ => 0,
            })
            .sum();
        let held = self
            .held_copies
            .iter()
            .filter(|h| matches!(h.what, CopyMsg::Chunk(_)))
            .count();
        (flying, held, self.scans_ahead)
    }

    /// A clean primary with nothing in flight asks each member for its
    /// Merkle root, every `scrub_interval_ms`.
    fn scrub_some(&mut self, fx: &mut Vec<Effect>) {
        let Some(leaves) = self.tree().map(merkle::Tree::leaf_count) else {
            return;
        };
        if !self.scrub.asked.is_empty() && self.now_ms >= self.scrub.next_ms {
            // Answers a whole interval late will not come.
            self.scrub.asked.clear();
        }
        if self.scrub_interval_ms == 0
            || self.now_ms < self.scrub.next_ms
            || !self.scrub.asked.is_empty()
            || !self.inflight.is_empty()
            || !self.is_clean()
        {
            return;
        }
        self.scrub.next_ms = self.now_ms + self.scrub_interval_ms;
        let members: Vec<i32> = self
            .acting
            .iter()
            .copied()
            .filter(|&o| o >= 0 && o != self.whoami)
            .collect();
        for to in members {
            let tid = self.take_tid();
            fx.push(Effect::SendScan {
                tid,
                to,
                ctx: self.rep_ctx(),
                after: Cursor::Start,
                upto: Cursor::End,
                limit: 1,
                filter: Filter::Nodes {
                    leaves,
                    level: 0,
                    idx: vec![0],
                },
            });
            self.scrub.asked.insert(to, (tid, self.info.last_update));
        }
    }

    /// A member's root answered a scrub's question (`false`: `tid` was
    /// not one).
    fn on_scrub_answer(&mut self, tid: u64, from: i32, result: &Result<Scan, RepError>) -> bool {
        let Some(&(t, head)) = self.scrub.asked.get(&from) else {
            return false;
        };
        if t != tid {
            return false;
        }
        self.scrub.asked.remove(&from);
        let theirs = match result {
            Ok(Scan { nodes: Some(n), .. }) if n.len() == 1 => n[0],
            // No tree of this shape there, or no answer: nothing learned.
            _ => return true,
        };
        // Comparable only if no write came between: every write before
        // the question had reached the member (none was in flight).
        if self.info.last_update != head || !self.inflight.is_empty() {
            return true;
        }
        let Some(mine) = self.tree().map(merkle::Tree::root) else {
            return true;
        };
        self.scrub.compared += 1;
        if mine == theirs {
            self.scrub.differ.remove(&from);
        } else {
            self.scrub.differed += 1;
            tracing::error!(
                "pg {}: scrub: osd.{from}'s Merkle root {theirs:x} differs from the primary's {mine:x} at {head:?}",
                self.id
            );
            self.scrub.differ.insert(from);
        }
        true
    }

    /// This copy's Merkle tree as its queued transactions leave it
    /// (`None`: it keeps none).
    pub fn tree(&self) -> Option<&merkle::Tree> {
        match &self.tree {
            TreeState::Kept(k) => Some(k.tree()),
            _ => None,
        }
    }

    /// Load this copy's tree, or rebuild it (then the rebuild is queued
    /// first of all this copy's transactions).
    fn load_tree(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if self.merkle_leaves == 0 || self.ec.is_some() {
            return self.drop_tree(s, fx);
        }
        match tree::Kept::load(s, self.coll, self.merkle_leaves) {
            Ok((k, t)) => {
                self.tree = TreeState::Kept(Box::new(k));
                if let Some(txn) = t {
                    tracing::info!("pg {}: Merkle tree rebuilt from the objects", self.id);
                    self.apply_own(txn, true, fx);
                }
            }
            Err(e) => {
                // Without a tree this copy is backfilled by full scans.
                tracing_error(self.id, &format!("Merkle tree: {e}"));
                self.tree = TreeState::Off;
            }
        }
    }

    /// Pushes (or a backfill chunk's objects) replace their objects in
    /// `t`: the kept tree follows.
    fn push_tree_changes(
        &mut self,
        s: &dyn ObjectStore,
        pushes: &[Push],
        tid: u64,
        t: &mut Transaction,
    ) -> Result<(), StoreError> {
        let changes: Vec<(ObjectId, tree::ObjVersion)> = pushes
            .iter()
            .map(|p| {
                (
                    recovery::oid(&p.name),
                    p.copy.is_some().then_some(p.version),
                )
            })
            .collect();
        self.tree_changes(s, &changes, tid, t)
    }

    /// Keep no tree: one persisted before goes (nothing would keep it
    /// right, and a later start would trust it).
    fn drop_tree(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        self.tree = TreeState::Off;
        // `merkle` and `merkle/...`: the shape and the leaves.
        let keys = match recovery::record_keys(s, self.coll, tree::TREE_KEY, None) {
            Ok(k) => k,
            Err(e) => return tracing_error(self.id, &format!("Merkle tree records: {e}")),
        };
        self.remove_records(&keys, true, fx);
    }

    /// The version of the next entry this primary logs.
    fn next_version(&self) -> Version {
        Version {
            epoch: self.epoch,
            v: self.info.last_update.v + 1,
        }
    }

    /// Into `t`: log entry `e`, the removal of the entry `log_entries_max`
    /// behind it, and `info` (whose head is `e`'s).
    fn log_into(&self, t: &mut Transaction, e: &LogEntry, info: &PgInfo) {
        // The log's order: an entry is newer than the one before it, and
        // the info written with it names it as the head.
        debug_assert!(
            e.prev.is_none_or(|p| p.v < e.version.v),
            "pg {}: log entry {:?} after {:?}",
            self.id,
            e.version,
            e.prev
        );
        debug_assert_eq!(
            info.last_update, e.version,
            "pg {}: head is not the new entry",
            self.id
        );
        let v = e.version.v;
        t.set_record(self.coll, &log_key(v), record::encode_log(e));
        if v > self.log_entries_max {
            t.rm_record(self.coll, &log_key(v - self.log_entries_max));
        }
        t.set_record(self.coll, INFO_KEY, record::encode_info(info));
    }

    /// Whether this copy's log says `name` is removed at `need`.
    fn log_removes(&self, s: &dyn ObjectStore, name: &str, need: Version) -> bool {
        recovery::entry_at(s, self.coll, need.v)
            .ok()
            .flatten()
            .is_some_and(|e| e.removed && e.version == need && e.name == name)
    }

    /// Down, waiting for a member of the recorded write set to answer (it
    /// peers again as they come and go).
    fn wait_for_record(&mut self) {
        let osds = self
            .record
            .as_ref()
            .map_or_else(Vec::new, |r| r.osds.clone());
        self.down_waiting_for(osds);
    }

    /// Down, waiting for one of `osds`: named (to clients and in the
    /// PG's report) are those that have not answered this peering with a
    /// copy; the others are up and already heard, and waiting for them
    /// would tell an operator to bring back an OSD that is there. None
    /// left: no up OSD holds what the PG needs, and none named is coming.
    fn down_waiting_for(&mut self, osds: Vec<i32>) {
        let heard: BTreeSet<i32> = match &self.role {
            Role::Peering { infos, .. } | Role::Pulling { infos, .. } => infos
                .iter()
                .filter(|(_, i)| i.is_some())
                .map(|(o, _)| *o)
                .collect(),
            _ => BTreeSet::new(),
        };
        let osds = osds
            .into_iter()
            .filter(|o| *o != self.whoami && !heard.contains(o))
            .collect();
        self.role = Role::Down { osds };
    }

    /// Queue `txn` on this copy's store (durable before it is answered
    /// for if `sync`), its landing awaited as this interval's.
    fn apply_own(&mut self, txn: Transaction, sync: bool, fx: &mut Vec<Effect>) {
        let tid = self.take_tid();
        self.applying.insert(tid, self.interval);
        fx.push(Effect::Apply { tid, txn, sync });
    }

    /// Queue the removal of this copy's records `keys` (none: nothing).
    fn remove_records(&mut self, keys: &[Vec<u8>], sync: bool, fx: &mut Vec<Effect>) {
        if keys.is_empty() {
            return;
        }
        let mut txn = Transaction::new();
        for k in keys {
            txn.rm_record(self.coll, k);
        }
        self.apply_own(txn, sync, fx);
    }

    /// `t` (the newest transaction built) rewrites this copy's log outside
    /// a write: the kept tree's pages go with it where the log held the
    /// only copy of a leaf.
    fn guard_log(&mut self, t: &mut Transaction) {
        let coll = self.coll;
        if let Some(k) = self.kept() {
            k.guard(coll, t);
        }
    }

    /// The kept tree, if any.
    fn kept(&mut self) -> Option<&mut tree::Kept> {
        match &mut self.tree {
            TreeState::Kept(k) => Some(k),
            _ => None,
        }
    }

    /// Objects go to new states in `t` (queued as `tid`): the kept tree
    /// follows, the changed leaves in `t`. Every state before is read
    /// first, so a read error changes nothing (and `t` must then not be
    /// queued).
    fn tree_changes(
        &mut self,
        s: &dyn ObjectStore,
        changes: &[(ObjectId, tree::ObjVersion)],
        tid: u64,
        t: &mut Transaction,
    ) -> Result<(), StoreError> {
        let coll = self.coll;
        let Some(k) = self.kept() else {
            return Ok(());
        };
        let changes = changes
            .iter()
            .map(|(o, new)| Ok((o.clone(), k.before(s, coll, o)?, *new)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        k.change_many(coll, &changes, tid, t);
        Ok(())
    }

    pub fn collection(&self) -> CollectionId {
        self.coll
    }

    pub fn interval(&self) -> Epoch {
        self.interval
    }

    /// Where this PG stands in the map (for checking replica writes).
    pub fn view(&self) -> PgView {
        PgView {
            epoch: self.epoch,
            interval: self.interval,
            acting: self.acting.clone(),
            primary: self.primary,
            record_interval: self.record.as_ref().map_or(0, |r| r.interval),
            acting_up_from: self.acting_up_from,
        }
    }

    pub fn is_primary(&self) -> bool {
        self.primary == self.whoami
    }

    /// Feed one input; the effects to perform, in order.
    pub fn handle(&mut self, s: &dyn ObjectStore, input: Input) -> Vec<Effect> {
        let mut fx = Vec::new();
        if matches!(input, Input::LocalDone { .. }) {
            self.store_gen += 1;
        }
        if !self.missing_loaded {
            self.load_missing(s);
        }
        match input {
            Input::Map {
                epoch,
                up,
                acting,
                acting_up_from,
                primary,
                pool,
                record,
                record_up,
                toofull,
                striper,
                primary_temp,
                unfound_lost,
                now_ms,
            } => {
                self.primary_temp = primary_temp;
                self.unfound_lost = self.unfound_lost.max(unfound_lost);
                self.now_ms = now_ms;
                if epoch > self.epoch {
                    // An erasure-coded PG's sets keep their holes (a
                    // missing shard) as -1, so positions stay shards and
                    // every `o >= 0` filter skips them.
                    let hole = |v: Vec<i32>| -> Vec<i32> {
                        v.into_iter()
                            .map(|o| {
                                if o < 0 || o == loligo_crush::ITEM_NONE {
                                    -1
                                } else {
                                    o
                                }
                            })
                            .collect()
                    };
                    let (up, acting) = (hole(up), hole(acting));
                    if let Some(st) = striper {
                        if self.ec.is_none() {
                            self.backend = Box::new(Erasure);
                        }
                        self.ec = Some(st);
                        // Erasure-coded copies keep no tree (every shard
                        // has the same name and version).
                        if !matches!(self.tree, TreeState::Off) {
                            self.drop_tree(s, &mut fx);
                        }
                    }
                    // The tree is loaded at the first map, never before:
                    // only the map says whether the pool is erasure-coded
                    // (then there is none; a tree rebuilt before it was
                    // left behind, and fsck found it wrong).
                    if matches!(self.tree, TreeState::Unloaded) {
                        self.load_tree(s, &mut fx);
                    }
                    self.toofull = toofull;
                    // A record this PG was told holds for its interval
                    // stays until a map shows a newer one or the interval
                    // ends. The reply and the maps travel apart, so a map
                    // from before the record's commit can come after the
                    // reply; within one interval a record is never
                    // dropped (its members are acting, so up, so not
                    // lost) nor replaced by an older one, and peering
                    // against the older record would roll back writes
                    // acknowledged under this one.
                    let restarted = acting_up_from > self.interval || self.interval_ended;
                    // (As `on_map` tells an interval that goes on.)
                    let same_interval = self.interval > 0
                        && acting == self.acting
                        && primary == self.primary
                        && !restarted;
                    let (record, record_up) = match &self.record {
                        Some(mine)
                            if same_interval
                                && mine.interval == self.interval
                                && record.as_ref().is_none_or(|r| r.interval < mine.interval) =>
                        {
                            let up = mine.members().collect();
                            (Some(mine.clone()), up)
                        }
                        _ => (record, record_up),
                    };
                    let record_changed = record != self.record || record_up != self.record_up;
                    self.record = record;
                    self.record_up = record_up;
                    self.up = up;
                    self.acting_up_from = acting_up_from;
                    let m = MapView {
                        epoch,
                        acting,
                        primary,
                        restarted,
                    };
                    // Whether this copy's shard is its position's, before
                    // peering asks (a store error counts as moved: safe).
                    self.read_moved(s, &m.acting);
                    self.moved_fresh = self.settled_all();
                    self.on_map(s, m, pool, record_changed, &mut fx);
                    if !self.is_primary() {
                        self.unfound_waiting.clear();
                    }
                    // Queries, logs and copies that waited for this map
                    // can be answered.
                    self.rerun_queries(&mut fx);
                    self.rerun_held_logs(s, &mut fx);
                    self.rerun_held_copies(s, &mut fx);
                }
            }
            Input::WriteSetRecorded { interval } => self.on_rw_recorded(s, interval, &mut fx),
            Input::Op { op, token, now_ms } => {
                self.now_ms = now_ms;
                let deadline_ms = now_ms + self.op_timeout_ms;
                self.on_op(
                    s,
                    Pending {
                        op,
                        token,
                        deadline_ms,
                    },
                    &mut fx,
                )
            }
            Input::LocalDone { tid, result } => {
                if let Some(k) = self.kept() {
                    k.durable(tid);
                }
                let result = result.map_err(|e| RepError::Failed(e.to_string()));
                if self.removing == Some(tid) {
                    self.applying.remove(&tid);
                    self.removing = None;
                    match result {
                        Ok(()) => self.remove_some(s, &mut fx),
                        Err(e) => tracing_error(self.id, &format!("removing a stray copy: {e:?}")),
                    }
                } else if let Some(c) = self.rep.committing.remove(&tid) {
                    self.on_member_commit(s, c, result, &mut fx);
                } else {
                    self.applying.remove(&tid);
                    self.done(s, tid, self.whoami, result, &mut fx)
                }
                self.on_settled(s, &mut fx);
            }
            Input::RepOp {
                from,
                ctx,
                txn,
                token,
                now_ms,
            } => {
                self.now_ms = now_ms;
                let w = replica::RepWrite {
                    from,
                    ctx,
                    txn,
                    token,
                    deadline_ms: now_ms + self.op_timeout_ms,
                };
                self.on_rep_op(s, w, &mut fx)
            }
            Input::List {
                start,
                limit,
                token,
                now_ms,
            } => {
                self.now_ms = now_ms;
                let l = PendingList {
                    start,
                    limit,
                    token,
                    deadline_ms: now_ms + self.op_timeout_ms,
                };
                self.on_list(s, l, &mut fx)
            }
            Input::RepDone { tid, from, result } => self.done(s, tid, from, result, &mut fx),
            Input::Info {
                from,
                interval,
                info,
            } => self.on_info(s, from, interval, info, &mut fx),
            Input::Query {
                epoch,
                token,
                now_ms,
                ..
            } => {
                self.now_ms = now_ms;
                let q = PendingQuery {
                    epoch,
                    token,
                    deadline_ms: now_ms + self.op_timeout_ms,
                };
                self.on_query(q, &mut fx)
            }
            Input::Log {
                from,
                ctx,
                log,
                token,
                now_ms,
            } => {
                self.now_ms = now_ms;
                let h = HeldLog {
                    from,
                    ctx,
                    log,
                    token,
                    deadline_ms: now_ms + self.op_timeout_ms,
                };
                self.on_log(s, h, &mut fx);
            }
            Input::Push {
                from,
                ctx,
                push,
                token,
                now_ms,
            } => {
                self.now_ms = now_ms;
                self.on_push(s, from, ctx, push, token, &mut fx);
            }
            Input::LogDone { tid, from, result } => self.on_log_done(s, tid, from, result, &mut fx),
            Input::PushDone { tid, from, result } => {
                self.on_push_done(s, tid, from, result, &mut fx)
            }
            Input::Scan {
                from,
                ctx,
                after,
                upto,
                limit,
                filter,
                token,
                now_ms,
            } => {
                self.now_ms = now_ms;
                let result = self.on_scan(s, from, &ctx, &after, &upto, limit, &filter);
                fx.push(Effect::ScanReply { token, result });
            }
            Input::Chunk {
                from,
                ctx,
                chunk,
                token,
                now_ms,
            } => {
                self.now_ms = now_ms;
                self.on_chunk(s, from, &ctx, chunk, token, &mut fx);
            }
            Input::ScanDone { tid, from, result } => {
                self.on_scan_done(s, tid, from, result, &mut fx)
            }
            Input::ChunkDone { tid, from, result } => {
                self.on_chunk_done(s, tid, from, result, &mut fx)
            }
            Input::Tick { now_ms } => {
                self.now_ms = now_ms;
                self.check_stray(s, &mut fx);
                self.resend_writes(&mut fx);
                self.expire(&mut fx);
                self.expire_gathers(s, &mut fx);
                self.waiting_moved_done();
                if (self.ec.is_some() || self.rec.lost_retry)
                    && self.role == Role::Behind
                    && now_ms >= self.rec.peer_again_ms
                {
                    self.start_peering(s, &mut fx);
                }
                self.retry_recovery(s, &mut fx);
                self.scrub_some(&mut fx);
            }
            Input::GetLog {
                from,
                ctx,
                token,
                now_ms,
            } => {
                self.now_ms = now_ms;
                let result = self.on_get_log(s, from, &ctx);
                fx.push(Effect::OwnLogReply { token, result });
            }
            Input::GetLogDone { tid, from, result } => {
                self.on_get_log_done(s, tid, from, result, &mut fx)
            }
            Input::Pull {
                from,
                ctx,
                name,
                need,
                token,
                now_ms,
            } => {
                self.now_ms = now_ms;
                let result = self.on_pull(s, from, &ctx, &name, need);
                fx.push(Effect::PullReply { token, result });
            }
            Input::PullDone { tid, from, result } => {
                self.on_pull_done(s, tid, from, result, &mut fx)
            }
            Input::StrayCheck {
                from,
                epoch,
                shard,
                token,
            } => {
                if let (Some(i), Some(_), true) = (shard, &self.ec, self.is_primary()) {
                    self.rec.strays.insert(from, i as usize);
                }
                let clean = self.clean_without(from, epoch);
                fx.push(Effect::CleanReply { token, clean });
            }
            Input::ShardRead {
                from: _,
                epoch: _,
                name,
                extents,
                version,
                shard,
                token,
            } => self.on_shard_read(s, &name, &extents, version, shard, token, &mut fx),
            Input::ShardReadDone {
                tid,
                from,
                shard,
                result,
            } => self.on_shard_read_done(s, tid, from, shard, result, &mut fx),
            Input::StrayAnswer { from, clean } => {
                // Only the current primary's word, under a map no older
                // than this copy's, counts.
                if from == self.primary && clean.is_some_and(|e| e >= self.epoch) {
                    self.remove_some(s, &mut fx);
                }
            }
            Input::Reserved { ask } => {
                tracing::debug!("pg {}: recovery slot {ask} granted", self.id);
                if self.rec.slot == Slot::Asked(ask) {
                    self.rec.slot = Slot::Held(ask);
                    self.recover_some(s, &mut fx);
                    self.backfill_some(s, &mut fx);
                } else if self.rec.slot != Slot::Held(ask) {
                    // Granted after this PG gave the ask up.
                    fx.push(Effect::Release { ask });
                }
            }
        }
        // A slot is held only while there is recovery to do.
        if let Slot::Asked(ask) | Slot::Held(ask) = self.rec.slot {
            if !self.wants_slot() {
                self.rec.slot = Slot::None;
                fx.push(Effect::Release { ask });
            }
        }
        if fx.iter().any(|e| matches!(e, Effect::Apply { .. })) {
            self.store_gen += 1;
        }
        fx
    }

    /// As primary: the epoch at which the PG is clean without `osd` (not
    /// acting, not in CRUSH's set, not on record), if it is and this map
    /// is at least `epoch`.
    fn clean_without(&self, osd: i32, epoch: Epoch) -> Option<Epoch> {
        let named = self.acting.contains(&osd)
            || self.up.contains(&osd)
            || self.record.as_ref().is_some_and(|r| r.osds.contains(&osd));
        (self.is_clean() && !named && self.epoch >= epoch).then_some(self.epoch)
    }

    /// As a copy outside the acting set that still holds something: ask
    /// the primary now and then whether it may go.
    fn check_stray(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if self.role != Role::Stray
            || self.primary < 0
            || self.removing.is_some()
            || self.now_ms < self.stray_asked_ms + STRAY_CHECK_MS
        {
            return;
        }
        let holds = self.info.last_update > Version::default()
            || !self.missing.is_empty()
            || self.backfill.is_some()
            || s.records(self.coll, b"", 1).is_ok_and(|r| !r.is_empty())
            || s.list(self.coll, None, 1).is_ok_and(|(l, _)| !l.is_empty());
        if holds {
            self.stray_asked_ms = self.now_ms;
            let shard = self.ec.as_ref().and_then(|_| self.shard_held(s));
            fx.push(Effect::AskClean {
                to: self.primary,
                epoch: self.epoch,
                shard,
            });
        }
    }

    /// As a stray copy the PG no longer needs: delete the next batch. The
    /// first batch takes every record (info, log, missing, cursor) with
    /// it, so a copy cut short by a crash or a new map is an empty copy
    /// (peering backfills it) that may hold leftover objects (backfill
    /// compares and removes them). The collection itself stays, empty.
    fn remove_some(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if self.role != Role::Stray || self.removing.is_some() || !self.settled() {
            return;
        }
        let mut t = Transaction::new();
        let records = match s.records(self.coll, b"", usize::MAX) {
            Ok(r) => r,
            Err(e) => return tracing_error(self.id, &format!("listing a stray copy: {e}")),
        };
        let (objects, last) = match s.list(self.coll, None, REMOVE_BATCH) {
            Ok((objects, next)) => (objects, next.is_none()),
            Err(e) => return tracing_error(self.id, &format!("listing a stray copy: {e}")),
        };
        // The tree's records stay while objects do (it follows each
        // removal down to empty), then go with the last batch.
        let (tree_records, records): (Vec<Vec<u8>>, Vec<Vec<u8>>) = records
            .into_iter()
            .map(|(k, _)| k)
            .partition(|k| k.starts_with(tree::TREE_KEY));
        if !records.is_empty() {
            tracing::info!(
                "pg {}: removing this copy (the PG is clean without it)",
                self.id
            );
        }
        for k in &records {
            t.rm_record(self.coll, k);
        }
        let tid = self.take_tid();
        for o in &objects {
            t.remove(self.coll, o);
        }
        let gone: Vec<(ObjectId, tree::ObjVersion)> = objects
            .iter()
            .filter(|o| !crate::ec::is_internal(&o.name))
            .map(|o| (o.clone(), None))
            .collect();
        if let Err(e) = self.tree_changes(s, &gone, tid, &mut t) {
            return tracing_error(self.id, &format!("removing a stray copy: {e}"));
        }
        // The log goes: leaves only it held go to the pages.
        self.guard_log(&mut t);
        if last {
            // Pages this batch wrote and the ones on disk go, after them.
            t.ops.retain(|op| {
                !matches!(op, loligo_store::txn::Op::SetRecord { key, .. }
                    if key.starts_with(tree::TREE_KEY))
            });
            for k in &tree_records {
                t.rm_record(self.coll, k);
            }
            if let Some(k) = self.kept() {
                k.unshape();
            }
        }
        if t.is_empty() {
            return;
        }
        self.info = PgInfo::default();
        self.missing.clear();
        self.backfill = None;
        self.rep.high = Version::default();
        self.rep.merged = None;
        self.applying.insert(tid, self.interval);
        self.removing = Some(tid);
        fx.push(Effect::Apply {
            tid,
            txn: t,
            sync: true,
        });
    }

    /// Whether this primary has members to recover or backfill.
    fn wants_slot(&self) -> bool {
        matches!(self.role, Role::Primary { .. } | Role::Activating { .. })
            && (!self.rec.missing.is_empty()
                || self
                    .rec
                    .backfill
                    .keys()
                    .any(|&to| !self.backfill_toofull(to)))
    }

    /// Whether backfill target `to` waits for room: its device is too
    /// full and no chunk of it is under way (one under way is finished).
    fn backfill_toofull(&self, to: i32) -> bool {
        self.toofull.contains(&to)
            && self
                .rec
                .backfill
                .get(&to)
                .is_some_and(|b| matches!(b.step, BfStep::Idle))
    }

    /// Whether pushes and chunks no client op waits for may start now:
    /// this PG holds one of its OSD's recovery slots (asked for here when
    /// it has none) and the recovery sleep since the last one is over.
    fn may_copy(&mut self, fx: &mut Vec<Effect>) -> bool {
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
    fn recovery_priority(&self) -> u64 {
        let (Role::Primary { write_set } | Role::Activating { write_set, .. }) = &self.role else {
            return 0;
        };
        let size = self.pool.as_ref().map_or(0, |p| p.size as usize);
        let short = size.saturating_sub(self.complete_of(write_set).len()) as u64;
        let objects = self.info.objects;
        let (degraded, _) = copies_short(objects, size, write_set.len(), self.rec.lacking(objects));
        (short << 40) | degraded.min((1 << 40) - 1)
    }

    /// A new recovery (new interval or peering): the old one's slot is
    /// given back.
    fn reset_recovery(&mut self, fx: &mut Vec<Effect>) {
        if let Slot::Asked(ask) | Slot::Held(ask) = self.rec.slot {
            fx.push(Effect::Release { ask });
        }
        self.rec = Recovery::default();
    }

    fn on_map(
        &mut self,
        s: &dyn ObjectStore,
        m: MapView,
        pool: Pool,
        record_changed: bool,
        fx: &mut Vec<Effect>,
    ) {
        let MapView {
            epoch,
            acting,
            primary,
            restarted,
        } = m;
        self.epoch = epoch;
        let min_size_changed = self
            .pool
            .as_ref()
            .is_some_and(|p| p.min_size != pool.min_size);
        self.pool = Some(pool);
        if acting == self.acting && primary == self.primary && self.interval > 0 && !restarted {
            // Same interval: peer again if min_size moved (the write set
            // may now allow writes) or if the recorded write set's
            // members came or went while this primary waits for them.
            // (A pulling primary too: it would peer against the old
            // record's members once done, and wait for ones it never
            // asked.)
            let waiting_for_rw = matches!(
                self.role,
                Role::Peering { .. } | Role::Down { .. } | Role::Pulling { .. }
            );
            if self.is_primary() && (min_size_changed || (record_changed && waiting_for_rw)) {
                self.start_peering(s, fx);
            } else if let (Role::Activating { write_set, .. }, Some(record)) =
                (&self.role, &self.record)
            {
                // The record arrived with the map before the reply did.
                if record.interval == self.interval && record.osds == self.complete_of(write_set) {
                    self.on_rw_recorded(s, self.interval, fx);
                }
            }
            // CRUSH's set may have moved under the pg_temp, and the map
            // shows what the monitors really hold (an ask may have lost a
            // race with an older one: ask again).
            self.maybe_clear_temp(fx);
            let shown = self.record.as_ref().map(|r| (r.interval, &r.osds));
            if shown.is_some_and(|(i, o)| {
                i == self.interval && Some(o) != self.rec.record_asked.as_ref()
            }) {
                self.rec.record_asked = None;
            }
            self.rerecord(fx);
            return;
        }
        // A new interval: writes in flight are abandoned (their clients
        // retry under the new map); queued ops are re-examined.
        self.interval = epoch;
        self.interval_ended = false;
        self.acting = acting;
        self.primary = primary;
        self.reset_recovery(fx);
        self.abandon_gathers(epoch, fx);
        // Roots are compared again once the new interval is clean.
        self.scrub.asked.clear();
        self.scrub.differ.clear();
        self.scrub.next_ms = self.now_ms + self.scrub_interval_ms;
        // (Copies of writes of earlier intervals stay until their objects
        // are written again.)
        self.rb_live.clear();
        for (_, f) in std::mem::take(&mut self.inflight) {
            if let Some(token) = f.token {
                fx.push(reply(
                    token,
                    Err(OpError::WrongPrimary { epoch }),
                    f.version,
                    epoch,
                ));
            }
        }
        let queued: Vec<Pending> = std::mem::take(&mut self.busy)
            .into_values()
            .flatten()
            .collect();
        self.waiting.extend(queued);
        if self.is_primary() {
            self.start_peering(s, fx);
        } else {
            self.role = if self.acting.contains(&self.whoami) {
                Role::Replica
            } else {
                Role::Stray
            };
            for p in std::mem::take(&mut self.waiting) {
                fx.push(reply(
                    p.token,
                    Err(OpError::WrongPrimary { epoch }),
                    Version::default(),
                    epoch,
                ));
            }
            self.rerun_lists(s, fx);
        }
        // Writes from the old primary that wait here are judged again
        // under this map.
        self.rerun_rep_waiting(s, fx);
    }

    fn start_peering(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        self.synced = false;
        // (Pulls of what is left end with the peering that chose them.)
        self.rec.lost = None;
        self.rec.lost_retry = false;
        // (A pull that failed for good in an earlier round may work now.)
        self.unfound.clear();
        self.rec.pull_doubt.clear();
        self.rec.pull_tries.clear();
        self.rec.pull_never_took.clear();
        // The acting members, and the recorded write set's members that
        // are up (one of them has every acknowledged write).
        let want: BTreeSet<i32> = self
            .acting
            .iter()
            .chain(&self.record_up)
            .copied()
            .filter(|&o| o != self.whoami && o >= 0)
            .collect();
        for &to in &want {
            fx.push(Effect::QueryInfo {
                to,
                interval: self.interval,
                epoch: self.epoch,
            });
        }
        self.role = Role::Peering {
            want,
            infos: BTreeMap::new(),
        };
        self.peer_asked_ms = self.now_ms;
        self.maybe_activate(s, fx);
    }

    /// Once per peering, with this copy's own transactions durable: take
    /// the info on disk if it is ahead (replica writes went straight to
    /// the store while this OSD was not primary; memory may also be ahead
    /// by writes in flight here: the newer is kept, so that no version is
    /// ever handed out twice), and index the log's request ids. Not
    /// before they are durable: a merge that rolled writes back is in
    /// memory first, and the store would bring them back (a rolled-back
    /// write came back as the PG's head, one no other copy had, and the PG
    /// stayed down).
    fn sync_with_store(&mut self, s: &dyn ObjectStore) {
        if self.synced {
            return;
        }
        self.synced = true;
        if let Ok(Some(i)) = stored_info(s, self.coll) {
            if i.last_update > self.info.last_update {
                self.info = i;
            }
        }
        self.load_recent(s);
    }

    fn on_info(
        &mut self,
        s: &dyn ObjectStore,
        from: i32,
        interval: Epoch,
        info: Option<PeerInfo>,
        fx: &mut Vec<Effect>,
    ) {
        if interval != self.interval {
            return;
        }
        let info = info.map(|i| self.against_acting(from, i));
        if let Role::Peering { want, infos } = &mut self.role {
            if want.remove(&from) {
                infos.insert(from, info);
            }
        }
        self.maybe_activate(s, fx);
    }

    fn on_rw_recorded(&mut self, s: &dyn ObjectStore, interval: Epoch, fx: &mut Vec<Effect>) {
        if interval != self.interval {
            return;
        }
        let write_set = match &mut self.role {
            Role::Activating {
                write_set,
                recorded,
            } => {
                *recorded = true;
                write_set.clone()
            }
            Role::Primary { write_set } => write_set.clone(),
            _ => return,
        };
        // What was asked, not what is complete now: a member may have
        // completed since, and then needs its own record.
        let osds = self
            .rec
            .record_asked
            .clone()
            .unwrap_or_else(|| self.complete_of(&write_set));
        self.record = Some(WriteSetRecord { interval, osds });
        self.maybe_go_active(s, fx);
        self.rerecord(fx);
        if self.ec.is_some() {
            // Writes that waited for a record of k complete members.
            self.rerun_waiting(s, fx);
        }
    }

    /// The ask to record `osds` as this interval's write set.
    fn record_ask(&self, osds: Vec<i32>) -> Effect {
        Effect::RecordWriteSet(RecordAsk {
            pg: self.id,
            record: WriteSetRecord {
                interval: self.interval,
                osds,
            },
            as_of: self.epoch,
            acting: self.acting.clone(),
            primary: self.primary,
        })
    }

    /// The members of `write_set` whose copy is complete (this primary
    /// first): the ones a record may name.
    fn complete_of(&self, write_set: &[i32]) -> Vec<i32> {
        write_set
            .iter()
            .copied()
            .filter(|o| {
                !self.rec.merging.contains_key(o)
                    && !self.rec.missing.contains_key(o)
                    && !self.rec.backfill.contains_key(o)
            })
            .collect()
    }

    /// Activating -> primary once the write set is on record and every
    /// recovering member has merged the log (so its missing set is known
    /// before any write reaches it).
    fn maybe_go_active(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let Role::Activating {
            write_set,
            recorded,
        } = &self.role
        else {
            return;
        };
        if !*recorded || !self.rec.merging.is_empty() {
            return;
        }
        self.role = Role::Primary {
            write_set: write_set.clone(),
        };
        // Objects no k up copies hold go first (ops on them wait). One
        // that cannot be removed now is still missing here: the PG peers
        // again rather than serve as if this copy held it (on an EC pool
        // with positions moving and OSDs declared lost, a read error left
        // it out, and recovery pushed members its absence with no log
        // entry).
        // One rolled back stays unfound here until its older version is
        // written back (`revert_decoded`): this copy lacks it meanwhile, so
        // ops on it wait and recovery leaves it alone (with OSDs declared
        // lost, recovery pushed the primary's own older copy as the head,
        // and a retry of the write being rolled back was answered as
        // done).
        for (name, fate) in std::mem::take(&mut self.unfound) {
            if matches!(fate, erasure::Unfound::RevertTo(_)) {
                self.unfound.insert(name.clone(), fate);
            }
            if !self.settle_unfound(s, name, fate, fx) {
                return self.ec_behind("an unfound object could not be given up");
            }
        }
        self.activate(s, fx);
        self.recover_some(s, fx);
        self.backfill_some(s, fx);
        self.rerecord(fx);
        self.maybe_clear_temp(fx);
    }

    /// Erasure-coded, and the recorded write set is down to fewer than k
    /// members (the others were declared lost): no k of its copies hold
    /// the acknowledged writes any more. The PG goes on with whatever
    /// k up copies hold, and gives up objects no k of them hold.
    pub(super) fn record_short(&self) -> bool {
        let Some(st) = &self.ec else {
            return false;
        };
        self.record
            .as_ref()
            .is_some_and(|r| r.members().count() < st.k())
    }

    /// Ask the monitors to record the complete members again once more of
    /// them are (a member finished recovery).
    fn rerecord(&mut self, fx: &mut Vec<Effect>) {
        let Role::Primary { write_set } = &self.role else {
            return;
        };
        if self.serving(write_set) < self.min_size() {
            return;
        }
        let osds = self.complete_of(write_set);
        if self.ec.as_ref().is_some_and(|st| osds.len() < st.k()) {
            return;
        }
        // Not while an unfound object's removal is on its way: until it
        // is durable, this copy still lacks the object. Nor once a member
        // said the interval is over: a write it refused is not on it.
        if self.interval_ended
            || !self.unfound.is_empty()
            || self.inflight.values().any(|f| f.token.is_none())
        {
            return;
        }
        let held = self
            .record
            .as_ref()
            .is_some_and(|r| r.interval == self.interval && r.osds == osds);
        if !held && self.rec.record_asked.as_ref() != Some(&osds) {
            self.rec.record_asked = Some(osds.clone());
            fx.push(self.record_ask(osds));
        }
    }

    /// While a pg_temp holds: first bring CRUSH's members into the acting
    /// set (so recovery reaches them), then drop the pg_temp once they are
    /// all complete here: CRUSH's primary then takes over with nothing
    /// left to recover.
    fn maybe_clear_temp(&mut self, fx: &mut Vec<Effect>) {
        if !self.rec.waiting_moved.is_empty() {
            // (Moved members wait: the PG peers again before any temp
            // goes.)
            return self.waiting_moved_done();
        }
        let Role::Primary { write_set } = &self.role else {
            return;
        };
        if self.ec.is_some() {
            // Erasure-coded: a primary_temp goes once the primary without
            // it holds every object: the acting set's first member, a
            // pg_temp's if one holds (with positions moving, CRUSH's first
            // OSD held the primary_temp while a pg_temp named another
            // first, took it for stale and dropped it, and the two handed
            // the PG back and forth for good).
            let natural = self.acting.iter().copied().find(|&o| o >= 0);
            let settled = self.rec.nothing_left();
            let done = settled && natural.is_some_and(|c| write_set.contains(&c));
            // One in effect goes once that primary is complete; one not
            // in effect (its OSD left the set) goes at once.
            let stale = self.primary_temp.is_some() && natural == Some(self.whoami);
            let in_effect = natural.is_some_and(|c| c != self.whoami);
            if ((in_effect && done) || stale) && !self.rec.primary_temp_cleared {
                self.rec.primary_temp_cleared = true;
                fx.push(Effect::RequestPrimaryTemp { osd: None });
            }
            // A pg_temp (a stray or moved members put back at their
            // shards' positions) walks toward CRUSH's set: see
            // `ec_temp_step`.
            if self.acting == self.up || self.up.is_empty() {
                return;
            }
            let k = self.ec.as_ref().map_or(1, |st| st.k());
            let next = erasure::ec_temp_step(&self.acting, &self.up, k, settled).or_else(|| {
                settled
                    .then(|| erasure::ec_temp_unstick(&self.acting, &self.up, k))
                    .flatten()
            });
            if let Some(osds) = next {
                self.ask_pg_temp(osds, fx);
            }
            return;
        }
        if self.up.is_empty() || self.up == self.acting {
            return;
        }
        let absent: Vec<i32> = self
            .up
            .iter()
            .copied()
            .filter(|o| !self.acting.contains(o))
            .collect();
        let osds = if !absent.is_empty() {
            let mut osds = self.acting.clone();
            osds.extend(absent);
            osds
        } else if self.rec.nothing_left() && self.up.iter().all(|o| write_set.contains(o)) {
            Vec::new()
        } else {
            return;
        };
        self.ask_pg_temp(osds, fx);
    }

    /// Ask the monitors for pg_temp `osds` (empty: drop it), unless this
    /// PG asked for that already.
    fn ask_pg_temp(&mut self, osds: Vec<i32>, fx: &mut Vec<Effect>) {
        if self.rec.temp_asked.as_ref() != Some(&osds) {
            self.rec.temp_asked = Some(osds.clone());
            fx.push(Effect::RequestPgTemp { osds });
        }
    }

    /// CRUSH's primary: the first OSD of the up set (holes skipped).
    fn crush_primary(&self) -> Option<i32> {
        self.up.iter().copied().find(|&o| o >= 0)
    }

    /// The newest `log_entries_max` entries of this copy's log: a log may
    /// hold more (a merged run is read up to 64 entries past that bound),
    /// and the newest writes are the likeliest to be retried.
    fn recent_entries(&self, s: &dyn ObjectStore) -> Result<Vec<LogEntry>, StoreError> {
        let after = self.info.last_update.v.saturating_sub(self.log_entries_max);
        let rows = s.records(
            self.coll,
            &log_key(after + 1),
            self.log_entries_max as usize,
        )?;
        Ok(rows
            .iter()
            .take_while(|(k, _)| k.starts_with(b"log/"))
            .filter_map(|(_, v)| record::decode_log(v).ok())
            .collect())
    }

    /// An entry that gives `name` up (rolls it back to `to`) undoes its
    /// writes after `to`: their request ids answer no retry from now on,
    /// and a retry is a new write (on an EC pool with OSDs declared lost,
    /// a write given up as never acknowledged was then answered as done to
    /// its retry, from the ids peering had loaded, and the object read as
    /// gone).
    fn forget_undone(
        &mut self,
        s: &dyn ObjectStore,
        name: &str,
        to: Version,
    ) -> Result<(), StoreError> {
        for e in self.recent_entries(s)? {
            if e.name == name && e.version > to {
                if let Some(r) = e.reqid {
                    self.recent.remove(&r);
                }
            }
        }
        Ok(())
    }

    /// Rebuild the request-id index from the PG log on disk (a new
    /// primary answers retries of writes its predecessor applied).
    fn load_recent(&mut self, s: &dyn ObjectStore) {
        self.recent.clear();
        self.recent_order.clear();
        let Ok(entries) = self.recent_entries(s) else {
            return;
        };
        // Writes an entry gave up (rolled back or removed) answer no
        // retry: their effect is gone.
        let undone: HashSet<ReqId> = entries
            .iter()
            .enumerate()
            .filter_map(|(i, g)| match g.gave_up {
                Some(GaveUp::Object(to)) => Some((i, g, to)),
                _ => None,
            })
            .flat_map(|(i, g, to)| {
                entries[..i]
                    .iter()
                    .filter(move |e| e.name == g.name && e.version > to)
                    .filter_map(|e| e.reqid)
            })
            .collect();
        for e in entries {
            if let Some(r) = e.reqid.filter(|r| !undone.contains(r)) {
                // Peering made every write-set member's log equal to
                // this one: what it holds is committed.
                self.remember(r, e.version, true);
            }
        }
    }

    fn remember(&mut self, r: ReqId, v: Version, committed: bool) {
        if self.recent.insert(r, (v, committed)).is_none() {
            self.recent_order.push_back(r);
        }
        while self.recent_order.len() > self.log_entries_max as usize {
            if let Some(old) = self.recent_order.pop_front() {
                self.recent.remove(&old);
            }
        }
    }

    /// The shell creates the PG's collection before the first input, so
    /// transactions here never need to.
    fn maybe_activate(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if !matches!(&self.role, Role::Peering { want, .. } if want.is_empty()) {
            return;
        }
        // Its own transactions from an earlier interval must be durable
        // first: reads follow at once, and the store must show all this
        // copy claims (an object pulled in the interval before was read at
        // its older version).
        if !self.settled() {
            return;
        }
        // The store is read for this copy's info only once its own
        // transactions of this interval are durable too: a merge earlier
        // in the interval may have rolled entries back in memory, and the
        // store shows them until it lands (on an EC pool, a peering
        // restarted by a map within the interval took the rolled-back head
        // from the store, and the primary activated at a head whose
        // objects it had just rolled back, losing an acknowledged write).
        if !self.synced && !self.settled_all() {
            return;
        }
        self.sync_with_store(s);
        let Role::Peering { infos, .. } = &self.role else {
            return;
        };
        // Every acknowledged write is on each member of the recorded
        // write set: without one of them, any answer could be stale.
        // Erasure-coded, with members declared lost until fewer than k
        // are left: the ones left are all there is of its acknowledged
        // writes, and every one of them must answer (what they hold
        // together with the others' shards is all that can be read).
        let short = self.record_short();
        if let Some(record) = &self.record {
            let heard = |o: &i32| *o == self.whoami || infos.get(o).is_some_and(Option::is_some);
            let unheard = record.osds.iter().filter(|o| !heard(o)).count();
            if unheard == record.osds.len() || (short && unheard > 0) {
                let osds = record.osds.clone();
                return self.down_waiting_for(osds);
            }
        }
        // No copy at all is an empty log: complete while the PG has never
        // been written, behind once it has.
        let asked = infos.clone();
        let infos: BTreeMap<i32, PeerInfo> = infos
            .iter()
            .map(|(o, i)| (*o, i.unwrap_or_default()))
            .collect();
        // The authoritative log is the longest among the recorded write
        // set's members: their logs are prefixes of one history. A copy
        // outside it that reaches further holds writes from a branch that
        // was never acknowledged, however new their epoch looks.
        let mine = PeerInfo {
            info: self.info,
            missing: self.lacks_beyond_unfound() as u64,
            backfill: self.backfill.is_some() || self.moved,
            moved_shard: self.moved_shard(),
            shard: None,
        };
        tracing::debug!(
            "pg {}: peering in interval {}: acting {:?}, record {:?}, this copy {mine:?}, others {infos:?}",
            self.id,
            self.interval,
            self.acting,
            self.record
        );
        // Erasure-coded, the record at k members or more: every member it
        // has left answered with a copy, and fewer than k of those copies
        // are whole (where they stand or at another position), the others
        // mid-backfill (`Pg::may_go_on`).
        self.rec.record_few_whole = match (&self.ec, &self.record) {
            (Some(st), Some(r)) if !short => {
                let member = |o: &i32| match *o == self.whoami {
                    true => Some(&mine),
                    false => asked.get(o).and_then(Option::as_ref),
                };
                let members: Vec<Option<&PeerInfo>> =
                    r.osds.iter().filter(|&&o| o >= 0).map(member).collect();
                members.iter().all(Option::is_some)
                    && (members.iter().flatten())
                        .filter(|i| !i.backfill || i.moved_shard.is_some())
                        .count()
                        < st.k()
            }
            _ => false,
        };
        let authority = |o: &i32| short || self.record.as_ref().is_none_or(|r| r.osds.contains(o));
        let mut heads: Vec<Version> = infos
            .iter()
            .chain([(&self.whoami, &mine)])
            .filter(|(o, _)| authority(o))
            .map(|(_, i)| i.info.last_update)
            .collect();
        heads.sort_unstable_by(|a, b| b.cmp(a));
        let newest = match &self.ec {
            None => heads.first().copied().unwrap_or_default(),
            // Erasure-coded: a write is readable only from k shards, so the
            // head is the newest version k of them hold. An acknowledged
            // write is on every member of the record, so it is among them;
            // newer entries reached fewer than k shards, were never
            // acknowledged, and are rolled back where they landed.
            Some(st) => match heads.get(st.k() - 1) {
                // With the record short of k members (or emptied) there is
                // no acknowledged write left to keep: when no copy that can
                // give its log (mid-backfill ones refuse) stands at that
                // head, the nearest newer one that can is taken, and
                // objects no k copies hold at its versions are given up
                // (with OSDs declared lost, the only copy at the head was
                // mid-backfill, and the PG asked for pg_temps forever).
                // So too with every member the record has left here and
                // fewer than k of them whole (`may_go_on`), where nothing
                // acknowledged is given up: each acknowledged write is on
                // all of them, so the head taken is never below one.
                // With none, the nearest acting copy mid-backfill (not
                // moved), which goes on from its own log (with OSDs
                // declared lost, the copy at the head was a stray's).
                // The record members left (short of k) hold all that is
                // left of its acknowledged writes: the head is never below
                // the lowest of theirs that have history and can give
                // their logs. Copies with an empty log (a new OSD's) hold
                // no version of that history (after OSDs were declared
                // lost, with the record's one member left, whole at 86'22,
                // and two empty copies, the head was taken as 0'0, the
                // version k copies "held"; the empty primary recorded
                // itself and the other empty copy, and the member's
                // history was past the head for good). With no record
                // (emptied), or no member with history that can give its
                // log, the version k copies reach stands: the PG goes on
                // from whatever is there (counting every copy's history,
                // as a first try of this did, kept one off the record that
                // no k shards could back, and the PG waited for good).
                Some(&v) if self.may_go_on() => {
                    let copies = infos.iter().chain([(&self.whoami, &mine)]);
                    let gives_log = |o: &i32, i: &PeerInfo, whole: bool| match whole {
                        true => !i.backfill,
                        false => self.acting.contains(o) && i.moved_shard.is_none(),
                    };
                    let member = |o: &i32| self.record.as_ref().is_some_and(|r| r.osds.contains(o));
                    let floor = copies
                        .clone()
                        .filter(|(o, i)| member(o) && i.info.last_update != Version::default())
                        .filter(|(o, i)| gives_log(o, i, true) || gives_log(o, i, false))
                        .map(|(_, i)| i.info.last_update)
                        .min();
                    let v = floor.map_or(v, |h| h.max(v));
                    let nearest = |whole: bool| {
                        copies
                            .clone()
                            .filter(|(o, i)| gives_log(o, i, whole))
                            .map(|(_, i)| i.info.last_update)
                            .filter(|h| *h >= v)
                            .min()
                    };
                    nearest(true).or_else(|| nearest(false)).unwrap_or(v)
                }
                Some(v) => *v,
                None => {
                    let osds = self.record.as_ref().map_or_else(
                        || self.acting.iter().copied().filter(|&o| o >= 0).collect(),
                        |r| r.osds.clone(),
                    );
                    return self.down_waiting_for(osds);
                }
            },
        };
        let is_complete =
            |i: &PeerInfo| i.info.last_update == newest && i.missing == 0 && !i.backfill;
        let complete: Vec<i32> = infos
            .iter()
            .filter(|(_, i)| is_complete(i))
            .map(|(o, _)| *o)
            .collect();
        if self.ec.is_some() {
            // The shard a moved member holds: a whole copy's, or (at the
            // head, complete or not) a mid-backfill copy's, as its shard
            // record says (with positions moving and OSDs declared lost,
            // the record's one member left was mid-backfill at the head,
            // its OSD had moved, every other copy was empty, and nobody
            // sent it back to its shard's position, where it goes on from
            // its own log).
            let held = |o: &i32, i: &PeerInfo, whole: bool| {
                let mid = match *o == self.whoami {
                    true => self.held_shard.filter(|_| self.moved),
                    false => self.held_elsewhere(*o, i),
                };
                i.moved_shard.or(mid.filter(|_| !whole))
            };
            let moved = |whole: bool| {
                infos
                    .iter()
                    .chain([(&self.whoami, &mine)])
                    .filter(|(o, i)| {
                        self.acting.contains(o)
                            && match whole {
                                true => i.info.last_update == newest && i.missing == 0,
                                false => i.info.last_update >= newest,
                            }
                    })
                    .filter_map(|(o, i)| Some((*o, held(o, i, whole)? as usize)))
                    .collect()
            };
            let (whole, at_head) = (moved(true), moved(false));
            self.rec.moved_complete = whole;
            self.rec.moved_at_head = at_head;
        }
        // Copies outside the acting set said which shard they hold: their
        // shards are read as strays' (with OSDs declared lost, the only
        // other shard of an unacknowledged write was on a record member
        // out of the acting set that had not asked this primary yet, and
        // the write was rolled back while the backfill targets took only
        // the log, which left the object on one shard).
        let strays: Vec<(i32, usize)> = infos
            .iter()
            .filter(|(o, _)| self.ec.is_some() && !self.acting.contains(o))
            .filter_map(|(o, i)| Some((*o, i.shard? as usize)))
            .collect();
        self.rec.strays.extend(strays.iter().copied());
        self.rec.empty_strays = infos
            .iter()
            .filter(|(o, _)| self.ec.is_some() && !self.acting.contains(o))
            .filter(|(_, i)| i.shard.is_none() && i.info.objects == 0 && is_complete(i))
            .map(|(o, _)| *o)
            .collect();
        if !is_complete(&mine) {
            // Erasure-coded: a member whose log reaches the head is enough
            // to take the log from, objects it lacks or not (each object
            // is rebuilt from whichever shards hold it; the only member at
            // the head may itself be recovering, and the PG would stay
            // down with every OSD up).
            // After them, acting members whose logs reach past the head:
            // never a source of the log, but a primary_temp may go to one
            // (as primary it rolls its extra entries back; the only member
            // at the head may be a stray).
            // Last, members at the head whose copies moved to another
            // position or are mid-backfill: their objects are not their
            // position's, but their logs are the PG's history all the
            // same, and the shards they hold are read by their labels
            // (with positions moving, the only members at the head had
            // both moved, the one other member was past it, and the PG
            // stayed down with every OSD up). Never a target of a
            // hand-over.
            let log_source;
            let complete: Vec<i32> = if self.ec.is_some() {
                // Those that lack nothing first: a hand-over to one that
                // lacks what this copy cannot pull either comes back
                // (with OSDs declared lost, two members each lacking the
                // one object no k shards held handed the PG to each other
                // for good, while a third held all of it).
                let mut at_head: Vec<(&i32, &PeerInfo)> = infos
                    .iter()
                    .filter(|(_, i)| i.info.last_update == newest && !i.backfill)
                    .collect();
                at_head.sort_by_key(|(_, i)| i.missing > 0);
                let at_head = at_head.into_iter().map(|(o, _)| *o);
                let past_head = infos
                    .iter()
                    .filter(|(o, i)| {
                        i.info.last_update > newest && !i.backfill && self.acting.contains(o)
                    })
                    .map(|(o, _)| *o);
                let c: Vec<i32> = at_head.chain(past_head).collect();
                log_source = c
                    .first()
                    .copied()
                    .filter(|o| infos.get(o).is_some_and(|i| i.info.last_update == newest))
                    .or_else(|| {
                        // A moved copy before a mid-backfill one: the
                        // latter refuses to give its log (its entries may
                        // be log-only, the objects not there), and asking
                        // it first left the PG handed back and forth for
                        // good (with positions moving, two members past
                        // the head handed it to each other).
                        let behind = infos
                            .iter()
                            .filter(|(_, i)| i.info.last_update == newest && i.backfill);
                        behind
                            .clone()
                            .find(|(_, i)| i.moved_shard.is_some())
                            .or_else(|| behind.clone().next())
                            .map(|(o, _)| *o)
                    });
                c
            } else {
                log_source = complete.first().copied();
                complete.clone()
            };
            // Erasure-coded, with the record short of k members (or every
            // member it has left here, fewer than k of them whole:
            // `may_go_on`), and no other copy whole at the head: this copy
            // goes on from its own log if it reaches the head (taken as it
            // is if mid-backfill, as a replicated PG's `adopt_backfilled`),
            // pulling what it lacks and giving up what no k up copies hold
            // (only with the record short; else they are unfound); else it hands
            // over to an acting copy mid-backfill at the head (with OSDs
            // declared lost, only such copies reached the head; they
            // refuse to give their logs, and the PG asked for pg_temps
            // forever).
            let whole_at_head = infos
                .iter()
                .any(|(_, i)| !i.backfill && i.info.last_update == newest);
            if self.ec.is_some() && self.may_go_on() && !whole_at_head {
                if mine.info.last_update == newest && !self.moved {
                    return self.ec_pull_own(s, asked, fx);
                }
                // Not one whose OSD moved: it would not go on either, and
                // may hand the PG to another such copy (with positions
                // moving and OSDs declared lost, when `ec_temp_unstick`'s
                // rule was first tried inside `ec_temp_step`: two moved
                // copies mid-backfill at the head handed the PG to each
                // other for good). Such copies go back to their shards'
                // positions instead (`hand_over`).
                let backfilling: Vec<i32> = infos
                    .iter()
                    .filter(|(o, i)| {
                        i.backfill
                            && i.moved_shard.is_none()
                            && self.held_elsewhere(**o, i).is_none()
                            && i.info.last_update == newest
                            && self.acting.contains(o)
                    })
                    .map(|(o, _)| *o)
                    .collect();
                if !backfilling.is_empty() {
                    return self.hand_over(backfilling, fx);
                }
            }
            // Erasure-coded, at or past the head, with no whole copy at it
            // and no log source but copies mid-backfill (which refuse their
            // logs): this copy's own log up to the head is the history the
            // head's k copies share, and it goes on from there, pulling
            // what it lacks (with OSDs declared lost, a rollback of a
            // write never acknowledged was torn, the members that took it
            // were past the head, and the PG stayed down with every OSD
            // up; and when the record's one other member was mid-backfill
            // at the head, the primary asked it for its log for good).
            // Only when each object it lacks is at a version its log
            // names: one at a version the log no longer names only a copy
            // at the head can give (else pulling goes round for good).
            // Past the head, it first rolls its own entries past it back,
            // which only a copy sure they were never acknowledged may do:
            // every record member answered (on an EC pool, a primary whose
            // only record company was mid-backfill rolled back a write
            // that it, a member off the record and a record member yet to
            // answer held). The head is then the record's: an entry past
            // it is on fewer than k of them, and an acknowledged write is
            // on every one, so copies off the record past it hold nothing
            // acknowledged either (with OSDs declared lost, a rollback's
            // write-back was durable on every acting member, but its
            // primary crashed before it was recorded; the one other record
            // member was mid-backfill at the old head, and with others
            // past the head too, nobody went on).
            let refuses = |o: &i32| {
                infos
                    .get(o)
                    .is_some_and(|i| i.backfill && i.moved_shard.is_none())
            };
            if self.ec.is_some()
                && !whole_at_head
                && log_source.as_ref().is_none_or(refuses)
                && mine.info.last_update >= newest
                && !mine.backfill
                && self.missing.values().all(|v| v.v > 0)
            {
                if mine.info.last_update == newest {
                    return self.ec_pull_own(s, asked, fx);
                }
                if self.record_all_heard(&asked) {
                    match self.rewind_own(s, newest, fx) {
                        Ok(()) => return self.ec_pull_own(s, asked, fx),
                        Err(e) => tracing::debug!("pg {}: not rolled back: {e}", self.id),
                    }
                }
            }
            // (Every log source is at the head.)
            let Some(from) = log_source else {
                // Only this copy is at the head, and it moved or is
                // mid-backfill: it hands over (with positions moving, the
                // one other record member was past the head, and the PG
                // stayed down with every OSD up).
                // Replicated, and every member of the recorded write set
                // answered (or each was declared lost): no copy that
                // holds every object at the head is coming back.
                if self.ec.is_none() && self.record_all_heard(&asked) {
                    return self.pull_what_is_left(s, newest, &mine, asked, fx);
                }
                if mine.backfill && mine.info.last_update == newest {
                    return self.hand_over(complete, fx);
                }
                // Nobody holds every object at the authoritative head (the
                // copies that did are away): wait for one to return.
                tracing::debug!(
                    "pg {}: down: no log source at head {newest} (mine {mine:?}, peers {infos:?})",
                    self.id
                );
                return self.wait_for_record();
            };
            // A member has writes or objects this primary lacks (or this
            // primary's log went another way): take that member's log and
            // pull what it lacks, unless it is mid-backfill (then, or if
            // the logs turn out not to overlap, it hands over).
            if mine.backfill {
                return self.hand_over(complete, fx);
            }
            let log_tid = self.take_tid();
            fx.push(Effect::FetchLog {
                tid: log_tid,
                to: from,
                ctx: self.rep_ctx(),
            });
            self.role = Role::Pulling {
                from,
                complete,
                infos: asked,
                log_tid,
                pulls: BTreeMap::new(),
            };
            return;
        }
        // Erasure-coded: moved members whose shards may be needed go back
        // to their shards' positions before any is relabeled.
        if let Some(osds) = self.moved_back_before_activating(&complete) {
            self.ask_pg_temp(osds, fx);
            return self.ec_behind("moved members go back to their shards' positions");
        }
        // Nor that: such members wait outside the write set, read as
        // strays of the shards they hold, until k members are whole at
        // their positions (`moved_to_wait`).
        let wait = self.moved_to_wait(&complete, &infos);
        // Every other member gets the authoritative log: one whose log
        // overlaps it merges and recovers the objects it lacks; one whose
        // log does not (or that is mid-backfill) is backfilled.
        let recoverable: Vec<i32> = self
            .acting
            .iter()
            .copied()
            .filter(|&o| o != self.whoami && o >= 0 && !wait.contains_key(&o))
            .filter(|o| infos.get(o).is_some_and(|i| !is_complete(i)))
            .collect();
        let mut write_set = vec![self.whoami];
        write_set.extend(complete.iter().filter(|o| self.acting.contains(o)));
        write_set.extend(&recoverable);
        self.reset_recovery(fx);
        self.rec.strays.extend(strays);
        self.rec.strays.extend(&wait);
        self.rec.waiting_moved = wait.into_keys().collect();
        for &o in &recoverable {
            self.rec.merging.insert(o, 0);
        }
        let osds = self.complete_of(&write_set);
        // Backfill targets are found only once their logs are answered:
        // until then every recovering member might count.
        // Erasure-coded: a record of fewer than k complete members could
        // never be peered from (a new primary takes the head k record
        // members hold) and would not hold every object's shards; such a
        // PG goes active without one, recovers, and records (and takes
        // writes) once k members are complete (a record naming recovering
        // members held log entries whose objects no record member had).
        // Nor while objects are unfound here: this copy is complete only
        // once their removals are durable (`ec_give_up`).
        let too_few =
            self.ec.as_ref().is_some_and(|st| osds.len() < st.k()) || !self.unfound.is_empty();
        let recorded = write_set.len() < self.min_size()
            || too_few
            || self
                .record
                .as_ref()
                .is_some_and(|r| r.interval == self.interval && r.osds == osds);
        if !recorded {
            self.rec.record_asked = Some(osds.clone());
            fx.push(self.record_ask(osds));
        }
        self.role = Role::Activating {
            write_set,
            recorded,
        };
        let log = self.drop_stale_log(s, fx);
        self.send_logs_with(s, log, fx);
        self.maybe_go_active(s, fx);
        if matches!(self.role, Role::Activating { .. }) {
            // Reads may go ahead; writes wait.
            self.rerun_waiting(s, fx);
        }
    }

    /// Hand the primary role to a complete member (it recovers this copy):
    /// ask for a pg_temp that puts `complete` first.
    fn hand_over(&mut self, complete: Vec<i32>, fx: &mut Vec<Effect>) {
        if let Some(k) = self.ec.as_ref().map(|e| e.k()) {
            // Positions are shards: a complete member becomes primary in
            // place (primary_temp), and recovers or backfills this copy.
            // It must be in the acting set (the first complete copy was a
            // stray's, the map ignored it, and the PG asked again
            // forever).
            if let Some(&osd) = complete.iter().find(|o| self.acting.contains(o)) {
                fx.push(Effect::RequestPrimaryTemp { osd: Some(osd) });
                return self.ec_behind("handing over with a primary_temp");
            }
            // None is, but members whose OSDs moved hold complete copies
            // of other shards: they go back to those shards' positions for
            // now (a pg_temp that swaps them with the positions' OSDs, as
            // Ceph's choose_acting keeps each shard where a complete copy
            // of it is), and the next interval peers from them (with
            // positions moving, two members swapped positions while the
            // others were mid-backfill, and the PG waited forever).
            if let Some(osds) = self.moved_back() {
                self.ask_pg_temp(osds, fx);
                return self.ec_behind("moved members go back to their shards' positions");
            }
            // With the record short of k (the PG goes on with what is
            // left), or every member it has left here and fewer than k of
            // them whole (`may_go_on`, as when the two left had swapped
            // positions and neither was whole), a moved member at or past
            // the head goes back too, whether it lacks objects or not,
            // mid-backfill or not (this copy included, as when the
            // record's one member left was mid-backfill at the head after
            // its OSD moved): its log is the history to go on from, and at
            // its shard's position it goes on from it, giving up what
            // nobody holds (with positions moving and OSDs declared lost,
            // the one copy past the head had been taken as it was, then
            // CRUSH moved it to another position; the primary,
            // mid-backfill, asked for pg_temps that named nobody, for
            // good). Only to a pg_temp that can walk back to CRUSH's set
            // (with OSDs declared lost, on a first version of this, a swap
            // left a hole whose CRUSH OSD sat elsewhere in the set, and
            // the pg_temp held for good).
            if self.may_go_on() {
                let moved = &self.rec.moved_at_head;
                let back = erasure::moved_back(&self.acting, &self.up, moved);
                if let Some(osds) = back.filter(|t| self.walks_back(t, k)) {
                    self.ask_pg_temp(osds, fx);
                    return self.ec_behind("a moved copy at the head goes back to its shard");
                }
            }
            // Nor that: a stray that holds a shard at the head goes back to
            // that shard's position for now (a pg_temp that keeps the
            // other positions, as Ceph's choose_acting does), and takes
            // the primary_temp in the next interval (the only complete
            // copy was a stray, and the PG waited forever).
            let spot = complete.iter().find_map(|o| {
                let shard = *self.rec.strays.get(o)?;
                let now = *self.acting.get(shard)?;
                (now < 0 || !complete.contains(&now)).then_some((shard, *o))
            });
            if let Some((shard, osd)) = spot {
                let mut osds: Vec<i32> = self.acting_as_temp();
                osds[shard] = osd;
                self.ask_pg_temp(osds, fx);
                return self.ec_behind("a stray's shard goes back to its position");
            }
            // Nor that: a complete stray whose copy is empty (the PG holds
            // no object at the head, so it is every shard's) takes this
            // copy's position for now, and is primary in the next interval
            // (with OSDs declared lost, no write was ever acknowledged;
            // this primary's log, past the head, was trimmed below its own
            // unacknowledged writes, so it could not roll them back and
            // needed a backfill; the one complete copy was an empty stray,
            // which no rule above puts in the acting set). Only to a
            // pg_temp that walks back to CRUSH's set, as above.
            let here = self.acting.iter().position(|&o| o == self.whoami);
            let empty = complete.iter().find(|o| self.rec.empty_strays.contains(o));
            if let (Some(at), Some(&osd)) = (here, empty) {
                let mut osds: Vec<i32> = self.acting_as_temp();
                osds[at] = osd;
                if self.walks_back(&osds, k) {
                    self.ask_pg_temp(osds, fx);
                    return self.ec_behind("an empty complete stray takes this copy's position");
                }
            }
            return self.ec_behind("no acting member is complete; asking for a pg_temp");
        }
        // Replicated, and nobody to hand over to (this copy, mid-backfill,
        // alone reaches the head): a pg_temp of the acting set as it is
        // would change nothing, and the PG would wait for a map that never
        // comes. It waits for the recorded write set's members instead,
        // and peers again as they come and go.
        if complete.is_empty() {
            tracing::debug!("pg {}: down: no complete copy to hand over to", self.id);
            return self.wait_for_record();
        }
        let size = self.pool.as_ref().map_or(1, |p| p.size as usize).max(1);
        let mut osds = complete.clone();
        osds.extend(self.acting.iter().filter(|o| !complete.contains(o)));
        osds.truncate(size);
        fx.push(Effect::RequestPgTemp { osds });
        self.role = Role::Behind;
    }

    /// Erasure-coded, a complete primary about to activate (`complete`:
    /// the other members complete at the head): the pg_temp that first
    /// puts moved members back at their shards' positions, if it should.
    ///
    /// A member whose OSD moved is backfilled at its new position, and
    /// the log it is sent relabels its copy: the shard it held is gone.
    /// Unless k members hold their own positions' shards of every object,
    /// some object may need that shard to be rebuilt (with positions
    /// moving, the primary and a moved member held the only two shards of
    /// an object, the moved one was backfilled, and the PG stayed down
    /// with every OSD up). A moved member whose shard's position a
    /// complete member holds stays (two members held shard 0, and each
    /// primary in turn put the other back at position 0, for good). Only a
    /// pg_temp that can walk back to CRUSH's set later (with one parity
    /// shard, a member put back at its shard's position could never leave
    /// it again).
    fn moved_back_before_activating(&self, complete: &[i32]) -> Option<Vec<i32>> {
        let k = self.ec.as_ref()?.k();
        let whole = self.whole_in_place(complete);
        if whole.len() >= k {
            return None;
        }
        let taken = |shard: usize| self.acting.get(shard).is_some_and(|o| whole.contains(o));
        let moved: BTreeMap<i32, usize> = self
            .rec
            .moved_complete
            .iter()
            .filter(|&(_, &shard)| !taken(shard))
            .map(|(&o, &shard)| (o, shard))
            .collect();
        erasure::moved_back(&self.acting, &self.up, &moved).filter(|t| self.walks_back(t, k))
    }

    /// A complete primary about to activate: the members whole at their
    /// own positions (`complete`, the other members complete at the head,
    /// that are in the acting set), and this primary.
    fn whole_in_place(&self, complete: &[i32]) -> Vec<i32> {
        complete
            .iter()
            .copied()
            .filter(|o| self.acting.contains(o))
            .chain([self.whoami])
            .collect()
    }

    /// Erasure-coded, a complete primary about to activate (`complete`:
    /// the other members complete at the head; `infos`: this peering's
    /// answers): acting members whose OSDs moved and whose copies hold a
    /// shard that no member whole at its own position holds, with that
    /// shard, while fewer than k members are whole at their positions.
    ///
    /// The log a moved member is sent relabels its copy, and its backfill
    /// then overwrites the shard it held; until k members are whole at
    /// their positions, some object may need that shard (with OSDs
    /// declared lost and every late record refused, the primary and a
    /// moved record member one object short held the only two shards of
    /// every object; the member was relabeled, both backfill targets went
    /// down before they were done, and the PG stayed down with every OSD
    /// up). So such members wait: out of the write set, their shards read
    /// as strays', until the others are whole (then the PG peers again and
    /// they are backfilled; `waiting_moved_done`). Only while enough
    /// positions are left for k whole members without them
    /// (`erasure::moved_to_wait`).
    fn moved_to_wait(
        &self,
        complete: &[i32],
        infos: &BTreeMap<i32, PeerInfo>,
    ) -> BTreeMap<i32, usize> {
        let Some(k) = self.ec.as_ref().map(|st| st.k()) else {
            return BTreeMap::new();
        };
        let whole = self.whole_in_place(complete);
        let moved: BTreeMap<i32, usize> = infos
            .iter()
            .filter(|(o, _)| **o != self.whoami)
            .filter_map(|(&o, i)| Some((o, i.moved_shard? as usize)))
            .collect();
        erasure::moved_to_wait(&self.acting, &whole, &moved, k)
    }

    /// Erasure-coded primary with moved members waiting outside the write
    /// set (`moved_to_wait`): once every other member is whole, k or more
    /// of them, and on record, new writes wait, and once none is in flight
    /// the PG peers again and the waiting members are backfilled at their
    /// positions (new writes waiting meanwhile: under a steady stream of
    /// them, a moment with none in flight might never come).
    fn waiting_moved_done(&mut self) {
        let Role::Primary { write_set } = &self.role else {
            return;
        };
        let Some(k) = self.ec.as_ref().map(|st| st.k()) else {
            return;
        };
        if self.rec.waiting_moved.is_empty() || !self.rec.nothing_left() {
            return;
        }
        let whole = self.complete_of(write_set);
        let on_record = self
            .record
            .as_ref()
            .is_some_and(|r| r.interval == self.interval && r.osds == whole);
        self.rec.waiting_moved_drain |= whole.len() >= k && on_record;
        if self.rec.waiting_moved_drain && self.inflight.is_empty() {
            self.role = Role::Behind;
            self.rec.peer_again_ms = self.now_ms;
        }
    }

    /// Whether pg_temp `t` can walk back to CRUSH's set (see
    /// [`erasure::walks_to_crush`]). A hole in CRUSH's set takes an OSD
    /// again (the one that went down coming back, or its replacement once
    /// it is out): the walk is judged with a newcomer there (with
    /// positions moving, CRUSH's set had a hole, the walk back was judged
    /// impossible for it, and the moved member was relabeled).
    fn walks_back(&self, t: &[i32], k: usize) -> bool {
        let up: Vec<i32> = (self.up.iter().enumerate())
            .map(|(i, &o)| match o {
                o if o >= 0 && o != loligo_crush::ITEM_NONE => o,
                _ => NEWCOMER_BASE + i as i32,
            })
            .collect();
        erasure::walks_to_crush(t, &up, k)
    }

    /// See [`erasure::moved_back`].
    fn moved_back(&self) -> Option<Vec<i32>> {
        erasure::moved_back(&self.acting, &self.up, &self.rec.moved_complete)
    }

    /// The acting set as a pg_temp asks for it (holes as `ITEM_NONE`).
    fn acting_as_temp(&self) -> Vec<i32> {
        erasure::as_temp(&self.acting)
    }

    /// An erasure-coded primary that cannot catch up now (a pull failed,
    /// or no acting member can take a primary_temp): it peers again after
    /// a while.
    fn ec_behind(&mut self, why: &str) {
        tracing::warn!(pg = %self.id, "erasure-coded primary is behind: {why}; peering again shortly");
        self.role = Role::Behind;
        self.rec.peer_again_ms = self.now_ms + RECOVERY_RETRY_MS;
    }

    /// Pulling: a pull or the log failed, or the logs do not overlap.
    fn pull_failed(&mut self, why: &str, fx: &mut Vec<Effect>) {
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
                self.unfound_waiting.insert(name.clone());
            }
            return self.pull_failed(why, fx);
        }
        self.unfound_waiting.remove(&name);
        tracing::warn!(
            pg = %self.id,
            "'{name}' is on fewer than k up OSDs ({why}), and no OSD that may hold more is \
             coming back: it will be given up ({fate:?})"
        );
        self.unfound.insert(name, fate);
        self.pull_some(s, fx);
    }

    /// Erasure-coded: this copy's log reaches the head and no other whole
    /// copy's does (with the record short of k members; or with it whole,
    /// when every other copy's log is past the head or mid-backfill). A
    /// copy mid-backfill is taken as it is (`adopt_backfilled`, short
    /// record only); then it pulls what it lacks from the acting members
    /// and strays in turn, and what none can give is unfound
    /// (`pull_unfound`).
    fn ec_pull_own(
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
    fn rewind_own(
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
        let merged = recovery::merge(
            s,
            self.coll,
            self.info.last_update,
            &self.missing,
            None,
            &log,
            true,
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
    fn take_merged(
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
    fn lacks_beyond_unfound(&self) -> usize {
        self.missing
            .keys()
            .filter(|n| !self.unfound.contains_key(*n))
            .count()
    }

    /// The OSDs an erasure-coded pull may ask, in turn: the other acting
    /// members, then strays.
    fn pull_candidates(&self) -> Vec<i32> {
        let strays = self.rec.strays.keys().filter(|o| !self.acting.contains(o));
        self.acting
            .iter()
            .chain(strays)
            .copied()
            .filter(|&o| o >= 0 && o != self.whoami)
            .collect()
    }

    /// Erasure-coded pulling: ask the next member for `name` (its copy
    /// gives the object's xattrs and size; the data is rebuilt from the
    /// shards). Whether there was one left to ask.
    fn ec_pull_next(&mut self, name: &str, fx: &mut Vec<Effect>) -> bool {
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
        let ctx = self.rep_ctx();
        fx.push(Effect::Pull {
            tid,
            to,
            ctx,
            name: name.to_string(),
            need: self.missing.get(name).copied().unwrap_or_default(),
        });
        if let Role::Pulling { pulls, .. } = &mut self.role {
            pulls.insert(tid, name.to_string());
        }
        true
    }

    /// Pulling: the complete member's log is here; merge it into this copy
    /// (as a member would), then pull what this copy lacks.
    fn on_get_log_done(
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
        let merged = recovery::merge(
            s,
            self.coll,
            mine,
            &self.missing,
            self.backfill.as_ref(),
            &auth,
            self.ec.is_some(),
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
    fn pull_some(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
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
            .filter(|n| !pulls.values().any(|p| p == *n) && !self.unfound.contains_key(*n))
            .take(RECOVERY_PUSHES_MAX.saturating_sub(busy))
            .cloned()
            .collect();
        let ctx = self.rep_ctx();
        for name in todo {
            let tid = self.take_tid();
            fx.push(Effect::Pull {
                tid,
                to: from,
                ctx: ctx.clone(),
                name: name.clone(),
                need: self.missing.get(&name).copied().unwrap_or_default(),
            });
            if let Role::Pulling { pulls, .. } = &mut self.role {
                pulls.insert(tid, name);
            }
        }
    }

    fn on_pull_done(
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
    fn apply_pulled(&mut self, s: &dyn ObjectStore, push: Push, fx: &mut Vec<Effect>) {
        match self.land_pulled(s, push, Transaction::new(), fx) {
            Ok(()) => self.pull_some(s, fx),
            Err(e) if self.rec.lost.is_some() => self.lost_failed(&e.to_string()),
            Err(e) => self.pull_failed(&e.to_string(), fx),
        }
    }

    /// Pulling what is left met an error of this copy's store: there is
    /// no complete copy to hand over to, so it peers (and pulls) again
    /// after a while.
    fn lost_failed(&mut self, why: &str) {
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
    fn land_pulled(
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
        self.applying.insert(t, self.interval);
        fx.push(Effect::Apply {
            tid: t,
            txn,
            sync: true,
        });
        Ok(())
    }

    /// Every member of the recorded write set is this copy or answered
    /// the peering with a copy of the PG (true without a record).
    fn record_all_heard(&self, asked: &BTreeMap<i32, Option<PeerInfo>>) -> bool {
        self.record.as_ref().is_none_or(|r| {
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
    fn pull_what_is_left(
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
        for e in log.entries.iter().filter(|e| !e.is_reset()) {
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
    fn adopt_backfilled(
        &mut self,
        s: &dyn ObjectStore,
        log: &AuthLog,
        fx: &mut Vec<Effect>,
    ) -> Result<(), String> {
        let mut newest: BTreeMap<&str, &LogEntry> = BTreeMap::new();
        for e in log.entries.iter().filter(|e| !e.is_reset()) {
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
    fn lost_pulled(
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
    fn lost_pull_some(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
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
                fx.push(Effect::Pull {
                    tid,
                    to,
                    ctx: self.rep_ctx(),
                    name: name.clone(),
                    need: self.missing.get(&name).copied().unwrap_or_default(),
                });
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
    fn give_up_object(
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

    /// As a complete member: this copy's log for a primary that is behind
    /// (once this copy has the primary's map and its commits are durable).
    fn on_get_log(
        &self,
        s: &dyn ObjectStore,
        from: i32,
        ctx: &RepCtx,
    ) -> Result<AuthLog, RepError> {
        self.fence(from, ctx, "log asked by")?;
        if self.epoch < ctx.epoch
            || !self.settled()
            || (!self.missing.is_empty() && self.ec.is_none())
            || self.backfill.is_some()
        {
            return Err(RepError::Failed(format!(
                "pg {}: this copy is not complete and settled under epoch {}",
                self.id, ctx.epoch
            )));
        }
        self.own_log(s).ok_or_else(|| {
            RepError::Failed(format!(
                "pg {}: the store does not show the whole log",
                self.id
            ))
        })
    }

    /// As a complete member: an object for a primary that is behind,
    /// which needs it at version `need`.
    fn on_pull(
        &self,
        s: &dyn ObjectStore,
        from: i32,
        ctx: &RepCtx,
        name: &str,
        need: Version,
    ) -> Result<Push, RepError> {
        self.fence(from, ctx, "pull from")?;
        // (A copy mid-backfill may hold an older copy than the log says;
        // with the record short of k members the puller checks versions
        // and would rather take what there is.)
        let behind = self.backfill.is_some() && !(self.ec.is_some() && self.may_give_up());
        // Erasure-coded: a copy that holds the object at exactly the
        // version needed gives it all the same (the puller takes only its
        // xattrs, and gathers the shards at that version; with OSDs
        // declared lost, the only member besides the primary holding the
        // shard was mid-backfill, and the PG went round for good).
        let holds = self.ec.is_some()
            && need.v > 0
            && recovery::stored_version(s, self.coll, &recovery::oid(name))
                .is_ok_and(|v| v == Some(Some(need)));
        // Or whose rollback copy does (its object moved on past it).
        if let Some(p) = (!holds)
            .then(|| self.rollback_copy_at(s, name, need))
            .flatten()
        {
            return Ok(p);
        }
        if (self.missing.contains_key(name) || behind) && !holds {
            let why = format!("pg {}: this copy lacks {name}", self.id);
            return Err(self.lacks(s, name, need, why));
        }
        if let Err(e) = exec::validate(name, &[SubOp::Stat]) {
            return Err(RepError::Failed(format!("pg {}: {e}", self.id)));
        }
        // Erasure-coded: the puller rebuilds its shard from the shards;
        // this copy's bytes would be read for nothing.
        recovery::read_copy_with(s, self.coll, name, self.ec.is_none())
            .map_err(|e| RepError::Failed(format!("pg {}: {e}", self.id)))
    }

    /// Erasure-coded: this copy's rollback copy of `name`, without its
    /// data, when it is at exactly version `need` (what a pull of that
    /// version gives when the object itself is not: a primary rolling an
    /// object back to it takes its xattrs from there).
    fn rollback_copy_at(&self, s: &dyn ObjectStore, name: &str, need: Version) -> Option<Push> {
        if self.ec.is_none() || need.v == 0 {
            return None;
        }
        let rb = crate::ec::rollback_oid(&recovery::oid(name));
        if recovery::stored_version(s, self.coll, &rb).ok()? != Some(Some(need)) {
            return None;
        }
        let whole = s.read_whole(self.coll, &rb, false).ok()??;
        Some(Push {
            name: name.to_string(),
            version: need,
            copy: Some(recovery::ObjectCopy {
                data: bytes::Bytes::new(),
                attrs: whole.attrs.into_iter().collect(),
                omap_header: Vec::new(),
                omap: Vec::new(),
            }),
        })
    }

    /// This copy's log as an authority sends it: the run of entries that
    /// ends at its head (`None`: the store does not show it all yet).
    fn own_log(&self, s: &dyn ObjectStore) -> Option<AuthLog> {
        let max = (self.log_entries_max as usize).saturating_add(64);
        let tail = self
            .log_tail(s)
            .max(self.info.last_update.v.saturating_sub(max as u64));
        let mut entries = recovery::read_log(s, self.coll, tail, max).ok()?;
        // The log is the run of entries that ends at the head (an entry
        // older than a gap is not part of it).
        let run = entries
            .windows(2)
            .rposition(|w| w[1].version.v != w[0].version.v + 1)
            .map_or(0, |i| i + 1);
        entries.drain(..run);
        let tail = entries.first().map_or(tail, |e| e.version.v - 1);
        let head = entries.last().map_or(Version::default(), |e| e.version);
        if head != self.info.last_update && !(entries.is_empty() && tail == self.info.last_update.v)
        {
            return None;
        }
        Some(AuthLog {
            info: self.info,
            entries,
        })
    }

    /// An activating primary: drop the entries of its log older than the
    /// run that ends at its head (what [`Pg::own_log`] sends; entries
    /// older than a gap are no part of the log). Members never get them,
    /// and a write trims exactly the entry `log_entries_max` behind it, so
    /// they would stay here for good (on an EC pool with positions moving
    /// and a log of 11 entries, the primary kept five such entries from an
    /// earlier merge, and its log differed from its members' once the PG
    /// was clean). Gives the log it read (the members' logs are sent from
    /// it).
    fn drop_stale_log(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) -> Option<AuthLog> {
        let log = self.own_log(s)?;
        match recovery::record_keys(s, self.coll, b"log/", Some(&log_key(log.tail() + 1))) {
            Ok(stale) => self.remove_records(&stale, false, fx),
            Err(e) => tracing_error(self.id, &format!("reading the log: {e}")),
        }
        Some(log)
    }

    /// The version counter just below the oldest entry of this copy's log
    /// (0: the log holds the whole history).
    fn log_tail(&self, s: &dyn ObjectStore) -> u64 {
        replica::oldest_logged(s, self.coll)
            .map_or(self.info.last_update.v, |v| v.saturating_sub(1))
    }

    /// Whether every transaction this copy queued, in any interval, is
    /// durable.
    fn settled_all(&self) -> bool {
        self.rep.committing.is_empty() && self.applying.is_empty()
    }

    /// Whether every transaction this copy queued before the current
    /// interval is durable (reads of the store then show all it holds).
    fn settled(&self) -> bool {
        self.rep.committing.is_empty() && self.applying.values().all(|&i| i == self.interval)
    }

    /// Where this primary's history stands, for its members' checks.
    /// The fence every message from a primary passes (see
    /// `replica_accepts`): `what` (e.g. "push from") names the message
    /// in the refusal.
    fn fence(&self, from: i32, ctx: &RepCtx, what: &str) -> Result<(), RepError> {
        if ctx.epoch >= self.answered_epoch && replica_accepts(&self.view(), from, ctx) {
            return Ok(());
        }
        Err(RepError::Stale(format!(
            "pg {}: {what} osd.{from} at epoch {}, this OSD is at epoch {} with acting {:?}",
            self.id, ctx.epoch, self.epoch, self.acting
        )))
    }

    fn rep_ctx(&self) -> RepCtx {
        RepCtx {
            interval: self.interval,
            epoch: self.epoch,
            acting: self.acting.clone(),
            prev: self.info.last_update,
            version: self.info.last_update,
            change: None,
        }
    }

    /// This copy's missing set and backfill cursor, as persisted.
    fn load_missing(&mut self, s: &dyn ObjectStore) {
        self.missing_loaded = true;
        let loaded = recovery::load_missing(s, self.coll)
            .and_then(|m| Ok((m, backfill::load_cursor(s, self.coll)?)));
        match loaded {
            Ok((m, c)) => {
                self.missing = m;
                self.backfill = c;
            }
            // Unreadable records: the copy cannot vouch for any object.
            Err(e) => {
                self.missing = BTreeMap::new();
                self.backfill = Some(Cursor::Start);
                self.info.last_update = Version::default();
                tracing_error(self.id, &e);
            }
        }
    }

    /// Send the authoritative log to the members waiting for it, once this
    /// copy's own commits have settled (the log is read from the store).
    fn send_logs(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        self.send_logs_with(s, None, fx)
    }

    /// [`Pg::send_logs`] with this copy's log already read (`log`: as
    /// `own_log` gave it in this same step), so activation reads it once.
    fn send_logs_with(&mut self, s: &dyn ObjectStore, log: Option<AuthLog>, fx: &mut Vec<Effect>) {
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
            fx.push(Effect::SendLog {
                tid,
                to,
                ctx: ctx.clone(),
                log: log.clone(),
            });
        }
    }

    fn on_log_done(
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
                        self.acting
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

    /// Members of `write_set` that count toward `min_size`: all but
    /// backfill targets (their copies are not whole yet).
    fn serving(&self, write_set: &[i32]) -> usize {
        write_set
            .iter()
            .filter(|o| !self.rec.backfill.contains_key(o))
            .count()
    }

    /// Move every backfill along: scan a member that waits, build the
    /// chunk for a member whose scan is here (once no write to its range
    /// is in flight).
    fn backfill_some(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if !matches!(self.role, Role::Primary { .. })
            || !self.settled()
            || self
                .rec
                .backfill
                .keys()
                .all(|&to| self.backfill_toofull(to))
        {
            return;
        }
        // A chunk sent again holds writes to its range: not slept on.
        let resend = self.rec.backfill.values().any(|b| {
            matches!(&b.step, BfStep::Copying { flights, .. } if flights.first().is_some_and(|f| f.tid == 0))
        });
        let held = matches!(self.rec.slot, Slot::Held(_));
        if !(self.may_copy(fx) || (resend && held)) {
            return;
        }
        let targets: Vec<i32> = self.rec.backfill.keys().copied().collect();
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
                        && !self.toofull.contains(&to)
                        && matches!(b.leaves, Leaves::Unknown { .. }) =>
                {
                    // First the trees: the target's root.
                    let Some(leaves) = tree_leaves else {
                        continue;
                    };
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
                BfStep::Idle if self.now_ms >= b.retry_ms && !self.toofull.contains(&to) => {
                    let after = b.done.clone();
                    match self.bf_scan(s, to, &after, tree_leaves, limit, fx) {
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
                BfStep::Scanned { theirs, mine } => {
                    let after = b.done.clone();
                    let theirs = theirs.clone();
                    let mine = self.still_listed(mine.as_ref());
                    let planned =
                        self.bf_plan(s, to, &after, &theirs, mine.as_deref(), tree_leaves);
                    let chunk = match planned {
                        Ok(Some(c)) => c,
                        Ok(None) => continue,
                        Err(e) => {
                            tracing_error(self.id, &format!("backfill read: {e}"));
                            self.bf_retry(to);
                            continue;
                        }
                    };
                    if self.ec.is_some() {
                        // The chunk carries this copy's shards: the
                        // target's are rebuilt first.
                        self.ec_rebuild_chunk(s, to, chunk, fx);
                        continue;
                    }
                    self.send_chunk(to, chunk, fx);
                    self.backfill_ahead(s, to, tree_leaves, fx);
                }
                BfStep::Copying { flights, .. } if flights.first().is_some_and(|f| f.tid == 0) => {
                    if self.now_ms < b.retry_ms {
                        continue;
                    }
                    // The first chunk not answered goes again (the ones
                    // after it wait for its answer).
                    let chunk = flights[0].chunk.clone();
                    let tid = self.emit_chunk(to, chunk, fx);
                    if let Some(Backfill {
                        step: BfStep::Copying { flights, .. },
                        ..
                    }) = self.rec.backfill.get_mut(&to)
                    {
                        flights[0].tid = tid;
                    }
                }
                BfStep::Copying { .. } => self.backfill_ahead(s, to, tree_leaves, fx),
                _ => {}
            }
        }
    }

    /// Ask target `to` for its objects after `after` up to where this
    /// copy's next `limit` objects (of the leaves to scan) end; the tid
    /// and that end, with this copy's objects there (`None`: a malformed
    /// leaf set, nothing asked).
    fn bf_scan(
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

    /// A listing of this copy's objects if it is still what the store
    /// holds (nothing applied since it was made).
    fn still_listed(&self, mine: Option<&Listed>) -> Option<Vec<(ObjectId, Version)>> {
        mine.filter(|m| m.gen == self.store_gen)
            .map(|m| m.objects.clone())
    }

    /// The objects in (after, end] this copy lacks (missing, or unfound
    /// and to be given up), each with the version its log needs (`None`:
    /// the log no longer says for one of them).
    fn lacks_in(
        &self,
        s: &dyn ObjectStore,
        after: &Cursor,
        end: &Cursor,
    ) -> Option<Vec<(String, Version)>> {
        let in_range = |name: &str| {
            let o = recovery::oid(name);
            !after.covers(&o) && end.covers(&o)
        };
        let names: BTreeSet<&String> = self
            .missing
            .keys()
            .chain(self.unfound.keys())
            .filter(|n| in_range(n))
            .collect();
        if names.is_empty() {
            return Some(Vec::new());
        }
        // An unfound object this copy no longer lists missing (one being
        // rolled back) needs what its newest log entry wrote.
        let mut log: Option<AuthLog> = None;
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let need = match self.missing.get(name) {
                Some(v) => *v,
                None => {
                    if log.is_none() {
                        log = Some(self.own_log(s)?);
                    }
                    let entries = log.as_ref().map_or(&[][..], |l| &l.entries[..]);
                    entries.iter().rev().find(|e| e.name == *name)?.version
                }
            };
            out.push((name.clone(), need));
        }
        Some(out)
    }

    /// The chunk for target `to` after `after`, from its listing
    /// `theirs` (`None`: a write to the range is in flight; planned once
    /// that is done). Objects this copy lacks go as `Chunk::lacks`, not
    /// copied. Counts the chunk in the backfill's cost.
    fn bf_plan(
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
        let busy =
            self.inflight.values().any(|f| in_range(&f.name)) || self.ec_writes_gathering(in_range);
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
        // needs.
        let Some(lacks) = self.lacks_in(s, after, &chunk.end) else {
            return Ok(None);
        };
        chunk
            .pushes
            .retain(|p| !lacks.iter().any(|(n, _)| *n == p.name));
        chunk.lacks = lacks;
        self.rec.pushed += chunk.pushes.len() as u64;
        if let Some(b) = self.rec.backfill.get_mut(&to) {
            b.cost.copied += chunk.pushes.len() as u64;
            b.cost.chunks += 1;
        }
        Ok(Some(chunk))
    }

    /// The pipeline of a replicated backfill whose chunks are on their
    /// way: the target lists the range after the last one meanwhile, and
    /// once listed its chunk goes too (up to `CHUNKS_IN_FLIGHT`).
    fn backfill_ahead(
        &mut self,
        s: &dyn ObjectStore,
        to: i32,
        tree_leaves: Option<u32>,
        fx: &mut Vec<Effect>,
    ) {
        if self.ec.is_some() {
            return;
        }
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
            if flights.iter().any(|f| f.tid == 0) {
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
                    let planned =
                        self.bf_plan(s, to, &after, &theirs, mine.as_deref(), tree_leaves);
                    let chunk = match planned {
                        Ok(Some(c)) => c,
                        Ok(None) => return,
                        Err(e) => {
                            tracing_error(self.id, &format!("backfill read: {e}"));
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
                    let tid = self.emit_chunk(to, chunk.clone(), fx);
                    if let Some(Backfill {
                        step: BfStep::Copying { flights, ahead },
                        ..
                    }) = self.rec.backfill.get_mut(&to)
                    {
                        flights.push(Flight { tid, chunk });
                        *ahead = Ahead::None;
                    }
                }
                _ => return,
            }
        }
    }

    /// Ask backfill target `to` for its objects after its cursor up to
    /// `upto` that `filter` covers (or its tree's nodes); the tid.
    fn send_scan(&mut self, to: i32, upto: Cursor, filter: Filter, fx: &mut Vec<Effect>) -> u64 {
        let after = self
            .rec
            .backfill
            .get(&to)
            .map_or(Cursor::Start, |b| b.done.clone());
        self.send_scan_from(to, after, upto, filter, fx)
    }

    /// As `send_scan`, after `after` (the end of the chunks on their way).
    fn send_scan_from(
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
        fx.push(Effect::SendScan {
            tid,
            to,
            ctx: self.rep_ctx(),
            after,
            upto,
            limit: self.backfill_chunk_objects.max(1) as u32,
            filter,
        });
        tid
    }

    /// The target's tree nodes answered: the next step of the comparison,
    /// or the leaves to scan once it is done.
    fn on_nodes(&mut self, to: i32, theirs: Option<Vec<u64>>, fx: &mut Vec<Effect>) {
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

    /// Send `chunk`, the first on its way to `to`.
    pub(super) fn send_chunk(&mut self, to: i32, chunk: Chunk, fx: &mut Vec<Effect>) {
        let tid = self.emit_chunk(to, chunk.clone(), fx);
        if let Some(b) = self.rec.backfill.get_mut(&to) {
            b.step = BfStep::Copying {
                flights: vec![Flight { tid, chunk }],
                ahead: Ahead::None,
            };
        }
    }

    /// The effect that sends `chunk` to `to`; its tid.
    fn emit_chunk(&mut self, to: i32, chunk: Chunk, fx: &mut Vec<Effect>) -> u64 {
        let tid = self.take_tid();
        tracing::debug!(
            "pg {}: chunk to osd.{to} tid {tid} ({}, {}]: {} pushes",
            self.id,
            chunk.after,
            chunk.end,
            chunk.pushes.len()
        );
        fx.push(Effect::SendChunk {
            tid,
            to,
            ctx: self.rep_ctx(),
            chunk,
        });
        tid
    }

    pub(super) fn bf_retry(&mut self, to: i32) {
        if let Some(b) = self.rec.backfill.get_mut(&to) {
            b.step = BfStep::Idle;
            b.retry_ms = self.now_ms + RECOVERY_RETRY_MS;
        }
    }

    fn on_scan_done(
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

    fn on_chunk_done(
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
            let how = match &b.leaves {
                Leaves::Some(set) => format!("{} differing Merkle leaves", set.len()),
                _ => "a full scan".to_string(),
            };
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
        for p in std::mem::take(&mut self.rec.bf_blocked) {
            self.on_op(s, p, fx);
        }
        self.backfill_some(s, fx);
        self.recover_some(s, fx);
        self.rerecord(fx);
        self.maybe_clear_temp(fx);
    }

    /// A primary's scan of this backfilling copy: its objects after
    /// `after` up to `upto`, with their versions.
    #[allow(clippy::too_many_arguments)] // the scan request's fields
    fn on_scan(
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
        if self.epoch < ctx.epoch || (!tree_only && !at) {
            return Err(RepError::Failed(format!(
                "pg {}: scan after {after} at epoch {}, this copy's backfill is at {:?} (epoch {})",
                self.id, ctx.epoch, self.backfill, self.epoch
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
    fn on_chunk(
        &mut self,
        s: &dyn ObjectStore,
        from: i32,
        ctx: &RepCtx,
        chunk: Chunk,
        token: u64,
        fx: &mut Vec<Effect>,
    ) {
        let fail = |e: RepError| Effect::RepReply {
            token,
            result: Err(e),
        };
        if let Err(e) = self.fence(from, ctx, "backfill from") {
            return fx.push(fail(e));
        }
        // The cursor with the chunks queued here counted (`self.backfill`
        // moves only once a chunk is applied: until then this copy does
        // not claim the chunk's objects).
        let cursor = self.queued_cursor();
        // A copy whose backfill ended in this interval has every chunk
        // (several may have been on their way when an answer was lost).
        let applied = match &cursor {
            None => chunk.end == Cursor::End || self.backfilled_in == Some(self.interval),
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
        if self.epoch < ctx.epoch || self.behind(ctx) {
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
                self.id, chunk.after, ctx.epoch, cursor, self.epoch
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
                    self.backfilled_in = Some(self.interval);
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
                if self.held_copies.iter().any(
                    |h| matches!(&h.what, CopyMsg::Chunk(c) if Some(&c.after) == c_end.as_ref()),
                ) {
                    self.rerun_held_copies(s, fx);
                }
            }
            Err(e) => fx.push(fail(RepError::Failed(format!("pg {}: {e}", self.id)))),
        }
    }

    /// Start pushes until `RECOVERY_PUSHES_MAX` are in flight.
    fn recover_some(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if !matches!(self.role, Role::Primary { .. })
            || !self.settled()
            || self.rec.missing.is_empty()
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
            .filter(|n| !self.busy.contains_key(*n))
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
    fn push_now(&mut self, s: &dyn ObjectStore, name: String, fx: &mut Vec<Effect>) {
        if self.inflight.values().any(|f| f.name == name)
            || self.rec.pushing.values().any(|(n, _)| *n == name)
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
            Err(e) => {
                tracing_error(self.id, &format!("cannot read {name} to recover it: {e}"));
                self.rec.retry.insert(name, self.now_ms + RECOVERY_RETRY_MS);
                return;
            }
        };
        let tid = self.take_tid();
        let ctx = self.rep_ctx();
        for &to in &targets {
            fx.push(Effect::Push {
                tid,
                to,
                ctx: ctx.clone(),
                push: push.clone(),
            });
        }
        self.rec.retry.remove(&name);
        self.busy.entry(name.clone()).or_default();
        self.rec.pushing.insert(tid, (name, targets));
    }

    fn on_push_done(
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
            let queued = self.busy.get(&name).is_some_and(|q| !q.is_empty());
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
    fn retry_recovery(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if !self.is_primary() {
            return;
        }
        self.send_logs(s, fx);
        let now = self.now_ms;
        let due: Vec<String> = self
            .rec
            .retry
            .iter()
            .filter(|(n, at)| **at <= now && self.busy.contains_key(*n))
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

    /// After a commit: what waited for this copy's commits to settle.
    fn on_settled(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if self.settled_all() {
            if !self.moved_fresh && self.ec.is_some() {
                // A map that came while an older interval's transactions
                // were in flight read the shard this copy holds before
                // they landed (with positions moving, a copy still empty
                // at the map took its old position's first write after,
                // and counted as complete at its new one). Read again now
                // that all have landed.
                self.moved_fresh = true;
                let acting = self.acting.clone();
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
        }
    }

    /// Run the next op queued on object `name`, if any.
    fn release(&mut self, s: &dyn ObjectStore, name: &str, fx: &mut Vec<Effect>) {
        let Some(mut q) = self.busy.remove(name) else {
            return;
        };
        if let Some(next) = q.pop_front() {
            self.on_op(s, next, fx);
            if let Some(rest) = self.busy.get_mut(name) {
                rest.extend(q);
            } else {
                for p in q {
                    self.on_op(s, p, fx);
                }
            }
        }
    }

    /// Offer every waiting op again (after a change of role).
    fn rerun_waiting(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let waiting: Vec<Pending> = std::mem::take(&mut self.waiting).into();
        for p in waiting {
            self.on_op(s, p, fx);
        }
        self.rerun_lists(s, fx);
    }

    fn rerun_lists(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        for l in std::mem::take(&mut self.lists) {
            self.on_list(s, l, fx);
        }
    }

    /// A listing: served by an active primary (like a read), waits while
    /// the PG peers, refused by anyone else.
    fn on_list(&mut self, s: &dyn ObjectStore, l: PendingList, fx: &mut Vec<Effect>) {
        let token = l.token;
        if !self.is_primary() {
            let result = Err(OpError::WrongPrimary { epoch: self.epoch });
            return fx.push(Effect::ListReply { token, result });
        }
        if !matches!(self.role, Role::Primary { .. } | Role::Activating { .. }) {
            if self.lists.len() >= WAITING_MAX {
                let result = Err(self.unavailable());
                return fx.push(Effect::ListReply { token, result });
            }
            return self.lists.push_back(l);
        }
        let result = list(s, self.coll, l.start, l.limit);
        fx.push(Effect::ListReply { token, result });
    }

    /// A write from a primary to this copy: refused if it comes from a
    /// primary this PG's map has left behind, applied in the primary's
    /// order, held a bounded time while an earlier one is on its way.
    fn on_rep_op(&mut self, s: &dyn ObjectStore, w: replica::RepWrite, fx: &mut Vec<Effect>) {
        let token = w.token;
        let fail = |e: RepError| Effect::RepReply {
            token,
            result: Err(e),
        };
        if let Err(e) = self.fence(w.from, &w.ctx, "write from") {
            return fx.push(fail(e));
        }
        if let Some(e) = replica::check_txn(self.coll, &w.txn) {
            return fx.push(fail(RepError::Failed(format!("pg {}: {e}", self.id))));
        }
        if self.rep.merging() {
            // It follows the log being merged.
            if self.rep.waiting.len() >= WAITING_MAX {
                return fx.push(fail(RepError::Failed(format!(
                    "pg {}: too many writes out of order",
                    self.id
                ))));
            }
            return self.rep.waiting.push(w);
        }
        // What this copy holds or has queued, as a primary or a replica.
        self.rep.high = self.rep.high.max(self.info.last_update);
        match replica_step(s, self.coll, &mut self.rep.high, &w.ctx) {
            ReplicaStep::Apply => {
                if let Some(info) = replica::info_in(self.coll, &w.txn) {
                    self.info = info;
                }
                // An object given up (`ec_give_up`) is no longer missing
                // here: its removal clears the record, and memory follows
                // (with OSDs declared lost, a member that kept it went on
                // to pull the old version as primary, over the removal).
                for name in replica::missing_cleared(self.coll, &w.txn) {
                    self.missing.remove(&name);
                }
                let tid = self.take_tid();
                let mut txn = w.txn;
                let coll = self.coll;
                let version = w.ctx.version.v;
                if let Some(k) = self.kept() {
                    // Only a member that takes the object's ops (not just
                    // the PG's records) changes its leaf; any member's
                    // trim may need its pages.
                    let changed = w.ctx.change.as_ref().and_then(|c| {
                        let o = recovery::oid(&c.name);
                        txn.ops
                            .iter()
                            .any(|op| loligo_store::txn::op_object(op) == Some(&o))
                            .then_some((o, c))
                    });
                    match changed {
                        Some((o, c)) => {
                            let own = k.change_logged(coll, &o, c.old, c.new, tid, version, &txn);
                            txn.ops.extend(own.ops);
                        }
                        None => k.guard(coll, &mut txn),
                    }
                }
                self.rep
                    .committing
                    .insert(tid, self.commit(token, CommitKind::Write));
                fx.push(Effect::Apply {
                    tid,
                    txn,
                    sync: true,
                });
                // Its successors may be waiting for it, and copies read
                // after it.
                self.rerun_rep_waiting(s, fx);
                self.rerun_held_copies(s, fx);
            }
            ReplicaStep::Duplicate => {
                // Durable once everything queued before it is.
                let tid = self.take_tid();
                self.rep
                    .committing
                    .insert(tid, self.commit(token, CommitKind::Write));
                fx.push(Effect::Apply {
                    tid,
                    txn: Transaction::new(),
                    sync: true,
                });
            }
            ReplicaStep::Refuse { have } => fx.push(fail(RepError::Failed(format!(
                "pg {}: this replica's log ends at {have:?}, the write follows {:?}",
                self.id, w.ctx.prev
            )))),
            ReplicaStep::Wait if self.rep.waiting.len() >= WAITING_MAX => fx.push(fail(
                RepError::Failed(format!("pg {}: too many writes out of order", self.id)),
            )),
            ReplicaStep::Wait => self.rep.waiting.push(w),
        }
    }

    fn commit(&self, token: u64, kind: CommitKind) -> Commit {
        Commit {
            token,
            interval: self.interval,
            kind,
        }
    }

    /// A primary's transaction is durable here (or failed): answer it.
    fn on_member_commit(
        &mut self,
        s: &dyn ObjectStore,
        c: Commit,
        result: Result<(), RepError>,
        fx: &mut Vec<Effect>,
    ) {
        let stored = result.is_ok();
        let result = if c.interval == self.interval {
            result
        } else {
            Err(RepError::Stale(format!(
                "pg {}: interval {} ended (now {}) before the transaction was durable",
                self.id, c.interval, self.interval
            )))
        };
        match c.kind {
            CommitKind::Write => fx.push(Effect::RepReply {
                token: c.token,
                result,
            }),
            CommitKind::Push(name) => {
                if stored {
                    self.missing.remove(&name);
                }
                fx.push(Effect::RepReply {
                    token: c.token,
                    result,
                });
            }
            CommitKind::Chunk(next) => {
                if stored {
                    // Chunks are durable in the order they were queued,
                    // but their answers from the store may come in any
                    // order (several can be on their way): the cursor only
                    // moves forward.
                    self.backfill = match (self.backfill.take(), next) {
                        (Some(c), Some(n)) => Some(c.max(n)),
                        // Done (by this chunk or one after it).
                        (_, None) | (None, _) => None,
                    };
                } else if !stored {
                    self.load_missing(s);
                }
                fx.push(Effect::RepReply {
                    token: c.token,
                    result,
                });
            }
            CommitKind::Log => {
                if !stored {
                    // The store refused the merge: believe the disk again.
                    self.rep.merged = None;
                    match stored_info(s, self.coll) {
                        Ok(i) => self.info = i.unwrap_or_default(),
                        // Kept as it is in memory; the PG task repairs
                        // the record when it starts.
                        Err(e) => tracing_error(self.id, &format!("info record: {e}")),
                    }
                    self.rep.high = self.info.last_update;
                    self.load_missing(s);
                }
                let result = result.map(|()| self.log_answer(s));
                fx.push(Effect::LogReply {
                    token: c.token,
                    result,
                });
                self.rerun_rep_waiting(s, fx);
            }
        }
    }

    /// What this copy lacks after a merge.
    fn log_answer(&self, s: &dyn ObjectStore) -> LogAnswer {
        let never_took = match self.ec {
            Some(_) => self
                .missing
                .iter()
                .filter(|(name, need)| self.never_took(s, name, **need))
                .map(|(name, _)| name.clone())
                .collect(),
            None => Vec::new(),
        };
        LogAnswer {
            missing: self.missing.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            backfill: self.backfill.clone(),
            never_took,
        }
    }

    /// The answer of this copy, which lacks `name` at version `v` (`why`),
    /// to a shard read or a pull: erasure-coded, with nothing of its own in
    /// flight (the store then shows all it took), it says whether it never
    /// took that write (`NeverTook`, a proof the asker may act on).
    pub(super) fn lacks(
        &self,
        s: &dyn ObjectStore,
        name: &str,
        v: Version,
        why: String,
    ) -> RepError {
        match self.ec.is_some() && self.settled_all() && self.never_took(s, name, v) {
            true => RepError::NeverTook(why),
            false => RepError::Absent(why),
        }
    }

    /// Whether this copy never took the write at `v` to `name`: neither
    /// the object nor its rollback copy (whichever shard they hold) is at
    /// a version that far down the log or past it. A copy that took the
    /// write and then one after it still holds one of the two there; one
    /// whose later merge rolled the write back again was told so by an
    /// authority that lacked it, and an acknowledged write is on every
    /// member that can be an authority. (A store error says no.)
    pub(super) fn never_took(&self, s: &dyn ObjectStore, name: &str, v: Version) -> bool {
        if v.v == 0 {
            return false;
        }
        let o = recovery::oid(name);
        // (A corrupt version attribute proves nothing.)
        [crate::ec::rollback_oid(&o), o].iter().all(|x| {
            match s.stat_attr(self.coll, x, VERSION_ATTR) {
                Ok(None) | Ok(Some((_, None))) => true,
                Ok(Some((_, Some(b)))) => {
                    postcard::from_bytes::<Version>(&b).is_ok_and(|h| h.v < v.v)
                }
                Err(_) => false,
            }
        })
    }

    /// The authoritative log from a primary: merged into this copy once
    /// this copy has the primary's map (the same fence as a peering query)
    /// and its earlier transactions are durable (the merge reads its log).
    fn on_log(&mut self, s: &dyn ObjectStore, h: HeldLog, fx: &mut Vec<Effect>) {
        let token = h.token;
        let fail = |e: RepError| Effect::LogReply {
            token,
            result: Err(e),
        };
        if let Err(e) = self.fence(h.from, &h.ctx, "log from") {
            return fx.push(fail(e));
        }
        let head = h.log.info.last_update;
        if self.rep.merged == Some((h.ctx.interval, h.from, head)) && !self.rep.merging() {
            return fx.push(Effect::LogReply {
                token,
                result: Ok(self.log_answer(s)),
            });
        }
        if self.epoch < h.ctx.epoch || !self.settled() || !self.applying.is_empty() {
            if self.held_logs.len() >= WAITING_MAX {
                return fx.push(fail(RepError::Failed(format!(
                    "pg {}: too many logs waiting",
                    self.id
                ))));
            }
            return self.held_logs.push(h);
        }
        let mine = match stored_info(s, self.coll) {
            Ok(i) => i.unwrap_or_default().last_update,
            Err(e) => {
                return fx.push(fail(RepError::Failed(format!(
                    "pg {}: this copy's info: {e}",
                    self.id
                ))))
            }
        };
        // An EC copy that held another shard before (its OSD moved to
        // another position) cannot merge: its objects are another shard's.
        // It is backfilled, and its scans show those objects as differing.
        let moved = match self.shard_moved(s) {
            Ok(m) => m,
            Err(e) => return fx.push(fail(RepError::Failed(format!("pg {}: {e}", self.id)))),
        };
        let merged = if moved {
            Ok(recovery::Merge::NoOverlap)
        } else {
            recovery::merge(
                s,
                self.coll,
                mine,
                &self.missing,
                self.backfill.as_ref(),
                &h.log,
                self.ec.is_some(),
            )
        };
        match merged {
            Err(e) => fx.push(fail(RepError::Failed(format!("pg {}: {e}", self.id)))),
            Ok(recovery::Merge::NoOverlap) => match backfill::restart(s, self.coll, &h.log) {
                // The logs share nothing: this copy starts a backfill
                // (its log becomes the authority's, its objects are
                // compared one chunk at a time).
                Ok((mut txn, info)) => {
                    self.mark_shard(&mut txn);
                    self.guard_log(&mut txn);
                    self.missing.clear();
                    self.backfill = Some(Cursor::Start);
                    self.info = info;
                    self.rep.high = head;
                    self.rep.merged = Some((h.ctx.interval, h.from, head));
                    let tid = self.take_tid();
                    self.rep
                        .committing
                        .insert(tid, self.commit(token, CommitKind::Log));
                    fx.push(Effect::Apply {
                        tid,
                        txn,
                        sync: true,
                    });
                }
                Err(e) => fx.push(fail(RepError::Failed(format!("pg {}: {e}", self.id)))),
            },
            Ok(recovery::Merge::Merged {
                mut txn,
                missing,
                info,
            }) => {
                self.mark_shard(&mut txn);
                self.guard_log(&mut txn);
                self.missing = missing;
                self.info = info;
                self.rep.high = head;
                self.rep.merged = Some((h.ctx.interval, h.from, head));
                let tid = self.take_tid();
                self.rep
                    .committing
                    .insert(tid, self.commit(token, CommitKind::Log));
                fx.push(Effect::Apply {
                    tid,
                    txn,
                    sync: true,
                });
            }
        }
    }

    fn rerun_held_logs(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        for h in std::mem::take(&mut self.held_logs) {
            self.on_log(s, h, fx);
        }
    }

    /// This copy's backfill cursor once the chunks queued here are durable.
    fn queued_cursor(&self) -> Option<Cursor> {
        // Not backfilling, or done (a chunk after the ones still
        // committing may have reached the end first): `None`.
        let durable = self.backfill.clone()?;
        let c = self
            .rep
            .committing
            .values()
            .filter_map(|c| match &c.kind {
                // `None` (done) is the end of the order.
                CommitKind::Chunk(next) => Some(next.clone().unwrap_or(Cursor::End)),
                _ => None,
            })
            .fold(durable, Cursor::max);
        (c != Cursor::End).then_some(c)
    }

    /// Whether this copy's log lacks writes the primary had when it read
    /// the objects it sends under `ctx`: an object copied ahead of its
    /// log entry could hold a write that a later merge cannot see (and so
    /// never roll back). The copy waits for those writes first (and for
    /// the primary's map: `hold_copy` is also used for that).
    fn behind(&self, ctx: &RepCtx) -> bool {
        self.rep.high.max(self.info.last_update) < ctx.version
    }

    fn hold_copy(
        &mut self,
        from: i32,
        ctx: RepCtx,
        what: CopyMsg,
        token: u64,
        fx: &mut Vec<Effect>,
    ) {
        if self.held_copies.len() >= WAITING_MAX {
            return fx.push(Effect::RepReply {
                token,
                result: Err(RepError::Failed(format!(
                    "pg {}: too many copies waiting",
                    self.id
                ))),
            });
        }
        self.held_copies.push(HeldCopy {
            from,
            ctx,
            what,
            token,
            deadline_ms: self.now_ms + self.op_timeout_ms,
        });
    }

    /// Pushes and chunks that waited for this copy's log: offered again.
    fn rerun_held_copies(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        for h in std::mem::take(&mut self.held_copies) {
            match h.what {
                CopyMsg::Push(p) => self.on_push(s, h.from, h.ctx, p, h.token, fx),
                CopyMsg::Chunk(c) => self.on_chunk(s, h.from, &h.ctx, c, h.token, fx),
            }
        }
    }

    /// What this copy keeps, as the rollback copy, of the object `push`
    /// replaces (see [`recovery::Prior`]). Keeping it is a safeguard, not
    /// a duty: a store that cannot say drops it, as it always did, and
    /// the push goes on.
    fn push_prior(&self, s: &dyn ObjectStore, push: &Push) -> recovery::Prior {
        if self.ec.is_none() {
            return recovery::Prior::Replicated;
        }
        recovery::prior_to_keep(s, self.coll, push).unwrap_or_else(|e| {
            tracing::warn!(pg = %self.id, "'{}': keeping no rollback copy: {e}", push.name);
            recovery::Prior::Drop
        })
    }

    /// An object this copy lacks, whole, from the primary.
    fn on_push(
        &mut self,
        s: &dyn ObjectStore,
        from: i32,
        ctx: RepCtx,
        push: Push,
        token: u64,
        fx: &mut Vec<Effect>,
    ) {
        let fail = |e: RepError| Effect::RepReply {
            token,
            result: Err(e),
        };
        if let Err(e) = self.fence(from, &ctx, "push from") {
            return fx.push(fail(e));
        }
        if self.epoch < ctx.epoch || self.behind(&ctx) {
            let what = CopyMsg::Push(push);
            return self.hold_copy(from, ctx, what, token, fx);
        }
        if !self.missing.contains_key(&push.name) {
            // Already here (a resend, or recovered by an earlier push).
            return fx.push(Effect::RepReply {
                token,
                result: Ok(()),
            });
        }
        if let Err(e) = exec::validate(&push.name, &[SubOp::Stat]) {
            return fx.push(fail(RepError::Failed(format!("pg {}: {e}", self.id))));
        }
        let tid = self.take_tid();
        let mut txn = recovery::push_txn(self.coll, &push, self.push_prior(s, &push));
        let txn = self
            .push_tree_changes(s, std::slice::from_ref(&push), tid, &mut txn)
            .map(|()| txn);
        match txn {
            Ok(txn) => {
                let c = self.commit(token, CommitKind::Push(push.name));
                self.rep.committing.insert(tid, c);
                fx.push(Effect::Apply {
                    tid,
                    txn,
                    sync: true,
                });
            }
            Err(e) => fx.push(fail(RepError::Failed(format!("pg {}: {e}", self.id)))),
        }
    }

    /// A peering query: answered with this copy's info once this PG's map
    /// has reached the query's epoch (writes it accepted count, durable or
    /// not: any that were not durable yet will not be acknowledged to
    /// their old primary).
    fn on_query(&mut self, q: PendingQuery, fx: &mut Vec<Effect>) {
        // Under the querier's map, and with every transaction this copy
        // queued durable: the answer must not claim a write a crash can
        // still take away (a replica answered with a write it had applied
        // but not made durable, crashed and lost it; the new primary
        // counted it complete, answered a retry of that write as done, and
        // the acknowledged write was lost).
        if self.epoch < q.epoch || !self.settled_all() {
            return self.queries.push(q);
        }
        self.answered_epoch = self.answered_epoch.max(q.epoch);
        fx.push(Effect::InfoReply {
            token: q.token,
            result: Ok(Some(PeerInfo {
                info: self.info,
                missing: self.missing.len() as u64,
                backfill: self.backfill.is_some() || self.moved,
                moved_shard: self.moved_shard(),
                shard: self.held_shard,
            })),
        });
    }

    fn rerun_queries(&mut self, fx: &mut Vec<Effect>) {
        for q in std::mem::take(&mut self.queries) {
            self.on_query(q, fx);
        }
    }

    fn rerun_rep_waiting(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        for w in std::mem::take(&mut self.rep.waiting) {
            self.on_rep_op(s, w, fx);
        }
    }

    fn take_tid(&mut self) -> u64 {
        let tid = self.next_tid;
        self.next_tid += 1;
        tid
    }

    /// Serve as primary: persist the activation, run what waited.
    fn activate(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if self.can_write() {
            self.info.last_epoch_started = self.epoch;
            let mut t = Transaction::new();
            t.set_record(self.coll, INFO_KEY, record::encode_info(&self.info));
            self.mark_shard(&mut t);
            self.apply_own(t, true, fx);
        }
        self.rerun_waiting(s, fx);
    }

    fn min_size(&self) -> usize {
        self.pool
            .as_ref()
            .map_or(usize::MAX, |p| p.min_size as usize)
    }

    fn can_write(&self) -> bool {
        let Role::Primary { write_set } = &self.role else {
            return false;
        };
        // Erasure-coded: only under a record of this interval naming at
        // least k complete members (see `maybe_activate`).
        let recorded = self.ec.as_ref().is_none_or(|st| {
            self.record
                .as_ref()
                .is_some_and(|r| r.interval == self.interval && r.osds.len() >= st.k())
        });
        recorded && self.serving(write_set) >= self.min_size() && !self.rec.waiting_moved_drain
    }

    fn on_op(&mut self, s: &dyn ObjectStore, p: Pending, fx: &mut Vec<Effect>) {
        let epoch = self.epoch;
        let fail = |p: &Pending, e: OpError| reply(p.token, Err(e), Version::default(), epoch);
        if p.op.epoch > self.epoch {
            return fx.push(fail(&p, OpError::Behind { epoch }));
        }
        if !self.is_primary() {
            return fx.push(fail(&p, OpError::WrongPrimary { epoch }));
        }
        if let Err(e) = exec::validate(&p.op.name, &p.op.ops) {
            return fx.push(fail(&p, e));
        }
        if let Some(q) = self.busy.get_mut(&p.op.name) {
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
            let q = self.busy.entry(name).or_default();
            if q.len() >= WAITING_MAX {
                return fx.push(fail(&p, self.unavailable()));
            }
            q.push_back(p);
            return;
        }
        let active = matches!(self.role, Role::Primary { .. } | Role::Activating { .. });
        // (An unfound object is removed as the PG goes active.)
        if !active || (writes && !self.can_write()) || self.unfound.contains_key(&p.op.name) {
            if self.waiting.len() >= WAITING_MAX {
                return fx.push(fail(&p, self.unavailable()));
            }
            self.waiting.push_back(p);
            return;
        }
        self.execute(s, p, fx);
    }

    fn unavailable(&self) -> OpError {
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

    fn execute(&mut self, s: &dyn ObjectStore, p: Pending, fx: &mut Vec<Effect>) {
        let epoch = self.epoch;
        let Some(pool) = self.pool.as_ref() else {
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
        if let Some((v, committed)) = p.op.reqid.and_then(|r| self.recent.get(&r).copied()) {
            if writes {
                // A retry of a write already in the log: answer, do not
                // apply it again. One that failed on a replica is in no
                // agreed log yet: the client retries after peering.
                let result = if committed {
                    Ok(vec![SubResult::None; p.op.ops.len()])
                } else {
                    Err(OpError::WrongPrimary { epoch })
                };
                return fx.push(reply(p.token, result, v, epoch));
            }
        }
        if self.ec.is_some() {
            return self.ec_execute(s, p, oid, fx);
        }
        let (st, out) = match self
            .backend
            .execute(s, self.coll, &oid, &p.op.ops, size_max)
        {
            Ok(x) => x,
            Err(e) => return fx.push(reply(p.token, Err(e), Version::default(), epoch)),
        };
        if out.txn.is_empty() {
            return fx.push(reply(p.token, Ok(out.results), st.version, epoch));
        }
        self.write(Writer::Client(p), oid, &st, out, None, fx);
    }

    /// Log and distribute a write: `out.txn` for every member, or, on
    /// an erasure-coded pool, `shards[i]` for the member holding shard i
    /// (either way with the version attribute and the PG's records).
    fn write(
        &mut self,
        by: Writer,
        oid: ObjectId,
        st: &ObjState,
        out: exec::Outcome,
        mut shards: Option<Vec<Transaction>>,
        fx: &mut Vec<Effect>,
    ) {
        let prev = self.info.last_update;
        let version = self.next_version();
        let mut t = Transaction::new();
        t.ops.extend(out.txn.ops);
        if out.exists_after {
            t.setattr(
                self.coll,
                &oid,
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
        let Role::Primary { write_set } = &self.role else {
            return;
        };
        if let Some(shards) = &mut shards {
            // Erasure-coded: rollback copies of writes every member has
            // go with this write (each object's newest write only; a
            // member without one removes nothing).
            let done: Vec<String> = self
                .rb_live
                .iter()
                .filter(|(n, (_, acked))| *acked && n.as_str() != by.name())
                .map(|(n, _)| n.clone())
                .take(RB_TRIMS_PER_WRITE)
                .collect();
            for n in &done {
                let rb = crate::ec::rollback_oid(&recovery::oid(n));
                for t in shards.iter_mut() {
                    t.touch(self.coll, &rb).remove(self.coll, &rb);
                }
                self.rb_live.remove(n);
            }
            self.rb_live.insert(by.name().to_string(), (version, false));
        }
        // Backfill targets whose cursor has not reached the object take
        // the log entry only (the chunk that passes it copies it whole).
        let log_only: Vec<i32> = self
            .rec
            .backfill
            .iter()
            .filter(|(_, b)| !b.done.covers(&oid))
            .map(|(o, _)| *o)
            .collect();
        // Their objects there now differ from this copy's: the leaf is
        // scanned whatever the trees said (and a scan of a range that
        // left it out is made again).
        if let Some(leaf) = self.tree().map(|t| t.leaf_of(oid.hash)) {
            for to in &log_only {
                let Some(b) = self.rec.backfill.get_mut(to) else {
                    continue;
                };
                if b.leaves.dirty(leaf) {
                    match &mut b.step {
                        BfStep::Scanning { upto, .. } if upto.covers(&oid) => {
                            b.step = BfStep::Idle;
                        }
                        BfStep::Scanned { theirs, .. } if theirs.end.covers(&oid) => {
                            b.step = BfStep::Idle;
                        }
                        BfStep::Copying { ahead, .. } => {
                            let scanned = match ahead {
                                Ahead::Scanning { upto, .. } => upto.covers(&oid),
                                Ahead::Scanned { theirs, .. } => theirs.end.covers(&oid),
                                _ => false,
                            };
                            if scanned {
                                *ahead = Ahead::None;
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        // Not `take_tid`: `write_set` borrows the role.
        let tid = self.next_tid;
        self.next_tid += 1;
        self.applying.insert(tid, self.interval);
        // The Merkle tree: this copy's leaf stamp (its log entry again,
        // stamped) goes in its own transaction only; each replica stamps
        // its own leaf from the same change.
        let mut own = Transaction::new();
        let change = match &mut self.tree {
            TreeState::Kept(k) => {
                let c = tree::ObjChange {
                    name: by.name().to_string(),
                    old: st.exists.then_some(st.version),
                    new: out.exists_after.then_some(version),
                };
                own = k.change_logged(self.coll, &oid, c.old, c.new, tid, version.v, &t);
                Some(c)
            }
            _ => None,
        };
        let ctx = RepCtx {
            interval: self.interval,
            epoch: self.epoch,
            acting: self.acting.clone(),
            prev,
            version,
            change,
        };
        let first = fx.len();
        fx.extend(self.backend.distribute(WritePlan {
            tid,
            ctx: ctx.clone(),
            txn: t,
            own,
            write_set,
            log_only: &log_only,
            me: self.whoami,
            shards,
        }));
        // Data is shared (`Bytes`): keeping the sends costs no copy.
        let sent = fx[first..]
            .iter()
            .filter_map(|e| match e {
                Effect::Replicate { to, txn, .. } => Some((*to, txn.clone())),
                _ => None,
            })
            .collect();
        self.inflight.insert(
            tid,
            InFlight {
                token: by.token(),
                reqid: by.reqid(),
                name: by.name().to_string(),
                waiting: write_set.iter().copied().collect(),
                version,
                results: out.results,
                failed: None,
                ctx,
                sent,
                resend: BTreeMap::new(),
            },
        );
        self.busy.insert(by.name().to_string(), VecDeque::new());
    }

    fn done(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        from: i32,
        result: Result<(), RepError>,
        fx: &mut Vec<Effect>,
    ) {
        let Some(f) = self.inflight.get_mut(&tid) else {
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
                RepError::Failed(m) | RepError::Absent(m) | RepError::NeverTook(m) => {
                    RepError::Failed(format!("osd.{from}: {m}"))
                }
            };
            // A stale-interval refusal decides the answer (retryable).
            if f.failed.is_none() || matches!(e, RepError::Stale(_)) {
                f.failed = Some(e);
            }
        }
        if !f.waiting.is_empty() {
            return;
        }
        let Some(f) = self.inflight.remove(&tid) else {
            return;
        };
        let stale = matches!(f.failed, Some(RepError::Stale(_)));
        let durable = f.failed.is_none();
        let result = match f.failed {
            None => {
                if let Some(r) = f.reqid.and_then(|r| self.recent.get_mut(&r)) {
                    r.1 = true;
                }
                if let Some(live) = self.rb_live.get_mut(&f.name) {
                    if live.0 == f.version {
                        live.1 = true;
                    }
                }
                Ok(f.results)
            }
            Some(RepError::Stale(_)) => Err(OpError::WrongPrimary { epoch: self.epoch }),
            Some(RepError::Failed(e) | RepError::Absent(e) | RepError::NeverTook(e)) => {
                Err(OpError::Io(e))
            }
        };
        if let Some(token) = f.token {
            fx.push(reply(token, result, f.version, self.epoch));
        }
        if stale && matches!(self.role, Role::Primary { .. }) {
            // A member saw the interval end in a map this copy skipped
            // (maps can arrive out of order: one whose acting set changed
            // and changed back was never seen here). The write is on some
            // members only: a new interval peers again, so none stays
            // behind while the PG shows clean (which the Merkle root
            // comparison of the copies caught).
            if self.epoch > self.interval {
                return self.end_interval(s, fx);
            }
            self.interval_ended = true;
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
    fn resend_writes(&mut self, fx: &mut Vec<Effect>) {
        let now = self.now_ms;
        for (&tid, f) in &mut self.inflight {
            for (&to, (at, _)) in &mut f.resend {
                let Some(txn) = f.sent.get(&to) else {
                    continue;
                };
                if *at <= now && *at != u64::MAX {
                    // Sent: the next failure schedules it again.
                    *at = u64::MAX;
                    fx.push(Effect::Replicate {
                        tid,
                        to,
                        ctx: f.ctx.clone(),
                        txn: txn.clone(),
                    });
                }
            }
        }
    }

    /// Everything that waited past its deadline is answered: ops and
    /// listings with why the PG cannot serve, replica writes whose
    /// predecessor never came, queries this PG's map never caught up with.
    fn expire(&mut self, fx: &mut Vec<Effect>) {
        let now = self.now_ms;
        let err = self.unavailable();
        let epoch = self.epoch;
        for p in take_expired(&mut self.waiting, now, |p| p.deadline_ms) {
            fx.push(reply(p.token, Err(err.clone()), Version::default(), epoch));
        }
        if let Role::Peering { want, .. } = &self.role {
            // Infos that never came: ask again (a query can be lost with
            // a member that restarted between two maps this OSD saw).
            if now >= self.peer_asked_ms + PEER_RETRY_MS {
                for &to in want {
                    fx.push(Effect::QueryInfo {
                        to,
                        interval: self.interval,
                        epoch: self.epoch,
                    });
                }
                self.peer_asked_ms = now;
            }
        }

        for w in take_expired(&mut self.rep.waiting, now, |w| w.deadline_ms) {
            fx.push(Effect::RepReply {
                token: w.token,
                result: Err(RepError::Failed(format!(
                    "pg {}: write {:?} waited for {:?}, which never came",
                    self.id, w.ctx.version, w.ctx.prev
                ))),
            });
        }
        for q in take_expired(&mut self.queries, now, |q| q.deadline_ms) {
            fx.push(Effect::InfoReply {
                token: q.token,
                result: Err(format!(
                    "pg {}: this OSD's map is at epoch {epoch}, the query needs {}",
                    self.id, q.epoch
                )),
            });
        }
        for h in take_expired(&mut self.held_copies, now, |h| h.deadline_ms) {
            fx.push(Effect::RepReply {
                token: h.token,
                result: Err(RepError::Failed(format!(
                    "pg {}: a copy from osd.{} follows writes up to {:?} that never came",
                    self.id, h.from, h.ctx.version
                ))),
            });
        }
        for h in take_expired(&mut self.held_logs, now, |h| h.deadline_ms) {
            fx.push(Effect::LogReply {
                token: h.token,
                result: Err(RepError::Failed(format!(
                    "pg {}: the log from osd.{} waited for this copy's map or commits",
                    self.id, h.from
                ))),
            });
        }
        for l in take_expired(&mut self.lists, now, |l| l.deadline_ms) {
            fx.push(Effect::ListReply {
                token: l.token,
                result: Err(err.clone()),
            });
        }
    }

    /// Whether the PG has nothing in flight or waiting.
    /// Erasure-coded rebuilds finished since the last call: (shards
    /// rebuilt, bytes the code's plans read in theory, bytes fetched).
    pub fn take_rebuilt(&mut self) -> (u64, u64, u64) {
        std::mem::take(&mut self.rebuilt)
    }

    pub fn idle(&self) -> bool {
        self.inflight.is_empty()
            && self.gathers.is_empty()
            && self.waiting.is_empty()
            && self.busy.is_empty()
            && self.rep.waiting.is_empty()
            && self.rep.committing.is_empty()
            && self.lists.is_empty()
            && self.queries.is_empty()
            && self.held_logs.is_empty()
            && self.held_copies.is_empty()
            && self.rec.pushing.is_empty()
            && self.rec.bf_blocked.is_empty()
    }

    /// Whether this primary's PG is active with every member complete and
    /// CRUSH's set in charge.
    pub fn is_clean(&self) -> bool {
        self.stat()
            .is_some_and(|st| st.state.contains(PgState::CLEAN))
    }

    /// The PG's state for the monitors (primaries only).
    pub fn stat(&self) -> Option<PgStat> {
        if !self.is_primary() {
            return None;
        }
        let size = self.pool.as_ref().map_or(0, |p| p.size as usize);
        // Only an active set's copies are counted (peering knows none
        // yet): the members' and this copy's own lacked objects (an
        // erasure-coded primary may serve while it lacks some: unfound,
        // or to be rolled back).
        let (degraded, misplaced) = match &self.role {
            Role::Primary { write_set } | Role::Activating { write_set, .. } => {
                let (degraded, misplaced) = copies_short(
                    self.info.objects,
                    size,
                    write_set.len(),
                    self.rec.lacking(self.info.objects) + self.missing.len() as u64,
                );
                // An unfound object has no copy to be misplaced from: its
                // lacked copies are degraded even while the write set has
                // more members than the pool's size (remapped; on a
                // replicated pool with OSDs declared lost, such a PG showed
                // 1 unfound, 0 degraded), and it is at least one degraded
                // copy however this copy counts its objects (an
                // undersized, peered PG too).
                let unfound = self.unfound_count();
                let moved = unfound.min(misplaced);
                ((degraded + moved).max(unfound), misplaced - moved)
            }
            _ => (0, 0),
        };
        let state = match &self.role {
            Role::Peering { .. } => PgState::PEERING,
            Role::Behind => PgState::PEERING | PgState::WAIT_PG_TEMP,
            Role::Pulling { .. } => PgState::PEERING | PgState::RECOVERING,
            Role::Down { .. } => PgState::DOWN,
            Role::Activating { write_set, .. } => {
                let mut st = PgState::ACTIVATING;
                if write_set.len() < size {
                    st |= PgState::UNDERSIZED | PgState::DEGRADED;
                }
                if degraded > 0 {
                    st |= PgState::DEGRADED;
                }
                st
            }
            Role::Primary { write_set } => {
                let mut st = if self.serving(write_set) < self.min_size() {
                    PgState::PEERED
                } else {
                    PgState::ACTIVE
                };
                if write_set.len() < size {
                    st |= PgState::UNDERSIZED | PgState::DEGRADED;
                }
                if !self.rec.backfill.is_empty() {
                    let toofull = |to: &i32| self.backfill_toofull(*to);
                    if self.rec.backfill.keys().any(toofull) {
                        st |= PgState::BACKFILL_TOOFULL;
                    }
                    // Waiting: every target's next step waits out a retry.
                    let copying = matches!(self.rec.slot, Slot::Held(_))
                        && self
                            .rec
                            .backfill
                            .iter()
                            .any(|(to, b)| !toofull(to) && b.retry_ms <= self.now_ms);
                    if copying {
                        st |= PgState::BACKFILLING;
                    } else if !self.rec.backfill.keys().all(toofull) {
                        st |= PgState::BACKFILL_WAIT;
                    }
                    if self.complete_of(write_set).len() < size {
                        st |= PgState::DEGRADED;
                    }
                }
                // (Unfound objects are degraded copies, whoever lacks
                // them: they may be neither missing here nor on a member's
                // list.)
                if !self.missing.is_empty() || self.unfound_count() > 0 {
                    st |= PgState::DEGRADED;
                }
                if !self.rec.missing.is_empty() {
                    st |= PgState::DEGRADED;
                    st |= if self.rec.pushing.is_empty() {
                        PgState::RECOVERY_WAIT
                    } else {
                        PgState::RECOVERING
                    };
                }
                let temp_primary =
                    self.ec.is_some() && self.crush_primary().is_some_and(|c| c != self.whoami);
                if (!self.up.is_empty() && self.up != self.acting) || temp_primary {
                    st |= PgState::REMAPPED;
                }
                if st == PgState::ACTIVE {
                    st |= PgState::CLEAN;
                }
                if !self.scrub.differ.is_empty() {
                    st |= PgState::INCONSISTENT;
                }
                st
            }
            _ => return None,
        };
        Some(PgStat {
            pg: self.id,
            epoch: self.epoch,
            state,
            acting: self.acting.clone(),
            objects: self.info.objects,
            bytes: self.info.bytes,
            degraded,
            misplaced,
            waiting_for: match &self.role {
                Role::Down { osds } => osds.clone(),
                _ => Vec::new(),
            },
            unfound: self.unfound_count(),
        })
    }

    /// Erasure-coded primary: acting members whose OSDs moved that wait
    /// outside the write set for the others to be whole (see
    /// `Pg::moved_to_wait`).
    pub fn moved_waiting(&self) -> usize {
        match self.role {
            Role::Primary { .. } | Role::Activating { .. } => self.rec.waiting_moved.len(),
            _ => 0,
        }
    }

    /// Objects no up copy can give at the version the log names, that
    /// wait (`PgStat::unfound`; none once the PG, active, lacks nothing).
    pub fn unfound_count(&self) -> u64 {
        let whole = matches!(self.role, Role::Primary { .. })
            && self.missing.is_empty()
            && self.rec.missing.values().all(BTreeMap::is_empty)
            && self.rec.backfill.is_empty();
        match whole {
            true => 0,
            false => self.unfound_waiting.len() as u64,
        }
    }
}

/// A PG's object copies that are degraded and misplaced, as `ceph -s`
/// counts them: `objects` objects kept `size` times by `members` members
/// that lack `lacking` copies in all. Copies the acting set is too small to
/// hold are degraded. A lacking copy is misplaced while the other members
/// still hold `size` copies of the object: with `members - size` extra
/// members, up to that many lacking copies per object can be (exactly so
/// when each object lacks the same number, as on a backfill target);
/// the rest are degraded.
pub fn copies_short(objects: u64, size: usize, members: usize, lacking: u64) -> (u64, u64) {
    let absent = objects * size.saturating_sub(members) as u64;
    let misplaced = lacking.min(objects * members.saturating_sub(size) as u64);
    (absent + lacking - misplaced, misplaced)
}

/// Remove from `items` (in order) and return those whose deadline is due.
fn take_expired<C, T>(items: &mut C, now_ms: u64, deadline_ms: impl Fn(&T) -> u64) -> Vec<T>
where
    C: Default + IntoIterator<Item = T> + Extend<T>,
{
    let mut late = Vec::new();
    let mut keep = C::default();
    for x in std::mem::take(items) {
        if deadline_ms(&x) <= now_ms {
            late.push(x);
        } else {
            keep.extend([x]);
        }
    }
    *items = keep;
    late
}

/// One page of a PG's objects in (hash, name) order after `start`.
fn list(s: &dyn ObjectStore, coll: CollectionId, start: Option<String>, limit: u32) -> ListResult {
    let lim = limit.clamp(1, LIST_NAMES_MAX) as usize;
    let mut from =
        start.map(|n| ObjectId::new(loligo_crush::hash::str_hash_rjenkins(n.as_bytes()), n));
    let mut out: Vec<String> = Vec::new();
    // The OSD's own objects (EC rollback copies) are skipped, so a batch
    // may have to be topped up from the store.
    loop {
        let (mut names, next) = s
            .list(coll, from.as_ref(), lim + 1)
            .map_err(exec::store_err)?;
        if let Some(f) = &from {
            names.retain(|o| o != f);
        }
        let raw_more = names.len() > lim || next.is_some();
        let last = names.last().cloned();
        for o in names {
            if out.len() == lim {
                return Ok((out, true));
            }
            if !crate::ec::is_internal(&o.name) {
                out.push(o.name);
            }
        }
        match last {
            Some(l) if raw_more => from = Some(l),
            _ => return Ok((out, false)),
        }
    }
}

fn tracing_error(pg: PgId, msg: &str) {
    tracing::error!("pg {pg}: {msg}");
}
