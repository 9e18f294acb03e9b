//! Log-based recovery, the pure parts: how a member merges the
//! authoritative log into its own (divergent entries rolled back by
//! marking their objects missing, the authority's newer entries adopted
//! with their objects missing), how the primary copies one object whole
//! (data, xattrs with the version, omap), and how a member applies that
//! copy. The PG state machine decides when; these functions only read the
//! store and build transactions.
//!
//! Persisted state: one `missing/` + name record per object a copy lacks
//! (value: the version it needs; the zero version means "whatever the
//! primary holds", for objects only a divergent entry touched). A merge
//! writes the new log, the info and every missing record in one
//! transaction; each pushed object clears its record in the transaction
//! that writes it. A crash mid-recovery therefore resumes from the
//! records, and a copy's log never claims an object it does not hold
//! without a missing record saying so.
//!
//! It must never build a transaction that leaves a log entry whose
//! object is neither present at that version nor marked missing.

use super::record::{self, RecordError};
use super::{log_key, LogEntry, PgInfo, INFO_KEY};
use crate::exec::VERSION_ATTR;
use loligo_store::{CollectionId, ObjectId, ObjectStore, StoreError, Transaction};
use loligo_types::ops::Version;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Record key prefix of the missing set.
pub const MISSING_PREFIX: &[u8] = b"missing/";
/// Omap entries read per page when copying an object.
const OMAP_PAGE: usize = 4096;

/// Record key of object `name`'s missing record.
pub fn missing_key(name: &str) -> Vec<u8> {
    let mut k = MISSING_PREFIX.to_vec();
    k.extend_from_slice(name.as_bytes());
    k
}

/// The authoritative log as the primary sends it to a member: its info
/// (`last_update` is the head) and its entries, oldest first, contiguous
/// in the version counter and ending at the head.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthLog {
    pub info: PgInfo,
    pub entries: Vec<LogEntry>,
}

impl AuthLog {
    /// The version counter just before the oldest entry (entries at or
    /// below it were trimmed; 0 when the log holds the whole history).
    pub fn tail(&self) -> u64 {
        self.entries
            .first()
            .map_or(self.info.last_update.v, |e| e.version.v - 1)
    }
}

/// One object's whole state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectCopy {
    #[serde(with = "loligo_bulk::serde")]
    pub data: bytes::Bytes,
    /// Every xattr, the OSD's own (the version) included.
    pub attrs: Vec<(String, Vec<u8>)>,
    pub omap_header: Vec<u8>,
    pub omap: Vec<(Vec<u8>, Vec<u8>)>,
}

impl ObjectCopy {
    /// Bytes of data and omap entries (what a push mostly carries).
    pub fn payload_len(&self) -> u64 {
        self.data.len() as u64
            + self
                .omap
                .iter()
                .map(|(k, v)| (k.len() + v.len()) as u64)
                .sum::<u64>()
    }
}

/// An object as the primary pushes it to a member missing it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Push {
    pub name: String,
    /// The object's version on the primary (zero: it does not exist).
    pub version: Version,
    /// `None`: the object does not exist (the member removes its copy).
    pub copy: Option<ObjectCopy>,
}

/// A member's view of a merge.
#[derive(Debug)]
pub enum Merge {
    /// The transaction that makes this copy's log the authority's, and
    /// the copy's missing set and info after it.
    Merged {
        txn: Transaction,
        missing: BTreeMap<String, Version>,
        info: PgInfo,
    },
    /// The logs do not overlap (the authority trimmed past this copy's
    /// head, or they part below its tail): only backfill can help.
    NoOverlap,
}

pub use super::split::Owner;

/// A PG's object id for `name`.
pub fn oid(name: &str) -> ObjectId {
    ObjectId::new(
        loligo_crush::hash::str_hash_rjenkins(name.as_bytes()),
        name.to_string(),
    )
}

