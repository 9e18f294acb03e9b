//! Ceph-exact CRUSH: the hashes, bucket algorithms, rule evaluation, text
//! map format and object -> PG -> OSD placement that decide where every
//! object in Loligo lives. No I/O: everything here is a pure function of
//! its inputs, so clients, OSDs, monitors and tools all agree.
//!
//! ```
//! use loligo_crush::placement::{map_pg, OsdStates, PoolPlacement};
//! use loligo_crush::{text, CompiledMap, Workspace};
//!
//! let txt = "device 0 osd.0\ndevice 1 osd.1\ndevice 2 osd.2\n\
//!            type 0 osd\ntype 1 host\ntype 2 root\n\
//!            host a { id -2 alg straw2 hash 0 item osd.0 weight 1.0 }\n\
//!            host b { id -3 alg straw2 hash 0 item osd.1 weight 1.0 }\n\
//!            host c { id -4 alg straw2 hash 0 item osd.2 weight 1.0 }\n\
//!            root default { id -1 alg straw2 hash 0 item a item b item c }\n\
//!            rule rep { id 0 type replicated min_size 1 max_size 10\n\
//!              step take default step chooseleaf firstn 0 type host step emit }";
//! let map = CompiledMap::compile(&text::parse(txt)?)?;
//! let pool = PoolPlacement::replicated(1, 8, 3, 0);
//! let ps = pool.object_ps(b"my-object");
//! let pg = map_pg(&map, &pool, &OsdStates::all_up_in(3), ps, &mut Workspace::new(&map))?;
//! // Three hosts, three replicas: every OSD holds one, the first is primary.
//! let mut osds = pg.acting.clone();
//! osds.sort();
//! assert_eq!(osds, vec![0, 1, 2]);
//! assert_eq!(pg.acting_primary, pg.acting[0]);
//! # Ok::<(), loligo_crush::CrushError>(())
//! ```

pub mod balance;
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
