//! `SimMedia`: a block store's three places in memory, for simulations
//! and power-loss tests. The data device and the journal are
//! [`SimDevice`]s, which remember the writes not yet synced; the engine is
//! a [`SimKv`], which remembers the batches not yet durable.
//! [`SimMedia::power_loss`] gives the media as a machine finds them when
//! the power comes back: every synced write and durable batch, and of the
//! rest what the seed says: each unsynced device write kept whole, lost,
//! or torn sector by sector (writes to one device may land in any order),
//! and a prefix of the engine's unsynced batches (see `kv`). From then on
//! the old media refuse all I/O, so a store still running on them stops.
//! [`SimDevice::corrupt`] flips bits of what a device holds (bit rot).
//!
//! It must never lose a synced write or a durable batch, keep a batch
//! without every batch before it, or read the clock or the OS's
//! randomness (a seed replays exactly).

use crate::error::{Result, StoreError};
use crate::kv::{Kv, KvOp, Visitor};
use crate::media::{Device, Media, MetaSpace};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The unit a torn write keeps or loses.
pub const SECTOR: u64 = 512;
/// The unit a device's bytes are kept in (unwritten pages read as zeros).
const PAGE: u64 = 4096;

/// Keys and values, in key order.
pub type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// Apply `batch` to `m`.
pub fn apply(m: &mut Map, batch: &[KvOp]) {
    for op in batch {
        match op {
            KvOp::Put(k, v) => {
                m.insert(k.clone(), v.clone());
            }
            KvOp::Delete(k) => {
                m.remove(k);
            }
        }
    }
}

/// A small deterministic generator (splitmix64) for the choices a power
/// loss makes.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

fn gone() -> std::io::Error {
    std::io::Error::other("the simulated machine lost power")
}

fn poisoned() -> std::io::Error {
    std::io::Error::other("a thread panicked holding a simulated device")
}

/// Bytes by page; absent pages are zeros.
#[derive(Clone, Default)]
struct Pages(BTreeMap<u64, Box<[u8]>>);

impl Pages {
    fn read(&self, buf: &mut [u8], off: u64) {
        let mut at = 0usize;
        while at < buf.len() {
            let pos = off + at as u64;
            let (page, inside) = (pos / PAGE, (pos % PAGE) as usize);
            let n = (PAGE as usize - inside).min(buf.len() - at);
            match self.0.get(&page) {
                Some(p) => buf[at..at + n].copy_from_slice(&p[inside..inside + n]),
                None => buf[at..at + n].fill(0),
            }
            at += n;
        }
    }

    fn write(&mut self, buf: &[u8], off: u64) {
        let mut at = 0usize;
        while at < buf.len() {
            let pos = off + at as u64;
            let (page, inside) = (pos / PAGE, (pos % PAGE) as usize);
            let n = (PAGE as usize - inside).min(buf.len() - at);
            let p = self
                .0
                .entry(page)
                .or_insert_with(|| vec![0u8; PAGE as usize].into_boxed_slice());
            p[inside..inside + n].copy_from_slice(&buf[at..at + n]);
            at += n;
        }
    }
}

#[derive(Default)]
struct Disk {
    len: u64,
    /// What reads see.
    now: Pages,
    /// What a power loss keeps for certain.
    durable: Pages,
    /// Writes since the last sync, in order.
    pending: Vec<(u64, Vec<u8>)>,
    dead: bool,
    writes: u64,
    syncs: u64,
}

/// A device in memory that knows which of its writes are synced.
#[derive(Default)]
pub struct SimDevice(Mutex<Disk>);

/// What a device has done (for tests that check a workload reached the
/// cases it means to).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceCounts {
    pub writes: u64,
    pub syncs: u64,
    /// Writes not yet synced.
    pub pending: u64,
}

impl SimDevice {
    /// A device of `len` zero bytes.
    pub fn new(len: u64) -> SimDevice {
        SimDevice(Mutex::new(Disk {
            len,
            ..Disk::default()
        }))
    }

