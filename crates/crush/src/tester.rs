//! `crushtool --test` semantics: run a range of inputs through rules and
//! report mappings, bad mappings, utilization and statistics in
//! crushtool's exact line formats.

use crate::compiled::CompiledMap;
use crate::error::{CrushError, Result};
use crate::hash::hash32_2;
use crate::map::Step;
use crate::mapper::{Workspace, ITEM_NONE, MAX_NUM_REP};
use crate::placement::format_osds;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Largest input range one run may cover (bounds run time and output).
pub const MAX_INPUTS: u64 = 1 << 32;

/// What to test and what to print (crushtool's `--test` options).
#[derive(Clone, Debug, Default)]
pub struct TestSpec {
    /// Only this rule (default: every rule).
    pub rule: Option<i32>,
    /// Replica counts; `None` means each rule's min_size..=max_size.
    pub num_rep: Option<(usize, usize)>,
    pub min_x: u32,
    pub max_x: u32,
    /// Hash every x with this pool id first (`--pool-id`).
    pub pool_id: Option<u32>,
    /// Reweight overrides (`--weight DEV W`), as 16.16.
    pub weights: BTreeMap<i32, u32>,
    pub show_mappings: bool,
    pub show_bad_mappings: bool,
    pub show_utilization: bool,
    pub show_utilization_all: bool,
    pub show_statistics: bool,
    /// Print the histogram of retries per choice (`--show-choose-tries`).
    pub show_choose_tries: bool,
    /// Tunable overrides (`--set-choose-total-tries 50` ...), applied to
    /// the map before the test.
    pub tunables: Vec<(String, u32)>,
}

/// crushtool's tunable flags and the tunable each sets.
const TUNABLE_FLAGS: [(&str, &str); 8] = [
    ("--set-choose-local-tries", "choose_local_tries"),
    (
        "--set-choose-local-fallback-tries",
        "choose_local_fallback_tries",
    ),
    ("--set-choose-total-tries", "choose_total_tries"),
    ("--set-chooseleaf-descend-once", "chooseleaf_descend_once"),
    ("--set-chooseleaf-vary-r", "chooseleaf_vary_r"),
    ("--set-chooseleaf-stable", "chooseleaf_stable"),
    ("--set-straw-calc-version", "straw_calc_version"),
    ("--set-allowed-bucket-algs", "allowed_bucket_algs"),
];

