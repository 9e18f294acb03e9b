//! Structure-aware fuzzing of the RPC bodies an OSD decodes: client
//! requests and every message between OSDs (and their replies), encoded
//! as they travel (a postcard body with bulk payloads beside it), then
//! damaged: bytes flipped, cut, inserted or repeated in the body, and
//! payloads dropped, added, or cut. `decode_wire` must refuse or return a
//! message, never panic, and a message it returns must encode again
//! (nothing half-built). Undamaged messages must round-trip.
//!
//! 500 cases per kind by default; `LOLIGO_FUZZ_CASES=N` for a longer run,
//! `LOLIGO_FUZZ_SEED=S` to start elsewhere.

use bytes::Bytes;
use loligo_pg::msg::{PeerMsg, PeerReply};
use loligo_pg::pg::backfill::{Chunk, Cursor, Filter, Scan};
use loligo_pg::pg::recovery::{AuthLog, ObjectCopy, Push};
use loligo_pg::pg::{Before, GaveUp, LeasesLeft, LogAnswer, LogEntry, PeerInfo, PgInfo, RepCtx};
use loligo_store::{CollectionId, ObjectId, Transaction};
use loligo_testkit::{damage, random_damage, Rng};
use loligo_types::ops::{decode_wire, encode_wire, ClientOp, ClientRequest, ReqId, SubOp, Version};
use loligo_types::PgId;

fn version(r: &mut Rng) -> Version {
    Version {
        epoch: r.below(1 << 20),
        v: r.next_u64(),
    }
}

fn name(r: &mut Rng) -> String {
    match r.below(4) {
        0 => String::new(),
        1 => "o\0bj\u{e9}".repeat(1 + r.index(40)),
        _ => format!("obj{}", r.below(1000)),
    }
}

/// Up to `max` random bytes.
fn some_bytes(r: &mut Rng, max: usize) -> Vec<u8> {
    let n = r.index(max);
    r.bytes(n)
}

fn payload(r: &mut Rng) -> Bytes {
    let n = [0, 1, 100, 4096, 70_000][r.index(5)];
    Bytes::from(r.bytes(n))
}

fn ctx(r: &mut Rng) -> RepCtx {
    RepCtx {
        interval: r.below(100),
        epoch: r.below(100),
        acting: (0..r.index(5)).map(|_| r.below(8) as i32).collect(),
        prev: version(r),
        version: version(r),
        change: None,
    }
}

fn cursor(r: &mut Rng) -> Cursor {
    match r.below(3) {
        0 => Cursor::Start,
        1 => Cursor::End,
        _ => Cursor::At(ObjectId::new(r.next_u64() as u32, name(r))),
    }
}

fn push(r: &mut Rng) -> Push {
    Push {
        name: name(r),
        version: version(r),
        copy: r.chance(700).then(|| ObjectCopy {
            data: payload(r),
            attrs: vec![("_v".into(), r.bytes(9)), (name(r), some_bytes(r, 30))],
            omap_header: some_bytes(r, 10),
            omap: (0..r.index(4)).map(|_| (r.bytes(5), r.bytes(20))).collect(),
        }),
    }
}

fn pg(r: &mut Rng) -> PgId {
    PgId {
        pool: r.below(4),
        ps: r.below(64) as u32,
    }
}

