//! The Pareto plot of section 4 (SVG): measured step time against bytes
//! kept, for the plans of the budget sweep (a line, in bytes order) and the
//! hand policies (labelled points).
//!
//! Invariant: points are medians over rounds as measured; nothing is fitted.

use crate::planner::Frontier;
use plotters::prelude::*;
use remat_reference::numbers::in_mib;
use std::path::Path;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("pareto plot: {e:?}")
}

pub fn draw(path: &Path, f: &Frontier) -> Result<(), String> {
    let mut line: Vec<(f64, f64)> = f
        .sweep
        .iter()
        .map(|&i| (in_mib(f.plans[i].bytes), f.plans[i].median() * 1e3))
        .collect();
    line.sort_by(|a, b| a.0.total_cmp(&b.0));
    let hand: Vec<(String, f64, f64)> = f
        .hand
        .iter()
        .map(|h| (h.label.replace('`', ""), in_mib(h.bytes), h.median() * 1e3))
        .collect();
    let xs = line.iter().map(|p| p.0).chain(hand.iter().map(|h| h.1));
    let ys = line.iter().map(|p| p.1).chain(hand.iter().map(|h| h.2));
    let (x0, x1) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let (y0, y1) = ys.fold((f64::MAX, f64::MIN), |(a, b), y| (a.min(y), b.max(y)));
    let (xpad, ypad) = ((x1 - x0).max(1e-3) * 0.08, (y1 - y0).max(1e-3) * 0.15);

    let root = SVGBackend::new(path, (760, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{} config: step time against bytes kept (medians of {} rounds)",
                f.config, f.rounds
            ),
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((x0 - xpad)..(x1 + xpad), (y0 - ypad)..(y1 + ypad))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("bytes kept at the forward→backward point (MiB)")
        .y_desc("forward + backward (ms)")
        .draw()
        .map_err(err)?;
    let blue = RGBColor(40, 110, 190);
    chart
        .draw_series(LineSeries::new(line.iter().copied(), blue.stroke_width(2)))
        .map_err(err)?
        .label("planner, budgets from the least bytes to none's")
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], blue.stroke_width(2)));
    chart
        .draw_series(line.iter().map(|&p| Circle::new(p, 4, blue.filled())))
        .map_err(err)?;
    let red = RGBColor(200, 50, 40);
    chart
        .draw_series(hand.iter().map(|(name, x, y)| {
            EmptyElement::at((*x, *y))
                + Rectangle::new([(-5, -5), (5, 5)], red.filled())
                + Text::new(name.clone(), (8, -16), ("sans-serif", 14).into_font())
        }))
        .map_err(err)?
        .label("hand policies")
        .legend(move |(x, y)| Rectangle::new([(x + 4, y - 5), (x + 14, y + 5)], red.filled()));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}
