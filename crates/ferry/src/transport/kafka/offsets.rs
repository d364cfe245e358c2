//! Which offsets of one partition are still open — read and not settled — and so how far
//! the consumer group may commit: up to the lowest open one, never past it.

use std::collections::BTreeSet;

#[derive(Debug, Default)]
pub(super) struct Partition {
    /// Read and not settled: handed out, waiting to be handed out, or held for a retry.
    open: BTreeSet<i64>,
    /// One past the highest offset read.
    next: Option<i64>,
    /// How many of the open offsets are with the application.
    pub handed_out: usize,
}

impl Partition {
    /// Takes `offset` as read; false when it was read already (librdkafka fetches a
    /// partition again from an earlier position after some pauses and resumes).
    pub fn read(&mut self, offset: i64) -> bool {
        if self.next.is_some_and(|n| offset < n) {
            return false;
        }
        self.open.insert(offset);
        self.next = Some(offset + 1);
        true
    }

    /// Closes `offset`; false when it was not open.
    pub fn settle(&mut self, offset: i64) -> bool {
        self.open.remove(&offset)
    }

    /// The offset to commit: the lowest open one, else one past the highest read.
    pub fn watermark(&self) -> Option<i64> {
        self.open.first().copied().or(self.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watermark_never_passes_an_open_offset() {
        let mut p = Partition::default();
        assert_eq!(p.watermark(), None);
        for offset in 10..14 {
            assert!(p.read(offset));
        }
        assert!(!p.read(12), "read again");
        assert_eq!(p.watermark(), Some(10));
        assert!(p.settle(11));
        assert!(p.settle(12));
        assert_eq!(p.watermark(), Some(10), "10 is still open");
        assert!(p.settle(10));
        assert_eq!(p.watermark(), Some(13));
        assert!(p.settle(13));
        assert_eq!(p.watermark(), Some(14));
        assert!(!p.settle(13), "settled twice");
    }
}
