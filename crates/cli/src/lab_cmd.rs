//! `loligo lab`: tools for fault experiments and partition tests.
//!
//! `lab client` is one long-lived client session driven line by line
//! from stdin: it connects once and keeps the map it has, so a client cut
//! off from the monitors goes on with an old map (as a real application
//! would), which a one-shot `loligo get` cannot show.
//!
//! It must never retry an op on its own beyond what the client library
//! does: each line gets exactly one answer, so a test sees every error.

use crate::config::ConnArgs;
use crate::CliError;
use clap::Subcommand;
use loligo_client::{Cluster, IoCtx};
use loligo_kv::KvStore;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

#[derive(Subcommand)]
pub enum LabCmd {
    /// A client session from stdin, one command a line, one answer a
    /// line: `put NAME VALUE` (ok), `get NAME` (value V | absent),
    /// `kvcreate STORE` (ok), `kvput STORE KEY VALUE` (ok), `kvget STORE
    /// KEY` (value V | absent), `epoch` (the newest map epoch it has),
    /// `injected` (the message faults this process injected so far: see
    /// `LOLIGO_MS_INJECT` in docs/testing.md); a
    /// failure answers `error WHY`. Each answer ends with the op's time
    /// in ms.
    Client {
        /// Seconds an op may take before it fails.
        #[arg(long, default_value_t = 10.0)]
        op_timeout: f64,
    },
}

pub fn lab(conn: &ConnArgs, c: LabCmd) -> Result<(), CliError> {
    match c {
        LabCmd::Client { op_timeout } => client(conn, op_timeout),
    }
}

fn client(conn: &ConnArgs, op_timeout: f64) -> Result<(), CliError> {
    if !(op_timeout > 0.0 && op_timeout.is_finite()) {
        return Err(CliError(format!(
            "--op-timeout must be a positive number of seconds, not {op_timeout}"
        )));
    }
    let cfg = conn.config()?;
    let rt = crate::config::runtime()?;
    let pool = conn.pool.clone().unwrap_or(cfg.default_pool.clone());
    let sec = cfg.security()?;
    let timeout = Duration::from_secs_f64(op_timeout);
    rt.block_on(async {
        let c = Cluster::connect_secured(cfg.mon_addrs.clone(), timeout, sec)
            .await
            .map_err(|e| cfg.explain(e))?;
        let io = c.pool(&pool)?;
        let mut kvs: HashMap<String, KvStore<IoCtx>> = HashMap::new();
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready epoch {}", c.map().epoch)?;
        out.flush()?;
        for line in std::io::stdin().lock().lines() {
            let line = line?;
            let words: Vec<&str> = line.split_whitespace().collect();
            let t = Instant::now();
            let answer = match words[..] {
                ["put", name, value] => {
                    match io.write_full(name, value.as_bytes().to_vec()).await {
                        Ok(_) => "ok".to_string(),
                        Err(e) => format!("error {e}"),
                    }
                }
                ["get", name] => match io.read(name, 0, 0).await {
                    Ok(d) => format!("value {}", String::from_utf8_lossy(&d)),
                    Err(e) if e.is_not_found() => "absent".to_string(),
                    Err(e) => format!("error {e}"),
                },
                ["kvcreate", store] => match KvStore::create(io.clone(), store, KV_FANOUT).await {
                    Ok(kv) => {
                        kvs.insert(store.to_string(), kv);
                        "ok".to_string()
                    }
                    Err(e) => format!("error {e}"),
                },
                ["kvput", store, key, value] => match kv_open(&mut kvs, &io, store).await {
                    Ok(kv) => match kv.put(key.as_bytes(), value.as_bytes()).await {
                        Ok(()) => "ok".to_string(),
                        Err(e) => format!("error {e}"),
                    },
                    Err(e) => format!("error {e}"),
                },
                ["kvget", store, key] => match kv_open(&mut kvs, &io, store).await {
                    Ok(kv) => match kv.get(key.as_bytes()).await {
                        Ok(Some(v)) => format!("value {}", String::from_utf8_lossy(&v)),
                        Ok(None) => "absent".to_string(),
                        Err(e) => format!("error {e}"),
                    },
                    Err(e) => format!("error {e}"),
                },
                ["epoch"] => format!("epoch {}", c.map().epoch),
                ["injected"] => {
                    let n = loligo_proto::inject::counts();
                    format!(
                        "injected resets {} duplicates {} delays {}",
                        n.resets, n.duplicates, n.delays
                    )
                }
                [] => continue,
                _ => format!("error unknown command: {line}"),
            };
            let answer = answer.replace('\n', " ");
            writeln!(out, "{answer} {}", t.elapsed().as_millis())?;
            out.flush()?;
        }
        Ok(())
    })
}

/// Nodes of the stores `kvcreate` makes hold K..=2K entries: few, so
/// that a short experiment splits nodes too.
const KV_FANOUT: u64 = 8;

/// Store `name`, opened once per session.
async fn kv_open<'a>(
    kvs: &'a mut HashMap<String, KvStore<IoCtx>>,
    io: &IoCtx,
    name: &str,
) -> Result<&'a KvStore<IoCtx>, loligo_kv::KvError> {
    use std::collections::hash_map::Entry;
    Ok(match kvs.entry(name.to_string()) {
        Entry::Occupied(e) => e.into_mut(),
        Entry::Vacant(e) => e.insert(KvStore::open(io.clone(), name).await?),
    })
}
