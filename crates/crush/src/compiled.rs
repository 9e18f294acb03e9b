//! A validated CRUSH map in the shape the mapper evaluates: buckets indexed
//! by `-1 - id` (device-class shadow trees included), per-algorithm derived
//! data (straw lengths, tree node weights, list prefix sums), rules with
//! resolved class takes, and choose_args weight sets.
//!
//! `CompiledMap` can only be built by [`CompiledMap::compile`], which checks
//! every invariant the mapper relies on, so the mapper never indexes out of
//! bounds or loops on a malformed map. It must never change mapping results
//! relative to Ceph for a map Ceph accepts.

use crate::error::{invalid, Result};
use crate::map::{BucketAlg, ChooseMode, CrushMap, ItemId, Step, Tunables};
use crate::mapper::Recip;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Largest number of buckets a map may hold (Ceph's ids are 32-bit; this
/// bound keeps the index tables small and is far above real clusters).
pub const MAX_BUCKETS: usize = 1 << 20;
/// Largest device id + 1 a map may use.
pub const MAX_DEVICES: i32 = 1 << 24;
/// Deepest hierarchy accepted (Ceph's maps rarely exceed 6 levels).
pub const MAX_DEPTH: usize = 64;
/// Largest retry count a tunable or `set_*` step may ask for. Real maps use
/// at most a few hundred; the bound keeps a hostile map from making one
/// mapping spin for minutes.
pub const MAX_TRIES: u32 = 10_000;
/// `chooseleaf_vary_r` shifts r by `vary_r - 1`; larger values are
/// meaningless (and undefined behaviour in Ceph's C).
pub const MAX_VARY_R: u32 = 32;

/// Largest `choose ... <count>` accepted (positive or negative).
pub const MAX_STEP_COUNT: u32 = 256;

fn check_tunables(t: &Tunables) -> Result<()> {
    for (name, v) in t.named() {
        let limit = match name {
            "chooseleaf_vary_r" => MAX_VARY_R,
            "allowed_bucket_algs" => u32::MAX,
            _ => MAX_TRIES,
        };
        if v > limit {
            return invalid(format!(
                "tunable {name} {v} is above the supported maximum {limit}"
            ));
        }
    }
    Ok(())
}

/// Per-algorithm data derived from item weights.
#[derive(Clone, Debug)]
pub(crate) enum AlgData {
    Uniform,
    List { sum_weights: Vec<u32> },
    Tree { node_weights: Vec<u32> },
    Straw { straws: Vec<u32> },
    Straw2,
    Linear,
}

/// A bucket ready for the mapper.
#[derive(Clone, Debug)]
pub(crate) struct CBucket {
    pub id: ItemId,
    pub type_id: i32,
    pub alg: AlgData,
    pub items: Vec<ItemId>,
    pub item_weights: Vec<u32>,
    /// Division helpers for `item_weights` (straw2 only; empty otherwise).
    pub recips: Vec<Recip>,
    pub weight: u32,
    /// Name, for tools (shadow buckets are `name~class`).
    pub name: String,
}

impl CBucket {
    pub fn alg_kind(&self) -> BucketAlg {
        match self.alg {
            AlgData::Uniform => BucketAlg::Uniform,
            AlgData::List { .. } => BucketAlg::List,
            AlgData::Tree { .. } => BucketAlg::Tree,
            AlgData::Straw { .. } => BucketAlg::Straw,
            AlgData::Straw2 => BucketAlg::Straw2,
            AlgData::Linear => BucketAlg::Linear,
        }
    }
}

/// A rule step with every reference resolved.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CStep {
    Take(ItemId),
    Choose {
        leaf: bool,
        firstn: bool,
        count: i32,
        type_id: i32,
    },
    Emit,
    SetChooseTries(i32),
    SetChooseleafTries(i32),
    SetChooseLocalTries(i32),
    SetChooseLocalFallbackTries(i32),
    SetChooseleafVaryR(i32),
    SetChooseleafStable(i32),
}

