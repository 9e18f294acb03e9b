//! The EC data path's core against the replicated executor as the model:
//! random ops (partial writes, appends, truncates, zeros, removes, xattrs,
//! asserts, reads) run on k + m shard stores, with the bytes each op needs
//! fetched from the shards with up to m of them lost; after every op the
//! object decoded from the shards equals the model's, and every shard's
//! rollback object decodes to the object as it was before the op.

use loligo_ec::plan::Coalesce;
use loligo_ec::stripe::{Fetched, Striper};
use loligo_pg::ec::{self, OldBytes};
use loligo_pg::exec::{self, ObjState, VERSION_ATTR};
use loligo_store::{CollectionId, MemStore, ObjectId, ObjectStore, Transaction};
use loligo_testkit::Rng;
use loligo_types::ops::{Cmp, OpError, SubOp, SubResult, Version};
use loligo_types::osdmap::{EcPlugin, EcProfile};

const MAX: u64 = 1 << 20;

fn striper(plugin: EcPlugin, unit: u32) -> Striper {
    EcProfile {
        name: "p".into(),
        plugin,
        k: 4,
        m: 2,
        s: 1,
        l: 2,
        optimal: false,
        alignment: 64,
        stripe_unit: unit,
    }
    .striper()
    .unwrap()
}

struct Shards {
    st: Striper,
    stores: Vec<MemStore>,
    c: CollectionId,
}

impl Shards {
    fn new(st: Striper) -> Shards {
        let c = CollectionId {
            pool: 1,
            pg: 0,
            shard: 0,
        };
        let stores: Vec<MemStore> = (0..st.shards()).map(|_| MemStore::new()).collect();
        for s in &stores {
            let mut t = Transaction::new();
            t.create_collection(c);
            s.apply(t).unwrap();
        }
        Shards { st, stores, c }
    }

    /// Plans `ops` on `o` at shard 0, as the primary would.
    fn plan(&self, o: &ObjectId, st: &ObjState, ops: &[SubOp]) -> Result<ec::Plan, OpError> {
        ec::plan(&self.st, &self.stores[0], self.c, o, st, ops, MAX)
    }

    /// Plans and finishes `ops` on `o` at shard 0 with no old bytes
    /// fetched: what an op that needs none (or wrongly gets none) does.
    fn plan_and_finish(
        &self,
        o: &ObjectId,
        st: &ObjState,
        ops: &[SubOp],
    ) -> Result<ec::Outcome, OpError> {
        let p = self.plan(o, st, ops)?;
        ec::finish(
            &self.st,
            &self.stores[0],
            self.c,
            o,
            st,
            ops,
            &p,
            OldBytes::new(),
        )
    }

    /// A deep scrub's view of `o`: every shard passes its own checks
    /// (label, length, and its hash when one is kept) and the shards'
    /// maps agree; a byte of shard 0 changed behind the store's back is
    /// then caught by its hash, if one is kept. Whether one is.
    fn check_scrub(&self, o: &ObjectId, what: &str) -> bool {
        use loligo_pg::pg::backfill::Cursor;
        use loligo_pg::pg::scrub_map::{self, ShardOf};
        let map = |i: usize| {
            let sh = ShardOf {
                pos: i,
                striper: &self.st,
            };
            scrub_map::build_shard_map(
                &self.stores[i],
                self.c,
                &Cursor::Start,
                &Cursor::End,
                true,
                sh,
            )
            .unwrap()
            .0
        };
        let maps: std::collections::BTreeMap<i32, Vec<_>> =
            (0..self.st.shards()).map(|i| (i as i32, map(i))).collect();
        for (i, m) in &maps {
            assert!(
                m.iter()
                    .all(|x| x.own_error.is_none() && x.read_error.is_none()),
                "{what}: shard {i}: {m:?}"
            );
        }
        let found = scrub_map::compare_shards(0, &maps, &Default::default());
        assert!(found.is_empty(), "{what}: {found:?}");
        // (An object never given data keeps no hash.)
        let kept = (self.stores[0].getattr(self.c, o, ec::HASH_ATTR)).unwrap_or_default();
        let len = self.stores[0].stat(self.c, o).unwrap().size;
        if kept.is_empty() || len == 0 {
            return false;
        }
        // Wrong bytes with a valid store checksum: only the hash tells.
        let old = self.stores[0].read(self.c, o, &[(0, 1)]).unwrap().remove(0);
        let mut t = Transaction::new();
        t.write(self.c, o, 0, vec![old[0] ^ 0xff]);
        self.stores[0].apply(t).unwrap();
        let bad = map(0);
        assert_eq!(
            bad[0].own_error,
            Some(loligo_types::scrub::ShardError::EcHashError),
            "{what}"
        );
        let mut maps = maps;
        maps.insert(0, bad);
        let found = scrub_map::compare_shards(1, &maps, &Default::default());
        assert_eq!(found.len(), 1, "{what}");
        assert_eq!(found[0].bad.keys().copied().collect::<Vec<_>>(), vec![0]);
        assert_eq!(found[0].auth.len(), self.st.shards() - 1);
        let mut t = Transaction::new();
        t.write(self.c, o, 0, old);
        self.stores[0].apply(t).unwrap();
        true
    }

