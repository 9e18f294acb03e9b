//! An erasure-coded PG (4+2) on six OSDs, each a PG state machine over its
//! own MemStore, with a small in-process network that carries every
//! message at once: writes are split into shards, reads gather and decode
//! them (around missing shards too), and the bytes read back always equal
//! a model of the acknowledged writes.

use loligo_ec::stripe::Striper;
use loligo_pg::ec;
use loligo_pg::exec::VERSION_ATTR;
use loligo_pg::msg::{PeerMsg, PeerReply};
use loligo_pg::pg::{route, Effect, Host, Input, ListResult, MonAsk, Pg, PgInfo, RepError};
use loligo_store::{CollectionId, MemStore, ObjectId, ObjectStore, Transaction};
use loligo_testkit::Rng;
use loligo_types::ops::{ClientOp, OpError, OpReply, SubOp, SubResult};
use loligo_types::osdmap::{EcPlugin, EcProfile, PoolKind};
use loligo_types::{OsdMap, PgId, Pool};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

const PG: PgId = PgId { pool: 1, ps: 0 };
const N: usize = 6;
/// OSDs in the cluster: the PG's six and a spare to backfill onto.
const OSDS: usize = 7;

fn profile(plugin: EcPlugin) -> EcProfile {
    EcProfile {
        name: "p".into(),
        plugin,
        k: 4,
        m: 2,
        s: 1,
        l: 2,
        optimal: false,
        alignment: 64,
        stripe_unit: 0,
    }
}

/// The PG's pool: of one PG, so that PG owns every object the tests name.
fn pool(min_size: u32) -> Pool {
    let mut p = OsdMap::new("f", "osd")
        .unwrap()
        .replicated_pool("p", 1, N as u32, min_size);
    p.kind = PoolKind::Erasure {
        profile: "p".into(),
    };
    p
}

/// The xattrs that label a copy's object as shard `shard` of an object
/// of `size` bytes at `version`.
fn shard_labels(
    shard: u8,
    size: u64,
    version: loligo_types::ops::Version,
) -> Vec<(String, Vec<u8>)> {
    vec![
        (ec::SHARD_ATTR.to_string(), vec![shard]),
        (
            ec::SIZE_ATTR.to_string(),
            postcard::to_stdvec(&size).unwrap(),
        ),
        (
            VERSION_ATTR.to_string(),
            postcard::to_stdvec(&version).unwrap(),
        ),
    ]
}

/// A message the network carries: OSD `from`'s send `id`, to OSD `to`.
#[derive(Clone, Copy, Debug)]
struct Sent {
    from: usize,
    id: u64,
    to: usize,
}

struct Cluster {
    stores: Vec<MemStore>,
    pgs: Vec<Pg>,
    striper: Arc<Striper>,
    epoch: u64,
    acting: Vec<i32>,
    min_size: u32,
    queue: VecDeque<(usize, Input)>,
    /// Messages delivered (or on their way), by the token their receiver
    /// answers with.
    awaits: BTreeMap<u64, Sent>,
    /// Messages the network lost: their senders hear the member was
    /// unreachable once the next map has reached them.
    lost: Vec<Sent>,
    next_token: u64,
    replies: BTreeMap<u64, OpReply>,
    /// OSDs that are down: nothing reaches them.
    down: Vec<usize>,
    /// Shard bytes pushed by recovery, and backfill chunks sent.
    pushed_bytes: u64,
    chunks: u64,
    /// The most backfill chunks one primary had under way at once
    /// (rebuilding or sent, not yet answered).
    most_flying: usize,
    /// Replica writes to these OSDs are lost (the write stays in flight).
    drop_to: Vec<i32>,
    /// Recovery pushes to these OSDs are lost (likewise).
    drop_pushes_to: Vec<i32>,
    /// Backfill chunks carry these objects as ones the primary lacks,
    /// not copied (as a primary whose own copy is stale sends them).
    chunks_lack: Vec<String>,
    /// Recovery pushes sent: (target, object).
    pushes: Vec<(i32, String)>,
    /// OSDs down in the last map published, and each OSD's boot epoch.
    was_down: Vec<usize>,
    up_from: Vec<u64>,
    /// The PGs' clock (ms): it moves only as maps are published.
    now_ms: u64,
}

/// OSD `osd`'s end of the network: the host of its PG, through which
/// `route` performs the PG's effects.
struct Osd<'a> {
    net: &'a mut Cluster,
    osd: usize,
}

