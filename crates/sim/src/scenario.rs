//! Scenario files: a TOML world (content, client, servers, bottlenecks), the schedulers and
//! congestion controls to compare, repeats and an optional sweep — expanded into runs and
//! aggregated into one [`Row`] per scheduler × congestion control × sweep point.
//!
//! The format is documented key by key in `docs/scenarios.md`. Every error names the file, the
//! line when there is one, the dotted key and what was expected:
//! `scenarios/x.toml:14: server.edge1.link.rate: expected a rate such as "10mbit", ...`.

mod ab_report;
pub mod ablation;
mod fleet;
mod fleet_runner;
mod names;
mod paired;
mod plot_spec;
pub mod random;
mod runner;
pub mod scorecard;
mod tree;

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use pcdn_core::ReorderConfig;
use pcdn_core::player::{JumpToCdn, PlayerConfig, SpecError, VideoSpec};
use pcdn_core::scheduler::WeaveConfig;
use pcdn_core::{Transport, cc, scheduler};
use serde::Deserialize;
use serde::de::IgnoredAny;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::link::{Jitter, Link, LinkConfig, Loss, QueueLimit, Rate};
use crate::units;
use crate::world::{BottleneckSpec, ServerSpec, WorldSpec};

pub use ab_report::{AB_PERCENTILES, AB_SLICES, AbGroup, AbReport, Change, ab_reports};
pub use fleet::{AnyScenario, FleetRun, FleetScenario, PLACEMENTS};
pub use fleet_runner::{FleetRow, FleetRunRecord, FleetTick, TimelineRow, ViewerRecordRow};
pub use paired::{Paired, paired};
pub use plot_spec::PlotSpec;
use plot_spec::RawPlot;
pub use runner::{FullRow, PlayerRow, Row, RunMetrics, RunRow, default_threads};
use tree::Tree;
pub use tree::desugar_knobs;

/// The default uplink's rate: "no rate limit" (100 Gbit/s, far above any scenario's link).
pub const UNLIMITED_RATE_BPS: u64 = 100_000_000_000;

/// A scenario (or any file in scenario syntax, such as the emulator's links files) that failed
/// to load or run: `file[:line]: [key: ]message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    /// The scenario file as the user named it (or `<default scenario>` for an embedded one).
    pub file: String,
    /// 1-based line of the offending key or value, when known.
    pub line: Option<usize>,
    /// The dotted key (`server.edge1.link.rate`, `bottleneck.0.servers`), when there is one.
    pub key: Option<String>,
    /// What was expected and what was found.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ScenarioError {}

/// A file in scenario syntax (a scenario, the emulator's links file), read whole.
pub struct SourceFile<'p> {
    pub text: String,
    /// The file as the user named it, for errors.
    pub name: String,
    /// The folder its trace files resolve from.
    pub base_dir: &'p Path,
}

impl SourceFile<'_> {
    /// Reads `path`; `what` names the file in the error ("the scenario").
    pub fn read<'p>(path: &'p Path, what: &str) -> Result<SourceFile<'p>, ScenarioError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            file: name.clone(),
            line: None,
            key: None,
            message: format!("cannot read {what}: {e}"),
        })?;
        let base_dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Ok(SourceFile { text, name, base_dir })
    }
}

/// A loaded, validated scenario: one [`SweepPoint`] per sweep value (one point without a sweep).
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The `name` key, or the file's stem.
    pub name: String,
    /// The file as given, for messages.
    pub file: String,
    /// The swept dotted key, if the scenario has a `[sweep]`.
    pub sweep_key: Option<String>,
    pub points: Vec<SweepPoint>,
    /// How `--plot` draws the sweep (`[plot]`).
    pub plot: PlotSpec,
}

