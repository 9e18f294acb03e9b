//! The `s3` object class's methods for buckets that keep versions (S3's
//! versioning): a new current version, a completed upload made one, and
//! a delete that puts a marker or removes one version. Each keeps the
//! shard's records as `loligo_types::s3` describes: the current version
//! under `ENTRY`, older versions and delete markers under `VERSION`,
//! newest first, and every tail named by exactly one record (an entry, a
//! version or a garbage record).
//!
//! It must never drop a version's tails without a garbage record, nor
//! number a new version below one the key already has.

use super::s3::{bad, check, entry_of, garbage_of, take_upload, unsealed, Entry};
use super::{decode, encode, refused, ClsError, ClsResult, Ctx};
use loligo_types::ops::OpError;
use loligo_types::s3::{
    lock_refusal, omap_key, version_data_key, version_id, version_key, version_prefix, vseq_of_id,
    IndexEntry, Layout, Removed, VersionedCommit, VersionedComplete, VersionedRemove, ENTRY,
    INLINE, PENDING, S3_LOCKED, S3_NO_SUCH_VERSION, S3_PENDING_GONE,
};

/// The most older versions of one key a method reads (a `null` version
/// older than these is not found by suspended versioning's overwrite).
const HISTORY_MAX: usize = 10_000;

/// Changes to a shard, removals applied before sets (so a key removed
/// and set again, such as a retired entry's, ends set).
#[derive(Default)]
struct Batch {
    set: Vec<Entry>,
    rm: Vec<Vec<u8>>,
}

impl Batch {
    fn apply(self, cx: &mut Ctx<'_>) -> Result<(), ClsError> {
        if !self.rm.is_empty() {
            cx.omap_rm(self.rm)?;
        }
        if !self.set.is_empty() {
            cx.omap_set(self.set)?;
        }
        Ok(())
    }
}

fn json(e: &IndexEntry) -> Result<Vec<u8>, ClsError> {
    serde_json::to_vec(e).map_err(|e| bad("entry", e))
}

/// Whether `e`'s data is kept in the index (no tails).
fn inline(e: &IndexEntry) -> bool {
    matches!(e.layout, Layout::Inline)
}

/// The newest `limit` of `key`'s older versions and delete markers,
/// newest first, with their omap keys.
fn history(
    cx: &mut Ctx<'_>,
    key: &str,
    limit: usize,
) -> Result<Vec<(Vec<u8>, IndexEntry)>, ClsError> {
    let start = version_prefix(key);
    let mut end = start.clone();
    if let Some(last) = end.last_mut() {
        *last = 1;
    }
    let mut out = Vec::new();
    for (k, v) in cx.omap_range(&start, Some(&end), limit)? {
        let e: IndexEntry = serde_json::from_slice(&v).map_err(|e| bad("older version", e))?;
        out.push((k, e));
    }
    Ok(out)
}

/// The number of `key`'s next version: above the current's and every
/// older one's.
fn next_vseq(current: Option<&IndexEntry>, history: &[(Vec<u8>, IndexEntry)]) -> u64 {
    let newest = history.first().map_or(0, |(_, e)| e.vseq);
    current.map_or(0, |e| e.vseq).max(newest) + 1
}

/// Take the current entry `old` of `key` away: kept as an older version,
/// or (`keep` false) its tails to the garbage list.
fn retire(
    cx: &mut Ctx<'_>,
    key: &str,
    old: &IndexEntry,
    keep: bool,
    ms: u64,
    b: &mut Batch,
) -> Result<(), ClsError> {
    let dk = omap_key(INLINE, key.as_bytes());
    b.rm.push(omap_key(ENTRY, key.as_bytes()));
    if keep {
        b.set.push((version_key(key, old.vseq), json(old)?));
        if inline(old) {
            let data = cx.omap_get(std::slice::from_ref(&dk))?.remove(&dk);
            b.set
                .push((version_data_key(key, old.vseq), data.unwrap_or_default()));
        }
    } else {
        b.set.extend(garbage_of(key, old, ms)?);
    }
    if inline(old) {
        b.rm.push(dk);
    }
    Ok(())
}