    fn lock(&self) -> std::io::Result<MutexGuard<'_, Disk>> {
        let d = self.0.lock().map_err(|_| poisoned())?;
        if d.dead {
            return Err(gone());
        }
        Ok(d)
    }

    /// Flip the bits of `mask` in the byte at `off`, in what reads see
    /// and in what a power loss keeps alike (the medium rotted).
    pub fn corrupt(&self, off: u64, mask: u8) -> std::io::Result<()> {
        let mut d = self.lock()?;
        if off >= d.len {
            return Err(std::io::Error::other("corruption past the device's end"));
        }
        let d = &mut *d;
        for pages in [&mut d.now, &mut d.durable] {
            let mut b = [0u8];
            pages.read(&mut b, off);
            b[0] ^= mask;
            pages.write(&b, off);
        }
        Ok(())
    }

    pub fn counts(&self) -> DeviceCounts {
        self.0
            .lock()
            .map(|d| DeviceCounts {
                writes: d.writes,
                syncs: d.syncs,
                pending: d.pending.len() as u64,
            })
            .unwrap_or_default()
    }

    /// The device after a power loss (see the module's comment); this one
    /// refuses all I/O from now on.
    fn power_loss(&self, mix: &mut Mix) -> SimDevice {
        let mut d = match self.0.lock() {
            Ok(d) => d,
            Err(p) => p.into_inner(),
        };
        d.dead = true;
        let mut kept = d.durable.clone();
        for (off, data) in &d.pending {
            match mix.below(3) {
                0 => {}
                1 => kept.write(data, *off),
                _ => {
                    // Torn: each sector the write covers lands or not.
                    let end = off + data.len() as u64;
                    let mut at = *off;
                    while at < end {
                        let next = ((at / SECTOR + 1) * SECTOR).min(end);
                        if mix.below(2) == 0 {
                            let r = (at - off) as usize..(next - off) as usize;
                            kept.write(&data[r], at);
                        }
                        at = next;
                    }
                }
            }
        }
        SimDevice(Mutex::new(Disk {
            len: d.len,
            now: kept.clone(),
            durable: kept,
            ..Disk::default()
        }))
    }
}

impl Device for SimDevice {
    fn read_exact_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        let d = self.lock()?;
        if off.saturating_add(buf.len() as u64) > d.len {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        d.now.read(buf, off);
        Ok(())
    }

    fn write_all_at(&self, buf: &[u8], off: u64) -> std::io::Result<()> {
        let mut d = self.lock()?;
        if off.saturating_add(buf.len() as u64) > d.len {
            return Err(std::io::Error::other("a write past the device's end"));
        }
        d.now.write(buf, off);
        d.pending.push((off, buf.to_vec()));
        d.writes += 1;
        Ok(())
    }

    fn sync_data(&self) -> std::io::Result<()> {
        let mut d = self.lock()?;
        let pending = std::mem::take(&mut d.pending);
        for (off, data) in &pending {
            d.durable.write(data, *off);
        }
        d.syncs += 1;
        Ok(())
    }

    fn size(&self) -> std::io::Result<u64> {
        Ok(self.lock()?.len)
    }
}

/// An engine that keeps a prefix of its batches across a crash: every
/// persisted one, and as many later ones as the crash says.
#[derive(Default)]
struct Engine {
    batches: Vec<Vec<KvOp>>,
    durable: usize,
    map: Map,
    dead: bool,
}

/// An in-memory [`Kv`] with the crash model the block store assumes of
/// its engine. Clones share one engine.
#[derive(Clone, Default)]
pub struct SimKv(Arc<Mutex<Engine>>);

fn kv_gone() -> StoreError {
    StoreError::Io("kv: the simulated machine lost power".into())
}

