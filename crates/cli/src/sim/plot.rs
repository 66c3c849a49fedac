//! PNG charts of a sweep (one chart per metric, x = the swept value, one line per scheduler ×
//! congestion control; with `[plot]`, its selection first and every line in a second chart),
//! of fleets over time (one line per placement × scheduler × control)
//! and of `pcdn demo --fleet`'s CDN share. Text uses DejaVu Sans embedded in the binary, so no
//! system font is needed.

use std::path::{Path, PathBuf};
use std::sync::Once;

use anyhow::{Context, anyhow};
use pcdn_sim::scenario::{AbGroup, AbReport, FleetRow, FullRow, Scenario};
use plotters::prelude::*;
use plotters::style::FontStyle;

/// One chart: file name, title (with unit) and the value of a row.
struct Metric {
    file: &'static str,
    title: &'static str,
    value: fn(&FullRow) -> Option<f64>,
    /// A player metric, drawn only for scenarios with a `[video]`.
    player: bool,
}

const METRICS: &[Metric] = &[
    Metric {
        file: "aggregation.png",
        title: "aggregation (goodput ÷ capacity)",
        value: |r| Some(r.row.aggregation),
        player: false,
    },
    Metric {
        file: "goodput.png",
        title: "goodput (Mbit/s)",
        value: |r| Some(r.row.goodput_mbps),
        player: false,
    },
    Metric {
        file: "ofo_mean.png",
        title: "out-of-order size, mean (kB)",
        value: |r| Some(r.row.ofo_mean_bytes / 1e3),
        player: false,
    },
    Metric {
        file: "wait_p99.png",
        title: "waiting time, p99 (ms)",
        value: |r| Some(r.row.wait_p99_ms),
        player: false,
    },
    Metric {
        file: "completion.png",
        title: "completion time (s)",
        value: |r| r.row.completion_s,
        player: false,
    },
    Metric {
        file: "gop_pause.png",
        title: "GOP pauses (% of GOPs)",
        value: |r| Some(r.player.as_ref()?.gop_pause_percentage),
        player: true,
    },
    Metric {
        file: "stall.png",
        title: "stalled time (% of the session)",
        value: |r| Some(r.player.as_ref()?.stall_percentage),
        player: true,
    },
    Metric {
        file: "frames_discarded.png",
        title: "frames discarded",
        value: |r| Some(r.player.as_ref()?.frames_discarded),
        player: true,
    },
];

/// Tableau 20: ten hues, each dark then light, distinct on white. A scheduler keeps its
/// colour across congestion controls, and a control its marker across schedulers, so a
/// figure of every scheduler under two controls still tells its 34 lines apart.
const COLORS: [(u8, u8, u8); 20] = [
    (31, 119, 180),
    (174, 199, 232),
    (255, 127, 14),
    (255, 187, 120),
    (44, 160, 44),
    (152, 223, 138),
    (214, 39, 40),
    (255, 152, 150),
    (148, 103, 189),
    (197, 176, 213),
    (140, 86, 75),
    (196, 156, 148),
    (227, 119, 194),
    (247, 182, 210),
    (127, 127, 127),
    (199, 199, 199),
    (188, 189, 34),
    (219, 219, 141),
    (23, 190, 207),
    (158, 218, 229),
];

/// Width of the legend panel right of the plot (px), and the height of one of its lines.
const LEGEND_WIDTH: u32 = 250;
const LEGEND_LINE: u32 = 19;

