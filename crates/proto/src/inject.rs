//! Message faults injected into the direct data path, for tests (in the
//! way of Ceph's `ms_inject_socket_failures` and `ms_inject_delay_*`):
//! a messy network between hosts that TCP alone never shows, since it
//! hides loss and duplication below it.
//!
//! Set by the environment variable [`ENV`] before a process starts, as
//! comma-separated `name=value` pairs:
//!
//! - `socket_failures=N`: about one OSD call in N resets its connection
//!   (every call on it fails), half the time before the call is sent and
//!   half the time after (the receiver may act on it; its reply is lost).
//! - `delay_max_ms=D`, `delay_probability=P`: before each frame a
//!   connection writes (calls and replies, both ways), with chance P, a
//!   pause of up to D ms; the frames after it wait too, so order on a
//!   connection is kept, as on a slow link.
//! - `dup_probability=P`: with chance P, a client op (`Op` call) is sent
//!   twice at once, the copy's reply dropped, as a client's resend after
//!   a reset may arrive while the first is still in the OSD. OSD-to-OSD
//!   messages are sent twice only as their senders do themselves: a
//!   message whose reply a reset lost is sent again while its interval
//!   lasts.
//!
//! Only the direct path (client ops and OSD-to-OSD messages) is touched;
//! monitor traffic is not. With [`ENV`] unset nothing here runs beyond one
//! load of an empty cell. It must never be on by default, and a value it
//! cannot read stops the process with an error rather than run without
//! the faults asked for.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// The environment variable that turns message faults on.
pub const ENV: &str = "LOLIGO_MS_INJECT";

/// The faults a process injects into its direct connections.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Faults {
    /// About one call in this many resets its connection (0: never).
    pub socket_failures: u64,
    /// The longest pause before a frame.
    pub delay_max: Duration,
    /// Chance of a pause before a frame (0 to 1).
    pub delay_probability: f64,
    /// Chance that a client op is sent twice (0 to 1).
    pub dup_probability: f64,
}

/// What a call meets, drawn by [`Faults::call`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallFault {
    /// The connection resets before the call is sent.
    ResetBefore,
    /// The call is sent, then the connection resets (its reply is lost).
    ResetAfter,
    /// The call is sent twice (client ops only).
    Duplicate,
}

fn probability(name: &str, v: &str) -> Result<f64, String> {
    let p: f64 = v
        .parse()
        .map_err(|_| format!("{ENV}: {name}={v} is not a number"))?;
    if !(0.0..=1.0).contains(&p) {
        return Err(format!("{ENV}: {name}={v} is not between 0 and 1"));
    }
    Ok(p)
}

impl Faults {
    /// Read a spec such as `socket_failures=200,delay_max_ms=20,
    /// delay_probability=0.1,dup_probability=0.02`; an empty spec injects
    /// nothing.
    pub fn parse(spec: &str) -> Result<Faults, String> {
        let mut f = Faults::default();
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("{ENV}: {pair:?} is not name=value"))?;
            let whole = || {
                v.parse::<u64>()
                    .map_err(|_| format!("{ENV}: {name}={v} is not a whole number"))
            };
            match name {
                "socket_failures" => f.socket_failures = whole()?,
                "delay_max_ms" => f.delay_max = Duration::from_millis(whole()?),
                "delay_probability" => f.delay_probability = probability(name, v)?,
                "dup_probability" => f.dup_probability = probability(name, v)?,
                _ => {
                    return Err(format!(
                        "{ENV}: unknown fault {name:?} (socket_failures, delay_max_ms, \
                         delay_probability, dup_probability)"
                    ))
                }
            }
        }
        if f.delay_probability > 0.0 && f.delay_max.is_zero() {
            return Err(format!("{ENV}: delay_probability needs delay_max_ms"));
        }
        Ok(f)
    }

    /// Whether this injects anything.
    pub fn any(&self) -> bool {
        self.socket_failures > 0 || self.delay_probability > 0.0 || self.dup_probability > 0.0
    }

    /// What a call meets: a reset, a duplicate (only if `op`, a client
    /// op), or nothing.
    pub fn call(&self, rng: &Rng, op: bool) -> Option<CallFault> {
        if self.socket_failures > 0 && rng.below(self.socket_failures) == 0 {
            RESETS.fetch_add(1, Ordering::Relaxed);
            return Some(if rng.below(2) == 0 {
                CallFault::ResetBefore
            } else {
                CallFault::ResetAfter
            });
        }
        let dup = op && rng.chance(self.dup_probability);
        DUPLICATES.fetch_add(u64::from(dup), Ordering::Relaxed);
        dup.then_some(CallFault::Duplicate)
    }

    /// The pause before the next frame, if any.
    pub fn delay(&self, rng: &Rng) -> Option<Duration> {
        if !rng.chance(self.delay_probability) {
            return None;
        }
        let ms = self.delay_max.as_millis() as u64;
        DELAYS.fetch_add(1, Ordering::Relaxed);
        Some(Duration::from_millis(1 + rng.below(ms.max(1))))
    }
}

