//! A client of the tracker's HTTP API v1 (the contract in docs/tracker.md): device
//! registration, heartbeats, announcements and manifests for servers; manifest and server
//! lookups for clients. Every error names the request that failed and why.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use pcdn_identity::request::{device_authorization, operator_authorization, random_nonce};
use pcdn_identity::{DeviceIdentity, OperatorKey, unix_millis};

use pcdn_core::wire::ContentId;
use serde::{Deserialize, Serialize};

use crate::store::content_id_hex;

/// How long one request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a tracker request failed.
#[derive(Debug, thiserror::Error)]
pub enum TrackerError {
    #[error("tracker URL \"{url}\": {why}")]
    BadUrl { url: String, why: String },
    #[error("tracker CA file {path}: {why}")]
    BadCa { path: String, why: String },
    #[error("{method} {url}: {detail}")]
    Transport {
        method: &'static str,
        url: String,
        /// The cause chain of the transport error, flattened (connection refused, timed out...).
        detail: String,
    },
    #[error("{method} {url}: HTTP {status} {code}: {message}")]
    Status {
        method: &'static str,
        url: String,
        status: u16,
        /// The contract's snake_case error code (or empty if the body had none).
        code: String,
        message: String,
    },
    #[error("{method} {url}: unexpected answer: {detail}")]
    Decode {
        method: &'static str,
        url: String,
        detail: String,
    },
}

impl TrackerError {
    /// The HTTP status of a refused request.
    pub fn status(&self) -> Option<u16> {
        match self {
            TrackerError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The tracker does not know this device (it expired, or the tracker lost its state).
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// The contract's error code of a refused request (`expired_credential`, `revoked`...).
    pub fn code(&self) -> Option<&str> {
        match self {
            TrackerError::Status { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// A device's registration (`POST /v1/devices`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    pub id: String,
    pub addr: String,
    pub origin: bool,
    pub upload_capacity_bps: u64,
    /// Ed25519 public key, 64 hex characters; required for an origin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
}

/// The tracker's answer to a registration.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Registered {
    pub ttl_secs: u64,
    pub heartbeat_secs: u64,
    /// This registration's generation (0 from a tracker that does not send one); heartbeat
    /// answers carry the record's.
    #[serde(default)]
    pub generation: u64,
    /// With the tracker's UDP rendezvous on: the device's token and the tracker's UDP ports.
    #[serde(default)]
    pub rendezvous: Option<RendezvousGrant>,
}

/// The UDP side of a registration (docs/protocol.md §11.2).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct RendezvousGrant {
    /// Hex.
    pub token: String,
    pub udp_port: u16,
    pub alt_port: u16,
}

/// A device's heartbeat (`POST /v1/devices/{id}/heartbeat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Heartbeat {
    pub sessions: u64,
    pub upload_bps: u64,
    pub healthy: bool,
    /// The device's cache budget in bytes (`pcdn serve --cache-size`): what the tracker's
    /// placement may fill. `None`: not a cache, the tracker assigns it nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_bytes: Option<u64>,
    /// Free bytes on the cache's file system: the placement never assigns more than the cache
    /// holds plus this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_bytes: Option<u64>,
}

/// The tracker's answer to a heartbeat.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct HeartbeatReply {
    pub ttl_secs: u64,
    /// The generation of the device's record at the tracker (0 from a tracker that does not
    /// send one): another than the one its registration got means the record was replaced
    /// without it, and it must register again.
    #[serde(default)]
    pub generation: u64,
    /// Every content this device should hold (the tracker's placement); `None` when the tracker
    /// places nothing (`--placement none`) or has not placed this device yet: keep what you hold.
    #[serde(default, deserialize_with = "content_ids")]
    pub assignment: Option<Vec<ContentId>>,
}

/// A JSON list of content ids in hex, strictly (64 hex characters each).
fn content_ids<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Vec<ContentId>>, D::Error> {
    let Some(texts) = Option::<Vec<String>>::deserialize(deserializer)? else {
        return Ok(None);
    };
    texts
        .iter()
        .map(|text| {
            let mut id = [0u8; 32];
            hex::decode_to_slice(text, &mut id)
                .map(|()| ContentId(id))
                .map_err(|_| {
                    serde::de::Error::custom(format!("expected a content id of 64 hex characters, got {text:?}"))
                })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// One device in a lookup's answer.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct DeviceInfo {
    pub id: String,
    pub addr: String,
    pub origin: bool,
    pub upload_capacity_bps: u64,
    pub upload_bps: u64,
    pub free_upload_bps: u64,
    pub sessions: u64,
    pub healthy: bool,
    #[serde(default)]
    pub public_key: Option<String>,
    /// Behind a NAT: `addr` is its public mapping, reached by hole punching.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub punch: bool,
}

impl DeviceInfo {
    /// The device's UDP address.
    pub fn socket_addr(&self) -> Result<SocketAddr, String> {
        self.addr
            .parse()
            .map_err(|e| format!("device {}: address \"{}\" is not IP:PORT: {e}", self.id, self.addr))
    }
}

/// Most origins a client takes from one lookup: the tracker lists 4 by default
/// (`pcdn tracker --max-origins`), and each is a path the client opens.
pub const MAX_LOOKUP_ORIGINS: usize = 8;

/// `GET /v1/contents/{cid}/servers`: edges holding the content, and the best origins.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct Lookup {
    pub content: String,
    pub servers: Vec<DeviceInfo>,
    pub origins: Vec<DeviceInfo>,
    /// With the tracker's UDP rendezvous: devices left out, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreachable: Vec<UnreachableDevice>,
}

/// A device a lookup left out.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct UnreachableDevice {
    pub id: String,
    pub reason: String,
}

#[derive(Deserialize)]
struct Announced {
    #[allow(dead_code)]
    announced: u64,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: String,
    message: String,
}

/// The answer to `POST /v1/revocations`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Revoked {
    pub id: String,
    pub revoked_before_ms: u64,
    pub removed: bool,
}

