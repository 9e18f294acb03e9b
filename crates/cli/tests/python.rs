//! The Python binding (crates/python) against a live cluster: its suite
//! (`crates/python/tests/test_binding.py`: connecting, pools, object I/O,
//! xattrs, listings, omap through compound ops, asserts that refuse and
//! change nothing, object class methods, the key-value store, threads on
//! one handle, and the errors of each misuse).
//!
//! It runs the interpreter `LOLIGO_PYTHON` names (default `python3`),
//! which must import the `loligo` module: `.ci/run` builds the wheel with
//! maturin (`tools/python-binding.sh`) into a virtualenv and sets
//! `LOLIGO_REQUIRE_BINDING`, without which a Python lacking the module
//! skips the test. Elsewhere, run `bash tools/python-binding.sh` first
//! (a wheel installed earlier is tested as it is, not rebuilt).

mod common;

use std::process::Command;

/// The Python that imports `loligo`, or `None` (the test skips) where
/// there is none and none is required.
fn python() -> Option<String> {
    let python = std::env::var("LOLIGO_PYTHON").unwrap_or_else(|_| "python3".into());
    let has = Command::new(&python)
        .args(["-c", "import loligo"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        assert!(
            std::env::var_os("LOLIGO_REQUIRE_BINDING").is_none(),
            "LOLIGO_REQUIRE_BINDING is set but {python} cannot import loligo"
        );
        eprintln!(
            "skipped: {python} cannot import loligo (bash tools/python-binding.sh builds it)"
        );
        return None;
    }
    Some(python)
}

#[test]
fn the_python_binding_passes_its_suite_on_a_live_cluster() {
    let Some(python) = python() else { return };
    let (_root, dir, _guard) = common::start("pybind", 1, 8);
    let suite = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../python/tests/test_binding.py"
    );
    let out = Command::new(&python)
        .arg(suite)
        .env("LOLIGO_CONF", dir.join("loligo.conf"))
        .output()
        .expect("run the binding's suite");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the binding's suite failed:\n{said}");
    // unittest's summary: every test ran, none was skipped.
    let ran: u32 = (said.lines())
        .find_map(|l| l.strip_prefix("Ran ")?.split(' ').next()?.parse().ok())
        .unwrap_or(0);
    assert!(ran >= 17, "only {ran} tests ran:\n{said}");
    assert!(!said.contains("skipped"), "{said}");
}
