//! The one table, from the run's figures; the checks are in `checks.rs`, the JSON in
//! `json.rs`.

use comfy_table::{CellAlignment, Table};
use ferry_storage::Durability;

use crate::figures;

use super::checks::checks;
use super::device::{DeviceLimits, SyncLoop};
use super::machine::Machine;
use super::reopen::ReopenResult;
use super::storage::{BATCH_RECORDS, CellResult, Driver};

pub struct Run {
    pub machine: Machine,
    pub quick: bool,
    pub cell_seconds: f64,
    pub device_seconds: f64,
    /// Measured first; the checks use these.
    pub device: DeviceLimits,
    /// Measured again at the end, only to show drift.
    pub device_end: DeviceLimits,
    /// Only the cells that were run (`--only` may leave some out).
    pub cells: Vec<CellResult>,
    /// `None` with `--no-reopen`.
    pub reopen: Option<ReopenResult>,
}

impl Run {
    pub fn cell(
        &self,
        durability: Durability,
        record_bytes: usize,
        appenders: usize,
        driver: Driver,
        records_per_append: usize,
    ) -> Option<&CellResult> {
        self.cells.iter().find(|r| {
            r.cell.durability == durability
                && r.cell.record_bytes == record_bytes
                && r.cell.appenders == appenders
                && r.cell.driver == driver
                && r.cell.records_per_append == records_per_append
        })
    }
}

/// Printed under the table: what the `xN` of a case means for each driver, and what a batched
/// case's `/append` means.
pub fn legend() -> String {
    format!(
        "\
note: xN = N appends in flight, in both drivers; latency is submit to completion of an append.
  threads:   N OS threads, each looping on the blocking Log::append.
  pipelined: N logical appenders and no thread of their own: each Log::append_then callback
             (on the log's writer or completer thread) records its latency and submits that
             appender's next append, until the stop flag; then all N are awaited.
  {BATCH_RECORDS}/append: each append carries {BATCH_RECORDS} records (a producer's batch; else 1); \
records/s and MB/s count records, latency is per append."
    )
}

/// Thousands separators: record rates are read at a glance.
pub fn count(v: f64) -> String {
    figures::grouped(v, ',')
}

/// Counts for big rates, decimals for small ones (a lone fdatasync from a segment roll is
/// 0.5/s, not 0).
fn rate(v: f64) -> String {
    if v >= 100.0 { count(v) } else { num(v) }
}

/// Three significant-ish digits without scientific notation.
pub fn num(v: f64) -> String {
    figures::three_digits(v)
}

fn device_row(table: &mut Table, label: &str, case: &str, l: &SyncLoop, note: String) {
    table.add_row(vec![
        label.to_string(),
        case.to_string(),
        "-".into(),
        num(l.mb_per_sec()),
        count(l.cycles_per_sec()),
        num(l.fdatasync_us(0.5)),
        num(l.fdatasync_us(0.99)),
        note,
    ]);
}

pub fn table(run: &Run) -> Table {
    let mut table = Table::new();
    table.load_preset(comfy_table::presets::ASCII_MARKDOWN);
    table.set_header(vec![
        "",
        "case",
        "records/s",
        "MB/s",
        "fsyncs/s",
        "p50 us",
        "p99 us",
        "notes",
    ]);
    for (label, d) in [
        ("device, start", &run.device),
        ("device, end", &run.device_end),
    ] {
        device_row(
            &mut table,
            label,
            "4 KiB append + fdatasync",
            &d.small,
            format!(
                "p50/p99 of the fdatasync call alone; {} cycles in {:.1} s",
                d.small.cycles,
                d.small.elapsed.as_secs_f64()
            ),
        );
        device_row(
            &mut table,
            label,
            "64 KiB append + fdatasync",
            &d.group,
            format!(
                "{} MiB in {:.1} s; a full group of 64 x 1 KiB records",
                (d.group.cycles * d.group.block_bytes as u64) >> 20,
                d.group.elapsed.as_secs_f64()
            ),
        );
        device_row(
            &mut table,
            label,
            "1 MiB append + fdatasync",
            &d.sequential,
            format!(
                "{} MiB in {:.1} s",
                d.sequential.cycles,
                d.sequential.elapsed.as_secs_f64()
            ),
        );
    }
    for r in &run.cells {
        table.add_row(vec![
            format!("log {}", r.cell.durability_name()),
            r.cell.case_name(),
            count(r.records_per_sec()),
            num(r.mb_per_sec()),
            rate(r.fsyncs_per_sec()),
            num(r.latency_us(0.5)),
            num(r.latency_us(0.99)),
            if r.fsyncs == 0 {
                "no fdatasync in the window".to_string()
            } else if r.cell.records_per_append == 1 {
                format!(
                    "{:.1} records/fdatasync",
                    r.records as f64 / r.fsyncs as f64
                )
            } else {
                format!(
                    "{:.1} records/fdatasync ({:.1} appends)",
                    r.records as f64 / r.fsyncs as f64,
                    r.appends as f64 / r.fsyncs as f64
                )
            },
        ]);
    }
    reopen_row(&mut table, run);
    for c in checks(run) {
        table.add_row(vec![
            c.label(),
            c.rule.clone(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            c.summary(),
        ]);
    }
    for column in 2..7 {
        if let Some(col) = table.column_mut(column) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

fn reopen_row(table: &mut Table, run: &Run) {
    let Some(re) = &run.reopen else {
        table.add_row(vec![
            "reopen".to_string(),
            "unclean stop".to_string(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "not run (--no-reopen)".into(),
        ]);
        return;
    };
    let open = re.open_time.as_secs_f64();
    table.add_row(vec![
        "reopen".to_string(),
        format!(
            "unclean stop, {} MiB log{}",
            re.target_bytes >> 20,
            if run.quick { " (--quick)" } else { "" }
        ),
        "-".into(),
        num(re.scanned_bytes as f64 / 1e6 / open),
        "-".into(),
        "-".into(),
        "-".into(),
        format!(
            "Log::open {open:.3} s; scanned {} MiB of {} MiB in {} segment(s); {} of {} acknowledged records recovered",
            re.scanned_bytes >> 20,
            re.log_bytes >> 20,
            re.segments,
            re.recovered,
            re.acknowledged
        ),
    ]);
}
