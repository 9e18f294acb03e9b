//! Partition tests on hosts of one machine (`tools/hosts.sh`: network
//! namespaces on a bridge, nftables cuts): one or three monitors, three
//! OSDs on three hosts (CRUSH failure domain `host`) and a client host,
//! each daemon a process of its own on a host of its own. Needs root, iproute2 and nftables (CI
//! runs as root; `.ci/run` installs nftables); run as another user, the
//! tests say so and stop. A failed test keeps its logs, and so does every
//! test with `LOLIGO_KEEP_LABS=1`.

mod common;

use common::{loligo, ok};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const OSDS: usize = 3;
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
/// Hosts 0..mons run a monitor each, the next `OSDS` an OSD each, the
/// last a client; `daemons` holds the monitors, then the OSDs.
struct Lab {
    name: String,
    dir: PathBuf,
    mons: usize,
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
        if std::thread::panicking() || std::env::var_os("LOLIGO_KEEP_LABS").is_some() {
            eprintln!("logs kept in {}", self.dir.display());
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
    /// Hosts up, keys made, `mons` monitors and the OSDs started, pool
    /// `default` (3 replicas, min_size 2) clean.
    fn start(tag: &str, mons: usize) -> Lab {
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
            mons,
            addrs: Vec::new(),
            daemons: Vec::new(),
            _turn: turn,
        };
        let hosts = mons + OSDS + 1;
        sh(&["up", &name, &hosts.to_string()]);
        lab.addrs = (0..hosts)
            .map(|i| sh(&["addr", &name, &i.to_string()]))
            .collect();
        let fsid = format!("lab-{name}");
        let keys = dir.join("keys");
        let keys_s = keys.to_string_lossy().into_owned();
        ok(&dir, &["auth", "ca", &keys_s, "--fsid", &fsid]);
        let mut entities: Vec<String> = (0..mons).map(|i| format!("mon.{i}")).collect();
        entities.push("client.admin".to_string());
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
        let mon_addrs: Vec<String> = (0..mons)
            .map(|i| format!("{}:{MON_PORT}", lab.addrs[i]))
            .collect();
        let quoted: Vec<String> = mon_addrs.iter().map(|a| format!("\"{a}\"")).collect();
        std::fs::write(
            dir.join("loligo.conf"),
            format!(
                "fsid = \"{fsid}\"\nmon_addrs = [{}]\nkeyring = \"keys/client.admin.keyring\"\n",
                quoted.join(", ")
            ),
        )
        .unwrap();
        let keyring = |e: &str| {
            keys.join(format!("{e}.keyring"))
                .to_string_lossy()
                .into_owned()
        };
        let data = |d: &str| dir.join(d).to_string_lossy().into_owned();
        let members: Vec<String> = (0..mons).map(|i| format!("{i}={}", mon_addrs[i])).collect();
        let members = members.join(",");
        for i in 0..mons {
            let id = i.to_string();
            lab.spawn(
                i,
                &format!("mon.{i}"),
                &[
                    "mon",
                    "run",
                    "--id",
                    &id,
                    "--members",
                    &members,
                    "--data",
                    &data(&format!("mon.{i}")),
                    "--fsid",
                    &fsid,
                    "--mkfs",
                    "--keyring",
                    &keyring(&format!("mon.{i}")),
                    // An OSD that stops reporting (cut off from the
                    // monitors alone: its peers still hear it) is marked
                    // down soon.
                    "--report-timeout",
                    "4",
                ],
            );
        }
        let mon = mon_addrs.join(",");
        for i in 0..OSDS {
            let addr = format!("{}:6800", lab.addrs[lab.osd_host(i)]);
            lab.spawn(
                lab.osd_host(i),
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
                    "--max-markdown-count",
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

    /// The host of osd.`i`.
    fn osd_host(&self, i: usize) -> usize {
        self.mons + i
    }

    /// The host of the clients.
    fn client_host(&self) -> usize {
        self.mons + OSDS
    }

    /// The process of osd.`i`.
    fn osd_daemon(&mut self, i: usize) -> &mut Child {
        &mut self.daemons[self.mons + i]
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

    /// Host `host` loses every monitor (both ways), and only them.
    fn cut_from_monitors(&self, host: usize) {
        for m in 0..self.mons {
            self.cut_between(host, m);
        }
    }

    /// Hosts `a` and `b` lose each other (both ways), and only each other.
    fn cut_between(&self, a: usize, b: usize) {
        sh(&["cut", &self.name, &a.to_string(), &self.addrs[b], "both"]);
    }

    /// `loligo ARGS` run on host `host` (which reaches only what its
    /// cuts leave it).
    fn on_host(&self, host: usize, args: &[&str]) -> std::process::Output {
        let conf = self.dir.join("loligo.conf");
        Command::new(hosts_sh())
            .args(["exec", &self.name, &host.to_string(), loligo_bin()])
            .args(["-c", &conf.to_string_lossy()])
            .args(args)
            .output()
            .expect("run loligo on a host")
    }

    /// `status --json` as the monitors answer it from the root host.
    fn status(&self) -> Option<serde_json::Value> {
        let s = loligo(&self.dir, &["status", "--json"]);
        s.status
            .success()
            .then(|| serde_json::from_slice(&s.stdout).ok())
            .flatten()
    }

    /// The monitors' leader, if they have one.
    fn mon_leader(&self) -> Option<usize> {
        self.status()?["monitors"]["leader"]
            .as_u64()
            .map(|l| l as usize)
    }

    /// Whether osd.`id` is up in the monitor's map.
    fn is_up(&self, id: usize) -> bool {
        let out = ok(&self.dir, &["osd", "dump"]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("osd dump");
        v["osds"]
            .as_array()
            .and_then(|a| a.iter().find(|o| o["id"] == id))
            .is_some_and(|o| o["up"] == true)
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
    let mut lab = Lab::start("lp", 1);
    let mut far = lab.client(lab.client_host());
    assert_eq!(far.ask("put x v1"), "ok");
    assert_eq!(far.ask("get x"), "value v1");
    let p = lab.primary_of("x");
    let old_epoch = far.ask("epoch");
    lab.cut_from_monitors(lab.osd_host(p));
    lab.cut_from_monitors(lab.client_host());
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
    lab.heal(lab.osd_host(p));
    lab.heal(lab.client_host());
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
    let mut lab = Lab::start("lk", 1);
    let mut c = lab.client(lab.client_host());
    assert_eq!(c.ask("put y v0"), "ok");
    let p = lab.primary_of("y");
    let d = lab.osd_daemon(p);
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

/// An OSD that reaches some peers but not others: osd.0 and osd.1 lose
/// each other, and nothing else. Each reports the other, and neither has
/// the second reporter it takes to go down; after the standoff the
/// monitor marks one down (on a tie, the higher id: osd.1), and PGs go on
/// without it. It boots again, is reported again, and once marked down
/// more often than its markdown count (2 here) it stops, as a flapping
/// OSD. Writes through every PG (all hold both) go on; nothing is lost.
#[test]
fn an_osd_that_reaches_some_peers_but_not_others_is_marked_down_and_stops_flapping() {
    if let Err(why) = can_make_hosts() {
        eprintln!("skipped: hosts need root, iproute2 and nftables ({why})");
        return;
    }
    let mut lab = Lab::start("lh", 1);
    let mut c = lab.client(lab.client_host());
    // An object whose primary is osd.0: its writes need osd.1 too.
    let name = (0..)
        .map(|i| format!("z{i}"))
        .find(|n| lab.primary_of(n) == 0)
        .expect("an object on osd.0");
    assert_eq!(c.ask(&format!("put {name} v0")), "ok");
    let cut = Instant::now();
    lab.cut_between(lab.osd_host(0), lab.osd_host(1));
    // Writes go on (each waits at most its op timeout).
    let (mut n, mut errors) = (0, 0);
    let mut up = true;
    while lab.osd_daemon(1).try_wait().ok().flatten().is_none() {
        n += 1;
        if c.ask(&format!("put {name} v{n}")) != "ok" {
            errors += 1;
        }
        if lab.is_up(1) != up {
            up = !up;
            eprintln!("{:?} after the cut: osd.1 up {up}", cut.elapsed());
        }
        assert!(
            cut.elapsed() < Duration::from_secs(90),
            "osd.1 did not stop as a flapping OSD"
        );
    }
    eprintln!(
        "osd.1 stopped as flapping {:?} after the cut; {n} writes, {errors} failed",
        cut.elapsed()
    );
    assert!(lab.is_up(0), "osd.0 stays up");
    lab.wait_for(Duration::from_secs(20), "osd.1 marked down", |lab| {
        (!lab.is_up(1)).then_some(())
    });
    let t = Instant::now();
    lab.wait_for(Duration::from_secs(30), "a write without osd.1", |_| {
        n += 1;
        (c.ask(&format!("put {name} v{n}")) == "ok").then_some(())
    });
    eprintln!("a write went through {:?} after osd.1 stopped", t.elapsed());
    assert_eq!(c.ask(&format!("get {name}")), format!("value v{n}"));
}

/// Three monitors on three hosts. The leader loses the other two (both
/// ways); OSDs and clients still reach every monitor. The two elect a
/// leader and go on: they mark an OSD out, and a client's writes go on.
/// The old leader, alone, changes nothing and says why: asked on its host
/// (where it is the only monitor in reach), `status` and `osd in` fail
/// with "no monitor quorum". Healed, it follows the majority: the map has
/// the majority's change, at no older epoch.
#[test]
fn a_monitor_cut_off_from_the_others_changes_nothing_and_the_majority_goes_on() {
    if let Err(why) = can_make_hosts() {
        eprintln!("skipped: hosts need root, iproute2 and nftables ({why})");
        return;
    }
    let mut lab = Lab::start("lm", 3);
    let mut c = lab.client(lab.client_host());
    assert_eq!(c.ask("put m v0"), "ok");
    let old = lab.wait_for(Duration::from_secs(30), "a leader", Lab::mon_leader);
    let others: Vec<usize> = (0..3).filter(|&m| m != old).collect();
    for &m in &others {
        lab.cut_between(old, m);
    }
    let cut = Instant::now();
    let new = lab.wait_for(Duration::from_secs(60), "a new leader", |lab| {
        lab.mon_leader().filter(|&l| l != old)
    });
    eprintln!(
        "mon.{new} leads {:?} after mon.{old} was cut off",
        cut.elapsed()
    );
    ok(&lab.dir, &["osd", "out", "2"]);
    let epoch = lab.status().expect("status")["osdmap"]["epoch"]
        .as_u64()
        .expect("an epoch");
    for args in [&["status"][..], &["osd", "in", "2"][..]] {
        let out = lab.on_host(old, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("no monitor quorum"),
            "{args:?} on the cut-off monitor's host: {err}"
        );
    }
    for n in 1..=3 {
        assert_eq!(c.ask(&format!("put m v{n}")), "ok");
    }
    lab.heal(old);
    lab.wait_for(
        Duration::from_secs(60),
        "the old leader's host to see the map",
        |lab| {
            let out = lab.on_host(old, &["status", "--json"]);
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            let seen = v["osdmap"]["epoch"].as_u64()?;
            assert!(seen >= epoch, "epoch {seen} after {epoch}");
            (v["osdmap"]["num_in_osds"] == OSDS - 1).then_some(())
        },
    );
    assert_eq!(c.ask("get m"), "value v3");
}