/// How sweep values map to the x axis: numbers in a unit, or evenly spaced categories.
enum Axis {
    Numeric { unit: &'static str, xs: Vec<f64> },
    Categories(Vec<String>),
}

impl Axis {
    /// Numbers if every value parses the same way (plain, duration → ms, rate → Mbit/s,
    /// size → MB), else categories in sweep order.
    fn of(labels: &[String]) -> Axis {
        type Parse = fn(&str) -> Option<f64>;
        let parsers: [(&'static str, Parse); 4] = [
            ("", |s| s.trim().parse::<f64>().ok().filter(|v| v.is_finite())),
            ("ms", |s| {
                pcdn_sim::parse_duration(s).ok().map(|d| d.as_secs_f64() * 1e3)
            }),
            ("Mbit/s", |s| pcdn_sim::parse_rate(s).ok().map(|r| r as f64 / 1e6)),
            ("MB", |s| pcdn_sim::parse_size(s).ok().map(|b| b as f64 / 1e6)),
        ];
        for (unit, parse) in parsers {
            if let Some(xs) = labels.iter().map(|l| parse(l)).collect::<Option<Vec<f64>>>() {
                return Axis::Numeric { unit, xs };
            }
        }
        Axis::Categories(labels.to_vec())
    }

    /// Numeric values multiplied by `factor` (`[plot] x_scale`); categories stay.
    fn scaled(self, factor: f64) -> Axis {
        match self {
            Axis::Numeric { unit, xs } => Axis::Numeric {
                unit,
                xs: xs.into_iter().map(|x| x * factor).collect(),
            },
            categories => categories,
        }
    }

    fn x(&self, index: usize) -> f64 {
        match self {
            Axis::Numeric { xs, .. } => xs[index],
            Axis::Categories(_) => index as f64,
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        let (lo, hi) = match self {
            Axis::Numeric { xs, .. } => xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            }),
            Axis::Categories(c) => (0.0, c.len().saturating_sub(1) as f64),
        };
        let pad = match self {
            Axis::Numeric { .. } if hi > lo => (hi - lo) * 0.05,
            // Half a step each side, so the first and last labels fit.
            _ => 0.5,
        };
        (lo - pad)..(hi + pad)
    }
}

fn register_font() -> anyhow::Result<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .map_err(|_| anyhow!("the embedded DejaVu Sans font did not load"));
    });
    result
}

