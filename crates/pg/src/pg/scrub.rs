//! Scrubs as a replicated primary runs them: a scrub (or deep scrub) asked
//! for by the operator or due by the schedule walks the PG in chunks of
//! objects, in the store's (hash, name) order. For each chunk it holds
//! back new writes to the chunk's objects, waits for those in flight, has
//! every acting member build its map of the chunk (`scrub_map`), compares
//! them (an erasure-coded deep scrub then checks parity where no shard
//! hash is kept: `scrub_parity`), and lets the writes go. A scrub runs only on a clean PG; a new
//! interval starts the current chunk again. A repair then writes the
//! authoritative copy over each bad one: the primary's own through a
//! mend (`mend.rs`), each member's by a `Repair` message.
//!
//! It must never compare a chunk while a write to one of its objects is
//! in flight, nor repair an object that changed since it was compared
//! (the version the comparison found must still be the primary's).

use super::scrub_map::{self, Inconsistent, MapBuild, ScrubObject};
use super::scrub_parity::{ParityCheck, ParityStep};
use super::*;
use bytes::Bytes;
use loligo_types::scrub::{PgCommand, PgCommandReply};

/// The record holding this copy's last scrub stamps as primary.
pub const SCRUB_KEY: &[u8] = b"scrub";

/// Objects per scrub chunk (Ceph's `osd_scrub_chunk_max` is 25).
pub const CHUNK_OBJECTS: usize = 25;
/// Most bytes of data (this copy's) a chunk holds, but its first
/// object's: a chunk of large objects read under client load (a pause
/// after each piece) stays well inside `CHUNK_TIMEOUT_MS`, and holds
/// writes back no longer.
pub const CHUNK_BYTES: u64 = 128 << 20;
/// Default pause between chunks (ms; Ceph's `osd_scrub_sleep`).
pub const SCRUB_SLEEP_MS: u64 = 0;
/// Pause before a chunk whose member failed to answer is tried again.
const CHUNK_RETRY_MS: u64 = 1_000;
/// Longest a chunk may hold writes back waiting for the maps and its
/// parity checks (ms): then it lets them go and is tried again.
const CHUNK_TIMEOUT_MS: u64 = 30_000;
/// Times one chunk may fail before the scrub gives up (it is asked for
/// again by the schedule or the operator).
const CHUNK_TRIES_MAX: u32 = 5;
/// Times a repair is sent to members that failed to take it.
const REPAIR_TRIES: u32 = 3;

/// When scrubs come due on their own (ms; 0: never), as Ceph's
/// `osd_scrub_min_interval`, `osd_scrub_max_interval` and
/// `osd_deep_scrub_interval`: a PG is scrubbed once `min_interval` (plus
/// a per-PG share of up to half of it, so PGs do not all start at once)
/// has passed since its last scrub while the OSD's load is under its
/// threshold, and once `max_interval` has passed whatever the load; it
/// is deep-scrubbed once `deep_interval` (plus its share) has passed
/// since its last deep scrub. A primary that never scrubbed counts from
/// when it first looked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScrubSchedule {
    pub min_interval_ms: u64,
    pub max_interval_ms: u64,
    pub deep_interval_ms: u64,
}

const DAY_MS: u64 = 86_400_000;

impl Default for ScrubSchedule {
    fn default() -> ScrubSchedule {
        ScrubSchedule {
            min_interval_ms: DAY_MS,
            max_interval_ms: 7 * DAY_MS,
            deep_interval_ms: 7 * DAY_MS,
        }
    }
}

impl ScrubSchedule {
    /// The scrub due at `now` for a PG last scrubbed at `last` and deep-
    /// scrubbed at `last_deep` (ms), whose share of the spread is `seed`
    /// (any number: its own hash), with the OSD's load under its
    /// threshold or not (`None`: nothing due).
    pub fn due(
        &self,
        now: u64,
        last: u64,
        last_deep: u64,
        seed: u64,
        load_ok: bool,
    ) -> Option<ScrubKind> {
        let share = |interval: u64| seed % (interval / 2 + 1);
        let past = |since: u64, interval: u64| {
            interval > 0
                && now
                    >= since
                        .saturating_add(interval)
                        .saturating_add(share(interval))
        };
        let deep = past(last_deep, self.deep_interval_ms);
        let forced = self.max_interval_ms > 0 && now >= last.saturating_add(self.max_interval_ms);
        let due = load_ok && past(last, self.min_interval_ms);
        (deep || forced || due).then_some(ScrubKind {
            deep,
            repair: false,
        })
    }
}

/// The cluster's flags that hold scrubs back (`osd set noscrub`, `osd
/// set nodeep-scrub`): they stop scheduled scrubs only, never one the
/// operator asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScrubFlags {
    pub no_scrub: bool,
    pub no_deep_scrub: bool,
}

impl ScrubFlags {
    /// Whether a scheduled scrub of `kind` may run.
    pub fn allow(self, kind: ScrubKind) -> bool {
        if kind.deep {
            !self.no_deep_scrub
        } else {
            !self.no_scrub
        }
    }

    /// `schedule` with what the flags stop taken out.
    fn limit(self, mut schedule: ScrubSchedule) -> ScrubSchedule {
        if self.no_scrub {
            schedule.min_interval_ms = 0;
            schedule.max_interval_ms = 0;
        }
        if self.no_deep_scrub {
            schedule.deep_interval_ms = 0;
        }
        schedule
    }
}

