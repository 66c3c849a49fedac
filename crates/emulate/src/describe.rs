//! Link settings in words for the start-up lines: "4 Mbit/s, 40 ms, ±5 ms jitter, 10% loss".

use std::time::Duration;

use pcdn_sim::scenario::UNLIMITED_RATE_BPS;
use pcdn_sim::{JitterDist, LinkConfig, Loss, QueueLimit, Rate};

/// A rate in words: "4 Mbit/s", "unlimited", "trace (mean 6 Mbit/s, period 2 ms)".
pub fn describe_rate(rate: &Rate) -> String {
    match rate {
        Rate::Fixed(0) => "stalled (rate 0)".to_owned(),
        Rate::Fixed(bps) if *bps >= UNLIMITED_RATE_BPS => "unlimited".to_owned(),
        Rate::Fixed(bps) => bits_per_second(*bps as f64),
        Rate::Trace(t) => format!(
            "trace (mean {}, period {})",
            bits_per_second(t.mean_rate_bps()),
            duration(t.period())
        ),
        Rate::TraceFile(p) => format!("trace {}", p.display()),
    }
}

/// A link direction in words, knobs at their neutral value left out.
pub fn describe_link(link: &LinkConfig) -> String {
    let mut parts = vec![describe_rate(&link.rate), duration(link.delay)];
    let order = if link.jitter.reorder { " (reordering)" } else { "" };
    match link.jitter.dist {
        JitterDist::None => {}
        JitterDist::Uniform(d) => parts.push(format!("±{} jitter{order}", duration(d))),
        JitterDist::Normal(d) => parts.push(format!("normal jitter σ {}{order}", duration(d))),
    }
    match link.loss {
        Loss::None => {}
        Loss::Bernoulli(p) => parts.push(format!("{} loss", percent(p))),
        Loss::GilbertElliott(g) => parts.push(format!(
            "Gilbert-Elliott loss (p {}, r {}, mean {})",
            g.p_good_to_bad,
            g.p_bad_to_good,
            percent(g.stationary_loss())
        )),
    }
    parts.push(queue(link.queue));
    if !link.blackouts.is_empty() {
        parts.push(count(link.blackouts.len(), "blackout"));
    }
    if !link.changes.is_empty() {
        parts.push(count(link.changes.len(), "scheduled change"));
    }
    parts.join(", ")
}

fn queue(q: QueueLimit) -> String {
    match (q.packets, q.bytes) {
        (None, None) => "no queue limit".to_owned(),
        (Some(p), None) => format!("queue {p} packets"),
        (None, Some(b)) => format!("queue {b} bytes"),
        (Some(p), Some(b)) => format!("queue {p} packets or {b} bytes"),
    }
}

fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn bits_per_second(bps: f64) -> String {
    let (scale, unit) = [(1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")]
        .into_iter()
        .find(|(s, _)| bps >= *s)
        .unwrap_or((1.0, "bit/s"));
    format!("{} {unit}", trimmed(bps / scale))
}

fn duration(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{} s", trimmed(d.as_secs_f64()))
    } else {
        format!("{} ms", trimmed(d.as_secs_f64() * 1e3))
    }
}

fn percent(p: f64) -> String {
    format!("{}%", trimmed(p * 100.0))
}

/// At most three decimals, without trailing zeros: 4 → "4", 1.5 → "1.5", 0.0125 → "0.013".
fn trimmed(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcdn_sim::{GilbertElliott, Jitter, Trace};

    #[test]
    fn links_in_words() {
        let link = LinkConfig::fixed(4_000_000, Duration::from_millis(40))
            .with_loss(Loss::Bernoulli(0.1))
            .with_jitter(Jitter::uniform(Duration::from_millis(5), false));
        assert_eq!(
            describe_link(&link),
            "4 Mbit/s, 40 ms, ±5 ms jitter, 10% loss, queue 100 packets"
        );
        let link = LinkConfig::fixed(UNLIMITED_RATE_BPS, Duration::ZERO)
            .with_queue(QueueLimit::UNLIMITED)
            .with_loss(Loss::GilbertElliott(GilbertElliott::gilbert(0.01, 0.25)))
            .with_jitter(Jitter::normal(Duration::from_micros(1500), true));
        assert_eq!(
            describe_link(&link),
            "unlimited, 0 ms, normal jitter σ 1.5 ms (reordering), \
             Gilbert-Elliott loss (p 0.01, r 0.25, mean 3.846%), no queue limit"
        );
        let trace = Rate::Trace(Trace::new(vec![2]).unwrap());
        assert_eq!(describe_rate(&trace), "trace (mean 6 Mbit/s, period 2 ms)");
        assert_eq!(describe_rate(&Rate::Fixed(1_500)), "1.5 kbit/s");
        assert_eq!(describe_rate(&Rate::Fixed(0)), "stalled (rate 0)");
        assert_eq!(duration(Duration::from_millis(2500)), "2.5 s");
        assert_eq!(queue(QueueLimit::bytes(150_000)), "queue 150000 bytes");
    }
}