impl TestSpec {
    /// Parse crushtool `--test` arguments (the part after `-i MAP`).
    pub fn from_args<S: AsRef<str>>(args: &[S]) -> Result<TestSpec> {
        let bad = |m: String| CrushError::Placement(m);
        let mut spec = TestSpec {
            max_x: 1023,
            ..TestSpec::default()
        };
        let mut min_rep: Option<usize> = None;
        let mut max_rep: Option<usize> = None;
        let mut min_x: Option<u32> = None;
        let mut max_x: Option<u32> = None;
        let mut it = args.iter().map(|s| s.as_ref());
        fn val<'a, T: std::str::FromStr>(
            it: &mut impl Iterator<Item = &'a str>,
            flag: &str,
        ) -> Result<T> {
            let v = it
                .next()
                .ok_or_else(|| CrushError::Placement(format!("{flag} needs a value")))?;
            v.parse::<T>()
                .map_err(|_| CrushError::Placement(format!("{flag}: bad value '{v}'")))
        }
        while let Some(a) = it.next() {
            match a {
                "--test" => {}
                "--show-mappings" => spec.show_mappings = true,
                "--show-bad-mappings" => spec.show_bad_mappings = true,
                "--show-utilization" => spec.show_utilization = true,
                "--show-utilization-all" => spec.show_utilization_all = true,
                "--show-statistics" => spec.show_statistics = true,
                "--show-choose-tries" => spec.show_choose_tries = true,
                "--rule" | "--ruleset" => spec.rule = Some(val(&mut it, a)?),
                "--num-rep" | "--num_rep" => {
                    let n: usize = val(&mut it, a)?;
                    min_rep = Some(n);
                    max_rep = Some(n);
                }
                "--min-rep" | "--min_rep" => min_rep = Some(val(&mut it, a)?),
                "--max-rep" | "--max_rep" => max_rep = Some(val(&mut it, a)?),
                "--min-x" | "--min_x" => min_x = Some(val(&mut it, a)?),
                "--max-x" | "--max_x" => max_x = Some(val(&mut it, a)?),
                "--x" => {
                    let x: u32 = val(&mut it, a)?;
                    min_x = Some(x);
                    max_x = Some(x);
                }
                "--pool-id" | "--pool_id" => {
                    let p: i64 = val(&mut it, a)?;
                    spec.pool_id = (p >= 0).then_some(p as u32);
                }
                "--weight" => {
                    let d: i32 = val(&mut it, a)?;
                    let w: String = val(&mut it, a)?;
                    let w = parse_reweight(&w)
                        .ok_or_else(|| bad(format!("--weight {d}: bad weight '{w}'")))?;
                    spec.weights.insert(d, w);
                }
                other => match TUNABLE_FLAGS.iter().find(|(f, _)| *f == other) {
                    Some((_, name)) => {
                        let v: u32 = val(&mut it, a)?;
                        spec.tunables.push((name.to_string(), v));
                    }
                    None => return Err(bad(format!("unknown test argument '{other}'"))),
                },
            }
        }
        // As crushtool: the range counts only when both ends are given;
        // otherwise it is 0..1023.
        if let (Some(lo), Some(hi)) = (min_x, max_x) {
            spec.min_x = lo;
            spec.max_x = hi;
        }
        spec.num_rep = match (min_rep, max_rep) {
            (None, None) => None,
            (a, b) => {
                let lo = a.or(b).unwrap_or(1);
                let hi = b.or(a).unwrap_or(lo);
                if lo > hi {
                    return Err(bad(format!("min-rep {lo} is greater than max-rep {hi}")));
                }
                Some((lo, hi))
            }
        };
        if let Some((lo, hi)) = spec.num_rep {
            if lo == 0 || hi > MAX_NUM_REP {
                return Err(CrushError::BadNumRep {
                    got: if lo == 0 { 0 } else { hi as i64 },
                    max: MAX_NUM_REP,
                });
            }
        }
        Ok(spec)
    }
}

/// Convert a `--weight` value as crushtool does: float, times 0x10000,
/// truncated, clamped to `[0, 0x10000]`.
pub fn parse_reweight(s: &str) -> Option<u32> {
    let f: f32 = s.parse().ok()?;
    if !f.is_finite() {
        return None;
    }
    let w = (f * 65536.0f32) as i64;
    Some(w.clamp(0, 0x10000) as u32)
}

/// The device weight vector crushtool uses: 0x10000 for every declared
/// device, 0 for holes, then the overrides.
pub fn weight_vector(map: &CompiledMap, overrides: &BTreeMap<i32, u32>) -> Result<Vec<u32>> {
    let n = map.max_devices().max(0) as usize;
    let mut w: Vec<u32> = (0..n as i32)
        .map(|d| if map.device_exists(d) { 0x10000 } else { 0 })
        .collect();
    for (&d, &v) in overrides {
        if d < 0 || d as usize >= n {
            return Err(CrushError::Placement(format!(
                "--weight: device {d} does not exist (max_devices {n})"
            )));
        }
        w[d as usize] = v;
    }
    Ok(w)
}

