//! A subscription's acknowledgement state over its topic, as a seek sets it and a snapshot
//! keeps it: per partition, the offsets below a point that count as unacknowledged, and
//! everything from that point on. Anything else counts as acknowledged.
//!
//! A seek to a time is the simplest case — nothing below the first offset published at or
//! after the time, everything from it — and a snapshot captures a subscription's unsettled
//! references and its cursor. Which of those offsets a subscription actually takes is still
//! up to its filter; this records positions only.

use crate::queue::seq_ranges::SeqRanges;

/// Per partition, what counts as unacknowledged (see the module docs).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Backlog {
    partitions: Vec<PartitionBacklog>,
}

#[derive(Debug, Clone, PartialEq, Default)]
struct PartitionBacklog {
    /// Offsets below `from` that count as unacknowledged, as `(from, to)` runs with `to`
    /// exclusive, lowest first.
    below: Vec<(u64, u64)>,
    /// The first offset from which every record counts as unacknowledged.
    from: u64,
}

impl Backlog {
    /// Everything from `from[p]` on in partition `p`, nothing below.
    pub fn from_offsets(from: &[u64]) -> Backlog {
        Backlog {
            partitions: from
                .iter()
                .map(|&from| PartitionBacklog {
                    below: Vec::new(),
                    from,
                })
                .collect(),
        }
    }

    /// The offsets in `unsettled[p]` below `from[p]`, and everything from `from[p]` on.
    pub fn capture(unsettled: &[SeqRanges], from: &[u64]) -> Backlog {
        let partitions = from
            .iter()
            .enumerate()
            .map(|(p, &from)| PartitionBacklog {
                below: unsettled
                    .get(p)
                    .map(|ranges| {
                        ranges
                            .runs()
                            .filter(|&(start, _)| start < from)
                            .map(|(start, end)| (start, end.min(from)))
                            .collect()
                    })
                    .unwrap_or_default(),
                from,
            })
            .collect();
        Backlog { partitions }
    }

    /// Where everything in `partition` counts as unacknowledged from: 0 for a partition it
    /// does not describe (added to the topic later), unacknowledged from its first record.
    pub fn from(&self, partition: u32) -> u64 {
        self.partitions
            .get(partition as usize)
            .map_or(0, |p| p.from)
    }

    /// The runs below [`from`](Self::from) that count as unacknowledged in `partition`.
    pub fn below(&self, partition: u32) -> &[(u64, u64)] {
        self.partitions
            .get(partition as usize)
            .map_or(&[], |p| &p.below)
    }

    /// The lowest offset of `partition` this backlog needs the topic to keep.
    pub fn hold(&self, partition: u32) -> u64 {
        let from = self.from(partition);
        self.below(partition)
            .first()
            .map_or(from, |&(start, _)| start.min(from))
    }

    /// The stored form: per partition `from`, the number of runs, then each run's bounds,
    /// all little-endian u64 after a leading partition count.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut put = |v: u64| out.extend_from_slice(&v.to_le_bytes());
        put(self.partitions.len() as u64);
        for p in &self.partitions {
            put(p.from);
            put(p.below.len() as u64);
            for &(start, end) in &p.below {
                put(start);
                put(end);
            }
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Backlog, String> {
        let mut words = bytes
            .chunks(8)
            .map(|c| <[u8; 8]>::try_from(c).map(u64::from_le_bytes));
        let mut next = || -> Result<u64, String> {
            words
                .next()
                .ok_or("ends early")?
                .map_err(|_| "is not a whole number of words".to_owned())
        };
        let count = next()?;
        let mut partitions = Vec::new();
        for _ in 0..count {
            let from = next()?;
            let runs = next()?;
            let mut below = Vec::new();
            for _ in 0..runs {
                let (start, end) = (next()?, next()?);
                if start >= end || end > from || below.last().is_some_and(|&(_, e)| e > start) {
                    return Err(format!("holds a bad run {start}..{end}"));
                }
                below.push((start, end));
            }
            partitions.push(PartitionBacklog { below, from });
        }
        if next().is_ok() {
            return Err("has bytes after its end".into());
        }
        Ok(Backlog { partitions })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_captured_backlog_keeps_only_what_is_below_the_cursor_and_round_trips() {
        let mut p0 = SeqRanges::new();
        p0.insert(3, 5);
        p0.insert(8, 12);
        p0.insert(20, 21);
        let backlog = Backlog::capture(&[p0, SeqRanges::new()], &[10, 7]);
        assert_eq!(backlog.below(0), &[(3, 5), (8, 10)]);
        assert_eq!((backlog.from(0), backlog.hold(0)), (10, 3));
        assert_eq!((backlog.below(1), backlog.hold(1)), (&[][..], 7));
        // A partition the backlog does not know is unacknowledged from its start.
        assert_eq!((backlog.from(2), backlog.hold(2)), (0, 0));
        assert_eq!(Backlog::decode(&backlog.encode()).unwrap(), backlog);
        let bytes = backlog.encode();
        assert!(Backlog::decode(&bytes[..bytes.len() - 8]).is_err());
        assert!(Backlog::decode(&bytes[..bytes.len() - 3]).is_err());
        assert!(Backlog::decode(&[bytes.clone(), vec![0; 8]].concat()).is_err());
    }
}
