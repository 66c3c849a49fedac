//! The fluid bound on a world's completion time: every path at its loss-adjusted rate from its
//! first round trip, shared bottlenecks respected, no scheduler's choices in the way.
//!
//! Time is the world's (zero when the client starts), counted at the client. A path's server
//! answers HELLO one round trip after the start (its propagation delays, both ways, the
//! bottleneck's included), the first request leaves with the first answer, and a path's data
//! can arrive one more round trip after its own answer. From then on it carries its rate (the
//! link's, or a trace's mean, capped by the upload limit) × (1 − loss) × payload ÷ datagram
//! bytes, except while its server is down (from the failure, plus the delay to the client,
//! until the new handshake's answer and request have made their trip after the recovery) or a
//! link on its way is in a blackout; `changes` of rate and loss apply from their time (each
//! time of a link shifted by the delay from that link to the client). A shared bottleneck caps its
//! servers' sum at its own rate × (1 − its loss). Tasks served one after another need no more
//! time than this: the fluid paths carry any order of bytes at the same total rate. Jitter and
//! queueing are left out (they only delay), and losses count at their long-run mean, so a run
//! that loses less than the mean by chance can finish a little sooner.

use std::time::Duration;

use pcdn_core::time::Instant;

use crate::link::{Change, LinkConfig, Rate};
use crate::world::WorldSpec;

impl WorldSpec {
    /// The fluid bound on the completion time (first request to last byte), in seconds; `None`
    /// when the paths can never carry the content (every rate reaches zero for good).
    pub fn bound_s(&self) -> Option<f64> {
        let behind = |i: usize| self.bottlenecks.iter().find(|b| b.servers.contains(&i));
        // Each server's one-way delay to the client and round trip.
        let down: Vec<f64> = (0..self.servers.len())
            .map(|i| (self.servers[i].link.delay + behind(i).map_or(Duration::ZERO, |b| b.link.delay)).as_secs_f64())
            .collect();
        let rtt: Vec<f64> = self
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let bottleneck = behind(i).map_or(Duration::ZERO, |b| b.link.delay);
                down[i] + (s.uplink.delay + bottleneck).as_secs_f64()
            })
            .collect();
        // The first request leaves with the first answer to HELLO.
        let first_request = rtt.iter().copied().fold(f64::INFINITY, f64::min);
        if !first_request.is_finite() {
            return None;
        }
        let payload = f64::from(self.packet_size);
        let share = payload / (payload + pcdn_core::wire::DATA_HEADER_LEN as f64);

        // When each server's data can reach the client: from its first data, until its
        // failure's last datagram, and again after its recovery's handshake.
        let windows: Vec<(f64, f64, f64)> = self
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let fail = s.fail_at.map_or(f64::INFINITY, |t| t.as_secs_f64() + down[i]);
                let back = s
                    .recover_at
                    .map_or(f64::INFINITY, |t| t.as_secs_f64() + down[i] + rtt[i]);
                (2.0 * rtt[i], fail, back)
            })
            .collect();
        let mut breaks: Vec<f64> = vec![first_request];
        for (i, s) in self.servers.iter().enumerate() {
            link_breaks(&mut breaks, &s.link, down[i]);
            breaks.extend([windows[i].0, windows[i].1, windows[i].2]);
        }
        for b in &self.bottlenecks {
            link_breaks(&mut breaks, &b.link, b.link.delay.as_secs_f64());
        }
        breaks.retain(|t| t.is_finite());
        breaks.retain(|&t| t >= first_request);
        breaks.sort_by(f64::total_cmp);
        breaks.dedup();

        let rate_at = |t: f64| -> f64 {
            let own: Vec<f64> = self
                .servers
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let (first, fail, back) = windows[i];
                    if t < first || (fail <= t && t < back) {
                        return 0.0;
                    }
                    let cap = s.upload_limit.map_or(f64::INFINITY, |c| c as f64);
                    let (rate, loss) = link_at(&s.link, t - down[i]);
                    rate.min(cap) * (1.0 - loss)
                })
                .collect();
            self.through_bottlenecks(&own, |b| {
                let (rate, loss) = link_at(&b.link, t - b.link.delay.as_secs_f64());
                rate * (1.0 - loss)
            })
        };

        let mut left = self.content_length as f64 * 8.0;
        for (k, &start) in breaks.iter().enumerate() {
            let rate = rate_at(start) * share;
            let Some(&end) = breaks.get(k + 1) else {
                return (rate > 0.0).then(|| start + left / rate - first_request);
            };
            if rate > 0.0 && left <= rate * (end - start) {
                return Some(start + left / rate - first_request);
            }
            left -= rate * (end - start);
        }
        None
    }
}

/// The times, at the client, when `link` changes or goes dark (its times + `shift`).
fn link_breaks(breaks: &mut Vec<f64>, link: &LinkConfig, shift: f64) {
    breaks.extend(link.changes.iter().map(|c| secs(c.at) + shift));
    for b in &link.blackouts {
        breaks.extend([secs(b.start) + shift, secs(b.end) + shift]);
    }
}

fn secs(t: Instant) -> f64 {
    t.since_epoch().as_secs_f64()
}