fn peer_msg(r: &mut Rng) -> PeerMsg {
    let (pg, from) = (pg(r), r.below(8) as i32);
    match r.below(10) {
        0 => PeerMsg::Ping {
            from,
            epoch: r.below(100),
        },
        1 => {
            let c = CollectionId::pg(pg.pool, pg.ps);
            let o = ObjectId::new(r.next_u64() as u32, name(r));
            let mut t = Transaction::new();
            t.write_full(c, &o, payload(r).to_vec())
                .setattr(c, &o, "_v", r.bytes(9))
                .set_record(c, b"info", r.bytes(20));
            PeerMsg::RepOp {
                pg,
                from,
                ctx: ctx(r),
                txn: t,
            }
        }
        2 => PeerMsg::Log {
            pg,
            from,
            ctx: ctx(r),
            log: AuthLog {
                info: PgInfo {
                    last_update: version(r),
                    ..Default::default()
                },
                entries: (0..r.index(20))
                    .map(|_| LogEntry {
                        version: version(r),
                        name: name(r),
                        removed: r.chance(300),
                        reqid: r.chance(500).then(|| ReqId {
                            client: r.next_u64(),
                            tid: r.next_u64(),
                        }),
                        gave_up: r.chance(100).then(|| GaveUp::Object(version(r))),
                        before: match r.next_u64() % 3 {
                            0 => Before::Unknown,
                            1 => Before::Absent,
                            _ => Before::At(version(r)),
                        },
                        prev: r.chance(500).then(|| version(r)),
                    })
                    .collect(),
            },
        },
        3 => PeerMsg::Push {
            pg,
            from,
            ctx: ctx(r),
            push: push(r),
        },
        4 => PeerMsg::Scan {
            pg,
            from,
            ctx: ctx(r),
            after: cursor(r),
            upto: cursor(r),
            limit: r.below(1000) as u32,
            filter: match r.below(3) {
                0 => Filter::All,
                1 => Filter::Leaves {
                    leaves: 1 << r.below(17),
                    ranges: vec![0..r.below(100) as u32, 200..200 + r.below(100) as u32],
                },
                _ => Filter::Nodes {
                    leaves: 1 << 14,
                    level: r.below(15) as u32,
                    idx: (0..r.index(50)).map(|_| r.below(1 << 14) as u32).collect(),
                },
            },
        },
        5 => PeerMsg::Chunk {
            pg,
            from,
            ctx: ctx(r),
            chunk: Chunk {
                after: cursor(r),
                end: cursor(r),
                pushes: (0..r.index(6)).map(|_| push(r)).collect(),
                lacks: (0..r.index(4)).map(|_| (name(r), version(r))).collect(),
            },
        },
        6 => PeerMsg::ReadShard {
            pg,
            from,
            epoch: r.below(100),
            name: name(r),
            extents: (0..r.index(5))
                .map(|_| (r.next_u64(), r.next_u64()))
                .collect(),
            version: version(r),
            shard: r.index(12),
        },
        7 => PeerMsg::Pull {
            pg,
            from,
            ctx: ctx(r),
            name: name(r),
            need: version(r),
        },
        8 => PeerMsg::Lease {
            pg,
            from,
            ctx: ctx(r),
            lease_ms: r.next_u64(),
            prior: loligo_pg::pg::LeasesLeft([(r.next_u64() as i32, r.next_u64()); 3]),
        },
        _ => PeerMsg::StrayCheck {
            pg,
            from,
            epoch: r.below(100),
            shard: r.chance(500).then(|| r.below(12) as u8),
        },
    }
}

fn peer_reply(r: &mut Rng) -> PeerReply {
    match r.below(10) {
        0 => PeerReply::Info(r.chance(500).then(|| PeerInfo {
            info: PgInfo {
                last_update: version(r),
                ..Default::default()
            },
            missing: r.next_u64(),
            backfill: r.chance(500),
            moved_shard: r.chance(500).then(|| r.below(256) as u8),
            shard: r.chance(500).then(|| r.below(256) as u8),
            leases: LeasesLeft([
                (r.below(64) as i32 - 1, r.next_u64()),
                (r.below(64) as i32 - 1, r.next_u64()),
                (-1, r.below(10_000)),
            ]),
        })),
        1 => PeerReply::Merged(LogAnswer {
            missing: (0..r.index(5)).map(|_| (name(r), version(r))).collect(),
            backfill: r.chance(500).then(|| cursor(r)),
            never_took: (0..r.index(3)).map(|_| name(r)).collect(),
        }),
        2 => PeerReply::Scanned(Scan {
            objects: (0..r.index(20))
                .map(|_| (ObjectId::new(r.next_u64() as u32, name(r)), version(r)))
                .collect(),
            end: cursor(r),
            nodes: r
                .chance(300)
                .then(|| (0..r.index(100)).map(|_| r.next_u64()).collect()),
        }),
        3 => PeerReply::Pulled(push(r)),
        4 => PeerReply::ShardData((0..r.index(4)).map(|_| payload(r).into()).collect()),
        5 => PeerReply::RepDone(if r.chance(500) { Ok(()) } else { Err(name(r)) }),
        6 => PeerReply::Absent(name(r)),
        7 => PeerReply::NeverTook(name(r)),
        8 => PeerReply::LeaseAck,
        _ => PeerReply::Refused(name(r)),
    }
}

