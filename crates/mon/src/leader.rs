//! The leader's decisions, as pure functions of (map, leader state, time):
//! failure reports, beacon timeouts and auto-out (`tick`), and the status
//! report. The service feeds them and proposes the changes they return;
//! tests drive them without a network or a clock.
//!
//! It must never change the map or read the clock: it returns `Change`s
//! and takes `now` as an argument.

use crate::health::Census;
use crate::pool_stats::PoolRates;
use loligo_crush::placement::holes_as_minus_one;
use loligo_monc::protocol::{
    ClientIo, Health, MonError, MonStatus, OsdCounters, OsdMapStatus, PgRow, PgSummary, RecoveryIo,
    StatusReport, Usage,
};
use loligo_types::osdmap::OsdFlag;
use loligo_types::{Change, MapError, MapPg, OsdMap, OsdReport, PgId, PgStat, PgState};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the leader keeps of report `r`, bounded by the map: refused from
/// an OSD the map does not have or with more PG stats than any OSD could
/// send (a typed error the sender sees); otherwise stats of PGs the map
/// does not have (a pool just deleted), repeated ones and ones with longer
/// acting sets than CRUSH allows are dropped, the rest kept.
pub fn check_report(map: &OsdMap, r: &mut OsdReport) -> Result<(), MonError> {
    if !map.osds.contains_key(&r.osd) {
        return Err(MonError::Invalid(format!(
            "a report from osd.{}, which the map does not have",
            r.osd
        )));
    }
    // Every PG of the map, and then some: a pool deleted since the OSD
    // built its report still counts there.
    let pgs: u64 = map.pools.values().map(|p| u64::from(p.pg_num)).sum();
    let most = pgs.saturating_mul(2).saturating_add(PG_STATS_SLACK);
    if r.pgs.len() as u64 > most {
        return Err(MonError::Invalid(format!(
            "osd.{} reports {} PGs; the map has {pgs}",
            r.osd,
            r.pgs.len()
        )));
    }
    if r.device.len() > DEVICE_NAME_MAX {
        // Not a device name: dropped, the report kept (an OSD whose
        // reports were all refused would be marked down).
        tracing::warn!(
            "osd.{} names a device of {} bytes: left out",
            r.osd,
            r.device.len()
        );
        r.device.clear();
    }
    if !matches!(r.device_class.as_str(), "" | "hdd" | "ssd") {
        tracing::warn!("osd.{} names an unknown device class: left out", r.osd);
        r.device_class.clear();
    }
    let mut seen = std::collections::HashSet::with_capacity(r.pgs.len());
    r.pgs.retain(|st| {
        map.pool_of(st.pg).is_ok()
            && st.acting.len() <= loligo_crush::MAX_NUM_REP
            && seen.insert(st.pg)
    });
    // Counters of pools the map does not have (deleted, or made up) are
    // not kept: the leader sums them per pool.
    r.pool_io.retain(|pool, _| map.pools.contains_key(pool));
    let scrapable = |a: &str| {
        a.parse::<std::net::SocketAddr>()
            .is_ok_and(|sa| !sa.ip().is_unspecified() && sa.port() != 0)
    };
    if !r.metrics_addr.is_empty() && !scrapable(&r.metrics_addr) {
        tracing::warn!("osd.{} names no address for its metrics: left out", r.osd);
        r.metrics_addr.clear();
    }
    Ok(())
}

/// Longest device name a report may carry (Linux's PATH_MAX).
const DEVICE_NAME_MAX: usize = 4096;

/// Whether `nodown` is set: no OSD is marked down but by its own word.
fn nodown(map: &OsdMap) -> bool {
    map.flags.contains(&OsdFlag::NoDown)
}

/// PG stats a report may carry beyond twice the map's PGs.
const PG_STATS_SLACK: u64 = 1024;

/// The failure detector's settings (from `MonConfig`).
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// Distinct OSDs that must report a peer before it is marked down.
    pub min_down_reporters: usize,
    /// How long a failure report stays valid.
    pub report_valid: Duration,
    /// How long two up OSDs may report each other (and no one else
    /// either) before one of them is marked down (`LeaderState::standoff`).
    pub standoff: Duration,
    /// Mark an OSD down when it has sent no report for this long.
    pub report_timeout: Duration,
    /// Mark a down OSD out after this long.
    pub down_out_interval: Duration,
    /// How long ago a report may be to count toward client I/O rates.
    pub io_window: Duration,
}

/// An OSD's last report with when it came, and the one before it.
#[derive(Clone, Debug)]
pub struct Reported {
    pub at: Instant,
    pub report: OsdReport,
    pub prev: Option<(Instant, OsdReport)>,
}

impl Reported {
    /// The report before this one and the seconds between them, when
    /// both count toward rates at `now` (the last one within the I/O
    /// window, time between them).
    fn rated(&self, now: Instant, t: &Timeouts) -> Option<(&OsdReport, f64)> {
        let (pt, p) = self.prev.as_ref()?;
        let dt = self.at.duration_since(*pt).as_secs_f64();
        (dt > 0.0 && now.duration_since(self.at) < t.io_window).then_some((p, dt))
    }
}

/// One OSD's reports that it cannot reach another.
#[derive(Clone, Copy, Debug)]
struct Accusation {
    /// When the reports began (without a gap longer than their validity).
    since: Instant,
    /// The newest one.
    last: Instant,
}

/// Leader-only soft state, rebuilt by each new leader.
#[derive(Default, Debug)]
pub struct LeaderState {
    /// target -> reporter -> its accusation.
    failures: HashMap<i32, HashMap<i32, Accusation>>,
    reports: HashMap<i32, Reported>,
    /// When this leader first saw each OSD down (for auto-out).
    down_since: HashMap<i32, Instant>,
    /// When this member became leader (beacon timeouts count from here).
    since: Option<Instant>,
    /// When the balancer last ran, and what it said.
    balanced_at: Option<Instant>,
    balancer_note: String,
    /// The epoch its last overrides were committed in: a PG's report
    /// older than that does not show their moves yet.
    balanced_epoch: u64,
    /// The epoch of the last pgp_num step, and what the last look said.
    pgp_epoch: u64,
    pgp_note: String,
    /// Per pool, the OSDs' I/O as this leader sums it: their counts since
    /// they started as it first saw them, plus what followed (the
    /// `ceph_pool_rd`, ... counters).
    pool_io: BTreeMap<u64, loligo_types::PoolIo>,
    /// Per OSD, the pool counters of its last report: what its next one
    /// is counted from. Kept across a boot (an OSD boots again without
    /// restarting when wrongly marked down; a restarted one's counters
    /// go back, which `PoolIo::since` takes as counting from zero).
    pool_io_seen: HashMap<i32, BTreeMap<u64, loligo_types::PoolIo>>,
    /// Every PG's placement under the last map looked at, carried to the
    /// next: the per-PG reports below map no PG through CRUSH again.
    placements: Arc<crate::placements::Placements>,
}

impl LeaderState {
    /// A new leader's state, over the monitor's carried placements.
    pub fn with_placements(placements: Arc<crate::placements::Placements>) -> Self {
        LeaderState {
            placements,
            ..LeaderState::default()
        }
    }

    /// OSD `id` booted: its old reports and failure reports are void.
    pub fn on_boot(&mut self, id: i32) {
        self.failures.remove(&id);
        self.down_since.remove(&id);
        self.reports.remove(&id);
    }

    /// An OSD's periodic report (also its beacon).
    pub fn on_report(&mut self, r: OsdReport, now: Instant) {
        let prev = self.reports.remove(&r.osd).map(|x| (x.at, x.report));
        let before = self.pool_io_seen.get(&r.osd);
        for (pool, delta) in crate::pool_stats::deltas(&r.pool_io, before) {
            self.pool_io.entry(pool).or_default().add(&delta);
        }
        self.pool_io_seen.insert(r.osd, r.pool_io.clone());
        self.reports.insert(
            r.osd,
            Reported {
                at: now,
                report: r,
                prev,
            },
        );
    }

    /// `reporter` cannot reach `target`: the changes to make (marking it
    /// down once enough distinct, up reporters agree within the validity,
    /// or one of two that report each other: see `standoff`).
    pub fn on_failure(
        &mut self,
        map: &OsdMap,
        reporter: i32,
        target: i32,
        now: Instant,
        t: &Timeouts,
    ) -> Vec<Change> {
        if !map.is_up(reporter) || !map.is_up(target) || reporter == target || nodown(map) {
            return vec![];
        }
        let valid = |a: &Accusation| now.duration_since(a.last) < t.report_valid;
        let by = self.failures.entry(target).or_default();
        let e = by.entry(reporter).or_insert(Accusation {
            since: now,
            last: now,
        });
        if !valid(e) {
            e.since = now;
        }
        e.last = now;
        by.retain(|r, a| valid(a) && map.is_up(*r));
        if by.len() >= t.min_down_reporters.max(1) {
            self.failures.remove(&target);
            return vec![Change::OsdDown { id: target }];
        }
        match self.standoff(map, reporter, target, now, t) {
            Some(id) => {
                self.failures.remove(&id);
                vec![Change::OsdDown { id }]
            }
            None => vec![],
        }
    }

