//! `[client]` name lists: `schedulers` and `cc` take a list of names or the word `"all"`;
//! `transport` takes one name or a list.

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};

/// The word that stands for every registered name of a registry (aliases excluded).
pub const ALL: &str = "all";

/// `schedulers = [...]`, or `"all"`: every registered scheduler, in registry order.
pub fn schedulers<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    d.deserialize_any(NamesOrAll(pcdn_core::scheduler::names))
}

/// `cc = [...]`, or `"all"`: every registered congestion control, in registry order.
pub fn controls<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    d.deserialize_any(NamesOrAll(pcdn_core::cc::names))
}

/// `transport = "subflow"` or `transport = ["subflow", "pull"]` (one row per transport).
pub fn transports<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    d.deserialize_any(OneOrMany)
}

/// One name, or a list of names.
struct OneOrMany;

impl<'de> Visitor<'de> for OneOrMany {
    type Value = Vec<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a name such as \"subflow\", or a list such as [\"subflow\", \"pull\"]"
        )
    }

    fn visit_str<E: de::Error>(self, word: &str) -> Result<Vec<String>, E> {
        Ok(vec![word.to_owned()])
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Vec<String>, A::Error> {
        NamesOrAll(std::iter::empty).visit_seq(seq)
    }
}

/// A list of names, or [`ALL`] expanded by the registry's `names`.
struct NamesOrAll<I>(fn() -> I);

impl<'de, I: Iterator<Item = &'static str>> Visitor<'de> for NamesOrAll<I> {
    type Value = Vec<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a list of names such as [\"weave\", \"minrtt\"], or \"{ALL}\"")
    }

    fn visit_str<E: de::Error>(self, word: &str) -> Result<Vec<String>, E> {
        if word == ALL {
            Ok((self.0)().map(str::to_owned).collect())
        } else {
            Err(E::invalid_value(de::Unexpected::Str(word), &self))
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
        let mut names = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(name) = seq.next_element::<String>()? {
            names.push(name);
        }
        Ok(names)
    }
}
