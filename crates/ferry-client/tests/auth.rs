//! The client against a server that requires API tokens: with a token every call works,
//! the consume stream included; without one, or with a wrong one, calls are refused as
//! UNAUTHENTICATED and a token without the permission as PERMISSION_DENIED.

use std::time::Duration;

use ferry_broker::{Broker, BrokerConfig};
use ferry_client::{Client, ClientError, ConnectOptions, ConsumerConfig, Message};
use ferry_server::{AuthConfig, TokenGrant};
use tokio::sync::oneshot;
use tonic::Code;

const ADMIN: &str = "admin-2f9c4a7e1b3d5f60";
const READER: &str = "reader-8a1c3e5f7b9d0246";

struct Running {
    url: String,
    stop: oneshot::Sender<()>,
    done: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

async fn start() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    let grant = |name: &str, token: &str, permissions: &[&str]| {
        TokenGrant::new(
            name,
            token,
            permissions.iter().map(|p| p.parse().unwrap()).collect(),
        )
    };
    let auth = AuthConfig {
        tokens: vec![
            grant("admin", ADMIN, &["admin:#", "publish:#", "consume:#"]),
            grant("reader", READER, &["consume:#"]),
        ],
    };
    let listener = ferry_server::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let url = format!("ferry://{}", listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(async move {
        ferry_server::Server::new(broker)
            .grpc(listener)
            .auth(auth)
            .serve(async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    Running {
        url,
        stop,
        done,
        _dir: dir,
    }
}

fn code(error: ClientError) -> Code {
    error
        .code()
        .unwrap_or_else(|| panic!("not a server answer: {error}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_sent_on_every_call_and_stream() {
    let server = start().await;
    let client = Client::connect_with(&server.url, ConnectOptions::new().token(ADMIN))
        .await
        .unwrap();
    client
        .create_queue("jobs", Default::default())
        .await
        .unwrap();
    assert!(client.list_queues().await.unwrap().contains(&"jobs".into()));
    client
        .publish("jobs", vec![Message::new("one"), Message::new("two")])
        .await
        .unwrap();
    // The consume stream carries the token too.
    let mut consumer = client
        .consumer("jobs", "w1", ConsumerConfig::default())
        .await
        .unwrap();
    for expected in ["one", "two"] {
        let delivery = tokio::time::timeout(Duration::from_secs(5), consumer.next())
            .await
            .expect("a delivery in time")
            .expect("the stream is open")
            .unwrap();
        assert_eq!(delivery.payload(), expected.as_bytes());
        delivery.ack().await.unwrap();
    }
    drop(consumer);
    let _ = server.stop.send(());
    server.done.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_or_a_wrong_one_is_unauthenticated_and_too_little_is_denied() {
    let server = start().await;
    let admin = Client::connect_with(&server.url, ConnectOptions::new().token(ADMIN))
        .await
        .unwrap();
    admin
        .create_queue("jobs", Default::default())
        .await
        .unwrap();

    let anonymous = Client::connect(&server.url).await.unwrap();
    let e = anonymous.list_queues().await.unwrap_err();
    assert_eq!(code(e), Code::Unauthenticated);
    let wrong = Client::connect_with(&server.url, ConnectOptions::new().token("not-it"))
        .await
        .unwrap();
    let e = wrong.publish("jobs", vec![Message::new("x")]).await;
    let e = e.unwrap_err();
    assert_eq!(code(e), Code::Unauthenticated);
    let opened = wrong.consumer("jobs", "w", ConsumerConfig::default()).await;
    assert_eq!(code(opened.err().unwrap()), Code::Unauthenticated);

    let reader = Client::connect_with(&server.url, ConnectOptions::new().token(READER))
        .await
        .unwrap();
    let e = reader.publish("jobs", vec![Message::new("x")]).await;
    assert_eq!(code(e.unwrap_err()), Code::PermissionDenied);
    // Nothing refused reached the queue.
    let info = admin.describe_queue("jobs").await.unwrap();
    assert_eq!(info.stats.unwrap().published, 0);
    let message = format!("{}", anonymous.list_queues().await.unwrap_err());
    assert!(!message.contains(ADMIN) && !message.contains(READER));
}
