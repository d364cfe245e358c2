//! The REST API driven in process, request by request, as Confluent's clients call it:
//! shapes, error codes, and that refusals change nothing.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use ferry_schema_registry::{SchemaRegistry, api};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

const V1: &str = r#"{"type":"record","name":"OrderPlaced","namespace":"shop","fields":[{"name":"order_id","type":"string"},{"name":"amount_cents","type":"long"}]}"#;
const V1_1: &str = r#"{"type":"record","name":"OrderPlaced","namespace":"shop","fields":[{"name":"order_id","type":"string"},{"name":"amount_cents","type":"long"},{"name":"coupon","type":["null","string"],"default":null}]}"#;
const BREAKING: &str = r#"{"type":"record","name":"OrderPlaced","namespace":"shop","fields":[{"name":"order_id","type":"string"},{"name":"amount_cents","type":"string"}]}"#;

struct Api {
    router: Router,
    _dir: tempfile::TempDir,
    dir: std::path::PathBuf,
}

impl Api {
    fn new() -> Api {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_owned();
        Api::at(dir, path)
    }

    fn at(dir: tempfile::TempDir, path: std::path::PathBuf) -> Api {
        let registry = Arc::new(SchemaRegistry::open(&path).unwrap());
        Api {
            router: api::router(registry),
            _dir: dir,
            dir: path,
        }
    }

    /// The same directory opened again, as after a restart.
    fn reopen(self) -> Api {
        let Api { _dir, dir, .. } = self;
        Api::at(_dir, dir)
    }

    async fn call(&self, method: Method, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
        let (status, text) = self.call_text(method, uri, body).await;
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    async fn call_text(
        &self,
        method: Method,
        uri: &str,
        body: Option<Value>,
    ) -> (StatusCode, String) {
        let mut request = Request::builder().method(method).uri(uri);
        let body = match body {
            Some(value) => {
                request = request.header(header::CONTENT_TYPE, api::CONTENT_TYPE);
                Body::from(value.to_string())
            }
            None => Body::empty(),
        };
        let response = self
            .router
            .clone()
            .oneshot(request.body(body).unwrap())
            .await
            .unwrap();
        let status = response.status();
        if status != StatusCode::NOT_FOUND || uri != "/nope" {
            assert_eq!(
                response.headers()[header::CONTENT_TYPE],
                api::CONTENT_TYPE,
                "{uri}"
            );
        }
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    async fn register(&self, subject: &str, schema: &str) -> (StatusCode, Value) {
        self.call(
            Method::POST,
            &format!("/subjects/{subject}/versions"),
            Some(json!({ "schema": schema })),
        )
        .await
    }
}

fn code(body: &Value) -> u64 {
    body["error_code"]
        .as_u64()
        .unwrap_or_else(|| panic!("no error_code in {body}"))
}

#[tokio::test]
async fn register_fetch_and_evolve_a_subject_under_backward() {
    let api = Api::new();
    let (status, body) = api.register("orders-value", V1).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"id": 1})));
    // The same schema, formatted otherwise, is the same schema: same id, no new version.
    let pretty = serde_json::to_string_pretty(&serde_json::from_str::<Value>(V1).unwrap()).unwrap();
    assert_eq!(
        api.register("orders-value", &pretty).await.1,
        json!({"id": 1})
    );
    // Another subject with the same schema shares its id.
    assert_eq!(api.register("audit-value", V1).await.1, json!({"id": 1}));
    assert_eq!(api.register("orders-value", V1_1).await.1, json!({"id": 2}));

    let (_, subjects) = api.call(Method::GET, "/subjects", None).await;
    assert_eq!(subjects, json!(["audit-value", "orders-value"]));
    let (_, versions) = api
        .call(Method::GET, "/subjects/orders-value/versions", None)
        .await;
    assert_eq!(versions, json!([1, 2]));
    let (_, latest) = api
        .call(Method::GET, "/subjects/orders-value/versions/latest", None)
        .await;
    assert_eq!(
        latest,
        json!({"subject": "orders-value", "version": 2, "id": 2, "schema": V1_1})
    );
    let (_, first) = api
        .call(Method::GET, "/subjects/orders-value/versions/1", None)
        .await;
    assert_eq!(first["id"], 1);
    let (_, raw) = api
        .call_text(
            Method::GET,
            "/subjects/orders-value/versions/-1/schema",
            None,
        )
        .await;
    assert_eq!(raw, V1_1);
    let (_, by_id) = api.call(Method::GET, "/schemas/ids/1", None).await;
    assert_eq!(by_id, json!({"schema": V1}));
    let (_, raw) = api
        .call_text(Method::GET, "/schemas/ids/2/schema", None)
        .await;
    assert_eq!(raw, V1_1);
    let (_, holders) = api.call(Method::GET, "/schemas/ids/1/versions", None).await;
    assert_eq!(
        holders,
        json!([{"subject": "audit-value", "version": 1}, {"subject": "orders-value", "version": 1}])
    );
    let (_, found) = api
        .call(
            Method::POST,
            "/subjects/orders-value",
            Some(json!({"schema": V1})),
        )
        .await;
    assert_eq!(found["version"], 1);
    assert_eq!(found["id"], 1);
    let (_, types) = api.call(Method::GET, "/schemas/types", None).await;
    assert_eq!(types, json!(["JSON", "PROTOBUF", "AVRO"]));
}

