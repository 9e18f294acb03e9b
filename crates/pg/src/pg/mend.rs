//! Mending a replicated primary's damaged copy of an object while it
//! serves: a read that finds the primary's data failing its checksum
//! pulls the object whole from another acting member, writes it over the
//! bad copy, and runs again; the client sees the right bytes, late, and
//! gets EIO (`OpError::Damaged`) only when no member holds a good copy at
//! the primary's version.
//!
//! The object is busy while it is mended (ops on it queue behind the
//! read), so no write to it runs between the pull and the apply. It must
//! never take a copy at another version than the primary's own, nor mend
//! an object again and again: one whose mended copy fails as soon as it
//! is written (failing media), or that no member could mend, is answered
//! with the error for a while.

use super::*;

/// A read of an object whose mend was given up less than this long ago
/// (ms) is answered with the error instead of being mended again.
pub const MEND_AGAIN_MS: u64 = 10_000;
/// Ops a mend left waiting (no member could say) run again this long
/// after (ms), whatever else happens.
pub const MEND_RETRY_MS: u64 = 1_000;
/// Times a mend may fail here (not at the member) before it waits, and
/// times running an object's mended copy may fail at once before its
/// mend is given up.
const LOCAL_TRIES_MAX: u32 = 3;

/// The mends a primary has in flight, and what it mended lately.
#[derive(Default)]
pub(super) struct Mend {
    /// Pulls in flight, by tid.
    pulls: BTreeMap<u64, Mending>,
    /// Good copies being written over bad ones here, by tid.
    applying: BTreeMap<u64, Applying>,
    /// Objects whose mend was given up lately, and when.
    given_up: BTreeMap<String, u64>,
    /// When the ops a mend left waiting run again.
    rerun_ms: Option<u64>,
    /// Objects whose mended copy failed as soon as it was written, how
    /// many times in a row.
    refailed: BTreeMap<String, u32>,
    /// Objects whose last mend found no good copy on any member asked
    /// (waiting for one, or given up): unfound (`PgStat::unfound`) until
    /// a mend of them succeeds or the interval ends.
    pub(super) unfound: BTreeSet<String>,
    /// Copies mended since this PG started.
    pub mended: u64,
}

/// One object being mended.
struct Mending {
    name: String,
    /// The version this copy holds, which the good copy must have.
    version: Version,
    /// Members not asked yet.
    left: Vec<i32>,
    /// A member asked did not prove its copy damaged (it lacks the
    /// object, holds another version, or did not answer).
    unanswered: bool,
    /// A repair asked for it: the members' bad copies follow.
    repair: bool,
    /// Times writing a good copy here failed before it was queued.
    local_failures: u32,
    interval: Epoch,
}

/// A good copy being written over this one.
struct Applying {
    name: String,
    repair: bool,
    interval: Epoch,
}

impl Mend {
    /// A new interval: pulls in flight answer nothing now (the ops behind
    /// them went back to the PG's queue); copies being written land, but
    /// nothing waits on them.
    pub(super) fn new_interval(&mut self) {
        self.pulls.clear();
        self.unfound.clear();
    }

    /// The objects whose copy here a mend is changing or about to.
    pub(super) fn changing(&self) -> impl Iterator<Item = &str> {
        (self.pulls.values().map(|m| m.name.as_str()))
            .chain(self.applying.values().map(|a| a.name.as_str()))
    }
}

impl Pg {
    /// Whether a read of `name` that found this copy damaged may mend it.
    pub(super) fn may_mend(&self, name: &str) -> bool {
        self.ec.is_none()
            && matches!(self.role, Role::Primary { .. } | Role::Activating { .. })
            && self
                .mend
                .given_up
                .get(name)
                .is_none_or(|&t| self.now_ms >= t + MEND_AGAIN_MS)
    }

    /// Op `p` found this copy of its object damaged (`why`): it waits
    /// while the object is pulled from the first member that has a good
    /// copy.
    pub(super) fn mend(
        &mut self,
        s: &dyn ObjectStore,
        p: Pending,
        why: String,
        fx: &mut Vec<Effect>,
    ) {
        let name = p.op.name.clone();
        let version = recovery::stored_version(s, self.coll, &recovery::oid(&name))
            .ok()
            .flatten()
            .flatten()
            .unwrap_or_default();
        // (Asked last to first: members the last scrub found bad last.)
        let bad = self.known_bad(&name);
        let mut left: Vec<i32> = (self.map.acting.iter().rev())
            .copied()
            .filter(|&o| o >= 0 && o != self.whoami)
            .collect();
        left.sort_by_key(|o| !bad.contains(o));
        tracing::warn!(
            "pg {}: {name} is damaged here ({why}); mending it from {left:?}",
            self.id
        );
        self.ops.busy.entry(name.clone()).or_default().push_front(p);
        self.mend_from(s, name, version, left, false, fx);
    }

