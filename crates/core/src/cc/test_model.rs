//! A deterministic bottleneck that congestion-control tests drive a controller through.
//!
//! A client pulls from one server through one bottleneck, in virtual time, with any
//! [`Controller`].
//! Requests take `one_way` to reach the server; each asks for one `MSS` data packet, which
//! joins a FIFO queue in front of a link of `rate` bytes per second and then takes `one_way`
//! back, so the propagation RTT is `2·one_way`. Requests leave as the window allows, spaced by
//! the pacing rate when there is one. With `buffer` set, a packet that finds that many bytes
//! already queued is dropped; the client declares it lost when the data queued just before it
//! arrives (reordering detection with a threshold of one packet, never a timeout). Every
//! arrival or declared loss is recorded as a [`Sample`], with whatever controller-specific
//! value `P` the test's probe reads (BBR's state and filters, Copa's velocity, ...).

use std::collections::VecDeque;

use super::{Controller, DataArrival, Loss};
use crate::estimate::RttEstimator;
use crate::time::{Duration, Instant};

/// Payload bytes per packet: 10 Mbit/s is then one packet per millisecond.
pub(crate) const MSS: u64 = 1250;

/// 10 Mbit/s in bytes per second.
pub(crate) const RATE: f64 = 1_250_000.0;

pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(crate) fn at(d: Duration) -> Instant {
    Instant::ZERO + d
}

/// A request in flight through the model.
struct Request {
    sent: Instant,
    /// When its data arrives, or for a dropped request when its loss is declared.
    arrives: Instant,
    /// Queueing delay its data met at the bottleneck.
    queued: Duration,
    dropped: bool,
    delivered_at_send: u64,
    delivered_time_at_send: Instant,
}

/// What the model saw at one arrival or declared loss.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample<P = f64> {
    pub now: Instant,
    pub cwnd: u64,
    pub pacing_rate: Option<u64>,
    pub queued: Duration,
    pub delivered: u64,
    pub lost: bool,
    /// What the test's `probe` read from the controller after the event.
    pub probe: P,
}

pub(crate) struct Model<C: Controller, P = f64> {
    pub cc: C,
    pub rtt: RttEstimator,
    pub now: Instant,
    one_way: Duration,
    /// Bytes per second, and when it changes: `(from, rate)`.
    pub rates: Vec<(Instant, f64)>,
    /// Bytes the bottleneck queue holds at most; `None`: unbounded.
    pub buffer: Option<u64>,
    /// Every n-th request is lost whatever the queue (random loss made deterministic).
    pub loss_every: Option<u64>,
    /// Most extra delay on the way back, drawn per packet from a fixed pseudo-random
    /// sequence; packets keep their order (a late one holds those behind it, as the
    /// simulator's jittered links do).
    pub jitter: Option<Duration>,
    jitter_state: u64,
    last_arrival: Instant,
    sent: u64,
    link_free: Instant,
    next_send: Instant,
    flight: VecDeque<Request>,
    pub delivered: u64,
    delivered_time: Instant,
    pub losses: u64,
    pub samples: Vec<Sample<P>>,
    /// Reads a controller-specific value into every sample.
    probe: fn(&C) -> P,
}

impl<C: Controller> Model<C> {
    /// A model whose samples carry no controller-specific value (`probe` is 0).
    pub(crate) fn new(cc: C, rate: f64, rtt: Duration) -> Model<C> {
        Model::with_probe(cc, rate, rtt, |_| 0.0)
    }
}

impl<C: Controller, P> Model<C, P> {
    /// A model that records `probe(&controller)` in every sample.
    pub(crate) fn with_probe(cc: C, rate: f64, rtt: Duration, probe: fn(&C) -> P) -> Model<C, P> {
        Model {
            cc,
            rtt: RttEstimator::default(),
            now: Instant::ZERO,
            one_way: rtt / 2,
            rates: vec![(Instant::ZERO, rate)],
            buffer: None,
            loss_every: None,
            jitter: None,
            jitter_state: 0x9E37_79B9_7F4A_7C15,
            last_arrival: Instant::ZERO,
            sent: 0,
            link_free: Instant::ZERO,
            next_send: Instant::ZERO,
            flight: VecDeque::new(),
            delivered: 0,
            delivered_time: Instant::ZERO,
            losses: 0,
            samples: vec![],
            probe,
        }
    }

    fn rate_at(&self, t: Instant) -> f64 {
        self.rates.iter().rev().find(|(from, _)| *from <= t).unwrap().1
    }

    fn in_flight(&self) -> u64 {
        self.flight.len() as u64 * MSS
    }

