//! The HTTP API v1 (docs/tracker.md): the route table, the handlers and the router.

use crate::auth::{self, Access, AuthConfig, DeviceAuth, OperatorAuth};
use crate::error::ApiError;
use crate::extract::{ContentIdPath, DeviceIdPath, JsonBody, RawBody, ServerCount};
use crate::metrics::{self, Metrics};
use crate::model::{self, Load, Lookup, MAX_ANNOUNCED, MAX_LOOKUP_N, Registration, content_hex};
use crate::quarantine::handlers as quarantine;
use crate::store::{ManifestPut, Store, unix_millis};
use axum::extract::{DefaultBodyLimit, Extension, MatchedPath, Request, State};
use axum::handler::Handler;
use axum::http::header::CONTENT_TYPE;
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use axum::{Json, Router};
use pcdn_core::manifest::SignedManifest;
use pcdn_core::wire::ContentId;
use pcdn_identity::Role;
use pcdn_identity::ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// Largest request body: a signed manifest or a device's announced list.
pub(crate) const MAX_BODY_BYTES: usize = 16 << 20;

/// What every handler shares.
pub(crate) struct AppState<S> {
    pub store: S,
    pub rendezvous: Option<Arc<crate::rendezvous::Rendezvous>>,
    /// The operator key that must have signed every device credential and operator request.
    pub operator_key: VerifyingKey,
    pub auth: AuthConfig,
    pub ttl_secs: u64,
    pub heartbeat_secs: u64,
    pub metrics: Metrics,
    pub limits: crate::StoreLimits,
    /// Lookups counted since the last flush to the store (popularity).
    pub tally: crate::popularity::Tally,
    /// The popularity half-life, ms.
    pub half_life_ms: u64,
    /// Contents' sizes and bitrates, from their manifests.
    pub catalog: crate::placement::Catalog,
    pub placement: crate::placement::PlacementSettings,
    pub quarantine: crate::quarantine::QuarantineConfig,
    /// Devices left out of lookups because distinct clients reported them (smart ban).
    pub quarantined: crate::quarantine::Quarantined,
}

pub(crate) type SharedState<S> = Arc<AppState<S>>;

/// One route of the API: its path template, method and handler.
pub(crate) struct Route<S> {
    pub path: &'static str,
    pub method: Method,
    /// Who may call it; the router puts the matching authentication in front of the handler.
    pub access: Access,
    pub handler: MethodRouter<SharedState<S>>,
}

fn route<S: Store, H: Handler<T, SharedState<S>>, T: 'static>(
    path: &'static str,
    method: Method,
    access: Access,
    handler: H,
) -> Route<S> {
    let filter = MethodFilter::try_from(method.clone()).expect("the route table uses standard methods");
    Route {
        path,
        method,
        access,
        handler: on(filter, handler),
    }
}

/// Every route the router serves; the router is built from this list and nothing else, and the
/// OpenAPI test checks `/openapi.json` against it.
pub(crate) fn routes<S: Store>() -> Vec<Route<S>> {
    vec![
        route("/v1/devices", Method::POST, Access::Device, register::<S>),
        route(
            "/v1/devices/{id}/heartbeat",
            Method::POST,
            Access::Device,
            heartbeat::<S>,
        ),
        route("/v1/devices/{id}/contents", Method::PUT, Access::Device, announce::<S>),
        route("/v1/devices/{id}", Method::DELETE, Access::Device, remove::<S>),
        route(
            "/v1/contents/{cid}/manifest",
            Method::PUT,
            Access::Device,
            put_manifest::<S>,
        ),
        route(
            "/v1/contents/{cid}/manifest",
            Method::GET,
            Access::Public,
            get_manifest::<S>,
        ),
        route("/v1/contents/{cid}/servers", Method::GET, Access::Public, servers::<S>),
        route("/v1/contents/popular", Method::GET, Access::Public, popular::<S>),
        route("/v1/rendezvous", Method::GET, Access::Public, rendezvous_ports::<S>),
        route("/v1/revocations", Method::POST, Access::Operator, revoke::<S>),
        route("/v1/reports", Method::POST, Access::Public, quarantine::report::<S>),
        route("/v1/quarantine", Method::GET, Access::Public, quarantine::list::<S>),
        route(
            "/v1/quarantine/clear",
            Method::POST,
            Access::Operator,
            quarantine::clear::<S>,
        ),
        route("/health", Method::GET, Access::Public, health::<S>),
        route("/metrics", Method::GET, Access::Public, metrics_text::<S>),
        route("/openapi.json", Method::GET, Access::Public, openapi),
    ]
}

