//! Units of scenario files and command-line options: rates in bit/s, sizes in bytes, durations,
//! and their serde forms. Pure parsing, shared by the simulator, the runtime and the CLI.
//!
//! Rates follow tc(8) and Mahimahi's spelling (`mbit` = 10^6 bit/s); tc's `mbps` means
//! *megabytes* per second, which is a classic source of 8× mistakes, so it is refused rather
//! than guessed. Sizes distinguish SI (`MB`, or just `M`, = 10^6 B) from IEC (`MiB` = 2^20 B).

use std::fmt;
use std::time::Duration;

/// A value that could not be parsed; the message says what was expected and what was found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct UnitError {
    message: String,
}

impl UnitError {
    fn new(what: &str, examples: &str, input: &str, why: impl fmt::Display) -> UnitError {
        UnitError {
            message: format!("expected {what} such as {examples}, got \"{input}\": {why}"),
        }
    }
}

const RATE_EXAMPLES: &str = "\"10mbit\", \"500kbit\", \"1gbit\" or \"12000000\" (bit/s)";
const SIZE_EXAMPLES: &str = "\"200M\", \"20MB\", \"4MiB\", \"2k\" or \"1400\" (bytes)";
const DURATION_EXAMPLES: &str = "\"15ms\", \"1.5s\", \"250us\" or \"2min\"";

/// Parses a rate into bit/s: a bare number is bit/s; `bit`, `kbit`, `mbit`, `gbit`, `tbit`
/// (case-insensitive, optional `/s`) scale by powers of 1000; decimals are allowed (`1.5mbit`).
pub fn parse_rate(input: &str) -> Result<u64, UnitError> {
    let err = |why: &dyn fmt::Display| UnitError::new("a rate", RATE_EXAMPLES, input, why);
    let (number, unit) = split(input).map_err(|why| err(&why))?;
    let unit = unit.to_ascii_lowercase();
    let unit = unit.strip_suffix("/s").unwrap_or(&unit);
    let scale = match unit {
        "" | "bit" => 1,
        "kbit" => 1_000,
        "mbit" => 1_000_000,
        "gbit" => 1_000_000_000,
        "tbit" => 1_000_000_000_000,
        "bps" | "kbps" | "mbps" | "gbps" => {
            return Err(err(&format_args!(
                "\"{unit}\" is ambiguous (tc reads it as bytes per second); write kbit, mbit or gbit"
            )));
        }
        other => return Err(err(&format_args!("unknown unit \"{other}\""))),
    };
    scaled(number, scale).ok_or_else(|| err(&"too large"))
}

/// Parses a size into bytes: a bare number or `B` is bytes; `kB`, `MB`, `GB` (or just `k`, `M`,
/// `G`) scale by powers of 1000 and `KiB`, `MiB`, `GiB` (or `Ki`, `Mi`, `Gi`) by powers of 1024;
/// units are case-insensitive and decimals are allowed.
pub fn parse_size(input: &str) -> Result<u64, UnitError> {
    let err = |why: &dyn fmt::Display| UnitError::new("a size", SIZE_EXAMPLES, input, why);
    let (number, unit) = split(input).map_err(|why| err(&why))?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "ki" | "kib" => 1 << 10,
        "mi" | "mib" => 1 << 20,
        "gi" | "gib" => 1 << 30,
        _ => return Err(err(&format_args!("unknown unit \"{unit}\""))),
    };
    scaled(number, scale).ok_or_else(|| err(&"too large"))
}

/// Parses a duration with a unit: `ns`, `us` (or `µs`), `ms`, `s`, `min`, `h`; decimals are
/// allowed (`1.5s`). A bare number is refused (is `15` seconds or milliseconds?), except `0`.
pub fn parse_duration(input: &str) -> Result<Duration, UnitError> {
    let err = |why: &dyn fmt::Display| UnitError::new("a duration", DURATION_EXAMPLES, input, why);
    let (number, unit) = split(input).map_err(|why| err(&why))?;
    let scale: u64 = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "" if scaled(number, 1) == Some(0) => 1,
        "" => return Err(err(&"missing unit")),
        other => return Err(err(&format_args!("unknown unit \"{other}\""))),
    };
    scaled(number, scale)
        .map(Duration::from_nanos)
        .ok_or_else(|| err(&"too large"))
}

