//! Messages to other OSDs on a PG's behalf: replica writes, peering's
//! info queries, and recovery's logs and pushes, each retried while it can
//! still matter, with the outcome fed back into the PG's control lane.
//!
//! It must never judge an answer: the PG state machine does.

use super::mailbox::Mailbox;
use super::{lock, OsdShared};
use crate::error::OsdError;
use crate::msg::{PeerMsg, PeerReply};
use crate::pg::{AuthLog, Input, RepCtx, RepError, PEER_RETRY_MS};
use loligo_proto::tls::Expect;
use loligo_types::ops::{decode_wire, encode_wire};
use loligo_types::{Epoch, PgId};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Pause between attempts to reach an unreachable peer.
const PEER_RESEND_MS: u64 = 200;

impl OsdShared {
    /// Where OSD `osd` is, and whom to expect there: `osd.N` with the key
    /// the map records for it.
    fn peer_addr(&self, osd: i32) -> Result<(String, Expect), OsdError> {
        let map = self.map().ok_or(OsdError::NoAddress(osd))?;
        let addr = map
            .osds
            .get(&osd)
            .ok_or(OsdError::NoAddress(osd))?
            .addr
            .clone();
        let entity = format!("osd.{osd}");
        Ok((addr, Expect::daemon(&entity, map.daemon_serial(&entity))))
    }

    /// One message to OSD `osd`, one answer (or why there is none).
    pub(super) async fn send_peer(&self, osd: i32, m: &PeerMsg) -> Result<PeerReply, OsdError> {
        let (addr, expect) = self.peer_addr(osd)?;
        let unreachable = |why: String| OsdError::Unreachable { osd, why };
        let (body, bulk) = encode_wire(m);
        let msg = loligo_proto::direct::Message {
            body: body.into(),
            bulk,
        };
        let timeout = Duration::from_millis(super::PEER_REQUEST_TIMEOUT_MS);
        let r = loligo_proto::direct::osd_call(
            &self.direct,
            &self.peers,
            &expect,
            &addr,
            loligo_proto::direct::Call::Peer,
            msg,
            timeout,
        )
        .await
        .map_err(unreachable)?;
        decode_wire(&r.body, r.bulk).map_err(|e| OsdError::BadReply {
            osd,
            why: e.to_string(),
        })
    }

    /// Whether PG `pg` is still in the interval that started at `interval`.
    fn in_interval(&self, pg: PgId, interval: Epoch) -> bool {
        lock(&self.views)
            .get(&pg)
            .is_none_or(|v| v.interval == interval)
    }
}

/// Send `msg` to `to` on PG `pg`'s behalf, retrying an unreachable member
/// while the interval lasts (the map marks a dead member down and a new
/// interval abandons the message); a refusal is `Stale`.
async fn call(
    s: &OsdShared,
    pg: PgId,
    interval: Epoch,
    to: i32,
    msg: &PeerMsg,
) -> Result<PeerReply, RepError> {
    let deadline = Instant::now() + s.cfg.op_timeout * 2;
    loop {
        match s.send_peer(to, msg).await {
            Ok(PeerReply::Refused(e)) => return Err(RepError::Stale(e)),
            Ok(r) => return Ok(r),
            Err(e) => {
                if !s.in_interval(pg, interval) || s.stopped.load(Ordering::Relaxed) {
                    return Err(RepError::Stale(e.to_string()));
                }
                if Instant::now() > deadline {
                    return Err(RepError::Failed(e.to_string()));
                }
                tokio::time::sleep(Duration::from_millis(PEER_RESEND_MS)).await;
            }
        }
    }
}

/// A member's answer to a write or a push.
fn done_of(r: Result<PeerReply, RepError>) -> Result<(), RepError> {
    match r? {
        PeerReply::RepDone(r) => r.map_err(RepError::Failed),
        _ => Err(RepError::Failed("unexpected reply".into())),
    }
}

/// Send a message that is answered with an acknowledgement (a replica
/// write, a push, a backfill chunk) to `to`; report it with `done`.
pub(super) async fn send_acked(
    s: Arc<OsdShared>,
    me: Mailbox,
    pg: PgId,
    interval: Epoch,
    to: i32,
    msg: PeerMsg,
    done: impl FnOnce(Result<(), RepError>) -> Input,
) {
    let result = done_of(call(&s, pg, interval, to, &msg).await);
    me.control(done(result));
}

