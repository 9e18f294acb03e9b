//! Ceph's read-only report verbs, printed as Ceph prints them: `df
//! [detail]`, `pg stat`, `pg dump [pgs_brief]`, `osd perf` and `osd dump`
//! as text, each with `--json` in Ceph's JSON shape where Loligo has the
//! same quantities. The text is made by pure functions of the monitors'
//! answers, so tests read it without a cluster.
//!
//! It must never change anything, and never print a number Loligo does
//! not have: a quota or compression column Ceph shows reads `N/A` or
//! `0 B` because there is none.

use crate::admin_cmd::{call, print_json};
use crate::config::ConnArgs;
use crate::CliError;
use loligo_monc::protocol::{Admin, DfReport, LogEntry, LogLevel, MonRequest, PgRow, StatusReport};
use loligo_types::osdmap::{Fullness, OsdInfo, Pool, PoolKind};
use serde_json::{json, Value};

/// Bytes as Ceph's `byte_u_t` prints them: `0 B`, `4.0 KiB`, `78 MiB`,
/// `1.4 GiB` (one decimal below ten units).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    match (u, v < 10.0) {
        (0, _) => format!("{n} B"),
        (_, true) => format!("{v:.1} {}", UNITS[u]),
        _ => format!("{v:.0} {}", UNITS[u]),
    }
}

/// `pool stats [NAME]`: each pool's I/O now.
pub fn pool_stats(conn: &ConnArgs, pool: Option<String>, json: bool) -> Result<(), CliError> {
    let v = call(conn, MonRequest::Admin(Admin::PoolStats { pool }))?.value;
    match json {
        true => print_json(&v),
        false => print!("{}", pool_stats_text(&v)),
    }
    Ok(())
}

/// Ceph's `osd pool stats` text: per pool, its degraded and misplaced
/// copies, recovery and client I/O, or "nothing is going on".
pub fn pool_stats_text(v: &Value) -> String {
    let mut out = String::new();
    let num = |x: &Value, k: &str| x.get(k).and_then(Value::as_u64);
    for p in v.as_array().into_iter().flatten() {
        let name = p["pool_name"].as_str().unwrap_or("?");
        out += &format!("pool {name} id {}\n", p["pool_id"]);
        let mut said = false;
        let rec = &p["recovery"];
        for what in ["degraded", "misplaced"] {
            let n = num(rec, &format!("{what}_objects"));
            let total = num(rec, &format!("{what}_total"));
            if let (Some(n), Some(total)) = (n, total) {
                let pct = n as f64 * 100.0 / total.max(1) as f64;
                out += &format!("  {n}/{total} objects {what} ({pct:.3}%)\n");
                said = true;
            }
        }
        let rate = &p["recovery_rate"];
        let (objs, rb) = (
            num(rate, "recovering_objects_per_sec"),
            num(rate, "recovering_bytes_per_sec"),
        );
        if objs.is_some() || rb.is_some() {
            let b = bytes(rb.unwrap_or(0));
            out += &format!("  recovery io {b}/s, {} objects/s\n", objs.unwrap_or(0));
            said = true;
        }
        let io = &p["client_io_rate"];
        let client = [
            num(io, "read_bytes_sec").map(|n| format!("{}/s rd", bytes(n))),
            num(io, "write_bytes_sec").map(|n| format!("{}/s wr", bytes(n))),
            num(io, "read_op_per_sec").map(|n| format!("{n} op/s rd")),
            num(io, "write_op_per_sec").map(|n| format!("{n} op/s wr")),
        ];
        let client: Vec<String> = client.into_iter().flatten().collect();
        if !client.is_empty() {
            out += &format!("  client io {}\n", client.join(", "));
            said = true;
        }
        if !said {
            out += "  nothing is going on\n";
        }
        out += "\n";
    }
    out
}