#[tokio::test]
async fn an_incompatible_registration_is_409_40901_with_the_reason_and_adds_nothing() {
    let api = Api::new();
    api.register("orders-value", V1).await;
    let (status, body) = api.register("orders-value", BREAKING).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(code(&body), 40901);
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("amount_cents"), "{message}");
    assert!(message.contains("BACKWARD"), "{message}");
    let (_, versions) = api
        .call(Method::GET, "/subjects/orders-value/versions", None)
        .await;
    assert_eq!(versions, json!([1]));

    let (_, verdict) = api
        .call(
            Method::POST,
            "/compatibility/subjects/orders-value/versions/latest?verbose=true",
            Some(json!({"schema": BREAKING})),
        )
        .await;
    assert_eq!(verdict["is_compatible"], false);
    assert!(
        verdict["messages"][0]
            .as_str()
            .unwrap()
            .contains("amount_cents")
    );
    let (_, verdict) = api
        .call(
            Method::POST,
            "/compatibility/subjects/orders-value/versions/1?verbose=False",
            Some(json!({"schema": V1_1})),
        )
        .await;
    assert_eq!(verdict, json!({"is_compatible": true}));

    // With the subject at NONE, the same schema is taken.
    let (status, body) = api
        .call(
            Method::PUT,
            "/config/orders-value",
            Some(json!({"compatibility": "NONE"})),
        )
        .await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({"compatibility": "NONE"}))
    );
    assert_eq!(
        api.register("orders-value", BREAKING).await.1,
        json!({"id": 2})
    );
}

