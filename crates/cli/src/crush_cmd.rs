//! `loligo crush ...`: test, compile, decompile, tree and bench offline;
//! set and get on a running cluster.

use crate::CliError;
use clap::{Args, Subcommand};
use loligo_crush::map::{CrushMap, ItemId};
use loligo_crush::tester::{run as run_test, TestSpec};
use loligo_crush::text;
use loligo_crush::CompiledMap;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum CrushCmd {
    /// Map a range of inputs like `crushtool -i MAP --test ...`.
    ///
    /// ARGS are crushtool's test arguments: --rule R, --num-rep N,
    /// --min-rep N, --max-rep N, --min-x A, --max-x B, --x X,
    /// --weight DEV W (repeatable), --pool-id P, --show-mappings,
    /// --show-bad-mappings, --show-utilization, --show-utilization-all,
    /// --show-statistics, --show-choose-tries, and the tunable flags --set-choose-local-tries,
    /// --set-choose-local-fallback-tries, --set-choose-total-tries,
    /// --set-chooseleaf-descend-once, --set-chooseleaf-vary-r,
    /// --set-chooseleaf-stable, --set-straw-calc-version,
    /// --set-allowed-bucket-algs. `--test` itself is accepted and ignored.
    /// Defaults as crushtool: x = 0..1023 (also when only one of --min-x
    /// and --max-x is given), every rule, num-rep from the rule's
    /// min_size..max_size.
    Test(TestArgs),
    /// Compile a text map (crushtool -d syntax) to Loligo's JSON form.
    Compile(ConvertArgs),
    /// Decompile Loligo's JSON form (or a text map) to text map syntax.
    Decompile(ConvertArgs),
    /// Print the hierarchy like `ceph osd tree`.
    Tree(TreeArgs),
    /// Measure mapping throughput on a 1000-OSD straw2 map, against
    /// crushtool when it is on PATH.
    Bench(crate::crush_bench::BenchArgs),
    /// PGs per OSD for one pool: plain CRUSH, pps bijection, linear
    /// buckets with a balance parameter, upmap balancing.
    MapPgs(crate::map_pgs_cmd::MapPgsArgs),
    /// Edit a map offline as crushtool does: add, reweight or remove an
    /// item, add a replicated rule. The result (compiled first) goes to
    /// -o in the input's form (text or JSON).
    Edit(EditArgs),
    /// Where item NAME (osd.N or a bucket) sits: the buckets above it,
    /// lowest first, as `TYPE<tab>NAME` lines (crushtool's
    /// --show-location).
    ShowLocation {
        /// The map: text or Loligo JSON.
        #[arg(short = 'i', long = "input", value_name = "MAP")]
        input: PathBuf,
        name: String,
    },
    /// Check a map: it compiles, and (with --max-id N) every device id is
    /// below N (crushtool's --check). Silent when it passes.
    Check {
        /// The map: text or Loligo JSON.
        #[arg(short = 'i', long = "input", value_name = "MAP")]
        input: PathBuf,
        #[arg(long, value_name = "N")]
        max_id: Option<i32>,
    },
    /// Install a CRUSH map (text or JSON) in the running cluster, in
    /// place of its own (Ceph's `osd setcrushmap`): it must compile and
    /// hold every OSD and every rule a pool uses. Data moves to where the
    /// new map places it.
    Set(SetArgs),
    /// The running cluster's CRUSH map, as JSON (or --text) to FILE or
    /// standard output (Ceph's `osd getcrushmap`).
    Get(GetArgs),
}

#[derive(Args)]
pub struct EditArgs {
    /// The map: text or Loligo JSON.
    #[arg(short = 'i', long = "input", value_name = "MAP")]
    input: PathBuf,
    /// Output file (default: standard output).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Add device ID called NAME with CRUSH weight WEIGHT at --loc.
    #[arg(long, num_args = 3, value_names = ["ID", "WEIGHT", "NAME"])]
    add_item: Option<Vec<String>>,
    /// Where --add-item puts it: TYPE NAME pairs (repeat: --loc host h1
    /// --loc root default); missing buckets are made.
    #[arg(long, num_args = 2, value_names = ["TYPE", "NAME"], action = clap::ArgAction::Append)]
    loc: Vec<String>,
    /// Set the CRUSH weight of device NAME.
    #[arg(long, num_args = 2, value_names = ["NAME", "WEIGHT"])]
    reweight_item: Option<Vec<String>>,
    /// Remove device NAME, or an empty bucket.
    #[arg(long, value_name = "NAME")]
    remove_item: Option<String>,
    /// Add rule NAME placing replicas under bucket ROOT, one per TYPE.
    #[arg(long, num_args = 3, value_names = ["NAME", "ROOT", "TYPE"])]
    create_replicated_rule: Option<Vec<String>>,
}