/// Rows under a header, each column as wide as its widest cell, columns
/// `right` aligned right (numbers), the rest left.
fn table(header: &[&str], rows: &[Vec<String>], right: &[usize]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = (cells.iter().zip(&widths).enumerate())
            .map(|(i, (c, w))| match right.contains(&i) {
                true => format!("{c:>w$}"),
                false => format!("{c:<w$}"),
            })
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(header.to_vec());
    for r in rows {
        out += &line(r.iter().map(String::as_str).collect());
    }
    out
}

fn df_report(conn: &ConnArgs) -> Result<DfReport, CliError> {
    let v = call(conn, MonRequest::Admin(Admin::Df))?.value;
    serde_json::from_value(v).map_err(|e| CliError(format!("the monitor's df does not parse: {e}")))
}

/// `df [detail]`.
pub fn df(conn: &ConnArgs, detail: bool, json: bool) -> Result<(), CliError> {
    let r = df_report(conn)?;
    if json {
        let v = serde_json::to_value(&r).map_err(|e| CliError(format!("printing df: {e}")))?;
        print_json(&v);
    } else {
        print!("{}", df_text(&r, detail));
    }
    Ok(())
}

/// `df` as Ceph prints it: raw storage (one class: Loligo has no device
/// classes), then the pools.
pub fn df_text(r: &DfReport, detail: bool) -> String {
    let s = &r.stats;
    let raw = [
        bytes(s.total_bytes),
        bytes(s.total_avail_bytes),
        bytes(s.total_used_bytes),
        bytes(s.total_used_raw_bytes),
        format!("{:.2}", s.total_used_raw_ratio * 100.0),
    ];
    let mut out = String::from("--- RAW STORAGE ---\n");
    out += &table(
        &["CLASS", "SIZE", "AVAIL", "USED", "RAW USED", "%RAW USED"],
        &[std::iter::once("TOTAL".to_string()).chain(raw).collect()],
        &[1, 2, 3, 4, 5],
    );
    out += "\n--- POOLS ---\n";
    let mut header = vec![
        "POOL",
        "ID",
        "PGS",
        "STORED",
        "OBJECTS",
        "USED",
        "%USED",
        "MAX AVAIL",
    ];
    if detail {
        header.extend([
            "QUOTA OBJECTS",
            "QUOTA BYTES",
            "DIRTY",
            "USED COMPR",
            "UNDER COMPR",
        ]);
    }
    let rows: Vec<Vec<String>> = (r.pools.iter())
        .map(|p| {
            let mut row = vec![
                p.name.clone(),
                p.id.to_string(),
                p.pgs.to_string(),
                bytes(p.stats.stored),
                p.stats.objects.to_string(),
                bytes(p.stats.bytes_used),
                format!("{:.2}", p.stats.percent_used * 100.0),
                bytes(p.stats.max_avail),
            ];
            if detail {
                // No quotas, no cache tiers, no compression: Ceph's
                // words for none.
                row.extend(["N/A", "N/A", "N/A", "0 B", "0 B"].map(String::from));
            }
            row
        })
        .collect();
    let right: Vec<usize> = (1..header.len()).collect();
    out += &table(&header, &rows, &right);
    out
}

fn status_report(conn: &ConnArgs) -> Result<StatusReport, CliError> {
    let v = call(conn, MonRequest::Admin(Admin::Status))?.value;
    serde_json::from_value(v)
        .map_err(|e| CliError(format!("the monitor's status report does not parse: {e}")))
}

/// `pg stat`.
pub fn pg_stat(conn: &ConnArgs, json: bool) -> Result<(), CliError> {
    let s = status_report(conn)?;
    match json {
        true => print_json(&pg_stat_json(&s)),
        false => println!("{}", pg_stat_text(&s)),
    }
    Ok(())
}

/// PG states, most PGs first.
fn states(s: &StatusReport) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = (s.pgs.by_state.iter())
        .map(|(st, n)| (st.to_string(), *n))
        .collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// `pg stat` as Ceph prints it: `N pgs: STATES; DATA data, USED used,
