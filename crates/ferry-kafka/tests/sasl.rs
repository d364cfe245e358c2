//! The endpoint with SASL users and TLS, over real sockets: the handshake and its
//! refusals, the raw v0 exchange, requests before authentication, and each API held to the
//! user's permissions (an allowed topic works beside a denied one, answered
//! TOPIC_AUTHORIZATION_FAILED on the same connection). SCRAM is driven by kafka-python
//! (`kafka_python.rs`); its exchange is checked against RFC 7677's vector in `auth/scram.rs`.

mod common;

use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use ferry_broker::TopicSpec;
use ferry_kafka::{KafkaConfig, Security, User, Users, token_hash};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiVersionsRequest, CreatePartitionsRequest, CreateTopicsRequest, DescribeConfigsRequest,
    FetchRequest, GroupId, InitProducerIdRequest, JoinGroupRequest, MetadataRequest,
    OffsetCommitRequest, ProduceRequest, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::records::{Compression, Record, TimestampType};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const TOKEN: &str = "orders-token-7f3a9c";

fn security(tls: Option<Arc<rustls::ServerConfig>>) -> Security {
    let users = Users::new(vec![
        User {
            name: "orders-service".into(),
            sha256: token_hash(TOKEN),
            permissions: ["publish:orders.#", "consume:orders.#", "admin:orders.#"]
                .iter()
                .map(|p| p.parse().unwrap())
                .collect(),
            scram_secret: None,
        },
        User {
            name: "reader".into(),
            sha256: token_hash("reader-token"),
            permissions: vec!["consume:#".parse().unwrap()],
            scram_secret: None,
        },
        User {
            name: "writer".into(),
            sha256: token_hash("writer-token"),
            permissions: vec!["publish:orders.#".parse().unwrap()],
            scram_secret: None,
        },
    ])
    .unwrap();
    Security {
        users: Some(Arc::new(users)),
        tls,
    }
}

fn config(security: Security) -> KafkaConfig {
    KafkaConfig {
        security,
        ..KafkaConfig::default()
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A raw client over TCP or TLS: requests encoded and answers decoded by the codec.
struct Conn {
    io: Box<dyn Io>,
    correlation: i32,
}

impl Conn {
    async fn tcp(addr: std::net::SocketAddr) -> Conn {
        Conn {
            io: Box::new(tokio::net::TcpStream::connect(addr).await.unwrap()),
            correlation: 0,
        }
    }

    async fn send_frame(&mut self, body: &[u8]) {
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(body);
        self.io.write_all(&frame).await.unwrap();
        self.io.flush().await.unwrap();
    }

    async fn read_frame(&mut self) -> Option<Bytes> {
        let mut len = [0u8; 4];
        self.io.read_exact(&mut len).await.ok()?;
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        self.io.read_exact(&mut body).await.ok()?;
        Some(Bytes::from(body))
    }

    async fn send<R: Request>(&mut self, request: &R, version: i16) -> i32 {
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str("sasl-test")));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, R::header_version(version))
            .unwrap();
        request.encode(&mut body, version).unwrap();
        self.send_frame(&body).await;
        self.correlation
    }

    async fn call<R: Request>(&mut self, request: &R, version: i16) -> R::Response {
        let correlation = self.send(request, version).await;
        let mut frame = self.read_frame().await.expect("an answer");
        let header_version = <R::Response as HeaderVersion>::header_version(version);
        let header = ResponseHeader::decode(&mut frame, header_version).unwrap();
        assert_eq!(header.correlation_id, correlation);
        let response = R::Response::decode(&mut frame, version).unwrap();
        assert_eq!(frame.remaining(), 0);
        response
    }

    /// Whether the server closed the connection (within two seconds).
    async fn closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(
            tokio::time::timeout(std::time::Duration::from_secs(2), self.io.read(&mut byte)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }

    /// SaslHandshake v1 for PLAIN, then SaslAuthenticate v2 with `user` and `token`: the
    /// answer's error code and message.
    async fn plain(&mut self, user: &str, token: &str) -> (i16, Option<String>) {
        let handshake = self
            .call(
                &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
                1,
            )
            .await;
        assert_eq!(handshake.error_code, 0);
        assert_eq!(
            handshake.mechanisms,
            vec![StrBytes::from_static_str("PLAIN")]
        );
        let answer = self
            .call(
                &SaslAuthenticateRequest::default()
                    .with_auth_bytes(Bytes::from(format!("\0{user}\0{token}"))),
                2,
            )
            .await;
        if answer.error_code == 0 {
            assert_eq!(
                answer.session_lifetime_ms, 0,
                "no re-authentication asked for"
            );
        }
        (
            answer.error_code,
            answer.error_message.map(|m| m.to_string()),
        )
    }
}

