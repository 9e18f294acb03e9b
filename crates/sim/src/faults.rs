//! The faults a random run injects at each step: OSD crashes (more often
//! while unsynced chunks are held), restarts, devices turning
//! backfillfull, partitions between OSDs, OSDs cut off from the
//! monitors alone, the monitors' leader failing,
//! OSDs marked out (by the monitors after a while down, by an operator)
//! and in, OSDs declared lost and unfound objects marked lost.
//!
//! It must never read the clock or the OS's randomness: every choice
//! comes from the run's generator.

use super::*;

/// Chance (per mille) per step that a stopped OSD is declared lost (in
/// `lost_osds_let_pgs_go_on`).
pub(crate) const LOSE_PER_MILLE: u64 = 3;

/// Chance (per mille) per step that the operator marks a PG's unfound
/// objects lost while its primary reports some (in the lost runs).
pub(crate) const MARK_UNFOUND_PER_MILLE: u64 = 50;

/// How long the operator waits before marking the same PG again (ms).
pub(crate) const MARK_UNFOUND_AGAIN_MS: u64 = 5_000;

/// Chance (per mille) per step that the operator marks an OSD out or
/// back in (the real monitors' runs only).
pub(crate) const OPERATOR_OUT_PER_MILLE: u64 = 2;

/// Chance (per mille) per step that two OSDs are cut off from each other
/// (`Run::partitions`).
pub(crate) const PARTITION_PER_MILLE: u64 = 3;

/// Chance (per mille) per step that an OSD is cut off from the monitors
/// alone (`Run::partitions`).
pub(crate) const MONITOR_CUT_PER_MILLE: u64 = 2;

/// Chance (per mille) per step that a device's backfillfull mark flips.
pub(crate) const TOOFULL_PER_MILLE: u64 = 2;

/// Chance (per mille), at each step, that an OSD holding unsynced
/// backfill chunks crashes.
pub(crate) const VOLATILE_CRASH_PER_MILLE: u64 = 100;
/// Chances (per mille, per step) of the operator's split and of each
/// pgp_num step after it (`Run::splits`).
const SPLIT_PER_MILLE: u64 = 1;
/// Chance (per mille, per step, once pgp_num has reached pg_num after a
/// split) that the operator merges the PGs back.
const MERGE_PER_MILLE: u64 = 2;
const PGP_STEP_PER_MILLE: u64 = 2;

impl Sim {
    pub(crate) fn faults(&mut self) {
        let running: Vec<usize> = (0..OSDS).filter(|&o| self.osds[o].running()).collect();
        if running.len() > 1 && self.rng.chance(4) {
            let o = running[self.rng.index(running.len())];
            self.crash(o);
        }
        // An OSD holding backfill chunks applied but not yet durable
        // crashes more often (the window lasts until its next synced
        // commit, which another PG's write soon brings).
        let holding = running.iter().find(|&&o| self.osds[o].disk.volatile() > 0);
        if let Some(&o) = holding.filter(|_| running.len() > 1) {
            if self.rng.chance(VOLATILE_CRASH_PER_MILLE) {
                self.crash(o);
            }
        }
        // Now and then a device fills past the backfill threshold, or
        // has room again (the monitors' map says so).
        if self.rng.chance(TOOFULL_PER_MILLE) {
            let o = self.rng.index(OSDS);
            let toofull = !self.mon.newest().toofull[o];
            self.stats.toofull_flips += 1;
            self.propose(vec![monitor::fullness(o, toofull)]);
        }
        self.partition_faults();
        self.split_faults();
        self.election_faults();
        self.scrub_faults();
        let electing = self.elections.electing();
        if self.lose && !electing && self.rng.chance(MARK_UNFOUND_PER_MILLE) {
            self.mark_unfound_lost();
        }
        let stopped: Vec<usize> = (0..OSDS).filter(|&o| !self.osds[o].running()).collect();
        if self.lose && !electing && !stopped.is_empty() && self.rng.chance(LOSE_PER_MILLE) {
            let o = stopped[self.rng.index(stopped.len())];
            // Only a down OSD can be declared lost.
            if !self.mon.newest().up[o] {
                self.declare_lost(o);
            }
        }
        if !stopped.is_empty() && self.rng.chance(6) {
            let o = stopped[self.rng.index(stopped.len())];
            // Start again only once the monitors marked it down (as a
            // real OSD's boot would).
            if !self.mon.newest().up[o] {
                self.start(o);
            }
        }
        self.auto_out();
    }

