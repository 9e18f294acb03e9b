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
use std::path::{Path, PathBuf};

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

fn read(p: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(p).map_err(|e| CliError(format!("{}: {e}", p.display())))
}

/// The authority in `dir`.
pub fn load_authority(dir: &Path) -> Result<Authority, CliError> {
    Authority::from_pem(&read(&dir.join("ca.pem"))?, &read(&dir.join("ca.key"))?)
        .map_err(|e| CliError(format!("{}: {e}", dir.display())))
}

pub fn run(c: AuthCmd) -> Result<(), CliError> {
    match c {
        AuthCmd::Ca(a) => {
            let (cert, key) = (a.dir.join("ca.pem"), a.dir.join("ca.key"));
            if cert.exists() || key.exists() {
                return Err(CliError(format!(
                    "{} already holds an authority (ca.pem or ca.key): not replaced",
                    a.dir.display()
                )));
            }
            std::fs::create_dir_all(&a.dir)?;
            let ca = Authority::generate(&a.fsid).map_err(|e| CliError(e.to_string()))?;
            crate::up_cmd::write_private(&key, ca.key_pem())?;
            std::fs::write(&cert, ca.cert_pem())?;
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
            let ca = load_authority(&a.ca)?;
            let k: Keyring = ca.issue(&a.entity).map_err(|e| CliError(e.to_string()))?;
            k.save(&a.out).map_err(|e| CliError(e.to_string()))?;
            println!("{} keyring in {}", k.entity, a.out.display());
            Ok(())
        }
    }
}
