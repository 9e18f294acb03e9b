//! `loligo ec ...`: erasure-code recovery plans and encode/decode speed.
//! Parses arguments, builds the code from `loligo-ec`, prints; no coding
//! logic lives here.

use crate::CliError;
use clap::{Args, Subcommand, ValueEnum};
use loligo_ec::analysis::summarize;
use loligo_ec::code::ErasureCode;
use loligo_ec::kernel::{with_backend, Backend};
use loligo_ec::linear::LinearCode;
use loligo_ec::plan::Coalesce;
use loligo_ec::speed::{measure, measure_encode, versus_klauspost};
use loligo_ec::zigzag::{Construction, Zigzag};
use std::time::Duration;

/// Alternating rounds of `ec bench --peer`'s comparison.
const PEER_ROUNDS: usize = 3;

/// One round of Loligo's side of `ec bench --peer`: this program again, as
/// a new process (as each of the peer's rounds is; see
/// `loligo_ec::speed::versus_klauspost`), timing Reed-Solomon encode alone.
fn encode_in_child(k: usize, m: usize, shard: usize, b: Backend, secs: f64) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::process::Command::new(exe)
        .args(["ec", "bench", "--plugin", "rs", "--encode-only", "--json"])
        .args(["--k", &k.to_string(), "--m", &m.to_string()])
        .args([
            "--size",
            &(k * shard).to_string(),
            "--seconds",
            &secs.to_string(),
        ])
        .args(["--backend", b.name()])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("unreadable answer from a child bench: {e}"))?;
    v["results"][0]["encode_gbps"]
        .as_f64()
        .ok_or_else(|| "a child bench gave no encode speed".to_string())
}

/// Pin this process to the CPU it runs on, so the rounds it starts (which
/// inherit the mask) all run on one core: unpinned, the scheduler moved
/// the Go peer between this VM's two CPUs and its speed between 21 and 25
/// GB/s from one round to the next (RS 10+4, 256 KiB chunks), while pinned
/// rounds of either side agreed within 3% (BENCHMARKS.md). `None` where
/// the system refuses.
fn pin_to_this_cpu() -> Option<usize> {
    use nix::sched::{sched_getcpu, sched_setaffinity, CpuSet};
    let cpu = sched_getcpu().ok()?;
    let mut set = CpuSet::new();
    set.set(cpu).ok()?;
    sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).ok()?;
    Some(cpu)
}

