//! The one error type of the cluster-map layer.

use thiserror::Error;

/// Why a map change or a decode was refused. Every variant names what the
/// user asked for, so the message can be shown as it is.
#[derive(Debug, Clone, PartialEq, Eq, Error, serde::Serialize, serde::Deserialize)]
pub enum MapError {
    #[error("pool '{0}' does not exist")]
    NoSuchPool(String),
    #[error("pool '{0}' already exists")]
    PoolExists(String),
    #[error("osd.{0} does not exist")]
    NoSuchOsd(i32),
    #[error("erasure-code profile '{0}' does not exist")]
    NoSuchProfile(String),
    #[error("erasure-code profile '{0}' is used by pool '{1}'")]
    ProfileInUse(String, String),
    #[error("invalid erasure-code profile: {0}")]
    InvalidProfile(String),
    #[error("CRUSH: {0}")]
    Crush(String),
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("incremental for epoch {got} does not follow epoch {have}")]
    EpochGap { have: u64, got: u64 },
    #[error("cannot decode {what}: {why}")]
    Decode { what: String, why: String },
}

impl From<loligo_crush::CrushError> for MapError {
    fn from(e: loligo_crush::CrushError) -> Self {
        MapError::Crush(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, MapError>;
