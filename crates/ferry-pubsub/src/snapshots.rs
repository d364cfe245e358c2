//! Snapshots and Seek, over the broker's own (see `ferry_broker::SeekTarget`).
//!
//! A snapshot of a subscription keeps the messages it had not acknowledged then and every
//! message published to its topic since; seeking a subscription of the same topic to it
//! makes exactly those unacknowledged again. Seeking to a time makes every message
//! published from then on unacknowledged (as far back as the topic still keeps them: a
//! topic's retention, 7 days by default, plays the part of `retain_acked_messages`) and
//! every earlier one acknowledged. Snapshots expire as Pub/Sub's do: 7 days after creation
//! less the age of the oldest unacknowledged message they keep.
//!
//! A seek voids every lease the subscription had: an ack of a message delivered before it
//! takes no effect (under exactly-once delivery it fails), and the subscription's open
//! streams forget what they had outstanding, so their flow control does not wait for
//! deadlines of deliveries that no longer count.

use ferry_broker::{Name, SeekTarget, SnapshotInfo};
use googleapis_tonic_google_pubsub_v1::google::pubsub::v1 as pb;
use tonic::Status;

use crate::PubSub;
use crate::convert::timestamp;
use crate::names::{self, Collection, to_broker, to_resource};
use crate::pages;
use crate::status::{from_broker, unsupported};

impl PubSub {
    pub(crate) async fn make_snapshot(
        &self,
        request: pb::CreateSnapshotRequest,
    ) -> Result<pb::Snapshot, Status> {
        if !request.labels.is_empty() {
            return Err(unsupported("Keeping labels"));
        }
        let name = to_broker(&request.name, Collection::Snapshots)?;
        let (subscription, _) = self.subscription(&request.subscription)?;
        let info = self
            .broker()
            .create_snapshot(name.as_str(), subscription.as_str())
            .await
            .map_err(from_broker)?;
        Ok(snapshot(request.name, &info))
    }

    pub(crate) fn find_snapshot(&self, resource: String) -> Result<pb::Snapshot, Status> {
        let name = to_broker(&resource, Collection::Snapshots)?;
        let info = self
            .broker()
            .describe_snapshot(name.as_str())
            .map_err(from_broker)?;
        Ok(snapshot(resource, &info))
    }

    pub(crate) fn remove_snapshot(&self, resource: &str) -> Result<(), Status> {
        let name = to_broker(resource, Collection::Snapshots)?;
        self.broker()
            .delete_snapshot(name.as_str())
            .map_err(from_broker)
    }

    pub(crate) fn project_snapshots(
        &self,
        request: pb::ListSnapshotsRequest,
    ) -> Result<pb::ListSnapshotsResponse, Status> {
        let prefix = names::prefix(names::project(&request.project)?);
        let snapshots = self.broker().list_snapshots();
        let resources = snapshots
            .iter()
            .filter(|s| s.name.as_str().starts_with(&prefix))
            .filter_map(|s| to_resource(s.name.as_str(), Collection::Snapshots))
            .collect();
        let (page, next_page_token) =
            pages::page(resources, request.page_size, &request.page_token)?;
        let snapshots = page
            .into_iter()
            .filter_map(|resource| {
                let name = to_broker(&resource, Collection::Snapshots).ok()?;
                let info = snapshots.iter().find(|s| s.name == name)?;
                Some(snapshot(resource, info))
            })
            .collect();
        Ok(pb::ListSnapshotsResponse {
            snapshots,
            next_page_token,
        })
    }

    /// The snapshots of `topic`, as resource names.
    pub(crate) fn topic_snapshots(&self, topic: &Name) -> Vec<String> {
        self.broker()
            .list_snapshots()
            .iter()
            .filter(|s| &s.topic == topic)
            .filter_map(|s| to_resource(s.name.as_str(), Collection::Snapshots))
            .collect()
    }

    pub(crate) async fn seek_subscription(&self, request: pb::SeekRequest) -> Result<(), Status> {
        let (subscription, _) = self.subscription(&request.subscription)?;
        let target = match request.target {
            Some(pb::seek_request::Target::Time(t)) => {
                let ms = t
                    .seconds
                    .checked_mul(1000)
                    .and_then(|ms| ms.checked_add(i64::from(t.nanos) / 1_000_000))
                    .ok_or_else(|| Status::invalid_argument("the seek time is out of range"))?;
                SeekTarget::Time(ms)
            }
            Some(pb::seek_request::Target::Snapshot(resource)) => {
                SeekTarget::Snapshot(to_broker(&resource, Collection::Snapshots)?.to_string())
            }
            None => {
                return Err(Status::invalid_argument(
                    "a seek needs a target: a time or a snapshot",
                ));
            }
        };
        self.used(subscription.as_str());
        self.broker()
            .seek_subscription(subscription.as_str(), target)
            .await
            .map_err(from_broker)?;
        self.open_streams()
            .forget_outstanding(subscription.as_str());
        Ok(())
    }
}

fn snapshot(resource: String, info: &SnapshotInfo) -> pb::Snapshot {
    pb::Snapshot {
        name: resource,
        topic: to_resource(info.topic.as_str(), Collection::Topics).unwrap_or_default(),
        expire_time: Some(timestamp(info.expires_at_ms)),
        labels: Default::default(),
    }
}
