//! The dashboard on a live cluster: its tokens (made, refused, revoked),
//! its API (nothing without a good token), and its page in a real
//! headless browser (Debian's `chromium`): the right health and OSD
//! count, no page error, and the change when an OSD stops.
//!
//! The browser part skips where Chromium is not installed, unless
//! `LOLIGO_REQUIRE_CHROMIUM` is set (`.ci/run` installs it and sets it).
//! With `LOLIGO_DASHBOARD_SCREENSHOTS=DIR` it also saves the screenshots
//! `docs/` shows.

mod common;

use common::{loligo, ok};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The status line and body of `GET url` with `token` as the bearer
/// (plain HTTP, `http://HOST:PORT/PATH`).
fn get(url: &str, token: Option<&str>) -> (String, String) {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut s = std::net::TcpStream::connect(host).expect("the dashboard answers");
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    write!(s, "GET /{path} HTTP/1.0\r\nHost: {host}\r\n{auth}\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

fn dashboard_url(dir: &Path) -> String {
    let v: serde_json::Value = serde_json::from_str(&ok(dir, &["mgr", "services"])).unwrap();
    v["dashboard"]
        .as_str()
        .expect("a dashboard URL")
        .to_string()
}

fn create_token(dir: &Path, user: &str) -> String {
    let out = ok(
        dir,
        &["dashboard", "create-token", "--user", user, "--json"],
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let token = v["token"].as_str().expect("a token").to_string();
    assert_eq!(token.len(), 64, "{v}");
    assert!(v["url"]
        .as_str()
        .unwrap()
        .ends_with(&format!("#token={token}")));
    token
}

fn wait_for(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(secs), "{what}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn health(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&ok(dir, &["health", "--json"])).unwrap()
}

/// Tokens: made for a reader, refused for a user without mon `allow r`
/// or unknown; the API answers 401 without one, with a wrong one and
/// after revocation, and the view with a good one; `ls-tokens` never
/// shows a token.
#[test]
fn dashboard_tokens_guard_its_view() {
    let (root, dir, _guard) = common::start("dash-tokens", 3, 8);
    let url = dashboard_url(&dir);
    let api = format!("{url}api/dashboard");
    let (line, body) = get(&api, None);
    assert!(line.contains("401"), "{line} {body}");
    assert!(body.contains("no token given"), "{body}");
    let (line, body) = get(&api, Some(&"0".repeat(64)));
    assert!(line.contains("401"), "{line} {body}");

    let key = root.join("viewer.keyring");
    let key = key.to_str().unwrap();
    ok(
        &dir,
        &["auth", "add", "client.viewer", "mon", "allow r", "-o", key],
    );
    let key = root.join("blind.keyring");
    ok(
        &dir,
        &["auth", "add", "client.blind", "-o", key.to_str().unwrap()],
    );
    let refused = loligo(
        &dir,
        &["dashboard", "create-token", "--user", "client.blind"],
    );
    assert!(!refused.status.success());
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("does not have mon 'allow r'"), "{why}");
    let refused = loligo(&dir, &["dashboard", "create-token", "--ttl", "5s"]);
    assert!(!refused.status.success(), "too short a lifetime");

    let token = create_token(&dir, "client.viewer");
    let (line, body) = get(&api, Some(&token));
    assert!(line.contains("200"), "{line} {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["user"], "client.viewer");
    assert_eq!(v["osds"].as_array().unwrap().len(), 3);
    assert_eq!(v["status"]["osdmap"]["num_osds"], 3);
    assert!(!body.contains(&token), "the view never carries a token");
    let listed = ok(&dir, &["dashboard", "ls-tokens"]);
    assert!(listed.contains("client.viewer"), "{listed}");
    assert!(!listed.contains(&token), "{listed}");

    // Taking the user's mon read right revokes its tokens.
    ok(&dir, &["auth", "caps", "client.viewer", "osd", "allow r"]);
    let (line, body) = get(&api, Some(&token));
    assert!(line.contains("401"), "{line} {body}");
    assert!(body.contains("may no longer read"), "{body}");

    let admin = create_token(&dir, "client.admin");
    assert_eq!(
        ok(&dir, &["dashboard", "revoke-tokens", "--all"]).trim(),
        "revoked 2 token(s)"
    );
    let (line, _) = get(&api, Some(&admin));
    assert!(line.contains("401"), "{line}");
}

/// Whether Chromium must be there (`.ci/run` installed it).
fn chromium_required() -> bool {
    std::env::var_os("LOLIGO_REQUIRE_CHROMIUM").is_some()
}

/// The headless browser, if installed.
fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// What the browser holds after loading `url` and letting the page run
/// for `virtual_ms` of its time (its polls included): the DOM, and what
/// the browser said on stderr. A screenshot too, into `shot` if given.
fn browse(browser: &Path, url: &str, virtual_ms: u64, shot: Option<&Path>) -> (String, String) {
    run_browser(browser, url, virtual_ms, shot, &[])
}

/// [`browse`]'s DOM, with `extra` browser flags.
fn browse_with(browser: &Path, url: &str, virtual_ms: u64, extra: &[&str]) -> (String, String) {
    run_browser(browser, url, virtual_ms, None, extra)
}

fn run_browser(
    browser: &Path,
    url: &str,
    virtual_ms: u64,
    shot: Option<&Path>,
    extra: &[&str],
) -> (String, String) {
    let mut cmd = Command::new(browser);
    cmd.args(extra);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1400,1300",
    ]);
    cmd.arg(format!("--virtual-time-budget={virtual_ms}"));
    // A profile of its own: the tests run in parallel threads.
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let profile =
        std::env::temp_dir().join(format!("loligo-chromium-{}-{run}", std::process::id()));
    cmd.arg(format!("--user-data-dir={}", profile.display()));
    match shot {
        Some(p) => cmd.arg(format!("--screenshot={}", p.display())),
        None => cmd.arg("--dump-dom"),
    };
    let out = cmd.arg(url).output().expect("chromium runs");
    let _ = std::fs::remove_dir_all(&profile);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "chromium failed: {stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

/// The text of the element with `id` in `dom` (its first text run).
fn text_of<'a>(dom: &'a str, id: &str) -> &'a str {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in {dom}"));
    let rest = &dom[at..];
    let start = rest.find('>').map_or(0, |i| i + 1);
    let end = rest[start..].find('<').map_or(rest.len(), |i| start + i);
    rest[start..end].trim()
}

