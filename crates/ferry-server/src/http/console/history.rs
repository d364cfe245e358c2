//! The sampler and its ring buffer: every sample interval, each queue's and topic's stats
//! become one compact sample in a ring of fixed size, so the console's charts and
//! sparklines have the last hour from the moment a page opens.
//!
//! **Rates** are counter differences between two samples over the time between them:
//! publishes into a queue from its `next_seq` (everything ever stored in it), acks from
//! its `acked`, topic publishes from the sum of its partitions' end offsets. A queue's
//! first sample has rate 0; a counter that went back (the queue deleted and created again
//! between two samples) counts as 0 too, never as a negative rate.
//!
//! **Size.** A queue sample is 40 bytes, a topic's 32; a ring holds one hour at the
//! interval, at most [`MAX_SAMPLES`] (so below one second an hour is not kept), and fills
//! as samples come: a thousand queues at the default 10 s hold about 14 MB after an hour.
//! Names that no longer exist drop out at the next sample.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use ferry_broker::{Broker, Name};
use serde::Serialize;
use tokio::sync::watch;

use super::events::ConsoleEvent;
use super::{Console, dead_letter_queue_of, dead_letter_queues, ms, stopped};
use crate::auth::Action;
use crate::http::Shared;
use crate::http::error::ApiError;
use crate::http::path::ApiPath;

/// How far back the history goes, at most.
pub const HISTORY_SPAN: Duration = Duration::from_secs(3600);
/// The most samples one ring holds, whatever the interval.
pub const MAX_SAMPLES: usize = 3600;

/// One queue at one sample. Counts saturate at `u32::MAX` to keep samples small.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QueueSample {
    pub at_ms: i64,
    pub ready: u32,
    pub in_flight: u32,
    pub delayed: u32,
    pub dlq_depth: u32,
    pub oldest_ready_age_ms: Option<u32>,
    pub publish_rate: f32,
    pub ack_rate: f32,
}

/// One topic at one sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TopicSample {
    pub at_ms: i64,
    pub records: u64,
    pub publish_rate: f32,
    pub max_group_lag_ms: u32,
}

/// The counters of the last sample, which the next one's rates are taken against.
#[derive(Debug, Clone, Copy)]
struct Counters {
    at_ms: i64,
    published: u64,
    acked: u64,
}

impl Counters {
    /// Per second since `self`, of `published` and `acked` now.
    fn rates(self, now: Counters) -> (f32, f32) {
        let seconds = (now.at_ms - self.at_ms) as f64 / 1000.0;
        if seconds <= 0.0 {
            return (0.0, 0.0);
        }
        let rate = |from: u64, to: u64| (to.saturating_sub(from) as f64 / seconds) as f32;
        (
            rate(self.published, now.published),
            rate(self.acked, now.acked),
        )
    }
}

/// One name's ring and the counters its next sample's rates need.
#[derive(Debug)]
pub struct Series<S> {
    samples: VecDeque<S>,
    last: Counters,
}

impl<S: Copy> Series<S> {
    pub fn samples(&self) -> impl DoubleEndedIterator<Item = &S> + ExactSizeIterator {
        self.samples.iter()
    }

    pub fn latest(&self) -> Option<&S> {
        self.samples.back()
    }

    /// The last `n` samples, oldest first.
    pub fn last_n(&self, n: usize) -> impl Iterator<Item = &S> {
        self.samples
            .iter()
            .skip(self.samples.len().saturating_sub(n))
    }
}

/// What the sampler read of one queue.
#[derive(Debug, Clone, Copy)]
pub struct QueueReading {
    pub ready: usize,
    pub in_flight: usize,
    pub delayed: usize,
    pub dlq_depth: usize,
    pub oldest_ready_age_ms: Option<u64>,
    pub next_seq: u64,
    pub acked: u64,
}

/// What the sampler read of one topic.
#[derive(Debug, Clone, Copy)]
pub struct TopicReading {
    pub records: u64,
    /// The sum of its partitions' end offsets: every record ever appended.
    pub appended: u64,
    pub max_group_lag_ms: i64,
}

fn small(n: impl TryInto<u32>) -> u32 {
    n.try_into().unwrap_or(u32::MAX)
}

/// Every queue's and topic's ring.
#[derive(Debug)]
pub struct History {
    interval: Duration,
    capacity: usize,
    queues: HashMap<String, Series<QueueSample>>,
    topics: HashMap<String, Series<TopicSample>>,
}

