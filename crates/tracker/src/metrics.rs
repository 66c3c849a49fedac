//! The tracker's Prometheus metrics (`GET /metrics`, OpenMetrics text format).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use std::time::Duration;

/// The content type of `encode`'s output.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    /// The route's path template (`/v1/devices/{id}/heartbeat`), or `unmatched`.
    route: String,
    method: String,
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
        Metrics {
            registry,
            requests,
            lookup_seconds,
            lookup_records,
            live_devices,
            registrations,
            expirations,
        }
    }

    pub fn count_request(&self, route: &str, method: &str, status: u16) {
        self.requests
            .get_or_create(&RequestLabels {
                route: route.to_owned(),
                method: method.to_owned(),
                status,
            })
            .inc();
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

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        text
    }
}
