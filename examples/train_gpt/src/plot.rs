//! The two SVG plots: what each policy saves for backward (per layer) with
//! its step time, and the loss curves of every policy on one chart.
//!
//! Invariant: plots show the children's measurements as they are; the only
//! transformation is the training curve's running mean (stated on the plot).

use crate::options::policy_name;
use crate::protocol::RunResult;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor;
use remat_reference::model::ModelPolicy;
use std::path::Path;

type Failure = String;

fn err<E: std::fmt::Debug>(e: E) -> Failure {
    format!("plot: {e:?}")
}

/// Steps in the training curve's running mean: at least 20, and 1/40 of the run.
fn window(steps: usize) -> usize {
    (steps / 40).max(20)
}

const OUTSIDE: RGBColor = RGBColor(170, 170, 170);
const LAYER: [RGBColor; 2] = [RGBColor(49, 110, 180), RGBColor(110, 160, 215)];

fn policy_color(i: usize) -> RGBColor {
    [
        RGBColor(200, 60, 50),
        RGBColor(40, 120, 190),
        RGBColor(60, 160, 70),
        RGBColor(20, 20, 20),
        RGBColor(150, 70, 170),
    ][i % 5]
}

/// The series' legend in the upper right corner, on a light box.
fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    font_size: u32,
) -> Result<(), Failure> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", font_size))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

/// A label centred just above the bar in slot `i`, whose top is at `y`.
fn above_bar(text: String, i: usize, y: f64) -> Text<'static, (SegmentValue<usize>, f64), String> {
    Text::new(
        text,
        (SegmentValue::CenterOf(i), y),
        ("sans-serif", 13)
            .into_font()
            .color(&BLACK)
            .pos(text_anchor::Pos::new(
                text_anchor::HPos::Center,
                text_anchor::VPos::Bottom,
            )),
    )
}

/// Bytes saved for backward per policy, stacked by layer, and the median
/// step time per policy, side by side.
pub fn memory_and_time(path: &Path, results: &[RunResult], title: &str) -> Result<(), Failure> {
    let root = SVGBackend::new(path, (1100, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, ("sans-serif", 20)).map_err(err)?;
    let (left, right) = root.split_horizontally(620);
    let n = results.len();
    // `a..b` segments into b - a + 1 slots: one per policy (two for a
    // single policy, since an empty range cannot be drawn).
    let slots = || (0..n.max(2) - 1).into_segmented();
    let names = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => results
            .get(*i)
            .map(|r| policy_name(r.policy).to_string())
            .unwrap_or_default(),
        SegmentValue::Last => String::new(),
    };

    let kib = |b: i64| b as f64 / 1024.0;
    let top = results
        .iter()
        .map(|r| kib(r.saved_total))
        .fold(1.0, f64::max)
        * 1.2;
    let mut chart = ChartBuilder::on(&left)
        .caption("saved for backward after the forward", ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(slots(), 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&names)
        .y_desc("KiB")
        .draw()
        .map_err(err)?;
    let mut legend_outside = true;
    let mut legend_layer = true;
    for (i, r) in results.iter().enumerate() {
        let mut y0 = 0.0;
        let segments = std::iter::once(r.saved_outside)
            .chain(r.saved_layers.iter().map(|(_, b)| *b))
            .enumerate();
        for (j, bytes) in segments {
            let y1 = y0 + kib(bytes);
            let color = if j == 0 { OUTSIDE } else { LAYER[(j - 1) % 2] };
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), y0),
                    (SegmentValue::Exact(i + 1), y1),
                ],
                color.filled(),
            );
            bar.set_margin(0, 0, 18, 18);
            let series = chart.draw_series(std::iter::once(bar)).map_err(err)?;
            if j == 0 && legend_outside {
                legend_outside = false;
                series
                    .label("outside checkpoints (embeddings, head, loss, checkpoint inputs; all of `none`)")
                    .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], OUTSIDE.filled()));
            } else if j > 0 && bytes > 0 && legend_layer {
                legend_layer = false;
                series
                    .label("kept by checkpoint layers.i (one segment each, layers.0 lowest)")
                    .legend(|(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 12, y + 5)], LAYER[0].filled())
                    });
            }
            y0 = y1;
        }
        chart
            .draw_series(std::iter::once(above_bar(
                format!("{:.1} KiB", kib(r.saved_total)),
                i,
                kib(r.saved_total) + top * 0.02,
            )))
            .map_err(err)?;
    }
    legend(&mut chart, 11)?;

    let base = results
        .iter()
        .find(|r| r.policy == ModelPolicy::None)
        .map(|r| r.median_step_ns() as f64)
        .filter(|&ns| ns > 0.0);
    let ms = |r: &RunResult| r.median_step_ns() as f64 / 1e6;
    let top = results.iter().map(ms).fold(0.001, f64::max) * 1.2;
    let mut chart = ChartBuilder::on(&right)
        .caption(
            "median step time (forward + backward + AdamW); x: ratio to none",
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(slots(), 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&names)
        .y_desc("ms")
        .draw()
        .map_err(err)?;
    for (i, r) in results.iter().enumerate() {
        let mut bar = Rectangle::new(
            [
                (SegmentValue::Exact(i), 0.0),
                (SegmentValue::Exact(i + 1), ms(r)),
            ],
            policy_color(i).mix(0.8).filled(),
        );
        bar.set_margin(0, 0, 18, 18);
        chart.draw_series(std::iter::once(bar)).map_err(err)?;
        chart
            .draw_series(base.map(|base| {
                above_bar(
                    format!("{:.2}x", r.median_step_ns() as f64 / base),
                    i,
                    ms(r) + top * 0.02,
                )
            }))
            .map_err(err)?;
    }
    root.present().map_err(err)
}