#[tokio::test]
async fn config_levels_global_and_per_subject() {
    let api = Api::new();
    assert_eq!(
        api.call(Method::GET, "/config", None).await.1,
        json!({"compatibilityLevel": "BACKWARD"})
    );
    let (status, body) = api
        .call(
            Method::PUT,
            "/config",
            Some(json!({"compatibility": "SIDEWAYS"})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42203)
    );
    let (status, body) = api
        .call(
            Method::PUT,
            "/config",
            Some(json!({"compatibilityGroup": "app"})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42205)
    );
    assert_eq!(
        api.call(Method::GET, "/config", None).await.1,
        json!({"compatibilityLevel": "BACKWARD"}),
        "a refused change changes nothing"
    );
    api.call(
        Method::PUT,
        "/config",
        Some(json!({"compatibility": "full_transitive"})),
    )
    .await;
    assert_eq!(
        api.call(Method::GET, "/config", None).await.1,
        json!({"compatibilityLevel": "FULL_TRANSITIVE"})
    );
    let (status, body) = api.call(Method::GET, "/config/orders-value", None).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, 40408));
    assert_eq!(
        api.call(
            Method::GET,
            "/config/orders-value?defaultToGlobal=true",
            None
        )
        .await
        .1,
        json!({"compatibilityLevel": "FULL_TRANSITIVE"})
    );
    api.call(
        Method::PUT,
        "/config/orders-value",
        Some(json!({"compatibility": "FORWARD"})),
    )
    .await;
    assert_eq!(
        api.call(Method::DELETE, "/config/orders-value", None)
            .await
            .1,
        json!({"compatibilityLevel": "FORWARD"})
    );
    let (status, _) = api.call(Method::GET, "/config/orders-value", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn soft_then_hard_deletes_with_confluents_codes() {
    let api = Api::new();
    api.register("orders-value", V1).await;
    api.register("orders-value", V1_1).await;

    let (status, body) = api
        .call(
            Method::DELETE,
            "/subjects/orders-value/versions/2?permanent=true",
            None,
        )
        .await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, 40407));
    assert_eq!(
        api.call(Method::DELETE, "/subjects/orders-value/versions/2", None)
            .await
            .1,
        json!(2)
    );
    let (status, body) = api
        .call(Method::DELETE, "/subjects/orders-value/versions/2", None)
        .await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, 40406));
    assert_eq!(
        api.call(Method::GET, "/subjects/orders-value/versions", None)
            .await
            .1,
        json!([1])
    );
    assert_eq!(
        api.call(
            Method::GET,
            "/subjects/orders-value/versions?deleted=true",
            None
        )
        .await
        .1,
        json!([1, 2])
    );
    // A soft-deleted schema is still served by id: messages written with it need it.
    assert_eq!(
        api.call(Method::GET, "/schemas/ids/2", None).await.0,
        StatusCode::OK
    );

    let (status, body) = api
        .call(
            Method::DELETE,
            "/subjects/orders-value?permanent=true",
            None,
        )
        .await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, 40405));
    assert_eq!(
        api.call(Method::DELETE, "/subjects/orders-value", None)
            .await
            .1,
        json!([1])
    );
    let (status, body) = api
        .call(Method::DELETE, "/subjects/orders-value", None)
        .await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, 40404));
    assert_eq!(api.call(Method::GET, "/subjects", None).await.1, json!([]));
    assert_eq!(
        api.call(Method::GET, "/subjects?deleted=true", None)
            .await
            .1,
        json!(["orders-value"])
    );
    let (status, body) = api
        .call(Method::GET, "/subjects/orders-value/versions/1", None)
        .await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, 40401));

    assert_eq!(
        api.call(
            Method::DELETE,
            "/subjects/orders-value?permanent=true",
            None
        )
        .await
        .1,
        json!([1, 2])
    );
    let (status, body) = api.call(Method::GET, "/schemas/ids/1", None).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, 40403));
    // Ids are not reused after a hard delete.
    assert_eq!(
        api.register("orders-value", BREAKING).await.1,
        json!({"id": 3})
    );
}

