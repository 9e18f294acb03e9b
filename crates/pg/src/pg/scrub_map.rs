//! Scrub maps and their comparison, the pure parts: what one member
//! reports of each object in a range (size, version, digests of its
//! xattrs, and on a deep scrub of its data and omap), how the primary
//! compares the members' maps object by object, which copy it takes as
//! authoritative, and what it reports as wrong (Ceph's error names).
//!
//! The authoritative copy of an object is chosen by one of three rules,
//! named in every report: `data_digest`: the object was written whole, and
//! its metadata keeps the data's digest (`DATA_DIGEST_ATTR`): the copies
//! whose data matches it are good, whatever the count; `majority`: else
//! (or among those, where they differ in what the digest does not cover:
//! omap, xattrs) the copies that agree in everything with the most others;
//! `primary`: a tie among the largest groups goes to the one holding the
//! primary's copy (else the lowest OSD's). Only copies at the version the
//! primary's log vouches for are candidates (see `due`): a stale copy is
//! never authoritative, however many agree with it, nor is a copy that
//! cannot be read or is missing. An object the primary's log removed has
//! no authoritative copy (`removed`): any copy left is stale.
//!
//! It reads the store only to build this member's map; it must never
//! write, nor call a copy bad on a shallow scrub for what only a deep one
//! reads.

use super::backfill::{self, Cursor};
use crate::exec::VERSION_ATTR;
use loligo_store::txn::Op;
use loligo_store::{CollectionId, ObjectId, ObjectStore, StoreError, Transaction};
use loligo_types::ops::Version;
pub use loligo_types::scrub::{AuthRule, Inconsistent, ScrubObject, ShardError};
use std::collections::BTreeMap;
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

/// The xattr holding the digest of an object's data as it was last
/// written whole: `u64le size`, `u64le xxh3-64 of the data`. Any write
/// that changes the data otherwise removes it.
pub const DATA_DIGEST_ATTR: &str = "_dd";

/// Most objects one member's map of a range may hold.
pub const MAP_OBJECTS_MAX: usize = 4096;

/// Everything a comparison of good copies looks at (an EC shard's data
/// digest is its own: shards are never compared by data).
fn key(o: &ScrubObject, of: Of) -> (u64, Version, u64, Option<u64>, Option<u64>) {
    let data = if of == Of::Shards { None } else { o.data };
    (o.size, o.version, o.attrs, o.omap, data)
}

/// What the members hold of each object: whole copies (a replicated
/// pool) or one shard each (an erasure-coded pool).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Of {
    Replicas,
    Shards,
}

/// The value of [`DATA_DIGEST_ATTR`] for `data`.
pub fn data_digest_attr(data: &[u8]) -> Vec<u8> {
    let mut v = (data.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(&xxh3_64(data).to_le_bytes());
    v
}

/// Keep object `o`'s data digest true to what transaction `t` leaves:
/// set when `t` writes the data whole last, emptied when it changes the
/// data otherwise (a clone brings its source's digest with the data).
pub fn keep_data_digest(t: &mut Transaction, o: &ObjectId) {
    enum Data {
        Same,
        Whole(CollectionId, bytes::Bytes),
        Changed(CollectionId),
    }
    let mut d = Data::Same;
    for op in &t.ops {
        match op {
            Op::WriteFull { coll, oid, data } if oid == o => d = Data::Whole(*coll, data.clone()),
            Op::Write { coll, oid, .. }
            | Op::Zero { coll, oid, .. }
            | Op::Truncate { coll, oid, .. }
                if oid == o =>
            {
                d = Data::Changed(*coll)
            }
            Op::Remove(_, oid) if oid == o => d = Data::Same,
            Op::Clone { dst, .. } if dst == o => d = Data::Same,
            _ => {}
        }
    }
    let (coll, value) = match d {
        Data::Same => return,
        Data::Whole(c, data) => (c, data_digest_attr(&data)),
        // (Emptied, not removed: removing a missing xattr fails.)
        Data::Changed(c) => (c, Vec::new()),
    };
    t.setattrs(coll, o, vec![(DATA_DIGEST_ATTR.to_string(), value)]);
}

fn decode_digest_attr(v: &[u8]) -> Option<(u64, u64)> {
    let size = u64::from_le_bytes(v.get(0..8)?.try_into().ok()?);
    let digest = u64::from_le_bytes(v.get(8..16)?.try_into().ok()?);
    Some((size, digest))
}

/// This copy's map of its objects in (`after`, `upto`], and the bytes it
/// read for it. `deep`: data and omap are read and digested.
pub fn build_map(
    s: &dyn ObjectStore,
    coll: CollectionId,
    after: &Cursor,
    upto: &Cursor,
    deep: bool,
) -> Result<(Vec<ScrubObject>, u64), StoreError> {
    build_map_of(s, coll, after, upto, deep, None)
}

/// An erasure-coded copy's position and its pool's code: its map
/// entries are of its shards.
#[derive(Clone, Copy)]
pub struct ShardOf<'a> {
    pub pos: usize,
    pub striper: &'a loligo_ec::stripe::Striper,
}

