//! Heartbeats: whom an OSD pings (the OSDs it shares a PG with, and two
//! neighbours by id so that no OSD goes unwatched), and the failure
//! reports it sends the monitors about peers that stay silent.
//!
//! It must never mark anything down itself: the monitors decide.

use super::{lock, OsdShared};
use crate::msg::PeerMsg;
use loligo_monc::protocol::MonRequest;
use loligo_monc::MonClient;
use loligo_types::{Epoch, OsdMap};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The shortest wait for a ping's answer.
const PING_WAIT_MIN_MS: u64 = 200;

/// OSDs pinged at most, each heartbeat round.
const HEARTBEAT_PEERS_MAX: usize = 256;

/// Whom an OSD pings: the up OSDs it shares a PG with, and its next two up
/// neighbours by id (so that an OSD without PGs is watched too), at most
/// `HEARTBEAT_PEERS_MAX`; with each its `up_from` epoch.
fn heartbeat_peers(map: &OsdMap, me: i32, sharing: &BTreeSet<i32>) -> Vec<(i32, Epoch)> {
    let up: Vec<(i32, Epoch)> = map
        .osds
        .values()
        .filter(|o| o.up && o.id != me)
        .map(|o| (o.id, o.up_from))
        .collect();
    let after = up.iter().position(|&(id, _)| id > me).unwrap_or(0);
    let neighbours: BTreeSet<i32> = up
        .iter()
        .cycle()
        .skip(after)
        .take(2.min(up.len()))
        .map(|&(id, _)| id)
        .collect();
    up.into_iter()
        .filter(|(id, _)| sharing.contains(id) || neighbours.contains(id))
        .take(HEARTBEAT_PEERS_MAX)
        .collect()
}

/// Ping the heartbeat peers every interval; report one silent for longer
/// than the grace (at most once per half grace).
pub(super) async fn run(s: Arc<OsdShared>, mut mc: MonClient) {
    let mut last_ok: HashMap<i32, (Instant, Epoch)> = HashMap::new();
    let mut reported: HashMap<i32, Instant> = HashMap::new();
    let mut t = tokio::time::interval(s.cfg.heartbeat_interval);
    loop {
        t.tick().await;
        let Some(map) = s.map() else { continue };
        let sharing: BTreeSet<i32> = lock(&s.views)
            .values()
            .flat_map(|v| v.acting.iter().copied())
            .collect();
        let peers = heartbeat_peers(&map, s.cfg.id, &sharing);
        let now = Instant::now();
        let mut pings = Vec::new();
        for &(id, up_from) in &peers {
            let e = last_ok.entry(id).or_insert((now, up_from));
            if e.1 != up_from {
                *e = (now, up_from);
            }
            let s2 = s.clone();
            let epoch = map.epoch;
            pings.push(tokio::spawn(async move {
                let m = PeerMsg::Ping {
                    from: s2.cfg.id,
                    epoch,
                };
                let wait =
                    (s2.cfg.heartbeat_grace / 3).max(Duration::from_millis(PING_WAIT_MIN_MS));
                let ok = tokio::time::timeout(wait, s2.send_peer(id, &m))
                    .await
                    .is_ok_and(|r| r.is_ok());
                (id, ok)
            }));
        }
        for p in pings {
            if let Ok((id, true)) = p.await {
                if let Some(e) = last_ok.get_mut(&id) {
                    e.0 = Instant::now();
                }
            }
        }
        last_ok.retain(|id, _| peers.iter().any(|p| p.0 == *id));
        for (&id, &(t0, _)) in &last_ok {
            let silent = now.duration_since(t0);
            let recently = reported
                .get(&id)
                .is_some_and(|r| now.duration_since(*r) < s.cfg.heartbeat_grace / 2);
            if silent > s.cfg.heartbeat_grace && !recently {
                reported.insert(id, now);
                let _ = mc
                    .call(MonRequest::OsdFailure {
                        reporter: s.cfg.id,
                        target: id,
                        failed_for_ms: silent.as_millis() as u64,
                    })
                    .await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_types::Change;

    fn map(n: i32) -> OsdMap {
        let mut m = OsdMap::new("f", "osd").unwrap_or_else(|e| panic!("{e}"));
        let changes = (0..n)
            .map(|id| Change::OsdBoot {
                id,
                addr: format!("127.0.0.1:{}", 7000 + id),
                host: "h".into(),
                crush_weight: 0x10000,
            })
            .collect();
        m.apply(&loligo_types::Incremental { epoch: 2, changes })
            .unwrap_or_else(|e| panic!("{e}"));
        m
    }

    #[test]
    fn heartbeats_go_to_pg_peers_and_two_neighbours() {
        let m = map(100);
        let ids = |v: Vec<(i32, Epoch)>| v.into_iter().map(|p| p.0).collect::<Vec<_>>();
        // No PGs: the two next OSDs by id, wrapping around.
        assert_eq!(ids(heartbeat_peers(&m, 98, &BTreeSet::new())), vec![0, 99]);
        // PG peers too (itself and unknown ids ignored), not all 99 others.
        let sharing: BTreeSet<i32> = [5, 40, 41, 500].into();
        assert_eq!(ids(heartbeat_peers(&m, 40, &sharing)), vec![5, 41, 42]);
        // Alone: nobody.
        assert!(heartbeat_peers(&map(1), 0, &BTreeSet::new()).is_empty());
    }
}
