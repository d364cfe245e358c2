//! `GET /v1/console/overview`: every queue and topic the token may describe, a page of
//! each, with depth, rates, sparkline history and alerts.
//!
//! Fast with thousands of names: the names are listed, filtered and paged first, and
//! only the page's rows are described — from stats, never from messages. Rates and
//! histories come from the sampler's rings; a name created since the last sample shows
//! at once with its live stats and an empty history.

use std::collections::HashMap;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use ferry_broker::Name;
use serde::{Deserialize, Serialize};

use super::history::{QueueSample, Series, TopicSample};
use super::{dead_letter_queue_of, ms};
use crate::auth::Action;
use crate::http::Shared;
use crate::http::error::ApiError;

/// Rows per page unless asked, and the most one page may have.
pub const DEFAULT_LIMIT: usize = 50;
pub const MAX_LIMIT: usize = 500;
/// Points of each row's sparkline: the last this many samples.
pub const SPARKLINE: usize = 30;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverviewQuery {
    /// Rows whose name contains this, in any case.
    name: Option<String>,
    queue_offset: Option<usize>,
    topic_offset: Option<usize>,
    limit: Option<usize>,
}

#[derive(Serialize)]
pub struct Overview {
    now_ms: i64,
    sample_interval_ms: u64,
    age_alert_ms: u64,
    lag_alert_ms: u64,
    queues: Page<QueueRow>,
    topics: Page<TopicRow>,
}

#[derive(Serialize)]
pub struct Page<R> {
    total: usize,
    offset: usize,
    rows: Vec<R>,
}

#[derive(Serialize)]
pub struct QueueRow {
    name: String,
    dead_letter_queue: Option<String>,
    is_dead_letter_queue: bool,
    ready: usize,
    in_flight: usize,
    delayed: usize,
    parked: usize,
    dlq_depth: usize,
    oldest_ready_age_ms: Option<i64>,
    publish_rate: f32,
    ack_rate: f32,
    publish_history: Vec<f32>,
    ack_history: Vec<f32>,
    alerts: Vec<&'static str>,
}

#[derive(Serialize)]
pub struct GroupRow {
    group: String,
    members: usize,
    lag_records: u64,
    lag_ms: i64,
}

#[derive(Serialize)]
pub struct TopicRow {
    name: String,
    partitions: usize,
    records: u64,
    publish_rate: f32,
    publish_history: Vec<f32>,
    subscriptions: Vec<String>,
    groups: Vec<GroupRow>,
    alerts: Vec<&'static str>,
}

fn page_of(names: &[Name], offset: usize, limit: usize) -> &[Name] {
    let start = offset.min(names.len());
    &names[start..(start + limit).min(names.len())]
}

pub async fn overview(
    State(s): State<Shared>,
    headers: HeaderMap,
    query: Result<Query<OverviewQuery>, QueryRejection>,
) -> Result<Json<Overview>, ApiError> {
    let who = s.caller(&headers)?;
    let Query(q) = query?;
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::bad_request(
            "out_of_range",
            format!("limit is 1 to {MAX_LIMIT} rows, got {limit}"),
        ));
    }
    let needle = q.name.map(|n| n.to_lowercase());
    // Names the token may describe, as lists show them; `list_*` come sorted by name.
    let shows = |name: &Name| {
        s.gate.may(who, Action::Admin, name.as_str())
            && needle
                .as_deref()
                .is_none_or(|n| name.as_str().to_lowercase().contains(n))
    };
    let queues: Vec<Name> = s.broker.list_queues().into_iter().filter(shows).collect();
    let topics: Vec<Name> = s.broker.list_topics().into_iter().filter(shows).collect();
    let (queue_offset, topic_offset) = (q.queue_offset.unwrap_or(0), q.topic_offset.unwrap_or(0));
    let settings = &s.console.settings;
    let queue_rows = queue_rows(&s, page_of(&queues, queue_offset, limit));
    let topic_rows = topic_rows(&s, who, page_of(&topics, topic_offset, limit));
    Ok(Json(Overview {
        now_ms: s.broker.now_ms(),
        sample_interval_ms: ms(settings.sample_interval),
        age_alert_ms: ms(settings.age_alert),
        lag_alert_ms: ms(settings.lag_alert),
        queues: Page {
            total: queues.len(),
            offset: queue_offset,
            rows: queue_rows,
        },
        topics: Page {
            total: topics.len(),
            offset: topic_offset,
            rows: topic_rows,
        },
    }))
}

