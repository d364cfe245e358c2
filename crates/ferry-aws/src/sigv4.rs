//! AWS Signature Version 4, checked on the server side: the request's `Authorization`
//! header names an access key, the headers it signed and a signature; the same signature is
//! computed here from the request as received and the key's secret, and compared.
//!
//! Written here rather than taken from a crate: the crates that implement SigV4 (the AWS
//! SDK's `aws-sigv4`) sign outgoing requests and bring the SDK's runtime with them, while a
//! server needs the reverse — parse what a client sent and recompute it — which is the
//! canonical request below and four HMACs.
//!
//! The canonical request follows what AWS documents and what botocore sends for SQS and
//! SNS: the path percent-encoded once more (so `%20` becomes `%2520`), the query string's
//! pairs sorted as they came, each signed header lower-cased with its value trimmed and its
//! inner runs of spaces folded, and the body's SHA-256 (an `x-amz-content-sha256` header
//! must be that hash: it cannot stand for another body). A
//! request more than 15 minutes away from the server's clock is refused, as AWS does, so a
//! captured request cannot be replayed later.
//!
//! A presigned request (a URL botocore's `generate_presigned_url` makes) carries the same
//! parts in its query string instead of a header — `X-Amz-Algorithm`, `X-Amz-Credential`,
//! `X-Amz-Date`, `X-Amz-Expires`, `X-Amz-SignedHeaders`, `X-Amz-Signature` — and signs
//! every query parameter but the signature; it is valid from its date until `X-Amz-Expires`
//! seconds later.

use axum::http::HeaderMap;
use ferry_access::Permission;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The only algorithm SigV4 names.
const ALGORITHM: &str = "AWS4-HMAC-SHA256";
/// How far a request's time may be from the server's, either way.
pub const MAX_SKEW_MS: i64 = 15 * 60 * 1000;

/// One access key the endpoint accepts and what its holder may do.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessKey {
    /// The access key id, sent in the clear in every request.
    pub id: String,
    /// The secret access key. Kept as it is — SigV4 needs it to recompute a signature — and
    /// never logged: `Debug` leaves it out.
    pub secret: String,
    /// The IAM user name ARNs give its holder (`arn:aws:iam::<account>:user/<name>`);
    /// without one the holder is the account's root.
    pub name: Option<String>,
    /// The account the key belongs to; `None`: the endpoint's own. A key of another
    /// account reaches this account's queues and topics only as their resource policies
    /// allow (see `auth/`). [`crate::Sqs::open`] turns the endpoint's own account into
    /// `None`.
    pub account_id: Option<String>,
    pub permissions: Vec<Permission>,
}

impl std::fmt::Debug for AccessKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessKey")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("account_id", &self.account_id)
            .field("permissions", &self.permissions)
            .finish_non_exhaustive()
    }
}

/// A request as the server received it, for checking its signature.
pub struct SignedRequest<'a> {
    pub method: &'a str,
    /// The path as it came on the wire, percent-encoding and all.
    pub path: &'a str,
    /// The query string as it came, without the `?`.
    pub query: &'a str,
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
}

/// Why a signature was not accepted. The codes are AWS's; no message carries a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No `Authorization` header and no presigned query.
    #[error("Request is missing Authentication Token")]
    Missing,
    /// An `Authorization` header that is not a whole SigV4 one.
    #[error("{0}")]
    Incomplete(String),
    /// An access key this endpoint does not have.
    #[error("The security token included in the request is invalid.")]
    UnknownKey,
    /// A signature other than the one computed.
    #[error(
        "The request signature we calculated does not match the signature you provided. \
         Check your AWS Secret Access Key and signing method."
    )]
    Mismatch,
    /// A request dated more than [`MAX_SKEW_MS`] before now, in AWS's words.
    #[error("Signature expired: {sent} is now earlier than {bound} ({now} - 15 min.)")]
    Expired {
        sent: String,
        bound: String,
        now: String,
    },
    /// A presigned request used after its `X-Amz-Expires`.
    #[error(
        "Signature expired: {sent} is now earlier than {now} - {expires_secs} s, the presigned \
         request's X-Amz-Expires"
    )]
    PresignedExpired {
        sent: String,
        expires_secs: i64,
        now: String,
    },
    /// A request dated more than [`MAX_SKEW_MS`] after now, in AWS's words.
    #[error("Signature not yet current: {sent} is still later than {bound} ({now} + 15 min.)")]
    NotYetCurrent {
        sent: String,
        bound: String,
        now: String,
    },
}

