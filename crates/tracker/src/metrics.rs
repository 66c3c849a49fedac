//! The tracker's Prometheus metrics (`GET /metrics`, OpenMetrics text format).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use std::time::Duration;

/// The `method` label: the standard methods (RFC 9110 §9, and PATCH, RFC 5789) as sent, any other
/// as `other`, so that made-up methods cannot grow the label sets without bound.
fn method_label(method: &str) -> &'static str {
    match method {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "CONNECT" => "CONNECT",
        "OPTIONS" => "OPTIONS",
        "TRACE" => "TRACE",
        "PATCH" => "PATCH",
        _ => "other",
    }
}

/// Connection counts, shared by the accept loop and every connection task.
#[derive(Clone, Default)]
pub(crate) struct ConnectionMetrics {
    open: Gauge,
    evicted: Counter,
}

impl ConnectionMetrics {
    pub fn opened(&self) {
        self.open.inc();
    }

    pub fn closed(&self) {
        self.open.dec();
    }

    pub fn evicted(&self) {
        self.evicted.inc();
    }
}

/// Counts the requests the rate limits refuse (in both the class counter and the requests one).
#[derive(Clone)]
pub(crate) struct Refusals {
    requests: Family<RequestLabels, Counter>,
    rate_limited: Family<LimitedLabels, Counter>,
}

