//! Fleet scenario files: a `[fleet]` table describes a whole PCDN (viewers, videos, devices,
//! the origin), with per-device and per-video values drawn from distributions; `[client]`
//! names the schedulers and congestion controls to compare (docs/scenarios.md, "Fleets").

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

use super::tree::Tree;
use super::{Ctx, RawClient, ScenarioError, default_duration, default_repeat, default_seed};
use super::{Scenario, SourceFile};
use crate::fleet::{DeviceSpec, FleetSpec, Outage, PlacementSpec, ViewerSpec, draw};
use crate::link::{LinkConfig, Loss, QueueLimit};
use crate::units;
use pcdn_core::player::{JumpToCdn, VideoSpec};
use pcdn_core::scheduler::WeaveConfig;
use std::path::Path;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// How the edges get their videos: the placement engine's policies (the tracker's
/// `--placement`), and `top`.
pub const PLACEMENTS: &[(&str, &str)] = &[
    (
        "none",
        "edges start empty and stay so: the CDN serves everything (the baseline)",
    ),
    (
        "top",
        "every device holds the `device_videos` most popular videos from the start",
    ),
    (
        "popularity",
        "placement rounds put replicas where demand is; edges fill over their links",
    ),
    (
        "on-miss",
        "a looked-up video too few devices hold goes to the least loaded devices",
    ),
];

/// A scenario file of either kind: paths to one viewer (`[[server]]`), or a fleet (`[fleet]`).
#[derive(Clone, Debug)]
pub enum AnyScenario {
    Paths(Scenario),
    Fleet(Box<FleetScenario>),
}

impl AnyScenario {
    /// Reads and validates a scenario file of either kind.
    pub fn load(path: &Path) -> Result<AnyScenario, ScenarioError> {
        let source = SourceFile::read(path, "the scenario")?;
        AnyScenario::parse(&source.text, &source.name, source.base_dir)
    }

    /// Parses scenario text: a fleet if it has a `[fleet]` table, else a paths scenario.
    pub fn parse(text: &str, file: &str, base_dir: &Path) -> Result<AnyScenario, ScenarioError> {
        let is_fleet = DeTable::parse(text).is_ok_and(|doc| doc.get_ref().contains_key("fleet"));
        if !is_fleet {
            return Scenario::parse(text, file, base_dir).map(AnyScenario::Paths);
        }
        let ctx = Ctx { file, text, base_dir };
        let doc = DeTable::parse(text).expect("parsed above");
        let span = doc.span();
        let tree: Tree = Spanned::new(span, DeValue::Table(doc.into_inner()));
        let raw: RawFleetDoc = ctx.deserialize(&tree)?;
        ctx.build_fleet(&tree, raw).map(|f| AnyScenario::Fleet(Box::new(f)))
    }
}

/// A loaded fleet scenario: the fleet is drawn anew from each run's seed.
#[derive(Clone, Debug)]
pub struct FleetScenario {
    pub name: String,
    pub file: String,
    pub seed: u64,
    pub repeat: u32,
    pub schedulers: Vec<String>,
    pub ccs: Vec<String>,
    pub placements: Vec<String>,
    pub duration: Duration,
    pub reorder_buffer: u64,
    /// weave's switches and constants, when weave is among the schedulers.
    pub weave: WeaveConfig,
    /// The schedulers share each run, viewers split among them at random (an A/B test),
    /// instead of one run per scheduler.
    pub ab_test: bool,
    fleet: Fleet,
}

/// One fleet run.
#[derive(Clone, Debug)]
pub struct FleetRun<'a> {
    pub placement: &'a str,
    /// The viewers' schedulers: one, or all of them in an A/B test.
    pub schedulers: Vec<&'a str>,
    pub cc: &'a str,
    pub repeat: u32,
    pub seed: u64,
}

