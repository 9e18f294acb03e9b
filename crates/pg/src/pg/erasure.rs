//! A PG of an erasure-coded pool: client ops gather the object bytes they
//! need from the shards (shard `i` is on the `i`-th OSD of the acting set;
//! a hole is a missing shard), decode around shards that are missing or
//! fail, and write one transaction per shard.
//!
//! A gather reads only from members of the write set that hold the object
//! at the version the primary has (every write to an object waits for the
//! one before it, so while no write to the object is in flight, every
//! complete member holds its current version); a shard whose read fails
//! or shows another version is left out and the read planned again
//! around it, up to the code's limit.
//!
//! The member side answers a shard read from its own store, checking the
//! version, and never changes anything.

use super::{reply, Effect, PeerInfo, Pending, Pg, RepError, Role};
use crate::ec::{self, OldBytes, Plan};
use crate::exec::{ObjState, VERSION_ATTR};
use crate::msg::{PeerMsg, PeerReply};
use bytes::Bytes;
use loligo_ec::stripe::{self, Fetched, ShardReads};
use loligo_store::{ObjectId, ObjectStore, StoreError};
use loligo_types::ops::{OpError, Version};
use loligo_types::Epoch;
use std::collections::{BTreeMap, BTreeSet};

/// What only an erasure-coded copy keeps, beside the PG's common state.
#[derive(Default)]
pub(super) struct EcState {
    /// Client ops and recovery waiting for shard reads, by tid.
    pub(super) gathers: BTreeMap<u64, Gather>,
    /// This copy holds another shard than its position in the current map
    /// (it must be backfilled before it counts).
    pub(super) moved: bool,
    /// The shard this copy holds, as its shard record says (if known).
    pub(super) held_shard: Option<u8>,
    /// `moved` was read with nothing of this copy in flight since the
    /// last map (see `on_settled`).
    pub(super) moved_fresh: bool,
    /// As primary: objects whose newest write of this interval left
    /// rollback copies on the shards, with that write's version and
    /// whether the whole write set has it (then the copies are no longer
    /// needed: peering never rolls it back, and the next write removes
    /// them).
    pub(super) rb_live: BTreeMap<String, (Version, bool)>,
    /// Rebuilds finished since the shell last took them: shards rebuilt,
    /// the plans' theory bytes, the bytes fetched.
    pub(super) rebuilt: (u64, u64, u64),
    /// As primary: objects whose last rebuild or pull found fewer than k
    /// shards, every other up copy saying it lacks its shard (no I/O
    /// error or lost message in doubt), and that wait (`PgStat::unfound`).
    /// Kept across this primary's peerings (a PG handed back and forth
    /// still shows them); a gather of the object or its give-up takes it
    /// out, and so does no longer leading.
    pub(super) unfound_waiting: BTreeSet<String>,
    /// Pulling: objects this primary lacks that no k up copies hold, and
    /// that are to be given up (removed or rolled back, see
    /// `Pg::unfound_fate`). It activates without them and gives each up at
    /// once.
    pub(super) unfound: BTreeMap<String, Unfound>,
    /// As primary: objects a client op read around damaged shards of,
    /// with the members holding them: rebuilt once the object is free
    /// (`Pg::ec_repair_read_damage`). Cleared with each new interval.
    pub(super) read_damaged: BTreeMap<String, BTreeSet<i32>>,
}

/// Record key of the shard an EC copy holds.
pub const SHARD_KEY: &[u8] = b"shard";

/// Shard reads in flight for one object: for a client op, or to rebuild
/// the shards that recovering members lack.
pub(super) struct Gather {
    what: Purpose,
    oid: ObjectId,
    st: ObjState,
    /// Shards left out after a failed read.
    bad: BTreeSet<usize>,
    /// The extents asked of each shard, in the order asked.
    sent: ShardReads,
    fetched: Fetched<Bytes>,
    /// Shards whose answer is awaited, with their OSDs.
    waiting: BTreeMap<usize, i32>,
    /// Where each shard is read from (members, or stray copies).
    osd_of: BTreeMap<usize, i32>,
    /// Lost shards a stray copy holds whole: read, not rebuilt.
    copy: Vec<usize>,
    /// (stray OSD, shard) pairs that did not hold what was asked.
    bad_strays: BTreeSet<(i32, usize)>,
    /// Shards read from strays or moved members rather than their
    /// position's member (a failed read there rules out the pair only).
    from_others: BTreeSet<usize>,
    /// A read of this round failed: plan again.
    failed: bool,
    /// A read failed for another reason than its copy lacking the shard
    /// at the version (an I/O error, no answer): the object may still be
    /// readable, and is never given up.
    doubtful: bool,
    /// How many positions had a source left when the reads could not be
    /// planned (`None`: they could be). Fewer than k, with no read
    /// doubtful, is what makes an object unfound: with k or more it is
    /// the plan that failed (with OSDs declared lost, a moved member's
    /// shard could not stand in for its position's, and objects two shards
    /// held were given up).
    found: Option<usize>,
    /// OSDs whose read answered that they never took the write at the
    /// version asked (`RepError::NeverTook`).
    never_took: BTreeSet<i32>,
    /// Members whose own shard failed its checksum (`RepError::Damaged`):
    /// a client op read around them, and a repair rebuilds them after.
    damaged: BTreeSet<i32>,
}

/// What becomes of an object no k shards hold at its logged version
/// (`Pg::unfound_fate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unfound {
    /// Some OSD that may hold more is not here yet.
    Wait,
    /// Removed (logged as given up).
    Remove,
    /// Written back at this older version (logged as given up).
    RevertTo(Version),
}

pub(super) enum Purpose {
    /// A client op: one read plan per range of `plan.fetch`.
    Op {
        pending: Pending,
        plan: Plan,
        reads: Vec<stripe::ReadPlan>,
    },
    /// A backfill chunk for `to`: rebuild its shard of this object (the
    /// chunk's push `index`).
    Chunk {
        to: i32,
        plan: Option<stripe::RebuildPlan>,
    },
    /// A push: rebuild the shards of `targets` (recovering members), or
    /// with `pull`, this primary's own shard.
    Rebuild {
        pull: bool,
        targets: BTreeSet<i32>,
        plan: Option<stripe::RebuildPlan>,
        attrs: Vec<(String, Vec<u8>)>,
    },
    /// A repair (`pg repair`): rebuild the bad shards of `targets` (this
    /// primary's own among them, maybe) from the good ones, then write
    /// each over its bad one (`ec_repair.rs`).
    Repair {
        targets: BTreeSet<i32>,
        plan: Option<stripe::RebuildPlan>,
        attrs: Vec<(String, Vec<u8>)>,
    },
    /// Giving up an object no k shards hold at its logged version: read
    /// it whole at the version before that write (the gather's state),
    /// then write it back as a new version (`Pg::ec_revert`). `attrs` are
    /// its xattrs at that version.
    Revert {
        attrs: Vec<(String, Vec<u8>)>,
        reads: Vec<stripe::ReadPlan>,
    },
}

impl Gather {
    pub(super) fn new(what: Purpose, oid: ObjectId, st: ObjState) -> Gather {
        Gather {
            what,
            oid,
            st,
            bad: BTreeSet::new(),
            sent: ShardReads::new(),
            fetched: Fetched::new(),
            waiting: BTreeMap::new(),
            osd_of: BTreeMap::new(),
            copy: Vec::new(),
            bad_strays: BTreeSet::new(),
            from_others: BTreeSet::new(),
            failed: false,
            doubtful: false,
            found: None,
            never_took: BTreeSet::new(),
            damaged: BTreeSet::new(),
        }
    }

    /// Read none of `shards` (bad ones a repair rebuilds).
    pub(super) fn leave_out(&mut self, shards: BTreeSet<usize>) {
        self.bad.extend(shards);
    }

    /// The client op this gather is for, if any.
    fn pending(&self) -> Option<&Pending> {
        match &self.what {
            Purpose::Op { pending, .. } => Some(pending),
            Purpose::Rebuild { .. }
            | Purpose::Chunk { .. }
            | Purpose::Revert { .. }
            | Purpose::Repair { .. } => None,
        }
    }
}

impl Pg {
    /// Whether this EC copy holds another shard than its position now
    /// (its `shard` record names another; a copy with no record holds
    /// none unless it has objects).
    pub(super) fn shard_moved(&self, s: &dyn ObjectStore) -> Result<bool, String> {
        self.moved_from(s, self.shard_of(self.whoami))
    }

    /// Whether this copy holds another shard than its position in
    /// `acting` (a store error counts as moved).
    pub(super) fn shard_moved_at(&self, s: &dyn ObjectStore, acting: &[i32]) -> bool {
        let pos = acting.iter().position(|&o| o == self.whoami);
        self.moved_from(s, pos).unwrap_or(true)
    }

    fn moved_from(&self, s: &dyn ObjectStore, pos: Option<usize>) -> Result<bool, String> {
        if self.ec.is_none() || pos.is_none() {
            return Ok(false);
        }
        match s.record(self.coll, SHARD_KEY).map_err(|e| e.to_string())? {
            Some(b) => Ok(b.first().map(|&x| x as usize) != pos),
            None => {
                let (objs, _) = s.list(self.coll, None, 1).map_err(|e| e.to_string())?;
                Ok(!objs.is_empty())
            }
        }
    }

    /// Read whether this copy holds another shard than its position in
    /// `acting` (`moved`), and which it holds (`held_shard`).
    pub(super) fn read_moved(&mut self, s: &dyn ObjectStore, acting: &[i32]) {
        self.ecs.moved = self.shard_moved_at(s, acting);
        self.ecs.held_shard = self.ec.as_ref().and_then(|_| self.shard_held(s));
    }

    /// Member `o`'s peering answer read against this copy's acting set
    /// (see `PeerInfo::shard`): a copy whose shard is not its position's
    /// here moved (it is backfilled, or put back; and counts as a
    /// complete copy of its shard only if it said it holds one whole),
    /// and one that moved only by its own map did not.
    pub(super) fn against_acting(&self, o: i32, mut i: PeerInfo) -> PeerInfo {
        let (Some(_), Some(pos), Some(held)) = (&self.ec, self.shard_of(o), i.shard) else {
            return i;
        };
        if held as usize != pos {
            if !i.backfill {
                i.moved_shard = Some(held);
            }
            i.backfill = true;
        } else if i.moved_shard.take().is_some() {
            // (`moved_shard` is given only with no backfill under way: it
            // was the one reason for `backfill`.)
            i.backfill = false;
        }
        i
    }

    /// The shard member `o`'s peering answer says its copy holds, when
    /// that is not `o`'s position in this copy's acting set (its OSD
    /// moved; whole or mid-backfill).
    pub(super) fn held_elsewhere(&self, o: i32, i: &PeerInfo) -> Option<u8> {
        i.shard.filter(|&s| Some(s as usize) != self.shard_of(o))
    }

    /// Whether copy `o` (its peering answer `i`; this copy's own state
    /// when `o` is this OSD) holds another position's shards: its OSD
    /// moved, before its backfill at the new position began
    /// (`moved_shard`) or after (`held_elsewhere`). Such a copy never
    /// goes on from its own log.
    pub(super) fn copy_moved(&self, o: i32, i: &PeerInfo) -> bool {
        i.moved_shard.is_some()
            || match o == self.whoami {
                true => self.ecs.moved,
                false => self.held_elsewhere(o, i).is_some(),
            }
    }

    /// The shard this copy's objects hold, as recorded (None if unknown
    /// or unreadable).
    pub(super) fn shard_held(&self, s: &dyn ObjectStore) -> Option<u8> {
        s.record(self.coll, SHARD_KEY)
            .ok()
            .flatten()
            .and_then(|b| b.first().copied())
    }

    /// What a peering answer says of a moved copy: the shard it holds, if
    /// no backfill has started at its new position.
    pub(super) fn moved_shard(&self) -> Option<u8> {
        self.ecs
            .held_shard
            .filter(|_| self.ecs.moved && self.backfill.is_none())
    }

    /// Record this copy's shard (its position) in `t` (EC pools only).
    pub(super) fn mark_shard(&mut self, t: &mut loligo_store::Transaction) {
        if let (Some(_), Some(pos)) = (&self.ec, self.shard_of(self.whoami)) {
            t.set_record(self.coll, SHARD_KEY, vec![pos as u8]);
            self.ecs.moved = false;
            self.ecs.held_shard = Some(pos as u8);
        }
    }

