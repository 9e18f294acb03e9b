//! Partition tests on hosts of one machine (`tools/hosts.sh`: network
//! namespaces on a bridge, nftables cuts): a monitor, three OSDs on
//! three hosts (CRUSH failure domain `host`) and a client host, each
//! daemon a process of its own. Needs root, iproute2 and nftables (CI
//! runs as root; `.ci/run` installs nftables); run as another user, the
//! tests say so and stop.

mod common;

use common::{loligo, ok};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const OSDS: usize = 3;
/// Host 0 runs the monitor, hosts 1..=3 one OSD each, host 4 a client.
const HOSTS: usize = OSDS + 2;
const CLIENT_HOST: usize = OSDS + 1;
const MON_PORT: u16 = 6789;

fn hosts_sh() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/hosts.sh")
}

fn loligo_bin() -> &'static str {
    env!("CARGO_BIN_EXE_loligo")
}

/// Whether this process may make namespaces (root with iproute2 and
/// nftables); if not, why.
fn can_make_hosts() -> Result<(), String> {
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .map_err(|e| e.to_string())?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Err("not root".into());
    }
    Ok(())
}

/// The hosts, the daemons on them and the cluster's folder; all taken
/// down when dropped (a failed test keeps the folder's logs).
struct Lab {
    name: String,
    dir: PathBuf,
    addrs: Vec<String>,
    daemons: Vec<Child>,
    _turn: std::sync::MutexGuard<'static, ()>,
}

