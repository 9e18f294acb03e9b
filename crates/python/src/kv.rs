//! `KvStore`: the key-value store on object maps ("A scalable,
//! consistent key-value store on RADOS") from Python. Reads are
//! linearizable and each write is atomic, as in `loligo-kv`; this wrapper
//! only translates types and must add no state of its own.

use crate::block;
use crate::errors::kv_err;
use crate::ioctx::Ioctx;
use crate::ops::Key;
use loligo_client::IoCtx;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The node size bound `loligo kv create` uses when none is given.
const K_DEFAULT: u64 = 800;

/// One store of a pool.
#[pyclass(module = "loligo", frozen)]
pub struct KvStore {
    io: IoCtx,
    name: String,
    kv: Arc<loligo_kv::KvStore<IoCtx>>,
    /// The `Rados` handle's: cleared when it shuts down.
    live: Arc<AtomicBool>,
}

impl KvStore {
    /// The store (an error once the `Rados` handle is shut down).
    fn kv(&self) -> PyResult<Arc<loligo_kv::KvStore<IoCtx>>> {
        crate::ioctx::live(&self.live)?;
        Ok(self.kv.clone())
    }
}

#[pymethods]
impl KvStore {
    /// Create store `name` in the Ioctx's pool (nodes of `k..=2k`
    /// entries; values of at most `value_max` bytes).
    #[staticmethod]
    #[pyo3(signature = (ioctx, name, k=K_DEFAULT, value_max=None))]
    fn create(
        py: Python<'_>,
        ioctx: &Ioctx,
        name: String,
        k: u64,
        value_max: Option<usize>,
    ) -> PyResult<KvStore> {
        let io = ioctx.io()?;
        let (io2, n) = (io.clone(), name.clone());
        let kv = block(py, async move {
            let max = value_max.unwrap_or(loligo_kv::VALUE_MAX);
            loligo_kv::KvStore::create_with(io2, &n, k, max).await
        })?
        .map_err(kv_err)?;
        Ok(KvStore {
            io,
            name,
            kv: Arc::new(kv),
            live: ioctx.live(),
        })
    }

    /// Open store `name` (ObjectNotFound if there is none).
    #[staticmethod]
    fn open(py: Python<'_>, ioctx: &Ioctx, name: String) -> PyResult<KvStore> {
        let io = ioctx.io()?;
        let (io2, n) = (io.clone(), name.clone());
        let kv =
            block(py, async move { loligo_kv::KvStore::open(io2, &n).await })?.map_err(kv_err)?;
        Ok(KvStore {
            io,
            name,
            kv: Arc::new(kv),
            live: ioctx.live(),
        })
    }

    /// The store's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The value of `key`, or None.
    fn get<'py>(&self, py: Python<'py>, key: Key) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let kv = self.kv()?;
        let v = block(py, async move { kv.get(&key.0).await })?.map_err(kv_err)?;
        Ok(v.map(|v| PyBytes::new(py, &v)))
    }

    /// Set `key` to `value`.
    fn put(&self, py: Python<'_>, key: Key, value: PyBackedBytes) -> PyResult<()> {
        let kv = self.kv()?;
        block(py, async move { kv.put(&key.0, &value).await })?.map_err(kv_err)
    }

    /// Set `key` to `value` if it is absent: whether it was.
    fn insert(&self, py: Python<'_>, key: Key, value: PyBackedBytes) -> PyResult<bool> {
        let kv = self.kv()?;
        block(py, async move { kv.insert(&key.0, &value).await })?.map_err(kv_err)
    }

    /// Remove `key`: whether it was there.
    fn remove(&self, py: Python<'_>, key: Key) -> PyResult<bool> {
        let kv = self.kv()?;
        block(py, async move { kv.remove(&key.0).await })?.map_err(kv_err)
    }

    /// Set many `(key, value)` pairs (each node's share atomically).
    fn put_many(&self, py: Python<'_>, entries: Vec<(Key, PyBackedBytes)>) -> PyResult<()> {
        let kv = self.kv()?;
        let entries = entries
            .into_iter()
            .map(|(k, v)| (k.0, v.to_vec()))
            .collect();
        block(py, async move { kv.put_many(entries).await })?.map_err(kv_err)
    }

    /// At most `limit` `(key, value)` pairs with `start <= key < end`
    /// (`end` None: to the last), in key order, keys as bytes.
    #[pyo3(signature = (start=None, end=None, limit=1000))]
    fn scan<'py>(
        &self,
        py: Python<'py>,
        start: Option<Key>,
        end: Option<Key>,
        limit: usize,
    ) -> PyResult<Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        let kv = self.kv()?;
        let start = start.map(|k| k.0).unwrap_or_default();
        let end = end.map(|k| k.0);
        let got = block(
            py,
            async move { kv.scan(&start, end.as_deref(), limit).await },
        )?
        .map_err(kv_err)?;
        Ok(got
            .into_iter()
            .map(|(k, v)| (PyBytes::new(py, &k), PyBytes::new(py, &v)))
            .collect())
    }

    /// `nodes`, `entries` and `depth`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let kv = self.kv()?;
        let s = block(py, async move { kv.stats().await })?.map_err(kv_err)?;
        let d = PyDict::new(py);
        d.set_item("nodes", s.nodes)?;
        d.set_item("entries", s.entries)?;
        d.set_item("depth", s.depth)?;
        Ok(d)
    }

    /// Check the store's invariants: `nodes`, `entries` and `problems`
    /// (empty for a sound store).
    fn check<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let kv = self.kv()?;
        let c = block(py, async move { kv.check().await })?.map_err(kv_err)?;
        let d = PyDict::new(py);
        d.set_item("nodes", c.nodes)?;
        d.set_item("entries", c.entries)?;
        d.set_item("problems", c.problems)?;
        Ok(d)
    }

    /// Remove the store and every object of it (no one may use it
    /// meanwhile).
    fn destroy(&self, py: Python<'_>) -> PyResult<()> {
        crate::ioctx::live(&self.live)?;
        let (io, name) = (self.io.clone(), self.name.clone());
        block(py, async move {
            loligo_kv::KvStore::open(io, &name).await?.destroy().await
        })?
        .map_err(kv_err)
    }
}
