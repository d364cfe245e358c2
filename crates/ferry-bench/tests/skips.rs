//! A workload a target cannot run is reported as skipped, with the reason, and nothing is
//! declared on it: the embedded broker here, with fan-out and redelivery taken out of its
//! capability table.

use std::sync::Arc;

use async_trait::async_trait;
use ferry::capability::{Capabilities, Feature, Support};
use ferry::transport::{ConsumerBackend, Transport};
use ferry::{
    ConsumerOptions, Destination, Ferry, Message, QueueDecl, Result, Source, SubscriptionDecl,
    TopicDecl,
};
use ferry_bench::driver::{self, Outcome};
use ferry_bench::workload::Workload;

/// The embedded broker with some features declared missing.
struct Without {
    inner: Arc<dyn Transport>,
    capabilities: Capabilities,
}

#[async_trait]
impl Transport for Without {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }
    async fn declare_queue(&self, decl: &QueueDecl) -> Result<()> {
        self.inner.declare_queue(decl).await
    }
    async fn declare_topic(&self, decl: &TopicDecl) -> Result<()> {
        self.inner.declare_topic(decl).await
    }
    async fn declare_subscription(&self, decl: &SubscriptionDecl) -> Result<()> {
        self.inner.declare_subscription(decl).await
    }
    async fn delete(&self, source: &Source) -> Result<()> {
        self.inner.delete(source).await
    }
    async fn delete_topic(&self, name: &str) -> Result<()> {
        self.inner.delete_topic(name).await
    }
    async fn dedup_window(&self, queue: &str) -> Result<Option<std::time::Duration>> {
        self.inner.dedup_window(queue).await
    }
    async fn publish(&self, destination: &Destination, batch: Vec<Message>) -> Result<()> {
        self.inner.publish(destination, batch).await
    }
    async fn open_consumer(
        &self,
        source: &Source,
        options: &ConsumerOptions,
    ) -> Result<Box<dyn ConsumerBackend>> {
        self.inner.open_consumer(source, options).await
    }
    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }
}

fn shipped(name: &str) -> Workload {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bench/workloads")
        .join(format!("{name}.toml"));
    Workload::load(&path).unwrap().scaled(0.002)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_needing_a_missing_feature_are_skipped_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let inner = ferry::transport::connect(&format!("embedded:{}", dir.path().display()))
        .await
        .unwrap();
    let mut capabilities = *inner.capabilities();
    for (feature, support) in capabilities.table.iter_mut() {
        if matches!(feature, Feature::FanOut | Feature::Redelivery) {
            *support = Support::No("taken out for this test");
        }
    }
    let ferry = Ferry::with_transport(Arc::new(Without {
        inner,
        capabilities,
    }));

    for (name, feature) in [
        ("fanout-1p-10subs-1kb", "fan-out"),
        ("work-queue-4c-retry-10pct", "redelivery"),
    ] {
        match driver::run(&ferry, &shipped(name), None).await {
            Outcome::Skipped(why) => {
                assert!(
                    why.contains(feature) && why.contains("taken out"),
                    "{name}: {why}"
                )
            }
            other => panic!("{name}: expected a skip, got {other:?}"),
        }
    }
    // A workload needing neither still runs on the same target.
    match driver::run(&ferry, &shipped("max-rate-1p-1c-128b"), None).await {
        Outcome::Ran(figures) => assert_eq!(figures.counts.acked, figures.counts.published),
        other => panic!("expected a run, got {other:?}"),
    }
    ferry.close().await.unwrap();
}