#[tokio::test]
async fn bad_requests_answer_confluents_codes() {
    let api = Api::new();
    let cases: Vec<(Method, &str, Option<Value>, StatusCode, u64)> = vec![
        (
            Method::GET,
            "/subjects/none/versions",
            None,
            StatusCode::NOT_FOUND,
            40401,
        ),
        (
            Method::POST,
            "/subjects/s/versions",
            Some(json!({"schema": "{\"type\": \"recrd\"}"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            42201,
        ),
        (
            Method::POST,
            "/subjects/s/versions",
            Some(json!({"schema": "{}", "schemaType": "PROTOBUF"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            42201,
        ),
        (
            Method::POST,
            "/subjects/s/versions",
            Some(json!({"schema": "{\"type\":\"strng\"}", "schemaType": "JSON"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            42201,
        ),
        (
            Method::POST,
            "/subjects/s/versions?normalize=true",
            Some(json!({"schema": V1})),
            StatusCode::UNPROCESSABLE_ENTITY,
            42205,
        ),
        (
            Method::POST,
            "/subjects/s/versions",
            Some(json!({"schema": V1, "surprise": 1})),
            StatusCode::UNPROCESSABLE_ENTITY,
            422,
        ),
        (
            Method::GET,
            "/subjects/s/versions/zero",
            None,
            StatusCode::UNPROCESSABLE_ENTITY,
            42202,
        ),
        (
            Method::GET,
            "/subjects/s/versions/0",
            None,
            StatusCode::UNPROCESSABLE_ENTITY,
            42202,
        ),
        (
            Method::GET,
            "/schemas/ids/77",
            None,
            StatusCode::NOT_FOUND,
            40403,
        ),
        (
            Method::PUT,
            "/mode",
            Some(json!({"mode": "SOMETIMES"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            42204,
        ),
        (Method::GET, "/nope", None, StatusCode::NOT_FOUND, 404),
    ];
    for (method, uri, body, status, error_code) in cases {
        let (got, answer) = api.call(method.clone(), uri, body.clone()).await;
        assert_eq!(
            (got, code(&answer)),
            (status, error_code),
            "{method} {uri} {body:?}: {answer}"
        );
    }
    let (_, body) = api
        .call(
            Method::POST,
            "/subjects/s/versions",
            Some(json!({"schema": "{\"type\":\"strng\"}", "schemaType": "JSON"})),
        )
        .await;
    assert!(
        body["message"].as_str().unwrap().contains("strng"),
        "the reason names what is wrong: {body}"
    );
    assert_eq!(api.call(Method::GET, "/subjects", None).await.1, json!([]));
}

#[tokio::test]
async fn readonly_mode_refuses_registrations_with_42205() {
    let api = Api::new();
    api.register("orders-value", V1).await;
    assert_eq!(
        api.call(Method::PUT, "/mode", Some(json!({"mode": "READONLY"})))
            .await
            .1,
        json!({"mode": "READONLY"})
    );
    let (status, body) = api.register("orders-value", V1_1).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42205)
    );
    let (status, body) = api
        .call(Method::DELETE, "/subjects/orders-value", None)
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42205)
    );
    // Reads still work.
    assert_eq!(
        api.call(Method::GET, "/schemas/ids/1", None).await.0,
        StatusCode::OK
    );
    api.call(Method::PUT, "/mode", Some(json!({"mode": "READWRITE"})))
        .await;
    assert_eq!(api.register("orders-value", V1_1).await.1, json!({"id": 2}));
}

#[tokio::test]
async fn import_mode_keeps_the_given_ids_and_needs_an_empty_registry() {
    let api = Api::new();
    api.register("orders-value", V1).await;
    let (status, body) = api
        .call(Method::PUT, "/mode", Some(json!({"mode": "IMPORT"})))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42205)
    );
    api.call(
        Method::PUT,
        "/mode?force=true",
        Some(json!({"mode": "IMPORT"})),
    )
    .await;
    let (_, body) = api
        .call(
            Method::POST,
            "/subjects/imported/versions",
            Some(json!({"schema": BREAKING, "id": 40, "version": 7})),
        )
        .await;
    assert_eq!(body, json!({"id": 40}));
    let (_, got) = api
        .call(Method::GET, "/subjects/imported/versions/7", None)
        .await;
    assert_eq!(got["id"], 40);
    // An id already holding another schema is refused.
    let (status, body) = api
        .call(
            Method::POST,
            "/subjects/other/versions",
            Some(json!({"schema": V1_1, "id": 40})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42207)
    );
    api.call(Method::PUT, "/mode", Some(json!({"mode": "READWRITE"})))
        .await;
    // New ids continue after the imported ones.
    assert_eq!(
        api.register("orders-value", V1_1).await.1,
        json!({"id": 41})
    );
    // Outside IMPORT an id is refused rather than dropped.
    let (status, body) = api
        .call(
            Method::POST,
            "/subjects/orders-value/versions",
            Some(json!({"schema": V1, "id": 9})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42205)
    );
}

#[tokio::test]
async fn references_resolve_named_types_from_other_subjects() {
    let api = Api::new();
    let address = r#"{"type":"record","name":"Address","namespace":"shop","fields":[{"name":"city","type":"string"}]}"#;
    let order = r#"{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"ship_to","type":"shop.Address"}]}"#;
    assert_eq!(api.register("address", address).await.1, json!({"id": 1}));
    let reference = json!([{"name": "shop.Address", "subject": "address", "version": 1}]);
    let (status, body) = api.register("order-value", order).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42201)
    );
    let (status, body) = api
        .call(
            Method::POST,
            "/subjects/order-value/versions",
            Some(json!({"schema": order, "references": reference})),
        )
        .await;
    assert_eq!((status, body), (StatusCode::OK, json!({"id": 2})));
    let (_, by_id) = api.call(Method::GET, "/schemas/ids/2", None).await;
    assert_eq!(by_id["references"], reference);
    assert_eq!(
        api.call(
            Method::GET,
            "/subjects/address/versions/1/referencedby",
            None
        )
        .await
        .1,
        json!([2])
    );
    // A referenced version cannot be deleted from under the schema that uses it.
    let (status, body) = api
        .call(Method::DELETE, "/subjects/address/versions/1", None)
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42206)
    );
}

#[tokio::test]
async fn everything_survives_a_reopen() {
    let api = Api::new();
    api.register("orders-value", V1).await;
    api.register("orders-value", V1_1).await;
    api.call(
        Method::PUT,
        "/config",
        Some(json!({"compatibility": "FULL"})),
    )
    .await;
    api.call(Method::DELETE, "/subjects/orders-value/versions/1", None)
        .await;
    let api = api.reopen();
    assert_eq!(
        api.call(
            Method::GET,
            "/subjects/orders-value/versions?deleted=true",
            None
        )
        .await
        .1,
        json!([1, 2])
    );
    assert_eq!(
        api.call(Method::GET, "/subjects/orders-value/versions", None)
            .await
            .1,
        json!([2])
    );
    assert_eq!(
        api.call(Method::GET, "/config", None).await.1,
        json!({"compatibilityLevel": "FULL"})
    );
    assert_eq!(api.register("audit-value", V1).await.1, json!({"id": 1}));
    assert_eq!(
        api.register("audit-value", BREAKING).await.0,
        StatusCode::CONFLICT
    );
}

impl Api {
    async fn register_typed(
        &self,
        subject: &str,
        schema_type: &str,
        schema: &str,
        references: Value,
    ) -> (StatusCode, Value) {
        self.call(
            Method::POST,
            &format!("/subjects/{subject}/versions"),
            Some(json!({"schema": schema, "schemaType": schema_type, "references": references})),
        )
        .await
    }
}

const JSON_V1: &str = r#"{"type":"object","additionalProperties":false,
    "properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer"}},
    "required":["order_id"]}"#;