/// Splits `" 1.5 mbit "` into `("1.5", "mbit")`, checking the number's shape.
fn split(input: &str) -> Result<(&str, &str), &'static str> {
    let s = input.trim();
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (number, unit) = s.split_at(end);
    let digits = number.bytes().filter(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err("no number");
    }
    if number.bytes().filter(|&b| b == b'.').count() > 1 {
        return Err("malformed number");
    }
    Ok((number, unit.trim()))
}

/// `number × scale`, computed exactly in decimal so "1.2ms" is 1_200_000 ns, not 1_199_999;
/// digits below the unit's resolution are rounded half up.
fn scaled(number: &str, scale: u64) -> Option<u64> {
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let int: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    // 19 digits keep 10^digits × scale inside u128 and are far below any unit's resolution.
    let frac = &frac[..frac.len().min(19)];
    let mut value = int.checked_mul(u128::from(scale))?;
    if !frac.is_empty() {
        let denom = 10u128.pow(frac.len() as u32);
        let num: u128 = frac.parse().ok()?;
        value = value.checked_add((num * u128::from(scale) + denom / 2) / denom)?;
    }
    u64::try_from(value).ok()
}

/// Serde adapters for scenario files, for `#[serde(deserialize_with = "...")]`: rates and sizes
/// accept a number (bit/s, bytes) or a string with a unit; durations only a string with a unit;
/// instants are durations since the start of the simulation.
pub mod de {
    use std::fmt;
    use std::marker::PhantomData;
    use std::time::Duration;

    use crate::time::Instant;
    use serde::de::{self, Deserializer, Visitor};

    /// Which parser a [`UnitVisitor`] applies to strings, and whether bare numbers are allowed.
    trait Unit {
        type Value;
        const EXPECTING: &'static str;
        fn parse(s: &str) -> Result<Self::Value, super::UnitError>;
        fn from_number(n: u64) -> Option<Self::Value>;
    }

    struct Rate;
    impl Unit for Rate {
        type Value = u64;
        const EXPECTING: &'static str = "a rate in bit/s, or a string such as \"10mbit\"";
        fn parse(s: &str) -> Result<u64, super::UnitError> {
            super::parse_rate(s)
        }
        fn from_number(n: u64) -> Option<u64> {
            Some(n)
        }
    }

    struct Size;
    impl Unit for Size {
        type Value = u64;
        const EXPECTING: &'static str = "a size in bytes, or a string such as \"4MiB\"";
        fn parse(s: &str) -> Result<u64, super::UnitError> {
            super::parse_size(s)
        }
        fn from_number(n: u64) -> Option<u64> {
            Some(n)
        }
    }

    struct Dur;
    impl Unit for Dur {
        type Value = Duration;
        const EXPECTING: &'static str = "a duration string with a unit, such as \"15ms\"";
        fn parse(s: &str) -> Result<Duration, super::UnitError> {
            super::parse_duration(s)
        }
        fn from_number(n: u64) -> Option<Duration> {
            // Only 0 is unambiguous without a unit.
            (n == 0).then_some(Duration::ZERO)
        }
    }

    struct UnitVisitor<U>(PhantomData<U>);

