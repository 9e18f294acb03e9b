//! Merging PG copies on one OSD when a pool's pg_num falls (Ceph's PG
//! merge): each source PG's copy here (seed `to` or more) moves its
//! objects, whole and without copying data, into its target's copy (its
//! ancestor below `to`), and its collection goes. The monitors lowered
//! pg_num only once every PG that joins was clean and held its writes
//! (`osdmap::PgMerge`), and kept each one's version then
//! (`osdmap::PgMerged`). The merged copy is then:
//!
//! - *complete* when this OSD held every joining copy at exactly those
//!   versions, none lacking an object or mid-backfill (an erasure-coded
//!   one: the same shard in each): its info names a head past all of them
//!   (`(merge epoch, largest counter)`), the same on every complete copy,
//!   with the objects and bytes of all;
//! - *to be backfilled* otherwise (a copy that missed writes, or was never
//!   all here): no head and a backfill cursor at the start, so peering
//!   never takes it as a source and the primary copies whatever differs.
//!
//! Logs are not merged: their version counters are the PGs' own, and
//! every copy that serves agrees on the head, so the log starts empty
//! there (an erasure-coded copy's rollback objects go with it). The
//! request ids of the joining logs' writes are carried over (`dups`), so
//! that a client retrying a write acknowledged before the merge is
//! answered, not applied twice. The
//! Merkle tree is rebuilt from the objects at the next map, and the
//! `pg_num` record says the merge is done.
//!
//! All of it is one store transaction. The module only plans it (it reads
//! the store); the host applies it before the target takes the map that
//! lowered pg_num, once the sources' tasks here have stopped.
//!
//! It must never call a copy complete that lacks a write the monitors
//! counted, nor leave a source's object outside the target.

use super::split::{Owner, PG_NUM_KEY};
use super::{
    backfill, committed_reqids, erasure, record, recovery, Cursor, LogEntry, PgInfo, DUPS_KEY,
    INFO_KEY,
};
use loligo_store::{CollectionId, ObjectStore, Transaction};
use loligo_types::ops::{ReqId, Version};
use loligo_types::osdmap::{merge_sources, PgMerged};
use loligo_types::PgId;

/// A planned merge into one target copy.
#[derive(Debug)]
pub struct Merge {
    /// Everything, in one transaction.
    pub txn: Transaction,
    /// Whether the PG joins the merge (has sources, here or anywhere):
    /// one that does not only has its `pg_num` record set, and keeps its
    /// info and log.
    pub joins: bool,
    /// The source PGs whose copies here it takes in.
    pub sources: Vec<PgId>,
    /// Objects moved in (internal ones not counted).
    pub moved: u64,
    /// The target's info once merged.
    pub info: PgInfo,
    /// Why the merged copy is to be backfilled (`None`: complete).
    pub incomplete: Option<String>,
}

/// One joining copy here, as its records say.
struct Held {
    info: PgInfo,
    shard: Option<Vec<u8>>,
}

