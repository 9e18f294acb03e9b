//! Every PG's placement under one map, carried from epoch to epoch
//! (Ceph's OSDMapMapping, kept up to date instead of rebuilt). What is
//! kept per PG is its CRUSH step ([`crush_raw`]): it depends only on the
//! CRUSH map, the pools' placement and the OSDs' existence and reweights.
//! The rest of a mapping (upmap items, which OSDs are up, pg_temp,
//! primary_temp) is cheap and made from the map when asked.
//!
//! So a new map that leaves CRUSH's inputs alone (OSDs marked down or
//! booting again, overrides, write sets, users: most epochs) costs the
//! PGs it can move, found through an index from each OSD to the PGs
//! whose CRUSH step names it; one that changes them costs a full pass,
//! as building does.
//!
//! Pure: no I/O. It must never answer a mapping that differs from
//! [`crate::Placer::map_pg`] on the same map (a test holds them equal
//! over random sequences of changes).

use crate::error::Result;
use crate::osdmap::OsdMap;
use loligo_crush::placement::{
    crush_raw, finish_mapping, OsdStates, PgId, PgMapping, PoolPlacement,
};
use loligo_crush::{CompiledMap, CrushMap, Workspace, ITEM_NONE};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// One pool's CRUSH steps: `width` slots per PG (its size; a replicated
/// PG with fewer OSDs pads with `ITEM_NONE`).
struct PoolRaw {
    /// The placement the sets were computed with.
    placement: PoolPlacement,
    width: usize,
    sets: Vec<i32>,
}

impl PoolRaw {
    fn raw(&self, ps: u32, erasure: bool) -> Vec<i32> {
        let at = ps as usize * self.width;
        let slots = self.sets.get(at..at + self.width).unwrap_or(&[]);
        if erasure {
            slots.to_vec()
        } else {
            slots.iter().copied().filter(|&o| o != ITEM_NONE).collect()
        }
    }
}

/// What a new map changed, for those who act per PG.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Changed {
    /// Any PG's mapping may differ (CRUSH's inputs changed).
    All,
    /// Only these PGs' mappings may differ (sorted, once each).
    Pgs(Vec<PgId>),
}

impl Changed {
    /// How many PGs it names (`usize::MAX` for all).
    pub fn len(&self) -> usize {
        match self {
            Changed::All => usize::MAX,
            Changed::Pgs(v) => v.len(),
        }
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        matches!(self, Changed::Pgs(v) if v.is_empty())
    }
}

/// Every PG's CRUSH step under one map, and the index from OSDs to the
/// PGs whose step names them.
pub struct PgMappings {
    epoch: u64,
    crush: Arc<CrushMap>,
    compiled: CompiledMap,
    /// Existence and reweights (CRUSH's inputs), and who was up.
    states: OsdStates,
    pools: BTreeMap<u64, PoolRaw>,
    /// OSD id -> PGs whose CRUSH step names it (empty without `indexed`).
    by_osd: Vec<Vec<PgId>>,
    indexed: bool,
    /// The map's per-PG overrides (small: PGs being recovered or moved
    /// by hand), to tell which a new map changed.
    pg_temp: BTreeMap<PgId, Vec<i32>>,
    primary_temp: BTreeMap<PgId, i32>,
    upmap: BTreeMap<PgId, Vec<(i32, i32)>>,
}

/// The keys whose values differ between `a` and `b` (in either only, or
/// in both with other values).
fn differ<V: PartialEq>(a: &BTreeMap<PgId, V>, b: &BTreeMap<PgId, V>, out: &mut BTreeSet<PgId>) {
    for (k, v) in a {
        if b.get(k) != Some(v) {
            out.insert(*k);
        }
    }
    for k in b.keys() {
        if !a.contains_key(k) {
            out.insert(*k);
        }
    }
}

impl PgMappings {
    /// Every PG of `map`, computed.
    pub fn new(map: &OsdMap) -> Result<PgMappings> {
        Self::build(map, true)
    }

