//! Splits and rebalances: replacing one node, or two neighbours, by the
//! nodes [`crate::plan::layout`] makes of their entries with the write that
//! needed it applied. Any client may roll back a replacement it has seen
//! unrenewed for the timeout (`Seen`: by its own clock only), finish the
//! deletion of the nodes a committed one replaced, and clear a mark whose
//! replacement is gone.
//!
//! The protocol, for replacement `T` of nodes `N...` (after "A scalable,
//! consistent key-value store on RADOS", with the commit point and the
//! write made one index op):
//!
//! 1. **Intent**: one index op compares each `N`'s entry with the one the
//!    client read (no intent) and sets `T` on them: the entries are locked.
//! 2. **Mark**: each `N` gets `kv.unwritable = T` if it has no mark. From
//!    here `N`'s keys are frozen: writes are refused, reads still served.
//! 3. **Read** the frozen nodes, check the write's expectations, apply it
//!    and lay the entries out as new nodes (named in `T`), then **create**
//!    them, unseen by anyone.
//! 4. **Swap** (the commit point): one index op compares each entry with
//!    `T` on it, removes or replaces them with the new nodes' entries, and
//!    adds a tomb naming the `N`s. The write is applied when this commits.
//! 5. **Delete** the `N`s, then the tomb.
//!
//! Rules that keep this safe under client death, slow clients and
//! rollbacks, each relied on below:
//! - A mark is only ever removed by the token that set it, and only when
//!   its replacement can no longer commit: its intent was taken off the
//!   index (rolled back), or the index entry names the node with another or
//!   no intent (the mark's intent is gone). A node out of the index keeps
//!   its mark until deleted: writers with a stale view are refused.
//! - Marks are read before index entries, and intents are set before
//!   marks, so a mark whose intent is still on the index is never taken
//!   for an orphan.
//! - A rollback takes the intent off the index first (compare-and-set on
//!   the exact entry), so a slow owner's swap fails; only then does it
//!   unmark and delete the new nodes.
//!
//! The owner renews its intent's stamp (a compare-and-set on the entries)
//! whenever a quarter of the timeout has passed, before each read of a
//! node and each op that creates one, so a replacement of big nodes is not
//! rolled back while its owner works; a failed renewal means it was, and
//! the owner abandons it. A rollback by another client leaves a tomb
//! naming the nodes the replacement may create, swept a timeout later, for
//! an owner that stalled after its last renewal and creates one after the
//! rollback; an owner's own rollback leaves one too, and removes it once
//! everything is undone and no op of it ended in doubt (a timeout).
//! Only an owner that stalls longer than that between a renewal and its
//! next op can leave a node behind, unnamed and never visible to readers.
//! An owner never undoes a replacement the index no longer shows as its
//! own: the swap may have committed with its answer lost.

use crate::index::{self, IndexEntry, Intent, Tomb};
use crate::{data, decode, exec, omap, plan, unique, Attempt, KvError, KvStore, Objects, Result};
use loligo_types::cls::{KvChange, KvNodeStat, NodeRange, KV_UNWRITABLE_XATTR};
use loligo_types::ops::{Cmp, OpError, SubOp};
use serde_bytes::ByteBuf;
use std::collections::BTreeMap;

/// How a replacement its owner abandons ended: every op answered, or
/// on an error (an op whose effect is unknown).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ended {
    Cleanly,
    OnAnError,
}

/// How many old tombs a client finishes after each of its replacements.
const SWEEP: u32 = 4;

/// Sightings kept before some are forgotten (forgetting one only
/// restarts its count: a later rollback, never an early one).
const SEEN_MAX: usize = 10_000;

/// Other clients' intents and tombs one client has seen: by token, the
/// stamp it saw and its own clock when it first saw that stamp. An intent
/// is rolled back (a tomb finished) only once this client has seen the
/// same stamp for longer than the timeout by its own clock: no two
/// clients' clocks are compared, so a client whose clock is behind (or
/// ahead) neither loses its live replacements nor keeps dead ones.
#[derive(Default)]
pub(crate) struct Seen(std::collections::HashMap<String, (u64, u64)>);

