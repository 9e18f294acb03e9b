//! Raft messages between monitors over the `MonPeer.Raft` gRPC call: each
//! openraft request goes as JSON, and the reply comes back as JSON of
//! `Result<response, RaftError>`. A peer is dialled as the monitor its
//! id names (`mon.N`), with the key this monitor's map records for it.
//!
//! It must never interpret the messages (openraft does), nor send one to
//! a server that is not the member it is for.

use crate::raft::{Shared, TypeConfig};
use loligo_proto::net::Channels;
use loligo_proto::tls::Expect;
use loligo_proto::v1::RaftMessage;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::{de::DeserializeOwned, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long dialling a peer monitor may take.
const CONNECT_TIMEOUT_MS: u64 = 1_000;

/// When each peer monitor last answered a Raft message, by id.
pub type Heard = Arc<Mutex<BTreeMap<u64, Instant>>>;

/// Makes a client per peer monitor; all share one connection cache.
#[derive(Clone)]
pub struct Network {
    channels: Arc<Channels>,
    /// This monitor's state: the map says which key each peer holds.
    shared: Arc<Shared>,
    heard: Heard,
}

impl Network {
    /// Connections to the peer monitors, secured with `security` (or
    /// plain without), each expected to hold the key `shared`'s map
    /// records for it.
    pub fn new(security: Option<&loligo_proto::net::Security>, shared: Arc<Shared>) -> Network {
        Network {
            channels: Arc::new(
                Channels::new(Duration::from_millis(CONNECT_TIMEOUT_MS), None).secured(security),
            ),
            shared,
            heard: Heard::default(),
        }
    }

    /// When each peer last answered (a leader sends to every member at
    /// least each heartbeat interval): who is in touch with it.
    pub fn heard(&self) -> Heard {
        self.heard.clone()
    }
}

/// A client of one peer monitor (its connection is made lazily and
/// re-made after an error).
pub struct Peer {
    target: u64,
    addr: String,
    channels: Arc<Channels>,
    shared: Arc<Shared>,
    heard: Heard,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Peer {
        Peer {
            target,
            addr: node.addr.clone(),
            channels: self.channels.clone(),
            shared: self.shared.clone(),
            heard: self.heard.clone(),
        }
    }
}

impl Peer {
    /// Whom this peer's server must prove it is: monitor `target`, with
    /// the key the map records for it (any of its keys before that).
    fn expect(&self) -> Expect {
        let entity = format!("mon.{}", self.target);
        let st = self.shared.read();
        let serial = st.map.as_ref().and_then(|m| m.daemon_serial(&entity));
        Expect::daemon(&entity, serial)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Msg(String);

impl Peer {
    async fn call<Req: Serialize, Resp: DeserializeOwned, E>(
        &mut self,
        kind: &str,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp, RPCError<u64, BasicNode, RaftError<u64, E>>>
    where
        E: std::error::Error + DeserializeOwned,
    {
        let body = serde_json::to_vec(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let mut c = self
            .channels
            .mon_peer(&self.addr, &self.expect())
            .await
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&Msg(e))))?;
        let msg = RaftMessage {
            kind: kind.into(),
            body: body.into(),
        };
        let raw = match tokio::time::timeout(timeout, c.raft(msg)).await {
            Ok(Ok(r)) => r.into_inner().body,
            Ok(Err(s)) => {
                self.channels.forget(&self.addr);
                return Err(RPCError::Unreachable(Unreachable::new(&s)));
            }
            Err(_) => {
                return Err(RPCError::Unreachable(Unreachable::new(&Msg(format!(
                    "{}: no answer in {timeout:?}",
                    self.addr
                )))))
            }
        };
        let r: Result<Resp, RaftError<u64, E>> =
            serde_json::from_slice(&raw).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        if let Ok(mut h) = self.heard.lock() {
            h.insert(self.target, Instant::now());
        }
        if let Err(RaftError::Fatal(_)) = &r {
            // The server's Raft stopped: whatever serves there next (the
            // member started again) is dialled anew.
            self.channels.forget(&self.addr);
        }
        r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        self.call("append", &rpc, option.hard_ttl()).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>,
    > {
        self.call("snapshot", &rpc, option.hard_ttl()).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        self.call("vote", &rpc, option.hard_ttl()).await
    }
}
