//! The cluster config file every command reads: which monitors to ask.
//! Found from `-c FILE`, then `$LOLIGO_CONF`, then
//! `./loligo-cluster/loligo.conf` (what `loligo up` writes), then
//! `/etc/loligo/loligo.conf`.
//!
//! It must never guess monitor addresses: no file found is an error that
//! says where it looked.

use crate::CliError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The config file's contents (TOML).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Config {
    pub fsid: String,
    /// Monitor addresses (`host:port`).
    pub mon_addrs: Vec<String>,
    /// The pool commands use when `-p` is not given.
    #[serde(default = "default_pool")]
    pub default_pool: String,
    /// The keyring commands connect with (mutual TLS as its entity);
    /// relative to the config file's folder. None: plain connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyring: Option<PathBuf>,
}

fn default_pool() -> String {
    DEFAULT_POOL.into()
}

/// Name of the pool `loligo up` creates.
pub const DEFAULT_POOL: &str = "default";
/// Where `loligo up` keeps a cluster unless told otherwise.
pub const DEFAULT_DATA_DIR: &str = "loligo-cluster";
/// The config file's name inside a cluster directory.
pub const CONF_NAME: &str = "loligo.conf";

impl Config {
    /// Read and check a config file.
    pub fn load(path: &Path) -> Result<Config, CliError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CliError(format!("{}: {e}", path.display())))?;
        let c: Config =
            toml::from_str(&text).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
        if c.mon_addrs.is_empty() {
            return Err(CliError(format!("{}: mon_addrs is empty", path.display())));
        }
        let mut c = c;
        if let Some(k) = &c.keyring {
            if k.is_relative() {
                c.keyring = Some(path.parent().unwrap_or(Path::new(".")).join(k));
            }
        }
        Ok(c)
    }

    /// The transport security its keyring gives (`None`: plain).
    pub fn security(&self) -> Result<Option<loligo_proto::net::Security>, CliError> {
        self.keyring
            .as_deref()
            .map(|k| loligo_proto::net::Security::load(k).map_err(|e| CliError(e.to_string())))
            .transpose()
    }

    /// `e`, with a hint when this config has no keyring and the cluster
    /// could not be reached (a cluster with keys closes plain
    /// connections at once).
    pub fn explain(&self, e: impl std::fmt::Display) -> CliError {
        let e = e.to_string();
        if self.keyring.is_none() && e.contains("unavailable") {
            CliError(format!(
                "{e} (no keyring given: a cluster with keys refuses plain connections; pass \
                 --keyring FILE or set `keyring` in the config)"
            ))
        } else {
            CliError(e)
        }
    }

    /// A client of its monitors, secured with its keyring.
    pub fn mon_client(&self) -> Result<loligo_monc::MonClient, CliError> {
        let sec = self.security()?;
        Ok(loligo_monc::MonClient::new(self.mon_addrs.clone())
            .map_err(|e| CliError(e.to_string()))?
            .secured(sec.as_ref()))
    }

    /// Write the config file.
    pub fn save(&self, path: &Path) -> Result<(), CliError> {
        let text = toml::to_string(self).map_err(|e| CliError(e.to_string()))?;
        let tmp = path.with_extension("conf.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    }

    /// Find the config: `explicit`, `$LOLIGO_CONF`, the default cluster
    /// directory's, the system one.
    pub fn find(explicit: Option<&Path>) -> Result<Config, CliError> {
        if let Some(p) = explicit {
            return Config::load(p);
        }
        if let Some(p) = std::env::var_os("LOLIGO_CONF") {
            return Config::load(Path::new(&p));
        }
        let candidates = [
            PathBuf::from(DEFAULT_DATA_DIR).join(CONF_NAME),
            PathBuf::from("/etc/loligo").join(CONF_NAME),
        ];
        for p in &candidates {
            if p.exists() {
                return Config::load(p);
            }
        }
        Err(CliError(format!(
            "no cluster config: pass -c FILE, set LOLIGO_CONF, or start one with `loligo up` \
             (looked in {} and {})",
            candidates[0].display(),
            candidates[1].display()
        )))
    }
}

/// Global options of cluster commands.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ConnArgs {
    /// Cluster config file (default: $LOLIGO_CONF, ./loligo-cluster/loligo.conf, /etc/loligo/loligo.conf).
    #[arg(short = 'c', long = "conf", global = true, value_name = "FILE")]
    pub conf: Option<PathBuf>,
    /// Monitor address(es), comma-separated, instead of a config file.
    #[arg(long = "mon", global = true, value_name = "ADDR[,ADDR]")]
    pub mon: Option<String>,
    /// Pool for object commands (default: the config's default pool).
    #[arg(short = 'p', long = "pool", global = true)]
    pub pool: Option<String>,
    /// Keyring to connect with (default: the config's `keyring`, with
    /// --mon too when a config is found; with neither, plain
    /// connections).
    #[arg(long = "keyring", global = true, value_name = "FILE")]
    pub keyring: Option<PathBuf>,
}

impl ConnArgs {
    /// The config these options select.
    pub fn config(&self) -> Result<Config, CliError> {
        if let Some(m) = &self.mon {
            // The config, if there is one, still says who this is.
            let found = Config::find(self.conf.as_deref()).ok();
            let keyring = (self.keyring.clone()).or_else(|| found.as_ref()?.keyring.clone());
            return Ok(Config {
                fsid: found.map(|c| c.fsid).unwrap_or_default(),
                mon_addrs: m.split(',').map(|s| s.trim().to_string()).collect(),
                default_pool: default_pool(),
                keyring,
            });
        }
        let mut c = Config::find(self.conf.as_deref())?;
        if self.keyring.is_some() {
            c.keyring = self.keyring.clone();
        }
        Ok(c)
    }
}

/// A tokio runtime for a command.
pub fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError(format!("cannot start the async runtime: {e}")))
}
