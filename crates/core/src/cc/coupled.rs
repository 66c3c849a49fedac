//! What the coupled multipath controls (LIA, OLIA, BALIA) share: the group of paths of one
//! download whose windows they couple, and a NewReno skeleton around their increase and
//! decrease rules.
//!
//! A coupled control's factory ([`CoupledConfig`], e.g. [`LiaConfig`](super::LiaConfig))
//! owns a [`CoupledGroup`] made when the factory is. Every controller it builds registers a
//! slot in that group, keeps the slot's window, RTT and loss counters current at every
//! event, reads the other slots to compute its increase, and removes its slot when dropped,
//! so paths can come and go. One factory is therefore one coupling group, meant for one
//! download.
//!
//! A window grows only while the path fills it, to within 3 packets (RFC 9002 §7.8, "in
//! either slow start or congestion avoidance"; Linux MPTCP's coupled controls return early
//! unless `tcp_is_cwnd_limited`, whose allowance is `tcp_max_burst`). Here that matters more
//! than for one path: every path's increase is divided by the group's summed rate, so a
//! window the scheduler leaves unfilled (a pipe it caps, a path it rests) and that grew
//! anyway shrinks the other paths' increase. Kondo's C under BALIA with `weave`, 5 seeds:
//! 22.0 rebuffers against 24.8 with the unfilled window growing, the lossy Wi-Fi path
//! carrying 0.210 against 0.208 Mbit/s. Linux lets a window in slow start grow to twice what
//! is in flight; a path that never loses never leaves slow start, and a lossless LTE path
//! whose requests `weave` caps at 50 then held a window of 111 packets (Kondo's C under
//! BALIA, 20 seeds), twice its rate in the coupling. Under RFC 9002's rule it holds 58, the
//! lossy Wi-Fi path's window is 2.14 instead of 2.12 packets (as under `xlink`, which fills
//! the LTE window), and `weave`'s stalled time 2.956 % instead of 2.995 %; the schedulers
//! that fill their windows are unchanged. (For the uncoupled controls only a download
//! with nothing to ask counts as application-limited: the same rule there cost `weave`
//! 0.4-3 % of its aggregation in MPRD Fig. 7(e) under CUBIC, and 3 % in the player scenario
//! under `weft`, whose loss response is CUBIC's.)

use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Controller, ControllerFactory, DataArrival, Loss, WindowConfig};
use crate::time::Instant;

/// Room, in packets, a window may have left and still count as filled (Linux's
/// `tcp_max_burst`, the reordering degree 3).
const FILLED_ALLOWANCE: f64 = 3.0;

/// The path filled its window when `arrival` came (see the module's doc).
fn window_filled(arrival: &DataArrival, cwnd: f64, mss: f64) -> bool {
    // The bytes in flight before this arrival was taken off them.
    let flight = (arrival.in_flight_bytes + arrival.bytes) as f64;
    flight + FILLED_ALLOWANCE * mss >= cwnd
}

/// What one path of a group shows the others.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathState {
    pub id: u64,
    /// The path's window, bytes.
    pub cwnd: f64,
    /// The path's packet payload, bytes.
    pub mss: f64,
    /// Smoothed RTT in seconds; `None` until the path's first arrival, and until then the
    /// path takes no part in the others' computations (as Linux MPTCP skips subflows
    /// without an srtt).
    pub rtt: Option<f64>,
    /// Bytes delivered since the path's last congestion event (OLIA's l₂)...
    pub since_loss: f64,
    /// ... and between its last two (OLIA's l₁).
    pub between_losses: f64,
}

impl PathState {
    /// The window in packets.
    pub fn packets(&self) -> f64 {
        self.cwnd / self.mss
    }
    /// cwnd/rtt, packets per second (0 without an RTT).
    pub fn rate(&self) -> f64 {
        self.rtt.map_or(0.0, |rtt| self.packets() / rtt)
    }
}

