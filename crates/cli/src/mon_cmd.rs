//! `mon add`, `mon rm`, `mon stat` and `quorum_status`: the monitor
//! group's membership as an operator sees it (Ceph's verbs). The leader
//! decides and refuses; this only asks and prints.

use crate::admin_cmd::{call, print_json, MonCmd};
use crate::config::ConnArgs;
use crate::CliError;
use loligo_monc::protocol::{Admin, MonRequest};
use serde_json::Value;

/// `mon add|rm|stat`.
pub fn mon(conn: &ConnArgs, c: MonCmd) -> Result<(), CliError> {
    let said =
        |r: loligo_monc::protocol::MonReply| match r.value.get("message").and_then(Value::as_str) {
            Some(m) => println!("{m}"),
            None => println!("done (map epoch {})", r.epoch),
        };
    match c {
        MonCmd::Run(_) => Err(CliError("mon run is a daemon, not a command".into())),
        MonCmd::Mkfs { data } => mkfs(&data),
        MonCmd::Add { id, addr } => {
            said(call(conn, MonRequest::Admin(Admin::MonAdd { id, addr }))?);
            Ok(())
        }
        MonCmd::Rm { id } => {
            said(call(conn, MonRequest::Admin(Admin::MonRm { id }))?);
            Ok(())
        }
        MonCmd::Stat { json } => {
            let v = call(conn, MonRequest::Admin(Admin::QuorumStatus))?.value;
            match json {
                true => print_json(&stat_json(&v)),
                false => println!("{}", stat_line(&v)),
            }
            Ok(())
        }
    }
}

/// `mon mkfs --data DIR`: a new, empty monitor store, marked made.
fn mkfs(data: &std::path::Path) -> Result<(), CliError> {
    std::fs::create_dir_all(data).map_err(|e| CliError(format!("{}: {e}", data.display())))?;
    let store = loligo_mon::raft::MonStore::open(data).map_err(CliError)?;
    if store.made().map_err(CliError)? {
        return Err(CliError(format!(
            "{} already holds a monitor store; mkfs is only for a new one",
            data.display()
        )));
    }
    store.mark_made().map_err(CliError)?;
    println!("made a monitor store in {}", data.display());
    Ok(())
}

/// `balancer on|off|status`.
pub fn balancer(conn: &ConnArgs, what: &str) -> Result<(), CliError> {
    let on = match what {
        "on" => Some(true),
        "off" => Some(false),
        _ => None,
    };
    let r = call(conn, MonRequest::Admin(Admin::Balancer { on }))?;
    match on {
        Some(_) => println!("balancer {what} (map epoch {})", r.epoch),
        None => print_json(&r.value),
    }
    Ok(())
}

/// `mgr services`: the leader's HTTP services, as JSON.
pub fn mgr_services(conn: &ConnArgs) -> Result<(), CliError> {
    print_json(&call(conn, MonRequest::Admin(Admin::MgrServices))?.value);
    Ok(())
}

/// `quorum_status`: the leader's JSON.
pub fn quorum_status(conn: &ConnArgs) -> Result<(), CliError> {
    print_json(&call(conn, MonRequest::Admin(Admin::QuorumStatus))?.value);
    Ok(())
}

/// Ceph's `mon stat` line from a `quorum_status` answer: `e12: 3 mons at
/// {0=h:1,1=h:2,2=h:3}, election epoch 5, leader 0 mon.0, quorum 0,1,2
/// mon.0,mon.1,mon.2`.
fn stat_line(v: &Value) -> String {
    let mons = v["monmap"]["mons"].as_array().cloned().unwrap_or_default();
    let at: Vec<String> = (mons.iter())
        .map(|m| format!("{}={}", m["rank"], m["addr"].as_str().unwrap_or("?")))
        .collect();
    let ids = |k: &str| -> Vec<String> {
        (v[k].as_array().into_iter().flatten())
            .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
            .collect()
    };
    let leader = v["quorum_leader_name"].as_str().unwrap_or("none");
    let rank = leader.strip_prefix("mon.").unwrap_or("?");
    format!(
        "e{}: {} mons at {{{}}}, election epoch {}, leader {rank} {leader}, quorum {} {}",
        v["monmap"]["epoch"],
        mons.len(),
        at.join(","),
        v["election_epoch"],
        ids("quorum").join(","),
        ids("quorum_names").join(",")
    )
}

/// Ceph's `mon stat -f json` from a `quorum_status` answer: `{"epoch",
/// "num_mons", "leader", "quorum": [{"rank", "name"}]}`.
fn stat_json(v: &Value) -> Value {
    let mons = v["monmap"]["mons"].as_array().cloned().unwrap_or_default();
    let quorum: Vec<Value> = (v["quorum"].as_array().into_iter().flatten())
        .filter_map(Value::as_u64)
        .map(|r| serde_json::json!({ "rank": r, "name": format!("mon.{r}") }))
        .collect();
    serde_json::json!({
        "epoch": v["monmap"]["epoch"],
        "num_mons": mons.len(),
        "leader": v["quorum_leader_name"],
        "quorum": quorum,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn mon_stat_reads_like_cephs() {
        let v = serde_json::json!({
            "election_epoch": 5,
            "quorum": [0, 2],
            "quorum_names": ["mon.0", "mon.2"],
            "quorum_leader_name": "mon.0",
            "monmap": {"epoch": 12, "mons": [
                {"rank": 0, "name": "mon.0", "addr": "h:1"},
                {"rank": 1, "name": "mon.1", "addr": "h:2"},
                {"rank": 2, "name": "mon.2", "addr": "h:3"},
            ]},
        });
        assert_eq!(
            super::stat_line(&v),
            "e12: 3 mons at {0=h:1,1=h:2,2=h:3}, election epoch 5, leader 0 mon.0, quorum 0,2 mon.0,mon.2"
        );
        assert_eq!(
            super::stat_json(&v),
            serde_json::json!({"epoch": 12, "num_mons": 3, "leader": "mon.0",
                "quorum": [{"rank": 0, "name": "mon.0"}, {"rank": 2, "name": "mon.2"}]})
        );
    }
}