impl FleetScenario {
    /// Every run: placement, then scheduler (all in one run in an A/B test), then congestion
    /// control, then repeat (seeds `seed`, `seed + 1`, ...); the runs of one seed meet the
    /// same fleet and viewers.
    pub fn runs(&self) -> Vec<FleetRun<'_>> {
        let groups: Vec<Vec<&str>> = if self.ab_test {
            vec![self.schedulers.iter().map(String::as_str).collect()]
        } else {
            self.schedulers.iter().map(|s| vec![s.as_str()]).collect()
        };
        let mut runs = Vec::new();
        for placement in &self.placements {
            for schedulers in &groups {
                for cc in &self.ccs {
                    for repeat in 0..self.repeat {
                        runs.push(FleetRun {
                            placement,
                            schedulers: schedulers.clone(),
                            cc,
                            repeat,
                            seed: self.seed.wrapping_add(u64::from(repeat)),
                        });
                    }
                }
            }
        }
        runs
    }

    /// The window the viewers arrive over.
    pub fn arrival_window(&self) -> Duration {
        self.fleet.arrival_window.unwrap_or(self.duration)
    }

    /// The fleet of one run: devices and videos drawn from `seed`, edges filled by `placement`.
    pub fn spec(&self, placement: &str, seed: u64) -> FleetSpec {
        let f = &self.fleet;
        let mut rng = ChaCha8Rng::seed_from_u64(draw::stream_seed(seed, "fleet"));
        let videos: Vec<VideoSpec> = (0..f.videos)
            .map(|_| {
                let bitrate = f.bitrate.sample(&mut rng).max(1.0) as u64;
                let duration = Duration::from_secs_f64(f.video_duration.sample(&mut rng).max(1.0));
                VideoSpec::new(bitrate, duration)
            })
            .collect();
        let holds: Vec<usize> = match placement {
            // Video k is the (k+1)-th most popular (the Zipf law ranks them by index).
            "top" => (0..f.device_videos.min(f.videos)).collect(),
            _ => Vec::new(),
        };
        let queue = QueueLimit::packets(f.queue_packets as u64);
        let devices = (0..f.devices)
            .map(|i| {
                let upload = f.device_upload.sample(&mut rng).max(1.0) as u64;
                let delay = Duration::from_secs_f64(f.device_delay.sample(&mut rng).max(0.0));
                let loss = f.device_loss.sample(&mut rng).clamp(0.0, 1.0);
                // Down until it joins (if it joins later than the start); then up for an
                // uptime draw, down for a downtime draw, and again, until the run ends;
                // without a downtime, down for good after the first uptime.
                let mut outages = Vec::new();
                let join = f.device_join.as_ref().map_or(0.0, |d| d.sample(&mut rng).max(0.0));
                if join > 0.0 {
                    outages.push(Outage {
                        at: Duration::ZERO,
                        back: Some(Duration::from_secs_f64(join)),
                    });
                }
                if let Some(uptime) = &f.device_uptime {
                    let mut t = join + uptime.sample(&mut rng).max(1e-3);
                    while t < self.duration.as_secs_f64() {
                        let back = f.device_downtime.as_ref().map(|d| t + d.sample(&mut rng).max(1e-3));
                        outages.push(Outage {
                            at: Duration::from_secs_f64(t),
                            back: back.map(Duration::from_secs_f64),
                        });
                        let Some(back) = back else { break };
                        t = back + uptime.sample(&mut rng).max(1e-3);
                    }
                }
                let mut uplink = LinkConfig::fixed(upload, delay).with_queue(queue);
                if loss > 0.0 {
                    uplink.loss = Loss::Bernoulli(loss);
                }
                let cache_bytes = f.device_cache.sample(&mut rng).max(0.0) as u64;
                DeviceSpec {
                    cache_bytes,
                    name: format!("edge{i}"),
                    uplink,
                    downlink: LinkConfig::fixed(f.access_up_rate.max(1_000_000), delay).with_queue(queue),
                    holds: holds.clone(),
                    outages,
                }
            })
            .collect();
        FleetSpec {
            weave: self.weave.clone(),
            videos,
            viewers: ViewerSpec {
                count: f.viewers,
                arrival_window: f.arrival_window.unwrap_or(self.duration),
                load_profile: f.load_profile.clone(),
                zipf: f.zipf,
                watch: f.watch,
                access_down: LinkConfig::fixed(f.access_rate, f.access_delay).with_queue(queue),
                access_up: LinkConfig::fixed(f.access_up_rate, f.access_delay).with_queue(queue),
                edges_per_viewer: f.edges_per_viewer,
                jump_to_cdn: f.jump_to_cdn,
            },
            devices,
            origin_uplink: LinkConfig::fixed(f.origin_rate, f.origin_delay).with_queue(queue),
            origin_downlink: LinkConfig::fixed(f.origin_rate, f.origin_delay).with_queue(queue),
            packet_size: f.packet_size,
            reorder_buffer: self.reorder_buffer,
            duration: self.duration,
            placement: PlacementSpec {
                interval: f.placement_interval,
                half_life: f.popularity_half_life,
                top_videos: f.device_videos,
                ..PlacementSpec::named(placement)
            },
        }
    }
}