    /// The shard index of `osd` in this interval's acting set.
    pub(super) fn shard_of(&self, osd: i32) -> Option<usize> {
        self.map.acting.iter().position(|&o| o == osd)
    }

    /// The shards a gather may read `name` from, with the OSD to read
    /// each from: members of the write set that do not lack it and are
    /// not backfill targets short of it.
    fn source_osds(&self, oid: &ObjectId) -> BTreeMap<usize, i32> {
        // A pulling primary knows which members moved and which shard
        // each holds (their answers to this peering): it reads that
        // shard from them, not their position's (with positions moving,
        // two members had swapped positions, the primary asked each for
        // the other's shard, and the PG was handed back and forth for
        // good).
        let pulling = matches!(self.role, Role::Pulling { .. });
        let shard_held = |o: i32| {
            pulling
                .then(|| self.rec.moved_complete.get(&o).copied())
                .flatten()
                .or_else(|| self.shard_of(o))
        };
        let members: Vec<i32> = match &self.role {
            Role::Primary { write_set } | Role::Activating { write_set, .. } => write_set.clone(),
            // A primary rebuilding its own shards may read any other
            // member's: shard reads are version-checked, and one at
            // another version is read around.
            Role::Pulling { .. } => self
                .map
                .acting
                .iter()
                .copied()
                .filter(|&o| o >= 0 && o != self.whoami)
                .collect(),
            _ => Vec::new(),
        };
        members
            .into_iter()
            .filter(|o| {
                !self
                    .rec
                    .missing
                    .get(o)
                    .is_some_and(|m| m.contains_key(&oid.name))
            })
            .filter(|o| self.rec.backfill.get(o).is_none_or(|b| b.done.covers(oid)))
            .filter_map(|o| shard_held(o).map(|c| (c, o)))
            .collect()
    }

    /// Run a client op on an EC object: plan it, then gather what it
    /// needs (or finish at once when it needs nothing).
    pub(super) fn ec_execute(
        &mut self,
        s: &dyn ObjectStore,
        p: Pending,
        oid: ObjectId,
        fx: &mut Vec<Effect>,
    ) {
        let epoch = self.map.epoch;
        let Some(striper) = self.ec.clone() else {
            return;
        };
        let size_max = self.map.pool.as_ref().map_or(0, |p| p.object_size_max);
        let planned = ec::obj_state(s, self.coll, &oid).and_then(|st| {
            ec::plan(&striper, s, self.coll, &oid, &st, &p.op.ops, size_max).map(|pl| (st, pl))
        });
        let (st, plan) = match planned {
            Ok(x) => x,
            Err(e) => return fx.push(reply(p.token, Err(e), Version::default(), epoch)),
        };
        let name = p.op.name.clone();
        let g = Gather::new(
            Purpose::Op {
                pending: p,
                plan,
                reads: Vec::new(),
            },
            oid,
            st,
        );
        // Other ops on the object wait behind this one.
        self.ops.busy.entry(name).or_default();
        self.gather(s, g, fx);
    }

    /// Plan the reads of a gather around its bad shards and send them;
    /// finish it if nothing (more) is needed.
    pub(super) fn gather(&mut self, s: &dyn ObjectStore, mut g: Gather, fx: &mut Vec<Effect>) {
        let Some(striper) = self.ec.clone() else {
            return;
        };
        let mut osd_of = self.source_osds(&g.oid);
        osd_of.retain(|c, _| !g.bad.contains(c));
        let mut lost: Vec<usize> = match &g.what {
            Purpose::Rebuild { targets, .. } | Purpose::Repair { targets, .. } => {
                targets.iter().filter_map(|&o| self.shard_of(o)).collect()
            }
            Purpose::Chunk { to, .. } => self.shard_of(*to).into_iter().collect(),
            Purpose::Op { .. } | Purpose::Revert { .. } => Vec::new(),
        };
        // A rebuild may also read stray copies: a shard no member has, or
        // a lost shard itself (then copied, not rebuilt).
        g.copy.clear();
        g.from_others.clear();
        if !matches!(g.what, Purpose::Op { .. } | Purpose::Repair { .. }) {
            self.add_other_sources(&mut g, &mut osd_of, &lost, &striper);
            lost.retain(|c| !g.copy.contains(c));
        }
        let avail: Vec<usize> = osd_of.keys().copied().collect();
        let want = match plan_gather(&striper, &mut g, &avail, &lost) {
            Ok(want) => want,
            Err(e) => {
                tracing::warn!(pg = %self.id, "object '{}': shards {avail:?} cannot be decoded: {e}", g.oid.name);
                g.found = Some(avail.len());
                let err = OpError::Unavailable {
                    pg: self.id.to_string(),
                    have: avail.len() as u32,
                    need: striper.k() as u32,
                };
                return self.gather_failed(s, g, err, fx);
            }
        };
        g.sent = want.clone();
        g.fetched.clear();
        g.waiting.clear();
        g.failed = false;
        g.osd_of = osd_of;
        let tid = self.take_tid();
        if let Err(g) = self.send_shard_reads(s, g, want, tid, &striper, fx) {
            // Its own shard failed: plan again without it.
            return self.gather(s, *g, fx);
        }
        let Some(g) = self.ecs.gathers.remove(&tid) else {
            return;
        };
        match &g.what {
            Purpose::Rebuild {
                pull: false,
                targets,
                ..
            } => {
                // Counted as a push in flight from now on (the pushes go
                // out under this tid once the shards are rebuilt).
                self.rec
                    .pushing
                    .insert(tid, (g.oid.name.clone(), targets.clone()));
            }
            Purpose::Rebuild { pull: true, .. } => {
                if let Role::Pulling { pulls, .. } = &mut self.role {
                    pulls.insert(tid, g.oid.name.clone());
                }
            }
            Purpose::Op { .. }
            | Purpose::Chunk { .. }
            | Purpose::Revert { .. }
            | Purpose::Repair { .. } => {}
        }
        if g.waiting.is_empty() {
            self.gather_done(s, tid, g, fx);
        } else {
            self.ecs.gathers.insert(tid, g);
        }
    }

    /// Sources beside the members for a rebuild or a chunk: a stray's
    /// objects may hold another shard than its record says (its OSD moved
    /// between positions): its recorded shard is tried first, then any
    /// shard no member covers, `lost` ones first; the stray checks the
    /// shard each object holds. Backfill targets too: a member that moved
    /// position still holds its old shard (the only other shard of an
    /// object may be on the target), and once the backfill reaches the
    /// object, as its rollback copy (`recovery::Prior`). A lost shard
    /// found so is copied, not rebuilt (`g.copy`).
    fn add_other_sources(
        &self,
        g: &mut Gather,
        osd_of: &mut BTreeMap<usize, i32>,
        lost: &[usize],
        striper: &stripe::Striper,
    ) {
        let others: Vec<(i32, Option<usize>)> = self
            .rec
            .strays
            .iter()
            // (A stray that is a member again reads as one, unless
            // it waits outside the write set: `Pg::moved_to_wait`.)
            .filter(|(o, _)| !self.map.acting.contains(o) || self.rec.waiting_moved.contains(o))
            .map(|(&o, &c)| (o, Some(c)))
            .chain(
                self.rec
                    .backfill
                    .keys()
                    .filter(|o| !self.rec.strays.contains_key(o))
                    .map(|&o| (o, None)),
            )
            // And members that list the object missing: their shard
            // may be at the version wanted all the same (reads are
            // version-checked).
            .chain(
                self.rec
                    .missing
                    .iter()
                    .filter(|(o, m)| {
                        m.contains_key(&g.oid.name) && !self.rec.strays.contains_key(o)
                    })
                    .map(|(&o, _)| (o, self.shard_of(o))),
            )
            // And a pulling primary's own copy: it lists the object
            // missing, but its shard may be at the version wanted
            // (else, with the write's only other shard empty, the PG
            // hands over forever).
            .chain(
                matches!(self.role, Role::Pulling { .. })
                    .then(|| (self.whoami, self.shard_of(self.whoami))),
            )
            .collect();
        for (osd, rec_shard) in others {
            let order = rec_shard
                .into_iter()
                .chain(lost.iter().copied())
                .chain(0..striper.shards());
            // (A backfill target's own position comes first when it
            // is lost: a target behind the log's tail may still hold
            // it at the version wanted.)
            let pick = order.into_iter().find(|c| {
                *c < striper.shards()
                    && !osd_of.contains_key(c)
                    && !g.bad_strays.contains(&(osd, *c))
            });
            if let Some(c) = pick {
                osd_of.insert(c, osd);
                g.from_others.insert(c);
                if lost.contains(&c) {
                    g.copy.push(c);
                }
            }
        }
    }

    /// Read this OSD's own shards of `want` now and ask the others for
    /// theirs under `tid`; the gather is then kept under `tid`. `Err` with
    /// the gather when an own shard fails (marked bad: plan again).
    fn send_shard_reads(
        &mut self,
        s: &dyn ObjectStore,
        mut g: Gather,
        want: ShardReads,
        tid: u64,
        striper: &stripe::Striper,
        fx: &mut Vec<Effect>,
    ) -> Result<(), Box<Gather>> {
        for (c, exts) in want {
            let Some(&osd) = g.osd_of.get(&c) else {
                continue;
            };
            if osd == self.whoami {
                match read_shard(s, self.coll, &g.oid, Some(c), g.st.version, &exts, striper) {
                    Ok(b) => {
                        g.fetched
                            .insert(c, exts.iter().map(|e| e.0).zip(b).collect());
                    }
                    Err(why) => {
                        tracing::warn!(pg = %self.id, "own shard {c} of '{}': {why:?}", g.oid.name);
                        g.doubtful |= !matches!(why, RepError::Absent(_));
                        if g.from_others.contains(&c) {
                            g.bad_strays.insert((self.whoami, c));
                        } else {
                            if matches!(why, RepError::Damaged(_)) {
                                g.damaged.insert(self.whoami);
                            }
                            g.bad.insert(c);
                        }
                        return Err(Box::new(g));
                    }
                }
            } else {
                g.waiting.insert(c, osd);
                let msg = PeerMsg::ReadShard {
                    pg: self.id,
                    from: self.whoami,
                    epoch: self.map.epoch,
                    name: g.oid.name.clone(),
                    extents: exts,
                    version: g.st.version,
                    shard: c,
                };
                self.send(tid, osd, msg, fx);
            }
        }
        self.ecs.gathers.insert(tid, g);
        Ok(())
    }

    /// A member's answer to a shard read.
    pub(super) fn on_shard_read_done(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        from: i32,
        c: usize,
        result: Result<Vec<Bytes>, RepError>,
        fx: &mut Vec<Effect>,
    ) {
        let Some(g) = self.ecs.gathers.get_mut(&tid) else {
            return self.on_parity_read(s, tid, from, c, result, fx);
        };
        // Matched by shard, not by OSD: a rebuild's extra sources may
        // name one OSD twice, so one gather may ask it for two shards
        // (a stray's object and its rollback copy), and the answers come
        // in any order; a match by OSD took the first answer for the lower
        // shard.
        if g.waiting.get(&c) != Some(&from) {
            return;
        }
        g.waiting.remove(&c);
        let exts = g.sent.get(&c).cloned().unwrap_or_default();
        let got = result.and_then(|bufs| {
            let ok = bufs.len() == exts.len()
                && bufs.iter().zip(&exts).all(|(b, e)| b.len() as u64 == e.1);
            if ok {
                Ok(exts.iter().map(|e| e.0).zip(bufs).collect::<Vec<_>>())
            } else {
                Err(RepError::Failed(
                    "a shard read came back with the wrong extents".into(),
                ))
            }
        });
        match got {
            Ok(v) => {
                g.fetched.insert(c, v);
            }
            Err(e) => {
                tracing::warn!(pg = %self.id, "shard {c} on osd.{from}: {e:?}; reading around it");
                g.failed = true;
                g.doubtful |= !matches!(e, RepError::Absent(_) | RepError::NeverTook(_));
                if matches!(e, RepError::NeverTook(_)) {
                    g.never_took.insert(from);
                }
                if g.from_others.contains(&c) {
                    g.bad_strays.insert((from, c));
                } else {
                    if matches!(e, RepError::Damaged(_)) {
                        g.damaged.insert(from);
                    }
                    g.bad.insert(c);
                }
            }
        }
        if !g.waiting.is_empty() {
            return;
        }
        let Some(g) = self.ecs.gathers.remove(&tid) else {
            return;
        };
        if g.failed {
            // Some read failed: plan again around the bad shards.
            self.rec.pushing.remove(&tid);
            let pulling = match &mut self.role {
                Role::Pulling { pulls, .. } => pulls.remove(&tid).is_some(),
                _ => false,
            };
            if matches!(g.what, Purpose::Rebuild { pull: true, .. }) && !pulling {
                // A pull of an earlier round of peering (the PG peered
                // again in the same interval): planned again, it would
                // count as one of this round's and land behind its back
                // (a version the new round rolled back was rebuilt into
                // the primary's own copy, and the members that had rolled
                // it back lacked the object).
                return;
            }
            return self.gather(s, g, fx);
        }
        self.gather_done(s, tid, g, fx);
    }

