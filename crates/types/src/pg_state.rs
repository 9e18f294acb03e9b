//! A PG's state as a set of flags, printed and parsed the way Ceph prints
//! them (`active+undersized+degraded`: flags joined by `+` in Ceph's fixed
//! order; no flag at all is `unknown`). Adding a state is one constant and
//! one row of `NAMES`.
//!
//! It must never print a combination in another order than Ceph's: people
//! and scripts match these strings.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{BitOr, BitOrAssign};
use std::str::FromStr;

/// A set of PG state flags.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct PgState(u32);

impl PgState {
    /// No report from the PG's primary (prints `unknown`).
    pub const UNKNOWN: PgState = PgState(0);
    /// Its primary's report is older than the map (not used yet).
    pub const STALE: PgState = PgState(1 << 0);
    pub const CREATING: PgState = PgState(1 << 1);
    /// Serves reads and writes.
    pub const ACTIVE: PgState = PgState(1 << 2);
    /// Peered; waiting for the monitors to record the write set.
    pub const ACTIVATING: PgState = PgState(1 << 3);
    /// Every member of the acting set has every write.
    pub const CLEAN: PgState = PgState(1 << 4);
    pub const RECOVERY_WAIT: PgState = PgState(1 << 5);
    pub const RECOVERING: PgState = PgState(1 << 6);
    /// No OSD that holds the PG's latest writes is up: serves nothing.
    pub const DOWN: PgState = PgState(1 << 7);
    /// Fewer up-to-date members than the pool's size.
    pub const UNDERSIZED: PgState = PgState(1 << 8);
    /// Some objects have fewer copies than the pool's size.
    pub const DEGRADED: PgState = PgState(1 << 9);
    /// The acting set differs from CRUSH's choice (pg_temp).
    pub const REMAPPED: PgState = PgState(1 << 10);
    pub const SCRUBBING: PgState = PgState(1 << 11);
    pub const DEEP: PgState = PgState(1 << 12);
    pub const INCONSISTENT: PgState = PgState(1 << 13);
    /// Members are being asked for their logs.
    pub const PEERING: PgState = PgState(1 << 14);
    pub const REPAIR: PgState = PgState(1 << 15);
    pub const BACKFILL_WAIT: PgState = PgState(1 << 16);
    pub const BACKFILLING: PgState = PgState(1 << 17);
    pub const INCOMPLETE: PgState = PgState(1 << 18);
    /// Peered, but below min_size: reads only.
    pub const PEERED: PgState = PgState(1 << 19);
    /// Peered, waiting out the read lease an earlier interval's primary
    /// may still hold: nothing is served yet.
    pub const WAIT: PgState = PgState(1 << 20);
    /// Loligo's own: this primary's log is behind and it has asked the
    /// monitors for a pg_temp that makes an up-to-date member primary.
    pub const WAIT_PG_TEMP: PgState = PgState(1 << 21);
    /// A backfill target is too full to take more (backfillfull or full):
    /// its backfill waits until it has room.
    pub const BACKFILL_TOOFULL: PgState = PgState(1 << 22);
    /// Ops wait for the primary's read lease, which its members have not
    /// renewed in time.
    pub const LAGGY: PgState = PgState(1 << 23);

    /// Every flag with its name, in the order Ceph prints them
    /// (`pg_state_string`), Loligo's own last.
    const NAMES: [(PgState, &'static str); 24] = [
        (PgState::STALE, "stale"),
        (PgState::CREATING, "creating"),
        (PgState::ACTIVE, "active"),
        (PgState::ACTIVATING, "activating"),
        (PgState::CLEAN, "clean"),
        (PgState::RECOVERY_WAIT, "recovery_wait"),
        (PgState::RECOVERING, "recovering"),
        (PgState::DOWN, "down"),
        (PgState::UNDERSIZED, "undersized"),
        (PgState::DEGRADED, "degraded"),
        (PgState::REMAPPED, "remapped"),
        (PgState::SCRUBBING, "scrubbing"),
        (PgState::DEEP, "deep"),
        (PgState::INCONSISTENT, "inconsistent"),
        (PgState::PEERING, "peering"),
        (PgState::REPAIR, "repair"),
        (PgState::BACKFILL_WAIT, "backfill_wait"),
        (PgState::BACKFILLING, "backfilling"),
        (PgState::BACKFILL_TOOFULL, "backfill_toofull"),
        (PgState::INCOMPLETE, "incomplete"),
        (PgState::PEERED, "peered"),
        (PgState::LAGGY, "laggy"),
        (PgState::WAIT, "wait"),
        (PgState::WAIT_PG_TEMP, "wait_pg_temp"),
    ];

    /// The flag Ceph and Loligo call `name` (`"backfill_wait"`), if any.
    pub fn flag_named(name: &str) -> Option<PgState> {
        (Self::NAMES.iter())
            .find(|(_, n)| *n == name)
            .map(|(f, _)| *f)
    }

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: PgState) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any flag of `other` is set.
    pub fn intersects(self, other: PgState) -> bool {
        self.0 & other.0 != 0
    }