/// A compiled choose_args entry for one bucket.
#[derive(Clone, Debug, Default)]
pub(crate) struct CArg {
    pub weight_set: Vec<Vec<u32>>,
    /// Division helpers, one per weight in `weight_set`.
    pub recips: Vec<Vec<Recip>>,
    pub ids: Option<Vec<ItemId>>,
}

/// A weight set: one optional entry per bucket index.
#[derive(Clone, Debug, Default)]
pub struct ChooseArgMap {
    pub(crate) args: Vec<Option<CArg>>,
}

/// A validated map, ready for `do_rule`.
#[derive(Clone, Debug)]
pub struct CompiledMap {
    pub(crate) tunables: Tunables,
    pub(crate) max_devices: i32,
    pub(crate) device_exists: Vec<bool>,
    pub(crate) buckets: Vec<Option<CBucket>>,
    pub(crate) rules: BTreeMap<i32, Vec<CStep>>,
    pub(crate) choose_args: BTreeMap<i64, ChooseArgMap>,
    pub(crate) source: CrushMap,
}

/// The index of a bucket id in `buckets` (`-1 - id`), if it is a bucket id.
#[inline]
pub(crate) fn bucket_index(id: ItemId) -> Option<usize> {
    if id < 0 {
        Some((-1 - i64::from(id)) as usize)
    } else {
        None
    }
}

impl CompiledMap {
    /// Validate `map` and derive everything the mapper needs.
    pub fn compile(map: &CrushMap) -> Result<CompiledMap> {
        check_tunables(&map.tunables)?;
        let devices = check_devices(map)?;
        let types: BTreeSet<i32> = map.types.iter().map(|t| t.id).collect();
        let mut by_id: BTreeMap<ItemId, usize> = BTreeMap::new();
        let mut names: BTreeSet<&str> = map.devices.iter().map(|d| d.name.as_str()).collect();
        for (i, b) in map.buckets.iter().enumerate() {
            if b.id >= 0 {
                return invalid(format!("bucket {} has non-negative id {}", b.name, b.id));
            }
            if by_id.insert(b.id, i).is_some() {
                return invalid(format!("bucket id {} is used twice", b.id));
            }
            if !names.insert(b.name.as_str()) {
                return invalid(format!("name {} is used twice", b.name));
            }
            if b.hash != 0 {
                return invalid(format!("bucket {}: unknown hash {}", b.name, b.hash));
            }
            if b.type_id != 0 && !types.contains(&b.type_id) {
                return invalid(format!("bucket {}: unknown type id {}", b.name, b.type_id));
            }
            for it in &b.items {
                if it.id >= 0 && !devices.contains_key(&it.id) {
                    return invalid(format!("bucket {}: item {} is not a device", b.name, it.id));
                }
            }
        }
        for b in &map.buckets {
            for it in &b.items {
                if it.id < 0 && !by_id.contains_key(&it.id) {
                    return invalid(format!("bucket {}: item {} does not exist", b.name, it.id));
                }
            }
        }
        check_acyclic(map, &by_id)?;

        let mut slots: Vec<Option<CBucket>> = Vec::new();
        for b in &map.buckets {
            let items: Vec<ItemId> = b.items.iter().map(|i| i.id).collect();
            let weights: Vec<u32> = b.items.iter().map(|i| i.weight).collect();
            let cb = make_bucket(
                b.id,
                &b.name,
                b.type_id,
                b.alg,
                items,
                weights,
                map.tunables.straw_calc_version,
            )?;
            put_bucket(&mut slots, cb)?;
        }
        build_shadow_trees(map, &by_id, &devices, &mut slots)?;

        let mut compiled = CompiledMap {
            tunables: map.tunables,
            max_devices: map.max_devices(),
            device_exists: {
                let mut v = vec![false; map.max_devices() as usize];
                for d in &map.devices {
                    v[d.id as usize] = true;
                }
                v
            },
            buckets: slots,
            rules: BTreeMap::new(),
            choose_args: BTreeMap::new(),
            source: map.clone(),
        };
        compiled.rules = compile_rules(map, &compiled)?;
        compiled.choose_args = compile_choose_args(map, &compiled)?;
        Ok(compiled)
    }

