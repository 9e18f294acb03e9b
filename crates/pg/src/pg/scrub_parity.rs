//! The parity check of an erasure-coded deep scrub. A shard's own hash
//! (`_h`) tells wrong bytes under valid store checksums only in objects
//! written whole; a partial write empties it. For those objects the
//! primary gathers every shard of the chunk's objects, a run of stripes
//! (about `PIECE_BYTES` of object data) at a time, encodes the data again
//! and compares the parity (`Striper::check_shards`); where they
//! disagree, the one shard whose rebuild from the others makes them all
//! agree is reported bad (`ec_hash_error`, authoritative by the `parity`
//! rule), and a repair rebuilds it. Where no one shard explains the
//! disagreement (one parity shard, or several wrong), every shard is
//! reported and none is authoritative: a repair leaves the object. (With
//! exactly two parity shards, two shards wrong at the same offsets can,
//! rarely, look like one: the code cannot tell more.)
//!
//! It runs while the chunk's writes are held, after the maps agreed: it
//! must never report an object whose shards changed while it read them,
//! and never read a shard at another version than the maps found.

use super::scrub_map::{Inconsistent, ScrubObject, ShardError, PIECE_BYTES};
use super::*;
use crate::ec;
use bytes::Bytes;
use loligo_ec::check::ShardCheck;
use loligo_ec::stripe;
use std::ops::Range;

/// Where a chunk's parity checks stand.
pub(super) enum ParityStep {
    /// Shard reads are awaited.
    Waiting(Box<ParityCheck>),
    /// Every object is checked: what was found.
    Done(Vec<Inconsistent>),
    /// A shard could not be read (why): the chunk is tried again.
    Failed(String),
}

/// The parity checks of one chunk.
#[derive(Default)]
pub(super) struct ParityCheck {
    /// Objects still to check.
    queue: VecDeque<Object>,
    current: Option<Checking>,
    /// What the checks found.
    pub(super) found: Vec<Inconsistent>,
}

/// An object to check, as the maps found it.
struct Object {
    name: String,
    version: Version,
    size: u64,
    /// Every member's map entry (for the report).
    copies: BTreeMap<i32, Option<ScrubObject>>,
}

/// The object being checked: the run of stripes read now.
struct Checking {
    obj: Object,
    stripes: Range<u64>,
    tid: u64,
    /// Shards whose bytes are awaited, with their OSDs and lengths.
    waiting: BTreeMap<usize, (i32, u64)>,
    got: BTreeMap<usize, Bytes>,
    /// Shards a run found bad so far.
    bad: BTreeSet<usize>,
    /// A run whose disagreement no one shard explains.
    unlocated: bool,
}

impl ParityCheck {
    /// Checks of the objects of `maps` (this primary's, `me`) that all
    /// members agree on, whose shards keep no hash and hold data; `found`
    /// names those the comparison already reported.
    pub(super) fn of_chunk(
        me: i32,
        maps: &BTreeMap<i32, Vec<ScrubObject>>,
        found: &BTreeSet<String>,
        no_hash: impl Fn(&str) -> bool,
    ) -> ParityCheck {
        let mut queue = VecDeque::new();
        for o in maps.get(&me).into_iter().flatten() {
            if o.size == 0 || found.contains(&o.name) || !no_hash(&o.name) {
                continue;
            }
            let copies = (maps.iter())
                .map(|(&osd, m)| (osd, m.iter().find(|x| x.name == o.name).cloned()))
                .collect();
            queue.push_back(Object {
                name: o.name.clone(),
                version: o.version,
                size: o.size,
                copies,
            });
        }
        ParityCheck {
            queue,
            current: None,
            found: Vec::new(),
        }
    }

    /// Nothing is left to check.
    pub(super) fn done(&self) -> bool {
        self.queue.is_empty() && self.current.is_none()
    }

    /// A shard read is answered: `None` if `tid` is no read of this
    /// check's, else whether it could be read (why not).
    pub(super) fn answer(
        &mut self,
        tid: u64,
        from: i32,
        pos: usize,
        result: Result<Vec<Bytes>, RepError>,
    ) -> Option<Result<(), String>> {
        let c = self.current.as_mut().filter(|c| c.tid == tid)?;
        let Some(&(osd, len)) = c.waiting.get(&pos).filter(|w| w.0 == from) else {
            return Some(Ok(()));
        };
        c.waiting.remove(&pos);
        Some(match result {
            Ok(mut v) if v.len() == 1 && v[0].len() as u64 == len => {
                c.got.insert(pos, v.remove(0));
                Ok(())
            }
            Ok(_) => Err(format!("osd.{osd} sent the wrong extents of shard {pos}")),
            Err(e) => Err(format!("osd.{from} could not read shard {pos}: {e:?}")),
        })
    }
}

impl Checking {
    fn new(obj: Object, striper: &stripe::Striper) -> Checking {
        let n = run_stripes(striper).min(striper.stripes(obj.size));
        Checking {
            obj,
            stripes: 0..n,
            tid: 0,
            waiting: BTreeMap::new(),
            got: BTreeMap::new(),
            bad: BTreeSet::new(),
            unlocated: false,
        }
    }
}

/// Stripes of about `PIECE_BYTES` of object data (one at least).
fn run_stripes(striper: &stripe::Striper) -> u64 {
    (PIECE_BYTES / striper.width()).max(1)
}