/// The tracker's router over `state`.
pub(crate) fn router<S: Store>(state: SharedState<S>) -> Router {
    let mut router = Router::new();
    for route in routes::<S>() {
        tracing::trace!(method = %route.method, path = route.path, "route");
        let handler = match route.access {
            Access::Public => route.handler,
            access => route.handler.route_layer(middleware::from_fn_with_state(
                (Arc::clone(&state), access),
                auth::require::<S>,
            )),
        };
        router = router.route(route.path, handler);
    }
    router
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(Arc::clone(&state), count_requests::<S>))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn count_requests<S: Store>(State(state): State<SharedState<S>>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = request.method().clone();
    let response = next.run(request).await;
    state
        .metrics
        .count_request(&route, method.as_str(), response.status().as_u16());
    response
}

async fn no_route(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no route for {method} {}: see GET /openapi.json", uri.path()),
    )
}

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{} does not accept {method}: see GET /openapi.json", uri.path()),
    )
}

#[derive(Deserialize)]
struct RegisterRequest {
    id: String,
    addr: String,
    #[serde(default)]
    origin: bool,
    upload_capacity_bps: u64,
    #[serde(default)]
    public_key: Option<String>,
}

impl RegisterRequest {
    fn validate(self) -> Result<Registration, ApiError> {
        model::check_device_id(&self.id).map_err(|error| ApiError::invalid_field("id", error))?;
        let addr: SocketAddr = self.addr.parse().map_err(|_| {
            ApiError::invalid_field(
                "addr",
                format!(
                    "expected an IP:port socket address such as 127.0.0.1:7801, got {:?}",
                    self.addr
                ),
            )
        })?;
        if let Some(reason) = model::unreachable_addr_reason(addr) {
            return Err(ApiError::invalid_field(
                "addr",
                format!(
                    "{addr} is not an address clients can reach ({reason}): expected a unicast IP \
                     (loopback, private or public) and a non-zero port"
                ),
            ));
        }
        let public_key = match &self.public_key {
            None => None,
            Some(text) => {
                let key =
                    model::parse_public_key(text).map_err(|error| ApiError::invalid_field("public_key", error))?;
                pcdn_core::ed25519_dalek::VerifyingKey::from_bytes(&key)
                    .map_err(|_| ApiError::invalid_field("public_key", "not a valid Ed25519 public key"))?;
                Some(key)
            }
        };
        if self.origin && public_key.is_none() {
            return Err(ApiError::invalid_field(
                "public_key",
                "required when `origin` is true: the key that signs the origin's manifests",
            ));
        }
        Ok(Registration {
            id: self.id,
            addr,
            origin: self.origin,
            upload_capacity_bps: self.upload_capacity_bps,
            public_key,
        })
    }
}

#[derive(Serialize)]
struct RegisterResponse {
    ttl_secs: u64,
    heartbeat_secs: u64,
    /// This registration's generation (`Store::register`); heartbeat answers repeat the
    /// record's, so the device sees when its record was replaced.
    generation: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    rendezvous: Option<crate::rendezvous::Grant>,
}

