//! The monitor's Raft group (openraft): its type configuration, the log
//! and vote kept in fjall, and the state machine that holds the cluster
//! map.
//!
//! The state machine is deterministic: applying the same log gives the
//! same map on every monitor (a command refused by the map's checks is
//! refused everywhere, and changes nothing). It must never consult the
//! clock, the network or anything outside the log.

// openraft's trait methods return its `StorageError` (large); our helpers
// return it too rather than convert at every call.
#![allow(clippy::result_large_err)]

use crate::kv::{KvOp, MonKv};
use crate::protocol::MapUpdate;
use loligo_types::{decode, encode, Change, Epoch, Incremental, MapError, OsdMap};
use openraft::storage::{LogFlushed, RaftLogStorage, RaftStateMachine};
use openraft::{
    BasicNode, Entry, EntryPayload, LogId, LogState, OptionalSend, RaftLogReader,
    RaftSnapshotBuilder, Snapshot, SnapshotMeta, StorageError, StorageIOError, StoredMembership,
    Vote,
};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::RangeBounds;
use std::sync::{Arc, RwLock};

/// What the Raft log carries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MonCmd {
    /// Create the cluster's first map (ignored once a map exists).
    Init {
        fsid: String,
        failure_domain: String,
    },
    /// The next epoch's changes.
    Changes(Vec<Change>),
    /// Start a new group's map from the encoded map of a group that lost
    /// its majority (`mon run --restore`), its epoch moved on by
    /// [`RESTORE_EPOCH_JUMP`] (ignored once a map exists).
    Restore(Vec<u8>),
    /// Cluster log entries the leader saw ([`crate::clog`]); the map is
    /// unchanged.
    Log(crate::clog::LogBatch),
    /// A change to the dashboard's access tokens ([`crate::tokens`]);
    /// the map is unchanged.
    Dashboard(crate::tokens::TokenCmd),
    /// A change to the S3 gateway's users and keys ([`crate::s3users`]);
    /// the map is unchanged.
    S3(crate::s3users::S3Cmd),
}

/// How far a restored map's epoch moves past the map it was made from:
/// epochs the lost group committed after it (which some OSD or client may
/// hold) are never reused for other maps.
pub const RESTORE_EPOCH_JUMP: u64 = 100_000;

/// The result of applying one command: the map's epoch after it.
pub type MonResponse = Result<Epoch, MapError>;

openraft::declare_raft_types!(
    /// Openraft types of the monitor group.
    pub TypeConfig:
        D = MonCmd,
        R = MonResponse,
        NodeId = u64,
        Node = BasicNode,
        Entry = Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
);

/// The monitors' Raft handle.
pub type MonRaft = openraft::Raft<TypeConfig>;
type SErr = StorageError<u64>;

/// Incrementals kept for watchers that are a little behind; further
/// behind, they get the full map.
pub const INCS_MAX: usize = loligo_types::asks::INCS_KEPT;

/// The replicated state: the map and the most recent incrementals.
#[derive(Clone, Debug, Default)]
pub struct MonState {
    pub map: Option<OsdMap>,
    pub incs: VecDeque<Incremental>,
    pub last_applied: Option<LogId<u64>>,
    pub membership: StoredMembership<u64, BasicNode>,
    /// The cluster log.
    pub log: crate::clog::ClusterLog,
    /// The dashboard's access tokens (their hashes).
    pub tokens: crate::tokens::Tokens,
    /// The S3 gateway's users and keys.
    pub s3: crate::s3users::S3Users,
}

impl MonState {
    pub fn epoch(&self) -> Epoch {
        self.map.as_ref().map_or(0, |m| m.epoch)
    }

