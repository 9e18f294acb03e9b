//! The cluster map: OSDs, pools, EC profiles, the CRUSH map and placement
//! overrides, at one epoch. Changes arrive as [`Incremental`]s (a list of
//! [`Change`]s for the next epoch); monitors, OSDs and clients apply the
//! same incrementals and so hold the same map.
//!
//! Invariants (checked by [`OsdMap::apply`] on a copy before anything is
//! kept): the CRUSH map compiles; every pool's rule exists, its size and
//! min_size fit (1 <= min_size <= size), its EC profile exists; every OSD
//! in the map has a device in CRUSH. It must never do I/O.

use crate::caps::{AuthEntry, Caps, ADMIN};
use crate::crush_edit;
use crate::error::{MapError, Result};
use crate::ops::Version;
use loligo_crush::placement::{
    map_pg_with_upmap, OsdStates, PgId, PgMapping, PoolPlacement, PpsMode,
};
use loligo_crush::{CompiledMap, CrushMap, Workspace, ITEM_NONE, MAX_NUM_REP};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A map epoch. Epoch 0 is "no map yet".
pub type Epoch = u64;

/// The reweight of an OSD that is in (16.16 fixed point).
pub const WEIGHT_IN: u32 = 0x10000;
/// Most pools a map may hold (a limit on map size).
pub const POOLS_MAX: usize = 4096;
/// Largest OSD id + 1 a map may hold.
pub const OSDS_MAX: i32 = 1 << 16;
/// Most replicas a replicated pool may have (Ceph's limit too).
pub const REPLICAS_MAX: u32 = 10;
/// Longest pool or profile name.
pub const NAME_LEN_MAX: usize = 128;
/// Most users (client entities with caps) a map keeps.
pub const AUTH_ENTRIES_MAX: usize = 4096;
/// Most CRUSH weight (16.16) a boot may carry: 1,024.0, far above any
/// one device's (Ceph's convention is a device's size in TiB). Only an
/// OSD's first boot places it (host and weight); later boots change
/// neither, only `osd crush reweight`/`move` do, so no OSD key can give
/// itself more weight than this, nor change what the admin set.
pub const BOOT_WEIGHT_MAX: u32 = 1024 << 16;

/// Whether an OSD boot is well formed: an id below [`OSDS_MAX`], an
/// address of at most 256 bytes, a host name CRUSH takes (1 to
/// [`NAME_LEN_MAX`] bytes, no whitespace, not the OSD's own name) and a
/// weight at most [`BOOT_WEIGHT_MAX`]. The monitors check each boot alone
/// before boots are gathered into one epoch, so one malformed boot never
/// fails the others'. (Applying a boot checks only its id and address, as
/// it always has: a boot already in a Raft log replays unchanged.)
pub fn check_boot(id: i32, addr: &str, host: &str, crush_weight: u32) -> Result<()> {
    check_boot_applies(id, addr)?;
    let own = format!("osd.{id}");
    if host.is_empty()
        || host.len() > NAME_LEN_MAX
        || host.contains(char::is_whitespace)
        || host == own
    {
        return Err(MapError::Invalid(format!(
            "osd.{id}: bad host name '{host}' (1-{NAME_LEN_MAX} bytes, no spaces)"
        )));
    }
    if crush_weight > BOOT_WEIGHT_MAX {
        return Err(MapError::Invalid(format!(
            "osd.{id}: a boot's CRUSH weight of {:.2} is above {:.0}",
            f64::from(crush_weight) / 65536.0,
            f64::from(BOOT_WEIGHT_MAX) / 65536.0
        )));
    }
    Ok(())
}

/// What applying a boot has always refused: an id out of range, an empty
/// or overlong address (the part of [`check_boot`] a replayed boot meets).
fn check_boot_applies(id: i32, addr: &str) -> Result<()> {
    if !(0..OSDS_MAX).contains(&id) {
        return Err(MapError::Invalid(format!("osd id {id} out of range")));
    }
    if addr.is_empty() || addr.len() > 256 {
        return Err(MapError::Invalid(format!("bad address '{addr}'")));
    }
    Ok(())
}

/// Most daemon entries (`osd.N`, `mon.N`: a serial each) a map keeps,
/// counted apart from users so that neither crowds out the other: one per
/// OSD id and as many again for monitors. A removed OSD's revoked mark
/// stays (dropping it would let the next first boot of that id record any
/// key), so marks are bounded by the ids, not cleaned.
pub const DAEMON_ENTRIES_MAX: usize = OSDS_MAX as usize + 4096;

/// One OSD's state in the map.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsdInfo {
    pub id: i32,
    /// Where it serves (`host:port`); empty before its first boot.
    pub addr: String,
    pub up: bool,
    /// Reweight, 16.16: `WEIGHT_IN` when in, 0 when out.
    pub weight: u32,
    /// Epoch of its last boot.
    pub up_from: Epoch,
    /// Epoch it was last marked down (0 if never).
    pub down_at: Epoch,
    /// How full its device was in its last report the monitors acted on.
    #[serde(default)]
    pub fullness: Fullness,
}

impl OsdInfo {
    pub fn is_in(&self) -> bool {
        self.weight > 0
    }
}

/// Share of a device in use at which an OSD is near full (a warning).
pub const NEARFULL_RATIO: f64 = 0.85;
/// ... at which no PG is backfilled onto it.
pub const BACKFILLFULL_RATIO: f64 = 0.90;
/// ... at which client writes to its PGs are refused (deletes still go),
/// so that recovery and the PG log keep room and no device fills up.
pub const FULL_RATIO: f64 = 0.95;

/// How full an OSD's device is (Ceph's nearfull, backfillfull and full
/// states), from its reports; ordered from least to most full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fullness {
    #[default]
    Ok,
    NearFull,
    BackfillFull,
    Full,
}

impl Fullness {
    /// The state of a device with `used` of `total` bytes in use, by the
    /// default ratios ([`FullRatios::fullness`] by a map's).
    pub fn of(used: u64, total: u64) -> Fullness {
        FullRatios::default().fullness(used, total)
    }
}

impl std::fmt::Display for Fullness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Fullness::Ok => "ok",
            Fullness::NearFull => "nearfull",
            Fullness::BackfillFull => "backfillfull",
            Fullness::Full => "full",
        })
    }
}

/// Replicated, or erasure-coded with a named profile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolKind {
    Replicated,
    Erasure { profile: String },
}

/// A pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pool {
    pub id: u64,
    pub name: String,
    pub kind: PoolKind,
    /// Replicas (or k + m shards).
    pub size: u32,
    /// Fewest acting members that still accept writes.
    pub min_size: u32,
    pub pg_num: u32,
    pub pgp_num: u32,
    pub crush_rule: i32,
    /// Placement options from the balanced-placement work.
    pub pps_mode: PpsMode,
    pub balance_param: u32,
    /// Largest object in bytes (writes past it are refused).
    pub object_size_max: u64,
    pub created: Epoch,
}

impl Pool {
    /// The parameters CRUSH placement needs.
    pub fn placement(&self) -> PoolPlacement {
        PoolPlacement {
            pool_id: self.id,
            pg_num: self.pg_num,
            pgp_num: self.pgp_num,
            size: self.size,
            crush_rule: self.crush_rule,
            hashpspool: true,
            erasure: matches!(self.kind, PoolKind::Erasure { .. }),
            pps_mode: self.pps_mode,
            balance_param: self.balance_param,
        }
    }

    /// The PG an object name belongs to.
    pub fn object_pg(&self, name: &[u8]) -> PgId {
        PgId {
            pool: self.id,
            ps: self.placement().object_ps(name),
        }
    }
}

/// When a pool's data is compressed in its OSDs' stores (Ceph's
/// `compression_mode`): `Passive` compresses objects a client hinted
/// compressible (`set-alloc-hint`), `Aggressive` all but those hinted
/// incompressible, `Force` all. In every mode a blob is kept compressed
/// only when that saves an eighth of it (Ceph's
/// `compression_required_ratio`).
/// New modes go at the end: the encoding numbers them in this order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompressionMode {
    #[default]
    None,
    Passive,
    Aggressive,
    Force,
}

/// The compressor of a pool's data (Ceph's `compression_algorithm`).
/// Loligo's stores have LZ4 only: Ceph's other names are refused.
/// New algorithms go at the end: the encoding numbers them in this order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompressionAlgorithm {
    /// No compressor: nothing is compressed, whatever the mode.
    None,
    #[default]
    Lz4,
}

/// How an erasure-coded pool's recovery and degraded reads group the
/// elements they need from one shard into I/Os (the Zigzag thesis's read
/// coalescing): one read per run of consecutive elements, or one from
/// the first needed to the last (gaps read too, fewer I/Os). The thesis's
/// naive grouping (a read per element) is the planners' only (`ec plan
/// --coalesce naive`): a shard read merges touching extents anyway.
/// New kinds go at the end: the encoding numbers them in this order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadCoalesce {
    #[default]
    Conservative,
    Aggressive,
}

impl ReadCoalesce {
    /// Every kind, by name.
    pub const ALL: [ReadCoalesce; 2] = [ReadCoalesce::Conservative, ReadCoalesce::Aggressive];

    /// The planners' form.
    pub fn plan(self) -> loligo_ec::plan::Coalesce {
        use loligo_ec::plan::Coalesce;
        match self {
            ReadCoalesce::Conservative => Coalesce::Conservative,
            ReadCoalesce::Aggressive => Coalesce::Aggressive,
        }
    }

    /// The kind named `name` (as `pool set` takes it).
    pub fn from_name(name: &str) -> Option<ReadCoalesce> {
        Self::ALL.into_iter().find(|k| k.to_string() == name)
    }
}

impl std::fmt::Display for ReadCoalesce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReadCoalesce::Conservative => "conservative",
            ReadCoalesce::Aggressive => "aggressive",
        })
    }
}

/// A pool's options beyond its placement (Ceph's pool opts, and the
/// erasure-coded pools' read coalescing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolOpts {
    pub compression_mode: CompressionMode,
    pub compression_algorithm: CompressionAlgorithm,
    pub read_coalesce: ReadCoalesce,
}

