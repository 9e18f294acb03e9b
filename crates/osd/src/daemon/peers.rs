//! Messages to other OSDs on a PG's behalf (replica writes, peering's
//! info queries, recovery's logs, pushes and pulls), each retried while it
//! can still matter, with the outcome fed back into the PG's control lane.
//!
//! It must never judge an answer: the PG state machine does.

use super::mailbox::Mailbox;
use super::{lock, OsdShared};
use crate::error::OsdError;
use crate::msg::{PeerMsg, PeerReply};
use crate::pg::{Input, RepError, PEER_RETRY_MS};
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

/// Send message `id` of PG `pg` to OSD `to` and report its answer (or
/// why there is none) to the PG as `Input::Reply`, exactly once. How
/// long to keep trying depends on the message: a stray's question is
/// asked once (the stray asks again later), and so is a lease renewal
/// (a late one is worth nothing: the next is on its way); a peering query is asked
/// again while the member is up and cannot answer yet; anything else of
/// an interval is sent again while that interval lasts (a shard read,
/// which names no interval, is tried once: its gather plans around it).
pub(super) async fn send(s: Arc<OsdShared>, me: Mailbox, pg: PgId, id: u64, to: i32, msg: PeerMsg) {
    let reply = match &msg {
        PeerMsg::StrayCheck { .. } | PeerMsg::Lease { .. } => s
            .send_peer(to, &msg)
            .await
            .map_err(|e| RepError::Failed(e.to_string())),
        PeerMsg::GetInfo { interval, .. } => query(&s, pg, to, *interval, &msg).await,
        _ => call(&s, pg, msg.interval().unwrap_or(0), to, &msg).await,
    };
    me.control(Input::Reply { id, reply });
}

/// Send `msg` to `to` on PG `pg`'s behalf, retrying an unreachable member
/// while the interval lasts (the map marks a dead member down and a new
/// interval abandons the message).
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

/// Ask `to` for its info on `pg` for peering; keep asking a member that
/// is unreachable or cannot answer yet (its map is behind) a while, as
/// long as the interval lasts and the map shows it up (the PG asks again
/// later, and the map marks a dead member down).
async fn query(
    s: &OsdShared,
    pg: PgId,
    to: i32,
    interval: Epoch,
    msg: &PeerMsg,
) -> Result<PeerReply, RepError> {
    let give_up = Instant::now() + Duration::from_millis(PEER_RETRY_MS);
    loop {
        let why = match s.send_peer(to, msg).await {
            Ok(PeerReply::Refused(why)) => why,
            Ok(r) => return Ok(r),
            Err(e) => e.to_string(),
        };
        if !s.in_interval(pg, interval)
            || s.stopped.load(Ordering::Relaxed)
            || s.map().is_some_and(|m| !m.is_up(to))
            || Instant::now() > give_up
        {
            return Err(RepError::Stale(why));
        }
        tokio::time::sleep(Duration::from_millis(PEER_RESEND_MS)).await;
    }
}
