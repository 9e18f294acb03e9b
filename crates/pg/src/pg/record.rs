//! The stored form of a PG's own records (kept in its collection beside
//! the objects, written in the same transaction as each write): the PG
//! info under `info`, one log entry per version under `log/` + the
//! version counter (8 bytes, big-endian, so they list in order), and one
//! record per object the copy lacks under `missing/` + the object name, and
//! a backfilling copy's cursor under `backfill`, and the Merkle tree's
//! shape and pages (`merkle`, `merkle.page/`; a log entry may carry the
//! tree's leaf stamp, see `tree`). Each
//! value starts with a 4-byte marker naming its kind and format version,
//! then the postcard encoding of the record; `docs/format.md` has the
//! layouts.
//!
//! A record in an unknown format is refused with `RecordError`, never
//! guessed at: a later format adds a new marker (and reads the old one).

use super::backfill::Cursor;
use super::{Before, GaveUp, LogEntry, PgInfo};
use loligo_types::ops::{ReqId, Version};

/// Marker of a PG info record, format 1.
pub const INFO_V1: &[u8; 4] = b"LPI1";
/// Marker of a PG log entry, format 1.
pub const LOG_V1: &[u8; 4] = b"LPL1";
/// Marker of a PG log entry followed by the leaf stamp of this copy's
/// Merkle tree ([`LeafStamp`]), format 2.
pub const LOG_V2: &[u8; 4] = b"LPL2";
/// Marker of a PG log entry that gave something up, followed by what
/// ([`GaveUp`]), format 3 (never stamped).
pub const LOG_V3: &[u8; 4] = b"LPL3";
/// Marker of a PG log entry of any kind with what its object was before
/// it ([`super::Before`]), format 4.
pub const LOG_V4: &[u8; 4] = b"LPL4";
/// Marker of a format 4 entry followed by the leaf stamp of this copy's
/// Merkle tree ([`LeafStamp`]), format 5 (an entry that gave something
/// up is never stamped).
pub const LOG_V5: &[u8; 4] = b"LPL5";
/// Marker of a format 4 entry with the version of the entry below it
/// (`LogEntry::prev`), format 6: the one written now.
pub const LOG_V6: &[u8; 4] = b"LPL6";
/// Marker of a format 6 entry followed by the leaf stamp of this copy's
/// Merkle tree, format 7 (an entry that gave something up is never
/// stamped).
pub const LOG_V7: &[u8; 4] = b"LPL7";

/// Marker of a missing-object record (the version a copy needs), format 1.
pub const MISSING_V1: &[u8; 4] = b"LPM1";

/// Marker of a backfill cursor record, format 1.
pub const BACKFILL_V1: &[u8; 4] = b"LPB1";

/// Marker of a Merkle tree shape record (its leaf count), format 1: the
/// first layout, one record per leaf (read only to be replaced).
pub const TREE_V1: &[u8; 4] = b"LPT1";
/// Marker of a Merkle tree shape record (leaf count, leaves per page),
/// format 2: the leaves kept in pages and log stamps.
pub const TREE_V2: &[u8; 4] = b"LPT2";
/// Marker of a Merkle tree page record, format 1.
pub const PAGE_V1: &[u8; 4] = b"LPP1";
/// Marker of a scrub stamps record, format 1.
pub const SCRUB_V1: &[u8; 4] = b"LPS1";
/// Marker of the record of the pg_num a copy was made or split for,
/// format 1.
pub const PG_NUM_V1: &[u8; 4] = b"LPN1";
/// Marker of the request ids a merge carried over from the logs of the
/// copies it joined, format 1.
pub const DUPS_V1: &[u8; 4] = b"LPD1";

/// What a write did to its copy's Merkle tree, carried in the log entry
/// the write persists anyway (no record of its own): leaf `leaf` holds
/// `value` after it, and it is the copy's `seq`th change (a page record
/// written after it says so by an `as_of` past `seq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeafStamp {
    pub seq: u64,
    pub leaf: u32,
    pub value: u64,
}

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

