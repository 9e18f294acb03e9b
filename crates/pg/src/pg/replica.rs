//! The replica side of a PG's writes, part of the PG state machine (the
//! daemon and the simulator run this same code): whether a write from a
//! primary is taken at all (`replica_accepts`), in which order
//! (`replica_step`: the primary's order, so equal `last_update`s mean
//! equal logs), and how long a write waits for its predecessor (the PG's
//! op timeout) before it is refused.
//!
//! It must never apply a write out of the primary's order, nor one that
//! touches another collection than the PG's.

use super::{log_key, stored_info, PgInfo, PgView, RepCtx, INFO_KEY};
use loligo_store::{CollectionId, ObjectStore, Op, Transaction};
use loligo_types::ops::Version;
use std::collections::HashMap;

/// Whether a replica whose PG is at `view` takes a write that `primary`
/// sent under `ctx`. A replica with an older map takes it (the primary
/// knows more); one with a newer map only if the PG kept the same acting
/// set and primary, no member of it booted since the write's interval
/// began (a restarted primary starts a new interval with the same set:
/// else a dead primary's last write can be taken after its new incarnation
/// has peered), and nobody recorded a write set since the primary's epoch
/// (so no other primary can have written in between).
/// Comparing intervals alone would not do: two OSDs that saw different
/// subsets of the epochs count an interval from different epochs.
///
/// A replica with no map yet (its PG just started) takes nothing: it
/// cannot tell a message meant for its previous incarnation from a
/// current one, and that incarnation may have answered for state a crash
/// then lost (backfill chunks are answered once applied, not synced: on an
/// EC pool, a write to an object of a lost chunk was applied by the
/// restarted copy). Its first map is newer than its boot, so from then on
/// the rules above refuse the old interval.
pub fn replica_accepts(view: &PgView, primary: i32, ctx: &RepCtx) -> bool {
    if view.epoch == 0 {
        return false;
    }
    view.epoch <= ctx.epoch
        || (view.acting == ctx.acting
            && view.primary == primary
            && view.acting_up_from <= ctx.interval
            && view.record_interval <= ctx.epoch)
}

/// What a replica does with a write, given `have`, the newest version it
/// holds or has queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaStep {
    /// It follows `have`: apply it as sent (its version is newer than
    /// anything here, so its info record moves this replica's forward).
    Apply,
    /// Already applied (a resend).
    Duplicate,
    /// An earlier write is still on its way: wait for it.
    Wait,
    /// This replica's log went another way (it ends at `have`): refuse.
    Refuse { have: Version },
}

/// Replica writes apply in the primary's order (see `RepCtx::prev`).
/// `high` is the newest version queued on this replica (kept by the caller
/// per PG, under a lock); on `Apply` it becomes this write's.
pub fn replica_step(
    s: &dyn ObjectStore,
    coll: CollectionId,
    high: &mut Version,
    ctx: &RepCtx,
) -> ReplicaStep {
    // A record that cannot be read counts as nothing stored: `high` (what
    // this copy holds or has queued, from its info at start) decides. The
    // PG task repairs a damaged record when it starts.
    let stored = stored_info(s, coll)
        .ok()
        .flatten()
        .map_or(Version::default(), |i| i.last_update);
    let have = stored.max(*high);
    if have == ctx.prev {
        *high = ctx.version;
        return ReplicaStep::Apply;
    }
    if have < ctx.prev {
        return ReplicaStep::Wait;
    }
    let logged = s
        .record(coll, &log_key(ctx.version.v))
        .ok()
        .flatten()
        .and_then(|b| super::record::decode_log(&b).ok());
    match logged {
        Some(e) if e.version == ctx.version => ReplicaStep::Duplicate,
        // A resend of a write this copy applied and has trimmed since: it
        // is past it in the same primary's order (versions name one write
        // each, and a member of a primary's write set takes only that
        // primary's writes, in order, after merging its log).
        None if have >= ctx.version
            && oldest_logged(s, coll).is_some_and(|v| ctx.version.v < v) =>
        {
            ReplicaStep::Duplicate
        }
        _ => ReplicaStep::Refuse { have },
    }
}

/// The version counter of the oldest entry in a copy's log (`None`: the
/// log is empty or cannot be read).
pub(super) fn oldest_logged(s: &dyn ObjectStore, coll: CollectionId) -> Option<u64> {
    let rows = s.records(coll, b"log/", 1).ok()?;
    let (k, _) = rows.into_iter().next()?;
    super::log_counter(&k)
}

/// A write from a primary, as the replica's PG holds it until it is
/// queued on the store or refused.
#[derive(Debug)]
pub(super) struct RepWrite {
    pub from: i32,
    pub ctx: RepCtx,
    pub txn: Transaction,
    /// The shell's handle for the reply.
    pub token: u64,
    pub deadline_ms: u64,
}