/// The paths of a group that have an RTT, the ones the coupling formulas range over.
pub fn established(paths: &[PathState]) -> impl Iterator<Item = &PathState> + Clone {
    paths.iter().filter(|p| p.rtt.is_some())
}

#[derive(Debug, Default)]
struct Slots {
    next_id: u64,
    paths: Vec<PathState>,
}

/// The shared state of the paths of one download.
#[derive(Clone, Default)]
pub struct CoupledGroup(Arc<Mutex<Slots>>);

impl fmt::Debug for CoupledGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.paths()).finish()
    }
}

impl CoupledGroup {
    fn lock(&self) -> MutexGuard<'_, Slots> {
        // A panic elsewhere while the lock was held leaves numbers, not broken invariants.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
    fn register(&self, cwnd: f64, mss: f64) -> u64 {
        let mut slots = self.lock();
        let id = slots.next_id;
        slots.next_id += 1;
        slots.paths.push(PathState {
            id,
            cwnd,
            mss,
            rtt: None,
            since_loss: 0.0,
            between_losses: 0.0,
        });
        id
    }
    fn remove(&self, id: u64) {
        self.lock().paths.retain(|p| p.id != id);
    }
    /// A copy of every path's state.
    pub fn paths(&self) -> Vec<PathState> {
        self.lock().paths.clone()
    }
    /// Number of paths registered (with or without an RTT).
    pub fn len(&self) -> usize {
        self.lock().paths.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A coupled increase-and-decrease rule. Windows are in bytes; `paths` holds every path of
/// the group, `me` among them, and the rule ranges over the [`established`] ones.
pub trait CoupledRule: fmt::Debug + Send + Sync + 'static {
    const NAME: &'static str;
    /// The rule's α for path `me`, unitless.
    fn alpha(me: &PathState, paths: &[PathState]) -> f64;
    /// How much congestion avoidance adds to `me`'s window, bytes, for `bytes` answered on
    /// it (negative: the window shrinks).
    fn increase(me: &PathState, paths: &[PathState], bytes: f64) -> f64;
    /// `me`'s window after a congestion event, bytes (before the floor).
    fn reduced(me: &PathState, _paths: &[PathState]) -> f64 {
        me.cwnd / 2.0
    }
}

/// A coupled control's settings, which also hold its [`CoupledGroup`]: the controllers one
/// instance builds are coupled with each other, so make one instance per download.
/// Cloning copies the settings and starts a new, empty group.
pub struct CoupledConfig<R> {
    /// Initial window (RFC 6928: 10 packets) and floor of the window after a reduction (2
    /// packets). A timeout still collapses the window to one packet.
    pub window: WindowConfig,
    group: CoupledGroup,
    rule: PhantomData<fn() -> R>,
}

impl<R: CoupledRule> CoupledConfig<R> {
    /// The group the controllers built by this factory share.
    pub fn group(&self) -> &CoupledGroup {
        &self.group
    }
}

impl<R> Default for CoupledConfig<R> {
    fn default() -> Self {
        CoupledConfig {
            window: WindowConfig::default(),
            group: CoupledGroup::default(),
            rule: PhantomData,
        }
    }
}

impl<R> Clone for CoupledConfig<R> {
    fn clone(&self) -> Self {
        CoupledConfig {
            window: self.window,
            group: CoupledGroup::default(),
            rule: PhantomData,
        }
    }
}

impl<R: CoupledRule> fmt::Debug for CoupledConfig<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoupledConfig")
            .field("rule", &R::NAME)
            .field("window", &self.window)
            .field("group", &self.group)
            .finish()
    }
}

impl<R: CoupledRule> ControllerFactory for CoupledConfig<R> {
    fn name(&self) -> &'static str {
        R::NAME
    }
    fn build(&self, now: Instant, mss: u64) -> Box<dyn Controller> {
        Box::new(Coupled::<R>::new(self, now, mss))
    }
}

