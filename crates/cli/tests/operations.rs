//! Operations under load on hosts of one machine (`lab`): a failed disk
//! replaced under its OSD's id, an OSD restarted under `noout`, an OSD
//! restarted under another `--host`, and pools' PG counts grown and
//! shrunk (PG split and merge), while clients write and read
//! registers on a replicated pool, an erasure-coded pool and a KV store,
//! every register's history checked for linearizability. Needs root, iproute2
//! and nftables, as the partition tests do; run as another user, the
//! test says so and stops.

mod common;
mod lab;

use common::ok;
use lab::registers::{Kind, Workload};
use lab::{hosts_or_skip, Lab};
use std::time::{Duration, Instant};

/// osd.2's disk dies (SIGKILL, then its store is wiped) while clients
/// work. Once the monitors mark it down, `safe-to-destroy` says no (its
/// PGs are degraded) and `destroy` is refused without --force; forced,
/// the OSD is destroyed; `osd new 2 -i KEYRING` makes way (the lab's
/// monitors make no keys: one made offline is recorded, the old one stays
/// refused), and a fresh store started under the id
/// boots and is backfilled. Every history is linearizable, nothing
/// acknowledged is lost, and the PGs end clean with osd.2 in them.
#[test]
fn a_failed_disk_is_replaced_under_its_id_while_clients_work() {
    if !hosts_or_skip() {
        return;
    }
    let mut lab = Lab::start("lr", 1);
    for kind in Kind::ALL {
        kind.prepare(&mut lab);
    }
    lab.wait_clean(Duration::from_secs(60), "the pools clean");
    let mut work = Workload::start(
        &mut lab,
        &[Kind::Replicated, Kind::Replicated, Kind::Erasure, Kind::Kv],
    );
    std::thread::sleep(Duration::from_secs(2));
    // The disk dies.
    let victim = lab.mons + 2;
    lab.kill(victim);
    std::fs::remove_dir_all(lab.dir.join("osd.2")).unwrap();
    lab.wait_for(Duration::from_secs(30), "osd.2 marked down", |lab| {
        (!lab.is_up(2)).then_some(())
    });
    let refused = |args: &[&str], why: &str| {
        let o = common::loligo(&lab.dir, args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(!o.status.success() && err.contains(why), "{args:?}: {err}");
    };
    refused(&["osd", "safe-to-destroy", "2"], "not safe to destroy");
    refused(
        &["osd", "destroy", "2", "--yes-i-really-mean-it"],
        "--force",
    );
    ok(
        &lab.dir,
        &["osd", "destroy", "2", "--yes-i-really-mean-it", "--force"],
    );
    // The new disk: a keyring made offline (the lab's monitors make no
    // keys), its key recorded by `osd new`.
    let keys = lab.dir.join("keys");
    let keyring = keys.join("osd.2.keyring");
    let old_keyring = keys.join("osd.2.old");
    std::fs::rename(&keyring, &old_keyring).unwrap();
    refused(&["osd", "new", "2"], "-i FILE");
    ok(
        &lab.dir,
        &[
            "auth",
            "keyring",
            "osd.2",
            "--ca",
            keys.to_str().unwrap(),
            "-o",
            keyring.to_str().unwrap(),
        ],
    );
    let id = ok(
        &lab.dir,
        &["osd", "new", "2", "-i", keyring.to_str().unwrap()],
    );
    assert_eq!(id.trim(), "2");
    // The destroyed disk's key stays refused; the new one gets the map.
    let out = lab.dir.join("map.bin");
    let getmap = |k: &std::path::Path| {
        let args = [
            "--keyring",
            k.to_str().unwrap(),
            "osd",
            "getmap",
            "-o",
            out.to_str().unwrap(),
        ];
        common::loligo(&lab.dir, &args).status.success()
    };
    assert!(!getmap(&old_keyring), "the old key of osd.2 got in");
    assert!(getmap(&keyring), "the new key of osd.2 was refused");
    let replaced = Instant::now();
    lab.restart(victim);
    lab.wait_for(Duration::from_secs(30), "the replacement up", |lab| {
        lab.is_up(2).then_some(())
    });
    eprintln!(
        "the replacement was up {:?} after its start",
        replaced.elapsed()
    );
    std::thread::sleep(Duration::from_secs(3));
    let (done, failed, _) = work.stop();
    work.check(&mut lab, done, failed);
    let t = Instant::now();
    lab.wait_clean(
        Duration::from_secs(90),
        "the PGs clean with the replacement",
    );
    eprintln!("clean {:?} after the clients stopped", t.elapsed());
    let rows: serde_json::Value =
        serde_json::from_str(&ok(&lab.dir, &["pg", "ls", "--json"])).unwrap();
    let on_2 = (rows.as_array().unwrap().iter())
        .filter(|r| {
            r["acting"]
                .as_array()
                .unwrap()
                .contains(&serde_json::json!(2))
        })
        .count();
    assert!(on_2 > 0, "no PG on the replacement: {rows}");
}

/// Maintenance under load with `noout`: the monitors mark a down OSD out
/// after 2 s here, but with the flag set osd.1 stays down and in for 8 s
/// while clients work, so no PG is remapped (no backfill, nothing
/// misplaced is ever reported); restarted, it catches up from the logs.
/// Every history is linearizable, nothing acknowledged is lost, and the
/// PGs end clean.
#[test]
fn noout_keeps_an_osd_restart_from_moving_data_while_clients_work() {
    if !hosts_or_skip() {
        return;
    }
    let mut lab = Lab::start_mon_args("lo", 1, &["--down-out-interval", "2"]);
    for kind in Kind::ALL {
        kind.prepare(&mut lab);
    }
    lab.wait_clean(Duration::from_secs(60), "the pools clean");
    ok(&lab.dir, &["osd", "set", "noout"]);
    let mut work = Workload::start(&mut lab, &[Kind::Replicated, Kind::Erasure, Kind::Kv]);
    std::thread::sleep(Duration::from_secs(1));
    let osd = lab.mons + 1;
    lab.kill(osd);
    lab.wait_for(Duration::from_secs(30), "osd.1 marked down", |lab| {
        (!lab.is_up(1)).then_some(())
    });
    // Down well past the interval: still in, nothing moves.
    let moved = |lab: &Lab| {
        let rows: serde_json::Value =
            serde_json::from_str(&ok(&lab.dir, &["pg", "ls", "--json"])).unwrap();
        (rows.as_array().unwrap().iter()).any(|r| {
            let st = r["state"].as_str().unwrap_or("");
            st.contains("backfill") || st.contains("remapped") || r["misplaced"].as_u64() > Some(0)
        })
    };
    let until = Instant::now() + Duration::from_secs(8);
    while Instant::now() < until {
        assert!(!moved(&lab), "a PG moved while noout held osd.1 in");
        std::thread::sleep(Duration::from_millis(500));
    }
    let dump: serde_json::Value =
        serde_json::from_str(&ok(&lab.dir, &["osd", "dump", "--json"])).unwrap();
    let o1 = (dump["osds"].as_array().unwrap().iter())
        .find(|o| o["id"] == 1)
        .unwrap();
    assert!(
        o1["weight"].as_u64() > Some(0),
        "noout: osd.1 was marked out: {o1}"
    );
    lab.restart(osd);
    lab.wait_for(Duration::from_secs(30), "osd.1 up again", |lab| {
        lab.is_up(1).then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    let (done, failed, _) = work.stop();
    ok(&lab.dir, &["osd", "unset", "noout"]);
    work.check(&mut lab, done, failed);
    lab.wait_clean(Duration::from_secs(60), "the PGs clean after the restart");
}

/// PG split and merge under load: clients work registers on the
/// replicated pool, the erasure-coded pool and the KV store while both
/// pools go from 8 to 32 PGs (`pool set NAME pg_num 32`: every copy
/// splits in place, the monitors raise pgp_num in steps, the new PGs
/// move) and back to 8 (pgp_num falls in steps, then the PGs hold their
/// writes and merge). Every history is linearizable, nothing
/// acknowledged is lost, no op fails, and both pools end with 8 PGs,
/// every one clean.
#[test]
fn pg_num_grows_and_shrinks_while_clients_work() {
    if !hosts_or_skip() {
        return;
    }
    // Four OSDs: on exactly k + m OSDs the erasure-coded pool (one
    // parity shard) could not merge, as its shards would have to change
    // places with no OSD outside a PG's set to pass through (refused).
    let mut lab = Lab::start_with("ls", 1, 4);
    for kind in Kind::ALL {
        kind.prepare(&mut lab);
    }
    lab.wait_clean(Duration::from_secs(60), "the pools clean");
    let mut work = Workload::start(&mut lab, &[Kind::Replicated, Kind::Erasure, Kind::Kv]);
    std::thread::sleep(Duration::from_secs(2));
    let t = Instant::now();
    for pool in ["default", "ecrs"] {
        ok(&lab.dir, &["pool", "set", pool, "pg_num", "32"]);
    }
    let nums = |lab: &Lab, pool: &str| -> (u64, u64) {
        let v: serde_json::Value =
            serde_json::from_str(&ok(&lab.dir, &["pool", "get", pool])).unwrap();
        (
            v["pg_num"].as_u64().unwrap(),
            v["pgp_num"].as_u64().unwrap(),
        )
    };
    let wait_for = |lab: &Lab, n: u64| {
        let until = Instant::now() + Duration::from_secs(240);
        while ["default", "ecrs"].iter().any(|p| nums(lab, p) != (n, n)) {
            if Instant::now() > until {
                let rows: serde_json::Value =
                    serde_json::from_str(&ok(&lab.dir, &["pg", "ls", "--json"])).unwrap();
                let stuck: Vec<_> = (rows.as_array().unwrap().iter())
                    .filter(|r| r["state"] != "active+clean")
                    .collect();
                panic!("pg_num and pgp_num not {n} after 240 s; not clean: {stuck:?}");
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    wait_for(&lab, 32);
    lab.wait_clean(Duration::from_secs(120), "the PGs clean at 32 per pool");
    eprintln!(
        "8 -> 32 PGs on both pools: clean {:?} after pg_num was set",
        t.elapsed()
    );
    let st: serde_json::Value = serde_json::from_str(&ok(&lab.dir, &["status", "--json"])).unwrap();
    assert_eq!(st["pgs"]["total"], 64, "{st}");
    let t = Instant::now();
    for pool in ["default", "ecrs"] {
        ok(&lab.dir, &["pool", "set", pool, "pg_num", "8"]);
    }
    wait_for(&lab, 8);
    lab.wait_clean(Duration::from_secs(120), "the PGs clean at 8 per pool");
    eprintln!(
        "32 -> 8 PGs on both pools: clean {:?} after pg_num was set",
        t.elapsed()
    );
    let (done, failed, _) = work.stop();
    work.check(&mut lab, done, failed);
    // No OSD goes down: every op is answered (one sent to a PG that
    // merged away goes to the PG its object is in now).
    assert_eq!(failed, 0, "ops failed");
    let st: serde_json::Value = serde_json::from_str(&ok(&lab.dir, &["status", "--json"])).unwrap();
    assert_eq!(st["pgs"]["total"], 16, "{st}");
}

/// An OSD restarted with another `--host` while clients work: osd.1
/// starts again as a member of host2 (beside osd.2), as Ceph's
/// `osd_crush_update_on_start` moves it; CRUSH then never puts osd.1 and
/// osd.2 in one PG (one copy per host), so the PGs that had both move
/// and their data follows. Every history is linearizable, nothing
/// acknowledged is lost, and the PGs end clean on the new layout.
#[test]
fn a_changed_host_moves_the_osd_and_its_data_follows_while_clients_work() {
    if !hosts_or_skip() {
        return;
    }
    let mut lab = Lab::start_with("lh", 1, 4);
    for kind in Kind::ALL {
        kind.prepare(&mut lab);
    }
    lab.wait_clean(Duration::from_secs(60), "the pools clean");
    let together = |lab: &Lab| -> usize {
        let rows: serde_json::Value =
            serde_json::from_str(&ok(&lab.dir, &["pg", "ls", "--json"])).unwrap();
        (rows.as_array().unwrap().iter())
            .filter(|r| {
                let up = r["up"].as_array().cloned().unwrap_or_default();
                up.contains(&serde_json::json!(1)) && up.contains(&serde_json::json!(2))
            })
            .count()
    };
    assert!(together(&lab) > 0, "no PG on both osd.1 and osd.2 to move");
    let mut work = Workload::start(&mut lab, &[Kind::Replicated, Kind::Erasure, Kind::Kv]);
    std::thread::sleep(Duration::from_secs(2));
    let t = Instant::now();
    lab.restart_changed(lab.mons + 1, "--host", "host2");
    lab.wait_for(Duration::from_secs(30), "osd.1 up under host2", |lab| {
        let tree: serde_json::Value =
            serde_json::from_str(&ok(&lab.dir, &["osd", "tree", "--json"])).unwrap();
        let rows = tree.as_array().cloned().unwrap_or_default();
        let i = rows.iter().position(|r| r["name"] == "osd.1")?;
        let depth = rows[i]["depth"].as_u64()?;
        let parent = rows[..i]
            .iter()
            .rev()
            .find(|r| r["depth"].as_u64() == Some(depth - 1))?;
        (parent["name"] == "host2" && lab.is_up(1)).then_some(())
    });
    lab.wait_for(
        Duration::from_secs(120),
        "the PGs clean on the new layout",
        |lab| (crate::common::not_clean(&lab.dir).is_none() && together(lab) == 0).then_some(()),
    );
    eprintln!(
        "osd.1 moved to host2: clean {:?} after its restart",
        t.elapsed()
    );
    std::thread::sleep(Duration::from_secs(2));
    let (done, failed, _) = work.stop();
    work.check(&mut lab, done, failed);
    lab.wait_clean(Duration::from_secs(60), "the PGs clean at the end");
    assert_eq!(together(&lab), 0, "a PG holds two copies on host2");
}
