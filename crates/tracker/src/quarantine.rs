//! Smart-ban quarantine: devices that several distinct clients reported for corrupt data are left out of lookups.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::Duration;

/// When reports quarantine a device.
#[derive(Clone, Debug)]
pub struct QuarantineConfig {
    /// Distinct client source addresses whose reports quarantine a device. Default 3: one or two
    /// clients with a bad link or a bug (or lying) cannot take a device out; three independent
    /// corrupt-data bans are unlikely unless the device serves corrupt data.
    pub reporters: u64,
    /// Reports older than this are forgotten, and a quarantine without new reports ends after it.
    /// Default 1 h: long enough to gather reports from the viewers of one evening's session,
    /// short enough that a device whose disk was repaired serves again the same evening.
    pub window: Duration,
    /// At most this many reporters are kept per device (the newest). Default 64: far above
    /// `reporters`, so the bound never hides a quarantine, and it bounds what one device costs.
    pub max_reporters: usize,
}

impl Default for QuarantineConfig {
    fn default() -> QuarantineConfig {
        QuarantineConfig {
            reporters: 3,
            window: Duration::from_secs(3600),
            max_reporters: 64,
        }
    }
}

impl QuarantineConfig {
    pub(crate) fn validate(&self) -> anyhow::Result<()> {
        if self.reporters == 0 {
            anyhow::bail!("quarantine reporters is 0: at least one report must be needed");
        }
        if self.max_reporters < usize::try_from(self.reporters).unwrap_or(usize::MAX) {
            anyhow::bail!(
                "quarantine max_reporters {} is below reporters {}: no device could be quarantined",
                self.max_reporters,
                self.reporters
            );
        }
        if self.window < Duration::from_secs(1) {
            anyhow::bail!("quarantine window {:?} must be at least 1 s", self.window);
        }
        Ok(())
    }
}

/// The quarantined devices this instance knows of: id → (distinct reporters, end in Unix ms).
/// Filled by reports this instance receives and refreshed from the store by the sweeper, so
/// that instances sharing a Redis store agree within one sweep interval; lookups read only this.
#[derive(Debug, Default)]
pub(crate) struct Quarantined {
    devices: RwLock<HashMap<String, (u64, u64)>>,
}

impl Quarantined {
    pub fn insert(&self, id: &str, reporters: u64, until_ms: u64) {
        let mut devices = self.devices.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        devices.insert(id.to_owned(), (reporters, until_ms));
    }

    pub fn remove(&self, id: &str) {
        let mut devices = self.devices.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        devices.remove(id);
    }

    /// Replaces the whole set (from the store).
    pub fn replace(&self, list: Vec<(String, u64, u64)>) {
        let mut devices = self.devices.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        *devices = list.into_iter().map(|(id, n, until)| (id, (n, until))).collect();
    }

    pub fn contains(&self, id: &str, now_ms: u64) -> bool {
        let devices = self.devices.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        devices.get(id).is_some_and(|&(_, until)| until > now_ms)
    }

    /// Whether any device is quarantined (lookups skip filtering when none is).
    pub fn is_empty(&self) -> bool {
        self.devices
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_empty()
    }

    /// The quarantined devices at `now_ms`: (id, reporters, until), ordered by id.
    pub fn list(&self, now_ms: u64) -> Vec<(String, u64, u64)> {
        let devices = self.devices.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut list: Vec<_> = devices
            .iter()
            .filter(|(_, (_, until))| *until > now_ms)
            .map(|(id, &(n, until))| (id.clone(), n, until))
            .collect();
        list.sort();
        list
    }
}

/// The quarantine of a device whose report times (newest first) are `times`: its end (Unix ms)
/// if at least `config.reporters` distinct clients reported it within the window.
pub(crate) fn quarantined_until(config: &QuarantineConfig, times: &[u64]) -> Option<u64> {
    let kth = usize::try_from(config.reporters).ok()?.checked_sub(1)?;
    // It lasts until the k-th newest report leaves the window: then fewer than k remain.
    times
        .get(kth)
        .map(|at| at.saturating_add(crate::store::ttl_millis(config.window)))
}

/// Refreshes `state.quarantined` from the store's reports (other instances' included).
pub(crate) async fn refresh<S: crate::store::Store>(state: &crate::api::AppState<S>, now_ms: u64) {
    let window_ms = crate::store::ttl_millis(state.quarantine.window);
    match state.store.reports(now_ms, window_ms).await {
        Ok(reports) => {
            let list: Vec<_> = reports
                .into_iter()
                .filter_map(|(id, times)| {
                    quarantined_until(&state.quarantine, &times).map(|until| (id, times.len() as u64, until))
                })
                .collect();
            state.metrics.set_quarantined(list.len() as u64);
            state.quarantined.replace(list);
        }
        Err(error) => tracing::warn!(%error, "reading smart-ban reports failed"),
    }
}

pub(crate) mod handlers {
    //! `POST /v1/reports`, `GET /v1/quarantine` and `POST /v1/quarantine/clear`.