async fn register<S: Store>(
    State(state): State<SharedState<S>>,
    Extension(auth): Extension<DeviceAuth>,
    JsonBody(request): JsonBody<RegisterRequest>,
) -> Result<Json<RegisterResponse>, ApiError> {
    let registration = request.validate()?;
    auth.require_id(&registration.id)?;
    let claimed = if registration.origin { Role::Origin } else { Role::Edge };
    if claimed != auth.role {
        return Err(auth::wrong_role(
            &auth.id,
            auth.role,
            claimed,
            &format!("register with `origin: {}`", registration.origin),
        ));
    }
    let id = registration.id.clone();
    let rendezvous = state.rendezvous.as_ref().map(|r| r.grant(&registration));
    let generation = state.store.register(registration, unix_millis()).await?;
    state.metrics.count_registration();
    tracing::debug!(device = %id, generation, "registered");
    Ok(Json(RegisterResponse {
        ttl_secs: state.ttl_secs,
        heartbeat_secs: state.heartbeat_secs,
        generation,
        rendezvous,
    }))
}

#[derive(Deserialize)]
struct HeartbeatRequest {
    sessions: u32,
    upload_bps: u64,
    healthy: bool,
    /// The device's cache budget, bytes (a device that is a cache: `pcdn serve --cache-size`).
    #[serde(default)]
    cache_bytes: Option<u64>,
    /// Free bytes on the cache's file system.
    #[serde(default)]
    free_bytes: Option<u64>,
}

#[derive(Serialize)]
struct HeartbeatResponse {
    ttl_secs: u64,
    /// The generation of the device's record: another than its registration's means the
    /// record was replaced without it, and the device registers again.
    generation: u64,
    /// Every content the device should hold (hex); omitted when the tracker places nothing or
    /// has not placed this device yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    assignment: Option<Vec<String>>,
}

async fn heartbeat<S: Store>(
    State(state): State<SharedState<S>>,
    Extension(auth): Extension<DeviceAuth>,
    DeviceIdPath(id): DeviceIdPath,
    JsonBody(request): JsonBody<HeartbeatRequest>,
) -> Result<Json<HeartbeatResponse>, ApiError> {
    auth.require_id(&id)?;
    let disk = match (request.cache_bytes, request.free_bytes) {
        (Some(cache_bytes), free_bytes) => Some(crate::store::Disk {
            cache_bytes,
            free_bytes,
        }),
        (None, None) => None,
        (None, Some(_)) => {
            return Err(ApiError::invalid_field(
                "free_bytes",
                "given without `cache_bytes`: a device reports its free disk only with its cache size",
            ));
        }
    };
    let load = Load {
        sessions: request.sessions,
        upload_bps: request.upload_bps,
        healthy: request.healthy,
    };
    let now = unix_millis();
    let Some(generation) = state.store.heartbeat(&id, load, now).await? else {
        return Err(ApiError::unknown_device(&id));
    };
    if let Some(disk) = disk {
        state.store.set_disk(&id, disk, now).await?;
    }
    let places = pcdn_placement::policy(&state.placement.policy).is_some_and(|policy| policy.places());
    let assignment = if places {
        state
            .store
            .assignment(&id)
            .await?
            .map(|contents| contents.iter().map(content_hex).collect())
    } else {
        None
    };
    Ok(Json(HeartbeatResponse {
        ttl_secs: state.ttl_secs,
        generation,
        assignment,
    }))
}

#[derive(Deserialize)]
struct ContentsRequest {
    contents: Vec<String>,
}

#[derive(Serialize)]
struct ContentsResponse {
    announced: usize,
}

async fn announce<S: Store>(
    State(state): State<SharedState<S>>,
    Extension(auth): Extension<DeviceAuth>,
    DeviceIdPath(id): DeviceIdPath,
    JsonBody(request): JsonBody<ContentsRequest>,
) -> Result<Json<ContentsResponse>, ApiError> {
    auth.require_id(&id)?;
    if request.contents.len() > MAX_ANNOUNCED {
        return Err(ApiError::invalid_field(
            "contents",
            format!("at most {MAX_ANNOUNCED} content ids, got {}", request.contents.len()),
        ));
    }
    let contents = request
        .contents
        .iter()
        .enumerate()
        .map(|(index, text)| {
            model::parse_content_id(text).map_err(|error| ApiError::invalid_field(&format!("contents[{index}]"), error))
        })
        .collect::<Result<Vec<_>, _>>()?;
    match state.store.announce(&id, contents, unix_millis()).await? {
        Some(announced) => Ok(Json(ContentsResponse { announced })),
        None => Err(ApiError::unknown_device(&id)),
    }
}

