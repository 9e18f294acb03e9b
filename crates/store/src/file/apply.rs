//! Applying journaled transactions to the object files and the KV, and
//! the checkpoint that lets the journal forget them.
//!
//! Applying is buffered (the page cache and the KV's unsynced batches); a
//! checkpoint makes it durable: `syncfs` of the store's file system, then
//! one synced KV batch that records where replay would start. After a
//! crash the journal's records from there are applied again, onto files
//! and KV that may hold any part of what was applied after the
//! checkpoint. Most ops give the same result from any such start (they
//! set bytes, sizes and keys, or remove them, whatever was there), and
//! they are applied again in order. Two read one object to write
//! another, clone and move, and give a name a new object; for them:
//!
//! - the destination is written durably with a guard naming the op before
//!   the op ends (FileStore's replay guards), and a replay skips every op
//!   on that name up to its guard (those ops were on the object the name
//!   held before);
//! - a checkpoint follows the op at once, before any later op is applied,
//!   so a replay never starts before a clone or move that it would have
//!   to apply again onto later ops' effects, and no later op can take a
//!   guard away before the replay that needs it.
//!
//! Checkpoints are positions of ops: a replay may start inside a
//! transaction. Each is recorded only if it is past the last one.
//!
//! In a replay an op whose object or attribute is missing is skipped:
//! only checked transactions reach the journal, so that happens only
//! where a later op, already applied, removed it.
//!
//! Must never: apply an op of a transaction before its record is durable;
//! apply an op after a clone or move before the checkpoint that follows
//! it; write a guard before the data it vouches for is durable; forget an
//! unlinked file before the unlink is durable; record a checkpoint behind
//! one recorded.

use super::check::Applied;
use super::layout::*;
use crate::block::codec::{coll_prefix, decode_object, prefix_end};
use crate::error::{Result, StoreError};
use crate::kv::{Kv, KvOp};
use crate::names::{CollectionId, Compression, ObjectId};
use crate::txn::{Op, Transaction};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The store's applied state: object files under `dir` and metadata in
/// `kv`.
pub struct Disk {
    pub dir: PathBuf,
    pub kv: Box<dyn Kv>,
    /// The last checkpoint recorded.
    last: Mutex<Pos>,
}

/// What applying calls after a clone or move op: a checkpoint at the
/// position after it.
pub type Barrier<'a> = dyn FnMut(Pos) -> Result<()> + 'a;

impl Disk {
    /// The state in `dir`, whose last checkpoint is `last`.
    pub fn new(dir: &Path, kv: Box<dyn Kv>, last: Pos) -> Disk {
        Disk {
            dir: dir.to_path_buf(),
            kv,
            last: Mutex::new(last),
        }
    }

    pub fn meta(&self, c: CollectionId, o: &ObjectId) -> Result<Option<Meta>> {
        match self.kv.get(&obj_key(T_META, c, o))? {
            Some(v) => Meta::decode(&v).map(Some),
            None => Ok(None),
        }
    }

    /// The collection's compression, or `None` if it does not exist.
    pub fn coll(&self, c: CollectionId) -> Result<Option<Compression>> {
        match self.kv.get(&coll_prefix(T_COLL, c))? {
            Some(v) => match v.first().copied().and_then(Compression::from_code) {
                Some(z) => Ok(Some(z)),
                None => Err(StoreError::Corrupt(format!("collection {c} record"))),
            },
            None => Ok(None),
        }
    }

    pub fn path(&self, fid: u64) -> PathBuf {
        file_path(&self.dir, fid)
    }

    /// An object's file, to read.
    pub fn open(&self, fid: u64) -> Result<File> {
        let p = self.path(fid);
        File::open(&p).map_err(|e| io(p.display(), e))
    }

    fn open_rw(&self, fid: u64, fresh: bool) -> Result<File> {
        let p = self.path(fid);
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(fresh)
            .open(&p)
            .map_err(|e| io(p.display(), e))
    }

    /// Object `o`'s xattrs by name.
    pub fn attrs(
        &self,
        c: CollectionId,
        o: &ObjectId,
    ) -> Result<std::collections::BTreeMap<String, Vec<u8>>> {
        let p = obj_key(T_ATTR, c, o);
        (self.under(&p)?.into_iter())
            .map(|(k, v)| {
                String::from_utf8(k[p.len()..].to_vec())
                    .map(|n| (n, v))
                    .map_err(|_| StoreError::Corrupt(format!("attribute name of {o}")))
            })
            .collect()
    }

