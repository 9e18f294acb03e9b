//! Mutual TLS for Loligo's connections: a cluster certificate authority,
//! one certificate per entity (`mon.N`, `osd.N`, `client.NAME`) that
//! names it, and the TLS configurations and the acceptor built from them.
//!
//! Every certificate the authority issues carries the entity's name as
//! its subject's common name. A daemon's (`mon.N`, `osd.N`) also carries
//! DNS names that say which server it is ([`Expect::server_name`]:
//! `osd.3.loligo`; a monitor's also `mon.loligo`, the name of "any
//! monitor") and which key of that server (`k<serial>.osd.3.loligo`),
//! and the server-auth usage; a client's carries none of them, so it
//! cannot serve. Peers are dialled by address, and whoever dials says
//! whom it expects ([`Expect`]): the handshake fails unless the server's
//! certificate names that daemon, and, once the map records which key
//! the daemon holds, that key; so a key of this cluster cannot pose as
//! another entity, nor a daemon's old key as the daemon. (Which serial
//! of an entity is current, and what each entity may do, is decided
//! above this module.) An entity's [`Keyring`] file holds the
//! authority's certificate, its own certificate and its private key.
//!
//! This module must never accept a peer whose certificate the cluster's
//! authority did not sign, nor a server whose certificate does not name
//! the daemon its dialler expects, nor report an entity name that did not
//! come from such a certificate. It knows nothing of what an entity may do.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The DNS suffix of every server name of a cluster (and, alone, a name
/// daemons' certificates also carry, so that diallers of older releases,
/// which ask for it, reach daemons whose keyrings were issued anew).
pub const SERVER_NAME: &str = "loligo";
/// The server name every monitor's certificate carries besides its own.
pub const ANY_MONITOR_NAME: &str = "mon.loligo";
/// Longest entity name.
pub const ENTITY_MAX: usize = 64;
/// How long a certificate the authority issues is valid (years).
const VALID_YEARS: i32 = 20;
/// Most encrypted bytes a TLS stream queues before it writes them to the
/// socket (rustls's default is 64 KiB: 64 `writev` calls per 4 MiB
/// payload; with this, 4, each of up to 64 records).
pub const TLS_SEND_BYTES_MAX: usize = 1 << 20;

/// Why keys or TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("invalid entity name '{0}': want mon.N, osd.N or client.NAME (letters, digits, '_', '-', '.'; at most 64 bytes)")]
    Entity(String),
    #[error("{0}")]
    Key(String),
    #[error("keyring {path}: {why}")]
    Keyring { path: String, why: String },
}

fn key_err(what: &str, e: impl std::fmt::Display) -> TlsError {
    TlsError::Key(format!("{what}: {e}"))
}

/// Whether `name` is an entity name: `mon.N` or `osd.N` (N a number
/// without leading zeros), or `client.NAME`.
pub fn valid_entity(name: &str) -> bool {
    if name.len() > ENTITY_MAX {
        return false;
    }
    let Some((kind, id)) = name.split_once('.') else {
        return false;
    };
    let number = |s: &str| {
        !s.is_empty()
            && s.len() <= 10
            && s.bytes().all(|b| b.is_ascii_digit())
            && (s == "0" || !s.starts_with('0'))
            && s.parse::<u32>().is_ok_and(|n| n <= i32::MAX as u32)
    };
    match kind {
        "mon" | "osd" => number(id),
        "client" => {
            !id.is_empty()
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        }
        _ => false,
    }
}

/// The OSD id an entity name is for (`osd.N`), if it is an OSD's.
pub fn osd_of(entity: &str) -> Option<i32> {
    entity.strip_prefix("osd.")?.parse().ok()
}

/// The monitor id an entity name is for (`mon.N`), if it is a monitor's.
pub fn mon_of(entity: &str) -> Option<u64> {
    entity.strip_prefix("mon.")?.parse().ok()
}

/// Whom a dialler means to reach: the handshake fails unless the server's
/// certificate carries this name (and the server-auth usage, which only
/// daemons' certificates have).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expect {
    /// Any monitor of the cluster: a first contact to an address from a
    /// configuration, before the dialler knows which monitor is there.
    AnyMonitor,
    /// This daemon (`mon.N` or `osd.N`), where the map puts it, with any
    /// key the authority issued it (the map records none yet).
    Daemon(String),
    /// This daemon with this key only (its certificate's serial, as the
    /// map records it): a key rotated away or revoked does not pass.
    Key {
        /// `mon.N` or `osd.N`.
        entity: String,
        /// Lower-case hex, as [`Identity::serial`].
        serial: String,
    },
}

