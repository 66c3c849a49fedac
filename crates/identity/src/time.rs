//! Wall-clock helpers: Unix time, UTC dates for messages, and `365d`-style durations.

use std::time::{SystemTime, UNIX_EPOCH};

/// Wall-clock time in milliseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

/// `secs` (Unix seconds) as `YYYY-MM-DD HH:MM:SS UTC`. The civil date follows H. Hinnant,
/// "chrono-Compatible Low-Level Date Algorithms" (`civil_from_days`), 2013.
pub fn format_unix_secs(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Parses a duration such as `365d`, `12h`, `30m` or `90s` into seconds.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let bad = || format!("expected a duration such as 365d, 12h, 30m or 90s, got {text:?}");
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let scale = match unit {
        "d" => 86_400,
        "h" => 3_600,
        "m" => 60,
        "s" => 1,
        _ => return Err(bad()),
    };
    match number.checked_mul(scale) {
        Some(0) | None => Err(bad()),
        Some(secs) => Ok(secs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(format_unix_secs(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_unix_secs(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(format_unix_secs(1_795_888_799), "2026-11-28 17:59:59 UTC");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("365d"), Ok(365 * 86_400));
        assert_eq!(parse_duration("2h"), Ok(7_200));
        assert_eq!(parse_duration("90s"), Ok(90));
        for bad in ["", "d", "10", "10y", "0d", "-1d", "1.5d", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
