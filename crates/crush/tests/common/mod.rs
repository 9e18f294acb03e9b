//! Shared helpers for the vector tests: where the vectors live.

use std::path::PathBuf;

/// `testdata/ceph` in the repository, or `LOLIGO_VECTORS`.
/// Panics (fails the test loudly) when the folder is missing.
pub fn vectors_dir() -> PathBuf {
    if let Ok(p) = std::env::var("LOLIGO_VECTORS") {
        return PathBuf::from(p);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = root.join("testdata/ceph");
    assert!(
        dir.is_dir(),
        "test vectors not found at {} (set LOLIGO_VECTORS to their folder)",
        dir.display()
    );
    dir
}

/// Every case directory under `vectors/<kind>`, sorted.
pub fn cases(kind: &str) -> Vec<PathBuf> {
    let dir = vectors_dir().join(kind);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no cases under {}", dir.display());
    v
}