/// The `[fleet]` table, checked, values in bit/s, seconds and plain numbers.
#[derive(Clone, Debug)]
struct Fleet {
    viewers: usize,
    arrival_window: Option<Duration>,
    load_profile: Vec<f64>,
    videos: usize,
    bitrate: Dist,
    video_duration: Dist,
    zipf: f64,
    watch: (f64, f64),
    edges_per_viewer: usize,
    access_rate: u64,
    access_up_rate: u64,
    access_delay: Duration,
    devices: usize,
    device_upload: Dist,
    device_delay: Dist,
    device_loss: Dist,
    device_join: Option<Dist>,
    device_uptime: Option<Dist>,
    device_downtime: Option<Dist>,
    device_videos: usize,
    device_cache: Dist,
    placement_interval: Duration,
    popularity_half_life: Duration,
    origin_rate: u64,
    origin_delay: Duration,
    packet_size: u32,
    queue_packets: usize,
    jump_to_cdn: Option<JumpToCdn>,
}

/// A per-device or per-video value: fixed, or drawn from the run's seed.
#[derive(Clone, Debug, PartialEq)]
enum Dist {
    Fixed(f64),
    Uniform(f64, f64),
    Exponential { mean: f64 },
}

impl Dist {
    fn sample(&self, rng: &mut ChaCha8Rng) -> f64 {
        match *self {
            Dist::Fixed(v) => v,
            Dist::Uniform(lo, hi) => lo + (hi - lo) * rng.random::<f64>(),
            Dist::Exponential { mean } => -(1.0 - rng.random::<f64>()).ln() * mean,
        }
    }
}

// ---- the document as serde reads it ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFleetDoc {
    name: Option<String>,
    #[serde(default = "default_seed")]
    seed: u64,
    #[serde(default = "default_repeat")]
    repeat: u32,
    #[serde(default = "default_duration", deserialize_with = "units::de::duration")]
    duration: Duration,
    #[serde(default)]
    client: RawClient,
    fleet: RawFleet,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFleet {
    #[serde(default = "default_placements")]
    placement: Vec<String>,
    viewers: usize,
    #[serde(default, deserialize_with = "units::de::opt_duration")]
    arrival_window: Option<Duration>,
    #[serde(default)]
    load_profile: Vec<f64>,
    videos: usize,
    #[serde(default = "default_bitrate")]
    bitrate: RawDist,
    #[serde(default = "default_video_duration")]
    video_duration: RawDist,
    #[serde(default = "default_popularity")]
    popularity: RawZipf,
    #[serde(default = "default_watch")]
    watch: RawDist,
    #[serde(default = "default_edges_per_viewer")]
    edges_per_viewer: usize,
    #[serde(default = "default_access_rate", deserialize_with = "units::de::rate")]
    access_rate: u64,
    #[serde(default = "default_access_up_rate", deserialize_with = "units::de::rate")]
    access_up_rate: u64,
    #[serde(default = "default_access_delay", deserialize_with = "units::de::duration")]
    access_delay: Duration,
    devices: usize,
    device_upload: RawDist,
    #[serde(default = "default_device_delay")]
    device_delay: RawDist,
    #[serde(default = "default_device_loss")]
    device_loss: RawDist,
    device_join: Option<RawDist>,
    device_uptime: Option<RawDist>,
    device_downtime: Option<RawDist>,
    #[serde(default)]
    device_videos: usize,
    #[serde(default = "default_device_cache")]
    device_cache: RawDist,
    #[serde(default = "default_placement_interval", deserialize_with = "units::de::duration")]
    placement_interval: Duration,
    #[serde(default = "default_half_life", deserialize_with = "units::de::duration")]
    popularity_half_life: Duration,
    #[serde(default = "default_origin_rate", deserialize_with = "units::de::rate")]
    origin_rate: u64,
    #[serde(default = "default_origin_delay", deserialize_with = "units::de::duration")]
    origin_delay: Duration,
    #[serde(default = "super::default_packet_size")]
    packet_size: u32,
    #[serde(default = "default_queue_packets")]
    queue_packets: usize,
    #[serde(default)]
    ab_test: bool,
    jump_to_cdn: Option<super::RawJump>,
}

