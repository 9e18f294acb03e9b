//! The OSD's own failures (the daemon's; ops answer clients with
//! `OpError`, and replica writes with `RepError`).
//!
//! It must never carry a payload from the wire unbounded: messages are
//! formatted by this OSD.

use loligo_monc::MonError;
use loligo_store::StoreError;

/// Why the OSD could not do something.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OsdError {
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("monitors: {0}")]
    Mon(#[from] MonError),
    #[error("listener: {0}")]
    Listener(String),
    /// The map this OSD holds gives no address for `osd`.
    #[error("osd.{0} has no address in the map")]
    NoAddress(i32),
    #[error("osd.{osd} is unreachable: {why}")]
    Unreachable { osd: i32, why: String },
    #[error("osd.{osd} answered something undecodable: {why}")]
    BadReply { osd: i32, why: String },
    #[error("the map never showed this OSD up at its address")]
    NeverUp,
}