/// Who signs a request.
#[derive(Clone, Copy)]
enum Auth<'a> {
    /// Nobody: lookups and manifest reads are public.
    Public,
    /// This client's device credential.
    Device,
    /// The operator key.
    Operator(&'a OperatorKey),
}

/// A tracker client. Cheap to clone.
#[derive(Clone)]
pub struct TrackerClient {
    base: String,
    identity: Option<Arc<DeviceIdentity>>,
    http: reqwest::Client,
}

impl std::fmt::Debug for TrackerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrackerClient")
            .field("base", &self.base)
            .field("device", &self.identity.as_ref().map(|identity| identity.id()))
            .finish()
    }
}

impl TrackerClient {
    /// A client of the tracker at `url` (`http://host:port` or `https://host:port`, optionally
    /// with a path prefix). `identity` signs the device-side requests; clients' lookups need
    /// none. An https tracker is verified against the system's root certificates (see
    /// `with_tracker_ca`).
    pub fn new(url: &str, identity: Option<DeviceIdentity>) -> Result<TrackerClient, TrackerError> {
        let bad = |why: String| TrackerError::BadUrl {
            url: url.to_owned(),
            why,
        };
        let parsed = reqwest::Url::parse(url).map_err(|e| bad(format!("{e}; expected e.g. http://127.0.0.1:7800")))?;
        match parsed.scheme() {
            "http" | "https" => {}
            other => return Err(bad(format!("scheme \"{other}\" is neither http nor https"))),
        }
        if parsed.host_str().is_none() {
            return Err(bad("no host".to_owned()));
        }
        let http = http_client(None).map_err(|e| bad(format!("cannot build an HTTP client: {e}")))?;
        Ok(TrackerClient {
            base: url.trim_end_matches('/').to_owned(),
            identity: identity.map(Arc::new),
            http,
        })
    }

