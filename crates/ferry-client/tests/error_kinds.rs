//! The kind of a failure crosses the wire: a real server's refusals arrive with their kind,
//! including the ones that share a gRPC code (a conflict with what exists and a stale lease
//! are both FAILED_PRECONDITION).

use ferry_broker::{Broker, BrokerConfig};
use ferry_client::{Client, ErrorKind, proto};

#[tokio::test]
async fn refusals_arrive_with_their_kind() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    let server = ferry_server::Server::new(broker)
        .start_local()
        .await
        .unwrap();
    let client = Client::connect(&format!("ferry://{}", server.grpc_addr()))
        .await
        .unwrap();

    let missing = client.describe_queue("nope").await.unwrap_err();
    assert_eq!(missing.kind(), Some(ErrorKind::NotFound), "{missing}");

    client
        .create_topic("orders", proto::TopicSpec::default())
        .await
        .unwrap();
    let subscription = proto::SubscriptionSpec {
        topic: "orders".into(),
        ..Default::default()
    };
    client
        .create_subscription("billing", subscription)
        .await
        .unwrap();
    let conflict = client.delete_topic("orders").await.unwrap_err();
    assert_eq!(conflict.code(), Some(tonic::Code::FailedPrecondition));
    assert_eq!(conflict.kind(), Some(ErrorKind::Conflict), "{conflict}");

    client
        .create_queue("jobs", proto::QueueSpec::default())
        .await
        .unwrap();
    client
        .publish("jobs", vec![ferry_client::Message::new("x")])
        .await
        .unwrap();
    let delivery = client
        .receive("jobs", "w1", 1, None)
        .await
        .unwrap()
        .remove(0);
    // A token that is not the delivery's current lease: the same code as the conflict
    // above, another kind.
    let stale = client
        .ack("jobs", delivery.seq, delivery.token + 1)
        .await
        .unwrap_err();
    assert_eq!(stale.code(), Some(tonic::Code::FailedPrecondition));
    assert_eq!(stale.kind(), Some(ErrorKind::StaleLease), "{stale}");

    let invalid = client
        .create_queue("bad name", proto::QueueSpec::default())
        .await
        .unwrap_err();
    assert_eq!(invalid.kind(), Some(ErrorKind::Invalid), "{invalid}");

    server.stop().await.unwrap();
}
