//! Power loss under the block store, on simulated media
//! (`loligo_store::sim_media`): a machine that loses power keeps every
//! synced device write and durable engine batch and, of the rest, what
//! the seed says (each unsynced write kept, lost or torn sector by
//! sector; a prefix of the engine's batches). Unlike killing a process,
//! which the page cache survives, this finds a missing or misordered
//! sync.
//!
//! The workload is the store's crash-test workload (`torture`), one
//! transaction after another. Cycles take turns: the power goes while
//! the store is idle, with unsynced transactions and deferred writes
//! behind it (replayable from the seed), or while transactions are in
//! flight in the committer and writer threads (where the cut falls
//! depends on the threads). After each loss the store is mounted again
//! and must show a prefix of the transactions that holds every one
//! acknowledged durable, whole, with a clean deep fsck.
//!
//! `LOLIGO_POWER_CYCLES=N` for a longer run; `LOLIGO_POWER_SEED=S` for
//! another seed.

use loligo_store::sim_media::SimMedia;
use loligo_store::{torture, BlockConfig, BlockStore, Commit, ObjectStore, SmallWrites};
use std::collections::BTreeMap;
use std::sync::Arc;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// What a cycle's transactions came to: the newest known durable.
fn settle(commits: Vec<(u64, Commit)>, durable: &mut Option<u64>) {
    for (n, c) in commits {
        if c.wait().is_ok() && !torture::unsynced(n) {
            // Durable, and with it everything queued before it.
            *durable = Some(durable.map_or(n, |d| d.max(n)));
        }
    }
}

/// The store after a power loss holds the transactions `0..next` and no
/// other: each object shows the last of them that wrote it.
fn check_prefix(s: &dyn ObjectStore, next: u64, durable: Option<u64>, cycle: u64) {
    let acked: BTreeMap<u64, u64> = match durable {
        Some(d) => (0..torture::OBJECTS)
            .filter_map(|o| {
                let last = (0..=d).rev().find(|n| n % torture::OBJECTS == o)?;
                Some((o, last))
            })
            .collect(),
        None => BTreeMap::new(),
    };
    let seen = torture::verify(s, &acked).unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
    assert!(
        seen <= next,
        "cycle {cycle}: shows transaction {} of {next} queued",
        seen.saturating_sub(1)
    );
    // A prefix: every object shows the last transaction before `seen`
    // that wrote it (verify checked each object is whole).
    for o in 0..torture::OBJECTS {
        let want = (0..seen).rev().find(|n| n % torture::OBJECTS == o);
        let has = s
            .getattr(torture::coll(), &torture::object(o), "n")
            .ok()
            .and_then(|v| Some(u64::from_le_bytes(v.try_into().ok()?)));
        assert_eq!(
            has, want,
            "cycle {cycle}: object {o} is not where a prefix ending at {seen} leaves it"
        );
    }
}

#[test]
fn power_loss_at_random_moments_loses_nothing_acknowledged() {
    let cycles = env("LOLIGO_POWER_CYCLES", 60);
    let mut rng = loligo_testkit::Rng::new(env("LOLIGO_POWER_SEED", 1));
    let base = BlockConfig {
        size: 96 << 20,
        read_cache: 0,
        ..BlockConfig::default()
    };
    let mut media = SimMedia::new(base.size);
    BlockStore::mkfs_media(&media, &base).expect("mkfs");
    let (mut next, mut durable) = (0u64, None::<u64>);
    let (mut in_flight_cuts, mut torn_or_lost, mut total) = (0u64, 0u64, 0u64);
    for cycle in 0..cycles {
        let in_flight = cycle % 2 == 1;
        let cfg = BlockConfig {
            small_writes: [
                SmallWrites::Auto,
                SmallWrites::CopyOnWrite,
                SmallWrites::Deferred,
            ][(cycle / 2 % 3) as usize],
            // Writer threads only where the cut depends on threads anyway:
            // the idle cuts replay exactly.
            writers: if in_flight { 2 } else { 0 },
            ..base
        };
        let s = BlockStore::mount_media(Arc::new(media.clone()), &cfg)
            .unwrap_or_else(|e| panic!("cycle {cycle}: mount after a power loss: {e}"));
        if cycle == 0 {
            torture::setup(&s).expect("setup");
        } else {
            check_prefix(&s, next, durable, cycle);
        }
        let r = s.fsck(true).expect("fsck");
        assert!(r.errors.is_empty(), "cycle {cycle}: fsck: {:?}", r.errors);
        next = torture::verify(&s, &BTreeMap::new()).expect("verified above");
        let mut commits = Vec::new();
        for _ in 0..1 + rng.index(24) {
            let (n, t) = (next, torture::txn(next));
            let c = if torture::unsynced(n) {
                s.queue_unsynced(t)
            } else {
                s.queue_transaction(t)
            };
            next += 1;
            total += 1;
            if in_flight {
                commits.push((n, c));
            } else {
                settle(vec![(n, c)], &mut durable);
            }
        }
        let pending = media.block_device().counts().pending
            + media.journal_device().map_or(0, |j| j.counts().pending);
        torn_or_lost += u64::from(pending > 0);
        let after = media.power_loss(rng.next_u64());
        if in_flight {
            in_flight_cuts += commits.len() as u64;
        }
        settle(commits, &mut durable);
        drop(s);
        media = after;
    }
    eprintln!(
        "{total} transactions, {cycles} power losses ({torn_or_lost} with unsynced writes \
         to keep, lose or tear; {in_flight_cuts} transactions in flight at a cut)"
    );
    assert!(total > cycles, "the workload barely ran");
    assert!(
        torn_or_lost > cycles / 4,
        "the power rarely went with writes unsynced: {torn_or_lost} of {cycles}"
    );
}