/// AVAIL / TOTAL avail; client I/O`.
pub fn pg_stat_text(s: &StatusReport) -> String {
    let by: Vec<String> = states(s)
        .iter()
        .map(|(st, n)| format!("{n} {st}"))
        .collect();
    let u = &s.usage;
    let io = &s.io;
    format!(
        "{} pgs: {}; {} data, {} used, {} / {} avail; {}/s rd, {}/s wr, {:.0} op/s rd, {:.0} op/s wr",
        s.pgs.total,
        by.join(", "),
        bytes(u.stored_bytes),
        bytes(u.used_bytes),
        bytes(u.total_bytes.saturating_sub(u.used_bytes)),
        bytes(u.total_bytes),
        bytes(io.read_bytes_s as u64),
        bytes(io.write_bytes_s as u64),
        io.read_ops_s,
        io.write_ops_s
    )
}

/// `pg stat --json` in Ceph's shape.
pub fn pg_stat_json(s: &StatusReport) -> Value {
    let by: Vec<Value> = (states(s).into_iter())
        .map(|(name, num)| json!({"name": name, "num": num}))
        .collect();
    let u = &s.usage;
    json!({
        "pg_summary": {
            "num_pg_by_state": by,
            "num_pgs": s.pgs.total,
            "num_bytes": u.stored_bytes,
            "num_objects": u.objects,
            "total_bytes": u.total_bytes,
            "total_avail_bytes": u.total_bytes.saturating_sub(u.used_bytes),
            "total_used_bytes": u.used_bytes,
        }
    })
}

/// `pg dump [pgs_brief]`.
pub fn pg_dump(conn: &ConnArgs, brief: bool, json: bool) -> Result<(), CliError> {
    let rows = crate::admin_cmd::pg_rows(conn, None)?;
    match (brief, json) {
        (true, true) => print_json(&pgs_brief_json(&rows)),
        (true, false) => print!("{}", pgs_brief_text(&rows)),
        (false, true) => {
            let v = serde_json::to_value(&rows)
                .map_err(|e| CliError(format!("printing the PGs: {e}")))?;
            print_json(&json!({"pg_map": {"pg_stats": v}}));
        }
        (false, false) => print!("{}", crate::admin_cmd::pg_table(&rows)),
    }
    Ok(())
}

fn set(v: &[i32]) -> String {
    let items: Vec<String> = v.iter().map(i32::to_string).collect();
    format!("[{}]", items.join(","))
}

/// The first OSD of `up` (CRUSH's primary), -1 when none.
fn up_primary(up: &[i32]) -> i32 {
    up.iter().copied().find(|&o| o >= 0).unwrap_or(-1)
}

