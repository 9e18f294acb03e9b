//! The simulated client: it writes and reads a few objects with compound
//! ops (data, xattr and omap together), now and then under an older map
//! or to an old primary, sends again what goes unanswered, and checks
//! every reply against what was acknowledged (no acknowledged write lost,
//! no value never written, no torn compound write).
//!
//! It must never take a reply it cannot place in the history as good.

use super::*;
use loligo_testkit::lincheck::{self, RegisterIn, RegisterOut};

/// How long the client waits for a reply before it sends an op again.
pub(crate) const CLIENT_RESEND_MS: u64 = 3_000;

/// Chance (per mille) that an op is sent under an older map.
pub(crate) const STALE_CLIENT_PER_MILLE: u64 = 100;

/// Search steps the linearizability check may take per object.
const LINCHECK_BUDGET: u64 = 2_000_000;

/// Chance (per mille) that a write to an object that exists removes it.
pub(crate) const REMOVE_PER_MILLE: u64 = 150;

#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    /// Write `value`, or (`remove`) remove the object: a remove takes a
    /// value too, so every acknowledged state is ordered.
    Write {
        obj: usize,
        value: u64,
        remove: bool,
    },
    Read {
        obj: usize,
        floor: u64,
    },
}

pub(crate) struct Pending {
    pub(crate) kind: Kind,
    /// Its entry in `Sim::history`.
    hist: usize,
    reqid: ReqId,
    sent_ms: u64,
    /// Token of the latest send (earlier sends' replies still count).
    req: u64,
}

/// Bytes of an erasure-coded object's data in the simulator: several
/// stripes (see `sim_pool`), so that a partial write re-encodes some of
/// them only and the shards keep no hash (a deep scrub then checks the
/// parity).
pub(crate) const EC_DATA_LEN: usize = 1024;

/// An erasure-coded object's data for value `v`: the value, zeros, the
/// value again. A write of the two ends alone makes it from any other
/// value's, or from nothing (the client may not know that its object was
/// given up).
pub(crate) fn ec_data(v: &[u8]) -> Vec<u8> {
    let mut d = vec![0u8; EC_DATA_LEN];
    d[..8].copy_from_slice(&v[..8]);
    d[EC_DATA_LEN - 8..].copy_from_slice(&v[..8]);
    d
}

impl Sim {
    /// An erasure-coded object's data for value `v` in this run.
    pub(crate) fn ec_object(&self, v: &[u8]) -> Vec<u8> {
        match self.ec_stripes {
            true => ec_data(v),
            false => v.to_vec(),
        }
    }

    /// The value an erasure-coded object's data holds in this run (0:
    /// torn).
    fn ec_value(&self, data: &[u8]) -> u64 {
        match self.ec_stripes {
            true => ec_value_of(data),
            false => value_of(data),
        }
    }
}

/// The value an erasure-coded object's data holds (0 if it is not
/// [`ec_data`] of any: torn).
fn ec_value_of(data: &[u8]) -> u64 {
    let v = data.get(..8).map_or(0, value_of);
    match ec_data(&v.to_le_bytes()) == data {
        true => v,
        false => 0,
    }
}

pub(crate) fn value_of(data: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    if data.len() == 8 {
        b.copy_from_slice(data);
    }
    u64::from_le_bytes(b)
}

impl Sim {
    pub(crate) fn on_reply(&mut self, req: u64, reply: OpReply) {
        let Some(&key) = self.reqs.get(&req) else {
            return;
        };
        let Some(p) = self.pending.get(&key) else {
            return;
        };
        let (kind, hist) = (p.kind, p.hist);
        match (&reply.result, kind) {
            // A remove applied before whose answer was lost and whose
            // request id is no longer in the log runs again: absent is
            // what it wanted.
            (Ok(_), Kind::Write { obj, value, remove })
            | (
                Err(OpError::NotFound),
                Kind::Write {
                    obj,
                    value,
                    remove: remove @ true,
                },
            ) => {
                self.pending.remove(&key);
                self.answered(hist, RegisterOut::Written);
                self.writing[obj] = false;
                if !remove && reply.result.is_ok() {
                    self.written.insert((obj, reply.version), value);
                }
                if value >= self.lost_upto[obj] {
                    self.acked[obj] = self.acked[obj].max(value);
                }
                self.exists[obj] = !remove;
                self.stats.acked_writes += 1;
                self.stats.removes += u64::from(remove);
            }
            (Ok(r), Kind::Read { obj, floor }) => {
                self.pending.remove(&key);
                let (data, xattr, omap) = match &r[..] {
                    [SubResult::Data(d), SubResult::Data(x), SubResult::Omap(o)] => (
                        value_of(d),
                        value_of(x),
                        o.first().map_or(0, |(_, v)| value_of(v)),
                    ),
                    // EC: no omap.
                    [SubResult::Data(d), SubResult::Data(x)] if self.ec.is_some() => {
                        let data = self.ec_value(d);
                        if data == 0 && value_of(x) != 0 && self.trace {
                            println!(
                                "  o{obj}: read {} bytes: {:?}",
                                d.len(),
                                &d[..d.len().min(64)]
                            );
                        }
                        (data, value_of(x), value_of(x))
                    }
                    other => panic!("object {obj}: unexpected read result {other:?}"),
                };
                assert!(
                    data == xattr && xattr == omap,
                    "object {obj}: torn compound write: data {data}, xattr {xattr}, omap {omap}"
                );
                self.check_read(obj, floor, data);
                self.answered(hist, RegisterOut::Read(Some(data)));
            }
            (Err(OpError::NotFound), Kind::Read { obj, floor }) => {
                self.pending.remove(&key);
                // Absent: never written as far as the reader knows, or
                // removed by a write at or after the newest it knew of.
                assert!(
                    floor == 0 || self.removes[obj].range(floor..).next().is_some(),
                    "object {obj}: not found, but {floor} was acknowledged before the read was sent"
                );
                self.stats.good_reads += 1;
                self.answered(hist, RegisterOut::Read(None));
            }
            (Err(e), _) => {
                let retryable = matches!(
                    e,
                    OpError::WrongPrimary { .. }
                        | OpError::Behind { .. }
                        | OpError::Unavailable { .. }
                        | OpError::Down { .. }
                        | OpError::Io(_)
                );
                assert!(retryable, "unexpected error {e:?} for {kind:?}");
                // Resend soon (same request id).
                if let Some(p) = self.pending.get_mut(&key) {
                    p.sent_ms = self.now_ms.saturating_sub(CLIENT_RESEND_MS) + 50;
                }
            }
        }
    }

