//! Object operations as clients send them to a PG's primary, and what
//! comes back. An op is a list of sub-ops applied to one object all or
//! nothing; reads in the same op see the object as it was before.
//!
//! Wire vocabulary only: the OSD gives it meaning. Data payloads are
//! `Bytes` that travel beside the message body on the wire
//! ([`encode_wire`], loligo-bulk); small byte fields are `serde_bytes`.

use crate::osdmap::Epoch;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// An object's version: the map epoch of the write and the PG's counter.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Version {
    pub epoch: Epoch,
    pub v: u64,
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}'{}", self.epoch, self.v)
    }
}

/// Longest object name in bytes.
pub const NAME_LEN_MAX: usize = 2048;
/// Most sub-ops in one op.
pub const SUBOPS_MAX: usize = 256;

/// Comparisons for asserts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    /// Whether `actual CMP expected` holds (byte-wise order).
    pub fn holds(self, actual: &[u8], expected: &[u8]) -> bool {
        use std::cmp::Ordering::*;
        let o = actual.cmp(expected);
        match self {
            Cmp::Eq => o == Equal,
            Cmp::Ne => o != Equal,
            Cmp::Lt => o == Less,
            Cmp::Le => o != Greater,
            Cmp::Gt => o == Greater,
            Cmp::Ge => o != Less,
        }
    }
}

/// One step of an op.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SubOp {
    // --- asserts (checked before anything is applied) ---
    AssertExists,
    /// Fail with `Exists` if the object exists (exclusive create).
    AssertNotExists,
    AssertVersion(Version),
    CmpXattr {
        name: String,
        cmp: Cmp,
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
    },
    /// Compare an omap value (a missing key compares as empty).
    CmpOmap {
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        cmp: Cmp,
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
    },
    // --- writes ---
    Create,
    WriteFull(#[serde(with = "loligo_bulk::serde")] Bytes),
    Write {
        offset: u64,
        #[serde(with = "loligo_bulk::serde")]
        data: Bytes,
    },
    Append(#[serde(with = "loligo_bulk::serde")] Bytes),
    Truncate(u64),
    Zero {
        offset: u64,
        len: u64,
    },
    Remove,
    SetXattr {
        name: String,
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
    },
    RmXattr(String),
    OmapSet(Vec<(serde_bytes::ByteBuf, serde_bytes::ByteBuf)>),
    OmapRm(Vec<serde_bytes::ByteBuf>),
    OmapClear,
    OmapSetHeader(#[serde(with = "serde_bytes")] Vec<u8>),
    // --- reads ---
    Read {
        offset: u64,
        /// 0 = to the end.
        len: u64,
    },
    Stat,
    GetXattr(String),
    GetXattrs,
    OmapGetKeys(Vec<serde_bytes::ByteBuf>),
    /// Keys after `start` (exclusive when `after`), at most `limit`.
    OmapList {
        #[serde(with = "serde_bytes")]
        start: Vec<u8>,
        limit: u32,
    },
    OmapGetHeader,
    /// Run object class method `class.method` on the object with `input`
    /// (its output comes back as `SubResult::Data`). The OSD's registry
    /// says whether the method writes; its writes commit with the op's
    /// other sub-ops, and a method that refuses fails the whole op.
    Exec {
        class: String,
        method: String,
        #[serde(with = "serde_bytes")]
        input: Vec<u8>,
    },
    /// Tell the OSDs how the object will be used (Ceph's `set-alloc-hint`):
    /// its expected size, the expected size of each write, and
    /// [`alloc_hint`] flags. Creates the object if it is missing. The
    /// stores use it as advice: a pool in `passive` compression mode
    /// compresses only objects hinted compressible, one in `aggressive`
    /// mode all but those hinted incompressible.
    SetAllocHint {
        expected_object_size: u64,
        expected_write_size: u64,
        flags: u32,
    },
}

/// The flags of [`SubOp::SetAllocHint`], with Ceph's values (librados's
/// `LIBRADOS_ALLOC_HINT_FLAG_*`), so a hint means the same to both.
pub mod alloc_hint {
    pub const SEQUENTIAL_WRITE: u32 = 1;
    pub const RANDOM_WRITE: u32 = 2;
    pub const SEQUENTIAL_READ: u32 = 4;
    pub const RANDOM_READ: u32 = 8;
    pub const APPEND_ONLY: u32 = 16;
    pub const IMMUTABLE: u32 = 32;
    pub const SHORTLIVED: u32 = 64;
    pub const LONGLIVED: u32 = 128;
    pub const COMPRESSIBLE: u32 = 256;
    pub const INCOMPRESSIBLE: u32 = 512;

    /// Every flag with its name, as the CLI takes them (`rados
    /// set-alloc-hint --flags compressible,sequential_read`).
    pub const NAMES: [(&str, u32); 10] = [
        ("sequential_write", SEQUENTIAL_WRITE),
        ("random_write", RANDOM_WRITE),
        ("sequential_read", SEQUENTIAL_READ),
        ("random_read", RANDOM_READ),
        ("append_only", APPEND_ONLY),
        ("immutable", IMMUTABLE),
        ("shortlived", SHORTLIVED),
        ("longlived", LONGLIVED),
        ("compressible", COMPRESSIBLE),
        ("incompressible", INCOMPRESSIBLE),
    ];

    /// Every defined flag at once; other bits are refused.
    pub const ALL: u32 = 1023;

    /// Flags from names separated by commas (empty: none).
    pub fn parse(names: &str) -> Result<u32, String> {
        let mut flags = 0;
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let Some((_, f)) = NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) else {
                let known: Vec<&str> = NAMES.iter().map(|(n, _)| *n).collect();
                return Err(format!(
                    "unknown allocation hint flag '{name}' (known: {})",
                    known.join(", ")
                ));
            };
            flags |= f;
        }
        Ok(flags)
    }

    /// The names of the flags set in `flags`, separated by commas.
    pub fn names(flags: u32) -> String {
        let set: Vec<&str> = (NAMES.iter())
            .filter(|(_, f)| flags & f != 0)
            .map(|(n, _)| *n)
            .collect();
        set.join(",")
    }
}

