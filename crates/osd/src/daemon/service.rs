//! The OSD's service: client ops and listings (`Osd.Op`) and messages
//! from other OSDs (`Osd.Peer`), on gRPC and on the direct data path
//! (`loligo_proto::direct`), which share one implementation. Each request is decoded, checked against
//! this OSD's map, and handed to its PG's task; the answer comes back
//! through a waiter.
//!
//! It must never touch a PG's objects or records itself (the one
//! exception is answering a peering query for a PG this OSD has no task
//! for, from the info on disk).

use super::mailbox::{PgMsg, Waiter};
use super::OsdShared;
use crate::msg::{PeerMsg, PeerReply};
use crate::pg::Input;
use loligo_proto::direct;
use loligo_proto::v1::osd_server::Osd;
use loligo_proto::v1::Raw;
use loligo_types::ops::{
    decode_wire, encode_wire, ClientOp, ClientReply, ClientRequest, OpError, OpReply, SubOp,
    SubResult, Version,
};
use loligo_types::scrub::{OsdCommand, PgCommand};
use loligo_types::{Epoch, PgId};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tonic::{Request, Response, Status};

/// How long a request waits for this OSD to catch up with the sender's map.
const CATCH_UP_WAIT_MS: u64 = 2_000;
/// How long past the op timeout a waiter waits for its PG's answer.
const ANSWER_SLACK_MS: u64 = 5_000;

pub(super) struct Service(pub Arc<OsdShared>);

/// Why a PG task gave no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AskError {
    /// This OSD has no task for the PG (it is not a member).
    NotServed,
    /// The task ended (the OSD is stopping).
    Stopped,
    /// The task did not answer in time.
    NoAnswer,
}

impl AskError {
    /// The client's view: a timeout, or "ask the primary again".
    fn op_error(self, epoch: Epoch) -> OpError {
        match self {
            AskError::NoAnswer => OpError::Timeout("the PG did not answer".into()),
            AskError::NotServed | AskError::Stopped => OpError::WrongPrimary { epoch },
        }
    }
}

impl Service {
    /// A stopped OSD answers nothing (connections made before the stop
    /// outlive the listener).
    fn alive(&self) -> Result<(), Status> {
        if self.0.stopped.load(Ordering::Relaxed) {
            return Err(Status::unavailable("OSD stopped"));
        }
        Ok(())
    }

