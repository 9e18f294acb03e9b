//! Backfill, the pure parts: how a copy whose log does not overlap the
//! authority's is brought back by scanning both copies in the store's
//! (hash, name) order and copying what differs, one bounded chunk at a
//! time. The PG state machine decides when; these functions only read the
//! store and build transactions.
//!
//! A backfilling copy keeps a persisted cursor (`backfill` record, see
//! `docs/format.md`): every object at or before it is exactly the
//! primary's; objects after it are whatever the copy held before and are
//! never trusted. The copy's log and head are the authority's from the
//! start (so the writes it takes meanwhile chain as usual); writes to
//! objects after the cursor reach it as log entries only. A chunk — the
//! objects to replace or remove in (cursor, end] and the new cursor — is
//! one transaction, so a crash resumes at the last chunk applied.
//!
//! It must never move a cursor past an object it did not make equal to
//! the primary's, nor trust an object beyond the cursor.

use super::record;
use super::recovery::{self, ObjectCopy, Push, MISSING_PREFIX};
use super::{log_key, AuthLog, PgInfo, INFO_KEY};
use crate::exec::VERSION_ATTR;
use loligo_store::store::ALL_HASHES;
use loligo_store::{CollectionId, ObjectId, ObjectStore, StoreError, Transaction};
use loligo_types::ops::Version;
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// Record key of a backfilling copy's cursor (absent: not backfilling).
pub const BACKFILL_KEY: &[u8] = b"backfill";
/// Objects one scan returns by default (and so at most the objects of one
/// chunk). Each chunk is one transaction on the target and one round
/// trip: at 64, a 20,000-object full-scan backfill took 313 of them and
/// 1.5-2x longer than at 256. Ceph's `osd_backfill_scan_max` is 512.
pub const CHUNK_OBJECTS: usize = 256;
/// Bytes of object data one chunk carries at most (an object larger
/// than this goes alone).
pub const CHUNK_BYTES: u64 = 8 << 20;
/// Store listing page while scanning.
const LIST_PAGE: usize = 256;

/// How far a backfill has come, in the store's (hash, name) order.
/// Variants are ordered: `Start` < every `At` < `End`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Cursor {
    /// Nothing copied yet.
    #[default]
    Start,
    /// Every object up to and including this one is copied.
    At(ObjectId),
    /// Done: the copy is complete.
    End,
}

impl Cursor {
    /// Whether object `o` lies at or before the cursor (copied).
    pub fn covers(&self, o: &ObjectId) -> bool {
        match self {
            Cursor::Start => false,
            Cursor::At(c) => o <= c,
            Cursor::End => true,
        }
    }

    /// The share of the hash space still to copy (for progress).
    pub fn left(&self) -> f64 {
        match self {
            Cursor::Start => 1.0,
            Cursor::At(c) => 1.0 - (f64::from(c.hash) + 1.0) / 4_294_967_296.0,
            Cursor::End => 0.0,
        }
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cursor::Start => write!(f, "start"),
            Cursor::At(o) => write!(f, "{o}"),
            Cursor::End => write!(f, "end"),
        }
    }
}

/// One copy's objects in (after, end], in order, with their versions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scan {
    pub objects: Vec<(ObjectId, Version)>,
    /// Where the scan stopped: `upto`, or earlier if it hit its limit.
    pub end: Cursor,
    /// The tree nodes a `Filter::Nodes` asked for.
    pub nodes: Option<Vec<u64>>,
}

/// A chunk of backfill as the primary sends it: every object in
/// (after, end] that differs on the target, whole (or its absence), and
/// the cursor after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    pub after: Cursor,
    pub end: Cursor,
    pub pushes: Vec<Push>,
    /// Objects in (after, end] the primary lacks itself, or (erasure-
    /// coded) holds but cannot rebuild for now (unfound, waiting for a
    /// rollback that needs k members past them), with the version its log
    /// needs: the target keeps what it holds of each and records it
    /// missing there (recovery, or the object's rollback or removal,
    /// reaches it once its backfill is past), rather than take the
    /// primary's stale copy as whole or wait for it.
    pub lacks: Vec<(String, Version)>,
}