impl Host for Osd<'_> {
    fn reply(&mut self, token: u64, reply: OpReply) {
        self.net.replies.insert(token, reply);
    }

    fn list_reply(&mut self, token: u64, result: ListResult) {
        panic!(
            "osd.{}: unexpected listing answer {token} in a healthy EC test: {result:?}",
            self.osd
        );
    }

    fn command_reply(&mut self, token: u64, result: loligo_pg::pg::CommandResult) {
        panic!(
            "osd.{}: unexpected command answer {token} in a healthy EC test: {result:?}",
            self.osd
        );
    }

    /// Carry `msg` to `to`'s PG as a peer message (or lose it, as a test
    /// asks): its answer comes back as the reply to `id`.
    fn send(&mut self, id: u64, to: i32, mut msg: PeerMsg) {
        let (c, from) = (&mut *self.net, self.osd);
        assert!(
            (0..OSDS as i32).contains(&to),
            "osd.{from} sends to osd.{to}, which does not exist: {msg:?}"
        );
        let lost = match &mut msg {
            PeerMsg::RepOp { .. } => c.drop_to.contains(&to),
            PeerMsg::Push { .. } if c.drop_pushes_to.contains(&to) => true,
            PeerMsg::Push { push, .. } => {
                c.pushes.push((to, push.name.clone()));
                c.pushed_bytes += push.copy.as_ref().map_or(0, |c| c.data.len() as u64);
                false
            }
            PeerMsg::Chunk { chunk, .. } => {
                let lack = |n: &String| c.chunks_lack.contains(n);
                let lacked: Vec<_> = chunk
                    .pushes
                    .iter()
                    .filter(|p| lack(&p.name))
                    .map(|p| (p.name.clone(), p.version))
                    .collect();
                chunk.pushes.retain(|p| !lack(&p.name));
                chunk.lacks.extend(lacked);
                c.chunks += 1;
                c.pushed_bytes += chunk
                    .pushes
                    .iter()
                    .map(|p| p.copy.as_ref().map_or(0, |c| c.data.len() as u64))
                    .sum::<u64>();
                false
            }
            // A stray's question to the primary is never carried: no copy
            // here is ever removed as a stray.
            PeerMsg::StrayCheck { .. } => true,
            _ => false,
        };
        let sent = Sent {
            from,
            id,
            to: to as usize,
        };
        if lost {
            return c.lost.push(sent);
        }
        c.next_token += 1;
        let token = c.next_token;
        c.awaits.insert(token, sent);
        let input = Input::Peer {
            msg,
            token,
            now_ms: 0,
        };
        c.queue.push_back((to as usize, input));
    }

    /// The answer goes back to the sender of the message taken as
    /// `token`, as the reply to its send.
    fn answer(&mut self, token: u64, reply: PeerReply) {
        let Some(sent) = self.net.awaits.remove(&token) else {
            return;
        };
        assert_eq!(
            sent.to, self.osd,
            "osd.{} answers another's message",
            self.osd
        );
        let input = Input::Reply {
            id: sent.id,
            reply: Ok(reply),
        };
        self.net.queue.push_back((sent.from, input));
    }

    fn apply(&mut self, tid: u64, txn: Transaction, _sync: bool) {
        let o = self.osd;
        self.net.stores[o].apply(txn).unwrap();
        let input = Input::LocalDone {
            tid,
            result: Ok(()),
        };
        self.net.queue.push_back((o, input));
    }

    fn monitor(&mut self, ask: MonAsk) {
        let o = self.osd;
        match ask {
            MonAsk::Record(a) => {
                let interval = a.record.interval;
                self.net
                    .queue
                    .push_back((o, Input::WriteSetRecorded { interval }));
            }
            ask => panic!("osd.{o}: unexpected ask of the monitors in a healthy EC test: {ask:?}"),
        }
    }

    fn reserve(&mut self, ask: u64, _priority: u64) {
        self.net
            .queue
            .push_back((self.osd, Input::Reserved { ask }));
    }

    fn release(&mut self, _ask: u64) {}

    fn continue_later(&mut self) {
        self.net.queue.push_back((self.osd, Input::Continue));
    }

    fn read(&mut self, tid: u64, job: loligo_pg::pg::ReadJob) {
        panic!(
            "osd.{}: an erasure-coded PG handed read {tid} aside: {job:?}",
            self.osd
        );
    }
}

impl Cluster {
    fn new(plugin: EcPlugin, min_size: u32) -> Cluster {
        let striper = Arc::new(profile(plugin).striper().unwrap());
        let mut stores = Vec::new();
        let mut pgs = Vec::new();
        for o in 0..OSDS {
            let s = MemStore::new();
            let mut t = Transaction::new();
            t.create_collection(CollectionId::pg(1, 0));
            s.apply(t).unwrap();
            stores.push(s);
            pgs.push(fresh_pg(PG, o as i32, PgInfo::default()));
        }
        let mut c = Cluster {
            stores,
            pgs,
            striper,
            epoch: 0,
            acting: (0..N as i32).collect(),
            min_size,
            queue: VecDeque::new(),
            awaits: BTreeMap::new(),
            lost: Vec::new(),
            next_token: 1_000_000,
            replies: BTreeMap::new(),
            down: Vec::new(),
            pushed_bytes: 0,
            chunks: 0,
            most_flying: 0,
            drop_to: Vec::new(),
            drop_pushes_to: Vec::new(),
            chunks_lack: Vec::new(),
            pushes: Vec::new(),
            was_down: Vec::new(),
            up_from: vec![1; OSDS],
            now_ms: 0,
        };
        c.publish();
        c
    }

    /// A new map epoch with the current acting set (holes for down OSDs).
    fn publish(&mut self) {
        self.epoch += 1;
        // A heartbeat grace passes before the monitors mark an OSD down
        // (an earlier primary's read lease with it).
        self.now_ms += 10_000;
        // An OSD that comes back restarted: its PG starts from its store
        // (what it had in memory died with it), and it booted now.
        for o in std::mem::take(&mut self.was_down) {
            if !self.down.contains(&o) {
                let info = loligo_pg::pg::stored_info(&self.stores[o], CollectionId::pg(1, 0))
                    .expect("info records read")
                    .unwrap_or_default();
                self.pgs[o] = fresh_pg(PG, o as i32, info);
                self.up_from[o] = self.epoch;
            }
        }
        self.was_down = self.down.clone();
        // Whatever was on its way to or from a down OSD is lost, and so
        // is what the network lost: a sender that is down died with its
        // sends (it restarts with none); one that is up hears the member
        // was unreachable once it has the new map.
        let down = self.down.clone();
        let mut unreachable = std::mem::take(&mut self.lost);
        self.awaits.retain(|_, s| {
            let gone = down.contains(&s.from) || down.contains(&s.to);
            if gone {
                unreachable.push(*s);
            }
            !gone
        });
        unreachable.retain(|s| !down.contains(&s.from));
        let acting: Vec<i32> = self
            .acting
            .iter()
            .map(|&o| {
                if self.down.contains(&(o as usize)) {
                    loligo_crush::ITEM_NONE
                } else {
                    o
                }
            })
            .collect();
        let primary = acting
            .iter()
            .copied()
            .find(|&o| o != loligo_crush::ITEM_NONE)
            .unwrap_or(-1);
        for o in 0..OSDS {
            if self.down.contains(&o) {
                continue;
            }
            let up_from = acting
                .iter()
                .filter(|&&a| a != loligo_crush::ITEM_NONE)
                .map(|&a| self.up_from[a as usize])
                .max()
                .unwrap_or(0);
            let map = self.map_of(self.epoch, acting.clone(), up_from, primary);
            self.queue.push_back((o, map));
        }
        for s in unreachable {
            let input = Input::Reply {
                id: s.id,
                reply: Err(RepError::Failed("unreachable".into())),
            };
            self.queue.push_back((s.from, input));
        }
        self.run();
    }

    /// A map at `epoch` of the whole acting set with `primary` first to
    /// serve, for a PG fed by hand (no record yet).
    fn map_at(&self, epoch: u64, primary: i32) -> Input {
        self.map_of(epoch, self.acting.clone(), 0, primary)
    }

