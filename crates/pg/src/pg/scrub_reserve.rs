//! Scrub reservations (Ceph's `osd_max_scrubs`): before a primary scrubs
//! a chunk it holds a scrub slot of its own OSD and one of each acting
//! member's OSD. It takes its own, asks each member for one
//! (`PeerMsg::ScrubReserve`), and scrubs once all said yes; a member that
//! says no makes it give back what it holds (`PeerMsg::ScrubRelease`) and
//! ask again a little later. The slots go back when the scrub ends, gives
//! up or its interval ends; a member also gives its slot back at its own
//! new interval, or when the primary has said nothing for a while (a
//! release lost with its primary).
//!
//! It only counts: it must never start, stop or hold back a scrub by
//! itself (`scrub.rs` asks `scrub_reserved` before each chunk).

use super::*;
use crate::reserve::ScrubSlot;

/// Pause before a primary refused a slot asks again (ms; plus a per-PG
/// share of up to as much again, so PGs refused together do not ask
/// together).
const RESERVE_RETRY_MS: u64 = 2_000;
/// A member gives its slot back when its primary's scrub has said nothing
/// (no map asked for, no reservation renewed) for this long (ms).
const REMOTE_IDLE_MS: u64 = 60_000;
/// A primary whose members have not all answered in this long gives its
/// slots back and asks again later (ms).
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
    /// Releases sent and not answered (tid → member, round, tries).
    releasing: BTreeMap<u64, (i32, u64, u8)>,
    /// Times a member or this OSD had no slot free.
    refused: u64,
}

/// The primary's side.
struct Mine {
    /// This OSD's slot.
    _slot: ScrubSlot,
    round: u64,
    /// When the members were asked.
    asked_ms: u64,
    /// Members asked and not answered yet (tid).
    waiting: BTreeMap<i32, u64>,
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

impl Pg {
    /// Whether this primary holds its slots and every member's: a chunk
    /// may be scrubbed. If not, it asks for them (when its pause after a
    /// refusal is over).
    pub(super) fn scrub_reserved(&mut self, fx: &mut Vec<Effect>) -> bool {
        match &self.resv.mine {
            Some(m) if m.waiting.is_empty() => return true,
            Some(m) if self.now_ms >= m.asked_ms + ANSWER_TIMEOUT_MS => {
                tracing::debug!("pg {}: scrub slots asked for went unanswered", self.id);
                return self.scrub_refused(fx);
            }
            Some(_) => return false,
            None if self.now_ms < self.resv.retry_ms => return false,
            None => {}
        }
        let Some(slot) = self.scrub_slots.try_take() else {
            // (Asked again at the next step: asking this OSD costs nothing.)
            self.resv.refused += 1;
            return false;
        };
        let members: Vec<i32> = (self.map.acting.iter().copied())
            .filter(|&o| o >= 0 && o != self.whoami)
            .collect();
        self.resv.round += 1;
        let round = self.resv.round;
        let mut waiting = BTreeMap::new();
        for to in members {
            let tid = self.take_tid();
            let msg = PeerMsg::ScrubReserve {
                pg: self.id,
                from: self.whoami,
                ctx: self.rep_ctx(),
                round,
            };
            self.send(tid, to, msg, fx);
            waiting.insert(to, tid);
        }
        let none_to_ask = waiting.is_empty();
        self.resv.mine = Some(Mine {
            _slot: slot,
            round,
            asked_ms: self.now_ms,
            waiting,
            granted: BTreeSet::new(),
        });
        none_to_ask
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
        let current = (self.resv.mine.as_ref()).is_some_and(|m| m.waiting.get(&from) == Some(&tid));
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
        m.waiting.remove(&from);
        match result {
            Ok(true) => {
                m.granted.insert(from);
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
        for to in m.granted.into_iter().chain(m.waiting.into_keys()) {
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

    /// A new interval: this copy's slots go back without a word (members
    /// give theirs back at their own new interval).
    pub(super) fn scrub_slots_new_interval(&mut self) {
        self.resv.mine = None;
        self.resv.remote = None;
        self.resv.releasing.clear();
    }

    /// As a member: hold a slot for the primary's reservation `round`
    /// (whether one is).
    pub(super) fn on_scrub_reserve(
        &mut self,
        from: i32,
        ctx: &RepCtx,
        round: u64,
    ) -> Result<bool, RepError> {
        self.fence(from, ctx, "scrub reservation from")?;
        let now = self.now_ms;
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
            return Ok(true);
        }
        let Some(slot) = self.scrub_slots.try_take() else {
            self.resv.refused += 1;
            return Ok(false);
        };
        tracing::debug!(
            "pg {}: osd.{} holds a scrub slot for osd.{from} (round {round})",
            self.id,
            self.whoami
        );
        self.resv.remote = Some(Remote {
            _slot: slot,
            primary: from,
            interval: ctx.interval,
            round,
            seen_ms: now,
        });
        Ok(true)
    }

    /// As a member: the primary's reservation `round` is over.
    pub(super) fn on_scrub_release(&mut self, from: i32, ctx: &RepCtx, round: u64) {
        if (self.resv.remote.as_ref())
            .is_some_and(|r| r.primary == from && r.interval == ctx.interval && r.round <= round)
        {
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