impl Expect {
    /// OSD `id`, with any of its keys.
    pub fn osd(id: i32) -> Expect {
        Expect::Daemon(format!("osd.{id}"))
    }

    /// Daemon `entity` with the key of serial `serial` if the map records
    /// one, else with any of its keys.
    pub fn daemon(entity: &str, serial: Option<&str>) -> Expect {
        match serial {
            Some(s) => Expect::Key {
                entity: entity.to_string(),
                serial: s.to_string(),
            },
            None => Expect::Daemon(entity.to_string()),
        }
    }

    /// The DNS name the server's certificate must carry.
    pub fn server_name(&self) -> String {
        match self {
            Expect::AnyMonitor => ANY_MONITOR_NAME.to_string(),
            Expect::Daemon(e) => daemon_server_name(e),
            Expect::Key { entity, serial } => key_server_name(entity, serial),
        }
    }
}

/// The server name of daemon `entity` (`osd.3` -> `osd.3.loligo`).
fn daemon_server_name(entity: &str) -> String {
    format!("{entity}.{SERVER_NAME}")
}

/// The server name of daemon `entity`'s key of serial `serial`
/// (`k4f09...e1.osd.3.loligo`): one DNS label of at most 41 bytes, as
/// the authority's serials are at most 20 bytes. A serial that is not
/// one of those (a map may carry any hex of up to 64 digits) makes a name
/// no certificate carries, or none at all: the dial fails.
fn key_server_name(entity: &str, serial: &str) -> String {
    format!("k{serial}.{entity}.{SERVER_NAME}")
}

/// Whether `entity` is a daemon's (a monitor's or an OSD's): only those
/// serve.
pub fn is_daemon(entity: &str) -> bool {
    osd_of(entity).is_some() || mon_of(entity).is_some()
}

/// The DNS names a certificate of serial `serial` for `entity` carries:
/// none for a client.
fn server_names(entity: &str, serial: &str) -> Vec<String> {
    let mut names = Vec::new();
    if is_daemon(entity) {
        names.push(key_server_name(entity, serial));
        names.push(daemon_server_name(entity));
        if mon_of(entity).is_some() {
            names.push(ANY_MONITOR_NAME.to_string());
        }
        names.push(SERVER_NAME.to_string());
    }
    names
}

/// Who a certificate says its holder is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The entity its subject's common name names.
    pub entity: String,
    /// Its serial number (lower-case hex): which of the entity's keys it
    /// is. The monitors record a client's one valid serial, so a key
    /// rotated away or removed is refused.
    pub serial: String,
}

