//! The S3 gateway on a live cluster: users and keys kept by the
//! monitors (never in `auth ls`, `osd dump` or the map), a gateway run as
//! its own entity (`client.rgw.NAME`, mon 'allow rw'), boto3's view of
//! the API (`s3/test_boto3.py`: buckets, objects, listings, conditions,
//! digests, signatures and refusals), and the collector taking the data
//! of overwritten and deleted objects.
//!
//! The boto3 part skips where boto3 cannot be imported, unless
//! `LOLIGO_REQUIRE_BOTO3` is set (`.ci/run` installs it and sets it);
//! `LOLIGO_PYTHON` names the interpreter (default `python3`).

mod common;

use common::{loligo, ok};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A gateway process, killed when dropped.
struct Gateway {
    child: Child,
    endpoint: String,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `loligo s3 run` on a free loopback port as the entity of
/// `keyring`, collecting every second with no wait.
fn gateway(dir: &Path, keyring: &Path) -> Gateway {
    let mut child = Command::new(env!("CARGO_BIN_EXE_loligo"))
        .args(["s3", "run", "--listen", "127.0.0.1:0", "--gc-interval", "1"])
        .args(["--gc-min-wait", "0", "--keyring"])
        .arg(keyring)
        .env("LOLIGO_CONF", dir.join("loligo.conf"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the gateway");
    let out = child.stdout.take().expect("its output");
    let mut line = String::new();
    BufReader::new(out)
        .read_line(&mut line)
        .expect("the gateway says where it serves");
    let endpoint = line
        .trim()
        .strip_prefix("s3 gateway serving on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_string();
    Gateway { child, endpoint }
}

fn user(dir: &Path, uid: &str, args: &[&str]) -> serde_json::Value {
    let mut a = vec!["s3", "user", "create", uid, "--json"];
    a.extend_from_slice(args);
    serde_json::from_str(&ok(dir, &a)).unwrap()
}

/// Users and keys: made, listed, refused when they clash, withdrawn;
/// secrets appear only where an operator asks for them.
#[test]
fn s3_users_and_keys_live_apart_from_the_map() {
    let (_root, dir, _guard) = common::start("s3-users", 1, 8);
    let alice = user(&dir, "alice", &[]);
    assert_eq!(alice["user"], "alice");
    let key = &alice["keys"][0];
    let (ak, sk) = (
        key["access_key"].as_str().unwrap(),
        key["secret_key"].as_str().unwrap(),
    );
    assert_eq!((ak.len(), sk.len()), (20, 40), "{alice}");
    let given = user(
        &dir,
        "bob",
        &["--access-key", "BOBKEY", "--secret-key", "bobsecret"],
    );
    assert_eq!(given["keys"][0]["access_key"], "BOBKEY");
    let clash = loligo(
        &dir,
        &[
            "s3",
            "user",
            "create",
            "carol",
            "--access-key",
            "BOBKEY",
            "--secret-key",
            "x",
        ],
    );
    assert!(!clash.status.success());
    assert!(String::from_utf8_lossy(&clash.stderr).contains("already in use"));
    let again = loligo(&dir, &["s3", "user", "create", "alice"]);
    assert!(!again.status.success(), "a user is made once");
    let half = loligo(&dir, &["s3", "user", "create", "dave", "--access-key", "K"]);
    assert!(!half.status.success(), "half a key pair is refused");
    ok(
        &dir,
        &[
            "s3",
            "key",
            "create",
            "--uid",
            "bob",
            "--access-key",
            "BOB2",
            "--secret-key",
            "s2",
        ],
    );
    let info: serde_json::Value =
        serde_json::from_str(&ok(&dir, &["s3", "user", "info", "bob", "--json"])).unwrap();
    assert_eq!(info["keys"].as_array().unwrap().len(), 2, "{info}");
    let ls: serde_json::Value =
        serde_json::from_str(&ok(&dir, &["s3", "user", "ls", "--json"])).unwrap();
    assert_eq!(ls, serde_json::json!(["alice", "bob"]));
    // No secret anywhere else.
    for args in [
        &["auth", "ls"][..],
        &["osd", "dump", "--json"],
        &["s3", "user", "ls", "--json"],
        &["status", "--json"],
    ] {
        let out = ok(&dir, args);
        assert!(
            !out.contains(sk) && !out.contains("bobsecret"),
            "{args:?} shows a secret"
        );
    }
    ok(&dir, &["s3", "key", "rm", "--access-key", "BOB2"]);
    let info: serde_json::Value =
        serde_json::from_str(&ok(&dir, &["s3", "user", "info", "bob", "--json"])).unwrap();
    assert_eq!(info["keys"].as_array().unwrap().len(), 1);
    ok(&dir, &["s3", "user", "rm", "alice"]);
    let gone = loligo(&dir, &["s3", "user", "info", "alice"]);
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("does not exist"));
}

/// Objects in `pool`, by `loligo ls`.
fn objects(dir: &Path, pool: &str) -> Vec<String> {
    ok(dir, &["ls", "-p", pool])
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}

/// boto3 against a gateway run as client.rgw.test; then the collector
/// leaves only the data of the objects that still exist.
#[test]
fn boto3_sees_a_working_s3_and_garbage_is_collected() {
    let python = std::env::var("LOLIGO_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_boto3 = Command::new(&python)
        .args(["-c", "import boto3"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_boto3 {
        assert!(
            std::env::var_os("LOLIGO_REQUIRE_BOTO3").is_none(),
            "LOLIGO_REQUIRE_BOTO3 is set but {python} cannot import boto3"
        );
        eprintln!("skipped: {python} cannot import boto3");
        return;
    }
    let (root, dir, _guard) = common::start("s3-boto3", 3, 8);
    let keyring = root.join("rgw.keyring");
    ok(
        &dir,
        &[
            "auth",
            "add",
            "client.rgw.test",
            "mon",
            "allow rw",
            "osd",
            "allow rwx",
            "-o",
            keyring.to_str().unwrap(),
        ],
    );
    let u = user(
        &dir,
        "tester",
        &["--access-key", "TESTERKEY", "--secret-key", "testersecret"],
    );
    assert_eq!(u["user"], "tester");
    user(
        &dir,
        "other",
        &["--access-key", "OTHERKEY", "--secret-key", "othersecret"],
    );
    let gw = gateway(&dir, &keyring);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3/test_boto3.py");
    let out = Command::new(&python)
        .arg(&script)
        .env("S3_ENDPOINT", &gw.endpoint)
        .env("S3_ACCESS_KEY", "TESTERKEY")
        .env("S3_SECRET_KEY", "testersecret")
        .env("S3_OTHER_ACCESS_KEY", "OTHERKEY")
        .env("S3_OTHER_SECRET_KEY", "othersecret")
        .output()
        .expect("run the boto3 suite");
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "boto3 suite failed:\n{report}");
    assert!(report.contains("OK"), "{report}");
    // What remains in the data pool: one object per striped object that
    // still exists (the three checksummed 70,000-byte objects); the nine
    // MiB object overwritten by a small one, and everything deleted, is
    // collected.
    let t0 = Instant::now();
    loop {
        let left = objects(&dir, "s3.data");
        if left.len() == 3 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "not collected: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