    /// Two up OSDs that report each other (a link between them is cut,
    /// or one way of it) while neither finds the reporters it takes to go
    /// down: PGs over both would wait for good. Once both accusations
    /// have stood for `Timeouts::standoff` (time for other reporters to
    /// speak up), one goes down: the one more OSDs report, else the one
    /// that reports more OSDs (its network is the likelier broken one),
    /// else the higher id. One that keeps coming back stops at the OSD's
    /// markdown count (`osd_max_markdown_count` in Ceph).
    fn standoff(&self, map: &OsdMap, a: i32, b: i32, now: Instant, t: &Timeouts) -> Option<i32> {
        let live = |acc: &Accusation, r: i32| {
            now.duration_since(acc.last) < t.report_valid && map.is_up(r)
        };
        let stood = |target: i32, reporter: i32| {
            self.failures
                .get(&target)
                .and_then(|by| by.get(&reporter))
                .is_some_and(|acc| {
                    live(acc, reporter) && now.duration_since(acc.since) >= t.standoff
                })
        };
        if !stood(b, a) || !stood(a, b) {
            return None;
        }
        let accusers = |o: i32| {
            self.failures
                .get(&o)
                .map_or(0, |by| by.iter().filter(|(&r, acc)| live(acc, r)).count())
        };
        // (Targets that went down another way count no more.)
        let accuses = |o: i32| {
            (self.failures.iter())
                .filter(|(&target, by)| {
                    map.is_up(target) && by.get(&o).is_some_and(|acc| live(acc, o))
                })
                .count()
        };
        let worse = |o: i32| (accusers(o), accuses(o), o);
        Some(if worse(a) > worse(b) { a } else { b })
    }

    /// Periodic duties: up OSDs silent for longer than the report timeout
    /// go down (not under `nodown`); OSDs down for longer than the
    /// down-out interval go out (not under `noout`: the interval counts
    /// from when the flag is cleared).
    pub fn tick(&mut self, map: &OsdMap, now: Instant, t: &Timeouts) -> Vec<Change> {
        let since = *self.since.get_or_insert(now);
        // A removed (purged) OSD's last report says nothing any more.
        self.reports.retain(|id, _| map.osds.contains_key(id));
        let no_out = map.flags.contains(&OsdFlag::NoOut);
        let mut changes = Vec::new();
        for o in map.osds.values() {
            if o.up {
                self.down_since.remove(&o.id);
                let last = self.reports.get(&o.id).map_or(since, |r| r.at.max(since));
                if now.duration_since(last) > t.report_timeout {
                    if !nodown(map) {
                        changes.push(Change::OsdDown { id: o.id });
                    }
                } else if let Some(r) = self.reports.get(&o.id) {
                    // A device that crossed a fullness threshold: the map
                    // says so, and primaries refuse writes to full ones.
                    let (used, total) = r.report.fill();
                    let fullness = map.full_ratios.fullness(used, total);
                    if fullness != o.fullness {
                        changes.push(Change::OsdFullness { id: o.id, fullness });
                    }
                }
            } else if o.is_in() && no_out {
                self.down_since.remove(&o.id);
            } else if o.is_in() {
                let at = *self.down_since.entry(o.id).or_insert(now);
                if now.duration_since(at) > t.down_out_interval {
                    changes.push(Change::OsdAutoOut { id: o.id });
                }
            }
        }
        changes
    }

    /// The status report under `map`: PG states from the up primaries'
    /// reports, usage, client I/O, and the health checks they imply.
    pub fn status(
        &self,
        map: &OsdMap,
        monitors: MonStatus,
        now: Instant,
        t: &Timeouts,
    ) -> Result<StatusReport, MapError> {
        Ok(self.census(map, monitors, now, t)?.0)
    }

    /// The health checks under `map`, once this leader has heard every
    /// up OSD (or waited a report timeout for them): a new leader's
    /// first look sees PGs unknown that are not, and the cluster log
    /// must not say so.
    pub fn settled_health(
        &self,
        map: &OsdMap,
        monitors: &MonStatus,
        now: Instant,
        t: &Timeouts,
    ) -> Result<Option<Health>, MapError> {
        let heard_all = (map.osds.values())
            .filter(|o| o.up)
            .all(|o| self.reports.contains_key(&o.id));
        let waited = self
            .since
            .is_some_and(|s| now.duration_since(s) >= t.report_timeout);
        if !(heard_all || waited) {
            return Ok(None);
        }
        let census = self.pg_census(map)?;
        Ok(Some(crate::health::checks(map, &census, monitors)))
    }

    /// The cluster's metrics in Prometheus' text format, under Ceph's
    /// names ([`crate::metrics`]); the OSDs' own counters only with
    /// `perf_counters`.
    pub fn metrics(
        &self,
        map: &OsdMap,
        monitors: MonStatus,
        now: Instant,
        t: &Timeouts,
        perf_counters: bool,
    ) -> Result<String, MapError> {
        let (status, census) = self.census(map, monitors, now, t)?;
        let reports = (self.reports.values())
            .filter(|r| map.osds.contains_key(&r.report.osd))
            .map(|r| &r.report)
            .collect();
        Ok(crate::metrics::render(&crate::metrics::View {
            map,
            status: &status,
            census: &census,
            reports,
            pool_io: &self.pool_io,
            pool_rates: self.pool_rates(now, t),
            perf_counters,
        }))
    }

    /// What the dashboard shows, but for who asks and the log: status,
    /// space and each OSD's row, from one census.
    pub fn dashboard(
        &self,
        map: &OsdMap,
        monitors: MonStatus,
        now: Instant,
        t: &Timeouts,
    ) -> Result<crate::dashboard::LeaderView, MapError> {
        let (status, census) = self.census(map, monitors, now, t)?;
        let reports: Vec<&OsdReport> = (self.reports.values())
            .filter(|r| map.osds.contains_key(&r.report.osd))
            .map(|r| &r.report)
            .collect();
        Ok(crate::dashboard::LeaderView {
            df: crate::df::report(map, &census, &reports),
            osds: crate::dashboard::osd_rows(map, &census, &reports),
            pool_io: self.pool_rates(now, t),
            status,
        })
    }

    /// Per pool, its I/O per second over each OSD's last two reports
    /// (those within the I/O window).
    pub fn pool_rates(&self, now: Instant, t: &Timeouts) -> BTreeMap<u64, PoolRates> {
        let mut rates: BTreeMap<u64, PoolRates> = BTreeMap::new();
        for r in self.reports.values() {
            let Some((p, dt)) = r.rated(now, t) else {
                continue;
            };
            for (pool, d) in crate::pool_stats::deltas(&r.report.pool_io, Some(&p.pool_io)) {
                rates.entry(pool).or_default().add(&d, dt);
            }
        }
        rates
    }

    /// The up OSDs' own metrics endpoints (`HOST:PORT`), from their last
    /// reports, in OSD order.
    pub fn metrics_targets(&self, map: &OsdMap) -> Vec<String> {
        let mut v: Vec<(i32, String)> = (self.reports.values())
            .filter(|r| map.is_up(r.report.osd) && !r.report.metrics_addr.is_empty())
            .map(|r| (r.report.osd, r.report.metrics_addr.clone()))
            .collect();
        v.sort();
        v.into_iter().map(|(_, a)| a).collect()
    }

    /// `osd pool stats` (of pool `only`, or all) in Ceph's JSON shape.
    pub fn pool_stats(
        &self,
        map: &OsdMap,
        only: Option<u64>,
        now: Instant,
        t: &Timeouts,
    ) -> Result<serde_json::Value, MapError> {
        let census = self.pg_census(map)?;
        let rates = self.pool_rates(now, t);
        Ok(crate::pool_stats::ceph_json(map, &census, &rates, only))
    }

    /// Every PG under `map`, each by its current primary's last report.
    fn pg_census(&self, map: &OsdMap) -> Result<Census, MapError> {
        let stats = self.current_stats(map);
        let mut census = Census::default();
        let mut placer = self.placements.placer(map)?;
        for pool in map.pools.values() {
            for ps in 0..pool.pg_num {
                let pg = PgId { pool: pool.id, ps };
                let m = placer.map_pg(pg)?;
                let (state, stat) = state_of(&stats, pg, m.acting_primary);
                census.add(pg, pool.size, state, stat, &m.acting);
            }
        }
        census.slow_ops = (self.reports.values())
            .filter(|r| r.report.slow_ops > 0 && map.is_up(r.report.osd))
            .map(|r| {
                (
                    r.report.osd,
                    (r.report.slow_ops, r.report.oldest_slow_op_ms),
                )
            })
            .collect();
        Ok(census)
    }

