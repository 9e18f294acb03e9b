//! The stored form of a PG's own records (kept in its collection beside
//! the objects, written in the same transaction as each write): the PG
//! info under `info`, one log entry per version under `log/` + the
//! version counter (8 bytes, big-endian, so they list in order), and one
//! record per object the copy lacks under `missing/` + the object name, and
//! a backfilling copy's cursor under `backfill`. Each
//! value starts with a 4-byte marker naming its kind and format version,
//! then the postcard encoding of the record; `docs/format.md` has the
//! layouts.
//!
//! A record in an unknown format is refused with `RecordError`, never
//! guessed at: a later format adds a new marker (and reads the old one).

use super::backfill::Cursor;
use super::{LogEntry, PgInfo};
use loligo_types::ops::Version;

/// Marker of a PG info record, format 1.
pub const INFO_V1: &[u8; 4] = b"LPI1";
/// Marker of a PG log entry, format 1.
pub const LOG_V1: &[u8; 4] = b"LPL1";

/// Marker of a missing-object record (the version a copy needs), format 1.
pub const MISSING_V1: &[u8; 4] = b"LPM1";

/// Marker of a backfill cursor record, format 1.
pub const BACKFILL_V1: &[u8; 4] = b"LPB1";

/// Marker of a Merkle tree shape record (its leaf count), format 1.
pub const TREE_V1: &[u8; 4] = b"LPT1";

/// A PG record that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// Written by a format this build does not know (or not a PG record).
    #[error("{what} record has an unknown format marker {found:?}")]
    UnknownFormat { what: &'static str, found: Vec<u8> },
    #[error("{what} record is damaged: {why}")]
    Damaged { what: &'static str, why: String },
}

fn encode<T: serde::Serialize>(marker: &[u8; 4], v: &T) -> Vec<u8> {
    let mut out = marker.to_vec();
    // Encoding plain structs into a Vec cannot fail.
    out.extend(postcard::to_stdvec(v).unwrap_or_default());
    out
}

fn decode<T: for<'de> serde::Deserialize<'de>>(
    what: &'static str,
    marker: &[u8; 4],
    b: &[u8],
) -> Result<T, RecordError> {
    match b.strip_prefix(marker.as_slice()) {
        Some(body) => postcard::from_bytes(body).map_err(|e| RecordError::Damaged {
            what,
            why: e.to_string(),
        }),
        None => Err(RecordError::UnknownFormat {
            what,
            found: b.iter().take(4).copied().collect(),
        }),
    }
}

/// The stored bytes of a PG info.
pub fn encode_info(i: &PgInfo) -> Vec<u8> {
    encode(INFO_V1, i)
}

/// A PG info from its stored bytes.
pub fn decode_info(b: &[u8]) -> Result<PgInfo, RecordError> {
    decode("PG info", INFO_V1, b)
}

/// The stored bytes of a PG log entry.
pub fn encode_log(e: &LogEntry) -> Vec<u8> {
    encode(LOG_V1, e)
}

/// A PG log entry from its stored bytes.
pub fn decode_log(b: &[u8]) -> Result<LogEntry, RecordError> {
    decode("PG log", LOG_V1, b)
}

/// The stored bytes of a missing record.
pub fn encode_missing(need: &Version) -> Vec<u8> {
    encode(MISSING_V1, need)
}

/// A missing record from its stored bytes.
pub fn decode_missing(b: &[u8]) -> Result<Version, RecordError> {
    decode("missing object", MISSING_V1, b)
}

/// The stored bytes of a backfill cursor.
pub fn encode_cursor(c: &Cursor) -> Vec<u8> {
    encode(BACKFILL_V1, c)
}

/// A backfill cursor from its stored bytes.
pub fn decode_cursor(b: &[u8]) -> Result<Cursor, RecordError> {
    decode("backfill cursor", BACKFILL_V1, b)
}

/// The stored bytes of a Merkle tree's shape (its leaf count).
pub fn encode_tree(leaves: u32) -> Vec<u8> {
    encode(TREE_V1, &leaves)
}

/// A Merkle tree's shape from its stored bytes.
pub fn decode_tree(b: &[u8]) -> Result<u32, RecordError> {
    decode("Merkle tree shape", TREE_V1, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_unknown_formats_are_refused() {
        let i = PgInfo {
            last_update: Version { epoch: 7, v: 42 },
            last_epoch_started: 7,
            objects: 3,
            bytes: 4096,
        };
        let b = encode_info(&i);
        assert_eq!(&b[..4], b"LPI1");
        assert_eq!(decode_info(&b), Ok(i));
        // The bare postcard form of an older build is not misread.
        let bare = postcard::to_stdvec(&i).unwrap();
        assert!(matches!(
            decode_info(&bare),
            Err(RecordError::UnknownFormat { .. })
        ));
        // A future format is refused, not guessed.
        let mut future = b.clone();
        future[3] = b'2';
        assert!(matches!(
            decode_info(&future),
            Err(RecordError::UnknownFormat { .. })
        ));
        // Truncation is damage.
        assert!(matches!(
            decode_info(&b[..5]),
            Err(RecordError::Damaged { .. })
        ));
        let e = LogEntry {
            version: Version { epoch: 7, v: 42 },
            name: "obj".into(),
            removed: false,
            reqid: None,
        };
        assert_eq!(decode_log(&encode_log(&e)), Ok(e));
        assert!(decode_log(&b).is_err(), "an info is not a log entry");
        let need = Version { epoch: 3, v: 9 };
        let m = encode_missing(&need);
        assert_eq!(&m[..4], b"LPM1");
        assert_eq!(decode_missing(&m), Ok(need));
        assert!(
            decode_missing(&b).is_err(),
            "an info is not a missing record"
        );
        let c = Cursor::At(loligo_store::ObjectId::new(0xdead_beef, "o"));
        let cb = encode_cursor(&c);
        assert_eq!(&cb[..4], b"LPB1");
        assert_eq!(decode_cursor(&cb), Ok(c));
        assert!(
            decode_cursor(&m).is_err(),
            "a missing record is not a cursor"
        );
        let tb = encode_tree(16_384);
        assert_eq!(&tb[..4], b"LPT1");
        assert_eq!(decode_tree(&tb), Ok(16_384));
        assert!(decode_tree(&cb).is_err(), "a cursor is not a tree shape");
    }
}
