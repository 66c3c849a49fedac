//! A serving device's presence at its tracker (docs/net.md): registration, heartbeats,
//! announcements and an origin's manifests, retried with backoff through tracker outages, and
//! registered again when the tracker's record of the device changed without it.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use pcdn_core::wire::ContentId;
use tokio::sync::watch;

use crate::cache::Cache;
use crate::metrics::ServerMetrics;
use crate::store::{Store, content_id_hex};
use crate::tracker_client::{Heartbeat, Registration, TrackerClient, TrackerError};

/// How often the tracker task looks for contents added to the store.
const STORE_RESCAN: Duration = Duration::from_secs(2);
/// Tracker retry backoff: first wait and cap. A registered device caps it at its heartbeat
/// interval instead: retrying at the heartbeat rate costs a recovering tracker no more than its
/// devices' normal heartbeats, and brings every device back within one interval of the restart.
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How long a shutdown waits for the tracker to acknowledge the deregistration.
const DEREGISTER_TIMEOUT: Duration = Duration::from_secs(2);

/// Exponential backoff between tracker retries.
struct Backoff {
    next: Duration,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff { next: BACKOFF_FIRST }
    }
    fn reset(&mut self) {
        self.next = BACKOFF_FIRST;
    }
    /// The wait before the next retry, never above `cap`; the one after doubles.
    fn next_wait(&mut self, cap: Duration) -> Duration {
        let wait = self.next.min(cap);
        self.next = (self.next * 2).min(BACKOFF_MAX);
        wait
    }
}

/// The device's presence at the tracker: registration, heartbeats, announcements and, for an
/// origin, its manifests. It keeps trying through tracker outages and re-registers when the
/// tracker has forgotten the device.
pub(super) struct TrackerPresence {
    pub(super) client: TrackerClient,
    pub(super) registration: Registration,
    pub(super) store: Store,
    pub(super) metrics: Arc<ServerMetrics>,
    /// Each registration's rendezvous grant, for the NAT-traversal task.
    pub(super) grants: watch::Sender<crate::rendezvous::GrantUpdate>,
    /// Set by the NAT-traversal task when the tracker no longer knows the device's token.
    pub(super) reregister: Arc<std::sync::atomic::AtomicBool>,
    /// With `--cache-size`: its disk figures go into heartbeats, the assignment comes back.
    pub(super) cache: Option<Arc<Cache>>,
}

/// The tracker refused this device for good: its credential (401: expired, another operator's,
/// tampered, a clock far off), its rights (403: revoked, wrong role) or its registration (400:
/// an address clients cannot reach). Retrying would get the same answer, so `pcdn serve` ends
/// with exit status 2 and this message, which says what to fix.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TrackerRefused(String);

impl TrackerRefused {
    /// The refusal `error` stands for, if it is one that retrying cannot change.
    fn of(error: &TrackerError, registering: bool) -> Option<TrackerRefused> {
        let TrackerError::Status {
            status, code, message, ..
        } = error
        else {
            return None;
        };
        let fix = match (*status, code.as_str()) {
            // Another request's nonce, never this device's: a fresh signature passes.
            (401, "replayed_request") => return None,
            (401, "stale_timestamp") => "Set this device's clock (NTP), then start it again.",
            (401, "expired_credential") => {
                "Ask the operator for a new credential (`pcdn operator enroll DIR --id ID --role ROLE -o FILE`)."
            }
            (401, _) => {
                "Use a credential enrolled by the operator whose key this tracker trusts (`pcdn tracker \
                 --operator-key`), unmodified, or point --tracker at that operator's tracker."
            }
            (403, "revoked") => {
                "Ask the operator for a new credential (`pcdn operator enroll DIR --id ID --role ROLE -o FILE`)."
            }
            (403, _) => "Ask the operator for a credential with the id and role this device needs.",
            (400, _) if registering => {
                "Fix the address this device advertises (--advertise HOST:PORT, or --listen): clients \
                 must be able to reach it."
            }
            _ => return None,
        };
        let what = if *status == 400 { "registration" } else { "credential" };
        let code = if code.is_empty() { "" } else { code.as_str() };
        Some(TrackerRefused(format!(
            "the tracker refused this device's {what}: {message} (HTTP {status} {code}). {fix}"
        )))
    }
}

