//! A whole PCDN in virtual time: viewers arriving over time, edge devices and the CDN origin,
//! each viewer a real `Download` with the player model and each server a real
//! `ServerSession`, every packet through the link model.
//!
//! What it answers: how much of the traffic leaves the CDN for the edges, what the viewers see
//! at the median and at the tail, and how the viewers' scheduler moves both. Viewers arrive as
//! a Poisson process, pick a video by a Zipf law, watch a fraction of it and leave (their
//! download stops). Each viewer asks for the edges that hold its video ranked as the tracker
//! ranks them (most free upload first) plus the origin, as `pcdn fetch` does.
//!
//! The same seed gives the same run, bit for bit, whatever the scheduler: arrivals, choices
//! and link draws come from generators derived from the seed alone.

pub(crate) mod draw;
mod placement;
mod world;

pub use draw::ZipfTable;
pub use placement::PlacementSpec;
pub use world::{FleetWorld, run, run_observed};

use crate::link::LinkConfig;
use pcdn_core::player::{JumpToCdn, VideoSpec};
use pcdn_core::scheduler::WeaveConfig;
use pcdn_core::time::Duration;

/// One edge device.
#[derive(Clone, Debug)]
pub struct DeviceSpec {
    pub name: String,
    /// Device → viewers: its upload (the rate every viewer it serves shares) and its delay.
    pub uplink: LinkConfig,
    /// Viewers → device (requests).
    pub downlink: LinkConfig,
    /// Indices into [`FleetSpec::videos`] the device holds from the start.
    pub holds: Vec<usize>,
    /// Bytes of videos the placement may put on it (`pcdn serve --cache-size`).
    pub cache_bytes: u64,
    /// When the device goes down (its queued requests are lost) and when it comes back, if
    /// it does (a restart: new sessions, its cache kept), in time order.
    pub outages: Vec<Outage>,
}

/// One time a device is down.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outage {
    pub at: Duration,
    /// `None`: it never comes back.
    pub back: Option<Duration>,
}

/// The viewers: how many, when they arrive, what they watch and how they are connected.
#[derive(Clone, Debug)]
pub struct ViewerSpec {
    /// Viewers arriving during the run.
    pub count: usize,
    /// They arrive as a Poisson process of rate `count / arrival_window`.
    pub arrival_window: Duration,
    /// Relative arrival rates over equal slices of the window (24 for a day's hours); empty:
    /// a constant rate.
    pub load_profile: Vec<f64>,
    /// Zipf exponent of the videos' popularity: video `k` (from 0) is picked with weight
    /// `1 / (k + 1)^zipf`.
    pub zipf: f64,
    /// Each viewer watches a fraction of its video drawn uniformly from this range, then leaves.
    pub watch: (f64, f64),
    /// The viewer's access line, downstream (shared by all its servers).
    pub access_down: LinkConfig,
    /// The viewer's access line, upstream (its requests).
    pub access_up: LinkConfig,
    /// Edges a viewer asks the tracker for (the origin comes on top, as in `pcdn fetch`).
    pub edges_per_viewer: usize,
    /// Douyin's fallback rule in every viewer's player, if on.
    pub jump_to_cdn: Option<JumpToCdn>,
}

/// A fleet: the videos, the viewers, the devices and the origin.
#[derive(Clone, Debug)]
pub struct FleetSpec {
    pub videos: Vec<VideoSpec>,
    pub viewers: ViewerSpec,
    pub devices: Vec<DeviceSpec>,
    /// Origin → viewers (the CDN: it holds every video).
    pub origin_uplink: LinkConfig,
    /// Viewers → origin.
    pub origin_downlink: LinkConfig,
    /// Payload bytes per packet.
    pub packet_size: u32,
    /// Bytes a viewer may request beyond its in-order cursor.
    pub reorder_buffer: u64,
    /// Virtual-time limit of the run; viewers still watching then are counted as they are.
    pub duration: Duration,
    /// How videos get onto the edges.
    pub placement: PlacementSpec,
    /// weave's switches and constants, for the viewers weave schedules.
    pub weave: WeaveConfig,
}