    /// Recovery found this copy of `name`, the source of its pushes to
    /// `targets`, damaged: it is mended first from another member or a
    /// stray (busy meanwhile), and pushed once whole.
    pub(super) fn mend_source(
        &mut self,
        s: &dyn ObjectStore,
        name: String,
        targets: &BTreeSet<i32>,
        fx: &mut Vec<Effect>,
    ) {
        let version = recovery::stored_version(s, self.coll, &recovery::oid(&name))
            .ok()
            .flatten()
            .flatten()
            .unwrap_or_default();
        // (Asked last to first: members that do not lack the object,
        // then the targets (one may hold the version all the same: a pull
        // is version-checked; with every other copy a target, a rot of
        // this one waited for good though a target held a good copy),
        // then those the last scrub found bad.)
        let bad = self.known_bad(&name);
        let mut from: Vec<i32> = self.pull_candidates().into_iter().rev().collect();
        from.sort_by_key(|o| (!bad.contains(o), !targets.contains(o)));
        tracing::warn!(
            "pg {}: {name}, to recover on {targets:?}, is damaged here; mending it from {from:?}",
            self.id
        );
        self.ops.busy.entry(name.clone()).or_default();
        self.mend_from(s, name, version, from, false, fx);
    }

    /// Mend this copy of `name` (busy meanwhile) from the first of `from`
    /// (asked last to first) that holds a good copy at `version`; for a
    /// `repair`, the members' bad copies after.
    pub(super) fn mend_from(
        &mut self,
        s: &dyn ObjectStore,
        name: String,
        version: Version,
        from: Vec<i32>,
        repair: bool,
        fx: &mut Vec<Effect>,
    ) {
        debug_assert!(!from.contains(&self.whoami), "a copy mends from others");
        if self.mend.changing().any(|n| n == name) {
            // (One mend of an object at a time: a second one's copy,
            // landing after the first's and a write after it, would put
            // the object back to the version mended.)
            tracing::debug!("pg {}: {name} is being mended already", self.id);
            return;
        }
        let m = Mending {
            name,
            version,
            unanswered: from.is_empty(),
            left: from,
            repair,
            local_failures: 0,
            interval: self.map.interval,
        };
        self.mend_next(s, m, fx);
    }

    /// Ask the next member for its copy, or give up. If every member
    /// answered that it holds no good copy, the ops waiting run again and
    /// fail with the error; if some could not say (none up, or
    /// unreachable), they wait with the PG's other waiting ops for a map
    /// that may bring one back (or their deadline).
    fn mend_next(&mut self, s: &dyn ObjectStore, mut m: Mending, fx: &mut Vec<Effect>) {
        let Some(to) = m.left.pop() else {
            if m.unanswered {
                tracing::warn!(
                    "pg {}: no member up could give a good copy of {} at {:?}; its ops wait",
                    self.id,
                    m.name,
                    m.version
                );
                self.mend.unfound.insert(m.name.clone());
                let queued = self.ops.busy.remove(&m.name).unwrap_or_default();
                self.ops.waiting.extend(queued);
                self.mend.rerun_ms = Some(self.now_ms + MEND_RETRY_MS);
                // (A recovery that needs it tries again then too, when a
                // stray may have told of its copy.)
                (self.rec.retry).insert(m.name, self.now_ms + MEND_RETRY_MS);
                return;
            }
            tracing::error!(
                "pg {}: no member holds a good copy of {} at {:?}",
                self.id,
                m.name,
                m.version
            );
            self.mend.unfound.insert(m.name.clone());
            self.give_up_mend(&m.name);
            return self.release(s, &m.name, fx);
        };
        let tid = self.take_tid();
        let msg = PeerMsg::Pull {
            pg: self.id,
            from: self.whoami,
            ctx: self.rep_ctx(),
            name: m.name.clone(),
            need: m.version,
        };
        self.send(tid, to, msg, fx);
        self.mend.pulls.insert(tid, m);
    }

