//! `/metrics` over a real socket: the storage engine's fsync and group-commit histograms
//! and consumer-group lag appear, are well-formed Prometheus text, and move with what
//! the broker does; with tokens configured, only a `metrics` token scrapes, and sees the
//! names its pattern matches. Groups are driven through the broker handle the server shares (there
//! is no HTTP call to join or commit); publishes go through HTTP.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use ferry_broker::{GroupJoin, QueueSpec};
use ferry_server::AuthConfig;
use serde_json::{Value, json};

mod support;

use support::{Served as Running, grant};

const ADMIN: &str = "admin-3c5e7a9b1d2f4a6c8e0b2d4f6a8c0e2b";
const SCRAPER: &str = "scraper-5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a";
const ORDERS_SCRAPER: &str = "orders-scraper-1a2b3c4d5e6f7a8b9c0d1e2f3a4b";

/// A server with tokens and the queues `orders.eu` and `billing`.
async fn start_with_tokens(
    configure: impl FnOnce(ferry_server::Server) -> ferry_server::Server,
) -> Running {
    let (broker, dir) = support::fresh_broker().await;
    for queue in ["orders.eu", "billing"] {
        broker
            .create_queue(queue, QueueSpec::default())
            .await
            .unwrap();
    }
    let auth = AuthConfig {
        tokens: vec![
            grant("admin", ADMIN, &["admin:#", "publish:#", "consume:#"]),
            grant("scraper", SCRAPER, &["metrics:#"]),
            grant("orders-scraper", ORDERS_SCRAPER, &["metrics:orders.#"]),
        ],
    };
    Running::serve(broker, Some(dir), |s| configure(s.auth(auth))).await
}

/// `GET /metrics` with `token`: (status, body).
async fn scrape_with(addr: SocketAddr, token: Option<&str>) -> (u16, String) {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let reply = support::exchange(addr, &auth, "GET", "/metrics", b"").await;
    (
        reply.status,
        String::from_utf8_lossy(&reply.body).into_owned(),
    )
}

impl Running {
    async fn start() -> Running {
        let (broker, dir) = support::fresh_broker().await;
        Running::serve(broker, Some(dir), |server| server).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, String) {
        let (status, _, body) = request(self.http, "POST", path, body.to_string().as_bytes()).await;
        (status, body)
    }

    /// Scrapes `/metrics`, checks the whole exposition is well-formed and returns it.
    async fn scrape(&self) -> Scrape {
        let (status, headers, body) = request(self.http, "GET", "/metrics", b"").await;
        assert_eq!(status, 200, "{body}");
        assert!(headers.contains("text/plain; version=0.0.4"), "{headers}");
        Scrape::parse(&body)
    }
}

/// One HTTP/1.1 exchange on a connection of its own: (status, head, body).
async fn request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> (u16, String, String) {
    let reply = support::exchange(addr, "", method, path, body).await;
    let body = String::from_utf8_lossy(&reply.body).into_owned();
    (reply.status, reply.head, body)
}

/// A parsed exposition: every sample by its series (name and labels, as rendered), and
/// each family's declared type.
struct Scrape {
    samples: BTreeMap<String, f64>,
    types: BTreeMap<String, String>,
}