    /// With `Run::splits`: now and then the operator doubles the pool's
    /// PG count (each copy splits in place as its OSD takes the map),
    /// and then, a step at a time, pgp_num follows, moving the children
    /// to their own OSDs (the monitors' leader steps it once the PGs are
    /// clean; here the steps come whenever, the harder case).
    pub(crate) fn split_faults(&mut self) {
        if !self.splits || self.elections.electing() {
            return;
        }
        let Some(pool) = self.mon.pool() else { return };
        let merging = self.mon.map().is_some_and(|m| !m.pg_merges.is_empty());
        if merging {
            // (The leader steps pgp_num down: `pg_num_leader`.)
            return;
        }
        let merge = pool.pg_num as usize == PGS_MAX && pool.pgp_num == pool.pg_num;
        if merge && self.rng.chance(MERGE_PER_MILLE) {
            // `pool set p pg_num 3`: back to where the run began.
            self.propose(vec![Change::PgMergeTarget {
                pool: pool.id,
                to: PGS as u32,
            }]);
        } else if (pool.pg_num as usize) < PGS_MAX && self.rng.chance(SPLIT_PER_MILLE) {
            self.propose(vec![Change::PoolUpdate(Pool {
                pg_num: PGS_MAX as u32,
                ..pool
            })]);
        } else if pool.pgp_num < pool.pg_num && self.rng.chance(PGP_STEP_PER_MILLE) {
            self.stats.pgp_steps += 1;
            self.propose(vec![Change::PoolUpdate(Pool {
                pgp_num: pool.pgp_num + 1,
                ..pool
            })]);
        }
    }

    /// Healing a split run: pgp_num reaches pg_num (as the leader's
    /// steps end once the PGs are clean).
    pub(crate) fn finish_pgp(&mut self) {
        if self.mon.map().is_some_and(|m| !m.pg_merges.is_empty()) {
            // (A merge under way: the leader finishes it.)
            return;
        }
        let Some(pool) = self
            .mon
            .pool()
            .filter(|p| self.splits && p.pgp_num < p.pg_num)
        else {
            return;
        };
        self.stats.pgp_steps += 1;
        self.propose(vec![Change::PoolUpdate(Pool {
            pgp_num: pool.pg_num,
            ..pool
        })]);
    }

    pub(crate) fn crash(&mut self, o: usize) {
        self.stats.crashes += 1;
        let gen = self.osds[o].gen;
        // Commits in flight and unsynced ones: a prefix of them made it
        // to disk.
        let c = self.osds[o].disk.crash(&mut self.rng);
        if self.trace {
            println!(
                "  osd.{o} crashes: {} volatile, {} queued, {} kept, {} lost",
                c.volatile, c.queued, c.kept, c.lost
            );
        }
        self.stats.chunks_lost += c.lost as u64;
        self.take_scrubs(o);
        self.osds[o].pgs.clear();
        self.osds[o].asks.clear();
        self.osds[o].slots = Reserver::new(self.slots);
        // Messages it held unanswered: the senders' calls fail and they
        // send them again.
        for m in take_held(&mut self.held, |m| m.to == o) {
            self.send(Ev::Peer(m));
        }
        // The monitors notice after a grace period.
        self.send(Ev::MarkDown { osd: o, gen });
    }

    /// A running OSD that a map shows down boots again, as the daemon does
    /// (the random runs on the real monitors; scenarios say when).
    pub(crate) fn reboot_if_marked_down(&mut self, o: usize) {
        if !self.mon.real() || self.scripted || self.cut_off[o] || self.mon.newest().up[o] {
            return;
        }
        let mut changes = vec![monitor::boot(o)];
        if !self.mon.newest().is_in[o] {
            changes.push(Change::OsdIn { id: o as i32 });
        }
        self.stats.reboots += 1;
        self.propose(changes);
    }

