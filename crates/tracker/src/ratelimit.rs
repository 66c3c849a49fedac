//! Per-source rate limits: a token bucket (Turner, "New directions in communications (or which
//! way to the information age?)", IEEE Communications Magazine, 1986) per source address and
//! class of request, in a bounded table; a request over its limit is answered 429 with
//! `Retry-After` (RFC 6585 §4, RFC 9110 §10.2.3).

use crate::error::ApiError;
use crate::metrics::Refusals;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One limit: a sustained rate and a burst. A rate of 0 turns the limit off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    /// Requests per second, sustained.
    pub per_second: u32,
    /// Requests allowed at once after a quiet spell (the bucket's size); at least 1.
    pub burst: u32,
}

impl Rate {
    /// No limit.
    pub const OFF: Rate = Rate {
        per_second: 0,
        burst: 0,
    };

    fn is_off(self) -> bool {
        self.per_second == 0
    }
}

/// The per-source limits of a tracker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimits {
    /// `GET`/`HEAD` on `/v1/...`: server lookups and manifest reads, which clients make.
    pub lookups: Rate,
    /// Every other method on `/v1/...`: what devices (and operators) send.
    pub writes: Rate,
    /// Most sources tracked at once; beyond it the sources whose buckets have refilled are
    /// forgotten (then, if none has, an arbitrary one).
    pub max_sources: usize,
}

impl Default for RateLimits {
    fn default() -> RateLimits {
        RateLimits {
            // A fetch makes a handful of lookups and one manifest read, and re-looks up at most
            // once a second while paths fail; 200/s (burst 1,000) lets hundreds of clients share
            // one address (a NAT) while a flood from one address gets 429s after its burst.
            lookups: Rate {
                per_second: 200,
                burst: 1000,
            },
            // A device sends ~3 requests per heartbeat interval (10 s by default) and a burst of
            // register + announce + manifests at start; 50/s (burst 500) serves a NAT with many
            // devices or an origin publishing hundreds of manifests.
            writes: Rate {
                per_second: 50,
                burst: 500,
            },
            // Each entry is ~64 bytes: 65,536 sources are ~4 MiB per class.
            max_sources: 65_536,
        }
    }
}

impl RateLimits {
    /// No limits at all (benchmarks, or a tracker behind a proxy that limits).
    pub const OFF: RateLimits = RateLimits {
        lookups: Rate::OFF,
        writes: Rate::OFF,
        max_sources: 1,
    };

    pub(crate) fn validate(&self) -> anyhow::Result<()> {
        for (name, rate) in [("lookups", self.lookups), ("writes", self.writes)] {
            anyhow::ensure!(
                rate.is_off() || rate.burst >= 1,
                "rate limit for {name}: a burst of at least 1 is needed with a rate of {}/s",
                rate.per_second
            );
        }
        anyhow::ensure!(self.max_sources >= 1, "rate limits: max_sources must be at least 1");
        Ok(())
    }
}

/// Who a bucket belongs to: an IPv4 address, or an IPv6 /64 (one subscriber's prefix, RFC 6177),
/// since a host can pick any address in its /64.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Source {
    V4(u32),
    V6Prefix(u64),
}

impl Source {
    fn of(ip: IpAddr) -> Source {
        match ip {
            IpAddr::V4(v4) => Source::V4(v4.into()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Source::V4(v4.into()),
                None => Source::V6Prefix((u128::from(v6) >> 64) as u64),
            },
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// The buckets of one class of requests.
pub(crate) struct Limiter {
    rate: Rate,
    max_sources: usize,
    buckets: Mutex<HashMap<Source, Bucket>>,
}

impl Limiter {
    fn new(rate: Rate, max_sources: usize) -> Limiter {
        Limiter {
            rate,
            max_sources,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes a token for `ip` at `now`: `Ok`, or how long until the next token.
    fn take(&self, ip: IpAddr, now: Instant) -> Result<(), Duration> {
        if self.rate.is_off() {
            return Ok(());
        }
        let rate = f64::from(self.rate.per_second);
        let burst = f64::from(self.rate.burst);
        let source = Source::of(ip);
        let mut buckets = self.buckets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !buckets.contains_key(&source) && buckets.len() >= self.max_sources {
            // Forget the sources that have been quiet long enough to be full again: they lose
            // nothing. O(table) but only when the table is full, so at most once per
            // `max_sources` new sources.
            buckets.retain(|_, bucket| bucket.tokens + now.duration_since(bucket.updated).as_secs_f64() * rate < burst);
            if buckets.len() >= self.max_sources {
                let any = *buckets.keys().next().expect("the table is full");
                buckets.remove(&any);
            }
        }
        let bucket = buckets.entry(source).or_insert(Bucket {
            tokens: burst,
            updated: now,
        });
        let refilled = now.saturating_duration_since(bucket.updated).as_secs_f64() * rate;
        bucket.tokens = (bucket.tokens + refilled).min(burst);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / rate))
        }
    }

    #[cfg(test)]
    fn sources(&self) -> usize {
        self.buckets.lock().unwrap().len()
    }
}

/// The classes of requests, each with its own limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Lookup,
    Write,
}

impl Class {
    /// Only `/v1/...` routes are limited: the operations routes (`/health`, `/metrics`,
    /// `/openapi.json`) and unknown paths cost no store work.
    fn of(method: &Method, route: Option<&str>) -> Option<Class> {
        let route = route?;
        if !route.starts_with("/v1/") {
            return None;
        }
        // Reports come from clients, as lookups do, and cost a store write each like them.
        Some(
            if method == Method::GET || method == Method::HEAD || route == "/v1/reports" {
                Class::Lookup
            } else {
                Class::Write
            },
        )
    }

