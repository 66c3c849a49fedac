//! Random worlds for the generalization suite (`pcdn sim --random`): one u64 draws one whole
//! scenario file from the wide distributions of [`RandomConfig`] (docs/scenarios.md, "Random
//! worlds"), which is then parsed like any file, so every world can be written out and rerun.

use std::fmt::Write as _;
use std::path::Path;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Scenario, ScenarioError};
use crate::link::OPPORTUNITY_BYTES;

/// The distributions worlds are drawn from. Ranges are inclusive; "log-uniform" means uniform
/// in the logarithm, so every decade of a range is drawn as often.
#[derive(Clone, Debug, PartialEq)]
pub struct RandomConfig {
    /// Servers per world, uniform; server 0 is the origin (issue #38: 2-8 servers).
    pub servers: (usize, usize),
    /// Data-direction rate of a server's link, log-uniform, bit/s (issue #38: 0.5-100 Mbit/s).
    pub rate_bps: (f64, f64),
    /// One-way delay of a server's link, log-uniform, ms (issue #38: 2-250 ms).
    pub delay_ms: (f64, f64),
    /// Share of links with Bernoulli loss (a third: lossless, random and bursty equally often).
    pub p_bernoulli: f64,
    /// Share of links with bursty (Gilbert) loss, drawn after the Bernoulli share.
    pub p_bursty: f64,
    /// Long-run loss of a lossy link, uniform (issue #38: 0-10 %).
    pub loss: (f64, f64),
    /// Mean loss burst of a bursty link in packets, uniform (netem's gemodel examples: 1-10).
    pub burst_packets: (f64, f64),
    /// Share of links with jitter.
    pub p_jitter: f64,
    /// Jitter spread (uniform ±) or standard deviation (normal), log-uniform, ms, at most the
    /// link's delay (cellular paths measure a few to tens of ms).
    pub jitter_ms: (f64, f64),
    /// Share of jittery links whose packets may overtake each other (`reorder = true`).
    pub p_reorder: f64,
    /// Share of links whose rate is a Mahimahi-style trace of the drawn mean rate.
    pub p_trace: f64,
    /// A trace's period, ms (Mahimahi repeats a trace with its last timestamp as period).
    pub trace_period_ms: u64,
    /// A trace's rate is constant within a slot of this many ms (cellular captures vary at
    /// ~100 ms scales: Winstein et al., "Stochastic Forecasts ...", NSDI 2013).
    pub trace_slot_ms: u64,
    /// Standard deviation of a slot's log-rate, and the correlation of consecutive slots (an
    /// AR(1) walk; each slot's multiple of the mean is clamped to `trace_multiple`).
    pub trace_sigma: f64,
    pub trace_correlation: f64,
    pub trace_multiple: (f64, f64),
    /// Share of edge servers (never the origin) with an upload cap below their link's rate.
    pub p_upload_cap: f64,
    /// The cap as a fraction of the link's (mean) rate, uniform.
    pub upload_cap_fraction: (f64, f64),
    /// Share of worlds with a shared access bottleneck over two or more servers.
    pub p_bottleneck: f64,
    /// Share of those where the origin sits behind the bottleneck too.
    pub p_origin_behind: f64,
    /// The bottleneck's rate as a fraction of its servers' summed capacity, uniform; then
    /// clamped to `rate_bps`.
    pub bottleneck_fraction: (f64, f64),
    /// The bottleneck's one-way delay, log-uniform, ms (an access line).
    pub bottleneck_delay_ms: (f64, f64),
    /// Share of edge servers that fail during the run (the origin never does).
    pub p_failure: f64,
    /// When a server fails, as a fraction of the world's ideal completion time, uniform.
    pub fail_fraction: (f64, f64),
    /// Share of failed servers that recover, and after how long (fraction of the ideal time).
    pub p_recover: f64,
    pub recover_after_fraction: (f64, f64),
    /// Share of worlds that are segmented downloads (ordered tasks), and that are videos; the
    /// rest are whole downloads.
    pub p_segmented: f64,
    pub p_video: f64,
    /// Tasks of a segmented download, uniform.
    pub tasks: (u64, u64),
    /// A download's ideal completion time (content ÷ capacity), log-uniform, s.
    pub ideal_s: (f64, f64),
    /// Content size bounds, bytes: the ideal time is clamped into them (keeps a debug run of
    /// the suite within minutes: `pcdn sim --random 30` in docs/scenarios.md).
    pub size_bytes: (u64, u64),
    /// A video's bitrate as a fraction of the world's capacity, uniform (then clamped).
    pub video_load: (f64, f64),
    /// A video's bitrate bounds, bit/s (360p to 1080p at common encodings).
    pub video_bitrate_bps: (u64, u64),
    /// A video's length, uniform, whole s; the bitrate is lowered to fit `size_bytes`.
    pub video_s: (u64, u64),
    /// A video's segment length, uniform, whole s (Douyin fetches 10 s segments).
    pub segment_s: (u64, u64),
    /// The run's virtual-time limit: the ideal time (plus the video's length) × this, at least
    /// `min_duration_s`.
    pub duration_factor: f64,
    pub min_duration_s: u64,
}

