//! The cluster's metrics in Prometheus' text format (0.0.4), under Ceph's
//! own names and labels (those of Ceph's manager `prometheus` module:
//! `ceph_health_status`, `ceph_osd_up{ceph_daemon="osd.N"}`,
//! `ceph_pg_active{pool_id}`, ...), so that Ceph's Grafana dashboards and
//! alert rules read a Loligo cluster unchanged; `loligo_` names for what
//! Ceph has no series for. The leader renders them from its view (the
//! map, every PG's primary report, the OSDs' reports), as Ceph's active
//! manager does.
//!
//! Written by hand, not with a metrics crate: `prometheus-client` appends
//! `_total` to every counter's name (OpenMetrics' rule), which would
//! rename Ceph's `ceph_osd_op_r`; and the values here are computed from a
//! snapshot at scrape time, not kept in process-wide registries.
//!
//! It must never invent a number: a series Loligo has no measure for is
//! left out, not sent as zero.

use crate::health::{Census, CODES};
use crate::pool_stats::PoolRates;
use loligo_monc::protocol::{HealthStatus, StatusReport};
use loligo_types::osdmap::{OsdFlag, PoolKind, RatioKind};
use loligo_types::prom::{Kind, Text};
use loligo_types::{crush_edit, OsdMap, OsdReport, PgState, PoolIo};
use std::collections::BTreeMap;

/// What the leader knows, for one scrape.
pub struct View<'a> {
    pub map: &'a OsdMap,
    pub status: &'a StatusReport,
    pub census: &'a Census,
    /// Each OSD's last report (any order).
    pub reports: Vec<&'a OsdReport>,
    /// Per pool, I/O counted since this monitor began leading, and its
    /// rates now.
    pub pool_io: &'a BTreeMap<u64, PoolIo>,
    pub pool_rates: BTreeMap<u64, PoolRates>,
    /// Whether the OSDs' own counter families go in (not when each OSD
    /// serves them itself).
    pub perf_counters: bool,
}

/// The version every `ceph_version` label carries.
pub fn version() -> String {
    format!("loligo version {}", env!("CARGO_PKG_VERSION"))
}

/// Ceph's PG state names, each exported per pool as `ceph_pg_<state>`
/// (states Loligo never enters stay at zero, as they would on Ceph).
const CEPH_PG_STATES: [&str; 34] = [
    "active",
    "clean",
    "down",
    "recovery_unfound",
    "backfill_unfound",
    "scrubbing",
    "degraded",
    "inconsistent",
    "peering",
    "repair",
    "recovering",
    "forced_recovery",
    "backfill_wait",
    "incomplete",
    "stale",
    "remapped",
    "deep",
    "backfilling",
    "forced_backfill",
    "backfill_toofull",
    "recovery_wait",
    "recovery_toofull",
    "undersized",
    "activating",
    "peered",
    "snaptrim",
    "snaptrim_wait",
    "snaptrim_error",
    "creating",
    "unknown",
    "premerge",
    "failed_repair",
    "laggy",
    "wait",
];

/// The flags Ceph exports as `ceph_osd_flag_<name>`.
const CEPH_OSD_FLAGS: [&str; 9] = [
    "noup",
    "nodown",
    "noout",
    "noin",
    "nobackfill",
    "norebalance",
    "norecover",
    "noscrub",
    "nodeep-scrub",
];

/// The whole exposition.
pub fn render(v: &View) -> String {
    let mut t = Text::default();
    cluster(&mut t, v);
    monitors(&mut t, v);
    osds(&mut t, v);
    if v.perf_counters {
        osd_counters(&mut t, v);
    }
    pools(&mut t, v);
    pgs(&mut t, v);
    t.finish()
}

