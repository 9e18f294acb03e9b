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

pub mod record;
mod replica;

pub use replica::{replica_accepts, replica_step, ReplicaStep};

use crate::backend::{Backend, Replicated, WritePlan};
use crate::exec::{self, ObjState, VERSION_ATTR};
use loligo_store::{CollectionId, ObjectId, ObjectStore, StoreError, Transaction};
use loligo_types::ops::{ClientOp, OpError, OpReply, ReqId, SubOp, SubResult, Version};
use loligo_types::{Epoch, PgId, PgStat, PgState, Pool, WriteSetRecord};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// PG log entries kept (older ones are trimmed in the same transaction).
pub const LOG_ENTRIES_MAX: u64 = 1000;
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

/// One PG log entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    pub version: Version,
    pub name: String,
    /// The object no longer exists after this entry.
    pub removed: bool,
    /// The client request that made it (for answering retries).
    pub reqid: Option<ReqId>,
}

/// Record key of the log entry for version counter `v`.
pub fn log_key(v: u64) -> Vec<u8> {
    let mut k = b"log/".to_vec();
    k.extend_from_slice(&v.to_be_bytes());
    k
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
}

/// The info record a store holds for `coll` (`None`: no record, or one
/// that cannot be read: the caller then treats the copy as empty, and
/// peering takes the PG's writes from its other members).
pub fn stored_info(s: &dyn ObjectStore, coll: CollectionId) -> Option<PgInfo> {
    match s.record(coll, INFO_KEY) {
        Ok(Some(b)) => record::decode_info(&b).ok(),
        _ => None,
    }
}

/// Why a replica did not take a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepError {
    /// It is in a newer interval: this primary's map is old; the client
    /// retries under the new map.
    Stale(String),
    /// It failed to apply the write or could not be reached.
    Failed(String),
}

/// Inputs to a PG.
#[derive(Debug)]
pub enum Input {
    /// A map epoch: the PG's acting set and primary under it.
    Map {
        epoch: Epoch,
        acting: Vec<i32>,
        primary: i32,
        pool: Pool,
        /// The PG's recorded write set in this map, if any.
        record: Option<WriteSetRecord>,
        /// The members of `record` that are up in this map.
        record_up: Vec<i32>,
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
        info: Option<PgInfo>,
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
    /// Queue `txn` on the local store; report `LocalDone`.
    Apply {
        tid: u64,
        txn: Transaction,
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
        result: Result<Option<PgInfo>, String>,
    },
    /// Ask the monitors to make `osds` the acting set (a complete OSD
    /// first, so that it is primary).
    RequestPgTemp {
        osds: Vec<i32>,
    },
    /// Ask the monitors to record `osds` as the write set of `interval`;
    /// report `WriteSetRecorded` once they hold it.
    RecordWriteSet {
        interval: Epoch,
        osds: Vec<i32>,
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
        infos: BTreeMap<i32, Option<PgInfo>>,
    },
    /// Peered; serves reads while the monitors record the write set.
    Activating {
        write_set: Vec<i32>,
    },
    /// Primary with its write set (itself first).
    Primary {
        write_set: Vec<i32>,
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

struct InFlight {
    token: u64,
    reqid: Option<ReqId>,
    name: String,
    waiting: BTreeSet<i32>,
    version: Version,
    results: Vec<loligo_types::ops::SubResult>,
    failed: Option<RepError>,
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
    inflight: BTreeMap<u64, InFlight>,
    /// Objects with a write in flight, and the ops queued behind it.
    busy: BTreeMap<String, VecDeque<Pending>>,
    /// Ops waiting for the PG to accept writes.
    waiting: VecDeque<Pending>,
    /// How long an op may wait (ms).
    pub op_timeout_ms: u64,
    /// The pool type's data layout.
    backend: Box<dyn Backend>,
    /// Request ids of the writes in the PG log, with their versions and
    /// whether the whole write set has them (oldest first in
    /// `recent_order`; at most `LOG_ENTRIES_MAX`).
    recent: HashMap<ReqId, (Version, bool)>,
    recent_order: VecDeque<ReqId>,
    now_ms: u64,
    /// The recorded write set and its members that are up, as of `epoch`.
    record: Option<WriteSetRecord>,
    record_up: Vec<i32>,
    /// When peering last asked members for their infos.
    peer_asked_ms: u64,
    /// Writes from a primary to this copy.
    rep: replica::Lane,
    /// Listings waiting for the PG to serve.
    lists: VecDeque<PendingList>,
    /// Peering queries waiting for a newer map.
    queries: Vec<PendingQuery>,
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
            inflight: BTreeMap::new(),
            busy: BTreeMap::new(),
            waiting: VecDeque::new(),
            op_timeout_ms: 30_000,
            now_ms: 0,
            backend: Box::new(Replicated),
            recent: HashMap::new(),
            recent_order: VecDeque::new(),
            record: None,
            record_up: Vec::new(),
            peer_asked_ms: 0,
            rep: replica::Lane::default(),
            lists: VecDeque::new(),
            queries: Vec::new(),
        }
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
        }
    }

