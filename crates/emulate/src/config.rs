//! `links.toml`: several relays in one file, each direction a link table written exactly as in
//! scenario files (the simulator's `LinkConfig` serde, with the same `loss = 0.1` and
//! `jitter = "5ms"` shorthands). Errors name the file, the line, the dotted key
//! (`relay.1.down.rate`, relays counted from 0) and what was expected.

use std::net::{SocketAddr, ToSocketAddrs};
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use pcdn_sim::scenario::{SourceFile, desugar_knobs};
use pcdn_sim::{Link, LinkConfig, LinkError, units};
use serde::Deserialize;
use serde::de::{self, Deserializer};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::relay::{DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CLIENTS, RelayConfig, default_up_link};

/// Seed of a file without a `seed` key.
const DEFAULT_SEED: u64 = 1;

/// A links file that failed to load: `file[:line]: [key: ]message`, the scenario files' error
/// (links are written in scenario syntax).
pub use pcdn_sim::scenario::ScenarioError as ConfigError;

/// Reads a links file; trace files resolve relative to its folder. `seed` replaces the file's
/// top-level `seed` (relays with a `seed` of their own keep it).
pub fn load_config(path: &Path, seed: Option<u64>) -> Result<Vec<RelayConfig>, ConfigError> {
    let source = SourceFile::read(path, "the links file")?;
    parse_config(&source.text, &source.name, source.base_dir, seed)
}

/// Parses links-file text. `file` names it in errors; trace files resolve relative to
/// `base_dir`; `seed` replaces the top-level `seed`. Relay `i` (from 0) without its own `seed`
/// gets the top-level seed + `i`.
pub fn parse_config(
    text: &str,
    file: &str,
    base_dir: &Path,
    seed: Option<u64>,
) -> Result<Vec<RelayConfig>, ConfigError> {
    let ctx = Ctx { file, text };
    let doc = DeTable::parse(text).map_err(|e| ConfigError {
        file: file.to_owned(),
        line: e.span().map(|s| line_at(text, s.start)),
        key: None,
        message: format!("invalid TOML: {}", e.message().trim_end()),
    })?;
    let span = doc.span();
    let tree = Spanned::new(span, DeValue::Table(doc.into_inner()));
    let raw = ctx.deserialize(&tree)?;

    if raw.relay.is_empty() {
        return Err(ctx.error(
            None,
            Some("relay".into()),
            "expected at least one [[relay]] table with listen, to and [relay.down]",
        ));
    }
    let base_seed = seed.unwrap_or(raw.seed);
    let mut relays: Vec<RelayConfig> = Vec::with_capacity(raw.relay.len());
    for (i, r) in raw.relay.into_iter().enumerate() {
        let key = format!("relay.{i}");
        let err = |field: &str, message: String| ctx.err(&tree, &format!("{key}.{field}"), message);
        if r.listen.port() != 0
            && let Some(j) = relays.iter().position(|o| o.listen == r.listen)
        {
            return Err(err(
                "listen",
                format!("{} is already relay {j}'s listen address", r.listen),
            ));
        }
        if r.idle_timeout == Some(Duration::ZERO) {
            return Err(err(
                "idle_timeout",
                "expected a positive duration such as \"60s\"".into(),
            ));
        }
        if r.max_clients == Some(0) {
            return Err(err("max_clients", "expected at least 1".into()));
        }
        let down = ctx.link(&tree, &format!("{key}.down"), r.down, base_dir)?;
        let up = match r.up {
            Some(up) => ctx.link(&tree, &format!("{key}.up"), up, base_dir)?,
            None => default_up_link(&down),
        };
        relays.push(RelayConfig {
            listen: r.listen,
            to: r.to,
            down,
            up,
            seed: r.seed.unwrap_or_else(|| base_seed.wrapping_add(i as u64)),
            idle_timeout: r.idle_timeout.unwrap_or(DEFAULT_IDLE_TIMEOUT),
            max_clients: r.max_clients.unwrap_or(DEFAULT_MAX_CLIENTS),
        });
    }
    Ok(relays)
}