impl Default for RandomConfig {
    fn default() -> RandomConfig {
        RandomConfig {
            servers: (2, 8),
            rate_bps: (0.5e6, 100e6),
            delay_ms: (2.0, 250.0),
            p_bernoulli: 1.0 / 3.0,
            p_bursty: 1.0 / 3.0,
            loss: (0.001, 0.10),
            burst_packets: (1.5, 10.0),
            p_jitter: 0.3,
            jitter_ms: (0.5, 20.0),
            p_reorder: 0.5,
            p_trace: 0.2,
            trace_period_ms: 4000,
            trace_slot_ms: 100,
            trace_sigma: 0.6,
            trace_correlation: 0.9,
            trace_multiple: (0.05, 4.0),
            p_upload_cap: 0.2,
            upload_cap_fraction: (0.2, 0.9),
            p_bottleneck: 0.3,
            p_origin_behind: 0.2,
            bottleneck_fraction: (0.3, 0.9),
            bottleneck_delay_ms: (1.0, 10.0),
            p_failure: 0.15,
            fail_fraction: (0.1, 0.6),
            p_recover: 0.5,
            recover_after_fraction: (0.1, 0.5),
            p_segmented: 0.3,
            p_video: 0.3,
            tasks: (3, 20),
            ideal_s: (2.0, 30.0),
            size_bytes: (1_000_000, 30_000_000),
            video_load: (0.3, 0.9),
            video_bitrate_bps: (300_000, 8_000_000),
            video_s: (20, 40),
            segment_s: (2, 10),
            duration_factor: 8.0,
            min_duration_s: 60,
        }
    }
}

impl RandomConfig {
    /// The same worlds in miniature, for tests: contents of at most 1.5 MB, videos of 3-6 s.
    pub fn quick() -> RandomConfig {
        RandomConfig {
            size_bytes: (200_000, 1_500_000),
            video_s: (3, 6),
            segment_s: (1, 2),
            ..RandomConfig::default()
        }
    }
}

/// What a world downloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorldKind {
    /// The whole content at once.
    Download,
    /// Ordered tasks (byte ranges), one after the other.
    Segmented,
    /// A video played while it downloads.
    Video,
}

/// One drawn world: its own seed, the scenario file text and the scenario parsed from it.
#[derive(Clone, Debug)]
pub struct RandomWorld {
    /// The u64 that rebuilds this world (`pcdn sim --random 1 --seed SEED`).
    pub seed: u64,
    pub kind: WorldKind,
    /// The scenario file, as `--write-worlds` writes it.
    pub toml: String,
    pub scenario: Scenario,
}

/// What the client of every world compares: the `[client]` lists and the repeats.
#[derive(Clone, Debug)]
pub struct Compare {
    pub schedulers: Vec<String>,
    pub ccs: Vec<String>,
    /// Runs per scheduler × control (seeds differ per run; pairs give the interval).
    pub repeat: u32,
}

/// One server as drawn.
struct DrawnServer {
    name: String,
    origin: bool,
    rate: DrawnRate,
    delay_us: u64,
    loss: DrawnLoss,
    jitter: Option<(bool, u64, bool)>,
    upload_limit: Option<u64>,
    fail: Option<(f64, Option<f64>)>,
}

enum DrawnRate {
    Fixed(u64),
    Trace(Vec<u64>),
}

enum DrawnLoss {
    None,
    Bernoulli(f64),
    Gilbert { p_good_to_bad: f64, p_bad_to_good: f64 },
}

impl DrawnRate {
    fn mean_bps(&self) -> f64 {
        match self {
            DrawnRate::Fixed(bps) => *bps as f64,
            DrawnRate::Trace(ms) => {
                let period = *ms.last().expect("a drawn trace is not empty") as f64 / 1e3;
                ms.len() as f64 * f64::from(OPPORTUNITY_BYTES) * 8.0 / period
            }
        }
    }
}

