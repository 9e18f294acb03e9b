//! The `s3` object class: the S3 gateway's atomic changes to one bucket
//! index shard (`loligo_types::s3` describes the records). Each method
//! sets or removes an object's entry and, in the same transaction, moves
//! the tails the old entry named to the garbage list, so an overwrite or
//! a delete can neither lose the new data nor leak the old.
//!
//! It must never drop a tail without a garbage record for it, nor set an
//! entry whose upload's pending record the collector has already taken.

use super::{decode, encode, refused, ClsError, ClsResult, Ctx};
use loligo_types::ops::OpError;
use loligo_types::s3::{
    garbage_key, omap_key, Abandon, Commit, Condition, Garbage, IndexEntry, Remove, ENTRY, INLINE,
    PENDING, S3_BUCKET_GONE, S3_NOT_EMPTY, S3_NO_SUCH_KEY, S3_PENDING_GONE, S3_PRECONDITION,
    SEALED,
};

fn bad(what: &str, e: serde_json::Error) -> ClsError {
    ClsError::Op(OpError::Invalid(format!("s3 {what}: {e}")))
}

/// The entry of `key` before the op, if any.
fn entry_of(cx: &mut Ctx<'_>, key: &str) -> Result<Option<IndexEntry>, ClsError> {
    let k = omap_key(ENTRY, key.as_bytes());
    match cx.omap_get(std::slice::from_ref(&k))?.remove(&k) {
        Some(v) => serde_json::from_slice(&v)
            .map(Some)
            .map_err(|e| bad("entry", e)),
        None => Ok(None),
    }
}

/// Refused unless `cond` holds for `old`.
fn check(cond: &Condition, old: Option<&IndexEntry>) -> Result<(), ClsError> {
    if cond.if_none_match && old.is_some() {
        return Err(refused(S3_PRECONDITION, "the object exists".into()));
    }
    match (&cond.if_match, old) {
        (None, _) => Ok(()),
        (Some(_), None) => Err(refused(S3_NO_SUCH_KEY, "the object does not exist".into())),
        (Some(want), Some(e)) if want == "*" || *want == e.etag => Ok(()),
        (Some(want), Some(e)) => Err(refused(
            S3_PRECONDITION,
            format!("ETag {} is not {want}", e.etag),
        )),
    }
}

/// The garbage record for `old`'s tails, if it has any.
fn garbage_of(
    key: &str,
    old: Option<&IndexEntry>,
    ms: u64,
    tag: &str,
) -> Option<(Vec<u8>, Vec<u8>)> {
    let tails = old?.tails();
    if tails.is_empty() {
        return None;
    }
    let g = Garbage {
        tails,
        ms,
        key: key.to_string(),
    };
    let value = serde_json::to_vec(&g).ok()?;
    Some((garbage_key(ms, tag), value))
}

/// A tag for the garbage record of `key`'s old entry, unique among the
/// shard's records made in the same millisecond (an entry's own tails'
/// prefix is unique).
fn old_tag(old: &IndexEntry) -> String {
    (old.tails().first())
        .map(|t| t.prefix.replace('.', "-"))
        .unwrap_or_default()
}

