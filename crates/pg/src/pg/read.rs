//! Reads of a replicated pool's large objects beside the PG's task: the
//! PG admits the read (active, lease held, object not busy), hands the
//! host a [`ReadJob`] to run off its thread (`Effect::Read`), and serves
//! other ops meanwhile; the result comes back as `Input::ReadDone` and is
//! answered then. Many objects of one PG can be read from the device at
//! once, where one PG's reads otherwise queued behind each other.
//!
//! The read is linearized at its admission: the lease held then, and the
//! object takes no local change until the read ends (it is busy as
//! under a write: writes, pushes, mends and repairs of it wait in
//! `ops.busy`). What may change it without passing `ops.busy` comes only
//! with a new interval (a split or merge ends one too), and a read that
//! ends after it is answered with a retry, never with what it read.
//!
//! It must never answer a read with bytes read while its object could
//! change.

use super::*;

/// Reads a PG runs beside its task at once, at most; more are read in
/// the task, as small ones are, so that a flood of large reads waits in
/// the PG's bounded request lane instead of holding threads and buffers.
pub const READS_ASIDE_MAX: usize = 32;

/// A read the host runs against the local store (see `Effect::Read`):
/// the object's state as the PG found it at admission, and the sub-ops.
#[derive(Debug)]
pub struct ReadJob {
    coll: CollectionId,
    oid: ObjectId,
    st: ObjState,
    ops: Vec<SubOp>,
    size_max: u64,
}

impl ReadJob {
    /// Run the read-only sub-ops against `s`: their results, or why not.
    pub fn run(&self, s: &dyn ObjectStore) -> Result<Vec<SubResult>, OpError> {
        let out = exec::execute(s, self.coll, &self.oid, &self.st, &self.ops, self.size_max)?;
        debug_assert!(out.txn.is_empty(), "a read-only op made a transaction");
        if !out.txn.is_empty() {
            return Err(OpError::Io(format!(
                "object '{}': a read-only op would change it",
                self.oid.name
            )));
        }
        Ok(out.results)
    }
}

/// A read in flight beside the PG's task.
pub(super) struct Reading {
    p: Pending,
    /// The object's version at admission (the reply's).
    version: Version,
}

impl Pg {
    /// Run read-only op `p` (admitted: see `execute`): here, or beside
    /// the PG's task if its object is at least `read_aside_min` bytes.
    pub(super) fn read(
        &mut self,
        s: &dyn ObjectStore,
        p: Pending,
        oid: ObjectId,
        size_max: u64,
        fx: &mut Vec<Effect>,
    ) {
        debug_assert!(self.ec.is_none(), "erasure-coded reads gather shards");
        debug_assert!(!self.ops.busy.contains_key(&p.op.name));
        let epoch = self.map.epoch;
        let st = match exec::obj_state(s, self.coll, &oid) {
            Ok(st) => st,
            Err(OpError::Damaged(why)) if self.may_mend(&p.op.name) => {
                return self.mend(s, p, why, fx)
            }
            Err(e) => return fx.push(reply(p.token, Err(e), Version::default(), epoch)),
        };
        let aside =
            st.exists && st.size >= self.read_aside_min && self.ops.reads.len() < READS_ASIDE_MAX;
        if !aside {
            let result = exec::execute(s, self.coll, &oid, &st, &p.op.ops, size_max);
            self.read_done(s, p, st.version, result.map(|o| o.results), fx);
            return;
        }
        let tid = self.take_tid();
        let job = ReadJob {
            coll: self.coll,
            oid,
            st: st.clone(),
            ops: p.op.ops.clone(),
            size_max,
        };
        // (Busy: what would change the object waits for the read.)
        self.ops.busy.insert(p.op.name.clone(), VecDeque::new());
        let version = st.version;
        self.ops.reads.insert(tid, Reading { p, version });
        fx.push(Effect::Read { tid, job });
    }

    /// `Input::ReadDone`: answer the read, unless a new interval (a
    /// split's included) answered it already (it is gone then).
    pub(super) fn on_read_done(
        &mut self,
        s: &dyn ObjectStore,
        tid: u64,
        result: Result<Vec<SubResult>, OpError>,
        fx: &mut Vec<Effect>,
    ) {
        let Some(Reading { p, version }) = self.ops.reads.remove(&tid) else {
            return;
        };
        let name = p.op.name.clone();
        debug_assert!(
            self.ops.busy.contains_key(&name),
            "pg {}: {name} was read while not busy",
            self.id
        );
        // (A split ends the interval, which answered the read already.)
        debug_assert!(
            self.owner().owns(&name),
            "pg {}: a read of {name}, which a split took, outlived its interval",
            self.id
        );
        // (A mend takes the object over, busy, and frees it itself.)
        if !self.read_done(s, p, version, result, fx) {
            self.release(s, &name, fx);
        }
    }

    /// Answer read `p` with `result`, or mend its object if this copy
    /// of it is damaged (`p` waits for that): whether it is mended.
    fn read_done(
        &mut self,
        s: &dyn ObjectStore,
        p: Pending,
        version: Version,
        result: Result<Vec<SubResult>, OpError>,
        fx: &mut Vec<Effect>,
    ) -> bool {
        let epoch = self.map.epoch;
        match result {
            Err(OpError::Damaged(why)) if self.is_primary() && self.may_mend(&p.op.name) => {
                self.mend(s, p, why, fx);
                return true;
            }
            // Peering again within the interval (its min_size changed):
            // read, and mended, once the PG serves again.
            Err(OpError::Damaged(_))
                if self.is_primary() && !self.active() && self.ops.waiting.len() < WAITING_MAX =>
            {
                self.ops.waiting.push_back(p)
            }
            Ok(results) => fx.push(reply(p.token, Ok(results), version, epoch)),
            Err(e) => fx.push(reply(p.token, Err(e), Version::default(), epoch)),
        }
        false
    }

    /// Whether a read of `name` is in flight beside the task (its object
    /// is busy for it: nothing else may take the busy entry over).
    pub(super) fn reading(&self, name: &str) -> bool {
        self.ops.reads.values().any(|r| r.p.op.name == name)
    }

    /// A new interval: reads in flight are answered with a retry (what
    /// they read may be changed by the interval's first writes).
    pub(super) fn drop_reads(&mut self, fx: &mut Vec<Effect>) {
        let epoch = self.map.epoch;
        for (_, r) in std::mem::take(&mut self.ops.reads) {
            let e = OpError::WrongPrimary { epoch };
            fx.push(reply(r.p.token, Err(e), Version::default(), epoch));
        }
    }
}
