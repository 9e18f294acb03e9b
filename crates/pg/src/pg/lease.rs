//! Read leases, in the way of Ceph's PG read leases ("Preventing Stale
//! Reads" in Ceph's developer documentation): a primary serves client ops
//! only while every other acting member has acknowledged a lease
//! renewal it sent less than `lease_ms` ago, and a new interval's primary
//! serves nothing until every lease that an earlier interval's primary
//! may still hold has run out.
//!
//! Why that is enough: a member acknowledges renewals only from the
//! primary of its own interval (`Pg::fence`), so once a member has
//! answered a new interval's peering query it grants the old primary
//! nothing more, and the old primary, which needs every member's
//! acknowledgement, loses its lease when the last grant of that member
//! runs out. Each member remembers its grants (primary -> until when) and
//! reports what is left of them in its peering answer (`PeerInfo::leases`);
//! the new primary waits out the longest, except those of primaries that
//! answered this peering themselves (they hold the new map, so serve the
//! old interval no more). Peering always hears from a member of the
//! newest recorded write set, which every serving primary's lease
//! needed.
//!
//! A wait outlives the interval that began it: the new primary keeps the
//! leases it waits out as if it had granted them, and passes them on in
//! its renewals (`PeerMsg::Lease::prior`); its members keep them the
//! same way, and the monitors are asked to record its write set only
//! once every member has acknowledged one (`Pg::lease_told`). So a later
//! primary that hears only from the new write set (a remap onto new
//! OSDs, then another before the wait ended) still waits them out.
//!
//! Clocks: each OSD measures durations only, on its own monotonic clock
//! (its PG clock, `now_ms`); no two clocks are ever compared. Each
//! duration that crosses from one OSD to another is stretched by the
//! bound on how far two clocks' rates may differ (`CLOCK_DRIFT_PPM`,
//! `stretch`), so that a member's "until" never ends before the primary's
//! lease does in real time. An OSD that restarts forgets its grants: for
//! the first lease length after its start (`Lease::new`) it reports a
//! grant to any primary. A copy a split cuts from a parent, or a merge
//! folds into a target, takes on the old copy's grants (`Grants`).
//!
//! Pure bookkeeping: it must never send, apply or read a clock; the PG
//! (`Pg::lease_tick` and the handlers below) does that.

use super::*;

/// Default lease length (ms): Ceph's `osd_pool_default_read_lease_ratio`
/// (0.8) times the OSD's default heartbeat grace (6 s), so that a primary
/// cut off from its members has lost its lease by the time its peers
/// report it and the monitors mark it down.
pub const READ_LEASE_MS: u64 = 4_800;

/// The lease length as a share of the heartbeat grace (Ceph's
/// `osd_pool_default_read_lease_ratio`).
pub const READ_LEASE_RATIO: f64 = 0.8;

/// Bound on how far the rate of any OSD's monotonic clock may differ from
/// real time, in parts per million. Linux slews CLOCK_MONOTONIC by at
/// most 500 ppm for NTP and crystals drift by about 100: 1% holds with a
/// wide margin, and costs 1% of a lease in each stretched wait.
pub const CLOCK_DRIFT_PPM: u64 = 10_000;

/// The longest lease a member grants, whatever a primary asks for (ms).
pub const LEASE_MS_MAX: u64 = 120_000;

/// A primary renews its lease every `lease_ms / RENEWALS_PER_LEASE`.
pub const RENEWALS_PER_LEASE: u64 = 4;

/// An op waiting for a lapsed lease sends a renewal at once, but no
/// sooner than this after the last (ms).
const RENEW_AGAIN_MS: u64 = 50;

/// The primary of a grant a restarted OSD no longer remembers: any.
pub const ANY_PRIMARY: i32 = -1;

/// Grants a peering answer carries; more live ones are folded into one
/// `ANY_PRIMARY` grant (safe: longer waits only).
const REPORTED: usize = 3;

