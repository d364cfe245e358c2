//! The run as one JSON document: every figure of the tables, plus the raw counts behind them.

use hdrhistogram::Histogram;

use super::super::json::{Json, machine, obj};
use super::backlog::Backlog;
use super::checks::{ScenarioCheck, checks};
use super::delayed::{Case, Delayed};
use super::fill::Fill;
use super::process::Memory;
use super::report::Run;
use super::traffic::{Window, max_us, quantile_us};

fn latency(h: &Histogram<u64>) -> Json {
    if h.is_empty() {
        return Json::Null;
    }
    obj(vec![
        ("count", h.len().into()),
        ("p50_us", quantile_us(h, 0.5).into()),
        ("p99_us", quantile_us(h, 0.99).into()),
        ("p999_us", quantile_us(h, 0.999).into()),
        ("max_us", max_us(h).into()),
    ])
}

fn window(w: &Window) -> Json {
    obj(vec![
        ("seconds", w.elapsed.as_secs_f64().into()),
        ("published", w.published.into()),
        ("acked", w.acked.into()),
        ("published_per_sec", w.published_per_sec().into()),
        ("acked_per_sec", w.acked_per_sec().into()),
        ("fsyncs", w.fsyncs.into()),
        ("fsyncs_per_sec", w.fsyncs_per_sec().into()),
        ("cpu_seconds", w.cpu_seconds.into()),
        ("depth_start", w.depth_start.into()),
        ("depth_end", w.depth_end.into()),
        ("end_to_end", latency(&w.end_to_end_ns)),
        ("publish_batch", latency(&w.publish_ns)),
    ])
}

fn fill(f: &Fill) -> Json {
    obj(vec![
        ("messages", f.messages.into()),
        ("seconds", f.elapsed.as_secs_f64().into()),
        ("per_sec", f.per_sec().into()),
        ("fsyncs", f.fsyncs.into()),
    ])
}

fn memory(m: Option<Memory>) -> Json {
    m.map_or(Json::Null, |m| {
        obj(vec![
            ("vm_rss_bytes", m.rss_bytes.into()),
            ("vm_hwm_bytes", m.peak_bytes.into()),
        ])
    })
}

fn backlog(b: &Backlog) -> Json {
    obj(vec![
        ("fill", fill(&b.fill)),
        ("memory_before", memory(b.before)),
        ("memory_after_fill", memory(b.after_fill)),
        ("memory_end", memory(b.end)),
        ("peak_reset", b.peak_reset.into()),
        ("bytes_per_message", b.bytes_per_message().into()),
        ("window", window(&b.window)),
        ("reopen_secs", b.reopen.as_secs_f64().into()),
        ("memory_after_reopen", memory(b.after_reopen)),
        (
            "with_dedup_ids",
            obj(vec![
                ("fill", fill(&b.with_dedup_ids.fill)),
                ("memory_before", memory(b.with_dedup_ids.before)),
                ("memory_after_fill", memory(b.with_dedup_ids.after_fill)),
                (
                    "dedup_window_secs",
                    b.with_dedup_ids.window.as_secs_f64().into(),
                ),
                (
                    "bytes_per_message",
                    b.with_dedup_ids.bytes_per_message().into(),
                ),
            ]),
        ),
    ])
}

fn case(c: &Case) -> Json {
    obj(vec![
        ("delayed_publishes", c.delayed_publishes.into()),
        ("empty", window(&c.empty)),
        ("fill", fill(&c.fill)),
        ("holding", window(&c.holding)),
        ("ratio", c.ratio().into()),
    ])
}

fn delayed(d: &Delayed) -> Json {
    obj(vec![
        ("held", d.held.into()),
        ("cases", Json::Arr(d.cases.iter().map(case).collect())),
    ])
}

fn check(c: ScenarioCheck) -> Json {
    let mut fields = vec![("scenario", c.scenario.into())];
    fields.extend(c.check.json_fields());
    obj(fields)
}

pub fn run(run: &Run) -> Json {
    let (m, plan, shape) = (&run.machine, &run.plan, &run.shape);
    obj(vec![
        ("machine", machine(m)),
        (
            "settings",
            obj(vec![
                ("quick", plan.quick.into()),
                ("warmup_seconds", plan.warmup.as_secs_f64().into()),
                ("window_seconds", plan.window.as_secs_f64().into()),
                ("credit", plan.credit.into()),
                ("backlog", plan.backlog.into()),
                ("delayed", plan.delayed.into()),
                ("producers", shape.producers.into()),
                ("consumers", shape.consumers.into()),
                ("batch", shape.batch.into()),
                ("receive_max", shape.receive_max.into()),
                ("acks", shape.acks.name().into()),
                ("payload_bytes", shape.payload_bytes.into()),
            ]),
        ),
        ("steady", run.steady.as_ref().map_or(Json::Null, window)),
        ("backlog", run.backlog.as_ref().map_or(Json::Null, backlog)),
        ("delayed", run.delayed.as_ref().map_or(Json::Null, delayed)),
        (
            "checks",
            Json::Arr(checks(run).into_iter().map(check).collect()),
        ),
    ])
}
