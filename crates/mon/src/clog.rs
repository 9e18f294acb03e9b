//! The cluster log (Ceph's `log last`, `ceph -w`): what happened to the
//! cluster, one line an event: OSDs booting, going down and out, pools
//! made and changed, flags, and each health check raised, updated and
//! cleared, in Ceph's words.
//!
//! The leader reads each map change against the map it applies to as it
//! proposes it, and health transitions against the health the log last
//! recorded, and commits the lines as a [`LogBatch`] through Raft; every
//! monitor applies it to its [`ClusterLog`], so the log outlives a change
//! of leader, and the next leader carries on from the health the log
//! last recorded. A batch names the sequence number it follows: one
//! built from a log that has moved on since (a proposal that timed out
//! and committed after all, a leader that changed) is skipped, so
//! nothing is said twice. Applying a batch is deterministic: the stamp
//! is the leader's, in the batch.
//!
//! It must never consult the clock while applying, and never hold more
//! than [`LOG_MAX`] entries.

use loligo_monc::protocol::{Health, HealthStatus, LogEntry, LogLevel};
use loligo_types::osdmap::{Change, OsdMap, Pool};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// Entries kept; older ones are dropped first.
pub const LOG_MAX: usize = 2000;

/// What the log last recorded of each health check: its severity and
/// summary.
pub type HealthSeen = BTreeMap<String, (HealthStatus, String)>;

/// The recent cluster events, as every monitor holds them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterLog {
    pub entries: VecDeque<LogEntry>,
    /// The sequence number the next entry gets.
    pub next_seq: u64,
    /// The health checks as the log last said them (None: not yet).
    pub health: Option<HealthSeen>,
}

/// One commit to the log: events seen by monitor `name` at `stamp_ms`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogBatch {
    /// The log's `next_seq` the batch was built from: applied only to a
    /// log still there.
    pub base_seq: u64,
    pub stamp_ms: u64,
    pub name: String,
    pub entries: Vec<(LogLevel, String)>,
    /// The health checks as now said (None: unchanged).
    pub health: Option<HealthSeen>,
}

impl ClusterLog {
    /// Append `b`'s entries in order, oldest dropped past [`LOG_MAX`];
    /// nothing if the log has moved past the batch's base.
    pub fn apply(&mut self, b: &LogBatch) {
        if b.base_seq != self.next_seq {
            return;
        }
        for (level, message) in &b.entries {
            self.entries.push_back(LogEntry {
                seq: self.next_seq,
                stamp_ms: b.stamp_ms,
                name: b.name.clone(),
                level: *level,
                message: message.clone(),
            });
            self.next_seq += 1;
        }
        while self.entries.len() > LOG_MAX {
            self.entries.pop_front();
        }
        if let Some(h) = &b.health {
            self.health = Some(h.clone());
        }
        debug_assert!(self.entries.len() <= LOG_MAX);
        debug_assert!(self
            .entries
            .back()
            .is_none_or(|e| e.seq + 1 == self.next_seq));
    }

    /// The last `n` entries at `level` or worse with a sequence number
    /// after `since`, oldest first.
    pub fn last(&self, n: usize, level: LogLevel, since: Option<u64>) -> Vec<LogEntry> {
        let mut v: Vec<LogEntry> = (self.entries.iter().rev())
            .filter(|e| e.level >= level && since.is_none_or(|s| e.seq > s))
            .take(n)
            .cloned()
            .collect();
        v.reverse();
        v
    }
}

/// The health checks as the log records them.
pub fn health_seen(h: &Health) -> HealthSeen {
    (h.checks.iter())
        .map(|(code, c)| (code.clone(), (c.severity, c.summary.message.clone())))
        .collect()
}

fn level_of(s: HealthStatus) -> LogLevel {
    match s {
        HealthStatus::Ok => LogLevel::Info,
        HealthStatus::Warn => LogLevel::Warn,
        HealthStatus::Err => LogLevel::Error,
    }
}

