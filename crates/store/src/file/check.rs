//! Judging a transaction before it is journaled: whether it would succeed
//! on the state after every transaction journaled before it.
//!
//! The file store journals a transaction before it applies it, and a
//! transaction in the journal is applied again after a crash, so one that
//! would fail (a missing object, attribute or collection) must never
//! reach the journal. The applied state lags the journal; [`Pending`]
//! holds what the journaled but not yet applied transactions did to what
//! a check reads (which objects, attribute names and collections exist),
//! and falls back to the applied state for the rest. Once a transaction
//! is applied its entries go ([`Pending::applied`]).
//!
//! Must never: change [`Pending`] for a transaction that fails; answer
//! from the applied state for an object a pending transaction touched.

use crate::error::{Result, StoreError};
use crate::names::{CollectionId, ObjectId};
use crate::txn::{Op, Transaction};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The applied state, as far as a check reads it.
pub trait Applied {
    fn coll_exists(&self, c: CollectionId) -> Result<bool>;
    fn obj_exists(&self, c: CollectionId, o: &ObjectId) -> Result<bool>;
    fn attr_exists(&self, c: CollectionId, o: &ObjectId, name: &str) -> Result<bool>;
    fn attr_names(&self, c: CollectionId, o: &ObjectId) -> Result<Vec<String>>;
    /// Hand the collection's objects to `f` in order until it says stop.
    fn visit_objects(
        &self,
        c: CollectionId,
        f: &mut dyn FnMut(ObjectId) -> Result<bool>,
    ) -> Result<()>;
}

/// An object as pending transactions left it.
#[derive(Clone, Debug)]
struct View {
    exists: bool,
    /// Attribute names pending transactions set (true) or removed.
    attrs: BTreeMap<String, bool>,
    /// Names not in `attrs` are absent (the object was made anew), rather
    /// than as applied.
    fresh: bool,
    /// The last transaction that touched it.
    last: u64,
}

impl View {
    fn made() -> View {
        View {
            exists: true,
            attrs: BTreeMap::new(),
            fresh: true,
            last: 0,
        }
    }

    fn gone() -> View {
        View {
            exists: false,
            attrs: BTreeMap::new(),
            fresh: true,
            last: 0,
        }
    }
}

type Key = (CollectionId, ObjectId);

/// What one transaction changes, before it is known to succeed.
#[derive(Default)]
struct Delta {
    objs: HashMap<Key, View>,
    colls: HashMap<CollectionId, bool>,
}

/// What journaled, unapplied transactions did.
#[derive(Default)]
pub struct Pending {
    objs: HashMap<Key, View>,
    colls: HashMap<CollectionId, (bool, u64)>,
}

impl Pending {
    /// Check `t` (sequence `seq`) against the state after every pending
    /// transaction; on success it becomes pending too.
    pub fn check(&mut self, t: &Transaction, seq: u64, a: &dyn Applied) -> Result<()> {
        let mut d = Delta::default();
        for op in &t.ops {
            self.check_op(&mut d, op, a)?;
        }
        for (k, mut v) in d.objs {
            v.last = seq;
            self.objs.insert(k, v);
        }
        for (c, e) in d.colls {
            self.colls.insert(c, (e, seq));
        }
        Ok(())
    }

    /// Transactions up to `seq` are applied: forget what only they did.
    pub fn applied(&mut self, seq: u64) {
        self.objs.retain(|_, v| v.last > seq);
        self.colls.retain(|_, v| v.1 > seq);
    }

