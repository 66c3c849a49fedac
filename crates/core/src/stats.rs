//! A download's metrics, with the one definition of each that the whole project uses.
//!
//! - goodput: in-order bytes delivered ÷ (last delivery − first request);
//! - out-of-order (OFO) size: bytes received but not yet deliverable, sampled at every arrival;
//! - waiting time: per packet, in-order delivery time − arrival time;
//! - waste: (data packets received − packets needed) ÷ packets needed; request waste:
//!   (requests sent − packets needed) ÷ packets needed (Pscheduler §V);
//! - CDN share: bytes from the origin ÷ all bytes received (MPRD's CDN load);
//! - with a video attached, the player's QoE (`crate::player::PlayerStats`).

use crate::path::PathStats;
use crate::player::PlayerStats;
use crate::time::{Duration, Instant};

/// When one task (a byte range, e.g. a video segment) started and completed.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct TaskStats {
    pub start_byte: u64,
    pub end_byte: u64,
    /// Nanoseconds since the epoch of the caller's clock.
    pub started_ns: Option<u64>,
    pub completed_ns: Option<u64>,
}

impl TaskStats {
    pub fn completion_time(&self) -> Option<Duration> {
        Some(Duration::from_nanos(self.completed_ns?.checked_sub(self.started_ns?)?))
    }
}

/// Everything measured about one download.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Stats {
    /// First request sent.
    pub started: Option<Instant>,
    /// Last byte delivered in order (the download is complete).
    pub finished: Option<Instant>,
    /// Time of the latest in-order delivery.
    pub last_delivery: Option<Instant>,
    /// Distinct packets the tasks need.
    pub packets_needed: u64,
    /// Packets delivered in order so far.
    pub packets_delivered: u64,
    /// Bytes delivered in order so far.
    pub bytes_delivered: u64,
    /// Requests sent, all paths (one per sequence number asked for).
    pub requests_sent: u64,
    /// DATA packets received, duplicates included.
    pub packets_received: u64,
    /// Payload bytes received, duplicates included.
    pub bytes_received: u64,
    /// DATA packets for sequence numbers already received.
    pub duplicates: u64,
    /// Requests declared lost.
    pub losses: u64,
    /// DATA packets dropped as not matching any request or the content, or from a banned path.
    pub invalid: u64,
    pub ofo_sum: u128,
    pub ofo_samples: u64,
    pub ofo_max: u64,
    /// Waiting time of each delivered packet, in microseconds.
    #[serde(skip)]
    pub waits_us: Vec<u32>,
    pub tasks: Vec<TaskStats>,
    pub paths: Vec<PathStats>,
    /// Blocks whose hash matched the manifest (only with `DownloadConfig::verify`).
    #[serde(skip_serializing_if = "is_zero")]
    pub blocks_verified: u64,
    /// Blocks whose hash did not match: their packets were fetched again.
    #[serde(skip_serializing_if = "is_zero")]
    pub blocks_rejected: u64,
    /// Packets asked again of another path by MPTCP's opportunistic retransmission (only with
    /// `Transport::Subflow { opportunistic: true }`).
    #[serde(skip_serializing_if = "is_zero")]
    pub reinjections: u64,
    /// Window cuts of paths that held up the reorder buffer (same transport).
    #[serde(skip_serializing_if = "is_zero")]
    pub penalties: u64,
    /// The player's QoE as of the download's latest input (only with `DownloadConfig::video`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub player: Option<PlayerStats>,
}

/// Counters that only verification moves are left out of the JSON while they are zero, so
/// that reports of downloads without a manifest keep their shape.
pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Stats {
    /// Time from the first request to the last in-order delivery.
    pub fn elapsed(&self) -> Option<Duration> {
        Some(self.last_delivery? - self.started?)
    }

    /// Whole-content completion time (first request to last byte), once complete.
    pub fn completion_time(&self) -> Option<Duration> {
        Some(self.finished? - self.started?)
    }

    /// Goodput in bit/s.
    pub fn goodput_bps(&self) -> f64 {
        match self.elapsed() {
            Some(t) if !t.is_zero() => self.bytes_delivered as f64 * 8.0 / t.as_secs_f64(),
            _ => 0.0,
        }
    }

    /// Goodput ÷ aggregate capacity (bit/s).
    pub fn aggregation(&self, capacity_bps: f64) -> f64 {
        if capacity_bps > 0.0 {
            self.goodput_bps() / capacity_bps
        } else {
            0.0
        }
    }

    pub fn ofo_mean_bytes(&self) -> f64 {
        if self.ofo_samples == 0 {
            0.0
        } else {
            self.ofo_sum as f64 / self.ofo_samples as f64
        }
    }

    pub fn ofo_max_bytes(&self) -> u64 {
        self.ofo_max
    }

    pub fn wait_mean(&self) -> Duration {
        if self.waits_us.is_empty() {
            return Duration::ZERO;
        }
        let sum: u64 = self.waits_us.iter().map(|&w| u64::from(w)).sum();
        Duration::from_micros(sum / self.waits_us.len() as u64)
    }

    /// The `q` quantile (0..=1) of the waiting time, nearest rank.
    pub fn wait_quantile(&self, q: f64) -> Duration {
        if self.waits_us.is_empty() {
            return Duration::ZERO;
        }
        let mut w = self.waits_us.clone();
        let rank = ((q.clamp(0.0, 1.0) * w.len() as f64).ceil() as usize).clamp(1, w.len()) - 1;
        let (_, v, _) = w.select_nth_unstable(rank);
        Duration::from_micros(u64::from(*v))
    }

    pub fn wait_p99(&self) -> Duration {
        self.wait_quantile(0.99)
    }

    /// (data packets received − packets needed) ÷ packets needed.
    pub fn waste(&self) -> f64 {
        ratio_over(self.packets_received, self.packets_needed)
    }

    /// (requests sent − packets needed) ÷ packets needed, as Pscheduler counts waste.
    pub fn request_waste(&self) -> f64 {
        ratio_over(self.requests_sent, self.packets_needed)
    }

    /// Bytes from the origin ÷ all bytes received.
    pub fn cdn_share(&self) -> f64 {
        let origin: u64 = self.paths.iter().filter(|p| p.origin).map(|p| p.bytes).sum();
        let all: u64 = self.paths.iter().map(|p| p.bytes).sum();
        if all == 0 { 0.0 } else { origin as f64 / all as f64 }
    }

    pub(crate) fn sample_ofo(&mut self, bytes: u64) {
        self.ofo_sum += u128::from(bytes);
        self.ofo_samples += 1;
        self.ofo_max = self.ofo_max.max(bytes);
    }
}

fn ratio_over(count: u64, needed: u64) -> f64 {
    if needed == 0 {
        0.0
    } else {
        count.saturating_sub(needed) as f64 / needed as f64
    }
}
