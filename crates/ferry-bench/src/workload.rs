//! A workload file (`bench/workloads/*.toml`): what one run asks of every target, in the
//! shape of the OpenMessaging Benchmark's workloads — producers, batches, a rate, consumers
//! per subscription, and either a timed live run or a backlog to drain.

use std::path::Path;
use std::time::Duration;

use ferry::{Error, Result};
use serde::{Deserialize, Serialize};

/// What consumers read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// One queue; its consumers compete for messages.
    Queue,
    /// One topic with `subscriptions` subscriptions, each getting every message and read by
    /// its own `consumers`.
    Fanout,
}

/// When a delivery's ack is awaited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AckMode {
    /// Each ack completes before the next delivery is taken.
    Each,
    /// Acks run concurrently, at most `prefetch` in flight per consumer.
    Pipelined,
}

/// How producing and consuming are arranged in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Producers and consumers run at once for `warmup_secs + duration_secs`; only the
    /// window after the warm-up is measured.
    Live,
    /// Every message is published first, then consumers start and the drain is timed.
    Backlog,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub name: String,
    pub kind: Kind,
    /// Subscriptions of the topic (`fanout` only).
    pub subscriptions: Option<u32>,
    /// Payload bytes per message.
    pub message_size: usize,
    /// Distinct message keys, cycled through like the OpenMessaging Benchmark's partitions;
    /// 0 sends no key. No per-key ordering is declared, so keys spread messages only.
    pub keys: u32,
    pub producers: u32,
    /// Messages per publish call.
    pub batch: u32,
    /// Messages per second over all producers; 0 publishes as fast as acks come back.
    pub producer_rate: u64,
    /// Consumers per queue or per subscription.
    pub consumers: u32,
    pub prefetch: u32,
    pub ack: AckMode,
    /// The fraction of first deliveries nacked (no delay) and acked when they come back.
    #[serde(default)]
    pub nack_fraction: f64,
    pub mode: Mode,
    /// Messages to publish (`backlog` only).
    pub messages: Option<u64>,
    /// Measured seconds (`live` only).
    pub duration_secs: Option<f64>,
    /// Unmeasured seconds before the window (`live` only).
    pub warmup_secs: Option<f64>,
}

impl Workload {
    /// Reads and checks a workload file; an error names the file and the field.
    pub fn load(path: &Path) -> Result<Workload> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::invalid(format!("workload file {}", path.display()), e.to_string())
        })?;
        Workload::parse(&text)
            .map_err(|e| Error::invalid(format!("workload file {}", path.display()), e.to_string()))
    }

    /// Parses and checks a workload from TOML text.
    pub fn parse(text: &str) -> Result<Workload> {
        let workload: Workload = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        workload.validate()?;
        Ok(workload)
    }

    pub fn validate(&self) -> Result<()> {
        let bad =
            |field: &str, problem: &str| Err(Error::invalid(format!("field `{field}`"), problem));
        if self.name.is_empty()
            || !self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return bad("name", "must be non-empty letters, digits, `-` and `_`");
        }
        match (self.kind, self.subscriptions) {
            (Kind::Fanout, None | Some(0)) => {
                return bad("subscriptions", "a fanout workload needs at least 1");
            }
            (Kind::Queue, Some(_)) => {
                return bad("subscriptions", "only a fanout workload has subscriptions");
            }
            _ => {}
        }
        if self.message_size < 8 {
            return bad("message_size", "must be at least 8 bytes");
        }
        for (field, value) in [
            ("producers", self.producers),
            ("batch", self.batch),
            ("consumers", self.consumers),
            ("prefetch", self.prefetch),
        ] {
            if value == 0 {
                return bad(field, "must be at least 1");
            }
        }
        if !(0.0..1.0).contains(&self.nack_fraction) {
            return bad(
                "nack_fraction",
                "must be within 0 (inclusive) and 1 (exclusive)",
            );
        }
        match self.mode {
            Mode::Backlog => {
                if self.messages.is_none_or(|m| m == 0) {
                    return bad("messages", "a backlog workload needs at least 1");
                }
                if self.duration_secs.is_some() || self.warmup_secs.is_some() {
                    return bad(
                        "duration_secs",
                        "a backlog workload is sized by `messages`, not timed",
                    );
                }
                if self.producer_rate != 0 {
                    return bad("producer_rate", "a backlog is published at full speed (0)");
                }
            }
            Mode::Live => {
                if self.messages.is_some() {
                    return bad("messages", "a live workload is timed by `duration_secs`");
                }
                if !self.duration_secs.is_some_and(|d| d.is_finite() && d > 0.0) {
                    return bad("duration_secs", "a live workload needs a positive duration");
                }
                if !self.warmup_secs.is_none_or(|w| w.is_finite() && w >= 0.0) {
                    return bad("warmup_secs", "must be zero or more");
                }
            }
        }
        Ok(())
    }

    /// Subscriptions read: 1 for a queue.
    pub fn readers(&self) -> u32 {
        self.subscriptions.unwrap_or(1)
    }

    /// This workload with message counts and durations multiplied by `scale` (at least one
    /// batch per producer, and never a zero window).
    pub fn scaled(&self, scale: f64) -> Workload {
        let mut w = self.clone();
        let floor = u64::from(self.producers) * u64::from(self.batch);
        w.messages = self
            .messages
            .map(|m| ((m as f64 * scale).round() as u64).max(floor));
        w.duration_secs = self.duration_secs.map(|d| (d * scale).max(0.05));
        w.warmup_secs = self.warmup_secs.map(|d| d * scale);
        w
    }

    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.duration_secs.unwrap_or(0.0))
    }

    pub fn warmup(&self) -> Duration {
        Duration::from_secs_f64(self.warmup_secs.unwrap_or(0.0))
    }
}

