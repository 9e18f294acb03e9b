//! The cluster's health checks, with Ceph's codes (`OSD_DOWN`,
//! `PG_DEGRADED`, ...), severities, summaries and detail lines, from one
//! look over the map, every PG's primary report and the monitor group.
//! A pure function: the leader's `status` calls it; `health`, `status`,
//! the metrics (`ceph_health_detail{name}`) and the dashboard show it.
//!
//! It must never call a cluster healthy that it cannot see: a PG without
//! a report counts as inactive, as in Ceph.

use loligo_crush::balance::Eligible;
use loligo_monc::protocol::{Health, HealthCheck, HealthStatus, MonStatus};
use loligo_types::osdmap::OsdFlag;
use loligo_types::{crush_edit, Fullness, OsdMap, PgId, PgStat, PgState};
use std::collections::BTreeMap;

/// Most detail lines one check carries (Ceph's `mon_health_max_detail`);
/// a last line says how many more there are.
pub const MAX_DETAIL: usize = 50;

/// Every check this module raises, with its severity: the metrics send
/// each (0 while it does not hold), so a cleared check reads as cleared.
pub const CODES: [(&str, HealthStatus); 16] = [
    ("MON_DOWN", HealthStatus::Warn),
    ("OSD_DOWN", HealthStatus::Warn),
    ("TOO_FEW_OSDS", HealthStatus::Warn),
    ("OSD_FULL", HealthStatus::Err),
    ("OSD_BACKFILLFULL", HealthStatus::Warn),
    ("OSD_NEARFULL", HealthStatus::Warn),
    ("OSDMAP_FLAGS", HealthStatus::Warn),
    ("PG_AVAILABILITY", HealthStatus::Warn),
    ("PG_DEGRADED", HealthStatus::Warn),
    ("OBJECT_UNFOUND", HealthStatus::Warn),
    ("OSD_SCRUB_ERRORS", HealthStatus::Err),
    ("PG_DAMAGED", HealthStatus::Err),
    ("SLOW_OPS", HealthStatus::Warn),
    ("POOL_FULL", HealthStatus::Warn),
    ("POOL_BACKFILLFULL", HealthStatus::Warn),
    ("POOL_NEAR_FULL", HealthStatus::Warn),
];

/// One pool's share of a census.
#[derive(Clone, Debug, Default)]
pub struct PoolCensus {
    pub total: u64,
    pub by_state: BTreeMap<PgState, u64>,
    pub objects: u64,
    /// Bytes its objects hold (before replication or coding).
    pub bytes: u64,
    /// Object copies it should hold (objects times size), and those
    /// missing or in the wrong place.
    pub copies: u64,
    pub degraded: u64,
    pub misplaced: u64,
}

/// What one pass over every PG found: counts by state, objects, and the
/// PGs the checks name.
#[derive(Debug, Default)]
pub struct Census {
    /// Per pool (by id).
    pub pools: BTreeMap<u64, PoolCensus>,
    /// PGs in each OSD's acting sets (Ceph's `numpg`).
    pub numpg: BTreeMap<i32, u64>,
    pub by_state: BTreeMap<PgState, u64>,
    pub total: u64,
    pub objects: u64,
    /// Object copies the pools' sizes call for (`objects x size`).
    pub copies: u64,
    pub degraded: u64,
    pub misplaced: u64,
    pub unfound: u64,
    pub unfound_pgs: u64,
    pub scrub_errors: u64,
    pub inconsistent_pgs: u64,
    /// PGs not active+clean, or holding unfound or inconsistent objects.
    pub noted: Vec<Noted>,
    /// Up OSDs with slow ops: how many, and the oldest one's age (ms),
    /// from their last reports.
    pub slow_ops: BTreeMap<i32, (u64, u64)>,
}

/// One PG a check may name.
#[derive(Clone, Debug, PartialEq)]
pub struct Noted {
    pub pg: PgId,
    pub state: PgState,
    pub acting: Vec<i32>,
    pub unfound: u64,
    pub scrub_errors: u64,
}

