//! Loligo's Python binding, in the way of Ceph's `python-rados`: a
//! `Rados` handle connects with a config file and keyring; `Ioctx` does
//! object I/O on one pool (read, write, stat, remove, list, xattrs, omap,
//! object class methods); `WriteOp`/`ReadOp` build compound ops applied
//! all or nothing; `KvStore` is the key-value store on object maps.
//!
//! ```python
//! import loligo
//! with loligo.Rados(conffile="loligo-cluster/loligo.conf") as cluster:
//!     with cluster.open_ioctx("rbd") as io:
//!         io.write_full("greeting", b"hello")
//!         assert io.read("greeting") == b"hello"
//! ```
//!
//! Every call runs on one process-wide Tokio runtime with the GIL
//! released, so Python threads do I/O in parallel. This module is a thin
//! translation layer over `loligo-client` and `loligo-kv`: it must never
//! hold the GIL while waiting on the network, nor report success for an
//! op the cluster did not acknowledge.

mod cluster;
mod errors;
mod ioctx;
mod kv;
mod ops;

use pyo3::prelude::*;
use std::future::Future;
use std::sync::OnceLock;

/// The one runtime every handle of this process shares (built on first
/// use: its threads live as long as the interpreter).
fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    let rt = RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("loligo-py")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    });
    rt.as_ref()
        .map_err(|e| errors::IOError::new_err(format!("cannot start the I/O runtime: {e}")))
}

/// Run `fut` to its end on the runtime with the GIL released.
fn block<T, F>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = T> + Send,
    T: Send,
{
    let rt = runtime()?;
    Ok(py.detach(|| rt.block_on(fut)))
}

/// A Python object that holds `obj` as JSON (via the `json` module: the
/// types Python's own parser gives).
fn json_to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (v.to_string(),))
}

#[pymodule]
fn loligo(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<cluster::Rados>()?;
    m.add_class::<ioctx::Ioctx>()?;
    m.add_class::<ioctx::Object>()?;
    m.add_class::<ops::WriteOp>()?;
    m.add_class::<ops::ReadOp>()?;
    m.add_class::<ops::OmapIterator>()?;
    m.add_class::<kv::KvStore>()?;
    // python-rados' names of the compound op builders.
    m.add("WriteOpCtx", m.py().get_type::<ops::WriteOp>())?;
    m.add("ReadOpCtx", m.py().get_type::<ops::ReadOp>())?;
    for (name, v) in ops::CMP_CONSTANTS {
        m.add(*name, *v)?;
    }
    for (name, v) in loligo_types::ops::alloc_hint::NAMES {
        let name = format!("LIBRADOS_ALLOC_HINT_FLAG_{}", name.to_ascii_uppercase());
        m.add(name.as_str(), v)?;
    }
    errors::register(m)
}