fn default_placements() -> Vec<String> {
    vec!["none".to_owned(), "top".to_owned()]
}
fn default_bitrate() -> RawDist {
    RawDist::Fixed(Scalar::Text("2mbit".into()))
}
fn default_video_duration() -> RawDist {
    RawDist::Fixed(Scalar::Text("60s".into()))
}
fn default_popularity() -> RawZipf {
    RawZipf { zipf: 0.8 }
}
fn default_watch() -> RawDist {
    RawDist::Fixed(Scalar::Number(1.0))
}
fn default_edges_per_viewer() -> usize {
    4
}
fn default_access_rate() -> u64 {
    50_000_000
}
fn default_access_up_rate() -> u64 {
    10_000_000
}
fn default_access_delay() -> Duration {
    Duration::from_millis(10)
}
fn default_device_delay() -> RawDist {
    RawDist::Fixed(Scalar::Text("20ms".into()))
}
fn default_device_loss() -> RawDist {
    RawDist::Fixed(Scalar::Number(0.0))
}
fn default_device_cache() -> RawDist {
    RawDist::Fixed(Scalar::Text("2GB".into()))
}
fn default_placement_interval() -> Duration {
    Duration::from_secs(10)
}
fn default_half_life() -> Duration {
    Duration::from_secs(600)
}
fn default_origin_rate() -> u64 {
    1_000_000_000
}
fn default_origin_delay() -> Duration {
    Duration::from_millis(20)
}
fn default_queue_packets() -> usize {
    100
}

