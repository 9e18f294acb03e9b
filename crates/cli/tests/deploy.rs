//! What `deploy/` ships, checked: the systemd units pass `systemd-analyze
//! verify` (units cannot start here: systemd is not PID 1) and start the
//! daemons with options the binary has; every daemon option is in the
//! configuration reference; the container image builds and its binary
//! runs (an ignored test: it takes minutes).

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The long options `loligo ARGS --help` lists.
fn options(args: &[&str]) -> Vec<String> {
    let o = Command::new(env!("CARGO_BIN_EXE_loligo"))
        .args(args)
        .arg("--help")
        .output()
        .expect("run loligo");
    assert!(o.status.success());
    (String::from_utf8_lossy(&o.stdout).lines())
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix("-c, ")
                .or(l.strip_prefix("-p, "))
                .unwrap_or(l);
            let name = l.strip_prefix("--")?.split([' ', '=']).next()?;
            Some(format!("--{name}"))
        })
        .collect()
}

/// The units in `deploy/systemd`, their ExecStart pointed at the binary
/// under test, verified by systemd in a scratch folder: no error, no
/// warning; and each ExecStart's options are the daemon's.
#[test]
fn the_systemd_units_verify_and_start_the_daemons_with_their_options() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("systemd-analyze not found: the units are not verified here");
        return;
    }
    let src = repo().join("deploy/systemd");
    let scratch = std::env::temp_dir().join(format!("loligo-units-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let bin = env!("CARGO_BIN_EXE_loligo");
    let mut units = Vec::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        for line in text.lines().filter(|l| l.starts_with("ExecStart=")) {
            let words: Vec<&str> = line["ExecStart=".len()..].split_whitespace().collect();
            assert_eq!(words[0], "/usr/bin/loligo", "{name}: {line}");
            let known = options(&words[1..3]);
            for w in words.iter().filter(|w| w.starts_with("--")) {
                assert!(
                    known.contains(&w.to_string()),
                    "{name}: {w} is not an option of {:?}",
                    &words[1..3]
                );
            }
        }
        std::fs::write(scratch.join(&name), text.replace("/usr/bin/loligo", bin)).unwrap();
        units.push(match name.strip_suffix("@.service") {
            Some(stem) => format!("./{stem}@3.service"),
            None => format!("./{name}"),
        });
    }
    assert!(units.len() >= 3, "{units:?}");
    let o = Command::new("systemd-analyze")
        .arg("verify")
        .args(&units)
        .current_dir(&scratch)
        .env("SYSTEMD_LOG_LEVEL", "warning")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(
        o.status.success() && said.trim().is_empty(),
        "{units:?}: {said}"
    );
}

/// docs/config.md names every option of `mon run` and `osd run`.
#[test]
fn the_configuration_reference_names_every_daemon_option() {
    let doc = std::fs::read_to_string(repo().join("docs/config.md")).unwrap();
    for daemon in [["mon", "run"], ["osd", "run"]] {
        for opt in options(&daemon) {
            if ["--help", "--conf", "--pool"].contains(&opt.as_str()) {
                continue;
            }
            assert!(
                doc.contains(&format!("`{opt}")),
                "docs/config.md lacks {opt} of {daemon:?}"
            );
        }
    }
}

/// `buildah --storage-driver vfs ARGS`: its stdout, the test failing
/// with its stderr if it fails.
fn buildah(args: &[&str]) -> String {
    let o = Command::new("buildah")
        .args(["--storage-driver", "vfs"])
        .args(args)
        .output()
        .expect("run buildah");
    assert!(
        o.status.success(),
        "buildah {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// The container image (`deploy/container/Containerfile`, built by
/// `tools/image.sh`): from scratch, the statically linked binary its
/// entrypoint, and that binary runs on the image's empty root.
#[test]
#[ignore = "links a static release binary and builds an image (minutes): run with --ignored"]
fn the_container_image_builds_and_its_binary_runs() {
    if Command::new("buildah").arg("--version").output().is_err() {
        eprintln!("buildah not found: the image is not built here");
        return;
    }
    let tag = format!("localhost/loligo-test:{}", std::process::id());
    let o = Command::new(repo().join("tools/image.sh"))
        .arg(&tag)
        .output()
        .expect("run tools/image.sh");
    assert!(
        o.status.success(),
        "tools/image.sh: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let entry = buildah(&["inspect", "--format", "{{.OCIv1.Config.Entrypoint}}", &tag]);
    assert_eq!(entry, "[/usr/bin/loligo]");
    let ctr = buildah(&["from", "--quiet", &tag]);
    let version = buildah(&[
        "run",
        "--isolation",
        "chroot",
        &ctr,
        "--",
        "/usr/bin/loligo",
        "--version",
    ]);
    buildah(&["rm", &ctr]);
    buildah(&["rmi", &tag]);
    assert_eq!(version, format!("loligo {}", env!("CARGO_PKG_VERSION")));
}
