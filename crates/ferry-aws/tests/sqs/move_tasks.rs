//! Message-move tasks: moving dead letters back to their sources or into another queue, at
//! a rate, cancelled, failed, listed; every refusal with SQS's code, in both protocols.

use std::time::{Duration, Instant};

use base64::Engine;
use ferry_broker::OutgoingMessage;
use serde_json::{Value, json};

use crate::support::Served;

fn arn(queue: &str) -> String {
    format!("arn:aws:sqs:us-east-1:000000000000:{queue}")
}

fn policy(target: &str) -> String {
    json!({"deadLetterTargetArn": arn(target), "maxReceiveCount": 1}).to_string()
}

/// Queue `source` dead-lettering into `dlq` after one receive.
async fn pipe(s: &Served, source: &str, dlq: &str) -> String {
    if s.broker.describe_queue(dlq).is_err() {
        s.create(dlq, json!({})).await;
    }
    s.create(source, json!({"RedrivePolicy": policy(dlq)}))
        .await
}

/// Sends `bodies` to `source` and lets each fail its one delivery, so they land in `dlq`
/// as dead letters that remember `source`.
async fn dead_letter(s: &Served, source: &str, dlq: &str, bodies: &[&str]) {
    let url = s.url(source);
    for body in bodies {
        s.ok("SendMessage", json!({"QueueUrl": url, "MessageBody": body}))
            .await;
    }
    let before = s.broker.describe_queue(dlq).unwrap().stats.state.tracked;
    s.ok(
        "ReceiveMessage",
        json!({"QueueUrl": url, "MaxNumberOfMessages": 10, "VisibilityTimeout": 0}),
    )
    .await;
    wait_until(|| {
        s.broker.describe_queue(dlq).unwrap().stats.state.tracked == before + bodies.len()
    })
    .await;
}

/// Puts `n` messages straight into `queue` through the broker.
async fn fill(s: &Served, queue: &str, n: usize) {
    let messages = (0..n)
        .map(|i| OutgoingMessage::new(format!("m{i}")))
        .collect();
    s.broker.publish_batch(queue, messages).await.unwrap();
}

