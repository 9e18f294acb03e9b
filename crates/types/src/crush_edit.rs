//! Edits of a CRUSH map as a monitor makes them: the default map of a new
//! cluster, adding an OSD under a host, moving and removing items,
//! reweighting. Pure functions on `CrushMap`.
//!
//! They must never leave a map that does not compile: every edit keeps
//! bucket weights equal to the sums of their children and buckets in
//! children-first order, and the caller compiles the result before
//! accepting it.

use crate::error::{MapError, Result};
use loligo_crush::map::{
    Bucket, BucketAlg, BucketItem, BucketType, ChooseMode, Device, ItemId, Rule, Step, Tunables,
};
use loligo_crush::CrushMap;
use std::collections::HashMap;

/// Name of the root every new host goes under.
pub const DEFAULT_ROOT: &str = "default";
/// Id of the replicated rule of a new cluster.
pub const DEFAULT_RULE: i32 = 0;
/// Bucket types of a new cluster, as Ceph names them.
pub const TYPES: [&str; 4] = ["osd", "host", "rack", "root"];

fn err(m: String) -> MapError {
    MapError::Crush(m)
}

/// The map of a new cluster: types osd/host/rack/root, an empty root
/// `default`, and rule 0 `replicated_rule` that puts each replica in a
/// different `failure_domain` (`host`, or `osd` for a one-machine cluster).
pub fn default_map(failure_domain: &str) -> Result<CrushMap> {
    let type_id = TYPES
        .iter()
        .position(|t| *t == failure_domain)
        .ok_or_else(|| err(format!("unknown failure domain type '{failure_domain}'")))?;
    Ok(CrushMap {
        tunables: Tunables::OPTIMAL,
        devices: Vec::new(),
        types: TYPES
            .iter()
            .enumerate()
            .map(|(i, n)| BucketType {
                id: i as i32,
                name: n.to_string(),
            })
            .collect(),
        buckets: vec![Bucket {
            id: -1,
            name: DEFAULT_ROOT.into(),
            type_id: 3,
            alg: BucketAlg::Straw2,
            hash: 0,
            items: Vec::new(),
            class_ids: Default::default(),
        }],
        rules: vec![Rule {
            id: DEFAULT_RULE,
            name: "replicated_rule".into(),
            rule_type: 1,
            min_size: 1,
            max_size: 10,
            steps: vec![
                Step::Take {
                    item: -1,
                    class: None,
                },
                Step::Choose {
                    leaf: true,
                    mode: ChooseMode::Firstn,
                    count: 0,
                    type_id: type_id as i32,
                },
                Step::Emit,
            ],
        }],
        choose_args: Default::default(),
    })
}

/// Name of the rule erasure-coded pools are placed by.
pub const ERASURE_RULE: &str = "erasure_rule";

/// The id of the rule erasure-coded pools use, added if the map has none:
/// `indep` placement (a down OSD leaves its position empty, it does not
/// shift the others, as shards are positions) from the default root,
/// across the same failure domain as the replicated rule, with Ceph's
/// retry counts for EC rules. Returns whether the map changed.
pub fn ensure_erasure_rule(map: &mut CrushMap) -> Result<(i32, bool)> {
    if let Some(r) = map.rules.iter().find(|r| r.name == ERASURE_RULE) {
        return Ok((r.id, false));
    }
    let domain = map
        .rules
        .iter()
        .find(|r| r.id == DEFAULT_RULE)
        .and_then(|r| {
            r.steps.iter().find_map(|s| match s {
                Step::Choose { type_id, .. } => Some(*type_id),
                _ => None,
            })
        })
        .unwrap_or(0);
    let root = item_id(map, DEFAULT_ROOT)
        .ok_or_else(|| err(format!("no root bucket '{DEFAULT_ROOT}'")))?;
    let id = map.rules.iter().map(|r| r.id).max().map_or(0, |m| m + 1);
    map.rules.push(Rule {
        id,
        name: ERASURE_RULE.into(),
        rule_type: 3,
        min_size: 1,
        max_size: 32,
        steps: vec![
            Step::SetChooseleafTries(5),
            Step::SetChooseTries(100),
            Step::Take {
                item: root,
                class: None,
            },
            Step::Choose {
                leaf: true,
                mode: ChooseMode::Indep,
                count: 0,
                type_id: domain,
            },
            Step::Emit,
        ],
    });
    Ok((id, true))
}

