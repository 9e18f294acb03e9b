//! Raft messages between monitors over the `Mon.Raft` gRPC call: each
//! openraft request goes as JSON, and the reply comes back as JSON of
//! `Result<response, RaftError>`.
//!
//! It must never interpret the messages: openraft does.

use crate::raft::TypeConfig;
use loligo_proto::v1::{mon_client::MonClient, RaftMessage};
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
use tonic::transport::Channel;

/// Largest Raft message (a snapshot chunk or a batch of entries).
pub const RAFT_MESSAGE_BYTES_MAX: usize = 64 << 20;

/// Makes a connection per peer monitor.
#[derive(Clone, Default)]
pub struct Network;

/// A connection to one peer monitor (connected lazily, re-made on error).
pub struct Peer {
    target: u64,
    addr: String,
    client: Option<MonClient<Channel>>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Peer {
        Peer {
            target,
            addr: node.addr.clone(),
            client: None,
        }
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
        timeout: std::time::Duration,
    ) -> Result<Resp, RPCError<u64, BasicNode, RaftError<u64, E>>>
    where
        E: std::error::Error + DeserializeOwned,
    {
        let body = serde_json::to_vec(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        if self.client.is_none() {
            let ch = Channel::from_shared(format!("http://{}", self.addr))
                .map_err(|e| RPCError::Network(NetworkError::new(&e)))?
                .connect_timeout(timeout)
                .timeout(timeout)
                .connect()
                .await
                .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
            self.client = Some(
                MonClient::new(ch)
                    .max_decoding_message_size(RAFT_MESSAGE_BYTES_MAX)
                    .max_encoding_message_size(RAFT_MESSAGE_BYTES_MAX),
            );
        }
        let Some(c) = self.client.as_mut() else {
            return Err(RPCError::Network(NetworkError::new(&Msg(
                "no client".into()
            ))));
        };
        let reply = c
            .raft(RaftMessage {
                kind: kind.into(),
                body,
            })
            .await;
        let raw = match reply {
            Ok(r) => r.into_inner().body,
            Err(s) => {
                self.client = None;
                return Err(RPCError::Unreachable(Unreachable::new(&s)));
            }
        };
        let r: Result<Resp, RaftError<u64, E>> =
            serde_json::from_slice(&raw).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
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
