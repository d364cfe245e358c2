//! The two tables, from the run's figures: every figure measured, then the targets; the checks
//! are in `checks.rs`, the JSON in `json.rs`.

use comfy_table::{CellAlignment, Table};

pub use super::super::report::{count, num};

use super::super::machine::Machine;
use super::backlog::Backlog;
use super::checks::checks;
use super::delayed::Delayed;
use super::process::{self, Memory};
use super::traffic::{Shape, Window, max_us, quantile_us};
use super::{DELAY, Plan};

pub struct Run {
    pub machine: Machine,
    pub plan: Plan,
    pub shape: Shape,
    /// `None` for a scenario left out with `--only`.
    pub steady: Option<Window>,
    pub backlog: Option<Backlog>,
    pub delayed: Option<Delayed>,
}

fn ms(us: f64) -> String {
    if us.is_nan() {
        "-".into()
    } else {
        num(us / 1e3)
    }
}

fn rate(v: f64) -> String {
    format!("{} msgs/s", count(v))
}

fn memory(m: Option<Memory>) -> String {
    m.map_or_else(
        || "unknown".into(),
        |m| {
            format!(
                "VmRSS {}, VmHWM {}",
                process::bytes(m.rss_bytes),
                process::bytes(m.peak_bytes)
            )
        },
    )
}

struct Rows(Table);

impl Rows {
    fn add(&mut self, scenario: &str, figure: &str, value: String, notes: String) {
        self.0
            .add_row(vec![scenario.to_string(), figure.to_string(), value, notes]);
    }

    /// The rows every window with consumers has.
    fn traffic(&mut self, scenario: &str, w: &Window, shape: &Shape, credit: usize, on_top: &str) {
        self.add(
            scenario,
            &format!("publish{on_top}"),
            rate(w.published_per_sec()),
            format!(
                "{} producers, publish_batch of {}; one call p50 {} ms, p99 {} ms, max {} ms",
                shape.producers,
                shape.batch,
                ms(quantile_us(&w.publish_ns, 0.5)),
                ms(quantile_us(&w.publish_ns, 0.99)),
                ms(max_us(&w.publish_ns)),
            ),
        );
        self.add(
            scenario,
            &format!("consume + ack{on_top}"),
            rate(w.acked_per_sec()),
            format!(
                "{} consumers, receive up to {}, acks {}; queue depth {} -> {} (credit {credit})",
                shape.consumers,
                shape.receive_max,
                shape.acks.name(),
                count(w.depth_start as f64),
                count(w.depth_end as f64),
            ),
        );
        let h = &w.end_to_end_ns;
        if h.is_empty() {
            self.add(
                scenario,
                "end-to-end latency",
                "-".into(),
                "no message was both published and acked in the window (FIFO: the backlog's go first)"
                    .into(),
            );
        } else {
            self.add(
                scenario,
                "end-to-end latency p50",
                format!("{} ms", ms(quantile_us(h, 0.5))),
                format!(
                    "p99 {} ms, p99.9 {} ms, max {} ms; publish call -> ack returned, {} messages",
                    ms(quantile_us(h, 0.99)),
                    ms(quantile_us(h, 0.999)),
                    ms(max_us(h)),
                    count(h.len() as f64)
                ),
            );
        }
        self.resources(scenario, w);
    }

    fn resources(&mut self, scenario: &str, w: &Window) {
        self.add(
            scenario,
            "fdatasyncs",
            format!("{} /s", count(w.fsyncs_per_sec())),
            format!(
                "message and journal logs together; CPU {:.2} cores busy (process total), {} us per message acked",
                w.cores_busy(),
                num(w.cpu_seconds * 1e6 / w.acked.max(1) as f64)
            ),
        );
    }
}

