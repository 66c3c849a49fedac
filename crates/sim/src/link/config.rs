//! The knobs of one link direction (rates in bit/s, sizes in bytes, durations) and their serde form.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pcdn_core::time::Instant;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use crate::units;

/// Bytes carried by one delivery opportunity of a trace (Mahimahi's MTU-sized opportunity).
pub const OPPORTUNITY_BYTES: u32 = 1500;

const NS_PER_MS: u64 = 1_000_000;

/// Why a link could not be built or changed.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("invalid trace: {0}")]
    Trace(String),
    #[error("cannot read trace {path}: {source}")]
    TraceIo { path: PathBuf, source: std::io::Error },
    #[error("invalid loss model: {0}")]
    Loss(String),
    #[error("invalid blackout: {0}")]
    Blackout(String),
}

/// A Mahimahi packet-delivery trace: one millisecond timestamp per delivery opportunity of
/// [`OPPORTUNITY_BYTES`]; repeated timestamps are several opportunities in the same
/// millisecond. The trace repeats with period = its last timestamp, as in Mahimahi's
/// `LinkQueue`. Cheap to clone (shared).
#[derive(Clone, PartialEq, Eq)]
pub struct Trace {
    ms: Arc<[u64]>,
}

impl Trace {
    /// Validates like Mahimahi: non-empty, non-decreasing, and lasting a nonzero time.
    pub fn new(ms: Vec<u64>) -> Result<Trace, LinkError> {
        let Some(&last) = ms.last() else {
            return Err(LinkError::Trace("no timestamps".into()));
        };
        if let Some(i) = ms.windows(2).position(|w| w[1] < w[0]) {
            return Err(LinkError::Trace(format!(
                "timestamps must be non-decreasing ({} after {} at entry {})",
                ms[i + 1],
                ms[i],
                i + 2
            )));
        }
        if last == 0 {
            return Err(LinkError::Trace(
                "the trace must last a nonzero time (last timestamp is 0)".into(),
            ));
        }
        // Keeps every nanosecond computation (period × k + offset) far from u64 overflow.
        if last > 1 << 40 {
            return Err(LinkError::Trace(format!("period of {last} ms is too long")));
        }
        Ok(Trace { ms: ms.into() })
    }

    /// Parses the Mahimahi text format: one integer (milliseconds) per line; blank lines and
    /// `#` comments are skipped.
    pub fn parse(text: &str) -> Result<Trace, LinkError> {
        let mut ms = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let v = line.parse().map_err(|_| {
                LinkError::Trace(format!(
                    "line {}: expected a millisecond timestamp, got \"{line}\"",
                    i + 1
                ))
            })?;
            ms.push(v);
        }
        Trace::new(ms)
    }

    /// Reads and parses a trace file.
    pub fn from_file(path: &Path) -> Result<Trace, LinkError> {
        let text = std::fs::read_to_string(path).map_err(|source| LinkError::TraceIo {
            path: path.to_owned(),
            source,
        })?;
        Trace::parse(&text).map_err(|e| match e {
            LinkError::Trace(m) => LinkError::Trace(format!("{}: {m}", path.display())),
            e => e,
        })
    }

    /// A trace with `per_ms` opportunities every millisecond: `per_ms` × 12 Mbit/s.
    pub fn constant(per_ms: usize) -> Trace {
        Trace::new(vec![1; per_ms.max(1)]).expect("a constant trace is valid")
    }

    /// The timestamps, in milliseconds.
    pub fn timestamps_ms(&self) -> &[u64] {
        &self.ms
    }

    /// The repetition period (the last timestamp).
    pub fn period(&self) -> Duration {
        Duration::from_millis(self.period_ms())
    }

    /// Average capacity over one period, in bit/s.
    pub fn mean_rate_bps(&self) -> f64 {
        let bits = self.ms.len() as f64 * f64::from(OPPORTUNITY_BYTES) * 8.0;
        bits / (self.period_ms() as f64 / 1000.0)
    }

    fn period_ms(&self) -> u64 {
        *self.ms.last().expect("validated non-empty")
    }

    pub(crate) fn period_ns(&self) -> u64 {
        self.period_ms() * NS_PER_MS
    }

    pub(crate) fn offsets_ms(&self) -> &[u64] {
        &self.ms
    }
}

impl fmt::Debug for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trace")
            .field("opportunities", &self.ms.len())
            .field("period_ms", &self.period_ms())
            .field("mean_rate_bps", &self.mean_rate_bps())
            .finish()
    }
}