/// The scenario with one sweep value applied (or the scenario itself, without a sweep).
#[derive(Clone, Debug)]
pub struct SweepPoint {
    /// The swept value as written in `sweep.values` (strings without quotes), or `None`.
    pub sweep: Option<String>,
    /// Seed of the first repeat; repeat `r` uses `seed + r`.
    pub seed: u64,
    /// Runs per scheduler × congestion control, whose metrics a row averages.
    pub repeat: u32,
    pub schedulers: Vec<String>,
    pub ccs: Vec<String>,
    /// `[client] transport`: `pull`, `subflow`, ... (`pcdn_core::Transport::NAMES`).
    pub transports: Vec<String>,
    pub world: WorldSpec,
    /// The `[video]` played while the content downloads, if any.
    pub video: Option<PlayerConfig>,
}

/// One simulation run: a point's world with one scheduler, one congestion control and one seed.
#[derive(Clone, Copy, Debug)]
pub struct Run<'a> {
    /// Index into [`Scenario::points`].
    pub point: usize,
    pub sweep: Option<&'a str>,
    pub scheduler: &'a str,
    pub cc: &'a str,
    pub transport: &'a str,
    /// 0-based repeat index.
    pub repeat: u32,
    pub seed: u64,
    pub world: &'a WorldSpec,
    pub video: Option<&'a PlayerConfig>,
}

