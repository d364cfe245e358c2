//! AWS STS on the same endpoint, for the one call SQS and SNS clients make of it:
//! GetCallerIdentity, which tools and test fixtures (moto's among them) ask for the account
//! id before building queue URLs and ARNs. LocalStack serves STS on its port too.
//!
//! **Routing.** STS speaks the query protocol (`Action=GetCallerIdentity&Version=
//! 2011-06-15`, XML answers; botocore's model lists no other). A request without
//! `X-Amz-Target` is STS's when its SigV4 credential scope names the `sts` service or its
//! `Version` is STS's API version, which neither SQS (2012-11-05) nor SNS (2010-03-31)
//! use. Other STS actions are refused with `InvalidAction`.
//!
//! **The identity.** Account is the endpoint's account id; Arn is
//! `arn:aws:iam::<account>:user/<name>` for an access key with a name, else the account's
//! root (`arn:aws:iam::<account>:root`, also on an open endpoint); UserId is, as in AWS, a
//! user's unique id (`AIDA` and 17 characters, here derived from the account and the
//! name, so it stays the same across restarts) or, for the root, the account id.

use axum::body::Body;
use axum::http::{HeaderMap, Response};
use sha2::{Digest, Sha256};

use crate::auth::Caller;
use crate::protocol::query::escape;
use crate::protocol::response;
use crate::sigv4::AccessKey;

/// STS's API version, which its query requests carry.
pub const VERSION: &str = "2011-06-15";
const NAMESPACE: &str = "https://sts.amazonaws.com/doc/2011-06-15/";
const CONTENT_TYPE: &str = "text/xml";

/// Whether a request is STS's (see the module head).
pub fn claims(headers: &HeaderMap, pairs: &[(String, String)]) -> bool {
    if headers.contains_key("x-amz-target") {
        return false;
    }
    let scope_is_sts = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("/sts/aws4_request"));
    scope_is_sts || pairs.iter().any(|(k, v)| k == "Version" && v == VERSION)
}

/// Answers an STS request of an authenticated `caller`.
pub fn answer(
    account: &str,
    caller: &Caller<'_>,
    pairs: &[(String, String)],
    request_id: &str,
) -> Response<Body> {
    let action = pairs
        .iter()
        .find(|(k, _)| k == "Action")
        .map(|(_, v)| v.as_str());
    match action {
        Some("GetCallerIdentity") => {
            // A key of another account is that account's, as AWS answers.
            let account = caller.account(account);
            let xml = format!(
                "<GetCallerIdentityResponse xmlns=\"{NAMESPACE}\"><GetCallerIdentityResult>\
                 <Arn>{}</Arn><UserId>{}</UserId><Account>{}</Account>\
                 </GetCallerIdentityResult><ResponseMetadata><RequestId>{}</RequestId>\
                 </ResponseMetadata></GetCallerIdentityResponse>",
                escape(&caller.arn(account)),
                escape(&user_id(account, caller)),
                escape(account),
                escape(request_id)
            );
            response(200, CONTENT_TYPE, request_id, xml.into_bytes())
        }
        Some(other) => refuse(
            "InvalidAction",
            400,
            &format!(
                "Could not find operation {} for version {VERSION}: Ferry's STS endpoint \
                 answers GetCallerIdentity only",
                other.chars().take(100).collect::<String>()
            ),
            request_id,
        ),
        None => refuse(
            "MissingAction",
            400,
            "The request names no action: use the Action parameter.",
            request_id,
        ),
    }
}

/// An STS error answer (`ErrorResponse`, as the query protocol writes it).
pub fn refuse(code: &str, status: u16, message: &str, request_id: &str) -> Response<Body> {
    let fault = if status >= 500 { "Receiver" } else { "Sender" };
    let xml = format!(
        "<ErrorResponse xmlns=\"{NAMESPACE}\"><Error><Type>{fault}</Type><Code>{}</Code>\
         <Message>{}</Message></Error><RequestId>{}</RequestId></ErrorResponse>",
        escape(code),
        escape(message),
        escape(request_id)
    );
    response(status, CONTENT_TYPE, request_id, xml.into_bytes())
}

/// The caller's UserId: a user's unique id, or the root's account id.
fn user_id(account: &str, caller: &Caller<'_>) -> String {
    let Caller::Key(AccessKey {
        name: Some(name), ..
    }) = caller
    else {
        return account.to_owned();
    };
    // IAM's unique ids are `AIDA` and 17 characters of an upper-case base-32 alphabet.
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let digest = Sha256::digest(format!("{account}:{name}").as_bytes());
    let tail: String = digest
        .iter()
        .take(17)
        .map(|b| ALPHABET[usize::from(b & 31)] as char)
        .collect();
    format!("AIDA{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(authorization: Option<&str>) -> HeaderMap {
        let mut map = HeaderMap::new();
        if let Some(a) = authorization {
            map.insert("authorization", a.parse().unwrap());
        }
        map
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn sts_requests_are_told_by_their_scope_or_version() {
        let identity = pairs(&[("Action", "GetCallerIdentity"), ("Version", VERSION)]);
        assert!(claims(&headers(None), &identity));
        let signed = "AWS4-HMAC-SHA256 Credential=k/20260101/us-east-1/sts/aws4_request, \
                      SignedHeaders=host, Signature=0";
        assert!(claims(
            &headers(Some(signed)),
            &pairs(&[("Action", "AssumeRole")])
        ));
        let sqs = pairs(&[("Action", "GetCallerIdentity"), ("Version", "2012-11-05")]);
        assert!(!claims(&headers(None), &sqs));
        let mut json = headers(None);
        json.insert("x-amz-target", "AmazonSQS.ListQueues".parse().unwrap());
        assert!(!claims(&json, &identity));
    }

    #[test]
    fn a_named_key_is_an_iam_user_with_a_stable_unique_id_and_the_rest_are_the_root() {
        let key = AccessKey {
            id: "AKIDTEST".into(),
            secret: "s".into(),
            name: Some("orders-service".into()),
            account_id: None,
            permissions: vec![],
        };
        let id = user_id("123456789012", &Caller::Key(&key));
        assert_eq!(id.len(), 21);
        assert!(id.starts_with("AIDA"), "{id}");
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        );
        assert_eq!(id, user_id("123456789012", &Caller::Key(&key)));
        assert_ne!(id, user_id("000000000000", &Caller::Key(&key)));
        assert_eq!(user_id("123456789012", &Caller::Open), "123456789012");
    }
}