    /// Wait (briefly) until this OSD has map `epoch`.
    async fn catch_up(&self, epoch: Epoch) -> Epoch {
        let mut rx = self.0.epoch_tx.subscribe();
        let _ = tokio::time::timeout(Duration::from_millis(CATCH_UP_WAIT_MS), async {
            while *rx.borrow_and_update() < epoch {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        self.0.epoch()
    }

    /// Hand `input` to PG `pg`'s task and wait for the answer on `rx`.
    async fn ask<T>(
        &self,
        pg: PgId,
        spawn: bool,
        input: Input,
        waiter: Waiter,
        rx: oneshot::Receiver<T>,
    ) -> Result<T, AskError> {
        let mb = self.0.pg(pg, spawn).ok_or(AskError::NotServed)?;
        // Clients use this OSD from when their op is queued (a PG busy
        // with a scrub piece has not taken it yet): scrubs go slower.
        let client_io = match &input {
            Input::Op { .. } => true,
            Input::Peer { msg, .. } => matches!(msg, PeerMsg::RepOp { .. }),
            _ => false,
        };
        if client_io {
            self.0
                .client_io_ms
                .store(self.0.now_ms(), Ordering::Relaxed);
        }
        let msg = PgMsg {
            input,
            reply: Some(waiter),
        };
        if !mb.request(msg).await {
            return Err(AskError::Stopped);
        }
        let wait = self.0.cfg.op_timeout + Duration::from_millis(ANSWER_SLACK_MS);
        match tokio::time::timeout(wait, rx).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(_)) => Err(AskError::Stopped),
            Err(_) => Err(AskError::NoAnswer),
        }
    }

    async fn client(&self, req: ClientRequest, peer: Peer<'_>) -> ClientReply {
        match req {
            ClientRequest::Op(op) => ClientReply::Op(self.op(op, peer).await),
            ClientRequest::List {
                pool,
                ps,
                epoch,
                start,
                limit,
            } => {
                let epoch = self.catch_up(epoch).await;
                let result = self.list(pool, ps, epoch, start, limit, peer).await;
                ClientReply::List { result, epoch }
            }
            ClientRequest::Pg {
                pool,
                ps,
                epoch,
                cmd,
            } => {
                let epoch = self.catch_up(epoch).await;
                let result = self.pg_command(pool, ps, epoch, cmd, peer).await;
                ClientReply::Pg { result, epoch }
            }
            ClientRequest::Tell { cmd } => ClientReply::Tell {
                result: self.tell(cmd, peer),
            },
        }
    }

    async fn op(&self, op: ClientOp, peer: Peer<'_>) -> OpReply {
        let t0 = std::time::Instant::now();
        let _tracked = self.0.ops.track(op.pool, describe(&op, peer));
        let epoch = self.catch_up(op.epoch).await;
        let fail = |e: OpError| OpReply {
            result: Err(e),
            version: Version::default(),
            epoch,
        };
        if op.epoch > epoch {
            return fail(OpError::Behind { epoch });
        }
        let Some(map) = self.0.map() else {
            return fail(OpError::Behind { epoch });
        };
        let Some(pool) = map.pools.get(&op.pool) else {
            return fail(OpError::NoPool(op.pool));
        };
        let (r, w, x) = rights(&op.ops);
        if let Err(e) = allowed(&map, peer, &pool.name, r, w, x) {
            tracing::warn!("refused: {e}");
            return fail(e);
        }
        let pg = pool.object_pg(op.name.as_bytes());
        if op.ops.iter().any(crate::exec::takes_space) {
            if let Some(osd) = self.0.full_member(pg) {
                return fail(OpError::Full { osd });
            }
        }
        let writes = op.ops.iter().any(crate::exec::writes);
        let in_bytes: u64 = op.ops.iter().map(payload_len).sum();
        let kv_calls = (op.ops.iter())
            .filter(|o| matches!(o, SubOp::Exec { class, .. } if class == "kv"))
            .count() as u64;
        let (tx, rx) = oneshot::channel();
        let input = Input::Op {
            op,
            token: 0,
            now_ms: self.0.now_ms(),
        };
        let r = match self.ask(pg, false, input, Waiter::Op(tx), rx).await {
            Ok(r) => r,
            Err(e) => return fail(e.op_error(epoch)),
        };
        if r.result.is_ok() {
            let c = &self.0.counters;
            c.kv_calls.fetch_add(kv_calls, Ordering::Relaxed);
            let us = u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX);
            if writes {
                c.write_ops.fetch_add(1, Ordering::Relaxed);
                c.write_bytes.fetch_add(in_bytes, Ordering::Relaxed);
                c.write_latency_us.fetch_add(us, Ordering::Relaxed);
                let p = c.pool(pg.pool);
                p.write_ops.fetch_add(1, Ordering::Relaxed);
                p.write_bytes.fetch_add(in_bytes, Ordering::Relaxed);
            } else {
                c.read_ops.fetch_add(1, Ordering::Relaxed);
                c.read_latency_us.fetch_add(us, Ordering::Relaxed);
                let out: u64 = r.result.iter().flatten().map(result_len).sum();
                c.read_bytes.fetch_add(out, Ordering::Relaxed);
                let p = c.pool(pg.pool);
                p.read_ops.fetch_add(1, Ordering::Relaxed);
                p.read_bytes.fetch_add(out, Ordering::Relaxed);
            }
        }
        r
    }