impl History {
    pub fn new(interval: Duration) -> History {
        let per_hour = HISTORY_SPAN.as_secs_f64() / interval.as_secs_f64().max(1e-3);
        History {
            interval,
            capacity: (per_hour.ceil() as usize).clamp(2, MAX_SAMPLES),
            queues: HashMap::new(),
            topics: HashMap::new(),
        }
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    pub fn queue(&self, name: &str) -> Option<&Series<QueueSample>> {
        self.queues.get(name)
    }

    pub fn topic(&self, name: &str) -> Option<&Series<TopicSample>> {
        self.topics.get(name)
    }

    fn push<S>(capacity: usize, series: &mut Series<S>, sample: S, now: Counters) {
        if series.samples.len() == capacity {
            series.samples.pop_front();
        }
        series.samples.push_back(sample);
        series.last = now;
    }

    pub fn record_queue(&mut self, name: &str, at_ms: i64, r: QueueReading) {
        let now = Counters {
            at_ms,
            published: r.next_seq,
            acked: r.acked,
        };
        let series = self
            .queues
            .entry(name.to_owned())
            .or_insert_with(|| Series {
                samples: VecDeque::new(),
                last: now,
            });
        let (publish_rate, ack_rate) = series.last.rates(now);
        let sample = QueueSample {
            at_ms,
            ready: small(r.ready),
            in_flight: small(r.in_flight),
            delayed: small(r.delayed),
            dlq_depth: small(r.dlq_depth),
            oldest_ready_age_ms: r.oldest_ready_age_ms.map(small),
            publish_rate,
            ack_rate,
        };
        History::push(self.capacity, series, sample, now);
    }

    pub fn record_topic(&mut self, name: &str, at_ms: i64, r: TopicReading) {
        let now = Counters {
            at_ms,
            published: r.appended,
            acked: 0,
        };
        let series = self
            .topics
            .entry(name.to_owned())
            .or_insert_with(|| Series {
                samples: VecDeque::new(),
                last: now,
            });
        let (publish_rate, _) = series.last.rates(now);
        let sample = TopicSample {
            at_ms,
            records: r.records,
            publish_rate,
            max_group_lag_ms: small(r.max_group_lag_ms.max(0)),
        };
        History::push(self.capacity, series, sample, now);
    }

    /// Forgets the queues and topics not in these sets: deleted since the last sample.
    pub fn retain(&mut self, queues: &[String], topics: &[String]) {
        let queues: std::collections::HashSet<&str> = queues.iter().map(String::as_str).collect();
        let topics: std::collections::HashSet<&str> = topics.iter().map(String::as_str).collect();
        self.queues.retain(|name, _| queues.contains(name.as_str()));
        self.topics.retain(|name, _| topics.contains(name.as_str()));
    }
}

/// Reads every queue's and topic's stats (never a message) and records one sample of each.
/// Synchronous: reading a topic's end offsets and a group's lag may touch the disk.
pub fn sample(broker: &Broker, console: &Console) -> i64 {
    let at_ms = broker.now_ms();
    let infos: Vec<_> = broker
        .list_queues()
        .iter()
        .filter_map(|name| broker.describe_queue(name.as_str()).ok())
        .collect();
    let dead_letter_queues = dead_letter_queues(&infos);
    let depth: HashMap<&str, usize> = infos
        .iter()
        .map(|q| (q.name.as_str(), q.stats.state.tracked))
        .collect();
    let queues: Vec<(String, QueueReading)> = infos
        .iter()
        .map(|q| {
            let s = &q.stats.state;
            let dlq_depth = if dead_letter_queues.contains(q.name.as_str()) {
                s.tracked
            } else {
                dead_letter_queue_of(q)
                    .and_then(|dlq| depth.get(dlq.as_str()).copied())
                    .unwrap_or(0)
            };
            let reading = QueueReading {
                ready: s.ready,
                in_flight: s.in_flight,
                delayed: s.delayed,
                dlq_depth,
                oldest_ready_age_ms: s.oldest_ready_age_ms.map(|a| a.max(0) as u64),
                next_seq: q.stats.next_seq,
                acked: q.stats.acked,
            };
            (q.name.to_string(), reading)
        })
        .collect();
    let mut lag: HashMap<Name, i64> = HashMap::new();
    for (topic, group) in broker.list_groups() {
        let Ok(partitions) = broker.group_lag(topic.as_str(), group.as_str()) else {
            continue;
        };
        let worst = partitions.iter().map(|p| p.lag_ms).max().unwrap_or(0);
        let entry = lag.entry(topic).or_insert(0);
        *entry = (*entry).max(worst);
    }
    let topics: Vec<(String, TopicReading)> = broker
        .list_topics()
        .iter()
        .filter_map(|name| {
            let info = broker.describe_topic(name.as_str()).ok()?;
            let reading = TopicReading {
                records: info
                    .partitions
                    .iter()
                    .map(|p| p.end_offset.saturating_sub(p.start_offset))
                    .sum(),
                appended: info.partitions.iter().map(|p| p.end_offset).sum(),
                max_group_lag_ms: lag.get(name).copied().unwrap_or(0),
            };
            Some((name.to_string(), reading))
        })
        .collect();
    let mut history = console.history();
    for (name, reading) in &queues {
        history.record_queue(name, at_ms, *reading);
    }
    for (name, reading) in &topics {
        history.record_topic(name, at_ms, *reading);
    }
    let queue_names: Vec<String> = queues.into_iter().map(|(n, _)| n).collect();
    let topic_names: Vec<String> = topics.into_iter().map(|(n, _)| n).collect();
    history.retain(&queue_names, &topic_names);
    at_ms
}

/// Samples every interval until `stop` says stop or the console is dropped (the router
/// that held it is gone), and tells the event stream after each sample.
pub async fn run(broker: Broker, console: Weak<Console>, mut stop: Option<watch::Receiver<bool>>) {
    let Some(interval) = console.upgrade().map(|c| c.settings.sample_interval) else {
        return;
    };
    let mut tick = tokio::time::interval(interval);
    // A sample that took longer than the interval delays the next rather than bunching.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stopped(&mut stop) => return,
        }
        let Some(console) = console.upgrade() else {
            return;
        };
        let (b, c) = (broker.clone(), Arc::clone(&console));
        // Off the async workers: a topic's or group's reading may wait on the disk.
        let Ok(at_ms) = tokio::task::spawn_blocking(move || sample(&b, &c)).await else {
            tracing::warn!("a console sample failed; trying again at the next interval");
            continue;
        };
        let _ = console.events.send(ConsoleEvent::Sample { at_ms });
    }
}