fn cluster(t: &mut Text, v: &View) {
    let s = v.status;
    let level = match s.health.status {
        HealthStatus::Ok => 0,
        HealthStatus::Warn => 1,
        HealthStatus::Err => 2,
    };
    t.single(
        "ceph_health_status",
        Kind::Untyped,
        "Cluster health status (0 HEALTH_OK, 1 HEALTH_WARN, 2 HEALTH_ERR)",
        f64::from(level as u8),
    );
    t.family(
        "ceph_health_detail",
        Kind::Gauge,
        "Health checks in the cluster (1: raised)",
    );
    for (code, nominal) in CODES {
        let (sev, on) = match s.health.checks.get(code) {
            Some(c) => (c.severity, 1.0),
            None => (nominal, 0.0),
        };
        t.sample(&[("name", code), ("severity", sev.name())], on);
    }
    for (code, c) in &s.health.checks {
        if !CODES.iter().any(|(k, _)| k == code) {
            t.sample(&[("name", code), ("severity", c.severity.name())], 1.0);
        }
    }
    let slow = (s.health.checks.get("SLOW_OPS")).map_or(0, |c| c.summary.count);
    t.single(
        "ceph_healthcheck_slow_ops",
        Kind::Gauge,
        "OSD or Monitor requests taking a long time to process",
        slow as f64,
    );
    t.family(
        "ceph_daemon_health_metrics",
        Kind::Gauge,
        "Health metrics for Ceph daemons",
    );
    for o in v.map.osds.values().filter(|o| o.up) {
        let n = v.census.slow_ops.get(&o.id).map_or(0, |(n, _)| *n);
        let daemon = format!("osd.{}", o.id);
        t.sample(&[("type", "SLOW_OPS"), ("ceph_daemon", &daemon)], n as f64);
    }
    let u = &s.usage;
    t.single(
        "ceph_cluster_total_bytes",
        Kind::Gauge,
        "DF total_bytes",
        u.total_bytes as f64,
    );
    t.single(
        "ceph_cluster_total_used_bytes",
        Kind::Gauge,
        "DF total_used_bytes",
        u.used_bytes as f64,
    );
    t.single(
        "ceph_cluster_total_used_raw_bytes",
        Kind::Gauge,
        "DF total_used_raw_bytes",
        u.used_bytes as f64,
    );
    for (what, n) in [
        ("degraded", u.degraded_objects),
        ("misplaced", u.misplaced_objects),
        ("unfound", u.unfound_objects),
    ] {
        t.single(
            &format!("ceph_num_objects_{what}"),
            Kind::Gauge,
            &format!("Number of {what} objects"),
            n as f64,
        );
    }
    for flag in CEPH_OSD_FLAGS {
        let set = OsdFlag::ALL
            .iter()
            .any(|f| f.name() == flag && v.map.flags.contains(f));
        t.single(
            &format!("ceph_osd_flag_{}", flag.replace('-', "_")),
            Kind::Untyped,
            &format!("OSD Flag {flag}"),
            f64::from(u8::from(set)),
        );
    }
    t.single(
        "loligo_osdmap_epoch",
        Kind::Gauge,
        "The cluster map's epoch",
        v.map.epoch as f64,
    );
    for (kind, name) in [
        (RatioKind::Full, "full"),
        (RatioKind::BackfillFull, "backfillfull"),
        (RatioKind::NearFull, "nearfull"),
    ] {
        t.single(
            &format!("loligo_osd_{name}_ratio"),
            Kind::Gauge,
            &format!("The map's {name} ratio (osd set-{name}-ratio)"),
            v.map.full_ratios.get(kind),
        );
    }
}

fn monitors(t: &mut Text, v: &View) {
    let m = &v.status.monitors;
    let version = version();
    t.family("ceph_mon_metadata", Kind::Untyped, "MON Metadata");
    for (rank, id) in m.members.iter().enumerate() {
        let addr = m.addrs.get(id).map_or("", String::as_str);
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        t.sample(
            &[
                ("ceph_daemon", &format!("mon.{id}")),
                ("hostname", host),
                ("public_addr", host),
                ("rank", &rank.to_string()),
                ("ceph_version", &version),
            ],
            1.0,
        );
    }
    t.family("ceph_mon_quorum_status", Kind::Gauge, "Monitors in quorum");
    for id in &m.members {
        let on = m.quorum.contains(id);
        t.sample(
            &[("ceph_daemon", &format!("mon.{id}"))],
            f64::from(u8::from(on)),
        );
    }
    // The monitors do a manager's work: the leader is the active one.
    t.family(
        "ceph_mgr_status",
        Kind::Gauge,
        "MGR status (0=standby, 1=active): the monitors serve as managers, the leader active",
    );
    for id in &m.members {
        let active = m.leader == Some(*id);
        t.sample(
            &[("ceph_daemon", &format!("mon.{id}"))],
            f64::from(u8::from(active)),
        );
    }
}

