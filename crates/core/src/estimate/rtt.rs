//! Round-trip time and retransmission timeout, RFC 6298, with min RTT and back-off.

use crate::time::Duration;

/// Clock granularity G of RFC 6298 §2.3: the floor of the variance term, so that an RTT
/// sampled as perfectly steady still leaves room for jitter below the clock's resolution.
pub(crate) const CLOCK_GRANULARITY: Duration = Duration::from_millis(1);
/// RFC 6298 §2.1: the RTO before any RTT has been measured.
const RTO_BEFORE_SAMPLE: Duration = Duration::from_secs(1);

/// RFC 6298 estimator of one path's round trip (request sent → data arrived).
///
/// Times are kept in nanoseconds: the estimator runs for every packet, and integer
/// arithmetic on one word is several times cheaper than on `Duration`'s seconds and
/// nanoseconds, with the same results (`Duration` divides its nanoseconds rounding down, as
/// integers do). Durations past `u64::MAX` ns (584 years) saturate there.
#[derive(Clone, Debug)]
pub struct RttEstimator {
    initial: u64,
    min_rto: u64,
    max_rto: u64,
    /// SRTT; `None` until the first sample.
    srtt: Option<u64>,
    rttvar: u64,
    min: u64,
    latest: u64,
    /// Timeouts since the last sample (§5.5 doubles the RTO once per timeout).
    backoff: u32,
}

/// `d` in nanoseconds, saturating.
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl RttEstimator {
    /// `initial` stands in for the RTT until the first sample; the RTO is clamped to
    /// `[min_rto, max_rto]`.
    pub fn new(initial: Duration, min_rto: Duration, max_rto: Duration) -> Self {
        let initial = nanos(initial);
        let min_rto = nanos(min_rto);
        RttEstimator {
            initial,
            min_rto,
            // A ceiling below the floor would make every clamp panic; the floor wins.
            max_rto: nanos(max_rto).max(min_rto),
            srtt: None,
            rttvar: initial / 2,
            min: initial,
            latest: initial,
            backoff: 0,
        }
    }
    /// Takes one RTT sample (RFC 6298 §2.2, §2.3) and clears the back-off (the note after
    /// §5.7: a new measurement "collapses" a backed-off RTO).
    pub fn update(&mut self, sample: Duration) {
        let sample = nanos(sample);
        match self.srtt {
            // §2.2: the first measurement R sets SRTT <- R, RTTVAR <- R/2.
            None => {
                self.srtt = Some(sample);
                self.rttvar = sample / 2;
                self.min = sample;
            }
            // §2.3: RTTVAR <- (1 - beta)·RTTVAR + beta·|SRTT - R'| with beta = 1/4, then
            // SRTT <- (1 - alpha)·SRTT + alpha·R' with alpha = 1/8. RTTVAR goes first
            // because it must see the SRTT from before this sample. (In u128, which cannot
            // overflow; the results are averages of u64s.)
            Some(srtt) => {
                let deviation = srtt.abs_diff(sample);
                self.rttvar = ((u128::from(self.rttvar) * 3 + u128::from(deviation)) / 4) as u64;
                self.srtt = Some(((u128::from(srtt) * 7 + u128::from(sample)) / 8) as u64);
                self.min = self.min.min(sample);
            }
        }
        self.latest = sample;
        self.backoff = 0;
    }
    pub fn has_sample(&self) -> bool {
        self.srtt.is_some()
    }
    /// SRTT, or the initial RTT before the first sample.
    pub fn smoothed(&self) -> Duration {
        Duration::from_nanos(self.srtt.unwrap_or(self.initial))
    }
    /// RTTVAR, or half the initial RTT before the first sample (what §2.2 would set if the
    /// initial RTT had been measured).
    pub fn rttvar(&self) -> Duration {
        Duration::from_nanos(self.rttvar)
    }
    /// Smallest sample seen, or the initial RTT before the first sample.
    pub fn min(&self) -> Duration {
        Duration::from_nanos(self.min)
    }
    /// The most recent sample, or the initial RTT before the first sample.
    pub fn latest(&self) -> Duration {
        Duration::from_nanos(self.latest)
    }
    /// RTO without back-off: SRTT + max(G, 4·RTTVAR) (§2.3), clamped; 1 s before a sample (§2.1).
    pub fn base_rto(&self) -> Duration {
        Duration::from_nanos(self.base_rto_nanos())
    }
    fn base_rto_nanos(&self) -> u64 {
        let rto = match self.srtt {
            None => nanos(RTO_BEFORE_SAMPLE),
            Some(srtt) => srtt.saturating_add(nanos(CLOCK_GRANULARITY).max(self.rttvar.saturating_mul(4))),
        };
        rto.clamp(self.min_rto, self.max_rto)
    }
    /// RTO with the current back-off applied (§5.5), clamped to `max_rto`.
    pub fn rto(&self) -> Duration {
        self.rto_at_least(Duration::ZERO)
    }
    /// As [`RttEstimator::rto`], with the RTO before the back-off at least `floor`.
    pub fn rto_at_least(&self, floor: Duration) -> Duration {
        Duration::from_nanos(self.rto_at_least_nanos(nanos(floor)))
    }
    /// As [`RttEstimator::rto_at_least`], in nanoseconds: a path sets its RTO on every answer.
    pub fn rto_at_least_nanos(&self, floor: u64) -> u64 {
        let factor = 1u32.checked_shl(self.backoff).unwrap_or(u32::MAX);
        self.base_rto_nanos()
            .max(floor)
            .saturating_mul(u64::from(factor))
            .min(self.max_rto)
    }
    /// The timer expired: double the RTO (§5.5).
    pub fn back_off(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }
    /// Timeouts since the last sample.
    pub fn backoff_count(&self) -> u32 {
        self.backoff
    }
}