/// The identity a certificate (DER) gives: its subject's common name, if
/// that is a valid entity name, and its serial. (Whether the cluster's
/// authority signed it is the TLS handshake's business, before this is
/// asked.)
pub fn identity_of_cert(der: &[u8]) -> Option<Identity> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?;
    valid_entity(cn).then(|| Identity {
        entity: cn.to_string(),
        serial: hex(cert.raw_serial()),
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A cluster's certificate authority: signs every entity's certificate.
/// Its key stays with whoever makes keyrings (`loligo up`, later the
/// monitors); entities hold only its certificate.
pub struct Authority {
    cert_pem: String,
    key_pem: String,
}

impl Authority {
    /// A new authority for cluster `fsid` (a fresh ECDSA P-256 key).
    pub fn generate(fsid: &str) -> Result<Authority, TlsError> {
        let key = KeyPair::generate().map_err(|e| key_err("generating a key", e))?;
        let mut p = CertificateParams::new(Vec::<String>::new())
            .map_err(|e| key_err("authority parameters", e))?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, format!("loligo cluster {fsid}"));
        p.distinguished_name = dn;
        p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        valid_from_now(&mut p);
        let cert = p
            .self_signed(&key)
            .map_err(|e| key_err("signing the authority", e))?;
        Ok(Authority {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// An authority from its certificate and key (PEM), checked to parse
    /// and to belong together.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Authority, TlsError> {
        let a = Authority {
            cert_pem: cert_pem.to_string(),
            key_pem: key_pem.to_string(),
        };
        // Issuing proves both parse; a key that is not the certificate's
        // makes certificates no peer accepts, so that is checked too.
        let k = a.issue("client.check")?;
        k.client_config()?;
        verify_chain(&k)?;
        Ok(a)
    }

    /// The authority kept in folder `dir` (`ca.pem`, `ca.key`), checked
    /// as [`Authority::from_pem`].
    pub fn load(dir: &Path) -> Result<Authority, TlsError> {
        let read = |name: &str| {
            let p = dir.join(name);
            std::fs::read_to_string(&p).map_err(|e| TlsError::Key(format!("{}: {e}", p.display())))
        };
        Authority::from_pem(&read(CA_CERT)?, &read(CA_KEY)?)
            .map_err(|e| TlsError::Key(format!("{}: {e}", dir.display())))
    }

    /// Keep the authority in folder `dir` (created): `ca.pem`, and
    /// `ca.key` readable by its owner only. Refused if either is there:
    /// an authority is never replaced (a lost key locks out every new
    /// entity).
    pub fn save(&self, dir: &Path) -> Result<(), TlsError> {
        let io = |p: &Path, e: std::io::Error| TlsError::Key(format!("{}: {e}", p.display()));
        let (cert, key) = (dir.join(CA_CERT), dir.join(CA_KEY));
        if cert.exists() || key.exists() {
            return Err(TlsError::Key(format!(
                "{} already holds an authority ({CA_CERT} or {CA_KEY}): not replaced",
                dir.display()
            )));
        }
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        write_private(&key, &self.key_pem).map_err(|e| io(&key, e))?;
        write_private(&cert, &self.cert_pem).map_err(|e| io(&cert, e))
    }

    /// Whether folder `dir` holds an authority's files.
    pub fn exists_in(dir: &Path) -> bool {
        dir.join(CA_CERT).exists() && dir.join(CA_KEY).exists()
    }

    /// The authority's certificate (PEM).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The authority's private key (PEM): whoever holds it can make any
    /// entity's keyring.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// A keyring for `entity`: a new key and a certificate naming it.
    pub fn issue(&self, entity: &str) -> Result<Keyring, TlsError> {
        if !valid_entity(entity) {
            return Err(TlsError::Entity(entity.to_string()));
        }
        let ca_key =
            KeyPair::from_pem(&self.key_pem).map_err(|e| key_err("the authority's key", e))?;
        let issuer = Issuer::from_ca_cert_pem(&self.cert_pem, ca_key)
            .map_err(|e| key_err("the authority's certificate", e))?;
        let key = KeyPair::generate().map_err(|e| key_err("generating a key", e))?;
        // A serial per key (RFC 5280: positive, at most 20 bytes), from
        // the fresh public key: two keyrings never share one.
        let mut serial = xxhash_rust::xxh3::xxh3_128(key.public_key_raw()).to_be_bytes();
        serial[0] = (serial[0] & 0x7f) | 0x40;
        let mut p = CertificateParams::new(server_names(entity, &hex(&serial)))
            .map_err(|e| key_err("certificate parameters", e))?;
        p.serial_number = Some(rcgen::SerialNumber::from_slice(&serial));
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, entity);
        p.distinguished_name = dn;
        p.is_ca = IsCa::ExplicitNoCa;
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        // Daemons dial each other, so they are clients too; a client never
        // serves.
        p.extended_key_usages = if is_daemon(entity) {
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ]
        } else {
            vec![ExtendedKeyUsagePurpose::ClientAuth]
        };
        valid_from_now(&mut p);
        let cert = p
            .signed_by(&key, &issuer)
            .map_err(|e| key_err("signing the certificate", e))?;
        Ok(Keyring {
            entity: entity.to_string(),
            ca: self.cert_pem.clone(),
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}

/// Files of an authority kept in a folder.
const CA_CERT: &str = "ca.pem";
const CA_KEY: &str = "ca.key";

/// Write `text` to `path` readable by its owner only, whole or not at all:
/// a synced temporary file renamed over it. The temporary file is created
/// anew (`O_EXCL`, never through a link) under a random name, so nothing
/// another user placed beside `path` ever receives the key.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let rng = ring::rand::SystemRandom::new();
    let mut tries = 0;
    let (tmp, mut f) = loop {
        let mut r = [0u8; 8];
        ring::rand::SecureRandom::fill(&rng, &mut r)
            .map_err(|_| std::io::Error::other("no random bytes for a temporary name"))?;
        let tmp = path.with_file_name(format!(".{name}.{}.tmp", hex(&r)));
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create_new(true);
        #[cfg(unix)]
        o.mode(0o600).custom_flags(libc::O_NOFOLLOW);
        match o.open(&tmp) {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 8 => tries += 1,
            Err(e) => return Err(e),
        }
    };
    let written = f
        .write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A certificate valid from a day ago (clocks of a cluster's machines
/// differ a little) for [`VALID_YEARS`].
fn valid_from_now(p: &mut CertificateParams) {
    let now = time::OffsetDateTime::now_utc();
    p.not_before = now - time::Duration::days(1);
    p.not_after = rcgen::date_time_ymd(now.year() + VALID_YEARS, 1, 1);
}

/// One entity's credentials: the cluster authority's certificate, the
/// entity's certificate and its private key (PEM), kept as a TOML file
/// readable by its owner only.
#[derive(Clone, Serialize, Deserialize)]
pub struct Keyring {
    /// The entity the certificate names.
    pub entity: String,
    /// The cluster authority's certificate.
    pub ca: String,
    /// This entity's certificate.
    pub cert: String,
    /// This entity's private key.
    pub key: String,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        write!(f, "Authority")
    }
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        write!(f, "Keyring({})", self.entity)
    }
}

impl Keyring {
    /// A keyring file, checked: its certificates and key parse, and the
    /// certificate names the entity the file says.
    pub fn load(path: &Path) -> Result<Keyring, TlsError> {
        let bad = |why: String| TlsError::Keyring {
            path: path.display().to_string(),
            why,
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        Keyring::from_text(&text).map_err(|e| match e {
            TlsError::Keyring { why, .. } => bad(why),
            e => bad(e.to_string()),
        })
    }

    /// A keyring from the text of its file, checked as [`Keyring::load`].
    pub fn from_text(text: &str) -> Result<Keyring, TlsError> {
        let bad = |why: String| TlsError::Keyring {
            path: "keyring".into(),
            why,
        };
        let k: Keyring = toml::from_str(text).map_err(|e| bad(format!("not a keyring: {e}")))?;
        let der = CertificateDer::from_pem_slice(k.cert.as_bytes())
            .map_err(|e| bad(format!("its certificate: {e}")))?;
        match identity_of_cert(&der) {
            Some(i) if i.entity == k.entity => {}
            other => {
                return Err(bad(format!(
                    "its certificate names {}, the file says {}",
                    other.map_or_else(|| "no entity".into(), |i| i.entity),
                    k.entity
                )))
            }
        }
        k.client_config().map_err(|e| bad(e.to_string()))?;
        Ok(k)
    }

    /// Its certificate's identity (entity and serial).
    pub fn identity(&self) -> Result<Identity, TlsError> {
        let der = CertificateDer::from_pem_slice(self.cert.as_bytes())
            .map_err(|e| key_err("the certificate", e))?;
        identity_of_cert(&der).ok_or_else(|| TlsError::Entity(self.entity.clone()))
    }

    /// Whether its certificate names its daemon as a server, and the key
    /// by its serial (daemons' keyrings issued before servers had to
    /// prove which daemon, and which key of it, they are do not: no
    /// dialler reaches them once the map records their keys). Always
    /// false for a client's.
    pub fn serves_as_itself(&self) -> bool {
        let Ok(der) = CertificateDer::from_pem_slice(self.cert.as_bytes()) else {
            return false;
        };
        let Ok((_, cert)) = x509_parser::parse_x509_certificate(&der) else {
            return false;
        };
        let want = [
            daemon_server_name(&self.entity),
            key_server_name(&self.entity, &hex(cert.raw_serial())),
        ];
        let names: Vec<&str> = cert
            .subject_alternative_name()
            .ok()
            .flatten()
            .map(|san| {
                san.value
                    .general_names
                    .iter()
                    .filter_map(|n| match n {
                        x509_parser::extensions::GeneralName::DNSName(d) => Some(*d),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let serves = cert
            .extended_key_usage()
            .ok()
            .flatten()
            .is_some_and(|e| e.value.server_auth);
        is_daemon(&self.entity) && want.iter().all(|w| names.contains(&w.as_str())) && serves
    }

    /// The keyring as the text of its file (TOML).
    pub fn to_text(&self) -> Result<String, TlsError> {
        toml::to_string(self).map_err(|e| TlsError::Key(e.to_string()))
    }

    /// Write the keyring to `path` (created readable by its owner only;
    /// an existing file is replaced).
    pub fn save(&self, path: &Path) -> Result<(), TlsError> {
        let bad = |why: String| TlsError::Keyring {
            path: path.display().to_string(),
            why,
        };
        let text = toml::to_string(self).map_err(|e| bad(e.to_string()))?;
        write_private(path, &text).map_err(|e| bad(e.to_string()))
    }

    fn roots(&self) -> Result<rustls::RootCertStore, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        let ca = CertificateDer::from_pem_slice(self.ca.as_bytes())
            .map_err(|e| key_err("the authority's certificate", e))?;
        roots
            .add(ca)
            .map_err(|e| key_err("the authority's certificate", e))?;
        Ok(roots)
    }

    fn chain(&self) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
        let cert = CertificateDer::from_pem_slice(self.cert.as_bytes())
            .map_err(|e| key_err("the certificate", e))?;
        let key = PrivateKeyDer::from_pem_slice(self.key.as_bytes())
            .map_err(|e| key_err("the private key", e))?;
        Ok((vec![cert], key))
    }

    /// The crypto provider of the cluster's configurations: ring's, with
    /// TLS 1.3's AES-128-GCM first (the suite RFC 8446 requires of every
    /// implementation; the record layer seals it about a fifth faster
    /// than AES-256-GCM). The other suites are still offered.
    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        let mut p = rustls::crypto::ring::default_provider();
        p.cipher_suites
            .sort_by_key(|s| s.suite() != rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
        Arc::new(p)
    }

    /// A server's TLS configuration: this entity's certificate, and only
    /// clients with a certificate the cluster's authority signed.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let provider = Keyring::provider();
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(self.roots()?),
            provider.clone(),
        )
        .build()
        .map_err(|e| key_err("client verifier", e))?;
        let (certs, key) = self.chain()?;
        let mut c = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| key_err("TLS versions", e))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)
            .map_err(|e| key_err("this entity's certificate and key", e))?;
        c.alpn_protocols = vec![b"h2".to_vec(), crate::net::DIRECT_ALPN.to_vec()];
        // The direct path takes the record layer over after the handshake
        // (`record`): rustls hands over its secrets, and sends nothing
        // after the handshake that the record layer would have to parse.
        c.enable_secret_extraction = true;
        c.send_tls13_tickets = 0;
        Ok(Arc::new(c))
    }

    /// A web server's TLS configuration (a monitor's dashboard and
    /// metrics beyond loopback): this entity's certificate, any client
    /// (browsers carry no cluster certificate; the page asks for a
    /// token), HTTP/1.1.
    pub fn web_server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (certs, key) = self.chain()?;
        let mut c = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| key_err("TLS versions", e))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| key_err("this entity's certificate and key", e))?;
        c.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(c))
    }

    /// A client's TLS configuration: this entity's certificate, and only
    /// servers with a certificate the cluster's authority signed.
    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, TlsError> {
        let provider = Keyring::provider();
        let (certs, key) = self.chain()?;
        let mut c = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| key_err("TLS versions", e))?
            .with_root_certificates(self.roots()?)
            .with_client_auth_cert(certs, key)
            .map_err(|e| key_err("this entity's certificate and key", e))?;
        c.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(c))
    }
}

