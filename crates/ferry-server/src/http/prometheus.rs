//! `GET /metrics`: the Prometheus text format (version 0.0.4), rendered at scrape time.
//!
//! Queue counters and gauges, subscription and consumer-group lag, and the storage
//! engine's fsync and group-commit histograms are read from the broker on each scrape
//! (`describe_subscription` / `describe_queue`, `list_groups` / `group_lag`,
//! `storage_stats`), so they need no bookkeeping here; deliveries, rejects and latencies
//! come from [`Meters`]. Rendered
//! by hand rather than through `metrics-exporter-prometheus`: most series are a snapshot of
//! broker state, not events a recorder sees, and the exporter's recorder is process-global
//! (see `crate::metrics`). Names, types and labels are listed in `docs/metrics.md`.

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use ferry_broker::{Broker, HistogramSnapshot, LogStatsSnapshot, QueueInfo};

use super::Shared;
use super::error::ApiError;
use crate::auth::Action;
use crate::metrics::{BUCKETS, Histogram, Meters, Snapshot};

/// The content type Prometheus expects for the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The exposition names every queue, dead-letter queue, subscription and group, so with
/// tokens configured it needs a token with a `metrics` permission, and shows only the
/// series of the names that permission matches — unless the server was told to leave
/// `/metrics` open ([`Server::open_metrics`](crate::Server::open_metrics)).
pub async fn scrape(
    State(s): State<Shared>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    let text = if s.open_metrics {
        render(&s.broker, &s.meters, &|_| true)
    } else {
        let who = s.caller(&headers)?;
        s.gate.allow_metrics(who)?;
        render(&s.broker, &s.meters, &|name| {
            s.gate.may(who, Action::Metrics, name)
        })
    };
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], text))
}

/// A label value, escaped as the text format asks (names are plain ASCII already; this
/// keeps a future wider alphabet from breaking the format).
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// One metric family: its header, then its samples.
struct Family<'a> {
    out: &'a mut String,
    name: &'static str,
}

impl<'a> Family<'a> {
    fn new(out: &'a mut String, name: &'static str, kind: &str, help: &str) -> Family<'a> {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        Family { out, name }
    }

    fn sample(&mut self, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.sample_named(self.name, "", labels, value);
    }

    fn sample_named(
        &mut self,
        name: &str,
        suffix: &str,
        labels: &[(&str, &str)],
        value: impl std::fmt::Display,
    ) {
        let _ = write!(self.out, "{name}{suffix}");
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    fn histogram(&mut self, labels: &[(&str, &str)], h: &Histogram) {
        let mut cumulative = 0;
        for (bound, count) in BUCKETS.iter().zip(h.counts) {
            cumulative += count;
            let le = bound.to_string();
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample_named(self.name, "_bucket", &with_le, cumulative);
        }
        let mut with_le = labels.to_vec();
        with_le.push(("le", "+Inf"));
        self.sample_named(self.name, "_bucket", &with_le, h.count);
        self.sample_named(self.name, "_sum", labels, h.sum);
        self.sample_named(self.name, "_count", labels, h.count);
    }

    /// A storage histogram, whose bounds and sum are integers in a unit `unit` times
    /// smaller than the one rendered (1e9 for nanoseconds shown as seconds, 1 for counts).
    fn storage_histogram(&mut self, labels: &[(&str, &str)], h: &HistogramSnapshot, unit: f64) {
        for (bound, cumulative) in h.cumulative() {
            let le = (bound as f64 / unit).to_string();
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample_named(self.name, "_bucket", &with_le, cumulative);
        }
        let count = h.count();
        let mut with_le = labels.to_vec();
        with_le.push(("le", "+Inf"));
        self.sample_named(self.name, "_bucket", &with_le, count);
        self.sample_named(self.name, "_sum", labels, h.sum as f64 / unit);
        self.sample_named(self.name, "_count", labels, count);
    }
}

/// A subscription's lag, as its queue and catch-up say.
struct Lag {
    subscription: String,
    topic: String,
    messages: u64,
    seconds: f64,
}

fn unsettled(q: &QueueInfo) -> u64 {
    let s = &q.stats.state;
    (s.ready + s.in_flight + s.delayed) as u64
}

/// One consumer group's lag on one partition.
struct GroupLag {
    group: String,
    topic: String,
    partition: String,
    messages: u64,
    seconds: f64,
}

