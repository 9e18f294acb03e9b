//! Object -> PG -> OSD placement for one pool, as Ceph's OSDMap computes
//! it: the object-name hash, `stable_mod` to a PG, the placement seed
//! (HASHPSPOOL), the CRUSH rule, then removal of nonexistent and down OSDs.
//!
//! Pure functions over a compiled CRUSH map and an OSD state table; the
//! cluster map crate feeds them. Must stay bit-exact with Ceph.

use crate::compiled::CompiledMap;
use crate::error::{CrushError, Result};
use crate::hash::{hash32_1, hash32_2, stable_mod, stable_mod_mask, str_hash_rjenkins};
use crate::map::ItemId;
use crate::mapper::{MapOptions, Workspace, BALANCE_ONE, ITEM_NONE, MAX_NUM_REP};
use std::fmt;

/// Largest pg_num a pool may have (Ceph's own limit per pool is far lower
/// in practice; this bounds memory in tools that walk every PG).
pub const MAX_PG_NUM: u32 = 1 << 24;

/// The placement parameters of one pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolPlacement {
    pub pool_id: u64,
    pub pg_num: u32,
    pub pgp_num: u32,
    pub size: u32,
    pub crush_rule: i32,
    /// Mix the pool id into the placement seed (Ceph's default flag).
    pub hashpspool: bool,
    /// Erasure pools keep positions (holes become NONE) instead of
    /// shifting replicas up.
    pub erasure: bool,
    /// How a PG seed becomes the CRUSH input.
    pub pps_mode: PpsMode,
    /// Balance parameter for `linear` buckets (16.16, >= 1.0).
    pub balance_param: u32,
}

/// How PG seeds become CRUSH inputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PpsMode {
    /// Ceph's: `crush_hash32_2(ps, pool)` (or `ps + pool` without HASHPSPOOL).
    #[default]
    Rjenkins,
    /// Loligo extension (after the ceph-devel proposal of an optimized
    /// CRUSH with a "linear" bucket): a pool-seeded congruential bijection
    /// of `[0, 2^n)`, so a pool's inputs are a permutation of a contiguous
    /// range (what `linear` buckets need to split evenly).
    Bijection,
}

/// A bijection of `[0, 2^bits)` seeded by the pool id: two affine
/// congruential steps `x -> a*x + c (mod 2^bits)` (a odd) around an
/// xor-shift, each invertible, so distinct seeds give distinct outputs.
/// Above the low `bits` bits it places a pool-specific offset, so that two
/// pools never share CRUSH inputs.
pub fn pps_bijection(ps: u32, bits: u32, pool_id: u64) -> u32 {
    debug_assert!(bits <= 32);
    let mask: u64 = if bits >= 32 {
        u64::from(u32::MAX)
    } else {
        (1u64 << bits) - 1
    };
    let seed = hash32_2(pool_id as u32, (pool_id >> 32) as u32);
    let a1 = u64::from(hash32_1(seed) | 1);
    let c1 = u64::from(hash32_1(seed ^ 0x5bd1_e995));
    let a2 = u64::from(hash32_1(seed ^ 0x2545_f491) | 1);
    let c2 = u64::from(hash32_1(seed ^ 0x9e37_79b9));
    let mut x = u64::from(ps) & mask;
    x = a1.wrapping_mul(x).wrapping_add(c1) & mask;
    x ^= x >> (bits / 2 + 1);
    x = a2.wrapping_mul(x).wrapping_add(c2) & mask;
    let offset = if bits >= 32 {
        0
    } else {
        u64::from(hash32_1(seed ^ 0x1b87_3593)) << bits
    };
    ((offset | x) & 0xffff_ffff) as u32
}

