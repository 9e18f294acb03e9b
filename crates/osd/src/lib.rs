//! Loligo's OSD: placement groups as sans-I/O state machines over an
//! object store (`pg`), the data layout of a pool type behind the
//! `Backend` trait (`backend`: replicated today), the op executor
//! (`exec`), and the daemon shell that does the I/O (`daemon`).

pub mod daemon;
pub mod error;

// The PG core lives in `loligo-pg`; its modules are re-exported under the
// names the daemon and its users know.
pub use loligo_pg::{backend, cls, ec, exec, msg, pg};

pub use daemon::{
    device_wait, serve_metrics, start, OsdConfig, OsdHandle, ReadErrorInjector, MAX_MARKDOWN_COUNT,
    MAX_MARKDOWN_PERIOD_S,
};
pub use error::OsdError;
