//! Per-path estimators, decoupled from congestion control (Pscheduler §IV-B).

pub mod delivery;
pub mod rtt;
pub mod tfrc;

pub use delivery::DeliveryRate;
pub use rtt::RttEstimator;
pub use tfrc::LossEventRate;

use crate::time::Duration;

/// Expected time to complete one packet's transfer on a path, Pscheduler Eq. 6:
/// `E = rtt + rto · loss / (1 − loss)`, the mean over n tries of `(n − 1)·rto + rtt` with
/// each try failing with probability `loss`. A path that loses everything never completes.
pub fn expected_transmission_time(rtt: Duration, rto: Duration, loss: f64) -> Duration {
    let loss = loss.clamp(0.0, 1.0);
    if loss >= 1.0 {
        return Duration::MAX;
    }
    let extra = rto.as_secs_f64() * loss / (1.0 - loss);
    rtt.saturating_add(Duration::try_from_secs_f64(extra).unwrap_or(Duration::MAX))
}
