//! The PG's side of the one protocol between its copies: messages it
//! sends (each remembered until its answer comes, so the answer reaches
//! the handler of its kind), messages it takes from other copies, and
//! the answers to what it sent.
//!
//! Dispatch only: it must never decide anything the handlers decide.

use super::io::{Asked, Sent};
use super::lease::LeaseAnswer;
use super::{replica, Effect, HeldLog, PeerInfo, PendingQuery, Pg, RepError};
use crate::msg::{PeerMsg, PeerReply};
use bytes::Bytes;
use loligo_store::ObjectStore;

/// Answers a PG may wait for at once before a host that loses them is
/// a bug worth stopping for (debug builds).
const SENT_MAX: usize = 1 << 20;

impl Pg {
    /// Send `msg` to `to` for the operation `tid` (a write, a gather, a
    /// pull: the handler of the answer's kind matches it by `tid`).
    pub(super) fn send(&mut self, tid: u64, to: i32, msg: PeerMsg, fx: &mut Vec<Effect>) {
        debug_assert_eq!(msg.sender(), self.whoami, "a PG sends as its own OSD");
        debug_assert_eq!(msg.pg(), Some(self.id), "a PG sends for itself");
        let Some(asked) = Asked::of(&msg) else {
            debug_assert!(false, "a PG never sends {msg:?}");
            return;
        };
        let id = self.next_send;
        self.next_send += 1;
        let interval = self.map.interval;
        self.sent.insert(
            id,
            Sent {
                tid,
                to,
                asked,
                interval,
            },
        );
        debug_assert!(self.sent.len() < SENT_MAX, "a host loses answers");
        fx.push(Effect::Send { id, to, msg });
    }

    /// Whether `id` is a replica write or a push still waiting for its
    /// answer (a host refreshes the PG's stats less often for those: one
    /// comes with every client write).
    pub fn awaits_write_ack(&self, id: u64) -> bool {
        self.sent
            .get(&id)
            .is_some_and(|x| matches!(x.asked, Asked::RepOp | Asked::Push))
    }

    /// Ask `to` for its info for this interval (peering).
    pub(super) fn query_info(&mut self, to: i32, fx: &mut Vec<Effect>) {
        // Queries of earlier intervals whose answers were lost: their
        // answers would be ignored (`on_info` takes only this interval's).
        let interval = self.map.interval;
        self.sent.retain(|_, x| match x.asked {
            Asked::Info { interval: i } => i == interval,
            _ => true,
        });
        let msg = PeerMsg::GetInfo {
            pg: self.id,
            from: self.whoami,
            interval: self.map.interval,
            epoch: self.map.epoch,
        };
        self.send(0, to, msg, fx);
    }

    /// Pull `name` from `to` as `tid`, at the version this copy misses.
    pub(super) fn pull(&mut self, tid: u64, to: i32, name: &str, fx: &mut Vec<Effect>) {
        let msg = PeerMsg::Pull {
            pg: self.id,
            from: self.whoami,
            ctx: self.rep_ctx(),
            name: name.to_string(),
            need: self.missing.get(name).copied().unwrap_or_default(),
        };
        self.send(tid, to, msg, fx);
    }