impl SimKv {
    fn lock(&self) -> Result<MutexGuard<'_, Engine>> {
        let e = self
            .0
            .lock()
            .map_err(|_| StoreError::Io("kv: a thread panicked holding it".into()))?;
        if e.dead {
            return Err(kv_gone());
        }
        Ok(e)
    }

    /// The engine after a crash that kept `extra` batches past the
    /// durable ones; this one refuses all calls from now on.
    pub fn crash(&self, extra: usize) -> SimKv {
        let mut e = match self.0.lock() {
            Ok(e) => e,
            Err(p) => p.into_inner(),
        };
        e.dead = true;
        let keep = (e.durable + extra).min(e.batches.len());
        let mut n = Engine {
            batches: e.batches[..keep].to_vec(),
            durable: keep,
            ..Engine::default()
        };
        for b in &e.batches[..keep] {
            apply(&mut n.map, b);
        }
        SimKv(Arc::new(Mutex::new(n)))
    }

    /// Batches committed and not yet durable.
    pub fn pending(&self) -> usize {
        self.lock().map_or(0, |e| e.batches.len() - e.durable)
    }

    /// Bytes of keys and values held.
    fn bytes(&self) -> u64 {
        self.lock().map_or(0, |e| {
            e.map.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum()
        })
    }
}

impl Kv for SimKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.lock()?.map.get(key).cloned())
    }

    fn visit(&self, start: &[u8], end: Option<&[u8]>, visit: &mut Visitor<'_>) -> Result<()> {
        // Copied out first: the visitor may call the engine again.
        let pairs: Vec<_> = {
            let e = self.lock()?;
            e.map
                .range(start.to_vec()..)
                .take_while(|(k, _)| end.is_none_or(|e| k.as_slice() < e))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        for (k, v) in pairs {
            if !visit(&k, &v)? {
                break;
            }
        }
        Ok(())
    }

    fn commit(&self, batch: Vec<KvOp>, sync: bool) -> Result<()> {
        let mut e = self.lock()?;
        apply(&mut e.map, &batch);
        e.batches.push(batch);
        if sync {
            e.durable = e.batches.len();
        }
        Ok(())
    }

    fn persist(&self) -> Result<()> {
        let mut e = self.lock()?;
        e.durable = e.batches.len();
        Ok(())
    }
}

/// A block store's media in memory (see the module's comment). Clones
/// share the same devices and engine.
#[derive(Clone)]
pub struct SimMedia {
    engine: SimKv,
    block: Arc<SimDevice>,
    journal: Arc<Mutex<Option<Arc<SimDevice>>>>,
}

impl SimMedia {
    /// Empty media with a data device of `block_bytes`.
    pub fn new(block_bytes: u64) -> SimMedia {
        SimMedia {
            engine: SimKv::default(),
            block: Arc::new(SimDevice::new(block_bytes)),
            journal: Arc::default(),
        }
    }

    /// The data device.
    pub fn block_device(&self) -> &Arc<SimDevice> {
        &self.block
    }

    /// The journal, once a store has created it.
    pub fn journal_device(&self) -> Option<Arc<SimDevice>> {
        self.journal.lock().ok().and_then(|j| j.clone())
    }

    /// The media as the machine finds them after the power went (see the
    /// module's comment), choices made by `seed`. These media refuse all
    /// I/O from now on.
    pub fn power_loss(&self, seed: u64) -> SimMedia {
        let mut mix = Mix(seed);
        let pending = match self.engine.0.lock() {
            Ok(e) => e.batches.len() - e.durable,
            Err(_) => 0,
        };
        let extra = mix.below(pending as u64 + 1) as usize;
        let engine = self.engine.crash(extra);
        let block = Arc::new(self.block.power_loss(&mut mix));
        let journal = self
            .journal_device()
            .map(|j| Arc::new(j.power_loss(&mut mix)));
        SimMedia {
            engine,
            block,
            journal: Arc::new(Mutex::new(journal)),
        }
    }
}

