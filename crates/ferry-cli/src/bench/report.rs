//! The one table, the target checks and the JSON, all from the same run's figures.

use comfy_table::{CellAlignment, Table};
use ferry_storage::Durability;

use super::device::{DeviceLimits, SyncLoop};
use super::json::{Json, obj};
use super::machine::Machine;
use super::reopen::ReopenResult;
use super::storage::{CellResult, durability_name};

pub struct Run {
    pub machine: Machine,
    pub quick: bool,
    pub cell_seconds: f64,
    pub device_seconds: f64,
    /// Measured first; the checks use these.
    pub device: DeviceLimits,
    /// Measured again at the end, only to show drift.
    pub device_end: DeviceLimits,
    pub cells: Vec<CellResult>,
    pub reopen: ReopenResult,
}

impl Run {
    fn cell(
        &self,
        durability: Durability,
        record_bytes: usize,
        appenders: usize,
    ) -> Option<&CellResult> {
        self.cells.iter().find(|r| {
            r.cell.durability == durability
                && r.cell.record_bytes == record_bytes
                && r.cell.appenders == appenders
        })
    }
}

/// A target, checked as a ratio of two figures of this run.
pub struct Check {
    pub id: u8,
    pub rule: &'static str,
    /// measured / reference; `None` when the cell it needs was not run.
    pub ratio: Option<f64>,
    pub pass: Option<bool>,
    pub detail: String,
}

pub fn checks(run: &Run) -> Vec<Check> {
    let seq = run.device.sequential.mb_per_sec();
    let raw_p50 = run.device.small.fdatasync_us(0.5);
    let fsync = Durability::Fsync;

    let c1 = run.cell(fsync, 1024, 64).map(|c| c.mb_per_sec());
    let c2 = run.cell(fsync, 128, 64).map(|c| c.records_per_sec());
    let c3 = run.cell(fsync, 128, 1).map(|c| c.latency_us(0.5));
    let open = run.reopen.open_time.as_secs_f64();
    vec![
        Check {
            id: 1,
            rule: "Fsync 1 KiB x64 MB/s >= 0.60 x seq-write-with-fdatasync MB/s",
            ratio: c1.map(|mb| mb / seq),
            pass: c1.map(|mb| mb / seq >= 0.60),
            detail: c1.map_or("not run".into(), |mb| format!("{mb:.1} / {seq:.1} MB/s")),
        },
        Check {
            id: 2,
            rule: "Fsync 128 B x64 >= 400,000 records/s",
            ratio: c2.map(|r| r / 400_000.0),
            pass: c2.map(|r| r >= 400_000.0),
            detail: c2.map_or("not run".into(), |r| {
                format!("{} / 400,000 records/s", count(r))
            }),
        },
        Check {
            id: 3,
            rule: "Fsync 128 B x1 p50 append <= 1.3 x raw fdatasync p50",
            ratio: c3.map(|p| p / raw_p50),
            pass: c3.map(|p| p <= 1.3 * raw_p50),
            detail: c3.map_or("not run".into(), |p| format!("{p:.1} / {raw_p50:.1} us")),
        },
        Check {
            id: 4,
            rule: "reopen after unclean stop < 1 s",
            ratio: Some(open),
            pass: Some(open < 1.0),
            detail: format!(
                "Log::open {open:.3} s on a {} MiB log{}",
                run.reopen.log_bytes >> 20,
                if run.quick {
                    " (--quick; target is for 1 GiB)"
                } else {
                    ""
                }
            ),
        },
    ]
}

