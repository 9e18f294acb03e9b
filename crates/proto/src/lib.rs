//! Loligo's gRPC services, generated from `proto/loligo.proto` at build
//! time, the transport settings every endpoint shares (`net`: the
//! message size limit and the connection cache), and the direct data path
//! for OSD calls beside gRPC (`direct`), and the byte budget an OSD's
//! gRPC calls share with it (`grpc_budget`), and message faults for
//! tests (`inject`, off unless the environment asks). No protocol logic
//! belongs here: message bodies are the callers' own encodings.

pub mod direct;
pub mod grpc_budget;
pub mod http;
pub mod inject;
pub mod net;
pub mod record;
pub mod tls;
pub mod wire;

/// Version 1 of the wire protocol.
#[allow(clippy::all, missing_docs)]
pub mod v1 {
    tonic::include_proto!("loligo.v1");
}
