//! Read-lease grants handed between PG copies on this OSD: a split's
//! parent hands its children the grants its copy may have made, and a
//! merge source's task hands its own to the target that folds it in. The
//! new copy serves objects the old one did, so its next primary must wait
//! out the leases an old primary may still hold on them, as the old
//! copy's next primary would (`loligo_pg::pg::Grants`).
//!
//! Kept in memory only: after a restart every copy held at the start
//! reports a grant to any primary for one lease anyway.
//!
//! It must never drop a grant that is still live before the copy it was
//! handed to has taken it on.

use super::{lock, OsdShared};
use crate::pg::Grants;
use loligo_types::PgId;
use std::collections::HashMap;

/// Keep grants `g` for `pg`'s copy here, which takes them on as its task
/// starts (a split's child) or as it merges sources in.
pub(super) fn hand(s: &OsdShared, pg: PgId, g: &Grants) {
    hand_in(&mut lock(&s.handed), pg, g, s.now_ms());
}

/// Take the grants handed to the copies here for which `which` holds.
pub(super) fn take(s: &OsdShared, which: impl Fn(&PgId) -> bool) -> Grants {
    take_from(&mut lock(&s.handed), which)
}

fn hand_in(handed: &mut HashMap<PgId, Grants>, pg: PgId, g: &Grants, now_ms: u64) {
    // (Those no copy took are dropped once they have run out: a stray
    // source's, a deleted pool's.)
    handed.retain(|_, g| g.live(now_ms));
    if g.live(now_ms) {
        handed.entry(pg).or_default().add(g);
    }
}

fn take_from(handed: &mut HashMap<PgId, Grants>, which: impl Fn(&PgId) -> bool) -> Grants {
    let mut all = Grants::default();
    handed.retain(|pg, g| {
        let taken = which(pg);
        if taken {
            all.add(g);
        }
        !taken
    });
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg(ps: u32) -> PgId {
        PgId { pool: 1, ps }
    }

    #[test]
    fn grants_handed_to_a_copy_are_taken_once_and_dead_ones_dropped() {
        let mut h = HashMap::new();
        let ends_at_1000 = Grants::restarted(0, 1000);
        let ends_later = Grants::restarted(4_800, 1000);
        hand_in(&mut h, pg(2), &ends_at_1000, 500);
        hand_in(&mut h, pg(2), &ends_later, 500);
        hand_in(&mut h, pg(3), &ends_at_1000, 500);
        // A merge target takes what its sources handed it, the later end.
        let mut want = ends_at_1000.clone();
        want.add(&ends_later);
        assert_eq!(take_from(&mut h, |p| p.ps == 2), want);
        assert_eq!(take_from(&mut h, |p| p.ps == 2), Grants::default());
        // Once run out, a grant nobody took is dropped, and none is kept.
        hand_in(&mut h, pg(4), &ends_at_1000, 1000);
        assert!(h.is_empty());
    }
}
