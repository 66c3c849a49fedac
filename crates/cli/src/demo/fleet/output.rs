//! What `pcdn demo --fleet` prints: the CDN share per time window, the edges' hit ratio and
//! fills, every viewer's time (as a table, as JSON, as a PNG); each metric is defined in
//! docs/fleet.md.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use pcdn_net::cache::FillStats;
use serde::Serialize;

use super::{Device, FillSamples, FleetArgs, Watched};

/// One viewer's result.
#[derive(Serialize)]
pub struct ViewerResult {
    /// 1, 2, … in arrival order.
    pub viewer: usize,
    /// The content's popularity rank, 1 the most popular.
    pub content: usize,
    pub bytes: u64,
    /// When it arrived, and when it started (a free slot of --at-once), s since the first.
    pub arrival_s: f64,
    pub start_s: f64,
    /// Wall time of its `pcdn fetch`, process start to exit (lookups and manifest included).
    pub time_s: f64,
    /// The fetch's own completion time: first request to last byte.
    pub completion_s: Option<f64>,
    /// Payload bytes received from the origin and from edges, duplicates included.
    pub cdn_bytes: u64,
    pub edge_bytes: u64,
    /// Bytes from each edge that sent it any.
    pub edges: BTreeMap<String, u64>,
    /// Why `pcdn fetch` failed before it succeeded (the demo retries once).
    pub failures: Vec<String>,
}

impl ViewerResult {
    pub(super) fn new(viewer: usize, content: usize, arrival: Duration, started: Duration, watched: Watched) -> Self {
        let report = &watched.report;
        let from = |origin: bool| {
            report
                .paths
                .iter()
                .filter(|p| p.origin == origin)
                .map(|p| p.bytes)
                .sum()
        };
        ViewerResult {
            viewer: viewer + 1,
            content: content + 1,
            bytes: report.bytes,
            arrival_s: arrival.as_secs_f64(),
            start_s: started.as_secs_f64(),
            time_s: watched.wall.as_secs_f64(),
            completion_s: report.completion_s,
            cdn_bytes: from(true),
            edge_bytes: from(false),
            edges: report
                .paths
                .iter()
                .filter(|p| !p.origin && p.bytes > 0)
                .map(|p| (p.name.clone(), p.bytes))
                .collect(),
            failures: watched.failures,
        }
    }

    fn cdn_share(&self) -> f64 {
        share(self.cdn_bytes, self.cdn_bytes + self.edge_bytes)
    }
}

/// One edge at the end of the run.
#[derive(Serialize)]
pub struct EdgeResult {
    pub name: String,
    pub link_mbps: f64,
    pub delay_ms: u64,
    /// Contents its cache holds at the end, and their bytes.
    pub held: usize,
    pub held_bytes: u64,
    /// Contents it filled, the bytes those fills received, and the part from the origin.
    pub fills: u64,
    pub fill_bytes: u64,
    pub fill_cdn_bytes: u64,
    /// Bytes it sent to viewers (from the viewers' reports), and to how many viewers.
    pub viewer_bytes: u64,
    pub viewers: usize,
}

impl EdgeResult {
    pub(super) fn new(device: &Device, fills: FillStats, held: usize, held_bytes: u64) -> EdgeResult {
        EdgeResult {
            name: device.name.clone(),
            link_mbps: device.rate_bps as f64 / 1e6,
            delay_ms: device.delay_ms,
            held,
            held_bytes,
            fills: fills.contents,
            fill_bytes: fills.bytes,
            fill_cdn_bytes: fills.origin_bytes,
            viewer_bytes: 0,
            viewers: 0,
        }
    }
}

/// The viewers that started within one time window.
#[derive(Serialize)]
pub struct Window {
    pub start_s: f64,
    pub end_s: f64,
    pub viewers: usize,
    /// Viewers that got bytes from at least one edge.
    pub hits: usize,
    /// Their bytes from the origin ÷ all their bytes; `None` without viewers.
    pub cdn_share: Option<f64>,
    /// Bytes the edges' fills received during the window (fills completed in it).
    pub fill_bytes: u64,
}

