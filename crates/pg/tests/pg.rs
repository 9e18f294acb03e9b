//! The PG state machine alone, driven input by input over a MemStore:
//! peering builds the write set from members' infos, a write is
//! acknowledged only after every write-set member has it durable, ops wait
//! below min_size and time out, a primary whose log is behind asks for a
//! pg_temp, a new interval abandons writes in flight, writes wait for the
//! monitors to record the write set, and a copy that cannot reach any
//! member of the recorded write set serves nothing.

use loligo_pg::msg::{PeerMsg, PeerReply};
use loligo_pg::pg::{
    Cursor, Effect, Holds, Input, LogAnswer, PeerInfo, Pg, PgInfo, RepCtx, RepError,
};
use loligo_store::{CollectionId, MemStore, ObjectStore, Transaction};
use loligo_types::ops::{ClientOp, OpError, SubOp, Version};
use loligo_types::{OsdMap, PgId, PgState, Pool, WriteSetRecord};

const PG: PgId = PgId { pool: 1, ps: 0 };

/// The messages `fx` sends: (send id, to, message).
fn sends(fx: &[Effect]) -> Vec<(u64, i32, &PeerMsg)> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Send { id, to, msg } => Some((*id, *to, msg)),
            _ => None,
        })
        .collect()
}

/// The writes `fx` sends replicas: (send id, to, ctx, txn).
fn rep_ops(fx: &[Effect]) -> Vec<(u64, i32, &RepCtx, &Transaction)> {
    sends(fx)
        .into_iter()
        .filter_map(|(id, to, msg)| match msg {
            PeerMsg::RepOp { ctx, txn, .. } => Some((id, to, ctx, txn)),
            _ => None,
        })
        .collect()
}

