//! `Ioctx`: object I/O on one pool (python-rados' `rados.Ioctx`), and
//! `Object`, an entry of a pool listing. Each call is one op to the PG's
//! primary, applied all or nothing; an exception means the op failed (or,
//! `TimedOut`, that its outcome is unknown), never that part of it was
//! applied.

use crate::errors::{client_err, InvalidArgumentError, IoctxStateError, ObjectNotFound};
use crate::ops::{Key, OmapIterator, ReadOp, WriteOp};
use crate::{block, json_to_py};
use bytes::Bytes;
use loligo_client::{ClientError, Cluster, IoCtx};
use loligo_types::ops::{SubOp, SubResult};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyList};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// An error unless the `Rados` handle behind `flag` is still connected.
pub fn live(flag: &AtomicBool) -> PyResult<()> {
    match flag.load(Ordering::Relaxed) {
        true => Ok(()),
        false => Err(crate::errors::RadosStateError::new_err(
            "the cluster handle was shut down",
        )),
    }
}

/// python-rados' default read length.
const READ_DEFAULT: u64 = 8192;

/// Data from Python without a copy when it is `bytes` (a `bytearray` is
/// copied once, so later changes to it do not reach the write).
pub fn data(b: PyBackedBytes) -> Bytes {
    Bytes::from_owner(b)
}

/// An I/O context on one pool.
#[pyclass(module = "loligo", frozen)]
pub struct Ioctx {
    cluster: Cluster,
    io: IoCtx,
    closed: AtomicBool,
    /// The `Rados` handle's: cleared when it shuts down.
    live: Arc<AtomicBool>,
}

impl Ioctx {
    pub fn new(cluster: Cluster, io: IoCtx, live: Arc<AtomicBool>) -> Ioctx {
        Ioctx {
            cluster,
            io,
            closed: AtomicBool::new(false),
            live,
        }
    }

    /// The handle's liveness flag, for what is opened through this Ioctx.
    pub fn live(&self) -> Arc<AtomicBool> {
        self.live.clone()
    }

    /// The pool handle (an error once this Ioctx is closed or its `Rados`
    /// shut down).
    pub fn io(&self) -> PyResult<IoCtx> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(IoctxStateError::new_err("the Ioctx is closed"));
        }
        live(&self.live)?;
        Ok(self.io.clone())
    }

    /// Apply `ops` to `key` with the GIL released: the results, one per
    /// sub-op.
    pub fn operate(&self, py: Python<'_>, key: &str, ops: Vec<SubOp>) -> PyResult<Vec<SubResult>> {
        let io = self.io()?;
        let key = key.to_string();
        block(py, async move { io.operate(&key, ops).await })?
            .map(|r| r.0)
            .map_err(client_err)
    }

    /// Run `f` on the pool handle with the GIL released.
    fn call<T: Send, F>(&self, py: Python<'_>, f: impl FnOnce(IoCtx) -> F) -> PyResult<T>
    where
        F: std::future::Future<Output = Result<T, ClientError>> + Send,
    {
        let fut = f(self.io()?);
        block(py, fut)?.map_err(client_err)
    }
}

#[pymethods]
impl Ioctx {
    /// The pool's name.
    #[getter]
    fn name(&self) -> &str {
        self.io.pool_name()
    }

    /// The pool's id.
    fn get_pool_id(&self) -> u64 {
        self.io.pool_id()
    }