/// The settings the run used.
#[derive(Serialize)]
pub struct Settings {
    pub viewers: u64,
    pub contents: u64,
    pub content_sizes: Vec<u64>,
    pub edges: u64,
    pub placement: String,
    pub cache_size: u64,
    pub interval_s: f64,
    pub at_once: u64,
    pub zipf: f64,
    pub window_s: f64,
    pub cc: String,
}

#[derive(Serialize)]
pub struct FleetOutput {
    pub settings: Settings,
    /// Every viewer's bytes from the origin ÷ all their bytes.
    pub cdn_share: f64,
    /// Viewers that got bytes from an edge ÷ all viewers.
    pub hit_ratio: f64,
    /// Viewers' bytes from edges ÷ all their bytes (1 − `cdn_share`).
    pub byte_hit_ratio: f64,
    /// What the origin sent: to viewers, and to edges' fills.
    pub cdn_viewer_bytes: u64,
    pub cdn_fill_bytes: u64,
    pub windows: Vec<Window>,
    pub edges: Vec<EdgeResult>,
    pub viewers: Vec<ViewerResult>,
    /// Wall time of the whole demo, start-up included, s.
    pub elapsed_s: f64,
}

fn share(part: u64, all: u64) -> f64 {
    if all == 0 { 0.0 } else { part as f64 / all as f64 }
}

/// The fill bytes at `t`: the last sample at or before it.
fn fill_at(samples: &FillSamples, t: f64) -> u64 {
    samples.iter().take_while(|(at, _)| *at <= t).last().map_or(0, |s| s.1)
}

impl FleetOutput {
    pub(super) fn new(
        fleet: &FleetArgs,
        cc: &str,
        content_sizes: &[u64],
        viewers: Vec<ViewerResult>,
        mut edges: Vec<EdgeResult>,
        samples: &FillSamples,
    ) -> FleetOutput {
        // Bytes per edge come from the viewers' path reports, which name the device.
        for viewer in &viewers {
            for edge in &mut edges {
                if let Some(bytes) = viewer.edges.get(&edge.name) {
                    edge.viewers += 1;
                    edge.viewer_bytes += bytes;
                }
            }
        }
        let window = fleet.window.as_secs_f64();
        let end = samples.last().map_or(0.0, |s| s.0);
        let count = ((end / window).ceil() as usize).max(1);
        let windows = (0..count)
            .map(|w| {
                let (start_s, end_s) = (w as f64 * window, (w + 1) as f64 * window);
                let inside: Vec<&ViewerResult> = viewers
                    .iter()
                    .filter(|v| v.start_s >= start_s && v.start_s < end_s)
                    .collect();
                let cdn: u64 = inside.iter().map(|v| v.cdn_bytes).sum();
                let all: u64 = inside.iter().map(|v| v.cdn_bytes + v.edge_bytes).sum();
                Window {
                    start_s,
                    end_s,
                    viewers: inside.len(),
                    hits: inside.iter().filter(|v| v.edge_bytes > 0).count(),
                    cdn_share: (!inside.is_empty()).then(|| share(cdn, all)),
                    fill_bytes: fill_at(samples, end_s) - fill_at(samples, start_s),
                }
            })
            .collect();
        let cdn: u64 = viewers.iter().map(|v| v.cdn_bytes).sum();
        let all: u64 = viewers.iter().map(|v| v.cdn_bytes + v.edge_bytes).sum();
        let hits = viewers.iter().filter(|v| v.edge_bytes > 0).count();
        FleetOutput {
            settings: Settings {
                viewers: fleet.viewers,
                contents: fleet.contents,
                content_sizes: content_sizes.to_vec(),
                edges: fleet.edges,
                placement: fleet.placement.clone(),
                cache_size: fleet.cache_size,
                interval_s: fleet.interval.as_secs_f64(),
                at_once: fleet.at_once,
                zipf: fleet.zipf,
                window_s: window,
                cc: cc.to_owned(),
            },
            cdn_share: share(cdn, all),
            hit_ratio: share(hits as u64, viewers.len() as u64),
            byte_hit_ratio: share(all - cdn, all),
            cdn_viewer_bytes: cdn,
            cdn_fill_bytes: edges.iter().map(|e| e.fill_cdn_bytes).sum(),
            windows,
            edges,
            viewers,
            elapsed_s: 0.0,
        }
    }

