//! The fault schedule: which fault when, drawn from the scenario's seed before the run
//! starts, so the same seed replays the same faults in the same order. Every kind of fault
//! appears at least once when the run is long enough (the first slots hold one of each,
//! shuffled); the rest are drawn by weight — or, with a server-kill rate, a slot is a
//! server kill whenever the kills have fallen behind that rate, and the other kinds are
//! drawn by weight.

use serde::{Deserialize, Serialize};

use crate::scenario::{KILL_SERVER_BUSY_MS, Scenario};

/// What the proxy between clients and server does to the connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProxyFault {
    /// Closes every open connection (FIN).
    DropAll,
    /// Resets every open connection (RST: SO_LINGER 0, then close).
    ResetAll,
    /// Delays each chunk by `ms` in both directions, for `for_ms`.
    Delay { ms: u64, for_ms: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// SIGKILL the server, then start it again on the same data.
    KillServer,
    /// SIGKILL consumer `index`, then start a new one in its place.
    KillConsumer {
        index: u32,
    },
    /// SIGSTOP the server for `ms` (longer than a lease), then SIGCONT.
    PauseServer {
        ms: u64,
    },
    Proxy(ProxyFault),
    /// Move the server's clock forward by `ms`.
    ClockJump {
        ms: u64,
    },
}

impl Fault {
    /// Every counter a fault is reported under, one per variant: a report lists each, even
    /// at zero, so two runs' reports line up.
    pub const KINDS: [&'static str; 5] = [
        "server_kill",
        "consumer_kill",
        "pause",
        "proxy",
        "clock_jump",
    ];

    /// The counter this fault is reported under.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::KillServer => "server_kill",
            Fault::KillConsumer { .. } => "consumer_kill",
            Fault::PauseServer { .. } => "pause",
            Fault::Proxy(_) => "proxy",
            Fault::ClockJump { .. } => "clock_jump",
        }
    }
}

/// A fault and when it starts, in ms after the run's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planned {
    pub at_ms: u64,
    pub fault: Fault,
}

/// How long a fault keeps the harness busy (the next one starts after it and a gap).
fn busy_ms(fault: &Fault) -> u64 {
    match fault {
        Fault::PauseServer { ms } => *ms,
        Fault::Proxy(ProxyFault::Delay { for_ms, .. }) => *for_ms,
        // A restart takes about a second.
        Fault::KillServer => KILL_SERVER_BUSY_MS,
        _ => 0,
    }
}