    /// Now and then two OSDs cannot reach each other for a while (both
    /// still reach the monitors and the clients), with `Run::one_way` in
    /// half of them in one direction only (a question gets through, its
    /// answer does not); in half of them their failure reports lead the
    /// monitors to mark one side down, which boots again when it hears
    /// (`Run::partitions`).
    pub(crate) fn partition_faults(&mut self) {
        if !self.partitions || self.healing || !self.mon.real() {
            return;
        }
        let now = self.now_ms;
        let healed: Vec<(usize, usize)> = (self.heals.iter())
            .filter(|(_, &at)| at <= now)
            .map(|(link, _)| *link)
            .collect();
        for link in healed {
            self.heals.remove(&link);
            self.apart.remove(&link);
        }
        let reconnected: Vec<usize> = (self.mon_heals.iter())
            .filter(|(_, &at)| at <= now)
            .map(|(&o, _)| o)
            .collect();
        for o in reconnected {
            self.reconnect(o);
        }
        if self.rng.chance(MONITOR_CUT_PER_MILLE) {
            self.cut_some_osd_from_the_monitors();
        }
        if !self.rng.chance(PARTITION_PER_MILLE) {
            return;
        }
        let a = self.rng.index(OSDS);
        let b = (a + 1 + self.rng.index(OSDS - 1)) % OSDS;
        if self.apart.contains(&(a, b)) || self.apart.contains(&(b, a)) {
            return;
        }
        self.stats.partitions += 1;
        let lasts = 500 + self.rng.below(10) * 500;
        let one_way = self.one_way && self.rng.chance(500);
        self.stats.one_way += u64::from(one_way);
        let links = if one_way {
            vec![(a, b)]
        } else {
            vec![(a, b), (b, a)]
        };
        for link in links {
            self.apart.insert(link);
            self.heals.insert(link, now + lasts);
        }
        if self.rng.chance(500) {
            let osd = if self.rng.chance(500) { a } else { b };
            let at = now + (5 + self.rng.below(40)) * STEP_MS;
            self.queue.push((at, Ev::Reported { osd }));
        }
    }

    /// An OSD loses the monitors, and only them, for 0.5 to 5 s: it hears
    /// of no map; its peers and clients still reach it (clients on the
    /// maps it knows keep asking it). In half of them the monitors mark it
    /// down (its beacons stopped) and it boots again once it hears.
    fn cut_some_osd_from_the_monitors(&mut self) {
        let o = self.rng.index(OSDS);
        if self.cut_off[o] {
            return;
        }
        self.stats.monitor_cuts += 1;
        self.cut_off[o] = true;
        let lasts = 500 + self.rng.below(10) * 500;
        self.mon_heals.insert(o, self.now_ms + lasts);
        if self.rng.chance(500) {
            let at = self.now_ms + (5 + self.rng.below(40)) * STEP_MS;
            self.queue.push((at, Ev::Reported { osd: o }));
        }
    }

    /// Now and then the monitors' leader fails, and a new one is in
    /// after 0.2 to 3 s (`Run::elections`; see `election`).
    pub(crate) fn election_faults(&mut self) {
        if !self.elections.on() || self.healing {
            return;
        }
        if self.elections.due(self.now_ms) {
            self.end_election();
        } else if !self.elections.electing() && self.rng.chance(ELECTION_PER_MILLE) {
            let lasts = 200 + self.rng.below(15) * 200;
            if self.trace {
                println!("  the monitors' leader fails for {lasts}ms");
            }
            self.stats.elections += 1;
            self.elections.start(self.now_ms + lasts);
        }
    }

    /// A new leader is in: it commits what the failed one had taken, then
    /// what was asked for meanwhile.
    pub(crate) fn end_election(&mut self) {
        let ended = self.elections.end();
        self.stats.taken_mid_commit += ended.taken.len() as u64;
        for t in ended.taken {
            let changes = match t {
                Taken::Record { pg, from, ask } => {
                    let judged = self.mon.judge(from, pg, &ask);
                    self.stats.records_late += u64::from(judged.late);
                    judged.changes
                }
                Taken::PgTemp { pg, from, osds } => self.mon.steer(from, pg, Steer::PgTemp(osds)),
                Taken::PrimaryTemp { pg, from, osd } => {
                    self.mon.steer(from, pg, Steer::PrimaryTemp(osd))
                }
            };
            self.propose(changes);
        }
        for changes in ended.deferred {
            self.propose(changes);
        }
    }

    /// A record ask reached the monitors while they elected a leader: the
    /// call fails (the failing leader may have taken it), and the daemon
    /// asks again later.
    pub(crate) fn record_call_failed(&mut self, pg: usize, from: usize, gen: u64, ask: RecordAsk) {
        self.stats.asks_failed += 1;
        if self.rng.chance(500) {
            let ask = ask.clone();
            self.elections.take(Taken::Record { pg, from, ask });
        }
        self.elections.failed(from, pg, gen, ask);
        let at = self.now_ms + RECORD_RETRY_MS;
        self.queue.push((at, Ev::RecordAgain { pg, from }));
    }

    /// A pg_temp or primary_temp ask reached the monitors while they
    /// elected a leader: the call fails, the failing leader may have taken
    /// it, and the PG asks again on its own if it still needs it.
    pub(crate) fn temp_call_failed(&mut self, ask: Taken) {
        self.stats.asks_failed += 1;
        if self.rng.chance(500) {
            self.elections.take(ask);
        }
    }

