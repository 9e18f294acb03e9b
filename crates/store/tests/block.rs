//! The behavioural suite against `BlockStore`, plus what only a store on
//! a device has: remount, corruption, a full disk, fsck, clone sharing.

mod suite;
use loligo_store::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// A block store in a fresh directory, removed on drop.
pub struct TempBlock {
    pub store: Option<BlockStore>,
    pub dir: PathBuf,
    pub cfg: BlockConfig,
}

static N: AtomicU64 = AtomicU64::new(0);

impl TempBlock {
    pub fn new(cfg: BlockConfig) -> TempBlock {
        let dir = std::env::temp_dir().join(format!(
            "loligo-store-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        BlockStore::mkfs(&dir, &cfg).expect("mkfs");
        let store = Some(BlockStore::mount(&dir, &cfg).expect("mount"));
        TempBlock { store, dir, cfg }
    }

    pub fn small() -> TempBlock {
        TempBlock::new(BlockConfig {
            size: 64 << 20,
            ..BlockConfig::default()
        })
    }

    pub fn s(&self) -> &BlockStore {
        self.store.as_ref().expect("mounted")
    }

    pub fn remount(&mut self) {
        self.store = None;
        self.store = Some(BlockStore::mount(&self.dir, &self.cfg).expect("remount"));
    }
}

impl Drop for TempBlock {
    fn drop(&mut self) {
        self.store = None;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl suite::AsStore for TempBlock {
    fn as_store(&self) -> &dyn ObjectStore {
        self.s()
    }
}

store_suite!(TempBlock::small());

impl TempBlock {
    /// A small store whose small writes all take one path.
    pub fn small_with(small_writes: SmallWrites) -> TempBlock {
        TempBlock::new(BlockConfig {
            size: 64 << 20,
            small_writes,
            ..BlockConfig::default()
        })
    }
}

/// Every small write copy-on-write (the default sends data that
/// compresses well through the journal instead).
mod cow {
    use super::*;
    store_suite!(TempBlock::small_with(SmallWrites::CopyOnWrite));
}

/// Every small write through the journal, then in place.
mod deferred {
    use super::*;
    store_suite!(TempBlock::small_with(SmallWrites::Deferred));
}

/// The three ways small writes can go.
const MODES: [SmallWrites; 3] = [
    SmallWrites::Auto,
    SmallWrites::CopyOnWrite,
    SmallWrites::Deferred,
];

fn clean(t: &TempBlock) {
    let r = t.s().fsck(true).expect("fsck runs");
    assert!(r.errors.is_empty(), "fsck: {:?}", r.errors);
}

#[test]
fn survives_remount_and_fsck_is_clean() {
    let mut t = TempBlock::small();
    let s = t.s();
    suite::random_against_model(s, 99, 100);
    clean(&t);
    let model = MemStore::new();
    // Rebuild the model by copying everything visible.
    let c = suite::c1();
    let mut tx = Transaction::new();
    tx.create_collection(c);
    let (objs, _) = s.list(c, None, usize::MAX).unwrap();
    for o in &objs {
        tx.write_full(c, o, s.read(c, o, &[(0, u64::MAX)]).unwrap().remove(0));
        tx.setattrs(c, o, s.getattrs(c, o).unwrap().into_iter().collect());
        tx.omap_setkeys(c, o, s.omap_range(c, o, b"", None, usize::MAX).unwrap());
        tx.omap_setheader(c, o, s.omap_header(c, o).unwrap());
    }
    for (k, v) in s.records(c, b"", usize::MAX).unwrap() {
        tx.set_record(c, &k, v);
    }
    model.apply(tx).unwrap();
    t.remount();
    suite::same_state(t.s(), &model);
    clean(&t);
}

/// Data hinted written whole and read in sequence (BlueStore's rule) is
/// checksummed in units of its expected write size, whether the hint
/// comes in the write's transaction or before and whether the write is
/// large (written ahead) or not: a 64 KiB unit holds 16 blocks' checksums
/// in one. Any part reads back right (checking its whole unit), after a
/// remount too; a changed byte fails every read that touches its unit
/// and only those; overwrites of such data go to new space.
#[test]
fn hinted_sequential_data_is_checksummed_in_larger_units() {
    use loligo_store::hint::{flags, AllocHint};
    let mut t = TempBlock::small();
    let c = suite::c1();
    let hint = AllocHint {
        expected_object_size: 1 << 20,
        expected_write_size: 64 << 10,
        flags: flags::SEQUENTIAL_READ | flags::IMMUTABLE,
    };
    let ah = |tx: &mut Transaction, o: &ObjectId| {
        tx.setattr(c, o, loligo_store::ALLOC_HINT_ATTR, hint.encode());
    };
    let mut rng = loligo_testkit::Rng::new(5);
    let data = rng.bytes((1 << 20) + 12_345);
    let (plain, big, grown) = (
        suite::oid(1, "plain"),
        suite::oid(2, "big"),
        suite::oid(3, "grown"),
    );
    let mut tx = Transaction::new();
    tx.create_collection(c).write_full(c, &plain, data.clone());
    t.s().apply(tx).unwrap();
    let checked = |t: &TempBlock| t.s().fsck(true).unwrap().blocks_checked;
    let plain_sums = checked(&t);
    assert!(plain_sums >= 257, "{plain_sums}");
    let mut tx = Transaction::new();
    ah(&mut tx, &big);
    tx.write_full(c, &big, data.clone());
    t.s().apply(tx).unwrap();
    let big_sums = checked(&t) - plain_sums;
    assert!(
        big_sums <= 20,
        "{big_sums} checksums for 1 MiB in 64 KiB units"
    );
    // Hinted before; written in unaligned pieces through the committer.
    let mut tx = Transaction::new();
    ah(&mut tx, &grown);
    t.s().apply(tx).unwrap();
    for at in (0..data.len()).step_by(100_000) {
        let end = (at + 100_000).min(data.len());
        let mut tx = Transaction::new();
        tx.write(c, &grown, at as u64, data[at..end].to_vec());
        t.s().apply(tx).unwrap();
    }
    let grown_sums = checked(&t) - plain_sums - big_sums;
    assert!(grown_sums < plain_sums / 4, "{grown_sums} checksums");
    let check_reads = |t: &TempBlock, rng: &mut loligo_testkit::Rng, want: &[u8]| {
        for o in [&plain, &big, &grown] {
            assert_eq!(t.s().read(c, o, &[(0, u64::MAX)]).unwrap()[0], want);
            let whole = t.s().read_whole(c, o, true).unwrap().unwrap();
            assert_eq!(whole.data, want);
            for _ in 0..40 {
                let off = rng.below(want.len() as u64);
                let len = 1 + rng.below(200_000);
                let end = (off + len).min(want.len() as u64) as usize;
                let got = t.s().read(c, o, &[(off, len)]).unwrap().remove(0);
                assert_eq!(got, want[off as usize..end], "{o} {off}+{len}");
                let got = t.s().read_bytes(c, o, off, len).unwrap();
                assert_eq!(got, want[off as usize..end], "{o} {off}+{len}");
                // Two extents read as of one moment (an EC shard read).
                let r = t.s().read_with_attrs(c, o, &[(off, len), (0, 200_000)]);
                let r = r.unwrap().expect("exists");
                assert_eq!(r.size, want.len() as u64);
                assert_eq!(r.extents[0], want[off as usize..end], "{o} {off}+{len}");
                assert_eq!(r.extents[1], want[..200_000], "{o} from 0");
            }
        }
    };
    check_reads(&t, &mut rng, &data);
    // Large reads from the start of a unit (one run on the device, read
    // directly and kept in the read cache), twice: from the device, then
    // from the cache.
    for _ in 0..2 {
        for o in [&big, &grown] {
            for off in (0..data.len() as u64).step_by(3 << 16) {
                let end = (off + 200_000).min(data.len() as u64) as usize;
                let got = t.s().read_bytes(c, o, off, 200_000).unwrap();
                assert_eq!(got, data[off as usize..end], "{o} from {off}");
                let r = t.s().read_with_attrs(c, o, &[(off, 200_000)]);
                let got = r.unwrap().expect("exists").extents.remove(0);
                assert_eq!(got, data[off as usize..end], "{o} from {off}");
            }
        }
    }
    clean(&t);
    // Small overwrites (deferred or copy-on-write size) into the units.
    let mut want = data.clone();
    for (off, len) in [(70_000usize, 10usize), (131_072, 4096), (5, 9000)] {
        let patch = rng.bytes(len);
        want[off..off + len].copy_from_slice(&patch);
        let mut tx = Transaction::new();
        for o in [&plain, &big, &grown] {
            tx.write(c, o, off as u64, patch.clone());
        }
        t.s().apply(tx).unwrap();
    }
    check_reads(&t, &mut rng, &want);
    t.remount();
    check_reads(&t, &mut rng, &want);
    clean(&t);
    // A byte changed on the device, inside the unit that holds 300,000.
    let at = t
        .s()
        .data_location(c, &big, 300_000)
        .unwrap()
        .expect("allocated");
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(t.dir.join("block"))
            .unwrap();
        f.write_all_at(&[want[300_000] ^ 0x5a], at).unwrap();
        f.sync_all().unwrap();
    }
    t.remount();
    let s = t.s();
    let unit = 300_000 / (64 << 10) * (64 << 10);
    for (off, len) in [
        (unit, 1),
        (unit + (64 << 10) - 1, 1),
        (290_000, 20_000),
        (0, u64::MAX),
    ] {
        let r = s.read(c, &big, &[(off, len)]);
        assert!(
            matches!(r, Err(StoreError::Checksum { .. })),
            "{off}+{len}: {r:?}"
        );
        let r = s.read_bytes(c, &big, off, len);
        assert!(matches!(r, Err(StoreError::Checksum { .. })), "{off}+{len}");
        let r = s.read_with_attrs(c, &big, &[(off, len)]);
        assert!(matches!(r, Err(StoreError::Checksum { .. })), "{off}+{len}");
    }
    for (off, len) in [(unit - 4096, 4096), (unit + (64 << 10), 4096)] {
        assert_eq!(
            s.read(c, &big, &[(off, len)]).unwrap()[0],
            want[off as usize..(off + len) as usize]
        );
    }
    assert!(s.read_whole(c, &big, true).is_err());
    let report = s.fsck(true).unwrap();
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
}

#[test]
fn corrupted_block_fails_only_its_object() {
    let t = TempBlock::small();
    let s = t.s();
    let c = suite::c1();
    let (a, b) = (suite::oid(1, "a"), suite::oid(2, "b"));
    let mut tx = Transaction::new();
    tx.create_collection(c)
        .write_full(c, &a, vec![7u8; 256 << 10])
        .write_full(c, &b, vec![9u8; 256 << 10]);
    s.apply(tx).unwrap();
    let at = s.data_location(c, &a, 100_000).unwrap().expect("allocated");
    // Flip bytes in the device file under the store.
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(t.dir.join("block"))
            .unwrap();
        f.write_all_at(&[0xde, 0xad], at).unwrap();
        f.sync_all().unwrap();
    }
    let s = t.s();
    let before = s.checksum_errors();
    match s.read(c, &a, &[(0, 256 << 10)]) {
        Err(StoreError::Checksum { oid, offset }) => {
            assert_eq!(oid, a);
            assert_eq!(offset / 4096, 100_000 / 4096);
        }
        other => panic!("expected a checksum error, got {other:?}"),
    }
    assert_eq!(s.checksum_errors(), before + 1);
    // Read into a shared buffer (from the device directly), the same.
    match s.read_bytes(c, &a, 0, 256 << 10) {
        Err(StoreError::Checksum { oid, .. }) => assert_eq!(oid, a),
        other => panic!("expected a checksum error, got {other:?}"),
    }
    assert_eq!(s.checksum_errors(), before + 2);
    assert_eq!(
        s.read_bytes(c, &b, 0, 256 << 10).unwrap(),
        vec![9u8; 256 << 10]
    );
    // An EC shard read (extents with attributes, directly too), the same.
    match s.read_with_attrs(c, &a, &[(0, 256 << 10)]) {
        Err(StoreError::Checksum { oid, .. }) => assert_eq!(oid, a),
        other => panic!("expected a checksum error, got {other:?}"),
    }
    assert_eq!(s.checksum_errors(), before + 3);
    let r = s
        .read_with_attrs(c, &b, &[(0, 256 << 10)])
        .unwrap()
        .unwrap();
    assert_eq!(r.extents, [vec![9u8; 256 << 10]]);
    // A whole read (as a scrub's or a recovery's: from the device
    // directly, past the read cache), the same.
    match s.read_whole(c, &a, true) {
        Err(StoreError::Checksum { oid, .. }) => assert_eq!(oid, a),
        other => panic!("expected a checksum error, got {:?}", other.map(|_| ())),
    }
    assert_eq!(s.checksum_errors(), before + 4);
    let whole = s.read_whole(c, &b, true).unwrap().unwrap();
    assert_eq!((whole.size, whole.data), (256 << 10, vec![9u8; 256 << 10]));
    // Other ranges of the same object and other objects still read.
    assert_eq!(s.read(c, &a, &[(0, 4096)]).unwrap()[0], vec![7u8; 4096]);
    assert_eq!(
        s.read(c, &b, &[(0, 256 << 10)]).unwrap()[0],
        vec![9u8; 256 << 10]
    );
    let r = s.fsck(true).unwrap();
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
}

#[test]
fn full_disk_is_an_error_and_the_store_stays_usable() {
    let t = TempBlock::new(BlockConfig {
        size: 4 << 20,
        ..BlockConfig::default()
    });
    let s = t.s();
    let c = suite::c1();
    let mut tx = Transaction::new();
    tx.create_collection(c)
        .write_full(c, &suite::oid(1, "a"), vec![1u8; 3 << 20]);
    s.apply(tx).unwrap();
    let mut tx = Transaction::new();
    tx.write_full(c, &suite::oid(2, "b"), vec![2u8; 2 << 20]);
    assert!(matches!(s.apply(tx), Err(StoreError::NoSpace { .. })));
    assert!(!s.exists(c, &suite::oid(2, "b")).unwrap());
    clean(&t);
    // Free space, then the same write fits (after the quarantine batch).
    let mut tx = Transaction::new();
    tx.remove(c, &suite::oid(1, "a"));
    s.apply(tx).unwrap();
    let mut tx = Transaction::new();
    tx.touch(c, &suite::oid(3, "nudge"));
    s.apply(tx).unwrap();
    let mut tx = Transaction::new();
    tx.write_full(c, &suite::oid(2, "b"), vec![2u8; 2 << 20]);
    s.apply(tx).unwrap();
    assert_eq!(
        s.read(c, &suite::oid(2, "b"), &[(0, 10)]).unwrap()[0],
        vec![2u8; 10]
    );
    clean(&t);
}

/// Removing objects, then their collection, gives their blocks back on
/// an idle store too: the data allocated falls to what it was before
/// they were written.
#[test]
fn removed_objects_give_their_blocks_back() {
    let t = TempBlock::small();
    let s = t.s();
    let c = suite::c1();
    let mut tx = Transaction::new();
    tx.create_collection(c);
    s.apply(tx).unwrap();
    let used0 = s.statfs().unwrap().used;
    let noise = loligo_testkit::Rng::new(3).bytes(1 << 20);
    for i in 0..8 {
        let mut tx = Transaction::new();
        tx.write_full(c, &suite::oid(i, "o"), noise.clone());
        s.apply(tx).unwrap();
    }
    assert!(s.statfs().unwrap().used - used0 >= 8 << 20);
    let mut tx = Transaction::new();
    for i in 0..8 {
        tx.remove(c, &suite::oid(i, "o"));
    }
    tx.remove_collection(c);
    s.apply(tx).unwrap();
    // (Freed space is reused once a later batch has committed and the
    // one that freed it is durable: an idle store commits an empty one.)
    let t0 = std::time::Instant::now();
    while s.statfs().unwrap().used != used0 {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(5),
            "the blocks did not come back: {:?}",
            s.statfs().unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Omap and small objects grow the metadata, not the block allocator:
/// statfs counts them (`meta`, in `stored` and in `fill`), and says how
/// full the file system they grow on is. (Until the engine writes them
/// to its tables they are in the journal, whose file is counted whole:
/// a remount writes them.)
#[test]
fn metadata_counts_towards_what_the_store_holds() {
    let mut t = TempBlock::small();
    let s = t.s();
    let c = suite::c1();
    let mut tx = Transaction::new();
    tx.create_collection(c);
    s.apply(tx).unwrap();
    let before = s.statfs().unwrap();
    assert!(
        before.host_total > 0 && before.host_free <= before.host_total,
        "{before:?}"
    );
    for batch in 0..8 {
        let mut tx = Transaction::new();
        let kvs = (0..1000)
            .map(|i| {
                (
                    format!("k{batch}-{i:04}").into_bytes(),
                    vec![batch as u8; 1024],
                )
            })
            .collect();
        tx.omap_setkeys(c, &suite::oid(1, "o"), kvs);
        s.apply(tx).unwrap();
    }
    t.remount();
    let after = t.s().statfs().unwrap();
    assert_eq!(after.used, before.used, "omap takes no data blocks");
    // The block file, on the same file system, is not the file system's
    // fill: an almost empty store is far from full by either measure.
    let (u, t) = before.fill();
    assert!(
        (u as f64) < 0.85 * t as f64
            || before.host_total - before.host_free > before.host_total / 2,
        "an empty store looks full: {before:?}"
    );
    assert!(
        after.meta >= before.meta + (4 << 20),
        "8 MiB of omap: metadata {} -> {} bytes",
        before.meta,
        after.meta
    );
    assert_eq!(after.stored(), after.used + after.meta);
    let (used, total) = after.fill();
    assert!(used <= total && total > 0);
    // The fill is the fuller of the two spaces (the metadata's with its
    // reserve counted as used).
    let data = after.stored() as f64 / (after.total + after.meta) as f64;
    let reserved = (after.host_total - after.host_free + loligo_store::names::META_RESERVE_BYTES)
        .min(after.host_total);
    let host = reserved as f64 / after.host_total as f64;
    assert!((used as f64 / total as f64 - data.max(host)).abs() < 1e-9);
}

#[test]
fn device_reads_count_exactly_the_blocks_a_read_needs() {
    let t = TempBlock::small();
    let s = t.s();
    let c = suite::c1();
    let o = suite::oid(1, "a");
    let mut tx = Transaction::new();
    tx.create_collection(c)
        .write_full(c, &o, vec![7u8; 1 << 20]);
    s.apply(tx).unwrap();
    let (b0, n0) = s.device_reads();
    // Two aligned runs of elements: exactly their bytes, one request each.
    let got = s.read(c, &o, &[(4096, 8192), (65536, 4096)]).unwrap();
    assert_eq!(got.iter().map(Vec::len).sum::<usize>(), 12288);
    let (b1, n1) = s.device_reads();
    assert_eq!((b1 - b0, n1 - n0), (12288, 2));
    // An unaligned read costs its whole checksum block.
    s.read(c, &o, &[(100, 10)]).unwrap();
    let (b2, _) = s.device_reads();
    assert_eq!(b2 - b1, 4096);
    clean(&t);
}

thread_local! {
    /// Device reads the counting hook below saw, on this thread.
    static WAITS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn counting_wait(read: &mut dyn FnMut()) {
    WAITS.with(|w| w.set(w.get() + 1));
    read();
}

fn skipping_wait(_read: &mut dyn FnMut()) {}

#[test]
fn large_device_reads_run_inside_the_device_wait_hook() {
    let mut t = TempBlock::new(BlockConfig {
        size: 64 << 20,
        read_cache: 0,
        device_wait: DeviceWait(counting_wait),
        ..BlockConfig::default()
    });
    let c = suite::c1();
    let o = suite::oid(1, "a");
    let data: Vec<u8> = (0..(1u32 << 20))
        .map(|i| (i * 7 + i / 4096) as u8)
        .collect();
    let mut tx = Transaction::new();
    tx.create_collection(c).write_full(c, &o, data.clone());
    t.s().apply(tx).unwrap();
    let waits = || WAITS.with(std::cell::Cell::get);
    // A small read goes to the device without the hook.
    let w0 = waits();
    assert_eq!(
        t.s().read_bytes(c, &o, 8192, 4096).unwrap(),
        data[8192..12288]
    );
    assert_eq!(waits(), w0);
    // A large one (the whole object, and 256 KiB of it) inside it, once.
    assert_eq!(t.s().read_bytes(c, &o, 0, 1 << 20).unwrap(), data[..]);
    assert_eq!(waits(), w0 + 1);
    assert_eq!(
        t.s().read_bytes(c, &o, 65536, 256 << 10).unwrap(),
        data[65536..65536 + (256 << 10)]
    );
    assert_eq!(waits(), w0 + 2);
    // A hook that never runs the read fails it with an error that says
    // so: no panic, no zeros.
    t.cfg.device_wait = DeviceWait(skipping_wait);
    t.remount();
    let e = t.s().read_bytes(c, &o, 0, 1 << 20).unwrap_err();
    assert!(e.to_string().contains("did not run the read"), "{e}");
    assert_eq!(t.s().read_bytes(c, &o, 0, 4096).unwrap(), data[..4096]);
    clean(&t);
}

#[test]
fn shared_read_buffers_are_reused_only_once_released() {
    let t = TempBlock::small();
    let s = t.s();
    let c = suite::c1();
    let mut tx = Transaction::new();
    tx.create_collection(c);
    for i in 0..4u8 {
        tx.write_full(c, &suite::oid(u32::from(i), "o"), vec![i; 1 << 20]);
    }
    s.apply(tx).unwrap();
    let read = |i: u8| {
        s.read_bytes(c, &suite::oid(u32::from(i), "o"), 0, 1 << 20)
            .unwrap()
    };
    // Held reads keep their buffers; released ones are refilled by later
    // reads, and no held read changes under them.
    let a = read(0);
    let b = read(1);
    let a2 = a.slice(4096..8192);
    drop(a);
    let c2 = read(2);
    drop(b);
    let d = read(3);
    assert_eq!(a2, vec![0u8; 4096]);
    assert_eq!(c2, vec![2u8; 1 << 20]);
    assert_eq!(d, vec![3u8; 1 << 20]);
    drop(a2);
    for i in 0..4u8 {
        assert_eq!(read(i), vec![i; 1 << 20]);
    }
    clean(&t);
}

#[test]
fn large_reads_racing_commits_never_see_a_stale_or_torn_block() {
    // One writer raises a 256 KiB object's blocks to v: all of them by a
    // new allocation (a whole write), or one in place (a deferred 4 KiB
    // overwrite), in turn, and after each commit publishes what every
    // block now holds. Readers read the object whole, racing the commits:
    // every 4 KiB block must be uniform and at least what was published
    // before the read began (a cached run that a commit should have
    // dropped would be older), and no read may fail its checksums.
    let t = TempBlock::small();
    let s = t.s();
    let c = suite::c1();
    let o = suite::oid(1, "hot");
    const LEN: usize = 256 << 10;
    const BLOCKS: usize = LEN / 4096;
    let mut tx = Transaction::new();
    tx.create_collection(c).write_full(c, &o, vec![0u8; LEN]);
    s.apply(tx).unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let floor: Vec<std::sync::atomic::AtomicU8> = (0..BLOCKS)
        .map(|_| std::sync::atomic::AtomicU8::new(0))
        .collect();
    std::thread::scope(|sc| {
        for _ in 0..2 {
            sc.spawn(|| {
                let mut reads = 0u32;
                while !done.load(Ordering::SeqCst) || reads == 0 {
                    let least: Vec<u8> = floor.iter().map(|f| f.load(Ordering::SeqCst)).collect();
                    // (Every other one whole, as a scrub reads: with no
                    // lock held while the device reads.)
                    let got = if reads.is_multiple_of(2) {
                        s.read_bytes(c, &o, 0, u64::MAX).unwrap().to_vec()
                    } else {
                        s.read_whole(c, &o, true).unwrap().unwrap().data
                    };
                    assert_eq!(got.len(), LEN);
                    for (b, blk) in got.chunks(4096).enumerate() {
                        let v = blk[0];
                        assert!(blk.iter().all(|&x| x == v), "block {b} torn");
                        assert!(
                            v >= least[b],
                            "block {b} read {v} after {} committed",
                            least[b]
                        );
                    }
                    reads += 1;
                }
            });
        }
        for v in 1..=250u8 {
            let mut tx = Transaction::new();
            let changed = if v % 5 == 0 {
                tx.write_full(c, &o, vec![v; LEN]);
                0..BLOCKS
            } else {
                let b = (usize::from(v) * 7) % BLOCKS;
                tx.write(c, &o, (b * 4096) as u64, vec![v; 4096]);
                b..b + 1
            };
            s.apply(tx).unwrap();
            for f in &floor[changed] {
                f.store(v, Ordering::SeqCst);
            }
        }
        done.store(true, Ordering::SeqCst);
    });
    clean(&t);
}

#[test]
fn clone_shares_extents() {
    let t = TempBlock::small();
    let s = t.s();
    let c = suite::c1();
    let mut tx = Transaction::new();
    tx.create_collection(c)
        .write_full(c, &suite::oid(1, "a"), vec![1u8; 8 << 20]);
    s.apply(tx).unwrap();
    let used = s.statfs().unwrap().used;
    let mut tx = Transaction::new();
    for i in 0..5 {
        tx.clone_object(c, &suite::oid(1, "a"), &suite::oid(2, &format!("c{i}")));
    }
    s.apply(tx).unwrap();
    assert_eq!(s.statfs().unwrap().used, used, "clones cost metadata only");
    clean(&t);
}

#[test]
fn concurrent_writers_share_commits() {
    let t = TempBlock::small();
    let s = t.s();
    let c = suite::c1();
    let mut tx = Transaction::new();
    tx.create_collection(c);
    s.apply(tx).unwrap();
    std::thread::scope(|sc| {
        for w in 0..8u32 {
            sc.spawn(move || {
                for i in 0..25u32 {
                    let mut tx = Transaction::new();
                    tx.write(
                        c,
                        &suite::oid(w, &format!("w{w}")),
                        u64::from(i) * 4096,
                        vec![w as u8; 4096],
                    );
                    s.apply(tx).unwrap();
                }
            });
        }
    });
    for w in 0..8u32 {
        let d = s
            .read(c, &suite::oid(w, &format!("w{w}")), &[(0, u64::MAX)])
            .unwrap()
            .remove(0);
        assert_eq!(d, vec![w as u8; 25 * 4096]);
    }
    clean(&t);
}

#[test]
fn mkfs_and_mount_errors() {
    let t = TempBlock::small();
    assert!(
        BlockStore::mkfs(&t.dir, &t.cfg).is_err(),
        "mkfs over an existing store"
    );
    let bad = BlockConfig {
        block_size: 1000,
        ..t.cfg
    };
    assert!(matches!(
        BlockStore::mkfs(&t.dir.join("x"), &bad),
        Err(StoreError::Invalid(_))
    ));
    let empty = t.dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    assert!(BlockStore::mount(&empty, &t.cfg).is_err());
}

#[test]
fn lz4_compression_saves_space_and_reads_back() {
    let mut t = TempBlock::small();
    let c = suite::c1();
    let s = t.s();
    let mut tx = Transaction::new();
    tx.create_collection(c).set_compression(c, Compression::Lz4);
    s.apply(tx).unwrap();
    let text: Vec<u8> = (0..1u32 << 20)
        .map(|i| b"loligo squid "[(i % 13) as usize])
        .collect();
    let noise: Vec<u8> = loligo_testkit::Rng::new(7).bytes(1 << 20);
    let used0 = s.statfs().unwrap().used;
    let mut tx = Transaction::new();
    tx.write_full(c, &suite::oid(1, "text"), text.clone());
    s.apply(tx).unwrap();
    let used1 = s.statfs().unwrap().used;
    assert!(
        used1 - used0 < 256 << 10,
        "1 MiB of text took {} bytes",
        used1 - used0
    );
    let mut tx = Transaction::new();
    tx.write_full(c, &suite::oid(2, "noise"), noise.clone());
    s.apply(tx).unwrap();
    assert!(
        s.statfs().unwrap().used - used1 >= 1 << 20,
        "incompressible data is stored as is"
    );
    // Partial overwrite and a clone of the compressed object.
    let mut want = text.clone();
    want[100_000..100_010].copy_from_slice(b"0123456789");
    let mut tx = Transaction::new();
    tx.write(c, &suite::oid(1, "text"), 100_000, b"0123456789".to_vec())
        .clone_object(c, &suite::oid(1, "text"), &suite::oid(3, "copy"));
    s.apply(tx).unwrap();
    for o in [suite::oid(1, "text"), suite::oid(3, "copy")] {
        assert_eq!(s.read(c, &o, &[(0, u64::MAX)]).unwrap()[0], want);
        assert_eq!(
            s.read(c, &o, &[(99_990, 30)]).unwrap()[0],
            want[99_990..100_020]
        );
    }
    clean(&t);
    t.remount();
    assert_eq!(
        t.s()
            .read(c, &suite::oid(2, "noise"), &[(0, u64::MAX)])
            .unwrap()[0],
        noise
    );
    assert_eq!(
        t.s()
            .read(c, &suite::oid(1, "text"), &[(0, u64::MAX)])
            .unwrap()[0],
        want
    );
    clean(&t);
}

/// Ceph's compression modes: `passive` compresses only objects hinted
/// compressible, `aggressive` all but those hinted incompressible, and
/// the hint is read when the write happens (set in the same transaction
/// or before), whatever the write's kind.
#[test]
fn compression_modes_follow_allocation_hints() {
    use loligo_store::hint::{flags, AllocHint};
    let t = TempBlock::small();
    let s = t.s();
    let text: Vec<u8> = (0..256u32 << 10)
        .map(|i| b"loligo squid "[(i % 13) as usize])
        .collect();
    let hint = |f: u32| AllocHint {
        expected_object_size: 1 << 20,
        expected_write_size: 64 << 10,
        flags: f,
    };
    let cases = [
        (Compression::Lz4Passive, None, false),
        (Compression::Lz4Passive, Some(flags::COMPRESSIBLE), true),
        (Compression::Lz4Passive, Some(flags::INCOMPRESSIBLE), false),
        (Compression::Lz4Aggressive, None, true),
        (Compression::Lz4Aggressive, Some(flags::COMPRESSIBLE), true),
        (
            Compression::Lz4Aggressive,
            Some(flags::INCOMPRESSIBLE),
            false,
        ),
        (Compression::Lz4, Some(flags::INCOMPRESSIBLE), true),
        (Compression::None, Some(flags::COMPRESSIBLE), false),
    ];
    for (i, (mode, f, packed)) in cases.into_iter().enumerate() {
        let c = CollectionId::pg(7, i as u32);
        let mut tx = Transaction::new();
        tx.create_collection(c).set_compression(c, mode);
        s.apply(tx).unwrap();
        // Three ways in: a full write with the hint in its transaction,
        // a partial write and a truncation after a hint set alone.
        let (a, b) = (suite::oid(1, "full"), suite::oid(2, "partial"));
        let mut tx = Transaction::new();
        if let Some(f) = f {
            for o in [&a, &b] {
                tx.setattr(c, o, loligo_store::ALLOC_HINT_ATTR, hint(f).encode());
            }
        }
        tx.touch(c, &b);
        s.apply(tx).unwrap();
        let used0 = s.statfs().unwrap().used;
        let mut tx = Transaction::new();
        tx.write_full(c, &a, text.clone())
            .write(c, &b, 4096, text.clone());
        s.apply(tx).unwrap();
        let used = s.statfs().unwrap().used - used0;
        let whole = 2 * text.len() as u64;
        if packed {
            assert!(used < whole / 4, "{mode:?} {f:?}: {used} bytes used");
        } else {
            assert!(used >= whole, "{mode:?} {f:?}: {used} bytes used");
        }
        assert_eq!(s.read(c, &a, &[(0, u64::MAX)]).unwrap()[0], text);
        assert_eq!(s.read(c, &b, &[(4096, u64::MAX)]).unwrap()[0], text);
    }
    clean(&t);
}

#[test]
fn random_against_model_with_compression() {
    for (seed, mode) in (11..=13).zip(MODES) {
        let t = TempBlock::small_with(mode);
        let c = suite::c1();
        let mut tx = Transaction::new();
        tx.create_collection(c).set_compression(c, Compression::Lz4);
        t.s().apply(tx).unwrap();
        suite::random_against_model(t.s(), seed, 150);
        clean(&t);
    }
}

#[test]
fn store_on_a_device_path() {
    let t = TempBlock::small();
    let dir = t.dir.join("on-device");
    let dev = t.dir.join("fake-device");
    std::fs::write(&dev, vec![0xAAu8; 8 << 20]).unwrap();
    let cfg = BlockConfig {
        size: 64 << 20,
        ..BlockConfig::default()
    };
    BlockStore::mkfs_on(&dir, &cfg, Some(&dev)).unwrap();
    let s = BlockStore::mount(&dir, &cfg).unwrap();
    assert_eq!(
        s.statfs().unwrap().total,
        8 << 20,
        "capped by the device's size"
    );
    let c = suite::c1();
    let mut tx = Transaction::new();
    tx.create_collection(c)
        .write_full(c, &suite::oid(1, "x"), vec![3u8; 1 << 20]);
    s.apply(tx).unwrap();
    assert_eq!(
        s.read(c, &suite::oid(1, "x"), &[(0, 8)]).unwrap()[0],
        vec![3u8; 8]
    );
    assert!(s.fsck(true).unwrap().errors.is_empty());
    drop(s);
    assert!(
        BlockStore::mkfs_on(&dir, &cfg, Some(&dev)).is_err(),
        "refuses to overwrite a store"
    );
    assert!(BlockStore::mkfs_on(&t.dir.join("d2"), &cfg, Some(&t.dir.join("missing"))).is_err());
}

#[test]
fn failed_transaction_returns_space_written_ahead() {
    let t = TempBlock::small();
    let s = t.s();
    let c = suite::c1();
    let mut tx = Transaction::new();
    tx.create_collection(c);
    s.apply(tx).unwrap();
    let free0 = s.statfs().unwrap().free;
    for _ in 0..3 {
        // The large write is written ahead by this thread; the missing
        // object makes the transaction fail after it.
        let mut tx = Transaction::new();
        tx.write_full(c, &suite::oid(1, "big"), vec![1u8; 4 << 20])
            .remove(c, &suite::oid(2, "missing"));
        assert!(matches!(s.apply(tx), Err(StoreError::NoObject { .. })));
    }
    assert_eq!(s.statfs().unwrap().free, free0, "reserved space came back");
    assert!(!s.exists(c, &suite::oid(1, "big")).unwrap());
    clean(&t);
}

#[test]
fn mkfs_refuses_a_block_file_larger_than_the_free_space() {
    let dir = std::env::temp_dir().join(format!("loligo-store-full-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let free = free_bytes(&dir).unwrap();
    let cfg = BlockConfig {
        size: free + (1 << 30),
        ..BlockConfig::default()
    };
    match BlockStore::mkfs(&dir, &cfg) {
        Err(StoreError::NoSpace { needed, free: f }) => {
            assert!(needed > f, "{needed} {f}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!dir.join("block").exists(), "no half-made block file");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failed_transaction_that_freed_space_it_took_leaves_the_free_map_whole() {
    // Blocks taken by a write and freed by a remove of the same object
    // in one transaction that then fails: undone, they are free once,
    // not handed out while the free map lacks them (a later allocation
    // then found them missing and the committer stopped).
    let t = TempBlock::new(BlockConfig {
        size: 64 << 20,
        inline_max: 0,
        ..BlockConfig::default()
    });
    let s = t.s();
    let c = suite::c1();
    let mut tx = Transaction::new();
    tx.create_collection(c);
    s.apply(tx).unwrap();
    let o = suite::oid(1, "o");
    let mut tx = Transaction::new();
    tx.write_full(c, &o, vec![7u8; 8192])
        .remove(c, &o)
        .remove(c, &suite::oid(2, "missing"));
    assert!(matches!(s.apply(tx), Err(StoreError::NoObject { .. })));
    for i in 0..64u32 {
        let mut tx = Transaction::new();
        tx.write_full(c, &suite::oid(i, &format!("n{i}")), vec![i as u8; 8192]);
        s.apply(tx).unwrap();
    }
    clean(&t);
}

#[test]
fn small_objects_live_in_their_onode_and_move_to_blocks_as_they_grow() {
    let mut t = TempBlock::small();
    let c = suite::c1();
    let o = suite::oid(1, "small");
    let mut tx = Transaction::new();
    tx.create_collection(c);
    t.s().apply(tx).unwrap();
    let free0 = t.s().statfs().unwrap().free;
    let blobs = |t: &TempBlock| t.s().fsck(true).unwrap().blobs;
    let read = |t: &TempBlock| t.s().read(c, &o, &[(0, u64::MAX)]).unwrap().remove(0);

    // In the onode: no blob, no device space.
    let mut tx = Transaction::new();
    tx.write_full(c, &o, vec![1u8; 1000])
        .setattr(c, &o, "v", b"1".to_vec());
    t.s().apply(tx).unwrap();
    assert_eq!(blobs(&t), 0);
    assert_eq!(t.s().statfs().unwrap().free, free0);
    let mut want = vec![1u8; 1000];
    assert_eq!(read(&t), want);

    // Writes, zeros and truncates within the limit stay inline.
    let mut tx = Transaction::new();
    tx.write(c, &o, 1500, vec![2u8; 100])
        .zero(c, &o, 10, 20)
        .truncate(c, &o, 1550);
    t.s().apply(tx).unwrap();
    want.resize(1600, 0);
    want[1500..].fill(2);
    want[10..30].fill(0);
    want.truncate(1550);
    assert_eq!(read(&t), want);
    assert_eq!(t.s().stat(c, &o).unwrap().size, 1550);
    assert_eq!(blobs(&t), 0);
    assert_eq!(t.s().read(c, &o, &[(1540, 100)]).unwrap()[0], want[1540..]);

    // Past the limit: the data moves to blocks, nothing lost.
    let mut tx = Transaction::new();
    tx.write(c, &o, 5000, vec![3u8; 10]);
    t.s().apply(tx).unwrap();
    want.resize(5010, 0);
    want[5000..].fill(3);
    assert_eq!(read(&t), want);
    assert!(blobs(&t) > 0);

    // A whole small write brings it back inline; its blocks are freed.
    let mut tx = Transaction::new();
    tx.write_full(c, &o, vec![4u8; 64]);
    t.s().apply(tx).unwrap();
    assert_eq!(blobs(&t), 0);
    assert_eq!(read(&t), vec![4u8; 64]);

    // A sparse object of any size truncated to a small one: inline, and
    // only as many zeros as it keeps are ever made.
    let sparse = suite::oid(3, "sparse");
    let mut tx = Transaction::new();
    tx.truncate(c, &sparse, 100 << 20).truncate(c, &sparse, 10);
    t.s().apply(tx).unwrap();
    assert_eq!(
        t.s().read(c, &sparse, &[(0, u64::MAX)]).unwrap()[0],
        vec![0u8; 10]
    );

    // A clone carries the data; both survive a remount.
    let copy = suite::oid(2, "copy");
    let mut tx = Transaction::new();
    tx.clone_object(c, &o, &copy);
    t.s().apply(tx).unwrap();
    t.remount();
    assert_eq!(read(&t), vec![4u8; 64]);
    assert_eq!(
        t.s().read(c, &copy, &[(0, u64::MAX)]).unwrap()[0],
        vec![4u8; 64]
    );
    assert_eq!(t.s().getattr(c, &o, "v").unwrap(), b"1".to_vec());
    clean(&t);

    // With inlining turned off at mount, inline objects still read and a
    // write moves them to blocks.
    t.cfg.inline_max = 0;
    t.remount();
    assert_eq!(read(&t), vec![4u8; 64]);
    let mut tx = Transaction::new();
    tx.write(c, &o, 10, vec![5u8; 4]);
    t.s().apply(tx).unwrap();
    let mut want = vec![4u8; 64];
    want[10..14].fill(5);
    assert_eq!(read(&t), want);
    assert!(blobs(&t) > 0);
    clean(&t);
}

#[test]
fn random_against_model_without_inline_objects() {
    // Every small object through blocks and deferred writes (the path
    // objects take above the inline limit, and stores that turn it off).
    for (seed, small_writes) in (21..=23).zip(MODES) {
        let t = TempBlock::new(BlockConfig {
            size: 64 << 20,
            inline_max: 0,
            small_writes,
            ..BlockConfig::default()
        });
        suite::random_against_model(t.s(), seed, 150);
        clean(&t);
    }
}

#[test]
fn read_whole_says_whether_an_object_may_have_omap_keys() {
    let t = TempBlock::small();
    let s = t.s();
    let c = suite::c1();
    let (plain, keyed) = (suite::oid(1, "plain"), suite::oid(2, "keyed"));
    let mut tx = Transaction::new();
    tx.create_collection(c)
        .write_full(c, &plain, vec![1u8; 10])
        .write_full(c, &keyed, vec![2u8; 10])
        .omap_setkeys(c, &keyed, vec![(b"k".to_vec(), b"v".to_vec())]);
    s.apply(tx).unwrap();
    assert!(!s.read_whole(c, &plain, true).unwrap().unwrap().omap);
    assert!(s.read_whole(c, &keyed, true).unwrap().unwrap().omap);
}

#[test]
fn space_freed_by_an_unsynced_transaction_waits_for_a_synced_one() {
    // An unsynced transaction can be lost in a crash; until a synced one
    // follows it, the space it freed must not be handed out (a large
    // write there, on the device before its own commit, would overwrite
    // data that the lost transaction's predecessor still points at).
    let mut t = TempBlock::small();
    let c = suite::c1();
    let (big, other) = (suite::oid(1, "big"), suite::oid(2, "other"));
    let mut tx = Transaction::new();
    tx.create_collection(c)
        .write_full(c, &big, vec![5u8; 1 << 20]);
    t.s().apply(tx).unwrap();
    let touch = |s: &BlockStore, v: u8, sync: bool| {
        let mut tx = Transaction::new();
        tx.setattr(c, &other, "v", vec![v]);
        let done = if sync {
            s.queue_transaction(tx)
        } else {
            s.queue_unsynced(tx)
        };
        done.wait().unwrap();
    };
    // Settle: nothing left in quarantine.
    for v in 0..3 {
        touch(t.s(), v, true);
    }
    let free = || t.s().statfs().unwrap().free;
    let before = free();
    let mut tx = Transaction::new();
    tx.write_full(c, &big, b"small now".to_vec());
    t.s().queue_unsynced(tx).wait().unwrap();
    assert_eq!(t.s().read(c, &big, &[(0, 100)]).unwrap()[0], b"small now");
    for v in 0..3 {
        touch(t.s(), v, false);
        assert_eq!(
            free(),
            before,
            "space freed by an unsynced batch was reused"
        );
    }
    // A synced batch makes the freeing durable and releases the space.
    touch(t.s(), 9, true);
    assert_eq!(free(), before + (1 << 20));
    // Unsynced transactions are durable once the store closes.
    touch(t.s(), 11, false);
    t.remount();
    assert_eq!(t.s().getattr(c, &other, "v").unwrap(), vec![11]);
    assert_eq!(t.s().read(c, &big, &[(0, 100)]).unwrap()[0], b"small now");
    clean(&t);
}

/// Small overwrites of a large object rewrite only the checksum chunks
/// they fall in (a 1 MiB blob keeps its 256 checksums in 4 keys): every
/// byte reads back, across chunk edges, after a remount, after a clone
/// shares the blob, and removing the objects leaves no chunk behind.
#[test]
fn small_overwrites_of_a_large_blob_keep_its_checksums_right() {
    for mode in MODES {
        small_overwrites_of_a_large_blob(mode);
    }
}

fn small_overwrites_of_a_large_blob(mode: SmallWrites) {
    let mut t = TempBlock::small_with(mode);
    let c = suite::c1();
    let a = suite::oid(1, "large");
    let mut model: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    let mut tx = Transaction::new();
    tx.create_collection(c).write_full(c, &a, model.clone());
    t.s().apply(tx).unwrap();
    let mut rng = loligo_testkit::Rng::new(7);
    // Whole blocks at chunk edges (blocks 63, 64, 127-128, the last), then
    // random whole and partial blocks.
    let mut writes: Vec<(u64, usize)> = vec![
        (63 * 4096, 4096),
        (64 * 4096, 4096),
        (127 * 4096, 8192),
        (255 * 4096, 4096),
        (63 * 4096 + 100, 200),
    ];
    for _ in 0..60 {
        let x = rng.next_u64();
        let off = x % (1 << 20);
        if x.is_multiple_of(2) {
            writes.push((off / 4096 * 4096, 4096));
        } else {
            writes.push((off, 1 + (x >> 32) as usize % 9000));
        }
    }
    for (i, &(off, len)) in writes.iter().enumerate() {
        let end = (off as usize + len).min(model.len());
        // Patterned (compresses) and random (does not), for `Auto`.
        let data: Vec<u8> = if i % 3 == 0 {
            rng.bytes(end - off as usize)
        } else {
            (0..end - off as usize).map(|j| (i + j * 7) as u8).collect()
        };
        model[off as usize..end].copy_from_slice(&data);
        let mut tx = Transaction::new();
        tx.write(c, &a, off, data);
        t.s().apply(tx).unwrap();
        if i % 16 == 0 {
            assert_eq!(t.s().read(c, &a, &[(0, 1 << 20)]).unwrap()[0], model);
        }
    }
    assert_eq!(t.s().read(c, &a, &[(0, 1 << 20)]).unwrap()[0], model);
    assert_eq!(t.s().read_bytes(c, &a, 0, 1 << 20).unwrap(), model);
    clean(&t);
    t.remount();
    assert_eq!(t.s().read(c, &a, &[(0, 1 << 20)]).unwrap()[0], model);
    clean(&t);
    // A clone shares the blob: an overwrite of either copies, the other
    // keeps its bytes.
    let b = suite::oid(2, "clone");
    let mut tx = Transaction::new();
    tx.clone_object(c, &a, &b);
    t.s().apply(tx).unwrap();
    let mut tx = Transaction::new();
    tx.write(c, &b, 64 * 4096, vec![0xab; 4096]);
    t.s().apply(tx).unwrap();
    assert_eq!(t.s().read(c, &a, &[(0, 1 << 20)]).unwrap()[0], model);
    let mut cloned = model.clone();
    cloned[64 * 4096..65 * 4096].fill(0xab);
    assert_eq!(t.s().read(c, &b, &[(0, 1 << 20)]).unwrap()[0], cloned);
    clean(&t);
    let mut tx = Transaction::new();
    tx.remove(c, &a).remove(c, &b);
    t.s().apply(tx).unwrap();
    let r = t.s().fsck(true).unwrap();
    assert!(r.errors.is_empty(), "fsck: {:?}", r.errors);
    assert_eq!(r.blobs, 0);
}

/// Writers sharing objects: transactions on one object land in one batch
/// and in consecutive ones, each reading the onodes, blobs and deferred
/// blocks the ones before it changed. Every block, attribute and omap key
/// of every writer must be there at the end, and after a remount.
#[test]
fn writers_sharing_objects_keep_every_change() {
    for mode in MODES {
        writers_sharing_objects(mode);
    }
}

fn writers_sharing_objects(mode: SmallWrites) {
    let mut t = TempBlock::small_with(mode);
    let c = suite::c1();
    let objs = [suite::oid(1, "shared-a"), suite::oid(2, "shared-b")];
    let mut tx = Transaction::new();
    tx.create_collection(c);
    for o in &objs {
        // Large enough for a blob with chunked checksums underneath.
        tx.write_full(c, o, vec![0u8; 512 << 10]);
    }
    t.s().apply(tx).unwrap();
    let (writers, rounds) = (8u32, 40u32);
    let s = t.s();
    std::thread::scope(|sc| {
        for w in 0..writers {
            let objs = &objs;
            sc.spawn(move || {
                for i in 0..rounds {
                    let o = &objs[(i % 2) as usize];
                    // Block w + 8 * (i / 2) of the object: distinct per
                    // writer and round, some of it past the first blob.
                    let blk = u64::from(w + writers * (i / 2));
                    let mut tx = Transaction::new();
                    tx.write(c, o, blk * 4096, vec![(w * rounds + i) as u8 | 1; 4096])
                        .setattr(c, o, &format!("w{w}-{i}"), vec![w as u8])
                        .omap_setkeys(
                            c,
                            o,
                            [(format!("k{w}-{i}").into_bytes(), vec![i as u8])].into(),
                        );
                    s.apply(tx).unwrap();
                }
            });
        }
    });
    let check = |s: &BlockStore| {
        for (n, o) in objs.iter().enumerate() {
            let d = s.read(c, o, &[(0, u64::MAX)]).unwrap().remove(0);
            let attrs = s.getattrs(c, o).unwrap();
            let omap: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = s
                .omap_range(c, o, b"", None, usize::MAX)
                .unwrap()
                .into_iter()
                .collect();
            for w in 0..writers {
                for i in (0..rounds).filter(|i| (i % 2) as usize == n) {
                    let blk = (w + writers * (i / 2)) as usize;
                    let want = (w * rounds + i) as u8 | 1;
                    assert!(
                        d[blk * 4096..(blk + 1) * 4096].iter().all(|&b| b == want),
                        "block {blk} of {o:?} lost writer {w}'s round {i}"
                    );
                    assert!(attrs.contains_key(&format!("w{w}-{i}")));
                    assert!(omap.contains_key(format!("k{w}-{i}").as_bytes()));
                }
            }
        }
    };
    check(t.s());
    clean(&t);
    t.remount();
    check(t.s());
    clean(&t);
}

/// Thousands of deferred overwrites with no large write between them:
/// their in-place data is synced beside the commits once 1,024 records
/// wait, and their records are deleted after. Every byte survives, across
/// a remount (which replays whatever records are left), and fsck is clean.
/// Copy-on-write, the same overwrites leave no record and no space behind.
#[test]
fn many_deferred_overwrites_are_synced_beside_the_commits() {
    for mode in [SmallWrites::Deferred, SmallWrites::CopyOnWrite] {
        many_small_overwrites(mode);
    }
}

fn many_small_overwrites(mode: SmallWrites) {
    let mut t = TempBlock::small_with(mode);
    let c = suite::c1();
    let o = suite::oid(3, "hot");
    let mut tx = Transaction::new();
    tx.create_collection(c)
        .write_full(c, &o, vec![0u8; 1 << 20]);
    t.s().apply(tx).unwrap();
    let model = std::sync::Mutex::new(vec![0u8; 1 << 20]);
    let s = t.s();
    std::thread::scope(|sc| {
        for w in 0..4u64 {
            let (model, o) = (&model, &o);
            sc.spawn(move || {
                let mut rng = loligo_testkit::Rng::new(w);
                for i in 0..700u64 {
                    // Writer w owns blocks w, w + 4, ...: no two writers
                    // race on a block, so the model is exact.
                    let blk = (rng.next_u64() % 64) * 4 + w;
                    let byte = (i as u8) ^ (w as u8 * 61) | 1;
                    let mut tx = Transaction::new();
                    tx.write(c, o, blk * 4096, vec![byte; 4096]);
                    s.apply(tx).unwrap();
                    model.lock().unwrap()[(blk * 4096) as usize..((blk + 1) * 4096) as usize]
                        .fill(byte);
                }
            });
        }
    });
    let model = model.into_inner().unwrap();
    assert!(t.s().read(c, &o, &[(0, 1 << 20)]).unwrap()[0] == model);
    clean(&t);
    // 2,800 records were written; those synced in place were deleted.
    let left = t.s().fsck(false).unwrap().deferred_records;
    if mode == SmallWrites::Deferred {
        assert!(left < 2048, "{left} deferred records left");
    } else {
        assert_eq!(left, 0, "copy-on-write leaves no deferred record");
        settle(&t, c);
        assert_eq!(t.s().statfs().unwrap().used, 1 << 20, "old places freed");
    }
    t.remount();
    assert!(t.s().read(c, &o, &[(0, 1 << 20)]).unwrap()[0] == model);
    clean(&t);
}

/// Large writes are written by the writer threads while `queue` returns at
/// once: transactions queued back to back, over the same objects, must
/// still land in queue order, each completed and none leaking the space it
/// reserved, whatever the writer count; and a store dropped with them
/// queued finishes them first.
#[test]
fn large_writes_queued_back_to_back_land_in_queue_order() {
    for writers in [0, 1, 4] {
        let mut t = TempBlock::new(BlockConfig {
            size: 16 << 20,
            writers,
            ..BlockConfig::default()
        });
        let c = suite::c1();
        let mut tx = Transaction::new();
        tx.create_collection(c);
        t.s().apply(tx).unwrap();
        let oids: Vec<ObjectId> = (0..3).map(|i| suite::oid(i, &format!("o{i}"))).collect();
        let len = |i: usize| (64 << 10) + i * 4096 + i; // 64-261 KiB for i < 50
        let queue = |t: &TempBlock, from: usize| -> Vec<Commit> {
            (from..from + 30)
                .map(|i| {
                    let mut tx = Transaction::new();
                    tx.write_full(c, &oids[i % 3], vec![i as u8; len(i % 50)]);
                    t.s().queue_transaction(tx)
                })
                .collect()
        };
        let check = |t: &TempBlock, last: usize| {
            for (k, o) in oids.iter().enumerate() {
                let i = last - 2 + k;
                let got = t.s().read(c, o, &[(0, u64::MAX)]).unwrap().remove(0);
                assert_eq!(got.len(), len(i % 50), "writers {writers}, {o:?}");
                assert!(
                    got.iter().all(|&b| b == i as u8),
                    "writers {writers}, {o:?}"
                );
            }
            clean(t);
        };
        // Six times the store's size goes through it: space a write
        // reserved and did not use or return would run it out.
        for round in 0..20 {
            for commit in queue(&t, round * 30) {
                commit.wait().unwrap();
            }
            check(&t, round * 30 + 29);
        }
        // Dropped with every write queued: each is committed first.
        let commits = queue(&t, 600);
        t.remount();
        for commit in commits {
            commit.wait().unwrap();
        }
        check(&t, 629);
    }
}

/// The places of blocks 0..n of an object on the device.
fn places(t: &TempBlock, c: CollectionId, o: &ObjectId, n: u64) -> Vec<u64> {
    (0..n)
        .map(|b| t.s().data_location(c, o, b * 4096).unwrap().unwrap())
        .collect()
}

/// A few synced commits: space freed before them becomes reusable (it
/// waits for a later batch and for its own to be durable).
fn settle(t: &TempBlock, c: CollectionId) {
    for i in 0..4u8 {
        let mut tx = Transaction::new();
        tx.set_record(c, b"settle", vec![i]);
        t.s().apply(tx).unwrap();
    }
}

/// Copy-on-write overwrites move blocks within their blob: the blocks
/// written go to new places (one written twice moves twice), the others
/// stay, the old places are freed (fsck finds the device tiled exactly,
/// nothing leaked, every checksum right), the space used stays the
/// object's, and all of it survives a remount. A clone sharing the blob
/// keeps its bytes when the other copy is overwritten, and removing both
/// frees everything.
#[test]
fn copy_on_write_overwrites_move_blocks_and_free_the_old_places() {
    let mut t = TempBlock::small_with(SmallWrites::CopyOnWrite);
    let c = suite::c1();
    let a = suite::oid(1, "cow");
    let mut rng = loligo_testkit::Rng::new(5);
    let mut model = rng.bytes(1 << 20);
    let mut tx = Transaction::new();
    tx.create_collection(c).write_full(c, &a, model.clone());
    t.s().apply(tx).unwrap();
    settle(&t, c);
    let used = t.s().statfs().unwrap().used;
    let before = places(&t, c, &a, 256);
    // Whole blocks at a checksum chunk's edges, two blocks at once, the
    // last block, block 3 twice, and part of block 10.
    let writes: [(u64, usize); 7] = [
        (3 * 4096, 4096),
        (63 * 4096, 4096),
        (64 * 4096, 4096),
        (100 * 4096, 8192),
        (255 * 4096, 4096),
        (3 * 4096, 4096),
        (10 * 4096 + 100, 300),
    ];
    let mut third = 0;
    for (i, &(off, len)) in writes.iter().enumerate() {
        let data = rng.bytes(len);
        model[off as usize..off as usize + len].copy_from_slice(&data);
        let mut tx = Transaction::new();
        tx.write(c, &a, off, data);
        t.s().apply(tx).unwrap();
        if i == 0 {
            third = places(&t, c, &a, 4)[3];
        }
    }
    let after = places(&t, c, &a, 256);
    let written = [3, 63, 64, 100, 101, 255, 10];
    for b in 0..256 {
        let moved = written.contains(&b);
        assert_eq!(
            after[b] != before[b],
            moved,
            "block {b}: {} -> {}",
            before[b],
            after[b]
        );
    }
    assert_ne!(after[3], third, "a block written twice moves twice");
    assert_eq!(
        t.s().fsck(false).unwrap().moved_blocks,
        written.len() as u64
    );
    assert_eq!(t.s().read(c, &a, &[(0, 1 << 20)]).unwrap()[0], model);
    assert_eq!(t.s().read_bytes(c, &a, 0, 1 << 20).unwrap(), model);
    // Ranges that start, end or lie inside moved blocks.
    for (off, len) in [
        (3 * 4096 + 7, 9000),
        (62 * 4096, 3 * 4096),
        (255 * 4096 + 1, 4095),
    ] {
        assert_eq!(
            t.s().read(c, &a, &[(off, len)]).unwrap()[0],
            model[off as usize..(off + len) as usize]
        );
    }
    clean(&t);
    settle(&t, c);
    assert_eq!(t.s().statfs().unwrap().used, used, "old places were freed");
    t.remount();
    assert_eq!(places(&t, c, &a, 256), after);
    assert_eq!(t.s().read_bytes(c, &a, 0, 1 << 20).unwrap(), model);
    clean(&t);
    // A clone shares the blob: its overwrite copies, the original's
    // blocks stay where they are.
    let b = suite::oid(2, "cow-clone");
    let mut tx = Transaction::new();
    tx.clone_object(c, &a, &b);
    t.s().apply(tx).unwrap();
    let mut tx = Transaction::new();
    tx.write(c, &b, 3 * 4096, vec![0xcd; 4096]);
    t.s().apply(tx).unwrap();
    assert_eq!(places(&t, c, &a, 256), after);
    assert_eq!(t.s().read(c, &a, &[(0, 1 << 20)]).unwrap()[0], model);
    let mut cloned = model.clone();
    cloned[3 * 4096..4 * 4096].fill(0xcd);
    assert_eq!(t.s().read(c, &b, &[(0, 1 << 20)]).unwrap()[0], cloned);
    clean(&t);
    let mut tx = Transaction::new();
    tx.remove(c, &a).remove(c, &b);
    t.s().apply(tx).unwrap();
    settle(&t, c);
    let r = t.s().fsck(true).unwrap();
    assert!(r.errors.is_empty(), "fsck: {:?}", r.errors);
    assert_eq!(r.blobs, 0);
    assert_eq!(t.s().statfs().unwrap().used, 0);
}

/// `Auto` sends a small write through the journal when it compresses to a
/// quarter or less (its block stays in place), else copy-on-write (its
/// block moves).
#[test]
fn auto_small_writes_defer_what_compresses_and_copy_what_does_not() {
    let t = TempBlock::small_with(SmallWrites::Auto);
    let c = suite::c1();
    let a = suite::oid(1, "auto");
    let mut rng = loligo_testkit::Rng::new(6);
    let mut tx = Transaction::new();
    tx.create_collection(c)
        .write_full(c, &a, rng.bytes(256 << 10));
    t.s().apply(tx).unwrap();
    let before = places(&t, c, &a, 64);
    let mut tx = Transaction::new();
    tx.write(c, &a, 4096, vec![7; 4096])
        .write(c, &a, 5 * 4096, rng.bytes(4096));
    t.s().apply(tx).unwrap();
    let after = places(&t, c, &a, 64);
    assert_eq!(after[1], before[1], "compressible: deferred, in place");
    assert_ne!(after[5], before[5], "incompressible: copy-on-write");
    assert_eq!(
        (0..64).filter(|&b| after[b] != before[b]).count(),
        1,
        "only the copied block moved"
    );
    assert_eq!(t.s().fsck(false).unwrap().moved_blocks, 1);
    assert_eq!(
        t.s().read(c, &a, &[(4096, 4096)]).unwrap()[0],
        vec![7; 4096]
    );
    clean(&t);
}

/// A block store on simulated media (memory, with a power-loss model);
/// remounts keep everything, as a clean shutdown does.
pub struct SimBlock {
    store: Option<BlockStore>,
    media: loligo_store::sim_media::SimMedia,
    cfg: BlockConfig,
}

impl SimBlock {
    fn small() -> SimBlock {
        let cfg = BlockConfig {
            size: 64 << 20,
            writers: 1,
            ..BlockConfig::default()
        };
        let media = loligo_store::sim_media::SimMedia::new(cfg.size);
        BlockStore::mkfs_media(&media, &cfg).expect("mkfs");
        let store =
            Some(BlockStore::mount_media(std::sync::Arc::new(media.clone()), &cfg).expect("mount"));
        SimBlock { store, media, cfg }
    }
}

impl suite::AsStore for SimBlock {
    fn as_store(&self) -> &dyn ObjectStore {
        self.store.as_ref().expect("mounted")
    }
}

/// The suite on simulated media: the store asks nothing of a device
/// beyond what `media` says.
mod sim {
    use super::*;
    store_suite!(SimBlock::small());

    #[test]
    fn a_clean_remount_keeps_everything() {
        let mut b = SimBlock::small();
        let c = CollectionId::pg(1, 0);
        let o = ObjectId::new(1, "o");
        let mut t = Transaction::new();
        t.create_collection(c).write_full(c, &o, vec![7u8; 300_000]);
        b.store.as_ref().unwrap().apply(t).unwrap();
        b.store = None;
        let s = BlockStore::mount_media(std::sync::Arc::new(b.media.clone()), &b.cfg).unwrap();
        assert_eq!(
            s.read(c, &o, &[(0, u64::MAX)]).unwrap()[0],
            vec![7u8; 300_000]
        );
        assert!(s.fsck(true).unwrap().errors.is_empty());
    }
}

/// A bit flipped on simulated media (`SimDevice::corrupt`, rot under a
/// running store) is caught by the block's checksum on the next read and
/// by a deep fsck, and the other objects read as before.
#[test]
fn rot_on_simulated_media_is_caught_by_checksums() {
    let b = SimBlock::small();
    let s = b.store.as_ref().unwrap();
    let c = CollectionId::pg(1, 0);
    let (bad, good) = (ObjectId::new(1, "bad"), ObjectId::new(2, "good"));
    let mut t = Transaction::new();
    t.create_collection(c)
        .write_full(c, &bad, vec![1u8; 200_000])
        .write_full(c, &good, vec![2u8; 200_000]);
    s.apply(t).unwrap();
    assert!(s.fsck(true).unwrap().errors.is_empty());
    let at = s
        .data_location(c, &bad, 70_000)
        .unwrap()
        .expect("on the device");
    b.media.block_device().corrupt(at, 0x10).unwrap();
    assert!(
        s.read(c, &bad, &[(0, u64::MAX)]).is_err(),
        "a rotted block read back without an error"
    );
    assert_eq!(
        s.read(c, &good, &[(0, u64::MAX)]).unwrap()[0],
        vec![2u8; 200_000]
    );
    let r = s.fsck(true).unwrap();
    assert!(
        r.errors.iter().any(|e| e.contains("checksum mismatch")),
        "deep fsck missed the rot: {:?}",
        r.errors
    );
}