/// The CRUSH host of OSD `id` ("" when it has none).
pub(crate) fn host_of(locations: &crush_edit::Locations, id: i32) -> String {
    locations
        .of(&format!("osd.{id}"))
        .and_then(|loc| loc.into_iter().find(|(t, _)| t == "host"))
        .map_or_else(String::new, |(_, h)| h)
}

fn osds(t: &mut Text, v: &View) {
    let version = version();
    let map = v.map;
    t.family("ceph_osd_metadata", Kind::Untyped, "OSD Metadata");
    let locations = crush_edit::Locations::new(&map.crush);
    let classes: std::collections::HashMap<i32, &str> = (v.reports.iter().rev())
        .map(|r| (r.osd, r.device_class.as_str()))
        .collect();
    for o in map.osds.values() {
        let addr = o.addr.as_str();
        let host = host_of(&locations, o.id);
        let class = classes.get(&o.id).copied().unwrap_or("");
        t.sample(
            &[
                ("back_iface", ""),
                ("ceph_daemon", &format!("osd.{}", o.id)),
                ("cluster_addr", addr),
                ("device_class", class),
                ("front_iface", ""),
                ("hostname", &host),
                ("objectstore", "loligo"),
                ("public_addr", addr),
                ("ceph_version", &version),
            ],
            1.0,
        );
    }
    for (name, help) in [
        (
            "ceph_disk_occupation",
            "Associate Ceph daemon with disk used",
        ),
        (
            "ceph_disk_occupation_human",
            "Associate Ceph daemon with disk used for displaying to humans",
        ),
    ] {
        t.family(name, Kind::Untyped, help);
        for r in &v.reports {
            if r.device.is_empty() {
                continue;
            }
            let host = host_of(&locations, r.osd);
            t.sample(
                &[
                    ("ceph_daemon", &format!("osd.{}", r.osd)),
                    ("device", &r.device),
                    ("db_device", ""),
                    ("wal_device", ""),
                    ("instance", &host),
                ],
                1.0,
            );
        }
    }
    let each = |t: &mut Text,
                name: &str,
                help: &str,
                f: &dyn Fn(&loligo_types::osdmap::OsdInfo) -> f64| {
        t.family(name, Kind::Untyped, help);
        for o in map.osds.values() {
            t.sample(&[("ceph_daemon", &format!("osd.{}", o.id))], f(o));
        }
    };
    each(t, "ceph_osd_up", "OSD status up", &|o| {
        f64::from(u8::from(o.up))
    });
    each(t, "ceph_osd_in", "OSD status in", &|o| {
        f64::from(u8::from(o.is_in()))
    });
    each(t, "ceph_osd_weight", "OSD status weight", &|o| {
        f64::from(o.weight) / 65536.0
    });
    t.family("ceph_osd_numpg", Kind::Gauge, "Placement groups");
    for o in map.osds.values() {
        let n = v.census.numpg.get(&o.id).copied().unwrap_or(0);
        t.sample(&[("ceph_daemon", &format!("osd.{}", o.id))], n as f64);
    }
}

/// The OSDs' own counters, from their last reports (OSDs that are up).
fn osd_counters(t: &mut Text, v: &View) {
    let mut reports: Vec<&OsdReport> = (v.reports.iter().copied())
        .filter(|r| v.map.is_up(r.osd))
        .collect();
    reports.sort_by_key(|r| r.osd);
    loligo_types::prom::osd_counters(t, &reports);
}