/// What a scrub reads and does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrubKind {
    /// Read every byte of every copy (data and omap).
    pub deep: bool,
    /// Write the authoritative copy over the bad ones afterwards.
    pub repair: bool,
}

/// A primary's scrubs: the one asked for, the one running, and what the
/// last one found.
#[derive(Default)]
pub(super) struct Scrubber {
    /// Asked for and not started yet.
    want: Option<ScrubKind>,
    /// The schedule asked for `want` (the operator did not).
    want_scheduled: bool,
    job: Option<Job>,
    /// Objects whose queue (`ops.busy`) starts with a write held back
    /// while their chunk is compared: ops behind it keep their order.
    blocked: Vec<String>,
    /// What the last complete scrub found, by object (repairs remove
    /// what they mend).
    pub found: BTreeMap<String, Inconsistent>,
    /// When the last scrub and the last deep scrub ended (wall clock:
    /// see `Pg::wall_now`), kept in the `scrub` record.
    pub last_ms: Option<u64>,
    pub last_deep_ms: Option<u64>,
    /// The `scrub` record was read.
    loaded: bool,
    /// Bytes deep scrubs read on this copy, and objects compared.
    pub bytes: u64,
    pub objects: u64,
    /// Objects repaired.
    pub repaired: u64,
    /// Erasure-coded objects whose shards a client op read around (their
    /// data failed its checksum) and that were rebuilt after.
    pub read_repairs: u64,
    /// Erasure-coded objects whose parity was checked against their data.
    pub parity_checked: u64,
    /// Scrubs this copy ended as primary, and of those asked, how many
    /// its schedule asked for.
    pub done: u64,
    pub scheduled: u64,
    /// Deep scrubs (and repairs) this copy ended as primary.
    pub deep_done: u64,
    /// Repairs in flight: object -> members still to acknowledge (tids).
    pub(super) repairing: BTreeMap<String, BTreeMap<u64, i32>>,
    /// Objects a member failed to take this round's repair of, and the
    /// rounds each object's repair has had so far.
    repair_failed: BTreeSet<String>,
    pub(super) repair_rounds: BTreeMap<String, u32>,
    /// When this copy first looked at its schedule (wall clock; the base
    /// for scrubs it never made).
    since_ms: Option<u64>,
    /// As a member: the map its primary asked for, being built.
    pub(super) serving: Option<super::scrub_build::Serving>,
}

struct Job {
    kind: ScrubKind,
    /// The schedule asked for it (the flags may stop it).
    scheduled: bool,
    /// Every object up to here is compared.
    after: Cursor,
    step: Step,
    found: BTreeMap<String, Inconsistent>,
    /// Times the current chunk failed.
    tries: u32,
}

enum Step {
    /// The next chunk starts at this time.
    Idle { at_ms: u64 },
    /// Writes are held back from (after, upto] since `since_ms`; those in
    /// flight end first.
    Draining { upto: Cursor, since_ms: u64 },
    /// Maps asked for: members still to answer (tid), maps so far, this
    /// copy's own while it is being built.
    Asked {
        upto: Cursor,
        since_ms: u64,
        waiting: BTreeMap<i32, u64>,
        maps: BTreeMap<i32, Vec<ScrubObject>>,
        own: Option<MapBuild>,
    },
    /// The maps are compared (`objects` of them); an erasure-coded deep
    /// scrub checks the parity of the objects whose shards keep no hash
    /// (`scrub_parity.rs`), the writes still held (since `since_ms`).
    Parity {
        upto: Cursor,
        since_ms: u64,
        objects: u64,
        check: ParityCheck,
    },
}

impl Scrubber {
    /// Whether a write to `o` waits for the chunk being compared.
    fn blocks(&self, after: &Cursor, o: &ObjectId) -> bool {
        match self.job.as_ref().map(|j| &j.step) {
            Some(
                Step::Draining { upto, .. } | Step::Asked { upto, .. } | Step::Parity { upto, .. },
            ) => !after.covers(o) && upto.covers(o),
            _ => false,
        }
    }

    /// Whether a scrub is running, and whether it is deep.
    pub fn running(&self) -> Option<bool> {
        self.job.as_ref().map(|j| j.kind.deep)
    }

    /// Errors the last scrub found that are not repaired.
    pub fn errors(&self) -> usize {
        self.found.len()
    }
}

impl Pg {
    /// Ask for a scrub of this PG (the operator's `pg scrub`, `pg
    /// deep-scrub`, `pg repair`): it starts once the PG is clean. `false`
    /// if this copy is not the PG's replicated primary.
    pub fn request_scrub(&mut self, kind: ScrubKind) -> bool {
        if !self.is_primary() {
            return false;
        }
        let w = self.scrubber.want.get_or_insert(kind);
        w.deep |= kind.deep;
        w.repair |= kind.repair;
        self.scrubber.want_scheduled = false;
        true
    }

    /// When the last scrub and the last deep scrub ended (see
    /// [`Pg::wall_now`]).
    pub fn scrub_stamps(&self) -> (Option<u64>, Option<u64>) {
        (self.scrubber.last_ms, self.scrubber.last_deep_ms)
    }

