//! The order flow, unchanged, on every transport: only the URL differs. Engines outside
//! this process are the machine's services (skipped loudly when absent, a failure under
//! `CI=true`).

use std::process::Command;

use ferry_testkit::url_or_skip;

fn run(url: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_order-flow"))
        .arg(url)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "order-flow on {url} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("every order where it belongs"), "{stdout}");
}

#[test]
fn on_the_embedded_broker() {
    let dir = tempfile::tempdir().unwrap();
    run(&format!("embedded:{}", dir.path().display()));
}

#[test]
fn on_a_ferry_server() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(async {
        let broker = ferry_broker::Broker::open(dir.path(), Default::default())
            .await
            .unwrap();
        ferry_server::Server::new(broker)
            .start_local()
            .await
            .unwrap()
    });
    run(&format!("ferry://{}", server.grpc_addr()));
    runtime.block_on(server.stop()).unwrap();
}

#[test]
fn on_nats_jetstream() {
    if let Some(url) = url_or_skip("NATS", "FERRY_NATS_URL", "nats://127.0.0.1:4222") {
        run(&url);
    }
}

#[test]
fn on_redis_streams() {
    if let Some(url) = url_or_skip("Redis", "FERRY_REDIS_URL", "redis://127.0.0.1:6379/0") {
        run(&url);
    }
}

#[test]
fn on_postgresql() {
    if let Some(url) = url_or_skip(
        "PostgreSQL",
        "FERRY_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    ) {
        run(&url);
    }
}

#[test]
fn on_rabbitmq() {
    if let Some(url) = url_or_skip(
        "RabbitMQ",
        "FERRY_AMQP_URL",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
    ) {
        run(&url);
    }
}

#[test]
fn on_amazon_sqs_as_ferrys_aws_endpoint_serves_it() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (addr, stop, served) = runtime.block_on(async {
        let mut config = ferry_broker::BrokerConfig::default();
        ferry_aws::register_filter_evaluators(&mut config.filter_evaluators);
        let broker = ferry_broker::Broker::open(dir.path().join("data"), config)
            .await
            .unwrap();
        let front =
            ferry_aws::Sqs::open(broker, &dir.path().join("aws"), Default::default()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(front.serve(listener, async move {
            let _ = stopped.await;
        }));
        (addr, stop, served)
    });
    run(&format!("sqs://test:test@{addr}?region=us-east-1"));
    let _ = stop.send(());
    runtime.block_on(served).unwrap().unwrap();
}

#[test]
fn on_kafka_as_ferrys_kafka_listener_serves_it() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (addr, stop, served) = runtime.block_on(async {
        let broker = ferry_broker::Broker::open(dir.path().join("data"), Default::default())
            .await
            .unwrap();
        let front = ferry_kafka::Kafka::new(broker, Default::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(front.serve(listener, async move {
            let _ = stopped.await;
        }));
        (addr, stop, served)
    });
    run(&format!("kafka://{addr}"));
    let _ = stop.send(());
    runtime.block_on(served).unwrap().unwrap();
}