impl Seen {
    /// Whether `token` has shown `stamp` for longer than `timeout_ms` at
    /// `now_ms` (this client's clock).
    pub(crate) fn stale(&mut self, token: &str, stamp: u64, now_ms: u64, timeout_ms: u64) -> bool {
        if let Some(&(s, since)) = self.0.get(token) {
            if s == stamp {
                return now_ms.saturating_sub(since) > timeout_ms;
            }
        }
        if self.0.len() >= SEEN_MAX {
            // The sightings older than three timeouts go first; if that
            // is not enough, the newest half (the oldest are the nearest
            // to a verdict, and forgetting them all would let a flood of
            // new ones put every verdict off for good).
            self.0
                .retain(|_, (_, since)| now_ms.saturating_sub(*since) <= 3 * timeout_ms);
            if self.0.len() >= SEEN_MAX {
                let mut by_age: Vec<(u64, String)> = (self.0.iter())
                    .map(|(t, &(_, since))| (since, t.clone()))
                    .collect();
                by_age.sort_unstable();
                for (_, t) in by_age.split_off(by_age.len() / 2) {
                    self.0.remove(&t);
                }
            }
        }
        self.0.insert(token.to_string(), (stamp, now_ms));
        false
    }
}

fn bb(v: &[u8]) -> ByteBuf {
    ByteBuf::from(v.to_vec())
}

/// Compares of each intent entry (key, with, without) against its
/// encoding with the intent (`with`) or without it.
fn guard(lock: &[(Vec<u8>, Vec<u8>, Vec<u8>)], with: bool) -> Vec<SubOp> {
    lock.iter()
        .map(|(k, w, wo)| SubOp::CmpOmap {
            key: k.clone(),
            cmp: Cmp::Eq,
            value: if with { w.clone() } else { wo.clone() },
        })
        .collect()
}

/// Whether an op failed on one of its comparisons (someone else changed
/// what it compared).
fn lost_race(e: &KvError) -> bool {
    matches!(e, KvError::Op(OpError::AssertFailed { .. }))
}

/// What [`KvStore::clean`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cleaned {
    /// Replacements seen unrenewed for the timeout, rolled back.
    pub rolled_back: u64,
    /// Tombs finished: replaced nodes deleted.
    pub tombs: u64,
    /// Marks cleared whose replacement was gone.
    pub marks: u64,
}

impl<O: Objects> KvStore<O> {
    /// Replace the node of index entry (`ik`, `entry`), which refused
    /// `changes` for its size (too small after them if `under`, else too
    /// big), applying them: `Done(applied)`, or `Busy` / `Stale` to retry
    /// from the index.
    pub(crate) async fn reshape(
        &self,
        ik: &[u8],
        entry: &IndexEntry,
        changes: &[KvChange],
        under: bool,
    ) -> Result<Attempt<bool>> {
        if entry.intent.is_some() {
            return Ok(Attempt::Busy);
        }
        // Too small: take a neighbour too. (Sizes are rechecked on the
        // frozen nodes.)
        let mut nodes = vec![(ik.to_vec(), entry.clone())];
        if under {
            let Some(nb) = self.neighbour(ik).await? else {
                // The only node has no minimum: the refusal was for a
                // range that has changed since.
                return Ok(Attempt::Stale);
            };
            if nb.1.intent.is_some() {
                self.unblock(&nb.0, &nb.1.node).await?;
                return Ok(Attempt::Busy);
            }
            if nb.0.as_slice() < ik {
                nodes.insert(0, nb);
            } else {
                nodes.push(nb);
            }
        }
        let now = self.objs.now_ms();
        let token = unique(&self.name, "x");
        let most = (2 * self.k * nodes.len() as u64 + changes.len() as u64).div_ceil(2 * self.k);
        let intent = Intent {
            token: token.clone(),
            started_ms: now,
            replaces: nodes
                .iter()
                .map(|(k, e)| (k.clone(), e.node.clone()))
                .collect(),
            creates: (0..most).map(|i| format!("{token}.{i}")).collect(),
        };
        let lock = intent.entries();
        // 1. Intent.
        let mut ops = guard(&lock, false);
        ops.push(SubOp::OmapSet(
            lock.iter().map(|(k, with, _)| (bb(k), bb(with))).collect(),
        ));
        match self.objs.operate(&self.index(), ops).await {
            Ok(_) => {}
            Err(e) if lost_race(&e) => return Ok(Attempt::Stale),
            Err(e) => {
                // Applied or not: if it was, take it off again (best
                // effort: others roll it back after the timeout).
                let _ = self.abandon(&intent, Ended::Cleanly).await;
                return Err(e);
            }
        }
        let mut intent = intent;
        match self.replace(&mut intent, changes).await {
            Ok(Some(r)) => Ok(r),
            Ok(None) => {
                self.abandon(&intent, Ended::Cleanly).await?;
                Ok(Attempt::Busy)
            }
            Err(e) => {
                // Best effort: a failed abandon is rolled back by others
                // after the timeout.
                let _ = self.abandon(&intent, Ended::OnAnError).await;
                Err(e)
            }
        }
    }