impl PoolOpts {
    /// Whether the pool's OSDs compress any of its writes (in `passive`
    /// mode only those to objects hinted compressible; LZ4 is then the
    /// algorithm: the only one there is).
    pub fn compresses(&self) -> bool {
        self.compression_mode != CompressionMode::None
            && self.compression_algorithm == CompressionAlgorithm::Lz4
    }
}

impl std::fmt::Display for CompressionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CompressionMode::None => "none",
            CompressionMode::Passive => "passive",
            CompressionMode::Aggressive => "aggressive",
            CompressionMode::Force => "force",
        })
    }
}

impl std::fmt::Display for CompressionAlgorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CompressionAlgorithm::None => "none",
            CompressionAlgorithm::Lz4 => "lz4",
        })
    }
}

/// Default largest object: 128 MiB (Ceph's `osd_max_object_size`).
pub const OBJECT_SIZE_MAX_DEFAULT: u64 = 128 << 20;

/// Code families an EC profile can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EcPlugin {
    ReedSolomon,
    Zigzag,
    Lrc,
}

/// An erasure-code profile as stored in the map.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EcProfile {
    pub name: String,
    pub plugin: EcPlugin,
    pub k: u32,
    pub m: u32,
    /// Zigzag duplication.
    pub s: u32,
    /// LRC local groups.
    pub l: u32,
    /// Zigzag optimal row order.
    pub optimal: bool,
    /// Element alignment in bytes.
    pub alignment: u32,
    /// Chunk bytes per full stripe (Ceph's `stripe_unit`); 0 = the code's
    /// default (4 KiB for RS and LRC, about 1 MiB for Zigzag).
    pub stripe_unit: u32,
}

impl EcProfile {
    /// Build the code (this is also the profile's validation).
    pub fn code(&self) -> Result<Box<dyn loligo_ec::code::ErasureCode>> {
        use loligo_ec::linear::LinearCode;
        use loligo_ec::zigzag::{Construction, Zigzag};
        let bad = |e: loligo_ec::error::EcError| MapError::InvalidProfile(e.to_string());
        let (k, m, a) = (self.k as usize, self.m as usize, self.alignment as usize);
        if a == 0 || !a.is_power_of_two() || a > 1 << 20 {
            return Err(MapError::InvalidProfile(format!(
                "alignment {a} is not a power of two in 1..=1048576"
            )));
        }
        Ok(match self.plugin {
            EcPlugin::ReedSolomon => Box::new(
                LinearCode::reed_solomon(k, m)
                    .map_err(bad)?
                    .with_alignment(a),
            ),
            EcPlugin::Lrc => Box::new(
                LinearCode::pyramid(k, m, self.l as usize)
                    .map_err(bad)?
                    .with_alignment(a),
            ),
            EcPlugin::Zigzag => {
                let c = if self.optimal {
                    Construction::Optimal
                } else {
                    Construction::Basic
                };
                Box::new(
                    Zigzag::new(k, m, self.s as usize, c)
                        .map_err(bad)?
                        .with_alignment(a),
                )
            }
        })
    }

    /// How objects are striped into shards with this profile (this also
    /// validates the stripe unit).
    pub fn striper(&self) -> Result<loligo_ec::stripe::Striper> {
        use loligo_ec::stripe::Striper;
        let code: std::sync::Arc<dyn loligo_ec::code::ErasureCode> = self.code()?.into();
        let unit = match self.stripe_unit {
            0 => Striper::default_unit(&*code),
            u => u as u64,
        };
        Striper::new(code, unit).map_err(|e| MapError::InvalidProfile(e.to_string()))
    }

    /// Chunks per stripe (the pool size an EC pool with it needs).
    pub fn chunks(&self) -> Result<u32> {
        let c = self.code()?;
        Ok((c.k() + c.m()) as u32)
    }
}

/// One change to the map. An [`Incremental`] is a list of them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// An OSD starts: created (and placed under `host` in CRUSH with
    /// `crush_weight`) if new, marked up at `addr`.
    OsdBoot {
        id: i32,
        addr: String,
        host: String,
        crush_weight: u32,
    },
    OsdDown {
        id: i32,
    },
    OsdOut {
        id: i32,
    },
    OsdIn {
        id: i32,
    },
    /// Reweight (16.16, 0..=1.0).
    OsdReweight {
        id: i32,
        weight: u32,
    },
    /// The monitors saw an OSD's device cross a fullness threshold.
    OsdFullness {
        id: i32,
        fullness: Fullness,
    },
    /// Forget an OSD (it must be down); removes it from CRUSH too.
    OsdRemove {
        id: i32,
    },
    CrushAddOsd {
        id: i32,
        host: String,
        weight: u32,
    },
    CrushMove {
        name: String,
        parent: String,
    },
    CrushRemove {
        name: String,
    },
    /// Replace the whole CRUSH map (as `crush set` from a file).
    CrushSet(#[serde(with = "crush_as_json")] CrushMap),
    /// Create a pool; its id must be `pool_max + 1`.
    PoolCreate(Pool),
    PoolDelete {
        id: u64,
    },
    /// Replace a pool's settings (same id; the name may change).
    PoolUpdate(Pool),
    EcProfileSet(EcProfile),
    EcProfileRm {
        name: String,
    },
    /// Set (non-empty) or clear (empty) a PG's temporary acting set.
    PgTemp {
        pg: PgId,
        osds: Vec<i32>,
    },
    /// Set (`Some`) or clear a PG's temporary primary.
    PrimaryTemp {
        pg: PgId,
        osd: Option<i32>,
    },
    /// Set (non-empty) or clear (empty) a PG's upmap pairs.
    PgUpmapItems {
        pg: PgId,
        items: Vec<(i32, i32)>,
    },
    /// Record the write set of a PG interval about to accept writes (an
    /// older interval than the one recorded is refused).
    RecordWriteSet {
        pg: PgId,
        record: WriteSetRecord,
    },
    /// Declare a down (or removed) OSD's data gone: PGs stop waiting for
    /// it. A PG whose recorded write set was only lost OSDs serves what the
    /// others have, and acknowledged writes it lacked are lost; an
    /// erasure-coded PG whose record is left with fewer than k members
    /// waits for each of those, then serves what k up copies hold.
    OsdLost {
        id: i32,
    },
    /// Record a client (`auth add`), its new caps (`auth caps`) or its new
    /// key's serial (`auth rotate`).
    AuthPut {
        entity: String,
        entry: AuthEntry,
    },
    /// Forget a client: every request of it is refused from this epoch.
    AuthRm {
        entity: String,
    },
    /// The operator gives up a PG's unfound objects (`pg
    /// mark-unfound-lost`): until a write set is recorded for a later
    /// interval, the PG goes on with what its up OSDs hold and its primary
    /// removes each object written before the mark that it cannot find,
    /// logged as given up. Recorded as this epoch in
    /// [`OsdMap::unfound_lost`].
    PgMarkUnfoundLost {
        pg: PgId,
    },
    /// Set the monitor map: the Raft group's members, by id, with the
    /// address each serves on (the leader keeps it equal to the group's
    /// membership).
    MonMap {
        mons: BTreeMap<u64, String>,
    },
    /// Set (`on`) or clear a cluster-wide flag (`osd set`, `osd unset`).
    OsdFlag {
        flag: OsdFlag,
        on: bool,
    },
    /// The monitors mark a down OSD out (the down-out interval passed):
    /// as `OsdOut`, remembered in [`OsdMap::auto_out`] so its next boot
    /// marks it in again (unless `noin`).
    OsdAutoOut {
        id: i32,
    },
    /// Set one of the [`FullRatios`] (`osd set-full-ratio` and its
    /// kin), in millionths; the ratios must stay in order.
    FullRatio {
        kind: RatioKind,
        ppm: u32,
    },
    /// A down OSD's device is gone for good (`osd destroy`): it is marked
    /// out and destroyed, and no write-set record names it any more (as
    /// `OsdLost`); its id and CRUSH place stay for a replacement. It
    /// boots again only after `OsdNew`.
    OsdDestroy {
        id: i32,
    },
    /// A replacement for destroyed OSD `id` (`osd new`): it may boot,
    /// and is marked in when it does (unless `noin`).
    OsdNew {
        id: i32,
    },
    /// Place an OSD at a CRUSH location (`osd crush set-location`, and an
    /// OSD that boots with another host than CRUSH has it under: Ceph's
    /// `osd_crush_update_on_start`); see [`crush_edit::set_location`].
    CrushSetLocation {
        id: i32,
        location: Vec<(String, String)>,
    },
    /// An OSD's CRUSH weight, 16.16 (`osd crush reweight`).
    CrushReweight {
        id: i32,
        weight: u32,
    },
    /// Turn the monitors' upmap balancer on or off (`balancer on|off`).
    Balancer {
        on: bool,
    },
    /// Merge pool `pool`'s PGs down to `to` (`pool set NAME pg_num N`
    /// below pg_num; `to` equal to pg_num calls a merge off): the leader
    /// steps pgp_num down to it, then merges ([`merge`]).
    PgMergeTarget {
        pool: u64,
        to: u32,
    },
    /// The PGs a merge of pool `pool` joins hold their writes from this
    /// epoch on, and report when they are ready.
    PgMergeReady {
        pool: u64,
    },
    /// The merge of pool `pool` is done: pg_num falls to the target, and
    /// each PG's version when it was ready (seed -> last_update) is kept
    /// for its copies to check theirs against ([`PgMerged`]).
    PgMerged {
        pool: u64,
        versions: BTreeMap<u32, Version>,
    },
    /// Set pool `pool`'s store options (the defaults clear its entry).
    PoolOpts {
        pool: u64,
        opts: PoolOpts,
    },
}

/// A cluster-wide flag the operator sets (`osd set`; Ceph's names).
/// New flags go at the end: the encoding numbers them in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum OsdFlag {
    /// No scrub starts by the schedule (an operator's `pg scrub` still
    /// runs); a scheduled one running stops at its next chunk.
    NoScrub,
    /// As `NoScrub`, for deep scrubs.
    NoDeepScrub,
    /// Down OSDs are not marked out after the down-out interval (for
    /// maintenance: a restart moves no data).
    NoOut,
    /// Booting OSDs are not marked in: a new one starts out, and one the
    /// monitors marked out stays out.
    NoIn,
    /// Boots are refused: down OSDs stay down (they retry).
    NoUp,
    /// Failure reports and missed beacons mark no OSD down.
    NoDown,
    /// PGs that lack no copy (only misplaced) do not backfill.
    NoRebalance,
    /// No PG backfills (a chunk under way is finished).
    NoBackfill,
    /// No PG recovers from its log in the background (an object a client
    /// op waits for still is).
    NoRecover,
}