// ---- the document as serde reads it (after `desugar`) ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default = "default_seed")]
    seed: u64,
    #[serde(default)]
    relay: Vec<RawRelay>,
}

fn default_seed() -> u64 {
    DEFAULT_SEED
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRelay {
    #[serde(deserialize_with = "address")]
    listen: SocketAddr,
    #[serde(deserialize_with = "address")]
    to: SocketAddr,
    down: LinkConfig,
    up: Option<LinkConfig>,
    seed: Option<u64>,
    #[serde(default, deserialize_with = "units::de::opt_duration")]
    idle_timeout: Option<Duration>,
    max_clients: Option<usize>,
}

/// A socket address, or `host:port` resolved now (the first address wins).
fn address<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let s = String::deserialize(d)?;
    resolve_address(&s).map_err(de::Error::custom)
}

/// Parses `127.0.0.1:7901`, `[::1]:7901` or `localhost:7901`.
pub fn resolve_address(s: &str) -> Result<SocketAddr, String> {
    let expected = || format!("expected an address such as \"127.0.0.1:7901\" or \"localhost:7901\", got \"{s}\"");
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    if !s.contains(':') {
        return Err(format!("{}: no port", expected()));
    }
    match s.to_socket_addrs() {
        Ok(mut addrs) => addrs
            .next()
            .ok_or_else(|| format!("{}: it resolves to no address", expected())),
        Err(e) => Err(format!("{}: {e}", expected())),
    }
}

#[derive(Clone, Copy)]
struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

type Tree<'i> = Spanned<DeValue<'i>>;

impl Ctx<'_> {
    fn error(&self, line: Option<usize>, key: Option<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.to_owned(),
            line,
            key,
            message: message.into(),
        }
    }

    /// An error at dotted `key`, its line looked up in `tree`.
    fn err(&self, tree: &Tree<'_>, key: &str, message: String) -> ConfigError {
        let line = span_of(tree, key).map(|s| line_at(self.text, s.start));
        self.error(line, Some(key.to_owned()), message)
    }

    fn deserialize(&self, tree: &Tree<'_>) -> Result<RawFile, ConfigError> {
        let mut sugared = tree.clone();
        desugar(&mut sugared);
        let span = sugared.span();
        let DeValue::Table(table) = sugared.into_inner() else {
            unreachable!("a TOML document is a table")
        };
        let de = toml::de::Deserializer::from(Spanned::new(span, table));
        serde_path_to_error::deserialize::<_, RawFile>(de).map_err(|e| {
            let key = render_path(e.path());
            let inner = e.into_inner();
            let line = inner.span().map(|s| line_at(self.text, s.start)).or_else(|| {
                key.as_deref()
                    .and_then(|k| span_of(tree, k))
                    .map(|s| line_at(self.text, s.start))
            });
            let message = inner
                .message()
                .trim_end()
                .replacen("unknown field", "unknown key", 1)
                .replacen("missing field", "missing key", 1)
                .replacen("expected one of", "expected one of the keys", 1);
            self.error(line, key, message)
        })
    }

    /// Reads the link's trace files (relative to the file's folder) and checks it can be built.
    fn link(
        &self,
        tree: &Tree<'_>,
        key: &str,
        mut link: LinkConfig,
        base_dir: &Path,
    ) -> Result<LinkConfig, ConfigError> {
        link.resolve_paths(base_dir)
            .map_err(|e| self.err(tree, &format!("{key}.rate"), e.to_string()))?;
        link.loss
            .validate()
            .map_err(|e| self.err(tree, &format!("{key}.loss"), e.to_string()))?;
        Link::<()>::new(&link, 0).map_err(|e| {
            // What is left to fail: a blackout, or a loss model inside `changes`.
            let field = match e {
                LinkError::Blackout(_) => "blackouts",
                LinkError::Loss(_) => "changes",
                LinkError::Trace(_) | LinkError::TraceIo { .. } => "rate",
            };
            self.err(tree, &format!("{key}.{field}"), e.to_string())
        })?;
        Ok(link)
    }
}