/// What changed between the health the log last said (`was`) and
/// `now`, in Ceph's words: a check failed, updated or cleared, and the
/// cluster healthy again.
pub fn health_events(was: &HealthSeen, now: &HealthSeen) -> Vec<(LogLevel, String)> {
    let mut out = Vec::new();
    for (code, (sev, msg)) in now {
        match was.get(code) {
            None => out.push((
                level_of(*sev),
                format!("Health check failed: {msg} ({code})"),
            )),
            Some(w) if w != &(*sev, msg.clone()) => out.push((
                level_of(*sev),
                format!("Health check update: {msg} ({code})"),
            )),
            Some(_) => {}
        }
    }
    for (code, (_, msg)) in was {
        if !now.contains_key(code) {
            out.push((
                LogLevel::Info,
                format!("Health check cleared: {code} (was: {msg})"),
            ));
        }
    }
    if now.is_empty() && !was.is_empty() {
        out.push((LogLevel::Info, "Cluster is now healthy".into()));
    }
    out
}

fn pool_name(m: &OsdMap, id: u64) -> String {
    m.pools
        .get(&id)
        .map_or(format!("pool {id}"), |p| format!("pool '{}'", p.name))
}

/// A pool's settings that changed from `a` to `b`, as `key a -> b`.
fn pool_diff(a: &Pool, b: &Pool) -> Vec<String> {
    let mut d = Vec::new();
    let mut num = |k: &str, x: u64, y: u64| {
        if x != y {
            d.push(format!("{k} {x} -> {y}"));
        }
    };
    num("size", a.size.into(), b.size.into());
    num("min_size", a.min_size.into(), b.min_size.into());
    num("pg_num", a.pg_num.into(), b.pg_num.into());
    num("pgp_num", a.pgp_num.into(), b.pgp_num.into());
    if a.crush_rule != b.crush_rule {
        d.push(format!("crush_rule {} -> {}", a.crush_rule, b.crush_rule));
    }
    if a.name != b.name {
        d.push(format!("renamed to '{}'", b.name));
    }
    d
}