impl Scrape {
    /// Parses the text format strictly enough to catch what Prometheus would refuse: a
    /// sample line is `name{labels} value` (labels optional) with a float value, every
    /// sample belongs to a family declared by `# TYPE` before it, no series repeats, and
    /// every histogram's buckets are cumulative and end in `+Inf` equal to `_count`.
    fn parse(text: &str) -> Scrape {
        let mut samples = BTreeMap::new();
        let mut types = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
                let new = types.insert(name.to_owned(), kind.to_owned());
                assert!(new.is_none(), "family {name} declared twice");
                continue;
            }
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').expect("sample: series value");
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                v => v
                    .parse()
                    .unwrap_or_else(|e| panic!("bad value in {line:?}: {e}")),
            };
            let name = series.split('{').next().unwrap();
            if let Some(labels) = series.strip_prefix(name) {
                assert!(
                    labels.is_empty() || (labels.starts_with('{') && labels.ends_with('}')),
                    "bad labels in {line:?}"
                );
            }
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    let base = name.strip_suffix(s)?;
                    (types.get(base).map(String::as_str) == Some("histogram")).then_some(base)
                })
                .unwrap_or(name);
            assert!(
                types.contains_key(family),
                "{line:?} has no # TYPE before it"
            );
            let new = samples.insert(series.to_owned(), value);
            assert!(new.is_none(), "series {series} appears twice");
        }
        let scrape = Scrape { samples, types };
        for (name, kind) in &scrape.types {
            if kind == "histogram" {
                scrape.check_histogram(name);
            }
        }
        scrape
    }

    /// For each series of histogram `name`: buckets rise with `le`, the last is `+Inf`,
    /// and it equals `_count`.
    fn check_histogram(&self, name: &str) {
        let prefix = format!("{name}_bucket{{");
        let mut by_labels: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for (series, &value) in self.samples.range(prefix.clone()..) {
            let Some(labels) = series.strip_prefix(&prefix) else {
                break;
            };
            let (others, le) = labels
                .strip_suffix("\"}")
                .and_then(|l| l.rsplit_once("le=\""))
                .unwrap_or_else(|| panic!("{series}: le must be the last label"));
            let le: f64 = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse()
                    .unwrap_or_else(|e| panic!("{series}: le {le}: {e}"))
            };
            by_labels
                .entry(others.trim_end_matches(',').to_owned())
                .or_default()
                .push((le, value));
        }
        for (labels, mut buckets) in by_labels {
            buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            assert!(
                buckets.windows(2).all(|w| w[0].1 <= w[1].1),
                "{name}{{{labels}}} buckets are not cumulative: {buckets:?}"
            );
            let (last_le, last) = *buckets.last().unwrap();
            assert_eq!(
                last_le,
                f64::INFINITY,
                "{name}{{{labels}}} has no +Inf bucket"
            );
            let count = self.samples[&format!("{name}_count{{{labels}}}")];
            assert_eq!(last, count, "{name}{{{labels}}}: +Inf bucket != _count");
            assert!(
                self.samples
                    .contains_key(&format!("{name}_sum{{{labels}}}")),
                "{name}{{{labels}}} has no _sum"
            );
        }
    }

    fn get(&self, series: &str) -> Option<f64> {
        self.samples.get(series).copied()
    }

    /// A sample that must be there.
    fn value(&self, series: &str) -> f64 {
        self.get(series)
            .unwrap_or_else(|| panic!("no sample {series}"))
    }

    /// Every sample of the family `name`.
    fn family(&self, name: &str) -> Vec<(&str, f64)> {
        self.samples
            .iter()
            .filter(|(s, _)| s.split('{').next() == Some(name))
            .map(|(s, v)| (s.as_str(), *v))
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_histograms_count_every_published_message_and_fsync() {
    let s = Running::start().await;
    let before = s.scrape().await;
    for name in [
        "ferry_storage_fsync_seconds",
        "ferry_storage_commit_records",
        "ferry_storage_commit_bytes",
    ] {
        assert_eq!(
            before.types.get(name).map(String::as_str),
            Some("histogram")
        );
        for log in ["queue", "journal", "topic"] {
            assert_eq!(before.value(&format!("{name}_count{{log=\"{log}\"}}")), 0.0);
        }
    }
    // Bounds are rendered in seconds.
    assert_eq!(
        before.get(r#"ferry_storage_fsync_seconds_bucket{log="queue",le="0.001"}"#),
        Some(0.0)
    );

    // Queues store durably (fsync) by default: one batch is one group, one fdatasync.
    let (status, body) = s.post("/v1/queues", json!({"name": "m"})).await;
    assert_eq!(status, 201, "{body}");
    let batch = json!({"messages": [{"payload": "a"}, {"payload": "bb"}, {"payload": "ccc"}]});
    let (status, body) = s.post("/v1/queues/m/messages", batch).await;
    assert_eq!(status, 200, "{body}");
    let after = s.scrape().await;
    let grew = |series: &str| after.value(series) - before.value(series);
    assert_eq!(
        grew(r#"ferry_storage_commit_records_count{log="queue"}"#),
        1.0
    );
    assert_eq!(
        grew(r#"ferry_storage_commit_records_sum{log="queue"}"#),
        3.0
    );
    assert_eq!(
        grew(r#"ferry_storage_fsync_seconds_count{log="queue"}"#),
        1.0
    );
    assert!(grew(r#"ferry_storage_fsync_seconds_sum{log="queue"}"#) > 0.0);
    // Three small records and a batch header: more than their payloads, far less than 4 KiB.
    let bytes = grew(r#"ferry_storage_commit_bytes_sum{log="queue"}"#);
    assert!((6.0..4096.0).contains(&bytes), "{bytes}");
    assert_eq!(
        grew(r#"ferry_storage_commit_bytes_bucket{log="queue",le="4096"}"#),
        1.0
    );
    // The other kinds did not write.
    assert_eq!(
        after.value(r#"ferry_storage_commit_records_count{log="topic"}"#),
        0.0
    );

    // A receive and an ack are journaled: the journal's histograms move.
    let (status, body) = s
        .post("/v1/queues/m/receive", json!({"consumer": "c", "max": 3}))
        .await;
    assert_eq!(status, 200, "{body}");
    let received: Value = serde_json::from_str(&body).unwrap();
    let deliveries = received["deliveries"].as_array().unwrap();
    assert_eq!(deliveries.len(), 3, "{body}");
    for d in deliveries {
        let path = format!("/v1/queues/m/messages/{}/ack", d["seq"]);
        let (status, body) = s.post(&path, json!({"token": d["token"]})).await;
        assert_eq!(status, 200, "{body}");
    }
    let settled = s.scrape().await;
    let journaled = settled.value(r#"ferry_storage_commit_records_sum{log="journal"}"#)
        - after.value(r#"ferry_storage_commit_records_sum{log="journal"}"#);
    assert!(
        journaled >= 4.0,
        "the 3 leases of one receive (one packed record) and 3 acks, journaled: {journaled}"
    );
    assert!(
        settled.value(r#"ferry_storage_fsync_seconds_count{log="journal"}"#)
            > after.value(r#"ferry_storage_fsync_seconds_count{log="journal"}"#)
    );

    // Topic partitions are a kind of their own.
    let topic = json!({"name": "t", "spec": {"partitions": 2}});
    assert_eq!(s.post("/v1/topics", topic).await.0, 201);
    let records = json!({"messages": [
        {"payload": "1", "key": "a"}, {"payload": "2", "key": "b"},
        {"payload": "3", "key": "c"}, {"payload": "4", "key": "d"},
    ]});
    let (status, body) = s.post("/v1/topics/t/messages", records).await;
    assert_eq!(status, 200, "{body}");
    let topics = s.scrape().await;
    assert_eq!(
        topics.value(r#"ferry_storage_commit_records_sum{log="topic"}"#),
        4.0
    );
    let partitions_written = topics.value(r#"ferry_storage_commit_records_count{log="topic"}"#);
    assert!(
        (1.0..=2.0).contains(&partitions_written),
        "{partitions_written}"
    );
    assert_eq!(
        topics.value(r#"ferry_storage_fsync_seconds_count{log="topic"}"#),
        partitions_written
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_lag_is_reported_per_partition_and_falls_to_zero_once_committed() {
    let s = Running::start().await;
    let topic = json!({"name": "t", "spec": {"partitions": 2}});
    assert_eq!(s.post("/v1/topics", topic).await.0, 201);
    let none = s.scrape().await;
    assert_eq!(
        none.types
            .get("ferry_group_lag_messages")
            .map(String::as_str),
        Some("gauge")
    );
    assert_eq!(
        none.types
            .get("ferry_group_lag_seconds")
            .map(String::as_str),
        Some("gauge")
    );
    assert!(none.family("ferry_group_lag_messages").is_empty());

    let member = s
        .broker
        .join_group("t", "g", GroupJoin::default())
        .await
        .unwrap()
        .member_id;
    let joined = s.scrape().await;
    for p in ["0", "1"] {
        let labels = format!(r#"{{group="g",topic="t",partition="{p}"}}"#);
        assert_eq!(
            joined.get(&format!("ferry_group_lag_messages{labels}")),
            Some(0.0)
        );
        assert_eq!(
            joined.get(&format!("ferry_group_lag_seconds{labels}")),
            Some(0.0)
        );
    }

    let records: Vec<Value> = (0..10)
        .map(|i| json!({"payload": format!("r{i}"), "key": format!("k{i}")}))
        .collect();
    let (status, body) = s
        .post("/v1/topics/t/messages", json!({"messages": records}))
        .await;
    assert_eq!(status, 200, "{body}");
    tokio::time::sleep(Duration::from_millis(30)).await;
    let behind = s.scrape().await;
    let lags = behind.family("ferry_group_lag_messages");
    assert_eq!(lags.len(), 2, "{lags:?}");
    assert_eq!(lags.iter().map(|(_, v)| v).sum::<f64>(), 10.0, "{lags:?}");
    for (series, messages) in &lags {
        let seconds = behind.value(&series.replace("_messages", "_seconds"));
        if *messages > 0.0 {
            assert!((0.03..60.0).contains(&seconds), "{series}: {seconds}s");
        } else {
            assert_eq!(seconds, 0.0, "{series}");
        }
    }

    let read = s.broker.poll_group("t", "g", &member, 100).unwrap();
    assert_eq!(read.len(), 10);
    let mut next = BTreeMap::new();
    for r in &read {
        next.insert(r.partition, r.offset + 1);
    }
    for (p, offset) in next {
        s.broker
            .commit_offset("t", "g", &member, p, offset)
            .unwrap();
    }
    let caught_up = s.scrape().await;
    for (series, _) in caught_up.family("ferry_group_lag_messages") {
        assert_eq!(caught_up.value(series), 0.0, "{series}");
        assert_eq!(
            caught_up.value(&series.replace("_messages", "_seconds")),
            0.0
        );
    }
    assert_eq!(caught_up.family("ferry_group_lag_messages").len(), 2);
    s.stop().await;
}

#[tokio::test]
async fn metrics_need_a_metrics_token_and_show_only_the_names_it_matches() {
    let s = start_with_tokens(|s| s).await;
    for token in [None, Some("not-a-token")] {
        let (status, body) = scrape_with(s.http, token).await;
        assert_eq!(status, 401, "{body}");
        assert!(body.contains("unauthenticated"), "{body}");
    }
    // `admin` on every name is not `metrics`: scraping is granted apart.
    let (status, body) = scrape_with(s.http, Some(ADMIN)).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("metrics:#"), "says what to grant: {body}");

    let (status, all) = scrape_with(s.http, Some(SCRAPER)).await;
    assert_eq!(status, 200, "{all}");
    Scrape::parse(&all);
    for queue in ["orders.eu", "billing"] {
        assert!(
            all.contains(&format!("queue=\"{queue}\"")),
            "{queue}: {all}"
        );
    }
    let (status, orders) = scrape_with(s.http, Some(ORDERS_SCRAPER)).await;
    assert_eq!(status, 200, "{orders}");
    let parsed = Scrape::parse(&orders);
    assert!(orders.contains("queue=\"orders.eu\""), "{orders}");
    assert!(!orders.contains("billing"), "billing shown: {orders}");
    assert!(
        !parsed
            .family("ferry_storage_fsync_seconds_count")
            .is_empty(),
        "the series naming no queue are shown: {orders}"
    );
    s.stop().await;
}

#[tokio::test]
async fn metrics_can_be_left_open_with_tokens_configured() {
    let s = start_with_tokens(|s| s.open_metrics()).await;
    let (status, body) = scrape_with(s.http, None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("queue=\"billing\""), "{body}");
    let reply = support::exchange(s.http, "", "GET", "/v1/queues", b"").await;
    assert_eq!(reply.status, 401, "the rest still needs a token");
    s.stop().await;
}