/// v1 plus an optional property: a closed model may gain one.
const JSON_V2: &str = r#"{"type":"object","additionalProperties":false,
    "properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer"},
                  "coupon":{"type":"string"}},
    "required":["order_id"]}"#;

#[tokio::test]
async fn json_schemas_register_keep_their_id_when_reformatted_and_evolve_by_the_rules() {
    let api = Api::new();
    let (status, body) = api
        .register_typed("orders-value", "JSON", JSON_V1, json!([]))
        .await;
    assert_eq!((status, body), (StatusCode::OK, json!({"id": 1})));
    let pretty =
        serde_json::to_string_pretty(&serde_json::from_str::<Value>(JSON_V1).unwrap()).unwrap();
    assert_eq!(
        api.register_typed("orders-value", "JSON", &pretty, json!([]))
            .await
            .1,
        json!({"id": 1})
    );
    // The same text as AVRO is another schema (and not a valid Avro one).
    assert_eq!(
        api.register("orders-value", JSON_V1).await.0,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    let (_, found) = api
        .call(
            Method::POST,
            "/subjects/orders-value",
            Some(json!({"schema": pretty, "schemaType": "JSON"})),
        )
        .await;
    assert_eq!(
        (found["version"].clone(), found["schemaType"].clone()),
        (json!(1), json!("JSON"))
    );
    assert_eq!(
        api.register_typed("orders-value", "JSON", JSON_V2, json!([]))
            .await
            .1,
        json!({"id": 2})
    );
    let (_, by_id) = api.call(Method::GET, "/schemas/ids/2", None).await;
    assert_eq!(by_id, json!({"schema": JSON_V2, "schemaType": "JSON"}));

    // Narrowing a type breaks BACKWARD, with the property named.
    let narrowed = JSON_V2.replace(
        r#""amount_cents":{"type":"integer"}"#,
        r#""amount_cents":{"type":"integer","maximum":100}"#,
    );
    let (status, body) = api
        .register_typed("orders-value", "JSON", &narrowed, json!([]))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, 40901),
        "{body}"
    );
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("#/properties/amount_cents: maximum added"),
        "{message}"
    );
    // The same verdict from the compatibility endpoint, which changes nothing.
    let (_, verdict) = api
        .call(
            Method::POST,
            "/compatibility/subjects/orders-value/versions/latest?verbose=true",
            Some(json!({"schema": narrowed, "schemaType": "JSON"})),
        )
        .await;
    assert_eq!(verdict["is_compatible"], false);
    assert!(
        verdict["messages"][0]
            .as_str()
            .unwrap()
            .contains("maximum added"),
        "{verdict}"
    );
    // Removing a property from a closed model breaks BACKWARD; FORWARD takes it.
    let (status, _) = api
        .register_typed("orders-value", "JSON", JSON_V1, json!([]))
        .await;
    assert_eq!(status, StatusCode::OK, "v1 again is its old id");
    let (_, verdict) = api
        .call(
            Method::POST,
            "/compatibility/subjects/orders-value/versions/2?verbose=true",
            Some(json!({"schema": JSON_V1, "schemaType": "JSON"})),
        )
        .await;
    assert_eq!(verdict["is_compatible"], false, "{verdict}");
    assert!(
        verdict["messages"][0].as_str().unwrap().contains("coupon"),
        "{verdict}"
    );
    api.call(
        Method::PUT,
        "/config/orders-value",
        Some(json!({"compatibility": "FORWARD"})),
    )
    .await;
    let (_, verdict) = api
        .call(
            Method::POST,
            "/compatibility/subjects/orders-value/versions/2",
            Some(json!({"schema": JSON_V1, "schemaType": "JSON"})),
        )
        .await;
    assert_eq!(verdict, json!({"is_compatible": true}));
    // An AVRO schema cannot follow a JSON one.
    let (_, verdict) = api
        .call(
            Method::POST,
            "/compatibility/subjects/orders-value/versions/latest?verbose=true",
            Some(json!({"schema": V1})),
        )
        .await;
    assert!(
        verdict["messages"][0]
            .as_str()
            .unwrap()
            .contains("the new schema is AVRO and version 2 is JSON"),
        "{verdict}"
    );
    let (_, versions) = api
        .call(Method::GET, "/subjects/orders-value/versions", None)
        .await;
    assert_eq!(versions, json!([1, 2]));
}

