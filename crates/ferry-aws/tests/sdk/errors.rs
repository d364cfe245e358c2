//! The SDK's typed errors, raised from Ferry's answers: the modeled exception's variant and
//! the query-compatible error code.

use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::operation::change_message_visibility::ChangeMessageVisibilityError;
use aws_sdk_sqs::operation::delete_message::DeleteMessageError;
use aws_sdk_sqs::operation::delete_message_batch::DeleteMessageBatchError;
use aws_sdk_sqs::operation::get_queue_url::GetQueueUrlError;
use aws_sdk_sqs::operation::receive_message::ReceiveMessageError;
use aws_sdk_sqs::operation::send_message::SendMessageError;
use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchError;
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, SendMessageBatchRequestEntry};

use crate::support::Served;

fn entry(id: &str) -> SendMessageBatchRequestEntry {
    SendMessageBatchRequestEntry::builder()
        .id(id)
        .message_body("x")
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_missing_queue_is_queue_does_not_exist() {
    let s = Served::start().await;
    let err = s
        .sqs
        .get_queue_url()
        .queue_name("nowhere")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(
        matches!(err, GetQueueUrlError::QueueDoesNotExist(_)),
        "{err:?}"
    );
    assert_eq!(err.code(), Some("AWS.SimpleQueueService.NonExistentQueue"));
    assert!(err.message().is_some_and(|m| !m.is_empty()));

    let url = format!("http://{}/000000000000/nowhere", s.addr);
    let err = s
        .sqs
        .send_message()
        .queue_url(&url)
        .message_body("x")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(
        matches!(err, SendMessageError::QueueDoesNotExist(_)),
        "{err:?}"
    );
    let err = s
        .sqs
        .receive_message()
        .queue_url(&url)
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(
        matches!(err, ReceiveMessageError::QueueDoesNotExist(_)),
        "{err:?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_bad_receipt_handle_is_receipt_handle_is_invalid() {
    let s = Served::start().await;
    let url = s.queue("sdk-handles", &[]).await;
    s.sqs
        .send_message()
        .queue_url(&url)
        .message_body("x")
        .send()
        .await
        .unwrap();
    let got = s
        .sqs
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(5)
        .send()
        .await
        .unwrap();
    let handle = got.messages()[0].receipt_handle().unwrap().to_owned();
    // One character changed, and a made-up handle.
    let mut altered = handle.clone().into_bytes();
    let last = altered.len() / 2;
    altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    for bad in [altered.as_str(), "not-a-receipt-handle"] {
        let err = s
            .sqs
            .delete_message()
            .queue_url(&url)
            .receipt_handle(bad)
            .send()
            .await
            .unwrap_err()
            .into_service_error();
        assert!(
            matches!(err, DeleteMessageError::ReceiptHandleIsInvalid(_)),
            "{err:?}"
        );
        assert_eq!(err.code(), Some("ReceiptHandleIsInvalid"));
        let err = s
            .sqs
            .change_message_visibility()
            .queue_url(&url)
            .receipt_handle(bad)
            .visibility_timeout(0)
            .send()
            .await
            .unwrap_err()
            .into_service_error();
        assert!(
            matches!(err, ChangeMessageVisibilityError::ReceiptHandleIsInvalid(_)),
            "{err:?}"
        );
    }
    // The real handle still works: the refusals changed nothing.
    s.sqs
        .delete_message()
        .queue_url(&url)
        .receipt_handle(&handle)
        .send()
        .await
        .unwrap();
    s.stop().await;
}

#[tokio::test]
async fn batches_with_duplicate_ids_or_the_wrong_size_are_refused_whole() {
    let s = Served::start().await;
    let url = s.queue("sdk-batch-errors", &[]).await;
    let err = s
        .sqs
        .send_message_batch()
        .queue_url(&url)
        .entries(entry("same"))
        .entries(entry("other"))
        .entries(entry("same"))
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(
        matches!(err, SendMessageBatchError::BatchEntryIdsNotDistinct(_)),
        "{err:?}"
    );
    assert_eq!(
        err.code(),
        Some("AWS.SimpleQueueService.BatchEntryIdsNotDistinct")
    );

    let err = s
        .sqs
        .send_message_batch()
        .queue_url(&url)
        .set_entries(Some((0..11).map(|i| entry(&format!("e{i}"))).collect()))
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(
        matches!(err, SendMessageBatchError::TooManyEntriesInBatchRequest(_)),
        "{err:?}"
    );
    let err = s
        .sqs
        .send_message_batch()
        .queue_url(&url)
        .set_entries(Some(Vec::new()))
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(
        matches!(err, SendMessageBatchError::EmptyBatchRequest(_)),
        "{err:?}"
    );
    let err = s
        .sqs
        .send_message_batch()
        .queue_url(&url)
        .entries(entry("not valid!"))
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(
        matches!(err, SendMessageBatchError::InvalidBatchEntryId(_)),
        "{err:?}"
    );

    let delete = |id: &str| {
        DeleteMessageBatchRequestEntry::builder()
            .id(id)
            .receipt_handle("whatever")
            .build()
            .unwrap()
    };
    let err = s
        .sqs
        .delete_message_batch()
        .queue_url(&url)
        .entries(delete("d"))
        .entries(delete("d"))
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(
        matches!(err, DeleteMessageBatchError::BatchEntryIdsNotDistinct(_)),
        "{err:?}"
    );

    // Nothing was sent by the refused batches.
    let got = s
        .sqs
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(0)
        .send()
        .await
        .unwrap();
    assert!(got.messages().is_empty(), "{:?}", got.messages());
    s.stop().await;
}

#[tokio::test]
async fn a_batch_delete_reports_each_bad_handle_in_failed() {
    let s = Served::start().await;
    let url = s.queue("sdk-batch-failed", &[]).await;
    s.sqs
        .send_message()
        .queue_url(&url)
        .message_body("x")
        .send()
        .await
        .unwrap();
    let got = s
        .sqs
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(5)
        .send()
        .await
        .unwrap();
    let handle = got.messages()[0].receipt_handle().unwrap();
    let deleted = s
        .sqs
        .delete_message_batch()
        .queue_url(&url)
        .entries(
            DeleteMessageBatchRequestEntry::builder()
                .id("good")
                .receipt_handle(handle)
                .build()
                .unwrap(),
        )
        .entries(
            DeleteMessageBatchRequestEntry::builder()
                .id("bad")
                .receipt_handle("forged")
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.successful().len(), 1);
    assert_eq!(deleted.successful()[0].id(), "good");
    assert_eq!(deleted.failed().len(), 1);
    let failed = &deleted.failed()[0];
    assert_eq!(failed.id(), "bad");
    assert_eq!(failed.code(), "ReceiptHandleIsInvalid");
    assert!(failed.sender_fault());
    s.stop().await;
}

#[tokio::test]
async fn sns_errors_are_typed_too() {
    use aws_sdk_sns::operation::publish::PublishError;
    use aws_sdk_sns::operation::subscribe::SubscribeError;
    let s = Served::start().await;
    let missing = "arn:aws:sns:us-east-1:000000000000:nowhere";
    let err = s
        .sns
        .publish()
        .topic_arn(missing)
        .message("x")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(matches!(err, PublishError::NotFoundException(_)), "{err:?}");
    assert_eq!(
        aws_sdk_sns::error::ProvideErrorMetadata::code(&err),
        Some("NotFound")
    );

    let topic = s
        .sns
        .create_topic()
        .name("sdk-errors")
        .send()
        .await
        .unwrap()
        .topic_arn
        .unwrap();
    let err = s
        .sns
        .subscribe()
        .topic_arn(&topic)
        .protocol("http")
        .endpoint("http://127.0.0.1:1/hook")
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(
        matches!(err, SubscribeError::InvalidParameterException(_)),
        "{err:?}"
    );
    s.stop().await;
}
