//! Queues, topics, subscriptions and groups: create, list, describe, delete.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use ferry_broker::QueueSpec;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::message::{GroupInfo, QueueInfo, SubscriptionInfo, TopicInfo};
use super::path::ApiPath;
use super::{Shared, parse, spec};
use crate::auth::Action;
use crate::convert;

type Reply<T> = Result<T, ApiError>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Create<S> {
    name: String,
    spec: Option<S>,
}

#[derive(Serialize)]
pub struct Created {
    name: String,
}

#[derive(Serialize)]
pub struct Names {
    names: Vec<String>,
}

pub async fn create_queue(
    State(s): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Reply<(StatusCode, Json<Created>)> {
    let r: Create<spec::QueueSpec> = parse(&body?)?;
    s.allow(&headers, Action::Admin, &r.name)?;
    let spec = convert::queue_spec(r.spec.map(Into::into), QueueSpec::default())?;
    s.broker.create_queue(&r.name, spec).await?;
    Ok((StatusCode::CREATED, Json(Created { name: r.name })))
}

pub async fn list_queues(State(s): State<Shared>, headers: HeaderMap) -> Reply<Json<Names>> {
    let who = s.caller(&headers)?;
    let names = s
        .broker
        .list_queues()
        .iter()
        .map(|n| n.to_string())
        .filter(|n| s.gate.may(who, Action::Admin, n))
        .collect();
    Ok(Json(Names { names }))
}

pub async fn describe_queue(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(queue): ApiPath<String>,
) -> Reply<Json<QueueInfo>> {
    s.allow(&headers, Action::Admin, &queue)?;
    let info = s.broker.describe_queue(&queue)?;
    Ok(Json(convert::queue_info(info).into()))
}

/// `PUT /v1/queues/{queue}` with a spec (as `POST /v1/queues` takes, whole: unset fields
/// take the defaults): the queue's settings changed in place; a setting fixed at creation
/// changed is refused (400, `queue_setting_fixed`) and nothing changes. Answers as describe does.
pub async fn update_queue(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(queue): ApiPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Reply<Json<QueueInfo>> {
    s.allow(&headers, Action::Admin, &queue)?;
    let given: spec::QueueSpec = parse(&body?)?;
    let next = convert::queue_spec(Some(given.into()), QueueSpec::default())?;
    s.broker.update_queue(&queue, |spec| *spec = next).await?;
    let info = s.broker.describe_queue(&queue)?;
    Ok(Json(convert::queue_info(info).into()))
}

pub async fn delete_queue(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(queue): ApiPath<String>,
) -> Reply<StatusCode> {
    s.allow(&headers, Action::Admin, &queue)?;
    s.broker.delete_queue(&queue).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn create_topic(
    State(s): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Reply<(StatusCode, Json<Created>)> {
    let r: Create<spec::TopicSpec> = parse(&body?)?;
    s.allow(&headers, Action::Admin, &r.name)?;
    // Over gRPC 0 partitions is proto3's "unset"; in JSON an explicit 0 asks for none, and
    // gets the broker's refusal instead of the default.
    if r.spec.as_ref().is_some_and(|t| t.partitions == Some(0)) {
        ferry_broker::TopicSpec::with_partitions(0).validate()?;
    }
    let spec = convert::topic_spec(r.spec.map(Into::into))?;
    s.broker.create_topic(&r.name, spec).await?;
    Ok((StatusCode::CREATED, Json(Created { name: r.name })))
}

/// `PUT /v1/topics/{topic}` with a spec, as [`update_queue`]; `partitions` absent keeps
/// the count, a larger one adds partitions first (the HTTP API has no call of its own for
/// that), a smaller one is refused.
pub async fn update_topic(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(topic): ApiPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Reply<Json<TopicInfo>> {
    s.allow(&headers, Action::Admin, &topic)?;
    let given: spec::TopicSpec = parse(&body?)?;
    let keep_partitions = given.partitions.is_none();
    let mut next = convert::topic_spec(Some(given.into()))?;
    let current = s.broker.describe_topic(&topic)?.spec.partitions;
    if !keep_partitions && next.partitions > current {
        next.validate()?;
        s.broker.add_partitions(&topic, next.partitions).await?;
    }
    s.broker
        .update_topic(&topic, |spec| {
            if keep_partitions {
                next.partitions = spec.partitions;
            }
            *spec = next;
        })
        .await?;
    let info = s.broker.describe_topic(&topic)?;
    Ok(Json(convert::topic_info(info).into()))
}

pub async fn list_topics(State(s): State<Shared>, headers: HeaderMap) -> Reply<Json<Names>> {
    let who = s.caller(&headers)?;
    let names = s
        .broker
        .list_topics()
        .iter()
        .map(|n| n.to_string())
        .filter(|n| s.gate.may(who, Action::Admin, n))
        .collect();
    Ok(Json(Names { names }))
}

pub async fn describe_topic(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(topic): ApiPath<String>,
) -> Reply<Json<TopicInfo>> {
    s.allow(&headers, Action::Admin, &topic)?;
    let info = s.broker.describe_topic(&topic)?;
    Ok(Json(convert::topic_info(info).into()))
}

pub async fn delete_topic(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(topic): ApiPath<String>,
) -> Reply<StatusCode> {
    s.allow(&headers, Action::Admin, &topic)?;
    s.broker.delete_topic(&topic).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn create_subscription(
    State(s): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Reply<(StatusCode, Json<Created>)> {
    let r: Create<spec::SubscriptionSpec> = parse(&body?)?;
    s.allow(&headers, Action::Admin, &r.name)?;
    let spec = convert::subscription_spec(r.spec.map(Into::into))?;
    s.broker.create_subscription(&r.name, spec).await?;
    Ok((StatusCode::CREATED, Json(Created { name: r.name })))
}

pub async fn describe_subscription(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(name): ApiPath<String>,
) -> Reply<Json<SubscriptionInfo>> {
    s.allow(&headers, Action::Admin, &name)?;
    let info = s.broker.describe_subscription(&name)?;
    Ok(Json(convert::subscription_info(info).into()))
}

pub async fn delete_subscription(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(name): ApiPath<String>,
) -> Reply<StatusCode> {
    s.allow(&headers, Action::Admin, &name)?;
    // A subscription is a queue fed by a topic: refuse to delete a plain queue here.
    s.broker.describe_subscription(&name)?;
    s.broker.delete_queue(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn describe_group(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath((topic, group)): ApiPath<(String, String)>,
) -> Reply<Json<GroupInfo>> {
    s.allow(&headers, Action::Admin, &topic)?;
    let info = s.broker.describe_group(&topic, &group)?;
    Ok(Json(convert::group_info(info).into()))
}
