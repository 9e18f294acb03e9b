//! `loligo s3 run | user | key`: the S3 gateway (`loligo-s3`) as a
//! process, and its users and keys, which the monitors keep. This parses,
//! connects and prints; the gateway and the monitors do the rest.

use crate::admin_cmd::{call, print_json};
use crate::config::ConnArgs;
use crate::CliError;
use clap::{Args, Subcommand};
use loligo_monc::protocol::{Admin, MonRequest};
use serde_json::Value;
use std::time::Duration;

/// The S3 gateway and its users.
#[derive(Subcommand)]
pub enum S3Cmd {
    /// Serve S3 (Signature V4, path-style and virtual-hosted buckets)
    /// over this cluster until stopped. Run it as a client with mon
    /// 'allow rw' and osd 'allow rwx' (e.g. client.rgw.NAME); several
    /// gateways may serve one cluster.
    Run(RunArgs),
    /// The gateway's users.
    #[command(subcommand)]
    User(UserCmd),
    /// Users' key pairs.
    #[command(subcommand)]
    Key(KeyCmd),
}

/// `s3 run`.
#[derive(Args)]
pub struct RunArgs {
    /// Address to serve S3 on (RGW's port by default).
    #[arg(long, default_value = "0.0.0.0:7480")]
    pub listen: String,
    /// Pool of the bucket registry and indexes (replicated; made if
    /// missing).
    #[arg(long, default_value = "s3.index")]
    pub index_pool: String,
    /// Pool of object data (replicated or erasure-coded; made
    /// replicated if missing).
    #[arg(long, default_value = "s3.data")]
    pub data_pool: String,
    /// Index shards of each new bucket.
    #[arg(long, default_value_t = loligo_s3::SHARDS_DEFAULT, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: u32,
    /// Objects up to this many bytes are kept in the index itself.
    #[arg(long, default_value_t = loligo_s3::INLINE_MAX_DEFAULT, value_parser = clap::value_parser!(u64).range(0..=(1 << 20)))]
    pub inline_max: u64,
    /// Seconds between garbage collection passes.
    #[arg(long, default_value_t = 60)]
    pub gc_interval: u64,
    /// Seconds deleted data is kept before it is collected.
    #[arg(long, default_value_t = 7200)]
    pub gc_min_wait: u64,
    /// Seconds an upload may go without completing before its data is
    /// taken for abandoned.
    #[arg(long, default_value_t = 86400)]
    pub pending_max_age: u64,
    /// The region buckets are in.
    #[arg(long, default_value = "default")]
    pub region: String,
    /// Domain for virtual-hosted buckets (BUCKET.DOMAIN); path-style
    /// requests are always served.
    #[arg(long)]
    pub domain: Option<String>,
    /// Serve HTTPS with this certificate chain (PEM).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// PGs of each pool the gateway makes (when its pools are missing).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub pool_pg_num: u32,
}

