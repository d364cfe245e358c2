//! FIFO receives: several messages of a group per receive, the group held until all of them
//! are deleted or visible again, order kept when one of them becomes visible first, and
//! ReceiveRequestAttemptId retries answering the same messages and receipt handles.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::Served;

async fn fifo(s: &Served, name: &str) -> String {
    s.create(
        name,
        json!({"FifoQueue": "true", "ContentBasedDeduplication": "true"}),
    )
    .await
}

async fn send(s: &Served, url: &str, group: &str, body: &str) {
    s.ok(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": body, "MessageGroupId": group}),
    )
    .await;
}

async fn receive(s: &Served, input: Value) -> Vec<Value> {
    let got = s.ok("ReceiveMessage", input).await;
    got.get("Messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn bodies(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m["Body"].as_str().unwrap())
        .collect()
}

fn handles(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m["ReceiptHandle"].as_str().unwrap())
        .collect()
}

async fn set_visibility(s: &Served, url: &str, message: &Value, seconds: u32) {
    s.ok(
        "ChangeMessageVisibility",
        json!({"QueueUrl": url, "ReceiptHandle": message["ReceiptHandle"], "VisibilityTimeout": seconds}),
    )
    .await;
}

async fn delete(s: &Served, url: &str, message: &Value) {
    s.ok(
        "DeleteMessage",
        json!({"QueueUrl": url, "ReceiptHandle": message["ReceiptHandle"]}),
    )
    .await;
}

#[tokio::test]
async fn a_receive_takes_several_of_a_group_in_order_and_the_group_waits_for_all_of_them() {
    let s = Served::start().await;
    let url = fifo(&s, "jobs.fifo").await;
    for (group, body) in [("g1", "a1"), ("g1", "a2"), ("g2", "b1"), ("g1", "a3")] {
        send(&s, &url, group, body).await;
    }
    let first = receive(&s, json!({"QueueUrl": url, "MaxNumberOfMessages": 2})).await;
    assert_eq!(bodies(&first), ["a1", "a2"]);
    let other = receive(&s, json!({"QueueUrl": url, "MaxNumberOfMessages": 10})).await;
    assert_eq!(bodies(&other), ["b1"], "g1 is held while a1 and a2 are out");
    delete(&s, &url, &first[0]).await;
    let held = receive(&s, json!({"QueueUrl": url, "MaxNumberOfMessages": 10})).await;
    assert_eq!(bodies(&held), Vec::<&str>::new(), "a2 still holds g1");
    delete(&s, &url, &first[1]).await;
    let last = receive(&s, json!({"QueueUrl": url, "MaxNumberOfMessages": 10})).await;
    assert_eq!(bodies(&last), ["a3"]);
}

#[tokio::test]
async fn a_message_made_visible_again_waits_for_the_rest_of_its_group_and_then_goes_first() {
    let s = Served::start().await;
    let url = fifo(&s, "jobs.fifo").await;
    for body in ["a1", "a2", "a3"] {
        send(&s, &url, "g", body).await;
    }
    let all = json!({"QueueUrl": url, "MaxNumberOfMessages": 10, "AttributeNames": ["All"]});
    let first = receive(&s, all.clone()).await;
    assert_eq!(bodies(&first), ["a1", "a2", "a3"]);
    set_visibility(&s, &url, &first[0], 0).await;
    assert_eq!(bodies(&receive(&s, all.clone()).await), Vec::<&str>::new());
    set_visibility(&s, &url, &first[1], 0).await;
    assert_eq!(bodies(&receive(&s, all.clone()).await), Vec::<&str>::new());
    delete(&s, &url, &first[2]).await;
    let again = receive(&s, all).await;
    assert_eq!(bodies(&again), ["a1", "a2"], "in send order");
    for m in &again {
        assert_eq!(m["Attributes"]["ApproximateReceiveCount"], "2");
    }
}

#[tokio::test]
async fn an_expired_visibility_timeout_of_an_earlier_message_keeps_the_group_in_order() {
    let s = Served::start().await;
    let url = fifo(&s, "jobs.fifo").await;
    for body in ["a1", "a2"] {
        send(&s, &url, "g", body).await;
    }
    let first = receive(
        &s,
        json!({"QueueUrl": url, "MaxNumberOfMessages": 10, "VisibilityTimeout": 1}),
    )
    .await;
    assert_eq!(bodies(&first), ["a1", "a2"]);
    set_visibility(&s, &url, &first[1], 30).await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let held = receive(&s, json!({"QueueUrl": url, "MaxNumberOfMessages": 10})).await;
    assert_eq!(
        bodies(&held),
        Vec::<&str>::new(),
        "a2 still holds the group"
    );
    set_visibility(&s, &url, &first[1], 0).await;
    let again = receive(&s, json!({"QueueUrl": url, "MaxNumberOfMessages": 10})).await;
    assert_eq!(bodies(&again), ["a1", "a2"]);
}

