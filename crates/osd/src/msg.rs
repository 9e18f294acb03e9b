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
    },
    /// Primary -> backfill target: the next chunk.
    Chunk {
        pg: PgId,
        from: i32,
        ctx: crate::pg::RepCtx,
        chunk: Chunk,
    },
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
    Refused(String),
}
