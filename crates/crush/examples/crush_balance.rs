//! The balanced-placement experiment (the ceph-devel proposal of an optimized CRUSH with a "linear" bucket, and the upmap balancer).
//! Run through `experiments/crush_balance/run.sh`; writes `results.csv`,
//! `per_osd.csv` and `RESULTS.md` into the directory given as argument.
//!
//! For each topology, pool size and method it measures the stdev and max
//! deviation of PGs per OSD, the data each OSD would hold for the proposal's
//! object counts, and the replicas moved when one OSD fails and when one
//! host is added.

use loligo_crush::balance::{
    adaptive_balance_param, distribution, pg_up_sets, upmap_balance, upmap_balance_from, Eligible,
    UpmapItems,
};
use loligo_crush::hash::{stable_mod, stable_mod_mask, str_hash_rjenkins};
use loligo_crush::map::ItemId;
use loligo_crush::placement::{OsdStates, PoolPlacement, PpsMode};
use loligo_crush::{text, CompiledMap};
use std::fmt::Write as _;
use std::path::PathBuf;

struct Topology {
    name: &'static str,
    /// Per host: CRUSH weight (thousandths) of each of its OSDs.
    hosts: Vec<Vec<u32>>,
    pg_num: u32,
}

fn map_text(hosts: &[Vec<u32>], alg: &str) -> String {
    let mut s = String::new();
    for (n, v) in [
        ("choose_local_tries", 0),
        ("choose_local_fallback_tries", 0),
        ("choose_total_tries", 50),
        ("chooseleaf_descend_once", 1),
        ("chooseleaf_vary_r", 1),
        ("chooseleaf_stable", 1),
        ("straw_calc_version", 1),
        ("allowed_bucket_algs", 54),
    ] {
        let _ = writeln!(s, "tunable {n} {v}");
    }
    let n: usize = hosts.iter().map(Vec::len).sum();
    for d in 0..n {
        let _ = writeln!(s, "device {d} osd.{d}");
    }
    s.push_str("type 0 osd\ntype 1 host\ntype 2 root\n");
    let mut d = 0;
    for (h, ws) in hosts.iter().enumerate() {
        let _ = writeln!(s, "host host{h} {{\n\tid -{}\n\talg {alg}\n\thash 0", h + 2);
        for w in ws {
            let _ = writeln!(s, "\titem osd.{d} weight {}.{:03}", w / 1000, w % 1000);
            d += 1;
        }
        s.push_str("}\n");
    }
    s.push_str("root default {\n\tid -1\n\talg straw2\n\thash 0\n");
    for h in 0..hosts.len() {
        let _ = writeln!(s, "\titem host{h}");
    }
    s.push_str("}\nrule rep {\n\tid 0\n\ttype replicated\n\tmin_size 1\n\tmax_size 10\n");
    if alg == "linear" {
        // All replicas of a PG use the same key offset in their hosts.
        s.push_str("\tstep set_chooseleaf_vary_r 0\n");
    }
    s.push_str("\tstep take default\n\tstep chooseleaf firstn 0 type host\n\tstep emit\n}\n");
    s
}

fn compile(txt: &str) -> CompiledMap {
    let map = text::parse(txt).unwrap_or_else(|e| panic!("generated map: {e}"));
    CompiledMap::compile(&map).unwrap_or_else(|e| panic!("generated map: {e}"))
}

#[derive(Clone, Copy, PartialEq)]
enum Method {
    Straw2,
    Straw2Bijection,
    LinearAdaptive,
    Upmap,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Straw2 => "straw2",
            Method::Straw2Bijection => "straw2+bijection",
            Method::LinearAdaptive => "linear+adaptive",
            Method::Upmap => "straw2+upmap",
        }
    }
}

/// One configured placement: map, pool, and (for upmap) overrides.
struct Placement {
    crush: CompiledMap,
    pool: PoolPlacement,
    upmaps: UpmapItems,
    moves: usize,
}