pub fn table(run: &Run) -> String {
    let mut rows = Rows(Table::new());
    rows.0.load_preset(comfy_table::presets::ASCII_MARKDOWN);
    rows.0
        .set_header(vec!["scenario", "figure", "value", "notes"]);
    let (shape, plan) = (&run.shape, &run.plan);
    if let Some(w) = &run.steady {
        rows.traffic("steady", w, shape, plan.credit, "");
    }
    if let Some(b) = &run.backlog {
        rows.add(
            "backlog",
            "fill",
            rate(b.fill.per_sec()),
            format!(
                "{} messages in {:.1} s, {} fdatasyncs/s",
                count(b.fill.messages as f64),
                b.fill.elapsed.as_secs_f64(),
                count(b.fill.fsyncs as f64 / b.fill.elapsed.as_secs_f64())
            ),
        );
        rows.add(
            "backlog",
            "memory after the fill",
            b.after_fill
                .map_or_else(|| "unknown".into(), |m| process::bytes(m.rss_bytes)),
            format!(
                "{}; before the broker opened: {}; {} per message held",
                memory(b.after_fill),
                memory(b.before),
                b.bytes_per_message()
                    .map_or_else(|| "unknown".into(), |v| format!("{v:.0} B"))
            ),
        );
        let d = &b.with_dedup_ids;
        rows.add(
            "backlog",
            "memory per message with a dedup id",
            d.bytes_per_message()
                .map_or_else(|| "unknown".into(), |v| format!("{v:.0} B")),
            format!(
                "{} messages with a dedup id each, default spec (dedup window {} s), in a \
                 broker of their own: the delivery state and a dedup entry, held for the window",
                count(d.fill.messages as f64),
                d.window.as_secs()
            ),
        );
        rows.add(
            "backlog",
            "peak memory",
            b.end
                .map_or_else(|| "unknown".into(), |m| process::bytes(m.peak_bytes)),
            format!(
                "peak over the scenario{}; {}",
                if b.peak_reset {
                    ""
                } else {
                    " (since the process started)"
                },
                memory(b.end)
            ),
        );
        rows.traffic("backlog", &b.window, shape, plan.credit, " on top");
        rows.add(
            "backlog",
            "reopen",
            format!("{:.1} s", b.reopen.as_secs_f64()),
            format!(
                "Broker::open recovering the backlog's queue; then {}",
                memory(b.after_reopen)
            ),
        );
    }
    if let Some(d) = &run.delayed {
        for case in &d.cases {
            let publish = |rows: &mut Rows, label: String, w: &Window| {
                rows.add(
                    "delayed",
                    &label,
                    rate(w.published_per_sec()),
                    format!(
                        "publish_batch of {}, p50 {} ms, p99 {} ms, max {} ms; queue holds {} at the end; CPU {:.2} cores, {} fdatasyncs/s",
                        shape.batch,
                        ms(quantile_us(&w.publish_ns, 0.5)),
                        ms(quantile_us(&w.publish_ns, 0.99)),
                        ms(max_us(&w.publish_ns)),
                        count(w.depth_end as f64),
                        w.cores_busy(),
                        count(w.fsyncs_per_sec())
                    ),
                );
            };
            publish(
                &mut rows,
                format!("{}, empty queue", case.name()),
                &case.empty,
            );
            rows.add(
                "delayed",
                &format!("fill for {}", case.name()),
                rate(case.fill.per_sec()),
                format!(
                    "{} messages delayed {} s in {:.1} s",
                    count(case.fill.messages as f64),
                    DELAY.as_secs(),
                    case.fill.elapsed.as_secs_f64()
                ),
            );
            publish(
                &mut rows,
                format!(
                    "{}, holding {} delayed",
                    case.name(),
                    count(case.fill.messages as f64)
                ),
                &case.holding,
            );
        }
    }
    if let Some(col) = rows.0.column_mut(2) {
        col.set_cell_alignment(CellAlignment::Right);
    }

    let mut targets = Table::new();
    targets.load_preset(comfy_table::presets::ASCII_MARKDOWN);
    targets.set_header(vec![
        "scenario", "figure", "measured", "target", "ratio", "met?", "notes",
    ]);
    for c in checks(run) {
        let mut row = vec![c.scenario.to_string()];
        row.extend(c.check.cells());
        targets.add_row(row);
    }
    if let Some(col) = targets.column_mut(4) {
        col.set_cell_alignment(CellAlignment::Right);
    }
    format!("{}\n\n{targets}", rows.0)
}

/// Printed under the tables: the settings behind the figures and how to read the ratio.
pub fn legend(run: &Run) -> String {
    let (shape, plan) = (&run.shape, &run.plan);
    format!(
        "\
note: in process, queue durability Fsync, {} B payloads, {} producers and {} consumers on one
  queue; {:.1} s warm-up, then a {:.1} s window per measurement{}.
  publish: each producer awaits one publish_batch of {} messages at a time.
  consume + ack: each consumer receives up to {} (lease 30 s) and acks each message:
             {}.
  credit: producers run at most {} messages ahead of the acks.
  ratio: measured / target for an absolute target; the ratio itself for a relative one.",
        shape.payload_bytes,
        shape.producers,
        shape.consumers,
        plan.warmup.as_secs_f64(),
        plan.window.as_secs_f64(),
        if plan.quick { " (--quick)" } else { "" },
        shape.batch,
        shape.receive_max,
        match shape.acks {
            super::traffic::AckMode::Batch => "the acks of a receive in one ack_batch",
            super::traffic::AckMode::Concurrent =>
                "all acks of a receive at once, then the next receive",
            super::traffic::AckMode::Sequential => "one ack at a time, each awaited",
        },
        plan.credit,
    )
}