/// Writes one PNG per metric into `dir` (created if needed) and returns their paths.
pub fn write_charts(scenario: &Scenario, rows: &[FullRow], dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    register_font()?;
    std::fs::create_dir_all(dir).with_context(|| format!("--plot: cannot create {}", dir.display()))?;
    let key = scenario.sweep_key.as_deref().unwrap_or("sweep");
    let labels: Vec<String> = scenario
        .points
        .iter()
        .map(|p| p.sweep.clone().unwrap_or_default())
        .collect();
    let spec = &scenario.plot;
    let axis = Axis::of(&labels).scaled(spec.x_scale);
    // Rows come point by point (scheduler × cc rows each), so equal labels stay apart.
    let point_of: Vec<usize> = scenario
        .points
        .iter()
        .enumerate()
        .flat_map(|(i, p)| std::iter::repeat_n(i, p.schedulers.len() * p.ccs.len() * p.transports.len()))
        .collect();
    anyhow::ensure!(
        point_of.len() == rows.len(),
        "--plot: the rows do not match the scenario"
    );

    // Series in the rows' order of first appearance, each with its style: the colour of its
    // scheduler, the marker of its congestion control.
    let several_ccs = rows.iter().any(|r| r.row.cc != rows[0].row.cc);
    let several_transports = rows.iter().any(|r| r.row.transport != rows[0].row.transport);
    let mut schedulers: Vec<&str> = Vec::new();
    let mut ccs: Vec<&str> = Vec::new();
    let mut series: Vec<Series<'_>> = Vec::new();
    for (row, &point) in rows.iter().zip(&point_of) {
        let mut name = if several_ccs {
            format!("{} / {}", row.row.scheduler, row.row.cc)
        } else {
            row.row.scheduler.clone()
        };
        if several_transports {
            name = format!("{name} / {}", row.row.transport);
        }
        match series.iter_mut().find(|(n, _, _)| *n == name) {
            Some((_, _, members)) => members.push((point, row)),
            None => {
                let style = Style {
                    color: index_of(&mut schedulers, &row.row.scheduler),
                    marker: index_of(&mut ccs, &row.row.cc),
                };
                series.push((name, style, vec![(point, row)]));
            }
        }
    }

    // The main charts: the `[plot]` selection, each scheduler in one of the ten dark hues (in
    // the selection's order) so that a handful of lines stay far apart.
    let main: Vec<Series<'_>> = series
        .iter()
        .filter(|(_, _, members)| {
            let row = &members[0].1.row;
            spec.shows(&row.scheduler, &row.cc)
        })
        .map(|(name, style, members)| {
            let scheduler = members[0].1.row.scheduler.as_str();
            let rank = match &spec.schedulers {
                Some(list) => list.iter().position(|n| n == scheduler).unwrap_or(0),
                None => style.color,
            };
            let color = if spec.selects() {
                (2 * rank) % COLORS.len()
            } else {
                style.color
            };
            (name.clone(), Style { color, ..*style }, members.clone())
        })
        .collect();
    let x_desc = match (&spec.x_label, &axis) {
        (Some(label), _) => label.clone(),
        (None, Axis::Numeric { unit, .. }) if !unit.is_empty() => format!("{key} ({unit})"),
        (None, _) => key.to_owned(),
    };
    let mut written = Vec::new();
    for metric in METRICS {
        if metric.player && rows.iter().all(|r| r.player.is_none()) {
            continue;
        }
        let mut charts = vec![(metric.file.to_owned(), &main, "")];
        if spec.selects() {
            let all = metric.file.replace(".png", "-all.png");
            charts.push((all, &series, ", every scheduler"));
        }
        for (file, chosen, suffix) in charts {
            let path = dir.join(file);
            let lines: Vec<Line<'_>> = chosen
                .iter()
                .map(|(name, style, members)| {
                    let points = members
                        .iter()
                        .filter_map(|&(point, r)| Some((axis.x(point), (metric.value)(r)?)))
                        .collect();
                    (name.as_str(), *style, points)
                })
                .collect();
            let caption = format!("{}: {}{suffix}", scenario.name, metric.title);
            draw(&path, &caption, &x_desc, &axis, metric.title, &lines)
                .map_err(|e| anyhow!("--plot: cannot draw {}: {e}", path.display()))?;
            written.push(path);
        }
    }
    Ok(written)
}

/// A series' colour (index into `COLORS`) and marker (one of three shapes).
#[derive(Clone, Copy)]
struct Style {
    color: usize,
    marker: usize,
}

impl Style {
    fn rgb(self) -> RGBColor {
        let (r, g, b) = COLORS[self.color % COLORS.len()];
        RGBColor(r, g, b)
    }
}

/// The rows of one scheduler × congestion control, each with its sweep point's index.
type Series<'a> = (String, Style, Vec<(usize, &'a FullRow)>);

/// One line of a chart: its legend name, style and points.
type Line<'a> = (&'a str, Style, Vec<(f64, f64)>);

/// The index of `name` in `seen`, appending it when new.
fn index_of<'a>(seen: &mut Vec<&'a str>, name: &'a str) -> usize {
    seen.iter().position(|&n| n == name).unwrap_or_else(|| {
        seen.push(name);
        seen.len() - 1
    })
}