impl Census {
    /// Count PG `pg` of a pool of `size` copies, in `state`, with its
    /// primary's report if there is one and the acting set the map gives.
    pub fn add(
        &mut self,
        pg: PgId,
        size: u32,
        state: PgState,
        stat: Option<&PgStat>,
        acting: &[i32],
    ) {
        self.total += 1;
        *self.by_state.entry(state).or_default() += 1;
        let pool = self.pools.entry(pg.pool).or_default();
        pool.total += 1;
        *pool.by_state.entry(state).or_default() += 1;
        if let Some(s) = stat {
            pool.objects = pool.objects.saturating_add(s.objects);
            pool.bytes = pool.bytes.saturating_add(s.bytes);
            let copies = s.objects.saturating_mul(u64::from(size));
            pool.copies = pool.copies.saturating_add(copies);
            pool.degraded = pool.degraded.saturating_add(s.degraded);
            pool.misplaced = pool.misplaced.saturating_add(s.misplaced);
        }
        for &o in acting.iter().filter(|&&o| o >= 0) {
            *self.numpg.entry(o).or_default() += 1;
        }
        let (mut unfound, mut scrub_errors) = (0, 0);
        if let Some(s) = stat {
            self.objects = self.objects.saturating_add(s.objects);
            self.copies = (self.copies).saturating_add(s.objects.saturating_mul(u64::from(size)));
            self.degraded = self.degraded.saturating_add(s.degraded);
            self.misplaced = self.misplaced.saturating_add(s.misplaced);
            self.unfound = self.unfound.saturating_add(s.unfound);
            self.unfound_pgs += u64::from(s.unfound > 0);
            self.scrub_errors = self.scrub_errors.saturating_add(s.scrub_errors);
            self.inconsistent_pgs += u64::from(s.scrub_errors > 0);
            (unfound, scrub_errors) = (s.unfound, s.scrub_errors);
        }
        let clean = state.contains(PgState::ACTIVE | PgState::CLEAN) && !state.is_unknown();
        if !clean || unfound > 0 || scrub_errors > 0 {
            self.noted.push(Noted {
                pg,
                state,
                acting: stat.map_or_else(|| acting.to_vec(), |s| s.acting.clone()),
                unfound,
                scrub_errors,
            });
        }
    }

    fn count(&self, f: impl Fn(PgState) -> bool) -> u64 {
        (self.by_state.iter())
            .filter(|(s, _)| f(**s))
            .map(|(_, n)| n)
            .sum()
    }
}

/// The checks that hold, and the worst severity among them.
pub fn checks(map: &OsdMap, census: &Census, monitors: &MonStatus) -> Health {
    let mut checks = BTreeMap::new();
    let mut raise = |code: &str, c: Option<HealthCheck>| {
        if let Some(c) = c {
            checks.insert(code.to_string(), c);
        }
    };
    raise("MON_DOWN", mon_down(monitors));
    raise("OSD_DOWN", osd_down(map));
    raise("TOO_FEW_OSDS", too_few_osds(map));
    raise("OSD_FULL", fullness(map, Fullness::Full));
    raise("OSD_BACKFILLFULL", fullness(map, Fullness::BackfillFull));
    raise("OSD_NEARFULL", fullness(map, Fullness::NearFull));
    raise("OSDMAP_FLAGS", flags(map));
    let [full, backfillfull, nearfull] = pool_fullness(map);
    raise("POOL_FULL", full);
    raise("POOL_BACKFILLFULL", backfillfull);
    raise("POOL_NEAR_FULL", nearfull);
    raise("PG_AVAILABILITY", availability(census));
    raise("PG_DEGRADED", degraded(census));
    raise("OBJECT_UNFOUND", unfound(census));
    raise("OSD_SCRUB_ERRORS", scrub_errors(census));
    raise("PG_DAMAGED", damaged(census));
    raise("SLOW_OPS", slow_ops(census));
    let status = (checks.values().map(|c| c.severity))
        .max()
        .unwrap_or(HealthStatus::Ok);
    Health { status, checks }
}

