//! Repairs of an erasure-coded PG (`pg repair`): the shards a scrub found
//! bad are rebuilt from the good ones (a gather, as recovery rebuilds a
//! lacking member's) and written over the bad ones: this primary's own
//! in its store, each member's by a `Repair` message (which the member
//! applies as a push whatever its missing set says).
//!
//! It must never read a bad shard to rebuild another, nor repair an
//! object that changed since it was compared (its version on this
//! primary's shard must still be the one the comparison found).

use super::erasure::{Gather, Purpose};
use super::*;
use crate::ec;

impl Pg {
    /// Rebuild `name`'s bad shards from its good ones and write them
    /// over the bad ones; the object is busy meanwhile (its ops wait).
    pub(super) fn ec_repair_object(
        &mut self,
        s: &dyn ObjectStore,
        name: String,
        fx: &mut Vec<Effect>,
    ) {
        let Some(i) = self.scrubber.found.get(&name) else {
            return;
        };
        let removed = i.rule == scrub_map::AuthRule::Removed;
        if removed || i.auth.is_empty() || self.ops.busy.contains_key(&name) {
            tracing::warn!(
                "pg {}: cannot repair {name} now (no good shards, removed, or in use)",
                self.id
            );
            return;
        }
        // (This primary's xattrs go with every rebuilt shard: they must
        // be good.)
        let own_data_only = (i.bad.get(&self.whoami)).is_none_or(|e| {
            e.iter().all(|e| {
                use scrub_map::ShardError as E;
                matches!(e, E::ReadError | E::EcHashError | E::EcSizeError)
            })
        });
        if !own_data_only {
            tracing::warn!(
                "pg {}: cannot repair {name}: this primary's own shard is wrong beyond its data",
                self.id
            );
            return;
        }
        let (version, targets) = (i.version, i.bad.keys().copied().collect::<BTreeSet<i32>>());
        let model = (i.auth.first())
            .and_then(|a| i.copies.get(a))
            .and_then(|c| c.as_ref().map(|c| c.attrs));
        let Some(want_attrs) = model else {
            tracing::warn!(
                "pg {}: cannot repair {name}: no good shard's xattrs",
                self.id
            );
            return;
        };
        self.ec_rebuild_shards(s, name, Some(version), targets, Some(want_attrs), fx);
    }

    /// After a client op read around damaged shards of `name` (their data
    /// failed its checksum): rebuild them from the others, as a repair
    /// does, once the object is free. Nothing is reported: the next deep
    /// scrub finds what this could not mend.
    pub(super) fn ec_repair_read_damage(
        &mut self,
        s: &dyn ObjectStore,
        name: &str,
        fx: &mut Vec<Effect>,
    ) {
        if self.ops.busy.contains_key(name) || !self.is_primary() {
            return;
        }
        let Some(osds) = self.ecs.read_damaged.remove(name) else {
            return;
        };
        // (A member that lacks the object is recovered, not repaired.)
        let targets: BTreeSet<i32> = (osds.into_iter())
            .filter(|&o| self.shard_of(o).is_some())
            .filter(|o| (self.rec.missing.get(o)).is_none_or(|m| !m.contains_key(name)))
            .collect();
        if targets.is_empty() {
            return;
        }
        tracing::warn!(
            "pg {}: a read of {name} went around damaged shards on osds {targets:?}: rebuilding them",
            self.id
        );
        self.scrubber.read_repairs += 1;
        self.ec_rebuild_shards(s, name.to_string(), None, targets, None, fx);
    }

    /// Rebuild `name`'s shards on `targets` from the others and write them
    /// over the old ones, at `version` (None: whichever version this
    /// primary's shard holds), with this primary's xattrs (which must
    /// digest to `want_attrs` when it is given); the object is busy
    /// meanwhile (its ops wait).
    fn ec_rebuild_shards(
        &mut self,
        s: &dyn ObjectStore,
        name: String,
        version: Option<Version>,
        targets: BTreeSet<i32>,
        want_attrs: Option<u64>,
        fx: &mut Vec<Effect>,
    ) {
        debug_assert!(!self.ops.busy.contains_key(&name));
        let oid = recovery::oid(&name);
        // The object's xattrs go with every rebuilt shard, from this
        // primary's shard (kept whole on every shard): only when they are
        // the good shards' (a corrupt size or hash list would spread).
        let attrs = match s.getattrs(self.coll, &oid) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(
                    "pg {}: cannot read {name}'s xattrs to repair it: {e}",
                    self.id
                );
                return;
            }
        };
        if want_attrs.is_some_and(|w| scrub_map::shard_attrs_digest(&attrs) != w) {
            tracing::warn!(
                "pg {}: cannot repair {name}: this primary's xattrs are not the good shards'",
                self.id
            );
            return;
        }
        let attrs: Vec<(String, Vec<u8>)> = attrs.into_iter().collect();
        let st = match ec::obj_state(s, self.coll, &oid) {
            Ok(st) if st.exists && version.is_none_or(|v| st.version == v) => st,
            _ => {
                tracing::warn!("pg {}: {name} changed since it was found bad", self.id);
                return;
            }
        };
        let bad: BTreeSet<usize> = targets.iter().filter_map(|&o| self.shard_of(o)).collect();
        let what = Purpose::Repair {
            targets,
            plan: None,
            attrs,
        };
        let mut g = Gather::new(what, oid, st);
        g.leave_out(bad);
        self.ops.busy.insert(name, VecDeque::new());
        self.gather(s, g, fx);
    }

    /// The bad shards of `oid` are rebuilt (or not: left for the next
    /// repair): written over this primary's own, pushed to the members.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ec_repair_rebuilt(
        &mut self,
        s: &dyn ObjectStore,
        oid: &ObjectId,
        version: Version,
        targets: BTreeSet<i32>,
        attrs: Vec<(String, Vec<u8>)>,
        rebuilt: Result<BTreeMap<usize, Vec<u8>>, String>,
        fx: &mut Vec<Effect>,
    ) {
        let name = oid.name.clone();
        let mut shards = match rebuilt {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("pg {}: cannot rebuild {name} to repair it: {e}", self.id);
                self.release(s, &name, fx);
                return self.repair_round_failed(s, name, fx);
            }
        };
        let mut waiting = BTreeMap::new();
        for to in targets {
            let Some(data) = self.shard_of(to).and_then(|c| shards.remove(&c)) else {
                continue;
            };
            let pos = self.shard_of(to).unwrap_or_default();
            let push = Push {
                name: name.clone(),
                version,
                copy: Some(recovery::ObjectCopy {
                    data: data.into(),
                    attrs: ec::with_shard(attrs.clone(), pos),
                    omap_header: Vec::new(),
                    omap: Vec::new(),
                }),
            };
            if to == self.whoami {
                let txn = recovery::push_txn(self.coll, &push, self.push_prior(s, &push));
                self.apply_own(txn, true, fx);
                self.copy_repaired(&name, to);
                continue;
            }
            let tid = self.take_tid();
            let msg = PeerMsg::Repair {
                pg: self.id,
                from: self.whoami,
                ctx: self.rep_ctx(),
                push,
            };
            self.send(tid, to, msg, fx);
            waiting.insert(tid, to);
        }
        if waiting.is_empty() {
            self.scrubber.repair_rounds.remove(&name);
            return self.release(s, &name, fx);
        }
        self.scrubber.repairing.insert(name, waiting);
    }
}