#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum Scalar {
    Text(String),
    Number(f64),
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct RawUniform {
    uniform: [Scalar; 2],
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct RawExponential {
    exponential: Scalar,
}

#[derive(Deserialize, Clone)]
#[serde(untagged, expecting = "a value, { uniform = [low, high] } or { exponential = mean }")]
enum RawDist {
    Uniform(RawUniform),
    Exponential(RawExponential),
    Fixed(Scalar),
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct RawZipf {
    zipf: f64,
}

/// What a distribution's values are.
#[derive(Clone, Copy)]
enum Unit {
    Rate,
    Duration,
    Size,
    Number,
}

impl Ctx<'_> {
    /// Checks what serde cannot and builds the [`FleetScenario`].
    pub(super) fn build_fleet(&self, tree: &Tree<'_>, raw: RawFleetDoc) -> Result<FleetScenario, ScenarioError> {
        let err = |key: &str, message: String| self.err(tree, key, message);
        if raw.repeat == 0 {
            return Err(err("repeat", "expected at least 1 run per scheduler, got 0".into()));
        }
        if raw.duration.is_zero() {
            return Err(err(
                "duration",
                "expected a positive virtual-time limit such as \"1h\"".into(),
            ));
        }
        self.check_client(tree, &raw.client)?;
        let f = raw.fleet;
        for (i, p) in f.placement.iter().enumerate() {
            if !PLACEMENTS.iter().any(|(name, _)| name == p) {
                let known: Vec<&str> = PLACEMENTS.iter().map(|(n, _)| *n).collect();
                return Err(err(
                    &format!("fleet.placement.{i}"),
                    format!("unknown placement {p:?}: expected one of {}", known.join(", ")),
                ));
            }
        }
        if f.load_profile.iter().any(|w| !(w.is_finite() && *w >= 0.0))
            || (!f.load_profile.is_empty() && f.load_profile.iter().all(|&w| w == 0.0))
        {
            return Err(err(
                "fleet.load_profile",
                "expected relative arrival rates >= 0 over equal slices of the window, at least one positive \
                 (e.g. 24 hourly weights)"
                    .into(),
            ));
        }
        if f.placement_interval.is_zero() || f.popularity_half_life.is_zero() {
            let key = if f.placement_interval.is_zero() {
                "fleet.placement_interval"
            } else {
                "fleet.popularity_half_life"
            };
            return Err(err(key, "expected a positive duration such as \"10s\"".into()));
        }
        if f.ab_test && raw.client.schedulers.len() < 2 {
            return Err(err(
                "fleet.ab_test",
                "an A/B test splits the viewers among [client] schedulers: expected at least two".into(),
            ));
        }
        if f.placement.is_empty() {
            return Err(err("fleet.placement", "expected at least one placement policy".into()));
        }
        for (key, value) in [("fleet.viewers", f.viewers), ("fleet.videos", f.videos)] {
            if value == 0 {
                return Err(err(key, "expected at least 1".into()));
            }
        }
        if f.popularity.zipf.is_nan() || f.popularity.zipf < 0.0 {
            return Err(err(
                "fleet.popularity.zipf",
                format!("expected an exponent >= 0, got {}", f.popularity.zipf),
            ));
        }
        let dist = |key: &str, raw: &RawDist, unit: Unit| self.dist(tree, key, raw, unit);
        let watch = match dist("fleet.watch", &f.watch, Unit::Number)? {
            Dist::Fixed(v) => (v, v),
            Dist::Uniform(lo, hi) => (lo, hi),
            Dist::Exponential { .. } => {
                return Err(err(
                    "fleet.watch",
                    "expected a fraction or { uniform = [low, high] }".into(),
                ));
            }
        };
        if !(watch.0 > 0.0 && watch.0 <= watch.1 && watch.1 <= 1.0) {
            return Err(err(
                "fleet.watch",
                format!("expected fractions with 0 < low <= high <= 1, got {watch:?}"),
            ));
        }
        let device_loss = dist("fleet.device_loss", &f.device_loss, Unit::Number)?;
        let loss_ok = match device_loss {
            Dist::Fixed(v) => (0.0..1.0).contains(&v),
            Dist::Uniform(lo, hi) => (0.0..1.0).contains(&lo) && (0.0..1.0).contains(&hi),
            Dist::Exponential { .. } => false,
        };
        if !loss_ok {
            return Err(err(
                "fleet.device_loss",
                "expected a loss rate in [0, 1) or { uniform = [low, high] } of such rates".into(),
            ));
        }
        let fleet = Fleet {
            viewers: f.viewers,
            arrival_window: f.arrival_window,
            load_profile: f.load_profile.clone(),
            videos: f.videos,
            bitrate: dist("fleet.bitrate", &f.bitrate, Unit::Rate)?,
            video_duration: dist("fleet.video_duration", &f.video_duration, Unit::Duration)?,
            zipf: f.popularity.zipf,
            watch,
            edges_per_viewer: f.edges_per_viewer,
            access_rate: f.access_rate,
            access_up_rate: f.access_up_rate,
            access_delay: f.access_delay,
            devices: f.devices,
            device_upload: dist("fleet.device_upload", &f.device_upload, Unit::Rate)?,
            device_delay: dist("fleet.device_delay", &f.device_delay, Unit::Duration)?,
            device_loss,
            device_join: match &f.device_join {
                Some(d) => Some(dist("fleet.device_join", d, Unit::Duration)?),
                None => None,
            },
            device_uptime: match &f.device_uptime {
                Some(d) => Some(dist("fleet.device_uptime", d, Unit::Duration)?),
                None => None,
            },
            device_downtime: match &f.device_downtime {
                Some(d) => Some(dist("fleet.device_downtime", d, Unit::Duration)?),
                None => None,
            },
            device_videos: f.device_videos,
            device_cache: dist("fleet.device_cache", &f.device_cache, Unit::Size)?,
            placement_interval: f.placement_interval,
            popularity_half_life: f.popularity_half_life,
            origin_rate: f.origin_rate,
            origin_delay: f.origin_delay,
            packet_size: f.packet_size,
            queue_packets: f.queue_packets.max(1),
            jump_to_cdn: f.jump_to_cdn.as_ref().map(|j| JumpToCdn {
                buffer_below: j.buffer_below,
            }),
        };
        let max_payload = pcdn_core::wire::MAX_PAYLOAD as u32;
        if fleet.packet_size == 0 || fleet.packet_size > max_payload {
            return Err(err(
                "fleet.packet_size",
                format!("expected 1 to {max_payload} bytes, got {}", fleet.packet_size),
            ));
        }
        let name = raw.name.clone().unwrap_or_else(|| {
            std::path::Path::new(self.file)
                .file_stem()
                .map_or_else(|| self.file.to_owned(), |s| s.to_string_lossy().into_owned())
        });
        Ok(FleetScenario {
            name,
            file: self.file.to_owned(),
            seed: raw.seed,
            repeat: raw.repeat,
            schedulers: raw.client.schedulers,
            ccs: raw.client.cc,
            placements: f.placement,
            duration: raw.duration,
            reorder_buffer: raw.client.reorder_buffer,
            weave: raw.client.weave,
            ab_test: f.ab_test,
            fleet,
        })
    }

    fn dist(&self, tree: &Tree<'_>, key: &str, raw: &RawDist, unit: Unit) -> Result<Dist, ScenarioError> {
        let value = |s: &Scalar| -> Result<f64, String> {
            match (unit, s) {
                (Unit::Rate, Scalar::Text(t)) => units::parse_rate(t).map(|v| v as f64).map_err(|e| e.to_string()),
                (Unit::Duration, Scalar::Text(t)) => units::parse_duration(t)
                    .map(|d| d.as_secs_f64())
                    .map_err(|e| e.to_string()),
                (Unit::Size, Scalar::Text(t)) => units::parse_size(t).map(|v| v as f64).map_err(|e| e.to_string()),
                (Unit::Size, Scalar::Number(_)) => Err("expected a size such as \"2GB\"".to_owned()),
                (Unit::Number, Scalar::Number(n)) if n.is_finite() && *n >= 0.0 => Ok(*n),
                (Unit::Number, _) => Err("expected a number >= 0".to_owned()),
                (Unit::Rate, Scalar::Number(_)) => Err("expected a rate such as \"10mbit\"".to_owned()),
                (Unit::Duration, Scalar::Number(_)) => Err("expected a duration such as \"30s\"".to_owned()),
            }
        };
        let wrap = |m: String| self.err(tree, key, m);
        Ok(match raw {
            RawDist::Fixed(s) => Dist::Fixed(value(s).map_err(wrap)?),
            RawDist::Uniform(u) => {
                let lo = value(&u.uniform[0]).map_err(wrap)?;
                let hi = value(&u.uniform[1]).map_err(wrap)?;
                if lo > hi {
                    return Err(wrap(format!("uniform: expected low <= high, got {lo} > {hi}")));
                }
                Dist::Uniform(lo, hi)
            }
            RawDist::Exponential(e) => Dist::Exponential {
                mean: value(&e.exponential).map_err(wrap)?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
name = "small fleet"
duration = "2min"
[client]
schedulers = ["minrtt", "weave"]
cc = ["cubic"]
[fleet]
placement = ["none", "top"]
viewers = 30
arrival_window = "1min"
videos = 10
bitrate = { uniform = ["1mbit", "2mbit"] }
video_duration = "20s"
popularity = { zipf = 0.9 }
watch = { uniform = [0.5, 1.0] }
devices = 6
device_upload = { uniform = ["2mbit", "8mbit"] }
device_uptime = { exponential = "10min" }
device_videos = 3
"#;

    fn parse(text: &str) -> Result<FleetScenario, ScenarioError> {
        match AnyScenario::parse(text, "fleet.toml", std::path::Path::new("."))? {
            AnyScenario::Fleet(f) => Ok(*f),
            AnyScenario::Paths(_) => panic!("not read as a fleet"),
        }
    }

    #[test]
    fn a_fleet_file_gives_one_run_per_combination_and_draws_from_the_seed() {
        let s = parse(FILE).unwrap();
        assert_eq!(s.name, "small fleet");
        assert_eq!(s.runs().len(), 2 * 2);
        let a = s.spec("top", 7);
        assert_eq!(a.devices.len(), 6);
        assert!(a.devices.iter().all(|d| d.holds == vec![0, 1, 2]));
        assert!(s.spec("none", 7).devices.iter().all(|d| d.holds.is_empty()));
        for v in &a.videos {
            assert!((1_000_000..=2_000_000).contains(&v.bitrate_bps));
        }
        // The same seed draws the same fleet whatever the placement; another seed another.
        let rates = |s: &FleetSpec| {
            s.devices
                .iter()
                .map(|d| format!("{:?}", d.uplink.rate))
                .collect::<Vec<_>>()
        };
        assert_eq!(rates(&a), rates(&s.spec("none", 7)));
        assert_ne!(rates(&a), rates(&s.spec("top", 8)));
        assert!(
            a.devices
                .iter()
                .all(|d| d.outages.len() <= 1 && d.outages.iter().all(|o| o.back.is_none()))
        );
        // With a downtime, devices come back and fail again until the run ends.
        let churn = parse(&FILE.replace(
            "device_uptime = { exponential = \"10min\" }",
            "device_uptime = \"20s\"\ndevice_downtime = \"10s\"",
        ))
        .unwrap()
        .spec("none", 7);
        let outages = &churn.devices[0].outages;
        assert_eq!(outages.len(), 4, "{outages:?}");
        assert_eq!(outages[1].at, Duration::from_secs(50));
        assert_eq!(outages[1].back, Some(Duration::from_secs(60)));
        // A device that joins late is down from the start until it joins, then churns.
        let late = parse(&FILE.replace(
            "device_uptime = { exponential = \"10min\" }",
            "device_join = \"30s\"\ndevice_uptime = \"20s\"\ndevice_downtime = \"10s\"",
        ))
        .unwrap()
        .spec("none", 7);
        let outages = &late.devices[0].outages;
        assert_eq!(
            outages[0],
            Outage {
                at: Duration::ZERO,
                back: Some(Duration::from_secs(30))
            }
        );
        assert_eq!(outages[1].at, Duration::from_secs(50));
    }

    #[test]
    fn errors_name_the_key_and_line() {
        let bad = FILE.replace("placement = [\"none\", \"top\"]", "placement = [\"none\", \"magic\"]");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(
            e.contains("fleet.placement.1") && e.contains("magic") && e.contains(":8:"),
            "{e}"
        );
        let bad = FILE.replace(
            "{ uniform = [\"2mbit\", \"8mbit\"] }",
            "{ uniform = [\"8mbit\", \"2mbit\"] }",
        );
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.contains("fleet.device_upload") && e.contains("low <= high"), "{e}");
        let bad = FILE.replace("video_duration = \"20s\"", "video_duration = \"20 parsecs\"");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.contains("fleet.video_duration") && e.contains("duration"), "{e}");
        let bad = FILE.replace("watch = { uniform = [0.5, 1.0] }", "watch = { normal = 1 }");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.contains("fleet.watch") && e.contains("uniform"), "{e}");
        let bad = FILE.replace("viewers = 30", "viewers = 30\nload_profile = [0, 0]");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.contains("fleet.load_profile") && e.contains("positive"), "{e}");
        let good = FILE.replace("viewers = 30", "viewers = 30\nload_profile = [1, 2.5, 0]");
        assert_eq!(
            parse(&good).unwrap().spec("none", 1).viewers.load_profile,
            vec![1.0, 2.5, 0.0]
        );
        let bad = FILE.replace("viewers = 30", "viewers = 30\nspeed = 3");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.contains("unknown key") && e.contains("speed"), "{e}");
        let bad = FILE.replace("schedulers = [\"minrtt\", \"weave\"]", "schedulers = [\"fastest\"]");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.contains("fastest"), "{e}");
    }

    #[test]
    fn distributions_sample_within_their_range() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let u = Dist::Uniform(2.0, 3.0);
        let e = Dist::Exponential { mean: 10.0 };
        let mut sum = 0.0;
        for _ in 0..10_000 {
            assert!((2.0..=3.0).contains(&u.sample(&mut rng)));
            sum += e.sample(&mut rng);
        }
        let mean = sum / 10_000.0;
        assert!((9.0..11.0).contains(&mean), "{mean}");
    }
}