/// `s3 user ...`.
#[derive(Subcommand)]
pub enum UserCmd {
    /// Make a user with a key pair (made unless both halves are given)
    /// and print it. Needs mon 'allow *'.
    Create {
        uid: String,
        #[arg(long)]
        display_name: Option<String>,
        #[arg(long, requires = "secret_key")]
        access_key: Option<String>,
        #[arg(long, requires = "access_key")]
        secret_key: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Remove a user and its keys: refused while it owns a bucket (as
    /// radosgw-admin refuses; empty and delete its buckets first).
    Rm {
        uid: String,
        /// The gateways' index pool, where buckets are registered.
        #[arg(long, default_value = "s3.index")]
        index_pool: String,
    },
    /// A user with its keys.
    Info {
        uid: String,
        #[arg(long)]
        json: bool,
    },
    /// Every user id.
    Ls {
        #[arg(long)]
        json: bool,
    },
}

/// `s3 key ...`.
#[derive(Subcommand)]
pub enum KeyCmd {
    /// Give a user another key pair and print the user.
    Create {
        #[arg(long)]
        uid: String,
        #[arg(long, requires = "secret_key")]
        access_key: Option<String>,
        #[arg(long, requires = "access_key")]
        secret_key: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Withdraw a key pair (gateways stop taking it within 10 s).
    Rm {
        #[arg(long)]
        access_key: String,
    },
}

/// Print a user with its keys, as `radosgw-admin user info` does.
fn print_user(v: &Value, json: bool) {
    if json {
        print_json(v);
        return;
    }
    println!("user: {}", v["user"].as_str().unwrap_or("?"));
    println!("display name: {}", v["display_name"].as_str().unwrap_or(""));
    for k in v["keys"].as_array().into_iter().flatten() {
        println!(
            "key: {} {}",
            k["access_key"].as_str().unwrap_or("?"),
            k["secret_key"].as_str().unwrap_or("?")
        );
    }
}

/// Run one `s3` verb.
pub fn s3(conn: &ConnArgs, c: S3Cmd) -> Result<(), CliError> {
    match c {
        S3Cmd::Run(a) => run(conn, a),
        S3Cmd::User(UserCmd::Create {
            uid,
            display_name,
            access_key,
            secret_key,
            json,
        }) => {
            let admin = Admin::S3UserCreate {
                uid,
                display_name,
                access_key,
                secret_key,
            };
            print_user(&call(conn, MonRequest::Admin(admin))?.value, json);
            Ok(())
        }
        S3Cmd::User(UserCmd::Rm { uid, index_pool }) => {
            let owned = buckets_of(conn, &uid, &index_pool)?;
            if !owned.is_empty() {
                return Err(CliError(format!(
                    "user {uid} owns {} bucket(s) ({}): empty and delete them first",
                    owned.len(),
                    owned.join(", ")
                )));
            }
            call(
                conn,
                MonRequest::Admin(Admin::S3UserRm { uid: uid.clone() }),
            )?;
            println!("removed user {uid}");
            Ok(())
        }
        S3Cmd::User(UserCmd::Info { uid, json }) => {
            print_user(
                &call(conn, MonRequest::Admin(Admin::S3UserInfo { uid }))?.value,
                json,
            );
            Ok(())
        }
        S3Cmd::User(UserCmd::Ls { json }) => {
            let v = call(conn, MonRequest::Admin(Admin::S3UserLs))?.value;
            match json {
                true => print_json(&v),
                false => v.as_array().into_iter().flatten().for_each(|u| {
                    println!("{}", u.as_str().unwrap_or("?"));
                }),
            }
            Ok(())
        }
        S3Cmd::Key(KeyCmd::Create {
            uid,
            access_key,
            secret_key,
            json,
        }) => {
            let admin = Admin::S3KeyCreate {
                uid,
                access_key,
                secret_key,
            };
            print_user(&call(conn, MonRequest::Admin(admin))?.value, json);
            Ok(())
        }
        S3Cmd::Key(KeyCmd::Rm { access_key }) => {
            let admin = Admin::S3KeyRm {
                access_key: access_key.clone(),
            };
            call(conn, MonRequest::Admin(admin))?;
            println!("removed key {access_key}");
            Ok(())
        }
    }
}

/// Make `name` a replicated pool if it does not exist.
async fn ensure_pool(
    cluster: &loligo_client::Cluster,
    name: &str,
    pg_num: u32,
) -> Result<(), CliError> {
    if cluster.map().pool_by_name(name).is_some() {
        return Ok(());
    }
    // Three copies, or one per OSD in a smaller cluster.
    let size = (cluster.map().osds.len() as u32).clamp(1, 3);
    let req = MonRequest::Admin(Admin::PoolCreate {
        name: name.to_string(),
        pg_num,
        size,
        min_size: None,
        erasure_profile: None,
    });
    match cluster.mon(req).await {
        Ok(r) => {
            cluster.wait_for_epoch(r.epoch).await;
            eprintln!("made pool {name} (replicated, size {size}, {pg_num} PGs)");
            Ok(())
        }
        Err(e) if cluster.map().pool_by_name(name).is_some() => {
            tracing::debug!("pool {name}: {e} (another gateway made it)");
            Ok(())
        }
        Err(e) => Err(CliError(format!(
            "pool {name} is missing and could not be made: {e}"
        ))),
    }
}

/// The buckets user `uid` owns (none where there is no index pool).
fn buckets_of(conn: &ConnArgs, uid: &str, index_pool: &str) -> Result<Vec<String>, CliError> {
    let cfg = conn.config()?;
    let sec = cfg.security()?;
    let rt = crate::config::runtime()?;
    rt.block_on(async move {
        let cluster = loligo_client::Cluster::connect_secured(
            cfg.mon_addrs.clone(),
            Duration::from_secs(30),
            sec,
        )
        .await
        .map_err(|e| cfg.explain(e))?;
        if cluster.map().pool_by_name(index_pool).is_none() {
            return Ok(Vec::new());
        }
        let io = cluster
            .pool(index_pool)
            .map_err(|e| CliError(e.to_string()))?;
        let all = (loligo_s3::bucket::list(&io).await)
            .map_err(|e| CliError(format!("the bucket registry: {e}")))?;
        Ok(all
            .into_iter()
            .filter(|b| b.owner == uid)
            .map(|b| b.name)
            .collect())
    })
}

/// `s3 run`: serve until interrupted.
fn run(conn: &ConnArgs, a: RunArgs) -> Result<(), CliError> {
    let cfg = conn.config()?;
    let sec = cfg.security()?;
    let rt = crate::config::runtime()?;
    rt.block_on(async move {
        let cluster = loligo_client::Cluster::connect_secured(
            cfg.mon_addrs.clone(),
            Duration::from_secs(30),
            sec,
        )
        .await
        .map_err(|e| cfg.explain(e))?;
        ensure_pool(&cluster, &a.index_pool, a.pool_pg_num).await?;
        ensure_pool(&cluster, &a.data_pool, a.pool_pg_num).await?;
        let gcfg = loligo_s3::Config {
            index_pool: a.index_pool,
            data_pool: a.data_pool,
            shards: a.shards,
            inline_max: a.inline_max,
            gc_interval: Duration::from_secs(a.gc_interval.max(1)),
            gc_min_wait: Duration::from_secs(a.gc_min_wait),
            pending_max_age: Duration::from_secs(a.pending_max_age),
            region: a.region,
        };
        let gw = loligo_s3::Gateway::new(cluster, gcfg).map_err(CliError::from)?;
        let listener = tokio::net::TcpListener::bind(&a.listen)
            .await
            .map_err(|e| CliError(format!("cannot listen on {}: {e}", a.listen)))?;
        let tls = match (&a.tls_cert, &a.tls_key) {
            (Some(c), Some(k)) => Some(loligo_s3::serve::tls_config(c, k)?),
            _ => None,
        };
        let addr = listener.local_addr()?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        println!("s3 gateway serving on {scheme}://{addr}");
        tokio::spawn(gw.clone().run_collector());
        let serve = loligo_s3::serve::serve(gw, listener, a.domain, tls);
        tokio::select! {
            r = serve => r.map_err(|e| CliError(format!("s3 gateway: {e}"))),
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    })
}
