//! `cargo bench -p loligo-ec`: the numbers BENCHMARKS.md records, measured
//! side by side in one run.
//!
//! 1. The GF(2^8) multiply-XOR kernel (every backend this CPU has) next to
//!    `memcpy` of the same size, the physical limit.
//! 2. Reed-Solomon encode (8+3, 4+2, 10+4) with 64 KiB and 1 MiB chunks on every
//!    backend this CPU has, each against klauspost/reedsolomon (Go, one
//!    goroutine) limited to the same instruction sets, when `go` is
//!    installed; the peer is built from `benches/peer` (fetched by the Go
//!    module proxy).
//! 3. RS and Zigzag encode / single-failure decode for every configuration
//!    of Liram's Table 5.1 (Zigzag thesis), with 4 MiB and 64 MiB objects.
//!
//! `LOLIGO_BENCH_SECONDS` sets the time per measurement (default 0.2);
//! `LOLIGO_BENCH_ONLY=kernels|klauspost|table` runs one section;
//! `LOLIGO_EC_L1_WAYS=N` sets the L1 ways the kernels assume when they
//! cut crowded regions into smaller blocks (64: never cut).

use loligo_ec::code::ErasureCode;
use loligo_ec::kernel::{dot_prod_with, with_backend, Backend, Mode};
use loligo_ec::linear::LinearCode;
use loligo_ec::speed::{filler, measure, measure_encode, time_per_call, versus_klauspost};
use loligo_ec::zigzag::{Construction, Zigzag};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Alternating rounds of the comparison with klauspost/reedsolomon.
const ROUNDS: usize = 5;

/// One round of Loligo's side of [`vs_klauspost`]: this program again,
/// as a new process (see [`CHILD_ENV`]).
fn encode_in_child(k: usize, m: usize, chunk: usize, b: Backend, secs: f64) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .env(CHILD_ENV, format!("{k},{m},{chunk},{},{secs}", b.name()))
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .parse()
        .map_err(|_| format!("unreadable child answer {text:?}"))
}

/// The child's side of [`encode_in_child`].
fn encode_round(spec: &str) -> Result<f64, String> {
    let f: Vec<&str> = spec.split(',').collect();
    let [k, m, chunk, backend, secs] = f.as_slice() else {
        return Err("expected K,M,CHUNK,BACKEND,SECONDS".into());
    };
    let num = |v: &str| v.parse::<usize>().map_err(|e| format!("{v}: {e}"));
    let (k, m, chunk) = (num(k)?, num(m)?, num(chunk)?);
    let secs: f64 = secs.parse().map_err(|e| format!("{secs}: {e}"))?;
    let b = Backend::from_name(backend).ok_or_else(|| format!("unknown backend {backend}"))?;
    let rs = LinearCode::reed_solomon(k, m).map_err(|e| e.to_string())?;
    with_backend(b, || {
        measure_encode(&rs, k * chunk, Duration::from_secs_f64(secs))
    })
    .ok_or_else(|| format!("backend {backend} unavailable"))?
    .map_err(|e| e.to_string())
}

const TABLE_5_1: [(usize, usize, usize); 22] = [
    (6, 2, 1),
    (6, 2, 2),
    (6, 2, 3),
    (6, 3, 1),
    (6, 3, 2),
    (6, 3, 3),
    (8, 2, 1),
    (8, 2, 2),
    (8, 2, 3),
    (8, 3, 2),
    (8, 3, 3),
    (8, 3, 4),
    (8, 4, 2),
    (8, 4, 3),
    (8, 4, 4),
    (10, 3, 2),
    (10, 3, 3),
    (10, 3, 4),
    (10, 3, 5),
    (10, 4, 3),
    (10, 4, 4),
    (10, 4, 5),
];

/// Set in a child process of [`vs_klauspost`]: `K,M,CHUNK,BACKEND,SECONDS`,
/// one RS encode measurement, printed as a bare GB/s number.
const CHILD_ENV: &str = "LOLIGO_BENCH_ENCODE_ROUND";