/// The serialization rate of a link.
///
/// Serde form: a number (bit/s), a string such as `"10mbit"`, `{ trace = [1, 1, 2, ...] }`
/// (inline milliseconds) or `{ trace_file = "traces/lte.down" }`.
#[derive(Clone, Debug, PartialEq)]
pub enum Rate {
    /// A constant rate in bit/s; 0 stalls the link (packets wait in the queue).
    Fixed(u64),
    /// Delivery opportunities from a Mahimahi trace. Its time zero is the simulation's start,
    /// or the time the rate was changed to it.
    Trace(Trace),
    /// A trace still to be read; [`LinkConfig::resolve_paths`] reads it relative to a scenario
    /// file's folder, and a link reads any left relative to the working directory.
    TraceFile(PathBuf),
}

impl Rate {
    /// Reads a [`Rate::TraceFile`] (relative paths from `base_dir`); other rates are returned as is.
    pub fn resolve(self, base_dir: &Path) -> Result<Rate, LinkError> {
        match self {
            Rate::TraceFile(p) => Trace::from_file(&base_dir.join(p)).map(Rate::Trace),
            r => Ok(r),
        }
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
        struct RateVisitor;
        impl<'de> Visitor<'de> for RateVisitor {
            type Value = Rate;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a rate in bit/s, a string such as \"10mbit\", { trace = [ms, ...] } or \
                     { trace_file = \"path\" }",
                )
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Rate, E> {
                Ok(Rate::Fixed(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Rate, E> {
                u64::try_from(v)
                    .map(Rate::Fixed)
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Rate, E> {
                units::parse_rate(v).map(Rate::Fixed).map_err(E::custom)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Rate, A::Error> {
                let key: String = map.next_key()?.ok_or_else(|| de::Error::custom("empty rate table"))?;
                let rate = match key.as_str() {
                    "trace" => Trace::new(map.next_value()?)
                        .map(Rate::Trace)
                        .map_err(de::Error::custom)?,
                    "trace_file" => Rate::TraceFile(map.next_value()?),
                    other => return Err(de::Error::unknown_field(other, &["trace", "trace_file"])),
                };
                if let Some(extra) = map.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "unexpected \"{extra}\" beside \"{key}\" in a rate"
                    )));
                }
                Ok(rate)
            }
        }
        d.deserialize_any(RateVisitor)
    }
}

/// The distribution of the per-packet jitter added to the propagation delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum JitterDist {
    #[default]
    None,
    /// Uniform in [−spread, +spread], like netem's `delay D J`.
    Uniform(Duration),
    /// Normal with this standard deviation, like netem's `distribution normal`.
    Normal(Duration),
}

/// Per-packet delay variation. The total delay never goes below zero.
///
/// With `reorder = false` a packet never leaves before the one sent before it (its delay is
/// raised to the previous packet's exit time, as netem does when it must keep a FIFO); with
/// `reorder = true` packets leave in order of their own delay, so they can overtake.
///
/// Serde form: `{ uniform = "5ms" }`, `{ normal = "2ms", reorder = true }` or `{}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "JitterRepr")]
pub struct Jitter {
    pub dist: JitterDist,
    pub reorder: bool,
}

impl Jitter {
    pub fn uniform(spread: Duration, reorder: bool) -> Jitter {
        Jitter {
            dist: JitterDist::Uniform(spread),
            reorder,
        }
    }
    pub fn normal(std_dev: Duration, reorder: bool) -> Jitter {
        Jitter {
            dist: JitterDist::Normal(std_dev),
            reorder,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JitterRepr {
    #[serde(default, deserialize_with = "units::de::opt_duration")]
    uniform: Option<Duration>,
    #[serde(default, deserialize_with = "units::de::opt_duration")]
    normal: Option<Duration>,
    #[serde(default)]
    reorder: bool,
}

impl TryFrom<JitterRepr> for Jitter {
    type Error = &'static str;
    fn try_from(r: JitterRepr) -> Result<Jitter, &'static str> {
        let dist = match (r.uniform, r.normal) {
            (None, None) => JitterDist::None,
            (Some(d), None) => JitterDist::Uniform(d),
            (None, Some(d)) => JitterDist::Normal(d),
            (Some(_), Some(_)) => return Err("jitter is either uniform or normal, not both"),
        };
        Ok(Jitter {
            dist,
            reorder: r.reorder,
        })
    }
}

/// Packet loss on the wire: decided per packet, after it has used its share of the rate (as
/// ns-3's receive error model does), so lost packets still consume capacity.
///
/// Serde form: `"none"`, `{ bernoulli = 0.01 }` or `{ gilbert_elliott = { p_good_to_bad = ...,
/// p_bad_to_good = ..., loss_good = 0, loss_bad = 1 } }`.
#[derive(Clone, Copy, Debug, PartialEq, Default, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Loss {
    #[default]
    None,
    /// Each packet is lost independently with this probability.
    Bernoulli(f64),
    /// Bursty loss from a two-state Markov chain.
    GilbertElliott(GilbertElliott),
}

impl Loss {
    /// Probabilities must lie in [0, 1].
    pub fn validate(&self) -> Result<(), LinkError> {
        let check = |name: &str, p: f64| {
            if (0.0..=1.0).contains(&p) {
                Ok(())
            } else {
                Err(LinkError::Loss(format!("{name} = {p} is not a probability in [0, 1]")))
            }
        };
        match *self {
            Loss::None => Ok(()),
            Loss::Bernoulli(p) => check("bernoulli", p),
            Loss::GilbertElliott(g) => {
                check("p_good_to_bad", g.p_good_to_bad)?;
                check("p_bad_to_good", g.p_bad_to_good)?;
                check("loss_good", g.loss_good)?;
                check("loss_bad", g.loss_bad)
            }
        }
    }

