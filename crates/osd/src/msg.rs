//! Messages between OSDs (the `Osd.Peer` call), binary-encoded.
//!
//! Vocabulary only: it must never hold logic.

use crate::pg::PgInfo;
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
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum PeerReply {
    Pong { epoch: Epoch },
    RepDone(Result<(), String>),
    Info(Option<PgInfo>),
    Refused(String),
}