    /// Whether nothing is pending.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.objs.is_empty() && self.colls.is_empty()
    }

    fn coll(&self, d: &Delta, c: CollectionId, a: &dyn Applied) -> Result<bool> {
        if let Some(e) = d.colls.get(&c) {
            return Ok(*e);
        }
        match self.colls.get(&c) {
            Some((e, _)) => Ok(*e),
            None => a.coll_exists(c),
        }
    }

    fn need_coll(&self, d: &Delta, c: CollectionId, a: &dyn Applied) -> Result<()> {
        if self.coll(d, c, a)? {
            Ok(())
        } else {
            Err(StoreError::NoCollection(c))
        }
    }

    fn view(&self, d: &Delta, c: CollectionId, o: &ObjectId, a: &dyn Applied) -> Result<View> {
        let k = (c, o.clone());
        if let Some(v) = d.objs.get(&k).or_else(|| self.objs.get(&k)) {
            return Ok(v.clone());
        }
        Ok(View {
            exists: a.obj_exists(c, o)?,
            attrs: BTreeMap::new(),
            fresh: false,
            last: 0,
        })
    }

    /// The object's view; `NoObject` if it does not exist.
    fn existing(&self, d: &Delta, c: CollectionId, o: &ObjectId, a: &dyn Applied) -> Result<View> {
        let v = self.view(d, c, o, a)?;
        if v.exists {
            Ok(v)
        } else {
            Err(StoreError::NoObject {
                coll: c,
                oid: o.clone(),
            })
        }
    }

    /// The object's view, made if it does not exist.
    fn made(&self, d: &Delta, c: CollectionId, o: &ObjectId, a: &dyn Applied) -> Result<View> {
        let v = self.view(d, c, o, a)?;
        Ok(if v.exists { v } else { View::made() })
    }

    /// Every attribute name the object has.
    fn names(&self, v: &View, c: CollectionId, o: &ObjectId, a: &dyn Applied) -> Result<View> {
        let mut attrs: BTreeMap<String, bool> = if v.fresh {
            BTreeMap::new()
        } else {
            a.attr_names(c, o)?.into_iter().map(|n| (n, true)).collect()
        };
        attrs.extend(v.attrs.iter().map(|(n, b)| (n.clone(), *b)));
        attrs.retain(|_, b| *b);
        Ok(View {
            exists: true,
            attrs,
            fresh: true,
            last: 0,
        })
    }

    fn empty(&self, d: &Delta, c: CollectionId, a: &dyn Applied) -> Result<bool> {
        let overlay = d
            .objs
            .iter()
            .chain(self.objs.iter().filter(|(k, _)| !d.objs.contains_key(*k)));
        for ((vc, _), v) in overlay {
            if *vc == c && v.exists {
                return Ok(false);
            }
        }
        let mut empty = true;
        a.visit_objects(c, &mut |o| {
            let k = (c, o);
            let shadowed = d.objs.get(&k).or_else(|| self.objs.get(&k));
            if shadowed.is_none_or(|v| v.exists) {
                empty = false;
            }
            Ok(empty)
        })?;
        Ok(empty)
    }

    fn check_op(&self, d: &mut Delta, op: &Op, a: &dyn Applied) -> Result<()> {
        let key = |c: &CollectionId, o: &ObjectId| (*c, o.clone());
        match op {
            Op::CreateCollection(c) => {
                if self.coll(d, *c, a)? {
                    return Err(StoreError::CollectionExists(*c));
                }
                d.colls.insert(*c, true);
            }
            Op::RemoveCollection(c) => {
                self.need_coll(d, *c, a)?;
                if !self.empty(d, *c, a)? {
                    return Err(StoreError::CollectionNotEmpty(*c));
                }
                d.colls.insert(*c, false);
            }
            Op::SetCompression(c, _)
            | Op::SetRecord { coll: c, .. }
            | Op::RmRecord { coll: c, .. } => self.need_coll(d, *c, a)?,
            Op::Touch(c, o)
            | Op::Write {
                coll: c, oid: o, ..
            }
            | Op::WriteFull {
                coll: c, oid: o, ..
            }
            | Op::Zero {
                coll: c, oid: o, ..
            }
            | Op::Truncate {
                coll: c, oid: o, ..
            }
            | Op::OmapSetKeys {
                coll: c, oid: o, ..
            }
            | Op::OmapSetHeader {
                coll: c, oid: o, ..
            } => {
                self.need_coll(d, *c, a)?;
                let v = self.made(d, *c, o, a)?;
                d.objs.insert(key(c, o), v);
            }
            Op::SetAttrs { coll, oid, attrs } => {
                self.need_coll(d, *coll, a)?;
                let mut v = self.made(d, *coll, oid, a)?;
                for (n, _) in attrs {
                    v.attrs.insert(n.clone(), true);
                }
                d.objs.insert(key(coll, oid), v);
            }
            Op::Remove(c, o) => {
                self.need_coll(d, *c, a)?;
                self.existing(d, *c, o, a)?;
                d.objs.insert(key(c, o), View::gone());
            }
            Op::Clone { coll, src, dst } => {
                self.need_coll(d, *coll, a)?;
                let s = self.existing(d, *coll, src, a)?;
                let v = self.names(&s, *coll, src, a)?;
                d.objs.insert(key(coll, dst), v);
            }
            Op::MoveObjects { from, to, oids } => {
                self.need_coll(d, *from, a)?;
                self.need_coll(d, *to, a)?;
                let mut seen = HashSet::new();
                let mut moved = Vec::with_capacity(oids.len());
                for o in oids {
                    let v = self.view(d, *from, o, a)?;
                    if !v.exists || !seen.insert(o) {
                        return Err(StoreError::NoObject {
                            coll: *from,
                            oid: o.clone(),
                        });
                    }
                    if self.view(d, *to, o, a)?.exists {
                        return Err(StoreError::Invalid(format!(
                            "object {o} moved into {to}, which holds it already"
                        )));
                    }
                    moved.push((o, self.names(&v, *from, o, a)?));
                }
                for (o, v) in moved {
                    d.objs.insert(key(from, o), View::gone());
                    d.objs.insert(key(to, o), v);
                }
            }
            Op::RmAttr { coll, oid, name } => {
                self.need_coll(d, *coll, a)?;
                let mut v = self.existing(d, *coll, oid, a)?;
                let has = match v.attrs.get(name) {
                    Some(b) => *b,
                    None => !v.fresh && a.attr_exists(*coll, oid, name)?,
                };
                if !has {
                    return Err(StoreError::NoAttr {
                        oid: oid.clone(),
                        name: name.clone(),
                    });
                }
                v.attrs.insert(name.clone(), false);
                d.objs.insert(key(coll, oid), v);
            }
            Op::OmapRmKeys { coll, oid, .. }
            | Op::OmapRmRange { coll, oid, .. }
            | Op::OmapClear(coll, oid) => {
                self.need_coll(d, *coll, a)?;
                let v = self.existing(d, *coll, oid, a)?;
                d.objs.insert(key(coll, oid), v);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::MemStore;
    use crate::store::ObjectStore;

    /// The applied state of a `MemStore`.
    struct Mem<'a>(&'a MemStore);

    impl Applied for Mem<'_> {
        fn coll_exists(&self, c: CollectionId) -> Result<bool> {
            self.0.collection_exists(c)
        }
        fn obj_exists(&self, c: CollectionId, o: &ObjectId) -> Result<bool> {
            Ok(self.0.collection_exists(c)? && self.0.exists(c, o)?)
        }
        fn attr_exists(&self, c: CollectionId, o: &ObjectId, name: &str) -> Result<bool> {
            Ok(self.0.getattrs(c, o)?.contains_key(name))
        }
        fn attr_names(&self, c: CollectionId, o: &ObjectId) -> Result<Vec<String>> {
            Ok(self.0.getattrs(c, o)?.into_keys().collect())
        }
        fn visit_objects(
            &self,
            c: CollectionId,
            f: &mut dyn FnMut(ObjectId) -> Result<bool>,
        ) -> Result<()> {
            if !self.0.collection_exists(c)? {
                return Ok(());
            }
            for o in self.0.list(c, None, usize::MAX)?.0 {
                if !f(o)? {
                    break;
                }
            }
            Ok(())
        }
    }

    fn c() -> CollectionId {
        CollectionId::pg(1, 0)
    }

    fn o(n: &str) -> ObjectId {
        ObjectId::new(1, n)
    }

    #[test]
    fn a_check_sees_the_transactions_pending_before_it() {
        let m = MemStore::new();
        let mut p = Pending::default();
        let mut t = Transaction::new();
        t.create_collection(c())
            .setattrs(c(), &o("a"), vec![("x".into(), vec![1])]);
        p.check(&t, 1, &Mem(&m)).unwrap();
        // Nothing applied yet: the pending view answers.
        let mut t = Transaction::new();
        t.rmattr(c(), &o("a"), "x");
        p.check(&t, 2, &Mem(&m)).unwrap();
        assert!(matches!(
            p.check(&t, 3, &Mem(&m)),
            Err(StoreError::NoAttr { .. })
        ));
        let mut t = Transaction::new();
        t.clone_object(c(), &o("a"), &o("b")).remove(c(), &o("a"));
        p.check(&t, 3, &Mem(&m)).unwrap();
        let mut t = Transaction::new();
        t.remove(c(), &o("a"));
        assert!(matches!(
            p.check(&t, 4, &Mem(&m)),
            Err(StoreError::NoObject { .. })
        ));
        let mut t = Transaction::new();
        t.remove_collection(c());
        assert!(matches!(
            p.check(&t, 4, &Mem(&m)),
            Err(StoreError::CollectionNotEmpty(_))
        ));
        t = Transaction::new();
        t.remove(c(), &o("b")).remove_collection(c());
        p.check(&t, 4, &Mem(&m)).unwrap();
    }

    #[test]
    fn a_failed_check_leaves_nothing_pending_and_applied_entries_go() {
        let m = MemStore::new();
        let mut t = Transaction::new();
        t.create_collection(c()).touch(c(), &o("a"));
        m.apply(t).unwrap();
        let mut p = Pending::default();
        let mut t = Transaction::new();
        t.remove(c(), &o("a")).remove(c(), &o("zz"));
        assert!(p.check(&t, 1, &Mem(&m)).is_err());
        assert!(p.is_empty(), "a failed transaction changes nothing");
        let mut t = Transaction::new();
        t.remove(c(), &o("a"));
        p.check(&t, 1, &Mem(&m)).unwrap();
        m.apply(t).unwrap();
        p.applied(1);
        assert!(p.is_empty());
        // From the applied state now.
        let mut t = Transaction::new();
        t.remove(c(), &o("a"));
        assert!(p.check(&t, 2, &Mem(&m)).is_err());
    }
}