/// A check with `summary` and one detail line per item (at most
/// [`MAX_DETAIL`], then how many more).
fn check(
    severity: HealthStatus,
    count: u64,
    summary: String,
    items: impl IntoIterator<Item = String>,
) -> HealthCheck {
    let mut detail: Vec<String> = Vec::new();
    let mut more = 0usize;
    for line in items {
        if detail.len() < MAX_DETAIL {
            detail.push(line);
        } else {
            more += 1;
        }
    }
    if more > 0 {
        detail.push(format!("... and {more} more"));
    }
    HealthCheck::new(severity, summary, count, detail)
}

/// Ceph's `SLOW_OPS`: client ops in flight longer than the OSDs'
/// complaint time, in Ceph's words, with a line per OSD.
fn slow_ops(c: &Census) -> Option<HealthCheck> {
    if c.slow_ops.is_empty() {
        return None;
    }
    let total = c
        .slow_ops
        .values()
        .map(|(n, _)| n)
        .fold(0u64, |a, n| a.saturating_add(*n));
    let oldest_s = c
        .slow_ops
        .values()
        .map(|(_, ms)| ms / 1000)
        .max()
        .unwrap_or(0);
    let daemons: Vec<String> = c.slow_ops.keys().map(|id| format!("osd.{id}")).collect();
    // Ceph's words: one daemon by name, more in brackets (ten at most).
    let who = match daemons.as_slice() {
        [one] => format!("{one} has slow ops"),
        many if many.len() > 10 => format!("daemons [{},...] have slow ops.", many[..10].join(",")),
        many => format!("daemons [{}] have slow ops.", many.join(",")),
    };
    Some(check(
        HealthStatus::Warn,
        total,
        format!("{total} slow ops, oldest one blocked for {oldest_s} sec, {who}"),
        (c.slow_ops.iter()).map(|(id, (n, ms))| {
            format!(
                "osd.{id} has {n} slow ops, the oldest blocked for {} sec",
                ms / 1000
            )
        }),
    ))
}

/// Ceph's `MON_DOWN`, from the leader's view of the group (none when
/// every member is heard, or the quorum is not known).
fn mon_down(m: &MonStatus) -> Option<HealthCheck> {
    let down: Vec<u64> = (m.members.iter())
        .filter(|id| !m.quorum.contains(id))
        .copied()
        .collect();
    if m.quorum.is_empty() || down.is_empty() {
        return None;
    }
    let quorum: Vec<String> = m.quorum.iter().map(u64::to_string).collect();
    Some(check(
        HealthStatus::Warn,
        down.len() as u64,
        format!(
            "{}/{} mons down, quorum {}",
            down.len(),
            m.members.len(),
            quorum.join(",")
        ),
        down.iter().map(|id| {
            let addr = m.addrs.get(id).map_or("?", String::as_str);
            format!("mon.{id} at {addr} is down (out of quorum: the leader does not hear it)")
        }),
    ))
}

/// Ceph's `OSD_DOWN`: OSDs down and still in, each with its CRUSH
/// location. One marked out (by hand or after the down-out interval) no
/// longer counts, as in Ceph: its data has moved on; nor does a
/// destroyed one (down for good, on purpose, and out).
fn osd_down(map: &OsdMap) -> Option<HealthCheck> {
    let down: Vec<i32> = (map.osds.values())
        .filter(|o| !o.up && o.is_in() && !map.destroyed.contains(&o.id))
        .map(|o| o.id)
        .collect();
    if down.is_empty() {
        return None;
    }
    let locations = crush_edit::Locations::new(&map.crush);
    Some(check(
        HealthStatus::Warn,
        down.len() as u64,
        format!("{} osds down", down.len()),
        down.iter().map(|id| {
            let name = format!("osd.{id}");
            let loc = locations.of(&name).unwrap_or_default();
            let loc: Vec<String> = loc.iter().rev().map(|(t, n)| format!("{t}={n}")).collect();
            format!("{name} ({}) is down", loc.join(","))
        }),
    ))
}