fn name(n: &str) -> TopicName {
    TopicName(StrBytes::from_string(n.to_owned()))
}

fn batch(value: &str) -> Bytes {
    let record = Record {
        transactional: false,
        control: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 0,
        key: None,
        value: Some(Bytes::from(value.to_owned())),
        headers: Default::default(),
        delete_horizon: false,
    };
    common::encode_batch(&[record], Compression::None)
}

fn produce(topics: &[&str]) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(
            topics
                .iter()
                .map(|t| {
                    TopicProduceData::default()
                        .with_name(name(t))
                        .with_partition_data(vec![
                            PartitionProduceData::default()
                                .with_index(0)
                                .with_records(Some(batch("hello"))),
                        ])
                })
                .collect(),
        )
}

#[tokio::test]
async fn an_authenticated_user_gets_its_topics_and_topic_authorization_failed_for_others() {
    let server = common::start(config(security(None))).await;
    server
        .broker
        .create_topic("payments", TopicSpec::with_partitions(1))
        .await
        .unwrap();
    let mut conn = Conn::tcp(server.addr).await;
    assert_eq!(conn.plain("orders-service", TOKEN).await, (0, None));

    // CreateTopics: admin on orders.# only.
    let created = conn
        .call(
            &CreateTopicsRequest::default()
                .with_timeout_ms(5000)
                .with_topics(vec![
                    CreatableTopic::default()
                        .with_name(name("orders.eu"))
                        .with_num_partitions(1)
                        .with_replication_factor(1),
                    CreatableTopic::default()
                        .with_name(name("payments.eu"))
                        .with_num_partitions(1)
                        .with_replication_factor(1),
                ]),
            4,
        )
        .await;
    let codes: Vec<_> = created
        .topics
        .iter()
        .map(|t| (t.name.0.to_string(), t.error_code))
        .collect();
    assert!(codes.contains(&("orders.eu".into(), 0)), "{codes:?}");
    assert!(codes.contains(&("payments.eu".into(), 29)), "{codes:?}");
    assert!(server.broker.describe_topic("payments.eu").is_err());

    // Produce: the allowed topic stores, the denied one is TOPIC_AUTHORIZATION_FAILED.
    let produced = conn.call(&produce(&["orders.eu", "payments"]), 8).await;
    for topic in &produced.responses {
        let code = topic.partition_responses[0].error_code;
        match topic.name.0.as_str() {
            "orders.eu" => assert_eq!(code, 0),
            "payments" => assert_eq!(code, 29),
            other => panic!("unexpected topic {other}"),
        }
    }
    assert_eq!(produced.responses.len(), 2);
    let payments = server.broker.describe_topic("payments").unwrap();
    assert_eq!(payments.partitions[0].end_offset, 0, "nothing stored");

    // Fetch: the same split, on the same connection.
    let fetched = conn
        .call(
            &FetchRequest::default()
                .with_max_wait_ms(0)
                .with_max_bytes(1 << 20)
                .with_topics(
                    ["orders.eu", "payments"]
                        .iter()
                        .map(|t| {
                            FetchTopic::default()
                                .with_topic(name(t))
                                .with_partitions(vec![
                                    FetchPartition::default()
                                        .with_partition(0)
                                        .with_partition_max_bytes(1 << 20),
                                ])
                        })
                        .collect(),
                ),
            12,
        )
        .await;
    for topic in &fetched.responses {
        let partition = &topic.partitions[0];
        match topic.topic.0.as_str() {
            "orders.eu" => {
                assert_eq!(partition.error_code, 0);
                assert!(partition.records.as_ref().is_some_and(|r| !r.is_empty()));
            }
            "payments" => assert_eq!(partition.error_code, 29),
            other => panic!("unexpected topic {other}"),
        }
    }

    // Metadata of every topic lists only what the user may see; a named denied topic is
    // TOPIC_AUTHORIZATION_FAILED; a missing one it may not create is not created.
    let all = conn
        .call(&MetadataRequest::default().with_topics(None), 12)
        .await;
    let names: Vec<_> = all
        .topics
        .iter()
        .map(|t| t.name.as_ref().unwrap().0.to_string())
        .collect();
    assert_eq!(names, vec!["orders.eu"]);
    let named = conn
        .call(
            &MetadataRequest::default()
                .with_allow_auto_topic_creation(true)
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(name("payments"))),
                    MetadataRequestTopic::default().with_name(Some(name("orders.new"))),
                ])),
            12,
        )
        .await;
    let codes: Vec<_> = named
        .topics
        .iter()
        .map(|t| (t.name.as_ref().unwrap().0.to_string(), t.error_code))
        .collect();
    assert!(codes.contains(&("payments".into(), 29)), "{codes:?}");
    assert!(codes.contains(&("orders.new".into(), 0)), "{codes:?}");
    assert!(
        server.broker.describe_topic("orders.new").is_ok(),
        "admin may auto-create"
    );
    assert!(!conn.closed().await, "refusals keep the connection open");
}