    /// The cluster's and each pool's space (Ceph's `df`, [`crate::df`]).
    pub fn df(&self, map: &OsdMap) -> Result<loligo_monc::protocol::DfReport, MapError> {
        let census = self.pg_census(map)?;
        let reports: Vec<&OsdReport> = self.reports.values().map(|r| &r.report).collect();
        Ok(crate::df::report(map, &census, &reports))
    }

    /// The status report and the census of every PG it was made from.
    fn census(
        &self,
        map: &OsdMap,
        monitors: MonStatus,
        now: Instant,
        t: &Timeouts,
    ) -> Result<(StatusReport, Census), MapError> {
        let (up, inn) = map.up_in();
        let census = self.pg_census(map)?;
        let (mut used, mut capacity) = (0u64, 0u64);
        let mut io = ClientIo::default();
        let mut recovery = RecoveryIo::default();
        for r in self.reports.values() {
            // Reported numbers are the OSDs' word: an unbounded device
            // says u64::MAX (saturate, never overflow). Space is the up
            // OSDs' (as `df` counts it).
            if map.is_up(r.report.osd) {
                used = used.saturating_add(r.report.bytes_used);
                capacity = capacity.saturating_add(r.report.bytes_total);
            }
            if let Some((p, dt)) = r.rated(now, t) {
                let rate = |a: u64, b: u64| a.saturating_sub(b) as f64 / dt;
                io.read_ops_s += rate(r.report.read_ops, p.read_ops);
                io.write_ops_s += rate(r.report.write_ops, p.write_ops);
                io.read_bytes_s += rate(r.report.read_bytes, p.read_bytes);
                io.write_bytes_s += rate(r.report.write_bytes, p.write_bytes);
                recovery.objects_s += rate(r.report.recovery_objects, p.recovery_objects);
                recovery.bytes_s += rate(r.report.recovery_bytes, p.recovery_bytes);
            }
        }
        let mut osd_counters: Vec<OsdCounters> = self
            .reports
            .values()
            .filter(|r| map.is_up(r.report.osd))
            .map(|r| {
                let x = &r.report;
                OsdCounters {
                    osd: x.osd,
                    bytes_used: x.bytes_used,
                    bytes_total: x.bytes_total,
                    device_read_bytes: x.device_read_bytes,
                    device_reads: x.device_reads,
                    recovery_objects: x.recovery_objects,
                    recovery_bytes: x.recovery_bytes,
                    rebuilt_shards: x.rebuilt_shards,
                    rebuild_theory_bytes: x.rebuild_theory_bytes,
                    rebuild_fetched_bytes: x.rebuild_fetched_bytes,
                    shard_bytes_sent: x.shard_bytes_sent,
                    msgr_send_bytes: x.msgr_send_bytes,
                    msgr_recv_bytes: x.msgr_recv_bytes,
                    commit_latency_us: x.commit_latency_us,
                }
            })
            .collect();
        osd_counters.sort_by_key(|c| c.osd);
        let health = crate::health::checks(map, &census, &monitors);
        let report = StatusReport {
            fsid: map.fsid.clone(),
            health,
            monitors,
            osdmap: OsdMapStatus {
                epoch: map.epoch,
                num_osds: map.osds.len(),
                num_up_osds: up,
                num_in_osds: inn,
                flags: flag_names(map).into_iter().map(String::from).collect(),
            },
            pools: map.pools.len(),
            pgs: PgSummary {
                total: census.total,
                by_state: census.by_state.clone(),
            },
            usage: Usage {
                objects: census.objects,
                degraded_objects: census.degraded,
                misplaced_objects: census.misplaced,
                unfound_objects: census.unfound,
                unfound_pgs: census.unfound_pgs,
                scrub_errors: census.scrub_errors,
                inconsistent_pgs: census.inconsistent_pgs,
                stored_bytes: (census.pools.values()).fold(0, |a, p| a.saturating_add(p.bytes)),
                used_bytes: used,
                total_bytes: capacity,
            },
            io,
            recovery,
            osd_counters,
            progress: (!self.pgp_note.is_empty())
                .then(|| self.pgp_note.clone())
                .into_iter()
                .collect(),
        };
        Ok((report, census))
    }

    /// Every PG of `pool` (every pool: None) under `map`, with its sets
    /// and its current primary's last report, in pool and PG order.
    pub fn pg_list(&self, map: &OsdMap, pool: Option<u64>) -> Result<Vec<PgRow>, MapError> {
        let stats = self.current_stats(map);
        let mut placer = self.placements.placer(map)?;
        let mut rows = Vec::new();
        for p in map
            .pools
            .values()
            .filter(|p| pool.is_none_or(|id| id == p.id))
        {
            for ps in 0..p.pg_num {
                let pg = PgId { pool: p.id, ps };
                let m = placer.map_pg(pg)?;
                let (state, stat) = state_of(&stats, pg, m.acting_primary);
                rows.push(PgRow {
                    pg: pg.to_string(),
                    state,
                    up: holes_as_minus_one(&m.up),
                    acting: holes_as_minus_one(&m.acting),
                    primary: m.acting_primary,
                    objects: stat.map_or(0, |s| s.objects),
                    bytes: stat.map_or(0, |s| s.bytes),
                    degraded: stat.map_or(0, |s| s.degraded),
                    misplaced: stat.map_or(0, |s| s.misplaced),
                    unfound: stat.map_or(0, |s| s.unfound),
                    scrub_errors: stat.map_or(0, |s| s.scrub_errors),
                    last_scrub_stamp: stat.map_or(0, |s| s.last_scrub_stamp),
                    last_deep_scrub_stamp: stat.map_or(0, |s| s.last_deep_scrub_stamp),
                    reported_epoch: stat.map(|s| s.epoch),
                    waiting_for: stat.map(|s| s.waiting_for.clone()).unwrap_or_default(),
                });
            }
        }
        Ok(rows)
    }

    /// What stopping OSDs `ids` now would do to the PGs on them (Ceph's
    /// `osd ok-to-stop`): a PG not active now, or left with fewer up
    /// members of its acting set than its pool's min_size, would be
    /// unavailable; one left with fewer than all of them, degraded.
    pub fn ok_to_stop(&self, map: &OsdMap, ids: &[i32]) -> Result<OkToStop, MapError> {
        if ids.is_empty() {
            return Err(MapError::Invalid("ok-to-stop names no OSD".into()));
        }
        if let Some(id) = ids.iter().find(|&id| !map.osds.contains_key(id)) {
            return Err(MapError::NoSuchOsd(*id));
        }
        let stats = self.current_stats(map);
        let mut placer = self.placements.placer(map)?;
        let mut r = OkToStop {
            osds: ids.to_vec(),
            ..OkToStop::default()
        };
        for p in map.pools.values() {
            for ps in 0..p.pg_num {
                let pg = PgId { pool: p.id, ps };
                let m = placer.map_pg(pg)?;
                let (state, stat) = state_of(&stats, pg, m.acting_primary);
                let acting: Vec<i32> = match stat {
                    Some(s) => s.acting.clone(),
                    None => holes_as_minus_one(&m.acting),
                };
                let members: Vec<i32> = acting
                    .into_iter()
                    .filter(|&o| o >= 0 && map.is_up(o))
                    .collect();
                if !members.iter().any(|o| ids.contains(o)) {
                    continue;
                }
                // Members past the pool's size are backfill targets, which
                // serve nothing yet: counted as the ones left (the worst
                // case), unless the PG is clean.
                let extra = match state.contains(PgState::CLEAN) {
                    true => 0,
                    false => members.len().saturating_sub(p.size as usize),
                };
                let left = members.iter().filter(|o| !ids.contains(o)).count();
                if !state.is_active() || left.saturating_sub(extra) < p.min_size as usize {
                    r.bad_become_inactive.push(pg.to_string());
                } else {
                    r.ok_become_degraded.push(pg.to_string());
                }
            }
        }
        r.num_not_ok_pgs = r.bad_become_inactive.len();
        r.num_ok_pgs = r.ok_become_degraded.len();
        r.ok_to_stop = r.bad_become_inactive.is_empty();
        Ok(r)
    }