/// Plan the merge into target `pg`'s copy here (its collection exists),
/// made for `from` PGs, for `to` PGs, of every copy here that folds into
/// it (its sources under `from`, and any left from an earlier merge this
/// OSD missed); `merged` is the pool's last merge in the map (its
/// versions are what a complete copy holds; another merge's, or none: the
/// copy is to be backfilled); a complete copy carries the request ids of
/// at most `dups_max` joined writes (see [`DUPS_KEY`]).
pub fn plan(
    s: &dyn ObjectStore,
    pg: PgId,
    from: u32,
    to: u32,
    merged: Option<&PgMerged>,
    dups_max: usize,
) -> Result<Merge, String> {
    debug_assert!(
        to < from && pg.ps < to,
        "merge into {pg} from {from} to {to}"
    );
    let target = CollectionId::pg(pg.pool, pg.ps);
    let own = read_held(s, target)?;
    let mut txn = Transaction::new();
    // (Empty copies, a removed stray's, go; they hold nothing to merge.)
    let mut sources = Vec::new();
    for src in folding_in(s, pg, from, to)? {
        let coll = CollectionId::pg(src.pool, src.ps);
        if is_empty_copy(s, coll)? {
            txn.remove_collection(coll);
        } else {
            sources.push(src);
        }
    }
    txn.set_record(target, PG_NUM_KEY, record::encode_pg_num(to));
    if sources.is_empty() && merge_sources(pg.ps, to, from).next().is_none() {
        return Ok(Merge {
            txn,
            joins: false,
            sources,
            moved: 0,
            info: own.info,
            incomplete: None,
        });
    }
    let mut held = vec![(pg.ps, own)];
    let mut moved = 0u64;
    // (A name two copies here hold, one left by a merge this OSD missed:
    // the first one's moves, the source's first, and the copy is to be
    // backfilled anyway.)
    let mut taken = std::collections::HashSet::new();
    for src in &sources {
        let coll = CollectionId::pg(src.pool, src.ps);
        held.push((src.ps, read_held(s, coll)?));
        let mut keep = Vec::new();
        for o in recovery::all_objects(s, coll)? {
            if crate::ec::is_internal(&o.name) || !taken.insert(o.clone()) {
                txn.remove(coll, &o);
                continue;
            }
            // (A stray object of the same name in the target, left by an
            // earlier split: the source's is its PG's copy.)
            if s.exists(target, &o).map_err(|e| e.to_string())? {
                txn.remove(target, &o);
            }
            keep.push(o);
        }
        moved += keep.len() as u64;
        if !keep.is_empty() {
            txn.move_objects(coll, target, keep);
        }
        txn.remove_collection(coll);
    }
    let incomplete = why_incomplete(s, pg, from, to, merged, &held, &sources)?;
    // The target's own log, tree, rollback objects and carried ids go;
    // so do its missing records when the copy is to be backfilled.
    for (k, _) in recovery::records_with(s, target, b"", None)? {
        let drop = k.starts_with(b"log/")
            || k == DUPS_KEY
            || k.starts_with(super::tree::TREE_KEY)
            || (incomplete.is_some() && k.starts_with(recovery::MISSING_PREFIX));
        if drop {
            txn.rm_record(target, &k);
        }
    }
    // A complete copy answers retries of the writes the joining logs
    // hold (a client may retry one acknowledged before the merge), and of
    // what an earlier merge carried. (Set after the removals above: the
    // store applies a transaction's ops in order, and a second merge's
    // record was removed with the first's.)
    if incomplete.is_none() {
        let joined: Vec<(CollectionId, Owner)> = std::iter::once(pg)
            .chain(sources.iter().copied())
            .map(|p| (CollectionId::pg(p.pool, p.ps), Owner::new(p.ps, from)))
            .collect();
        let dups = carried_dups(s, &joined, dups_max)?;
        if !dups.is_empty() {
            txn.set_record(target, DUPS_KEY, record::encode_dups(&dups));
        }
    }
    for o in recovery::all_objects(s, target)? {
        if crate::ec::is_internal(&o.name) {
            txn.remove(target, &o);
        }
    }
    let info = match (&incomplete, merged) {
        (None, Some(m)) => PgInfo {
            last_update: Version {
                epoch: m.epoch,
                v: m.versions.values().map(|v| v.v).max().unwrap_or(0),
            },
            last_epoch_started: (held.iter())
                .map(|(_, h)| h.info.last_epoch_started)
                .max()
                .unwrap_or(0),
            objects: held.iter().map(|(_, h)| h.info.objects).sum(),
            bytes: held.iter().map(|(_, h)| h.info.bytes).sum(),
        },
        _ => {
            let start = record::encode_cursor(&Cursor::Start);
            txn.set_record(target, backfill::BACKFILL_KEY, start);
            PgInfo::default()
        }
    };
    txn.set_record(target, INFO_KEY, record::encode_info(&info));
    Ok(Merge {
        txn,
        joins: true,
        sources,
        moved,
        info,
        incomplete,
    })
}

/// The request ids the copies `colls` answer retries of (their logs'
/// standing writes to objects each copy owns, and what an earlier merge
/// carried into them), with their versions: the `max` newest. A log a
/// split left holds entries of its siblings' objects too, and the PG that
/// owned those judged them, not this one: a parent kept a divergent write
/// to its child's object that the child rolled back, the merge carried
/// it, and a retry of the write was answered as done with the object not
/// there (found by the simulator).
fn carried_dups(
    s: &dyn ObjectStore,
    colls: &[(CollectionId, Owner)],
    max: usize,
) -> Result<Vec<(ReqId, Version)>, String> {
    let mut all = Vec::new();
    for &(c, owner) in colls {
        // (A damaged record carries nothing: retries are then new writes,
        // as before merges kept any.)
        let old = s.record(c, DUPS_KEY).map_err(|e| e.to_string())?;
        all.extend(
            old.and_then(|b| record::decode_dups(&b).ok())
                .unwrap_or_default(),
        );
        let entries: Vec<LogEntry> = (recovery::records_with(s, c, b"log/", None)?.iter())
            .filter_map(|(_, v)| record::decode_log(v).ok())
            .filter(|e| owner.owns(&e.name))
            .collect();
        all.extend(committed_reqids(&entries));
    }
    // One each (a split copies the record to every child, so the sources
    // of a second merge bring the same ids), the newest version kept.
    all.sort_by_key(|&(r, v)| (r.client, r.tid, std::cmp::Reverse(v)));
    all.dedup_by_key(|(r, _)| *r);
    all.sort_by_key(|&(_, v)| v);
    let newest = all.len().saturating_sub(max);
    Ok(all.split_off(newest))
}