    /// One page of PG `pool.ps`'s objects, from its primary's PG task
    /// (which refuses while the PG is down, like any read).
    async fn list(
        &self,
        pool: u64,
        ps: u32,
        epoch: Epoch,
        start: Option<String>,
        limit: u32,
        peer: Peer<'_>,
    ) -> Result<(Vec<String>, bool), OpError> {
        let map = self.0.map().ok_or(OpError::Behind { epoch })?;
        let p = map.pools.get(&pool).ok_or(OpError::NoPool(pool))?;
        allowed(&map, peer, &p.name, true, false, false)?;
        let pg = PgId { pool, ps };
        if ps >= p.pg_num {
            return Err(OpError::Invalid(format!("pg {pg} past pg_num")));
        }
        let (tx, rx) = oneshot::channel();
        let input = Input::List {
            start,
            limit,
            token: 0,
            now_ms: self.0.now_ms(),
        };
        self.ask(pg, false, input, Waiter::List(tx), rx)
            .await
            .unwrap_or_else(|e| Err(e.op_error(map.epoch)))
    }

    /// An operator's command to PG `pool.ps`, from its primary's PG task
    /// (a scrub or repair needs the pool's write cap, a listing its read
    /// cap).
    async fn pg_command(
        &self,
        pool: u64,
        ps: u32,
        epoch: Epoch,
        cmd: PgCommand,
        peer: Peer<'_>,
    ) -> crate::pg::CommandResult {
        let map = self.0.map().ok_or(OpError::Behind { epoch })?;
        let p = map.pools.get(&pool).ok_or(OpError::NoPool(pool))?;
        let writes = matches!(cmd, PgCommand::Scrub { .. });
        allowed(&map, peer, &p.name, true, writes, false)?;
        let pg = PgId { pool, ps };
        if ps >= p.pg_num {
            return Err(OpError::Invalid(format!("pg {pg} past pg_num")));
        }
        let (tx, rx) = oneshot::channel();
        let input = Input::Command { cmd, token: 0 };
        self.ask(pg, false, input, Waiter::Command(tx), rx)
            .await
            .unwrap_or_else(|e| Err(e.op_error(map.epoch)))
    }

    /// An operator's command to this OSD (it needs every right on the
    /// pool it names).
    fn tell(&self, cmd: OsdCommand, peer: Peer<'_>) -> Result<String, OpError> {
        let map = self.0.map().ok_or(OpError::Behind { epoch: 0 })?;
        let me = self.0.cfg.id;
        match cmd {
            OsdCommand::InjectDataErr { pool, name } => {
                let p = map.pools.get(&pool).ok_or(OpError::NoPool(pool))?;
                allowed(&map, peer, &p.name, true, true, true)?;
                let Some(inject) = &self.0.cfg.read_error_injector else {
                    return Err(OpError::Invalid(format!(
                        "osd.{me} takes no injected errors: start it with --debug-inject-read-err"
                    )));
                };
                let pg = p.object_pg(name.as_bytes());
                let c = loligo_store::CollectionId::pg(pool, pg.ps);
                (inject.0)(c, &crate::pg::recovery::oid(&name));
                tracing::warn!("injected a read error into this copy of '{name}' in pg {pg}");
                Ok(format!(
                    "injected a read error into osd.{me}'s copy of '{name}' in pg {pg}"
                ))
            }
            OsdCommand::DumpOpsInFlight => {
                // Ops of the pools the caller may read (their object
                // names are in the descriptions).
                let readable = |pool: u64| {
                    (map.pools.get(&pool))
                        .is_some_and(|p| allowed(&map, peer, &p.name, true, false, false).is_ok())
                };
                let d = self.0.ops.dump(std::time::Instant::now(), readable);
                serde_json::to_string_pretty(&d)
                    .map_err(|e| OpError::Invalid(format!("dump_ops_in_flight: {e}")))
            }
        }
    }