/// No page error: the page's own error box stayed hidden and empty, and
/// the browser logged no uncaught error.
fn assert_no_page_error(dom: &str, stderr: &str) {
    assert!(
        dom.contains("id=\"errors\" class=\"errors\" hidden"),
        "the page showed an error: {}",
        text_of(dom, "errors")
    );
    for line in stderr.lines() {
        assert!(
            !(line.contains("Uncaught") || line.contains("Content Security Policy")),
            "the browser logged a page error: {line}"
        );
    }
}

/// The page in headless Chromium on a live cluster: HEALTH_OK and three
/// OSDs up; a bad token shows the sign-in with the reason; an OSD
/// stopped shows as down, with OSD_DOWN raised and the count changed;
/// no JavaScript error at any point.
#[test]
fn the_dashboard_shows_the_cluster_in_a_browser() {
    let Some(browser) = chromium() else {
        assert!(
            !chromium_required(),
            "LOLIGO_REQUIRE_CHROMIUM is set and chromium is not installed"
        );
        eprintln!("skipped: chromium is not installed (apt-get install chromium)");
        return;
    };
    let (_root, dir, _guard) = common::start("dash-browser", 3, 8);
    let d = dir.to_string_lossy().into_owned();
    let shots = std::env::var_os("LOLIGO_DASHBOARD_SCREENSHOTS").map(PathBuf::from);
    wait_for(60, "the cluster never became healthy", || {
        health(&dir)["status"] == "HEALTH_OK" && common::not_clean(&dir).is_none()
    });
    let url = dashboard_url(&dir);
    let token = create_token(&dir, "client.admin");
    let page = format!("{url}#token={token}");

    let (dom, stderr) = browse(&browser, &page, 5000, None);
    assert_no_page_error(&dom, &stderr);
    assert_eq!(text_of(&dom, "osd-count"), "3 total, 3 up, 3 in", "{dom}");
    assert_eq!(text_of(&dom, "health-status"), "HEALTH_OK");
    assert_eq!(dom.matches("data-osd=").count(), 3, "three OSD rows");
    assert!(dom.contains(">active+clean<"), "{dom}");
    assert!(!dom.contains(&token), "the page never shows the token");

    // Some client I/O for the charts, then the screenshots docs/ shows.
    if let Some(dir_out) = &shots {
        // Reads while the page runs (256 MiB OSDs fill fast).
        let write = ["bench", "10", "write", "-b", "4096", "--max-objects", "300"];
        ok(&dir, &[&write[..], &["--no-cleanup"]].concat());
        let mut bench = Command::new(env!("CARGO_BIN_EXE_loligo"))
            .args(["bench", "12", "rand", "-t", "4"])
            .env("LOLIGO_CONF", dir.join("loligo.conf"))
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs(2));
        std::fs::create_dir_all(dir_out).unwrap();
        browse(&browser, &page, 9000, Some(&dir_out.join("dashboard.png")));
        bench.wait().unwrap();
    }

    // A wrong token: the sign-in, with the monitor's reason.
    let (dom, stderr) = browse(
        &browser,
        &format!("{url}#token={}", "ab".repeat(32)),
        3000,
        None,
    );
    assert_no_page_error(&dom, &stderr);
    assert!(dom.contains("id=\"main\" hidden"), "the view stays hidden");
    assert!(
        text_of(&dom, "login-error").contains("not a dashboard token"),
        "{dom}"
    );

    // An OSD stops: down, OSD_DOWN, and the count changes.
    ok(&dir, &["stop", "osd.2", "--data-dir", &d]);
    wait_for(60, "OSD_DOWN never raised", || {
        health(&dir)["checks"]["OSD_DOWN"].is_object()
    });
    let (dom, stderr) = browse(&browser, &page, 5000, None);
    assert_no_page_error(&dom, &stderr);
    assert_eq!(text_of(&dom, "osd-count"), "3 total, 2 up, 3 in", "{dom}");
    let detail = ok(&dir, &["health", "detail"]);
    assert_eq!(text_of(&dom, "health-status"), "HEALTH_WARN", "{detail}");
    assert!(dom.contains(">OSD_DOWN<"), "{dom}");
    assert!(dom.contains(">down, in<"), "osd.2's row says down: {dom}");
    if let Some(dir_out) = &shots {
        browse(
            &browser,
            &page,
            5000,
            Some(&dir_out.join("dashboard-osd-down.png")),
        );
    }
    ok(&dir, &["start", "osd.2", "--data-dir", &d]);
}

