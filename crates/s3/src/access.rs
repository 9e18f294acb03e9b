//! The check every request passes before its handler: the bucket's
//! policy, if it has one, judges the request (a denial ends it here; an
//! allowance is marked on the request, and the handler then does not ask
//! the ACLs); an anonymous request the policy did not allow may only ask
//! what a handler judges by ACL.
//!
//! It must never let a request a policy denies reach its handler.

use crate::bucket::BucketRecord;
use crate::policy::{Decision, Policy, Request};
use crate::Gateway;
use s3s::path::S3Path;
use s3s::{s3_error, S3Error, S3Result};
use std::collections::BTreeMap;

/// Marks a request the bucket's policy allowed.
#[derive(Clone, Copy, Debug)]
pub struct PolicyAllowed;

/// Marks a request that came over TLS (for `aws:SecureTransport`).
#[derive(Clone, Copy, Debug)]
pub struct Secure;

/// Operations an anonymous request may ask for without a policy's leave,
/// which the handler then allows only where an ACL opens them to
/// everyone.
const ANONYMOUS_OPS: &[&str] = &[
    "GetObject",
    "HeadObject",
    "ListObjects",
    "ListObjectsV2",
    "ListObjectVersions",
    "HeadBucket",
    "PutObject",
    "PostObject",
    "DeleteObject",
    "DeleteObjects",
    "GetBucketAcl",
    "PutBucketAcl",
    "GetObjectAcl",
    "PutObjectAcl",
];

/// The policy of bucket `b`, if it has one.
pub fn policy_of(b: &BucketRecord) -> Result<Option<Policy>, S3Error> {
    match &b.policy {
        None => Ok(None),
        Some(text) => Policy::parse(text)
            .map(Some)
            .map_err(|m| s3_error!(InternalError, "the policy of '{}': {m}", b.name)),
    }
}

/// The IAM action of S3 operation `op` (`versioned`: the request names a
/// version), or `None` for one no policy speaks of.
pub fn action_of(op: &str, versioned: bool) -> Option<&'static str> {
    Some(match (op, versioned) {
        ("GetObject" | "HeadObject", false) => "s3:GetObject",
        ("GetObject" | "HeadObject", true) => "s3:GetObjectVersion",
        ("PutObject" | "PostObject" | "CopyObject" | "CreateMultipartUpload", _) => "s3:PutObject",
        ("UploadPart" | "UploadPartCopy" | "CompleteMultipartUpload", _) => "s3:PutObject",
        ("DeleteObject", false) => "s3:DeleteObject",
        ("DeleteObject", true) => "s3:DeleteObjectVersion",
        ("DeleteObjects", _) => "s3:DeleteObject",
        ("AbortMultipartUpload", _) => "s3:AbortMultipartUpload",
        ("ListParts", _) => "s3:ListMultipartUploadParts",
        ("ListMultipartUploads", _) => "s3:ListBucketMultipartUploads",
        ("ListObjects" | "ListObjectsV2" | "HeadBucket", _) => "s3:ListBucket",
        ("ListObjectVersions", _) => "s3:ListBucketVersions",
        ("GetObjectAttributes", false) => "s3:GetObjectAttributes",
        ("GetObjectAttributes", true) => "s3:GetObjectVersionAttributes",
        ("GetObjectAcl", false) => "s3:GetObjectAcl",
        ("GetObjectAcl", true) => "s3:GetObjectVersionAcl",
        ("PutObjectAcl", false) => "s3:PutObjectAcl",
        ("PutObjectAcl", true) => "s3:PutObjectVersionAcl",
        ("GetObjectTagging", false) => "s3:GetObjectTagging",
        ("GetObjectTagging", true) => "s3:GetObjectVersionTagging",
        ("PutObjectTagging", false) => "s3:PutObjectTagging",
        ("PutObjectTagging", true) => "s3:PutObjectVersionTagging",
        ("DeleteObjectTagging", false) => "s3:DeleteObjectTagging",
        ("DeleteObjectTagging", true) => "s3:DeleteObjectVersionTagging",
        ("GetBucketAcl", _) => "s3:GetBucketAcl",
        ("PutBucketAcl", _) => "s3:PutBucketAcl",
        ("GetBucketLocation", _) => "s3:GetBucketLocation",
        ("DeleteBucket", _) => "s3:DeleteBucket",
        ("GetBucketVersioning", _) => "s3:GetBucketVersioning",
        ("PutBucketVersioning", _) => "s3:PutBucketVersioning",
        ("GetBucketTagging", _) => "s3:GetBucketTagging",
        ("PutBucketTagging" | "DeleteBucketTagging", _) => "s3:PutBucketTagging",
        ("GetBucketPolicy", _) => "s3:GetBucketPolicy",
        ("PutBucketPolicy", _) => "s3:PutBucketPolicy",
        ("DeleteBucketPolicy", _) => "s3:DeleteBucketPolicy",
        ("GetBucketPolicyStatus", _) => "s3:GetBucketPolicyStatus",
        ("GetPublicAccessBlock", _) => "s3:GetBucketPublicAccessBlock",
        ("PutPublicAccessBlock" | "DeletePublicAccessBlock", _) => "s3:PutBucketPublicAccessBlock",
        ("GetBucketCors", _) => "s3:GetBucketCORS",
        ("PutBucketCors" | "DeleteBucketCors", _) => "s3:PutBucketCORS",
        ("GetObjectLockConfiguration", _) => "s3:GetBucketObjectLockConfiguration",
        ("PutObjectLockConfiguration", _) => "s3:PutBucketObjectLockConfiguration",
        ("GetObjectRetention", _) => "s3:GetObjectRetention",
        ("PutObjectRetention", _) => "s3:PutObjectRetention",
        ("GetObjectLegalHold", _) => "s3:GetObjectLegalHold",
        ("PutObjectLegalHold", _) => "s3:PutObjectLegalHold",
        ("GetBucketOwnershipControls", _) => "s3:GetBucketOwnershipControls",
        ("PutBucketOwnershipControls" | "DeleteBucketOwnershipControls", _) => {
            "s3:PutBucketOwnershipControls"
        }
        _ => return None,
    })
}

