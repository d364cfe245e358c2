//! The client's temporary queues against a real server: created with a name the server
//! picks, received from by their owner, and gone once the owner's settle stream on them is
//! dropped — the stream stands for the client's connection.

use std::time::{Duration, Instant};

use ferry_broker::{Broker, BrokerConfig};
use ferry_client::{Client, Message};
use ferry_server::Server;

#[tokio::test]
async fn a_temporary_queue_goes_when_its_owners_settle_stream_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    let server = Server::new(broker.clone()).start_local().await.unwrap();
    let client = Client::connect(&format!("ferry://{}", server.grpc_addr()))
        .await
        .unwrap();

    let (queue, idle) = client
        .create_temporary_queue("replies-owner", Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(queue.starts_with("tmp."), "{queue}");
    assert_eq!(idle, Duration::from_secs(30));
    let settles = client.settle_stream(&queue, "replies-owner").await.unwrap();
    client
        .publish(&queue, vec![Message::new("reply")])
        .await
        .unwrap();
    let refused = client
        .receive(&queue, "someone-else", 1, None)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("temporary queue"), "{refused}");
    let got = client
        .receive(&queue, "replies-owner", 1, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    client.ack(&queue, got[0].seq, got[0].token).await.unwrap();
    assert!(client.list_queues().await.unwrap().contains(&queue));

    drop(settles);
    // Generous: the machine may be loaded.
    let deadline = Instant::now() + Duration::from_secs(30);
    while broker.list_queues().iter().any(|q| q.as_str() == queue) {
        assert!(Instant::now() < deadline, "{queue} is still there");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(client);
    server.stop().await.unwrap();
}