    /// A PNG of the CDN share per window (windows without viewers left out).
    pub fn write_chart(&self, path: &Path) -> anyhow::Result<()> {
        let points: Vec<(f64, f64)> = self
            .windows
            .iter()
            .filter_map(|w| Some(((w.start_s + w.end_s) / 2.0, w.cdn_share?)))
            .collect();
        let caption = format!(
            "pcdn demo --fleet: {} viewers, {} edges, placement {}",
            self.settings.viewers, self.settings.edges, self.settings.placement
        );
        crate::sim::plot::write_timeline_chart(
            path,
            &caption,
            &format!(
                "CDN share of the viewers' bytes, per {} s window",
                self.settings.window_s
            ),
            &format!("placement {}", self.settings.placement),
            &points,
        )
    }

    pub fn print_table(&self) {
        let mb = |bytes: u64| bytes as f64 / 1e6;
        let percent = |x: f64| format!("{:.1}%", x * 100.0);
        println!();
        println!(
            "CDN share per {} s window (viewers by start time):",
            self.settings.window_s
        );
        println!(
            "{:>13} {:>8} {:>10} {:>10} {:>9}",
            "window", "viewers", "edge hits", "CDN share", "fill MB"
        );
        for w in &self.windows {
            println!(
                "{:>13} {:>8} {:>10} {:>10} {:>9.1}",
                format!("{:.0}–{:.0} s", w.start_s, w.end_s),
                w.viewers,
                w.hits,
                w.cdn_share.map_or("-".to_owned(), percent),
                mb(w.fill_bytes)
            );
        }
        println!();
        println!(
            "{:<8} {:>11} {:>5} {:>6} {:>8} {:>12} {:>16} {:>8}",
            "edge", "link", "held", "fills", "fill MB", "fill CDN MB", "to viewers MB", "viewers"
        );
        for e in &self.edges {
            println!(
                "{:<8} {:>11} {:>5} {:>6} {:>8.1} {:>12.1} {:>16.1} {:>8}",
                e.name,
                format!("{} Mbit/s", e.link_mbps),
                e.held,
                e.fills,
                mb(e.fill_bytes),
                mb(e.fill_cdn_bytes),
                mb(e.viewer_bytes),
                e.viewers
            );
        }
        println!();
        println!(
            "{:>6} {:>7} {:>7} {:>9} {:>7} {:>6} {:>5} {:>9}  edges",
            "viewer", "content", "MB", "arrival s", "start s", "time s", "tries", "CDN share"
        );
        for v in &self.viewers {
            println!(
                "{:>6} {:>7} {:>7.2} {:>9.1} {:>7.1} {:>6.1} {:>5} {:>9}  {}",
                v.viewer,
                v.content,
                mb(v.bytes),
                v.arrival_s,
                v.start_s,
                v.time_s,
                v.failures.len() + 1,
                percent(v.cdn_share()),
                v.edges.keys().cloned().collect::<Vec<_>>().join(",")
            );
        }
        for v in self.viewers.iter().filter(|v| !v.failures.is_empty()) {
            for failure in &v.failures {
                println!(
                    "viewer {} retried after: {}",
                    v.viewer,
                    failure.lines().next().unwrap_or("")
                );
            }
        }
        let mut times: Vec<f64> = self.viewers.iter().map(|v| v.time_s).collect();
        times.sort_by(f64::total_cmp);
        let at = |q: f64| {
            times
                .get(((times.len() as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or(0.0)
        };
        println!();
        println!(
            "{} viewers, every file verified; time median {:.1} s, p90 {:.1} s, max {:.1} s",
            self.viewers.len(),
            at(0.5),
            at(0.9),
            at(1.0)
        );
        println!(
            "hit ratio {} ({} of {} viewers got bytes from an edge); byte hit ratio {}; CDN share {}",
            percent(self.hit_ratio),
            self.viewers.iter().filter(|v| v.edge_bytes > 0).count(),
            self.viewers.len(),
            percent(self.byte_hit_ratio),
            percent(self.cdn_share)
        );
        println!(
            "the origin sent {:.1} MB to viewers and {:.1} MB to fills; demo wall time {:.0} s",
            mb(self.cdn_viewer_bytes),
            mb(self.cdn_fill_bytes),
            self.elapsed_s
        );
    }
}
