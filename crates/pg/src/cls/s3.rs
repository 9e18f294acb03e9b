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
    garbage_key, lock_refusal, omap_key, part_key, part_prefix, upload_key, Abandon, Abort, Begin,
    Commit, Complete, Condition, Garbage, IndexEntry, Layout, Part, PutPart, Remove, Tails, ENTRY,
    INLINE, PARTS_MAX, PENDING, S3_BUCKET_GONE, S3_INVALID_PART, S3_LOCKED, S3_NOT_EMPTY,
    S3_NO_SUCH_KEY, S3_NO_SUCH_UPLOAD, S3_PENDING_GONE, S3_PRECONDITION, SEALED, VERSION,
};

pub(super) fn bad(what: &str, e: serde_json::Error) -> ClsError {
    ClsError::Op(OpError::Invalid(format!("s3 {what}: {e}")))
}

/// The entry of `key` before the op, if any.
pub(super) fn entry_of(cx: &mut Ctx<'_>, key: &str) -> Result<Option<IndexEntry>, ClsError> {
    let k = omap_key(ENTRY, key.as_bytes());
    match cx.omap_get(std::slice::from_ref(&k))?.remove(&k) {
        Some(v) => serde_json::from_slice(&v)
            .map(Some)
            .map_err(|e| bad("entry", e)),
        None => Ok(None),
    }
}

