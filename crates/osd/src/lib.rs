//! Loligo's OSD: placement groups as sans-I/O state machines over an
//! object store (`pg`), the data layout of a pool type behind the
//! `Backend` trait (`backend`: replicated today), the op executor
//! (`exec`), and the daemon shell that does the I/O (`daemon`).

pub mod backend;
pub mod cls;
pub mod daemon;
pub mod ec;
pub mod error;
pub mod exec;
pub mod msg;
pub mod pg;

pub use daemon::{device_wait, start, OsdConfig, OsdHandle};
pub use error::OsdError;