/// Remove the older version `e` (at omap key `k`) of `key` for good.
fn drop_version(
    key: &str,
    k: &[u8],
    e: &IndexEntry,
    ms: u64,
    b: &mut Batch,
) -> Result<(), ClsError> {
    b.rm.push(k.to_vec());
    if inline(e) {
        b.rm.push(version_data_key(key, e.vseq));
    }
    b.set.extend(garbage_of(key, e, ms)?);
    Ok(())
}

/// Drop `key`'s older `null` versions (a bucket with versioning suspended
/// keeps one `null` version, the newest written); refused if one is
/// locked.
fn drop_null_history(
    key: &str,
    history: &[(Vec<u8>, IndexEntry)],
    ms: u64,
    b: &mut Batch,
) -> Result<(), ClsError> {
    for (k, e) in history.iter().filter(|(_, e)| e.version_id.is_none()) {
        unlocked(e, ms, false)?;
        drop_version(key, k, e, ms, b)?;
    }
    Ok(())
}

/// Refused with [`S3_LOCKED`] if `e` may not be removed at `ms`.
fn unlocked(e: &IndexEntry, ms: u64, bypass: bool) -> Result<(), ClsError> {
    match lock_refusal(e, ms, bypass) {
        Some(why) => Err(refused(S3_LOCKED, why.to_string())),
        None => Ok(()),
    }
}

/// Refused unless `key` is one an index holds (no NUL: version keys use
/// it to end the S3 key).
fn valid_key(key: &str) -> Result<(), ClsError> {
    match key.is_empty() || key.contains('\0') {
        true => Err(ClsError::Op(OpError::Invalid(format!(
            "s3: '{}' is not an object key",
            key.escape_debug()
        )))),
        false => Ok(()),
    }
}

/// With no current version left: the newest older version (but `skip`)
/// becomes current, unless it is a delete marker.
fn promote(
    cx: &mut Ctx<'_>,
    key: &str,
    history: &[(Vec<u8>, IndexEntry)],
    skip: Option<&[u8]>,
    b: &mut Batch,
) -> Result<(), ClsError> {
    let Some((k, e)) = history.iter().find(|(k, _)| Some(k.as_slice()) != skip) else {
        return Ok(());
    };
    if e.delete_marker {
        return Ok(());
    }
    b.rm.push(k.clone());
    if inline(e) {
        let vk = version_data_key(key, e.vseq);
        let data = cx.omap_get(std::slice::from_ref(&vk))?.remove(&vk);
        b.rm.push(vk);
        b.set
            .push((omap_key(INLINE, key.as_bytes()), data.unwrap_or_default()));
    }
    b.set.push((omap_key(ENTRY, key.as_bytes()), json(e)?));
    Ok(())
}

/// Make `entry` the newest version of `key`: numbered above every
/// version, given an id from `tag` (the `null` version without), the
/// current entry `old` retired (dropped when both are `null`, as are
/// older `null` versions then). Returns the version's id.
fn place(
    cx: &mut Ctx<'_>,
    key: &str,
    entry: &mut IndexEntry,
    old: Option<&IndexEntry>,
    tag: Option<&str>,
    ms: u64,
    b: &mut Batch,
) -> Result<(), ClsError> {
    // Only a suspended write reads every older version (for the null one).
    let limit = if tag.is_none() { HISTORY_MAX } else { 1 };
    let history = history(cx, key, limit)?;
    let newest = history.first().map_or(0, |(_, e)| e.vseq);
    let mut old = old.cloned();
    if let Some(o) = old
        .as_mut()
        .filter(|o| o.version_id.is_none() && o.vseq <= newest)
    {
        // A null current version set without its place among the older
        // ones (by a gateway that took the bucket for unversioned) is
        // numbered above them before it joins them.
        o.vseq = newest + 1;
    }
    let vseq = next_vseq(old.as_ref(), &history);
    debug_assert!(history.iter().all(|(_, e)| e.vseq < vseq));
    entry.vseq = vseq;
    entry.version_id = tag.map(|t| version_id(vseq, t));
    if let Some(o) = &old {
        let keep = tag.is_some() || o.version_id.is_some();
        if !keep {
            unlocked(o, ms, false)?;
        }
        retire(cx, key, o, keep, ms, b)?;
    }
    if tag.is_none() {
        drop_null_history(key, &history, ms, b)?;
    }
    Ok(())
}