/// `ms` as measured by one clock, made long enough to cover the same
/// real time on another: ms x (1 + drift) / (1 - drift), rounded up.
pub fn stretch(ms: u64) -> u64 {
    let num = u128::from(ms) * u128::from(1_000_000 + CLOCK_DRIFT_PPM);
    let den = u128::from(1_000_000 - CLOCK_DRIFT_PPM);
    u64::try_from(num.div_ceil(den)).unwrap_or(u64::MAX)
}

/// What is left of the read leases a copy granted, as its peering answer
/// carries them: (primary, ms left on the copy's clock); a slot with
/// 0 ms left is empty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeasesLeft(pub [(i32, u64); REPORTED]);

impl LeasesLeft {
    /// The live grants: (primary, ms left).
    pub fn live(&self) -> impl Iterator<Item = (i32, u64)> + '_ {
        self.0.iter().copied().filter(|&(_, left)| left > 0)
    }
}

/// The read leases one copy may have granted (or learned of), as
/// primary -> until when on its OSD's clock: what a PG copy hands the
/// copies a split cuts from it, or a merge folds it into, on the same
/// OSD. Each of those copies serves objects the old one did, so a later
/// primary of it must wait out the same leases (as Ceph's split and
/// merge carry a PG's prior readable bound over).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grants(BTreeMap<i32, u64>);

impl Grants {
    /// Add `other`'s grants (the later end of each).
    pub fn add(&mut self, other: &Grants) {
        for (&p, &until) in &other.0 {
            let e = self.0.entry(p).or_default();
            *e = (*e).max(until);
        }
    }

    /// What a copy on an OSD whose clock read `started_ms` at its start
    /// may have granted before it and no longer remembers: a lease of
    /// `lease_ms` to any primary, until one lease after the start.
    pub fn restarted(lease_ms: u64, started_ms: u64) -> Grants {
        let until = started_ms.saturating_add(stretch(lease_ms.min(LEASE_MS_MAX)));
        Grants(BTreeMap::from([(ANY_PRIMARY, until)]))
    }

    /// Whether any grant is still live at `now_ms` (this OSD's clock).
    pub fn live(&self, now_ms: u64) -> bool {
        self.0.values().any(|&until| until > now_ms)
    }
}

/// A member's answer to a lease renewal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LeaseAnswer {
    /// Granted.
    Acked,
    /// Refused because the member holds the primary's interval over.
    Refused,
    /// Lost, or refused for another reason.
    Failed,
}

/// One copy's lease bookkeeping: as a member, what it granted; as a
/// primary, the acknowledgements that make its lease, and the earlier
/// leases it must wait out.
#[derive(Debug)]
pub(super) struct Lease {
    /// The lease this OSD asks its members for (ms).
    pub lease_ms: u64,
    /// Until when (this clock) each primary may hold a lease: those this
    /// copy granted as a member, and those it learned of (waited out as
    /// primary, or passed on by its primary).
    granted: BTreeMap<i32, u64>,
    /// As primary: renewals out, by tid, with their send times.
    out: BTreeMap<u64, u64>,
    /// As primary: per member, the send time of the newest renewal it
    /// acknowledged in this interval.
    acked: BTreeMap<i32, u64>,
    /// As primary: per member, the newest renewal (tid) it acknowledged.
    acked_tid: BTreeMap<i32, u64>,
    /// The newest renewal (tid) sent.
    last_tid: u64,
    /// As primary: per member, since when it has refused renewals as
    /// stale, acknowledging none since.
    refused_since: BTreeMap<i32, u64>,
    /// When the newest renewal went out.
    last_sent_ms: Option<u64>,
    /// As a peering primary: the grants its members reported (primary ->
    /// until, this clock), and the members that answered.
    prior: BTreeMap<i32, u64>,
    heard: BTreeSet<i32>,
    /// As a new interval's primary: nothing is served before this.
    wait_until_ms: u64,
    /// As primary: the newest renewal sent before its wait began (those
    /// after it pass the wait on).
    begun_after_tid: u64,
}