    pub fn is_primary(&self) -> bool {
        self.primary == self.whoami
    }

    /// Feed one input; the effects to perform, in order.
    pub fn handle(&mut self, s: &dyn ObjectStore, input: Input) -> Vec<Effect> {
        let mut fx = Vec::new();
        match input {
            Input::Map {
                epoch,
                acting,
                primary,
                pool,
                record,
                record_up,
                now_ms,
            } => {
                self.now_ms = now_ms;
                if epoch > self.epoch {
                    let record_changed = record != self.record || record_up != self.record_up;
                    self.record = record;
                    self.record_up = record_up;
                    self.on_map(s, epoch, acting, primary, pool, record_changed, &mut fx);
                    // Queries that waited for this map can be answered.
                    self.rerun_queries(&mut fx);
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
                let result = result.map_err(|e| RepError::Failed(e.to_string()));
                if let Some((token, interval)) = self.rep.committing.remove(&tid) {
                    let result = if interval == self.interval {
                        result
                    } else {
                        Err(RepError::Stale(format!(
                            "pg {}: interval {interval} ended (now {}) before the write was durable",
                            self.id, self.interval
                        )))
                    };
                    fx.push(Effect::RepReply { token, result });
                } else {
                    self.done(s, tid, self.whoami, result, &mut fx)
                }
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
            Input::Tick { now_ms } => {
                self.now_ms = now_ms;
                self.expire(&mut fx);
            }
        }
        fx
    }

    #[allow(clippy::too_many_arguments)]
    fn on_map(
        &mut self,
        s: &dyn ObjectStore,
        epoch: Epoch,
        acting: Vec<i32>,
        primary: i32,
        pool: Pool,
        record_changed: bool,
        fx: &mut Vec<Effect>,
    ) {
        self.epoch = epoch;
        let min_size_changed = self
            .pool
            .as_ref()
            .is_some_and(|p| p.min_size != pool.min_size);
        self.pool = Some(pool);
        if acting == self.acting && primary == self.primary && self.interval > 0 {
            // Same interval: peer again if min_size moved (the write set
            // may now allow writes) or if the recorded write set's
            // members came or went while this primary waits for them.
            let waiting_for_rw = matches!(self.role, Role::Peering { .. } | Role::Down { .. });
            if self.is_primary() && (min_size_changed || (record_changed && waiting_for_rw)) {
                self.start_peering(s, fx);
            } else if let (Role::Activating { write_set }, Some(record)) =
                (&self.role, &self.record)
            {
                // The record arrived with the map before the reply did.
                if record.interval == self.interval && record.osds == *write_set {
                    self.on_rw_recorded(s, self.interval, fx);
                }
            }
            return;
        }
        // A new interval: writes in flight are abandoned (their clients
        // retry under the new map); queued ops are re-examined.
        self.interval = epoch;
        self.acting = acting;
        self.primary = primary;
        for (_, f) in std::mem::take(&mut self.inflight) {
            fx.push(reply(
                f.token,
                Err(OpError::WrongPrimary { epoch }),
                f.version,
                epoch,
            ));
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
        // The info on disk is the truth (replica writes went straight to
        // the store while this OSD was not primary). Memory may be ahead
        // by writes still in flight here: keep the newer, so that no
        // version is ever handed out twice.
        if let Some(i) = stored_info(s, self.coll) {
            if i.last_update > self.info.last_update {
                self.info = i;
            }
        }
        self.load_recent(s);
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

    fn on_info(
        &mut self,
        s: &dyn ObjectStore,
        from: i32,
        interval: Epoch,
        info: Option<PgInfo>,
        fx: &mut Vec<Effect>,
    ) {
        if interval != self.interval {
            return;
        }
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
        let Role::Activating { write_set } = &self.role else {
            return;
        };
        self.record = Some(WriteSetRecord {
            interval,
            osds: write_set.clone(),
        });
        self.role = Role::Primary {
            write_set: write_set.clone(),
        };
        self.activate(s, fx);
    }

    /// Rebuild the request-id index from the PG log on disk (a new
    /// primary answers retries of writes its predecessor applied).
    fn load_recent(&mut self, s: &dyn ObjectStore) {
        self.recent.clear();
        self.recent_order.clear();
        let Ok(rows) = s.records(self.coll, b"log/", LOG_ENTRIES_MAX as usize) else {
            return;
        };
        for (k, v) in rows {
            if !k.starts_with(b"log/") {
                break;
            }
            if let Ok(e) = record::decode_log(&v) {
                if let Some(r) = e.reqid {
                    // Peering made every write-set member's log equal to
                    // this one: what it holds is committed.
                    self.remember(r, e.version, true);
                }
            }
        }
    }

    fn remember(&mut self, r: ReqId, v: Version, committed: bool) {
        if self.recent.insert(r, (v, committed)).is_none() {
            self.recent_order.push_back(r);
        }
        while self.recent_order.len() > LOG_ENTRIES_MAX as usize {
            if let Some(old) = self.recent_order.pop_front() {
                self.recent.remove(&old);
            }
        }
    }

    /// The shell creates the PG's collection before the first input, so
    /// transactions here never need to.
    fn maybe_activate(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let Role::Peering { want, infos } = &self.role else {
            return;
        };
        if !want.is_empty() {
            return;
        }
        // Every acknowledged write is on each member of the recorded
        // write set: without one of them, any answer could be stale.
        if let Some(record) = &self.record {
            let heard = record
                .osds
                .iter()
                .any(|o| *o == self.whoami || infos.get(o).is_some_and(Option::is_some));
            if !heard {
                self.role = Role::Down {
                    osds: record.osds.clone(),
                };
                return;
            }
        }
        // No copy at all is an empty log: complete while the PG has never
        // been written, behind once it has.
        let infos: BTreeMap<i32, PgInfo> = infos
            .iter()
            .map(|(o, i)| (*o, i.unwrap_or_default()))
            .collect();
        // The authoritative log is the longest among the recorded write
        // set's members: their logs are prefixes of one history. A copy
        // outside it that reaches further holds writes from a branch that
        // was never acknowledged, however new their epoch looks.
        let mine = (self.whoami, self.info);
        let authority = |o: &i32| self.record.as_ref().is_none_or(|r| r.osds.contains(o));
        let newest = infos
            .iter()
            .chain([(&mine.0, &mine.1)])
            .filter(|(o, _)| authority(o))
            .map(|(_, i)| i.last_update)
            .max()
            .unwrap_or_default();
        let complete: Vec<i32> = infos
            .iter()
            .filter(|(_, i)| i.last_update == newest)
            .map(|(o, _)| *o)
            .collect();
        if self.info.last_update != newest {
            // A member has writes this primary lacks (or this primary's
            // log went another way): hand the primary role to a complete
            // member until recovery exists.
            let size = self.pool.as_ref().map_or(1, |p| p.size as usize).max(1);
            let mut osds = complete.clone();
            osds.extend(self.acting.iter().filter(|o| !complete.contains(o)));
            // `complete` is not empty: someone has `newest`.
            osds.truncate(size);
            fx.push(Effect::RequestPgTemp { osds });
            self.role = Role::Behind;
            return;
        }
        let mut write_set = vec![self.whoami];
        write_set.extend(complete.iter().filter(|o| self.acting.contains(o)));
        if write_set.len() < self.min_size() {
            // Reads only: nothing to record.
            self.role = Role::Primary { write_set };
            return self.activate(s, fx);
        }
        let recorded = self
            .record
            .as_ref()
            .is_some_and(|r| r.interval == self.interval && r.osds == write_set);
        if recorded {
            self.role = Role::Primary { write_set };
            return self.activate(s, fx);
        }
        fx.push(Effect::RecordWriteSet {
            interval: self.interval,
            osds: write_set.clone(),
        });
        self.role = Role::Activating { write_set };
        // Reads may go ahead; writes wait for the record.
        self.rerun_waiting(s, fx);
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
        if !replica_accepts(&self.view(), w.from, &w.ctx) {
            return fx.push(fail(RepError::Stale(format!(
                "pg {}: write from osd.{} at epoch {}, this OSD is at epoch {} with acting {:?}",
                self.id, w.from, w.ctx.epoch, self.epoch, self.acting
            ))));
        }
        if let Some(e) = replica::check_txn(self.coll, &w.txn) {
            return fx.push(fail(RepError::Failed(format!("pg {}: {e}", self.id))));
        }
        // What this copy holds or has queued, as a primary or a replica.
        self.rep.high = self.rep.high.max(self.info.last_update);
        match replica_step(s, self.coll, &mut self.rep.high, &w.ctx) {
            ReplicaStep::Apply => {
                if let Some(info) = replica::info_in(self.coll, &w.txn) {
                    self.info = info;
                }
                let tid = self.take_tid();
                self.rep.committing.insert(tid, (token, self.interval));
                fx.push(Effect::Apply { tid, txn: w.txn });
                // Its successors may be waiting for it.
                self.rerun_rep_waiting(s, fx);
            }
            ReplicaStep::Duplicate => {
                // Durable once everything queued before it is.
                let tid = self.take_tid();
                self.rep.committing.insert(tid, (token, self.interval));
                fx.push(Effect::Apply {
                    tid,
                    txn: Transaction::new(),
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

    /// A peering query: answered with this copy's info once this PG's map
    /// has reached the query's epoch (writes it accepted count, durable or
    /// not: any that were not durable yet will not be acknowledged to
    /// their old primary).
    fn on_query(&mut self, q: PendingQuery, fx: &mut Vec<Effect>) {
        if self.epoch < q.epoch {
            return self.queries.push(q);
        }
        fx.push(Effect::InfoReply {
            token: q.token,
            result: Ok(Some(self.info)),
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
            let tid = self.take_tid();
            fx.push(Effect::Apply { tid, txn: t });
        }
        self.rerun_waiting(s, fx);
    }

    fn min_size(&self) -> usize {
        self.pool
            .as_ref()
            .map_or(usize::MAX, |p| p.min_size as usize)
    }

    fn can_write(&self) -> bool {
        matches!(&self.role, Role::Primary { write_set } if write_set.len() >= self.min_size())
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
        let writes = p.op.ops.iter().any(SubOp::is_write);
        let active = matches!(self.role, Role::Primary { .. } | Role::Activating { .. });
        if !active || (writes && !self.can_write()) {
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
            Role::Primary { write_set } | Role::Activating { write_set } => write_set.len() as u32,
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
        let writes = p.op.ops.iter().any(SubOp::is_write);
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
        self.write(p, oid, &st, out, fx);
    }

    fn write(
        &mut self,
        p: Pending,
        oid: ObjectId,
        st: &ObjState,
        out: exec::Outcome,
        fx: &mut Vec<Effect>,
    ) {
        let prev = self.info.last_update;
        let version = Version {
            epoch: self.epoch,
            v: prev.v + 1,
        };
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
            name: p.op.name.clone(),
            removed: !out.exists_after,
            reqid: p.op.reqid,
        };
        if let Some(r) = p.op.reqid {
            self.remember(r, version, false);
        }
        t.set_record(self.coll, &log_key(version.v), record::encode_log(&entry));
        if version.v > LOG_ENTRIES_MAX {
            t.rm_record(self.coll, &log_key(version.v - LOG_ENTRIES_MAX));
        }
        t.set_record(self.coll, INFO_KEY, record::encode_info(&self.info));
        let Role::Primary { write_set } = &self.role else {
            return;
        };
        // Not `take_tid`: `write_set` borrows the role.
        let tid = self.next_tid;
        self.next_tid += 1;
        fx.extend(self.backend.distribute(WritePlan {
            tid,
            ctx: RepCtx {
                interval: self.interval,
                epoch: self.epoch,
                acting: self.acting.clone(),
                prev,
                version,
            },
            txn: t,
            write_set,
            me: self.whoami,
        }));
        self.inflight.insert(
            tid,
            InFlight {
                token: p.token,
                reqid: p.op.reqid,
                name: p.op.name.clone(),
                waiting: write_set.iter().copied().collect(),
                version,
                results: out.results,
                failed: None,
            },
        );
        self.busy.insert(p.op.name, VecDeque::new());
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
        f.waiting.remove(&from);
        if let Err(e) = result {
            let e = match e {
                RepError::Stale(m) => RepError::Stale(format!("osd.{from}: {m}")),
                RepError::Failed(m) => RepError::Failed(format!("osd.{from}: {m}")),
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
        let result = match f.failed {
            None => {
                if let Some(r) = f.reqid.and_then(|r| self.recent.get_mut(&r)) {
                    r.1 = true;
                }
                Ok(f.results)
            }
            Some(RepError::Stale(_)) => Err(OpError::WrongPrimary { epoch: self.epoch }),
            Some(RepError::Failed(e)) => Err(OpError::Io(e)),
        };
        fx.push(reply(f.token, result, f.version, self.epoch));
        // The next op on this object, if any.
        if let Some(mut q) = self.busy.remove(&f.name) {
            if let Some(next) = q.pop_front() {
                self.on_op(s, next, fx);
                if let Some(rest) = self.busy.get_mut(&f.name) {
                    rest.extend(q);
                } else {
                    for p in q {
                        self.on_op(s, p, fx);
                    }
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
        for l in take_expired(&mut self.lists, now, |l| l.deadline_ms) {
            fx.push(Effect::ListReply {
                token: l.token,
                result: Err(err.clone()),
            });
        }
    }

    /// Whether the PG has nothing in flight or waiting.
    pub fn idle(&self) -> bool {
        self.inflight.is_empty()
            && self.waiting.is_empty()
            && self.busy.is_empty()
            && self.rep.waiting.is_empty()
            && self.rep.committing.is_empty()
            && self.lists.is_empty()
            && self.queries.is_empty()
    }

    /// The PG's state for the monitors (primaries only).
    pub fn stat(&self) -> Option<PgStat> {
        if !self.is_primary() {
            return None;
        }
        let size = self.pool.as_ref().map_or(0, |p| p.size as usize);
        let state = match &self.role {
            Role::Peering { .. } => PgState::PEERING,
            Role::Behind => PgState::PEERING | PgState::WAIT_PG_TEMP,
            Role::Down { .. } => PgState::DOWN,
            Role::Activating { .. } => PgState::ACTIVATING,
            Role::Primary { write_set } if write_set.len() < self.min_size() => {
                PgState::UNDERSIZED | PgState::DEGRADED | PgState::PEERED
            }
            Role::Primary { write_set } if write_set.len() < size => {
                PgState::ACTIVE | PgState::UNDERSIZED | PgState::DEGRADED
            }
            Role::Primary { .. } => PgState::ACTIVE | PgState::CLEAN,
            _ => return None,
        };
        Some(PgStat {
            pg: self.id,
            epoch: self.epoch,
            state,
            acting: self.acting.clone(),
            objects: self.info.objects,
            bytes: self.info.bytes,
        })
    }
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
    let from = start.map(|n| ObjectId::new(loligo_crush::hash::str_hash_rjenkins(n.as_bytes()), n));
    let (mut names, next) = s
        .list(coll, from.as_ref(), lim + 1)
        .map_err(exec::store_err)?;
    if let Some(f) = &from {
        names.retain(|o| o != f);
    }
    let more = names.len() > lim || next.is_some();
    names.truncate(lim);
    Ok((names.into_iter().map(|o| o.name).collect(), more))
}
