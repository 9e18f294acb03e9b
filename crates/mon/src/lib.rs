//! Loligo's monitor: the cluster map in a Raft group (openraft, with the
//! log, vote and snapshots in fjall), served over gRPC to OSDs, clients
//! and the CLI; failure reports, beacons and auto-out while leading; the
//! admin commands. Also the client side of that protocol.

pub mod admin;
pub mod client;
pub mod network;
pub mod protocol;
pub mod raft;
pub mod server;

pub use client::MonClient;
pub use protocol::{Admin, MonError, MonReply, MonRequest};
pub use server::{MonConfig, MonHandle, Monitor};