impl SignatureError {
    /// AWS's error code for it.
    pub fn code(&self) -> &'static str {
        match self {
            SignatureError::Missing => "MissingAuthenticationToken",
            SignatureError::Incomplete(_) => "IncompleteSignature",
            SignatureError::UnknownKey => "InvalidClientTokenId",
            // AWS answers a stale or early request so too (SQS, SNS and STS alike), which
            // SDKs recognise as clock skew.
            SignatureError::Mismatch
            | SignatureError::Expired { .. }
            | SignatureError::NotYetCurrent { .. }
            | SignatureError::PresignedExpired { .. } => "SignatureDoesNotMatch",
        }
    }

    /// AWS's HTTP status for it.
    pub fn status(&self) -> u16 {
        match self {
            SignatureError::Incomplete(_) => 400,
            _ => 403,
        }
    }
}

/// What a request claims: who signed it, when, over which headers, with what signature —
/// from its `Authorization` header or, presigned, from its query string.
struct Claim {
    key_id: String,
    /// `<date>/<region>/<service>/aws4_request`.
    scope: String,
    /// `X-Amz-Date`: `yyyyMMddTHHmmssZ`.
    amz_date: String,
    signed_headers: Vec<String>,
    signature: String,
    /// Presigned: how long after `amz_date` the signature stays valid (`X-Amz-Expires`).
    /// `None`: an `Authorization` header, valid within [`MAX_SKEW_MS`] of its date.
    expires_secs: Option<i64>,
}

/// A Credential's `<key id>/<scope>`, the scope checked for its four parts.
fn split_credential(credential: &str) -> Option<(&str, &str)> {
    let (key_id, scope) = credential.split_once('/')?;
    let parts: Vec<&str> = scope.split('/').collect();
    (parts.len() == 4 && parts[3] == "aws4_request" && !key_id.is_empty())
        .then_some((key_id, scope))
}

const BAD_SCOPE: &str =
    "has a Credential other than <key id>/<date>/<region>/<service>/aws4_request";

fn parse_authorization(value: &str, headers: &HeaderMap) -> Result<Claim, SignatureError> {
    let incomplete =
        |what: &str| SignatureError::Incomplete(format!("Authorization header {what}"));
    let rest = value
        .strip_prefix(ALGORITHM)
        .ok_or_else(|| incomplete("does not start with AWS4-HMAC-SHA256"))?;
    let (mut credential, mut signed, mut signature) = (None, None, None);
    for part in rest.split(',') {
        let (name, value) = part
            .trim()
            .split_once('=')
            .ok_or_else(|| incomplete("has a part without `=`"))?;
        match name {
            "Credential" => credential = Some(value),
            "SignedHeaders" => signed = Some(value),
            "Signature" => signature = Some(value),
            _ => {}
        }
    }
    let credential = credential.ok_or_else(|| incomplete("lacks Credential"))?;
    let signed = signed.ok_or_else(|| incomplete("lacks SignedHeaders"))?;
    let signature = signature.ok_or_else(|| incomplete("lacks Signature"))?;
    let (key_id, scope) = split_credential(credential).ok_or_else(|| incomplete(BAD_SCOPE))?;
    let amz_date = headers
        .get("x-amz-date")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| SignatureError::Incomplete("the request has no X-Amz-Date header".into()))?;
    Ok(Claim {
        key_id: key_id.to_owned(),
        scope: scope.to_owned(),
        amz_date: amz_date.to_owned(),
        signed_headers: signed.split(';').map(str::to_owned).collect(),
        signature: signature.to_owned(),
        expires_secs: None,
    })
}

/// The longest `X-Amz-Expires` SigV4 allows: seven days.
const MAX_EXPIRES_SECS: i64 = 7 * 24 * 3600;