    /// Scrubs this copy ended as primary, and scrubs its schedule asked
    /// for.
    pub fn scrub_counts(&self) -> (u64, u64) {
        (self.scrubber.done, self.scrubber.scheduled)
    }

    /// Deep scrubs (repairs among them) this copy ended as primary.
    pub fn deep_scrubs_done(&self) -> u64 {
        self.scrubber.deep_done
    }

    /// Copies written over bad ones: by repairs, and by reads that found
    /// this copy damaged.
    pub fn repaired(&self) -> u64 {
        self.scrubber.repaired + self.mend.mended
    }

    /// Erasure-coded objects whose damaged shards a client read went
    /// around and this primary then rebuilt (started).
    pub fn read_repairs(&self) -> u64 {
        self.scrubber.read_repairs
    }

    /// Erasure-coded objects whose parity deep scrubs checked against
    /// their data (as primary; those whose shards keep no hash).
    pub fn parity_checked(&self) -> u64 {
        self.scrubber.parity_checked
    }

    /// The objects the last scrub found inconsistent.
    pub fn inconsistent(&self) -> Vec<Inconsistent> {
        self.scrubber.found.values().cloned().collect()
    }

    /// An operator's command: refused unless this copy is the PG's
    /// replicated primary.
    pub(super) fn command(&mut self, cmd: PgCommand) -> CommandResult {
        if !self.is_primary() {
            return Err(OpError::WrongPrimary {
                epoch: self.map.epoch,
            });
        }
        match cmd {
            PgCommand::Scrub { deep, repair } => {
                self.request_scrub(ScrubKind { deep, repair });
                Ok(PgCommandReply::Queued)
            }
            PgCommand::ListInconsistent => Ok(PgCommandReply::Inconsistent(self.inconsistent())),
        }
    }

    /// Whether client write `p` must wait for the chunk being compared
    /// (it is then held).
    pub(super) fn scrub_holds(&mut self, p: Pending) -> Option<Pending> {
        let Some(job) = &self.scrubber.job else {
            return Some(p);
        };
        if !self.scrubber.blocks(&job.after, &recovery::oid(&p.op.name)) {
            return Some(p);
        }
        debug_assert!(
            !self.ops.busy.contains_key(&p.op.name),
            "an op on a busy object queues behind it before it gets here"
        );
        self.scrubber.blocked.push(p.op.name.clone());
        self.ops
            .busy
            .entry(p.op.name.clone())
            .or_default()
            .push_back(p);
        None
    }

    /// A new interval: the chunk being compared starts again (the held
    /// writes go back to the PG's queue with every busy object's ops);
    /// a copy no longer primary drops its scrubs and what they found.
    pub(super) fn scrub_new_interval(&mut self, fx: &mut Vec<Effect>) {
        let primary = self.is_primary();
        let sc = &mut self.scrubber;
        if let Some(j) = &mut sc.job {
            j.step = Step::Idle { at_ms: 0 };
        }
        sc.repairing.clear();
        sc.repair_failed.clear();
        sc.repair_rounds.clear();
        sc.blocked.clear();
        self.scrub_slots_new_interval(fx);
        let sc = &mut self.scrubber;
        if !primary {
            sc.job = None;
            sc.want = None;
            sc.found.clear();
        }
    }

    /// The wall clock (Unix ms) as this PG knows it: its own clock from
    /// the host's base (the clock alone where the host gave none).
    pub fn wall_now(&self) -> u64 {
        self.clock_base_unix_ms + self.now_ms
    }

    /// Stamps `(last, deep)` with any past this copy's clock taken as its
    /// now: stamped by a clock ahead, they would hold the schedule back
    /// until this clock caught up (and each scrub's stamp follows the
    /// last one up). Without a wall clock (a base of 0) they stand.
    fn not_ahead(&self, (last, deep): (u64, u64)) -> (u64, u64) {
        if self.clock_base_unix_ms == 0 {
            return (last, deep);
        }
        let now = self.wall_now();
        if last > now || deep > now {
            tracing::warn!(
                "pg {}: scrub stamps ({last}, {deep}) are ahead of this clock ({now}): taken as now",
                self.id
            );
        }
        (last.min(now), deep.min(now))
    }

    /// Read the `scrub` record once: stamps outlive the process.
    fn load_scrub_stamps(&mut self, s: &dyn ObjectStore) {
        if std::mem::replace(&mut self.scrubber.loaded, true) {
            return;
        }
        let stored = s.record(self.coll, SCRUB_KEY).map_err(|e| e.to_string());
        match stored.and_then(|b| {
            b.map(|b| record::decode_scrub_stamps(&b))
                .transpose()
                .map_err(|e| e.to_string())
        }) {
            Ok(Some((last, deep))) => {
                let (last, deep) = self.not_ahead((last, deep));
                let sc = &mut self.scrubber;
                sc.last_ms = sc.last_ms.max((last > 0).then_some(last));
                sc.last_deep_ms = sc.last_deep_ms.max((deep > 0).then_some(deep));
            }
            Ok(None) => {}
            // (Scrubs then count from now: nothing is lost but timing.)
            Err(e) => tracing::warn!("pg {}: its scrub stamps: {e}", self.id),
        }
    }

