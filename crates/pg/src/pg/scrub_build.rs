//! Scrub maps built a piece at a time. A chunk of a deep scrub reads up
//! to 25 whole objects on every copy; built in one go it held the PG's
//! task (and the thread under it) for the whole read, and the primary's
//! own map was read before its members were even asked. Here the
//! primary asks its members first, and both sides read about
//! `PIECE_BYTES` per input, asking the host to come back
//! (`Effect::Continue`) for the next piece: the copies read at once, and
//! between pieces the PG and the PGs beside it serve their clients.
//!
//! It only reads: it must never write an object, and never answer a map
//! of a chunk it did not read whole.

use super::scrub_map::{MapBuild, ScrubObject, ShardOf, PIECE_BYTES};
use super::*;

/// A member's map being built for its primary.
pub(super) struct Serving {
    token: u64,
    primary: i32,
    /// This copy's interval when the map was asked for.
    interval: Epoch,
    build: MapBuild,
}

impl Pg {
    /// Ask the host to hand this PG `Input::Continue` (once, however
    /// often it is asked before it comes).
    pub(super) fn continue_later(&mut self, fx: &mut Vec<Effect>) {
        if !self.continuing {
            self.continuing = true;
            fx.push(Effect::Continue);
        }
    }

    /// `Input::Continue`: the next piece of each map being built, and the
    /// next chunk of a scrub whose pause is over.
    pub(super) fn on_continue(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        self.continuing = false;
        self.serve_scrub_piece(s, fx);
        self.own_scrub_piece(s, fx);
        self.scrub_step(s, fx);
    }

    /// One piece of `b`, as this copy (its shard, if erasure-coded); the
    /// bytes read are counted. Whether the map is whole.
    pub(super) fn scrub_piece(&mut self, s: &dyn ObjectStore, b: &mut MapBuild) -> bool {
        let pos = self.shard_of(self.whoami);
        let shard = match (&self.ec, pos) {
            (Some(striper), Some(pos)) => Some(ShardOf { pos, striper }),
            _ => None,
        };
        let before = b.bytes();
        let done = b.step(s, shard, PIECE_BYTES);
        self.scrubber.bytes += b.bytes() - before;
        done
    }

    /// Start this copy's map of (`after`, `upto`]; an erasure-coded copy
    /// must hold a shard.
    pub(super) fn start_scrub_map(
        &self,
        s: &dyn ObjectStore,
        after: &Cursor,
        upto: &Cursor,
        deep: bool,
    ) -> Result<MapBuild, String> {
        if self.ec.is_some() && self.shard_of(self.whoami).is_none() {
            return Err(format!("pg {}: this copy holds no shard", self.id));
        }
        MapBuild::start(s, self.coll, after, upto, deep).map_err(|e| format!("pg {}: {e}", self.id))
    }

    /// As a member: the primary asks for this copy's map of (`after`,
    /// `upto`] (answered to `token` once built; a map asked for before
    /// is answered no).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_scrub_map(
        &mut self,
        s: &dyn ObjectStore,
        from: i32,
        ctx: &RepCtx,
        after: &Cursor,
        upto: &Cursor,
        deep: bool,
        token: u64,
        fx: &mut Vec<Effect>,
    ) {
        let answer = |r| Effect::answer(token, r, PeerReply::ScrubMap);
        if let Err(e) = self.fence(from, ctx, "scrub from") {
            return fx.push(answer(Err(e)));
        }
        self.scrub_slot_seen(from);
        if self.map.epoch < ctx.epoch || self.behind(ctx) {
            return fx.push(answer(Err(RepError::Failed(format!(
                "pg {}: no scrub map at epoch {} (this copy is at {})",
                self.id, ctx.epoch, self.map.epoch
            )))));
        }
        if let Some(old) = self.scrubber.serving.take() {
            let why = format!("pg {}: a newer scrub map was asked for", self.id);
            fx.push(Effect::answer(
                old.token,
                Err(RepError::Stale(why)),
                PeerReply::ScrubMap,
            ));
        }
        match self.start_scrub_map(s, after, upto, deep) {
            Ok(build) => {
                self.scrubber.serving = Some(Serving {
                    token,
                    primary: from,
                    interval: self.map.interval,
                    build,
                });
                self.continue_later(fx);
            }
            Err(e) => fx.push(answer(Err(RepError::Failed(e)))),
        }
    }

    /// As a member: the next piece of the map being built, answered once
    /// whole (or refused once its interval is over).
    fn serve_scrub_piece(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let Some(mut sv) = self.scrubber.serving.take() else {
            return;
        };
        if sv.interval != self.map.interval {
            let why = format!("pg {}: the scrub's interval is over", self.id);
            let r: Result<Vec<ScrubObject>, _> = Err(RepError::Stale(why));
            return fx.push(Effect::answer(sv.token, r, PeerReply::ScrubMap));
        }
        self.scrub_slot_seen(sv.primary);
        if !self.scrub_piece(s, &mut sv.build) {
            self.scrubber.serving = Some(sv);
            return self.continue_later(fx);
        }
        let (map, _) = sv.build.finish();
        fx.push(Effect::answer(sv.token, Ok(map), PeerReply::ScrubMap));
    }
}
