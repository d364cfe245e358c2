//! A topic publish split in two: placing its appends, and waiting for them to be durable.
//!
//! [`Broker::begin_publish_to_partition`](super::Broker::begin_publish_to_partition) and
//! [`Broker::begin_publish_to_topic`](super::Broker::begin_publish_to_topic) validate and
//! hand each partition's append to its log's writer before they return, so appends begun
//! by successive calls land in each partition in call order, whenever (and whether) they
//! are awaited; a front end that answers a connection's requests in order (Kafka's) starts
//! the next request's append while the one before waits for its fsync, and the two share a
//! group commit instead of paying one each.
//!
//! **Crash window.** An append is stored or not as it would be without the split: nothing
//! is answered before [`PendingPublish::durable`] returns, which it does only once every
//! append of the publish is durable under the topic's durability. Appends begun and not yet
//! durable when the process dies are lost or kept exactly as an unanswered publish's are
//! (storage recovery keeps the whole batches on disk and cuts a torn tail).
//!
//! **Subscriptions.** Nothing changes for them: each append offers its batch to the topic's
//! subscriptions from its completion, which storage runs in offset order however many
//! appends of a partition are in flight (as for concurrent publishes); the call's last
//! completion flushes the references its links staged (`subscriptions/publish_call.rs`),
//! and the publish is durable once they are too (`Countdown` in `engine/topic.rs`).

use ferry_storage::{Appended, StorageError};
use tokio::sync::oneshot;

use super::Broker;
use crate::error::Result;
use crate::topic::TopicPosition;

/// One partition's append in flight: the indexes of its records in the publish.
struct PlacedAppend {
    partition: u32,
    indexes: Vec<usize>,
    done: oneshot::Receiver<ferry_storage::Result<Appended>>,
}

/// A publish whose appends are placed but not yet known durable; [`PendingPublish::durable`]
/// gives each message's position once they are. Dropping it does not take the appends
/// back: they are stored all the same, unanswered.
#[must_use = "the publish is answered only once `durable` returns"]
pub struct PendingPublish {
    broker: Broker,
    appends: Vec<PlacedAppend>,
    messages: usize,
}

impl PendingPublish {
    /// A publish of nothing: durable at once, with no positions.
    pub(super) fn empty(broker: &Broker) -> PendingPublish {
        PendingPublish {
            broker: broker.clone(),
            appends: Vec::new(),
            messages: 0,
        }
    }

    pub(super) fn new(broker: &Broker, messages: usize) -> PendingPublish {
        PendingPublish {
            broker: broker.clone(),
            appends: Vec::new(),
            messages,
        }
    }

    /// Adds partition `partition`'s append, holding the publish's records `indexes`.
    pub(super) fn placed(
        &mut self,
        partition: u32,
        indexes: Vec<usize>,
        done: oneshot::Receiver<ferry_storage::Result<Appended>>,
    ) {
        self.appends.push(PlacedAppend {
            partition,
            indexes,
            done,
        });
    }

    /// Each message's position, in the order given, once every append is durable. A failed
    /// append is its error; other partitions' appends of the publish may have been stored
    /// (a publish is atomic per partition, not across partitions).
    pub async fn durable(self) -> Result<Vec<TopicPosition>> {
        let mut positions = vec![
            TopicPosition {
                partition: 0,
                offset: 0
            };
            self.messages
        ];
        for append in self.appends {
            let appended = append
                .done
                .await
                .map_err(|_| StorageError::Closed)?
                .map_err(|e| self.broker.inner.disk.refusal(e.into()))?;
            for (j, i) in append.indexes.into_iter().enumerate() {
                positions[i] = TopicPosition {
                    partition: append.partition,
                    offset: appended.base_offset + j as u64,
                };
            }
        }
        Ok(positions)
    }
}
