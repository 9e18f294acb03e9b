//! Loligo's shared vocabulary: the cluster map (`OsdMap`) that monitors
//! keep, OSDs follow and clients place objects with; its incremental
//! changes; CRUSH edits; the compact encoding they travel in.
//!
//! Pure data and functions: this crate must never do I/O.

pub mod asks;
pub mod caps;
pub mod cls;
pub mod crush_edit;
pub mod error;
pub mod mapping;
pub mod ops;
pub mod osdmap;
pub mod pg_num;
pub mod pg_state;
pub mod prom;
pub mod s3;
pub mod scrub;
pub mod stats;

pub use error::{MapError, Result};
pub use loligo_crush::placement::{OsdStates, PgId, PgMapping};
pub use osdmap::{
    decode, decode_map, encode, Change, EcPlugin, EcProfile, Epoch, Fullness, Incremental,
    LazyPlacer, MapPg, OsdInfo, OsdMap, Placer, Pool, PoolKind, Reach, RecordAsk, WriteSetRecord,
    BACKFILLFULL_RATIO, FULL_RATIO, NEARFULL_RATIO,
};
pub use pg_state::PgState;
pub use stats::{OsdReport, PgStat, PoolIo};