/// Draws `style`'s marker centred on `at`, in whatever coordinates the area uses.
fn marker<DB: DrawingBackend, CT: plotters::coord::CoordTranslate>(
    area: &DrawingArea<DB, CT>,
    at: CT::From,
    style: Style,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    CT::From: Clone,
{
    let color = style.rgb();
    match style.marker % 3 {
        0 => area.draw(&Circle::new(at, 5, color.filled())),
        1 => area.draw(&TriangleMarker::new(at, 7, color.stroke_width(2))),
        _ => area.draw(&Cross::new(at, 6, color.stroke_width(2))),
    }
}

fn draw(
    path: &Path,
    caption: &str,
    x_desc: &str,
    axis: &Axis,
    y_desc: &str,
    lines: &[Line<'_>],
) -> Result<(), Box<dyn std::error::Error>> {
    // The legend gets its own panel right of the plot, as tall as its lines need, so it
    // never hides a point however many series there are.
    let height = 620.max(80 + LEGEND_LINE * lines.len() as u32);
    let root = BitMapBackend::new(path, (1000 + LEGEND_WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, legend) = root.split_horizontally(1000);
    let y_max = lines
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|&(_, y)| y))
        .fold(0.0, f64::max);
    let y_top = if y_max > 0.0 { y_max * 1.05 } else { 1.0 };
    let mut chart = ChartBuilder::on(&plot)
        .caption(caption, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(axis.range(), 0.0..y_top)?;
    let categories = match axis {
        Axis::Categories(c) => Some(c.clone()),
        Axis::Numeric { .. } => None,
    };
    let x_format = |x: &f64| match &categories {
        Some(c) => {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < c.len() {
                c[i as usize].clone()
            } else {
                String::new()
            }
        }
        None => format!("{}", (x * 1000.0).round() / 1000.0),
    };
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(x_desc)
        .bold_line_style(BLACK.mix(0.15))
        .light_line_style(BLACK.mix(0.04))
        .y_desc(y_desc)
        .x_label_formatter(&x_format)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17));
    if let Some(c) = &categories {
        mesh.x_labels(c.len().max(2) * 2 - 1);
    }
    mesh.draw()?;
    for &(_, style, ref points) in lines {
        chart.draw_series(LineSeries::new(points.iter().copied(), style.rgb().stroke_width(2)))?;
        for &p in points {
            marker(chart.plotting_area(), p, style)?;
        }
    }
    // The legend: a sample of each line with its marker, then its name, top to bottom in
    // the rows' order.
    for (i, &(name, style, _)) in lines.iter().enumerate() {
        let y = 50 + (LEGEND_LINE * i as u32) as i32;
        legend.draw(&PathElement::new([(8, y), (40, y)], style.rgb().stroke_width(2)))?;
        marker(&legend, (24, y), style)?;
        legend.draw(&Text::new(name.to_owned(), (48, y - 8), ("sans-serif", 15).into_font()))?;
    }
    root.present()?;
    Ok(())
}