fn pools(t: &mut Text, v: &View) {
    let map = v.map;
    t.family("ceph_pool_metadata", Kind::Untyped, "POOL Metadata");
    for p in map.pools.values() {
        let (kind, description) = match &p.kind {
            PoolKind::Replicated => ("replicated".to_string(), format!("replica:{}", p.size)),
            PoolKind::Erasure { profile } => {
                let km = map
                    .ec_profiles
                    .get(profile)
                    .map_or_else(String::new, |e| format!("{}+{}", e.k, e.m));
                ("erasure".to_string(), format!("ec:{km}"))
            }
        };
        let opts = map.pool_opts.get(&p.id).copied().unwrap_or_default();
        let compression = opts.compression_mode.to_string();
        t.sample(
            &[
                ("pool_id", &p.id.to_string()),
                ("name", &p.name),
                ("type", &kind),
                ("description", &description),
                ("compression_mode", &compression),
            ],
            1.0,
        );
    }
    let usage = crate::df::pools(v.map, v.census, &v.reports);
    type Get = fn(&loligo_monc::protocol::DfPoolStats) -> f64;
    let families: [(&str, &str, Get); 8] = [
        ("ceph_pool_bytes_used", "DF pool bytes_used", |u| {
            u.bytes_used as f64
        }),
        // No compression: what Ceph reads for a pool that compresses
        // nothing.
        (
            "ceph_pool_compress_bytes_used",
            "DF pool compress_bytes_used",
            |_| 0.0,
        ),
        (
            "ceph_pool_compress_under_bytes",
            "DF pool compress_under_bytes",
            |_| 0.0,
        ),
        ("ceph_pool_objects", "DF pool objects", |u| u.objects as f64),
        ("ceph_pool_stored", "DF pool stored", |u| u.stored as f64),
        ("ceph_pool_stored_raw", "DF pool stored_raw", |u| {
            u.bytes_used as f64
        }),
        ("ceph_pool_max_avail", "DF pool max_avail", |u| {
            u.max_avail as f64
        }),
        (
            "ceph_pool_percent_used",
            "DF pool percent_used (a ratio, as Ceph's)",
            |u| u.percent_used,
        ),
    ];
    for (name, help, get) in families {
        t.family(name, Kind::Gauge, help);
        for u in &usage {
            t.sample(&[("pool_id", &u.id.to_string())], get(&u.stats));
        }
    }
    pool_io(t, v);
}

/// Each pool's client and recovery I/O: counters since this monitor
/// began leading, and recovery rates now.
fn pool_io(t: &mut Text, v: &View) {
    type Get = fn(&PoolIo) -> u64;
    let counters: [(&str, &str, Get); 6] = [
        ("ceph_pool_rd", "Pool client reads", |p| p.read_ops),
        ("ceph_pool_rd_bytes", "Pool client bytes read", |p| {
            p.read_bytes
        }),
        ("ceph_pool_wr", "Pool client writes", |p| p.write_ops),
        ("ceph_pool_wr_bytes", "Pool client bytes written", |p| {
            p.write_bytes
        }),
        (
            "ceph_pool_num_objects_recovered",
            "Pool objects recovered",
            |p| p.recovery_objects,
        ),
        (
            "ceph_pool_num_bytes_recovered",
            "Pool bytes recovered",
            |p| p.recovery_bytes,
        ),
    ];
    let none = PoolIo::default();
    for (name, help, get) in counters {
        t.family(name, Kind::Counter, help);
        for id in v.map.pools.keys() {
            let io = v.pool_io.get(id).unwrap_or(&none);
            t.sample(&[("pool_id", &id.to_string())], get(io) as f64);
        }
    }
    type Rate = fn(&PoolRates) -> f64;
    let rates: [(&str, &str, Rate); 2] = [
        (
            "ceph_pool_recovering_objects_per_sec",
            "Pool objects recovered per second",
            |r| r.recovery_objects_s,
        ),
        (
            "ceph_pool_recovering_bytes_per_sec",
            "Pool bytes recovered per second",
            |r| r.recovery_bytes_s,
        ),
    ];
    for (name, help, get) in rates {
        t.family(name, Kind::Gauge, help);
        for id in v.map.pools.keys() {
            let r = v.pool_rates.get(id).copied().unwrap_or_default();
            t.sample(&[("pool_id", &id.to_string())], get(&r));
        }
    }
}