/// The log line of one change to `before` (the map it applies to), if
/// it is one an operator would want: PG overrides and write-set
/// records, which recovery makes by the thousand, are not.
pub fn change_event(before: &OsdMap, c: &Change) -> Option<(LogLevel, String)> {
    use LogLevel::{Debug, Info, Warn};
    let osd_up = |id: i32| before.osds.get(&id).is_some_and(|o| o.up);
    let line = match c {
        Change::OsdBoot { id, addr, .. } => (Info, format!("osd.{id} {addr} boot")),
        Change::OsdDown { id } if osd_up(*id) => (Info, format!("osd.{id} marked down")),
        Change::OsdOut { id } => (Info, format!("osd.{id} marked out")),
        Change::OsdAutoOut { id } => (
            Info,
            format!("Marking osd.{id} out (down longer than the down-out interval)"),
        ),
        Change::OsdIn { id } => (Info, format!("osd.{id} marked in")),
        Change::OsdReweight { id, weight } => (
            Info,
            format!("osd.{id} reweighted to {:.5}", f64::from(*weight) / 65536.0),
        ),
        Change::OsdRemove { id } => (Info, format!("osd.{id} removed")),
        Change::OsdDestroy { id } => (Warn, format!("osd.{id} destroyed")),
        Change::OsdNew { id } => (Info, format!("osd.{id} recreated to replace its disk")),
        Change::OsdLost { id } => (Warn, format!("osd.{id} marked lost")),
        Change::CrushAddOsd { id, host, .. } => (Info, format!("osd.{id} added under host {host}")),
        Change::CrushMove { name, parent } => (Info, format!("crush: {name} moved under {parent}")),
        Change::CrushRemove { name } => (Info, format!("crush: {name} removed")),
        Change::CrushSet(_) => (Info, "crush map installed".into()),
        Change::CrushSetLocation { id, location } => {
            let loc: Vec<String> = location.iter().map(|(k, v)| format!("{k}={v}")).collect();
            (Info, format!("osd.{id} moved to {}", loc.join(" ")))
        }
        Change::CrushReweight { id, weight } => (
            Info,
            format!("osd.{id} crush weight {:.5}", f64::from(*weight) / 65536.0),
        ),
        Change::PoolCreate(p) => (Info, format!("pool '{}' created", p.name)),
        Change::PoolDelete { id } => (Info, format!("{} removed", pool_name(before, *id))),
        Change::PoolUpdate(p) => {
            let old = before.pools.get(&p.id)?;
            let d = pool_diff(old, p);
            let only_pgp = d.iter().all(|x| x.starts_with("pgp_num"));
            match (d.is_empty(), only_pgp) {
                (true, _) => return None,
                // pgp_num moves toward pg_num in steps: routine.
                (false, true) => (Debug, format!("pool '{}' {}", old.name, d.join(", "))),
                (false, false) => (Info, format!("pool '{}' {}", old.name, d.join(", "))),
            }
        }
        Change::EcProfileSet(e) => (Info, format!("erasure-code profile '{}' set", e.name)),
        Change::EcProfileRm { name } => (Info, format!("erasure-code profile '{name}' removed")),
        Change::AuthPut { entity, .. } => (Info, format!("auth: {entity} recorded")),
        Change::AuthRm { entity } => (Info, format!("auth: {entity} removed")),
        Change::PgMarkUnfoundLost { pg } => (Warn, format!("pg {pg} unfound objects marked lost")),
        Change::MonMap { mons } => {
            let m: Vec<String> = mons.iter().map(|(id, a)| format!("mon.{id} {a}")).collect();
            (Info, format!("monmap: {}", m.join(", ")))
        }
        Change::OsdFlag { flag, on } => (
            Info,
            format!("{} is {}", flag.name(), if *on { "set" } else { "unset" }),
        ),
        Change::FullRatio { kind, ppm } => (
            Info,
            format!("{}_ratio {}", kind.word(), f64::from(*ppm) / 1e6),
        ),
        Change::Balancer { on } => (Info, format!("balancer {}", if *on { "on" } else { "off" })),
        Change::PgMergeTarget { pool, to } => (
            Info,
            format!("{} merging its PGs to {to}", pool_name(before, *pool)),
        ),
        Change::PgMerged { pool, .. } => (Info, format!("{} PGs merged", pool_name(before, *pool))),
        Change::PoolOpts { pool, opts } => {
            let erasure = (before.pools.get(pool))
                .is_some_and(|p| matches!(p.kind, loligo_types::PoolKind::Erasure { .. }));
            let mut line = format!(
                "{} compression_mode {} compression_algorithm {}",
                pool_name(before, *pool),
                opts.compression_mode,
                opts.compression_algorithm,
            );
            if erasure {
                line += &format!(" read_coalesce {}", opts.read_coalesce);
            }
            (Info, line)
        }
        Change::OsdDown { .. }
        | Change::OsdFullness { .. }
        | Change::PgTemp { .. }
        | Change::PrimaryTemp { .. }
        | Change::PgUpmapItems { .. }
        | Change::RecordWriteSet { .. }
        | Change::PgMergeReady { .. } => return None,
    };
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_types::Incremental;

    fn batch(log: &ClusterLog, entries: &[(LogLevel, &str)]) -> LogBatch {
        LogBatch {
            base_seq: log.next_seq,
            stamp_ms: 1_700_000_000_000,
            name: "mon.0".into(),
            entries: entries.iter().map(|(l, m)| (*l, m.to_string())).collect(),
            health: None,
        }
    }

    #[test]
    fn entries_are_numbered_filtered_and_bounded() {
        let mut log = ClusterLog::default();
        log.apply(&batch(
            &log,
            &[
                (LogLevel::Info, "a"),
                (LogLevel::Debug, "b"),
                (LogLevel::Warn, "c"),
            ],
        ));
        let d = batch(&log, &[(LogLevel::Error, "d")]);
        log.apply(&d);
        log.apply(&d);
        assert_eq!(
            log.next_seq, 4,
            "a batch applied again (committed twice) adds nothing"
        );
        let msgs = |v: Vec<LogEntry>| {
            v.into_iter()
                .map(|e| (e.seq, e.message))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            msgs(log.last(10, LogLevel::Info, None)),
            [(0, "a".into()), (2, "c".into()), (3, "d".into())]
        );
        assert_eq!(
            msgs(log.last(2, LogLevel::Debug, None)),
            [(2, "c".into()), (3, "d".into())]
        );
        assert_eq!(
            msgs(log.last(10, LogLevel::Warn, Some(2))),
            [(3, "d".into())]
        );
        for i in 0..LOG_MAX {
            log.apply(&batch(&log, &[(LogLevel::Info, &i.to_string())]));
        }
        assert_eq!(log.entries.len(), LOG_MAX);
        assert_eq!(log.next_seq, LOG_MAX as u64 + 4);
        assert_eq!(log.entries[0].seq, 4, "the oldest went first");
    }

    fn seen(checks: &[(&str, HealthStatus, &str)]) -> HealthSeen {
        (checks.iter())
            .map(|(c, s, m)| (c.to_string(), (*s, m.to_string())))
            .collect()
    }

    #[test]
    fn health_changes_are_said_in_cephs_words() {
        let none = seen(&[]);
        let down = seen(&[("OSD_DOWN", HealthStatus::Warn, "1 osds down")]);
        assert_eq!(
            health_events(&none, &down),
            [(
                LogLevel::Warn,
                "Health check failed: 1 osds down (OSD_DOWN)".to_string()
            )]
        );
        assert!(health_events(&down, &down).is_empty(), "nothing new");
        let two = seen(&[("OSD_DOWN", HealthStatus::Warn, "2 osds down")]);
        assert_eq!(
            health_events(&down, &two),
            [(
                LogLevel::Warn,
                "Health check update: 2 osds down (OSD_DOWN)".to_string()
            )]
        );
        let full = seen(&[("OSD_FULL", HealthStatus::Err, "1 full osd(s)")]);
        assert_eq!(
            health_events(&two, &full),
            [
                (
                    LogLevel::Error,
                    "Health check failed: 1 full osd(s) (OSD_FULL)".to_string()
                ),
                (
                    LogLevel::Info,
                    "Health check cleared: OSD_DOWN (was: 2 osds down)".to_string()
                ),
            ]
        );
        assert_eq!(
            health_events(&full, &none).last(),
            Some(&(LogLevel::Info, "Cluster is now healthy".to_string()))
        );
    }

    #[test]
    fn map_changes_are_read_against_the_map_they_apply_to() {
        let mut m = OsdMap::test_cluster(3, 8);
        let line = |m: &OsdMap, c: Change| change_event(m, &c).map(|(_, s)| s);
        assert_eq!(
            line(&m, Change::OsdDown { id: 1 }),
            Some("osd.1 marked down".into())
        );
        m.apply(&Incremental {
            epoch: m.epoch + 1,
            changes: vec![Change::OsdDown { id: 1 }],
        })
        .unwrap();
        assert_eq!(line(&m, Change::OsdDown { id: 1 }), None, "down already");
        assert_eq!(
            line(&m, Change::PoolDelete { id: 1 }),
            Some("pool 'p' removed".into())
        );
        let mut grown = m.pools[&1].clone();
        grown.pg_num = 16;
        assert_eq!(
            change_event(&m, &Change::PoolUpdate(grown.clone())),
            Some((LogLevel::Info, "pool 'p' pg_num 8 -> 16".into()))
        );
        let mut stepped = m.pools[&1].clone();
        stepped.pgp_num = 4;
        assert_eq!(
            change_event(&m, &Change::PoolUpdate(stepped)).map(|(l, _)| l),
            Some(LogLevel::Debug),
            "pgp_num steps are routine"
        );
        assert_eq!(line(&m, Change::PoolUpdate(m.pools[&1].clone())), None);
        let pg = loligo_types::PgId { pool: 1, ps: 0 };
        assert_eq!(
            line(
                &m,
                Change::PgTemp {
                    pg,
                    osds: vec![0, 2]
                }
            ),
            None
        );
        assert_eq!(
            line(
                &m,
                Change::OsdFlag {
                    flag: loligo_types::osdmap::OsdFlag::NoOut,
                    on: true
                }
            ),
            Some("noout is set".into())
        );
    }
}
