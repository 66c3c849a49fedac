//! Rate-limited logging per cause: the first occurrence of a cause is logged, then at most one
//! line per interval, carrying how many occurrences were not logged since. A peer that can make
//! a server log (a HELLO for a broken content, a datagram from a new port) cannot fill the disk.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Causes remembered at once. Past it, causes whose last line is an interval old are
/// forgotten (their next occurrence is logged as a first one); if none is, new causes share
/// one overflow cause, so memory stays bounded whatever a peer makes vary.
pub const MAX_CAUSES: usize = 1024;

/// Key of the shared cause of causes that found the table full.
const OVERFLOW: &str = "(other causes)";

#[derive(Debug)]
struct Cause {
    /// When its last line was logged.
    logged: Instant,
    /// Occurrences since then that were not.
    suppressed: u64,
}

/// See the module documentation. Shared by reference (`&self`); cheap when quiet.
#[derive(Debug)]
pub struct LogLimiter {
    interval: Duration,
    causes: Mutex<HashMap<String, Cause>>,
}

impl LogLimiter {
    /// A limiter that logs each cause at most once per `interval`.
    pub fn new(interval: Duration) -> LogLimiter {
        LogLimiter {
            interval,
            causes: Mutex::new(HashMap::new()),
        }
    }

    /// Whether to log an occurrence of `cause` now: `Some(n)` with the `n` occurrences not
    /// logged since its last line, or `None` to stay quiet.
    pub fn allow(&self, cause: &str) -> Option<u64> {
        self.allow_at(cause, Instant::now())
    }

    /// [`LogLimiter::allow`] at time `now`.
    pub fn allow_at(&self, cause: &str, now: Instant) -> Option<u64> {
        // A panic while holding the lock leaves counters only: nothing to repair.
        let mut causes = self.causes.lock().unwrap_or_else(PoisonError::into_inner);
        let key = if causes.contains_key(cause) || causes.len() < MAX_CAUSES {
            cause
        } else {
            causes.retain(|_, c| now.duration_since(c.logged) < self.interval);
            if causes.len() < MAX_CAUSES { cause } else { OVERFLOW }
        };
        match causes.get_mut(key) {
            Some(c) if now.duration_since(c.logged) < self.interval => {
                c.suppressed += 1;
                None
            }
            Some(c) => {
                c.logged = now;
                Some(std::mem::take(&mut c.suppressed))
            }
            None => {
                causes.insert(
                    key.to_owned(),
                    Cause {
                        logged: now,
                        suppressed: 0,
                    },
                );
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_then_one_line_per_interval_with_the_count() {
        let limiter = LogLimiter::new(Duration::from_secs(10));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_millis(s);
        assert_eq!(limiter.allow_at("a", at(0)), Some(0));
        assert_eq!(limiter.allow_at("b", at(1)), Some(0), "causes are apart");
        for i in 0..1000 {
            assert_eq!(limiter.allow_at("a", at(2 + i)), None);
        }
        assert_eq!(limiter.allow_at("a", at(10_000)), Some(1000));
        assert_eq!(limiter.allow_at("a", at(10_001)), None);
        assert_eq!(limiter.allow_at("a", at(30_000)), Some(1));
    }

    #[test]
    fn the_table_is_bounded() {
        let limiter = LogLimiter::new(Duration::from_secs(10));
        let t0 = Instant::now();
        let lines = (0..10 * MAX_CAUSES)
            .filter(|i| limiter.allow_at(&format!("cause {i}"), t0).is_some())
            .count();
        // Every cause of the full table, then one line for all the others.
        assert_eq!(lines, MAX_CAUSES + 1);
        assert!(limiter.causes.lock().unwrap().len() <= MAX_CAUSES + 1);
        // Once the interval has passed, old causes make room again.
        let later = t0 + Duration::from_secs(11);
        assert_eq!(limiter.allow_at("fresh", later), Some(0));
    }
}
