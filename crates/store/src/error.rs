//! The store's one error type. Every failure a caller can cause or meet
//! (missing object, full disk, corrupt block) is a variant, never a panic.

use crate::names::{CollectionId, ObjectId};
use thiserror::Error;

/// What went wrong in the store.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum StoreError {
    #[error("collection {0} does not exist")]
    NoCollection(CollectionId),
    #[error("collection {0} already exists")]
    CollectionExists(CollectionId),
    #[error("collection {0} is not empty")]
    CollectionNotEmpty(CollectionId),
    #[error("object {oid} not found in {coll}")]
    NoObject { coll: CollectionId, oid: ObjectId },
    #[error("attribute {name:?} not found on {oid}")]
    NoAttr { oid: ObjectId, name: String },
    /// A limit (object size, name length, value size ...) was exceeded.
    #[error("{0}")]
    TooLarge(String),
    /// A malformed request (bad range, empty name ...).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The device has no room for the transaction; nothing was applied.
    #[error("no space: {needed} bytes needed, {free} free")]
    NoSpace { needed: u64, free: u64 },
    /// Stored data does not match its checksum; the data is not returned.
    #[error("checksum mismatch in {oid} at byte {offset}")]
    Checksum { oid: ObjectId, offset: u64 },
    /// Metadata on disk is not what this version wrote.
    #[error("corrupt store: {0}")]
    Corrupt(String),
    /// An I/O error from the device or the KV store.
    #[error("I/O error: {0}")]
    Io(String),
    /// The store is shutting down or was closed.
    #[error("store is closed")]
    Closed,
}

/// Result with [`StoreError`].
pub type Result<T> = std::result::Result<T, StoreError>;
