//! Differential test against Ceph's own `crushtool` on randomly generated
//! maps (every bucket algorithm, tunable profile and rule shape Loligo
//! supports). Needs `crushtool` on PATH (Debian package `ceph-base`), so it
//! is not part of the default run:
//!
//! ```text
//! cargo test -p loligo-crush --test crushtool_diff -- --ignored
//! ```

use loligo_crush::tester::{run, TestSpec};
use loligo_crush::{text, CompiledMap};
use std::fmt::Write as _;
use std::process::Command;

use loligo_testkit::Rng;

const PROFILES: [&str; 6] = [
    "legacy", "argonaut", "bobtail", "firefly", "hammer", "jewel",
];
const ALGS: [&str; 5] = ["uniform", "list", "tree", "straw", "straw2"];
const CLASS_SAFE_ALGS: [&str; 3] = ["list", "straw", "straw2"];

/// Algorithm for a rack or root bucket (never uniform: unequal children).
fn inner_alg(rng: &mut Rng, classes: bool) -> &'static str {
    if classes {
        CLASS_SAFE_ALGS[rng.below(3) as usize]
    } else {
        ALGS[1 + rng.below(4) as usize]
    }
}

/// The opening lines of a bucket, up to its items.
fn open_bucket(s: &mut String, kind: &str, name: &str, id: i64, alg: &str, class_ids: &str) {
    let _ = writeln!(
        s,
        "{kind} {name} {{\n\tid {id}{class_ids}\n\talg {alg}\n\thash 0"
    );
}

fn random_map(rng: &mut Rng) -> String {
    let mut s = String::from("# begin crush map\n");
    // Ceph cannot build class shadow trees through uniform buckets, and
    // its shadow copies of tree buckets read uninitialised memory
    // (`crush_add_tree_bucket_item` grows node_weights with realloc and
    // adds to the new slots), so a map has either device classes or
    // uniform/tree buckets.
    let classes = rng.below(2) == 0;
    let cls = |id: i64| {
        if classes {
            format!("\n\tid {} class ssd\n\tid {} class hdd", id - 1, id - 2)
        } else {
            String::new()
        }
    };
    let t = loligo_crush::map::Tunables::profile(PROFILES[rng.below(6) as usize]).unwrap();
    for (name, v) in t.named() {
        let _ = writeln!(s, "tunable {name} {v}");
    }
    let racks = 1 + rng.below(4);
    let hosts_per = 1 + rng.below(4);
    let osds_per = 1 + rng.below(5);
    s.push_str("\n# devices\n");
    let n = racks * hosts_per * osds_per;
    for d in 0..n {
        let class = match (classes, d == 0 || (d > 1 && rng.below(3) == 0)) {
            (false, _) => "",
            (true, true) => " class ssd",
            (true, false) => " class hdd",
        };
        let _ = writeln!(s, "device {d} osd.{d}{class}");
    }
    s.push_str("\n# types\ntype 0 osd\ntype 1 host\ntype 2 rack\ntype 3 root\n\n# buckets\n");
    let mut next_id = -1i64;
    let mut dev = 0;
    let mut rack_lines = Vec::new();
    for r in 0..racks {
        let mut host_lines = Vec::new();
        for h in 0..hosts_per {
            let alg = if classes {
                CLASS_SAFE_ALGS[rng.below(3) as usize]
            } else {
                ALGS[rng.below(5) as usize]
            };
            let uniform_w = 1 + rng.below(3000);
            open_bucket(
                &mut s,
                "host",
                &format!("h{r}x{h}"),
                next_id,
                alg,
                &cls(next_id),
            );
            next_id -= 3;
            for _ in 0..osds_per {
                let w = if alg == "uniform" {
                    uniform_w
                } else if rng.below(8) == 0 {
                    0
                } else {
                    1 + rng.below(5000)
                };
                let _ = writeln!(s, "\titem osd.{dev} weight {}.{:03}", w / 1000, w % 1000);
                // Now and then the same device twice (crushtool accepts it).
                if rng.below(10) == 0 {
                    let w2 = if alg == "uniform" {
                        w
                    } else {
                        1 + rng.below(5000)
                    };
                    let _ = writeln!(s, "\titem osd.{dev} weight {}.{:03}", w2 / 1000, w2 % 1000);
                }
                dev += 1;
            }
            s.push_str("}\n");
            host_lines.push(format!("h{r}x{h}"));
        }
        let alg = inner_alg(rng, classes);
        open_bucket(
            &mut s,
            "rack",
            &format!("r{r}"),
            next_id,
            alg,
            &cls(next_id),
        );
        next_id -= 3;
        for h in &host_lines {
            let _ = writeln!(s, "\titem {h}");
        }
        // Now and then a host twice.
        if rng.below(8) == 0 {
            let _ = writeln!(s, "\titem {}", host_lines[0]);
        }
        s.push_str("}\n");
        rack_lines.push(format!("r{r}"));
    }
    let alg = inner_alg(rng, classes);
    open_bucket(&mut s, "root", "default", next_id, alg, &cls(next_id));
    for r in rack_lines {
        let _ = writeln!(s, "\titem {r}");
    }
    s.push_str("}\n\n# rules\n");
    let shapes = [
        "\tstep take default\n\tstep chooseleaf firstn 0 type host\n\tstep emit\n",
        "\tstep set_chooseleaf_tries 5\n\tstep set_choose_tries 100\n\tstep take default\n\tstep chooseleaf indep 0 type host\n\tstep emit\n",
        "\tstep take default\n\tstep choose firstn 0 type rack\n\tstep chooseleaf firstn 1 type host\n\tstep emit\n",
        "\tstep take default\n\tstep choose indep 2 type rack\n\tstep choose indep 2 type osd\n\tstep emit\n",
        "\tstep set_choose_local_tries 2\n\tstep set_choose_local_fallback_tries 5\n\tstep take default\n\tstep choose firstn 0 type osd\n\tstep emit\n",
        "\tstep take default class ssd\n\tstep chooseleaf firstn 0 type host\n\tstep emit\n",
        "\tstep set_chooseleaf_vary_r 1\n\tstep set_chooseleaf_stable 1\n\tstep take default\n\tstep chooseleaf firstn -1 type rack\n\tstep emit\n",
    ];
    // Rule ids leave gaps now and then (crushtool reports them as "dne").
    let gap = rng.below(3) as usize;
    for (i, body) in shapes.iter().enumerate() {
        let id = if i == 0 { 0 } else { i + gap };
        let body = if !classes && body.contains("class") {
            &shapes[0]
        } else {
            body
        };
        let _ = write!(
            s,
            "rule r{i} {{\n\tid {id}\n\ttype replicated\n\tmin_size 1\n\tmax_size 10\n{body}}}\n"
        );
    }
    s.push_str("\n# end crush map\n");
    s
}

