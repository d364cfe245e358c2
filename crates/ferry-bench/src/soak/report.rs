//! The soak's reports: `soak.json` (every sample and the verdict), `soak.md` (a table per
//! interval group and the verdict) and two charts — `soak-resources.svg` (memory, open
//! files and disk over time) and `soak-latency.svg` (end-to-end p50 / p99 / p99.9 over time).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, anyhow};
use plotters::prelude::*;

use super::{Sample, SoakReport};

pub fn write(report: &SoakReport, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
    std::fs::write(out.join("soak.json"), serde_json::to_string_pretty(report)?)?;
    std::fs::write(out.join("soak.md"), markdown(report))?;
    resources_chart(report, &out.join("soak-resources.svg"))?;
    latency_chart(report, &out.join("soak-latency.svg"))?;
    Ok(())
}

/// One progress line per sample, for the terminal.
pub fn sample_line(s: &Sample) -> String {
    let p99 = s
        .latency
        .map_or("-".to_owned(), |l| format!("{:.2}", l.p99_ms));
    format!(
        "{:>7.0}s  rss {:>7.1} MiB  files {:>4}  disk {:>7.1} MiB  p99 {:>7} ms  \
         published {:>9}  outstanding {:>6}  dead {:>6}",
        s.at_secs,
        s.resources.rss_mib,
        s.resources.open_files,
        s.resources.disk_mib,
        p99,
        s.published,
        s.outstanding,
        s.dead_lettered,
    )
}

pub fn markdown(r: &SoakReport) -> String {
    let mut md = String::new();
    let t = &r.totals;
    let _ = writeln!(md, "**{}**\n", r.verdict());
    let _ = writeln!(
        md,
        "{} at {} msgs/s of {} B for {:.0} s, {} workers.\n",
        r.url, r.rate, r.message_size, r.duration_secs, r.workers
    );
    let _ = writeln!(
        md,
        "| published | acked | dead-lettered | expected dead | nacks | rejects | redeliveries | lost | misplaced |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let _ = writeln!(
        md,
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
        t.published,
        t.acked,
        t.dead_lettered,
        t.expected_dead_letters,
        t.nacked,
        t.rejected,
        t.redelivered,
        t.lost,
        t.misplaced
    );
    if let Some(l) = r.latency {
        let _ = writeln!(
            md,
            "End-to-end latency over the run: p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms.\n",
            l.p50_ms, l.p99_ms, l.p999_ms, l.max_ms
        );
    }
    let _ = writeln!(
        md,
        "| quantity | early (2nd fifth) | late (last fifth) | peak | bounded |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---|");
    for g in &r.growth {
        let _ = writeln!(
            md,
            "| {} | {:.1} | {:.1} | {:.1} | {} |",
            g.quantity,
            g.early,
            g.late,
            g.peak,
            if g.bounded { "yes" } else { "**no**" }
        );
    }
    let _ = writeln!(
        md,
        "\n| at | RSS MiB | open files | disk MiB | p50 ms | p99 ms | p99.9 ms | outstanding |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|---:|");
    // About twenty rows whatever the run's length.
    let step = (r.samples.len() / 20).max(1);
    for s in r.samples.iter().step_by(step) {
        let (p50, p99, p999) = s.latency.map_or((f64::NAN, f64::NAN, f64::NAN), |l| {
            (l.p50_ms, l.p99_ms, l.p999_ms)
        });
        let _ = writeln!(
            md,
            "| {:.0} s | {:.1} | {} | {:.1} | {:.2} | {:.2} | {:.2} | {} |",
            s.at_secs,
            s.resources.rss_mib,
            s.resources.open_files,
            s.resources.disk_mib,
            p50,
            p99,
            p999,
            s.outstanding
        );
    }
    md
}

/// A line of a chart: its name, colour and how it reads a value.
type Line<T> = (&'static str, &'static RGBColor, fn(&T) -> f64);

fn plot_error<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("{e:?}")
}

/// Three panels sharing the time axis, each on its own scale.
fn resources_chart(r: &SoakReport, path: &Path) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (900, 780)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let panels = root.split_evenly((3, 1));
    let end = r.samples.last().map_or(1.0, |s| s.at_secs).max(1.0);
    let series: [Line<Sample>; 3] = [
        ("resident memory (MiB)", &BLUE, |s| s.resources.rss_mib),
        ("open files", &RED, |s| s.resources.open_files as f64),
        ("disk used (MiB)", &GREEN, |s| s.resources.disk_mib),
    ];
    for (panel, (title, color, value)) in panels.iter().zip(series) {
        let top = r.samples.iter().map(value).fold(1.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(panel)
            .caption(title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..end, 0f64..top)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .draw()
            .map_err(plot_error)?;
        chart
            .draw_series(LineSeries::new(
                r.samples.iter().map(|s| (s.at_secs, value(s))),
                color,
            ))
            .map_err(plot_error)?;
    }
    root.present().map_err(plot_error)?;
    Ok(())
}

fn latency_chart(r: &SoakReport, path: &Path) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let end = r.samples.last().map_or(1.0, |s| s.at_secs).max(1.0);
    let top = r
        .samples
        .iter()
        .filter_map(|s| s.latency.map(|l| l.p999_ms))
        .fold(1.0, f64::max)
        * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption("end-to-end latency over time (ms)", ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..end, 0f64..top)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("ms")
        .draw()
        .map_err(plot_error)?;
    let lines: [Line<crate::stats::Percentiles>; 3] = [
        ("p50", &GREEN, |l| l.p50_ms),
        ("p99", &BLUE, |l| l.p99_ms),
        ("p99.9", &RED, |l| l.p999_ms),
    ];
    for (name, color, value) in lines {
        chart
            .draw_series(LineSeries::new(
                r.samples
                    .iter()
                    .filter_map(|s| s.latency.as_ref().map(|l| (s.at_secs, value(l)))),
                color,
            ))
            .map_err(plot_error)?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(plot_error)?;
    root.present().map_err(plot_error)?;
    Ok(())
}
