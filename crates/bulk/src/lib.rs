//! Bulk bytes beside a message.
//!
//! A message such as a 4 MiB write is a few dozen bytes of header and one
//! large payload. Encoding the payload into the message body copies it
//! once on the way out and once more on the way in; the transport already
//! hands the receiver a shared buffer, so both copies are waste. Fields
//! marked `#[serde(with = "loligo_bulk::serde")]` (a `Bytes`) or of type
//! [`Bulk`] are therefore encoded in one of two ways:
//!
//! - **inline** (any plain `serde` encoder: postcard records on disk, JSON):
//!   the bytes themselves, exactly as `serde_bytes` would write them, so
//!   formats already stored keep decoding;
//! - **beside** (inside [`collect`]): only the length goes into the body,
//!   and the `Bytes` (a reference count, not a copy) is pushed onto a list
//!   the caller sends alongside. [`supply`] hands that list back to the
//!   decoder, which takes each payload in order as a slice of the buffer
//!   it arrived in.
//!
//! The mode is a thread-local set only for the duration of one synchronous
//! encode or decode, restored on exit (panics included). This module must
//! never hold a payload past the call that set it, and a decode must never
//! succeed with payloads left over or missing: both are malformed input.

pub mod aligned;

use ::serde::de::Error as _;
use ::serde::{Deserialize, Deserializer, Serialize, Serializer};
use bytes::Bytes;
use std::cell::RefCell;
use std::collections::VecDeque;

/// Where bulk fields go while encoding, or come from while decoding.
enum Mode {
    Collect(Vec<Bytes>),
    Supply(VecDeque<Bytes>),
}

thread_local! {
    static MODE: RefCell<Option<Mode>> = const { RefCell::new(None) };
}

/// Restores the previous mode when dropped, so a panic inside an encoder
/// cannot leave the thread in collect or supply mode.
struct Scope {
    /// The mode to put back; `None` once `leave` has put it back.
    prev: Option<Option<Mode>>,
}

impl Scope {
    fn enter(mode: Mode) -> Scope {
        Scope {
            prev: Some(MODE.with(|m| m.borrow_mut().replace(mode))),
        }
    }

    /// Leave the scope, returning the mode as the call left it.
    fn leave(mut self) -> Option<Mode> {
        let prev = self.prev.take().flatten();
        MODE.with(|m| std::mem::replace(&mut *m.borrow_mut(), prev))
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        if let Some(prev) = self.prev.take() {
            MODE.with(|m| *m.borrow_mut() = prev);
        }
    }
}

/// Run `encode` with bulk fields collected beside the message: returns
/// its result and the payloads, in the order the encoder met them.
pub fn collect<R>(encode: impl FnOnce() -> R) -> (R, Vec<Bytes>) {
    let scope = Scope::enter(Mode::Collect(Vec::new()));
    let r = encode();
    match scope.leave() {
        Some(Mode::Collect(v)) => (r, v),
        _ => (r, Vec::new()),
    }
}

/// Why a message with bulk payloads did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BulkError {
    /// The body did not decode (a payload it names missing or of the
    /// wrong length included).
    #[error("{0}")]
    Decode(String),
    #[error("{0} bulk payload(s) left over after decoding the message")]
    LeftOver(usize),
}

/// Run `decode` with `bulk` as the payloads its bulk fields take, in
/// order. A decode that leaves payloads unused is an error: the body and
/// the payloads did not come from the same message.
pub fn supply<T, E: std::fmt::Display>(
    bulk: Vec<Bytes>,
    decode: impl FnOnce() -> Result<T, E>,
) -> Result<T, BulkError> {
    let scope = Scope::enter(Mode::Supply(bulk.into()));
    let r = decode();
    let left = match scope.leave() {
        Some(Mode::Supply(rest)) => rest.len(),
        _ => 0,
    };
    match r {
        Err(e) => Err(BulkError::Decode(e.to_string())),
        Ok(_) if left > 0 => Err(BulkError::LeftOver(left)),
        Ok(v) => Ok(v),
    }
}

/// Serialize `b`: its length beside the message under [`collect`], else
/// the bytes inline.
fn put<S: Serializer>(b: &Bytes, s: S) -> Result<S::Ok, S::Error> {
    let collected = MODE.with(|m| match &mut *m.borrow_mut() {
        Some(Mode::Collect(v)) => {
            v.push(b.clone());
            true
        }
        _ => false,
    });
    if collected {
        s.serialize_u64(b.len() as u64)
    } else {
        s.serialize_bytes(b)
    }
}