impl OsdFlag {
    /// Every flag, in the order `status` shows them.
    pub const ALL: [OsdFlag; 9] = [
        OsdFlag::NoUp,
        OsdFlag::NoDown,
        OsdFlag::NoOut,
        OsdFlag::NoIn,
        OsdFlag::NoBackfill,
        OsdFlag::NoRebalance,
        OsdFlag::NoRecover,
        OsdFlag::NoScrub,
        OsdFlag::NoDeepScrub,
    ];

    /// Its name (as `osd set` takes it).
    pub fn name(self) -> &'static str {
        match self {
            OsdFlag::NoScrub => "noscrub",
            OsdFlag::NoDeepScrub => "nodeep-scrub",
            OsdFlag::NoOut => "noout",
            OsdFlag::NoIn => "noin",
            OsdFlag::NoUp => "noup",
            OsdFlag::NoDown => "nodown",
            OsdFlag::NoRebalance => "norebalance",
            OsdFlag::NoBackfill => "nobackfill",
            OsdFlag::NoRecover => "norecover",
        }
    }

    /// The flag named `name`; Ceph's other flags are refused by name as
    /// not built yet.
    pub fn parse(name: &str) -> std::result::Result<OsdFlag, String> {
        if let Some(f) = OsdFlag::ALL.iter().find(|f| f.name() == name) {
            return Ok(*f);
        }
        let names: Vec<&str> = OsdFlag::ALL.iter().map(|f| f.name()).collect();
        const LATER: [&str; 4] = ["pause", "pauserd", "pausewr", "full"];
        if LATER.contains(&name) {
            return Err(format!(
                "the {name} flag is not supported yet (supported: {})",
                names.join(", ")
            ));
        }
        Err(format!(
            "unknown flag '{name}' (supported: {})",
            names.join(", ")
        ))
    }
}

/// The shares of a device in use at which an OSD is near full, too full
/// to backfill onto, and full (Ceph's `mon_osd_nearfull_ratio`,
/// `..._backfillfull_ratio`, `..._full_ratio`), in millionths, ordered
/// `nearfull <= backfillfull <= full <= 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FullRatios {
    pub nearfull: u32,
    pub backfillfull: u32,
    pub full: u32,
}

/// Millionths in one.
pub const RATIO_ONE: u32 = 1_000_000;

impl Default for FullRatios {
    fn default() -> FullRatios {
        let ppm = |r: f64| (r * f64::from(RATIO_ONE)).round() as u32;
        FullRatios {
            nearfull: ppm(NEARFULL_RATIO),
            backfillfull: ppm(BACKFILLFULL_RATIO),
            full: ppm(FULL_RATIO),
        }
    }
}

/// Which of the [`FullRatios`] (`osd set-*-ratio`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RatioKind {
    NearFull,
    BackfillFull,
    Full,
}

impl RatioKind {
    /// The command's word for it (`osd set-{word}-ratio`).
    pub fn word(self) -> &'static str {
        match self {
            RatioKind::NearFull => "nearfull",
            RatioKind::BackfillFull => "backfillfull",
            RatioKind::Full => "full",
        }
    }
}

impl FullRatios {
    /// These ratios with `kind` set to `ppm` millionths, or why not: out
    /// of 1..=1,000,000, or out of order with the others.
    pub fn with(self, kind: RatioKind, ppm: u32) -> std::result::Result<FullRatios, String> {
        let mut r = self;
        match kind {
            RatioKind::NearFull => r.nearfull = ppm,
            RatioKind::BackfillFull => r.backfillfull = ppm,
            RatioKind::Full => r.full = ppm,
        }
        r.check().map(|()| r)
    }

    /// Whether the ratios are in range and in order.
    pub fn check(&self) -> std::result::Result<(), String> {
        let show = |v: u32| format!("{:.4}", f64::from(v) / f64::from(RATIO_ONE));
        if self.nearfull == 0 || self.full > RATIO_ONE {
            return Err(format!(
                "ratios must be above 0 and at most 1 (nearfull {}, full {})",
                show(self.nearfull),
                show(self.full)
            ));
        }
        if !(self.nearfull <= self.backfillfull && self.backfillfull <= self.full) {
            return Err(format!(
                "ratios must keep nearfull <= backfillfull <= full; that would make them {}, {}, {}",
                show(self.nearfull),
                show(self.backfillfull),
                show(self.full)
            ));
        }
        Ok(())
    }

    /// The state of a device with `used` of `total` bytes in use (a
    /// device of unknown size counts as not full).
    pub fn fullness(&self, used: u64, total: u64) -> Fullness {
        if total == 0 {
            return Fullness::Ok;
        }
        // used / total >= ppm / 1e6, in integers (no rounding at the edge).
        let at = |ppm: u32| {
            u128::from(used) * u128::from(RATIO_ONE) >= u128::from(total) * u128::from(ppm)
        };
        if at(self.full) {
            Fullness::Full
        } else if at(self.backfillfull) {
            Fullness::BackfillFull
        } else if at(self.nearfull) {
            Fullness::NearFull
        } else {
            Fullness::Ok
        }
    }

    /// One ratio as a fraction.
    pub fn get(&self, kind: RatioKind) -> f64 {
        let v = match kind {
            RatioKind::NearFull => self.nearfull,
            RatioKind::BackfillFull => self.backfillfull,
            RatioKind::Full => self.full,
        };
        f64::from(v) / f64::from(RATIO_ONE)
    }
}

/// The write set of the newest interval in which a PG may have accepted
/// writes. Its primary records it before the first write of the interval,
/// so every acknowledged write is on each of `osds`: a later primary must
/// hear from at least one of them before it serves anything.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteSetRecord {
    /// First epoch of the interval.
    pub interval: Epoch,
    /// The write set (primary first).
    pub osds: Vec<i32>,
}

/// Which PGs' placement (acting set or primary) a [`Change`] may move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// None: the change leaves every PG where it was.
    Nothing,
    /// The PGs of one pool.
    Pool(u64),
    /// One PG.
    Pg(PgId),
    /// Any PG (OSD states, weights, CRUSH).
    All,
}

impl Reach {
    /// Whether PG `pg` is within reach.
    pub fn covers(self, pg: PgId) -> bool {
        match self {
            Reach::Nothing => false,
            Reach::Pool(p) => p == pg.pool,
            Reach::Pg(p) => p == pg,
            Reach::All => true,
        }
    }
}

impl Change {
    /// Which PGs this change may move. The monitors compute a PG's
    /// placement, to tell whether a late write-set record's interval has
    /// ended, only when a change since the ask may have moved it.
    pub fn reach(&self) -> Reach {
        match self {
            Change::OsdBoot { .. }
            | Change::OsdDown { .. }
            | Change::OsdOut { .. }
            | Change::OsdAutoOut { .. }
            | Change::OsdIn { .. }
            | Change::OsdReweight { .. }
            | Change::OsdRemove { .. }
            | Change::OsdDestroy { .. }
            | Change::OsdNew { .. }
            | Change::CrushSetLocation { .. }
            | Change::CrushReweight { .. }
            | Change::CrushAddOsd { .. }
            | Change::CrushMove { .. }
            | Change::CrushRemove { .. }
            | Change::CrushSet(_) => Reach::All,
            Change::PoolCreate(p) | Change::PoolUpdate(p) => Reach::Pool(p.id),
            Change::PoolDelete { id } => Reach::Pool(*id),
            Change::PgMergeTarget { pool, .. }
            | Change::PgMergeReady { pool }
            | Change::PgMerged { pool, .. } => Reach::Pool(*pool),
            Change::PgTemp { pg, .. }
            | Change::PrimaryTemp { pg, .. }
            | Change::PgUpmapItems { pg, .. } => Reach::Pg(*pg),
            // Fullness only stops backfill onto a device; a lost OSD was
            // down already; records, users and unfound marks place nothing.
            Change::OsdFullness { .. }
            | Change::EcProfileSet(_)
            | Change::EcProfileRm { .. }
            | Change::RecordWriteSet { .. }
            | Change::PgMarkUnfoundLost { .. }
            | Change::OsdLost { .. }
            | Change::AuthPut { .. }
            | Change::AuthRm { .. }
            | Change::MonMap { .. }
            | Change::OsdFlag { .. }
            | Change::Balancer { .. }
            | Change::PoolOpts { .. }
            | Change::FullRatio { .. } => Reach::Nothing,
        }
    }
}

impl WriteSetRecord {
    /// The OSDs named, holes left out.
    pub fn members(&self) -> impl Iterator<Item = i32> + '_ {
        self.osds
            .iter()
            .copied()
            .filter(|&o| o >= 0 && o != ITEM_NONE)
    }
}

/// One PG's write set to record, with what its primary saw of its
/// interval: the map epoch it had when it asked, and the interval's
/// acting set and primary. The monitors leave a record out when it is
/// older than the one recorded, when it names an OSD that went down or
/// booted again since its interval began, or when it is late and gives up
/// what is left: the PG's record is short of k members
/// ([`OsdMap::record_short`]), the ask names none of them, and the PG's
/// acting set or primary in the current map is no longer the interval's
/// (a newer interval's primary may have gone on from those members'
/// copies). They compute the PG's placement only when a change since
/// `as_of` may have moved it ([`Change::reach`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordAsk {
    pub pg: PgId,
    pub record: WriteSetRecord,
    pub as_of: Epoch,
    /// The interval's acting set (holes as -1) and primary.
    pub acting: Vec<i32>,
    pub primary: i32,
}

/// Every PG's write-set record. A persistent map: copies share their
/// tree, so copying a cluster map (which every holder does on every
/// epoch) does not copy a record per PG, and an update costs O(log n).
/// It encodes as an ordinary map.
pub type WriteSets = imbl::OrdMap<PgId, WriteSetRecord>;