/// The older version of `key` with id `want` (`None`: the null one)
/// and number `vseq` (known for an id of ours), with its omap key.
fn older_version(
    cx: &mut Ctx<'_>,
    key: &str,
    want: Option<&str>,
    vseq: Option<u64>,
) -> Result<Option<(Vec<u8>, IndexEntry)>, ClsError> {
    let Some(vseq) = vseq else {
        let all = history(cx, key, HISTORY_MAX)?;
        return Ok(all.into_iter().find(|(_, e)| e.version_id.is_none()));
    };
    let k = version_key(key, vseq);
    let Some(v) = cx.omap_get(std::slice::from_ref(&k))?.remove(&k) else {
        return Ok(None);
    };
    let e: IndexEntry = serde_json::from_slice(&v).map_err(|e| bad("older version", e))?;
    Ok((e.version_id.as_deref() == want).then_some((k, e)))
}

/// `s3.vcommit` ([`VersionedCommit`]): set a new current version.
/// Refused as `s3.commit` is. Output: postcard `Option<String>`, the
/// version's id.
pub fn vcommit(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let v: VersionedCommit = decode(input)?;
    let c = v.commit;
    valid_key(&c.key)?;
    unsealed(cx)?;
    let mut entry: IndexEntry =
        serde_json::from_slice(&c.entry).map_err(|e| bad("new entry", e))?;
    if inline(&entry) != c.inline.is_some() {
        return Err(ClsError::Op(OpError::Invalid(
            "s3.vcommit: inline data goes with an inline entry only".into(),
        )));
    }
    let mut b = Batch::default();
    if let Some(tag) = &c.pending {
        let k = omap_key(PENDING, tag.as_bytes());
        if !cx.omap_get(std::slice::from_ref(&k))?.contains_key(&k) {
            return Err(refused(
                S3_PENDING_GONE,
                format!("upload {tag} was collected before it committed"),
            ));
        }
        b.rm.push(k);
    }
    let old = entry_of(cx, &c.key)?;
    check(&c.condition, old.as_ref())?;
    place(
        cx,
        &c.key,
        &mut entry,
        old.as_ref(),
        v.tag.as_deref(),
        c.now_ms,
        &mut b,
    )?;
    b.set
        .push((omap_key(ENTRY, c.key.as_bytes()), json(&entry)?));
    if let Some(data) = c.inline {
        b.set.push((omap_key(INLINE, c.key.as_bytes()), data));
    }
    b.apply(cx)?;
    encode(&entry.version_id)
}

/// `s3.vcomplete` ([`VersionedComplete`]): make an upload the new current
/// version. Refused as `s3.complete` is. Output: as `s3.vcommit`'s.
pub fn vcomplete(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let v: VersionedComplete = decode(input)?;
    let c = v.complete;
    valid_key(&c.key)?;
    let mut entry: IndexEntry =
        serde_json::from_slice(&c.entry).map_err(|e| bad("new entry", e))?;
    unsealed(cx)?;
    let (rm, unused) = take_upload(cx, &c, &entry)?;
    let old = entry_of(cx, &c.key)?;
    check(&c.condition, old.as_ref())?;
    let mut b = Batch {
        set: unused.into_iter().collect(),
        rm,
    };
    place(
        cx,
        &c.key,
        &mut entry,
        old.as_ref(),
        v.tag.as_deref(),
        c.now_ms,
        &mut b,
    )?;
    b.set
        .push((omap_key(ENTRY, c.key.as_bytes()), json(&entry)?));
    b.apply(cx)?;
    encode(&entry.version_id)
}