async fn wait_until(mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn latest(s: &Served, source: &str) -> Value {
    let got = s
        .ok("ListMessageMoveTasks", json!({"SourceArn": arn(source)}))
        .await;
    got["Results"][0].clone()
}

/// The latest task of `source` once it has ended.
async fn ended(s: &Served, source: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let task = latest(s, source).await;
        if !matches!(task["Status"].as_str(), Some("RUNNING" | "CANCELLING")) {
            return task;
        }
        assert!(Instant::now() < deadline, "still {task}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn ready(s: &Served, queue: &str) -> usize {
    s.broker.describe_queue(queue).unwrap().stats.state.ready
}

#[tokio::test]
async fn without_a_destination_each_dead_letter_goes_back_to_its_source() {
    let s = Served::start().await;
    pipe(&s, "a", "dlq").await;
    pipe(&s, "b", "dlq").await;
    dead_letter(&s, "a", "dlq", &["a1", "a2"]).await;
    dead_letter(&s, "b", "dlq", &["b1"]).await;

    let started = s
        .ok("StartMessageMoveTask", json!({"SourceArn": arn("dlq")}))
        .await;
    assert!(started["TaskHandle"].as_str().is_some(), "{started}");
    let task = ended(&s, "dlq").await;
    assert_eq!(task["Status"], "COMPLETED", "{task}");
    assert_eq!(task["ApproximateNumberOfMessagesMoved"], 3);
    assert_eq!(task["ApproximateNumberOfMessagesToMove"], 3);
    assert_eq!(task["SourceArn"], arn("dlq"));
    assert!(task["StartedTimestamp"].as_i64().unwrap() > 1_600_000_000_000);
    // Only a running task shows its handle; what was not asked for is not answered.
    for absent in [
        "TaskHandle",
        "DestinationArn",
        "MaxNumberOfMessagesPerSecond",
        "FailureReason",
    ] {
        assert!(task.get(absent).is_none(), "{absent}: {task}");
    }
    assert_eq!(
        (ready(&s, "a"), ready(&s, "b"), ready(&s, "dlq")),
        (2, 1, 0)
    );
    let back = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": s.url("b"), "MessageAttributeNames": ["All"]}),
        )
        .await;
    assert_eq!(back["Messages"][0]["Body"], "b1");
}

#[tokio::test]
async fn a_rate_paces_the_move_into_the_destination() {
    let s = Served::start().await;
    pipe(&s, "source", "dlq").await;
    s.create("elsewhere", json!({})).await;
    fill(&s, "dlq", 20).await;
    let began = Instant::now();
    s.ok(
        "StartMessageMoveTask",
        json!({"SourceArn": arn("dlq"), "DestinationArn": arn("elsewhere"), "MaxNumberOfMessagesPerSecond": 10}),
    )
    .await;
    let task = ended(&s, "dlq").await;
    let took = began.elapsed();
    assert_eq!(task["Status"], "COMPLETED", "{task}");
    assert_eq!(task["ApproximateNumberOfMessagesMoved"], 20);
    assert_eq!(task["MaxNumberOfMessagesPerSecond"], 10);
    assert_eq!(task["DestinationArn"], arn("elsewhere"));
    // 20 messages at 10 a second: about 2 s; loosely, not a benchmark.
    assert!(took >= Duration::from_millis(1_500), "{took:?}");
    assert!(took < Duration::from_secs(15), "{took:?}");
    assert_eq!((ready(&s, "elsewhere"), ready(&s, "dlq")), (20, 0));
}

#[tokio::test]
async fn a_cancelled_task_stops_and_one_task_runs_per_source() {
    let s = Served::start().await;
    pipe(&s, "source", "dlq").await;
    s.create("elsewhere", json!({})).await;
    fill(&s, "dlq", 30).await;
    let start = json!({"SourceArn": arn("dlq"), "DestinationArn": arn("elsewhere"), "MaxNumberOfMessagesPerSecond": 2});
    let handle = s.ok("StartMessageMoveTask", start.clone()).await["TaskHandle"]
        .as_str()
        .unwrap()
        .to_owned();
    let running = latest(&s, "dlq").await;
    assert_eq!(running["Status"], "RUNNING");
    assert_eq!(running["TaskHandle"], handle.as_str());
    assert_eq!(running["ApproximateNumberOfMessagesToMove"], 30);

    let message = s
        .fails(
            "StartMessageMoveTask",
            start.clone(),
            400,
            "InvalidParameterValue",
        )
        .await;
    assert!(message.contains("already a task running"), "{message}");

    let cancelled = s
        .ok("CancelMessageMoveTask", json!({"TaskHandle": handle}))
        .await;
    let moved_then = cancelled["ApproximateNumberOfMessagesMoved"]
        .as_u64()
        .unwrap();
    let task = ended(&s, "dlq").await;
    assert_eq!(task["Status"], "CANCELLED", "{task}");
    let moved = task["ApproximateNumberOfMessagesMoved"].as_u64().unwrap();
    assert!(moved >= moved_then && moved < 30, "{moved}");
    assert_eq!(ready(&s, "elsewhere") as u64, moved);
    assert_eq!(ready(&s, "dlq") as u64, 30 - moved);
    // A task that is no longer running cannot be cancelled.
    let message = s
        .fails(
            "CancelMessageMoveTask",
            json!({"TaskHandle": handle}),
            404,
            "ResourceNotFoundException",
        )
        .await;
    assert!(message.contains("CANCELLED"), "{message}");

    // Once it has stopped, a new task may start; the list is newest first.
    s.ok(
        "StartMessageMoveTask",
        json!({"SourceArn": arn("dlq"), "DestinationArn": arn("elsewhere")}),
    )
    .await;
    ended(&s, "dlq").await;
    let both = s
        .ok(
            "ListMessageMoveTasks",
            json!({"SourceArn": arn("dlq"), "MaxResults": 10}),
        )
        .await;
    let statuses: Vec<&str> = both["Results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["Status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["COMPLETED", "CANCELLED"]);
    assert_eq!(ready(&s, "elsewhere"), 30);
}

#[tokio::test]
async fn a_destination_deleted_while_moving_fails_the_task() {
    let s = Served::start().await;
    pipe(&s, "source", "dlq").await;
    let elsewhere = s.create("elsewhere", json!({})).await;
    fill(&s, "dlq", 10).await;
    s.ok(
        "StartMessageMoveTask",
        json!({"SourceArn": arn("dlq"), "DestinationArn": arn("elsewhere"), "MaxNumberOfMessagesPerSecond": 1}),
    )
    .await;
    s.ok("DeleteQueue", json!({"QueueUrl": elsewhere})).await;
    let task = ended(&s, "dlq").await;
    assert_eq!(task["Status"], "FAILED", "{task}");
    assert_eq!(
        task["FailureReason"],
        "AWS.SimpleQueueService.NonExistentQueue"
    );
    let moved = task["ApproximateNumberOfMessagesMoved"].as_u64().unwrap();
    assert_eq!(ready(&s, "dlq") as u64, 10 - moved, "the rest stays");
}

#[tokio::test]
async fn refusals_use_sqs_codes_and_start_nothing() {
    let s = Served::start().await;
    pipe(&s, "source", "dlq").await;
    s.create("plain", json!({})).await;
    let message = s
        .fails(
            "StartMessageMoveTask",
            json!({"SourceArn": arn("plain")}),
            400,
            "InvalidParameterValue",
        )
        .await;
    assert_eq!(
        message,
        "Source queue must be configured as a Dead Letter Queue."
    );
    for (input, parameter) in [
        (json!({"SourceArn": arn("missing")}), "SourceArn"),
        (json!({"SourceArn": "not an arn"}), "SourceArn"),
        (
            json!({"SourceArn": arn("dlq"), "DestinationArn": arn("missing")}),
            "DestinationArn",
        ),
    ] {
        let message = s
            .fails(
                "StartMessageMoveTask",
                input,
                404,
                "ResourceNotFoundException",
            )
            .await;
        assert!(message.contains(parameter), "{message}");
    }
    for rate in [0, 501] {
        s.fails(
            "StartMessageMoveTask",
            json!({"SourceArn": arn("dlq"), "MaxNumberOfMessagesPerSecond": rate}),
            400,
            "InvalidParameterValue",
        )
        .await;
    }
    s.fails(
        "StartMessageMoveTask",
        json!({"SourceArn": arn("dlq"), "DestinationArn": arn("dlq")}),
        400,
        "InvalidParameterValue",
    )
    .await;
    s.fails(
        "ListMessageMoveTasks",
        json!({"SourceArn": arn("dlq"), "MaxResults": 11}),
        400,
        "InvalidParameterValue",
    )
    .await;
    s.fails(
        "ListMessageMoveTasks",
        json!({"SourceArn": arn("missing")}),
        404,
        "ResourceNotFoundException",
    )
    .await;
    s.fails("ListMessageMoveTasks", json!({}), 400, "MissingParameter")
        .await;
    // Nothing started.
    let none = s
        .ok("ListMessageMoveTasks", json!({"SourceArn": arn("dlq")}))
        .await;
    assert_eq!(none, json!({"Results": []}));

    let message = s
        .fails(
            "CancelMessageMoveTask",
            json!({"TaskHandle": "garbage"}),
            400,
            "InvalidParameterValue",
        )
        .await;
    assert_eq!(message, "Value for parameter TaskHandle is invalid.");
    let handle = |id: &str, source: &str| {
        base64::engine::general_purpose::STANDARD
            .encode(json!({"taskId": id, "sourceArn": arn(source)}).to_string())
    };
    let message = s
        .fails(
            "CancelMessageMoveTask",
            json!({"TaskHandle": handle("no-such-task", "dlq")}),
            404,
            "ResourceNotFoundException",
        )
        .await;
    assert_eq!(message, "Task does not exist.");
    let message = s
        .fails(
            "CancelMessageMoveTask",
            json!({"TaskHandle": handle("t", "missing")}),
            404,
            "ResourceNotFoundException",
        )
        .await;
    assert!(message.contains("SourceArn"), "{message}");
    s.fails("CancelMessageMoveTask", json!({}), 400, "MissingParameter")
        .await;
}

#[tokio::test]
async fn the_query_protocol_starts_lists_and_cancels_tasks() {
    let s = Served::start().await;
    pipe(&s, "source", "dlq").await;
    s.create("elsewhere", json!({})).await;
    fill(&s, "dlq", 20).await;
    let dlq = arn("dlq");
    let elsewhere = arn("elsewhere");
    let started = s
        .query(&[
            ("Action", "StartMessageMoveTask"),
            ("SourceArn", &dlq),
            ("DestinationArn", &elsewhere),
            ("MaxNumberOfMessagesPerSecond", "1"),
        ])
        .await;
    assert_eq!(started.status, 200, "{}", started.body);
    let handle = between(&started.body, "<TaskHandle>", "</TaskHandle>");
    let listed = s
        .query(&[
            ("Action", "ListMessageMoveTasks"),
            ("SourceArn", &dlq),
            ("MaxResults", "10"),
        ])
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let entry = between(
        &listed.body,
        "<ListMessageMoveTasksResultEntry>",
        "</ListMessageMoveTasksResultEntry>",
    );
    assert!(entry.contains("<Status>RUNNING</Status>"), "{entry}");
    assert!(
        entry.contains(&format!("<TaskHandle>{handle}</TaskHandle>")),
        "{entry}"
    );
    assert!(
        entry.contains("<ApproximateNumberOfMessagesToMove>20</ApproximateNumberOfMessagesToMove>"),
        "{entry}"
    );
    let cancelled = s
        .query(&[("Action", "CancelMessageMoveTask"), ("TaskHandle", &handle)])
        .await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    assert!(
        cancelled
            .body
            .contains("<ApproximateNumberOfMessagesMoved>"),
        "{}",
        cancelled.body
    );
    let refused = s
        .query(&[
            ("Action", "StartMessageMoveTask"),
            ("SourceArn", &arn("missing")),
        ])
        .await;
    assert_eq!(refused.status, 404, "{}", refused.body);
    assert!(
        refused
            .body
            .contains("<Code>ResourceNotFoundException</Code>"),
        "{}",
        refused.body
    );
    assert_eq!(ended(&s, "dlq").await["Status"], "CANCELLED");
}

fn between(text: &str, open: &str, close: &str) -> String {
    let start = text
        .find(open)
        .unwrap_or_else(|| panic!("no {open} in {text}"))
        + open.len();
    let end = start + text[start..].find(close).unwrap();
    text[start..end].to_owned()
}

#[tokio::test]
async fn a_task_running_when_the_endpoint_stops_is_resumed_when_it_serves_again() {
    let s = Served::start().await;
    pipe(&s, "source", "dlq").await;
    s.create("elsewhere", json!({})).await;
    fill(&s, "dlq", 30).await;
    s.ok(
        "StartMessageMoveTask",
        json!({"SourceArn": arn("dlq"), "DestinationArn": arn("elsewhere"), "MaxNumberOfMessagesPerSecond": 10}),
    )
    .await;
    wait_until(|| ready(&s, "elsewhere") >= 10).await;
    let dir = s.stop().await;
    // The runner lets the broker go at its next batch; the directory is locked until then.
    let deadline = Instant::now() + Duration::from_secs(10);
    let broker = loop {
        match ferry_broker::Broker::open(dir.path().join("data"), crate::support::served_config())
            .await
        {
            Ok(broker) => break broker,
            Err(e) => {
                assert!(Instant::now() < deadline, "reopen: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let s = Served::on(broker, dir).await;
    assert!(ready(&s, "elsewhere") < 30, "stopped before it was done");
    let task = ended(&s, "dlq").await;
    assert_eq!(task["Status"], "COMPLETED", "{task}");
    assert_eq!(task["ApproximateNumberOfMessagesMoved"], 30);
    assert_eq!((ready(&s, "elsewhere"), ready(&s, "dlq")), (30, 0));
}