    /// Everything is here: decode, then run the op (write or answer) or
    /// push the rebuilt shards (under the gather's `tid`).
    fn gather_done(&mut self, s: &dyn ObjectStore, tid: u64, g: Gather, fx: &mut Vec<Effect>) {
        let Some(striper) = self.ec.clone() else {
            return;
        };
        self.ecs.unfound_waiting.remove(&g.oid.name);
        if matches!(g.what, Purpose::Op { .. }) && !g.damaged.is_empty() {
            // (Rebuilt once the op releases the object.)
            let osds = self.ecs.read_damaged.entry(g.oid.name.clone());
            osds.or_default().extend(&g.damaged);
        }
        let Gather {
            what,
            oid,
            st,
            fetched,
            copy,
            ..
        } = g;
        match what {
            Purpose::Op {
                pending,
                plan,
                reads,
            } => self.op_gathered(s, &striper, pending, &plan, &reads, oid, st, &fetched, fx),
            Purpose::Revert { attrs, reads } => {
                let mut data = Vec::with_capacity(st.size as usize);
                for rp in &reads {
                    match striper.decode_read(rp, &fetched) {
                        Ok(b) => data.extend_from_slice(&b),
                        Err(e) => {
                            let err = OpError::Io(format!("object '{}': {e}", oid.name));
                            let g = Gather::new(Purpose::Revert { attrs, reads }, oid, st);
                            return self.gather_failed(s, g, err, fx);
                        }
                    }
                }
                self.revert_decoded(s, oid, st, attrs, &data, fx)
            }
            Purpose::Chunk { to, plan } => {
                let rebuilt = rebuilt_shards(&striper, &plan, &fetched, &copy).and_then(|mut m| {
                    self.shard_of(to)
                        .and_then(|c| m.remove(&c))
                        .ok_or_else(|| format!("no shard for osd.{to}"))
                });
                if rebuilt.is_ok() {
                    self.count_rebuilt(&plan, &copy, &fetched);
                }
                self.chunk_rebuilt(to, &oid.name, st.version, rebuilt, fx)
            }
            Purpose::Rebuild {
                pull,
                targets,
                plan,
                attrs,
            } => {
                let rebuilt = rebuilt_shards(&striper, &plan, &fetched, &copy);
                if rebuilt.is_ok() {
                    self.count_rebuilt(&plan, &copy, &fetched);
                }
                if pull {
                    return self.pulled_rebuilt(s, tid, &oid, st.version, attrs, rebuilt, fx);
                }
                self.push_rebuilt(tid, &oid, st.version, targets, attrs, rebuilt, fx)
            }
            Purpose::Repair {
                targets,
                plan,
                attrs,
            } => {
                let rebuilt = rebuilt_shards(&striper, &plan, &fetched, &copy);
                self.ec_repair_rebuilt(s, &oid, st.version, targets, attrs, rebuilt, fx)
            }
        }
    }

    /// A rebuild's tally: shards, the plan's theory, bytes fetched. A lost
    /// shard copied whole from a stray or moved copy is read once: its
    /// bytes are its theory.
    fn count_rebuilt(
        &mut self,
        plan: &Option<stripe::RebuildPlan>,
        copy: &[usize],
        fetched: &Fetched<Bytes>,
    ) {
        let Some(rp) = plan else {
            return;
        };
        let bytes = |v: &Vec<(u64, Bytes)>| v.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
        let fetched_bytes: u64 = fetched.values().map(bytes).sum();
        let copied_bytes: u64 = copy.iter().filter_map(|c| fetched.get(c)).map(bytes).sum();
        self.ecs.rebuilt.0 += (rp.lost.len() + copy.len()) as u64;
        self.ecs.rebuilt.1 += rp.theory + copied_bytes;
        self.ecs.rebuilt.2 += fetched_bytes;
    }

    /// An op's reads are in: decode the old bytes, run the op, answer a
    /// read, or log and distribute a write (the ops queued behind it stay
    /// queued behind the write).
    #[allow(clippy::too_many_arguments)]
    fn op_gathered(
        &mut self,
        s: &dyn ObjectStore,
        striper: &stripe::Striper,
        p: Pending,
        plan: &Plan,
        reads: &[stripe::ReadPlan],
        oid: ObjectId,
        st: ObjState,
        fetched: &Fetched<Bytes>,
        fx: &mut Vec<Effect>,
    ) {
        let epoch = self.map.epoch;
        let name = p.op.name.clone();
        let mut old = OldBytes::new();
        for rp in reads {
            match striper.decode_read(rp, fetched) {
                Ok(b) => {
                    old.insert(rp.range.start, b);
                }
                Err(e) => {
                    let err = OpError::Io(format!("object '{name}': {e}"));
                    fx.push(reply(p.token, Err(err), Version::default(), epoch));
                    return self.release(s, &name, fx);
                }
            }
        }
        let out = match ec::finish(striper, s, self.coll, &oid, &st, &p.op.ops, plan, old) {
            Ok(o) => o,
            Err(e) => {
                fx.push(reply(p.token, Err(e), Version::default(), epoch));
                return self.release(s, &name, fx);
            }
        };
        if !plan.writes {
            fx.push(reply(p.token, Ok(out.results), st.version, epoch));
            return self.release(s, &name, fx);
        }
        let exec_out = crate::exec::Outcome {
            txn: loligo_store::Transaction::new(),
            results: out.results,
            exists_after: out.exists_after,
            size_after: out.size_after,
            bytes_delta: out.bytes_delta,
        };
        let queued = self.ops.busy.remove(&name).unwrap_or_default();
        self.write(
            super::Writer::Client(p),
            oid,
            &st,
            exec_out,
            Some(out.shards),
            fx,
        );
        if let Some(q) = self.ops.busy.get_mut(&name) {
            q.extend(queued);
        } else {
            // The write did not start (no longer primary): run them.
            self.ops.busy.insert(name.clone(), queued);
            self.release(s, &name, fx);
        }
    }

    fn gather_failed(&mut self, s: &dyn ObjectStore, g: Gather, e: OpError, fx: &mut Vec<Effect>) {
        let name = g.oid.name.clone();
        let retry = self.now_ms + super::RECOVERY_RETRY_MS;
        match g.what {
            Purpose::Op { pending, .. } => {
                fx.push(reply(
                    pending.token,
                    Err(e),
                    Version::default(),
                    self.map.epoch,
                ));
                self.release(s, &name, fx);
            }
            Purpose::Rebuild { pull: true, .. } if !g.doubtful => {
                let why = format!("cannot rebuild it: {e}");
                self.pull_unfound(s, name, &why, g.found, &g.never_took, fx);
            }
            Purpose::Rebuild { pull: true, .. } => {
                self.pull_failed(&format!("cannot rebuild '{name}': {e}"), fx);
            }
            Purpose::Chunk { to, .. } => {
                self.chunk_rebuilt(to, &name, g.st.version, Err(e.to_string()), fx);
                // A chunk's objects are this copy's: one whose copy here
                // changed since (given up meanwhile) is not unfound; the
                // chunk is built again from what is here now (with OSDs
                // declared lost, a removed object was reported unfound).
                let now = ec::obj_state(s, self.coll, &g.oid).map(|st| st.version);
                if now.is_ok_and(|v| v != g.st.version) {
                    return;
                }
                let fate = self.gather_fate(s, &g);
                if fate == Unfound::Wait && !g.doubtful {
                    self.ecs.unfound_waiting.insert(name.clone());
                }
                self.settle_unfound(s, name, fate, fx);
            }
            Purpose::Rebuild { pull: false, .. } => {
                match self.gather_fate(s, &g) {
                    Unfound::Wait => {
                        // Tried again later; ops on the object keep waiting.
                        tracing::warn!(pg = %self.id, "cannot rebuild '{name}' to recover it: {e}");
                        if !g.doubtful {
                            self.ecs.unfound_waiting.insert(name.clone());
                        }
                        self.rec.retry.insert(name, retry);
                    }
                    fate => {
                        self.settle_unfound(s, name, fate, fx);
                    }
                }
            }
            Purpose::Repair { .. } => {
                // (Tried again a few rounds (a read lost on the way),
                // then left for the next repair; ops on it go on.)
                tracing::warn!(pg = %self.id, "cannot rebuild '{name}' to repair it: {e}");
                self.release(s, &name, fx);
                self.repair_round_failed(s, name, fx);
            }
            Purpose::Revert { .. } if self.ecs.unfound.contains_key(&name) => {
                // This copy lacks the object too: it peers again rather
                // than serve without it.
                let why = format!(
                    "cannot read '{name}' at {} to roll it back: {e}",
                    g.st.version
                );
                self.ec_behind(&why);
            }
            Purpose::Revert { .. } => {
                // Tried again later (recovery gathers the object again, and
                // finds it unfound again); ops on it keep waiting, and it
                // counts as unfound (with OSDs declared lost, the version
                // to roll back to was on one shard, and nothing said so).
                tracing::warn!(pg = %self.id, "cannot read '{name}' at {} to roll it back: {e}", g.st.version);
                if !g.doubtful {
                    self.ecs.unfound_waiting.insert(name.clone());
                }
                self.rec.retry.insert(name, retry);
            }
        }
    }

    /// `unfound_fate` for a gather that failed: waiting, if a read failed
    /// for another reason than its copy lacking the shard.
    fn gather_fate(&self, s: &dyn ObjectStore, g: &Gather) -> Unfound {
        match g.doubtful {
            true => Unfound::Wait,
            false => self.unfound_fate(s, &g.oid.name, g.st.version, g.found, &g.never_took),
        }
    }

    /// Whether the operator's last `pg mark-unfound-lost` holds: no
    /// write set was recorded for an interval that began after it (one
    /// that was is a PG that went on; the mark was spent). The map says
    /// so, so every primary agrees.
    pub(super) fn unfound_marked_lost(&self) -> bool {
        let m = self.unfound_lost;
        m > 0 && self.map.record.as_ref().is_none_or(|r| r.interval <= m)
    }

    /// Whether this PG may give up an object no k up copies hold: its
    /// recorded write set lost its k members to `osd lost` (or all of
    /// them, and the map dropped it), so no OSD is known to hold more; or
    /// the operator said to go on without what the down ones hold (`pg
    /// mark-unfound-lost`, until a write set is recorded after it).
    /// Either way the PG goes on with what k up copies hold, as far as
    /// their logs reach (with the mark read only as leave to remove what
    /// could not be found, the removal, logged past the head the record's
    /// members held, was taken for a write never acknowledged, and the PG
    /// was handed back and forth for good).
    pub(super) fn may_give_up(&self) -> bool {
        self.ec.is_some() && (self.record_lost() || self.unfound_marked_lost())
    }

    /// Whether this PG may go on from copies that are not whole, as far
    /// as their logs reach: it may give up what no k up copies hold
    /// (`may_give_up`); or every member the record has left answered, and
    /// fewer than k of their copies are whole, the others mid-backfill, so
    /// no k whole copies the record knows of are coming back (with
    /// positions moving, `osd lost` took the record's two whole members;
    /// the two left, told to backfill at the positions CRUSH had swapped
    /// them to, had taken no chunk yet and held their shards whole; and
    /// the PG asked for pg_temps that named nobody, for good). In the
    /// latter case nothing is given up: an object no k up copies hold is
    /// unfound, and a copy mid-backfill is taken as it is only with a log
    /// that names every write the PG ever took.
    pub(super) fn may_go_on(&self) -> bool {
        self.may_give_up() || self.rec.record_few_whole
    }

    /// The recorded write set is gone or short of k members.
    fn record_lost(&self) -> bool {
        self.map.record.is_none() || self.record_short()
    }

    /// `may_give_up`, for an object needed at `v`: a mark gives up only
    /// what was written before it (else a mark still in force removes a
    /// write acknowledged after it).
    fn may_give_up_at(&self, v: Version) -> bool {
        self.may_give_up() && (self.record_lost() || v.epoch < self.unfound_lost)
    }

