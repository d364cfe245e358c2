//! Signatures: which requests get through, and what each refusal says in each protocol.

use serde_json::json;

use crate::support::{ADMIN, Auth, Served, Signer, now_ms, signer};

const MINUTE_MS: i64 = 60_000;

fn create(name: &str) -> serde_json::Value {
    json!({"QueueName": name})
}

#[tokio::test]
async fn a_request_signed_with_a_configured_key_is_served() {
    let served = Served::start().await;
    let reply = served
        .sqs(
            &Auth::Signed(signer(ADMIN, "sqs")),
            "CreateQueue",
            create("orders"),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(served.has_queue("orders"));
    // The query protocol too, and a clock a few minutes off is within AWS's allowance.
    let late = Auth::SignedAt(signer(ADMIN, "sqs"), now_ms() - 10 * MINUTE_MS);
    let reply = served
        .form(
            &late,
            &[
                ("Action", "CreateQueue"),
                ("QueueName", "jobs"),
                ("Version", "2012-11-05"),
            ],
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(served.has_queue("jobs"));
}

#[tokio::test]
async fn a_wrong_secret_or_a_changed_request_does_not_match_and_changes_nothing() {
    let served = Served::start().await;
    let wrong = Auth::Signed(Signer::new(ADMIN.0, "not-the-secret", "sqs"));
    let reply = served.sqs(&wrong, "CreateQueue", create("orders")).await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.query_error(), "SignatureDoesNotMatch");
    assert!(!served.has_queue("orders"));

    // Signed for one body, sent with another: the signature covers the body.
    let signed_for = create("orders").to_string();
    let headers = [
        ("Content-Type", "application/x-amz-json-1.0"),
        ("X-Amz-Target", "AmazonSQS.CreateQueue"),
        ("Host", &served.addr.to_string()),
    ]
    .map(|(n, v)| (n, v.to_owned()));
    let borrowed: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let at = now_ms();
    let signature = signer(ADMIN, "sqs").sign("POST", "/", &borrowed, signed_for.as_bytes(), at);
    let authorization = signature[1].1.clone();
    let reply = served
        .post(
            &Auth::Header(authorization.clone(), at),
            "/",
            &borrowed[..2],
            signed_for.as_bytes(),
        )
        .await;
    // The same header with the body it was made for is served: only the body differs below.
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(served.has_queue("orders"));
    let reply = served
        .post(
            &Auth::Header(authorization, at),
            "/",
            &borrowed[..2],
            create("payments").to_string().as_bytes(),
        )
        .await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.query_error(), "SignatureDoesNotMatch");
    assert!(!served.has_queue("payments"));
}

#[tokio::test]
async fn a_signed_content_hash_must_be_the_hash_of_the_body_that_came() {
    let served = Served::start().await;
    let signed_for = create("orders").to_string();
    let hash: String = {
        use sha2::Digest;
        sha2::Sha256::digest(signed_for.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let headers = [
        ("Content-Type", "application/x-amz-json-1.0"),
        ("X-Amz-Target", "AmazonSQS.CreateQueue"),
        ("X-Amz-Content-Sha256", hash.as_str()),
    ];
    let host = served.addr.to_string();
    let mut signable = headers.to_vec();
    signable.push(("Host", &host));
    let at = now_ms();
    let signature = signer(ADMIN, "sqs").sign("POST", "/", &signable, signed_for.as_bytes(), at);
    let authorization = Auth::Header(signature[1].1.clone(), at);
    // Another body under the header and signature made for the first: refused.
    let other = create("payments").to_string();
    let reply = served
        .post(&authorization, "/", &headers, other.as_bytes())
        .await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.query_error(), "SignatureDoesNotMatch");
    assert!(!served.has_queue("payments"));
    let reply = served
        .post(&authorization, "/", &headers, signed_for.as_bytes())
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(served.has_queue("orders"));
}

#[tokio::test]
async fn an_unknown_key_is_an_invalid_client_token_id() {
    let served = Served::start().await;
    let stranger = Auth::Signed(Signer::new("AKIDSTRANGER", "whatever", "sqs"));
    let reply = served.sqs(&stranger, "CreateQueue", create("orders")).await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.query_error(), "InvalidClientTokenId");
    assert_eq!(
        reply.json()["message"],
        "The security token included in the request is invalid."
    );
    assert!(!served.has_queue("orders"));
}

