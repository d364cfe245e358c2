//! One publish call's appends to a topic, as the links that feed on them see it: every
//! partition append's completion offers its records to the topic's links, which *stage*
//! their references (see `Link::offer`); the call's last completion flushes what each of
//! those links staged in one append to its queue's log. A publish over sixteen partitions
//! so costs a subscription one reference append, not sixteen — and whatever other calls
//! staged on the link meanwhile goes in the same append.
//!
//! Nothing staged may be left behind: a link flushes everything it staged, whoever staged
//! it, and a call's count goes down when an append's completion is done *or dropped*
//! unrun ([`CallShare`]'s `Drop`), so a lost completion cannot hold a link's references
//! (and the publishes waiting on them) forever.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::Link;

pub(crate) struct PublishCall {
    /// Appends of the call whose completion has not finished offering.
    left: AtomicUsize,
    /// The links that staged references for the call, each once.
    staged_on: Mutex<Vec<Arc<Link>>>,
}

impl PublishCall {
    /// A call of `appends` partition appends, one [`CallShare`] each.
    pub fn shares(appends: usize) -> Vec<CallShare> {
        let call = Arc::new(PublishCall {
            left: AtomicUsize::new(appends),
            staged_on: Mutex::new(Vec::new()),
        });
        (0..appends).map(|_| CallShare(Arc::clone(&call))).collect()
    }

    /// A call of one append (one partition, an idempotent producer's): it flushes at once.
    pub fn single() -> CallShare {
        Self::shares(1).pop().expect("one share")
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Link>>> {
        self.staged_on.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn append_done(&self) {
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            let links = std::mem::take(&mut *self.lock());
            for link in links {
                link.flush();
            }
        }
    }
}

/// One append's part of a [`PublishCall`]: moved into the append's completion, and done
/// with when that completion drops it.
pub(crate) struct CallShare(Arc<PublishCall>);

impl CallShare {
    /// `link` staged references for this call: flush it when the call's appends are done.
    pub fn staged_on(&self, link: &Arc<Link>) {
        let mut links = self.0.lock();
        if !links.iter().any(|l| Arc::ptr_eq(l, link)) {
            links.push(Arc::clone(link));
        }
    }
}

impl Drop for CallShare {
    fn drop(&mut self) {
        self.0.append_done();
    }
}