/// Checks that `k`'s certificate chains to its authority (the way a peer
/// will check it).
fn verify_chain(k: &Keyring) -> Result<(), TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(k.roots()?), provider)
            .build()
            .map_err(|e| key_err("client verifier", e))?;
    let (certs, _) = k.chain()?;
    let now = rustls::pki_types::UnixTime::now();
    verifier
        .verify_client_cert(&certs[0], &[], now)
        .map(|_| ())
        .map_err(|e| key_err("the authority's key does not match its certificate", e))
}

/// The server side of the handshake: accepts a connection only from a
/// peer with a certificate of this cluster, and says who it is.
#[derive(Clone)]
pub struct Acceptor {
    inner: tokio_rustls::TlsAcceptor,
}

impl Acceptor {
    /// An acceptor presenting `k`'s certificate.
    pub fn new(k: &Keyring) -> Result<Acceptor, TlsError> {
        Ok(Acceptor {
            inner: tokio_rustls::TlsAcceptor::from(k.server_config()?),
        })
    }

    /// The handshake on `io`: the encrypted stream and the peer's identity.
    /// Fails for a peer without a certificate, with one another authority
    /// signed, with one that names no entity, or that does not speak TLS.
    pub async fn accept<IO>(
        &self,
        io: IO,
    ) -> std::io::Result<(tokio_rustls::server::TlsStream<IO>, Identity)>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let mut s = self.inner.accept(io).await?;
        s.get_mut().1.set_buffer_limit(Some(TLS_SEND_BYTES_MAX));
        let entity = s
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .and_then(|c| identity_of_cert(c));
        match entity {
            Some(e) => Ok((s, e)),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "the peer's certificate names no entity",
            )),
        }
    }
}