/// Deserialize what [`put`] wrote, in the same mode.
fn take<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
    let supplying = MODE.with(|m| matches!(&*m.borrow(), Some(Mode::Supply(_))));
    if !supplying {
        return Ok(Bytes::from(
            serde_bytes::ByteBuf::deserialize(d)?.into_vec(),
        ));
    }
    let len = u64::deserialize(d)?;
    let next = MODE.with(|m| match &mut *m.borrow_mut() {
        Some(Mode::Supply(q)) => q.pop_front(),
        _ => None,
    });
    match next {
        Some(b) if b.len() as u64 == len => Ok(b),
        Some(b) => Err(D::Error::custom(format!(
            "bulk payload is {} bytes, the message says {len}",
            b.len()
        ))),
        None => Err(D::Error::custom(
            "message names a bulk payload it was not sent with",
        )),
    }
}

/// `#[serde(with = "loligo_bulk::serde")]` for a `Bytes` field.
pub mod serde {
    use super::*;

    pub fn serialize<S: Serializer>(b: &Bytes, s: S) -> Result<S::Ok, S::Error> {
        put(b, s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        take(d)
    }
}

/// A payload that travels beside the message (for payloads inside
/// collections, where a `with` attribute cannot reach).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Bulk(pub Bytes);

impl Serialize for Bulk {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        put(&self.0, s)
    }
}

impl<'de> Deserialize<'de> for Bulk {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bulk, D::Error> {
        take(d).map(Bulk)
    }
}

impl std::ops::Deref for Bulk {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl From<Vec<u8>> for Bulk {
    fn from(v: Vec<u8>) -> Bulk {
        Bulk(v.into())
    }
}

impl From<Bytes> for Bulk {
    fn from(b: Bytes) -> Bulk {
        Bulk(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Msg {
        name: String,
        #[serde(with = "crate::serde")]
        data: Bytes,
        parts: Vec<Bulk>,
        tail: u32,
    }

    fn msg() -> Msg {
        Msg {
            name: "obj".into(),
            data: Bytes::from(vec![7u8; 5000]),
            parts: vec![Bulk::from(vec![1, 2, 3]), Bulk::default()],
            tail: 9,
        }
    }

    #[test]
    fn inline_is_serde_bytes_format() {
        #[derive(Serialize)]
        struct Old<'a> {
            name: &'a str,
            #[serde(with = "serde_bytes_compat")]
            data: &'a [u8],
        }
        mod serde_bytes_compat {
            pub fn serialize<S: ::serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(b)
            }
        }
        #[derive(Debug, Deserialize)]
        struct New {
            name: String,
            #[serde(with = "crate::serde")]
            data: Bytes,
        }
        let old = postcard::to_stdvec(&Old {
            name: "a",
            data: b"xyz",
        })
        .unwrap();
        let new: New = postcard::from_bytes(&old).unwrap();
        assert_eq!((new.name.as_str(), &new.data[..]), ("a", &b"xyz"[..]));
        let j: Msg = serde_json::from_str(&serde_json::to_string(&msg()).unwrap()).unwrap();
        assert_eq!(j, msg());
    }

    #[test]
    fn beside_moves_payloads_out_of_the_body_and_back_without_copying() {
        let m = msg();
        let (body, bulk) = collect(|| postcard::to_stdvec(&m).unwrap());
        assert!(body.len() < 32, "body {} bytes", body.len());
        assert_eq!(bulk.len(), 3);
        // The decoder's payloads are the very buffers it was given.
        let ptr = bulk[0].as_ptr();
        let back: Msg = supply(bulk, || postcard::from_bytes(&body)).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.data.as_ptr(), ptr);
        // Outside the scopes, the thread is back to inline.
        assert_eq!(postcard::to_stdvec(&m).unwrap().len(), body.len() + 5003);
    }

    #[test]
    fn mismatched_payloads_are_errors_not_wrong_data() {
        let m = msg();
        let (body, mut bulk) = collect(|| postcard::to_stdvec(&m).unwrap());
        // Missing one.
        let short = bulk[..2].to_vec();
        let r = supply(short, || postcard::from_bytes::<Msg>(&body));
        assert!(matches!(r, Err(BulkError::Decode(_))), "{r:?}");
        // Wrong length.
        let mut wrong = bulk.clone();
        wrong[1] = Bytes::from_static(b"ab");
        let r = supply(wrong, || postcard::from_bytes::<Msg>(&body));
        assert!(matches!(r, Err(BulkError::Decode(_))), "{r:?}");
        // One too many.
        bulk.push(Bytes::from_static(b"extra"));
        assert_eq!(
            supply(bulk, || postcard::from_bytes::<Msg>(&body)),
            Err(BulkError::LeftOver(1))
        );
        // A body decoded without its payloads fails cleanly.
        assert!(postcard::from_bytes::<Msg>(&body).is_err());
    }

    #[test]
    fn a_panicking_encoder_leaves_the_thread_inline() {
        let r = std::panic::catch_unwind(|| {
            collect(|| {
                let _ = postcard::to_stdvec(&msg());
                panic!("encoder failed");
            })
        });
        assert!(r.is_err());
        let inline = postcard::to_stdvec(&msg()).unwrap();
        assert!(inline.len() > 5000);
    }
}
