//! The leader's side of the cluster log ([`crate::clog`]): each tick it
//! reads the map changes since the epoch the log last said and the
//! health checks against the ones the log last recorded, and commits
//! what is new as one batch. Any monitor answers `log last` from its own
//! copy.
//!
//! It must never commit a batch that says nothing new: an idle cluster
//! adds nothing to the Raft log.

use super::*;
use crate::clog::{self, LogBatch};

/// The map as the cluster log last read it, kept by the leader so that
/// each change is read against the map it applied to.
#[derive(Default)]
pub(super) struct LogPump {
    before: Option<loligo_types::OsdMap>,
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
    /// Leader: commit the cluster log entries since the last batch.
    pub(super) async fn log_events(&self) {
        // Without a majority nothing commits: a proposal would only wait
        // (and hold up the answers that say so).
        if self.quorum_recent().await.is_err() {
            return;
        }
        let monitors = self.mon_status();
        let health = {
            let l = self.leader.lock().await;
            let st = self.shared.read();
            let Some(map) = st.map.as_ref() else { return };
            match l.settled_health(map, &monitors, Instant::now(), &self.timeouts()) {
                Ok(h) => h.map(|h| clog::health_seen(&h)),
                Err(e) => {
                    tracing::warn!("cluster log: health: {e}");
                    None
                }
            }
        };
        let batch = {
            let mut pump = self.log_pump.lock().await;
            let st = self.shared.read();
            let Some(map) = st.map.as_ref() else { return };
            let mut entries = Vec::new();
            let through = match st.log.through_epoch {
                // A new log starts at the map as it is.
                0 => map.epoch,
                e => e,
            };
            let incs: Vec<&loligo_types::Incremental> =
                st.incs.iter().filter(|i| i.epoch > through).collect();
            if let Some(first) = incs.first() {
                if first.epoch > through + 1 {
                    entries.push((
                        loligo_monc::protocol::LogLevel::Info,
                        format!(
                            "osdmap e{}..e{}: changes no longer kept, not shown",
                            through + 1,
                            first.epoch - 1
                        ),
                    ));
                }
            }
            for inc in incs {
                // Each change read against the map it applied to, when
                // the pump holds it; else against the newest (names of
                // pools since removed are then lost).
                let fresh = pump
                    .before
                    .as_ref()
                    .is_some_and(|b| b.epoch + 1 == inc.epoch);
                if !fresh {
                    pump.before = None;
                }
                let ctx = pump.before.as_ref().unwrap_or(map);
                entries.extend(
                    inc.changes
                        .iter()
                        .filter_map(|c| clog::change_event(ctx, c)),
                );
                if let Some(b) = pump.before.as_mut() {
                    if b.apply(inc).is_err() {
                        pump.before = None;
                    }
                }
            }
            if pump.before.as_ref().is_none_or(|b| b.epoch != map.epoch) {
                pump.before = Some(map.clone());
            }
            let was = st.log.health.clone().unwrap_or_default();
            let same_checks =
                |now: &clog::HealthSeen| st.log.health.is_some() && was.keys().eq(now.keys());
            let recent = (pump.health_at).is_some_and(|t| t.elapsed() < HEALTH_UPDATE_PERIOD);
            let health = health.filter(|now| !(recent && same_checks(now)));
            if let Some(now) = &health {
                entries.extend(clog::health_events(&was, now));
            }
            let health_moved = health.is_some() && health != st.log.health;
            if entries.is_empty() && !health_moved && through == st.log.through_epoch {
                return;
            }
            if health_moved {
                pump.health_at = Some(Instant::now());
            }
            LogBatch {
                stamp_ms: now_ms(),
                name: format!("mon.{}", self.cfg.id),
                entries,
                through_epoch: map.epoch,
                health,
            }
        };
        let _g = self.propose_lock.lock().await;
        if let Err(e) = self.propose(MonCmd::Log(batch)).await {
            tracing::warn!("cluster log: {e}");
        }
    }

    /// `log last`: this monitor's copy of the log.
    pub(super) fn log_last(
        &self,
        n: u32,
        level: Option<loligo_monc::protocol::LogLevel>,
        since: Option<u64>,
    ) -> CallResult {
        let entries = {
            let st = self.shared.read();
            let level = level.unwrap_or(loligo_monc::protocol::LogLevel::Debug);
            st.log.last(n as usize, level, since)
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
