//! What a run checks once every OSD is back: every object reads at least
//! its newest acknowledged value, and every PG goes active+clean by
//! itself with every member on record, identical copies (objects, data,
//! xattrs, omap, log, head), no missing record or backfill cursor, no
//! stray copy and no recovery slot held; Merkle trees equal to rebuilds;
//! erasure-coded shards consistent and every shipped shard its version's.
//!
//! It checks with `assert!` and must never change what it checks.

use super::*;

/// Steps the PG may take to go clean once every OSD is back.
pub(crate) const CLEAN_STEPS: usize = 8_000;

/// Steps a clean PG's stray copies may take to be removed.
pub(crate) const STRAY_STEPS: usize = 4_000;

/// What a member's copy holds, for comparing copies.
#[derive(Debug, PartialEq)]
pub(crate) struct Copy {
    head: Version,
    objects: Vec<ObjectState>,
    /// The log's entries (each copy's Merkle leaf stamps left out: they
    /// are its own).
    log: BTreeMap<Vec<u8>, loligo_pg::pg::LogEntry>,
    missing: Vec<Vec<u8>>,
}

/// A member's copy; `ec`: as a shard (its data and shard attribute are
/// its own, and rollback copies are its own business), compared without
/// them.
pub(crate) fn copy_of(s: &dyn ObjectStore, c: CollectionId, ec: bool) -> Copy {
    let (names, _) = s.list(c, None, 10_000).unwrap();
    let objects = names
        .into_iter()
        .filter(|o| !(ec && loligo_pg::ec::is_internal(&o.name)))
        .map(|o| {
            let size = s.stat(c, &o).unwrap().size;
            let data = if ec {
                Vec::new()
            } else {
                s.read(c, &o, &[(0, size)]).unwrap().pop().unwrap()
            };
            let attrs = s
                .getattrs(c, &o)
                .unwrap()
                .into_iter()
                .filter(|(k, _)| !(ec && k == loligo_pg::ec::SHARD_ATTR))
                .collect();
            let omap = s.omap_range(c, &o, &[], None, 10_000).unwrap();
            (o.name, data, attrs, omap)
        })
        .collect();
    let rows = s.records(c, b"", 1_000_000).unwrap();
    let log = rows
        .iter()
        .filter(|(k, _)| k.starts_with(b"log/"))
        .map(|(k, v)| (k.clone(), loligo_pg::pg::record::decode_log(v).unwrap()))
        .collect();
    let missing = rows
        .iter()
        .filter(|(k, _)| k.starts_with(b"missing/") || k == b"backfill")
        .map(|(k, _)| k.clone())
        .collect();
    Copy {
        head: stored_info(s, c)
            .expect("info records read")
            .unwrap_or_default()
            .last_update,
        objects,
        log,
        missing,
    }
}

/// Every EC object's shards, as the acting set's members hold them, are
/// exactly the encoding of the object their data shards hold.
pub(crate) fn check_shards(st: &Striper, osds: &[Osd], acting: &[i32], c: CollectionId) {
    let primary = primary_of(acting).unwrap_or(0) as usize;
    let (names, _) = osds[primary].disk.inner().list(c, None, 10_000).unwrap();
    for o in names
        .iter()
        .filter(|o| !loligo_pg::ec::is_internal(&o.name))
    {
        let size_attr = osds[primary]
            .disk
            .inner()
            .getattr(c, o, loligo_pg::ec::SIZE_ATTR)
            .unwrap();
        let size: u64 = postcard::from_bytes(&size_attr).unwrap();
        let shards: Vec<Vec<u8>> = acting
            .iter()
            .map(|&m| {
                let s = osds[m as usize].disk.inner();
                let len = s.stat(c, o).unwrap().size;
                s.read(c, o, &[(0, len)]).unwrap().pop().unwrap()
            })
            .collect();
        let data: Vec<usize> = (0..st.k()).collect();
        let plan = st
            .plan_read(size, 0..size, &data, Coalesce::Conservative)
            .unwrap();
        let fetched: Fetched<Vec<u8>> = plan
            .reads
            .iter()
            .map(|(&i, exts)| {
                let v = exts
                    .iter()
                    .map(|&(off, len)| {
                        (off, shards[i][off as usize..(off + len) as usize].to_vec())
                    })
                    .collect();
                (i, v)
            })
            .collect();
        let object = st.decode_read(&plan, &fetched).unwrap();
        let want = st.encode(&object).unwrap();
        for (i, &m) in acting.iter().enumerate() {
            assert!(
                shards[i] == want[i],
                "{}: osd.{m}'s shard {i} is not the encoding of the object",
                o.name
            );
            assert!(
                loligo_pg::ec::holds_shard(osds[m as usize].disk.inner(), c, o, i).unwrap(),
                "{}: osd.{m} holds shard {i} not marked as such",
                o.name
            );
        }
    }
}