/// `s3.vremove` ([`VersionedRemove`]): put a delete marker, or remove one
/// version. Refused with [`S3_NO_SUCH_VERSION`] for a version id that is
/// not one of ours, with [`S3_LOCKED`] for a version its object lock
/// keeps. Output: postcard [`Removed`].
pub fn vremove(cx: &mut Ctx<'_>, input: &[u8]) -> ClsResult {
    let r: VersionedRemove = decode(input)?;
    valid_key(&r.key)?;
    let old = entry_of(cx, &r.key)?;
    let mut b = Batch::default();
    let out = match r.version_id.as_deref() {
        None => {
            unsealed(cx)?;
            let mut m: IndexEntry =
                serde_json::from_slice(&r.marker).map_err(|e| bad("delete marker", e))?;
            m.delete_marker = true;
            m.layout = Layout::Inline;
            m.size = 0;
            m.etag.clear();
            place(
                cx,
                &r.key,
                &mut m,
                old.as_ref(),
                r.tag.as_deref(),
                r.now_ms,
                &mut b,
            )?;
            b.set.push((version_key(&r.key, m.vseq), json(&m)?));
            Removed {
                version_id: m.version_id,
                delete_marker: true,
                done: true,
            }
        }
        Some(id) => {
            let want = (id != "null").then_some(id);
            let vseq = match want {
                Some(w) => match vseq_of_id(w) {
                    Some(v) => Some(v),
                    None => return Err(refused(S3_NO_SUCH_VERSION, format!("no version {id}"))),
                },
                None => None,
            };
            // The newest two older versions: enough to find what becomes
            // current when the newest goes.
            let newest = history(cx, &r.key, 2)?;
            match old {
                Some(o) if o.version_id.as_deref() == want => {
                    unlocked(&o, r.now_ms, r.bypass_governance)?;
                    retire(cx, &r.key, &o, false, r.now_ms, &mut b)?;
                    promote(cx, &r.key, &newest, None, &mut b)?;
                    Removed {
                        version_id: o.version_id,
                        delete_marker: false,
                        done: true,
                    }
                }
                old => match older_version(cx, &r.key, want, vseq)? {
                    Some((k, e)) => {
                        unlocked(&e, r.now_ms, r.bypass_governance)?;
                        drop_version(&r.key, &k, &e, r.now_ms, &mut b)?;
                        if old.is_none() {
                            promote(cx, &r.key, &newest, Some(&k), &mut b)?;
                        }
                        Removed {
                            version_id: e.version_id.clone(),
                            delete_marker: e.delete_marker,
                            done: true,
                        }
                    }
                    None => Removed::default(),
                },
            }
        }
    };
    b.apply(cx)?;
    encode(&out)
}

#[cfg(test)]
mod tests {
    use crate::cls::tests::{exec, omap, refusal, run, store};
    use loligo_store::MemStore;
    use loligo_types::s3::{
        Commit, Condition, Garbage, IndexEntry, Layout, Removed, Segment, Tails, VersionedCommit,
        VersionedRemove, ENTRY, GARBAGE, INLINE, S3_NO_SUCH_VERSION, VERSION, VERSION_DATA,
    };

    /// A version of key `k` as the model keeps it: its id (`None`: null),
    /// whether it is a delete marker, and its etag (which is also its
    /// tails' prefix or its inline data).
    #[derive(Clone, Debug, PartialEq)]
    struct V {
        id: Option<String>,
        marker: bool,
        etag: String,
    }

