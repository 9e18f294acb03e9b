//! The soak: a lab of three or five monitors, four OSDs and a client host
//! (`lab`: one process per daemon, each on a host of its own) under
//! faults one after another, for as long as asked: OSDs killed (SIGKILL)
//! and started again, an OSD cut off from the monitors alone, two OSDs
//! cut off from each other (both ways, or one way), the monitors' leader
//! (with five, it and one other) cut off from the others, an OSD started
//! again while the leader is cut off, a monitor killed and started again,
//! the client host cut off from one OSD, two OSDs losing 10 to 30% of
//! their packets to each other, an OSD's link down, a blackhole route
//! from one OSD's host to another's. With `LOLIGO_MS_INJECT` set (as
//! `tools/soak.sh` does unless told otherwise), every daemon and client
//! also injects message faults throughout (resets, duplicates, delays). Meanwhile clients write and read registers on a
//! replicated pool, an erasure-coded pool (Reed-Solomon 2+1, min_size 2)
//! and a key-value store; every op is recorded (invoked, returned,
//! answer; a write that failed has an unknown outcome) and each
//! register's history is checked for linearizability
//! (`loligo_testkit::lincheck`). Each fault is healed after a few
//! seconds, and the time until every PG is active+clean again is taken.
//! Registers are renamed after each fault, so that no history grows
//! without bound.
//!
//! Run by `tools/soak.sh` (root: network namespaces). Reads
//! `LOLIGO_SOAK_MINUTES` (default 10), `LOLIGO_SOAK_SEED` (0),
//! `LOLIGO_SOAK_MONS` (3) and `LOLIGO_SOAK_OUT` (where `report.json` and
//! `report.md` go; default `target/soak`). Fails if any history is not
//! linearizable, any acknowledged write is lost, or the monitors' map
//! epoch, read after each fault, is ever older than one read before.

mod common;
mod lab;

use lab::registers::{self, Client, History, Kind};
use lab::{hosts_or_skip, Lab};
use loligo_testkit::Rng;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const OSDS: usize = 4;
/// Registers per kind at a time, and clients per kind.
const REGISTERS: u64 = 3;
const CLIENTS_PER_KIND: usize = 2;
/// How long every PG may take to be clean after a fault is healed.
const CLEAN_WITHIN: Duration = Duration::from_secs(180);

/// One fault, as injected.
#[derive(Clone, Debug)]
enum Fault {
    KillOsd(usize),
    OsdFromMonitors(usize),
    OsdPair(usize, usize),
    MonLeaderCut(usize),
    KillMon(usize),
    ClientFromOsd(usize),
    /// Two OSDs' hosts lose this share (%) of their packets to each other.
    LossyLink(usize, usize, u32),
    /// The first OSD hears nothing from the second; the second hears it.
    OneWay(usize, usize),
    /// An OSD's host loses its link (every peer, monitor and client).
    LinkDown(usize),
    /// The first OSD's host routes the second's into a blackhole.
    Blackhole(usize, usize),
    /// The monitors' leader cut off from the others, and meanwhile an
    /// OSD killed and started again (it boots during the partition).
    OsdBootsDuringMonCut(usize, usize),
    /// A minority of the monitors (the leader among them) cut off from
    /// the rest (with five: two of them).
    MonMinorityCut(Vec<usize>),
}