fn log_uniform(rng: &mut ChaCha8Rng, (lo, hi): (f64, f64)) -> f64 {
    (rng.random_range(lo.ln()..=hi.ln())).exp().clamp(lo, hi)
}

fn uniform(rng: &mut ChaCha8Rng, (lo, hi): (f64, f64)) -> f64 {
    rng.random_range(lo..=hi)
}

/// The seed of world `index` of a suite started at `seed`: consecutive, so that world X is
/// rebuilt alone by `--random 1 --seed X`.
pub fn world_seed(seed: u64, index: u64) -> u64 {
    seed.wrapping_add(index)
}

/// Draws the world of `seed`: the same seed and config give the same file, byte for byte.
pub fn draw(seed: u64, config: &RandomConfig, compare: &Compare) -> Result<RandomWorld, ScenarioError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // The runs' seed is drawn too, so that worlds with neighbouring seeds do not share their
    // links' draws.
    let run_seed = u64::from(rng.random::<u32>());
    let count = rng.random_range(config.servers.0..=config.servers.1);
    let mut servers: Vec<DrawnServer> = (0..count).map(|i| draw_server(&mut rng, config, i)).collect();
    let own_bps = |s: &DrawnServer| {
        let rate = s.rate.mean_bps().min(s.upload_limit.map_or(f64::MAX, |c| c as f64));
        rate * (1.0 - s.loss.mean())
    };
    let bottleneck = if count >= 3 && rng.random_bool(config.p_bottleneck) {
        let mut edges: Vec<usize> = (1..count).collect();
        edges.shuffle(&mut rng);
        let k = rng.random_range(2..=edges.len());
        let mut members: Vec<usize> = edges[..k].to_vec();
        if rng.random_bool(config.p_origin_behind) {
            members.push(0);
        }
        members.sort_unstable();
        let sum: f64 = members.iter().map(|&i| own_bps(&servers[i])).sum();
        let bps = (sum * uniform(&mut rng, config.bottleneck_fraction)).clamp(config.rate_bps.0, config.rate_bps.1);
        let delay_us = (log_uniform(&mut rng, config.bottleneck_delay_ms) * 1e3).round() as u64;
        Some((members, bps.round() as u64, delay_us))
    } else {
        None
    };
    // The capacity as the rows define it, from the world itself (failures, not yet timed,
    // do not count in it).
    let servers_toml = render_servers(&servers, bottleneck.as_ref(), false);
    let probe = format!("[content]\nsize = 1\n{servers_toml}");
    let capacity_bps = Scenario::parse(&probe, &format!("random world {seed}"), Path::new("."))?.points[0]
        .world
        .capacity_bps();

    let kind = {
        let u: f64 = rng.random();
        if u < config.p_video {
            WorldKind::Video
        } else if u < config.p_video + config.p_segmented {
            WorldKind::Segmented
        } else {
            WorldKind::Download
        }
    };
    let ideal = log_uniform(&mut rng, config.ideal_s);
    let (lo, hi) = config.size_bytes;
    let mut size = ((capacity_bps * ideal / 8.0).round() as u64).clamp(lo, hi);
    let mut content = String::new();
    let mut video_s = 0;
    match kind {
        WorldKind::Download => {}
        WorldKind::Segmented => {
            let tasks = rng.random_range(config.tasks.0..=config.tasks.1);
            let _ = writeln!(content, "task_size = {}", size.div_ceil(tasks));
        }
        WorldKind::Video => {
            video_s = rng.random_range(config.video_s.0..=config.video_s.1);
            let segment = rng.random_range(config.segment_s.0..=config.segment_s.1);
            let load = uniform(&mut rng, config.video_load);
            let (min_bps, max_bps) = config.video_bitrate_bps;
            let fit = hi.saturating_mul(8) / video_s;
            let bitrate = ((capacity_bps * load) as u64).clamp(min_bps, max_bps).min(fit).max(1);
            size = (u128::from(bitrate) * u128::from(video_s)).div_ceil(8) as u64;
            let _ = write!(
                content,
                "\n[video]\nbitrate = {bitrate}\nduration = \"{video_s}s\"\nsegment = \"{segment}s\"\n"
            );
        }
    }
    let ideal_s = size as f64 * 8.0 / capacity_bps.max(1.0);
    for s in &mut servers {
        if let Some((at, recover)) = &mut s.fail {
            *at *= ideal_s;
            if let Some(r) = recover {
                *r = *at + *r * ideal_s;
            }
        }
    }
    let duration_s = ((ideal_s + video_s as f64) * config.duration_factor)
        .ceil()
        .max(config.min_duration_s as f64) as u64;

    let quote = |names: &[String]| names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ");
    let mut toml = String::new();
    let _ = writeln!(
        toml,
        "# A random world of the generalization suite: `pcdn sim --random 1 --seed {seed}` draws it\n\
         # again (docs/scenarios.md, \"Random worlds\"). {kind:?}, {count} servers, capacity {:.2} Mbit/s.",
        capacity_bps / 1e6
    );
    let _ = writeln!(
        toml,
        "name = \"random world {seed}\"\nseed = {run_seed}\nrepeat = {}",
        compare.repeat
    );
    let _ = writeln!(toml, "duration = \"{duration_s}s\"\n");
    if kind != WorldKind::Video {
        let _ = writeln!(toml, "[content]\nsize = {size}");
    }
    toml.push_str(&content);
    let _ = writeln!(
        toml,
        "\n[client]\nschedulers = [{}]\ncc = [{}]",
        quote(&compare.schedulers),
        quote(&compare.ccs)
    );
    // Failure times depend on the content, so the servers are rendered again with them.
    toml.push_str(&render_servers(&servers, bottleneck.as_ref(), true));
    let scenario = Scenario::parse(&toml, &format!("random world {seed}"), Path::new("."))?;
    Ok(RandomWorld {
        seed,
        kind,
        toml,
        scenario,
    })
}

