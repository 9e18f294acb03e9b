//! Loligo's placement groups as sans-I/O state machines over an object
//! store: a PG (`pg`) takes inputs (client ops, messages from its peers,
//! map changes, store completions) and returns effects (sends, store
//! transactions, timers) for a shell to carry out; the data layout of a
//! pool type behind the `Backend` trait (`backend`: replicated and
//! erasure-coded, with `ec` for stripes and plans), the op executor
//! (`exec`) and object classes (`cls`) over what both know of an object
//! (`opstate`), the messages between PG copies (`msg`), and the recovery
//! slots an OSD's PGs share (`reserve`).
//!
//! This crate must never do I/O of its own, read a clock or start a task:
//! no async runtime and no network (the layering test checks), so that the
//! daemon and the simulator run the same code.

pub mod backend;
pub mod cls;
pub mod ec;
pub mod exec;
pub mod msg;
pub mod opstate;
pub mod pg;
pub mod reserve;
pub mod scrub_slots;