/// A presigned request's claim, from its query string; `None` when the query carries no
/// `X-Amz-Algorithm` (the request is not presigned).
fn parse_presigned(query: &str) -> Result<Option<Claim>, SignatureError> {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    let get = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let Some(algorithm) = get("X-Amz-Algorithm") else {
        return Ok(None);
    };
    let incomplete = |what: &str| SignatureError::Incomplete(format!("the presigned query {what}"));
    if algorithm != ALGORITHM {
        return Err(incomplete("names an algorithm other than AWS4-HMAC-SHA256"));
    }
    let need = |name: &str| get(name).ok_or_else(|| incomplete(&format!("lacks {name}")));
    let (key_id, scope) =
        split_credential(need("X-Amz-Credential")?).ok_or_else(|| incomplete(BAD_SCOPE))?;
    let expires_secs = need("X-Amz-Expires")?
        .parse::<i64>()
        .ok()
        .filter(|s| (1..=MAX_EXPIRES_SECS).contains(s))
        .ok_or_else(|| incomplete("has an X-Amz-Expires other than 1 to 604800 seconds"))?;
    Ok(Some(Claim {
        key_id: key_id.to_owned(),
        scope: scope.to_owned(),
        amz_date: need("X-Amz-Date")?.to_owned(),
        signed_headers: need("X-Amz-SignedHeaders")?
            .split(';')
            .map(str::to_owned)
            .collect(),
        signature: need("X-Amz-Signature")?.to_owned(),
        expires_secs: Some(expires_secs),
    }))
}

/// Checks requests against a set of access keys.
#[derive(Debug, Clone, Default)]
pub struct Verifier {
    keys: Vec<AccessKey>,
}

impl Verifier {
    pub fn new(keys: Vec<AccessKey>) -> Verifier {
        Verifier { keys }
    }

    /// Whether any key is configured: without one the endpoint does not check signatures.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key that signed `request` — in its `Authorization` header, or presigned in its
    /// query string — if its signature is right and its time valid at `now_ms`: within
    /// [`MAX_SKEW_MS`] of its date, or for a presigned request from then until it
    /// expires.
    pub fn verify(
        &self,
        request: &SignedRequest<'_>,
        now_ms: i64,
    ) -> Result<&AccessKey, SignatureError> {
        let claim = match request
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
        {
            Some(value) => parse_authorization(value, request.headers)?,
            None => parse_presigned(request.query)?.ok_or(SignatureError::Missing)?,
        };
        let key = self
            .keys
            .iter()
            .find(|k| k.id == claim.key_id)
            .ok_or(SignatureError::UnknownKey)?;
        let amz_date = claim.amz_date.as_str();
        let sent_ms = parse_amz_date(amz_date).ok_or_else(|| {
            SignatureError::Incomplete(format!("X-Amz-Date {amz_date:?} is not yyyyMMddTHHmmssZ"))
        })?;
        if !claim.scope.starts_with(&amz_date[..8]) {
            return Err(SignatureError::Incomplete(
                "the Credential scope's date is not X-Amz-Date's".into(),
            ));
        }
        check_time(&claim, sent_ms, now_ms)?;
        let signed: Vec<&str> = claim.signed_headers.iter().map(String::as_str).collect();
        let canonical = canonical_request(request, &signed)?;
        let to_sign = format!(
            "{ALGORITHM}\n{amz_date}\n{}\n{}",
            claim.scope,
            hex(&Sha256::digest(canonical.as_bytes()))
        );
        let expected = hex(&hmac(
            &signing_key(&key.secret, &claim.scope),
            to_sign.as_bytes(),
        ));
        if same_text(&expected, &claim.signature) {
            Ok(key)
        } else {
            Err(SignatureError::Mismatch)
        }
    }
}

/// Whether a claim's date makes it valid at `now_ms`.
fn check_time(claim: &Claim, sent_ms: i64, now_ms: i64) -> Result<(), SignatureError> {
    let sent = || claim.amz_date.clone();
    if sent_ms - now_ms > MAX_SKEW_MS {
        return Err(SignatureError::NotYetCurrent {
            sent: sent(),
            bound: format_amz_date(now_ms + MAX_SKEW_MS),
            now: format_amz_date(now_ms),
        });
    }
    match claim.expires_secs {
        None if now_ms - sent_ms > MAX_SKEW_MS => Err(SignatureError::Expired {
            sent: sent(),
            bound: format_amz_date(now_ms - MAX_SKEW_MS),
            now: format_amz_date(now_ms),
        }),
        Some(secs) if now_ms - sent_ms > secs * 1000 => Err(SignatureError::PresignedExpired {
            sent: sent(),
            expires_secs: secs,
            now: format_amz_date(now_ms),
        }),
        _ => Ok(()),
    }
}

