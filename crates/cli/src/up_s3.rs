//! The S3 gateway `loligo up` runs beside a local cluster (`rgw.0`, as
//! the entity `client.rgw.0`): its address, its folder (a config and a
//! keyring of its own), its command line, and the admin's S3 keys that
//! `up` prints, as MinIO prints its root credentials.
//!
//! It must never print a secret but the admin's own, and never give the
//! gateway more than mon 'allow rw' and osd 'allow rwx'.

use crate::config::{Config, DEFAULT_POOL};
use crate::CliError;
use loligo_monc::protocol::{Admin, MonError, MonRequest};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The gateway's daemon name (its folder, pid file and log).
pub const GATEWAY: &str = "rgw.0";
/// Its entity.
const ENTITY: &str = "client.rgw.0";
/// RGW's port, which `--s3 auto` takes when it is free.
const RGW_PORT: u16 = 7480;
/// The S3 user whose keys `up` prints.
const ADMIN_USER: &str = "admin";
/// PGs of each of the gateway's pools in a local cluster.
const POOL_PG_NUM: u32 = 8;

/// The address `--s3` asks for (`auto`: RGW's port on loopback, or a
/// free one if that is taken; `off`: no gateway).
pub fn pick_addr(asked: &str) -> Result<Option<String>, CliError> {
    match asked {
        "off" => Ok(None),
        "auto" => {
            let port = match std::net::TcpListener::bind(("127.0.0.1", RGW_PORT)) {
                Ok(_) => RGW_PORT,
                Err(_) => std::net::TcpListener::bind("127.0.0.1:0")?
                    .local_addr()?
                    .port(),
            };
            Ok(Some(format!("127.0.0.1:{port}")))
        }
        addr => {
            use std::net::ToSocketAddrs;
            (addr.to_socket_addrs()).map_err(|e| CliError(format!("--s3 {addr}: {e}")))?;
            Ok(Some(addr.to_string()))
        }
    }
}

/// The gateway's folder in cluster folder `dir`.
fn folder(dir: &Path) -> PathBuf {
    dir.join(GATEWAY)
}

/// The gateway's command line, serving on `addr`.
pub fn args(dir: &Path, addr: &str) -> Vec<String> {
    let conf = folder(dir).join(crate::config::CONF_NAME);
    vec![
        "s3".into(),
        "run".into(),
        "--conf".into(),
        conf.to_string_lossy().into_owned(),
        "--listen".into(),
        addr.into(),
        "--pool-pg-num".into(),
        POOL_PG_NUM.to_string(),
    ]
}

/// Make the gateway's folder: its config (the cluster's monitors) and,
/// in a cluster with keys, its keyring (made by the monitors once, with
/// the gateway's caps).
pub async fn prepare(
    mc: &mut loligo_monc::MonClient,
    dir: &Path,
    fsid: &str,
    mon_addrs: Vec<String>,
    insecure: bool,
) -> Result<(), MonError> {
    let f = folder(dir);
    let keyring = f.join("keyring");
    std::fs::create_dir_all(&f).map_err(|e| MonError::Invalid(format!("{}: {e}", f.display())))?;
    if !insecure && !keyring.exists() {
        let caps = vec![
            ("mon".to_string(), "allow rw".to_string()),
            ("osd".to_string(), "allow rwx".to_string()),
        ];
        let add = Admin::AuthAdd {
            entity: ENTITY.into(),
            caps,
        };
        // A keyring lost with the entity still recorded: a new key.
        let r = match mc.call(MonRequest::Admin(add)).await {
            Ok(r) => r,
            Err(_) => {
                let rotate = Admin::AuthRotate {
                    entity: ENTITY.into(),
                };
                mc.call(MonRequest::Admin(rotate)).await?
            }
        };
        let text = r.value["keyring"]
            .as_str()
            .ok_or_else(|| MonError::Invalid(format!("auth add {ENTITY}: no keyring")))?;
        loligo_proto::tls::Keyring::from_text(text)
            .and_then(|k| k.save(&keyring))
            .map_err(|e| MonError::Invalid(format!("{ENTITY}'s keyring: {e}")))?;
    }
    let conf = Config {
        fsid: fsid.to_string(),
        mon_addrs,
        default_pool: DEFAULT_POOL.into(),
        keyring: (!insecure).then(|| PathBuf::from("keyring")),
    };
    conf.save(&f.join(crate::config::CONF_NAME))
        .map_err(|e| MonError::Invalid(e.0))
}

/// The admin's S3 key pair, made at the first start.
pub async fn admin_keys(mc: &mut loligo_monc::MonClient) -> Result<(String, String), MonError> {
    let info = Admin::S3UserInfo {
        uid: ADMIN_USER.into(),
    };
    let v = match mc.call(MonRequest::Admin(info)).await {
        Ok(r) => r.value,
        Err(MonError::NotFound(_)) => {
            let create = Admin::S3UserCreate {
                uid: ADMIN_USER.into(),
                display_name: Some("the cluster's administrator".into()),
                access_key: None,
                secret_key: None,
            };
            mc.call(MonRequest::Admin(create)).await?.value
        }
        Err(e) => return Err(e),
    };
    let key = &v["keys"][0];
    match (key["access_key"].as_str(), key["secret_key"].as_str()) {
        (Some(a), Some(s)) => Ok((a.to_string(), s.to_string())),
        _ => Err(MonError::Invalid(format!(
            "S3 user {ADMIN_USER} has no key: `loligo s3 key create --uid {ADMIN_USER}`"
        ))),
    }
}

/// Wait until the gateway answers on `addr` (30 s), or say why not.
pub fn wait_serving(
    addr: &str,
    child: &mut std::process::Child,
    log: &Path,
) -> Result<(), CliError> {
    let t0 = Instant::now();
    loop {
        if std::net::TcpStream::connect(addr).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(CliError(format!(
                "the S3 gateway exited ({status}); see {}",
                log.display()
            )));
        }
        if t0.elapsed() > Duration::from_secs(30) {
            return Err(CliError(format!(
                "the S3 gateway does not answer on {addr} after 30 s; see {}",
                log.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