/// `s3.commit` ([`Commit`]): set an object's entry. Refused with
/// [`S3_PENDING_GONE`] if the upload's pending record is gone, with
/// [`S3_PRECONDITION`] or [`S3_NO_SUCH_KEY`] if its condition fails.
/// Output: empty.
pub fn commit(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let c: Commit = decode(input)?;
    if cx.omap_get(&[SEALED.to_vec()])?.contains_key(SEALED) {
        return Err(refused(S3_BUCKET_GONE, "the bucket was deleted".into()));
    }
    let entry: IndexEntry = serde_json::from_slice(&c.entry).map_err(|e| bad("new entry", e))?;
    debug_assert!(matches!(entry.layout, loligo_types::s3::Layout::Inline) == c.inline.is_some());
    let mut rm = Vec::new();
    if let Some(tag) = &c.pending {
        let k = omap_key(PENDING, tag.as_bytes());
        if !cx.omap_get(std::slice::from_ref(&k))?.contains_key(&k) {
            return Err(refused(
                S3_PENDING_GONE,
                format!("upload {tag} was collected before it committed"),
            ));
        }
        rm.push(k);
    }
    let old = entry_of(cx, &c.key)?;
    check(&c.condition, old.as_ref())?;
    let inline_key = omap_key(INLINE, c.key.as_bytes());
    let mut set = vec![(omap_key(ENTRY, c.key.as_bytes()), c.entry)];
    match c.inline {
        Some(data) => set.push((inline_key, data)),
        None if old.as_ref().is_some_and(|o| o.tails().is_empty()) => rm.push(inline_key),
        None => {}
    }
    if let Some(o) = &old {
        set.extend(garbage_of(&c.key, Some(o), c.now_ms, &old_tag(o)));
    }
    cx.omap_set(set)?;
    if !rm.is_empty() {
        cx.omap_rm(rm)?;
    }
    Ok(Vec::new())
}

/// `s3.remove` ([`Remove`]): remove an object's entry, its tails to the
/// garbage list. Refused as `s3.commit` is when its condition fails.
/// Output: postcard `bool`, whether the object existed.
pub fn remove(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let r: Remove = decode(input)?;
    let old = entry_of(cx, &r.key)?;
    check(&r.condition, old.as_ref())?;
    let Some(o) = old else {
        return encode(&false);
    };
    if let Some(g) = garbage_of(&r.key, Some(&o), r.now_ms, &old_tag(&o)) {
        cx.omap_set(vec![g])?;
    }
    cx.omap_rm(vec![
        omap_key(ENTRY, r.key.as_bytes()),
        omap_key(INLINE, r.key.as_bytes()),
    ])?;
    encode(&true)
}

/// `s3.abandon` ([`Abandon`]): move a pending record to the garbage list
/// (its writer is taken for dead). Output: postcard `bool`, whether the
/// record was there.
pub fn abandon(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let a: Abandon = decode(input)?;
    let k = omap_key(PENDING, a.tag.as_bytes());
    let Some(v) = cx.omap_get(std::slice::from_ref(&k))?.remove(&k) else {
        return encode(&false);
    };
    let mut g: Garbage = serde_json::from_slice(&v).map_err(|e| bad("pending record", e))?;
    g.ms = a.now_ms;
    let value = serde_json::to_vec(&g).map_err(|e| bad("garbage record", e))?;
    cx.omap_set(vec![(garbage_key(a.now_ms, &a.tag), value)])?;
    cx.omap_rm(vec![k])?;
    encode(&true)
}

/// `s3.seal`: mark the shard sealed (its bucket is being deleted), if it
/// holds no object; refused with [`S3_NOT_EMPTY`] otherwise. Output:
/// empty.
pub fn seal(cx: &mut Ctx<'_>, _input: &[u8]) -> ClsResult {
    let first = cx.omap_range(&[ENTRY], Some(&[ENTRY + 1]), 1)?;
    if let Some((k, _)) = first.first() {
        let key = String::from_utf8_lossy(&k[1..]).into_owned();
        return Err(refused(S3_NOT_EMPTY, format!("the bucket holds '{key}'")));
    }
    cx.omap_set(vec![(SEALED.to_vec(), Vec::new())])?;
    Ok(Vec::new())
}

/// `s3.unseal`: take a seal away (a bucket's deletion found another shard
/// not empty). Output: empty.
pub fn unseal(cx: &mut Ctx<'_>, _input: &[u8]) -> ClsResult {
    if cx.omap_get(&[SEALED.to_vec()])?.contains_key(SEALED) {
        cx.omap_rm(vec![SEALED.to_vec()])?;
    }
    Ok(Vec::new())
}