/// The version an object carries (zero for one without the attribute).
fn version_of(
    s: &dyn ObjectStore,
    coll: CollectionId,
    o: &ObjectId,
) -> Result<Version, StoreError> {
    Ok(s.stat_attr(coll, o, VERSION_ATTR)?
        .and_then(|(_, v)| v)
        .and_then(|b| postcard::from_bytes(&b).ok())
        .unwrap_or_default())
}

/// What a backfill scan covers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Filter {
    /// Every object.
    #[default]
    All,
    /// Only the objects in these leaves of a tree of `leaves` leaves
    /// (where the primary's tree and the target's differ).
    Leaves {
        leaves: u32,
        ranges: Vec<std::ops::Range<u32>>,
    },
    /// No objects: the target's Merkle tree nodes `idx` of `level` (none
    /// named: the whole level), answered in [`Scan::nodes`] (`None` when
    /// the target keeps no tree of `leaves` leaves).
    Nodes {
        leaves: u32,
        level: u32,
        idx: Vec<u32>,
    },
}

/// Most nodes one `Filter::Nodes` asks for (the leaves of the largest
/// tree).
pub const NODES_MAX: usize = super::merkle::LEAVES_MAX as usize;
/// Most leaf ranges one `Filter::Leaves` carries.
pub const RANGES_MAX: usize = super::merkle::LEAVES_MAX as usize / 2;

impl Filter {
    /// A short description for logs: its kind and size.
    pub fn describe(&self) -> String {
        match self {
            Filter::All => "all objects".to_string(),
            Filter::Leaves { leaves, ranges } => {
                format!("{} leaf ranges of {leaves}", ranges.len())
            }
            Filter::Nodes { level, idx, .. } => {
                format!("{} tree nodes of level {level}", idx.len())
            }
        }
    }

    /// The placement hashes it covers, as sorted, disjoint listing
    /// ranges; `None` for a malformed filter (a shape that is no tree,
    /// ranges out of it, out of order or too many).
    pub fn hashes(&self) -> Option<Vec<Range<u64>>> {
        match self {
            Filter::All => Some(vec![ALL_HASHES]),
            Filter::Nodes { .. } => Some(Vec::new()),
            Filter::Leaves { leaves, ranges } => {
                let t = super::merkle::Tree::new(*leaves).ok()?;
                if ranges.len() > RANGES_MAX {
                    return None;
                }
                let mut out: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
                for r in ranges {
                    if r.start >= r.end || r.end > *leaves {
                        return None;
                    }
                    let lo = u64::from(*t.hashes_of(r.start).start());
                    let hi = u64::from(*t.hashes_of(r.end - 1).end()) + 1;
                    match out.last_mut() {
                        Some(last) if last.end > lo => return None,
                        Some(last) if last.end == lo => last.end = hi,
                        _ => out.push(lo..hi),
                    }
                }
                Some(out)
            }
        }
    }
}

/// This copy's objects after `after` up to `upto` (inclusive), at most
/// `limit` (the scan then ends at the last one returned).
///
/// On an erasure-coded copy (`shard` given), an object holding another
/// shard than this copy's counts as version zero: it differs from every
/// real copy, so backfill replaces it.
pub fn scan(
    s: &dyn ObjectStore,
    coll: CollectionId,
    after: &Cursor,
    upto: &Cursor,
    limit: usize,
    shard: Option<usize>,
) -> Result<Scan, StoreError> {
    scan_in(s, coll, after, upto, limit, shard, &[ALL_HASHES])
}