fn pgs(t: &mut Text, v: &View) {
    let map = v.map;
    t.family("ceph_pg_total", Kind::Gauge, "PG Total Count per pool");
    for p in map.pools.values() {
        let n = v.census.pools.get(&p.id).map_or(0, |c| c.total);
        t.sample(&[("pool_id", &p.id.to_string())], n as f64);
    }
    for state in CEPH_PG_STATES {
        t.family(
            &format!("ceph_pg_{state}"),
            Kind::Gauge,
            &format!("PG {state} per pool"),
        );
        let flag = PgState::flag_named(state);
        for p in map.pools.values() {
            let c = v.census.pools.get(&p.id).cloned().unwrap_or_default();
            let n: u64 = (c.by_state.iter())
                .filter(|(s, _)| match (state, flag) {
                    ("unknown", _) => s.is_unknown(),
                    (_, Some(f)) => s.contains(f),
                    _ => false,
                })
                .map(|(_, n)| n)
                .sum();
            t.sample(&[("pool_id", &p.id.to_string())], n as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::checks;
    use loligo_monc::protocol::{ClientIo, MonStatus, OsdMapStatus, PgSummary, RecoveryIo, Usage};
    use loligo_types::{Change, Incremental, PgId, PgStat};

    fn status(map: &OsdMap, census: &Census, quorum: Vec<u64>) -> StatusReport {
        let monitors = MonStatus {
            members: vec![0, 1, 2],
            leader: Some(0),
            term: 1,
            quorum,
            addrs: (0..3).map(|i| (i, format!("10.0.0.{i}:6789"))).collect(),
        };
        StatusReport {
            fsid: map.fsid.clone(),
            health: checks(map, census, &monitors),
            monitors,
            osdmap: OsdMapStatus {
                epoch: map.epoch,
                num_osds: map.osds.len(),
                num_up_osds: map.up_in().0,
                num_in_osds: map.up_in().1,
                flags: Vec::new(),
            },
            pools: map.pools.len(),
            pgs: PgSummary {
                total: census.total,
                by_state: census.by_state.clone(),
            },
            usage: Usage {
                objects: census.objects,
                degraded_objects: census.degraded,
                misplaced_objects: 0,
                unfound_objects: 0,
                unfound_pgs: 0,
                scrub_errors: 0,
                inconsistent_pgs: 0,
                stored_bytes: 1 << 20,
                used_bytes: 4 << 20,
                total_bytes: 4 << 30,
            },
            io: ClientIo::default(),
            recovery: RecoveryIo::default(),
            osd_counters: Vec::new(),
            progress: Vec::new(),
        }
    }

    /// Four OSDs, pool 1 of 8 PGs: 7 active+clean, one degraded.
    fn cluster() -> (OsdMap, Census, Vec<OsdReport>) {
        let map = OsdMap::test_cluster(4, 8);
        let mut census = Census::default();
        let mut placer = map.placer().unwrap();
        for ps in 0..8 {
            let pg = PgId { pool: 1, ps };
            let m = placer.map_pg(pg).unwrap();
            let state = match ps {
                0 => PgState::ACTIVE | PgState::UNDERSIZED | PgState::DEGRADED,
                _ => PgState::ACTIVE | PgState::CLEAN,
            };
            let s = PgStat {
                objects: 10,
                bytes: 40960,
                ..PgStat::new(pg, map.epoch, state, m.acting.clone())
            };
            census.add(pg, 3, state, Some(&s), &m.acting);
        }
        let reports = (0..4)
            .map(|osd| OsdReport {
                osd,
                bytes_total: 1 << 30,
                bytes_used: 1 << 20,
                read_ops: 100,
                read_latency_us: 50_000,
                write_ops: 10,
                write_latency_us: 20_000,
                commit_latency_us: 1500,
                device: format!("/dev/loop{osd}"),
                device_class: "ssd".into(),
                ..OsdReport::default()
            })
            .collect();
        (map, census, reports)
    }

    fn render_cluster(map: &OsdMap, census: &Census, reports: &[OsdReport]) -> String {
        render_with(map, census, reports, true)
    }

    fn render_with(
        map: &OsdMap,
        census: &Census,
        reports: &[OsdReport],
        perf_counters: bool,
    ) -> String {
        let s = status(map, census, vec![0, 1]);
        let pool_io: BTreeMap<u64, PoolIo> = [(
            1,
            PoolIo {
                read_ops: 7,
                write_bytes: 4096,
                ..PoolIo::default()
            },
        )]
        .into();
        let rates = PoolRates {
            recovery_bytes_s: 5.0,
            ..PoolRates::default()
        };
        render(&View {
            map,
            status: &s,
            census,
            reports: reports.iter().collect(),
            pool_io: &pool_io,
            pool_rates: [(1, rates)].into(),
            perf_counters,
        })
    }

    /// The value of the sample `series` (`name{labels}` exactly as sent).
    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn excluded_perf_counters_leave_the_osds_counters_to_their_own_endpoints() {
        let (map, census, reports) = cluster();
        let text = render_with(&map, &census, &reports, false);
        assert!(!text.contains("ceph_osd_op_r"), "{text}");
        assert!(!text.contains("loligo_osd_kv_calls"), "{text}");
        assert!(
            text.contains("# TYPE ceph_osd_up untyped"),
            "the map's OSD series stay"
        );
        assert!(
            text.contains("# TYPE ceph_pool_rd counter"),
            "pool series stay"
        );
    }

    #[test]
    fn every_family_has_help_and_type_once_and_every_sample_parses() {
        let (map, census, reports) = cluster();
        let text = render_cluster(&map, &census, &reports);
        let mut typed = std::collections::BTreeSet::new();
        let mut current = String::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(["gauge", "counter", "untyped"].contains(&kind), "{line}");
                assert!(typed.insert(name.to_string()), "{name} typed twice");
                current = name.to_string();
            } else if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap();
                assert!(!typed.contains(name), "HELP of {name} after its TYPE");
            } else {
                let name = line.split(['{', ' ']).next().unwrap();
                assert_eq!(name, current, "a sample outside its family: {line}");
                let v = line.rsplit(' ').next().unwrap();
                assert!(
                    v.parse::<f64>().is_ok() || ["NaN", "+Inf", "-Inf"].contains(&v),
                    "{line}"
                );
            }
        }
        for name in [
            "ceph_health_status",
            "ceph_health_detail",
            "ceph_healthcheck_slow_ops",
            "ceph_daemon_health_metrics",
            "ceph_mon_quorum_status",
            "ceph_mon_metadata",
            "ceph_osd_metadata",
            "ceph_osd_up",
            "ceph_osd_in",
            "ceph_osd_weight",
            "ceph_osd_numpg",
            "ceph_osd_op_r",
            "ceph_osd_op_w",
            "ceph_osd_op_r_latency_sum",
            "ceph_osd_op_r_latency_count",
            "ceph_osd_stat_bytes",
            "ceph_osd_stat_bytes_used",
            "ceph_osd_commit_latency_ms",
            "ceph_osd_apply_latency_ms",
            "ceph_pg_total",
            "ceph_pg_active",
            "ceph_pg_clean",
            "ceph_pool_metadata",
            "ceph_pool_stored",
            "ceph_pool_objects",
            "ceph_pool_max_avail",
            "ceph_num_objects_degraded",
            "ceph_disk_occupation",
            "ceph_disk_occupation_human",
            "ceph_mgr_status",
            "ceph_pool_bytes_used",
            "ceph_pool_rd",
            "ceph_pool_wr_bytes",
            "ceph_pool_recovering_bytes_per_sec",
        ] {
            assert!(typed.contains(name), "{name} missing");
        }
        assert_eq!(value(&text, "ceph_pool_rd{pool_id=\"1\"}"), Some(7.0));
        assert_eq!(
            value(&text, "ceph_pool_wr_bytes{pool_id=\"1\"}"),
            Some(4096.0)
        );
        assert_eq!(value(&text, "ceph_pool_wr{pool_id=\"1\"}"), Some(0.0));
        assert_eq!(
            value(&text, "ceph_pool_recovering_bytes_per_sec{pool_id=\"1\"}"),
            Some(5.0)
        );
    }

    /// The values say what the map and the reports say, under Ceph's
    /// labels.
    #[test]
    fn values_follow_the_map_and_the_reports() {
        let (mut map, census, reports) = cluster();
        let text = render_cluster(&map, &census, &reports);
        assert_eq!(value(&text, "ceph_health_status"), Some(1.0), "{text}");
        assert_eq!(
            value(
                &text,
                "ceph_health_detail{name=\"PG_DEGRADED\",severity=\"HEALTH_WARN\"}"
            ),
            Some(1.0)
        );
        assert_eq!(
            value(
                &text,
                "ceph_health_detail{name=\"MON_DOWN\",severity=\"HEALTH_WARN\"}"
            ),
            Some(1.0)
        );
        assert_eq!(
            value(
                &text,
                "ceph_health_detail{name=\"OSD_DOWN\",severity=\"HEALTH_WARN\"}"
            ),
            Some(0.0),
            "a check that does not hold reads 0"
        );
        assert_eq!(
            value(&text, "ceph_mon_quorum_status{ceph_daemon=\"mon.2\"}"),
            Some(0.0)
        );
        assert_eq!(
            value(&text, "ceph_mon_quorum_status{ceph_daemon=\"mon.1\"}"),
            Some(1.0)
        );
        assert_eq!(
            value(&text, "ceph_osd_up{ceph_daemon=\"osd.3\"}"),
            Some(1.0)
        );
        assert_eq!(
            value(&text, "ceph_osd_op_r{ceph_daemon=\"osd.1\"}"),
            Some(100.0)
        );
        assert_eq!(
            value(&text, "ceph_osd_op_r_latency_sum{ceph_daemon=\"osd.1\"}"),
            Some(0.05)
        );
        assert_eq!(
            value(&text, "ceph_osd_commit_latency_ms{ceph_daemon=\"osd.1\"}"),
            Some(1.5)
        );
        assert_eq!(value(&text, "ceph_pg_total{pool_id=\"1\"}"), Some(8.0));
        assert_eq!(value(&text, "ceph_pg_active{pool_id=\"1\"}"), Some(8.0));
        assert_eq!(value(&text, "ceph_pg_clean{pool_id=\"1\"}"), Some(7.0));
        assert_eq!(value(&text, "ceph_pg_degraded{pool_id=\"1\"}"), Some(1.0));
        assert_eq!(value(&text, "ceph_pg_snaptrim{pool_id=\"1\"}"), Some(0.0));
        assert_eq!(value(&text, "ceph_pool_objects{pool_id=\"1\"}"), Some(80.0));
        assert_eq!(
            value(&text, "ceph_pool_stored{pool_id=\"1\"}"),
            Some(327680.0)
        );
        assert_eq!(
            value(&text, "ceph_pool_stored_raw{pool_id=\"1\"}"),
            Some(983040.0)
        );
        // Four equal OSDs of 1 GiB, 1 MiB used each, full at 95%: the
        // first fills after 4 x (0.95 GiB - 1 MiB) raw, a third of it
        // for a pool of size 3.
        let raw = 4.0 * ((1u64 << 30) as f64 * 0.95 - (1 << 20) as f64);
        assert_eq!(
            value(&text, "ceph_pool_max_avail{pool_id=\"1\"}"),
            Some((raw / 3.0).floor())
        );
        let numpg: f64 = (0..4)
            .map(|o| value(&text, &format!("ceph_osd_numpg{{ceph_daemon=\"osd.{o}\"}}")).unwrap())
            .sum();
        assert_eq!(numpg, 24.0, "8 PGs of 3 copies");
        assert!(text.contains(
            "ceph_disk_occupation{ceph_daemon=\"osd.2\",device=\"/dev/loop2\",db_device=\"\",wal_device=\"\",instance=\"h2\"} 1"
        ));
        // The class each OSD reports for its disk, in its metadata.
        assert!(text.contains("ceph_daemon=\"osd.2\",cluster_addr="));
        let meta = text
            .lines()
            .find(|l| l.starts_with("ceph_osd_metadata{") && l.contains("\"osd.2\""))
            .expect("osd.2's metadata");
        assert!(meta.contains("device_class=\"ssd\""), "{meta}");
        // An OSD down: its up series reads 0, OSD_DOWN holds, and its
        // counters are no longer sent (it sends no reports).
        map.apply(&Incremental {
            epoch: map.epoch + 1,
            changes: vec![Change::OsdDown { id: 3 }],
        })
        .unwrap();
        let text = render_cluster(&map, &census, &reports);
        assert_eq!(
            value(&text, "ceph_osd_up{ceph_daemon=\"osd.3\"}"),
            Some(0.0)
        );
        assert_eq!(
            value(
                &text,
                "ceph_health_detail{name=\"OSD_DOWN\",severity=\"HEALTH_WARN\"}"
            ),
            Some(1.0)
        );
        assert_eq!(value(&text, "ceph_osd_op_r{ceph_daemon=\"osd.3\"}"), None);
    }

    #[test]
    fn label_values_and_help_are_escaped() {
        let mut t = Text::default();
        t.family("x_y", Kind::Gauge, "a \\ b\nc")
            .sample(&[("name", "q\"u\\o\nte")], 1.5)
            .sample(&[], f64::INFINITY)
            .sample(&[], f64::NAN);
        assert_eq!(
            t.finish(),
            "# HELP x_y a \\\\ b\\nc\n# TYPE x_y gauge\nx_y{name=\"q\\\"u\\\\o\\nte\"} 1.5\nx_y +Inf\nx_y NaN\n"
        );
    }
}