    /// The object's bytes as the shards hold them, read with `lost` shards
    /// missing (`None` if it does not exist on `primary`'s shard).
    fn read(&self, o: &ObjectId, primary: usize, lost: &[usize]) -> Option<Vec<u8>> {
        let st = ec::obj_state(&self.stores[primary], self.c, o).unwrap();
        if !st.exists {
            return None;
        }
        Some(
            self.fetch(o, st.size, std::slice::from_ref(&(0..st.size)), lost)
                .remove(&0)
                .unwrap(),
        )
    }

    /// Fetch object byte ranges the way a primary does: plan over the
    /// shards not lost, read the shard extents, decode.
    fn fetch(
        &self,
        o: &ObjectId,
        size: u64,
        ranges: &[std::ops::Range<u64>],
        lost: &[usize],
    ) -> OldBytes {
        let avail: Vec<usize> = (0..self.st.shards())
            .filter(|c| !lost.contains(c))
            .collect();
        let mut out = OldBytes::new();
        for r in ranges {
            let plan = self
                .st
                .plan_read(size, r.clone(), &avail, Coalesce::Conservative)
                .unwrap();
            let mut f: Fetched<Vec<u8>> = Fetched::new();
            for (&c, exts) in &plan.reads {
                let got = self.stores[c].read(self.c, o, exts).unwrap();
                f.insert(c, exts.iter().map(|e| e.0).zip(got).collect());
            }
            out.insert(r.start, self.st.decode_read(&plan, &f).unwrap());
        }
        out
    }
}

/// Random sub-ops biased to cross stripe boundaries.
fn random_ops(rng: &mut Rng, w: u64, step: u64) -> Vec<SubOp> {
    let n = 1 + rng.below(3);
    let data = |rng: &mut Rng, len: u64| rng.bytes(len as usize);
    (0..n)
        .map(|_| match rng.below(15) {
            0 => {
                let len = rng.below(3 * w);
                SubOp::WriteFull(data(rng, len).into())
            }
            1 | 2 => {
                let len = 1 + rng.below(w + 7);
                SubOp::Write {
                    offset: rng.below(3 * w),
                    data: data(rng, len).into(),
                }
            }
            3 | 4 => {
                let len = 1 + rng.below(w / 2 + 3);
                SubOp::Append(data(rng, len).into())
            }
            5 => SubOp::Truncate(rng.below(3 * w)),
            6 => SubOp::Zero {
                offset: rng.below(2 * w),
                len: rng.below(w),
            },
            7 => SubOp::Remove,
            8 => SubOp::SetXattr {
                name: format!("a{}", rng.below(3)),
                value: format!("v{step}").into_bytes(),
            },
            9 => SubOp::RmXattr(format!("a{}", rng.below(3))),
            10 => SubOp::Read {
                offset: rng.below(2 * w),
                len: rng.below(w),
            },
            11 => SubOp::Stat,
            12 => SubOp::GetXattrs,
            13 => SubOp::SetAllocHint {
                expected_object_size: rng.below(4 * w),
                expected_write_size: rng.below(w),
                flags: rng.below(1024) as u32,
            },
            _ => SubOp::CmpXattr {
                name: "a0".into(),
                cmp: Cmp::Ne,
                value: b"zz".to_vec(),
            },
        })
        .collect()
}