async fn remove<S: Store>(
    State(state): State<SharedState<S>>,
    Extension(auth): Extension<DeviceAuth>,
    DeviceIdPath(id): DeviceIdPath,
) -> Result<StatusCode, ApiError> {
    auth.require_id(&id)?;
    if state.store.remove(&id, unix_millis()).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::unknown_device(&id))
    }
}

async fn put_manifest<S: Store>(
    State(state): State<SharedState<S>>,
    Extension(auth): Extension<DeviceAuth>,
    ContentIdPath(content): ContentIdPath,
    RawBody(bytes): RawBody,
) -> Result<StatusCode, ApiError> {
    auth.require_role(Role::Origin, "publish manifests")?;
    let invalid = |problem: String| ApiError::new(StatusCode::BAD_REQUEST, "invalid_manifest", problem);
    let limits = &state.limits;
    if bytes.len() > limits.max_manifest_bytes {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "manifest_too_large",
            format!(
                "the manifest is {} bytes; this tracker keeps manifests of at most {} bytes (a 10 GiB \
                 video in 64 KiB blocks): cut the content into larger blocks",
                bytes.len(),
                limits.max_manifest_bytes
            ),
        ));
    }
    let manifest = SignedManifest::decode(&bytes)
        .map_err(|error| invalid(format!("request body is not a signed manifest: {error}")))?;
    manifest
        .verify()
        .map_err(|error| invalid(format!("manifest signature check failed: {error}")))?;
    let actual = manifest.content_id();
    if actual != content {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "content_id_mismatch",
            format!(
                "the manifest's content id is {}, but the path parameter `cid` is {}",
                content_hex(&actual),
                content_hex(&content)
            ),
        ));
    }
    let registered = state.store.public_key(&auth.id, unix_millis()).await?;
    if registered != Some(manifest.signer) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "wrong_signer",
            format!(
                "the manifest is signed by {}, but origin {:?} registered {}: an origin publishes only manifests signed with the public_key it registered (register first)",
                hex::encode(manifest.signer),
                auth.id,
                registered.map_or_else(|| "no key (it is not registered)".to_owned(), hex::encode)
            ),
        ));
    }
    let size = bytes.len();
    match state
        .store
        .put_manifest(content, manifest.signer, bytes, unix_millis())
        .await?
    {
        ManifestPut::Stored => {
            state.catalog.remember(content, &manifest.manifest);
            Ok(StatusCode::NO_CONTENT)
        }
        ManifestPut::SignerConflict { stored } => Err(ApiError::new(
            StatusCode::CONFLICT,
            "manifest_conflict",
            format!(
                "content {} already has a manifest signed by {}: only that key may replace it",
                content_hex(&content),
                hex::encode(stored)
            ),
        )),
        ManifestPut::OverQuota { count, bytes } => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "manifest_quota_exceeded",
            format!(
                "the origin key {} keeps {count} other manifests of {bytes} bytes in all; with this one \
                 of {size} bytes it would pass its quota of {} manifests or {} bytes: remove contents \
                 no device holds any more (they are deleted once orphaned) or raise the quota",
                hex::encode(manifest.signer),
                limits.manifests_per_origin,
                limits.manifest_bytes_per_origin
            ),
        )),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RevokeRequest {
    id: String,
}

#[derive(Serialize)]
struct RevokeResponse {
    id: String,
    /// Credentials of the id issued before this instant (Unix ms) are refused from now on.
    revoked_before_ms: u64,
    /// Whether a live registration of the id was removed.
    removed: bool,
}