fn type_id(map: &CrushMap, name: &str) -> Result<i32> {
    map.types
        .iter()
        .find(|t| t.name == name)
        .map(|t| t.id)
        .ok_or_else(|| err(format!("the map has no type '{name}'")))
}

fn bucket_by_name(map: &CrushMap, name: &str) -> Option<usize> {
    map.buckets.iter().position(|b| b.name == name)
}

/// The id of the item called `name` (`osd.N` or a bucket).
pub fn item_id(map: &CrushMap, name: &str) -> Option<ItemId> {
    map.devices
        .iter()
        .find(|d| d.name == name)
        .map(|d| d.id)
        .or_else(|| bucket_by_name(map, name).map(|i| map.buckets[i].id))
}

fn parent_of(map: &CrushMap, id: ItemId) -> Option<usize> {
    map.buckets
        .iter()
        .position(|b| b.items.iter().any(|it| it.id == id))
}

/// Put `osd.id` under bucket `host` (created under the root, or under
/// `parent` when given, if missing) with CRUSH weight `weight` (16.16).
/// An OSD already placed keeps its place; only its weight changes.
pub fn add_osd(map: &mut CrushMap, id: i32, host: &str, weight: u32) -> Result<()> {
    if id < 0 {
        return Err(err(format!("osd id {id} is negative")));
    }
    let dev_name = format!("osd.{id}");
    if host.is_empty() || host.contains(char::is_whitespace) || host == dev_name {
        return Err(err(format!("bad host name '{host}'")));
    }
    if !map.devices.iter().any(|d| d.id == id) {
        map.devices.push(Device {
            id,
            name: dev_name,
            class: None,
        });
        map.devices.sort_by_key(|d| d.id);
    }
    if parent_of(map, id).is_some() {
        return set_weight(map, id, weight);
    }
    let hi = match bucket_by_name(map, host) {
        Some(i) => i,
        None => {
            let root = bucket_by_name(map, DEFAULT_ROOT)
                .ok_or_else(|| err(format!("no root '{DEFAULT_ROOT}' to add host '{host}' to")))?;
            let hid = new_bucket_id(map);
            let b = Bucket {
                id: hid,
                name: host.to_string(),
                type_id: type_id(map, "host")?,
                alg: BucketAlg::Straw2,
                hash: 0,
                items: Vec::new(),
                class_ids: Default::default(),
            };
            map.buckets[root]
                .items
                .push(BucketItem { id: hid, weight: 0 });
            map.buckets.insert(0, b);
            0
        }
    };
    map.buckets[hi].items.push(BucketItem { id, weight });
    fix_weights(map)
}

fn new_bucket_id(map: &CrushMap) -> ItemId {
    let used = map
        .buckets
        .iter()
        .flat_map(|b| std::iter::once(b.id).chain(b.class_ids.values().copied()))
        .min()
        .unwrap_or(0);
    used.min(0) - 1
}

/// Set the CRUSH weight of a device wherever it is placed.
pub fn set_weight(map: &mut CrushMap, id: ItemId, weight: u32) -> Result<()> {
    let mut found = false;
    for b in map.buckets.iter_mut() {
        for it in b.items.iter_mut().filter(|it| it.id == id) {
            it.weight = weight;
            found = true;
        }
    }
    if !found {
        return Err(err(format!("item {id} is not in any bucket")));
    }
    fix_weights(map)
}

/// Remove a device (from every bucket and the device list) or an empty
/// bucket.
pub fn remove(map: &mut CrushMap, name: &str) -> Result<()> {
    let id = item_id(map, name).ok_or_else(|| err(format!("no item '{name}'")))?;
    if id < 0 {
        let i = bucket_by_name(map, name).ok_or_else(|| err(format!("no bucket '{name}'")))?;
        if !map.buckets[i].items.is_empty() {
            return Err(err(format!("bucket '{name}' is not empty")));
        }
        let used = map.rules.iter().any(|r| {
            r.steps
                .iter()
                .any(|s| matches!(s, Step::Take { item, .. } if *item == id))
        });
        if used {
            return Err(err(format!("bucket '{name}' is used by a rule")));
        }
        map.buckets.remove(i);
    } else {
        map.devices.retain(|d| d.id != id);
    }
    for b in map.buckets.iter_mut() {
        b.items.retain(|it| it.id != id);
    }
    fix_weights(map)
}