    /// A message from another copy of this PG.
    pub(super) fn on_peer(
        &mut self,
        s: &dyn ObjectStore,
        msg: PeerMsg,
        token: u64,
        fx: &mut Vec<Effect>,
    ) {
        debug_assert!(msg.pg().is_none_or(|pg| pg == self.id));
        let deadline_ms = self.now_ms + self.op_timeout_ms;
        match msg {
            PeerMsg::Ping { .. } => fx.push(Effect::Answer {
                token,
                reply: PeerReply::Pong {
                    epoch: self.map.epoch,
                },
            }),
            PeerMsg::RepOp { from, ctx, txn, .. } => {
                let w = replica::RepWrite {
                    from,
                    ctx,
                    txn,
                    token,
                    deadline_ms,
                };
                self.on_rep_op(s, w, fx)
            }
            PeerMsg::GetInfo {
                from,
                interval,
                epoch,
                ..
            } => {
                let q = PendingQuery {
                    from,
                    interval,
                    epoch,
                    token,
                    deadline_ms,
                };
                self.on_query(q, fx)
            }
            PeerMsg::Log { from, ctx, log, .. } => {
                let h = HeldLog {
                    from,
                    ctx,
                    log,
                    token,
                    deadline_ms,
                };
                self.on_log(s, h, fx);
            }
            PeerMsg::Push {
                from, ctx, push, ..
            } => self.on_push(s, from, ctx, push, token, fx),
            PeerMsg::Repair {
                from, ctx, push, ..
            } => self.on_repair(s, from, ctx, push, token, fx),
            PeerMsg::ScrubReserve {
                from, ctx, round, ..
            } => self.on_scrub_reserve(from, &ctx, round, token, fx),
            PeerMsg::ScrubRelease {
                from,
                ctx,
                round,
                stamps,
                ..
            } => {
                self.on_scrub_release(from, &ctx, round, fx);
                if self.fence(from, &ctx, "scrub stamps from").is_ok() {
                    self.keep_scrub_stamps(s, stamps, fx);
                }
                fx.push(Effect::ack(token, Ok(())));
            }
            PeerMsg::ScrubMap {
                from,
                ctx,
                after,
                upto,
                deep,
                ..
            } => self.on_scrub_map(s, from, &ctx, &after, &upto, deep, token, fx),
            PeerMsg::Scan {
                from,
                ctx,
                after,
                upto,
                limit,
                filter,
                ..
            } => {
                let result = self.on_scan(s, from, &ctx, &after, &upto, limit, &filter);
                fx.push(Effect::answer(token, result, PeerReply::Scanned));
            }
            PeerMsg::Chunk {
                from, ctx, chunk, ..
            } => self.on_chunk(s, from, &ctx, chunk, token, fx),
            PeerMsg::GetLog { from, ctx, .. } => {
                let result = self.on_get_log(s, from, &ctx);
                fx.push(Effect::answer(token, result, PeerReply::OwnLog));
            }
            PeerMsg::Pull {
                from,
                ctx,
                name,
                need,
                ..
            } => {
                let result = self.on_pull(s, from, &ctx, &name, need);
                fx.push(Effect::answer(token, result, PeerReply::Pulled));
            }
            PeerMsg::ReadShard {
                name,
                extents,
                version,
                shard,
                ..
            } => self.on_shard_read(s, &name, &extents, version, shard, token, fx),
            PeerMsg::Lease {
                from,
                ctx,
                lease_ms,
                prior,
                ..
            } => self.on_lease(from, &ctx, lease_ms, &prior, token, fx),
            PeerMsg::StrayCheck {
                from, epoch, shard, ..
            } => {
                // (Replicated: a stray's whole copy may still mend a
                // damaged source; see `mend_source`.)
                match (shard, &self.ec, self.is_primary()) {
                    (Some(i), Some(_), true) => {
                        self.rec.strays.insert(from, i as usize);
                    }
                    (_, None, true) => {
                        self.rec.strays.insert(from, 0);
                    }
                    _ => {}
                }
                let clean = self.clean_without(from, epoch);
                fx.push(Effect::Answer {
                    token,
                    reply: PeerReply::Clean(clean),
                });
            }
        }
    }

    /// The answer to message `id` (or why there is none), to the handler
    /// of what it asked. An answer to nothing remembered is dropped.
    pub(super) fn on_reply(
        &mut self,
        s: &dyn ObjectStore,
        id: u64,
        reply: Result<PeerReply, RepError>,
        fx: &mut Vec<Effect>,
    ) {
        let Some(Sent {
            tid,
            to: from,
            asked,
            interval,
        }) = self.sent.remove(&id)
        else {
            return;
        };
        // What a primary sent a member for recovery, refused because the
        // member holds the interval over: see `member_ended_interval`.
        let recovery = matches!(
            asked,
            Asked::Push | Asked::Chunk | Asked::Log | Asked::Scan | Asked::GetLog
        );
        let stale =
            recovery && matches!(reply, Err(RepError::Stale(_)) | Ok(PeerReply::Refused(_)));
        self.answered(s, tid, from, asked, reply, fx);
        // (An answer to an earlier interval's message tells nothing of
        // this one.)
        if stale && interval == self.map.interval && self.map.primary == self.whoami {
            self.member_ended_interval(s, fx);
        }
    }