    /// The monitors mark an OSD out once it has been down for
    /// `out_after_ms` (their `mon_osd_down_out_interval`): CRUSH then
    /// places its PGs elsewhere, and it is backfilled when it returns.
    pub(crate) fn auto_out(&mut self) {
        if !self.mon.real() {
            return;
        }
        // Now and then the operator marks an OSD out (to drain it) or
        // back in: CRUSH moves PGs onto OSDs without their data, which
        // are backfilled while writes go on. One OSD out at most, so a
        // size-3 set stays whole.
        if !self.healing && self.rng.chance(OPERATOR_OUT_PER_MILLE) {
            let o = self.rng.index(OSDS);
            let at = self.mon.newest();
            let outs = (0..OSDS).filter(|&i| !at.is_in[i]).count();
            if !at.is_in[o] && at.up[o] {
                self.propose(vec![Change::OsdIn { id: o as i32 }]);
            } else if at.is_in[o] && outs == 0 {
                self.propose(vec![Change::OsdOut { id: o as i32 }]);
            }
        }
        for o in 0..OSDS {
            let at = self.mon.newest();
            if at.up[o] || !at.is_in[o] {
                self.down_since_ms[o] = None;
                continue;
            }
            let since = *self.down_since_ms[o].get_or_insert(self.now_ms);
            if self.now_ms >= since.saturating_add(self.out_after_ms) {
                self.propose(vec![Change::OsdOut { id: o as i32 }]);
            }
        }
    }

    /// `osd lost O`: its disk is gone (it starts again empty, as a
    /// replaced one), and the monitors take it out of every write-set
    /// record (`Change::OsdLost`). A PG whose record leaves empty goes on
    /// with what the up copies hold: what was acknowledged before in it
    /// may be gone (reads in flight and later ones expect nothing of it),
    /// but never a value not written, a torn one or a removed one, and
    /// what is acknowledged from then on must survive as before.
    pub(crate) fn declare_lost(&mut self, o: usize) {
        if self.trace {
            println!("  osd.{o} declared lost");
        }
        self.stats.lost_osds += 1;
        self.osds[o].disk = self.osds[o].disk.replaced(&colls());
        let before = self.mon.newest().record.clone();
        self.propose(vec![Change::OsdLost { id: o as i32 }]);
        // A record left with fewer members than can read anything back
        // (one copy, or k shards): what was acknowledged before may be
        // gone.
        let floor = self.ec.as_ref().map_or(1, |st| st.k());
        for (p, r) in before.iter().enumerate() {
            let Some(r) = r else { continue };
            let after = self.mon.newest().record[p].as_ref();
            let left = after.map_or(0, |r| members(&r.osds).count());
            if left >= floor || members(&r.osds).count() < floor {
                continue;
            }
            self.stats.records_emptied += 1;
            self.may_have_lost(p);
        }
    }

    /// PG `p`'s acknowledged writes so far may be gone: reads in flight
    /// and later ones expect nothing of them (never a value not written,
    /// a torn one or a removed one).
    pub(crate) fn may_have_lost(&mut self, p: usize) {
        let pgs = self.pg_count();
        for obj in (0..OBJECTS).filter(|&obj| pg_in(obj, pgs) == p) {
            self.lost_upto[obj] = self.next_value[obj];
            self.acked[obj] = 0;
        }
        for pending in self.pending.values_mut() {
            if let Kind::Read { obj, floor } = &mut pending.kind {
                if pg_in(*obj, pgs) == p {
                    *floor = 0;
                }
            }
        }
    }

    /// `pg mark-unfound-lost P delete` for a PG whose primary reports
    /// unfound objects (as an operator who gave up waiting would): the
    /// primary removes what it cannot find, so what was acknowledged in
    /// the PG may be gone.
    pub(crate) fn mark_unfound_lost(&mut self) {
        // An operator gives the last mark time to act (each mark is a
        // new map, which restarts what recovery has in flight).
        let now = self.now_ms;
        let unfound: Vec<usize> = (0..self.pg_count())
            .filter(|&p| self.marked_ms[p].is_none_or(|t| now >= t + MARK_UNFOUND_AGAIN_MS))
            .filter(|&p| {
                let primary = self.mon.newest().primary[p];
                primary
                    .and_then(|o| self.osds[o as usize].pgs.get(p))
                    .is_some_and(|pg| pg.stat().is_some_and(|s| s.unfound > 0))
            })
            .collect();
        if unfound.is_empty() {
            return;
        }
        let p = unfound[self.rng.index(unfound.len())];
        if self.trace {
            println!("  pg {p}'s unfound objects marked lost");
        }
        self.stats.unfound_marked += 1;
        self.marked_ms[p] = Some(now);
        self.may_have_lost(p);
        self.propose(vec![Change::PgMarkUnfoundLost { pg: pg_id(p) }]);
    }
}
