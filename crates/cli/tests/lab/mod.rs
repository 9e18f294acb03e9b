//! Hosts on one machine for partition tests and the soak
//! (`tools/hosts.sh`: network namespaces on a bridge, nftables cuts): one
//! or three monitors, OSDs each on a host of its own (CRUSH failure
//! domain `host`) and a client host, each daemon a process of its own.
//! Needs root, iproute2 and nftables. A failed test keeps its logs, and
//! so does every one with `LOLIGO_KEEP_LABS=1`.
//!
//! It must never reach beyond the namespaces it made: every address it
//! uses is one of theirs.

#![allow(dead_code)]

pub mod registers;

use crate::common::{loligo, ok};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// OSDs of the partition tests' labs.
pub const OSDS: usize = 3;
const MON_PORT: u16 = 6789;

fn hosts_sh() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/hosts.sh")
}

fn loligo_bin() -> &'static str {
    env!("CARGO_BIN_EXE_loligo")
}

/// Whether this process may make namespaces (root with iproute2 and
/// nftables); if not, why.
/// Debian's libfaketime (package `faketime`), which offsets a process's
/// wall clock.
pub const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Run `cmd` with its wall clock offset by `offset` (libfaketime's
/// FAKETIME syntax, such as "+1h" or "-15s"); its monotonic clock, which
/// read leases and timers use, is left alone (no two processes' monotonic
/// clocks are ever compared).
pub fn faketime(cmd: &mut Command, offset: &str) {
    cmd.env("LD_PRELOAD", LIBFAKETIME)
        .env("FAKETIME", offset)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .env("FAKETIME_NO_CACHE", "1");
}

/// Whether this process may make hosts; if not, says why (the test
/// then stops).
pub fn hosts_or_skip() -> bool {
    match can_make_hosts() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("skipped: hosts need root, iproute2 and nftables ({why})");
            false
        }
    }
}

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
/// Hosts 0..mons run a monitor each, the next `osds` an OSD each, the
/// last a client; `daemons` holds the monitors, then the OSDs.
pub struct Lab {
    pub name: String,
    pub dir: PathBuf,
    pub mons: usize,
    pub osds: usize,
    pub addrs: Vec<String>,
    pub daemons: Vec<Child>,
    /// The client sessions' processes.
    clients: Vec<Child>,
    /// How each daemon was started (host, name, arguments), to start it
    /// again.
    specs: Vec<(usize, String, Vec<String>)>,
    /// Daemons whose wall clock is offset (libfaketime's FAKETIME, such
    /// as "+1h"), by name.
    clocks: Vec<(String, String)>,
    /// The message faults every daemon and client injects (the value of
    /// `LOLIGO_MS_INJECT`), if any.
    inject: Option<String>,
    _turn: std::sync::MutexGuard<'static, ()>,
}

