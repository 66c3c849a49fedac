//! A download rate cap (`FetchConfig::rate_limit_bps`, an edge's `--fill-rate`): every path's
//! congestion controller is wrapped so that its pacing rate never exceeds an equal share of
//! the cap.
//!
//! The core spaces a path's requests at its controller's pacing rate, so capping that rate
//! caps the data the path asks for (retransmissions included): the servers send only what is
//! requested. The share is the cap over every path built so far (failed ones included), so the
//! paths together stay under the cap however many the tracker adds later.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use pcdn_core::Instant;
use pcdn_core::cc::{Controller, ControllerFactory, DataArrival, Loss};

/// Builds the inner factory's controllers, capped (see the module documentation).
#[derive(Debug)]
pub struct CappedFactory<'a> {
    inner: &'a dyn ControllerFactory,
    cap_bytes_per_s: u64,
    paths: Arc<AtomicU64>,
}

impl<'a> CappedFactory<'a> {
    /// Caps the paths built by `inner` together at `cap_bits_per_s`.
    pub fn new(inner: &'a dyn ControllerFactory, cap_bits_per_s: u64) -> CappedFactory<'a> {
        CappedFactory {
            inner,
            cap_bytes_per_s: (cap_bits_per_s / 8).max(1),
            paths: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl ControllerFactory for CappedFactory<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn build(&self, now: Instant, mss: u64) -> Box<dyn Controller> {
        self.paths.fetch_add(1, Ordering::Relaxed);
        Box::new(Capped {
            inner: self.inner.build(now, mss),
            cap_bytes_per_s: self.cap_bytes_per_s,
            paths: self.paths.clone(),
        })
    }
}

#[derive(Debug)]
struct Capped {
    inner: Box<dyn Controller>,
    cap_bytes_per_s: u64,
    paths: Arc<AtomicU64>,
}

impl Controller for Capped {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn on_request_sent(&mut self, now: Instant, bytes: u64, in_flight_bytes: u64) {
        self.inner.on_request_sent(now, bytes, in_flight_bytes);
    }

    fn on_data(&mut self, arrival: &DataArrival) {
        self.inner.on_data(arrival);
    }

    fn on_loss(&mut self, loss: &Loss) {
        self.inner.on_loss(loss);
    }

    fn window(&self) -> u64 {
        self.inner.window()
    }

    fn pacing_rate(&self) -> Option<u64> {
        let share = (self.cap_bytes_per_s / self.paths.load(Ordering::Relaxed).max(1)).max(1);
        Some(self.inner.pacing_rate().map_or(share, |rate| rate.min(share)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A controller pacing at a fixed rate, to see the cap taken as a ceiling only.
    #[derive(Debug)]
    struct Fixed(Option<u64>);

    impl Controller for Fixed {
        fn name(&self) -> &'static str {
            "fixed"
        }
        fn on_request_sent(&mut self, _: Instant, _: u64, _: u64) {}
        fn on_data(&mut self, _: &DataArrival) {}
        fn on_loss(&mut self, _: &Loss) {}
        fn window(&self) -> u64 {
            1 << 20
        }
        fn pacing_rate(&self) -> Option<u64> {
            self.0
        }
    }

    impl ControllerFactory for Fixed {
        fn name(&self) -> &'static str {
            "fixed"
        }
        fn build(&self, _: Instant, _: u64) -> Box<dyn Controller> {
            Box::new(Fixed(self.0))
        }
    }

    #[test]
    fn paths_share_the_cap_and_a_slower_inner_rate_wins() {
        let now = Instant::from_nanos(0);
        let unpaced = Fixed(None);
        let capped = CappedFactory::new(&unpaced, 8_000_000);
        let first = capped.build(now, 1024);
        assert_eq!(first.pacing_rate(), Some(1_000_000));
        let second = capped.build(now, 1024);
        assert_eq!(first.pacing_rate(), Some(500_000));
        assert_eq!(second.pacing_rate(), Some(500_000));
        assert_eq!(first.window(), 1 << 20);
        let slow = Fixed(Some(200_000));
        let capped = CappedFactory::new(&slow, 8_000_000);
        assert_eq!(capped.build(now, 1024).pacing_rate(), Some(200_000));
    }
}