/// Longest object class or method name.
pub const CLASS_NAME_MAX: usize = 64;

impl SubOp {
    /// Its name as Ceph's op descriptions print it (`write`, `omap-set`).
    pub fn name(&self) -> &'static str {
        match self {
            SubOp::AssertExists => "assert-exists",
            SubOp::AssertNotExists => "assert-not-exists",
            SubOp::AssertVersion(_) => "assert-version",
            SubOp::CmpXattr { .. } => "cmpxattr",
            SubOp::CmpOmap { .. } => "omap-cmp",
            SubOp::Create => "create",
            SubOp::WriteFull(_) => "writefull",
            SubOp::Write { .. } => "write",
            SubOp::Append(_) => "append",
            SubOp::Truncate(_) => "truncate",
            SubOp::Zero { .. } => "zero",
            SubOp::Remove => "delete",
            SubOp::SetXattr { .. } => "setxattr",
            SubOp::RmXattr(_) => "rmxattr",
            SubOp::OmapSet(_) => "omap-set-vals",
            SubOp::OmapRm(_) => "omap-rm-keys",
            SubOp::OmapClear => "omap-clear",
            SubOp::OmapSetHeader(_) => "omap-set-header",
            SubOp::Read { .. } => "read",
            SubOp::Stat => "stat",
            SubOp::GetXattr(_) => "getxattr",
            SubOp::GetXattrs => "getxattrs",
            SubOp::OmapGetKeys(_) => "omap-get-vals-by-keys",
            SubOp::OmapList { .. } => "omap-get-vals",
            SubOp::OmapGetHeader => "omap-get-header",
            SubOp::Exec { .. } => "call",
            SubOp::SetAllocHint { .. } => "set-alloc-hint",
        }
    }

    /// Whether this sub-op changes the object. An `Exec` is not counted
    /// here: whether it writes is its method's, which only the OSD knows.
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            SubOp::Create
                | SubOp::WriteFull(_)
                | SubOp::Write { .. }
                | SubOp::Append(_)
                | SubOp::Truncate(_)
                | SubOp::Zero { .. }
                | SubOp::Remove
                | SubOp::SetXattr { .. }
                | SubOp::RmXattr(_)
                | SubOp::OmapSet(_)
                | SubOp::OmapRm(_)
                | SubOp::OmapClear
                | SubOp::OmapSetHeader(_)
                | SubOp::SetAllocHint { .. }
        )
    }

    /// Whether this sub-op can take more space (refused while an OSD of
    /// the PG is full; a truncate or removal only frees it).
    pub fn takes_space(&self) -> bool {
        matches!(
            self,
            SubOp::Create
                | SubOp::WriteFull(_)
                | SubOp::Write { .. }
                | SubOp::Append(_)
                | SubOp::SetXattr { .. }
                | SubOp::OmapSet(_)
                | SubOp::OmapSetHeader(_)
                | SubOp::SetAllocHint { .. }
        )
    }
}