    /// History entry `hist` answered `out` now.
    fn answered(&mut self, hist: usize, out: RegisterOut<u64>) {
        if let Some((_, op)) = self.history.get_mut(hist) {
            op.output = Some(out);
            op.ret = self.now_ms;
        }
    }

    /// The client's history, object by object, is linearizable: each op
    /// took effect at one instant between its sending and its answer
    /// (ops never answered at any instant after their sending, or never).
    /// Objects whose acknowledged writes were given up (their PG's whole
    /// write set declared lost) are left out: they were allowed to go
    /// back. A history the search cannot decide within its budget counts
    /// as undecided, not as passed; one that is not linearizable fails
    /// the run with `Run::linearizable`, else is counted.
    pub(crate) fn check_linearizable(&mut self) {
        let kept = (self.history.iter()).filter(|(obj, _)| self.lost_upto[*obj] == 0);
        let verdict = lincheck::check_by_key(
            &lincheck::Register::<u64>::new(),
            kept.cloned().collect(),
            LINCHECK_BUDGET,
        );
        match verdict {
            lincheck::Verdict::Linearizable => self.stats.histories_checked += 1,
            lincheck::Verdict::Undecided(_) => self.stats.histories_undecided += 1,
            lincheck::Verdict::NotLinearizable(obj) => {
                self.stats.histories_bad += 1;
                let ops: Vec<_> = (self.history.iter()).filter(|(o, _)| *o == obj).collect();
                assert!(
                    !self.linearizable,
                    "object {obj}: the client's history is not linearizable: {ops:?}"
                );
            }
        }
    }

    pub(crate) fn check_read(&mut self, obj: usize, floor: u64, got: u64) {
        assert!(
            !self.removes[obj].contains(&got),
            "object {obj}: read {got}, which was a remove"
        );
        assert!(
            got >= floor,
            "object {obj}: read {got}, but {floor} was acknowledged before the read was sent"
        );
        assert!(
            got < self.next_value[obj],
            "object {obj}: read {got}, never written"
        );
        self.stats.good_reads += 1;
    }

