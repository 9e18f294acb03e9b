//! Every case under `testdata/ceph/crush` must reproduce crushtool's
//! output byte for byte, and every map must round-trip through the text
//! format unchanged.

mod common;

use loligo_crush::tester::{run, TestSpec};
use loligo_crush::{text, CompiledMap};

fn load(case: &std::path::Path) -> (String, CompiledMap) {
    let txt = std::fs::read_to_string(case.join("map.txt")).expect("map.txt");
    let map = text::parse(&txt).unwrap_or_else(|e| panic!("{}: {e}", case.display()));
    let compiled = CompiledMap::compile(&map).unwrap_or_else(|e| panic!("{}: {e}", case.display()));
    (txt, compiled)
}

#[test]
fn mappings_match_crushtool() {
    let mut failures = Vec::new();
    for case in common::cases("crush") {
        let (_, map) = load(&case);
        let args = std::fs::read_to_string(case.join("args")).expect("args");
        let expected = std::fs::read_to_string(case.join("mappings.txt")).expect("mappings");
        let mut got = String::new();
        for line in args.lines().filter(|l| !l.trim().is_empty()) {
            let words: Vec<&str> = line.split_whitespace().collect();
            let spec = TestSpec::from_args(&words).expect("args parse");
            got.push_str(&run(&map, &spec).expect("run").stdout);
        }
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        if got != expected {
            let (gl, el): (Vec<&str>, Vec<&str>) =
                (got.lines().collect(), expected.lines().collect());
            let first = gl.iter().zip(&el).position(|(a, b)| a != b);
            let bad = gl.iter().zip(&el).filter(|(a, b)| a != b).count();
            failures.push(format!(
                "{name}: {bad} of {} lines differ (got {} lines); first at {:?}: got {:?} want {:?}",
                el.len(),
                gl.len(),
                first,
                first.map(|i| gl[i]),
                first.map(|i| el[i])
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn text_round_trip_is_lossless() {
    for case in common::cases("crush") {
        let (txt, map) = load(&case);
        let out = text::write(map.source());
        if out != txt {
            let first = out.lines().zip(txt.lines()).position(|(a, b)| a != b);
            panic!(
                "{}: round trip differs at line {:?}: got {:?} want {:?}",
                case.display(),
                first,
                first.and_then(|i| out.lines().nth(i)),
                first.and_then(|i| txt.lines().nth(i))
            );
        }
        // And the JSON form round-trips to the same map.
        let json = serde_json::to_string(map.source()).expect("json");
        let back: loligo_crush::CrushMap = serde_json::from_str(&json).expect("json back");
        assert_eq!(&back, map.source());
    }
}

/// Buckets (shadow trees included), exact weights and rules agree with
/// crushtool's own JSON dump of the compiled binary map.
#[test]
fn compiled_map_matches_crushtool_dump() {
    for case in common::cases("crush") {
        let (_, map) = load(&case);
        let dump: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(case.join("map.json")).expect("map.json"),
        )
        .expect("json");
        let ours = map.bucket_summaries();
        let theirs = dump["buckets"].as_array().expect("buckets");
        assert_eq!(ours.len(), theirs.len(), "{}: bucket count", case.display());
        for tb in theirs {
            let id = tb["id"].as_i64().unwrap() as i32;
            let ob = ours
                .iter()
                .find(|b| b.id == id)
                .unwrap_or_else(|| panic!("{}: missing bucket {id}", case.display()));
            assert_eq!(ob.name, tb["name"].as_str().unwrap(), "{}", case.display());
            assert_eq!(
                i64::from(ob.weight),
                tb["weight"].as_i64().unwrap(),
                "{} bucket {id}",
                case.display()
            );
            assert_eq!(ob.alg.name(), tb["alg"].as_str().unwrap());
            let titems: Vec<(i32, u32)> = tb["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| {
                    (
                        i["id"].as_i64().unwrap() as i32,
                        i["weight"].as_i64().unwrap() as u32,
                    )
                })
                .collect();
            assert_eq!(ob.items, titems, "{} bucket {id} items", case.display());
        }
        let t = &dump["tunables"];
        let ours = map.tunables();
        for (name, v) in ours.named() {
            assert_eq!(
                i64::from(v),
                t[name].as_i64().unwrap(),
                "{}: tunable {name}",
                case.display()
            );
        }
    }
}
