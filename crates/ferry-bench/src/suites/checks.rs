//! The target checks, each a ratio of two figures of the same run. Checks (1) to (3) are
//! evaluated once per driver with one record per append, and (1), (1b) and (2) once more on
//! the pipelined cells with `BATCH_RECORDS` records per append; a check whose cell was not run
//! (`--only`, `--no-reopen`) says so instead of passing or missing.

use ferry_storage::Durability;

use super::report::{Run, count};
use super::storage::{BATCH_RECORDS, Driver, batch_suffix};

/// The (driver, records per append) variants of a cell check.
const SINGLE: [(Driver, usize); 2] = [(Driver::Threads, 1), (Driver::Pipelined, 1)];
const WITH_BATCHED: [(Driver, usize); 3] = [
    (Driver::Threads, 1),
    (Driver::Pipelined, 1),
    (Driver::Pipelined, BATCH_RECORDS),
];

/// A target (pass or miss), or a figure shown only for information.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Target,
    Info,
}

pub struct Check {
    /// "1", "1b", "2", …
    pub id: &'static str,
    /// The driver of the cell checked; `None` for checks that involve no cell.
    pub driver: Option<Driver>,
    /// Records per append of the cell checked; `None` for checks that involve no cell.
    pub records_per_append: Option<usize>,
    pub kind: Kind,
    pub rule: String,
    /// measured / reference; `None` when the cell it needs was not run.
    pub ratio: Option<f64>,
    /// `None` when not run, and always for `Kind::Info`.
    pub pass: Option<bool>,
    pub detail: String,
}

impl Check {
    /// The table's first column, e.g. `check (2) pipelined` or
    /// `check (1) pipelined, 16/append`.
    pub fn label(&self) -> String {
        match self.driver {
            Some(d) => format!(
                "check ({}) {}{}",
                self.id,
                d.name(),
                batch_suffix(self.records_per_append.unwrap_or(1))
            ),
            None => format!("check ({})", self.id),
        }
    }

    pub fn verdict(&self) -> &'static str {
        match (self.kind, self.ratio, self.pass) {
            (_, None, _) => "not run",
            (Kind::Info, Some(_), _) => "INFO",
            (Kind::Target, Some(_), Some(true)) => "PASS",
            (Kind::Target, Some(_), Some(false)) => "MISS",
            (Kind::Target, Some(_), None) => "n/a",
        }
    }

    /// The notes column: verdict, ratio and the two figures.
    pub fn summary(&self) -> String {
        match self.ratio {
            Some(r) => format!("{}: ratio {r:.2} ({})", self.verdict(), self.detail),
            None => format!("{} ({})", self.verdict(), self.detail),
        }
    }
}

/// Builds one check of a cell figure against a reference: `None` figure means not run.
fn check(
    id: &'static str,
    (driver, per_append): (Driver, usize),
    kind: Kind,
    rule: String,
    measured: Option<(f64, f64)>,
    pass: impl Fn(f64) -> bool,
    detail: impl Fn(f64, f64) -> String,
) -> Check {
    Check {
        id,
        driver: Some(driver),
        records_per_append: Some(per_append),
        kind,
        rule,
        ratio: measured.map(|(m, r)| m / r),
        pass: match kind {
            Kind::Target => measured.map(|(m, r)| pass(m / r)),
            Kind::Info => None,
        },
        detail: measured.map_or_else(|| "cell not run".to_string(), |(m, r)| detail(m, r)),
    }
}

pub fn checks(run: &Run) -> Vec<Check> {
    let seq = run.device.sequential.mb_per_sec();
    let group = run.device.group.mb_per_sec();
    let raw_p50 = run.device.small.fdatasync_us(0.5);
    let fsync = Durability::Fsync;
    let mut out = Vec::new();

    // e.g. `1 KiB x64 pipelined, 16/append`, as in the case column.
    let case = |size: &str, n: usize, d: Driver, per_append: usize| {
        format!("{size} x{n} {}{}", d.name(), batch_suffix(per_append))
    };
    for (d, per) in WITH_BATCHED {
        let c1 = run
            .cell(fsync, 1024, 64, d, per)
            .map(|c| (c.mb_per_sec(), seq));
        out.push(check(
            "1",
            (d, per),
            Kind::Target,
            format!(
                "Fsync {} MB/s >= 0.60 x 1 MiB append + fdatasync MB/s",
                case("1 KiB", 64, d, per)
            ),
            c1,
            |ratio| ratio >= 0.60,
            |mb, seq| format!("{mb:.1} / {seq:.1} MB/s"),
        ));
    }
    for (d, per) in WITH_BATCHED {
        let c1b = run
            .cell(fsync, 1024, 64, d, per)
            .map(|c| (c.mb_per_sec(), group));
        out.push(check(
            "1b",
            (d, per),
            Kind::Info,
            format!(
                "Fsync {} MB/s vs 64 KiB append + fdatasync MB/s (no threshold)",
                case("1 KiB", 64, d, per)
            ),
            c1b,
            |_| true,
            |mb, group| format!("{mb:.1} / {group:.1} MB/s"),
        ));
    }
    for (d, per) in WITH_BATCHED {
        let c2 = run
            .cell(fsync, 128, 64, d, per)
            .map(|c| (c.records_per_sec(), 400_000.0));
        out.push(check(
            "2",
            (d, per),
            Kind::Target,
            format!("Fsync {} >= 400,000 records/s", case("128 B", 64, d, per)),
            c2,
            |ratio| ratio >= 1.0,
            |r, target| format!("{} / {} records/s", count(r), count(target)),
        ));
    }
    for (d, per) in SINGLE {
        let c3 = run
            .cell(fsync, 128, 1, d, per)
            .map(|c| (c.latency_us(0.5), raw_p50));
        out.push(check(
            "3",
            (d, per),
            Kind::Target,
            format!(
                "Fsync {} p50 append <= 1.3 x raw fdatasync p50",
                case("128 B", 1, d, per)
            ),
            c3,
            |ratio| ratio <= 1.3,
            |p, raw| format!("{p:.1} / {raw:.1} us"),
        ));
    }
    let c4 = run.reopen.as_ref();
    out.push(Check {
        id: "4",
        driver: None,
        records_per_append: None,
        kind: Kind::Target,
        rule: "reopen after unclean stop < 1 s".into(),
        ratio: c4.map(|re| re.open_time.as_secs_f64()),
        pass: c4.map(|re| re.open_time.as_secs_f64() < 1.0),
        detail: c4.map_or_else(
            || "--no-reopen".to_string(),
            |re| {
                format!(
                    "Log::open {:.3} s on a {} MiB log{}",
                    re.open_time.as_secs_f64(),
                    re.log_bytes >> 20,
                    if run.quick {
                        " (--quick; target is for 1 GiB)"
                    } else {
                        ""
                    }
                )
            },
        ),
    });
    out
}