fn place(
    method: Method,
    hosts: &[Vec<u32>],
    pg_num: u32,
    size: u32,
    osds: &OsdStates,
    balance: Option<u32>,
) -> Placement {
    let alg = if method == Method::LinearAdaptive {
        "linear"
    } else {
        "straw2"
    };
    let crush = compile(&map_text(hosts, alg));
    let mut pool = PoolPlacement::replicated(1, pg_num, size, 0);
    if matches!(method, Method::Straw2Bijection | Method::LinearAdaptive) {
        pool.pps_mode = PpsMode::Bijection;
    }
    if method == Method::LinearAdaptive {
        pool.balance_param = match balance {
            Some(b) => b,
            None => {
                adaptive_balance_param(&crush, &pool, osds, 256)
                    .expect("adaptive search")
                    .0
            }
        };
    }
    let (upmaps, moves) = if method == Method::Upmap {
        let plan = upmap_balance(&crush, &pool, osds, 1.0, 10_000_000).expect("upmap");
        (plan.items, plan.moves)
    } else {
        (UpmapItems::new(), 0)
    };
    Placement {
        crush,
        pool,
        upmaps,
        moves,
    }
}

fn sets(p: &Placement, osds: &OsdStates) -> Vec<Vec<ItemId>> {
    pg_up_sets(&p.crush, &p.pool, osds, &p.upmaps).expect("mapping")
}

/// Replicas placed on an OSD that did not hold them before.
fn moved(before: &[Vec<ItemId>], after: &[Vec<ItemId>]) -> usize {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| a.iter().filter(|o| !b.contains(o)).count())
        .sum()
}

/// Objects per PG for `count` objects named `obj.<i>`, hashed like Ceph.
fn objects_per_pg(count: u64, pg_num: u32) -> Vec<u64> {
    let mask = stable_mod_mask(pg_num);
    let mut per = vec![0u64; pg_num as usize];
    let mut name = String::with_capacity(24);
    for i in 0..count {
        name.clear();
        let _ = write!(name, "obj.{i}");
        per[stable_mod(str_hash_rjenkins(name.as_bytes()), pg_num, mask) as usize] += 1;
    }
    per
}

/// Trials each search gets: the balance parameters the adaptive search
/// tries for linear buckets, and the pool ids (straw2's placement seeds)
/// straw2 gets to choose from.
const TRIALS: u32 = 256;
/// Independent searches per method (the medians are over these).
const SEARCHES: u64 = 16;

