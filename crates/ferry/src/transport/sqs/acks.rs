//! Acks that arrive together for one queue go in one DeleteMessageBatch (ten at most, SQS's
//! limit), through the SDK's group commit: no timer, so a lone ack is sent at once, and
//! each ack still gets its own answer — a stale receipt handle is refused on its own.

use std::sync::Arc;

use super::aws::{self, NOT_HELD};
use super::capabilities::NAME;
use crate::error::{Error, Result};
use crate::transport::group_commit::{GroupCommit, SubmitBatch, all_failed};

/// One ack: the receipt handle to delete, and the message id for the error.
pub(super) struct Ack {
    pub receipt: String,
    pub id: String,
}

pub(super) struct DeleteBatch {
    sqs: aws_sdk_sqs::Client,
    url: String,
}

pub(super) type Acks = Arc<GroupCommit<DeleteBatch>>;

pub(super) fn acks(sqs: aws_sdk_sqs::Client, url: String) -> Acks {
    GroupCommit::new(DeleteBatch { sqs, url })
}

impl SubmitBatch for DeleteBatch {
    type Item = Ack;
    const TRANSPORT: &'static str = NAME;
    const MAX_BATCH: usize = 10;

    async fn submit(&self, batch: Vec<Ack>) -> Vec<Result<()>> {
        use aws_sdk_sqs::types::DeleteMessageBatchRequestEntry as Entry;
        let entries = batch
            .iter()
            .enumerate()
            .map(|(i, ack)| {
                Entry::builder()
                    .id(i.to_string())
                    .receipt_handle(&ack.receipt)
                    .build()
                    .expect("id and receipt handle are set")
            })
            .collect();
        let out = match self
            .sqs
            .delete_message_batch()
            .queue_url(&self.url)
            .set_entries(Some(entries))
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) => return all_failed(batch.len(), aws::failure(e).into_error()),
        };
        let mut answers: Vec<Option<Result<()>>> = (0..batch.len()).map(|_| None).collect();
        for ok in out.successful() {
            if let Some(slot) = ok.id.parse::<usize>().ok().and_then(|i| answers.get_mut(i)) {
                *slot = Some(Ok(()));
            }
        }
        for failed in out.failed() {
            let Some(i) = failed.id.parse::<usize>().ok().filter(|i| *i < batch.len()) else {
                continue;
            };
            let code = failed
                .code
                .strip_prefix("AWS.SimpleQueueService.")
                .unwrap_or(&failed.code);
            let why = format!("{code}: {}", failed.message().unwrap_or_default());
            answers[i] = Some(Err(if NOT_HELD.contains(&code) {
                Error::NotHeld {
                    id: batch[i].id.clone(),
                    why,
                }
            } else {
                Error::Transport {
                    transport: NAME,
                    message: why,
                    source: None,
                }
            }));
        }
        answers
            .into_iter()
            .map(|a| {
                a.unwrap_or_else(|| {
                    Err(Error::Transport {
                        transport: NAME,
                        message: "DeleteMessageBatch answered nothing for this ack".into(),
                        source: None,
                    })
                })
            })
            .collect()
    }
}
