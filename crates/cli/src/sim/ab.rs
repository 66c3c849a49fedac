//! The tables of a fleet A/B test (`ab_test = true`): each group against the baseline, laid
//! out as Pscheduler's Figs. 10 to 14.

use pcdn_sim::scenario::{AbGroup, AbReport, Change};

use super::{Column, column_of as column, render};

/// Every table of one report, with a heading each.
pub(super) fn table(report: &AbReport) -> String {
    let pct = |v: f64| {
        if v.is_finite() {
            format!("{:+.1} %", v * 100.0)
        } else {
            "-".to_owned()
        }
    };
    let change = move |c: Change| match c.half_width {
        Some(h) if c.mean.is_finite() => format!("{} ± {:.1}", pct(c.mean), h * 100.0),
        _ => pct(c.mean),
    };
    let summary: Vec<Column<AbGroup>> = vec![
        column("scheduler", false, |g: &AbGroup| g.scheduler.clone()),
        column("viewers", true, |g: &AbGroup| g.viewers.to_string()),
        column("OFO KB", true, |g: &AbGroup| format!("{:.1}", g.ofo_mean_bytes / 1e3)),
        column("OFO vs base ↓ (Fig. 10)", true, move |g: &AbGroup| {
            change(g.ofo_change)
        }),
        column("goodput vs base ↑", true, move |g: &AbGroup| change(g.goodput_change)),
        column("wait vs base ↓", true, move |g: &AbGroup| change(g.wait_change)),
        column("rebuffer ratio ↓", true, |g: &AbGroup| {
            format!("{:.4}", g.rebuffer_ratio)
        }),
    ];
    let mut out = format!(
        "A/B test on one fleet ({}, {}): viewers split at random; changes against {} (mean over seeds ± 95 % interval)\n{}",
        report.placement,
        report.cc,
        report.baseline,
        render(&summary, report.groups.iter())
    );
    type Values = fn(&AbGroup) -> (&[f64], &[f64]);
    let by_percentile: [(&str, &str, Values); 3] = [
        ("Fig. 11: goodput by percentile", "Mbit/s", |g| {
            (&g.goodput_mbps, &g.goodput_vs_baseline)
        }),
        ("Fig. 11: waiting time by percentile", "ms", |g| {
            (&g.wait_ms, &g.wait_vs_baseline)
        }),
        ("Fig. 12: download speed by percentile", "Mbit/s", |g| {
            (&g.download_speed_mbps, &g.download_speed_vs_baseline)
        }),
    ];
    for (title, unit, values) in by_percentile {
        let mut columns = vec![column("scheduler", false, |g: &AbGroup| g.scheduler.clone())];
        for (i, q) in report.percentiles.iter().enumerate() {
            columns.push(column(&format!("p{:.0}", q * 100.0), true, move |g: &AbGroup| {
                let (value, vs) = values(g);
                format!("{:.2} ({})", value[i], pct(vs[i]))
            }));
        }
        out += &format!("\n{title}, {unit} (change against {})\n", report.baseline);
        out += &render(&columns, report.groups.iter());
    }
    type Slices = fn(&AbGroup) -> &[f64];
    let by_slice: [(&str, Slices); 2] = [
        ("Fig. 13: jump-to-CDN rate by arrival time", |g| &g.jump_to_cdn_rate),
        ("Fig. 14: waste by arrival time", |g| &g.waste),
    ];
    let starts = &report.slice_start_h;
    let width = starts.get(1).map_or(0.0, |second| second - starts[0]);
    for (title, values) in by_slice {
        let mut columns = vec![column("scheduler", false, |g: &AbGroup| g.scheduler.clone())];
        for (i, &start) in starts.iter().enumerate() {
            // Hours for a day's slices; minutes for a window of less than six hours.
            let header = if width >= 1.0 {
                format!("[{:.0}, {:.0}) h", start, start + width)
            } else {
                format!("[{:.0}, {:.0}) min", start * 60.0, (start + width) * 60.0)
            };
            columns.push(column(&header, true, move |g: &AbGroup| {
                format!("{:.2} %", values(g)[i] * 100.0)
            }));
        }
        out += &format!("\n{title}\n");
        out += &render(&columns, report.groups.iter());
    }
    out
}