fn main() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        match encode_round(&spec) {
            Ok(gbps) => println!("{gbps}"),
            Err(e) => {
                eprintln!("{CHILD_ENV}={spec}: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    // `cargo test --benches` runs this with --bench absent: stay quick.
    if !std::env::args().any(|a| a == "--bench") {
        println!("ec bench: run with `cargo bench -p loligo-ec`");
        return;
    }
    let secs: f64 = std::env::var("LOLIGO_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.2);
    let budget = Duration::from_secs_f64(secs);
    println!(
        "# loligo-ec benchmarks (one thread, {secs} s per measurement, best backend: {})",
        Backend::detect().name()
    );
    // `LOLIGO_BENCH_ONLY=kernels|klauspost|table` runs one section.
    let only = std::env::var("LOLIGO_BENCH_ONLY").ok();
    let run = |name: &str| only.as_deref().is_none_or(|o| o == name);
    if run("kernels") {
        kernels(budget);
    }
    if run("klauspost") {
        vs_klauspost(budget);
    }
    if run("table") {
        table(budget);
    }
}

fn gbps(bytes: usize, secs: f64) -> f64 {
    bytes as f64 / secs / 1e9
}

fn kernels(budget: Duration) {
    println!("\n## GF(2^8) multiply-XOR (dst ^= c * src) vs memcpy");
    println!("| size | memcpy GB/s | backend | mul-xor GB/s | ratio to memcpy |");
    println!("|---|---|---|---|---|");
    for size in [1usize << 20, 64 << 20] {
        let src = filler(size);
        let mut dst = vec![0u8; size];
        let copy = time_per_call(budget, || {
            dst.copy_from_slice(std::hint::black_box(&src));
            Ok(())
        })
        .unwrap_or(f64::NAN);
        for &b in Backend::available() {
            let t = time_per_call(budget, || {
                dot_prod_with(b, &[0x53], &[&src], &mut [&mut dst], Mode::Xor);
                Ok(())
            })
            .unwrap_or(f64::NAN);
            println!(
                "| {} MiB | {:.2} | {} | {:.2} | {:.2} |",
                size >> 20,
                gbps(size, copy),
                b.name(),
                gbps(size, t),
                copy / t
            );
        }
    }
}

/// Pin this process to the CPU it runs on, so the rounds it starts (which
/// inherit the mask) run on one core: unpinned, the scheduler moving the
/// Go peer between CPUs moved its speed by a fifth between rounds
/// (BENCHMARKS.md). `None` where the system refuses.
fn pin_to_this_cpu() -> Option<usize> {
    use nix::sched::{sched_getcpu, sched_setaffinity, CpuSet};
    let cpu = sched_getcpu().ok()?;
    let mut set = CpuSet::new();
    set.set(cpu).ok()?;
    sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).ok()?;
    Some(cpu)
}

/// Build the klauspost peer (`benches/peer`) with `go`; `None` (and why,
/// printed) if it cannot be built here.
fn build_peer() -> Option<PathBuf> {
    let peer_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/peer");
    let peer_bin = std::env::temp_dir().join(format!("loligo-ec-peer-{}", std::process::id()));
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&peer_bin)
        .arg(".")
        .current_dir(&peer_dir)
        .output();
    match built {
        Ok(out) if out.status.success() => Some(peer_bin),
        Ok(out) => {
            println!(
                "(klauspost peer did not build: {})",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            None
        }
        Err(e) => {
            println!("(klauspost peer skipped: go not runnable: {e})");
            None
        }
    }
}

/// Reed-Solomon encode with 64 KiB and 1 MiB chunks on every backend this CPU has,
/// each against klauspost/reedsolomon limited to the same instruction
/// sets (if Go is here), in [`ROUNDS`] alternating rounds, each side's
/// round a new process (see [`versus_klauspost`]).
fn vs_klauspost(budget: Duration) {
    println!("\n## Reed-Solomon encode per chunk size and backend (GB/s of data)");
    if let Some(cpu) = pin_to_this_cpu() {
        println!("(this bench and both sides' rounds run on CPU {cpu})");
    }
    let peer = build_peer();
    let secs = budget.as_secs_f64().max(0.5);
    println!("| code | chunk | backend | loligo | klauspost (same instruction sets) | ratio |");
    println!("|---|---|---|---|---|---|");
    for (k, m) in [(8, 3), (4, 2), (10, 4)] {
        let rs = LinearCode::reed_solomon(k, m).expect("valid rs");
        // 64 KiB chunks stay in cache and show the kernels; 1 MiB chunks
        // are bound by memory on most machines. The scalar kernels are
        // slow: the small chunks only.
        for chunk in [64usize << 10, 1 << 20] {
            for &b in Backend::available() {
                if b == Backend::Scalar && chunk > 64 << 10 {
                    continue;
                }
                let row = peer.as_ref().map(|p| {
                    versus_klauspost(p, (k, m, chunk), secs, b, ROUNDS, || {
                        encode_in_child(k, m, chunk, b, secs)
                    })
                });
                let label = format!("RS {k}+{m} | {} KiB | {}", chunk >> 10, b.name());
                match row {
                    Some(Ok((ours, theirs))) => {
                        println!(
                            "| {label} | {ours:.2} | {theirs:.2} | {:.2} |",
                            ours / theirs
                        )
                    }
                    Some(Err(e)) => println!("| {label} | - | ({e}) | - |"),
                    None => {
                        let ours = with_backend(b, || measure_encode(&rs, k * chunk, budget))
                            .and_then(|t| t.ok())
                            .unwrap_or(0.0);
                        println!("| {label} | {ours:.2} | - | - |");
                    }
                }
            }
        }
    }
    if let Some(p) = peer {
        let _ = std::fs::remove_file(p);
    }
}

fn table(budget: Duration) {
    for size in [4usize << 20, 64 << 20] {
        println!(
            "\n## Table 5.1 configurations, {} MiB objects (GB/s of object data)",
            size >> 20
        );
        println!("| code | rows | encode | decode (1 data chunk lost) | encode / RS(k,m) | decode / RS(k,m) |");
        println!("|---|---|---|---|---|---|");
        let mut last_rs: Option<((usize, usize), f64, f64)> = None;
        let mut rs_enc: std::collections::BTreeMap<(usize, usize), f64> = Default::default();
        let mut zz82: Vec<(usize, f64, f64)> = Vec::new();
        for &(k, r, s) in &TABLE_5_1 {
            if last_rs.map(|x| x.0) != Some((k, r)) {
                let rs = LinearCode::reed_solomon(k, r).expect("valid rs");
                let t = measure(&rs, size, budget).expect("rs measures");
                println!(
                    "| {} | 1 | {:.2} | {:.2} | 1.00 | 1.00 |",
                    rs.profile(),
                    t.encode_gbps,
                    t.decode_gbps
                );
                last_rs = Some(((k, r), t.encode_gbps, t.decode_gbps));
                rs_enc.insert((k, r), t.encode_gbps);
            }
            let Some((_, re, rd)) = last_rs else { continue };
            let z =
                Zigzag::new(k, r, s, Construction::Basic).expect("table 5.1 profiles are valid");
            match measure(&z, size, budget) {
                Ok(t) => {
                    if (k, r) == (8, 2) {
                        zz82.push((s, t.encode_gbps, t.decode_gbps));
                    }
                    println!(
                        "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} |",
                        z.profile(),
                        z.rows(),
                        t.encode_gbps,
                        t.decode_gbps,
                        t.encode_gbps / re,
                        t.decode_gbps / rd
                    )
                }
                Err(e) => println!("| {} | {} | error: {e} | | | |", z.profile(), z.rows()),
            }
        }
        // The target: Zigzag 8+2 encode and decode at least half
        // of Loligo's RS encode rate (RS 8+2 and RS 8+3 both shown).
        for (s, e, d) in zz82 {
            for key in [(8, 2), (8, 3)] {
                if let Some(re) = rs_enc.get(&key) {
                    println!(
                        "zigzag 8+2 s={s} vs RS {}+{} encode: encode {:.2}x, decode {:.2}x",
                        key.0,
                        key.1,
                        e / re,
                        d / re
                    );
                }
            }
        }
    }
}