#[tokio::test]
async fn an_unsigned_request_is_missing_its_token_in_both_sqs_protocols() {
    let served = Served::start().await;
    let reply = served
        .sqs(&Auth::Unsigned, "CreateQueue", create("orders"))
        .await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.query_error(), "MissingAuthenticationToken");
    let reply = served
        .form(
            &Auth::Unsigned,
            &[
                ("Action", "CreateQueue"),
                ("QueueName", "orders"),
                ("Version", "2012-11-05"),
            ],
        )
        .await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.xml("Code"), "MissingAuthenticationToken");
    assert_eq!(reply.xml("Type"), "Sender");
    assert!(!served.has_queue("orders"));
}

#[tokio::test]
async fn a_malformed_authorization_header_is_an_incomplete_signature() {
    let served = Served::start().await;
    let header = Auth::Header(
        format!(
            "AWS4-HMAC-SHA256 Credential={}/20260101/us-east-1/sqs/aws4_request",
            ADMIN.0
        ),
        now_ms(),
    );
    let reply = served.sqs(&header, "CreateQueue", create("orders")).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.query_error(), "IncompleteSignature");
    assert!(!served.has_queue("orders"));
}

#[tokio::test]
async fn a_clock_more_than_15_minutes_off_either_way_is_refused_as_aws_words_it() {
    let served = Served::start().await;
    let stale = Auth::SignedAt(signer(ADMIN, "sqs"), now_ms() - 20 * MINUTE_MS);
    let reply = served.sqs(&stale, "CreateQueue", create("orders")).await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.query_error(), "SignatureDoesNotMatch");
    let message = reply.json()["message"].as_str().unwrap().to_owned();
    assert!(message.starts_with("Signature expired: "), "{message}");
    assert!(message.ends_with(" - 15 min.)"), "{message}");

    let early = Auth::SignedAt(signer(ADMIN, "sqs"), now_ms() + 20 * MINUTE_MS);
    let reply = served.sqs(&early, "CreateQueue", create("orders")).await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    let message = reply.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.starts_with("Signature not yet current: "),
        "{message}"
    );
    assert!(!served.has_queue("orders"));
}

#[tokio::test]
async fn sns_refuses_bad_signatures_in_its_own_xml() {
    let served = Served::start().await;
    let create = [
        ("Action", "CreateTopic"),
        ("Name", "news"),
        ("Version", "2010-03-31"),
    ];
    let reply = served.form(&Auth::Unsigned, &create).await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.xml("Code"), "MissingAuthenticationToken");
    assert!(
        reply
            .body
            .contains("http://sns.amazonaws.com/doc/2010-03-31/"),
        "{}",
        reply.body
    );
    let wrong = Auth::Signed(Signer::new(ADMIN.0, "not-the-secret", "sns"));
    let reply = served.form(&wrong, &create).await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.xml("Code"), "SignatureDoesNotMatch");
    assert!(!served.has_topic("news"));
    let reply = served
        .sns(ADMIN, &[("Action", "CreateTopic"), ("Name", "news")])
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(served.has_topic("news"));
}

#[tokio::test]
async fn without_access_keys_the_endpoint_stays_open() {
    let served = Served::with_keys(Vec::new()).await;
    let reply = served
        .sqs(&Auth::Unsigned, "CreateQueue", create("orders"))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    // A signature by any key is not checked either: there is nothing to check it against.
    let any = Auth::Signed(Signer::new("test", "test", "sqs"));
    let reply = served.sqs(&any, "CreateQueue", create("jobs")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}
