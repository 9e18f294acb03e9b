//! `osd safe-to-destroy`, `osd destroy`, `osd purge` and `osd new`: the
//! life's end of an OSD's device and its replacement under the same id
//! (Ceph's verbs). The monitors decide and refuse; this only asks and
//! prints. It must never write over an existing keyring.

use crate::admin_cmd::{call, print_json};
use crate::config::ConnArgs;
use crate::CliError;
use loligo_monc::protocol::{Admin, MonRequest};
use serde_json::Value;
use std::path::PathBuf;

/// `osd safe-to-destroy ID...`: Ceph's answer, or an error saying why
/// not.
pub fn safe_to_destroy(conn: &ConnArgs, ids: Vec<i32>, json: bool) -> Result<(), CliError> {
    let v = call(conn, MonRequest::Admin(Admin::OsdSafeToDestroy { ids }))?.value;
    if json {
        print_json(&v);
    }
    let list = |k: &str| -> Vec<String> {
        (v[k].as_array().into_iter().flatten())
            .filter_map(Value::as_i64)
            .map(|i| i.to_string())
            .collect()
    };
    let (active, missing) = (list("active"), list("missing_stats"));
    let not_clean = v["not_clean_pgs"].as_u64().unwrap_or(0);
    if !active.is_empty() && not_clean > 0 {
        return Err(CliError(format!(
            "{not_clean} PG(s) are not active+clean and OSD(s) {} may hold copies they lack: not safe to destroy (wait until they are clean)",
            active.join(",")
        )));
    }
    if !active.is_empty() {
        let pgs: u64 = (v["stored_pgs"].as_array().into_iter().flatten())
            .filter_map(|p| p.get(1).and_then(Value::as_u64))
            .sum();
        return Err(CliError(format!(
            "OSD(s) {} have {pgs} PG(s) placed on them or recorded with them: not safe to destroy (mark them out and wait until they move)",
            active.join(",")
        )));
    }
    if !missing.is_empty() {
        return Err(CliError(format!(
            "{} PG(s) have no report yet; cannot tell whether OSD(s) {} are safe to destroy",
            v["unknown_pgs"],
            missing.join(",")
        )));
    }
    if !json {
        println!(
            "OSD(s) {} are safe to destroy without reducing data durability.",
            list("safe_to_destroy").join(",")
        );
    }
    Ok(())
}

/// `osd destroy ID` / `osd purge ID`.
pub fn destroy(
    conn: &ConnArgs,
    id: i32,
    confirm: bool,
    force: bool,
    purge: bool,
) -> Result<(), CliError> {
    let a = match purge {
        true => Admin::OsdPurge { id, confirm, force },
        false => Admin::OsdDestroy { id, confirm, force },
    };
    let r = call(conn, MonRequest::Admin(a))?;
    match purge {
        true => println!("purged osd.{id} (map epoch {})", r.epoch),
        false => println!(
            "destroyed osd.{id} (map epoch {}); `loligo osd new {id}` makes way for its replacement",
            r.epoch
        ),
    }
    Ok(())
}

/// `osd new [ID] [-o FILE | -i KEYRING]`: the OSD's id on stdout; its
/// new keyring to FILE (or printed after the id), if the monitors made
/// one; with `-i`, the key of a keyring made offline is recorded.
pub fn new(
    conn: &ConnArgs,
    id: Option<i32>,
    out: Option<PathBuf>,
    given: Option<PathBuf>,
) -> Result<(), CliError> {
    if let Some(p) = out.as_deref().filter(|p| p.exists()) {
        return Err(CliError(format!(
            "{} exists: not replaced (a replaced OSD's old keyring is revoked; remove it first)",
            p.display()
        )));
    }
    let serial = match &given {
        None => None,
        Some(p) => {
            let k = loligo_proto::tls::Keyring::load(p)
                .map_err(|e| CliError(format!("{}: {e}", p.display())))?;
            let who = k.identity().map_err(|e| CliError(e.to_string()))?;
            let named = id.map(|i| format!("osd.{i}"));
            if named.as_deref().is_some_and(|n| n != k.entity) {
                return Err(CliError(format!(
                    "{} is {}'s keyring, not {}'s",
                    p.display(),
                    k.entity,
                    named.unwrap_or_default()
                )));
            }
            Some(who.serial)
        }
    };
    let v = call(conn, MonRequest::Admin(Admin::OsdNew { id, serial }))?.value;
    let entity = v["entity"].as_str().unwrap_or_default();
    let id = entity.strip_prefix("osd.").unwrap_or(entity);
    println!("{id}");
    match v.get("keyring").and_then(Value::as_str) {
        Some(_) => crate::auth_cmd::deliver(&v, out.as_deref()),
        None if out.is_some() => Err(CliError(
            "no keyring was made (this cluster has no keys, or -i gave one)".into(),
        )),
        None => Ok(()),
    }
}