#[test]
fn ec_ops_match_the_replicated_model_with_shards_lost() {
    for (plugin, unit) in [
        (EcPlugin::ReedSolomon, 0),
        (EcPlugin::ReedSolomon, 256),
        (EcPlugin::Zigzag, 512),
        (EcPlugin::Zigzag, 0),
        (EcPlugin::Lrc, 0),
    ] {
        let mut rng = Rng::new(3);
        let sh = Shards::new(striper(plugin, unit));
        let w = sh.st.width().min(16 << 10);
        let model = MemStore::new();
        let mc = CollectionId {
            pool: 1,
            pg: 0,
            shard: 0,
        };
        let mut t = Transaction::new();
        t.create_collection(mc);
        model.apply(t).unwrap();
        let o = ObjectId::new(7, "obj");
        let mut version = 0;
        let (mut applied, mut degraded, mut refused, mut hashed) = (0, 0, 0, 0);
        for step in 0..600u64 {
            let ops = random_ops(&mut rng, w, step);
            let primary = rng.index(sh.st.shards());
            // Up to m shards lost for the reads this op needs (LRC cannot
            // lose every pair: at most one there).
            let m = if plugin == EcPlugin::Lrc { 1 } else { 2 };
            let lost: Vec<usize> = (0..rng.below(m + 1))
                .map(|_| rng.index(sh.st.shards()))
                .collect();
            // The model.
            let mst = exec::obj_state(&model, mc, &o).unwrap();
            let want = exec::execute(&model, mc, &o, &mst, &ops, MAX);
            // EC.
            let est = ec::obj_state(&sh.stores[primary], sh.c, &o).unwrap();
            assert_eq!(
                (est.exists, est.size),
                (mst.exists, mst.size),
                "{plugin:?} step {step}"
            );
            let got =
                ec::plan(&sh.st, &sh.stores[primary], sh.c, &o, &est, &ops, MAX).and_then(|p| {
                    let old = sh.fetch(&o, est.size, &p.fetch, &lost);
                    ec::finish(&sh.st, &sh.stores[primary], sh.c, &o, &est, &ops, &p, old)
                });
            let (want, got) = match (want, got) {
                (Ok(w), Ok(g)) => (w, g),
                (Err(a), Err(b)) => {
                    assert_eq!(a, b, "{plugin:?} step {step} {ops:?}");
                    refused += 1;
                    continue;
                }
                (a, b) => panic!(
                    "{plugin:?} step {step} {ops:?}: model {:?}, ec {:?}",
                    a.map(|x| x.results),
                    b.map(|x| x.results)
                ),
            };
            assert_eq!(want.results, got.results, "{plugin:?} step {step} {ops:?}");
            assert_eq!(
                (want.exists_after, want.size_after, want.bytes_delta),
                (got.exists_after, got.size_after, got.bytes_delta)
            );
            let before = sh.read(&o, primary, &[]);
            if !want.txn.is_empty() {
                applied += 1;
                degraded += usize::from(lost.iter().any(|&c| c < sh.st.k()));
                version += 1;
                let v = postcard::to_stdvec(&Version {
                    epoch: 1,
                    v: version,
                })
                .unwrap();
                let mut t = want.txn;
                if want.exists_after {
                    t.setattr(mc, &o, VERSION_ATTR, v.clone());
                }
                model.apply(t).unwrap();
                for (i, mut t) in got.shards.into_iter().enumerate() {
                    if got.exists_after {
                        t.setattr(sh.c, &o, VERSION_ATTR, v.clone());
                    }
                    sh.stores[i].apply(t).unwrap();
                }
                // The rollback object holds the object as it was.
                let rb = ec::rollback_oid(&o);
                assert_eq!(
                    sh.read(&rb, primary, &[]),
                    before,
                    "{plugin:?} step {step}: rollback"
                );
            } else {
                assert!(got.shards.iter().all(|t| t.is_empty()));
            }
            let mst = exec::obj_state(&model, mc, &o).unwrap();
            let model_bytes = mst
                .exists
                .then(|| model.read(mc, &o, &[(0, mst.size)]).unwrap().remove(0));
            assert_eq!(
                sh.read(&o, primary, &lost),
                model_bytes,
                "{plugin:?} step {step} {ops:?}"
            );
            if mst.exists {
                let size = mst.size;
                for (i, s) in sh.stores.iter().enumerate() {
                    assert_eq!(
                        s.stat(sh.c, &o).unwrap().size,
                        sh.st.shard_len(size, i).unwrap()
                    );
                    let user = |s: &dyn ObjectStore, c| {
                        s.getattrs(c, &o)
                            .unwrap()
                            .into_iter()
                            .filter(|(k, _)| !k.starts_with('_'))
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(user(s, sh.c), user(&model, mc), "xattrs on shard {i}");
                    // The hint a shard keeps is the object's, a k-th of it.
                    let hint = |s: &dyn ObjectStore, c| {
                        let v = s.getattr(c, &o, loligo_store::ALLOC_HINT_ATTR).ok()?;
                        loligo_store::AllocHint::decode(&v)
                    };
                    let k = sh.st.k() as u64;
                    let want = hint(&model, mc).map(|h| loligo_store::AllocHint {
                        expected_object_size: h.expected_object_size.div_ceil(k),
                        expected_write_size: h.expected_write_size.div_ceil(k),
                        flags: h.flags,
                    });
                    assert_eq!(hint(s, sh.c), want, "{plugin:?} step {step} {ops:?}: hint");
                }
                hashed += usize::from(sh.check_scrub(&o, &format!("{plugin:?} step {step}")));
            } else {
                assert!(sh.stores.iter().all(|s| !s.exists(sh.c, &o).unwrap()));
            }
        }
        eprintln!("{plugin:?} unit {unit}: {applied} writes ({degraded} with a data shard lost), {refused} refused, {hashed} steps with shard hashes");
        assert!(
            applied > 300 && degraded > 100 && refused > 20 && hashed > 20,
            "the workload exercised too little"
        );
    }
}

#[test]
fn omap_is_refused_on_ec_pools_and_changes_nothing() {
    let sh = Shards::new(striper(EcPlugin::ReedSolomon, 0));
    let o = ObjectId::new(1, "x");
    let st = ObjState::default();
    for op in [
        SubOp::OmapSet(vec![]),
        SubOp::OmapGetHeader,
        SubOp::OmapList {
            start: vec![],
            limit: 1,
        },
    ] {
        let e = sh.plan(&o, &st, &[SubOp::Create, op]).unwrap_err();
        assert!(matches!(e, OpError::NotSupported(_)), "{e}");
    }
}

#[test]
fn a_full_write_needs_no_old_bytes_and_a_small_one_reads_one_stripe() {
    let sh = Shards::new(striper(EcPlugin::ReedSolomon, 0));
    let o = ObjectId::new(1, "x");
    let w = sh.st.width();
    let st = ObjState {
        exists: true,
        size: 10 * w,
        version: Version::default(),
    };
    let p = sh
        .plan(&o, &st, &[SubOp::WriteFull(vec![1; 100].into())])
        .unwrap();
    assert!(p.fetch.is_empty());
    let p = sh
        .plan(
            &o,
            &st,
            &[SubOp::Write {
                offset: 3 * w + 5,
                data: vec![1; 10].into(),
            }],
        )
        .unwrap();
    assert_eq!(p.fetch, vec![3 * w..3 * w + 5, 3 * w + 15..4 * w]);
    // A whole aligned stripe is written without reading.
    let p = sh
        .plan(
            &o,
            &st,
            &[SubOp::Write {
                offset: 2 * w,
                data: vec![1; w as usize].into(),
            }],
        )
        .unwrap();
    assert!(p.fetch.is_empty());
    // A read given none of the bytes it planned to fetch is an I/O error.
    assert!(matches!(
        sh.plan_and_finish(&o, &st, &[SubOp::Read { offset: 0, len: 5 }]),
        Err(OpError::Io(_))
    ));
    let _ = SubResult::None;
}

/// An allocation hint creates the object, is kept where the stores read
/// it (on an EC pool each shard's sizes are a k-th of the object's, as
/// in Ceph), never shows among the client's xattrs, and undefined flag
/// bits are refused before anything runs.
#[test]
fn allocation_hints_reach_every_shard_scaled_to_it() {
    use loligo_store::{AllocHint, ALLOC_HINT_ATTR};
    use loligo_types::ops::alloc_hint;
    let sh = Shards::new(striper(EcPlugin::ReedSolomon, 0));
    let o = ObjectId::new(1, "hinted");
    let hint = SubOp::SetAllocHint {
        expected_object_size: 4 << 20,
        expected_write_size: (64 << 10) + 1,
        flags: alloc_hint::COMPRESSIBLE | alloc_hint::SEQUENTIAL_READ,
    };
    let st = ObjState::default();
    let p = sh.plan(&o, &st, std::slice::from_ref(&hint)).unwrap();
    assert!(p.writes && p.exists_after);
    let out = sh
        .plan_and_finish(&o, &st, std::slice::from_ref(&hint))
        .unwrap();
    for (i, t) in out.shards.into_iter().enumerate() {
        sh.stores[i].apply(t).unwrap();
        let v = sh.stores[i].getattr(sh.c, &o, ALLOC_HINT_ATTR).unwrap();
        assert_eq!(
            AllocHint::decode(&v),
            Some(AllocHint {
                expected_object_size: 1 << 20,
                expected_write_size: (16 << 10) + 1,
                flags: loligo_store::hint::flags::COMPRESSIBLE
                    | loligo_store::hint::flags::SEQUENTIAL_READ,
            }),
            "shard {i}"
        );
    }
    // A replica keeps the hint as sent, and the client sees none of it.
    let s = MemStore::new();
    let mut t = Transaction::new();
    t.create_collection(sh.c);
    s.apply(t).unwrap();
    let out = exec::execute(&s, sh.c, &o, &st, &[hint], MAX).unwrap();
    assert!(out.exists_after);
    s.apply(out.txn).unwrap();
    let st = exec::obj_state(&s, sh.c, &o).unwrap();
    let out = exec::execute(&s, sh.c, &o, &st, &[SubOp::GetXattrs], MAX).unwrap();
    assert_eq!(out.results[0], SubResult::Xattrs(Default::default()));
    let v = s.getattr(sh.c, &o, ALLOC_HINT_ATTR).unwrap();
    assert_eq!(
        AllocHint::decode(&v).map(|h| h.expected_write_size),
        Some((64 << 10) + 1)
    );
    let bad = SubOp::SetAllocHint {
        expected_object_size: 0,
        expected_write_size: 0,
        flags: 1 << 10,
    };
    assert!(matches!(
        exec::validate("x", &[bad]),
        Err(OpError::Invalid(_))
    ));
}

/// The store acts on the flags by Ceph's numbers, as the wire carries
/// them.
#[test]
fn the_store_reads_hint_flags_by_the_wire_numbers() {
    use loligo_store::hint::flags as store;
    use loligo_types::ops::alloc_hint as wire;
    assert_eq!(store::COMPRESSIBLE, wire::COMPRESSIBLE);
    assert_eq!(store::INCOMPRESSIBLE, wire::INCOMPRESSIBLE);
    assert_eq!(store::SEQUENTIAL_READ, wire::SEQUENTIAL_READ);
    assert_eq!(store::RANDOM_READ, wire::RANDOM_READ);
    assert_eq!(store::RANDOM_WRITE, wire::RANDOM_WRITE);
    assert_eq!(store::IMMUTABLE, wire::IMMUTABLE);
    assert_eq!(store::APPEND_ONLY, wire::APPEND_ONLY);
    assert_eq!(wire::parse("compressible, Sequential_Read"), Ok(260));
    assert_eq!(wire::names(260), "sequential_read,compressible");
    assert!(wire::parse("squishy").is_err());
    assert_eq!(wire::parse(""), Ok(0));
}

/// Found by the model test above: on replicated pools a removal of a
/// missing xattr used to pass the executor and fail the store
/// transaction, and a failed commit stops the OSD.
#[test]
fn removing_a_missing_xattr_is_a_client_error_not_a_failed_transaction() {
    let s = MemStore::new();
    let c = CollectionId {
        pool: 1,
        pg: 0,
        shard: 0,
    };
    let o = ObjectId::new(1, "x");
    let mut t = Transaction::new();
    t.create_collection(c).touch(c, &o);
    s.apply(t).unwrap();
    let st = ObjState {
        exists: true,
        ..ObjState::default()
    };
    let e = exec::execute(&s, c, &o, &st, &[SubOp::RmXattr("nope".into())], MAX).err();
    assert_eq!(e, Some(OpError::NoXattr("nope".into())));
    // Set and removed in one op: fine, and the store takes it.
    let set_rm = [
        SubOp::SetXattr {
            name: "a".into(),
            value: vec![1],
        },
        SubOp::RmXattr("a".into()),
    ];
    let out = exec::execute(&s, c, &o, &st, &set_rm, MAX).unwrap();
    s.apply(out.txn).unwrap();
    // Removed twice in one op: the second is refused.
    let twice = [set_rm[0].clone(), set_rm[1].clone(), set_rm[1].clone()];
    assert!(exec::execute(&s, c, &o, &st, &twice, MAX).is_err());
}
