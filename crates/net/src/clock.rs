//! The runtime's clock: `std::time::Instant` mapped onto the core's nanosecond
//! `pcdn_core::time::Instant`, whose epoch is the moment the clock was made.

use pcdn_core::time::{Duration, Instant};

/// A monotonic clock whose readings are core instants (nanoseconds since `start`).
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: std::time::Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl Clock {
    /// A clock whose epoch is now.
    pub fn new() -> Clock {
        Clock {
            start: std::time::Instant::now(),
        }
    }

    /// Now, as the core counts time.
    pub fn now(&self) -> Instant {
        self.to_core(std::time::Instant::now())
    }

    pub fn to_core(&self, t: std::time::Instant) -> Instant {
        let nanos = t.saturating_duration_since(self.start).as_nanos();
        Instant::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The std instant of a core instant, for tokio's timers.
    pub fn to_std(&self, t: Instant) -> std::time::Instant {
        self.start
            .checked_add(t.since_epoch())
            // Centuries away: as good as never.
            .unwrap_or_else(|| std::time::Instant::now() + Duration::from_secs(86_400 * 365))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_and_std_instants_round_trip() {
        let clock = Clock::new();
        let t = Instant::from_nanos(1_234_567_890);
        assert_eq!(clock.to_core(clock.to_std(t)), t);
        assert!(clock.now() >= Instant::ZERO);
    }
}