    /// The long-run fraction of packets lost.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            Loss::None => 0.0,
            Loss::Bernoulli(p) => p,
            Loss::GilbertElliott(g) => g.stationary_loss(),
        }
    }
}

/// Gilbert–Elliott loss, stepped once per packet as netem's `loss gemodel p r 1-h 1-k` is: a
/// packet is lost with the loss probability of the current state, then the chain moves. Unlike
/// netem's, the chain also moves while the link is idle, once per packet time
/// (`LossState::pass_idle`).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GilbertElliott {
    /// Probability of moving from the good to the bad state after a packet (netem's `p`).
    pub p_good_to_bad: f64,
    /// Probability of moving from the bad to the good state after a packet (netem's `r`).
    pub p_bad_to_good: f64,
    /// Loss probability in the good state (netem's `1-k`); default 0.
    #[serde(default)]
    pub loss_good: f64,
    /// Loss probability in the bad state (netem's `1-h`); default 1.
    #[serde(default = "one")]
    pub loss_bad: f64,
}

fn one() -> f64 {
    1.0
}

impl GilbertElliott {
    /// The classic Gilbert model: no loss in the good state, all packets lost in the bad one,
    /// so loss bursts last 1 / `p_bad_to_good` packets on average.
    pub fn gilbert(p_good_to_bad: f64, p_bad_to_good: f64) -> GilbertElliott {
        GilbertElliott {
            p_good_to_bad,
            p_bad_to_good,
            loss_good: 0.0,
            loss_bad: 1.0,
        }
    }

    /// Long-run fraction of packets that find the chain in the bad state: p / (p + r).
    pub fn stationary_bad(&self) -> f64 {
        let sum = self.p_good_to_bad + self.p_bad_to_good;
        if sum == 0.0 { 0.0 } else { self.p_good_to_bad / sum }
    }

    /// Long-run loss rate: π_good × loss_good + π_bad × loss_bad.
    pub fn stationary_loss(&self) -> f64 {
        let bad = self.stationary_bad();
        (1.0 - bad) * self.loss_good + bad * self.loss_bad
    }
}

/// Drop-tail limits. They count every packet in the link that has not finished serialization,
/// including the one on the wire (as a router's buffer holds the packet it is sending; ns-3's
/// point-to-point device holds one more outside its queue). `None` means no limit.
///
/// Serde form: `{ packets = 100 }`, `{ bytes = "64kB" }` or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueLimit {
    #[serde(deserialize_with = "units::de::opt_size")]
    pub bytes: Option<u64>,
    pub packets: Option<u64>,
}

impl QueueLimit {
    pub const UNLIMITED: QueueLimit = QueueLimit {
        bytes: None,
        packets: None,
    };
    pub fn packets(n: u64) -> QueueLimit {
        QueueLimit {
            bytes: None,
            packets: Some(n),
        }
    }
    pub fn bytes(n: u64) -> QueueLimit {
        QueueLimit {
            bytes: Some(n),
            packets: None,
        }
    }
}

/// A scheduled outage [start, end): every packet whose serialization ends inside it is lost.
///
/// Serde form: `{ start = "10s", end = "12.5s" }` (times since the simulation's start).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Blackout {
    #[serde(deserialize_with = "units::de::instant")]
    pub start: Instant,
    #[serde(deserialize_with = "units::de::instant")]
    pub end: Instant,
}