/// A fleet's charts over time: CDN share, edge utilization and stalled viewers, x = minutes,
/// one line per row (placement × scheduler × control, mean over its runs); their paths.
pub fn write_fleet_charts(name: &str, rows: &[FleetRow], dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    register_font()?;
    std::fs::create_dir_all(dir).with_context(|| format!("--plot: cannot create {}", dir.display()))?;
    type Value = fn(&pcdn_sim::scenario::TimelineRow) -> f64;
    let charts: [(&str, &str, Value); 3] = [
        ("cdn-share.png", "CDN share of the bytes sent", |t| t.cdn_share),
        ("edge-utilization.png", "edge upload used ÷ capacity", |t| {
            t.edge_utilization
        }),
        (
            "stalled-viewers.png",
            "viewers stalled (share of those watching)",
            |t| t.stalled_viewers,
        ),
    ];
    let xs: Vec<f64> = rows
        .iter()
        .flat_map(|r| r.timeline.iter().map(|t| t.t_s / 60.0))
        .collect();
    anyhow::ensure!(!xs.is_empty(), "--plot: the runs are shorter than one timeline window");
    let axis = Axis::Numeric { unit: "min", xs };
    let several_ccs = rows.iter().any(|r| r.cc != rows[0].cc);
    let (mut schedulers, mut placements) = (Vec::new(), Vec::new());
    let styles: Vec<(String, Style)> = rows
        .iter()
        .map(|r| {
            let label = if several_ccs {
                format!("{} / {} / {}", r.placement, r.scheduler, r.cc)
            } else {
                format!("{} / {}", r.placement, r.scheduler)
            };
            let style = Style {
                color: index_of(&mut placements, &r.placement),
                marker: index_of(&mut schedulers, &r.scheduler),
            };
            (label, style)
        })
        .collect();
    let mut written = Vec::new();
    for (file, title, value) in charts {
        let path = dir.join(file);
        let lines: Vec<Line<'_>> = rows
            .iter()
            .zip(&styles)
            .map(|(r, (label, style))| {
                let points = r.timeline.iter().map(|t| (t.t_s / 60.0, value(t))).collect();
                (label.as_str(), *style, points)
            })
            .collect();
        draw(&path, &format!("{name}: {title}"), "time (min)", &axis, title, &lines)
            .map_err(|e| anyhow!("--plot: cannot draw {}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// One line over time (x in seconds) into the PNG `path`, its folder created if missing:
/// `pcdn demo --fleet`'s CDN share per window.
pub fn write_timeline_chart(
    path: &Path,
    caption: &str,
    y_desc: &str,
    label: &str,
    points: &[(f64, f64)],
) -> anyhow::Result<()> {
    register_font()?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("--plot: cannot create {}", dir.display()))?;
    }
    anyhow::ensure!(!points.is_empty(), "--plot: no point to draw");
    let axis = Axis::Numeric {
        unit: "s",
        xs: points.iter().map(|p| p.0).collect(),
    };
    let lines = [(label, Style { color: 0, marker: 0 }, points.to_vec())];
    draw(path, caption, "time (s)", &axis, y_desc, &lines)
        .map_err(|e| anyhow!("--plot: cannot draw {}: {e}", path.display()))
}

/// An A/B test's charts, one per report: goodput, waiting time and download speed by
/// percentile (Pscheduler's Figs. 11 and 12), and the jump-to-CDN rate and waste by slice of
/// the day (Figs. 13 and 14); one line per group.
pub fn write_ab_charts(name: &str, reports: &[AbReport], dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    register_font()?;
    std::fs::create_dir_all(dir).with_context(|| format!("--plot: cannot create {}", dir.display()))?;
    type Values = fn(&AbGroup) -> &[f64];
    let by_percentile: [(&str, &str, Values); 3] = [
        ("goodput", "goodput (Mbit/s)", |g| &g.goodput_mbps),
        ("wait", "waiting time (ms)", |g| &g.wait_ms),
        ("speed", "download speed (Mbit/s)", |g| &g.download_speed_mbps),
    ];
    let by_slice: [(&str, &str, Values); 2] = [
        ("jump", "jump-to-CDN rate", |g| &g.jump_to_cdn_rate),
        ("waste", "waste (requests beyond packets ÷ packets)", |g| &g.waste),
    ];
    let several = reports.len() > 1;
    let mut written = Vec::new();
    for report in reports {
        let tag = if several {
            format!("-{}-{}", report.placement, report.cc)
        } else {
            String::new()
        };
        let percentiles: Vec<f64> = report.percentiles.iter().map(|q| q * 100.0).collect();
        let charts = by_percentile
            .iter()
            .map(|c| (c, "percentile of viewers", &percentiles, "percentile"))
            .chain(
                by_slice
                    .iter()
                    .map(|c| (c, "arrival (hour)", &report.slice_start_h, "h")),
            );
        for ((file, title, values), x_desc, xs, unit) in charts {
            let path = dir.join(format!("ab-{file}{tag}.png"));
            let lines: Vec<Line<'_>> = report
                .groups
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    let points = xs
                        .iter()
                        .copied()
                        .zip(values(g).iter().copied())
                        .filter(|p| p.1.is_finite());
                    (g.scheduler.as_str(), Style { color: i, marker: i }, points.collect())
                })
                .collect();
            let axis = Axis::Numeric { unit, xs: xs.clone() };
            let caption = format!("{name} ({}, {}): {title}", report.placement, report.cc);
            draw(&path, &caption, x_desc, &axis, title, &lines)
                .map_err(|e| anyhow!("--plot: cannot draw {}: {e}", path.display()))?;
            written.push(path);
        }
    }
    Ok(written)
}
