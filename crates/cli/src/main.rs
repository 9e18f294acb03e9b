//! `loligo`: the one command users run. Today it holds the CRUSH,
//! placement and erasure-code tools; the cluster commands join it as they
//! land.
//!
//! Every subcommand has `--help`; bad input prints one `loligo: error: ...`
//! line and exits with code 2. This file only parses arguments and
//! dispatches; the work lives in the library crates.

mod balance_cmd;
mod bench;
mod crush_cmd;
mod ec_cmd;
mod osdmap_cmd;
mod store_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Loligo: a distributed object store in the design of Ceph's RADOS.
#[derive(Parser)]
#[command(name = "loligo", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// CRUSH map tools (crushtool-compatible test, compile, decompile, tree, bench).
    #[command(subcommand)]
    Crush(crush_cmd::CrushCmd),
    /// Placement queries in the way of osdmaptool.
    #[command(subcommand)]
    Osdmap(osdmap_cmd::OsdmapCmd),
    /// Erasure codes (RS, Zigzag, LRC): recovery read plans and speed.
    #[command(subcommand)]
    Ec(ec_cmd::EcCmd),
    /// The BlueStore-style object store: mkfs, fsck, crash-test workload.
    #[command(subcommand)]
    Store(store_cmd::StoreCmd),
}

/// A user-facing failure: printed as one line, exit code 2.
#[derive(Debug)]
pub struct CliError(pub String);

impl<E: std::fmt::Display> From<E> for CliError {
    fn from(e: E) -> Self {
        CliError(e.to_string())
    }
}

/// Parse arguments; usage errors become one `loligo: error:` line (exit 2),
/// `--help` and `--version` print normally.
fn parse_args() -> Result<Cli, ExitCode> {
    match Cli::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            Err(ExitCode::SUCCESS)
        }
        Err(e) => {
            let text = e.render().to_string();
            let msg: Vec<&str> = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:"))
                .map(str::trim)
                .filter(|l| {
                    !l.is_empty()
                        && !l.starts_with("For more information")
                        && !l.starts_with("tip:")
                })
                .collect();
            let msg = msg.join(" ");
            let msg = msg.strip_prefix("error: ").unwrap_or(&msg);
            eprintln!("loligo: error: {msg} (see --help)");
            Err(ExitCode::from(2))
        }
    }
}

fn main() -> ExitCode {
    let cli = match parse_args() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let res = match cli.cmd {
        Cmd::Crush(c) => crush_cmd::run(c),
        Cmd::Osdmap(c) => osdmap_cmd::run(c),
        Cmd::Ec(c) => ec_cmd::run(c),
        Cmd::Store(c) => store_cmd::run(c),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError(msg)) => {
            eprintln!("loligo: error: {msg}");
            ExitCode::from(2)
        }
    }
}