impl Blackout {
    pub fn new(start: Instant, end: Instant) -> Blackout {
        Blackout { start, end }
    }
    pub fn contains(&self, t: Instant) -> bool {
        self.start <= t && t < self.end
    }
    pub(crate) fn validate(&self) -> Result<(), LinkError> {
        if self.start < self.end {
            Ok(())
        } else {
            Err(LinkError::Blackout(format!(
                "start {:?} is not before end {:?}",
                self.start.since_epoch(),
                self.end.since_epoch()
            )))
        }
    }
}

/// One knob to turn on a running link.
///
/// Serde form (inside a [`LinkChange`]): `rate = "5mbit"`, `delay = "40ms"`,
/// `jitter = { ... }`, `loss = { ... }` or `queue = { ... }`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Rate(Rate),
    Delay(#[serde(deserialize_with = "units::de::duration")] Duration),
    Jitter(Jitter),
    Loss(Loss),
    Queue(QueueLimit),
}

/// A change applied when simulated time reaches `at`, before anything else the link does at `at`.
///
/// Serde form: `{ at = "30s", rate = "2mbit" }`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct LinkChange {
    #[serde(deserialize_with = "units::de::instant")]
    pub at: Instant,
    #[serde(flatten)]
    pub change: Change,
}

impl LinkChange {
    pub fn new(at: Instant, change: Change) -> LinkChange {
        LinkChange { at, change }
    }
}

/// Everything about one link direction.
///
/// Serde form (every field optional, defaults from [`LinkConfig::default`]):
/// ```toml
/// rate = "20mbit"                      # or { trace_file = "traces/lte.down" }
/// delay = "15ms"                       # one-way propagation delay
/// jitter = { normal = "2ms" }          # reorder = false by default
/// loss = { bernoulli = 0.01 }
/// queue = { packets = 100, bytes = "150kB" }
/// blackouts = [{ start = "10s", end = "12s" }]
/// changes = [{ at = "30s", rate = "5mbit" }]
/// ```
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkConfig {
    pub rate: Rate,
    /// One-way propagation delay.
    #[serde(deserialize_with = "units::de::duration")]
    pub delay: Duration,
    pub jitter: Jitter,
    pub loss: Loss,
    pub queue: QueueLimit,
    pub blackouts: Vec<Blackout>,
    pub changes: Vec<LinkChange>,
}

impl Default for LinkConfig {
    /// 10 Mbit/s, 10 ms, no jitter, no loss, and a 100-packet drop-tail queue (ns-3's default
    /// `DropTailQueue` size).
    fn default() -> LinkConfig {
        LinkConfig {
            rate: Rate::Fixed(10_000_000),
            delay: Duration::from_millis(10),
            jitter: Jitter::default(),
            loss: Loss::None,
            queue: QueueLimit::packets(100),
            blackouts: Vec::new(),
            changes: Vec::new(),
        }
    }
}

impl LinkConfig {
    /// A link of `bps` bit/s and one-way `delay`, the other knobs at their defaults.
    pub fn fixed(bps: u64, delay: Duration) -> LinkConfig {
        LinkConfig {
            rate: Rate::Fixed(bps),
            delay,
            ..LinkConfig::default()
        }
    }
    pub fn with_rate(mut self, rate: Rate) -> LinkConfig {
        self.rate = rate;
        self
    }
    pub fn with_delay(mut self, delay: Duration) -> LinkConfig {
        self.delay = delay;
        self
    }
    pub fn with_jitter(mut self, jitter: Jitter) -> LinkConfig {
        self.jitter = jitter;
        self
    }
    pub fn with_loss(mut self, loss: Loss) -> LinkConfig {
        self.loss = loss;
        self
    }
    pub fn with_queue(mut self, queue: QueueLimit) -> LinkConfig {
        self.queue = queue;
        self
    }
    pub fn with_blackout(mut self, blackout: Blackout) -> LinkConfig {
        self.blackouts.push(blackout);
        self
    }
    pub fn with_change(mut self, change: LinkChange) -> LinkConfig {
        self.changes.push(change);
        self
    }

