//! A local cluster's OSD under requests meant to exhaust it, each from a
//! key the cluster's authority signed: an `allow r` user's ops that would
//! make it read far more than a reply carries, thousands of connections
//! from one address that never finish their handshakes, and 64
//! connections of one user each sending a 128 MiB write to a PG that
//! cannot take it. The
//! OSD's peak memory (`VmHWM`) and open files stay under the bounds
//! stated here, and other clients are served meanwhile.

mod common;

use common::{loligo, ok};
use loligo_types::ops::SubOp;
use std::path::Path;
use std::time::{Duration, Instant};

/// Most the OSD's peak resident memory may grow under the attacks.
const HWM_GROWTH_MAX_KIB: u64 = 1 << 20;
/// Most the OSD's open files may grow while 3,000 connections that never
/// finish their handshakes arrive from one address (the server admits
/// 64 handshakes per address).
const FDS_GROWTH_MAX: usize = 200;

/// A field of `/proc/PID/status` in KiB (`VmHWM`, `VmRSS`).
fn status_kib(pid: i32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

fn open_files(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// How long another client (the admin's `loligo stat big`) took to be
/// served; it must succeed.
async fn stat_served(dir: &Path) -> Duration {
    let t0 = Instant::now();
    let dir = dir.to_path_buf();
    let o = tokio::task::spawn_blocking(move || loligo(&dir, &["stat", "big"]))
        .await
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    t0.elapsed()
}

fn pid_of(dir: &Path, name: &str) -> i32 {
    std::fs::read_to_string(dir.join(format!("{name}.pid")))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn an_osd_bounds_what_hostile_requests_cost_it() {
    let root = std::env::temp_dir().join(format!("loligo-limits-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let dir = root.join("c");
    let _guard = common::Cluster(dir.clone());
    let mut args = common::up_args(&dir, 1, 8);
    let size = args.iter().position(|a| a == "--osd-size").unwrap() + 1;
    args[size] = (1u64 << 30).to_string();
    ok(&dir, &args.iter().map(String::as_str).collect::<Vec<_>>());

    let big = root.join("big.bin");
    std::fs::write(&big, vec![7u8; 64 << 20]).unwrap();
    ok(&dir, &["put", "big", big.to_str().unwrap()]);
    let keyring = root.join("probe.keyring");
    ok(
        &dir,
        &[
            "auth",
            "add",
            "client.probe",
            "mon",
            "allow r",
            "osd",
            "allow r",
            "-o",
            keyring.to_str().unwrap(),
        ],
    );
    let state: toml::Value =
        toml::from_str(&std::fs::read_to_string(dir.join("cluster.toml")).unwrap()).unwrap();
    let mon = state["mon_addr"].as_str().unwrap().to_string();
    let osd_addr = state["osd_addrs"][0].as_str().unwrap().to_string();
    let pid = pid_of(&dir, "osd.0");
    let hwm0 = status_kib(pid, "VmHWM");

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let sec = loligo_proto::net::Security::load(&keyring).unwrap();
        let c = loligo_client::Cluster::connect_secured(
            vec![mon.clone()],
            Duration::from_secs(20),
            Some(sec),
        )
        .await
        .unwrap();
        let io = c.pool("default").unwrap();
        // 16 ops at once, each of 256 whole reads of a 64 MiB object
        // (16 GiB each): refused before anything is read.
        let ops = (0..16).map(|_| {
            let io = io.clone();
            async move {
                let reads = (0..256)
                    .map(|_| SubOp::Read { offset: 0, len: 0 })
                    .collect();
                io.operate("big", reads).await
            }
        });
        for r in futures_join_all(ops).await {
            let e = r.expect_err("an op of 16 GiB of reads was served");
            assert!(e.to_string().contains("more than one reply"), "{e}");
        }
        // One whole read is fine.
        assert_eq!(io.read("big", 0, 0).await.unwrap().len(), 64 << 20);
    });
    let hwm1 = status_kib(pid, "VmHWM");
    assert!(
        hwm1 - hwm0 < HWM_GROWTH_MAX_KIB,
        "the OSD's peak memory grew by {} MiB under 16 ops of 256 whole reads",
        (hwm1 - hwm0) >> 10
    );

    // 3,000 connections from 127.0.0.2 that never say anything; a client
    // from 127.0.0.1 is served meanwhile, and the OSD's open files stay
    // bounded.
    let fds0 = open_files(pid);
    let (served, fds_most) = rt.block_on(async {
        let mut silent = Vec::new();
        for _ in 0..3000 {
            let s = tokio::net::TcpSocket::new_v4().unwrap();
            s.bind("127.0.0.2:0".parse().unwrap()).unwrap();
            if let Ok(c) = s.connect(osd_addr.parse().unwrap()).await {
                silent.push(c);
            }
        }
        let fds_most = open_files(pid);
        let served = stat_served(&dir).await;
        drop(silent);
        (served, fds_most)
    });
    assert!(
        fds_most < fds0 + FDS_GROWTH_MAX,
        "the OSD held {fds_most} files under the flood ({fds0} before)"
    );
    assert!(served < Duration::from_secs(5), "served in {served:?}");
    let hwm2 = status_kib(pid, "VmHWM");
    eprintln!(
        "osd.0: peak memory {} MiB before, {} MiB after the reads, {} MiB after the flood; \
         open files {fds0} before, {fds_most} under the flood; a client served in {served:?}",
        hwm0 >> 10,
        hwm1 >> 10,
        hwm2 >> 10
    );
    assert!(
        hwm2 - hwm0 < HWM_GROWTH_MAX_KIB,
        "the OSD's peak memory grew by {} MiB",
        (hwm2 - hwm0) >> 10
    );
    // The OSD is still up and serving.
    assert!(
        loligo(&dir, &["get", "big", root.join("back").to_str().unwrap()])
            .status
            .success()
    );

    // 64 connections of one user, each sending a 128 MiB write (the
    // largest object a pool takes; a frame over 256 MiB is refused from
    // its header) to a PG that cannot take writes (size 2 on one OSD:
    // its ops wait): the OSD holds at most the user's share of its
    // client budget, reads no more, and serves another client meanwhile.
    ok(
        &dir,
        &[
            "pool",
            "create",
            "stuck",
            "--pg-num",
            "8",
            "--size",
            "2",
            "--min-size",
            "2",
        ],
    );
    let writer = root.join("writer.keyring");
    ok(
        &dir,
        &[
            "auth",
            "add",
            "client.writer",
            "mon",
            "allow r",
            "osd",
            "allow rw",
            "-o",
            writer.to_str().unwrap(),
        ],
    );
    let (served, during) = rt.block_on(async {
        let sec = loligo_proto::net::Security::load(&writer).unwrap();
        let c = loligo_client::Cluster::connect_secured(
            vec![mon.clone()],
            Duration::from_secs(20),
            Some(sec.clone()),
        )
        .await
        .unwrap();
        let map = c.map();
        let pool = map.pool_by_name("stuck").unwrap().id;
        let payload = bytes::Bytes::from(vec![3u8; 128 << 20]);
        let expect = loligo_proto::tls::Expect::osd(0);
        let attack: Vec<_> = (0..64)
            .map(|i| {
                let req = loligo_types::ops::ClientRequest::Op(loligo_types::ops::ClientOp {
                    pool,
                    name: format!("w{i}"),
                    epoch: map.epoch,
                    ops: vec![SubOp::WriteFull(payload.clone())],
                    reqid: None,
                });
                let (body, bulk) = loligo_types::ops::encode_wire(&req);
                let conns =
                    loligo_proto::direct::Conns::new(Duration::from_secs(5)).secured(Some(&sec));
                let (addr, expect) = (osd_addr.clone(), expect.clone());
                tokio::spawn(async move {
                    let msg = loligo_proto::direct::Message {
                        body: body.into(),
                        bulk,
                    };
                    let call = loligo_proto::direct::Call::Op;
                    let _ = conns
                        .call(&expect, &addr, call, msg, Duration::from_secs(60))
                        .await;
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(8)).await;
        let served = stat_served(&dir).await;
        let during = status_kib(pid, "VmHWM");
        for a in attack {
            a.abort();
        }
        (served, during)
    });
    eprintln!(
        "osd.0 under 64 x 128 MiB writes: peak memory {} MiB; another client served in {served:?}",
        during >> 10
    );
    assert!(
        during - hwm0 < HWM_GROWTH_MAX_KIB,
        "the OSD's peak memory grew by {} MiB under 64 x 128 MiB writes",
        (during - hwm0) >> 10
    );
    assert!(served < Duration::from_secs(5), "served in {served:?}");
}

/// Run futures together, their results in order.
async fn futures_join_all<F: std::future::Future + Send + 'static>(
    fs: impl Iterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let hs: Vec<_> = fs.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in hs {
        out.push(h.await.unwrap());
    }
    out
}

/// Whether this process may mount a tmpfs (CI runs as root; a container
/// without the right to mount says no): tried on a folder of its own.
fn may_mount() -> bool {
    let probe = std::env::temp_dir().join(format!("loligo-mount-probe-{}", std::process::id()));
    if std::fs::create_dir_all(&probe).is_err() {
        return false;
    }
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&probe)
        .output()
        .is_ok_and(|o| o.status.success());
    if mounted {
        let _ = std::process::Command::new("umount").arg(&probe).status();
    }
    let _ = std::fs::remove_dir(&probe);
    mounted
}

/// Unmounts its folder when dropped.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// An OSD whose metadata file system is small (a 512 MiB tmpfs under its
/// engine's directory) is filled by 4 KiB objects with omap entries: it turns full and
/// refuses writes with a clear error, and keeps running and serving
/// reads; it never stops itself on a failed commit.
#[test]
fn an_osd_whose_metadata_file_system_fills_turns_full_and_serves_on() {
    if !may_mount() {
        eprintln!(
            "skipped: this process may not mount a tmpfs (needs root and the right to mount; \
             CI runs as root)"
        );
        return;
    }
    let (root, dir, _guard) = common::start("kv-full", 1, 8);
    ok(
        &dir,
        &["stop", "osd.0", "--data-dir", dir.to_str().unwrap()],
    );
    let data = dir.join("osd.0");
    let kv = data.join(loligo_store::media::LSM_DIR);
    let old = data.join("engine.old");
    std::fs::rename(&kv, &old).unwrap();
    std::fs::create_dir(&kv).unwrap();
    let mount = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=512m", "tmpfs"])
        .arg(&kv)
        .status()
        .unwrap();
    assert!(mount.success(), "mount a tmpfs on {}", kv.display());
    let _mounted = Mounted(kv.clone());
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", old.display()))
        .arg(&kv)
        .status()
        .unwrap();
    assert!(copied.success());
    ok(
        &dir,
        &["start", "osd.0", "--data-dir", dir.to_str().unwrap()],
    );
    let pid = pid_of(&dir, "osd.0");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let (written, refusal) = rt.block_on(async {
        let c = loligo_client::Cluster::connect_conf(&dir.join("loligo.conf"))
            .await
            .unwrap();
        let io = c.pool("default").unwrap();
        let t0 = Instant::now();
        let mut written = 0u64;
        let mut refusal = None;
        'fill: while t0.elapsed() < Duration::from_secs(120) {
            let batch = (0..16).map(|i| {
                let io = io.clone();
                let name = format!("o{written}-{i}");
                async move {
                    io.write_full(&name, vec![5u8; 4096]).await?;
                    let entries = (0..4u8).map(|k| (vec![k; 16], vec![k; 16 << 10])).collect();
                    io.omap_set(&name, entries).await
                }
            });
            for r in futures_join_all(batch).await {
                match r {
                    Ok(_) => written += 1,
                    Err(e) => {
                        refusal = Some(e.to_string());
                        break 'fill;
                    }
                }
            }
        }
        (written, refusal)
    });
    let refusal = refusal.unwrap_or_else(|| panic!("{written} objects written, none refused"));
    // What filled is the metadata's file system: tens of MiB of omap and
    // inline data went in (the block file is far from full).
    let df = std::process::Command::new("df").arg(&kv).output().unwrap();
    eprintln!(
        "{written} objects of 4 KiB with 64 KiB of omap written before: {refusal}\n{}",
        String::from_utf8_lossy(&df.stdout)
    );
    assert!(written > 300, "refused after {written} objects: {refusal}");
    assert!(refusal.contains("full"), "refused with: {refusal}");
    // The file system stays full: the engine may free some of it as it
    // flushes or compacts (it was seen back at 83% under load), and the
    // reports that tell the monitors carry the fill of the moment.
    let now = std::process::Command::new("df").arg(&kv).output().unwrap();
    let avail_kb: u64 = String::from_utf8_lossy(&now.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        .unwrap_or(0);
    // (About 2% of the 512 MiB left: past the 95% full ratio, with room
    // for the engine's own small writes.)
    let filler = (avail_kb << 10).saturating_sub(12 << 20);
    // In pieces: the engine may take some of the room meanwhile, and a
    // file system that fills first is what is wanted; the engine then
    // gets its room back.
    let mut f = std::fs::File::create(kv.join("test-filler")).unwrap();
    let piece = vec![0u8; 1 << 20];
    let mut left = filler;
    while left > 0 {
        let n = left.min(1 << 20);
        if std::io::Write::write_all(&mut f, &piece[..n as usize]).is_err() {
            let len = f.metadata().map_or(0, |m| m.len());
            let _ = f.set_len(len.saturating_sub(12 << 20));
            break;
        }
        left -= n;
    }
    drop(f);
    // Still running, and reads are served.
    assert!(
        std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "osd.0 stopped"
    );
    assert!(loligo(&dir, &["stat", "o0-0"]).status.success());
    // The monitors say so once its next report arrives.
    let t0 = Instant::now();
    let mut health = ok(&dir, &["health", "detail"]);
    while !health.contains("OSD_FULL") && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(500));
        health = ok(&dir, &["health", "detail"]);
    }
    assert!(health.contains("[ERR] OSD_FULL: 1 full osd(s)"), "{health}");
    drop(root);
}
