//! The order flow end to end: every order confirmed or compensated as planned, each effect
//! once despite the injected crashes, panics and the broker restart, every poison event in
//! a dead-letter queue. `run` itself checks each effect in the database; these tests check
//! the figures it reports against the fault plan.

use std::time::Duration;

use ferry_testkit::url_or_skip;
use orders::domain::{Fate, FaultPlan};
use orders::{Config, Summary};

const ORDERS: u32 = 20;

async fn run(transport: Option<String>) -> Summary {
    let data = tempfile::tempdir().unwrap();
    orders::run(Config {
        transport,
        data: data.path().to_owned(),
        orders: ORDERS,
        restart_broker: true,
        timeout: Duration::from_secs(60),
    })
    .await
    .unwrap()
}

fn assert_as_planned(summary: &Summary) {
    let plan = FaultPlan { orders: ORDERS };
    let poison = plan.count(Fate::Poison);
    let readable = u64::from(ORDERS - poison);
    assert_eq!(summary.placed, ORDERS);
    assert_eq!(summary.confirmed, plan.count(Fate::Confirmed));
    assert_eq!(summary.compensated, plan.count(Fate::Declined));
    assert_eq!(summary.poison, poison);
    assert!(summary.confirmed > 0 && summary.compensated > 0 && poison > 0);
    // Three subscriptions read every event: each dead-letters each poison event, at the
    // first delivery its handler sees. That is delivery 1, or one later per restart: the
    // workers stop for the restart, and what a consumer had fetched ahead and not handed out
    // goes back counted as a delivery (as a received SQS message made visible again keeps
    // its receive count), so a poison event caught in a prefetch then is rejected at 2.
    assert_eq!(summary.dead_letters.len(), 3, "{:?}", summary.dead_letters);
    let latest = 1 + summary.broker_restarts;
    for reasons in summary.dead_letters.values() {
        assert_eq!(reasons.len(), poison as usize);
        for reason in reasons {
            let delivery = reason
                .strip_prefix("rejected at delivery ")
                .and_then(|rest| rest.split_once(": malformed OrderPlaced"))
                .and_then(|(n, _)| n.parse::<u32>().ok());
            assert!(
                delivery.is_some_and(|n| (1..=latest).contains(&n)),
                "{reason:?} of {reasons:?}"
            );
        }
    }
    assert_eq!(summary.emails_sent, 2 * readable, "one email per event");
    assert_eq!(summary.analytics_events, 2 * readable);
    assert_eq!(summary.payments_charged, u64::from(summary.confirmed));
    assert_eq!(summary.broker_restarts, 1);
    let crashes = (1..=ORDERS)
        .filter(|&n| plan.fate(n) != Fate::Poison && plan.email_crashes(n))
        .count() as u64;
    assert_eq!(summary.crashes_injected, crashes);
    assert!(
        summary.duplicates_suppressed >= crashes,
        "each crash before ack redelivers an email the inbox must suppress"
    );
    assert!(summary.panics_injected > 0);
    let printed = summary.to_string();
    assert!(
        printed.contains("every order where it belongs"),
        "{printed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_embedded_broker_through_a_restart() {
    let summary = run(None).await;
    assert_eq!(summary.transport, "embedded");
    assert_as_planned(&summary);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_nats_jetstream() {
    if let Some(url) = url_or_skip("NATS", "FERRY_NATS_URL", "nats://127.0.0.1:4222") {
        assert_as_planned(&run(Some(url)).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_streams() {
    if let Some(url) = url_or_skip("Redis", "FERRY_REDIS_URL", "redis://127.0.0.1:6379/0") {
        assert_as_planned(&run(Some(url)).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql() {
    if let Some(url) = url_or_skip(
        "PostgreSQL",
        "FERRY_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    ) {
        assert_as_planned(&run(Some(url)).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_rabbitmq() {
    if let Some(url) = url_or_skip(
        "RabbitMQ",
        "FERRY_AMQP_URL",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
    ) {
        assert_as_planned(&run(Some(url)).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_ferry_server() {
    let dir = tempfile::tempdir().unwrap();
    let broker = ferry_broker::Broker::open(dir.path(), Default::default())
        .await
        .unwrap();
    let server = ferry_server::Server::new(broker)
        .start_local()
        .await
        .unwrap();
    let summary = run(Some(format!("ferry://{}", server.grpc_addr()))).await;
    assert_eq!(summary.transport, "ferry server");
    assert_as_planned(&summary);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_amazon_sqs_as_ferrys_aws_endpoint_serves_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ferry_broker::BrokerConfig::default();
    ferry_aws::register_filter_evaluators(&mut config.filter_evaluators);
    let broker = ferry_broker::Broker::open(dir.path().join("data"), config)
        .await
        .unwrap();
    let front = ferry_aws::Sqs::open(broker, &dir.path().join("aws"), Default::default()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(front.serve(listener, async move {
        let _ = stopped.await;
    }));
    let summary = run(Some(format!("sqs://test:test@{addr}?region=us-east-1"))).await;
    assert_eq!(summary.transport, "sqs");
    assert_as_planned(&summary);
    let _ = stop.send(());
    served.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_kafka_as_ferrys_kafka_listener_serves_it() {
    let dir = tempfile::tempdir().unwrap();
    let broker = ferry_broker::Broker::open(dir.path().join("data"), Default::default())
        .await
        .unwrap();
    // Each queue and subscription is a new consumer group with one member. With Kafka's
    // default initial rebalance delay each group's first join waits 3 s for more members
    // (3 s more when the restart's consumers join meanwhile, and again for each dead-letter
    // queue read at the end), which doubles the run. Kafka's own test clusters set
    // `group.initial.rebalance.delay.ms` to 0 for the same reason.
    let config = ferry_kafka::KafkaConfig {
        group_initial_rebalance_delay_ms: 0,
        ..Default::default()
    };
    let front = ferry_kafka::Kafka::new(broker, config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(front.serve(listener, async move {
        let _ = stopped.await;
    }));
    let summary = run(Some(format!("kafka://{addr}"))).await;
    assert_eq!(summary.transport, "kafka");
    assert_as_planned(&summary);
    let _ = stop.send(());
    served.await.unwrap().unwrap();
}