#[tokio::test]
async fn group_apis_need_consume_and_commits_are_checked_per_topic() {
    let server = common::start(config(security(None))).await;
    for topic in ["orders.eu", "payments"] {
        server
            .broker
            .create_topic(topic, TopicSpec::with_partitions(1))
            .await
            .unwrap();
    }
    let commit = |topics: &[&str]| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("billing")))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        OffsetCommitRequestTopic::default()
                            .with_name(name(t))
                            .with_partitions(vec![
                                OffsetCommitRequestPartition::default()
                                    .with_partition_index(0)
                                    .with_committed_offset(0),
                            ])
                    })
                    .collect(),
            )
    };

    // A user with no consume permission: every group API is GROUP_AUTHORIZATION_FAILED
    // (30), and nothing is committed; its producer id is granted (it may publish).
    let mut writer = Conn::tcp(server.addr).await;
    assert_eq!(writer.plain("writer", "writer-token").await, (0, None));
    let joined = writer
        .call(
            &JoinGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("billing")))
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(10_000)
                .with_protocol_type(StrBytes::from_static_str("consumer")),
            5,
        )
        .await;
    assert_eq!(joined.error_code, 30);
    let committed = writer.call(&commit(&["orders.eu"]), 8).await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 30);
    let id = writer
        .call(
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000),
            4,
        )
        .await;
    assert_eq!(id.error_code, 0);
    assert!(id.producer_id.0 >= 0);

    // A consumer of orders.#: the group is its, commits on orders.eu stored and on
    // payments TOPIC_AUTHORIZATION_FAILED (29); no producer id without publish (31).
    let mut reader_of_orders = Conn::tcp(server.addr).await;
    assert_eq!(
        reader_of_orders.plain("orders-service", TOKEN).await,
        (0, None)
    );
    let committed = reader_of_orders
        .call(&commit(&["orders.eu", "payments"]), 8)
        .await;
    let codes: Vec<_> = committed
        .topics
        .iter()
        .map(|t| (t.name.0.to_string(), t.partitions[0].error_code))
        .collect();
    assert!(codes.contains(&("orders.eu".into(), 0)), "{codes:?}");
    assert!(codes.contains(&("payments".into(), 29)), "{codes:?}");
    assert!(
        server
            .broker
            .group_offsets("orders.eu", "billing")
            .unwrap()
            .contains_key(&0)
    );
    assert!(
        server
            .broker
            .group_offsets("payments", "billing")
            .map(|o| o.is_empty())
            .unwrap_or(true),
        "nothing committed on the denied topic"
    );
    let mut reader = Conn::tcp(server.addr).await;
    assert_eq!(reader.plain("reader", "reader-token").await, (0, None));
    let id = reader
        .call(
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000),
            4,
        )
        .await;
    assert_eq!(id.error_code, 31);
}

