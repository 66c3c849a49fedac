//! The OpenAPI 3.0 description of the API (`GET /openapi.json`), written by hand as JSON.

use serde_json::{Value, json};
use std::sync::OnceLock;

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    })
}

fn json_response(description: &str, schema: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}
    })
}

fn json_body(schema: &str) -> Value {
    json!({
        "required": true,
        "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}
    })
}

fn parameter(name: &str) -> Value {
    json!({"$ref": format!("#/components/parameters/{name}")})
}

/// The document as a JSON value.
pub(crate) fn document() -> Value {
    let bad_request = error_response("bad input: the message names the field and what was expected");
    let unauthorized = error_response(
        "the signed request was refused: unauthorized (missing or malformed header), bad_credential, \
         unknown_operator, bad_signature, expired_credential, stale_timestamp or replayed_request",
    );
    let forbidden = error_response(
        "revoked (the operator revoked the credential), wrong_device (acting as another id) or \
         wrong_role (an edge on an origin's route, or `origin` not matching the enrolled role)",
    );
    let unknown_device = error_response("unknown_device: the device expired or never registered");
    let unavailable = error_response("store_unavailable: the tracker cannot reach its store");
    let auth = json!([{"deviceSignature": []}]);
    let operator = json!([{"operatorSignature": []}]);
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "pcdn tracker",
            "version": "1",
            "description": "The pcdn control plane: devices register and announce what they hold; clients look up \
                which devices to download a content from. Errors are always `{\"error\": code, \"message\": text}`."
        },
        "paths": {
            "/v1/devices": {
                "post": {
                    "operationId": "registerDevice",
                    "summary": "Register a device (replaces any device with the same id, and its announced set)",
                    "security": auth,
                    "requestBody": json_body("Registration"),
                    "responses": {
                        "200": json_response("registered", "Registered"),
                        "400": bad_request,
                        "401": unauthorized,
                        "403": forbidden,
                        "413": error_response("body_too_large"),
                        "503": unavailable
                    }
                }
            },
            "/v1/devices/{id}/heartbeat": {
                "post": {
                    "operationId": "heartbeat",
                    "summary": "Report load and stay live for another ttl",
                    "security": auth,
                    "parameters": [parameter("DeviceId")],
                    "requestBody": json_body("Heartbeat"),
                    "responses": {
                        "200": json_response("still live", "HeartbeatAck"),
                        "400": bad_request,
                        "401": unauthorized,
                        "403": forbidden,
                        "404": unknown_device,
                        "503": unavailable
                    }
                }
            },
            "/v1/devices/{id}/contents": {
                "put": {
                    "operationId": "announceContents",
                    "summary": "Replace the set of contents the device holds",
                    "security": auth,
                    "parameters": [parameter("DeviceId")],
                    "requestBody": json_body("Contents"),
                    "responses": {
                        "200": json_response("announced", "Announced"),
                        "400": bad_request,
                        "401": unauthorized,
                        "403": forbidden,
                        "404": unknown_device,
                        "413": error_response("body_too_large"),
                        "503": unavailable
                    }
                }
            },
            "/v1/devices/{id}": {
                "delete": {
                    "operationId": "removeDevice",
                    "summary": "Remove a device (clean shutdown)",
                    "security": auth,
                    "parameters": [parameter("DeviceId")],
                    "responses": {
                        "204": {"description": "removed"},
                        "400": bad_request,
                        "401": unauthorized,
                        "403": forbidden,
                        "404": unknown_device,
                        "503": unavailable
                    }
                }
            },
            "/v1/contents/{cid}/manifest": {
                "put": {
                    "operationId": "putManifest",
                    "summary": "Store a content's signed manifest (origins only); it must verify, match {cid} and be signed by the public_key the calling origin registered; a stored manifest is replaced only by its own signer",
                    "security": auth,
                    "parameters": [parameter("ContentId")],
                    "requestBody": {
                        "required": true,
                        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
                    },
                    "responses": {
                        "204": {"description": "stored"},
                        "400": error_response("invalid_manifest or content_id_mismatch"),
                        "401": unauthorized,
                        "403": error_response("wrong_role (not an origin), wrong_signer (not signed by the calling origin's registered public_key), revoked, or manifest_quota_exceeded: the signer's manifests would pass its count or byte quota"),
                        "409": error_response("manifest_conflict: the content's stored manifest has another signer, which alone may replace it"),
                        "413": error_response("body_too_large, or manifest_too_large: over the tracker's largest manifest (8 MiB by default)"),
                        "503": unavailable
                    }
                },
                "get": {
                    "operationId": "getManifest",
                    "summary": "The content's signed manifest",
                    "parameters": [parameter("ContentId")],
                    "responses": {
                        "200": {
                            "description": "the signed manifest bytes",
                            "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
                        },
                        "400": bad_request,
                        "404": error_response("unknown_manifest: none was put"),
                        "503": unavailable
                    }
                }
            },
            "/v1/contents/{cid}/servers": {
                "get": {
                    "operationId": "lookupServers",
                    "summary": "The best live devices holding the content, ranked by free upload capacity less what lookups charged them since their last heartbeat (devices at their cap only when none has room), and the best live origins",
                    "parameters": [parameter("ContentId"), parameter("N"), parameter("Punch")],
                    "responses": {
                        "200": json_response("servers and origins", "Lookup"),
                        "400": bad_request,
                        "503": unavailable
                    }
                }
            },
            "/v1/contents/popular": {
                "get": {
                    "operationId": "popularContents",
                    "summary": "The most looked-up contents, with their decayed lookup rates and the upload their viewers need",
                    "parameters": [parameter("PopularN")],
                    "responses": {
                        "200": json_response("the top contents, most looked up first", "Popular"),
                        "400": bad_request,
                        "503": unavailable
                    }
                }
            },
            "/v1/rendezvous": {
                "get": {
                    "operationId": "rendezvous",
                    "summary": "The tracker's UDP rendezvous ports (NAT traversal, docs/protocol.md section 11)",
                    "responses": {
                        "200": json_response("the two UDP ports", "RendezvousPorts"),
                        "404": error_response("rendezvous_off: this tracker runs without UDP rendezvous")
                    }
                }
            },
            "/v1/revocations": {
                "post": {
                    "operationId": "revokeDevice",
                    "summary": "Operator only: refuse every credential of the id issued before this request, and remove the device from the registry",
                    "security": operator,
                    "requestBody": json_body("Revocation"),
                    "responses": {
                        "200": json_response("revoked", "Revoked"),
                        "400": bad_request,
                        "401": unauthorized,
                        "503": unavailable
                    }
                }
            },
            "/v1/reports": {
                "post": {
                    "operationId": "reportDevice",
                    "summary": "A client banned this device for corrupt data (smart ban); devices reported by enough distinct clients are quarantined",
                    "requestBody": json_body("Report"),
                    "responses": {
                        "200": json_response("counted", "Reported"),
                        "400": bad_request,
                        "404": error_response("unknown_holder: no lookup of the content lists this device"),
                        "503": unavailable
                    }
                }
            },
            "/v1/quarantine": {
                "get": {
                    "operationId": "listQuarantine",
                    "summary": "The devices left out of lookups because distinct clients reported them",
                    "responses": {
                        "200": json_response("the quarantined devices", "Quarantine"),
                        "503": unavailable
                    }
                }
            },
            "/v1/quarantine/clear": {
                "post": {
                    "operationId": "clearQuarantine",
                    "summary": "Operator only: forget every report of the device, ending its quarantine",
                    "security": operator,
                    "requestBody": json_body("Revocation"),
                    "responses": {
                        "200": json_response("cleared", "Cleared"),
                        "400": bad_request,
                        "401": unauthorized,
                        "503": unavailable
                    }
                }
            },
            "/health": {
                "get": {
                    "operationId": "health",
                    "summary": "Whether the tracker can reach its store",
                    "responses": {
                        "200": json_response("healthy", "Health"),
                        "503": json_response("the store cannot be reached", "Health")
                    }
                }
            },
            "/metrics": {
                "get": {
                    "operationId": "metrics",
                    "summary": "Prometheus metrics (OpenMetrics text format)",
                    "responses": {
                        "200": {
                            "description": "requests by route and status, lookup latency, live devices, registrations, expirations",
                            "content": {"application/openmetrics-text": {"schema": {"type": "string"}}}
                        }
                    }
                }
            },
            "/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "summary": "This document",
                    "responses": {
                        "200": {"description": "OpenAPI 3 document", "content": {"application/json": {"schema": {"type": "object"}}}}
                    }
                }
            }
        },
        "components": {
            "securitySchemes": {
                "deviceSignature": {
                    "type": "apiKey", "in": "header", "name": "Authorization",
                    "description": "`PCDN-Device credential=<hex>, timestamp=<unix ms>, nonce=<32 hex>, signature=<128 hex>`: \
                        the device's operator-signed credential and its Ed25519 signature over the request (docs/tracker.md, Authentication)"
                },
                "operatorSignature": {
                    "type": "apiKey", "in": "header", "name": "Authorization",
                    "description": "`PCDN-Operator key=<64 hex>, timestamp=<unix ms>, nonce=<32 hex>, signature=<128 hex>`: \
                        signed with the operator key the tracker trusts"
                }
            },
            "parameters": {
                "DeviceId": {
                    "name": "id", "in": "path", "required": true,
                    "schema": {"$ref": "#/components/schemas/DeviceId"}
                },
                "ContentId": {
                    "name": "cid", "in": "path", "required": true,
                    "schema": {"$ref": "#/components/schemas/ContentId"}
                },
                "N": {
                    "name": "n", "in": "query", "required": false,
                    "description": "most servers to return",
                    "schema": {"type": "integer", "minimum": 1, "maximum": 64, "default": 8}
                },
                "PopularN": {
                    "name": "n", "in": "query", "required": false,
                    "description": "most contents to list",
                    "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10}
                },
                "Punch": {
                    "name": "punch", "in": "query", "required": false,
                    "description": "the client token of a BOUND: the tracker asks the NATed servers it returns to punch towards the client",
                    "schema": {"type": "string", "pattern": "^[0-9a-fA-F]{16}$"}
                }
            },
            "schemas": {
                "DeviceId": {"type": "string", "pattern": "^(?!\\.+$)[A-Za-z0-9._-]{1,64}$"},
                "ContentId": {
                    "type": "string", "pattern": "^[0-9a-fA-F]{64}$",
                    "description": "the 32-byte BLAKE3 content id in hex (written lowercase)"
                },
                "PublicKey": {"type": "string", "pattern": "^[0-9a-fA-F]{64}$", "description": "Ed25519 public key in hex"},
                "Error": {
                    "type": "object", "required": ["error", "message"],
                    "properties": {
                        "error": {"type": "string", "description": "snake_case code"},
                        "message": {"type": "string", "description": "names the field and what was expected"}
                    }
                },
                "Registration": {
                    "type": "object", "required": ["id", "addr", "upload_capacity_bps"],
                    "properties": {
                        "id": {"$ref": "#/components/schemas/DeviceId"},
                        "addr": {"type": "string", "description": "UDP IP:port clients reach the device at", "example": "127.0.0.1:7801"},
                        "origin": {"type": "boolean", "default": false},
                        "upload_capacity_bps": {"type": "integer", "format": "int64", "minimum": 0, "description": "bits per second"},
                        "public_key": {"$ref": "#/components/schemas/PublicKey"}
                    }
                },
                "Registered": {
                    "type": "object", "required": ["ttl_secs", "heartbeat_secs", "generation"],
                    "properties": {
                        "ttl_secs": {"type": "integer", "description": "the device expires this long after its last heartbeat"},
                        "heartbeat_secs": {"type": "integer", "description": "send a heartbeat this often"},
                        "generation": {"type": "integer", "format": "int64", "minimum": 1, "description": "this registration's generation: one more than the id's previous registration's"},
                        "rendezvous": {
                            "type": "object", "required": ["token", "udp_port", "alt_port"],
                            "description": "present when the UDP rendezvous is on: bind to both ports with the token",
                            "properties": {
                                "token": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
                                "udp_port": {"type": "integer"},
                                "alt_port": {"type": "integer"}
                            }
                        }
                    }
                },
                "RendezvousPorts": {
                    "type": "object", "required": ["udp_port", "alt_port"],
                    "properties": {"udp_port": {"type": "integer"}, "alt_port": {"type": "integer"}}
                },
                "Heartbeat": {
                    "type": "object", "required": ["sessions", "upload_bps", "healthy"],
                    "properties": {
                        "sessions": {"type": "integer", "minimum": 0, "maximum": 4294967295_u64},
                        "upload_bps": {"type": "integer", "format": "int64", "minimum": 0, "description": "current upload, bits per second"},
                        "healthy": {"type": "boolean"},
                        "cache_bytes": {"type": "integer", "format": "int64", "minimum": 0, "description": "the device's cache budget in bytes (a device that is a cache); placement assigns it at most this much"},
                        "free_bytes": {"type": "integer", "format": "int64", "minimum": 0, "description": "free bytes on the cache's file system (only with cache_bytes)"}
                    }
                },
                "HeartbeatAck": {
                    "type": "object", "required": ["ttl_secs", "generation"],
                    "properties": {
                        "ttl_secs": {"type": "integer"},
                        "generation": {"type": "integer", "format": "int64", "minimum": 1, "description": "the generation of the device's record; another than the device's registration's means the record was replaced without it: register again"},
                        "assignment": {"type": "array", "items": {"$ref": "#/components/schemas/ContentId"}, "description": "every content the device should hold; absent when the tracker places nothing (--placement none) or has not placed this device yet"}
                    }
                },
                "Popular": {
                    "type": "object", "required": ["half_life_secs", "contents"],
                    "properties": {
                        "half_life_secs": {"type": "number", "description": "lookup counts halve this often"},
                        "contents": {"type": "array", "items": {
                            "type": "object", "required": ["content", "lookups_per_s"],
                            "properties": {
                                "content": {"$ref": "#/components/schemas/ContentId"},
                                "lookups_per_s": {"type": "number", "description": "the decayed lookup count as a rate: count x ln 2 / half-life"},
                                "size": {"type": "integer", "description": "bytes, from the manifest (absent without one)"},
                                "bitrate_bps": {"type": "integer", "description": "the video's bitrate, from the manifest (absent if it has none)"},
                                "demand_bps": {"type": "number", "description": "lookups_per_s x size x 8: the upload its viewers need"}
                            }
                        }}
                    }
                },
                "Contents": {
                    "type": "object", "required": ["contents"],
                    "properties": {
                        "contents": {"type": "array", "maxItems": 100000, "items": {"$ref": "#/components/schemas/ContentId"}}
                    }
                },
                "Announced": {
                    "type": "object", "required": ["announced"],
                    "properties": {"announced": {"type": "integer", "description": "distinct content ids now announced"}}
                },
                "Server": {
                    "type": "object",
                    "required": ["id", "addr", "origin", "upload_capacity_bps", "upload_bps", "free_upload_bps", "sessions", "healthy"],
                    "properties": {
                        "id": {"$ref": "#/components/schemas/DeviceId"},
                        "addr": {"type": "string"},
                        "origin": {"type": "boolean"},
                        "upload_capacity_bps": {"type": "integer", "format": "int64"},
                        "upload_bps": {"type": "integer", "format": "int64"},
                        "free_upload_bps": {"type": "integer", "format": "int64", "description": "capacity - upload_bps, saturating"},
                        "sessions": {"type": "integer"},
                        "healthy": {"type": "boolean"},
                        "public_key": {"$ref": "#/components/schemas/PublicKey"},
                        "punch": {"type": "boolean", "description": "behind a NAT: addr is its public mapping; punch before HELLO"}
                    }
                },
                "Lookup": {
                    "type": "object", "required": ["content", "servers", "origins"],
                    "properties": {
                        "content": {"$ref": "#/components/schemas/ContentId"},
                        "servers": {
                            "type": "array", "items": {"$ref": "#/components/schemas/Server"},
                            "description": "live, healthy, non-origin holders by free upload capacity (desc), then fewer sessions, then id"
                        },
                        "origins": {"type": "array", "items": {"$ref": "#/components/schemas/Server"}, "description": "the best live origins (healthy first, then as servers), at most n and at most the tracker's max_origins (default 4)"},
                        "unreachable": {
                            "type": "array", "description": "with UDP rendezvous: devices left out, and why",
                            "items": {"type": "object", "required": ["id", "reason"], "properties": {"id": {"type": "string"}, "reason": {"type": "string"}}}
                        }
                    }
                },
                "Revocation": {
                    "type": "object", "required": ["id"], "additionalProperties": false,
                    "properties": {"id": {"$ref": "#/components/schemas/DeviceId"}}
                },
                "Revoked": {
                    "type": "object", "required": ["id", "revoked_before_ms", "removed"],
                    "properties": {
                        "id": {"$ref": "#/components/schemas/DeviceId"},
                        "revoked_before_ms": {"type": "integer", "format": "int64", "description": "credentials issued before this instant (Unix ms) are refused"},
                        "removed": {"type": "boolean", "description": "whether a live registration was removed"}
                    }
                },
                "Report": {
                    "type": "object", "required": ["device", "content", "reason"], "additionalProperties": false,
                    "properties": {
                        "device": {"$ref": "#/components/schemas/DeviceId"},
                        "content": {"type": "string", "description": "the content id (64 hex digits) whose data was corrupt"},
                        "reason": {"type": "string", "enum": ["corrupt"]}
                    }
                },
                "Reported": {
                    "type": "object", "required": ["device", "reporters", "quarantined"],
                    "properties": {
                        "device": {"$ref": "#/components/schemas/DeviceId"},
                        "reporters": {"type": "integer", "description": "distinct clients that reported it within the window"},
                        "quarantined": {"type": "boolean"}
                    }
                },
                "Quarantine": {
                    "type": "object", "required": ["reporters_needed", "window_secs", "devices"],
                    "properties": {
                        "reporters_needed": {"type": "integer"},
                        "window_secs": {"type": "integer"},
                        "devices": {"type": "array", "items": {
                            "type": "object", "required": ["id", "reporters", "until_ms"],
                            "properties": {
                                "id": {"$ref": "#/components/schemas/DeviceId"},
                                "reporters": {"type": "integer"},
                                "until_ms": {"type": "integer", "format": "int64", "description": "the quarantine ends then (Unix ms) without new reports"}
                            }
                        }}
                    }
                },
                "Cleared": {
                    "type": "object", "required": ["id", "cleared"],
                    "properties": {
                        "id": {"$ref": "#/components/schemas/DeviceId"},
                        "cleared": {"type": "boolean", "description": "whether the device had reports"}
                    }
                },
                "Health": {
                    "type": "object", "required": ["status", "store"],
                    "properties": {
                        "status": {"type": "string", "enum": ["ok", "unavailable"]},
                        "store": {"type": "string", "enum": ["sqlite", "redis"]},
                        "devices": {"type": "integer", "description": "live devices"},
                        "message": {"type": "string"}
                    }
                }
            }
        }
    })
}