/// A TOML error naming the field: toml's message already names a missing or unknown field,
/// but a mistyped value only by its position, so the key is read from that line.
fn toml_error(text: &str, e: &toml::de::Error) -> Error {
    let message = e.message().trim().to_string();
    let key = e.span().and_then(|span| {
        let line_start = text[..span.start.min(text.len())]
            .rfind('\n')
            .map_or(0, |i| i + 1);
        let line = text[line_start..].lines().next()?;
        let (key, _) = line.split_once('=')?;
        Some(key.trim().to_string()).filter(|k| !k.is_empty())
    });
    match key {
        Some(key) if !message.contains(&format!("`{key}`")) => {
            Error::invalid(format!("field `{key}`"), message)
        }
        _ => Error::invalid("workload", message),
    }
}

/// Every `*.toml` in `dir`, sorted by file name.
pub fn load_dir(dir: &Path) -> Result<Vec<Workload>> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        Error::invalid(
            format!("workload directory {}", dir.display()),
            e.to_string(),
        )
    })?;
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths.iter().map(|p| Workload::load(p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        name = "w"
        kind = "queue"
        message_size = 128
        keys = 0
        producers = 1
        batch = 10
        producer_rate = 0
        consumers = 1
        prefetch = 64
        ack = "each"
        mode = "live"
        duration_secs = 10
        warmup_secs = 2
    "#;

    fn error_of(text: &str) -> String {
        Workload::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn a_complete_file_parses() {
        let w = Workload::parse(GOOD).unwrap();
        assert_eq!(w.kind, Kind::Queue);
        assert_eq!(w.ack, AckMode::Each);
        assert_eq!(w.duration(), Duration::from_secs(10));
        assert_eq!(w.nack_fraction, 0.0);
    }

    #[test]
    fn a_missing_field_is_named() {
        let text = GOOD.replace("prefetch = 64", "");
        assert!(error_of(&text).contains("prefetch"), "{}", error_of(&text));
    }

    #[test]
    fn an_unknown_field_is_named() {
        let text = format!("{GOOD}\npartitions = 4\n");
        assert!(
            error_of(&text).contains("partitions"),
            "{}",
            error_of(&text)
        );
    }

    #[test]
    fn a_bad_enum_value_is_named() {
        let text = GOOD.replace(r#"ack = "each""#, r#"ack = "later""#);
        let err = error_of(&text);
        assert!(err.contains("ack") && err.contains("later"), "{err}");
    }

    #[test]
    fn out_of_range_values_name_their_field() {
        for (from, to, field) in [
            ("batch = 10", "batch = 0", "batch"),
            ("keys = 0", "keys = 0\nnack_fraction = 1.5", "nack_fraction"),
            (r#"kind = "queue""#, r#"kind = "fanout""#, "subscriptions"),
            (r#"mode = "live""#, r#"mode = "backlog""#, "messages"),
            ("duration_secs = 10", "duration_secs = 0", "duration_secs"),
            ("message_size = 128", "message_size = 2", "message_size"),
        ] {
            let err = error_of(&GOOD.replace(from, to));
            assert!(err.contains(&format!("`{field}`")), "{field}: {err}");
        }
    }

    #[test]
    fn scaling_shrinks_counts_and_windows_but_keeps_one_batch_per_producer() {
        let text = GOOD
            .replace(r#"mode = "live""#, r#"mode = "backlog""#)
            .replace("duration_secs = 10", "messages = 1000000")
            .replace("warmup_secs = 2", "");
        let w = Workload::parse(&text).unwrap();
        assert_eq!(w.scaled(0.01).messages, Some(10_000));
        assert_eq!(w.scaled(0.0).messages, Some(10));
        let live = Workload::parse(GOOD).unwrap().scaled(0.1);
        assert_eq!(live.duration(), Duration::from_secs(1));
        assert_eq!(live.warmup(), Duration::from_millis(200));
    }

    #[test]
    fn the_shipped_workloads_all_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/workloads");
        let names: Vec<String> = load_dir(&dir)
            .unwrap()
            .into_iter()
            .map(|w| w.name)
            .collect();
        assert_eq!(
            names,
            [
                "backlog-drain-1m-128b",
                "fanout-1p-10subs-1kb",
                "fixed-rate-10k-128b-latency",
                "fixed-rate-50k-128b-latency",
                "max-rate-1p-1c-128b",
                "max-rate-4p-4c-1kb-16-partitions",
                "work-queue-4c-retry-10pct",
            ]
        );
    }
}