    /// No report (no flag set).
    pub fn is_unknown(self) -> bool {
        self.0 == 0
    }

    /// Serving I/O (`active`).
    pub fn is_active(self) -> bool {
        self.contains(PgState::ACTIVE)
    }

    /// `active+clean`, and nothing else going on.
    pub fn is_clean(self) -> bool {
        self == PgState::ACTIVE | PgState::CLEAN
    }

    /// Copies missing somewhere (`degraded` or `undersized`).
    pub fn is_degraded(self) -> bool {
        self.intersects(PgState::DEGRADED | PgState::UNDERSIZED)
    }
}

impl BitOr for PgState {
    type Output = PgState;
    fn bitor(self, o: PgState) -> PgState {
        PgState(self.0 | o.0)
    }
}

impl BitOrAssign for PgState {
    fn bitor_assign(&mut self, o: PgState) {
        self.0 |= o.0;
    }
}

impl fmt::Display for PgState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_unknown() {
            return f.write_str("unknown");
        }
        let mut first = true;
        for (flag, name) in PgState::NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str("+")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for PgState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PgState({self})")
    }
}

/// A state name that is not one of Ceph's (or Loligo's).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown PG state '{0}'")]
pub struct BadPgState(pub String);

impl FromStr for PgState {
    type Err = BadPgState;
    fn from_str(s: &str) -> Result<PgState, BadPgState> {
        if s == "unknown" {
            return Ok(PgState::UNKNOWN);
        }
        s.split('+').try_fold(PgState::UNKNOWN, |acc, part| {
            PgState::NAMES
                .iter()
                .find(|(_, n)| *n == part)
                .map(|(f, _)| acc | *f)
                .ok_or_else(|| BadPgState(part.to_string()))
        })
    }
}

impl From<PgState> for String {
    fn from(s: PgState) -> String {
        s.to_string()
    }
}

impl TryFrom<String> for PgState {
    type Error = BadPgState;
    fn try_from(s: String) -> Result<PgState, BadPgState> {
        s.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_in_cephs_order_whatever_the_build_order() {
        let s = PgState::DEGRADED | PgState::ACTIVE | PgState::UNDERSIZED;
        assert_eq!(s.to_string(), "active+undersized+degraded");
        let s = PgState::PEERING | PgState::WAIT_PG_TEMP;
        assert_eq!(s.to_string(), "peering+wait_pg_temp");
        assert_eq!(PgState::UNKNOWN.to_string(), "unknown");
        assert_eq!(
            (PgState::PEERED | PgState::DEGRADED | PgState::UNDERSIZED).to_string(),
            "undersized+degraded+peered"
        );
    }

    #[test]
    fn every_name_parses_back_and_json_is_the_string() {
        for (flag, name) in PgState::NAMES {
            assert_eq!(name.parse::<PgState>(), Ok(flag));
        }
        let s = PgState::ACTIVE | PgState::CLEAN;
        assert!(s.is_clean() && s.is_active() && !s.is_degraded());
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"active+clean\"");
        let back: PgState = serde_json::from_str("\"active+clean\"").unwrap();
        assert_eq!(back, s);
        assert_eq!(
            "active+nonsense".parse::<PgState>(),
            Err(BadPgState("nonsense".into()))
        );
        assert!(serde_json::from_str::<PgState>("\"bogus\"").is_err());
        // Flags are distinct bits.
        let all = PgState::NAMES.iter().fold(0u32, |acc, (f, _)| {
            assert_eq!(acc & f.0, 0);
            acc | f.0
        });
        assert_eq!(all.count_ones() as usize, PgState::NAMES.len());
    }
}
