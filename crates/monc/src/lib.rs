//! The monitor protocol (`protocol`: requests, replies, typed refusals,
//! map updates) and its client (`MonClient`: leader finding, retries, map
//! following), for everything that talks to Loligo's monitors.
//!
//! It must never depend on the monitor's implementation (Raft, its
//! store): a program that embeds the client library links this crate, not
//! a Raft server.

pub mod client;
pub mod protocol;

pub use client::MonClient;
pub use protocol::{Admin, MonError, MonReply, MonRequest};