    use super::quarantined_until;
    use crate::api::SharedState;
    use crate::auth::OperatorAuth;
    use crate::error::ApiError;
    use crate::extract::JsonBody;
    use crate::model;
    use crate::store::{Store, ttl_millis, unix_millis};
    use axum::Json;
    use axum::extract::{ConnectInfo, Extension, State};
    use axum::http::StatusCode;
    use serde::{Deserialize, Serialize};
    use std::net::SocketAddr;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(crate) struct Report {
        device: String,
        content: String,
        reason: String,
    }

    #[derive(Serialize)]
    pub(crate) struct Reported {
        device: String,
        /// Distinct clients that reported the device within the window.
        reporters: u64,
        quarantined: bool,
    }

    /// `POST /v1/reports`: a client banned `device` for corrupt data of `content` (smart ban).
    /// The client is its source address, so one client reporting many times counts once.
    pub(crate) async fn report<S: Store>(
        State(state): State<SharedState<S>>,
        ConnectInfo(peer): ConnectInfo<SocketAddr>,
        JsonBody(report): JsonBody<Report>,
    ) -> Result<Json<Reported>, ApiError> {
        model::check_device_id(&report.device).map_err(|error| ApiError::invalid_field("device", error))?;
        let content =
            model::parse_content_id(&report.content).map_err(|error| ApiError::invalid_field("content", error))?;
        if report.reason != "corrupt" {
            return Err(ApiError::invalid_field(
                "reason",
                format!("unknown reason {:?}: expected \"corrupt\"", report.reason),
            ));
        }
        let now = unix_millis();
        // Only a device a lookup of the content lists can have been banned by a client, so
        // reports of anything else are refused: the store keeps reports for listed devices
        // only, not for whatever ids a source makes up.
        let found = state.store.lookup(content, model::MAX_LOOKUP_N, 0, now).await?;
        if !found
            .servers
            .iter()
            .chain(&found.origins)
            .any(|d| d.registration.id == report.device)
        {
            return Err(ApiError::new(
                axum::http::StatusCode::NOT_FOUND,
                "unknown_holder",
                format!(
                    "device {:?} is not a live holder of content {}: only a device a lookup lists can be reported",
                    report.device, report.content
                ),
            ));
        }
        let config = &state.quarantine;
        let reporter = peer.ip().to_canonical().to_string();
        let times = state
            .store
            .report(
                &report.device,
                &reporter,
                now,
                ttl_millis(config.window),
                config.max_reporters,
            )
            .await?;
        state.metrics.count_report();
        let until = quarantined_until(config, &times);
        if let Some(until) = until {
            if !state.quarantined.contains(&report.device, now) {
                tracing::warn!(device = %report.device, reporters = times.len(), "device quarantined: reported for corrupt data by distinct clients");
            }
            state.quarantined.insert(&report.device, times.len() as u64, until);
            state.metrics.set_quarantined(state.quarantined.list(now).len() as u64);
        }
        Ok(Json(Reported {
            device: report.device,
            reporters: times.len() as u64,
            quarantined: until.is_some(),
        }))
    }

    #[derive(Serialize)]
    pub(crate) struct QuarantinedDevice {
        id: String,
        reporters: u64,
        until_ms: u64,
    }

    #[derive(Serialize)]
    pub(crate) struct QuarantineList {
        reporters_needed: u64,
        window_secs: u64,
        devices: Vec<QuarantinedDevice>,
    }

    /// `GET /v1/quarantine`: the quarantined devices, as the store's reports say now.
    pub(crate) async fn list<S: Store>(State(state): State<SharedState<S>>) -> Result<Json<QuarantineList>, ApiError> {
        let now = unix_millis();
        super::refresh(&state, now).await;
        Ok(Json(QuarantineList {
            reporters_needed: state.quarantine.reporters,
            window_secs: state.quarantine.window.as_secs(),
            devices: state
                .quarantined
                .list(now)
                .into_iter()
                .map(|(id, reporters, until_ms)| QuarantinedDevice {
                    id,
                    reporters,
                    until_ms,
                })
                .collect(),
        }))
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(crate) struct Clear {
        id: String,
    }

    #[derive(Serialize)]
    pub(crate) struct Cleared {
        id: String,
        /// Whether the device had reports (they are all forgotten).
        cleared: bool,
    }

    /// `POST /v1/quarantine/clear` (operator): forgets every report of the device, ending its
    /// quarantine on this instance at once and on the others at their next refresh.
    pub(crate) async fn clear<S: Store>(
        State(state): State<SharedState<S>>,
        Extension(_operator): Extension<OperatorAuth>,
        JsonBody(request): JsonBody<Clear>,
    ) -> Result<(StatusCode, Json<Cleared>), ApiError> {
        model::check_device_id(&request.id).map_err(|error| ApiError::invalid_field("id", error))?;
        let cleared = state.store.clear_reports(&request.id).await?;
        state.quarantined.remove(&request.id);
        state
            .metrics
            .set_quarantined(state.quarantined.list(unix_millis()).len() as u64);
        tracing::info!(device = %request.id, cleared, "quarantine cleared by the operator");
        Ok((
            StatusCode::OK,
            Json(Cleared {
                id: request.id,
                cleared,
            }),
        ))
    }
}
