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

use super::{reply, Effect, Pending, Pg, RepError, Role};
use crate::ec::{self, OldBytes, Plan};
use crate::exec::{ObjState, VERSION_ATTR};
use loligo_ec::plan::Coalesce;
use loligo_ec::stripe::{self, Fetched, ShardReads};
use loligo_store::{ObjectId, ObjectStore};
use loligo_types::ops::{OpError, Version};
use loligo_types::Epoch;
use std::collections::{BTreeMap, BTreeSet};

/// A client op waiting for shard bytes.
pub(super) struct Gather {
    pub(super) pending: Pending,
    oid: ObjectId,
    st: ObjState,
    plan: Plan,
    /// Shards left out after a failed read.
    bad: BTreeSet<usize>,
    /// One read plan per range of `plan.fetch`.
    reads: Vec<stripe::ReadPlan>,
    fetched: Fetched<Vec<u8>>,
    /// Shards whose answer is awaited, with their OSDs.
    waiting: BTreeMap<usize, i32>,
}

impl Pg {
    /// The shard index of `osd` in this interval's acting set.
    pub(super) fn shard_of(&self, osd: i32) -> Option<usize> {
        self.acting.iter().position(|&o| o == osd)
    }

    /// Shards a gather may read `name` from: members of the write set
    /// that do not lack it and are not backfill targets short of it.
    fn sources(&self, oid: &ObjectId) -> Vec<usize> {
        let ws: &[i32] = match &self.role {
            Role::Primary { write_set } | Role::Activating { write_set, .. } => write_set,
            _ => &[],
        };
        ws.iter()
            .filter(|o| {
                !self
                    .rec
                    .missing
                    .get(o)
                    .is_some_and(|m| m.contains_key(&oid.name))
            })
            .filter(|o| self.rec.backfill.get(o).is_none_or(|b| b.done.covers(oid)))
            .filter_map(|&o| self.shard_of(o))
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
        let epoch = self.epoch;
        let Some(striper) = self.ec.clone() else {
            return;
        };
        let size_max = self.pool.as_ref().map_or(0, |p| p.object_size_max);
        let planned = ec::obj_state(s, self.coll, &oid).and_then(|st| {
            ec::plan(&striper, s, self.coll, &oid, &st, &p.op.ops, size_max).map(|pl| (st, pl))
        });
        let (st, plan) = match planned {
            Ok(x) => x,
            Err(e) => return fx.push(reply(p.token, Err(e), Version::default(), epoch)),
        };
        let name = p.op.name.clone();
        let g = Gather {
            pending: p,
            oid,
            st,
            plan,
            bad: BTreeSet::new(),
            reads: Vec::new(),
            fetched: Fetched::new(),
            waiting: BTreeMap::new(),
        };
        // Other ops on the object wait behind this one.
        self.busy.entry(name).or_default();
        self.gather(s, g, fx);
    }

    /// Plan the reads of a gather around its bad shards and send them;
    /// finish it if nothing (more) is needed.
    fn gather(&mut self, s: &dyn ObjectStore, mut g: Gather, fx: &mut Vec<Effect>) {
        let Some(striper) = self.ec.clone() else {
            return;
        };
        let epoch = self.epoch;
        let avail: Vec<usize> = self
            .sources(&g.oid)
            .into_iter()
            .filter(|c| !g.bad.contains(c))
            .collect();
        let mut reads = Vec::new();
        let mut want = ShardReads::new();
        for r in &g.plan.fetch {
            match striper.plan_read(g.st.size, r.clone(), &avail, Coalesce::Conservative) {
                Ok(rp) => {
                    for (&c, exts) in &rp.reads {
                        want.entry(c).or_default().extend(exts.iter().copied());
                    }
                    reads.push(rp);
                }
                Err(e) => {
                    tracing::warn!(pg = %self.id, "object '{}': shards {avail:?} cannot be decoded: {e}", g.oid.name);
                    let err = OpError::Unavailable {
                        pg: self.id.to_string(),
                        have: avail.len() as u32,
                        need: striper.k() as u32,
                    };
                    return self.gather_failed(s, g, err, fx);
                }
            }
        }
        g.reads = reads;
        g.fetched.clear();
        g.waiting.clear();
        let tid = self.take_tid();
        for (c, exts) in want {
            let Some(&osd) = self.acting.get(c) else {
                continue;
            };
            if osd == self.whoami {
                match read_shard(s, self.coll, &g.oid, g.st.version, &exts) {
                    Ok(b) => {
                        g.fetched
                            .insert(c, exts.iter().map(|e| e.0).zip(b).collect());
                    }
                    Err(why) => {
                        tracing::warn!(pg = %self.id, "own shard {c} of '{}': {why}", g.oid.name);
                        g.bad.insert(c);
                        return self.gather(s, g, fx);
                    }
                }
            } else {
                g.waiting.insert(c, osd);
                fx.push(Effect::ReadShard {
                    tid,
                    to: osd,
                    epoch,
                    name: g.oid.name.clone(),
                    extents: exts,
                    version: g.st.version,
                });
            }
        }
        if g.waiting.is_empty() {
            self.gather_done(s, g, fx);
        } else {
            self.gathers.insert(tid, g);
        }
    }

