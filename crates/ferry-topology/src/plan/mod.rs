//! What it takes to make a server hold the design of a file: the difference between the
//! desired topology (the file) and the current one (read from the server), as an ordered
//! list of changes, each marked when it would lose data.
//!
//! The diff is pure: reading the server and carrying the changes out are the caller's
//! (`ferry topology apply`). Its rules:
//!
//! - A setting the file leaves out is not managed: the server's default on create, and
//!   whatever the server holds afterwards is no difference. A subscription's `filter` is
//!   the exception: absent means every message, so removing it removes the filter.
//! - Fields the server cannot hold (alerts, consumers, message types, limits other than
//!   `max_length`, `park_failed_keys`, a queue's `partitions`, a subscription's
//!   `dedup_window`) are never compared.
//! - The Ferry server changes most settings of an existing queue or topic in place
//!   ([`changes_in_place`]): a queue's retry policy, TTL, length limit and dead-letter
//!   target and retention; a topic's retention and (growing) partitions. A shorter
//!   retention of what is already stored (a topic's, dead letters') loses data. The
//!   rest — a queue's ordering, dedup window and priority levels, and any setting of a
//!   subscription — changes only by deleting and creating the channel again, which loses
//!   data. Fewer partitions cannot be made at all and is an error.
//! - Channels on the server and not in the file are deleted only when pruning; otherwise
//!   they are listed as unmanaged. A dead-letter queue that a kept channel sends to is
//!   never pruned from under it.
//! - Order: topics first, then queues and subscriptions with each dead-letter queue before
//!   the channels that send to it; deletes last, senders before their dead-letter queues
//!   and subscriptions before their topics.

mod change;
mod channel;
mod diff;
mod setting;
#[cfg(test)]
mod tests;

use std::fmt;

use serde::Serialize;

pub use change::{Action, Change, Loss};
pub use channel::{Channel, Channels, Foreign, Kind, Settings, ordering_name, served_by_ferry};
pub use diff::{changes_in_place, plan};
pub use setting::{Setting, Value};

use crate::format::Duration;

/// How to plan.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Delete channels the server has and the file does not.
    pub prune: bool,
    /// Leave out channels of brokers the Ferry server does not serve, listing them in
    /// [`Plan::skipped`], instead of refusing the file.
    pub skip_foreign: bool,
}

/// The changes that make the current topology the desired one, in the order to make them.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub changes: Vec<Change>,
    /// Channels the server has and the file does not, left as they are (without pruning).
    pub unmanaged: Vec<Unmanaged>,
    /// Channels of the file left out because the Ferry server does not serve their broker.
    pub skipped: Vec<Foreign>,
    /// The file's channels, with the settings each create or recreate needs.
    #[serde(skip)]
    pub desired: Channels,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The changes that would lose data.
    pub fn data_losing(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(|c| c.loses_data.is_some())
    }
}

/// A channel the server has and the file does not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unmanaged {
    pub kind: Kind,
    pub name: String,
}

/// One change per line, or `no changes`.
impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.changes.is_empty() {
            return writeln!(f, "no changes");
        }
        for change in &self.changes {
            writeln!(f, "{change}")?;
        }
        Ok(())
    }
}

/// A pair of topologies no plan can be made from; nothing is to be changed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "`{name}` is defined twice: queues and subscriptions share one namespace on the server, topics another; rename one"
    )]
    Duplicate { name: String },
    #[error(
        "{channel}: `delivery.ttl` ({ttl}) and `retention` ({retention}) are the same server setting (the message TTL) with two values; keep one"
    )]
    TwoTtls {
        channel: String,
        ttl: Duration,
        retention: Duration,
    },
    #[error(
        "topic {topic}: partitions cannot go from {current} down to {desired} (records are placed by key over the partitions); keep {current} or more, or create a new topic"
    )]
    FewerPartitions {
        topic: String,
        current: u64,
        desired: u64,
    },
    #[error("the Ferry server does not serve the broker of {}; apply them with their broker's own tools, or skip them explicitly", list(.channels))]
    Foreign { channels: Vec<Foreign> },
}

fn list(channels: &[Foreign]) -> String {
    channels
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