fn group_lags(broker: &Broker, shows: &dyn Fn(&str) -> bool) -> Vec<GroupLag> {
    let mut lags = Vec::new();
    for (topic, group) in broker.list_groups() {
        // A group is named under its topic, as its permissions are.
        if !shows(topic.as_str()) {
            continue;
        }
        // Else the topic (and its groups) was deleted since the list, or a partition's
        // oldest record could not be read: this scrape goes without that group.
        let Ok(partitions) = broker.group_lag(topic.as_str(), group.as_str()) else {
            continue;
        };
        for p in partitions {
            lags.push(GroupLag {
                group: group.to_string(),
                topic: topic.to_string(),
                partition: p.partition.to_string(),
                messages: p.lag_records,
                seconds: p.lag_ms.max(0) as f64 / 1000.0,
            });
        }
    }
    lags
}

/// The exposition: broker state now, and the server's own measurements, for the queues,
/// subscriptions and topics `shows` takes (the storage and disk series name none and are
/// always shown).
pub fn render(broker: &Broker, meters: &Meters, shows: &dyn Fn(&str) -> bool) -> String {
    let mut queues = Vec::new();
    let mut lags = Vec::new();
    for name in broker.list_queues() {
        if !shows(name.as_str()) {
            continue;
        }
        // A subscription's description includes its queue's; a plain queue is not one.
        if let Ok(sub) = broker.describe_subscription(name.as_str()) {
            lags.push(Lag {
                subscription: name.to_string(),
                topic: sub.spec.topic.to_string(),
                messages: unsettled(&sub.queue) + sub.not_yet_considered,
                seconds: age_seconds(&sub.queue),
            });
            queues.push(sub.queue);
        } else if let Ok(queue) = broker.describe_queue(name.as_str()) {
            queues.push(queue);
        }
        // Else it was deleted since the list: nothing to report.
    }
    let groups = group_lags(broker, shows);
    let mut m = meters.snapshot();
    m.retain(shows);
    let storage = broker.storage_stats();
    let mut out = String::with_capacity(8192 + queues.len() * 1024 + groups.len() * 256);
    counters(&mut out, &queues, &m);
    gauges(&mut out, &queues);
    lag(&mut out, &lags);
    group_lag(&mut out, &groups);
    latencies(&mut out, &m);
    let kinds = [
        ("queue", &storage.queue_messages),
        ("journal", &storage.queue_journals),
        ("topic", &storage.topic_partitions),
    ];
    storage_histograms(&mut out, &kinds);
    disk(&mut out, broker);
    out
}

/// The data directory's free space, the reserve publishes leave for acks and
/// housekeeping, and how many publishes were refused for lack of space.
fn disk(out: &mut String, broker: &Broker) {
    // Else the directory could not be looked at (it was removed under the broker): this
    // scrape goes without it, as the failing publishes and acks will report.
    let Ok(space) = broker.disk_space() else {
        return;
    };
    let series = [
        (
            "ferry_disk_available_bytes",
            "gauge",
            "Bytes free on the file system holding the data directory.",
            space.available,
        ),
        (
            "ferry_disk_reserve_bytes",
            "gauge",
            "Bytes publishes leave free for acks, receives and housekeeping: a publish that would leave less is refused.",
            space.reserve,
        ),
        (
            "ferry_publishes_refused_disk_full_total",
            "counter",
            "Publishes and redrives refused because the disk is full, since the broker opened.",
            space.refused,
        ),
    ];
    for (name, kind, help, value) in series {
        Family::new(out, name, kind, help).sample(&[], value);
    }
}

fn age_seconds(q: &QueueInfo) -> f64 {
    q.stats.state.oldest_ready_age_ms.unwrap_or(0).max(0) as f64 / 1000.0
}

