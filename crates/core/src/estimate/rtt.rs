//! Round-trip time and retransmission timeout, RFC 6298, with min RTT and back-off.

use crate::time::Duration;

/// RFC 6298 estimator of one path's round trip (request sent → data arrived).
#[derive(Clone, Debug)]
pub struct RttEstimator {
    initial: Duration,
    min_rto: Duration,
    max_rto: Duration,
}

impl RttEstimator {
    /// `initial` stands in for the RTT until the first sample; the RTO is clamped to
    /// `[min_rto, max_rto]`.
    pub fn new(initial: Duration, min_rto: Duration, max_rto: Duration) -> Self {
        let _ = (initial, min_rto, max_rto);
        unimplemented!("estimator helper")
    }
    /// Takes one RTT sample (RFC 6298 §2.2, §2.3) and clears the back-off (§5.7).
    pub fn update(&mut self, sample: Duration) {
        let _ = sample;
        unimplemented!()
    }
    pub fn has_sample(&self) -> bool {
        unimplemented!()
    }
    /// SRTT, or the initial RTT before the first sample.
    pub fn smoothed(&self) -> Duration {
        unimplemented!()
    }
    pub fn rttvar(&self) -> Duration {
        unimplemented!()
    }
    /// Smallest sample seen, or the initial RTT before the first sample.
    pub fn min(&self) -> Duration {
        unimplemented!()
    }
    pub fn latest(&self) -> Duration {
        unimplemented!()
    }
    /// RTO without back-off: SRTT + max(G, 4·RTTVAR) (§2.3), clamped; 1 s before a sample (§2.1).
    pub fn base_rto(&self) -> Duration {
        unimplemented!()
    }
    /// RTO with the current back-off applied (§5.5), clamped to `max_rto`.
    pub fn rto(&self) -> Duration {
        unimplemented!()
    }
    /// The timer expired: double the RTO (§5.5).
    pub fn back_off(&mut self) {
        unimplemented!()
    }
    /// Timeouts since the last sample.
    pub fn backoff_count(&self) -> u32 {
        unimplemented!()
    }
}

impl Default for RttEstimator {
    fn default() -> Self {
        RttEstimator::new(Duration::from_millis(333), Duration::from_millis(200), Duration::from_secs(60))
    }
}