/// The name of the bucket device `osd.id` is placed in (`None`: not
/// placed).
pub fn parent_name(map: &CrushMap, id: i32) -> Option<&str> {
    parent_of(map, id).map(|i| map.buckets[i].name.as_str())
}

/// Place `osd.id` at `location` (Ceph's `osd crush set-location`: pairs
/// of type and bucket name, such as `host=h1 rack=r2`), keeping its
/// weight. As Ceph does, the named buckets are walked from the lowest
/// up: each missing one is made and put under the next named (the
/// highest under the root `default`), up to the first that exists, which
/// stays where it is. The device goes under the lowest.
pub fn set_location(map: &mut CrushMap, id: i32, location: &[(String, String)]) -> Result<()> {
    if id < 0 || !map.devices.iter().any(|d| d.id == id) {
        return Err(err(format!("osd.{id} is not a CRUSH device")));
    }
    let weight = (map.buckets.iter())
        .flat_map(|b| &b.items)
        .find(|it| it.id == id)
        .map(|it| it.weight)
        .ok_or_else(|| err(format!("osd.{id} is not placed in CRUSH")))?;
    place(map, id, weight, location)
}

/// Add device `id` called `name` with CRUSH weight `weight` (16.16) at
/// `location`, as [`set_location`] places one (crushtool's `--add-item
/// ID WEIGHT NAME --loc TYPE NAME ...`).
pub fn add_device(
    map: &mut CrushMap,
    id: i32,
    name: &str,
    weight: u32,
    location: &[(String, String)],
) -> Result<()> {
    if id < 0 {
        return Err(err(format!("device id {id} is negative")));
    }
    if map.devices.iter().any(|d| d.id == id || d.name == name)
        || bucket_by_name(map, name).is_some()
    {
        return Err(err(format!("an item {id} or '{name}' exists already")));
    }
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(err(format!("bad device name '{name}'")));
    }
    map.devices.push(Device {
        id,
        name: name.to_string(),
        class: None,
    });
    map.devices.sort_by_key(|d| d.id);
    place(map, id, weight, location)
}

/// Put device `id` with `weight` at `location` (see [`set_location`]).
fn place(map: &mut CrushMap, id: i32, weight: u32, location: &[(String, String)]) -> Result<()> {
    if location.is_empty() {
        return Err(err(
            "a location names at least one bucket (host=NAME)".into()
        ));
    }
    let mut chain: Vec<(i32, String)> = Vec::with_capacity(location.len());
    for (ty, name) in location {
        let t = type_id(map, ty)?;
        if t == 0 {
            return Err(err(format!("'{ty}' is the devices' type, not a bucket's")));
        }
        if name.is_empty()
            || name.len() > crate::osdmap::NAME_LEN_MAX
            || name.contains(char::is_whitespace)
            || map.devices.iter().any(|d| d.name == *name)
        {
            return Err(err(format!("bad bucket name '{name}'")));
        }
        if chain.iter().any(|(u, _)| *u == t) {
            return Err(err(format!("type '{ty}' named twice")));
        }
        chain.push((t, name.clone()));
    }
    chain.sort_by_key(|(t, _)| *t);
    // The missing buckets from the lowest up, then each linked under the
    // next (made by then).
    let mut made: Vec<(ItemId, &str)> = Vec::new();
    for w in 0..chain.len() {
        let (t, name) = chain[w].clone();
        if let Some(i) = bucket_by_name(map, &name) {
            if map.buckets[i].type_id != t {
                return Err(err(format!(
                    "bucket '{name}' is a '{}', not a '{}'",
                    map.type_name(map.buckets[i].type_id).unwrap_or("?"),
                    map.type_name(t).unwrap_or("?")
                )));
            }
            break;
        }
        let parent = chain.get(w + 1).map_or(DEFAULT_ROOT, |(_, n)| n.as_str());
        let parent_t = match chain.get(w + 1) {
            Some((pt, _)) => *pt,
            None => {
                let r = bucket_by_name(map, DEFAULT_ROOT).ok_or_else(|| {
                    err(format!("no root '{DEFAULT_ROOT}' to put '{name}' under"))
                })?;
                map.buckets[r].type_id
            }
        };
        if parent_t <= t {
            return Err(err(format!("'{parent}' cannot hold '{name}'")));
        }
        let bid = new_bucket_id(map);
        map.buckets.insert(
            0,
            Bucket {
                id: bid,
                name: name.clone(),
                type_id: t,
                alg: BucketAlg::Straw2,
                hash: 0,
                items: Vec::new(),
                class_ids: Default::default(),
            },
        );
        made.push((bid, parent));
    }
    for (bid, parent) in made {
        let p = bucket_by_name(map, parent).ok_or_else(|| err(format!("no bucket '{parent}'")))?;
        map.buckets[p].items.push(BucketItem { id: bid, weight: 0 });
    }
    put_device(map, id, weight, &chain[0].1)
}