fn counters(out: &mut String, queues: &[QueueInfo], m: &Snapshot) {
    type Read = fn(&QueueInfo) -> u64;
    let from_broker: [(&'static str, &str, Read); 6] = [
        (
            "ferry_queue_published_total",
            "Messages stored in the queue: published, dead-lettered into it or redriven into it (broker counter, survives restarts).",
            |q| q.stats.next_seq,
        ),
        (
            "ferry_queue_acked_total",
            "Messages acked (broker counter, survives restarts).",
            |q| q.stats.acked,
        ),
        (
            "ferry_queue_nacked_total",
            "Failed attempts followed by a retry: nacks and lease expiries (broker counter, survives restarts).",
            |q| q.stats.nacked,
        ),
        (
            "ferry_queue_dead_lettered_total",
            "Messages that left the queue for its dead-letter queue, or were discarded with dead-lettering disabled (broker counter, survives restarts).",
            |q| q.stats.dead_lettered,
        ),
        (
            "ferry_queue_redriven_total",
            "Messages moved out of this dead-letter queue by redrive (broker counter, survives restarts).",
            |q| q.stats.redriven,
        ),
        (
            "ferry_queue_dropped_total",
            "Messages dropped to make room under the DropHead overflow policy (broker counter, survives restarts).",
            |q| q.stats.dropped,
        ),
    ];
    for (name, help, read) in from_broker {
        let mut f = Family::new(out, name, "counter", help);
        for q in queues {
            f.sample(&[("queue", q.name.as_str())], read(q));
        }
    }
    let from_server = [
        (
            "ferry_queue_delivered_total",
            "Deliveries handed to consumers over gRPC or HTTP by this server process (counted by the server: starts at 0 on restart).",
            &m.delivered,
        ),
        (
            "ferry_queue_rejected_total",
            "Deliveries rejected by their consumer through this server process (counted by the server: starts at 0 on restart).",
            &m.rejected,
        ),
    ];
    for (name, help, counts) in from_server {
        let mut f = Family::new(out, name, "counter", help);
        for q in queues {
            let n = counts.get(q.name.as_str()).copied().unwrap_or(0);
            f.sample(&[("queue", q.name.as_str())], n);
        }
    }
}

fn gauges(out: &mut String, queues: &[QueueInfo]) {
    type Read = fn(&QueueInfo) -> f64;
    let per_queue: [(&'static str, &str, Read); 6] = [
        (
            "ferry_queue_ready",
            "Messages ready for delivery now.",
            |q| q.stats.state.ready as f64,
        ),
        (
            "ferry_queue_in_flight",
            "Messages leased to a consumer and not settled.",
            |q| q.stats.state.in_flight as f64,
        ),
        (
            "ferry_queue_delayed",
            "Messages waiting for a delay or a retry backoff to end.",
            |q| q.stats.state.delayed as f64,
        ),
        (
            "ferry_queue_parked",
            "Messages held by parked ordering keys.",
            |q| q.stats.state.parked_messages as f64,
        ),
        (
            "ferry_queue_bytes",
            "Bytes of the messages the queue tracks.",
            |q| q.stats.state.bytes as f64,
        ),
        (
            "ferry_queue_oldest_ready_age_seconds",
            "How long the front of the ready line has been deliverable; 0 when nothing is ready.",
            age_seconds,
        ),
    ];
    for (name, help, read) in per_queue {
        let mut f = Family::new(out, name, "gauge", help);
        for q in queues {
            f.sample(&[("queue", q.name.as_str())], read(q));
        }
    }
    let mut f = Family::new(
        out,
        "ferry_queue_dead_letter_depth",
        "gauge",
        "Unsettled messages (ready, in flight, delayed) in the dead-letter queue `dlq` of `queue`.",
    );
    for q in queues {
        let Ok(Some(dlq)) = q.spec.dead_letter_target(&q.name) else {
            continue;
        };
        if let Some(target) = queues.iter().find(|t| t.name == dlq) {
            f.sample(
                &[("queue", q.name.as_str()), ("dlq", dlq.as_str())],
                unsettled(target),
            );
        }
    }
}

fn lag(out: &mut String, lags: &[Lag]) {
    let mut f = Family::new(
        out,
        "ferry_subscription_lag_messages",
        "gauge",
        "Messages of the topic the subscription has not settled: unsettled in its queue, plus records not yet taken in.",
    );
    for l in lags {
        f.sample(
            &[("subscription", &l.subscription), ("topic", &l.topic)],
            l.messages,
        );
    }
    let mut f = Family::new(
        out,
        "ferry_subscription_lag_seconds",
        "gauge",
        "How long the oldest ready message of the subscription has waited; 0 when nothing is ready.",
    );
    for l in lags {
        f.sample(
            &[("subscription", &l.subscription), ("topic", &l.topic)],
            l.seconds,
        );
    }
}

fn group_lag(out: &mut String, lags: &[GroupLag]) {
    let mut f = Family::new(
        out,
        "ferry_group_lag_messages",
        "gauge",
        "Records of the partition after the consumer group's committed offset (after the partition's start if nothing is committed).",
    );
    for l in lags {
        let labels = [
            ("group", l.group.as_str()),
            ("topic", &l.topic),
            ("partition", &l.partition),
        ];
        f.sample(&labels, l.messages);
    }
    let mut f = Family::new(
        out,
        "ferry_group_lag_seconds",
        "gauge",
        "How long ago the oldest record the consumer group has not committed was published; 0 when caught up.",
    );
    for l in lags {
        let labels = [
            ("group", l.group.as_str()),
            ("topic", &l.topic),
            ("partition", &l.partition),
        ];
        f.sample(&labels, l.seconds);
    }
}

/// The storage engine's own histograms, one series per kind of log (`log` label).
fn storage_histograms(out: &mut String, kinds: &[(&str, &LogStatsSnapshot)]) {
    let mut f = Family::new(
        out,
        "ferry_storage_fsync_seconds",
        "histogram",
        "Duration of each fdatasync of log data by the storage writer threads, since the broker opened.",
    );
    for (log, s) in kinds {
        f.storage_histogram(&[("log", log)], &s.fsync_ns, 1e9);
    }
    let mut f = Family::new(
        out,
        "ferry_storage_commit_records",
        "histogram",
        "Records per group commit (one write of the appends queued together), since the broker opened.",
    );
    for (log, s) in kinds {
        f.storage_histogram(&[("log", log)], &s.commit_records, 1.0);
    }
    let mut f = Family::new(
        out,
        "ferry_storage_commit_bytes",
        "histogram",
        "Bytes per group commit, batch headers included, since the broker opened.",
    );
    for (log, s) in kinds {
        f.storage_histogram(&[("log", log)], &s.commit_bytes, 1.0);
    }
}

fn latencies(out: &mut String, m: &Snapshot) {
    let mut f = Family::new(
        out,
        "ferry_publish_duration_seconds",
        "histogram",
        "Time to store one published batch durably, measured in the server's publish handlers.",
    );
    for ((kind, name), h) in &m.publish {
        f.histogram(&[("kind", kind), ("name", name)], h);
    }
    let mut f = Family::new(
        out,
        "ferry_delivery_to_ack_seconds",
        "histogram",
        "Time from a delivery to its ack, per delivery acked through this server.",
    );
    for (queue, h) in &m.delivery_to_ack {
        f.histogram(&[("queue", queue)], h);
    }
    let mut f = Family::new(
        out,
        "ferry_publish_to_ack_seconds",
        "histogram",
        "End-to-end time from a message's publish (its published_at) to its ack, per delivery acked through this server.",
    );
    for (queue, h) in &m.publish_to_ack {
        f.histogram(&[("queue", queue)], h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_renders_cumulative_buckets_sum_and_count() {
        let mut h = Histogram::default();
        h.observe(0.002);
        h.observe(0.2);
        h.observe(7200.0);
        let mut out = String::new();
        Family::new(&mut out, "x_seconds", "histogram", "help").histogram(&[("queue", "q")], &h);
        assert!(out.starts_with("# HELP x_seconds help\n# TYPE x_seconds histogram\n"));
        assert!(out.contains("x_seconds_bucket{queue=\"q\",le=\"0.001\"} 0\n"));
        assert!(out.contains("x_seconds_bucket{queue=\"q\",le=\"0.0025\"} 1\n"));
        assert!(out.contains("x_seconds_bucket{queue=\"q\",le=\"0.25\"} 2\n"));
        assert!(out.contains("x_seconds_bucket{queue=\"q\",le=\"3600\"} 2\n"));
        assert!(out.contains("x_seconds_bucket{queue=\"q\",le=\"+Inf\"} 3\n"));
        assert!(out.contains("x_seconds_count{queue=\"q\"} 3\n"));
        assert!(out.contains("x_seconds_sum{queue=\"q\"} 7200.202"));
    }

    #[test]
    fn a_storage_histogram_renders_its_bounds_in_seconds_and_counts_above_the_last() {
        let h = HistogramSnapshot {
            bounds: &[25_000, 1_000_000, 2_500_000_000],
            counts: vec![1, 2, 0, 1],
            sum: 3_000_025_000,
        };
        let mut out = String::new();
        Family::new(&mut out, "x_seconds", "histogram", "help").storage_histogram(
            &[("log", "queue")],
            &h,
            1e9,
        );
        let expected = "# HELP x_seconds help\n# TYPE x_seconds histogram\n\
            x_seconds_bucket{log=\"queue\",le=\"0.000025\"} 1\n\
            x_seconds_bucket{log=\"queue\",le=\"0.001\"} 3\n\
            x_seconds_bucket{log=\"queue\",le=\"2.5\"} 3\n\
            x_seconds_bucket{log=\"queue\",le=\"+Inf\"} 4\n\
            x_seconds_sum{log=\"queue\"} 3.000025\n\
            x_seconds_count{log=\"queue\"} 4\n";
        assert_eq!(out, expected);
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