impl Sim {
    /// Every OSD back, nothing new: every object reads at least its
    /// newest acknowledged value. `false`: one cannot, as its only copy
    /// at its version rotted (see `Stats::rot_lost`; the clean checks
    /// do not apply).
    pub(crate) fn heal_and_check(&mut self) -> bool {
        self.healing = true;
        if self.elections.electing() {
            self.end_election();
        }
        if self.partitions {
            self.apart.clear();
            self.heals.clear();
            let cut: Vec<usize> = self.mon_heals.keys().copied().collect();
            for o in cut {
                self.reconnect(o);
            }
        }
        self.finish_pgp();
        let toofull = self.mon.newest().toofull;
        let room = (0..OSDS).filter(|&o| toofull[o]);
        let room = room.map(|o| monitor::fullness(o, false)).collect();
        self.propose(room);
        // Every OSD in again (one the operator marked out, or one that
        // is up and was out).
        let at = self.mon.newest();
        let back = (0..OSDS).filter(|&o| at.up[o] && !at.is_in[o]);
        let back = back.map(|o| Change::OsdIn { id: o as i32 }).collect();
        self.propose(back);
        for o in 0..OSDS {
            if !self.osds[o].running() {
                // Let the monitors mark it down first.
                for _ in 0..100 {
                    if !self.mon.newest().up[o] {
                        break;
                    }
                    self.step();
                }
                self.start(o);
            }
        }
        // Finish outstanding ops, then read everything.
        self.drain(4_000);
        for obj in 0..OBJECTS {
            let floor = self.acked[obj];
            self.submit(Kind::Read { obj, floor });
        }
        self.drain(4_000);
        // LOLIGO_SIM_HEAL_MARK=1 (never in the default run): a PG still
        // waiting for unfound objects is marked lost, as an operator
        // would, and the ops waiting on it must then be answered (tells a
        // PG stuck for good from one an operator can release).
        if std::env::var_os("LOLIGO_SIM_HEAL_MARK").is_some() {
            let waiting = |sim: &Sim| {
                sim.pending
                    .values()
                    .any(|p| matches!(p.kind, Kind::Read { .. }))
            };
            for _ in 0..self.pg_count() {
                if !waiting(self) {
                    break;
                }
                self.marked_ms = [None; PGS_MAX];
                self.mark_unfound_lost();
                self.drain(4_000);
            }
        }
        let left: Vec<Kind> = self.pending.values().map(|p| p.kind).collect();
        let rotted = left.iter().find_map(|k| match k {
            Kind::Read { obj, .. } if self.rot_lost(*obj) => Some(*obj),
            _ => None,
        });
        if let Some(obj) = rotted {
            // (Reported: its PG's primary counts it unfound.)
            let primary = self.primary_of(obj);
            let stat = primary.and_then(|o| {
                self.osds[o]
                    .pgs
                    .get(self.pg_now(obj))
                    .and_then(|pg| pg.stat())
            });
            assert!(
                stat.as_ref().is_some_and(|s| s.unfound > 0),
                "object {obj}, lost to rot, is not unfound on its primary osd.{primary:?}: {stat:?}"
            );
            self.stats.rot_lost += 1;
            return false;
        }
        assert!(
            left.iter().all(|k| matches!(k, Kind::Write { .. })),
            "reads still unanswered with every OSD up: {left:?} (acting sets {:?}, CRUSH's {:?}, \
             records {:?}, up {:?}, in {:?}, each primary's PGs as (pg, state, unfound): {:?}, \
             their objects' copies as (osd, version, rotten): {:?})",
            self.mon.newest().acting,
            self.mon.newest().crush,
            self.mon.newest().record,
            self.mon.newest().up,
            self.mon.newest().is_in,
            (self.osds.iter())
                .map(|o| (o.pgs.iter().enumerate())
                    .filter_map(|(p, pg)| Some((p, pg.stat()?)))
                    .map(|(p, s)| (p, s.state.to_string(), s.unfound))
                    .collect::<Vec<_>>())
                .collect::<Vec<_>>(),
            (left.iter())
                .filter_map(|k| match k {
                    Kind::Read { obj, .. } => Some((*obj, self.copies_of(*obj))),
                    _ => None,
                })
                .collect::<BTreeMap<_, _>>()
        );
        true
    }