    /// Every `(key, value)` under `prefix`.
    pub fn under(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.kv.scan(prefix, Some(&prefix_end(prefix)), usize::MAX)
    }

    fn put(&self, batch: Vec<KvOp>) -> Result<()> {
        self.kv.commit(batch, false)
    }

    /// Apply transaction `seq` from its op `from`, or (`replay`) apply it
    /// again after a crash; `barrier` checkpoints after each clone or
    /// move.
    pub fn apply(
        &self,
        seq: u64,
        t: &Transaction,
        from: u32,
        replay: bool,
        barrier: &mut Barrier<'_>,
    ) -> Result<()> {
        for (i, op) in t.ops.iter().enumerate().skip(from as usize) {
            let at = Pos { seq, op: i as u32 };
            self.op(at, op, replay)?;
            if matches!(op, Op::Clone { .. } | Op::MoveObjects { .. }) {
                barrier(Pos {
                    seq,
                    op: i as u32 + 1,
                })?;
            }
        }
        Ok(())
    }

    /// Whether a replay skips the op at `at` on this object: its guard
    /// says it is durable past there.
    fn guarded(&self, c: CollectionId, o: &ObjectId, at: Pos, replay: bool) -> Result<bool> {
        Ok(replay && self.meta(c, o)?.is_some_and(|m| m.guard >= at))
    }

    /// The object's record, made (with an empty file) if missing.
    fn ensure(&self, c: CollectionId, o: &ObjectId, at: Pos, replay: bool) -> Result<Meta> {
        if let Some(m) = self.meta(c, o)? {
            if replay {
                // After a power loss the record may be durable and the
                // file's directory entry not (a checkpoint persists the KV
                // while applying goes on).
                self.open_rw(m.fid, false)?;
            }
            return Ok(m);
        }
        let m = Meta {
            fid: at.fid(),
            guard: Pos::default(),
        };
        self.open_rw(m.fid, true)?;
        let mut b = vec![KvOp::Put(obj_key(T_META, c, o), m.encode())];
        if replay {
            // The replay of an earlier op may have removed the object
            // this op made (whose file it is again now).
            b.push(KvOp::Delete(doomed_key(m.fid)));
        }
        self.put(b)?;
        Ok(m)
    }

    /// Like `ensure`, for ops that need the object: `None` (skip) in a
    /// replay, `NoObject` otherwise.
    fn need(&self, c: CollectionId, o: &ObjectId, replay: bool) -> Result<Option<Meta>> {
        match self.meta(c, o)? {
            Some(m) => Ok(Some(m)),
            None if replay => Ok(None),
            None => Err(StoreError::NoObject {
                coll: c,
                oid: o.clone(),
            }),
        }
    }