impl DrawnLoss {
    fn mean(&self) -> f64 {
        match *self {
            DrawnLoss::None => 0.0,
            DrawnLoss::Bernoulli(p) => p,
            DrawnLoss::Gilbert {
                p_good_to_bad,
                p_bad_to_good,
            } => p_good_to_bad / (p_good_to_bad + p_bad_to_good),
        }
    }
}

fn draw_server(rng: &mut ChaCha8Rng, config: &RandomConfig, index: usize) -> DrawnServer {
    let origin = index == 0;
    let mean_bps = log_uniform(rng, config.rate_bps);
    let rate = if rng.random_bool(config.p_trace) {
        DrawnRate::Trace(draw_trace(rng, config, mean_bps))
    } else {
        DrawnRate::Fixed(mean_bps.round() as u64)
    };
    let delay_ms = log_uniform(rng, config.delay_ms);
    let loss = {
        let u: f64 = rng.random();
        let mean = uniform(rng, config.loss);
        if u < config.p_bernoulli {
            DrawnLoss::Bernoulli(mean)
        } else if u < config.p_bernoulli + config.p_bursty {
            // Gilbert's chain with loss only in the bad state: bursts of 1 / r packets, and a
            // stationary bad share p / (p + r) equal to the drawn mean loss.
            let r = 1.0 / uniform(rng, config.burst_packets);
            DrawnLoss::Gilbert {
                p_good_to_bad: mean * r / (1.0 - mean),
                p_bad_to_good: r,
            }
        } else {
            DrawnLoss::None
        }
    };
    let jitter = rng.random_bool(config.p_jitter).then(|| {
        let normal = rng.random_bool(0.5);
        let ms = log_uniform(rng, config.jitter_ms).min(delay_ms);
        let reorder = rng.random_bool(config.p_reorder);
        (normal, (ms * 1e3).round() as u64, reorder)
    });
    let upload_limit = (!origin && rng.random_bool(config.p_upload_cap))
        .then(|| (rate.mean_bps() * uniform(rng, config.upload_cap_fraction)).round() as u64);
    let fail = (!origin && rng.random_bool(config.p_failure)).then(|| {
        let at = uniform(rng, config.fail_fraction);
        let recover = rng
            .random_bool(config.p_recover)
            .then(|| uniform(rng, config.recover_after_fraction));
        (at, recover)
    });
    DrawnServer {
        name: if origin {
            "cdn".to_owned()
        } else {
            format!("edge{index}")
        },
        origin,
        rate,
        delay_us: (delay_ms * 1e3).round() as u64,
        loss,
        jitter,
        upload_limit,
        fail,
    }
}

