//! The monitor's side of the S3 gateway's users: `s3 user create | rm |
//! info | ls`, `s3 key create | rm`, committed through Raft so that every
//! monitor knows them, and the secret lookup a gateway checks signatures
//! with ([`crate::s3users`]).
//!
//! It must never answer a secret to anything but `S3UserCreate`,
//! `S3UserInfo`, `S3KeyCreate` (the operator's, mon `allow *`) and
//! `S3Secret` (a gateway's, mon `allow rw`), and never answer from a
//! monitor that is not a leader hearing a majority, so that a removed key
//! stops working everywhere once the removal is acknowledged.

use super::*;
use crate::s3users::{self, S3Cmd, S3Key, UserRecord};
use serde_json::json;

/// The wall clock in Unix seconds (a user's creation time).
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The key pair an operator gave, or one made from secure randomness;
/// half a pair is refused.
fn key_pair(access_key: Option<String>, secret_key: Option<String>) -> Result<S3Key, MonError> {
    use ring::rand::SecureRandom;
    match (access_key, secret_key) {
        (Some(access_key), Some(secret_key)) => Ok(S3Key {
            access_key,
            secret_key,
        }),
        (None, None) => {
            let mut random = [0u8; s3users::ACCESS_KEY_LEN + s3users::SECRET_KEY_LEN];
            ring::rand::SystemRandom::new()
                .fill(&mut random)
                .map_err(|_| MonError::Unavailable("no secure randomness for a key".into()))?;
            Ok(s3users::key_from(&random))
        }
        _ => Err(MonError::Invalid(
            "give both --access-key and --secret-key, or neither (then both are made)".into(),
        )),
    }
}

impl Monitor {
    /// The S3 user commands (leader, with a majority heard).
    pub(super) async fn s3_admin(&self, a: Admin) -> CallResult {
        if !self.is_leader() {
            return Err(self.not_leader());
        }
        let value = match a {
            Admin::S3Secret { access_key } => {
                self.quorum_recent().await?;
                let st = self.shared.read();
                match st.s3.secret(&access_key) {
                    Some((user, secret)) => json!({
                        "user": user,
                        "secret_key": secret,
                        "display_name": st.s3.display_name(user),
                    }),
                    None => {
                        return Err(MonError::NotFound(format!(
                            "access key '{access_key}' does not exist"
                        )))
                    }
                }
            }
            Admin::S3UserName { uid } => {
                self.quorum_recent().await?;
                match self.shared.read().s3.display_name(&uid) {
                    Some(name) => json!({"user": uid, "display_name": name}),
                    None => return Err(MonError::NotFound(format!("user '{uid}' does not exist"))),
                }
            }
            Admin::S3UserLs => {
                self.quorum(QUORUM_WAIT_STATUS).await?;
                json!(self.shared.read().s3.uids())
            }
            Admin::S3UserInfo { uid } => {
                self.quorum(QUORUM_WAIT_STATUS).await?;
                self.user_info(&uid)?
            }
            Admin::S3UserCreate {
                uid,
                display_name,
                access_key,
                secret_key,
            } => {
                let record = UserRecord {
                    display_name: display_name.unwrap_or_else(|| uid.clone()),
                    created: unix_now(),
                };
                let key = key_pair(access_key, secret_key)?;
                self.s3_change(S3Cmd::UserCreate {
                    uid: uid.clone(),
                    record,
                    key,
                })
                .await?;
                self.user_info(&uid)?
            }
            Admin::S3KeyCreate {
                uid,
                access_key,
                secret_key,
            } => {
                let key = key_pair(access_key, secret_key)?;
                self.s3_change(S3Cmd::KeyAdd {
                    uid: uid.clone(),
                    key,
                })
                .await?;
                self.user_info(&uid)?
            }
            Admin::S3UserRm { uid } => {
                self.s3_change(S3Cmd::UserRm { uid: uid.clone() }).await?;
                json!({ "removed": uid })
            }
            Admin::S3KeyRm { access_key } => {
                let cmd = S3Cmd::KeyRm {
                    access_key: access_key.clone(),
                };
                self.s3_change(cmd).await?;
                json!({ "removed": access_key })
            }
            other => {
                return Err(MonError::Invalid(format!(
                    "not an S3 user command: {other:?}"
                )))
            }
        };
        Ok(MonReply {
            epoch: self.epoch(),
            value,
            map: None,
        })
    }

    /// `uid` with its keys, as JSON.
    fn user_info(&self, uid: &str) -> Result<serde_json::Value, MonError> {
        let info = (self.shared.read().s3.info(uid))
            .ok_or_else(|| MonError::NotFound(format!("user '{uid}' does not exist")))?;
        serde_json::to_value(&info).map_err(|e| MonError::Unavailable(format!("user info: {e}")))
    }

    /// Check `cmd` against the records, then commit it (every member
    /// checks again when it applies: two racing changes cannot both
    /// take one access key).
    async fn s3_change(&self, cmd: S3Cmd) -> Result<(), MonError> {
        self.quorum(QUORUM_WAIT_STATUS).await?;
        (self.shared.read().s3.check(&cmd)).map_err(MonError::Invalid)?;
        self.propose(MonCmd::S3(cmd)).await.map(|_| ())
    }
}