impl PoolPlacement {
    /// Check the parameters; every other method assumes they hold.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(CrushError::Placement(m));
        if self.pg_num == 0 || self.pg_num > MAX_PG_NUM {
            return bad(format!(
                "pg_num {} out of range (1..={MAX_PG_NUM})",
                self.pg_num
            ));
        }
        if self.pgp_num == 0 || self.pgp_num > self.pg_num {
            return bad(format!(
                "pgp_num {} out of range (1..=pg_num {})",
                self.pgp_num, self.pg_num
            ));
        }
        if self.size == 0 || self.size as usize > MAX_NUM_REP {
            return bad(format!(
                "size {} out of range (1..={MAX_NUM_REP})",
                self.size
            ));
        }
        if self.balance_param < BALANCE_ONE {
            return bad(format!(
                "balance_param {:.3} is below 1",
                f64::from(self.balance_param) / 65536.0
            ));
        }
        Ok(())
    }

    /// Object name -> placement seed `ps` of its PG (in `0..pg_num`).
    pub fn object_ps(&self, name: &[u8]) -> u32 {
        let raw = str_hash_rjenkins(name);
        stable_mod(raw, self.pg_num, stable_mod_mask(self.pg_num))
    }

    /// A replicated pool with Ceph's defaults (HASHPSPOOL, rjenkins pps,
    /// pgp_num = pg_num).
    pub fn replicated(pool_id: u64, pg_num: u32, size: u32, crush_rule: i32) -> PoolPlacement {
        PoolPlacement {
            pool_id,
            pg_num,
            pgp_num: pg_num,
            size,
            crush_rule,
            hashpspool: true,
            erasure: false,
            pps_mode: PpsMode::Rjenkins,
            balance_param: BALANCE_ONE,
        }
    }

    /// PG seed -> the CRUSH input (`pps`).
    pub fn pps(&self, ps: u32) -> u32 {
        let mask = stable_mod_mask(self.pgp_num);
        let folded = stable_mod(ps, self.pgp_num, mask);
        if self.pps_mode == PpsMode::Bijection {
            return pps_bijection(folded, mask.count_ones(), self.pool_id);
        }
        if self.hashpspool {
            hash32_2(folded, self.pool_id as u32)
        } else {
            folded.wrapping_add(self.pool_id as u32)
        }
    }
}

/// The PG seed that `ps` folds into when its pool has `pg_num` PGs: its
/// parent once the pool grew past `pg_num` (Ceph's `pg_t::get_parent`
/// chain, in one step). Objects follow: an object whose seed under a
/// larger count is `ps` has seed `ancestor(ps, pg_num)` under `pg_num`.
pub fn ancestor(ps: u32, pg_num: u32) -> u32 {
    stable_mod(ps, pg_num, stable_mod_mask(pg_num))
}

/// The PGs that PG `ps` splits into when its pool grows from `old` to
/// `new` PGs (`ps` itself keeps its seed and is not among them): the new
/// seeds whose objects were `ps`'s.
pub fn split_children(ps: u32, old: u32, new: u32) -> impl Iterator<Item = u32> {
    (old..new).filter(move |&c| ancestor(c, old) == ps)
}

/// A PG id: pool and seed, printed like Ceph (`7.4b`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct PgId {
    pub pool: u64,
    pub ps: u32,
}

impl fmt::Display for PgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:x}", self.pool, self.ps)
    }
}

impl std::str::FromStr for PgId {
    type Err = String;

    /// As printed: the pool in decimal, a dot, the seed in hex (`7.4b`).
    fn from_str(s: &str) -> std::result::Result<PgId, String> {
        let bad = || format!("'{s}' is not a PG id (POOL.SEED, the seed in hex, like 1.1f)");
        let (pool, ps) = s.split_once('.').ok_or_else(bad)?;
        let digits = |t: &str, hex: bool| {
            !t.is_empty()
                && t.chars().all(|c| {
                    if hex {
                        c.is_ascii_hexdigit()
                    } else {
                        c.is_ascii_digit()
                    }
                })
        };
        if !digits(pool, false) || !digits(ps, true) {
            return Err(bad());
        }
        Ok(PgId {
            pool: pool.parse().map_err(|_| bad())?,
            ps: u32::from_str_radix(ps, 16).map_err(|_| bad())?,
        })
    }
}

/// Per-OSD state that placement depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OsdStates {
    /// OSD ids `0..max_osd` can exist.
    pub max_osd: i32,
    pub exists: Vec<bool>,
    pub up: Vec<bool>,
    /// Reweight, 16.16 (0x10000 = in, 0 = out).
    pub weight: Vec<u32>,
}

impl OsdStates {
    /// `max_osd` OSDs, all existing, up and in (osdmaptool `--mark-up-in`).
    pub fn all_up_in(max_osd: i32) -> OsdStates {
        let n = max_osd.max(0) as usize;
        OsdStates {
            max_osd: max_osd.max(0),
            exists: vec![true; n],
            up: vec![true; n],
            weight: vec![0x10000; n],
        }
    }

    fn exists(&self, osd: ItemId) -> bool {
        osd >= 0 && osd < self.max_osd && self.exists.get(osd as usize).copied().unwrap_or(false)
    }

