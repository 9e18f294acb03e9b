//! Scrubs in a random run (`Run::scrubs`): now and then the operator asks
//! a PG for a scrub, deep or not, with repair or not, and (`Run::rot`)
//! now and then one copy of an object rots (its data fails its checksum
//! until rewritten; one rotten copy at a time, and only one other OSDs
//! hold at the same version, one or k of them). Reads of a rotten primary
//! copy are mended from a member; scrubs run chunk by chunk under the
//! run's writes, crashes, partitions and map changes. At the clean check
//! every PG is deep-scrubbed and repaired, then deep-scrubbed again: the
//! second finds nothing, no copy is left rotten, and no scrub ever found a
//! copy that differs but by rot (nothing else here makes copies differ:
//! anything else is a scrub or repair bug).
//!
//! It must never read the clock or the OS's randomness.

use super::*;
use loligo_pg::pg::scrub::ScrubKind;
use loligo_pg::pg::scrub_map::ShardError;
use loligo_store::ObjectId;

/// Chance (per mille) per step that the operator asks a PG for a scrub.
pub(crate) const SCRUB_ASK_PER_MILLE: u64 = 20;

/// Chance (per mille) per step that a copy rots (while none is rotten).
pub(crate) const ROT_PER_MILLE: u64 = 10;

/// The PGs' scrub schedule in scrub runs: due every few seconds (a run
/// lasts 30 s of simulated time).
pub(crate) const SIM_SCHEDULE: loligo_pg::pg::scrub::ScrubSchedule =
    loligo_pg::pg::scrub::ScrubSchedule {
        min_interval_ms: 3_000,
        max_interval_ms: 8_000,
        deep_interval_ms: 6_000,
    };

/// Steps the clean check gives each of its scrub passes.
const PASS_STEPS: usize = 2_000;

fn oid_of(obj: usize) -> ObjectId {
    let name = crate::obj_name(obj);
    ObjectId::new(loligo_crush::hash::str_hash_rjenkins(name.as_bytes()), name)
}

impl Sim {
    pub(crate) fn scrub_faults(&mut self) {
        if !self.scrubs {
            return;
        }
        for o in 0..OSDS {
            self.check_found(o);
        }
        if self.rng.chance(SCRUB_ASK_PER_MILLE) {
            let (o, p) = (self.rng.index(OSDS), self.rng.index(self.pg_count()));
            let kind = ScrubKind {
                deep: self.rng.chance(500),
                repair: self.rng.chance(500),
            };
            if self.osds[o]
                .pgs
                .get_mut(p)
                .is_some_and(|pg| pg.request_scrub(kind))
            {
                self.stats.scrubs_asked += 1;
            }
        }
        if self.rot && self.rng.chance(ROT_PER_MILLE) && self.rotten_now() == 0 {
            let (obj, o) = (self.rng.index(OBJECTS), self.rng.index(OSDS));
            let (c, oid) = (coll(self.pg_now(obj)), oid_of(obj));
            // (Only a copy another OSD also holds at its version: rot of
            // the sole copy of a write loses it, whatever the PG does.)
            let version = |sim: &Sim, o: usize| {
                loligo_pg::pg::recovery::stored_version(sim.osds[o].disk.inner(), c, &oid)
                    .ok()
                    .flatten()
                    .flatten()
            };
            let mine = version(self, o);
            let twins = self.copies_at(obj, mine, &|x| x == o);
            // (An empty copy, as a small object's shard may be, has no
            // data to rot.)
            let empty = (self.osds[o].disk.inner().stat(c, &oid)).map_or(true, |st| st.size == 0);
            let enough = mine.is_some() && twins >= self.copies_needed() && !empty;
            if self.osds[o].running() && enough {
                if self.trace {
                    println!(
                        "  osd.{o}'s copy of o{obj} at {mine:?} rots ({twins} others hold it)"
                    );
                }
                self.osds[o].disk.store.rot(c, &oid);
                self.stats.rotted += 1;
            }
        }
    }

    /// Whether object `obj`'s only copies at the version of a rotten one
    /// are rotten: a good copy of it is nowhere.
    pub(crate) fn rot_lost(&self, obj: usize) -> bool {
        let (c, oid) = (coll(self.pg_now(obj)), oid_of(obj));
        let version = |o: usize| {
            loligo_pg::pg::recovery::stored_version(self.osds[o].disk.inner(), c, &oid)
                .ok()
                .flatten()
                .flatten()
        };
        let rotten = |o: usize| self.osds[o].disk.store.rotten().contains(&(c, oid.clone()));
        (0..OSDS)
            .filter(|&o| rotten(o))
            .any(|o| self.copies_at(obj, version(o), &rotten) < self.copies_needed())
    }

    /// How many copies of object `obj` at version `v` the OSDs not
    /// `skipped` hold: OSDs, or distinct shards (by their label).
    fn copies_at(&self, obj: usize, v: Option<Version>, skipped: &dyn Fn(usize) -> bool) -> usize {
        let (c, oid) = (coll(self.pg_now(obj)), oid_of(obj));
        let holders = (0..OSDS).filter(|&x| {
            !skipped(x)
                && loligo_pg::pg::recovery::stored_version(self.osds[x].disk.inner(), c, &oid)
                    .ok()
                    .flatten()
                    .flatten()
                    == v
        });
        if self.ec.is_none() {
            return holders.count();
        }
        holders
            .filter_map(|x| {
                (self.osds[x].disk.inner())
                    .getattr(c, &oid, loligo_pg::ec::SHARD_ATTR)
                    .ok()
            })
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    }