#[tokio::test]
async fn a_json_schema_ref_resolves_to_the_referenced_subject_by_the_reference_name() {
    let api = Api::new();
    let address = r#"{"type":"object","properties":{"city":{"type":"string"}}}"#;
    api.register_typed("address", "JSON", address, json!([]))
        .await;
    let order = r#"{"type":"object","properties":{"ship_to":{"$ref":"address.json"}}}"#;
    let (status, body) = api
        .register_typed("orders-value", "JSON", order, json!([]))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42201)
    );
    assert!(
        body["message"].as_str().unwrap().contains("address.json"),
        "{body}"
    );
    let references = json!([{"name": "address.json", "subject": "address", "version": 1}]);
    let (status, body) = api
        .register_typed("orders-value", "JSON", order, references.clone())
        .await;
    assert_eq!((status, body), (StatusCode::OK, json!({"id": 2})));
    let (_, got) = api
        .call(Method::GET, "/subjects/orders-value/versions/1", None)
        .await;
    assert_eq!(got["references"], references);
    let (_, referencing) = api
        .call(
            Method::GET,
            "/subjects/address/versions/1/referencedby",
            None,
        )
        .await;
    assert_eq!(referencing, json!([2]));
}

const PROTO_V1: &str = r#"syntax = "proto3";
package shop;
message OrderPlaced {
  string order_id = 1;
  int64 amount_cents = 2;
}
"#;

