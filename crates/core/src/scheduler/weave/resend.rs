//! When an overdue request's answer comes if nothing copies it: found lost, then asked again.

use super::{Prediction, Weave};
use crate::path::{PathId, TIME_THRESHOLD};
use crate::scheduler::{PathView, View};
use crate::time::Instant;

/// When the answer to an overdue request comes if nothing is copied (`HolderResend::lands`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Resend {
    /// Its resend lands this many seconds from now.
    Lands(f64),
    /// Never: the resender loses everything (or the request is not the scheduler's).
    Never,
    /// Only after the holder's RTO: its resend lands this many seconds from now. Requests
    /// stuck so come many at once (a server down loses its whole window): the soonest path
    /// copies them, oldest first, as its answers give it room; a later path taking the
    /// oldest would land it after that path's copy would (random world 7077: a failed
    /// edge's 450 requests).
    Stuck(f64),
}

impl Weave {
    /// Path `path` has answers modelled to come: its latest request's is not due yet (`now`,
    /// seconds since the epoch).
    pub(super) fn answering(&self, now: f64, path: PathId) -> bool {
        self.clocks
            .get(&path)
            .and_then(|c| c.clock)
            .is_some_and(|latest| self.answer_in(now, path, latest) > 0.0)
    }

    /// What the resend of a request overdue on `path` depends on besides the request: the
    /// path, the resender and the moment, once for all of the path's requests. `None` for a
    /// path outside the view.
    pub(super) fn holder_resend(
        &self,
        view: &View<'_>,
        now: f64,
        path: PathId,
        soonest: f64,
        resender: Option<&PathView>,
    ) -> Option<HolderResend> {
        let holder = view.path(path)?;
        let thresholds = &holder.loss_thresholds;
        let found_after_later = if thresholds.reordering {
            // The path reorders: its reordering window (RFC 8985 §6.2), not RFC 9002's eighth.
            (holder.srtt + thresholds.reorder_window).as_secs_f64()
        } else {
            holder.srtt.as_secs_f64() * f64::from(TIME_THRESHOLD.0) / f64::from(TIME_THRESHOLD.1)
        };
        // The resend goes to the soonest path, which may lose it too: each loss costs the
        // time its own time threshold takes to find it (RFC 9002 §6.1.2), a geometric number
        // of times (mean p / (1 − p)).
        let retries = match resender {
            Some(r) if r.loss_rate >= 1.0 => None,
            Some(r) => {
                let found = r.srtt.as_secs_f64() * f64::from(TIME_THRESHOLD.0) / f64::from(TIME_THRESHOLD.1);
                Some(r.loss_rate / (1.0 - r.loss_rate) * found)
            }
            None => Some(0.0),
        };
        Some(HolderResend {
            now,
            // A path the set trial left idle sends nothing more: if the requests sent after
            // one are lost too (its last window, dropped at the line's queue), no answer
            // passes it and only the RTO finds it (`line`).
            clock: self
                .clocks
                .get(&path)
                .and_then(|c| c.clock)
                .filter(|_| !self.lines.idle(path)),
            found_after_later,
            rto: holder.rto.as_secs_f64(),
            answering: self.answering(now, path),
            soonest,
            retries,
        })
    }
}

/// The resend model of one path's overdue requests (`Weave::holder_resend`).
#[derive(Debug, Clone, Copy)]
pub(super) struct HolderResend {
    /// Seconds since the epoch.
    now: f64,
    /// The path's clock, the modelled answer to its latest request (`None` while the set
    /// trial leaves it idle).
    clock: Option<Instant>,
    /// Seconds after sending a request that the path finds it lost once a later one is
    /// answered (its time threshold).
    found_after_later: f64,
    /// The path's RTO, seconds.
    rto: f64,
    /// The path has answers modelled to come (`Weave::answering`).
    answering: bool,
    /// Seconds until the soonest path's answer.
    soonest: f64,
    /// Seconds the resender's expected losses of the resend add; `None` if it loses
    /// everything.
    retries: Option<f64>,
}

impl HolderResend {
    /// When the answer to a request overdue on the path, modelled as `predicted`, comes if
    /// nothing is copied: the path finds it lost (RFC 9002 §6.1.2's time threshold after
    /// sending it, when a request sent after it is there to be answered; the RTO otherwise,
    /// `Resend::Stuck` once the threshold's moment passed with no answer due to pass it) and
    /// the soonest path asks again, as many times more as it loses the resend on average.
    pub(super) fn lands(&self, predicted: &Prediction) -> Resend {
        // The path's clock is past this request's answer once a request went out after it.
        let sent_after = self.clock.is_some_and(|c| c > predicted.at);
        let found_after = if sent_after { self.found_after_later } else { self.rto };
        let Some(retries) = self.retries else {
            return Resend::Never;
        };
        let sent = predicted.sent.since_epoch().as_secs_f64();
        let until_found = sent + found_after - self.now;
        // Past the moment the threshold would have found it lost, and not found: no answer to
        // a later request has come to pass it. One will if the path still has answers
        // modelled to come (its latest request's is not due yet), and then finds it at once;
        // if every answer the path waits for is overdue, none is due to pass it, and only the
        // RTO finds it (random world 7268: a request lost in the origin's queue held the
        // reorder buffer 1.4 s while the copy rules counted on a resend at once).
        if until_found > 0.0 || self.answering {
            return Resend::Lands(until_found.max(0.0) + self.soonest + retries);
        }
        // The RTO fires an RTO after the request was sent, or, rearmed by answers since, up
        // to an RTO from now.
        let until_rto = sent + self.rto - self.now;
        Resend::Stuck((if until_rto > 0.0 { until_rto } else { self.rto }) + self.soonest + retries)
    }
}