    fn entry(etag: &str, striped: bool) -> IndexEntry {
        let layout = match striped {
            false => Layout::Inline,
            true => Layout::Striped {
                stripe: 4,
                segments: vec![Segment {
                    size: 8,
                    tails: Tails {
                        prefix: etag.into(),
                        count: 2,
                    },
                    checksums: Default::default(),
                }],
            },
        };
        IndexEntry {
            size: if striped { 8 } else { etag.len() as u64 },
            etag: etag.into(),
            mtime_ms: 1,
            owner: "u".into(),
            layout,
            content_type: None,
            meta: Default::default(),
            headers: Default::default(),
            checksums: Default::default(),
            acl: None,
            grants: None,
            parts: 0,
            tags: Default::default(),
            version_id: None,
            vseq: 0,
            delete_marker: false,
            checksum_type: None,
            retention: None,
            legal_hold: false,
        }
    }

    fn put(s: &MemStore, etag: &str, striped: bool, tag: Option<&str>) -> Option<String> {
        let c = Commit {
            key: "k".into(),
            entry: serde_json::to_vec(&entry(etag, striped)).unwrap(),
            inline: (!striped).then(|| etag.as_bytes().to_vec()),
            pending: None,
            condition: Condition::default(),
            now_ms: 5,
        };
        let v = VersionedCommit {
            commit: c,
            tag: tag.map(str::to_string),
        };
        let out = run(
            s,
            "shard",
            &[exec("s3", "vcommit", postcard::to_stdvec(&v).unwrap())],
        );
        postcard::from_bytes(&out.unwrap()[0]).unwrap()
    }

    fn remove(
        s: &MemStore,
        version: Option<&str>,
        tag: Option<&str>,
        etag: &str,
    ) -> Result<Removed, u32> {
        let r = VersionedRemove {
            key: "k".into(),
            version_id: version.map(str::to_string),
            marker: serde_json::to_vec(&entry(etag, false)).unwrap(),
            tag: tag.map(str::to_string),
            now_ms: 5,
            bypass_governance: false,
        };
        let op = exec("s3", "vremove", postcard::to_stdvec(&r).unwrap());
        match run(s, "shard", &[op]) {
            Ok(out) => Ok(postcard::from_bytes(&out[0]).unwrap()),
            e => Err(refusal(e)),
        }
    }

    fn parse(v: &[u8]) -> IndexEntry {
        serde_json::from_slice(v).unwrap()
    }

    /// The shard as the model sees it: versions newest first, the
    /// current one first if there is one; and every striped version's
    /// tails named once (by a version or a garbage record).
    fn check(s: &MemStore, model: &[V], garbage: &mut Vec<String>, striped: &[String]) {
        let all = omap(s, "shard");
        let of = |p: u8| all.iter().filter(move |(k, _)| k[0] == p);
        let mut got = Vec::new();
        for (_, v) in of(ENTRY).chain(of(VERSION)) {
            let e = parse(v);
            got.push(V {
                id: e.version_id.clone(),
                marker: e.delete_marker,
                etag: e.etag.clone(),
            });
        }
        assert_eq!(got, model, "versions newest first");
        let current = of(ENTRY).next().map(|(_, v)| parse(v));
        assert_eq!(
            current.is_some(),
            model.first().is_some_and(|v| !v.marker),
            "the object is visible exactly when its newest version is not a marker"
        );
        // Inline data goes with its version.
        if let Some(c) = current.filter(|c| matches!(c.layout, Layout::Inline)) {
            let d = of(INLINE).next().map(|(_, v)| v.clone());
            assert_eq!(d.as_deref(), Some(c.etag.as_bytes()));
        }
        assert!(of(INLINE).count() <= 1);
        for (k, v) in of(VERSION) {
            let e = parse(v);
            let mut dk = k.clone();
            dk[0] = VERSION_DATA;
            let d = all.iter().find(|(k2, _)| *k2 == dk).map(|(_, d)| d.clone());
            match (&e.layout, e.delete_marker) {
                (Layout::Inline, false) => assert_eq!(d.as_deref(), Some(e.etag.as_bytes())),
                _ => assert_eq!(d, None, "no data beside a marker or striped version"),
            }
        }
        // Every striped version ever written is named exactly once.
        garbage.clear();
        for (_, v) in of(GARBAGE) {
            let g: Garbage = serde_json::from_slice(v).unwrap();
            garbage.extend(g.tails.into_iter().map(|t| t.prefix));
        }
        for t in striped {
            let live = model.iter().filter(|v| &v.etag == t).count();
            let dead = garbage.iter().filter(|g| *g == t).count();
            assert_eq!(live + dead, 1, "tails {t}: {live} live, {dead} in garbage");
        }
    }