/// Restart the cluster in `dir` with its monitor's HTTP on every address
/// (beyond loopback), at the same port; that port.
fn serve_http_on_every_address(dir: &Path) -> String {
    let d = dir.to_string_lossy().into_owned();
    ok(dir, &["down", "--data-dir", &d]);
    let state_file = dir.join("cluster.toml");
    let state = std::fs::read_to_string(&state_file).unwrap();
    let line = (state.lines())
        .find(|l| l.starts_with("http_addrs"))
        .expect("the monitors' HTTP addresses");
    let port = line
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches(['"', ']'])
        .to_string();
    let wide = format!("http_addrs = [\"0.0.0.0:{port}\"]");
    std::fs::write(&state_file, state.replace(line, &wide)).unwrap();
    ok(dir, &["up", "--detach", "--data-dir", &d]);
    port
}

/// Beyond loopback the listener speaks TLS only, with the monitor's
/// certificate, and the page works over it in the browser; a monitor
/// without a keyring there serves the metrics in the clear and refuses
/// the dashboard (and `mgr services` does not name it).
#[test]
fn beyond_loopback_the_dashboard_is_served_over_tls_only() {
    let (_root, dir, _guard) = common::start("dash-tls", 3, 8);
    let port = serve_http_on_every_address(&dir);
    let url = dashboard_url(&dir);
    assert_eq!(url, format!("https://127.0.0.1:{port}/"));
    let v: serde_json::Value = serde_json::from_str(&ok(&dir, &["mgr", "services"])).unwrap();
    assert_eq!(v["prometheus"], format!("https://127.0.0.1:{port}/metrics"));
    // Plain HTTP gets no answer: a TLS server reads it as a bad
    // handshake and closes.
    let mut s = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert!(
        !String::from_utf8_lossy(&out).contains("HTTP/1."),
        "{out:?}"
    );
    if let Some(browser) = chromium() {
        wait_for(60, "the cluster never became healthy", || {
            health(&dir)["status"] == "HEALTH_OK"
        });
        let token = create_token(&dir, "client.admin");
        let page = format!("{url}#token={token}");
        let (dom, stderr) = browse_with(&browser, &page, 5000, &["--ignore-certificate-errors"]);
        assert_no_page_error(&dom, &stderr);
        assert_eq!(text_of(&dom, "osd-count"), "3 total, 3 up, 3 in", "{dom}");
    } else {
        assert!(
            !chromium_required(),
            "LOLIGO_REQUIRE_CHROMIUM is set and chromium is not installed"
        );
    }

    let (_root, dir, _guard) = common::start_with("dash-plain", 3, 8, &["--insecure"]);
    let port = serve_http_on_every_address(&dir);
    let v: serde_json::Value = serde_json::from_str(&ok(&dir, &["mgr", "services"])).unwrap();
    assert!(v.get("dashboard").is_none(), "{v}");
    assert_eq!(v["prometheus"], format!("http://127.0.0.1:{port}/metrics"));
    let base = format!("http://127.0.0.1:{port}/");
    let (line, body) = get(&base, None);
    assert!(line.contains("403"), "{line} {body}");
    let (line, _) = get(&format!("{base}api/dashboard"), Some(&"0".repeat(64)));
    assert!(line.contains("403"), "{line}");
    wait_for(30, "the metrics never served", || {
        get(&format!("{base}metrics"), None).0.contains("200")
    });
}