    /// Whether OSDs `ids` hold nothing the cluster still needs (Ceph's
    /// `osd safe-to-destroy`): no PG is placed on one (up or acting, by
    /// the map or its primary's report), no write-set record names one
    /// (it may hold writes others lack), and every PG is reported
    /// active+clean (one without a report cannot be judged; one degraded
    /// may lack copies only a down OSD still holds).
    pub fn safe_to_destroy(&self, map: &OsdMap, ids: &[i32]) -> Result<SafeToDestroy, MapError> {
        if ids.is_empty() {
            return Err(MapError::Invalid("safe-to-destroy names no OSD".into()));
        }
        if let Some(id) = ids.iter().find(|&id| !map.osds.contains_key(id)) {
            return Err(MapError::NoSuchOsd(*id));
        }
        let stats = self.current_stats(map);
        let mut placer = self.placements.placer(map)?;
        let mut stored: BTreeMap<i32, usize> = ids.iter().map(|&id| (id, 0)).collect();
        let (mut unknown, mut not_clean) = (0usize, 0usize);
        for p in map.pools.values() {
            for ps in 0..p.pg_num {
                let pg = PgId { pool: p.id, ps };
                let m = placer.map_pg(pg)?;
                let (state, stat) = state_of(&stats, pg, m.acting_primary);
                if stat.is_none() {
                    unknown += 1;
                } else if !state.contains(PgState::ACTIVE | PgState::CLEAN) {
                    not_clean += 1;
                }
                let record = map.write_sets.get(&pg);
                let named = (m.up.iter().chain(&m.acting))
                    .chain(stat.iter().flat_map(|s| &s.acting))
                    .chain(record.iter().flat_map(|r| &r.osds));
                let named: BTreeSet<i32> = named.copied().collect();
                for (id, n) in stored.iter_mut() {
                    *n += usize::from(named.contains(id));
                }
            }
        }
        let mut r = SafeToDestroy {
            unknown_pgs: unknown,
            not_clean_pgs: not_clean,
            ..SafeToDestroy::default()
        };
        for (&id, &n) in &stored {
            if n > 0 || not_clean > 0 {
                r.active.push(id);
                r.stored_pgs.push((id, n));
            } else if unknown > 0 {
                r.missing_stats.push(id);
            } else {
                r.safe_to_destroy.push(id);
            }
        }
        Ok(r)
    }

    /// PGs whose primary's report does not say active+clean as of epoch
    /// `since` or later (unknown ones, and older reports, included).
    pub fn not_clean_pgs(&self, map: &OsdMap, since: u64) -> Result<u64, MapError> {
        let stats = self.current_stats(map);
        let mut placer = self.placements.placer(map)?;
        let mut n = 0;
        for p in map.pools.values() {
            for ps in 0..p.pg_num {
                let pg = PgId { pool: p.id, ps };
                let (state, stat) = state_of(&stats, pg, placer.map_pg(pg)?.acting_primary);
                let clean = state.contains(PgState::ACTIVE | PgState::CLEAN)
                    && stat.is_some_and(|s| s.epoch >= since);
                n += u64::from(!clean);
            }
        }
        Ok(n)
    }

    /// The pgp_num step to propose, if a pool's pgp_num is short of its
    /// pg_num and every PG is clean since the last step
    /// ([`crate::pg_num::step`]).
    pub fn pgp_step(&mut self, map: &OsdMap) -> Vec<Change> {
        if map.pools.values().all(|p| p.pgp_num >= p.pg_num) && map.pg_merges.is_empty() {
            self.pgp_note.clear();
            return Vec::new();
        }
        let ready = self.merge_ready(map);
        let step = match (self.not_clean_pgs(map, self.pgp_epoch), ready) {
            (Ok(n), Ok(ready)) => crate::pg_num::step(map, n, &ready),
            (Err(e), _) | (_, Err(e)) => crate::pg_num::Step {
                changes: Vec::new(),
                note: format!("failed: {e}"),
            },
        };
        if step.note != self.pgp_note && step.changes.is_empty() {
            tracing::info!("pgp_num: {}", step.note);
        }
        self.pgp_note = step.note;
        step.changes
    }

    /// The reports of acting primaries whose PGs say they are ready to
    /// merge (for [`crate::pg_num::step`]).
    fn merge_ready(&self, map: &OsdMap) -> Result<HashMap<PgId, PgStat>, MapError> {
        if map.pg_merges.values().all(|m| m.ready_since == 0) {
            return Ok(HashMap::new());
        }
        let mut placer = self.placements.placer(map)?;
        let mut out = HashMap::new();
        for ((pg, osd), st) in self.current_stats(map) {
            if st.merge_ready.is_none() || !map.pg_exists(pg) {
                continue;
            }
            // (From the current primary, under the current acting set.)
            let pm = placer.map_pg(pg)?;
            if pm.acting_primary == osd && holes_as_minus_one(&pm.acting) == st.acting {
                out.insert(pg, st.clone());
            }
        }
        Ok(out)
    }

    /// A pgp_num step was committed in `epoch`.
    pub fn on_pgp_stepped(&mut self, epoch: u64) {
        self.pgp_epoch = self.pgp_epoch.max(epoch);
    }

    /// What the pgp_num follower last said (empty: nothing to do).
    pub fn pgp_note(&self) -> &str {
        &self.pgp_note
    }

    /// The balancer's overrides were committed in `epoch`.
    pub fn on_balanced(&mut self, epoch: u64) {
        self.balanced_epoch = self.balanced_epoch.max(epoch);
    }

    /// The balancer's run, if it is on and due (every
    /// [`crate::balancer::EVERY`]): the overrides to propose.
    pub fn balance(&mut self, map: &OsdMap, now: Instant) -> Vec<Change> {
        if !map.balancer {
            self.balancer_note = "off".into();
            return Vec::new();
        }
        if self
            .balanced_at
            .is_some_and(|t| now.duration_since(t) < crate::balancer::EVERY)
        {
            return Vec::new();
        }
        self.balanced_at = Some(now);
        let run = self
            .not_clean_pgs(map, self.balanced_epoch)
            .map_err(|e| e.to_string())
            .and_then(|n| crate::balancer::run(map, n));
        match run {
            Ok(r) => {
                self.balancer_note = r.note;
                r.changes
            }
            Err(e) => {
                self.balancer_note = format!("failed: {e}");
                Vec::new()
            }
        }
    }

    /// `balancer status`: whether it is on and what its last run said.
    pub fn balancer_status(&self, map: &OsdMap, now: Instant) -> serde_json::Value {
        serde_json::json!({
            "active": map.balancer,
            "mode": "upmap",
            "max_deviation": crate::balancer::MAX_DEVIATION,
            "target_max_misplaced_ratio": crate::balancer::TARGET_MAX_MISPLACED_RATIO,
            "last_run_secs_ago": self.balanced_at.map(|t| now.duration_since(t).as_secs()),
            "optimize_result": self.balancer_note,
            "pg_upmap_items": map.pg_upmap_items.len(),
        })
    }

    /// The PG stats of the up OSDs' last reports, by PG and reporter.
    fn current_stats<'a>(&'a self, map: &OsdMap) -> HashMap<(PgId, i32), &'a PgStat> {
        self.reports
            .values()
            .filter(|r| map.is_up(r.report.osd))
            .flat_map(|r| r.report.pgs.iter().map(|p| ((p.pg, r.report.osd), p)))
            .collect()
    }
}

/// The answer to `osd safe-to-destroy` (Ceph's fields).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SafeToDestroy {
    /// OSDs that hold nothing the cluster needs.
    pub safe_to_destroy: Vec<i32>,
    /// OSDs PGs are still placed on or recorded with.
    pub active: Vec<i32>,
    /// OSDs that may be safe, but some PGs have no report to tell.
    pub missing_stats: Vec<i32>,
    /// `(osd, PGs)` for each active OSD.
    pub stored_pgs: Vec<(i32, usize)>,
    /// PGs with no report from their primary.
    pub unknown_pgs: usize,
    /// PGs reported but not active+clean.
    pub not_clean_pgs: usize,
}

impl SafeToDestroy {
    /// Why `id` is not safe to destroy (`None`: it is), in words.
    pub fn why_not(&self, id: i32) -> Option<String> {
        if self.safe_to_destroy.contains(&id) {
            return None;
        }
        Some(match self.stored_pgs.iter().find(|(o, _)| *o == id) {
            Some((_, 0)) => format!(
                "{} PGs are not active+clean: osd.{id} may hold copies they lack (wait until they are clean)",
                self.not_clean_pgs
            ),
            Some((_, n)) => format!(
                "osd.{id} still holds or is recorded with {n} PGs (mark it out and wait until they move: `osd safe-to-destroy {id}`)"
            ),
            None => format!(
                "{} PGs have no report yet, so whether osd.{id} holds data they need cannot be told",
                self.unknown_pgs
            ),
        })
    }
}

