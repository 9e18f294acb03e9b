//! Loligo's monitor: the cluster map in a Raft group (openraft, with the
//! log, vote and snapshots in fjall), served over gRPC to OSDs, clients
//! and the CLI; failure reports, beacons and auto-out while leading; the
//! admin commands. The protocol and its client live in `loligo-monc`
//! (re-exported here), so that OSDs and clients do not link this crate.

pub mod admin;
pub mod auth;
pub mod balancer;
pub mod clog;
pub mod dashboard;
pub mod df;
pub mod health;
pub mod kv;
pub mod leader;
pub mod metrics;
pub mod monmap;
pub mod network;
pub mod placements;
pub mod pool_stats;
pub use loligo_types::pg_num;
pub mod raft;
pub mod s3users;
pub mod server;
pub mod tokens;

pub use loligo_monc::{client, protocol};
pub use loligo_monc::{Admin, MonClient, MonError, MonReply, MonRequest};
pub use server::{MonConfig, MonHandle, Monitor};
