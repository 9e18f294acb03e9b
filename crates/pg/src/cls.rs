//! Object classes: named methods the OSD runs inside a client op, on the
//! op's object, atomically with the op's other sub-ops (Ceph's `cls`).
//! A client sends `SubOp::Exec { class, method, input }`; the method reads
//! the object, may refuse (then nothing of the op is applied), and adds its
//! writes to the op's transaction, which the PG commits on every copy like
//! any other write.
//!
//! A method must never apply anything itself, never touch another object,
//! and never run unbounded: every read and write it makes is charged to a
//! per-call budget ([`BUDGET`]), its output is capped ([`OUTPUT_MAX`]), and a
//! method that overruns either fails the op. A method's reads see the
//! object as it was before the op (as every read sub-op does), not the
//! writes of earlier sub-ops or of its own.
//!
//! Methods are plain Rust functions in a static table ([`METHODS`]): the
//! registry is fixed at build time, so every OSD of a version runs the same
//! code for a name.

use crate::opstate::{need, store_err, user_xattr, ObjState};
use loligo_store::{CollectionId, ObjectId, ObjectStore, Transaction};
use loligo_types::cls::{
    KeyRange, KvNodeStat, KvWrite, NodeRange, RangePage, WritePlan, KV_COUNT_XATTR, KV_RANGE_XATTR,
    KV_UNWRITABLE_XATTR,
};
use loligo_types::ops::{OpError, Version};
use serde::{Deserialize, Serialize};

mod s3;
mod s3v;

/// Cost units one call may spend: one per store call, one per omap entry
/// or xattr read or written, one per 4 KiB of data.
pub const BUDGET: u64 = 1 << 20;
/// Largest output of one call, in bytes.
pub const OUTPUT_MAX: usize = 4 << 20;

/// Why a method failed.
#[derive(Debug)]
pub enum ClsError {
    /// The method's own check failed (an assertion): `code` is the
    /// method's, documented with it.
    Refused { code: u32, message: String },
    /// An op-level error (object missing, bad input, store error...).
    Op(OpError),
}

impl From<OpError> for ClsError {
    fn from(e: OpError) -> Self {
        ClsError::Op(e)
    }
}

/// A method's result.
pub type ClsResult = Result<Vec<u8>, ClsError>;

/// Omap entries, in key order.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// One method of the registry.
pub struct Method {
    pub class: &'static str,
    pub name: &'static str,
    /// Whether it may write (a method that does not is served on the
    /// read path and refused if it tries).
    pub writes: bool,
    pub run: fn(&mut Ctx<'_>, &[u8]) -> ClsResult,
}

/// Every method an OSD offers.
pub static METHODS: &[Method] = &[
    Method {
        class: "omap",
        name: "count",
        writes: false,
        run: omap_count,
    },
    Method {
        class: "omap",
        name: "range",
        writes: false,
        run: omap_range,
    },
    Method {
        class: "omap",
        name: "insert_new",
        writes: true,
        run: omap_insert_new,
    },
    Method {
        class: "omap",
        name: "rm_present",
        writes: true,
        run: omap_rm_present,
    },
    Method {
        class: "kv",
        name: "write",
        writes: true,
        run: kv_write,
    },
    Method {
        class: "kv",
        name: "stat",
        writes: false,
        run: kv_stat,
    },
    Method {
        class: "s3",
        name: "commit",
        writes: true,
        run: s3::commit,
    },
    Method {
        class: "s3",
        name: "remove",
        writes: true,
        run: s3::remove,
    },
    Method {
        class: "s3",
        name: "abandon",
        writes: true,
        run: s3::abandon,
    },
    Method {
        class: "s3",
        name: "seal",
        writes: true,
        run: s3::seal,
    },
    Method {
        class: "s3",
        name: "unseal",
        writes: true,
        run: s3::unseal,
    },
    Method {
        class: "s3",
        name: "begin",
        writes: true,
        run: s3::begin,
    },
    Method {
        class: "s3",
        name: "part",
        writes: true,
        run: s3::put_part,
    },
    Method {
        class: "s3",
        name: "complete",
        writes: true,
        run: s3::complete,
    },
    Method {
        class: "s3",
        name: "abort",
        writes: true,
        run: s3::abort,
    },
    Method {
        class: "s3",
        name: "vcommit",
        writes: true,
        run: s3v::vcommit,
    },
    Method {
        class: "s3",
        name: "vcomplete",
        writes: true,
        run: s3v::vcomplete,
    },
    Method {
        class: "s3",
        name: "vremove",
        writes: true,
        run: s3v::vremove,
    },
];

/// The method `class.name`, if the registry has it.
pub fn lookup(class: &str, name: &str) -> Option<&'static Method> {
    METHODS.iter().find(|m| m.class == class && m.name == name)
}

/// What a method may see and do: its object before the op, the budget
/// left, and the writes it has made.
pub struct Ctx<'a> {
    s: &'a dyn ObjectStore,
    c: CollectionId,
    o: &'a ObjectId,
    st: &'a ObjState,
    may_write: bool,
    budget: u64,
    /// The method's writes, in order.
    pub(crate) txn: Transaction,
    /// Whether the object exists after the method's writes.
    pub(crate) exists: bool,
}

