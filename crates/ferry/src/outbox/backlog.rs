//! [`Backlog`]: how far the relay is behind, as a value and as gauges.

use std::time::Duration;

use super::table::TableName;

/// Unpublished rows of one outbox table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Backlog {
    pub rows: u64,
    /// Age of the oldest unpublished row; zero when there is none.
    pub oldest_age: Duration,
}

/// Gauge: unpublished rows, labelled by `table`.
pub const UNPUBLISHED_ROWS: &str = "ferry_outbox_unpublished_rows";
/// Gauge: age in seconds of the oldest unpublished row, labelled by `table`.
pub const OLDEST_UNPUBLISHED_AGE: &str = "ferry_outbox_oldest_unpublished_age_seconds";
/// Counter: rows published, labelled by `table`.
pub const PUBLISHED: &str = "ferry_outbox_published_total";
/// Counter: failed publish attempts, labelled by `table`.
pub const PUBLISH_FAILURES: &str = "ferry_outbox_publish_failures_total";

impl Backlog {
    /// From the count and the oldest `created_at` (ms), as of `now` (ms).
    pub(crate) fn from_oldest(rows: u64, oldest_ms: Option<i64>, now_ms: i64) -> Backlog {
        let age = oldest_ms.map_or(0, |oldest| now_ms.saturating_sub(oldest).max(0) as u64);
        Backlog {
            rows,
            oldest_age: Duration::from_millis(if rows == 0 { 0 } else { age }),
        }
    }

    pub(crate) fn record(&self, table: &TableName) {
        let label = table.as_str().to_owned();
        metrics::gauge!(UNPUBLISHED_ROWS, "table" => label.clone()).set(self.rows as f64);
        metrics::gauge!(OLDEST_UNPUBLISHED_AGE, "table" => label)
            .set(self.oldest_age.as_secs_f64());
    }
}