/// A replica PG's writes in progress.
#[derive(Debug, Default)]
pub(super) struct Lane {
    /// The newest version queued on this replica's store.
    pub high: Version,
    /// Writes waiting for an earlier one still on its way.
    pub waiting: Vec<RepWrite>,
    /// Store transactions from a primary not yet durable, by tid. A write
    /// whose interval has ended by the time it is durable is answered
    /// `Stale`, never acknowledged: this copy has told a newer primary
    /// where its log stands, and an old primary must not count on it.
    pub committing: HashMap<u64, Commit>,
    /// The last authoritative log merged: (interval, primary, head), so a
    /// resent one is answered without merging again.
    pub merged: Option<(u64, i32, Version)>,
}

/// A primary's transaction this copy queued, and whom to answer.
#[derive(Debug)]
pub(super) struct Commit {
    pub token: u64,
    /// The interval this copy was in when it took it.
    pub interval: u64,
    pub kind: CommitKind,
}

#[derive(Debug)]
pub(super) enum CommitKind {
    Write,
    /// A recovered object (its missing record goes with it).
    Push(String),
    /// The merge of an authoritative log (or the start of a backfill).
    Log,
    /// A chunk of backfill, with the cursor after it (`None`: done).
    Chunk(Option<super::Cursor>),
}

impl Lane {
    /// Whether a log merge is on its way to the store (writes wait for
    /// it: they follow the merged head).
    pub fn merging(&self) -> bool {
        self.committing
            .values()
            .any(|c| matches!(c.kind, CommitKind::Log))
    }
}

/// Why a replica's transaction cannot be applied as sent (`None`: fine):
/// every op must work on the PG's own collection and on objects the PG
/// owns (`owner`: a primary that has not split yet may send a sibling's),
/// never create or remove a collection nor move objects.
pub(super) fn check_txn(
    coll: CollectionId,
    owner: super::split::Owner,
    txn: &Transaction,
) -> Option<String> {
    txn.ops.iter().find_map(|op| match op {
        Op::CreateCollection(_)
        | Op::RemoveCollection(_)
        | Op::SetCompression(..)
        | Op::MoveObjects { .. } => Some("a replica write may not change collections".to_string()),
        op if loligo_store::txn::op_object(op)
            .is_some_and(|o| !owner.owns(o.name.split('\0').next().unwrap_or(""))) =>
        {
            Some(format!(
                "a replica write for {coll:?} touches an object of another PG (split)"
            ))
        }
        op if op.collection() != coll => Some(format!(
            "a replica write for collection {coll:?} touches {:?}",
            op.collection()
        )),
        _ => None,
    })
}

/// The PG info a write's transaction records (the primary writes it with
/// every entry), so a replica's PG knows its info without reading it back.
pub(super) fn info_in(coll: CollectionId, txn: &Transaction) -> Option<PgInfo> {
    txn.ops.iter().rev().find_map(|op| match op {
        Op::SetRecord {
            coll: c,
            key,
            value,
        } if *c == coll && key == INFO_KEY => super::record::decode_info(value).ok(),
        _ => None,
    })
}

/// The objects whose missing records a primary's transaction clears
/// (an object given up is removed with its record, on every member).
pub(super) fn missing_cleared(coll: CollectionId, txn: &Transaction) -> Vec<String> {
    txn.ops
        .iter()
        .filter_map(|op| match op {
            Op::RmRecord { coll: c, key } if *c == coll => key
                .strip_prefix(super::recovery::MISSING_PREFIX)
                .map(|n| String::from_utf8_lossy(n).into_owned()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_types::Epoch;

    fn ctx(interval: Epoch, epoch: Epoch) -> RepCtx {
        RepCtx {
            interval,
            epoch,
            acting: vec![2, 3, 0],
            prev: Version::default(),
            version: Version::default(),
            change: None,
        }
    }

    fn view(epoch: Epoch, acting_up_from: Epoch, record_interval: Epoch) -> PgView {
        PgView {
            epoch,
            interval: epoch,
            acting: vec![2, 3, 0],
            primary: 2,
            record_interval,
            acting_up_from,
        }
    }

    #[test]
    fn a_write_from_an_ended_interval_is_refused_even_with_the_same_acting_set() {
        // The replica's map is older or the same: it takes the write.
        assert!(replica_accepts(&view(176, 150, 170), 2, &ctx(170, 176)));
        // Newer, nothing changed for the PG: still the same interval.
        assert!(replica_accepts(&view(180, 150, 170), 2, &ctx(170, 176)));
        // The primary restarted at epoch 177 (same set, same primary):
        // its earlier incarnation's write belongs to an interval that is
        // over.
        assert!(!replica_accepts(&view(180, 177, 170), 2, &ctx(170, 176)));
        // Another primary, or a write set recorded since: refused.
        assert!(!replica_accepts(&view(180, 150, 170), 3, &ctx(170, 176)));
        assert!(!replica_accepts(&view(180, 150, 178), 2, &ctx(170, 176)));
        // No map yet (just restarted): nothing.
        assert!(!replica_accepts(&view(0, 0, 0), 2, &ctx(170, 176)));
    }
}