/// As [`scan`], only over objects whose placement hash is in `hashes`
/// (sorted, disjoint): the store seeks past the rest.
pub fn scan_in(
    s: &dyn ObjectStore,
    coll: CollectionId,
    after: &Cursor,
    upto: &Cursor,
    limit: usize,
    shard: Option<usize>,
    hashes: &[Range<u64>],
) -> Result<Scan, StoreError> {
    let limit = limit.max(1);
    let mut objects: Vec<(ObjectId, Version)> = Vec::new();
    let done = |objects: Vec<(ObjectId, Version)>, end: Cursor| Scan {
        objects,
        end,
        nodes: None,
    };
    let after_hash = match after {
        Cursor::Start => None,
        Cursor::At(o) => Some(u64::from(o.hash)),
        Cursor::End => return Ok(done(objects, Cursor::End)),
    };
    // Ranges a few leaves apart are listed in one store iteration, which
    // passes over the objects between them: starting a listing costs more
    // than passing over a few objects.
    for group in spans(hashes) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        if after_hash.is_some_and(|h| last.end <= h) {
            continue;
        }
        if matches!(upto, Cursor::At(u) if first.start > u64::from(u.hash)) {
            break;
        }
        let mut start = match after {
            Cursor::At(o) if (first.start..last.end).contains(&u64::from(o.hash)) => {
                Some(o.clone())
            }
            _ => None,
        };
        loop {
            // Replicated copies: versions from the listing itself.
            let attr = if shard.is_none() { VERSION_ATTR } else { "" };
            // One more than the scan still takes: it ends the scan.
            let page = LIST_PAGE.min(limit - objects.len() + 1);
            let (page, next) = s.list_ranges_attr(coll, group, start.as_ref(), page, attr)?;
            for (o, listed) in page {
                // EC rollback copies are the OSD's own, never backfilled.
                if after.covers(&o) || crate::ec::is_internal(&o.name) {
                    continue;
                }
                if !upto.covers(&o) {
                    return Ok(done(objects, upto.clone()));
                }
                if objects.len() == limit {
                    let end = objects
                        .last()
                        .map_or(Cursor::Start, |(o, _)| Cursor::At(o.clone()));
                    return Ok(done(objects, end));
                }
                let v = match shard {
                    Some(i) if !crate::ec::holds_shard(s, coll, &o, i)? => Version::default(),
                    Some(_) => version_of(s, coll, &o)?,
                    None => listed
                        .and_then(|b| postcard::from_bytes(&b).ok())
                        .unwrap_or_default(),
                };
                objects.push((o, v));
            }
            match next {
                Some(n) => start = Some(n),
                None => break,
            }
        }
    }
    Ok(done(objects, upto.clone()))
}

/// Placement hashes apart by at most this many are listed in one go.
const SPAN_GAP: u64 = 1 << 20;

/// `hashes` (sorted, disjoint) in groups listed together: consecutive
/// ranges at most `SPAN_GAP` apart.
fn spans(hashes: &[Range<u64>]) -> impl Iterator<Item = &[Range<u64>]> {
    hashes.chunk_by(|a, b| b.start.saturating_sub(a.end) <= SPAN_GAP)
}

/// The primary's chunk for a target whose objects in (after, theirs.end]
/// are `theirs`: what differs, read whole from this copy. The chunk may
/// end before `theirs.end` (this copy has more objects there than a scan
/// returns, or the bytes reach `bytes_max`). Without `data`, objects'
/// bytes are not read (an erasure-coded primary rebuilds them for the
/// target), but count toward `bytes_max` at their size here.
///
/// `listed`: this copy's objects in (after, upto] for an `upto` at or
/// after `theirs.end`, as a [`scan_in`] over the same `hashes` returned
/// them with a limit of at most `limit`, if the store has not changed
/// since (the scan that found `upto`); else they are listed here.
#[allow(clippy::too_many_arguments)]
pub fn plan_chunk(
    s: &dyn ObjectStore,
    coll: CollectionId,
    after: &Cursor,
    theirs: &Scan,
    limit: usize,
    bytes_max: u64,
    data: bool,
    hashes: &[Range<u64>],
    listed: Option<&[(ObjectId, Version)]>,
) -> Result<Chunk, StoreError> {
    let mine = match listed {
        Some(objects) if objects.len() <= limit => Scan {
            objects: objects
                .iter()
                .filter(|(o, _)| theirs.end.covers(o))
                .cloned()
                .collect(),
            end: theirs.end.clone(),
            nodes: None,
        },
        _ => scan_in(
            s,
            coll,
            after,
            &theirs.end,
            limit.saturating_mul(2),
            None,
            hashes,
        )?,
    };
    let mut end = mine.end.clone();
    let mut a = mine.objects.iter().peekable();
    let mut b = theirs
        .objects
        .iter()
        .filter(|(o, _)| end.covers(o))
        .peekable();
    let mut pushes = Vec::new();
    let mut bytes = 0u64;
    loop {
        let (name, id) = match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some((x, xv)), Some((y, yv))) if x == y => {
                let same = xv == yv;
                let id = x.clone();
                a.next();
                b.next();
                if same {
                    continue;
                }
                (Some(id.name.clone()), id)
            }
            (Some((x, _)), Some((y, _))) if y < x => {
                let id = y.clone();
                b.next();
                (None, id)
            }
            (Some((x, _)), _) => {
                let id = x.clone();
                a.next();
                (Some(id.name.clone()), id)
            }
            (None, Some((y, _))) => {
                let id = y.clone();
                b.next();
                (None, id)
            }
        };
        let p = match name {
            Some(n) if !data => {
                let p = recovery::read_copy_with(s, coll, &n, false)?;
                if p.copy.is_some() {
                    bytes += s.stat(coll, &recovery::oid(&n))?.size;
                }
                p
            }
            Some(n) => recovery::read_copy(s, coll, &n)?,
            // Only the target has it: it goes.
            None => Push {
                name: id.name.clone(),
                version: Version::default(),
                copy: None,
            },
        };
        bytes += p.copy.as_ref().map_or(0, ObjectCopy::payload_len);
        pushes.push(p);
        if bytes >= bytes_max {
            end = Cursor::At(id);
            break;
        }
    }
    Ok(Chunk {
        after: after.clone(),
        end,
        pushes,
        lacks: Vec::new(),
    })
}