/// `POST /v1/revocations` (operator): refuses every credential of `id` issued before the
/// request's timestamp, and removes the device from the registry at once.
async fn revoke<S: Store>(
    State(state): State<SharedState<S>>,
    Extension(operator): Extension<OperatorAuth>,
    JsonBody(request): JsonBody<RevokeRequest>,
) -> Result<Json<RevokeResponse>, ApiError> {
    model::check_device_id(&request.id).map_err(|error| ApiError::invalid_field("id", error))?;
    // The operator's own signed timestamp: enrollment dates come from the operator's clock
    // too, so a credential enrolled after this revocation is accepted even if the tracker's
    // clock differs from the operator's.
    let before_ms = operator.timestamp_ms;
    let removed = state.store.revoke(&request.id, before_ms, unix_millis()).await?;
    tracing::info!(device = %request.id, removed, "revoked");
    Ok(Json(RevokeResponse {
        id: request.id,
        revoked_before_ms: before_ms,
        removed,
    }))
}

async fn get_manifest<S: Store>(
    State(state): State<SharedState<S>>,
    ContentIdPath(content): ContentIdPath,
) -> Result<Response, ApiError> {
    match state.store.get_manifest(content).await? {
        Some(bytes) => Ok(([(CONTENT_TYPE, "application/octet-stream")], bytes).into_response()),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_manifest",
            format!("no manifest was put for content {}", content_hex(&content)),
        )),
    }
}

/// The lookup answer, assembled from each device's pre-rendered JSON (`Device::json`), with
/// the rendezvous' marks (`punch`, `unreachable`) when it is on.
fn lookup_json(content: &ContentId, found: &Lookup, reach: Option<&crate::rendezvous::Reach>) -> String {
    let devices = found.servers.iter().chain(&found.origins);
    let mut json = String::with_capacity(160 + devices.map(|device| device.json().len() + 1).sum::<usize>());
    json.push_str("{\"content\":\"");
    json.push_str(&content_hex(content));
    for (name, list) in [("servers", &found.servers), ("origins", &found.origins)] {
        json.push_str(if name == "servers" {
            "\",\"servers\":["
        } else {
            "],\"origins\":["
        });
        for (index, device) in list.iter().enumerate() {
            if index > 0 {
                json.push(',');
            }
            let text = device.json();
            match reach {
                Some(reach) if reach.punch.contains(&device.registration.id) => {
                    json.push_str(&text[..text.len() - 1]);
                    json.push_str(",\"punch\":true}");
                }
                _ => json.push_str(text),
            }
        }
    }
    json.push(']');
    if let Some(reach) = reach {
        json.push_str(",\"unreachable\":");
        json.push_str(&serde_json::to_string(&reach.unreachable).expect("strings serialise"));
    }
    json.push('}');
    json
}

async fn servers<S: Store>(
    State(state): State<SharedState<S>>,
    ContentIdPath(content): ContentIdPath,
    ServerCount(n): ServerCount,
    crate::rendezvous::PunchToken(punch): crate::rendezvous::PunchToken,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    if !state.tally.count(content) {
        state.metrics.count_untallied_lookup();
    }
    // What the viewer is expected to draw from the servers listed, until their heartbeats say.
    let charge_bps = match state.catalog.cached(&content) {
        Some(info) if info.bitrate_bps > 0 => info.bitrate_bps,
        _ => state.limits.spread.session_bps,
    };
    let mut found = state.store.lookup(content, n, charge_bps, unix_millis()).await?;
    let reach = match &state.rendezvous {
        Some(rendezvous) => {
            let mut reach = rendezvous.apply(&mut found, punch);
            // Left-out servers make room: ask once more for as many more as were left out.
            let left_out = reach.unreachable.len();
            if left_out > 0 && found.servers.len() == n - left_out.min(n) && n < MAX_LOOKUP_N {
                let wider = (n + left_out).min(MAX_LOOKUP_N);
                // Uncharged: the first lookup charged what it listed.
                found = state.store.lookup(content, wider, 0, unix_millis()).await?;
                reach = rendezvous.apply(&mut found, punch);
                found.servers.truncate(n);
            }
            Some(reach)
        }
        None => None,
    };
    let now = unix_millis();
    if !state.quarantined.is_empty() {
        found
            .servers
            .retain(|device| !state.quarantined.contains(&device.registration.id, now));
        found
            .origins
            .retain(|device| !state.quarantined.contains(&device.registration.id, now));
    }
    let json = lookup_json(&content, &found, reach.as_ref());
    let response = ([(CONTENT_TYPE, "application/json")], json).into_response();
    state.metrics.observe_lookup(started.elapsed(), found.records_read);
    Ok(response)
}

