//! `loligo osd df` (Ceph's `ceph osd df`): each OSD's CRUSH weight,
//! reweight, space, use, variance from the mean use, and PG count, with
//! the spread over all of them. Space comes from the OSDs' last reports
//! (the monitors' status), PG counts from the live map: each PG counts on
//! every OSD of its up set (CRUSH, then upmap items), as the balanced
//! placement work counts them.
//!
//! It must never change anything: it only reads the map and the status.

use crate::admin_cmd::{call, print_json};
use crate::config::ConnArgs;
use crate::CliError;
use loligo_monc::protocol::{Admin, MonRequest, OsdCounters, StatusReport};
use loligo_types::{OsdMap, PgId};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// One OSD's row.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub id: i32,
    pub crush_weight: f64,
    pub reweight: f64,
    pub size: u64,
    pub used: u64,
    pub pgs: u64,
    pub up: bool,
}

impl Row {
    /// Share of its space in use, in percent (0 with no space known).
    pub fn utilization(&self) -> f64 {
        match self.size {
            0 => 0.0,
            s => self.used as f64 * 100.0 / s as f64,
        }
    }
}

/// The spread over the OSDs that hold data (up and in).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    pub size: u64,
    pub used: u64,
    /// Mean utilization (percent, weighted by space, as Ceph's).
    pub average_utilization: f64,
    pub min_var: f64,
    pub max_var: f64,
    /// Standard deviation of the utilization (Ceph's `dev`).
    pub dev: f64,
    /// Mean and standard deviation of the PG counts.
    pub pgs_mean: f64,
    pub pgs_dev: f64,
}

/// Each OSD of `map` with its space from its last report (`counters`)
/// and its PG count; the summary over those up and in.
pub fn table(map: &OsdMap, counters: &[OsdCounters]) -> Result<(Vec<Row>, Summary), String> {
    let mut pgs: BTreeMap<i32, u64> = map.osds.keys().map(|&o| (o, 0)).collect();
    let mut placer = map.placer().map_err(|e| e.to_string())?;
    for pool in map.pools.values() {
        for ps in 0..pool.pg_num {
            let pm = (placer.map_pg(PgId { pool: pool.id, ps })).map_err(|e| e.to_string())?;
            for o in pm.up {
                if let Some(n) = pgs.get_mut(&o) {
                    *n += 1;
                }
            }
        }
    }
    let space: BTreeMap<i32, (u64, u64)> = (counters.iter())
        .map(|c| (c.osd, (c.bytes_total, c.bytes_used)))
        .collect();
    let weights: BTreeMap<i32, u32> = (loligo_types::crush_edit::tree(&map.crush).into_iter())
        .filter(|r| r.1 >= 0)
        .map(|(_, id, _, _, w)| (id, w))
        .collect();
    let rows: Vec<Row> = (map.osds.values())
        .map(|o| {
            let (size, used) = space.get(&o.id).copied().unwrap_or((0, 0));
            Row {
                id: o.id,
                crush_weight: weights.get(&o.id).copied().unwrap_or(0) as f64 / 65536.0,
                reweight: f64::from(o.weight) / 65536.0,
                size,
                used,
                pgs: pgs.get(&o.id).copied().unwrap_or(0),
                up: o.up,
            }
        })
        .collect();
    let s = summary(&rows);
    Ok((rows, s))
}

fn summary(rows: &[Row]) -> Summary {
    let live: Vec<&Row> = rows.iter().filter(|r| r.up && r.reweight > 0.0).collect();
    let mut s = Summary {
        size: live.iter().map(|r| r.size).sum(),
        used: live.iter().map(|r| r.used).sum(),
        ..Summary::default()
    };
    if live.is_empty() {
        return s;
    }
    let n = live.len() as f64;
    let mean_dev = |xs: &[f64]| {
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt())
    };
    let counts: Vec<f64> = live.iter().map(|r| r.pgs as f64).collect();
    (s.pgs_mean, s.pgs_dev) = mean_dev(&counts);
    let utils: Vec<f64> = live.iter().map(|r| r.utilization()).collect();
    s.dev = mean_dev(&utils).1;
    if s.size > 0 {
        s.average_utilization = s.used as f64 * 100.0 / s.size as f64;
    }
    s.min_var = live.iter().map(|r| s.var(r)).fold(f64::INFINITY, f64::min);
    s.max_var = live.iter().map(|r| s.var(r)).fold(0.0, f64::max);
    s
}