#[tokio::test]
async fn admin_apis_need_admin_on_the_topic_or_the_cluster() {
    let server = common::start(config(security(None))).await;
    for topic in ["orders.eu", "payments"] {
        server
            .broker
            .create_topic(topic, TopicSpec::with_partitions(1))
            .await
            .unwrap();
    }
    let grow = |topics: &[&str]| {
        CreatePartitionsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        CreatePartitionsTopic::default()
                            .with_name(name(t))
                            .with_count(2)
                    })
                    .collect(),
            )
    };
    // admin on orders.# only: orders.eu grows, payments is TOPIC_AUTHORIZATION_FAILED (29)
    // and keeps its one partition; the broker's configs are the cluster's (31).
    let mut conn = Conn::tcp(server.addr).await;
    assert_eq!(conn.plain("orders-service", TOKEN).await, (0, None));
    let grown = conn.call(&grow(&["orders.eu", "payments"]), 3).await;
    let codes: Vec<_> = grown
        .results
        .iter()
        .map(|r| (r.name.0.to_string(), r.error_code))
        .collect();
    assert!(codes.contains(&("orders.eu".into(), 0)), "{codes:?}");
    assert!(codes.contains(&("payments".into(), 29)), "{codes:?}");
    assert_eq!(
        server
            .broker
            .describe_topic("orders.eu")
            .unwrap()
            .partitions
            .len(),
        2
    );
    assert_eq!(
        server
            .broker
            .describe_topic("payments")
            .unwrap()
            .partitions
            .len(),
        1
    );
    let described = conn
        .call(
            &DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("orders.eu")),
                DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(StrBytes::from_static_str("0")),
            ]),
            4,
        )
        .await;
    let codes: Vec<_> = described
        .results
        .iter()
        .map(|r| (r.resource_name.to_string(), r.error_code))
        .collect();
    assert!(codes.contains(&("orders.eu".into(), 0)), "{codes:?}");
    assert!(codes.contains(&("0".into(), 31)), "{codes:?}");

    // A reader (consume on everything, no admin) changes nothing.
    let mut reader = Conn::tcp(server.addr).await;
    assert_eq!(reader.plain("reader", "reader-token").await, (0, None));
    let grown = reader.call(&grow(&["orders.eu"]), 3).await;
    assert_eq!(grown.results[0].error_code, 29);
    assert_eq!(
        server
            .broker
            .describe_topic("orders.eu")
            .unwrap()
            .partitions
            .len(),
        2
    );
}

#[tokio::test]
async fn a_user_without_admin_does_not_auto_create_on_metadata() {
    let server = common::start(config(security(None))).await;
    let mut conn = Conn::tcp(server.addr).await;
    assert_eq!(conn.plain("reader", "reader-token").await, (0, None));
    let answer = conn
        .call(
            &MetadataRequest::default()
                .with_allow_auto_topic_creation(true)
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(name("fresh"))),
                ])),
            12,
        )
        .await;
    assert_eq!(answer.topics[0].error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    assert!(server.broker.describe_topic("fresh").is_err());
}

#[tokio::test]
async fn a_wrong_token_is_sasl_authentication_failed_and_closes_the_connection() {
    let server = common::start(config(security(None))).await;
    let mut conn = Conn::tcp(server.addr).await;
    let (code, message) = conn.plain("orders-service", "not-the-token").await;
    assert_eq!(code, 58, "SASL_AUTHENTICATION_FAILED");
    assert!(message.unwrap().contains("wrong user name or token"));
    assert!(conn.closed().await);
    // Another user's token under this name fails the same way.
    let mut conn = Conn::tcp(server.addr).await;
    assert_eq!(conn.plain("orders-service", "reader-token").await.0, 58);
}