/// Ceph's `TOO_FEW_OSDS`: fewer OSDs than the largest pool's size (or
/// none at all).
fn too_few_osds(map: &OsdMap) -> Option<HealthCheck> {
    let want = (map.pools.values().map(|p| p.size as usize))
        .max()
        .unwrap_or(1);
    let have = map.osds.len();
    (have < want).then(|| {
        check(
            HealthStatus::Warn,
            have as u64,
            format!("OSD count {have} < the largest pool size {want}"),
            [],
        )
    })
}

/// `OSD_FULL`, `OSD_BACKFILLFULL`, `OSD_NEARFULL`: the OSDs the map marks
/// so (from their reports against the map's ratios).
fn fullness(map: &OsdMap, f: Fullness) -> Option<HealthCheck> {
    let ids: Vec<i32> = (map.osds.values())
        .filter(|o| o.fullness == f)
        .map(|o| o.id)
        .collect();
    if ids.is_empty() {
        return None;
    }
    let (severity, word, what) = match f {
        Fullness::Full => (
            HealthStatus::Err,
            "full",
            "writes to its PGs are refused: delete data or add OSDs",
        ),
        Fullness::BackfillFull => (
            HealthStatus::Warn,
            "backfillfull",
            "no PG is backfilled onto it",
        ),
        _ => (HealthStatus::Warn, "nearfull", "near its full ratio"),
    };
    Some(check(
        severity,
        ids.len() as u64,
        format!("{} {word} osd(s)", ids.len()),
        ids.iter().map(|id| format!("osd.{id} is {word}: {what}")),
    ))
}

/// Ceph's `POOL_FULL`, `POOL_BACKFILLFULL` and `POOL_NEAR_FULL`: pools
/// whose CRUSH rule places data on an up and in OSD past that ratio
/// (each pool under its worst), as Ceph flags them (Loligo has no
/// quotas).
fn pool_fullness(map: &OsdMap) -> [Option<HealthCheck>; 3] {
    let levels = [Fullness::Full, Fullness::BackfillFull, Fullness::NearFull];
    let mut worst: BTreeMap<u64, Fullness> = BTreeMap::new();
    let any = (map.osds.values()).any(|o| o.up && o.is_in() && o.fullness != Fullness::Ok);
    if any {
        if let Ok(crush) = loligo_crush::CompiledMap::compile(&map.crush) {
            let states = map.osd_states();
            for p in map.pools.values() {
                let Ok(e) = Eligible::for_rule(&crush, p.crush_rule, &states) else {
                    continue;
                };
                let f = (e.osds.keys())
                    .filter_map(|id| map.osds.get(id))
                    .map(|o| o.fullness)
                    .max_by_key(|f| levels.iter().position(|l| l == f).map_or(0, |i| 3 - i));
                if let Some(f) = f.filter(|f| *f != Fullness::Ok) {
                    worst.insert(p.id, f);
                }
            }
        }
    }
    levels.map(|level| {
        let names: Vec<&str> = (worst.iter())
            .filter(|(_, f)| **f == level)
            .filter_map(|(id, _)| map.pools.get(id).map(|p| p.name.as_str()))
            .collect();
        let (word, why) = match level {
            Fullness::Full => ("full", " (no space)"),
            Fullness::BackfillFull => ("backfillfull", ""),
            _ => ("nearfull", ""),
        };
        (!names.is_empty()).then(|| {
            check(
                HealthStatus::Warn,
                names.len() as u64,
                format!("{} pool(s) {word}", names.len()),
                names.iter().map(|n| format!("pool '{n}' is {word}{why}")),
            )
        })
    })
}

/// Ceph's `OSDMAP_FLAGS`: cluster-wide flags set.
fn flags(map: &OsdMap) -> Option<HealthCheck> {
    let names: Vec<&str> = (OsdFlag::ALL.iter())
        .filter(|f| map.flags.contains(f))
        .map(|f| f.name())
        .collect();
    (!names.is_empty()).then(|| {
        check(
            HealthStatus::Warn,
            names.len() as u64,
            format!("{} flag(s) set", names.join(",")),
            [],
        )
    })
}

