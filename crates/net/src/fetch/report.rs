//! The report of a finished fetch: its metrics (named as `pcdn sim --json` names them) and
//! each path's part, as JSON or as text for a person.

use std::path::PathBuf;
use std::time::Duration;

use pcdn_core::{Download, PathError};
use serde::Serialize;

use super::{FetchConfig, PathEntry};
use crate::store::content_id_hex;

/// One path's part in a finished fetch.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PathReport {
    pub name: String,
    pub addr: String,
    pub origin: bool,
    /// Payload bytes received, duplicates included.
    pub bytes: u64,
    pub packets: u64,
    pub requests: u64,
    pub duplicates: u64,
    pub losses: u64,
    pub timeouts: u64,
    pub srtt_ms: f64,
    /// Packets proven to differ from their block's verified bytes.
    pub corrupt_packets: u64,
    /// "ok"; "no answer" when the server never answered its HELLO (the path failed, or the
    /// download ended first); or why the path was given up: "timeout", "rejected: <reason>",
    /// "mismatch", "corrupt".
    pub outcome: String,
    /// The server answered the path's HELLO.
    pub answered: bool,
    /// The path was banned for sending data that failed verification.
    pub banned: bool,
}

/// The metrics of a finished fetch. Field names match `pcdn sim --json`'s for the same metrics.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FetchReport {
    pub content: String,
    pub output: PathBuf,
    pub bytes: u64,
    pub scheduler: String,
    pub cc: String,
    /// In-order bytes × 8 ÷ (last in-order delivery − first request), Mbit/s.
    pub goodput_mbps: f64,
    pub ofo_mean_bytes: f64,
    pub ofo_max_bytes: f64,
    pub wait_mean_ms: f64,
    pub wait_p99_ms: f64,
    /// First request to last byte, s.
    pub completion_s: Option<f64>,
    pub waste: f64,
    pub request_waste: f64,
    pub cdn_share: f64,
    /// Blocks whose hash did not match the manifest.
    pub blocks_rejected: u64,
    /// Names of the paths banned for corrupt data.
    pub banned_paths: Vec<String>,
    pub paths: Vec<PathReport>,
    /// Wall time of the whole fetch, lookups included, s.
    pub elapsed_s: f64,
    /// Bytes of verified blocks taken from the partial file of an earlier run (`bytes` are
    /// the ones this run fetched).
    pub resumed_bytes: u64,
}

pub(super) fn report(config: &FetchConfig, download: &Download, paths: &[PathEntry], bytes: u64) -> FetchReport {
    let s = download.stats();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let path_reports: Vec<PathReport> = paths
        .iter()
        .map(|p| {
            let ps = s.paths.get(p.id.0 as usize).cloned().unwrap_or_default();
            PathReport {
                name: p.target.name.clone(),
                addr: p.target.addr.to_string(),
                origin: p.target.origin,
                bytes: ps.bytes,
                packets: ps.packets,
                requests: ps.requests,
                duplicates: ps.duplicates,
                losses: ps.losses,
                timeouts: ps.timeouts,
                srtt_ms: ps.srtt_us as f64 / 1e3,
                outcome: outcome(p),
                answered: p.established,
                corrupt_packets: ps.corrupt_packets,
                banned: ps.banned,
            }
        })
        .collect();
    FetchReport {
        content: content_id_hex(&config.content),
        output: config.output.clone(),
        bytes,
        scheduler: download.scheduler_name().to_owned(),
        cc: pcdn_core::cc::canonical(&config.cc).unwrap_or(&config.cc).to_owned(),
        goodput_mbps: s.goodput_bps() / 1e6,
        ofo_mean_bytes: s.ofo_mean_bytes(),
        ofo_max_bytes: s.ofo_max_bytes() as f64,
        wait_mean_ms: ms(s.wait_mean()),
        wait_p99_ms: ms(s.wait_p99()),
        completion_s: s.completion_time().map(|d| d.as_secs_f64()),
        waste: s.waste(),
        request_waste: s.request_waste(),
        cdn_share: s.cdn_share(),
        blocks_rejected: s.blocks_rejected,
        banned_paths: path_reports
            .iter()
            .filter(|p| p.banned)
            .map(|p| p.name.clone())
            .collect(),
        paths: path_reports,
        elapsed_s: 0.0,
        resumed_bytes: 0,
    }
}