    /// Every PG of `map`, computed, without the index from OSDs to PGs
    /// (a quarter of the memory): for readers that never advance, such as
    /// a client's routing table. [`PgMappings::advance`] on these builds
    /// indexed mappings again.
    pub fn unindexed(map: &OsdMap) -> Result<PgMappings> {
        Self::build(map, false)
    }

    fn build(map: &OsdMap, indexed: bool) -> Result<PgMappings> {
        let compiled = CompiledMap::compile(&map.crush)?;
        let mut m = PgMappings {
            epoch: map.epoch,
            crush: map.crush.clone(),
            compiled,
            states: map.osd_states(),
            pools: BTreeMap::new(),
            by_osd: Vec::new(),
            indexed,
            pg_temp: map.pg_temp.clone(),
            primary_temp: map.primary_temp.clone(),
            upmap: map.pg_upmap_items.clone(),
        };
        if indexed {
            m.by_osd = vec![Vec::new(); m.states.max_osd.max(0) as usize];
        }
        let mut ws = Workspace::new(&m.compiled);
        for id in map.pools.keys().copied().collect::<Vec<_>>() {
            m.compute_pool(map, id, &mut ws)?;
        }
        Ok(m)
    }

    /// The map epoch these mappings are of.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// PG `pg`'s mapping under `map`, which must be the map these
    /// mappings were built or last advanced with (`None`: no such PG).
    pub fn mapping(&self, map: &OsdMap, pg: PgId) -> Option<PgMapping> {
        self.mapping_in(map, &self.states, pg)
    }

    /// Whether these mappings' CRUSH steps hold for `map` (whose OSD
    /// states are `states`): the same CRUSH map, OSDs, reweights and
    /// pools. Then [`PgMappings::mapping_in`] answers for `map` without
    /// advancing, so one set of steps can serve many epochs' readers.
    pub fn crush_steps_hold(&self, map: &OsdMap, states: &OsdStates) -> bool {
        states.max_osd == self.states.max_osd
            && states.exists == self.states.exists
            && states.weight == self.states.weight
            && map.pools.len() == self.pools.len()
            && map.pools.iter().all(|(id, p)| {
                self.pools
                    .get(id)
                    .is_some_and(|r| r.placement == p.placement())
            })
            && map.crush == self.crush
    }

    /// PG `pg`'s mapping under `map`, whose OSD states are `states`; the
    /// CRUSH steps must hold for it ([`PgMappings::crush_steps_hold`]).
    pub fn mapping_in(&self, map: &OsdMap, states: &OsdStates, pg: PgId) -> Option<PgMapping> {
        let pool = map.pools.get(&pg.pool)?;
        if pg.ps >= pool.pg_num {
            return None;
        }
        let placement = pool.placement();
        let raw = self.pools.get(&pg.pool)?.raw(pg.ps, placement.erasure);
        let upmap = map
            .pg_upmap_items
            .get(&pg)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let mut m = finish_mapping(raw, &placement, states, upmap);
        map.apply_overrides(pg, placement.erasure, &mut m);
        Some(m)
    }

    /// The PGs whose CRUSH step names OSD `osd`.
    pub fn pgs_of(&self, osd: i32) -> &[PgId] {
        usize::try_from(osd)
            .ok()
            .and_then(|i| self.by_osd.get(i))
            .map_or(&[], Vec::as_slice)
    }

    /// Bytes these mappings hold on the heap (about).
    pub fn heap_bytes(&self) -> usize {
        let sets: usize = self.pools.values().map(|p| p.sets.capacity() * 4).sum();
        let index: usize = self
            .by_osd
            .iter()
            .map(|v| v.capacity() * std::mem::size_of::<PgId>() + 24)
            .sum();
        sets + index + self.states.exists.len() * 6
    }