/// A client's op on one object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientOp {
    pub pool: u64,
    pub name: String,
    /// The client's map epoch (a primary with an older map fetches the
    /// newer one first; a client with an older map is told to refresh).
    pub epoch: Epoch,
    pub ops: Vec<SubOp>,
    /// Identifies the op across the client's retries, so that a write
    /// whose reply was lost is not applied twice (the PG log keeps it).
    pub reqid: Option<ReqId>,
}

/// A client's request id: the client's random id and its op counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ReqId {
    pub client: u64,
    pub tid: u64,
}

/// What one read sub-op returned (writes and asserts give `None`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SubResult {
    None,
    Data(#[serde(with = "loligo_bulk::serde")] Bytes),
    Stat { size: u64, version: Version },
    Xattrs(Vec<(String, serde_bytes::ByteBuf)>),
    Omap(Vec<(serde_bytes::ByteBuf, serde_bytes::ByteBuf)>),
}

/// Why an op failed. Nothing of a failed op is applied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum OpError {
    #[error("object not found")]
    NotFound,
    #[error("object exists")]
    Exists,
    /// An assert (version, xattr or omap compare) failed: sub-op `index`.
    #[error("assertion {index} failed")]
    AssertFailed { index: u32 },
    #[error("no attribute '{0}'")]
    NoXattr(String),
    #[error("pool {0} does not exist")]
    NoPool(u64),
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("object too large: {size} bytes (pool limit {max})")]
    TooLarge { size: u64, max: u64 },
    /// The OSD is not this PG's primary at `epoch`: refresh the map.
    #[error("not the primary (map epoch {epoch})")]
    WrongPrimary { epoch: Epoch },
    /// The client's map is newer than the OSD's; retry shortly.
    #[error("OSD map is behind (epoch {epoch})")]
    Behind { epoch: Epoch },
    /// Fewer than min_size up-to-date replicas, or (erasure-coded) fewer
    /// than k shards of an object to read it from: writes wait, then
    /// fail.
    #[error(
        "PG {pg} is unavailable: {have} of the {need} copies or shards it needs are up to date"
    )]
    Unavailable { pg: String, have: u32, need: u32 },
    #[error("no space left on the OSD")]
    NoSpace,
    #[error("timed out: {0}")]
    Timeout(String),
    #[error("OSD error: {0}")]
    Io(String),
    /// None of the OSDs that hold the PG's latest writes is up: it serves
    /// nothing until one returns (ops wait, then fail with this). Only
    /// OSDs that did not answer the PG's peering are named. None named:
    /// the up copies do not hold its latest writes in full (an
    /// erasure-coded PG needs k shards at its head), and no OSD known to
    /// hold them is down.
    #[error("PG {pg} is down: {}", down_why(osds))]
    Down { pg: String, osds: Vec<i32> },
    /// An OSD holding the PG is full: writes that could take space are
    /// refused (deletes, truncates and removals still go) until space is
    /// freed or OSDs are added.
    #[error("osd.{osd} is full: writes that take space are refused until data is deleted or OSDs are added")]
    Full { osd: i32 },
    /// The pool type cannot do this (e.g. omap on an erasure-coded pool).
    #[error("not supported: {0}")]
    NotSupported(String),
    /// The OSD has no object class method of this name (`class.method`).
    #[error("no object class method {0}")]
    NoMethod(String),
    /// The object class method of sub-op `index` refused the op (one of
    /// its checks failed; `code` is the method's): nothing was applied.
    #[error("object class method of sub-op {index} refused (code {code}): {message}")]
    MethodRefused {
        index: u32,
        code: u32,
        message: String,
    },
    /// The client's caps do not allow the op (or the client is unknown,
    /// removed, or its key rotated away): nothing was applied.
    #[error("permission denied: {0}")]
    Denied(String),
    /// The object's data failed its checksum (or could not be read) on
    /// the OSD, and no good copy could be read in its place (EIO).
    #[error("object data damaged: {0}")]
    Damaged(String),
}