/// The OSDs a map names, by id.
pub type Osds = imbl::OrdMap<i32, OsdInfo>;

/// Reads a persistent map as a `BTreeMap` (the same encoding): imbl's own
/// reader reserves room for the length the input claims before reading
/// an entry, so a few hostile bytes could ask for any amount of memory.
fn persistent_via_btree<'de, D, K, V>(d: D) -> std::result::Result<imbl::OrdMap<K, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    K: Deserialize<'de> + Ord + Clone,
    V: Deserialize<'de> + Clone,
{
    BTreeMap::<K, V>::deserialize(d).map(imbl::OrdMap::from)
}

/// The changes that make epoch `epoch` from epoch `epoch - 1`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Incremental {
    pub epoch: Epoch,
    pub changes: Vec<Change>,
}

/// The cluster map at one epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OsdMap {
    pub fsid: String,
    pub epoch: Epoch,
    /// Persistent (shares structure with the map it was copied from): a
    /// map is copied on every epoch, and its OSDs must not cost that.
    #[serde(deserialize_with = "persistent_via_btree")]
    pub osds: Osds,
    pub pools: BTreeMap<u64, Pool>,
    /// Largest pool id ever used (ids are never reused).
    pub pool_max: u64,
    pub ec_profiles: BTreeMap<String, EcProfile>,
    /// Carried as JSON inside the encoding: the CRUSH types skip absent
    /// optional fields, which only a self-describing format can read.
    /// Shared with the maps copied from this one until one of them
    /// changes it ([`Arc::make_mut`]).
    #[serde(with = "crush_as_json::shared")]
    pub crush: Arc<CrushMap>,
    pub pg_temp: BTreeMap<PgId, Vec<i32>>,
    /// Per PG, a temporary primary among its acting set (erasure-coded
    /// PGs: positions are shards, so a pg_temp cannot put a complete
    /// member first; Ceph's primary_temp).
    #[serde(default)]
    pub primary_temp: BTreeMap<PgId, i32>,
    pub pg_upmap_items: BTreeMap<PgId, Vec<(i32, i32)>>,
    /// Per PG, the newest interval that may have accepted writes.
    #[serde(deserialize_with = "persistent_via_btree")]
    pub write_sets: WriteSets,
    /// The clients the cluster knows: caps and certificate serial (never
    /// a key). See [`OsdMap::caps_of`].
    pub auth: BTreeMap<String, AuthEntry>,
    /// Per PG, the epoch of the operator's last `pg mark-unfound-lost`:
    /// while the PG's recorded write set is from an interval that began
    /// at or before it, its primary gives up the objects written before
    /// it that it cannot find.
    pub unfound_lost: BTreeMap<PgId, Epoch>,
    /// The monitor map: each monitor's id and the address it serves on.
    /// Which key each holds is its `mon.N` entry in [`OsdMap::auth`].
    /// Empty until the first leader writes it.
    pub mons: BTreeMap<u64, String>,
    /// The cluster-wide flags set (`osd set`).
    pub flags: BTreeSet<OsdFlag>,
    /// OSDs the monitors marked out after the down-out interval (not an
    /// operator): marked in again when they boot, unless `noin` is set.
    pub auto_out: BTreeSet<i32>,
    /// When a device counts as near full, backfill full and full.
    pub full_ratios: FullRatios,
    /// OSDs destroyed (`osd destroy`): their data and keys are gone,
    /// their ids and CRUSH places kept for a replacement (`osd new`).
    pub destroyed: BTreeSet<i32>,
    /// Whether the monitors' upmap balancer runs (`balancer on`).
    pub balancer: bool,
    /// Per pool, a merge of its PGs under way.
    pub pg_merges: BTreeMap<u64, PgMerge>,
    /// Per pool, its last merge (what copies that merge later check
    /// theirs against).
    pub pg_merged: BTreeMap<u64, PgMerged>,
    /// Per pool, its store options where any is set (`pool set NAME
    /// compression_mode ...`); a pool without an entry has the defaults.
    pub pool_opts: BTreeMap<u64, PoolOpts>,
}

/// Most monitors a map names (Raft groups have 1, 3 or 5).
pub const MONS_MAX: usize = 16;

/// Whether a monitor map is one a cluster can have: at most
/// [`MONS_MAX`] monitors, ids that are entity numbers, each with a
/// `host:port` address.
pub fn check_mons(mons: &BTreeMap<u64, String>) -> Result<()> {
    if mons.len() > MONS_MAX {
        return Err(MapError::Invalid(format!(
            "{} monitors, at most {MONS_MAX}",
            mons.len()
        )));
    }
    for (id, addr) in mons {
        let port_ok = addr
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if *id > i32::MAX as u64 || addr.len() > NAME_LEN_MAX * 4 || !port_ok {
            return Err(MapError::Invalid(format!(
                "monitor {id} at '{addr}': want an id up to {} and a host:port address",
                i32::MAX
            )));
        }
    }
    Ok(())
}

fn check_name(what: &str, n: &str) -> Result<()> {
    let ok = !n.is_empty()
        && n.len() <= NAME_LEN_MAX
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(MapError::Invalid(format!(
            "{what} name '{n}' must be 1-{NAME_LEN_MAX} characters of A-Z a-z 0-9 - _ ."
        )))
    }
}

impl OsdMap {
    /// A new cluster's map at epoch 1: no OSDs or pools, the default CRUSH
    /// map with `failure_domain` (`host`, or `osd` on one machine).
    pub fn new(fsid: &str, failure_domain: &str) -> Result<OsdMap> {
        Ok(OsdMap {
            fsid: fsid.to_string(),
            epoch: 1,
            osds: Osds::new(),
            pools: BTreeMap::new(),
            pool_max: 0,
            ec_profiles: BTreeMap::new(),
            crush: Arc::new(crush_edit::default_map(failure_domain)?),
            pg_temp: BTreeMap::new(),
            primary_temp: BTreeMap::new(),
            write_sets: WriteSets::new(),
            pg_upmap_items: BTreeMap::new(),
            auth: BTreeMap::new(),
            unfound_lost: BTreeMap::new(),
            mons: BTreeMap::new(),
            flags: BTreeSet::new(),
            auto_out: BTreeSet::new(),
            full_ratios: FullRatios::default(),
            destroyed: BTreeSet::new(),
            balancer: false,
            pg_merges: BTreeMap::new(),
            pg_merged: BTreeMap::new(),
            pool_opts: BTreeMap::new(),
        })
    }

    /// The caps of client `entity` connecting with a certificate of
    /// serial `serial`: its entry's if the serial is the entry's; every
    /// right for [`ADMIN`] while it has no entry; otherwise refused, with
    /// the reason (unknown client, or a key rotated away or removed).
    pub fn caps_of(&self, entity: &str, serial: &str) -> std::result::Result<&Caps, String> {
        static ALL: std::sync::LazyLock<Caps> = std::sync::LazyLock::new(Caps::all);
        match self.auth.get(entity) {
            Some(e) if e.serial == serial => Ok(&e.caps),
            Some(_) => Err(format!(
                "{entity}'s certificate (serial {serial}) is no longer valid: its key was rotated"
            )),
            None if entity == ADMIN => Ok(&ALL),
            None => Err(format!(
                "{entity} is not a user of this cluster (`loligo auth add {entity} ...`), or was removed"
            )),
        }
    }

    /// How many users (clients) and daemon entries the user table holds
    /// (every entry is one or the other: [`AuthEntry::validate`]). Walks
    /// the users only: `client.` names sort together.
    pub fn auth_counts(&self) -> (usize, usize) {
        use std::ops::Bound;
        let users = self
            .auth
            .range::<str, _>((Bound::Included("client."), Bound::Excluded("client/")))
            .count();
        (users, self.auth.len() - users)
    }

    /// Whether the user table has room for a new entry of `entity`
    /// (users and daemons are counted apart, see [`DAEMON_ENTRIES_MAX`]).
    pub fn auth_room(&self, entity: &str) -> std::result::Result<(), String> {
        if self.auth.len() < AUTH_ENTRIES_MAX.min(DAEMON_ENTRIES_MAX) {
            return Ok(());
        }
        let (users, daemons) = self.auth_counts();
        if crate::caps::is_daemon(entity) {
            if daemons >= DAEMON_ENTRIES_MAX {
                return Err(format!(
                    "the cluster has {DAEMON_ENTRIES_MAX} daemon keys, the most it keeps"
                ));
            }
        } else if users >= AUTH_ENTRIES_MAX {
            return Err(format!(
                "the cluster has {AUTH_ENTRIES_MAX} users, the most it keeps"
            ));
        }
        Ok(())
    }

    /// Whether OSD entity `entity` (`osd.N`) may act with the certificate
    /// of serial `serial`: the one the user table records for it, or any
    /// of the authority's while none is recorded (an OSD's first boot
    /// records its certificate's serial; `auth rotate osd.N` a new one;
    /// `osd rm` revokes every one, see [`crate::caps::REVOKED_SERIAL`]).
    pub fn daemon_key_valid(&self, entity: &str, serial: &str) -> std::result::Result<(), String> {
        match self.auth.get(entity) {
            Some(e) if e.serial == crate::caps::REVOKED_SERIAL => Err(format!(
                "{entity}'s keys were revoked when it was removed (`loligo auth rotate {entity}` makes a new one)"
            )),
            Some(e) if e.serial != serial => Err(format!(
                "{entity}'s certificate (serial {serial}) is not the one the monitors record for it: its key was rotated"
            )),
            _ => Ok(()),
        }
    }

    /// The serial of the key the map records for daemon `entity` (`osd.N`,
    /// `mon.N`): what a dialler of that daemon insists on. `None` while
    /// none is recorded (before the daemon's first start); the revoked
    /// mark, which no certificate has, once it was removed.
    pub fn daemon_serial(&self, entity: &str) -> Option<&str> {
        self.auth.get(entity).map(|e| e.serial.as_str())
    }