impl<'a> Ctx<'a> {
    /// A context for one call on object `o` (state `st`) whose earlier
    /// sub-ops leave it existing or not (`exists`).
    pub fn new(
        s: &'a dyn ObjectStore,
        c: CollectionId,
        o: &'a ObjectId,
        st: &'a ObjState,
        exists: bool,
        may_write: bool,
    ) -> Ctx<'a> {
        Ctx {
            s,
            c,
            o,
            st,
            may_write,
            budget: BUDGET,
            txn: Transaction::new(),
            exists,
        }
    }

    fn charge(&mut self, units: u64) -> Result<(), ClsError> {
        self.budget = self.budget.checked_sub(units).ok_or_else(|| {
            ClsError::Op(OpError::Invalid(format!(
                "object class method used more than its budget of {BUDGET} units"
            )))
        })?;
        Ok(())
    }

    fn writing(&mut self, units: u64) -> Result<(), ClsError> {
        if !self.may_write {
            return Err(ClsError::Op(OpError::Invalid(
                "a read-only object class method tried to write".into(),
            )));
        }
        self.charge(units)
    }

    /// Whether the object existed before the op.
    pub fn existed(&self) -> bool {
        self.st.exists
    }

    /// The object's size and version before the op (`NotFound` if it
    /// did not exist).
    pub fn stat(&mut self) -> Result<(u64, Version), ClsError> {
        self.charge(1)?;
        need(self.st.exists)?;
        Ok((self.st.size, self.st.version))
    }

    /// `len` bytes at `offset` (0: to the end) of the object before the op.
    pub fn read(&mut self, offset: u64, len: u64) -> Result<Vec<u8>, ClsError> {
        need(self.st.exists)?;
        let len = if len == 0 {
            self.st.size.saturating_sub(offset)
        } else {
            len
        };
        self.charge(1 + len / 4096)?;
        let mut v = self
            .s
            .read(self.c, self.o, &[(offset, len)])
            .map_err(store_err)?;
        Ok(v.pop().unwrap_or_default())
    }

    /// Xattr `name` (not one of the OSD's own, which start with `_`).
    pub fn getxattr(&mut self, name: &str) -> Result<Option<Vec<u8>>, ClsError> {
        self.charge(1)?;
        need(self.st.exists)?;
        if name.starts_with('_') {
            return Err(OpError::Invalid(format!("xattr '{name}' is the OSD's own")).into());
        }
        match self.s.getattr(self.c, self.o, name) {
            Ok(v) => Ok(Some(v)),
            Err(loligo_store::StoreError::NoAttr { .. }) => Ok(None),
            Err(e) => Err(store_err(e).into()),
        }
    }

    /// Xattrs `names` (none of the OSD's own), read from the object once:
    /// each value, or `None` where it has none. Charged a unit per xattr
    /// the object has, at least one per name.
    pub fn getxattrs<const N: usize>(
        &mut self,
        names: [&str; N],
    ) -> Result<[Option<Vec<u8>>; N], ClsError> {
        self.charge(N as u64)?;
        need(self.st.exists)?;
        if let Some(name) = names.iter().find(|n| n.starts_with('_')) {
            return Err(OpError::Invalid(format!("xattr '{name}' is the OSD's own")).into());
        }
        let all = self.s.getattrs(self.c, self.o).map_err(store_err)?;
        // The store read every xattr: those beyond the names are charged too.
        self.charge(all.len().saturating_sub(N) as u64)?;
        Ok(names.map(|n| all.get(n).cloned()))
    }

    /// The values of those of `keys` the omap has.
    pub fn omap_get(
        &mut self,
        keys: &[Vec<u8>],
    ) -> Result<std::collections::BTreeMap<Vec<u8>, Vec<u8>>, ClsError> {
        self.charge(1 + keys.len() as u64)?;
        if !self.st.exists {
            return Ok(Default::default());
        }
        Ok(self.s.omap_get(self.c, self.o, keys).map_err(store_err)?)
    }

    /// Omap entries with `start <= key < end` (`end: None`: no bound), at
    /// most `limit`, in key order.
    pub fn omap_range(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Entries, ClsError> {
        // Charged for what it may return, before reading it.
        self.charge(1 + limit as u64)?;
        if !self.st.exists {
            return Ok(Vec::new());
        }
        Ok(self
            .s
            .omap_range(self.c, self.o, start, end, limit)
            .map_err(store_err)?)
    }

    /// Set omap entries (creating the object if it does not exist).
    pub fn omap_set(&mut self, kvs: Vec<(Vec<u8>, Vec<u8>)>) -> Result<(), ClsError> {
        self.writing(1 + kvs.len() as u64)?;
        self.txn.omap_setkeys(self.c, self.o, kvs);
        self.exists = true;
        Ok(())
    }

    /// Remove omap entries (absent ones are ignored).
    pub fn omap_rm(&mut self, keys: Vec<Vec<u8>>) -> Result<(), ClsError> {
        self.writing(1 + keys.len() as u64)?;
        need(self.exists)?;
        self.txn.omap_rmkeys(self.c, self.o, keys);
        Ok(())
    }

    /// Set a user xattr (not one starting with `_`).
    pub fn setxattr(&mut self, name: &str, value: Vec<u8>) -> Result<(), ClsError> {
        self.writing(1)?;
        user_xattr(name)?;
        self.txn.setattr(self.c, self.o, name, value);
        self.exists = true;
        Ok(())
    }
}

/// Run method `m` with `input` in `cx`: its output, bounded.
pub fn call(m: &Method, cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let out = (m.run)(cx, input)?;
    if out.len() > OUTPUT_MAX {
        return Err(ClsError::Op(OpError::Invalid(format!(
            "{}.{} returned {} bytes (at most {OUTPUT_MAX})",
            m.class,
            m.name,
            out.len()
        ))));
    }
    Ok(out)
}

fn decode<'de, T: Deserialize<'de>>(input: &'de [u8]) -> Result<T, ClsError> {
    postcard::from_bytes(input)
        .map_err(|e| ClsError::Op(OpError::Invalid(format!("method input: {e}"))))
}

fn encode<T: Serialize>(v: &T) -> ClsResult {
    postcard::to_stdvec(v).map_err(|e| ClsError::Op(OpError::Io(format!("method output: {e}"))))
}

/// Omap page the generic methods read at a time.
const PAGE: usize = 1024;

