//! Named scenarios: the simulator driven step by step into a situation
//! the random runs reach rarely or not at all, each checked by the same
//! rules as every run (a read never older than what was acknowledged
//! before it was sent).

use loligo_sim::Sim;

/// An OSD cut off from the monitors, and only from them, never hears
/// that they marked it down; clients still on the maps it knows keep
/// asking it. Once a new primary has taken a write, a read through the
/// old one must not return the value before it (a stale read): read
/// leases make the old primary stop serving before the new one serves.
#[test]
fn an_osd_cut_off_from_the_monitors_serves_no_stale_reads() {
    let mut s = Sim::scripted(1);
    let obj = 0;
    let first = s.write(obj).expect("the first write is acknowledged");
    let old_map = s.epoch();
    let old_primary = s.primary_of(obj).expect("a primary");
    s.cut_from_monitors(old_primary);
    s.mark_down(old_primary);
    s.settle();
    assert_ne!(s.primary_of(obj), Some(old_primary), "a new primary");
    let second = s.write(obj).expect("the new primary takes a write");
    assert!(second > first);
    // A client still on the old map asks the old primary, which never
    // heard it was marked down: its members no longer renew its read
    // lease, and the new primary waited that lease out before it took the
    // write, so the old primary serves nothing (the read is checked as
    // every read is: never older than the write acknowledged before it).
    assert!(
        !s.read_at(obj, old_map),
        "the old primary answers no read after its lease ran out"
    );
    assert!(s.read_at(obj, s.epoch()), "the new primary serves it");
}

/// As the scenario above, with the pool split right after the old
/// primary is marked down: the object now lives in a child PG, a new PG
/// whose copies on the other OSDs were cut from the parent's. Those
/// copies granted the old primary its lease as the parent's, so the
/// child's first primary must wait it out as the parent's new primary
/// does; a child that started with no grants would take the write at
/// once, and the old primary, which never heard of the split, would go
/// on serving the object's old value for the rest of its lease.
#[test]
fn a_split_child_waits_out_the_lease_its_parents_old_primary_holds() {
    let mut s = Sim::scripted_splitting(1);
    let obj = Sim::objects_split_off()[0];
    let first = s.write(obj).expect("the first write is acknowledged");
    let old_map = s.epoch();
    let old_primary = s.primary_of(obj).expect("a primary");
    let old_pg = s.pg_now(obj);
    s.cut_from_monitors(old_primary);
    s.mark_down(old_primary);
    s.split_pool();
    assert_ne!(s.pg_now(obj), old_pg, "the object moved to a child PG");
    assert_ne!(s.primary_of(obj), Some(old_primary), "a new primary");
    // (Written once the child serves: an op that comes before its OSD
    // has split is answered only at the client's retry, after the lease.)
    assert!(s.await_active(obj), "the child's primary serves");
    let second = s.write(obj).expect("the child's primary takes a write");
    assert!(second > first);
    assert!(
        !s.read_at(obj, old_map),
        "the old primary answers no read after its lease ran out"
    );
    assert!(s.read_at(obj, s.epoch()), "the child's primary serves it");
}

/// The scenario's steps work as the stale-read scenario needs them: the
/// monitors mark the cut-off primary down, a new primary takes writes,
/// and a client on the newest map reads the newest value.
#[test]
fn a_primary_cut_off_from_the_monitors_is_replaced_and_writes_go_on() {
    let mut s = Sim::scripted(1);
    let obj = 0;
    let first = s.write(obj).expect("the first write is acknowledged");
    let old_primary = s.primary_of(obj).expect("a primary");
    s.cut_from_monitors(old_primary);
    s.mark_down(old_primary);
    s.settle();
    assert_ne!(s.primary_of(obj), Some(old_primary), "a new primary");
    let second = s.write(obj).expect("the new primary takes a write");
    assert!(second > first);
    assert!(s.read_at(obj, s.epoch()));
}

/// A replica misses every map of an interval it was out of (cut off from
/// the monitors while they marked it down and up again) and then hears of
/// the newest one only, with the same acting set and primary as the last
/// map it saw. It must still see that its interval ended (a member booted
/// since: the newest boot epoch among the acting set is past its
/// interval's start) and catch up on the write it missed, not go on as
/// if nothing happened.
#[test]
fn a_replica_that_skips_the_maps_of_an_interval_it_missed_catches_up() {
    let mut s = Sim::scripted(2);
    let obj = 0;
    s.write(obj).expect("the first write is acknowledged");
    let replica = s.replica_of(obj).expect("a replica");
    s.cut_from_monitors(replica);
    s.mark_down(replica);
    s.settle();
    s.write(obj).expect("a write while the replica is out");
    s.mark_up(replica);
    s.reconnect(replica);
    s.settle();
    s.write(obj).expect("a write with the replica back");
    s.verify();
}

/// A partition between a primary and a replica, both running and both
/// reaching the monitors: writes wait until the monitors mark the replica
/// down (as the primary's failure reports would), go on without it, and
/// once the partition heals and the replica boots again it catches up:
/// every acknowledged write is read back and the copies end equal.
#[test]
fn a_partition_between_primary_and_replica_heals_and_the_replica_catches_up() {
    let mut s = Sim::scripted(3);
    let obj = 0;
    s.write(obj).expect("the first write is acknowledged");
    let primary = s.primary_of(obj).expect("a primary");
    let replica = s.replica_of(obj).expect("a replica");
    s.partition(primary, replica);
    let first = s.acked(obj);
    assert_eq!(
        s.write(obj),
        None,
        "a write waits for the replica it cannot reach"
    );
    s.mark_down(replica);
    s.settle();
    assert!(
        s.finish(),
        "the write that waited is answered in the new interval"
    );
    assert!(s.acked(obj) > first);
    s.write(obj).expect("a write without the replica");
    s.join(primary, replica);
    s.mark_up(replica);
    s.settle();
    s.write(obj).expect("a write with the replica back");
    s.verify();
}