    /// What becomes of `name`, which no k shards hold at its logged
    /// version `v` (every read of one said it lacked it; `found` is how
    /// many positions a gather still had sources for, `Gather::found`;
    /// `proven`, the OSDs whose reads answered they never took it).
    ///
    /// - With the record short of k members (`may_give_up`): removed.
    /// - As primary (or pulling as one), when a member of the record never
    ///   took the write at `v` (`Pg::never_took`): an acknowledged write is
    ///   on every record member, so that one never was (it was taken as
    ///   the head from exactly k shards, one of which went with an OSD
    ///   declared lost). It is
    ///   rolled back, as Ceph's `mark_unfound_lost revert` does: the
    ///   object is removed if the log says it did not exist before that
    ///   write, or written back at the version before it (its xattrs from
    ///   this copy's object or rollback copy at that version, else from
    ///   another copy's: `ec_revert`). Either way nothing acknowledged is
    ///   lost. (A member's failed shard read is no such proof: a member
    ///   that moved position holds another shard than the one asked of
    ///   it.) The proof comes with a member's merge answer, or with its
    ///   answer to a shard read or a pull (`RepError::NeverTook`): a
    ///   record member may be a stray now, which only those reach.
    /// - Otherwise it is waited for.
    pub(super) fn unfound_fate(
        &self,
        s: &dyn ObjectStore,
        name: &str,
        v: Version,
        found: Option<usize>,
        proven: &BTreeSet<i32>,
    ) -> Unfound {
        if self.may_give_up_at(v) {
            return Unfound::Remove;
        }
        let (Some(st), Some(record)) = (&self.ec, &self.map.record) else {
            return Unfound::Wait;
        };
        let leading = matches!(self.role, Role::Primary { .. } | Role::Pulling { .. });
        if !leading || v.v == 0 || found.is_none_or(|f| f >= st.k()) {
            return Unfound::Wait;
        }
        // A record member that lists the object missing proves nothing by
        // that alone: one that took the write and then a divergent one on
        // top that it could not roll back lists it too. It must never have
        // taken it.
        let never_took = |o: i32| match o == self.whoami {
            true => self.missing.get(name) == Some(&v) && self.never_took(s, name, v),
            false if proven.contains(&o) => true,
            false => {
                self.rec.missing.get(&o).and_then(|m| m.get(name)) == Some(&v)
                    && self
                        .rec
                        .never_took
                        .get(&o)
                        .is_some_and(|n| n.contains(name))
            }
        };
        if !record.osds.iter().any(|&o| o >= 0 && never_took(o)) {
            return Unfound::Wait;
        }
        let Ok(Some(e)) = super::recovery::entry_at(s, self.coll, v.v) else {
            return Unfound::Wait;
        };
        if e.version != v || e.name != name || e.removed {
            return Unfound::Wait;
        }
        // (The PG's first entry has nothing before it: a log that starts
        // from nothing is a PG that held nothing.)
        let before = match super::recovery::state_before(s, self.coll, &e) {
            Ok(None) if e.version.v == 1 => Ok(Some(None)),
            b => b,
        };
        match before {
            Ok(Some(None)) => Unfound::Remove,
            Ok(Some(Some(pv))) => Unfound::RevertTo(pv),
            _ => Unfound::Wait,
        }
    }

    /// This copy's shard object of `name` at version `to`: the object
    /// itself, or its rollback copy (with its state), if either holds it.
    fn revert_source(
        &self,
        s: &dyn ObjectStore,
        name: &str,
        to: Version,
    ) -> Option<(ObjectId, ObjState)> {
        let oid = super::recovery::oid(name);
        [ec::rollback_oid(&oid), oid].into_iter().find_map(|o| {
            ec::obj_state(s, self.coll, &o)
                .ok()
                .filter(|st| st.exists && st.version == to)
                .map(|st| (o, st))
        })
    }

    /// Act on `unfound_fate`: whether the object is on its way out (a
    /// removal or a rollback started). Waiting for it says no.
    pub(super) fn settle_unfound(
        &mut self,
        s: &dyn ObjectStore,
        name: String,
        fate: Unfound,
        fx: &mut Vec<Effect>,
    ) -> bool {
        match fate {
            Unfound::Remove => self.ec_give_up(s, name, fx),
            Unfound::RevertTo(to) => self.ec_revert(s, name, to, fx),
            Unfound::Wait => false,
        }
    }

    /// Whether a gather of `name` (with `reverts_only`, a rollback's) or a
    /// rollback's pull of it is on its way.
    fn on_its_way(&self, name: &str, reverts_only: bool) -> bool {
        let gathering = |g: &Gather| {
            g.oid.name == name && (!reverts_only || matches!(g.what, Purpose::Revert { .. }))
        };
        self.ecs.gathers.values().any(gathering)
            || (self.rec.revert_pulls.values()).any(|(n, _, _)| n == name)
    }

    /// Roll `name` back to version `to` (see `unfound_fate`): gather it
    /// whole at that version, then write it back (`revert_decoded`).
    /// Whether the gather started (not if this copy cannot show the
    /// version's xattrs: it is tried again later).
    pub(super) fn ec_revert(
        &mut self,
        s: &dyn ObjectStore,
        name: String,
        to: Version,
        fx: &mut Vec<Effect>,
    ) -> bool {
        // One rollback of an object at a time: a second one, asked for by
        // recovery and by backfill alike, read the older version after the
        // first had written it back as a new one, failed, and left the
        // object's ops waiting for a retry that never came (nothing lacked
        // the object any more).
        if self.on_its_way(&name, true) {
            return true;
        }
        let retry = self.now_ms + super::RECOVERY_RETRY_MS;
        let source = self.revert_source(s, &name, to).map(|(o, st)| {
            let attrs = s.getattrs(self.coll, &o).ok()?;
            Some((st, attrs))
        });
        let (st, attrs) = match (source, &self.role) {
            (Some(Some(x)), Role::Primary { .. }) => x,
            // This copy never held that version: its xattrs come from a
            // copy that does (with OSDs declared lost, the primary had the
            // write being undone by recovery, so no rollback copy, and the
            // object was waited for for good).
            (None, Role::Primary { .. }) => return self.pull_revert_source(name, to, None, fx),
            _ => {
                tracing::warn!(pg = %self.id, "cannot roll '{name}' back to {to} now: tried again later");
                self.rec.retry.insert(name, retry);
                return false;
            }
        };
        self.start_revert(s, name, st, attrs.into_iter().collect(), fx);
        true
    }

    /// Gather `name` whole at the version `st` names, to write it back
    /// with `attrs` (`revert_decoded`).
    fn start_revert(
        &mut self,
        s: &dyn ObjectStore,
        name: String,
        st: ObjState,
        attrs: Vec<(String, Vec<u8>)>,
        fx: &mut Vec<Effect>,
    ) {
        let to = st.version;
        let attrs: Vec<(String, Vec<u8>)> = attrs
            .into_iter()
            .filter(|(k, _)| k != VERSION_ATTR)
            .collect();
        tracing::warn!(
            pg = %self.id,
            "'{name}' is on fewer than {} up OSDs at its logged version, which was never \
             acknowledged: rolling it back to {to}",
            self.ec.as_ref().map_or(0, |st| st.k())
        );
        self.ops.busy.entry(name.clone()).or_default();
        let oid = super::recovery::oid(&name);
        let g = Gather::new(
            Purpose::Revert {
                attrs,
                reads: Vec::new(),
            },
            oid,
            st,
        );
        self.gather(s, g, fx);
    }

    /// Ask the next copy for `name`'s xattrs and size at version `to`
    /// (`left`: the OSDs still to ask; `None`: the acting members, then
    /// strays). Whether a pull went out; with none left, the object waits,
    /// unfound, and is tried again later.
    fn pull_revert_source(
        &mut self,
        name: String,
        to: Version,
        left: Option<Vec<i32>>,
        fx: &mut Vec<Effect>,
    ) -> bool {
        let mut left = left.unwrap_or_else(|| self.pull_candidates());
        if left.is_empty() {
            tracing::warn!(
                pg = %self.id,
                "cannot roll '{name}' back to {to}: no copy asked holds that version"
            );
            self.ecs.unfound_waiting.insert(name.clone());
            let retry = self.now_ms + super::RECOVERY_RETRY_MS;
            self.rec.retry.insert(name, retry);
            return false;
        }
        let osd = left.remove(0);
        let tid = self.take_tid();
        let msg = PeerMsg::Pull {
            pg: self.id,
            from: self.whoami,
            ctx: self.rep_ctx(),
            name: name.clone(),
            need: to,
        };
        self.send(tid, osd, msg, fx);
        self.ops.busy.entry(name.clone()).or_default();
        self.rec.revert_pulls.insert(tid, (name, to, left));
        true
    }

    /// A copy's answer to `pull_revert_source`: with the object at `to`,
    /// the rollback gathers it; else the next copy is asked.
    pub(super) fn revert_source_pulled(
        &mut self,
        s: &dyn ObjectStore,
        name: String,
        to: Version,
        left: Vec<i32>,
        result: Result<super::Push, super::RepError>,
        fx: &mut Vec<Effect>,
    ) {
        let copy = result
            .ok()
            .filter(|p| p.name == name && p.version == to)
            .and_then(|p| p.copy);
        let source = copy.and_then(|c| {
            let attrs: BTreeMap<String, Vec<u8>> = c.attrs.into_iter().collect();
            let st = ec::state_of_attrs(&name, &attrs).ok()?;
            (st.exists && st.version == to).then_some((st, attrs))
        });
        match (source, &self.role) {
            (Some((st, attrs)), Role::Primary { .. }) => {
                self.start_revert(s, name, st, attrs.into_iter().collect(), fx)
            }
            (None, Role::Primary { .. }) => {
                self.pull_revert_source(name, to, Some(left), fx);
            }
            _ => {}
        }
    }

    /// The object at the version `st` names, whole: write it back as a
    /// new version on every member, logged as given up (rolled back to
    /// that version), so its writes after it answer no retry.
    fn revert_decoded(
        &mut self,
        s: &dyn ObjectStore,
        oid: ObjectId,
        to: ObjState,
        attrs: Vec<(String, Vec<u8>)>,
        data: &[u8],
        fx: &mut Vec<Effect>,
    ) {
        let name = oid.name.clone();
        let retry = self.now_ms + super::RECOVERY_RETRY_MS;
        let Some(striper) = self.ec.clone() else {
            return;
        };
        if self.rec.blocks(&oid) {
            // A backfill chunk with the object in it is on its way: it
            // goes first (see `ec_give_up`).
            self.rec.retry.insert(name, retry);
            return;
        }
        // The version written back must reach k shards: backfill targets
        // short of the object take the log entry only, and on fewer
        // shards it would be as unreadable as the write it undoes, with
        // the rollback copies that held the older version spent (with OSDs
        // declared lost, before peering named strays' shards: with the
        // primary the only complete member, a rollback left the object on
        // one shard, and a second rollback found nothing to go back to).
        // It waits, unfound, until the members are complete or an operator
        // moves on. (Backfill does not copy the object meanwhile, nor
        // wait for it: its targets record it missing, see `Pg::bf_plan`,
        // and count here once their cursor is past it.)
        let takers = match &self.role {
            Role::Primary { write_set } => write_set
                .iter()
                .filter(|o| self.rec.backfill.get(o).is_none_or(|b| b.done.covers(&oid)))
                .count(),
            _ => 0,
        };
        if takers < striper.k() {
            tracing::warn!(
                pg = %self.id,
                "cannot roll '{name}' back now: {takers} members would take it, fewer than {}",
                striper.k()
            );
            self.ecs.unfound_waiting.insert(name.clone());
            self.rec.retry.insert(name, retry);
            return;
        }
        let now = ec::obj_state(s, self.coll, &oid);
        let encoded = striper.encode(data).map_err(|e| e.to_string());
        let forgot = self.forget_undone(s, &name, to.version);
        let (now, encoded) = match (now, encoded, forgot) {
            (Ok(n), Ok(e), Ok(())) => (n, e),
            (n, e, f) => {
                let why = [
                    n.err().map(|x| x.to_string()),
                    e.err(),
                    f.err().map(|x| x.to_string()),
                ];
                tracing::warn!(pg = %self.id, "cannot roll '{name}' back: {:?}", why.iter().flatten().collect::<Vec<_>>());
                self.rec.retry.insert(name, retry);
                return;
            }
        };
        let shards: Vec<loligo_store::Transaction> = encoded
            .into_iter()
            .enumerate()
            .map(|(c, bytes)| {
                let back = super::Push {
                    name: name.clone(),
                    version: to.version,
                    copy: Some(super::recovery::ObjectCopy {
                        data: bytes.into(),
                        attrs: ec::with_shard(attrs.clone(), c),
                        omap_header: Vec::new(),
                        omap: Vec::new(),
                    }),
                };
                super::recovery::push_txn(self.coll, &back, super::recovery::Prior::Drop)
            })
            .collect();
        self.missing.remove(&name);
        self.ecs.unfound.remove(&name);
        let out = crate::exec::Outcome {
            txn: loligo_store::Transaction::new(),
            results: Vec::new(),
            exists_after: true,
            size_after: to.size,
            bytes_delta: to.size as i64 - if now.exists { now.size as i64 } else { 0 },
        };
        self.write_give_up(s, (oid, &now, to.version), out, shards, fx);
    }

