//! Loligo's client library (in the way of librados): connect to the
//! monitors, follow the cluster map, and send object ops straight to each
//! PG's primary OSD, retrying across map changes, redirects and OSD
//! failures until the op's deadline.
//!
//! ```no_run
//! # async fn demo() -> Result<(), loligo_client::ClientError> {
//! let cluster = loligo_client::Cluster::connect(vec!["127.0.0.1:6789".into()]).await?;
//! let pool = cluster.pool("rbd")?;
//! pool.write_full("greeting", b"hello".to_vec()).await?;
//! assert_eq!(pool.read("greeting", 0, 0).await?, &b"hello"[..]);
//! # Ok(()) }
//! ```
//!
//! It must never return success for an op the primary did not
//! acknowledge, nor retry an op after a definite answer.

use bytes::Bytes;
use loligo_monc::protocol::{MonError, MonReply, MonRequest};
use loligo_monc::MonClient;
use loligo_proto::net::{Channels, Security};
use loligo_types::mapping::PgMappings;
use loligo_types::ops::{
    decode_wire, encode_wire, ClientOp, ClientReply, ClientRequest, Cmp, OpError, SubOp, SubResult,
    Version,
};
use loligo_types::{Epoch, OsdMap, PgId};
use serde_bytes::ByteBuf;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// How long dialling an OSD may take.
const OSD_CONNECT_TIMEOUT_MS: u64 = 1_000;

/// Why a client call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Op(#[from] OpError),
    #[error("monitor: {0}")]
    Mon(#[from] MonError),
    #[error("pool '{0}' does not exist")]
    NoPool(String),
    #[error("timed out after {0:?}: {1}")]
    Timeout(Duration, String),
    /// An OSD asked by number is not up or did not answer.
    #[error("{0}")]
    Unreachable(String),
}

impl ClientError {
    /// Whether the object was not found.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ClientError::Op(OpError::NotFound))
    }
}

/// One epoch's map and what routes ops under it: each PG's CRUSH step,
/// shared with the tables of the epochs before as long as CRUSH's inputs
/// are the same (most epochs: OSDs down and up, overrides), so a new map
/// costs no pass over the PGs.
struct Table {
    map: Arc<OsdMap>,
    states: loligo_types::OsdStates,
    /// `None`: the map does not compile (no op is routed).
    steps: Option<Arc<PgMappings>>,
}

impl Table {
    /// The table of `map`, reusing `prev`'s steps when they hold.
    fn new(map: OsdMap, prev: Option<&Table>) -> Table {
        let states = map.osd_states();
        let steps = match prev.and_then(|t| t.steps.as_ref()) {
            Some(s) if s.crush_steps_hold(&map, &states) => Some(s.clone()),
            _ => PgMappings::unindexed(&map).ok().map(Arc::new),
        };
        Table {
            map: Arc::new(map),
            states,
            steps,
        }
    }

    /// PG `pg`'s acting primary (-1: none).
    fn primary(&self, pg: PgId) -> i32 {
        self.steps
            .as_ref()
            .and_then(|s| s.mapping_in(&self.map, &self.states, pg))
            .map_or(-1, |m| m.acting_primary)
    }
}

struct Inner {
    mon: tokio::sync::Mutex<MonClient>,
    table: RwLock<Arc<Table>>,
    epoch_tx: tokio::sync::watch::Sender<Epoch>,
    /// Connections to OSDs: gRPC, and the direct data path.
    conns: Channels,
    direct: loligo_proto::direct::Conns,
    op_timeout: Duration,
    watcher: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// This client's random id and op counter (request ids).
    client_id: u64,
    next_tid: std::sync::atomic::AtomicU64,
}

/// A connection to a cluster.
#[derive(Clone)]
pub struct Cluster(Arc<Inner>);

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(w) = self.watcher.get_mut().ok().and_then(|w| w.take()) {
            w.abort();
        }
    }
}