/// The report of a fetch whose partial file held every block already: nothing was fetched.
pub(super) fn nothing_to_fetch(config: &FetchConfig, elapsed: Duration) -> FetchReport {
    FetchReport {
        elapsed_s: elapsed.as_secs_f64(),
        ..FetchReport::empty(
            content_id_hex(&config.content),
            config.output.clone(),
            config.scheduler.clone(),
            pcdn_core::cc::canonical(&config.cc).unwrap_or(&config.cc).to_owned(),
        )
    }
}

impl FetchReport {
    /// A report of nothing fetched: every metric zero, no path.
    fn empty(content: String, output: PathBuf, scheduler: String, cc: String) -> FetchReport {
        FetchReport {
            content,
            output,
            bytes: 0,
            scheduler,
            cc,
            goodput_mbps: 0.0,
            ofo_mean_bytes: 0.0,
            ofo_max_bytes: 0.0,
            wait_mean_ms: 0.0,
            wait_p99_ms: 0.0,
            completion_s: None,
            waste: 0.0,
            request_waste: 0.0,
            cdn_share: 0.0,
            blocks_rejected: 0,
            banned_paths: Vec::new(),
            paths: Vec::new(),
            elapsed_s: 0.0,
            resumed_bytes: 0,
        }
    }
}

/// The outcome of a path whose server never answered its HELLO.
const NO_ANSWER: &str = "no answer";

/// A path's outcome in a word or two.
fn outcome(path: &PathEntry) -> String {
    match &path.failure {
        None | Some(PathError::Timeout) if !path.established => NO_ANSWER.to_owned(),
        None => "ok".to_owned(),
        Some(e) => short_outcome(e),
    }
}

fn short_outcome(error: &PathError) -> String {
    match error {
        PathError::Timeout => "timeout".to_owned(),
        PathError::Rejected(reason) => format!("rejected: {}", crate::metrics::reason_name(*reason as u8)),
        PathError::Mismatch => "mismatch".to_owned(),
        PathError::Corrupt => "corrupt".to_owned(),
    }
}

