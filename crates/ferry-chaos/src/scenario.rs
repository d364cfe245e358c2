//! A run's parameters: how long, how fast, how many workers, which faults how often, and
//! the two queues the workload uses. Saved beside the histories (`scenario.json`) so a
//! failing run can be checked again and its fault schedule replayed from its seed.

use std::time::Duration;

use ferry_client::proto as v1;
use serde::{Deserialize, Serialize};

use crate::error::{ChaosError, Result};

/// Key-shared: per-key order is checked on it. Everything on it is acked (some after one
/// nack), so everything must be delivered and acked.
pub const ORDERS_QUEUE: &str = "chaos.orders";
/// Shared, with few deliveries allowed: rejects and poison messages end in its
/// dead-letter queue; some messages carry dedup ids and are published again.
pub const WORK_QUEUE: &str = "chaos.work";
/// The header that carries a message's [`crate::history::Fate`].
pub const FATE_HEADER: &str = "chaos-fate";
/// The header that carries a keyed message's place in its key's sequence.
pub const KSEQ_HEADER: &str = "chaos-kseq";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    pub seed: u64,
    /// How long faults are injected; the final drain comes after.
    pub duration_ms: u64,
    /// Messages per second, over all producers.
    pub rate: u32,
    /// Stop publishing after this many acknowledged publishes (over all producers).
    pub max_messages: Option<u64>,
    pub producers: u32,
    pub consumers: u32,
    /// The queues' lease: server pauses last longer than this.
    pub lease_ms: u64,
    /// `chaos.work`'s max deliveries (poison messages reach it).
    pub work_max_deliveries: u32,
    /// `chaos.orders`'s max deliveries: high, so kills rarely dead-letter an ordered message.
    pub orders_max_deliveries: u32,
    /// Pause between one fault's end and the next fault: uniformly in this range.
    pub fault_gap_ms: (u64, u64),
    /// Server kills a minute, spread over the run, the other faults drawn between them;
    /// `None` draws server kills by weight like every other fault (about 1.5 a minute
    /// with the default gaps). Absent from the scenarios of older runs.
    #[serde(default)]
    pub server_kills_per_minute: Option<f64>,
    /// How many clock jumps, and how far each moves the server's clock forward.
    pub clock_jumps: u32,
    pub clock_jump_ms: u64,
    /// Traffic without faults after the last one, before the producers stop.
    pub calm_ms: u64,
    /// How long the final drain may take.
    pub drain_timeout_ms: u64,
}

impl Scenario {
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(ChaosError::BadScenario(what.to_owned()));
        if self.producers == 0 || self.consumers == 0 {
            return bad("it needs at least one producer and one consumer");
        }
        if self.rate == 0 {
            return bad("--rate must be at least 1 message per second");
        }
        if self.fault_gap_ms.0 > self.fault_gap_ms.1 {
            return bad("the shortest gap between faults is longer than the longest");
        }
        if let Some(per_minute) = self.server_kills_per_minute {
            // Every fault slot a kill: its gap and the restart. More than that cannot be
            // scheduled, and the run would quietly have fewer kills than asked for.
            let most = 60_000.0 / (self.fault_gap_ms.1 + KILL_SERVER_BUSY_MS) as f64;
            if !(per_minute > 0.0 && per_minute <= most) {
                return Err(ChaosError::BadScenario(format!(
                    "--server-kills-per-minute {per_minute} cannot be scheduled: with faults \
                     up to {} ms apart and a restart each, between 0 and {most:.2} fit in a \
                     minute; shorten --fault-gap for more",
                    self.fault_gap_ms.1
                )));
            }
        }
        if self.work_max_deliveries < 2 {
            return bad("chaos.work needs max deliveries of at least 2 (nack once, then ack)");
        }
        if self.lease_ms < 1000 {
            return bad("the lease must be at least 1 s");
        }
        Ok(())
    }

    pub fn duration(&self) -> Duration {
        Duration::from_millis(self.duration_ms)
    }

    /// A server pause longer than the lease, so leases expire while it is stopped.
    pub fn pause_range_ms(&self) -> (u64, u64) {
        (self.lease_ms + 500, self.lease_ms * 2)
    }

    pub fn orders_spec(&self) -> v1::QueueSpec {
        self.queue_spec(self.orders_max_deliveries, v1::OrderingMode::KeyShared)
    }

    pub fn work_spec(&self) -> v1::QueueSpec {
        self.queue_spec(self.work_max_deliveries, v1::OrderingMode::Shared)
    }

    fn queue_spec(&self, max_deliveries: u32, ordering: v1::OrderingMode) -> v1::QueueSpec {
        v1::QueueSpec {
            retry: Some(v1::RetryPolicy {
                max_deliveries: Some(max_deliveries),
                backoff: Some(v1::Backoff {
                    base_ms: Some(50),
                    cap_ms: Some(500),
                    multiplier: Some(2.0),
                    jitter: Some(0.2),
                }),
            }),
            dead_letter: Some(v1::DeadLetter {
                target: Some(v1::dead_letter::Target::Derived(true)),
            }),
            // Far longer than a run plus its clock jumps: every re-publish is inside it.
            dedup_window_ms: Some(6 * 3600 * 1000),
            lease_ms: Some(self.lease_ms),
            ordering: ordering as i32,
            durability: v1::Durability::Fsync as i32,
            ..Default::default()
        }
    }
}

