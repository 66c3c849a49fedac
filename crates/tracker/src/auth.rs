//! Request authentication (docs/tracker.md, "Authentication"): every device-side route needs a
//! request signed by a device whose credential the trusted operator key signed; the operator
//! routes need a request signed by that operator key. Timestamps outside the window and nonces
//! seen within it are refused, so a captured request cannot be replayed, even at another tracker
//! instance sharing the Redis store.

use crate::api::{MAX_BODY_BYTES, SharedState};
use crate::error::ApiError;
use crate::store::{Store, unix_millis};
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use pcdn_identity::request::{Authorization, RequestError, Signer};
use pcdn_identity::{CredentialError, Role, format_unix_secs};
use std::time::Duration;

/// How requests are authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuthConfig {
    /// Largest difference between a request's timestamp and the tracker's clock. 60 s covers
    /// NTP-synchronised clocks and a slow network with a wide margin, while bounding how many
    /// nonces a tracker must remember (each is kept for twice this long at most).
    pub clock_window: Duration,
}

impl Default for AuthConfig {
    fn default() -> AuthConfig {
        AuthConfig {
            clock_window: Duration::from_secs(60),
        }
    }
}

/// The device a request was signed by, as its credential says; handlers check that it acts as
/// itself and that its role allows the route.
#[derive(Clone, Debug)]
pub(crate) struct DeviceAuth {
    pub id: String,
    pub role: Role,
}

impl DeviceAuth {
    /// 403 `wrong_device` unless `id` is this device's own id.
    pub fn require_id(&self, id: &str) -> Result<(), ApiError> {
        if self.id == id {
            Ok(())
        } else {
            Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "wrong_device",
                format!(
                    "this request is signed by device {:?}, which can act only as itself, not as {id:?}",
                    self.id
                ),
            ))
        }
    }

    /// 403 `wrong_role` unless the device has `role`.
    pub fn require_role(&self, role: Role, what: &str) -> Result<(), ApiError> {
        if self.role == role {
            Ok(())
        } else {
            Err(wrong_role(&self.id, self.role, role, what))
        }
    }
}

/// A request the operator signed, with its (checked) timestamp.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OperatorAuth {
    pub timestamp_ms: u64,
}

/// 403 `wrong_role`.
pub(crate) fn wrong_role(id: &str, has: Role, needs: Role, what: &str) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "wrong_role",
        format!(
            "device {id:?} is enrolled as {has}; only a device enrolled as {needs} may {what} (enroll it with `pcdn operator enroll --role {needs}`)"
        ),
    )
}

fn unauthorized(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, code, message)
}

fn credential_error(error: CredentialError) -> ApiError {
    let code = match error {
        CredentialError::Malformed(_) => "bad_credential",
        CredentialError::UnknownOperator { .. } => "unknown_operator",
        CredentialError::BadSignature { .. } => "bad_signature",
        CredentialError::Expired { .. } => "expired_credential",
    };
    unauthorized(code, error.to_string())
}

fn request_error(error: RequestError) -> ApiError {
    match error {
        RequestError::Credential(error) => credential_error(error),
        RequestError::Malformed(_) => unauthorized("unauthorized", error.to_string()),
        RequestError::BadSignature => unauthorized("bad_signature", error.to_string()),
    }
}

/// Who may call a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Anyone (clients are anonymous).
    Public,
    /// An enrolled device (`PCDN-Device`).
    Device,
    /// The operator (`PCDN-Operator`).
    Operator,
}

/// Checks the request's `Authorization` header for a route that needs `access` (not `Public`).
/// On success a device request carries a [`DeviceAuth`] extension.
async fn authenticate<S: Store>(
    state: &SharedState<S>,
    parts: &mut Parts,
    body: &Bytes,
    access: Access,
) -> Result<(), ApiError> {
    let example = match access {
        Access::Operator => "PCDN-Operator key=..., timestamp=..., nonce=..., signature=... (see docs/tracker.md)",
        _ => "PCDN-Device credential=..., timestamp=..., nonce=..., signature=... (see docs/tracker.md)",
    };
    let header = parts
        .headers
        .get(AUTHORIZATION)
        .ok_or_else(|| unauthorized("unauthorized", format!("missing `Authorization: {example}` header")))?;
    let header = header
        .to_str()
        .map_err(|_| unauthorized("unauthorized", "the `Authorization` header is not ASCII"))?;
    let authorization = Authorization::parse(header).map_err(request_error)?;
    let now_ms = unix_millis();
    let operator = &state.operator_key;
    let device = match (&authorization.signer, access) {
        (Signer::Device(credential), Access::Device) => {
            credential.verify(operator, now_ms / 1000).map_err(credential_error)?;
            Some(credential)
        }
        (Signer::Operator(key), Access::Operator) => {
            if key != operator {
                return Err(unauthorized(
                    "unknown_operator",
                    format!(
                        "the request is signed by operator key {}, not by the operator key this tracker trusts ({})",
                        hex::encode(key.as_bytes()),
                        hex::encode(operator.as_bytes())
                    ),
                ));
            }
            None
        }
        _ => {
            return Err(unauthorized(
                "unauthorized",
                format!("this route needs `Authorization: {example}`"),
            ));
        }
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    authorization
        .verify_signature(parts.method.as_str(), path, body)
        .map_err(request_error)?;
    let window_ms = u64::try_from(state.auth.clock_window.as_millis()).unwrap_or(u64::MAX);
    if authorization.timestamp_ms.abs_diff(now_ms) > window_ms {
        return Err(unauthorized(
            "stale_timestamp",
            format!(
                "the request's timestamp {} is {} ms from the tracker's clock ({}), more than the {} s allowed: set the device's clock (NTP)",
                authorization.timestamp_ms,
                authorization.timestamp_ms.abs_diff(now_ms),
                format_unix_secs(now_ms / 1000),
                window_ms / 1000
            ),
        ));
    }
    if let Some(credential) = device {
        if let Some(before_ms) = state.store.revoked_before(&credential.id).await? {
            if credential.issued_ms < before_ms {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "revoked",
                    format!(
                        "the operator revoked device {:?} on {}: enroll it again with `pcdn operator enroll`",
                        credential.id,
                        format_unix_secs(before_ms / 1000)
                    ),
                ));
            }
        }
    }
    // Remembered until the timestamp leaves the window: after that the timestamp check refuses it.
    let forget_at = authorization.timestamp_ms.saturating_add(window_ms).saturating_add(1);
    if !state
        .store
        .remember_nonce(authorization.replay_key(), forget_at, now_ms)
        .await?
    {
        return Err(unauthorized(
            "replayed_request",
            "this request (its nonce) was already received: every request needs a fresh nonce and signature",
        ));
    }
    match device {
        Some(credential) => {
            parts.extensions.insert(DeviceAuth {
                id: credential.id.clone(),
                role: credential.role,
            });
        }
        None => {
            parts.extensions.insert(OperatorAuth {
                timestamp_ms: authorization.timestamp_ms,
            });
        }
    }
    Ok(())
}

/// Middleware of the `Device` and `Operator` routes: reads the body (the signature covers it),
/// authenticates, and passes the request on with the body put back.
pub(crate) async fn require<S: Store>(
    State((state, access)): State<(SharedState<S>, Access)>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let bytes = match to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!("request body is larger than {MAX_BODY_BYTES} bytes, or could not be read"),
            )
            .into_response();
        }
    };
    if let Err(error) = authenticate(&state, &mut parts, &bytes, access).await {
        return error.into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}