/// Adds the per-source rate limits' 429 answer (`ratelimit`) to every `/v1` operation.
fn with_rate_limits(mut document: Value) -> Value {
    let limited = json!({
        "description": "rate_limited: too many requests from this source address; retry after `Retry-After` seconds",
        "headers": {"Retry-After": {"schema": {"type": "integer", "minimum": 1}}},
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    });
    if let Some(paths) = document["paths"].as_object_mut() {
        for (_, item) in paths.iter_mut().filter(|(path, _)| path.starts_with("/v1/")) {
            for operation in item.as_object_mut().into_iter().flat_map(|item| item.values_mut()) {
                if let Some(responses) = operation.get_mut("responses").and_then(Value::as_object_mut) {
                    responses.insert("429".to_owned(), limited.clone());
                }
            }
        }
    }
    document
}

/// The document's text, built once.
pub(crate) fn document_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| with_rate_limits(document()).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::routes;
    use crate::store::sqlite::SqliteStore;
    use std::collections::BTreeSet;

    #[test]
    fn documents_exactly_the_routes_the_router_serves() {
        let document = document();
        let documented: BTreeSet<(String, String)> = document["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .unwrap()
                    .keys()
                    .map(move |method| (path.clone(), method.to_uppercase()))
            })
            .collect();
        let served: BTreeSet<(String, String)> = routes::<SqliteStore>()
            .iter()
            .map(|route| (route.path.to_owned(), route.method.to_string()))
            .collect();
        assert_eq!(documented, served);
    }

    #[test]
    fn every_v1_operation_documents_429() {
        let document: Value = serde_json::from_str(document_text()).unwrap();
        let mut operations = 0;
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let has_429 = operation.pointer("/responses/429").is_some();
                assert_eq!(has_429, path.starts_with("/v1/"), "{method} {path}");
                operations += 1;
            }
        }
        assert!(operations > 5);
    }

    #[test]
    fn documents_who_may_call_each_route() {
        let document = document();
        for route in routes::<SqliteStore>() {
            let operation = &document["paths"][route.path][route.method.as_str().to_lowercase()];
            let scheme = operation["security"][0]
                .as_object()
                .and_then(|s| s.keys().next().cloned());
            let expected = match route.access {
                crate::auth::Access::Public => None,
                crate::auth::Access::Device => Some("deviceSignature".to_owned()),
                crate::auth::Access::Operator => Some("operatorSignature".to_owned()),
            };
            assert_eq!(scheme, expected, "{} {}", route.method, route.path);
        }
    }

    #[test]
    fn every_reference_resolves() {
        fn refs(value: &Value, found: &mut Vec<String>) {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(target)) = map.get("$ref") {
                        found.push(target.clone());
                    }
                    map.values().for_each(|v| refs(v, found));
                }
                Value::Array(items) => items.iter().for_each(|v| refs(v, found)),
                _ => {}
            }
        }
        let document = with_rate_limits(document());
        let mut found = Vec::new();
        refs(&document, &mut found);
        assert!(!found.is_empty());
        for target in found {
            let pointer = target.strip_prefix('#').expect("local reference");
            assert!(document.pointer(pointer).is_some(), "{target} does not resolve");
        }
    }
}
