//! Compound ops (python-rados' `WriteOpCtx` and `ReadOpCtx`): sub-ops
//! gathered in Python, then applied to one object all or nothing by
//! `Ioctx.operate_write_op`/`operate_read_op`. Asserts are checked before
//! anything is applied; one that fails raises `OperationCanceled` and
//! nothing changes. A read op's results reach the `OmapIterator`s its
//! calls returned only after it ran, and only if it succeeded.

use crate::errors::{IOError, InvalidArgumentError};
use crate::ioctx::data;
use loligo_types::ops::{Cmp, SubOp, SubResult, Version};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyString, PyTuple};
use serde_bytes::ByteBuf;
use std::collections::VecDeque;
use std::sync::Mutex;

/// python-rados' comparison constants for `cmpxattr` and `omap_cmp`.
pub const CMP_CONSTANTS: &[(&str, u8)] = &[
    ("LIBRADOS_CMPXATTR_OP_EQ", 1),
    ("LIBRADOS_CMPXATTR_OP_NE", 2),
    ("LIBRADOS_CMPXATTR_OP_GT", 3),
    ("LIBRADOS_CMPXATTR_OP_GTE", 4),
    ("LIBRADOS_CMPXATTR_OP_LT", 5),
    ("LIBRADOS_CMPXATTR_OP_LTE", 6),
];

/// The comparison of `cmpxattr`'s constant `op`, read as Ceph reads it:
/// the value the caller gives OP the stored one (GT holds when the given
/// value is greater). Loligo's `Cmp` reads the other way round (stored OP
/// given).
fn cmp_of(op: u8) -> PyResult<Cmp> {
    Ok(match op {
        1 => Cmp::Eq,
        2 => Cmp::Ne,
        3 => Cmp::Lt,
        4 => Cmp::Le,
        5 => Cmp::Gt,
        6 => Cmp::Ge,
        _ => {
            return Err(InvalidArgumentError::new_err(format!(
                "comparison {op} is not one of LIBRADOS_CMPXATTR_OP_EQ..LTE (1..=6)"
            )))
        }
    })
}

/// The comparison of `omap_cmp`'s constant `op`, read as Ceph reads it:
/// the stored value OP the given one, and only EQ, LT and GT.
fn omap_cmp_of(op: u8) -> PyResult<Cmp> {
    Ok(match op {
        1 => Cmp::Eq,
        3 => Cmp::Gt,
        5 => Cmp::Lt,
        _ => {
            return Err(InvalidArgumentError::new_err(format!(
                "omap_cmp takes LIBRADOS_CMPXATTR_OP_EQ, _GT or _LT, not {op}"
            )))
        }
    })
}

/// An omap key from Python: `str` (UTF-8) or `bytes`.
pub struct Key(pub Vec<u8>);

impl<'a, 'py> FromPyObject<'a, 'py> for Key {
    type Error = PyErr;

    fn extract(ob: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(s) = ob.cast::<PyString>() {
            return Ok(Key(s.to_cow()?.as_bytes().to_vec()));
        }
        if let Ok(b) = ob.cast::<PyBytes>() {
            return Ok(Key(b.as_bytes().to_vec()));
        }
        Err(InvalidArgumentError::new_err(format!(
            "an omap key is str or bytes, not {}",
            ob.get_type().name()?
        )))
    }
}

/// A key as Python gets it back: `str` when it is UTF-8, else `bytes`.
fn key_obj<'py>(py: Python<'py>, k: &[u8]) -> Bound<'py, PyAny> {
    match std::str::from_utf8(k) {
        Ok(s) => PyString::new(py, s).into_any(),
        Err(_) => PyBytes::new(py, k).into_any(),
    }
}

fn poisoned<T>(_: T) -> PyErr {
    IOError::new_err("a compound op was poisoned by a panic")
}

/// A compound write op.
#[pyclass(module = "loligo", frozen)]
#[derive(Default)]
pub struct WriteOp {
    ops: Mutex<Vec<SubOp>>,
}

impl WriteOp {
    /// Add a sub-op.
    pub fn push(&self, op: SubOp) -> PyResult<()> {
        self.ops.lock().map_err(poisoned)?.push(op);
        Ok(())
    }

    /// The sub-ops, leaving the op empty (python-rados' ops are spent by
    /// running them too).
    pub fn take(&self) -> Vec<SubOp> {
        self.ops
            .lock()
            .map(|mut o| std::mem::take(&mut *o))
            .unwrap_or_default()
    }
}