    /// The map several crates' tests start from: OSDs `0..osds` booted at
    /// epoch 2, each on a host of its own (`h0`, `h1`, ...) with weight
    /// 1, and replicated pool `p` (size 3, min_size 2) of `pg_num` PGs.
    /// A test fixture (it panics if the map refuses it), not for use.
    #[doc(hidden)]
    pub fn test_cluster(osds: i32, pg_num: u32) -> OsdMap {
        let mut m = OsdMap::new("f", "osd").expect("a new map");
        let boot = |id| Change::OsdBoot {
            id,
            addr: format!("127.0.0.1:{}", 6800 + id),
            host: format!("h{id}"),
            crush_weight: 0x10000,
        };
        let p = m.replicated_pool("p", pg_num, 3, 2);
        let changes = (0..osds).map(boot).chain([Change::PoolCreate(p)]).collect();
        m.apply(&Incremental { epoch: 2, changes })
            .expect("the test cluster's map applies");
        m
    }

    /// A replicated pool as `pool create` makes it (the next pool id, rule
    /// 0, Ceph's placement). Checked when the change is applied.
    pub fn replicated_pool(&self, name: &str, pg_num: u32, size: u32, min_size: u32) -> Pool {
        Pool {
            id: self.pool_max + 1,
            name: name.to_string(),
            kind: PoolKind::Replicated,
            size,
            min_size,
            pg_num,
            pgp_num: pg_num,
            crush_rule: crush_edit::DEFAULT_RULE,
            pps_mode: PpsMode::Rjenkins,
            balance_param: loligo_crush::mapper::BALANCE_ONE,
            object_size_max: OBJECT_SIZE_MAX_DEFAULT,
            created: self.epoch,
        }
    }

    pub fn pool_by_name(&self, name: &str) -> Option<&Pool> {
        self.pools.values().find(|p| p.name == name)
    }

    pub fn osd(&self, id: i32) -> Result<&OsdInfo> {
        self.osds.get(&id).ok_or(MapError::NoSuchOsd(id))
    }

    pub fn is_up(&self, id: i32) -> bool {
        self.osds.get(&id).is_some_and(|o| o.up)
    }

    /// OSDs (up, in) counts.
    pub fn up_in(&self) -> (usize, usize) {
        (
            self.osds.values().filter(|o| o.up).count(),
            self.osds.values().filter(|o| o.is_in()).count(),
        )
    }

    /// Apply an incremental: checked on a copy, kept only if the result
    /// is valid, so a refused incremental changes nothing.
    pub fn apply(&mut self, inc: &Incremental) -> Result<()> {
        if inc.epoch != self.epoch + 1 {
            return Err(MapError::EpochGap {
                have: self.epoch,
                got: inc.epoch,
            });
        }
        let mut next = self.clone();
        next.epoch = inc.epoch;
        for c in &inc.changes {
            next.change(c)?;
        }
        next.check(Some(self))?;
        *self = next;
        Ok(())
    }

    /// Apply one change to this map (its epoch already the new one); the
    /// whole map is checked after all of an incremental's changes.
    fn change(&mut self, c: &Change) -> Result<()> {
        match c {
            Change::OsdBoot {
                id,
                addr,
                host,
                crush_weight,
            } => self.osd_boot(*id, addr, host, *crush_weight)?,
            Change::OsdDown { id } => {
                let o = self.osds.get_mut(id).ok_or(MapError::NoSuchOsd(*id))?;
                if o.up {
                    o.up = false;
                    o.down_at = self.epoch;
                }
            }
            // An operator's in, out or reweight overrides the monitors'.
            Change::OsdOut { id } => {
                self.osd_mut(*id)?.weight = 0;
                self.auto_out.remove(id);
            }
            Change::OsdAutoOut { id } => {
                self.osd_mut(*id)?.weight = 0;
                self.auto_out.insert(*id);
            }
            Change::OsdIn { id } => {
                self.osd_mut(*id)?.weight = WEIGHT_IN;
                self.auto_out.remove(id);
            }
            Change::OsdReweight { id, weight } => {
                if *weight > WEIGHT_IN {
                    return Err(MapError::Invalid("reweight must be in 0..=1".into()));
                }
                self.osd_mut(*id)?.weight = *weight;
                self.auto_out.remove(id);
            }
            Change::OsdFullness { id, fullness } => {
                self.osds
                    .get_mut(id)
                    .ok_or(MapError::NoSuchOsd(*id))?
                    .fullness = *fullness;
            }
            Change::OsdRemove { id } => self.osd_remove(*id)?,
            Change::CrushAddOsd { id, host, weight } => {
                crush_edit::add_osd(Arc::make_mut(&mut self.crush), *id, host, *weight)?
            }
            Change::CrushMove { name, parent } => {
                crush_edit::move_bucket(Arc::make_mut(&mut self.crush), name, parent)?
            }
            Change::CrushRemove { name } => {
                crush_edit::remove(Arc::make_mut(&mut self.crush), name)?
            }
            Change::CrushSet(m) => self.crush = Arc::new(m.clone()),
            Change::PoolCreate(p) => self.pool_create(p)?,
            Change::PoolDelete { id } => self.pool_delete(*id)?,
            Change::PoolUpdate(p) => self.pool_update(p)?,
            Change::EcProfileSet(prof) => {
                check_name("profile", &prof.name)?;
                prof.striper()?;
                if let Some(pool) = self.pool_using(&prof.name) {
                    if self.ec_profiles.get(&prof.name) != Some(prof) {
                        return Err(MapError::ProfileInUse(prof.name.clone(), pool));
                    }
                }
                self.ec_profiles.insert(prof.name.clone(), prof.clone());
            }
            Change::EcProfileRm { name } => {
                if let Some(pool) = self.pool_using(name) {
                    return Err(MapError::ProfileInUse(name.clone(), pool));
                }
                self.ec_profiles
                    .remove(name)
                    .ok_or_else(|| MapError::NoSuchProfile(name.clone()))?;
            }
            Change::PgTemp { pg, osds } => self.set_pg_temp(*pg, osds)?,
            Change::PrimaryTemp { pg, osd } => {
                self.pool_of(*pg)?;
                match osd {
                    None => {
                        self.primary_temp.remove(pg);
                    }
                    Some(o) if self.osds.contains_key(o) => {
                        self.primary_temp.insert(*pg, *o);
                    }
                    Some(o) => return Err(MapError::Invalid(format!("osd.{o} does not exist"))),
                }
            }
            Change::PgUpmapItems { pg, items } => {
                self.pool_of(*pg)?;
                if items.is_empty() {
                    self.pg_upmap_items.remove(pg);
                } else {
                    self.pg_upmap_items.insert(*pg, items.clone());
                }
            }
            Change::PgMarkUnfoundLost { pg } => {
                self.pool_of(*pg)?;
                self.unfound_lost.insert(*pg, self.epoch);
            }
            Change::OsdLost { id } => self.osd_lost(*id)?,
            Change::RecordWriteSet { pg, record } => self.record_write_set(*pg, record)?,
            Change::AuthPut { entity, entry } => {
                entry.validate(entity).map_err(MapError::Invalid)?;
                if !self.auth.contains_key(entity) {
                    self.auth_room(entity).map_err(MapError::Invalid)?;
                }
                self.auth.insert(entity.clone(), entry.clone());
            }
            Change::AuthRm { entity } => {
                if self.auth.remove(entity).is_none() {
                    return Err(MapError::Invalid(format!("no user {entity}")));
                }
            }
            Change::MonMap { mons } => {
                check_mons(mons)?;
                self.mons = mons.clone();
            }
            Change::OsdFlag { flag, on: true } => {
                self.flags.insert(*flag);
            }
            Change::OsdFlag { flag, on: false } => {
                self.flags.remove(flag);
            }
            Change::FullRatio { kind, ppm } => {
                self.full_ratios = self
                    .full_ratios
                    .with(*kind, *ppm)
                    .map_err(MapError::Invalid)?;
            }
            Change::OsdDestroy { id } => self.osd_destroy(*id)?,
            Change::OsdNew { id } => self.osd_new(*id)?,
            Change::Balancer { on } => self.balancer = *on,
            Change::PgMergeTarget { pool, to } => self.merge_target(*pool, *to)?,
            Change::PgMergeReady { pool } => self.merge_ready(*pool)?,
            Change::PgMerged { pool, versions } => self.merged(*pool, versions)?,
            Change::PoolOpts { pool, opts } => {
                if !self.pools.contains_key(pool) {
                    return Err(MapError::NoSuchPool(pool.to_string()));
                }
                if *opts == PoolOpts::default() {
                    self.pool_opts.remove(pool);
                } else {
                    self.pool_opts.insert(*pool, *opts);
                }
            }
            Change::CrushSetLocation { id, location } => {
                crush_edit::set_location(Arc::make_mut(&mut self.crush), *id, location)?
            }
            Change::CrushReweight { id, weight } => {
                if *weight > BOOT_WEIGHT_MAX {
                    return Err(MapError::Invalid(format!(
                        "a CRUSH weight of {:.2} is above {:.0}",
                        f64::from(*weight) / 65536.0,
                        f64::from(BOOT_WEIGHT_MAX) / 65536.0
                    )));
                }
                let device = *id >= 0 && self.crush.devices.iter().any(|d| d.id == *id);
                if !device || crush_edit::parent_name(&self.crush, *id).is_none() {
                    return Err(MapError::NoSuchOsd(*id));
                }
                crush_edit::set_weight(Arc::make_mut(&mut self.crush), *id, *weight)?
            }
        }
        Ok(())
    }

    /// `Change::OsdDestroy`.
    fn osd_destroy(&mut self, id: i32) -> Result<()> {
        let o = self.osd_mut(id)?;
        if o.up {
            return Err(MapError::Invalid(format!(
                "osd.{id} is up: stop it before destroying it"
            )));
        }
        o.weight = 0;
        self.auto_out.remove(&id);
        self.osd_lost(id)?;
        self.destroyed.insert(id);
        Ok(())
    }

    /// `Change::OsdNew`: a destroyed OSD's id taken again.
    fn osd_new(&mut self, id: i32) -> Result<()> {
        if !self.destroyed.remove(&id) {
            return Err(MapError::Invalid(match self.osds.contains_key(&id) {
                true => format!("osd.{id} is not destroyed (`osd destroy {id}` first)"),
                false => format!("osd.{id} does not exist: a new OSD's first boot adds it"),
            }));
        }
        // In once it boots (as an OSD the monitors marked out).
        self.auto_out.insert(id);
        Ok(())
    }