/// The client side of the handshake with a server of this cluster.
#[derive(Clone)]
pub struct Connector {
    inner: tokio_rustls::TlsConnector,
}

impl Connector {
    /// A connector presenting `k`'s certificate.
    pub fn new(k: &Keyring) -> Result<Connector, TlsError> {
        Ok(Connector {
            inner: tokio_rustls::TlsConnector::from(k.client_config()?),
        })
    }

    /// A connector with this configuration (one of [`Keyring::client_config`]
    /// with other ALPN protocols).
    pub fn from_config(c: rustls::ClientConfig) -> Connector {
        Connector {
            inner: tokio_rustls::TlsConnector::from(Arc::new(c)),
        }
    }

    /// The handshake on `io` with the server `expect` names: fails unless
    /// the server's certificate is the cluster's and names it.
    pub async fn connect<IO>(
        &self,
        io: IO,
        expect: &Expect,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<IO>>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let name = rustls::pki_types::ServerName::try_from(expect.server_name())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let mut s = self.inner.connect(name, io).await?;
        s.get_mut().1.set_buffer_limit(Some(TLS_SEND_BYTES_MAX));
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn entity_names() {
        for ok in ["mon.0", "osd.12", "client.admin", "client.backup-1.x_y"] {
            assert!(valid_entity(ok), "{ok}");
        }
        for bad in [
            "",
            "osd",
            "osd.",
            "osd.-1",
            "osd.01",
            "osd.99999999999",
            "osd.3000000000",
            "mon.a",
            "client.",
            "client.a b",
            "client.ü",
            "admin",
            "mgr.x",
        ] {
            assert!(!valid_entity(bad), "{bad}");
        }
        assert!(!valid_entity(&format!("client.{}", "a".repeat(60))));
        assert_eq!(osd_of("osd.12"), Some(12));
        assert_eq!(mon_of("mon.2"), Some(2));
        for other in ["client.admin", "mon.1", "osd.x"] {
            assert_eq!(osd_of(other), None, "{other}");
        }
        assert_eq!(mon_of("osd.1"), None);
    }

    #[test]
    fn issued_keyrings_name_their_entity_and_survive_a_file() {
        let ca = Authority::generate("test").unwrap();
        let dir = loligo_testkit::TempDir::new("tls").unwrap();
        let k = ca.issue("osd.3").unwrap();
        let der = CertificateDer::from_pem_slice(k.cert.as_bytes()).unwrap();
        let id = identity_of_cert(&der).unwrap();
        assert_eq!(id.entity, "osd.3");
        assert_eq!(k.identity().unwrap(), id);
        // Every key its own serial.
        let k2 = ca.issue("osd.3").unwrap();
        assert_ne!(k2.identity().unwrap().serial, id.serial);
        assert!(!id.serial.is_empty() && id.serial.len() <= 40);
        let path = dir.path().join("osd.3.keyring");
        k.save(&path).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "a keyring is its owner's only");
        }
        let back = Keyring::load(&path).unwrap();
        assert_eq!(back.entity, "osd.3");
        assert_eq!(back.cert, k.cert);
        assert!(!format!("{back:?}").contains("PRIVATE"));
        // The authority comes back from its PEM, or its folder, and issues
        // again; it is never saved over.
        let again = Authority::from_pem(ca.cert_pem(), ca.key_pem()).unwrap();
        again.issue("client.x").unwrap();
        let keys = dir.path().join("keys");
        ca.save(&keys).unwrap();
        assert!(Authority::exists_in(&keys));
        assert!(again.save(&keys).is_err());
        assert_eq!(Authority::load(&keys).unwrap().cert_pem(), ca.cert_pem());
        assert!(matches!(ca.issue("osd.x"), Err(TlsError::Entity(_))));
    }

    #[test]
    fn bad_keyrings_and_authorities_are_refused_with_a_reason() {
        let dir = loligo_testkit::TempDir::new("tls").unwrap();
        let ca = Authority::generate("test").unwrap();
        let other = Authority::generate("other").unwrap();
        let k = ca.issue("client.a").unwrap();
        let path = dir.path().join("k");
        let cases: Vec<(String, &str)> = vec![
            ("garbage \u{0} = [".into(), "not a keyring"),
            (
                toml::to_string(&Keyring {
                    entity: "client.b".into(),
                    ..k.clone()
                })
                .unwrap(),
                "names client.a, the file says client.b",
            ),
            (
                toml::to_string(&Keyring {
                    cert: "not a certificate".into(),
                    ..k.clone()
                })
                .unwrap(),
                "its certificate",
            ),
            (
                toml::to_string(&Keyring {
                    key: other.issue("client.a").unwrap().key,
                    ..k.clone()
                })
                .unwrap(),
                "certificate and key",
            ),
        ];
        for (text, why) in cases {
            std::fs::write(&path, text).unwrap();
            let e = Keyring::load(&path).unwrap_err().to_string();
            assert!(e.contains(why), "{e} (wanted: {why})");
        }
        assert!(Keyring::load(&dir.path().join("absent")).is_err());
        // An authority's certificate with another's key.
        assert!(Authority::from_pem(ca.cert_pem(), other.key_pem()).is_err());
        assert!(Authority::from_pem("x", ca.key_pem()).is_err());
    }

    /// A server on a loopback port: answers each accepted peer's entity
    /// name, or counts a refused handshake.
    async fn server(k: &Keyring) -> (String, tokio::sync::mpsc::Receiver<Result<String, String>>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let acc = Acceptor::new(k).unwrap();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            while let Ok((tcp, _)) = l.accept().await {
                let acc = acc.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match acc.accept(tcp).await {
                        Ok((mut s, who)) => {
                            let mut b = [0u8; 4];
                            if s.read_exact(&mut b).await.is_ok() {
                                let _ = s.write_all(who.entity.as_bytes()).await;
                                let _ = s.shutdown().await;
                            }
                            let _ = tx.send(Ok(who.entity)).await;
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e.to_string())).await;
                        }
                    }
                });
            }
        });
        (addr, rx)
    }

    #[tokio::test]
    async fn only_peers_of_the_cluster_get_through_and_are_named() {
        let ca = Authority::generate("test").unwrap();
        let (addr, mut seen) = server(&ca.issue("osd.0").unwrap()).await;

        // A member: through, named by its certificate.
        let c = Connector::new(&ca.issue("client.admin").unwrap()).unwrap();
        let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let mut s = c.connect(tcp, &Expect::osd(0)).await.unwrap();
        s.write_all(b"ping").await.unwrap();
        let mut who = String::new();
        s.read_to_string(&mut who).await.unwrap();
        assert_eq!(who, "client.admin");
        assert_eq!(seen.recv().await.unwrap(), Ok("client.admin".into()));

        // Another cluster's member: refused, both ways.
        let other = Authority::generate("other").unwrap();
        let c = Connector::new(&other.issue("client.admin").unwrap()).unwrap();
        let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let r = c.connect(tcp, &Expect::osd(0)).await;
        assert!(seen.recv().await.unwrap().is_err());
        if let Ok(mut s) = r {
            // (TLS 1.3: the client may finish before the server refuses.)
            let mut b = Vec::new();
            let _ = s.write_all(b"ping").await;
            assert!(s.read_to_end(&mut b).await.is_err() || b.is_empty());
        }

        // No certificate at all.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).unwrap())
            .unwrap();
        let anon = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let c = tokio_rustls::TlsConnector::from(Arc::new(anon));
        let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from(Expect::osd(0).server_name()).unwrap();
        let r = c.connect(name, tcp).await;
        assert!(seen.recv().await.unwrap().is_err());
        if let Ok(mut s) = r {
            let mut b = Vec::new();
            let _ = s.write_all(b"ping").await;
            assert!(s.read_to_end(&mut b).await.is_err() || b.is_empty());
        }

        // Plain text (an HTTP/2 preface, a direct-path magic).
        for hello in [&b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..], b"LOLIGO\x01\n"] {
            let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
            tcp.write_all(hello).await.unwrap();
            assert!(seen.recv().await.unwrap().is_err());
            let mut b = Vec::new();
            let _ = tcp.read_to_end(&mut b).await;
            assert!(!b.windows(5).any(|w| w == b"osd.0"));
        }

        // A client that expects another cluster refuses this server.
        let c = Connector::new(&other.issue("client.x").unwrap()).unwrap();
        let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        assert!(c.connect(tcp, &Expect::osd(0)).await.is_err());
        let _ = seen.recv().await;
    }

    /// Whether a dialler expecting `expect` gets through to a server
    /// presenting `server`'s certificate.
    async fn reaches(ca: &Authority, server: &str, expect: &Expect) -> bool {
        let (addr, mut seen) = self::server(&ca.issue(server).unwrap()).await;
        let c = Connector::new(&ca.issue("osd.9").unwrap()).unwrap();
        let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let through = c.connect(tcp, expect).await.is_ok();
        // The server's side agrees: no dialler that refused it finished.
        let accepted = seen.recv().await.unwrap().is_ok();
        assert_eq!(through, accepted, "{server} as {expect:?}");
        through
    }

    #[tokio::test]
    async fn a_server_must_be_the_daemon_its_dialler_expects() {
        let ca = Authority::generate("test").unwrap();
        let mon = Expect::AnyMonitor;
        assert!(reaches(&ca, "osd.0", &Expect::osd(0)).await);
        assert!(reaches(&ca, "mon.2", &mon).await);
        assert!(reaches(&ca, "mon.2", &Expect::Daemon("mon.2".into())).await);
        // Another daemon of the cluster, or one of another kind.
        assert!(!reaches(&ca, "osd.1", &Expect::osd(0)).await);
        assert!(!reaches(&ca, "osd.10", &Expect::osd(1)).await);
        assert!(!reaches(&ca, "mon.1", &Expect::Daemon("mon.2".into())).await);
        assert!(!reaches(&ca, "osd.0", &mon).await);
        assert!(!reaches(&ca, "mon.0", &Expect::osd(0)).await);
        // A client's key never serves, whatever it is asked to be.
        for e in [mon, Expect::osd(0), Expect::Daemon("client.admin".into())] {
            assert!(!reaches(&ca, "client.admin", &e).await, "{e:?}");
        }
        assert!(ca.issue("osd.4").unwrap().serves_as_itself());
        assert!(ca.issue("mon.0").unwrap().serves_as_itself());
        assert!(!ca.issue("client.admin").unwrap().serves_as_itself());
    }

    /// Whether a dialler expecting `expect` gets through to a server
    /// presenting keyring `server`.
    async fn reaches_key(ca: &Authority, server: &Keyring, expect: &Expect) -> bool {
        let (addr, mut seen) = self::server(server).await;
        let c = Connector::new(&ca.issue("client.x").unwrap()).unwrap();
        let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let through = c.connect(tcp, expect).await.is_ok();
        assert_eq!(through, seen.recv().await.unwrap().is_ok(), "{expect:?}");
        through
    }

    #[tokio::test]
    async fn a_daemons_old_key_cannot_pose_as_it_once_its_key_is_named() {
        let ca = Authority::generate("test").unwrap();
        for entity in ["osd.3", "mon.1"] {
            let old = ca.issue(entity).unwrap();
            let new = ca.issue(entity).unwrap();
            let serial = new.identity().unwrap().serial;
            let expect = Expect::daemon(entity, Some(&serial));
            assert!(reaches_key(&ca, &new, &expect).await, "{entity}'s own key");
            assert!(
                !reaches_key(&ca, &old, &expect).await,
                "{entity}'s old key passed for its new one"
            );
            // Before the map records a key, any of the daemon's passes.
            assert!(reaches_key(&ca, &old, &Expect::daemon(entity, None)).await);
            // Another daemon's key of that serial's shape does not.
            let other = ca.issue("osd.4").unwrap();
            let as_other = Expect::daemon(entity, Some(&other.identity().unwrap().serial));
            assert!(!reaches_key(&ca, &other, &as_other).await);
        }
        // A revoked mark names no key.
        let k = ca.issue("osd.3").unwrap();
        let revoked = Expect::daemon("osd.3", Some("0"));
        assert!(!reaches_key(&ca, &k, &revoked).await);
    }

    /// Someone who may write in a keyring's folder made the temporary
    /// file a writer would use, readable and writable by anyone (or a
    /// link to elsewhere): the key never goes into it, the keyring is its
    /// owner's only, and what the other made is left as it was.
    #[cfg(unix)]
    #[test]
    fn keys_are_never_written_through_a_file_someone_else_made() {
        use std::os::unix::fs::PermissionsExt;
        let ca = Authority::generate("test").unwrap();
        let dir = loligo_testkit::TempDir::new("tls-tmp").unwrap();
        let path = dir.path().join("osd.1.keyring");
        let planted = dir.path().join("osd.1.tmp");
        std::fs::write(&planted, "theirs").unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o666)).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&elsewhere, dir.path().join(".osd.1.keyring.tmp")).unwrap();
        let k = ca.issue("osd.1").unwrap();
        k.save(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the keyring is its owner's only: {mode:o}");
        assert_eq!(Keyring::load(&path).unwrap().cert, k.cert);
        assert_eq!(std::fs::read_to_string(&planted).unwrap(), "theirs");
        assert!(!elsewhere.exists(), "a link was followed");
        // The authority too.
        let keys = dir.path().join("keys");
        std::fs::create_dir(&keys).unwrap();
        let planted = keys.join("ca.tmp");
        std::fs::write(&planted, "theirs").unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o666)).unwrap();
        ca.save(&keys).unwrap();
        let mode = std::fs::metadata(keys.join("ca.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o077,
            0,
            "the authority's key is its owner's only: {mode:o}"
        );
        assert_eq!(std::fs::read_to_string(&planted).unwrap(), "theirs");
        // No temporary file is left behind.
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp") && n != "osd.1.tmp" && n != ".osd.1.keyring.tmp")
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