impl Fault {
    fn kind(&self) -> &'static str {
        match self {
            Fault::KillOsd(_) => "kill_osd",
            Fault::OsdFromMonitors(_) => "osd_cut_from_monitors",
            Fault::OsdPair(..) => "osd_pair_cut",
            Fault::MonLeaderCut(_) => "mon_leader_cut",
            Fault::KillMon(_) => "kill_mon",
            Fault::ClientFromOsd(_) => "client_cut_from_osd",
            Fault::LossyLink(..) => "lossy_link",
            Fault::OneWay(..) => "osd_one_way_cut",
            Fault::LinkDown(_) => "osd_link_down",
            Fault::Blackhole(..) => "osd_blackhole_route",
            Fault::OsdBootsDuringMonCut(..) => "osd_boots_during_mon_cut",
            Fault::MonMinorityCut(_) => "mon_minority_cut",
        }
    }

    fn pick(lab: &Lab, rng: &mut Rng, i: u64) -> Fault {
        let osd = rng.index(OSDS);
        let other = (osd + 1 + rng.index(OSDS - 1)) % OSDS;
        let leader = lab.mon_leader().unwrap_or(0);
        match i % 12 {
            0 => Fault::KillOsd(osd),
            1 => Fault::OsdFromMonitors(osd),
            2 => Fault::OsdPair(osd, other),
            3 => Fault::MonLeaderCut(leader),
            4 => Fault::KillMon(rng.index(lab.mons)),
            5 => Fault::ClientFromOsd(osd),
            6 => Fault::LossyLink(osd, other, 10 + rng.below(21) as u32),
            7 => Fault::OneWay(osd, other),
            8 => Fault::LinkDown(osd),
            9 => Fault::OsdBootsDuringMonCut(leader, osd),
            10 => Fault::Blackhole(osd, other),
            _ => {
                // The leader and, with five, one other: a minority.
                let mut cut = vec![leader];
                if lab.mons >= 5 {
                    cut.push((leader + 1 + rng.index(lab.mons - 1)) % lab.mons);
                }
                Fault::MonMinorityCut(cut)
            }
        }
    }

    fn inject(&self, lab: &mut Lab) {
        match *self {
            Fault::KillOsd(o) => lab.kill(lab.mons + o),
            Fault::OsdFromMonitors(o) => lab.cut_from_monitors(lab.osd_host(o)),
            Fault::OsdPair(a, b) => lab.cut_between(lab.osd_host(a), lab.osd_host(b)),
            Fault::MonLeaderCut(m) => Fault::MonMinorityCut(vec![m]).inject(lab),
            Fault::KillMon(m) => lab.kill(m),
            Fault::ClientFromOsd(o) => lab.cut_between(lab.client_host(), lab.osd_host(o)),
            Fault::LossyLink(a, b, p) => lab.lose_between(lab.osd_host(a), lab.osd_host(b), p),
            Fault::OneWay(a, b) => lab.cut_one_way(lab.osd_host(a), lab.osd_host(b)),
            Fault::LinkDown(o) => lab.link(lab.osd_host(o), false),
            Fault::Blackhole(a, b) => lab.blackhole(lab.osd_host(a), lab.osd_host(b)),
            Fault::OsdBootsDuringMonCut(m, o) => {
                Fault::MonMinorityCut(vec![m]).inject(lab);
                lab.restart(lab.mons + o);
            }
            Fault::MonMinorityCut(ref cut) => {
                for &m in cut {
                    for other in (0..lab.mons).filter(|x| !cut.contains(x)) {
                        lab.cut_between(m, other);
                    }
                }
            }
        }
    }

    /// The daemon this fault kills, if any (monitors first, then OSDs).
    fn killed(&self, mons: usize) -> Option<usize> {
        match *self {
            Fault::KillOsd(o) => Some(mons + o),
            Fault::KillMon(m) => Some(m),
            _ => None,
        }
    }

    /// Heal every cut and start every daemon that stopped (`killed`, or
    /// stopped on its own: see `restart_stopped`).
    fn heal(lab: &mut Lab, killed: Option<usize>) -> Vec<String> {
        for h in 0..lab.mons + OSDS + 1 {
            lab.heal(h);
            lab.link(h, true);
        }
        Fault::restart_stopped(lab, killed)
    }

    /// Start every daemon that stopped again; the ones that stopped on
    /// their own (all but `killed`), such as an OSD stopped as flapping
    /// (an operator starts it again once its network is fixed).
    fn restart_stopped(lab: &mut Lab, killed: Option<usize>) -> Vec<String> {
        let mut stopped = Vec::new();
        for i in 0..lab.mons + OSDS {
            if !lab.runs(i) {
                lab.restart(i);
                if Some(i) != killed {
                    stopped.push(lab.daemon_name(i));
                }
            }
        }
        stopped
    }
}

/// One fault's record for the report.
struct Injected {
    fault: Fault,
    at_s: f64,
    held_s: f64,
    /// Seconds from the heal until every PG was clean (`None`: not within
    /// `CLEAN_WITHIN`).
    clean_s: Option<f64>,
    /// Daemons that stopped on their own (OSDs stopped as flapping),
    /// started again as an operator would.
    stopped: Vec<String>,
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
#[ignore = "the soak runs for minutes: tools/soak.sh"]
fn soak() {
    if !hosts_or_skip() {
        return;
    }
    let minutes = env_u64("LOLIGO_SOAK_MINUTES", 10);
    let seed = env_u64("LOLIGO_SOAK_SEED", 0);
    let out = std::env::var_os("LOLIGO_SOAK_OUT").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/soak"),
        PathBuf::from,
    );
    let mons = env_u64("LOLIGO_SOAK_MONS", 3) as usize;
    assert!(mons % 2 == 1, "LOLIGO_SOAK_MONS: an odd number of monitors");
    let mut lab = Lab::start_with("ls", mons, OSDS);
    Kind::Erasure.prepare(&mut lab);
    lab.wait_clean(CLEAN_WITHIN, "the pools clean");
    Kind::Kv.prepare(&mut lab);