    /// Good copies an object needs to be read: one, or k shards.
    fn copies_needed(&self) -> usize {
        self.ec.as_ref().map_or(1, |st| st.k())
    }

    /// Where object `obj`'s copies are: (OSD, version, rotten).
    pub(crate) fn copies_of(&self, obj: usize) -> Vec<(usize, Option<Version>, bool)> {
        let (c, oid) = (coll(self.pg_now(obj)), oid_of(obj));
        (0..OSDS)
            .filter_map(|o| {
                let v = loligo_pg::pg::recovery::stored_version(self.osds[o].disk.inner(), c, &oid)
                    .ok()
                    .flatten()?;
                let rotten = self.osds[o].disk.store.rotten().contains(&(c, oid.clone()));
                Some((o, v, rotten))
            })
            .collect()
    }

    fn rotten_now(&self) -> usize {
        self.osds.iter().map(|o| o.disk.store.rotten().len()).sum()
    }

    /// What every scrub on OSD `o` found: only rot.
    fn check_found(&mut self, o: usize) {
        for (p, pg) in self.osds[o].pgs.iter().enumerate() {
            for i in pg.inconsistent() {
                for (osd, errs) in &i.bad {
                    assert_eq!(
                        errs,
                        &vec![ShardError::ReadError],
                        "pg {p}: osd.{o}'s scrub found osd.{osd}'s copy of {} wrong, not rotten: {i:?}",
                        i.name
                    );
                }
            }
        }
    }

    /// The clean check's scrub passes (see the module's comment).
    pub(crate) fn scrub_everything(&mut self) {
        for o in 0..OSDS {
            self.check_found(o);
            for pg in &self.osds[o].pgs {
                let (done, scheduled) = pg.scrub_counts();
                self.stats.scrubs_done += done;
                self.stats.scrubs_scheduled += scheduled;
                self.stats.scrub_slots_refused += pg.scrub_slots_refused();
            }
        }
        // As an operator would: `noscrub` and `nodeep-scrub` stop the
        // scheduled scrubs, so the ones asked for here do not wait behind
        // them for the scrub slots (one per OSD).
        for osd in &mut self.osds {
            for pg in &mut osd.pgs {
                pg.scrub_flags = loligo_pg::pg::scrub::ScrubFlags {
                    no_scrub: true,
                    no_deep_scrub: true,
                };
            }
        }
        for repair in [true, false] {
            let mut asked = Vec::new();
            for o in 0..OSDS {
                for (p, pg) in self.osds[o].pgs.iter_mut().enumerate() {
                    // (Counted, not stamped: two can end within a tick.)
                    let before = pg.deep_scrubs_done();
                    if pg.request_scrub(ScrubKind { deep: true, repair }) {
                        asked.push((o, p, before));
                    }
                }
            }
            assert_eq!(
                asked.len(),
                self.pg_count(),
                "a primary for every PG: {asked:?}"
            );
            let done = |sim: &Sim| {
                asked
                    .iter()
                    .all(|&(o, p, before)| sim.osds[o].pgs[p].deep_scrubs_done() > before)
            };
            for _ in 0..PASS_STEPS {
                if done(self) && (!repair || self.rotten_now() == 0) {
                    break;
                }
                self.step();
            }
            assert!(
                done(self),
                "deep scrubs of every PG did not end: asked {asked:?}, ended now {:?}",
                (asked.iter())
                    .map(|&(o, p, _)| self.osds[o].pgs[p].deep_scrubs_done())
                    .collect::<Vec<_>>()
            );
            for o in 0..OSDS {
                self.check_found(o);
            }
            self.stats.deep_scrubs += asked.len() as u64;
        }
        for o in 0..OSDS {
            for (p, pg) in self.osds[o].pgs.iter().enumerate() {
                if pg.is_primary() {
                    assert!(
                        pg.inconsistent().is_empty(),
                        "pg {p}: still inconsistent after a repair: {:?}",
                        pg.inconsistent()
                    );
                }
            }
        }
        let rotten: Vec<_> = (0..OSDS)
            .flat_map(|o| {
                let r = self.osds[o].disk.store.rotten();
                let s = self.osds[o].disk.inner();
                r.into_iter().map(move |(c, oid)| {
                    let v = loligo_pg::pg::recovery::stored_version(s, c, &oid);
                    (o, c, v, oid.name)
                })
            })
            .collect();
        assert!(
            rotten.is_empty(),
            "rotten copies left after a repair of every PG: {rotten:?}, acting {:?}",
            self.mon.newest().acting
        );
        for o in 0..OSDS {
            self.stats.repaired += self.osds[o].pgs.iter().map(Pg::repaired).sum::<u64>();
            self.stats.read_repairs += (self.osds[o].pgs.iter()).map(Pg::read_repairs).sum::<u64>();
            self.stats.parity_checked += (self.osds[o].pgs.iter())
                .map(Pg::parity_checked)
                .sum::<u64>();
        }
        // Every scrub slot comes back once the scrubs are over (releases
        // get through or are sent again; none waits out a member's idle
        // timeout here).
        let held = |sim: &Sim| -> Vec<(usize, usize)> {
            (0..OSDS)
                .map(|o| (o, sim.osds[o].scrub_slots.held()))
                .filter(|&(_, n)| n > 0)
                .collect()
        };
        for _ in 0..PASS_STEPS {
            if held(self).is_empty() {
                break;
            }
            self.step();
        }
        assert!(
            held(self).is_empty(),
            "scrub slots still held: {:?}",
            held(self)
        );
    }
}