fn acting(a: &[i32]) -> String {
    let a: Vec<String> = a.iter().map(i32::to_string).collect();
    format!("[{}]", a.join(","))
}

/// Ceph's `PG_AVAILABILITY`: PGs that serve no I/O (inactive, down, or
/// not reported by their primary yet).
fn availability(c: &Census) -> Option<HealthCheck> {
    let inactive = c.count(|s| !s.is_active() || s.is_unknown());
    if inactive == 0 {
        return None;
    }
    let down = c.count(|s| s.contains(PgState::DOWN));
    let mut summary = format!("Reduced data availability: {inactive} pgs inactive");
    if down > 0 {
        summary += &format!(", {down} pgs down");
    }
    let items = (c.noted.iter())
        .filter(|n| !n.state.is_active() || n.state.is_unknown())
        .map(|n| match n.state {
            s if s.is_unknown() => format!(
                "pg {} is unknown: no report from its primary yet, acting {}",
                n.pg,
                acting(&n.acting)
            ),
            s if s.contains(PgState::DOWN) => format!(
                "pg {} is down, acting {}: it waits for its OSDs to return (`loligo pg ls --state down` names them)",
                n.pg,
                acting(&n.acting)
            ),
            s => format!("pg {} is inactive ({s}), acting {}", n.pg, acting(&n.acting)),
        });
    Some(check(HealthStatus::Warn, inactive, summary, items))
}

/// Ceph's `PG_DEGRADED`: object copies short of their pools' size.
fn degraded(c: &Census) -> Option<HealthCheck> {
    let pgs = c.count(|s| s.is_degraded());
    if pgs == 0 && c.degraded == 0 {
        return None;
    }
    let share = 100.0 * c.degraded as f64 / c.copies.max(1) as f64;
    let summary = format!(
        "Degraded data redundancy: {}/{} objects degraded ({share:.3}%), {pgs} pgs degraded",
        c.degraded, c.copies
    );
    let items = (c.noted.iter())
        .filter(|n| n.state.is_degraded())
        .map(|n| format!("pg {} is {}, acting {}", n.pg, n.state, acting(&n.acting)));
    Some(check(HealthStatus::Warn, pgs, summary, items))
}

/// Ceph's `OBJECT_UNFOUND`: objects no up copy can give.
fn unfound(c: &Census) -> Option<HealthCheck> {
    if c.unfound == 0 {
        return None;
    }
    let share = 100.0 * c.unfound as f64 / c.objects.max(1) as f64;
    let summary = format!(
        "{}/{} objects unfound ({share:.3}%) in {} pgs",
        c.unfound, c.objects, c.unfound_pgs
    );
    let items = (c.noted.iter())
        .filter(|n| n.unfound > 0)
        .map(|n| format!("pg {} has {} unfound objects", n.pg, n.unfound))
        .chain(std::iter::once(
            "reads of them wait for the OSDs that hold them: bring those OSDs back, or \
             `osd lost` the ones that will not return"
                .to_string(),
        ));
    Some(check(HealthStatus::Warn, c.unfound, summary, items))
}

/// Ceph's `OSD_SCRUB_ERRORS`: inconsistent objects scrubs found.
fn scrub_errors(c: &Census) -> Option<HealthCheck> {
    (c.scrub_errors > 0).then(|| {
        check(
            HealthStatus::Err,
            c.scrub_errors,
            format!("{} scrub errors", c.scrub_errors),
            [],
        )
    })
}