    /// Random puts and deletes, with versioning enabled and suspended,
    /// and removals of single versions, against a model of S3's rules:
    /// the shard holds the model's versions in order, the current one
    /// visible only when the newest is not a delete marker, and no
    /// version's data is ever lost or left unaccounted for.
    #[test]
    fn versions_follow_s3s_rules_and_keep_every_tail() {
        let mut rng: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        for round in 0..20 {
            let s = store();
            let mut model: Vec<V> = Vec::new();
            let (mut striped, mut garbage) = (Vec::new(), Vec::new());
            for step in 0..40 {
                let etag = format!("e{round}x{step}");
                let enabled = next(3) != 0;
                match next(6) {
                    0..=2 => {
                        let is_striped = next(2) == 0;
                        let tag = enabled.then(|| format!("t{step}"));
                        let id = put(&s, &etag, is_striped, tag.as_deref());
                        assert_eq!(id.is_some(), enabled);
                        if !enabled {
                            model.retain(|v| v.id.is_some());
                        }
                        if is_striped {
                            striped.push(etag.clone());
                        }
                        model.insert(
                            0,
                            V {
                                id,
                                marker: false,
                                etag,
                            },
                        );
                    }
                    3 => {
                        let tag = enabled.then(|| format!("t{step}"));
                        let r = remove(&s, None, tag.as_deref(), &etag).unwrap();
                        assert!(r.delete_marker && r.done);
                        if !enabled {
                            model.retain(|v| v.id.is_some());
                        }
                        model.insert(
                            0,
                            V {
                                id: r.version_id,
                                marker: true,
                                etag: String::new(),
                            },
                        );
                    }
                    _ => {
                        // An existing version, the null one, or one that
                        // never was.
                        let pick = (!model.is_empty()).then(|| next(model.len() as u64) as usize);
                        let id = match (pick, next(4)) {
                            (_, 0) => "null".to_string(),
                            (Some(i), 1..=2) => model[i].id.clone().unwrap_or("null".into()),
                            _ => "0000000000000001never".to_string(),
                        };
                        let r = remove(&s, Some(&id), None, "").unwrap();
                        let want = (id != "null").then_some(id.as_str());
                        let at = model.iter().position(|v| v.id.as_deref() == want);
                        assert_eq!(r.done, at.is_some(), "removing {id}");
                        if let Some(i) = at {
                            assert_eq!(r.delete_marker, model[i].marker);
                            model.remove(i);
                        }
                    }
                }
                check(&s, &model, &mut garbage, &striped);
            }
        }
    }

