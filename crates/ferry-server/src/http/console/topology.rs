//! `GET /v1/console/topology`: what feeds what — topics, the subscriptions and links that
//! take from them, the queues those deliver into, and where each queue dead-letters —
//! with the names the Kafka, SQS and SNS front ends give each object.
//!
//! A Ferry subscription is a queue fed by a topic: it shows as a `subscription` node
//! (its filter) delivering into a `queue` node of the same name. A link (a topic feeding
//! an existing queue, as an SNS subscription of an SQS queue is) shows as a
//! `subscription` node named `<queue>/<link>` delivering into that queue.

use std::collections::HashSet;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use ferry_broker::Name;
use serde::Serialize;

use super::{dead_letter_queue_of, dead_letter_queues};
use crate::auth::Action;
use crate::http::Shared;
use crate::http::error::ApiError;

/// How the front ends that `ferry serve` runs beside the HTTP API name things, so the
/// topology can show an object by the name a Kafka, SQS or SNS client knows it by. The
/// default names none: no front end is on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsoleAliases {
    /// The Kafka endpoint is on: a topic is the Kafka topic of the same name.
    pub kafka: bool,
    /// The SQS/SNS endpoint is on, and how it names queues and topics.
    pub aws: Option<AwsNames>,
}

/// What the SQS/SNS endpoint puts into queue URLs and ARNs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsNames {
    /// The start of a queue URL, before `/<account>/<queue>`: `http://127.0.0.1:4566`.
    pub queue_url_base: String,
    pub account_id: String,
    pub region: String,
}

impl AwsNames {
    fn queue_url(&self, queue: &str) -> String {
        let base = self.queue_url_base.trim_end_matches('/');
        format!("{base}/{}/{queue}", self.account_id)
    }

    fn topic_arn(&self, topic: &str) -> String {
        format!("arn:aws:sns:{}:{}:{topic}", self.region, self.account_id)
    }
}

#[derive(Debug, Serialize)]
pub struct Alias {
    protocol: &'static str,
    name: String,
}

#[derive(Debug, Serialize)]
pub struct Node {
    id: String,
    kind: &'static str,
    name: String,
    /// Subscriptions only: what they take, `null` for everything.
    #[serde(skip_serializing_if = "Option::is_none")]
    filter: Option<Option<String>>,
    aliases: Vec<Alias>,
}

#[derive(Debug, Serialize)]
pub struct Edge {
    from: String,
    to: String,
    kind: &'static str,
}

#[derive(Debug, Serialize)]
pub struct Topology {
    nodes: Vec<Node>,
    edges: Vec<Edge>,
}

fn id(kind: &str, name: &str) -> String {
    format!("{kind}:{name}")
}

/// Any valid token; only the names it may describe (`admin`) are shown, and an edge only
/// when both its ends are.
pub async fn topology(
    State(s): State<Shared>,
    headers: HeaderMap,
) -> Result<Json<Topology>, ApiError> {
    let who = s.caller(&headers)?;
    let shows = |name: &str| s.gate.may(who, Action::Admin, name);
    let aliases = &s.console.settings.aliases;
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    for topic in s.broker.list_topics() {
        if !shows(topic.as_str()) {
            continue;
        }
        let mut names = Vec::new();
        if aliases.kafka {
            names.push(Alias {
                protocol: "kafka",
                name: topic.to_string(),
            });
        }
        if let Some(aws) = &aliases.aws {
            names.push(Alias {
                protocol: "sns",
                name: aws.topic_arn(topic.as_str()),
            });
        }
        nodes.push(Node {
            id: id("topic", topic.as_str()),
            kind: "topic",
            name: topic.to_string(),
            filter: None,
            aliases: names,
        });
    }
    let topics: HashSet<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let infos: Vec<_> = s
        .broker
        .list_queues()
        .iter()
        .filter_map(|q| s.broker.describe_queue(q.as_str()).ok())
        .collect();
    let dead_letter_queues = dead_letter_queues(&infos);
    let shown: HashSet<&str> = infos
        .iter()
        .map(|q| q.name.as_str())
        .filter(|q| shows(q))
        .collect();
    for q in infos.iter().filter(|q| shown.contains(q.name.as_str())) {
        let name = q.name.as_str();
        let queue_id = id("queue", name);
        let kind = if dead_letter_queues.contains(name) {
            "dead_letter_queue"
        } else {
            "queue"
        };
        let names = aliases
            .aws
            .iter()
            .map(|aws| Alias {
                protocol: "sqs",
                name: aws.queue_url(name),
            })
            .collect();
        nodes.push(Node {
            id: queue_id.clone(),
            kind,
            name: name.to_owned(),
            filter: None,
            aliases: names,
        });
        if let Some(dlq) = dead_letter_queue_of(q)
            && shown.contains(dlq.as_str())
        {
            edges.push(Edge {
                from: queue_id.clone(),
                to: id("queue", &dlq),
                kind: "dead_letters",
            });
        }
        if let Ok(sub) = s.broker.describe_subscription(name) {
            let filter = sub.spec.filter.to_string();
            feeds(
                &mut nodes,
                &mut edges,
                &topics,
                &sub.spec.topic,
                name,
                (!filter.trim().is_empty()).then_some(filter),
                &queue_id,
            );
        }
        for link in s.broker.queue_links(name).unwrap_or_default() {
            if link.detached {
                continue;
            }
            let policy = link.spec.filter.policy.clone();
            feeds(
                &mut nodes,
                &mut edges,
                &topics,
                &link.spec.topic,
                &format!("{name}/{}", link.name),
                (!policy.trim().is_empty()).then_some(policy),
                &queue_id,
            );
        }
    }
    Ok(Json(Topology { nodes, edges }))
}

/// A subscription node `name` taking from `topic` and delivering into `queue_id`; the
/// `subscribes` edge only when the topic is shown.
fn feeds(
    nodes: &mut Vec<Node>,
    edges: &mut Vec<Edge>,
    topics: &HashSet<String>,
    topic: &Name,
    name: &str,
    filter: Option<String>,
    queue_id: &str,
) {
    let sub_id = id("subscription", name);
    nodes.push(Node {
        id: sub_id.clone(),
        kind: "subscription",
        name: name.to_owned(),
        filter: Some(filter),
        aliases: Vec::new(),
    });
    if topics.contains(topic.as_str()) {
        edges.push(Edge {
            from: id("topic", topic.as_str()),
            to: sub_id.clone(),
            kind: "subscribes",
        });
    }
    edges.push(Edge {
        from: sub_id,
        to: queue_id.to_owned(),
        kind: "delivers",
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_names_are_the_sqs_urls_and_sns_arns_the_endpoint_answers_with() {
        let aws = AwsNames {
            queue_url_base: "http://127.0.0.1:4566/".into(),
            account_id: "000000000000".into(),
            region: "us-east-1".into(),
        };
        assert_eq!(
            aws.queue_url("orders"),
            "http://127.0.0.1:4566/000000000000/orders"
        );
        assert_eq!(
            aws.topic_arn("events"),
            "arn:aws:sns:us-east-1:000000000000:events"
        );
    }
}