    /// As a member: the primary's stamps (`(last, deep)`, Unix ms; 0:
    /// never), kept in this copy's `scrub` record when newer than its
    /// own, so a primary that takes over here goes on from them.
    pub(super) fn keep_scrub_stamps(
        &mut self,
        s: &dyn ObjectStore,
        (last, deep): (u64, u64),
        fx: &mut Vec<Effect>,
    ) {
        self.load_scrub_stamps(s);
        let (last, deep) = self.not_ahead((last, deep));
        let sc = &mut self.scrubber;
        let newer = |mine: Option<u64>, theirs: u64| theirs > 0 && mine.is_none_or(|m| theirs > m);
        if !newer(sc.last_ms, last) && !newer(sc.last_deep_ms, deep) {
            return;
        }
        sc.last_ms = sc.last_ms.max((last > 0).then_some(last));
        sc.last_deep_ms = sc.last_deep_ms.max((deep > 0).then_some(deep));
        self.persist_scrub_stamps(fx);
    }

    /// Write this copy's stamps to its `scrub` record.
    fn persist_scrub_stamps(&mut self, fx: &mut Vec<Effect>) {
        let sc = &self.scrubber;
        let mut t = Transaction::new();
        let stamps = (sc.last_ms.unwrap_or(0), sc.last_deep_ms.unwrap_or(0));
        t.set_record(
            self.coll,
            SCRUB_KEY,
            record::encode_scrub_stamps(stamps.0, stamps.1),
        );
        self.apply_own(t, false, fx);
    }

    /// Ask for the scrub the schedule says is due, if any.
    fn scrub_when_due(&mut self) {
        let now = self.wall_now();
        let sc = &mut self.scrubber;
        if sc.want.is_some() || sc.job.is_some() {
            return;
        }
        let base = *sc.since_ms.get_or_insert(now);
        let seed =
            (u64::from(self.id.ps) ^ (self.id.pool << 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        sc.want = self.scrub_flags.limit(self.scrub_schedule).due(
            now,
            sc.last_ms.unwrap_or(base),
            sc.last_deep_ms.unwrap_or(base),
            seed >> 16,
            self.scrub_load_ok,
        );
        sc.want_scheduled = sc.want.is_some();
        sc.scheduled += u64::from(sc.want.is_some());
    }

    /// Move the scrub on as far as it can go now.
    pub(super) fn scrub_step(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if !matches!(self.role, Role::Primary { .. }) {
            return;
        }
        self.load_scrub_stamps(s);
        self.scrub_when_due();
        if !self.is_clean() {
            // (Held back until clean: the slots go to other PGs meanwhile,
            // and are asked for again before the next chunk.)
            self.release_scrub_slots(fx);
        }
        if self.scrubber.job.is_none() {
            if self.scrubber.want.is_none() || !self.is_clean() || !self.scrub_reserved(fx) {
                return;
            }
            let kind = self.scrubber.want.take().unwrap_or_default();
            tracing::info!("pg {}: {} starts", self.id, scrub_name(kind));
            self.scrubber.job = Some(Job {
                kind,
                scheduled: self.scrubber.want_scheduled,
                after: Cursor::Start,
                step: Step::Idle { at_ms: 0 },
                found: BTreeMap::new(),
                tries: 0,
            });
        }
        let clean = self.is_clean();
        let now = self.now_ms;
        let Some(job) = &mut self.scrubber.job else {
            return;
        };
        if let Step::Draining { since_ms, .. }
        | Step::Asked { since_ms, .. }
        | Step::Parity { since_ms, .. } = job.step
        {
            if now >= since_ms + CHUNK_TIMEOUT_MS {
                tracing::warn!("pg {}: a scrub chunk timed out", self.id);
                return self.scrub_chunk_failed(s, fx);
            }
        }
        if let Step::Idle { at_ms } = job.step {
            if self.now_ms < at_ms || !clean {
                return;
            }
            if job.scheduled && !self.scrub_flags.allow(job.kind) {
                // (Between chunks: no write is held.)
                tracing::info!(
                    "pg {}: scheduled {} stops: a flag holds it back",
                    self.id,
                    scrub_name(job.kind)
                );
                self.scrubber.job = None;
                return self.release_scrub_slots(fx);
            }
            // (Slots given back at a new interval are asked for again.)
            if !self.scrub_reserved(fx) {
                return;
            }
            let Some(job) = &mut self.scrubber.job else {
                return;
            };
            let listed =
                match backfill::scan(s, self.coll, &job.after, &Cursor::End, CHUNK_OBJECTS, None) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::error!("pg {}: scrub cannot list its objects: {e}", self.id);
                        job.step = Step::Idle {
                            at_ms: self.now_ms + CHUNK_RETRY_MS,
                        };
                        return;
                    }
                };
            job.step = Step::Draining {
                upto: chunk_end(s, self.coll, listed, CHUNK_BYTES),
                since_ms: now,
            };
        }
        self.scrub_ask(s, fx);
    }