    /// Give object `oid` (now at `st`) up through the write path: `shards`
    /// roll it back to `to` (zero: remove it) on every member, logged as
    /// given up. Ops queued on it run after the write; recovery then pushes
    /// the new state to members that still list the object missing.
    fn write_give_up(
        &mut self,
        s: &dyn ObjectStore,
        (oid, st, to): (ObjectId, &ObjState, Version),
        out: crate::exec::Outcome,
        shards: Vec<loligo_store::Transaction>,
        fx: &mut Vec<Effect>,
    ) {
        let name = oid.name.clone();
        self.ecs.unfound_waiting.remove(&name);
        let queued = self.ops.busy.remove(&name).unwrap_or_default();
        self.write(
            super::Writer::GiveUp(name.clone(), to),
            oid,
            st,
            out,
            Some(shards),
            fx,
        );
        self.ops
            .busy
            .entry(name.clone())
            .or_default()
            .extend(queued);
        if !self.ops.inflight.values().any(|f| f.name == name) {
            self.release(s, &name, fx);
        }
        self.given_up += 1;
        self.rec
            .retry
            .insert(name, self.now_ms + super::RECOVERY_RETRY_MS);
    }

    /// No k up copies hold `name` at its logged version, every read of a
    /// shard of it said so, and no OSD is known to hold more (see
    /// `unfound_fate`): remove it through the write path, logged as given
    /// up, on every member (Ceph's `mark_unfound_lost delete`; or, for an
    /// object a write never acknowledged created, its rollback). Its
    /// writes' request ids answer no retry from now on. Members that lack
    /// it take the removal again by recovery. Whether the removal went
    /// out (not if this copy could not be read: it is tried again later).
    pub(super) fn ec_give_up(
        &mut self,
        s: &dyn ObjectStore,
        name: String,
        fx: &mut Vec<Effect>,
    ) -> bool {
        let retry = self.now_ms + super::RECOVERY_RETRY_MS;
        let (Some(striper), Role::Primary { .. }) = (self.ec.clone(), &self.role) else {
            self.rec.retry.insert(name, retry);
            return false;
        };
        let oid = super::recovery::oid(&name);
        // A backfill chunk with the object in it is on its way: it goes
        // first, as a client write waits for it, and the give-up is tried
        // again after (with OSDs declared lost, a chunk rebuilt before the
        // give-up was sent after it, and its target held the object the
        // log said was removed).
        if self.rec.blocks(&oid) {
            self.rec.retry.insert(name, retry);
            return false;
        }
        let st = match ec::obj_state(s, self.coll, &oid) {
            Ok(st) => st,
            Err(e) => {
                tracing::warn!(pg = %self.id, "cannot read '{name}' to give it up: {e}");
                self.rec.retry.insert(name, retry);
                return false;
            }
        };
        if let Err(e) = self.forget_undone(s, &name, Version::default()) {
            tracing::warn!(pg = %self.id, "cannot read the log to give '{name}' up: {e}");
            self.rec.retry.insert(name, retry);
            return false;
        }
        // Whatever each member holds of it goes, rollback copy and all,
        // and so does its record of lacking it, as a pushed absence does
        // (members drop it from memory as they apply it).
        let gone = super::Push {
            name: name.clone(),
            version: Version::default(),
            copy: None,
        };
        let shard = super::recovery::push_txn(self.coll, &gone, super::recovery::Prior::Drop);
        let shards = vec![shard; striper.shards()];
        self.missing.remove(&name);
        let out = crate::exec::Outcome {
            txn: loligo_store::Transaction::new(),
            results: Vec::new(),
            exists_after: false,
            size_after: 0,
            bytes_delta: -(st.size as i64),
        };
        let why = match self.unfound_marked_lost() {
            true => "the operator marked this PG's unfound objects lost",
            false => "no OSD that may hold more is coming back",
        };
        tracing::warn!(
            pg = %self.id,
            "'{name}' at {} is on fewer than {} up OSDs, and {why}: removed",
            st.version,
            striper.k()
        );
        self.write_give_up(s, (oid, &st, Version::default()), out, shards, fx);
        true
    }

    /// Whether an op gathering shards for a write to an object that
    /// `in_range` names is under way (a backfill chunk waits for it, as
    /// for a write in flight).
    pub(super) fn ec_writes_gathering(&self, in_range: impl Fn(&str) -> bool) -> bool {
        self.ecs.gathers.values().any(|g| match &g.what {
            Purpose::Op { plan, .. } => plan.writes && in_range(&g.oid.name),
            // (A repair writes too.)
            Purpose::Repair { .. } => in_range(&g.oid.name),
            _ => false,
        })
    }

    /// Backfill: `chunk` for `to` holds this copy's shards; the gathers
    /// that rebuild the target's shard of each object in it, and those
    /// objects' names (`None`: an object here has no size, logged).
    pub(super) fn ec_chunk_gathers(
        &self,
        to: i32,
        chunk: &super::Chunk,
    ) -> Option<(BTreeSet<String>, Vec<Gather>)> {
        let mut starts: Vec<Gather> = Vec::new();
        for p in &chunk.pushes {
            let Some(copy) = &p.copy else {
                continue;
            };
            let size = copy
                .attrs
                .iter()
                .find(|(k, _)| k == ec::SIZE_ATTR)
                .and_then(|(_, v)| postcard::from_bytes::<u64>(v).ok());
            let Some(size) = size else {
                tracing::warn!(pg = %self.id, "backfill: '{}' has no size on this shard", p.name);
                return None;
            };
            starts.push(Gather::new(
                Purpose::Chunk { to, plan: None },
                super::recovery::oid(&p.name),
                ObjState {
                    exists: true,
                    size,
                    version: p.version,
                },
            ));
        }
        Some((starts.iter().map(|g| g.oid.name.clone()).collect(), starts))
    }

    /// One object of a backfill chunk rebuilt for `to` (or not: that
    /// chunk and those after it are dropped and planned again).
    fn chunk_rebuilt(
        &mut self,
        to: i32,
        name: &str,
        version: Version,
        shard: Result<Vec<u8>, String>,
        fx: &mut Vec<Effect>,
    ) {
        let pos = self.shard_of(to);
        let Some(b) = self.rec.backfill.get_mut(&to) else {
            return;
        };
        let super::BfStep::Copying { flights, .. } = &mut b.step else {
            return;
        };
        let Some(at) = flights.iter().position(|f| {
            f.first.as_ref().is_some_and(|w| w.contains(name))
                && f.chunk
                    .pushes
                    .iter()
                    .any(|p| p.name == name && p.version == version)
        }) else {
            return;
        };
        let data = match shard {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(pg = %self.id, "backfill of osd.{to}: cannot rebuild '{name}': {e}");
                return self.chunk_failed(to, Some(at));
            }
        };
        let f = &mut flights[at];
        if let Some(w) = f.first.as_mut() {
            w.remove(name);
        }
        if let Some(c) = f
            .chunk
            .pushes
            .iter_mut()
            .find(|p| p.name == name && p.version == version)
            .and_then(|p| p.copy.as_mut())
        {
            c.data = data.into();
            if let Some(i) = pos {
                c.attrs = ec::with_shard(std::mem::take(&mut c.attrs), i);
            }
        }
        self.send_ready(to, fx);
    }

    /// Push each target its rebuilt shard (or retry later).
    #[allow(clippy::too_many_arguments)]
    fn push_rebuilt(
        &mut self,
        tid: u64,
        oid: &ObjectId,
        version: Version,
        targets: BTreeSet<i32>,
        attrs: Vec<(String, Vec<u8>)>,
        rebuilt: Result<BTreeMap<usize, Vec<u8>>, String>,
        fx: &mut Vec<Effect>,
    ) {
        let shards = match rebuilt {
            Ok(x) => x,
            Err(e) => {
                self.rec.pushing.remove(&tid);
                tracing::warn!(pg = %self.id, "cannot rebuild '{}': {e}", oid.name);
                self.rec
                    .retry
                    .insert(oid.name.clone(), self.now_ms + super::RECOVERY_RETRY_MS);
                return;
            }
        };
        let ctx = self.rep_ctx();
        for &to in &targets {
            let Some(c) = self.shard_of(to) else {
                continue;
            };
            let data = shards.get(&c).cloned().unwrap_or_default();
            let msg = PeerMsg::Push {
                pg: self.id,
                from: self.whoami,
                ctx: ctx.clone(),
                push: super::Push {
                    name: oid.name.clone(),
                    version,
                    copy: Some(super::recovery::ObjectCopy {
                        data: data.into(),
                        attrs: ec::with_shard(attrs.clone(), c),
                        omap_header: Vec::new(),
                        omap: Vec::new(),
                    }),
                },
            };
            self.send(tid, to, msg, fx);
        }
    }

    /// Pulling: a complete member's copy of `name` (its own shard, with
    /// the object's xattrs, version and size) is here. A removal applies as
    /// it is; otherwise this primary's shard is rebuilt from the complete
    /// members' shards.
    pub(super) fn ec_pulled(
        &mut self,
        s: &dyn ObjectStore,
        push: super::Push,
        fx: &mut Vec<Effect>,
    ) {
        let Some(copy) = push.copy else {
            return self.apply_pulled(s, push, fx);
        };
        let size = copy
            .attrs
            .iter()
            .find(|(k, _)| k == ec::SIZE_ATTR)
            .and_then(|(_, v)| postcard::from_bytes::<u64>(v).ok());
        let Some(size) = size else {
            return self.pull_failed(&format!("'{}' has no size on its shard", push.name), fx);
        };
        let mut targets = BTreeSet::new();
        targets.insert(self.whoami);
        let g = Gather::new(
            Purpose::Rebuild {
                pull: true,
                targets,
                plan: None,
                attrs: copy.attrs,
            },
            super::recovery::oid(&push.name),
            ObjState {
                exists: true,
                size,
                version: push.version,
            },
        );
        self.gather(s, g, fx);
    }

    /// This primary's own shard rebuilt: apply it as a pulled copy.
    #[allow(clippy::too_many_arguments)]
    fn pulled_rebuilt(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        oid: &ObjectId,
        version: Version,
        attrs: Vec<(String, Vec<u8>)>,
        rebuilt: Result<BTreeMap<usize, Vec<u8>>, String>,
        fx: &mut Vec<Effect>,
    ) {
        // Only for the pulling this gather served: once the primary peers
        // again, a late rebuild must not land in the store behind the new
        // peering's back (else the primary activates, and a read finds the
        // shard before the rebuilt one is durable).
        let ours = match &mut self.role {
            Role::Pulling { pulls, .. } => pulls.remove(&tid).is_some(),
            _ => false,
        };
        if !ours {
            return;
        }
        let mine = self.shard_of(self.whoami);
        let data = match rebuilt.map(|mut m| mine.and_then(|c| m.remove(&c))) {
            Ok(Some(d)) => d,
            Ok(None) => {
                return self.pull_failed(&format!("no shard of '{}' for this OSD", oid.name), fx)
            }
            Err(e) => return self.pull_failed(&format!("cannot rebuild '{}': {e}", oid.name), fx),
        };
        let push = super::Push {
            name: oid.name.clone(),
            version,
            copy: Some(super::recovery::ObjectCopy {
                data: data.into(),
                attrs: mine.map_or(attrs.clone(), |c| ec::with_shard(attrs, c)),
                omap_header: Vec::new(),
                omap: Vec::new(),
            }),
        };
        self.apply_pulled(s, push, fx);
    }

    /// Recover `name` on the members that lack it: rebuild their shards
    /// from the others, then push them (`pushing[tid]` from the start, so
    /// the throttles count it and ops on the object wait for it).
    pub(super) fn ec_push(
        &mut self,
        s: &dyn ObjectStore,
        name: String,
        targets: BTreeSet<i32>,
        fx: &mut Vec<Effect>,
    ) {
        if let Some(&fate) = self.ecs.unfound.get(&name) {
            // Being rolled back: this copy's own is not the head's. A
            // rollback that could not go on (fewer than k members would
            // take it, a read failed) starts again from here once its
            // retry is due and none is on its way: nothing else starts it
            // again (with OSDs declared lost, a rollback waited for a
            // backfill target to pass the object, the target did, and the
            // object stayed unfound, its ops waiting, for good).
            let due = self
                .rec
                .retry
                .get(&name)
                .is_none_or(|at| *at <= self.now_ms);
            if matches!(fate, Unfound::RevertTo(_)) && due && !self.on_its_way(&name, false) {
                self.settle_unfound(s, name, fate, fx);
                return;
            }
            self.rec
                .retry
                .insert(name, self.now_ms + super::RECOVERY_RETRY_MS);
            return;
        }
        let oid = super::recovery::oid(&name);
        let read = ec::obj_state(s, self.coll, &oid).and_then(|st| {
            let attrs = if st.exists {
                s.getattrs(self.coll, &oid)
                    .map_err(crate::exec::store_err)?
                    .into_iter()
                    .collect()
            } else {
                Vec::new()
            };
            Ok((st, attrs))
        });
        let (st, attrs): (ObjState, Vec<(String, Vec<u8>)>) = match read {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(pg = %self.id, "cannot read '{name}' to recover it: {e}");
                self.rec
                    .retry
                    .insert(name, self.now_ms + super::RECOVERY_RETRY_MS);
                return;
            }
        };
        self.rec.retry.remove(&name);
        self.ops.busy.entry(name.clone()).or_default();
        if !st.exists {
            // Gone: every target removes its copy.
            let tid = self.take_tid();
            let ctx = self.rep_ctx();
            for &to in &targets {
                let msg = PeerMsg::Push {
                    pg: self.id,
                    from: self.whoami,
                    ctx: ctx.clone(),
                    push: super::Push {
                        name: name.clone(),
                        version: Version::default(),
                        copy: None,
                    },
                };
                self.send(tid, to, msg, fx);
            }
            self.rec.pushing.insert(tid, (name, targets));
            return;
        }
        let g = Gather::new(
            Purpose::Rebuild {
                pull: false,
                targets,
                plan: None,
                attrs,
            },
            oid,
            st,
        );
        self.gather(s, g, fx);
    }

    /// A new interval: gathers in flight are answered "wrong primary"
    /// (their clients retry under the new map).
    pub(super) fn abandon_gathers(&mut self, epoch: Epoch, fx: &mut Vec<Effect>) {
        self.ecs.read_damaged.clear();
        for (_, g) in std::mem::take(&mut self.ecs.gathers) {
            if let Some(p) = g.pending() {
                fx.push(reply(
                    p.token,
                    Err(OpError::WrongPrimary { epoch }),
                    Version::default(),
                    epoch,
                ));
            }
        }
    }

    /// Gathers past their op's deadline fail.
    pub(super) fn expire_gathers(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let now = self.now_ms;
        let late: Vec<u64> = self
            .ecs
            .gathers
            .iter()
            .filter(|(_, g)| g.pending().is_some_and(|p| p.deadline_ms <= now))
            .map(|(&t, _)| t)
            .collect();
        for tid in late {
            if let Some(g) = self.ecs.gathers.remove(&tid) {
                // As for any op that waited past its deadline: the PG
                // could not serve it (the client retries).
                tracing::warn!(pg = %self.id, "shard reads of '{}' took too long", g.oid.name);
                let e = self.unavailable();
                self.gather_failed(s, g, e, fx);
            }
        }
    }

    /// As a member (or a stray copy): read extents of this copy's shard
    /// `shard` of `name`, which must be at `version`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_shard_read(
        &mut self,
        s: &dyn ObjectStore,
        name: &str,
        extents: &[(u64, u64)],
        version: Version,
        shard: usize,
        token: u64,
        fx: &mut Vec<Effect>,
    ) {
        // Version- and shard-checked: a copy that lists the object missing
        // may hold the version wanted all the same (the only other shard
        // of an object may be on such a copy).
        let oid = super::recovery::oid(name);
        let Some(striper) = self.ec.clone() else {
            let e = RepError::Failed("not an erasure-coded PG".into());
            return fx.push(Effect::Answer {
                token,
                reply: PeerReply::from_error(e),
            });
        };
        let result = match read_shard(s, self.coll, &oid, Some(shard), version, extents, &striper) {
            Err(RepError::Absent(why)) => Err(self.lacks(s, name, version, why)),
            r => r,
        };
        fx.push(Effect::answer(token, result, |d: Vec<Bytes>| {
            PeerReply::ShardData(d.into_iter().map(loligo_bulk::Bulk).collect())
        }));
    }
}

