//! Splitting a PG's copy in place when its pool's pg_num grows (Ceph's
//! PG split): each object whose placement hash now folds to one of the
//! PG's children moves, whole and without copying data, into the child's
//! collection, and every child starts as its parent's copy did:
//!
//! - the same info (`last_update`, `last_epoch_started`), with the objects
//!   and bytes it took;
//! - the parent's whole log, so versions stay contiguous in every PG
//!   (entries that name another PG's objects are passed over where a
//!   log's objects are acted on: `Pg::ours`);
//! - the `missing/` records of its own objects, the backfill cursor, the
//!   scrub stamps and an erasure-coded copy's shard;
//! - no Merkle tree: parent and children rebuild theirs from their
//!   objects at their next map (a leaf covers hash bits a split does not
//!   follow);
//! - the `pg_num` record: the count the copy was split for, so a split
//!   that committed is never done again, and one that did not is redone.
//!
//! All of it is one store transaction. The module only plans it (it reads
//! the store); the host applies it before the PG takes the map that grew
//! pg_num, and starts the children once it is durable.
//!
//! It must never move an object into a PG it does not hash to, nor leave
//! a child without the records its copy needs to peer.

use super::record;
use super::{recovery, PgInfo, INFO_KEY};
use loligo_crush::placement::{ancestor, split_children};
use loligo_store::{CollectionId, ObjectId, ObjectStore, Transaction};
use loligo_types::PgId;
use std::collections::BTreeMap;

/// Record key of the pg_num this copy was made or last split for.
pub const PG_NUM_KEY: &[u8] = b"pg_num";

/// The pg_num copy `coll` was made or last split for (`None`: a copy made
/// before splits existed, or no copy).
pub fn stored_pg_num(s: &dyn ObjectStore, coll: CollectionId) -> Result<Option<u32>, String> {
    match s.record(coll, PG_NUM_KEY).map_err(|e| e.to_string())? {
        Some(b) => record::decode_pg_num(&b)
            .map(Some)
            .map_err(|e| format!("{coll}: {e}")),
        None => Ok(None),
    }
}

/// A planned split of one copy.
#[derive(Debug)]
pub struct Split {
    /// Everything, in one transaction.
    pub txn: Transaction,
    /// The PGs made, in order.
    pub children: Vec<PgId>,
    /// Objects moved to them (internal ones, such as rollback copies, not
    /// counted).
    pub moved: u64,
    /// The parent's info once they are gone.
    pub info: PgInfo,
}

/// What one child takes.
#[derive(Default)]
struct Share {
    oids: Vec<ObjectId>,
    objects: u64,
    bytes: u64,
}

