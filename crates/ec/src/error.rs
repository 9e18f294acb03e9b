//! The erasure-code layer's one error type.
//!
//! Decoders must never panic on caller input; this is what they return.

use thiserror::Error;

/// What can go wrong building a code or decoding with it.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum EcError {
    /// The profile (k, m, s, ...) is not one this code supports.
    #[error("invalid profile: {0}")]
    InvalidProfile(String),
    /// Too few chunks (or chunk extents) to rebuild what was asked for.
    #[error("cannot decode: {0}")]
    NotDecodable(String),
    /// A chunk handed to the decoder does not fit the layout.
    #[error("bad chunk {chunk}: {msg}")]
    BadChunk { chunk: usize, msg: String },
    /// A request that makes no sense (unknown chunk, empty want list ...).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
}

/// Result with [`EcError`].
pub type Result<T> = std::result::Result<T, EcError>;
