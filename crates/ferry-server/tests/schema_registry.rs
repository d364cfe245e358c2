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
