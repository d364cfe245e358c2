//! Answers made of whole messages are capped in bytes as well as in count: a dead-letter
//! peek (gRPC and HTTP), a topic read and a group poll over many large messages return
//! what fits the server's read cap — at least one message — and the caller can go on
//! from where the answer stopped until it has seen every message once.

use ferry_broker::{GroupJoin, OutgoingMessage, QueueSpec, TopicSpec};
use ferry_proto::v1;
use ferry_server::DEFAULT_MAX_READ_BYTES;
use serde_json::Value;

mod support;

use support::{GrpcClients, Served};

/// A quarter of the default cap: four fill it exactly.
const LARGE: usize = DEFAULT_MAX_READ_BYTES / 4;
const COUNT: usize = 10;

fn large_messages() -> Vec<OutgoingMessage> {
    (0..COUNT)
        .map(|i| OutgoingMessage::new(vec![b'a' + i as u8; LARGE]))
        .collect()
}

async fn serve_with_large_messages(
    configure: impl FnOnce(ferry_server::Server) -> ferry_server::Server,
) -> Served {
    let (broker, dir) = support::fresh_broker().await;
    broker
        .create_queue("big", QueueSpec::default())
        .await
        .unwrap();
    broker.publish_batch("big", large_messages()).await.unwrap();
    broker
        .create_topic("stream", TopicSpec::default())
        .await
        .unwrap();
    broker
        .publish_to_topic("stream", large_messages())
        .await
        .unwrap();
    Served::serve(broker, Some(dir), configure).await
}

#[tokio::test]
async fn a_grpc_peek_over_large_messages_returns_at_most_the_byte_cap_and_says_there_is_more() {
    let s = serve_with_large_messages(|s| s).await;
    // The client would take any size: the cap is the server's, not the client's limit.
    let mut dead_letters = s.dead_letters().max_decoding_message_size(usize::MAX);
    let mut seen = Vec::new();
    let mut after_seq = None;
    loop {
        let page = dead_letters
            .peek(v1::PeekRequest {
                dlq: "big".into(),
                filter: None,
                max: 1000,
                after_seq,
            })
            .await
            .unwrap()
            .into_inner();
        let bytes: usize = page.letters.iter().map(|l| l.payload.len()).sum();
        assert!(bytes <= DEFAULT_MAX_READ_BYTES, "{bytes} bytes in one peek");
        assert!(!page.letters.is_empty(), "every page progresses");
        seen.extend(page.letters.iter().map(|l| l.seq));
        after_seq = page.letters.last().map(|l| l.seq);
        if !page.more {
            break;
        }
        assert_eq!(page.letters.len(), 4, "a full page holds what fits");
    }
    assert_eq!(
        seen.len(),
        COUNT,
        "paging on sees every message once: {seen:?}"
    );
    seen.dedup();
    assert_eq!(seen.len(), COUNT);
    s.stop().await;
}

#[tokio::test]
async fn an_http_peek_is_capped_in_bytes_and_a_message_over_the_cap_still_comes_alone() {
    let s = serve_with_large_messages(|s| s.max_read_bytes(1000)).await;
    let reply = support::exchange(
        s.http,
        "",
        "GET",
        "/v1/queues/big/dead-letters?max=1000",
        b"",
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.head);
    let page: Value = serde_json::from_slice(&reply.body).unwrap();
    let letters = page["letters"].as_array().unwrap();
    assert_eq!(letters.len(), 1, "one message over the cap comes alone");
    assert_eq!(page["more"], true);
    let next = page["next_after_seq"].as_u64().unwrap();
    let reply = support::exchange(
        s.http,
        "",
        "GET",
        &format!("/v1/queues/big/dead-letters?max=1000&after_seq={next}"),
        b"",
    )
    .await;
    let page: Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(page["letters"].as_array().unwrap().len(), 1);
    assert!(page["next_after_seq"].as_u64().unwrap() > next);
    s.stop().await;
}

#[tokio::test]
async fn topic_reads_and_group_polls_are_capped_in_bytes_and_go_on_where_they_stopped() {
    let s = serve_with_large_messages(|s| s).await;
    let mut groups = s.groups().max_decoding_message_size(usize::MAX);
    let mut offsets = Vec::new();
    let mut from = 0;
    loop {
        let records = groups
            .read_topic(v1::ReadTopicRequest {
                topic: "stream".into(),
                partition: 0,
                from: Some(v1::Position {
                    at: Some(v1::position::At::Offset(from)),
                }),
                max_records: 1000,
            })
            .await
            .unwrap()
            .into_inner()
            .records;
        let Some(last) = records.last() else { break };
        assert!(records.len() <= 4, "{} records in one read", records.len());
        from = last.offset + 1;
        offsets.extend(records.iter().map(|r| r.offset));
    }
    assert_eq!(offsets, (0..COUNT as u64).collect::<Vec<_>>());

    let member = s
        .broker
        .join_group("stream", "g", GroupJoin::default())
        .await
        .unwrap()
        .member_id;
    let mut polled = Vec::new();
    loop {
        let records = groups
            .poll(v1::PollRequest {
                topic: "stream".into(),
                group: "g".into(),
                member_id: member.clone(),
                max_records: 1000,
            })
            .await
            .unwrap()
            .into_inner()
            .records;
        if records.is_empty() {
            break;
        }
        assert!(records.len() <= 4, "{} records in one poll", records.len());
        polled.extend(records.iter().map(|r| r.offset));
    }
    assert_eq!(
        polled,
        (0..COUNT as u64).collect::<Vec<_>>(),
        "what did not fit one poll comes in the next"
    );
    s.stop().await;
}