#[derive(Subcommand)]
pub enum EcCmd {
    /// For every single lost chunk: what recovery reads (elements, bytes,
    /// I/Os, read distance per surviving chunk), and the averages.
    Plan(PlanArgs),
    /// Encode and single-failure decode throughput, one thread.
    Bench(BenchArgs),
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Plugin {
    /// Reed-Solomon (systematic Cauchy), 1 <= m <= k <= 32.
    Rs,
    /// Zigzag (Tamo, Wang, Bruck), 2 <= m <= 4, duplication factor --s.
    Zigzag,
    /// Basic Pyramid LRC from RS(k, m) with --l local groups.
    Lrc,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ConstructionArg {
    Basic,
    Optimal,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum CoalesceArg {
    Naive,
    Conservative,
    Aggressive,
}

/// The code profile shared by `plan` and `bench`.
#[derive(Args)]
pub struct Profile {
    /// Code family.
    #[arg(long)]
    plugin: Plugin,
    /// Data chunks.
    #[arg(long)]
    k: usize,
    /// Parity chunks (for lrc: the parities of the RS code it derives from;
    /// it stores m - 1 global and l local parities).
    #[arg(long)]
    m: usize,
    /// Zigzag duplication factor (virtual columns fill up to a multiple).
    #[arg(long, default_value_t = 1)]
    s: usize,
    /// LRC local groups.
    #[arg(long, default_value_t = 2)]
    l: usize,
    /// Zigzag row order: basic, or optimal (known for 8, 9 and 16 rows).
    #[arg(long, value_enum, default_value = "basic")]
    construction: ConstructionArg,
    /// Element alignment in bytes (the disk sector).
    #[arg(long, default_value_t = 4096)]
    alignment: usize,
}

impl Profile {
    fn build(&self) -> Result<Box<dyn ErasureCode>, CliError> {
        Ok(match self.plugin {
            Plugin::Rs => {
                Box::new(LinearCode::reed_solomon(self.k, self.m)?.with_alignment(self.alignment))
            }
            Plugin::Lrc => Box::new(
                LinearCode::pyramid(self.k, self.m, self.l)?.with_alignment(self.alignment),
            ),
            Plugin::Zigzag => {
                let c = match self.construction {
                    ConstructionArg::Basic => Construction::Basic,
                    ConstructionArg::Optimal => Construction::Optimal,
                };
                Box::new(Zigzag::new(self.k, self.m, self.s, c)?.with_alignment(self.alignment))
            }
        })
    }
}

#[derive(Args)]
pub struct PlanArgs {
    #[command(flatten)]
    profile: Profile,
    /// Object size in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    object_size: u64,
    /// How needed elements become I/O requests.
    #[arg(long, value_enum, default_value = "conservative")]
    coalesce: CoalesceArg,
    /// Print one JSON object (averages, and every failure's plan).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    profile: Profile,
    /// Object size in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    size: u64,
    /// Seconds to spend on each of encode and decode (after a warm-up).
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Kernels to run: scalar, avx2, avx512 (AVX-512BW, no GFNI),
    /// gfni-avx2 (GFNI on 256-bit registers, no AVX-512), gfni (AVX-512 +
    /// GFNI), or `all` (each this CPU has, in turn). Default: the fastest this CPU has
    /// (`LOLIGO_EC_BACKEND` lowers it).
    #[arg(long)]
    backend: Option<String>,
    /// A klauspost/reedsolomon peer program (`go build` in the
    /// repository's `crates/ec/benches/peer`): Reed-Solomon encode is also
    /// timed with it, limited to the same instruction sets, in three
    /// alternating rounds (each side's round a new process), and the best
    /// of each side and their ratio printed. This command and every round
    /// then run on the one CPU it started on.
    #[arg(long, value_name = "BIN")]
    peer: Option<std::path::PathBuf>,
    /// Time encode only (no decode is timed or reported).
    #[arg(long)]
    encode_only: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: EcCmd) -> Result<(), CliError> {
    match cmd {
        EcCmd::Plan(a) => plan(a),
        EcCmd::Bench(a) => bench(a),
    }
}

fn plan(a: PlanArgs) -> Result<(), CliError> {
    let code = a.profile.build()?;
    let coalesce = match a.coalesce {
        CoalesceArg::Naive => Coalesce::Naive,
        CoalesceArg::Conservative => Coalesce::Conservative,
        CoalesceArg::Aggressive => Coalesce::Aggressive,
    };
    let s = summarize(code.as_ref(), a.object_size, coalesce)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    println!("{}", s.profile);
    println!(
        "object {} B: {} rows of {} B elements, chunks of {} B; {:?} reads",
        s.object_size, s.rows, s.element_size, s.chunk_size, s.coalesce
    );
    println!(
        "{:>5} {:<7} {:<16} {:>12} {:>6}  per chunk read: chunk:elements/ios/distance",
        "lost", "kind", "method", "bytes", "ios"
    );
    for f in &s.failures {
        let per: Vec<String> = f
            .plan
            .reads
            .iter()
            .map(|(c, r)| format!("{c}:{}/{}/{}", r.elements.len(), r.ios.len(), r.distance))
            .collect();
        println!(
            "{:>5} {:<7} {:<16} {:>12} {:>6}  {}",
            f.lost,
            f.kind,
            f.plan.method,
            f.plan.bytes(),
            f.plan.ios(),
            per.join(" ")
        );
    }
    println!(
        "rebuilding ratio (theory, data chunks): {:.4}",
        s.rebuilding_ratio
    );
    println!(
        "effective rebuilding ratio: {:.4} (data chunks), {:.4} (all chunks)",
        s.effective_rebuilding_ratio, s.effective_rebuilding_ratio_all
    );
    println!(
        "average read distance (data failures): {:.3} elements",
        s.avg_read_distance
    );
    println!("average I/Os per failure: {:.2}", s.avg_ios);
    println!(
        "average bytes read per failure: {:.0} = {:.3} x Reed-Solomon",
        s.avg_bytes_read, s.bytes_read_vs_rs
    );
    Ok(())
}

fn bench(a: BenchArgs) -> Result<(), CliError> {
    if !(a.seconds > 0.0 && a.seconds <= 600.0) {
        return Err(CliError("--seconds must be in (0, 600]".into()));
    }
    if a.size == 0 || a.size > 1 << 30 {
        return Err(CliError("--size must be between 1 byte and 1 GiB".into()));
    }
    let backends: Vec<Backend> = match a.backend.as_deref() {
        None => vec![Backend::detect()],
        Some("all") => Backend::available().to_vec(),
        Some(name) => {
            let b = Backend::from_name(name).ok_or_else(|| {
                CliError(format!(
                    "unknown --backend '{name}': want scalar, avx2, avx512, gfni-avx2, gfni or all"
                ))
            })?;
            if !Backend::available().contains(&b) {
                return Err(CliError(format!(
                    "--backend {name}: this CPU lacks it (it has: {})",
                    Backend::available()
                        .iter()
                        .map(|b| b.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            vec![b]
        }
    };
    let code = a.profile.build()?;
    let rs = match (&a.peer, a.profile.plugin) {
        (Some(_), Plugin::Rs) => Some((a.profile.k, a.profile.m)),
        (Some(_), _) => {
            return Err(CliError(
                "--peer compares Reed-Solomon only (--plugin rs)".into(),
            ))
        }
        (None, _) => None,
    };
    let pinned = rs.and_then(|_| pin_to_this_cpu());
    let budget = Duration::from_secs_f64(a.seconds);
    let mut rows = Vec::new();
    for b in backends {
        let t = with_backend(b, || {
            if a.encode_only {
                measure_encode(code.as_ref(), a.size as usize, budget).map(|e| (e, None))
            } else {
                measure(code.as_ref(), a.size as usize, budget)
                    .map(|t| (t.encode_gbps, Some(t.decode_gbps)))
            }
        })
        .ok_or_else(|| CliError(format!("backend {} unavailable", b.name())))??;
        let peer = match (&a.peer, rs) {
            (Some(bin), Some((k, m))) => {
                let shard = (a.size as usize).div_ceil(k);
                let secs = a.seconds.max(0.5);
                let pair = versus_klauspost(bin, (k, m, shard), secs, b, PEER_ROUNDS, || {
                    encode_in_child(k, m, shard, b, secs)
                })
                .map_err(CliError)?;
                Some(pair)
            }
            _ => None,
        };
        rows.push((b, t, peer));
    }
    if a.json {
        let results: Vec<serde_json::Value> = rows
            .iter()
            .map(|(b, t, p)| {
                serde_json::json!({
                    "backend": b.name(),
                    "encode_gbps": t.0,
                    "decode_gbps": t.1,
                    "compared_encode_gbps": p.map(|(ours, _)| ours),
                    "klauspost_encode_gbps": p.map(|(_, theirs)| theirs),
                    "encode_vs_klauspost": p.map(|(ours, theirs)| ours / theirs),
                })
            })
            .collect();
        let v = serde_json::json!({
            "profile": code.profile(),
            "size": a.size,
            "results": results,
        });
        println!("{v}");
        return Ok(());
    }
    println!("{}, object {} B", code.profile(), a.size);
    if let Some(cpu) = pinned {
        println!("(this command and both sides' rounds run on CPU {cpu})");
    }
    for (b, t, p) in rows {
        match t.1 {
            Some(decode) => println!(
                "{:<6} encode {:.3} GB/s, decode (one data chunk lost, rebuilt from what its recovery plan reads) {decode:.3} GB/s",
                b.name(),
                t.0,
            ),
            None => println!("{:<6} encode {:.3} GB/s", b.name(), t.0),
        }
        if let Some((ours, theirs)) = p {
            println!(
                "{:<6} against klauspost/reedsolomon (same instruction sets), best of {PEER_ROUNDS} alternating rounds: \
                 loligo {ours:.3} GB/s, klauspost {theirs:.3} GB/s, loligo / klauspost {:.2}",
                "",
                ours / theirs
            );
        }
    }
    Ok(())
}
