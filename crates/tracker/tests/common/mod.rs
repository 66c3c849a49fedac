//! Helpers shared by the tracker's integration tests: a tracker on 127.0.0.1:0, an HTTP client
//! that speaks the API, signed manifests and a real redis-server.

#![allow(dead_code)] // Each test binary uses a different subset.

use pcdn_core::ed25519_dalek::SigningKey;
use pcdn_core::manifest::{Manifest, SignedManifest};
use pcdn_identity::{DeviceIdentity, OperatorKey, Role, request, unix_millis};
use pcdn_tracker::{RunningTracker, StoreUrl, TrackerConfig, bind};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::future::Future;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

/// A tracker on 127.0.0.1:0 with `store` and `ttl` (heartbeat interval 1 s).
pub async fn start(store: StoreUrl, ttl: Duration) -> RunningTracker {
    let mut config = TrackerConfig::new("127.0.0.1:0".parse().unwrap(), store, operator().public());
    config.ttl = ttl;
    config.heartbeat = Duration::from_secs(1);
    bind(config).await.expect("tracker starts")
}

/// A tracker like `start`'s without per-source rate limits: for tests that set up thousands of
/// devices from one address.
pub async fn start_unlimited(store: StoreUrl, ttl: Duration) -> RunningTracker {
    let mut config = TrackerConfig::new("127.0.0.1:0".parse().unwrap(), store, operator().public());
    config.ttl = ttl;
    config.heartbeat = Duration::from_secs(1);
    config.rate_limits = pcdn_tracker::RateLimits::OFF;
    bind(config).await.expect("tracker starts")
}

/// A tracker on a SQLite file in `dir`.
pub async fn start_sqlite(dir: &Path, ttl: Duration) -> RunningTracker {
    start(StoreUrl::Sqlite(dir.join("tracker.db")), ttl).await
}

/// A status and, when the body is JSON, the parsed body.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub content_type: String,
    pub bytes: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or_else(|error| {
            panic!(
                "{} answer is not JSON ({error}): {:?}",
                self.status,
                String::from_utf8_lossy(&self.bytes)
            )
        })
    }

    /// Asserts the status and, for an error, the JSON error shape and code.
    pub fn expect(self, status: u16) -> Answer {
        assert_eq!(
            self.status.as_u16(),
            status,
            "body: {}",
            String::from_utf8_lossy(&self.bytes)
        );
        self
    }

    pub fn expect_error(self, status: u16, code: &str) -> Answer {
        let answer = self.expect(status);
        assert_error_shape(&answer);
        assert_eq!(answer.json()["error"], code, "{}", answer.json());
        answer
    }
}

/// The API's error shape: a JSON object with a string `error` and a non-empty string `message`.
pub fn assert_error_shape(answer: &Answer) {
    assert!(
        answer.content_type.starts_with("application/json"),
        "{} error with content type {:?}: {:?}",
        answer.status,
        answer.content_type,
        String::from_utf8_lossy(&answer.bytes)
    );
    let body = answer.json();
    let code = body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no `error` code: {body}"));
    assert!(
        !code.is_empty() && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
        "error code {code:?} is not snake_case"
    );
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "no `message`: {body}"
    );
}

/// The operator key every test tracker trusts.
pub fn operator() -> OperatorKey {
    OperatorKey::from_secret([42; 32])
}

/// A credential for `id` and `role` from the test operator, valid for a day.
pub fn enroll(id: &str, role: Role) -> DeviceIdentity {
    let now = unix_millis();
    operator().enroll(id, role, now, now / 1000 + 86_400).unwrap()
}

/// Who signs the requests of an [`Api`].
#[derive(Clone, Debug)]
pub enum Signer {
    /// The device the request is about: the `{id}` in the path, the `id` of a registration,
    /// the last origin registered for a manifest, the operator for a revocation.
    Auto,
    /// This device, whatever the request.
    Device(String),
    /// Nobody (no `Authorization` header).
    Nobody,
}

/// Every device identity of this test process, by id: enrolled on first use with the test
/// operator (as an edge, or as an origin by `register_origin`), so that every `Api` signs as the
/// same device for the same id.
static IDENTITIES: LazyLock<Mutex<HashMap<String, DeviceIdentity>>> = LazyLock::new(Mutex::default);

/// An HTTP client for one tracker.
#[derive(Clone)]
pub struct Api {
    pub base: String,
    pub http: reqwest::Client,
    pub signer: Signer,
    /// The origin that signs manifests for `Signer::Auto` (the last one `register_origin`ed).
    publisher: Arc<Mutex<Option<String>>>,
}

impl Api {
    pub fn new(addr: SocketAddr) -> Api {
        Api {
            base: format!("http://{addr}"),
            http: reqwest::Client::new(),
            signer: Signer::Auto,
            publisher: Arc::default(),
        }
    }

    /// The same client signing nothing.
    pub fn unsigned(&self) -> Api {
        Api {
            signer: Signer::Nobody,
            ..self.clone()
        }
    }