/// `omap.count`: the number of omap keys in a [`KeyRange`] (`limit` 0:
/// no limit but the budget), as a postcard `u64`. An object that does not
/// exist has none.
fn omap_count(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let r: KeyRange = decode(input)?;
    let limit = if r.limit == 0 { u64::MAX } else { r.limit };
    let mut n = 0u64;
    let mut start = r.start;
    while n < limit {
        let want = PAGE.min((limit - n).try_into().unwrap_or(PAGE));
        let page = cx.omap_range(&start, r.end.as_deref(), want)?;
        n += page.len() as u64;
        match page.last() {
            Some((k, _)) if page.len() == want => {
                start = k.clone();
                start.push(0);
            }
            _ => break,
        }
    }
    encode(&n)
}

/// Bytes of keys and values one `omap.range` page returns at most (one
/// entry more if its first entry alone is larger).
const RANGE_BYTES: usize = 2 << 20;

/// `omap.range`: the omap entries in a [`KeyRange`] (`limit` at most
/// 10,000; 0 means 10,000), at most [`RANGE_BYTES`] of them, as a postcard
/// [`RangePage`].
fn omap_range(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let r: KeyRange = decode(input)?;
    let limit = match r.limit {
        0 => 10_000,
        n => n.min(10_000) as usize,
    };
    let mut out = RangePage::default();
    let mut bytes = 0usize;
    let mut start = r.start;
    loop {
        // One more than wanted, to tell whether the range goes on.
        let want = PAGE.min(limit - out.entries.len() + 1);
        let page = cx.omap_range(&start, r.end.as_deref(), want)?;
        let full = page.len() == want;
        if let Some((k, _)) = page.last() {
            start = k.clone();
            start.push(0);
        }
        for (k, v) in page {
            if out.entries.len() == limit || (bytes > 0 && bytes + k.len() + v.len() > RANGE_BYTES)
            {
                out.more = true;
                return encode(&out);
            }
            bytes += k.len() + v.len();
            out.entries.push((k, v));
        }
        if !full {
            return encode(&out);
        }
    }
}

/// `omap.insert_new`: set the given entries (postcard `Vec<(key,
/// value)>`) only if none of the keys exists; refused with code 1 (and
/// nothing set) otherwise. Output: empty.
fn omap_insert_new(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let kvs: Vec<(Vec<u8>, Vec<u8>)> = decode(input)?;
    let keys: Vec<Vec<u8>> = kvs.iter().map(|(k, _)| k.clone()).collect();
    let have = cx.omap_get(&keys)?;
    if let Some(k) = have.keys().next() {
        return Err(refused(
            1,
            format!("key {} exists", String::from_utf8_lossy(k)),
        ));
    }
    cx.omap_set(kvs)?;
    Ok(Vec::new())
}

/// `omap.rm_present`: remove the given keys (postcard `Vec<key>`) only if
/// all of them exist; refused with code 1 (and nothing removed)
/// otherwise. Output: empty.
fn omap_rm_present(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let keys: Vec<Vec<u8>> = decode(input)?;
    let have = cx.omap_get(&keys)?;
    if let Some(k) = keys.iter().find(|k| !have.contains_key(*k)) {
        return Err(refused(
            1,
            format!("key {} is absent", String::from_utf8_lossy(k)),
        ));
    }
    cx.omap_rm(keys)?;
    Ok(Vec::new())
}

fn refused(code: u32, message: String) -> ClsError {
    ClsError::Refused { code, message }
}

/// A key-value node's entry count, unwritable mark and range (`NotFound`
/// if the node does not exist; `Invalid` if the object is not a node).
fn kv_node(cx: &mut Ctx<'_>) -> Result<KvNodeStat, ClsError> {
    need(cx.existed())?;
    let not_node = |what: &str| {
        ClsError::Op(OpError::Invalid(format!(
            "the object is not a key-value node ({what})"
        )))
    };
    let [count, range, unwritable] =
        cx.getxattrs([KV_COUNT_XATTR, KV_RANGE_XATTR, KV_UNWRITABLE_XATTR])?;
    let entries = match count {
        Some(b) => u64::from_le_bytes(
            b.as_slice()
                .try_into()
                .map_err(|_| not_node("its count is corrupt"))?,
        ),
        None => return Err(not_node("no entry count")),
    };
    let range: NodeRange = match range {
        Some(b) => postcard::from_bytes(&b).map_err(|_| not_node("its range is corrupt"))?,
        None => return Err(not_node("no range")),
    };
    let unwritable = unwritable.is_some_and(|v| !v.is_empty());
    Ok(KvNodeStat {
        entries,
        unwritable,
        range,
    })
}

/// `kv.stat`: a key-value node's [`KvNodeStat`].
fn kv_stat(cx: &mut Ctx<'_>, _input: &[u8]) -> ClsResult {
    encode(&kv_node(cx)?)
}

