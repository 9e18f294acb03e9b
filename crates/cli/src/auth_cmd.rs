//! `loligo auth ...`: a cluster's keys made offline, from its certificate
//! authority's files (what `loligo up` makes in `DATA_DIR/keys`, or `auth
//! ca` for a cluster run by hand). The library does the work; this parses
//! and writes files.
//!
//! It must never overwrite an authority or a keyring: a lost authority
//! key locks out every new entity, and a replaced keyring its daemon.

use crate::CliError;
use clap::{Args, Subcommand};
use loligo_proto::tls::{Authority, Keyring};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum AuthCmd {
    /// Make a cluster's certificate authority in DIR (ca.pem, and ca.key
    /// readable by its owner only: whoever holds it can make any entity's
    /// keyring).
    Ca(CaArgs),
    /// Make ENTITY's keyring (mon.N, osd.N or client.NAME), signed by the
    /// authority in --ca DIR, for a daemon's or a client's --keyring.
    Keyring(KeyringArgs),
}

#[derive(Args)]
pub struct CaArgs {
    /// Folder for ca.pem and ca.key (created; refused if it holds them).
    dir: PathBuf,
    /// The cluster's fsid (named in the authority's certificate).
    #[arg(long, default_value = "")]
    fsid: String,
}

#[derive(Args)]
pub struct KeyringArgs {
    /// The entity: mon.N, osd.N or client.NAME.
    entity: String,
    /// The folder holding the authority (ca.pem, ca.key).
    #[arg(long, value_name = "DIR")]
    ca: PathBuf,
    /// Where to write the keyring (refused if it exists).
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: PathBuf,
}

pub fn run(c: AuthCmd) -> Result<(), CliError> {
    match c {
        AuthCmd::Ca(a) => {
            let ca = Authority::generate(&a.fsid).map_err(|e| CliError(e.to_string()))?;
            ca.save(&a.dir).map_err(|e| CliError(e.to_string()))?;
            println!("authority in {}", a.dir.display());
            Ok(())
        }
        AuthCmd::Keyring(a) => {
            if a.out.exists() {
                return Err(CliError(format!(
                    "{} exists: not replaced",
                    a.out.display()
                )));
            }
            let ca = Authority::load(&a.ca).map_err(|e| CliError(e.to_string()))?;
            let k: Keyring = ca.issue(&a.entity).map_err(|e| CliError(e.to_string()))?;
            k.save(&a.out).map_err(|e| CliError(e.to_string()))?;
            println!("{} keyring in {}", k.entity, a.out.display());
            Ok(())
        }
    }
}