#[derive(Args)]
pub struct SetArgs {
    /// The map: text (crushtool -d syntax) or Loligo JSON.
    #[arg(short = 'i', long = "input", value_name = "MAP")]
    input: PathBuf,
}

#[derive(Args)]
pub struct GetArgs {
    /// Output file (default: standard output).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// crushtool -d text instead of JSON.
    #[arg(long)]
    text: bool,
}

#[derive(Args)]
pub struct TestArgs {
    /// The map: text (crushtool -d syntax) or Loligo JSON.
    #[arg(short = 'i', long = "input", value_name = "MAP")]
    input: PathBuf,
    /// crushtool --test arguments (see above).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<String>,
}

#[derive(Args)]
pub struct ConvertArgs {
    /// Input map file.
    #[arg(short = 'i', long = "input", value_name = "FILE")]
    input: PathBuf,
    /// Output file (default: standard output).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Args)]
pub struct TreeArgs {
    /// The map: text or Loligo JSON.
    #[arg(short = 'i', long = "input", value_name = "MAP")]
    input: PathBuf,
    /// Include the per-class shadow trees (`host~ssd` ...).
    #[arg(long)]
    show_shadow: bool,
}

/// Largest map file read (bytes).
const MAX_MAP_FILE: u64 = 64 << 20;

/// Read a map file, text or JSON (detected by the first non-blank byte).
pub fn load_map(path: &Path) -> Result<CrushMap, CliError> {
    let meta = std::fs::metadata(path).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
    if meta.len() > MAX_MAP_FILE {
        return Err(CliError(format!(
            "{}: larger than {MAX_MAP_FILE} bytes",
            path.display()
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
    let s = String::from_utf8(bytes)
        .map_err(|_| CliError(format!("{}: not UTF-8 text", path.display())))?;
    if s.trim_start().starts_with('{') {
        serde_json::from_str(&s)
            .map_err(|e| CliError(format!("{}: bad JSON map: {e}", path.display())))
    } else {
        text::parse(&s).map_err(|e| CliError(format!("{}: {e}", path.display())))
    }
}

/// Load and validate a map.
pub fn load_compiled(path: &Path) -> Result<CompiledMap, CliError> {
    let map = load_map(path)?;
    CompiledMap::compile(&map).map_err(|e| CliError(format!("{}: {e}", path.display())))
}

fn write_out(output: &Option<PathBuf>, s: &str) -> Result<(), CliError> {
    match output {
        Some(p) => std::fs::write(p, s).map_err(|e| CliError(format!("{}: {e}", p.display()))),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(s.as_bytes())?;
            Ok(())
        }
    }
}

pub fn run(cmd: CrushCmd) -> Result<(), CliError> {
    match cmd {
        CrushCmd::Test(a) => {
            let spec = TestSpec::from_args(&a.args)?;
            let mut map = load_map(&a.input)?;
            for (name, v) in &spec.tunables {
                map.tunables.set(name, *v);
            }
            let compiled = CompiledMap::compile(&map)
                .map_err(|e| CliError(format!("{}: {e}", a.input.display())))?;
            let out = run_test(&compiled, &spec)?;
            eprint!("{}", out.stderr);
            write_out(&None, &out.stdout)
        }
        CrushCmd::Compile(a) => {
            let map = load_map(&a.input)?;
            CompiledMap::compile(&map)?;
            let mut s = serde_json::to_string_pretty(&map)?;
            s.push('\n');
            write_out(&a.output, &s)
        }
        CrushCmd::Decompile(a) => {
            let map = load_map(&a.input)?;
            CompiledMap::compile(&map)?;
            write_out(&a.output, &text::write(&map))
        }
        CrushCmd::Tree(a) => {
            let compiled = load_compiled(&a.input)?;
            write_out(&None, &tree(&compiled, a.show_shadow))
        }
        CrushCmd::Bench(a) => crate::crush_bench::run(a),
        CrushCmd::MapPgs(a) => crate::map_pgs_cmd::run(a),
        CrushCmd::Edit(a) => edit(a),
        CrushCmd::ShowLocation { input, name } => {
            let map = load_map(&input)?;
            let loc = loligo_types::crush_edit::location_of(&map, &name)
                .ok_or_else(|| CliError(format!("no item '{name}' in {}", input.display())))?;
            let lines: String = loc.iter().map(|(t, n)| format!("{t}\t{n}\n")).collect();
            write_out(&None, &lines)
        }
        CrushCmd::Check { input, max_id } => {
            let map = load_map(&input)?;
            CompiledMap::compile(&map)
                .map_err(|e| CliError(format!("{}: {e}", input.display())))?;
            match max_id.and_then(|m| map.devices.iter().find(|d| d.id >= m)) {
                Some(d) => Err(CliError(format!(
                    "item id {} ({}) is not below --max-id {}",
                    d.id,
                    d.name,
                    max_id.unwrap_or_default()
                ))),
                None => Ok(()),
            }
        }
        CrushCmd::Set(_) | CrushCmd::Get(_) => Err(CliError(
            "crush set and crush get speak to a cluster".into(),
        )),
    }
}

/// `crush edit`: crushtool's editing verbs, applied in the order add,
/// reweight, remove, rule; the result compiled, then written in the
/// input's form.
fn edit(a: EditArgs) -> Result<(), CliError> {
    use loligo_types::crush_edit as ce;
    let mut map = load_map(&a.input)?;
    let weight = |w: &str| -> Result<u32, CliError> {
        w.parse::<f64>()
            .ok()
            .filter(|w| (0.0..=65535.0).contains(w))
            .map(|w| (w * 65536.0).round() as u32)
            .ok_or_else(|| CliError(format!("'{w}' is not a weight (0 to 65535)")))
    };
    let bad = |e: loligo_types::MapError| CliError(e.to_string());
    if let Some(v) = &a.add_item {
        let id: i32 = v[0]
            .parse()
            .map_err(|_| CliError(format!("'{}' is not an item id", v[0])))?;
        let loc: Vec<(String, String)> = a
            .loc
            .chunks(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect();
        ce::add_device(&mut map, id, &v[2], weight(&v[1])?, &loc).map_err(bad)?;
    } else if !a.loc.is_empty() {
        return Err(CliError("--loc goes with --add-item".into()));
    }
    if let Some(v) = &a.reweight_item {
        let id = ce::item_id(&map, &v[0])
            .filter(|id| *id >= 0)
            .ok_or_else(|| CliError(format!("no device '{}'", v[0])))?;
        ce::set_weight(&mut map, id, weight(&v[1])?).map_err(bad)?;
    }
    if let Some(name) = &a.remove_item {
        ce::remove(&mut map, name).map_err(bad)?;
    }
    if let Some(v) = &a.create_replicated_rule {
        let id = ce::add_replicated_rule(&mut map, &v[0], &v[1], &v[2]).map_err(bad)?;
        eprintln!("rule {id} '{}'", v[0]);
    }
    CompiledMap::compile(&map).map_err(|e| CliError(format!("the edited map: {e}")))?;
    let json = std::fs::read_to_string(&a.input)
        .map(|t| t.trim_start().starts_with('{'))
        .unwrap_or(false);
    let out = match json {
        true => serde_json::to_string_pretty(&map)? + "\n",
        false => text::write(&map),
    };
    write_out(&a.output, &out)
}

/// `crush set -i MAP` and `crush get`: the running cluster's map.
pub fn live(conn: &crate::config::ConnArgs, cmd: CrushCmd) -> Result<(), CliError> {
    use loligo_monc::protocol::{Admin, MonRequest};
    let call = |a| crate::admin_cmd::call(conn, MonRequest::Admin(a));
    match cmd {
        CrushCmd::Set(a) => {
            let map = load_map(&a.input)?;
            CompiledMap::compile(&map)
                .map_err(|e| CliError(format!("{}: {e}", a.input.display())))?;
            for w in linear_warnings(&map) {
                eprintln!("warning: {w}");
            }
            let r = call(Admin::CrushSet {
                map: serde_json::to_string(&map)?,
            })?;
            println!("set the CRUSH map (map epoch {})", r.epoch);
            Ok(())
        }
        CrushCmd::Get(a) => {
            let v = call(Admin::CrushGet)?.value;
            let map: CrushMap = serde_json::from_value(v)
                .map_err(|e| CliError(format!("the monitor's CRUSH map: {e}")))?;
            let s = match a.text {
                true => text::write(&map),
                false => serde_json::to_string_pretty(&map)? + "\n",
            };
            write_out(&a.output, &s)
        }
        other => run(other),
    }
}

/// What an operator should know before installing `map`: linear buckets
/// under a map whose `chooseleaf_vary_r` is not 0 (the balanced-placement
/// work's gains were measured with it 0: retries then vary the input the
/// same way at every level).
pub fn linear_warnings(map: &CrushMap) -> Vec<String> {
    let vary_r = map.tunables.chooseleaf_vary_r;
    if vary_r == 0 {
        return Vec::new();
    }
    (map.buckets.iter())
        .filter(|b| b.alg == loligo_crush::map::BucketAlg::Linear)
        .map(|b| {
            format!(
                "bucket '{}' is linear and chooseleaf_vary_r is {vary_r}: its balance gains assume 0 (`tunable chooseleaf_vary_r 0`)",
                b.name
            )
        })
        .collect()
}

/// One row of the tree listing.
struct Row {
    id: ItemId,
    class: String,
    weight: u32,
    depth: usize,
    label: String,
}

/// `ceph osd tree`-style listing: roots first, children indented, weights
/// as the parent holds them.
fn tree(map: &CompiledMap, show_shadow: bool) -> String {
    let src = map.source();
    let buckets = map.bucket_summaries();
    let children: std::collections::BTreeSet<ItemId> = buckets
        .iter()
        .flat_map(|b| b.items.iter().map(|(id, _)| *id))
        .collect();
    let mut rows: Vec<Row> = Vec::new();
    // Iterative depth-first walk (bounded by the validated, acyclic map).
    for root in buckets.iter().filter(|b| !children.contains(&b.id)) {
        if !show_shadow && root.name.contains('~') {
            continue;
        }
        let mut stack: Vec<(ItemId, u32, usize)> = vec![(root.id, root.weight, 0)];
        while let Some((id, weight, depth)) = stack.pop() {
            if id >= 0 {
                let d = src.devices.iter().find(|d| d.id == id);
                rows.push(Row {
                    id,
                    class: d.and_then(|d| d.class.clone()).unwrap_or_default(),
                    weight,
                    depth,
                    label: d.map_or_else(|| format!("osd.{id}"), |d| d.name.clone()),
                });
                continue;
            }
            let Some(b) = buckets.iter().find(|b| b.id == id) else {
                continue;
            };
            let tname = src.type_name(b.type_id).unwrap_or("?");
            rows.push(Row {
                id,
                class: String::new(),
                weight,
                depth,
                label: format!("{tname} {}", b.name),
            });
            for &(child, w) in b.items.iter().rev() {
                stack.push((child, w, depth + 1));
            }
        }
    }
    let mut s = format!("{:>5}  {:<5}  {:>9}  TYPE NAME\n", "ID", "CLASS", "WEIGHT");
    for r in &rows {
        s.push_str(&format!(
            "{:>5}  {:<5}  {:>9.5}  {}{}\n",
            r.id,
            r.class,
            f64::from(r.weight) / 65536.0,
            "    ".repeat(r.depth),
            r.label
        ));
    }
    // Devices that no bucket holds, like Ceph's stray OSDs.
    let placed: std::collections::BTreeSet<ItemId> = rows.iter().map(|r| r.id).collect();
    for d in src.devices.iter().filter(|d| !placed.contains(&d.id)) {
        s.push_str(&format!(
            "{:>5}  {:<5}  {:>9.5}  {}\n",
            d.id,
            d.class.clone().unwrap_or_default(),
            0.0,
            d.name
        ));
    }
    s
}