#[derive(Serialize)]
struct PopularEntry {
    content: String,
    lookups_per_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bitrate_bps: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    demand_bps: Option<f64>,
}

#[derive(Serialize)]
struct PopularResponse {
    half_life_secs: f64,
    contents: Vec<PopularEntry>,
}

/// `GET /v1/contents/popular?n=N`: the N most looked-up contents, their lookup and demand rates.
async fn popular<S: Store>(
    State(state): State<SharedState<S>>,
    crate::extract::PopularCount(n): crate::extract::PopularCount,
) -> Result<Json<PopularResponse>, ApiError> {
    let now = unix_millis();
    crate::placement::flush(&state, now).await?;
    let list = crate::placement::popular(&state, n, now).await?;
    Ok(Json(PopularResponse {
        half_life_secs: state.half_life_ms as f64 / 1000.0,
        contents: list
            .iter()
            .map(|entry| PopularEntry {
                content: content_hex(&entry.content),
                lookups_per_s: entry.lookups_per_s,
                size: entry.info.map(|info| info.size),
                bitrate_bps: entry.info.map(|info| info.bitrate_bps).filter(|&bitrate| bitrate > 0),
                demand_bps: entry.demand_bps(),
            })
            .collect(),
    }))
}

async fn rendezvous_ports<S: Store>(State(state): State<SharedState<S>>) -> Result<Response, ApiError> {
    let Some(rendezvous) = &state.rendezvous else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "rendezvous_off",
            "this tracker runs without UDP rendezvous (--no-udp)",
        ));
    };
    let (primary, alt) = rendezvous.local_addrs();
    Ok(Json(serde_json::json!({"udp_port": primary.port(), "alt_port": alt.port()})).into_response())
}

async fn health<S: Store>(State(state): State<SharedState<S>>) -> Response {
    let store = state.store.kind();
    match state.store.live_devices(unix_millis()).await {
        Ok(devices) => {
            state.metrics.set_live_devices(devices);
            Json(serde_json::json!({"status": "ok", "store": store, "devices": devices})).into_response()
        }
        Err(error) => {
            tracing::warn!(%error, "health check: store unavailable");
            let body = serde_json::json!({"status": "unavailable", "store": store, "message": error.to_string()});
            (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
        }
    }
}

async fn metrics_text<S: Store>(State(state): State<SharedState<S>>) -> Response {
    // A scrape refreshes the gauges; if the store is down the last values stand and /health says so.
    let now = unix_millis();
    if let Ok(devices) = state.store.live_devices(now).await {
        state.metrics.set_live_devices(devices);
    }
    if let Err(error) = crate::placement::flush(&state, now).await {
        tracing::warn!(%error, "counting lookups failed");
    }
    if let Ok(popular) = crate::placement::popular(&state, metrics::TOP_CONTENTS, now).await {
        state.metrics.set_popular(&popular);
    }
    ([(CONTENT_TYPE, metrics::CONTENT_TYPE)], state.metrics.encode()).into_response()
}

async fn openapi() -> Response {
    ([(CONTENT_TYPE, "application/json")], crate::openapi::document_text()).into_response()
}
