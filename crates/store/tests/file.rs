//! The behavioural suite against `FileStore`, plus what only a store with
//! a write-ahead journal has: a killed store replays its journal onto
//! whatever it had applied, clones and moves keep their guards, a full
//! ring waits for a checkpoint.

mod suite;
use loligo_store::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A file store in a fresh directory, removed on drop.
pub struct TempFile {
    pub store: Option<FileStore>,
    pub dir: PathBuf,
    pub cfg: FileConfig,
}

static N: AtomicU64 = AtomicU64::new(0);

impl TempFile {
    pub fn new(cfg: FileConfig) -> TempFile {
        let dir = std::env::temp_dir().join(format!(
            "loligo-filestore-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        FileStore::mkfs(&dir, &cfg).expect("mkfs");
        let store = Some(FileStore::mount(&dir, &cfg).expect("mount"));
        TempFile { store, dir, cfg }
    }

    /// An 8 MiB journal checkpointed every 20 ms: the suite wraps the
    /// ring and checkpoints under it.
    pub fn small() -> TempFile {
        TempFile::new(FileConfig {
            journal_size: 8 << 20,
            sync_interval: Duration::from_millis(20),
            ..FileConfig::default()
        })
    }

    /// Checkpoints only when the ring needs room, so a kill leaves a long
    /// journal to replay.
    pub fn lazy() -> TempFile {
        TempFile::new(FileConfig {
            journal_size: 64 << 20,
            sync_interval: Duration::from_secs(3600),
            ..FileConfig::default()
        })
    }

    pub fn s(&self) -> &FileStore {
        self.store.as_ref().expect("mounted")
    }

    /// Stop as a killed process would, and mount again (replaying).
    pub fn kill_and_remount(&mut self) {
        if let Some(s) = self.store.take() {
            s.abandon();
        }
        self.store = Some(FileStore::mount(&self.dir, &self.cfg).expect("remount"));
    }

    pub fn remount(&mut self) {
        self.store = None;
        self.store = Some(FileStore::mount(&self.dir, &self.cfg).expect("remount"));
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        self.store = None;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl suite::AsStore for TempFile {
    fn as_store(&self) -> &dyn ObjectStore {
        self.s()
    }
}

store_suite!(TempFile::small());

/// Everything `s` holds, copied into a `MemStore`.
fn copy(s: &dyn ObjectStore) -> MemStore {
    let m = MemStore::new();
    for c in s.collections().unwrap() {
        let mut t = Transaction::new();
        t.create_collection(c);
        for (k, v) in s.records(c, b"", usize::MAX).unwrap() {
            t.set_record(c, &k, v);
        }
        for o in s.list(c, None, usize::MAX).unwrap().0 {
            let data = s.read(c, &o, &[(0, u64::MAX)]).unwrap().remove(0);
            t.write_full(c, &o, data);
            t.setattrs(c, &o, s.getattrs(c, &o).unwrap().into_iter().collect());
            t.omap_setkeys(c, &o, s.omap_range(c, &o, b"", None, usize::MAX).unwrap());
            t.omap_setheader(c, &o, s.omap_header(c, &o).unwrap());
        }
        m.apply(t).unwrap();
    }
    m
}

#[test]
fn a_killed_store_replays_its_journal_onto_everything_it_had_applied() {
    // Every op is applied again onto files and keys that already hold
    // its effect and every later op's: writes after a clone of their
    // object must not reach the clone, removes must not take what a
    // later op made.
    for seed in 1..=4 {
        let mut t = TempFile::lazy();
        suite::random_against_model(t.s(), seed, 150);
        let want = copy(t.s());
        t.kill_and_remount();
        suite::same_state(t.s(), &want);
        // Replaying twice (killed again before any new write) changes
        // nothing either.
        t.kill_and_remount();
        suite::same_state(t.s(), &want);
        // And the store goes on taking writes.
        let o = ObjectId::new(7, "after");
        let mut tx = Transaction::new();
        tx.write(suite::c1(), &o, 10, vec![7; 100]);
        t.s().apply(tx).unwrap();
        t.kill_and_remount();
        assert_eq!(t.s().stat(suite::c1(), &o).unwrap().size, 110);
    }
}

#[test]
fn a_killed_store_with_a_wrapping_ring_replays_from_its_last_checkpoint() {
    for seed in 5..=6 {
        let mut t = TempFile::new(FileConfig {
            journal_size: 4 << 20,
            sync_interval: Duration::from_secs(3600),
            ..FileConfig::default()
        });
        suite::random_against_model(t.s(), seed, 200);
        let want = copy(t.s());
        t.kill_and_remount();
        suite::same_state(t.s(), &want);
    }
}

#[test]
fn moves_replay_without_bringing_back_what_they_moved() {
    let mut t = TempFile::lazy();
    let (a, b) = (CollectionId::pg(1, 0), CollectionId::pg(1, 1));
    let objs: Vec<ObjectId> = (0..5).map(|i| ObjectId::new(i, format!("m{i}"))).collect();
    let mut tx = Transaction::new();
    tx.create_collection(a).create_collection(b);
    for o in &objs {
        tx.write_full(a, o, vec![1; 3000])
            .setattr(a, o, "v", vec![1])
            .omap_setkeys(a, o, vec![(b"k".to_vec(), b"1".to_vec())]);
    }
    t.s().apply(tx).unwrap();
    let mut tx = Transaction::new();
    tx.write(a, &objs[0], 100, vec![2; 10])
        .move_objects(a, b, objs[..3].to_vec())
        .write(b, &objs[0], 200, vec![3; 10])
        // The same name made again in the old collection.
        .write_full(a, &objs[1], vec![4; 50]);
    t.s().apply(tx).unwrap();
    let want = copy(t.s());
    assert!(!want.exists(a, &objs[0]).unwrap());
    assert!(want.exists(a, &objs[1]).unwrap());
    t.kill_and_remount();
    suite::same_state(t.s(), &want);
}

/// Applies `before` and checkpoints it (a clean remount), applies
/// `after`, then kills the store and checks that the replay gives back
/// what was there.
fn replays_the_same(t: &mut TempFile, before: Vec<Transaction>, after: Vec<Transaction>) {
    for tx in before {
        t.s().apply(tx).unwrap();
    }
    t.remount();
    for tx in after {
        t.s().apply(tx).unwrap();
    }
    let want = copy(t.s());
    t.kill_and_remount();
    suite::same_state(t.s(), &want);
}

#[test]
fn a_clone_moved_away_replays_without_its_source_written_later() {
    let mut t = TempFile::lazy();
    let (a, b) = (CollectionId::pg(1, 0), CollectionId::pg(1, 1));
    let (src, dst) = (ObjectId::new(1, "src"), ObjectId::new(2, "dst"));
    let mut t0 = Transaction::new();
    t0.create_collection(a)
        .create_collection(b)
        .write_full(a, &src, vec![b'A'; 300]);
    let mut t1 = Transaction::new();
    t1.clone_object(a, &src, &dst);
    let mut t2 = Transaction::new();
    t2.move_objects(a, b, vec![dst.clone()]);
    let mut t3 = Transaction::new();
    t3.write(a, &src, 0, vec![b'Z'; 300]);
    replays_the_same(&mut t, vec![t0], vec![t1, t2, t3]);
    assert_eq!(
        t.s().read(b, &dst, &[(0, u64::MAX)]).unwrap()[0],
        vec![b'A'; 300]
    );
}

#[test]
fn a_name_moved_into_and_cloned_onto_keeps_its_newest_object() {
    let mut t = TempFile::lazy();
    let (a, b) = (CollectionId::pg(1, 0), CollectionId::pg(1, 1));
    let (o, x) = (ObjectId::new(1, "o"), ObjectId::new(2, "x"));
    let mut t0 = Transaction::new();
    t0.create_collection(a)
        .create_collection(b)
        .write_full(a, &o, vec![1; 100])
        .write_full(a, &x, vec![2; 100])
        // The destination name held another object before, removed.
        .write_full(b, &o, vec![9; 50]);
    let mut t1 = Transaction::new();
    t1.remove(b, &o);
    let mut t2 = Transaction::new();
    t2.move_objects(a, b, vec![o.clone()]);
    let mut t3 = Transaction::new();
    t3.clone_object(a, &x, &o);
    let mut t4 = Transaction::new();
    t4.write(a, &x, 0, vec![3; 100]);
    replays_the_same(&mut t, vec![t0], vec![t1, t2, t3, t4]);
    assert_eq!(
        t.s().read(b, &o, &[(0, u64::MAX)]).unwrap()[0],
        vec![1; 100]
    );
    assert_eq!(
        t.s().read(a, &o, &[(0, u64::MAX)]).unwrap()[0],
        vec![2; 100]
    );
}

#[test]
fn a_clone_in_the_middle_of_a_transaction_replays_from_there() {
    // The checkpoint after the clone falls inside the transaction; the
    // ops after it are applied again from there.
    let mut t = TempFile::lazy();
    let c = suite::c1();
    let (o, rb) = (ObjectId::new(1, "o"), ObjectId::new(2, "rb"));
    let mut t0 = Transaction::new();
    t0.create_collection(c).write_full(c, &o, vec![1; 8192]);
    let mut t1 = Transaction::new();
    t1.clone_object(c, &o, &rb)
        .write(c, &o, 4096, vec![2; 4096])
        .setattr(c, &o, "v", vec![2])
        .set_record(c, b"log", vec![2]);
    let mut t2 = Transaction::new();
    t2.clone_object(c, &rb, &o).remove(c, &rb);
    replays_the_same(&mut t, vec![t0], vec![t1, t2]);
    assert_eq!(
        t.s().read(c, &o, &[(0, u64::MAX)]).unwrap()[0],
        vec![1; 8192]
    );
    assert!(!t.s().exists(c, &rb).unwrap());
}

#[test]
fn transactions_from_many_threads_all_land() {
    let t = TempFile::small();
    let c = suite::c1();
    let mut tx = Transaction::new();
    tx.create_collection(c);
    t.s().apply(tx).unwrap();
    std::thread::scope(|sc| {
        for w in 0..4u32 {
            let s = t.s();
            sc.spawn(move || {
                for i in 0..100u32 {
                    let o = ObjectId::new(w << 24 | i, format!("w{w}-{i}"));
                    let mut tx = Transaction::new();
                    tx.write(c, &o, 0, vec![w as u8; 4096]).set_record(
                        c,
                        &(w * 1000 + i).to_be_bytes(),
                        vec![1],
                    );
                    s.apply(tx).unwrap();
                }
            });
        }
    });
    assert_eq!(t.s().list(c, None, usize::MAX).unwrap().0.len(), 400);
    assert_eq!(t.s().records(c, b"", usize::MAX).unwrap().len(), 400);
    let (n, _) = t.s().commit_latency();
    assert_eq!(n, 401);
}

#[test]
fn a_transaction_larger_than_half_the_ring_is_refused_whole() {
    let t = TempFile::new(FileConfig {
        journal_size: 1 << 20,
        ..FileConfig::default()
    });
    let c = suite::c1();
    let mut tx = Transaction::new();
    tx.create_collection(c);
    t.s().apply(tx).unwrap();
    let o = ObjectId::new(1, "big");
    let mut tx = Transaction::new();
    tx.write(c, &o, 0, vec![1; 600 << 10]);
    assert!(matches!(t.s().apply(tx), Err(StoreError::TooLarge(_))));
    assert!(!t.s().exists(c, &o).unwrap());
    // Many transactions that together pass the ring's size wait for
    // checkpoints and all land.
    for i in 0..40u32 {
        let mut tx = Transaction::new();
        tx.write(
            c,
            &ObjectId::new(i, format!("o{i}")),
            0,
            vec![i as u8; 100 << 10],
        );
        t.s().apply(tx).unwrap();
    }
    assert_eq!(t.s().list(c, None, usize::MAX).unwrap().0.len(), 40);
}

#[test]
fn a_clean_remount_keeps_everything_and_replays_nothing() {
    let mut t = TempFile::lazy();
    suite::random_against_model(t.s(), 9, 80);
    let want = copy(t.s());
    t.remount();
    suite::same_state(t.s(), &want);
}

#[test]
fn mkfs_and_mount_errors() {
    let t = TempFile::small();
    // A second mkfs over a store is refused.
    assert!(FileStore::mkfs(&t.dir, &t.cfg).is_err());
    // A directory without a file store is not mounted.
    let other = std::env::temp_dir().join(format!("loligo-fs-none-{}", std::process::id()));
    std::fs::create_dir_all(&other).unwrap();
    let e = FileStore::mount(&other, &FileConfig::default())
        .err()
        .unwrap();
    assert!(e.to_string().contains("no file store"), "{e}");
    let _ = std::fs::remove_dir_all(&other);
    // A journal too small for any transaction is refused at mkfs.
    let tiny = std::env::temp_dir().join(format!("loligo-fs-tiny-{}", std::process::id()));
    let cfg = FileConfig {
        journal_size: 4096,
        ..FileConfig::default()
    };
    assert!(FileStore::mkfs(&tiny, &cfg).is_err());
    let _ = std::fs::remove_dir_all(&tiny);
}

#[test]
fn a_clone_replays_without_what_was_written_to_its_source_later() {
    let mut t = TempFile::lazy();
    let c = suite::c1();
    let (o, d) = (ObjectId::new(1, "src"), ObjectId::new(2, "dst"));
    let mut tx = Transaction::new();
    tx.create_collection(c).write(c, &o, 0, vec![b'A'; 100]);
    t.s().apply(tx).unwrap();
    let mut tx = Transaction::new();
    tx.clone_object(c, &o, &d).write(c, &o, 0, vec![b'B'; 10]);
    t.s().apply(tx).unwrap();
    let mut tx = Transaction::new();
    tx.write(c, &o, 200, vec![b'C'; 10]);
    t.s().apply(tx).unwrap();
    t.kill_and_remount();
    assert_eq!(
        t.s().read(c, &d, &[(0, u64::MAX)]).unwrap().remove(0),
        vec![b'A'; 100]
    );
    assert_eq!(t.s().read(c, &o, &[(0, 10)]).unwrap()[0], [b'B'; 10]);
    assert_eq!(t.s().stat(c, &o).unwrap().size, 210);
}
