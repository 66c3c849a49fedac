//! The scenario document as a spanned TOML tree: dotted-key lookup, sweep substitution and the
//! link shorthands, all done before serde sees the document so errors keep their line numbers.

use std::borrow::Cow;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A whole scenario document (always a table at the root).
pub(crate) type Tree<'i> = Spanned<DeValue<'i>>;

/// The segments of a dotted key such as `server.edge1.link.delay`.
pub(crate) fn segments(key: &str) -> Vec<&str> {
    key.split('.').collect()
}

/// Finds an element of an array of tables by its `name` key, else by its 0-based index.
fn find_element(items: &[Spanned<DeValue<'_>>], segment: &str) -> Option<usize> {
    let by_name = items.iter().position(|item| {
        item.get_ref()
            .as_table()
            .and_then(|t| t.get("name"))
            .and_then(|n| n.get_ref().as_str())
            == Some(segment)
    });
    by_name.or_else(|| segment.parse::<usize>().ok().filter(|&i| i < items.len()))
}

/// The names (or indices) one may write after `prefix` to pick an element of an array.
fn element_names(items: &[Spanned<DeValue<'_>>]) -> String {
    let names: Vec<String> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item.get_ref()
                .as_table()
                .and_then(|t| t.get("name"))
                .and_then(|n| n.get_ref().as_str())
                .map_or_else(|| i.to_string(), str::to_owned)
        })
        .collect();
    if names.is_empty() {
        "it is empty".to_owned()
    } else {
        format!("known: {}", names.join(", "))
    }
}

/// The span of the deepest part of `key` that exists in the tree: the key of a table entry,
/// or the value of an array element. Used to give semantic errors a line number.
pub(crate) fn span_of(tree: &Tree<'_>, key: &str) -> Option<Range<usize>> {
    let mut current = tree;
    let mut best = None;
    for segment in segments(key) {
        match current.get_ref() {
            DeValue::Table(t) => {
                let Some((k, v)) = t.get_key_value(segment) else { break };
                best = Some(k.span());
                current = v;
            }
            DeValue::Array(a) => {
                let Some(i) = find_element(a, segment) else { break };
                best = Some(a[i].span());
                current = &a[i];
            }
            _ => break,
        }
    }
    best
}

/// The name of the `index`th element of the array at top-level key `array`, if it has one.
pub(crate) fn element_name<'t>(tree: &'t Tree<'_>, array: &str, index: usize) -> Option<&'t str> {
    tree.get_ref()
        .as_table()?
        .get(array)?
        .get_ref()
        .as_array()?
        .get(index)?
        .get_ref()
        .as_table()?
        .get("name")?
        .get_ref()
        .as_str()
}

/// "an integer", "a string", ...
fn article(v: &DeValue<'_>) -> String {
    let t = v.type_str();
    if t.starts_with(['a', 'e', 'i', 'o', 'u']) {
        format!("an {t}")
    } else {
        format!("a {t}")
    }
}

/// What [`set`] did.
pub(crate) enum Set {
    /// The key existed and now holds the new value.
    Replaced,
    /// The key was absent from its (existing) table and was added.
    Added,
}

/// Puts `value` at the dotted `key`. Every segment but the last must exist; the last may be
/// new (serde then judges whether the table accepts it). Errors say which part is missing.
pub(crate) fn set<'i>(tree: &mut Tree<'i>, key: &str, value: Spanned<DeValue<'i>>) -> Result<Set, String> {
    let segments = segments(key);
    if segments.iter().any(|s| s.is_empty()) {
        return Err("expected a dotted key such as \"server.edge1.link.delay\"".to_owned());
    }
    if segments[0] == "sweep" {
        return Err("the sweep cannot vary itself".to_owned());
    }
    let (last, parents) = segments.split_last().expect("split gives one segment at least");
    let mut current = tree.get_mut();
    for (depth, segment) in parents.iter().enumerate() {
        let here = segments[..depth].join(".");
        let walked = segments[..=depth].join(".");
        current = match current {
            DeValue::Table(t) => match t.get_mut(*segment) {
                Some(v) => v.get_mut(),
                None => return Err(format!("{walked} does not exist")),
            },
            DeValue::Array(a) => {
                let Some(i) = find_element(a, segment) else {
                    return Err(format!("{here} has no element \"{segment}\" ({})", element_names(a)));
                };
                a.as_mut()[i].get_mut()
            }
            other => return Err(format!("{here} is {}, not a table", article(other))),
        };
    }
    let here = parents.join(".");
    match current {
        DeValue::Table(t) => {
            let key = Spanned::new(value.span(), Cow::Owned((*last).to_owned()));
            Ok(match t.insert(key, value) {
                Some(_) => Set::Replaced,
                None => Set::Added,
            })
        }
        DeValue::Array(a) => {
            let Some(i) = find_element(a, last) else {
                return Err(format!("{here} has no element \"{last}\" ({})", element_names(a)));
            };
            a.as_mut()[i] = value;
            Ok(Set::Replaced)
        }
        other => Err(format!("{here} is {}, not a table", article(other))),
    }
}