/// The log entry this copy holds at version counter `v`.
pub(super) fn entry_at(
    s: &dyn ObjectStore,
    coll: CollectionId,
    v: u64,
) -> Result<Option<LogEntry>, String> {
    match s.record(coll, &log_key(v)) {
        Ok(Some(b)) => record::decode_log(&b).map(Some).map_err(|e| e.to_string()),
        Ok(None) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// The missing set a copy persisted.
pub fn load_missing(
    s: &dyn ObjectStore,
    coll: CollectionId,
) -> Result<BTreeMap<String, Version>, String> {
    let mut out = BTreeMap::new();
    for (k, v) in records_with(s, coll, MISSING_PREFIX, None)? {
        let name = String::from_utf8(k[MISSING_PREFIX.len()..].to_vec())
            .map_err(|_| "a missing record's name is not UTF-8".to_string())?;
        let need = record::decode_missing(&v).map_err(|e: RecordError| e.to_string())?;
        out.insert(name, need);
    }
    Ok(out)
}

/// An authoritative log must run without a gap from its tail up to its
/// head.
fn check_contiguous(auth: &AuthLog) -> Result<(), String> {
    let head = auth.info.last_update;
    let tail = auth.tail();
    let contiguous = auth
        .entries
        .iter()
        .enumerate()
        .all(|(i, e)| e.version.v == tail + 1 + i as u64);
    let ends_at_head = auth
        .entries
        .last()
        .map_or(tail == head.v, |e| e.version == head);
    if !contiguous || !ends_at_head {
        return Err(format!(
            "the authoritative log is not contiguous up to its head {head:?}"
        ));
    }
    Ok(())
}

/// The version counter at which this copy's log (head `mine`) and the
/// authority's meet (see [`merge`]); `None` when nothing can be compared
/// (the copy is backfilled).
fn common_point(
    s: &dyn ObjectStore,
    coll: CollectionId,
    mine: Version,
    auth: &AuthLog,
) -> Result<Option<u64>, String> {
    let head = auth.info.last_update;
    let tail = auth.tail();
    let by_v: BTreeMap<u64, &LogEntry> = auth.entries.iter().map(|e| (e.version.v, e)).collect();
    // Walk down from the lower head.
    let mut v = mine.v.min(head.v);
    while v > tail {
        let theirs = by_v.get(&v).map(|e| e.version);
        let ours = entry_at(s, coll, v)?.map(|e| e.version);
        if ours.is_some() && ours == theirs {
            return Ok(Some(v));
        }
        // This copy trimmed its entry at `v`, but its next one was written
        // on top of the authority's at `v`: it says so (`prev`), or, from
        // before entries did, it was written in the same epoch (one
        // primary wrote both). Without this, on an EC pool, a copy whose
        // log began just past the head could not merge, and the PG waited
        // for a backfill no member could do; and with OSDs declared lost,
        // a recorded complete member, past the head with its log trimmed,
        // was backfilled, and the PG lost the shard it held.
        if ours.is_none() && v < mine.v {
            if let (Some(next), Some(t)) = (entry_at(s, coll, v + 1)?, theirs) {
                let on_top = match next.prev {
                    Some(p) => p == t,
                    None => next.version.epoch == t.epoch,
                };
                if on_top {
                    return Ok(Some(v));
                }
            }
        }
        v -= 1;
    }
    // No entry above the authority's tail in common, but this copy's
    // entry at the tail (its head, or under divergent ones) is the one
    // the authority's oldest entry was written on (`prev`): the logs meet
    // there. Ceph's rule too: a copy at or past the log's tail recovers
    // from the log (on an EC pool with OSDs declared lost, a recorded
    // member one write behind an authority that kept only the two entries
    // past it was backfilled from the start; with every complete copy then
    // lost, its shards were gone and the PG waited for good).
    if tail > 0 && mine.v >= tail {
        let ours = match entry_at(s, coll, tail)? {
            Some(e) => Some(e.version),
            None if mine.v == tail => Some(mine),
            None => None,
        };
        let below_first = auth.entries.first().and_then(|e| e.prev);
        if ours.is_some() && ours == below_first {
            return Ok(Some(tail));
        }
    }
    // Below the authority's tail nothing can be compared: only a copy
    // with no history at all, against a log that was never trimmed,
    // starts from zero.
    if tail == 0 && (mine.v == 0 || entry_at(s, coll, 1)?.is_some()) {
        return Ok(Some(0));
    }
    Ok(None)
}

/// Merge `auth` into this copy (head `mine`, missing set `missing`,
/// backfill cursor `backfill` if it is backfilling: objects past the
/// cursor are backfill's to copy, never marked missing).
///
/// The common point is the newest version counter at which both logs hold
/// the same entry (a version names one write, and a copy only takes a
/// write on top of its predecessor, so equal entries mean equal logs up to
/// there). Entries of this copy past it are divergent: their objects are
/// marked missing (the primary will push its state, or the object's
/// absence). Entries of the authority past it are adopted, their objects
/// marked missing at the entry's version.
pub fn merge(
    s: &dyn ObjectStore,
    coll: CollectionId,
    mine: Version,
    missing: &BTreeMap<String, Version>,
    backfill: Option<&super::Cursor>,
    auth: &AuthLog,
    ec: bool,
) -> Result<Merge, String> {
    merge_owned(s, coll, mine, missing, backfill, auth, ec, Owner::ALL)
}

/// [`merge`] for a copy that owns only what `owner` says: entries a split
/// left in its log that name another PG's objects mark nothing missing
/// and undo nothing here.
#[allow(clippy::too_many_arguments)] // merge's, and whose objects count
pub fn merge_owned(
    s: &dyn ObjectStore,
    coll: CollectionId,
    mine: Version,
    missing: &BTreeMap<String, Version>,
    backfill: Option<&super::Cursor>,
    auth: &AuthLog,
    ec: bool,
    owner: Owner,
) -> Result<Merge, String> {
    let ours = |name: &str| owner.owns(name) && backfill.is_none_or(|c| c.covers(&oid(name)));
    let head = auth.info.last_update;
    let tail = auth.tail();
    check_contiguous(auth)?;
    let Some(common) = common_point(s, coll, mine, auth)? else {
        return Ok(Merge::NoOverlap);
    };
    // A copy taken as it was since the common point (the authority's
    // here, or this copy's own divergent one, met below): objects the logs
    // do not name may differ, so this copy is backfilled.
    if auth
        .entries
        .iter()
        .any(|e| e.version.v > common && e.is_reset())
    {
        return Ok(Merge::NoOverlap);
    }
    let mut missing = missing.clone();
    let mut t = Transaction::new();
    // The newest version the authority's log gives each object it names.
    let newest: BTreeMap<&str, Version> = auth
        .entries
        .iter()
        .map(|e| (e.name.as_str(), e.version))
        .collect();
    // Divergent entries: gone from the log, their objects to be fetched.
    for v in common + 1..=mine.v {
        if let Some(e) = entry_at(s, coll, v)? {
            if e.is_reset() {
                return Ok(Merge::NoOverlap);
            }
            // An EC shard undoes the entry itself from its rollback copy
            // (the shards that have the entry may be too few to rebuild
            // the object at either version).
            if ours(&e.name) && !(ec && roll_back(s, coll, &e, &mut t)?) {
                // Needed as the authority has it: a version this copy
                // was missing it at may be the divergent one (on an EC
                // pool, every pull was refused as older than a version no
                // member would ever hold).
                let need = newest.get(e.name.as_str()).copied().unwrap_or_default();
                missing.insert(e.name, need);
            }
        }
        t.rm_record(coll, &log_key(v));
    }
    // The authority's entries: the newer ones with their objects to
    // fetch, the older ones rewritten as they are (this copy may have
    // trimmed some of them when it took a divergent entry).
    for e in &auth.entries {
        if e.version.v > common && ours(&e.name) {
            missing.insert(e.name.clone(), e.version);
        }
        t.set_record(coll, &log_key(e.version.v), record::encode_log(e));
    }
    // Entries the authority trimmed go here too: the logs then agree
    // entry for entry.
    for k in record_keys(s, coll, b"log/", Some(&log_key(tail + 1)))? {
        t.rm_record(coll, &k);
    }
    // No object is needed past the authority's head: a need from a write
    // this copy took and then lost to the rollback of its entry is stale
    // (on an EC pool, every pull of it was refused, forever).
    for (name, need) in missing.iter_mut() {
        if need.v > head.v {
            *need = newest.get(name.as_str()).copied().unwrap_or_default();
        }
    }
    for (name, need) in &missing {
        t.set_record(coll, &missing_key(name), record::encode_missing(need));
    }
    let info = PgInfo {
        last_update: head,
        ..auth.info
    };
    t.set_record(coll, INFO_KEY, record::encode_info(&info));
    Ok(Merge::Merged {
        txn: t,
        missing,
        info,
    })
}

/// Undo divergent entry `e` on an EC shard, if the shard holds the object
/// as `e` left it and the log says what it was before: absent (then the
/// object goes), or at a version its rollback copy holds (every EC write
/// first clones the object there). A give-up that wrote an older version
/// back is relabelled with that version. Whether the object is now as
/// the log says; otherwise it is marked missing and recovered. The log
/// decides, never the rollback copy's absence alone: a pushed or pulled
/// object may have none (a pulled object was taken for one its divergent
/// entry created, and removed).
fn roll_back(
    s: &dyn ObjectStore,
    coll: CollectionId,
    e: &LogEntry,
    t: &mut Transaction,
) -> Result<bool, String> {
    let o = oid(&e.name);
    let rb = crate::ec::rollback_oid(&o);
    let err = |x: StoreError| x.to_string();
    let version_of = |x: &ObjectId| -> Result<Option<Version>, String> {
        match s.getattr(coll, x, VERSION_ATTR) {
            Ok(b) => postcard::from_bytes(&b)
                .map(Some)
                .map_err(|_| format!("{}: corrupt version", e.name)),
            Err(StoreError::NoObject { .. }) | Err(StoreError::NoAttr { .. }) => Ok(None),
            Err(x) => Err(err(x)),
        }
    };
    let cur = version_of(&o)?;
    let applied = if e.removed {
        cur.is_none()
    } else {
        cur == Some(e.version)
    };
    if !applied {
        return Ok(false);
    }
    // The object's state before `e`, from this copy's log below it (the
    // entries below the common point are the authority's too).
    let before = state_before(s, coll, e)?;
    match before {
        Some(Some(pv)) if s.exists(coll, &rb).map_err(err)? && version_of(&rb)? == Some(pv) => {
            t.clone_object(coll, &rb, &o);
            t.remove(coll, &rb);
            Ok(true)
        }
        Some(None) if !e.removed => {
            t.remove(coll, &o);
            if s.exists(coll, &rb).map_err(err)? {
                t.touch(coll, &rb).remove(coll, &rb);
            }
            Ok(true)
        }
        // A give-up that wrote back an older version holds that version's
        // shard under its own version: it is that version again, whole,
        // and needed only if the log wants it (with OSDs declared lost:
        // kept at the give-up's version, the shard read as proof that its
        // copy took the write the give-up undid, and the write, which no
        // copy could rebuild, was waited for for good).
        _ => match &e.gave_up {
            Some(super::GaveUp::Object(to)) if to.v > 0 && !e.removed => {
                let label = postcard::to_stdvec(to).map_err(|x| x.to_string())?;
                t.setattr(coll, &o, VERSION_ATTR, label);
                Ok(before == Some(Some(*to)))
            }
            _ => Ok(false),
        },
    }
}

/// What object `e.name` was just before entry `e`: absent (`Some(None)`),
/// at a version (`Some(Some(v))`), or unknown (`None`). The entry says so
/// itself when its writer recorded it; else this copy's log below it does,
/// unless it was trimmed there or a copy taken as it was stands in between
/// (on an EC pool with OSDs declared lost, an unacknowledged write's entry
/// outlived the entries below it, so no rollback could say what to
/// restore, and its PG waited for good on a write that could not be
/// rebuilt).
pub(super) fn state_before(
    s: &dyn ObjectStore,
    coll: CollectionId,
    e: &LogEntry,
) -> Result<Option<Option<Version>>, String> {
    if let Some(known) = e.before.known() {
        return Ok(Some(known));
    }
    let mut before: Option<Option<Version>> = None;
    let mut v = e.version.v;
    while v > 1 {
        v -= 1;
        match entry_at(s, coll, v)? {
            Some(p) if p.name == e.name => {
                before = Some((!p.removed).then_some(p.version));
                break;
            }
            // A copy taken as it was (`GaveUp::Copy`): its objects, not
            // its log, hold what came before (with OSDs declared lost, an
            // object older than such an entry was taken for one the
            // rolled-back write created, and removed).
            Some(p) if p.is_reset() => break,
            Some(_) => {}
            // The log was trimmed here: unknown.
            None => break,
        }
    }
    let whole = |p: &LogEntry| p.name != e.name && !p.is_reset();
    if before.is_none() && v <= 1 && entry_at(s, coll, 1)?.is_some_and(|p| whole(&p)) {
        // The whole history is here and never named the object.
        before = Some(None);
    }
    Ok(before)
}

/// The keys of this copy's records that start with `prefix`, in order,
/// stopping before `end` if given.
pub fn record_keys(
    s: &dyn ObjectStore,
    coll: CollectionId,
    prefix: &[u8],
    end: Option<&[u8]>,
) -> Result<Vec<Vec<u8>>, String> {
    Ok(records_with(s, coll, prefix, end)?
        .into_iter()
        .map(|(k, _)| k)
        .collect())
}

/// Records as (key, value) pairs.
pub type Records = Vec<(Vec<u8>, Vec<u8>)>;

/// Every object of copy `coll`, in the store's order.
pub fn all_objects(s: &dyn ObjectStore, coll: CollectionId) -> Result<Vec<ObjectId>, String> {
    let mut out = Vec::new();
    let mut start: Option<ObjectId> = None;
    loop {
        let (page, next) = (s.list(coll, start.as_ref(), 1024)).map_err(|e| e.to_string())?;
        out.extend(page);
        match next {
            Some(n) => start = Some(n),
            None => return Ok(out),
        }
    }
}

/// This copy's records whose keys start with `prefix`, with their values,
/// in order, stopping before `end` if given.
pub fn records_with(
    s: &dyn ObjectStore,
    coll: CollectionId,
    prefix: &[u8],
    end: Option<&[u8]>,
) -> Result<Records, String> {
    let mut out = Vec::new();
    let mut start = prefix.to_vec();
    loop {
        let rows = s.records(coll, &start, 1024).map_err(|e| e.to_string())?;
        let n = rows.len();
        for (k, v) in rows {
            if !k.starts_with(prefix) || end.is_some_and(|e| k.as_slice() >= e) {
                return Ok(out);
            }
            start = k.clone();
            start.push(0);
            out.push((k, v));
        }
        if n < 1024 {
            return Ok(out);
        }
    }
}

/// Read object `name` whole (`None`: it does not exist), with its version.
pub fn read_copy(s: &dyn ObjectStore, coll: CollectionId, name: &str) -> Result<Push, StoreError> {
    read_copy_with(s, coll, name, true)
}

/// As `read_copy`; without `data`, the copy's bytes are left empty (an
/// erasure-coded backfill rebuilds them for the target by the code's
/// plan: reading this shard whole too would be a read the plan does not
/// make).
pub fn read_copy_with(
    s: &dyn ObjectStore,
    coll: CollectionId,
    name: &str,
    data: bool,
) -> Result<Push, StoreError> {
    let o = oid(name);
    let Some(whole) = s.read_whole(coll, &o, data)? else {
        return Ok(Push {
            name: name.to_string(),
            version: Version::default(),
            copy: None,
        });
    };
    let data = whole.data;
    let attrs: Vec<(String, Vec<u8>)> = whole.attrs.into_iter().collect();
    let version = attrs
        .iter()
        .find(|(k, _)| k == VERSION_ATTR)
        .and_then(|(_, v)| postcard::from_bytes(v).ok())
        .unwrap_or_default();
    let omap_header = whole.omap_header;
    let mut omap = Vec::new();
    let mut start = Vec::new();
    // (An object the store knows has no omap keys is not looked up again.)
    if whole.omap {
        loop {
            let page = s.omap_range(coll, &o, &start, None, OMAP_PAGE)?;
            let n = page.len();
            if let Some((k, _)) = page.last() {
                start = k.clone();
                start.push(0);
            }
            omap.extend(page);
            if n < OMAP_PAGE {
                break;
            }
        }
    }
    Ok(Push {
        name: name.to_string(),
        version,
        copy: Some(ObjectCopy {
            data: data.into(),
            attrs,
            omap_header,
            omap,
        }),
    })
}

/// The version attribute of object `o` in `coll`: `None` if there is no
/// such object, `Some(None)` if it has none (or an unreadable one).
pub fn stored_version(
    s: &dyn ObjectStore,
    coll: CollectionId,
    o: &ObjectId,
) -> Result<Option<Option<Version>>, StoreError> {
    Ok(s.stat_attr(coll, o, VERSION_ATTR)?
        .map(|(_, v)| v.and_then(|b| postcard::from_bytes::<Version>(&b).ok())))
}

/// What an erasure-coded shard keeps, as the object's rollback copy, of
/// what a push replaces.
///
/// A recovered version may be one no write set took whole (a write never
/// acknowledged that k shards still rebuild, taken as the head): until
/// every member holds it, the version it replaced may be the newest one
/// the PG can still read if the shards holding the new one are lost, and
/// a later peering rolls the entry back from the rollback copy just as it
/// does a write's (a pulled shard replaced the only other shard of an
/// acknowledged write, then the OSD holding the pulled version was
/// declared lost and the write could be read no more).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prior {
    /// A replicated copy: there are no rollback copies.
    Replicated,
    /// The rollback copy goes, whatever the store shows now (it belongs
    /// to writes this copy missed, and one queued may make it).
    Drop,
    /// The replaced object becomes the rollback copy.
    KeepObject,
    /// The rollback copy stays as it is.
    KeepRollback,
}

/// Which of this shard's copies of `p.name` push `p` keeps: the object if
/// it is worth keeping, else the rollback copy if that is, else neither.
/// A copy is worth keeping when it holds a version further down the log
/// than the pushed one (by counter, as the shards' own logs order them),
/// or another shard than the pushed one (its OSD moved position: that
/// shard may be the only one left of an acknowledged write). Reads judge a
/// kept copy by its version and shard labels, so a stale answer (a
/// transaction still queued changes the object) costs at most a useless
/// copy, never a wrong one: the push touches the object before it clones
/// it.
pub fn prior_to_keep(
    s: &dyn ObjectStore,
    coll: CollectionId,
    p: &Push,
) -> Result<Prior, StoreError> {
    let o = oid(&p.name);
    let pushed_label = p.copy.as_ref().and_then(|c| {
        c.attrs
            .iter()
            .find(|(k, _)| k == crate::ec::SHARD_ATTR)
            .map(|(_, v)| v.clone())
    });
    let worth = |x: &ObjectId| -> Result<bool, StoreError> {
        let Some(Some(v)) = stored_version(s, coll, x)? else {
            return Ok(false);
        };
        if v.v > 0 && v.v < p.version.v {
            return Ok(true);
        }
        let Some(pushed) = &pushed_label else {
            return Ok(false);
        };
        Ok(match s.stat_attr(coll, x, crate::ec::SHARD_ATTR)? {
            Some((_, Some(held))) => held != *pushed,
            _ => false,
        })
    };
    Ok(if worth(&o)? {
        Prior::KeepObject
    } else if worth(&crate::ec::rollback_oid(&o))? {
        Prior::KeepRollback
    } else {
        Prior::Drop
    })
}

/// The transaction that replaces this copy's object with the pushed one
/// (or removes it) and clears its missing record; `prior` says what an
/// erasure-coded shard keeps of the replaced one.
pub fn push_txn(coll: CollectionId, p: &Push, prior: Prior) -> Transaction {
    let o = oid(&p.name);
    let mut t = Transaction::new();
    // The push replaces whatever the copy holds when it applies, which
    // may differ from what the store shows now (a merge queued before it
    // can roll the object back from its rollback copy, and a push planned
    // on what the store showed then failed and stopped the OSD): touched,
    // then removed, whatever is there.
    let rb = crate::ec::rollback_oid(&o);
    t.touch(coll, &o);
    match prior {
        Prior::Replicated | Prior::KeepRollback => {}
        Prior::Drop => {
            t.touch(coll, &rb).remove(coll, &rb);
        }
        Prior::KeepObject => {
            t.clone_object(coll, &o, &rb);
        }
    }
    t.remove(coll, &o);
    if let Some(c) = &p.copy {
        t.touch(coll, &o);
        if !c.data.is_empty() {
            t.write_full(coll, &o, c.data.clone());
        }
        if !c.attrs.is_empty() {
            t.setattrs(coll, &o, c.attrs.clone());
        }
        if !c.omap_header.is_empty() {
            t.omap_setheader(coll, &o, c.omap_header.clone());
        }
        if !c.omap.is_empty() {
            t.omap_setkeys(coll, &o, c.omap.clone());
        }
    }
    t.rm_record(coll, &missing_key(&p.name));
    t
}

/// The primary's log entries after `after` (exclusive), oldest first.
pub fn read_log(
    s: &dyn ObjectStore,
    coll: CollectionId,
    after: u64,
    max: usize,
) -> Result<Vec<LogEntry>, String> {
    let rows = s
        .records(coll, &log_key(after + 1), max)
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (k, v) in rows {
        if !k.starts_with(b"log/") {
            break;
        }
        out.push(record::decode_log(&v).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pg::Before;
    use loligo_store::MemStore;

    fn v(epoch: u64, v: u64) -> Version {
        Version { epoch, v }
    }

    fn entry(version: Version, name: &str) -> LogEntry {
        LogEntry {
            version,
            name: name.into(),
            removed: false,
            reqid: None,
            gave_up: None,
            before: Before::Unknown,
            prev: None,
        }
    }

    /// A copy whose log holds `entries`, with an object per entry.
    fn copy_with(entries: &[LogEntry]) -> (MemStore, CollectionId) {
        let s = MemStore::new();
        let c = CollectionId::pg(1, 0);
        let mut t = Transaction::new();
        t.create_collection(c);
        for e in entries {
            t.write_full(c, &oid(&e.name), e.version.v.to_le_bytes().to_vec());
            t.set_record(c, &log_key(e.version.v), record::encode_log(e));
        }
        s.apply(t).unwrap();
        (s, c)
    }

    #[test]
    fn what_came_before_an_entry_is_its_own_word_else_the_log_below_it() {
        // Entries 5 and 6 only: the log below them was trimmed.
        let old = entry(v(3, 6), "x");
        let (s, c) = copy_with(&[entry(v(3, 5), "y"), old.clone()]);
        // An entry from before entries said so: nothing below names x.
        assert_eq!(state_before(&s, c, &old), Ok(None));
        // An entry that says so answers whatever the log holds.
        for (b, want) in [
            (Before::Absent, Some(None)),
            (Before::At(v(2, 4)), Some(Some(v(2, 4)))),
        ] {
            let e = LogEntry {
                before: b,
                ..old.clone()
            };
            assert_eq!(state_before(&s, c, &e), Ok(want));
        }
        // A whole log still answers for an entry that does not say.
        let third = LogEntry {
            version: v(1, 3),
            ..old.clone()
        };
        let (s, c) = copy_with(&[entry(v(1, 1), "y"), entry(v(1, 2), "x"), third.clone()]);
        assert_eq!(state_before(&s, c, &third), Ok(Some(Some(v(1, 2)))));
        let (s, c) = copy_with(&[entry(v(1, 1), "y"), old.clone()]);
        let first = LogEntry {
            version: v(1, 2),
            ..old.clone()
        };
        assert_eq!(state_before(&s, c, &first), Ok(Some(None)));
    }

    #[test]
    fn a_log_trimmed_to_just_past_the_head_merges_by_the_epoch_of_its_next_entry() {
        // This copy kept entries 4 and 5 (epoch 7); the authority's head
        // is 3, written in epoch 7 too: one primary wrote 3, then 4 on it.
        let mine = [entry(v(7, 4), "x"), entry(v(7, 5), "y")];
        let (s, c) = copy_with(&mine);
        let auth = |head_epoch| AuthLog {
            info: PgInfo {
                last_update: v(head_epoch, 3),
                ..PgInfo::default()
            },
            entries: vec![entry(v(6, 2), "a"), entry(v(head_epoch, 3), "b")],
        };
        let Merge::Merged { missing, info, .. } =
            merge(&s, c, v(7, 5), &BTreeMap::new(), None, &auth(7), false).unwrap()
        else {
            panic!("the logs meet at 7'3");
        };
        // Its own two entries are divergent; nothing of the authority's
        // is newer than the common point.
        assert_eq!(info.last_update, v(7, 3));
        assert_eq!(
            missing.keys().cloned().collect::<Vec<_>>(),
            vec!["x".to_string(), "y".to_string()]
        );
        // Written in another epoch, the authority's 3 may be another
        // write than the one this copy's 4 followed: no overlap.
        assert!(matches!(
            merge(&s, c, v(7, 5), &BTreeMap::new(), None, &auth(6), false).unwrap(),
            Merge::NoOverlap
        ));
    }

    #[test]
    fn a_log_trimmed_past_the_head_merges_if_its_oldest_entry_was_written_on_the_head() {
        // This copy kept entries 2 and 3 (epoch 58), written by a primary
        // whose head was 55'1; it trimmed entry 1. The authority's head is
        // 55'1 (EC lost sim seed 94358: such a copy, a recorded complete
        // member, was backfilled instead, and the PG lost its shard).
        let on = |e: LogEntry, prev| LogEntry {
            prev: Some(prev),
            ..e
        };
        let mine = [
            on(entry(v(58, 2), "x"), v(55, 1)),
            on(entry(v(58, 3), "y"), v(58, 2)),
        ];
        let (s, c) = copy_with(&mine);
        let auth = |head: Version| AuthLog {
            info: PgInfo {
                last_update: head,
                ..PgInfo::default()
            },
            entries: vec![entry(head, "a")],
        };
        let Merge::Merged { missing, info, .. } = merge(
            &s,
            c,
            v(58, 3),
            &BTreeMap::new(),
            None,
            &auth(v(55, 1)),
            false,
        )
        .unwrap() else {
            panic!("the logs meet at 55'1");
        };
        // Its own two entries are divergent; the authority's one entry is
        // the common point, nothing to fetch for it.
        assert_eq!(info.last_update, v(55, 1));
        assert_eq!(
            missing.keys().cloned().collect::<Vec<_>>(),
            vec!["x".to_string(), "y".to_string()]
        );
        // Another write at counter 1 (another epoch's): this copy's
        // entries were not written on it, and nothing can be compared.
        assert!(matches!(
            merge(
                &s,
                c,
                v(58, 3),
                &BTreeMap::new(),
                None,
                &auth(v(56, 1)),
                false
            )
            .unwrap(),
            Merge::NoOverlap
        ));
    }

    #[test]
    fn divergent_entries_are_rolled_back_and_newer_ones_adopted() {
        let mine = [
            entry(v(1, 1), "a"),
            entry(v(1, 2), "b"),
            entry(v(1, 3), "c"),
        ];
        let (s, c) = copy_with(&mine);
        let auth = AuthLog {
            info: PgInfo {
                last_update: v(2, 3),
                ..PgInfo::default()
            },
            entries: vec![
                entry(v(1, 1), "a"),
                entry(v(2, 2), "d"),
                entry(v(2, 3), "b"),
            ],
        };
        let Merge::Merged { txn, missing, info } =
            merge(&s, c, v(1, 3), &BTreeMap::new(), None, &auth, false).unwrap()
        else {
            panic!("the logs overlap at 1'1");
        };
        // b and d at the authority's versions; c (only in a divergent
        // entry) at whatever the primary holds.
        let want: BTreeMap<String, Version> = [
            ("b".to_string(), v(2, 3)),
            ("c".to_string(), Version::default()),
            ("d".to_string(), v(2, 2)),
        ]
        .into();
        assert_eq!(missing, want);
        assert_eq!(info.last_update, v(2, 3));
        s.apply(txn).unwrap();
        // The log is now the authority's, and the missing set persisted.
        assert_eq!(read_log(&s, c, 0, 100).unwrap(), auth.entries);
        assert_eq!(load_missing(&s, c).unwrap(), want);
        // A push of c's absence removes the divergent object and its record.
        let p = Push {
            name: "c".into(),
            version: Version::default(),
            copy: None,
        };
        s.apply(push_txn(c, &p, Prior::Drop)).unwrap();
        assert!(!s.exists(c, &oid("c")).unwrap());
        assert!(!load_missing(&s, c).unwrap().contains_key("c"));
    }

    #[test]
    fn a_copy_behind_the_authoritys_tail_needs_a_backfill() {
        let (s, c) = copy_with(&[entry(v(1, 1), "a"), entry(v(1, 2), "b")]);
        // The authority kept only entries 5..6.
        let auth = AuthLog {
            info: PgInfo {
                last_update: v(3, 6),
                ..PgInfo::default()
            },
            entries: vec![entry(v(3, 5), "x"), entry(v(3, 6), "y")],
        };
        assert!(matches!(
            merge(&s, c, v(1, 2), &BTreeMap::new(), None, &auth, false),
            Ok(Merge::NoOverlap)
        ));
        // An empty copy against a log that was never trimmed starts from 0.
        let (s2, c2) = copy_with(&[]);
        let full = AuthLog {
            info: PgInfo {
                last_update: v(1, 2),
                ..PgInfo::default()
            },
            entries: vec![entry(v(1, 1), "a"), entry(v(1, 2), "b")],
        };
        let Ok(Merge::Merged { missing, .. }) = merge(
            &s2,
            c2,
            Version::default(),
            &BTreeMap::new(),
            None,
            &full,
            false,
        ) else {
            panic!("an empty copy merges a whole log");
        };
        assert_eq!(missing.len(), 2);
    }

    #[test]
    fn a_copy_at_the_authoritys_tail_merges_by_what_its_oldest_entry_was_written_on() {
        // This copy's head is 112'2; the authority kept only 112'3 and
        // 112'4, the first written on 112'2 (EC lost sim seed 228608).
        let (s, c) = copy_with(&[entry(v(112, 1), "a"), entry(v(112, 2), "b")]);
        let auth = |prev: Option<Version>| AuthLog {
            info: PgInfo {
                last_update: v(112, 4),
                ..PgInfo::default()
            },
            entries: vec![
                LogEntry {
                    prev,
                    ..entry(v(112, 3), "x")
                },
                LogEntry {
                    prev: Some(v(112, 3)),
                    ..entry(v(112, 4), "y")
                },
            ],
        };
        let Ok(Merge::Merged { missing, info, .. }) = merge(
            &s,
            c,
            v(112, 2),
            &BTreeMap::new(),
            None,
            &auth(Some(v(112, 2))),
            false,
        ) else {
            panic!("the logs meet at 112'2");
        };
        assert_eq!(info.last_update, v(112, 4));
        let want: BTreeMap<String, Version> =
            [("x".to_string(), v(112, 3)), ("y".to_string(), v(112, 4))].into();
        assert_eq!(missing, want);
        // Written on another write at counter 2, or not saying: nothing
        // to compare, a backfill.
        for prev in [Some(v(111, 2)), None] {
            assert!(matches!(
                merge(&s, c, v(112, 2), &BTreeMap::new(), None, &auth(prev), false),
                Ok(Merge::NoOverlap)
            ));
        }
        // A copy with a divergent entry above the tail meets it there too,
        // and the divergent object is fetched.
        let (s2, c2) = copy_with(&[
            entry(v(112, 1), "a"),
            entry(v(112, 2), "b"),
            entry(v(111, 3), "z"),
        ]);
        let Ok(Merge::Merged { missing, info, .. }) = merge(
            &s2,
            c2,
            v(111, 3),
            &BTreeMap::new(),
            None,
            &auth(Some(v(112, 2))),
            false,
        ) else {
            panic!("the logs meet at 112'2 below a divergent entry");
        };
        assert_eq!(info.last_update, v(112, 4));
        assert!(missing.contains_key("z") && missing.contains_key("x"));
    }

    #[test]
    fn a_pushed_copy_replaces_the_object_whole() {
        let (s, c) = copy_with(&[entry(v(1, 1), "a")]);
        let mut t = Transaction::new();
        t.omap_setkeys(c, &oid("a"), vec![(b"old".to_vec(), b"x".to_vec())]);
        t.set_record(c, &missing_key("a"), record::encode_missing(&v(2, 2)));
        s.apply(t).unwrap();
        let (src, sc) = copy_with(&[entry(v(2, 2), "a")]);
        let mut t = Transaction::new();
        t.setattr(
            sc,
            &oid("a"),
            VERSION_ATTR,
            postcard::to_stdvec(&v(2, 2)).unwrap(),
        );
        t.omap_setkeys(sc, &oid("a"), vec![(b"new".to_vec(), b"y".to_vec())]);
        t.omap_setheader(sc, &oid("a"), b"h".to_vec());
        src.apply(t).unwrap();
        let p = read_copy(&src, sc, "a").unwrap();
        assert_eq!(p.version, v(2, 2));
        s.apply(push_txn(c, &p, Prior::Drop)).unwrap();
        assert_eq!(read_copy(&s, c, "a").unwrap(), p, "same data, xattrs, omap");
        assert!(load_missing(&s, c).unwrap().is_empty());
    }

    /// Shard `o` at version `ver`, with a byte of data.
    fn put_shard(s: &MemStore, c: CollectionId, o: &ObjectId, ver: Version, byte: u8) {
        let mut t = Transaction::new();
        t.write_full(c, o, vec![byte]);
        t.setattr(c, o, VERSION_ATTR, postcard::to_stdvec(&ver).unwrap());
        s.apply(t).unwrap();
    }

    #[test]
    fn an_ec_push_keeps_the_newest_replaced_version_as_the_rollback_copy() {
        let (s, c) = copy_with(&[entry(v(1, 1), "a"), entry(v(2, 2), "a")]);
        let (a, rb) = (oid("a"), crate::ec::rollback_oid(&oid("a")));
        let data = |o: &ObjectId| s.read(c, o, &[(0, 1)]).unwrap().concat();
        put_shard(&s, c, &a, v(2, 2), 2);
        put_shard(&s, c, &rb, v(1, 1), 1);
        let push = |ver: Version, byte: u8| Push {
            name: "a".into(),
            version: ver,
            copy: Some(ObjectCopy {
                data: vec![byte].into(),
                attrs: vec![(VERSION_ATTR.into(), postcard::to_stdvec(&ver).unwrap())],
                omap_header: Vec::new(),
                omap: Vec::new(),
            }),
        };
        // The object (2'2) is newer than the rollback copy (1'1): it is kept.
        let p = push(v(3, 3), 3);
        let prior = prior_to_keep(&s, c, &p).unwrap();
        assert_eq!(prior, Prior::KeepObject);
        s.apply(push_txn(c, &p, prior)).unwrap();
        assert_eq!((data(&a), data(&rb)), (vec![3], vec![2]));
        // A version past the push (a divergent write) is not kept; the
        // rollback copy (2'2 now) is.
        put_shard(&s, c, &a, v(5, 5), 5);
        let p = push(v(4, 4), 4);
        let prior = prior_to_keep(&s, c, &p).unwrap();
        assert_eq!(prior, Prior::KeepRollback);
        s.apply(push_txn(c, &p, prior)).unwrap();
        assert_eq!((data(&a), data(&rb)), (vec![4], vec![2]));
        // Nothing below the push: the rollback copy goes.
        let p = push(v(2, 2), 6);
        let prior = prior_to_keep(&s, c, &p).unwrap();
        assert_eq!(prior, Prior::Drop);
        s.apply(push_txn(c, &p, prior)).unwrap();
        assert!(!s.exists(c, &rb).unwrap());
        // Kept on a stale answer (the object went meanwhile): the push
        // still applies, with an empty, versionless copy no read takes.
        s.apply(push_txn(c, &push(v(3, 3), 7), Prior::KeepObject))
            .unwrap();
        let mut t = Transaction::new();
        t.remove(c, &a);
        s.apply(t).unwrap();
        s.apply(push_txn(c, &push(v(4, 4), 8), Prior::KeepObject))
            .unwrap();
        assert_eq!(data(&a), vec![8]);
        assert!(s.getattr(c, &rb, VERSION_ATTR).is_err());
    }

    #[test]
    fn a_divergent_revert_is_relabelled_with_the_version_it_wrote_back() {
        let mut revert = entry(v(3, 3), "a");
        revert.gave_up = Some(super::super::GaveUp::Object(v(1, 1)));
        let (s, c) = copy_with(&[entry(v(1, 1), "a"), entry(v(2, 2), "a"), revert]);
        put_shard(&s, c, &oid("a"), v(3, 3), 1);
        let auth = |head: Version, entries: Vec<LogEntry>| AuthLog {
            info: PgInfo {
                last_update: head,
                ..PgInfo::default()
            },
            entries,
        };
        let version = |s: &MemStore| -> Version {
            postcard::from_bytes(&s.getattr(c, &oid("a"), VERSION_ATTR).unwrap()).unwrap()
        };
        // The authority has 2'2, which the revert undid: the shard is 1'1
        // again, and 2'2 is missing.
        let two = auth(v(2, 2), vec![entry(v(1, 1), "a"), entry(v(2, 2), "a")]);
        let Merge::Merged { txn, missing, .. } =
            merge(&s, c, v(3, 3), &BTreeMap::new(), None, &two, true).unwrap()
        else {
            panic!("the logs overlap at 2'2");
        };
        assert_eq!(missing.get("a"), Some(&v(2, 2)));
        s.apply(txn).unwrap();
        assert_eq!(version(&s), v(1, 1));
        assert_eq!(s.read(c, &oid("a"), &[(0, 1)]).unwrap().concat(), vec![1]);
    }
}
