//! The report's pictures, drawn with `plotters` (SVG backend only) from the same run's
//! samples and written beside the report:
//!
//! - one latency picture per phase: every client's samples side by side, one strip per
//!   client, on a log scale, with its p50 marked;
//! - the cost-vs-board-size curves: bytes received per single-record change against the
//!   records on the board, and the file store's ask p50 against the rows on the board,
//!   each with its target drawn in.
//!
//! A picture that cannot be drawn is left out with a note; it never fails the run.

use crate::run::{Phase, Results};
use crate::targets::{BYTES_RECEIVED_MAX, FILE_STORE_GROWTH_MAX};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// One picture written beside the report.
#[derive(Clone, Debug)]
pub struct Plot {
    /// What it shows (the image's alt text and caption).
    pub title: String,
    /// Its file name, relative to the report.
    pub file: String,
}

/// The pictures drawn, and the notes for those that could not be.
#[derive(Clone, Debug, Default)]
pub struct Plots {
    /// Latency per phase, in phase order.
    pub phases: Vec<Plot>,
    /// Cost against board size.
    pub boards: Vec<Plot>,
    /// Why a picture is missing.
    pub notes: Vec<String>,
}

/// Pixels per client strip in a latency picture.
const STRIP: u32 = 34;
/// Width of every picture, in pixels.
const WIDTH: u32 = 900;
/// Colours cycled over the clients of a phase.
const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Draws every picture `results` has figures for into `dir`.
pub fn draw(results: &Results, dir: &Path) -> Plots {
    let mut plots = Plots::default();
    for (i, phase) in results.phases.iter().enumerate() {
        let file = format!("latency-{}-{}.svg", i + 1, slug(phase));
        let title = format!("Latency, {}", phase_title(phase));
        match latency(phase, &title, &dir.join(&file)) {
            Ok(()) => plots.phases.push(Plot { title, file }),
            Err(e) => plots.notes.push(format!("picture {file} not drawn: {e}")),
        }
    }
    if let Some(records) = &results.records {
        let points: Vec<(f64, f64)> = records
            .bytes
            .iter()
            .filter(|b| b.layout == crate::records::RECORDS)
            .map(|b| (b.board_records as f64, b.received as f64))
            .collect();
        let file = "cost-bytes-per-change.svg".to_string();
        let title = "Bytes received per single-record change vs records on the board".to_string();
        let curve = Curve {
            title: &title,
            x_desc: "records on the board",
            y_desc: "bytes received",
            points: &points,
            limit: Some((BYTES_RECEIVED_MAX as f64, "target: 4 KB")),
        };
        match curve.draw(&dir.join(&file)) {
            Ok(()) => plots.boards.push(Plot { title, file }),
            Err(e) => plots.notes.push(format!("picture {file} not drawn: {e}")),
        }
    }
    if let Some(files) = &results.file_store {
        let points: Vec<(f64, f64)> = files
            .boards
            .iter()
            .filter(|b| b.latency.count > 0)
            .map(|b| (b.rows as f64, b.latency.p50_ms))
            .collect();
        let file = "cost-file-store-ask.svg".to_string();
        let title = "File store ask p50 (ms) vs rows on the board".to_string();
        let limit = points
            .first()
            .map(|(_, p50)| (p50 * FILE_STORE_GROWTH_MAX, "target: 1.5× the smallest"));
        let curve = Curve {
            title: &title,
            x_desc: "rows on the board",
            y_desc: "ask p50, ms",
            points: &points,
            limit,
        };
        match curve.draw(&dir.join(&file)) {
            Ok(()) => plots.boards.push(Plot { title, file }),
            Err(e) => plots.notes.push(format!("picture {file} not drawn: {e}")),
        }
    }
    plots
}

fn phase_title(phase: &Phase) -> String {
    if phase.busy > 0 {
        format!("{}, {} busy processes", phase.route.label(), phase.busy)
    } else {
        phase.route.label().to_string()
    }
}

fn slug(phase: &Phase) -> String {
    let mut slug = format!("{:?}", phase.route).to_lowercase();
    if phase.busy > 0 {
        slug.push_str("-loaded");
    }
    slug
}

