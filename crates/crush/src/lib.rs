//! Ceph-exact CRUSH: the hashes, bucket algorithms, rule evaluation, text
//! map format and object -> PG -> OSD placement that decide where every
//! object in Loligo lives. No I/O: everything here is a pure function of
//! its inputs, so clients, OSDs, monitors and tools all agree.

pub mod compiled;
pub mod error;
pub mod hash;
pub mod ln;
pub mod map;
pub mod mapper;
pub mod placement;
pub mod tester;
pub mod text;

pub use compiled::{ChooseArgMap, CompiledMap};
pub use error::{CrushError, Result};
pub use map::CrushMap;
pub use mapper::{Workspace, ITEM_NONE, MAX_NUM_REP};