static LABS: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Drop for Lab {
    fn drop(&mut self) {
        for d in &mut self.daemons {
            let _ = d.kill();
            let _ = d.wait();
        }
        let _ = Command::new(hosts_sh()).args(["down", &self.name]).status();
        if std::thread::panicking() {
            eprintln!("test failed: logs kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(self.dir.parent().unwrap_or(&self.dir));
        }
    }
}

fn sh(args: &[&str]) -> String {
    let o = Command::new(hosts_sh())
        .args(args)
        .output()
        .expect("run hosts.sh");
    assert!(
        o.status.success(),
        "hosts.sh {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

impl Lab {
    /// Hosts up, keys made, the monitor and the OSDs started, pool
    /// `default` (3 replicas, min_size 2) clean.
    fn start(tag: &str) -> Lab {
        // One lab at a time: two could draw the same subnet.
        let turn = LABS.lock().unwrap_or_else(|e| e.into_inner());
        let name = format!("{tag}{}", std::process::id() % 100_000);
        let root = std::env::temp_dir().join(format!("loligo-{name}"));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("c");
        std::fs::create_dir_all(dir.join("keys")).unwrap();
        let _ = Command::new(hosts_sh()).args(["down", &name]).status();
        let mut lab = Lab {
            name: name.clone(),
            dir: dir.clone(),
            addrs: Vec::new(),
            daemons: Vec::new(),
            _turn: turn,
        };
        sh(&["up", &name, &HOSTS.to_string()]);
        lab.addrs = (0..HOSTS)
            .map(|i| sh(&["addr", &name, &i.to_string()]))
            .collect();
        let fsid = format!("lab-{name}");
        let keys = dir.join("keys");
        let keys_s = keys.to_string_lossy().into_owned();
        ok(&dir, &["auth", "ca", &keys_s, "--fsid", &fsid]);
        let mut entities = vec!["mon.0".to_string(), "client.admin".to_string()];
        entities.extend((0..OSDS).map(|i| format!("osd.{i}")));
        for e in &entities {
            let out = keys.join(format!("{e}.keyring"));
            ok(
                &dir,
                &[
                    "auth",
                    "keyring",
                    e,
                    "--ca",
                    &keys_s,
                    "-o",
                    &out.to_string_lossy(),
                ],
            );
        }
        let mon = format!("{}:{MON_PORT}", lab.addrs[0]);
        std::fs::write(
            dir.join("loligo.conf"),
            format!(
                "fsid = \"{fsid}\"\nmon_addrs = [\"{mon}\"]\nkeyring = \"keys/client.admin.keyring\"\n"
            ),
        )
        .unwrap();
        let keyring = |e: &str| {
            keys.join(format!("{e}.keyring"))
                .to_string_lossy()
                .into_owned()
        };
        let data = |d: &str| dir.join(d).to_string_lossy().into_owned();
        lab.spawn(
            0,
            "mon.0",
            &[
                "mon",
                "run",
                "--id",
                "0",
                "--members",
                &format!("0={mon}"),
                "--data",
                &data("mon"),
                "--fsid",
                &fsid,
                "--mkfs",
                "--keyring",
                &keyring("mon.0"),
                // An OSD that stops reporting (cut off from the monitors
                // alone: its peers still hear it) is marked down soon.
                "--report-timeout",
                "4",
            ],
        );
        for i in 0..OSDS {
            let addr = format!("{}:6800", lab.addrs[1 + i]);
            lab.spawn(
                1 + i,
                &format!("osd.{i}"),
                &[
                    "osd",
                    "run",
                    "--id",
                    &i.to_string(),
                    "--addr",
                    &addr,
                    "--mon",
                    &mon,
                    "--data",
                    &data(&format!("osd.{i}")),
                    "--size",
                    &(256u64 << 20).to_string(),
                    "--keyring",
                    &keyring(&format!("osd.{i}")),
                    "--host",
                    &format!("host{i}"),
                    "--heartbeat-grace",
                    "2",
                ],
            );
        }
        lab.wait_for(Duration::from_secs(60), "the OSDs up", |lab| {
            let s = loligo(&lab.dir, &["status", "--json"]);
            let v: serde_json::Value = serde_json::from_slice(&s.stdout).ok()?;
            (v["osdmap"]["num_up_osds"] == OSDS).then_some(())
        });
        ok(
            &dir,
            &["pool", "create", "default", "--pg-num", "8", "--size", "3"],
        );
        lab.wait_for(Duration::from_secs(60), "the PGs clean", |lab| {
            common::not_clean(&lab.dir).is_none().then_some(())
        });
        lab
    }

    /// Start `args` of `loligo` on host `host`, logging to NAME.log.
    fn spawn(&mut self, host: usize, name: &str, args: &[&str]) {
        let log = std::fs::File::create(self.dir.join(format!("{name}.log"))).unwrap();
        let child = Command::new(hosts_sh())
            .args(["exec", &self.name, &host.to_string(), loligo_bin()])
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start a daemon");
        self.daemons.push(child);
    }

    /// Poll `f` until it gives a value, for at most `limit`.
    fn wait_for<T>(&self, limit: Duration, what: &str, mut f: impl FnMut(&Lab) -> Option<T>) -> T {
        let t = Instant::now();
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            assert!(t.elapsed() < limit, "waited {limit:?} for {what}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The primary OSD of object `name` in pool `default`.
    fn primary_of(&self, name: &str) -> usize {
        let out = ok(&self.dir, &["osd", "map", "default", name, "--json"]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("osd map --json");
        v["acting_primary"]
            .as_u64()
            .unwrap_or_else(|| panic!("no acting primary in {out}")) as usize
    }

    /// Host `host` loses the monitor (both ways), and only it.
    fn cut_from_monitor(&self, host: usize) {
        sh(&["cut", &self.name, &host.to_string(), &self.addrs[0], "both"]);
    }

    fn heal(&self, host: usize) {
        sh(&["heal", &self.name, &host.to_string()]);
    }

    /// A `loligo lab client` session on host `host`.
    fn client(&mut self, host: usize) -> Session {
        let conf = self.dir.join("loligo.conf");
        let mut child = Command::new(hosts_sh())
            .args(["exec", &self.name, &host.to_string(), loligo_bin()])
            .args([
                "-c",
                &conf.to_string_lossy(),
                "lab",
                "client",
                "--op-timeout",
                "6",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a client");
        let stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        assert!(first.starts_with("ready"), "{first}");
        self.daemons.push(child);
        Session { stdin, out }
    }
}

/// A client session: one answer per command.
struct Session {
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
}

impl Session {
    /// The answer to `cmd`, without the op's time.
    fn ask(&mut self, cmd: &str) -> String {
        writeln!(self.stdin, "{cmd}").unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        let line = line.trim();
        line.rsplit_once(' ').map_or(line, |(a, _)| a).to_string()
    }
}

/// The stale-read scenario: the primary of an object is cut off from the
/// monitor alone (its peers and a client on its side still reach it);
/// the monitor marks it down once its reports stop; a client that can
/// reach the monitor writes a new value through the new primary. The
/// client on the old primary's side, which kept its old map, asks the
/// old primary: it must get an error (the old primary's read lease ran
/// out before the new primary took the write), never the old value.
/// Healed, every client reads the new value.
#[test]
fn an_osd_cut_off_from_the_monitor_serves_no_stale_reads() {
    if let Err(why) = can_make_hosts() {
        eprintln!("skipped: hosts need root, iproute2 and nftables ({why})");
        return;
    }
    let mut lab = Lab::start("lp");
    let mut far = lab.client(CLIENT_HOST);
    assert_eq!(far.ask("put x v1"), "ok");
    assert_eq!(far.ask("get x"), "value v1");
    let p = lab.primary_of("x");
    let old_epoch = far.ask("epoch");
    lab.cut_from_monitor(1 + p);
    lab.cut_from_monitor(CLIENT_HOST);
    lab.wait_for(
        Duration::from_secs(30),
        "the cut-off primary marked down",
        |lab| (lab.primary_of("x") != p).then_some(()),
    );
    // A client that reaches the monitor writes through the new primary.
    let t = Instant::now();
    let mut near = lab.client(0);
    assert_eq!(near.ask("put x v2"), "ok");
    eprintln!(
        "the new primary took a write {:?} after the map showed it",
        t.elapsed()
    );
    // The far client still has its old map, and asks the old primary.
    assert_eq!(far.ask("epoch"), old_epoch, "the far client kept its map");
    let read = far.ask("get x");
    assert!(
        read.starts_with("error"),
        "a client on the old primary's side read {read:?} after v2 was acknowledged"
    );
    // Healed, the far client hears of the new map and reads v2.
    lab.heal(1 + p);
    lab.heal(CLIENT_HOST);
    lab.wait_for(Duration::from_secs(30), "the far client to read v2", |_| {
        (far.ask("get x") == "value v2").then_some(())
    });
    lab.wait_for(Duration::from_secs(60), "the PGs clean", |lab| {
        common::not_clean(&lab.dir).is_none().then_some(())
    });
}

/// How long an object is unavailable when its primary crashes: the
/// primary's OSD is killed (SIGKILL) while a client writes it again and
/// again; its peers report it once it is silent for the heartbeat grace
/// (2 s here), the monitor marks it down, a new primary peers and serves
/// (no lease to wait out: the dead primary's ran out within the grace).
/// Printed, and bounded well above what it takes.
#[test]
fn a_crashed_primary_is_replaced_within_seconds_of_the_grace() {
    if let Err(why) = can_make_hosts() {
        eprintln!("skipped: hosts need root, iproute2 and nftables ({why})");
        return;
    }
    let mut lab = Lab::start("lk");
    let mut c = lab.client(CLIENT_HOST);
    assert_eq!(c.ask("put y v0"), "ok");
    let p = lab.primary_of("y");
    let d = &mut lab.daemons[1 + p];
    d.kill().unwrap();
    let killed = Instant::now();
    let _ = d.wait();
    let mut n = 1;
    let mut errors = 0;
    while c.ask(&format!("put y v{n}")) != "ok" {
        errors += 1;
        n += 1;
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "no write went through"
        );
    }
    let gap = killed.elapsed();
    eprintln!("writes resumed {gap:?} after the primary was killed ({errors} failed first)");
    assert_eq!(c.ask("get y"), format!("value v{n}"));
    assert!(gap < Duration::from_secs(15), "unavailable for {gap:?}");
}
