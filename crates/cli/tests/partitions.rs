//! Partition tests on hosts of one machine (`lab`, over
//! `tools/hosts.sh`: network namespaces on a bridge, nftables cuts): one
//! or three monitors, three OSDs and a client host, each daemon a process
//! of its own on a host of its own. Needs root, iproute2 and nftables (CI
//! runs as root; `.ci/run` installs nftables); run as another user, the
//! tests say so and stop.

mod common;
mod lab;

use common::ok;
use lab::{hosts_or_skip, Lab, OSDS};
use std::time::{Duration, Instant};

/// The stale-read scenario: the primary of an object is cut off from the
/// monitor alone (its peers and a client on its side still reach it);
/// the monitor marks it down once its reports stop; a client that can
/// reach the monitor writes a new value through the new primary. The
/// client on the old primary's side, which kept its old map, asks the
/// old primary: it must get an error (the old primary's read lease ran
/// out before the new primary took the write), never the old value.
/// Healed, every client reads the new value.
#[test]
fn an_osd_cut_off_from_the_monitor_serves_no_stale_reads() {
    if !hosts_or_skip() {
        return;
    }
    let mut lab = Lab::start("lp", 1);
    let mut far = lab.client(lab.client_host());
    assert_eq!(far.ask("put x v1"), "ok");
    assert_eq!(far.ask("get x"), "value v1");
    let p = lab.primary_of("x");
    let old_epoch = far.ask("epoch");
    lab.cut_from_monitors(lab.osd_host(p));
    lab.cut_from_monitors(lab.client_host());
    lab.wait_for(
        Duration::from_secs(30),
        "the cut-off primary marked down",
        |lab| (lab.primary_of("x") != p).then_some(()),
    );
    // A client that reaches the monitor writes through the new primary.
    let t = Instant::now();
    let mut near = lab.client(0);
    assert_eq!(near.ask("put x v2"), "ok");
    eprintln!(
        "the new primary took a write {:?} after the map showed it",
        t.elapsed()
    );
    // The far client still has its old map, and asks the old primary.
    assert_eq!(far.ask("epoch"), old_epoch, "the far client kept its map");
    let read = far.ask("get x");
    assert!(
        read.starts_with("error"),
        "a client on the old primary's side read {read:?} after v2 was acknowledged"
    );
    // Healed, the far client hears of the new map and reads v2.
    lab.heal(lab.osd_host(p));
    lab.heal(lab.client_host());
    lab.wait_for(Duration::from_secs(30), "the far client to read v2", |_| {
        (far.ask("get x") == "value v2").then_some(())
    });
    lab.wait_clean(Duration::from_secs(60), "the PGs clean");
}

/// How long an object is unavailable when its primary crashes: the
/// primary's OSD is killed (SIGKILL) while a client writes it again and
/// again; its peers report it once it is silent for the heartbeat grace
/// (2 s here), the monitor marks it down, a new primary peers and serves
/// (no lease to wait out: the dead primary's ran out within the grace).
/// Printed, and bounded well above what it takes.
#[test]
fn a_crashed_primary_is_replaced_within_seconds_of_the_grace() {
    if !hosts_or_skip() {
        return;
    }
    let mut lab = Lab::start("lk", 1);
    let mut c = lab.client(lab.client_host());
    assert_eq!(c.ask("put y v0"), "ok");
    let p = lab.primary_of("y");
    let d = lab.osd_daemon(p);
    d.kill().unwrap();
    let killed = Instant::now();
    let _ = d.wait();
    let mut n = 1;
    let mut errors = 0;
    while c.ask(&format!("put y v{n}")) != "ok" {
        errors += 1;
        n += 1;
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "no write went through"
        );
    }
    let gap = killed.elapsed();
    eprintln!("writes resumed {gap:?} after the primary was killed ({errors} failed first)");
    assert_eq!(c.ask("get y"), format!("value v{n}"));
    assert!(gap < Duration::from_secs(15), "unavailable for {gap:?}");
}

/// An OSD that reaches some peers but not others: osd.0 and osd.1 lose
/// each other, and nothing else. Each reports the other, and neither has
/// the second reporter it takes to go down; after the standoff the
/// monitor marks one down (on a tie, the higher id: osd.1), and PGs go on
/// without it. It boots again, is reported again, and once marked down
/// more often than its markdown count (2 here) it stops, as a flapping
/// OSD. Writes through every PG (all hold both) go on; nothing is lost.
#[test]
fn an_osd_that_reaches_some_peers_but_not_others_is_marked_down_and_stops_flapping() {
    if !hosts_or_skip() {
        return;
    }
    let mut lab = Lab::start("lh", 1);
    let mut c = lab.client(lab.client_host());
    // An object whose primary is osd.0: its writes need osd.1 too.
    let name = (0..)
        .map(|i| format!("z{i}"))
        .find(|n| lab.primary_of(n) == 0)
        .expect("an object on osd.0");
    assert_eq!(c.ask(&format!("put {name} v0")), "ok");
    let cut = Instant::now();
    lab.cut_between(lab.osd_host(0), lab.osd_host(1));
    // Writes go on (each waits at most its op timeout).
    let (mut n, mut errors) = (0, 0);
    let mut up = true;
    while lab.osd_daemon(1).try_wait().ok().flatten().is_none() {
        n += 1;
        if c.ask(&format!("put {name} v{n}")) != "ok" {
            errors += 1;
        }
        if lab.is_up(1) != up {
            up = !up;
            eprintln!("{:?} after the cut: osd.1 up {up}", cut.elapsed());
        }
        assert!(
            cut.elapsed() < Duration::from_secs(90),
            "osd.1 did not stop as a flapping OSD"
        );
    }
    eprintln!(
        "osd.1 stopped as flapping {:?} after the cut; {n} writes, {errors} failed",
        cut.elapsed()
    );
    assert!(lab.is_up(0), "osd.0 stays up");
    lab.wait_for(Duration::from_secs(20), "osd.1 marked down", |lab| {
        (!lab.is_up(1)).then_some(())
    });
    let t = Instant::now();
    lab.wait_for(Duration::from_secs(30), "a write without osd.1", |_| {
        n += 1;
        (c.ask(&format!("put {name} v{n}")) == "ok").then_some(())
    });
    eprintln!("a write went through {:?} after osd.1 stopped", t.elapsed());
    assert_eq!(c.ask(&format!("get {name}")), format!("value v{n}"));
}