/// The transaction a target applies for `chunk`: each object replaced
/// (or removed), each object the primary lacks recorded missing, and the
/// cursor moved to the chunk's end (the record goes once the end is
/// reached). `prior` says what an erasure-coded target
/// keeps of each object a push replaces.
pub fn chunk_txn(
    coll: CollectionId,
    chunk: &Chunk,
    prior: impl Fn(&recovery::Push) -> recovery::Prior,
) -> Transaction {
    let mut t = Transaction::new();
    for p in &chunk.pushes {
        t.ops.extend(recovery::push_txn(coll, p, prior(p)).ops);
    }
    for (name, need) in &chunk.lacks {
        t.set_record(
            coll,
            &recovery::missing_key(name),
            record::encode_missing(need),
        );
    }
    if chunk.end == Cursor::End {
        t.rm_record(coll, BACKFILL_KEY);
    } else {
        t.set_record(coll, BACKFILL_KEY, record::encode_cursor(&chunk.end));
    }
    t
}

/// The transaction that starts a backfill of this copy from zero: its log
/// becomes the authority's (so writes chain on it), its missing set goes
/// (backfill covers every object), its cursor is `Start`. Objects stay:
/// the scans compare them by version and copy only what differs.
pub fn restart(
    s: &dyn ObjectStore,
    coll: CollectionId,
    auth: &AuthLog,
) -> Result<(Transaction, PgInfo), String> {
    let mut t = Transaction::new();
    for prefix in [b"log/".as_slice(), MISSING_PREFIX] {
        for k in recovery::record_keys(s, coll, prefix, None)? {
            t.rm_record(coll, &k);
        }
    }
    for e in &auth.entries {
        t.set_record(coll, &log_key(e.version.v), record::encode_log(e));
    }
    let info = auth.info;
    t.set_record(coll, INFO_KEY, record::encode_info(&info));
    t.set_record(coll, BACKFILL_KEY, record::encode_cursor(&Cursor::Start));
    Ok((t, info))
}