/// The training loss (running mean) and the validation loss of every policy
/// on one chart: thick lines under thin ones, so coinciding curves show.
pub fn losses(path: &Path, results: &[RunResult], title: &str) -> Result<(), Failure> {
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let steps = results
        .iter()
        .map(|r| r.step_loss.len())
        .max()
        .unwrap_or(1)
        .max(2);
    let window = window(steps);
    let smooth: Vec<Vec<(f64, f64)>> = results
        .iter()
        .map(|r| {
            (0..r.step_loss.len())
                .map(|i| {
                    let from = (i + 1).saturating_sub(window);
                    let w = &r.step_loss[from..=i];
                    ((i + 1) as f64, w.iter().sum::<f64>() / w.len() as f64)
                })
                .collect()
        })
        .collect();
    let all = smooth
        .iter()
        .flatten()
        .map(|p| p.1)
        .chain(results.iter().flat_map(|r| r.evals.iter().map(|e| e.2)));
    let (lo, hi) = all.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    let (lo, hi) = if lo <= hi { (lo, hi) } else { (0.0, 1.0) };
    let pad = (hi - lo).max(0.1) * 0.05;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(1.0..steps as f64, (lo - pad)..(hi + pad))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("step")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_desc("loss (nats per byte)")
        .draw()
        .map_err(err)?;
    let widths = [9, 6, 3, 1];
    for (i, r) in results.iter().enumerate() {
        let color = policy_color(i);
        let width = widths[i % 4];
        chart
            .draw_series(LineSeries::new(
                smooth[i].iter().copied(),
                color.stroke_width(width),
            ))
            .map_err(err)?
            .label(format!(
                "{}: training (mean of the last {window} steps)",
                policy_name(r.policy)
            ))
            .legend(move |(x, y)| {
                PathElement::new([(x, y), (x + 20, y)], color.stroke_width(width))
            });
        chart
            .draw_series(DashedLineSeries::new(
                r.evals.iter().map(|e| (e.0 as f64, e.2)),
                8,
                4,
                color.stroke_width(1),
            ))
            .map_err(err)?;
        chart
            .draw_series(
                r.evals
                    .iter()
                    .map(|e| Circle::new((e.0 as f64, e.2), width / 2 + 3, color.filled())),
            )
            .map_err(err)?
            .label(format!(
                "{}: validation (held-out bytes)",
                policy_name(r.policy)
            ))
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
    }
    legend(&mut chart, 12)?;
    root.present().map_err(err)
}