#[tokio::test]
async fn a_retried_attempt_id_answers_the_same_messages_and_handles() {
    let s = Served::start().await;
    let url = fifo(&s, "jobs.fifo").await;
    for (group, body) in [("g1", "a1"), ("g1", "a2"), ("g2", "b1")] {
        send(&s, &url, group, body).await;
    }
    let attempt = |id: &str| {
        json!({"QueueUrl": url, "MaxNumberOfMessages": 2, "ReceiveRequestAttemptId": id,
               "AttributeNames": ["All"]})
    };
    let first = receive(&s, attempt("try-1")).await;
    assert_eq!(bodies(&first), ["a1", "a2"]);
    // Later, so that a first-receive timestamp taken anew would differ.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let retry = receive(&s, attempt("try-1")).await;
    assert_eq!(retry, first, "same messages, same receipt handles");
    // Another attempt id is another receive.
    let other = receive(&s, attempt("try-2")).await;
    assert_eq!(bodies(&other), ["b1"]);
    // Once one of them is deleted, the attempt id stands for a new receive.
    delete(&s, &url, &first[0]).await;
    let fresh = receive(&s, attempt("try-1")).await;
    assert_eq!(bodies(&fresh), Vec::<&str>::new(), "a2 holds g1, b1 is out");
    // A new receive under an attempt id is what a later retry of it answers.
    delete(&s, &url, &first[1]).await;
    send(&s, &url, "g1", "a3").await;
    let next = receive(&s, attempt("try-1")).await;
    assert_eq!(bodies(&next), ["a3"]);
    assert_eq!(receive(&s, attempt("try-1")).await, next);
}

#[tokio::test]
async fn a_retry_after_a_visibility_change_is_a_new_receive() {
    let s = Served::start().await;
    let url = fifo(&s, "jobs.fifo").await;
    send(&s, &url, "g", "a1").await;
    let input = json!({"QueueUrl": url, "ReceiveRequestAttemptId": "x", "AttributeNames": ["All"]});
    let first = receive(&s, input.clone()).await;
    set_visibility(&s, &url, &first[0], 100).await;
    assert_eq!(
        bodies(&receive(&s, input.clone()).await),
        Vec::<&str>::new()
    );
    set_visibility(&s, &url, &first[0], 0).await;
    let fresh = receive(&s, input).await;
    assert_eq!(bodies(&fresh), ["a1"]);
    assert_ne!(handles(&fresh), handles(&first));
    assert_eq!(fresh[0]["Attributes"]["ApproximateReceiveCount"], "2");
}

#[tokio::test]
async fn a_retry_restarts_the_visibility_timeout_and_one_after_it_ran_out_is_a_new_receive() {
    let s = Served::start().await;
    let url = fifo(&s, "jobs.fifo").await;
    send(&s, &url, "g", "a1").await;
    let input = json!({"QueueUrl": url, "VisibilityTimeout": 2, "ReceiveRequestAttemptId": "x"});
    let first = receive(&s, input.clone()).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(receive(&s, input.clone()).await, first);
    // 2.4 s after the first receive: without the restart a1 would be visible again.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let plain = json!({"QueueUrl": url});
    assert_eq!(bodies(&receive(&s, plain).await), Vec::<&str>::new());
    // Past the restarted timeout the retry is a new receive of the same message.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let fresh = receive(&s, input).await;
    assert_eq!(bodies(&fresh), ["a1"]);
    assert_ne!(handles(&fresh), handles(&first));
}

#[tokio::test]
async fn attempt_ids_are_checked_on_fifo_queues_and_ignored_on_standard_ones_as_in_sqs() {
    let s = Served::start().await;
    let url = fifo(&s, "jobs.fifo").await;
    for bad in ["", "has space", "é", &"x".repeat(129)] {
        s.fails(
            "ReceiveMessage",
            json!({"QueueUrl": url, "ReceiveRequestAttemptId": bad}),
            400,
            "InvalidParameterValue",
        )
        .await;
    }
    let longest = "x".repeat(128);
    s.ok(
        "ReceiveMessage",
        json!({"QueueUrl": url, "ReceiveRequestAttemptId": longest}),
    )
    .await;
    s.ok(
        "ReceiveMessage",
        json!({"QueueUrl": url, "ReceiveRequestAttemptId": "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~aZ09"}),
    )
    .await;

    // A standard queue: the attempt id plays no part, as SQS documents.
    let plain = s.create("plain", json!({})).await;
    for body in ["m1", "m2"] {
        s.ok(
            "SendMessage",
            json!({"QueueUrl": plain, "MessageBody": body}),
        )
        .await;
    }
    let input = json!({"QueueUrl": plain, "ReceiveRequestAttemptId": "has space"});
    let first = receive(&s, input.clone()).await;
    let second = receive(&s, input).await;
    assert_eq!(bodies(&first), ["m1"]);
    assert_eq!(bodies(&second), ["m2"]);
}