/// The latest rates and the sparkline of one name's ring (none yet: 0 and empty).
fn rates<S: Copy>(series: Option<&Series<S>>, rate: impl Fn(&S) -> f32) -> (f32, Vec<f32>) {
    let Some(series) = series else {
        return (0.0, Vec::new());
    };
    (
        series.latest().map_or(0.0, &rate),
        series.last_n(SPARKLINE).map(rate).collect(),
    )
}

fn queue_rows(s: &Shared, page: &[Name]) -> Vec<QueueRow> {
    let age_alert = ms(s.console.settings.age_alert);
    let infos: Vec<_> = page
        .iter()
        // Deleted since the list: left out.
        .filter_map(|name| s.broker.describe_queue(name.as_str()).ok())
        .collect();
    let history = s.console.history();
    infos
        .into_iter()
        .map(|q| {
            let name = q.name.to_string();
            let is_dead_letter_queue = s.broker.is_dead_letter_queue(&name);
            let dead_letter_queue = dead_letter_queue_of(&q);
            let st = &q.stats.state;
            let dlq_depth = if is_dead_letter_queue {
                st.tracked
            } else {
                dead_letter_queue
                    .as_deref()
                    .and_then(|dlq| s.broker.describe_queue(dlq).ok())
                    .map_or(0, |dlq| dlq.stats.state.tracked)
            };
            let series = history.queue(&name);
            let (publish_rate, publish_history) = rates(series, |q: &QueueSample| q.publish_rate);
            let (ack_rate, ack_history) = rates(series, |q: &QueueSample| q.ack_rate);
            let mut alerts = Vec::new();
            if dlq_depth > 0 {
                alerts.push("dead_letters");
            }
            if st
                .oldest_ready_age_ms
                .is_some_and(|age| age.max(0) as u64 > age_alert)
            {
                alerts.push("old_messages");
            }
            QueueRow {
                dead_letter_queue,
                is_dead_letter_queue,
                ready: st.ready,
                in_flight: st.in_flight,
                delayed: st.delayed,
                parked: st.parked_messages,
                dlq_depth,
                oldest_ready_age_ms: st.oldest_ready_age_ms,
                publish_rate,
                ack_rate,
                publish_history,
                ack_history,
                alerts,
                name,
            }
        })
        .collect()
}

fn topic_rows(s: &Shared, who: crate::auth::Caller, page: &[Name]) -> Vec<TopicRow> {
    if page.is_empty() {
        return Vec::new();
    }
    let lag_alert = i64::try_from(ms(s.console.settings.lag_alert)).unwrap_or(i64::MAX);
    // The subscriptions of the page's topics the token may describe, from the queues:
    // a queue that is no subscription is answered without describing it.
    let mut subscriptions: HashMap<Name, Vec<String>> = HashMap::new();
    for queue in s.broker.list_queues() {
        if let Ok(sub) = s.broker.describe_subscription(queue.as_str())
            && page.contains(&sub.spec.topic)
            && s.gate.may(who, Action::Admin, queue.as_str())
        {
            subscriptions
                .entry(sub.spec.topic.clone())
                .or_default()
                .push(queue.to_string());
        }
    }
    let mut groups: HashMap<Name, Vec<GroupRow>> = HashMap::new();
    for (topic, group) in s.broker.list_groups() {
        if !page.contains(&topic) {
            continue;
        }
        let Ok(info) = s.broker.describe_group(topic.as_str(), group.as_str()) else {
            continue;
        };
        groups.entry(topic).or_default().push(GroupRow {
            group: group.to_string(),
            members: info.members.len(),
            lag_records: info.partitions.iter().map(|p| p.lag_records).sum(),
            lag_ms: info.partitions.iter().map(|p| p.lag_ms).max().unwrap_or(0),
        });
    }
    let infos: Vec<_> = page
        .iter()
        .filter_map(|name| s.broker.describe_topic(name.as_str()).ok())
        .collect();
    let history = s.console.history();
    infos
        .into_iter()
        .map(|t| {
            let groups = groups.remove(&t.name).unwrap_or_default();
            let mut alerts = Vec::new();
            if groups.iter().any(|g| g.lag_ms > lag_alert) {
                alerts.push("group_lag");
            }
            let (publish_rate, publish_history) =
                rates(history.topic(t.name.as_str()), |t: &TopicSample| {
                    t.publish_rate
                });
            TopicRow {
                name: t.name.to_string(),
                partitions: t.partitions.len(),
                records: t
                    .partitions
                    .iter()
                    .map(|p| p.end_offset.saturating_sub(p.start_offset))
                    .sum(),
                publish_rate,
                publish_history,
                subscriptions: subscriptions.remove(&t.name).unwrap_or_default(),
                groups,
                alerts,
            }
        })
        .collect()
}