    /// Hand answer `reply` from `from` to the handler of what was asked.
    fn answered(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        from: i32,
        asked: Asked,
        reply: Result<PeerReply, RepError>,
        fx: &mut Vec<Effect>,
    ) {
        match asked {
            // A member that cannot answer yet (its map is behind) is
            // asked again by the host or by peering's retry; any other
            // answer without an info means it has no copy.
            Asked::Info { interval } => match reply {
                Ok(PeerReply::Info(info)) => self.on_info(s, from, interval, info, fx),
                Ok(PeerReply::Refused(_)) | Err(_) => {}
                Ok(_) => self.on_info(s, from, interval, None, fx),
            },
            // Only the current primary's word, under a map no older than
            // this copy's, counts.
            Asked::StrayCheck => {
                if let Ok(PeerReply::Clean(Some(e))) = reply {
                    if from == self.map.primary && e >= self.map.epoch {
                        self.remove_some(s, fx);
                    }
                }
            }
            Asked::RepOp => {
                let result = take(reply, ack);
                self.done(s, tid, from, result, fx)
            }
            Asked::Push => {
                let result = take(reply, ack);
                self.on_push_done(s, tid, from, result, fx)
            }
            Asked::Chunk => {
                let result = take(reply, ack);
                self.on_chunk_done(s, tid, from, result, fx)
            }
            Asked::Log => {
                let result = take(reply, |r| match r {
                    PeerReply::Merged(a) => Some(a),
                    _ => None,
                });
                self.on_log_done(s, tid, from, result, fx)
            }
            Asked::Scan => {
                let result = take(reply, |r| match r {
                    PeerReply::Scanned(sc) => Some(sc),
                    _ => None,
                });
                self.on_scan_done(s, tid, from, result, fx)
            }
            Asked::GetLog => {
                let result = take(reply, |r| match r {
                    PeerReply::OwnLog(l) => Some(l),
                    _ => None,
                });
                self.on_get_log_done(s, tid, from, result, fx)
            }
            Asked::Pull => {
                let result = take(reply, |r| match r {
                    PeerReply::Pulled(p) => Some(p),
                    _ => None,
                });
                self.on_pull_done(s, tid, from, result, fx)
            }
            Asked::ScrubMap => {
                let result = take(reply, |r| match r {
                    PeerReply::ScrubMap(m) => Some(m),
                    _ => None,
                });
                self.on_scrub_map_done(s, tid, from, result, fx)
            }
            Asked::Repair => {
                let result = take(reply, ack);
                self.on_repair_done(s, tid, from, result, fx)
            }
            Asked::ScrubReserve { round } => {
                let result = take(reply, |r| match r {
                    PeerReply::ScrubReserved(g) => Some(g),
                    _ => None,
                });
                self.on_scrub_reserved(tid, from, round, result, fx);
                // (The last yes: the scrub goes on now, not at a tick.)
                self.scrub_step(s, fx)
            }
            Asked::ScrubRelease => {
                let result = take(reply, ack);
                self.on_scrub_released(tid, result, fx)
            }
            Asked::Lease => {
                let answer = match reply {
                    Ok(PeerReply::LeaseAck) => LeaseAnswer::Acked,
                    // (Only the fence's refusal: `Refused` is the OSD's
                    // word on the sender's key or map, which peering again
                    // would not mend.)
                    Err(RepError::Stale(_)) => LeaseAnswer::Refused,
                    _ => LeaseAnswer::Failed,
                };
                self.on_lease_answer(s, tid, from, answer, fx)
            }
            Asked::ReadShard { shard } => {
                let result = take(reply, |r| match r {
                    PeerReply::ShardData(d) => {
                        Some(d.into_iter().map(|b| b.0).collect::<Vec<Bytes>>())
                    }
                    _ => None,
                });
                self.on_shard_read_done(s, tid, from, shard, result, fx)
            }
        }
    }
}

/// The answer to a peering query: this copy's info (`None`: no copy), or
/// why it cannot answer yet (a refusal: the asker asks again).
pub(super) fn info_answer(token: u64, result: Result<Option<PeerInfo>, String>) -> Effect {
    let reply = match result {
        Ok(info) => PeerReply::Info(info),
        Err(e) => PeerReply::Refused(e),
    };
    Effect::Answer { token, reply }
}

/// An answer as the value its kind carries (`want`), its refusal or
/// failure as the error, anything else as a failure.
fn take<T>(
    reply: Result<PeerReply, RepError>,
    want: impl FnOnce(PeerReply) -> Option<T>,
) -> Result<T, RepError> {
    let r = reply.and_then(PeerReply::into_result)?;
    want(r).ok_or_else(|| RepError::Failed("unexpected reply".into()))
}

/// A write, push or chunk's acknowledgement.
fn ack(r: PeerReply) -> Option<()> {
    matches!(r, PeerReply::RepDone(Ok(()))).then_some(())
}