/// `kv.write`: a [`KvWrite`] on a key-value node, keeping its entry count;
/// refusal codes `KV_*`. Output: the node's [`KvNodeStat`] after it.
fn kv_write(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let w: KvWrite = decode(input)?;
    let node = kv_node(cx)?;
    let have = cx.omap_get(&w.keys())?;
    let WritePlan { sets, rms, entries } = w
        .plan(&node, &have)
        .map_err(|(code, message)| refused(code, message))?;
    if !rms.is_empty() {
        cx.omap_rm(rms)?;
    }
    if !sets.is_empty() {
        cx.omap_set(sets)?;
    }
    if entries != node.entries {
        cx.setxattr(KV_COUNT_XATTR, entries.to_le_bytes().to_vec())?;
    }
    encode(&KvNodeStat {
        entries,
        unwritable: false,
        range: node.range,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::exec::{execute, obj_state, validate, VERSION_ATTR};
    use loligo_store::MemStore;
    use loligo_types::cls::{KV_EXPECT, KV_FULL, KV_RANGE, KV_UNDER, KV_UNWRITABLE};
    use loligo_types::ops::SubOp;

    fn coll() -> CollectionId {
        CollectionId::pg(1, 0)
    }

    pub(crate) fn store() -> MemStore {
        let s = MemStore::new();
        let mut t = Transaction::new();
        t.create_collection(coll());
        s.apply(t).unwrap();
        s
    }

    pub(crate) fn exec(class: &str, method: &str, input: Vec<u8>) -> SubOp {
        SubOp::Exec {
            class: class.into(),
            method: method.into(),
            input,
        }
    }

    fn kvs(pairs: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        pairs
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    /// Run `ops` on object `name` and apply what they write.
    pub(crate) fn run(s: &MemStore, name: &str, ops: &[SubOp]) -> Result<Vec<Vec<u8>>, OpError> {
        validate(name, ops)?;
        let o = ObjectId::new(7, name);
        let st = obj_state(s, coll(), &o)?;
        let out = execute(s, coll(), &o, &st, ops, 1 << 20)?;
        s.apply(out.txn).unwrap();
        Ok(out
            .results
            .into_iter()
            .map(|r| match r {
                loligo_types::ops::SubResult::Data(d) => d.to_vec(),
                _ => Vec::new(),
            })
            .collect())
    }

    pub(crate) fn omap(s: &MemStore, name: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        s.omap_range(coll(), &ObjectId::new(7, name), b"", None, 1000)
            .unwrap_or_default()
    }

    #[test]
    fn a_refused_method_applies_nothing_of_the_op() {
        let s = store();
        let put = |pairs: &[(&str, &str)]| {
            exec(
                "omap",
                "insert_new",
                postcard::to_stdvec(&kvs(pairs)).unwrap(),
            )
        };
        // Absent keys: set, the object made.
        run(&s, "o", &[put(&[("a", "1"), ("b", "2")])]).unwrap();
        assert_eq!(omap(&s, "o"), kvs(&[("a", "1"), ("b", "2")]));
        // One key present: refused with the method's code, and neither
        // the method's other key nor the op's earlier sub-op is applied.
        let e = run(
            &s,
            "o",
            &[
                SubOp::OmapSet(vec![(b"z".to_vec().into(), b"9".to_vec().into())]),
                put(&[("c", "3"), ("a", "x")]),
            ],
        )
        .unwrap_err();
        assert!(
            matches!(&e, OpError::MethodRefused { index: 1, code: 1, message } if message.contains("key a exists")),
            "{e:?}"
        );
        assert_eq!(omap(&s, "o"), kvs(&[("a", "1"), ("b", "2")]));
        // With the op's other sub-ops: all of it goes.
        run(
            &s,
            "o",
            &[
                SubOp::AssertExists,
                put(&[("c", "3")]),
                SubOp::OmapSet(vec![(b"d".to_vec().into(), b"4".to_vec().into())]),
            ],
        )
        .unwrap();
        assert_eq!(
            omap(&s, "o"),
            kvs(&[("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")])
        );
        // rm_present: all keys there, or nothing removed.
        let rm = |keys: &[&str]| {
            let k: Vec<Vec<u8>> = keys.iter().map(|k| k.as_bytes().to_vec()).collect();
            exec("omap", "rm_present", postcard::to_stdvec(&k).unwrap())
        };
        let e = run(&s, "o", &[rm(&["a", "nope"])]).unwrap_err();
        assert!(
            matches!(
                e,
                OpError::MethodRefused {
                    index: 0,
                    code: 1,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(omap(&s, "o").len(), 4);
        run(&s, "o", &[rm(&["a", "d"])]).unwrap();
        assert_eq!(omap(&s, "o"), kvs(&[("b", "2"), ("c", "3")]));
        // On an object that does not exist its keys are absent: refused.
        assert!(matches!(
            run(&s, "none", &[rm(&["a"])]),
            Err(OpError::MethodRefused { code: 1, .. })
        ));
    }

    #[test]
    fn reading_methods_count_and_list_a_key_range() {
        let s = store();
        let many: Vec<(Vec<u8>, Vec<u8>)> = (0..2500u32)
            .map(|i| (format!("k{i:05}").into_bytes(), i.to_le_bytes().to_vec()))
            .collect();
        let mut t = Transaction::new();
        t.omap_setkeys(coll(), &ObjectId::new(7, "o"), many.clone());
        s.apply(t).unwrap();
        let range = |start: &str, end: Option<&str>, limit: u64| {
            postcard::to_stdvec(&KeyRange {
                start: start.as_bytes().to_vec(),
                end: end.map(|e| e.as_bytes().to_vec()),
                limit,
            })
            .unwrap()
        };
        let count = |input: Vec<u8>| -> u64 {
            let out = run(&s, "o", &[exec("omap", "count", input)]).unwrap();
            postcard::from_bytes(&out[0]).unwrap()
        };
        assert_eq!(count(range("", None, 0)), 2500);
        assert_eq!(count(range("k01000", Some("k02024"), 0)), 1024);
        assert_eq!(count(range("", None, 1500)), 1500);
        assert_eq!(count(range("x", None, 0)), 0);
        let out = run(
            &s,
            "o",
            &[exec("omap", "range", range("k00010", Some("k00013"), 0))],
        )
        .unwrap();
        let got: RangePage = postcard::from_bytes(&out[0]).unwrap();
        assert_eq!(got.entries, many[10..13].to_vec());
        assert!(!got.more);
        // Pages stop at their limit and say there is more; the last page
        // of a range says there is none.
        let page = |start: &str, limit: u64| -> RangePage {
            let out = run(&s, "o", &[exec("omap", "range", range(start, None, limit))]).unwrap();
            postcard::from_bytes(&out[0]).unwrap()
        };
        let p = page("", 1024);
        assert_eq!((p.entries.len(), p.more), (1024, true));
        let p = page("k01500", 1000);
        assert_eq!((p.entries.len(), p.more), (1000, false));
        assert_eq!(p.entries, many[1500..].to_vec());
        let p = page("k02499", 0);
        assert_eq!((p.entries.len(), p.more), (1, false));
        // Big values: a page stops at its byte bound, and a single entry
        // larger than the bound still comes back alone.
        let big = vec![7u8; RANGE_BYTES / 3];
        let mut t = Transaction::new();
        let bigs: Vec<(Vec<u8>, Vec<u8>)> =
            (0..5u8).map(|i| (vec![b'b', i], big.clone())).collect();
        t.omap_setkeys(coll(), &ObjectId::new(7, "big"), bigs.clone());
        t.omap_setkeys(
            coll(),
            &ObjectId::new(7, "huge"),
            vec![(b"h".to_vec(), vec![1u8; RANGE_BYTES + 10])],
        );
        s.apply(t).unwrap();
        let out = run(&s, "big", &[exec("omap", "range", range("", None, 0))]).unwrap();
        let p: RangePage = postcard::from_bytes(&out[0]).unwrap();
        assert_eq!(p.entries, bigs[..2].to_vec());
        assert!(p.more);
        let out = run(&s, "huge", &[exec("omap", "range", range("", None, 0))]).unwrap();
        let p: RangePage = postcard::from_bytes(&out[0]).unwrap();
        assert_eq!((p.entries.len(), p.more), (1, false));
        // Missing object: no keys (count), not an error.
        let out = run(&s, "none", &[exec("omap", "count", range("", None, 0))]).unwrap();
        assert_eq!(postcard::from_bytes::<u64>(&out[0]).unwrap(), 0);
        // A read-only method is not a write; a writing one is.
        assert!(!crate::exec::writes(&exec("omap", "count", Vec::new())));
        assert!(crate::exec::writes(&exec("omap", "insert_new", Vec::new())));
        assert!(crate::exec::takes_space(&exec(
            "omap",
            "insert_new",
            Vec::new()
        )));
        assert!(!crate::exec::writes(&exec("omap", "nope", Vec::new())));
    }

    #[test]
    fn bad_calls_are_typed_errors() {
        let s = store();
        assert_eq!(
            run(&s, "o", &[exec("omap", "nope", Vec::new())]),
            Err(OpError::NoMethod("omap.nope".into()))
        );
        for (class, method) in [
            ("", "count"),
            ("omap", ""),
            ("om ap", "count"),
            ("omap", &"x".repeat(65)),
        ] {
            assert!(
                matches!(
                    run(&s, "o", &[exec(class, method, Vec::new())]),
                    Err(OpError::Invalid(_))
                ),
                "{class}.{method}"
            );
        }
        // Garbage input: Invalid, nothing applied.
        let e = run(&s, "o", &[exec("omap", "insert_new", vec![0xff; 9])]).unwrap_err();
        assert!(matches!(e, OpError::Invalid(m) if m.contains("method input")));
        assert!(!s.exists(coll(), &ObjectId::new(7, "o")).unwrap());
    }

    #[test]
    fn a_method_is_bounded_in_reads_writes_and_output() {
        let s = store();
        let o = ObjectId::new(7, "o");
        let mut t = Transaction::new();
        t.omap_setkeys(
            coll(),
            &o,
            (0..3000u32)
                .map(|i| (i.to_be_bytes().to_vec(), Vec::new()))
                .collect(),
        );
        s.apply(t).unwrap();
        let st = obj_state(&s, coll(), &o).unwrap();
        // Counting 3,000 keys in pages of 1,024 costs more than a budget
        // of 2,000 units: the call fails instead of running on.
        let mut cx = Ctx::new(&s, coll(), &o, &st, true, false);
        cx.budget = 2000;
        let e = call(
            lookup("omap", "count").unwrap(),
            &mut cx,
            &postcard::to_stdvec(&KeyRange::default()).unwrap(),
        )
        .unwrap_err();
        assert!(matches!(e, ClsError::Op(OpError::Invalid(m)) if m.contains("budget")));
        // A read-only method cannot write.
        let mut cx = Ctx::new(&s, coll(), &o, &st, true, false);
        assert!(cx.omap_set(kvs(&[("a", "b")])).is_err());
        assert!(cx.setxattr("x", Vec::new()).is_err());
        assert!(cx.txn.ops.is_empty());
        // Nor touch the OSD's own xattrs, even when it may write.
        let mut cx = Ctx::new(&s, coll(), &o, &st, true, true);
        assert!(cx.setxattr(VERSION_ATTR, Vec::new()).is_err());
        assert!(cx.getxattr(VERSION_ATTR).is_err());
        assert!(cx.getxattrs(["x", VERSION_ATTR]).is_err());
        // Output past the cap fails the call.
        fn huge(_: &mut Ctx<'_>, _: &[u8]) -> ClsResult {
            Ok(vec![0; OUTPUT_MAX + 1])
        }
        let m = Method {
            class: "t",
            name: "huge",
            writes: false,
            run: huge,
        };
        let mut cx = Ctx::new(&s, coll(), &o, &st, true, false);
        assert!(matches!(
            call(&m, &mut cx, &[]),
            Err(ClsError::Op(OpError::Invalid(_)))
        ));
    }

    fn kv_write(
        changes: Vec<(&str, Option<&str>, loligo_types::cls::Expect)>,
        max: u64,
        min: u64,
    ) -> SubOp {
        let w = KvWrite {
            changes: changes
                .into_iter()
                .map(|(k, v, expect)| loligo_types::cls::KvChange {
                    key: k.as_bytes().to_vec(),
                    value: v.map(|v| v.as_bytes().to_vec()),
                    expect,
                })
                .collect(),
            max,
            min,
        };
        exec("kv", "write", postcard::to_stdvec(&w).unwrap())
    }

    pub(crate) fn refusal(r: Result<Vec<Vec<u8>>, OpError>) -> u32 {
        match r {
            Err(OpError::MethodRefused { code, .. }) => code,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn kv_nodes_keep_their_count_bounds_and_expectations() {
        use loligo_types::cls::Expect::*;
        let s = store();
        // A missing node: NotFound (it was replaced: re-read the index).
        assert_eq!(
            run(&s, "n", &[kv_write(vec![("a", Some("1"), Any)], 4, 0)]),
            Err(OpError::NotFound)
        );
        // An object without a count is not a node.
        run(&s, "plain", &[SubOp::Create]).unwrap();
        assert!(matches!(
            run(&s, "plain", &[kv_write(vec![("a", Some("1"), Any)], 4, 0)]),
            Err(OpError::Invalid(_))
        ));
        // A node needs its range too.
        let count = SubOp::SetXattr {
            name: KV_COUNT_XATTR.into(),
            value: 0u64.to_le_bytes().to_vec(),
        };
        run(&s, "n", &[count]).unwrap();
        assert!(matches!(
            run(&s, "n", &[kv_write(vec![("a", Some("1"), Any)], 4, 0)]),
            Err(OpError::Invalid(_))
        ));
        // An empty node for keys in ("", "m"], then batched inserts (the
        // last change of a key wins).
        let range = NodeRange {
            low: Some(Vec::new()),
            high: Some(b"m".to_vec()),
        };
        run(
            &s,
            "n",
            &[SubOp::SetXattr {
                name: KV_RANGE_XATTR.into(),
                value: postcard::to_stdvec(&range).unwrap(),
            }],
        )
        .unwrap();
        let out = run(
            &s,
            "n",
            &[kv_write(
                vec![
                    ("a", Some("1"), Absent),
                    ("b", Some("x"), Absent),
                    ("b", Some("2"), Any),
                    ("c", Some("3"), Any),
                ],
                4,
                0,
            )],
        )
        .unwrap();
        let st: KvNodeStat = postcard::from_bytes(&out[0]).unwrap();
        assert_eq!(
            st,
            KvNodeStat {
                entries: 3,
                unwritable: false,
                range: range.clone(),
            }
        );
        // Keys outside the node's range are refused, the whole batch.
        for key in ["mm", "z", ""] {
            assert_eq!(
                refusal(run(
                    &s,
                    "n",
                    &[kv_write(
                        vec![("b", Some("9"), Any), (key, Some("1"), Any)],
                        9,
                        0
                    )]
                )),
                KV_RANGE,
                "{key:?}"
            );
        }
        assert_eq!(omap(&s, "n"), kvs(&[("a", "1"), ("b", "2"), ("c", "3")]));
        // Past max: refused, nothing changed; an update at max is fine.
        assert_eq!(
            refusal(run(
                &s,
                "n",
                &[kv_write(
                    vec![("d", Some("4"), Any), ("e", Some("5"), Any)],
                    4,
                    0
                )]
            )),
            KV_FULL
        );
        run(&s, "n", &[kv_write(vec![("d", Some("4"), Any)], 4, 0)]).unwrap();
        run(&s, "n", &[kv_write(vec![("a", Some("10"), Present)], 4, 0)]).unwrap();
        // Expectations: insert of a present key, update of an absent one.
        assert_eq!(
            refusal(run(
                &s,
                "n",
                &[kv_write(vec![("a", Some("x"), Absent)], 9, 0)]
            )),
            KV_EXPECT
        );
        assert_eq!(
            refusal(run(&s, "n", &[kv_write(vec![("c0", None, Present)], 9, 0)])),
            KV_EXPECT
        );
        // Below min: refused; a removal of an absent key changes nothing.
        assert_eq!(
            refusal(run(
                &s,
                "n",
                &[kv_write(vec![("a", None, Any), ("b", None, Any)], 9, 3)]
            )),
            KV_UNDER
        );
        run(
            &s,
            "n",
            &[kv_write(
                vec![("a", None, Present), ("aa", None, Any)],
                9,
                3,
            )],
        )
        .unwrap();
        assert_eq!(omap(&s, "n"), kvs(&[("b", "2"), ("c", "3"), ("d", "4")]));
        // The count stays the omap's size.
        let out = run(&s, "n", &[exec("kv", "stat", Vec::new())]).unwrap();
        let st: KvNodeStat = postcard::from_bytes(&out[0]).unwrap();
        assert_eq!(st.entries, omap(&s, "n").len() as u64);
        // Unwritable: every write refused, before anything else.
        run(
            &s,
            "n",
            &[SubOp::SetXattr {
                name: KV_UNWRITABLE_XATTR.into(),
                value: b"1".to_vec(),
            }],
        )
        .unwrap();
        assert_eq!(
            refusal(run(
                &s,
                "n",
                &[kv_write(vec![("a", Some("x"), Absent)], 9, 0)]
            )),
            KV_UNWRITABLE
        );
        let out = run(&s, "n", &[exec("kv", "stat", Vec::new())]).unwrap();
        assert!(
            postcard::from_bytes::<KvNodeStat>(&out[0])
                .unwrap()
                .unwritable
        );
        assert_eq!(omap(&s, "n").len(), 3);
    }

    fn s3_entry(tails: Option<&str>) -> Vec<u8> {
        use loligo_types::s3::{IndexEntry, Layout, Segment, Tails};
        let layout = match tails {
            None => Layout::Inline,
            Some(p) => Layout::Striped {
                stripe: 4,
                segments: vec![Segment {
                    size: 8,
                    tails: Tails {
                        prefix: p.into(),
                        count: 2,
                    },
                    checksums: Default::default(),
                }],
            },
        };
        let e = IndexEntry {
            size: if tails.is_some() { 8 } else { 2 },
            etag: format!("etag-{}", tails.unwrap_or("inline")),
            mtime_ms: 1,
            owner: "u".into(),
            layout,
            content_type: None,
            meta: Default::default(),
            headers: Default::default(),
            checksums: Default::default(),
            acl: None,
            grants: None,
            parts: 0,
            tags: Default::default(),
            version_id: None,
            vseq: 0,
            delete_marker: false,
            checksum_type: None,
            retention: None,
            legal_hold: false,
        };
        serde_json::to_vec(&e).unwrap()
    }

    fn s3_commit(
        tails: Option<&str>,
        pending: Option<&str>,
        cond: loligo_types::s3::Condition,
    ) -> SubOp {
        let c = loligo_types::s3::Commit {
            key: "k".into(),
            entry: s3_entry(tails),
            inline: tails.is_none().then(|| b"hi".to_vec()),
            pending: pending.map(str::to_string),
            condition: cond,
            now_ms: 5,
        };
        exec("s3", "commit", postcard::to_stdvec(&c).unwrap())
    }

    fn prefixed(s: &MemStore, name: &str, p: u8) -> Vec<Vec<u8>> {
        omap(s, name)
            .into_iter()
            .map(|(k, _)| k)
            .filter(|k| k[0] == p)
            .collect()
    }

    /// The S3 index: an overwrite or a delete moves the old entry's data
    /// to the garbage list in the same op; a commit needs its upload's
    /// pending record and an unsealed shard; conditions and seals refuse.
    #[test]
    fn s3_index_changes_keep_every_tail_accounted_for() {
        use loligo_types::s3::{Condition, Garbage, GARBAGE, INLINE, PENDING};
        let s = store();
        let cond = Condition::default;
        // Striped data needs its pending record.
        let r = run(&s, "shard", &[s3_commit(Some("b.t1"), Some("t1"), cond())]);
        assert!(
            matches!(r, Err(OpError::MethodRefused { code: 1, .. })),
            "{r:?}"
        );
        let pending = serde_json::to_vec(&Garbage {
            tails: vec![],
            ms: 1,
            key: "k".into(),
        })
        .unwrap();
        let set = |tag: &str| {
            SubOp::OmapSet(vec![(
                serde_bytes::ByteBuf::from(loligo_types::s3::omap_key(PENDING, tag.as_bytes())),
                serde_bytes::ByteBuf::from(pending.clone()),
            )])
        };
        run(&s, "shard", &[set("t1")]).unwrap();
        run(&s, "shard", &[s3_commit(Some("b.t1"), Some("t1"), cond())]).unwrap();
        assert!(
            prefixed(&s, "shard", PENDING).is_empty(),
            "the commit takes its pending record"
        );
        // An inline overwrite sends the striped data to the garbage list.
        run(&s, "shard", &[s3_commit(None, None, cond())]).unwrap();
        let g = prefixed(&s, "shard", GARBAGE);
        assert_eq!(g.len(), 1);
        let rec = s.omap_get(coll(), &ObjectId::new(7, "shard"), &g).unwrap();
        let rec: Garbage = serde_json::from_slice(rec.values().next().unwrap()).unwrap();
        assert_eq!(rec.tails[0].prefix, "b.t1");
        assert_eq!(prefixed(&s, "shard", INLINE).len(), 1);
        // Conditions: create-only and ETag compare.
        let only_new = Condition {
            if_match: None,
            if_none_match: true,
        };
        let r = run(&s, "shard", &[s3_commit(None, None, only_new)]);
        assert!(
            matches!(r, Err(OpError::MethodRefused { code: 2, .. })),
            "{r:?}"
        );
        let wrong = Condition {
            if_match: Some("nope".into()),
            if_none_match: false,
        };
        let r = run(&s, "shard", &[s3_commit(None, None, wrong)]);
        assert!(
            matches!(r, Err(OpError::MethodRefused { code: 2, .. })),
            "{r:?}"
        );
        // A shard holding an object cannot be sealed.
        let r = run(&s, "shard", &[exec("s3", "seal", vec![])]);
        assert!(
            matches!(r, Err(OpError::MethodRefused { code: 5, .. })),
            "{r:?}"
        );
        // Removal: the entry and its inline data go; then it may be sealed,
        // and a sealed shard takes no entry.
        let rm = loligo_types::s3::Remove {
            key: "k".into(),
            condition: cond(),
            now_ms: 9,
        };
        let out = run(
            &s,
            "shard",
            &[exec("s3", "remove", postcard::to_stdvec(&rm).unwrap())],
        )
        .unwrap();
        assert!(postcard::from_bytes::<bool>(&out[0]).unwrap());
        assert!(prefixed(&s, "shard", INLINE).is_empty());
        run(&s, "shard", &[exec("s3", "seal", b"del-a".to_vec())]).unwrap();
        let r = run(&s, "shard", &[s3_commit(None, None, cond())]);
        assert!(
            matches!(r, Err(OpError::MethodRefused { code: 4, .. })),
            "{r:?}"
        );
        // Two deletions at once: the later seal is the shard's, and the
        // earlier one, giving up, cannot take it away (its unseal leaves
        // the shard sealed); only the holder's token unseals.
        run(&s, "shard", &[exec("s3", "seal", b"del-b".to_vec())]).unwrap();
        run(&s, "shard", &[exec("s3", "unseal", b"del-a".to_vec())]).unwrap();
        let r = run(&s, "shard", &[s3_commit(None, None, cond())]);
        assert!(
            matches!(r, Err(OpError::MethodRefused { code: 4, .. })),
            "{r:?}"
        );
        run(&s, "shard", &[exec("s3", "unseal", b"del-b".to_vec())]).unwrap();
        run(&s, "shard", &[s3_commit(None, None, cond())]).unwrap();
        // An abandoned upload's pending record becomes garbage; a late
        // commit of it is refused.
        run(&s, "shard", &[set("t2")]).unwrap();
        let a = loligo_types::s3::Abandon {
            tag: "t2".into(),
            now_ms: 10,
        };
        run(
            &s,
            "shard",
            &[exec("s3", "abandon", postcard::to_stdvec(&a).unwrap())],
        )
        .unwrap();
        assert_eq!(prefixed(&s, "shard", GARBAGE).len(), 2);
        let r = run(&s, "shard", &[s3_commit(Some("b.t2"), Some("t2"), cond())]);
        assert!(
            matches!(r, Err(OpError::MethodRefused { code: 1, .. })),
            "{r:?}"
        );
    }

    /// Multipart: a part uploaded again sends the old one's data to the
    /// garbage list; completing checks each segment against its part's
    /// record, takes the upload's records away and sends the parts not
    /// named to the garbage list; a gone upload refuses parts and aborts.
    #[test]
    fn s3_multipart_records_keep_every_part_accounted_for() {
        use loligo_types::s3::{
            omap_key, part_prefix, upload_key, Abort, Complete, Condition, Garbage, IndexEntry,
            Layout, Part, PutPart, Segment, Tails, GARBAGE, PART, PENDING, UPLOAD,
        };
        let s = store();
        let set = |k: Vec<u8>, v: Vec<u8>| {
            SubOp::OmapSet(vec![(
                serde_bytes::ByteBuf::from(k),
                serde_bytes::ByteBuf::from(v),
            )])
        };
        let pending = serde_json::to_vec(&Garbage {
            tails: vec![],
            ms: 1,
            key: "k".into(),
        })
        .unwrap();
        let tails = |p: &str| Tails {
            prefix: p.into(),
            count: 1,
        };
        let part = |p: &str| Part {
            size: 6 << 20,
            etag: format!("e-{p}"),
            mtime_ms: 1,
            tails: tails(p),
            checksums: Default::default(),
        };
        let put = |n: u32, p: &str| {
            let i = PutPart {
                key: "k".into(),
                upload_id: "U".into(),
                number: n,
                part: serde_json::to_vec(&part(p)).unwrap(),
                pending: p.into(),
                now_ms: 3,
            };
            exec("s3", "part", postcard::to_stdvec(&i).unwrap())
        };
        // No upload yet: refused.
        run(
            &s,
            "shard",
            &[set(omap_key(PENDING, b"t1"), pending.clone())],
        )
        .unwrap();
        let r = run(&s, "shard", &[put(1, "t1")]);
        assert!(
            matches!(r, Err(OpError::MethodRefused { code: 6, .. })),
            "{r:?}"
        );
        run(&s, "shard", &[set(upload_key("k", "U"), b"{}".to_vec())]).unwrap();
        for (n, tag) in [(1, "t1"), (1, "t2"), (2, "t3"), (3, "t4")] {
            run(
                &s,
                "shard",
                &[set(omap_key(PENDING, tag.as_bytes()), pending.clone())],
            )
            .unwrap();
            run(&s, "shard", &[put(n, tag)]).unwrap();
        }
        assert_eq!(
            prefixed(&s, "shard", GARBAGE).len(),
            1,
            "part 1's first data"
        );
        assert!(prefixed(&s, "shard", PENDING).is_empty());
        let entry = |segs: &[&str]| IndexEntry {
            size: 0,
            etag: "x-2".into(),
            mtime_ms: 4,
            owner: "u".into(),
            layout: Layout::Striped {
                stripe: 4 << 20,
                segments: segs
                    .iter()
                    .map(|p| Segment {
                        size: 6 << 20,
                        tails: tails(p),
                        checksums: Default::default(),
                    })
                    .collect(),
            },
            content_type: None,
            meta: Default::default(),
            headers: Default::default(),
            checksums: Default::default(),
            acl: None,
            grants: None,
            parts: 2,
            tags: Default::default(),
            version_id: None,
            vseq: 0,
            delete_marker: false,
            checksum_type: None,
            retention: None,
            legal_hold: false,
        };
        let complete = |segs: &[&str]| {
            let c = Complete {
                key: "k".into(),
                upload_id: "U".into(),
                entry: serde_json::to_vec(&entry(segs)).unwrap(),
                parts: vec![1, 2],
                condition: Condition::default(),
                now_ms: 5,
            };
            exec("s3", "complete", postcard::to_stdvec(&c).unwrap())
        };
        // Part 1 is t2 now, not t1.
        let r = run(&s, "shard", &[complete(&["t1", "t3"])]);
        assert!(
            matches!(r, Err(OpError::MethodRefused { code: 7, .. })),
            "{r:?}"
        );
        run(&s, "shard", &[complete(&["t2", "t3"])]).unwrap();
        assert!(prefixed(&s, "shard", UPLOAD).is_empty());
        assert!(
            prefixed(&s, "shard", PART).is_empty(),
            "{:?}",
            part_prefix("U")
        );
        assert_eq!(
            prefixed(&s, "shard", GARBAGE).len(),
            2,
            "and part 3, not named"
        );
        assert_eq!(prefixed(&s, "shard", b'o').len(), 1);
        let a = Abort {
            key: "k".into(),
            upload_id: "U".into(),
            now_ms: 6,
        };
        let r = run(
            &s,
            "shard",
            &[exec("s3", "abort", postcard::to_stdvec(&a).unwrap())],
        );
        assert!(
            matches!(r, Err(OpError::MethodRefused { code: 6, .. })),
            "{r:?}"
        );
    }
}