    /// Close the context: later calls raise IoctxStateError.
    fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }

    /// Write `data` at `offset` (the object is made if missing).
    #[pyo3(signature = (key, data, offset=0))]
    fn write(&self, py: Python<'_>, key: &str, data: PyBackedBytes, offset: u64) -> PyResult<()> {
        let d = crate::ioctx::data(data);
        self.call(py, |io| async move { io.write(key, offset, d).await })
            .map(|_| ())
    }

    /// Replace the object's data with `data`.
    fn write_full(&self, py: Python<'_>, key: &str, data: PyBackedBytes) -> PyResult<()> {
        let d = crate::ioctx::data(data);
        self.call(py, |io| async move { io.write_full(key, d).await })
            .map(|_| ())
    }

    /// Append `data` to the object.
    fn append(&self, py: Python<'_>, key: &str, data: PyBackedBytes) -> PyResult<()> {
        let d = crate::ioctx::data(data);
        self.call(py, |io| async move { io.append(key, d).await })
            .map(|_| ())
    }

    /// At most `length` bytes from `offset` (python-rados' default length:
    /// 8192; `stat()` gives the size to read a whole object).
    #[pyo3(signature = (key, length=READ_DEFAULT, offset=0))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        length: u64,
        offset: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        if length == 0 {
            // Nothing to read, but a missing object is still an error.
            self.call(py, |io| async move { io.stat(key).await })?;
            return Ok(PyBytes::new(py, b""));
        }
        let b = self.call(py, |io| async move { io.read(key, offset, length).await })?;
        Ok(PyBytes::new(py, &b))
    }

    /// `(size, version)` of the object; a version is `(epoch, counter)`,
    /// what `WriteOp.assert_version` takes.
    fn stat(&self, py: Python<'_>, key: &str) -> PyResult<(u64, (u64, u64))> {
        self.call(py, |io| async move {
            io.stat(key).await.map(|(s, v)| (s, (v.epoch, v.v)))
        })
    }

    /// Cut or extend the object to `size` bytes.
    fn trunc(&self, py: Python<'_>, key: &str, size: u64) -> PyResult<()> {
        self.operate(py, key, vec![SubOp::Truncate(size)])
            .map(|_| ())
    }

    /// Tell the OSDs how the object will be used (librados's
    /// `rados_set_alloc_hint2`): its expected size and write size in
    /// bytes, and `LIBRADOS_ALLOC_HINT_FLAG_*` flags. Makes the object if
    /// it is missing.
    #[pyo3(signature = (key, expected_object_size, expected_write_size, flags=0))]
    fn set_alloc_hint(
        &self,
        py: Python<'_>,
        key: &str,
        expected_object_size: u64,
        expected_write_size: u64,
        flags: u32,
    ) -> PyResult<()> {
        let op = SubOp::SetAllocHint {
            expected_object_size,
            expected_write_size,
            flags,
        };
        self.operate(py, key, vec![op]).map(|_| ())
    }

    /// Remove the object (ObjectNotFound if there is none).
    fn remove_object(&self, py: Python<'_>, key: &str) -> PyResult<bool> {
        self.call(py, |io| async move { io.remove(key).await })
            .map(|_| true)
    }

    /// xattr `name` of the object (NoData if it has none).
    fn get_xattr<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        name: &str,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let v = self.call(py, |io| async move { io.get_xattr(key, name).await })?;
        Ok(PyBytes::new(py, &v))
    }

    /// Set xattr `name` (the object is made if missing).
    fn set_xattr(
        &self,
        py: Python<'_>,
        key: &str,
        name: &str,
        value: PyBackedBytes,
    ) -> PyResult<bool> {
        let v = value.to_vec();
        self.call(py, |io| async move { io.set_xattr(key, name, v).await })
            .map(|_| true)
    }

    /// Remove xattr `name`.
    fn rm_xattr(&self, py: Python<'_>, key: &str, name: &str) -> PyResult<bool> {
        self.call(py, |io| async move { io.rm_xattr(key, name).await })
            .map(|_| true)
    }

    /// An iterator of `(name, value)` over the object's xattrs.
    fn get_xattrs<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        let all = self.call(py, |io| async move { io.get_xattrs(key).await })?;
        let items: Vec<(String, Bound<'py, PyBytes>)> = all
            .into_iter()
            .map(|(k, v)| (k, PyBytes::new(py, &v)))
            .collect();
        Ok(PyList::new(py, items)?.try_iter()?.into_any())
    }

    /// An iterator of `Object` over every object in the pool (PG by PG).
    fn list_objects<'py>(slf: &Bound<'py, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let this = slf.get();
        let names = this.call(py, |io| async move { io.list().await })?;
        let objs = names
            .into_iter()
            .map(|key| Object {
                ioctx: slf.clone().unbind(),
                key,
            })
            .collect::<Vec<_>>();
        Ok(PyList::new(py, objs)?.try_iter()?.into_any())
    }

    /// Run object class method `cls.method` with `data`: `(0, output)`.
    #[pyo3(signature = (key, cls, method, data, length=None))]
    fn execute<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        cls: &str,
        method: &str,
        data: PyBackedBytes,
        length: Option<u64>,
    ) -> PyResult<(i32, Bound<'py, PyBytes>)> {
        let input = data.to_vec();
        let out = self.call(
            py,
            |io| async move { io.exec(key, cls, method, input).await },
        )?;
        let n = length.map_or(out.len(), |l| (l as usize).min(out.len()));
        Ok((0, PyBytes::new(py, &out[..n])))
    }

    /// The pool's usage (`num_bytes`, `num_kb`, `num_objects`) from the
    /// monitors' last census.
    fn get_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        live(&self.live)?;
        let c = self.cluster.clone();
        let v = block(py, async move {
            c.mon(loligo_monc::protocol::MonRequest::Admin(
                loligo_monc::protocol::Admin::Df,
            ))
            .await
        })?
        .map_err(client_err)?
        .value;
        let pool = (v["pools"].as_array().into_iter().flatten())
            .find(|p| p["name"].as_str() == Some(self.io.pool_name()))
            .ok_or_else(|| {
                ObjectNotFound::new_err(format!("pool '{}' is gone", self.io.pool_name()))
            })?;
        let s = &pool["stats"];
        let stored = s["stored"].as_u64().unwrap_or(0);
        let out = serde_json::json!({
            "num_bytes": stored,
            "num_kb": stored.div_ceil(1024),
            "num_objects": s["objects"].as_u64().unwrap_or(0),
        });
        json_to_py(py, &out)
    }

    /// A new compound write op (python-rados' `create_write_op`).
    fn create_write_op(&self) -> WriteOp {
        WriteOp::default()
    }

    /// A new compound read op (python-rados' `create_read_op`).
    fn create_read_op(&self) -> ReadOp {
        ReadOp::default()
    }

    /// Apply `op` to `key`, all or nothing.
    #[pyo3(signature = (op, key, mtime=0, flags=0))]
    fn operate_write_op(
        &self,
        py: Python<'_>,
        op: &WriteOp,
        key: &str,
        mtime: i64,
        flags: i64,
    ) -> PyResult<()> {
        let _ = (mtime, flags);
        let ops = op.take();
        if ops.is_empty() {
            return Ok(()); // nothing to apply
        }
        self.operate(py, key, ops).map(|_| ())
    }

    /// Apply `op` to `key`; its iterators hold the results after.
    #[pyo3(signature = (op, key, flag=0))]
    fn operate_read_op(&self, py: Python<'_>, op: &ReadOp, key: &str, flag: i64) -> PyResult<()> {
        let _ = flag;
        let (ops, slots) = op.take();
        if ops.is_empty() {
            return Ok(()); // nothing to read (its iterators stay empty)
        }
        let results = self.operate(py, key, ops)?;
        crate::ops::fill(py, slots, results)
    }

    /// Add omap `keys` = `values` to `op`.
    fn set_omap(&self, op: &WriteOp, keys: Vec<Key>, values: Vec<PyBackedBytes>) -> PyResult<()> {
        if keys.len() != values.len() {
            return Err(InvalidArgumentError::new_err(format!(
                "{} keys but {} values",
                keys.len(),
                values.len()
            )));
        }
        let kvs = keys
            .into_iter()
            .zip(values)
            .map(|(k, v)| {
                (
                    serde_bytes::ByteBuf::from(k.0),
                    serde_bytes::ByteBuf::from(v.to_vec()),
                )
            })
            .collect();
        op.push(SubOp::OmapSet(kvs))
    }

    /// Add the removal of omap `keys` to `op`.
    fn remove_omap_keys(&self, op: &WriteOp, keys: Vec<Key>) -> PyResult<()> {
        op.push(SubOp::OmapRm(
            keys.into_iter()
                .map(|k| serde_bytes::ByteBuf::from(k.0))
                .collect(),
        ))
    }

    /// Add the removal of every omap key to `op`.
    fn clear_omap(&self, op: &WriteOp) -> PyResult<()> {
        op.push(SubOp::OmapClear)
    }

    /// Add to `op` a read of at most `max_return` omap entries after
    /// `start_after` whose keys start with `filter_prefix`: `(iterator,
    /// 0)`, the iterator yielding `(key, value)` once `op` ran.
    #[pyo3(signature = (op, start_after, filter_prefix, max_return, omap_key_type=None))]
    fn get_omap_vals(
        &self,
        py: Python<'_>,
        op: &ReadOp,
        start_after: Key,
        filter_prefix: Key,
        max_return: u32,
        omap_key_type: Option<Bound<'_, PyAny>>,
    ) -> PyResult<(Py<OmapIterator>, i32)> {
        let _ = omap_key_type;
        op.list(py, start_after.0, filter_prefix.0, max_return, true)
    }

    /// As `get_omap_vals` with no prefix, yielding `(key, None)`.
    #[pyo3(signature = (op, start_after, max_return))]
    fn get_omap_keys(
        &self,
        py: Python<'_>,
        op: &ReadOp,
        start_after: Key,
        max_return: u32,
    ) -> PyResult<(Py<OmapIterator>, i32)> {
        op.list(py, start_after.0, Vec::new(), max_return, false)
    }

    /// Add to `op` a read of the omap `keys` that exist.
    #[pyo3(signature = (op, keys, omap_key_type=None))]
    fn get_omap_vals_by_keys(
        &self,
        py: Python<'_>,
        op: &ReadOp,
        keys: Vec<Key>,
        omap_key_type: Option<Bound<'_, PyAny>>,
    ) -> PyResult<(Py<OmapIterator>, i32)> {
        let _ = omap_key_type;
        op.by_keys(py, keys)
    }
}

/// One object of a pool listing.
#[pyclass(module = "loligo", frozen)]
pub struct Object {
    ioctx: Py<Ioctx>,
    /// The object's name.
    #[pyo3(get)]
    key: String,
}

#[pymethods]
impl Object {
    /// The namespace (Loligo pools have one, the empty one).
    #[getter]
    fn nspace(&self) -> &'static str {
        ""
    }

    /// At most `length` bytes from `offset`.
    #[pyo3(signature = (length=READ_DEFAULT, offset=0))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        length: u64,
        offset: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.ioctx.get().read(py, &self.key, length, offset)
    }

    /// `(size, (epoch, counter))`.
    fn stat(&self, py: Python<'_>) -> PyResult<(u64, (u64, u64))> {
        self.ioctx.get().stat(py, &self.key)
    }

    /// Remove the object.
    fn remove(&self, py: Python<'_>) -> PyResult<bool> {
        self.ioctx.get().remove_object(py, &self.key)
    }

    fn __repr__(&self) -> String {
        format!("loligo.Object(key={:?})", self.key)
    }
}
