//! How the gateway names things in RADOS: buckets' index shards, the data
//! objects of an upload, and which shard an S3 key's entry lives in. Also
//! S3's rules for bucket names.
//!
//! Pure: no I/O. The shard hash must never change (an index written by
//! one version is read by the next).

/// The object in the index pool holding every bucket's record.
pub const REGISTRY: &str = "buckets";
/// Omap key prefix of a bucket's record in [`REGISTRY`].
pub const BUCKET: u8 = b'b';

/// FNV-1a, 64 bits: the stable hash that picks a key's shard.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The shard (of `shards`) holding `key`'s entry.
pub fn shard_of(key: &str, shards: u32) -> u32 {
    debug_assert!(shards > 0);
    (fnv1a(key.as_bytes()) % u64::from(shards.max(1))) as u32
}

/// The index object of shard `shard` of bucket instance `id`.
pub fn index_object(id: &str, shard: u32) -> String {
    format!("index.{id}.{shard}")
}

/// The prefix of the data objects of upload `tag` in bucket instance `id`.
pub fn tails_prefix(id: &str, tag: &str) -> String {
    format!("{id}.{tag}")
}

/// `bytes` in lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// A fresh random tag (16 bytes of OS randomness, hex).
pub fn new_tag() -> Result<String, String> {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| "no randomness for a tag".to_string())?;
    Ok(hex(&b))
}

/// Whether `key` may name an object: 1 to 1024 bytes (S3's limit), no
/// NUL (upload records keep a key before a NUL and the upload id).
pub fn check_object_key(key: &str) -> Result<(), String> {
    match !key.is_empty() && key.len() <= 1024 && !key.contains('\0') {
        true => Ok(()),
        false => Err("a key is 1 to 1024 bytes, without NUL".into()),
    }
}

/// Whether `name` is a valid bucket name by S3's rules: 3-63 characters
/// of lower-case letters, digits, '.' and '-', starting and ending with a
/// letter or digit, no "..", and not an IPv4 address.
pub fn check_bucket_name(name: &str) -> Result<(), String> {
    let b = name.as_bytes();
    let edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ok = (3..=63).contains(&b.len())
        && b.iter().all(|&c| edge(c) || c == b'.' || c == b'-')
        && b.first().is_some_and(|&c| edge(c))
        && b.last().is_some_and(|&c| edge(c))
        && !name.contains("..")
        && name.parse::<std::net::Ipv4Addr>().is_err();
    match ok {
        true => Ok(()),
        false => Err(format!(
            "'{name}' is not a valid bucket name: 3-63 lower-case letters, digits, '.' and '-', starting and ending with a letter or digit"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shard_hash_is_pinned() {
        // Indexes on disk depend on these values: they must not change.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(
            shard_of("photos/2026/cat.jpg", 11),
            (fnv1a(b"photos/2026/cat.jpg") % 11) as u32
        );
        let spread: std::collections::BTreeSet<u32> = (0..200)
            .map(|i| shard_of(&format!("key-{i}"), 11))
            .collect();
        assert_eq!(spread.len(), 11, "keys spread over every shard");
    }

    #[test]
    fn bucket_names_follow_s3s_rules() {
        for ok in ["abc", "my-bucket.logs", "a1b", &"a".repeat(63)] {
            assert!(check_bucket_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "ab",
            "Abc",
            "-abc",
            "abc-",
            "a..b",
            "192.168.1.1",
            "a_b",
            &"a".repeat(64),
        ] {
            assert!(check_bucket_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tags_are_fresh() {
        let (a, b) = (new_tag().unwrap(), new_tag().unwrap());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
