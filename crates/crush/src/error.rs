//! The crate's one error type: every way a map, a rule or an input can be
//! wrong, with enough context to say which line or item is at fault.

use thiserror::Error;

/// Errors from parsing, validating or evaluating CRUSH maps.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CrushError {
    /// The text map is malformed at the given 1-based line.
    #[error("line {line}: {msg}")]
    Parse { line: usize, msg: String },
    /// The map is well-formed text but not a valid map.
    #[error("invalid map: {0}")]
    Invalid(String),
    /// A rule id that the map does not define.
    #[error("rule {0} does not exist")]
    UnknownRule(i32),
    /// A replica count outside what the mapper accepts.
    #[error("num-rep {got} is out of range (1..={max})")]
    BadNumRep { got: i64, max: usize },
    /// A JSON map that does not decode.
    #[error("bad JSON map: {0}")]
    Json(String),
    /// Bad placement parameters (pool, pg_num, OSD states).
    #[error("invalid placement input: {0}")]
    Placement(String),
}

/// Shorthand for results in this crate.
pub type Result<T, E = CrushError> = std::result::Result<T, E>;

pub(crate) fn invalid<T>(msg: impl Into<String>) -> Result<T> {
    Err(CrushError::Invalid(msg.into()))
}
