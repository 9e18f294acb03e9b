//! What an OSD tells the monitors besides booting: the write sets its PGs
//! ask to record (batched: an OSD failure moves many PGs at once), pg_temp
//! requests, periodic reports (PG stats, usage, I/O counters; also the
//! liveness beacon), a clean stop, and booting again when a map wrongly
//! marks this running OSD down.
//!
//! It must never change a PG: a recorded write set goes back to the PG's
//! control lane, and the PG decides.

use super::mailbox::Mailbox;
use super::{lock, OsdShared};
use crate::pg::Input;
use loligo_monc::protocol::{MonRequest, RecordAsk, WRITE_SETS_PER_REQUEST_MAX};
use loligo_monc::MonClient;
use loligo_types::{Epoch, OsdReport, PgId};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Pause before asking again after the monitors could not record.
const RECORD_RETRY_MS: u64 = 500;
/// How long a clean stop waits to tell the monitors.
const MARK_DOWN_WAIT_MS: u64 = 3_000;

/// A PG asks for its write set to be recorded (the newest ask per PG
/// wins).
pub(super) fn ask_record(s: &OsdShared, ask: RecordAsk, me: Mailbox) {
    lock(&s.record_asks).insert(ask.pg, (ask, me));
    s.record_wake.notify_one();
}