/// Ceph's `get_maximum_affected_by_rule`, used only for "expected" counts.
fn max_affected_by_rule(map: &CompiledMap, rule: i32) -> i64 {
    let src = map.source();
    let Some(r) = src.rule(rule) else { return 0 };
    let mut affected: Vec<i32> = Vec::new();
    let mut repl: BTreeMap<i32, i64> = BTreeMap::new();
    for s in &r.steps {
        // Ceph counts every step with op >= 2 other than emit; the set_*
        // steps carry type 0 there.
        let (n, t) = match s {
            Step::Take { .. } | Step::Emit => continue,
            Step::Choose { count, type_id, .. } => (i64::from(*count), *type_id),
            Step::SetChooseTries(n)
            | Step::SetChooseleafTries(n)
            | Step::SetChooseLocalTries(n)
            | Step::SetChooseLocalFallbackTries(n)
            | Step::SetChooseleafVaryR(n)
            | Step::SetChooseleafStable(n) => (i64::from(*n), 0),
        };
        affected.push(t);
        repl.insert(t, n);
    }
    let buckets = map.bucket_summaries();
    let mut max_of_type: BTreeMap<i32, i64> = BTreeMap::new();
    for t in &affected {
        let c = buckets.iter().filter(|b| b.type_id == *t).count() as i64;
        *max_of_type.entry(*t).or_insert(0) += c;
    }
    for t in &affected {
        let rr = repl.get(t).copied().unwrap_or(0);
        let m = max_of_type.entry(*t).or_insert(0);
        if rr > 0 && rr < *m {
            *m = rr;
        }
    }
    let mut max_aff = ceph_max_buckets(map).max(i64::from(map.max_devices()));
    for t in &affected {
        let m = max_of_type.get(t).copied().unwrap_or(0);
        if m > 0 && m < max_aff {
            max_aff = m;
        }
    }
    max_aff
}

/// The size of Ceph's bucket array for this map: its builder grows the
/// array from 8 entries by doubling until the lowest bucket id fits, so
/// that is what crushtool's "expected" counts see, not the bucket count.
fn ceph_max_buckets(map: &CompiledMap) -> i64 {
    let Some(highest) = map
        .bucket_summaries()
        .iter()
        .map(|b| -1 - i64::from(b.id))
        .max()
    else {
        return 0;
    };
    let mut size = 8i64;
    while size <= highest {
        size *= 2;
    }
    size
}

/// What a test prints: crushtool writes some lines to standard error.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TestOutput {
    pub stdout: String,
    pub stderr: String,
}