/// Ceph's `PG_DAMAGED`: PGs holding inconsistent objects.
fn damaged(c: &Census) -> Option<HealthCheck> {
    if c.inconsistent_pgs == 0 {
        return None;
    }
    let items = (c.noted.iter())
        .filter(|n| n.scrub_errors > 0)
        .map(|n| {
            format!(
                "pg {} is {}, acting {}: `loligo list-inconsistent-obj {}` says what is wrong, `loligo pg repair {}` mends it",
                n.pg,
                n.state,
                acting(&n.acting),
                n.pg,
                n.pg
            )
        });
    Some(check(
        HealthStatus::Err,
        c.inconsistent_pgs,
        format!(
            "Possible data damage: {} pgs inconsistent",
            c.inconsistent_pgs
        ),
        items,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_types::{Change, Incremental};

    fn mons(quorum: Vec<u64>) -> MonStatus {
        MonStatus {
            members: vec![0, 1, 2],
            leader: Some(0),
            term: 1,
            quorum,
            addrs: [(2, "10.0.0.3:6789".to_string())].into(),
        }
    }

    fn stat(pg: PgId, state: PgState, objects: u64) -> PgStat {
        PgStat {
            objects,
            ..PgStat::new(pg, 2, state, vec![0, 1, 2])
        }
    }

    fn apply(m: &mut OsdMap, changes: Vec<Change>) {
        let epoch = m.epoch + 1;
        m.apply(&Incremental { epoch, changes }).unwrap();
    }

    /// Every PG of the map active+clean with 10 objects.
    fn clean(m: &OsdMap) -> Census {
        let mut c = Census::default();
        for p in m.pools.values() {
            for ps in 0..p.pg_num {
                let pg = PgId { pool: p.id, ps };
                let s = stat(pg, PgState::ACTIVE | PgState::CLEAN, 10);
                c.add(pg, p.size, s.state, Some(&s), &s.acting);
            }
        }
        c
    }

    fn codes(h: &Health) -> Vec<&str> {
        h.checks.keys().map(String::as_str).collect()
    }

    #[test]
    fn a_clean_cluster_raises_nothing() {
        let m = OsdMap::test_cluster(4, 8);
        let h = checks(&m, &clean(&m), &mons(vec![0, 1, 2]));
        assert_eq!(h.status, HealthStatus::Ok);
        assert!(h.checks.is_empty(), "{h:?}");
    }

    /// Each OSD-side check is raised while its cause holds, with a
    /// detail line per OSD, and cleared when it ends.
    #[test]
    fn osd_checks_name_each_osd_and_clear() {
        let mut m = OsdMap::test_cluster(4, 8);
        let census = clean(&m);
        let ok = mons(vec![0, 1, 2]);
        apply(&mut m, vec![Change::OsdDown { id: 3 }]);
        let h = checks(&m, &census, &ok);
        assert_eq!(codes(&h), ["OSD_DOWN"]);
        let down = &h.checks["OSD_DOWN"];
        assert_eq!(
            (down.summary.message.as_str(), down.summary.count),
            ("1 osds down", 1)
        );
        assert_eq!(
            down.detail[0].message,
            "osd.3 (root=default,host=h3) is down"
        );
        assert_eq!(h.status, HealthStatus::Warn);
        apply(
            &mut m,
            vec![
                Change::OsdFullness {
                    id: 0,
                    fullness: Fullness::Full,
                },
                Change::OsdFullness {
                    id: 1,
                    fullness: Fullness::NearFull,
                },
            ],
        );
        let h = checks(&m, &census, &ok);
        assert_eq!(
            codes(&h),
            ["OSD_DOWN", "OSD_FULL", "OSD_NEARFULL", "POOL_FULL"]
        );
        assert_eq!(h.status, HealthStatus::Err, "a full OSD is an error");
        // The pool whose rule places on the full OSD, under its worst.
        let pool = &h.checks["POOL_FULL"];
        assert_eq!(pool.summary.message, "1 pool(s) full");
        assert_eq!(pool.detail[0].message, "pool 'p' is full (no space)");
        assert!(h.checks["OSD_FULL"].detail[0]
            .message
            .starts_with("osd.0 is full"));
        assert_eq!(h.ordered()[0].0, "OSD_FULL", "worst first");
        let mut m2 = m.clone();
        m2.flags.insert(OsdFlag::NoOut);
        m2.flags.insert(OsdFlag::NoScrub);
        let h = checks(&m2, &census, &ok);
        assert_eq!(
            h.checks["OSDMAP_FLAGS"].summary.message,
            "noout,noscrub flag(s) set"
        );
        apply(
            &mut m,
            vec![
                Change::OsdFullness {
                    id: 0,
                    fullness: Fullness::Ok,
                },
                Change::OsdFullness {
                    id: 1,
                    fullness: Fullness::Ok,
                },
            ],
        );
        let h = checks(&m, &census, &ok);
        assert_eq!(codes(&h), ["OSD_DOWN"]);
        // Marked out (the down-out interval passed): no longer a warning.
        apply(&mut m, vec![Change::OsdAutoOut { id: 3 }]);
        let h = checks(&m, &census, &ok);
        assert!(h.checks.is_empty(), "{h:?}");
    }

    /// A pool is as full as the fullest up and in OSD its rule places
    /// on; an OSD marked out no longer counts for it.
    #[test]
    fn pools_take_the_fullness_of_the_osds_they_use() {
        let mut m = OsdMap::test_cluster(4, 8);
        let census = clean(&m);
        let ok = mons(vec![0, 1, 2]);
        let near = |id| Change::OsdFullness {
            id,
            fullness: Fullness::NearFull,
        };
        apply(&mut m, vec![near(2)]);
        let h = checks(&m, &census, &ok);
        assert_eq!(codes(&h), ["OSD_NEARFULL", "POOL_NEAR_FULL"]);
        assert_eq!(
            h.checks["POOL_NEAR_FULL"].detail[0].message,
            "pool 'p' is nearfull"
        );
        apply(&mut m, vec![Change::OsdOut { id: 2 }]);
        let h = checks(&m, &census, &ok);
        assert_eq!(codes(&h), ["OSD_NEARFULL"], "out: the pool does not use it");
    }

    /// SLOW_OPS while an up OSD reports ops past its complaint time, in
    /// Ceph's words, with a line per OSD; gone when none does.
    #[test]
    fn slow_ops_name_each_osd_that_has_them() {
        let m = OsdMap::test_cluster(4, 8);
        let ok = mons(vec![0, 1, 2]);
        let mut census = clean(&m);
        census.slow_ops.insert(0, (3, 41_500));
        census.slow_ops.insert(2, (1, 35_000));
        let h = checks(&m, &census, &ok);
        assert_eq!(codes(&h), ["SLOW_OPS"]);
        let c = &h.checks["SLOW_OPS"];
        assert_eq!(
            c.summary.message,
            "4 slow ops, oldest one blocked for 41 sec, daemons [osd.0,osd.2] have slow ops."
        );
        assert_eq!(c.summary.count, 4);
        assert_eq!(
            c.detail[1].message,
            "osd.2 has 1 slow ops, the oldest blocked for 35 sec"
        );
        assert_eq!(h.status, HealthStatus::Warn);
        census.slow_ops.remove(&0);
        assert_eq!(
            checks(&m, &census, &ok).checks["SLOW_OPS"].summary.message,
            "1 slow ops, oldest one blocked for 35 sec, osd.2 has slow ops"
        );
        census.slow_ops.clear();
        assert!(checks(&m, &census, &ok).checks.is_empty());
    }

    #[test]
    fn too_few_osds_for_the_pools_size() {
        let m = OsdMap::test_cluster(2, 8);
        let h = checks(&m, &clean(&m), &mons(vec![0, 1, 2]));
        assert_eq!(
            h.checks["TOO_FEW_OSDS"].summary.message,
            "OSD count 2 < the largest pool size 3"
        );
    }

    #[test]
    fn mon_down_names_each_monitor_out_of_quorum() {
        let m = OsdMap::test_cluster(4, 8);
        let h = checks(&m, &clean(&m), &mons(vec![0, 1]));
        let c = &h.checks["MON_DOWN"];
        assert_eq!(c.summary.message, "1/3 mons down, quorum 0,1");
        assert!(c.detail[0]
            .message
            .starts_with("mon.2 at 10.0.0.3:6789 is down"));
        // No quorum known (a monitor that is not the leader): nothing.
        let h = checks(&m, &clean(&m), &mons(vec![]));
        assert!(h.checks.is_empty(), "{h:?}");
    }

    /// PG checks: unknown and down PGs make PG_AVAILABILITY, degraded
    /// copies PG_DEGRADED, unfound objects OBJECT_UNFOUND, scrub errors
    /// OSD_SCRUB_ERRORS and PG_DAMAGED, each naming its PGs.
    #[test]
    fn pg_checks_count_and_name_their_pgs() {
        let m = OsdMap::test_cluster(4, 8);
        let mut c = Census::default();
        let pg = |ps| PgId { pool: 1, ps };
        c.add(pg(0), 3, PgState::UNKNOWN, None, &[0, 1, 2]);
        c.add(pg(1), 3, PgState::DOWN, None, &[]);
        let mut d = stat(
            pg(2),
            PgState::ACTIVE | PgState::UNDERSIZED | PgState::DEGRADED,
            10,
        );
        d.degraded = 10;
        d.unfound = 2;
        c.add(pg(2), 3, d.state, Some(&d), &d.acting);
        let mut i = stat(
            pg(3),
            PgState::ACTIVE | PgState::CLEAN | PgState::INCONSISTENT,
            10,
        );
        i.scrub_errors = 3;
        c.add(pg(3), 3, i.state, Some(&i), &i.acting);
        let h = checks(&m, &c, &mons(vec![0, 1, 2]));
        assert_eq!(
            codes(&h),
            [
                "OBJECT_UNFOUND",
                "OSD_SCRUB_ERRORS",
                "PG_AVAILABILITY",
                "PG_DAMAGED",
                "PG_DEGRADED"
            ]
        );
        let a = &h.checks["PG_AVAILABILITY"];
        assert_eq!(
            a.summary.message,
            "Reduced data availability: 2 pgs inactive, 1 pgs down"
        );
        assert!(
            a.detail[0].message.starts_with("pg 1.0 is unknown"),
            "{a:?}"
        );
        assert!(a.detail[1].message.starts_with("pg 1.1 is down"), "{a:?}");
        let d = &h.checks["PG_DEGRADED"];
        assert_eq!(
            d.summary.message,
            "Degraded data redundancy: 10/60 objects degraded (16.667%), 1 pgs degraded"
        );
        assert_eq!(
            d.detail[0].message,
            "pg 1.2 is active+undersized+degraded, acting [0,1,2]"
        );
        let u = &h.checks["OBJECT_UNFOUND"];
        assert_eq!(u.summary.message, "2/20 objects unfound (10.000%) in 1 pgs");
        assert_eq!(u.detail[0].message, "pg 1.2 has 2 unfound objects");
        assert_eq!(
            h.checks["OSD_SCRUB_ERRORS"].summary.message,
            "3 scrub errors"
        );
        assert!(h.checks["PG_DAMAGED"].detail[0]
            .message
            .contains("pg repair 1.3"));
        assert_eq!(h.status, HealthStatus::Err);
    }

    #[test]
    fn detail_stops_at_the_limit_and_says_how_many_more() {
        let m = OsdMap::test_cluster(4, 8);
        let mut c = Census::default();
        for ps in 0..(MAX_DETAIL as u32 + 7) {
            c.add(PgId { pool: 1, ps }, 3, PgState::UNKNOWN, None, &[]);
        }
        let a = &checks(&m, &c, &mons(vec![0, 1, 2])).checks["PG_AVAILABILITY"];
        assert_eq!(a.summary.count, MAX_DETAIL as u64 + 7);
        assert_eq!(a.detail.len(), MAX_DETAIL + 1);
        assert_eq!(a.detail[MAX_DETAIL].message, "... and 7 more");
    }
}