#[tokio::test]
async fn a_request_before_authentication_closes_the_connection_but_api_versions_is_answered() {
    let server = common::start(config(security(None))).await;
    let mut conn = Conn::tcp(server.addr).await;
    let versions = conn.call(&ApiVersionsRequest::default(), 3).await;
    assert_eq!(versions.error_code, 0);
    assert!(
        versions
            .api_keys
            .iter()
            .any(|k| k.api_key == 17 && k.max_version == 1)
    );
    assert!(
        versions
            .api_keys
            .iter()
            .any(|k| k.api_key == 36 && k.max_version == 2)
    );
    conn.send(&MetadataRequest::default().with_topics(None), 12)
        .await;
    assert!(
        conn.closed().await,
        "Metadata before SASL closes the connection"
    );

    // SaslAuthenticate without a handshake: ILLEGAL_SASL_STATE, then closed.
    let mut conn = Conn::tcp(server.addr).await;
    let answer = conn
        .call(
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0a\0b")),
            2,
        )
        .await;
    assert_eq!(answer.error_code, 34, "ILLEGAL_SASL_STATE");
    assert!(conn.closed().await);
}

#[tokio::test]
async fn a_mechanism_not_offered_is_answered_with_the_offered_list() {
    // No token has a SCRAM secret: SCRAM is not offered.
    let server = common::start(config(security(None))).await;
    let mut conn = Conn::tcp(server.addr).await;
    let answer = conn
        .call(
            &SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str("SCRAM-SHA-256")),
            1,
        )
        .await;
    assert_eq!(answer.error_code, 33, "UNSUPPORTED_SASL_MECHANISM");
    assert_eq!(answer.mechanisms, vec![StrBytes::from_static_str("PLAIN")]);
    assert!(conn.closed().await);
}

#[tokio::test]
async fn a_v0_handshake_takes_the_token_as_a_bare_frame() {
    let server = common::start(config(security(None))).await;
    let mut conn = Conn::tcp(server.addr).await;
    let handshake = conn
        .call(
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
            0,
        )
        .await;
    assert_eq!(handshake.error_code, 0);
    conn.send_frame(format!("\0orders-service\0{TOKEN}").as_bytes())
        .await;
    assert_eq!(
        conn.read_frame().await.unwrap().len(),
        0,
        "PLAIN's empty reply"
    );
    let answer = conn
        .call(&MetadataRequest::default().with_topics(None), 12)
        .await;
    assert_eq!(answer.brokers.len(), 1);

    // A wrong token in a bare frame: closed, with no answer (v0 has no error field).
    let mut conn = Conn::tcp(server.addr).await;
    conn.call(
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        0,
    )
    .await;
    conn.send_frame(b"\0orders-service\0wrong").await;
    assert!(conn.read_frame().await.is_none());
}

#[tokio::test]
async fn sasl_apis_after_authentication_or_on_an_open_endpoint_are_illegal_sasl_state() {
    let server = common::start(KafkaConfig::default()).await;
    let mut conn = Conn::tcp(server.addr).await;
    let answer = conn
        .call(
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
            1,
        )
        .await;
    assert_eq!(answer.error_code, 34);
    // The open endpoint goes on answering.
    let metadata = conn
        .call(&MetadataRequest::default().with_topics(None), 12)
        .await;
    assert_eq!(metadata.brokers.len(), 1);

    let server = common::start(config(security(None))).await;
    let mut conn = Conn::tcp(server.addr).await;
    assert_eq!(conn.plain("reader", "reader-token").await.0, 0);
    let again = conn
        .call(
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0a\0b")),
            2,
        )
        .await;
    assert_eq!(again.error_code, 34);
    assert!(!conn.closed().await);
}

fn tls_pair() -> (Arc<rustls::ServerConfig>, tokio_rustls::TlsConnector) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let pki = ferry_testkit::pki::TestPki::generate();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = CertificateDer::pem_slice_iter(pki.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(pki.key_pem.as_bytes()).unwrap();
    let server = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(pki.ca_der.clone())).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (
        Arc::new(server),
        tokio_rustls::TlsConnector::from(Arc::new(client)),
    )
}

#[tokio::test]
async fn sasl_ssl_serves_over_tls_and_refuses_plaintext() {
    let (server_tls, connector) = tls_pair();
    let server = common::start(config(security(Some(server_tls)))).await;
    server
        .broker
        .create_topic("orders.tls", TopicSpec::with_partitions(1))
        .await
        .unwrap();
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let tls = connector
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .unwrap();
    let mut conn = Conn {
        io: Box::new(tls),
        correlation: 0,
    };
    assert_eq!(conn.plain("orders-service", TOKEN).await, (0, None));
    let produced = conn.call(&produce(&["orders.tls"]), 8).await;
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);

    // A client speaking Kafka in the clear gets no answer: the bytes are not a TLS hello.
    let mut plain = Conn::tcp(server.addr).await;
    plain.send(&ApiVersionsRequest::default(), 3).await;
    assert!(plain.read_frame().await.is_none());
}