/// Format a float like C++ `ostream << float` (6 significant digits, %g).
pub fn format_g(v: f32) -> String {
    let v = f64::from(v);
    if v == 0.0 {
        return "0".into();
    }
    let exp = v.abs().log10().floor() as i32;
    if !(-5..6).contains(&exp) {
        let s = format!("{:.5e}", v);
        // Rust prints 1.23450e7; C prints 1.2345e+07.
        let (mant, e) = s.split_once('e').unwrap_or((&s, "0"));
        let mant = trim_zeros(mant);
        let e: i32 = e.parse().unwrap_or(0);
        return format!("{mant}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let decimals = (5 - exp).max(0) as usize;
    trim_zeros(&format!("{:.*}", decimals, v)).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Run the test and return crushtool's output.
pub fn run(map: &CompiledMap, spec: &TestSpec) -> Result<TestOutput> {
    if spec.min_x > spec.max_x {
        return Err(CrushError::Placement(format!(
            "min-x {} is greater than max-x {}",
            spec.min_x, spec.max_x
        )));
    }
    let weights = weight_vector(map, &spec.weights)?;
    // Every rule id up to the largest (crushtool says "dne" for gaps).
    let rules: Vec<i32> = match spec.rule {
        Some(r) => {
            if !map.has_rule(r) {
                return Err(CrushError::UnknownRule(r));
            }
            vec![r]
        }
        None => (0..=map.rule_ids().max().unwrap_or(-1)).collect(),
    };
    let args = map.choose_args_for(0);
    let mut ws = Workspace::new(map);
    let mut out = String::new();
    let mut err = String::new();
    let mut result = Vec::with_capacity(MAX_NUM_REP);
    if spec.show_choose_tries {
        ws.start_choose_profile(map.source().tunables.choose_total_tries as usize);
    }
    // crushtool turns statistics on for either utilization flag.
    let statistics = spec.show_statistics || spec.show_utilization || spec.show_utilization_all;
    if spec.show_utilization_all {
        let hex: Vec<String> = weights.iter().map(|w| format!("{w:x}")).collect();
        let _ = writeln!(err, "devices weights (hex): [{}]", hex.join(","));
    }
    let num_objects = u64::from(spec.max_x - spec.min_x) + 1;
    for r in rules {
        let Some(rule) = map.source().rule(r) else {
            if statistics {
                let _ = writeln!(out, "rule {r} dne");
            }
            continue;
        };
        let (minr, maxr) = match spec.num_rep {
            Some(v) => v,
            None => (rule.min_size.max(0) as usize, rule.max_size.max(0) as usize),
        };
        if statistics {
            let _ = writeln!(
                out,
                "rule {r} ({}), x = {}..{}, numrep = {minr}..{maxr}",
                rule.name, spec.min_x, spec.max_x
            );
        }
        for nr in minr..=maxr {
            if nr == 0 || nr > MAX_NUM_REP {
                return Err(CrushError::BadNumRep {
                    got: nr as i64,
                    max: MAX_NUM_REP,
                });
            }
            let total_weight: i64 = weights.iter().map(|&w| i64::from(w)).sum();
            if total_weight == 0 {
                continue;
            }
            let mut per = vec![0u64; weights.len()];
            let mut sizes: BTreeMap<usize, u64> = BTreeMap::new();
            for x in spec.min_x..=spec.max_x {
                let real_x = match spec.pool_id {
                    Some(p) => hash32_2(x, p),
                    None => x,
                };
                map.do_rule(r, real_x, nr, &weights, args, &mut ws, &mut result)?;
                if spec.show_mappings {
                    let _ = writeln!(out, "CRUSH rule {r} x {x} {}", format_osds(&result));
                }
                if spec.show_bad_mappings && (result.len() != nr || result.contains(&ITEM_NONE)) {
                    let _ = writeln!(
                        out,
                        "bad mapping rule {r} x {x} num_rep {nr} result {}",
                        format_osds(&result)
                    );
                }
                *sizes.entry(result.len()).or_insert(0) += 1;
                for &o in &result {
                    if o != ITEM_NONE && o >= 0 && (o as usize) < per.len() {
                        per[o as usize] += 1;
                    }
                }
            }
            if statistics {
                for (size, n) in &sizes {
                    let _ = writeln!(
                        out,
                        "rule {r} ({}) num_rep {nr} result size == {size}:\t{n}/{num_objects}",
                        rule.name
                    );
                }
                let max_aff = max_affected_by_rule(map, r);
                let expected_objects = (nr as i64).min(max_aff) as f32 * num_objects as f32;
                for (i, p) in per.iter().enumerate() {
                    let prop = weights[i] as f32 / total_weight as f32;
                    let expected = prop * expected_objects;
                    let line = format!(
                        "  device {i}:\t\t stored : {p}\t expected : {}",
                        format_g(expected)
                    );
                    if spec.show_utilization {
                        if expected > 0.0 && *p > 0 {
                            let _ = writeln!(out, "{line}");
                        }
                    } else if spec.show_utilization_all {
                        let _ = writeln!(out, "{line}");
                    }
                }
            }
        }
    }
    if let Some(h) = ws.choose_profile() {
        for (i, n) in h.iter().enumerate() {
            let _ = writeln!(out, "{i:>2}: {n:>9}");
        }
    }
    Ok(TestOutput {
        stdout: out,
        stderr: err,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reweight_parsing_matches_crushtool() {
        assert_eq!(parse_reweight("0"), Some(0));
        assert_eq!(parse_reweight("1"), Some(0x10000));
        assert_eq!(parse_reweight("0.5"), Some(0x8000));
        assert_eq!(parse_reweight("0.3"), Some(19660));
        assert_eq!(parse_reweight("0.8"), Some(52428));
        assert_eq!(parse_reweight("7"), Some(0x10000));
        assert_eq!(parse_reweight("-1"), Some(0));
        assert_eq!(parse_reweight("x"), None);
    }

    #[test]
    fn g_format_matches_iostream() {
        assert_eq!(format_g(10.0), "10");
        assert_eq!(format_g(3.5), "3.5");
        assert_eq!(format_g(341.33334), "341.333");
        assert_eq!(format_g(1_234_567.0), "1.23457e+06");
        assert_eq!(format_g(0.0), "0");
    }

    /// Three hosts of one device each; rules 0 and 2 (no rule 1).
    fn gap_map() -> CompiledMap {
        let mut t = String::from("tunable choose_total_tries 50\n");
        for d in 0..3 {
            t += &format!("device {d} osd.{d}\n");
        }
        t += "type 0 osd\ntype 1 host\ntype 2 root\n";
        for h in 0..3 {
            t += &format!(
                "host h{h} {{\n id -{}\n alg straw2\n hash 0\n item osd.{h} weight 1.000\n}}\n",
                h + 1
            );
        }
        t += "root default {\n id -4\n alg straw2\n hash 0\n item h0\n item h1\n item h2\n}\n";
        for (id, step) in [
            (0, "chooseleaf firstn 0 type host"),
            (2, "choose firstn 0 type osd"),
        ] {
            t += &format!(
                "rule r{id} {{\n id {id}\n type replicated\n min_size 1\n max_size 10\n step take default\n step {step}\n step emit\n}}\n"
            );
        }
        CompiledMap::compile(&crate::text::parse(&t).unwrap()).unwrap()
    }

    #[test]
    fn one_end_of_the_x_range_is_ignored_as_crushtool_does() {
        let s = TestSpec::from_args(&["--max-x", "5"]).unwrap();
        assert_eq!((s.min_x, s.max_x), (0, 1023));
        let s = TestSpec::from_args(&["--min-x", "3"]).unwrap();
        assert_eq!((s.min_x, s.max_x), (0, 1023));
        let s = TestSpec::from_args(&["--min-x", "3", "--max-x", "5"]).unwrap();
        assert_eq!((s.min_x, s.max_x), (3, 5));
        let s = TestSpec::from_args(&["--x", "7"]).unwrap();
        assert_eq!((s.min_x, s.max_x), (7, 7));
    }

    #[test]
    fn gaps_in_rule_ids_weights_on_stderr_and_choose_tries() {
        let map = gap_map();
        let args = ["--show-utilization-all", "--num-rep", "5", "--x", "1"];
        let out = run(&map, &TestSpec::from_args(&args).unwrap()).unwrap();
        assert!(
            out.stdout.contains("\nrule 1 dne\nrule 2 (r2)"),
            "{}",
            out.stdout
        );
        assert_eq!(out.stderr, "devices weights (hex): [10000,10000,10000]\n");
        // Rule 2 chooses 5 of 3 devices; crushtool's expectation caps the
        // replicas at its bucket array size (8), not at the devices.
        assert!(
            out.stdout.contains("stored : 1\t expected : 1.66667"),
            "{}",
            out.stdout
        );
        let args = ["--show-choose-tries", "--rule", "0", "--num-rep", "3"];
        let out = run(&map, &TestSpec::from_args(&args).unwrap()).unwrap();
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(lines.len(), 50, "one line per possible retry count");
        assert!(lines[0].starts_with(" 0: "), "{}", lines[0]);
        let counted: u64 = lines
            .iter()
            .map(|l| l.split(':').nth(1).unwrap().trim().parse::<u64>().unwrap())
            .sum();
        // Each of 1024 inputs places 3 hosts, each with a leaf inside.
        assert_eq!(counted, 1024 * 3 * 2);
    }
}