/// `pg dump pgs_brief` as Ceph prints it.
pub fn pgs_brief_text(rows: &[PgRow]) -> String {
    let body: Vec<Vec<String>> = (rows.iter())
        .map(|r| {
            vec![
                r.pg.clone(),
                r.state.to_string(),
                set(&r.up),
                up_primary(&r.up).to_string(),
                set(&r.acting),
                r.primary.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "PG_STAT",
            "STATE",
            "UP",
            "UP_PRIMARY",
            "ACTING",
            "ACTING_PRIMARY",
        ],
        &body,
        &[3, 5],
    )
}

/// `pg dump pgs_brief --json` in Ceph's shape.
pub fn pgs_brief_json(rows: &[PgRow]) -> Value {
    let v: Vec<Value> = (rows.iter())
        .map(|r| {
            json!({
                "pgid": r.pg,
                "state": r.state.to_string(),
                "up": r.up,
                "up_primary": up_primary(&r.up),
                "acting": r.acting,
                "acting_primary": r.primary,
            })
        })
        .collect();
    json!({"pg_stats": v})
}

/// `osd perf`.
pub fn osd_perf(conn: &ConnArgs, json: bool) -> Result<(), CliError> {
    let s = status_report(conn)?;
    match json {
        true => print_json(&osd_perf_json(&s)),
        false => print!("{}", osd_perf_text(&s)),
    }
    Ok(())
}

/// `osd perf` as Ceph prints it: each up OSD's mean commit time over its
/// last report's interval (a transaction applies when it commits).
pub fn osd_perf_text(s: &StatusReport) -> String {
    let rows: Vec<Vec<String>> = (s.osd_counters.iter())
        .map(|c| {
            let ms = (c.commit_latency_us / 1000).to_string();
            vec![c.osd.to_string(), ms.clone(), ms]
        })
        .collect();
    table(
        &["osd", "commit_latency(ms)", "apply_latency(ms)"],
        &rows,
        &[0, 1, 2],
    )
}

/// `osd perf --json` in Ceph's shape.
pub fn osd_perf_json(s: &StatusReport) -> Value {
    let infos: Vec<Value> = (s.osd_counters.iter())
        .map(|c| {
            let ms = c.commit_latency_us / 1000;
            json!({"id": c.osd, "perf_stats": {"commit_latency_ms": ms, "apply_latency_ms": ms}})
        })
        .collect();
    json!({"osdstats": {"osd_perf_infos": infos}})
}

/// `osd dump` as Ceph prints it, from the JSON the monitor answers:
/// epoch, fsid, flags, ratios, a line per pool, per OSD and per override,
/// then Loligo's own: the write-set records and the monitor map with
/// each monitor's key serial.
pub fn osd_dump_text(v: &Value) -> Result<String, CliError> {
    let bad =
        |what: &str, e: serde_json::Error| CliError(format!("osd dump's {what} do not parse: {e}"));
    let osds: Vec<OsdInfo> =
        serde_json::from_value(v["osds"].clone()).map_err(|e| bad("OSDs", e))?;
    let pools: Vec<Pool> =
        serde_json::from_value(v["pools"].clone()).map_err(|e| bad("pools", e))?;
    let strs = |k: &str| -> Vec<String> {
        (v[k].as_array().into_iter().flatten())
            .filter_map(|x| x.as_str().map(String::from))
            .collect()
    };
    let mut o = format!(
        "epoch {}\nfsid {}\n",
        v["epoch"],
        v["fsid"].as_str().unwrap_or("")
    );
    o += &format!("flags {}\n", strs("flags").join(","));
    for r in ["full_ratio", "backfillfull_ratio", "nearfull_ratio"] {
        o += &format!("{r} {}\n", v[r]);
    }
    for p in &pools {
        let kind = match &p.kind {
            PoolKind::Replicated => "replicated".to_string(),
            PoolKind::Erasure { profile } => format!("erasure profile {profile}"),
        };
        o += &format!(
            "pool {} '{}' {kind} size {} min_size {} crush_rule {} object_hash rjenkins pg_num {} pgp_num {}\n",
            p.id, p.name, p.size, p.min_size, p.crush_rule, p.pg_num, p.pgp_num
        );
    }
    let max = osds.iter().map(|o| o.id + 1).max().unwrap_or(0);
    o += &format!("max_osd {max}\n");
    let destroyed: Vec<i64> = (v["destroyed"].as_array().into_iter().flatten())
        .filter_map(Value::as_i64)
        .collect();
    for d in &osds {
        // Ceph's state list: destroyed, exists, a fullness, up.
        let mut flags = vec!["exists"];
        if destroyed.contains(&i64::from(d.id)) {
            flags.insert(0, "destroyed");
        }
        match d.fullness {
            Fullness::Ok => {}
            Fullness::NearFull => flags.push("nearfull"),
            Fullness::BackfillFull => flags.push("backfillfull"),
            Fullness::Full => flags.push("full"),
        }
        if d.up {
            flags.push("up");
        }
        o += &format!(
            "osd.{} {} {} weight {} up_from {} down_at {} {} {}\n",
            d.id,
            if d.up { "up" } else { "down" },
            if d.is_in() { "in" } else { "out" },
            f64::from(d.weight) / 65536.0,
            d.up_from,
            d.down_at,
            if d.addr.is_empty() { "-" } else { &d.addr },
            flags.join(",")
        );
    }
    for (key, what) in [
        ("pg_temp", "osds"),
        ("primary_temp", "osd"),
        ("pg_upmap_items", "items"),
        ("pg_unfound_lost", "epoch"),
    ] {
        for e in v[key].as_array().into_iter().flatten() {
            o += &format!("{key} {} {}\n", e["pg"].as_str().unwrap_or("?"), e[what]);
        }
    }
    for e in v["pg_write_sets"].as_array().into_iter().flatten() {
        o += &format!(
            "pg_write_set {} interval {} {}\n",
            e["pg"].as_str().unwrap_or("?"),
            e["interval"],
            e["osds"]
        );
    }
    for m in v["mons"].as_array().into_iter().flatten() {
        o += &format!(
            "{} {} key_serial {}\n",
            m["name"].as_str().unwrap_or("?"),
            m["addr"].as_str().unwrap_or("?"),
            m["key_serial"]
        );
    }
    Ok(o)
}

/// A cluster log level as the command line takes it.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

impl From<Level> for LogLevel {
    fn from(l: Level) -> LogLevel {
        match l {
            Level::Debug => LogLevel::Debug,
            Level::Info => LogLevel::Info,
            Level::Warn => LogLevel::Warn,
            Level::Error => LogLevel::Error,
        }
    }
}

fn log_entries(
    conn: &ConnArgs,
    n: u32,
    level: LogLevel,
    since: Option<u64>,
) -> Result<Vec<LogEntry>, CliError> {
    let v = call(
        conn,
        MonRequest::Admin(Admin::LogLast {
            n,
            level: Some(level),
            since,
        }),
    )?
    .value;
    serde_json::from_value(v)
        .map_err(|e| CliError(format!("the monitor's log does not parse: {e}")))
}

/// A log entry's time as Ceph prints it (microseconds, UTC).
fn log_stamp(ms: u64) -> String {
    format!("{}000+0000", crate::admin_cmd::utc_stamp(ms))
}

/// A log entry as Ceph prints it: `STAMP NAME (RANK) SEQ : cluster [INF]
/// MESSAGE` (a monitor's name is its rank here).
pub fn log_line(e: &LogEntry) -> String {
    format!(
        "{} {} ({}) {} : cluster {} {}",
        log_stamp(e.stamp_ms),
        e.name,
        e.name,
        e.seq,
        e.level.tag(),
        e.message
    )
}

/// A log entry in the shape of Ceph's `log last -f json`.
pub fn log_json(e: &LogEntry) -> Value {
    json!({
        "name": e.name,
        "stamp": log_stamp(e.stamp_ms),
        "seq": e.seq,
        "channel": "cluster",
        "priority": e.level.tag(),
        "message": e.message,
    })
}

/// `log last [N] [LEVEL]`.
pub fn log_last(conn: &ConnArgs, n: u32, level: Level, json: bool) -> Result<(), CliError> {
    let entries = log_entries(conn, n, level.into(), None)?;
    match json {
        true => print_json(&Value::Array(entries.iter().map(log_json).collect())),
        false => entries.iter().for_each(|e| println!("{}", log_line(e))),
    }
    Ok(())
}

/// `-w`: the status, then each new log entry at `level` or worse, polled
/// once a second, until interrupted.
pub fn watch(conn: &ConnArgs, level: Level) -> Result<(), CliError> {
    let level = LogLevel::from(level);
    // The newest entry of any level: what follows it is new.
    let mut since = (log_entries(conn, 1, LogLevel::Debug, None)?.last()).map(|e| e.seq);
    crate::admin_cmd::status(conn, false, false)?;
    println!();
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
        let entries = match log_entries(conn, 1000, level, since) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("{}", e.0);
                continue;
            }
        };
        for e in &entries {
            println!("{}", log_line(e));
        }
        if let Some(e) = entries.last() {
            since = Some(e.seq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_print_as_cephs() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(4096), "4.0 KiB");
        assert_eq!(bytes(78 << 20), "78 MiB");
        assert_eq!(bytes(1503238553), "1.4 GiB");
        assert_eq!(bytes(32 << 30), "32 GiB");
    }

    #[test]
    fn pool_stats_print_as_cephs() {
        let v = json!([
            {"pool_name": "rbd", "pool_id": 1,
             "recovery": {"degraded_objects": 3, "degraded_total": 30, "degraded_ratio": 0.1},
             "recovery_rate": {"recovering_bytes_per_sec": 2048, "recovering_objects_per_sec": 2},
             "client_io_rate": {"read_bytes_sec": 4096, "read_op_per_sec": 1, "write_op_per_sec": 5}},
            {"pool_name": "idle", "pool_id": 2, "recovery": {}, "recovery_rate": {}, "client_io_rate": {}}
        ]);
        assert_eq!(
            pool_stats_text(&v),
            "pool rbd id 1\n  3/30 objects degraded (10.000%)\n  recovery io 2.0 KiB/s, 2 objects/s\n  client io 4.0 KiB/s rd, 1 op/s rd, 5 op/s wr\n\npool idle id 2\n  nothing is going on\n\n"
        );
    }

    #[test]
    fn tables_align_columns() {
        let t = table(
            &["A", "NUM"],
            &[
                vec!["long name".into(), "7".into()],
                vec!["x".into(), "1234".into()],
            ],
            &[1],
        );
        assert_eq!(t, "A           NUM\nlong name     7\nx          1234\n");
    }

    /// Ceph's line per pool, OSD and override, from the monitor's JSON.
    #[test]
    fn osd_dump_prints_a_line_per_pool_osd_and_override() {
        let m = loligo_types::OsdMap::test_cluster(3, 8);
        let v = json!({
            "epoch": m.epoch,
            "fsid": "f",
            "osds": m.osds.values().collect::<Vec<_>>(),
            "pools": m.pools.values().collect::<Vec<_>>(),
            "pg_temp": [{"pg": "1.3", "osds": [0, 1]}],
            "destroyed": [2],
            "flags": ["noout", "noscrub"],
            "full_ratio": 0.95,
            "mons": [{"name": "mon.0", "addr": "127.0.0.1:6789", "key_serial": "ab"}],
        });
        let t = osd_dump_text(&v).unwrap();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[..3], ["epoch 2", "fsid f", "flags noout,noscrub"]);
        assert!(lines.contains(&"full_ratio 0.95"), "{t}");
        assert!(
            lines.contains(&"pool 1 'p' replicated size 3 min_size 2 crush_rule 0 object_hash rjenkins pg_num 8 pgp_num 8"),
            "{t}"
        );
        assert!(lines.contains(&"max_osd 3"), "{t}");
        assert!(t.contains("\nosd.0 up in weight 1 "), "{t}");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("osd.2 up in weight 1 ")
                    && l.ends_with(" destroyed,exists,up")),
            "{t}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("osd.0 ") && l.ends_with(" exists,up")),
            "{t}"
        );
        assert!(lines.contains(&"pg_temp 1.3 [0,1]"), "{t}");
        assert!(
            lines.contains(&"mon.0 127.0.0.1:6789 key_serial \"ab\""),
            "{t}"
        );
        // A map it cannot read is an error, not a half-printed dump.
        let e = osd_dump_text(&json!({"osds": 7})).unwrap_err();
        assert!(e.0.contains("osd dump's OSDs do not parse"), "{e:?}");
    }

    #[test]
    fn pgs_brief_names_up_and_acting_primaries() {
        let row: PgRow = serde_json::from_value(json!({
            "pg": "1.a", "state": "active+clean", "up": [2, 0, 1],
            "acting": [0, 1, 3], "primary": 0, "objects": 0, "bytes": 0,
            "degraded": 0, "misplaced": 0, "reported_epoch": null
        }))
        .unwrap();
        let t = pgs_brief_text(std::slice::from_ref(&row));
        assert_eq!(
            t,
            "PG_STAT  STATE         UP       UP_PRIMARY  ACTING   ACTING_PRIMARY\n\
             1.a      active+clean  [2,0,1]           2  [0,1,3]               0\n"
        );
        let j = pgs_brief_json(&[row]);
        assert_eq!(j["pg_stats"][0]["up_primary"], 2);
        assert_eq!(j["pg_stats"][0]["acting_primary"], 0);
    }
}
