//! How a PG's data is laid out across its write set. The PG state machine
//! decides *what* to write (the transaction, its version, who must have
//! it); a backend decides *how* each member gets its part and how an
//! object is read. Replicated pools give every member the whole
//! transaction; the erasure-coded backend (next) will encode stripes and
//! give member i shard i.
//!
//! A backend must never do I/O itself: it returns effects, and reads only
//! through the store it is handed.

use crate::exec::{self, ObjState, Outcome};
use crate::pg::{Effect, RepCtx};
use loligo_store::{CollectionId, ObjectId, ObjectStore, Op, Transaction};
use loligo_types::ops::{OpError, SubOp};

/// One write, decided by the PG, to be distributed by the backend.
pub struct WritePlan<'a> {
    pub tid: u64,
    /// Where the write stands in the PG's history (sent to replicas).
    pub ctx: RepCtx,
    pub txn: Transaction,
    /// Members that must make it durable; `me` is among them.
    pub write_set: &'a [i32],
    /// Members of the write set that take only the PG's records (log
    /// entry, info): backfill targets whose cursor is before the object.
    pub log_only: &'a [i32],
    pub me: i32,
}

/// The data layout of a pool type.
pub trait Backend: Send {
    /// Read an object's state and run `ops` against it (asserts, reads,
    /// and the store ops a write needs).
    fn execute(
        &self,
        s: &dyn ObjectStore,
        c: CollectionId,
        o: &ObjectId,
        ops: &[SubOp],
        size_max: u64,
    ) -> Result<(ObjState, Outcome), OpError>;

    /// The effects that make `w` durable on every member of its write set
    /// (each reports `LocalDone` / `RepDone` for `w.tid`).
    fn distribute(&self, w: WritePlan<'_>) -> Vec<Effect>;
}

/// Replicated pools: every member stores the whole object.
#[derive(Default)]
pub struct Replicated;

impl Backend for Replicated {
    fn execute(
        &self,
        s: &dyn ObjectStore,
        c: CollectionId,
        o: &ObjectId,
        ops: &[SubOp],
        size_max: u64,
    ) -> Result<(ObjState, Outcome), OpError> {
        let st = exec::obj_state(s, c, o)?;
        let out = exec::execute(s, c, o, &st, ops, size_max)?;
        Ok((st, out))
    }

    fn distribute(&self, w: WritePlan<'_>) -> Vec<Effect> {
        debug_assert!(w.write_set.contains(&w.me));
        let mut fx: Vec<Effect> = w
            .write_set
            .iter()
            .filter(|&&o| o != w.me)
            .map(|&to| Effect::Replicate {
                tid: w.tid,
                to,
                ctx: w.ctx.clone(),
                txn: if w.log_only.contains(&to) {
                    records_only(&w.txn)
                } else {
                    w.txn.clone()
                },
            })
            .collect();
        fx.push(Effect::Apply {
            tid: w.tid,
            txn: w.txn,
        });
        fx
    }
}

/// The part of a write's transaction that is the PG's own records (log
/// entry, trimmed entries, info), without the object ops.
fn records_only(t: &Transaction) -> Transaction {
    let mut out = Transaction::new();
    out.ops.extend(
        t.ops
            .iter()
            .filter(|op| matches!(op, Op::SetRecord { .. } | Op::RmRecord { .. }))
            .cloned(),
    );
    out
}