/// One path of a coupled control: NewReno's slow start, recovery and timeout (as
/// [`NewReno`](super::NewReno)), with the rule's coupled increase in congestion avoidance
/// and its decrease on a congestion event.
pub struct Coupled<R> {
    group: CoupledGroup,
    id: u64,
    mss: f64,
    min_window: f64,
    /// Bytes of requests the path may have in flight.
    cwnd: f64,
    ssthresh: f64,
    reduced_at: Option<Instant>,
    recovery_start: Option<Instant>,
    collapsed_at: Option<Instant>,
    rule: PhantomData<fn() -> R>,
}

impl<R: CoupledRule> fmt::Debug for Coupled<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(R::NAME)
            .field("id", &self.id)
            .field("cwnd", &self.cwnd)
            .field("ssthresh", &self.ssthresh)
            .finish_non_exhaustive()
    }
}

impl<R> Drop for Coupled<R> {
    fn drop(&mut self) {
        self.group.remove(self.id);
    }
}

impl<R: CoupledRule> Coupled<R> {
    pub fn new(config: &CoupledConfig<R>, _now: Instant, mss: u64) -> Self {
        let min_window = config.window.min_bytes(mss) as f64;
        let cwnd = config.window.initial_bytes(mss) as f64;
        let mss = mss.max(1) as f64;
        let group = config.group.clone();
        let id = group.register(cwnd, mss);
        Coupled {
            group,
            id,
            mss,
            min_window,
            cwnd,
            ssthresh: f64::INFINITY,
            reduced_at: None,
            recovery_start: None,
            collapsed_at: None,
            rule: PhantomData,
        }
    }
    /// This path's slot in the group.
    pub fn id(&self) -> u64 {
        self.id
    }
    pub fn group(&self) -> &CoupledGroup {
        &self.group
    }
    /// The rule's α for this path as the group stands now.
    pub fn alpha(&self) -> f64 {
        let slots = self.group.lock();
        match slots.paths.iter().find(|p| p.id == self.id) {
            Some(me) => R::alpha(me, &slots.paths),
            None => 1.0,
        }
    }
    /// Slow-start threshold in bytes (`u64::MAX` until the first congestion event).
    pub fn ssthresh(&self) -> u64 {
        if self.ssthresh.is_finite() {
            self.ssthresh as u64
        } else {
            u64::MAX
        }
    }
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// Runs `f` on this path's slot and all the slots, then stores the window back.
    fn with_group<T>(&mut self, f: impl FnOnce(&mut Self, usize, &mut [PathState]) -> T) -> T {
        let group = self.group.clone();
        let mut slots = group.lock();
        let index = match slots.paths.iter().position(|p| p.id == self.id) {
            Some(index) => index,
            None => {
                // Cannot happen while `self` lives; re-register rather than panic.
                slots.paths.push(PathState {
                    id: self.id,
                    cwnd: self.cwnd,
                    mss: self.mss,
                    rtt: None,
                    since_loss: 0.0,
                    between_losses: 0.0,
                });
                slots.paths.len() - 1
            }
        };
        let out = f(self, index, &mut slots.paths);
        slots.paths[index].cwnd = self.cwnd;
        out
    }

    /// Test hook: puts the path in congestion avoidance at `cwnd_packets` with RTT `rtt`
    /// and `since_loss_packets` delivered since its last loss.
    #[cfg(test)]
    pub(crate) fn force(&mut self, cwnd_packets: f64, rtt: crate::time::Duration, since_loss_packets: f64) {
        self.cwnd = cwnd_packets * self.mss;
        self.ssthresh = self.cwnd;
        self.with_group(|me, i, paths| {
            paths[i].rtt = Some(rtt.as_secs_f64());
            paths[i].since_loss = since_loss_packets * me.mss;
        });
    }
}

