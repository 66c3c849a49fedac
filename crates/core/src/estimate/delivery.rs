//! Delivery rate measured over each window of received packets, Pscheduler Eq. 5.

use crate::time::Instant;

/// R = datasize / (endtime − starttime), measured over each window's worth of arrivals.
#[derive(Clone, Debug, Default)]
pub struct DeliveryRate {}

impl DeliveryRate {
    pub fn new() -> Self {
        unimplemented!("estimator helper")
    }
    /// `bytes` arrived at `now`; a sample closes after `window_packets` arrivals.
    pub fn on_arrival(&mut self, now: Instant, bytes: u64, window_packets: u64) {
        let _ = (now, bytes, window_packets);
        unimplemented!()
    }
    /// Latest rate in bytes per second, once one can be measured.
    pub fn rate(&self) -> Option<f64> {
        unimplemented!()
    }
}