    fn op(&self, at: Pos, op: &Op, replay: bool) -> Result<()> {
        if let Some((c, o)) = target(op) {
            if self.guarded(c, o, at, replay)? {
                return Ok(());
            }
        }
        match op {
            Op::CreateCollection(c) => self.put(vec![KvOp::Put(
                coll_prefix(T_COLL, *c),
                vec![Compression::None.code()],
            )])?,
            Op::RemoveCollection(c) => {
                let mut b = vec![KvOp::Delete(coll_prefix(T_COLL, *c))];
                for (k, _) in self.under(&coll_prefix(T_REC, *c))? {
                    b.push(KvOp::Delete(k));
                }
                self.put(b)?;
            }
            Op::SetCompression(c, z) => {
                self.put(vec![KvOp::Put(coll_prefix(T_COLL, *c), vec![z.code()])])?
            }
            Op::Touch(c, o) => {
                self.ensure(*c, o, at, replay)?;
            }
            Op::Write {
                coll,
                oid,
                offset,
                data,
            } => {
                let f = self.open_rw(self.ensure(*coll, oid, at, replay)?.fid, false)?;
                f.write_all_at(data, *offset).map_err(|e| io(oid, e))?;
                let end = offset + data.len() as u64;
                if data.is_empty() && file_len(&f, oid)? < end {
                    f.set_len(end).map_err(|e| io(oid, e))?;
                }
            }
            Op::WriteFull { coll, oid, data } => {
                let f = self.open_rw(self.ensure(*coll, oid, at, replay)?.fid, false)?;
                f.write_all_at(data, 0).map_err(|e| io(oid, e))?;
                f.set_len(data.len() as u64).map_err(|e| io(oid, e))?;
            }
            Op::Zero {
                coll,
                oid,
                offset,
                len,
            } => {
                let f = self.open_rw(self.ensure(*coll, oid, at, replay)?.fid, false)?;
                zero(&f, oid, *offset, *len)?;
            }
            Op::Truncate { coll, oid, size } => {
                let f = self.open_rw(self.ensure(*coll, oid, at, replay)?.fid, false)?;
                f.set_len(*size).map_err(|e| io(oid, e))?;
            }
            Op::Remove(c, o) => {
                if self.need(*c, o, replay)?.is_some() {
                    self.remove(*c, o, None)?;
                }
            }
            Op::Clone { coll, src, dst } => self.clone_obj(at, *coll, src, dst, replay)?,
            Op::MoveObjects { from, to, oids } => self.move_objs(at, *from, *to, oids, replay)?,
            Op::SetAttrs { coll, oid, attrs } => {
                self.ensure(*coll, oid, at, replay)?;
                let b = attrs
                    .iter()
                    .map(|(n, v)| {
                        KvOp::Put(obj_sub_key(T_ATTR, *coll, oid, n.as_bytes()), v.clone())
                    })
                    .collect();
                self.put(b)?;
            }
            Op::RmAttr { coll, oid, name } => {
                if self.need(*coll, oid, replay)?.is_some() {
                    let k = obj_sub_key(T_ATTR, *coll, oid, name.as_bytes());
                    self.put(vec![KvOp::Delete(k)])?;
                }
            }
            Op::OmapSetKeys { coll, oid, kvs } => {
                self.ensure(*coll, oid, at, replay)?;
                let b = kvs
                    .iter()
                    .map(|(k, v)| KvOp::Put(obj_sub_key(T_OMAP, *coll, oid, k), v.clone()))
                    .collect();
                self.put(b)?;
            }
            Op::OmapRmKeys { coll, oid, keys } => {
                if self.need(*coll, oid, replay)?.is_some() {
                    let b = keys
                        .iter()
                        .map(|k| KvOp::Delete(obj_sub_key(T_OMAP, *coll, oid, k)))
                        .collect();
                    self.put(b)?;
                }
            }
            Op::OmapRmRange {
                coll,
                oid,
                start,
                end,
            } => {
                if self.need(*coll, oid, replay)?.is_some() {
                    let s = obj_sub_key(T_OMAP, *coll, oid, start);
                    let e = obj_sub_key(T_OMAP, *coll, oid, end);
                    let doomed = self.kv.scan(&s, Some(&e), usize::MAX)?;
                    self.put(doomed.into_iter().map(|(k, _)| KvOp::Delete(k)).collect())?;
                }
            }
            Op::OmapClear(c, o) => {
                if self.need(*c, o, replay)?.is_some() {
                    let mut b: Vec<KvOp> = (self.under(&obj_key(T_OMAP, *c, o))?.into_iter())
                        .map(|(k, _)| KvOp::Delete(k))
                        .collect();
                    b.push(KvOp::Delete(obj_key(T_HEAD, *c, o)));
                    self.put(b)?;
                }
            }
            Op::OmapSetHeader { coll, oid, header } => {
                self.ensure(*coll, oid, at, replay)?;
                self.put(vec![KvOp::Put(obj_key(T_HEAD, *coll, oid), header.clone())])?;
            }
            Op::SetRecord { coll, key, value } => {
                let mut k = coll_prefix(T_REC, *coll);
                k.extend_from_slice(key);
                self.put(vec![KvOp::Put(k, value.clone())])?;
            }
            Op::RmRecord { coll, key } => {
                let mut k = coll_prefix(T_REC, *coll);
                k.extend_from_slice(key);
                self.put(vec![KvOp::Delete(k)])?;
            }
        }
        Ok(())
    }

    /// The KV changes that drop an object's keys (its record,
    /// attributes, header and omap).
    fn drop_keys(&self, c: CollectionId, o: &ObjectId) -> Result<Vec<KvOp>> {
        let mut b = vec![
            KvOp::Delete(obj_key(T_META, c, o)),
            KvOp::Delete(obj_key(T_HEAD, c, o)),
        ];
        for tag in [T_ATTR, T_OMAP] {
            for (k, _) in self.under(&obj_key(tag, c, o))? {
                b.push(KvOp::Delete(k));
            }
        }
        Ok(b)
    }