impl Cluster {
    /// Connect to the monitors a config file names (the `mon_addrs` key
    /// of the TOML file `loligo up` writes).
    pub async fn connect_conf(path: &std::path::Path) -> Result<Cluster, ClientError> {
        let bad =
            |m: String| ClientError::Mon(MonError::Invalid(format!("{}: {m}", path.display())));
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let v: toml::Value = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let addrs: Vec<String> = v
            .get("mon_addrs")
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        if addrs.is_empty() {
            return Err(bad("no mon_addrs".into()));
        }
        // The keyring to connect with, relative to the config's folder.
        let security = match v.get("keyring").and_then(|k| k.as_str()) {
            Some(k) => {
                let k = path.parent().unwrap_or(std::path::Path::new(".")).join(k);
                Some(Security::load(&k).map_err(|e| bad(e.to_string()))?)
            }
            None => None,
        };
        Self::connect_secured(addrs, Duration::from_secs(30), security).await
    }

    /// Connect with the default op timeout (30 s).
    pub async fn connect(mon_addrs: Vec<String>) -> Result<Cluster, ClientError> {
        Self::connect_with(mon_addrs, Duration::from_secs(30)).await
    }

    /// Connect over plain connections; each op gives up after
    /// `op_timeout`.
    pub async fn connect_with(
        mon_addrs: Vec<String>,
        op_timeout: Duration,
    ) -> Result<Cluster, ClientError> {
        Self::connect_secured(mon_addrs, op_timeout, None).await
    }

    /// Connect with `security` (mutual TLS as its keyring's entity; `None`:
    /// plain connections); each op gives up after `op_timeout`.
    pub async fn connect_secured(
        mon_addrs: Vec<String>,
        op_timeout: Duration,
        security: Option<Security>,
    ) -> Result<Cluster, ClientError> {
        let mut mon = MonClient::new(mon_addrs)?.secured(security.as_ref());
        let map = mon.get_map().await?;
        let (epoch_tx, _) = tokio::sync::watch::channel(map.epoch);
        let inner = Arc::new(Inner {
            mon: tokio::sync::Mutex::new(mon.clone()),
            table: RwLock::new(Arc::new(Table::new(map.clone(), None))),
            epoch_tx,
            conns: Channels::new(Duration::from_millis(OSD_CONNECT_TIMEOUT_MS), None)
                .secured(security.as_ref()),
            direct: loligo_proto::direct::Conns::new(Duration::from_millis(OSD_CONNECT_TIMEOUT_MS))
                .secured(security.as_ref()),
            op_timeout,
            watcher: Mutex::new(None),
            client_id: random_id(),
            next_tid: std::sync::atomic::AtomicU64::new(1),
        });
        let weak = Arc::downgrade(&inner);
        let task = tokio::spawn(async move {
            let mut mon = mon;
            mon.watch(Some(map), |m| {
                let Some(inner) = weak.upgrade() else {
                    return false;
                };
                inner.set_map(m.clone());
                true
            })
            .await;
        });
        if let Ok(mut w) = inner.watcher.lock() {
            *w = Some(task);
        }
        Ok(Cluster(inner))
    }

    /// The newest map this client has.
    pub fn map(&self) -> Arc<OsdMap> {
        self.0.table().map.clone()
    }

    /// A handle on pool `name`.
    pub fn pool(&self, name: &str) -> Result<IoCtx, ClientError> {
        let map = self.map();
        let p = map
            .pool_by_name(name)
            .ok_or_else(|| ClientError::NoPool(name.into()))?;
        Ok(IoCtx {
            c: self.0.clone(),
            pool: p.id,
            name: name.into(),
        })
    }

    /// Send an operator's command to OSD `osd` (`loligo tell osd.N ...`):
    /// what it did.
    pub async fn tell(
        &self,
        osd: i32,
        cmd: loligo_types::scrub::OsdCommand,
    ) -> Result<String, ClientError> {
        let t = self.0.table();
        let req = ClientRequest::Tell { cmd };
        match self.0.call_osd(&t, osd, &req, self.0.op_timeout).await? {
            Ok(ClientReply::Tell { result }) => Ok(result?),
            Ok(_) => Err(OpError::Invalid("unexpected reply".into()).into()),
            Err(why) => Err(ClientError::Unreachable(why)),
        }
    }