/// Take device `id` out of every bucket and put it, with `weight`, under
/// bucket `parent`.
fn put_device(map: &mut CrushMap, id: i32, weight: u32, parent: &str) -> Result<()> {
    let p = bucket_by_name(map, parent).ok_or_else(|| err(format!("no bucket '{parent}'")))?;
    if map.buckets[p].type_id == 0 {
        return Err(err(format!("'{parent}' is not a bucket")));
    }
    for b in map.buckets.iter_mut() {
        b.items.retain(|it| it.id != id);
    }
    let p = bucket_by_name(map, parent).ok_or_else(|| err(format!("no bucket '{parent}'")))?;
    map.buckets[p].items.push(BucketItem { id, weight });
    fix_weights(map)
}

/// Move bucket `name`, or device `osd.N` (with its weight), under bucket
/// `parent`.
pub fn move_bucket(map: &mut CrushMap, name: &str, parent: &str) -> Result<()> {
    if let Some(id) = map.devices.iter().find(|d| d.name == name).map(|d| d.id) {
        let weight = (map.buckets.iter())
            .flat_map(|b| &b.items)
            .find(|it| it.id == id)
            .map_or(0, |it| it.weight);
        return put_device(map, id, weight, parent);
    }
    let i = bucket_by_name(map, name).ok_or_else(|| err(format!("no bucket '{name}'")))?;
    let p = bucket_by_name(map, parent).ok_or_else(|| err(format!("no bucket '{parent}'")))?;
    let (id, pid) = (map.buckets[i].id, map.buckets[p].id);
    if id == pid || descends_from(map, pid, id) {
        return Err(err(format!("'{parent}' is inside '{name}'")));
    }
    if map.buckets[p].type_id <= map.buckets[i].type_id {
        return Err(err(format!(
            "a '{}' cannot hold a '{}'",
            map.type_name(map.buckets[p].type_id).unwrap_or("?"),
            map.type_name(map.buckets[i].type_id).unwrap_or("?")
        )));
    }
    for b in map.buckets.iter_mut() {
        b.items.retain(|it| it.id != id);
    }
    map.buckets[p].items.push(BucketItem { id, weight: 0 });
    fix_weights(map)
}

fn descends_from(map: &CrushMap, item: ItemId, ancestor: ItemId) -> bool {
    let mut cur = item;
    for _ in 0..=map.buckets.len() {
        match parent_of(map, cur) {
            Some(p) if map.buckets[p].id == ancestor => return true,
            Some(p) => cur = map.buckets[p].id,
            None => return false,
        }
    }
    false
}

/// Order buckets children first and make every bucket's weight in its
/// parent the sum of its items. Linear in the map's size (each pass over
/// the buckets takes every bucket whose children are placed, in the
/// order they stand, so the order is the same whatever the size; one
/// pass per level of the hierarchy): `osd boot` of a new OSD calls this,
/// so a cluster of N OSDs booting must not cost N times N.
fn fix_weights(map: &mut CrushMap) -> Result<()> {
    use std::collections::{HashMap, HashSet};
    let n = map.buckets.len();
    let mut order: Vec<Bucket> = Vec::with_capacity(n);
    let mut placed: HashSet<ItemId> = HashSet::with_capacity(n);
    let mut left: Vec<Bucket> = std::mem::take(&mut map.buckets);
    while !left.is_empty() {
        let before = left.len();
        let mut rest = Vec::new();
        for b in left {
            if b.items
                .iter()
                .all(|it| it.id >= 0 || placed.contains(&it.id))
            {
                placed.insert(b.id);
                order.push(b);
            } else {
                rest.push(b);
            }
        }
        left = rest;
        if left.len() == before {
            map.buckets = order.into_iter().chain(left).collect();
            return Err(err(
                "bucket hierarchy has a cycle or a missing bucket".into()
            ));
        }
    }
    // Each bucket's weight (`None`: it overflows) once its items are set.
    let mut weights: HashMap<ItemId, (Option<u32>, String)> = HashMap::with_capacity(n);
    for b in order.iter_mut() {
        for it in b.items.iter_mut().filter(|it| it.id < 0) {
            match weights.get(&it.id) {
                Some((Some(w), _)) => it.weight = *w,
                Some((None, name)) => {
                    return Err(err(format!("bucket '{name}' weight overflows")));
                }
                None => {}
            }
        }
        weights.insert(b.id, (b.weight(), b.name.clone()));
    }
    map.buckets = order;
    Ok(())
}