    fn osd_mut(&mut self, id: i32) -> Result<&mut OsdInfo> {
        self.osds.get_mut(&id).ok_or(MapError::NoSuchOsd(id))
    }

    /// An OSD up at its address; placed in CRUSH (host, weight) only if
    /// CRUSH lacks it: later boots change neither.
    fn osd_boot(&mut self, id: i32, addr: &str, host: &str, crush_weight: u32) -> Result<()> {
        let e = self.epoch;
        // Only what the map has always refused: a boot already in a
        // monitor's log must replay as it first applied (`check_boot`'s
        // newer bounds are the monitor's, before a boot is proposed).
        check_boot_applies(id, addr)?;
        if self.destroyed.contains(&id) {
            return Err(MapError::Invalid(format!(
                "osd.{id} is destroyed: `osd new {id}` makes way for its replacement"
            )));
        }
        let no_in = self.flags.contains(&OsdFlag::NoIn);
        let o = self.osds.entry(id).or_insert(OsdInfo {
            id,
            addr: String::new(),
            up: false,
            weight: if no_in { 0 } else { WEIGHT_IN },
            up_from: e,
            down_at: 0,
            fullness: Fullness::Ok,
        });
        o.addr = addr.to_string();
        o.up = true;
        o.up_from = e;
        if !no_in && self.auto_out.remove(&id) {
            o.weight = WEIGHT_IN;
        }
        if crush_edit::item_id(&self.crush, &format!("osd.{id}")).is_none()
            || !self
                .crush
                .buckets
                .iter()
                .any(|b| b.items.iter().any(|it| it.id == id))
        {
            crush_edit::add_osd(Arc::make_mut(&mut self.crush), id, host, crush_weight)?;
        }
        Ok(())
    }

    /// A down OSD leaves the map and CRUSH.
    fn osd_remove(&mut self, id: i32) -> Result<()> {
        let o = self.osd(id)?;
        if o.up {
            return Err(MapError::Invalid(format!(
                "osd.{id} is up: mark it down (stop it) first"
            )));
        }
        self.osds.remove(&id);
        self.auto_out.remove(&id);
        self.destroyed.remove(&id);
        let name = format!("osd.{id}");
        if crush_edit::item_id(&self.crush, &name).is_some() {
            crush_edit::remove(Arc::make_mut(&mut self.crush), &name)?;
        }
        Ok(())
    }

    /// A new pool, with the next pool id.
    fn pool_create(&mut self, p: &Pool) -> Result<()> {
        if p.id != self.pool_max + 1 {
            return Err(MapError::Invalid(format!(
                "new pool id {} is not {}",
                p.id,
                self.pool_max + 1
            )));
        }
        if self.pool_by_name(&p.name).is_some() {
            return Err(MapError::PoolExists(p.name.clone()));
        }
        if self.pools.len() >= POOLS_MAX {
            return Err(MapError::Invalid(format!("at most {POOLS_MAX} pools")));
        }
        self.pool_max = p.id;
        let mut p = p.clone();
        p.created = self.epoch;
        self.pools.insert(p.id, p);
        Ok(())
    }

    /// A pool goes, with every override and record of its PGs.
    fn pool_delete(&mut self, id: u64) -> Result<()> {
        self.pools
            .remove(&id)
            .ok_or_else(|| MapError::NoSuchPool(id.to_string()))?;
        self.pg_temp.retain(|pg, _| pg.pool != id);
        self.primary_temp.retain(|pg, _| pg.pool != id);
        self.write_sets = std::mem::take(&mut self.write_sets)
            .into_iter()
            .filter(|(pg, _)| pg.pool != id)
            .collect();
        self.pg_upmap_items.retain(|pg, _| pg.pool != id);
        self.unfound_lost.retain(|pg, _| pg.pool != id);
        self.pg_merges.remove(&id);
        self.pg_merged.remove(&id);
        self.pool_opts.remove(&id);
        Ok(())
    }

    /// A pool's settings change (not its kind). A larger pg_num splits
    /// its PGs: each new PG starts as a copy of its parent's place (its
    /// pg_temp, primary_temp, upmap items, write-set record and lost
    /// mark), so that with pgp_num unchanged it maps where its parent
    /// does and its OSDs split their copies in place.
    fn pool_update(&mut self, p: &Pool) -> Result<()> {
        let old = self
            .pools
            .get(&p.id)
            .ok_or_else(|| MapError::NoSuchPool(p.id.to_string()))?;
        if old.kind != p.kind {
            return Err(MapError::Invalid("a pool's kind cannot change".into()));
        }
        if p.pg_num < old.pg_num {
            return Err(MapError::Invalid(format!(
                "pg_num {} is below {}: PGs merge by a merge target, never by an update",
                p.pg_num, old.pg_num
            )));
        }
        if p.pg_num != old.pg_num && self.pg_merges.contains_key(&p.id) {
            return Err(MapError::Invalid(format!(
                "pool '{}' is merging its PGs: call the merge off first",
                p.name
            )));
        }
        // (Checked before the split's entries are copied: a count past
        // any pool's is refused, not looped over.)
        p.placement()
            .validate()
            .map_err(|e| MapError::Invalid(format!("pool '{}': {e}", p.name)))?;
        let split = (p.pg_num > old.pg_num).then_some((old.pg_num, p.pg_num));
        if let Some(o) = self.pool_by_name(&p.name) {
            if o.id != p.id {
                return Err(MapError::PoolExists(p.name.clone()));
            }
        }
        let created = old.created;
        let mut p = p.clone();
        p.created = created;
        let id = p.id;
        self.pools.insert(id, p);
        if let Some((from, to)) = split {
            self.split_pg_entries(id, from, to);
        }
        Ok(())
    }

    /// Pool `pool` grew from `from` to `to` PGs: each new PG takes its
    /// parent's per-PG entries.
    fn split_pg_entries(&mut self, pool: u64, from: u32, to: u32) {
        let of_pool = |pg: &PgId| pg.pool == pool;
        let any = self.pg_temp.keys().any(of_pool)
            || self.primary_temp.keys().any(of_pool)
            || self.pg_upmap_items.keys().any(of_pool)
            || self.write_sets.keys().any(of_pool)
            || self.unfound_lost.keys().any(of_pool);
        if !any {
            return;
        }
        for ps in from..to {
            let child = PgId { pool, ps };
            let parent = PgId {
                pool,
                ps: loligo_crush::placement::ancestor(ps, from),
            };
            if let Some(v) = self.pg_temp.get(&parent).cloned() {
                self.pg_temp.insert(child, v);
            }
            if let Some(&o) = self.primary_temp.get(&parent) {
                self.primary_temp.insert(child, o);
            }
            if let Some(v) = self.pg_upmap_items.get(&parent).cloned() {
                self.pg_upmap_items.insert(child, v);
            }
            if let Some(r) = self.write_sets.get(&parent).cloned() {
                self.write_sets.insert(child, r);
            }
            if let Some(&e) = self.unfound_lost.get(&parent) {
                self.unfound_lost.insert(child, e);
            }
        }
    }

    /// A PG's pg_temp set (empty: cleared).
    fn set_pg_temp(&mut self, pg: PgId, osds: &[i32]) -> Result<()> {
        let pool = self.pool_of(pg)?;
        if osds.is_empty() {
            self.pg_temp.remove(&pg);
        } else if matches!(pool.kind, PoolKind::Erasure { .. }) {
            // Positions are shards: one entry per shard, a hole
            // (-1 or CRUSH's none) where no OSD serves it.
            if osds.len() != pool.size as usize {
                return Err(MapError::Invalid(format!(
                    "pg {pg}: an erasure-coded pg_temp names {} shards, not {}",
                    osds.len(),
                    pool.size
                )));
            }
            let osds: Vec<i32> = osds
                .iter()
                .map(|&o| if o < 0 { ITEM_NONE } else { o })
                .collect();
            if let Some(o) = osds
                .iter()
                .find(|&&o| o != ITEM_NONE && !self.osds.contains_key(&o))
            {
                return Err(MapError::Invalid(format!("osd.{o} does not exist")));
            }
            self.pg_temp.insert(pg, osds);
        } else {
            self.pg_temp.insert(pg, osds.to_vec());
        }
        Ok(())
    }

    /// A down OSD declared lost: it leaves every write-set record.
    fn osd_lost(&mut self, id: i32) -> Result<()> {
        if self.osds.get(&id).is_some_and(|o| o.up) {
            return Err(MapError::Invalid(format!(
                "osd.{id} is up: only a down OSD can be declared lost"
            )));
        }
        self.write_sets = std::mem::take(&mut self.write_sets)
            .into_iter()
            .filter_map(|(pg, mut record)| {
                record.osds.retain(|&o| o != id);
                (!record.osds.is_empty()).then_some((pg, record))
            })
            .collect();
        Ok(())
    }

    /// A PG's write-set record: never older than the recorded one, never
    /// naming an OSD that went down since its interval.
    fn record_write_set(&mut self, pg: PgId, record: &WriteSetRecord) -> Result<()> {
        self.pool_of(pg)?;
        if record.osds.is_empty() {
            return Err(MapError::Invalid(format!("pg {pg}: empty write set")));
        }
        let osd_ok = |&o: &i32| (0..OSDS_MAX).contains(&o) || o == ITEM_NONE;
        if record.osds.len() > MAX_NUM_REP || !record.osds.iter().all(osd_ok) {
            return Err(MapError::Invalid(format!(
                "write set of {pg}: {:?}",
                record.osds
            )));
        }
        if let Some(o) = self.late_member(record) {
            return Err(MapError::Invalid(format!(
                "pg {pg}: the write set of interval {} names osd.{o}, which went down \
                 since",
                record.interval
            )));
        }
        if let Some(old) = self.write_sets.get(&pg) {
            if old.interval > record.interval {
                return Err(MapError::Invalid(format!(
                    "pg {pg}: write set of interval {} is older than the recorded {}",
                    record.interval, old.interval
                )));
            }
        }
        self.write_sets.insert(pg, record.clone());
        Ok(())
    }

