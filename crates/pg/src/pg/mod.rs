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

mod activate;
pub mod backfill;
mod backfilling;
mod catch_up;
mod client;
mod ec_repair;
mod erasure;
mod io;
mod lease;
mod map_input;
mod member;
mod mend;
pub mod merge;
pub mod merkle;
mod peer;
mod peering;
mod read;
pub mod record;
mod recovering;
pub mod recovery;
mod replica;
pub mod scrub;
mod scrub_build;
pub mod scrub_map;
mod scrub_parity;
mod scrub_reserve;
pub mod split;
mod stat;
mod stray;
pub mod tree;

pub use backfill::{Chunk, Cursor, Filter, Scan};
pub use erasure::SHARD_KEY;
use io::Sent;
pub use io::{
    route, CommandResult, Effect, Holds, Host, Input, ListResult, MonAsk, PgView, RepCtx, RepError,
};
pub use lease::{
    stretch, Grants, LeasesLeft, ANY_PRIMARY, CLOCK_DRIFT_PPM, READ_LEASE_MS, READ_LEASE_RATIO,
};
pub use map_input::{map_input, seen_since};
pub use read::{ReadJob, READS_ASIDE_MAX};
pub use recovery::{AuthLog, Push};
pub use replica::{replica_accepts, replica_step, ReplicaStep};
use replica::{Commit, CommitKind};

use crate::backend::{Backend, Erasure, Replicated, WritePlan};
use crate::exec::{self, ObjState, VERSION_ATTR};
use crate::msg::{PeerMsg, PeerReply};
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
/// Record key of the request ids a merge carried over (see
/// `merge::plan`): a merged copy's log starts empty, and a client that
/// retries a write acknowledged before the merge is answered from them.
pub const DUPS_KEY: &[u8] = b"dups";

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
    /// What is left of the read leases this copy granted (see `lease`).
    pub leases: LeasesLeft,
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
            leases: LeasesLeft::default(),
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
    /// Peered; serves nothing until the monitors record the write set
    /// and recovering members merge the authoritative log (its read lease
    /// is asked for meanwhile).
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
    /// The querying primary and the interval it peers in.
    from: i32,
    interval: Epoch,
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
    /// A write set to ask for once every member knows the leases this
    /// primary waits out (`Pg::lease_told`).
    record_held: Option<Vec<i32>>,
    /// The pg_temp this interval last asked the monitors for.
    temp_asked: Option<Vec<i32>>,
    /// When this interval last asked for a pg_temp or primary_temp
    /// (`Pg::ask_temps_again`).
    temp_asked_ms: u64,
    /// A replicated primary that handed the PG over peers again at this
    /// time if no map has answered its pg_temp ask (0: it did not).
    ask_again_ms: u64,
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
    /// Stray copies that asked, with the shard each holds (erasure-coded:
    /// recovery may read them; replicated: shard 0, and a damaged source
    /// may be mended from them).
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

/// What the backfills this primary finished cost, summed (taken by the
/// OSD for its counters: `Pg::take_backfills`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackfillCounts {
    /// Backfills finished, and those that compared Merkle trees and
    /// scanned only the leaves that differed.
    pub finished: u64,
    pub by_tree: u64,
    /// Tree nodes the targets sent, objects their scans listed, and
    /// objects copied or removed.
    pub tree_nodes: u64,
    pub listed: u64,
    pub copied: u64,
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
    /// Chunks under way, oldest first (at most `CHUNKS_IN_FLIGHT`):
    /// the first starts at `done`, each next one where the one before
    /// ends. Writes to (done, last chunk's end] wait. A chunk whose answer
    /// was lost may have been applied: until the member answers, its
    /// cursor may be anywhere up to the last chunk's end, so only those
    /// same chunks are ever sent again, in order (a member that has one
    /// answers at once). `ahead`: the scan of what follows the last
    /// chunk, made meanwhile (a pipeline: the member lists the next range
    /// while it commits the chunks before it, and an erasure-coded
    /// primary rebuilds the next chunk's shards meanwhile).
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