impl<R: CoupledRule> Controller for Coupled<R> {
    fn name(&self) -> &'static str {
        R::NAME
    }
    fn on_request_sent(&mut self, _now: Instant, _bytes: u64, _in_flight_bytes: u64) {}
    fn on_data(&mut self, a: &DataArrival) {
        self.with_group(|me, i, paths| {
            paths[i].rtt = Some(a.smoothed_rtt.as_secs_f64().max(1e-6));
            paths[i].since_loss += a.bytes as f64;
            if me.recovery_start.is_some_and(|start| a.sent <= start)
                || a.app_limited
                || !window_filled(a, me.cwnd, me.mss)
            {
                return;
            }
            let mut bytes = a.bytes as f64;
            if me.cwnd < me.ssthresh {
                // Slow start as NewReno's; the bytes beyond ssthresh go to avoidance.
                let grow = bytes.min(me.ssthresh - me.cwnd);
                me.cwnd += grow;
                bytes -= grow;
                paths[i].cwnd = me.cwnd;
            }
            if bytes > 0.0 {
                let current = paths[i];
                me.cwnd = (me.cwnd + R::increase(&current, paths, bytes)).max(me.min_window);
            }
        });
    }
    fn on_loss(&mut self, loss: &Loss) {
        self.with_group(|me, i, paths| {
            if me.reduced_at.is_none_or(|at| loss.sent > at) {
                let current = paths[i];
                let reduced = if current.rtt.is_some() {
                    R::reduced(&current, paths)
                } else {
                    me.cwnd / 2.0
                };
                me.ssthresh = reduced.max(me.min_window);
                me.cwnd = me.ssthresh;
                me.reduced_at = Some(loss.now);
                me.recovery_start = Some(loss.now);
                let slot = &mut paths[i];
                if slot.since_loss > 0.0 {
                    slot.between_losses = slot.since_loss;
                    slot.since_loss = 0.0;
                }
            }
            if loss.by_timeout && me.collapsed_at.is_none_or(|at| loss.sent > at) {
                me.cwnd = me.mss;
                me.reduced_at = Some(loss.now);
                me.collapsed_at = Some(loss.now);
                me.recovery_start = None;
            }
        });
    }
    fn window(&self) -> u64 {
        self.cwnd as u64
    }
}

#[cfg(test)]
mod tests {
    use super::super::newreno::test_support::*;
    use super::super::{BaliaConfig, LiaConfig, OliaConfig};
    use super::*;

    /// What every coupled control does on one path alone: NewReno.
    fn single_path_is_reno<R: CoupledRule>(config: CoupledConfig<R>) {
        let mut cc = Coupled::new(&config, Instant::ZERO, MSS);
        // Slow start: 10, 20, 40 packets.
        let t = round(&mut cc, Instant::ZERO, ms(100));
        round(&mut cc, t, ms(100));
        assert_eq!(cc.window(), 40_000, "{}", R::NAME);
        // Alone, α is 1 (LIA, BALIA) or 0 (OLIA), and the increase is Reno's.
        let alpha = cc.alpha();
        assert!(alpha == 1.0 || alpha == 0.0, "{}: α {alpha}", R::NAME);
        // Loss halves once per event: 40 → 20.
        cc.on_loss(&loss(at(ms(150)), at(ms(260)), false));
        assert_eq!(cc.window(), 20_000, "{}", R::NAME);
        cc.on_loss(&loss(at(ms(200)), at(ms(270)), false));
        assert_eq!(cc.window(), 20_000, "{}", R::NAME);
        // No growth from requests sent before the reduction.
        cc.on_data(&arrival(at(ms(250)), at(ms(300))));
        assert_eq!(cc.window(), 20_000, "{}", R::NAME);
        // Congestion avoidance: mss²/cwnd per packet, about +1 packet per round trip.
        let mut t = at(ms(300));
        for _ in 0..5 {
            t = round(&mut cc, t, ms(100));
        }
        let w = cc.window() as f64 / MSS as f64;
        assert!((24.5..=25.0).contains(&w), "{}: {w}", R::NAME);
        // A timeout collapses the window to one packet; slow start climbs back to ssthresh.
        cc.on_loss(&loss(t, t + ms(1000), true));
        assert_eq!(cc.window(), MSS, "{}", R::NAME);
        assert!(cc.in_slow_start());
        // The floor after a loss is 2 packets.
        let mut t = t + ms(1001);
        for _ in 0..10 {
            cc.on_loss(&loss(t, t + ms(50), false));
            t += ms(100);
        }
        assert_eq!(cc.window(), 2 * MSS, "{}", R::NAME);
    }