impl Scenario {
    /// Reads and validates a scenario file; trace files resolve relative to its folder.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let source = SourceFile::read(path, "the scenario")?;
        Scenario::parse(&source.text, &source.name, source.base_dir)
    }

    /// Parses and validates scenario text. `file` names it in messages and gives the default
    /// name; trace files resolve relative to `base_dir`.
    pub fn parse(text: &str, file: &str, base_dir: &Path) -> Result<Scenario, ScenarioError> {
        let ctx = Ctx { file, text, base_dir };
        let doc = DeTable::parse(text).map_err(|e| ScenarioError {
            file: file.to_owned(),
            line: e.span().map(|s| line_at(text, s.start)),
            key: None,
            message: format!("invalid TOML: {}", e.message().trim_end()),
        })?;
        let span = doc.span();
        let tree: Tree = Spanned::new(span, DeValue::Table(doc.into_inner()));
        let mut raw: Raw = ctx.deserialize(&tree)?;
        let plot = raw.plot.take();
        let name = raw.name.clone().unwrap_or_else(|| {
            Path::new(file)
                .file_stem()
                .map_or_else(|| file.to_owned(), |s| s.to_string_lossy().into_owned())
        });
        let sweep_key = raw.sweep.as_ref().map(|s| s.key.clone());
        // The file as written, without the sweep: its own mistakes are reported without
        // blaming a sweep value, even when every point repeats them.
        let base = ctx.build(&tree, raw, None);
        let Some(key) = sweep_key else {
            if plot.is_some() {
                return Err(ctx.err(
                    &tree,
                    "plot",
                    "[plot] says how to draw a [sweep], and this scenario has none",
                ));
            }
            return Ok(Scenario {
                name,
                file: file.to_owned(),
                sweep_key: None,
                points: vec![base?],
                plot: PlotSpec::default(),
            });
        };
        let values = sweep_values(&tree);
        if values.is_empty() {
            return Err(ctx.err(&tree, "sweep.values", "expected at least one value to sweep over"));
        }
        let mut points = Vec::with_capacity(values.len());
        for (i, value) in values.into_iter().enumerate() {
            let label = match value.get_ref() {
                DeValue::String(s) => s.to_string(),
                _ => text.get(value.span()).unwrap_or("?").trim().to_owned(),
            };
            let mut swept = tree.clone();
            let added = match tree::set(&mut swept, &key, value) {
                Ok(set) => matches!(set, tree::Set::Added),
                Err(m) => return Err(ctx.err(&tree, "sweep.key", format!("\"{key}\": {m}"))),
            };
            let blame = |mut e: ScenarioError| {
                if let Err(b) = &base
                    && (&b.key, &b.message) == (&e.key, &e.message)
                {
                    return b.clone();
                }
                e.message
                    .push_str(&format!(" (with sweep value {} of sweep.values, \"{label}\")", i + 1));
                e
            };
            let raw: Raw = ctx.deserialize(&swept).map_err(|e| {
                if added && e.key.as_deref() == Some(key.as_str()) && e.message.starts_with("unknown key") {
                    ctx.err(&tree, "sweep.key", format!("\"{key}\" does not exist: {}", e.message))
                } else {
                    blame(e)
                }
            })?;
            points.push(ctx.build(&swept, raw, Some(label.clone())).map_err(blame)?);
        }
        let plot = match plot {
            Some(plot) => plot
                .check(&points[0].schedulers, &points[0].ccs)
                .map_err(|(key, message)| ctx.err(&tree, key, message))?,
            None => PlotSpec::default(),
        };
        Ok(Scenario {
            name,
            file: file.to_owned(),
            sweep_key: Some(key),
            points,
            plot,
        })
    }

    /// Overrides the file's seed at every sweep point.
    pub fn set_seed(&mut self, seed: u64) {
        for p in &mut self.points {
            p.seed = seed;
        }
    }

    /// Overrides the file's repeat count at every sweep point (at least 1).
    pub fn set_repeat(&mut self, repeat: u32) {
        for p in &mut self.points {
            p.repeat = repeat.max(1);
        }
    }

    /// Keeps only the named congestion controls at every sweep point, in the file's order; an
    /// error names the first one the file does not list, and the file's own.
    pub fn keep_ccs(&mut self, ccs: &[String]) -> Result<(), String> {
        for p in &mut self.points {
            if let Some(missing) = ccs.iter().find(|cc| !p.ccs.contains(cc)) {
                return Err(format!(
                    "\"{missing}\" is not among the file's [client] cc ({})",
                    p.ccs.join(", ")
                ));
            }
            p.ccs.retain(|cc| ccs.contains(cc));
        }
        Ok(())
    }

    /// Runs every sweep point on `transports` (names of `pcdn_core::Transport::NAMES`) instead
    /// of the file's `[client] transport`; an error names the first unknown one.
    pub fn set_transports(&mut self, transports: &[String]) -> Result<(), String> {
        if let Some(bad) = transports.iter().find(|t| Transport::by_name(t).is_none()) {
            let known: Vec<&str> = Transport::NAMES.iter().map(|(n, _)| *n).collect();
            return Err(format!("unknown transport \"{bad}\"; known: {}", known.join(", ")));
        }
        for p in &mut self.points {
            p.transports = transports.to_vec();
        }
        Ok(())
    }

    /// Keeps only the named schedulers at every sweep point, in the file's order; an error
    /// names the first one the file does not list, and the file's own.
    pub fn keep_schedulers(&mut self, schedulers: &[String]) -> Result<(), String> {
        for p in &mut self.points {
            if let Some(missing) = schedulers.iter().find(|s| !p.schedulers.contains(s)) {
                return Err(format!(
                    "\"{missing}\" is not among the file's [client] schedulers ({})",
                    p.schedulers.join(", ")
                ));
            }
            p.schedulers.retain(|s| schedulers.contains(s));
        }
        Ok(())
    }

    /// Keeps only the named sweep points (values as written in `sweep.values`), in the file's
    /// order; an error names the first value the sweep does not have, and the sweep's own.
    pub fn keep_points(&mut self, values: &[String]) -> Result<(), String> {
        if self.sweep_key.is_none() {
            return Err("the scenario has no [sweep]".to_owned());
        }
        let known: Vec<&str> = self.points.iter().filter_map(|p| p.sweep.as_deref()).collect();
        if let Some(missing) = values.iter().find(|v| !known.contains(&v.as_str())) {
            return Err(format!(
                "\"{missing}\" is not among sweep.values ({})",
                known.join(", ")
            ));
        }
        self.points
            .retain(|p| p.sweep.as_ref().is_some_and(|v| values.contains(v)));
        Ok(())
    }

    /// Every run, in the order rows are reported: sweep point, then scheduler, then congestion
    /// control, then transport, then repeat (seeds `seed`, `seed + 1`, ...).
    pub fn runs(&self) -> Vec<Run<'_>> {
        let mut runs = Vec::new();
        for (index, point) in self.points.iter().enumerate() {
            for scheduler in &point.schedulers {
                for cc in &point.ccs {
                    for transport in &point.transports {
                        for repeat in 0..point.repeat {
                            runs.push(Run {
                                point: index,
                                sweep: point.sweep.as_deref(),
                                scheduler,
                                cc,
                                transport,
                                repeat,
                                seed: point.seed.wrapping_add(u64::from(repeat)),
                                world: &point.world,
                                video: point.video.as_ref(),
                            });
                        }
                    }
                }
            }
        }
        runs
    }
}