impl Summary {
    /// Row `r`'s use against the mean (Ceph's VAR; 0 with none known).
    pub fn var(&self, r: &Row) -> f64 {
        match self.average_utilization {
            a if a > 0.0 => r.utilization() / a,
            _ => 0.0,
        }
    }
}

/// One line of `osd df tree`: a CRUSH bucket with the sums of the OSDs
/// under it, or an OSD's own row, at its depth in the hierarchy.
#[derive(Clone, Debug, PartialEq)]
pub struct TreeLine {
    pub depth: usize,
    /// CRUSH type name (`root`, `host`, ..., `osd`) and item name.
    pub kind: String,
    pub name: String,
    /// A bucket's `id` is its negative CRUSH id, its `reweight` 0.
    pub row: Row,
    /// A bucket's direct children's ids (empty for an OSD).
    pub children: Vec<i32>,
}

impl TreeLine {
    pub fn is_bucket(&self) -> bool {
        self.row.id < 0
    }
}

/// `rows` placed in the CRUSH hierarchy of `map`, each bucket summing
/// the OSD rows under it (an OSD in several buckets counts in each).
pub fn tree(map: &OsdMap, rows: &[Row]) -> Vec<TreeLine> {
    let items = loligo_types::crush_edit::tree(&map.crush);
    let row_of = |id: i32, weight: u32| {
        let w = f64::from(weight) / 65536.0;
        (rows.iter().find(|r| r.id == id).cloned()).unwrap_or(Row {
            id,
            crush_weight: w,
            reweight: 0.0,
            size: 0,
            used: 0,
            pgs: 0,
            up: false,
        })
    };
    (items.iter().enumerate())
        .map(|(i, (depth, id, kind, name, weight))| {
            let under = items[i + 1..].iter().take_while(|it| it.0 > *depth);
            let row = match *id >= 0 {
                true => row_of(*id, *weight),
                false => {
                    let osds: Vec<Row> = (under.clone())
                        .filter(|it| it.1 >= 0)
                        .map(|it| row_of(it.1, it.4))
                        .collect();
                    Row {
                        id: *id,
                        crush_weight: f64::from(*weight) / 65536.0,
                        reweight: 0.0,
                        size: osds.iter().map(|r| r.size).sum(),
                        used: osds.iter().map(|r| r.used).sum(),
                        pgs: osds.iter().map(|r| r.pgs).sum(),
                        up: true,
                    }
                }
            };
            TreeLine {
                depth: *depth,
                kind: kind.clone(),
                name: name.clone(),
                row,
                children: under
                    .filter(|it| it.0 == depth + 1)
                    .map(|it| it.1)
                    .collect(),
            }
        })
        .collect()
}

/// `osd df [tree] [--json]`.
pub fn run(conn: &ConnArgs, as_tree: bool, json: bool) -> Result<(), CliError> {
    let r = call(conn, MonRequest::GetMap)?;
    let bytes = (r.map).ok_or_else(|| CliError("the monitor answered without a map".into()))?;
    let map = loligo_types::osdmap::decode_map(&bytes).map_err(|e| CliError(e.to_string()))?;
    let v = call(conn, MonRequest::Admin(Admin::Status))?.value;
    let status: StatusReport =
        serde_json::from_value(v).map_err(|e| CliError(format!("status: {e}")))?;
    let (rows, s) = table(&map, &status.osd_counters).map_err(CliError)?;
    let lines = as_tree.then(|| tree(&map, &rows));
    match json {
        true => print_json(&as_json(&rows, lines.as_deref(), &s)),
        false => print!("{}", text(&rows, lines.as_deref(), &s)),
    }
    Ok(())
}