/// The fields formats 1-3 store first (they have no `before`).
#[derive(serde::Serialize, serde::Deserialize)]
struct Entry {
    version: Version,
    name: String,
    removed: bool,
    reqid: Option<ReqId>,
}

impl Entry {
    fn with(self, gave_up: Option<GaveUp>) -> LogEntry {
        LogEntry {
            version: self.version,
            name: self.name,
            removed: self.removed,
            reqid: self.reqid,
            gave_up,
            before: Before::Unknown,
            prev: None,
        }
    }
}

/// The entry fields formats 4-7 store first, the name borrowed: what is
/// encoded, and what is decoded in place (no copy of the name until one
/// is needed). Formats 6 and 7 follow it with `LogEntry::prev`.
#[derive(serde::Serialize, serde::Deserialize)]
struct EntryRef<'a> {
    version: Version,
    #[serde(borrow)]
    name: &'a str,
    removed: bool,
    reqid: Option<ReqId>,
    before: Before,
    gave_up: Option<GaveUp>,
}

impl EntryRef<'_> {
    fn to_entry(&self, prev: Option<Version>) -> LogEntry {
        LogEntry {
            version: self.version,
            name: self.name.to_string(),
            removed: self.removed,
            reqid: self.reqid,
            gave_up: self.gave_up,
            before: self.before,
            prev,
        }
    }
}

/// A format 6 body: the entry's fields, then the version below it.
fn entry_body(e: &LogEntry) -> Vec<u8> {
    let fields = EntryRef {
        version: e.version,
        name: &e.name,
        removed: e.removed,
        reqid: e.reqid,
        before: e.before,
        gave_up: e.gave_up,
    };
    // Encoding plain structs into a Vec cannot fail.
    let mut out = postcard::to_stdvec(&fields).unwrap_or_default();
    out.extend(postcard::to_stdvec(&e.prev).unwrap_or_default());
    out
}

/// The stored bytes of a PG log entry (format 6).
pub fn encode_log(e: &LogEntry) -> Vec<u8> {
    let mut out = LOG_V6.to_vec();
    out.extend(entry_body(e));
    out
}

/// A PG log entry from its stored bytes (a stamp is passed over).
pub fn decode_log(b: &[u8]) -> Result<LogEntry, RecordError> {
    decode_log_stamped(b).map(|(e, _)| e)
}

/// A PG log entry and its leaf stamp, if it has one, from its stored
/// bytes (any format).
pub fn decode_log_stamped(b: &[u8]) -> Result<(LogEntry, Option<LeafStamp>), RecordError> {
    const WHAT: &str = "PG log";
    let damaged = |e: postcard::Error| RecordError::Damaged {
        what: WHAT,
        why: e.to_string(),
    };
    let marker = b.get(..4).unwrap_or(b);
    let body = b.get(4..).unwrap_or_default();
    let stamp = |rest: &[u8]| postcard::from_bytes::<LeafStamp>(rest).map_err(damaged);
    let parts = if marker == LOG_V6 || marker == LOG_V7 {
        let (e, rest) = postcard::take_from_bytes::<EntryRef>(body).map_err(damaged)?;
        let (prev, rest) = postcard::take_from_bytes::<Option<Version>>(rest).map_err(damaged)?;
        Some((e.to_entry(prev), rest, marker == LOG_V7))
    } else if marker == LOG_V4 || marker == LOG_V5 {
        let (e, rest) = postcard::take_from_bytes::<EntryRef>(body).map_err(damaged)?;
        Some((e.to_entry(None), rest, marker == LOG_V5))
    } else {
        None
    };
    if let Some((entry, rest, stamped)) = parts {
        return match (stamped, rest.is_empty()) {
            (false, true) => Ok((entry, None)),
            (false, false) => Err(RecordError::Damaged {
                what: WHAT,
                why: format!("{} bytes after the entry", rest.len()),
            }),
            (true, _) if entry.gave_up.is_some() => Err(RecordError::Damaged {
                what: WHAT,
                why: format!("entry {} gave something up but is stamped", entry.version),
            }),
            (true, _) => Ok((entry, Some(stamp(rest)?))),
        };
    }
    if marker == LOG_V3 {
        let (entry, rest) = postcard::take_from_bytes::<Entry>(body).map_err(damaged)?;
        let what = postcard::from_bytes::<GaveUp>(rest).map_err(damaged)?;
        return Ok((entry.with(Some(what)), None));
    }
    if marker == LOG_V2 {
        let (entry, rest) = postcard::take_from_bytes::<Entry>(body).map_err(damaged)?;
        return Ok((entry.with(None), Some(stamp(rest)?)));
    }
    decode::<Entry>(WHAT, LOG_V1, b).map(|e| (e.with(None), None))
}

