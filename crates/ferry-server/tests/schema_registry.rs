//! The schema registry mounted under `/schema-registry` on the HTTP listener: behind the
//! API's tokens (Bearer, or HTTP Basic with the token as password), refusals in the
//! registry's own error shape, and the server's body limit applied to it.

mod support;

use std::sync::Arc;

use ferry_schema_registry::SchemaRegistry;
use ferry_server::AuthConfig;
use support::{Served, exchange, fresh_broker, grant};

const TOKEN: &str = "registry-token-1f4e";
const SCHEMA: &str = r#"{"schema": "{\"type\":\"record\",\"name\":\"OrderPlaced\",\"fields\":[{\"name\":\"order_id\",\"type\":\"string\"}]}"}"#;

fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Authorization: Basic {encoded}\r\n")
}

#[tokio::test]
async fn the_registry_takes_the_token_as_bearer_or_basic_password_and_refuses_without() {
    let (broker, dir) = fresh_broker().await;
    let registry = Arc::new(SchemaRegistry::open(&dir.path().join("schema-registry")).unwrap());
    let served = Served::serve(broker, Some(dir), |server| {
        server
            .auth(AuthConfig {
                tokens: vec![grant("schemas", TOKEN, &["admin:#"])],
            })
            .max_http_body(4096)
            .schema_registry(registry)
    })
    .await;
    let path = "/schema-registry/subjects/orders-value/versions";

    let refused = exchange(served.http, "", "POST", path, SCHEMA.as_bytes()).await;
    assert_eq!(refused.status, 401);
    let body = String::from_utf8(refused.body).unwrap();
    assert!(body.contains("\"error_code\":401"), "{body}");
    assert!(
        refused
            .head
            .to_ascii_lowercase()
            .contains("content-type: application/vnd.schemaregistry.v1+json"),
        "{}",
        refused.head
    );
    let wrong = exchange(
        served.http,
        &basic("svc", "nope"),
        "POST",
        path,
        SCHEMA.as_bytes(),
    )
    .await;
    assert_eq!(wrong.status, 401);
    let nothing = exchange(
        served.http,
        &format!("Authorization: Bearer {TOKEN}\r\n"),
        "GET",
        "/schema-registry/subjects",
        b"",
    )
    .await;
    assert_eq!(
        String::from_utf8(nothing.body).unwrap(),
        "[]",
        "the refusals registered nothing"
    );

    let registered = exchange(
        served.http,
        &basic("orders-service", TOKEN),
        "POST",
        path,
        SCHEMA.as_bytes(),
    )
    .await;
    assert_eq!(registered.status, 200);
    assert_eq!(String::from_utf8(registered.body).unwrap(), r#"{"id":1}"#);
    let bearer = format!("Authorization: Bearer {TOKEN}\r\n");
    let fetched = exchange(
        served.http,
        &bearer,
        "GET",
        "/schema-registry/schemas/ids/1",
        b"",
    )
    .await;
    assert_eq!(fetched.status, 200);
    assert!(
        String::from_utf8(fetched.body)
            .unwrap()
            .contains("OrderPlaced")
    );

    // The server's body limit holds for the registry as for /v1.
    let big = format!(r#"{{"schema": "{}"}}"#, " ".repeat(8192));
    let too_big = exchange(served.http, &bearer, "POST", path, big.as_bytes()).await;
    assert_eq!(too_big.status, 413);
    served.stop().await;
}

#[tokio::test]
async fn without_a_registry_the_prefix_is_not_served() {
    let (broker, dir) = fresh_broker().await;
    let served = Served::serve(broker, Some(dir), |server| server).await;
    let reply = exchange(served.http, "", "GET", "/schema-registry/subjects", b"").await;
    assert_eq!(reply.status, 404);
    served.stop().await;
}

/// A token per role: one that owns the `orders.*` subjects, a reader of them, a publisher
/// with no schema permission, and the operator's `admin:#`.
#[tokio::test]
async fn tokens_may_read_and_write_only_the_subjects_their_patterns_match() {
    const OWNER: &str = "orders-owner-71c2";
    const READER: &str = "orders-reader-0b9e";
    const PUBLISHER: &str = "publisher-55d1";
    const OPERATOR: &str = "operator-e3a0";
    let (broker, dir) = fresh_broker().await;
    let registry = Arc::new(SchemaRegistry::open(&dir.path().join("schema-registry")).unwrap());
    let served = Served::serve(broker, Some(dir), |server| {
        server
            .auth(AuthConfig {
                tokens: vec![
                    grant("owner", OWNER, &["schema_write:orders.#"]),
                    grant("reader", READER, &["schema_read:orders.#"]),
                    grant("publisher", PUBLISHER, &["publish:#", "admin:orders.#"]),
                    grant("operator", OPERATOR, &["admin:#"]),
                ],
            })
            .schema_registry(registry)
    })
    .await;
    let call = |token: &'static str, method: &'static str, path: String, body: &'static str| {
        let http = served.http;
        async move {
            let reply = exchange(
                http,
                &format!("Authorization: Bearer {token}\r\n"),
                method,
                &format!("/schema-registry{path}"),
                body.as_bytes(),
            )
            .await;
            (reply.status, String::from_utf8(reply.body).unwrap())
        }
    };

    let (status, body) = call(
        OWNER,
        "POST",
        "/subjects/orders.placed-value/versions".into(),
        SCHEMA,
    )
    .await;
    assert_eq!((status, body.as_str()), (200, r#"{"id":1}"#));
    let (status, body) = call(
        OWNER,
        "POST",
        "/subjects/payments-value/versions".into(),
        SCHEMA,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("\"error_code\":40301"), "{body}");
    assert!(body.contains("schema_write"), "{body}");
    let other = r#"{"schema": "{\"type\":\"record\",\"name\":\"Paid\",\"fields\":[{\"name\":\"id\",\"type\":\"long\"}]}"}"#;
    let (status, body) = call(
        OPERATOR,
        "POST",
        "/subjects/payments-value/versions".into(),
        other,
    )
    .await;
    assert_eq!((status, body.as_str()), (200, r#"{"id":2}"#));

    // Reading: the reader sees the orders subject, not the payments one, and cannot write.
    let (status, _) = call(
        READER,
        "GET",
        "/subjects/orders.placed-value/versions/latest".into(),
        "",
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = call(
        READER,
        "POST",
        "/subjects/orders.placed-value".into(),
        SCHEMA,
    )
    .await;
    assert_eq!(status, 200, "a lookup is a read");
    let (status, _) = call(
        READER,
        "POST",
        "/subjects/orders.placed-value/versions".into(),
        SCHEMA,
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = call(
        READER,
        "GET",
        "/subjects/payments-value/versions".into(),
        "",
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = call(READER, "GET", "/schemas/ids/1".into(), "").await;
    assert_eq!(status, 200);
    let (status, _) = call(READER, "GET", "/schemas/ids/2".into(), "").await;
    assert_eq!(status, 403);
    let (status, body) = call(READER, "GET", "/subjects".into(), "").await;
    assert_eq!((status, body.as_str()), (200, r#"["orders.placed-value"]"#));
    let (_, body) = call(OPERATOR, "GET", "/subjects".into(), "").await;
    assert_eq!(body, r#"["orders.placed-value","payments-value"]"#);

    // Registry-wide settings: readable with any token, set only on every subject.
    let (status, _) = call(PUBLISHER, "GET", "/config".into(), "").await;
    assert_eq!(status, 200);
    let (status, _) = call(
        OWNER,
        "PUT",
        "/config".into(),
        r#"{"compatibility": "FULL"}"#,
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = call(
        OWNER,
        "PUT",
        "/config/orders.placed-value".into(),
        r#"{"compatibility": "FULL"}"#,
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = call(
        OPERATOR,
        "PUT",
        "/config".into(),
        r#"{"compatibility": "FULL"}"#,
    )
    .await;
    assert_eq!(status, 200);

    // `admin` on some names is not a schema permission.
    let (status, _) = call(
        PUBLISHER,
        "GET",
        "/subjects/orders.placed-value/versions".into(),
        "",
    )
    .await;
    assert_eq!(status, 403);
    let (status, body) = call(PUBLISHER, "GET", "/subjects".into(), "").await;
    assert_eq!((status, body.as_str()), (200, "[]"));
    served.stop().await;
}