impl Lease {
    /// A copy on an OSD whose clock read `started_ms` when the OSD
    /// started: for one lease it may have granted any primary a lease
    /// before a restart, which it no longer remembers
    /// (`None`: a copy that cannot have granted anything before, as on
    /// an OSD that never ran before, or one made after the OSD started.)
    pub fn new(lease_ms: u64, started_ms: Option<u64>) -> Lease {
        let lease_ms = lease_ms.min(LEASE_MS_MAX);
        let granted = started_ms.map_or_else(BTreeMap::new, |t| Grants::restarted(lease_ms, t).0);
        Lease {
            lease_ms,
            granted,
            out: BTreeMap::new(),
            acked: BTreeMap::new(),
            acked_tid: BTreeMap::new(),
            last_tid: 0,
            refused_since: BTreeMap::new(),
            last_sent_ms: None,
            prior: BTreeMap::new(),
            heard: BTreeSet::new(),
            wait_until_ms: 0,
            begun_after_tid: 0,
        }
    }

    /// As a member: grant `primary` a lease of `lease_ms` asked for at
    /// or before `now_ms`.
    pub fn grant(&mut self, primary: i32, lease_ms: u64, now_ms: u64) {
        let until = now_ms.saturating_add(stretch(lease_ms.min(LEASE_MS_MAX)));
        self.may_hold(primary, until);
    }

    /// `primary` may hold a lease until `until` (this clock).
    fn may_hold(&mut self, primary: i32, until: u64) {
        let e = self.granted.entry(primary).or_default();
        *e = (*e).max(until);
    }

    /// As a member: its primary, asked at or before `now_ms`, waits out
    /// the leases `prior` (ms left on the primary's clock): this copy
    /// keeps them as its own grants, for the next primary to wait out.
    pub fn learn(&mut self, prior: &LeasesLeft, now_ms: u64) {
        for (p, ms) in prior.live() {
            // (A wait is at most a lease stretched at each hop; a larger
            // one is not honest, and is cut to what could be.)
            let ms = stretch(ms.min(2 * LEASE_MS_MAX));
            self.may_hold(p, now_ms.saturating_add(ms));
        }
    }

    /// Every grant this copy may still have made at `now_ms`, to hand
    /// on (see `Grants`).
    pub fn grants(&mut self, now_ms: u64) -> Grants {
        self.granted.retain(|_, until| *until > now_ms);
        Grants(self.granted.clone())
    }

    /// Take on grants `g` another copy on this OSD made (see `Grants`).
    pub fn inherit(&mut self, g: &Grants) {
        for (&p, &until) in &g.0 {
            self.may_hold(p, until);
        }
    }

    /// What is left of this copy's grants at `now_ms` (see `LeasesLeft`).
    pub fn left(&mut self, now_ms: u64) -> LeasesLeft {
        self.left_but(None, now_ms)
    }

    /// As primary `me`: the earlier leases its renewals pass on.
    pub fn passed_on(&mut self, me: i32, now_ms: u64) -> LeasesLeft {
        self.left_but(Some(me), now_ms)
    }

    /// What is left at `now_ms` of the grants to any primary but `skip`.
    fn left_but(&mut self, skip: Option<i32>, now_ms: u64) -> LeasesLeft {
        self.granted.retain(|_, until| *until > now_ms);
        let mut live: Vec<(i32, u64)> = self
            .granted
            .iter()
            .filter(|(&p, _)| Some(p) != skip)
            .map(|(&p, &until)| (p, until - now_ms))
            .collect();
        live.sort_by_key(|&(_, left)| std::cmp::Reverse(left));
        let mut out = LeasesLeft::default();
        for (i, (p, left)) in live.into_iter().enumerate() {
            if i < REPORTED - 1 {
                out.0[i] = (p, left);
            } else {
                // The rest (the longest first) as one grant to anyone.
                let last = &mut out.0[REPORTED - 1];
                *last = (ANY_PRIMARY, last.1.max(left));
            }
        }
        out
    }

    /// A new interval: this primary's lease, if it held one, is over.
    pub fn new_interval(&mut self) {
        self.out.clear();
        self.acked.clear();
        self.acked_tid.clear();
        self.refused_since.clear();
        self.last_sent_ms = None;
        self.prior.clear();
        self.heard.clear();
        self.wait_until_ms = 0;
    }

    /// Peering starts (again): what members report is gathered anew.
    pub fn peering(&mut self) {
        self.prior.clear();
        self.heard.clear();
    }