fn canonical_request(
    request: &SignedRequest<'_>,
    signed: &[&str],
) -> Result<String, SignatureError> {
    let mut out = String::new();
    out.push_str(request.method);
    out.push('\n');
    out.push_str(&encode_path(request.path));
    out.push('\n');
    let mut pairs: Vec<(&str, &str)> = request
        .query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        // A presigned request's signature is not part of what it signs.
        .filter(|(k, _)| *k != "X-Amz-Signature")
        .collect();
    pairs.sort_unstable();
    let query: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    out.push_str(&query.join("&"));
    out.push('\n');
    for name in signed {
        let values: Vec<String> = request
            .headers
            .get_all(*name)
            .iter()
            .map(|v| fold_spaces(&String::from_utf8_lossy(v.as_bytes())))
            .collect();
        if values.is_empty() {
            return Err(SignatureError::Incomplete(format!(
                "the signed header {name:?} is not in the request"
            )));
        }
        out.push_str(name);
        out.push(':');
        out.push_str(&values.join(","));
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&signed.join(";"));
    out.push('\n');
    let body_hash = hex(&Sha256::digest(request.body));
    match request.headers.get("x-amz-content-sha256") {
        // The header stands for the body in what was signed, so it must be the hash of
        // the body that came: else a captured request could carry another body under the
        // same signature. (`UNSIGNED-PAYLOAD` is S3's alone; SQS, SNS and STS sign bodies.)
        Some(given) if !given.as_bytes().eq_ignore_ascii_case(body_hash.as_bytes()) => {
            return Err(SignatureError::Mismatch);
        }
        Some(given) => out.push_str(given.to_str().unwrap_or_default()),
        None => out.push_str(&body_hash),
    }
    Ok(out)
}