impl FetchReport {
    /// The report as text for a person: the metrics, then one line per path.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "fetched {} -> {}: {} bytes in {:.2} s ({} / {})",
            self.content,
            self.output.display(),
            self.bytes,
            self.elapsed_s,
            self.scheduler,
            self.cc
        );
        if self.resumed_bytes > 0 {
            let _ = writeln!(
                out,
                "resumed: {} bytes of verified blocks were in the partial file already",
                self.resumed_bytes
            );
        }
        let _ = writeln!(
            out,
            "goodput {:.2} Mbit/s, completion {}",
            self.goodput_mbps,
            self.completion_s
                .map_or_else(|| "-".to_owned(), |c| format!("{c:.3} s"))
        );
        let _ = writeln!(
            out,
            "ofo mean {:.1} kB, max {:.1} kB; wait mean {:.2} ms, p99 {:.2} ms",
            self.ofo_mean_bytes / 1e3,
            self.ofo_max_bytes / 1e3,
            self.wait_mean_ms,
            self.wait_p99_ms
        );
        let _ = writeln!(
            out,
            "waste {:.3}, request waste {:.3}, cdn share {:.3}, blocks rejected {}, banned paths: {}",
            self.waste,
            self.request_waste,
            self.cdn_share,
            self.blocks_rejected,
            if self.banned_paths.is_empty() {
                "none".to_owned()
            } else {
                self.banned_paths.join(", ")
            }
        );
        let name_width = self.paths.iter().map(|p| p.name.len()).max().unwrap_or(4).max(4);
        let _ = writeln!(
            out,
            "{:<name_width$}  {:>6}  {:>12}  {:>8}  {:>6}  {:>8}  outcome",
            "path", "origin", "bytes", "share", "losses", "srtt ms"
        );
        let total: u64 = self.paths.iter().map(|p| p.bytes).sum();
        for p in &self.paths {
            let share = if total == 0 { 0.0 } else { p.bytes as f64 / total as f64 };
            let _ = writeln!(
                out,
                "{:<name_width$}  {:>6}  {:>12}  {:>8.3}  {:>6}  {:>8.2}  {}",
                p.name,
                if p.origin { "yes" } else { "no" },
                p.bytes,
                share,
                p.losses,
                p.srtt_ms,
                p.outcome
            );
        }
        if self.paths.iter().any(|p| p.outcome == NO_ANSWER) {
            let _ = writeln!(
                out,
                "no answer: the server never answered the fetch's HELLO, so the fetch went on without it; \
                 check that its `pcdn serve` runs and that UDP to its address gets through"
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_report() -> FetchReport {
        FetchReport {
            bytes: 10,
            goodput_mbps: 1.0,
            ofo_mean_bytes: 2.0,
            ofo_max_bytes: 3.0,
            wait_mean_ms: 4.0,
            wait_p99_ms: 5.0,
            completion_s: Some(6.0),
            waste: 0.1,
            request_waste: 0.2,
            cdn_share: 0.3,
            elapsed_s: 7.0,
            ..FetchReport::empty(
                "00".repeat(32),
                PathBuf::from("out"),
                "weave".to_owned(),
                "cubic".to_owned(),
            )
        }
    }

    #[test]
    fn json_metric_names_are_the_simulators() {
        let row = pcdn_sim::scenario::Row {
            scheduler: String::new(),
            cc: String::new(),
            transport: String::new(),
            sweep: None,
            repeats: 1,
            goodput_mbps: 0.0,
            capacity_mbps: 0.0,
            aggregation: 0.0,
            ofo_mean_bytes: 0.0,
            ofo_max_bytes: 0.0,
            wait_mean_ms: 0.0,
            wait_p99_ms: 0.0,
            completion_s: None,
            bound_s: None,
            efficiency: None,
            waste: 0.0,
            request_waste: 0.0,
            cdn_share: 0.0,
            completed: 1,
        };
        let row = serde_json::to_value(row).unwrap();
        let report = serde_json::to_value(sample_report()).unwrap();
        for key in [
            "scheduler",
            "cc",
            "goodput_mbps",
            "ofo_mean_bytes",
            "ofo_max_bytes",
            "wait_mean_ms",
            "wait_p99_ms",
            "completion_s",
            "waste",
            "request_waste",
            "cdn_share",
        ] {
            assert!(row.get(key).is_some(), "pcdn sim --json has no {key}");
            assert!(report.get(key).is_some(), "the fetch report has no {key}");
        }
        assert!(
            report.get("aggregation").is_none(),
            "aggregation needs capacities a network does not tell"
        );
    }

    #[test]
    fn the_text_report_lists_the_metrics_and_paths() {
        let mut report = sample_report();
        report.paths.push(PathReport {
            name: "edge-1".to_owned(),
            addr: "127.0.0.1:1".to_owned(),
            origin: false,
            bytes: 10,
            packets: 1,
            requests: 1,
            duplicates: 0,
            losses: 0,
            timeouts: 0,
            srtt_ms: 1.0,
            corrupt_packets: 0,
            outcome: "ok".to_owned(),
            answered: true,
            banned: false,
        });
        let text = report.to_text();
        for needle in [
            "goodput 1.00 Mbit/s",
            "wait mean 4.00 ms, p99 5.00 ms",
            "cdn share 0.300",
            "edge-1",
        ] {
            assert!(text.contains(needle), "{needle} missing from:\n{text}");
        }
    }
}
