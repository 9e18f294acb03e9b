//! The monitor group's membership: `mon add` and `mon rm` (Raft's change
//! of members: a new monitor catches up as a learner, then joint
//! consensus makes it a voter; openraft does both), and what the leader
//! says of the group (`quorum_status`, `mon stat`, `MON_DOWN`).
//!
//! It must never make a voter of a monitor that has not caught up (the
//! group would need it for a majority before it could vote), nor remove
//! a member when the members left would not reach a majority of
//! themselves.

use super::*;
use openraft::ChangeMembers;
use std::collections::BTreeSet;

/// How long a new monitor may take to catch up as a learner before `mon
/// add` gives up (and takes the learner off again).
const CATCH_UP: Duration = Duration::from_secs(30);

/// A member the leader has not heard from for this long counts as down
/// (the leader sends to each at least every heartbeat, 150 ms).
const HEARD_WITHIN: Duration = Duration::from_secs(2);

impl Monitor {
    /// The group as this monitor sees it; the quorum (members the leader
    /// heard from lately, itself included) only on the leader.
    pub(super) fn mon_status(&self) -> MonStatus {
        let metrics = self.raft.metrics().borrow().clone();
        let membership = metrics.membership_config.membership();
        let members: Vec<u64> = membership.voter_ids().collect();
        let addrs = (members.iter())
            .filter_map(|id| Some((*id, membership.get_node(id)?.addr.clone())))
            .collect();
        let quorum = match metrics.current_leader == Some(self.cfg.id) {
            true => {
                let now = Instant::now();
                let heard = self.heard.lock().map(|h| h.clone()).unwrap_or_default();
                let recent = |id: &u64| {
                    *id == self.cfg.id
                        || heard
                            .get(id)
                            .is_some_and(|t| now.duration_since(*t) < HEARD_WITHIN)
                };
                members.iter().copied().filter(recent).collect()
            }
            false => Vec::new(),
        };
        MonStatus {
            members,
            leader: metrics.current_leader,
            term: metrics.current_term,
            quorum,
            addrs,
        }
    }

    /// `quorum_status` (leader only: it knows whom it hears).
    pub(super) async fn quorum_status(&self) -> CallResult {
        if !self.is_leader() {
            return Err(self.not_leader());
        }
        self.quorum(QUORUM_WAIT_STATUS).await?;
        let s = self.mon_status();
        let name = |id: &u64| format!("mon.{id}");
        let value = serde_json::json!({
            "election_epoch": s.term,
            "quorum": s.quorum,
            "quorum_names": s.quorum.iter().map(name).collect::<Vec<_>>(),
            "quorum_leader_name": s.leader.as_ref().map(name),
            "monmap": {
                "epoch": self.epoch(),
                "mons": s.addrs.iter().map(|(id, addr)| serde_json::json!({
                    "rank": id, "name": name(id), "addr": addr,
                })).collect::<Vec<_>>(),
            },
        });
        Ok(MonReply {
            epoch: self.epoch(),
            value,
            map: None,
        })
    }

    /// `mon add ID ADDR`: a learner first, a voter once it caught up.
    pub(super) async fn mon_add(&self, id: u64, addr: String) -> CallResult {
        if !self.is_leader() {
            return Err(self.not_leader());
        }
        self.quorum(QUORUM_WAIT_CHANGE).await?;
        let _g = self.membership_lock.lock().await;
        let s = self.mon_status();
        let mut mons: BTreeMap<u64, String> = s.addrs.clone();
        if let Some(a) = mons.get(&id) {
            return Err(MonError::Invalid(format!(
                "mon.{id} is a member already, at {a} (`mon rm {id}` first to replace it)"
            )));
        }
        mons.insert(id, addr.clone());
        loligo_types::osdmap::check_mons(&mons)?;
        let node = BasicNode { addr: addr.clone() };
        tracing::info!("adding mon.{id} at {addr}: catching up as a learner");
        let caught_up = tokio::time::timeout(CATCH_UP, self.raft.add_learner(id, node, true)).await;
        if !matches!(caught_up, Ok(Ok(_))) {
            let gone = ChangeMembers::RemoveNodes(BTreeSet::from([id]));
            if let Err(e) = self.raft.change_membership(gone, false).await {
                tracing::warn!("mon.{id} stays a learner: {e}");
            }
            let why = match caught_up {
                Ok(Err(e)) => e.to_string(),
                _ => format!("it did not catch up within {} s", CATCH_UP.as_secs()),
            };
            return Err(MonError::Unavailable(format!(
                "mon.{id} at {addr} was not added: {why} (start it first: `loligo mon run --id {id} --members ... --mkfs --join`)"
            )));
        }
        let voters = ChangeMembers::AddVoterIds(BTreeSet::from([id]));
        (self.raft.change_membership(voters, false).await)
            .map_err(|e| MonError::Unavailable(format!("mon.{id} not made a voter: {e}")))?;
        tracing::info!("mon.{id} at {addr} is a member");
        self.keep_mon_map().await;
        Ok(MonReply {
            epoch: self.epoch(),
            value: serde_json::json!({
                "message": format!("added mon.{id} at {addr}: {} monitors", mons.len())
            }),
            map: None,
        })
    }

    /// `mon rm ID`, this monitor included (it steps down once the group
    /// without it is committed; the next leader keeps the map).
    pub(super) async fn mon_rm(&self, id: u64) -> CallResult {
        if !self.is_leader() {
            return Err(self.not_leader());
        }
        self.quorum(QUORUM_WAIT_CHANGE).await?;
        let _g = self.membership_lock.lock().await;
        let s = self.mon_status();
        if !s.members.contains(&id) {
            return Err(MonError::Invalid(format!(
                "mon.{id} is not a member (members: {:?})",
                s.members
            )));
        }
        let left: Vec<u64> = s.members.iter().copied().filter(|m| *m != id).collect();
        if left.is_empty() {
            return Err(MonError::Invalid(format!(
                "mon.{id} is the last monitor: a cluster needs one"
            )));
        }
        let live = left.iter().filter(|m| s.quorum.contains(m)).count();
        if live < left.len() / 2 + 1 {
            return Err(MonError::Invalid(format!(
                "removing mon.{id} leaves {} monitors of which the leader hears {live}: no majority; bring the others back first",
                left.len()
            )));
        }
        let change = ChangeMembers::RemoveVoters(BTreeSet::from([id]));
        (self.raft.change_membership(change, false).await)
            .map_err(|e| MonError::Unavailable(format!("mon.{id} not removed: {e}")))?;
        tracing::info!("mon.{id} removed from the group: {left:?} remain");
        // A leader that removed itself steps down: the next one keeps the
        // monitor map. Proposing it here would wait out the quorum wait
        // (it leads no group) and answer so late that the caller asks
        // again, and hears that the monitor is not a member.
        if id != self.cfg.id && self.is_leader() {
            self.keep_mon_map().await;
        }
        Ok(MonReply {
            epoch: self.epoch(),
            value: serde_json::json!({
                "message": format!("removed mon.{id}: {} monitors; stop its daemon", left.len())
            }),
            map: None,
        })
    }
}