    /// Move to `new`, a later map than these mappings' (any number of
    /// epochs later): the PGs whose mapping may have changed.
    pub fn advance(&mut self, new: &OsdMap) -> Result<Changed> {
        let states = new.osd_states();
        let crush_same = states.max_osd == self.states.max_osd
            && states.exists == self.states.exists
            && states.weight == self.states.weight
            && new.crush == self.crush;
        if !crush_same || !self.indexed {
            *self = PgMappings::new(new)?;
            return Ok(Changed::All);
        }
        let mut changed: BTreeSet<PgId> = BTreeSet::new();
        // Pools made, dropped or changed: computed again, all their PGs.
        let mut ws = None;
        let old_pools: Vec<u64> = self.pools.keys().copied().collect();
        for id in old_pools {
            if !new.pools.contains_key(&id) {
                self.drop_pool(id);
            }
        }
        for (id, p) in &new.pools {
            let same = self
                .pools
                .get(id)
                .is_some_and(|r| r.placement == p.placement());
            if !same {
                let ws = ws.get_or_insert_with(|| Workspace::new(&self.compiled));
                self.drop_pool(*id);
                self.compute_pool(new, *id, ws)?;
                changed.extend((0..p.pg_num).map(|ps| PgId { pool: *id, ps }));
            }
        }
        // OSDs that went up or down: the PGs whose sets name them, in
        // CRUSH's step, an upmap item, a pg_temp or a primary_temp.
        let flipped: Vec<i32> = (0..states.up.len())
            .filter(|&i| states.up.get(i) != self.states.up.get(i))
            .map(|i| i as i32)
            .collect();
        for &o in &flipped {
            changed.extend(self.pgs_of(o).iter().copied());
        }
        let names = |v: &[i32]| v.iter().any(|o| flipped.binary_search(o).is_ok());
        for (pg, t) in &new.pg_temp {
            if names(t) {
                changed.insert(*pg);
            }
        }
        for (pg, p) in &new.primary_temp {
            if names(&[*p]) {
                changed.insert(*pg);
            }
        }
        for (pg, items) in &new.pg_upmap_items {
            if items.iter().any(|(a, b)| names(&[*a, *b])) {
                changed.insert(*pg);
            }
        }
        // Overrides set, changed or cleared.
        differ(&self.pg_temp, &new.pg_temp, &mut changed);
        differ(&self.primary_temp, &new.primary_temp, &mut changed);
        differ(&self.upmap, &new.pg_upmap_items, &mut changed);
        if self.pg_temp != new.pg_temp {
            self.pg_temp = new.pg_temp.clone();
        }
        if self.primary_temp != new.primary_temp {
            self.primary_temp = new.primary_temp.clone();
        }
        if self.upmap != new.pg_upmap_items {
            self.upmap = new.pg_upmap_items.clone();
        }
        // (A PG of a pool dropped since is no longer anyone's.)
        changed.retain(|pg| new.pool_of(*pg).is_ok());
        self.states = states;
        self.epoch = new.epoch;
        Ok(Changed::Pgs(changed.into_iter().collect()))
    }

    fn drop_pool(&mut self, id: u64) {
        if let Some(r) = self.pools.remove(&id) {
            let osds: BTreeSet<i32> = r.sets.iter().copied().filter(|&o| o >= 0).collect();
            for o in osds {
                if let Some(v) = usize::try_from(o).ok().and_then(|i| self.by_osd.get_mut(i)) {
                    v.retain(|pg| pg.pool != id);
                }
            }
        }
    }

    fn compute_pool(&mut self, map: &OsdMap, id: u64, ws: &mut Workspace) -> Result<()> {
        let Some(pool) = map.pools.get(&id) else {
            return Ok(());
        };
        let placement = pool.placement();
        let width = pool.size as usize;
        let mut sets = vec![ITEM_NONE; pool.pg_num as usize * width];
        for ps in 0..pool.pg_num {
            let raw = crush_raw(&self.compiled, &placement, &self.states, ps, ws)?;
            let at = ps as usize * width;
            for (slot, &o) in sets[at..at + width].iter_mut().zip(&raw) {
                *slot = o;
                if let Some(v) = usize::try_from(o).ok().and_then(|i| self.by_osd.get_mut(i)) {
                    v.push(PgId { pool: id, ps });
                }
            }
        }
        self.pools.insert(
            id,
            PoolRaw {
                placement,
                width,
                sets,
            },
        );
        Ok(())
    }
}