/// Refused unless `cond` holds for `old`.
pub(super) fn check(cond: &Condition, old: Option<&IndexEntry>) -> Result<(), ClsError> {
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

/// Refused with [`S3_LOCKED`] if `old` is a version its object lock keeps
/// (an unversioned write never replaces one: a bucket with a lock keeps
/// versions, but a gateway with a stale record of it may not know).
fn not_locked(old: Option<&IndexEntry>, now_ms: u64) -> Result<(), ClsError> {
    match old.and_then(|o| lock_refusal(o, now_ms, false)) {
        Some(why) => Err(refused(S3_LOCKED, why.to_string())),
        None => Ok(()),
    }
}

/// An omap entry: key and value.
pub(super) type Entry = (Vec<u8>, Vec<u8>);

/// The garbage record for the tails `old` names, if it names any.
pub(super) fn garbage_of(key: &str, old: &IndexEntry, ms: u64) -> Result<Option<Entry>, ClsError> {
    garbage_record(key, old.tails(), ms, &old_tag(old))
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
    unsealed(cx)?;
    let entry: IndexEntry = serde_json::from_slice(&c.entry).map_err(|e| bad("new entry", e))?;
    if matches!(entry.layout, Layout::Inline) != c.inline.is_some() {
        return Err(ClsError::Op(OpError::Invalid(
            "s3.commit: inline data goes with an inline entry only".into(),
        )));
    }
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
    not_locked(old.as_ref(), c.now_ms)?;
    let inline_key = omap_key(INLINE, c.key.as_bytes());
    let mut set = vec![(omap_key(ENTRY, c.key.as_bytes()), c.entry)];
    match c.inline {
        Some(data) => set.push((inline_key, data)),
        None if old.as_ref().is_some_and(|o| o.tails().is_empty()) => rm.push(inline_key),
        None => {}
    }
    if let Some(o) = &old {
        set.extend(garbage_of(&c.key, o, c.now_ms)?);
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
    not_locked(old.as_ref(), r.now_ms)?;
    let Some(o) = old else {
        return encode(&false);
    };
    if let Some(g) = garbage_of(&r.key, &o, r.now_ms)? {
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
/// holds no object and no older version or delete marker; refused with [`S3_NOT_EMPTY`] otherwise. Input: the
/// deletion's token, which the seal keeps: a later deletion's seal
/// replaces an earlier one's, so a deletion that gives up can never
/// unseal a shard another deletion counts on. Output: empty.
pub fn seal(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    for held in [ENTRY, VERSION] {
        let first = cx.omap_range(&[held], Some(&[held + 1]), 1)?;
        if let Some((k, _)) = first.first() {
            let key = String::from_utf8_lossy(&k[1..]).into_owned();
            return Err(refused(S3_NOT_EMPTY, format!("the bucket holds '{key}'")));
        }
    }
    cx.omap_set(vec![(SEALED.to_vec(), input.to_vec())])?;
    Ok(Vec::new())
}

/// `s3.unseal`: take a seal away (its deletion found another shard not
/// empty, or failed), if it is still the seal of the token given as
/// input. Output: empty.
pub fn unseal(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let held = cx.omap_get(&[SEALED.to_vec()])?.remove(SEALED);
    if held.as_deref() == Some(input) {
        cx.omap_rm(vec![SEALED.to_vec()])?;
    }
    Ok(Vec::new())
}

/// Refused unless the shard is unsealed.
pub(super) fn unsealed(cx: &mut Ctx<'_>) -> Result<(), ClsError> {
    match cx.omap_get(&[SEALED.to_vec()])?.contains_key(SEALED) {
        true => Err(refused(S3_BUCKET_GONE, "the bucket was deleted".into())),
        false => Ok(()),
    }
}

/// Refused unless upload `id` of `key` exists; its record's key.
pub(super) fn upload_exists(cx: &mut Ctx<'_>, key: &str, id: &str) -> Result<Vec<u8>, ClsError> {
    let k = upload_key(key, id);
    match cx.omap_get(std::slice::from_ref(&k))?.contains_key(&k) {
        true => Ok(k),
        false => Err(refused(
            S3_NO_SUCH_UPLOAD,
            format!("no upload {id} of '{key}'"),
        )),
    }
}

/// Every part record of upload `id`, by number.
type PartRecords = std::collections::BTreeMap<u32, (Vec<u8>, Part)>;

fn parts_of(cx: &mut Ctx<'_>, id: &str) -> Result<PartRecords, ClsError> {
    let start = part_prefix(id);
    let mut end = start.clone();
    if let Some(last) = end.last_mut() {
        *last = 1;
    }
    let mut out = PartRecords::new();
    for (k, v) in cx.omap_range(&start, Some(&end), PARTS_MAX as usize + 1)? {
        let n = std::str::from_utf8(&k[start.len()..])
            .ok()
            .and_then(|s| s.parse::<u32>().ok())
            .ok_or_else(|| ClsError::Op(OpError::Invalid("a part key without a number".into())))?;
        let p: Part = serde_json::from_slice(&v).map_err(|e| bad("part record", e))?;
        out.insert(n, (k, p));
    }
    Ok(out)
}

/// A garbage record for `tails`, if there are any.
pub(super) fn garbage_record(
    key: &str,
    tails: Vec<Tails>,
    ms: u64,
    tag: &str,
) -> Result<Option<Entry>, ClsError> {
    if tails.is_empty() {
        return Ok(None);
    }
    let g = Garbage {
        tails,
        ms,
        key: key.to_string(),
    };
    let value = serde_json::to_vec(&g).map_err(|e| bad("garbage record", e))?;
    Ok(Some((garbage_key(ms, tag), value)))
}

/// `s3.part` ([`PutPart`]): keep an uploaded part. Refused with
/// [`S3_NO_SUCH_UPLOAD`] if the upload is gone, [`S3_PENDING_GONE`] if
/// the part's pending record is. Output: empty.
pub fn put_part(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let p: PutPart = decode(input)?;
    let _: Part = serde_json::from_slice(&p.part).map_err(|e| bad("part", e))?;
    unsealed(cx)?;
    upload_exists(cx, &p.key, &p.upload_id)?;
    let pk = omap_key(PENDING, p.pending.as_bytes());
    if !cx.omap_get(std::slice::from_ref(&pk))?.contains_key(&pk) {
        return Err(refused(
            S3_PENDING_GONE,
            format!(
                "part upload {} was collected before it committed",
                p.pending
            ),
        ));
    }
    let k = part_key(&p.upload_id, p.number);
    let mut set = Vec::new();
    if let Some(old) = cx.omap_get(std::slice::from_ref(&k))?.remove(&k) {
        let old: Part = serde_json::from_slice(&old).map_err(|e| bad("part record", e))?;
        let tag = old.tails.prefix.replace('.', "-");
        set.extend(garbage_record(&p.key, vec![old.tails], p.now_ms, &tag)?);
    }
    set.push((k, p.part));
    cx.omap_set(set)?;
    cx.omap_rm(vec![pk])?;
    Ok(Vec::new())
}

/// `s3.complete` ([`Complete`]): make an upload its object. Refused with
/// [`S3_NO_SUCH_UPLOAD`], [`S3_INVALID_PART`] (a segment is not the
/// named part's record), or as `s3.commit` is. Output: empty.
pub fn complete(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let c: Complete = decode(input)?;
    let entry: IndexEntry = serde_json::from_slice(&c.entry).map_err(|e| bad("new entry", e))?;
    unsealed(cx)?;
    let (mut rm, unused) = take_upload(cx, &c, &entry)?;
    let old = entry_of(cx, &c.key)?;
    check(&c.condition, old.as_ref())?;
    not_locked(old.as_ref(), c.now_ms)?;
    let mut set = vec![(omap_key(ENTRY, c.key.as_bytes()), c.entry)];
    if let Some(o) = &old {
        set.extend(garbage_of(&c.key, o, c.now_ms)?);
        if o.tails().is_empty() {
            rm.push(omap_key(INLINE, c.key.as_bytes()));
        }
    }
    set.extend(unused);
    cx.omap_set(set)?;
    cx.omap_rm(rm)?;
    Ok(Vec::new())
}

/// Check the segments of a completed upload's `entry` against its parts'
/// records: the keys to remove (the upload's and its parts' records) and
/// the garbage record of the parts it leaves out.
pub(super) fn take_upload(
    cx: &mut Ctx<'_>,
    c: &Complete,
    entry: &IndexEntry,
) -> Result<(Vec<Vec<u8>>, Option<Entry>), ClsError> {
    let uk = upload_exists(cx, &c.key, &c.upload_id)?;
    let mut parts = parts_of(cx, &c.upload_id)?;
    let Layout::Striped { segments, .. } = &entry.layout else {
        return Err(refused(
            S3_INVALID_PART,
            "a multipart entry is striped".into(),
        ));
    };
    if segments.len() != c.parts.len() {
        return Err(refused(S3_INVALID_PART, "one segment per part".into()));
    }
    let mut rm = vec![uk];
    for (n, seg) in c.parts.iter().zip(segments) {
        match parts.remove(n) {
            Some((k, p)) if p.tails == seg.tails && p.size == seg.size => rm.push(k),
            _ => {
                return Err(refused(
                    S3_INVALID_PART,
                    format!("part {n} is not the one uploaded"),
                ))
            }
        }
    }
    let unused: Vec<Tails> = parts.values().map(|(_, p)| p.tails.clone()).collect();
    rm.extend(parts.into_values().map(|(k, _)| k));
    let tag = format!("{}-unused", c.upload_id);
    Ok((rm, garbage_record(&c.key, unused, c.now_ms, &tag)?))
}

/// `s3.abort` ([`Abort`]): drop an upload, its parts' data to the
/// garbage list. Refused with [`S3_NO_SUCH_UPLOAD`]. Output: empty.
pub fn abort(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let a: Abort = decode(input)?;
    let uk = upload_exists(cx, &a.key, &a.upload_id)?;
    let parts = parts_of(cx, &a.upload_id)?;
    let tails: Vec<Tails> = parts.values().map(|(_, p)| p.tails.clone()).collect();
    let mut rm = vec![uk];
    rm.extend(parts.into_values().map(|(k, _)| k));
    if let Some(g) = garbage_record(&a.key, tails, a.now_ms, &a.upload_id)? {
        cx.omap_set(vec![g])?;
    }
    cx.omap_rm(rm)?;
    Ok(Vec::new())
}

/// `s3.begin` ([`Begin`]): keep an upload's pending record, unless the
/// shard is sealed. Output: empty.
pub fn begin(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let b: Begin = decode(input)?;
    let _: Garbage = serde_json::from_slice(&b.record).map_err(|e| bad("pending record", e))?;
    unsealed(cx)?;
    cx.omap_set(vec![(omap_key(PENDING, b.tag.as_bytes()), b.record)])?;
    Ok(Vec::new())
}
