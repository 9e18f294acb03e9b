//! Prometheus' text exposition format: a writer that gives each family
//! its `# HELP` and `# TYPE` once, then its samples, and the OSD counter
//! families under Ceph's names (served by the monitors for every OSD and
//! by each OSD for itself).
//!
//! Pure: it only formats. It must never emit a name or label the format
//! does not allow (checked in debug builds) nor a family twice in one
//! page (the caller's duty; the monitors' tests check their pages).

use crate::OsdReport;
use std::fmt::Write as _;

/// A metric family's type, as the text format names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
    Untyped,
}

/// A text-format writer: each family's `# HELP` and `# TYPE` once, then
/// its samples.
#[derive(Default)]
pub struct Text {
    out: String,
    family: String,
}

impl Text {
    /// Start family `name`; samples until the next call belong to it.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) -> &mut Self {
        debug_assert!(valid_name(name), "metric name {name}");
        let kind = match kind {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
            Kind::Untyped => "untyped",
        };
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        self.family = name.to_string();
        self
    }

    /// One sample of the current family.
    pub fn sample(&mut self, labels: &[(&str, &str)], value: f64) -> &mut Self {
        debug_assert!(!self.family.is_empty(), "a sample before any family");
        self.out.push_str(&self.family);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                debug_assert!(valid_name(k), "label name {k}");
                if i > 0 {
                    self.out.push(',');
                }
                let v = (v.replace('\\', "\\\\"))
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
                let _ = write!(self.out, "{k}=\"{v}\"");
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", number(value));
        self
    }

    /// A family of one sample without labels.
    pub fn single(&mut self, name: &str, kind: Kind, help: &str, value: f64) -> &mut Self {
        self.family(name, kind, help).sample(&[], value)
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// A value as the text format spells it (Go's float syntax).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

fn valid_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// The OSD counter families (Ceph's `ceph_osd_op_r`, ... and Loligo's
/// own), one sample per report, labelled `ceph_daemon="osd.N"`: what a
/// monitor's `/metrics` sends for every up OSD, and each OSD's own
/// endpoint for itself.
pub fn osd_counters(t: &mut Text, reports: &[&OsdReport]) {
    type Get = fn(&OsdReport) -> f64;
    let families: [(&str, Kind, &str, Get); 27] = [
        ("ceph_osd_stat_bytes", Kind::Gauge, "OSD size", |r| {
            r.bytes_total as f64
        }),
        ("ceph_osd_stat_bytes_used", Kind::Gauge, "Used space", |r| {
            r.bytes_used as f64
        }),
        (
            "ceph_osd_op_r",
            Kind::Counter,
            "Client read operations",
            |r| r.read_ops as f64,
        ),
        (
            "ceph_osd_op_w",
            Kind::Counter,
            "Client write operations",
            |r| r.write_ops as f64,
        ),
        (
            "ceph_osd_op_r_out_bytes",
            Kind::Counter,
            "Client data read",
            |r| r.read_bytes as f64,
        ),
        (
            "ceph_osd_op_w_in_bytes",
            Kind::Counter,
            "Client data written",
            |r| r.write_bytes as f64,
        ),
        (
            "ceph_osd_op_r_latency_sum",
            Kind::Counter,
            "Latency of read operation (seconds, summed)",
            |r| r.read_latency_us as f64 / 1e6,
        ),
        (
            "ceph_osd_op_r_latency_count",
            Kind::Counter,
            "Latency of read operation (count)",
            |r| r.read_ops as f64,
        ),
        (
            "ceph_osd_op_w_latency_sum",
            Kind::Counter,
            "Latency of write operation (seconds, summed)",
            |r| r.write_latency_us as f64 / 1e6,
        ),
        (
            "ceph_osd_op_w_latency_count",
            Kind::Counter,
            "Latency of write operation (count)",
            |r| r.write_ops as f64,
        ),
        (
            "ceph_osd_commit_latency_ms",
            Kind::Gauge,
            "OSD stat commit_latency_ms (mean over the last report's interval)",
            |r| r.commit_latency_us as f64 / 1e3,
        ),
        (
            "ceph_osd_apply_latency_ms",
            Kind::Gauge,
            "OSD stat apply_latency_ms (a transaction applies when it commits)",
            |r| r.commit_latency_us as f64 / 1e3,
        ),
        (
            "ceph_osd_recovery_ops",
            Kind::Counter,
            "Started recovery operations",
            |r| r.recovery_objects as f64,
        ),
        (
            "ceph_osd_recovery_bytes",
            Kind::Counter,
            "Recovered bytes",
            |r| r.recovery_bytes as f64,
        ),
        (
            "loligo_osd_device_read_bytes",
            Kind::Counter,
            "Bytes the OSD's store read from its device",
            |r| r.device_read_bytes as f64,
        ),
        (
            "loligo_osd_rebuilt_shards",
            Kind::Counter,
            "Erasure-coded shards this OSD rebuilt as primary",
            |r| r.rebuilt_shards as f64,
        ),
        (
            "loligo_osd_rebuild_theory_bytes",
            Kind::Counter,
            "Bytes its erasure-coded rebuilds' plans read in theory (Zigzag: element-level repair)",
            |r| r.rebuild_theory_bytes as f64,
        ),
        (
            "loligo_osd_rebuild_fetched_bytes",
            Kind::Counter,
            "Bytes its erasure-coded rebuilds fetched from other shards",
            |r| r.rebuild_fetched_bytes as f64,
        ),
        (
            "loligo_osd_shard_bytes_sent",
            Kind::Counter,
            "Shard bytes it sent in answer to other OSDs' shard reads",
            |r| r.shard_bytes_sent as f64,
        ),
        (
            "loligo_osd_msgr_send_bytes",
            Kind::Counter,
            "Frame bytes it sent on its data connections (client ops and OSD-to-OSD calls)",
            |r| r.msgr_send_bytes as f64,
        ),
        (
            "loligo_osd_msgr_recv_bytes",
            Kind::Counter,
            "Frame bytes it received on its data connections",
            |r| r.msgr_recv_bytes as f64,
        ),
        (
            "loligo_osd_backfills",
            Kind::Counter,
            "Backfills it finished as primary",
            |r| r.backfills as f64,
        ),
        (
            "loligo_osd_backfills_by_merkle_tree",
            Kind::Counter,
            "Backfills it finished that compared Merkle trees and scanned only differing leaves",
            |r| r.backfills_by_tree as f64,
        ),
        (
            "loligo_osd_backfill_merkle_nodes",
            Kind::Counter,
            "Merkle tree nodes its finished backfills' targets sent",
            |r| r.backfill_tree_nodes as f64,
        ),
        (
            "loligo_osd_backfill_objects_listed",
            Kind::Counter,
            "Objects its finished backfills' targets listed in scans",
            |r| r.backfill_listed as f64,
        ),
        (
            "loligo_osd_backfill_objects_copied",
            Kind::Counter,
            "Objects its finished backfills copied or removed",
            |r| r.backfill_copied as f64,
        ),
        (
            "loligo_osd_kv_calls",
            Kind::Counter,
            "Calls of the key-value store's object class it served as primary",
            |r| r.kv_calls as f64,
        ),
    ];
    for (name, kind, help, get) in families {
        t.family(name, kind, help);
        for r in reports {
            t.sample(&[("ceph_daemon", &format!("osd.{}", r.osd))], get(r));
        }
    }
}
