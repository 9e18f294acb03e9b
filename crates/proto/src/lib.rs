//! Loligo's gRPC services, generated from `proto/loligo.proto` at build
//! time. Generated code only: no logic belongs here.

#![allow(clippy::all, missing_docs)]

/// Version 1 of the wire protocol.
pub mod v1 {
    tonic::include_proto!("loligo.v1");
}