/// As [`build_map`], of an erasure-coded copy holding shard `shard.pos`:
/// each entry's size is its object's (every shard keeps it), its xattr
/// digest leaves out the shard's own label, its data digest is the
/// shard's (shards differ by nature: the primary never compares them),
/// and what the shard's holder can tell wrong by itself is in
/// `own_error`.
pub fn build_shard_map(
    s: &dyn ObjectStore,
    coll: CollectionId,
    after: &Cursor,
    upto: &Cursor,
    deep: bool,
    shard: ShardOf<'_>,
) -> Result<(Vec<ScrubObject>, u64), StoreError> {
    build_map_of(s, coll, after, upto, deep, Some(shard))
}

fn build_map_of(
    s: &dyn ObjectStore,
    coll: CollectionId,
    after: &Cursor,
    upto: &Cursor,
    deep: bool,
    shard: Option<ShardOf<'_>>,
) -> Result<(Vec<ScrubObject>, u64), StoreError> {
    let mut b = MapBuild::start(s, coll, after, upto, deep)?;
    b.step(s, shard, u64::MAX);
    Ok(b.finish())
}

/// What one piece of a [`MapBuild`] reads (bytes; an object's metadata
/// counts as `OBJECT_COST`): a scrub holds its PG's task for about this
/// much reading at a time, never a whole chunk.
pub const PIECE_BYTES: u64 = 8 << 20;
const OBJECT_COST: u64 = 64 << 10;

/// A copy's map of the objects in (`after`, `upto`], built a piece at a
/// time: the objects are listed when it starts, each piece scrubs the
/// next few of them.
pub struct MapBuild {
    coll: CollectionId,
    deep: bool,
    left: std::vec::IntoIter<ObjectId>,
    out: Vec<ScrubObject>,
    bytes: u64,
}

impl MapBuild {
    /// List the objects to map.
    pub fn start(
        s: &dyn ObjectStore,
        coll: CollectionId,
        after: &Cursor,
        upto: &Cursor,
        deep: bool,
    ) -> Result<MapBuild, StoreError> {
        let listed = backfill::scan(s, coll, after, upto, MAP_OBJECTS_MAX + 1, None)?;
        if listed.objects.len() > MAP_OBJECTS_MAX {
            return Err(StoreError::Invalid(format!(
                "more than {MAP_OBJECTS_MAX} objects in one scrub chunk"
            )));
        }
        let names: Vec<ObjectId> = listed.objects.into_iter().map(|(o, _)| o).collect();
        Ok(MapBuild {
            coll,
            deep,
            out: Vec::with_capacity(names.len()),
            left: names.into_iter(),
            bytes: 0,
        })
    }

    /// Scrub objects until about `budget` bytes are read (one at least);
    /// whether every object is mapped now.
    pub fn step(&mut self, s: &dyn ObjectStore, shard: Option<ShardOf<'_>>, budget: u64) -> bool {
        let mut spent = 0u64;
        while spent < budget {
            let Some(o) = self.left.next() else {
                break;
            };
            let (mut obj, read, facts) = scrub_object(s, self.coll, &o, self.deep);
            if let (Some(sh), Some(f)) = (shard, facts) {
                as_shard(&mut obj, &f, sh);
            }
            self.bytes += read;
            spent = spent.saturating_add(read + OBJECT_COST);
            self.out.push(obj);
        }
        self.done()
    }

    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether every object is mapped.
    pub fn done(&self) -> bool {
        self.left.as_slice().is_empty()
    }

    /// The map, and the bytes read for it.
    pub fn finish(self) -> (Vec<ScrubObject>, u64) {
        debug_assert!(self.done(), "a scrub map finished before its last object");
        (self.out, self.bytes)
    }
}

/// What an EC shard's xattrs say of it.
struct ShardFacts {
    /// Its object's size (`_s`).
    size: Option<u64>,
    /// The position whose shard it holds (`_i`).
    label: Option<usize>,
    /// The shard hashes kept (`_h`; empty: none).
    hashes: Vec<u8>,
    /// The xattr digest without the label.
    attrs_but_label: u64,
}