    /// Updates a watcher that has `have` needs, in order.
    pub fn updates_since(&self, have: Epoch) -> Vec<MapUpdate> {
        let Some(map) = &self.map else {
            return Vec::new();
        };
        if have >= map.epoch {
            return Vec::new();
        }
        let first = self.incs.front().map_or(u64::MAX, |i| i.epoch);
        if have == 0 || have + 1 < first {
            return vec![MapUpdate::Full(encode(map))];
        }
        self.incs
            .iter()
            .filter(|i| i.epoch > have)
            .map(|i| MapUpdate::Inc(encode(i)))
            .collect()
    }

    fn apply_cmd(&mut self, cmd: &MonCmd) -> MonResponse {
        match cmd {
            MonCmd::Init {
                fsid,
                failure_domain,
            } => {
                if self.map.is_none() {
                    self.map = Some(OsdMap::new(fsid, failure_domain)?);
                }
                Ok(self.epoch())
            }
            MonCmd::Restore(bytes) => {
                if self.map.is_none() {
                    let mut m = loligo_types::decode_map(bytes)?;
                    m.epoch = m.epoch.saturating_add(RESTORE_EPOCH_JUMP);
                    self.incs.clear();
                    self.map = Some(m);
                }
                Ok(self.epoch())
            }
            MonCmd::Log(batch) => {
                self.log.apply(batch);
                Ok(self.epoch())
            }
            MonCmd::Dashboard(cmd) => {
                self.tokens.apply(cmd);
                Ok(self.epoch())
            }
            MonCmd::S3(cmd) => {
                self.s3.apply(cmd).map_err(MapError::Invalid)?;
                Ok(self.epoch())
            }
            MonCmd::Changes(changes) => {
                let map = self.map.as_mut().ok_or(MapError::Invalid(
                    "the cluster map is not initialised".into(),
                ))?;
                let inc = Incremental {
                    epoch: map.epoch + 1,
                    changes: changes.clone(),
                };
                map.apply(&inc)?;
                self.incs.push_back(inc);
                while self.incs.len() > INCS_MAX {
                    self.incs.pop_front();
                }
                Ok(map.epoch)
            }
        }
    }
}

/// The snapshot body (JSON; the map inside in its binary encoding, since
/// its override tables have non-string keys).
#[derive(Serialize, Deserialize)]
struct SnapBody {
    map: Option<Vec<u8>>,
    incs: Vec<Vec<u8>>,
    /// Absent from snapshots made before the cluster log.
    #[serde(default)]
    log: crate::clog::ClusterLog,
    /// Absent from snapshots made before the dashboard's tokens.
    #[serde(default)]
    tokens: crate::tokens::Tokens,
    /// Absent from snapshots made before the S3 gateway's users.
    #[serde(default)]
    s3: crate::s3users::S3Users,
}

fn to_body(s: &MonState) -> Vec<u8> {
    let b = SnapBody {
        map: s.map.as_ref().map(encode),
        incs: s.incs.iter().map(encode).collect(),
        log: s.log.clone(),
        tokens: s.tokens.clone(),
        s3: s.s3.clone(),
    };
    serde_json::to_vec(&b).unwrap_or_default()
}

/// The state a snapshot holds, without the Raft metadata that comes
/// beside it (last applied, membership: the caller sets them).
fn from_body(b: &[u8]) -> Result<MonState, String> {
    let body: SnapBody = serde_json::from_slice(b).map_err(|e| e.to_string())?;
    let map = match body.map {
        Some(m) => Some(loligo_types::decode_map(&m).map_err(|e| e.to_string())?),
        None => None,
    };
    let incs = body
        .incs
        .iter()
        .map(|i| decode::<Incremental>("incremental", i).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    Ok(MonState {
        map,
        incs,
        log: body.log,
        tokens: body.tokens,
        s3: body.s3,
        ..MonState::default()
    })
}

/// The state machine shared between Raft and the monitor's service.
pub struct Shared {
    pub state: RwLock<MonState>,
    /// Tells watchers the newest epoch.
    pub epoch_tx: tokio::sync::watch::Sender<Epoch>,
}

impl Shared {
    /// A read of the state (a poisoned lock still holds a whole state:
    /// writers replace it only after every check passed).
    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, MonState> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, MonState> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }
}