/// The buckets above item `name`, lowest first, as (type, name) pairs
/// (crushtool's `--show-location`); `None` if there is no such item.
pub fn location_of(map: &CrushMap, name: &str) -> Option<Vec<(String, String)>> {
    Locations::new(map).of(name)
}

/// Every item's parent and name, indexed once, for the locations of many
/// items: [`location_of`] alone scans the map, so asking it for each of
/// N OSDs costs N scans (a health check of 10,000 down OSDs).
pub struct Locations<'a> {
    map: &'a CrushMap,
    /// Item id -> index of the first bucket holding it (as `parent_of`).
    parent: HashMap<ItemId, usize>,
    ids: HashMap<&'a str, ItemId>,
}

impl<'a> Locations<'a> {
    /// The index of `map`.
    pub fn new(map: &'a CrushMap) -> Locations<'a> {
        let mut parent = HashMap::new();
        for (i, b) in map.buckets.iter().enumerate() {
            for it in &b.items {
                parent.entry(it.id).or_insert(i);
            }
        }
        // The first device of a name, else the first bucket, as
        // `item_id` finds them.
        let mut ids = HashMap::new();
        for d in &map.devices {
            ids.entry(d.name.as_str()).or_insert(d.id);
        }
        for b in &map.buckets {
            ids.entry(b.name.as_str()).or_insert(b.id);
        }
        Locations { map, parent, ids }
    }

    /// [`location_of`] item `name`.
    pub fn of(&self, name: &str) -> Option<Vec<(String, String)>> {
        let mut cur = *self.ids.get(name)?;
        let mut out = Vec::new();
        for _ in 0..=self.map.buckets.len() {
            let Some(&p) = self.parent.get(&cur) else {
                break;
            };
            let b = &self.map.buckets[p];
            out.push((
                self.map.type_name(b.type_id).unwrap_or("?").to_string(),
                b.name.clone(),
            ));
            cur = b.id;
        }
        Some(out)
    }
}

/// Add rule `name` placing replicas under bucket `root`, each in a
/// different `failure_domain` (crushtool's `--create-replicated-rule`);
/// its id is the next free one, returned.
pub fn add_replicated_rule(
    map: &mut CrushMap,
    name: &str,
    root: &str,
    failure_domain: &str,
) -> Result<i32> {
    if map.rules.iter().any(|r| r.name == name) {
        return Err(err(format!("rule '{name}' exists already")));
    }
    let root_id = bucket_by_name(map, root)
        .map(|i| map.buckets[i].id)
        .ok_or_else(|| err(format!("no bucket '{root}'")))?;
    let type_id = type_id(map, failure_domain)?;
    let id = (0..)
        .find(|i| !map.rules.iter().any(|r| r.id == *i))
        .unwrap_or(0);
    map.rules.push(Rule {
        id,
        name: name.to_string(),
        rule_type: 1,
        min_size: 1,
        max_size: 10,
        steps: vec![
            Step::Take {
                item: root_id,
                class: None,
            },
            Step::Choose {
                leaf: type_id != 0,
                mode: ChooseMode::Firstn,
                count: 0,
                type_id,
            },
            Step::Emit,
        ],
    });
    map.rules.sort_by_key(|r| r.id);
    Ok(id)
}

/// `osd tree` rows: (depth, id, type name, name, CRUSH weight 16.16),
/// roots first, children in item order; devices in no bucket last.
pub fn tree(map: &CrushMap) -> Vec<(usize, ItemId, String, String, u32)> {
    let mut out = Vec::new();
    let roots: Vec<&Bucket> = map
        .buckets
        .iter()
        .filter(|b| parent_of(map, b.id).is_none())
        .collect();
    for r in roots {
        walk(map, r.id, r.weight().unwrap_or(0), 0, &mut out);
    }
    for d in &map.devices {
        if parent_of(map, d.id).is_none() {
            out.push((0, d.id, "osd".into(), d.name.clone(), 0));
        }
    }
    out
}

fn walk(
    map: &CrushMap,
    id: ItemId,
    weight: u32,
    depth: usize,
    out: &mut Vec<(usize, ItemId, String, String, u32)>,
) {
    if depth > 32 {
        return;
    }
    match map.bucket(id) {
        Some(b) => {
            let t = map.type_name(b.type_id).unwrap_or("?").to_string();
            out.push((depth, id, t, b.name.clone(), weight));
            for it in &b.items {
                walk(map, it.id, it.weight, depth + 1, out);
            }
        }
        None => {
            let name = map.item_name(id).unwrap_or("?").to_string();
            out.push((depth, id, "osd".into(), name, weight));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_crush::CompiledMap;

    #[test]
    fn hosts_are_created_under_the_root_and_weights_sum() {
        let mut m = default_map("host").unwrap();
        for (id, h) in [(0, "a"), (1, "a"), (2, "b")] {
            add_osd(&mut m, id, h, 0x10000).unwrap();
        }
        CompiledMap::compile(&m).unwrap();
        let root = m.bucket(-1).unwrap();
        assert_eq!(root.weight(), Some(0x30000));
        let a = item_id(&m, "a").unwrap();
        assert_eq!(m.bucket(a).unwrap().weight(), Some(0x20000));
        set_weight(&mut m, 0, 0x8000).unwrap();
        assert_eq!(m.bucket(-1).unwrap().weight(), Some(0x28000));
        // Children come before parents.
        let pos = |id| m.buckets.iter().position(|b| b.id == id).unwrap();
        assert!(pos(a) < pos(-1));
    }

    #[test]
    fn remove_and_move_keep_the_map_valid() {
        let mut m = default_map("host").unwrap();
        add_osd(&mut m, 0, "a", 0x10000).unwrap();
        add_osd(&mut m, 1, "b", 0x10000).unwrap();
        assert!(remove(&mut m, "a").is_err(), "non-empty bucket");
        assert!(remove(&mut m, "default").is_err());
        remove(&mut m, "osd.0").unwrap();
        remove(&mut m, "a").unwrap();
        assert_eq!(m.bucket(-1).unwrap().weight(), Some(0x10000));
        assert!(move_bucket(&mut m, "default", "b").is_err(), "cycle/type");
        assert!(add_osd(&mut m, -3, "b", 1).is_err());
        assert!(add_osd(&mut m, 3, "bad host", 1).is_err());
        CompiledMap::compile(&m).unwrap();
        let rows = tree(&m);
        assert_eq!(rows[0].3, "default");
        assert_eq!(rows.len(), 3);
    }

    /// One index answers every item's location, lowest bucket first, and
    /// follows a move.
    #[test]
    fn locations_walk_up_to_the_root() {
        let mut m = default_map("host").unwrap();
        add_osd(&mut m, 0, "a", 0x10000).unwrap();
        add_osd(&mut m, 1, "b", 0x10000).unwrap();
        let loc = |t: &str, n: &str| (t.to_string(), n.to_string());
        set_location(&mut m, 0, &[loc("host", "c"), loc("rack", "r1")]).unwrap();
        let l = Locations::new(&m);
        assert_eq!(
            l.of("osd.0"),
            Some(vec![
                loc("host", "c"),
                loc("rack", "r1"),
                loc("root", "default")
            ])
        );
        assert_eq!(
            l.of("osd.1"),
            Some(vec![loc("host", "b"), loc("root", "default")])
        );
        assert_eq!(l.of("r1"), Some(vec![loc("root", "default")]));
        assert_eq!(l.of("default"), Some(vec![]));
        assert_eq!(l.of("osd.7"), None);
        assert_eq!(location_of(&m, "osd.1"), l.of("osd.1"));
    }
}
