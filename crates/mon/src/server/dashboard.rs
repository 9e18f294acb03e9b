//! The monitor's side of the dashboard: its access tokens (`dashboard
//! create-token`, `ls-tokens`, `revoke-tokens`, committed through Raft
//! so that every monitor honours them) and the view its page polls
//! ([`crate::dashboard::View`], answered by the leader).
//!
//! It must never keep or log a token (only its hash goes into the Raft
//! log), never answer a view without a token good under the current map,
//! and never answer from a monitor that is not a leader hearing a
//! majority (a standby says which monitor leads instead).

use super::*;
use crate::tokens::{self, TokenCmd, TokenError};
use serde_json::json;

/// The wall clock in Unix seconds (token lifetimes are wall-clock).
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What `/api/dashboard` answers.
pub enum ViewAnswer {
    /// The view, for the token's user.
    View(Box<crate::dashboard::View>),
    /// The token was refused.
    Denied(TokenError),
    /// This monitor does not lead; `leader` does, when known.
    Standby { leader: Option<u64> },
    /// A leader without a majority, or no map yet.
    Unavailable(String),
}

impl Monitor {
    /// `dashboard create-token | ls-tokens | revoke-tokens` (leader).
    pub(super) async fn dashboard_admin(&self, a: Admin) -> CallResult {
        if !self.is_leader() {
            return Err(self.not_leader());
        }
        self.quorum(QUORUM_WAIT_STATUS).await?;
        let value = match a {
            Admin::DashboardCreateToken { user, ttl_secs } => {
                self.create_token(user, ttl_secs).await?
            }
            Admin::DashboardLsTokens => {
                let st = self.shared.read();
                let map = st.map.as_ref().ok_or(MonError::NoMap)?;
                let rows: Vec<_> = (st.tokens.list(map, unix_now()).into_iter())
                    .map(|(id, r)| {
                        json!({"id": id, "user": r.user, "created": r.created, "expires": r.expires})
                    })
                    .collect();
                json!(rows)
            }
            Admin::DashboardRevokeTokens { user } => {
                let live = (self.shared.read().tokens).live(user.as_deref(), unix_now());
                self.propose(MonCmd::Dashboard(TokenCmd::Revoke { user }))
                    .await?;
                json!({ "revoked": live })
            }
            other => {
                return Err(MonError::Invalid(format!(
                    "not a dashboard command: {other:?}"
                )))
            }
        };
        Ok(MonReply {
            epoch: self.epoch(),
            value,
            map: None,
        })
    }

    async fn create_token(
        &self,
        user: String,
        ttl_secs: u64,
    ) -> Result<serde_json::Value, MonError> {
        use ring::rand::SecureRandom;
        let now = unix_now();
        let record = {
            let st = self.shared.read();
            let map = st.map.as_ref().ok_or(MonError::NoMap)?;
            st.tokens
                .plan_add(map, &user, ttl_secs, now)
                .map_err(MonError::Invalid)?
        };
        let mut random = [0u8; tokens::TOKEN_BYTES];
        ring::rand::SystemRandom::new()
            .fill(&mut random)
            .map_err(|_| MonError::Unavailable("no secure randomness for a token".into()))?;
        let token = tokens::token_from(&random);
        let expires = record.expires;
        let cmd = TokenCmd::Add {
            hash: tokens::hash(&token),
            record,
        };
        self.propose(MonCmd::Dashboard(cmd)).await?;
        let url = (self.dashboard_url()).map(|u| format!("{u}#token={token}"));
        Ok(json!({ "user": user, "token": token, "expires": expires, "url": url }))
    }

    /// The leader's part of the view, made at most once per
    /// [`METRICS_FRESH`] however many pages poll.
    async fn leader_view(&self) -> Result<crate::dashboard::LeaderView, String> {
        let mut cache = self.dashboard_cache.lock().await;
        if let Some((at, v)) = cache.as_ref() {
            if at.elapsed() < METRICS_FRESH {
                return Ok(v.clone());
            }
        }
        let monitors = self.mon_status();
        let view = {
            let l = self.leader.lock().await;
            let map = &self.map_now().map_err(|_| "no map yet".to_string())?;
            (l.dashboard(map, monitors, Instant::now(), &self.timeouts()))
                .map_err(|e| format!("dashboard: {e}"))?
        };
        *cache = Some((Instant::now(), view.clone()));
        Ok(view)
    }

    /// What the dashboard shows now, to the holder of `token`.
    pub async fn dashboard_view(&self, token: &str) -> ViewAnswer {
        let user = {
            let st = self.shared.read();
            let Some(map) = st.map.as_ref() else {
                return ViewAnswer::Unavailable("no map yet".into());
            };
            match st.tokens.check(map, token, unix_now()) {
                Ok(u) => u,
                Err(e) => return ViewAnswer::Denied(e),
            }
        };
        if !self.is_leader() {
            let leader = self.raft.metrics().borrow().current_leader;
            return ViewAnswer::Standby { leader };
        }
        if let Err(e) = self.quorum_recent().await {
            return ViewAnswer::Unavailable(e.to_string());
        }
        let leader = match self.leader_view().await {
            Ok(v) => v,
            Err(why) => return ViewAnswer::Unavailable(why),
        };
        let st = self.shared.read();
        let log = st.log.last(
            crate::dashboard::LOG_LINES,
            loligo_monc::protocol::LogLevel::Info,
            None,
        );
        ViewAnswer::View(Box::new(crate::dashboard::View {
            user,
            mon: self.cfg.id,
            leader,
            log,
        }))
    }
}