    /// Another OSD's message: a heartbeat is answered here; every other
    /// message goes to its PG's task (started if this OSD has none yet,
    /// except for a stray's question, which only a running PG answers).
    async fn peer_msg(&self, m: PeerMsg) -> PeerReply {
        let Some(pg) = m.pg() else {
            return PeerReply::Pong {
                epoch: self.0.epoch(),
            };
        };
        if let PeerMsg::GetInfo { epoch, .. } = &m {
            // (Answered once this OSD has the querying primary's map: the
            // fence against older primaries, and a split it brings.)
            self.catch_up(*epoch).await;
        }
        // A PG this OSD's map does not have (its pool grew in a map still
        // on its way, or the PG merged away), or one whose parent's copy
        // here has not split: ask again, never "no copy".
        let known = (self.0.map()).map(|map| map.pg_exists(pg));
        let wait = match known {
            None => Some("this OSD has no map yet (it is starting)"),
            Some(false) => Some("not in this OSD's map (a split on its way, or merged away)"),
            Some(true) if super::split::pending(&self.0, pg) => Some("not split here yet"),
            Some(true) => None,
        };
        if let Some(wait) = wait {
            let why = format!("pg {pg}: {wait}; ask again");
            return match m {
                PeerMsg::GetInfo { .. } => PeerReply::Refused(why),
                PeerMsg::StrayCheck { .. } => PeerReply::Clean(None),
                _ => PeerReply::RepDone(Err(why)),
            };
        }
        match &m {
            // A peering query: no collection here means no copy.
            PeerMsg::GetInfo { .. } if self.0.read_info(pg).is_none() => {
                return PeerReply::Info(None);
            }
            PeerMsg::Push { .. } | PeerMsg::Chunk { .. } => {
                let Some(_turn) = self.0.incoming_turn().await else {
                    return busy(pg);
                };
                return self.to_pg(pg, m).await;
            }
            _ => {}
        }
        self.to_pg(pg, m).await
    }

    /// Hand message `m` to PG `pg`'s task and wait for its answer.
    async fn to_pg(&self, pg: PgId, m: PeerMsg) -> PeerReply {
        let (stray, info, shard) = (
            matches!(m, PeerMsg::StrayCheck { .. }),
            matches!(m, PeerMsg::GetInfo { .. }),
            matches!(m, PeerMsg::ReadShard { .. }),
        );
        let (tx, rx) = oneshot::channel();
        let input = Input::Peer {
            msg: m,
            token: 0,
            now_ms: self.0.now_ms(),
        };
        match self.ask(pg, !stray, input, Waiter::Peer(tx), rx).await {
            Ok(reply) => {
                if let (true, PeerReply::ShardData(d)) = (shard, &reply) {
                    let n: usize = d.iter().map(|b| b.0.len()).sum();
                    let c = &self.0.counters;
                    c.shard_bytes_sent.fetch_add(n as u64, Ordering::Relaxed);
                }
                reply
            }
            // Not served here (no task): not known to be clean.
            Err(_) if stray => PeerReply::Clean(None),
            // Not answerable yet: the asker asks again.
            Err(e) if info => PeerReply::Refused(format!("pg {pg}: {e:?}")),
            Err(e) => PeerReply::RepDone(Err(format!("pg {pg}: {e:?}"))),
        }
    }
}

/// The answer to a push or chunk that found no free turn: a failure the
/// sender retries.
fn busy(pg: PgId) -> PeerReply {
    PeerReply::RepDone(Err(format!(
        "pg {pg}: this OSD is taking as many recovery copies as it may; try again"
    )))
}

/// Who sent a request (anyone only on an OSD without TLS).
type Peer<'a> = loligo_proto::net::Caller<'a>;

/// A client op as Ceph's op tracker describes it:
/// `osd_op(client.admin 1:name [write,setxattr])`.
fn describe(op: &ClientOp, peer: Peer<'_>) -> String {
    let who = match peer {
        loligo_proto::net::Caller::Entity { entity, .. } => entity,
        _ => "client",
    };
    let subs: Vec<&str> = op.ops.iter().map(|s| s.name()).collect();
    format!("osd_op({who} {}:{} [{}])", op.pool, op.name, subs.join(","))
}