    /// A map at `epoch` with `acting` (also CRUSH's set) and no record.
    fn map_of(&self, epoch: u64, acting: Vec<i32>, acting_up_from: u64, primary: i32) -> Input {
        Input::Map {
            epoch,
            up: acting.clone(),
            acting,
            acting_up_from,
            primary,
            pool: pool(self.min_size),
            record: None,
            record_up: vec![],
            toofull: vec![],
            holds: Default::default(),
            spares: vec![],
            striper: Some(self.striper.clone()),
            primary_temp: None,
            unfound_lost: 0,
            now_ms: 0,
        }
    }

    /// Feed the queued inputs to their PGs, and route what they do
    /// until nothing is left. An input to a down OSD never arrives: a
    /// message to it is lost (its sender hears so with the next map).
    fn run(&mut self) {
        while let Some((o, input)) = self.queue.pop_front() {
            if self.down.contains(&o) {
                if let Input::Peer { token, .. } = input {
                    if let Some(s) = self.awaits.remove(&token) {
                        self.lost.push(s);
                    }
                }
                continue;
            }
            self.pgs[o].clock(self.now_ms);
            let fx = self.pgs[o].handle(&self.stores[o], input);
            self.most_flying = self.most_flying.max(self.pgs[o].chunk_pipeline().0);
            route(fx, &mut Osd { net: self, osd: o });
        }
    }

    fn primary(&self) -> usize {
        self.acting
            .iter()
            .map(|&o| o as usize)
            .find(|o| !self.down.contains(o))
            .unwrap()
    }

    fn op(&mut self, name: &str, ops: Vec<SubOp>) -> Result<Vec<SubResult>, OpError> {
        self.next_token += 1;
        let token = self.next_token;
        let input = Input::Op {
            op: ClientOp {
                pool: 1,
                name: name.into(),
                epoch: self.epoch,
                ops,
                reqid: Some(loligo_types::ops::ReqId {
                    client: 1,
                    tid: token,
                }),
            },
            token,
            now_ms: 0,
        };
        let p = self.primary();
        self.queue.push_back((p, input));
        self.run();
        self.replies
            .remove(&token)
            .expect("every op is answered")
            .result
    }

    /// Send an op and run the network; `None` while it is unanswered.
    fn op_maybe(&mut self, name: &str, ops: Vec<SubOp>) -> Option<Result<Vec<SubResult>, OpError>> {
        self.next_token += 1;
        let token = self.next_token;
        let input = Input::Op {
            op: ClientOp {
                pool: 1,
                name: name.into(),
                epoch: self.epoch,
                ops,
                reqid: Some(loligo_types::ops::ReqId {
                    client: 1,
                    tid: token,
                }),
            },
            token,
            now_ms: 0,
        };
        let p = self.primary();
        self.queue.push_back((p, input));
        self.run();
        self.replies.remove(&token).map(|r| r.result)
    }

    /// Every shard of `name` on every OSD equals a fresh encode of `data`.
    fn assert_shards(&self, name: &str, data: &[u8], why: &str) {
        let oid = ObjectId::new(loligo_crush::hash::str_hash_rjenkins(name.as_bytes()), name);
        let shards = self.striper.encode(data).unwrap();
        for (i, &o) in self.acting.iter().enumerate() {
            let s = &self.stores[o as usize];
            let got = s
                .read(CollectionId::pg(1, 0), &oid, &[(0, shards[i].len() as u64)])
                .unwrap();
            assert!(got[0] == shards[i], "{why}: shard {i} of {name} differs");
        }
    }

    fn read(&mut self, name: &str, offset: u64, len: u64) -> Result<Vec<u8>, OpError> {
        match self.op(name, vec![SubOp::Read { offset, len }])?.pop() {
            Some(SubResult::Data(d)) => Ok(d.to_vec()),
            r => panic!("a read answered {r:?}"),
        }
    }
}

#[test]
fn writes_are_split_into_shards_and_reads_decode_them() {
    for plugin in [EcPlugin::ReedSolomon, EcPlugin::Zigzag] {
        let mut c = Cluster::new(plugin, 5);
        let w = c.striper.width();
        let mut rng = Rng::new(5);
        let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for i in 0..12u64 {
            let name = format!("obj{}", i % 4);
            let len = rng.below(3 * w.min(64 << 10)) as usize;
            let data = rng.bytes(len);
            c.op(&name, vec![SubOp::WriteFull(data.clone().into())])
                .unwrap();
            model.insert(name, data);
        }
        // Partial overwrites and appends: read-modify-write of stripes.
        for i in 0..20u64 {
            let name = format!("obj{}", i % 4);
            let m = model.get_mut(&name).unwrap();
            let off = rng.below(m.len() as u64 + 100);
            let len = 1 + rng.below(5000) as usize;
            let data = rng.bytes(len);
            c.op(
                &name,
                vec![
                    SubOp::Write {
                        offset: off,
                        data: data.clone().into(),
                    },
                    SubOp::Append(b"tail".to_vec().into()),
                ],
            )
            .unwrap();
            let end = off as usize + data.len();
            if m.len() < end {
                m.resize(end, 0);
            }
            m[off as usize..end].copy_from_slice(&data);
            m.extend_from_slice(b"tail");
        }
        c.op(
            "obj1",
            vec![SubOp::SetXattr {
                name: "color".into(),
                value: b"blue".to_vec(),
            }],
        )
        .unwrap();
        for (name, want) in &model {
            assert_eq!(&c.read(name, 0, 0).unwrap(), want, "{plugin:?} {name}");
            let n = want.len() as u64;
            assert_eq!(
                c.read(name, n / 3, n / 2).unwrap(),
                want[(n / 3) as usize..(n / 3 + n / 2) as usize]
            );
            // Every OSD holds its shard, and the xattrs whole.
            let oid = ObjectId::new(
                loligo_crush::hash::str_hash_rjenkins(name.as_bytes()),
                name.clone(),
            );
            for (i, s) in c.stores.iter().take(N).enumerate() {
                let st = s.stat(CollectionId::pg(1, 0), &oid).unwrap();
                assert_eq!(
                    st.size,
                    c.striper.shard_len(n, i).unwrap(),
                    "{plugin:?} {name} shard {i}"
                );
                assert!(s
                    .getattr(CollectionId::pg(1, 0), &oid, VERSION_ATTR)
                    .is_ok());
                let size: u64 = postcard::from_bytes(
                    &s.getattr(CollectionId::pg(1, 0), &oid, ec::SIZE_ATTR)
                        .unwrap(),
                )
                .unwrap();
                assert_eq!(size, n);
            }
        }
        let x = c.op("obj1", vec![SubOp::GetXattr("color".into())]).unwrap();
        assert_eq!(x, vec![SubResult::Data(b"blue".to_vec().into())]);
        // Omap is refused, and nothing changes.
        let e = c.op("obj1", vec![SubOp::OmapSet(vec![])]).unwrap_err();
        assert!(matches!(e, OpError::NotSupported(_)), "{e}");
        // Removal, then the object is gone on every shard (its rollback
        // copy stays until the next write) and listings never show
        // rollback copies.
        c.op("obj2", vec![SubOp::Remove]).unwrap();
        assert_eq!(c.read("obj2", 0, 0), Err(OpError::NotFound));
        // Rollback copies of writes every member has go with the next
        // write: the pool stores the profile's overhead, not twice it.
        let rb = |name: &str| {
            let oid = ObjectId::new(
                loligo_crush::hash::str_hash_rjenkins(name.as_bytes()),
                name.to_string(),
            );
            ec::rollback_oid(&oid)
        };
        let coll = CollectionId::pg(1, 0);
        let holding = |c: &Cluster, name: &str| {
            c.stores
                .iter()
                .take(N)
                .filter(|s| s.exists(coll, &rb(name)).unwrap())
                .count()
        };
        // The removal's copies wait for the next write; the others went
        // with the writes after theirs.
        assert_eq!(
            holding(&c, "obj2"),
            N,
            "{plugin:?}: kept until the next write"
        );
        assert_eq!(holding(&c, "obj0"), 0, "{plugin:?}");
        c.op("other", vec![SubOp::WriteFull(b"x".to_vec().into())])
            .unwrap();
        for name in ["obj0", "obj1", "obj2", "obj3"] {
            assert_eq!(holding(&c, name), 0, "{plugin:?}: {name}'s copies remain");
        }
        // The newest write's own copies stay (it may still be rolled
        // back until every member has it).
        assert_eq!(holding(&c, "other"), 0, "a new object has none");
        c.op("other", vec![SubOp::Append(b"y".to_vec().into())])
            .unwrap();
        assert_eq!(holding(&c, "other"), N);
    }
}

