//! A minimal JSON value, enough to write the bench figures without another dependency, and
//! the run as a JSON document.

use std::fmt::{self, Display, Write};
use std::path::Path;

use anyhow::Context;

use super::checks::{Check, Kind, checks};
use super::device::{DeviceLimits, SyncLoop};
use super::machine::Machine;
use super::reopen::ReopenResult;
use super::report::Run;
use super::storage::{CellResult, Driver, durability_name};

pub enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(&'static str, Json)>),
}

pub fn obj(fields: Vec<(&'static str, Json)>) -> Json {
    Json::Obj(fields)
}

impl From<f64> for Json {
    fn from(v: f64) -> Json {
        Json::Num(v)
    }
}
impl From<u64> for Json {
    fn from(v: u64) -> Json {
        Json::Num(v as f64)
    }
}
impl From<usize> for Json {
    fn from(v: usize) -> Json {
        Json::Num(v as f64)
    }
}
impl From<bool> for Json {
    fn from(v: bool) -> Json {
        Json::Bool(v)
    }
}
impl From<&str> for Json {
    fn from(v: &str) -> Json {
        Json::Str(v.to_string())
    }
}
impl From<String> for Json {
    fn from(v: String) -> Json {
        Json::Str(v)
    }
}
impl<T: Into<Json>> From<Option<T>> for Json {
    fn from(v: Option<T>) -> Json {
        v.map_or(Json::Null, Into::into)
    }
}

fn write_str(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

impl Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            // JSON has no NaN or infinity.
            Json::Num(n) if !n.is_finite() => f.write_str("null"),
            Json::Num(n) => write!(f, "{n}"),
            Json::Str(s) => write_str(f, s),
            Json::Arr(items) => {
                f.write_char('[')?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_char(']')
            }
            Json::Obj(fields) => {
                f.write_char('{')?;
                for (i, (key, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write_str(f, key)?;
                    write!(f, ":{value}")?;
                }
                f.write_char('}')
            }
        }
    }
}

// The run as one JSON document: every figure of the table, plus the raw counts behind them.

fn sync_loop(l: &SyncLoop) -> Json {
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

fn device(d: &DeviceLimits) -> Json {
    obj(vec![
        ("append_4k_fdatasync", sync_loop(&d.small)),
        ("append_64k_fdatasync", sync_loop(&d.group)),
        ("append_1m_fdatasync", sync_loop(&d.sequential)),
    ])
}

fn cell(r: &CellResult) -> Json {
    obj(vec![
        ("label", r.cell.label().into()),
        ("durability", durability_name(r.cell.durability).into()),
        ("driver", r.cell.driver.name().into()),
        ("record_bytes", r.cell.record_bytes.into()),
        ("appenders", r.cell.appenders.into()),
        ("in_flight", r.cell.appenders.into()),
        ("records_per_append", r.cell.records_per_append.into()),
        ("seconds", r.elapsed.as_secs_f64().into()),
        ("appends", r.appends.into()),
        ("records", r.records.into()),
        ("fsyncs", r.fsyncs.into()),
        ("records_per_sec", r.records_per_sec().into()),
        ("mb_per_sec", r.mb_per_sec().into()),
        ("fsyncs_per_sec", r.fsyncs_per_sec().into()),
        ("p50_us", r.latency_us(0.5).into()),
        ("p99_us", r.latency_us(0.99).into()),
    ])
}

fn reopen(re: &ReopenResult) -> Json {
    obj(vec![
        ("target_bytes", re.target_bytes.into()),
        ("log_bytes", re.log_bytes.into()),
        ("open_seconds", re.open_time.as_secs_f64().into()),
        ("scanned_bytes", re.scanned_bytes.into()),
        ("segments", re.segments.into()),
        ("acknowledged_records", re.acknowledged.into()),
        ("recovered_records", re.recovered.into()),
    ])
}

fn check(c: Check) -> Json {
    obj(vec![
        ("id", c.id.into()),
        ("label", c.label().into()),
        ("driver", c.driver.map(Driver::name).into()),
        ("records_per_append", c.records_per_append.into()),
        (
            "kind",
            match c.kind {
                Kind::Target => "target",
                Kind::Info => "info",
            }
            .into(),
        ),
        ("verdict", c.verdict().into()),
        ("rule", c.rule.into()),
        ("ratio", c.ratio.into()),
        ("pass", c.pass.into()),
        ("detail", c.detail.into()),
    ])
}

/// The machine facts, as every in-process bench reports them.
pub fn machine(m: &Machine) -> Json {
    obj(vec![
        ("cores", m.cores.into()),
        ("cpu", m.cpu.as_str().into()),
        ("memory_gib", m.memory_gib.into()),
        ("kernel", m.kernel.as_str().into()),
        ("fs_type", m.fs_type.as_str().into()),
        ("fs_source", m.fs_source.as_str().into()),
        ("mount_point", m.mount_point.display().to_string().into()),
        ("load_1m_at_start", m.load_1m.into()),
    ])
}

/// Writes `document` (built only when asked for) to `path` when there is one, and says so.
pub fn write(path: Option<&Path>, document: impl FnOnce() -> Json) -> anyhow::Result<()> {
    if let Some(path) = path {
        std::fs::write(path, format!("{}\n", document()))
            .with_context(|| format!("write {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

pub fn run(run: &Run, only: &[String]) -> Json {
    obj(vec![
        ("machine", machine(&run.machine)),
        ("quick", run.quick.into()),
        ("cell_seconds", run.cell_seconds.into()),
        ("device_seconds", run.device_seconds.into()),
        (
            "only",
            Json::Arr(only.iter().map(|s| s.as_str().into()).collect()),
        ),
        ("device", device(&run.device)),
        ("device_end", device(&run.device_end)),
        ("cells", Json::Arr(run.cells.iter().map(cell).collect())),
        ("reopen", run.reopen.as_ref().map_or(Json::Null, reopen)),
        (
            "checks",
            Json::Arr(checks(run).into_iter().map(check).collect()),
        ),
    ])
}