impl Refusals {
    pub fn count(&self, class: &'static str, route: &str, method: &str) {
        self.rate_limited.get_or_create(&LimitedLabels { class }).inc();
        self.requests
            .get_or_create(&RequestLabels {
                route: route.to_owned(),
                method: method_label(method),
                status: 429,
            })
            .inc();
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitedLabels {
    /// `lookup` or `write` (`ratelimit::Class`).
    class: &'static str,
}

/// Contents whose rates `/metrics` exports: the most looked-up ten, so the `content` label
/// takes at most ten values at a time whatever clients look up.
pub(crate) const TOP_CONTENTS: usize = 10;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ContentLabels {
    /// A content id (hex), one of the `TOP_CONTENTS` most looked up at the last scrape.
    content: String,
}

type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// The content type of `encode`'s output.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    /// The route's path template (`/v1/devices/{id}/heartbeat`), or `unmatched`.
    route: String,
    /// A standard method, or `other` (`method_label`).
    method: &'static str,
    status: u16,
}

/// Every metric the tracker exports, registered under the `pcdn_tracker_` prefix.
pub(crate) struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    lookup_seconds: Histogram,
    lookup_records: Counter,
    live_devices: Gauge,
    registrations: Counter,
    expirations: Counter,
    connections: ConnectionMetrics,
    rate_limited: Family<LimitedLabels, Counter>,
    content_lookups: Family<ContentLabels, FloatGauge>,
    content_demand: Family<ContentLabels, FloatGauge>,
    untallied_lookups: Counter,
    placement_rounds: Counter,
    placement_moves: Counter,
    placed_devices: Gauge,
    quarantined_devices: Gauge,
    reports: Counter,
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("pcdn_tracker");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "HTTP requests answered, by route, method and status",
            requests.clone(),
        );
        // 25 µs to ~0.8 s in factors of two: lookups are expected in the tens of microseconds.
        let lookup_seconds = Histogram::new(exponential_buckets(25e-6, 2.0, 16));
        registry.register_with_unit(
            "lookup_duration",
            "time to answer GET /v1/contents/{cid}/servers",
            Unit::Seconds,
            lookup_seconds.clone(),
        );
        let lookup_records = Counter::default();
        registry.register(
            "lookup_records",
            "device records lookups read (at most n + the lookup slack each, whatever the holders)",
            lookup_records.clone(),
        );
        let live_devices = Gauge::default();
        registry.register(
            "live_devices",
            "devices registered and not expired",
            live_devices.clone(),
        );
        let registrations = Counter::default();
        registry.register("registrations", "device registrations accepted", registrations.clone());
        let expirations = Counter::default();
        registry.register(
            "expirations",
            "devices deleted because their ttl ran out without a heartbeat",
            expirations.clone(),
        );
        let connections = ConnectionMetrics::default();
        registry.register("connections", "HTTP connections open", connections.open.clone());
        registry.register(
            "connections_evicted",
            "connections closed to admit a new one at the connection cap (or when out of file descriptors)",
            connections.evicted.clone(),
        );
        let rate_limited = Family::<LimitedLabels, Counter>::default();
        registry.register(
            "rate_limited",
            "requests refused with 429 by the per-source rate limits, by class (lookup or write)",
            rate_limited.clone(),
        );
        let content_lookups = Family::<ContentLabels, FloatGauge>::default();
        registry.register(
            "content_lookups_per_second",
            "decayed lookup rate of the 10 most looked-up contents (only those: the label set is bounded)",
            content_lookups.clone(),
        );
        let content_demand = Family::<ContentLabels, FloatGauge>::default();
        registry.register(
            "content_demand_bits_per_second",
            "upload the 10 most looked-up contents' viewers need: lookups/s x size x 8",
            content_demand.clone(),
        );
        let untallied_lookups = Counter::default();
        registry.register(
            "untallied_lookups",
            "lookups not counted for popularity because too many contents were pending between two flushes",
            untallied_lookups.clone(),
        );
        let placement_rounds = Counter::default();
        registry.register(
            "placement_rounds",
            "placement rounds this instance ran",
            placement_rounds.clone(),
        );
        let placement_moves = Counter::default();
        registry.register(
            "placement_moves",
            "(device, content) assignments added or removed by placement rounds",
            placement_moves.clone(),
        );
        let placed_devices = Gauge::default();
        registry.register(
            "placed_devices",
            "devices given an assignment by this instance's last placement round",
            placed_devices.clone(),
        );
        let quarantined_devices = Gauge::default();
        registry.register(
            "quarantined_devices",
            "devices left out of lookups because distinct clients reported them for corrupt data",
            quarantined_devices.clone(),
        );
        let reports = Counter::default();
        registry.register(
            "reports",
            "corrupt-data reports (POST /v1/reports) accepted",
            reports.clone(),
        );
        Metrics {
            quarantined_devices,
            reports,
            content_lookups,
            content_demand,
            untallied_lookups,
            placement_rounds,
            placement_moves,
            placed_devices,
            registry,
            requests,
            lookup_seconds,
            lookup_records,
            live_devices,
            registrations,
            expirations,
            connections,
            rate_limited,
        }
    }

    pub fn count_request(&self, route: &str, method: &str, status: u16) {
        self.requests
            .get_or_create(&RequestLabels {
                route: route.to_owned(),
                method: method_label(method),
                status,
            })
            .inc();
    }

    /// The connection counters the HTTP front updates.
    pub fn connections(&self) -> ConnectionMetrics {
        self.connections.clone()
    }

    /// Where the rate limits count what they refuse.
    pub fn refusals(&self) -> Refusals {
        Refusals {
            requests: self.requests.clone(),
            rate_limited: self.rate_limited.clone(),
        }
    }

    pub fn observe_lookup(&self, elapsed: Duration, records_read: usize) {
        self.lookup_seconds.observe(elapsed.as_secs_f64());
        self.lookup_records.inc_by(records_read as u64);
    }

    pub fn set_live_devices(&self, live: u64) {
        self.live_devices.set(i64::try_from(live).unwrap_or(i64::MAX));
    }

    pub fn count_registration(&self) {
        self.registrations.inc();
    }

    pub fn count_expirations(&self, expired: u64) {
        self.expirations.inc_by(expired);
    }

    /// Replaces the per-content gauges with these contents' (at most `TOP_CONTENTS`).
    pub fn set_popular(&self, popular: &[crate::placement::Popular]) {
        self.content_lookups.clear();
        self.content_demand.clear();
        for entry in popular.iter().take(TOP_CONTENTS) {
            let labels = ContentLabels {
                content: hex::encode(entry.content.0),
            };
            self.content_lookups.get_or_create(&labels).set(entry.lookups_per_s);
            if let Some(demand) = entry.demand_bps() {
                self.content_demand.get_or_create(&labels).set(demand);
            }
        }
    }

    pub fn set_quarantined(&self, devices: u64) {
        self.quarantined_devices.set(i64::try_from(devices).unwrap_or(i64::MAX));
    }

    pub fn count_report(&self) {
        self.reports.inc();
    }

    pub fn count_untallied_lookup(&self) {
        self.untallied_lookups.inc();
    }

    pub fn count_placement(&self, moves: usize, devices: usize) {
        self.placement_rounds.inc();
        self.placement_moves.inc_by(moves as u64);
        self.placed_devices.set(i64::try_from(devices).unwrap_or(i64::MAX));
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        text
    }
}