/// The cursor a copy persisted (`None`: not backfilling).
pub fn load_cursor(s: &dyn ObjectStore, coll: CollectionId) -> Result<Option<Cursor>, String> {
    match s.record(coll, BACKFILL_KEY) {
        Ok(Some(b)) => record::decode_cursor(&b)
            .map(Some)
            .map_err(|e| e.to_string()),
        Ok(None) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// A PG copy's Merkle tree rebuilt from its objects, in the shape of
/// `like` (the `fsck` of the tree a copy keeps up to date as it writes):
/// every object's digest of its name and version, as backfill's scan
/// sees them.
pub fn rebuild_tree(
    s: &dyn ObjectStore,
    coll: CollectionId,
    like: &super::merkle::Tree,
    shard: Option<usize>,
) -> Result<super::merkle::Tree, StoreError> {
    let mut t = like.emptied();
    let mut after = Cursor::Start;
    loop {
        let sc = scan(s, coll, &after, &Cursor::End, LIST_PAGE, shard)?;
        for (o, v) in &sc.objects {
            t.update(o.hash, 0, super::merkle::object_digest(&o.name, *v));
        }
        if sc.end == Cursor::End || sc.objects.is_empty() {
            return Ok(t);
        }
        after = sc.end;
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::pg::{LogEntry, PgInfo};
    use loligo_store::MemStore;

    /// The collection the PG-level unit tests use.
    pub(in crate::pg) fn coll() -> CollectionId {
        CollectionId::pg(1, 0)
    }

    /// A store holding that collection, empty.
    pub(in crate::pg) fn store() -> MemStore {
        let s = MemStore::new();
        let mut t = Transaction::new();
        t.create_collection(coll());
        s.apply(t).unwrap();
        s
    }

    fn put(s: &MemStore, name: &str, v: u64, data: &[u8]) {
        let o = recovery::oid(name);
        let mut t = Transaction::new();
        t.write_full(coll(), &o, data.to_vec());
        let ver = Version { epoch: 1, v };
        t.setattrs(
            coll(),
            &o,
            vec![(VERSION_ATTR.to_string(), postcard::to_stdvec(&ver).unwrap())],
        );
        s.apply(t).unwrap();
    }

    fn names(s: &MemStore) -> Vec<(String, Vec<u8>)> {
        let (ids, _) = s.list(coll(), None, 1000).unwrap();
        ids.into_iter()
            .map(|o| {
                let size = s.stat(coll(), &o).unwrap().size;
                let d = s.read(coll(), &o, &[(0, size)]).unwrap().pop().unwrap();
                (o.name, d)
            })
            .collect()
    }

    #[test]
    fn a_rebuilt_tree_equals_the_one_kept_by_writes() {
        use crate::pg::merkle::{object_digest, Tree};
        let s = store();
        let mut kept = Tree::new(1024).unwrap();
        // More objects than one scan page, some written twice.
        for i in 0..(LIST_PAGE as u64 + 50) {
            let name = format!("m{i}");
            put(&s, &name, i + 1, b"x");
            kept.update(
                recovery::oid(&name).hash,
                0,
                object_digest(&name, Version { epoch: 1, v: i + 1 }),
            );
        }
        for i in 0..10u64 {
            let name = format!("m{i}");
            let (old, new) = (
                Version { epoch: 1, v: i + 1 },
                Version {
                    epoch: 1,
                    v: 1000 + i,
                },
            );
            put(&s, &name, new.v, b"y");
            kept.update(
                recovery::oid(&name).hash,
                object_digest(&name, old),
                object_digest(&name, new),
            );
        }
        let rebuilt = rebuild_tree(&s, coll(), &kept, None).unwrap();
        assert_eq!(rebuilt, kept);
        // A copy that missed a write differs in exactly that leaf.
        let mut behind = kept.clone();
        let o = recovery::oid("m3");
        behind.update(
            o.hash,
            object_digest("m3", Version { epoch: 1, v: 1003 }),
            0,
        );
        let leaf = kept.leaf_of(o.hash);
        assert_eq!(rebuilt.diff(&behind), vec![leaf..leaf + 1]);
    }

    #[test]
    fn cursor_order_and_cover() {
        let a = ObjectId::new(5, "a");
        let b = ObjectId::new(9, "b");
        assert!(Cursor::Start < Cursor::At(a.clone()));
        assert!(Cursor::At(a.clone()) < Cursor::At(b.clone()));
        assert!(Cursor::At(b.clone()) < Cursor::End);
        assert!(!Cursor::Start.covers(&a));
        assert!(Cursor::At(b.clone()).covers(&a));
        assert!(!Cursor::At(a.clone()).covers(&b));
        assert!(Cursor::End.covers(&b));
        assert_eq!(Cursor::Start.left(), 1.0);
        assert_eq!(Cursor::End.left(), 0.0);
    }

    #[test]
    fn scans_stop_at_the_limit_and_at_upto() {
        let s = store();
        for i in 0..10 {
            put(&s, &format!("o{i}"), i + 1, b"x");
        }
        let all = scan(&s, coll(), &Cursor::Start, &Cursor::End, 100, None).unwrap();
        assert_eq!(all.objects.len(), 10);
        assert_eq!(all.end, Cursor::End);
        let first = scan(&s, coll(), &Cursor::Start, &Cursor::End, 4, None).unwrap();
        assert_eq!(first.objects.len(), 4);
        assert_eq!(first.end, Cursor::At(first.objects[3].0.clone()));
        assert_eq!(first.objects[..], all.objects[..4]);
        // The next scan starts after the end, and `upto` bounds it.
        let upto = Cursor::At(all.objects[6].0.clone());
        let next = scan(&s, coll(), &first.end, &upto, 4, None).unwrap();
        assert_eq!(next.objects[..], all.objects[4..7]);
        assert_eq!(next.end, upto);
    }

    /// A chunk makes the target equal to the primary over its range:
    /// differing objects replaced, extra ones removed, equal ones left.
    #[test]
    fn chunks_copy_what_differs_and_remove_what_the_primary_lacks() {
        let p = store();
        let t = store();
        for i in 0..12u64 {
            put(&p, &format!("o{i}"), 10 + i, format!("new{i}").as_bytes());
        }
        // The target: some equal, some older, some absent, some extra.
        for i in 0..12u64 {
            match i % 3 {
                0 => put(&t, &format!("o{i}"), 10 + i, format!("new{i}").as_bytes()),
                1 => put(&t, &format!("o{i}"), 1, b"old"),
                _ => {}
            }
        }
        put(&t, "extra", 3, b"gone");
        let mut cur = Cursor::Start;
        let mut sent = 0;
        let mut rounds = 0;
        while cur != Cursor::End {
            let theirs = scan(&t, coll(), &cur, &Cursor::End, 5, None).unwrap();
            let mine = scan(&p, coll(), &cur, &Cursor::End, 5, None).unwrap();
            let upto = mine.end.clone();
            let theirs = Scan {
                objects: theirs
                    .objects
                    .into_iter()
                    .filter(|(o, _)| upto.covers(o))
                    .collect(),
                end: upto.min(theirs.end),
                nodes: None,
            };
            let plan = |listed| {
                plan_chunk(
                    &p,
                    coll(),
                    &cur,
                    &theirs,
                    5,
                    CHUNK_BYTES,
                    true,
                    &[ALL_HASHES],
                    listed,
                )
                .unwrap()
            };
            let c = plan(None);
            // Planned from the listing that found `upto`: the same chunk.
            assert_eq!(plan(Some(&mine.objects)), c);
            sent += c.pushes.len();
            t.apply(chunk_txn(coll(), &c, |_| recovery::Prior::Replicated))
                .unwrap();
            assert!(c.end > cur, "a chunk always moves the cursor");
            cur = c.end;
            let stored = load_cursor(&t, coll()).unwrap();
            assert_eq!(stored, (cur != Cursor::End).then(|| cur.clone()));
            rounds += 1;
        }
        assert!(rounds >= 3, "{rounds}");
        assert_eq!(names(&t), names(&p));
        // 4 equal objects were not sent; 8 differ, 1 extra.
        assert_eq!(sent, 9);
    }

    #[test]
    fn a_byte_bound_cuts_a_chunk_after_the_object_that_reaches_it() {
        let p = store();
        let t = store();
        for i in 0..6u64 {
            put(&p, &format!("o{i}"), i + 1, &[7u8; 1000]);
        }
        let theirs = scan(&t, coll(), &Cursor::Start, &Cursor::End, 100, None).unwrap();
        let c = plan_chunk(
            &p,
            coll(),
            &Cursor::Start,
            &theirs,
            100,
            2500,
            true,
            &[ALL_HASHES],
            None,
        )
        .unwrap();
        assert_eq!(c.pushes.len(), 3);
        assert_eq!(c.end, Cursor::At(recovery::oid(&c.pushes[2].name)));
    }

    #[test]
    fn a_restart_adopts_the_log_drops_missing_records_and_keeps_objects() {
        let s = store();
        put(&s, "kept", 1, b"k");
        let mut t = Transaction::new();
        for v in 1..=3u64 {
            let e = LogEntry {
                version: Version { epoch: 1, v },
                name: "kept".into(),
                removed: false,
                reqid: None,
                gave_up: None,
                before: crate::pg::Before::Unknown,
                prev: None,
            };
            t.set_record(coll(), &log_key(v), record::encode_log(&e));
        }
        t.set_record(
            coll(),
            &recovery::missing_key("x"),
            record::encode_missing(&Version::default()),
        );
        s.apply(t).unwrap();
        let head = Version { epoch: 4, v: 90 };
        let auth = AuthLog {
            info: PgInfo {
                last_update: head,
                ..PgInfo::default()
            },
            entries: vec![LogEntry {
                version: head,
                name: "y".into(),
                removed: false,
                reqid: None,
                gave_up: None,
                before: crate::pg::Before::Unknown,
                prev: None,
            }],
        };
        let (txn, info) = restart(&s, coll(), &auth).unwrap();
        s.apply(txn).unwrap();
        assert_eq!(info.last_update, head);
        assert_eq!(load_cursor(&s, coll()).unwrap(), Some(Cursor::Start));
        let rows = s.records(coll(), b"", 100).unwrap();
        let keys: Vec<Vec<u8>> = rows.into_iter().map(|(k, _)| k).collect();
        assert!(keys.contains(&log_key(90)));
        assert!(!keys.contains(&log_key(1)));
        assert!(!keys.iter().any(|k| k.starts_with(MISSING_PREFIX)));
        assert_eq!(names(&s).len(), 1);
    }

    /// Ranges a little apart are listed in one go: the objects between
    /// them are left out, and limits and `upto` hold as for separate
    /// listings.
    #[test]
    fn nearby_ranges_list_as_one_and_leave_out_what_lies_between() {
        let s = store();
        let mut all = Vec::new();
        // Objects every 4,096 hashes over the first 16 Mi hashes, and a
        // few far away.
        for i in 0..4096u32 {
            let h = i * 4096;
            all.push(ObjectId::new(h, format!("n{i}")));
        }
        for i in 0..8u32 {
            all.push(ObjectId::new(0x8000_0000 + i, format!("f{i}")));
        }
        let mut t = Transaction::new();
        for (i, o) in all.iter().enumerate() {
            t.touch(coll(), o).setattr(
                coll(),
                o,
                VERSION_ATTR,
                postcard::to_stdvec(&Version {
                    epoch: 1,
                    v: i as u64 + 1,
                })
                .unwrap(),
            );
        }
        s.apply(t).unwrap();
        // Ranges 64 Ki hashes wide with gaps of 192 Ki (closed into one
        // listing), and one far range.
        let mut hashes: Vec<Range<u64>> =
            (0..64u64).map(|i| i << 18..(i << 18) + (1 << 16)).collect();
        hashes.push(0x8000_0002..0x8000_0005);
        assert!(spans(&hashes).count() < hashes.len() / 10);
        let inside = |o: &ObjectId| hashes.iter().any(|r| r.contains(&u64::from(o.hash)));
        let want: Vec<&ObjectId> = all.iter().filter(|o| inside(o)).collect();
        // Page by page, 37 at a time: exactly the wanted objects, in order.
        let mut got: Vec<ObjectId> = Vec::new();
        let mut after = Cursor::Start;
        loop {
            let sc = scan_in(&s, coll(), &after, &Cursor::End, 37, None, &hashes).unwrap();
            assert!(sc.objects.len() <= 37);
            for (o, v) in &sc.objects {
                assert_eq!(*v, version_of(&s, coll(), o).unwrap());
            }
            got.extend(sc.objects.into_iter().map(|(o, _)| o));
            if sc.end == Cursor::End {
                break;
            }
            after = sc.end;
        }
        assert_eq!(got.iter().collect::<Vec<_>>(), want);
        // Up to an object between two ranges: the scan ends there.
        let upto = Cursor::At(ObjectId::new(3 << 18 | 1 << 17, "n"));
        let sc = scan_in(&s, coll(), &Cursor::Start, &upto, 1000, None, &hashes).unwrap();
        assert_eq!(sc.end, upto);
        assert!(sc.objects.iter().all(|(o, _)| inside(o) && upto.covers(o)));
        assert_eq!(sc.objects.len(), 4 * 16);
    }
}