#[tokio::test]
async fn protobuf_schemas_register_keep_their_id_when_reformatted_and_evolve_by_the_rules() {
    let api = Api::new();
    let (status, body) = api
        .register_typed("orders-value", "PROTOBUF", PROTO_V1, json!([]))
        .await;
    assert_eq!((status, body), (StatusCode::OK, json!({"id": 1})));
    let reformatted = format!(
        "// OrderPlaced, as the orders service writes it\n{}",
        PROTO_V1.replace("\n  ", " ")
    );
    assert_eq!(
        api.register_typed("orders-value", "PROTOBUF", &reformatted, json!([]))
            .await
            .1,
        json!({"id": 1})
    );
    let (_, found) = api
        .call(
            Method::POST,
            "/subjects/orders-value",
            Some(json!({"schema": reformatted, "schemaType": "PROTOBUF"})),
        )
        .await;
    assert_eq!(found["version"], 1, "{found}");
    let v2 = PROTO_V1.replace(
        "int64 amount_cents = 2;",
        "int64 amount_cents = 2;\n  string coupon = 3;",
    );
    assert_eq!(
        api.register_typed("orders-value", "PROTOBUF", &v2, json!([]))
            .await
            .1,
        json!({"id": 2})
    );
    // Field 2 reused as a string: refused with the field named.
    let reused = v2.replace("int64 amount_cents = 2;", "string amount_cents = 2;");
    let (status, body) = api
        .register_typed("orders-value", "PROTOBUF", &reused, json!([]))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, 40901),
        "{body}"
    );
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("OrderPlaced.amount_cents (field 2)"),
        "{message}"
    );
    // Not a .proto at all.
    let (status, body) = api
        .register_typed("orders-value", "PROTOBUF", "message {", json!([]))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42201)
    );
    let (_, versions) = api
        .call(Method::GET, "/subjects/orders-value/versions", None)
        .await;
    assert_eq!(versions, json!([1, 2]));
}

#[tokio::test]
async fn a_protobuf_import_resolves_to_the_reference_named_by_its_path() {
    let api = Api::new();
    let line = "syntax = \"proto3\"; package shop; message Line { string sku = 1; int64 qty = 2; }";
    api.register_typed("shop-line", "PROTOBUF", line, json!([]))
        .await;
    let order = "syntax = \"proto3\"; package shop; import \"shop/line.proto\";
                 message Order { repeated Line lines = 1; }";
    let (status, body) = api
        .register_typed("orders-value", "PROTOBUF", order, json!([]))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42201)
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("shop/line.proto"),
        "{body}"
    );
    let references = json!([{"name": "shop/line.proto", "subject": "shop-line", "version": 1}]);
    let (status, body) = api
        .register_typed("orders-value", "PROTOBUF", order, references)
        .await;
    assert_eq!((status, body), (StatusCode::OK, json!({"id": 2})));
    // The referenced version cannot go while the order references it.
    let (status, body) = api
        .call(Method::DELETE, "/subjects/shop-line/versions/1", None)
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42206)
    );
}

