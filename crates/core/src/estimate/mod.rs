//! Per-path estimators, decoupled from congestion control (Pscheduler §IV-B).

pub mod delivery;
pub mod full_pipe;
pub mod rtt;
pub mod shared;
pub mod tfrc;
pub mod windowed;

pub use delivery::DeliveryRate;
pub use full_pipe::FullPipe;
pub use rtt::RttEstimator;
pub use shared::SharedBottleneck;
pub use tfrc::LossEventRate;
pub use windowed::{WindowedMax, WindowedMin};

use crate::time::Duration;

/// Expected time to complete one packet's transfer on a path, Pscheduler Eq. 6:
/// `E = rtt + rto · loss / (1 − loss)`, the mean over n tries of `(n − 1)·rto + rtt` with
/// each try failing with probability `loss`. A path that loses everything never completes.
pub fn expected_transmission_time(rtt: Duration, rto: Duration, loss: f64) -> Duration {
    let loss = loss.clamp(0.0, 1.0);
    if loss == 0.0 {
        return rtt;
    }
    if loss >= 1.0 {
        return Duration::MAX;
    }
    // In nanoseconds: schedulers ask for E of every path on every decision. (Through u64
    // when it fits: the same value, without a 128-bit float conversion.)
    let rto_ns = match u64::try_from(rto.as_nanos()) {
        Ok(ns) => ns as f64,
        Err(_) => rto.as_nanos() as f64,
    };
    let extra = (rto_ns * loss / (1.0 - loss)).round();
    if extra >= u64::MAX as f64 {
        return Duration::MAX;
    }
    rtt.saturating_add(Duration::from_nanos(extra as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn expected_transmission_time_by_hand() {
        // No loss: one try, E = rtt.
        assert_eq!(expected_transmission_time(ms(100), ms(300), 0.0), ms(100));
        // loss 0.2: E = 100 + 300·0.2/0.8 = 100 + 75 = 175 ms.
        assert_eq!(expected_transmission_time(ms(100), ms(300), 0.2), ms(175));
        // loss 0.5: E = 100 + 300·1 = 400 ms (on average one timeout before success).
        assert_eq!(expected_transmission_time(ms(100), ms(300), 0.5), ms(400));
        // loss 0.9: E = 40 + 200·9 = 1840 ms.
        let e = expected_transmission_time(ms(40), ms(200), 0.9);
        assert!(e.abs_diff(ms(1840)) < Duration::from_micros(1), "{e:?}");
    }

    #[test]
    fn expected_transmission_time_matches_the_series() {
        // Eq. 6 is the closed form of Σ_{n≥1} loss^{n−1}·(1 − loss)·((n − 1)·rto + rtt).
        let (rtt, rto, loss): (f64, f64, f64) = (0.05, 0.2, 0.3);
        let series: f64 = (1..200)
            .map(|n| loss.powi(n - 1) * (1.0 - loss) * ((n - 1) as f64 * rto + rtt))
            .sum();
        let e = expected_transmission_time(Duration::from_secs_f64(rtt), Duration::from_secs_f64(rto), loss);
        assert!((e.as_secs_f64() - series).abs() < 1e-9, "{e:?} vs {series}");
    }

    #[test]
    fn expected_transmission_time_edges() {
        // Losses out of [0, 1] are clamped; a path losing everything never completes.
        assert_eq!(expected_transmission_time(ms(100), ms(300), -0.5), ms(100));
        assert_eq!(expected_transmission_time(ms(100), ms(300), 1.0), Duration::MAX);
        assert_eq!(expected_transmission_time(ms(100), ms(300), 7.0), Duration::MAX);
        // Nearly 1: huge but finite, and saturating rather than overflowing.
        let e = expected_transmission_time(ms(100), Duration::MAX, 0.999);
        assert_eq!(e, Duration::MAX);
    }
}
