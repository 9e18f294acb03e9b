//! The monitors losing their leader (`Run::elections`, the real monitors
//! only): for a while (0.2 to 3 s) no leader, so nothing commits and no
//! map is published. What the daemons and the operator ask meanwhile is
//! asked again, as they do, and made once a new leader is in: boots,
//! failure reports, outs and ins (`deferred`, each distinct change list
//! once). An OSD's call for a write-set record or a pg_temp or
//! primary_temp fails; the leader may have taken it before it failed, in
//! which case it commits first once a new leader is in, though the caller
//! never hears so (`limbo`: a change mid-commit). The daemon asks again
//! for a record after `RECORD_RETRY_MS` with its newest ask for that PG
//! (`retries`); a PG asks again for a pg_temp or primary_temp it still
//! needs on its own.
//!
//! It must never commit anything while electing, lose a record ask that
//! is still the newest for its PG, or ask again with an older one.

use loligo_types::{Change, RecordAsk};
use std::collections::BTreeMap;

/// How long the daemon waits before asking again for records the
/// monitors could not take (its `RECORD_RETRY_MS`).
pub const RECORD_RETRY_MS: u64 = 500;
/// Chance (per mille) per step that the monitors' leader fails.
pub const ELECTION_PER_MILLE: u64 = 1;

/// How new a record ask is: a later process's, then a later interval's,
/// then one made under a later map.
fn newness(gen: u64, ask: &RecordAsk) -> (u64, loligo_types::Epoch, loligo_types::Epoch) {
    (gen, ask.record.interval, ask.as_of)
}

/// An OSD's ask the failed leader had taken.
#[derive(Debug)]
pub enum Taken {
    Record {
        pg: usize,
        from: usize,
        ask: RecordAsk,
    },
    PgTemp {
        pg: usize,
        from: usize,
        osds: Vec<i32>,
    },
    PrimaryTemp {
        pg: usize,
        from: usize,
        osd: Option<i32>,
    },
}

/// The monitors' leadership as the simulation sees it.
#[derive(Default)]
pub struct Elections {
    /// Whether leaders fail in this run.
    on: bool,
    /// No leader until then.
    until: Option<u64>,
    /// Asks a failed leader had taken, in order.
    limbo: Vec<Taken>,
    /// Changes asked for while electing, in order.
    deferred: Vec<Vec<Change>>,
    /// Record asks whose call failed, the newest per (OSD, PG), with the
    /// asking process's generation.
    retries: BTreeMap<(usize, usize), (u64, RecordAsk)>,
}

/// What ending an election hands back to be done, in order.
pub struct Ended {
    pub taken: Vec<Taken>,
    pub deferred: Vec<Vec<Change>>,
}

impl Elections {
    /// Leaders fail in this run if `on`.
    pub fn new(on: bool) -> Elections {
        Elections {
            on,
            ..Elections::default()
        }
    }

    pub fn on(&self) -> bool {
        self.on
    }

    pub fn electing(&self) -> bool {
        self.until.is_some()
    }

    /// The leader fails now: none until `until`.
    pub fn start(&mut self, until: u64) {
        debug_assert!(self.until.is_none(), "an election inside an election");
        self.until = Some(until);
    }

    /// Whether the election ends by `now`.
    pub fn due(&self, now: u64) -> bool {
        self.until.is_some_and(|u| u <= now)
    }

    /// A new leader is in: what it commits first.
    pub fn end(&mut self) -> Ended {
        self.until = None;
        Ended {
            taken: std::mem::take(&mut self.limbo),
            deferred: std::mem::take(&mut self.deferred),
        }
    }

    /// Changes asked for while electing, made once a leader is in (each
    /// distinct list once: callers ask again and again).
    pub fn defer(&mut self, changes: Vec<Change>) {
        debug_assert!(self.until.is_some(), "changes deferred without an election");
        if !changes.is_empty() && !self.deferred.contains(&changes) {
            self.deferred.push(changes);
        }
    }

    /// The failed leader had taken `ask`.
    pub fn take(&mut self, ask: Taken) {
        debug_assert!(self.until.is_some(), "an ask taken without an election");
        self.limbo.push(ask);
    }

    /// PG `pg` on OSD `from` (process `gen`) asks for a record: an older
    /// ask still waiting to be sent again is superseded (asks travel
    /// apart and may arrive out of order: a newer one waiting stays).
    pub fn asked(&mut self, from: usize, pg: usize, gen: u64, ask: &RecordAsk) {
        let waiting = self.retries.get(&(from, pg));
        if waiting.is_some_and(|(g, w)| newness(*g, w) <= newness(gen, ask)) {
            self.retries.remove(&(from, pg));
        }
    }

    /// A record ask's call failed: it is asked again later unless a newer
    /// one comes first, or already waits (the daemon keeps the newest ask
    /// per PG and never puts an older one back over it).
    pub fn failed(&mut self, from: usize, pg: usize, gen: u64, ask: RecordAsk) {
        let waiting = self.retries.get(&(from, pg));
        if waiting.is_none_or(|(g, w)| newness(*g, w) <= newness(gen, &ask)) {
            self.retries.insert((from, pg), (gen, ask));
        }
    }

    /// The ask to send again for PG `pg` on OSD `from`, if one still waits.
    pub fn retry(&mut self, from: usize, pg: usize) -> Option<(u64, RecordAsk)> {
        self.retries.remove(&(from, pg))
    }
}