    /// Arrivals with `in_flight` packets still out before them: does the window grow?
    fn grows_with<R: CoupledRule>(cc: &mut Coupled<R>, in_flight: u64) -> bool {
        let before = cc.window();
        let mut a = arrival(at(ms(1000)), at(ms(1100)));
        a.in_flight_bytes = (in_flight - 1) * MSS;
        cc.on_data(&a);
        cc.window() > before
    }

    fn unfilled_window_holds<R: CoupledRule>(config: CoupledConfig<R>) {
        let mut cc = Coupled::new(&config, Instant::ZERO, MSS);
        // Slow start at 10 packets: the same 3 packets of room (RFC 9002 §7.8), not Linux's
        // half of the window, which let a path that never loses keep twice its flight.
        assert!(cc.in_slow_start());
        assert!(!grows_with(&mut cc, 5), "{}", R::NAME);
        assert!(!grows_with(&mut cc, 6), "{}", R::NAME);
        assert!(grows_with(&mut cc, 7), "{}", R::NAME);
        // Congestion avoidance at 20 packets: 3 left unfilled still counts as full, 4 not.
        cc.force(20.0, ms(100), 0.0);
        assert!(!grows_with(&mut cc, 16), "{}", R::NAME);
        assert!(grows_with(&mut cc, 17), "{}", R::NAME);
    }

    #[test]
    fn a_window_the_path_does_not_fill_does_not_grow() {
        unfilled_window_holds(LiaConfig::default());
        unfilled_window_holds(OliaConfig::default());
        unfilled_window_holds(BaliaConfig::default());
    }

    #[test]
    fn each_rule_alone_is_newreno() {
        single_path_is_reno(LiaConfig::default());
        single_path_is_reno(OliaConfig::default());
        single_path_is_reno(BaliaConfig::default());
    }

    #[test]
    fn paths_register_and_leave_their_group() {
        let config = LiaConfig::default();
        assert!(config.group().is_empty());
        let a = config.build(Instant::ZERO, 1000);
        let b = config.build(Instant::ZERO, 1000);
        assert_eq!(config.group().len(), 2);
        assert_eq!(a.name(), "lia");
        assert_eq!(a.window(), 10_000);
        // Another factory, another group (as `by_name` gives one per call); a clone too.
        let other = LiaConfig::default();
        let c = other.build(Instant::ZERO, 1000);
        let cloned = config.clone();
        assert_eq!(config.group().len(), 2);
        assert_eq!(other.group().len(), 1);
        assert!(cloned.group().is_empty());
        drop(a);
        assert_eq!(config.group().len(), 1);
        drop(b);
        drop(c);
        assert!(config.group().is_empty() && other.group().is_empty());
    }

    #[test]
    fn a_path_without_rtt_is_left_out() {
        let config = LiaConfig::default();
        let mut a = Coupled::new(&config, Instant::ZERO, MSS);
        let _b = Coupled::new(&config, Instant::ZERO, MSS);
        a.force(10.0, ms(100), 0.0);
        // b has no RTT yet: a is alone in the formulas, α = 1.
        assert_eq!(a.alpha(), 1.0);
        assert_eq!(established(&config.group().paths()).count(), 1);
    }
}
