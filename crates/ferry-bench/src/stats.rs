//! Latency histograms and the figures read from them.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Microseconds from 1 µs to 10 minutes at three significant digits; longer values are
/// clamped rather than dropped, so an outlier still counts.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

/// The percentiles a report shows, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl Percentiles {
    /// The percentiles of a histogram of microseconds; `None` when it is empty.
    pub fn of(h: &Histogram<u64>) -> Option<Percentiles> {
        if h.is_empty() {
            return None;
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Some(Percentiles {
            count: h.len(),
            p50_ms: ms(h.value_at_quantile(0.5)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
        })
    }
}

/// Points of a latency curve for a chart: (nines, milliseconds), where nines is
/// `-log10(1 - quantile)` (1 = p90, 2 = p99, 3 = p99.9), stepping by a tenth of a nine up to
/// what the sample count can resolve, then the maximum.
pub fn curve(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let resolvable = (h.len() as f64).log10().max(0.3);
    let mut points = Vec::new();
    let mut nines = 0.0f64;
    while nines < resolvable {
        let quantile = 1.0 - 10f64.powf(-nines);
        points.push((nines, h.value_at_quantile(quantile) as f64 / 1000.0));
        nines += 0.1;
    }
    points.push((resolvable, h.max() as f64 / 1000.0));
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_recorded_values() {
        let mut h = histogram();
        for us in 1..=1000u64 {
            h.record(us * 1000).unwrap();
        }
        let p = Percentiles::of(&h).unwrap();
        assert_eq!(p.count, 1000);
        // Three significant digits: within 0.1 % of the exact value.
        assert!((p.p50_ms - 500.0).abs() <= 0.5, "{p:?}");
        assert!((p.p99_ms - 990.0).abs() <= 1.0, "{p:?}");
        assert!((p.p999_ms - 999.0).abs() <= 1.0, "{p:?}");
        assert!((p.max_ms - 1000.0).abs() <= 1.0, "{p:?}");
    }

    #[test]
    fn an_empty_histogram_has_no_percentiles_or_curve() {
        assert!(Percentiles::of(&histogram()).is_none());
        assert!(curve(&histogram()).is_empty());
    }

    #[test]
    fn the_curve_rises_to_the_maximum_over_the_resolvable_nines() {
        let mut h = histogram();
        for us in 1..=10_000u64 {
            h.record(us).unwrap();
        }
        let points = curve(&h);
        assert_eq!(points.first().unwrap().0, 0.0);
        assert!((points.last().unwrap().0 - 4.0).abs() < 1e-9);
        assert!(
            points
                .windows(2)
                .all(|w| w[0].1 <= w[1].1 && w[0].0 < w[1].0)
        );
        assert!((points.last().unwrap().1 - 10.0).abs() < 0.01);
    }
}
