//! How a PG's data is laid out across its write set. The PG state machine
//! decides *what* to write (the transaction, its version, who must have
//! it); a backend decides *how* each member gets its part and how an
//! object is read. Replicated pools give every member the whole
//! transaction; the erasure-coded backend gives member i the ops of shard
//! i (encoded by `ec.rs` after `pg/erasure.rs` gathered what they need).
//!
//! A backend must never do I/O itself: it returns each member's
//! transaction, and reads only through the store it is handed. It knows
//! nothing of the PG's state machine (it imports nothing from `pg`).

use crate::exec::{self, ObjState, Outcome};
use loligo_store::{CollectionId, ObjectId, ObjectStore, Op, Transaction};
use loligo_types::ops::{OpError, SubOp};

/// One write, decided by the PG, to be distributed by the backend.
pub struct WritePlan<'a> {
    /// The PG's acting set (member i of an erasure-coded PG holds shard i).
    pub acting: &'a [i32],
    pub txn: Transaction,
    /// Ops only this OSD's own copy takes (its Merkle tree's leaf).
    pub own: Transaction,
    /// Members that must make it durable; `me` is among them.
    pub write_set: &'a [i32],
    /// Members of the write set that take only the PG's records (log
    /// entry, info): backfill targets whose cursor is before the object.
    pub log_only: &'a [i32],
    pub me: i32,
    /// On an erasure-coded pool, the object ops of shard i (for the
    /// member at position i of `acting`); `txn` then holds only what
    /// every shard takes (the version attribute and the PG's records).
    pub shards: Option<Vec<Transaction>>,
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

    /// What each member of `w`'s write set must make durable.
    fn distribute(&self, w: WritePlan<'_>) -> Distribution;
}

/// One write, as each member takes it.
pub struct Distribution {
    /// The transaction of every other member of the write set, in the
    /// write set's order.
    pub members: Vec<(i32, Transaction)>,
    /// This OSD's own.
    pub own: Transaction,
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

    fn distribute(&self, w: WritePlan<'_>) -> Distribution {
        let members = fan_out(&w, |to| {
            if w.log_only.contains(&to) {
                records_only(&w.txn)
            } else {
                w.txn.clone()
            }
        });
        let mut own = w.txn;
        own.ops.extend(w.own.ops);
        Distribution { members, own }
    }
}

/// Erasure-coded pools: the member at position i of the acting set
/// stores shard i. Reads gather shards (`pg/erasure.rs`); this backend
/// only distributes writes.
#[derive(Default)]
pub struct Erasure;

impl Backend for Erasure {
    fn execute(
        &self,
        _s: &dyn ObjectStore,
        _c: CollectionId,
        o: &ObjectId,
        _ops: &[SubOp],
        _size_max: u64,
    ) -> Result<(ObjState, Outcome), OpError> {
        Err(OpError::Io(format!(
            "object '{}': erasure-coded ops gather shards; they do not run locally",
            o.name
        )))
    }

    fn distribute(&self, w: WritePlan<'_>) -> Distribution {
        let for_member = |to: i32| -> Transaction {
            if w.log_only.contains(&to) {
                return records_only(&w.txn);
            }
            let pos = w.acting.iter().position(|&o| o == to);
            let mut t = pos
                .and_then(|i| w.shards.as_ref().and_then(|s| s.get(i)).cloned())
                .unwrap_or_default();
            t.ops.extend(w.txn.ops.iter().cloned());
            // Every write names the shard the member holds (a copy whose
            // OSD later moves to another position knows it must be
            // backfilled).
            if let (Some(i), Some(c)) = (pos, w.txn.ops.first().map(Op::collection)) {
                t.set_record(c, crate::pg::SHARD_KEY, vec![i as u8]);
            }
            t
        };
        let members = fan_out(&w, for_member);
        let mut own = for_member(w.me);
        own.ops.extend(w.own.ops.iter().cloned());
        Distribution { members, own }
    }
}

/// Every other member of `w`'s write set, each with the transaction
/// `txn_for` gives it.
fn fan_out(w: &WritePlan<'_>, txn_for: impl Fn(i32) -> Transaction) -> Vec<(i32, Transaction)> {
    debug_assert!(w.write_set.contains(&w.me));
    w.write_set
        .iter()
        .filter(|&&o| o != w.me)
        .map(|&to| (to, txn_for(to)))
        .collect()
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