    /// Reads every trace file named in the config, relative paths from `base_dir` (a scenario
    /// file's folder), so a link never touches the file system mid-run.
    pub fn resolve_paths(&mut self, base_dir: &Path) -> Result<(), LinkError> {
        let take = |r: &mut Rate| std::mem::replace(r, Rate::Fixed(0));
        self.rate = take(&mut self.rate).resolve(base_dir)?;
        for c in &mut self.changes {
            if let Change::Rate(r) = &mut c.change {
                *r = take(r).resolve(base_dir)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_parsing() {
        let t = Trace::parse("1\n1\n# comment\n\n3\n").unwrap();
        assert_eq!(t.timestamps_ms(), &[1, 1, 3]);
        assert_eq!(t.period(), Duration::from_millis(3));
        assert_eq!(t.mean_rate_bps(), 3.0 * 12_000.0 / 0.003);
        assert!(Trace::parse("").unwrap_err().to_string().contains("no timestamps"));
        assert!(Trace::parse("0\n0").unwrap_err().to_string().contains("nonzero"));
        assert!(Trace::parse("3\n2").unwrap_err().to_string().contains("non-decreasing"));
        assert!(Trace::parse("1\nx").unwrap_err().to_string().contains("line 2"));
        assert_eq!(Trace::constant(1).mean_rate_bps(), 12e6);
    }

    #[test]
    fn config_from_json() {
        let c: LinkConfig = serde_json::from_str(
            r#"{
                "rate": "20mbit",
                "delay": "15ms",
                "jitter": { "normal": "2ms", "reorder": true },
                "loss": { "gilbert_elliott": { "p_good_to_bad": 0.01, "p_bad_to_good": 0.25 } },
                "queue": { "bytes": "150kB" },
                "blackouts": [{ "start": "10s", "end": "12.5s" }],
                "changes": [
                    { "at": "30s", "rate": 5000000 },
                    { "at": "31s", "rate": { "trace": [1, 2, 2] } },
                    { "at": "40s", "delay": "40ms" },
                    { "at": "50s", "loss": { "bernoulli": 0.1 } },
                    { "at": "60s", "loss": "none" }
                ]
            }"#,
        )
        .unwrap();
        assert_eq!(c.rate, Rate::Fixed(20_000_000));
        assert_eq!(c.delay, Duration::from_millis(15));
        assert_eq!(c.jitter, Jitter::normal(Duration::from_millis(2), true));
        assert_eq!(c.loss, Loss::GilbertElliott(GilbertElliott::gilbert(0.01, 0.25)));
        assert_eq!(c.queue, QueueLimit::bytes(150_000));
        let s = |secs: f64| Instant::ZERO + Duration::from_secs_f64(secs);
        assert_eq!(c.blackouts, vec![Blackout::new(s(10.0), s(12.5))]);
        assert_eq!(
            c.changes[0],
            LinkChange::new(s(30.0), Change::Rate(Rate::Fixed(5_000_000)))
        );
        assert_eq!(
            c.changes[1].change,
            Change::Rate(Rate::Trace(Trace::new(vec![1, 2, 2]).unwrap()))
        );
        assert_eq!(c.changes[2].change, Change::Delay(Duration::from_millis(40)));
        assert_eq!(c.changes[3].change, Change::Loss(Loss::Bernoulli(0.1)));
        assert_eq!(c.changes[4].change, Change::Loss(Loss::None));

        let d: LinkConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(d, LinkConfig::default());
        let e = serde_json::from_str::<LinkConfig>(r#"{"rate": "10mbps"}"#).unwrap_err();
        assert!(e.to_string().contains("ambiguous"), "{e}");
        let e = serde_json::from_str::<LinkConfig>(r#"{"delai": "1ms"}"#).unwrap_err();
        assert!(e.to_string().contains("delai"), "{e}");
    }

    #[test]
    fn trace_files_resolve_relative_to_base() {
        let dir = std::env::temp_dir().join(format!("pcdn-sim-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("t.down"), "1\n2\n").unwrap();
        let mut c: LinkConfig = serde_json::from_str(
            r#"{ "rate": { "trace_file": "t.down" },
                 "changes": [{ "at": "1s", "rate": { "trace_file": "t.down" } }] }"#,
        )
        .unwrap();
        assert_eq!(c.rate, Rate::TraceFile("t.down".into()));
        c.resolve_paths(&dir).unwrap();
        let t = Rate::Trace(Trace::new(vec![1, 2]).unwrap());
        assert_eq!(c.rate, t);
        assert_eq!(c.changes[0].change, Change::Rate(t));
        let missing = Rate::TraceFile("nope".into()).resolve(&dir).unwrap_err();
        assert!(missing.to_string().contains("nope"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn stationary_loss() {
        let g = GilbertElliott::gilbert(0.01, 0.25);
        assert!((g.stationary_loss() - 0.01 / 0.26).abs() < 1e-12);
        assert!(Loss::Bernoulli(1.5).validate().is_err());
        assert!(
            Loss::GilbertElliott(GilbertElliott::gilbert(-0.1, 0.5))
                .validate()
                .is_err()
        );
    }
}