    /// After healing, with no client ops: every PG goes active+clean with
    /// CRUSH's set in charge within a bound, and every member then holds
    /// the same objects (data, xattrs, omap), the same log, the same head,
    /// and no missing record.
    pub(crate) fn check_clean(&mut self) {
        // A merge under way ends first: the leader drives it as the PGs
        // get clean, and the checks below are of the PGs it leaves.
        let merging = |sim: &Sim| sim.mon.map().is_some_and(|m| !m.pg_merges.is_empty());
        for _ in 0..CLEAN_STEPS {
            if !merging(self) {
                break;
            }
            self.step();
        }
        assert!(
            !merging(self),
            "the merge did not end with every OSD up: {:?}",
            self.mon.map().map(|m| &m.pg_merges)
        );
        let mut clean = false;
        for _ in 0..CLEAN_STEPS {
            if (0..self.pg_count()).all(|p| self.is_clean(p)) {
                clean = true;
                break;
            }
            self.step();
        }
        for p in 0..self.pg_count() {
            let at = self.mon.newest().clone();
            let acting = at.acting[p].clone();
            let primary = at.primary_temp[p]
                .or_else(|| primary_of(&acting))
                .unwrap_or(0);
            let state = self.osds[primary as usize]
                .pgs
                .get(p)
                .and_then(|pg| pg.stat())
                .map(|st| st.state.to_string());
            // The first PG that is not clean names itself.
            assert!(
                clean || self.pg_clean(p),
                "not clean {CLEAN_STEPS} steps after healing: pg {p}'s primary osd.{} in state {state:?}, acting {acting:?}, pg_temp {:?}, CRUSH's set {:?}",
                primary,
                at.pg_temp[p],
                at.crush[p]
            );
            // Every member is on record: any one of them alone can serve.
            let mut recorded = at.record[p].as_ref().map_or(vec![], |r| r.osds.clone());
            recorded.sort_unstable();
            let mut members = acting.clone();
            members.sort_unstable();
            assert_eq!(
                recorded, members,
                "pg {p} clean, but the record is not the acting set"
            );
            let ec = self.ec.is_some();
            let snap = |o: i32| copy_of(self.osds[o as usize].disk.inner(), coll(p), ec);
            let first = snap(primary);
            if let Some(st) = &self.ec {
                check_shards(st, &self.osds, &acting, coll(p));
            }
            assert!(first.missing.is_empty(), "pg {p}: {first:?}");
            let unfound = self.osds[primary as usize]
                .pgs
                .get(p)
                .map(Pg::unfound_count);
            assert_eq!(
                unfound,
                Some(0),
                "pg {p} clean, but its primary reports unfound objects"
            );
            for o in acting
                .iter()
                .copied()
                .filter(|&o| o != loligo_crush::ITEM_NONE && o != primary)
            {
                let other = snap(o);
                assert_eq!(
                    first.head, other.head,
                    "pg {p}: osd.{o}'s head differs from the primary's"
                );
                assert_eq!(
                    first.missing, other.missing,
                    "pg {p}: osd.{o} still lacks objects"
                );
                assert_eq!(
                    first.objects, other.objects,
                    "pg {p}: osd.{o}'s objects differ"
                );
                // The logs agree entry for entry.
                assert_eq!(first.log, other.log, "pg {p}: osd.{o}'s log differs");
            }
        }
        // Copies outside the acting set go once the PG is clean without
        // them (the primary says so when they ask, every couple of
        // seconds).
        let stray = |sim: &Sim, o: usize, p: usize| {
            let c = copy_of(sim.osds[o].disk.inner(), coll(p), false);
            !sim.mon.newest().acting[p].contains(&(o as i32))
                && (c.head > Version::default()
                    || !c.objects.is_empty()
                    || !c.log.is_empty()
                    || !c.missing.is_empty())
        };
        let any_stray =
            |sim: &Sim| (0..OSDS).any(|o| (0..sim.pg_count()).any(|p| stray(sim, o, p)));
        for _ in 0..STRAY_STEPS {
            if !any_stray(self) {
                break;
            }
            self.step();
        }
        for o in 0..OSDS {
            for p in 0..self.pg_count() {
                assert!(
                    !stray(self, o, p),
                    "osd.{o} still holds a stray copy of pg {p}"
                );
            }
        }
        if self.ec.is_none() {
            // A few scrub intervals on the clean cluster.
            for _ in 0..(3_000 / STEP_MS) {
                self.step();
            }
            self.check_trees();
            for o in 0..OSDS {
                self.take_scrubs(o);
            }
        }
        if self.scrubs {
            self.scrub_everything();
        }
        for (o, osd) in self.osds.iter().enumerate() {
            assert!(
                osd.asks.is_empty() && osd.slots.held() == 0 && osd.slots.waiting() == 0,
                "clean, but osd.{o}'s PGs hold recovery-slot asks {:?} ({} slots held, {} asks waiting)",
                osd.asks,
                osd.slots.held(),
                osd.slots.waiting()
            );
        }
        self.stats.clean_checks += 1;
        self.stats.read_errors = self.osds.iter().map(|o| o.disk.read_faults()).sum();
    }

