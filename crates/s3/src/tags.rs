//! Tags of objects and buckets in S3's rules: read from an
//! `x-amz-tagging` header (URL-encoded `key=value&...`) or a `Tagging`
//! body, checked against S3's limits, kept as a map. Pure: no I/O.
//!
//! It must never keep a tag set S3 would refuse (too many tags, a key
//! twice, a key or value too long).

use std::collections::BTreeMap;

/// The most tags an object carries (S3's).
pub const OBJECT_TAGS_MAX: usize = 10;
/// The most tags a bucket carries (S3's).
pub const BUCKET_TAGS_MAX: usize = 50;
/// The longest tag key, in characters (S3's).
const KEY_MAX: usize = 128;
/// The longest tag value, in characters (S3's).
const VALUE_MAX: usize = 256;

/// A tag set, by key.
pub type Tags = BTreeMap<String, String>;

/// `pairs` as a tag set of at most `max` tags, or why S3 refuses it.
pub fn check(pairs: Vec<(String, String)>, max: usize) -> Result<Tags, String> {
    if pairs.len() > max {
        return Err(format!("at most {max} tags, not {}", pairs.len()));
    }
    let mut out = Tags::new();
    for (k, v) in pairs {
        if k.is_empty() || k.chars().count() > KEY_MAX {
            return Err(format!("a tag key is 1 to {KEY_MAX} characters"));
        }
        if v.chars().count() > VALUE_MAX {
            return Err(format!("a tag value is at most {VALUE_MAX} characters"));
        }
        if out.insert(k.clone(), v).is_some() {
            return Err(format!("tag key '{k}' is given twice"));
        }
    }
    Ok(out)
}

/// The tags of an `x-amz-tagging` header (`key=value&...`, URL-encoded).
pub fn from_header(h: &str) -> Result<Tags, String> {
    let pairs = form_urlencoded::parse(h.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    check(pairs, OBJECT_TAGS_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_decoded_and_s3s_limits_kept() {
        let t = from_header("Hello=World&a%20b=c%2Fd&empty=").unwrap();
        assert_eq!(t.get("a b").map(String::as_str), Some("c/d"));
        assert_eq!(t.get("empty").map(String::as_str), Some(""));
        assert_eq!(t.len(), 3);
        assert!(from_header("a=1&a=2").is_err(), "a key twice");
        let eleven: Vec<String> = (0..11).map(|i| format!("k{i}=v")).collect();
        assert!(from_header(&eleven.join("&")).is_err());
        let long_key = format!("{}=v", "k".repeat(129));
        assert!(from_header(&long_key).is_err());
        assert!(from_header(&format!("k={}", "v".repeat(256))).is_ok());
        assert!(from_header(&format!("k={}", "v".repeat(257))).is_err());
        assert!(from_header("=v").is_err(), "an empty key");
        assert_eq!(from_header("").unwrap().len(), 0);
    }
}
