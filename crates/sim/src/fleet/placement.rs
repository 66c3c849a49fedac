//! Placement in the fleet's loop: the viewers' lookups counted with exponential decay (as the
//! tracker counts them), rounds of the tracker's own placement engine (`pcdn-placement`) at an
//! interval, and the fills and evictions a round asks for.

use std::collections::{BTreeMap, BTreeSet};

use pcdn_core::time::{Duration, Instant};
use pcdn_placement::{Assignment, Content, Device, Input, PlacementConfig, Policy};

/// How the fleet places videos on its edges.
#[derive(Clone, Debug)]
pub struct PlacementSpec {
    /// A policy of `pcdn_placement::POLICIES`, or `top` (every device holds the
    /// `top_videos` most popular videos from the start, and no round runs).
    pub policy: String,
    /// Time between rounds (the tracker's `--placement-interval`).
    pub interval: Duration,
    /// Half-life of the lookup counts (the tracker's `--popularity-half-life`).
    pub half_life: Duration,
    /// Videos every device holds from the start under `top`.
    pub top_videos: usize,
    pub config: PlacementConfig,
}

impl PlacementSpec {
    /// `policy` with the tracker's defaults: rounds every 10 s, counts halving in 10 min.
    pub fn named(policy: &str) -> PlacementSpec {
        PlacementSpec {
            policy: policy.to_owned(),
            interval: Duration::from_secs(10),
            half_life: Duration::from_secs(600),
            top_videos: 0,
            config: PlacementConfig::default(),
        }
    }

    /// The engine's policy, `None` for `top` and `none` (no rounds run).
    pub(super) fn engine(&self) -> Result<Option<Box<dyn Policy>>, String> {
        match self.policy.as_str() {
            "top" => Ok(None),
            name => {
                let policy = pcdn_placement::policy(name).ok_or_else(|| {
                    format!(
                        "unknown placement {name:?}: expected top or one of {}",
                        pcdn_placement::POLICIES.join(", ")
                    )
                })?;
                self.config.validate()?;
                Ok(policy.places().then_some(policy))
            }
        }
    }
}

/// Lookups per video, decayed: a count `c` stands for `c · ln 2 / half_life` lookups/s.
pub(super) struct Demand {
    half_life_s: f64,
    counts: Vec<f64>,
    updated: Vec<Instant>,
    last_lookup: Vec<Option<Instant>>,
}

impl Demand {
    pub(super) fn new(videos: usize, half_life: Duration) -> Demand {
        Demand {
            half_life_s: half_life.as_secs_f64().max(1e-3),
            counts: vec![0.0; videos],
            updated: vec![Instant::ZERO; videos],
            last_lookup: vec![None; videos],
        }
    }

    fn decayed(&self, video: usize, now: Instant) -> f64 {
        let age = (now - self.updated[video]).as_secs_f64();
        self.counts[video] * (-age / self.half_life_s).exp2()
    }

    pub(super) fn record(&mut self, video: usize, now: Instant) {
        self.counts[video] = self.decayed(video, now) + 1.0;
        self.updated[video] = now;
        self.last_lookup[video] = Some(now);
    }

    /// Lookups per second.
    fn rate(&self, video: usize, now: Instant) -> f64 {
        self.decayed(video, now) * std::f64::consts::LN_2 / self.half_life_s
    }
}

/// One device as a round sees it.
pub(super) struct DeviceState<'a> {
    pub name: &'a str,
    pub upload_bps: u64,
    pub load_bps: u64,
    pub cache_bytes: u64,
    pub alive: bool,
    pub holds: BTreeSet<usize>,
}

/// Runs one round: each device's videos after it, by device index.
pub(super) fn round(
    policy: &dyn Policy,
    spec: &PlacementSpec,
    devices: &[DeviceState<'_>],
    sizes: &[(u64, u64)],
    demand: &Demand,
    previous: &Assignment,
    now: Instant,
) -> (Assignment, Vec<BTreeSet<usize>>) {
    let now_ms = (now - Instant::ZERO).as_millis() as u64;
    let input = Input {
        devices: devices
            .iter()
            .map(|d| Device {
                id: d.name.to_owned(),
                upload_capacity_bps: d.upload_bps,
                upload_bps: d.load_bps.min(d.upload_bps),
                disk_bytes: d.cache_bytes,
                healthy: d.alive,
                region: None,
                holds: d.holds.iter().map(|&v| super::world::content_id(v)).collect(),
            })
            .collect(),
        contents: sizes
            .iter()
            .enumerate()
            .filter_map(|(video, &(size, bitrate))| {
                let last = demand.last_lookup[video]?;
                Some(Content {
                    id: super::world::content_id(video),
                    size,
                    bitrate_bps: bitrate,
                    // As the tracker: lookups/s × the content's size in bits.
                    demand_bps: demand.rate(video, now) * size as f64 * 8.0,
                    last_lookup_ms: (last - Instant::ZERO).as_millis() as u64,
                })
            })
            .collect(),
        previous: previous.clone(),
        now_ms,
    };
    let assignment = policy.place(&input, &spec.config);
    let by_name: BTreeMap<&str, usize> = devices.iter().enumerate().map(|(i, d)| (d.name, i)).collect();
    let mut videos = vec![BTreeSet::new(); devices.len()];
    for (name, contents) in &assignment {
        if let Some(&i) = by_name.get(name.as_str()) {
            videos[i] = contents.iter().filter_map(super::world::video_of).collect();
        }
    }
    (assignment, videos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_lookup_rate_reads_back_from_the_decayed_count() {
        let mut demand = Demand::new(2, Duration::from_secs(60));
        // One lookup a second for ten minutes (ten half-lives): the count settles.
        for s in 0..600 {
            demand.record(0, Instant::ZERO + Duration::from_secs(s));
        }
        let rate = demand.rate(0, Instant::ZERO + Duration::from_secs(600));
        assert!((0.95..1.05).contains(&rate), "{rate}");
        assert_eq!(demand.rate(1, Instant::ZERO + Duration::from_secs(600)), 0.0);
        // A half-life later, half the rate.
        let later = demand.rate(0, Instant::ZERO + Duration::from_secs(660));
        assert!((later / rate - 0.5).abs() < 0.01, "{later} vs {rate}");
    }
}
