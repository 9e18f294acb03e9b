//! `loligo osdmap scale`: how the cluster map's costs grow with the
//! cluster. For each size it builds a map of N OSDs (10 per host, CRUSH's
//! host failure domain, as many pools of size 3 as it takes to give each
//! OSD about `--pgs-per-osd` PG copies), then times what every holder of
//! the map does with an incremental that marks one OSD down: the
//! monitors' and every receiver's `OsdMap::apply`, a client's routing
//! table, an OSD's pass over the PGs. Everything runs in this process, on
//! the real types; nothing touches a disk or the network.
//!
//! It must never report a time it did not measure in this run.

use crate::CliError;
use clap::Args;
use loligo_types::mapping::PgMappings;
use loligo_types::{encode, Change, Incremental, OsdMap, PgId};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct ScaleArgs {
    /// Cluster sizes (OSDs), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "10,100,1000,10000")]
    osds: Vec<u32>,
    /// PG copies per OSD (Ceph's target is about 100).
    #[arg(long, default_value_t = 100)]
    pgs_per_osd: u32,
    /// Timed repetitions of each step (the median is reported; with
    /// --peering, whole runs, each on a fresh monitor).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Also write the rows as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Instead, start a real monitor (in this process, its store in a
    /// temporary folder) per size, boot the OSDs against it and create
    /// the pools, then time its commits of `osd down` and of a boot, and
    /// this process's memory growth (run one size per process for a
    /// clean memory figure).
    #[arg(long)]
    monitor: bool,
    /// Instead, per size: a real monitor, the OSDs simulated (the real PG
    /// state machines over in-memory stores, in virtual time charged with
    /// the measured cost of each step), every PG peered, then one OSD
    /// marked down and the PGs' peering again timed.
    #[arg(long, conflicts_with = "monitor")]
    peering: bool,
    /// --peering: one-way message time between OSDs, microseconds.
    #[arg(long, default_value_t = 100)]
    net_us: u64,
    /// --peering: a store commit's time, microseconds.
    #[arg(long, default_value_t = 100)]
    sync_us: u64,
}

/// One cluster size's measurements against a real monitor.
struct MonRow {
    osds: u32,
    pgs: u64,
    /// Booting every OSD (64 boots in flight; boots that wait together
    /// share an epoch).
    boot_s: f64,
    epochs: u64,
    /// Committing an OSD marked down, and its boot again (median).
    down_ms: f64,
    boot_ms: f64,
    /// Growth of this process's resident memory from before the monitor
    /// started to after the commits.
    rss_mib: f64,
}

/// Resident memory of this process (MiB), from /proc's `VmRSS` (Linux,
/// in KiB whatever the page size); NaN where it cannot be read.
fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse::<f64>().ok()
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn mon_err(e: impl std::fmt::Display) -> CliError {
    CliError(format!("monitor: {e}"))
}

