//! `loligo auth ...`: users with caps, kept by the monitors (`add`,
//! `get`, `ls`, `rm`, `caps`, `rotate`, as Ceph's `ceph auth`), and a
//! cluster's keys made offline from its certificate authority's files
//! (`ca`, `keyring`: what `loligo up` makes in `DATA_DIR/keys`, for a
//! cluster run by hand or a new daemon). The library and the monitors do
//! the work; this parses and writes files.
//!
//! It must never overwrite an authority or a keyring: a lost authority
//! key locks out every new entity, and a replaced keyring its daemon. A
//! command that makes a key checks its output file before it asks.

use crate::admin_cmd::call;
use crate::config::ConnArgs;
use crate::CliError;
use clap::{Args, Subcommand};
use loligo_monc::protocol::AuthInfo;
use loligo_monc::{Admin, MonRequest};
use loligo_proto::tls::{Authority, Keyring};
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum AuthCmd {
    /// Make a cluster's certificate authority in DIR (ca.pem, and ca.key
    /// readable by its owner only: whoever holds it can make any entity's
    /// keyring).
    Ca(CaArgs),
    /// Make ENTITY's keyring (mon.N, osd.N or client.NAME), signed by the
    /// authority in --ca DIR, for a daemon's --keyring. (A client also
    /// needs to be a user: `auth add` makes both.)
    Keyring(KeyringArgs),
    /// Add a user with caps, e.g. `auth add client.backup mon 'allow r'
    /// osd 'allow rw pool=backups' -o backup.keyring`. The monitors record
    /// its caps and its certificate's serial; its keyring is written to
    /// --out (or printed) and kept nowhere else.
    Add(AddArgs),
    /// A user's caps and certificate serial.
    Get(EntityArgs),
    /// Every user (client.admin is listed once its key is rotated; until
    /// then it has every right).
    Ls(LsArgs),
    /// Remove a user: the cluster refuses it from the next map epoch, on
    /// connections already open too.
    Rm(EntityArgs),
    /// Replace a user's caps, e.g. `auth caps client.backup mon 'allow r'
    /// osd 'allow r pool=backups'`.
    Caps(CapsArgs),
    /// A new key for a user: its keyring is written to --out (or printed);
    /// the old one is refused from the next map epoch.
    Rotate(RotateArgs),
}

#[derive(Args)]
pub struct AddArgs {
    /// The user: client.NAME.
    entity: String,
    /// Caps as SERVICE 'TEXT' pairs: mon 'allow r|rw|*', osd 'allow
    /// RIGHTS [pool=NAME][, ...]' (RIGHTS: r, w, x or *). None: no rights.
    caps: Vec<String>,
    /// Write the keyring to FILE (refused if it exists); without it the
    /// keyring is printed.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(Args)]
pub struct EntityArgs {
    /// The user: client.NAME.
    entity: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct LsArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct CapsArgs {
    /// The user: client.NAME.
    entity: String,
    /// The new caps, as SERVICE 'TEXT' pairs (see `auth add`); they
    /// replace the old ones whole.
    caps: Vec<String>,
}

#[derive(Args)]
pub struct RotateArgs {
    /// The user: client.NAME.
    entity: String,
    /// Write the new keyring to FILE (refused if it exists); without it
    /// the keyring is printed.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: Option<PathBuf>,
}

/// `SERVICE TEXT ...` as pairs.
fn pairs(words: &[String]) -> Result<Vec<(String, String)>, CliError> {
    if !words.len().is_multiple_of(2) {
        return Err(CliError(format!(
            "caps come in pairs, SERVICE 'TEXT' (e.g. mon 'allow r'); '{}' has none",
            words.last().map_or("", String::as_str)
        )));
    }
    Ok(words
        .chunks(2)
        .map(|c| (c[0].clone(), c[1].clone()))
        .collect())
}

/// Refuse an output file that exists, before a key is made for it.
fn free(out: &Option<PathBuf>) -> Result<(), CliError> {
    match out {
        Some(p) if p.exists() => Err(CliError(format!("{} exists: not replaced", p.display()))),
        _ => Ok(()),
    }
}

/// Write (or print) the keyring a monitor's reply carries.
pub(crate) fn deliver(reply: &serde_json::Value, out: Option<&Path>) -> Result<(), CliError> {
    let text = reply
        .get("keyring")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| CliError("the monitor's reply carries no keyring".into()))?;
    let k = Keyring::from_text(text).map_err(|e| CliError(e.to_string()))?;
    match out {
        Some(p) => {
            k.save(p).map_err(|e| CliError(e.to_string()))?;
            eprintln!("{} keyring in {}", k.entity, p.display());
        }
        None => print!("{text}"),
    }
    Ok(())
}

/// A user as Ceph's `auth get` prints one.
fn print_user(u: &AuthInfo) {
    println!("[{}]", u.entity);
    for (service, text) in &u.caps {
        println!("\tcaps {service} = \"{text}\"");
    }
    println!("\tserial = {}", u.serial);
}

/// Run the commands that talk to the monitors.
pub fn run(conn: &ConnArgs, c: AuthCmd) -> Result<(), CliError> {
    let admin = |a: Admin| call(conn, MonRequest::Admin(a));
    match c {
        AuthCmd::Ca(_) | AuthCmd::Keyring(_) => offline(c),
        AuthCmd::Add(a) => {
            free(&a.out)?;
            let caps = pairs(&a.caps)?;
            let r = admin(Admin::AuthAdd {
                entity: a.entity,
                caps,
            })?;
            deliver(&r.value, a.out.as_deref())
        }
        AuthCmd::Rotate(a) => {
            free(&a.out)?;
            let r = admin(Admin::AuthRotate { entity: a.entity })?;
            deliver(&r.value, a.out.as_deref())
        }
        AuthCmd::Get(a) => {
            let r = admin(Admin::AuthGet { entity: a.entity })?;
            if a.json {
                println!("{}", serde_json::to_string_pretty(&r.value)?);
                return Ok(());
            }
            print_user(&serde_json::from_value(r.value)?);
            Ok(())
        }
        AuthCmd::Ls(a) => {
            let r = admin(Admin::AuthLs)?;
            if a.json {
                println!("{}", serde_json::to_string_pretty(&r.value)?);
                return Ok(());
            }
            let users: Vec<AuthInfo> = serde_json::from_value(r.value)?;
            for u in &users {
                print_user(u);
            }
            if !users.iter().any(|u| u.entity == loligo_types::caps::ADMIN) {
                println!(
                    "({} has every right: the bootstrap administrator)",
                    loligo_types::caps::ADMIN
                );
            }
            Ok(())
        }
        AuthCmd::Rm(a) => {
            let r = admin(Admin::AuthRm {
                entity: a.entity.clone(),
            })?;
            println!("removed {} (map epoch {})", a.entity, r.epoch);
            Ok(())
        }
        AuthCmd::Caps(a) => {
            let caps = pairs(&a.caps)?;
            let r = admin(Admin::AuthCaps {
                entity: a.entity.clone(),
                caps,
            })?;
            println!("updated caps of {} (map epoch {})", a.entity, r.epoch);
            Ok(())
        }
    }
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

/// Run the commands that work on files only.
fn offline(c: AuthCmd) -> Result<(), CliError> {
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
        _ => Err(CliError("this auth command talks to the monitors".into())),
    }
}