    /// Whether PG `pg`'s write-set record names fewer members than hold
    /// every acknowledged write (k of an erasure-coded pool; a replicated
    /// PG's record is never short: one left without members is removed).
    /// Members were declared lost: its primaries go on with what the
    /// copies left hold.
    pub fn record_short(&self, pg: PgId) -> bool {
        let need = match self.pools.get(&pg.pool).map(|p| &p.kind) {
            Some(PoolKind::Erasure { profile }) => {
                self.ec_profiles.get(profile).map_or(1, |e| e.k as usize)
            }
            _ => 1,
        };
        self.write_sets
            .get(&pg)
            .is_some_and(|r| r.members().count() < need)
    }

    /// The first OSD `record` names that went down, or booted again,
    /// since its interval began. That ended the interval, so the record
    /// is late: recording it would name a copy that may no longer hold
    /// the interval's writes (one declared lost and since replaced
    /// included), and `Change::RecordWriteSet` refuses it.
    pub fn late_member(&self, record: &WriteSetRecord) -> Option<i32> {
        record.osds.iter().copied().find(|&o| {
            o != ITEM_NONE
                && self
                    .osds
                    .get(&o)
                    .is_none_or(|i| !i.up || i.up_from > record.interval)
        })
    }

    fn pool_using(&self, profile: &str) -> Option<String> {
        self.pools
            .values()
            .find(|p| matches!(&p.kind, PoolKind::Erasure { profile: n } if n == profile))
            .map(|p| p.name.clone())
    }

    /// Whether PG `pg` exists: its pool does, and `pg` is within its
    /// pg_num.
    pub fn pg_exists(&self, pg: PgId) -> bool {
        self.pools.get(&pg.pool).is_some_and(|p| pg.ps < p.pg_num)
    }

    /// The pool of `pg`, if the pool exists and `pg` is within its pg_num.
    pub fn pool_of(&self, pg: PgId) -> Result<&Pool> {
        let p = self
            .pools
            .get(&pg.pool)
            .ok_or_else(|| MapError::NoSuchPool(pg.pool.to_string()))?;
        if pg.ps >= p.pg_num {
            return Err(MapError::Invalid(format!(
                "pg {pg} past pg_num {}",
                p.pg_num
            )));
        }
        Ok(p)
    }

    /// Check every invariant of the map. A map decoded from the wire or
    /// a snapshot is used only after this: every id it holds is then in
    /// range and every table agrees with its keys.
    pub fn validate(&self) -> Result<()> {
        self.check(None)
    }

    /// [`OsdMap::validate`]; with `base`, a valid map this one was made
    /// from by changes that each checked what they wrote, the checks
    /// whose inputs cannot have changed are left out: the write sets (a
    /// record per PG; `Change::RecordWriteSet` checks its own, a split
    /// copies valid ones to PGs it makes, and no change lowers pg_num) and
    /// the CRUSH compile when the CRUSH map is the same. Applying an
    /// incremental then costs what it changes, not the map's size.
    fn check(&self, base: Option<&OsdMap>) -> Result<()> {
        let bad = |m: String| Err(MapError::Invalid(m));
        // What the base holds was checked when it was made: with the
        // base's CRUSH map (shared, not copied), only the OSD entries
        // added or changed since are checked against it. An epoch costs
        // what it changes, not the cluster's size.
        let crush_kept = base.is_some_and(|b| Arc::ptr_eq(&b.crush, &self.crush));
        let osds = match base {
            Some(b) if crush_kept => self.osds_changed_since(b),
            _ => self.osds.iter().map(|(&id, o)| (id, o, true)).collect(),
        };
        // Before compiling: placement tables are sized by the largest id.
        if !crush_kept && self.crush.max_devices() > OSDS_MAX {
            return bad(format!("a CRUSH device id is {OSDS_MAX} or more"));
        }
        for &(id, o, _) in &osds {
            if o.id != id || !(0..OSDS_MAX).contains(&id) {
                return bad(format!("osd entry {id} (id {}) out of range", o.id));
            }
        }
        if self.pools.len() > POOLS_MAX {
            return bad(format!("{} pools, at most {POOLS_MAX}", self.pools.len()));
        }
        for (&id, p) in &self.pools {
            if p.id != id || id > self.pool_max {
                return bad(format!(
                    "pool entry {id} (id {}) past pool_max {}",
                    p.id, self.pool_max
                ));
            }
        }
        let osd_ok = |o: i32| (0..OSDS_MAX).contains(&o) || o == ITEM_NONE;
        for (pg, v) in &self.pg_temp {
            // A replicated pg_temp may name more than `size` members
            // (the acting set plus up members it lacks).
            self.pool_of(*pg)?;
            if v.is_empty() || v.len() > MAX_NUM_REP || !v.iter().all(|&o| osd_ok(o)) {
                return bad(format!("pg_temp of {pg}: {v:?}"));
            }
        }
        for (pg, &o) in &self.primary_temp {
            self.pool_of(*pg)?;
            if !(0..OSDS_MAX).contains(&o) {
                return bad(format!("primary_temp of {pg}: osd {o}"));
            }
        }
        for (pg, v) in &self.pg_upmap_items {
            self.pool_of(*pg)?;
            let ok =
                |&(a, b): &(i32, i32)| (0..OSDS_MAX).contains(&a) && (0..OSDS_MAX).contains(&b);
            if v.len() > MAX_NUM_REP || !v.iter().all(ok) {
                return bad(format!("pg_upmap_items of {pg}: {v:?}"));
            }
        }
        if base.is_none() {
            // (A change checks the marks and records it writes.)
            for (pg, &e) in &self.unfound_lost {
                self.pool_of(*pg)?;
                if e > self.epoch {
                    return bad(format!(
                        "unfound objects of {pg} marked lost at epoch {e}, past the map's"
                    ));
                }
            }
            for (pg, r) in &self.write_sets {
                self.pool_of(*pg)?;
                if r.osds.len() > MAX_NUM_REP || !r.osds.iter().all(|&o| osd_ok(o)) {
                    return bad(format!("write set of {pg}: {:?}", r.osds));
                }
            }
        }
        self.check_merges()?;
        let (users, daemons) = self.auth_counts();
        if users > AUTH_ENTRIES_MAX || daemons > DAEMON_ENTRIES_MAX {
            return bad(format!(
                "{users} users and {daemons} daemon keys, at most \
                 {AUTH_ENTRIES_MAX} and {DAEMON_ENTRIES_MAX}"
            ));
        }
        for (entity, e) in &self.auth {
            e.validate(entity).map_err(MapError::Invalid)?;
        }
        check_mons(&self.mons)?;
        if let Some(id) = self.auto_out.iter().find(|&id| !self.osds.contains_key(id)) {
            return bad(format!(
                "osd.{id} marked out by the monitors is not in the map"
            ));
        }
        self.full_ratios.check().map_err(MapError::Invalid)?;
        if let Some(id) = self
            .destroyed
            .iter()
            .find(|&id| !self.osds.contains_key(id))
        {
            return bad(format!("destroyed osd.{id} is not in the map"));
        }
        if let Some(id) = self
            .pool_opts
            .keys()
            .find(|id| !self.pools.contains_key(id))
        {
            return bad(format!("options of pool {id}, which is not in the map"));
        }
        let compiled = match base {
            Some(b) if b.crush == self.crush => None,
            _ => Some(CompiledMap::compile(&self.crush)?),
        };
        let has_rule = |id: i32| match &compiled {
            Some(c) => c.has_rule(id),
            // The base's CRUSH map compiled, and this one is the same.
            None => self.crush.rules.iter().any(|r| r.id == id),
        };
        for p in self.pools.values() {
            check_name("pool", &p.name)?;
            p.placement()
                .validate()
                .map_err(|e| MapError::Invalid(format!("pool '{}': {e}", p.name)))?;
            if !has_rule(p.crush_rule) {
                return Err(MapError::Invalid(format!(
                    "pool '{}': CRUSH rule {} does not exist",
                    p.name, p.crush_rule
                )));
            }
            if !matches!(p.kind, PoolKind::Erasure { .. }) && p.size > REPLICAS_MAX {
                return Err(MapError::Invalid(format!(
                    "pool '{}': size {} must be in 1..={REPLICAS_MAX}",
                    p.name, p.size
                )));
            }
            if p.min_size == 0 || p.min_size > p.size {
                return Err(MapError::Invalid(format!(
                    "pool '{}': min_size {} must be in 1..=size {}",
                    p.name, p.min_size, p.size
                )));
            }
            if p.object_size_max == 0 {
                return Err(MapError::Invalid(format!(
                    "pool '{}': object_size_max must be positive",
                    p.name
                )));
            }
            if let PoolKind::Erasure { profile } = &p.kind {
                let prof = self
                    .ec_profiles
                    .get(profile)
                    .ok_or_else(|| MapError::NoSuchProfile(profile.clone()))?;
                let n = prof.chunks()?;
                if p.size != n {
                    return Err(MapError::Invalid(format!(
                        "pool '{}': size {} but profile '{profile}' has {n} chunks",
                        p.name, p.size
                    )));
                }
                if p.min_size < prof.k {
                    return Err(MapError::Invalid(format!(
                        "pool '{}': min_size {} is below k={} of profile '{profile}' (a write on fewer shards could not be read back)",
                        p.name, p.min_size, prof.k
                    )));
                }
                // Shards are positions: a `firstn` rule would shift them
                // when an OSD goes down.
                let indep = self.crush.rules.iter().any(|r| {
                    r.id == p.crush_rule
                        && r.steps.iter().any(|s| {
                            matches!(
                                s,
                                loligo_crush::map::Step::Choose {
                                    mode: loligo_crush::map::ChooseMode::Indep,
                                    ..
                                }
                            )
                        })
                });
                if !indep {
                    return Err(MapError::Invalid(format!(
                        "pool '{}': erasure-coded pools need an indep CRUSH rule; rule {} is not",
                        p.name, p.crush_rule
                    )));
                }
            }
        }
        // (A set, not a search per OSD: a map of N OSDs is checked on
        // every epoch, so this must not cost N times N.)
        // An entry the base held under this CRUSH map has its device.
        let added: Vec<i32> = (osds.iter())
            .filter(|(_, _, added)| *added)
            .map(|(id, _, _)| *id)
            .collect();
        let devices: std::collections::HashSet<i32> = if added.is_empty() {
            Default::default()
        } else {
            self.crush.devices.iter().map(|d| d.id).collect()
        };
        for id in &added {
            if !devices.contains(id) {
                return Err(MapError::Invalid(format!("osd.{id} has no CRUSH device")));
            }
        }
        Ok(())
    }