/// A link's rate (bit/s; a trace's mean) and long-run loss at time `t`: zero in a blackout.
fn link_at(link: &LinkConfig, t: f64) -> (f64, f64) {
    let mut rate = rate_bps(&link.rate);
    let mut loss = link.loss.mean_loss();
    for c in link.changes.iter().filter(|c| secs(c.at) <= t) {
        match &c.change {
            Change::Rate(r) => rate = rate_bps(r),
            Change::Loss(l) => loss = l.mean_loss(),
            Change::Delay(_) | Change::Jitter(_) | Change::Queue(_) => {}
        }
    }
    let dark = link.blackouts.iter().any(|b| secs(b.start) <= t && t < secs(b.end));
    if dark { (0.0, loss) } else { (rate, loss) }
}

fn rate_bps(rate: &Rate) -> f64 {
    match rate {
        Rate::Fixed(bps) => *bps as f64,
        Rate::Trace(t) => t.mean_rate_bps(),
        // Unread traces never reach a run (scenarios read them when they load).
        Rate::TraceFile(_) => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{Blackout, LinkChange, Loss};
    use crate::world::{BottleneckSpec, ServerSpec};

    const MS: Duration = Duration::from_millis(1);

    fn server(name: &str, mbit: u64, delay_ms: u64) -> ServerSpec {
        let delay = Duration::from_millis(delay_ms);
        let link = LinkConfig::fixed(mbit * 1_000_000, delay);
        ServerSpec {
            name: name.into(),
            origin: false,
            uplink: LinkConfig::fixed(crate::scenario::UNLIMITED_RATE_BPS, delay),
            link,
            fail_at: None,
            recover_at: None,
            upload_limit: None,
        }
    }

    /// Packets of 974 payload bytes: with the 26-byte header, 1000 bytes on the wire.
    fn world(servers: Vec<ServerSpec>, bytes: u64) -> WorldSpec {
        WorldSpec {
            weave: Default::default(),
            reordering: Default::default(),
            tail_probes: true,
            content_length: bytes,
            packet_size: 974,
            task_size: None,
            reorder_buffer: 4_000_000,
            servers,
            bottlenecks: Vec::new(),
            duration: Duration::from_secs(600),
        }
    }

    fn close(a: Option<f64>, b: f64) {
        let a = a.expect("a bound");
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    #[test]
    fn one_path_is_a_round_trip_then_the_payload_rate() {
        // RTT 20 ms: first request at 20 ms, data from 40 ms; 974 kB of payload is 1 MB on the
        // wire, 8 Mbit at 8 Mbit/s = 1 s. From the first request: 20 ms + 1 s.
        close(world(vec![server("a", 8, 10)], 974_000).bound_s(), 1.02);
    }

    #[test]
    fn a_second_path_joins_after_its_own_handshake() {
        // a: 8 Mbit/s from 40 ms; b: 8 Mbit/s, RTT 100 ms, from 200 ms. 16 Mbit on the wire:
        // by 200 ms a carried 1.28 Mbit; the remaining 14.72 Mbit at 16 Mbit/s take 0.92 s.
        // End at 1.12 s, minus the first request at 20 ms.
        close(
            world(vec![server("a", 8, 10), server("b", 8, 50)], 1_948_000).bound_s(),
            1.1,
        );
    }

    #[test]
    fn loss_an_upload_cap_and_a_shared_bottleneck_lower_the_rate() {
        let mut a = server("a", 10, 10);
        a.link.loss = Loss::Bernoulli(0.2); // 8 Mbit/s delivered
        let mut b = server("b", 20, 10);
        b.upload_limit = Some(4_000_000);
        close(
            world(vec![a.clone(), b.clone()], 974_000 * 3).bound_s(),
            0.02 + 24.0 / 12.0,
        );
        // Both behind a 6 Mbit/s access line with no delay of its own: 24 Mbit at 6 Mbit/s.
        let mut w = world(vec![a, b], 974_000 * 3);
        w.bottlenecks.push(BottleneckSpec {
            link: LinkConfig::fixed(6_000_000, Duration::ZERO),
            servers: vec![0, 1],
        });
        close(w.bound_s(), 0.02 + 4.0);
    }

    #[test]
    fn failures_blackouts_and_changes_take_their_time() {
        // Fails at 0.54 s: its data reach the client until 0.55 s (0.51 s of data, 4.08 Mbit).
        // Back at 1.0 s: the handshake's answer arrives at 1.01 s, data again from 1.03 s; the
        // 3.92 Mbit left take 0.49 s, so 1.52 s, minus the first request's 20 ms.
        let mut a = server("a", 8, 10);
        a.fail_at = Some(540 * MS);
        a.recover_at = Some(1000 * MS);
        close(world(vec![a], 974_000).bound_s(), 1.5);
        // A blackout of the link over [0.54 s, 1.02 s) is the same outage at the client.
        let mut b = server("b", 8, 10);
        b.link
            .blackouts
            .push(Blackout::new(Instant::ZERO + 540 * MS, Instant::ZERO + 1020 * MS));
        close(world(vec![b], 974_000).bound_s(), 1.5);
        // Doubling the rate at 0.54 s (0.55 s at the client): 3.92 Mbit left take 0.245 s.
        let mut c = server("c", 8, 10);
        c.link.changes.push(LinkChange::new(
            Instant::ZERO + 540 * MS,
            Change::Rate(Rate::Fixed(16_000_000)),
        ));
        close(world(vec![c], 974_000).bound_s(), 0.775);
    }

    #[test]
    fn a_path_that_fails_for_good_before_the_end_has_no_bound() {
        let mut a = server("a", 8, 10);
        a.fail_at = Some(100 * MS);
        assert_eq!(world(vec![a], 974_000).bound_s(), None);
    }
}
