//! Credentials an engine refuses at connect are `Error::Unauthorized`, not a passing
//! `Transport` failure, on the engines whose refusals the SDK recognises.

#[cfg(any(feature = "redis", feature = "postgres", feature = "amqp"))]
use ferry::{Error, Ferry};

// Only the engines above have a check here; a build with none of them has no use for it.
#[cfg(any(feature = "redis", feature = "postgres", feature = "amqp"))]
async fn refused(url: &str) {
    match Ferry::connect(url).await {
        Err(e @ Error::Unauthorized { .. }) => assert!(!e.is_transient(), "{e}"),
        Err(other) => panic!("{url} answered {other:?}, not Unauthorized"),
        Ok(_) => panic!("{url} connected"),
    }
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn redis_refuses_an_unknown_user_as_unauthorized() {
    refused("redis://ferry-no-such-user:wrong@127.0.0.1:6379/").await;
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_refuses_an_unknown_role_as_unauthorized() {
    refused("postgres://ferry_no_such_role@127.0.0.1:5432/postgres").await;
}

#[cfg(feature = "amqp")]
#[tokio::test]
async fn rabbitmq_refuses_a_wrong_password_as_unauthorized() {
    refused("amqp://guest:wrong@127.0.0.1:5672/%2f").await;
}
