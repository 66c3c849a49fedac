//! Delivery rate measured over each window of received packets, Pscheduler Eq. 5.

use crate::time::Instant;

/// R = datasize / (endtime − starttime), measured over each window's worth of arrivals.
///
/// Pscheduler Eq. 5 with `starttime` the first arrival of the interval and `endtime` its
/// last. The first arrival's bytes are left out of `datasize`: they crossed the bottleneck
/// before `starttime`, and counting them would overstate the rate by n/(n − 1) for an
/// interval of n packets. The gap between one interval's last arrival and the next one's
/// first is not measured, so an idle spell between windows does not drag the rate down.
#[derive(Clone, Debug, Default)]
pub struct DeliveryRate {
    /// First arrival of the open interval.
    start: Option<Instant>,
    /// Latest arrival of the open interval.
    end: Instant,
    /// Bytes of the open interval's arrivals after the first.
    bytes: u64,
    /// Arrivals in the open interval, the first included.
    packets: u64,
    /// Rate of the last closed interval, bytes per second.
    sample: Option<f64>,
}

impl DeliveryRate {
    pub fn new() -> Self {
        Self::default()
    }
    /// `bytes` arrived at `now`; a sample closes after `window_packets` arrivals.
    ///
    /// An interval needs at least two arrivals to span any time, so a `window_packets`
    /// below 2 counts as 2; it also stays open while it spans no time at all.
    pub fn on_arrival(&mut self, now: Instant, bytes: u64, window_packets: u64) {
        let Some(start) = self.start else {
            self.start = Some(now);
            self.end = now;
            self.bytes = 0;
            self.packets = 1;
            return;
        };
        self.end = self.end.max(now);
        self.bytes += bytes;
        self.packets += 1;
        if self.packets >= window_packets.max(2) && self.end > start {
            self.sample = Some(rate(self.bytes, start, self.end));
            self.start = None;
        }
    }
    /// Latest rate in bytes per second, once one can be measured.
    ///
    /// The last closed interval's rate; before the first one closes, the open interval's
    /// once it holds two arrivals that are apart in time.
    pub fn rate(&self) -> Option<f64> {
        if self.sample.is_some() {
            return self.sample;
        }
        match self.start {
            Some(start) if self.packets >= 2 && self.end > start => Some(rate(self.bytes, start, self.end)),
            _ => None,
        }
    }
}

fn rate(bytes: u64, start: Instant, end: Instant) -> f64 {
    bytes as f64 * 1e9 / (end - start).as_nanos() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    #[test]
    fn none_until_two_arrivals() {
        let mut d = DeliveryRate::new();
        assert_eq!(d.rate(), None);
        d.on_arrival(ms(0), 1000, 10);
        assert_eq!(d.rate(), None);
        d.on_arrival(ms(2), 1000, 10);
        // Provisional: 1000 B after the first / 2 ms = 500 000 B/s.
        assert_eq!(d.rate(), Some(500_000.0));
    }

    #[test]
    fn one_sample_per_window() {
        let mut d = DeliveryRate::new();
        // 1000 B every 1 ms: 1 MB/s. Window of 10 packets: arrivals at 0..=9 ms close the
        // first sample with 9·1000 B / 9 ms = 1 000 000 B/s.
        for i in 0..10 {
            d.on_arrival(ms(i), 1000, 10);
        }
        assert_eq!(d.rate(), Some(1_000_000.0));
        // The next interval starts with the 11th arrival; its first packets do not replace
        // the closed sample.
        d.on_arrival(ms(20), 1000, 10);
        d.on_arrival(ms(21), 4000, 10);
        assert_eq!(d.rate(), Some(1_000_000.0));
        // 2000 B every 1 ms from 20 ms (8 more arrivals, 22..=29 ms): (4000 + 8·2000) B
        // over 9 ms = 20 000 / 0.009 = 2 222 222.2 B/s.
        for i in 22..30 {
            d.on_arrival(ms(i), 2000, 10);
        }
        let r = d.rate().unwrap();
        assert!((r - 20_000.0 / 0.009).abs() < 1e-6, "{r}");
    }

    #[test]
    fn window_size_follows_the_caller() {
        let mut d = DeliveryRate::new();
        d.on_arrival(ms(0), 1500, 4);
        d.on_arrival(ms(3), 1500, 4);
        // Provisional after two: 1500 / 3 ms = 500 000.
        assert_eq!(d.rate(), Some(500_000.0));
        d.on_arrival(ms(4), 1500, 4);
        d.on_arrival(ms(6), 1500, 4);
        // Closed: 3·1500 / 6 ms = 750 000.
        assert_eq!(d.rate(), Some(750_000.0));
        // A window of 1 still needs two arrivals: 1500 / 10 ms = 150 000.
        d.on_arrival(ms(100), 1500, 1);
        assert_eq!(d.rate(), Some(750_000.0));
        d.on_arrival(ms(110), 1500, 1);
        assert_eq!(d.rate(), Some(150_000.0));
    }

    #[test]
    fn simultaneous_arrivals_keep_the_interval_open() {
        let mut d = DeliveryRate::new();
        d.on_arrival(ms(5), 1000, 2);
        d.on_arrival(ms(5), 1000, 2);
        assert_eq!(d.rate(), None);
        d.on_arrival(ms(7), 1000, 2);
        // 2000 B over 2 ms.
        assert_eq!(d.rate(), Some(1_000_000.0));
    }
}