/// The items of `sweep.values` with their spans.
fn sweep_values<'i>(tree: &Tree<'i>) -> Vec<Spanned<DeValue<'i>>> {
    let values = tree
        .get_ref()
        .as_table()
        .and_then(|t| t.get("sweep"))
        .and_then(|s| s.get_ref().as_table())
        .and_then(|s| s.get("values"))
        .and_then(|v| v.get_ref().as_array());
    values.map(|v| v.to_vec()).unwrap_or_default()
}

/// 1-based line of a byte offset.
fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

// ---- the document as serde reads it (after `tree::desugar`) ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: Option<String>,
    #[serde(default = "default_seed")]
    seed: u64,
    #[serde(default = "default_repeat")]
    repeat: u32,
    #[serde(default = "default_duration", deserialize_with = "units::de::duration")]
    duration: Duration,
    #[serde(default)]
    content: RawContent,
    video: Option<RawVideo>,
    #[serde(default)]
    client: RawClient,
    #[serde(default)]
    server: Vec<RawServer>,
    #[serde(default)]
    bottleneck: Vec<RawBottleneck>,
    sweep: Option<RawSweep>,
    plot: Option<RawPlot>,
}

fn default_seed() -> u64 {
    1
}
fn default_repeat() -> u32 {
    1
}
fn default_duration() -> Duration {
    Duration::from_secs(60)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContent {
    #[serde(default, deserialize_with = "units::de::opt_size")]
    size: Option<u64>,
    #[serde(default = "default_packet_size")]
    packet_size: u32,
    #[serde(default, deserialize_with = "units::de::opt_size")]
    task_size: Option<u64>,
}

fn default_packet_size() -> u32 {
    1400
}

impl Default for RawContent {
    fn default() -> RawContent {
        RawContent {
            size: None,
            packet_size: default_packet_size(),
            task_size: None,
        }
    }
}

/// `[video]`: a constant-bitrate video played from the content's first byte.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVideo {
    #[serde(deserialize_with = "units::de::rate")]
    bitrate: u64,
    #[serde(deserialize_with = "units::de::duration")]
    duration: Duration,
    #[serde(default, deserialize_with = "units::de::opt_duration")]
    segment: Option<Duration>,
    #[serde(default, deserialize_with = "units::de::opt_duration")]
    gop: Option<Duration>,
    #[serde(default, deserialize_with = "units::de::opt_duration")]
    startup: Option<Duration>,
    #[serde(default, deserialize_with = "units::de::opt_duration")]
    resume: Option<Duration>,
    fps: Option<u32>,
    jump_to_cdn: Option<RawJump>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJump {
    #[serde(deserialize_with = "units::de::duration")]
    buffer_below: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawClient {
    #[serde(deserialize_with = "names::schedulers")]
    schedulers: Vec<String>,
    #[serde(deserialize_with = "names::controls")]
    cc: Vec<String>,
    #[serde(deserialize_with = "names::transports")]
    transport: Vec<String>,
    #[serde(deserialize_with = "units::de::size")]
    reorder_buffer: u64,
    /// weave's switches and constants (docs/weave.md).
    weave: WeaveConfig,
    /// The reordering window of loss detection (RFC 8985 §6.2).
    reordering: ReorderConfig,
    /// Tail loss probes (RFC 8985 §7).
    tail_probes: bool,
}

impl Default for RawClient {
    fn default() -> RawClient {
        RawClient {
            schedulers: vec!["default".to_owned()],
            cc: vec!["default".to_owned()],
            transport: vec!["pull".to_owned()],
            reorder_buffer: 4_000_000,
            weave: WeaveConfig::default(),
            reordering: ReorderConfig::default(),
            tail_probes: true,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    name: String,
    #[serde(default)]
    origin: bool,
    link: LinkConfig,
    uplink: Option<LinkConfig>,
    #[serde(default, deserialize_with = "units::de::opt_duration")]
    fail_at: Option<Duration>,
    #[serde(default, deserialize_with = "units::de::opt_duration")]
    recover_at: Option<Duration>,
    #[serde(default, deserialize_with = "opt_rate")]
    upload_limit: Option<u64>,
}

fn opt_rate<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    units::de::rate(d).map(Some)
}

/// A bottleneck after `tree::desugar` moved its link keys under `link`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBottleneck {
    servers: Vec<String>,
    link: LinkConfig,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSweep {
    key: String,
    #[allow(dead_code)] // read from the tree, with spans; here only checked to be an array
    values: Vec<IgnoredAny>,
}

/// The default uplink: the link's delay, no rate limit, no loss, no queue limit.
fn default_uplink(link: &LinkConfig) -> LinkConfig {
    LinkConfig {
        rate: Rate::Fixed(UNLIMITED_RATE_BPS),
        delay: link.delay,
        jitter: Jitter::default(),
        loss: Loss::None,
        queue: QueueLimit::UNLIMITED,
        blackouts: Vec::new(),
        changes: Vec::new(),
    }
}

/// What every error of one load needs: the file and its text (for line numbers).
#[derive(Clone, Copy)]
struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
    base_dir: &'a Path,
}

impl Ctx<'_> {
    fn error(&self, line: Option<usize>, key: Option<String>, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            file: self.file.to_owned(),
            line,
            key,
            message: message.into(),
        }
    }

    /// An error at dotted `key`, its line looked up in `tree`.
    fn err(&self, tree: &Tree<'_>, key: &str, message: impl Into<String>) -> ScenarioError {
        let line = tree::span_of(tree, key).map(|s| line_at(self.text, s.start));
        self.error(line, Some(key.to_owned()), message)
    }

    /// Deserializes a (possibly swept) document, errors carrying the dotted key and line.
    fn deserialize<T: serde::de::DeserializeOwned>(&self, tree: &Tree<'_>) -> Result<T, ScenarioError> {
        let mut sugared = tree.clone();
        tree::desugar(&mut sugared);
        let span = sugared.span();
        let DeValue::Table(table) = sugared.into_inner() else {
            unreachable!("a TOML document is a table")
        };
        let de = toml::de::Deserializer::from(Spanned::new(span, table));
        serde_path_to_error::deserialize::<_, T>(de).map_err(|e| {
            let (key, in_bottleneck_link) = render_path(e.path(), tree);
            let inner = e.into_inner();
            let line = inner.span().map(|s| line_at(self.text, s.start)).or_else(|| {
                key.as_deref()
                    .and_then(|k| tree::span_of(tree, k))
                    .map(|s| line_at(self.text, s.start))
            });
            let mut message = inner
                .message()
                .trim_end()
                .replacen("unknown field", "unknown key", 1)
                .replacen("missing field", "missing key", 1)
                .replacen("expected one of", "expected one of the keys", 1);
            if in_bottleneck_link && message.starts_with("unknown key") {
                // The bottleneck's own key sits beside its link keys in the file.
                message = message.replacen("one of the keys ", "one of the keys `servers`, ", 1);
            }
            self.error(line, key, message)
        })
    }

    /// Checks what serde cannot and builds the point's [`WorldSpec`].
    fn build(&self, tree: &Tree<'_>, raw: Raw, sweep: Option<String>) -> Result<SweepPoint, ScenarioError> {
        let err = |key: &str, message: String| self.err(tree, key, message);
        if raw.repeat == 0 {
            return Err(err("repeat", "expected at least 1 run per scheduler, got 0".into()));
        }
        if raw.duration.is_zero() {
            return Err(err(
                "duration",
                "expected a positive virtual-time limit such as \"60s\"".into(),
            ));
        }
        let video = match raw.video {
            Some(v) => Some(self.video(tree, v)?),
            None => None,
        };
        let content = &raw.content;
        let video_bytes = video.as_ref().map(|v| v.spec.total_bytes());
        let size = match (content.size, video_bytes) {
            (Some(0), _) => return Err(err("content.size", "expected a positive size such as \"20MB\"".into())),
            (Some(size), Some(needed)) if size < needed => {
                return Err(err(
                    "content.size",
                    format!(
                        "expected at least the video's {needed} bytes (video.bitrate × video.duration), got {size}; \
                         leave it out to use exactly the video's size"
                    ),
                ));
            }
            (Some(size), _) => size,
            (None, Some(needed)) => needed,
            (None, None) => {
                return Err(err(
                    "content.size",
                    "missing key: expected a size such as \"20MB\" (or a [video] table to derive it from)".into(),
                ));
            }
        };
        let max_payload = pcdn_core::wire::MAX_PAYLOAD as u32;
        if content.packet_size == 0 || content.packet_size > max_payload {
            return Err(err(
                "content.packet_size",
                format!(
                    "expected payload bytes in 1..={max_payload}, got {}",
                    content.packet_size
                ),
            ));
        }
        if content.task_size == Some(0) {
            return Err(err(
                "content.task_size",
                "expected a positive size such as \"2MB\"".into(),
            ));
        }
        if raw.client.reorder_buffer < u64::from(content.packet_size) {
            return Err(err(
                "client.reorder_buffer",
                format!(
                    "expected room for at least one packet ({} bytes), got {} bytes",
                    content.packet_size, raw.client.reorder_buffer
                ),
            ));
        }
        self.check_client(tree, &raw.client)?;

        if raw.server.is_empty() {
            return Err(self.error(
                None,
                Some("server".into()),
                "a scenario needs at least one [[server]] table",
            ));
        }
        let mut index_of: HashMap<String, usize> = HashMap::new();
        let mut servers = Vec::with_capacity(raw.server.len());
        for (i, s) in raw.server.into_iter().enumerate() {
            if s.name.is_empty() || s.name.contains('.') || s.name.trim() != s.name {
                return Err(err(
                    &format!("server.{i}.name"),
                    format!(
                        "expected a non-empty name without dots or surrounding spaces, got \"{}\"",
                        s.name
                    ),
                ));
            }
            if let Some(first) = index_of.insert(s.name.clone(), i) {
                return Err(err(
                    &format!("server.{i}.name"),
                    format!("duplicate server name \"{}\" (server {first} has it too)", s.name),
                ));
            }
            let key = format!("server.{}", s.name);
            let link = self.link(tree, &format!("{key}.link"), s.link)?;
            let uplink = match s.uplink {
                Some(u) => self.link(tree, &format!("{key}.uplink"), u)?,
                None => default_uplink(&link),
            };
            if s.recover_at.is_some() && s.fail_at.is_none() {
                return Err(err(&format!("{key}.recover_at"), "recover_at needs a fail_at".into()));
            }
            if let (Some(fail), Some(recover)) = (s.fail_at, s.recover_at)
                && recover <= fail
            {
                return Err(err(
                    &format!("{key}.recover_at"),
                    format!("expected a time after fail_at ({fail:?}), got {recover:?}"),
                ));
            }
            if s.upload_limit == Some(0) {
                return Err(err(
                    &format!("{key}.upload_limit"),
                    "expected a positive rate such as \"4mbit\"".into(),
                ));
            }
            servers.push(ServerSpec {
                name: s.name,
                origin: s.origin,
                link,
                uplink,
                fail_at: s.fail_at,
                recover_at: s.recover_at,
                upload_limit: s.upload_limit,
            });
        }

        let mut bottlenecks = Vec::with_capacity(raw.bottleneck.len());
        let mut behind: Vec<Option<usize>> = vec![None; servers.len()];
        for (i, b) in raw.bottleneck.into_iter().enumerate() {
            let key = format!("bottleneck.{i}");
            if b.servers.is_empty() {
                return Err(err(
                    &format!("{key}.servers"),
                    "expected the names of the servers whose data share this link".into(),
                ));
            }
            let mut members = Vec::with_capacity(b.servers.len());
            for name in &b.servers {
                let Some(&index) = index_of.get(name) else {
                    let known: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
                    return Err(err(
                        &format!("{key}.servers"),
                        format!("unknown server \"{name}\"; known: {}", known.join(", ")),
                    ));
                };
                if members.contains(&index) {
                    return Err(err(
                        &format!("{key}.servers"),
                        format!("server \"{name}\" is listed twice"),
                    ));
                }
                if let Some(other) = behind[index].replace(i) {
                    return Err(err(
                        &format!("{key}.servers"),
                        format!("server \"{name}\" is already behind bottleneck {other} (one bottleneck per server)"),
                    ));
                }
                members.push(index);
            }
            let link = self.link(tree, &key, b.link)?;
            bottlenecks.push(BottleneckSpec { link, servers: members });
        }

        Ok(SweepPoint {
            sweep,
            seed: raw.seed,
            repeat: raw.repeat,
            schedulers: raw.client.schedulers,
            ccs: raw.client.cc,
            transports: raw.client.transport,
            video,
            world: WorldSpec {
                content_length: size,
                packet_size: content.packet_size,
                task_size: content.task_size,
                reorder_buffer: raw.client.reorder_buffer,
                servers,
                bottlenecks,
                duration: raw.duration,
                weave: raw.client.weave,
                reordering: raw.client.reordering,
                tail_probes: raw.client.tail_probes,
            },
        })
    }

    /// The `[client]` schedulers and congestion controls exist.
    fn check_client(&self, tree: &Tree<'_>, client: &RawClient) -> Result<(), ScenarioError> {
        let scheduler_ok = |n: &str| scheduler::by_name(n, 0).is_some();
        self.check_names(
            tree,
            "client.schedulers",
            "scheduler",
            &client.schedulers,
            scheduler::SCHEDULERS,
            scheduler_ok,
        )?;
        let cc_ok = |n: &str| cc::by_name(n).is_some();
        self.check_names(
            tree,
            "client.cc",
            "congestion control",
            &client.cc,
            cc::CONTROLLERS,
            cc_ok,
        )?;
        self.check_names(
            tree,
            "client.transport",
            "transport",
            &client.transport,
            Transport::NAMES,
            |n| Transport::by_name(n).is_some(),
        )
    }

    /// Checks `[video]` and builds the player's configuration; errors name the `video.` key.
    fn video(&self, tree: &Tree<'_>, raw: RawVideo) -> Result<PlayerConfig, ScenarioError> {
        let mut spec = VideoSpec::new(raw.bitrate, raw.duration);
        spec.segment = raw.segment.unwrap_or(spec.segment);
        spec.gop = raw.gop.unwrap_or(spec.gop);
        spec.startup = raw.startup.unwrap_or(spec.startup);
        spec.resume = raw.resume.unwrap_or(spec.resume);
        spec.fps = raw.fps.unwrap_or(spec.fps);
        spec.validate().map_err(|e| match e {
            SpecError::Zero { field } => {
                let key = if field == "bitrate_bps" { "bitrate" } else { field };
                let example = match key {
                    "bitrate" => "a rate such as \"4mbit\"",
                    "fps" => "a frame rate such as 30",
                    _ => "a duration such as \"1s\"",
                };
                self.err(
                    tree,
                    &format!("video.{key}"),
                    format!("expected a positive value: {example}"),
                )
            }
            too_large @ SpecError::TooLarge { .. } => self.err(tree, "video.duration", too_large.to_string()),
        })?;
        Ok(PlayerConfig {
            spec,
            jump_to_cdn: raw.jump_to_cdn.map(|j| JumpToCdn {
                buffer_below: j.buffer_below,
            }),
        })
    }

    /// Names listed once each, every one known to its registry.
    fn check_names(
        &self,
        tree: &Tree<'_>,
        key: &str,
        what: &str,
        names: &[String],
        registry: &[(&str, &str)],
        valid: impl Fn(&str) -> bool,
    ) -> Result<(), ScenarioError> {
        if names.is_empty() {
            return Err(self.err(tree, key, format!("expected at least one {what} name")));
        }
        for (i, name) in names.iter().enumerate() {
            if !valid(name) {
                let known: Vec<&str> = registry.iter().map(|(n, _)| *n).collect();
                return Err(self.err(
                    tree,
                    &format!("{key}.{i}"),
                    format!("unknown {what} \"{name}\"; known: {}", known.join(", ")),
                ));
            }
            if names[..i].contains(name) {
                return Err(self.err(
                    tree,
                    &format!("{key}.{i}"),
                    format!("{what} \"{name}\" is listed twice"),
                ));
            }
        }
        Ok(())
    }

    /// Reads trace files (relative to the scenario's folder) and checks the link can be built.
    fn link(&self, tree: &Tree<'_>, key: &str, mut link: LinkConfig) -> Result<LinkConfig, ScenarioError> {
        link.resolve_paths(self.base_dir)
            .map_err(|e| self.err(tree, &format!("{key}.rate"), e.to_string()))?;
        Link::<()>::new(&link, 0).map_err(|e| self.err(tree, key, e.to_string()))?;
        Ok(link)
    }
}

