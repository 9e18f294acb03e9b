//! Messages between OSDs (the `Osd.Peer` call), binary-encoded.
//!
//! Vocabulary only: it must never hold logic.

use crate::pg::{AuthLog, Chunk, Cursor, LogAnswer, PeerInfo, Push, Scan};
use loligo_store::Transaction;
use loligo_types::{Epoch, PgId};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum PeerMsg {
    /// Heartbeat.
    Ping { from: i32, epoch: Epoch },
    /// Primary -> replica: make this write durable.
    RepOp {
        pg: PgId,
        from: i32,
        ctx: crate::pg::RepCtx,
        txn: Transaction,
    },
    /// Primary -> member: your info for `pg`, once your map has `epoch`.
    GetInfo {
        pg: PgId,
        from: i32,
        interval: Epoch,
        epoch: Epoch,
    },
    /// Primary -> recovering member: merge the authoritative log.
    Log {
        pg: PgId,
        from: i32,
        ctx: crate::pg::RepCtx,
        log: AuthLog,
    },
    /// Primary -> recovering member: an object you lack, whole.
    Push {
        pg: PgId,
        from: i32,
        ctx: crate::pg::RepCtx,
        push: Push,
    },
    /// Primary -> backfill target: your objects in (after, upto].
    Scan {
        pg: PgId,
        from: i32,
        ctx: crate::pg::RepCtx,
        after: Cursor,
        upto: Cursor,
        limit: u32,
        filter: crate::pg::Filter,
    },
    /// Primary -> backfill target: the next chunk.
    Chunk {
        pg: PgId,
        from: i32,
        ctx: crate::pg::RepCtx,
        chunk: Chunk,
    },
    /// Primary that is behind -> complete member: your log.
    GetLog {
        pg: PgId,
        from: i32,
        ctx: crate::pg::RepCtx,
    },
    /// Primary that is behind -> complete member: your copy of `name`,
    /// which the primary needs at version `need`.
    Pull {
        pg: PgId,
        from: i32,
        ctx: crate::pg::RepCtx,
        name: String,
        need: loligo_types::ops::Version,
    },
    /// EC primary -> member: extents of your shard of `name`, which must
    /// be at `version`.
    ReadShard {
        pg: PgId,
        from: i32,
        epoch: Epoch,
        name: String,
        extents: Vec<(u64, u64)>,
        version: loligo_types::ops::Version,
        shard: usize,
    },
    /// Stray copy -> primary: is `pg` clean without me (my map is at
    /// `epoch`)?
    /// `shard`: the EC shard the stray's copy holds (a recovery source).
    StrayCheck {
        pg: PgId,
        from: i32,
        epoch: Epoch,
        shard: Option<u8>,
    },
}

impl PeerMsg {
    /// The OSD that says it sent the message.
    pub fn sender(&self) -> i32 {
        match self {
            PeerMsg::Ping { from, .. }
            | PeerMsg::RepOp { from, .. }
            | PeerMsg::GetInfo { from, .. }
            | PeerMsg::Log { from, .. }
            | PeerMsg::Push { from, .. }
            | PeerMsg::Scan { from, .. }
            | PeerMsg::Chunk { from, .. }
            | PeerMsg::GetLog { from, .. }
            | PeerMsg::Pull { from, .. }
            | PeerMsg::ReadShard { from, .. }
            | PeerMsg::StrayCheck { from, .. } => *from,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum PeerReply {
    Pong {
        epoch: Epoch,
    },
    RepDone(Result<(), String>),
    Info(Option<PeerInfo>),
    /// The answer to `Log`.
    Merged(LogAnswer),
    /// The answer to `Scan`.
    Scanned(Scan),
    /// The answer to `GetLog`.
    OwnLog(AuthLog),
    /// The answer to `Pull`.
    Pulled(Push),
    /// The answer to `ReadShard`: each extent's bytes.
    ShardData(Vec<loligo_bulk::Bulk>),
    /// The answer to `StrayCheck`: the epoch at which the PG is clean
    /// without the asker (`None`: it is not, or not known here).
    Clean(Option<Epoch>),
    Refused(String),
    /// The answer to `ReadShard` from a copy that holds no such shard at
    /// the version asked (`RepError::Absent`).
    Absent(String),
    /// As `Absent`, from a copy that never took that write either
    /// (`RepError::NeverTook`).
    NeverTook(String),
}
