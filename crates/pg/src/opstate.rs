//! What every op path shares about the object it works on, below the op
//! executor and the object classes alike: the object's state before an op,
//! store errors as op errors, and the checks each path makes (`need`,
//! `user_xattr`). It holds no op logic and must never call the executor or
//! a class (they both call it).

use loligo_store::StoreError;
use loligo_types::ops::{OpError, Version};

/// Store errors as op errors.
pub fn store_err(e: StoreError) -> OpError {
    match e {
        StoreError::NoObject { .. } => OpError::NotFound,
        StoreError::NoAttr { name, .. } => OpError::NoXattr(name),
        StoreError::NoSpace { .. } => OpError::NoSpace,
        StoreError::TooLarge(m) | StoreError::Invalid(m) => OpError::Invalid(m),
        e @ StoreError::Checksum { .. } => OpError::Damaged(e.to_string()),
        e => OpError::Io(e.to_string()),
    }
}

/// An object's state before an op.
#[derive(Clone, Debug, Default)]
pub struct ObjState {
    pub exists: bool,
    pub size: u64,
    pub version: Version,
}

/// `Invalid` unless `name` is a client's xattr name: not empty, not one
/// of the OSD's own (they start with `_`).
pub fn user_xattr(name: &str) -> Result<(), OpError> {
    if name.starts_with('_') || name.is_empty() {
        return Err(OpError::Invalid(format!(
            "xattr name '{name}' is reserved or empty"
        )));
    }
    Ok(())
}

/// `NotFound` unless the object exists.
pub fn need(exists: bool) -> Result<(), OpError> {
    if exists {
        Ok(())
    } else {
        Err(OpError::NotFound)
    }
}
