//! A deterministic workload for crash tests: transaction `n` rewrites
//! object `n % OBJECTS` (a large copy-on-write or a small deferred write,
//! then a small overwrite), sets an xattr, an omap key and a record to
//! `n`, and clones the object. After a crash, every object must show one
//! `n` everywhere (no half-applied transaction) and no `n` older than the
//! last one acknowledged for it (no lost commit).
//!
//! Some transactions are queued unsynced (see [`unsynced`]): a crash may
//! lose those after the last synced one, never an earlier one, and never
//! leave space they freed reused under an older state.
//!
//! `loligo store torture` runs it; the crash test kills that process.
//!
//! The checker must never accept a state that mixes two transactions.

use crate::names::{CollectionId, ObjectId};
use crate::store::ObjectStore;
use crate::txn::Transaction;
use std::collections::BTreeMap;

/// Objects the workload cycles through.
pub const OBJECTS: u64 = 8;

/// The collection the workload uses.
pub fn coll() -> CollectionId {
    CollectionId::pg(0, 0)
}

pub fn object(i: u64) -> ObjectId {
    ObjectId::new((i * 0x2000_0000) as u32, format!("torture-{i}"))
}

pub fn clone_of(i: u64) -> ObjectId {
    ObjectId::new((i * 0x2000_0000) as u32 + 1, format!("torture-{i}-clone"))
}

fn rng(n: u64) -> impl FnMut() -> u64 {
    let mut r = loligo_testkit::Rng::new(n);
    move || r.next_u64()
}

/// Whether transaction `n` is queued unsynced (`queue_unsynced`): four
/// in every eight, so that each of up to four writer threads (thread
/// `n % threads`) alternates, and small enough (but for every fifth, a
/// large one) to live inline, so that their batches really skip the
/// sync. Such a transaction is durable once one queued after it by the
/// same thread is.
pub fn unsynced(n: u64) -> bool {
    (n / 4) % 2 == 1
}

/// The data object `n % OBJECTS` holds after transaction `n`.
pub fn expected(n: u64) -> Vec<u8> {
    let mut r = rng(n);
    let len = if n.is_multiple_of(5) {
        200_000 + r() % 600_000
    } else if unsynced(n) {
        1 + r() % 4_000
    } else {
        1 + r() % 30_000
    } as usize;
    let mut d: Vec<u8> = (0..len).map(|i| (r() >> (i % 8)) as u8).collect();
    let (off, small) = overwrite(n, len);
    d[off..off + small.len()].copy_from_slice(&small);
    d
}

fn overwrite(n: u64, len: usize) -> (usize, Vec<u8>) {
    let off = (n as usize * 7919) % len;
    let l = (len - off).min(100);
    (off, vec![(n as u8) ^ 0x5a; l])
}

/// Create the collection (run once, before the first transaction).
pub fn setup(s: &dyn ObjectStore) -> crate::Result<()> {
    if !s.collection_exists(coll())? {
        let mut t = Transaction::new();
        t.create_collection(coll());
        s.apply(t)?;
    }
    Ok(())
}

/// Transaction `n`.
pub fn txn(n: u64) -> Transaction {
    let o = object(n % OBJECTS);
    let data = expected(n);
    let (off, small) = overwrite(n, data.len());
    let mut first = data.clone();
    first[off..off + small.len()].fill(0xEE);
    let mut t = Transaction::new();
    t.write_full(coll(), &o, first)
        .write(coll(), &o, off as u64, small)
        .setattr(coll(), &o, "n", n.to_le_bytes().to_vec())
        .omap_setkeys(coll(), &o, vec![(b"n".to_vec(), n.to_le_bytes().to_vec())])
        .set_record(coll(), o.name.as_bytes(), n.to_le_bytes().to_vec())
        .clone_object(coll(), &o, &clone_of(n % OBJECTS));
    t
}

fn num(b: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

/// Check the store after a crash. `acked[o]` is the last `n` known
/// durable for object `o` (reported committed, or applied unsynced and
/// followed by a committed one). Returns the next `n` to run (one past the
/// newest transaction visible), or what is wrong.
pub fn verify(s: &dyn ObjectStore, acked: &BTreeMap<u64, u64>) -> Result<u64, String> {
    let c = coll();
    let mut next = 0;
    if !s.collection_exists(c).map_err(|e| e.to_string())? {
        // Killed before the workload's first commit.
        return match acked.iter().next() {
            None => Ok(0),
            Some((i, n)) => Err(format!(
                "object {i}: transaction {n} acknowledged but the collection is missing"
            )),
        };
    }
    for i in 0..OBJECTS {
        let o = object(i);
        let present = s.exists(c, &o).map_err(|e| e.to_string())?;
        if !present {
            if let Some(n) = acked.get(&i) {
                return Err(format!(
                    "object {i}: transaction {n} was acknowledged but the object is missing"
                ));
            }
            continue;
        }
        let e = |x: crate::StoreError| format!("object {i}: {x}");
        let n = num(&s.getattr(c, &o, "n").map_err(e)?).ok_or("bad xattr")?;
        let data = s.read(c, &o, &[(0, u64::MAX)]).map_err(e)?.remove(0);
        if n % OBJECTS != i {
            return Err(format!("object {i} holds transaction {n}'s number"));
        }
        if data != expected(n) {
            return Err(format!(
                "object {i}: data is not transaction {n}'s (half-applied?)"
            ));
        }
        let om = s.omap_get(c, &o, &[b"n".to_vec()]).map_err(e)?;
        if om.get(b"n".as_slice()).and_then(|v| num(v)) != Some(n) {
            return Err(format!("object {i}: omap disagrees with xattr {n}"));
        }
        let rec = s.record(c, o.name.as_bytes()).map_err(e)?;
        if rec.as_deref().and_then(num) != Some(n) {
            return Err(format!("object {i}: record disagrees with xattr {n}"));
        }
        let cl = clone_of(i);
        let cdata = s.read(c, &cl, &[(0, u64::MAX)]).map_err(e)?.remove(0);
        if cdata != data || s.getattr(c, &cl, "n").map_err(e)? != n.to_le_bytes() {
            return Err(format!("object {i}: clone differs from transaction {n}"));
        }
        if let Some(&a) = acked.get(&i) {
            if n < a {
                return Err(format!(
                    "object {i}: holds {n} but {a} was acknowledged (lost commit)"
                ));
            }
        }
        next = next.max(n + 1);
    }
    Ok(next)
}