/// The rights a client op needs: read, write, exec. An object class call
/// needs `x`, and `r` and (if the method may write) `w` as well, as the
/// data it touches would; asserts and reads need `r`.
fn rights(ops: &[SubOp]) -> (bool, bool, bool) {
    let (mut r, mut w, mut x) = (false, false, false);
    for o in ops {
        match o {
            SubOp::Exec { .. } => {
                x = true;
                r = true;
                w |= crate::exec::writes(o);
            }
            o if o.is_write() => w = true,
            _ => r = true,
        }
    }
    (r, w, x)
}

/// Whether the peer may run an op needing (`r`, `w`, `x`) in pool `pool`
/// under `map`: only clients send client ops, each with the caps the map
/// records for its certificate.
fn allowed(
    map: &loligo_types::OsdMap,
    peer: Peer<'_>,
    pool: &str,
    r: bool,
    w: bool,
    x: bool,
) -> Result<(), OpError> {
    use loligo_proto::net::Caller;
    let (e, serial) = match peer {
        Caller::Anyone => return Ok(()),
        Caller::Unidentified => {
            return Err(OpError::Denied(
                "a client op without an identity on a secured OSD".into(),
            ))
        }
        Caller::Entity { entity, serial } => (entity, serial),
    };
    if !e.starts_with("client.") {
        return Err(OpError::Denied(format!(
            "{e} is not a client: client ops come from clients"
        )));
    }
    let caps = map.caps_of(e, serial).map_err(OpError::Denied)?;
    if caps.allows_osd(pool, r, w, x) {
        return Ok(());
    }
    let verbs: Vec<&str> = [(r, "read"), (w, "write"), (x, "call object classes")]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, v)| *v)
        .collect();
    Err(OpError::Denied(format!(
        "{e} may not {} in pool '{pool}'",
        verbs.join(" and ")
    )))
}

fn payload_len(o: &SubOp) -> u64 {
    match o {
        SubOp::WriteFull(d) | SubOp::Append(d) | SubOp::Write { data: d, .. } => d.len() as u64,
        _ => 0,
    }
}

fn result_len(r: &SubResult) -> u64 {
    match r {
        SubResult::Data(d) => d.len() as u64,
        _ => 0,
    }
}

impl Service {
    /// Who a connection's identity (entity, serial) is to this OSD: anyone
    /// only when it runs without TLS.
    fn caller<'a>(&self, identity: Option<(&'a str, &'a str)>) -> Peer<'a> {
        loligo_proto::net::Caller::of(self.0.cfg.security.is_some(), identity)
    }

    /// A client's `Op` call, bytes in and out (gRPC and the direct path).
    /// With TLS, `peer` is the connection's identity, whose caps the op
    /// must have.
    async fn op_call(
        &self,
        body: &[u8],
        bulk: Vec<bytes::Bytes>,
        peer: Peer<'_>,
    ) -> (Vec<u8>, Vec<bytes::Bytes>) {
        let reply = match decode_wire::<ClientRequest>(body, bulk) {
            Ok(r) => self.client(r, peer).await,
            Err(e) => ClientReply::Op(OpReply {
                result: Err(e),
                version: Version::default(),
                epoch: self.0.epoch(),
            }),
        };
        encode_wire(&reply)
    }