fn client_request(r: &mut Rng) -> ClientRequest {
    if r.chance(100) {
        return ClientRequest::List {
            pool: r.below(4),
            ps: r.below(64) as u32,
            epoch: r.below(100),
            start: r.chance(500).then(|| name(r)),
            limit: r.below(1000) as u32,
        };
    }
    let ops = (0..1 + r.index(4))
        .map(|_| match r.below(7) {
            0 => SubOp::WriteFull(payload(r)),
            1 => SubOp::Write {
                offset: r.next_u64(),
                data: payload(r),
            },
            2 => SubOp::Append(payload(r)),
            3 => SubOp::Truncate(r.next_u64()),
            4 => SubOp::SetXattr {
                name: name(r),
                value: some_bytes(r, 100),
            },
            5 => SubOp::SetAllocHint {
                expected_object_size: r.next_u64(),
                expected_write_size: r.next_u64(),
                flags: r.next_u64() as u32,
            },
            _ => SubOp::Read {
                offset: r.next_u64(),
                len: r.next_u64(),
            },
        })
        .collect();
    ClientRequest::Op(ClientOp {
        pool: r.below(4),
        name: name(r),
        epoch: r.below(100),
        ops,
        reqid: r.chance(500).then(|| ReqId {
            client: r.next_u64(),
            tid: r.next_u64(),
        }),
    })
}

/// Damage a message as it travels: its body, and its payloads.
fn bend(body: Vec<u8>, mut bulk: Vec<Bytes>, r: &mut Rng) -> (Vec<u8>, Vec<Bytes>) {
    let ds = random_damage(r);
    let body = if r.chance(800) {
        damage(body, &ds)
    } else {
        body
    };
    match r.below(5) {
        0 if !bulk.is_empty() => {
            let i = r.index(bulk.len());
            bulk.remove(i);
        }
        1 => bulk.push(payload(r)),
        2 if !bulk.is_empty() => {
            let i = r.index(bulk.len());
            let b = bulk[i].clone();
            bulk[i] = b.slice(..b.len() / 2);
        }
        _ => {}
    }
    (body, bulk)
}

/// Round-trip, then `cases` damaged copies: refused or usable.
fn fuzz<T>(kind: &str, make: impl Fn(&mut Rng) -> T)
where
    T: serde::Serialize + for<'de> serde::Deserialize<'de> + std::fmt::Debug,
{
    let seeds = loligo_testkit::fuzz_seeds(500);
    let cases = seeds.end - seeds.start;
    let (mut accepted, mut refused) = (0u64, 0u64);
    for seed in seeds {
        let mut r = Rng::new(seed);
        let m = make(&mut r);
        let (body, bulk) = encode_wire(&m);
        let back: T = decode_wire(&body, bulk.clone())
            .unwrap_or_else(|e| panic!("{kind} seed {seed}: a valid message is refused: {e:?}"));
        assert_eq!(format!("{back:?}"), format!("{m:?}"), "{kind} seed {seed}");
        let (body, bulk) = bend(body, bulk, &mut r);
        let got = std::panic::catch_unwind(|| match decode_wire::<T>(&body, bulk) {
            Ok(m) => {
                let (b2, k2) = encode_wire(&m);
                decode_wire::<T>(&b2, k2).expect("a decoded message encodes again");
                true
            }
            Err(_) => false,
        });
        match got {
            Ok(true) => accepted += 1,
            Ok(false) => refused += 1,
            Err(_) => panic!(
                "{kind} seed {seed}: a message panicked its decoder \
                 (LOLIGO_FUZZ_SEED={seed} LOLIGO_FUZZ_CASES=1 replays it)"
            ),
        }
    }
    eprintln!("{kind}: {cases} damaged messages, {accepted} decoded, {refused} refused");
    assert!(
        refused > cases / 4,
        "{kind}: damage was refused {refused} times"
    );
}

#[test]
fn damaged_messages_between_osds_are_refused_or_whole() {
    fuzz("PeerMsg", peer_msg);
    fuzz("PeerReply", peer_reply);
}

#[test]
fn damaged_client_requests_are_refused_or_whole() {
    fuzz("ClientRequest", client_request);
}