/// The decoded parameters of `uri`'s query.
pub fn query_of(uri: &http::Uri) -> Vec<(String, String)> {
    (uri.query())
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default()
}

/// The condition keys of a request: its query's listing parameters and
/// the headers policies test (lower-case keys).
pub fn context_of(
    headers: &http::HeaderMap,
    query: &[(String, String)],
    secure: bool,
) -> BTreeMap<String, Vec<String>> {
    let mut c: BTreeMap<String, Vec<String>> = BTreeMap::new();
    c.insert("aws:securetransport".into(), vec![secure.to_string()]);
    for (k, v) in query {
        let key = match k.as_str() {
            "prefix" => "s3:prefix",
            "delimiter" => "s3:delimiter",
            "max-keys" => "s3:max-keys",
            "versionId" => "s3:versionid",
            _ => continue,
        };
        c.entry(key.to_string()).or_default().push(v.clone());
    }
    for (name, v) in headers {
        let n = name.as_str();
        let Ok(v) = v.to_str() else { continue };
        if n.starts_with("x-amz-") && n != "x-amz-tagging" && !n.starts_with("x-amz-content") {
            c.entry(format!("s3:{n}")).or_default().push(v.to_string());
        }
        let aws = match n {
            "referer" => Some("aws:referer"),
            "user-agent" => Some("aws:useragent"),
            _ => None,
        };
        if let Some(k) = aws {
            c.entry(k.to_string()).or_default().push(v.to_string());
        }
        if n == "x-amz-tagging" {
            for (tk, tv) in form_urlencoded::parse(v.as_bytes()) {
                let k = format!("s3:requestobjecttag/{}", tk.to_ascii_lowercase());
                c.entry(k).or_default().push(tv.into_owned());
            }
        }
    }
    c
}

/// One request as a bucket policy judges it.
pub struct Ask<'a> {
    pub action: &'static str,
    /// The object asked for (`None`: the bucket), and its version.
    pub key: Option<&'a str>,
    pub version: Option<&'a str>,
    pub user: Option<&'a str>,
    /// Condition keys from the request's headers and query.
    pub context: BTreeMap<String, Vec<String>>,
}

/// Operations whose bucket policy a Deny cannot take from the bucket's
/// owner (who could otherwise lock themselves out for good).
const POLICY_OPS: &[&str] = &["GetBucketPolicy", "PutBucketPolicy", "DeleteBucketPolicy"];