    /// Another OSD's `Peer` call, bytes in and out. With TLS, `entity`
    /// (the connection's certificate) must be the OSD the message says
    /// sent it, and that OSD must be in this OSD's map: a client, a
    /// monitor or an OSD speaking for another gets a refusal and changes
    /// nothing.
    async fn peer_call(
        &self,
        body: &[u8],
        bulk: Vec<bytes::Bytes>,
        caller: Peer<'_>,
    ) -> (Vec<u8>, Vec<bytes::Bytes>) {
        let reply = match decode_wire::<PeerMsg>(body, bulk) {
            Ok(m) => match self.peer_allowed(&m, caller) {
                Ok(()) => self.peer_msg(m).await,
                Err(why) => {
                    tracing::warn!("refused: {why}");
                    PeerReply::Refused(why)
                }
            },
            Err(e) => PeerReply::RepDone(Err(e.to_string())),
        };
        encode_wire(&reply)
    }

    /// Whether the connection's caller may send `m` (see `peer_call`).
    fn peer_allowed(&self, m: &PeerMsg, caller: Peer<'_>) -> Result<(), String> {
        use loligo_proto::net::Caller;
        let (e, serial) = match caller {
            Caller::Anyone => return Ok(()),
            Caller::Unidentified => {
                return Err("an OSD message without an identity on a secured OSD".into())
            }
            Caller::Entity { entity, serial } => (entity, serial),
        };
        let from = m.sender();
        if loligo_proto::tls::osd_of(e) != Some(from) {
            return Err(format!("{e} may not send OSD messages as osd.{from}"));
        }
        match self.0.map() {
            Some(map) if !map.osds.contains_key(&from) => {
                Err(format!("osd.{from} is not in this OSD's map"))
            }
            Some(map) => map.daemon_key_valid(e, serial),
            None => Ok(()),
        }
    }
}

#[tonic::async_trait]
impl Osd for Service {
    async fn op(&self, req: Request<Raw>) -> Result<Response<Raw>, Status> {
        self.alive()?;
        let id =
            loligo_proto::net::peer_identity(&req).map(|(e, s)| (e.to_string(), s.to_string()));
        let req = req.into_inner();
        let peer = self.caller(id.as_ref().map(|(e, s)| (e.as_str(), s.as_str())));
        let (body, bulk) = self.op_call(&req.body, req.bulk, peer).await;
        Ok(Response::new(Raw {
            body: body.into(),
            bulk,
        }))
    }

    async fn peer(&self, req: Request<Raw>) -> Result<Response<Raw>, Status> {
        self.alive()?;
        let id =
            loligo_proto::net::peer_identity(&req).map(|(e, s)| (e.to_string(), s.to_string()));
        let req = req.into_inner();
        let peer = self.caller(id.as_ref().map(|(e, s)| (e.as_str(), s.as_str())));
        let (body, bulk) = self.peer_call(&req.body, req.bulk, peer).await;
        Ok(Response::new(Raw {
            body: body.into(),
            bulk,
        }))
    }
}

impl direct::Handler for Service {
    /// A key the map records another serial for (rotated, or an OSD's
    /// revoked mark) loses its open connections: each closes after the
    /// reply (a refusal) to its next call.
    fn close_after(&self, peer: &loligo_proto::net::Peer) -> bool {
        let Some((entity, serial)) = peer.identity() else {
            return false;
        };
        self.0
            .map()
            .is_some_and(|m| m.auth.get(entity).is_some_and(|e| e.serial != serial))
    }

    fn call(
        self: Arc<Self>,
        call: direct::Call,
        msg: direct::Message,
        peer: Arc<loligo_proto::net::Peer>,
    ) -> Pin<Box<dyn Future<Output = Option<direct::Message>> + Send + 'static>> {
        Box::pin(async move {
            // A stopped OSD answers nothing, as on gRPC.
            self.alive().ok()?;
            let caller = self.caller(peer.identity());
            let (body, bulk) = match call {
                direct::Call::Op => self.op_call(&msg.body, msg.bulk, caller).await,
                direct::Call::Peer => self.peer_call(&msg.body, msg.bulk, caller).await,
            };
            // Stopped while the call ran: no answer either.
            self.alive().ok()?;
            Some(direct::Message {
                body: body.into(),
                bulk,
            })
        })
    }
}