    /// The map this was compiled from.
    pub fn source(&self) -> &CrushMap {
        &self.source
    }

    /// Tunables in force.
    pub fn tunables(&self) -> &Tunables {
        &self.tunables
    }

    /// `max_devices` (largest device id + 1).
    pub fn max_devices(&self) -> i32 {
        self.max_devices
    }

    /// Whether a device id is declared in the map.
    pub fn device_exists(&self, id: i32) -> bool {
        id >= 0
            && self
                .device_exists
                .get(id as usize)
                .copied()
                .unwrap_or(false)
    }

    /// Ids of all rules.
    pub fn rule_ids(&self) -> impl Iterator<Item = i32> + '_ {
        self.rules.keys().copied()
    }

    /// Whether the rule exists.
    pub fn has_rule(&self, id: i32) -> bool {
        self.rules.contains_key(&id)
    }

    pub(crate) fn bucket(&self, id: ItemId) -> Option<&CBucket> {
        bucket_index(id)
            .and_then(|i| self.buckets.get(i))
            .and_then(|b| b.as_ref())
    }

    /// All buckets, shadow ones included: `(id, name, type id, alg, items
    /// with weights)`. For tools and tests.
    pub fn bucket_summaries(&self) -> Vec<BucketSummary> {
        self.buckets
            .iter()
            .flatten()
            .map(|b| BucketSummary {
                id: b.id,
                name: b.name.clone(),
                type_id: b.type_id,
                alg: b.alg_kind(),
                weight: b.weight,
                items: b
                    .items
                    .iter()
                    .copied()
                    .zip(b.item_weights.iter().copied())
                    .collect(),
            })
            .collect()
    }

    /// The weight set Ceph's tools use for a pool: index `pool` if the map
    /// has it, else the compat set (-1), else none.
    pub fn choose_args_for(&self, index: i64) -> Option<&ChooseArgMap> {
        self.choose_args
            .get(&index)
            .or_else(|| self.choose_args.get(&crate::map::CHOOSE_ARGS_COMPAT))
    }

    /// The choose_args set with exactly this index.
    pub fn choose_args_exact(&self, index: i64) -> Option<&ChooseArgMap> {
        self.choose_args.get(&index)
    }
}

/// A read-only view of a compiled bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketSummary {
    pub id: ItemId,
    pub name: String,
    pub type_id: i32,
    pub alg: BucketAlg,
    pub weight: u32,
    pub items: Vec<(ItemId, u32)>,
}

fn check_devices(map: &CrushMap) -> Result<BTreeMap<ItemId, Option<&str>>> {
    let mut devices = BTreeMap::new();
    for d in &map.devices {
        if d.id < 0 || d.id >= MAX_DEVICES {
            return invalid(format!("device {} has id {} out of range", d.name, d.id));
        }
        if devices.insert(d.id, d.class.as_deref()).is_some() {
            return invalid(format!("device id {} is used twice", d.id));
        }
    }
    Ok(devices)
}