    /// A version under a legal hold, or retained until after now, is not
    /// removed; governance retention yields to a bypass, compliance and
    /// a legal hold to nothing; a delete marker over it is always put.
    #[test]
    fn locked_versions_stay() {
        use loligo_types::s3::{LockMode, Retention, S3_LOCKED};
        let s = store();
        let locked = |retention: Option<(LockMode, u64)>, hold: bool| {
            let mut e = entry("x", false);
            e.retention = retention.map(|(mode, until_ms)| Retention { mode, until_ms });
            e.legal_hold = hold;
            let v = VersionedCommit {
                commit: Commit {
                    key: "k".into(),
                    entry: serde_json::to_vec(&e).unwrap(),
                    inline: Some(b"x".to_vec()),
                    pending: None,
                    condition: Condition::default(),
                    now_ms: 5,
                },
                tag: Some("t".into()),
            };
            let out = run(
                &s,
                "shard",
                &[exec("s3", "vcommit", postcard::to_stdvec(&v).unwrap())],
            );
            postcard::from_bytes::<Option<String>>(&out.unwrap()[0])
                .unwrap()
                .unwrap()
        };
        let rm = |id: &str, bypass: bool| {
            let r = VersionedRemove {
                key: "k".into(),
                version_id: Some(id.into()),
                marker: serde_json::to_vec(&entry("", false)).unwrap(),
                tag: None,
                now_ms: 5,
                bypass_governance: bypass,
            };
            let op = exec("s3", "vremove", postcard::to_stdvec(&r).unwrap());
            run(&s, "shard", &[op])
                .map(|_| ())
                .map_err(|e| refusal(Err(e)))
        };
        let gov = locked(Some((LockMode::Governance, 10)), false);
        let comp = locked(Some((LockMode::Compliance, 10)), false);
        let held = locked(None, true);
        let past = locked(Some((LockMode::Compliance, 4)), false);
        assert_eq!(rm(&gov, false), Err(S3_LOCKED));
        assert_eq!(rm(&comp, true), Err(S3_LOCKED));
        assert_eq!(rm(&held, true), Err(S3_LOCKED));
        assert!(remove(&s, None, Some("m"), "").unwrap().delete_marker);
        assert_eq!(rm(&past, false), Ok(()), "a retention that ended");
        assert_eq!(rm(&gov, true), Ok(()));
        let left: Vec<_> = omap(&s, "shard")
            .into_iter()
            .filter(|(k, _)| k[0] == VERSION)
            .map(|(_, v)| parse(&v).version_id)
            .collect();
        assert_eq!(
            left.len(),
            3,
            "the marker, the compliance and the held versions"
        );
        assert!(left.contains(&Some(comp)) && left.contains(&Some(held)));
    }

    /// A gateway that still takes the bucket for unversioned sets a null
    /// current version numbered 0; the next versioned write numbers it
    /// above the older versions rather than over the oldest of them.
    #[test]
    fn a_stale_unversioned_write_joins_the_versions_without_replacing_one() {
        let s = store();
        let v1 = put(&s, "one", false, Some("t1")).unwrap();
        assert!(remove(&s, None, Some("m"), "").unwrap().delete_marker);
        let c = Commit {
            key: "k".into(),
            entry: serde_json::to_vec(&entry("stale", false)).unwrap(),
            inline: Some(b"stale".to_vec()),
            pending: None,
            condition: Condition::default(),
            now_ms: 5,
        };
        run(
            &s,
            "shard",
            &[exec("s3", "commit", postcard::to_stdvec(&c).unwrap())],
        )
        .unwrap();
        put(&s, "two", false, Some("t2")).unwrap();
        let all = omap(&s, "shard");
        let versions: Vec<IndexEntry> = (all.iter())
            .filter(|(k, _)| k[0] == VERSION)
            .map(|(_, v)| parse(v))
            .collect();
        let etags: Vec<&str> = versions.iter().map(|e| e.etag.as_str()).collect();
        assert_eq!(etags, ["stale", "", "one"], "newest first, none lost");
        assert_eq!(versions[2].version_id.as_deref(), Some(v1.as_str()));
        let datas = all.iter().filter(|(k, _)| k[0] == VERSION_DATA).count();
        assert_eq!(datas, 2, "the data of both inline older versions");
        // A key with NUL is refused (it would fall among another's).
        let r = VersionedRemove {
            key: "k\0x".into(),
            version_id: None,
            marker: serde_json::to_vec(&entry("", false)).unwrap(),
            tag: Some("t".into()),
            now_ms: 5,
            bypass_governance: false,
        };
        let op = exec("s3", "vremove", postcard::to_stdvec(&r).unwrap());
        assert!(matches!(
            run(&s, "shard", &[op]),
            Err(loligo_types::ops::OpError::Invalid(_))
        ));
    }

    #[test]
    fn a_version_id_not_of_ours_is_refused() {
        let s = store();
        put(&s, "a", false, Some("t"));
        assert_eq!(remove(&s, Some("nope"), None, ""), Err(S3_NO_SUCH_VERSION));
        assert_eq!(omap(&s, "shard").len(), 2, "entry and data stay");
    }
}
