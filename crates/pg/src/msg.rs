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
    /// Primary -> member: your scrub map of your objects in (after, upto].
    ScrubMap {
        pg: PgId,
        from: i32,
        ctx: crate::pg::RepCtx,
        after: Cursor,
        upto: Cursor,
        deep: bool,
    },
    /// Primary -> member: a scrub found your copy of this object bad; take
    /// this one (answered as a push).
    Repair {
        pg: PgId,
        from: i32,
        ctx: crate::pg::RepCtx,
        push: Push,
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
    /// Primary -> member: hold a scrub slot of your OSD for my scrub's
    /// reservation `round` (answered `ScrubReserved`).
    ScrubReserve {
        pg: PgId,
        from: i32,
        ctx: crate::pg::RepCtx,
        round: u64,
    },
    /// Primary -> member: reservation `round` is over; give its slot back
    /// (a member holding a later round's keeps it).
    ScrubRelease {
        pg: PgId,
        from: i32,
        ctx: crate::pg::RepCtx,
        round: u64,
        /// The primary's last scrub and deep scrub (Unix ms; 0: never),
        /// which the member keeps too: the next primary goes on from them.
        stamps: (u64, u64),
    },
    /// Primary -> acting member: renew my read lease of `lease_ms`
    /// (answered `LeaseAck`, or refused by a copy outside my interval).
    /// `prior`: the earlier primaries' leases I wait out (ms left on my
    /// clock), which the member keeps for the next primary to wait out.
    Lease {
        pg: PgId,
        from: i32,
        ctx: crate::pg::RepCtx,
        lease_ms: u64,
        prior: crate::pg::LeasesLeft,
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
            | PeerMsg::ScrubMap { from, .. }
            | PeerMsg::Repair { from, .. }
            | PeerMsg::ScrubReserve { from, .. }
            | PeerMsg::ScrubRelease { from, .. }
            | PeerMsg::Lease { from, .. }
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
    /// The answer to `ScrubMap`.
    ScrubMap(Vec<crate::pg::scrub_map::ScrubObject>),
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
    /// The answer to `Pull` from a copy whose data fails its checksum
    /// (`RepError::Damaged`).
    Damaged(String),
    /// The answer to `ScrubReserve`: whether the slot is held.
    ScrubReserved(bool),
    /// The answer to `Lease`: granted.
    LeaseAck,
}

impl PeerReply {
    /// An error as the wire says it.
    pub fn from_error(e: crate::pg::RepError) -> PeerReply {
        use crate::pg::RepError;
        match e {
            RepError::Stale(e) => PeerReply::Refused(e),
            RepError::Failed(e) => PeerReply::RepDone(Err(e)),
            RepError::Absent(e) => PeerReply::Absent(e),
            RepError::NeverTook(e) => PeerReply::NeverTook(e),
            RepError::Damaged(e) => PeerReply::Damaged(e),
        }
    }

    /// A refusal or failure as its error (the inverse of `from_error`);
    /// any other answer as it is.
    pub fn into_result(self) -> Result<PeerReply, crate::pg::RepError> {
        use crate::pg::RepError;
        match self {
            PeerReply::Refused(e) => Err(RepError::Stale(e)),
            PeerReply::RepDone(Err(e)) => Err(RepError::Failed(e)),
            PeerReply::Absent(e) => Err(RepError::Absent(e)),
            PeerReply::NeverTook(e) => Err(RepError::NeverTook(e)),
            PeerReply::Damaged(e) => Err(RepError::Damaged(e)),
            other => Ok(other),
        }
    }
}

impl PeerMsg {
    /// The PG the message is for (`None`: a heartbeat).
    pub fn pg(&self) -> Option<PgId> {
        match self {
            PeerMsg::Ping { .. } => None,
            PeerMsg::RepOp { pg, .. }
            | PeerMsg::GetInfo { pg, .. }
            | PeerMsg::Log { pg, .. }
            | PeerMsg::Push { pg, .. }
            | PeerMsg::Scan { pg, .. }
            | PeerMsg::Chunk { pg, .. }
            | PeerMsg::GetLog { pg, .. }
            | PeerMsg::Pull { pg, .. }
            | PeerMsg::ReadShard { pg, .. }
            | PeerMsg::ScrubMap { pg, .. }
            | PeerMsg::Repair { pg, .. }
            | PeerMsg::ScrubReserve { pg, .. }
            | PeerMsg::ScrubRelease { pg, .. }
            | PeerMsg::Lease { pg, .. }
            | PeerMsg::StrayCheck { pg, .. } => Some(*pg),
        }
    }

    /// The sender's interval, for messages that belong to one (a host
    /// stops retrying such a message once the PG's interval moves on).
    pub fn interval(&self) -> Option<Epoch> {
        match self {
            PeerMsg::RepOp { ctx, .. }
            | PeerMsg::Log { ctx, .. }
            | PeerMsg::Push { ctx, .. }
            | PeerMsg::Scan { ctx, .. }
            | PeerMsg::Chunk { ctx, .. }
            | PeerMsg::GetLog { ctx, .. }
            | PeerMsg::ScrubMap { ctx, .. }
            | PeerMsg::Repair { ctx, .. }
            | PeerMsg::ScrubReserve { ctx, .. }
            | PeerMsg::ScrubRelease { ctx, .. }
            | PeerMsg::Lease { ctx, .. }
            | PeerMsg::Pull { ctx, .. } => Some(ctx.interval),
            PeerMsg::GetInfo { interval, .. } => Some(*interval),
            PeerMsg::Ping { .. } | PeerMsg::ReadShard { .. } | PeerMsg::StrayCheck { .. } => None,
        }
    }
}