#[pymethods]
impl WriteOp {
    #[new]
    fn py_new() -> Self {
        WriteOp::default()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> bool {
        self.release();
        false
    }

    /// Drop the gathered sub-ops.
    fn release(&self) {
        self.take();
    }

    /// Make the object; `exclusive` (python-rados' flag, any true value):
    /// fail with ObjectExists if it exists.
    #[pyo3(name = "new", signature = (exclusive=0))]
    fn create(&self, exclusive: i64) -> PyResult<()> {
        if exclusive != 0 {
            self.push(SubOp::AssertNotExists)?;
        }
        self.push(SubOp::Create)
    }

    /// Remove the object.
    fn remove(&self) -> PyResult<()> {
        self.push(SubOp::Remove)
    }

    #[pyo3(signature = (to_write, offset=0))]
    fn write(&self, to_write: PyBackedBytes, offset: u64) -> PyResult<()> {
        self.push(SubOp::Write {
            offset,
            data: data(to_write),
        })
    }

    fn write_full(&self, to_write: PyBackedBytes) -> PyResult<()> {
        self.push(SubOp::WriteFull(data(to_write)))
    }

    fn append(&self, to_append: PyBackedBytes) -> PyResult<()> {
        self.push(SubOp::Append(data(to_append)))
    }

    fn truncate(&self, offset: u64) -> PyResult<()> {
        self.push(SubOp::Truncate(offset))
    }

    /// How the object will be used (librados's
    /// `rados_write_op_set_alloc_hint2`): sizes in bytes and
    /// `LIBRADOS_ALLOC_HINT_FLAG_*` flags.
    #[pyo3(signature = (expected_object_size, expected_write_size, flags=0))]
    fn set_alloc_hint(
        &self,
        expected_object_size: u64,
        expected_write_size: u64,
        flags: u32,
    ) -> PyResult<()> {
        self.push(SubOp::SetAllocHint {
            expected_object_size,
            expected_write_size,
            flags,
        })
    }

    fn zero(&self, offset: u64, length: u64) -> PyResult<()> {
        self.push(SubOp::Zero {
            offset,
            len: length,
        })
    }

    fn set_xattr(&self, xattr_name: String, xattr_value: PyBackedBytes) -> PyResult<()> {
        self.push(SubOp::SetXattr {
            name: xattr_name,
            value: xattr_value.to_vec(),
        })
    }

    fn rm_xattr(&self, xattr_name: String) -> PyResult<()> {
        self.push(SubOp::RmXattr(xattr_name))
    }

    /// Fail (ObjectNotFound) unless the object exists.
    fn assert_exists(&self) -> PyResult<()> {
        self.push(SubOp::AssertExists)
    }

    /// Fail (OperationCanceled) unless the object's version is `version`
    /// (`(epoch, counter)`, as `Ioctx.stat` gives it).
    fn assert_version(&self, version: (u64, u64)) -> PyResult<()> {
        self.push(SubOp::AssertVersion(Version {
            epoch: version.0,
            v: version.1,
        }))
    }

    /// Fail (OperationCanceled) unless `value` OP xattr `name` holds (a
    /// missing xattr compares as empty).
    fn cmpxattr(&self, name: String, op: u8, value: PyBackedBytes) -> PyResult<()> {
        self.push(SubOp::CmpXattr {
            name,
            cmp: cmp_of(op)?,
            value: value.to_vec(),
        })
    }

    /// Fail (OperationCanceled) unless omap `key`'s value OP `val` holds
    /// (a missing key compares as empty; EQ, GT or LT, as Ceph's).
    #[pyo3(signature = (key, val, cmp_op=1))]
    fn omap_cmp(&self, key: Key, val: PyBackedBytes, cmp_op: u8) -> PyResult<()> {
        self.push(SubOp::CmpOmap {
            key: key.0,
            cmp: omap_cmp_of(cmp_op)?,
            value: val.to_vec(),
        })
    }

    /// Run object class method `cls.method` with `data` as part of the op.
    fn execute(&self, cls: String, method: String, data: PyBackedBytes) -> PyResult<()> {
        self.push(SubOp::Exec {
            class: cls,
            method,
            input: data.to_vec(),
        })
    }
}

/// What becomes of one read sub-op's result.
pub enum Slot {
    /// An assert: no result.
    None,
    /// Entries into an iterator, those with keys starting with `prefix`
    /// (values kept when `values`).
    Omap {
        it: Py<OmapIterator>,
        prefix: Vec<u8>,
        values: bool,
    },
}

/// A compound read op.
#[pyclass(module = "loligo", frozen)]
#[derive(Default)]
pub struct ReadOp {
    ops: Mutex<Vec<(SubOp, Slot)>>,
}

impl ReadOp {
    fn push(&self, op: SubOp, slot: Slot) -> PyResult<()> {
        self.ops.lock().map_err(poisoned)?.push((op, slot));
        Ok(())
    }

    /// The sub-ops and where their results go, leaving the op empty.
    pub fn take(&self) -> (Vec<SubOp>, Vec<Slot>) {
        self.ops
            .lock()
            .map(|mut o| std::mem::take(&mut *o))
            .unwrap_or_default()
            .into_iter()
            .unzip()
    }