/// A serde path as a dotted key: `relay[1].down.rate` → `relay.1.down.rate`.
fn render_path(path: &serde_path_to_error::Path) -> Option<String> {
    use serde_path_to_error::Segment;
    let parts: Vec<String> = path
        .iter()
        .map(|segment| match segment {
            Segment::Map { key } => key.clone(),
            Segment::Enum { variant } => variant.clone(),
            Segment::Seq { index } => index.to_string(),
            Segment::Unknown => "?".to_owned(),
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("."))
}

/// The span of the deepest part of dotted `key` present in the tree.
fn span_of(tree: &Tree<'_>, key: &str) -> Option<Range<usize>> {
    let mut current = tree;
    let mut best = None;
    for segment in key.split('.') {
        match current.get_ref() {
            DeValue::Table(t) => {
                let Some((k, v)) = t.get_key_value(segment) else { break };
                best = Some(k.span());
                current = v;
            }
            DeValue::Array(a) => {
                let Some(v) = segment.parse::<usize>().ok().and_then(|i| a.get(i)) else {
                    break;
                };
                best = Some(v.span());
                current = v;
            }
            _ => break,
        }
    }
    best
}

fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The scenario files' link shorthands, in every relay's `down` and `up` (and their
/// `changes`): `loss = 0.1` is `loss = { bernoulli = 0.1 }`, `jitter = "5ms"` is
/// `jitter = { uniform = "5ms" }`.
fn desugar(tree: &mut Tree<'_>) {
    let DeValue::Table(root) = tree.get_mut() else { return };
    let Some(DeValue::Array(relays)) = root.get_mut("relay").map(Spanned::get_mut) else {
        return;
    };
    for relay in relays.iter_mut() {
        let DeValue::Table(relay) = relay.get_mut() else {
            continue;
        };
        for direction in ["down", "up"] {
            let Some(DeValue::Table(link)) = relay.get_mut(direction).map(Spanned::get_mut) else {
                continue;
            };
            desugar_knobs(link);
            if let Some(DeValue::Array(changes)) = link.get_mut("changes").map(Spanned::get_mut) {
                for change in changes.iter_mut() {
                    if let DeValue::Table(c) = change.get_mut() {
                        desugar_knobs(c);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcdn_sim::{Jitter, Loss, QueueLimit, Rate};

    fn parse(text: &str) -> Result<Vec<RelayConfig>, ConfigError> {
        parse_config(text, "links.toml", Path::new("."), None)
    }

    #[test]
    fn scenario_link_syntax_reads_verbatim() {
        let relays = parse(
            r#"
seed = 7
[[relay]]
listen = "127.0.0.1:7901"
to = "127.0.0.1:7801"
down = { rate = "4mbit", delay = "40ms", loss = 0.1, jitter = "5ms" }

[[relay]]
listen = "127.0.0.1:7902"
to = "127.0.0.1:7802"
seed = 99
idle_timeout = "5s"
[relay.down]
rate = { trace = [1, 2, 2] }
delay = "15ms"
queue = { bytes = "64kB" }
changes = [{ at = "30s", loss = 0.05 }]
[relay.up]
rate = "1mbit"
delay = "15ms"
"#,
        )
        .unwrap();
        assert_eq!(relays.len(), 2);
        let a = &relays[0];
        assert_eq!(a.listen, "127.0.0.1:7901".parse().unwrap());
        assert_eq!(a.down.rate, Rate::Fixed(4_000_000));
        assert_eq!(a.down.loss, Loss::Bernoulli(0.1));
        assert_eq!(a.down.jitter, Jitter::uniform(Duration::from_millis(5), false));
        assert_eq!(a.up, default_up_link(&a.down));
        assert_eq!((a.seed, a.idle_timeout), (7, DEFAULT_IDLE_TIMEOUT));
        let b = &relays[1];
        assert!(matches!(b.down.rate, Rate::Trace(_)));
        assert_eq!(b.down.queue, QueueLimit::bytes(64_000));
        assert_eq!(b.down.changes[0].change, pcdn_sim::Change::Loss(Loss::Bernoulli(0.05)));
        assert_eq!(b.up.rate, Rate::Fixed(1_000_000));
        assert_eq!((b.seed, b.idle_timeout), (99, Duration::from_secs(5)));
        // The command line's seed replaces the file's, not a relay's own.
        let relays = parse_config(
            "seed = 7\n[[relay]]\nlisten = \"127.0.0.1:1\"\nto = \"127.0.0.1:2\"\ndown = {}\n\
             [[relay]]\nlisten = \"127.0.0.1:3\"\nto = \"127.0.0.1:4\"\ndown = {}\nseed = 5\n",
            "x",
            Path::new("."),
            Some(40),
        )
        .unwrap();
        assert_eq!((relays[0].seed, relays[1].seed), (40, 5));
    }

    #[test]
    fn errors_name_the_file_line_relay_and_key() {
        let text = "[[relay]]\nlisten = \"127.0.0.1:7901\"\nto = \"127.0.0.1:7801\"\ndown = { rate = \"4mbit\" }\n\
                    [[relay]]\nlisten = \"127.0.0.1:7902\"\nto = \"127.0.0.1:7802\"\n[relay.down]\nrate = \"2mbit\"\n";
        assert_eq!(parse(text).unwrap().len(), 2);
        let with = |from: &str, to: &str| {
            assert!(text.contains(from));
            parse(&text.replace(from, to)).unwrap_err()
        };
        let e = with("\"2mbit\"", "\"fast\"");
        assert_eq!((e.line, e.key.as_deref()), (Some(9), Some("relay.1.down.rate")));
        assert!(e.to_string().starts_with("links.toml:9: relay.1.down.rate: "), "{e}");
        assert!(e.message.contains("expected a rate"), "{e}");

        let e = with("rate = \"2mbit\"", "delai = \"1ms\"");
        assert_eq!((e.line, e.key.as_deref()), (Some(9), Some("relay.1.down.delai")), "{e}");
        assert!(e.message.contains("unknown key `delai`"), "{e}");

        let e = with("rate = \"2mbit\"", "loss = 1.5");
        assert_eq!((e.line, e.key.as_deref()), (Some(9), Some("relay.1.down.loss")), "{e}");
        assert!(e.message.contains("not a probability"), "{e}");

        let e = with("rate = \"2mbit\"", "blackouts = [{ start = \"2s\", end = \"1s\" }]");
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(9), Some("relay.1.down.blackouts")),
            "{e}"
        );
        assert!(e.message.contains("not before end"), "{e}");

        let e = with("rate = \"2mbit\"", "changes = [{ at = \"1s\", loss = 2 }]");
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(9), Some("relay.1.down.changes")),
            "{e}"
        );

        let e = with("\"127.0.0.1:7802\"", "\"nowhere\"");
        assert_eq!((e.line, e.key.as_deref()), (Some(7), Some("relay.1.to")), "{e}");
        assert!(e.message.contains("no port"), "{e}");

        let e = with("7902", "7901");
        assert_eq!((e.line, e.key.as_deref()), (Some(6), Some("relay.1.listen")), "{e}");
        assert!(e.message.contains("relay 0"), "{e}");

        let e = parse("[[relay]]\nlisten = \"127.0.0.1:1\"\nto = \"127.0.0.1:2\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("relay.0"), "{e}");
        assert!(e.message.contains("missing key `down`"), "{e}");

        let e = parse("[[relay]]\nlisten = \"127.0.0.1:1\"\nto = \"127.0.0.1:2\"\ndown = { rate = { trace_file = \"no/such.trace\" } }\n")
            .unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(4), Some("relay.0.down.rate")), "{e}");
        assert!(e.message.contains("no/such.trace"), "{e}");

        let e = parse("seed = 1\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("relay"), "{e}");
        let e = parse("relay = [\n").unwrap_err();
        assert!(e.message.starts_with("invalid TOML"), "{e}");
        let e = parse("[[relais]]\n").unwrap_err();
        assert!(e.message.contains("unknown key `relais`"), "{e}");
    }
}