/// A serde path as a scenario key: `server[1].link.rate` → `server.edge1.link.rate`,
/// `bottleneck[0].link.rate` → `bottleneck.0.rate` (undoing `tree::desugar`; the flag says
/// the path went through such a bottleneck link).
fn render_path(path: &serde_path_to_error::Path, tree: &Tree<'_>) -> (Option<String>, bool) {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = path.iter().collect();
    let is_key = |i: usize, name: &str| matches!(segments.get(i), Some(Segment::Map { key }) if key == name);
    let mut out = Vec::with_capacity(segments.len());
    let mut in_bottleneck_link = false;
    for (i, segment) in segments.iter().enumerate() {
        match segment {
            Segment::Map { key } if i == 2 && key == "link" && is_key(0, "bottleneck") => in_bottleneck_link = true,
            Segment::Map { key } => out.push(key.clone()),
            Segment::Enum { variant } => out.push(variant.clone()),
            Segment::Seq { index } if i == 1 && is_key(0, "server") => {
                out.push(tree::element_name(tree, "server", *index).map_or_else(|| index.to_string(), str::to_owned))
            }
            Segment::Seq { index } => out.push(index.to_string()),
            Segment::Unknown => out.push("?".to_owned()),
        }
    }
    ((!out.is_empty()).then(|| out.join(".")), in_bottleneck_link)
}

#[cfg(test)]
mod tests;