/// The schedule of `scenario`: faults from the first gap until `duration`, each starting
/// after the previous one has ended and a gap has passed.
pub fn plan(scenario: &Scenario) -> Vec<Planned> {
    let mut rng = fastrand::Rng::with_seed(scenario.seed);
    let (gap_low, gap_high) = scenario.fault_gap_ms;
    let draw = |rng: &mut fastrand::Rng, kind: usize| -> Fault {
        match kind {
            0 => Fault::KillServer,
            1 => Fault::KillConsumer {
                index: rng.u32(..scenario.consumers),
            },
            2 => {
                let (low, high) = scenario.pause_range_ms();
                Fault::PauseServer {
                    ms: rng.u64(low..=high),
                }
            }
            _ => Fault::Proxy(match rng.u32(..3) {
                0 => ProxyFault::DropAll,
                1 => ProxyFault::ResetAll,
                _ => ProxyFault::Delay {
                    ms: rng.u64(20..=300),
                    for_ms: rng.u64(1_000..=4_000),
                },
            }),
        }
    };
    // One of each kind first, in a seeded order; then by weight: proxy faults are cheap
    // and most common, server kills and pauses rarer.
    let mut first: Vec<usize> = vec![0, 1, 2, 3, 3];
    rng.shuffle(&mut first);
    // With a kill rate, kills are paced rather than drawn, so the others share the weights.
    let weights: &[(usize, u32)] = match scenario.server_kills_per_minute {
        None => &[(0, 2), (1, 3), (2, 2), (3, 5)],
        Some(_) => &[(1, 3), (2, 2), (3, 5)],
    };
    let total: u32 = weights.iter().map(|w| w.1).sum();
    let mut faults = Vec::new();
    let mut at = 0;
    let mut n = 0;
    let mut kills = 0u64;
    loop {
        at += rng.u64(gap_low..=gap_high);
        let behind_kill_rate = scenario
            .server_kills_per_minute
            .is_some_and(|per_minute| (kills as f64) < per_minute * at as f64 / 60_000.0);
        let kind = if n < first.len() {
            first[n]
        } else if behind_kill_rate {
            0
        } else {
            let mut pick = rng.u32(..total);
            weights
                .iter()
                .find(|(_, w)| {
                    if pick < *w {
                        true
                    } else {
                        pick -= w;
                        false
                    }
                })
                .map_or(3, |(k, _)| *k)
        };
        let fault = draw(&mut rng, kind);
        if at + busy_ms(&fault) > scenario.duration_ms {
            break;
        }
        if fault == Fault::KillServer {
            kills += 1;
        }
        faults.push(Planned { at_ms: at, fault });
        at += busy_ms(&fault);
        n += 1;
    }
    // The clock jumps go between faults, spread over the middle of the run, never while a
    // pause or a delay is on (a jump then would be hard to attribute).
    for j in 0..scenario.clock_jumps {
        let target = scenario.duration_ms * u64::from(j + 1) / u64::from(scenario.clock_jumps + 1);
        let slot = faults
            .iter()
            .position(|p| p.at_ms >= target)
            .unwrap_or(faults.len());
        let prev_end = slot
            .checked_sub(1)
            .map_or(0, |i| faults[i].at_ms + busy_ms(&faults[i].fault));
        let next_start = faults.get(slot).map_or(scenario.duration_ms, |p| p.at_ms);
        let at_ms = (prev_end + next_start) / 2;
        faults.insert(
            slot,
            Planned {
                at_ms,
                fault: Fault::ClockJump {
                    ms: scenario.clock_jump_ms,
                },
            },
        );
    }
    faults
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::ScenarioArgs;
    use clap::Parser;

    #[derive(Parser)]
    struct Args {
        #[command(flatten)]
        scenario: ScenarioArgs,
    }

    fn scenario(seed: u64, duration: &str) -> Scenario {
        with_flags(seed, duration, &[])
    }

    fn with_flags(seed: u64, duration: &str, flags: &[&str]) -> Scenario {
        let seed = seed.to_string();
        let args = ["x", "--seed", &seed, "--duration", duration];
        Args::parse_from(args.iter().chain(flags))
            .scenario
            .scenario()
    }

    fn count(faults: &[Planned], kind: &str) -> usize {
        faults.iter().filter(|p| p.fault.kind() == kind).count()
    }

    /// Faults in order, none starting before the previous one ended, the last one ending
    /// within the run.
    fn assert_well_formed(faults: &[Planned], s: &Scenario) {
        for pair in faults.windows(2) {
            assert!(pair[0].at_ms + busy_ms(&pair[0].fault) <= pair[1].at_ms);
        }
        let last = faults.last().unwrap();
        assert!(last.at_ms + busy_ms(&last.fault) <= s.duration_ms);
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule_and_another_seed_another() {
        assert_eq!(plan(&scenario(7, "3m")), plan(&scenario(7, "3m")));
        assert_ne!(plan(&scenario(7, "3m")), plan(&scenario(8, "3m")));
    }

    #[test]
    fn every_kind_appears_and_faults_do_not_overlap_or_overrun() {
        for seed in 0..50 {
            let s = scenario(seed, "2m");
            let faults = plan(&s);
            for kind in Fault::KINDS {
                assert!(
                    faults.iter().any(|p| p.fault.kind() == kind),
                    "seed {seed}: no {kind}"
                );
            }
            assert_eq!(count(&faults, "clock_jump"), 1);
            assert_well_formed(&faults, &s);
        }
    }

    #[test]
    fn a_server_kill_rate_gives_that_many_kills_spread_over_the_run() {
        for seed in 0..10 {
            let s = with_flags(seed, "60m", &["--server-kills-per-minute", "2"]);
            s.validate().unwrap();
            let faults = plan(&s);
            assert_well_formed(&faults, &s);
            // 2 a minute for 60 minutes, short by at most the one the run's end cuts off.
            let kills = count(&faults, "server_kill");
            assert!((119..=121).contains(&kills), "seed {seed}: {kills} kills");
            // Spread out: every 10 minutes hold their share, give or take one.
            for tenth in 0..6u64 {
                let window = tenth * 600_000..(tenth + 1) * 600_000;
                let in_window = faults
                    .iter()
                    .filter(|p| p.fault == Fault::KillServer && window.contains(&p.at_ms))
                    .count();
                assert!(
                    (19..=21).contains(&in_window),
                    "seed {seed}, minutes {}..: {in_window} kills",
                    tenth * 10
                );
            }
            // The other kinds still come between them.
            for kind in Fault::KINDS {
                assert!(count(&faults, kind) > 0, "seed {seed}: no {kind}");
            }
            assert!(count(&faults, "proxy") > 100, "seed {seed}");
        }
        // The rate holds below the weights' share too.
        let s = with_flags(1, "60m", &["--server-kills-per-minute", "0.5"]);
        let kills = count(&plan(&s), "server_kill");
        assert!((29..=31).contains(&kills), "{kills}");
    }

    #[test]
    fn a_server_kill_rate_that_does_not_fit_between_the_gaps_is_refused() {
        for rate in ["0", "-1", "NaN", "9"] {
            let flag = format!("--server-kills-per-minute={rate}");
            let s = with_flags(1, "10m", &[&flag]);
            let error = s.validate().unwrap_err().to_string();
            assert!(
                error.contains("--server-kills-per-minute") && error.contains("fault-gap"),
                "{rate}: {error}"
            );
        }
        // 8 a minute fit with faults up to 6 s apart; with gaps of 1..2 s, 20 do.
        with_flags(1, "10m", &["--server-kills-per-minute", "8"])
            .validate()
            .unwrap();
        let s = with_flags(
            1,
            "10m",
            &["--server-kills-per-minute", "20", "--fault-gap", "1s..2s"],
        );
        s.validate().unwrap();
        assert!(count(&plan(&s), "server_kill") >= 199);
    }
}