/// What one object's checks found, as a report (`None`: nothing).
fn report(c: &Checking, acting: &[i32]) -> Option<Inconsistent> {
    if c.bad.is_empty() && !c.unlocated {
        return None;
    }
    let osd = |pos: usize| acting.get(pos).copied().filter(|&o| o >= 0);
    // (Unlocated: every shard is suspect, so none is authoritative.)
    let (suspects, rule) = match c.unlocated {
        true => ((0..acting.len()).collect(), scrub_map::AuthRule::None),
        false => (c.bad.clone(), scrub_map::AuthRule::Parity),
    };
    let bad = (suspects.iter().filter_map(|&p| osd(p)))
        .map(|o| (o, vec![ShardError::EcHashError]))
        .collect();
    let auth = (0..acting.len())
        .filter(|p| !suspects.contains(p))
        .filter_map(osd)
        .collect();
    Some(Inconsistent {
        name: c.obj.name.clone(),
        version: c.obj.version,
        auth,
        rule,
        bad,
        copies: c.obj.copies.clone(),
    })
}

impl Pg {
    /// Whether this copy's shard of `name` keeps no hash of its data.
    pub(super) fn shard_keeps_no_hash(&self, s: &dyn ObjectStore, name: &str) -> bool {
        match s.getattr(self.coll, &recovery::oid(name), ec::HASH_ATTR) {
            Ok(h) => h.is_empty(),
            Err(loligo_store::StoreError::NoAttr { .. }) => true,
            // (A read that fails here failed the map too.)
            Err(_) => false,
        }
    }

    /// Go on with the parity checks of `pc` as far as they go now: check
    /// each run whose shards are all in, and read the next (the next
    /// object's first once one is done).
    pub(super) fn parity_next(
        &mut self,
        s: &dyn ObjectStore,
        mut pc: ParityCheck,
        fx: &mut Vec<Effect>,
    ) -> ParityStep {
        let Some(striper) = self.ec.clone() else {
            return ParityStep::Failed("not an erasure-coded PG".into());
        };
        loop {
            let next = match pc.current.take() {
                Some(c) if !c.waiting.is_empty() => {
                    pc.current = Some(c);
                    return ParityStep::Waiting(Box::new(pc));
                }
                Some(c) => match self.parity_run_read(c, &striper, &mut pc.found) {
                    Ok(Some(c)) => c,
                    Ok(None) => continue,
                    Err(why) => return ParityStep::Failed(why),
                },
                None => match pc.queue.pop_front() {
                    Some(obj) => Checking::new(obj, &striper),
                    None => return ParityStep::Done(pc.found),
                },
            };
            match self.parity_read(s, next, &striper, fx) {
                Ok(c) => pc.current = Some(c),
                Err(why) => return ParityStep::Failed(why),
            }
        }
    }

    /// Read `c`'s run of every shard: this copy's now, the members' under
    /// a new tid.
    fn parity_read(
        &mut self,
        s: &dyn ObjectStore,
        mut c: Checking,
        striper: &stripe::Striper,
        fx: &mut Vec<Effect>,
    ) -> Result<Checking, String> {
        let run = (striper.run_size(c.obj.size, &c.stripes)).map_err(|e| e.to_string())?;
        let oid = recovery::oid(&c.obj.name);
        c.tid = self.take_tid();
        c.got.clear();
        c.waiting.clear();
        let acting = self.map.acting.clone();
        for (pos, &osd) in acting.iter().enumerate() {
            let len = striper.shard_len(run, pos).map_err(|e| e.to_string())?;
            let ext = vec![(c.stripes.start * striper.unit(), len)];
            if len == 0 {
                c.got.insert(pos, Bytes::new());
            } else if osd == self.whoami {
                let r = erasure::read_shard(
                    s,
                    self.coll,
                    &oid,
                    Some(pos),
                    c.obj.version,
                    &ext,
                    striper,
                );
                let b = r.map_err(|e| format!("own shard {pos} of '{}': {e:?}", oid.name))?;
                let b = b.into_iter().next().unwrap_or_default();
                c.got.insert(pos, b);
            } else if osd >= 0 {
                let msg = PeerMsg::ReadShard {
                    pg: self.id,
                    from: self.whoami,
                    epoch: self.map.epoch,
                    name: c.obj.name.clone(),
                    extents: ext,
                    version: c.obj.version,
                    shard: pos,
                };
                self.send(c.tid, osd, msg, fx);
                c.waiting.insert(pos, (osd, len));
            } else {
                return Err(format!("no member holds shard {pos}"));
            }
        }
        Ok(c)
    }

    /// Every shard of `c`'s run is in: check it, then go on to the next
    /// run (`None`: the object is checked, its report in `found`; `Err`:
    /// the run could not be checked, which says nothing of its shards).
    fn parity_run_read(
        &mut self,
        mut c: Checking,
        striper: &stripe::Striper,
        found: &mut Vec<Inconsistent>,
    ) -> Result<Option<Checking>, String> {
        let shards: Vec<&[u8]> = (0..striper.shards())
            .map(|p| c.got.get(&p).map_or(&[][..], |b| &b[..]))
            .collect();
        let check = striper.check_shards(c.obj.size, c.stripes.clone(), &shards);
        match check.map_err(|e| format!("cannot check '{}': {e}", c.obj.name))? {
            ShardCheck::Consistent => {}
            ShardCheck::Bad(p) => {
                c.bad.insert(p);
            }
            ShardCheck::Unlocated => c.unlocated = true,
        }
        let end = striper.stripes(c.obj.size);
        if c.stripes.end < end {
            let next = c.stripes.end;
            c.stripes = next..(next + run_stripes(striper)).min(end);
            return Ok(Some(c));
        }
        self.scrubber.parity_checked += 1;
        found.extend(report(&c, &self.map.acting));
        Ok(None)
    }
}