/// Plan the split of PG `pg`'s copy, made for `from` PGs, for `to` PGs
/// (`ec`: an erasure-coded pool, whose objects' sizes are their `_s`).
/// A child that already has a copy here (objects or records besides its
/// pg_num: a copy made while this one was new, in a race with the map) is
/// left as it is, and this copy's objects of it stay here (its PG never
/// serves them; a backfill removes them); an empty collection of one is
/// taken over.
pub fn plan(s: &dyn ObjectStore, pg: PgId, from: u32, to: u32, ec: bool) -> Result<Split, String> {
    debug_assert!(
        from < to && pg.ps < from,
        "split of {pg} from {from} to {to}"
    );
    let parent = CollectionId::pg(pg.pool, pg.ps);
    let children: Vec<PgId> = split_children(pg.ps, from, to)
        .map(|ps| PgId { pool: pg.pool, ps })
        .collect();
    let (mut exist, mut skip) = (Vec::new(), Vec::new());
    for c in &children {
        let coll = CollectionId::pg(c.pool, c.ps);
        if !s.collection_exists(coll).map_err(|e| e.to_string())? {
            continue;
        }
        let objects = s.list(coll, None, 1).map_err(|e| e.to_string())?.0;
        let records = recovery::records_with(s, coll, b"", None)?;
        if objects.is_empty() && records.iter().all(|(k, _)| k == PG_NUM_KEY) {
            exist.push(c.ps);
        } else {
            tracing::warn!(
                "pg {pg}: pg {c}, one of its children, already has a copy here: left as it is"
            );
            skip.push(c.ps);
        }
    }
    let children: Vec<PgId> = (children.into_iter())
        .filter(|c| !skip.contains(&c.ps))
        .collect();
    let mut shares: BTreeMap<u32, Share> =
        children.iter().map(|c| (c.ps, Share::default())).collect();
    for o in recovery::all_objects(s, parent)? {
        let ps = ancestor(o.hash, to);
        if ps == pg.ps {
            continue;
        }
        let Some(share) = shares.get_mut(&ps) else {
            // (Not this PG's before either, or a child with a copy of its
            // own: left where it is.)
            tracing::warn!("{parent}: object {o} hashes to pg {ps}, not a child of this PG");
            continue;
        };
        if !crate::ec::is_internal(&o.name) {
            share.objects += 1;
            share.bytes += object_bytes(s, parent, &o, ec)?;
        }
        share.oids.push(o);
    }
    let info = match s.record(parent, INFO_KEY).map_err(|e| e.to_string())? {
        Some(b) => record::decode_info(&b).map_err(|e| format!("{parent}: {e}"))?,
        None => PgInfo::default(),
    };
    let records = recovery::records_with(s, parent, b"", None)?;
    let mut txn = Transaction::new();
    let (mut moved, mut moved_bytes) = (0u64, 0u64);
    for (ps, share) in shares {
        let coll = CollectionId::pg(pg.pool, ps);
        if !exist.contains(&ps) {
            txn.create_collection(coll);
        }
        for (k, v) in &records {
            if let Some(v) = child_record(k, v, ps, to) {
                txn.set_record(coll, k, v);
            }
        }
        let child_info = PgInfo {
            objects: share.objects,
            bytes: share.bytes,
            ..info
        };
        txn.set_record(coll, INFO_KEY, record::encode_info(&child_info));
        txn.set_record(coll, PG_NUM_KEY, record::encode_pg_num(to));
        moved += share.objects;
        moved_bytes += share.bytes;
        if !share.oids.is_empty() {
            txn.move_objects(parent, coll, share.oids);
        }
    }
    // The parent keeps its log and its own objects' records.
    for (k, _) in &records {
        let name = k.strip_prefix(recovery::MISSING_PREFIX);
        let moves = name.is_some_and(|n| name_ps(n, to) != pg.ps);
        if moves || is_tree_record(k) {
            txn.rm_record(parent, k);
        }
    }
    let info = PgInfo {
        objects: info.objects.saturating_sub(moved),
        bytes: info.bytes.saturating_sub(moved_bytes),
        ..info
    };
    txn.set_record(parent, INFO_KEY, record::encode_info(&info));
    txn.set_record(parent, PG_NUM_KEY, record::encode_pg_num(to));
    Ok(Split {
        txn,
        children,
        moved,
        info,
    })
}

/// The objects a PG owns: those whose names hash to its seed under its
/// pool's pg_num. A log a split left a copy holds entries of its
/// siblings' objects too; what acts on a log's objects asks this first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    ps: u32,
    pg_num: u32,
}

impl Owner {
    /// Every object (a PG whose pool's pg_num is not known yet, or tests).
    pub const ALL: Owner = Owner { ps: 0, pg_num: 0 };

    /// PG seed `ps` of a pool of `pg_num` PGs.
    pub fn new(ps: u32, pg_num: u32) -> Owner {
        debug_assert!(ps < pg_num, "pg seed {ps} of {pg_num}");
        Owner { ps, pg_num }
    }

    /// Whether the object named `name` is this PG's.
    pub fn owns(&self, name: &str) -> bool {
        self.pg_num == 0 || name_ps(name.as_bytes(), self.pg_num) == self.ps
    }
}

/// The seed of the PG an object named `name` (bytes of a record key)
/// belongs to among `pg_num`.
fn name_ps(name: &[u8], pg_num: u32) -> u32 {
    ancestor(loligo_crush::hash::str_hash_rjenkins(name), pg_num)
}