/// Read extents of this copy's shard `shard` of `o` at `version`: the
/// object itself, or its rollback copy when that holds the version (a
/// copy with a write the PG will roll back still has the version before
/// it there, and a primary catching up may need exactly that).
///
/// Each candidate's labels and bytes come from one read of the store
/// (`read_with_attrs`): this PG's own transactions commit while it runs,
/// and a backfill chunk that gave the object another shard at the same
/// version, committed between a read of the labels and a read of the
/// bytes, passed one shard's bytes off as another's (the thrash test read
/// a Zigzag parity's first bytes as the object). The shard object must
/// also be exactly as long as the code makes that shard of an object of
/// its size: one that is not holds another shard's bytes or a torn one,
/// and is refused (read around) rather than decoded.
pub(super) fn read_shard(
    s: &dyn ObjectStore,
    c: loligo_store::CollectionId,
    o: &ObjectId,
    shard: Option<usize>,
    version: Version,
    extents: &[(u64, u64)],
    striper: &stripe::Striper,
) -> Result<Vec<Bytes>, RepError> {
    let failed = RepError::Failed;
    let Some(shard) = shard else {
        return Err(RepError::Absent("this OSD holds no shard of the PG".into()));
    };
    let rb = ec::rollback_oid(o);
    let mut have = None;
    for (i, x) in [o, &rb].into_iter().enumerate() {
        let Some(r) = s.read_with_attrs(c, x, extents).map_err(|e| match e {
            // (Answered: this shard's data is no good.)
            StoreError::Checksum { .. } => RepError::Damaged(e.to_string()),
            e => failed(e.to_string()),
        })?
        else {
            continue;
        };
        if r.attrs.get(ec::SHARD_ATTR).map(Vec::as_slice) != Some(&[shard as u8][..]) {
            continue;
        }
        let v: Option<Version> = match r.attrs.get(VERSION_ATTR) {
            Some(b) => Some(
                postcard::from_bytes(b).map_err(|_| failed("corrupt version attribute".into()))?,
            ),
            None => None,
        };
        if i == 0 {
            have = v;
        }
        if v != Some(version) {
            continue;
        }
        let size: u64 = match r.attrs.get(ec::SIZE_ATTR) {
            Some(b) => {
                postcard::from_bytes(b).map_err(|_| failed("corrupt size attribute".into()))?
            }
            None => return Err(failed(format!("shard {shard} of '{}' has no size", o.name))),
        };
        let want = striper
            .shard_len(size, shard)
            .map_err(|e| failed(e.to_string()))?;
        if r.size != want {
            return Err(failed(format!(
                "shard {shard} of '{}' has the wrong length for its shard: {} bytes, where an object of {size} bytes has {want}",
                o.name, r.size
            )));
        }
        return Ok(r.extents);
    }
    // Definitive: asking again finds the same while the copy stays.
    Err(RepError::Absent(format!(
        "shard {shard} of '{}' is at {have:?}, the read wants {version}",
        o.name
    )))
}

/// A set as a pg_temp asks for it: holes (-1 in a PG's sets) as
/// `ITEM_NONE`.
pub(super) fn as_temp(v: &[i32]) -> Vec<i32> {
    v.iter()
        .map(|&o| if o < 0 { loligo_crush::ITEM_NONE } else { o })
        .collect()
}

/// The pg_temp that puts members whose OSDs moved back at the positions
/// of the shards they hold complete (`moved`: OSD -> shard), each
/// swapping places with the position's OSD, as Ceph's choose_acting keeps
/// each shard where a complete copy of it is; then holes take CRUSH's
/// OSDs (`fill_holes`). None if no member can go back. A position takes
/// one member back at most; a member put back is never moved again.
/// `acting` and `up` have holes as -1.
pub(super) fn moved_back(
    acting: &[i32],
    up: &[i32],
    moved: &BTreeMap<i32, usize>,
) -> Option<Vec<i32>> {
    let mut osds = as_temp(acting);
    let mut placed = BTreeSet::new();
    for (&osd, &shard) in moved {
        let Some(now) = osds.iter().position(|&o| o == osd) else {
            continue;
        };
        if shard >= osds.len() || now == shard || placed.contains(&shard) || placed.contains(&now) {
            continue;
        }
        osds.swap(now, shard);
        placed.insert(shard);
    }
    if placed.is_empty() {
        return None;
    }
    fill_holes(&mut osds, up);
    Some(osds)
}

/// The pg_temp `osds` (holes as `ITEM_NONE`) with complete copies out
/// of the acting set (`strays`: OSD -> the shard it holds) put back at
/// their shards' positions where the member there would otherwise be
/// relabeled at the cost of a shard no one else keeps: it holds another
/// position's shard (`held`: OSD -> shard), and no member is whole at
/// that shard's position (`whole`). As Ceph's choose_acting takes a
/// complete stray for a shard rather than backfill a member over the
/// shard it holds. The displaced member goes to its shard's position if
/// that is a hole, else leaves the set (no log relabels it: its copy
/// keeps its shard, read as a stray's). Whether any stray was put back.
pub(super) fn strays_back(
    osds: &mut [i32],
    strays: &BTreeMap<i32, usize>,
    held: &BTreeMap<i32, usize>,
    whole: &[i32],
) -> bool {
    let mut placed = false;
    for (&stray, &shard) in strays {
        let Some(&now) = osds.get(shard) else {
            continue;
        };
        let needed = |t: usize| t != shard && osds.get(t).is_some_and(|o| !whole.contains(o));
        let Some(&t) = held.get(&now).filter(|&&t| needed(t)) else {
            continue;
        };
        if osds.contains(&stray) || whole.contains(&now) {
            continue;
        }
        osds[shard] = stray;
        placed = true;
        if osds.get(t) == Some(&loligo_crush::ITEM_NONE) {
            osds[t] = now;
        }
    }
    debug_assert!(
        osds.iter()
            .filter(|&&o| o != loligo_crush::ITEM_NONE)
            .all(|o| osds.iter().filter(|&x| x == o).count() == 1),
        "an OSD twice in {osds:?}"
    );
    placed
}

/// Of the members whose OSDs moved (`moved`: OSD -> the shard its copy
/// holds), those that wait outside the write set while fewer than `k`
/// members are whole at their own positions (`whole`, the primary
/// included): each acting member whose shard no such member holds. None
/// if `k` are, or if too few positions would be left for `k` whole
/// members without the ones that wait (`Pg::moved_to_wait`). `acting`
/// has holes as -1.
pub(super) fn moved_to_wait(
    acting: &[i32],
    whole: &[i32],
    moved: &BTreeMap<i32, usize>,
    k: usize,
) -> BTreeMap<i32, usize> {
    if whole.len() >= k {
        return BTreeMap::new();
    }
    let held = |shard: usize| acting.get(shard).is_some_and(|o| whole.contains(o));
    let wait: BTreeMap<i32, usize> = moved
        .iter()
        .filter(|&(o, &shard)| acting.contains(o) && !held(shard))
        .map(|(&o, &shard)| (o, shard))
        .collect();
    let members = acting.iter().filter(|&&o| o >= 0).count();
    if members.saturating_sub(wait.len()) < k {
        return BTreeMap::new();
    }
    wait
}

/// Fill each hole of a pg_temp (`ITEM_NONE`) with CRUSH's OSD for that
/// position, if that OSD is not elsewhere in it: it joins as a backfill
/// target (else, with positions moving, the hole stays, and with it the
/// pg_temp).
fn fill_holes(osds: &mut [i32], up: &[i32]) {
    for i in 0..osds.len() {
        let Some(&u) = up.get(i) else { continue };
        if osds[i] == loligo_crush::ITEM_NONE && u >= 0 && !osds.contains(&u) {
            osds[i] = u;
        }
    }
}