/// Whether copy `coll` holds nothing: no object, and no record but its
/// pg_num (a stray's once it was removed).
pub fn is_empty_copy(s: &dyn ObjectStore, coll: CollectionId) -> Result<bool, String> {
    if !(s.list(coll, None, 1).map_err(|e| e.to_string())?.0).is_empty() {
        return Ok(false);
    }
    let records = recovery::records_with(s, coll, b"", None)?;
    Ok(records.iter().all(|(k, _)| k == PG_NUM_KEY))
}

/// The copies here that fold into `pg` when its pool has `to` PGs (made
/// for `from`).
fn folding_in(s: &dyn ObjectStore, pg: PgId, from: u32, to: u32) -> Result<Vec<PgId>, String> {
    let mut out: Vec<PgId> = (s.collections().map_err(|e| e.to_string())?.into_iter())
        .filter(|c| c.pool == pg.pool && c.shard == CollectionId::NO_SHARD && c.pg >= to)
        .filter(|c| loligo_crush::placement::ancestor(c.pg, to) == pg.ps)
        .map(|c| PgId {
            pool: c.pool,
            ps: c.pg,
        })
        .collect();
    // This merge's sources first (they hold the objects' current copies).
    let want: Vec<u32> = merge_sources(pg.ps, to, from).collect();
    out.sort_by_key(|p| (!want.contains(&p.ps), p.ps));
    Ok(out)
}

/// Why the merged copy cannot serve as it is (`None`: it can).
fn why_incomplete(
    s: &dyn ObjectStore,
    pg: PgId,
    from: u32,
    to: u32,
    merged: Option<&PgMerged>,
    held: &[(u32, Held)],
    sources: &[PgId],
) -> Result<Option<String>, String> {
    let Some(m) = merged.filter(|m| m.from == from && m.to == to) else {
        return Ok(Some("the map keeps no versions of this merge".into()));
    };
    let want: Vec<u32> = merge_sources(pg.ps, to, from).collect();
    let mut here: Vec<u32> = sources.iter().map(|p| p.ps).collect();
    here.sort_unstable();
    if here != want {
        return Ok(Some(format!(
            "the copies here that fold into it are of seeds {here:?}, not {want:?}"
        )));
    }
    for (ps, h) in held {
        if m.versions.get(ps) != Some(&h.info.last_update) {
            return Ok(Some(format!(
                "pg {}.{ps:x} is at {} here, not {}",
                pg.pool,
                h.info.last_update,
                m.versions.get(ps).map_or("named".into(), |v| v.to_string())
            )));
        }
        let coll = CollectionId::pg(pg.pool, *ps);
        let mid_backfill = (s.record(coll, backfill::BACKFILL_KEY)).map_err(|e| e.to_string())?;
        if mid_backfill.is_some() {
            return Ok(Some(format!("pg {}.{ps:x} is mid-backfill here", pg.pool)));
        }
        if !recovery::record_keys(s, coll, recovery::MISSING_PREFIX, None)?.is_empty() {
            return Ok(Some(format!("pg {}.{ps:x} lacks objects here", pg.pool)));
        }
        if h.shard != held[0].1.shard {
            return Ok(Some(format!(
                "pg {}.{ps:x} holds another shard here than its target",
                pg.pool
            )));
        }
    }
    Ok(None)
}