    /// Remove an object and its file (unless another object now owns
    /// that file: `keep`). The file is named for deletion until a
    /// checkpoint has made the unlink durable.
    fn remove(&self, c: CollectionId, o: &ObjectId, keep: Option<u64>) -> Result<()> {
        let Some(m) = self.meta(c, o)? else {
            return Ok(());
        };
        let mut b = self.drop_keys(c, o)?;
        if keep != Some(m.fid) {
            // Unlinked before it is named: a checkpoint that sees the
            // name makes the unlink durable before it forgets it.
            remove_file(&self.path(m.fid))?;
            b.push(KvOp::Put(doomed_key(m.fid), Vec::new()));
        }
        self.put(b)
    }

    /// The KV changes that copy an object's attributes, header and omap
    /// from `(c, o)` to `(c2, o2)`.
    fn copy_keys(
        &self,
        c: CollectionId,
        o: &ObjectId,
        c2: CollectionId,
        o2: &ObjectId,
    ) -> Result<Vec<KvOp>> {
        let mut b = Vec::new();
        for tag in [T_ATTR, T_OMAP] {
            let p = obj_key(tag, c, o);
            for (k, v) in self.under(&p)? {
                b.push(KvOp::Put(obj_sub_key(tag, c2, o2, &k[p.len()..]), v));
            }
        }
        if let Some(h) = self.kv.get(&obj_key(T_HEAD, c, o))? {
            b.push(KvOp::Put(obj_key(T_HEAD, c2, o2), h));
        }
        Ok(b)
    }

    fn clone_obj(
        &self,
        at: Pos,
        c: CollectionId,
        src: &ObjectId,
        dst: &ObjectId,
        replay: bool,
    ) -> Result<()> {
        let Some(sm) = self.need(c, src, replay)? else {
            return Ok(());
        };
        if src == dst {
            return Ok(());
        }
        self.remove(c, dst, None)?;
        let m = Meta {
            fid: at.fid(),
            guard: at,
        };
        let to = self.path(m.fid);
        std::fs::copy(self.path(sm.fid), &to)
            .map_err(|e| io(format!("clone {src} to {dst}"), e))?;
        sync_file_and_dir(&to)?;
        let mut b = self.copy_keys(c, src, c, dst)?;
        b.push(KvOp::Put(obj_key(T_META, c, dst), m.encode()));
        if replay {
            b.push(KvOp::Delete(doomed_key(m.fid)));
        }
        // The copy is durable before its guard can be; the checkpoint
        // after the op makes the guard durable before anything later
        // touches the source.
        self.put(b)
    }

    fn move_objs(
        &self,
        at: Pos,
        from: CollectionId,
        to: CollectionId,
        oids: &[ObjectId],
        replay: bool,
    ) -> Result<()> {
        // The moved objects' files (and every earlier write to them) are
        // durable before their guards can be.
        self.syncfs()?;
        for o in oids {
            if let Some(tm) = self.meta(to, o)?.filter(|m| replay && m.guard >= at) {
                // Moved before the crash; what earlier ops made again
                // under the old name goes (without the moved file).
                self.remove(from, o, Some(tm.fid))?;
                continue;
            }
            let Some(m) = self.need(from, o, replay)? else {
                continue;
            };
            let mut b = self.copy_keys(from, o, to, o)?;
            b.extend(self.drop_keys(from, o)?);
            b.push(KvOp::Put(
                obj_key(T_META, to, o),
                Meta {
                    fid: m.fid,
                    guard: at,
                }
                .encode(),
            ));
            self.put(b)?;
        }
        Ok(())
    }

    /// Make every applied write to the store's file system durable.
    pub fn syncfs(&self) -> Result<()> {
        let d = File::open(self.dir.join(OBJECTS_DIR)).map_err(|e| io("objects", e))?;
        nix::unistd::syncfs(&d).map_err(|e| io("syncfs", e))
    }

    /// Make everything applied so far durable and record that replay
    /// starts at op `at` (every op before it applied when this is
    /// called), whose record starts at ring position `pos`. Applying may
    /// go on meanwhile: what it adds is applied again after a crash.
    /// Returns false, recording nothing, when a checkpoint at or past
    /// `at` is recorded already.
    pub fn checkpoint(&self, at: Pos, pos: u64) -> Result<bool> {
        let mut last = self.last.lock().map_err(|_| StoreError::Closed)?;
        if at <= *last {
            return Ok(false);
        }
        // The files named now were unlinked before: the sync below makes
        // that durable, so their names can go.
        let mut b: Vec<KvOp> = (self.under(&[T_DOOMED])?.into_iter())
            .map(|(k, _)| KvOp::Delete(k))
            .collect();
        self.syncfs()?;
        b.push(KvOp::Put(COMMIT_KEY.to_vec(), encode_commit(at, pos)));
        self.kv.commit(b, true)?;
        self.kv.persist()?;
        *last = at;
        Ok(true)
    }