    fn name(self) -> &'static str {
        match self {
            Class::Lookup => "lookup",
            Class::Write => "write",
        }
    }
}

/// The limiters of a tracker and where to count refusals.
pub(crate) struct RateLimiter {
    lookups: Limiter,
    writes: Limiter,
    refusals: Refusals,
}

impl RateLimiter {
    pub fn new(limits: RateLimits, refusals: Refusals) -> RateLimiter {
        RateLimiter {
            lookups: Limiter::new(limits.lookups, limits.max_sources),
            writes: Limiter::new(limits.writes, limits.max_sources),
            refusals,
        }
    }
}

/// The middleware: a request over its source's limit is answered 429 before any other work.
pub(crate) async fn limit(State(limiter): State<Arc<RateLimiter>>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_owned());
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip());
    let (Some(class), Some(peer)) = (Class::of(request.method(), route.as_deref()), peer) else {
        return next.run(request).await;
    };
    let limiter_of_class = match class {
        Class::Lookup => &limiter.lookups,
        Class::Write => &limiter.writes,
    };
    match limiter_of_class.take(peer, Instant::now()) {
        Ok(()) => next.run(request).await,
        Err(wait) => {
            limiter.refusals.count(
                class.name(),
                route.as_deref().unwrap_or("unmatched"),
                request.method().as_str(),
            );
            let seconds = wait.as_secs_f64().ceil().max(1.0) as u64;
            let mut response = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!(
                    "too many {} requests from {peer}: at most {}/s (bursts of {}); retry in {seconds} s",
                    class.name(),
                    limiter_of_class.rate.per_second,
                    limiter_of_class.rate.burst
                ),
            )
            .into_response();
            response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(seconds));
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let limiter = Limiter::new(
            Rate {
                per_second: 10,
                burst: 5,
            },
            16,
        );
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let start = Instant::now();
        for _ in 0..5 {
            limiter.take(ip, start).unwrap();
        }
        let wait = limiter.take(ip, start).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        // 100 ms later one token is back, and only one.
        let later = start + Duration::from_millis(100);
        limiter.take(ip, later).unwrap();
        assert!(limiter.take(ip, later).is_err());
        // Another source has its own bucket.
        limiter.take("192.0.2.2".parse().unwrap(), later).unwrap();
    }

    #[test]
    fn ipv6_sources_are_their_64_prefix_and_mapped_v4_is_v4() {
        assert_eq!(
            Source::of("2001:db8:1:2::1".parse().unwrap()),
            Source::of("2001:db8:1:2:ffff::9".parse().unwrap())
        );
        assert_ne!(
            Source::of("2001:db8:1:2::1".parse().unwrap()),
            Source::of("2001:db8:1:3::1".parse().unwrap())
        );
        assert_eq!(
            Source::of("::ffff:192.0.2.1".parse().unwrap()),
            Source::of("192.0.2.1".parse().unwrap())
        );
    }

    #[test]
    fn the_table_stays_bounded_and_forgets_quiet_sources_first() {
        let limiter = Limiter::new(
            Rate {
                per_second: 1,
                burst: 2,
            },
            100,
        );
        let start = Instant::now();
        let busy: IpAddr = "198.51.100.1".parse().unwrap();
        limiter.take(busy, start).unwrap();
        limiter.take(busy, start).unwrap();
        for i in 0..10_000u32 {
            let ip = IpAddr::V4((0x0a00_0000 + i).into());
            limiter.take(ip, start + Duration::from_secs(10)).unwrap();
            assert!(limiter.sources() <= 100);
        }
        // The busy source was quiet for 10 s: its bucket refilled and may be forgotten, which
        // gives it nothing it would not have had.
        limiter.take(busy, start + Duration::from_secs(10)).unwrap();
    }

    #[test]
    fn only_v1_routes_are_limited() {
        assert_eq!(
            Class::of(&Method::GET, Some("/v1/contents/{cid}/servers")),
            Some(Class::Lookup)
        );
        assert_eq!(Class::of(&Method::POST, Some("/v1/devices")), Some(Class::Write));
        assert_eq!(Class::of(&Method::POST, Some("/v1/reports")), Some(Class::Lookup));
        assert_eq!(
            Class::of(&Method::from_bytes(b"BREW").unwrap(), Some("/v1/devices")),
            Some(Class::Write)
        );
        assert_eq!(Class::of(&Method::GET, Some("/health")), None);
        assert_eq!(Class::of(&Method::GET, None), None);
    }
}
