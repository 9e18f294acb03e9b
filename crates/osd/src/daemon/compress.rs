//! Pools' compression settings (`pool set NAME compression_mode ...`)
//! reaching this OSD's store: every PG collection here is given its
//! pool's setting, at each new map and every few seconds after (for the
//! copies that splits, merges and recovery make between maps). Writes
//! from then on are compressed or not; data stored before stays as it is,
//! as in Ceph.
//!
//! It must never fail the OSD: a store that refuses the setting is
//! logged, and the collection is tried again at the next pass.

use super::{lock, OsdShared};
use loligo_store::{CollectionId, Compression, ObjectStore, Transaction};
use loligo_types::osdmap::CompressionMode;
use loligo_types::OsdMap;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// How often collections made between maps are looked for.
const PASS_INTERVAL: Duration = Duration::from_secs(5);

/// The compression pool `pool`'s collections get under `map` (`None`
/// for a pool the map does not have).
pub(super) fn wanted(map: &OsdMap, pool: u64) -> Option<Compression> {
    map.pools.get(&pool)?;
    let opts = map.pool_opts.get(&pool).copied().unwrap_or_default();
    if !opts.compresses() {
        return Some(Compression::None);
    }
    Some(match opts.compression_mode {
        CompressionMode::None => Compression::None,
        CompressionMode::Passive => Compression::Lz4Passive,
        CompressionMode::Aggressive => Compression::Lz4Aggressive,
        CompressionMode::Force => Compression::Lz4,
    })
}

/// The collections whose setting differs from what `known` says they
/// have (unknown ones included), with the setting each should get.
fn to_set(
    map: &OsdMap,
    colls: &[CollectionId],
    known: &HashMap<CollectionId, Compression>,
) -> Vec<(CollectionId, Compression)> {
    (colls.iter())
        .filter(|c| **c != CollectionId::meta())
        .filter_map(|c| Some((*c, wanted(map, c.pool)?)))
        .filter(|(c, want)| known.get(c) != Some(want))
        .collect()
}

/// Give every PG collection here its pool's compression; returns how
/// many were set (and logs it, when any were).
pub(super) fn pass(s: &OsdShared) -> usize {
    let n = set_all(s);
    if n > 0 {
        tracing::info!("compression settings given to {n} collections");
    }
    n
}

fn set_all(s: &OsdShared) -> usize {
    let Some(map) = s.map() else {
        return 0;
    };
    let colls = match s.store.collections() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("compression settings: listing collections: {e}");
            return 0;
        }
    };
    let mut known = lock(&s.compression);
    let here: HashSet<CollectionId> = colls.iter().copied().collect();
    known.retain(|c, _| here.contains(c));
    let set = to_set(&map, &colls, &known);
    if set.is_empty() {
        return 0;
    }
    // One transaction for all; if it is refused (a collection removed
    // meanwhile), one per collection.
    let mut t = Transaction::new();
    for &(c, algo) in &set {
        t.set_compression(c, algo);
    }
    if s.store.apply(t).is_ok() {
        known.extend(set.iter().copied());
        return set.len();
    }
    let mut done = 0;
    for (c, algo) in set {
        match apply_one(&*s.store, c, algo) {
            Ok(()) => {
                known.insert(c, algo);
                done += 1;
            }
            Err(e) => tracing::debug!("compression of {c}: {e}"),
        }
    }
    done
}

fn apply_one(
    store: &dyn ObjectStore,
    c: CollectionId,
    algo: Compression,
) -> loligo_store::Result<()> {
    let mut t = Transaction::new();
    t.set_compression(c, algo);
    store.apply(t)
}

/// Run passes at every new map and every [`PASS_INTERVAL`] until the OSD
/// stops.
pub(super) async fn run(s: Arc<OsdShared>) {
    let mut epochs = s.epoch_tx.subscribe();
    let mut tick = tokio::time::interval(PASS_INTERVAL);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            r = epochs.changed() => if r.is_err() { return },
        }
        let s2 = s.clone();
        if tokio::task::spawn_blocking(move || pass(&s2))
            .await
            .is_err()
        {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_types::osdmap::{CompressionAlgorithm, PoolOpts};
    use loligo_types::Change;

    fn map() -> OsdMap {
        let mut m = OsdMap::new("fsid", "host").unwrap_or_else(|e| panic!("{e}"));
        let step = |m: &mut OsdMap, changes: Vec<Change>| {
            let inc = loligo_types::Incremental {
                epoch: m.epoch + 1,
                changes,
            };
            m.apply(&inc).unwrap_or_else(|e| panic!("{e}"));
        };
        for name in ["p1", "p2"] {
            let p = m.replicated_pool(name, 2, 1, 1);
            step(&mut m, vec![Change::PoolCreate(p)]);
        }
        let opts = PoolOpts {
            compression_mode: CompressionMode::Aggressive,
            compression_algorithm: CompressionAlgorithm::Lz4,
            ..PoolOpts::default()
        };
        step(&mut m, vec![Change::PoolOpts { pool: 2, opts }]);
        m
    }

    /// Each collection gets its own pool's setting, the meta collection
    /// and collections of pools gone get none, and a collection already
    /// known to have its setting is not set again.
    #[test]
    fn collections_get_their_pools_setting_once() {
        let m = map();
        let (a, b, gone) = (
            CollectionId::pg(1, 0),
            CollectionId::pg(2, 1),
            CollectionId::pg(9, 0),
        );
        let colls = [CollectionId::meta(), a, b, gone];
        let mut known = HashMap::new();
        let set = to_set(&m, &colls, &known);
        assert_eq!(
            set,
            vec![(a, Compression::None), (b, Compression::Lz4Aggressive)]
        );
        known.extend(set);
        assert!(to_set(&m, &colls, &known).is_empty());
        // Each mode has its store setting; no algorithm is no compression.
        for (mode, algo, want) in [
            (
                CompressionMode::Passive,
                CompressionAlgorithm::Lz4,
                Compression::Lz4Passive,
            ),
            (
                CompressionMode::Force,
                CompressionAlgorithm::Lz4,
                Compression::Lz4,
            ),
            (
                CompressionMode::Force,
                CompressionAlgorithm::None,
                Compression::None,
            ),
        ] {
            let mut m2 = m.clone();
            let opts = PoolOpts {
                compression_mode: mode,
                compression_algorithm: algo,
                ..Default::default()
            };
            m2.pool_opts.insert(2, opts);
            assert_eq!(to_set(&m2, &colls, &known), vec![(b, want)], "{mode}");
        }
    }
}