const K_VOTE: &[u8] = b"m/vote";
const K_COMMITTED: &[u8] = b"m/committed";
const K_PURGED: &[u8] = b"m/purged";
const K_SNAP: &[u8] = b"m/snapshot";
/// Written when a monitor's store is made (`--mkfs`): a store without it
/// (and without any Raft state) is a new or a wiped one.
const K_CREATED: &[u8] = b"m/created";

fn log_key(i: u64) -> Vec<u8> {
    let mut k = b"l/".to_vec();
    k.extend_from_slice(&i.to_be_bytes());
    k
}

/// Log, vote and snapshot storage on fjall; the state machine beside it.
#[derive(Clone)]
pub struct MonStore {
    kv: Arc<MonKv>,
    pub shared: Arc<Shared>,
}

#[derive(Serialize, Deserialize)]
struct StoredSnap {
    meta: SnapshotMeta<u64, BasicNode>,
    data: Vec<u8>,
}

impl MonStore {
    /// Open (or create) the monitor's store in `dir`, restoring the state
    /// machine from its last snapshot.
    pub fn open(dir: &std::path::Path) -> Result<MonStore, String> {
        let kv = MonKv::open(dir).map_err(|e| e.to_string())?;
        let mut st = MonState::default();
        if let Some(b) = kv.get(K_SNAP).map_err(|e| e.to_string())? {
            let s: StoredSnap = serde_json::from_slice(&b).map_err(|e| e.to_string())?;
            st = MonState {
                last_applied: s.meta.last_log_id,
                membership: s.meta.last_membership,
                ..from_body(&s.data)?
            };
        }
        let (epoch_tx, _) = tokio::sync::watch::channel(st.epoch());
        Ok(MonStore {
            kv: Arc::new(kv),
            shared: Arc::new(Shared {
                state: RwLock::new(st),
                epoch_tx,
            }),
        })
    }

    /// Whether this store was made before: its creation mark, or (a store
    /// from before the mark existed) any Raft state.
    pub fn made(&self) -> Result<bool, String> {
        let e = |e: crate::kv::KvError| e.to_string();
        if self.kv.get(K_CREATED).map_err(e)?.is_some() {
            return Ok(true);
        }
        let raft_state = self.kv.get(K_VOTE).map_err(e)?.is_some()
            || self.kv.get(K_SNAP).map_err(e)?.is_some()
            || !self.kv.scan(b"l/", b"l0", 1).map_err(e)?.is_empty();
        if raft_state {
            self.mark_made()?;
        }
        Ok(raft_state)
    }

    /// Mark the store as made (durably).
    pub fn mark_made(&self) -> Result<(), String> {
        self.kv
            .commit(vec![KvOp::Put(K_CREATED.to_vec(), b"1".to_vec())], true)
            .map_err(|e| e.to_string())
    }

    fn get_json<T: for<'de> Deserialize<'de>>(&self, k: &[u8]) -> Result<Option<T>, SErr> {
        match self.kv.get(k).map_err(|e| StorageIOError::read(&e))? {
            Some(b) => Ok(Some(
                serde_json::from_slice(&b).map_err(|e| StorageIOError::read(&e))?,
            )),
            None => Ok(None),
        }
    }

    fn put_json<T: Serialize>(&self, k: &[u8], v: &T) -> Result<(), SErr> {
        let b = serde_json::to_vec(v).map_err(|e| StorageIOError::write(&e))?;
        self.kv
            .commit(vec![KvOp::Put(k.to_vec(), b)], true)
            .map_err(|e| StorageIOError::write(&e).into())
    }