    /// Draining: once no write to the chunk is in flight, build this
    /// copy's map and ask the members for theirs.
    fn scrub_ask(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let Some(job) = &self.scrubber.job else {
            return;
        };
        let Step::Draining { upto, since_ms } = &job.step else {
            return;
        };
        let (after, upto, deep) = (job.after.clone(), upto.clone(), job.kind.deep);
        let since_ms = *since_ms;
        let in_range = |name: &str| {
            let o = recovery::oid(name);
            !after.covers(&o) && upto.covers(&o)
        };
        // (Writes, mends and repairs in flight all change copies.)
        let changing = self.ops.inflight.values().any(|f| in_range(&f.name))
            || self.ec_writes_gathering(in_range)
            || self.mend.changing().any(in_range)
            || self.scrubber.repairing.keys().any(|n| in_range(n));
        if changing {
            return;
        }
        let own = match self.start_scrub_map(s, &after, &upto, deep) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!("pg {}: scrub cannot list its objects: {e}", self.id);
                return self.scrub_chunk_failed(s, fx);
            }
        };
        // (The members are asked first: they read while this copy does.)
        let members: Vec<i32> = (self.map.acting.iter().copied())
            .filter(|&o| o >= 0 && o != self.whoami)
            .collect();
        let mut waiting = BTreeMap::new();
        for to in members {
            let tid = self.take_tid();
            let msg = PeerMsg::ScrubMap {
                pg: self.id,
                from: self.whoami,
                ctx: self.rep_ctx(),
                after: after.clone(),
                upto: upto.clone(),
                deep,
            };
            self.send(tid, to, msg, fx);
            waiting.insert(to, tid);
        }
        if let Some(job) = &mut self.scrubber.job {
            job.step = Step::Asked {
                upto,
                since_ms,
                waiting,
                maps: BTreeMap::new(),
                own: Some(own),
            };
        }
        self.continue_later(fx);
    }

    /// The next piece of this copy's own map of the chunk; compared once
    /// whole (and every member's is in).
    pub(super) fn own_scrub_piece(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let Some(Job {
            step: Step::Asked { own, .. },
            ..
        }) = &mut self.scrubber.job
        else {
            return;
        };
        let Some(mut b) = own.take() else {
            return;
        };
        let done = self.scrub_piece(s, &mut b);
        let me = self.whoami;
        let Some(Job {
            step: Step::Asked { own, maps, .. },
            ..
        }) = &mut self.scrubber.job
        else {
            return;
        };
        if !done {
            *own = Some(b);
            return self.continue_later(fx);
        }
        maps.insert(me, b.finish().0);
        self.scrub_compare(s, fx);
    }

    /// A member's map of the chunk (`false`: `tid` asked for none).
    pub(super) fn on_scrub_map_done(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        from: i32,
        result: Result<Vec<ScrubObject>, RepError>,
        fx: &mut Vec<Effect>,
    ) {
        let Some(Job {
            step: Step::Asked { waiting, maps, .. },
            ..
        }) = &mut self.scrubber.job
        else {
            return;
        };
        if waiting.get(&from) != Some(&tid) {
            return;
        }
        waiting.remove(&from);
        match result {
            Ok(m) => {
                maps.insert(from, m);
                self.scrub_compare(s, fx);
            }
            Err(e) => {
                tracing::warn!("pg {}: osd.{from} built no scrub map: {e:?}", self.id);
                self.scrub_chunk_failed(s, fx);
            }
        }
    }

    /// Every map is in: compare them, check the parity where it must be
    /// (erasure-coded deep scrubs), then let the held writes go and go on
    /// to the next chunk (or end the scrub).
    fn scrub_compare(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let Some(Job {
            step: Step::Asked {
                waiting, maps, own, ..
            },
            ..
        }) = &self.scrubber.job
        else {
            return;
        };
        if !waiting.is_empty() || own.is_some() {
            return;
        }
        let unvouched = scrub_map::unvouched(self.whoami, maps);
        let logged = if unvouched.is_empty() {
            scrub_map::Logged::new()
        } else {
            logged(&self.own_log(s), &unvouched)
        };
        let found = match self.ec {
            Some(_) => scrub_map::compare_shards(self.whoami, maps, &logged),
            None => scrub_map::compare(self.whoami, maps, &logged),
        };
        let mut parity = match (&self.ec, &self.scrubber.job) {
            (Some(_), Some(j)) if j.kind.deep => {
                let named: BTreeSet<String> = found.iter().map(|i| i.name.clone()).collect();
                let no_hash = |n: &str| self.shard_keeps_no_hash(s, n);
                ParityCheck::of_chunk(self.whoami, maps, &named, no_hash)
            }
            _ => ParityCheck::default(),
        };
        let Some(job) = &mut self.scrubber.job else {
            return;
        };
        let Step::Asked {
            upto,
            maps,
            since_ms,
            ..
        } = &mut job.step
        else {
            return;
        };
        let objects = maps.get(&self.whoami).map_or(0, |m| m.len() as u64);
        let (upto, since_ms) = (std::mem::take(upto), *since_ms);
        if parity.done() {
            return self.scrub_chunk_done(s, upto, found, objects, fx);
        }
        // (What the comparison found waits with the parity checks: a
        // chunk that fails is compared again.)
        parity.found = found;
        job.step = Step::Parity {
            upto,
            since_ms,
            objects,
            check: ParityCheck::default(),
        };
        self.scrub_parity(s, parity, fx)
    }

    /// Go on with the chunk's parity checks as far as they go now.
    fn scrub_parity(&mut self, s: &dyn ObjectStore, pc: ParityCheck, fx: &mut Vec<Effect>) {
        let step = self.parity_next(s, pc, fx);
        let Some(job) = &mut self.scrubber.job else {
            return;
        };
        let Step::Parity {
            upto,
            objects,
            check,
            ..
        } = &mut job.step
        else {
            return;
        };
        match step {
            ParityStep::Waiting(pc) => *check = *pc,
            ParityStep::Done(found) => {
                let (upto, objects) = (std::mem::take(upto), *objects);
                self.scrub_chunk_done(s, upto, found, objects, fx)
            }
            ParityStep::Failed(why) => {
                tracing::warn!("pg {}: a parity check failed: {why}", self.id);
                self.scrub_chunk_failed(s, fx)
            }
        }
    }

    /// A shard read for a parity check is answered (nothing: `tid` is no
    /// parity check's).
    pub(super) fn on_parity_read(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        from: i32,
        pos: usize,
        result: Result<Vec<Bytes>, RepError>,
        fx: &mut Vec<Effect>,
    ) {
        let Some(Job {
            step: Step::Parity { check, .. },
            ..
        }) = &mut self.scrubber.job
        else {
            return;
        };
        match check.answer(tid, from, pos, result) {
            None => {}
            Some(Err(why)) => {
                tracing::warn!("pg {}: a parity check failed: {why}", self.id);
                self.scrub_chunk_failed(s, fx)
            }
            Some(Ok(())) => {
                let pc = std::mem::take(check);
                self.scrub_parity(s, pc, fx)
            }
        }
    }

    /// The chunk up to `upto` is compared (its `objects`; what was wrong:
    /// `found`): let the held writes go, and go on to the next chunk (or
    /// end the scrub).
    fn scrub_chunk_done(
        &mut self,
        s: &dyn ObjectStore,
        upto: Cursor,
        found: Vec<Inconsistent>,
        objects: u64,
        fx: &mut Vec<Effect>,
    ) {
        self.scrubber.objects += objects;
        let Some(job) = &mut self.scrubber.job else {
            return;
        };
        for i in found {
            tracing::error!(
                "pg {}: {} {}: {:?} (authoritative: {:?} by {})",
                self.id,
                scrub_name(job.kind),
                i.name,
                i.bad,
                i.auth,
                i.rule.name()
            );
            job.found.insert(i.name.clone(), i);
        }
        job.after = upto;
        job.tries = 0;
        job.step = Step::Idle {
            at_ms: self.now_ms + self.scrub_sleep_ms,
        };
        let done = job.after == Cursor::End;
        self.scrub_release(s, fx);
        if done {
            self.scrub_end(s, fx);
        }
    }

    /// A member could not give its map (or the chunk timed out): the
    /// chunk is tried again later, a few times, then the scrub gives up.
    fn scrub_chunk_failed(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if let Some(job) = &mut self.scrubber.job {
            job.tries += 1;
            job.step = Step::Idle {
                at_ms: self.now_ms + CHUNK_RETRY_MS,
            };
            if job.tries >= CHUNK_TRIES_MAX {
                tracing::error!(
                    "pg {}: {} gives up: a chunk failed {} times",
                    self.id,
                    scrub_name(job.kind),
                    job.tries
                );
                self.scrubber.job = None;
                self.release_scrub_slots(fx);
            }
        }
        self.scrub_release(s, fx);
    }

    /// The writes held back for a chunk run (with the ops behind them).
    fn scrub_release(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        for name in std::mem::take(&mut self.scrubber.blocked) {
            self.release(s, &name, fx);
        }
    }

    fn scrub_end(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let Some(job) = self.scrubber.job.take() else {
            return;
        };
        // (Each stamp after the last: a scrub may end within the same
        // tick as the one before, and stamps tell scrubs apart.)
        let last = self.scrubber.last_ms.max(self.scrubber.last_deep_ms);
        let now = self.wall_now().max(last.map_or(0, |l| l + 1));
        let sc = &mut self.scrubber;
        sc.done += 1;
        sc.last_ms = Some(now);
        if job.kind.deep {
            sc.last_deep_ms = Some(now);
            sc.deep_done += 1;
        }
        self.persist_scrub_stamps(fx);
        // (The members keep the new stamps from the release.)
        self.release_scrub_slots(fx);
        let sc = &mut self.scrubber;
        tracing::info!(
            "pg {}: {} ends: {} inconsistent objects",
            self.id,
            scrub_name(job.kind),
            job.found.len()
        );
        sc.found = job.found;
        // (Ceph's osd_scrub_auto_repair: a few errors a scheduled deep
        // scrub found are repaired as if asked.)
        let auto = job.scheduled
            && job.kind.deep
            && self
                .scrub_auto_repair
                .is_some_and(|most| sc.found.len() <= most);
        if auto && !sc.found.is_empty() {
            tracing::warn!(
                "pg {}: repairing the {} inconsistent objects the deep scrub found",
                self.id,
                sc.found.len()
            );
        }
        if job.kind.repair || auto {
            let names: Vec<String> = sc.found.keys().cloned().collect();
            for name in names {
                self.repair_object(s, name, fx);
            }
        }
    }

    /// Write the authoritative copy of `name` over its bad copies: this
    /// copy's own is mended first (from an authoritative member), then
    /// each member's is pushed; an object the log removed is removed from
    /// the members still holding it. An object in use or changed since
    /// it was compared is left for the next repair.
    fn repair_object(&mut self, s: &dyn ObjectStore, name: String, fx: &mut Vec<Effect>) {
        if self.ec.is_some() {
            return self.ec_repair_object(s, name, fx);
        }
        let Some(i) = self.scrubber.found.get(&name) else {
            return;
        };
        let removed = i.rule == scrub_map::AuthRule::Removed;
        if (i.auth.is_empty() && !removed) || self.ops.busy.contains_key(&name) {
            tracing::warn!(
                "pg {}: cannot repair {name} now (no good copy, or in use)",
                self.id
            );
            return;
        }
        let (version, auth) = (i.version, i.auth.clone());
        let stored = recovery::stored_version(s, self.coll, &recovery::oid(&name));
        if i.bad.contains_key(&self.whoami) {
            // (Missing here, or held at the version compared; a removed
            // object's unreadable copy here is left for a removal.)
            if removed
                || !matches!(stored, Ok(None))
                    && !matches!(stored, Ok(Some(Some(v))) if v == version)
            {
                tracing::warn!("pg {}: {name} changed since it was scrubbed", self.id);
                return;
            }
            self.ops.busy.insert(name.clone(), VecDeque::new());
            return self.mend_from(s, name, version, auth, true, fx);
        }
        let push = match recovery::read_copy(s, self.coll, &name) {
            Ok(p) if removed && p.copy.is_none() => p,
            Ok(p) if !removed && p.version == version && p.copy.is_some() => p,
            other => {
                tracing::warn!(
                    "pg {}: {name} changed since it was scrubbed: {other:?}",
                    self.id
                );
                return;
            }
        };
        let bad: Vec<i32> = i.bad.keys().copied().collect();
        debug_assert!(!bad.contains(&self.whoami));
        let mut waiting = BTreeMap::new();
        for to in bad {
            let tid = self.take_tid();
            let msg = PeerMsg::Repair {
                pg: self.id,
                from: self.whoami,
                ctx: self.rep_ctx(),
                push: push.clone(),
            };
            self.send(tid, to, msg, fx);
            waiting.insert(tid, to);
        }
        self.ops.busy.insert(name.clone(), VecDeque::new());
        self.scrubber.repairing.insert(name, waiting);
    }

    /// A member's answer to a repair push.
    pub(super) fn on_repair_done(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        from: i32,
        result: Result<(), RepError>,
        fx: &mut Vec<Effect>,
    ) {
        let Some((name, waiting)) =
            (self.scrubber.repairing.iter_mut()).find(|(_, w)| w.get(&tid) == Some(&from))
        else {
            return;
        };
        waiting.remove(&tid);
        let (name, left) = (name.clone(), waiting.len());
        match result {
            Ok(()) => self.copy_repaired(&name, from),
            Err(e) => {
                tracing::warn!(
                    "pg {}: osd.{from} did not take {name}'s repair: {e:?}",
                    self.id
                );
                // (Lost on the way: sent again, a few times.)
                if matches!(e, RepError::Failed(_)) {
                    self.scrubber.repair_failed.insert(name.clone());
                }
            }
        }
        if left == 0 {
            self.scrubber.repairing.remove(&name);
            self.release(s, &name, fx);
            match self.scrubber.repair_failed.remove(&name) {
                true => self.repair_round_failed(s, name, fx),
                false => _ = self.scrubber.repair_rounds.remove(&name),
            }
        }
    }

    /// A round of `name`'s repair failed on the way (a message lost, a
    /// read that did not come back): it runs again, a few rounds at most.
    pub(super) fn repair_round_failed(
        &mut self,
        s: &dyn ObjectStore,
        name: String,
        fx: &mut Vec<Effect>,
    ) {
        let sc = &mut self.scrubber;
        let rounds = sc.repair_rounds.remove(&name).unwrap_or(0) + 1;
        if rounds < REPAIR_TRIES {
            sc.repair_rounds.insert(name.clone(), rounds);
            self.repair_object(s, name, fx);
        }
    }

    /// `osd`'s copy of `name` is the authoritative one now.
    pub(super) fn copy_repaired(&mut self, name: &str, osd: i32) {
        let Some(i) = self.scrubber.found.get_mut(name) else {
            return;
        };
        if i.bad.remove(&osd).is_some() {
            i.auth.push(osd);
        }
        if i.bad.is_empty() {
            self.scrubber.found.remove(name);
            self.scrubber.repaired += 1;
            tracing::info!("pg {}: repaired {name}", self.id);
        }
    }

    /// After this copy's own was mended by a repair: the members' bad
    /// copies next.
    pub(super) fn repair_rest(&mut self, s: &dyn ObjectStore, name: &str, fx: &mut Vec<Effect>) {
        self.copy_repaired(name, self.whoami);
        if self.scrubber.found.contains_key(name) && self.is_primary() {
            self.repair_object(s, name.to_string(), fx);
        }
    }

    /// This copy's map of (`after`, `upto`]: of its objects, or of its
    /// shards (an erasure-coded PG's).
    /// The members the last scrub found holding a bad copy of `name`.
    pub(super) fn known_bad(&self, name: &str) -> Vec<i32> {
        (self.scrubber.found.get(name))
            .map(|i| i.bad.keys().copied().collect())
            .unwrap_or_default()
    }
}

