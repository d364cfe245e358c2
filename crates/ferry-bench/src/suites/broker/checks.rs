//! The targets, each checked against what this run measured; the relative ones against a
//! figure of the same run. A check whose scenario did not run says so instead of passing.

use super::super::target_check::TargetCheck;
use super::process;
use super::report::{Run, count};
use super::{TARGET_BACKLOG, TARGET_DELAYED};

/// Messages per second through publish → receive → ack, steady.
pub const STEADY_TARGET: f64 = 300_000.0;
/// Share of the steady throughput kept on top of the backlog.
pub const BACKLOG_RATIO_TARGET: f64 = 0.80;
/// Resident memory with the backlog held.
pub const BACKLOG_MEMORY_TARGET: u64 = 1 << 30;
/// Share of the empty queue's publish rate kept while holding delayed messages.
pub const DELAYED_RATIO_TARGET: f64 = 0.80;

/// A target of one scenario; not measured when the scenario (or the one it compares with)
/// was not run.
pub struct ScenarioCheck {
    pub scenario: &'static str,
    pub check: TargetCheck,
}

pub fn checks(run: &Run) -> Vec<ScenarioCheck> {
    let mut out = Vec::new();
    let steady = run.steady.as_ref().map(|w| w.acked_per_sec());
    out.push(ScenarioCheck {
        scenario: "steady",
        check: TargetCheck {
            figure: "consume + ack msgs/s".into(),
            measured: steady.map(|r| format!("{} msgs/s", count(r))),
            target: format!(">= {} msgs/s", count(STEADY_TARGET)),
            ratio: steady.map(|r| r / STEADY_TARGET),
            pass: steady.map(|r| r >= STEADY_TARGET),
            note: String::new(),
        },
    });

    let backlog = run.backlog.as_ref();
    let smaller = |n: u64, target: u64| {
        if n < target {
            format!(
                "run with {} messages; the target is for {}",
                count(n as f64),
                count(target as f64)
            )
        } else {
            String::new()
        }
    };
    let on_top = backlog.map(|b| b.window.acked_per_sec());
    let ratio = on_top.zip(steady).map(|(b, s)| b / s);
    out.push(ScenarioCheck {
        scenario: "backlog",
        check: TargetCheck {
            figure: "consume + ack msgs/s on top of the backlog".into(),
            measured: on_top.map(|r| match steady {
                Some(s) => format!("{} / {} msgs/s (steady)", count(r), count(s)),
                None => format!("{} msgs/s (steady not run)", count(r)),
            }),
            target: format!(">= {BACKLOG_RATIO_TARGET:.2} x steady"),
            ratio,
            pass: ratio.map(|r| r >= BACKLOG_RATIO_TARGET),
            note: backlog.map_or_else(String::new, |b| smaller(b.fill.messages, TARGET_BACKLOG)),
        },
    });

    let peak = backlog.and_then(|b| b.end.map(|m| m.peak_bytes));
    let mut note = backlog.map_or_else(String::new, |b| smaller(b.fill.messages, TARGET_BACKLOG));
    if backlog.is_some_and(|b| !b.peak_reset) {
        note.push_str("; peak since the process started (VmHWM could not be reset)");
    }
    out.push(ScenarioCheck {
        scenario: "backlog",
        check: TargetCheck {
            figure: "peak resident memory (VmHWM) with the backlog".into(),
            measured: peak.map(process::bytes),
            target: format!("< {}", process::bytes(BACKLOG_MEMORY_TARGET)),
            ratio: peak.map(|p| p as f64 / BACKLOG_MEMORY_TARGET as f64),
            pass: peak.map(|p| p < BACKLOG_MEMORY_TARGET),
            note: note.trim_start_matches("; ").to_string(),
        },
    });

    for delayed_publishes in [false, true] {
        let case = run.delayed.as_ref().and_then(|d| {
            d.cases
                .iter()
                .find(|c| c.delayed_publishes == delayed_publishes)
        });
        let held = run.delayed.as_ref().map_or(0, |d| d.held);
        out.push(ScenarioCheck {
            scenario: "delayed",
            check: TargetCheck {
                figure: format!(
                    "publish msgs/s holding delayed messages, {}",
                    if delayed_publishes {
                        "delayed publishes"
                    } else {
                        "publishes due now"
                    }
                ),
                measured: case.map(|c| {
                    format!(
                        "{} / {} msgs/s (empty)",
                        count(c.holding.published_per_sec()),
                        count(c.empty.published_per_sec())
                    )
                }),
                target: format!(">= {DELAYED_RATIO_TARGET:.2} x empty queue"),
                ratio: case.map(|c| c.ratio()),
                pass: case.map(|c| c.ratio() >= DELAYED_RATIO_TARGET),
                note: case.map_or_else(String::new, |_| smaller(held, TARGET_DELAYED)),
            },
        });
    }
    out
}