/// The table as Ceph prints it: a row per OSD (or per line of the
/// tree, buckets with `-` for what only an OSD has), then the totals
/// and the spread.
pub fn text(rows: &[Row], tree: Option<&[TreeLine]>, s: &Summary) -> String {
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    let mut out = format!(
        "{:>4} {:>8} {:>8} {:>9} {:>9} {:>9} {:>6} {:>5} {:>4}  {:<6}{}\n",
        "ID",
        "WEIGHT",
        "REWEIGHT",
        "SIZE",
        "USE",
        "AVAIL",
        "%USE",
        "VAR",
        "PGS",
        "STATUS",
        if tree.is_some() { "  TYPE NAME" } else { "" }
    );
    let line = |r: &Row, name: Option<String>, bucket: bool| {
        let dash = |v: String| if bucket { "-".to_string() } else { v };
        let status = match (bucket, r.up) {
            (true, _) => "",
            (false, true) => "up",
            (false, false) => "down",
        };
        let name = name.map(|n| format!("  {n}")).unwrap_or_default();
        format!(
            "{:>4} {:>8.5} {:>8} {:>5.1} GiB {:>5.1} GiB {:>5.1} GiB {:>6.2} {:>5.2} {:>4}  {:<6}{name}",
            r.id,
            r.crush_weight,
            dash(format!("{:.5}", r.reweight)),
            gib(r.size),
            gib(r.used),
            gib(r.size.saturating_sub(r.used)),
            r.utilization(),
            s.var(r),
            dash(r.pgs.to_string()),
            status,
        )
        .trim_end()
        .to_string()
            + "\n"
    };
    match tree {
        Some(lines) => {
            for l in lines {
                let name = format!("{}{} {}", "    ".repeat(l.depth), l.kind, l.name);
                out += &line(&l.row, Some(name), l.is_bucket());
            }
        }
        None => rows.iter().for_each(|r| out += &line(r, None, false)),
    }
    out += &format!(
        "TOTAL {:.1} GiB, {:.1} GiB used, {:.1} GiB avail, {:.2}% used\n",
        gib(s.size),
        gib(s.used),
        gib(s.size.saturating_sub(s.used)),
        s.average_utilization
    );
    out += &format!(
        "MIN/MAX VAR: {:.2}/{:.2}  STDDEV: {:.2}  PGS MEAN: {:.2}  PGS STDDEV: {:.2}\n",
        s.min_var, s.max_var, s.dev, s.pgs_mean, s.pgs_dev
    );
    out
}

/// One node of Ceph's `osd df -f json` (sizes in KiB).
fn node(r: &Row, s: &Summary, kind: &str, name: &str) -> Value {
    json!({
        "id": r.id,
        "name": name,
        "type": kind,
        "crush_weight": r.crush_weight,
        "reweight": r.reweight,
        "kb": r.size / 1024,
        "kb_used": r.used / 1024,
        "kb_avail": r.size.saturating_sub(r.used) / 1024,
        "utilization": r.utilization(),
        "var": s.var(r),
        "pgs": r.pgs,
        "status": if r.up { "up" } else { "down" },
    })
}

