//! A run's outcome: the checker's findings, the faults injected by kind, and the one-line
//! verdict printed at the end.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::checker::Findings;
use crate::history::Event;
use crate::schedule::Fault;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub clean: bool,
    pub seed: u64,
    pub duration_ms: u64,
    /// Faults injected, by kind (`server_kill`, `consumer_kill`, `pause`, `proxy`,
    /// `clock_jump`), and the proxy faults by what they did.
    pub faults: BTreeMap<String, u64>,
    pub proxy_faults: BTreeMap<String, u64>,
    pub findings: Findings,
    /// Where the histories are kept (a failing run, or `--keep-history`).
    pub history_dir: Option<PathBuf>,
}

impl Report {
    pub fn new(seed: u64, duration_ms: u64, events: &[Event], findings: Findings) -> Report {
        let mut faults = BTreeMap::new();
        let mut proxy_faults = BTreeMap::new();
        for kind in Fault::KINDS {
            faults.insert(kind.to_owned(), 0);
        }
        for event in events {
            if let Event::Fault { kind, detail, .. } = event {
                *faults.entry(kind.clone()).or_default() += 1;
                if kind == "proxy" {
                    let what = detail.split_whitespace().next().unwrap_or("").to_owned();
                    *proxy_faults.entry(what).or_default() += 1;
                }
            }
        }
        Report {
            clean: findings.clean(),
            seed,
            duration_ms,
            faults,
            proxy_faults,
            findings,
            history_dir: None,
        }
    }

    fn fault(&self, kind: &str) -> u64 {
        self.faults.get(kind).copied().unwrap_or(0)
    }

    /// `chaos: CLEAN — published N acked-publishes, …; lost 0, acked twice 0, …`.
    pub fn verdict(&self) -> String {
        let f = &self.findings;
        let dead: u64 = f.dead_letters.values().sum();
        format!(
            "chaos: {} — published {} acked-publishes, delivered {} ({} messages, {} dead letters), \
             faults: {} server kills, {} consumer kills, {} pauses, {} proxy faults, {} clock jumps; \
             lost {}, acked twice {}, acked then back {}, order violations {}, \
             dead-letter mismatches {}, dedup violations {}, explained duplicates {}, \
             dead letters explained by faults {} (seed {})",
            if self.clean { "CLEAN" } else { "FAILED" },
            f.acked_publishes,
            f.deliveries,
            f.delivered_messages,
            dead,
            self.fault("server_kill"),
            self.fault("consumer_kill"),
            self.fault("pause"),
            self.fault("proxy"),
            self.fault("clock_jump"),
            f.lost,
            f.acked_twice,
            f.acked_came_back,
            f.order_violations,
            f.dead_letter_mismatches,
            f.dedup_violations,
            f.explained_duplicates,
            f.dead_letters_explained_by_faults,
            self.seed,
        )
    }
}