#[test]
fn a_shard_read_takes_the_labels_and_the_bytes_from_one_moment() {
    // The daemon's store commits in its own thread while the PG reads. A
    // backfill chunk that gives this copy's object another shard at the
    // same version may commit between a read of the labels and a read
    // of the bytes: those bytes must never go out as the shard asked
    // for.
    use loligo_types::ops::Version;
    let c = Cluster::new(EcPlugin::Zigzag, 4);
    let coll = CollectionId::pg(1, 0);
    let s = loligo_store::FaultyStore::new(MemStore::new());
    let o = ObjectId::new(loligo_crush::hash::str_hash_rjenkins(b"a"), "a");
    let version = Version { epoch: 1, v: 1 };
    let labels = |shard: u8| shard_labels(shard, 8, version);
    let mut t = Transaction::new();
    t.create_collection(coll);
    t.write_full(coll, &o, bytes::Bytes::from_static(b"shard-0!"));
    t.setattrs(coll, &o, labels(0));
    s.apply(t).unwrap();
    let member = c.acting[0];
    let mut pg = fresh_pg(PG, member, PgInfo::default());
    pg.handle(&s, c.map_at(1, c.acting[1]));
    // Same length, same version, another shard's label and bytes.
    let mut swap = Transaction::new();
    swap.write_full(coll, &o, bytes::Bytes::from_static(b"NOTSHRD0"));
    swap.setattrs(coll, &o, labels(3));
    for n in 1..=4 {
        // The swap lands before the n-th read the PG makes of the store.
        let mut back = Transaction::new();
        back.write_full(coll, &o, bytes::Bytes::from_static(b"shard-0!"));
        back.setattrs(coll, &o, labels(0));
        s.apply(back).unwrap();
        s.commit_before_read(n, swap.clone());
        let msg = PeerMsg::ReadShard {
            pg: PG,
            from: c.acting[1],
            epoch: 1,
            name: "a".into(),
            extents: vec![(0, 8)],
            version,
            shard: 0,
        };
        let fx = pg.handle(
            &s,
            Input::Peer {
                msg,
                token: n,
                now_ms: 0,
            },
        );
        match &fx[..] {
            [Effect::Answer { token, reply }] if *token == n => match reply.clone().into_result() {
                Ok(PeerReply::ShardData(b)) => {
                    assert_eq!(b[0].0.as_ref(), b"shard-0!", "swap before read {n}")
                }
                Err(_) => {}
                Ok(other) => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }
}

/// The PGs here run with no write-set record, as after `osd lost` took
/// every member out of it: no OSD is known to hold more than the up ones.
/// An object whose shards fewer than k up copies hold at its logged
/// version (its push to the returning members never arrived, and the
/// two other members that had it went away) is removed, logged as given
/// up; every other object stays readable, and writes go on.
#[test]
fn an_object_fewer_than_k_up_copies_hold_is_given_up_once_its_write_set_is_lost() {
    use loligo_pg::pg::GaveUp;
    let mut c = Cluster::new(EcPlugin::ReedSolomon, 4);
    let mut rng = Rng::new(21);
    let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for name in ["o0", "o1"] {
        let d = rng.bytes(30_000);
        c.op(name, vec![SubOp::WriteFull(d.clone().into())])
            .unwrap();
        model.insert(name.into(), d);
    }
    // o2 reaches shards 0-3 only; 4 and 5 come back and merge the log,
    // but their pushes of o2 are lost.
    c.down = vec![4, 5];
    c.publish();
    c.op("o2", vec![SubOp::WriteFull(rng.bytes(30_000).into())])
        .unwrap();
    c.drop_pushes_to = vec![4, 5];
    c.down.clear();
    c.publish();
    c.drop_pushes_to.clear();
    // Shards 2 and 3 go: o2 is on two up copies, k is four.
    c.down = vec![2, 3];
    c.publish();
    assert!(
        matches!(c.read("o2", 0, 0), Err(OpError::NotFound)),
        "o2 was given up"
    );
    for (name, data) in &model {
        assert_eq!(&c.read(name, 0, 0).unwrap(), data, "{name}");
    }
    let coll = CollectionId::pg(1, 0);
    let log = loligo_pg::pg::recovery::read_log(&c.stores[0], coll, 0, 100).unwrap();
    assert!(
        log.iter().any(|e| e.name == "o2"
            && e.removed
            && e.gave_up == Some(GaveUp::Object(Default::default()))),
        "{log:?}"
    );
    let d = rng.bytes(5_000);
    c.op("o2", vec![SubOp::WriteFull(d.clone().into())])
        .unwrap();
    assert_eq!(c.read("o2", 0, 0).unwrap(), d);
}

/// A shard read tells "this copy has no such shard at that version"
/// (`RepError::Absent`: definitive, the object may be given up once no
/// OSD is known to hold more; `NeverTook` when the copy holds nothing of
/// the object that far down the log either) apart from a failure to read
/// it (`Failed`: never grounds to give an object up).
#[test]
fn a_shard_read_tells_a_missing_shard_from_a_failed_read() {
    use loligo_types::ops::Version;
    let c = Cluster::new(EcPlugin::ReedSolomon, 4);
    let coll = CollectionId::pg(1, 0);
    let s = loligo_store::FaultyStore::new(MemStore::new());
    let o = ObjectId::new(loligo_crush::hash::str_hash_rjenkins(b"a"), "a");
    let v1 = Version { epoch: 1, v: 1 };
    let mut t = Transaction::new();
    t.create_collection(coll);
    t.write_full(coll, &o, bytes::Bytes::from_static(b"shard-0!"));
    t.setattrs(coll, &o, shard_labels(0, 8, v1));
    s.apply(t).unwrap();
    let mut pg = fresh_pg(PG, c.acting[0], PgInfo::default());
    pg.handle(&s, c.map_at(1, c.acting[1]));
    let mut read = |name: &str, version: Version, shard: usize| {
        let msg = PeerMsg::ReadShard {
            pg: PG,
            from: c.acting[1],
            epoch: 1,
            name: name.into(),
            extents: vec![(0, 8)],
            version,
            shard,
        };
        let fx = pg.handle(
            &s,
            Input::Peer {
                msg,
                token: 1,
                now_ms: 0,
            },
        );
        match fx.into_iter().next() {
            Some(Effect::Answer { token: 1, reply }) => match reply.into_result() {
                Ok(PeerReply::ShardData(d)) => Ok(d.into_iter().map(|b| b.0).collect::<Vec<_>>()),
                Ok(other) => panic!("{other:?}"),
                Err(e) => Err(e),
            },
            other => panic!("{other:?}"),
        }
    };
    assert!(read("a", v1, 0).is_ok());
    let v2 = Version { epoch: 2, v: 2 };
    // It never took v2 of a, nor anything of b; it took v1 of a, as
    // another shard than the one asked.
    for (name, version, shard, never) in
        [("a", v2, 0, true), ("a", v1, 1, false), ("b", v1, 0, true)]
    {
        let got = read(name, version, shard);
        let want = match never {
            true => matches!(got, Err(RepError::NeverTook(_))),
            false => matches!(got, Err(RepError::Absent(_))),
        };
        assert!(want, "{name} {version} shard {shard}: {got:?}");
    }
    s.fail_read_in(1);
    assert!(matches!(read("a", v1, 0), Err(RepError::Failed(_))));
}

#[test]
fn a_restarted_ec_copy_whose_first_input_is_not_a_map_keeps_no_tree() {
    // The thrash test's fsck found a Merkle tree in an EC PG: a restarted
    // OSD's PG took a peer's message before its first map, did not yet
    // know it was erasure-coded, and rebuilt a tree that nothing kept
    // right afterwards.
    let c = Cluster::new(EcPlugin::Zigzag, 4);
    let s = MemStore::new();
    let coll = CollectionId::pg(1, 0);
    let mut t = Transaction::new();
    t.create_collection(coll);
    t.write_full(
        coll,
        &ObjectId::new(7, "x"),
        bytes::Bytes::from_static(b"shard"),
    );
    s.apply(t).unwrap();
    let mut pg = fresh_pg(PG, 0, PgInfo::default());
    let mut fx = pg.handle(&s, Input::Tick { now_ms: 5 });
    fx.extend(pg.handle(&s, c.map_at(1, c.acting[0])));
    for e in fx {
        if let Effect::Apply { txn, .. } = e {
            s.apply(txn).unwrap();
        }
    }
    let trees = s.records(coll, b"merkle", 10).unwrap();
    assert!(
        trees.iter().all(|(k, _)| !k.starts_with(b"merkle")),
        "an EC copy keeps tree records: {:?}",
        trees
            .iter()
            .map(|(k, _)| String::from_utf8_lossy(k))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_shard_holding_another_shards_bytes_is_read_around() {
    // Zigzag: a small object's parity shards are longer than its data
    // shard, so the length tells them apart. (Reed-Solomon's are as long
    // as the data's here: a swap there is caught by nothing but the
    // version and shard labels.)
    {
        let plugin = EcPlugin::Zigzag;
        let mut c = Cluster::new(plugin, 4);
        let data = 42u64.to_le_bytes().to_vec();
        c.op("a", vec![SubOp::WriteFull(data.clone().into())])
            .unwrap();
        // Data shard 0's object gets the last parity shard's bytes, its
        // labels (version, size, shard) left as they are: what the thrash
        // test once read as the object.
        let oid = ObjectId::new(loligo_crush::hash::str_hash_rjenkins(b"a"), "a");
        let coll = CollectionId::pg(1, 0);
        let last = c.acting.len() - 1;
        let parity = c.stores[c.acting[last] as usize]
            .read(coll, &oid, &[(0, c.striper.shard_len(8, last).unwrap())])
            .unwrap()
            .pop()
            .unwrap();
        assert!(parity.len() > 8 && parity[..8] != data[..], "{plugin:?}");
        let mut t = Transaction::new();
        t.write_full(coll, &oid, bytes::Bytes::from(parity));
        c.stores[c.acting[0] as usize].apply(t).unwrap();
        // The read goes around it (its length is not shard 0's).
        assert_eq!(c.read("a", 0, 0).unwrap(), data, "{plugin:?}");
    }
}

#[test]
fn reads_decode_around_missing_shards_and_writes_go_on_with_min_size() {
    for plugin in [EcPlugin::ReedSolomon, EcPlugin::Zigzag] {
        // min_size 4 = k, so that writes go on with two shards missing.
        let mut c = Cluster::new(plugin, 4);
        let mut rng = Rng::new(8);
        let data = rng.bytes(200_000);
        c.op("a", vec![SubOp::WriteFull(data.clone().into())])
            .unwrap();
        // Data shard 1 and parity shard 4 go down: a new interval.
        c.down = vec![1, 4];
        c.publish();
        assert_eq!(
            c.read("a", 0, 0).unwrap(),
            data,
            "{plugin:?}: two shards missing"
        );
        assert_eq!(c.read("a", 70_000, 10).unwrap(), data[70_000..70_010]);
        // Writes go on with the four shards left, and read back.
        let more = rng.bytes(3000);
        c.op(
            "a",
            vec![SubOp::Write {
                offset: 50_000,
                data: more.clone().into(),
            }],
        )
        .unwrap();
        let mut want = data.clone();
        want[50_000..53_000].copy_from_slice(&more);
        assert_eq!(c.read("a", 0, 0).unwrap(), want);
        // The primary's shard down too: three shards missing are one
        // more than the code can lose. The PG is down (fewer than k
        // shards can say what the newest version is): ops wait, then fail
        // with a clear error, never with wrong bytes.
        c.down = vec![0, 1, 4];
        c.publish();
        assert!(c
            .op_maybe("a", vec![SubOp::Read { offset: 0, len: 0 }])
            .is_none());
        let p = c.primary();
        c.queue.push_back((p, Input::Tick { now_ms: 10_000_000 }));
        c.run();
        let answers: Vec<&OpReply> = c.replies.values().collect();
        // The error names no OSD: every acting member answered (naming
        // them would send an operator after OSDs that are up), and with
        // no record the PG does not know where the missing shards were.
        assert!(
            matches!(answers.as_slice(), [r] if matches!(&r.result, Err(OpError::Down { osds, .. }) if osds.is_empty())),
            "{plugin:?}: three shards missing answered {answers:?}"
        );
    }
}

#[test]
fn a_returning_osd_gets_its_shards_rebuilt_from_the_others() {
    for plugin in [EcPlugin::ReedSolomon, EcPlugin::Zigzag] {
        let mut c = Cluster::new(plugin, 4); // (min_size k: reads go on with m shards down)
        let mut rng = Rng::new(13);
        let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for i in 0..4 {
            let d = rng.bytes(30_000 + 7 * i);
            c.op(&format!("o{i}"), vec![SubOp::WriteFull(d.clone().into())])
                .unwrap();
            model.insert(format!("o{i}"), d);
        }
        // Data shard 2 goes down; writes go on with five shards: new
        // objects, an overwrite, a removal.
        c.down = vec![2];
        c.publish();
        for i in 4..7 {
            let d = rng.bytes(20_000 + i);
            c.op(&format!("o{i}"), vec![SubOp::WriteFull(d.clone().into())])
                .unwrap();
            model.insert(format!("o{i}"), d);
        }
        let patch = rng.bytes(999);
        c.op(
            "o1",
            vec![SubOp::Write {
                offset: 12_345,
                data: patch.clone().into(),
            }],
        )
        .unwrap();
        model.get_mut("o1").unwrap()[12_345..13_344].copy_from_slice(&patch);
        c.op("o3", vec![SubOp::Remove]).unwrap();
        model.remove("o3");
        // It returns: peering finds it behind, recovery rebuilds its
        // shards of what it missed and pushes them.
        c.down.clear();
        c.pushed_bytes = 0;
        c.publish();
        assert!(c.pushed_bytes > 0, "{plugin:?}: recovery pushed nothing");
        let coll = CollectionId::pg(1, 0);
        for (name, data) in &model {
            let oid = ObjectId::new(
                loligo_crush::hash::str_hash_rjenkins(name.as_bytes()),
                name.clone(),
            );
            let shards = c.striper.encode(data).unwrap();
            let got = c.stores[2]
                .read(coll, &oid, &[(0, shards[2].len() as u64)])
                .unwrap();
            assert_eq!(got[0], shards[2], "{plugin:?}: osd.2's shard of {name}");
        }
        let gone = ObjectId::new(loligo_crush::hash::str_hash_rjenkins(b"o3"), "o3");
        assert!(
            !c.stores[2].exists(coll, &gone).unwrap(),
            "{plugin:?}: o3 was removed"
        );
        // The rebuilt shard serves: with two other shards down, reads
        // need it.
        c.down = vec![0, 5];
        c.publish();
        for (name, data) in &model {
            assert_eq!(&c.read(name, 0, 0).unwrap(), data, "{plugin:?} {name}");
        }
    }
}

/// A primary dies with a partial overwrite on only some shards. With
/// fewer than k shards holding it, the write was never acknowledged and is
/// rolled back on those shards from their rollback copies (for 4+2 with 3
/// shards holding it, neither version could be rebuilt from the shards
/// alone); with k or more it rolls forward. Either way every shard ends at
/// one version, and no read ever sees a mix.
#[test]
fn a_torn_write_rolls_back_below_k_shards_and_forward_from_k() {
    for plugin in [EcPlugin::ReedSolomon, EcPlugin::Zigzag] {
        for holders in 1..=5usize {
            let mut c = Cluster::new(plugin, 5);
            let mut rng = Rng::new(21 + holders as u64);
            let old = rng.bytes(40_000);
            c.op("x", vec![SubOp::WriteFull(old.clone().into())])
                .unwrap();
            // The overwrite reaches the primary (osd.0) and replicas
            // 1..holders only.
            let patch = rng.bytes(5_000);
            c.drop_to = (holders as i32..N as i32).collect();
            let answered = c.op_maybe(
                "x",
                vec![SubOp::Write {
                    offset: 10_000,
                    data: patch.clone().into(),
                }],
            );
            assert!(
                answered.is_none(),
                "a write some shards lack is not acknowledged"
            );
            c.drop_to.clear();
            // The primary dies; the others peer.
            c.down = vec![0];
            c.publish();
            let mut new = old.clone();
            new[10_000..15_000].copy_from_slice(&patch);
            // The primary (a holder) is down: the write rolls forward only
            // if k of the shards left hold it.
            let forward = holders > 4;
            let want = if forward { &new } else { &old };
            let why = format!("{plugin:?} with {holders} shards holding the write");
            let r = c.op_maybe("x", vec![SubOp::Read { offset: 0, len: 0 }]);
            let Some(Ok(r)) = r else {
                panic!(
                    "{why}: the read after peering answered {r:?}; roles: {:?}",
                    c.pgs
                        .iter()
                        .map(|p| p.stat().map(|s| s.state))
                        .collect::<Vec<_>>()
                );
            };
            assert!(
                r == vec![SubResult::Data(want.clone().into())],
                "{why}: the read shows neither version it may (forward: {forward})"
            );
            // It returns and is brought to the same version.
            c.down.clear();
            c.publish();
            c.assert_shards("x", want, &why);
            // Writes go on.
            let r = c.op_maybe("x", vec![SubOp::Append(b"more".to_vec().into())]);
            assert!(
                matches!(r, Some(Ok(_))),
                "{why}: a write after the return answered {r:?}; states: {:?}",
                c.pgs
                    .iter()
                    .map(|p| p.stat().map(|s| s.state))
                    .collect::<Vec<_>>()
            );
            let mut after = want.clone();
            after.extend_from_slice(b"more");
            c.assert_shards("x", &after, &why);
        }
    }
}

/// The first shard's OSD is the primary: when it returns after missing
/// writes it is behind, takes a complete member's log and rebuilds its own
/// shards from the others (a member's pulled copy is that member's shard,
/// never taken as this one's).
#[test]
fn a_returning_primary_rebuilds_its_own_shards() {
    for plugin in [EcPlugin::ReedSolomon, EcPlugin::Zigzag] {
        let mut c = Cluster::new(plugin, 4); // (min_size k: reads go on with m shards down)
        let mut rng = Rng::new(31);
        let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for i in 0..3 {
            let d = rng.bytes(25_000 + i);
            c.op(&format!("p{i}"), vec![SubOp::WriteFull(d.clone().into())])
                .unwrap();
            model.insert(format!("p{i}"), d);
        }
        c.down = vec![0];
        c.publish();
        for i in 2..5 {
            let d = rng.bytes(33_000 + i);
            c.op(&format!("p{i}"), vec![SubOp::WriteFull(d.clone().into())])
                .unwrap();
            model.insert(format!("p{i}"), d);
        }
        c.op("p0", vec![SubOp::Remove]).unwrap();
        model.remove("p0");
        c.down.clear();
        c.publish();
        let why = format!(
            "{plugin:?} (states {:?})",
            c.pgs
                .iter()
                .map(|p| p.stat().map(|s| s.state))
                .collect::<Vec<_>>()
        );
        for (name, data) in &model {
            c.assert_shards(name, data, &why);
        }
        let gone = ObjectId::new(loligo_crush::hash::str_hash_rjenkins(b"p0"), "p0");
        assert!(!c.stores[0].exists(CollectionId::pg(1, 0), &gone).unwrap());
        // The primary serves, reading around two other shards.
        c.down = vec![1, 2];
        c.publish();
        for (name, data) in &model {
            let got = c.read(name, 0, 0).unwrap();
            assert!(&got == data, "{why}: {name} read back wrong");
        }
    }
}

/// An OSD is replaced by an empty one (the PG log is too short for a
/// log-based recovery): the new member is backfilled chunk by chunk, each
/// object's shard for its position rebuilt from the others (the next
/// chunk's while the one before is on its way), and then serves with two
/// other shards down. Objects overwritten and removed before it came are
/// right too.
#[test]
fn a_new_member_is_backfilled_with_its_rebuilt_shards() {
    for plugin in [EcPlugin::ReedSolomon, EcPlugin::Zigzag] {
        let mut c = Cluster::new(plugin, 4); // (min_size k: reads go on with m shards down)
        for pg in &mut c.pgs {
            pg.log_entries_max = 3;
            pg.backfill_chunk_objects = 3;
        }
        let mut rng = Rng::new(41);
        let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for i in 0..10 {
            let d = rng.bytes(9_000 + 17 * i);
            c.op(&format!("b{i}"), vec![SubOp::WriteFull(d.clone().into())])
                .unwrap();
            model.insert(format!("b{i}"), d);
        }
        c.op("b3", vec![SubOp::Remove]).unwrap();
        model.remove("b3");
        // osd.2 leaves; the spare osd.6 takes its position (shard 2).
        c.acting[2] = 6;
        c.down = vec![2];
        c.pushed_bytes = 0;
        c.publish();
        assert!(
            c.pushed_bytes > 0 && c.chunks >= 3,
            "{plugin:?}: nothing was backfilled ({} chunks)",
            c.chunks
        );
        assert_eq!(
            c.most_flying,
            loligo_pg::pg::CHUNKS_IN_FLIGHT,
            "{plugin:?}: chunks rebuilt while the one before was on its way"
        );
        let coll = CollectionId::pg(1, 0);
        for (name, data) in &model {
            let oid = ObjectId::new(
                loligo_crush::hash::str_hash_rjenkins(name.as_bytes()),
                name.clone(),
            );
            let shards = c.striper.encode(data).unwrap();
            let got = c.stores[6]
                .read(coll, &oid, &[(0, shards[2].len() as u64)])
                .unwrap();
            assert!(got[0] == shards[2], "{plugin:?}: osd.6's shard of {name}");
        }
        let gone = ObjectId::new(loligo_crush::hash::str_hash_rjenkins(b"b3"), "b3");
        assert!(!c.stores[6].exists(coll, &gone).unwrap());
        let p = c.primary();
        assert!(
            c.pgs[p].is_clean(),
            "{plugin:?}: the PG is clean after the backfill"
        );
        c.down = vec![2, 0, 5];
        c.publish();
        for (name, data) in &model {
            let got = c.read(name, 0, 0).unwrap();
            assert!(&got == data, "{plugin:?}: {name} read back wrong");
        }
    }
}

/// A backfill chunk may name objects its primary lacks (the primary's own
/// copy is older than its log says, e.g. a write being rolled back): the
/// target copies nothing of them and records each missing, durably. Here
/// the chunks say so of two objects the primary holds whole (this harness
/// rewrites the chunks on their way, so the primary counts them copied):
/// the target restarts, answers peering with what it lacks, and recovery
/// brings both. (The primary's side, its bookkeeping of an object it
/// lacks and the rule that it never copies one, runs through the EC
/// simulator's `EC_CHUNK_LACKS_SEEDS`.)
#[test]
fn a_backfill_target_keeps_what_its_chunks_said_it_lacks_missing_across_a_restart() {
    for plugin in [EcPlugin::ReedSolomon, EcPlugin::Zigzag] {
        let mut c = Cluster::new(plugin, 4);
        for pg in &mut c.pgs {
            pg.log_entries_max = 3;
            pg.backfill_chunk_objects = 3;
        }
        let mut rng = Rng::new(43);
        let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for i in 0..8 {
            let d = rng.bytes(7_000 + 31 * i);
            c.op(&format!("b{i}"), vec![SubOp::WriteFull(d.clone().into())])
                .unwrap();
            model.insert(format!("b{i}"), d);
        }
        c.chunks_lack = vec!["b2".into(), "b5".into()];
        c.acting[2] = 6;
        c.down = vec![2];
        c.publish();
        c.chunks_lack.clear();
        let why = format!("{plugin:?}");
        assert!(
            c.chunks >= 3,
            "{why}: osd.6 was backfilled ({} chunks)",
            c.chunks
        );
        let coll = CollectionId::pg(1, 0);
        let lacked = loligo_pg::pg::recovery::load_missing(&c.stores[6], coll).unwrap();
        assert_eq!(
            lacked.keys().collect::<Vec<_>>(),
            ["b2", "b5"],
            "{why}: osd.6 records what its chunks said it lacks"
        );
        for name in ["b2", "b5"] {
            let oid = ObjectId::new(loligo_crush::hash::str_hash_rjenkins(name.as_bytes()), name);
            assert!(
                !c.stores[6].exists(coll, &oid).unwrap(),
                "{why}: {name} was not copied"
            );
        }
        // osd.6 restarts; its PG starts from its store.
        c.down = vec![2, 6];
        c.publish();
        c.down = vec![2];
        c.publish();
        let p = c.primary();
        c.queue.push_back((p, Input::Tick { now_ms: 10_000 }));
        c.run();
        for name in ["b2", "b5"] {
            assert!(
                c.pushes.iter().any(|(to, n)| *to == 6 && n == name),
                "{why}: {name} reached osd.6 by recovery: {:?}",
                c.pushes
            );
        }
        for (name, data) in &model {
            c.assert_shards(name, data, &why);
        }
        let left = loligo_pg::pg::recovery::load_missing(&c.stores[6], coll).unwrap();
        assert!(left.is_empty(), "{why}: osd.6 still lacks {left:?}");
        assert!(c.pgs[p].is_clean(), "{why}: the PG is clean after recovery");
    }
}

/// Two OSDs swap positions (as a pg_temp or a CRUSH change can make
/// them): each holds the other position's shard, so neither may merge its
/// log and keep its objects. Both are backfilled (their old objects count
/// as differing) and end with the shards of their new positions.
#[test]
fn osds_that_change_position_are_backfilled_not_trusted() {
    for plugin in [EcPlugin::ReedSolomon, EcPlugin::Zigzag] {
        let mut c = Cluster::new(plugin, 4); // (min_size k: reads go on with m shards down)
        let mut rng = Rng::new(51);
        let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for i in 0..6 {
            let d = rng.bytes(12_000 + 5 * i);
            c.op(&format!("s{i}"), vec![SubOp::WriteFull(d.clone().into())])
                .unwrap();
            model.insert(format!("s{i}"), d);
        }
        c.acting = vec![0, 1, 4, 3, 2, 5];
        c.chunks = 0;
        c.publish();
        assert!(
            c.chunks > 0,
            "{plugin:?}: the moved OSDs were not backfilled"
        );
        let why = format!("{plugin:?}");
        for (name, data) in &model {
            c.assert_shards(name, data, &why);
        }
        c.down = vec![0, 3];
        c.publish();
        for (name, data) in &model {
            let got = c.read(name, 0, 0).unwrap();
            assert!(&got == data, "{why}: {name} read back wrong");
        }
    }
}

/// A copy answers peering with the shard it holds, so a primary reads a
/// copy outside its acting set as a stray's from its first recovery on
/// (EC lost sim seed 25554: without it, a rollback was decided before the
/// stray asked, and the write's only other shard went unread), and judges
/// a member's position by its own map, not the member's (seed 53972).
#[test]
fn a_copy_answers_peering_with_the_shard_it_holds() {
    let mut c = Cluster::new(EcPlugin::ReedSolomon, 5);
    c.op("a", vec![SubOp::WriteFull(vec![7u8; 9000].into())])
        .unwrap();
    c.acting = vec![0, 1, 6, 3, 4, 5];
    c.publish();
    let answer = |c: &mut Cluster, o: usize| {
        let msg = PeerMsg::GetInfo {
            pg: PG,
            from: 0,
            interval: c.pgs[0].interval(),
            epoch: c.epoch,
        };
        let query = Input::Peer {
            msg,
            token: 77,
            now_ms: 0,
        };
        let fx = c.pgs[o].handle(&c.stores[o], query);
        fx.into_iter()
            .find_map(|e| match e {
                Effect::Answer { token: 77, reply } => Some(match reply {
                    PeerReply::Info(info) => Ok(info),
                    PeerReply::Refused(e) => Err(e),
                    other => panic!("a query answered {other:?}"),
                }),
                _ => None,
            })
            .expect("the query is answered at once")
            .expect("the answer is a copy's")
            .expect("the OSD holds a copy")
    };
    let stray = answer(&mut c, 2);
    assert_eq!(stray.shard, Some(2), "{stray:?}");
    assert_eq!(stray.moved_shard, None, "{stray:?}");
    let member = answer(&mut c, 1);
    assert_eq!(member.shard, Some(1), "{member:?}");
    assert!(!member.backfill, "{member:?}");
}

/// A PG on an OSD that never ran before (so it granted no read lease it
/// forgot): a test's clock may stand still.
fn fresh_pg(id: PgId, whoami: i32, info: PgInfo) -> Pg {
    let mut pg = Pg::new(id, whoami, info);
    pg.set_read_lease(loligo_pg::pg::READ_LEASE_MS, None);
    pg
}