/// The next pg_temp of an erasure-coded PG whose acting set (`acting`, a
/// pg_temp; holes -1) is not CRUSH's (`up`): an empty one to drop it, or
/// None to keep it. Positions are shards and an OSD holds one shard of a
/// PG, so an OSD that changes position must be backfilled, and every
/// step keeps at least `k` members complete at their positions:
///
/// 1. A hole whose CRUSH OSD is not in the set takes it (at any time: a
///    backfill target, nothing is lost).
/// 2. Once every member is complete (`settled`): if CRUSH's set keeps at
///    least `k` of them in place, the pg_temp goes (CRUSH's primary then
///    backfills the rest).
/// 3. Otherwise one position takes its CRUSH OSD: a hole or a member that
///    CRUSH's set lacks gives way to it, or it swaps places with it;
///    whichever keeps at least `k` members in place, holes first. Each
///    step brings one more position to CRUSH's choice, so the walk ends
///    (with positions moving, acting [2, 3, 0, -1] against CRUSH's [0, 1,
///    2, 3] could never drop its pg_temp).
/// 4. When no such step keeps `k` in place (two members must swap with
///    one parity shard: acting [2, 1, 3] against CRUSH's [3, 1, 2]), a
///    member CRUSH places elsewhere gives its position to a spare (an OSD
///    of `spares` the set does not hold, a backfill target), if `k` stay
///    in place: the member is then free to take its CRUSH position, and
///    the spare leaves when its position takes its own CRUSH OSD. An OSD
///    holds one collection per PG, so it cannot hold two shards while
///    they swap, as Ceph's per-shard collections can.
pub(super) fn ec_temp_step(
    acting: &[i32],
    up: &[i32],
    k: usize,
    settled: bool,
    spares: &[i32],
) -> Option<Vec<i32>> {
    let n = acting.len().min(up.len());
    let want = |i: usize| up[i] >= 0 && acting[i] != up[i];
    // 1. Holes CRUSH's OSDs can fill without leaving another position.
    let mut filled = acting.to_vec();
    for i in (0..n).filter(|&i| want(i) && acting[i] < 0 && !acting.contains(&up[i])) {
        filled[i] = up[i];
    }
    if filled != acting {
        return Some(as_temp(&filled));
    }
    if !settled {
        return None;
    }
    // 2. Enough members stay in place: CRUSH's set takes over.
    let kept = (0..n).filter(|&i| up[i] >= 0 && up[i] == acting[i]).count();
    if kept >= k {
        return Some(Vec::new());
    }
    // 3. One position more to CRUSH's choice.
    let members = acting.iter().filter(|&&o| o >= 0).count();
    let mut best: Option<(usize, Vec<i32>)> = None;
    for i in (0..n).filter(|&i| want(i)) {
        let mut next = acting.to_vec();
        let moved = match acting.iter().position(|&o| o == up[i]) {
            // Swap: both positions' members change (a hole moves).
            Some(j) => {
                next.swap(i, j);
                usize::from(acting[i] >= 0) + 1
            }
            // Replace: the member there leaves.
            None => {
                next[i] = up[i];
                usize::from(acting[i] >= 0)
            }
        };
        if members - moved >= k && best.as_ref().is_none_or(|(m, _)| moved < *m) {
            best = Some((moved, next));
        }
    }
    if let Some((_, next)) = best {
        return Some(as_temp(&next));
    }
    // 4. A member CRUSH wants at another position makes way for a spare.
    let spare = spares
        .iter()
        .copied()
        .find(|s| *s >= 0 && !acting.contains(s) && !up.contains(s))?;
    let misplaced =
        (0..n).find(|&j| acting[j] >= 0 && acting[j] != up[j] && up.contains(&acting[j]))?;
    if members <= k {
        return None;
    }
    let mut next = acting.to_vec();
    next[misplaced] = spare;
    Some(as_temp(&next))
}

/// A settled pg_temp that [`ec_temp_step`] cannot move (no step keeps
/// `k` members in place): its holes take CRUSH's OSDs that are not in it,
/// whatever their CRUSH positions, if the set then walks to CRUSH's
/// (`walks_to_crush`). They join as backfill targets, and the walk has
/// members to spare (with positions moving and OSDs declared lost,
/// `[3, -, -, 2]` against CRUSH's `[1, 2, 3, 0]` with k 2, each member at
/// the other's CRUSH position and each hole's CRUSH OSD a member, stayed
/// undersized for good). Only a stuck pg_temp: in `ec_temp_step` itself
/// this rule also changed which pg_temps peering judged able to walk back,
/// and stalled a PG whose positions moved, with OSDs declared lost.
pub(super) fn ec_temp_unstick(
    acting: &[i32],
    up: &[i32],
    k: usize,
    spares: &[i32],
) -> Option<Vec<i32>> {
    let mut free = up
        .iter()
        .copied()
        .filter(|&o| o >= 0 && !acting.contains(&o));
    let mut next = acting.to_vec();
    for o in next.iter_mut().filter(|o| **o < 0) {
        *o = free.next()?;
    }
    (next != acting && walks_to_crush(&next, up, k, spares)).then(|| as_temp(&next))
}

/// Whether a settled, erasure-coded `acting` set (a pg_temp) is whole
/// (`size` members, no hole) and yet cannot take a step toward CRUSH's
/// `up`: its members must change places among themselves, and with one
/// parity shard and no spare OSD every step would leave fewer than `k`
/// in place (an OSD holds one collection per PG, so it cannot hold its
/// old shard while it is backfilled to its new one). Such a PG keeps its
/// placement, fully redundant: active+clean+remapped, as Ceph shows a PG
/// whose complete acting set is not CRUSH's. A spare OSD that comes later
/// lets it walk (`ec_temp_step`'s rule 4).
pub(super) fn stuck_in_place(
    acting: &[i32],
    up: &[i32],
    k: usize,
    size: usize,
    spares: &[i32],
) -> bool {
    let whole = acting.len() == size && acting.iter().all(|&o| o >= 0);
    whole
        && acting != up
        && ec_temp_step(acting, up, k, true, spares).is_none()
        && ec_temp_unstick(acting, up, k, spares).is_none()
}

/// Whether [`ec_temp_step`] walks `acting` (a pg_temp; holes
/// `ITEM_NONE` or -1) all the way to CRUSH's `up`, each step's backfills
/// ending at once. One it cannot walk would hold for good: with one
/// parity shard and no spare, two members that must swap positions leave
/// fewer than `k` in place whichever goes first.
pub(super) fn walks_to_crush(acting: &[i32], up: &[i32], k: usize, spares: &[i32]) -> bool {
    let holes = loligo_crush::placement::holes_as_minus_one;
    let mut now = holes(acting);
    for _ in 0..=3 * up.len() {
        match ec_temp_step(&now, up, k, true, spares) {
            None => return false,
            Some(next) if next.is_empty() => return true,
            Some(next) => now = holes(&next),
        }
    }
    false
}

/// The shards a rebuild plan makes from what was fetched, with the lost
/// shards a stray held whole (`copy`) as read.
fn rebuilt_shards(
    striper: &stripe::Striper,
    plan: &Option<stripe::RebuildPlan>,
    fetched: &Fetched<Bytes>,
    copy: &[usize],
) -> Result<BTreeMap<usize, Vec<u8>>, String> {
    let rp = plan.as_ref().ok_or_else(|| "no rebuild plan".to_string())?;
    let mut m = striper
        .decode_rebuild(rp, fetched)
        .map_err(|e| e.to_string())?;
    for c in copy {
        let bytes: Vec<u8> = fetched
            .get(c)
            .map(|v| v.iter().flat_map(|(_, b)| b.iter().copied()).collect())
            .unwrap_or_default();
        m.insert(*c, bytes);
    }
    Ok(m)
}

/// The shard reads a gather needs from the shards `avail` can serve
/// (`lost`: those a rebuild or a chunk makes), with each read's plan kept
/// in `g.what`; why not, when the shards cannot be decoded.
fn plan_gather(
    striper: &stripe::Striper,
    g: &mut Gather,
    avail: &[usize],
    lost: &[usize],
) -> Result<ShardReads, String> {
    let size = g.st.size;
    let mut want = ShardReads::new();
    let add = |want: &mut ShardReads, rp: &stripe::ReadPlan| {
        for (&c, exts) in &rp.reads {
            want.entry(c).or_default().extend(exts.iter().copied());
        }
    };
    match &mut g.what {
        Purpose::Op { plan, reads, .. } => {
            reads.clear();
            for r in &plan.fetch {
                let rp = striper
                    .plan_read(size, r.clone(), avail, striper.coalesce())
                    .map_err(|e| e.to_string())?;
                add(&mut want, &rp);
                reads.push(rp);
            }
        }
        Purpose::Revert { reads, .. } => {
            reads.clear();
            if size > 0 {
                let rp = striper
                    .plan_read(size, 0..size, avail, striper.coalesce())
                    .map_err(|e| e.to_string())?;
                add(&mut want, &rp);
                reads.push(rp);
            }
        }
        Purpose::Rebuild { plan, .. }
        | Purpose::Chunk { plan, .. }
        | Purpose::Repair { plan, .. } => {
            let from: Vec<usize> = avail
                .iter()
                .copied()
                .filter(|c| !lost.contains(c))
                .collect();
            let rp = striper
                .plan_rebuild(size, lost, &from, striper.coalesce())
                .map_err(|e| e.to_string())?;
            want = rp.reads.clone();
            for &c in &g.copy {
                let len = striper.shard_len(size, c).map_err(|e| e.to_string())?;
                if len > 0 {
                    want.insert(c, vec![(0, len)]);
                }
            }
            *plan = Some(rp);
        }
    }
    Ok(want)
}

#[cfg(test)]
mod tests {
    use super::{
        ec_temp_step, ec_temp_unstick, moved_back, moved_to_wait, strays_back, stuck_in_place,
        walks_to_crush,
    };
    use loligo_crush::ITEM_NONE;
    use loligo_testkit::Rng;
    use std::collections::BTreeMap;

    /// Follow `ec_temp_step` (and `ec_temp_unstick` where it is stuck, as
    /// a primary does) from `acting` as if every step's backfills ended at
    /// once; the number of steps until the pg_temp goes. Every step keeps
    /// at least `k` members in place.
    fn walk(acting: &[i32], up: &[i32], k: usize) -> usize {
        walk_with(acting, up, k, &[])
    }

    /// [`walk`] with `spares` for the pg_temps to take.
    fn walk_with(acting: &[i32], up: &[i32], k: usize, spares: &[i32]) -> usize {
        let mut now = acting.to_vec();
        for steps in 0..=3 * up.len() {
            let next = ec_temp_step(&now, up, k, true, spares)
                .or_else(|| ec_temp_unstick(&now, up, k, spares))
                .unwrap_or_else(|| panic!("stuck at {now:?} (CRUSH's {up:?}, k {k})"));
            if next.is_empty() {
                let kept = (0..up.len())
                    .filter(|&i| up[i] >= 0 && up[i] == now[i])
                    .count();
                assert!(kept >= k, "{now:?} dropped with {kept} of CRUSH's in place");
                return steps;
            }
            let next = loligo_crush::placement::holes_as_minus_one(&next);
            let in_place = (0..now.len())
                .filter(|&i| now[i] >= 0 && now[i] == next[i])
                .count();
            assert!(
                in_place >= k,
                "{now:?} -> {next:?} keeps {in_place} in place (k {k})"
            );
            let mut osds: Vec<i32> = next.iter().copied().filter(|&o| o >= 0).collect();
            osds.sort_unstable();
            osds.dedup();
            assert_eq!(
                osds.len(),
                next.iter().filter(|&&o| o >= 0).count(),
                "{next:?} repeats an OSD"
            );
            now = next;
        }
        panic!(
            "no end after {} steps from {acting:?} toward {up:?}",
            3 * up.len()
        );
    }

    #[test]
    fn a_stuck_pg_temp_fills_its_holes_with_free_crush_osds() {
        // EC lost sim seed 83143 with moving positions.
        let (acting, up) = ([3, -1, -1, 2], [1, 2, 3, 0]);
        assert_eq!(ec_temp_step(&acting, &up, 2, true, &[]), None);
        let next = ec_temp_unstick(&acting, &up, 2, &[]).unwrap();
        assert_eq!(next, vec![3, 1, 0, 2]);
        assert!(walk(&next, &up, 2) >= 1);
        // Never into a set that cannot walk on: with one parity shard
        // [2, 1, 3] against [1, 2, 3] would hold for good.
        assert_eq!(ec_temp_unstick(&[2, -1, 3], &[1, 2, 3], 2, &[]), None);
        // Nor with too few free OSDs for every hole.
        assert_eq!(
            ec_temp_unstick(&[3, -1, -1, 2], &[1, 2, 3, -1], 2, &[]),
            None
        );
    }

