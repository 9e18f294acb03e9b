//! Scrub reservations (Ceph's `osd_max_scrubs`): before a primary scrubs
//! a chunk it holds a scrub slot of its own OSD and one of each acting
//! member's OSD. It takes them one OSD at a time in the order of their
//! ids, its own among them (`PeerMsg::ScrubReserve` to a member), and
//! scrubs once it holds all. Where no slot is free the ask waits, a
//! little while, for one to be given back: a member keeps the ask
//! unanswered, this OSD leaves the PG's name with its slots; both are
//! woken the moment a slot frees. Since every primary takes slots in the
//! same order, no two wait for each other; a wait that lasts too long
//! (a long scrub holds the slot) ends in a no, and the primary gives back
//! what it holds (`PeerMsg::ScrubRelease`) and asks again later. The
//! slots go back when the scrub ends, gives up or its interval ends; a
//! member also gives its slot back at its own new interval, or when the
//! primary has said nothing for a while (a release lost with its
//! primary).
//!
//! It only counts: it must never start, stop or hold back a scrub by
//! itself (`scrub.rs` asks `scrub_reserved` before each chunk).

use super::*;
use crate::scrub_slots::ScrubSlot;

/// Pause before a primary refused a slot asks again (ms; plus a per-PG
/// share of up to as much again, so PGs refused together do not ask
/// together). Short: a refusal comes after a wait of `WAIT_MS`.
const RESERVE_RETRY_MS: u64 = 250;
/// How long an ask waits for a slot to be given back before it is
/// refused (ms): long enough for the scrubs of a few PGs queued before
/// it, not for a long one (while it waits, its primary holds the slots
/// it took, which other scrubs may want).
const WAIT_MS: u64 = 5_000;
/// A member gives its slot back when its primary's scrub has said nothing
/// (no map asked for, no reservation renewed) for this long (ms).
const REMOTE_IDLE_MS: u64 = 60_000;
/// A primary whose member has not answered in this long gives its
/// slots back and asks again later (ms; a member answers within
/// `WAIT_MS`).
const ANSWER_TIMEOUT_MS: u64 = 10_000;
/// Times a release is sent before its member is left to time it out.
const RELEASE_TRIES: u8 = 3;

/// A PG's scrub slots: as primary, its own and its members'; as a member,
/// the one it holds for its primary.
#[derive(Default)]
pub(super) struct Reservations {
    mine: Option<Mine>,
    /// When a primary refused may ask again.
    retry_ms: u64,
    /// The primary's reservation rounds so far (each ask names its round,
    /// so a late answer or release of an earlier one is told apart).
    round: u64,
    /// As a member: the slot held for `primary`'s scrub in `interval`,
    /// and when the primary last spoke of it.
    remote: Option<Remote>,
    /// As a member: an ask waiting for a slot, answered once one frees
    /// (or `WAIT_MS` passes).
    queued: Option<Queued>,
    /// Releases sent and not answered (tid → member, round, tries).
    releasing: BTreeMap<u64, (i32, u64, u8)>,
    /// Times a member or this OSD had no slot free.
    refused: u64,
}

/// The primary's side: the slots of `order[..next]` are held.
struct Mine {
    /// The acting OSDs by id: the order slots are taken in.
    order: Vec<i32>,
    next: usize,
    /// This OSD's slot (once its turn came).
    own: Option<ScrubSlot>,
    round: u64,
    /// The member asked now (and its tid), or this OSD's slot waited for.
    asking: Option<(i32, u64)>,
    /// When the slot of `order[next]` was first asked for.
    since_ms: u64,
    /// Members holding a slot for this scrub.
    granted: BTreeSet<i32>,
}

struct Remote {
    _slot: ScrubSlot,
    primary: i32,
    interval: Epoch,
    round: u64,
    seen_ms: u64,
}

/// A member's ask waiting for a slot.
struct Queued {
    token: u64,
    primary: i32,
    /// The primary's interval, as its ask names it.
    interval: Epoch,
    /// This copy's interval when the ask came.
    here: Epoch,
    round: u64,
    since_ms: u64,
}

