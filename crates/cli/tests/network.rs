//! Message faults on hosts of one machine (`lab`): every daemon and
//! client injects them on its direct connections (`LOLIGO_MS_INJECT`:
//! connection resets, duplicated client ops, held-back frames) and hosts
//! lose packets to each other, while clients' histories are checked for
//! linearizability. Needs root, iproute2 and nftables, as the partition
//! tests do; run as another user, the test says so and stops.

mod common;
mod lab;

use lab::registers::{Kind, Workload};
use lab::{hosts_or_skip, Lab, OSDS};
use std::time::Duration;

/// A messy network: every daemon and client resets about one call in 40
/// on its OSD connections (half of them after sending: the receiver acts
/// and the reply is lost), sends one client op in 20 twice, and holds
/// one frame in 20 back for up to 20 ms (the frames after it wait too);
/// the client host and one OSD host lose 5% of their packets to each
/// other. Clients write and read registers on a replicated pool, an
/// erasure-coded pool and a KV store meanwhile, for 10 s. Every register's
/// history is linearizable, nothing acknowledged is lost, and the PGs
/// are clean after.
#[test]
fn a_messy_network_loses_duplicates_and_delays_messages_and_no_answer_is_wrong() {
    if !hosts_or_skip() {
        return;
    }
    let spec = "socket_failures=40,dup_probability=0.05,delay_max_ms=20,delay_probability=0.05";
    let mut lab = Lab::start_injecting("ln", 1, OSDS, spec);
    for kind in Kind::ALL {
        kind.prepare(&mut lab);
    }
    lab.wait_clean(Duration::from_secs(60), "the pools clean");
    lab.lose_between(lab.client_host(), lab.osd_host(0), 5);
    let mut work = Workload::start(
        &mut lab,
        &[Kind::Replicated, Kind::Replicated, Kind::Erasure, Kind::Kv],
    );
    std::thread::sleep(Duration::from_secs(10));
    let (done, failed, sessions) = work.stop();
    let injected: Vec<String> = sessions
        .into_iter()
        .map(|mut s| s.ask("injected"))
        .collect();
    eprintln!("{injected:?}");
    // Each client met every fault (its ops are most of its calls).
    for i in &injected {
        let n: Vec<u64> = i.split(' ').filter_map(|w| w.parse().ok()).collect();
        assert!(n.len() == 3 && n.iter().all(|&n| n > 0), "{i}");
    }
    lab.heal(lab.client_host());
    work.check(&mut lab, done, failed);
    lab.wait_clean(Duration::from_secs(60), "the PGs clean");
}
