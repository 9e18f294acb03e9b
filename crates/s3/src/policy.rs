//! Bucket policies in the language of AWS's IAM policy documents, as S3
//! reads them: statements that allow or deny actions (`s3:GetObject`) on
//! resources (`arn:aws:s3:::bucket/key`) to principals, under
//! conditions on the request (`s3:prefix`, `aws:SourceIp`, an object's
//! tags, ...). A policy is read whole when it is set, so a document this
//! gateway cannot honour in full is refused then, never half applied.
//! Pure: no I/O (the caller gathers the request's context).
//!
//! It must never let an allow outweigh a deny: any statement that denies
//! a request decides it.

use serde_json::Value;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// The largest policy document kept (S3's limit).
pub const POLICY_MAX: usize = 20 << 10;

/// What a policy says of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// A statement allows it and none denies it.
    Allow,
    /// A statement denies it.
    Deny,
    /// No statement speaks of it: the ACLs decide.
    Silent,
}

/// Who a statement names.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Principals {
    /// Everyone, anonymous requests included (`"*"`, `{"AWS": "*"}`).
    Anyone,
    /// Users by id, and tenants (`arn:aws:iam::TENANT:root`: every
    /// user of the tenant; the empty tenant holds the ids without `$`).
    Some {
        users: Vec<String>,
        tenants: Vec<String>,
    },
}

/// A condition operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    StringEquals,
    StringNotEquals,
    StringEqualsIgnoreCase,
    StringNotEqualsIgnoreCase,
    StringLike,
    StringNotLike,
    NumericEquals,
    NumericNotEquals,
    NumericLessThan,
    NumericLessThanEquals,
    NumericGreaterThan,
    NumericGreaterThanEquals,
    Bool,
    IpAddress,
    NotIpAddress,
    Null,
}

impl Op {
    fn parse(name: &str) -> Option<Op> {
        use Op::*;
        Some(match name {
            "StringEquals" | "ArnEquals" => StringEquals,
            "StringNotEquals" | "ArnNotEquals" => StringNotEquals,
            "StringEqualsIgnoreCase" => StringEqualsIgnoreCase,
            "StringNotEqualsIgnoreCase" => StringNotEqualsIgnoreCase,
            "StringLike" | "ArnLike" => StringLike,
            "StringNotLike" | "ArnNotLike" => StringNotLike,
            "NumericEquals" => NumericEquals,
            "NumericNotEquals" => NumericNotEquals,
            "NumericLessThan" => NumericLessThan,
            "NumericLessThanEquals" => NumericLessThanEquals,
            "NumericGreaterThan" => NumericGreaterThan,
            "NumericGreaterThanEquals" => NumericGreaterThanEquals,
            "Bool" => Bool,
            "IpAddress" => IpAddress,
            "NotIpAddress" => NotIpAddress,
            "Null" => Null,
            _ => return None,
        })
    }

    /// Whether the operator holds when none of its values matches (the
    /// negated ones), and so when the key is missing.
    fn negated(self) -> bool {
        matches!(
            self,
            Op::StringNotEquals
                | Op::StringNotEqualsIgnoreCase
                | Op::StringNotLike
                | Op::NumericNotEquals
                | Op::NotIpAddress
        )
    }

    /// Whether request value `got` matches policy value `want`.
    fn matches(self, got: &str, want: &str) -> bool {
        use Op::*;
        let num = |s: &str| s.trim().parse::<f64>().ok();
        let cmp = || num(got)?.partial_cmp(&num(want)?);
        match self {
            StringEquals | StringNotEquals => got == want,
            StringEqualsIgnoreCase | StringNotEqualsIgnoreCase => got.eq_ignore_ascii_case(want),
            StringLike | StringNotLike => glob(want, got),
            NumericEquals | NumericNotEquals => cmp() == Some(std::cmp::Ordering::Equal),
            NumericLessThan => cmp() == Some(std::cmp::Ordering::Less),
            NumericLessThanEquals => cmp().is_some_and(|o| o.is_le()),
            NumericGreaterThan => cmp() == Some(std::cmp::Ordering::Greater),
            NumericGreaterThanEquals => cmp().is_some_and(|o| o.is_ge()),
            Bool => got.eq_ignore_ascii_case(want),
            IpAddress | NotIpAddress => in_cidr(got, want),
            Null => false,
        }
    }
}