/// What bucket `b`'s policy says of `ask` (the tags of the object and
/// version asked for read when a condition needs them).
pub async fn judge(gw: &Gateway, b: &BucketRecord, mut ask: Ask<'_>) -> S3Result<Decision> {
    let Some(policy) = policy_of(b)? else {
        return Ok(Decision::Silent);
    };
    let resource = match ask.key {
        Some(k) => format!("arn:aws:s3:::{}/{k}", b.name),
        None => format!("arn:aws:s3:::{}", b.name),
    };
    if let (true, Some(k)) = (policy.reads_object_tags(), ask.key) {
        if let Some(tags) = gw.tags_of(b, k, ask.version).await? {
            for (tk, tv) in tags {
                let name = format!("s3:existingobjecttag/{}", tk.to_ascii_lowercase());
                ask.context.insert(name, vec![tv]);
            }
        }
    }
    if let Some(u) = ask.user {
        ask.context
            .insert("aws:username".into(), vec![u.to_string()]);
    }
    let d = policy.evaluate(&Request {
        action: ask.action,
        resource: &resource,
        user: ask.user,
        context: &ask.context,
    });
    // A public access block that restricts public buckets lets a public
    // policy allow no one but the bucket's owner.
    let restricted = b
        .public_block
        .as_ref()
        .is_some_and(|p| p.restrict_public_buckets)
        && policy.is_public()
        && ask.user != Some(b.owner.as_str());
    match (d, restricted) {
        (Decision::Allow, true) => Ok(Decision::Silent),
        (d, _) => Ok(d),
    }
}

/// The check of a gateway's requests (for `S3Access`).
pub struct Access(pub Gateway);

impl Access {
    /// What bucket policy says of the request `cx` asks, as `user`.
    async fn decision(
        &self,
        cx: &s3s::access::S3AccessContext<'_>,
        user: Option<&str>,
        secure: bool,
    ) -> S3Result<Decision> {
        let (bucket, key) = match cx.s3_path() {
            S3Path::Root => return Ok(Decision::Silent),
            S3Path::Bucket { bucket } => (bucket.as_ref(), None),
            S3Path::Object { bucket, key } => (bucket.as_ref(), Some(key.as_ref())),
        };
        let b = match self.0.bucket(bucket).await {
            Ok(b) => b,
            // A bucket that is not there is the handler's to answer.
            Err(e) if e.code() == &s3s::S3ErrorCode::NoSuchBucket => return Ok(Decision::Silent),
            Err(e) => return Err(e),
        };
        let op = cx.s3_op().name();
        if POLICY_OPS.contains(&op) && user == Some(b.owner.as_str()) {
            return Ok(Decision::Silent);
        }
        let query = query_of(cx.uri());
        let version = query
            .iter()
            .find(|(k, _)| k == "versionId")
            .map(|(_, v)| v.as_str());
        let Some(action) = action_of(op, version.is_some()) else {
            return Ok(Decision::Silent);
        };
        let ask = Ask {
            action,
            key,
            version,
            user,
            context: context_of(cx.headers(), &query, secure),
        };
        judge(&self.0, &b, ask).await
    }
}

#[async_trait::async_trait]
impl s3s::access::S3Access for Access {
    async fn check(&self, cx: &mut s3s::access::S3AccessContext<'_>) -> S3Result<()> {
        let user = match cx.credentials() {
            Some(c) => Some(self.0.secrets().user_of(&c.access_key).await?),
            None => None,
        };
        let secure = cx.extensions_mut().get::<Secure>().is_some();
        match self.decision(cx, user.as_deref(), secure).await? {
            Decision::Deny => Err(s3_error!(
                AccessDenied,
                "the bucket's policy denies this request"
            )),
            Decision::Allow => {
                cx.extensions_mut().insert(PolicyAllowed);
                Ok(())
            }
            Decision::Silent if user.is_some() => Ok(()),
            Decision::Silent if ANONYMOUS_OPS.contains(&cx.s3_op().name()) => Ok(()),
            Decision::Silent => Err(s3_error!(
                AccessDenied,
                "anonymous requests may only reach what an ACL or policy opens to everyone"
            )),
        }
    }
}