/// An EC shard's entry made its object's (see [`build_shard_map`]).
fn as_shard(obj: &mut ScrubObject, f: &ShardFacts, sh: ShardOf<'_>) {
    obj.attrs = f.attrs_but_label;
    obj.recorded = None;
    let stored = obj.size;
    let Some(size) = f.size else {
        if obj.read_error.is_none() {
            obj.read_error = Some("the shard keeps no object size".into());
        }
        return;
    };
    obj.size = size;
    if obj.read_error.is_some() {
        return;
    }
    let hash = crate::ec::shard_hash(&f.hashes, sh.pos);
    obj.own_error = if f.label != Some(sh.pos) {
        Some(ShardError::Missing)
    } else if sh.striper.shard_len(size, sh.pos).ok() != Some(stored) {
        Some(ShardError::EcSizeError)
    } else if matches!((hash, obj.data), (Some(h), Some(d)) if h != d) {
        Some(ShardError::EcHashError)
    } else {
        None
    };
}

/// The xattr digest an EC shard's map entry gives (see
/// [`build_shard_map`]): of `attrs` without the shard's label.
pub fn shard_attrs_digest(attrs: &BTreeMap<String, Vec<u8>>) -> u64 {
    attrs_digest(attrs, crate::ec::SHARD_ATTR)
}

/// xxh3-64 of xattrs (names and values, in name order), those `skip`
/// names left out.
fn attrs_digest<'a>(attrs: impl IntoIterator<Item = (&'a String, &'a Vec<u8>)>, skip: &str) -> u64 {
    let mut h = Xxh3::new();
    for (k, v) in attrs.into_iter().filter(|(k, _)| k.as_str() != skip) {
        h.update(&(k.len() as u64).to_le_bytes());
        h.update(k.as_bytes());
        h.update(&(v.len() as u64).to_le_bytes());
        h.update(v);
    }
    h.digest()
}

/// One object's entry in this copy's map, the bytes read, and what its
/// xattrs say of it as an EC shard (`None`: they could not be read); a
/// failed read is reported in the entry, not returned.
fn scrub_object(
    s: &dyn ObjectStore,
    coll: CollectionId,
    o: &ObjectId,
    deep: bool,
) -> (ScrubObject, u64, Option<ShardFacts>) {
    let mut obj = ScrubObject {
        name: o.name.clone(),
        size: 0,
        version: Version::default(),
        attrs: 0,
        omap: None,
        data: None,
        recorded: None,
        read_error: None,
        own_error: None,
    };
    let mut read = 0;
    let mut facts = None;
    let r = (|| -> Result<(), StoreError> {
        let w = s
            .read_whole(coll, o, deep)?
            .ok_or_else(|| StoreError::Io(format!("{} vanished while scrubbed", o.name)))?;
        obj.size = w.size;
        obj.version = w
            .attrs
            .get(VERSION_ATTR)
            .and_then(|v| postcard::from_bytes(v).ok())
            .unwrap_or_default();
        obj.recorded = w
            .attrs
            .get(DATA_DIGEST_ATTR)
            .and_then(|v| decode_digest_attr(v));
        obj.attrs = attrs_digest(&w.attrs, "");
        facts = Some(ShardFacts {
            size: (w.attrs.get(crate::ec::SIZE_ATTR)).and_then(|v| postcard::from_bytes(v).ok()),
            label: (w.attrs.get(crate::ec::SHARD_ATTR))
                .and_then(|v| (v.len() == 1).then(|| usize::from(v[0]))),
            hashes: (w.attrs.get(crate::ec::HASH_ATTR))
                .cloned()
                .unwrap_or_default(),
            attrs_but_label: attrs_digest(&w.attrs, crate::ec::SHARD_ATTR),
        });
        if deep {
            obj.data = Some(xxh3_64(&w.data));
            read += w.data.len() as u64;
            let mut h = Xxh3::new();
            h.update(&(w.omap_header.len() as u64).to_le_bytes());
            h.update(&w.omap_header);
            let mut start = Vec::new();
            // (An object the store knows has no omap keys is not listed.)
            let mut more = w.omap;
            while more {
                let page = s.omap_range(coll, o, &start, None, 1024)?;
                for (k, v) in &page {
                    h.update(&(k.len() as u64).to_le_bytes());
                    h.update(k);
                    h.update(&(v.len() as u64).to_le_bytes());
                    h.update(v);
                    read += (k.len() + v.len()) as u64;
                }
                more = page.len() == 1024;
                if let Some((k, _)) = page.last() {
                    start = k.clone();
                    start.push(0);
                }
            }
            obj.omap = Some(h.digest());
        }
        Ok(())
    })();
    if let Err(e) = r {
        obj.read_error = Some(e.to_string());
        // (The version lives with the object's metadata, apart from the
        // data that may have failed.)
        obj.version = s
            .getattr(coll, o, VERSION_ATTR)
            .ok()
            .and_then(|v| postcard::from_bytes(&v).ok())
            .unwrap_or_default();
        if facts.is_none() {
            let size = s.getattr(coll, o, crate::ec::SIZE_ATTR).ok();
            facts = Some(ShardFacts {
                size: size.and_then(|v| postcard::from_bytes(&v).ok()),
                label: None,
                hashes: Vec::new(),
                attrs_but_label: 0,
            });
        }
    }
    (obj, read, facts)
}