    /// Send an operator's command to PG `pg`'s primary (`pg scrub`,
    /// `pg deep-scrub`, `pg repair`, `list-inconsistent-obj`).
    pub async fn pg_command(
        &self,
        pg: PgId,
        cmd: loligo_types::scrub::PgCommand,
    ) -> Result<loligo_types::scrub::PgCommandReply, ClientError> {
        let req = ClientRequest::Pg {
            pool: pg.pool,
            ps: pg.ps,
            epoch: 0,
            cmd,
        };
        match self.0.send(pg, req).await? {
            ClientReply::Pg { result, .. } => Ok(result?),
            _ => Err(OpError::Invalid("unexpected reply".into()).into()),
        }
    }

    /// Send a request to the monitors (admin commands, status).
    pub async fn mon(&self, req: MonRequest) -> Result<MonReply, ClientError> {
        let r = self.0.mon.lock().await.call(req).await?;
        if r.epoch > self.0.table().map.epoch {
            self.0.refresh().await;
        }
        Ok(r)
    }

    /// Wait until this client has a map of at least `epoch`.
    pub async fn wait_for_epoch(&self, epoch: Epoch) {
        self.0
            .wait_newer(epoch.saturating_sub(1), Duration::from_secs(10))
            .await;
    }
}

impl Inner {
    fn table(&self) -> Arc<Table> {
        self.table.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_map(&self, m: OsdMap) {
        if m.epoch <= self.table().map.epoch {
            return;
        }
        let e = m.epoch;
        let next = Arc::new(Table::new(m, Some(&self.table())));
        let mut t = self.table.write().unwrap_or_else(|p| p.into_inner());
        if t.map.epoch < e {
            *t = next;
        }
        drop(t);
        self.epoch_tx.send_replace(e);
    }

    async fn refresh(&self) {
        let r = { self.mon.lock().await.get_map().await };
        if let Ok(m) = r {
            self.set_map(m);
        }
    }

    /// Wait (at most `d`) for a map newer than `epoch`.
    async fn wait_newer(&self, epoch: Epoch, d: Duration) {
        let mut rx = self.epoch_tx.subscribe();
        let _ = tokio::time::timeout(d, async {
            while *rx.borrow_and_update() <= epoch {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
    }

    /// One call of `req` to OSD `osd` under map `t`, within `left`: its
    /// reply, or why there was none (the OSD not up, or unreachable).
    async fn call_osd(
        &self,
        t: &Table,
        osd: i32,
        req: &ClientRequest,
        left: Duration,
    ) -> Result<Result<ClientReply, String>, ClientError> {
        let addr = (t.map.osds.get(&osd))
            .filter(|o| o.up)
            .map(|o| o.addr.clone());
        let Some(addr) = addr else {
            return Ok(Err(format!("osd.{osd} is not up")));
        };
        // The OSD proves it is osd.N, with the key the map records.
        let entity = format!("osd.{osd}");
        let expect = loligo_proto::tls::Expect::daemon(&entity, t.map.daemon_serial(&entity));
        let (body, bulk) = encode_wire(req);
        let msg = loligo_proto::direct::Message {
            body: body.into(),
            bulk,
        };
        let call = loligo_proto::direct::Call::Op;
        let sent = loligo_proto::direct::osd_call(
            &self.direct,
            &self.conns,
            &expect,
            &addr,
            call,
            msg,
            left,
        );
        match sent.await {
            Ok(r) => Ok(Ok(decode_wire(&r.body, r.bulk)?)),
            Err(e) => Ok(Err(format!("osd.{osd}: {e}"))),
        }
    }

    /// Send `req` for PG `pg` to its primary until a definite answer. An
    /// object's op goes to the PG its name hashes to in each map it is
    /// sent under: a split or a merge moves objects between PGs.
    async fn send(&self, pg: PgId, mut req: ClientRequest) -> Result<ClientReply, ClientError> {
        let start = tokio::time::Instant::now();
        let mut why = String::from("no primary");
        while start.elapsed() < self.op_timeout {
            let t = self.table();
            let epoch = t.map.epoch;
            let pg = match &req {
                ClientRequest::Op(op) => {
                    (t.map.pools.get(&op.pool)).map_or(pg, |p| p.object_pg(op.name.as_bytes()))
                }
                _ => pg,
            };
            match &mut req {
                ClientRequest::Op(op) => op.epoch = epoch,
                ClientRequest::List { epoch: e, .. } | ClientRequest::Pg { epoch: e, .. } => {
                    *e = epoch
                }
                ClientRequest::Tell { .. } => {}
            }
            if !t.map.pools.contains_key(&pg.pool) {
                return Err(OpError::NoPool(pg.pool).into());
            }
            let primary = t.primary(pg);
            let left = self.op_timeout.saturating_sub(start.elapsed());
            let reply = match self.call_osd(&t, primary, &req, left).await? {
                Ok(r) => r,
                Err(e) if primary < 0 => {
                    why = format!("pg {pg} has no primary up ({e})");
                    self.wait_newer(epoch, Duration::from_millis(500)).await;
                    continue;
                }
                Err(e) => {
                    why = e;
                    self.wait_newer(epoch, Duration::from_millis(300)).await;
                    continue;
                }
            };
            let (err, their) = match &reply {
                ClientReply::Op(r) => (r.result.as_ref().err().cloned(), r.epoch),
                ClientReply::List { result, epoch } => (result.as_ref().err().cloned(), *epoch),
                ClientReply::Pg { result, epoch } => (result.as_ref().err().cloned(), *epoch),
                ClientReply::Tell { .. } => (None, epoch),
            };
            match err {
                Some(OpError::WrongPrimary { .. }) => {
                    why = format!("osd.{primary} is not the primary of {pg} (epoch {their})");
                    if their > epoch {
                        self.refresh().await;
                    } else {
                        self.wait_newer(epoch, Duration::from_millis(200)).await;
                    }
                }
                Some(OpError::Behind { .. }) => {
                    why = format!("osd.{primary} has an older map");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                _ => return Ok(reply),
            }
        }
        Err(ClientError::Timeout(self.op_timeout, why))
    }
}

/// A random client id (from the OS, else time and pid).
fn random_id() -> u64 {
    let mut b = [0u8; 8];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_ok();
    if ok {
        return u64::from_le_bytes(b);
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ (u64::from(std::process::id()) << 32)
}

/// A pool handle: object operations.
#[derive(Clone)]
pub struct IoCtx {
    c: Arc<Inner>,
    pool: u64,
    name: String,
}

fn one_data(r: Vec<SubResult>) -> Bytes {
    match r.into_iter().next() {
        Some(SubResult::Data(d)) => d,
        _ => Bytes::new(),
    }
}

fn bufs(kvs: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(ByteBuf, ByteBuf)> {
    kvs.into_iter()
        .map(|(k, v)| (ByteBuf::from(k), ByteBuf::from(v)))
        .collect()
}

impl IoCtx {
    pub fn pool_name(&self) -> &str {
        &self.name
    }

    pub fn pool_id(&self) -> u64 {
        self.pool
    }

    /// Apply `ops` to object `name` all or nothing: the results of its
    /// reads and the object's version after it.
    pub async fn operate(
        &self,
        name: &str,
        ops: Vec<SubOp>,
    ) -> Result<(Vec<SubResult>, Version), ClientError> {
        let t = self.c.table();
        let pool = t
            .map
            .pools
            .get(&self.pool)
            .ok_or_else(|| ClientError::NoPool(self.name.clone()))?;
        let pg = pool.object_pg(name.as_bytes());
        let tid = self
            .c
            .next_tid
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let req = ClientRequest::Op(ClientOp {
            pool: self.pool,
            name: name.to_string(),
            epoch: t.map.epoch,
            ops,
            reqid: Some(loligo_types::ops::ReqId {
                client: self.c.client_id,
                tid,
            }),
        });
        match self.c.send(pg, req).await? {
            ClientReply::Op(r) => Ok((r.result?, r.version)),
            _ => Err(OpError::Invalid("unexpected reply".into()).into()),
        }
    }

    /// Replace the object's data. `data` is taken by reference count
    /// (a `Bytes`) or moved (a `Vec`): the client never copies it.
    pub async fn write_full(
        &self,
        name: &str,
        data: impl Into<Bytes>,
    ) -> Result<Version, ClientError> {
        Ok(self
            .operate(name, vec![SubOp::WriteFull(data.into())])
            .await?
            .1)
    }

    pub async fn write(
        &self,
        name: &str,
        offset: u64,
        data: impl Into<Bytes>,
    ) -> Result<Version, ClientError> {
        let data = data.into();
        Ok(self
            .operate(name, vec![SubOp::Write { offset, data }])
            .await?
            .1)
    }

    pub async fn append(&self, name: &str, data: impl Into<Bytes>) -> Result<Version, ClientError> {
        Ok(self
            .operate(name, vec![SubOp::Append(data.into())])
            .await?
            .1)
    }

    /// Read `len` bytes at `offset` (`len` 0: to the end). The bytes are
    /// the receive buffer's own, not a copy.
    pub async fn read(&self, name: &str, offset: u64, len: u64) -> Result<Bytes, ClientError> {
        Ok(one_data(
            self.operate(name, vec![SubOp::Read { offset, len }])
                .await?
                .0,
        ))
    }

    pub async fn remove(&self, name: &str) -> Result<(), ClientError> {
        self.operate(name, vec![SubOp::Remove]).await.map(|_| ())
    }

    /// Size and version.
    pub async fn stat(&self, name: &str) -> Result<(u64, Version), ClientError> {
        match self.operate(name, vec![SubOp::Stat]).await?.0.pop() {
            Some(SubResult::Stat { size, version }) => Ok((size, version)),
            _ => Err(OpError::Invalid("stat returned nothing".into()).into()),
        }
    }

    pub async fn set_xattr(
        &self,
        name: &str,
        key: &str,
        value: Vec<u8>,
    ) -> Result<(), ClientError> {
        self.operate(
            name,
            vec![SubOp::SetXattr {
                name: key.into(),
                value,
            }],
        )
        .await
        .map(|_| ())
    }

    pub async fn get_xattr(&self, name: &str, key: &str) -> Result<Vec<u8>, ClientError> {
        Ok(one_data(
            self.operate(name, vec![SubOp::GetXattr(key.into())])
                .await?
                .0,
        )
        .into())
    }

    pub async fn get_xattrs(&self, name: &str) -> Result<BTreeMap<String, Vec<u8>>, ClientError> {
        match self.operate(name, vec![SubOp::GetXattrs]).await?.0.pop() {
            Some(SubResult::Xattrs(v)) => {
                Ok(v.into_iter().map(|(k, v)| (k, v.into_vec())).collect())
            }
            _ => Ok(BTreeMap::new()),
        }
    }

    /// Tell the OSDs how object `name` will be used (Ceph's
    /// `rados_set_alloc_hint2`): its expected size, the expected size of
    /// each write, and `loligo_types::ops::alloc_hint` flags. Creates the
    /// object if it is missing. Compression in a pool's `passive` and
    /// `aggressive` modes follows the flags.
    pub async fn set_alloc_hint(
        &self,
        name: &str,
        expected_object_size: u64,
        expected_write_size: u64,
        flags: u32,
    ) -> Result<(), ClientError> {
        let op = SubOp::SetAllocHint {
            expected_object_size,
            expected_write_size,
            flags,
        };
        self.operate(name, vec![op]).await.map(|_| ())
    }

    pub async fn rm_xattr(&self, name: &str, key: &str) -> Result<(), ClientError> {
        self.operate(name, vec![SubOp::RmXattr(key.into())])
            .await
            .map(|_| ())
    }

    pub async fn omap_set(
        &self,
        name: &str,
        kvs: Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Result<(), ClientError> {
        self.operate(name, vec![SubOp::OmapSet(bufs(kvs))])
            .await
            .map(|_| ())
    }

    /// Values of the keys that exist.
    pub async fn omap_get(
        &self,
        name: &str,
        keys: Vec<Vec<u8>>,
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, ClientError> {
        let ks = keys.into_iter().map(ByteBuf::from).collect();
        match self
            .operate(name, vec![SubOp::OmapGetKeys(ks)])
            .await?
            .0
            .pop()
        {
            Some(SubResult::Omap(v)) => Ok(v
                .into_iter()
                .map(|(k, v)| (k.into_vec(), v.into_vec()))
                .collect()),
            _ => Ok(BTreeMap::new()),
        }
    }

    /// Keys from `start` (inclusive), at most `limit`.
    pub async fn omap_list(
        &self,
        name: &str,
        start: &[u8],
        limit: u32,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, ClientError> {
        let op = SubOp::OmapList {
            start: start.to_vec(),
            limit,
        };
        match self.operate(name, vec![op]).await?.0.pop() {
            Some(SubResult::Omap(v)) => Ok(v
                .into_iter()
                .map(|(k, v)| (k.into_vec(), v.into_vec()))
                .collect()),
            _ => Ok(Vec::new()),
        }
    }

    pub async fn omap_rm(&self, name: &str, keys: Vec<Vec<u8>>) -> Result<(), ClientError> {
        let ks = keys.into_iter().map(ByteBuf::from).collect();
        self.operate(name, vec![SubOp::OmapRm(ks)])
            .await
            .map(|_| ())
    }

    pub async fn omap_clear(&self, name: &str) -> Result<(), ClientError> {
        self.operate(name, vec![SubOp::OmapClear]).await.map(|_| ())
    }

    /// Run object class method `class.method` on object `name` with
    /// `input`: the method's output. A method that refuses fails with
    /// `OpError::MethodRefused` and changes nothing; one the OSDs do not
    /// have, with `OpError::NoMethod`. To run a method together with other
    /// sub-ops (asserts, writes), put a `SubOp::Exec` in [`IoCtx::operate`].
    pub async fn exec(
        &self,
        name: &str,
        class: &str,
        method: &str,
        input: Vec<u8>,
    ) -> Result<Vec<u8>, ClientError> {
        let op = SubOp::Exec {
            class: class.to_string(),
            method: method.to_string(),
            input,
        };
        match self.operate(name, vec![op]).await?.0.pop() {
            Some(SubResult::Data(v)) => Ok(v.to_vec()),
            _ => Err(
                OpError::Invalid("an object class method answered without output".into()).into(),
            ),
        }
    }

    /// Compare-and-set on an xattr: write `value` if the xattr `key`
    /// currently equals `expected` (missing compares as empty).
    pub async fn cas_xattr(
        &self,
        name: &str,
        key: &str,
        expected: Vec<u8>,
        value: Vec<u8>,
    ) -> Result<(), ClientError> {
        self.operate(
            name,
            vec![
                SubOp::CmpXattr {
                    name: key.into(),
                    cmp: Cmp::Eq,
                    value: expected,
                },
                SubOp::SetXattr {
                    name: key.into(),
                    value,
                },
            ],
        )
        .await
        .map(|_| ())
    }

    /// Every object name in the pool (PG by PG, each in hash order).
    pub async fn list(&self) -> Result<Vec<String>, ClientError> {
        let pg_num = self
            .c
            .table()
            .map
            .pools
            .get(&self.pool)
            .map(|p| p.pg_num)
            .ok_or_else(|| ClientError::NoPool(self.name.clone()))?;
        let mut out = Vec::new();
        for ps in 0..pg_num {
            let mut start = None;
            loop {
                let req = ClientRequest::List {
                    pool: self.pool,
                    ps,
                    epoch: 0,
                    start: start.clone(),
                    limit: 1000,
                };
                let pg = PgId {
                    pool: self.pool,
                    ps,
                };
                match self.c.send(pg, req).await? {
                    ClientReply::List { result, .. } => {
                        let (names, more) = result?;
                        start = names.last().cloned();
                        out.extend(names);
                        if !more || start.is_none() {
                            break;
                        }
                    }
                    _ => return Err(OpError::Invalid("unexpected reply".into()).into()),
                }
            }
        }
        Ok(out)
    }
}