/// Every client's samples of one phase as a strip of points (log scale), its p50 as a
/// bar across the strip.
fn latency(phase: &Phase, title: &str, path: &Path) -> Result<(), String> {
    let rows: Vec<_> = phase
        .rows
        .iter()
        .filter(|r| !r.samples_ms.is_empty())
        .collect();
    if rows.is_empty() {
        return Err("no samples".into());
    }
    let (lo, hi) = rows
        .iter()
        .flat_map(|r| r.samples_ms.iter().copied())
        .filter(|v| *v > 0.0)
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = (lo / 1.5, hi * 1.5);
    let n = rows.len();
    let height = 110 + STRIP * n as u32;
    let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(250)
        .build_cartesian_2d((lo..hi).log_scale(), -0.5f64..(n as f64 - 0.5))
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_desc("wall time from spawn to exit, ms (log scale)")
        .x_label_formatter(&|v| format!("{v}"))
        .draw()
        .map_err(err)?;
    for (i, row) in rows.iter().enumerate() {
        // Top to bottom in the phase's order.
        let y = (n - 1 - i) as f64;
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(row.samples_ms.iter().enumerate().map(|(k, &ms)| {
                // Spread the points across the strip, deterministically.
                let jitter = ((k as f64 * 0.618_034) % 1.0 - 0.5) * 0.6;
                Circle::new((ms.max(lo), y + jitter), 2, colour.mix(0.35).filled())
            }))
            .map_err(err)?;
        let p50 = row.summary.p50_ms.max(lo);
        chart
            .draw_series(LineSeries::new(
                [(p50, y - 0.42), (p50, y + 0.42)],
                BLACK.stroke_width(3),
            ))
            .map_err(err)?;
        let (px, py) = chart.backend_coord(&(lo, y));
        let label = format!("{} (p50 {:.3})", row.client.short(), row.summary.p50_ms);
        root.draw(&Text::new(
            label,
            (px - 8, py),
            ("sans-serif", 13)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Right, VPos::Center)),
        ))
        .map_err(err)?;
    }
    root.present().map_err(err)
}

/// One cost curve on log–log axes with its target as a dashed line.
struct Curve<'a> {
    title: &'a str,
    x_desc: &'a str,
    y_desc: &'a str,
    points: &'a [(f64, f64)],
    limit: Option<(f64, &'a str)>,
}

impl Curve<'_> {
    fn draw(&self, path: &Path) -> Result<(), String> {
        if self.points.is_empty() {
            return Err("no figures".into());
        }
        let xs = self.points.iter().map(|p| p.0);
        let ys = self
            .points
            .iter()
            .map(|p| p.1)
            .chain(self.limit.map(|l| l.0));
        let (x_lo, x_hi) = xs.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
        let (y_lo, y_hi) = ys
            .filter(|v| *v > 0.0)
            .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
        let root = SVGBackend::new(path, (WIDTH, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(self.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d(
                (x_lo / 2.0..x_hi * 2.0).log_scale(),
                (y_lo / 3.0..y_hi * 3.0).log_scale(),
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(self.x_desc)
            .y_desc(self.y_desc)
            .x_label_formatter(&|v| format!("{v}"))
            .y_label_formatter(&|v| format!("{v}"))
            .draw()
            .map_err(err)?;
        let colour = COLOURS[0];
        chart
            .draw_series(LineSeries::new(
                self.points.iter().copied(),
                colour.stroke_width(2),
            ))
            .map_err(err)?
            .label("measured")
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], colour));
        chart
            .draw_series(
                self.points
                    .iter()
                    .map(|&p| Circle::new(p, 4, colour.filled())),
            )
            .map_err(err)?;
        if let Some((limit, label)) = self.limit {
            let red = COLOURS[3];
            chart
                .draw_series(DashedLineSeries::new(
                    [(x_lo / 2.0, limit), (x_hi * 2.0, limit)],
                    6,
                    4,
                    red.stroke_width(2),
                ))
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], red));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}