/// How long the schedule allows for a server's restart after a kill.
pub const KILL_SERVER_BUSY_MS: u64 = 1_000;

/// `ferry chaos run`'s knobs.
#[derive(clap::Args, Debug, Clone)]
pub struct ScenarioArgs {
    /// How long faults are injected (e.g. 90s, 3m, 1h); the drain comes after.
    #[arg(long, default_value = "3m", value_parser = parse_duration)]
    pub duration: Duration,
    /// Seeds the fault schedule and the workload: the same seed, the same schedule.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Messages per second, over all producers.
    #[arg(long, default_value_t = 150)]
    pub rate: u32,
    /// Stop publishing after this many acknowledged publishes.
    #[arg(long, value_name = "N")]
    pub messages: Option<u64>,
    #[arg(long, default_value_t = 2)]
    pub producers: u32,
    #[arg(long, default_value_t = 3)]
    pub consumers: u32,
    /// The queues' lease; server pauses are longer.
    #[arg(long, default_value = "4s", value_parser = parse_duration)]
    pub lease: Duration,
    /// Shortest and longest wait between faults, e.g. 2s..6s.
    #[arg(long, default_value = "2s..6s", value_parser = parse_range)]
    pub fault_gap: (Duration, Duration),
    /// Server kills a minute (e.g. 2), spread evenly over the run with the other faults
    /// between them; without it server kills are drawn by weight, about 1.5 a minute.
    #[arg(long, value_name = "N")]
    pub server_kills_per_minute: Option<f64>,
    /// How many times the server's clock jumps forward, and by how much.
    #[arg(long, default_value_t = 1)]
    pub clock_jumps: u32,
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub clock_jump: Duration,
}

impl ScenarioArgs {
    pub fn scenario(&self) -> Scenario {
        let seed = self.seed.unwrap_or_else(|| fastrand::u64(..));
        Scenario {
            seed,
            duration_ms: self.duration.as_millis() as u64,
            rate: self.rate,
            max_messages: self.messages,
            producers: self.producers,
            consumers: self.consumers,
            lease_ms: self.lease.as_millis() as u64,
            work_max_deliveries: 3,
            orders_max_deliveries: 25,
            fault_gap_ms: (
                self.fault_gap.0.as_millis() as u64,
                self.fault_gap.1.as_millis() as u64,
            ),
            server_kills_per_minute: self.server_kills_per_minute,
            clock_jumps: self.clock_jumps,
            clock_jump_ms: self.clock_jump.as_millis() as u64,
            calm_ms: 5_000,
            drain_timeout_ms: 180_000,
        }
    }
}

/// `90s`, `3m`, `1h`, `500ms`, or whole seconds.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration: use e.g. 500ms, 90s, 3m, 1h"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "" | "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!(
            "{text:?}: unknown unit {unit:?}: use ms, s, m or h"
        )),
    }
}

/// `2s..6s`: two durations, the first no longer than the second.
fn parse_range(text: &str) -> std::result::Result<(Duration, Duration), String> {
    let (low, high) = text
        .split_once("..")
        .ok_or_else(|| format!("{text:?} is not a range: use e.g. 2s..6s"))?;
    let (low, high) = (parse_duration(low)?, parse_duration(high)?);
    if low > high {
        return Err(format!("{text:?}: the first bound is above the second"));
    }
    Ok((low, high))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_refuse_garbage() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("3m"), Ok(Duration::from_secs(180)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_duration("m").is_err());
        assert!(parse_range("6s..2s").is_err());
        assert_eq!(
            parse_range("1s..2s"),
            Ok((Duration::from_secs(1), Duration::from_secs(2)))
        );
    }
}