    /// After a replay: unlink the files named for deletion whose unlink
    /// may not have reached the disk.
    pub fn unlink_doomed(&self) -> Result<()> {
        for (k, _) in self.under(&[T_DOOMED])? {
            let fid = k
                .get(1..9)
                .and_then(|s| <[u8; 8]>::try_from(s).ok())
                .map(u64::from_be_bytes)
                .ok_or_else(|| StoreError::Corrupt("doomed-file key".into()))?;
            remove_file(&self.path(fid))?;
        }
        Ok(())
    }
}

/// The object an op changes and whose guard it obeys (none for
/// collection ops and moves, which check each object themselves).
fn target(op: &Op) -> Option<(CollectionId, &ObjectId)> {
    match op {
        Op::Touch(c, o) | Op::Remove(c, o) | Op::OmapClear(c, o) => Some((*c, o)),
        Op::Write { coll, oid, .. }
        | Op::WriteFull { coll, oid, .. }
        | Op::Zero { coll, oid, .. }
        | Op::Truncate { coll, oid, .. }
        | Op::SetAttrs { coll, oid, .. }
        | Op::RmAttr { coll, oid, .. }
        | Op::OmapSetKeys { coll, oid, .. }
        | Op::OmapRmKeys { coll, oid, .. }
        | Op::OmapRmRange { coll, oid, .. }
        | Op::OmapSetHeader { coll, oid, .. } => Some((*coll, oid)),
        Op::Clone { coll, dst, .. } => Some((*coll, dst)),
        Op::CreateCollection(_)
        | Op::RemoveCollection(_)
        | Op::SetCompression(..)
        | Op::SetRecord { .. }
        | Op::RmRecord { .. }
        | Op::MoveObjects { .. } => None,
    }
}

fn file_len(f: &File, o: &ObjectId) -> Result<u64> {
    Ok(f.metadata().map_err(|e| io(o, e))?.len())
}

/// Zero `[off, off + len)`, extending the file if it ends before.
fn zero(f: &File, o: &ObjectId, off: u64, len: u64) -> Result<()> {
    let size = file_len(f, o)?;
    let end = off + len;
    let zeros = vec![0u8; (len.min(size.saturating_sub(off))).min(1 << 20) as usize];
    let mut at = off;
    while at < end.min(size) {
        let n = (end.min(size) - at).min(zeros.len() as u64) as usize;
        f.write_all_at(&zeros[..n], at).map_err(|e| io(o, e))?;
        at += n as u64;
    }
    if end > size {
        f.set_len(end).map_err(|e| io(o, e))?;
    }
    Ok(())
}

fn remove_file(p: &Path) -> Result<()> {
    match std::fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(p.display(), e)),
    }
}

fn sync_file_and_dir(p: &Path) -> Result<()> {
    File::open(p)
        .and_then(|f| f.sync_data())
        .map_err(|e| io(p.display(), e))?;
    if let Some(d) = p.parent() {
        File::open(d)
            .and_then(|f| f.sync_all())
            .map_err(|e| io(d.display(), e))?;
    }
    Ok(())
}

impl Applied for Disk {
    fn coll_exists(&self, c: CollectionId) -> Result<bool> {
        Ok(self.coll(c)?.is_some())
    }

    fn obj_exists(&self, c: CollectionId, o: &ObjectId) -> Result<bool> {
        Ok(self.kv.get(&obj_key(T_META, c, o))?.is_some())
    }

    fn attr_exists(&self, c: CollectionId, o: &ObjectId, name: &str) -> Result<bool> {
        Ok(self
            .kv
            .get(&obj_sub_key(T_ATTR, c, o, name.as_bytes()))?
            .is_some())
    }

    fn attr_names(&self, c: CollectionId, o: &ObjectId) -> Result<Vec<String>> {
        Ok(self.attrs(c, o)?.into_keys().collect())
    }

    fn visit_objects(
        &self,
        c: CollectionId,
        f: &mut dyn FnMut(ObjectId) -> Result<bool>,
    ) -> Result<()> {
        let p = coll_prefix(T_META, c);
        self.kv.visit(&p, Some(&prefix_end(&p)), &mut |k, _| {
            let (o, _) = decode_object(k, p.len())?;
            f(o)
        })
    }
}