/// What the presence task knows of its standing at the tracker.
struct Standing {
    registered: bool,
    /// The generation the tracker gave this device's registration.
    generation: u64,
    heartbeat_every: Duration,
    next_heartbeat: tokio::time::Instant,
    announced: Option<Vec<ContentId>>,
    manifests_sent: HashSet<ContentId>,
    /// When the last heartbeat went out, and the bytes sent by then (for its upload rate).
    last_beat: (std::time::Instant, u64),
}

/// Why the device must register again although the tracker answers.
#[derive(Debug, thiserror::Error)]
enum Forgotten {
    #[error("{0}")]
    Unknown(crate::tracker_client::TrackerError),
    #[error(
        "the tracker's record of this device has generation {found}, not {ours} as registered: it was \
         replaced without this device (another process registered with the same credential?)"
    )]
    Replaced { ours: u64, found: u64 },
}

impl TrackerPresence {
    /// Runs until `stop`, or until the tracker refuses the device for good (the error).
    pub(super) async fn run(self, mut stop: watch::Receiver<bool>) -> Result<(), TrackerRefused> {
        let mut backoff = Backoff::new();
        let mut forgotten_last = false;
        let mut standing = Standing {
            registered: false,
            generation: 0,
            heartbeat_every: Duration::from_secs(10),
            next_heartbeat: tokio::time::Instant::now(),
            announced: None,
            manifests_sent: HashSet::new(),
            last_beat: (std::time::Instant::now(), self.metrics.bytes_out.get()),
        };
        let id = self.registration.id.clone();
        loop {
            if *stop.borrow() {
                break;
            }
            let wait = match self.step(&mut standing).await {
                Err(e) if e.is::<TrackerRefused>() => {
                    self.metrics.tracker_errors.inc();
                    let refused = e.downcast::<TrackerRefused>().expect("checked by is");
                    tracing::error!(%id, "{refused}");
                    return Err(refused);
                }
                Ok(()) => {
                    backoff.reset();
                    forgotten_last = false;
                    STORE_RESCAN.min(
                        standing
                            .next_heartbeat
                            .saturating_duration_since(tokio::time::Instant::now()),
                    )
                }
                // The tracker answered that it forgot the device (it restarted without its
                // state, the device's ttl ran out during an outage) or that its record is
                // another registration's: it is reachable, so the outage's backoff is over and
                // the device registers at once. A second in a row backs off, so a tracker that
                // keeps forgetting (or two processes fighting over one id) is not hammered.
                Err(e) if e.is::<Forgotten>() && !forgotten_last => {
                    tracing::info!(%id, reason = %e, "registering again");
                    forgotten_last = true;
                    backoff.reset();
                    Duration::ZERO
                }
                Err(e) => {
                    self.metrics.tracker_errors.inc();
                    let cap = if standing.registered {
                        standing.heartbeat_every
                    } else {
                        BACKOFF_MAX
                    };
                    let wait = backoff.next_wait(cap);
                    tracing::warn!(error = %e, retry_in = ?wait, "tracker");
                    wait
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = stop.wait_for(|s| *s) => break,
            }
        }
        if standing.registered {
            match tokio::time::timeout(DEREGISTER_TIMEOUT, self.client.deregister(&id)).await {
                Ok(Ok(())) => tracing::info!(%id, "deregistered"),
                Ok(Err(e)) => tracing::warn!(error = %e, "deregistering"),
                Err(_) => tracing::warn!(
                    "deregistering: no answer from {} within {DEREGISTER_TIMEOUT:?}",
                    self.client.url()
                ),
            }
        }
        Ok(())
    }

    /// A failed device request: a 404 means the tracker forgot the device; a refusal that
    /// retrying cannot change ends the presence (`TrackerRefused`).
    fn refused(standing: &mut Standing, e: TrackerError) -> anyhow::Error {
        if let Some(refused) = TrackerRefused::of(&e, false) {
            refused.into()
        } else if e.is_not_found() {
            standing.registered = false;
            Forgotten::Unknown(e).into()
        } else {
            e.into()
        }
    }

    /// Registers if needed, announces a changed store, sends manifests and a due heartbeat.
    async fn step(&self, standing: &mut Standing) -> anyhow::Result<()> {
        let id = &self.registration.id;
        if self.reregister.swap(false, std::sync::atomic::Ordering::Relaxed) {
            standing.registered = false;
        }
        if !standing.registered {
            let answer = match self.client.register(&self.registration).await {
                Ok(answer) => answer,
                Err(e) => return Err(TrackerRefused::of(&e, true).map_or_else(|| e.into(), Into::into)),
            };
            standing.registered = true;
            standing.generation = answer.generation;
            self.grants
                .send_replace(answer.rendezvous.map(|g| (self.client.url().to_owned(), g)));
            standing.heartbeat_every = Duration::from_secs(answer.heartbeat_secs.max(1));
            standing.next_heartbeat = tokio::time::Instant::now() + standing.heartbeat_every;
            // A tracker that forgot the device forgot what it announced, and maybe its manifests.
            standing.announced = None;
            standing.manifests_sent.clear();
            tracing::info!(
                %id,
                tracker = self.client.url(),
                heartbeat = ?standing.heartbeat_every,
                generation = answer.generation,
                "registered"
            );
        }
        let contents = self.store.list()?;
        if standing.announced.as_ref() != Some(&contents) {
            if let Err(e) = self.client.announce(id, &contents).await {
                return Err(Self::refused(standing, e));
            }
            tracing::info!(contents = contents.len(), "announced");
            standing.announced = Some(contents.clone());
        }
        if self.registration.origin {
            let unsent: Vec<ContentId> = contents
                .iter()
                .filter(|c| !standing.manifests_sent.contains(c))
                .copied()
                .collect();
            for content in &unsent {
                let bytes = self.store.manifest_bytes(content)?;
                match self.client.put_manifest(content, bytes).await {
                    Ok(()) => {}
                    // The tracker judged this manifest; asking again would get the same answer.
                    Err(e) if matches!(e.status(), Some(400 | 403)) && e.code() != Some("revoked") => {
                        tracing::error!(error = %e, content = %content_id_hex(content), "manifest refused");
                    }
                    Err(e) => return Err(Self::refused(standing, e)),
                }
                standing.manifests_sent.insert(*content);
            }
        }
        if tokio::time::Instant::now() >= standing.next_heartbeat {
            let now = (std::time::Instant::now(), self.metrics.bytes_out.get());
            let last_beat = standing.last_beat;
            let seconds = now.0.duration_since(last_beat.0).as_secs_f64().max(1e-3);
            let disk = self.cache.as_ref().map(|c| c.disk());
            let heartbeat = Heartbeat {
                sessions: self.metrics.sessions.get().max(0) as u64,
                upload_bps: ((now.1 - last_beat.1) as f64 * 8.0 / seconds) as u64,
                healthy: true,
                cache_bytes: disk.map(|d| d.0),
                free_bytes: disk.map(|d| d.1),
            };
            let reply = match self.client.heartbeat(id, &heartbeat).await {
                Ok(reply) => reply,
                Err(e) => return Err(Self::refused(standing, e)),
            };
            standing.last_beat = now;
            standing.next_heartbeat = tokio::time::Instant::now() + standing.heartbeat_every;
            if reply.generation != standing.generation {
                standing.registered = false;
                return Err(Forgotten::Replaced {
                    ours: standing.generation,
                    found: reply.generation,
                }
                .into());
            }
            // No assignment (the tracker places nothing): the cache stays as it is.
            if let (Some(cache), Some(assignment)) = (&self.cache, reply.assignment) {
                cache.assign(Some(assignment));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap_and_resets() {
        let mut b = Backoff::new();
        let waits: Vec<Duration> = (0..9).map(|_| b.next_wait(BACKOFF_MAX)).collect();
        assert_eq!(waits[0], BACKOFF_FIRST);
        assert_eq!(waits[1], BACKOFF_FIRST * 2);
        assert_eq!(*waits.last().unwrap(), BACKOFF_MAX);
        assert!(waits.windows(2).all(|w| w[0] <= w[1]));
        b.reset();
        assert_eq!(b.next_wait(BACKOFF_MAX), BACKOFF_FIRST);
        // A registered device's cap is its heartbeat interval.
        b.reset();
        let waits: Vec<Duration> = (0..6).map(|_| b.next_wait(Duration::from_secs(1))).collect();
        assert_eq!(waits, [500, 1000, 1000, 1000, 1000, 1000].map(Duration::from_millis));
    }
}