    /// The next packet's extra delay: uniform in [0, `jitter`] (a xorshift sequence, so runs
    /// repeat exactly).
    fn next_jitter(&mut self) -> Duration {
        let Some(most) = self.jitter else {
            return Duration::ZERO;
        };
        let mut x = self.jitter_state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.jitter_state = x;
        most.mul_f64((x >> 11) as f64 / (1u64 << 53) as f64)
    }

    fn send(&mut self) {
        let now = self.now;
        self.cc.on_request_sent(now, MSS, self.in_flight() + MSS);
        let at_server = now + self.one_way;
        let start = at_server.max(self.link_free);
        let rate = self.rate_at(start);
        let backlog = (start - at_server).as_secs_f64() * rate;
        self.sent += 1;
        let dropped = self.buffer.is_some_and(|b| backlog + MSS as f64 > b as f64)
            || self.loss_every.is_some_and(|n| self.sent % n.max(1) == 0);
        let arrives = if dropped {
            // Declared lost when the packet queued before it arrives.
            (start + self.one_way).max(self.last_arrival)
        } else {
            self.link_free = start + Duration::from_secs_f64(MSS as f64 / rate);
            (self.link_free + self.one_way + self.next_jitter()).max(self.last_arrival)
        };
        self.last_arrival = arrives;
        self.flight.push_back(Request {
            sent: now,
            arrives,
            queued: start - at_server,
            dropped,
            delivered_at_send: self.delivered,
            delivered_time_at_send: self.delivered_time,
        });
        self.next_send = match self.cc.pacing_rate() {
            Some(rate) if rate > 0 => now + Duration::from_secs_f64(MSS as f64 / rate as f64),
            _ => now,
        };
    }

    fn arrive(&mut self) {
        let r = self.flight.pop_front().unwrap();
        let now = self.now;
        let rtt = now - r.sent;
        if r.dropped {
            self.losses += 1;
            self.cc.on_loss(&Loss {
                now,
                sent: r.sent,
                lost_bytes: MSS,
                in_flight_bytes: self.in_flight(),
                by_timeout: false,
            });
        } else {
            self.delivered += MSS;
            self.delivered_time = now;
            self.rtt.update(rtt);
            self.cc.on_data(&DataArrival {
                now,
                sent: r.sent,
                bytes: MSS,
                rtt: Some(rtt),
                smoothed_rtt: self.rtt.smoothed(),
                min_rtt: self.rtt.min(),
                in_flight_bytes: self.in_flight(),
                delivered_bytes: self.delivered,
                delivered_bytes_at_send: r.delivered_at_send,
                delivered_time_at_send: r.delivered_time_at_send,
                app_limited: false,
            });
        }
        self.samples.push(Sample {
            now,
            cwnd: self.cc.window(),
            pacing_rate: self.cc.pacing_rate(),
            queued: r.queued,
            delivered: self.delivered,
            lost: r.dropped,
            probe: (self.probe)(&self.cc),
        });
    }

    /// Runs until `end`: at each step, the earlier of the next arrival and the next paced
    /// send the window allows.
    pub(crate) fn run(&mut self, end: Instant) {
        while self.now < end {
            let can_send = self.in_flight() + MSS <= self.cc.window().max(MSS);
            let send_at = can_send.then(|| self.next_send.max(self.now));
            let arrival = self.flight.front().map(|r| r.arrives);
            match (send_at, arrival) {
                (Some(s), Some(a)) if s < a => {
                    self.now = s;
                    self.send();
                }
                (Some(s), None) => {
                    self.now = s;
                    self.send();
                }
                (_, Some(a)) => {
                    self.now = a;
                    self.arrive();
                }
                (None, None) => unreachable!("nothing in flight and nothing may be sent"),
            }
        }
    }

    pub(crate) fn between(&self, from: Duration, to: Duration) -> impl Iterator<Item = &Sample<P>> {
        self.samples.iter().filter(move |s| s.now >= at(from) && s.now < at(to))
    }

    /// Bytes per second delivered between `from` and `to`.
    pub(crate) fn goodput(&self, from: Duration, to: Duration) -> f64 {
        let inside: Vec<&Sample<P>> = self.between(from, to).collect();
        let (first, last) = (inside[0], inside[inside.len() - 1]);
        (last.delivered - first.delivered) as f64 / (last.now - first.now).as_secs_f64()
    }

    /// Mean queueing delay of the data that arrived between `from` and `to`, seconds.
    pub(crate) fn mean_queue(&self, from: Duration, to: Duration) -> f64 {
        let queued: Vec<f64> = self
            .between(from, to)
            .filter(|s| !s.lost)
            .map(|s| s.queued.as_secs_f64())
            .collect();
        queued.iter().sum::<f64>() / queued.len() as f64
    }
}