/// A real monitor (one member, its store in a temporary folder) with
/// every OSD booted and the pools made: what `f` measures against.
async fn with_cluster<T, F, Fut>(osds: u32, per_osd: u32, f: F) -> Result<T, CliError>
where
    F: FnOnce(Cluster) -> Fut,
    Fut: std::future::Future<Output = Result<T, CliError>>,
{
    use loligo_mon::{MonConfig, Monitor};
    let dir = std::env::temp_dir().join(format!("loligo-scale-mon-{}-{osds}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    let mut cfg = MonConfig::new(0, [(0, addr)].into(), dir.clone(), "scale");
    cfg.create = true;
    // The simulated OSDs send the monitor no reports: it must not mark
    // them down for that while a large setup runs (minutes of wall time
    // at 10,000 OSDs). Failure detection is not what is measured.
    cfg.report_timeout = std::time::Duration::from_secs(7 * 86_400);
    cfg.down_out_interval = std::time::Duration::from_secs(7 * 86_400);
    let rss0 = rss_mib();
    let h = Monitor::start(cfg, listener).await.map_err(mon_err)?;
    let result = async {
        let c = boot_cluster(h.mon.clone(), osds, per_osd, rss0).await?;
        f(c).await
    }
    .await;
    h.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// A monitor whose cluster is booted: what booting cost.
struct Cluster {
    mon: std::sync::Arc<loligo_mon::Monitor>,
    osds: u32,
    pgs: u64,
    boot_s: f64,
    epochs: u64,
    /// This process's memory before the monitor started.
    rss0: f64,
}

/// OSD `id`'s boot request in a simulated cluster.
fn boot(id: i32) -> loligo_mon::MonRequest {
    let (addr, host) = osd_place(id);
    loligo_mon::MonRequest::OsdBoot {
        id,
        addr,
        host,
        crush_weight: 0x10000,
    }
}

async fn boot_cluster(
    mon: std::sync::Arc<loligo_mon::Monitor>,
    osds: u32,
    per_osd: u32,
    rss0: f64,
) -> Result<Cluster, CliError> {
    use loligo_mon::{Admin, MonRequest};
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    while !(mon.is_leader() && mon.epoch() > 0) {
        if Instant::now() > deadline {
            return Err(mon_err("no leader after 60 s"));
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let first = mon.epoch();
    let t = Instant::now();
    let mut tasks: tokio::task::JoinSet<Result<(), loligo_mon::MonError>> =
        tokio::task::JoinSet::new();
    for id in 0..osds as i32 {
        if tasks.len() >= 64 {
            if let Some(r) = tasks.join_next().await {
                r.map_err(mon_err)?.map_err(mon_err)?;
            }
        }
        let (m, req) = (mon.clone(), boot(id));
        tasks.spawn(async move { m.call(req).await.map(|_| ()) });
    }
    while let Some(r) = tasks.join_next().await {
        r.map_err(mon_err)?.map_err(mon_err)?;
    }
    let boot_s = t.elapsed().as_secs_f64();
    let epochs = mon.epoch() - first;
    let mut pgs = 0;
    for (i, pg_num) in pool_pg_nums(osds, per_osd).into_iter().enumerate() {
        mon.call(MonRequest::Admin(Admin::PoolCreate {
            name: format!("pool{i}"),
            pg_num,
            size: SIZE,
            min_size: None,
            erasure_profile: None,
        }))
        .await
        .map_err(mon_err)?;
        pgs += u64::from(pg_num);
    }
    Ok(Cluster {
        mon,
        osds,
        pgs,
        boot_s,
        epochs,
        rss0,
    })
}

async fn mon_measure(osds: u32, per_osd: u32, reps: usize) -> Result<MonRow, CliError> {
    use loligo_mon::MonRequest;
    with_cluster(osds, per_osd, |c| async move {
        let (mut down, mut up) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let t = Instant::now();
            c.mon
                .call(MonRequest::OsdMarkMeDown { id: 0 })
                .await
                .map_err(mon_err)?;
            down.push(ms(t));
            let t = Instant::now();
            c.mon.call(boot(0)).await.map_err(mon_err)?;
            up.push(ms(t));
        }
        Ok(MonRow {
            osds: c.osds,
            pgs: c.pgs,
            boot_s: c.boot_s,
            epochs: c.epochs,
            down_ms: median(down),
            boot_ms: median(up),
            rss_mib: rss_mib() - c.rss0,
        })
    })
    .await
}

/// The peering table's columns.
const PEER_COLUMNS: [Column; 17] = [
    ("osds", "osds", 6),
    ("pgs", "pgs", 7),
    ("affected_pgs", "affected", 8),
    ("peered_ms", "peered ms", 9),
    ("active_ms", "active ms", 9),
    ("active_min_ms", "min", 7),
    ("active_max_ms", "max", 7),
    ("epochs", "epochs", 6),
    ("messages", "msgs", 6),
    ("mon_requests", "mon reqs", 8),
    ("mon_busy_ms", "mon ms", 8),
    ("osd_busy_max_ms", "osd max ms", 10),
    ("osd_busy_total_ms", "osd sum ms", 10),
    ("osd_step_max_ms", "osd step ms", 11),
    ("mon_step_max_ms", "mon step ms", 11),
    ("setup_s", "setup s", 8),
    ("sim_s", "sim s", 7),
];

fn peer_table(a: &ScaleArgs) -> Result<(), CliError> {
    println!(
        "peering after one OSD is marked down (simulated OSDs, a real monitor; \
         virtual time: {} us a message, {} us a commit):",
        a.net_us, a.sync_us
    );
    let mut t = Table::start(&PEER_COLUMNS, a.csv.as_ref())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    for &n in &a.osds {
        let (net_us, sync_us) = (a.net_us, a.sync_us);
        // Each repetition on a fresh monitor; the run whose activation
        // time is the median is reported whole, with the range beside.
        let mut runs = Vec::new();
        for _ in 0..a.reps {
            runs.push(rt.block_on(with_cluster(n, a.pgs_per_osd, |c| async move {
                let victim = (c.osds / 2) as i32;
                crate::scale_peering::measure(c.mon, c.osds, c.pgs, victim, net_us, sync_us).await
            }))?);
        }
        runs.sort_by(|x, y| x.active_ms.total_cmp(&y.active_ms));
        let (lo, hi) = match (runs.first(), runs.last()) {
            (Some(f), Some(l)) => (f.active_ms, l.active_ms),
            _ => continue,
        };
        let r = &runs[runs.len() / 2];
        t.row(&[
            r.osds.to_string(),
            r.pgs.to_string(),
            r.affected.to_string(),
            format!("{:.2}", r.peered_ms),
            format!("{:.2}", r.active_ms),
            format!("{lo:.2}"),
            format!("{hi:.2}"),
            r.epochs.to_string(),
            r.messages.to_string(),
            r.mon_requests.to_string(),
            format!("{:.2}", r.mon_busy_ms),
            format!("{:.2}", r.osd_busy_max_ms),
            format!("{:.1}", r.osd_busy_total_ms),
            format!("{:.2}", r.osd_step_max_ms),
            format!("{:.2}", r.mon_step_max_ms),
            format!("{:.1}", r.setup_s),
            format!("{:.1}", r.sim_s),
        ])?;
    }
    Ok(())
}

/// The monitor table's columns.
const MON_COLUMNS: [Column; 7] = [
    ("osds", "osds", 6),
    ("pgs", "pgs", 8),
    ("boot_s", "boot s", 9),
    ("epochs", "epochs", 7),
    ("down_commit_ms", "down ms", 9),
    ("boot_commit_ms", "boot ms", 9),
    ("mon_rss_mib", "mon MiB", 9),
];

fn mon_cells(r: &MonRow) -> [String; 7] {
    [
        r.osds.to_string(),
        r.pgs.to_string(),
        format!("{:.2}", r.boot_s),
        r.epochs.to_string(),
        format!("{:.3}", r.down_ms),
        format!("{:.3}", r.boot_ms),
        format!("{:.1}", r.rss_mib),
    ]
}

fn mon_table(a: &ScaleArgs) -> Result<(), CliError> {
    println!("monitor (one member, its store on this machine's disk):");
    let mut t = Table::start(&MON_COLUMNS, a.csv.as_ref())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    for &n in &a.osds {
        let r = rt.block_on(mon_measure(n, a.pgs_per_osd, a.reps))?;
        t.row(&mon_cells(&r))?;
    }
    Ok(())
}

/// A column: CSV name, table heading and width.
type Column = (&'static str, &'static str, usize);

/// A table printed a row at a time as sizes are measured, and its CSV
/// copy if one was asked for.
struct Table {
    columns: &'static [Column],
    csv: Option<std::fs::File>,
}

impl Table {
    /// Print the headings (and write the CSV's names).
    fn start(columns: &'static [Column], csv: Option<&PathBuf>) -> Result<Table, CliError> {
        let csv = match csv {
            Some(p) => {
                let mut f = std::fs::File::create(p)
                    .map_err(|e| CliError(format!("{}: {e}", p.display())))?;
                let names: Vec<&str> = columns.iter().map(|c| c.0).collect();
                writeln!(f, "{}", names.join(","))?;
                Some(f)
            }
            None => None,
        };
        let t = Table { columns, csv };
        println!("{}", t.line(columns.iter().map(|c| c.1)));
        Ok(t)
    }

    /// One line: each value right-aligned in its column.
    fn line<'a>(&self, values: impl Iterator<Item = &'a str>) -> String {
        let parts: Vec<String> = values
            .zip(self.columns)
            .map(|(v, (_, _, w))| format!("{v:>w$}"))
            .collect();
        parts.join(" ")
    }

    /// Print a row's values (and write them to the CSV).
    fn row(&mut self, cells: &[String]) -> Result<(), CliError> {
        println!("{}", self.line(cells.iter().map(String::as_str)));
        if let Some(f) = self.csv.as_mut() {
            writeln!(f, "{}", cells.join(","))?;
        }
        Ok(())
    }
}

/// Largest pg_num of one pool (as the monitors allow).
const POOL_PGS_MAX: u64 = 65_536;
const OSDS_PER_HOST: u32 = 10;
const SIZE: u32 = 3;

/// One cluster size's measurements.
struct Row {
    osds: u32,
    pgs: u64,
    map_bytes: usize,
    build_s: f64,
    apply_ms: f64,
    compile_ms: f64,
    map_all_ms: f64,
    mappings_build_ms: f64,
    mappings_down_ms: f64,
    client_ms: f64,
    changed_pgs: usize,
    mappings_mib: f64,
    client_mib: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// The map of a cluster of `osds` OSDs, all up and in, with pools giving
/// each about `per_osd` PG copies.
fn build(osds: u32, per_osd: u32) -> Result<OsdMap, CliError> {
    let mut m = OsdMap::new("scale", "host")?;
    let boots = (0..osds as i32)
        .map(|id| {
            let (addr, host) = osd_place(id);
            Change::OsdBoot {
                id,
                addr,
                host,
                crush_weight: 0x10000,
            }
        })
        .collect();
    m.apply(&Incremental {
        epoch: m.epoch + 1,
        changes: boots,
    })?;
    for (i, pg_num) in pool_pg_nums(osds, per_osd).into_iter().enumerate() {
        // Each pool made on the map the one before it left, so each
        // takes the next pool id.
        let p = m.replicated_pool(&format!("pool{i}"), pg_num, SIZE, 2);
        m.apply(&Incremental {
            epoch: m.epoch + 1,
            changes: vec![Change::PoolCreate(p)],
        })?;
    }
    // A write set on record for every PG, as in a cluster that has taken
    // writes (the members named need not be the PG's: only the map's
    // size and its checks matter here).
    let n = osds as i32;
    // (An interval that began after every OSD booted: the map refuses a
    // record naming an OSD that booted since its interval began.)
    let interval = m.epoch;
    let records = m
        .pools
        .values()
        .flat_map(|p| (0..p.pg_num).map(move |ps| PgId { pool: p.id, ps }))
        .map(|pg| {
            let o = pg.ps as i32;
            Change::RecordWriteSet {
                pg,
                record: loligo_types::WriteSetRecord {
                    interval,
                    osds: vec![o % n, (o + 1) % n, (o + 2) % n],
                },
            }
        })
        .collect();
    m.apply(&Incremental {
        epoch: m.epoch + 1,
        changes: records,
    })?;
    Ok(m)
}

/// OSD `id`'s address and host in a simulated cluster (10 per host).
fn osd_place(id: i32) -> (String, String) {
    (
        format!("10.0.{}.{}:6800", id / 250, id % 250),
        format!("host{}", id as u32 / OSDS_PER_HOST),
    )
}

/// The pools' pg_num giving each of `osds` OSDs about `per_osd` PG copies
/// in size-3 pools (as few pools as the per-pool limit allows).
fn pool_pg_nums(osds: u32, per_osd: u32) -> Vec<u32> {
    let mut left = (u64::from(osds) * u64::from(per_osd) / u64::from(SIZE)).max(1);
    let mut v = Vec::new();
    while left > 0 {
        let pg_num = left.min(POOL_PGS_MAX);
        v.push(pg_num as u32);
        left -= pg_num;
    }
    v
}

fn measure(osds: u32, per_osd: u32, reps: usize) -> Result<Row, CliError> {
    let t = Instant::now();
    let map = build(osds, per_osd)?;
    let build_s = t.elapsed().as_secs_f64();
    let pgs: u64 = map.pools.values().map(|p| u64::from(p.pg_num)).sum();
    let down = Incremental {
        epoch: map.epoch + 1,
        changes: vec![Change::OsdDown { id: 0 }],
    };
    let mut next = map.clone();
    next.apply(&down)?;
    let (mut apply, mut compile, mut all) = (Vec::new(), Vec::new(), Vec::new());
    let (mut mbuild, mut mdown, mut client) = (Vec::new(), Vec::new(), Vec::new());
    let mut changed = 0;
    let mut mappings_mib = 0.0;
    let mut client_mib = 0.0;
    // What apply is made of: a copy of the map, and its checks.
    let (mut clone_t, mut validate_t) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let t = Instant::now();
        let c = map.clone();
        clone_t.push(ms(t));
        let t = Instant::now();
        c.validate()?;
        validate_t.push(ms(t));
    }
    eprintln!(
        "{osds} OSDs: apply = copy {:.3} ms + checks {:.3} ms + the changes",
        median(clone_t),
        median(validate_t)
    );
    for _ in 0..reps {
        let mut m = map.clone();
        let t = Instant::now();
        m.apply(&down)?;
        apply.push(ms(t));

        let t = Instant::now();
        let mut placer = m.placer()?;
        compile.push(ms(t));
        let t = Instant::now();
        for pool in m.pools.values() {
            for ps in 0..pool.pg_num {
                placer.map_pg(PgId { pool: pool.id, ps })?;
            }
        }
        all.push(ms(t));

        let t = Instant::now();
        let mut mp = PgMappings::new(&map)?;
        mbuild.push(ms(t));
        mappings_mib = mp.heap_bytes() as f64 / (1 << 20) as f64;
        client_mib = PgMappings::unindexed(&map)?.heap_bytes() as f64 / (1 << 20) as f64;
        // A client's new table: the next map's OSD states, and whether
        // the steps it has still hold (then it keeps them).
        let t = Instant::now();
        let states = next.osd_states();
        let holds = mp.crush_steps_hold(&next, &states);
        client.push(ms(t));
        if !holds {
            return Err(CliError(
                "marking an OSD down changed CRUSH's inputs".into(),
            ));
        }
        // An OSD's: the carried mappings advanced, the moved PGs named.
        let t = Instant::now();
        let ch = mp.advance(&next)?;
        mdown.push(ms(t));
        changed = ch.len();
    }
    Ok(Row {
        osds,
        pgs,
        map_bytes: encode(&map).len(),
        build_s,
        apply_ms: median(apply),
        compile_ms: median(compile),
        map_all_ms: median(all),
        mappings_build_ms: median(mbuild),
        mappings_down_ms: median(mdown),
        client_ms: median(client),
        changed_pgs: changed,
        mappings_mib,
        client_mib,
    })
}

/// The map table's columns.
const COLUMNS: [Column; 13] = [
    ("osds", "osds", 6),
    ("pgs", "pgs", 8),
    ("map_bytes", "map B", 10),
    ("build_s", "build s", 9),
    ("apply_ms", "apply ms", 9),
    ("compile_ms", "compile ms", 10),
    ("map_all_ms", "map-all ms", 11),
    ("mappings_build_ms", "cache ms", 11),
    ("mappings_down_ms", "osd ms", 10),
    ("client_ms", "client ms", 10),
    ("changed_pgs", "changed", 8),
    ("mappings_mib", "cache MiB", 9),
    ("client_mib", "client MiB", 10),
];

/// A row's values, formatted, in [`COLUMNS`]' order.
fn cells(r: &Row) -> [String; 13] {
    [
        r.osds.to_string(),
        r.pgs.to_string(),
        r.map_bytes.to_string(),
        format!("{:.3}", r.build_s),
        format!("{:.3}", r.apply_ms),
        format!("{:.3}", r.compile_ms),
        format!("{:.3}", r.map_all_ms),
        format!("{:.3}", r.mappings_build_ms),
        format!("{:.4}", r.mappings_down_ms),
        format!("{:.4}", r.client_ms),
        r.changed_pgs.to_string(),
        format!("{:.2}", r.mappings_mib),
        format!("{:.2}", r.client_mib),
    ]
}

pub fn run(a: ScaleArgs) -> Result<(), CliError> {
    if a.reps == 0 || a.osds.contains(&0) || a.pgs_per_osd == 0 {
        return Err(CliError(
            "--osds sizes, --pgs-per-osd and --reps must be positive".into(),
        ));
    }
    if a.monitor {
        return mon_table(&a);
    }
    if a.peering {
        let least = SIZE * OSDS_PER_HOST;
        if let Some(n) = a.osds.iter().find(|&&n| n < least) {
            return Err(CliError(format!(
                "--peering needs at least {least} OSDs ({SIZE} hosts of {OSDS_PER_HOST} for \
                 size-{SIZE} pools), not {n}"
            )));
        }
        return peer_table(&a);
    }
    let mut t = Table::start(&COLUMNS, a.csv.as_ref())?;
    for &n in &a.osds {
        t.row(&cells(&measure(n, a.pgs_per_osd, a.reps)?))?;
    }
    Ok(())
}
