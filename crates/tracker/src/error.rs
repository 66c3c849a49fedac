//! The API's error answer: a status and `{"error": "<snake_case_code>", "message": "<text>"}`.

use crate::store::StoreError;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An error answer. Bad input is always a 4xx naming the field and what was expected; only a
/// store failure is a 5xx (503: the tracker cannot reach its registry).
#[derive(Debug)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    message: &'a str,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400 `invalid_field`: a request body field has a wrong value.
    pub fn invalid_field(field: &str, problem: impl std::fmt::Display) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_field",
            format!("request body field `{field}`: {problem}"),
        )
    }

    /// 400 `invalid_path`: a path parameter has a wrong value.
    pub fn invalid_path(parameter: &str, problem: impl std::fmt::Display) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_path",
            format!("path parameter `{parameter}`: {problem}"),
        )
    }

    /// 404 `unknown_device`: the device expired or never registered.
    pub fn unknown_device(id: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_device",
            format!("device {id:?} is not registered (it expired or never registered): register it again"),
        )
    }

    /// 503 `store_unavailable`: the store failed; the request was well formed.
    pub fn store(error: StoreError) -> ApiError {
        tracing::error!(%error, "tracker store failed");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            format!("the tracker's store failed: {error}"),
        )
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        ApiError::store(error)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: self.code,
            message: &self.message,
        };
        (self.status, Json(body)).into_response()
    }
}