/// What one viewer saw.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewerRecord {
    /// Arrival order, from 0.
    pub index: usize,
    /// Index of the viewer's scheduler among the run's (0 with one scheduler).
    pub group: usize,
    pub video: usize,
    pub arrived_s: f64,
    /// Seconds from arrival to the first frame; `None` if it never played.
    pub first_frame_s: Option<f64>,
    pub rebuffer_ratio: f64,
    pub rebuffers: u64,
    pub jump_to_cdn_rate: f64,
    /// Payload bytes received from the origin and from edges (duplicates included).
    pub origin_bytes: u64,
    pub edge_bytes: u64,
    /// Packets received twice.
    pub duplicate_packets: u64,
    pub received_packets: u64,
    /// Out-of-order bytes waiting in the receive buffer, averaged over packet arrivals
    /// (Pscheduler's Fig. 10 metric).
    pub ofo_mean_bytes: f64,
    /// Mean time a packet waited between its arrival and its in-order delivery, ms (Fig. 11).
    pub wait_mean_ms: f64,
    /// Bytes delivered in order ÷ time from the first request to the last in-order delivery,
    /// bit/s (the continuous speed of Fig. 11).
    pub goodput_bps: f64,
    /// Payload bytes received (duplicates included) over the same time, bit/s (Fig. 12).
    pub download_speed_bps: f64,
    /// (requests sent − packets delivered) ÷ packets delivered: Pscheduler's waste (Fig. 14),
    /// over what the viewer took rather than the whole video, since it leaves part-way.
    pub request_waste: f64,
    /// The viewer watched what it came for (or the whole video) before the run ended.
    pub finished: bool,
}

/// What one fleet run measured.
#[derive(Clone, Debug)]
pub struct FleetOutcome {
    pub viewers: Vec<ViewerRecord>,
    /// Payload bytes each device sent, in [`FleetSpec::devices`] order.
    pub device_bytes: Vec<u64>,
    /// Payload bytes the origin sent in each 5-minute window of the run.
    pub origin_window_bytes: Vec<u64>,
    /// Mean upload in use ÷ upload capacity over the devices' time alive.
    pub edge_utilization: f64,
    /// Payload bytes the devices received to fill their caches.
    pub fill_bytes: u64,
    /// Virtual time when the run stopped, in seconds.
    pub end_s: f64,
    /// The run minute by minute (the last window ends with the run).
    pub timeline: Vec<Sample>,
}

/// One [`SAMPLE_WINDOW`] of a fleet run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Sample {
    /// End of the window, seconds.
    pub t_s: f64,
    /// Payload bytes the origin and the devices sent in the window (to viewers and fills).
    pub origin_bytes: u64,
    pub edge_bytes: u64,
    /// What the live devices could have sent in the window, bytes.
    pub edge_capacity_bytes: u64,
    /// Viewers watching at the window's end, and those of them stalled.
    pub viewers: usize,
    pub stalled: usize,
}

impl Sample {
    /// The origin's share of the bytes sent in the window.
    pub fn cdn_share(&self) -> f64 {
        let all = self.origin_bytes + self.edge_bytes;
        if all == 0 {
            0.0
        } else {
            self.origin_bytes as f64 / all as f64
        }
    }
    pub fn edge_utilization(&self) -> f64 {
        if self.edge_capacity_bytes == 0 {
            0.0
        } else {
            self.edge_bytes as f64 / self.edge_capacity_bytes as f64
        }
    }
    pub fn stalled_share(&self) -> f64 {
        if self.viewers == 0 {
            0.0
        } else {
            self.stalled as f64 / self.viewers as f64
        }
    }
}

/// Width of the timeline's windows.
pub const SAMPLE_WINDOW: Duration = Duration::from_secs(60);

/// Width of the windows the origin's rate is billed over (95th-percentile billing).
pub const BILLING_WINDOW: Duration = Duration::from_secs(300);

