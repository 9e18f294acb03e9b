//! The leader's side of the cluster log ([`crate::clog`]): the lines of
//! each map change it proposes, read against the map the change applies
//! to, committed right after the change; and each tick, the health
//! checks against the ones the log last recorded. Any monitor answers
//! `log last` from its own copy.
//!
//! It must never commit a batch that says nothing new (an idle cluster
//! adds nothing to the Raft log), and never build a batch without
//! holding `propose_lock` (a batch names the log it follows).

use super::*;
use crate::clog::{self, LogBatch};
use loligo_monc::protocol::LogLevel;

/// The leader's memory for the cluster log.
#[derive(Default)]
pub(super) struct LogPump {
    /// When the log last recorded a change of health.
    health_at: Option<Instant>,
}

/// A health check's summary that changes while the same checks hold
/// (recovery counting down) is said at most this often (Ceph's
/// `mon_health_log_update_period`); checks raised or cleared at once.
const HEALTH_UPDATE_PERIOD: Duration = Duration::from_secs(5);

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Monitor {
    /// A batch of `entries` (and `health`, when it moved) following the
    /// log as it is now; the caller holds `propose_lock`.
    fn log_batch(
        &self,
        entries: Vec<(LogLevel, String)>,
        health: Option<clog::HealthSeen>,
    ) -> LogBatch {
        LogBatch {
            base_seq: self.shared.read().log.next_seq,
            stamp_ms: now_ms(),
            name: format!("mon.{}", self.cfg.id),
            entries,
            health,
        }
    }

    /// Commit the log lines of a map change just committed; the caller
    /// holds `propose_lock`. (A leader lost between the two commits
    /// loses the lines, not the change.)
    pub(super) async fn log_change_lines(&self, lines: Vec<(LogLevel, String)>) {
        if lines.is_empty() {
            return;
        }
        let batch = self.log_batch(lines, None);
        if let Err(e) = self.propose(MonCmd::Log(batch)).await {
            tracing::warn!("cluster log: {e}");
        }
    }

    /// Leader: commit the health checks' changes since the log last
    /// recorded them.
    pub(super) async fn log_health(&self) {
        // Without a majority nothing commits: a proposal would only wait
        // (and hold up the answers that say so).
        if self.quorum_recent().await.is_err() {
            return;
        }
        let monitors = self.mon_status();
        let health = {
            let l = self.leader.lock().await;
            let Ok(map) = &self.map_now() else { return };
            match l.settled_health(map, &monitors, Instant::now(), &self.timeouts()) {
                Ok(Some(h)) => clog::health_seen(&h),
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!("cluster log: health: {e}");
                    return;
                }
            }
        };
        let _g = self.propose_lock.lock().await;
        let mut pump = self.log_pump.lock().await;
        let batch = {
            let st = self.shared.read();
            if st.log.health.as_ref() == Some(&health) {
                return;
            }
            let was = st.log.health.clone().unwrap_or_default();
            let same_checks = st.log.health.is_some() && was.keys().eq(health.keys());
            let recent = (pump.health_at).is_some_and(|t| t.elapsed() < HEALTH_UPDATE_PERIOD);
            if recent && same_checks {
                return;
            }
            let entries = clog::health_events(&was, &health);
            drop(st);
            self.log_batch(entries, Some(health))
        };
        pump.health_at = Some(Instant::now());
        if let Err(e) = self.propose(MonCmd::Log(batch)).await {
            tracing::warn!("cluster log: {e}");
        }
    }

    /// `log last`: this monitor's copy of the log.
    pub(super) fn log_last(
        &self,
        n: u32,
        level: Option<LogLevel>,
        since: Option<u64>,
    ) -> CallResult {
        let entries = {
            let st = self.shared.read();
            st.log
                .last(n as usize, level.unwrap_or(LogLevel::Debug), since)
        };
        let value = serde_json::to_value(&entries)
            .map_err(|e| MonError::Unavailable(format!("log last: {e}")))?;
        Ok(MonReply {
            epoch: self.epoch(),
            value,
            map: None,
        })
    }
}