#[derive(Serialize)]
pub struct Samples<S> {
    sample_interval_ms: u64,
    samples: Vec<S>,
}

/// `GET /v1/console/queues/{queue}/history`: what describing the queue needs (`admin`).
pub async fn queue_history(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(queue): ApiPath<String>,
) -> Result<Json<Samples<QueueSample>>, ApiError> {
    s.allow(&headers, Action::Admin, &queue)?;
    // Unknown: answered as describing it would be.
    s.broker.describe_queue(&queue)?;
    let history = s.console.history();
    Ok(Json(Samples {
        sample_interval_ms: ms(history.interval()),
        samples: history
            .queue(&queue)
            .map(|q| q.samples().copied().collect())
            .unwrap_or_default(),
    }))
}

/// `GET /v1/console/topics/{topic}/history`: what describing the topic needs (`admin`).
pub async fn topic_history(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(topic): ApiPath<String>,
) -> Result<Json<Samples<TopicSample>>, ApiError> {
    s.allow(&headers, Action::Admin, &topic)?;
    s.broker.describe_topic(&topic)?;
    let history = s.console.history();
    Ok(Json(Samples {
        sample_interval_ms: ms(history.interval()),
        samples: history
            .topic(&topic)
            .map(|t| t.samples().copied().collect())
            .unwrap_or_default(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(next_seq: u64, acked: u64) -> QueueReading {
        QueueReading {
            ready: 1,
            in_flight: 0,
            delayed: 0,
            dlq_depth: 0,
            oldest_ready_age_ms: None,
            next_seq,
            acked,
        }
    }

    #[test]
    fn rates_are_counter_differences_over_the_time_between_samples() {
        let mut h = History::new(Duration::from_secs(10));
        h.record_queue("q", 0, reading(100, 0));
        h.record_queue("q", 10_000, reading(150, 20));
        // Deleted and created again: the counter went back, which is no negative rate.
        h.record_queue("q", 20_000, reading(3, 20));
        let rates: Vec<_> = h
            .queue("q")
            .unwrap()
            .samples()
            .map(|s| (s.publish_rate, s.ack_rate))
            .collect();
        assert_eq!(rates, [(0.0, 0.0), (5.0, 2.0), (0.0, 0.0)]);
    }

    #[test]
    fn a_ring_keeps_one_hour_at_the_interval_and_forgets_deleted_names() {
        let mut h = History::new(Duration::from_secs(60));
        for i in 0..100 {
            h.record_queue("q", i * 60_000, reading(i as u64, 0));
        }
        let q = h.queue("q").unwrap();
        assert_eq!(q.samples().len(), 60);
        assert_eq!(q.samples().next().unwrap().at_ms, 40 * 60_000);
        assert_eq!(q.last_n(30).count(), 30);
        assert_eq!(History::new(Duration::from_millis(1)).capacity, MAX_SAMPLES);
        h.retain(&[], &[]);
        assert!(h.queue("q").is_none());
    }
}