    fn is_up(&self, osd: ItemId) -> bool {
        self.exists(osd) && self.up.get(osd as usize).copied().unwrap_or(false)
    }

    /// Mark an OSD out (reweight 0); it stays up.
    pub fn mark_out(&mut self, osd: i32) -> Result<()> {
        match self.weight.get_mut(osd.max(0) as usize) {
            Some(w) if osd >= 0 => {
                *w = 0;
                Ok(())
            }
            _ => Err(CrushError::Placement(format!(
                "osd.{osd} does not exist (max_osd {})",
                self.max_osd
            ))),
        }
    }

    /// Mark an OSD down.
    pub fn mark_down(&mut self, osd: i32) -> Result<()> {
        match self.up.get_mut(osd.max(0) as usize) {
            Some(u) if osd >= 0 => {
                *u = false;
                Ok(())
            }
            _ => Err(CrushError::Placement(format!("osd.{osd} does not exist"))),
        }
    }
}

/// The raw, up and acting sets of a PG with their primaries (-1 = none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PgMapping {
    pub raw: Vec<ItemId>,
    pub raw_primary: ItemId,
    pub up: Vec<ItemId>,
    pub up_primary: ItemId,
    pub acting: Vec<ItemId>,
    pub acting_primary: ItemId,
}

/// A set as people and PG state machines read it: an empty position
/// (`ITEM_NONE`, as CRUSH and pg_temps hold it) is -1.
pub fn holes_as_minus_one(v: &[ItemId]) -> Vec<ItemId> {
    v.iter()
        .map(|&o| if o == ITEM_NONE { -1 } else { o })
        .collect()
}

fn pick_primary(v: &[ItemId]) -> ItemId {
    v.iter().copied().find(|&o| o != ITEM_NONE).unwrap_or(-1)
}

/// Map PG `ps` of `pool` to its OSD sets.
pub fn map_pg(
    crush: &CompiledMap,
    pool: &PoolPlacement,
    osds: &OsdStates,
    ps: u32,
    ws: &mut Workspace,
) -> Result<PgMapping> {
    map_pg_with_upmap(crush, pool, osds, ps, &[], ws)
}

/// Map PG `ps`, then apply its `pg_upmap_items` (`(from, to)` pairs) as
/// Ceph does: a pair applies when `from` is in the raw set, `to` is not,
/// and `to` exists and is not marked out.
pub fn map_pg_with_upmap(
    crush: &CompiledMap,
    pool: &PoolPlacement,
    osds: &OsdStates,
    ps: u32,
    upmap_items: &[(ItemId, ItemId)],
    ws: &mut Workspace,
) -> Result<PgMapping> {
    let raw = crush_raw(crush, pool, osds, ps, ws)?;
    Ok(finish_mapping(raw, pool, osds, upmap_items))
}

/// The CRUSH step of a PG's mapping: the rule's result, with OSDs that do
/// not exist removed (replicated) or blanked (erasure; an erasure set is
/// padded with blanks to the pool's size). It depends only
/// on the CRUSH map, the pool's placement and the OSDs' existence and
/// reweights, never on which OSDs are up.
pub fn crush_raw(
    crush: &CompiledMap,
    pool: &PoolPlacement,
    osds: &OsdStates,
    ps: u32,
    ws: &mut Workspace,
) -> Result<Vec<ItemId>> {
    let pps = pool.pps(ps);
    let mut raw = Vec::with_capacity(pool.size as usize);
    if crush.has_rule(pool.crush_rule) {
        let opts = MapOptions {
            weights: &osds.weight,
            choose_args: crush.choose_args_for(pool.pool_id as i64),
            balance_param: pool.balance_param,
        };
        crush.do_rule_with(
            pool.crush_rule,
            pps,
            pool.size as usize,
            &opts,
            ws,
            &mut raw,
        )?;
    }
    if pool.erasure {
        for o in raw.iter_mut() {
            if *o != ITEM_NONE && !osds.exists(*o) {
                *o = ITEM_NONE;
            }
        }
        // Position i is shard i: a rule that places fewer than the
        // pool's size leaves the rest blank, never a shorter set.
        raw.resize(pool.size as usize, ITEM_NONE);
    } else {
        raw.retain(|&o| osds.exists(o));
    }
    Ok(raw)
}