    /// A member's answer to a shard read.
    pub(super) fn on_shard_read_done(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        from: i32,
        result: Result<Vec<Vec<u8>>, RepError>,
        fx: &mut Vec<Effect>,
    ) {
        let Some(g) = self.gathers.get_mut(&tid) else {
            return;
        };
        let Some(c) = g.waiting.iter().find(|(_, &o)| o == from).map(|(&c, _)| c) else {
            return;
        };
        g.waiting.remove(&c);
        let got = result.and_then(|bufs| {
            let exts: Vec<u64> = g
                .reads
                .iter()
                .flat_map(|r| r.reads.get(&c))
                .flatten()
                .map(|e| e.0)
                .collect();
            let lens: Vec<u64> = g
                .reads
                .iter()
                .flat_map(|r| r.reads.get(&c))
                .flatten()
                .map(|e| e.1)
                .collect();
            let ok = bufs.len() == exts.len()
                && bufs.iter().zip(&lens).all(|(b, &l)| b.len() as u64 == l);
            if ok {
                Ok(exts.into_iter().zip(bufs).collect::<Vec<_>>())
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
                g.bad.insert(c);
            }
        }
        if !g.waiting.is_empty() {
            return;
        }
        let Some(g) = self.gathers.remove(&tid) else {
            return;
        };
        if g.bad
            .iter()
            .any(|c| g.reads.iter().any(|r| r.reads.contains_key(c)))
        {
            // Some read failed: plan again around the bad shards.
            return self.gather(s, g, fx);
        }
        self.gather_done(s, g, fx);
    }

    /// Everything is here: decode, run the op, write or answer.
    fn gather_done(&mut self, s: &dyn ObjectStore, g: Gather, fx: &mut Vec<Effect>) {
        let Some(striper) = self.ec.clone() else {
            return;
        };
        let epoch = self.epoch;
        let mut old = OldBytes::new();
        for rp in &g.reads {
            match striper.decode_read(rp, &g.fetched) {
                Ok(b) => {
                    old.insert(rp.range.start, b);
                }
                Err(e) => {
                    let err = OpError::Io(format!("object '{}': {e}", g.oid.name));
                    return self.gather_failed(s, g, err, fx);
                }
            }
        }
        let Gather {
            pending: p,
            oid,
            st,
            plan,
            ..
        } = g;
        let out = match ec::finish(&striper, s, self.coll, &oid, &st, &p.op.ops, &plan, &old) {
            Ok(o) => o,
            Err(e) => {
                let name = p.op.name.clone();
                fx.push(reply(p.token, Err(e), Version::default(), epoch));
                return self.release(s, &name, fx);
            }
        };
        if !plan.writes {
            let name = p.op.name.clone();
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
        // The ops queued behind this one stay queued behind the write.
        let queued = self.busy.remove(&p.op.name).unwrap_or_default();
        let name = p.op.name.clone();
        self.write(p, oid, &st, exec_out, Some(out.shards), fx);
        if let Some(q) = self.busy.get_mut(&name) {
            q.extend(queued);
        } else {
            // The write did not start (no longer primary): run them.
            self.busy.insert(name.clone(), queued);
            self.release(s, &name, fx);
        }
    }

    fn gather_failed(&mut self, s: &dyn ObjectStore, g: Gather, e: OpError, fx: &mut Vec<Effect>) {
        let name = g.pending.op.name.clone();
        fx.push(reply(
            g.pending.token,
            Err(e),
            Version::default(),
            self.epoch,
        ));
        self.release(s, &name, fx);
    }

    /// A new interval: gathers in flight are answered "wrong primary"
    /// (their clients retry under the new map).
    pub(super) fn abandon_gathers(&mut self, epoch: Epoch, fx: &mut Vec<Effect>) {
        for (_, g) in std::mem::take(&mut self.gathers) {
            fx.push(reply(
                g.pending.token,
                Err(OpError::WrongPrimary { epoch }),
                Version::default(),
                epoch,
            ));
        }
    }

    /// Gathers past their op's deadline fail.
    pub(super) fn expire_gathers(&mut self, s: &dyn ObjectStore, fx: &mut Vec<Effect>) {
        let now = self.now_ms;
        let late: Vec<u64> = self
            .gathers
            .iter()
            .filter(|(_, g)| g.pending.deadline_ms <= now)
            .map(|(&t, _)| t)
            .collect();
        for tid in late {
            if let Some(g) = self.gathers.remove(&tid) {
                let e = OpError::Timeout(format!("shard reads of '{}'", g.oid.name));
                self.gather_failed(s, g, e, fx);
            }
        }
    }

    /// As a member: read extents of this copy's shard of `name`, which
    /// must be at `version`.
    pub(super) fn on_shard_read(
        &mut self,
        s: &dyn ObjectStore,
        name: &str,
        extents: &[(u64, u64)],
        version: Version,
        token: u64,
        fx: &mut Vec<Effect>,
    ) {
        let result = if self.missing.contains_key(name) {
            Err(RepError::Failed(format!("this copy lacks '{name}'")))
        } else {
            let oid = super::recovery::oid(name);
            read_shard(s, self.coll, &oid, version, extents).map_err(RepError::Failed)
        };
        fx.push(Effect::ShardReadReply { token, result });
    }
}

/// Read extents of a shard object that must be at `version`.
fn read_shard(
    s: &dyn ObjectStore,
    c: loligo_store::CollectionId,
    o: &ObjectId,
    version: Version,
    extents: &[(u64, u64)],
) -> Result<Vec<Vec<u8>>, String> {
    let v = s.getattr(c, o, VERSION_ATTR).map_err(|e| e.to_string())?;
    let have: Version =
        postcard::from_bytes(&v).map_err(|_| "corrupt version attribute".to_string())?;
    if have != version {
        return Err(format!("shard at version {have}, the read wants {version}"));
    }
    s.read(c, o, extents).map_err(|e| e.to_string())
}