impl Default for RttEstimator {
    fn default() -> Self {
        RttEstimator::new(
            Duration::from_millis(333),
            Duration::from_millis(200),
            Duration::from_secs(60),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn estimator() -> RttEstimator {
        RttEstimator::new(ms(333), ms(200), ms(60_000))
    }

    #[test]
    fn before_the_first_sample() {
        let e = estimator();
        assert!(!e.has_sample());
        assert_eq!(e.smoothed(), ms(333));
        assert_eq!(e.min(), ms(333));
        assert_eq!(e.latest(), ms(333));
        // §2.1: RTO = 1 s until a measurement.
        assert_eq!(e.base_rto(), ms(1000));
        assert_eq!(e.rto(), ms(1000));
    }

    #[test]
    fn first_sample_sets_srtt_and_half_variance() {
        let mut e = estimator();
        e.update(ms(100));
        // SRTT = 100, RTTVAR = 100/2 = 50, RTO = 100 + max(1, 4·50) = 300 ms.
        assert!(e.has_sample());
        assert_eq!(e.smoothed(), ms(100));
        assert_eq!(e.rttvar(), ms(50));
        assert_eq!(e.base_rto(), ms(300));
        assert_eq!(e.min(), ms(100));
    }

    #[test]
    fn later_samples_follow_rfc6298_section_2_3() {
        let mut e = estimator();
        e.update(ms(100));
        e.update(ms(200));
        // RTTVAR = 3/4·50 + 1/4·|100 − 200| = 37.5 + 25 = 62.5 ms
        // SRTT   = 7/8·100 + 1/8·200 = 87.5 + 25 = 112.5 ms
        // RTO    = 112.5 + 4·62.5 = 362.5 ms
        assert_eq!(e.rttvar(), Duration::from_micros(62_500));
        assert_eq!(e.smoothed(), Duration::from_micros(112_500));
        assert_eq!(e.base_rto(), Duration::from_micros(362_500));
        assert_eq!(e.latest(), ms(200));
        assert_eq!(e.min(), ms(100));

        e.update(ms(50));
        // RTTVAR = 3/4·62.5 + 1/4·|112.5 − 50| = 46.875 + 15.625 = 62.5 ms
        // SRTT   = 7/8·112.5 + 1/8·50 = 98.4375 + 6.25 = 104.6875 ms
        assert_eq!(e.rttvar(), Duration::from_micros(62_500));
        assert_eq!(e.smoothed(), Duration::from_nanos(104_687_500));
        assert_eq!(e.min(), ms(50));
    }

    #[test]
    fn rto_is_clamped_and_variance_floored_by_granularity() {
        let mut e = RttEstimator::new(ms(10), ms(0), ms(60_000));
        for _ in 0..200 {
            e.update(ms(10));
        }
        // A perfectly steady RTT drives RTTVAR to 0 (3/4 each step, integer ns), so the
        // variance term is G = 1 ms: RTO = 10 + 1 = 11 ms.
        assert_eq!(e.rttvar(), Duration::ZERO);
        assert_eq!(e.base_rto(), ms(11));

        // The same samples with the default 200 ms floor.
        let mut e = estimator();
        e.update(ms(10));
        // 10 + 4·5 = 30 ms < 200 ms floor.
        assert_eq!(e.base_rto(), ms(200));

        let mut e = RttEstimator::new(ms(100), ms(200), ms(500));
        e.update(ms(400));
        // 400 + 4·200 = 1200 ms > 500 ms ceiling.
        assert_eq!(e.base_rto(), ms(500));
    }

    #[test]
    fn back_off_doubles_until_the_ceiling_and_a_sample_clears_it() {
        let mut e = RttEstimator::new(ms(100), ms(200), ms(2_000));
        e.update(ms(100)); // RTO = 300 ms
        e.back_off();
        assert_eq!(e.backoff_count(), 1);
        assert_eq!(e.rto(), ms(600));
        e.back_off();
        assert_eq!(e.rto(), ms(1200));
        e.back_off();
        // 2400 ms > 2000 ms ceiling.
        assert_eq!(e.rto(), ms(2000));
        for _ in 0..100 {
            e.back_off();
        }
        assert_eq!(e.rto(), ms(2000));
        assert_eq!(e.base_rto(), ms(300));

        e.update(ms(100));
        // RTTVAR = 3/4·50 + 0 = 37.5; SRTT = 100; RTO = 100 + 150 = 250 ms, no back-off.
        assert_eq!(e.backoff_count(), 0);
        assert_eq!(e.rto(), ms(250));
    }

    #[test]
    fn inverted_bounds_do_not_panic() {
        let mut e = RttEstimator::new(ms(100), ms(500), ms(100));
        e.update(ms(10));
        assert_eq!(e.rto(), ms(500));
    }
}