    #[test]
    fn moved_members_wait_while_fewer_than_k_are_whole_in_place() {
        // EC lost sim seed 113298 (strict late records): RS 2+1, the
        // primary osd.3 whole at position 1, osd.2 a backfill target at
        // position 0, osd.1 moved to position 2 holding shard 0.
        let moved = BTreeMap::from([(1, 0)]);
        assert_eq!(
            moved_to_wait(&[2, 3, 1], &[3], &moved, 2),
            BTreeMap::from([(1, 0)])
        );
        // With k members whole in place, nothing waits.
        assert!(moved_to_wait(&[2, 3, 1], &[3, 2], &moved, 2).is_empty());
        // A moved member whose shard a whole member holds at its own
        // position does not wait (RS 2+2: osd.4 holds shard 1, which
        // osd.3 holds whole at position 1).
        let moved = BTreeMap::from([(4, 1), (1, 0)]);
        assert_eq!(
            moved_to_wait(&[2, 3, 1, 4], &[3], &moved, 2),
            BTreeMap::from([(1, 0)])
        );
        // A moved copy out of the acting set is a stray already.
        assert!(moved_to_wait(&[2, 3, -1], &[3], &BTreeMap::from([(1, 0)]), 2).is_empty());
        // Never so many that fewer than k positions are left for whole
        // members: RS 2+1 with both others moved.
        let moved = BTreeMap::from([(1, 0), (2, 2)]);
        assert!(moved_to_wait(&[2, 3, 1], &[3], &moved, 2).is_empty());
    }

    #[test]
    fn complete_strays_go_back_where_a_relabel_would_cost_a_shard() {
        const NONE: i32 = loligo_crush::ITEM_NONE;
        // RS 2+2 after osd lost: the primary osd.3 whole at position 0,
        // osd.1 moved to position 1 holding (mid-backfill) shard 2, and
        // osd.0, whole with shard 1, up but out of CRUSH's set.
        // Backfilling osd.1 at position 1 would overwrite the only up
        // copy of shard 2 with a second copy of shard 1: osd.0 takes
        // position 1 and osd.1 the hole at its shard's position 2.
        let mut osds = vec![3, 1, NONE, NONE];
        let strays = BTreeMap::from([(0, 1)]);
        let held = BTreeMap::from([(1, 2)]);
        assert!(strays_back(&mut osds, &strays, &held, &[3]));
        assert_eq!(osds, [3, 0, 1, NONE]);
        // Its shard's position taken (not whole there): it leaves the set.
        let mut osds = vec![3, 1, 2, NONE];
        assert!(strays_back(&mut osds, &strays, &held, &[3]));
        assert_eq!(osds, [3, 0, 2, NONE]);
        // Its shard held whole at its own position: the relabel costs
        // nothing, it stays.
        let mut osds = vec![3, 1, 2, NONE];
        assert!(!strays_back(&mut osds, &strays, &held, &[3, 2]));
        assert_eq!(osds, [3, 1, 2, NONE]);
        // A member holding its own position's shard (or none) stays.
        let mut osds = vec![3, 1, NONE, NONE];
        assert!(!strays_back(&mut osds, &strays, &BTreeMap::new(), &[3]));
        assert_eq!(osds, [3, 1, NONE, NONE]);
        // Two strays of one shard: the first only.
        let strays = BTreeMap::from([(0, 1), (4, 1)]);
        let mut osds = vec![3, 1, NONE, NONE];
        assert!(strays_back(&mut osds, &strays, &held, &[3]));
        assert_eq!(osds, [3, 0, 1, NONE]);
    }

    #[test]
    fn moved_complete_members_swap_back_to_their_shards() {
        // EC sim seed 119 with moving positions: osd.3 and osd.1 swapped
        // positions 1 and 3 while the others were mid-backfill.
        let moved = BTreeMap::from([(1, 1), (3, 3)]);
        assert_eq!(
            moved_back(&[2, 3, 0, 1], &[2, 3, 0, 1], &moved),
            Some(vec![2, 1, 0, 3])
        );
        // A member at its shard's position, or none moved: nothing to do.
        assert_eq!(moved_back(&[2, 1, 0, 3], &[2, 3, 0, 1], &moved), None);
        assert_eq!(
            moved_back(&[2, 3, 0, 1], &[2, 3, 0, 1], &BTreeMap::new()),
            None
        );
        // Into a hole: the member's old position is left as a hole, which
        // CRUSH's OSD for it fills if that OSD is free.
        let moved = BTreeMap::from([(3, 1)]);
        assert_eq!(
            moved_back(&[0, -1, 2, 3], &[0, 1, 2, 4], &moved),
            Some(vec![0, 3, 2, 4])
        );
        assert_eq!(
            moved_back(&[0, -1, 2, 3], &[0, 1, 2, 0], &moved),
            Some(vec![0, 3, 2, ITEM_NONE])
        );
        // Two members claiming one shard: the first goes back, the other
        // stays.
        let moved = BTreeMap::from([(1, 0), (2, 0)]);
        assert_eq!(
            moved_back(&[3, 1, 2, 0], &[3, 1, 2, 0], &moved),
            Some(vec![1, 3, 2, 0])
        );
    }

    #[test]
    fn a_hole_takes_its_crush_osd_even_while_backfills_run() {
        assert_eq!(
            ec_temp_step(&[0, -1, 2, 3], &[0, 1, 2, 3], 2, false, &[]),
            Some(vec![0, 1, 2, 3])
        );
        // Not while that OSD holds another position: that waits.
        assert_eq!(
            ec_temp_step(&[0, -1, 2, 1], &[0, 1, 2, 3], 2, false, &[]),
            None
        );
    }

    #[test]
    fn the_pg_temp_goes_once_crush_keeps_k_complete_members_in_place() {
        assert_eq!(
            ec_temp_step(&[0, 3, 2, 1], &[0, 1, 2, 3], 2, true, &[]),
            Some(vec![])
        );
        // Never before every member is complete.
        assert_eq!(
            ec_temp_step(&[0, 3, 2, 1], &[0, 1, 2, 3], 2, false, &[]),
            None
        );
        // With only one in place it walks on instead.
        let next = ec_temp_step(&[0, 3, 1, 2], &[0, 1, 2, 3], 2, true, &[]).unwrap();
        assert!(!next.is_empty());
    }

    #[test]
    fn every_position_moved_walks_to_crush_keeping_k_in_place() {
        // EC sim seed 831 with moving positions.
        assert!(walk(&[2, 3, 0, -1], &[0, 1, 2, 3], 2) >= 2);
        assert!(walk(&[1, 2, 3, 0], &[0, 1, 2, 3], 2) >= 1);
        assert!(walk(&[5, 4, 3, 2, 1, 0], &[0, 1, 2, 3, 4, 5], 4) >= 1);
    }

    /// With one parity shard, two members that must swap positions (a
    /// pg_temp kept after CRUSH's indep rule moved them while an OSD was
    /// out) walk through a spare OSD, one backfill at a time, never with
    /// fewer than k in place; without one they cannot.
    #[test]
    fn members_that_must_swap_walk_through_a_spare() {
        let (acting, up) = ([2, 1, 3], [3, 1, 2]);
        assert_eq!(ec_temp_step(&acting, &up, 2, true, &[]), None);
        assert!(!walks_to_crush(&acting, &up, 2, &[]));
        // The spare takes a misplaced member's position; spares in the
        // set or in CRUSH's are not spares.
        assert_eq!(
            ec_temp_step(&acting, &up, 2, true, &[3, 2, 0]),
            Some(vec![0, 1, 3])
        );
        assert!(walks_to_crush(&acting, &up, 2, &[0]));
        assert!(walk_with(&acting, &up, 2, &[0]) >= 2);
        // A hole, a member at another's CRUSH position, and a member
        // CRUSH does not name: the hole takes a free CRUSH OSD, and the
        // member that left is the spare.
        let (acting, up) = ([2, 0, -1], [3, 1, 2]);
        let next = ec_temp_unstick(&acting, &up, 2, &[0]).unwrap();
        assert!(walk_with(&next, &up, 2, &[0]) >= 2);
        // Never below k in place: two members and a hole cannot spare one.
        assert_eq!(ec_temp_step(&[2, -1, 3], &[3, 2, 1], 2, true, &[0]), None);
        // Nor before every member is complete.
        assert_eq!(ec_temp_step(&[2, 1, 3], &[3, 1, 2], 2, false, &[0]), None);
    }

    /// With one parity shard on exactly k+m OSDs, a pgp_num step moves a
    /// PG's shards among its own OSDs: the whole set keeps its places
    /// (clean, remapped) until a spare OSD lets it walk; a set with a
    /// hole, or one that can step, is not stuck.
    #[test]
    fn a_whole_set_that_must_rotate_without_a_spare_is_stuck_in_place() {
        assert!(stuck_in_place(&[0, 1, 2], &[1, 2, 0], 2, 3, &[]));
        assert!(stuck_in_place(&[2, 1, 0], &[0, 1, 2], 2, 3, &[]));
        assert!(!stuck_in_place(&[2, 1, 0], &[0, 1, 2], 2, 3, &[3]));
        assert!(!stuck_in_place(&[2, -1, 0], &[0, 1, 2], 2, 3, &[]));
        assert!(!stuck_in_place(&[0, 1, 2], &[0, 1, 2], 2, 3, &[]));
        // Two parity shards: a rotation walks, one swap at a time.
        assert!(!stuck_in_place(&[0, 1, 2, 3], &[1, 2, 3, 0], 2, 4, &[]));
    }

    #[test]
    fn a_pg_temp_that_cannot_walk_back_is_told_apart() {
        // EC sim seed 216: with k 2 of 3, osd.2 put back at position 0
        // while CRUSH wants it at 1 and the third member is gone: no step
        // keeps two members in place.
        assert!(!walks_to_crush(&[2, ITEM_NONE, 3], &[1, 2, 3], 2, &[]));
        assert!(!walks_to_crush(&[2, 1, 3], &[1, 2, 3], 2, &[]));
        // EC sim seed 276959: k 2 of 4, two members swapped back; the
        // other two stay in place, so CRUSH's set can take over.
        assert!(walks_to_crush(&[3, 2, 1, 0], &[1, 2, 3, 0], 2, &[]));
        assert!(walks_to_crush(&[1, 2, 3, 0], &[1, 2, 3, 0], 2, &[]));
        // EC sim seed 293795: with a hole in CRUSH's set, three members
        // cannot swap two of them keeping two in place; once the hole
        // takes an OSD (here 100), four can.
        assert!(!walks_to_crush(&[1, 2, -1, 0], &[1, 0, -1, 2], 2, &[]));
        assert!(walks_to_crush(&[1, 2, -1, 0], &[1, 0, 100, 2], 2, &[]));
        // A walk `walk` below completes (seed 831).
        assert!(walks_to_crush(&[2, 3, 0, -1], &[0, 1, 2, 3], 2, &[]));
    }

    fn shuffle(rng: &mut Rng, v: &mut [i32]) {
        for i in (1..v.len()).rev() {
            v.swap(i, rng.below(i as u64 + 1) as usize);
        }
    }

    #[test]
    fn random_sets_always_reach_crush_in_bounded_steps() {
        let mut rng = Rng::new(18);
        let mut walked = 0;
        for _ in 0..5_000 {
            let n = 3 + rng.below(6) as usize;
            let m = 2 + rng.below((n - 2) as u64) as usize;
            let k = n.saturating_sub(m).max(1);
            // CRUSH's set: n distinct OSDs of n + 2.
            let mut pool: Vec<i32> = (0..(n + 2) as i32).collect();
            shuffle(&mut rng, &mut pool);
            let up = pool[..n].to_vec();
            shuffle(&mut rng, &mut pool);
            // The pg_temp: distinct OSDs, holes anywhere, at least k members.
            let mut acting: Vec<i32> = pool[..n].to_vec();
            for a in acting.iter_mut() {
                if rng.below(4) == 0 {
                    *a = -1;
                }
            }
            if acting.iter().filter(|&&o| o >= 0).count() < k {
                continue;
            }
            walk(&acting, &up, k);
            walked += 1;
        }
        assert!(walked > 1_000, "only {walked} sets walked");
    }
}