/// A Mahimahi trace whose rate walks around `mean_bps` slot by slot (log-normal AR(1)), scaled
/// so its mean over the period is `mean_bps` to within one opportunity.
fn draw_trace(rng: &mut ChaCha8Rng, config: &RandomConfig, mean_bps: f64) -> Vec<u64> {
    let slots = (config.trace_period_ms / config.trace_slot_ms).max(1) as usize;
    let (rho, sigma) = (config.trace_correlation, config.trace_sigma);
    let mut x = 0.0f64;
    let mut multiples = Vec::with_capacity(slots);
    for _ in 0..slots {
        // A standard normal from two uniforms (Box–Muller), as rand has no normal without rand_distr.
        let (u1, u2): (f64, f64) = (rng.random::<f64>().max(f64::MIN_POSITIVE), rng.random());
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        x = rho * x + (1.0 - rho * rho).sqrt() * sigma * z;
        multiples.push(x.exp().clamp(config.trace_multiple.0, config.trace_multiple.1));
    }
    let scale = slots as f64 / multiples.iter().sum::<f64>();
    let bits_per_opportunity = f64::from(OPPORTUNITY_BYTES) * 8.0;
    let slot_s = config.trace_slot_ms as f64 / 1e3;
    let mut ms = Vec::new();
    let mut carry = 0.0;
    for (k, m) in multiples.iter().enumerate() {
        let exact = mean_bps * m * scale * slot_s / bits_per_opportunity + carry;
        let n = exact.floor() as u64;
        carry = exact - n as f64;
        let start = k as u64 * config.trace_slot_ms;
        for j in 0..n {
            ms.push(start + 1 + j * config.trace_slot_ms / n.max(1));
        }
    }
    // Mahimahi's period is the last timestamp: make it the whole period.
    let period = slots as u64 * config.trace_slot_ms;
    match ms.last_mut() {
        Some(last) => *last = period,
        None => ms.push(period),
    }
    ms
}

/// The `[[server]]` tables and the `[[bottleneck]]`, in scenario syntax (the failures only
/// `with_failures`).
fn render_servers(servers: &[DrawnServer], bottleneck: Option<&(Vec<usize>, u64, u64)>, with_failures: bool) -> String {
    let mut out = String::new();
    for s in servers {
        let _ = write!(out, "\n[[server]]\nname = \"{}\"\n", s.name);
        if s.origin {
            out.push_str("origin = true\n");
        }
        if let Some(cap) = s.upload_limit {
            let _ = writeln!(out, "upload_limit = {cap}");
        }
        if let Some((at, recover)) = s.fail.filter(|_| with_failures) {
            let _ = writeln!(out, "fail_at = \"{}us\"", (at * 1e6).round().max(1.0) as u64);
            if let Some(r) = recover {
                let _ = writeln!(
                    out,
                    "recover_at = \"{}us\"",
                    (r * 1e6).round().max(at * 1e6 + 1.0) as u64
                );
            }
        }
        out.push_str("[server.link]\n");
        match &s.rate {
            DrawnRate::Fixed(bps) => {
                let _ = writeln!(out, "rate = {bps}");
            }
            DrawnRate::Trace(ms) => {
                out.push_str("rate = { trace = [");
                for (i, t) in ms.iter().enumerate() {
                    if i % 24 == 0 {
                        out.push_str("\n  ");
                    }
                    let _ = write!(out, "{t},");
                }
                out.push_str("\n] }\n");
            }
        }
        let _ = writeln!(out, "delay = \"{}us\"", s.delay_us);
        match s.loss {
            DrawnLoss::None => {}
            DrawnLoss::Bernoulli(p) => {
                let _ = writeln!(out, "loss = {{ bernoulli = {p} }}");
            }
            DrawnLoss::Gilbert {
                p_good_to_bad,
                p_bad_to_good,
            } => {
                let _ = writeln!(
                    out,
                    "loss = {{ gilbert_elliott = {{ p_good_to_bad = {p_good_to_bad}, p_bad_to_good = {p_bad_to_good} }} }}"
                );
            }
        }
        if let Some((normal, us, reorder)) = s.jitter {
            let dist = if normal { "normal" } else { "uniform" };
            let _ = writeln!(out, "jitter = {{ {dist} = \"{us}us\", reorder = {reorder} }}");
        }
    }
    if let Some((members, bps, delay_us)) = bottleneck {
        let names: Vec<String> = members.iter().map(|&i| format!("\"{}\"", servers[i].name)).collect();
        let _ = write!(
            out,
            "\n[[bottleneck]]\nrate = {bps}\ndelay = \"{delay_us}us\"\nservers = [{}]\n",
            names.join(", ")
        );
    }
    out
}

#[cfg(test)]
#[path = "random_tests.rs"]
mod tests;