/// What `log` says last of each of `names` (see [`scrub_map::Logged`]).
/// Without the log (the store does not show it whole), nothing: the
/// comparison then takes the newest copy.
/// Where a chunk of the objects `listed` ends: after the last one that
/// keeps the chunk's data within `max_bytes` (the first always; an object
/// that cannot be stated counts nothing: its map reports it).
fn chunk_end(
    s: &dyn ObjectStore,
    coll: loligo_store::CollectionId,
    listed: backfill::Scan,
    max_bytes: u64,
) -> Cursor {
    let mut bytes = 0u64;
    for (i, (o, _)) in listed.objects.iter().enumerate() {
        bytes += s.stat(coll, o).map_or(0, |st| st.size);
        if bytes > max_bytes && i > 0 {
            return Cursor::At(listed.objects[i - 1].0.clone());
        }
    }
    listed.end
}

fn logged(log: &Option<AuthLog>, names: &[String]) -> scrub_map::Logged {
    let mut out = scrub_map::Logged::new();
    let Some(log) = log else {
        return out;
    };
    for e in &log.entries {
        if names.binary_search(&e.name).is_ok() {
            out.insert(e.name.clone(), (!e.removed).then_some(e.version));
        }
    }
    out
}

/// What a scrub of `kind` is called in logs.
fn scrub_name(kind: ScrubKind) -> &'static str {
    match (kind.deep, kind.repair) {
        (false, false) => "scrub",
        (true, false) => "deep-scrub",
        (_, true) => "repair",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = 3_600_000;

    /// A chunk ends before the object that would take its data past the
    /// bound, holds one object however large, and ends where the listing
    /// did when its objects are small.
    #[test]
    fn scrub_chunks_are_bounded_by_bytes() {
        use loligo_store::{MemStore, Transaction};
        let s = MemStore::new();
        let coll = loligo_store::CollectionId {
            pool: 1,
            pg: 0,
            shard: 0,
        };
        let mut t = Transaction::new();
        t.create_collection(coll);
        for (i, len) in [300usize, 500, 400, 100].into_iter().enumerate() {
            let o = recovery::oid(&format!("o{i}"));
            t.write(coll, &o, 0, vec![7u8; len]);
        }
        s.apply(t).unwrap();
        let listed = || backfill::scan(&s, coll, &Cursor::Start, &Cursor::End, 25, None).unwrap();
        let all = listed();
        let sizes: Vec<u64> = (all.objects.iter())
            .map(|(o, _)| s.stat(coll, o).unwrap().size)
            .collect();
        let names: Vec<ObjectId> = all.objects.iter().map(|(o, _)| o.clone()).collect();
        // (The objects in listing order; a bound of the first two's bytes
        // ends the chunk after the second.)
        let two = sizes[0] + sizes[1];
        assert_eq!(
            chunk_end(&s, coll, listed(), two),
            Cursor::At(names[1].clone())
        );
        assert_eq!(
            chunk_end(&s, coll, listed(), two - 1),
            Cursor::At(names[0].clone())
        );
        assert_eq!(
            chunk_end(&s, coll, listed(), 1),
            Cursor::At(names[0].clone())
        );
        assert_eq!(chunk_end(&s, coll, listed(), 10_000), Cursor::End);
    }

    /// A PG is scrubbed after the minimum interval (plus its share) only
    /// under the load threshold, after the maximum whatever the load, and
    /// deep-scrubbed after the deep interval (plus its share).
    #[test]
    fn scrubs_come_due_by_interval_load_and_share() {
        let sch = ScrubSchedule {
            min_interval_ms: 24 * H,
            max_interval_ms: 7 * 24 * H,
            deep_interval_ms: 7 * 24 * H,
        };
        let shallow = Some(ScrubKind {
            deep: false,
            repair: false,
        });
        assert_eq!(sch.due(23 * H, 0, 0, 0, true), None);
        assert_eq!(sch.due(24 * H, 0, 0, 0, true), shallow);
        assert_eq!(
            sch.due(24 * H, 0, 0, 0, false),
            None,
            "load over the threshold"
        );
        // A share of the spread delays it (up to half the interval).
        assert_eq!(sch.due(24 * H, 0, 0, 6 * H, true), None);
        assert_eq!(sch.due(30 * H, 0, 0, 6 * H, true), shallow);
        assert_eq!(
            sch.due(30 * H, 0, 0, 11 * H + 12 * H + 1, true),
            None,
            "shares wrap at half"
        );
        // Past the maximum: due under any load; past the deep interval: deep.
        assert_eq!(sch.due(7 * 24 * H, 0, 7 * 24 * H, 0, false), shallow);
        let deep = sch.due(7 * 24 * H, 6 * 24 * H, 0, 0, false);
        assert_eq!(deep.map(|k| k.deep), Some(true));
        // Zero intervals: never.
        let never = ScrubSchedule {
            min_interval_ms: 0,
            max_interval_ms: 0,
            deep_interval_ms: 0,
        };
        assert_eq!(never.due(u64::MAX, 0, 0, 0, true), None);
    }
}
