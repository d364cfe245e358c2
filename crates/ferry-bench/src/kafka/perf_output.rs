//! The summary lines `rdkafka_performance` (librdkafka's `examples/rdkafka_performance.c`)
//! prints, read back into figures. It prints one every display interval and a last one when
//! it ends; the last is the run's. The layouts, from its `print_stats`:
//!
//! ```text
//! % 100000 messages produced (12800000 bytes), 100000 delivered (offset 99999, 0 failed) in 1234ms: 81037 msgs/s and 10.37 MB/s, 0 produce failures, 0 in queue, no compression
//! % 100000 messages (12800000 bytes) consumed in 456ms: 219298 msgs/s (28.07 MB/s)
//! ```
//!
//! Its MB/s are bytes per microsecond (10^6 bytes per second) of payload, and its rates are
//! of messages delivered (producer) or received (consumer).

use serde::Serialize;

/// A producer's last summary.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Produced {
    pub messages: u64,
    pub bytes: u64,
    pub delivered: u64,
    pub failed: u64,
    pub millis: u64,
    pub msgs_per_sec: f64,
    pub mb_per_sec: f64,
    pub produce_failures: u64,
}

/// A consumer's last summary.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Consumed {
    pub messages: u64,
    pub bytes: u64,
    pub millis: u64,
    pub msgs_per_sec: f64,
    pub mb_per_sec: f64,
}

/// The output had no summary line of the expected shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no {what} summary line in rdkafka_performance's output")]
pub struct NoSummary {
    what: &'static str,
}

/// The numbers of a line, in order: each word stripped of the punctuation around it
/// (`(12800000`, `1234ms:`, `99999,`), words without a number left out.
fn numbers(line: &str) -> Vec<f64> {
    line.split_whitespace()
        .filter_map(|word| {
            let word = word.trim_start_matches(['(', '%']);
            let end = word
                .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
                .unwrap_or(word.len());
            let number = &word[..end];
            // A word such as `1.00/2.00/0.50/3.00ms` is not one number.
            if number.is_empty() || word[end..].starts_with('/') {
                return None;
            }
            number.parse().ok()
        })
        .collect()
}

fn last_line<'a>(output: &'a str, shape: &str) -> Option<&'a str> {
    output
        .lines()
        .rev()
        .map(str::trim)
        // `% INTERVAL: …` lines (with -M) are of one interval, not of the run.
        .find(|l| l.starts_with("% ") && !l.starts_with("% INTERVAL") && l.contains(shape))
}

/// The producer's last summary in `output`.
pub fn produced(output: &str) -> Result<Produced, NoSummary> {
    let missing = NoSummary { what: "producer" };
    let line = last_line(output, " messages produced (").ok_or(missing.clone())?;
    // messages, bytes, delivered, offset, failed, ms, msgs/s, MB/s, produce failures, queue
    let n = numbers(line);
    if n.len() < 9 {
        return Err(missing);
    }
    Ok(Produced {
        messages: n[0] as u64,
        bytes: n[1] as u64,
        delivered: n[2] as u64,
        failed: n[4] as u64,
        millis: n[5] as u64,
        msgs_per_sec: n[6],
        mb_per_sec: n[7],
        produce_failures: n[8] as u64,
    })
}

/// The consumer's last summary in `output`.
pub fn consumed(output: &str) -> Result<Consumed, NoSummary> {
    let missing = NoSummary { what: "consumer" };
    let line = last_line(output, " consumed in ").ok_or(missing.clone())?;
    // messages, bytes, ms, msgs/s, MB/s (then, with -l, latencies)
    let n = numbers(line);
    if n.len() < 5 {
        return Err(missing);
    }
    Ok(Consumed {
        messages: n[0] as u64,
        bytes: n[1] as u64,
        millis: n[2] as u64,
        msgs_per_sec: n[3],
        mb_per_sec: n[4],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Output as rdkafka_performance 2.10 prints it: interval lines, then the last.
    const PRODUCER: &str = "\
% Sending 100000 messages of size 128 bytes
% 41000 messages produced (5248000 bytes), 40000 delivered (offset 39999, 0 failed) in 1000ms: 40000 msgs/s and 5.12 MB/s, 0 produce failures, 1000 in queue, no compression
% 100000 messages produced (12800000 bytes), 99998 delivered (offset 99997, 2 failed) in 2468ms: 40518 msgs/s and 5.19 MB/s, 0 produce failures, 0 in queue, no compression
";

    const CONSUMER: &str = "\
% Consumer reached end of bench [0] message queue at offset 100000
% 60000 messages (61440000 bytes) consumed in 1000ms: 60000 msgs/s (61.44 MB/s)
% 100000 messages (102400000 bytes) consumed in 1530ms: 65359 msgs/s (66.93 MB/s)
";

    #[test]
    fn the_last_producer_summary_is_read() {
        let p = produced(PRODUCER).unwrap();
        assert_eq!(
            p,
            Produced {
                messages: 100_000,
                bytes: 12_800_000,
                delivered: 99_998,
                failed: 2,
                millis: 2468,
                msgs_per_sec: 40_518.0,
                mb_per_sec: 5.19,
                produce_failures: 0,
            }
        );
    }

    #[test]
    fn the_last_consumer_summary_is_read() {
        let c = consumed(CONSUMER).unwrap();
        assert_eq!(
            c,
            Consumed {
                messages: 100_000,
                bytes: 102_400_000,
                millis: 1530,
                msgs_per_sec: 65_359.0,
                mb_per_sec: 66.93,
            }
        );
    }

    #[test]
    fn latencies_after_the_consumer_figures_are_left_out() {
        let line = "% 10 messages (1280 bytes) consumed in 5ms: 2000 msgs/s (0.26 MB/s), \
                    latency curr/avg/lo/hi 1.00/2.00/0.50/3.00ms";
        let c = consumed(line).unwrap();
        assert_eq!((c.messages, c.bytes, c.millis), (10, 1280, 5));
        assert_eq!((c.msgs_per_sec, c.mb_per_sec), (2000.0, 0.26));
    }

    #[test]
    fn output_without_a_summary_is_an_error() {
        assert!(produced(CONSUMER).is_err());
        assert!(consumed(PRODUCER).is_err());
        assert!(produced("% produce error: Local: Unknown partition").is_err());
        assert!(consumed("").is_err());
    }
}