    fn last_log(&self) -> Result<Option<LogId<u64>>, SErr> {
        // The largest log key: scan the whole (small, purged) log range.
        let all = self
            .kv
            .scan(b"l/", b"l0", usize::MAX)
            .map_err(|e| StorageIOError::read_logs(&e))?;
        match all.last() {
            Some((_, v)) => {
                let e: Entry<TypeConfig> =
                    serde_json::from_slice(v).map_err(|e| StorageIOError::read_logs(&e))?;
                Ok(Some(e.log_id))
            }
            None => Ok(None),
        }
    }

    fn save_snapshot(&self, s: &StoredSnap) -> Result<(), SErr> {
        self.put_json(K_SNAP, s)
    }
}

impl RaftLogReader<TypeConfig> for MonStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, SErr> {
        use std::ops::Bound::*;
        let start = match range.start_bound() {
            Included(&s) => s,
            Excluded(&s) => s.saturating_add(1),
            Unbounded => 0,
        };
        let end = match range.end_bound() {
            Included(&e) => Some(e.saturating_add(1)),
            Excluded(&e) => Some(e),
            Unbounded => None,
        };
        let hi = end.map(log_key).unwrap_or_else(|| b"l0".to_vec());
        let rows = self
            .kv
            .scan(&log_key(start), &hi, usize::MAX)
            .map_err(|e| StorageIOError::read_logs(&e))?;
        rows.iter()
            .map(|(_, v)| {
                serde_json::from_slice(v).map_err(|e| StorageIOError::read_logs(&e).into())
            })
            .collect()
    }
}

