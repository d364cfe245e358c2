//! SVG charts per workload: `throughput-<workload>.svg` (publish and consume bars per
//! target) and `latency-<workload>.svg` (the end-to-end latency percentile curve per target,
//! on a "nines" axis so p99.9 is as far from p99 as p99 is from p90).

use std::path::Path;

use anyhow::{Context, anyhow};
use plotters::prelude::*;

use crate::driver::{Figures, Outcome};
use crate::{Results, WorkloadResult};

const SIZE: (u32, u32) = (900, 500);

pub fn write(results: &Results, out: &Path) -> anyhow::Result<()> {
    for w in &results.workloads {
        let ran: Vec<(&str, &Figures)> = w
            .targets
            .iter()
            .filter_map(|t| match &t.outcome {
                Outcome::Ran(f) => Some((t.target.as_str(), f.as_ref())),
                _ => None,
            })
            .collect();
        let throughput = out.join(format!("throughput-{}.svg", w.workload.name));
        throughput_chart(w, &ran, &throughput)
            .with_context(|| format!("draw {}", throughput.display()))?;
        let latency = out.join(format!("latency-{}.svg", w.workload.name));
        latency_chart(w, &ran, &latency).with_context(|| format!("draw {}", latency.display()))?;
    }
    Ok(())
}

fn plot_error<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("{e:?}")
}

/// One series of bars: its label, the span of its bar within a target's slot, its colour
/// and the figure it shows.
type BarSeries = (&'static str, (f64, f64), RGBColor, fn(&Figures) -> f64);

/// Bars: for target `i`, publish at `[i+0.1, i+0.45]` and consume at `[i+0.55, i+0.9]`.
fn throughput_chart(
    w: &WorkloadResult,
    ran: &[(&str, &Figures)],
    path: &Path,
) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let top = ran
        .iter()
        .map(|(_, f)| f.publish.msgs_per_sec.max(f.consume.msgs_per_sec))
        .fold(1.0, f64::max)
        * 1.15;
    let names: Vec<String> = ran.iter().map(|(n, _)| n.to_string()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{}: throughput (msgs/s)", w.workload.name),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..ran.len().max(1) as f64, 0f64..top)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(ran.len().max(1) * 2 + 1)
        .x_label_formatter(&|x| {
            // Label the middle of each target's pair of bars.
            let i = x.floor();
            if (x - i - 0.5).abs() < 0.26 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc("msgs/s")
        .y_label_formatter(&|v| crate::report::num(*v))
        .draw()
        .map_err(plot_error)?;
    let series: [BarSeries; 2] = [
        ("publish", (0.1, 0.45), BLUE, |f| f.publish.msgs_per_sec),
        ("consume", (0.55, 0.9), GREEN, |f| f.consume.msgs_per_sec),
    ];
    for (label, (from, to), color, rate) in series {
        let bars: Vec<_> = ran
            .iter()
            .enumerate()
            .map(|(i, (_, f))| {
                let x = i as f64;
                Rectangle::new([(x + from, 0.0), (x + to, rate(f))], color.filled())
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(plot_error)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(plot_error)?;
    root.present().map_err(plot_error)?;
    Ok(())
}

fn latency_chart(w: &WorkloadResult, ran: &[(&str, &Figures)], path: &Path) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let curves: Vec<(&str, &[(f64, f64)])> = ran
        .iter()
        .map(|(n, f)| (*n, f.end_to_end_curve.as_slice()))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    let max_nines = curves
        .iter()
        .flat_map(|(_, c)| c.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let max_ms = curves
        .iter()
        .flat_map(|(_, c)| c.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{}: end-to-end latency", w.workload.name),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..max_nines, 0f64..max_ms)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_labels(max_nines.ceil() as usize + 1)
        .x_label_formatter(&|nines| percentile_label(*nines))
        .x_desc("percentile")
        .y_desc("latency (ms)")
        .draw()
        .map_err(plot_error)?;
    for (i, (name, curve)) in curves.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                curve.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(plot_error)?
            .label(*name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 15, y)], color.stroke_width(2)));
    }
    if !curves.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()
            .map_err(plot_error)?;
    }
    root.present().map_err(plot_error)?;
    Ok(())
}

/// `nines` as a percentile: 0 → p0, 1 → p90, 2 → p99, 3 → p99.9.
pub fn percentile_label(nines: f64) -> String {
    let percent = 100.0 * (1.0 - 10f64.powf(-nines));
    let decimals = (nines.round() as i64 - 2).clamp(0, 6) as usize;
    format!("p{percent:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nines_read_as_percentiles() {
        assert_eq!(percentile_label(0.0), "p0");
        assert_eq!(percentile_label(1.0), "p90");
        assert_eq!(percentile_label(2.0), "p99");
        assert_eq!(percentile_label(3.0), "p99.9");
        assert_eq!(percentile_label(4.0), "p99.99");
    }
}