/// Thousands separators: record rates are read at a glance.
fn count(v: f64) -> String {
    let digits = format!("{:.0}", v.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Counts for big rates, decimals for small ones (a lone fdatasync from a segment roll is
/// 0.5/s, not 0).
fn rate(v: f64) -> String {
    if v >= 100.0 { count(v) } else { num(v) }
}

/// Three significant-ish digits without scientific notation.
fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
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
            format!("{} x{}", r.cell.size_name(), r.cell.appenders),
            count(r.records_per_sec()),
            num(r.mb_per_sec()),
            rate(r.fsyncs_per_sec()),
            num(r.latency_us(0.5)),
            num(r.latency_us(0.99)),
            if r.fsyncs == 0 {
                "no fdatasync in the window".to_string()
            } else {
                format!(
                    "{:.1} records/fdatasync",
                    r.records as f64 / r.fsyncs as f64
                )
            },
        ]);
    }
    let re = &run.reopen;
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
    for c in checks(run) {
        let verdict = match c.pass {
            Some(true) => "PASS",
            Some(false) => "MISS",
            None => "n/a",
        };
        let ratio = c.ratio.map_or("-".into(), |r| format!("{r:.2}"));
        table.add_row(vec![
            format!("check ({})", c.id),
            c.rule.to_string(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            format!("{verdict}: ratio {ratio} ({})", c.detail),
        ]);
    }
    for column in 2..7 {
        if let Some(col) = table.column_mut(column) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

fn sync_loop_json(l: &SyncLoop) -> Json {
    obj(vec![
        ("block_bytes", l.block_bytes.into()),
        ("cycles", l.cycles.into()),
        ("seconds", l.elapsed.as_secs_f64().into()),
        ("fdatasyncs_per_sec", l.cycles_per_sec().into()),
        ("mb_per_sec", l.mb_per_sec().into()),
        ("fdatasync_p50_us", l.fdatasync_us(0.5).into()),
        ("fdatasync_p99_us", l.fdatasync_us(0.99).into()),
    ])
}

fn device_json(d: &DeviceLimits) -> Json {
    obj(vec![
        ("append_4k_fdatasync", sync_loop_json(&d.small)),
        ("append_1m_fdatasync", sync_loop_json(&d.sequential)),
    ])
}

pub fn json(run: &Run) -> Json {
    let m = &run.machine;
    let cells = run
        .cells
        .iter()
        .map(|r| {
            obj(vec![
                ("durability", durability_name(r.cell.durability).into()),
                ("record_bytes", r.cell.record_bytes.into()),
                ("appenders", r.cell.appenders.into()),
                ("seconds", r.elapsed.as_secs_f64().into()),
                ("records", r.records.into()),
                ("fsyncs", r.fsyncs.into()),
                ("records_per_sec", r.records_per_sec().into()),
                ("mb_per_sec", r.mb_per_sec().into()),
                ("fsyncs_per_sec", r.fsyncs_per_sec().into()),
                ("p50_us", r.latency_us(0.5).into()),
                ("p99_us", r.latency_us(0.99).into()),
            ])
        })
        .collect();
    let re = &run.reopen;
    let checks = checks(run)
        .into_iter()
        .map(|c| {
            obj(vec![
                ("id", (c.id as u64).into()),
                ("rule", c.rule.into()),
                ("ratio", c.ratio.into()),
                ("pass", c.pass.into()),
                ("detail", c.detail.into()),
            ])
        })
        .collect();
    obj(vec![
        (
            "machine",
            obj(vec![
                ("cores", m.cores.into()),
                ("cpu", m.cpu.as_str().into()),
                ("memory_gib", m.memory_gib.into()),
                ("kernel", m.kernel.as_str().into()),
                ("fs_type", m.fs_type.as_str().into()),
                ("fs_source", m.fs_source.as_str().into()),
                ("mount_point", m.mount_point.display().to_string().into()),
                ("load_1m_at_start", m.load_1m.into()),
            ]),
        ),
        ("quick", run.quick.into()),
        ("cell_seconds", run.cell_seconds.into()),
        ("device_seconds", run.device_seconds.into()),
        ("device", device_json(&run.device)),
        ("device_end", device_json(&run.device_end)),
        ("cells", Json::Arr(cells)),
        (
            "reopen",
            obj(vec![
                ("target_bytes", re.target_bytes.into()),
                ("log_bytes", re.log_bytes.into()),
                ("open_seconds", re.open_time.as_secs_f64().into()),
                ("scanned_bytes", re.scanned_bytes.into()),
                ("segments", re.segments.into()),
                ("acknowledged_records", re.acknowledged.into()),
                ("recovered_records", re.recovered.into()),
            ]),
        ),
        ("checks", Json::Arr(checks)),
    ])
}