/// Record the write sets PGs ask for, in batches: one monitor commit
/// covers every PG that changed interval together. A PG whose record holds
/// is told so; a refused (stale) one has moved to a newer interval and
/// asks again there.
pub(super) async fn record_write_sets(s: Arc<OsdShared>, mut mc: MonClient) {
    loop {
        s.record_wake.notified().await;
        loop {
            let batch: Vec<(PgId, (RecordAsk, Mailbox))> = {
                let mut asks = lock(&s.record_asks);
                let keys: Vec<PgId> = asks
                    .keys()
                    .copied()
                    .take(WRITE_SETS_PER_REQUEST_MAX)
                    .collect();
                keys.into_iter()
                    .filter_map(|k| asks.remove(&k).map(|v| (k, v)))
                    .collect()
            };
            if batch.is_empty() || s.stopped.load(Ordering::Relaxed) {
                break;
            }
            let items = batch.iter().map(|(_, (ask, _))| ask.clone()).collect();
            match mc.call(MonRequest::RecordWriteSets { items }).await {
                Ok(r) => {
                    let held: Vec<PgId> = serde_json::from_value(r.value).unwrap_or_default();
                    for (pg, (ask, mb)) in batch {
                        if held.contains(&pg) {
                            mb.control(Input::WriteSetRecorded {
                                interval: ask.record.interval,
                            });
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!("recording PG write sets failed (retrying): {e}");
                    {
                        // Put them back unless a newer ask replaced them.
                        let mut asks = lock(&s.record_asks);
                        for (pg, v) in batch {
                            asks.entry(pg).or_insert(v);
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(RECORD_RETRY_MS)).await;
                }
            }
        }
    }
}

/// Ask the monitors to make `osds` PG `pg`'s acting set.
pub(super) fn request_pg_temp(s: &OsdShared, pg: PgId, osds: Vec<i32>) {
    tracing::info!("pg {pg}: this primary's log is behind; asking for pg_temp {osds:?}");
    send_once(s, pg, "pg_temp", MonRequest::PgTemp { pg, osds });
}

/// Ask the monitors to make `osd` PG `pg`'s primary for now (`None`:
/// clear it).
pub(super) fn request_primary_temp(s: &OsdShared, pg: PgId, osd: Option<i32>) {
    tracing::info!("pg {pg}: asking for primary_temp {osd:?}");
    send_once(s, pg, "primary_temp", MonRequest::PrimaryTemp { pg, osd });
}

/// Send PG `pg`'s request `req` (named `what` in the log) to the
/// monitors once, in the background (the PG asks again if it still needs
/// it).
fn send_once(s: &OsdShared, pg: PgId, what: &'static str, req: MonRequest) {
    let mc = s.cfg.mon_client();
    tokio::spawn(async move {
        if let Ok(mut mc) = mc {
            if let Err(e) = mc.call(req).await {
                tracing::warn!("pg {pg}: {what} request failed: {e}");
            }
        }
    });
}

/// Report PG stats, usage and I/O counters every report interval.
pub(super) async fn reports(s: Arc<OsdShared>, mut mc: MonClient) {
    let mut t = tokio::time::interval(s.cfg.report_interval);
    // The store's commit count and time at the last report.
    let mut commits_before = (0u64, 0u64);
    loop {
        tokio::select! {
            _ = t.tick() => {}
            _ = s.stats_changed.notified() => {
                // Let a burst of changes (a map touching many PGs) settle
                // into one report.
                tokio::time::sleep(Duration::from_millis(REPORT_BATCH_MS)).await;
            }
        }
        let load_ok = load_per_cpu().is_none_or(|l| l < s.cfg.scrub_load_threshold);
        s.scrub_load_ok.store(load_ok, Ordering::Relaxed);
        let stats = s.store.statfs().ok();
        let (device_read_bytes, device_reads) = s.store.device_reads();
        let commits = s.store.commit_latency();
        let commit_latency_us = (commits.1.saturating_sub(commits_before.1))
            .checked_div(commits.0.saturating_sub(commits_before.0))
            .unwrap_or(0);
        commits_before = commits;
        let (slow_ops, oldest_slow) = s.ops.slow(Instant::now());
        let c = &s.counters;
        let (msgr_send_bytes, msgr_recv_bytes) = loligo_proto::direct::wire_bytes();
        let mut r = OsdReport {
            osd: s.cfg.id,
            epoch: s.epoch(),
            pgs: lock(&s.stats).values().cloned().collect(),
            bytes_used: stats.map_or(0, |x| x.stored()),
            bytes_total: stats.map_or(0, |x| x.total.saturating_add(x.meta)),
            fill_used: stats.map_or(0, |x| x.fill().0),
            fill_total: stats.map_or(0, |x| x.fill().1),
            read_ops: c.read_ops.load(Ordering::Relaxed),
            write_ops: c.write_ops.load(Ordering::Relaxed),
            read_bytes: c.read_bytes.load(Ordering::Relaxed),
            write_bytes: c.write_bytes.load(Ordering::Relaxed),
            recovery_objects: c.recovery_objects.load(Ordering::Relaxed),
            recovery_bytes: c.recovery_bytes.load(Ordering::Relaxed),
            device_read_bytes,
            device_reads,
            rebuilt_shards: c.rebuilt_shards.load(Ordering::Relaxed),
            rebuild_theory_bytes: c.rebuild_theory_bytes.load(Ordering::Relaxed),
            rebuild_fetched_bytes: c.rebuild_fetched_bytes.load(Ordering::Relaxed),
            shard_bytes_sent: c.shard_bytes_sent.load(Ordering::Relaxed),
            msgr_send_bytes,
            msgr_recv_bytes,
            read_latency_us: c.read_latency_us.load(Ordering::Relaxed),
            write_latency_us: c.write_latency_us.load(Ordering::Relaxed),
            commit_latency_us,
            device: s.cfg.device.clone(),
            device_class: s.cfg.device_class.clone(),
            slow_ops,
            oldest_slow_op_ms: u64::try_from(oldest_slow.as_millis()).unwrap_or(u64::MAX),
            pool_io: c.pools(s.map().as_deref()),
            backfills: c.backfills.load(Ordering::Relaxed),
            backfills_by_tree: c.backfills_by_tree.load(Ordering::Relaxed),
            backfill_tree_nodes: c.backfill_tree_nodes.load(Ordering::Relaxed),
            backfill_listed: c.backfill_listed.load(Ordering::Relaxed),
            backfill_copied: c.backfill_copied.load(Ordering::Relaxed),
            kv_calls: c.kv_calls.load(Ordering::Relaxed),
            metrics_addr: s.cfg.metrics_addr.clone(),
        };
        let pgs = std::mem::take(&mut r.pgs);
        *lock(&s.last_report) = Some(r.clone());
        r.pgs = pgs;
        mc.deadline = s.cfg.report_interval;
        let _ = mc.call(MonRequest::OsdReport(Box::new(r))).await;
    }
}

/// How long a report waits after a PG's state changed, to take in the
/// changes that follow it.
const REPORT_BATCH_MS: u64 = 50;

/// Tell the monitors this OSD is stopping (a clean stop).
pub(super) async fn mark_me_down(s: &OsdShared) {
    if let Ok(mut mc) = s.cfg.mon_client() {
        mc.deadline = Duration::from_millis(MARK_DOWN_WAIT_MS);
        let _ = mc.call(MonRequest::OsdMarkMeDown { id: s.cfg.id }).await;
    }
}

/// Map `epoch` shows this OSD down while it runs: boot again (once at a
/// time).
pub(super) fn reboot_if_marked_down(s: &Arc<OsdShared>, epoch: Epoch) {
    if s.stopped.load(Ordering::Relaxed) || s.rebooting.swap(true, Ordering::Relaxed) {
        return;
    }
    tracing::warn!(
        "map epoch {epoch} wrongly marks osd.{} down: booting again",
        s.cfg.id
    );
    let s = s.clone();
    tokio::spawn(async move {
        if let Ok(mut mc) = s.cfg.mon_client() {
            let _ = mc.call(s.cfg.boot_request()).await;
        }
        s.rebooting.store(false, Ordering::Relaxed);
    });
}

/// The one-minute load average per CPU (`None`: not known here).
fn load_per_cpu() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let one: f64 = text.split_whitespace().next()?.parse().ok()?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    Some(one / cpus as f64)
}
