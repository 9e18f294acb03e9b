//! What clients, OSDs and the CLI say to a monitor, and what it answers.
//! Requests and replies travel as JSON inside the gRPC `Call`; maps travel
//! in the compact binary encoding of `loligo-types`.
//!
//! This module must never hold logic: it is the wire vocabulary only.

use loligo_types::{EcPlugin, Epoch, MapError, OsdReport};
use serde::{Deserialize, Serialize};

/// Everything a monitor serves through `Call`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MonRequest {
    /// The current map (encoded).
    GetMap,
    /// An OSD starts and asks to be marked up at `addr`.
    OsdBoot {
        id: i32,
        addr: String,
        host: String,
        /// CRUSH weight, 16.16 (usually the device size in TiB).
        crush_weight: u32,
    },
    /// `reporter` has not heard from `target` for `failed_for_ms`.
    OsdFailure {
        reporter: i32,
        target: i32,
        failed_for_ms: u64,
    },
    /// An OSD that is stopping cleanly.
    OsdMarkMeDown { id: i32 },
    /// A primary whose log is behind asks for `osds` as the PG's acting
    /// set (empty: clear the override).
    PgTemp {
        pg: loligo_types::PgId,
        osds: Vec<i32>,
    },
    /// Primaries about to accept writes record each PG's write set (see
    /// `PgRw`); the reply's value lists the PGs whose record now holds
    /// (stale intervals are left out).
    PgRw {
        items: Vec<(loligo_types::PgId, loligo_types::PgRw)>,
    },
    /// PG stats and counters (also the OSD's liveness beacon).
    OsdReport(OsdReport),
    /// An administrator's command.
    Admin(Admin),
}

/// Administrative commands (`loligo pool|osd|crush|ec-profile|status`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Admin {
    Status,
    PoolCreate {
        name: String,
        pg_num: u32,
        size: u32,
        min_size: Option<u32>,
        /// Erasure-coded with this profile (size then comes from it).
        erasure_profile: Option<String>,
    },
    /// Deleting needs the name twice, as Ceph asks.
    PoolDelete {
        name: String,
        confirm: String,
    },
    PoolLs,
    PoolGet {
        name: String,
    },
    PoolSet {
        name: String,
        key: String,
        value: String,
    },
    OsdTree,
    OsdDump,
    OsdDown {
        ids: Vec<i32>,
    },
    OsdOut {
        ids: Vec<i32>,
    },
    OsdIn {
        ids: Vec<i32>,
    },
    OsdReweight {
        id: i32,
        weight: f64,
    },
    OsdRm {
        id: i32,
    },
    /// Declare a down OSD's data lost (needs `confirm`).
    OsdLost {
        id: i32,
        confirm: bool,
    },
    CrushAdd {
        id: i32,
        host: String,
        weight: f64,
    },
    CrushMove {
        name: String,
        parent: String,
    },
    CrushRm {
        name: String,
    },
    EcProfileSet {
        name: String,
        plugin: EcPlugin,
        k: u32,
        m: u32,
        s: u32,
        l: u32,
        optimal: bool,
        alignment: u32,
    },
    EcProfileGet {
        name: String,
    },
    EcProfileLs,
    EcProfileRm {
        name: String,
    },
}

/// A successful reply: the epoch the change made (or the map's epoch for
/// reads), a JSON value for reports, and the encoded map for `GetMap`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MonReply {
    pub epoch: Epoch,
    #[serde(default)]
    pub value: serde_json::Value,
    #[serde(default)]
    pub map: Option<Vec<u8>>,
}

/// A monitor's typed refusal.
#[derive(Clone, Debug, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MonError {
    /// This monitor is not the leader; ask `leader` (if known).
    #[error("not the leader (leader: {})", leader.as_deref().unwrap_or("unknown"))]
    NotLeader { leader: Option<String> },
    #[error("{0}")]
    Map(#[from] MapError),
    /// The cluster has no map yet (monitors still forming a quorum).
    #[error("the cluster has no map yet: monitors are forming a quorum")]
    NoMap,
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("monitor unavailable: {0}")]
    Unavailable(String),
    #[error("timed out: {0}")]
    Timeout(String),
    /// A feature this build does not have yet: refused rather than faked.
    #[error("not supported yet: {0}")]
    Unsupported(String),
}

/// The JSON body of `Call` replies.
pub type CallResult = Result<MonReply, MonError>;

/// One item of the `Watch` stream.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MapUpdate {
    /// The whole map (encoded), when the watcher is too far behind.
    Full(Vec<u8>),
    /// The incremental that makes epoch `n` (encoded).
    Inc(Vec<u8>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_round_trip_through_json() {
        let r: CallResult = Ok(MonReply {
            epoch: 59,
            ..Default::default()
        });
        let j = serde_json::to_string(&r).unwrap();
        let back: CallResult = serde_json::from_str(&j).unwrap();
        assert_eq!(back.unwrap().epoch, 59);
        let e: CallResult = Err(MonError::Map(MapError::PoolExists("x".into())));
        let j = serde_json::to_string(&e).unwrap();
        let back: CallResult = serde_json::from_str(&j).unwrap();
        assert_eq!(
            back.unwrap_err(),
            MonError::Map(MapError::PoolExists("x".into()))
        );
    }
}