/// The stored bytes of log entry `b` (any format) with stamp `s` instead
/// of any it had, in format 7.
pub fn stamp_log(b: &[u8], s: &LeafStamp) -> Result<Vec<u8>, RecordError> {
    let no_stamp = |v: Version| RecordError::Damaged {
        what: "PG log",
        why: format!("entry {v} gave something up: it takes no stamp"),
    };
    // The common case, a write's fresh entry: checked in place, and its
    // bytes taken as they are (this runs on every replicated write).
    let fresh = b.strip_prefix(LOG_V6.as_slice()).and_then(|body| {
        let (e, rest) = postcard::take_from_bytes::<EntryRef>(body).ok()?;
        match postcard::take_from_bytes::<Option<Version>>(rest) {
            Ok((_, [])) => Some((e.gave_up, e.version, body)),
            _ => None,
        }
    });
    let body = match fresh {
        Some((Some(_), v, _)) => return Err(no_stamp(v)),
        Some((None, _, body)) => std::borrow::Cow::Borrowed(body),
        None => {
            let e = decode_log(b)?;
            if e.gave_up.is_some() {
                return Err(no_stamp(e.version));
            }
            std::borrow::Cow::Owned(entry_body(&e))
        }
    };
    let mut out = Vec::with_capacity(4 + body.len() + 24);
    out.extend_from_slice(LOG_V7);
    out.extend_from_slice(&body);
    out.extend(postcard::to_stdvec(s).unwrap_or_default());
    Ok(out)
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

/// The stored bytes of a primary's last scrub and deep scrub stamps
/// (Unix ms; 0: never).
pub fn encode_scrub_stamps(last: u64, last_deep: u64) -> Vec<u8> {
    encode(SCRUB_V1, &(last, last_deep))
}

/// A primary's scrub stamps from their stored bytes.
pub fn decode_scrub_stamps(b: &[u8]) -> Result<(u64, u64), RecordError> {
    decode("scrub stamps", SCRUB_V1, b)
}

/// The stored bytes of the pg_num a copy was made or last split for.
pub fn encode_pg_num(pg_num: u32) -> Vec<u8> {
    encode(PG_NUM_V1, &pg_num)
}

/// The pg_num a copy was made or last split for, from its stored bytes.
pub fn decode_pg_num(b: &[u8]) -> Result<u32, RecordError> {
    decode("pg_num", PG_NUM_V1, b)
}

/// The stored bytes of the request ids (each with its write's version)
/// a merged copy answers retries of.
pub fn encode_dups(dups: &[(ReqId, Version)]) -> Vec<u8> {
    encode(DUPS_V1, &dups)
}

/// Request ids a merged copy answers retries of, from their stored bytes.
pub fn decode_dups(b: &[u8]) -> Result<Vec<(ReqId, Version)>, RecordError> {
    decode("dups", DUPS_V1, b)
}

/// The stored bytes of a Merkle tree's shape: its leaf count and leaves
/// per page.
pub fn encode_tree(leaves: u32, page_leaves: u32) -> Vec<u8> {
    encode(TREE_V2, &(leaves, page_leaves))
}

/// A Merkle tree's shape from its stored bytes: the leaf count, and the
/// leaves per page (`None`: the first layout, a record per leaf).
pub fn decode_tree(b: &[u8]) -> Result<(u32, Option<u32>), RecordError> {
    const WHAT: &str = "Merkle tree shape";
    if b.starts_with(TREE_V1) {
        return decode::<u32>(WHAT, TREE_V1, b).map(|n| (n, None));
    }
    decode::<(u32, u32)>(WHAT, TREE_V2, b).map(|(n, p)| (n, Some(p)))
}

/// The stored bytes of a Merkle tree page: the stamps before `as_of`
/// are in it, then its leaves (8 bytes each, big-endian).
pub fn encode_page(as_of: u64, leaves: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + 8 * leaves.len());
    out.extend_from_slice(PAGE_V1);
    out.extend_from_slice(&as_of.to_be_bytes());
    for v in leaves {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out
}

/// A Merkle tree page of `n` leaves from its stored bytes: its `as_of`
/// and leaves.
pub fn decode_page(b: &[u8], n: u32) -> Result<(u64, Vec<u64>), RecordError> {
    const WHAT: &str = "Merkle tree page";
    let Some(body) = b.strip_prefix(PAGE_V1.as_slice()) else {
        return Err(RecordError::UnknownFormat {
            what: WHAT,
            found: b.iter().take(4).copied().collect(),
        });
    };
    if body.len() != 8 + 8 * n as usize {
        return Err(RecordError::Damaged {
            what: WHAT,
            why: format!("{} bytes for {n} leaves", b.len()),
        });
    }
    let mut words = body
        .chunks_exact(8)
        .map(|c| u64::from_be_bytes(c.try_into().unwrap_or_default()));
    let as_of = words.next().unwrap_or_default();
    Ok((as_of, words.collect()))
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
            gave_up: None,
            before: Before::At(Version { epoch: 7, v: 40 }),
            prev: Some(Version { epoch: 6, v: 41 }),
        };
        assert_eq!(decode_log(&encode_log(&e)), Ok(e.clone()));
        assert_eq!(&encode_log(&e)[..4], b"LPL6");
        // Formats 4 and 5, from before entries named the one below them,
        // are read with that unknown.
        let four = LogEntry {
            prev: None,
            ..e.clone()
        };
        let body4 = |x: &LogEntry| {
            #[derive(serde::Serialize)]
            struct Four<'a>(
                Version,
                &'a str,
                bool,
                Option<ReqId>,
                Before,
                Option<GaveUp>,
            );
            postcard::to_stdvec(&Four(
                x.version, &x.name, x.removed, x.reqid, x.before, x.gave_up,
            ))
            .unwrap()
        };
        let mut v4 = LOG_V4.to_vec();
        v4.extend(body4(&e));
        assert_eq!(decode_log(&v4), Ok(four.clone()));
        let mut v5 = LOG_V5.to_vec();
        v5.extend(body4(&e));
        let st5 = LeafStamp {
            seq: 2,
            leaf: 7,
            value: 5,
        };
        v5.extend(postcard::to_stdvec(&st5).unwrap());
        assert_eq!(decode_log_stamped(&v5), Ok((four.clone(), Some(st5))));
        // Restamped: format 7, the entry unchanged.
        let v7 = stamp_log(&v5, &st5).unwrap();
        assert_eq!(&v7[..4], b"LPL7");
        assert_eq!(decode_log_stamped(&v7), Ok((four, Some(st5))));
        // Formats 1-3, from before entries said what came before them,
        // are read with that unknown.
        let old = LogEntry {
            before: Before::Unknown,
            prev: None,
            ..e.clone()
        };
        let body = |x: &LogEntry| Entry {
            version: x.version,
            name: x.name.clone(),
            removed: x.removed,
            reqid: x.reqid,
        };
        let v1 = encode(LOG_V1, &body(&old));
        assert_eq!(decode_log(&v1), Ok(old.clone()));
        let old_stamp = LeafStamp {
            seq: 3,
            leaf: 1,
            value: 8,
        };
        let mut v2 = encode(LOG_V2, &body(&old));
        v2.extend(postcard::to_stdvec(&old_stamp).unwrap());
        assert_eq!(decode_log_stamped(&v2), Ok((old.clone(), Some(old_stamp))));
        let gone = LogEntry {
            gave_up: Some(GaveUp::Object(Version::default())),
            removed: true,
            ..old.clone()
        };
        let mut v3 = encode(LOG_V3, &body(&gone));
        v3.extend(postcard::to_stdvec(&GaveUp::Object(Version::default())).unwrap());
        assert_eq!(decode_log(&v3), Ok(gone));
        // An old entry stamped anew is written in the new format.
        assert_eq!(&stamp_log(&v1, &old_stamp).unwrap()[..4], b"LPL7");
        assert_eq!(
            decode_log_stamped(&stamp_log(&v2, &old_stamp).unwrap()),
            Ok((old, Some(old_stamp)))
        );
        // Bytes past an unstamped entry are damage, not a stamp.
        let mut long = encode_log(&e);
        long.push(0);
        assert!(matches!(
            decode_log(&long),
            Err(RecordError::Damaged { .. })
        ));
        // An entry that gave its object up: never stamped.
        let g = LogEntry {
            removed: true,
            gave_up: Some(GaveUp::Object(Version { epoch: 6, v: 40 })),
            before: Before::Absent,
            ..e.clone()
        };
        let reset = LogEntry {
            name: String::new(),
            gave_up: Some(GaveUp::Copy),
            before: Before::Unknown,
            ..e.clone()
        };
        assert_eq!(decode_log(&encode_log(&reset)), Ok(reset.clone()));
        assert!(reset.is_reset() && !g.is_reset());
        let gb = encode_log(&g);
        assert_eq!(&gb[..4], b"LPL6");
        assert_eq!(decode_log_stamped(&gb), Ok((g.clone(), None)));
        assert!(matches!(
            decode_log(&gb[..gb.len() - 1]),
            Err(RecordError::Damaged { .. })
        ));
        let st0 = LeafStamp {
            seq: 1,
            leaf: 0,
            value: 1,
        };
        // Stamped by hand anyway: refused on reading.
        let mut forged = LOG_V7.to_vec();
        forged.extend(entry_body(&g));
        forged.extend(postcard::to_stdvec(&st0).unwrap());
        assert!(matches!(
            decode_log(&forged),
            Err(RecordError::Damaged { .. })
        ));
        assert!(stamp_log(&gb, &st0).is_err());
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
        let tb = encode_tree(16_384, 64);
        assert_eq!(&tb[..4], b"LPT2");
        assert_eq!(decode_tree(&tb), Ok((16_384, Some(64))));
        assert!(decode_tree(&cb).is_err(), "a cursor is not a tree shape");
        // The first layout's shape is still read (to be replaced).
        assert_eq!(decode_tree(&encode(TREE_V1, &1024u32)), Ok((1024, None)));
        // A stamped log entry reads as the entry, and its stamp back.
        let st = LeafStamp {
            seq: 9,
            leaf: 4095,
            value: u64::MAX - 3,
        };
        let stamped = stamp_log(&encode_log(&e), &st).unwrap();
        assert_eq!(&stamped[..4], b"LPL7");
        assert_eq!(decode_log(&stamped), Ok(e.clone()));
        assert_eq!(decode_log_stamped(&stamped), Ok((e.clone(), Some(st))));
        assert_eq!(decode_log_stamped(&encode_log(&e)), Ok((e.clone(), None)));
        // Stamped again: the new stamp replaces the old.
        let st2 = LeafStamp { seq: 10, ..st };
        let again = stamp_log(&stamped, &st2).unwrap();
        assert_eq!(decode_log_stamped(&again), Ok((e.clone(), Some(st2))));
        // A stamp cut short is damage, not a missing stamp.
        assert!(matches!(
            decode_log_stamped(&stamped[..stamped.len() - 1]),
            Err(RecordError::Damaged { .. })
        ));
        assert!(stamp_log(&b, &st).is_err(), "an info is not a log entry");
        // Pages: as_of and leaves back; a wrong length is damage.
        let pb = encode_page(77, &[1, 0, u64::MAX]);
        assert_eq!(decode_page(&pb, 3), Ok((77, vec![1, 0, u64::MAX])));
        assert!(matches!(
            decode_page(&pb, 4),
            Err(RecordError::Damaged { .. })
        ));
        assert!(matches!(
            decode_page(&tb, 3),
            Err(RecordError::UnknownFormat { .. })
        ));
    }
}