fn check_acyclic(map: &CrushMap, by_id: &BTreeMap<ItemId, usize>) -> Result<()> {
    // 0 = unvisited, 1 = on the stack, 2 = done.
    let mut state = vec![0u8; map.buckets.len()];
    for start in 0..map.buckets.len() {
        if state[start] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        state[start] = 1;
        while let Some(&mut (b, ref mut next)) = stack.last_mut() {
            let items = &map.buckets[b].items;
            if *next >= items.len() {
                state[b] = 2;
                stack.pop();
                continue;
            }
            let child = items[*next].id;
            *next += 1;
            let Some(&c) = by_id.get(&child) else {
                continue;
            };
            match state[c] {
                1 => {
                    return invalid(format!(
                        "cycle: bucket {} contains its ancestor {}",
                        map.buckets[b].name, map.buckets[c].name
                    ))
                }
                0 => {
                    if stack.len() >= MAX_DEPTH {
                        return invalid(format!("hierarchy deeper than {MAX_DEPTH} levels"));
                    }
                    state[c] = 1;
                    stack.push((c, 0));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

fn put_bucket(slots: &mut Vec<Option<CBucket>>, b: CBucket) -> Result<()> {
    let Some(idx) = bucket_index(b.id) else {
        return invalid(format!("bucket id {} is not negative", b.id));
    };
    if idx >= MAX_BUCKETS {
        return invalid(format!("bucket id {} is below the supported range", b.id));
    }
    if slots.len() <= idx {
        slots.resize(idx + 1, None);
    }
    if slots[idx].is_some() {
        return invalid(format!("bucket id {} is used twice", b.id));
    }
    slots[idx] = Some(b);
    Ok(())
}

/// Build a compiled bucket, deriving the per-algorithm data exactly as
/// Ceph's builder does.
pub(crate) fn make_bucket(
    id: ItemId,
    name: &str,
    type_id: i32,
    alg: BucketAlg,
    items: Vec<ItemId>,
    item_weights: Vec<u32>,
    straw_calc_version: u32,
) -> Result<CBucket> {
    debug_assert_eq!(items.len(), item_weights.len());
    let mut weight: u32 = 0;
    for &w in &item_weights {
        weight = weight.checked_add(w).ok_or_else(|| {
            crate::CrushError::Invalid(format!("bucket {name}: weight overflows"))
        })?;
    }
    let data = match alg {
        BucketAlg::Uniform => {
            if let Some(&first) = item_weights.first() {
                if item_weights.iter().any(|&w| w != first) {
                    return invalid(format!("uniform bucket {name} has unequal item weights"));
                }
            }
            AlgData::Uniform
        }
        BucketAlg::List => {
            let mut acc = 0u32;
            let sums = item_weights
                .iter()
                .map(|&w| {
                    acc += w;
                    acc
                })
                .collect();
            AlgData::List { sum_weights: sums }
        }
        BucketAlg::Tree => AlgData::Tree {
            node_weights: tree_node_weights(&item_weights),
        },
        BucketAlg::Straw => AlgData::Straw {
            straws: straw_lengths(&item_weights, straw_calc_version),
        },
        BucketAlg::Straw2 => AlgData::Straw2,
        BucketAlg::Linear => AlgData::Linear,
    };
    let recips = if alg == BucketAlg::Straw2 {
        item_weights.iter().map(|&w| Recip::new(w)).collect()
    } else {
        Vec::new()
    };
    Ok(CBucket {
        id,
        type_id,
        recips,
        alg: data,
        items,
        item_weights,
        weight,
        name: name.to_string(),
    })
}

/// Height of a tree node label: the number of trailing zero bits.
pub(crate) fn tree_height(n: u32) -> u32 {
    n.trailing_zeros()
}

/// Node weights of a tree bucket: leaves at odd labels `2i + 1`, each inner
/// node the sum of its subtree; the root is `num_nodes / 2`.
fn tree_node_weights(weights: &[u32]) -> Vec<u32> {
    let size = weights.len() as u32;
    if size == 0 {
        return Vec::new();
    }
    // depth = 1 + number of bits of (size - 1)
    let depth = 1 + (32 - (size - 1).leading_zeros());
    let num_nodes = 1usize << depth;
    let mut nw = vec![0u32; num_nodes];
    for (i, &w) in weights.iter().enumerate() {
        let mut node = ((i as u32 + 1) << 1) - 1;
        nw[node as usize] = w;
        for _ in 1..depth {
            let h = tree_height(node);
            // Right children have bit h+1 set.
            node = if node & (1 << (h + 1)) != 0 {
                node - (1 << h)
            } else {
                node + (1 << h)
            };
            nw[node as usize] = nw[node as usize].wrapping_add(w);
        }
    }
    nw
}

/// Straw (v1) lengths, Ceph's `crush_calc_straw` for both calc versions.
/// The floating-point steps follow Ceph's order of operations exactly.
fn straw_lengths(weights: &[u32], version: u32) -> Vec<u32> {
    let size = weights.len();
    let mut straws = vec![0u32; size];
    // Indices sorted by ascending weight, ties in index order (insertion sort).
    let mut reverse: Vec<usize> = Vec::with_capacity(size);
    for i in 0..size {
        let pos = reverse
            .iter()
            .position(|&r| weights[i] < weights[r])
            .unwrap_or(reverse.len());
        reverse.insert(pos, i);
    }
    let mut numleft = size as i64;
    let mut straw = 1.0f64;
    let mut wbelow = 0.0f64;
    let mut lastw = 0.0f64;
    let mut i = 0usize;
    while i < size {
        let wi = weights[reverse[i]];
        if version == 0 {
            if wi == 0 {
                straws[reverse[i]] = 0;
                i += 1;
                continue;
            }
            straws[reverse[i]] = (straw * 65536.0) as u32;
            i += 1;
            if i == size {
                break;
            }
            if weights[reverse[i]] == weights[reverse[i - 1]] {
                continue;
            }
            wbelow += (f64::from(weights[reverse[i - 1]]) - lastw) * numleft as f64;
            for j in i..size {
                if weights[reverse[j]] == weights[reverse[i]] {
                    numleft -= 1;
                } else {
                    break;
                }
            }
            let wnext = (numleft as u64 * u64::from(weights[reverse[i]] - weights[reverse[i - 1]]))
                as u32 as f64;
            let pbelow = wbelow / (wbelow + wnext);
            straw *= (1.0 / pbelow).powf(1.0 / numleft as f64);
            lastw = f64::from(weights[reverse[i - 1]]);
        } else {
            if wi == 0 {
                straws[reverse[i]] = 0;
                i += 1;
                numleft -= 1;
                continue;
            }
            straws[reverse[i]] = (straw * 65536.0) as u32;
            i += 1;
            if i == size {
                break;
            }
            wbelow += (f64::from(weights[reverse[i - 1]]) - lastw) * numleft as f64;
            numleft -= 1;
            let wnext = (numleft as u64 * u64::from(weights[reverse[i]] - weights[reverse[i - 1]]))
                as u32 as f64;
            let pbelow = wbelow / (wbelow + wnext);
            straw *= (1.0 / pbelow).powf(1.0 / numleft as f64);
            lastw = f64::from(weights[reverse[i - 1]]);
        }
    }
    straws
}

/// Build `bucket~class` shadow copies for every root and every device class,
/// depth first, as Ceph's `populate_classes` does. Ids come from the map's
/// `id N class C` lines; missing ones get the lowest free negative id.
fn build_shadow_trees(
    map: &CrushMap,
    by_id: &BTreeMap<ItemId, usize>,
    devices: &BTreeMap<ItemId, Option<&str>>,
    slots: &mut Vec<Option<CBucket>>,
) -> Result<()> {
    // Classes in order of first appearance among devices (Ceph numbers
    // classes as it meets them), then iterated by that number.
    let mut classes: Vec<&str> = Vec::new();
    for d in &map.devices {
        if let Some(c) = d.class.as_deref() {
            if !classes.contains(&c) {
                classes.push(c);
            }
        }
    }
    // A class named only by buckets (no device has it yet) still gets
    // (empty) shadow trees, as in Ceph.
    for b in &map.buckets {
        for c in b.class_ids.keys() {
            if !classes.contains(&c.as_str()) {
                classes.push(c.as_str());
            }
        }
    }
    if classes.is_empty() {
        return Ok(());
    }
    let mut children: BTreeSet<ItemId> = BTreeSet::new();
    for b in &map.buckets {
        for it in &b.items {
            if it.id < 0 {
                children.insert(it.id);
            }
        }
    }
    // Roots, most negative id first (Ceph iterates a std::set<int>).
    let roots: Vec<ItemId> = by_id
        .keys()
        .copied()
        .filter(|id| !children.contains(id))
        .collect();
    let mut done: HashMap<(ItemId, usize), ItemId> = HashMap::new();
    for root in roots {
        for ci in 0..classes.len() {
            // Like Ceph, a tree that cannot be cloned (a uniform bucket
            // cannot take class-filtered items) simply has no shadow copy;
            // a rule that takes it by class is then refused.
            let _ = clone_for_class(map, by_id, devices, slots, &classes, root, ci, &mut done);
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn clone_for_class(
    map: &CrushMap,
    by_id: &BTreeMap<ItemId, usize>,
    devices: &BTreeMap<ItemId, Option<&str>>,
    slots: &mut Vec<Option<CBucket>>,
    classes: &[&str],
    orig: ItemId,
    ci: usize,
    done: &mut HashMap<(ItemId, usize), ItemId>,
) -> Result<ItemId> {
    if let Some(&id) = done.get(&(orig, ci)) {
        return Ok(id);
    }
    let Some(&bi) = by_id.get(&orig) else {
        return invalid(format!("bucket {orig} does not exist"));
    };
    let b = &map.buckets[bi];
    let class = classes[ci];
    let mut items = Vec::new();
    let mut weights = Vec::new();
    for it in &b.items {
        if it.id >= 0 {
            if devices.get(&it.id).copied().flatten() == Some(class) {
                items.push(it.id);
                weights.push(it.weight);
            }
        } else {
            let child = clone_for_class(map, by_id, devices, slots, classes, it.id, ci, done)?;
            let w = bucket_index(child)
                .and_then(|i| slots.get(i))
                .and_then(|s| s.as_ref())
                .map(|c| c.weight)
                .unwrap_or(0);
            items.push(child);
            weights.push(w);
        }
    }
    if b.alg == BucketAlg::Uniform && !items.is_empty() {
        return invalid(format!(
            "uniform bucket {} cannot have a class shadow",
            b.name
        ));
    }
    let id = match b.class_ids.get(class) {
        Some(&id) => id,
        None => {
            let mut id = -1;
            while bucket_index(id)
                .and_then(|i| slots.get(i))
                .is_some_and(|s| s.is_some())
                || by_id.contains_key(&id)
                || map
                    .buckets
                    .iter()
                    .any(|x| x.class_ids.values().any(|&v| v == id))
            {
                id -= 1;
            }
            id
        }
    };
    let name = format!("{}~{}", b.name, class);
    let cb = make_bucket(
        id,
        &name,
        b.type_id,
        b.alg,
        items,
        weights,
        map.tunables.straw_calc_version,
    )?;
    put_bucket(slots, cb)?;
    done.insert((orig, ci), id);
    Ok(id)
}

fn compile_rules(map: &CrushMap, cm: &CompiledMap) -> Result<BTreeMap<i32, Vec<CStep>>> {
    let mut rules = BTreeMap::new();
    let types: BTreeSet<i32> = map.types.iter().map(|t| t.id).collect();
    for r in &map.rules {
        if r.id < 0 {
            return invalid(format!("rule {}: negative id {}", r.name, r.id));
        }
        let mut steps = Vec::with_capacity(r.steps.len());
        for s in &r.steps {
            steps.push(match s {
                Step::Take { item, class } => {
                    let exists = if *item >= 0 {
                        cm.device_exists(*item)
                    } else {
                        cm.bucket(*item).is_some()
                    };
                    if !exists {
                        return invalid(format!("rule {}: take of unknown item {item}", r.name));
                    }
                    match class {
                        None => CStep::Take(*item),
                        Some(c) => {
                            let shadow = map
                                .bucket(*item)
                                .and_then(|b| b.class_ids.get(c))
                                .copied()
                                .or_else(|| {
                                    let name = format!("{}~{}", map.item_name(*item)?, c);
                                    cm.buckets
                                        .iter()
                                        .flatten()
                                        .find(|b| b.name == name)
                                        .map(|b| b.id)
                                });
                            match shadow {
                                Some(id) => CStep::Take(id),
                                None => {
                                    return invalid(format!(
                                        "rule {}: take {item} has no class information for {c}",
                                        r.name
                                    ))
                                }
                            }
                        }
                    }
                }
                Step::Choose {
                    leaf,
                    mode,
                    count,
                    type_id,
                } => {
                    if count.unsigned_abs() > MAX_STEP_COUNT {
                        return invalid(format!(
                            "rule {}: choose count {count} is beyond +-{MAX_STEP_COUNT}",
                            r.name
                        ));
                    }
                    if *type_id != 0 && !types.contains(type_id) {
                        return invalid(format!("rule {}: unknown type id {type_id}", r.name));
                    }
                    CStep::Choose {
                        leaf: *leaf,
                        firstn: *mode == ChooseMode::Firstn,
                        count: *count,
                        type_id: *type_id,
                    }
                }
                Step::Emit => CStep::Emit,
                Step::SetChooseleafVaryR(n) if *n > MAX_VARY_R as i32 => {
                    return invalid(format!(
                        "rule {}: set_chooseleaf_vary_r {n} is above {MAX_VARY_R}",
                        r.name
                    ));
                }
                Step::SetChooseTries(n)
                | Step::SetChooseleafTries(n)
                | Step::SetChooseLocalTries(n)
                | Step::SetChooseLocalFallbackTries(n)
                    if *n > MAX_TRIES as i32 =>
                {
                    return invalid(format!(
                        "rule {}: retry count {n} is above {MAX_TRIES}",
                        r.name
                    ));
                }
                Step::SetChooseTries(n) => CStep::SetChooseTries(*n),
                Step::SetChooseleafTries(n) => CStep::SetChooseleafTries(*n),
                Step::SetChooseLocalTries(n) => CStep::SetChooseLocalTries(*n),
                Step::SetChooseLocalFallbackTries(n) => CStep::SetChooseLocalFallbackTries(*n),
                Step::SetChooseleafVaryR(n) => CStep::SetChooseleafVaryR(*n),
                Step::SetChooseleafStable(n) => CStep::SetChooseleafStable(*n),
            });
        }
        if rules.insert(r.id, steps).is_some() {
            return invalid(format!("rule id {} is used twice", r.id));
        }
    }
    Ok(rules)
}

fn compile_choose_args(map: &CrushMap, cm: &CompiledMap) -> Result<BTreeMap<i64, ChooseArgMap>> {
    let mut out = BTreeMap::new();
    for (&index, args) in &map.choose_args {
        let mut slots: Vec<Option<CArg>> = vec![None; cm.buckets.len()];
        for a in args {
            let Some(b) = cm.bucket(a.bucket_id) else {
                return invalid(format!(
                    "choose_args {index}: unknown bucket {}",
                    a.bucket_id
                ));
            };
            for (p, ws) in a.weight_set.iter().enumerate() {
                if ws.len() != b.items.len() {
                    return invalid(format!(
                        "choose_args {index}: bucket {} position {p} has {} weights for {} items",
                        a.bucket_id,
                        ws.len(),
                        b.items.len()
                    ));
                }
            }
            if let Some(ids) = &a.ids {
                if ids.len() != b.items.len() {
                    return invalid(format!(
                        "choose_args {index}: bucket {} has {} ids for {} items",
                        a.bucket_id,
                        ids.len(),
                        b.items.len()
                    ));
                }
            }
            let Some(i) = bucket_index(a.bucket_id) else {
                return invalid(format!(
                    "choose_args {index}: {} is not a bucket",
                    a.bucket_id
                ));
            };
            slots[i] = Some(CArg {
                recips: a
                    .weight_set
                    .iter()
                    .map(|ws| ws.iter().map(|&w| Recip::new(w)).collect())
                    .collect(),
                weight_set: a.weight_set.clone(),
                ids: a.ids.clone(),
            });
        }
        out.insert(index, ChooseArgMap { args: slots });
    }
    Ok(out)
}