/// Stdev of PGs per OSD of one pool on one map.
fn stdev_of(crush: &CompiledMap, pool: &PoolPlacement, osds: &OsdStates) -> f64 {
    let sets = pg_up_sets(crush, pool, osds, &UpmapItems::new()).expect("mapping");
    let eligible = Eligible::for_rule(crush, pool.crush_rule, osds).expect("eligible");
    distribution(&sets, &eligible).stdev
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Linear+adaptive against straw2 given the same chance: each picks the
/// best of `TRIALS` candidates in sample (pg_num `pg`; linear: balance
/// parameters for its pool, straw2: pool ids, which seed its placement),
/// then keeps its choice out of sample (the pool split to 2 x pg and
/// merged to pg / 2). `SEARCHES` independent searches per method (pools
/// 1..=SEARCHES for linear; disjoint blocks of pool ids for straw2).
/// Returns CSV rows and a Markdown table's rows.
fn out_of_sample(topo: &Topology, size: u32) -> (String, String) {
    let n_osd: usize = topo.hosts.iter().map(Vec::len).sum();
    let osds = OsdStates::all_up_in(n_osd as i32);
    let straw = compile(&map_text(&topo.hosts, "straw2"));
    let linear = compile(&map_text(&topo.hosts, "linear"));
    let pg = topo.pg_num;
    let at = |base: &PoolPlacement, pg_num: u32| PoolPlacement {
        pg_num,
        pgp_num: pg_num,
        ..*base
    };
    // [in sample, pg * 2, pg / 2] per search.
    let mut rows: Vec<(&str, Vec<[f64; 3]>)> = vec![
        ("straw2 (one pool)", Vec::new()),
        ("straw2 (best of the pool ids)", Vec::new()),
        ("linear+adaptive", Vec::new()),
    ];
    for s in 0..SEARCHES {
        let eval = |crush: &CompiledMap, p: &PoolPlacement| {
            [
                stdev_of(crush, p, &osds),
                stdev_of(crush, &at(p, pg * 2), &osds),
                stdev_of(crush, &at(p, pg / 2), &osds),
            ]
        };
        let one = PoolPlacement::replicated(1 + s, pg, size, 0);
        rows[0].1.push(eval(&straw, &one));
        let first = 1 + s * u64::from(TRIALS);
        let best = (first..first + u64::from(TRIALS))
            .map(|id| {
                let p = PoolPlacement::replicated(id, pg, size, 0);
                (stdev_of(&straw, &p, &osds), id)
            })
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map_or(first, |x| x.1);
        rows[1]
            .1
            .push(eval(&straw, &PoolPlacement::replicated(best, pg, size, 0)));
        let mut lp = PoolPlacement::replicated(1 + s, pg, size, 0);
        lp.pps_mode = PpsMode::Bijection;
        lp.balance_param = adaptive_balance_param(&linear, &lp, &osds, TRIALS)
            .expect("adaptive search")
            .0;
        rows[2].1.push(eval(&linear, &lp));
    }
    let (mut csv, mut md) = (String::new(), String::new());
    for (name, v) in &rows {
        let col = |i: usize| median(v.iter().map(|x| x[i]).collect());
        let worst = |i: usize| v.iter().map(|x| x[i]).fold(0.0, f64::max);
        let _ = writeln!(
            csv,
            "{},{size},{name},{pg},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3}",
            topo.name,
            col(0),
            col(1),
            col(2),
            worst(0),
            worst(1),
            worst(2)
        );
        let _ = writeln!(
            md,
            "| {} | {size} | {name} | {:.2} ({:.2}) | {:.2} ({:.2}) | {:.2} ({:.2}) |",
            topo.name,
            col(0),
            worst(0),
            col(1),
            worst(1),
            col(2),
            worst(2)
        );
    }
    (csv, md)
}

fn main() {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "experiments/crush_balance/out".into()),
    );
    std::fs::create_dir_all(&out).expect("create output dir");
    let topologies = vec![
        Topology {
            name: "seed-4x10",
            hosts: vec![vec![1000; 10]; 4],
            pg_num: 2048,
        },
        Topology {
            name: "mixed-20x12",
            // Hosts bought in batches: 4 TB, 8 TB and 2 TB disks.
            hosts: (0..20)
                .map(|h| {
                    vec![
                        if h < 10 {
                            3638
                        } else if h < 16 {
                            7277
                        } else {
                            1819
                        };
                        12
                    ]
                })
                .collect(),
            pg_num: 4096,
        },
    ];
    // The proposal's workloads: 100M x 128 KiB with 2 replicas, 1M x 10 MiB with 3.
    let workloads = [
        (2u32, 100_000_000u64, 128u64 << 10),
        (3, 1_000_000, 10 << 20),
    ];
    let methods = [
        Method::Straw2,
        Method::Straw2Bijection,
        Method::LinearAdaptive,
        Method::Upmap,
    ];
    let mut csv = String::from("topology,size,method,stdev,rms_deviation,max_deviation,min,max,balance_param,upmap_moves,data_max_over_mean,data_stdev_pct,fail_moved,fail_minimum,add_moved,add_minimum\n");
    let mut per_osd_csv = String::from("topology,size,method,osd,pgs\n");
    let mut md = String::from("# Balanced placement: results\n\nProduced by `experiments/crush_balance/run.sh` (see README.md there). Stdev is the population standard deviation of PGs per OSD (meaningful when weights are equal); rms and max deviation compare each OSD with its weighted target, so they also judge mixed-weight clusters. Data columns use the linear-bucket proposal's workloads (size 2: 100M x 128 KiB; size 3: 1M x 10 MiB), objects hashed to PGs by name. Movement counts replicas placed on a different OSD; the minimum is what any method must move (the failed OSD's replicas; the new host's fair share).\n\n| topology | size | method | stdev | rms dev | max dev | min | max | balance param | upmap moves | fullest OSD / mean (data/weight) | data/weight stdev % | moved on 1 OSD failure (min) | moved on host add (min) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for topo in &topologies {
        let n_osd: usize = topo.hosts.iter().map(Vec::len).sum();
        for &(size, objects, obj_size) in &workloads {
            eprintln!("{} size {size}: hashing {objects} objects", topo.name);
            let per_pg = objects_per_pg(objects, topo.pg_num);
            let mut straw2_stdev = 0.0;
            for &m in &methods {
                let osds = OsdStates::all_up_in(n_osd as i32);
                let p = place(m, &topo.hosts, topo.pg_num, size, &osds, None);
                let before = sets(&p, &osds);
                let eligible = Eligible::for_rule(&p.crush, 0, &osds).expect("eligible");
                let d = distribution(&before, &eligible);
                if m == Method::Straw2 {
                    straw2_stdev = d.stdev;
                }
                // Data per OSD, relative to its CRUSH weight (how full the
                // disk is, for disks sized by weight).
                let weights: Vec<f64> =
                    topo.hosts.iter().flatten().map(|&w| f64::from(w)).collect();
                let mut bytes = vec![0f64; n_osd];
                for (ps, set) in before.iter().enumerate() {
                    for &o in set {
                        bytes[o as usize] += (per_pg[ps] * obj_size) as f64;
                    }
                }
                let fill: Vec<f64> = bytes.iter().zip(&weights).map(|(b, w)| b / w).collect();
                let mean = fill.iter().sum::<f64>() / n_osd as f64;
                let dmax = fill.iter().copied().fold(0.0, f64::max);
                let dstd =
                    (fill.iter().map(|b| (b - mean).powi(2)).sum::<f64>() / n_osd as f64).sqrt();
                // Root-mean-square deviation from the weighted targets.
                let targets = eligible.targets(d.per_osd.values().sum());
                let rms_dev = (d
                    .per_osd
                    .iter()
                    .map(|(o, &c)| (c as f64 - targets[o]).powi(2))
                    .sum::<f64>()
                    / d.per_osd.len() as f64)
                    .sqrt();
                // One OSD fails (osd.5 marked out).
                let mut failed = osds.clone();
                failed.mark_out(5).expect("osd.5");
                let fail_min = before.iter().filter(|s| s.contains(&5)).count();
                let after_fail = if m == Method::Upmap {
                    let plan =
                        upmap_balance_from(&p.crush, &p.pool, &failed, 1.0, 10_000_000, &p.upmaps)
                            .expect("upmap");
                    pg_up_sets(&p.crush, &p.pool, &failed, &plan.items).expect("mapping")
                } else {
                    sets(&p, &failed)
                };
                // One host added (same disks as host 0); linear keeps its
                // stored balance parameter.
                let mut grown = topo.hosts.clone();
                grown.push(topo.hosts[0].clone());
                let n2 = n_osd + topo.hosts[0].len();
                let osds2 = OsdStates::all_up_in(n2 as i32);
                let mut p2 = place(
                    m,
                    &grown,
                    topo.pg_num,
                    size,
                    &osds2,
                    Some(p.pool.balance_param),
                );
                let after_add = if m == Method::Upmap {
                    let plan =
                        upmap_balance_from(&p2.crush, &p2.pool, &osds2, 1.0, 10_000_000, &p.upmaps)
                            .expect("upmap");
                    p2.upmaps = plan.items;
                    sets(&p2, &osds2)
                } else {
                    p2.upmaps = UpmapItems::new();
                    sets(&p2, &osds2)
                };
                let total_w: f64 = grown.iter().flatten().map(|&w| f64::from(w)).sum();
                let new_w: f64 = topo.hosts[0].iter().map(|&w| f64::from(w)).sum();
                let add_min = (f64::from(topo.pg_num * size) * new_w / total_w).round() as usize;
                let bp = f64::from(p.pool.balance_param) / 65536.0;
                let _ = writeln!(
                    csv,
                    "{},{size},{},{:.3},{rms_dev:.3},{:.3},{},{},{bp:.4},{},{:.4},{:.2},{},{fail_min},{},{add_min}",
                    topo.name, m.name(), d.stdev, d.max_deviation, d.min, d.max, p.moves, dmax / mean, 100.0 * dstd / mean,
                    moved(&before, &after_fail), moved(&before, &after_add)
                );
                for (o, c) in &d.per_osd {
                    let _ = writeln!(per_osd_csv, "{},{size},{},{o},{c}", topo.name, m.name());
                }
                let rel = if m != Method::Straw2 && straw2_stdev > 0.0 {
                    format!(
                        " ({:+.0}%)",
                        100.0 * (d.stdev - straw2_stdev) / straw2_stdev
                    )
                } else {
                    String::new()
                };
                let _ = writeln!(
                    md,
                    "| {} | {size} | {} | {:.2}{rel} | {rms_dev:.2} | {:.2} | {} | {} | {} | {} | {:.3} | {:.1} | {} ({fail_min}) | {} ({add_min}) |",
                    topo.name, m.name(), d.stdev, d.max_deviation, d.min, d.max,
                    if m == Method::LinearAdaptive { format!("{bp:.4}") } else { "-".into() },
                    if m == Method::Upmap { p.moves.to_string() } else { "-".into() },
                    dmax / mean, 100.0 * dstd / mean, moved(&before, &after_fail), moved(&before, &after_add)
                );
            }
        }
    }
    // Straw2 given the same chance as the adaptive search, and both
    // judged out of sample, on the proposal's topology.
    let mut sample_csv = String::from(
        "topology,size,method,pg_num,stdev_in_sample,stdev_2x_pgs,stdev_half_pgs,worst_in_sample,worst_2x_pgs,worst_half_pgs\n",
    );
    let _ = write!(
        md,
        "\n## Given the same chance, in and out of sample\n\nEach search picks the best of {TRIALS} candidates by stdev at the topology's pg_num (in sample): linear+adaptive its balance parameter, straw2 its pool id (the seed of its placement). The choice is then kept when the pool is split to twice the PGs and merged to half (out of sample). Medians over {SEARCHES} independent searches (pools 1..{SEARCHES} for linear and for straw2's one pool; disjoint blocks of {TRIALS} pool ids for straw2's search), the worst in brackets.\n\n| topology | size | method | stdev in sample | 2x PGs | half the PGs |\n|---|---|---|---|---|---|\n"
    );
    for topo in topologies.iter().filter(|t| t.name == "seed-4x10") {
        for size in [2u32, 3] {
            eprintln!("{} size {size}: searches in and out of sample", topo.name);
            let (c, m) = out_of_sample(topo, size);
            sample_csv.push_str(&c);
            md.push_str(&m);
        }
    }
    std::fs::write(out.join("sample.csv"), sample_csv).expect("write sample.csv");
    std::fs::write(out.join("results.csv"), csv).expect("write results.csv");
    std::fs::write(out.join("per_osd.csv"), per_osd_csv).expect("write per_osd.csv");
    std::fs::write(out.join("RESULTS.md"), md).expect("write RESULTS.md");
    eprintln!("wrote {}", out.display());
}