    /// The OSD entries this map adds or changes over `base`, and whether
    /// each is new (the structure they share is skipped: the cost is the
    /// changes').
    fn osds_changed_since<'a>(&'a self, base: &'a OsdMap) -> Vec<(i32, &'a OsdInfo, bool)> {
        base.osds
            .diff(&self.osds)
            .filter_map(|d| match d {
                imbl::ordmap::DiffItem::Add(&id, o) => Some((id, o, true)),
                imbl::ordmap::DiffItem::Update { new: (&id, o), .. } => Some((id, o, false)),
                imbl::ordmap::DiffItem::Remove(..) => None,
            })
            .collect()
    }

    /// The OSD table placement needs.
    pub fn osd_states(&self) -> OsdStates {
        let max = self
            .osds
            .keys()
            .next_back()
            .map_or(0, |m| m + 1)
            .max(self.crush.max_devices());
        let n = max.max(0) as usize;
        let mut s = OsdStates {
            max_osd: max.max(0),
            exists: vec![false; n],
            up: vec![false; n],
            weight: vec![0; n],
        };
        for o in self.osds.values() {
            let i = o.id as usize;
            s.exists[i] = true;
            s.up[i] = o.up;
            s.weight[i] = o.weight;
        }
        s
    }

    /// A reusable placement calculator for this epoch.
    pub fn placer(&self) -> Result<Placer<'_>> {
        let crush = CompiledMap::compile(&self.crush)?;
        let ws = Workspace::new(&crush);
        Ok(Placer {
            map: self,
            states: self.osd_states(),
            crush,
            ws,
        })
    }
}

/// Computes PG placements for one map epoch (the CRUSH map compiled once).
pub struct Placer<'a> {
    map: &'a OsdMap,
    states: OsdStates,
    crush: CompiledMap,
    ws: Workspace,
}

impl Placer<'_> {
    /// Up and acting sets of a PG: CRUSH, then upmap items, then down
    /// OSDs removed; `pg_temp` (its up members) replaces acting when set.
    pub fn map_pg(&mut self, pg: PgId) -> Result<PgMapping> {
        let pool = self.map.pool_of(pg)?;
        let upmap = self
            .map
            .pg_upmap_items
            .get(&pg)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let placement = pool.placement();
        let mut m = map_pg_with_upmap(
            &self.crush,
            &placement,
            &self.states,
            pg.ps,
            upmap,
            &mut self.ws,
        )?;
        self.map.apply_overrides(pg, placement.erasure, &mut m);
        Ok(m)
    }
}

/// Maps PGs under one map, as [`Placer::map_pg`] does: a fresh placer,
/// one made on first use ([`LazyPlacer`]), or mappings carried between
/// maps (the monitor's). Whoever asks for a few PGs takes any of them.
pub trait MapPg {
    /// PG `pg`'s up and acting sets.
    fn map_pg(&mut self, pg: PgId) -> Result<PgMapping>;
}

impl MapPg for Placer<'_> {
    fn map_pg(&mut self, pg: PgId) -> Result<PgMapping> {
        Placer::map_pg(self, pg)
    }
}

/// A [`Placer`] compiled when first asked (never, when no PG is): for a
/// caller that may map no PG at all.
pub struct LazyPlacer<'a> {
    map: &'a OsdMap,
    placer: Option<Placer<'a>>,
}

impl<'a> LazyPlacer<'a> {
    /// A placer for `map`, not compiled yet.
    pub fn new(map: &'a OsdMap) -> Self {
        LazyPlacer { map, placer: None }
    }
}

impl MapPg for LazyPlacer<'_> {
    fn map_pg(&mut self, pg: PgId) -> Result<PgMapping> {
        let placer = match &mut self.placer {
            Some(p) => p,
            slot => slot.insert(self.map.placer()?),
        };
        placer.map_pg(pg)
    }
}

impl OsdMap {
    /// The last steps of PG `pg`'s mapping: `pg_temp` (its up members)
    /// replaces acting when set, `primary_temp` picks the primary among
    /// the up acting members.
    pub(crate) fn apply_overrides(&self, pg: PgId, erasure: bool, m: &mut PgMapping) {
        if let Some(t) = self.pg_temp.get(&pg) {
            // Erasure-coded: positions are shards, so an OSD that is not up
            // leaves a hole rather than shifting the shards after it.
            let acting: Vec<i32> = if erasure {
                t.iter()
                    .map(|&o| if self.is_up(o) { o } else { ITEM_NONE })
                    .collect()
            } else {
                t.iter().copied().filter(|&o| self.is_up(o)).collect()
            };
            if acting.iter().any(|&o| o != ITEM_NONE) {
                m.acting_primary = acting
                    .iter()
                    .copied()
                    .find(|&o| o != ITEM_NONE)
                    .unwrap_or(-1);
                m.acting = acting;
            }
        }
        if let Some(&p) = self.primary_temp.get(&pg) {
            if m.acting.contains(&p) && self.is_up(p) {
                m.acting_primary = p;
            }
        }
    }
}

mod merge;
mod older;
pub use merge::{merge_sources, PgMerge, PgMerged};

mod crush_as_json {
    use loligo_crush::CrushMap;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &CrushMap, s: S) -> Result<S::Ok, S::Error> {
        let j = serde_json::to_vec(m).map_err(serde::ser::Error::custom)?;
        s.serialize_bytes(&j)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<CrushMap, D::Error> {
        let b: Vec<u8> = Deserialize::deserialize(d)?;
        serde_json::from_slice(&b).map_err(D::Error::custom)
    }

    /// The same encoding, for a shared CRUSH map.
    pub mod shared {
        use loligo_crush::CrushMap;
        use serde::{Deserializer, Serializer};
        use std::sync::Arc;

        pub fn serialize<S: Serializer>(m: &Arc<CrushMap>, s: S) -> Result<S::Ok, S::Error> {
            super::serialize(m, s)
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<CrushMap>, D::Error> {
            super::deserialize(d).map(Arc::new)
        }
    }
}

/// Magic and format version in front of every encoded map and incremental.
const MAGIC: [u8; 4] = *b"LGMA";

/// Encode compactly (postcard, behind a magic and version).
pub fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    // Serializing these types cannot fail (no maps with non-string keys
    // are an issue for postcard, no I/O); an empty body would be caught
    // by `decode` anyway.
    out.extend(postcard::to_stdvec(v).unwrap_or_default());
    out
}

/// Decode a full map and check it ([`OsdMap::validate`]): what every
/// receiver of a map from the wire or a snapshot uses, so that a
/// malformed map is an error, never an index out of range later.
pub fn decode_map(b: &[u8]) -> Result<OsdMap> {
    let m: OsdMap = match older::decode_map(b) {
        Some(m) => m?,
        None => decode("map", b)?,
    };
    m.validate()?;
    Ok(m)
}

/// Decode what [`encode`] wrote; foreign or truncated bytes are an error.
pub fn decode<T: for<'de> Deserialize<'de>>(what: &'static str, b: &[u8]) -> Result<T> {
    let body = std::iter::once(&MAGIC)
        .chain(older::MAGICS)
        .find_map(|m| b.strip_prefix(m.as_slice()));
    let body = body.ok_or_else(|| MapError::Decode {
        what: what.into(),
        why: "bad magic or unsupported version".into(),
    })?;
    whole(what, body)
}

/// Postcard's value of all of `body`: bytes past its end are an error
/// too (a value followed by anything is not what [`encode`] wrote).
fn whole<T: for<'de> Deserialize<'de>>(what: &'static str, body: &[u8]) -> Result<T> {
    let bad = |why: String| MapError::Decode {
        what: what.into(),
        why,
    };
    match postcard::take_from_bytes(body) {
        Ok((v, [])) => Ok(v),
        Ok((_, rest)) => Err(bad(format!("{} bytes past its end", rest.len()))),
        Err(e) => Err(bad(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A map checked against its base (sharing its CRUSH map) checks the
    /// OSD entries it adds or changes: an entry without a CRUSH device,
    /// or under another id, is refused as it is without a base.
    #[test]
    fn a_checked_change_still_refuses_bad_osd_entries() {
        let base = OsdMap::test_cluster(6, 32);
        let mut next = base.clone();
        next.epoch += 1;
        next.osds.get_mut(&2).unwrap().up = false;
        assert!(next.check(Some(&base)).is_ok());

        let mut stray = next.clone();
        let mut o = stray.osds[&3].clone();
        o.id = 40;
        stray.osds.insert(40, o);
        for b in [Some(&base), None] {
            let e = stray.check(b).unwrap_err().to_string();
            assert!(e.contains("osd.40 has no CRUSH device"), "{e}");
        }
        let mut renamed = next.clone();
        renamed.osds.get_mut(&4).unwrap().id = 5;
        for b in [Some(&base), None] {
            let e = renamed.check(b).unwrap_err().to_string();
            assert!(e.contains("osd entry 4 (id 5)"), "{e}");
        }
    }

    /// A map whose OSD table claims a vast number of entries is refused
    /// as malformed: no room is reserved for what the bytes only claim.
    #[test]
    fn a_map_claiming_a_vast_osd_table_is_refused_without_reserving_it() {
        let m = OsdMap::test_cluster(3, 8);
        let mut body = postcard::to_stdvec(&(&m.fsid, m.epoch)).unwrap();
        // postcard's varint of 2^56: the entries' count the table claims.
        body.extend([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]);
        body.extend(postcard::to_stdvec(&m.osds[&0]).unwrap());
        let mut b = MAGIC.to_vec();
        b.extend(body);
        let e = decode_map(&b).unwrap_err();
        assert!(matches!(e, MapError::Decode { .. }), "{e}");
    }
}
