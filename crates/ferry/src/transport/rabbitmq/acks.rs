//! A subscription session's acks in batches (see [`crate::transport::group_commit`]), with one
//! `basic.ack multiple` where the delivery tags allow.
//!
//! `multiple` acks every unacked tag up to the one given on the channel, so it is sent only
//! up to the first tag that is still outstanding and not in the batch: a delivery the
//! application still holds, or one whose nack, requeue or ack is still on its way. Tags
//! leave the outstanding set only once their own settlement was sent (see
//! `super::settle`), tags enter it as they are taken from the channel's stream of
//! deliveries (in tag order, before any is handed out), and tags the channel delivers later
//! are always higher, so a `multiple` ack never covers a delivery that is not being acked —
//! neither one held nor one received and not yet handed out. Tags above that first gap are
//! acked one by one. Each session has its own channel, tags and batches.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use lapin::acker::Acker;
use lapin::options::BasicAckOptions;

use super::engine::NAME;
use super::settle::{Origin, on_channel};
use crate::error::Result;
use crate::transport::group_commit::{SubmitBatch, all_failed};

/// One session channel's delivery tags received and not yet settled, and whether the
/// session ended (nothing more will be received).
#[derive(Default)]
pub(super) struct Outstanding(Mutex<Tags>);

#[derive(Default)]
pub(super) struct Tags {
    pub held: BTreeSet<u64>,
    /// When a settlement was last sent.
    pub last_settled: Option<std::time::Instant>,
    ended: bool,
    /// The channel was found done (ended, nothing held) once: it is closed once.
    done: bool,
}

impl Tags {
    /// Whether the channel became done just now.
    fn done_now(&mut self) -> bool {
        if self.ended && self.held.is_empty() && !self.done {
            self.done = true;
            return true;
        }
        false
    }
}

impl Outstanding {
    pub fn received(&self, tag: u64) {
        self.lock().held.insert(tag);
    }

    /// The settlement of these tags was sent: a `multiple` ack may pass over them now.
    /// True when that leaves an ended session with nothing held, once.
    pub fn settled(&self, tags: impl IntoIterator<Item = u64>) -> bool {
        let mut outstanding = self.lock();
        for tag in tags {
            outstanding.held.remove(&tag);
        }
        outstanding.last_settled = Some(std::time::Instant::now());
        outstanding.done_now()
    }

    /// The session ended. True when nothing is held, once.
    pub fn end(&self) -> bool {
        let mut outstanding = self.lock();
        outstanding.ended = true;
        outstanding.done_now()
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Tags> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How to ack `batch` given the channel's outstanding tags: the tag to ack with `multiple`
/// (every outstanding tag up to it is in the batch), and the tags to ack one by one.
pub(super) fn plan(outstanding: &BTreeSet<u64>, batch: &[u64]) -> (Option<u64>, Vec<u64>) {
    let acking: BTreeSet<u64> = batch.iter().copied().collect();
    let first_gap = outstanding
        .iter()
        .find(|tag| !acking.contains(tag))
        .copied();
    let (covered, single): (Vec<u64>, Vec<u64>) = acking
        .iter()
        .partition(|&&tag| first_gap.is_none_or(|gap| tag < gap));
    match covered.last() {
        // One tag alone gains nothing from `multiple`.
        Some(&top) if covered.len() > 1 => (Some(top), single),
        _ => (None, acking.into_iter().collect()),
    }
}

/// One ack: the delivery's channel and tag.
pub(super) struct Ack {
    pub origin: Arc<Origin>,
    pub acker: Acker,
    pub tag: u64,
}

pub(super) struct AckBatches;

impl SubmitBatch for AckBatches {
    type Item = Ack;
    const TRANSPORT: &'static str = NAME;
    const MAX_BATCH: usize = 4096;

    async fn submit(&self, batch: Vec<Ack>) -> Vec<Result<()>> {
        let Some(origin) = batch.first().map(|ack| ack.origin.clone()) else {
            return Vec::new();
        };
        let tags: Vec<u64> = batch.iter().map(|ack| ack.tag).collect();
        let (multiple, single) = plan(&origin.outstanding.lock().held, &tags);
        let mut acked: BTreeSet<u64> = BTreeSet::new();
        let mut outcome_of = std::collections::HashMap::new();
        if let Some(top) = multiple {
            let options = BasicAckOptions { multiple: true };
            match on_channel(&origin, origin.channel.basic_ack(top, options)).await {
                Ok(()) => acked.extend(tags.iter().copied().filter(|&t| t <= top)),
                Err(e) => return all_failed(batch.len(), e),
            }
        }
        // The rest one by one, all sent before any answer is awaited.
        let origin = &origin;
        let singles = batch
            .iter()
            .filter(|a| single.contains(&a.tag))
            .map(|ack| async move {
                let result = on_channel(origin, ack.acker.ack(BasicAckOptions::default())).await;
                (ack.tag, result)
            });
        let singles = futures_util::future::join_all(singles).await;
        for (tag, result) in singles {
            if result.is_ok() {
                acked.insert(tag);
            }
            outcome_of.insert(tag, result);
        }
        origin.settled(acked.iter().copied());
        batch
            .iter()
            .map(|ack| outcome_of.remove(&ack.tag).unwrap_or(Ok(())))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(tags: &[u64]) -> BTreeSet<u64> {
        tags.iter().copied().collect()
    }

    #[test]
    fn a_run_of_acked_tags_from_the_lowest_outstanding_is_one_multiple_ack() {
        assert_eq!(plan(&set(&[3, 4, 5, 6]), &[6, 4, 3, 5]), (Some(6), vec![]));
    }

    #[test]
    fn a_multiple_ack_stops_below_a_tag_still_held() {
        // 4 is held by the application: acking 1..=3 together is safe, 5 and 6 go alone.
        assert_eq!(
            plan(&set(&[1, 2, 3, 4, 5, 6]), &[1, 2, 3, 5, 6]),
            (Some(3), vec![5, 6])
        );
    }

    #[test]
    fn with_the_lowest_tag_held_every_ack_goes_alone() {
        assert_eq!(plan(&set(&[1, 2, 3]), &[2, 3]), (None, vec![2, 3]));
    }

    #[test]
    fn one_ack_alone_is_a_plain_ack() {
        assert_eq!(plan(&set(&[7, 8]), &[7]), (None, vec![7]));
    }
}
