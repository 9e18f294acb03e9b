//! The monitor map's upkeep, as pure functions of the map: what the
//! leader proposes so that the map names the Raft group's members at the
//! addresses they serve on, and the key each monitor holds (recorded on
//! its first start, as an OSD's is on its first boot).
//!
//! It must never replace a monitor's recorded key, but for a leader that
//! holds the cluster's authority (which can make any key anyway: the way
//! back for a monitor whose keyring was lost and issued anew); otherwise
//! only `auth rotate mon.N` does, and a monitor that starts with another
//! key is refused until it is restarted with the recorded one.

use loligo_types::caps::AuthEntry;
use loligo_types::{Change, OsdMap};
use std::collections::{BTreeMap, BTreeSet};

/// The entity name of monitor `id`.
pub fn entity(id: u64) -> String {
    format!("mon.{id}")
}

/// The change that records `serial` as the key of daemon `entity`.
pub fn key_record(entity: &str, serial: &str) -> Change {
    Change::AuthPut {
        entity: entity.to_string(),
        entry: AuthEntry {
            caps: loligo_types::caps::Caps::default(),
            serial: serial.to_string(),
        },
    }
}

/// What the leader proposes on `map`, one change at a time in this
/// order: the monitor map of the group's `members` (voters: id ->
/// address) if the map names others; the forgetting of each key of a
/// monitor that is in the group no more (not a voter nor a `learner`),
/// so that one added again under its id may come with a new key; and
/// its own key (`me`: its id, its certificate's serial, and whether it
/// holds the cluster's authority) if none is recorded, or if another is
/// and it holds the authority.
pub fn leader_changes(
    map: &OsdMap,
    members: &BTreeMap<u64, String>,
    learners: &BTreeSet<u64>,
    me: Option<(u64, &str, bool)>,
) -> Vec<Change> {
    let mut changes = Vec::new();
    if members.is_empty() {
        return changes;
    }
    if map.mons != *members {
        changes.push(Change::MonMap {
            mons: members.clone(),
        });
    }
    for entity in map.auth.keys() {
        let gone = loligo_proto::tls::mon_of(entity)
            .is_some_and(|id| !members.contains_key(&id) && !learners.contains(&id));
        if gone {
            changes.push(Change::AuthRm {
                entity: entity.clone(),
            });
        }
    }
    if let Some((id, serial, authority)) = me {
        let e = entity(id);
        let recorded = map.daemon_serial(&e);
        if recorded.is_none() || (authority && recorded != Some(serial)) {
            changes.push(key_record(&e, serial));
        }
    }
    changes
}

/// How a monitor's own key stands in a map.
#[derive(Debug, PartialEq, Eq)]
pub enum OwnKey {
    /// The map records this key.
    Recorded,
    /// The map records no key of this monitor yet: it asks the leader to
    /// record its own (`MonJoin`).
    Missing,
    /// The map records another key (rotated, or revoked): the monitor's
    /// peers and diallers refuse it until it runs with that one.
    Other,
}

/// How monitor `id` holding the key of serial `serial` stands in `map`.
pub fn own_key(map: &OsdMap, id: u64, serial: &str) -> OwnKey {
    match map.daemon_serial(&entity(id)) {
        None => OwnKey::Missing,
        Some(s) if s == serial => OwnKey::Recorded,
        Some(_) => OwnKey::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loligo_types::Incremental;

    fn apply(m: &mut OsdMap, changes: Vec<Change>) {
        let epoch = m.epoch + 1;
        m.apply(&Incremental { epoch, changes }).unwrap();
    }

    #[test]
    fn the_leader_keeps_the_monitor_map_and_records_its_key_once() {
        let none = BTreeSet::new();
        let mut m = OsdMap::new("f", "osd").unwrap();
        let members: BTreeMap<u64, String> =
            [(0, "a:6789".to_string()), (1, "b:6789".to_string())].into();
        let c = leader_changes(&m, &members, &none, Some((0, "aa", false)));
        assert_eq!(c.len(), 2, "{c:?}");
        apply(&mut m, c);
        assert_eq!(m.mons, members);
        assert_eq!(own_key(&m, 0, "aa"), OwnKey::Recorded);
        assert_eq!(own_key(&m, 1, "bb"), OwnKey::Missing);
        // Nothing more while nothing changes.
        assert!(leader_changes(&m, &members, &none, Some((0, "aa", false))).is_empty());
        // Another leader records its own key; a leader whose key differs
        // from the recorded one does not replace it.
        let c = leader_changes(&m, &members, &none, Some((1, "bb", false)));
        assert_eq!(c, vec![key_record("mon.1", "bb")]);
        apply(&mut m, c);
        assert!(leader_changes(&m, &members, &none, Some((0, "old", false))).is_empty());
        assert_eq!(own_key(&m, 0, "old"), OwnKey::Other);
        // ... unless it holds the cluster's authority (a keyring lost and
        // issued anew).
        assert_eq!(
            leader_changes(&m, &members, &none, Some((0, "new", true))),
            vec![key_record("mon.0", "new")]
        );
        // A member moved: the map follows.
        let moved: BTreeMap<u64, String> =
            [(0, "a:6789".to_string()), (1, "c:6789".to_string())].into();
        assert_eq!(
            leader_changes(&m, &moved, &none, None),
            vec![Change::MonMap { mons: moved }]
        );
        // A member removed: the map follows and its key is forgotten,
        // but not while it is a learner (being added again).
        let one: BTreeMap<u64, String> = [(0, "a:6789".to_string())].into();
        let c = leader_changes(&m, &one, &BTreeSet::from([1]), None);
        assert_eq!(c, vec![Change::MonMap { mons: one.clone() }]);
        let c = leader_changes(&m, &one, &none, None);
        assert_eq!(
            c,
            vec![
                Change::MonMap { mons: one.clone() },
                Change::AuthRm {
                    entity: "mon.1".into()
                }
            ]
        );
        apply(&mut m, c);
        assert_eq!(own_key(&m, 1, "bb"), OwnKey::Missing);
        assert!(leader_changes(&m, &one, &none, None).is_empty());
        assert!(leader_changes(&m, &BTreeMap::new(), &none, None).is_empty());
    }
}
