//! The relay's clock: the monotonic time since the relay started, as the links' nanosecond
//! `pcdn_core::time::Instant`, so blackouts and changes written as "10s" happen 10 s after start.

use pcdn_core::time::Instant;

/// Maps the operating system's monotonic clock onto link time, zero at the relay's start.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    start: std::time::Instant,
}

impl Clock {
    pub fn start() -> Clock {
        Clock {
            start: std::time::Instant::now(),
        }
    }

    /// Link time now. Monotonic, so a link never sees time go backwards.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// The tokio deadline of link time `at` (tokio's clock is the same monotonic clock).
    pub fn deadline(&self, at: Instant) -> tokio::time::Instant {
        let far = std::time::Duration::from_secs(86_400 * 365);
        let at = self
            .start
            .checked_add(at.since_epoch())
            .unwrap_or_else(|| std::time::Instant::now() + far);
        tokio::time::Instant::from_std(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_time_starts_near_zero_and_maps_back() {
        let clock = Clock::start();
        let a = clock.now();
        let b = clock.now();
        assert!(a <= b);
        let d = clock.deadline(Instant::from_nanos(5_000_000));
        assert_eq!(d.into_std() - clock.start, std::time::Duration::from_millis(5));
        // A link's "never" (u64::MAX ns) must not overflow the OS clock.
        let _ = clock.deadline(Instant::from_nanos(u64::MAX));
    }
}