#[tokio::test]
async fn cluster_admin_apis_need_admin_everywhere_and_topic_partitions_need_seeing_the_topic() {
    use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
    use kafka_protocol::messages::{
        DescribeLogDirsRequest, DescribeTopicPartitionsRequest, ListConfigResourcesRequest,
        ListPartitionReassignmentsRequest,
    };
    let server = common::start(config(security(None))).await;
    for topic in ["orders.eu", "payments"] {
        server
            .broker
            .create_topic(topic, TopicSpec::with_partitions(1))
            .await
            .unwrap();
    }
    // admin on orders.# only: not the cluster's admin (CLUSTER_AUTHORIZATION_FAILED, 31).
    let mut conn = Conn::tcp(server.addr).await;
    assert_eq!(conn.plain("orders-service", TOKEN).await, (0, None));
    let dirs = conn
        .call(&DescribeLogDirsRequest::default().with_topics(None), 4)
        .await;
    assert_eq!((dirs.error_code, dirs.results.len()), (31, 0));
    let listed = conn.call(&ListConfigResourcesRequest::default(), 1).await;
    assert_eq!((listed.error_code, listed.config_resources.len()), (31, 0));
    let moves = conn
        .call(
            &ListPartitionReassignmentsRequest::default().with_timeout_ms(1000),
            0,
        )
        .await;
    assert_eq!(moves.error_code, 31);
    let moved = conn
        .call(
            &kafka_protocol::messages::AlterPartitionReassignmentsRequest::default(),
            0,
        )
        .await;
    assert_eq!(moved.error_code, 31);
    let elected = conn
        .call(
            &kafka_protocol::messages::ElectLeadersRequest::default().with_topic_partitions(Some(
                vec![
                    kafka_protocol::messages::elect_leaders_request::TopicPartitions::default()
                        .with_topic(name("orders.eu"))
                        .with_partitions(vec![0]),
                ],
            )),
            2,
        )
        .await;
    assert_eq!(elected.error_code, 31);
    assert_eq!(
        elected.replica_election_results[0].partition_result[0].error_code,
        31
    );
    // v0 has no top-level code: the partitions carry the refusal.
    let elected = conn
        .call(
            &kafka_protocol::messages::ElectLeadersRequest::default().with_topic_partitions(Some(
                vec![
                    kafka_protocol::messages::elect_leaders_request::TopicPartitions::default()
                        .with_topic(name("orders.eu"))
                        .with_partitions(vec![0]),
                ],
            )),
            0,
        )
        .await;
    assert_eq!(
        elected.replica_election_results[0].partition_result[0].error_code,
        31
    );

    // DescribeTopicPartitions: a topic the user cannot see is TOPIC_AUTHORIZATION_FAILED
    // (29) when named, and left out when every topic is asked for.
    let ask = |topics: &[&str]| {
        DescribeTopicPartitionsRequest::default()
            .with_response_partition_limit(100)
            .with_topics(
                topics
                    .iter()
                    .map(|t| TopicRequest::default().with_name(name(t)))
                    .collect(),
            )
    };
    let named = conn.call(&ask(&["orders.eu", "payments"]), 0).await;
    let codes: Vec<_> = named
        .topics
        .iter()
        .map(|t| {
            (
                t.name.as_ref().unwrap().to_string(),
                t.error_code,
                t.partitions.len(),
            )
        })
        .collect();
    assert_eq!(
        codes,
        [
            ("orders.eu".to_owned(), 0, 1),
            ("payments".to_owned(), 29, 0)
        ]
    );
    let every = conn.call(&ask(&[]), 0).await;
    let names: Vec<_> = every
        .topics
        .iter()
        .map(|t| t.name.as_ref().unwrap().to_string())
        .collect();
    assert_eq!(names, ["orders.eu"]);
}