/// One condition: `op` on context key `key` against `values`.
#[derive(Clone, Debug, PartialEq)]
struct Condition {
    op: Op,
    /// `...IfExists`: holds when the key is missing.
    if_exists: bool,
    /// Lower-case (condition keys are not case-sensitive).
    key: String,
    values: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
struct Statement {
    allow: bool,
    principal: Option<Principals>,
    not_principal: Option<Principals>,
    actions: Vec<String>,
    not_actions: Vec<String>,
    resources: Vec<String>,
    not_resources: Vec<String>,
    conditions: Vec<Condition>,
}

/// A bucket policy, read and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    statements: Vec<Statement>,
}

/// A request as a policy judges it.
pub struct Request<'a> {
    /// `s3:GetObject`, ...
    pub action: &'a str,
    /// `arn:aws:s3:::bucket` or `arn:aws:s3:::bucket/key`.
    pub resource: &'a str,
    /// The user who signed it (`None`: anonymous).
    pub user: Option<&'a str>,
    /// Condition keys (lower-case) and their values.
    pub context: &'a BTreeMap<String, Vec<String>>,
}

/// `pattern` (with `*` for any run and `?` for any one character)
/// matches `s`.
pub fn glob(pattern: &str, s: &str) -> bool {
    let (p, s): (Vec<char>, Vec<char>) = (pattern.chars().collect(), s.chars().collect());
    // Iterative matching with one backtrack point (the last `*`).
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < s.len() {
        if i < p.len() && (p[i] == '?' || p[i] == s[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(st) = star {
            i = st + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

/// Whether address `ip` is in `cidr` (`a.b.c.d/n`, or one address).
fn in_cidr(ip: &str, cidr: &str) -> bool {
    let (net, bits) = match cidr.split_once('/') {
        Some((n, b)) => (n, b.parse::<u32>().ok()),
        None => (cidr, None),
    };
    let (Ok(ip), Ok(net)) = (ip.parse::<IpAddr>(), net.parse::<IpAddr>()) else {
        return false;
    };
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let bits = bits.unwrap_or(32).min(32);
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let bits = bits.unwrap_or(128).min(128);
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - bits)
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// A value or a list of values, as strings.
fn strings(v: &Value, what: &str) -> Result<Vec<String>, String> {
    let one = |v: &Value| match v {
        Value::String(s) => Ok(s.clone()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(format!("{what} holds a value that is not a string")),
    };
    match v {
        Value::Array(a) => a.iter().map(one).collect(),
        v => Ok(vec![one(v)?]),
    }
}

fn principals(v: &Value) -> Result<Principals, String> {
    if v.as_str() == Some("*") {
        return Ok(Principals::Anyone);
    }
    let Value::Object(m) = v else {
        return Err("a Principal is \"*\" or an object".into());
    };
    let (mut users, mut tenants) = (Vec::new(), Vec::new());
    for (kind, ids) in m {
        let ids = strings(ids, "Principal")?;
        match kind.as_str() {
            "AWS" => {
                for id in ids {
                    if id == "*" {
                        return Ok(Principals::Anyone);
                    }
                    let rest = id
                        .strip_prefix("arn:aws:iam::")
                        .ok_or_else(|| format!("principal '{id}' is not arn:aws:iam::..."))?;
                    let (tenant, who) = rest
                        .split_once(':')
                        .ok_or_else(|| format!("principal '{id}' names no user"))?;
                    match who.strip_prefix("user/") {
                        Some(u) if tenant.is_empty() => users.push(u.to_string()),
                        Some(u) => users.push(format!("{tenant}${u}")),
                        None if who == "root" => tenants.push(tenant.to_string()),
                        None => return Err(format!("principal '{id}' is not a user or root")),
                    }
                }
            }
            "CanonicalUser" => users.extend(ids),
            other => return Err(format!("principal kind '{other}' is not supported")),
        }
    }
    Ok(Principals::Some { users, tenants })
}

impl Principals {
    fn names(&self, user: Option<&str>) -> bool {
        match self {
            Principals::Anyone => true,
            Principals::Some { users, tenants } => user.is_some_and(|u| {
                let tenant = u.split_once('$').map_or("", |(t, _)| t);
                users.iter().any(|x| x == u) || tenants.iter().any(|t| t == tenant)
            }),
        }
    }
}

/// Whether the gateway puts condition key `key` in a request's context
/// (`access::context_of`): a policy testing any other is refused.
fn supplied(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    const EXACT: &[&str] = &[
        "s3:prefix",
        "s3:delimiter",
        "s3:max-keys",
        "s3:versionid",
        "aws:referer",
        "aws:securetransport",
        "aws:username",
        "aws:useragent",
    ];
    const PREFIX: &[&str] = &["s3:x-amz-", "s3:existingobjecttag/", "s3:requestobjecttag/"];
    EXACT.contains(&k.as_str()) || PREFIX.iter().any(|p| k.starts_with(p) && k.len() > p.len())
}

fn conditions(v: &Value) -> Result<Vec<Condition>, String> {
    let Value::Object(ops) = v else {
        return Err("a Condition is an object".into());
    };
    let mut out = Vec::new();
    for (name, keys) in ops {
        let (base, if_exists) = match name.strip_suffix("IfExists") {
            Some(b) => (b, true),
            None => (name.as_str(), false),
        };
        let op = Op::parse(base)
            .ok_or_else(|| format!("condition operator '{name}' is not supported"))?;
        let Value::Object(keys) = keys else {
            return Err(format!("condition '{name}' is not an object"));
        };
        for (key, values) in keys {
            if !supplied(key) {
                return Err(format!(
                    "condition key '{key}' is not one this gateway knows of a request"
                ));
            }
            out.push(Condition {
                op,
                if_exists,
                key: key.to_ascii_lowercase(),
                values: strings(values, name)?,
            });
        }
    }
    Ok(out)
}

fn statement(v: &Value) -> Result<Statement, String> {
    let Value::Object(m) = v else {
        return Err("a Statement is an object".into());
    };
    let list = |k: &str| m.get(k).map(|v| strings(v, k)).transpose();
    let allow = match m.get("Effect").and_then(Value::as_str) {
        Some("Allow") => true,
        Some("Deny") => false,
        _ => return Err("a statement's Effect is Allow or Deny".into()),
    };
    let s = Statement {
        allow,
        principal: m.get("Principal").map(principals).transpose()?,
        not_principal: m.get("NotPrincipal").map(principals).transpose()?,
        actions: list("Action")?.unwrap_or_default(),
        not_actions: list("NotAction")?.unwrap_or_default(),
        resources: list("Resource")?.unwrap_or_default(),
        not_resources: list("NotResource")?.unwrap_or_default(),
        conditions: m
            .get("Condition")
            .map(conditions)
            .transpose()?
            .unwrap_or_default(),
    };
    if s.principal.is_none() == s.not_principal.is_none() {
        return Err("a statement has a Principal or a NotPrincipal".into());
    }
    if s.actions.is_empty() == s.not_actions.is_empty() {
        return Err("a statement has an Action or a NotAction".into());
    }
    if s.resources.is_empty() == s.not_resources.is_empty() {
        return Err("a statement has a Resource or a NotResource".into());
    }
    for a in s.actions.iter().chain(&s.not_actions) {
        if !(a == "*" || a.to_ascii_lowercase().starts_with("s3:")) {
            return Err(format!("action '{a}' is not an S3 action"));
        }
    }
    for r in s.resources.iter().chain(&s.not_resources) {
        if !(r == "*" || r.starts_with("arn:aws:s3:")) {
            return Err(format!("resource '{r}' is not arn:aws:s3:..."));
        }
    }
    Ok(s)
}

impl Policy {
    /// Read policy document `text`, or say why it cannot be honoured.
    pub fn parse(text: &str) -> Result<Policy, String> {
        if text.len() > POLICY_MAX {
            return Err(format!("a policy is at most {POLICY_MAX} bytes"));
        }
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let st = match v.get("Statement") {
            Some(Value::Array(a)) => a.iter().map(statement).collect::<Result<Vec<_>, _>>()?,
            Some(one @ Value::Object(_)) => vec![statement(one)?],
            _ => return Err("a policy has a Statement".into()),
        };
        if st.is_empty() {
            return Err("a policy has at least one statement".into());
        }
        Ok(Policy { statements: st })
    }

    /// What the policy says of `r`.
    pub fn evaluate(&self, r: &Request<'_>) -> Decision {
        let mut allowed = false;
        for s in self.statements.iter().filter(|s| s.applies(r)) {
            if !s.allow {
                return Decision::Deny;
            }
            allowed = true;
        }
        if allowed {
            Decision::Allow
        } else {
            Decision::Silent
        }
    }

    /// Whether it allows anything to everyone, or to all but some (what
    /// S3's policy status calls public; no condition this gateway knows
    /// restricts who asks, so conditions do not make it private).
    pub fn is_public(&self) -> bool {
        (self.statements.iter()).any(|s| {
            s.allow && (s.principal == Some(Principals::Anyone) || s.not_principal.is_some())
        })
    }

    /// Whether a condition reads the tags of the object asked for (then
    /// the caller reads them into the context).
    pub fn reads_object_tags(&self) -> bool {
        (self.statements.iter().flat_map(|s| &s.conditions))
            .any(|c| c.key.starts_with("s3:existingobjecttag/"))
    }
}

impl Statement {
    fn applies(&self, r: &Request<'_>) -> bool {
        let who = match (&self.principal, &self.not_principal) {
            (Some(p), _) => p.names(r.user),
            (None, Some(np)) => !np.names(r.user),
            (None, None) => false,
        };
        let action = |a: &String| glob(&a.to_ascii_lowercase(), &r.action.to_ascii_lowercase());
        let act = match self.actions.is_empty() {
            false => self.actions.iter().any(action),
            true => !self.not_actions.iter().any(action),
        };
        let res = |p: &String| glob(p, r.resource);
        let on = match self.resources.is_empty() {
            false => self.resources.iter().any(res),
            true => !self.not_resources.iter().any(res),
        };
        who && act && on && self.conditions.iter().all(|c| c.holds(r.context))
    }
}

impl Condition {
    fn holds(&self, context: &BTreeMap<String, Vec<String>>) -> bool {
        let got = context.get(&self.key).filter(|v| !v.is_empty());
        if self.op == Op::Null {
            let want_absent = self.values.iter().any(|v| v.eq_ignore_ascii_case("true"));
            return got.is_none() == want_absent;
        }
        let Some(got) = got else {
            return self.if_exists || self.op.negated();
        };
        let any = (got.iter()).any(|g| self.values.iter().any(|w| self.op.matches(g, w)));
        any != self.op.negated()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), vec![v.to_string()]))
            .collect()
    }

    fn ask(
        p: &Policy,
        action: &str,
        resource: &str,
        user: Option<&str>,
        c: &[(&str, &str)],
    ) -> Decision {
        let context = ctx(c);
        p.evaluate(&Request {
            action,
            resource,
            user,
            context: &context,
        })
    }

    #[test]
    fn globs_match_as_iam_reads_them() {
        assert!(glob("arn:aws:s3:::b/*", "arn:aws:s3:::b/x/y"));
        assert!(!glob("arn:aws:s3:::b/*", "arn:aws:s3:::b"));
        assert!(glob("s3:Get*", "s3:GetObject"));
        assert!(glob("a?c*d", "abcxxd"));
        assert!(!glob("a?c", "ac"));
        assert!(glob("*", ""));
    }

    #[test]
    fn deny_wins_and_silence_leaves_it_to_the_acls() {
        let p = Policy::parse(
            r#"{"Version":"2012-10-17","Statement":[
            {"Effect":"Allow","Principal":{"AWS":"*"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"},
            {"Effect":"Deny","Principal":{"AWS":["arn:aws:iam:::user/eve"]},"Action":"s3:*","Resource":"arn:aws:s3:::b/*"}]}"#,
        )
        .unwrap();
        assert_eq!(
            ask(&p, "s3:GetObject", "arn:aws:s3:::b/k", None, &[]),
            Decision::Allow
        );
        assert_eq!(
            ask(&p, "s3:GetObject", "arn:aws:s3:::b/k", Some("eve"), &[]),
            Decision::Deny
        );
        assert_eq!(
            ask(&p, "s3:PutObject", "arn:aws:s3:::b/k", Some("bob"), &[]),
            Decision::Silent
        );
        assert_eq!(
            ask(&p, "s3:ListBucket", "arn:aws:s3:::b", None, &[]),
            Decision::Silent
        );
        assert!(p.is_public());
    }

    #[test]
    fn conditions_hold_as_iam_says_missing_keys_included() {
        let p = Policy::parse(
            r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b",
            "Condition":{"StringLike":{"s3:prefix":"public/*"},"NumericLessThanEquals":{"s3:max-keys":"10"}}}}"#,
        )
        .unwrap();
        let list = |c: &[(&str, &str)]| ask(&p, "s3:ListBucket", "arn:aws:s3:::b", None, c);
        assert_eq!(
            list(&[("s3:prefix", "public/a"), ("s3:max-keys", "5")]),
            Decision::Allow
        );
        assert_eq!(
            list(&[("s3:prefix", "private/a"), ("s3:max-keys", "5")]),
            Decision::Silent
        );
        assert_eq!(
            list(&[("s3:prefix", "public/a"), ("s3:max-keys", "50")]),
            Decision::Silent
        );
        assert_eq!(
            list(&[("s3:max-keys", "5")]),
            Decision::Silent,
            "a missing key fails a positive test"
        );
        assert!(
            p.is_public(),
            "a condition on the request does not narrow who asks"
        );
        let deny = Policy::parse(
            r#"{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*",
            "Condition":{"StringNotEquals":{"s3:x-amz-server-side-encryption":"AES256"}}},
            {"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*",
            "Condition":{"Null":{"s3:x-amz-acl":"false"}}}]}"#,
        )
        .unwrap();
        let put = |c: &[(&str, &str)]| ask(&deny, "s3:PutObject", "arn:aws:s3:::b/k", Some("u"), c);
        assert_eq!(
            put(&[]),
            Decision::Deny,
            "a missing key meets a negated test"
        );
        assert_eq!(
            put(&[("s3:x-amz-server-side-encryption", "AES256")]),
            Decision::Silent
        );
        assert_eq!(
            put(&[
                ("s3:x-amz-server-side-encryption", "AES256"),
                ("s3:x-amz-acl", "public-read")
            ]),
            Decision::Deny
        );
        // The gateway does not see client addresses: a policy testing
        // them is refused, not evaluated as if the key were missing.
        let ip = r#"{"Statement":{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*",
            "Condition":{"NotIpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}}"#;
        assert!(Policy::parse(ip).is_err());
        assert!(in_cidr("10.1.2.3", "10.0.0.0/8"));
        assert!(!in_cidr("11.1.2.3", "10.0.0.0/8"));
        assert!(in_cidr("::1", "::1"));
        let tls = Policy::parse(
            r#"{"Statement":{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*",
            "Condition":{"Bool":{"aws:SecureTransport":"false"}}}}"#,
        )
        .unwrap();
        let over = |t: &str| {
            ask(
                &tls,
                "s3:GetObject",
                "x",
                None,
                &[("aws:securetransport", t)],
            )
        };
        assert_eq!(
            (over("false"), over("true")),
            (Decision::Deny, Decision::Silent)
        );
    }

    #[test]
    fn principals_name_users_tenants_and_everyone_but() {
        let p = Policy::parse(
            r#"{"Statement":[{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::t1:user/ann","arn:aws:iam::t2:root"]},
            "Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"},
            {"Effect":"Deny","NotPrincipal":{"AWS":"arn:aws:iam:::user/root-user"},"Action":"s3:DeleteObject","Resource":"arn:aws:s3:::b/*"}]}"#,
        )
        .unwrap();
        let get = |u| ask(&p, "s3:GetObject", "arn:aws:s3:::b/k", u, &[]);
        assert_eq!(get(Some("t1$ann")), Decision::Allow);
        assert_eq!(get(Some("t2$anyone")), Decision::Allow);
        assert_eq!(get(Some("ann")), Decision::Silent);
        assert_eq!(get(None), Decision::Silent);
        let del = |u| ask(&p, "s3:DeleteObject", "arn:aws:s3:::b/k", u, &[]);
        assert_eq!(del(Some("root-user")), Decision::Silent);
        assert_eq!(del(Some("other")), Decision::Deny);
    }

    #[test]
    fn documents_that_cannot_be_honoured_are_refused() {
        for bad in [
            "not json",
            r#"{"Statement":[]}"#,
            r#"{"Statement":{"Effect":"Maybe","Principal":"*","Action":"s3:*","Resource":"*"}}"#,
            r#"{"Statement":{"Effect":"Allow","Action":"s3:*","Resource":"*"}}"#,
            r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"ec2:RunInstances","Resource":"*"}}"#,
            r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*","Condition":{"DateGreaterThan":{"aws:CurrentTime":"2020-01-01"}}}}"#,
            r#"{"Statement":{"Effect":"Allow","Principal":{"Federated":"x"},"Action":"s3:*","Resource":"*"}}"#,
        ] {
            assert!(Policy::parse(bad).is_err(), "{bad}");
        }
    }
}