/// Three monitors on three hosts. The leader loses the other two (both
/// ways); OSDs and clients still reach every monitor. The two elect a
/// leader and go on: they mark an OSD out, and a client's writes go on.
/// The old leader, alone, changes nothing and says why: asked on its host
/// (where it is the only monitor in reach), `status` and `osd in` fail
/// with "no monitor quorum". Healed, it follows the majority: the map has
/// the majority's change, at no older epoch.
#[test]
fn a_monitor_cut_off_from_the_others_changes_nothing_and_the_majority_goes_on() {
    if !hosts_or_skip() {
        return;
    }
    let mut lab = Lab::start("lm", 3);
    let mut c = lab.client(lab.client_host());
    assert_eq!(c.ask("put m v0"), "ok");
    let old = lab.wait_for(Duration::from_secs(30), "a leader", Lab::mon_leader);
    let others: Vec<usize> = (0..3).filter(|&m| m != old).collect();
    for &m in &others {
        lab.cut_between(old, m);
    }
    let cut = Instant::now();
    let new = lab.wait_for(Duration::from_secs(60), "a new leader", |lab| {
        lab.mon_leader().filter(|&l| l != old)
    });
    eprintln!(
        "mon.{new} leads {:?} after mon.{old} was cut off",
        cut.elapsed()
    );
    ok(&lab.dir, &["osd", "out", "2"]);
    let epoch = lab.status().expect("status")["osdmap"]["epoch"]
        .as_u64()
        .expect("an epoch");
    for args in [&["status"][..], &["osd", "in", "2"][..]] {
        let out = lab.on_host(old, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("no monitor quorum"),
            "{args:?} on the cut-off monitor's host: {err}"
        );
    }
    for n in 1..=3 {
        assert_eq!(c.ask(&format!("put m v{n}")), "ok");
    }
    lab.heal(old);
    lab.wait_for(
        Duration::from_secs(60),
        "the old leader's host to see the map",
        |lab| {
            let out = lab.on_host(old, &["status", "--json"]);
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            let seen = v["osdmap"]["epoch"].as_u64()?;
            assert!(seen >= epoch, "epoch {seen} after {epoch}");
            (v["osdmap"]["num_in_osds"] == OSDS - 1).then_some(())
        },
    );
    assert_eq!(c.ask("get m"), "value v3");
}

/// The monitors' leader's host goes dark (its link down: packets vanish,
/// no connection is refused): the monitor every OSD reports to. Each
/// OSD's next report times out there and goes on to the others, which
/// elect a leader, and the reports after it start past the dark one: no
/// OSD goes unheard for the report timeout (4 s here), so none is marked
/// down, and writes go on. Map watches on it end once its pings go
/// unanswered and move on: a pool made meanwhile goes clean.
#[test]
fn a_monitor_host_gone_dark_leaves_every_osd_up() {
    if !hosts_or_skip() {
        return;
    }
    let mut lab = Lab::start("ld", 3);
    let mut c = lab.client(lab.client_host());
    assert_eq!(c.ask("put d v0"), "ok");
    let leader = lab.wait_for(Duration::from_secs(30), "a leader", Lab::mon_leader);
    let dark = Instant::now();
    lab.link(leader, false);
    let mut n = 0;
    while dark.elapsed() < Duration::from_secs(10) {
        // (Each call from this host may wait out its connect timeout on
        // the dark monitor first.)
        let up = lab.status().expect("status")["osdmap"]["num_up_osds"].clone();
        assert_eq!(
            up,
            OSDS,
            "OSDs up {:?} after mon.{leader} went dark",
            dark.elapsed()
        );
        n += 1;
        assert_eq!(c.ask(&format!("put d v{n}")), "ok");
        std::thread::sleep(Duration::from_millis(500));
    }
    // Map changes reach every OSD through the monitors still lit: a new
    // pool's PGs are made and go clean.
    ok(
        &lab.dir,
        &["pool", "create", "dark", "--pg-num", "4", "--size", "3"],
    );
    lab.wait_clean(Duration::from_secs(30), "the new pool's PGs clean");
    lab.link(leader, true);
    assert_eq!(c.ask("get d"), format!("value v{n}"));
}
