//! What the server measures itself, beside the broker's own counters.
//!
//! Most of `/metrics` is read from the broker at scrape time (`describe_queue` and
//! `describe_subscription`, whose counters survive restarts). The broker does not count
//! deliveries or rejects, and knows nothing of latency, so [`Meters`] does: counts per
//! queue, and histograms of how long a publish took, how long a delivery was held before
//! its ack, and how long a message took from its publish to its ack.
//!
//! No `metrics` recorder: a recorder is process-global, and one process may run several
//! servers (tests do; so could an embedding program) that must not share numbers. The
//! text format of the few series kept here is rendered in [`crate::http::prometheus`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferry_broker::ReceivedMessage;

/// Upper bounds of the latency buckets, in seconds: from a fast fsync to an hour-old
/// backlog.
pub const BUCKETS: [f64; 19] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0, 900.0, 3600.0,
];

/// Deliveries remembered for their ack's latency. Past this, entries whose lease has
/// ended are dropped, and if none has, new deliveries go unmeasured rather than growing
/// memory without bound.
const MAX_TRACKED: usize = 100_000;

/// A Prometheus histogram over [`BUCKETS`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// Observations at or below each bucket's bound (not cumulative; rendering adds up).
    pub counts: [u64; BUCKETS.len()],
    pub count: u64,
    pub sum: f64,
}

impl Histogram {
    pub fn observe(&mut self, seconds: f64) {
        let seconds = seconds.max(0.0);
        if let Some(i) = BUCKETS.iter().position(|&b| seconds <= b) {
            self.counts[i] += 1;
        }
        self.count += 1;
        self.sum += seconds;
    }
}

/// One delivery awaiting its settlement.
struct Held {
    published_at_ms: i64,
    delivered_at_ms: i64,
    lease_until_ms: i64,
}

#[derive(Default)]
struct Inner {
    delivered: BTreeMap<String, u64>,
    rejected: BTreeMap<String, u64>,
    publish: BTreeMap<(&'static str, String), Histogram>,
    delivery_to_ack: BTreeMap<String, Histogram>,
    publish_to_ack: BTreeMap<String, Histogram>,
    held: HashMap<(String, u64, u64), Held>,
}

/// A copy of the measurements, for rendering.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub delivered: BTreeMap<String, u64>,
    pub rejected: BTreeMap<String, u64>,
    /// By (`"queue"` or `"topic"`, name).
    pub publish: BTreeMap<(&'static str, String), Histogram>,
    pub delivery_to_ack: BTreeMap<String, Histogram>,
    pub publish_to_ack: BTreeMap<String, Histogram>,
}

impl Snapshot {
    /// Only the series of the queues and topics `shows` takes.
    pub fn retain(&mut self, shows: &dyn Fn(&str) -> bool) {
        self.delivered.retain(|queue, _| shows(queue));
        self.rejected.retain(|queue, _| shows(queue));
        self.publish.retain(|(_, name), _| shows(name));
        self.delivery_to_ack.retain(|queue, _| shows(queue));
        self.publish_to_ack.retain(|queue, _| shows(queue));
    }
}

/// The server's own measurements, shared by its gRPC and HTTP sides.
#[derive(Default)]
pub struct Meters {
    inner: Mutex<Inner>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn bump(counts: &mut BTreeMap<String, u64>, queue: &str, by: u64) {
    match counts.get_mut(queue) {
        Some(n) => *n += by,
        None => {
            counts.insert(queue.to_owned(), by);
        }
    }
}

fn observe(histograms: &mut BTreeMap<String, Histogram>, queue: &str, seconds: f64) {
    match histograms.get_mut(queue) {
        Some(h) => h.observe(seconds),
        None => {
            let mut h = Histogram::default();
            h.observe(seconds);
            histograms.insert(queue.to_owned(), h);
        }
    }
}

impl Meters {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A batch was stored in `took` into the queue or topic (`kind`) `name`.
    pub fn published(&self, kind: &'static str, name: &str, took: Duration) {
        self.lock()
            .publish
            .entry((kind, name.to_owned()))
            .or_default()
            .observe(took.as_secs_f64());
    }

    /// `deliveries` of `queue` were handed to a consumer (in a unary answer, which sends
    /// them all or fails whole).
    pub fn delivered(&self, queue: &str, deliveries: &[ReceivedMessage]) {
        self.leased(queue, deliveries);
        self.sent(queue, deliveries.len());
    }

    /// `n` deliveries of `queue` left this server for a consumer: counted only once sent,
    /// so a delivery leased for a stream that ended before sending it (given back
    /// without spending an attempt) is not counted.
    pub fn sent(&self, queue: &str, n: usize) {
        if n > 0 {
            bump(&mut self.lock().delivered, queue, n as u64);
        }
    }

    /// `deliveries` of `queue` were leased to a consumer: their delivery-to-ack time is
    /// measured from now.
    pub fn leased(&self, queue: &str, deliveries: &[ReceivedMessage]) {
        if deliveries.is_empty() {
            return;
        }
        let now = now_ms();
        let mut inner = self.lock();
        if inner.held.len() + deliveries.len() > MAX_TRACKED {
            inner.held.retain(|_, h| h.lease_until_ms > now);
        }
        for d in deliveries {
            if inner.held.len() >= MAX_TRACKED {
                break;
            }
            inner.held.insert(
                (queue.to_owned(), d.seq, d.token.0),
                Held {
                    published_at_ms: d.published_at,
                    delivered_at_ms: now,
                    lease_until_ms: d.lease_until_ms,
                },
            );
        }
    }

    /// The delivery `seq`/`token` of `queue` was acked: its latencies are observed.
    pub fn acked(&self, queue: &str, seq: u64, token: u64) {
        let now = now_ms();
        let mut inner = self.lock();
        if let Some(held) = inner.held.remove(&(queue.to_owned(), seq, token)) {
            let secs = |from: i64| now.saturating_sub(from).max(0) as f64 / 1000.0;
            observe(
                &mut inner.delivery_to_ack,
                queue,
                secs(held.delivered_at_ms),
            );
            observe(&mut inner.publish_to_ack, queue, secs(held.published_at_ms));
        }
    }

    /// The delivery ended without an ack (nack, or a lease given back).
    pub fn settled_without_ack(&self, queue: &str, seq: u64, token: u64) {
        self.lock().held.remove(&(queue.to_owned(), seq, token));
    }

    /// The delivery was rejected by its consumer.
    pub fn rejected(&self, queue: &str, seq: u64, token: u64) {
        let mut inner = self.lock();
        inner.held.remove(&(queue.to_owned(), seq, token));
        bump(&mut inner.rejected, queue, 1);
    }

    pub fn snapshot(&self) -> Snapshot {
        let inner = self.lock();
        Snapshot {
            delivered: inner.delivered.clone(),
            rejected: inner.rejected.clone(),
            publish: inner.publish.clone(),
            delivery_to_ack: inner.delivery_to_ack.clone(),
            publish_to_ack: inner.publish_to_ack.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_observation_lands_in_the_first_bucket_that_holds_it() {
        let mut h = Histogram::default();
        h.observe(0.003);
        h.observe(5000.0);
        assert_eq!(h.counts[3], 1); // 0.005
        assert_eq!(h.counts.iter().sum::<u64>(), 1); // 5000 s is only in +Inf
        assert_eq!(h.count, 2);
    }
}