    /// A member's answer to a mend's pull (`false`: `tid` was not one).
    pub(super) fn on_mend_pulled(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        from: i32,
        result: &Result<Push, RepError>,
        fx: &mut Vec<Effect>,
    ) -> bool {
        let Some(mut m) = self.mend.pulls.remove(&tid) else {
            return false;
        };
        debug_assert_eq!(
            m.interval, self.map.interval,
            "pulls end with their interval"
        );
        let good = match result {
            Ok(p) if p.version == m.version && p.copy.is_some() && keeps_its_digest(p) => p,
            other => {
                let why = match other {
                    Err(e @ RepError::Damaged(_)) => format!("{e:?}"),
                    Ok(p) if p.version == m.version && p.copy.is_some() => {
                        "its data differs from the digest it keeps".to_string()
                    }
                    // (Not a holder of this version, or no answer: no
                    // proof that a good copy does not exist.)
                    Ok(p) => {
                        m.unanswered = true;
                        format!("it holds {:?}", p.version)
                    }
                    Err(e) => {
                        m.unanswered = true;
                        format!("{e:?}")
                    }
                };
                tracing::warn!("pg {}: osd.{from} cannot mend {}: {why}", self.id, m.name);
                self.mend_next(s, m, fx);
                return true;
            }
        };
        let here = recovery::stored_version(s, self.coll, &recovery::oid(&m.name));
        if matches!(here, Ok(Some(Some(v))) if v != m.version) {
            debug_assert!(false, "{} changed while it was mended", m.name);
            tracing::error!("pg {}: {} changed while it was mended", self.id, m.name);
            return true;
        }
        let mut txn = recovery::push_txn(self.coll, good, recovery::Prior::Replicated);
        let t = self.take_tid();
        // (A copy missing here adds a leaf to this copy's Merkle tree.)
        if let Err(e) = self.push_tree_changes(s, std::slice::from_ref(good), t, &mut txn) {
            // (This copy failed, not the member's: ask it again, a few
            // times.)
            tracing::error!("pg {}: mending {}: {e}", self.id, m.name);
            m.local_failures += 1;
            if m.local_failures < LOCAL_TRIES_MAX {
                m.left.push(from);
            } else {
                m.unanswered = true;
            }
            self.mend_next(s, m, fx);
            return true;
        }
        self.applying.insert(t, self.map.interval);
        let a = Applying {
            name: m.name,
            repair: m.repair,
            interval: m.interval,
        };
        self.mend.applying.insert(t, a);
        fx.push(Effect::Apply {
            tid: t,
            txn,
            sync: true,
        });
        true
    }

    /// A good copy is written here (`false`: `tid` was not one): the ops
    /// waiting on the object run again.
    pub(super) fn on_mend_applied(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        result: &Result<(), RepError>,
        fx: &mut Vec<Effect>,
    ) -> bool {
        let Some(a) = self.mend.applying.remove(&tid) else {
            return false;
        };
        self.applying.remove(&tid);
        // (A copy that fails as soon as it is written is not mended again
        // for a while: the media under it fails.)
        let whole =
            result.is_ok() && (s.read_whole(self.coll, &recovery::oid(&a.name), true)).is_ok();
        if whole {
            self.mend.mended += 1;
            self.mend.refailed.remove(&a.name);
            self.mend.unfound.remove(&a.name);
            tracing::info!("pg {}: mended {}", self.id, a.name);
        } else {
            tracing::error!(
                "pg {}: {} is damaged again as soon as it is mended: {result:?}",
                self.id,
                a.name
            );
            let n = self.mend.refailed.entry(a.name.clone()).or_insert(0);
            *n += 1;
            if *n >= LOCAL_TRIES_MAX {
                self.mend.refailed.remove(&a.name);
                self.give_up_mend(&a.name);
            }
        }
        if a.interval != self.map.interval {
            // (What waited on it went back to the queue with the interval.)
            return true;
        }
        self.release(s, &a.name, fx);
        if whole {
            if a.repair {
                self.repair_rest(s, &a.name, fx);
            } else {
                self.copy_repaired(&a.name, self.whoami);
            }
        }
        true
    }
}

impl Pg {
    /// At a tick: the ops a mend left waiting run again when due.
    pub(super) fn mend_rerun(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        if self.mend.rerun_ms.is_some_and(|t| self.now_ms >= t) {
            self.mend.rerun_ms = None;
            self.rerun_waiting(s, fx);
        }
    }

    /// Reads of `name` that find it damaged are answered with the error
    /// for a while (`MEND_AGAIN_MS`).
    fn give_up_mend(&mut self, name: &str) {
        let now = self.now_ms;
        let given_up = &mut self.mend.given_up;
        given_up.retain(|_, t| now < *t + MEND_AGAIN_MS);
        given_up.insert(name.to_string(), now);
    }
}

/// Whether pushed copy `p` holds the data its kept digest says (true when
/// it keeps none).
fn keeps_its_digest(p: &Push) -> bool {
    let Some(c) = &p.copy else {
        return true;
    };
    match c
        .attrs
        .iter()
        .find(|(k, _)| k == scrub_map::DATA_DIGEST_ATTR)
    {
        Some((_, kept)) if !kept.is_empty() => *kept == scrub_map::data_digest_attr(&c.data),
        _ => true,
    }
}
