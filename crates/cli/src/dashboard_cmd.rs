//! `loligo dashboard create-token | ls-tokens | revoke-tokens`: the
//! access tokens that let a browser read the monitors' dashboard as a
//! user with mon `allow r`. The leader makes, lists and revokes them;
//! this only asks and prints. A token is printed once, never stored.

use crate::admin_cmd::{call, print_json, utc_stamp};
use crate::config::ConnArgs;
use crate::CliError;
use clap::Subcommand;
use loligo_monc::protocol::{Admin, MonRequest};
use serde_json::Value;

/// The dashboard's access tokens.
#[derive(Subcommand)]
pub enum DashboardCmd {
    /// Make a token for USER (a client with mon 'allow r'; reading is
    /// all the dashboard does) and print it with the dashboard's URL.
    /// Rotating the user's key, removing it or taking its mon read
    /// right revokes its tokens. Needs mon 'allow *'.
    CreateToken {
        #[arg(long, default_value = "client.admin")]
        user: String,
        /// How long it lasts: seconds, or a number with s, m, h or d
        /// (60 s to 366 d).
        #[arg(long, default_value = "8h", value_parser = parse_ttl)]
        ttl: u64,
        #[arg(long)]
        json: bool,
    },
    /// The tokens in force: an id, user, when made and when they expire
    /// (never the tokens themselves).
    LsTokens {
        #[arg(long)]
        json: bool,
    },
    /// Revoke the tokens of one user, or every token.
    RevokeTokens {
        #[arg(long, conflicts_with = "all", required_unless_present = "all")]
        user: Option<String>,
        #[arg(long)]
        all: bool,
    },
}

/// A lifetime: seconds, or a number with `s`, `m`, `h` or `d`.
pub fn parse_ttl(s: &str) -> Result<u64, String> {
    let (num, unit) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&s[..i], c),
        _ => (s, 's'),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}': a whole number with s, m, h or d (8h, 30d)"))?;
    let mul = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86400,
        _ => return Err(format!("'{s}': the unit is s, m, h or d")),
    };
    n.checked_mul(mul).ok_or_else(|| format!("'{s}': too long"))
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SS UTC`.
fn stamp(v: &Value) -> String {
    let ms = v.as_u64().unwrap_or(0).saturating_mul(1000);
    let full = utc_stamp(ms);
    let secs = full.split('.').next().unwrap_or(&full);
    format!("{secs} UTC")
}

/// Run one `dashboard` verb.
pub fn dashboard(conn: &ConnArgs, c: DashboardCmd) -> Result<(), CliError> {
    match c {
        DashboardCmd::CreateToken { user, ttl, json } => {
            let admin = Admin::DashboardCreateToken {
                user,
                ttl_secs: ttl,
            };
            let v = call(conn, MonRequest::Admin(admin))?.value;
            if json {
                print_json(&v);
                return Ok(());
            }
            println!(
                "dashboard token for {}, valid until {}:",
                v["user"].as_str().unwrap_or("?"),
                stamp(&v["expires"])
            );
            println!("{}", v["token"].as_str().unwrap_or("?"));
            match v["url"].as_str() {
                Some(url) => println!("open {url}"),
                None => println!("(the leading monitor serves no dashboard: see its --http-addr)"),
            }
        }
        DashboardCmd::LsTokens { json } => {
            let v = call(conn, MonRequest::Admin(Admin::DashboardLsTokens))?.value;
            if json {
                print_json(&v);
                return Ok(());
            }
            println!("{:<10} {:<24} {:<24} EXPIRES", "ID", "USER", "CREATED");
            for t in v.as_array().into_iter().flatten() {
                println!(
                    "{:<10} {:<24} {:<24} {}",
                    t["id"].as_str().unwrap_or("?"),
                    t["user"].as_str().unwrap_or("?"),
                    stamp(&t["created"]),
                    stamp(&t["expires"])
                );
            }
        }
        DashboardCmd::RevokeTokens { user, all: _ } => {
            let admin = Admin::DashboardRevokeTokens { user };
            let v = call(conn, MonRequest::Admin(admin))?.value;
            println!("revoked {} token(s)", v["revoked"]);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_read_with_or_without_a_unit() {
        assert_eq!(parse_ttl("90"), Ok(90));
        assert_eq!(parse_ttl("8h"), Ok(8 * 3600));
        assert_eq!(parse_ttl("2d"), Ok(2 * 86400));
        assert_eq!(parse_ttl("5m"), Ok(300));
        assert!(parse_ttl("8x").is_err());
        assert!(parse_ttl("h").is_err());
        assert!(parse_ttl("").is_err());
        assert!(parse_ttl("99999999999999999999d").is_err());
    }
}