    /// The same client signing every request as device `id`.
    pub fn as_device(&self, id: &str) -> Api {
        Api {
            signer: Signer::Device(id.to_owned()),
            ..self.clone()
        }
    }

    /// The identity of `id`, enrolled now if it has none, or if `role` is given and differs.
    pub fn identity(&self, id: &str, role: Option<Role>) -> DeviceIdentity {
        let mut identities = IDENTITIES.lock().unwrap();
        match identities.get(id) {
            Some(identity) if role.is_none_or(|role| role == identity.role()) => identity.clone(),
            _ => {
                let identity = enroll(id, role.unwrap_or(Role::Edge));
                identities.insert(id.to_owned(), identity.clone());
                identity
            }
        }
    }

    /// Uses `identity` for its id from now on.
    pub fn set_identity(&self, identity: DeviceIdentity) {
        IDENTITIES.lock().unwrap().insert(identity.id().to_owned(), identity);
    }

    /// An unsigned request.
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http.request(method, format!("{}{path}", self.base))
    }

    /// The `Authorization` header this client's signer gives the request, if any.
    pub fn authorization(&self, method: &Method, path: &str, body: &[u8]) -> Option<String> {
        let nonce = request::random_nonce().unwrap();
        let device = match &self.signer {
            Signer::Nobody => return None,
            Signer::Device(id) => id.clone(),
            Signer::Auto if path.starts_with("/v1/revocations") || path.starts_with("/v1/quarantine/clear") => {
                return Some(request::operator_authorization(
                    &operator(),
                    method.as_str(),
                    path,
                    body,
                    unix_millis(),
                    nonce,
                ));
            }
            Signer::Auto => {
                let segments: Vec<&str> = path.split('/').collect();
                if let ["", "v1", "devices", id, ..] = segments[..] {
                    id.to_owned()
                } else if path.starts_with("/v1/devices") {
                    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                    body["id"].as_str().unwrap_or("edge-1").to_owned()
                } else if path.starts_with("/v1/contents/") {
                    self.publisher
                        .lock()
                        .unwrap()
                        .clone()
                        .unwrap_or_else(|| "origin".into())
                } else {
                    return None;
                }
            }
        };
        let id = if pcdn_identity::check_device_id(&device).is_ok() {
            device
        } else {
            "edge-1".to_owned()
        };
        let identity = self.identity(&id, None);
        Some(request::device_authorization(
            &identity,
            method.as_str(),
            path,
            body,
            unix_millis(),
            nonce,
        ))
    }

    /// A request with `body`, signed by this client's signer.
    pub fn signed(&self, method: Method, path: &str, body: impl Into<Vec<u8>>) -> reqwest::RequestBuilder {
        let body = body.into();
        let mut builder = self.request(method.clone(), path);
        if let Some(authorization) = self.authorization(&method, path, &body) {
            builder = builder.header(reqwest::header::AUTHORIZATION, authorization);
        }
        builder.body(body)
    }

    pub async fn send(&self, builder: reqwest::RequestBuilder) -> Answer {
        let response = builder.send().await.expect("tracker answers");
        let status = response.status();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap_or("").to_owned())
            .unwrap_or_default();
        let bytes = response.bytes().await.expect("body").to_vec();
        Answer {
            status,
            content_type,
            bytes,
        }
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        let builder = match body {
            Some(body) => self
                .signed(method, path, serde_json::to_vec(&body).unwrap())
                .header(reqwest::header::CONTENT_TYPE, "application/json"),
            None => self.signed(method, path, Vec::new()),
        };
        self.send(builder).await
    }

    pub async fn register(&self, id: &str, addr: &str, capacity: u64) -> Answer {
        let body = json!({"id": id, "addr": addr, "origin": false, "upload_capacity_bps": capacity});
        self.call(Method::POST, "/v1/devices", Some(body)).await
    }

    pub async fn register_origin(&self, id: &str, addr: &str, key: &SigningKey) -> Answer {
        self.identity(id, Some(Role::Origin));
        *self.publisher.lock().unwrap() = Some(id.to_owned());
        let body = json!({
            "id": id, "addr": addr, "origin": true, "upload_capacity_bps": 100_000_000u64,
            "public_key": hex::encode(key.verifying_key().to_bytes()),
        });
        self.call(Method::POST, "/v1/devices", Some(body)).await
    }

    pub async fn heartbeat(&self, id: &str, sessions: u32, upload_bps: u64, healthy: bool) -> Answer {
        let body = json!({"sessions": sessions, "upload_bps": upload_bps, "healthy": healthy});
        self.call(Method::POST, &format!("/v1/devices/{id}/heartbeat"), Some(body))
            .await
    }

    pub async fn announce(&self, id: &str, contents: &[impl AsRef<str>]) -> Answer {
        let contents: Vec<&str> = contents.iter().map(AsRef::as_ref).collect();
        let body = json!({ "contents": contents });
        self.call(Method::PUT, &format!("/v1/devices/{id}/contents"), Some(body))
            .await
    }

    pub async fn remove(&self, id: &str) -> Answer {
        self.call(Method::DELETE, &format!("/v1/devices/{id}"), None).await
    }

    pub async fn put_manifest(&self, cid: &str, bytes: Vec<u8>) -> Answer {
        let builder = self
            .signed(Method::PUT, &format!("/v1/contents/{cid}/manifest"), bytes)
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream");
        self.send(builder).await
    }

    pub async fn get_manifest(&self, cid: &str) -> Answer {
        self.call(Method::GET, &format!("/v1/contents/{cid}/manifest"), None)
            .await
    }

    /// The lookup's JSON (asserting 200).
    pub async fn lookup(&self, cid: &str, n: Option<usize>) -> Value {
        let path = match n {
            Some(n) => format!("/v1/contents/{cid}/servers?n={n}"),
            None => format!("/v1/contents/{cid}/servers"),
        };
        self.call(Method::GET, &path, None).await.expect(200).json()
    }

    /// The ids in the lookup's `servers`, in order.
    pub async fn server_ids(&self, cid: &str) -> Vec<String> {
        ids(&self.lookup(cid, None).await["servers"])
    }

    pub async fn health(&self) -> Value {
        self.call(Method::GET, "/health", None).await.expect(200).json()
    }

    pub async fn metrics(&self) -> String {
        let answer = self.call(Method::GET, "/metrics", None).await.expect(200);
        String::from_utf8(answer.bytes).unwrap()
    }
}

