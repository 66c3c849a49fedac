//! Request extractors whose every rejection is the API's JSON error: bodies, path parameters,
//! and the lookup query.

use crate::error::ApiError;
use crate::model::{self, DEFAULT_LOOKUP_N, MAX_LOOKUP_N};
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use bytes::Bytes;
use pcdn_core::wire::ContentId;
use serde::de::DeserializeOwned;
use std::collections::HashMap;

fn body_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("request body is larger than {} bytes", crate::api::MAX_BODY_BYTES),
        )
    } else {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            format!("request body could not be read: {}", rejection.body_text()),
        )
    }
}

/// A JSON body. Any content type is accepted; a body that does not parse is a 400
/// `invalid_json` whose message names the field (through `serde_path_to_error`).
pub(crate) struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(request, state).await.map_err(body_rejection)?;
        let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
        let invalid = |message: String| ApiError::new(StatusCode::BAD_REQUEST, "invalid_json", message);
        let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
            let path = error.path().to_string();
            invalid(if path == "." {
                format!("request body is not the expected JSON: {}", error.inner())
            } else {
                format!("request body field `{path}`: {}", error.inner())
            })
        })?;
        deserializer
            .end()
            .map_err(|error| invalid(format!("request body has more after its JSON value: {error}")))?;
        Ok(JsonBody(value))
    }
}

/// A body of raw bytes (a signed manifest).
pub(crate) struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        Bytes::from_request(request, state)
            .await
            .map(RawBody)
            .map_err(body_rejection)
    }
}

async fn single_path_parameter<S: Send + Sync>(parts: &mut Parts, state: &S, name: &str) -> Result<String, ApiError> {
    Path::<String>::from_request_parts(parts, state)
        .await
        .map(|Path(value)| value)
        .map_err(|rejection| ApiError::invalid_path(name, rejection.body_text()))
}

/// The `{id}` path parameter, checked to be a device id.
pub(crate) struct DeviceIdPath(pub String);

impl<S: Send + Sync> FromRequestParts<S> for DeviceIdPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let id = single_path_parameter(parts, state, "id").await?;
        model::check_device_id(&id).map_err(|error| ApiError::invalid_path("id", error))?;
        Ok(DeviceIdPath(id))
    }
}

/// The `{cid}` path parameter, parsed as a content id.
pub(crate) struct ContentIdPath(pub ContentId);

impl<S: Send + Sync> FromRequestParts<S> for ContentIdPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let text = single_path_parameter(parts, state, "cid").await?;
        let id = model::parse_content_id(&text).map_err(|error| ApiError::invalid_path("cid", error))?;
        Ok(ContentIdPath(id))
    }
}

/// The lookup's `?n=` (default 8, 1..=64). Other query parameters are ignored.
pub(crate) struct ServerCount(pub usize);

impl<S: Send + Sync> FromRequestParts<S> for ServerCount {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        count_query(parts, state, DEFAULT_LOOKUP_N, MAX_LOOKUP_N)
            .await
            .map(ServerCount)
    }
}

/// The `n` of `GET /v1/contents/popular`: 1..=`MAX_POPULAR_N`, default `DEFAULT_POPULAR_N`.
pub(crate) struct PopularCount(pub usize);

/// Most contents `GET /v1/contents/popular` lists: a dashboard's top list, bounded so that one
/// request reads little.
pub(crate) const MAX_POPULAR_N: usize = 100;
/// Contents `GET /v1/contents/popular` lists when it does not say.
pub(crate) const DEFAULT_POPULAR_N: usize = 10;

impl<S: Send + Sync> FromRequestParts<S> for PopularCount {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        count_query(parts, state, DEFAULT_POPULAR_N, MAX_POPULAR_N)
            .await
            .map(PopularCount)
    }
}

/// The query parameter `n`: an integer in 1..=`max`, `default` when absent.
async fn count_query<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    default: usize,
    max: usize,
) -> Result<usize, ApiError> {
    let query = query_parameters(parts, state).await?;
    let Some(text) = query.get("n") else {
        return Ok(default);
    };
    match text.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(invalid_query(format!(
            "query parameter `n`: expected an integer in 1..={max}, got {:?}",
            text.chars().take(40).collect::<String>()
        ))),
    }
}

/// A 400 `invalid_query` answer.
pub(crate) fn invalid_query(problem: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", problem)
}

/// The request's query parameters; a query string that is not `name=value&...` is a 400.
pub(crate) async fn query_parameters<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
) -> Result<HashMap<String, String>, ApiError> {
    let Query(query) = Query::<HashMap<String, String>>::from_request_parts(parts, state)
        .await
        .map_err(|rejection| invalid_query(format!("query string: {}", rejection.body_text())))?;
    Ok(query)
}