    /// Steps 2-5 of replacement `intent`, whose entries are locked:
    /// `None` if it must be abandoned (the caller rolls it back).
    async fn replace(
        &self,
        intent: &mut Intent,
        changes: &[KvChange],
    ) -> Result<Option<Attempt<bool>>> {
        let token = intent.token.as_bytes().to_vec();
        // 2. Mark.
        for (_, node) in &intent.replaces {
            let mark = vec![
                SubOp::CmpXattr {
                    name: KV_UNWRITABLE_XATTR.into(),
                    cmp: Cmp::Eq,
                    value: Vec::new(),
                },
                SubOp::SetXattr {
                    name: KV_UNWRITABLE_XATTR.into(),
                    value: token.clone(),
                },
            ];
            match self.objs.operate(node, mark).await {
                Ok(_) => {}
                Err(e) if lost_race(&e) || e == KvError::Op(OpError::NotFound) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        // 3. Read the frozen nodes; check and apply the write.
        let mut all: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut range = NodeRange::default();
        for i in 0..intent.replaces.len() {
            let node = intent.replaces[i].1.clone();
            let Some((st, kvs)) = self.read_all(&node, Some(&mut *intent)).await? else {
                return Ok(None);
            };
            if i == 0 {
                range.low = st.range.low;
            }
            range.high = st.range.high;
            all.extend(kvs);
        }
        for c in changes {
            let present = all.contains_key(&c.key);
            let ok = c.expect.holds(present);
            if !ok || !range.holds(&c.key) {
                // Nothing changes: the replacement is not needed now.
                self.abandon(intent, Ended::Cleanly).await?;
                return Ok(Some(if ok {
                    Attempt::Stale
                } else {
                    Attempt::Done(false)
                }));
            }
        }
        for c in changes {
            match &c.value {
                Some(v) => all.insert(c.key.clone(), v.clone()),
                None => all.remove(&c.key),
            };
        }
        // One node left below k (its size changed since the refusal):
        // retry the write as it now stands.
        let only = range.low.is_none() && range.high.is_none();
        if intent.replaces.len() == 1 && (all.len() as u64) < self.k && !only {
            return Ok(None);
        }
        let new = plan::layout(all.into_iter().collect(), range, self.k);
        if new.len() > intent.creates.len() {
            return Err(KvError::Corrupt(format!(
                "a replacement planned {} nodes for {} names",
                new.len(),
                intent.creates.len()
            )));
        }
        let names = intent.creates.clone();
        for (n, name) in new.iter().zip(&names) {
            for ops in crate::node_ops(&n.range, &n.entries) {
                if !self.renew(intent).await? {
                    return Ok(None);
                }
                self.objs.operate(name, ops).await?;
            }
        }
        if !self.renew(intent).await? {
            return Ok(None);
        }
        // 4. Swap.
        let lock = intent.entries();
        let mut ops = guard(&lock, true);
        let placed: Vec<(Vec<u8>, IndexEntry)> = new
            .iter()
            .zip(&intent.creates)
            .map(|(n, name)| {
                (
                    index::index_key(n.range.high.as_deref()),
                    IndexEntry {
                        node: name.clone(),
                        intent: None,
                    },
                )
            })
            .collect();
        let gone: Vec<ByteBuf> = lock
            .iter()
            .filter(|(k, _, _)| placed.iter().all(|(p, _)| p != k))
            .map(|(k, _, _)| bb(k))
            .collect();
        if !gone.is_empty() {
            ops.push(SubOp::OmapRm(gone));
        }
        let tomb = Tomb {
            started_ms: intent.started_ms,
            nodes: intent.replaces.iter().map(|(_, n)| n.clone()).collect(),
        };
        let mut set: Vec<(ByteBuf, ByteBuf)> = placed
            .iter()
            .map(|(k, e)| (bb(k), bb(&e.encode())))
            .collect();
        set.push((bb(&index::tomb_key(&intent.token)), bb(&tomb.encode())));
        ops.push(SubOp::OmapSet(set));
        match self.objs.operate(&self.index(), ops).await {
            Ok(_) => {}
            // Rolled back by another client, who undoes it.
            Err(e) if lost_race(&e) => return Ok(None),
            Err(e) => return Err(e),
        }
        {
            let old: Vec<&[u8]> = lock.iter().map(|(k, _, _)| k.as_slice()).collect();
            self.cache().replace_entries(&old, placed);
        }
        // 5. Delete the replaced nodes, then the tomb; then help with old
        // tombs of clients that died. The write has committed: a failure
        // here (a timeout) leaves the tomb to the sweepers, never undoes.
        if (self
            .finish_tomb(&index::tomb_key(&intent.token), &tomb)
            .await)
            .is_ok()
        {
            let _ = self.sweep_tombs(Some(SWEEP), &mut 0).await;
        }
        Ok(Some(Attempt::Done(true)))
    }

    /// Keep replacement `intent` from being rolled back as too old while
    /// its owner is working on it: once a quarter of the timeout has
    /// passed, stamp it anew (compared with the entries as last stamped).
    /// `false` if it was rolled back meanwhile: then it must be abandoned.
    pub(crate) async fn renew(&self, intent: &mut Intent) -> Result<bool> {
        let now = self.objs.now_ms();
        // (A clock stepped back renews too: the stamp must keep changing.)
        if now.abs_diff(intent.started_ms) <= self.timeout_ms / 4 {
            return Ok(true);
        }
        let mut next = intent.clone();
        next.started_ms = now;
        let (old, new) = (intent.entries(), next.entries());
        let mut ops = guard(&old, true);
        ops.push(SubOp::OmapSet(
            new.iter().map(|(k, with, _)| (bb(k), bb(with))).collect(),
        ));
        match self.objs.operate(&self.index(), ops).await {
            Ok(_) => {
                *intent = next;
                Ok(true)
            }
            Err(e) if lost_race(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Roll back this client's own replacement `intent`: take it off the
    /// index (with a tomb naming the nodes it may have created), unmark
    /// its nodes, delete what it created, then the tomb, unless an op
    /// ended `OnAnError` (a create that timed out may still land: the
    /// tomb stays for the sweepers).
    ///
    /// If the entries do not carry the intent as last stamped, it was
    /// renewed by an op whose answer was lost (taken off with the stamp
    /// the index shows), or it is over: another client rolled it back
    /// (and undoes it), or its swap committed (an answer lost), and then
    /// its nodes are named and the replaced ones keep their marks until
    /// deleted: nothing is undone.
    async fn abandon(&self, intent: &Intent, ended: Ended) -> Result<()> {
        let tomb_ms = self.objs.now_ms();
        let mut taken = self.take_off(intent, Some(tomb_ms)).await;
        if matches!(&taken, Err(e) if lost_race(e)) {
            taken = match self.on_index(intent).await? {
                Some(now) => self.take_off(&now, Some(tomb_ms)).await,
                None => return Ok(()),
            };
        }
        match taken {
            Ok(()) => {}
            Err(e) if lost_race(&e) => return Ok(()),
            Err(e) => return Err(e),
        }
        self.undo(intent).await?;
        match ended {
            Ended::Cleanly => self.drop_tomb(&index::tomb_key(&intent.token)).await,
            Ended::OnAnError => Ok(()),
        }
    }

    /// `intent` as the index holds it now, if it still holds it (by its
    /// token, whatever its stamp).
    async fn on_index(&self, intent: &Intent) -> Result<Option<Intent>> {
        let Some((ik, _)) = intent.replaces.first() else {
            return Ok(None);
        };
        let r = self
            .objs
            .operate(&self.index(), vec![SubOp::OmapGetKeys(vec![bb(ik)])])
            .await?;
        let Some((_, v)) = omap(r.into_iter().next())?.into_iter().next() else {
            return Ok(None);
        };
        Ok(IndexEntry::decode(&v)?
            .intent
            .filter(|i| i.token == intent.token))
    }

    /// Take `intent` off the index entries that carry it (all or none),
    /// with a tomb for the nodes it may create if `tomb_ms` is given: a
    /// slow owner that creates one after the rollback has it deleted when
    /// the tomb is swept, a timeout later.
    async fn take_off(&self, intent: &Intent, tomb_ms: Option<u64>) -> Result<()> {
        let lock = intent.entries();
        let mut ops = guard(&lock, true);
        let mut set: Vec<(ByteBuf, ByteBuf)> = lock
            .iter()
            .map(|(k, _, without)| (bb(k), bb(without)))
            .collect();
        if let Some(ms) = tomb_ms {
            let tomb = Tomb {
                started_ms: ms,
                nodes: intent.creates.clone(),
            };
            set.push((bb(&index::tomb_key(&intent.token)), bb(&tomb.encode())));
        }
        ops.push(SubOp::OmapSet(set));
        self.objs.operate(&self.index(), ops).await.map(|_| ())
    }

    /// After `intent` is off the index: clear its marks, delete the nodes
    /// it may have created.
    async fn undo(&self, intent: &Intent) -> Result<()> {
        for (_, node) in &intent.replaces {
            self.clear_mark(node, intent.token.as_bytes()).await?;
        }
        for name in &intent.creates {
            match self.objs.operate(name, vec![SubOp::Remove]).await {
                Ok(_) | Err(KvError::Op(OpError::NotFound)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Roll back another client's replacement `intent`, older than the
    /// timeout. If it committed meanwhile, or someone else rolled it
    /// back, nothing is done here.
    async fn roll_back(&self, intent: &Intent) -> Result<bool> {
        match self.take_off(intent, Some(self.objs.now_ms())).await {
            Ok(()) => {
                self.undo(intent).await?;
                Ok(true)
            }
            Err(e) if lost_race(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Remove `node`'s unwritable mark if it is `token`: whether it was.
    async fn clear_mark(&self, node: &str, token: &[u8]) -> Result<bool> {
        let ops = vec![
            SubOp::CmpXattr {
                name: KV_UNWRITABLE_XATTR.into(),
                cmp: Cmp::Eq,
                value: token.to_vec(),
            },
            SubOp::RmXattr(KV_UNWRITABLE_XATTR.into()),
        ];
        match self.objs.operate(node, ops).await {
            Ok(_) => Ok(true),
            Err(e) if lost_race(&e) => Ok(false),
            Err(KvError::Op(OpError::NotFound | OpError::NoXattr(_))) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `node`'s stat (`None`: it is gone).
    pub(crate) async fn stat(&self, node: &str) -> Result<Option<KvNodeStat>> {
        match self.objs.operate(node, vec![exec("kv", "stat", &())]).await {
            Ok(r) => Ok(Some(decode(&data(r.into_iter().next())?, "node stat")?)),
            Err(KvError::Op(OpError::NotFound)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Help the replacement that holds node `node` (index key `ik`) along:
    /// roll it back if seen unrenewed for the timeout, clear a mark whose
    /// replacement is gone. Returns what it did, and the token and stamp
    /// of a live replacement it left alone (its owner renewing the stamp is
    /// progress a waiter may keep waiting on).
    pub(crate) async fn unblock(
        &self,
        ik: &[u8],
        node: &str,
    ) -> Result<(Cleaned, Option<(String, u64)>)> {
        let mut live = None;
        let done = self.unblock_inner(ik, node, &mut live).await?;
        Ok((done, live))
    }

    async fn unblock_inner(
        &self,
        ik: &[u8],
        node: &str,
        live: &mut Option<(String, u64)>,
    ) -> Result<Cleaned> {
        let mut done = Cleaned::default();
        // The mark first, then the entry (see the module's rules).
        let mark = match self
            .objs
            .operate(node, vec![SubOp::GetXattr(KV_UNWRITABLE_XATTR.into())])
            .await
        {
            Ok(r) => data(r.into_iter().next())?,
            Err(KvError::Op(OpError::NoXattr(_))) => Vec::new(),
            Err(KvError::Op(OpError::NotFound)) => return Ok(done),
            Err(e) => return Err(e),
        };
        let r = self
            .objs
            .operate(&self.index(), vec![SubOp::OmapGetKeys(vec![bb(ik)])])
            .await?;
        let Some((_, v)) = omap(r.into_iter().next())?.into_iter().next() else {
            return Ok(done);
        };
        let e = IndexEntry::decode(&v)?;
        if e.node != node {
            return Ok(done);
        }
        let mut intent_token: Option<&[u8]> = None;
        if let Some(i) = &e.intent {
            if self.stale(&i.token, i.started_ms) {
                // A rollback that loses its race found the replacement
                // committed (or rolled back by another): then the mark
                // must stay (a replaced node keeps it until deleted).
                if self.roll_back(i).await? {
                    done.rolled_back += 1;
                }
                return Ok(done);
            } else {
                intent_token = Some(i.token.as_bytes());
                *live = Some((i.token.clone(), i.started_ms));
            }
        }
        if !mark.is_empty()
            && intent_token != Some(mark.as_slice())
            && self.clear_mark(node, &mark).await?
        {
            done.marks += 1;
        }
        Ok(done)
    }

    /// Delete the nodes of the tomb at index key `key`, then the tomb.
    async fn finish_tomb(&self, key: &[u8], tomb: &Tomb) -> Result<()> {
        for node in &tomb.nodes {
            match self.objs.operate(node, vec![SubOp::Remove]).await {
                Ok(_) | Err(KvError::Op(OpError::NotFound)) => {}
                Err(e) => return Err(e),
            }
        }
        self.drop_tomb(key).await
    }

    /// Remove the tomb at index key `key`.
    async fn drop_tomb(&self, key: &[u8]) -> Result<()> {
        self.objs
            .operate(&self.index(), vec![SubOp::OmapRm(vec![bb(key)])])
            .await
            .map(|_| ())
    }

    /// Finish the tombs seen for longer than the timeout (left by clients
    /// that died after their swap), looking at `limit` at most (`None`:
    /// all, page by page): how many; `left` counts those not old yet.
    async fn sweep_tombs(&self, limit: Option<u32>, left: &mut u64) -> Result<u64> {
        const PAGE: u32 = 1000;
        let mut n = 0;
        let mut seen = 0;
        let mut from: Vec<u8> = Vec::new();
        loop {
            let want = limit.map_or(PAGE, |l| (l - seen).min(PAGE));
            let page = self.list_index(&from, want).await?;
            let full = page.len() == want as usize;
            let mut last = None;
            for (k, v) in page {
                if k.as_slice() >= index::TOMBS_END {
                    return Ok(n);
                }
                seen += 1;
                // A tomb that does not decode is left (for `check` to
                // name) and the sweep goes on past it.
                let Ok(tomb) = Tomb::decode(&v) else {
                    *left += 1;
                    last = Some(k);
                    continue;
                };
                let token = String::from_utf8_lossy(&k[1..]).into_owned();
                // (Keyed apart from the intent of the same token.)
                if self.stale(&format!("tomb {token}"), tomb.started_ms) {
                    self.finish_tomb(&k, &tomb).await?;
                    n += 1;
                } else {
                    *left += 1;
                }
                last = Some(k);
            }
            // The next page starts after the last key seen (those
            // finished are gone, those left stay where they were).
            match last {
                Some(mut k) if full && limit.is_none_or(|l| seen < l) => {
                    k.push(0);
                    from = k;
                }
                _ => return Ok(n),
            }
        }
    }

    /// The entry next to node `ik` (after it; before it for the last
    /// node), or `None` if `ik` is the only node.
    async fn neighbour(&self, ik: &[u8]) -> Result<Option<(Vec<u8>, IndexEntry)>> {
        if ik != index::index_key(None) {
            let mut after = ik.to_vec();
            after.push(0);
            let page = self.list_index(&after, 1).await?;
            return match page.into_iter().next() {
                Some((k, v)) => Ok(Some((k, IndexEntry::decode(&v)?))),
                None => Err(KvError::Corrupt("the index has no last node".into())),
            };
        }
        // The node before the last: the cache's guess, checked by listing
        // from it (nothing may lie between), else a walk of the index.
        let guess = self.cache().last_before(index::NODES_START, ik);
        if let Some(g) = guess {
            let page = self.list_index(&g, 2).await?;
            if let [(a, av), (b, _)] = page.as_slice() {
                if *a == g && b.as_slice() == ik {
                    return Ok(Some((g, IndexEntry::decode(av)?)));
                }
            }
        }
        let all = self.index_entries().await?;
        self.cache().reset(all.iter().cloned());
        Ok(match all.as_slice() {
            [.., before, (last, _)] if last.as_slice() == ik => Some(before.clone()),
            _ => None,
        })
    }

    /// Repair what dead or stalled clients left: roll back replacements
    /// seen unrenewed for the timeout, finish their tombs, clear marks
    /// whose replacement is gone; what it sees for the first time it
    /// looks at again a timeout later. Safe while others use the store.
    pub async fn clean(&self) -> Result<Cleaned> {
        let (mut done, left) = self.clean_pass().await?;
        if left > 0 {
            // Replacements and tombs seen for the first time: they count
            // as old only once seen unrenewed for a timeout.
            self.objs.pause(self.timeout_ms + 1).await;
            let (again, _) = self.clean_pass().await?;
            done.rolled_back += again.rolled_back;
            done.tombs += again.tombs;
            done.marks += again.marks;
        }
        Ok(done)
    }

    /// One pass of `clean`: what it did, and how many replacements and
    /// tombs it left (not old yet as this client has seen them).
    async fn clean_pass(&self) -> Result<(Cleaned, u64)> {
        let mut done = Cleaned::default();
        let mut left = 0;
        done.tombs += self.sweep_tombs(None, &mut left).await?;
        for (ik, e) in self.index_entries().await? {
            let marked = match self.stat(&e.node).await? {
                Some(st) => st.unwritable,
                None => false,
            };
            if marked || e.intent.is_some() {
                let (d, live) = self.unblock(&ik, &e.node).await?;
                done.rolled_back += d.rolled_back;
                done.marks += d.marks;
                left += u64::from(live.is_some());
            }
        }
        Ok((done, left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table full of fresh sightings forgets the newest half, not every
    /// one: the oldest stays on its way to a verdict (a flood of new
    /// tokens must not put every rollback off for good).
    #[test]
    fn a_full_table_of_sightings_forgets_the_newest_half() {
        let mut s = Seen::default();
        let timeout = 10_000;
        assert!(!s.stale("old", 7, 0, timeout));
        for i in 0..SEEN_MAX as u64 {
            assert!(!s.stale(&format!("t{i}"), 1, 1 + i / 100, timeout));
        }
        assert!(s.0.len() < SEEN_MAX, "{}", s.0.len());
        assert!(s.stale("old", 7, timeout + 1, timeout), "forgotten");
    }
}
