//! Whether a resource kept growing over a soak. A broker at a steady load should settle:
//! memory, descriptors and disk rise while caches, segments and retry timers fill, then stay
//! level. So the verdict compares the level late in the run with the level early in the
//! run, after a warm-up: a quantity is bounded when the late level is within a tolerance of
//! the early one. A leak of any steady rate fails it given a long enough run, and noise
//! (a compaction, a segment roll) passes it.

use serde::Serialize;

/// How much a quantity may rise between the early and the late window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tolerance {
    /// Relative rise allowed (0.25 = a quarter).
    pub relative: f64,
    /// Absolute rise always allowed, for quantities that start small.
    pub absolute: f64,
}

/// The verdict on one quantity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Growth {
    pub quantity: String,
    /// Mean over the early window (the second fifth of the run).
    pub early: f64,
    /// Mean over the late window (the last fifth).
    pub late: f64,
    /// Highest reading over the run.
    pub peak: f64,
    pub bounded: bool,
}

/// Judges `series` (one reading per sample, in time order). The first fifth is warm-up and
/// not judged; fewer than five readings cannot be judged and count as bounded with
/// `early == late == peak`.
pub fn judge(quantity: &str, series: &[f64], tolerance: Tolerance) -> Growth {
    let peak = series.iter().copied().fold(0.0, f64::max);
    let fifth = series.len() / 5;
    if fifth == 0 {
        let last = series.last().copied().unwrap_or(0.0);
        return Growth {
            quantity: quantity.into(),
            early: last,
            late: last,
            peak,
            bounded: true,
        };
    }
    let mean = |window: &[f64]| window.iter().sum::<f64>() / window.len() as f64;
    let early = mean(&series[fifth..2 * fifth]);
    let late = mean(&series[series.len() - fifth..]);
    Growth {
        quantity: quantity.into(),
        early,
        late,
        peak,
        bounded: late <= early * (1.0 + tolerance.relative) + tolerance.absolute,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOL: Tolerance = Tolerance {
        relative: 0.25,
        absolute: 8.0,
    };

    #[test]
    fn a_quantity_that_settles_after_warm_up_is_bounded() {
        // Rises fast during warm-up, then wobbles around 100.
        let series: Vec<f64> = (0..60)
            .map(|i| {
                if i < 10 {
                    10.0 * i as f64
                } else {
                    100.0 + (i % 3) as f64
                }
            })
            .collect();
        let g = judge("rss", &series, TOL);
        assert!(g.bounded, "{g:?}");
        assert_eq!(g.peak, 102.0);
    }

    #[test]
    fn a_steady_leak_is_caught() {
        // Two units per sample on top of 100: the late window is ~70 % above the early one.
        let series: Vec<f64> = (0..60).map(|i| 100.0 + 2.0 * i as f64).collect();
        let g = judge("rss", &series, TOL);
        assert!(!g.bounded, "{g:?}");
        assert!(g.late > g.early);
    }

    #[test]
    fn small_quantities_may_rise_by_the_absolute_slack() {
        let mut series = vec![2.0; 40];
        series[32..].fill(9.0);
        assert!(judge("open files", &series, TOL).bounded);
        series[32..].fill(12.0);
        assert!(!judge("open files", &series, TOL).bounded);
    }

    #[test]
    fn too_few_readings_are_not_judged() {
        let g = judge("disk", &[1.0, 50.0, 100.0], TOL);
        assert!(g.bounded);
        assert_eq!((g.early, g.late, g.peak), (100.0, 100.0, 100.0));
    }
}