    impl<'de, U: Unit> Visitor<'de> for UnitVisitor<U> {
        type Value = U::Value;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(U::EXPECTING)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<U::Value, E> {
            U::parse(v).map_err(E::custom)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<U::Value, E> {
            U::from_number(v).ok_or_else(|| E::invalid_type(de::Unexpected::Unsigned(v), &self))
        }
        // TOML integers arrive as i64.
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<U::Value, E> {
            let n = u64::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))?;
            self.visit_u64(n)
        }
    }

    /// A rate in bit/s: a number, or a string for [`parse_rate`](super::parse_rate).
    pub fn rate<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        d.deserialize_any(UnitVisitor::<Rate>(PhantomData))
    }

    /// A size in bytes: a number, or a string for [`parse_size`](super::parse_size).
    pub fn size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        d.deserialize_any(UnitVisitor::<Size>(PhantomData))
    }

    /// An optional size in bytes (use with `#[serde(default)]`).
    pub fn opt_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        size(d).map(Some)
    }

    /// A duration string for [`parse_duration`](super::parse_duration).
    pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(UnitVisitor::<Dur>(PhantomData))
    }

    /// An optional duration (use with `#[serde(default)]`).
    pub fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        duration(d).map(Some)
    }

    /// A point in simulated time, written as the duration since the simulation's start.
    pub fn instant<'de, D: Deserializer<'de>>(d: D) -> Result<Instant, D::Error> {
        duration(d).map(|d| Instant::ZERO + d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10mbit"), Ok(10_000_000));
        assert_eq!(parse_rate("4Mbit"), Ok(4_000_000));
        assert_eq!(parse_rate("500kbit"), Ok(500_000));
        assert_eq!(parse_rate("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("12000000"), Ok(12_000_000));
        assert_eq!(parse_rate("1.5 Mbit/s"), Ok(1_500_000));
        assert_eq!(parse_rate(" 64bit "), Ok(64));
        let e = parse_rate("10mbps").unwrap_err().to_string();
        assert!(e.contains("ambiguous") && e.contains("expected a rate"), "{e}");
        assert!(parse_rate("fast").unwrap_err().to_string().contains("no number"));
        assert!(parse_rate("10 furlongs").is_err());
        assert!(parse_rate("1.2.3mbit").is_err());
        assert!(parse_rate("99999999999tbit").is_err());
    }

    #[test]
    fn sizes_in_every_form() {
        for (input, bytes) in [
            // A bare number or B is bytes.
            ("1400", 1400),
            ("3 B", 3),
            ("3b", 3),
            // SI: kB, MB, GB, or just k, M, G, in either case, are powers of 1000.
            ("2kB", 2000),
            ("20MB", 20_000_000),
            ("1GB", 1_000_000_000),
            ("2k", 2000),
            ("2K", 2000),
            ("200M", 200_000_000),
            ("200m", 200_000_000),
            ("1G", 1_000_000_000),
            ("1.5M", 1_500_000),
            (" 2 M ", 2_000_000),
            // IEC: KiB, MiB, GiB, or just Ki, Mi, Gi, are powers of 1024.
            ("1.5KiB", 1536),
            ("512KiB", 512 << 10),
            ("4MiB", 4 << 20),
            ("2gib", 2 << 30),
            ("512Ki", 512 << 10),
            ("4Mi", 4 << 20),
            ("1Gi", 1 << 30),
        ] {
            assert_eq!(parse_size(input), Ok(bytes), "{input:?}");
        }
    }

    #[test]
    fn bad_sizes_say_what_was_expected_and_what_was_wrong() {
        let message = |input: &str| parse_size(input).unwrap_err().to_string();
        for (input, why) in [
            ("lots", "no number"),
            ("", "no number"),
            ("M", "no number"),
            ("1.2.3M", "malformed number"),
            ("2kbit", "unknown unit \"kbit\""),
            ("5T", "unknown unit \"T\""),
            ("-5M", "no number"),
            ("99999999999G", "too large"),
            ("18446744073709551616", "too large"),
        ] {
            let e = message(input);
            assert!(e.starts_with("expected a size such as \"200M\""), "{input}: {e}");
            assert!(
                e.contains(&format!("got \"{input}\"")) && e.ends_with(why),
                "{input}: {e}"
            );
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("15ms"), Ok(Duration::from_millis(15)));
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("250µs"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("1.2ms"), Ok(Duration::from_nanos(1_200_000)));
        assert_eq!(parse_duration("2min"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration(".5ms"), Ok(Duration::from_micros(500)));
        let e = parse_duration("15").unwrap_err().to_string();
        assert!(e.contains("missing unit") && e.contains("expected a duration"), "{e}");
        assert!(parse_duration("15 fortnights").is_err());
    }

    #[test]
    fn serde_forms() {
        #[derive(serde::Deserialize)]
        struct S {
            #[serde(deserialize_with = "de::rate")]
            r: u64,
            #[serde(deserialize_with = "de::size")]
            s: u64,
            #[serde(deserialize_with = "de::duration")]
            d: Duration,
        }
        let v: S = serde_json::from_str(r#"{"r": "10mbit", "s": 1400, "d": "1.5s"}"#).unwrap();
        assert_eq!((v.r, v.s, v.d), (10_000_000, 1400, Duration::from_millis(1500)));
        let v: S = serde_json::from_str(r#"{"r": 5, "s": "1MiB", "d": 0}"#).unwrap();
        assert_eq!((v.r, v.s, v.d), (5, 1 << 20, Duration::ZERO));
        let e = serde_json::from_str::<S>(r#"{"r": 5, "s": 1, "d": 15}"#).err().unwrap();
        assert!(e.to_string().contains("duration"), "{e}");
    }
}