/// What the primary's log says of the objects its own map cannot vouch
/// for (it holds no copy, or cannot read the version of its copy):
/// written last at a version, or removed (`None`). An object the log
/// does not name is absent.
pub type Logged = BTreeMap<String, Option<Version>>;

/// The version every copy of an object must have, or that it must not
/// exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Due {
    Version(Version),
    Removed,
}

/// Compare the members' maps of one range (`primary`'s among them): the
/// objects they disagree on. `logged`: see [`Logged`].
pub fn compare(
    primary: i32,
    maps: &BTreeMap<i32, Vec<ScrubObject>>,
    logged: &Logged,
) -> Vec<Inconsistent> {
    compare_of(primary, maps, logged, Of::Replicas)
}

/// As [`compare`], of an erasure-coded PG's shard maps (each member's
/// map is of its own shard, see [`build_shard_map`]): the shards must
/// agree on their object's size, version and xattrs, and each must pass
/// its holder's own checks (length, hash); the good ones are the
/// authoritative ones, from which the bad ones are rebuilt.
pub fn compare_shards(
    primary: i32,
    maps: &BTreeMap<i32, Vec<ScrubObject>>,
    logged: &Logged,
) -> Vec<Inconsistent> {
    compare_of(primary, maps, logged, Of::Shards)
}

fn compare_of(
    primary: i32,
    maps: &BTreeMap<i32, Vec<ScrubObject>>,
    logged: &Logged,
    of: Of,
) -> Vec<Inconsistent> {
    let mut by_name: BTreeMap<&str, BTreeMap<i32, &ScrubObject>> = BTreeMap::new();
    for (&osd, map) in maps {
        for o in map {
            by_name.entry(&o.name).or_default().insert(osd, o);
        }
    }
    let mut out = Vec::new();
    for (name, held) in by_name {
        let copies: BTreeMap<i32, Option<&ScrubObject>> = maps
            .keys()
            .map(|&osd| (osd, held.get(&osd).copied()))
            .collect();
        let due = due(primary, name, &copies, logged);
        if let Some(i) = judge(primary, name, due, &copies, of) {
            out.push(i);
        }
    }
    out
}