/// A small generator shared by a process's connections (splitmix64 on
/// one atomic word): the faults need no more than rough chances.
pub struct Rng(AtomicU64);

impl Rng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(AtomicU64::new(seed))
    }

    fn next(&self) -> u64 {
        let mut z = self
            .0
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (which must not be 0).
    pub fn below(&self, n: u64) -> u64 {
        debug_assert!(n > 0);
        self.next() % n.max(1)
    }

    /// True with chance `p`.
    pub fn chance(&self, p: f64) -> bool {
        p > 0.0 && (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

static FAULTS: OnceLock<Option<(Faults, Rng)>> = OnceLock::new();

/// Faults injected so far in this process, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Connections reset before or after a call was sent.
    pub resets: u64,
    /// Client ops sent twice.
    pub duplicates: u64,
    /// Frames held back.
    pub delays: u64,
}

static RESETS: AtomicU64 = AtomicU64::new(0);
static DUPLICATES: AtomicU64 = AtomicU64::new(0);
static DELAYS: AtomicU64 = AtomicU64::new(0);

/// The faults this process has injected so far (so that a test can tell
/// they happened).
pub fn counts() -> Counts {
    Counts {
        resets: RESETS.load(Ordering::Relaxed),
        duplicates: DUPLICATES.load(Ordering::Relaxed),
        delays: DELAYS.load(Ordering::Relaxed),
    }
}

/// Read [`ENV`] once, at the start of a process: `Ok` with the faults it
/// asks for (`None` if unset or empty), or why its value cannot be read.
pub fn install_from_env() -> Result<Option<Faults>, String> {
    let spec = std::env::var(ENV).unwrap_or_default();
    let f = Faults::parse(&spec)?;
    let on = f.any().then_some(f);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id()) << 32;
    let _ = FAULTS.set(on.clone().map(|f| (f, Rng::new(seed))));
    Ok(on)
}

/// The faults this process injects, with its generator (`None`: none,
/// the default).
pub fn faults() -> Option<&'static (Faults, Rng)> {
    FAULTS.get().and_then(Option::as_ref)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_reads_every_fault_and_refuses_what_it_cannot_read() {
        let f = Faults::parse(
            "socket_failures=200, delay_max_ms=20,delay_probability=0.1,dup_probability=0.02",
        )
        .unwrap();
        assert_eq!(f.socket_failures, 200);
        assert_eq!(f.delay_max, Duration::from_millis(20));
        assert_eq!(f.delay_probability, 0.1);
        assert_eq!(f.dup_probability, 0.02);
        assert!(f.any());
        assert!(!Faults::parse("").unwrap().any());
        for bad in [
            "socket_failures",
            "socket_failures=-1",
            "delay_probability=2",
            "delay_probability=0.5",
            "dup_probability=x",
            "drop=1",
        ] {
            assert!(Faults::parse(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn chances_come_out_near_what_was_asked() {
        let rng = Rng::new(7);
        let f = Faults::parse("socket_failures=10,dup_probability=0.5").unwrap();
        let (mut resets, mut before, mut dups) = (0, 0, 0);
        for _ in 0..100_000 {
            match f.call(&rng, true) {
                Some(CallFault::ResetBefore) => {
                    resets += 1;
                    before += 1;
                }
                Some(CallFault::ResetAfter) => resets += 1,
                Some(CallFault::Duplicate) => dups += 1,
                None => {}
            }
        }
        assert!((9_000..11_000).contains(&resets), "{resets} resets");
        assert!((4_000..6_000).contains(&before), "{before} before");
        assert!((43_000..47_000).contains(&dups), "{dups} duplicates");
        // OSD-to-OSD messages are never duplicated.
        assert!((0..10_000).all(|_| f.call(&rng, false) != Some(CallFault::Duplicate)));
        let d = Faults::parse("delay_max_ms=5,delay_probability=1").unwrap();
        for _ in 0..1000 {
            let p = d.delay(&rng).expect("always a pause");
            assert!(p >= Duration::from_millis(1) && p <= Duration::from_millis(5));
        }
        assert!((0..1000).all(|_| Faults::default().delay(&rng).is_none()));
        let c = counts();
        assert!(c.resets >= 10_000 && c.duplicates >= 43_000 && c.delays >= 1000);
    }
}
