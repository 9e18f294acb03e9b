//! `Rados`: a cluster handle (python-rados' `rados.Rados`). It reads
//! the config file `loligo up` writes (monitor addresses and the keyring
//! to connect with), connects on `connect()` or on entering a `with`
//! block, and does the cluster-wide calls: pools, stats, status. It must
//! never act on a handle that is not connected.

use crate::errors::{client_err, InvalidArgumentError, RadosStateError};
use crate::ioctx::Ioctx;
use crate::{block, json_to_py};
use loligo_client::Cluster;
use loligo_monc::protocol::{Admin, MonRequest};
use loligo_proto::net::Security;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where a config is looked for when none is named (as the CLI does).
const CONF_PLACES: [&str; 2] = ["loligo-cluster/loligo.conf", "/etc/loligo/loligo.conf"];

enum State {
    Configuring,
    Connected(Cluster),
    Shutdown,
}

impl State {
    fn name(&self) -> &'static str {
        match self {
            State::Configuring => "configuring",
            State::Connected(_) => "connected",
            State::Shutdown => "shutdown",
        }
    }
}

/// How to reach the cluster: monitors and the keyring, resolved at
/// construction so a bad config fails there.
struct Target {
    mon_addrs: Vec<String>,
    keyring: Option<PathBuf>,
}

/// A handle on one cluster.
#[pyclass(module = "loligo", frozen)]
pub struct Rados {
    target: Target,
    op_timeout: Duration,
    state: Mutex<State>,
    /// Cleared by `shutdown()`: every Ioctx and store opened through this
    /// handle checks it before each call.
    live: Arc<AtomicBool>,
}

/// Seconds from Python as a duration, or a clear refusal (never a panic
/// on huge, negative or non-finite values).
fn seconds(what: &str, s: f64) -> PyResult<Duration> {
    match Duration::try_from_secs_f64(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(bad(format!(
            "{what} must be a positive number of seconds, not {s}"
        ))),
    }
}

fn bad(msg: String) -> PyErr {
    InvalidArgumentError::new_err(msg)
}

/// The config file to read: the one named, `$LOLIGO_CONF`, or the first of
/// [`CONF_PLACES`] that exists.
fn find_conf(named: Option<PathBuf>) -> PyResult<PathBuf> {
    if let Some(p) = named.or_else(|| std::env::var_os("LOLIGO_CONF").map(PathBuf::from)) {
        return Ok(p);
    }
    CONF_PLACES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or_else(|| {
            bad(format!(
                "no config file: pass conffile=, set LOLIGO_CONF, or run where {} exists",
                CONF_PLACES.join(" or ")
            ))
        })
}