/// Every byte but the unreserved ones and `/` percent-encoded, the wire's `%` included:
/// AWS encodes an already encoded path once more for every service but S3.
fn encode_path(path: &str) -> String {
    let path = if path.is_empty() { "/" } else { path };
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn fold_spaces(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn signing_key(secret: &str, scope: &str) -> Vec<u8> {
    let mut key = format!("AWS4{secret}").into_bytes();
    for part in scope.split('/') {
        key = hmac(&key, part.as_bytes());
    }
    key
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Equal strings, in a time that does not depend on where they differ, so that timing the
/// answers does not tell how much of a forged signature was right.
fn same_text(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && std::hint::black_box(
            a.bytes()
                .zip(b.bytes())
                .fold(0u8, |acc, (x, y)| acc | (x ^ y)),
        ) == 0
}

/// `yyyyMMddTHHmmssZ` as milliseconds since the epoch.
fn parse_amz_date(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> { text.get(range)?.parse().ok() };
    let (year, month, day) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (hour, minute, second) = (num(9..11)?, num(11..13)?, num(13..15)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000)
}

/// Milliseconds since the epoch as `yyyyMMddTHHmmssZ`.
fn format_amz_date(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a day since 1970-01-01 (Howard Hinnant's algorithm).
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    /// 2026-12-06T06:30:00Z.
    const SIGNED_AT_MS: i64 = 1_796_538_600_000;

    fn verifier() -> Verifier {
        Verifier::new(vec![AccessKey {
            id: "AKIDEXAMPLE".into(),
            secret: SECRET.into(),
            name: None,
            account_id: None,
            permissions: vec!["admin:#".parse().unwrap()],
        }])
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    /// A CreateQueue in AWS JSON 1.0 as botocore 1.43 signed it (`SigV4Auth(credentials,
    /// "sqs", "us-east-1").add_auth(request)` with the clock at 2026-12-06T06:30:00Z): an
    /// implementation of the algorithm other than this one.
    fn json_create_queue() -> (HeaderMap, &'static str) {
        let map = headers(&[
            ("host", "127.0.0.1:4566"),
            ("content-type", "application/x-amz-json-1.0"),
            ("x-amz-target", "AmazonSQS.CreateQueue"),
            ("x-amz-date", "20261206T063000Z"),
            (
                "authorization",
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261206/us-east-1/sqs/aws4_request, \
                 SignedHeaders=content-type;host;x-amz-date;x-amz-target, \
                 Signature=210140bab24fc43286c5f3d0fc25273c43a972e0e490bd5e0f71ba3930d883b7",
            ),
        ]);
        (
            map,
            r#"{"QueueName":"orders","Attributes":{"VisibilityTimeout":"30"}}"#,
        )
    }

    fn request<'a>(
        headers: &'a HeaderMap,
        path: &'a str,
        query: &'a str,
        body: &'a str,
    ) -> SignedRequest<'a> {
        SignedRequest {
            method: "POST",
            path,
            query,
            headers,
            body: body.as_bytes(),
        }
    }

    #[test]
    fn a_request_botocore_signed_is_accepted_and_names_its_key() {
        let (headers, body) = json_create_queue();
        let verifier = verifier();
        let key = verifier
            .verify(&request(&headers, "/", "", body), SIGNED_AT_MS + 1_000)
            .unwrap();
        assert_eq!(key.id, "AKIDEXAMPLE");
    }

    #[test]
    fn an_encoded_path_and_a_query_are_signed_as_botocore_signs_them() {
        // `POST http://localhost:4566/000000000000/my%20queue?b=2&a=1`, query protocol,
        // region eu-west-1, signed by botocore as above.
        let headers = headers(&[
            ("host", "localhost:4566"),
            (
                "content-type",
                "application/x-www-form-urlencoded; charset=utf-8",
            ),
            ("x-amz-date", "20261206T063000Z"),
            (
                "authorization",
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261206/eu-west-1/sqs/aws4_request, \
                 SignedHeaders=content-type;host;x-amz-date, \
                 Signature=6b7a03e77ee383f11376cb26b06ecec5b4fa1efa368a152c6c160dff566aaf97",
            ),
        ]);
        let sent = request(
            &headers,
            "/000000000000/my%20queue",
            "b=2&a=1",
            "Action=SendMessage&MessageBody=hi",
        );
        assert!(verifier().verify(&sent, SIGNED_AT_MS).is_ok());
    }

    #[test]
    fn any_change_to_what_was_signed_is_a_mismatch() {
        let (headers, body) = json_create_queue();
        let v = verifier();
        let other_body = body.replace("30", "31");
        assert_eq!(
            v.verify(&request(&headers, "/", "", &other_body), SIGNED_AT_MS)
                .unwrap_err(),
            SignatureError::Mismatch
        );
        assert_eq!(
            v.verify(&request(&headers, "/x", "", body), SIGNED_AT_MS)
                .unwrap_err(),
            SignatureError::Mismatch
        );
        let mut other_target = headers.clone();
        other_target.insert(
            "x-amz-target",
            HeaderValue::from_static("AmazonSQS.DeleteQueue"),
        );
        assert_eq!(
            v.verify(&request(&other_target, "/", "", body), SIGNED_AT_MS)
                .unwrap_err(),
            SignatureError::Mismatch
        );
        let wrong_secret = Verifier::new(vec![AccessKey {
            id: "AKIDEXAMPLE".into(),
            secret: "not-the-secret".into(),
            name: None,
            account_id: None,
            permissions: vec![],
        }]);
        assert_eq!(
            wrong_secret
                .verify(&request(&headers, "/", "", body), SIGNED_AT_MS)
                .unwrap_err(),
            SignatureError::Mismatch
        );
    }

    #[test]
    fn an_unknown_key_a_missing_header_and_a_stale_date_are_refused_with_aws_codes() {
        let (headers, body) = json_create_queue();
        let none = Verifier::new(vec![]);
        let err = none
            .verify(&request(&headers, "/", "", body), SIGNED_AT_MS)
            .unwrap_err();
        assert_eq!((err.code(), err.status()), ("InvalidClientTokenId", 403));

        let bare = HeaderMap::new();
        let err = verifier()
            .verify(&request(&bare, "/", "", body), SIGNED_AT_MS)
            .unwrap_err();
        assert_eq!(
            (err.code(), err.status()),
            ("MissingAuthenticationToken", 403)
        );

        let late = SIGNED_AT_MS + MAX_SKEW_MS + 1_000;
        let err = verifier()
            .verify(&request(&headers, "/", "", body), late)
            .unwrap_err();
        assert_eq!(err.code(), "SignatureDoesNotMatch");
        assert_eq!(
            err.to_string(),
            "Signature expired: 20261206T063000Z is now earlier than 20261206T063001Z \
             (20261206T064501Z - 15 min.)"
        );
        let early = SIGNED_AT_MS - MAX_SKEW_MS - 1_000;
        let err = verifier()
            .verify(&request(&headers, "/", "", body), early)
            .unwrap_err();
        assert_eq!(err.code(), "SignatureDoesNotMatch");
        assert!(
            err.to_string().starts_with(
                "Signature not yet current: 20261206T063000Z is still later than 20261206T062959Z"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_malformed_authorization_header_is_incomplete() {
        let v = verifier();
        for bad in [
            "Bearer abc",
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261206/us-east-1/sqs/aws4_request",
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE, SignedHeaders=host, Signature=00",
        ] {
            let headers = headers(&[("authorization", bad), ("x-amz-date", "20261206T063000Z")]);
            let err = v
                .verify(&request(&headers, "/", "", ""), SIGNED_AT_MS)
                .unwrap_err();
            assert_eq!(
                (err.code(), err.status()),
                ("IncompleteSignature", 400),
                "{bad}"
            );
        }
    }

    #[test]
    fn secrets_stay_out_of_debug_output_and_error_messages() {
        let v = verifier();
        assert!(!format!("{v:?}").contains(SECRET));
        let (headers, _) = json_create_queue();
        let err = v
            .verify(&request(&headers, "/", "", "tampered"), SIGNED_AT_MS)
            .unwrap_err();
        assert!(!err.to_string().contains(SECRET));
    }

    /// `GET /?Action=GetCallerIdentity&Version=2011-06-15` presigned by botocore 1.43
    /// (`SigV4QueryAuth(credentials, "sts", "us-east-1", expires=900)`, the clock at
    /// 2026-12-06T06:30:00Z).
    const PRESIGNED: &str = "Action=GetCallerIdentity&Version=2011-06-15&\
        X-Amz-Algorithm=AWS4-HMAC-SHA256&\
        X-Amz-Credential=AKIDEXAMPLE%2F20261206%2Fus-east-1%2Fsts%2Faws4_request&\
        X-Amz-Date=20261206T063000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host&\
        X-Amz-Signature=f715863a3534f137a36e4e098696d0452b9443c6787eae20da2c1f59ef427485";

    #[test]
    fn a_url_botocore_presigned_is_accepted_until_it_expires() {
        let headers = headers(&[("host", "127.0.0.1:4566")]);
        let get = |query| SignedRequest {
            method: "GET",
            path: "/",
            query,
            headers: &headers,
            body: b"",
        };
        let v = verifier();
        let key = v.verify(&get(PRESIGNED), SIGNED_AT_MS + 60_000).unwrap();
        assert_eq!(key.id, "AKIDEXAMPLE");
        let err = v
            .verify(&get(PRESIGNED), SIGNED_AT_MS + 901_000)
            .unwrap_err();
        assert_eq!(err.code(), "SignatureDoesNotMatch");
        assert!(err.to_string().contains("X-Amz-Expires"), "{err}");
        let changed = PRESIGNED.replace("GetCallerIdentity", "AssumeRole");
        assert_eq!(
            v.verify(&get(&changed), SIGNED_AT_MS).unwrap_err(),
            SignatureError::Mismatch
        );
        let bad_expiry = PRESIGNED.replace("Expires=900", "Expires=0");
        assert_eq!(
            v.verify(&get(&bad_expiry), SIGNED_AT_MS)
                .unwrap_err()
                .code(),
            "IncompleteSignature"
        );
        // A query without X-Amz-Algorithm is not presigned: unsigned.
        assert_eq!(
            v.verify(&get("Action=GetCallerIdentity"), SIGNED_AT_MS)
                .unwrap_err(),
            SignatureError::Missing
        );
    }

    #[test]
    fn amz_dates_read_as_utc_milliseconds() {
        assert_eq!(parse_amz_date("19700101T000000Z"), Some(0));
        assert_eq!(parse_amz_date("20261206T063000Z"), Some(SIGNED_AT_MS));
        assert_eq!(parse_amz_date("20261306T063000Z"), None);
        assert_eq!(parse_amz_date("2026-12-06T06:30:00Z"), None);
        assert_eq!(format_amz_date(SIGNED_AT_MS), "20261206T063000Z");
        assert_eq!(format_amz_date(951_782_400_000), "20000229T000000Z");
    }
}
