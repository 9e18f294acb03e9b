//! The S3 gateway on a live cluster: users and keys kept by the
//! monitors (never in `auth ls`, `osd dump` or the map), a gateway run as
//! its own entity (`client.rgw.NAME`, mon 'allow rw'), boto3's view of
//! the API (`s3/test_boto3.py`: buckets, objects, listings, conditions,
//! digests, signatures and refusals), the AWS CLI's (`s3/test_awscli.py`:
//! cp with multipart, sync both ways, s3api calls, presign, refusals), and
//! the collector taking the data of overwritten and deleted objects.
//!
//! The boto3 part skips where boto3 cannot be imported, unless
//! `LOLIGO_REQUIRE_BOTO3` is set (`.ci/run` installs it and sets it);
//! `LOLIGO_PYTHON` names the interpreter (default `python3`). The awscli
//! part runs the `aws` beside that interpreter (or on the PATH), and skips
//! without one unless `LOLIGO_REQUIRE_AWSCLI` is set.

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

/// The Python with boto3 to run the suites with, or `None` (the test
/// skips) where there is none and none is required.
fn python() -> Option<String> {
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
        return None;
    }
    Some(python)
}

/// The AWS CLI installed beside `python` (a virtualenv's `aws`), or on
/// the PATH; `None` (its suite skips) where there is none and none is
/// required (`LOLIGO_REQUIRE_AWSCLI`).
fn aws_cli(python: &str) -> Option<std::path::PathBuf> {
    let beside = Path::new(python).with_file_name("aws");
    let aws = if beside.exists() {
        beside
    } else {
        std::path::PathBuf::from("aws")
    };
    let works = Command::new(&aws)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !works {
        assert!(
            std::env::var_os("LOLIGO_REQUIRE_AWSCLI").is_none(),
            "LOLIGO_REQUIRE_AWSCLI is set but there is no `aws`"
        );
        eprintln!("skipped the awscli suite: no `aws`");
        return None;
    }
    Some(aws)
}

/// A fresh `client.rgw.test` keyring in `root` and the test users.
fn gateway_entity_and_users(dir: &Path, root: &Path) -> std::path::PathBuf {
    let keyring = root.join("rgw.keyring");
    ok(
        dir,
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
        dir,
        "tester",
        &["--access-key", "TESTERKEY", "--secret-key", "testersecret"],
    );
    assert_eq!(u["user"], "tester");
    user(
        dir,
        "other",
        &["--access-key", "OTHERKEY", "--secret-key", "othersecret"],
    );
    keyring
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `loligo s3 run` on a free loopback port as the entity of
/// `keyring`, collecting every second; `extra` arguments after.
fn gateway(dir: &Path, keyring: &Path, extra: &[&str]) -> Gateway {
    let mut child = Command::new(env!("CARGO_BIN_EXE_loligo"))
        .args(["s3", "run", "--listen", "127.0.0.1:0", "--gc-interval", "1"])
        .arg("--keyring")
        .arg(keyring)
        .args(extra)
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

/// The gateway `up` starts answers, with an admin user made for it;
/// users and keys: made, listed, refused when they clash, withdrawn;
/// secrets appear only where an operator asks for them.
#[test]
fn s3_users_and_keys_live_apart_from_the_map() {
    let (_root, dir, _guard) = common::start_with("s3-users", 1, 8, &["--s3", "auto"]);
    let state: toml::Table =
        toml::from_str(&std::fs::read_to_string(dir.join("cluster.toml")).unwrap()).unwrap();
    let addr = state["s3_addr"].as_str().expect("up started a gateway");
    let mut s = std::net::TcpStream::connect(addr).expect("the gateway answers");
    std::io::Write::write_all(&mut s, b"GET / HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut s, &mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.0 403") || answer.starts_with("HTTP/1.1 403"),
        "{answer}"
    );
    assert!(
        answer.contains("AccessDenied"),
        "an anonymous request is refused: {answer}"
    );
    let admin: serde_json::Value =
        serde_json::from_str(&ok(&dir, &["s3", "user", "info", "admin", "--json"])).unwrap();
    assert_eq!(admin["keys"].as_array().map(Vec::len), Some(1), "{admin}");
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
    assert_eq!(ls, serde_json::json!(["admin", "alice", "bob"]));
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
    let Some(python) = python() else { return };
    let (root, dir, _guard) = common::start("s3-boto3", 3, 8);
    let keyring = gateway_entity_and_users(&dir, &root);
    // A certificate for the TLS gateway, and the suite over plain HTTP and
    // over HTTPS (where boto3 streams bodies with trailing checksums).
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("a certificate");
    let (cert, key) = (root.join("s3.crt"), root.join("s3.key"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    let tls = [
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ];
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3/test_boto3.py");
    let no_wait = ["--gc-min-wait", "0", "--domain", "s3.test"];
    let tls_no_wait = [&no_wait[..], &tls[..]].concat();
    for (extra, ca) in [
        (&no_wait[..], ""),
        (&tls_no_wait[..], cert.to_str().unwrap()),
    ] {
        let gw = gateway(&dir, &keyring, extra);
        assert_eq!(
            gw.endpoint.starts_with("https://"),
            !ca.is_empty(),
            "{}",
            gw.endpoint
        );
        let out = Command::new(&python)
            .arg(&script)
            .env("S3_ENDPOINT", &gw.endpoint)
            .env("S3_CA_BUNDLE", ca)
            .env("S3_DOMAIN", "s3.test")
            .env("S3_ACCESS_KEY", "TESTERKEY")
            .env("S3_SECRET_KEY", "testersecret")
            .env("S3_OTHER_ACCESS_KEY", "OTHERKEY")
            .env("S3_OTHER_SECRET_KEY", "othersecret")
            .output()
            .expect("run the boto3 suite");
        let report = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "boto3 suite on {} failed:\n{report}",
            gw.endpoint
        );
        assert!(report.contains("OK"), "{report}");
        if let Some(aws) = aws_cli(&python) {
            let out = Command::new(&python)
                .arg(script.with_file_name("test_awscli.py"))
                .env("AWS_CLI", &aws)
                .env("S3_ENDPOINT", &gw.endpoint)
                .env("S3_CA_BUNDLE", ca)
                .env("S3_ACCESS_KEY", "TESTERKEY")
                .env("S3_SECRET_KEY", "testersecret")
                .output()
                .expect("run the awscli suite");
            let report = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success() && report.contains("OK"),
                "awscli suite on {} failed:\n{report}",
                gw.endpoint
            );
        }
    }
    // What remains in the data pool: one object per striped object that
    // still exists (each run's three checksummed 70,000-byte objects);
    // the nine MiB object overwritten by a small one, multipart parts
    // replaced or aborted, and everything deleted, is collected.
    let gw = gateway(&dir, &keyring, &no_wait);
    let t0 = Instant::now();
    loop {
        let left = objects(&dir, "s3.data");
        if left.len() == 6 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "not collected: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(gw);
    // A user who owns buckets is not removed (as radosgw-admin refuses):
    // its buckets would be left without an owner who can sign for them.
    let o = loligo(&dir, &["s3", "user", "rm", "tester"]);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && said.contains("owns"), "{said}");
    ok(&dir, &["s3", "user", "info", "tester"]);
}

/// Run scenario `name` of `s3/failures.py` against `endpoints`.
fn failures(python: &str, name: &str, endpoints: &[&Gateway], env: &[(&str, String)]) -> Child {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3/failures.py");
    let eps: Vec<&str> = endpoints.iter().map(|g| g.endpoint.as_str()).collect();
    Command::new(python)
        .arg(&script)
        .arg(name)
        .env("S3_ENDPOINTS", eps.join(","))
        .env("S3_ACCESS_KEY", "TESTERKEY")
        .env("S3_SECRET_KEY", "testersecret")
        .env("S3_BUCKET", "failures")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run failures.py")
}

/// Its output, the test failing with it if the scenario failed.
fn finished(c: Child, name: &str) -> String {
    let out = c.wait_with_output().expect("failures.py ends");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "scenario {name} failed:\n{said}");
    said
}