/// Monitor addresses and keyring (relative to the file's folder) of a
/// config file.
fn read_conf(path: &Path) -> PyResult<Target> {
    let text =
        std::fs::read_to_string(path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
    let v: toml::Value =
        toml::from_str(&text).map_err(|e| bad(format!("{}: {e}", path.display())))?;
    let mon_addrs: Vec<String> = (v.get("mon_addrs").and_then(|a| a.as_array()))
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let keyring = (v.get("keyring").and_then(|k| k.as_str()))
        .map(|k| path.parent().unwrap_or(Path::new(".")).join(k));
    Ok(Target { mon_addrs, keyring })
}

impl Rados {
    /// The connected cluster (an error if not connected).
    pub fn cluster(&self) -> PyResult<Cluster> {
        match &*self
            .state
            .lock()
            .map_err(|_| RadosStateError::new_err("poisoned"))?
        {
            State::Connected(c) => Ok(c.clone()),
            s => Err(RadosStateError::new_err(format!(
                "the handle is {}, not connected: call connect() first",
                s.name()
            ))),
        }
    }

    /// An admin command to the monitors: the reply's value (with `sync`,
    /// once this client's map has the epoch of the reply).
    fn admin(&self, py: Python<'_>, a: Admin, sync: bool) -> PyResult<serde_json::Value> {
        let c = self.cluster()?;
        block(py, async move {
            let r = c.mon(MonRequest::Admin(a)).await?;
            if sync {
                c.wait_for_epoch(r.epoch).await;
            }
            Ok::<_, loligo_client::ClientError>(r.value)
        })?
        .map_err(client_err)
    }
}

#[pymethods]
impl Rados {
    /// `Rados(conffile=None, conf=None, keyring=None, op_timeout=30.0)`:
    /// `conf` may set `mon_host` (addresses, comma- or space-separated),
    /// `keyring` and `rados_osd_op_timeout` (seconds); given `mon_host`,
    /// no config file is read.
    #[new]
    #[pyo3(signature = (conffile=None, conf=None, keyring=None, op_timeout=30.0))]
    fn new(
        conffile: Option<PathBuf>,
        conf: Option<HashMap<String, String>>,
        keyring: Option<PathBuf>,
        op_timeout: f64,
    ) -> PyResult<Self> {
        let conf = conf.unwrap_or_default();
        let mut op_timeout = op_timeout;
        let mut target = match conf.get("mon_host") {
            Some(h) => Target {
                mon_addrs: h
                    .split([',', ' '])
                    .filter(|a| !a.is_empty())
                    .map(String::from)
                    .collect(),
                keyring: None,
            },
            None => read_conf(&find_conf(conffile)?)?,
        };
        for (k, v) in &conf {
            match k.as_str() {
                "mon_host" => {}
                "keyring" => target.keyring = Some(PathBuf::from(v)),
                "rados_osd_op_timeout" => {
                    op_timeout = v
                        .parse()
                        .map_err(|_| bad(format!("rados_osd_op_timeout: '{v}' is not seconds")))?
                }
                _ => {
                    return Err(bad(format!(
                        "unknown conf option '{k}' (known: mon_host, keyring, rados_osd_op_timeout)"
                    )))
                }
            }
        }
        if keyring.is_some() {
            target.keyring = keyring;
        }
        if target.mon_addrs.is_empty() {
            return Err(bad(
                "no monitor addresses (mon_addrs in the config, or conf={'mon_host': ...})".into(),
            ));
        }
        Ok(Rados {
            target,
            op_timeout: seconds("op_timeout", op_timeout)?,
            state: Mutex::new(State::Configuring),
            live: Arc::new(AtomicBool::new(true)),
        })
    }

    /// Connect to the monitors and fetch the map (`timeout` seconds, 0:
    /// the op timeout).
    #[pyo3(signature = (timeout=0.0))]
    fn connect(&self, py: Python<'_>, timeout: f64) -> PyResult<()> {
        if let State::Connected(_) = &*self
            .state
            .lock()
            .map_err(|_| RadosStateError::new_err("poisoned"))?
        {
            return Ok(());
        }
        let security = match &self.target.keyring {
            Some(k) => Some(Security::load(k).map_err(|e| bad(format!("{}: {e}", k.display())))?),
            None => None,
        };
        let wait = match timeout {
            0.0 => self.op_timeout,
            t => seconds("timeout", t)?,
        };
        let (addrs, op_timeout) = (self.target.mon_addrs.clone(), self.op_timeout);
        let c = block(py, async move {
            let connect = Cluster::connect_secured(addrs, op_timeout, security);
            tokio::time::timeout(wait, connect).await
        })?
        .map_err(|_| {
            crate::errors::TimedOut::new_err(format!("no map from the monitors in {wait:?}"))
        })?
        .map_err(client_err)?;
        *self
            .state
            .lock()
            .map_err(|_| RadosStateError::new_err("poisoned"))? = State::Connected(c);
        Ok(())
    }

    /// Close the connection: calls on this handle and on every Ioctx and
    /// store opened through it raise RadosStateError from here on.
    fn shutdown(&self) -> PyResult<()> {
        self.live.store(false, Ordering::Relaxed);
        *self
            .state
            .lock()
            .map_err(|_| RadosStateError::new_err("poisoned"))? = State::Shutdown;
        Ok(())
    }

    /// `"configuring"`, `"connected"` or `"shutdown"`.
    #[getter]
    fn state(&self) -> PyResult<&'static str> {
        Ok(self
            .state
            .lock()
            .map_err(|_| RadosStateError::new_err("poisoned"))?
            .name())
    }

    fn __enter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<Self>> {
        slf.get().connect(py, 0.0)?;
        Ok(slf)
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.shutdown()?;
        Ok(false)
    }

    /// The names of the pools.
    fn list_pools(&self) -> PyResult<Vec<String>> {
        let map = self.cluster()?.map();
        Ok(map.pools.values().map(|p| p.name.clone()).collect())
    }

    /// Whether pool `name` exists (in this client's map).
    fn pool_exists(&self, name: &str) -> PyResult<bool> {
        Ok(self.cluster()?.map().pool_by_name(name).is_some())
    }

    /// Pool `name`'s id, or None.
    fn pool_lookup(&self, name: &str) -> PyResult<Option<u64>> {
        Ok(self.cluster()?.map().pool_by_name(name).map(|p| p.id))
    }

    /// Create a pool: replicated with `size` copies, or erasure-coded
    /// with `erasure_profile` (its k+m is the size). Returns once this
    /// client's map has it; ObjectExists if there is one of that name.
    #[pyo3(signature = (name, pg_num=32, size=3, min_size=None, erasure_profile=None))]
    fn create_pool(
        &self,
        py: Python<'_>,
        name: String,
        pg_num: u32,
        size: u32,
        min_size: Option<u32>,
        erasure_profile: Option<String>,
    ) -> PyResult<()> {
        if self.cluster()?.map().pool_by_name(&name).is_some() {
            return Err(crate::errors::ObjectExists::new_err(format!(
                "pool '{name}' exists"
            )));
        }
        let a = Admin::PoolCreate {
            name,
            pg_num,
            size,
            min_size,
            erasure_profile,
        };
        self.admin(py, a, true).map(|_| ())
    }

    /// Delete pool `name` and every object in it (ObjectNotFound if there
    /// is none).
    fn delete_pool(&self, py: Python<'_>, name: String) -> PyResult<()> {
        if self.cluster()?.map().pool_by_name(&name).is_none() {
            return Err(crate::errors::ObjectNotFound::new_err(format!(
                "pool '{name}' does not exist"
            )));
        }
        let a = Admin::PoolDelete {
            confirm: name.clone(),
            name,
        };
        self.admin(py, a, true).map(|_| ())
    }

    /// An I/O context on pool `name` (ObjectNotFound if there is none).
    fn open_ioctx(&self, name: &str) -> PyResult<Ioctx> {
        let c = self.cluster()?;
        let io = c.pool(name).map_err(client_err)?;
        Ok(Ioctx::new(c, io, self.live.clone()))
    }

    /// The cluster's space: `kb`, `kb_used`, `kb_avail`, `num_objects`
    /// (python-rados' keys).
    fn get_cluster_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let v = self.admin(py, Admin::Df, false)?;
        let stat = |k: &str| v["stats"][k].as_u64().unwrap_or(0);
        let objects: u64 = (v["pools"].as_array().into_iter().flatten())
            .map(|p| p["stats"]["objects"].as_u64().unwrap_or(0))
            .sum();
        let d = PyDict::new(py);
        d.set_item("kb", stat("total_bytes") / 1024)?;
        d.set_item("kb_used", stat("total_used_bytes") / 1024)?;
        d.set_item("kb_avail", stat("total_avail_bytes") / 1024)?;
        d.set_item("num_objects", objects)?;
        Ok(d)
    }

    /// `loligo status --json` as a dict.
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = self.admin(py, Admin::Status, false)?;
        json_to_py(py, &v)
    }

    /// `loligo df --json` as a dict.
    fn df<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = self.admin(py, Admin::Df, false)?;
        json_to_py(py, &v)
    }

    /// Wait until this client has the monitors' newest map.
    fn wait_for_latest_osdmap(&self, py: Python<'_>) -> PyResult<()> {
        self.admin(py, Admin::Status, true).map(|_| ())
    }

    /// The epoch of this client's map.
    fn osdmap_epoch(&self) -> PyResult<u64> {
        Ok(self.cluster()?.map().epoch)
    }
}