/// The reply to a `ClientOp`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpReply {
    pub result: Result<Vec<SubResult>, OpError>,
    /// The object's version after the op (writes) or as read.
    pub version: Version,
    pub epoch: Epoch,
}

/// Everything a client sends to an OSD's `Op` call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientRequest {
    Op(ClientOp),
    /// List one PG's objects in (hash, name) order from `start`
    /// (exclusive), at most `limit`.
    List {
        pool: u64,
        ps: u32,
        epoch: Epoch,
        start: Option<String>,
        limit: u32,
    },
    /// An operator's command to PG `pool.ps`'s primary.
    Pg {
        pool: u64,
        ps: u32,
        epoch: Epoch,
        cmd: crate::scrub::PgCommand,
    },
    /// An operator's command to the OSD it is sent to.
    Tell {
        cmd: crate::scrub::OsdCommand,
    },
}

/// What the `Op` call answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientReply {
    Op(OpReply),
    /// Names, and whether the PG has more after them.
    List {
        result: Result<(Vec<String>, bool), OpError>,
        epoch: Epoch,
    },
    /// The answer to `ClientRequest::Pg`.
    Pg {
        result: Result<crate::scrub::PgCommandReply, OpError>,
        epoch: Epoch,
    },
    /// The answer to `ClientRequest::Tell`: what the OSD did.
    Tell {
        result: Result<String, OpError>,
    },
}

/// Encode a wire message (postcard), into a buffer sized once: a message
/// carrying megabytes of data would otherwise be copied at each doubling.
pub fn encode_msg<T: Serialize>(v: &T) -> Vec<u8> {
    let size = postcard::serialize_with_flavor(v, postcard::ser_flavors::Size::default())
        .unwrap_or_default();
    postcard::to_io(v, Vec::with_capacity(size)).unwrap_or_default()
}

/// Decode a wire message; garbage is an `Invalid` error.
pub fn decode_msg<T: for<'de> Deserialize<'de>>(b: &[u8]) -> Result<T, OpError> {
    postcard::from_bytes(b).map_err(|e| OpError::Invalid(format!("cannot decode message: {e}")))
}

/// Encode a message for the wire: the body (postcard), and the data
/// payloads it names, to send beside it uncopied (loligo-bulk).
pub fn encode_wire<T: Serialize>(v: &T) -> (Vec<u8>, Vec<Bytes>) {
    loligo_bulk::collect(|| postcard::to_stdvec(v).unwrap_or_default())
}

/// Decode what [`encode_wire`] produced; the payloads become the
/// message's data without a copy. Garbage, or payloads that do not match
/// the body, is an `Invalid` error.
pub fn decode_wire<T: for<'de> Deserialize<'de>>(
    body: &[u8],
    bulk: Vec<Bytes>,
) -> Result<T, OpError> {
    loligo_bulk::supply(bulk, || postcard::from_bytes(body))
        .map_err(|e| OpError::Invalid(format!("cannot decode message: {e}")))
}

/// Why a PG is down, for [`OpError::Down`].
fn down_why(osds: &[i32]) -> String {
    if osds.is_empty() {
        "the up OSDs do not hold its latest writes in full (an erasure-coded PG needs k \
         shards of them), and no OSD known to hold them is down"
            .to_string()
    } else {
        format!("its latest writes are on osd {osds:?}, none of them up")
    }
}

#[cfg(test)]
mod tests {
    use super::OpError;

    #[test]
    fn a_down_pg_says_whom_it_waits_for_or_that_nobody_is_coming() {
        let waits = OpError::Down {
            pg: "1.0".into(),
            osds: vec![3, 5],
        };
        assert_eq!(
            waits.to_string(),
            "PG 1.0 is down: its latest writes are on osd [3, 5], none of them up"
        );
        let nobody = OpError::Down {
            pg: "1.0".into(),
            osds: vec![],
        };
        assert_eq!(
            nobody.to_string(),
            "PG 1.0 is down: the up OSDs do not hold its latest writes in full (an \
             erasure-coded PG needs k shards of them), and no OSD known to hold them is down"
        );
    }
}
