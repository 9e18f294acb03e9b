//! Structure-aware fuzzing of the CRUSH text path: maps that crushtool
//! wrote (the repository's vectors), mutated line by line and token by
//! token (lines dropped, repeated or swapped; numbers replaced by extreme
//! ones; names swapped; text cut short), go through parse, compile and
//! placement. Every step must answer with a map or a typed error, never
//! a panic, a hang or an allocation the input cannot justify. Random bytes
//! rarely get past a parser's first line; mutations of real maps reach
//! the compiler and the mapper with valid-looking but hostile maps.
//!
//! Cases per run: `LOLIGO_FUZZ_CASES` (default 300; the default test run
//! stays bounded); longer runs are recorded in BENCHMARKS.md.

mod common;

use loligo_crush::{text, CompiledMap, Workspace};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn maps() -> Vec<String> {
    common::cases("crush")
        .iter()
        .map(|c| std::fs::read_to_string(c.join("map.txt")).expect("map.txt"))
        .collect()
}

/// One edit of a map's text.
#[derive(Clone, Debug)]
enum Mutation {
    DropLine(usize),
    RepeatLine(usize),
    SwapLines(usize, usize),
    /// Replace the n-th number token by one of the extremes.
    Number(usize, usize),
    /// Replace the n-th word by the m-th word.
    Word(usize, usize),
    Truncate(usize),
}

const EXTREMES: &[&str] = &[
    "0",
    "-1",
    "-2147483648",
    "2147483647",
    "4294967295",
    "4294967296",
    "18446744073709551616",
    "65535",
    "65536",
    "1000000",
    "0.00001",
    "99999.99999",
    "-0",
];

fn mutation() -> impl Strategy<Value = Mutation> {
    let i = 0usize..10_000;
    prop_oneof![
        i.clone().prop_map(Mutation::DropLine),
        i.clone().prop_map(Mutation::RepeatLine),
        (i.clone(), i.clone()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        (i.clone(), 0..EXTREMES.len()).prop_map(|(a, b)| Mutation::Number(a, b)),
        (i.clone(), i.clone()).prop_map(|(a, b)| Mutation::Word(a, b)),
        i.prop_map(Mutation::Truncate),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let n = lines.len().max(1);
    match *m {
        Mutation::DropLine(i) => {
            if !lines.is_empty() {
                lines.remove(i % n);
            }
        }
        Mutation::RepeatLine(i) => {
            if let Some(l) = lines.get(i % n).cloned() {
                lines.insert(i % n, l);
            }
        }
        Mutation::SwapLines(a, b) => {
            if !lines.is_empty() {
                lines.swap(a % n, b % n);
            }
        }
        Mutation::Number(k, e) => {
            let mut seen = 0;
            let count = text
                .split_whitespace()
                .filter(|w| w.parse::<f64>().is_ok())
                .count()
                .max(1);
            let target = k % count;
            'out: for l in lines.iter_mut() {
                let words: Vec<String> = l.split(' ').map(str::to_string).collect();
                for (wi, w) in words.iter().enumerate() {
                    if !w.is_empty() && w.parse::<f64>().is_ok() {
                        if seen == target {
                            let mut words = words.clone();
                            words[wi] = EXTREMES[e].to_string();
                            *l = words.join(" ");
                            break 'out;
                        }
                        seen += 1;
                    }
                }
            }
        }
        Mutation::Word(a, b) => {
            let words: Vec<&str> = text.split_whitespace().collect();
            if !words.is_empty() {
                let (from, to) = (words[a % words.len()], words[b % words.len()]);
                if let Some(l) = lines
                    .iter_mut()
                    .find(|l| l.split_whitespace().any(|w| w == from))
                {
                    *l = l.replacen(from, to, 1);
                }
            }
        }
        Mutation::Truncate(i) => {
            let cut = (i * 97) % text.len().max(1);
            let mut t = text.as_bytes()[..cut].to_vec();
            t.retain(|b| b.is_ascii());
            return String::from_utf8_lossy(&t).into_owned();
        }
    }
    lines.join("\n")
}

/// Parse, compile and place with a map: errors are fine, panics are not.
fn exercise(t: &str) -> (bool, bool) {
    let Ok(map) = text::parse(t) else {
        return (false, false);
    };
    let Ok(c) = CompiledMap::compile(&map) else {
        return (true, false);
    };
    let devices = usize::try_from(c.max_devices().clamp(0, 4096)).unwrap_or(0);
    let weights = vec![0x10000u32; devices];
    let mut ws = Workspace::new(&c);
    let mut out = Vec::new();
    for r in &map.rules {
        for x in 0..8u32 {
            for reps in [1usize, 3, 6] {
                let _ = c.do_rule(r.id, x, reps, &weights, None, &mut ws, &mut out);
            }
        }
    }
    // Back to text: whatever compiled must print.
    let _ = text::write(&map);
    (true, true)
}

#[test]
fn mutated_maps_are_typed_errors_or_work() {
    let maps = maps();
    let cases: u32 = std::env::var("LOLIGO_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let parsed = std::cell::Cell::new(0u32);
    let compiled = std::cell::Cell::new(0u32);
    let strategy = (0..maps.len(), proptest::collection::vec(mutation(), 1..3));
    runner
        .run(&strategy, |(i, muts)| {
            let mut t = maps[i].clone();
            for m in &muts {
                t = apply(&t, m);
            }
            let (p, c) = exercise(&t);
            parsed.set(parsed.get() + u32::from(p));
            compiled.set(compiled.get() + u32::from(c));
            Ok(())
        })
        .unwrap();
    eprintln!(
        "{cases} mutated maps: {} parsed, {} compiled and placed",
        parsed.get(),
        compiled.get()
    );
    // The mutations must reach past the parser, or this tests little.
    assert!(
        compiled.get() * 8 >= cases,
        "only {} compiled",
        compiled.get()
    );
}