fn read_held(s: &dyn ObjectStore, coll: CollectionId) -> Result<Held, String> {
    let info = match s.record(coll, INFO_KEY).map_err(|e| e.to_string())? {
        Some(b) => record::decode_info(&b).map_err(|e| format!("{coll}: {e}"))?,
        None => PgInfo::default(),
    };
    let shard = s
        .record(coll, erasure::SHARD_KEY)
        .map_err(|e| e.to_string())?;
    Ok(Held { info, shard })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pg::{log_key, Before, LogEntry};
    use loligo_store::MemStore;
    use std::collections::BTreeMap;

    const POOL: u64 = 1;

    fn coll(ps: u32) -> CollectionId {
        CollectionId::pg(POOL, ps)
    }

    /// The `i`th name whose object is in PG `ps` of `pg_num`.
    fn name_in(ps: u32, pg_num: u32, i: usize) -> String {
        (0..)
            .map(|n| format!("obj-{n}"))
            .filter(|n| {
                let h = loligo_crush::hash::str_hash_rjenkins(n.as_bytes());
                loligo_crush::placement::ancestor(h, pg_num) == ps
            })
            .nth(i)
            .unwrap()
    }

    /// A copy of PG `ps` (made for 4 PGs) at version `3'head` with
    /// `n` objects of 100 bytes, a log entry per object, a tree record,
    /// a missing record if `lacking`, and a rollback object.
    fn copy(s: &MemStore, ps: u32, head: u64, n: usize, lacking: bool) -> Vec<String> {
        let c = coll(ps);
        let mut t = Transaction::new();
        t.create_collection(c);
        let names: Vec<String> = (0..n).map(|i| name_in(ps, 4, i)).collect();
        for (i, name) in names.iter().enumerate() {
            let o = recovery::oid(name);
            t.write_full(c, &o, vec![7; 100]);
            let v = Version {
                epoch: 3,
                v: head - (n - 1 - i) as u64,
            };
            let e = LogEntry {
                version: v,
                name: name.clone(),
                removed: false,
                reqid: Some(ReqId {
                    client: u64::from(ps),
                    tid: v.v,
                }),
                before: Before::Absent,
                gave_up: None,
                prev: None,
            };
            t.set_record(c, &log_key(v.v), record::encode_log(&e));
        }
        t.write_full(
            c,
            &crate::ec::rollback_oid(&recovery::oid(&names[0])),
            vec![1],
        );
        let info = PgInfo {
            last_update: Version { epoch: 3, v: head },
            last_epoch_started: 3 + u64::from(ps),
            objects: n as u64,
            bytes: 100 * n as u64,
        };
        t.set_record(c, INFO_KEY, record::encode_info(&info));
        t.set_record(c, PG_NUM_KEY, record::encode_pg_num(4));
        t.set_record(
            c,
            super::super::tree::TREE_KEY,
            record::encode_tree(1024, 64),
        );
        if lacking {
            let need = Version { epoch: 3, v: head };
            t.set_record(
                c,
                &recovery::missing_key(&names[0]),
                record::encode_missing(&need),
            );
        }
        s.apply(t).unwrap();
        names
    }

    fn merged(target: u64, source: u64) -> PgMerged {
        let v = |v| Version { epoch: 3, v };
        PgMerged {
            epoch: 9,
            from: 4,
            to: 2,
            versions: BTreeMap::from([(0, v(target)), (1, v(1)), (2, v(source)), (3, v(1))]),
        }
    }

    /// 4 -> 2 PGs: PG 1.2's copy moves into 1.0's, its collection goes;
    /// at the versions the map kept, the copy is complete, its head past
    /// both (the merge's epoch, the larger counter), its counts the sum,
    /// its log, tree and rollback objects gone, its pg_num 2.
    #[test]
    fn a_copy_at_the_kept_versions_merges_complete() {
        let s = MemStore::new();
        let mut names = copy(&s, 0, 5, 3, false);
        names.extend(copy(&s, 2, 7, 2, false));
        // An entry of PG 1.0's log for PG 1.2's object (left by a split, a
        // write the owner judged): not carried.
        let stray_entry = LogEntry {
            version: Version { epoch: 2, v: 1 },
            name: name_in(2, 4, 9),
            removed: false,
            reqid: Some(ReqId { client: 99, tid: 1 }),
            before: Before::Absent,
            gave_up: None,
            prev: None,
        };
        let mut t = Transaction::new();
        t.set_record(coll(0), &log_key(0), record::encode_log(&stray_entry));
        s.apply(t).unwrap();
        // A removed stray's empty copy, left from when the pool had 16
        // PGs: it goes, and does not count.
        let mut t = Transaction::new();
        t.create_collection(coll(10));
        t.set_record(coll(10), PG_NUM_KEY, record::encode_pg_num(16));
        s.apply(t).unwrap();
        let pg = PgId { pool: POOL, ps: 0 };
        let m = plan(&s, pg, 4, 2, Some(&merged(5, 7)), 100).unwrap();
        assert_eq!(m.incomplete, None);
        assert_eq!((m.sources, m.moved), (vec![PgId { pool: POOL, ps: 2 }], 2));
        s.apply(m.txn).unwrap();
        assert!(!s.collection_exists(coll(2)).unwrap());
        assert!(!s.collection_exists(coll(10)).unwrap());
        let (objs, _) = s.list(coll(0), None, 100).unwrap();
        let mut got: Vec<String> = objs.into_iter().map(|o| o.name).collect();
        got.sort();
        names.sort();
        assert_eq!(got, names, "every object, no rollback object");
        let info = record::decode_info(&s.record(coll(0), INFO_KEY).unwrap().unwrap()).unwrap();
        let head = Version { epoch: 9, v: 7 };
        assert_eq!(
            info,
            PgInfo {
                last_update: head,
                last_epoch_started: 5,
                objects: 5,
                bytes: 500
            }
        );
        assert_eq!(m.info, info);
        let left = recovery::records_with(&s, coll(0), b"", None).unwrap();
        let keys: Vec<&[u8]> = left.iter().map(|(k, _)| k.as_slice()).collect();
        assert_eq!(keys, vec![DUPS_KEY, INFO_KEY, PG_NUM_KEY]);
        // The joined logs' request ids, oldest first, answer retries.
        let dups = record::decode_dups(&s.record(coll(0), DUPS_KEY).unwrap().unwrap()).unwrap();
        let ids: Vec<(u64, u64)> = dups.iter().map(|(r, _)| (r.client, r.tid)).collect();
        assert_eq!(ids, vec![(0, 3), (0, 4), (0, 5), (2, 6), (2, 7)]);
        // At most the newest `dups_max`.
        let s2 = MemStore::new();
        copy(&s2, 0, 5, 3, false);
        copy(&s2, 2, 7, 2, false);
        let m2 = plan(&s2, pg, 4, 2, Some(&merged(5, 7)), 2).unwrap();
        s2.apply(m2.txn).unwrap();
        let dups = record::decode_dups(&s2.record(coll(0), DUPS_KEY).unwrap().unwrap()).unwrap();
        assert_eq!(dups.len(), 2);
        assert_eq!((dups[1].0.client, dups[1].0.tid), (2, 7));
        // A second merge into a copy that holds carried ids (the first
        // merge's, copied to both children by a split since): the ids
        // stay, once each.
        let s3 = MemStore::new();
        copy(&s3, 0, 5, 3, false);
        copy(&s3, 2, 7, 2, false);
        let carried = [(ReqId { client: 7, tid: 7 }, Version { epoch: 1, v: 9 })];
        let mut t = Transaction::new();
        for ps in [0, 2] {
            t.set_record(coll(ps), DUPS_KEY, record::encode_dups(&carried));
        }
        s3.apply(t).unwrap();
        let m3 = plan(&s3, pg, 4, 2, Some(&merged(5, 7)), 100).unwrap();
        s3.apply(m3.txn).unwrap();
        let dups = record::decode_dups(&s3.record(coll(0), DUPS_KEY).unwrap().unwrap()).unwrap();
        let ids: Vec<(u64, u64)> = dups.iter().map(|(r, _)| (r.client, r.tid)).collect();
        assert_eq!(ids, vec![(7, 7), (0, 3), (0, 4), (0, 5), (2, 6), (2, 7)]);
        assert_eq!(
            super::super::split::stored_pg_num(&s, coll(0)).unwrap(),
            Some(2)
        );
    }

    /// A copy that is behind the kept version, lacks an object, or misses
    /// a source, or a map with another merge's versions: the objects still
    /// move in, and the copy is to be backfilled (no head, cursor at the
    /// start, no missing records).
    #[test]
    fn a_copy_off_the_kept_versions_merges_to_be_backfilled() {
        type Case = (u64, bool, bool, Option<PgMerged>, &'static str);
        let other = PgMerged {
            from: 8,
            ..merged(5, 7)
        };
        let cases: [Case; 5] = [
            (6, false, true, Some(merged(5, 7)), "at 3'6 here, not 3'7"),
            (7, true, true, Some(merged(5, 7)), "lacks objects"),
            (7, false, false, Some(merged(5, 7)), "of seeds [], not [2]"),
            (7, false, true, Some(other), "no versions"),
            (7, false, true, None, "no versions"),
        ];
        for (source, lacking, with_source, kept, why) in cases {
            let s = MemStore::new();
            copy(&s, 0, 5, 3, false);
            if with_source {
                copy(&s, 2, source, 2, lacking);
            }
            let pg = PgId { pool: POOL, ps: 0 };
            let m = plan(&s, pg, 4, 2, kept.as_ref(), 100).unwrap();
            let said = m.incomplete.clone().unwrap_or_default();
            assert!(said.contains(why), "{said:?}, not {why:?}");
            s.apply(m.txn).unwrap();
            let (objs, _) = s.list(coll(0), None, 100).unwrap();
            assert_eq!(objs.len(), if with_source { 5 } else { 3 });
            let info = record::decode_info(&s.record(coll(0), INFO_KEY).unwrap().unwrap()).unwrap();
            assert_eq!(info, PgInfo::default());
            let cursor = s.record(coll(0), backfill::BACKFILL_KEY).unwrap().unwrap();
            assert_eq!(cursor, record::encode_cursor(&Cursor::Start));
            // (Its primary will not be this copy: it carries no ids.)
            assert_eq!(s.record(coll(0), DUPS_KEY).unwrap(), None);
            assert!(
                recovery::records_with(&s, coll(0), recovery::MISSING_PREFIX, None)
                    .unwrap()
                    .is_empty()
            );
        }
    }

    /// A PG with no source (4 -> 3 PGs: only 1.3 merges, into 1.1) does
    /// not join: its copy keeps its info and log, and only its pg_num
    /// record changes.
    #[test]
    fn a_pg_without_sources_keeps_its_copy_as_it_is() {
        let s = MemStore::new();
        copy(&s, 0, 5, 3, false);
        let before = recovery::records_with(&s, coll(0), b"log/", None).unwrap();
        let pg = PgId { pool: POOL, ps: 0 };
        let m = plan(&s, pg, 4, 3, Some(&merged(5, 7)), 100).unwrap();
        assert!(!m.joins && m.sources.is_empty() && m.incomplete.is_none());
        s.apply(m.txn).unwrap();
        let info = record::decode_info(&s.record(coll(0), INFO_KEY).unwrap().unwrap()).unwrap();
        assert_eq!(info.last_update, Version { epoch: 3, v: 5 });
        assert_eq!(m.info, info);
        assert_eq!(
            recovery::records_with(&s, coll(0), b"log/", None).unwrap(),
            before
        );
        assert_eq!(
            super::super::split::stored_pg_num(&s, coll(0)).unwrap(),
            Some(3)
        );
    }

    /// A copy left by an earlier merge this OSD missed (1.6, of 8 PGs,
    /// while 1.0 was made for 4) folds in too, and the copy is to be
    /// backfilled; a stray object in the target with a source object's
    /// name gives way to the source's.
    #[test]
    fn every_copy_that_folds_in_moves_and_strays_give_way() {
        let s = MemStore::new();
        copy(&s, 0, 5, 3, false);
        let names = copy(&s, 2, 7, 2, false);
        let mut t = Transaction::new();
        t.create_collection(coll(6));
        // (Its object, and one of the same name as 1.2's: 1.2's moves.)
        t.write_full(coll(6), &recovery::oid(&name_in(6, 8, 10)), vec![3; 10]);
        t.write_full(coll(6), &recovery::oid(&names[0]), vec![4; 10]);
        t.write_full(coll(0), &recovery::oid(&names[1]), vec![9; 10]);
        s.apply(t).unwrap();
        let pg = PgId { pool: POOL, ps: 0 };
        let m = plan(&s, pg, 4, 2, Some(&merged(5, 7)), 100).unwrap();
        let seeds: Vec<u32> = m.sources.iter().map(|p| p.ps).collect();
        assert_eq!(seeds, vec![2, 6]);
        let said = m.incomplete.clone().unwrap();
        assert!(said.contains("[2, 6], not [2]"), "{said}");
        s.apply(m.txn).unwrap();
        assert!(!s.collection_exists(coll(6)).unwrap());
        let (objs, _) = s.list(coll(0), None, 100).unwrap();
        assert_eq!(objs.len(), 6);
        for n in &names {
            let o = recovery::oid(n);
            assert_eq!(
                s.read(coll(0), &o, &[(0, 1000)]).unwrap(),
                vec![vec![7; 100]]
            );
        }
    }
}
