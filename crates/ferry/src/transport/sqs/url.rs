//! The `sqs://` URL: where the engine is, in which region, with which keys.
//!
//! - `sqs://host:port?region=us-east-1` — an SQS-compatible endpoint over plain HTTP
//!   (`ferry serve`'s AWS endpoint, moto, LocalStack); `&tls=true` for HTTPS.
//! - `sqs://aws?region=eu-west-1` — Amazon's own endpoints for the region, over HTTPS.
//! - `sqs://KEY:SECRET@host:port?…` — access keys in the URL (percent-encoded), else
//!   `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`.
//! - The region, when the URL names none: `AWS_REGION`, then `AWS_DEFAULT_REGION`.
//!
//! Nothing is guessed: no region or no keys is a bad URL saying what to set, and a query
//! parameter this transport does not know is refused rather than ignored. The AWS shared
//! config and credentials files are not read (that needs the `aws-config` crate and its
//! TLS and SSO stacks); the environment covers containers, CI and local engines.

use crate::error::{Error, Result};

/// Everything needed to build the SQS and SNS clients.
#[derive(Clone, PartialEq)]
pub(super) struct Endpoint {
    /// `None`: AWS's own endpoints for the region.
    pub url: Option<String>,
    pub region: String,
    pub access_key: String,
    pub secret_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    // Never prints the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("region", &self.region)
            .field("access_key", &self.access_key)
            .finish_non_exhaustive()
    }
}

/// Parses `url`, reading what it leaves out from `env` (the process environment in use).
pub(super) fn parse(url: &str, env: impl Fn(&str) -> Option<String>) -> Result<Endpoint> {
    let bad = |problem: String| Error::BadUrl {
        url: redact(url),
        problem,
    };
    let rest = url
        .strip_prefix("sqs://")
        .ok_or_else(|| bad("expected sqs://host:port?region=…".into()))?;
    let (authority, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = authority.strip_suffix('/').unwrap_or(authority);
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((user, host)) => (Some(user), host),
        None => (None, authority),
    };
    if host.is_empty() || host.contains('/') {
        return Err(bad(
            "expected a host (and port), e.g. sqs://localhost:4566, or sqs://aws for AWS itself"
                .into(),
        ));
    }
    let (mut region, mut tls) = (None, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = decode(value).map_err(&bad)?;
        match key {
            "region" if !value.is_empty() => region = Some(value),
            "tls" if value == "true" || value == "false" => tls = Some(value == "true"),
            "region" | "tls" => {
                return Err(bad(format!(
                    "`{key}` needs a value (region=us-east-1, tls=true|false)"
                )));
            }
            other => {
                return Err(bad(format!(
                    "unknown parameter `{other}`; this transport knows `region` and `tls`"
                )));
            }
        }
    }
    let region = region
        .or_else(|| env("AWS_REGION"))
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .filter(|r| !r.is_empty())
        .ok_or_else(|| {
            bad("no region: add ?region=…, or set AWS_REGION or AWS_DEFAULT_REGION".into())
        })?;
    let (access_key, secret_key, session_token) = match userinfo {
        Some(info) => {
            let (key, secret) = info
                .split_once(':')
                .ok_or_else(|| bad("keys in the URL are KEY:SECRET@host".into()))?;
            (
                decode(key).map_err(&bad)?,
                decode(secret).map_err(&bad)?,
                None,
            )
        }
        None => match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
            (Some(key), Some(secret)) if !key.is_empty() && !secret.is_empty() => (
                key,
                secret,
                env("AWS_SESSION_TOKEN").filter(|t| !t.is_empty()),
            ),
            _ => {
                return Err(bad(
                    "no credentials: put KEY:SECRET@ in the URL, or set AWS_ACCESS_KEY_ID and \
                     AWS_SECRET_ACCESS_KEY"
                        .into(),
                ));
            }
        },
    };
    let url = if host == "aws" {
        if tls == Some(false) {
            return Err(bad(
                "AWS itself is served over HTTPS only; drop tls=false".into()
            ));
        }
        None
    } else {
        let scheme = if tls == Some(true) { "https" } else { "http" };
        Some(format!("{scheme}://{host}"))
    };
    Ok(Endpoint {
        url,
        region,
        access_key,
        secret_key,
        session_token,
    })
}

/// `url` without its secret, for error messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(start), Some(at)) if at > start => {
            let userinfo = &url[start + 3..at];
            let key = userinfo.split(':').next().unwrap_or_default();
            format!("{}{key}:***{}", &url[..start + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// Percent-decoding of one URL component. Hand-written: four lines, where the `url` or
/// `percent-encoding` crate would be a dependency for this alone.
fn decode(s: &str) -> std::result::Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent-encoding in `{s}`"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{s}` does not decode to UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn a_local_endpoint_takes_keys_and_region_from_the_environment() {
        let e = parse(
            "sqs://localhost:4566",
            env(&[
                ("AWS_ACCESS_KEY_ID", "AK"),
                ("AWS_SECRET_ACCESS_KEY", "SK"),
                ("AWS_DEFAULT_REGION", "eu-west-1"),
            ]),
        )
        .unwrap();
        assert_eq!(e.url.as_deref(), Some("http://localhost:4566"));
        assert_eq!(
            (e.region.as_str(), e.access_key.as_str()),
            ("eu-west-1", "AK")
        );
        assert_eq!(e.secret_key, "SK");
    }

    #[test]
    fn the_url_wins_over_the_environment() {
        let e = parse(
            "sqs://me:p%2Fw@127.0.0.1:5000/?region=us-east-1&tls=true",
            env(&[("AWS_REGION", "eu-west-1"), ("AWS_ACCESS_KEY_ID", "other")]),
        )
        .unwrap();
        assert_eq!(e.url.as_deref(), Some("https://127.0.0.1:5000"));
        assert_eq!(
            (e.access_key.as_str(), e.secret_key.as_str()),
            ("me", "p/w")
        );
        assert_eq!(e.region, "us-east-1");
        let aws = parse("sqs://k:s@aws?region=us-west-2", env(&[])).unwrap();
        assert_eq!(aws.url, None);
    }

    #[test]
    fn what_is_missing_or_unknown_is_a_bad_url_that_hides_the_secret() {
        let no_region = parse("sqs://k:s@localhost:4566", env(&[])).unwrap_err();
        assert!(no_region.to_string().contains("no region"), "{no_region}");
        assert!(!no_region.to_string().contains(":s@"), "{no_region}");
        let no_keys = parse("sqs://localhost:4566?region=r", env(&[])).unwrap_err();
        assert!(no_keys.to_string().contains("no credentials"), "{no_keys}");
        let unknown = parse("sqs://k:s@h:1?region=r&queue_prefix=x", env(&[])).unwrap_err();
        assert!(
            unknown
                .to_string()
                .contains("unknown parameter `queue_prefix`"),
            "{unknown}"
        );
        assert!(parse("sqs://k:s@aws?region=r&tls=false", env(&[])).is_err());
        assert!(parse("sqs://?region=r", env(&[])).is_err());
    }
}