/// Ceph's `osd df [tree] -f json` shape, with the PG spread: a tree's
/// nodes are its lines, buckets with their `children` and `depth`.
fn as_json(rows: &[Row], tree: Option<&[TreeLine]>, s: &Summary) -> Value {
    let nodes: Vec<Value> = match tree {
        None => (rows.iter())
            .map(|r| node(r, s, "osd", &format!("osd.{}", r.id)))
            .collect(),
        Some(lines) => (lines.iter())
            .map(|l| {
                let mut n = node(&l.row, s, &l.kind, &l.name);
                n["depth"] = json!(l.depth);
                if l.is_bucket() {
                    n["children"] = json!(l.children);
                    n.as_object_mut().map(|o| o.remove("status"));
                }
                n
            })
            .collect(),
    };
    json!({
        "nodes": nodes,
        "summary": {
            "total_kb": s.size / 1024,
            "total_kb_used": s.used / 1024,
            "total_kb_avail": s.size.saturating_sub(s.used) / 1024,
            "average_utilization": s.average_utilization,
            "min_var": s.min_var,
            "max_var": s.max_var,
            "dev": s.dev,
            "pgs_mean": s.pgs_mean,
            "pgs_dev": s.pgs_dev,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_types::{Change, Incremental};

    /// Four OSDs of 100 MiB using 10, 20, 30 and 40 MiB.
    fn counters() -> Vec<OsdCounters> {
        (0..4)
            .map(|osd| OsdCounters {
                osd,
                bytes_total: 100 << 20,
                bytes_used: (10 + 10 * osd as u64) << 20,
                ..Default::default()
            })
            .collect()
    }

    /// PG counts are the up sets' (upmap items included), space the
    /// reports', the spread over OSDs up and in only.
    #[test]
    fn rows_count_up_sets_and_the_summary_skips_out_osds() {
        let mut m = OsdMap::test_cluster(4, 16);
        let counters = counters();
        let (rows, s) = table(&m, &counters).unwrap();
        assert_eq!(rows.iter().map(|r| r.pgs).sum::<u64>(), 48);
        assert_eq!(rows[3].utilization(), 40.0);
        assert_eq!(s.average_utilization, 25.0);
        assert!((s.pgs_mean - 12.0).abs() < 1e-9);
        let counts: Vec<f64> = rows.iter().map(|r| r.pgs as f64).collect();
        let dev = (counts.iter().map(|c| (c - 12.0).powi(2)).sum::<f64>() / 4.0).sqrt();
        assert!((s.pgs_dev - dev).abs() < 1e-9);
        assert!((s.min_var - 0.4).abs() < 1e-9 && (s.max_var - 1.6).abs() < 1e-9);
        // Out: its row stays, the spread leaves it out.
        m.apply(&Incremental {
            epoch: 3,
            changes: vec![Change::OsdOut { id: 3 }],
        })
        .unwrap();
        let (rows, s) = table(&m, &counters).unwrap();
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[3].pgs, 0);
        assert_eq!(s.size, 300 << 20);
        assert!((s.pgs_mean - 16.0).abs() < 1e-9);
    }

    /// `osd df tree`: each bucket sums the OSDs under it; OSDs keep
    /// their own rows; the text marks what a bucket lacks with `-`.
    #[test]
    fn the_tree_sums_each_buckets_osds() {
        let m = OsdMap::test_cluster(4, 16);
        let counters = counters();
        let (rows, s) = table(&m, &counters).unwrap();
        let lines = tree(&m, &rows);
        assert_eq!(lines.len(), 9, "{lines:?}");
        let root = &lines[0];
        assert_eq!((root.depth, root.kind.as_str()), (0, "root"));
        assert!(root.is_bucket());
        assert_eq!(root.row.size, 400 << 20);
        assert_eq!(root.row.used, 100 << 20);
        assert_eq!(root.row.pgs, 48);
        assert_eq!(root.children.len(), 4);
        let hosts: Vec<&TreeLine> = lines.iter().filter(|l| l.kind == "host").collect();
        assert_eq!(hosts.len(), 4);
        assert!(hosts.iter().all(|h| root.children.contains(&h.row.id)));
        for h in hosts {
            let i = lines.iter().position(|l| l == h).unwrap();
            let osd = &lines[i + 1];
            assert_eq!((osd.depth, osd.kind.as_str()), (2, "osd"));
            assert_eq!(h.children, [osd.row.id]);
            assert_eq!(
                (h.row.size, h.row.used, h.row.pgs),
                (osd.row.size, osd.row.used, osd.row.pgs)
            );
        }
        let t = text(&rows, Some(&lines), &s);
        let first = t.lines().nth(1).unwrap();
        assert!(first.ends_with("  root default"), "{t}");
        assert!(
            first.contains(" - "),
            "a bucket has no reweight or PG count: {t}"
        );
        assert!(
            t.lines()
                .any(|l| l.contains(" up ") && l.ends_with("        osd osd.3")),
            "{t}"
        );
        let j = as_json(&rows, Some(&lines), &s);
        assert_eq!(j["nodes"][0]["children"].as_array().unwrap().len(), 4);
        assert_eq!(j["nodes"][0]["kb"], 400 * 1024);
    }
}