impl Pg {
    /// Whether this primary holds its slots and every member's: a chunk
    /// may be scrubbed. If not, it asks for the next one (when its pause
    /// after a refusal is over).
    pub(super) fn scrub_reserved(&mut self, fx: &mut Vec<Effect>) -> bool {
        if self.resv.mine.is_none() {
            if self.now_ms < self.resv.retry_ms {
                return false;
            }
            let mut order: Vec<i32> = (self.map.acting.iter().copied())
                .filter(|&o| o >= 0)
                .chain([self.whoami])
                .collect();
            order.sort_unstable();
            order.dedup();
            self.resv.round += 1;
            self.resv.mine = Some(Mine {
                order,
                next: 0,
                own: None,
                round: self.resv.round,
                asking: None,
                since_ms: self.now_ms,
                granted: BTreeSet::new(),
            });
        }
        loop {
            let (me, pg, now) = (self.whoami, self.id, self.now_ms);
            let Some(m) = &mut self.resv.mine else {
                return false;
            };
            let Some(&osd) = m.order.get(m.next) else {
                debug_assert!(m.own.is_some() && m.granted.len() + 1 == m.order.len());
                return true;
            };
            if now >= m.since_ms + ANSWER_TIMEOUT_MS {
                tracing::debug!("pg {pg}: the scrub slot of osd.{osd} went unanswered");
                return self.scrub_refused(fx);
            }
            if osd == me {
                let Some(slot) = self.scrub_slots.take_or_wait(pg) else {
                    // (Woken when one is given back, or asked again at
                    // the next step.)
                    if m.asking.replace((me, 0)).is_none() {
                        self.resv.refused += 1;
                    }
                    if now >= m.since_ms + WAIT_MS {
                        return self.scrub_refused(fx);
                    }
                    return false;
                };
                m.own = Some(slot);
                m.asking = None;
                m.next += 1;
                m.since_ms = now;
                continue;
            }
            if m.asking.is_some() {
                return false;
            }
            let round = m.round;
            let tid = self.take_tid();
            let msg = PeerMsg::ScrubReserve {
                pg,
                from: me,
                ctx: self.rep_ctx(),
                round,
            };
            self.send(tid, osd, msg, fx);
            if let Some(m) = &mut self.resv.mine {
                m.asking = Some((osd, tid));
            }
            return false;
        }
    }

    /// A member's answer to reservation `round` (`granted`, or why not).
    pub(super) fn on_scrub_reserved(
        &mut self,
        tid: u64,
        from: i32,
        round: u64,
        result: Result<bool, RepError>,
        fx: &mut Vec<Effect>,
    ) {
        let now = self.now_ms;
        let current = (self.resv.mine.as_ref()).is_some_and(|m| m.asking == Some((from, tid)));
        if !current {
            // (A slot held for a round given up: the member gives it back.)
            if matches!(result, Ok(true)) {
                self.send_scrub_release(from, round, fx);
            }
            return;
        }
        let Some(m) = &mut self.resv.mine else {
            return;
        };
        m.asking = None;
        match result {
            Ok(true) => {
                debug_assert_eq!(m.order.get(m.next), Some(&from));
                m.granted.insert(from);
                m.next += 1;
                m.since_ms = now;
            }
            Ok(false) => {
                tracing::debug!("pg {}: osd.{from} has no scrub slot free", self.id);
                self.scrub_refused(fx);
            }
            Err(e) => {
                // (It may have said yes into a lost reply.)
                tracing::debug!("pg {}: osd.{from} holds no scrub slot: {e:?}", self.id);
                self.send_scrub_release(from, round, fx);
                self.scrub_refused(fx);
            }
        }
    }

    /// A slot was refused: give back what is held, ask again later.
    fn scrub_refused(&mut self, fx: &mut Vec<Effect>) -> bool {
        self.resv.refused += 1;
        self.release_scrub_slots(fx);
        // (The PG's pool and number and this OSD: two PGs refusing each
        // other never ask again in step.)
        let id = (self.id.pool << 32) ^ u64::from(self.id.ps) ^ ((self.whoami as u64) << 48);
        let seed = id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
        self.resv.retry_ms = self.now_ms + RESERVE_RETRY_MS + seed % RESERVE_RETRY_MS;
        false
    }

    /// The scrub is over (ended, gave up, or this copy is no longer its
    /// primary): every slot goes back.
    pub(super) fn release_scrub_slots(&mut self, fx: &mut Vec<Effect>) {
        let Some(m) = self.resv.mine.take() else {
            return;
        };
        let asked = m.asking.map(|(osd, _)| osd).filter(|&o| o != self.whoami);
        for to in m.granted.into_iter().chain(asked) {
            self.send_scrub_release(to, m.round, fx);
        }
    }

    fn send_scrub_release(&mut self, to: i32, round: u64, fx: &mut Vec<Effect>) {
        self.send_scrub_release_try(to, round, 1, fx);
    }

    fn send_scrub_release_try(&mut self, to: i32, round: u64, tries: u8, fx: &mut Vec<Effect>) {
        let tid = self.take_tid();
        self.resv.releasing.insert(tid, (to, round, tries));
        let (last, deep) = self.scrub_stamps();
        let msg = PeerMsg::ScrubRelease {
            pg: self.id,
            from: self.whoami,
            ctx: self.rep_ctx(),
            round,
            stamps: (last.unwrap_or(0), deep.unwrap_or(0)),
        };
        self.send(tid, to, msg, fx);
    }

    /// A member's answer to a release: one lost on the way is sent
    /// again, a few times (a member's slot otherwise waits out its
    /// primary's silence).
    pub(super) fn on_scrub_released(
        &mut self,
        tid: u64,
        result: Result<(), RepError>,
        fx: &mut Vec<Effect>,
    ) {
        let Some((to, round, tries)) = self.resv.releasing.remove(&tid) else {
            return;
        };
        if matches!(result, Err(RepError::Failed(_))) && tries < RELEASE_TRIES {
            self.send_scrub_release_try(to, round, tries + 1, fx);
        }
    }