    /// Add a listing of at most `max` entries after `start_after` with
    /// keys starting with `prefix`. Keys with one prefix are contiguous in
    /// key order, so listing from the prefix on and keeping those that
    /// match returns exactly the first `max` matching entries (or all).
    /// `max` 0 reads nothing (its iterator stays empty).
    pub fn list(
        &self,
        py: Python<'_>,
        start_after: Vec<u8>,
        prefix: Vec<u8>,
        max: u32,
        values: bool,
    ) -> PyResult<(Py<OmapIterator>, i32)> {
        let mut start = start_after;
        if !start.is_empty() {
            // The first key after `start_after` (the listing includes its start).
            start.push(0);
        }
        if start < prefix {
            start = prefix.clone();
        }
        let it = Py::new(py, OmapIterator::default())?;
        if max == 0 {
            return Ok((it, 0));
        }
        let op = SubOp::OmapList { start, limit: max };
        let slot = Slot::Omap {
            it: it.clone_ref(py),
            prefix,
            values,
        };
        self.push(op, slot)?;
        Ok((it, 0))
    }

    /// Add a read of the values of `keys`.
    pub fn by_keys(&self, py: Python<'_>, keys: Vec<Key>) -> PyResult<(Py<OmapIterator>, i32)> {
        let it = Py::new(py, OmapIterator::default())?;
        let op = SubOp::OmapGetKeys(keys.into_iter().map(|k| ByteBuf::from(k.0)).collect());
        let slot = Slot::Omap {
            it: it.clone_ref(py),
            prefix: Vec::new(),
            values: true,
        };
        self.push(op, slot)?;
        Ok((it, 0))
    }
}

/// Hand a read op's results (one per sub-op) to its slots.
pub fn fill(py: Python<'_>, slots: Vec<Slot>, results: Vec<SubResult>) -> PyResult<()> {
    if results.len() != slots.len() {
        return Err(IOError::new_err(format!(
            "the OSD answered {} results for {} sub-ops",
            results.len(),
            slots.len()
        )));
    }
    for (slot, r) in slots.into_iter().zip(results) {
        let Slot::Omap { it, prefix, values } = slot else {
            continue;
        };
        let entries = match r {
            SubResult::Omap(v) => v,
            _ => Vec::new(),
        };
        let items = entries
            .into_iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| (k.into_vec(), values.then(|| v.into_vec())))
            .collect();
        *it.get().items.lock().map_err(poisoned)? = items;
    }
    let _ = py;
    Ok(())
}

#[pymethods]
impl ReadOp {
    #[new]
    fn py_new() -> Self {
        ReadOp::default()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> bool {
        self.release();
        false
    }

    /// Drop the gathered sub-ops.
    fn release(&self) {
        self.take();
    }

    /// Fail (ObjectNotFound) unless the object exists.
    fn assert_exists(&self) -> PyResult<()> {
        self.push(SubOp::AssertExists, Slot::None)
    }

    /// Fail (OperationCanceled) unless the object's version is `version`.
    fn assert_version(&self, version: (u64, u64)) -> PyResult<()> {
        let v = Version {
            epoch: version.0,
            v: version.1,
        };
        self.push(SubOp::AssertVersion(v), Slot::None)
    }

    /// Fail (OperationCanceled) unless `value` OP xattr `name` holds.
    fn cmpxattr(&self, name: String, op: u8, value: PyBackedBytes) -> PyResult<()> {
        let op = SubOp::CmpXattr {
            name,
            cmp: cmp_of(op)?,
            value: value.to_vec(),
        };
        self.push(op, Slot::None)
    }

    /// Fail (OperationCanceled) unless omap `key`'s value OP `val` holds.
    #[pyo3(signature = (key, val, cmp_op=1))]
    fn omap_cmp(&self, key: Key, val: PyBackedBytes, cmp_op: u8) -> PyResult<()> {
        let op = SubOp::CmpOmap {
            key: key.0,
            cmp: omap_cmp_of(cmp_op)?,
            value: val.to_vec(),
        };
        self.push(op, Slot::None)
    }
}

/// An omap key and its value (None: keys were asked for).
type Entry = (Vec<u8>, Option<Vec<u8>>);

/// The entries a read op returned: iterate for `(key, value)` (value
/// `None` from `get_omap_keys`). Empty until the op has run.
#[pyclass(module = "loligo", frozen)]
#[derive(Default)]
pub struct OmapIterator {
    items: Mutex<VecDeque<Entry>>,
}

#[pymethods]
impl OmapIterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let next = self.items.lock().map_err(poisoned)?.pop_front();
        next.map(|(k, v)| {
            let v = match v {
                Some(v) => PyBytes::new(py, &v).into_any(),
                None => py.None().into_bound(py),
            };
            PyTuple::new(py, [key_obj(py, &k), v])
        })
        .transpose()
    }
}
