//! Refused credentials are their own errors on every transport that can tell them:
//! `Unauthorized` (none, or ones the engine does not know) and `Forbidden` (known, without
//! the permission), never `Transport`, so nothing retries them as a passing failure. A
//! Ferry server that requires a token refuses a connect without one at once.
#![cfg(feature = "server")]

use ferry::{Destination, Error, Ferry, Message, QueueDecl};
use ferry_broker::{Broker, BrokerConfig};
use ferry_server::{AuthConfig, Server, TokenGrant};

const ROOT: &str = "root-1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f";
const READER: &str = "reader-9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c";

fn grant(name: &str, token: &str, permissions: &[&str]) -> TokenGrant {
    TokenGrant::new(
        name,
        token,
        permissions.iter().map(|p| p.parse().unwrap()).collect(),
    )
}

/// `FERRY_TOKEN` as the SDK reads it. The one test of this binary runs its cases in turn,
/// so nothing else reads the environment meanwhile.
fn token(value: Option<&str>) {
    // SAFETY: this binary has one test, which sets the variable between its connects; no
    // other thread reads or writes the environment meanwhile.
    unsafe {
        match value {
            Some(value) => std::env::set_var("FERRY_TOKEN", value),
            None => std::env::remove_var("FERRY_TOKEN"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_refuses_a_missing_or_unknown_token_at_connect_and_a_grant_it_lacks_as_forbidden()
{
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    let auth = AuthConfig {
        tokens: vec![
            grant("root", ROOT, &["admin:#", "publish:#", "consume:#"]),
            grant("reader", READER, &["consume:#"]),
        ],
    };
    let server = Server::new(broker).auth(auth).start_local().await.unwrap();
    let url = format!("ferry://{}", server.grpc_addr());

    // A closed port: the URL as given and the root cause, not the channel's `http://`.
    let refused = match Ferry::connect("ferry://127.0.0.1:1").await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("connected to a closed port"),
    };
    assert!(refused.contains("ferry://127.0.0.1:1"), "{refused}");
    assert!(!refused.contains("http://"), "{refused}");
    assert!(refused.contains("Connection refused"), "{refused}");

    for (given, what) in [
        (None, "no token"),
        (Some("not-a-token-it-knows"), "an unknown token"),
    ] {
        token(given);
        match Ferry::connect(&url).await {
            Err(e @ Error::Unauthorized { .. }) => {
                assert!(!e.is_transient(), "{e}");
                assert!(e.to_string().starts_with("not authenticated: "), "{e}");
            }
            Err(other) => panic!("connecting with {what} answered {other:?}, not Unauthorized"),
            Ok(_) => panic!("connected with {what}"),
        }
    }

    token(Some(ROOT));
    let root = Ferry::connect(&url)
        .await
        .expect("connect with a known token");
    root.declare_queue(&QueueDecl::new("orders")).await.unwrap();

    // Known, but without the grant: forbidden, not a connection failure.
    token(Some(READER));
    let reader = Ferry::connect(&url)
        .await
        .expect("connect with a reader's token");
    let sent = reader
        .publisher(Destination::queue("orders"))
        .send(Message::new("x"))
        .await;
    match sent {
        Err(e @ Error::Forbidden { .. }) => assert!(!e.is_transient(), "{e}"),
        other => panic!("publishing without the grant answered {other:?}, not Forbidden"),
    }
    token(None);
    server.stop().await.unwrap();
}