#[tokio::test]
async fn a_subject_mode_overrides_the_global_one_and_survives_a_restart() {
    let api = Api::new();
    api.register("orders-value", V1).await;
    let (status, body) = api.call(Method::GET, "/mode/orders-value", None).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, 40409));
    assert_eq!(
        api.call(Method::GET, "/mode/orders-value?defaultToGlobal=true", None)
            .await
            .1,
        json!({"mode": "READWRITE"})
    );
    assert_eq!(
        api.call(
            Method::PUT,
            "/mode/orders-value",
            Some(json!({"mode": "READONLY"}))
        )
        .await
        .1,
        json!({"mode": "READONLY"})
    );
    let api = api.reopen();
    assert_eq!(
        api.call(Method::GET, "/mode/orders-value", None).await.1,
        json!({"mode": "READONLY"})
    );
    let (status, body) = api.register("orders-value", V1_1).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42205)
    );
    let (status, body) = api
        .call(Method::DELETE, "/subjects/orders-value", None)
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42205)
    );
    // Another subject follows the global mode.
    assert_eq!(api.register("audit-value", V1).await.1, json!({"id": 1}));
    let (status, body) = api
        .call(
            Method::PUT,
            "/mode/orders-value",
            Some(json!({"mode": "SOMETIMES"})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42204)
    );
    // IMPORT on a subject with versions needs force.
    let (status, body) = api
        .call(
            Method::PUT,
            "/mode/orders-value",
            Some(json!({"mode": "IMPORT"})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, 42205)
    );
    assert_eq!(
        api.call(Method::DELETE, "/mode/orders-value", None).await.1,
        json!({"mode": "READONLY"})
    );
    let (status, body) = api.call(Method::DELETE, "/mode/orders-value", None).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, 40409));
    assert_eq!(api.register("orders-value", V1_1).await.1, json!({"id": 2}));
    // A subject's READWRITE overrides a global READONLY.
    api.call(Method::PUT, "/mode", Some(json!({"mode": "READONLY"})))
        .await;
    api.call(
        Method::PUT,
        "/mode/fresh-value",
        Some(json!({"mode": "READWRITE"})),
    )
    .await;
    assert_eq!(api.register("fresh-value", V1).await.0, StatusCode::OK);
    assert_eq!(
        api.register("audit-value", V1_1).await.0,
        StatusCode::UNPROCESSABLE_ENTITY
    );
}

#[tokio::test]
async fn protobuf_schemas_travel_as_base64_descriptors_as_confluents_serializers_send_them() {
    let api = Api::new();
    api.register_typed("orders-value", "PROTOBUF", PROTO_V1, json!([]))
        .await;
    api.register("avro-value", V1).await;
    let (status, by_id) = api
        .call(Method::GET, "/schemas/ids/1?format=serialized", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{by_id}");
    assert_eq!(by_id["schemaType"], "PROTOBUF");
    let descriptor = by_id["schema"].as_str().unwrap().to_owned();
    assert!(
        !descriptor.contains("message"),
        "base64, not text: {descriptor}"
    );
    let (_, latest) = api
        .call(
            Method::GET,
            "/subjects/orders-value/versions/latest?format=serialized",
            None,
        )
        .await;
    assert_eq!(latest["schema"], descriptor.as_str());
    let (_, raw) = api
        .call_text(Method::GET, "/schemas/ids/1/schema?format=serialized", None)
        .await;
    assert_eq!(raw, descriptor);
    // Registered in that form, it is a Protobuf schema like any other: the same form
    // again keeps its id, and an incompatible change to it is refused.
    let (status, body) = api
        .register_typed("copy-value", "PROTOBUF", &descriptor, json!([]))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = body["id"].clone();
    assert_eq!(
        api.register_typed("copy-value", "PROTOBUF", &descriptor, json!([]))
            .await
            .1["id"],
        id
    );
    let reused = PROTO_V1.replace("int64 amount_cents = 2;", "string amount_cents = 2;");
    let (status, _) = api
        .register_typed("copy-value", "PROTOBUF", &reused, json!([]))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    // Other formats, and `serialized` for another schema type, are refused.
    for uri in [
        "/schemas/ids/2?format=serialized",
        "/schemas/ids/1?format=resolved",
    ] {
        let (status, body) = api.call(Method::GET, uri, None).await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::UNPROCESSABLE_ENTITY, 42205),
            "{uri}"
        );
    }
}