/// Rewrites the scenario-only forms into what `LinkConfig` and the raw scenario structs read:
/// in every server's `link` and `uplink` and every bottleneck, `loss = 0.1` becomes
/// `loss = { bernoulli = 0.1 }` and `jitter = "5ms"` becomes `jitter = { uniform = "5ms" }`
/// (also inside `changes`); a bottleneck table `{ servers = [...], <link keys> }` becomes
/// `{ servers = [...], link = { <link keys> } }`.
pub(crate) fn desugar(tree: &mut Tree<'_>) {
    let DeValue::Table(root) = tree.get_mut() else { return };
    if let Some(DeValue::Array(servers)) = root.get_mut("server").map(Spanned::get_mut) {
        for server in servers.iter_mut() {
            if let DeValue::Table(server) = server.get_mut() {
                for key in ["link", "uplink"] {
                    if let Some(link) = server.get_mut(key) {
                        desugar_link(link.get_mut());
                    }
                }
            }
        }
    }
    if let Some(DeValue::Array(bottlenecks)) = root.get_mut("bottleneck").map(Spanned::get_mut) {
        for bottleneck in bottlenecks.iter_mut() {
            let span = bottleneck.span();
            if let DeValue::Table(table) = bottleneck.get_mut() {
                let mut link = DeTable::new();
                let mut outer = DeTable::new();
                for (k, v) in std::mem::take(table) {
                    if k.get_ref() == "servers" {
                        outer.insert(k, v);
                    } else {
                        link.insert(k, v);
                    }
                }
                let mut link = DeValue::Table(link);
                desugar_link(&mut link);
                outer.insert(
                    Spanned::new(span.clone(), Cow::Borrowed("link")),
                    Spanned::new(span, link),
                );
                *table = outer;
            }
        }
    }
}

fn desugar_link(link: &mut DeValue<'_>) {
    let DeValue::Table(t) = link else { return };
    desugar_knobs(t);
    if let Some(DeValue::Array(changes)) = t.get_mut("changes").map(Spanned::get_mut) {
        for change in changes.iter_mut() {
            if let DeValue::Table(c) = change.get_mut() {
                desugar_knobs(c);
            }
        }
    }
}

/// `loss = <number>` → `{ bernoulli = <number> }`; `jitter = "<duration>"` → `{ uniform = ... }`.
/// Public so that other files written in link syntax (the emulator's links files) accept the
/// same shorthands.
pub fn desugar_knobs(t: &mut DeTable<'_>) {
    for (key, inner, applies) in [
        (
            "loss",
            "bernoulli",
            (|v| matches!(v, DeValue::Float(_) | DeValue::Integer(_))) as fn(&DeValue) -> bool,
        ),
        ("jitter", "uniform", |v| matches!(v, DeValue::String(_))),
    ] {
        if let Some(value) = t.get_mut(key)
            && applies(value.get_ref())
        {
            let span = value.span();
            let number = std::mem::replace(value, Spanned::new(span.clone(), DeValue::Boolean(false)));
            let mut wrapped = DeTable::new();
            wrapped.insert(Spanned::new(span.clone(), Cow::Borrowed(inner)), number);
            *value = Spanned::new(span, DeValue::Table(wrapped));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Tree<'_> {
        let t = DeTable::parse(text).unwrap();
        let span = t.span();
        Spanned::new(span, DeValue::Table(t.into_inner()))
    }

    #[test]
    fn lookups_pick_array_elements_by_name_or_index() {
        let text = "[[server]]\nname = \"a\"\nlink = { delay = \"1ms\" }\n[[server]]\nname = \"b\"\n";
        let tree = parse(text);
        let line = |key| span_of(&tree, key).map(|s| text[..s.start].matches('\n').count() + 1);
        assert_eq!(line("server.a.link.delay"), Some(3));
        assert_eq!(line("server.1"), Some(4));
        assert_eq!(line("server.b.nope"), Some(4));
        assert_eq!(element_name(&tree, "server", 1), Some("b"));
    }

    #[test]
    fn set_replaces_adds_and_explains_what_is_missing() {
        let text = "x = 1\n[[server]]\nname = \"a\"\nlink = { delay = \"1ms\" }\n";
        let mut tree = parse(text);
        let v = || Spanned::new(0..1, DeValue::Boolean(true));
        assert!(matches!(set(&mut tree, "server.a.link.delay", v()), Ok(Set::Replaced)));
        assert!(matches!(set(&mut tree, "server.0.link.loss", v()), Ok(Set::Added)));
        let e = |key| set(&mut tree.clone(), key, v()).err().unwrap();
        assert_eq!(e("server.b.link.delay"), "server has no element \"b\" (known: a)");
        assert_eq!(e("server.a.uplink.delay"), "server.a.uplink does not exist");
        assert_eq!(e("x.y"), "x is an integer, not a table");
        assert!(e("sweep.key").contains("itself"));
        assert!(e("server..link").contains("dotted key"));
    }
}
