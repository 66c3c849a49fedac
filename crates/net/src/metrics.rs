//! The serving device's counters, shared between its tasks, and their Prometheus endpoint.

use std::net::SocketAddr;
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The label of a REJECT's reason.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: &'static str,
}

/// Everything a server counts. Counters only grow; the UDP loop is their one writer.
#[derive(Debug, Default)]
pub struct ServerMetrics {
    pub sessions: Gauge,
    pub sessions_opened: Counter,
    pub datagrams_in: Counter,
    pub bytes_in: Counter,
    pub datagrams_out: Counter,
    pub bytes_out: Counter,
    pub data_packets_out: Counter,
    /// REJECTs sent, by reason.
    pub rejects: Family<ReasonLabel, Counter>,
    /// Answers withheld: they would have sent an unvalidated address more than 3× what it sent.
    pub dropped: Counter,
    /// Upload rate over the last second, bit/s.
    pub upload_bps: Gauge,
    /// Steps of the tracker presence that failed (a tracker request, or listing the store).
    pub tracker_errors: Counter,
    /// Datagrams the kernel refused to send (dropped).
    pub send_errors: Counter,
}

/// A snapshot of a server's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ServerSnapshot {
    pub sessions: u64,
    pub sessions_opened: u64,
    pub datagrams_in: u64,
    pub bytes_in: u64,
    pub datagrams_out: u64,
    pub bytes_out: u64,
    pub data_packets_out: u64,
    pub rejects: u64,
    pub dropped: u64,
    pub upload_bps: u64,
}

/// The wire name of a REJECT reason code, for labels.
pub fn reason_name(code: u8) -> &'static str {
    use pcdn_core::wire::Reason;
    match Reason::from_code(code) {
        Some(Reason::UnknownContent) => "unknown_content",
        Some(Reason::Overloaded) => "overloaded",
        Some(Reason::BadToken) => "bad_token",
        Some(Reason::UnsupportedVersion) => "unsupported_version",
        Some(Reason::Malformed) => "malformed",
        Some(Reason::OutOfRange) => "out_of_range",
        Some(Reason::UnknownConnection) => "unknown_connection",
        None => "unknown",
    }
}

impl ServerMetrics {
    pub fn snapshot(&self) -> ServerSnapshot {
        let rejects = [1u8, 2, 3, 4, 5, 6, 7, 0]
            .iter()
            .map(|&code| {
                self.rejects
                    .get_or_create(&ReasonLabel {
                        reason: reason_name(code),
                    })
                    .get()
            })
            .sum();
        ServerSnapshot {
            sessions: self.sessions.get().max(0) as u64,
            sessions_opened: self.sessions_opened.get(),
            datagrams_in: self.datagrams_in.get(),
            bytes_in: self.bytes_in.get(),
            datagrams_out: self.datagrams_out.get(),
            bytes_out: self.bytes_out.get(),
            data_packets_out: self.data_packets_out.get(),
            rejects,
            dropped: self.dropped.get(),
            upload_bps: self.upload_bps.get().max(0) as u64,
        }
    }

    /// A registry exposing these metrics under `pcdn_server_*`, labelled with the device id.
    pub fn registry(self: &Arc<Self>, device: &str) -> Registry {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("pcdn_server").sub_registry_with_label((
            std::borrow::Cow::Borrowed("device"),
            std::borrow::Cow::Owned(device.to_owned()),
        ));
        registry.register("sessions", "Client sessions open", self.sessions.clone());
        registry.register(
            "sessions_opened",
            "Client sessions opened",
            self.sessions_opened.clone(),
        );
        registry.register("datagrams_in", "Datagrams received", self.datagrams_in.clone());
        registry.register("bytes_in", "Bytes received (UDP payload)", self.bytes_in.clone());
        registry.register("datagrams_out", "Datagrams sent", self.datagrams_out.clone());
        registry.register("bytes_out", "Bytes sent (UDP payload)", self.bytes_out.clone());
        registry.register("data_packets_out", "DATA packets sent", self.data_packets_out.clone());
        registry.register("rejects", "REJECT datagrams sent, by reason", self.rejects.clone());
        registry.register(
            "amplification_drops",
            "Answers withheld because they would exceed 3x the bytes an unvalidated address sent",
            self.dropped.clone(),
        );
        registry.register(
            "upload_bps",
            "Upload rate over the last second, bit/s",
            self.upload_bps.clone(),
        );
        registry.register(
            "tracker_errors",
            "Tracker requests that failed",
            self.tracker_errors.clone(),
        );
        root
    }
}

/// Serves `registry` as Prometheus text on `GET /metrics` at `listener` until `shutdown`.
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    registry: Registry,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::http::header::CONTENT_TYPE;
    let registry = Arc::new(registry);
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let registry = registry.clone();
            async move {
                let mut text = String::new();
                match prometheus_client::encoding::text::encode(&mut text, &registry) {
                    Ok(()) => (
                        axum::http::StatusCode::OK,
                        [(
                            CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        text,
                    ),
                    Err(e) => (
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                        [(CONTENT_TYPE, "text/plain; charset=utf-8")],
                        format!("cannot encode the metrics: {e}"),
                    ),
                }
            }
        }),
    );
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

/// Binds the metrics endpoint's listener.
pub async fn bind_metrics(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("--metrics-listen {addr}: {e}"))
}