/// The `id`s of a JSON array of servers.
pub fn ids(servers: &Value) -> Vec<String> {
    servers
        .as_array()
        .expect("an array of servers")
        .iter()
        .map(|server| server["id"].as_str().expect("an id").to_owned())
        .collect()
}

/// The value of an unlabelled metric (`name value`) in OpenMetrics text.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(' ')?;
        (key == name).then(|| value.parse().ok()).flatten()
    })
}

/// A deterministic Ed25519 key.
pub fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// A signed manifest of some made-up content and its content id in hex.
pub fn signed_manifest(seed: u8, signer: &SigningKey) -> (String, Vec<u8>) {
    let data: Vec<u8> = (0..10_000u32)
        .map(|i| (i as u8).wrapping_mul(seed).wrapping_add(seed))
        .collect();
    let manifest = Manifest::from_bytes(&data, 1024, 4096).unwrap();
    let signed = SignedManifest::sign(manifest, signer);
    (hex::encode(signed.content_id().0), signed.encode())
}

/// A content id in hex.
pub fn cid(seed: u8) -> String {
    hex::encode([seed; 32])
}

/// Polls `check` every 50 ms until it returns true; panics after `limit`.
pub async fn wait_until<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(
            started.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A real redis-server on 127.0.0.1 at a free port, in a temporary directory, with persistence
/// off; killed when dropped.
pub struct RedisServer {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        match Command::new("redis-server").arg("--version").output() {
            Ok(output) if output.status.success() => {}
            Ok(output) => panic!("`redis-server --version` failed: {output:?}"),
            Err(error) => panic!(
                "redis-server is not on PATH ({error}): the Redis tests need a real Redis server; \
                 run scripts/test.sh, which installs it (apt-get install redis-server)"
            ),
        }
        let dir = tempfile::tempdir().unwrap();
        // The free port is found by binding port 0 and letting go of it, so another socket (a
        // parallel test's tracker or client) can take it before redis-server binds it; then
        // redis-server exits and the start is retried on another port.
        for _attempt in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let mut child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .args(["--daemonize", "no", "--loglevel", "warning"])
                .arg("--dir")
                .arg(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("redis-server starts");
            if wait_ready(&mut child, port) {
                return RedisServer { child, port, _dir: dir };
            }
            let _ = child.wait();
        }
        panic!("redis-server could not start on a free port in 5 attempts (see its errors above)");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }
}

/// Waits until the redis-server `child` answers on `port` (true) or has exited (false).
fn wait_ready(child: &mut Child, port: u16) -> bool {
    let started = Instant::now();
    let url = format!("redis://127.0.0.1:{port}/0");
    loop {
        if let Ok(mut client) = redis::Client::open(url.as_str()).and_then(|c| c.get_connection()) {
            // The server answering must be this child, not one another test started on a
            // port this child then failed to bind.
            let info: Result<String, _> = redis::cmd("INFO").arg("server").query(&mut client);
            let pid = format!("process_id:{}", child.id());
            if info.is_ok_and(|info| info.lines().any(|line| line.trim() == pid)) {
                return true;
            }
        }
        if child.try_wait().expect("redis-server status").is_some() {
            return false;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "redis-server on port {port} did not answer PING within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether something accepts TCP connections at `addr`.
pub fn listening(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}