static LABS: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Drop for Lab {
    fn drop(&mut self) {
        for d in self.daemons.iter_mut().chain(&mut self.clients) {
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
    /// Hosts up, keys made, `mons` monitors and `OSDS` OSDs started, pool
    /// `default` (3 replicas, min_size 2) clean.
    pub fn start(tag: &str, mons: usize) -> Lab {
        Lab::start_with(tag, mons, OSDS)
    }

    /// As `start`, with `osds` OSDs.
    pub fn start_with(tag: &str, mons: usize, osds: usize) -> Lab {
        Lab::start_clocked(tag, mons, osds, &[])
    }

    /// As `start_with`, the wall clocks of daemons offset:
    /// (name, libfaketime offset such as "+1h"); see `faketime`.
    pub fn start_clocked(tag: &str, mons: usize, osds: usize, clocks: &[(&str, &str)]) -> Lab {
        Lab::start_full(tag, mons, osds, clocks, None, &[])
    }

    /// As `start`, each monitor given `mon_args` too (such as
    /// `--down-out-interval 2`).
    pub fn start_mon_args(tag: &str, mons: usize, mon_args: &[&str]) -> Lab {
        Lab::start_full(tag, mons, OSDS, &[], None, mon_args)
    }

    /// As `start_with`, every daemon and client injecting the message
    /// faults `spec` asks for (`LOLIGO_MS_INJECT`: lost, duplicated and
    /// delayed messages, connection resets).
    pub fn start_injecting(tag: &str, mons: usize, osds: usize, spec: &str) -> Lab {
        Lab::start_full(tag, mons, osds, &[], Some(spec), &[])
    }

    fn start_full(
        tag: &str,
        mons: usize,
        osds: usize,
        clocks: &[(&str, &str)],
        inject: Option<&str>,
        mon_args: &[&str],
    ) -> Lab {
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
            osds,
            clocks: clocks
                .iter()
                .map(|(n, o)| (n.to_string(), o.to_string()))
                .collect(),
            inject: inject.map(str::to_string),
            addrs: Vec::new(),
            daemons: Vec::new(),
            clients: Vec::new(),
            specs: Vec::new(),
            _turn: turn,
        };
        let hosts = mons + osds + 1;
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
        entities.extend((0..osds).map(|i| format!("osd.{i}")));
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
            let (data, key) = (data(&format!("mon.{i}")), keyring(&format!("mon.{i}")));
            let mut args = vec![
                "mon",
                "run",
                "--id",
                &id,
                "--members",
                &members,
                "--data",
                &data,
                "--fsid",
                &fsid,
                "--mkfs",
                "--keyring",
                &key,
                // An OSD that stops reporting (cut off from the monitors
                // alone: its peers still hear it) is marked down soon.
                "--report-timeout",
                "4",
            ];
            args.extend(mon_args);
            lab.spawn(i, &format!("mon.{i}"), &args);
        }
        let mon = mon_addrs.join(",");
        for i in 0..osds {
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
            (v["osdmap"]["num_up_osds"] == lab.osds).then_some(())
        });
        ok(
            &dir,
            &["pool", "create", "default", "--pg-num", "8", "--size", "3"],
        );
        lab.wait_clean(Duration::from_secs(60), "the PGs clean");
        lab
    }

    /// The host of osd.`i`.
    pub fn osd_host(&self, i: usize) -> usize {
        self.mons + i
    }

    /// The host of the clients.
    pub fn client_host(&self) -> usize {
        self.mons + self.osds
    }

    /// The process of osd.`i`.
    pub fn osd_daemon(&mut self, i: usize) -> &mut Child {
        &mut self.daemons[self.mons + i]
    }

    /// Start `args` of `loligo` on host `host`, logging to NAME.log.
    pub fn spawn(&mut self, host: usize, name: &str, args: &[&str]) {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let child = self.launch(host, name, &args);
        self.daemons.push(child);
        self.specs.push((host, name.to_string(), args));
    }

    /// Start a daemon's process, its output appended to NAME.log.
    fn launch(&self, host: usize, name: &str, args: &[String]) -> Child {
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{name}.log")))
            .unwrap();
        let mut cmd = Command::new(hosts_sh());
        cmd.args(["exec", &self.name, &host.to_string(), loligo_bin()])
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        if let Some((_, offset)) = self.clocks.iter().find(|(n, _)| n == name) {
            faketime(&mut cmd, offset);
        }
        if let Some(spec) = &self.inject {
            cmd.env(loligo_proto::inject::ENV, spec);
        }
        cmd.spawn().expect("start a daemon")
    }

    /// Daemon `i`'s name (`mon.N` or `osd.N`).
    pub fn daemon_name(&self, i: usize) -> String {
        self.specs[i].1.clone()
    }

    /// Kill daemon `i` (SIGKILL; monitors first, then OSDs).
    pub fn kill(&mut self, i: usize) {
        let _ = self.daemons[i].kill();
        let _ = self.daemons[i].wait();
    }

    /// Whether daemon `i` runs.
    pub fn runs(&mut self, i: usize) -> bool {
        self.daemons[i].try_wait().ok().flatten().is_none()
    }

    /// Start daemon `i` again (killed first if it runs), on its store.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        let (host, name, args) = self.specs[i].clone();
        let args: Vec<String> = args.into_iter().filter(|a| a != "--mkfs").collect();
        self.daemons[i] = self.launch(host, &name, &args);
    }

    /// Start daemon `i` again with `flag`'s value changed to `value` (as
    /// an operator who edits a daemon's options and restarts it).
    pub fn restart_changed(&mut self, i: usize, flag: &str, value: &str) {
        let args = &mut self.specs[i].2;
        let at = args.iter().position(|a| a == flag);
        match at.and_then(|at| args.get_mut(at + 1)) {
            Some(v) => *v = value.to_string(),
            None => args.extend([flag.to_string(), value.to_string()]),
        }
        self.restart(i);
    }

    /// Wait at most `limit` for every OSD up and in and every PG
    /// active+clean (`what` names the moment in a failure).
    pub fn wait_clean(&self, limit: Duration, what: &str) {
        self.wait_for(limit, what, |lab| {
            crate::common::not_clean(&lab.dir).is_none().then_some(())
        });
    }

    /// Poll `f` until it gives a value, for at most `limit`.
    pub fn wait_for<T>(
        &self,
        limit: Duration,
        what: &str,
        mut f: impl FnMut(&Lab) -> Option<T>,
    ) -> T {
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
    pub fn primary_of(&self, name: &str) -> usize {
        let out = ok(&self.dir, &["osd", "map", "default", name, "--json"]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("osd map --json");
        v["acting_primary"]
            .as_u64()
            .unwrap_or_else(|| panic!("no acting primary in {out}")) as usize
    }

    /// Host `host` loses every monitor (both ways), and only them.
    pub fn cut_from_monitors(&self, host: usize) {
        for m in 0..self.mons {
            self.cut_between(host, m);
        }
    }

    /// Hosts `a` and `b` lose each other (both ways), and only each other.
    pub fn cut_between(&self, a: usize, b: usize) {
        sh(&["cut", &self.name, &a.to_string(), &self.addrs[b], "both"]);
    }

    /// `loligo ARGS` run on host `host` (which reaches only what its
    /// cuts leave it).
    pub fn on_host(&self, host: usize, args: &[&str]) -> std::process::Output {
        let conf = self.dir.join("loligo.conf");
        Command::new(hosts_sh())
            .args(["exec", &self.name, &host.to_string(), loligo_bin()])
            .args(["-c", &conf.to_string_lossy()])
            .args(args)
            .output()
            .expect("run loligo on a host")
    }

    /// `status --json` as the monitors answer it from the root host.
    /// Each monitor's own map (`osd getmap` asked of it alone), encoded;
    /// `None` for one that did not answer.
    pub fn mon_maps(&self) -> Vec<Option<Vec<u8>>> {
        let keyring = self.dir.join("keys/client.admin.keyring");
        (0..self.mons)
            .map(|i| {
                let out = self.dir.join(format!("mon.{i}.getmap"));
                let _ = std::fs::remove_file(&out);
                let o = loligo(
                    &self.dir,
                    &[
                        "--mon",
                        &format!("{}:{MON_PORT}", self.addrs[i]),
                        "--keyring",
                        &keyring.to_string_lossy(),
                        "osd",
                        "getmap",
                        "-o",
                        &out.to_string_lossy(),
                    ],
                );
                o.status
                    .success()
                    .then(|| std::fs::read(&out).ok())
                    .flatten()
            })
            .collect()
    }

    pub fn status(&self) -> Option<serde_json::Value> {
        let s = loligo(&self.dir, &["status", "--json"]);
        s.status
            .success()
            .then(|| serde_json::from_slice(&s.stdout).ok())
            .flatten()
    }

    /// The monitors' leader, if they have one.
    pub fn mon_leader(&self) -> Option<usize> {
        self.status()?["monitors"]["leader"]
            .as_u64()
            .map(|l| l as usize)
    }

    /// Whether osd.`id` is up in the monitor's map.
    pub fn is_up(&self, id: usize) -> bool {
        let out = ok(&self.dir, &["osd", "dump", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("osd dump");
        v["osds"]
            .as_array()
            .and_then(|a| a.iter().find(|o| o["id"] == id))
            .is_some_and(|o| o["up"] == true)
    }

    /// Host `a` hears nothing from host `b`; `b` still hears `a`.
    pub fn cut_one_way(&self, a: usize, b: usize) {
        sh(&["cut", &self.name, &a.to_string(), &self.addrs[b], "in"]);
    }

    /// Host `a` routes host `b`'s address into a blackhole (what it
    /// sends there is discarded; `b` still reaches it).
    pub fn blackhole(&self, a: usize, b: usize) {
        sh(&["blackhole", &self.name, &a.to_string(), &self.addrs[b]]);
    }

    /// Bring host `host`'s link up or down (down: it reaches no one).
    pub fn link(&self, host: usize, up: bool) {
        let state = if up { "up" } else { "down" };
        sh(&["link", &self.name, &host.to_string(), state]);
    }

    /// Hosts `a` and `b` lose `percent`% of what they send each other, at
    /// random (TCP turns it into delay and stalls).
    pub fn lose_between(&self, a: usize, b: usize, percent: u32) {
        let p = percent.to_string();
        sh(&["lose", &self.name, &a.to_string(), &self.addrs[b], &p]);
    }

    /// Remove host `host`'s cuts and losses.
    pub fn heal(&self, host: usize) {
        sh(&["heal", &self.name, &host.to_string()]);
    }

    /// A `loligo lab client` session on host `host`.
    pub fn client(&mut self, host: usize) -> Session {
        self.client_on(host, "default")
    }

    /// A `loligo lab client` session on host `host`, on pool `pool`.
    pub fn client_on(&mut self, host: usize, pool: &str) -> Session {
        self.client_clocked(host, pool, None)
    }

    /// As `client_on`, its wall clock offset by `clock` (see `faketime`).
    pub fn client_clocked(&mut self, host: usize, pool: &str, clock: Option<&str>) -> Session {
        let conf = self.dir.join("loligo.conf");
        let mut cmd = Command::new(hosts_sh());
        if let Some(offset) = clock {
            faketime(&mut cmd, offset);
        }
        if let Some(spec) = &self.inject {
            cmd.env(loligo_proto::inject::ENV, spec);
        }
        let mut child = cmd
            .args(["exec", &self.name, &host.to_string(), loligo_bin()])
            .args([
                "-c",
                &conf.to_string_lossy(),
                "-p",
                pool,
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
        self.clients.push(child);
        Session { stdin, out }
    }
}

/// A client session: one answer per command.
pub struct Session {
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
}

impl Session {
    /// The answer to `cmd`, without the op's time.
    pub fn ask(&mut self, cmd: &str) -> String {
        writeln!(self.stdin, "{cmd}").unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        let line = line.trim();
        line.rsplit_once(' ').map_or(line, |(a, _)| a).to_string()
    }
}