    /// Trusts only the CA certificates of the PEM file `ca` for the tracker's HTTPS certificate,
    /// instead of the system's roots (a private CA). Errors name the file; an http:// tracker
    /// with a CA is refused, since the CA would protect nothing.
    pub fn with_tracker_ca(mut self, ca: &Path) -> Result<TrackerClient, TrackerError> {
        let bad = |why: String| TrackerError::BadCa {
            path: ca.display().to_string(),
            why,
        };
        if !self.base.starts_with("https://") {
            return Err(bad(format!(
                "a CA is for https:// trackers, but the tracker URL is {}",
                self.base
            )));
        }
        let pem = std::fs::read(ca).map_err(|e| bad(format!("cannot read it: {e}")))?;
        let certs =
            reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| bad(format!("not PEM certificates: {e}")))?;
        if certs.is_empty() {
            return Err(bad("holds no PEM CERTIFICATE block".to_owned()));
        }
        self.http = http_client(Some(certs)).map_err(|e| bad(format!("cannot build an HTTP client with it: {e}")))?;
        Ok(self)
    }

    /// The tracker's base URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    /// `POST /v1/devices`.
    pub async fn register(&self, registration: &Registration) -> Result<Registered, TrackerError> {
        let path = "/v1/devices";
        let response = self
            .send("POST", path, Some(json_bytes(registration)), Auth::Device)
            .await?;
        decode_json("POST", &self.url_of(path), response).await
    }

    /// `POST /v1/revocations`, signed with the operator key: the tracker refuses `id`'s
    /// credentials issued before now and forgets its registration.
    pub async fn revoke(&self, operator: &OperatorKey, id: &str) -> Result<Revoked, TrackerError> {
        let path = "/v1/revocations";
        let body = json_bytes(&serde_json::json!({ "id": id }));
        let response = self.send("POST", path, Some(body), Auth::Operator(operator)).await?;
        decode_json("POST", &self.url_of(path), response).await
    }

    /// `POST /v1/reports`: this client banned device `id` for corrupt data of `content` (smart
    /// ban); the tracker quarantines a device that enough distinct clients report.
    pub async fn report_corrupt(&self, id: &str, content: &ContentId) -> Result<(), TrackerError> {
        let path = "/v1/reports";
        let body = serde_json::json!({ "device": id, "content": content_id_hex(content), "reason": "corrupt" });
        let response = self.send("POST", path, Some(json_bytes(&body)), Auth::Public).await?;
        let _: serde_json::Value = decode_json("POST", &self.url_of(path), response).await?;
        Ok(())
    }

    /// `POST /v1/quarantine/clear`, signed with the operator key: the tracker forgets every
    /// corrupt-data report of `id`, ending its quarantine; whether it had any.
    pub async fn clear_quarantine(&self, operator: &OperatorKey, id: &str) -> Result<bool, TrackerError> {
        let path = "/v1/quarantine/clear";
        let body = json_bytes(&serde_json::json!({ "id": id }));
        let response = self.send("POST", path, Some(body), Auth::Operator(operator)).await?;
        let cleared: serde_json::Value = decode_json("POST", &self.url_of(path), response).await?;
        Ok(cleared["cleared"].as_bool().unwrap_or(false))
    }

    /// `POST /v1/devices/{id}/heartbeat`; a 404, or another generation than the
    /// registration's, means the device must register again.
    pub async fn heartbeat(&self, id: &str, heartbeat: &Heartbeat) -> Result<HeartbeatReply, TrackerError> {
        let path = format!("/v1/devices/{id}/heartbeat");
        let response = self
            .send("POST", &path, Some(json_bytes(heartbeat)), Auth::Device)
            .await?;
        decode_json("POST", &self.url_of(&path), response).await
    }

    /// `PUT /v1/devices/{id}/contents`: the device's announced set becomes `contents`.
    pub async fn announce(&self, id: &str, contents: &[ContentId]) -> Result<(), TrackerError> {
        let path = format!("/v1/devices/{id}/contents");
        let body = serde_json::json!({ "contents": contents.iter().map(content_id_hex).collect::<Vec<_>>() });
        let response = self.send("PUT", &path, Some(json_bytes(&body)), Auth::Device).await?;
        let _: Announced = decode_json("PUT", &self.url_of(&path), response).await?;
        Ok(())
    }

    /// `DELETE /v1/devices/{id}`.
    pub async fn deregister(&self, id: &str) -> Result<(), TrackerError> {
        self.send("DELETE", &format!("/v1/devices/{id}"), None, Auth::Device)
            .await?;
        Ok(())
    }

    /// `PUT /v1/contents/{cid}/manifest` with the signed manifest bytes.
    pub async fn put_manifest(&self, id: &ContentId, signed_manifest: Vec<u8>) -> Result<(), TrackerError> {
        let path = format!("/v1/contents/{}/manifest", content_id_hex(id));
        let body = (signed_manifest, "application/octet-stream");
        self.send("PUT", &path, Some(body), Auth::Device).await?;
        Ok(())
    }

    /// `GET /v1/contents/{cid}/manifest`: the signed manifest bytes, or `None` if the tracker
    /// has none.
    pub async fn get_manifest(&self, id: &ContentId) -> Result<Option<Vec<u8>>, TrackerError> {
        let path = format!("/v1/contents/{}/manifest", content_id_hex(id));
        match self.send("GET", &path, None, Auth::Public).await {
            Ok(response) => {
                let bytes = response
                    .bytes()
                    .await
                    .map_err(|e| transport("GET", &self.url_of(&path), &e))?;
                Ok(Some(bytes.to_vec()))
            }
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET /v1/contents/{cid}/servers?n={n}`.
    ///
    /// At most `n` servers and `MAX_LOOKUP_ORIGINS` origins are kept, whatever the tracker
    /// lists: a client opens a path to each, so a tracker (or whoever answers in its place)
    /// must not be able to make it open thousands.
    pub async fn servers(&self, id: &ContentId, n: u32) -> Result<Lookup, TrackerError> {
        self.servers_punching(id, n, None).await
    }

    /// `GET /v1/contents/{cid}/servers?n={n}&punch={token}`: with a client token, the tracker
    /// asks the NATed servers it returns to punch towards the client's mapping.
    pub async fn servers_punching(
        &self,
        id: &ContentId,
        n: u32,
        punch: Option<[u8; 8]>,
    ) -> Result<Lookup, TrackerError> {
        let mut path = format!("/v1/contents/{}/servers?n={n}", content_id_hex(id));
        if let Some(token) = punch {
            path.push_str("&punch=");
            path.push_str(&hex::encode(token));
        }
        let response = self.send("GET", &path, None, Auth::Public).await?;
        let mut lookup: Lookup = decode_json("GET", &self.url_of(&path), response).await?;
        lookup.servers.truncate(n as usize);
        lookup.origins.truncate(MAX_LOOKUP_ORIGINS);
        Ok(lookup)
    }

    /// `GET /v1/rendezvous`: the tracker's two UDP ports, or `None` when it runs without.
    pub async fn rendezvous_ports(&self) -> Result<Option<(u16, u16)>, TrackerError> {
        #[derive(Deserialize)]
        struct Ports {
            udp_port: u16,
            alt_port: u16,
        }
        let path = "/v1/rendezvous";
        match self.send("GET", path, None, Auth::Public).await {
            Ok(response) => {
                let ports: Ports = decode_json("GET", &self.url_of(path), response).await?;
                Ok(Some((ports.udp_port, ports.alt_port)))
            }
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn url_of(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends `method` to `path` (relative to the base URL: what the signature covers, so that a
    /// path prefix stripped by a proxy in front of the tracker does not break it).
    async fn send(
        &self,
        method: &'static str,
        path: &str,
        body: Option<(Vec<u8>, &'static str)>,
        auth: Auth<'_>,
    ) -> Result<reqwest::Response, TrackerError> {
        let url = self.url_of(path);
        let url = url.as_str();
        let http_method = reqwest::Method::from_bytes(method.as_bytes()).expect("a standard method");
        let mut request = self.http.request(http_method, url);
        let body_bytes = body.as_ref().map_or(&[][..], |(bytes, _)| bytes);
        let sign = |sign: &dyn Fn(u64, [u8; 16]) -> String| -> Result<String, TrackerError> {
            let nonce = random_nonce().map_err(|why| TrackerError::Transport {
                method,
                url: url.to_owned(),
                detail: why,
            })?;
            Ok(sign(unix_millis(), nonce))
        };
        let authorization = match auth {
            Auth::Public => None,
            Auth::Device => match &self.identity {
                Some(identity) => Some(sign(&|now, nonce| {
                    device_authorization(identity, method, path, body_bytes, now, nonce)
                })?),
                None => None,
            },
            Auth::Operator(operator) => Some(sign(&|now, nonce| {
                operator_authorization(operator, method, path, body_bytes, now, nonce)
            })?),
        };
        if let Some(authorization) = authorization {
            request = request.header(reqwest::header::AUTHORIZATION, authorization);
        }
        if let Some((bytes, content_type)) = body {
            request = request.header(reqwest::header::CONTENT_TYPE, content_type).body(bytes);
        }
        let response = request.send().await.map_err(|e| transport(method, url, &e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let text = response.text().await.unwrap_or_default();
        let (code, message) = match serde_json::from_str::<ErrorBody>(&text) {
            Ok(body) => (body.error, body.message),
            Err(_) => (String::new(), text.chars().take(200).collect()),
        };
        Err(TrackerError::Status {
            method,
            url: url.to_owned(),
            status: status.as_u16(),
            code,
            message,
        })
    }
}

/// The HTTP client of the tracker: HTTPS through rustls, verified against `roots` only, or
/// against the system's roots when `None`.
fn http_client(roots: Option<Vec<reqwest::Certificate>>) -> reqwest::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT);
    if let Some(roots) = roots {
        builder = builder.tls_certs_only(roots);
    }
    builder.build()
}

fn transport(method: &'static str, url: &str, e: &reqwest::Error) -> TrackerError {
    // reqwest's own message is generic ("error sending request"); the cause says what happened.
    let mut detail = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        detail.push_str(": ");
        detail.push_str(&cause.to_string());
        source = cause.source();
    }
    if e.is_timeout() {
        detail.push_str(" (timed out)");
    }
    if url.starts_with("https://") {
        if detail.contains("not valid for name") {
            detail.push_str(" (the tracker's certificate does not name this host: use a name it lists in the URL)");
        } else if detail.contains("certificate") {
            detail.push_str(
                " (the tracker's certificate is not signed by a trusted CA: pass --tracker-ca FILE with the CA that signed it)",
            );
        } else if detail.contains("InvalidContentType") || detail.contains("corrupt message") {
            detail.push_str(" (the tracker does not speak TLS here: is it an http:// URL?)");
        }
    }
    TrackerError::Transport {
        method,
        url: url.to_owned(),
        detail,
    }
}

fn json_bytes<T: Serialize>(value: &T) -> (Vec<u8>, &'static str) {
    let bytes = serde_json::to_vec(value).expect("request bodies serialise to JSON");
    (bytes, "application/json")
}

async fn decode_json<T: serde::de::DeserializeOwned>(
    method: &'static str,
    url: &str,
    response: reqwest::Response,
) -> Result<T, TrackerError> {
    let bytes = response.bytes().await.map_err(|e| transport(method, url, &e))?;
    serde_json::from_slice(&bytes).map_err(|e| TrackerError::Decode {
        method,
        url: url.to_owned(),
        detail: format!("{e} in {}", String::from_utf8_lossy(&bytes[..bytes.len().min(200)])),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        assert!(TrackerClient::new("http://127.0.0.1:7800", None).is_ok());
        assert!(TrackerClient::new("https://tracker.invalid", None).is_ok());
        let e = TrackerClient::new("ftp://tracker.invalid", None).unwrap_err();
        assert!(e.to_string().contains("neither http nor https"), "{e}");
        let e = TrackerClient::new("127.0.0.1:7800", None).unwrap_err();
        assert!(e.to_string().contains("127.0.0.1:7800"), "{e}");
    }

    #[tokio::test]
    async fn a_refused_connection_names_the_url() {
        // A port nothing listens on: bind one, note it, close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = TrackerClient::new(&format!("http://127.0.0.1:{port}/"), None).unwrap();
        let e = client.servers(&ContentId([7; 32]), 8).await.unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("GET http://127.0.0.1:{port}/v1/contents/0707")),
            "{text}"
        );
        assert!(matches!(e, TrackerError::Transport { .. }));
    }

    /// A tracker (or an impostor answering for it) listing 2,000 origins and 100 servers
    /// cannot make the client take more than `n` servers and `MAX_LOOKUP_ORIGINS` origins.
    #[tokio::test]
    async fn a_lookup_keeps_n_servers_and_a_few_origins_whatever_the_answer() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let device = |i: usize, origin: bool| {
            serde_json::json!({"id": format!("d{i}"), "addr": format!("127.0.0.1:{}", 1000 + i),
                "origin": origin, "upload_capacity_bps": 1, "upload_bps": 0, "free_upload_bps": 1,
                "sessions": 0, "healthy": true})
        };
        let body = serde_json::json!({
            "content": "07".repeat(32),
            "servers": (0..100).map(|i| device(i, false)).collect::<Vec<_>>(),
            "origins": (0..2_000).map(|i| device(i, true)).collect::<Vec<_>>(),
        })
        .to_string();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = vec![0u8; 4096];
            let _ = stream.read(&mut request).await.unwrap();
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes()).await.unwrap();
            stream.write_all(body.as_bytes()).await.unwrap();
        });
        let client = TrackerClient::new(&format!("http://{addr}"), None).unwrap();
        let lookup = client.servers(&ContentId([7; 32]), 8).await.unwrap();
        assert_eq!((lookup.servers.len(), lookup.origins.len()), (8, MAX_LOOKUP_ORIGINS));
        assert_eq!(lookup.servers[0].id, "d0", "the tracker's order is kept");
        server.await.unwrap();
    }

    #[test]
    fn heartbeat_replies_carry_the_assignment_when_the_tracker_places() {
        let plain: HeartbeatReply = serde_json::from_str(r#"{"ttl_secs":30}"#).unwrap();
        assert_eq!(
            plain,
            HeartbeatReply {
                ttl_secs: 30,
                generation: 0,
                assignment: None
            }
        );
        let placed: HeartbeatReply = serde_json::from_str(&format!(
            r#"{{"ttl_secs":30,"generation":4,"assignment":["{}","{}"]}}"#,
            "ab".repeat(32),
            "CD".repeat(32)
        ))
        .unwrap();
        assert_eq!(placed.generation, 4);
        assert_eq!(
            placed.assignment,
            Some(vec![ContentId([0xab; 32]), ContentId([0xcd; 32])])
        );
        let empty: HeartbeatReply = serde_json::from_str(r#"{"ttl_secs":30,"assignment":[]}"#).unwrap();
        assert_eq!(empty.assignment, Some(vec![]));
        let bad = serde_json::from_str::<HeartbeatReply>(r#"{"ttl_secs":30,"assignment":["abc"]}"#).unwrap_err();
        assert!(bad.to_string().contains("64 hex characters"), "{bad}");
        // The disk fields are sent only when known.
        let mut heartbeat = Heartbeat {
            sessions: 1,
            upload_bps: 2,
            healthy: true,
            cache_bytes: None,
            free_bytes: None,
        };
        assert_eq!(
            serde_json::to_value(heartbeat).unwrap(),
            serde_json::json!({"sessions": 1, "upload_bps": 2, "healthy": true})
        );
        heartbeat.cache_bytes = Some(10);
        heartbeat.free_bytes = Some(5);
        assert_eq!(serde_json::to_value(heartbeat).unwrap()["cache_bytes"], 10);
    }
}
