//! Loss-event rate as TFRC computes it, RFC 5348 §5.

use crate::time::{Duration, Instant};

/// TFRC loss-event rate of one path. Requests are numbered per path in send order
/// (`pn`); outcomes may be reported out of order, since a loss is known only later.
#[derive(Clone, Debug, Default)]
pub struct LossEventRate {}

impl LossEventRate {
    pub fn new() -> Self {
        unimplemented!("estimator helper")
    }
    /// Data for request `pn` arrived.
    pub fn on_arrival(&mut self, pn: u64) {
        let _ = pn;
        unimplemented!()
    }
    /// Request `pn`, sent at `sent`, was lost. Losses within one `rtt` of the first loss of
    /// an event belong to that event (§5.2).
    pub fn on_loss(&mut self, pn: u64, sent: Instant, rtt: Duration) {
        let _ = (pn, sent, rtt);
        unimplemented!()
    }
    /// Loss-event rate p = 1 / mean loss interval (§5.4, weights over the last 8 intervals,
    /// the open interval counted when it raises the mean); 0 before the first loss.
    pub fn rate(&self) -> f64 {
        unimplemented!()
    }
}