#[test]
#[ignore = "needs crushtool on PATH (apt-get install ceph-base)"]
fn random_maps_match_crushtool() {
    assert!(
        Command::new("crushtool").arg("--help").output().is_ok(),
        "crushtool not on PATH"
    );
    let dir = std::env::temp_dir().join(format!("loligo-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = Rng::new(0);
    for iter in 0..150 {
        let txt = random_map(&mut rng);
        let (t, b) = (dir.join("m.txt"), dir.join("m.bin"));
        std::fs::write(&t, &txt).unwrap();
        let st = Command::new("crushtool")
            .arg("-c")
            .arg(&t)
            .arg("-o")
            .arg(&b)
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "crushtool rejected map {iter}: {}\n{txt}",
            String::from_utf8_lossy(&st.stderr)
        );
        let map = CompiledMap::compile(&text::parse(&txt).unwrap()).unwrap();
        let rule_ids: Vec<i32> = map.rule_ids().collect();
        for round in 0..8 {
            // Seven rounds of one rule each, then one of every rule.
            let mut args: Vec<String> = vec!["--test".into()];
            if let Some(r) = rule_ids.get(round) {
                args.extend(["--rule".into(), r.to_string()]);
            }
            const OUTPUTS: [&str; 6] = [
                "--show-mappings",
                "--show-bad-mappings",
                "--show-statistics",
                "--show-utilization",
                "--show-utilization-all",
                "--show-choose-tries",
            ];
            args.push(
                OUTPUTS[if rng.below(2) == 0 {
                    0
                } else {
                    rng.below(6) as usize
                }]
                .into(),
            );
            args.extend(["--num-rep".into(), (1 + rng.below(6)).to_string()]);
            // Only one end of the x range: crushtool then maps 0..1023.
            match rng.below(6) {
                0 => args.extend(["--max-x".into(), "299".into()]),
                1 => args.extend(["--min-x".into(), "5".into()]),
                _ => args.extend(["--min-x".into(), "0".into(), "--max-x".into(), "299".into()]),
            }
            if rng.below(2) == 0 {
                args.extend(["--pool-id".into(), rng.below(100).to_string()]);
            }
            for _ in 0..rng.below(4) {
                let d = rng.below(map.max_devices() as u64);
                args.extend([
                    "--weight".into(),
                    d.to_string(),
                    ["0", "0.5", "0.3", "0.9"][rng.below(4) as usize].into(),
                ]);
            }
            let theirs = Command::new("crushtool")
                .arg("-i")
                .arg(&b)
                .args(&args)
                .output()
                .unwrap();
            let ours = run(&map, &TestSpec::from_args(&args).unwrap()).unwrap();
            let theirs = loligo_crush::tester::TestOutput {
                stdout: String::from_utf8_lossy(&theirs.stdout).to_string(),
                stderr: String::from_utf8_lossy(&theirs.stderr).to_string(),
            };
            if ours != theirs {
                let rule = args.get(2).cloned().unwrap_or_default();
                let (ours, theirs) = if ours.stdout != theirs.stdout {
                    (ours.stdout, theirs.stdout)
                } else {
                    (ours.stderr, theirs.stderr)
                };
                let keep = std::env::temp_dir().join("loligo-diff-failed-map.txt");
                let _ = std::fs::write(&keep, &txt);
                let first = ours.lines().zip(theirs.lines()).find(|(a, b)| a != b);
                panic!("map {iter} rule {rule} args {args:?}: first difference {first:?} (map kept in {})", keep.display());
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