    /// The root comparisons OSD `o`'s PGs made (counted once: the
    /// counters go with the PGs); none may have found a difference, since
    /// every tree is right and a comparison is made only between writes.
    pub(crate) fn take_scrubs(&mut self, o: usize) {
        self.stats.given_up += self.osds[o].pgs.iter().map(Pg::given_up).sum::<u64>();
        for (p, pg) in self.osds[o].pgs.iter().enumerate() {
            let (compared, differed) = pg.scrubs();
            assert_eq!(
                differed, 0,
                "pg {p}: osd.{o} found a member's Merkle root different from its own"
            );
            self.stats.scrubs += compared;
        }
    }

    /// Every copy's Merkle tree, as kept in memory and as persisted, is
    /// the one a rebuild from its objects computes; the members of a PG
    /// agree on the root.
    pub(crate) fn check_trees(&mut self) {
        for p in 0..self.pg_count() {
            let mut roots = BTreeMap::new();
            for (o, osd) in self.osds.iter().enumerate() {
                let Some(pg) = osd.pgs.get(p) else { continue };
                let kept = pg.tree().expect("a replicated copy keeps a tree");
                let s = osd.disk.inner();
                let rebuilt = rebuild_tree(s, coll(p), kept, None).unwrap();
                assert!(
                    kept == &rebuilt,
                    "pg {p}: osd.{o}'s kept tree differs from a rebuild (leaves {:?})",
                    kept.diff(&rebuilt)
                );
                let (loaded, fix) = Kept::load(s, coll(p), kept.leaf_count()).unwrap();
                assert!(fix.is_none(), "pg {p}: osd.{o}'s tree needed a rebuild");
                assert!(
                    loaded.tree() == &rebuilt,
                    "pg {p}: osd.{o}'s persisted tree differs from a rebuild (leaves {:?})",
                    loaded.tree().diff(&rebuilt)
                );
                if self.mon.newest().acting[p].contains(&(o as i32)) {
                    roots.insert(o, kept.root());
                } else {
                    assert_eq!(kept.root(), 0, "pg {p}: osd.{o}'s removed copy has a tree");
                }
            }
            let distinct: BTreeSet<u64> = roots.values().copied().collect();
            assert!(
                distinct.len() <= 1,
                "pg {p}: members' roots differ: {roots:?}"
            );
            self.stats.trees_checked += roots.len() as u64;
        }
    }

    /// CRUSH's set in charge of PG `p` and its primary's PG clean, on the
    /// newest map, with nothing in flight.
    pub(crate) fn is_clean(&self, p: usize) -> bool {
        self.queue.is_empty() && self.pg_clean(p)
    }

    /// Whether PG `p` is clean, messages in flight or not.
    pub(crate) fn pg_clean(&self, p: usize) -> bool {
        let at = self.mon.newest();
        let acting = &at.acting[p];
        if *acting != at.crush[p] || at.primary_temp[p].is_some() {
            return false;
        }
        let Some(pg) = primary_of(acting).and_then(|o| self.osds[o as usize].pgs.get(p)) else {
            return false;
        };
        pg.view().epoch == self.mon.epoch() && pg.is_clean()
    }

    /// Run until nothing is pending (at most `steps`), sending nothing new.
    pub(crate) fn drain(&mut self, steps: usize) {
        for _ in 0..steps {
            if self.pending.is_empty() {
                break;
            }
            self.resend_late();
            self.step();
        }
    }

    /// Keep an EC shard a primary sends (see `shipped`).
    pub(crate) fn ship(&mut self, push: &loligo_pg::pg::Push) {
        let (Some(_), Some(copy)) = (&self.ec, &push.copy) else {
            return;
        };
        let Some(obj) = crate::obj_of(&push.name) else {
            return;
        };
        let shard = copy
            .attrs
            .iter()
            .find(|(k, _)| k == loligo_pg::ec::SHARD_ATTR)
            .and_then(|(_, v)| v.first().copied());
        if let Some(shard) = shard {
            self.shipped
                .push((obj, push.version, shard as usize, copy.data.to_vec()));
        }
    }

    /// Every shard shipped at an acknowledged version is that version's.
    pub(crate) fn check_shipped(&mut self) {
        let Some(st) = self.ec.clone() else {
            return;
        };
        for (obj, version, shard, data) in &self.shipped {
            let Some(value) = self.written.get(&(*obj, *version)) else {
                continue;
            };
            let want = st.encode(&self.ec_object(&value.to_le_bytes())).unwrap();
            assert!(
                want.get(*shard) == Some(data),
                "o{obj} at {version}: a primary shipped {data:?} as shard {shard}, which is {:?} (value {value})",
                want.get(*shard)
            );
            self.stats.shards_checked += 1;
        }
    }
}