impl Media for SimMedia {
    fn engine(&self) -> Result<Box<dyn Kv>> {
        Ok(Box::new(self.engine.clone()))
    }

    fn block(&self) -> Result<Arc<dyn Device>> {
        Ok(self.block.clone())
    }

    fn block_direct(&self) -> Option<Arc<dyn Device>> {
        Some(self.block.clone())
    }

    fn journal(&self) -> Result<Option<Arc<dyn Device>>> {
        Ok(self.journal_device().map(|j| j as Arc<dyn Device>))
    }

    fn create_journal(&self, len: u64, head: &[u8]) -> Result<()> {
        let j = SimDevice::new(len);
        let mut pages = Pages::default();
        pages.write(head, 0);
        if let Ok(mut d) = j.0.lock() {
            d.now = pages.clone();
            d.durable = pages;
        }
        let mut slot = self
            .journal
            .lock()
            .map_err(|_| StoreError::Io("journal: poisoned".into()))?;
        *slot = Some(Arc::new(j));
        Ok(())
    }

    fn journal_name(&self) -> String {
        "the simulated journal".into()
    }

    fn space(&self) -> MetaSpace {
        let journal = self
            .journal_device()
            .and_then(|j| j.size().ok())
            .unwrap_or(0);
        let meta = self.engine.bytes().saturating_add(journal);
        let host_total = 1 << 40;
        MetaSpace {
            meta,
            host_total,
            host_free: host_total - meta.min(host_total),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synced write survives every power loss; an unsynced one is kept,
    /// lost or torn at sector boundaries, and the old device refuses I/O.
    #[test]
    fn power_loss_keeps_synced_writes_and_some_of_the_rest() {
        let mut outcomes = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let m = SimMedia::new(1 << 20);
            let d = m.block_device();
            d.write_all_at(&[1u8; 4096], 0).unwrap();
            d.sync_data().unwrap();
            d.write_all_at(&[2u8; 2048], 1024).unwrap();
            let after = m.power_loss(seed);
            assert!(
                d.write_all_at(&[3], 0).is_err(),
                "the old device still writes"
            );
            let mut b = vec![0u8; 4096];
            after.block_device().read_exact_at(&mut b, 0).unwrap();
            assert!(
                b[..1024].iter().all(|&x| x == 1),
                "seed {seed}: a synced write lost"
            );
            assert!(
                b[3072..].iter().all(|&x| x == 1),
                "seed {seed}: a synced write lost"
            );
            let sectors: Vec<u8> = b[1024..3072].chunks(512).map(|s| s[0]).collect();
            for s in b[1024..3072].chunks(512) {
                assert!(
                    s.iter().all(|&x| x == s[0]),
                    "seed {seed}: a sector torn inside"
                );
            }
            outcomes.insert(sectors);
        }
        assert!(outcomes.contains(&vec![1, 1, 1, 1]), "never lost");
        assert!(outcomes.contains(&vec![2, 2, 2, 2]), "never kept");
        assert!(outcomes.len() > 2, "never torn: {outcomes:?}");
    }

    /// The engine keeps its durable batches and a prefix of the rest.
    #[test]
    fn power_loss_keeps_a_prefix_of_the_engines_batches() {
        let mut kept = std::collections::BTreeSet::new();
        for seed in 0..32 {
            let m = SimMedia::new(1 << 16);
            let kv = m.engine().unwrap();
            kv.commit(vec![KvOp::Put(b"a".to_vec(), vec![0])], true)
                .unwrap();
            for i in 1..=3u8 {
                kv.commit(vec![KvOp::Put(b"a".to_vec(), vec![i])], false)
                    .unwrap();
            }
            let after = m.power_loss(seed);
            assert!(kv.get(b"a").is_err(), "the old engine still answers");
            let v = after.engine().unwrap().get(b"a").unwrap().unwrap();
            kept.insert(v[0]);
        }
        assert_eq!(kept.into_iter().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    }
}