/// A backfill chunk under way. Chunks go out in order: one is sent only
/// once every chunk before it is on its way.
struct Flight {
    /// The send's tid; 0 while it is not on its way (`first` says why).
    tid: u64,
    chunk: Chunk,
    /// Never sent yet: the objects whose target shards are still being
    /// rebuilt into `chunk` (erasure-coded; empty: ready to go). `None`:
    /// sent before, so with `tid` 0 it goes again at `retry_ms` once every
    /// chunk before it is answered.
    first: Option<BTreeSet<String>>,
}

impl Flight {
    /// Not on its way, sent before: it goes again, after a pause.
    fn resend_due(&self) -> bool {
        self.tid == 0 && self.first.is_none()
    }

    /// Not on its way, never sent, every shard rebuilt.
    fn ready_first(&self) -> bool {
        self.tid == 0 && self.first.as_ref().is_some_and(BTreeSet::is_empty)
    }
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
    /// yet), or a chunk could not be built: asked again once a chunk is
    /// answered.
    Refused,
}

/// Backfill chunks a primary keeps under way to one target (on their
/// way, or, erasure-coded, their target's shards being rebuilt).
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
    /// under way (sent, or still being built).
    fn blocks(&self, o: &ObjectId) -> bool {
        self.backfill.values().any(|b| match &b.step {
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

/// How long a pg_temp or primary_temp ask the map does not show waits
/// before it is made again (ms).
const TEMP_ASK_AGAIN_MS: u64 = 5_000;

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

/// An erasure-coded PG's sets keep their holes (a missing shard) as -1,
/// so positions stay shards and every `o >= 0` filter skips them.
fn holes_as_none(v: Vec<i32>) -> Vec<i32> {
    v.into_iter()
        .map(|o| {
            if o < 0 || o == loligo_crush::ITEM_NONE {
                -1
            } else {
                o
            }
        })
        .collect()
}

/// What a PG knows of the current map: its pool, the epoch and interval,
/// the sets CRUSH and the overrides give it, its write-set record.
/// Replaced as a whole by each newer map (`take_map`); its epoch never
/// goes back.
struct MapState {
    /// `None` before the first map.
    pool: Option<Pool>,
    epoch: Epoch,
    interval: Epoch,
    acting: Vec<i32>,
    /// -1 before the first map.
    primary: i32,
    /// CRUSH's set for the PG.
    up: Vec<i32>,
    /// The latest boot epoch among the acting set's OSDs.
    acting_up_from: Epoch,
    /// Members too full to backfill onto.
    toofull: Vec<i32>,
    /// What the map's flags hold back.
    holds: Holds,
    /// OSDs a pg_temp may take for a while (`Input::Map::spares`).
    spares: Vec<i32>,
    /// The PG's primary_temp.
    primary_temp: Option<i32>,
    /// The recorded write set and its members that are up.
    record: Option<WriteSetRecord>,
    record_up: Vec<i32>,
    /// The epoch of the map in which this PG saw its pool's pg_num change
    /// (0: never): messages from a primary on an older map are refused,
    /// as it may not have split yet.
    split_epoch: Epoch,
}

impl Default for MapState {
    fn default() -> MapState {
        MapState {
            pool: None,
            epoch: 0,
            interval: 0,
            acting: Vec::new(),
            primary: -1,
            up: Vec::new(),
            acting_up_from: 0,
            toofull: Vec::new(),
            holds: Holds::default(),
            spares: Vec::new(),
            primary_temp: None,
            record: None,
            record_up: Vec::new(),
            split_epoch: 0,
        }
    }
}

/// The PG state machine.
pub struct Pg {
    pub id: PgId,
    whoami: i32,
    coll: CollectionId,
    /// What it knows of the current map.
    map: MapState,
    role: Role,
    info: PgInfo,
    next_tid: u64,
    /// Messages sent whose answers have not come yet, by send id.
    sent: HashMap<u64, Sent>,
    next_send: u64,
    /// Bumped whenever this PG queues a store transaction and whenever
    /// one completes: a listing of its objects made at one value is
    /// still the store's while the value stays.
    store_gen: u64,
    /// Client ops: writes in flight, ops waiting, listings, and the
    /// requests the log holds.
    ops: client::Ops,
    /// How long an op may wait (ms).
    pub op_timeout_ms: u64,
    /// A replicated pool's read of an object at least this large (bytes)
    /// runs beside the PG's task (`Effect::Read`); `u64::MAX`: never.
    pub read_aside_min: u64,
    /// The pool type's data layout.
    backend: Box<dyn Backend>,
    /// For an erasure-coded pool: its striping.
    ec: Option<Arc<Striper>>,
    /// What only an erasure-coded copy keeps (see `erasure::EcState`).
    ecs: erasure::EcState,
    now_ms: u64,
    /// The epoch of the operator's last `pg mark-unfound-lost` (0: none).
    unfound_lost: Epoch,
    /// When peering last asked members for their infos.
    peer_asked_ms: u64,
    /// Writes from a primary to this copy.
    rep: replica::Lane,
    /// As a member: what waits for this copy's map, log or commits, and
    /// the newest peering it answered.
    held: member::Held,
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
    /// Backfills finished since the OSD last took the counts.
    backfills_done: BackfillCounts,
    /// PG log entries kept.
    pub log_entries_max: u64,
    /// As a backfill target: the persisted cursor (`None`: not
    /// backfilling).
    backfill: Option<Cursor>,
    /// The primary's interval (as its chunk named it) in which this
    /// copy took its backfill's last chunk.
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
    /// As a stray copy: its questions to the primary and its removal.
    stray: stray::Stray,
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
    /// As a replicated primary: copies of objects found damaged here being
    /// mended from other members.
    mend: mend::Mend,
    /// Scrubs (object by object comparisons of the members' copies).
    scrubber: scrub::Scrubber,
    /// An `Effect::Continue` is out and its input not yet taken.
    continuing: bool,
    /// The scrub slots this copy holds (as primary or member).
    resv: scrub_reserve::Reservations,
    /// This OSD's scrub slots (set by the host; Ceph's `osd_max_scrubs`).
    pub scrub_slots: Arc<crate::scrub_slots::ScrubSlots>,
    /// Pause between scrub chunks (ms; Ceph's `osd_scrub_sleep`).
    pub scrub_sleep_ms: u64,
    /// When scrubs come due on their own.
    pub scrub_schedule: scrub::ScrubSchedule,
    /// Repair what a scheduled deep scrub found when it found at most
    /// this many objects (`None`: never; Ceph's `osd_scrub_auto_repair`).
    pub scrub_auto_repair: Option<usize>,
    /// The OSD's load is under its scrub threshold (set by the host).
    pub scrub_load_ok: bool,
    /// The cluster's flags that hold scheduled scrubs back (set by the
    /// host from its map).
    pub scrub_flags: scrub::ScrubFlags,
    /// The Unix time (ms) at which this PG's clock (`now_ms`) read 0, for
    /// the scrub stamps it reports (0: not known).
    pub clock_base_unix_ms: u64,
    /// Objects this copy rolled back or removed because no up copy held
    /// them at their logged version (`pull_what_is_left`).
    given_up: u64,
    /// Read leases: granted as a member, held and waited out as primary.
    lease: lease::Lease,
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
    /// Its load failed (a read error): rebuilt from the objects, whatever
    /// was persisted, at the next map or tick (writes meanwhile go
    /// unstamped here).
    Rebuild,
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

/// The request ids of `entries` (a copy's log, oldest first) whose
/// writes still stand, with their versions: a write an entry gave up
/// (rolled back or removed) answers no retry, its effect is gone.
pub(crate) fn committed_reqids(entries: &[LogEntry]) -> Vec<(ReqId, Version)> {
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
    (entries.iter())
        .filter_map(|e| Some((e.reqid.filter(|r| !undone.contains(r))?, e.version)))
        .collect()
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
            map: MapState::default(),
            role: Role::Stray,
            info,
            next_tid: 1,
            sent: HashMap::new(),
            next_send: 1,
            store_gen: 0,
            ops: client::Ops::default(),
            op_timeout_ms: 30_000,
            read_aside_min: u64::MAX,
            now_ms: 0,
            backend: Box::new(Replicated),
            ec: None,
            ecs: erasure::EcState::default(),
            unfound_lost: 0,
            peer_asked_ms: 0,
            rep: replica::Lane::default(),
            held: member::Held::default(),
            synced: false,
            missing: BTreeMap::new(),
            missing_loaded: false,
            applying: BTreeMap::new(),
            rec: Recovery::default(),
            backfills_done: BackfillCounts::default(),
            backfilled_in: None,
            scans_ahead: 0,
            log_entries_max: LOG_ENTRIES_MAX,
            backfill: None,
            backfill_chunk_objects: backfill::CHUNK_OBJECTS,
            recovery_sleep_ms: 0,
            next_ask: 1,
            stray: stray::Stray::default(),
            interval_ended: false,
            merkle_leaves: merkle::LEAVES_DEFAULT,
            tree: TreeState::Unloaded,
            scrub_interval_ms: SCRUB_INTERVAL_MS,
            scrub: Scrub::default(),
            mend: mend::Mend::default(),
            scrubber: scrub::Scrubber::default(),
            continuing: false,
            scrub_sleep_ms: scrub::SCRUB_SLEEP_MS,
            scrub_schedule: scrub::ScrubSchedule::default(),
            scrub_load_ok: true,
            resv: scrub_reserve::Reservations::default(),
            scrub_slots: crate::scrub_slots::ScrubSlots::unbounded(),
            scrub_auto_repair: None,
            scrub_flags: scrub::ScrubFlags::default(),
            clock_base_unix_ms: 0,
            given_up: 0,
            lease: lease::Lease::new(READ_LEASE_MS, Some(0)),
        }
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
            || !self.ops.inflight.is_empty()
            || !self.is_clean()
        {
            return;
        }
        self.scrub.next_ms = self.now_ms + self.scrub_interval_ms;
        let members: Vec<i32> = self
            .map
            .acting
            .iter()
            .copied()
            .filter(|&o| o >= 0 && o != self.whoami)
            .collect();
        for to in members {
            let tid = self.take_tid();
            let msg = PeerMsg::Scan {
                pg: self.id,
                from: self.whoami,
                ctx: self.rep_ctx(),
                after: Cursor::Start,
                upto: Cursor::End,
                limit: 1,
                filter: Filter::Nodes {
                    leaves,
                    level: 0,
                    idx: vec![0],
                },
            };
            self.send(tid, to, msg, fx);
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
        if self.info.last_update != head || !self.ops.inflight.is_empty() {
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
        let rebuild = matches!(self.tree, TreeState::Rebuild);
        let loaded = match rebuild {
            false => tree::Kept::load(s, self.coll, self.merkle_leaves),
            true => {
                tree::Kept::rebuild(s, self.coll, self.merkle_leaves).map(|(k, t)| (k, Some(t)))
            }
        };
        match loaded {
            Ok((k, t)) => {
                self.tree = TreeState::Kept(Box::new(k));
                if let Some(txn) = t {
                    tracing::info!("pg {}: Merkle tree rebuilt from the objects", self.id);
                    self.apply_own(txn, true, fx);
                }
            }
            Err(e) => {
                // Without a tree meanwhile, this copy is backfilled by
                // full scans; its writes are not stamped, so what it
                // persisted is rebuilt over, never trusted again (it was
                // Off for good, and a restart loaded the stale pages).
                tracing_error(self.id, &format!("Merkle tree: {e}; rebuilt later"));
                self.tree = TreeState::Rebuild;
                // Its shape record goes now (no read needed): a start
                // before the rebuild then rebuilds too, never trusting
                // the pages the unstamped writes left behind.
                if s.collection_exists(self.coll).unwrap_or(false) {
                    let mut t = Transaction::new();
                    t.rm_record(self.coll, tree::TREE_KEY);
                    self.apply_own(t, true, fx);
                }
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

    /// The objects this PG owns under its pool's pg_num (every object
    /// until a map says it): a log a split left holds entries of its
    /// siblings' objects too.
    fn owner(&self) -> split::Owner {
        match &self.map.pool {
            Some(p) if self.id.ps < p.pg_num => split::Owner::new(self.id.ps, p.pg_num),
            _ => split::Owner::ALL,
        }
    }

    /// The store split this copy or merged others into it
    /// (`split::plan` or `merge::plan`, applied): `info` is what it holds
    /// now. What was read from its records is read again (its missing set
    /// and backfill cursor, at the next input), and its Merkle tree is
    /// rebuilt from its objects at the next map, which ends its interval
    /// (pg_num changed). `epoch` is the map's that changed pg_num:
    /// messages from primaries on older maps are fenced off (a child that
    /// splits again at its first map has seen no pg_num change of its
    /// own).
    pub fn reshaped(&mut self, info: PgInfo, epoch: Epoch) {
        self.map.split_epoch = self.map.split_epoch.max(epoch);
        self.info = info;
        self.missing.clear();
        self.missing_loaded = false;
        self.backfill = None;
        self.tree = TreeState::Unloaded;
    }

    /// The version of the next entry this primary logs.
    fn next_version(&self) -> Version {
        Version {
            epoch: self.map.epoch,
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

    /// Queue `txn` on this copy's store (durable before it is answered
    /// for if `sync`), its landing awaited as this interval's.
    fn apply_own(&mut self, txn: Transaction, sync: bool, fx: &mut Vec<Effect>) {
        let tid = self.take_tid();
        self.applying.insert(tid, self.map.interval);
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
        self.map.interval
    }

    /// Where this PG stands in the map (for checking replica writes).
    pub fn view(&self) -> PgView {
        PgView {
            epoch: self.map.epoch,
            interval: self.map.interval,
            acting: self.map.acting.clone(),
            primary: self.map.primary,
            record_interval: self.map.record.as_ref().map_or(0, |r| r.interval),
            acting_up_from: self.map.acting_up_from,
        }
    }

    pub fn is_primary(&self) -> bool {
        self.map.primary == self.whoami
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
            map @ Input::Map { .. } => self.take_map(s, map, &mut fx),
            Input::WriteSetRecorded { interval } => self.on_rw_recorded(s, interval, &mut fx),
            Input::Op { op, token, now_ms } => {
                self.clock(now_ms);
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
            Input::LocalDone { tid, result } => self.on_local_done(s, tid, result, &mut fx),
            Input::Command { cmd, token } => {
                let result = self.command(cmd);
                fx.push(Effect::CommandReply { token, result });
                self.scrub_step(s, &mut fx);
            }
            Input::List {
                start,
                limit,
                token,
                now_ms,
            } => {
                self.clock(now_ms);
                let l = PendingList {
                    start,
                    limit,
                    token,
                    deadline_ms: now_ms + self.op_timeout_ms,
                };
                self.on_list(s, l, &mut fx)
            }
            Input::Peer { msg, token, now_ms } => {
                // (Requests carry the time they were queued: behind a full
                // lane, one may be older than the last tick.)
                self.now_ms = self.now_ms.max(now_ms);
                self.on_peer(s, msg, token, &mut fx);
            }
            Input::Reply { id, reply } => self.on_reply(s, id, reply, &mut fx),
            Input::Tick { now_ms } => {
                self.clock(now_ms);
                if matches!(self.tree, TreeState::Rebuild) && self.settled_all() {
                    self.load_tree(s, &mut fx);
                }
                self.lease_tick(s, &mut fx);
                self.check_stray(s, &mut fx);
                self.resend_writes(&mut fx);
                self.expire(&mut fx);
                self.expire_gathers(s, &mut fx);
                self.waiting_moved_done();
                // A PG behind peers again when its pause ends (erasure-coded,
                // or pulling what is left), or when a replicated hand-over's
                // pg_temp ask found no map (`ask_again_ms`).
                let paused =
                    (self.ec.is_some() || self.rec.lost_retry) && now_ms >= self.rec.peer_again_ms;
                let ask_again = self.rec.ask_again_ms;
                let unanswered = ask_again > 0 && now_ms >= ask_again;
                if self.role == Role::Behind && (paused || unanswered) {
                    self.start_peering(s, &mut fx);
                }
                self.retry_recovery(s, &mut fx);
                // Ops that waited for a backfill chunk since dropped.
                self.release_bf_blocked(s, &mut fx);
                self.mend_rerun(s, &mut fx);
                self.expire_scrub_slot();
                self.serve_queued_reserve(&mut fx);
                self.scrub_some(&mut fx);
                self.scrub_step(s, &mut fx);
                self.down_fill_holes(&mut fx);
                self.ask_temps_again(&mut fx);
            }
            Input::Continue => self.on_continue(s, &mut fx),
            Input::ReadDone { tid, result } => self.on_read_done(s, tid, result, &mut fx),
            Input::ScrubSlotFree { now_ms } => {
                self.now_ms = self.now_ms.max(now_ms);
                self.serve_queued_reserve(&mut fx);
                self.scrub_step(s, &mut fx);
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

    /// A map epoch (`Input::Map`): the PG's sets, record and pool in it.
    fn take_map(&mut self, s: &dyn ObjectStore, map: Input, fx: &mut Vec<Effect>) {
        let Input::Map {
            epoch,
            up,
            acting,
            acting_up_from,
            primary,
            pool,
            record,
            record_up,
            toofull,
            holds,
            spares,
            striper,
            primary_temp,
            unfound_lost,
            now_ms,
        } = map
        else {
            return;
        };
        self.map.primary_temp = primary_temp;
        self.unfound_lost = self.unfound_lost.max(unfound_lost);
        self.clock(now_ms);
        if epoch > self.map.epoch {
            let (up, acting) = (holes_as_none(up), holes_as_none(acting));
            self.take_layout(s, striper, fx);
            self.map.toofull = toofull;
            // A merge's holds start and end intervals: writes of the one
            // before are done or never acknowledged, and the PG peers
            // anew, so its copies agree on the version it reports.
            let merge_hold = self.map.holds.merge != holds.merge;
            self.map.holds = holds;
            self.map.spares = spares;
            // A pg_num change (a split or a merge) ends every interval of
            // the pool.
            let split = (self.map.pool.as_ref()).is_some_and(|p| p.pg_num != pool.pg_num);
            if split {
                self.map.split_epoch = epoch;
            }
            let restarted =
                acting_up_from > self.map.interval || self.interval_ended || split || merge_hold;
            let (record, record_up) =
                self.record_to_keep(&acting, primary, restarted, record, record_up);
            let record_changed = record != self.map.record || record_up != self.map.record_up;
            self.map.record = record;
            self.map.record_up = record_up;
            self.map.up = up;
            self.map.acting_up_from = acting_up_from;
            let m = MapView {
                epoch,
                acting,
                primary,
                restarted,
            };
            // Whether this copy's shard is its position's, before
            // peering asks (a store error counts as moved: safe).
            self.read_moved(s, &m.acting);
            self.ecs.moved_fresh = self.settled_all();
            self.on_map(s, m, pool, record_changed, fx);
            if !self.is_primary() {
                self.ecs.unfound_waiting.clear();
            }
            // Queries, logs and copies that waited for this map
            // can be answered.
            self.rerun_queries(fx);
            self.rerun_held_logs(s, fx);
            self.rerun_held_copies(s, fx);
        }
    }

    /// The pool's layout as a map says it: an erasure-coded pool's
    /// striping and backend (its copies keep no Merkle tree), and the
    /// tree loaded at the first map, never before: only the map says
    /// whether the pool is erasure-coded (then there is none; a tree
    /// rebuilt before it was left behind, and fsck found it wrong).
    fn take_layout(
        &mut self,
        s: &dyn ObjectStore,
        striper: Option<Arc<Striper>>,
        fx: &mut Vec<Effect>,
    ) {
        if let Some(st) = striper {
            if self.ec.is_none() {
                self.backend = Box::new(Erasure);
            }
            self.ec = Some(st);
            if !matches!(self.tree, TreeState::Off) {
                self.drop_tree(s, fx);
            }
        }
        // (A rebuild waits until what this copy queued is durable: it
        // reads the objects, and the writes meanwhile were not stamped.)
        let rebuild = matches!(self.tree, TreeState::Rebuild) && self.settled_all();
        if matches!(self.tree, TreeState::Unloaded) || rebuild {
            self.load_tree(s, fx);
        }
    }

    /// The write-set record (and its up members) a new map leaves this PG
    /// with. A record this PG was told holds for its interval stays until
    /// a map shows a newer one or the interval ends. The reply and the
    /// maps travel apart, so a map from before the record's commit can
    /// come after the reply; within one interval a record is never
    /// dropped (its members are acting, so up, so not lost) nor replaced
    /// by an older one, and peering against the older record would roll
    /// back writes acknowledged under this one.
    fn record_to_keep(
        &self,
        acting: &[i32],
        primary: i32,
        restarted: bool,
        record: Option<WriteSetRecord>,
        record_up: Vec<i32>,
    ) -> (Option<WriteSetRecord>, Vec<i32>) {
        // (As `on_map` tells an interval that goes on.)
        let same_interval = self.map.interval > 0
            && acting == self.map.acting
            && primary == self.map.primary
            && !restarted;
        match &self.map.record {
            Some(mine)
                if same_interval
                    && mine.interval == self.map.interval
                    && record.as_ref().is_none_or(|r| r.interval < mine.interval) =>
            {
                (Some(mine.clone()), mine.members().collect())
            }
            _ => (record, record_up),
        }
    }

    /// The local store made transaction `tid` durable (or failed).
    fn on_local_done(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        result: Result<(), StoreError>,
        fx: &mut Vec<Effect>,
    ) {
        if let Some(k) = self.kept() {
            k.durable(tid);
        }
        let result = result.map_err(|e| RepError::Failed(e.to_string()));
        if self.on_mend_applied(s, tid, &result, fx) {
            // (A good copy written over a damaged one.)
        } else if self.stray.removing == Some(tid) {
            self.applying.remove(&tid);
            self.stray.removing = None;
            match result {
                Ok(()) => self.remove_some(s, fx),
                Err(e) => tracing_error(self.id, &format!("removing a stray copy: {e:?}")),
            }
        } else if let Some(c) = self.rep.committing.remove(&tid) {
            self.on_member_commit(s, c, result, fx);
        } else {
            self.applying.remove(&tid);
            self.done(s, tid, self.whoami, result, fx)
        }
        self.on_settled(s, fx);
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
                    self.ops.recent.remove(&r);
                }
            }
        }
        Ok(())
    }

    /// Rebuild the request-id index from the PG log on disk (a new
    /// primary answers retries of writes its predecessor applied).
    fn load_recent(&mut self, s: &dyn ObjectStore) {
        self.ops.recent.clear();
        self.ops.recent_order.clear();
        // A merged copy's carried-over ids first: its log, newer, may
        // push them out.
        let dups = s.record(self.coll, DUPS_KEY).ok().flatten();
        for (r, v) in dups
            .and_then(|b| record::decode_dups(&b).ok())
            .unwrap_or_default()
        {
            self.remember(r, v, true);
        }
        let Ok(entries) = self.recent_entries(s) else {
            return;
        };
        // Peering made every write-set member's log equal to this one:
        // what it holds is committed.
        for (r, v) in committed_reqids(&entries) {
            self.remember(r, v, true);
        }
    }

    fn remember(&mut self, r: ReqId, v: Version, committed: bool) {
        // (Ids forgotten as undone leave their place in the order.)
        debug_assert!(
            self.ops.recent.len() <= self.ops.recent_order.len(),
            "pg {}: request ids indexed out of their order",
            self.id
        );
        if self.ops.recent.insert(r, (v, committed)).is_none() {
            self.ops.recent_order.push_back(r);
        }
        while self.ops.recent_order.len() > self.log_entries_max as usize {
            if let Some(old) = self.ops.recent_order.pop_front() {
                self.ops.recent.remove(&old);
            }
        }
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
        self.rep.committing.is_empty() && self.applying.values().all(|&i| i == self.map.interval)
    }

    /// Where this primary's history stands, for its members' checks.
    /// The fence every message from a primary passes (see
    /// `replica_accepts`): `what` (e.g. "push from") names the message
    /// in the refusal.
    fn fence(&self, from: i32, ctx: &RepCtx, what: &str) -> Result<(), RepError> {
        let peered_since = (self.held.answered_intervals.get(&from))
            .is_some_and(|&interval| ctx.interval < interval);
        if ctx.epoch >= self.held.answered_epoch
            && ctx.epoch >= self.map.split_epoch
            && !peered_since
            && replica_accepts(&self.view(), from, ctx)
        {
            return Ok(());
        }
        Err(RepError::Stale(format!(
            "pg {}: {what} osd.{from} at epoch {}, this OSD is at epoch {} with acting {:?}",
            self.id, ctx.epoch, self.map.epoch, self.map.acting
        )))
    }

    fn rep_ctx(&self) -> RepCtx {
        RepCtx {
            interval: self.map.interval,
            epoch: self.map.epoch,
            acting: self.map.acting.clone(),
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

    fn take_tid(&mut self) -> u64 {
        let tid = self.next_tid;
        self.next_tid += 1;
        tid
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