/// Send the authoritative log to recovering member `to`; report `LogDone`.
pub(super) async fn send_log(
    s: Arc<OsdShared>,
    me: Mailbox,
    pg: PgId,
    tid: u64,
    to: i32,
    ctx: RepCtx,
    log: AuthLog,
) {
    let interval = ctx.interval;
    let msg = PeerMsg::Log {
        pg,
        from: s.cfg.id,
        ctx,
        log,
    };
    let result = match call(&s, pg, interval, to, &msg).await {
        Ok(PeerReply::Merged(a)) => Ok(a),
        Ok(PeerReply::RepDone(Err(e))) => Err(RepError::Failed(e)),
        Ok(_) => Err(RepError::Failed("unexpected reply".into())),
        Err(e) => Err(e),
    };
    me.control(Input::LogDone {
        tid,
        from: to,
        result,
    });
}

/// Ask backfill target `to` for its objects in a range; report
/// `ScanDone`.
pub(super) async fn scan(
    s: Arc<OsdShared>,
    me: Mailbox,
    pg: PgId,
    tid: u64,
    to: i32,
    msg: PeerMsg,
) {
    let interval = match &msg {
        PeerMsg::Scan { ctx, .. } => ctx.interval,
        _ => 0,
    };
    let result = match call(&s, pg, interval, to, &msg).await {
        Ok(PeerReply::Scanned(sc)) => Ok(sc),
        Ok(PeerReply::RepDone(Err(e))) => Err(RepError::Failed(e)),
        Ok(_) => Err(RepError::Failed("unexpected reply".into())),
        Err(e) => Err(e),
    };
    me.control(Input::ScanDone {
        tid,
        from: to,
        result,
    });
}

/// Ask complete member `to` for what `msg` (a `GetLog` or `Pull`) names,
/// taken from its reply by `take`; report `done(result)`.
pub(super) async fn fetch<T>(
    s: Arc<OsdShared>,
    me: Mailbox,
    pg: PgId,
    to: i32,
    msg: PeerMsg,
    take: fn(PeerReply) -> Option<T>,
    done: impl FnOnce(Result<T, RepError>) -> Input,
) {
    let interval = match &msg {
        PeerMsg::GetLog { ctx, .. } | PeerMsg::Pull { ctx, .. } => ctx.interval,
        _ => 0,
    };
    let result = match call(&s, pg, interval, to, &msg).await {
        Ok(PeerReply::RepDone(Err(e))) => Err(RepError::Failed(e)),
        Ok(PeerReply::Absent(e)) => Err(RepError::Absent(e)),
        Ok(PeerReply::NeverTook(e)) => Err(RepError::NeverTook(e)),
        Ok(r) => take(r).ok_or_else(|| RepError::Failed("unexpected reply".into())),
        Err(e) => Err(e),
    };
    me.control(done(result));
}

/// Ask primary `to` whether `pg` is clean without this stray copy (one
/// try: the PG asks again later); report `StrayAnswer`.
pub(super) async fn ask_clean(
    s: Arc<OsdShared>,
    me: Mailbox,
    pg: PgId,
    to: i32,
    epoch: Epoch,
    shard: Option<u8>,
) {
    let msg = PeerMsg::StrayCheck {
        pg,
        from: s.cfg.id,
        epoch,
        shard,
    };
    let clean = match s.send_peer(to, &msg).await {
        Ok(PeerReply::Clean(c)) => c,
        _ => None,
    };
    me.control(Input::StrayAnswer { from: to, clean });
}

/// Ask `to` for its info on `pg` for peering; keep asking an unreachable
/// member a while (the PG asks again later, and the map marks a dead
/// member down); report `Info`.
pub(super) async fn query_info(
    s: Arc<OsdShared>,
    me: Mailbox,
    pg: PgId,
    to: i32,
    interval: Epoch,
    epoch: Epoch,
) {
    let msg = PeerMsg::GetInfo {
        pg,
        from: s.cfg.id,
        interval,
        epoch,
    };
    let give_up = Instant::now() + Duration::from_millis(PEER_RETRY_MS);
    let info = loop {
        match s.send_peer(to, &msg).await {
            Ok(PeerReply::Info(i)) => break i,
            Ok(
                PeerReply::Pong { .. }
                | PeerReply::RepDone(_)
                | PeerReply::Merged(_)
                | PeerReply::Scanned(_)
                | PeerReply::OwnLog(_)
                | PeerReply::Pulled(_)
                | PeerReply::ShardData(_)
                | PeerReply::Absent(_)
                | PeerReply::NeverTook(_)
                | PeerReply::Clean(_),
            ) => break None,
            // Not answerable yet (its map is behind): ask again, as for
            // an unreachable member.
            Ok(PeerReply::Refused(_)) | Err(_) => {
                if !s.in_interval(pg, interval)
                    || s.stopped.load(Ordering::Relaxed)
                    || s.map().is_some_and(|m| !m.is_up(to))
                    || Instant::now() > give_up
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(PEER_RESEND_MS)).await;
            }
        }
    };
    me.control(Input::Info {
        from: to,
        interval,
        info,
    });
}