    pub(crate) fn send_op(&mut self, key: u64) {
        // Now and then the client is on an older map: it sends to that
        // map's primary, with that epoch.
        let mut epoch = self.mon.epoch();
        if let Some(e) = self.client_epoch {
            epoch = e;
        } else if !self.scripted && self.rng.chance(STALE_CLIENT_PER_MILLE) {
            epoch = epoch.saturating_sub(1 + self.rng.below(3)).max(1);
        }
        let obj = match self.pending[&key].kind {
            Kind::Write { obj, .. } | Kind::Read { obj, .. } => obj,
        };
        // (Its PG under the map it sends with: after a split, a client
        // on an older map sends to the parent.)
        let at = self.mon.at(epoch).unwrap_or_else(|| self.mon.newest());
        let pg = pg_in(obj, at.acting.len());
        let primary = at.primary[pg];
        let Some(primary) = primary else {
            return;
        };
        let p = &self.pending[&key];
        // A write is one compound op: the value as the data, as an xattr
        // and as an omap entry; a read gets all three back, and they must
        // agree (an op is applied whole or not at all, on every copy).
        let (obj, ops) = match p.kind {
            Kind::Write {
                obj, remove: true, ..
            } => (obj, vec![SubOp::Remove]),
            Kind::Write { obj, value, .. } => {
                let v = value.to_le_bytes().to_vec();
                let xattr = SubOp::SetXattr {
                    name: "v".into(),
                    value: v.clone(),
                };
                let omap = SubOp::OmapSet(vec![(b"v".to_vec().into(), v.clone().into())]);
                // Three shapes with one outcome (the value as data, xattr
                // and omap entry): a full write; truncate + append with the
                // omap cleared first; a partial write cut to size with the
                // key removed first. The last two need the object to exist.
                let shape = if self.exists[obj] {
                    self.rng.index(3)
                } else {
                    0
                };
                let ec = self.ec.is_some();
                // Full writes carry an allocation hint, which every copy
                // and shard keeps (scrub compares them; recovery copies
                // them).
                let hint = SubOp::SetAllocHint {
                    expected_object_size: 4 << 20,
                    expected_write_size: v.len() as u64,
                    flags: loligo_types::ops::alloc_hint::COMPRESSIBLE,
                };
                let ops = match shape {
                    // No omap on EC pools: data and xattr only.
                    // (EC: `ec_data`, whose partial write leaves the
                    // stripes between its ends as they were.)
                    0 if ec => vec![hint, SubOp::WriteFull(self.ec_object(&v).into()), xattr],
                    1 if ec => vec![
                        SubOp::Truncate(0),
                        SubOp::Append(self.ec_object(&v).into()),
                        xattr,
                    ],
                    _ if ec && self.ec_stripes => vec![
                        SubOp::Write {
                            offset: 0,
                            data: v.clone().into(),
                        },
                        SubOp::Write {
                            offset: (EC_DATA_LEN - 8) as u64,
                            data: v.into(),
                        },
                        SubOp::Truncate(EC_DATA_LEN as u64),
                        xattr,
                    ],
                    _ if ec => vec![
                        SubOp::Write {
                            offset: 0,
                            data: v.into(),
                        },
                        SubOp::Truncate(8),
                        xattr,
                    ],
                    0 => vec![hint, SubOp::WriteFull(v.into()), xattr, omap],
                    1 => vec![
                        SubOp::Truncate(0),
                        SubOp::Append(v.into()),
                        xattr,
                        SubOp::OmapClear,
                        omap,
                    ],
                    _ => vec![
                        SubOp::Write {
                            offset: 0,
                            data: v.into(),
                        },
                        SubOp::Truncate(8),
                        xattr,
                        SubOp::OmapRm(vec![b"v".to_vec().into()]),
                        omap,
                    ],
                };
                (obj, ops)
            }
            Kind::Read { obj, .. } => {
                let mut ops = vec![
                    SubOp::Read { offset: 0, len: 0 },
                    SubOp::GetXattr("v".into()),
                ];
                if self.ec.is_none() {
                    ops.push(SubOp::OmapGetKeys(vec![b"v".to_vec().into()]));
                }
                (obj, ops)
            }
        };
        let op = ClientOp {
            pool: POOL,
            name: crate::obj_name(obj),
            epoch,
            ops,
            reqid: Some(p.reqid),
        };
        let req = self.next_req;
        self.next_req += 1;
        self.reqs.insert(req, key);
        if let Some(p) = self.pending.get_mut(&key) {
            p.req = req;
            p.sent_ms = self.now_ms;
        }
        self.send(Ev::Op {
            pg,
            to: primary as usize,
            req,
            op,
        });
    }

    pub(crate) fn client_step(&mut self) {
        // New ops: a write to an idle object, or a read.
        if self.pending.len() < 6 && self.rng.chance(300) {
            let obj = self.rng.index(OBJECTS);
            let kind = if !self.writing[obj] && self.rng.chance(600) {
                let value = self.next_value[obj];
                self.next_value[obj] += 1;
                self.writing[obj] = true;
                let remove = self.exists[obj] && self.rng.chance(REMOVE_PER_MILLE);
                if remove {
                    self.removes[obj].insert(value);
                }
                Kind::Write { obj, value, remove }
            } else {
                Kind::Read {
                    obj,
                    floor: self.acked[obj],
                }
            };
            self.submit(kind);
        }
        self.resend_late();
    }

    /// A new client op with its own request id, sent now.
    pub(crate) fn submit(&mut self, kind: Kind) {
        let key = self.next_client_tid;
        self.next_client_tid += 1;
        let (obj, input) = match kind {
            Kind::Write {
                obj, remove: true, ..
            } => (obj, RegisterIn::Remove),
            Kind::Write { obj, value, .. } => (obj, RegisterIn::Write(value)),
            Kind::Read { obj, .. } => (obj, RegisterIn::Read),
        };
        let hist = self.history.len();
        self.history.push((
            obj,
            lincheck::Op {
                input,
                output: None,
                call: self.now_ms,
                ret: 0,
            },
        ));
        self.pending.insert(
            key,
            Pending {
                kind,
                hist,
                reqid: ReqId {
                    client: 1,
                    tid: key,
                },
                sent_ms: 0,
                req: 0,
            },
        );
        self.send_op(key);
    }

    /// Resend what waited too long (a lost reply, a dead primary).
    pub(crate) fn resend_late(&mut self) {
        let late: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| self.now_ms >= p.sent_ms + CLIENT_RESEND_MS)
            .map(|(k, _)| *k)
            .collect();
        for k in late {
            self.send_op(k);
        }
    }
}