    /// A new interval: this copy's slots go back, and the members
    /// holding one for it are told (a member need not see the new
    /// interval: its copy may count intervals from other maps than this
    /// one's; an ask waiting here is answered no at the next step, as it
    /// names the interval it came in).
    pub(super) fn scrub_slots_new_interval(&mut self, fx: &mut Vec<Effect>) {
        self.resv.releasing.clear();
        self.release_scrub_slots(fx);
        self.resv.remote = None;
    }

    /// As a member: hold a slot for the primary's reservation `round`,
    /// answering `token` now or (none free) once one is given back.
    pub(super) fn on_scrub_reserve(
        &mut self,
        from: i32,
        ctx: &RepCtx,
        round: u64,
        token: u64,
        fx: &mut Vec<Effect>,
    ) {
        if let Err(e) = self.fence(from, ctx, "scrub reservation from") {
            return fx.push(Effect::answer(token, Err(e), PeerReply::ScrubReserved));
        }
        let now = self.now_ms;
        // (An ask waiting is an earlier round's: that one is over.)
        self.answer_queued(false, fx);
        // The fence passed: `from` is this PG's primary as far as this
        // copy knows, so a slot held for another primary or an earlier
        // interval (a primary that ended its interval by itself says
        // nothing to its members) is void: it serves this one.
        if let Some(r) = &mut self.resv.remote {
            if r.primary != from || r.interval != ctx.interval {
                (r.primary, r.interval, r.round) = (from, ctx.interval, round);
            }
            r.seen_ms = now;
            r.round = r.round.max(round);
            return fx.push(Effect::answer(token, Ok(true), PeerReply::ScrubReserved));
        }
        self.resv.queued = Some(Queued {
            token,
            primary: from,
            interval: ctx.interval,
            here: self.map.interval,
            round,
            since_ms: now,
        });
        self.serve_queued_reserve(fx);
    }

    /// As a member: the ask waiting gets its slot if one is free now, or
    /// a no once it has waited long enough (or its interval is over).
    pub(super) fn serve_queued_reserve(&mut self, fx: &mut Vec<Effect>) {
        let Some(q) = &self.resv.queued else {
            return;
        };
        if q.here != self.map.interval || self.now_ms >= q.since_ms + WAIT_MS {
            self.resv.refused += 1;
            return self.answer_queued(false, fx);
        }
        let Some(slot) = self.scrub_slots.take_or_wait(self.id) else {
            return;
        };
        tracing::debug!(
            "pg {}: osd.{} holds a scrub slot for osd.{} (round {})",
            self.id,
            self.whoami,
            q.primary,
            q.round
        );
        debug_assert!(self.resv.remote.is_none());
        self.resv.remote = Some(Remote {
            _slot: slot,
            primary: q.primary,
            interval: q.interval,
            round: q.round,
            seen_ms: self.now_ms,
        });
        self.answer_queued(true, fx);
    }

    fn answer_queued(&mut self, granted: bool, fx: &mut Vec<Effect>) {
        if let Some(q) = self.resv.queued.take() {
            fx.push(Effect::answer(
                q.token,
                Ok(granted),
                PeerReply::ScrubReserved,
            ));
        }
    }

    /// As a member: the primary's reservation `round` is over.
    pub(super) fn on_scrub_release(
        &mut self,
        from: i32,
        ctx: &RepCtx,
        round: u64,
        fx: &mut Vec<Effect>,
    ) {
        if (self.resv.queued.as_ref()).is_some_and(|q| q.primary == from && q.round <= round) {
            self.answer_queued(false, fx);
        }
        // (A release from a later interval than the slot's is for it
        // whatever its round: the primary asks no more in that interval.)
        let over = |r: &Remote| {
            r.interval < ctx.interval || (r.interval == ctx.interval && r.round <= round)
        };
        if (self.resv.remote.as_ref()).is_some_and(|r| r.primary == from && over(r)) {
            tracing::debug!(
                "pg {}: osd.{} gives back its scrub slot for osd.{from} (round {round})",
                self.id,
                self.whoami
            );
            self.resv.remote = None;
        }
    }

    /// As a member: the primary's scrub asked for a map (it is alive).
    pub(super) fn scrub_slot_seen(&mut self, from: i32) {
        let now = self.now_ms;
        if let Some(r) = self.resv.remote.as_mut().filter(|r| r.primary == from) {
            r.seen_ms = now;
        }
    }

    /// At a tick: a member's slot whose primary has been silent too long
    /// goes back.
    pub(super) fn expire_scrub_slot(&mut self) {
        let now = self.now_ms;
        if (self.resv.remote.as_ref()).is_some_and(|r| now >= r.seen_ms + REMOTE_IDLE_MS) {
            tracing::info!(
                "pg {}: its primary's scrub went quiet; slot given back",
                self.id
            );
            self.resv.remote = None;
        }
    }

    /// Scrub slots this copy was refused as primary, or refused as a
    /// member.
    pub fn scrub_slots_refused(&self) -> u64 {
        self.resv.refused
    }

    /// Whether this copy holds a scrub slot (as primary or member).
    pub fn holds_scrub_slot(&self) -> bool {
        self.resv.mine.is_some() || self.resv.remote.is_some()
    }
}