impl RaftLogStorage<TypeConfig> for MonStore {
    type LogReader = MonStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, SErr> {
        let purged: Option<LogId<u64>> = self.get_json(K_PURGED)?;
        let last = self.last_log()?.or(purged);
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), SErr> {
        self.put_json(K_VOTE, vote)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, SErr> {
        self.get_json(K_VOTE)
    }

    async fn save_committed(&mut self, c: Option<LogId<u64>>) -> Result<(), SErr> {
        self.put_json(K_COMMITTED, &c)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, SErr> {
        Ok(self.get_json::<Option<LogId<u64>>>(K_COMMITTED)?.flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), SErr>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut ops = Vec::new();
        for e in entries {
            let b = serde_json::to_vec(&e).map_err(|e| StorageIOError::write_logs(&e))?;
            ops.push(KvOp::Put(log_key(e.log_id.index), b));
        }
        let r = self.kv.commit(ops, true);
        let res = r
            .as_ref()
            .map(|_| ())
            .map_err(|e| std::io::Error::other(e.to_string()));
        callback.log_io_completed(res);
        r.map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), SErr> {
        let rows = self
            .kv
            .scan(&log_key(log_id.index), b"l0", usize::MAX)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        let ops = rows.into_iter().map(|(k, _)| KvOp::Delete(k)).collect();
        self.kv
            .commit(ops, true)
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), SErr> {
        let rows = self
            .kv
            .scan(&log_key(0), &log_key(log_id.index + 1), usize::MAX)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        let mut ops: Vec<KvOp> = rows.into_iter().map(|(k, _)| KvOp::Delete(k)).collect();
        let b = serde_json::to_vec(&log_id).map_err(|e| StorageIOError::write_logs(&e))?;
        ops.push(KvOp::Put(K_PURGED.to_vec(), b));
        self.kv
            .commit(ops, true)
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }
}

impl RaftSnapshotBuilder<TypeConfig> for MonStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, SErr> {
        let (data, meta) = {
            let st = self.shared.read();
            let id = match &st.last_applied {
                Some(l) => format!("{}-{}-{}", l.leader_id, l.index, st.epoch()),
                None => "empty".into(),
            };
            (
                to_body(&st),
                SnapshotMeta {
                    last_log_id: st.last_applied,
                    last_membership: st.membership.clone(),
                    snapshot_id: id,
                },
            )
        };
        let stored = StoredSnap {
            meta: meta.clone(),
            data: data.clone(),
        };
        self.save_snapshot(&stored)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for MonStore {
    type SnapshotBuilder = MonStore;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), SErr> {
        let st = self.shared.read();
        Ok((st.last_applied, st.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<MonResponse>, SErr>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut out = Vec::new();
        let epoch = {
            let mut st = self.shared.write();
            for e in entries {
                st.last_applied = Some(e.log_id);
                let r = match &e.payload {
                    EntryPayload::Blank => Ok(st.epoch()),
                    EntryPayload::Normal(cmd) => st.apply_cmd(cmd),
                    EntryPayload::Membership(m) => {
                        st.membership = StoredMembership::new(Some(e.log_id), m.clone());
                        Ok(st.epoch())
                    }
                };
                out.push(r);
            }
            st.epoch()
        };
        self.shared.epoch_tx.send_replace(epoch);
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, SErr> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), SErr> {
        let data = snapshot.into_inner();
        let restored = from_body(&data).map_err(|e| {
            StorageIOError::read_snapshot(Some(meta.signature()), &std::io::Error::other(e))
        })?;
        self.save_snapshot(&StoredSnap {
            meta: meta.clone(),
            data,
        })?;
        let epoch = {
            let mut st = self.shared.write();
            *st = MonState {
                last_applied: meta.last_log_id,
                membership: meta.last_membership.clone(),
                ..restored
            };
            st.epoch()
        };
        self.shared.epoch_tx.send_replace(epoch);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, SErr> {
        let s: Option<StoredSnap> = self.get_json(K_SNAP)?;
        Ok(s.map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clog::LogBatch;
    use loligo_monc::protocol::LogLevel;

    /// A snapshot carries the cluster log to a monitor that installs it;
    /// one made before the log existed still installs, with an empty log.
    #[test]
    fn snapshots_carry_the_cluster_log_tokens_and_s3_users_and_older_ones_still_read() {
        let mut st = MonState {
            map: Some(OsdMap::test_cluster(3, 8)),
            ..MonState::default()
        };
        let batch = LogBatch {
            base_seq: 0,
            stamp_ms: 5,
            name: "mon.0".into(),
            entries: vec![(LogLevel::Info, "osd.1 marked down".into())],
            health: Some(Default::default()),
        };
        assert_eq!(
            st.apply_cmd(&MonCmd::Log(batch)),
            Ok(2),
            "the map is unchanged"
        );
        let record = crate::tokens::TokenRecord {
            user: "client.admin".into(),
            serial: String::new(),
            created: 1,
            expires: 2,
        };
        let add = crate::tokens::TokenCmd::Add {
            hash: "ab".into(),
            record,
        };
        assert_eq!(st.apply_cmd(&MonCmd::Dashboard(add)), Ok(2));
        assert_eq!(st.tokens.len(), 1);
        let user = crate::s3users::S3Cmd::UserCreate {
            uid: "alice".into(),
            record: crate::s3users::UserRecord {
                display_name: "Alice".into(),
                created: 1,
            },
            key: crate::s3users::S3Key {
                access_key: "AK".into(),
                secret_key: "SK".into(),
            },
        };
        assert_eq!(st.apply_cmd(&MonCmd::S3(user.clone())), Ok(2));
        assert!(
            st.apply_cmd(&MonCmd::S3(user)).is_err(),
            "a user made twice is refused by every member"
        );
        let back = from_body(&to_body(&st)).unwrap();
        assert_eq!(back.s3.secret("AK"), Some(("alice", "SK")));
        assert_eq!(back.map.map(|m| m.epoch), Some(2));
        assert_eq!(back.log, st.log);
        assert_eq!(back.log.entries[0].message, "osd.1 marked down");
        assert_eq!(back.tokens, st.tokens);
        let old = serde_json::json!({ "map": null, "incs": [] }).to_string();
        let back = from_body(old.as_bytes()).unwrap();
        assert!(back.map.is_none() && back.incs.is_empty());
        assert_eq!(back.log, crate::clog::ClusterLog::default());
        assert!(back.tokens.is_empty());
        assert!(back.s3.is_empty());
    }
}