/// Two gateways and eight writers overwriting one key leave one whole
/// version that HEAD and the listing agree on; a PUT whose gateway is
/// killed mid-body leaves nothing visible and its data is collected; a
/// PUT whose bucket is deleted under it is refused and leaves no data;
/// writes go on while an OSD is killed and restarted, and every
/// acknowledged one reads back whole through a gateway started after.
#[test]
fn s3_survives_races_killed_gateways_and_osds() {
    let Some(python) = python() else { return };
    let (root, dir, _guard) = common::start("s3-fail", 3, 8);
    let keyring = gateway_entity_and_users(&dir, &root);
    let (a, b) = (gateway(&dir, &keyring, &[]), gateway(&dir, &keyring, &[]));
    let said = finished(failures(&python, "race", &[&a, &b], &[]), "race");
    let size: u64 = (said.lines())
        .find_map(|l| l.strip_prefix("final_size=")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no final size in: {said}"));
    let stripes = if size <= 16 << 10 {
        0
    } else {
        size.div_ceil(4 << 20) as usize
    };

    let pid = b.child.id().to_string();
    let killed = failures(&python, "killed", &[&b, &a], &[("S3_KILL_PID", pid)]);
    finished(killed, "killed");
    drop(b);
    // A collector that takes uploads silent for 2 s for abandoned: what
    // is left is the data of the race's last version.
    let c = gateway(
        &dir,
        &keyring,
        &["--gc-min-wait", "0", "--pending-max-age", "2"],
    );
    let t0 = Instant::now();
    loop {
        let left = objects(&dir, "s3.data");
        if left.len() == stripes {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "left {left:?}, want {stripes}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(c);
    // A bucket deleted under a PUT: refused, and its data gone without a
    // collector (no record of a deleted bucket is ever read again).
    finished(failures(&python, "doomed", &[&a], &[]), "doomed");
    let t0 = Instant::now();
    while objects(&dir, "s3.data").len() != stripes {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the doomed PUT's data is left"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    let state = (
        "S3_STATE",
        root.join("acked.json").to_string_lossy().into_owned(),
    );
    let writer = failures(
        &python,
        "acked",
        &[&a],
        &[("S3_SECONDS", "12".into()), state.clone()],
    );
    std::thread::sleep(Duration::from_secs(3));
    let d = dir.to_string_lossy().into_owned();
    ok(&dir, &["stop", "osd.1", "--kill", "--data-dir", &d]);
    std::thread::sleep(Duration::from_secs(3));
    ok(&dir, &["start", "osd.1", "--data-dir", &d]);
    let said = finished(writer, "acked (writing)");
    assert!(said.contains("acked:"), "{said}");
    // Read back through a gateway that was not running when they were
    // written.
    drop(a);
    let fresh = gateway(&dir, &keyring, &[]);
    let reread = failures(&python, "reread", &[&fresh], &[state]);
    assert!(finished(reread, "reread").contains("reread:"));
}
