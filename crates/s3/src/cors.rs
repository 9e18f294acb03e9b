//! Cross-origin resource sharing in S3's way: a bucket's CORS rules, and
//! which rule (the first that fits) answers a browser's preflight
//! `OPTIONS` or decorates a response to a request with an `Origin`.
//! Pure: no I/O (`serve.rs` asks and answers).
//!
//! It must never open a bucket to more than its rules name: a request no
//! rule fits gets no CORS header at all.

use serde::{Deserialize, Serialize};

/// The most rules a bucket keeps (S3's).
pub const RULES_MAX: usize = 100;
/// Methods a rule may allow (S3's).
const METHODS: &[&str] = &["GET", "PUT", "POST", "DELETE", "HEAD"];

/// One CORS rule of a bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub methods: Vec<String>,
    /// Origins, each with at most one `*`.
    pub origins: Vec<String>,
    /// Request headers allowed, each with at most one `*`.
    #[serde(default)]
    pub headers: Vec<String>,
    /// Response headers the browser may show the page.
    #[serde(default)]
    pub expose: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_secs: Option<i32>,
}

/// Refused unless `rules` are rules S3 would keep.
pub fn check(rules: &[Rule]) -> Result<(), String> {
    if rules.is_empty() || rules.len() > RULES_MAX {
        return Err(format!("a CORS configuration has 1 to {RULES_MAX} rules"));
    }
    for r in rules {
        if r.methods.is_empty() || r.origins.is_empty() {
            return Err("a CORS rule names methods and origins".into());
        }
        if let Some(m) = r.methods.iter().find(|m| !METHODS.contains(&m.as_str())) {
            return Err(format!("'{m}' is not a method a CORS rule may allow"));
        }
        let stars = |s: &String| s.matches('*').count() > 1;
        if let Some(o) = r.origins.iter().chain(&r.headers).find(|s| stars(s)) {
            return Err(format!("'{o}' has more than one '*'"));
        }
    }
    Ok(())
}

/// `pattern` (with at most one `*`) matches `s`; `ci`: ignoring case.
fn wild(pattern: &str, s: &str, ci: bool) -> bool {
    let (p, s) = match ci {
        true => (pattern.to_ascii_lowercase(), s.to_ascii_lowercase()),
        false => (pattern.to_string(), s.to_string()),
    };
    match p.split_once('*') {
        None => p == s,
        Some((a, b)) => s.len() >= a.len() + b.len() && s.starts_with(a) && s.ends_with(b),
    }
}

/// What a fitting rule answers.
#[derive(Debug, PartialEq, Eq)]
pub struct Allowed<'a> {
    /// `*` if the rule allows every origin, else the origin asked for.
    pub origin: String,
    pub rule: &'a Rule,
}

/// The first rule that lets `origin` use `method` with request headers
/// `headers`.
pub fn find<'a>(
    rules: &'a [Rule],
    origin: &str,
    method: &str,
    headers: &[&str],
) -> Option<Allowed<'a>> {
    let rule = rules.iter().find(|r| {
        r.methods.iter().any(|m| m == method)
            && r.origins.iter().any(|o| wild(o, origin, false))
            && (headers.iter()).all(|h| r.headers.iter().any(|p| wild(p, h, true)))
    })?;
    let origin = match rule.origins.iter().any(|o| o == "*") {
        true => "*".to_string(),
        false => origin.to_string(),
    };
    Some(Allowed { origin, rule })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(methods: &[&str], origins: &[&str], headers: &[&str]) -> Rule {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
        Rule {
            methods: v(methods),
            origins: v(origins),
            headers: v(headers),
            ..Default::default()
        }
    }

    #[test]
    fn the_first_fitting_rule_answers_and_no_other_request_is_let_in() {
        let rules = vec![
            rule(&["GET"], &["*.get"], &[]),
            rule(
                &["PUT"],
                &["https://app.example"],
                &["x-amz-*", "content-type"],
            ),
            rule(&["GET", "HEAD"], &["*"], &[]),
        ];
        check(&rules).unwrap();
        let a = find(&rules, "https://a.get", "GET", &[]).unwrap();
        assert_eq!((a.origin.as_str(), a.rule), ("https://a.get", &rules[0]));
        let a = find(
            &rules,
            "https://app.example",
            "PUT",
            &["X-Amz-Meta-A", "Content-Type"],
        )
        .unwrap();
        assert_eq!(a.rule, &rules[1]);
        assert!(find(&rules, "https://app.example", "PUT", &["authorization"]).is_none());
        assert!(find(&rules, "https://other", "PUT", &[]).is_none());
        assert!(find(&rules, "https://other", "DELETE", &[]).is_none());
        assert_eq!(
            find(&rules, "https://other", "HEAD", &[]).unwrap().origin,
            "*"
        );
    }

    #[test]
    fn rules_s3_would_refuse_are_refused() {
        assert!(check(&[]).is_err());
        assert!(check(&[rule(&["PATCH"], &["*"], &[])]).is_err());
        assert!(check(&[rule(&["GET"], &["*.*"], &[])]).is_err());
        assert!(check(&[rule(&[], &["*"], &[])]).is_err());
        assert!(check(&vec![rule(&["GET"], &["*"], &[]); 101]).is_err());
    }
}