    let t0 = Instant::now();
    let gen = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let history: History = Arc::default();
    let mut workers = Vec::new();
    for kind in Kind::ALL {
        for c in 0..CLIENTS_PER_KIND {
            let id = workers.len() as u64 + 1;
            let mut s = lab.client_on(lab.client_host(), kind.pool());
            let client = Client {
                kind,
                id,
                registers: REGISTERS,
                gen: gen.clone(),
                stop: stop.clone(),
                history: history.clone(),
                t0,
                seed: seed * 100 + id,
            };
            workers.push((kind, c, std::thread::spawn(move || client.run(&mut s))));
        }
    }

    let mut rng = Rng::new(seed);
    let deadline = Duration::from_secs(minutes * 60);
    let mut injected = Vec::new();
    // The newest map epoch the monitors' status showed, and how often a
    // later status showed an older one (a leader that lost a commit).
    let (mut epoch_seen, mut epochs_back) = (0, 0);
    let mut i = 0;
    while t0.elapsed() < deadline {
        let fault = Fault::pick(&lab, &mut rng, i);
        i += 1;
        let at = t0.elapsed();
        fault.inject(&mut lab);
        let hold = Duration::from_millis(3_000 + rng.below(7_000));
        std::thread::sleep(hold);
        let killed = fault.killed(lab.mons);
        let mut stopped = Fault::heal(&mut lab, killed);
        let healed = Instant::now();
        let mut clean_s = None;
        while healed.elapsed() < CLEAN_WITHIN {
            stopped.extend(Fault::restart_stopped(&mut lab, None));
            if common::not_clean(&lab.dir).is_none() {
                clean_s = Some(healed.elapsed().as_secs_f64());
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        eprintln!(
            "{:>6.1} s {:?}: held {:.1} s, clean {clean_s:?} s after; stopped on their own: {stopped:?}",
            at.as_secs_f64(),
            fault,
            hold.as_secs_f64()
        );
        injected.push(Injected {
            fault,
            at_s: at.as_secs_f64(),
            held_s: hold.as_secs_f64(),
            clean_s,
            stopped,
        });
        if let Some(e) = lab.status().and_then(|v| v["osdmap"]["epoch"].as_u64()) {
            if e < epoch_seen {
                epochs_back += 1;
                eprintln!("the map went back: epoch {e} after {epoch_seen}");
            }
            epoch_seen = epoch_seen.max(e);
        }
        gen.fetch_add(1, Ordering::Relaxed);
    }
    stop.store(true, Ordering::Relaxed);
    let mut ops: BTreeMap<Kind, (u64, u64)> = BTreeMap::new();
    for (kind, _, w) in workers {
        let (done, failed) = w.join().expect("a client thread");
        let e = ops.entry(kind).or_default();
        e.0 += done;
        e.1 += failed;
    }
    Fault::heal(&mut lab, None);
    lab.wait_clean(CLEAN_WITHIN, "every PG clean at the end");
    let maps_agree = every_monitor_holds_one_map(&lab);

    let mut history = std::mem::take(&mut *history.lock().unwrap());
    let lost = registers::final_reads(&mut lab, &mut history, t0);
    let checked = registers::check(history);
    let bad = checked.bad.clone();
    let report = Report {
        minutes,
        mons,
        inject: std::env::var(loligo_proto::inject::ENV).unwrap_or_default(),
        seed,
        ops,
        injected,
        histories: checked.histories,
        bad: checked.bad,
        undecided: checked.undecided,
        lost,
        epochs_back,
        maps_agree,
    };
    std::fs::create_dir_all(&out).expect("the report's folder");
    std::fs::write(out.join("report.json"), report.json()).expect("report.json");
    std::fs::write(out.join("report.md"), report.markdown()).expect("report.md");
    eprintln!("{}", report.markdown());
    assert!(bad.is_empty(), "not linearizable: {bad:?}");
    assert_eq!(lost, 0, "acknowledged writes lost");
    assert_eq!(epochs_back, 0, "the monitors' map went back");
    assert!(maps_agree, "the monitors hold different maps at the end");
}

/// Whether every monitor, asked alone, holds the same map (same epoch,
/// same bytes) once the cluster is quiet: the map never forked. Followers
/// may lag a moment: asked again for up to 30 s.
fn every_monitor_holds_one_map(lab: &lab::Lab) -> bool {
    let t0 = Instant::now();
    loop {
        let maps = lab.mon_maps();
        let first = maps.first().cloned().flatten();
        if first.is_some() && maps.iter().all(|m| *m == first) {
            return true;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let epochs: Vec<Option<u64>> = (maps.iter())
                .map(|m| {
                    m.as_ref()
                        .and_then(|b| loligo_types::decode_map(b).ok())
                        .map(|m| m.epoch)
                })
                .collect();
            eprintln!("the monitors' maps differ: epochs {epochs:?}");
            return false;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// What the soak found.
struct Report {
    minutes: u64,
    mons: usize,
    /// The message faults every process injected (`LOLIGO_MS_INJECT`).
    inject: String,
    seed: u64,
    /// Per kind: ops answered, ops failed.
    ops: BTreeMap<Kind, (u64, u64)>,
    injected: Vec<Injected>,
    histories: usize,
    bad: Vec<String>,
    undecided: usize,
    lost: u64,
    /// Times the monitors' status showed an older map than before.
    epochs_back: u64,
    /// Whether every monitor held the same map at the end.
    maps_agree: bool,
}

impl Report {
    /// Per fault kind: (how many, the cleans' median and longest in s,
    /// how many did not get clean in time).
    fn by_fault(&self) -> BTreeMap<&'static str, (usize, f64, f64, usize)> {
        let mut cleans: BTreeMap<&'static str, (Vec<f64>, usize)> = BTreeMap::new();
        for f in &self.injected {
            let e = cleans.entry(f.fault.kind()).or_default();
            match f.clean_s {
                Some(s) => e.0.push(s),
                None => e.1 += 1,
            }
        }
        cleans
            .into_iter()
            .map(|(k, (mut v, late))| {
                v.sort_by(f64::total_cmp);
                let median = v.get(v.len() / 2).copied().unwrap_or(0.0);
                let max = v.last().copied().unwrap_or(0.0);
                (k, (v.len() + late, median, max, late))
            })
            .collect()
    }

    fn json(&self) -> String {
        let ops: serde_json::Map<String, serde_json::Value> = self
            .ops
            .iter()
            .map(|(k, (done, failed))| {
                (
                    k.name().to_string(),
                    serde_json::json!({"answered": done, "failed": failed}),
                )
            })
            .collect();
        let faults: Vec<serde_json::Value> = self
            .injected
            .iter()
            .map(|f| {
                serde_json::json!({
                    "kind": f.fault.kind(),
                    "fault": format!("{:?}", f.fault),
                    "at_s": f.at_s,
                    "held_s": f.held_s,
                    "clean_s": f.clean_s,
                    "stopped_on_their_own": f.stopped,
                })
            })
            .collect();
        let by_fault: serde_json::Map<String, serde_json::Value> = self
            .by_fault()
            .into_iter()
            .map(|(k, (n, median, max, late))| {
                (
                    k.to_string(),
                    serde_json::json!({"count": n, "clean_median_s": median, "clean_max_s": max, "not_clean_in_time": late}),
                )
            })
            .collect();
        let v = serde_json::json!({
            "minutes": self.minutes,
            "monitors": self.mons,
            "message_faults": self.inject,
            "seed": self.seed,
            "ops": ops,
            "faults_injected": self.injected.len(),
            "by_fault": by_fault,
            "faults": faults,
            "histories_checked": self.histories,
            "histories_not_linearizable": self.bad,
            "histories_undecided": self.undecided,
            "lost": self.lost,
            "map_epochs_went_back": self.epochs_back,
            "monitors_maps_agree_at_end": self.maps_agree,
        });
        serde_json::to_string_pretty(&v).unwrap_or_default()
    }

    fn markdown(&self) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "# Soak: {} min, seed {}, {} monitors\n\nMessage faults: `{}`\n\n| kind | ops answered | failed |\n|---|---|---|",
            self.minutes,
            self.seed,
            self.mons,
            if self.inject.is_empty() { "none" } else { &self.inject }
        );
        for (k, (done, failed)) in &self.ops {
            let _ = writeln!(o, "| {} | {done} | {failed} |", k.name());
        }
        let _ = writeln!(
            o,
            "\n| fault | injected | clean after (median s) | (max s) | not clean in {} s |\n|---|---|---|---|---|",
            CLEAN_WITHIN.as_secs()
        );
        for (k, (n, median, max, late)) in self.by_fault() {
            let _ = writeln!(o, "| {k} | {n} | {median:.1} | {max:.1} | {late} |");
        }
        let stopped: Vec<&String> = self.injected.iter().flat_map(|f| &f.stopped).collect();
        let _ = writeln!(
            o,
            "\nDaemons that stopped on their own (OSDs stopped as flapping) and were started again: {} {stopped:?}.",
            stopped.len()
        );
        let _ = writeln!(
            o,
            "\nRegister histories checked: {}; not linearizable: {}; undecided: {}; acknowledged writes lost: {}; map epochs gone back: {}; every monitor's map the same at the end: {}.",
            self.histories,
            self.bad.len(),
            self.undecided,
            self.lost,
            self.epochs_back,
            if self.maps_agree { "yes" } else { "no" }
        );
        o
    }
}