/// The tid of the write `fx` queues on the local store along with the
/// copies it sends replicas (the `Apply` that follows them).
fn write_tid(fx: &[Effect]) -> u64 {
    let after = fx
        .iter()
        .rposition(|e| {
            matches!(
                e,
                Effect::Send {
                    msg: PeerMsg::RepOp { .. },
                    ..
                }
            )
        })
        .map_or(0, |i| i + 1);
    fx[after..]
        .iter()
        .find_map(|e| match e {
            Effect::Apply { tid, .. } => Some(*tid),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no write queued: {fx:?}"))
}

/// The read lease renewals `fx` sends: (send id, to).
fn lease_renewals(fx: &[Effect]) -> Vec<(u64, i32)> {
    sends(fx)
        .into_iter()
        .filter(|(_, _, msg)| matches!(msg, PeerMsg::Lease { .. }))
        .map(|(id, to, _)| (id, to))
        .collect()
}

/// The answer `reply` to the send `id`.
fn reply(id: u64, reply: PeerReply) -> Input {
    Input::Reply {
        id,
        reply: Ok(reply),
    }
}

/// Send `id` was acknowledged (a write, push or chunk made durable).
fn ack(id: u64) -> Input {
    reply(id, PeerReply::RepDone(Ok(())))
}

/// Send `id` got no answer, or was refused: `e` says why.
fn reply_err(id: u64, e: RepError) -> Input {
    Input::Reply { id, reply: Err(e) }
}

/// Message `msg` from another copy of the PG, to be answered as `token`.
fn peer_msg(msg: PeerMsg, token: u64, now_ms: u64) -> Input {
    Input::Peer { msg, token, now_ms }
}

/// Primary `from`, peering `interval` under map `epoch`, asks for this
/// copy's info (answered as `token`).
fn query(from: i32, interval: u64, epoch: u64, token: u64, now_ms: u64) -> Input {
    let msg = PeerMsg::GetInfo {
        pg: PG,
        from,
        interval,
        epoch,
    };
    peer_msg(msg, token, now_ms)
}

/// The peering query `fx` sends osd `to`: its send id and interval.
fn queried(fx: &[Effect], to: i32) -> (u64, u64) {
    sends(fx)
        .into_iter()
        .find_map(|(id, t, msg)| match msg {
            PeerMsg::GetInfo { interval, .. } if t == to => Some((id, *interval)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("osd.{to} is not asked: {fx:?}"))
}

/// Osd `to` answers the peering query of `interval` that `fx` sent it
/// with `info` (`None`: it has no copy).
fn info_reply(fx: &[Effect], to: i32, interval: u64, info: Option<PeerInfo>) -> Input {
    let (id, asked) = queried(fx, to);
    assert_eq!(asked, interval, "osd.{to} is asked about another interval");
    reply(id, PeerReply::Info(info))
}

/// The answers in `fx` to peer messages: (token, answer).
fn answers(fx: &[Effect]) -> Vec<(u64, &PeerReply)> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Answer { token, reply } => Some((*token, reply)),
            _ => None,
        })
        .collect()
}

/// The answers in `fx` that acknowledge a write, push or chunk, or say
/// why not (any refusal or failure).
fn rep_replies(fx: &[Effect]) -> Vec<(u64, Result<(), RepError>)> {
    answers(fx)
        .into_iter()
        .filter_map(|(token, reply)| {
            let result = match reply.clone().into_result() {
                Ok(PeerReply::RepDone(Ok(()))) => Ok(()),
                Ok(_) => return None,
                Err(e) => Err(e),
            };
            Some((token, result))
        })
        .collect()
}

/// The answers in `fx` to the peering queries taken as `tokens`: the
/// copy's info, or why there is none yet.
fn info_replies(fx: &[Effect], tokens: &[u64]) -> Vec<(u64, Result<Option<PeerInfo>, String>)> {
    answers(fx)
        .into_iter()
        .filter(|(token, _)| tokens.contains(token))
        .map(|(token, reply)| match reply {
            PeerReply::Info(i) => (token, Ok(*i)),
            PeerReply::Refused(e) => (token, Err(e.clone())),
            other => panic!("not an answer to a query: {other:?}"),
        })
        .collect()
}

/// The PGs' pool: of one PG, so that PG owns every object the tests name.
fn pool(min_size: u32) -> Pool {
    OsdMap::new("f", "osd")
        .unwrap()
        .replicated_pool("p", 1, 3, min_size)
}

fn setup() -> (MemStore, Pg) {
    let s = MemStore::new();
    let mut t = Transaction::new();
    t.create_collection(CollectionId::pg(1, 0));
    s.apply(t).unwrap();
    (s, fresh_pg(PG, 0, PgInfo::default()))
}

fn map(epoch: u64, acting: Vec<i32>, min_size: u32) -> Input {
    map_record(epoch, acting, min_size, None, vec![])
}

fn map_record(
    epoch: u64,
    acting: Vec<i32>,
    min_size: u32,
    record: Option<WriteSetRecord>,
    record_up: Vec<i32>,
) -> Input {
    Input::Map {
        epoch,
        primary: acting[0],
        up: acting.clone(),
        acting,
        acting_up_from: 0,
        pool: pool(min_size),
        record,
        record_up,
        toofull: vec![],
        holds: Holds::default(),
        spares: vec![],
        striper: None,
        primary_temp: None,
        unfound_lost: 0,
        now_ms: 0,
    }
}

/// Feed `input`; answer every write-set record it asks for as the
/// monitors would, and grant every recovery slot it asks for as an OSD
/// with slots free would (tests of those call `handle`).
fn run(pg: &mut Pg, s: &dyn ObjectStore, input: Input) -> Vec<Effect> {
    let mut fx = pg.handle(s, input);
    let mut i = 0;
    while i < fx.len() {
        if let Effect::Send {
            id,
            msg: PeerMsg::Lease { .. },
            ..
        } = fx[i]
        {
            // Members grant every read lease at once (the lease's own
            // tests answer them by hand).
            fx.remove(i);
            let more = pg.handle(s, reply(id, PeerReply::LeaseAck));
            fx.extend(more);
            continue;
        }
        let next = match fx[i] {
            Effect::RecordWriteSet(ref a) => Input::WriteSetRecorded {
                interval: a.record.interval,
            },
            Effect::Reserve { ask, .. } => Input::Reserved { ask },
            _ => {
                i += 1;
                continue;
            }
        };
        let more = pg.handle(s, next);
        fx.extend(more);
        i += 1;
    }
    fx
}

fn read(token: u64, name: &str, now_ms: u64) -> Input {
    Input::Op {
        op: ClientOp {
            pool: 1,
            name: name.into(),
            epoch: 1,
            ops: vec![SubOp::Read { offset: 0, len: 0 }],
            reqid: None,
        },
        token,
        now_ms,
    }
}

fn write(token: u64, name: &str, data: &[u8], now_ms: u64) -> Input {
    Input::Op {
        op: ClientOp {
            pool: 1,
            name: name.into(),
            epoch: 1,
            ops: vec![SubOp::WriteFull(data.to_vec().into())],
            reqid: Some(loligo_types::ops::ReqId {
                client: 9,
                tid: token,
            }),
        },
        token,
        now_ms,
    }
}

fn info(v: u64) -> PgInfo {
    PgInfo {
        last_update: Version { epoch: 1, v },
        ..Default::default()
    }
}

/// Perform `Apply` effects on the store; return the rest.
/// Apply `fx`'s transactions and tell `pg` each is durable; the other
/// effects of `fx`.
fn land(pg: &mut Pg, s: &dyn ObjectStore, fx: Vec<Effect>) -> Vec<Effect> {
    let (applied, rest) = apply(s, fx);
    for tid in applied {
        run(
            pg,
            s,
            Input::LocalDone {
                tid,
                result: Ok(()),
            },
        );
    }
    rest
}

fn apply(s: &dyn ObjectStore, fx: Vec<Effect>) -> (Vec<u64>, Vec<Effect>) {
    let mut applied = Vec::new();
    let mut rest = Vec::new();
    for e in fx {
        match e {
            Effect::Apply { tid, txn, .. } => {
                s.apply(txn).unwrap();
                applied.push(tid);
            }
            e => rest.push(e),
        }
    }
    (applied, rest)
}

#[test]
fn write_waits_for_every_member_of_the_write_set() {
    let (s, mut pg) = setup();
    let asked = run(&mut pg, &s, map(1, vec![0, 1, 2], 2));
    let queried: Vec<i32> = sends(&asked)
        .into_iter()
        .filter_map(|(_, to, msg)| match msg {
            PeerMsg::GetInfo { .. } => Some(to),
            _ => None,
        })
        .collect();
    assert_eq!(queried, vec![1, 2]);
    // An op before peering finishes waits.
    assert!(run(&mut pg, &s, write(1, "a", b"x", 0)).is_empty());
    let default = Some(PgInfo::default().into());
    run(&mut pg, &s, info_reply(&asked, 1, 1, default));
    let fx = run(&mut pg, &s, info_reply(&asked, 2, 1, None));
    // Activation record, then the queued write: replicated to 1 and 2.
    let tid = write_tid(&fx);
    let (applied, rest) = apply(&s, fx);
    assert_eq!(applied.len(), 2);
    assert_eq!(applied[1], tid);
    let reps: Vec<(u64, i32)> = rep_ops(&rest)
        .into_iter()
        .map(|(id, to, ..)| (id, to))
        .collect();
    assert_eq!(reps.iter().map(|r| r.1).collect::<Vec<_>>(), vec![1, 2]);
    assert!(!rest.iter().any(|e| matches!(e, Effect::Reply { .. })));
    // Local commit and one replica: still no reply.
    assert!(run(
        &mut pg,
        &s,
        Input::LocalDone {
            tid,
            result: Ok(())
        }
    )
    .is_empty());
    assert!(run(&mut pg, &s, ack(reps[0].0)).is_empty());
    let fx = run(&mut pg, &s, ack(reps[1].0));
    match &fx[..] {
        [Effect::Reply { token: 1, reply }] => {
            assert!(reply.result.is_ok());
            assert_eq!(reply.version, Version { epoch: 1, v: 1 });
        }
        other => panic!("{other:?}"),
    }
    assert!(pg.idle());
    let st = pg.stat().unwrap();
    assert_eq!(st.state.to_string(), "active+clean");
    assert_eq!(st.objects, 1);
}

#[test]
fn members_that_need_a_backfill_do_not_count_toward_min_size() {
    let (s, mut pg) = setup();
    // Write something so this primary's log is ahead of member 2's (and
    // holds no entries: member 2's head is below its tail).
    let mut t = Transaction::new();
    t.set_record(CollectionId::pg(1, 0), b"info", stored(&info(5)));
    s.apply(t).unwrap();
    let asked = run(&mut pg, &s, map(1, vec![0, 1, 2], 3));
    run(&mut pg, &s, info_reply(&asked, 1, 1, Some(info(5).into())));
    let fx = run(&mut pg, &s, info_reply(&asked, 2, 1, Some(info(3).into())));
    assert!(!fx.iter().any(|e| matches!(e, Effect::RequestPgTemp { .. })));
    // The stale member gets the authoritative log; its answer says the
    // logs do not overlap, so it is backfilled from the start.
    let id = fx
        .iter()
        .find_map(|e| match e {
            Effect::Send {
                id,
                to: 2,
                msg: PeerMsg::Log { .. },
            } => Some(*id),
            _ => None,
        })
        .expect("the log goes to member 2");
    let answer = LogAnswer {
        missing: vec![],
        backfill: Some(Cursor::Start),
        never_took: vec![],
    };
    let mut fx = run(&mut pg, &s, reply(id, PeerReply::Merged(answer)));
    fx.extend(run(&mut pg, &s, Input::WriteSetRecorded { interval: 1 }));
    assert!(
        fx.iter().any(|e| matches!(
            e,
            Effect::Send {
                to: 2,
                msg: PeerMsg::Scan {
                    after: Cursor::Start,
                    ..
                },
                ..
            }
        )),
        "{fx:?}"
    );
    let st = pg.stat().unwrap();
    assert!(
        st.state.contains(PgState::PEERED),
        "2 of min_size 3: {}",
        st.state
    );
    assert!(st.state.contains(PgState::BACKFILLING), "{}", st.state);
    assert!(st.state.contains(PgState::DEGRADED), "{}", st.state);
    // Writes wait, then time out with a typed error.
    assert!(run(&mut pg, &s, write(7, "a", b"x", 1000)).is_empty());
    assert!(run(&mut pg, &s, Input::Tick { now_ms: 2000 }).is_empty());
    let now_ms = 1000 + pg.op_timeout_ms;
    let fx = run(&mut pg, &s, Input::Tick { now_ms });
    match &fx[..] {
        [Effect::Reply { token: 7, reply }] => assert!(matches!(
            reply.result,
            Err(OpError::Unavailable {
                have: 2,
                need: 3,
                ..
            })
        )),
        other => panic!("{other:?}"),
    }
}

/// Peer PG 1.0 (head 5) with member 1 complete and member 2 at 3, and
/// member 2 answer that it needs a backfill (`first` is the first map,
/// e.g. one that shows member 2 too full): the effects of that answer.
fn backfill_member_2(s: &MemStore, pg: &mut Pg, first: Input) -> Vec<Effect> {
    let mut t = Transaction::new();
    t.set_record(CollectionId::pg(1, 0), b"info", stored(&info(5)));
    s.apply(t).unwrap();
    // The first map loads (or rebuilds and persists) the Merkle tree.
    let (tids, asked) = apply(s, run(pg, s, first));
    for tid in tids {
        pg.handle(
            s,
            Input::LocalDone {
                tid,
                result: Ok(()),
            },
        );
    }
    run(pg, s, info_reply(&asked, 1, 1, Some(info(5).into())));
    let fx = run(pg, s, info_reply(&asked, 2, 1, Some(info(3).into())));
    let id = fx
        .iter()
        .find_map(|e| match e {
            Effect::Send {
                id,
                to: 2,
                msg: PeerMsg::Log { .. },
            } => Some(*id),
            _ => None,
        })
        .expect("the log goes to member 2");
    let answer = LogAnswer {
        missing: vec![],
        backfill: Some(Cursor::Start),
        never_took: vec![],
    };
    pg.handle(s, reply(id, PeerReply::Merged(answer)))
}

#[test]
fn backfill_waits_for_a_recovery_slot_and_gives_it_back_when_done() {
    let (s, mut pg) = setup();
    // Member 2 needs a backfill: the PG asks its OSD for a slot and
    // copies nothing until it has one.
    let fx = backfill_member_2(&s, &mut pg, map(1, vec![0, 1, 2], 2));
    let (ask, priority) = fx
        .iter()
        .find_map(|e| match e {
            Effect::Reserve { ask, priority } => Some((*ask, *priority)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no slot asked for: {fx:?}"));
    // The write set still holds two full copies of a size-3 pool: one
    // short, which outranks a PG whose copies are only misplaced.
    assert!(priority >= 1 << 40, "{priority}");
    assert!(!fx.iter().any(|e| matches!(
        e,
        Effect::Send {
            msg: PeerMsg::Scan { .. },
            ..
        }
    )));
    let st = pg.stat().unwrap();
    assert!(st.state.contains(PgState::BACKFILL_WAIT), "{}", st.state);
    // A grant of some other ask is given back, not used.
    let fx = pg.handle(&s, Input::Reserved { ask: ask + 100 });
    assert!(
        matches!(&fx[..], [Effect::Release { ask: a }] if *a == ask + 100),
        "{fx:?}"
    );
    // Granted: the backfill starts.
    let fx = pg.handle(&s, Input::Reserved { ask });
    let scan = fx
        .iter()
        .find_map(|e| match e {
            Effect::Send {
                id,
                to: 2,
                msg: PeerMsg::Scan { .. },
            } => Some(*id),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no scan once granted: {fx:?}"));
    assert!(pg.stat().unwrap().state.contains(PgState::BACKFILLING));
    // First the trees; a member that keeps none is scanned whole.
    let fx = pg.handle(
        &s,
        reply(
            scan,
            PeerReply::Scanned(loligo_pg::pg::Scan {
                objects: vec![],
                end: Cursor::Start,
                nodes: None,
            }),
        ),
    );
    let scan = fx
        .iter()
        .find_map(|e| match e {
            Effect::Send {
                id,
                to: 2,
                msg:
                    PeerMsg::Scan {
                        filter: loligo_pg::pg::Filter::All,
                        ..
                    },
            } => Some(*id),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no full scan without a tree: {fx:?}"));
    // The member holds nothing; the primary nothing either: one chunk to
    // the end, and once it is durable the slot goes back.
    let fx = pg.handle(
        &s,
        reply(
            scan,
            PeerReply::Scanned(loligo_pg::pg::Scan {
                objects: vec![],
                end: Cursor::End,
                nodes: None,
            }),
        ),
    );
    let chunk = fx
        .iter()
        .find_map(|e| match e {
            Effect::Send {
                id,
                to: 2,
                msg: PeerMsg::Chunk { .. },
            } => Some(*id),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no chunk: {fx:?}"));
    assert!(!fx.iter().any(|e| matches!(e, Effect::Release { .. })));
    let fx = pg.handle(&s, ack(chunk));
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Release { ask: a } if *a == ask)),
        "{fx:?}"
    );
}

/// Map `epoch` of PG 1.0 on OSDs 0, 1, 2 with `toofull` too full to
/// backfill onto.
fn map_toofull(epoch: u64, toofull: Vec<i32>) -> Input {
    map_holding(epoch, toofull, Holds::default())
}

/// [`map_toofull`] with the flags' `holds`.
fn map_holding(epoch: u64, toofull: Vec<i32>, holds: Holds) -> Input {
    Input::Map {
        epoch,
        primary: 0,
        up: vec![0, 1, 2],
        acting: vec![0, 1, 2],
        acting_up_from: 0,
        pool: pool(2),
        record: None,
        record_up: vec![],
        toofull,
        holds,
        spares: vec![],
        striper: None,
        primary_temp: None,
        unfound_lost: 0,
        now_ms: 0,
    }
}

#[test]
fn a_backfill_onto_a_too_full_member_waits_for_room_without_a_slot() {
    let (s, mut pg) = setup();
    let fx = backfill_member_2(&s, &mut pg, map_toofull(1, vec![2]));
    // Member 2 is too full: nothing is copied, and no recovery slot is
    // held for it (other PGs may use it).
    assert!(
        !fx.iter().any(|e| matches!(
            e,
            Effect::Reserve { .. }
                | Effect::Send {
                    msg: PeerMsg::Scan { .. },
                    ..
                }
        )),
        "{fx:?}"
    );
    let fx = pg.handle(&s, Input::Tick { now_ms: 10_000 });
    assert!(
        !fx.iter().any(|e| matches!(
            e,
            Effect::Reserve { .. }
                | Effect::Send {
                    msg: PeerMsg::Scan { .. },
                    ..
                }
        )),
        "{fx:?}"
    );
    let st = pg.stat().unwrap().state;
    assert!(st.contains(PgState::BACKFILL_TOOFULL), "{st}");
    assert!(!st.contains(PgState::BACKFILLING), "{st}");
    assert!(!st.contains(PgState::BACKFILL_WAIT), "{st}");
    assert!(!pg.is_clean());
    // Room again (same interval): the backfill asks for a slot and, once
    // granted, starts.
    run(&mut pg, &s, map_toofull(2, vec![]));
    let fx = pg.handle(&s, Input::Tick { now_ms: 20_000 });
    let ask = slot_asked(&fx);
    let fx = pg.handle(&s, Input::Reserved { ask });
    assert!(
        fx.iter().any(|e| matches!(
            e,
            Effect::Send {
                to: 2,
                msg: PeerMsg::Scan { .. },
                ..
            }
        )),
        "{fx:?}"
    );
    let st = pg.stat().unwrap().state;
    assert!(!st.contains(PgState::BACKFILL_TOOFULL), "{st}");
}

/// The recovery slot `fx` asks for.
fn slot_asked(fx: &[Effect]) -> u64 {
    fx.iter()
        .find_map(|e| match e {
            Effect::Reserve { ask, .. } => Some(*ask),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no slot asked for: {fx:?}"))
}

/// Whether `fx` asks for a recovery slot or scans a member.
fn copies(fx: &[Effect]) -> bool {
    fx.iter().any(|e| {
        matches!(
            e,
            Effect::Reserve { .. }
                | Effect::Send {
                    msg: PeerMsg::Scan { .. },
                    ..
                }
        )
    })
}

/// `nobackfill` holds a backfill back in `backfill_wait` with no slot
/// asked for; `norebalance` does not hold this one (it lacks a copy:
/// degraded, not only misplaced); cleared, the backfill asks for a slot
/// and starts.
#[test]
fn nobackfill_holds_a_backfill_and_norebalance_not_a_degraded_one() {
    let (s, mut pg) = setup();
    let nobackfill = Holds {
        backfill: true,
        ..Holds::default()
    };
    let fx = backfill_member_2(&s, &mut pg, map_holding(1, vec![], nobackfill));
    assert!(!copies(&fx), "{fx:?}");
    let fx = pg.handle(&s, Input::Tick { now_ms: 10_000 });
    assert!(!copies(&fx), "{fx:?}");
    let st = pg.stat().unwrap().state;
    assert!(st.contains(PgState::BACKFILL_WAIT), "{st}");
    assert!(!st.contains(PgState::BACKFILLING), "{st}");
    assert!(!st.contains(PgState::BACKFILL_TOOFULL), "{st}");
    // norebalance instead: this PG lacks a copy, so it backfills.
    let norebalance = Holds {
        rebalance: true,
        ..Holds::default()
    };
    run(&mut pg, &s, map_holding(2, vec![], norebalance));
    let fx = pg.handle(&s, Input::Tick { now_ms: 20_000 });
    let ask = slot_asked(&fx);
    let fx = pg.handle(&s, Input::Reserved { ask });
    assert!(copies(&fx), "no scan once granted: {fx:?}");
    assert!(pg.stat().unwrap().state.contains(PgState::BACKFILLING));
}

/// A primary that is behind first asks complete member `from` for its
/// log (`fx`); the member refuses: the effects of handing over.
fn pull_refused(pg: &mut Pg, s: &MemStore, fx: Vec<Effect>, from: i32) -> Vec<Effect> {
    let id = match &fx[..] {
        [Effect::Send {
            id,
            to,
            msg: PeerMsg::GetLog { .. },
        }] if *to == from => *id,
        other => panic!("no log asked of osd.{from}: {other:?}"),
    };
    pg.handle(s, reply_err(id, RepError::Failed("refused".into())))
}

#[test]
fn a_primary_that_is_behind_asks_for_pg_temp() {
    let (s, mut pg) = setup();
    let asked = run(&mut pg, &s, map(1, vec![0, 1, 2], 2));
    run(&mut pg, &s, info_reply(&asked, 1, 1, Some(info(9).into())));
    let fx = run(&mut pg, &s, info_reply(&asked, 2, 1, Some(info(9).into())));
    match &pull_refused(&mut pg, &s, fx, 1)[..] {
        [Effect::RequestPgTemp { osds }] => assert_eq!(osds, &vec![1, 2, 0]),
        other => panic!("{other:?}"),
    }
    // Ops wait rather than being served from a stale copy.
    assert!(run(&mut pg, &s, write(1, "a", b"x", 0)).is_empty());
}

#[test]
fn a_new_interval_abandons_writes_in_flight_and_refusals_are_retryable() {
    let (s, mut pg) = setup();
    let asked = run(&mut pg, &s, map(1, vec![0, 1], 1));
    let fx = run(&mut pg, &s, info_reply(&asked, 1, 1, None));
    apply(&s, fx);
    let fx = run(&mut pg, &s, write(1, "a", b"x", 0));
    let tid = write_tid(&fx);
    let (_, rest) = apply(&s, fx);
    let id = match &rest[..] {
        [Effect::Send {
            id,
            msg: PeerMsg::RepOp { .. },
            ..
        }] => *id,
        other => panic!("{other:?}"),
    };
    // A replica in a newer interval refuses: the client must retry.
    run(
        &mut pg,
        &s,
        Input::LocalDone {
            tid,
            result: Ok(()),
        },
    );
    let fx = run(
        &mut pg,
        &s,
        reply_err(id, RepError::Stale("newer interval".into())),
    );
    match &fx[..] {
        [Effect::Reply { reply, .. }] => {
            assert!(matches!(reply.result, Err(OpError::WrongPrimary { .. })))
        }
        other => panic!("{other:?}"),
    }
    // A write in flight when the acting set changes is answered at once.
    let (_, rest) = apply(&s, run(&mut pg, &s, write(2, "b", b"y", 0)));
    assert_eq!(rest.len(), 1);
    let fx = run(&mut pg, &s, map(2, vec![1, 0], 1));
    assert!(fx.iter().any(|e| matches!(e, Effect::Reply { token: 2, reply } if matches!(reply.result, Err(OpError::WrongPrimary { .. })))));
    assert!(!pg.is_primary());
}

/// Write `data` to `name` on a primary whose only member is osd.1, and
/// see it acknowledged.
fn write_acked(pg: &mut Pg, s: &MemStore, token: u64, name: &str, data: &[u8]) {
    let fx = run(pg, s, write(token, name, data, 0));
    let tid = write_tid(&fx);
    let (_, rest) = apply(s, fx);
    let id = rep_ops(&rest)[0].0;
    run(
        pg,
        s,
        Input::LocalDone {
            tid,
            result: Ok(()),
        },
    );
    let fx = run(pg, s, ack(id));
    assert!(
        matches!(&fx[..], [Effect::Reply { token: t, reply }] if *t == token && reply.result.is_ok()),
        "{fx:?}"
    );
}

/// The read `fx` hands aside: its tid and job.
fn read_aside(fx: Vec<Effect>) -> (u64, loligo_pg::pg::ReadJob) {
    match <[Effect; 1]>::try_from(fx) {
        Ok([Effect::Read { tid, job }]) => (tid, job),
        other => panic!("no read handed aside: {other:?}"),
    }
}

/// Read `tid` ends: `job` runs against `s` now, and `pg` takes its result.
fn read_done(pg: &mut Pg, s: &MemStore, tid: u64, job: &loligo_pg::pg::ReadJob) -> Vec<Effect> {
    let result = job.run(s);
    run(pg, s, Input::ReadDone { tid, result })
}

/// The data of the answer `fx` gives op `token`.
fn data_of(fx: &[Effect], token: u64) -> Vec<u8> {
    let reply = fx
        .iter()
        .find_map(|e| match e {
            Effect::Reply { token: t, reply } if *t == token => Some(reply),
            _ => None,
        })
        .unwrap_or_else(|| panic!("op {token} is not answered: {fx:?}"));
    match reply.result.as_deref() {
        Ok([loligo_types::ops::SubResult::Data(d)]) => d.to_vec(),
        other => panic!("op {token}: {other:?}"),
    }
}

/// A primary serving with osd.1 as its only member, which reads objects
/// of at least `read_aside_min` bytes beside its task.
fn serving(read_aside_min: u64) -> (MemStore, Pg) {
    let (s, mut pg) = setup();
    pg.read_aside_min = read_aside_min;
    let asked = run(&mut pg, &s, map(1, vec![0, 1], 1));
    apply(&s, run(&mut pg, &s, info_reply(&asked, 1, 1, None)));
    (s, pg)
}

#[test]
fn reads_beside_the_task_run_at_once_hold_writes_back_and_end_with_the_interval() {
    let (s, mut pg) = serving(2);
    write_acked(&mut pg, &s, 1, "a", b"one");
    write_acked(&mut pg, &s, 2, "c", b"see");
    write_acked(&mut pg, &s, 3, "tiny", b"t");
    // Two objects' reads are in flight at once; a read of an object
    // under the bound is answered here and now.
    let (tid_a, job_a) = read_aside(run(&mut pg, &s, read(10, "a", 0)));
    let (tid_c, job_c) = read_aside(run(&mut pg, &s, read(11, "c", 0)));
    assert_eq!(data_of(&run(&mut pg, &s, read(12, "tiny", 0)), 12), b"t");
    // A write to an object being read waits for the read; so does a
    // second read of it.
    assert!(run(&mut pg, &s, write(13, "a", b"two", 0)).is_empty());
    assert!(run(&mut pg, &s, read(14, "a", 0)).is_empty());
    assert!(!pg.idle());
    // The reads end in any order; the one of `a` lets the write go.
    let fx = read_done(&mut pg, &s, tid_c, &job_c);
    assert_eq!(data_of(&fx, 11), b"see");
    let fx = read_done(&mut pg, &s, tid_a, &job_a);
    assert_eq!(data_of(&fx, 10), b"one");
    let tid = write_tid(&fx);
    let (_, rest) = apply(&s, fx);
    let id = rep_ops(&rest)[0].0;
    run(
        &mut pg,
        &s,
        Input::LocalDone {
            tid,
            result: Ok(()),
        },
    );
    let fx = run(&mut pg, &s, ack(id));
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Reply { token: 13, .. })),
        "{fx:?}"
    );
    // (The second read queued behind the write, and reads what it wrote.)
    let (tid, job) = read_aside(
        fx.into_iter()
            .filter(|e| matches!(e, Effect::Read { .. }))
            .collect(),
    );
    let fx = read_done(&mut pg, &s, tid, &job);
    assert_eq!(data_of(&fx, 14), b"two");
    assert!(pg.idle());
    // A read in flight when the interval ends is answered with a retry
    // then, and what it read later is dropped.
    let (tid, job) = read_aside(run(&mut pg, &s, read(15, "a", 0)));
    let fx = run(&mut pg, &s, map(2, vec![1, 0], 1));
    assert!(
        fx.iter().any(|e| matches!(e, Effect::Reply { token: 15, reply } if matches!(reply.result, Err(OpError::WrongPrimary { .. })))),
        "{fx:?}"
    );
    let fx = read_done(&mut pg, &s, tid, &job);
    assert!(fx.is_empty(), "{fx:?}");
    assert!(pg.idle());
}

#[test]
fn a_pg_reads_so_many_objects_beside_its_task_and_the_rest_in_it() {
    let (s, mut pg) = serving(0);
    let max = loligo_pg::pg::READS_ASIDE_MAX as u64;
    for i in 0..=max {
        write_acked(&mut pg, &s, i + 1, &format!("o{i}"), b"x");
    }
    let mut aside = Vec::new();
    for i in 0..max {
        aside.push(read_aside(run(
            &mut pg,
            &s,
            read(100 + i, &format!("o{i}"), 0),
        )));
    }
    // One more is read in the task: answered at once.
    let fx = run(&mut pg, &s, read(100 + max, &format!("o{max}"), 0));
    assert_eq!(data_of(&fx, 100 + max), b"x");
    for (i, (tid, job)) in aside.into_iter().enumerate() {
        let fx = read_done(&mut pg, &s, tid, &job);
        assert_eq!(data_of(&fx, 100 + i as u64), b"x");
    }
    assert!(pg.idle());
}

fn stored(i: &PgInfo) -> Vec<u8> {
    loligo_pg::pg::record::encode_info(i)
}

#[test]
fn a_retried_write_is_answered_from_the_log_not_applied_twice() {
    let (s, mut pg) = setup();
    run(&mut pg, &s, map(1, vec![0], 1));
    let append = |token| Input::Op {
        op: ClientOp {
            pool: 1,
            name: "log".into(),
            epoch: 1,
            ops: vec![SubOp::Append(b"x".to_vec().into())],
            reqid: Some(loligo_types::ops::ReqId { client: 5, tid: 1 }),
        },
        token,
        now_ms: 0,
    };
    let (applied, _) = apply(&s, run(&mut pg, &s, append(1)));
    let tid = applied[0];
    run(
        &mut pg,
        &s,
        Input::LocalDone {
            tid,
            result: Ok(()),
        },
    );
    // The same request again (its reply was lost): same version, no second append.
    let fx = run(&mut pg, &s, append(2));
    match &fx[..] {
        [Effect::Reply { token: 2, reply }] => {
            assert!(reply.result.is_ok());
            assert_eq!(reply.version, Version { epoch: 1, v: 1 });
        }
        other => panic!("{other:?}"),
    }
    // A new primary (new interval, same store) still knows it.
    let mut pg2 = fresh_pg(PG, 0, PgInfo::default());
    run(&mut pg2, &s, map(2, vec![0], 1));
    let fx = run(&mut pg2, &s, append(3));
    assert!(
        matches!(&fx[..], [Effect::Reply { token: 3, .. }]),
        "{fx:?}"
    );
    let oid = loligo_store::ObjectId::new(loligo_crush::hash::str_hash_rjenkins(b"log"), "log");
    assert_eq!(
        s.read(CollectionId::pg(1, 0), &oid, &[(0, 10)]).unwrap()[0],
        b"x"
    );
}

/// A log may hold more entries than `log_entries_max` (a merged run is
/// read up to 64 entries past it): a new primary's request-id index must
/// hold the newest, whose replies are the likeliest to have been lost.
#[test]
fn a_new_primary_knows_the_newest_writes_of_a_log_longer_than_its_bound() {
    let (s, mut pg) = setup();
    pg.log_entries_max = 10;
    run(&mut pg, &s, map(1, vec![0], 1));
    let append = |token, tid| Input::Op {
        op: ClientOp {
            pool: 1,
            name: "log".into(),
            epoch: 1,
            ops: vec![SubOp::Append(b"x".to_vec().into())],
            reqid: Some(loligo_types::ops::ReqId { client: 5, tid }),
        },
        token,
        now_ms: 0,
    };
    for tid in 1..=6 {
        let fx = run(&mut pg, &s, append(tid, tid));
        land(&mut pg, &s, fx);
    }
    // A new primary that keeps three entries, over a log of six: the
    // newest write's retry is answered from the log, not applied again.
    let mut pg2 = fresh_pg(PG, 0, PgInfo::default());
    pg2.log_entries_max = 3;
    run(&mut pg2, &s, map(2, vec![0], 1));
    let fx = run(&mut pg2, &s, append(100, 6));
    match &fx[..] {
        [Effect::Reply { token: 100, reply }] => {
            assert!(reply.result.is_ok(), "{reply:?}");
            assert_eq!(reply.version, Version { epoch: 1, v: 6 });
        }
        other => panic!("the retry was not answered from the log: {other:?}"),
    }
    let oid = loligo_store::ObjectId::new(loligo_crush::hash::str_hash_rjenkins(b"log"), "log");
    assert_eq!(
        s.read(CollectionId::pg(1, 0), &oid, &[(0, 100)]).unwrap()[0],
        b"xxxxxx"
    );
}

#[test]
fn writes_wait_until_the_monitors_record_the_write_set() {
    let (s, mut pg) = setup();
    let asked = pg.handle(&s, map(1, vec![0, 1, 2], 2));
    pg.handle(&s, info_reply(&asked, 1, 1, None));
    let fx = pg.handle(&s, info_reply(&asked, 2, 1, None));
    let leases = lease_renewals(&fx);
    assert_eq!(leases.iter().map(|l| l.1).collect::<Vec<_>>(), vec![1, 2]);
    match &fx[..] {
        // The ask says what the primary saw of its interval: the map
        // epoch it had, and the interval's acting set and primary.
        [_, _, Effect::RecordWriteSet(a)] => {
            assert_eq!(
                a.record,
                WriteSetRecord {
                    interval: 1,
                    osds: vec![0, 1, 2]
                }
            );
            assert_eq!(
                (a.as_of, a.acting.clone(), a.primary),
                (1, vec![0, 1, 2], 0)
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(pg.stat().unwrap().state.to_string(), "activating");
    // Ops wait: writes for the record, reads as well (as in Ceph,
    // nothing is served while activating).
    assert!(pg.handle(&s, write(1, "a", b"x", 0)).is_empty());
    assert!(pg.handle(&s, read(2, "b", 0)).is_empty());
    assert!(pg
        .handle(&s, reply(leases[0].0, PeerReply::LeaseAck))
        .is_empty());
    assert!(pg
        .handle(&s, reply(leases[1].0, PeerReply::LeaseAck))
        .is_empty());
    // A record for another interval changes nothing.
    assert!(pg
        .handle(&s, Input::WriteSetRecorded { interval: 7 })
        .is_empty());
    // The record: the read is served, and the write goes to the members.
    let fx = pg.handle(&s, Input::WriteSetRecorded { interval: 1 });
    assert_eq!(replies_to(&fx, 2), vec![Err(OpError::NotFound)]);
    let reps = rep_ops(&fx).len();
    assert_eq!(reps, 2, "{fx:?}");
    assert_eq!(pg.stat().unwrap().state.to_string(), "active+clean");
}

#[test]
fn the_record_arriving_with_the_map_also_activates() {
    let (s, mut pg) = setup();
    pg.handle(&s, map(1, vec![0], 1));
    // (One member of three: undersized while it activates too.)
    assert_eq!(
        pg.stat().unwrap().state.to_string(),
        "activating+undersized+degraded"
    );
    let record = WriteSetRecord {
        interval: 1,
        osds: vec![0],
    };
    pg.handle(&s, map_record(2, vec![0], 1, Some(record), vec![0]));
    assert_eq!(
        pg.stat().unwrap().state.to_string(),
        "active+undersized+degraded"
    );
}

/// The monitors' reply that a record holds and the maps travel apart: a
/// map from before the record's commit can come after the reply. Within
/// the interval it must not take the PG's record back (peering against
/// the older one rolled back an acknowledged write: EC sim seed 71596);
/// a newer record, or a new interval, does replace it.
#[test]
fn a_map_from_before_the_record_does_not_take_it_back() {
    let (s, mut pg) = setup();
    let fx = run(&mut pg, &s, map(3, vec![0], 1));
    assert!(
        fx.iter().any(|e| matches!(e, Effect::RecordWriteSet(_))),
        "{fx:?}"
    );
    assert_eq!(pg.view().record_interval, 3);
    assert_eq!(
        pg.stat().unwrap().state.to_string(),
        "active+undersized+degraded"
    );
    // Epoch 4 left the monitors before the record (of epoch 5): it
    // shows none, or the record of an earlier interval.
    let older = WriteSetRecord {
        interval: 1,
        osds: vec![0, 1, 2],
    };
    pg.handle(&s, map_record(4, vec![0], 1, Some(older), vec![0]));
    assert_eq!(pg.view().record_interval, 3, "an older record");
    pg.handle(&s, map_record(5, vec![0], 1, None, vec![]));
    assert_eq!(pg.view().record_interval, 3, "no record");
    assert_eq!(
        pg.stat().unwrap().state.to_string(),
        "active+undersized+degraded"
    );
    // A new interval takes the map's record as it is.
    run(&mut pg, &s, map_record(6, vec![0, 1], 1, None, vec![]));
    assert_eq!(pg.view().interval, 6);
    assert_ne!(pg.view().record_interval, 3);
}

#[test]
fn a_copy_that_missed_writes_serves_nothing_while_the_write_set_is_down() {
    // osd.2 was down while osds 0 and 1 took writes; now it is alone.
    let s = MemStore::new();
    let mut t = Transaction::new();
    t.create_collection(CollectionId::pg(1, 0));
    t.set_record(CollectionId::pg(1, 0), b"info", stored(&info(3)));
    s.apply(t).unwrap();
    let mut pg = fresh_pg(PG, 2, info(3));
    let record = WriteSetRecord {
        interval: 4,
        osds: vec![0, 1],
    };
    let fx = pg.handle(&s, map_record(5, vec![2], 2, Some(record.clone()), vec![]));
    assert!(fx.is_empty(), "{fx:?}");
    assert_eq!(pg.stat().unwrap().state.to_string(), "down");
    // Reads wait too, then fail naming the OSDs that are needed.
    assert!(pg.handle(&s, read(1, "a", 0)).is_empty());
    let timeout_ms = pg.op_timeout_ms;
    let fx = pg.handle(&s, Input::Tick { now_ms: timeout_ms });
    match &fx[..] {
        [Effect::Reply { token: 1, reply }] => assert_eq!(
            reply.result,
            Err(OpError::Down {
                pg: PG.to_string(),
                osds: vec![0, 1]
            })
        ),
        other => panic!("{other:?}"),
    }
    // osd.1 comes back up (not in the acting set): it is asked, and its
    // newer log makes this copy hand the PG over.
    let fx = pg.handle(&s, map_record(6, vec![2], 2, Some(record), vec![1]));
    assert!(
        matches!(
            &fx[..],
            [Effect::Send {
                to: 1,
                msg: PeerMsg::GetInfo { interval: 5, .. },
                ..
            }]
        ),
        "{fx:?}"
    );
    let fx = pg.handle(&s, info_reply(&fx, 1, 5, Some(info(8).into())));
    match &pull_refused(&mut pg, &s, fx, 1)[..] {
        [Effect::RequestPgTemp { osds }] => assert_eq!(osds, &vec![1, 2]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_write_set_member_without_a_copy_does_not_count() {
    let (s, mut pg) = setup();
    let record = WriteSetRecord {
        interval: 3,
        osds: vec![1],
    };
    let asked = pg.handle(&s, map_record(4, vec![0, 2], 1, Some(record), vec![1]));
    let default = Some(PgInfo::default().into());
    pg.handle(&s, info_reply(&asked, 2, 4, default));
    // osd.1 answers but has no copy (a replaced disk): still down.
    let fx = pg.handle(&s, info_reply(&asked, 1, 4, None));
    assert!(fx.is_empty(), "{fx:?}");
    assert_eq!(pg.stat().unwrap().state.to_string(), "down");
}

#[test]
fn a_newer_looking_log_outside_the_write_set_does_not_win() {
    // osd.0 holds (9, 6) from a primary whose write was never
    // acknowledged; the recorded write set [1, 2] holds (6, 6), which was.
    let s = MemStore::new();
    let mut t = Transaction::new();
    t.create_collection(CollectionId::pg(1, 0));
    let divergent = PgInfo {
        last_update: Version { epoch: 9, v: 6 },
        ..Default::default()
    };
    t.set_record(CollectionId::pg(1, 0), b"info", stored(&divergent));
    s.apply(t).unwrap();
    let mut pg = fresh_pg(PG, 0, divergent);
    let record = WriteSetRecord {
        interval: 10,
        osds: vec![1, 2],
    };
    let asked = pg.handle(
        &s,
        map_record(11, vec![0, 1, 2], 2, Some(record), vec![1, 2]),
    );
    let acked = PgInfo {
        last_update: Version { epoch: 6, v: 6 },
        ..Default::default()
    };
    pg.handle(&s, info_reply(&asked, 1, 11, Some(acked.into())));
    let fx = pg.handle(&s, info_reply(&asked, 2, 11, Some(acked.into())));
    match &pull_refused(&mut pg, &s, fx, 1)[..] {
        [Effect::RequestPgTemp { osds }] => assert_eq!(osds, &vec![1, 2, 0]),
        other => panic!("the divergent copy must not lead: {other:?}"),
    }
}

#[test]
fn a_down_pg_goes_on_once_its_write_set_is_declared_lost() {
    let (s, mut pg) = setup();
    let record = WriteSetRecord {
        interval: 3,
        osds: vec![1],
    };
    pg.handle(&s, map_record(4, vec![0], 1, Some(record), vec![]));
    assert_eq!(pg.stat().unwrap().state.to_string(), "down");
    assert!(pg.handle(&s, read(1, "a", 0)).is_empty());
    // `osd lost 1`: the record is gone; the PG serves what it has.
    let fx = run(&mut pg, &s, map_record(5, vec![0], 1, None, vec![]));
    assert!(
        fx.iter().any(|e| matches!(e, Effect::Reply { token: 1, reply } if reply.result == Err(OpError::NotFound))),
        "{fx:?}"
    );
    assert_ne!(pg.stat().unwrap().state.to_string(), "down");
}

/// A copy of PG 1.0 on a fresh store: info at `head` (epoch 1), `log`
/// entries (version counter, object, removed), the objects it holds
/// (name, version counter, bytes) and those it lacks (name, version
/// counter needed).
fn copy_of(
    head: u64,
    log: &[(u64, &str, bool)],
    objects: &[(&str, u64, &[u8])],
    missing: &[(&str, u64)],
) -> MemStore {
    copy_with_befores(head, log, objects, missing, &[])
}

/// [`copy_of`], with the entries at the versions `befores` names saying
/// what their object was before them (the rest: unknown).
fn copy_with_befores(
    head: u64,
    log: &[(u64, &str, bool)],
    objects: &[(&str, u64, &[u8])],
    missing: &[(&str, u64)],
    befores: &[(u64, loligo_pg::pg::Before)],
) -> MemStore {
    use loligo_pg::pg::{log_key, record, recovery, LogEntry};
    let s = MemStore::new();
    let c = CollectionId::pg(1, 0);
    let mut t = Transaction::new();
    t.create_collection(c);
    t.set_record(c, b"info", stored(&info(head)));
    for &(v, name, removed) in log {
        let e = LogEntry {
            version: Version { epoch: 1, v },
            name: name.into(),
            removed,
            reqid: None,
            gave_up: None,
            before: befores
                .iter()
                .find(|b| b.0 == v)
                .map_or(loligo_pg::pg::Before::Unknown, |b| b.1),
            prev: None,
        };
        t.set_record(c, &log_key(v), record::encode_log(&e));
    }
    for &(name, v, data) in objects {
        let o = recovery::oid(name);
        t.write_full(c, &o, data.to_vec());
        let ver = Version { epoch: 1, v };
        t.setattr(
            c,
            &o,
            loligo_pg::exec::VERSION_ATTR,
            postcard::to_stdvec(&ver).unwrap(),
        );
    }
    for &(name, v) in missing {
        let need = Version { epoch: 1, v };
        t.set_record(
            c,
            &recovery::missing_key(name),
            record::encode_missing(&need),
        );
    }
    s.apply(t).unwrap();
    s
}

/// Feed `input`, applying every transaction it queues (and those of what
/// follows) until nothing more is queued; the other effects.
fn settle(pg: &mut Pg, s: &dyn ObjectStore, input: Input) -> Vec<Effect> {
    let fx = run(pg, s, input);
    let (mut applied, mut rest) = apply(s, fx);
    loop {
        let input = if let Some(tid) = applied.pop() {
            Input::LocalDone {
                tid,
                result: Ok(()),
            }
        } else if let Some(i) = rest.iter().position(|e| matches!(e, Effect::Continue)) {
            rest.remove(i);
            Input::Continue
        } else {
            return rest;
        };
        let (more, others) = apply(s, run(pg, s, input));
        applied.extend(more);
        rest.extend(others);
    }
}

/// The head of the copy of PG 1.0 on `s`, from its stored info.
fn head_of(s: &MemStore) -> Version {
    let b = s.record(CollectionId::pg(1, 0), b"info").unwrap().unwrap();
    loligo_pg::pg::record::decode_info(&b).unwrap().last_update
}

/// osd.1 answers the peering query `fx` sent it (of the interval it
/// asks about) with `info`; the effects, once every transaction has
/// landed.
fn osd1_answers(pg: &mut Pg, s: &MemStore, fx: &[Effect], info: PeerInfo) -> Vec<Effect> {
    let (_, interval) = queried(fx, 1);
    settle(pg, s, info_reply(fx, 1, interval, Some(info)))
}

fn read_reply(pg: &mut Pg, s: &MemStore, token: u64, name: &str) -> Result<Vec<u8>, OpError> {
    let fx = settle(pg, s, read(token, name, 0));
    match &fx[..] {
        [Effect::Reply { token: t, reply }] if *t == token => {
            reply.result.clone().map(|r| match r.first() {
                Some(loligo_types::ops::SubResult::Data(d)) => d.to_vec(),
                other => panic!("{other:?}"),
            })
        }
        other => panic!("no reply to the read of {name}: {other:?}"),
    }
}

/// osd.2 merged the log of a primary (osd.0) that was then declared lost
/// before osd.2 recovered two of its objects: `a`, written again at v3
/// (osd.2 holds v1), and `c`, created at v4. No up OSD holds either at the
/// version the log names. With the record gone (`osd lost 0`), the PG
/// goes on: `a` is rolled back to the copy osd.2 holds and `c` is removed,
/// each by a new log entry that every copy will follow.
#[test]
fn a_pg_whose_write_set_was_lost_rolls_back_what_no_up_copy_holds() {
    let log = [
        (1, "a", false),
        (2, "b", false),
        (3, "a", false),
        (4, "c", false),
    ];
    let s = copy_of(
        4,
        &log,
        &[("a", 1, b"old a"), ("b", 2, b"b")],
        &[("a", 3), ("c", 4)],
    );
    let mut pg = fresh_pg(PG, 2, info(4));
    let fx = settle(&mut pg, &s, map_record(5, vec![2], 1, None, vec![]));
    assert!(
        !sends(&fx)
            .iter()
            .any(|(_, _, m)| matches!(m, PeerMsg::Pull { .. } | PeerMsg::GetLog { .. })),
        "{fx:?}"
    );
    let state = pg.stat().unwrap().state.to_string();
    assert!(state.starts_with("active"), "{state}");
    assert_eq!(read_reply(&mut pg, &s, 1, "a"), Ok(b"old a".to_vec()));
    assert_eq!(read_reply(&mut pg, &s, 2, "b"), Ok(b"b".to_vec()));
    assert_eq!(read_reply(&mut pg, &s, 3, "c"), Err(OpError::NotFound));
    // Two new entries past the head, in this interval's epoch.
    let c = CollectionId::pg(1, 0);
    let entry = |v: u64| {
        let b = s.record(c, &loligo_pg::pg::log_key(v)).unwrap().unwrap();
        loligo_pg::pg::record::decode_log(&b).unwrap()
    };
    let (e5, e6) = (entry(5), entry(6));
    let mut lost = [(e5.name.clone(), e5.removed), (e6.name.clone(), e6.removed)];
    lost.sort();
    assert_eq!(lost, [("a".to_string(), false), ("c".to_string(), true)]);
    assert_eq!(e6.version, Version { epoch: 5, v: 6 });
    assert_eq!(head_of(&s), Version { epoch: 5, v: 6 });
    // `a` carries its new entry's version.
    let va = s
        .getattr(
            c,
            &loligo_pg::pg::recovery::oid("a"),
            loligo_pg::exec::VERSION_ATTR,
        )
        .unwrap();
    let a_entry = if e5.name == "a" {
        e5.version
    } else {
        e6.version
    };
    assert_eq!(va, postcard::to_stdvec(&a_entry).unwrap());
    assert!(s
        .record(c, &loligo_pg::pg::recovery::missing_key("a"))
        .unwrap()
        .is_none());
}

/// As above, with a member (osd.1) whose log stops at v2: it holds `a` at
/// v1, and `a` is rolled back to its copy; then it merges the new log.
#[test]
fn a_lost_object_rolls_back_to_an_older_copy_another_up_osd_holds() {
    let log = [(1, "a", false), (2, "b", false), (3, "a", false)];
    let s = copy_of(3, &log, &[("b", 2, b"b")], &[("a", 3)]);
    let mut pg = fresh_pg(PG, 2, info(3));
    let fx = settle(&mut pg, &s, map_record(5, vec![2, 1], 1, None, vec![]));
    let fx = osd1_answers(&mut pg, &s, &fx, info(2).into());
    // It asks osd.1 for `a` (which holds it at v1).
    let peer = copy_of(2, &log[..2], &[("a", 1, b"peer a"), ("b", 2, b"b")], &[]);
    let (id, name) = match &fx[..] {
        [Effect::Send {
            id,
            to: 1,
            msg: PeerMsg::Pull { name, .. },
        }] => (*id, name.clone()),
        other => panic!("{other:?}"),
    };
    assert_eq!(name, "a");
    let push = loligo_pg::pg::recovery::read_copy(&peer, CollectionId::pg(1, 0), "a").unwrap();
    let fx = settle(&mut pg, &s, reply(id, PeerReply::Pulled(push)));
    assert_eq!(head_of(&s), Version { epoch: 5, v: 4 });
    // osd.1 merges the new log: it lacks `a` at its new version, which the
    // primary pushes; then both copies are the same.
    let (log_id, log) = fx
        .into_iter()
        .find_map(|e| match e {
            Effect::Send {
                id,
                to: 1,
                msg: msg @ PeerMsg::Log { .. },
            } => Some((id, msg)),
            _ => None,
        })
        .expect("osd.1 is sent the log");
    assert_eq!(log.sender(), 2);
    let mut member = fresh_pg(PG, 1, info(2));
    settle(
        &mut member,
        &peer,
        map_record(5, vec![2, 1], 1, None, vec![]),
    );
    let fx = settle(&mut member, &peer, peer_msg(log, 7, 0));
    let answer = match &fx[..] {
        [Effect::Answer { token: 7, reply }] => reply.clone(),
        other => panic!("{other:?}"),
    };
    let fx = settle(&mut pg, &s, reply(log_id, answer));
    let (push_id, push) = fx
        .into_iter()
        .find_map(|e| match e {
            Effect::Send {
                id,
                to: 1,
                msg: msg @ PeerMsg::Push { .. },
            } => Some((id, msg)),
            _ => None,
        })
        .expect("`a` is pushed to osd.1");
    match &push {
        PeerMsg::Push { from, push, .. } => {
            assert_eq!(*from, 2);
            assert_eq!(
                (push.name.as_str(), push.version),
                ("a", Version { epoch: 5, v: 4 })
            );
        }
        other => panic!("{other:?}"),
    }
    let fx = settle(&mut member, &peer, peer_msg(push, 8, 0));
    assert!(
        matches!(
            &fx[..],
            [Effect::Answer {
                token: 8,
                reply: PeerReply::RepDone(Ok(()))
            }]
        ),
        "{fx:?}"
    );
    settle(&mut pg, &s, ack(push_id));
    assert_eq!(head_of(&peer), Version { epoch: 5, v: 4 });
    assert_eq!(objects_of(&peer), objects_of(&s));
    let a = loligo_pg::pg::recovery::read_copy(&peer, CollectionId::pg(1, 0), "a").unwrap();
    assert_eq!(a.copy.unwrap().data, &b"peer a"[..]);
    assert_eq!(read_reply(&mut pg, &s, 1, "a"), Ok(b"peer a".to_vec()));
    // (Two copies of a size-3 pool.)
    assert_eq!(
        pg.stat().unwrap().state.to_string(),
        "active+undersized+degraded"
    );
}

/// The copy of a lost object that is left may be one the log never
/// named for it (a write never acknowledged, from a branch the log did
/// not take): it is not rolled back to, and the object is removed.
#[test]
fn a_lost_object_is_never_rolled_back_to_a_divergent_copy() {
    let log = [(1, "b", false), (2, "a", false)];
    let s = copy_of(
        2,
        &log,
        &[("a", 1, b"divergent a"), ("b", 1, b"b")],
        &[("a", 2)],
    );
    let mut pg = fresh_pg(PG, 2, info(2));
    settle(&mut pg, &s, map_record(5, vec![2], 1, None, vec![]));
    assert_eq!(read_reply(&mut pg, &s, 1, "a"), Err(OpError::NotFound));
    assert_eq!(read_reply(&mut pg, &s, 2, "b"), Ok(b"b".to_vec()));
    assert_eq!(head_of(&s), Version { epoch: 5, v: 3 });
}

/// A lost write of an object removed just before it rolls back to the
/// removal, never to a copy from before the removal (which may have been
/// acknowledged): whether the log still holds the removal, or only the
/// lost write's entry says the object was absent (replicated lost sim
/// seed 47413: a removed object came back).
#[test]
fn a_lost_object_is_never_rolled_back_past_a_removal() {
    use loligo_pg::pg::Before;
    let objects: &[(&str, u64, &[u8])] = &[("a", 1, b"old a"), ("b", 4, b"b")];
    // The removal in the log.
    let log = [
        (1, "a", false),
        (2, "a", true),
        (3, "a", false),
        (4, "b", false),
    ];
    let s = copy_of(4, &log, objects, &[("a", 3)]);
    let mut pg = fresh_pg(PG, 2, info(4));
    settle(&mut pg, &s, map_record(5, vec![2], 1, None, vec![]));
    assert_eq!(read_reply(&mut pg, &s, 1, "a"), Err(OpError::NotFound));
    assert_eq!(read_reply(&mut pg, &s, 2, "b"), Ok(b"b".to_vec()));
    // Only the lost write's entry left, which says `a` was absent.
    let log = [(3, "a", false), (4, "b", false)];
    let s = copy_with_befores(4, &log, objects, &[("a", 3)], &[(3, Before::Absent)]);
    let mut pg = fresh_pg(PG, 2, info(4));
    settle(&mut pg, &s, map_record(5, vec![2], 1, None, vec![]));
    assert_eq!(read_reply(&mut pg, &s, 1, "a"), Err(OpError::NotFound));
    // Without that word, the older copy is what is left.
    let s = copy_of(4, &log, objects, &[("a", 3)]);
    let mut pg = fresh_pg(PG, 2, info(4));
    settle(&mut pg, &s, map_record(5, vec![2], 1, None, vec![]));
    assert_eq!(read_reply(&mut pg, &s, 1, "a"), Ok(b"old a".to_vec()));
}

/// Without a record, a primary whose log is behind a copy that lacks
/// objects (so none is complete) hands the PG to that copy, which then
/// settles what no up copy holds.
#[test]
fn without_a_record_a_primary_behind_hands_over_to_a_copy_at_the_head() {
    let log = [(1, "a", false), (2, "b", false)];
    let s = copy_of(2, &log, &[("a", 1, b"a"), ("b", 2, b"b")], &[]);
    let at_head = PeerInfo {
        info: info(3),
        missing: 1,
        backfill: false,
        moved_shard: None,
        shard: None,
        leases: Default::default(),
    };
    // Were that copy mid-backfill, it would be handed the PG all the same
    // (to take its copy as it is).
    let mid_backfill = PeerInfo {
        backfill: true,
        ..at_head
    };
    for peer in [at_head, mid_backfill] {
        let mut pg = fresh_pg(PG, 2, info(2));
        let fx = settle(&mut pg, &s, map_record(5, vec![2, 1], 1, None, vec![]));
        match &osd1_answers(&mut pg, &s, &fx, peer)[..] {
            [Effect::RequestPgTemp { osds }] => assert_eq!(osds, &vec![1, 2]),
            other => panic!("{peer:?}: {other:?}"),
        }
    }
}

/// The only copy at the head is mid-backfill (its primary was declared
/// lost): it is taken as it is. `a`, held at v1 while the log says v3, is
/// rolled back to v1; `b`, not copied yet, is removed; the backfill ends.
#[test]
fn a_copy_mid_backfill_is_taken_as_it_is_when_nothing_else_reaches_the_head() {
    let log = [(1, "a", false), (2, "b", false), (3, "a", false)];
    let s = copy_of(3, &log, &[("a", 1, b"old a")], &[]);
    let c = CollectionId::pg(1, 0);
    let mut t = Transaction::new();
    t.set_record(
        c,
        loligo_pg::pg::backfill::BACKFILL_KEY,
        loligo_pg::pg::record::encode_cursor(&Cursor::Start),
    );
    s.apply(t).unwrap();
    let mut pg = fresh_pg(PG, 2, info(3));
    settle(&mut pg, &s, map_record(5, vec![2], 1, None, vec![]));
    let state = pg.stat().unwrap().state.to_string();
    assert!(state.starts_with("active"), "{state}");
    assert_eq!(read_reply(&mut pg, &s, 1, "a"), Ok(b"old a".to_vec()));
    assert_eq!(read_reply(&mut pg, &s, 2, "b"), Err(OpError::NotFound));
    // The entry that took the copy as it was, then `a`'s and `b`'s.
    assert_eq!(head_of(&s), Version { epoch: 5, v: 6 });
    assert!(s
        .record(c, loligo_pg::pg::backfill::BACKFILL_KEY)
        .unwrap()
        .is_none());
    use loligo_pg::pg::recovery;
    let entries = recovery::read_log(&s, c, 0, 100).unwrap();
    assert!(entries[3].is_reset(), "{entries:?}");
    // A copy whose log stops before that entry is backfilled, not merged
    // (objects the log does not name may differ between the two).
    let member = copy_of(2, &log[..2], &[("a", 1, b"old a")], &[]);
    let auth = recovery::AuthLog {
        info: PgInfo {
            last_update: Version { epoch: 5, v: 6 },
            ..Default::default()
        },
        entries,
    };
    let merged = recovery::merge(
        &member,
        c,
        Version { epoch: 1, v: 2 },
        &Default::default(),
        None,
        &auth,
        false,
    );
    assert!(
        matches!(merged, Ok(recovery::Merge::NoOverlap)),
        "{merged:?}"
    );
}

/// osd.1 and osd.2 answer interval 1's peering queries (sent in
/// `asked`) with empty copies; the effects of the last answer
/// (activation and what waited).
fn peer_with_empty_members(pg: &mut Pg, s: &MemStore, asked: &[Effect]) -> Vec<Effect> {
    let mut fx = Vec::new();
    for from in [1, 2] {
        let info = Some(PgInfo::default().into());
        fx = run(pg, s, info_reply(asked, from, 1, info));
    }
    fx
}

/// A primary (osd.0, acting [0, 1, 2]) that has peered with empty
/// members makes `n` writes to distinct objects; what it sent to osd.1.
fn primary_writes(n: u64) -> Vec<(loligo_pg::pg::RepCtx, Transaction)> {
    primary_writes_logging(n, 1_000)
}

/// `primary_writes` from a primary that keeps `log` entries.
fn primary_writes_logging(n: u64, log: u64) -> Vec<(loligo_pg::pg::RepCtx, Transaction)> {
    let (s, mut pg) = setup();
    pg.log_entries_max = log;
    let asked = run(&mut pg, &s, map(1, vec![0, 1, 2], 2));
    peer_with_empty_members(&mut pg, &s, &asked);
    let mut sent = Vec::new();
    for i in 0..n {
        let (_, rest) = apply(
            &s,
            run(&mut pg, &s, write(10 + i, &format!("o{i}"), b"v", 0)),
        );
        sent.extend(rest.into_iter().filter_map(|e| match e {
            Effect::Send {
                to: 1,
                msg: PeerMsg::RepOp { ctx, txn, .. },
                ..
            } => Some((ctx, txn)),
            _ => None,
        }));
    }
    assert_eq!(sent.len() as u64, n);
    sent
}

/// osd.1's copy of the PG, under the same map as the primary.
fn replica() -> (MemStore, Pg) {
    let s = MemStore::new();
    let mut t = Transaction::new();
    t.create_collection(CollectionId::pg(1, 0));
    s.apply(t).unwrap();
    let mut pg = fresh_pg(PG, 1, PgInfo::default());
    assert!(pg.handle(&s, map(1, vec![0, 1, 2], 2)).is_empty());
    (s, pg)
}

fn rep_op(token: u64, w: &(loligo_pg::pg::RepCtx, Transaction), now_ms: u64) -> Input {
    let msg = PeerMsg::RepOp {
        pg: PG,
        from: 0,
        ctx: w.0.clone(),
        txn: w.1.clone(),
    };
    peer_msg(msg, token, now_ms)
}

#[test]
fn a_replica_applies_writes_in_the_primary_order_and_answers_once_durable() {
    let w = primary_writes(3);
    let (s, mut pg) = replica();
    // The second write arrives first: it waits for the first.
    assert!(pg.handle(&s, rep_op(2, &w[1], 0)).is_empty());
    // The first one comes: both are queued on the store, in order.
    let fx = pg.handle(&s, rep_op(1, &w[0], 10));
    let tids: Vec<u64> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Apply { tid, .. } => Some(*tid),
            _ => None,
        })
        .collect();
    assert_eq!(tids.len(), 2, "{fx:?}");
    assert!(rep_replies(&fx).is_empty(), "no answer before durable");
    let (_, rest) = apply(&s, fx);
    assert!(rest.is_empty());
    // Durable: each answered with its own token.
    let fx = pg.handle(
        &s,
        Input::LocalDone {
            tid: tids[0],
            result: Ok(()),
        },
    );
    assert_eq!(rep_replies(&fx), vec![(1, Ok(()))]);
    let fx = pg.handle(
        &s,
        Input::LocalDone {
            tid: tids[1],
            result: Ok(()),
        },
    );
    assert_eq!(rep_replies(&fx), vec![(2, Ok(()))]);
    // A resend of a write already here is answered, not applied twice.
    let fx = pg.handle(&s, rep_op(3, &w[0], 20));
    match &fx[..] {
        [Effect::Apply { tid, txn, .. }] => {
            assert!(txn.is_empty());
            let fx = pg.handle(
                &s,
                Input::LocalDone {
                    tid: *tid,
                    result: Ok(()),
                },
            );
            assert_eq!(rep_replies(&fx), vec![(3, Ok(()))]);
        }
        other => panic!("{other:?}"),
    }
    assert!(pg.idle());
    assert_eq!(
        loligo_pg::pg::stored_info(&s, CollectionId::pg(1, 0))
            .unwrap()
            .unwrap()
            .last_update,
        Version { epoch: 1, v: 2 }
    );
}

#[test]
fn a_resend_of_a_write_the_replica_has_trimmed_is_a_duplicate() {
    // The primary keeps two log entries: by the fourth write the first
    // one's entry is gone from the replica's log.
    let w = primary_writes_logging(4, 2);
    let (s, mut pg) = replica();
    for (i, x) in w.iter().enumerate() {
        let (_, rest) = apply(&s, pg.handle(&s, rep_op(i as u64 + 1, x, 0)));
        assert!(rest.is_empty());
    }
    for tid in 0..20 {
        pg.handle(
            &s,
            Input::LocalDone {
                tid,
                result: Ok(()),
            },
        );
    }
    assert!(s
        .record(CollectionId::pg(1, 0), &loligo_pg::pg::log_key(1))
        .unwrap()
        .is_none());
    // Its answer was lost: the primary sends it again.
    let fx = pg.handle(&s, rep_op(9, &w[0], 10));
    match &fx[..] {
        [Effect::Apply { tid, txn, .. }] => {
            assert!(txn.is_empty(), "applied twice: {txn:?}");
            let fx = pg.handle(
                &s,
                Input::LocalDone {
                    tid: *tid,
                    result: Ok(()),
                },
            );
            assert_eq!(rep_replies(&fx), vec![(9, Ok(()))]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_failed_replica_write_is_sent_again_until_it_is_durable() {
    let (s, mut pg) = setup();
    let asked = run(&mut pg, &s, map(1, vec![0, 1, 2], 2));
    peer_with_empty_members(&mut pg, &s, &asked);
    let fx = run(&mut pg, &s, write(5, "a", b"x", 0));
    let tid = write_tid(&fx);
    let (_, rest) = apply(&s, fx);
    // Each send of the write: (send id, to, ctx, txn).
    let sends_of = |fx: &[Effect]| -> Vec<(u64, i32, RepCtx, Transaction)> {
        rep_ops(fx)
            .into_iter()
            .map(|(id, to, ctx, txn)| (id, to, ctx.clone(), txn.clone()))
            .collect()
    };
    let sent = sends_of(&rest);
    assert_eq!(sent.len(), 2);
    let to = |osd: i32| sent.iter().find(|x| x.1 == osd).unwrap().clone();
    let (to1, to2) = (to(1), to(2));
    assert!(run(
        &mut pg,
        &s,
        Input::LocalDone {
            tid,
            result: Ok(())
        }
    )
    .is_empty());
    assert!(run(&mut pg, &s, ack(to2.0)).is_empty());
    // osd.1's answer was lost: no reply to the client, and the write is
    // not given up on (the interval goes on).
    let lost = |id| reply_err(id, RepError::Failed("lost".into()));
    assert!(run(&mut pg, &s, lost(to1.0)).is_empty());
    assert!(run(&mut pg, &s, Input::Tick { now_ms: 100 }).is_empty());
    // After the retry delay the same write goes to osd.1 again, once
    // (a new send of it).
    let again = |fx: Vec<Effect>| sends_of(&fx);
    let resent = again(run(&mut pg, &s, Input::Tick { now_ms: 300 }));
    assert_eq!(resent.len(), 1);
    assert_eq!((&resent[0].2, resent[0].1), (&to1.2, 1));
    assert_ne!(resent[0].0, to1.0);
    assert_eq!(resent[0].3.ops.len(), to1.3.ops.len());
    assert!(again(run(&mut pg, &s, Input::Tick { now_ms: 400 })).is_empty());
    // It failed again: sent again after the delay.
    assert!(run(&mut pg, &s, lost(resent[0].0)).is_empty());
    let resent = again(run(&mut pg, &s, Input::Tick { now_ms: 700 }));
    assert_eq!(resent.len(), 1);
    assert_eq!((&resent[0].2, resent[0].1), (&to1.2, 1));
    // Durable at last: the client is answered.
    match &run(&mut pg, &s, ack(resent[0].0))[..] {
        [Effect::Reply { token: 5, reply }] => assert!(reply.result.is_ok()),
        other => panic!("{other:?}"),
    }
    assert!(pg.idle());
}

#[test]
fn a_write_whose_predecessor_never_comes_is_refused_after_the_op_timeout() {
    let w = primary_writes(2);
    let (s, mut pg) = replica();
    pg.op_timeout_ms = 1_000;
    assert!(pg.handle(&s, rep_op(7, &w[1], 0)).is_empty());
    assert!(rep_replies(&pg.handle(&s, Input::Tick { now_ms: 999 })).is_empty());
    let fx = pg.handle(&s, Input::Tick { now_ms: 1_000 });
    match &rep_replies(&fx)[..] {
        [(7, Err(RepError::Failed(m)))] => assert!(m.contains("never came"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(pg.idle());
}

#[test]
fn a_replica_refuses_a_primary_its_map_left_behind_and_foreign_collections() {
    let w = primary_writes(1);
    let (s, mut pg) = replica();
    // Epoch 2 moved the PG to another acting set, and a write set was
    // recorded since: the old primary's write is stale.
    let record = WriteSetRecord {
        interval: 2,
        osds: vec![1, 2],
    };
    pg.handle(&s, map_record(2, vec![1, 2], 2, Some(record), vec![1, 2]));
    let fx = pg.handle(&s, rep_op(1, &w[0], 0));
    assert!(
        matches!(&rep_replies(&fx)[..], [(1, Err(RepError::Stale(_)))]),
        "{fx:?}"
    );
    // A transaction that reaches into another PG's collection is refused
    // whatever the map says.
    let (s, mut pg) = replica();
    let mut bad = w[0].clone();
    bad.1
        .touch(CollectionId::pg(1, 5), &loligo_store::ObjectId::new(1, "x"));
    let fx = pg.handle(&s, rep_op(2, &bad, 0));
    match &rep_replies(&fx)[..] {
        [(2, Err(RepError::Failed(m)))] => assert!(m.contains("touches"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(s
        .list(CollectionId::pg(1, 0), None, 10)
        .unwrap()
        .0
        .is_empty());
}

fn list_reply(fx: &[Effect]) -> Option<&loligo_pg::pg::ListResult> {
    fx.iter().find_map(|e| match e {
        Effect::ListReply { result, .. } => Some(result),
        _ => None,
    })
}

#[test]
fn listings_go_through_the_pg_and_respect_down() {
    let list = |token, now_ms| Input::List {
        start: None,
        limit: 100,
        token,
        now_ms,
    };
    // A replica refuses: ask the primary.
    let (s, mut pg) = replica();
    let fx = pg.handle(&s, list(1, 0));
    assert!(matches!(
        list_reply(&fx),
        Some(Err(OpError::WrongPrimary { .. }))
    ));
    // A primary lists once active.
    let (s, mut pg) = setup();
    let asked = run(&mut pg, &s, map(1, vec![0, 1, 2], 2));
    assert!(
        run(&mut pg, &s, list(2, 0)).is_empty(),
        "waits while peering"
    );
    let fx = peer_with_empty_members(&mut pg, &s, &asked);
    assert!(matches!(list_reply(&fx), Some(Ok((names, false))) if names.is_empty()));
    // A copy whose write set on record is unreachable lists nothing: it
    // waits, then fails with `Down`.
    let (s, mut pg) = setup();
    pg.op_timeout_ms = 500;
    let record = WriteSetRecord {
        interval: 1,
        osds: vec![1, 2],
    };
    run(&mut pg, &s, map_record(2, vec![0], 1, Some(record), vec![]));
    assert!(run(&mut pg, &s, list(3, 0)).is_empty());
    let fx = run(&mut pg, &s, Input::Tick { now_ms: 500 });
    assert!(
        matches!(list_reply(&fx), Some(Err(OpError::Down { .. }))),
        "{fx:?}"
    );
}

#[test]
fn a_peering_query_is_answered_only_under_the_queried_epoch() {
    let w = primary_writes(1);
    let (s, mut pg) = replica();
    pg.op_timeout_ms = 1_000;
    // The write is taken (queued, not yet durable) under epoch 1.
    let fx = pg.handle(&s, rep_op(1, &w[0], 0));
    let tid = match &fx[..] {
        [Effect::Apply { tid, .. }] => *tid,
        other => panic!("{other:?}"),
    };
    // A new primary (osd.2) peering at epoch 2 asks: no answer under
    // epoch 1.
    let q = |token, now_ms| query(2, 2, 2, token, now_ms);
    let queries = [5, 6];
    assert!(info_replies(&pg.handle(&s, q(5, 10)), &queries).is_empty());
    // Epoch 2 arrives: still no answer while the write taken is not
    // durable here (a crash could take it away after the answer claimed
    // it).
    let fx = pg.handle(&s, map(2, vec![2, 1], 1));
    assert!(info_replies(&fx, &queries).is_empty(), "{fx:?}");
    // The old primary's write becomes durable after the interval ended:
    // it is refused, not acknowledged to the old primary; the answer now
    // includes it.
    let fx = pg.handle(
        &s,
        Input::LocalDone {
            tid,
            result: Ok(()),
        },
    );
    assert!(
        matches!(&rep_replies(&fx)[..], [(1, Err(RepError::Stale(_)))]),
        "{fx:?}"
    );
    match &info_replies(&fx, &queries)[..] {
        [(5, Ok(Some(i)))] => assert_eq!(i.info.last_update, w[0].0.version),
        other => panic!("{other:?}"),
    }
    // And any later write from it is refused outright.
    let fx = pg.handle(&s, rep_op(2, &w[0], 20));
    assert!(
        matches!(&rep_replies(&fx)[..], [(2, Err(RepError::Stale(_)))]),
        "{fx:?}"
    );
    // A query for an epoch this copy never gets is answered with an error
    // after the op timeout (the primary asks again).
    assert!(info_replies(&pg.handle(&s, query(2, 9, 9, 6, 100)), &queries).is_empty());
    let fx = pg.handle(&s, Input::Tick { now_ms: 1_100 });
    assert!(
        matches!(&info_replies(&fx, &queries)[..], [(6, Err(_))]),
        "{fx:?}"
    );
    assert!(pg.idle());
}

#[test]
fn a_replica_that_answered_a_newer_peering_refuses_the_old_intervals_writes() {
    // EC sim seed 5780: the acting set and primary stayed the same across
    // a new interval; the primary peered again, the replica answered at
    // the new epoch, and then took a write of the old interval that was
    // still on its way. The new primary had peered without that write
    // (and rolled it back on its own copy): the logs then differed.
    let w = primary_writes(2);
    let (s, mut pg) = replica();
    let fx = pg.handle(&s, rep_op(1, &w[0], 0));
    let tid = match &fx[..] {
        [Effect::Apply { tid, .. }] => *tid,
        other => panic!("{other:?}"),
    };
    pg.handle(
        &s,
        Input::LocalDone {
            tid,
            result: Ok(()),
        },
    );
    // Epoch 2: the same acting set, the same primary.
    pg.handle(&s, map(2, vec![0, 1, 2], 2));
    let interval = pg.view().interval;
    let fx = pg.handle(&s, query(0, interval, 2, 7, 10));
    match &info_replies(&fx, &[7])[..] {
        [(7, Ok(Some(i)))] => assert_eq!(i.info.last_update, w[0].0.version),
        other => panic!("{other:?}"),
    }
    // The old interval's second write arrives after the answer: refused.
    let fx = pg.handle(&s, rep_op(2, &w[1], 20));
    assert!(
        matches!(&rep_replies(&fx)[..], [(2, Err(RepError::Stale(_)))]),
        "{fx:?}"
    );
    // A write the primary makes after peering (under epoch 2) is taken.
    let mut later = w[1].clone();
    later.0.epoch = 2;
    let fx = pg.handle(&s, rep_op(3, &later, 30));
    assert!(matches!(&fx[..], [Effect::Apply { .. }]), "{fx:?}");
}

#[test]
fn lacking_copies_are_misplaced_while_enough_others_remain() {
    use loligo_pg::pg::copies_short;
    // A member of a full-size set lacks 4 copies: degraded.
    assert_eq!(copies_short(10, 3, 3, 4), (4, 0));
    // A pg_temp kept the old three while CRUSH's new member fills: what
    // it lacks is only misplaced.
    assert_eq!(copies_short(10, 3, 4, 10), (0, 10));
    // ... unless an old member lacks some too.
    assert_eq!(copies_short(10, 3, 4, 15), (5, 10));
    // An undersized set: the copies it cannot hold are degraded.
    assert_eq!(copies_short(10, 3, 2, 0), (10, 0));
    assert_eq!(copies_short(0, 3, 1, 0), (0, 0));
}

#[test]
fn a_stray_copy_goes_once_the_primary_says_the_pg_is_clean_without_it() {
    let w = primary_writes(3);
    let (s, mut pg) = replica();
    for (i, x) in w.iter().enumerate() {
        apply(&s, pg.handle(&s, rep_op(i as u64 + 1, x, 0)));
    }
    for tid in 0..10 {
        pg.handle(
            &s,
            Input::LocalDone {
                tid,
                result: Ok(()),
            },
        );
    }
    let coll = CollectionId::pg(1, 0);
    assert_eq!(s.list(coll, None, 100).unwrap().0.len(), 3);
    // Epoch 2 moves the PG off osd.1: a stray that asks now and then.
    pg.handle(&s, map(2, vec![0, 2, 3], 2));
    // The asks in `fx` (to the primary, under epoch 2), by send id.
    let asks = |fx: &[Effect]| -> Vec<u64> {
        fx.iter()
            .filter_map(|e| match e {
                Effect::Send {
                    id,
                    to: 0,
                    msg: PeerMsg::StrayCheck { epoch: 2, .. },
                } => Some(*id),
                _ => None,
            })
            .collect()
    };
    let first = asks(&pg.handle(&s, Input::Tick { now_ms: 2_500 }));
    assert_eq!(first.len(), 1);
    assert_eq!(asks(&pg.handle(&s, Input::Tick { now_ms: 3_000 })).len(), 0);
    // Not clean, an older map, or not the primary: nothing goes. (Each
    // answer answers an ask of its own; osd.2 was never asked, so its
    // word comes as the answer to no ask.)
    let answer = |id, clean| reply(id, PeerReply::Clean(clean));
    assert!(pg.handle(&s, answer(first[0], None)).is_empty());
    let second = asks(&pg.handle(&s, Input::Tick { now_ms: 4_500 }));
    assert_eq!(second.len(), 1);
    assert!(pg.handle(&s, answer(second[0], Some(1))).is_empty());
    assert!(pg.handle(&s, answer(u64::MAX, Some(2))).is_empty());
    // Nor does a second answer to an ask already answered.
    assert!(pg.handle(&s, answer(first[0], Some(2))).is_empty());
    // Clean at epoch 2: records and objects go in the first batch.
    let third = asks(&pg.handle(&s, Input::Tick { now_ms: 6_500 }));
    assert_eq!(third.len(), 1);
    let fx = pg.handle(&s, answer(third[0], Some(2)));
    let tid = match &fx[..] {
        [Effect::Apply { tid, .. }] => *tid,
        other => panic!("{other:?}"),
    };
    apply(&s, fx);
    assert!(pg
        .handle(
            &s,
            Input::LocalDone {
                tid,
                result: Ok(())
            }
        )
        .is_empty());
    assert!(s.list(coll, None, 100).unwrap().0.is_empty());
    assert!(s.records(coll, b"", 100).unwrap().is_empty());
    // Nothing left to ask about.
    assert_eq!(
        asks(&pg.handle(&s, Input::Tick { now_ms: 10_000 })).len(),
        0
    );
    assert!(pg.idle());
}

#[test]
fn a_primary_says_clean_only_when_it_is_and_not_to_its_members() {
    let (s, mut pg) = setup();
    let asked = run(&mut pg, &s, map(1, vec![0, 1, 2], 2));
    peer_with_empty_members(&mut pg, &s, &asked);
    assert!(pg.is_clean());
    let check = |pg: &mut Pg, from, epoch| {
        let msg = PeerMsg::StrayCheck {
            pg: PG,
            from,
            epoch,
            shard: None,
        };
        match &pg.handle(&s, peer_msg(msg, 9, 0))[..] {
            [Effect::Answer {
                token: 9,
                reply: PeerReply::Clean(clean),
            }] => *clean,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(check(&mut pg, 3, 1), Some(1));
    // A member, or a copy with a newer map than this primary's: no.
    assert_eq!(check(&mut pg, 1, 1), None);
    assert_eq!(check(&mut pg, 3, 2), None);
    // Not clean (a member is down): no.
    run(&mut pg, &s, map(2, vec![0, 1], 2));
    assert_eq!(check(&mut pg, 3, 2), None);
}

/// Object `name` at version counter `v`, straight into a copy's store.
fn put_obj(s: &MemStore, name: &str, v: u64) {
    let c = CollectionId::pg(1, 0);
    let o = loligo_pg::pg::recovery::oid(name);
    let mut t = Transaction::new();
    t.write_full(c, &o, name.as_bytes().to_vec());
    let ver = Version { epoch: 1, v };
    t.setattr(
        c,
        &o,
        loligo_pg::exec::VERSION_ATTR,
        postcard::to_stdvec(&ver).unwrap(),
    );
    s.apply(t).unwrap();
}

/// Every object of PG 1.0 on a store, with its version.
fn objects_of(s: &MemStore) -> Vec<(String, Vec<u8>)> {
    let c = CollectionId::pg(1, 0);
    let (ids, _) = s.list(c, None, 10_000).unwrap();
    ids.into_iter()
        .map(|o| {
            let v = s.getattr(c, &o, loligo_pg::exec::VERSION_ATTR).unwrap();
            (o.name, v)
        })
        .collect()
}

/// The primary's tree rebuilt from objects it held before trees (at its
/// first map, persisted), then member 2 backfilled with a recovery slot
/// granted: the effects that start the backfill.
fn tree_backfill_of_member_2(s: &MemStore, pg: &mut Pg) -> std::collections::VecDeque<Effect> {
    // No tree before the first map (it says whether the pool keeps one).
    let (tids, _) = apply(s, pg.handle(s, Input::Tick { now_ms: 0 }));
    assert!(tids.is_empty(), "a tree rebuilt before the first map");
    let fx = backfill_member_2(s, pg, map(1, vec![0, 1, 2], 2));
    assert!(
        !s.records(CollectionId::pg(1, 0), b"merkle", 1)
            .unwrap()
            .is_empty(),
        "no tree rebuilt"
    );
    let ask = fx
        .iter()
        .find_map(|e| match e {
            Effect::Reserve { ask, .. } => Some(*ask),
            _ => None,
        })
        .expect("a slot is asked for");
    run(pg, s, Input::Reserved { ask }).into()
}

/// Member 2 holds most of the primary's 200 objects already: the
/// primary compares Merkle trees with it, and its scans list only the
/// objects in differing leaves; a remove of an object whose leaf matched,
/// made while a scan is on its way, reaches it too (the scan is made
/// again with the leaf, never answered without it).
#[test]
fn a_backfill_compares_merkle_trees_and_copies_only_where_they_differ() {
    use loligo_pg::pg::{backfill, merkle::Tree, Filter};
    let (s, mut pg) = setup();
    let c = CollectionId::pg(1, 0);
    let target = MemStore::new();
    let mut t = Transaction::new();
    t.create_collection(c);
    target.apply(t).unwrap();
    for i in 0..200u64 {
        let name = format!("o{i}");
        put_obj(&s, &name, 1 + i % 5);
        match i {
            // Older on the target; absent there.
            3 => put_obj(&target, &name, 1),
            7 => {}
            _ => put_obj(&target, &name, 1 + i % 5),
        }
    }
    // Only the target has it.
    put_obj(&target, "stale", 2);
    let mut queue = tree_backfill_of_member_2(&s, &mut pg);
    let (mut node_asks, mut listed, mut removed, mut rounds) = (0, 0, false, 0);
    while let Some(e) = queue.pop_front() {
        rounds += 1;
        assert!(rounds < 1_000, "the backfill never ends");
        let more = match e {
            Effect::Send {
                id,
                to: 2,
                msg:
                    PeerMsg::Scan {
                        after,
                        upto,
                        limit,
                        filter,
                        ..
                    },
            } => {
                let result = match &filter {
                    Filter::Nodes { leaves, level, idx } => {
                        node_asks += 1;
                        let tree =
                            backfill::rebuild_tree(&target, c, &Tree::new(*leaves).unwrap(), None)
                                .unwrap();
                        let idx: Vec<u32> = if idx.is_empty() {
                            (0..1u32 << level).collect()
                        } else {
                            idx.clone()
                        };
                        loligo_pg::pg::Scan {
                            objects: vec![],
                            end: after,
                            nodes: Some(tree.nodes_at(*level, &idx)),
                        }
                    }
                    _ => {
                        assert!(
                            matches!(filter, Filter::Leaves { .. }),
                            "a full scan: {filter:?}"
                        );
                        if !removed {
                            // A remove while the scan is on its way: o150's
                            // leaf matched, so this scan leaves it out.
                            removed = true;
                            let op = Input::Op {
                                op: ClientOp {
                                    pool: 1,
                                    name: "o150".into(),
                                    epoch: 1,
                                    ops: vec![SubOp::Remove],
                                    reqid: None,
                                },
                                token: 77,
                                now_ms: 0,
                            };
                            let (tids, rest) = apply(&s, run(&mut pg, &s, op));
                            for tid in tids {
                                queue.extend(run(
                                    &mut pg,
                                    &s,
                                    Input::LocalDone {
                                        tid,
                                        result: Ok(()),
                                    },
                                ));
                            }
                            for e in rest {
                                if let Effect::Send {
                                    id,
                                    to,
                                    msg: PeerMsg::RepOp { txn, .. },
                                } = e
                                {
                                    if to == 2 {
                                        // Beyond its cursor: the log entry only.
                                        assert!(!txn.ops.iter().any(|op| matches!(
                                            op,
                                            loligo_store::txn::Op::Remove(..)
                                        )));
                                        target.apply(txn).unwrap();
                                    }
                                    queue.extend(run(&mut pg, &s, ack(id)));
                                }
                            }
                        }
                        let hashes = filter.hashes().unwrap();
                        let sc = backfill::scan_in(
                            &target,
                            c,
                            &after,
                            &upto,
                            limit as usize,
                            None,
                            &hashes,
                        )
                        .unwrap();
                        listed += sc.objects.len();
                        sc
                    }
                };
                let mut fx = run(&mut pg, &s, reply(id, PeerReply::Scanned(result)));
                // A scan made stale by the remove is made again on a tick.
                if !sends(&fx)
                    .iter()
                    .any(|(_, _, m)| matches!(m, PeerMsg::Scan { .. } | PeerMsg::Chunk { .. }))
                {
                    fx.extend(run(&mut pg, &s, Input::Tick { now_ms: 10 }));
                }
                fx
            }
            Effect::Send {
                id,
                to: 2,
                msg: PeerMsg::Chunk { chunk, .. },
            } => {
                let txn =
                    backfill::chunk_txn(c, &chunk, |_| loligo_pg::pg::recovery::Prior::Replicated);
                target.apply(txn).unwrap();
                run(&mut pg, &s, ack(id))
            }
            _ => vec![],
        };
        queue.extend(more);
    }
    assert!(removed, "no filtered scan was made");
    assert!(
        node_asks >= 2,
        "the trees were not compared ({node_asks} asks)"
    );
    assert_eq!(objects_of(&target), objects_of(&s), "the target differs");
    // o3, o7 and stale, and o150: the target listed a few objects, not 200.
    assert!(listed <= 8, "the target listed {listed} objects");
    // What the OSD's counters take: one backfill, by tree, at this cost.
    let done = pg.take_backfills();
    assert_eq!((done.finished, done.by_tree), (1, 1), "{done:?}");
    // (A scan answer made stale by the remove is not counted.)
    assert!(done.listed > 0 && done.listed <= listed as u64, "{done:?}");
    assert!(done.tree_nodes > 0 && done.copied >= 3, "{done:?}");
    assert_eq!(pg.take_backfills(), Default::default(), "taken once");
}

/// The scrub asks of a clean PG's members, send id by member.
fn scrub_asks(fx: &[Effect]) -> Vec<(i32, u64)> {
    sends(fx)
        .into_iter()
        .filter_map(|(id, to, msg)| match msg {
            PeerMsg::Scan {
                filter: loligo_pg::pg::Filter::Nodes { level: 0, .. },
                ..
            } => Some((to, id)),
            _ => None,
        })
        .collect()
}

/// The member asked as `id` answers with its Merkle root `root`.
fn root_answer(id: u64, root: u64) -> Input {
    let scan = loligo_pg::pg::Scan {
        objects: vec![],
        end: Cursor::Start,
        nodes: Some(vec![root]),
    };
    reply(id, PeerReply::Scanned(scan))
}

/// A clean primary compares its members' Merkle roots with its own on a
/// schedule: a different root shows the PG inconsistent (until an equal
/// one), and an answer a write overtook is not compared.
#[test]
fn a_clean_primary_compares_merkle_roots_and_flags_a_difference() {
    let (s, mut pg) = setup();
    pg.scrub_interval_ms = 1_000;
    let asked = run(&mut pg, &s, map(1, vec![0, 1, 2], 2));
    let fx = peer_with_empty_members(&mut pg, &s, &asked);
    let put = |pg: &mut Pg, token: u64, now_ms: u64| {
        let (applied, rest) = apply(&s, run(pg, &s, write(token, "a", b"x", now_ms)));
        for tid in applied {
            run(
                pg,
                &s,
                Input::LocalDone {
                    tid,
                    result: Ok(()),
                },
            );
        }
        for (id, ..) in rep_ops(&rest) {
            run(pg, &s, ack(id));
        }
    };
    land(&mut pg, &s, fx);
    put(&mut pg, 1, 0);
    assert!(pg.is_clean());
    let mine = pg.tree().expect("a tree").root();
    assert_ne!(mine, 0);
    // Not before the interval; then both members are asked.
    assert!(scrub_asks(&run(&mut pg, &s, Input::Tick { now_ms: 500 })).is_empty());
    let asks = scrub_asks(&run(&mut pg, &s, Input::Tick { now_ms: 1_500 }));
    assert_eq!(asks.iter().map(|a| a.0).collect::<Vec<_>>(), vec![1, 2]);
    run(&mut pg, &s, root_answer(asks[0].1, mine));
    run(&mut pg, &s, root_answer(asks[1].1, mine ^ 1));
    assert_eq!(pg.scrubs(), (2, 1));
    let st = pg.stat().unwrap().state;
    assert!(st.contains(PgState::INCONSISTENT), "{st}");
    assert!(st.contains(PgState::CLEAN), "{st}");
    // A write between the question and the answer: not compared.
    let asks = scrub_asks(&run(&mut pg, &s, Input::Tick { now_ms: 2_600 }));
    assert_eq!(asks.len(), 2);
    put(&mut pg, 2, 2_700);
    run(&mut pg, &s, root_answer(asks[1].1, 12345));
    assert_eq!(pg.scrubs(), (2, 1));
    run(&mut pg, &s, root_answer(asks[0].1, 0));
    assert_eq!(pg.scrubs(), (2, 1));
    // The next round, with equal roots, clears the mark.
    let asks = scrub_asks(&run(&mut pg, &s, Input::Tick { now_ms: 3_700 }));
    assert_eq!(asks.len(), 2);
    let mine = pg.tree().unwrap().root();
    for (_, id) in asks {
        run(&mut pg, &s, root_answer(id, mine));
    }
    assert_eq!(pg.scrubs(), (4, 1));
    assert!(!pg.stat().unwrap().state.contains(PgState::INCONSISTENT));
}

/// A primary keeps two backfill chunks on their way and has the target
/// list the range after them meanwhile; a write to the second chunk's
/// range waits. When the first chunk's answer is lost (the target had
/// applied both), the same chunks go again, in order, one at a time, and
/// the backfill still completes with the target equal to the primary.
#[test]
fn a_backfill_keeps_two_chunks_on_their_way_and_resends_them_in_order() {
    use loligo_pg::pg::{backfill, Chunk, Filter};
    let (s, mut pg) = setup();
    pg.backfill_chunk_objects = 16;
    let c = CollectionId::pg(1, 0);
    let target = MemStore::new();
    let mut t = Transaction::new();
    t.create_collection(c);
    target.apply(t).unwrap();
    for i in 0..200u64 {
        put_obj(&s, &format!("o{i}"), 1 + i % 5);
    }
    let mut queue = tree_backfill_of_member_2(&s, &mut pg);
    // The target's chunks as it applies them: each once, in order.
    let mut cursor = Cursor::Start;
    let mut apply_chunk = |ch: &Chunk| {
        if ch.end > cursor {
            assert_eq!(ch.after, cursor, "a chunk applied out of order");
            target
                .apply(backfill::chunk_txn(c, ch, |_| {
                    loligo_pg::pg::recovery::Prior::Replicated
                }))
                .unwrap();
            cursor = ch.end.clone();
        }
    };
    let mut flying: Vec<(u64, Chunk)> = Vec::new();
    let (mut most, mut scans_while_two, mut lost, mut rounds) = (0, 0, false, 0);
    loop {
        rounds += 1;
        assert!(rounds < 1_000, "the backfill never ends");
        // Scans are answered at once (from what the target has applied:
        // the chunks on their way end before the range asked for).
        while let Some(e) = queue.pop_front() {
            match e {
                Effect::Send {
                    id,
                    to: 2,
                    msg:
                        PeerMsg::Scan {
                            after,
                            upto,
                            limit,
                            filter,
                            ..
                        },
                } => {
                    if flying.len() == 2 {
                        scans_while_two += 1;
                    }
                    let result = match &filter {
                        Filter::Nodes { .. } => loligo_pg::pg::Scan {
                            objects: vec![],
                            end: after,
                            nodes: None,
                        },
                        f => {
                            for (_, ch) in &flying {
                                assert!(ch.end <= after, "a scan inside a chunk on its way");
                            }
                            backfill::scan_in(
                                &target,
                                c,
                                &after,
                                &upto,
                                limit as usize,
                                None,
                                &f.hashes().unwrap(),
                            )
                            .unwrap()
                        }
                    };
                    queue.extend(run(&mut pg, &s, reply(id, PeerReply::Scanned(result))));
                }
                Effect::Send {
                    id,
                    to: 2,
                    msg: PeerMsg::Chunk { chunk, .. },
                } => {
                    if let Some((_, last)) = flying.last() {
                        assert_eq!(chunk.after, last.end, "chunks on their way overlap");
                    }
                    flying.push((id, chunk));
                }
                _ => {}
            }
        }
        if flying.is_empty() {
            break;
        }
        assert!(flying.len() <= 2, "{} chunks on their way", flying.len());
        most = most.max(flying.len());
        if !lost && flying.len() == 2 {
            lost = true;
            let (first, second) = (flying[0].clone(), flying[1].clone());
            apply_chunk(&first.1);
            apply_chunk(&second.1);
            // A write to the second chunk's range waits for it.
            let name = second.1.pushes[0].name.clone();
            let fx = run(&mut pg, &s, write(77, &name, b"new", 0));
            assert!(
                !fx.iter().any(|e| matches!(e, Effect::Apply { .. })) && rep_ops(&fx).is_empty(),
                "a write to a chunk's range went ahead: {fx:?}"
            );
            let lost_answer = reply_err(first.0, RepError::Failed("lost".into()));
            let fx = run(&mut pg, &s, lost_answer);
            assert!(!sends(&fx)
                .iter()
                .any(|(_, _, m)| matches!(m, PeerMsg::Chunk { .. })));
            // The second's answer comes after: it too is sent again.
            let late = ack(second.0);
            assert!(run(&mut pg, &s, late).is_empty());
            flying.clear();
            // After the pause: the first chunk again, alone.
            let fx = run(&mut pg, &s, Input::Tick { now_ms: 5_000 });
            let again: Vec<&Chunk> = sends(&fx)
                .into_iter()
                .filter_map(|(_, _, m)| match m {
                    PeerMsg::Chunk { chunk, .. } => Some(chunk),
                    _ => None,
                })
                .collect();
            assert_eq!(again, vec![&first.1], "not the first chunk alone");
            queue.extend(fx);
            continue;
        }
        // The target answers the oldest (one it has is answered at once).
        let (id, ch) = flying.remove(0);
        apply_chunk(&ch);
        queue.extend(run(&mut pg, &s, ack(id)));
    }
    assert!(lost, "never two chunks on their way");
    assert_eq!(most, 2);
    assert!(scans_while_two > 0, "no scan ahead of two chunks");
    assert_eq!(cursor, Cursor::End);
    assert_eq!(objects_of(&target), objects_of(&s), "the target differs");
}

/// `nobackfill` set while chunks are on their way: those finish, no scan
/// or chunk starts after them, the slot goes back and the PG waits in
/// `backfill_wait`; cleared, the backfill goes on from where it stopped
/// and the target ends equal to the primary.
#[test]
fn nobackfill_set_mid_backfill_stops_it_after_the_chunks_under_way() {
    use loligo_pg::pg::{backfill, Chunk, Filter};
    let (s, mut pg) = setup();
    pg.backfill_chunk_objects = 16;
    let c = CollectionId::pg(1, 0);
    let target = MemStore::new();
    let mut t = Transaction::new();
    t.create_collection(c);
    target.apply(t).unwrap();
    for i in 0..200u64 {
        put_obj(&s, &format!("o{i}"), 1 + i % 5);
    }
    let mut queue = tree_backfill_of_member_2(&s, &mut pg);
    let mut cursor = Cursor::Start;
    let mut flying: Vec<(u64, Chunk)> = Vec::new();
    let (mut held, mut resumed, mut rounds) = (false, false, 0);
    loop {
        rounds += 1;
        assert!(rounds < 1_000, "the backfill never ends");
        while let Some(e) = queue.pop_front() {
            match e {
                Effect::Send {
                    id,
                    to: 2,
                    msg:
                        PeerMsg::Scan {
                            after,
                            upto,
                            limit,
                            filter,
                            ..
                        },
                } => {
                    assert!(!held || resumed, "a scan while nobackfill is set");
                    let result = match &filter {
                        Filter::Nodes { .. } => loligo_pg::pg::Scan {
                            objects: vec![],
                            end: after,
                            nodes: None,
                        },
                        f => backfill::scan_in(
                            &target,
                            c,
                            &after,
                            &upto,
                            limit as usize,
                            None,
                            &f.hashes().unwrap(),
                        )
                        .unwrap(),
                    };
                    queue.extend(run(&mut pg, &s, reply(id, PeerReply::Scanned(result))));
                }
                Effect::Send {
                    id,
                    to: 2,
                    msg: PeerMsg::Chunk { chunk, .. },
                } => {
                    assert!(!held || resumed, "a chunk sent while nobackfill is set");
                    flying.push((id, chunk));
                }
                _ => {}
            }
        }
        if !held && flying.len() == 2 {
            // The flag arrives with two chunks on their way.
            held = true;
            let nobackfill = Holds {
                backfill: true,
                ..Holds::default()
            };
            queue.extend(run(&mut pg, &s, map_holding(2, vec![], nobackfill)));
            continue;
        }
        if flying.is_empty() {
            if !held || resumed {
                break;
            }
            // Both answered: nothing more goes, the slot went back.
            let fx = run(&mut pg, &s, Input::Tick { now_ms: 10_000 });
            assert!(!copies(&fx), "{fx:?}");
            let st = pg.stat().unwrap().state;
            assert!(st.contains(PgState::BACKFILL_WAIT), "{st}");
            assert!(!st.contains(PgState::BACKFILLING), "{st}");
            assert!(cursor != Cursor::End, "the backfill ended before the flag");
            // Cleared: a slot is asked for and the backfill goes on.
            resumed = true;
            run(&mut pg, &s, map_holding(3, vec![], Holds::default()));
            // (`run` grants the slot asked for at once.)
            let fx = run(&mut pg, &s, Input::Tick { now_ms: 20_000 });
            slot_asked(&fx);
            queue.extend(fx);
            continue;
        }
        let (id, ch) = flying.remove(0);
        assert_eq!(ch.after, cursor, "a chunk applied out of order");
        target
            .apply(backfill::chunk_txn(c, &ch, |_| {
                loligo_pg::pg::recovery::Prior::Replicated
            }))
            .unwrap();
        cursor = ch.end.clone();
        let fx = run(&mut pg, &s, ack(id));
        if held && !resumed && flying.is_empty() {
            assert!(
                fx.iter().any(|e| matches!(e, Effect::Release { .. })),
                "the slot is kept while held: {fx:?}"
            );
        }
        queue.extend(fx);
    }
    assert!(held && resumed);
    assert_eq!(cursor, Cursor::End);
    assert_eq!(objects_of(&target), objects_of(&s), "the target differs");
}

/// Write `tid` is durable here and on osd.1 and osd.2 (each acknowledges
/// the send of it, of `sent`: (send id, to)): the effects of the last
/// answer.
fn commit_everywhere(pg: &mut Pg, s: &MemStore, tid: u64, sent: &[(u64, i32)]) -> Vec<Effect> {
    let done = |result| Input::LocalDone { tid, result };
    let mut fx = run(pg, s, done(Ok(())));
    for from in [1, 2] {
        let (id, _) = sent
            .iter()
            .find(|x| x.1 == from)
            .unwrap_or_else(|| panic!("not sent to osd.{from}: {sent:?}"));
        fx = run(pg, s, ack(*id));
    }
    fx
}

fn op(token: u64, name: &str, ops: Vec<SubOp>) -> Input {
    Input::Op {
        op: ClientOp {
            pool: 1,
            name: name.into(),
            epoch: 1,
            ops,
            reqid: Some(loligo_types::ops::ReqId {
                client: 9,
                tid: token,
            }),
        },
        token,
        now_ms: 0,
    }
}

#[test]
fn an_object_class_method_that_writes_is_replicated_and_one_that_reads_is_not() {
    let (s, mut pg) = setup();
    let asked = run(&mut pg, &s, map(1, vec![0, 1, 2], 2));
    let fx = peer_with_empty_members(&mut pg, &s, &asked);
    apply(&s, fx);
    let kv: Vec<(Vec<u8>, Vec<u8>)> = vec![(b"k".to_vec(), b"v".to_vec())];
    let insert = SubOp::Exec {
        class: "omap".into(),
        method: "insert_new".into(),
        input: postcard::to_stdvec(&kv).unwrap(),
    };
    // The writing method: applied here and sent to both replicas, with
    // the method's omap key in the replicated transaction.
    let fx = run(&mut pg, &s, op(1, "o", vec![insert.clone()]));
    let tid = write_tid(&fx);
    let (applied, rest) = apply(&s, fx);
    assert_eq!(applied, vec![tid]);
    let mut sent = Vec::new();
    for (id, to, _, txn) in rep_ops(&rest) {
        sent.push((id, to));
        assert!(
            format!("{txn:?}").contains("OmapSetKeys"),
            "the replica gets the method's writes: {txn:?}"
        );
    }
    assert!(!sent.is_empty(), "replicated");
    let fx = commit_everywhere(&mut pg, &s, tid, &sent);
    assert!(
        matches!(&fx[..], [Effect::Reply { token: 1, reply }] if reply.result.is_ok()),
        "{fx:?}"
    );
    // The same again: refused by the method, nothing sent anywhere.
    let fx = run(&mut pg, &s, op(2, "o", vec![insert]));
    match &fx[..] {
        [Effect::Reply { token: 2, reply }] => assert!(
            matches!(
                reply.result,
                Err(OpError::MethodRefused {
                    index: 0,
                    code: 1,
                    ..
                })
            ),
            "{reply:?}"
        ),
        other => panic!("{other:?}"),
    }
    // A reading method is answered at once, on the read path.
    let count = SubOp::Exec {
        class: "omap".into(),
        method: "count".into(),
        input: postcard::to_stdvec(&(Vec::<u8>::new(), None::<Vec<u8>>, 0u64)).unwrap(),
    };
    let fx = run(&mut pg, &s, op(3, "o", vec![count]));
    match &fx[..] {
        [Effect::Reply { token: 3, reply }] => match &reply.result {
            Ok(r) => assert_eq!(
                r,
                &vec![loligo_types::ops::SubResult::Data(
                    postcard::to_stdvec(&1u64).unwrap().into()
                )]
            ),
            Err(e) => panic!("{e:?}"),
        },
        other => panic!("{other:?}"),
    }
    assert!(pg.idle());
}

#[test]
fn a_copy_whose_info_record_is_damaged_starts_over_as_a_backfill_target() {
    let s = MemStore::new();
    let c = CollectionId::pg(1, 0);
    let mut t = Transaction::new();
    t.create_collection(c);
    // Its log and objects say 7 writes; its info record is damaged.
    let good = stored(&info(7));
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    bad.push(0x80);
    t.set_record(c, b"info", bad);
    s.apply(t).unwrap();
    let found = loligo_pg::pg::repair_records(&s, c).unwrap();
    assert!(found.is_some(), "the damage is reported");
    // It claims no write now, and is a backfill target from the start.
    assert_eq!(
        loligo_pg::pg::stored_info(&s, c),
        Ok(Some(PgInfo::default()))
    );
    assert_eq!(
        loligo_pg::pg::backfill::load_cursor(&s, c),
        Ok(Some(Cursor::Start))
    );
    // Repaired once: a second look finds nothing wrong.
    assert!(loligo_pg::pg::repair_records(&s, c).unwrap().is_none());
    // Peering hears it is backfilling (never a source of the log).
    let mut pg = fresh_pg(PG, 1, PgInfo::default());
    pg.handle(&s, map(1, vec![0, 1, 2], 2));
    let fx = pg.handle(&s, query(0, 1, 1, 9, 0));
    match &info_replies(&fx, &[9])[..] {
        [(9, Ok(Some(i)))] => {
            assert!(i.backfill, "{i:?}");
            assert_eq!(i.info.last_update, Version::default());
        }
        other => panic!("{other:?}"),
    }
    // A readable record is left alone.
    let s = MemStore::new();
    let mut t = Transaction::new();
    t.create_collection(c);
    t.set_record(c, b"info", good);
    s.apply(t).unwrap();
    assert!(loligo_pg::pg::repair_records(&s, c).unwrap().is_none());
    assert_eq!(loligo_pg::pg::stored_info(&s, c), Ok(Some(info(7))));
    assert_eq!(loligo_pg::pg::backfill::load_cursor(&s, c), Ok(None));
}

#[test]
fn a_copy_with_a_damaged_log_entry_starts_over_as_a_backfill_target() {
    use loligo_pg::pg::{log_key, record, LogEntry};
    let s = MemStore::new();
    let c = CollectionId::pg(1, 0);
    let mut t = Transaction::new();
    t.create_collection(c);
    // Info, log and a kept tree say 7 writes; log entry 5 is damaged.
    t.set_record(c, b"info", stored(&info(7)));
    for v in 1..=7u64 {
        let e = LogEntry {
            version: Version { epoch: 1, v },
            name: format!("o{v}"),
            removed: false,
            reqid: None,
            gave_up: None,
            before: loligo_pg::pg::Before::Unknown,
            prev: None,
        };
        let mut b = record::encode_log(&e);
        if v == 5 {
            b.truncate(b.len() - 3);
        }
        t.set_record(c, &log_key(v), b);
    }
    t.set_record(c, loligo_pg::pg::tree::TREE_KEY, b"LPT2whatever".to_vec());
    s.apply(t).unwrap();
    let found = loligo_pg::pg::repair_records(&s, c).unwrap();
    assert!(
        found.as_deref().is_some_and(|d| d.contains("PG log")),
        "the damage is reported: {found:?}"
    );
    // It claims no write, is a backfill target from the start, keeps no
    // log entry and no tree (rebuilt from its objects at start).
    assert_eq!(
        loligo_pg::pg::stored_info(&s, c),
        Ok(Some(PgInfo::default()))
    );
    assert_eq!(
        loligo_pg::pg::backfill::load_cursor(&s, c),
        Ok(Some(Cursor::Start))
    );
    assert_eq!(s.records(c, b"log/", 100).unwrap().len(), 0);
    assert_eq!(s.record(c, loligo_pg::pg::tree::TREE_KEY).unwrap(), None);
    assert!(loligo_pg::pg::repair_records(&s, c).unwrap().is_none());
    // A malformed log key is damage too.
    let mut t = Transaction::new();
    t.set_record(c, b"info", stored(&info(1)));
    t.set_record(c, b"log/short", b"x".to_vec());
    s.apply(t).unwrap();
    let found = loligo_pg::pg::repair_records(&s, c).unwrap();
    assert!(
        found.as_deref().is_some_and(|d| d.contains("malformed")),
        "{found:?}"
    );
    // Many readable entries (more than a page of the scan) are left alone.
    let s = MemStore::new();
    let mut t = Transaction::new();
    t.create_collection(c)
        .set_record(c, b"info", stored(&info(3000)));
    for v in 1..=3000u64 {
        let e = LogEntry {
            version: Version { epoch: 1, v },
            name: "o".into(),
            removed: false,
            reqid: None,
            gave_up: None,
            before: loligo_pg::pg::Before::Unknown,
            prev: None,
        };
        t.set_record(c, &log_key(v), record::encode_log(&e));
    }
    s.apply(t).unwrap();
    assert!(loligo_pg::pg::repair_records(&s, c).unwrap().is_none());
    assert_eq!(loligo_pg::pg::stored_info(&s, c), Ok(Some(info(3000))));
    assert_eq!(s.records(c, b"log/", 5000).unwrap().len(), 3000);
}

/// The scrub maps `fx` asks members for: (send id, to).
fn scrub_map_asks(fx: &[Effect]) -> Vec<(u64, i32)> {
    sends(fx)
        .into_iter()
        .filter_map(|(id, to, msg)| matches!(msg, PeerMsg::ScrubMap { .. }).then_some((id, to)))
        .collect()
}

/// `input` settled, every scrub reservation it asks for granted: the
/// effects of all of it.
fn settle_granting(pg: &mut Pg, s: &dyn ObjectStore, input: Input) -> Vec<Effect> {
    let mut all = settle(pg, s, input);
    let mut seen = 0;
    while seen < all.len() {
        let asks = scrub_reserve_asks(&all[seen..]);
        seen = all.len();
        for (id, _) in asks {
            let fx = settle(pg, s, reply(id, PeerReply::ScrubReserved(true)));
            all.extend(fx);
        }
    }
    all
}

/// The scrub reservations `fx` asks members for: (send id, to).
fn scrub_reserve_asks(fx: &[Effect]) -> Vec<(u64, i32)> {
    sends(fx)
        .into_iter()
        .filter_map(|(id, to, msg)| matches!(msg, PeerMsg::ScrubReserve { .. }).then_some((id, to)))
        .collect()
}

/// A primary (osd.0) with members osd.1 and osd.2, active and clean,
/// holding `a` as `old` on all three.
fn clean_pair() -> (MemStore, Pg) {
    let (s, _) = setup();
    let pg = clean_trio_on(&s);
    (s, pg)
}

/// As `clean_pair`, on store `s` (with the PG's collection).
fn clean_trio_on(s: &dyn ObjectStore) -> Pg {
    let mut pg = fresh_pg(PG, 0, PgInfo::default());
    let asked = run(&mut pg, s, map(1, vec![0, 1, 2], 2));
    for osd in [1, 2] {
        let info = Some(PgInfo::default().into());
        settle(&mut pg, s, info_reply(&asked, osd, 1, info));
    }
    let fx = settle(&mut pg, s, write(1, "a", b"old", 0));
    for (id, ..) in rep_ops(&fx) {
        settle(&mut pg, s, ack(id));
    }
    assert_eq!(pg.stat().unwrap().state.to_string(), "active+clean");
    pg
}

/// A write held back while its object's scrub chunk is compared keeps its
/// place: a read of the object sent after it waits for it and sees what
/// it wrote.
#[test]
fn a_write_held_by_a_scrub_keeps_its_place_before_later_reads() {
    let (s, mut pg) = clean_pair();
    let cmd = loligo_types::scrub::PgCommand::Scrub {
        deep: true,
        repair: false,
    };
    let fx = settle_granting(&mut pg, &s, Input::Command { cmd, token: 50 });
    let asks = scrub_map_asks(&fx);
    assert_eq!(asks.iter().map(|a| a.1).collect::<Vec<_>>(), vec![1, 2]);
    // Held: nothing happens yet; the read behind it waits too.
    assert!(settle(&mut pg, &s, write(2, "a", b"new", 10)).is_empty());
    let fx = settle(&mut pg, &s, read(3, "a", 10));
    assert!(fx.is_empty(), "the read ran before the write: {fx:?}");
    // The members' maps (the same copies) end the chunk: the write goes,
    // then the read.
    let c = CollectionId::pg(1, 0);
    let (same, _) =
        loligo_pg::pg::scrub_map::build_map(&s, c, &Cursor::Start, &Cursor::End, true).unwrap();
    settle(
        &mut pg,
        &s,
        reply(asks[0].0, PeerReply::ScrubMap(same.clone())),
    );
    let fx = settle(&mut pg, &s, reply(asks[1].0, PeerReply::ScrubMap(same)));
    let reps = rep_ops(&fx);
    assert_eq!(reps.len(), 2, "{fx:?}");
    settle(&mut pg, &s, ack(reps[0].0));
    let fx = settle(&mut pg, &s, ack(reps[1].0));
    let tokens: Vec<u64> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Reply { token, .. } => Some(*token),
            _ => None,
        })
        .collect();
    assert_eq!(tokens, vec![2, 3]);
    match fx.iter().find_map(|e| match e {
        Effect::Reply { token: 3, reply } => Some(reply),
        _ => None,
    }) {
        Some(r) => match r.result.as_deref() {
            Ok([loligo_types::ops::SubResult::Data(d)]) => assert_eq!(&d[..], b"new"),
            other => panic!("{other:?}"),
        },
        None => unreachable!(),
    }
}

/// The pulls `fx` sends: (send id, to).
fn pulls(fx: &[Effect]) -> Vec<(u64, i32)> {
    sends(fx)
        .into_iter()
        .filter_map(|(id, to, msg)| matches!(msg, PeerMsg::Pull { .. }).then_some((id, to)))
        .collect()
}

/// A read that finds the primary's copy rotten mends it from a member the
/// last scrub did not find bad, and only this copy: a read's mend pushes
/// nothing to the members (a repair does that, when asked for).
#[test]
fn a_reads_mend_asks_good_members_first_and_pushes_nowhere() {
    use loligo_store::FaultyStore;
    let s = FaultyStore::new(MemStore::new());
    let c = CollectionId::pg(1, 0);
    let mut t = Transaction::new();
    t.create_collection(c);
    s.apply(t).unwrap();
    let mut pg = clean_trio_on(&s);
    // A deep scrub finds osd.1's copy wrong (its map says other data).
    let cmd = loligo_types::scrub::PgCommand::Scrub {
        deep: true,
        repair: false,
    };
    let asks = scrub_map_asks(&settle_granting(
        &mut pg,
        &s,
        Input::Command { cmd, token: 50 },
    ));
    let (good, _) =
        loligo_pg::pg::scrub_map::build_map(&s, c, &Cursor::Start, &Cursor::End, true).unwrap();
    let mut wrong = good.clone();
    wrong[0].data = wrong[0].data.map(|d| d ^ 1);
    for (id, to) in asks {
        let map = if to == 1 { wrong.clone() } else { good.clone() };
        settle(&mut pg, &s, reply(id, PeerReply::ScrubMap(map)));
    }
    assert_eq!(pg.inconsistent().len(), 1);
    // The primary's copy rots; a read pulls from osd.2, not osd.1.
    let o = loligo_pg::pg::recovery::oid("a");
    let pushed = loligo_pg::pg::recovery::read_copy(&s, c, "a").unwrap();
    s.rot(c, &o);
    let fx = settle(&mut pg, &s, read(3, "a", 100));
    let asked = pulls(&fx);
    assert_eq!(
        asked.iter().map(|p| p.1).collect::<Vec<_>>(),
        vec![2],
        "{fx:?}"
    );
    let fx = settle(&mut pg, &s, reply(asked[0].0, PeerReply::Pulled(pushed)));
    assert!(
        !sends(&fx)
            .iter()
            .any(|(_, _, m)| matches!(m, PeerMsg::Repair { .. })),
        "a read's mend pushed a repair: {fx:?}"
    );
    match fx.iter().find_map(|e| match e {
        Effect::Reply { token: 3, reply } => Some(reply),
        _ => None,
    }) {
        Some(r) => match r.result.as_deref() {
            Ok([loligo_types::ops::SubResult::Data(d)]) => assert_eq!(&d[..], b"old"),
            other => panic!("{other:?}"),
        },
        None => panic!("the read was not answered: {fx:?}"),
    }
    assert!(s.rotten().is_empty());
    assert_eq!(pg.inconsistent().len(), 1, "osd.1 is still bad");
}

/// `noscrub` and `nodeep-scrub` stop the scrubs the schedule asks for,
/// not the ones the operator asks for.
#[test]
fn scrub_flags_hold_back_scheduled_scrubs_only() {
    let (s, mut pg) = clean_pair();
    pg.scrub_schedule = loligo_pg::pg::scrub::ScrubSchedule {
        min_interval_ms: 1_000,
        max_interval_ms: 2_000,
        deep_interval_ms: 2_000,
    };
    pg.scrub_flags = loligo_pg::pg::scrub::ScrubFlags {
        no_scrub: true,
        no_deep_scrub: true,
    };
    for now_ms in [1_000, 5_000, 60_000] {
        let fx = settle_granting(&mut pg, &s, Input::Tick { now_ms });
        assert!(scrub_map_asks(&fx).is_empty(), "a scheduled scrub ran");
    }
    assert_eq!(pg.scrub_counts(), (0, 0));
    // Deep scrubs allowed again: one is due at once.
    pg.scrub_flags.no_deep_scrub = false;
    let fx = settle_granting(&mut pg, &s, Input::Tick { now_ms: 61_000 });
    assert_eq!(scrub_map_asks(&fx).len(), 2);
    assert_eq!(pg.scrub_counts().1, 1, "the schedule asked for it");
    // The operator's scrub runs under both flags.
    let (s, mut pg) = clean_pair();
    pg.scrub_flags = loligo_pg::pg::scrub::ScrubFlags {
        no_scrub: true,
        no_deep_scrub: true,
    };
    let cmd = loligo_types::scrub::PgCommand::Scrub {
        deep: true,
        repair: false,
    };
    let fx = settle_granting(&mut pg, &s, Input::Command { cmd, token: 50 });
    assert_eq!(scrub_map_asks(&fx).len(), 2);
}

/// A clean trio's primary, its wall clock from `base_ms`, after a deep
/// scrub every member agrees with.
fn deep_scrubbed_pair(base_ms: u64) -> (MemStore, Pg) {
    let (s, mut pg) = clean_pair();
    pg.clock_base_unix_ms = base_ms;
    let cmd = loligo_types::scrub::PgCommand::Scrub {
        deep: true,
        repair: false,
    };
    let asks = scrub_map_asks(&settle_granting(
        &mut pg,
        &s,
        Input::Command { cmd, token: 50 },
    ));
    let c = CollectionId::pg(1, 0);
    let (same, _) =
        loligo_pg::pg::scrub_map::build_map(&s, c, &Cursor::Start, &Cursor::End, true).unwrap();
    for (id, _) in asks {
        settle(&mut pg, &s, reply(id, PeerReply::ScrubMap(same.clone())));
    }
    (s, pg)
}

/// A new primary on store `s` (a restart), its wall clock from `base_ms`,
/// active with its members answering, one tick on.
fn primary_again(s: &MemStore, base_ms: u64) -> Pg {
    let c = CollectionId::pg(1, 0);
    let info = loligo_pg::pg::record::decode_info(&s.record(c, b"info").unwrap().unwrap()).unwrap();
    let mut again = fresh_pg(PG, 0, PgInfo::default());
    again.clock_base_unix_ms = base_ms;
    let asked = run(&mut again, s, map(1, vec![0, 1, 2], 2));
    for osd in [1, 2] {
        let info = Some(info.into());
        settle(&mut again, s, info_reply(&asked, osd, 1, info));
    }
    assert_eq!(again.stat().unwrap().state.to_string(), "active+clean");
    settle(&mut again, s, Input::Tick { now_ms: 10 });
    again
}

/// A primary's scrub stamps outlive it: kept in the `scrub` record, read
/// by the next primary on that store.
#[test]
fn scrub_stamps_are_kept_in_the_store() {
    let (s, pg) = deep_scrubbed_pair(1_700_000_000_000);
    let stamps = pg.scrub_stamps();
    assert_eq!(stamps.0, Some(1_700_000_000_000), "{stamps:?}");
    assert_eq!(stamps.0, stamps.1);
    assert_eq!(pg.stat().unwrap().last_deep_scrub_stamp, 1_700_000_000_000);
    let kept = s
        .record(CollectionId::pg(1, 0), loligo_pg::pg::scrub::SCRUB_KEY)
        .unwrap()
        .unwrap();
    assert_eq!(
        loligo_pg::pg::record::decode_scrub_stamps(&kept).unwrap(),
        (1_700_000_000_000, 1_700_000_000_000)
    );
    // A new primary on this store (a restart) knows them.
    let again = primary_again(&s, 1_700_000_500_000);
    assert_eq!(again.scrub_stamps(), stamps);
}

/// With automatic repair on, what a scheduled deep scrub found is repaired
/// when it is few enough; more is left to the operator.
#[test]
fn a_scheduled_deep_scrub_repairs_a_few_errors_when_asked_to() {
    for (most, repaired) in [(Some(5), true), (Some(0), false), (None, false)] {
        let (s, mut pg) = clean_pair();
        pg.scrub_auto_repair = most;
        pg.scrub_schedule = loligo_pg::pg::scrub::ScrubSchedule {
            min_interval_ms: 0,
            max_interval_ms: 0,
            deep_interval_ms: 1_000,
        };
        let asks = scrub_map_asks(&settle_granting(&mut pg, &s, Input::Tick { now_ms: 5_000 }));
        assert_eq!(asks.len(), 2);
        let c = CollectionId::pg(1, 0);
        let (good, _) =
            loligo_pg::pg::scrub_map::build_map(&s, c, &Cursor::Start, &Cursor::End, true).unwrap();
        let mut wrong = good.clone();
        wrong[0].data = wrong[0].data.map(|d| d ^ 1);
        let mut fx = Vec::new();
        for (id, to) in asks {
            let map = if to == 1 { wrong.clone() } else { good.clone() };
            fx.extend(settle(&mut pg, &s, reply(id, PeerReply::ScrubMap(map))));
        }
        let repairs: Vec<i32> = sends(&fx)
            .iter()
            .filter(|(_, _, m)| matches!(m, PeerMsg::Repair { .. }))
            .map(|(_, to, _)| *to)
            .collect();
        assert_eq!(repairs == vec![1], repaired, "{most:?}: {repairs:?}");
    }
}

/// A scrub runs only while its primary holds a scrub slot on its own OSD
/// and on each member's (Ceph's `osd_max_scrubs`): it takes them one OSD
/// at a time in the order of their ids (so no two primaries wait for
/// each other), waits for its own OSD's to be given back, a member that
/// says no makes it give back what it holds, and every slot comes back
/// when the scrub ends.
#[test]
fn a_scrub_holds_a_slot_on_every_member_while_it_runs() {
    let (s, mut pg) = clean_pair();
    let slots = loligo_pg::scrub_slots::ScrubSlots::new(1);
    pg.scrub_slots = slots.clone();
    let busy = slots.try_take().unwrap();
    let cmd = loligo_types::scrub::PgCommand::Scrub {
        deep: true,
        repair: false,
    };
    // This OSD's one slot is taken (another PG's scrub): nobody is asked,
    // and the PG waits to be woken.
    let fx = settle(&mut pg, &s, Input::Command { cmd, token: 50 });
    assert!(scrub_reserve_asks(&fx).is_empty() && scrub_map_asks(&fx).is_empty());
    assert_eq!(slots.waiting(), 1);
    drop(busy);
    let fx = settle(&mut pg, &s, Input::ScrubSlotFree { now_ms: 100 });
    let asks = scrub_reserve_asks(&fx);
    assert_eq!(asks.iter().map(|a| a.1).collect::<Vec<_>>(), vec![1]);
    assert_eq!(slots.held(), 1);
    // osd.1 says yes: then osd.2 is asked, and has no slot free: osd.1's
    // goes back, and the primary's own.
    let fx = settle(
        &mut pg,
        &s,
        reply(asks[0].0, PeerReply::ScrubReserved(true)),
    );
    let asks = scrub_reserve_asks(&fx);
    assert_eq!(asks.iter().map(|a| a.1).collect::<Vec<_>>(), vec![2]);
    let fx = settle(
        &mut pg,
        &s,
        reply(asks[0].0, PeerReply::ScrubReserved(false)),
    );
    let released: Vec<i32> = sends(&fx)
        .iter()
        .filter(|(_, _, m)| matches!(m, PeerMsg::ScrubRelease { .. }))
        .map(|(_, to, _)| *to)
        .collect();
    assert_eq!(released, vec![1]);
    assert_eq!(slots.held(), 0);
    assert!(!pg.holds_scrub_slot());
    let fx = settle(&mut pg, &s, Input::Tick { now_ms: 200 });
    assert!(scrub_reserve_asks(&fx).is_empty());
    let fx = settle_granting(&mut pg, &s, Input::Tick { now_ms: 10_000 });
    let maps = scrub_map_asks(&fx);
    assert_eq!(maps.len(), 2, "{fx:?}");
    let c = CollectionId::pg(1, 0);
    let (same, _) =
        loligo_pg::pg::scrub_map::build_map(&s, c, &Cursor::Start, &Cursor::End, true).unwrap();
    let mut fx = Vec::new();
    for (id, _) in maps {
        fx.extend(settle(
            &mut pg,
            &s,
            reply(id, PeerReply::ScrubMap(same.clone())),
        ));
    }
    // Ended: both members are told, this OSD's slot is free.
    let mut released: Vec<i32> = sends(&fx)
        .iter()
        .filter(|(_, _, m)| matches!(m, PeerMsg::ScrubRelease { .. }))
        .map(|(_, to, _)| *to)
        .collect();
    released.sort();
    assert_eq!(released, vec![1, 2]);
    assert_eq!(slots.held(), 0);
    assert!(pg.scrub_stamps().1.is_some());
}

/// A member holds one slot for its primary's scrub, refuses when its
/// OSD has none free, and gives it back when told (keeping the stamps
/// the primary sends), or when the primary has said nothing for a
/// minute.
#[test]
fn a_member_holds_a_scrub_slot_until_released_or_idle() {
    let s = MemStore::new();
    let c = CollectionId::pg(1, 0);
    let mut t = Transaction::new();
    t.create_collection(c);
    s.apply(t).unwrap();
    let mut pg = fresh_pg(PG, 1, PgInfo::default());
    let slots = loligo_pg::scrub_slots::ScrubSlots::new(1);
    pg.scrub_slots = slots.clone();
    run(&mut pg, &s, map(1, vec![0, 1, 2], 2));
    let ctx = RepCtx {
        interval: 1,
        epoch: 1,
        acting: vec![0, 1, 2],
        prev: Version::default(),
        version: Version::default(),
        change: None,
    };
    let ask = |round| {
        let msg = PeerMsg::ScrubReserve {
            pg: PG,
            from: 0,
            ctx: ctx.clone(),
            round,
        };
        peer_msg(msg, 7, 0)
    };
    let granted = |fx: &[Effect]| -> Option<bool> {
        fx.iter().find_map(|e| match e {
            Effect::Answer {
                reply: PeerReply::ScrubReserved(g),
                ..
            } => Some(*g),
            _ => None,
        })
    };
    assert_eq!(granted(&settle(&mut pg, &s, ask(1))), Some(true));
    assert_eq!(slots.held(), 1);
    // Asked again (a later round of the same primary): the same slot.
    assert_eq!(granted(&settle(&mut pg, &s, ask(2))), Some(true));
    assert_eq!(slots.held(), 1);
    // A release of an earlier round is late: the slot stays.
    let release = |round| {
        let msg = PeerMsg::ScrubRelease {
            pg: PG,
            from: 0,
            ctx: ctx.clone(),
            round,
            stamps: (1_700_000_000_000 + round, 1_700_000_000_000),
        };
        peer_msg(msg, 8, 0)
    };
    settle(&mut pg, &s, release(1));
    assert_eq!(slots.held(), 1);
    settle(&mut pg, &s, release(2));
    // The primary's stamps are kept here too (the newest), so a primary
    // that takes over on this OSD goes on from them.
    assert_eq!(
        pg.scrub_stamps(),
        (Some(1_700_000_000_002), Some(1_700_000_000_000))
    );
    let kept = s
        .record(c, loligo_pg::pg::scrub::SCRUB_KEY)
        .unwrap()
        .unwrap();
    assert_eq!(
        loligo_pg::pg::record::decode_scrub_stamps(&kept).unwrap(),
        (1_700_000_000_002, 1_700_000_000_000)
    );
    assert_eq!(slots.held(), 0);
    // No slot free on this OSD: the ask waits, and is granted the
    // moment one is given back.
    let other = slots.try_take().unwrap();
    assert_eq!(granted(&settle(&mut pg, &s, ask(3))), None);
    drop(other);
    let fx = settle(&mut pg, &s, Input::ScrubSlotFree { now_ms: 100 });
    assert_eq!(granted(&fx), Some(true));
    assert_eq!(slots.held(), 1);
    settle(&mut pg, &s, release(3));
    assert_eq!(slots.held(), 0);
    // One not given back in time: no, and nothing is held for it.
    let other = slots.try_take().unwrap();
    assert_eq!(granted(&settle(&mut pg, &s, ask(4))), None);
    assert_eq!(
        granted(&settle(&mut pg, &s, Input::Tick { now_ms: 3_000 })),
        None
    );
    let fx = settle(&mut pg, &s, Input::Tick { now_ms: 5_500 });
    assert_eq!(granted(&fx), Some(false));
    drop(other);
    assert_eq!(slots.held(), 0);
    assert!(!pg.holds_scrub_slot());
    // A primary gone quiet: its slot comes back after a minute.
    let fx = settle(&mut pg, &s, ask(5));
    assert_eq!(granted(&fx), Some(true));
    settle(&mut pg, &s, Input::Tick { now_ms: 30_000 });
    assert_eq!(slots.held(), 1);
    settle(&mut pg, &s, Input::Tick { now_ms: 66_000 });
    assert_eq!(slots.held(), 0);
    // A primary whose interval changed (this copy may not have seen the
    // change) gives back what it held before it, whatever the round.
    assert_eq!(granted(&settle(&mut pg, &s, ask(9))), Some(true));
    let later = RepCtx {
        interval: 2,
        ..ctx.clone()
    };
    let msg = PeerMsg::ScrubRelease {
        pg: PG,
        from: 0,
        ctx: later,
        round: 1,
        stamps: (0, 0),
    };
    settle(&mut pg, &s, peer_msg(msg, 8, 0));
    assert_eq!(slots.held(), 0);
}

/// Two scrubs that end within one tick still get stamps in order (an
/// operator or a test waits for the stamp to move).
#[test]
fn scrubs_ending_within_one_tick_get_increasing_stamps() {
    let (s, mut pg) = clean_pair();
    pg.clock_base_unix_ms = 1_700_000_000_000;
    // (None comes due on its own.)
    pg.scrub_schedule = loligo_pg::pg::scrub::ScrubSchedule {
        min_interval_ms: 0,
        max_interval_ms: 0,
        deep_interval_ms: 0,
    };
    let c = CollectionId::pg(1, 0);
    let (same, _) =
        loligo_pg::pg::scrub_map::build_map(&s, c, &Cursor::Start, &Cursor::End, true).unwrap();
    let mut stamps = Vec::new();
    for _ in 0..2 {
        let cmd = loligo_types::scrub::PgCommand::Scrub {
            deep: false,
            repair: false,
        };
        let fx = settle_granting(&mut pg, &s, Input::Command { cmd, token: 50 });
        let asks = scrub_map_asks(&fx);
        assert_eq!(asks.len(), 2, "{fx:?}");
        for (id, _) in asks {
            settle(&mut pg, &s, reply(id, PeerReply::ScrubMap(same.clone())));
        }
        stamps.push(pg.scrub_stamps().0.unwrap());
    }
    assert!(stamps[1] > stamps[0], "{stamps:?}");
}

/// An object whose copy here is damaged and that no member asked holds
/// at its version is unfound (`PgStat::unfound`, which health reports)
/// while its read waits, and found again once a member gives a good
/// copy.
#[test]
fn a_damaged_object_no_member_holds_is_unfound_until_mended() {
    use loligo_store::FaultyStore;
    let s = FaultyStore::new(MemStore::new());
    let c = CollectionId::pg(1, 0);
    let mut t = Transaction::new();
    t.create_collection(c);
    s.apply(t).unwrap();
    let mut pg = clean_trio_on(&s);
    let o = loligo_pg::pg::recovery::oid("a");
    let good = loligo_pg::pg::recovery::read_copy(&s, c, "a").unwrap();
    s.rot(c, &o);
    let mut fx = settle(&mut pg, &s, read(3, "a", 100));
    // Neither member holds the version (as after a write set shrank).
    while let Some(&(id, _)) = pulls(&fx).first() {
        let absent = RepError::Absent("this copy lacks a".into());
        fx = settle(&mut pg, &s, reply_err(id, absent));
    }
    let stat = pg.stat().unwrap();
    assert_eq!(stat.unfound, 1, "{stat:?}");
    assert!(
        !fx.iter()
            .any(|e| matches!(e, Effect::Reply { token: 3, .. })),
        "the read waits: {fx:?}"
    );
    // A second second on, the read asks again; a member gives a good
    // copy this time.
    let fx = settle(&mut pg, &s, Input::Tick { now_ms: 2_000 });
    let asked = pulls(&fx);
    assert!(!asked.is_empty(), "the mend asks again: {fx:?}");
    let fx = settle(&mut pg, &s, reply(asked[0].0, PeerReply::Pulled(good)));
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Reply { token: 3, .. })),
        "the read is answered: {fx:?}"
    );
    assert_eq!(pg.stat().unwrap().unfound, 0);
}

/// Stamps from a clock ahead (a primary whose clock ran a year fast) are
/// taken as this copy's now when it reads them: its schedule then runs
/// from now rather than waiting a year, and its next scrub's stamp is by
/// its own clock.
#[test]
fn scrub_stamps_from_a_clock_ahead_count_as_now() {
    const YEAR_MS: u64 = 365 * 86_400_000;
    let (s, pg) = deep_scrubbed_pair(1_700_000_000_000 + YEAR_MS);
    assert_eq!(pg.scrub_stamps().1, Some(1_700_000_000_000 + YEAR_MS));
    // A new primary on this store, its clock right.
    let again = primary_again(&s, 1_700_000_000_000);
    // Taken as the clock's now when read: not a year ahead of it.
    let now = again.wall_now();
    let (last, deep) = again.scrub_stamps();
    for stamp in [last, deep] {
        assert!(
            stamp.is_some_and(|t| (1_700_000_000_000..=now).contains(&t)),
            "{stamp:?} against now {now}"
        );
    }
    assert!(again.stat().unwrap().last_deep_scrub_stamp <= now);
}

/// A PG with fewer than min_size members serving is `peered`, not
/// active: it serves no reads either (its log may end in writes no other
/// member holds, which a later peering may roll back: a read of one, and
/// a later read without it, would go back in time), nor listings. They
/// wait.
#[test]
fn a_peered_pg_below_min_size_serves_no_reads() {
    // Object "a" written and on every member.
    let (s, mut pg) = clean_pair();
    // The replicas go: acting [0] alone, below min_size 2; osd.0 was in
    // the recorded write set, so it peers on its own.
    let record = WriteSetRecord {
        interval: 1,
        osds: vec![0, 1, 2],
    };
    settle(
        &mut pg,
        &s,
        map_record(2, vec![0], 2, Some(record), vec![0]),
    );
    let state = pg.stat().unwrap().state.to_string();
    assert!(
        state.contains("peered") && !state.contains("active"),
        "{state}"
    );
    let read = SubOp::Read { offset: 0, len: 0 };
    let fx = run(&mut pg, &s, op(2, "a", vec![read]));
    assert!(
        !fx.iter()
            .any(|e| matches!(e, Effect::Reply { token: 2, .. })),
        "a peered PG answered a read: {fx:?}"
    );
    let listing = Input::List {
        start: None,
        limit: 100,
        token: 3,
        now_ms: 0,
    };
    let fx = run(&mut pg, &s, listing);
    assert!(list_reply(&fx).is_none(), "a peered PG listed: {fx:?}");
}

/// A PG on an OSD that never ran before (so it granted no read lease it
/// forgot): a test's clock may stand still.
fn fresh_pg(id: PgId, whoami: i32, info: PgInfo) -> Pg {
    let mut pg = Pg::new(id, whoami, info);
    pg.set_read_lease(loligo_pg::pg::READ_LEASE_MS, None);
    pg
}

/// A lease renewal from `from` under (interval, epoch, acting).
fn lease_msg(from: i32, interval: u64, epoch: u64, acting: Vec<i32>) -> PeerMsg {
    PeerMsg::Lease {
        pg: PG,
        from,
        ctx: RepCtx {
            interval,
            epoch,
            acting,
            prev: Version::default(),
            version: Version::default(),
            change: None,
        },
        lease_ms: 1_000,
        prior: Default::default(),
    }
}

/// A member grants read leases to its own interval's primary only: once
/// its map shows a new interval, the old primary's renewals are refused,
/// and its peering answer says how long the grant it gave may last.
#[test]
fn a_member_grants_leases_only_to_its_own_intervals_primary() {
    let (s, _) = setup();
    let mut pg = fresh_pg(PG, 1, PgInfo::default());
    run(&mut pg, &s, map(1, vec![0, 1, 2], 2));
    let fx = run(
        &mut pg,
        &s,
        peer_msg(lease_msg(0, 1, 1, vec![0, 1, 2]), 7, 100),
    );
    assert!(
        matches!(answers(&fx)[..], [(7, PeerReply::LeaseAck)]),
        "{fx:?}"
    );
    // osd.0 is marked down: osd.1 leads a new interval.
    run(&mut pg, &s, map(2, vec![1, 2], 2));
    let fx = run(
        &mut pg,
        &s,
        peer_msg(lease_msg(0, 1, 1, vec![0, 1, 2]), 8, 200),
    );
    assert!(
        matches!(answers(&fx)[..], [(8, PeerReply::Refused(_))]),
        "{fx:?}"
    );
    // A peering answer (here to osd.2, primary of yet another interval)
    // carries what is left of the grant: 1,000 ms stretched by the drift
    // bound, from 100 ms, at 300 ms.
    run(&mut pg, &s, map(3, vec![2, 1], 2));
    let fx = run(&mut pg, &s, query(2, 3, 3, 9, 300));
    let left = match answers(&fx)[..] {
        [(9, PeerReply::Info(Some(i)))] => i.leases,
        _ => panic!("{fx:?}"),
    };
    let expect = 100 + loligo_pg::pg::stretch(1_000) - 300;
    assert_eq!(left.live().collect::<Vec<_>>(), vec![(0, expect)]);
}

/// A new interval's primary serves nothing (Ceph's `wait`) until the
/// lease a member granted the old primary, which did not answer this
/// peering, has run out on this primary's clock too.
#[test]
fn a_new_primary_waits_out_the_old_primarys_lease() {
    let (s, _) = setup();
    let mut pg = fresh_pg(PG, 1, PgInfo::default());
    let asked = run(&mut pg, &s, map(1, vec![1, 2, 3], 2));
    let mut left = loligo_pg::pg::LeasesLeft::default();
    left.0[0] = (0, 2_000);
    let info = PeerInfo {
        leases: left,
        ..PgInfo::default().into()
    };
    let now = 1_000;
    pg.clock(now);
    settle(&mut pg, &s, info_reply(&asked, 2, 1, Some(info)));
    let info = Some(PgInfo::default().into());
    settle(&mut pg, &s, info_reply(&asked, 3, 1, info));
    assert_eq!(pg.stat().unwrap().state.to_string(), "active+clean+wait");
    assert!(
        run(&mut pg, &s, read(1, "a", now)).is_empty(),
        "the read waits"
    );
    let until = now + loligo_pg::pg::stretch(2_000);
    let fx = run(&mut pg, &s, Input::Tick { now_ms: until - 1 });
    assert!(replies_to(&fx, 1).is_empty(), "{fx:?}");
    let fx = run(&mut pg, &s, Input::Tick { now_ms: until });
    assert_eq!(replies_to(&fx, 1), vec![Err(OpError::NotFound)]);
    assert_eq!(pg.stat().unwrap().state.to_string(), "active+clean");
}

/// A primary whose member has not acknowledged a renewal within the
/// lease serves no more (Ceph's `laggy`); the member's answer to the
/// next renewal lets the ops that waited go on.
#[test]
fn a_primary_whose_members_do_not_renew_its_lease_stops_serving() {
    let (s, mut pg) = setup();
    let asked = run(&mut pg, &s, map(1, vec![0, 1], 1));
    // (Peering's renewal is granted at 0 ms.)
    settle(
        &mut pg,
        &s,
        info_reply(&asked, 1, 1, Some(PgInfo::default().into())),
    );
    let lease_ms = loligo_pg::pg::READ_LEASE_MS;
    // A renewal goes out and is not answered.
    let fx = pg.handle(
        &s,
        Input::Tick {
            now_ms: lease_ms / 2,
        },
    );
    assert_eq!(lease_renewals(&fx).len(), 1, "{fx:?}");
    let fx = pg.handle(&s, read(1, "a", lease_ms - 1));
    assert_eq!(replies_to(&fx, 1), vec![Err(OpError::NotFound)]);
    // At the end of the lease granted at 0 ms, reads wait, and one more
    // renewal goes out at once.
    let fx = pg.handle(&s, read(2, "a", lease_ms));
    assert!(replies_to(&fx, 2).is_empty(), "{fx:?}");
    let again = lease_renewals(&fx);
    assert_eq!(again.len(), 1, "{fx:?}");
    assert_eq!(
        pg.stat().unwrap().state.to_string(),
        "active+undersized+degraded+laggy"
    );
    let fx = pg.handle(&s, reply(again[0].0, PeerReply::LeaseAck));
    assert_eq!(replies_to(&fx, 2), vec![Err(OpError::NotFound)]);
}

/// A member that holds the primary's interval over (it saw the interval
/// end in a map the primary skipped) refuses its lease renewals for good,
/// while another member, which skipped that map too, grants them: once
/// the first has refused for a whole lease, the primary peers again, as
/// for a refused recovery message, instead of staying laggy (a read-only
/// PG would wait for a map that never comes). Sooner, it would peer again
/// whenever a map merely reaches it late.
#[test]
fn lease_renewals_refused_as_stale_for_a_lease_make_the_primary_peer_again() {
    let (s, mut pg) = setup();
    let asked = run(&mut pg, &s, map(1, vec![0, 1, 2], 1));
    settle(
        &mut pg,
        &s,
        info_reply(&asked, 1, 1, Some(PgInfo::default().into())),
    );
    settle(
        &mut pg,
        &s,
        info_reply(&asked, 2, 1, Some(PgInfo::default().into())),
    );
    // A later map that leaves the interval as it was.
    run(&mut pg, &s, map(2, vec![0, 1, 2], 1));
    let lease_ms = loligo_pg::pg::READ_LEASE_MS;
    let stale = |id| Input::Reply {
        id,
        reply: Err(RepError::Stale("osd.1 holds the interval over".into())),
    };
    let mut now = lease_ms / 2;
    let mut refusals = 0;
    loop {
        let fx = pg.handle(&s, Input::Tick { now_ms: now });
        let renewals = lease_renewals(&fx);
        assert_eq!(renewals.len(), 2, "at {now} ms: {fx:?}");
        let mut fx = Vec::new();
        for (id, to) in renewals {
            let answer = match to {
                1 => stale(id),
                _ => reply(id, PeerReply::LeaseAck),
            };
            fx.extend(pg.handle(&s, answer));
        }
        refusals += 1;
        if now < lease_ms / 2 + lease_ms {
            assert!(sends(&fx).is_empty(), "peered again at {now} ms: {fx:?}");
        } else {
            assert_eq!(queried(&fx, 1).1, 2, "osd.1 asked about a new interval");
            break;
        }
        now += lease_ms / 4;
    }
    assert!(refusals > 2);
}

/// The results `fx` answers client op `token` with.
fn replies_to(fx: &[Effect], token: u64) -> Vec<Result<(), OpError>> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Reply { token: t, reply } if *t == token => {
                Some(reply.result.clone().map(|_| ()))
            }
            _ => None,
        })
        .collect()
}

/// As `settle`, but nothing is answered for the PG: its lease renewals
/// and write-set record asks are among the effects returned.
fn settle_unanswered(pg: &mut Pg, s: &dyn ObjectStore, input: Input) -> Vec<Effect> {
    let (mut applied, mut rest) = apply(s, pg.handle(s, input));
    while let Some(tid) = applied.pop() {
        let done = Input::LocalDone {
            tid,
            result: Ok(()),
        };
        let (more, others) = apply(s, pg.handle(s, done));
        applied.extend(more);
        rest.extend(others);
    }
    rest
}

/// A renewal sent: (send id, to, the earlier leases it carries as
/// (primary, ms left)).
type Renewal = (u64, i32, Vec<(i32, u64)>);

/// The renewals `fx` sends.
fn renewals_with_prior(fx: &[Effect]) -> Vec<Renewal> {
    sends(fx)
        .into_iter()
        .filter_map(|(id, to, msg)| match msg {
            PeerMsg::Lease { prior, .. } => Some((id, to, prior.live().collect())),
            _ => None,
        })
        .collect()
}

/// osd.1 peers `map` at `now` ms; osd.2 reports a grant to osd.0 with
/// 2,000 ms left, and every other member none: the effects of the last
/// answer, nothing answered for the PG.
fn peer_hearing_of_osd0s_lease(
    pg: &mut Pg,
    s: &MemStore,
    map: Input,
    members: &[i32],
    now: u64,
) -> Vec<Effect> {
    let asked = pg.handle(s, map);
    pg.clock(now);
    let mut fx = Vec::new();
    for &m in members {
        let mut info: PeerInfo = PgInfo::default().into();
        if m == 2 {
            info.leases.0[0] = (0, 2_000);
        }
        let (_, interval) = queried(&asked, m);
        fx = settle_unanswered(pg, s, info_reply(&asked, m, interval, Some(info)));
    }
    fx
}

/// A new primary that waits out an earlier primary's lease passes the
/// wait on in its renewals, and asks the monitors to record its write set
/// only once every member has acknowledged one: a later interval's
/// primary that hears only from those members still learns of the lease
/// (else a remap onto new OSDs, then another before the wait ended, let a
/// primary serve while the old one's lease held).
#[test]
fn a_waiting_primary_passes_the_wait_on_before_its_write_set_is_recorded() {
    let (s, _) = setup();
    let mut pg = fresh_pg(PG, 1, PgInfo::default());
    let now = 1_000;
    let fx = peer_hearing_of_osd0s_lease(&mut pg, &s, map(1, vec![1, 2, 3], 2), &[2, 3], now);
    let renewals = renewals_with_prior(&fx);
    let wait = loligo_pg::pg::stretch(2_000);
    assert_eq!(
        renewals
            .iter()
            .map(|r| (r.1, r.2.clone()))
            .collect::<Vec<_>>(),
        vec![(2, vec![(0, wait)]), (3, vec![(0, wait)])],
        "{fx:?}"
    );
    let records = |fx: &[Effect]| {
        fx.iter()
            .filter(|e| matches!(e, Effect::RecordWriteSet(_)))
            .count()
    };
    assert_eq!(records(&fx), 0, "recorded before the members knew: {fx:?}");
    let fx = pg.handle(&s, reply(renewals[0].0, PeerReply::LeaseAck));
    assert_eq!(records(&fx), 0, "recorded before osd.3 knew: {fx:?}");
    let fx = pg.handle(&s, reply(renewals[1].0, PeerReply::LeaseAck));
    assert_eq!(records(&fx), 1, "{fx:?}");
}

/// A member keeps the wait its primary passed on as a grant of its own to
/// the earlier primary, and reports it in its peering answers.
#[test]
fn a_member_reports_the_earlier_lease_its_primary_waited_out() {
    let (s, _) = setup();
    let mut pg = fresh_pg(PG, 2, PgInfo::default());
    run(&mut pg, &s, map(1, vec![1, 2, 3], 2));
    let mut msg = lease_msg(1, 1, 1, vec![1, 2, 3]);
    if let PeerMsg::Lease { prior, .. } = &mut msg {
        prior.0[0] = (0, 1_500);
    }
    let fx = run(&mut pg, &s, peer_msg(msg, 7, 100));
    assert!(
        matches!(answers(&fx)[..], [(7, PeerReply::LeaseAck)]),
        "{fx:?}"
    );
    run(&mut pg, &s, map(2, vec![3, 2], 2));
    let fx = run(&mut pg, &s, query(3, 2, 2, 9, 300));
    let left = match answers(&fx)[..] {
        [(9, PeerReply::Info(Some(i)))] => i.leases,
        _ => panic!("{fx:?}"),
    };
    let stretch = loligo_pg::pg::stretch;
    assert_eq!(
        left.live().collect::<Vec<_>>(),
        vec![
            (0, 100 + stretch(1_500) - 300),
            (1, 100 + stretch(1_000) - 300)
        ]
    );
}

/// A primary whose wait a new interval cuts short waits the rest out in
/// the next one, though none of its new members granted the lease.
#[test]
fn a_wait_cut_short_by_a_new_interval_goes_on_in_the_next() {
    let (s, _) = setup();
    let mut pg = fresh_pg(PG, 1, PgInfo::default());
    let now = 1_000;
    let fx = peer_hearing_of_osd0s_lease(&mut pg, &s, map(1, vec![1, 2, 3], 2), &[2, 3], now);
    for (id, _, _) in renewals_with_prior(&fx) {
        pg.handle(&s, reply(id, PeerReply::LeaseAck));
    }
    let until = now + loligo_pg::pg::stretch(2_000);
    // A new interval half-way through the wait, with new members only.
    pg.clock(now + 500);
    let asked = run(&mut pg, &s, map(2, vec![1, 4, 5], 2));
    for m in [4, 5] {
        let info = Some(PgInfo::default().into());
        settle(&mut pg, &s, info_reply(&asked, m, 2, info));
    }
    assert!(
        pg.stat().unwrap().state.to_string().contains("wait"),
        "{:?}",
        pg.stat()
    );
    assert!(
        run(&mut pg, &s, read(1, "a", now + 500)).is_empty(),
        "the read waits"
    );
    let fx = run(&mut pg, &s, Input::Tick { now_ms: until - 1 });
    assert!(replies_to(&fx, 1).is_empty(), "{fx:?}");
    let fx = run(&mut pg, &s, Input::Tick { now_ms: until });
    assert_eq!(replies_to(&fx, 1), vec![Err(OpError::NotFound)]);
}

/// A primary of osd.0, osd.1 and osd.2, active, whose write of "a"
/// (request 1) every member acknowledged.
fn clean_with_one_write() -> (MemStore, Pg) {
    let (s, mut pg) = setup();
    let asked = run(&mut pg, &s, map(1, vec![0, 1, 2], 2));
    let fx = peer_with_empty_members(&mut pg, &s, &asked);
    land(&mut pg, &s, fx);
    let fx = run(&mut pg, &s, write(1, "a", b"x", 0));
    let rest = land(&mut pg, &s, fx);
    for (id, ..) in rep_ops(&rest) {
        run(&mut pg, &s, ack(id));
    }
    (s, pg)
}

/// A merge's hold (`Holds::merge`): the map that starts it ends the
/// interval; once the PG has peered again and is clean, its primary
/// reports itself ready at its head, a write waits (nothing is sent to
/// the members) without taking that back, and a retry of a write in the
/// log is answered at once; the map that ends the hold
/// ends the interval again, and the write runs once the PG is active.
#[test]
fn a_merge_hold_makes_writes_wait_and_the_clean_primary_report_ready() {
    let (s, mut pg) = clean_with_one_write();
    assert!(pg.is_clean());
    assert_eq!(pg.stat().unwrap().merge_ready, None, "no hold, not ready");
    let head = head_of(&s);
    let hold = Holds {
        merge: true,
        ..Holds::default()
    };
    let asked = run(&mut pg, &s, map_holding(2, vec![], hold));
    let (_, interval) = queried(&asked, 1);
    assert_eq!(interval, 2, "the hold starts an interval");
    assert_eq!(pg.stat().unwrap().merge_ready, None, "peering: not ready");
    let at_head = PgInfo {
        last_update: head,
        objects: 1,
        ..PgInfo::default()
    };
    run(&mut pg, &s, info_reply(&asked, 1, 2, Some(at_head.into())));
    let fx = run(&mut pg, &s, info_reply(&asked, 2, 2, Some(at_head.into())));
    land(&mut pg, &s, fx);
    assert!(pg.is_clean());
    assert_eq!(pg.stat().unwrap().merge_ready, Some(head));
    let fx = run(&mut pg, &s, write(2, "b", b"y", 0));
    assert!(rep_ops(&fx).is_empty() && answers(&fx).is_empty(), "{fx:?}");
    assert_eq!(pg.stat().unwrap().merge_ready, Some(head));
    // A retry of the write in the log is answered, not held (the log,
    // which knows it, goes with the merge).
    let fx = run(&mut pg, &s, write(1, "a", b"x", 0));
    match &fx[..] {
        [Effect::Reply { token: 1, reply }] => assert!(reply.result.is_ok(), "{reply:?}"),
        other => panic!("{other:?}"),
    }
    // The hold ends: a new interval, and the write runs once active.
    let asked = run(&mut pg, &s, map(3, vec![0, 1, 2], 2));
    run(&mut pg, &s, info_reply(&asked, 1, 3, Some(at_head.into())));
    let fx = run(&mut pg, &s, info_reply(&asked, 2, 3, Some(at_head.into())));
    let fx = land(&mut pg, &s, fx);
    assert_eq!(rep_ops(&fx).len(), 2, "the waiting write goes out: {fx:?}");
    assert_eq!(pg.stat().unwrap().merge_ready, None);
}

/// A merged copy's log starts empty, and it carries the joined logs'
/// request ids (`DUPS_KEY`, see `merge::plan`): under a new interval, a
/// retry of a write acknowledged before the merge is answered without
/// being applied again (nothing goes to the members), while a new write
/// runs. Without the carried ids the retry was a new write, which could
/// undo a later client's write to the same object.
#[test]
fn a_retry_of_a_write_acknowledged_before_a_merge_is_answered_not_applied() {
    use loligo_pg::pg::{record, recovery, DUPS_KEY};
    let (s, mut pg) = clean_with_one_write();
    let head = head_of(&s);
    let at_head = PgInfo {
        last_update: head,
        objects: 1,
        ..PgInfo::default()
    };
    // The merge's hold, then the merge.
    let hold = Holds {
        merge: true,
        ..Holds::default()
    };
    let asked = run(&mut pg, &s, map_holding(2, vec![], hold));
    run(&mut pg, &s, info_reply(&asked, 1, 2, Some(at_head.into())));
    let fx = run(&mut pg, &s, info_reply(&asked, 2, 2, Some(at_head.into())));
    land(&mut pg, &s, fx);
    // What the merge leaves: no log, the ids carried.
    let c = CollectionId::pg(1, 0);
    let mut t = Transaction::new();
    for (k, _) in recovery::records_with(&s, c, b"log/", None).unwrap() {
        t.rm_record(c, &k);
    }
    let id = loligo_types::ops::ReqId { client: 9, tid: 1 };
    t.set_record(c, DUPS_KEY, record::encode_dups(&[(id, head)]));
    s.apply(t).unwrap();
    let asked = run(&mut pg, &s, map(3, vec![0, 1, 2], 2));
    run(&mut pg, &s, info_reply(&asked, 1, 3, Some(at_head.into())));
    let fx = run(&mut pg, &s, info_reply(&asked, 2, 3, Some(at_head.into())));
    land(&mut pg, &s, fx);
    assert!(pg.is_clean());
    let fx = run(&mut pg, &s, write(1, "a", b"x", 0));
    match &fx[..] {
        [Effect::Reply { token: 1, reply }] => assert!(reply.result.is_ok(), "{reply:?}"),
        other => panic!("the retry was not answered at once: {other:?}"),
    }
    let fx = run(&mut pg, &s, write(2, "a", b"y", 0));
    let rest = land(&mut pg, &s, fx);
    assert_eq!(rep_ops(&rest).len(), 2, "a new write runs: {rest:?}");
}

/// A write's object change goes to the members whether or not the
/// primary keeps a Merkle tree itself (its own load may have failed, or
/// it keeps none): each member stamps its own tree from it. A primary
/// whose tree load met a read error sent none, and the members' trees
/// missed its writes (found by the simulator with PG splits).
#[test]
fn a_primary_without_a_tree_still_tells_members_what_its_write_changed() {
    let (s, mut pg) = setup();
    pg.merkle_leaves = 0;
    let asked = run(&mut pg, &s, map(1, vec![0, 1, 2], 2));
    let fx = peer_with_empty_members(&mut pg, &s, &asked);
    land(&mut pg, &s, fx);
    assert!(pg.tree().is_none(), "this primary keeps no tree");
    let fx = run(&mut pg, &s, write(1, "a", b"x", 0));
    let sent = rep_ops(&fx);
    assert_eq!(sent.len(), 2);
    for (_, to, ctx, _) in sent {
        let c = ctx
            .change
            .as_ref()
            .unwrap_or_else(|| panic!("osd.{to}: no change"));
        assert_eq!(
            (c.name.as_str(), c.old, c.new),
            ("a", None, Some(ctx.version))
        );
    }
}