    /// As a peering primary: member `from` answered at `now_ms` with
    /// what is left of its grants.
    pub fn heard(&mut self, from: i32, left: &LeasesLeft, now_ms: u64) {
        self.heard.insert(from);
        for (p, ms) in left.live() {
            // (No honest member reports more than its longest grant.)
            let ms = ms.min(stretch(LEASE_MS_MAX));
            let e = self.prior.entry(p).or_default();
            *e = (*e).max(now_ms.saturating_add(stretch(ms)));
        }
    }

    /// Peering is over and `me` starts to serve: until when
    /// it must wait for the leases earlier primaries may still hold (its
    /// own grants and its members' reports, but those of primaries that
    /// answered). It keeps those leases as its own grants (a wait
    /// outlives the interval), and forgets those of the primaries that
    /// answered (they hold this map, so serve the old interval no more).
    pub fn begin(&mut self, me: i32) -> u64 {
        let heard = std::mem::take(&mut self.heard);
        let counts = |p: i32| p == ANY_PRIMARY || (p != me && !heard.contains(&p));
        self.granted.retain(|&p, _| counts(p) || p == me);
        for (p, until) in std::mem::take(&mut self.prior) {
            if counts(p) {
                self.may_hold(p, until);
            }
        }
        self.wait_until_ms = (self.granted.iter())
            .filter(|(&p, _)| counts(p))
            .map(|(_, &until)| until)
            .max()
            .unwrap_or(0);
        self.heard = heard;
        self.begun_after_tid = self.last_tid;
        self.wait_until_ms
    }

    /// Whether every one of `members` knows the leases this primary waits
    /// out at `now_ms`: it waits for none, or each acknowledged a renewal
    /// sent after it began (which passed them on; told by tid, as one sent
    /// in the same ms before it began did not).
    pub fn told(&self, members: impl IntoIterator<Item = i32>, now_ms: u64) -> bool {
        !self.waiting(now_ms)
            || members
                .into_iter()
                .all(|m| (self.acked_tid.get(&m)).is_some_and(|&t| t > self.begun_after_tid))
    }

    /// Whether earlier primaries' leases may still hold at `now_ms`.
    pub fn waiting(&self, now_ms: u64) -> bool {
        now_ms < self.wait_until_ms
    }

    /// Whether a renewal is due at `now_ms` (`hurry`: an op waits for
    /// the lease).
    pub fn renewal_due(&self, now_ms: u64, hurry: bool) -> bool {
        let every = if hurry {
            RENEW_AGAIN_MS
        } else {
            self.lease_ms / RENEWALS_PER_LEASE
        };
        self.last_sent_ms
            .is_none_or(|t| now_ms >= t.saturating_add(every))
    }

    /// A renewal `tid` went out at `now_ms`. (Renewals unanswered for a
    /// lease are forgotten: their answers could extend nothing.)
    pub fn sent(&mut self, tid: u64, now_ms: u64) {
        let lease_ms = self.lease_ms;
        self.out
            .retain(|_, &mut t| t.saturating_add(lease_ms) > now_ms);
        self.out.insert(tid, now_ms);
        debug_assert!(tid > self.last_tid, "renewal tids only grow");
        self.last_tid = self.last_tid.max(tid);
        self.last_sent_ms = Some(now_ms);
    }

    /// Member `from` acknowledged renewal `tid` (`false`: not one).
    pub fn acked(&mut self, tid: u64, from: i32) -> bool {
        let Some(sent) = self.out.remove(&tid) else {
            return false;
        };
        let e = self.acked.entry(from).or_default();
        *e = (*e).max(sent);
        let e = self.acked_tid.entry(from).or_default();
        *e = (*e).max(tid);
        self.refused_since.remove(&from);
        true
    }

    /// Renewal `tid` of this interval was refused at `now_ms` by member
    /// `from` because it holds the interval over: whether that member has
    /// refused renewals so for a whole lease, acknowledging none since
    /// (the primary missed a map that ended its interval, and no map to
    /// come will tell it; one member is enough, as the lease needs all).
    pub fn refused(&mut self, tid: u64, from: i32, now_ms: u64) -> bool {
        if self.out.remove(&tid).is_none() {
            return false;
        }
        let since = *self.refused_since.entry(from).or_insert(now_ms);
        now_ms.saturating_sub(since) >= self.lease_ms
    }