/// The answer to `osd ok-to-stop` (Ceph's fields).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct OkToStop {
    pub ok_to_stop: bool,
    pub osds: Vec<i32>,
    /// PGs on them that would stay available, degraded.
    pub num_ok_pgs: usize,
    /// PGs not active now or that would not be (below min_size).
    pub num_not_ok_pgs: usize,
    pub bad_become_inactive: Vec<String>,
    pub ok_become_degraded: Vec<String>,
}

/// PG `pg`'s state with acting primary `primary`: its primary's report
/// (only the current primary's counts), `down` with no OSD of its acting
/// set up, else `unknown`.
/// (By who reported it: an erasure-coded PG's acting set may start with
/// a hole, or a primary_temp put its primary elsewhere.)
fn state_of<'a>(
    stats: &HashMap<(PgId, i32), &'a PgStat>,
    pg: PgId,
    primary: i32,
) -> (PgState, Option<&'a PgStat>) {
    match stats.get(&(pg, primary)) {
        Some(s) => (s.state, Some(*s)),
        _ if primary < 0 => (PgState::DOWN, None),
        _ => (PgState::UNKNOWN, None),
    }
}

/// The flags set, in `status` order.
fn flag_names(map: &OsdMap) -> Vec<&'static str> {
    (OsdFlag::ALL.iter())
        .filter(|f| map.flags.contains(f))
        .map(|f| f.name())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_monc::protocol::HealthStatus;
    use loligo_types::{Fullness, Incremental};

    const T: Timeouts = Timeouts {
        min_down_reporters: 2,
        report_valid: Duration::from_secs(40),
        standoff: Duration::from_secs(6),
        report_timeout: Duration::from_secs(60),
        down_out_interval: Duration::from_secs(600),
        io_window: Duration::from_secs(10),
    };

    /// Four OSDs up, one pool of 8 PGs, size 3.
    fn map() -> OsdMap {
        let mut m = OsdMap::new("f", "osd").unwrap();
        let mut changes: Vec<Change> = (0..4)
            .map(|id| Change::OsdBoot {
                id,
                addr: format!("h:{id}"),
                host: "h".into(),
                crush_weight: 0x10000,
            })
            .collect();
        changes.push(Change::PoolCreate(m.replicated_pool("p", 8, 3, 2)));
        m.apply(&Incremental { epoch: 2, changes }).unwrap();
        m
    }

    /// A PG's stat with nothing counted.
    fn pg_stat(pg: PgId, epoch: u64, state: PgState, acting: Vec<i32>) -> PgStat {
        PgStat::new(pg, epoch, state, acting)
    }

    /// Every PG of `m` reported in `state` by its primary, on the set the
    /// map places it on.
    fn report_every_pg(l: &mut LeaderState, m: &OsdMap, state: PgState) {
        let mut placer = m.placer().unwrap();
        let mut by_primary: HashMap<i32, Vec<PgStat>> = HashMap::new();
        for p in m.pools.values() {
            for ps in 0..p.pg_num {
                let pg = PgId { pool: p.id, ps };
                let pm = placer.map_pg(pg).unwrap();
                let acting = holes_as_minus_one(&pm.acting);
                let stat = pg_stat(pg, m.epoch, state, acting);
                by_primary.entry(pm.acting_primary).or_default().push(stat);
            }
        }
        for (osd, pgs) in by_primary {
            let report = OsdReport {
                osd,
                pgs,
                ..Default::default()
            };
            l.on_report(report, Instant::now());
        }
    }

    fn mons() -> MonStatus {
        MonStatus {
            members: vec![0],
            leader: Some(0),
            term: 1,
            quorum: vec![0],
            addrs: BTreeMap::new(),
        }
    }

    /// MON_DOWN names the members the leader does not hear; with all
    /// heard, or no quorum known (not the leader), it says nothing.
    #[test]
    fn mon_down_names_the_members_the_leader_does_not_hear() {
        let m = MonStatus {
            members: vec![0, 1, 2],
            quorum: vec![0, 2],
            addrs: [(1, "h:7".to_string())].into(),
            ..mons()
        };
        let all = MonStatus {
            quorum: vec![0, 1, 2],
            ..m.clone()
        };
        let unknown = MonStatus {
            quorum: vec![],
            ..m.clone()
        };
        let map = map();
        let status = |mons: MonStatus| {
            LeaderState::default()
                .status(&map, mons, Instant::now(), &T)
                .unwrap()
                .health
        };
        assert!(!status(all).checks.contains_key("MON_DOWN"));
        assert!(!status(unknown).checks.contains_key("MON_DOWN"));
        let h = status(m);
        let down = &h.checks["MON_DOWN"];
        assert_eq!(down.summary.message, "1/3 mons down, quorum 0,2");
        assert_eq!(down.summary.count, 1);
        assert!(
            down.detail[0].message.starts_with("mon.1 at h:7 is down"),
            "{h:?}"
        );
        assert_ne!(h.status, HealthStatus::Ok);
    }

    #[test]
    fn reports_the_map_cannot_hold_are_refused_or_trimmed() {
        let m = map();
        let stat =
            |ps: u32, acting| pg_stat(PgId { pool: 1, ps }, m.epoch, PgState::default(), acting);
        let report = |osd, pgs| OsdReport {
            osd,
            pgs,
            ..Default::default()
        };
        let mut r = report(2, vec![stat(0, vec![2, 0, 1])]);
        assert_eq!(check_report(&m, &mut r), Ok(()));
        assert_eq!(r.pgs.len(), 1);
        // From an OSD the map does not have (a spoofed id would grow
        // the leader's table without bound).
        for osd in [-1, 4, i32::MAX] {
            assert!(
                check_report(&m, &mut report(osd, vec![])).is_err(),
                "osd {osd}"
            );
        }
        // More stats than any OSD could send.
        let many: Vec<PgStat> = (0..2000).map(|ps| stat(ps, vec![0])).collect();
        assert!(check_report(&m, &mut report(0, many)).is_err());
        // PGs the map does not have, repeats and absurd acting sets are
        // dropped; the rest kept.
        let mut r = report(
            0,
            vec![
                stat(8, vec![0]),
                stat(1, vec![0]),
                stat(1, vec![1]),
                stat(3, vec![0; 65]),
                stat(5, vec![0, 1]),
            ],
        );
        assert_eq!(check_report(&m, &mut r), Ok(()));
        let kept: Vec<(u32, Vec<i32>)> =
            r.pgs.iter().map(|s| (s.pg.ps, s.acting.clone())).collect();
        assert_eq!(kept, vec![(1, vec![0]), (5, vec![0, 1])]);
        // A device name no device has: dropped, the report kept.
        let mut r = OsdReport {
            device: "d".repeat(DEVICE_NAME_MAX + 1),
            ..report(1, vec![stat(0, vec![1])])
        };
        assert_eq!(check_report(&m, &mut r), Ok(()));
        assert!(r.device.is_empty() && r.pgs.len() == 1);
        // A device class that is none: dropped, the report kept; a known
        // one stays.
        for (class, kept) in [("tape", ""), ("hdd", "hdd"), ("ssd", "ssd")] {
            let mut r = OsdReport {
                device_class: class.into(),
                ..report(1, vec![stat(0, vec![1])])
            };
            assert_eq!(check_report(&m, &mut r), Ok(()));
            assert_eq!(r.device_class, kept);
        }
        // Counters of pools the map lacks, and a metrics address that is
        // none: dropped, the report kept.
        let pool = *m.pools.keys().next().expect("a pool");
        let mut r = OsdReport {
            pool_io: [(pool, Default::default()), (9_999, Default::default())].into(),
            metrics_addr: "not an address".into(),
            ..report(1, vec![])
        };
        assert_eq!(check_report(&m, &mut r), Ok(()));
        assert_eq!(r.pool_io.keys().copied().collect::<Vec<_>>(), vec![pool]);
        assert!(r.metrics_addr.is_empty());
        // Nor an address nothing can scrape; a real one is kept.
        for (addr, kept) in [
            ("0.0.0.0:9926", false),
            ("127.0.0.1:0", false),
            ("10.0.0.5:9926", true),
        ] {
            let mut r = OsdReport {
                metrics_addr: addr.into(),
                ..report(1, vec![])
            };
            assert_eq!(check_report(&m, &mut r), Ok(()));
            assert_eq!(r.metrics_addr == addr, kept, "{addr}");
        }
    }

    #[test]
    fn pool_io_is_summed_from_each_osds_reports_and_rated_over_its_last_two() {
        let m = map();
        let pool = *m.pools.keys().next().expect("a pool");
        let mut l = LeaderState::default();
        let t0 = Instant::now();
        let with = |osd, read_ops| OsdReport {
            osd,
            pool_io: [(
                pool,
                loligo_types::PoolIo {
                    read_ops,
                    ..Default::default()
                },
            )]
            .into(),
            ..OsdReport::default()
        };
        l.on_report(with(0, 100), t0);
        l.on_report(with(1, 50), t0);
        l.on_report(with(0, 130), t0 + Duration::from_secs(2));
        // osd.1 restarted: its counters begin again.
        l.on_report(with(1, 4), t0 + Duration::from_secs(2));
        assert_eq!(l.pool_io[&pool].read_ops, 100 + 50 + 30 + 4);
        let rates = l.pool_rates(t0 + Duration::from_secs(3), &T);
        let want = (30.0 + 4.0) / 2.0;
        assert!((rates[&pool].read_ops_s - want).abs() < 1e-9, "{rates:?}");
        // osd.0 boots again without restarting (wrongly marked down):
        // its counters go on, nothing counted twice.
        l.on_boot(0);
        l.on_report(with(0, 131), t0 + Duration::from_secs(3));
        assert_eq!(l.pool_io[&pool].read_ops, 100 + 50 + 30 + 4 + 1);
    }

    #[test]
    fn an_osd_goes_down_on_enough_distinct_fresh_reports() {
        let m = map();
        let mut l = LeaderState::default();
        let t0 = Instant::now();
        assert!(l.on_failure(&m, 0, 3, t0, &T).is_empty(), "one reporter");
        assert!(l.on_failure(&m, 0, 3, t0, &T).is_empty(), "the same again");
        // A report past its validity does not count.
        let late = t0 + T.report_valid + Duration::from_secs(1);
        assert!(l.on_failure(&m, 1, 3, late, &T).is_empty());
        let c = l.on_failure(&m, 2, 3, late, &T);
        assert_eq!(c, vec![Change::OsdDown { id: 3 }]);
        // Reports about or from a down OSD are ignored.
        let mut m2 = m.clone();
        m2.apply(&Incremental {
            epoch: 3,
            changes: vec![Change::OsdDown { id: 1 }],
        })
        .unwrap();
        assert!(l.on_failure(&m2, 1, 0, late, &T).is_empty());
        assert!(l.on_failure(&m2, 0, 1, late, &T).is_empty());
    }

    /// Two OSDs that cannot reach each other (and only each other) each
    /// have one reporter, never two: once both accusations have stood
    /// for the standoff, one goes down, so that PGs over both go on.
    #[test]
    fn of_two_osds_that_report_each_other_one_goes_down() {
        let m = map();
        let mut l = LeaderState::default();
        let t0 = Instant::now();
        assert!(l.on_failure(&m, 0, 1, t0, &T).is_empty());
        assert!(l.on_failure(&m, 1, 0, t0, &T).is_empty(), "too soon");
        let t1 = t0 + T.standoff - Duration::from_millis(1);
        assert!(l.on_failure(&m, 0, 1, t1, &T).is_empty(), "too soon");
        // A tie: the higher id goes.
        let t2 = t0 + T.standoff;
        assert_eq!(
            l.on_failure(&m, 0, 1, t2, &T),
            vec![Change::OsdDown { id: 1 }]
        );
        // One that also reports a third OSD goes instead (its network
        // is the likelier broken one).
        let mut l = LeaderState::default();
        assert!(l.on_failure(&m, 0, 1, t0, &T).is_empty());
        assert!(l.on_failure(&m, 1, 0, t0, &T).is_empty());
        assert!(l.on_failure(&m, 0, 2, t0, &T).is_empty());
        assert_eq!(
            l.on_failure(&m, 1, 0, t2, &T),
            vec![Change::OsdDown { id: 0 }]
        );
        // A gap longer than the validity starts the standoff again.
        let mut l = LeaderState::default();
        assert!(l.on_failure(&m, 0, 1, t0, &T).is_empty());
        let t3 = t0 + T.report_valid + Duration::from_secs(1);
        assert!(l.on_failure(&m, 1, 0, t3, &T).is_empty());
        assert!(l.on_failure(&m, 0, 1, t3, &T).is_empty(), "a new one");
        assert_eq!(
            l.on_failure(&m, 0, 1, t3 + T.standoff, &T),
            vec![Change::OsdDown { id: 1 }]
        );
    }

    /// An OSD cut off from every other goes down by its reporters; the
    /// one it reported first never does, though they reported each other.
    #[test]
    fn an_osd_cut_off_from_all_goes_down_not_the_one_it_reports() {
        let m = map();
        let mut l = LeaderState::default();
        let t0 = Instant::now();
        for other in [1, 2, 3] {
            assert!(l.on_failure(&m, 0, other, t0, &T).is_empty());
        }
        assert!(l.on_failure(&m, 1, 0, t0, &T).is_empty());
        let t1 = t0 + T.standoff;
        // osd.1's report renewed after the standoff: osd.0 goes (it is
        // reported by one, and reports three).
        assert_eq!(
            l.on_failure(&m, 1, 0, t1, &T),
            vec![Change::OsdDown { id: 0 }]
        );
        let mut l = LeaderState::default();
        for other in [1, 2, 3] {
            assert!(l.on_failure(&m, 0, other, t0, &T).is_empty());
        }
        assert!(l.on_failure(&m, 1, 0, t0, &T).is_empty());
        assert_eq!(
            l.on_failure(&m, 2, 0, t0, &T),
            vec![Change::OsdDown { id: 0 }]
        );
    }

    #[test]
    fn silent_osds_go_down_and_long_down_ones_go_out() {
        let mut m = map();
        let mut l = LeaderState::default();
        let t0 = Instant::now();
        assert!(l.tick(&m, t0, &T).is_empty());
        let beacon = |osd| OsdReport {
            osd,
            ..Default::default()
        };
        let t1 = t0 + T.report_timeout + Duration::from_secs(1);
        for osd in 0..3 {
            l.on_report(beacon(osd), t1);
        }
        assert_eq!(l.tick(&m, t1, &T), vec![Change::OsdDown { id: 3 }]);
        m.apply(&Incremental {
            epoch: 3,
            changes: vec![Change::OsdDown { id: 3 }],
        })
        .unwrap();
        assert!(l.tick(&m, t1, &T).is_empty(), "down, not out yet");
        let t2 = t1 + T.down_out_interval + Duration::from_secs(1);
        for osd in 0..3 {
            l.on_report(beacon(osd), t2);
        }
        assert_eq!(l.tick(&m, t2, &T), vec![Change::OsdAutoOut { id: 3 }]);
        // Booting again forgets the down time.
        l.on_boot(3);
        assert!(!l.down_since.contains_key(&3));
    }

    /// A report (a beacon) from each of `osds` at `at`.
    fn beacons(l: &mut LeaderState, osds: std::ops::Range<i32>, at: Instant) {
        for osd in osds {
            let r = OsdReport {
                osd,
                ..Default::default()
            };
            l.on_report(r, at);
        }
    }

    fn flag(m: &mut OsdMap, flag: OsdFlag, on: bool) {
        m.apply(&Incremental {
            epoch: m.epoch + 1,
            changes: vec![Change::OsdFlag { flag, on }],
        })
        .unwrap();
    }

    /// `ok-to-stop`: with every PG active on OSDs 0-3 (size 3, min_size
    /// 2), one OSD may stop (its PGs degrade); two that share a PG may
    /// not; a PG not reported active counts against; unknown ids are
    /// refused.
    #[test]
    fn ok_to_stop_counts_pgs_left_below_min_size() {
        let m = map();
        let mut l = LeaderState::default();
        report_every_pg(&mut l, &m, PgState::ACTIVE | PgState::CLEAN);
        let one = l.ok_to_stop(&m, &[0]).unwrap();
        assert!(one.ok_to_stop && one.num_not_ok_pgs == 0, "{one:?}");
        assert!(one.num_ok_pgs > 0, "{one:?}");
        let two = l.ok_to_stop(&m, &[0, 1]).unwrap();
        assert!(!two.ok_to_stop && two.num_not_ok_pgs > 0, "{two:?}");
        assert!(l.ok_to_stop(&m, &[9]).is_err());
        assert!(l.ok_to_stop(&m, &[]).is_err());
        // Without reports every PG is unknown: nothing is ok to stop.
        let fresh = LeaderState::default().ok_to_stop(&m, &[0]).unwrap();
        assert!(!fresh.ok_to_stop, "{fresh:?}");
    }

    /// `safe-to-destroy`: an OSD PGs are placed on is not safe; once it
    /// is out and the PGs report sets without it it is, unless a
    /// write-set record still names it; without reports nothing is.
    #[test]
    fn safe_to_destroy_wants_no_pg_placed_or_recorded_on_the_osd() {
        let mut m = map();
        let mut l = LeaderState::default();
        report_every_pg(&mut l, &m, PgState::ACTIVE | PgState::CLEAN);
        let r = l.safe_to_destroy(&m, &[3]).unwrap();
        assert_eq!(r.active, vec![3], "{r:?}");
        assert!(r.why_not(3).unwrap().contains("PGs"), "{r:?}");
        assert!(l.safe_to_destroy(&m, &[9]).is_err());
        assert!(l.safe_to_destroy(&m, &[]).is_err());
        let fresh = LeaderState::default().safe_to_destroy(&m, &[3]).unwrap();
        assert!(fresh.why_not(3).is_some(), "{fresh:?}");
        let out = |m: &mut OsdMap, changes| {
            let epoch = m.epoch + 1;
            m.apply(&Incremental { epoch, changes }).unwrap();
        };
        out(&mut m, vec![Change::OsdOut { id: 3 }]);
        // Reports still from before the out: the old sets name it.
        let r = l.safe_to_destroy(&m, &[3]).unwrap();
        assert_eq!(r.active, vec![3], "{r:?}");
        let mut l = LeaderState::default();
        report_every_pg(&mut l, &m, PgState::ACTIVE | PgState::CLEAN);
        let r = l.safe_to_destroy(&m, &[3]).unwrap();
        assert_eq!(r.safe_to_destroy, vec![3], "{r:?}");
        assert_eq!(r.why_not(3), None);
        // PGs degraded elsewhere: it may hold copies they lack.
        let mut degraded = LeaderState::default();
        report_every_pg(&mut degraded, &m, PgState::ACTIVE | PgState::DEGRADED);
        let r = degraded.safe_to_destroy(&m, &[3]).unwrap();
        assert!(r.why_not(3).unwrap().contains("not active+clean"), "{r:?}");
        // A record naming it: it may hold writes no other copy has.
        let record = loligo_types::WriteSetRecord {
            interval: 9,
            osds: vec![3, 0, 1],
        };
        let pg = PgId { pool: 1, ps: 0 };
        out(&mut m, vec![Change::RecordWriteSet { pg, record }]);
        let mut l = LeaderState::default();
        report_every_pg(&mut l, &m, PgState::ACTIVE | PgState::CLEAN);
        let r = l.safe_to_destroy(&m, &[3]).unwrap();
        assert_eq!(r.stored_pgs, vec![(3, 1)], "{r:?}");
    }

    /// The balancer: off, nothing; on with a PG not clean, it waits;
    /// on with every PG clean, its overrides (applied) bring each OSD
    /// within one PG of its target, and the next run has nothing to do.
    #[test]
    fn the_balancer_waits_for_clean_pgs_and_evens_the_osds() {
        let mut m = OsdMap::new("f", "osd").unwrap();
        let mut changes: Vec<Change> = (0..5)
            .map(|id| Change::OsdBoot {
                id,
                addr: format!("h:{id}"),
                host: "h".into(),
                crush_weight: 0x10000,
            })
            .collect();
        changes.push(Change::PoolCreate(m.replicated_pool("p", 64, 3, 2)));
        m.apply(&Incremental { epoch: 2, changes }).unwrap();
        let spread = |m: &OsdMap| {
            let mut placer = m.placer().unwrap();
            let mut per: BTreeMap<i32, i64> = BTreeMap::new();
            for ps in 0..64 {
                for o in placer.map_pg(PgId { pool: 1, ps }).unwrap().up {
                    *per.entry(o).or_default() += 1;
                }
            }
            per.values().max().unwrap() - per.values().min().unwrap()
        };
        let before = spread(&m);
        assert!(
            before > 2,
            "CRUSH alone is even here ({before}): nothing to test"
        );
        let now = Instant::now();
        let mut l = LeaderState::default();
        report_every_pg(&mut l, &m, PgState::ACTIVE | PgState::CLEAN);
        assert!(l.balance(&m, now).is_empty(), "off: nothing");
        let on = |m: &mut OsdMap, on| {
            let epoch = m.epoch + 1;
            m.apply(&Incremental {
                epoch,
                changes: vec![Change::Balancer { on }],
            })
            .unwrap();
        };
        on(&mut m, true);
        let mut waiting = LeaderState::default();
        report_every_pg(&mut waiting, &m, PgState::ACTIVE | PgState::DEGRADED);
        assert!(waiting.balance(&m, now).is_empty());
        assert!(waiting.balancer_note.contains("not active+clean"));
        // Clean reports from before its last overrides' epoch: it waits.
        let mut stale = LeaderState::default();
        report_every_pg(&mut stale, &m, PgState::ACTIVE | PgState::CLEAN);
        stale.on_balanced(m.epoch + 1);
        assert!(stale.balance(&m, now).is_empty());
        assert!(stale.balancer_note.contains("not active+clean"));
        for round in 0..20 {
            let mut l = LeaderState::default();
            report_every_pg(&mut l, &m, PgState::ACTIVE | PgState::CLEAN);
            let c = l.balance(&m, now);
            if c.is_empty() {
                assert!(
                    l.balancer_note.starts_with("balanced"),
                    "{}",
                    l.balancer_note
                );
                break;
            }
            assert!(round < 19, "never balanced");
            let epoch = m.epoch + 1;
            m.apply(&Incremental { epoch, changes: c }).unwrap();
        }
        // Every OSD within one PG of its target (64 * 3 / 5 = 38.4).
        assert!(
            spread(&m) <= 2,
            "spread {} after, {before} before",
            spread(&m)
        );
        assert!(!m.pg_upmap_items.is_empty());
    }

    /// Under `noout` a down OSD stays in however long it is down; once
    /// the flag is cleared the down-out interval counts from then.
    #[test]
    fn noout_keeps_down_osds_in_and_the_interval_restarts_after() {
        let mut m = map();
        let mut l = LeaderState::default();
        let t0 = Instant::now();
        flag(&mut m, OsdFlag::NoOut, true);
        m.apply(&Incremental {
            epoch: m.epoch + 1,
            changes: vec![Change::OsdDown { id: 3 }],
        })
        .unwrap();
        assert!(l.tick(&m, t0, &T).is_empty());
        let t1 = t0 + 3 * T.down_out_interval;
        beacons(&mut l, 0..3, t1);
        assert!(l.tick(&m, t1, &T).is_empty(), "noout: stays in");
        flag(&mut m, OsdFlag::NoOut, false);
        assert!(l.tick(&m, t1, &T).is_empty(), "the interval starts now");
        let t2 = t1 + T.down_out_interval + Duration::from_secs(1);
        beacons(&mut l, 0..3, t2);
        assert_eq!(l.tick(&m, t2, &T), vec![Change::OsdAutoOut { id: 3 }]);
    }

    /// Under `nodown` neither failure reports nor a silent OSD mark one
    /// down; cleared, both do again.
    #[test]
    fn nodown_marks_no_osd_down() {
        let mut m = map();
        let mut l = LeaderState::default();
        let t0 = Instant::now();
        flag(&mut m, OsdFlag::NoDown, true);
        assert!(l.tick(&m, t0, &T).is_empty());
        assert!(l.on_failure(&m, 1, 0, t0, &T).is_empty());
        assert!(l.on_failure(&m, 2, 0, t0, &T).is_empty());
        let t1 = t0 + T.report_timeout + Duration::from_secs(1);
        beacons(&mut l, 0..3, t1);
        assert!(l.tick(&m, t1, &T).is_empty(), "osd.3 is silent but nodown");
        let st = l.status(&m, mons(), t1, &T).unwrap();
        assert!(
            (st.health.lines().iter()).any(|c| c == "OSDMAP_FLAGS: nodown flag(s) set"),
            "{:?}",
            st.health.checks
        );
        flag(&mut m, OsdFlag::NoDown, false);
        assert_eq!(l.tick(&m, t1, &T), vec![Change::OsdDown { id: 3 }]);
        assert!(l.on_failure(&m, 1, 0, t1, &T).is_empty());
        assert_eq!(
            l.on_failure(&m, 2, 0, t1, &T),
            vec![Change::OsdDown { id: 0 }]
        );
    }

    #[test]
    fn a_device_crossing_a_fullness_threshold_changes_the_map_and_health() {
        let mut m = map();
        let mut l = LeaderState::default();
        let t0 = Instant::now();
        let used = |osd, used| OsdReport {
            osd,
            bytes_used: used,
            bytes_total: 1000,
            ..Default::default()
        };
        for osd in 0..4 {
            l.on_report(used(osd, 100), t0);
        }
        assert!(l.tick(&m, t0, &T).is_empty(), "nobody near full");
        l.on_report(used(1, 870), t0);
        l.on_report(used(2, 950), t0);
        l.on_report(used(3, 900), t0);
        let c = l.tick(&m, t0, &T);
        assert_eq!(
            c,
            vec![
                Change::OsdFullness {
                    id: 1,
                    fullness: Fullness::NearFull
                },
                Change::OsdFullness {
                    id: 2,
                    fullness: Fullness::Full
                },
                Change::OsdFullness {
                    id: 3,
                    fullness: Fullness::BackfillFull
                },
            ]
        );
        m.apply(&Incremental {
            epoch: 3,
            changes: c,
        })
        .unwrap();
        assert!(l.tick(&m, t0, &T).is_empty(), "already in the map");
        let h = l.status(&m, mons(), t0, &T).unwrap().health;
        assert_eq!(h.status, HealthStatus::Err);
        let all = h.lines().join("\n");
        assert!(
            all.contains("OSD_FULL: 1 full osd(s)\n    osd.2 is full"),
            "{all}"
        );
        assert!(
            all.contains("OSD_BACKFILLFULL: 1 backfillfull osd(s)\n    osd.3 is backfillfull"),
            "{all}"
        );
        assert!(
            all.contains("OSD_NEARFULL: 1 nearfull osd(s)\n    osd.1 is nearfull"),
            "{all}"
        );
        // A device with room whose metadata's file system is full is full.
        let host_full = OsdReport {
            fill_used: 990,
            fill_total: 1000,
            ..used(0, 100)
        };
        l.on_report(host_full, t0);
        assert!(l.tick(&m, t0, &T).contains(&Change::OsdFullness {
            id: 0,
            fullness: Fullness::Full
        }));
        l.on_report(used(0, 100), t0);
        // Space freed: back to ok.
        l.on_report(used(2, 10), t0);
        assert_eq!(
            l.tick(&m, t0, &T),
            vec![Change::OsdFullness {
                id: 2,
                fullness: Fullness::Ok
            }]
        );
    }

    #[test]
    fn status_counts_primary_reports_and_sets_health() {
        let m = map();
        let mut l = LeaderState::default();
        let t0 = Instant::now();
        let s = l.status(&m, mons(), t0, &T).unwrap();
        assert_eq!(s.pgs.total, 8);
        assert_eq!(s.pgs.by_state[&PgState::UNKNOWN], 8);
        assert_eq!(s.health.status, HealthStatus::Warn);
        // Every primary reports its PGs: one degraded, the rest clean.
        let mut placer = m.placer().unwrap();
        let mut reports: BTreeMap<i32, OsdReport> = BTreeMap::new();
        for ps in 0..8 {
            let pg = PgId { pool: 1, ps };
            let pm = placer.map_pg(pg).unwrap();
            let state = if ps == 0 {
                PgState::ACTIVE | PgState::UNDERSIZED | PgState::DEGRADED
            } else {
                PgState::ACTIVE | PgState::CLEAN
            };
            let r = reports.entry(pm.acting_primary).or_default();
            r.osd = pm.acting_primary;
            r.pgs.push(PgStat {
                objects: 10,
                ..pg_stat(pg, m.epoch, state, pm.acting.clone())
            });
        }
        for (_, r) in reports {
            l.on_report(r, t0);
        }
        let s = l.status(&m, mons(), t0, &T).unwrap();
        assert_eq!(s.pgs.by_state[&(PgState::ACTIVE | PgState::CLEAN)], 7);
        assert_eq!(s.usage.objects, 80);
        assert_eq!(s.health.status, HealthStatus::Warn);
        let degraded = &s.health.checks["PG_DEGRADED"];
        assert!(
            degraded.summary.message.ends_with("1 pgs degraded"),
            "{:?}",
            s.health
        );
        assert!(
            degraded.detail[0]
                .message
                .contains("is active+undersized+degraded, acting ["),
            "{degraded:?}"
        );
        assert_eq!(s.usage.unfound_objects, 0);
        // A PG whose scrub found inconsistent objects: OSD_SCRUB_ERRORS
        // and PG_DAMAGED, an error.
        let mut r = l.reports.values().next().unwrap().report.clone();
        r.pgs[0].scrub_errors = 2;
        l.on_report(r.clone(), t0);
        let s = l.status(&m, mons(), t0, &T).unwrap();
        assert_eq!((s.usage.scrub_errors, s.usage.inconsistent_pgs), (2, 1));
        assert_eq!(s.health.status, HealthStatus::Err);
        let lines = s.health.lines();
        assert!(lines
            .iter()
            .any(|c| c == "OSD_SCRUB_ERRORS: 2 scrub errors"));
        assert!(
            lines.contains(&"PG_DAMAGED: Possible data damage: 1 pgs inconsistent".to_string()),
            "{lines:?}"
        );
        r.pgs[0].scrub_errors = 0;
        l.on_report(r, t0);
        // A flag set: OSDMAP_FLAGS warns, and status names it.
        let mut flagged = m.clone();
        flagged.flags.insert(loligo_types::osdmap::OsdFlag::NoScrub);
        let s = l.status(&flagged, mons(), t0, &T).unwrap();
        assert_eq!(s.osdmap.flags, vec!["noscrub".to_string()]);
        assert!((s.health.lines().iter()).any(|c| c == "OSDMAP_FLAGS: noscrub flag(s) set"));
        // A PG with unfound objects: counted, and the health is an error
        // that says what to do.
        let mut r = l.reports.values().next().unwrap().report.clone();
        r.pgs[0].unfound = 3;
        l.on_report(r, t0);
        let s = l.status(&m, mons(), t0, &T).unwrap();
        assert_eq!((s.usage.unfound_objects, s.usage.unfound_pgs), (3, 1));
        assert_eq!(
            s.health.status,
            HealthStatus::Warn,
            "OBJECT_UNFOUND warns, as Ceph's"
        );
        let all = s.health.lines().join("\n");
        assert!(
            all.contains("OBJECT_UNFOUND: 3/80 objects unfound (3.750%) in 1 pgs")
                && all.contains("has 3 unfound objects")
                && all.contains("osd lost"),
            "{all}"
        );
    }

    #[test]
    fn pg_list_gives_each_pg_its_primarys_report_and_what_a_down_one_waits_for() {
        let m = map();
        let mut l = LeaderState::default();
        let t0 = Instant::now();
        let mut placer = m.placer().unwrap();
        let mut reports: BTreeMap<i32, OsdReport> = BTreeMap::new();
        for ps in 0..8 {
            let pg = PgId { pool: 1, ps };
            let pm = placer.map_pg(pg).unwrap();
            // PG 1 is reported by a member that is not its primary (an
            // old report): it does not count.
            let by = if ps == 1 {
                pm.acting[1]
            } else {
                pm.acting_primary
            };
            let (state, waiting_for) = if ps == 0 {
                (PgState::DOWN, vec![3])
            } else {
                (PgState::ACTIVE | PgState::CLEAN, Vec::new())
            };
            let mut acting = pm.acting.clone();
            if ps == 1 {
                acting.rotate_left(1);
            }
            // PG 2's primary reports a set that starts with a hole (an
            // erasure-coded PG's first position down): it counts.
            if ps == 2 {
                acting[0] = -1;
            }
            let r = reports.entry(by).or_default();
            r.osd = by;
            r.pgs.push(PgStat {
                objects: u64::from(ps),
                bytes: 100,
                waiting_for,
                unfound: if ps == 3 { 2 } else { 0 },
                ..pg_stat(pg, m.epoch, state, acting)
            });
        }
        for (_, r) in reports {
            l.on_report(r, t0);
        }
        let rows = l.pg_list(&m, None).unwrap();
        assert_eq!(rows.len(), 8);
        let names: Vec<&str> = rows.iter().map(|r| r.pg.as_str()).collect();
        assert_eq!(
            names,
            ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7"]
        );
        assert_eq!(rows[0].state, PgState::DOWN);
        assert_eq!(rows[0].waiting_for, vec![3]);
        assert_eq!(rows[3].unfound, 2);
        assert_eq!(rows[4].unfound, 0);
        assert_eq!(rows[1].state, PgState::UNKNOWN);
        assert_eq!(rows[1].reported_epoch, None);
        assert_eq!(rows[1].objects, 0);
        for (ps, r) in rows.iter().enumerate().skip(2) {
            let pm = placer
                .map_pg(PgId {
                    pool: 1,
                    ps: ps as u32,
                })
                .unwrap();
            assert_eq!(r.state, PgState::ACTIVE | PgState::CLEAN);
            assert_eq!((r.objects, r.bytes), (ps as u64, 100));
            assert_eq!((&r.up, &r.acting), (&pm.up, &pm.acting));
            assert_eq!(r.primary, pm.acting_primary);
            assert_eq!(r.reported_epoch, Some(m.epoch));
            assert!(r.waiting_for.is_empty());
        }
        // One pool's PGs only; a pool with none lists nothing.
        assert_eq!(l.pg_list(&m, Some(1)).unwrap(), rows);
        assert!(l.pg_list(&m, Some(7)).unwrap().is_empty());
    }
}