/// The rest of a PG's mapping from its [`crush_raw`] set: the upmap items
/// (`(from, to)` pairs), then OSDs that are not up removed (replicated)
/// or blanked (erasure).
pub fn finish_mapping(
    raw: Vec<ItemId>,
    pool: &PoolPlacement,
    osds: &OsdStates,
    upmap_items: &[(ItemId, ItemId)],
) -> PgMapping {
    let mut up = raw.clone();
    for &(from, to) in upmap_items {
        let usable = osds.exists(to) && osds.weight.get(to as usize).is_some_and(|&w| w > 0);
        if usable && !up.contains(&to) {
            if let Some(slot) = up.iter_mut().find(|o| **o == from) {
                *slot = to;
            }
        }
    }
    if pool.erasure {
        for o in up.iter_mut() {
            if *o != ITEM_NONE && !osds.is_up(*o) {
                *o = ITEM_NONE;
            }
        }
    } else {
        up.retain(|&o| osds.is_up(o));
    }
    let m = PgMapping {
        raw_primary: pick_primary(&raw),
        up_primary: pick_primary(&up),
        acting_primary: pick_primary(&up),
        acting: up.clone(),
        raw,
        up,
    };
    debug_assert!(m.up.len() <= pool.size as usize);
    m
}

/// Format an OSD vector as Ceph prints it: `[1,2,3]`.
pub fn format_osds(v: &[ItemId]) -> String {
    let parts: Vec<String> = v.iter().map(|o| o.to_string()).collect();
    format!("[{}]", parts.join(","))
}

/// osdmaptool's `--test-map-object` line: ` object 'NAME' -> 7.4b -> [a,b,c]`.
pub fn object_line(name: &str, pg: PgId, acting: &[ItemId]) -> String {
    format!(" object '{name}' -> {pg} -> {}", format_osds(acting))
}

/// osdmaptool's `--test-map-pgs-dump-all` line for one PG.
pub fn pg_dump_line(pg: PgId, m: &PgMapping) -> String {
    format!(
        "{pg} raw ({}, p{}) up ({}, p{}) acting ({}, p{})",
        format_osds(&m.raw),
        m.raw_primary,
        format_osds(&m.up),
        m.up_primary,
        format_osds(&m.acting),
        m.acting_primary
    )
}

#[cfg(test)]
mod tests {
    use super::{ancestor, split_children, PgId};

    /// Splitting is consistent: an object's seed under a larger count
    /// folds back to its seed under a smaller one (so a PG's objects go
    /// only to its children, for any counts, powers of two or not), and
    /// the children of the PGs under `old` are exactly the new seeds.
    #[test]
    fn objects_split_into_the_children_of_their_pg() {
        let counts = [1u32, 2, 3, 5, 8, 12, 16, 24, 32, 100, 128, 1000];
        let mut h = 0x9e37_79b9u32;
        for &old in &counts {
            for &new in counts.iter().filter(|&&n| n >= old) {
                for _ in 0..2000 {
                    h ^= h << 13;
                    h ^= h >> 17;
                    h ^= h << 5;
                    let (o, n) = (ancestor(h, old), ancestor(h, new));
                    assert_eq!(ancestor(n, old), o, "hash {h:x}: {old} -> {new}");
                    assert!(n == o || split_children(o, old, new).any(|c| c == n));
                }
                let mut all: Vec<u32> =
                    (0..old).flat_map(|p| split_children(p, old, new)).collect();
                all.sort_unstable();
                assert_eq!(all, (old..new).collect::<Vec<_>>(), "{old} -> {new}");
            }
        }
        assert_eq!(split_children(1, 4, 16).collect::<Vec<_>>(), vec![5, 9, 13]);
    }

    #[test]
    fn pg_ids_parse_as_they_print() {
        for pg in [
            PgId { pool: 1, ps: 0 },
            PgId { pool: 7, ps: 0x4b },
            PgId {
                pool: u64::MAX,
                ps: u32::MAX,
            },
        ] {
            assert_eq!(pg.to_string().parse::<PgId>(), Ok(pg));
        }
        assert_eq!("1.1F".parse::<PgId>(), Ok(PgId { pool: 1, ps: 0x1f }));
        for bad in [
            "",
            "1",
            "1.",
            ".1",
            "x.1",
            "1.g",
            "1.1.1",
            "-1.1",
            "1.+1",
            "1.100000000",
        ] {
            assert!(bad.parse::<PgId>().is_err(), "{bad:?}");
        }
    }
}