    /// A renewal `tid` was refused or lost.
    pub fn failed(&mut self, tid: u64) {
        self.out.remove(&tid);
    }

    /// Until when (this clock) this primary's lease holds with
    /// `members` (u64::MAX: it has none to ask).
    pub fn readable_until(&self, members: impl IntoIterator<Item = i32>) -> u64 {
        members
            .into_iter()
            .map(|m| {
                self.acked
                    .get(&m)
                    .map_or(0, |&t| t.saturating_add(self.lease_ms))
            })
            .min()
            .unwrap_or(u64::MAX)
    }
}

impl Pg {
    /// The members whose acknowledgements make this primary's lease:
    /// every other acting OSD.
    fn lease_members(&self) -> impl Iterator<Item = i32> + '_ {
        let me = self.whoami;
        self.map
            .acting
            .iter()
            .copied()
            .filter(move |&o| o >= 0 && o != me)
    }

    /// Whether this primary may serve client ops now: no earlier
    /// primary's lease may hold, and its own does.
    pub(super) fn lease_holds(&self) -> bool {
        !self.lease.waiting(self.now_ms)
            && self.now_ms < self.lease.readable_until(self.lease_members())
    }

    /// Whether this primary is in Ceph's `wait` state: peered, waiting
    /// out an earlier primary's lease.
    pub(super) fn lease_wait(&self) -> bool {
        self.lease.waiting(self.now_ms)
    }

    /// Whether this primary is in Ceph's `laggy` state: ops wait for a
    /// lease its members have not renewed.
    pub(super) fn lease_laggy(&self) -> bool {
        self.waits_for_lease()
            && !self.lease_wait()
            && self.now_ms >= self.lease.readable_until(self.lease_members())
    }

    /// Whether client ops or listings wait (for the lease among other
    /// things).
    fn waits_for_lease(&self) -> bool {
        !self.ops.waiting.is_empty() || !self.ops.lists.is_empty()
    }

    /// Whether this copy is a primary that serves (or is about to) and so
    /// keeps a lease.
    fn leads(&self) -> bool {
        self.is_primary() && matches!(self.role, Role::Primary { .. } | Role::Activating { .. })
    }

    /// Peering is over: wait out earlier primaries' leases, and ask the
    /// members for this one's.
    pub(super) fn lease_begin(&mut self, fx: &mut Vec<Effect>) {
        let until = self.lease.begin(self.whoami);
        if until > self.now_ms {
            tracing::debug!(
                "pg {}: waits {} ms for an earlier primary's read lease",
                self.id,
                until - self.now_ms
            );
        }
        self.renew_lease(fx);
    }

    /// Send every member a renewal.
    fn renew_lease(&mut self, fx: &mut Vec<Effect>) {
        let members: Vec<i32> = self.lease_members().collect();
        let now = self.now_ms;
        let prior = self.lease.passed_on(self.whoami, now);
        for to in members {
            let tid = self.take_tid();
            let msg = PeerMsg::Lease {
                pg: self.id,
                from: self.whoami,
                ctx: self.rep_ctx(),
                lease_ms: self.lease.lease_ms,
                prior,
            };
            self.send(tid, to, msg, fx);
            self.lease.sent(tid, now);
        }
        if self.lease.last_sent_ms.is_none() {
            // No member to ask: the lease holds on its own.
            self.lease.last_sent_ms = Some(now);
        }
    }

    /// At a tick, or as an op finds the lease lapsed: renew it when due,
    /// and serve what waited once it holds.
    pub(super) fn lease_tick(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if !self.leads() {
            return;
        }
        let hurry = self.waits_for_lease();
        if self.lease.renewal_due(self.now_ms, hurry) {
            self.renew_lease(fx);
        }
        if hurry && self.lease_holds() {
            self.rerun_waiting(s, fx);
        }
        self.ask_held_record(fx);
    }

    /// Whether every member knows the leases this primary waits out, so
    /// that its write set may go on record (see the module's comment).
    pub(super) fn lease_told(&self) -> bool {
        self.lease.told(self.lease_members(), self.now_ms)
    }

    /// An op waits while the PG leads: if for a lapsed lease, renew it
    /// now (no sooner than `RENEW_AGAIN_MS` after the last renewal).
    pub(super) fn lease_hurry(&mut self, fx: &mut Vec<Effect>) {
        if self.leads() && !self.lease_wait() && self.lease.renewal_due(self.now_ms, true) {
            self.renew_lease(fx);
        }
    }

    /// A member's answer to renewal `tid`.
    pub(super) fn on_lease_answer(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        from: i32,
        answer: LeaseAnswer,
        fx: &mut Vec<Effect>,
    ) {
        match answer {
            LeaseAnswer::Acked => {}
            LeaseAnswer::Failed => return self.lease.failed(tid),
            LeaseAnswer::Refused => {
                // Refused for a whole lease, this primary's interval is
                // over for its members though no map says so here (a map
                // it skipped ended it): peer again, as for a refused
                // recovery message (see `member_ended_interval`). Sooner
                // would peer again on every map that merely comes late.
                if self.lease.refused(tid, from, self.now_ms) && self.map.primary == self.whoami {
                    self.member_ended_interval(s, fx);
                }
                return;
            }
        }
        let held = self.lease_holds();
        if !self.lease.acked(tid, from) || !self.leads() {
            return;
        }
        if !held && self.lease_holds() {
            // (Ops that waited for it run now, not at the next tick.)
            self.rerun_waiting(s, fx);
        }
        self.ask_held_record(fx);
    }

    /// As a member: primary `from` renews its lease. Granted only to
    /// this copy's own interval's primary (the fence every message from a
    /// primary passes), so never to one whose interval this copy has
    /// seen end.
    pub(super) fn on_lease(
        &mut self,
        from: i32,
        ctx: &RepCtx,
        lease_ms: u64,
        prior: &LeasesLeft,
        token: u64,
        fx: &mut Vec<Effect>,
    ) {
        let result = self.fence(from, ctx, "lease renewal from");
        if result.is_ok() {
            self.lease.grant(from, lease_ms, self.now_ms);
            self.lease.learn(prior, self.now_ms);
        }
        fx.push(Effect::answer(token, result, |()| PeerReply::LeaseAck));
    }

    /// What is left of this copy's grants, for a peering answer.
    pub(super) fn leases_left(&mut self) -> LeasesLeft {
        self.lease.left(self.now_ms)
    }

    /// Set this PG's lease length, on an OSD whose clock read
    /// `started_ms` when it started (`None`: a copy that granted nothing
    /// before, such as one made after its OSD started, or a test's; see
    /// `Lease::new`).
    /// Every OSD of a cluster should use the same lease (as they share
    /// the heartbeat grace it comes from): a restarted OSD assumes it
    /// granted no longer ones. It is at most `LEASE_MS_MAX`.
    pub fn set_read_lease(&mut self, lease_ms: u64, started_ms: Option<u64>) {
        self.lease = Lease::new(lease_ms, started_ms);
    }

    /// The read leases this copy may have granted, to hand to the copies
    /// a split cuts from it or a merge folds it into on this OSD (they
    /// serve its objects: their next primary must wait those leases
    /// out).
    pub fn lease_grants(&mut self) -> Grants {
        self.lease.grants(self.now_ms)
    }

    /// Take on the read leases a copy on this OSD granted (its parent's
    /// at a split, a merge source's), as if this copy had granted them.
    pub fn inherit_lease(&mut self, g: &Grants) {
        self.lease.inherit(g);
    }

    /// Move this PG's clock to `now_ms` (never back). A host calls it as
    /// it hands the PG each input: a lease is judged by the time the op
    /// is served, not the time it was queued.
    pub fn clock(&mut self, now_ms: u64) {
        self.now_ms = self.now_ms.max(now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stretch_covers_the_drift_of_both_clocks() {
        assert_eq!(stretch(0), 0);
        // 1% each way: 1000 x 1.01 / 0.99 = 1020.2..., rounded up.
        assert_eq!(stretch(1000), 1021);
        assert_eq!(stretch(u64::MAX), u64::MAX);
    }

    #[test]
    fn a_restarted_copy_reports_a_grant_to_any_primary_for_one_lease() {
        let mut l = Lease::new(1000, Some(500));
        let left = l.left(600);
        assert_eq!(left.live().collect::<Vec<_>>(), vec![(ANY_PRIMARY, 921)]);
        assert_eq!(l.left(500 + 1021).live().count(), 0);
    }

    #[test]
    fn grants_beyond_the_reported_slots_fold_into_one_to_any_primary() {
        let mut l = Lease::new(1000, Some(0));
        for p in 1..=5 {
            l.grant(p, 100 * p as u64, 10_000);
        }
        let left: Vec<(i32, u64)> = l.left(10_000).live().collect();
        assert_eq!(left.len(), REPORTED);
        assert_eq!(left[0], (5, stretch(500)));
        assert_eq!(left[1], (4, stretch(400)));
        // 3, 2 and 1 folded: the longest of them, to anyone.
        assert_eq!(left[2], (ANY_PRIMARY, stretch(300)));
    }

    #[test]
    fn a_copy_that_inherits_grants_reports_them_and_waits_them_out() {
        let mut parent = Lease::new(1000, None);
        parent.grant(7, 1000, 5_000);
        let g = parent.grants(5_100);
        assert!(g.live(5_100));
        let mut child = Lease::new(1000, None);
        assert_eq!(child.left(5_100).live().count(), 0);
        child.inherit(&g);
        let left: Vec<_> = child.left(5_100).live().collect();
        assert_eq!(left, vec![(7, 5_000 + stretch(1000) - 5_100)]);
        // As a new primary that did not hear from osd.7, it waits too.
        child.peering();
        assert_eq!(child.begin(2), 5_000 + stretch(1000));
        // Expired grants are not handed on.
        assert!(!parent.grants(5_000 + stretch(1000)).live(0));
    }

    #[test]
    fn a_new_primary_waits_out_grants_to_primaries_that_did_not_answer() {
        let mut l = Lease::new(1000, Some(0));
        l.left(5_000); // (the start grant has run out)
        l.peering();
        let mut from_member = LeasesLeft::default();
        from_member.0[0] = (7, 800);
        from_member.0[1] = (8, 900);
        l.heard(2, &from_member, 5_000);
        // osd.8 answered this peering itself: its lease is moot.
        l.heard(8, &LeasesLeft::default(), 5_000);
        assert_eq!(l.begin(1), 5_000 + stretch(800));
        assert!(l.waiting(5_000 + stretch(800) - 1));
        assert!(!l.waiting(5_000 + stretch(800)));
    }

    #[test]
    fn a_primary_waits_out_no_grant_of_its_own() {
        let mut l = Lease::new(1000, Some(0));
        l.left(5_000);
        l.grant(1, 1000, 5_000);
        l.peering();
        assert_eq!(l.begin(1), 0);
        l.grant(3, 1000, 5_000);
        assert_eq!(l.begin(1), 5_000 + stretch(1000));
    }

    #[test]
    fn the_lease_holds_until_the_oldest_acknowledged_renewal_runs_out() {
        let mut l = Lease::new(1000, Some(0));
        assert_eq!(l.readable_until([]), u64::MAX);
        assert_eq!(l.readable_until([2, 3]), 0);
        l.sent(10, 100);
        l.sent(11, 100);
        assert!(l.acked(10, 2));
        assert_eq!(l.readable_until([2, 3]), 0, "osd.3 has not answered");
        assert!(l.acked(11, 3));
        assert_eq!(l.readable_until([2, 3]), 1_100);
        l.sent(12, 400);
        assert!(l.acked(12, 2));
        assert_eq!(l.readable_until([2, 3]), 1_100, "osd.3's is older");
        assert!(!l.acked(12, 2), "an answer counts once");
        l.new_interval();
        assert_eq!(l.readable_until([2, 3]), 0);
    }
}