/// The names in `map` (this primary's own) whose version it cannot vouch
/// for, beside the names other maps hold that it lacks: where its log
/// must speak.
pub fn unvouched(primary: i32, maps: &BTreeMap<i32, Vec<ScrubObject>>) -> Vec<String> {
    let mine: BTreeMap<&str, &ScrubObject> = maps
        .get(&primary)
        .map(|m| m.iter().map(|o| (o.name.as_str(), o)).collect())
        .unwrap_or_default();
    let mut out: Vec<String> = maps
        .values()
        .flatten()
        .filter(|o| mine.get(o.name.as_str()).is_none_or(|p| !vouches(p)))
        .map(|o| o.name.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Whether the primary's copy `p` tells its version: it does unless it
/// could not be read at all.
fn vouches(p: &ScrubObject) -> bool {
    p.read_error.is_none() || p.version != Version::default()
}

/// The version an object's copies must have: the primary's log is the
/// authority after peering, so its copy's version; without one, what its
/// log says; else (the log no longer names it) the newest readable copy.
fn due(
    primary: i32,
    name: &str,
    copies: &BTreeMap<i32, Option<&ScrubObject>>,
    logged: &Logged,
) -> Due {
    if let Some(Some(p)) = copies.get(&primary) {
        if vouches(p) {
            return Due::Version(p.version);
        }
    }
    match logged.get(name) {
        Some(Some(v)) => Due::Version(*v),
        Some(None) => Due::Removed,
        None => Due::Version(
            copies
                .values()
                .flatten()
                .filter(|c| c.read_error.is_none())
                .map(|c| c.version)
                .max()
                .unwrap_or_default(),
        ),
    }
}

/// One object's copies judged against the version they must have:
/// `None` when they all agree.
fn judge(
    primary: i32,
    name: &str,
    due: Due,
    copies: &BTreeMap<i32, Option<&ScrubObject>>,
    of: Of,
) -> Option<Inconsistent> {
    let owned = |copies: &BTreeMap<i32, Option<&ScrubObject>>| {
        copies
            .iter()
            .map(|(&o, c)| (o, c.map(ScrubObject::clone)))
            .collect()
    };
    let Due::Version(version) = due else {
        // Every copy left is stale: none may come back.
        let bad = (copies.iter())
            .filter(|(_, c)| c.is_some())
            .map(|(&o, _)| (o, vec![ShardError::ObjectInfoInconsistency]))
            .collect();
        return Some(Inconsistent {
            name: name.to_string(),
            version: Version::default(),
            auth: Vec::new(),
            rule: AuthRule::Removed,
            bad,
            copies: owned(copies),
        });
    };
    let candidates: Vec<(i32, &ScrubObject)> = copies
        .iter()
        .filter_map(|(&osd, c)| c.map(|c| (osd, c)))
        .filter(|(_, c)| c.read_error.is_none() && c.own_error.is_none())
        .filter(|(_, c)| c.version == version)
        .collect();
    let (auth, rule) = choose(primary, &candidates, of);
    let model = auth.first().and_then(|a| copies.get(a).copied().flatten());
    let mut bad = BTreeMap::new();
    for (&osd, c) in copies {
        let errs = match (c, model) {
            (None, _) => vec![ShardError::Missing],
            (Some(c), _) if c.read_error.is_some() => vec![ShardError::ReadError],
            (Some(c), _) if c.own_error.is_some() => c.own_error.into_iter().collect(),
            (Some(c), None) if c.version != version => vec![ShardError::ObjectInfoInconsistency],
            (Some(_), None) => Vec::new(),
            (Some(c), Some(m)) => differences(c, m, of),
        };
        if !errs.is_empty() {
            bad.insert(osd, errs);
        }
    }
    debug_assert!(
        auth.iter().all(|a| !bad.contains_key(a)),
        "an authoritative copy is never bad"
    );
    if bad.is_empty() {
        return None;
    }
    Some(Inconsistent {
        name: name.to_string(),
        version,
        auth,
        rule,
        bad,
        copies: owned(copies),
    })
}

/// What copy `c` gets wrong against the authoritative `m`.
fn differences(c: &ScrubObject, m: &ScrubObject, of: Of) -> Vec<ShardError> {
    let mut e = Vec::new();
    if c.size != m.size {
        e.push(ShardError::SizeMismatch);
    }
    if of == Of::Replicas && c.data != m.data {
        e.push(ShardError::DataDigestMismatch);
    }
    if let (Some((size, d)), Some(data)) = (c.recorded, c.data) {
        if size == c.size && d != data {
            e.push(ShardError::DataDigestMismatchInfo);
        }
    }
    if c.omap != m.omap {
        e.push(ShardError::OmapDigestMismatch);
    }
    if c.version != m.version {
        e.push(ShardError::ObjectInfoInconsistency);
    } else if c.attrs != m.attrs {
        e.push(ShardError::AttrValueMismatch);
    }
    e
}

/// The authoritative copies among the readable ones at the version due,
/// and the rule that chose them.
fn choose(primary: i32, readable: &[(i32, &ScrubObject)], of: Of) -> (Vec<i32>, AuthRule) {
    if readable.is_empty() {
        return (Vec::new(), AuthRule::None);
    }
    // Copies whose data matches the digest their metadata keeps (deep
    // scrubs only: a shallow one read no data).
    let verified: Vec<&(i32, &ScrubObject)> = readable
        .iter()
        .filter(|(_, c)| matches!((c.recorded, c.data), (Some((n, d)), Some(x)) if n == c.size && d == x))
        .collect();
    if !verified.is_empty() {
        // Among those, the version most hold (they may still differ in
        // xattrs or omap: the largest agreeing group of them).
        let pool: Vec<(i32, &ScrubObject)> = verified.into_iter().copied().collect();
        let (auth, rule) = choose_by_votes(primary, &pool, of);
        if auth.len() == pool.len() {
            return (auth, AuthRule::DataDigest);
        }
        // (They differ in what the digest does not cover.)
        return (auth, rule);
    }
    choose_by_votes(primary, readable, of)
}

/// The largest group of copies that agree in everything; a tie goes to the
/// group holding the primary's copy, else the lowest OSD's.
fn choose_by_votes(primary: i32, readable: &[(i32, &ScrubObject)], of: Of) -> (Vec<i32>, AuthRule) {
    let mut groups: Vec<Vec<i32>> = Vec::new();
    let mut keys = Vec::new();
    for (osd, c) in readable {
        match keys.iter().position(|k| *k == key(c, of)) {
            Some(i) => groups[i].push(*osd),
            None => {
                keys.push(key(c, of));
                groups.push(vec![*osd]);
            }
        }
    }
    let most = groups.iter().map(Vec::len).max().unwrap_or(0);
    let top: Vec<&Vec<i32>> = groups.iter().filter(|g| g.len() == most).collect();
    if top.len() == 1 {
        return (top[0].clone(), AuthRule::Majority);
    }
    let pick = top
        .iter()
        .find(|g| g.contains(&primary))
        .or_else(|| top.iter().min_by_key(|g| g.iter().min().copied()))
        .map(|g| (*g).clone())
        .unwrap_or_default();
    (pick, AuthRule::Primary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str, data: &[u8]) -> ScrubObject {
        ScrubObject {
            name: name.into(),
            size: data.len() as u64,
            version: Version { epoch: 1, v: 3 },
            attrs: 7,
            omap: Some(1),
            data: Some(xxh3_64(data)),
            recorded: None,
            read_error: None,
            own_error: None,
        }
    }

    fn maps(copies: &[(i32, Option<ScrubObject>)]) -> BTreeMap<i32, Vec<ScrubObject>> {
        copies
            .iter()
            .map(|(o, c)| (*o, c.iter().cloned().collect()))
            .collect()
    }

    /// EC shards agree on their object, not on their data: shards with
    /// different data digests are consistent; one that failed its own
    /// checks, or differs in xattrs, is bad, and the others are the
    /// authoritative ones.
    #[test]
    fn shards_are_compared_by_object_and_their_own_checks() {
        let m = maps(&[
            (0, Some(obj("a", b"shard0"))),
            (1, Some(obj("a", b"shard1"))),
            (2, Some(obj("a", b"shard2"))),
        ]);
        assert!(compare_shards(0, &m, &BTreeMap::new()).is_empty());
        assert_eq!(
            compare(0, &m, &BTreeMap::new()).len(),
            1,
            "as replicas they differ"
        );
        let mut hashed = obj("a", b"shard1");
        hashed.own_error = Some(ShardError::EcHashError);
        let mut relabeled = obj("a", b"shard2");
        relabeled.attrs = 8;
        let m = maps(&[
            (0, Some(obj("a", b"shard0"))),
            (1, Some(hashed)),
            (2, Some(relabeled)),
            (3, Some(obj("a", b"shard3"))),
        ]);
        let i = &compare_shards(0, &m, &BTreeMap::new())[0];
        assert_eq!(i.auth, vec![0, 3]);
        assert_eq!(i.bad[&1], vec![ShardError::EcHashError]);
        assert_eq!(i.bad[&2], vec![ShardError::AttrValueMismatch]);
        assert_eq!(i.bad.len(), 2);
    }

    #[test]
    fn agreeing_copies_report_nothing() {
        let m = maps(&[(0, Some(obj("a", b"x"))), (1, Some(obj("a", b"x")))]);
        assert!(compare(0, &m, &BTreeMap::new()).is_empty());
    }

    #[test]
    fn the_majority_wins_and_a_tie_goes_to_the_primary() {
        let m = maps(&[
            (0, Some(obj("a", b"evil"))),
            (1, Some(obj("a", b"good"))),
            (2, Some(obj("a", b"good"))),
        ]);
        let i = &compare(0, &m, &BTreeMap::new())[0];
        assert_eq!((i.auth.clone(), i.rule), (vec![1, 2], AuthRule::Majority));
        assert_eq!(i.bad[&0], vec![ShardError::DataDigestMismatch]);
        let m = maps(&[(0, Some(obj("a", b"p"))), (1, Some(obj("a", b"q")))]);
        let i = &compare(0, &m, &BTreeMap::new())[0];
        assert_eq!((i.auth.clone(), i.rule), (vec![0], AuthRule::Primary));
        assert_eq!(i.bad.keys().copied().collect::<Vec<_>>(), vec![1]);
    }

    /// With the data's digest kept in the object's metadata, the copy that
    /// matches it is authoritative even when it is outvoted.
    #[test]
    fn a_kept_data_digest_outvotes_the_majority() {
        let digest = |c: &mut ScrubObject| c.recorded = Some((4, xxh3_64(b"good")));
        let mut good = obj("a", b"good");
        digest(&mut good);
        let mut bad = obj("a", b"evil");
        digest(&mut bad);
        let m = maps(&[(0, Some(bad.clone())), (1, Some(bad)), (2, Some(good))]);
        let i = &compare(0, &m, &BTreeMap::new())[0];
        assert_eq!((i.auth.clone(), i.rule), (vec![2], AuthRule::DataDigest));
        assert_eq!(
            i.bad[&0],
            vec![
                ShardError::DataDigestMismatch,
                ShardError::DataDigestMismatchInfo
            ]
        );
        assert_eq!(
            i.errors(),
            vec![
                ShardError::DataDigestMismatch,
                ShardError::DataDigestMismatchInfo
            ]
        );
    }

    #[test]
    fn missing_and_unreadable_copies_are_named_and_never_chosen() {
        let mut unreadable = obj("a", b"x");
        unreadable.read_error = Some("checksum mismatch".into());
        let m = maps(&[
            (0, Some(unreadable)),
            (1, None),
            (2, Some(obj("a", b"x"))),
            (3, Some(obj("b", b"y"))),
        ]);
        let found = compare(0, &m, &BTreeMap::new());
        let a = found.iter().find(|i| i.name == "a").unwrap();
        assert_eq!(a.auth, vec![2]);
        assert_eq!(a.bad[&0], vec![ShardError::ReadError]);
        assert_eq!(a.bad[&1], vec![ShardError::Missing]);
        assert_eq!(a.bad[&3], vec![ShardError::Missing]);
        let b = found.iter().find(|i| i.name == "b").unwrap();
        assert_eq!(b.auth, vec![3]);
        assert_eq!(b.bad.len(), 3);
    }

    fn at(mut o: ScrubObject, v: u64) -> ScrubObject {
        o.version = Version { epoch: 1, v };
        o
    }

    /// Only copies at the version the primary vouches for can be
    /// authoritative: a stale copy whose data matches its own kept digest
    /// does not beat the primary's newer, partially written one, nor does
    /// a stale majority.
    #[test]
    fn a_stale_copy_is_never_authoritative() {
        let mut stale = at(obj("a", b"old!"), 2);
        stale.recorded = Some((4, xxh3_64(b"old!")));
        let new = at(obj("a", b"new!"), 3);
        let m = maps(&[(0, Some(new.clone())), (1, Some(stale.clone()))]);
        let i = &compare(0, &m, &BTreeMap::new())[0];
        assert_eq!(i.auth, vec![0]);
        assert_eq!(i.version, Version { epoch: 1, v: 3 });
        assert!(i.bad[&1].contains(&ShardError::ObjectInfoInconsistency));
        let m = maps(&[
            (0, Some(new.clone())),
            (1, Some(stale.clone())),
            (2, Some(stale.clone())),
        ]);
        let i = &compare(0, &m, &BTreeMap::new())[0];
        assert_eq!(i.auth, vec![0]);
        assert_eq!(i.bad.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
        // The primary's copy unreadable: a member at its version is
        // chosen, not the stale one, though that one proves its digest.
        let mut unreadable = new.clone();
        unreadable.read_error = Some("checksum mismatch".into());
        let m = maps(&[(0, Some(unreadable)), (1, Some(stale)), (2, Some(new))]);
        let i = &compare(0, &m, &BTreeMap::new())[0];
        assert_eq!(i.auth, vec![2]);
        assert_eq!(i.bad.keys().copied().collect::<Vec<_>>(), vec![0, 1]);
    }

    /// Where the primary holds no copy its log speaks: an object it logged
    /// as removed has no authoritative copy (a leftover is stale, never
    /// brought back); one it logged as written is taken at that version.
    #[test]
    fn without_the_primarys_copy_its_log_decides() {
        let leftover = at(obj("a", b"gone"), 2);
        let m = maps(&[(0, None), (1, Some(leftover.clone()))]);
        let removed = BTreeMap::from([("a".to_string(), None)]);
        let i = &compare(0, &m, &removed)[0];
        assert_eq!((i.auth.clone(), i.rule), (vec![], AuthRule::Removed));
        assert_eq!(i.bad[&1], vec![ShardError::ObjectInfoInconsistency]);
        assert!(!i.bad.contains_key(&0), "the primary's absence is right");
        let newer = at(obj("a", b"kept"), 3);
        let m = maps(&[
            (0, None),
            (1, Some(leftover.clone())),
            (2, Some(leftover)),
            (3, Some(newer)),
        ]);
        let written = BTreeMap::from([("a".to_string(), Some(Version { epoch: 1, v: 3 }))]);
        let i = &compare(0, &m, &written)[0];
        assert_eq!(i.auth, vec![3]);
        assert_eq!(i.bad[&0], vec![ShardError::Missing]);
        // Not in the log either: the newest copy, not the most common.
        let i = &compare(0, &m, &BTreeMap::new())[0];
        assert_eq!(i.auth, vec![3]);
    }

    #[test]
    fn omap_and_xattr_differences_are_told_apart() {
        let mut o = obj("a", b"x");
        o.omap = Some(2);
        let mut x = obj("a", b"x");
        x.attrs = 8;
        let m = maps(&[
            (0, Some(obj("a", b"x"))),
            (1, Some(obj("a", b"x"))),
            (2, Some(o)),
            (3, Some(x)),
        ]);
        let i = &compare(0, &m, &BTreeMap::new())[0];
        assert_eq!(i.bad[&2], vec![ShardError::OmapDigestMismatch]);
        assert_eq!(i.bad[&3], vec![ShardError::AttrValueMismatch]);
    }

    /// A whole write keeps the data's digest; a partial one after it in
    /// the same transaction empties it; other objects are left alone.
    #[test]
    fn whole_writes_keep_the_data_digest_and_partial_ones_drop_it() {
        use loligo_store::Transaction;
        let c = CollectionId::pg(1, 0);
        let o = super::super::recovery::oid("a");
        let digest_of = |t: &Transaction| {
            t.ops.iter().rev().find_map(|op| match op {
                Op::SetAttrs { attrs, .. } => attrs
                    .iter()
                    .find(|(k, _)| k == DATA_DIGEST_ATTR)
                    .map(|(_, v)| v.clone()),
                _ => None,
            })
        };
        let mut t = Transaction::new();
        t.write_full(c, &o, bytes::Bytes::from_static(b"abc"));
        keep_data_digest(&mut t, &o);
        assert_eq!(digest_of(&t), Some(data_digest_attr(b"abc")));
        t.write(c, &o, 1, bytes::Bytes::from_static(b"z"));
        keep_data_digest(&mut t, &o);
        assert_eq!(digest_of(&t), Some(Vec::new()));
        let mut t = Transaction::new();
        t.omap_setkeys(c, &o, vec![(b"k".to_vec(), b"v".to_vec())]);
        t.write_full(c, &super::super::recovery::oid("b"), bytes::Bytes::new());
        keep_data_digest(&mut t, &o);
        assert_eq!(digest_of(&t), None);
    }

    /// A map built from a store: the digests see the data, the omap and
    /// the xattrs, and a shallow map reads no data.
    #[test]
    fn maps_digest_what_a_deep_scrub_reads() {
        use loligo_store::{MemStore, Transaction};
        let s = MemStore::new();
        let c = CollectionId::pg(1, 0);
        let o = super::super::recovery::oid("a");
        let mut t = Transaction::new();
        t.create_collection(c);
        t.touch(c, &o);
        t.write_full(c, &o, bytes::Bytes::from_static(b"hello"));
        t.setattrs(
            c,
            &o,
            vec![(DATA_DIGEST_ATTR.into(), data_digest_attr(b"hello"))],
        );
        t.omap_setkeys(c, &o, vec![(b"k".to_vec(), b"v".to_vec())]);
        s.apply(t).unwrap();
        let (deep, bytes) = build_map(&s, c, &Cursor::Start, &Cursor::End, true).unwrap();
        assert_eq!(bytes, 7);
        assert_eq!(deep[0].data, Some(xxh3_64(b"hello")));
        assert_eq!(deep[0].recorded, Some((5, xxh3_64(b"hello"))));
        let (shallow, bytes) = build_map(&s, c, &Cursor::Start, &Cursor::End, false).unwrap();
        assert_eq!((shallow[0].data, shallow[0].omap, bytes), (None, None, 0));
        let mut t = Transaction::new();
        t.omap_setkeys(c, &o, vec![(b"k".to_vec(), b"w".to_vec())]);
        s.apply(t).unwrap();
        let (again, _) = build_map(&s, c, &Cursor::Start, &Cursor::End, true).unwrap();
        assert_ne!(again[0].omap, deep[0].omap);
        assert_eq!(again[0].data, deep[0].data);
    }
}