/// A Merkle tree record (its shape or a page): rebuilt, never split.
fn is_tree_record(k: &[u8]) -> bool {
    k.starts_with(super::tree::TREE_KEY)
}

/// The value child `ps` (of `pg_num`) takes for its parent's record `k`,
/// if any: log entries, the backfill cursor, scrub stamps, the shard and
/// records of unknown kinds as they are; a `missing/` record only if its
/// object is the child's; no tree, info or pg_num (written anew).
fn child_record(k: &[u8], v: &[u8], ps: u32, pg_num: u32) -> Option<Vec<u8>> {
    if k == INFO_KEY || k == PG_NUM_KEY || is_tree_record(k) {
        return None;
    }
    match k.strip_prefix(recovery::MISSING_PREFIX) {
        Some(name) if name_ps(name, pg_num) != ps => None,
        _ => Some(v.to_vec()),
    }
}

/// An object's logical bytes, as PG infos count them.
fn object_bytes(
    s: &dyn ObjectStore,
    c: CollectionId,
    o: &ObjectId,
    ec: bool,
) -> Result<u64, String> {
    if !ec {
        return s.stat(c, o).map(|st| st.size).map_err(|e| e.to_string());
    }
    match s.getattr(c, o, crate::ec::SIZE_ATTR) {
        Ok(b) => postcard::from_bytes(&b).map_err(|e| format!("{o}: object size: {e}")),
        Err(loligo_store::StoreError::NoAttr { .. }) => Ok(0),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pg::backfill::tests::{coll, store};
    use crate::pg::{log_key, LogEntry};
    use loligo_store::MemStore;
    use loligo_types::ops::Version;

    const POOL: u64 = 1;

    /// A name whose object is in PG `ps` of `pg_num`, the `i`th such.
    fn name_in(ps: u32, pg_num: u32, i: usize) -> String {
        (0..)
            .map(|n| format!("obj-{n}"))
            .filter(|n| name_ps(n.as_bytes(), pg_num) == ps)
            .nth(i)
            .unwrap()
    }

    fn put(s: &MemStore, name: &str, v: u64, len: usize) {
        let mut t = Transaction::new();
        let o = recovery::oid(name);
        let ver = Version { epoch: 3, v };
        t.write_full(coll(), &o, vec![7; len]);
        t.setattr(
            coll(),
            &o,
            crate::exec::VERSION_ATTR,
            postcard::to_stdvec(&ver).unwrap(),
        );
        let e = LogEntry {
            version: ver,
            name: name.into(),
            removed: false,
            reqid: None,
            before: super::super::Before::Absent,
            gave_up: None,
            prev: (v > 1).then_some(Version { epoch: 3, v: v - 1 }),
        };
        t.set_record(coll(), &log_key(v), record::encode_log(&e));
        s.apply(t).unwrap();
    }

    /// A copy of PG 1.0 made for 2 PGs, split for 8: its objects go to
    /// 1.2, 1.4 and 1.6 by their hash, each child takes the whole log,
    /// the info (head, objects, bytes), its own missing records, the
    /// backfill cursor and the pg_num record; the tree goes everywhere.
    #[test]
    fn a_copy_splits_by_hash_with_its_log_and_records() {
        let s = store();
        let pg = PgId { pool: POOL, ps: 0 };
        let mut names = Vec::new();
        for ps in [0u32, 2, 4, 6] {
            for i in 0..3 {
                names.push((ps, name_in(ps, 8, i)));
            }
        }
        for (v, (_, n)) in names.iter().enumerate() {
            put(&s, n, v as u64 + 1, 100);
        }
        let head = Version {
            epoch: 3,
            v: names.len() as u64,
        };
        let mut t = Transaction::new();
        let info = PgInfo {
            last_update: head,
            last_epoch_started: 3,
            objects: 12,
            bytes: 1200,
        };
        t.set_record(coll(), INFO_KEY, record::encode_info(&info));
        t.set_record(
            coll(),
            &recovery::missing_key(&names[0].1),
            record::encode_missing(&head),
        );
        t.set_record(
            coll(),
            &recovery::missing_key(&names[4].1),
            record::encode_missing(&head),
        );
        t.set_record(
            coll(),
            super::super::tree::TREE_KEY,
            record::encode_tree(1024, 64),
        );
        t.set_record(coll(), PG_NUM_KEY, record::encode_pg_num(2));
        // An empty collection of a child (nothing in it) is taken over.
        t.create_collection(CollectionId::pg(POOL, 2));
        s.apply(t).unwrap();
        let split = plan(&s, pg, 2, 8, false).unwrap();
        let want: Vec<u32> = vec![2, 4, 6];
        assert_eq!(
            split.children.iter().map(|c| c.ps).collect::<Vec<_>>(),
            want
        );
        assert_eq!(split.moved, 9);
        s.apply(split.txn).unwrap();
        for ps in [0u32, 2, 4, 6] {
            let c = CollectionId::pg(POOL, ps);
            let (objs, _) = s.list(c, None, 100).unwrap();
            let mine: Vec<&String> = names
                .iter()
                .filter(|(p, _)| *p == ps)
                .map(|(_, n)| n)
                .collect();
            assert_eq!(objs.len(), 3, "pg {ps}: {objs:?}");
            assert!(
                objs.iter().all(|o| mine.contains(&&o.name)),
                "pg {ps}: {objs:?}"
            );
            let i = record::decode_info(&s.record(c, INFO_KEY).unwrap().unwrap()).unwrap();
            assert_eq!(
                (i.last_update, i.last_epoch_started, i.objects, i.bytes),
                (head, 3, 3, 300)
            );
            assert_eq!(stored_pg_num(&s, c).unwrap(), Some(8));
            let logs = recovery::records_with(&s, c, b"log/", None).unwrap();
            assert_eq!(logs.len(), names.len(), "pg {ps}: the whole log");
            assert!(s.record(c, super::super::tree::TREE_KEY).unwrap().is_none());
            let missing = recovery::records_with(&s, c, recovery::MISSING_PREFIX, None).unwrap();
            let want: Vec<Vec<u8>> = [&names[0], &names[4]]
                .into_iter()
                .filter(|(p, _)| *p == ps)
                .map(|(_, n)| recovery::missing_key(n))
                .collect();
            assert_eq!(
                missing.into_iter().map(|(k, _)| k).collect::<Vec<_>>(),
                want,
                "pg {ps}"
            );
        }
        // The same split again finds every child with a copy of its own:
        // they are left as they are, and nothing moves.
        let again = plan(&s, pg, 2, 8, false).unwrap();
        assert!(again.children.is_empty() && again.moved == 0);
        assert_eq!(again.info.objects, 3);
    }

    /// An erasure-coded copy counts its objects' logical sizes (`_s`) and
    /// moves an object's rollback copy with it (same hash).
    #[test]
    fn erasure_coded_copies_count_logical_sizes_and_move_rollbacks() {
        let s = store();
        let pg = PgId { pool: POOL, ps: 0 };
        let name = name_in(1, 2, 0);
        let o = recovery::oid(&name);
        let rb = crate::ec::rollback_oid(&o);
        let mut t = Transaction::new();
        t.write_full(coll(), &o, vec![1; 10]);
        t.setattr(
            coll(),
            &o,
            crate::ec::SIZE_ATTR,
            postcard::to_stdvec(&5000u64).unwrap(),
        );
        t.write_full(coll(), &rb, vec![2; 10]);
        s.apply(t).unwrap();
        let split = plan(&s, pg, 1, 2, true).unwrap();
        assert_eq!(split.moved, 1);
        s.apply(split.txn).unwrap();
        let child = CollectionId::pg(POOL, 1);
        assert!(s.exists(child, &o).unwrap() && s.exists(child, &rb).unwrap());
        let i = record::decode_info(&s.record(child, INFO_KEY).unwrap().unwrap()).unwrap();
        assert_eq!((i.objects, i.bytes), (1, 5000));
        assert!(s.list(coll(), None, 10).unwrap().0.is_empty());
    }
}