impl FleetOutcome {
    /// The outcome as group `group`'s viewers saw it: their records only; what belongs to the
    /// fleet (device bytes, the origin's windows, fills, the timeline) stays whole.
    pub fn group(&self, group: usize) -> FleetOutcome {
        FleetOutcome {
            viewers: self.viewers.iter().filter(|v| v.group == group).cloned().collect(),
            device_bytes: self.device_bytes.clone(),
            origin_window_bytes: self.origin_window_bytes.clone(),
            edge_utilization: self.edge_utilization,
            fill_bytes: self.fill_bytes,
            end_s: self.end_s,
            timeline: self.timeline.clone(),
        }
    }

    /// Bytes from the origin ÷ all bytes the viewers received.
    pub fn cdn_share(&self) -> f64 {
        let origin: u64 = self.viewers.iter().map(|v| v.origin_bytes).sum();
        let all: u64 = self.viewers.iter().map(|v| v.origin_bytes + v.edge_bytes).sum();
        if all == 0 { 0.0 } else { origin as f64 / all as f64 }
    }

    /// The 95th percentile of the origin's upload rate over the billing windows, in Mbit/s
    /// (the last window counts over the part of it the run lasted).
    pub fn cdn_p95_mbps(&self) -> f64 {
        let window_s = BILLING_WINDOW.as_secs_f64();
        let mut rates: Vec<f64> = self
            .origin_window_bytes
            .iter()
            .enumerate()
            .map(|(i, &bytes)| {
                let span = (self.end_s - i as f64 * window_s).clamp(1e-9, window_s);
                bytes as f64 * 8.0 / span / 1e6
            })
            .collect();
        quantile(&mut rates, 0.95).unwrap_or(0.0)
    }

    /// First-frame latency at quantile `q` over the viewers that saw a frame, in seconds.
    pub fn first_frame_s(&self, q: f64) -> Option<f64> {
        let mut v: Vec<f64> = self.viewers.iter().filter_map(|v| v.first_frame_s).collect();
        quantile(&mut v, q)
    }

    /// Mean rebuffer ratio over the viewers.
    pub fn rebuffer_ratio(&self) -> f64 {
        mean(self.viewers.iter().map(|v| v.rebuffer_ratio))
    }

    /// Fraction of the viewers that stalled at least once after their first frame.
    pub fn stalled_viewers(&self) -> f64 {
        mean(self.viewers.iter().map(|v| if v.rebuffers > 0 { 1.0 } else { 0.0 }))
    }

    /// Mean jump-to-CDN rate over the viewers.
    pub fn jump_to_cdn_rate(&self) -> f64 {
        mean(self.viewers.iter().map(|v| v.jump_to_cdn_rate))
    }

    /// Duplicate packets ÷ packets received, over all viewers.
    pub fn waste(&self) -> f64 {
        let dup: u64 = self.viewers.iter().map(|v| v.duplicate_packets).sum();
        let all: u64 = self.viewers.iter().map(|v| v.received_packets).sum();
        if all == 0 { 0.0 } else { dup as f64 / all as f64 }
    }
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

/// The nearest-rank quantile (the smallest value with at least `q` of the values at or below it).
fn quantile(values: &mut [f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    Some(values[rank - 1])
}

/// Why a fleet could not be built.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("unknown scheduler {0:?} (see `pcdn sim --list`)")]
    UnknownScheduler(String),
    #[error("unknown congestion control {0:?} (see `pcdn sim --list`)")]
    UnknownCc(String),
    #[error("a fleet needs at least one video")]
    NoVideos,
    #[error("video {index}: {reason}")]
    Video { index: usize, reason: String },
    #[error("device {device:?} holds video {video}, but there are only {videos} videos")]
    UnknownVideo {
        device: String,
        video: usize,
        videos: usize,
    },
    #[error("{what}: {source}")]
    Link {
        what: String,
        source: crate::link::LinkError,
    },
    #[error("viewer {index}: the download cannot be set up: {reason}")]
    Download { index: usize, reason: String },
    #[error("device {0:?}: outages must be in time order, each back after it began and before the next")]
    Outages(String),
    #[error("placement: {0}")]
    Placement(String),
    #[error("viewers.load_profile must be rates >= 0, at least one of them positive")]
    LoadProfile,
    #[error("viewers.watch must be two fractions 0 < a <= b <= 1, got {0:?}")]
    Watch((f64, f64)),
}

#[cfg(test)]
mod tests;
