//! The UDP rendezvous on loopback (docs/protocol.md §11), with real sockets and a real
//! tracker: probes decide who is in lookups, mappings that differ per destination make a device
//! unreachable, a wrong token is refused, a lookup with a client token makes the device punch
//! towards the client, and a fetch through a tracker with rendezvous completes. The NATs
//! themselves are tested in `crates/cli/tests/deploy.rs`.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use common::Lab;
use pcdn_core::wire::rendezvous::{self as rdv, BindStatus, Rendezvous as Msg};
use pcdn_identity::{DeviceIdentity, OperatorKey, Role, request, unix_millis};
use pcdn_net::{ServerConfig, TrackerSettings, spawn_server};
use pcdn_tracker::{RunningTracker, StoreUrl, TrackerConfig, UdpConfig};
use serde_json::Value;

/// The operator key the test tracker trusts.
fn operator() -> OperatorKey {
    OperatorKey::from_secret([42; 32])
}

/// A credential for `id` from the test operator.
fn enroll(id: &str, role: Role) -> DeviceIdentity {
    let now = unix_millis();
    operator().enroll(id, role, now, now / 1000 + 3600).unwrap()
}

/// A request to `base` + `path` with a JSON `body`, signed by `device`.
fn signed(device: &DeviceIdentity, method: &str, base: &str, path: &str, body: &Value) -> reqwest::RequestBuilder {
    let bytes = serde_json::to_vec(body).unwrap();
    let authorization = request::device_authorization(
        device,
        method,
        path,
        &bytes,
        unix_millis(),
        request::random_nonce().unwrap(),
    );
    http()
        .request(method.parse().unwrap(), format!("{base}{path}"))
        .header(reqwest::header::AUTHORIZATION, authorization)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(bytes)
}

async fn tracker() -> RunningTracker {
    let mut config = TrackerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        StoreUrl::SqliteMemory,
        operator().public(),
    );
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    config.udp = Some(UdpConfig {
        listen: any,
        alt_listen: any,
    });
    pcdn_tracker::bind(config).await.unwrap()
}

fn http() -> reqwest::Client {
    reqwest::Client::new()
}

/// Registers `id` at `addr` over HTTP and announces `content`; returns the registration answer.
async fn register(tracker: &RunningTracker, id: &str, addr: SocketAddr, content: &str) -> Value {
    let base = format!("http://{}", tracker.local_addr());
    let device = enroll(id, Role::Edge);
    let body = serde_json::json!({"id": id, "addr": addr.to_string(), "upload_capacity_bps": 1_000_000});
    let answer: Value = signed(&device, "POST", &base, "/v1/devices", &body)
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    let path = format!("/v1/devices/{id}/contents");
    signed(
        &device,
        "PUT",
        &base,
        &path,
        &serde_json::json!({"contents": [content]}),
    )
    .send()
    .await
    .unwrap()
    .error_for_status()
    .unwrap();
    answer
}

async fn lookup(tracker: &RunningTracker, content: &str, punch: Option<&str>) -> Value {
    let mut url = format!("http://{}/v1/contents/{content}/servers", tracker.local_addr());
    if let Some(token) = punch {
        url.push_str(&format!("?punch={token}"));
    }
    http().get(url).send().await.unwrap().json().await.unwrap()
}

/// Polls the lookup until `done` holds (generous: probes take up to seconds on a loaded host).
async fn lookup_until(tracker: &RunningTracker, content: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = lookup(tracker, content, None).await;
        if done(&answer) {
            return answer;
        }
        assert!(Instant::now() < deadline, "lookup never got there: {answer}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn reason_of<'a>(lookup: &'a Value, id: &str) -> Option<&'a str> {
    lookup["unreachable"]
        .as_array()?
        .iter()
        .find(|u| u["id"] == id)
        .and_then(|u| u["reason"].as_str())
}

fn listed(lookup: &Value, id: &str) -> Option<Value> {
    lookup["servers"].as_array()?.iter().find(|s| s["id"] == id).cloned()
}

fn send(socket: &UdpSocket, to: SocketAddr, message: &Msg<'_>) {
    let mut out = Vec::new();
    rdv::encode(&mut out, message).unwrap();
    socket.send_to(&out, to).unwrap();
}

/// A fake device's socket: blocking, with a timeout, so a test never hangs.
fn socket() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Receives rendezvous datagrams until `want` picks one; fails after the socket's timeout.
/// Blocks its worker thread only (`block_in_place`): the tracker runs on the other.
fn recv_until<T>(socket: &UdpSocket, want: impl FnMut(SocketAddr, Msg<'_>) -> Option<T>) -> T {
    tokio::task::block_in_place(|| recv_blocking(socket, want))
}

fn recv_blocking<T>(socket: &UdpSocket, mut want: impl FnMut(SocketAddr, Msg<'_>) -> Option<T>) -> T {
    let mut buf = [0u8; 1500];
    loop {
        let (n, from) = socket
            .recv_from(&mut buf)
            .expect("a rendezvous datagram before the timeout");
        if let Ok(message) = rdv::decode(&buf[..n])
            && let Some(found) = want(from, message)
        {
            return found;
        }
    }
}

fn token_of(answer: &Value) -> Vec<u8> {
    hex::decode(answer["rendezvous"]["token"].as_str().expect("a rendezvous grant")).unwrap()
}

const CONTENT: &str = "0101010101010101010101010101010101010101010101010101010101010101";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_decide_who_is_listed() {
    let tracker = tracker().await;
    let (primary, alt) = tracker.udp_addrs().unwrap();

    // A real device: it binds, answers the probe at its address and is listed there.
    let lab = Lab::new(100_000, 1);
    let mut config = ServerConfig::new(&lab.edge_stores[0], "127.0.0.1:0".parse().unwrap());
    config.tracker = Some(TrackerSettings {
        url: format!("http://{}", tracker.local_addr()),
        identity: enroll("real", Role::Edge),
    });
    config.id = Some("real".into());
    let server = spawn_server(config).await.unwrap();
    let content = hex::encode(lab.id.0);
    let answer = lookup_until(&tracker, &content, |l| listed(l, "real").is_some()).await;
    let real = listed(&answer, "real").unwrap();
    assert_eq!(real["addr"], server.local_addr().to_string());
    assert!(real.get("punch").is_none(), "{real}");

    // A device that registered but never bound is left out, and the lookup says why.
    let silent = socket();
    register(&tracker, "silent", silent.local_addr().unwrap(), &content).await;
    let answer = lookup(&tracker, &content, None).await;
    assert!(listed(&answer, "silent").is_none());
    assert!(
        reason_of(&answer, "silent")
            .unwrap()
            .contains("has not sent its UDP binding"),
        "{answer}"
    );

    // One that binds but never answers a probe: left out once the probes are over.
    let mute = socket();
    let grant = register(&tracker, "mute", mute.local_addr().unwrap(), &content).await;
    let token = token_of(&grant);
    send(&mute, primary, &Msg::Bind { txn: 1, token: &token });
    send(&mute, alt, &Msg::Bind { txn: 2, token: &token });
    let answer = lookup_until(&tracker, &content, |l| {
        reason_of(l, "mute").is_some_and(|r| r.contains("did not answer the tracker's probes"))
    })
    .await;
    assert!(listed(&answer, "mute").is_none());
    // The device hears the verdict too.
    let status = recv_until(&mute, |from, m| match m {
        Msg::Bound { status, .. } if from == primary && status != BindStatus::Bound => Some(status),
        _ => None,
    });
    assert_eq!(status, BindStatus::UnreachableNoAnswer);
    assert!(listed(&answer, "real").is_some(), "{answer}");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapping_per_destination_is_unreachable_and_a_wrong_token_is_refused() {
    let tracker = tracker().await;
    let (primary, alt) = tracker.udp_addrs().unwrap();
    // Two sockets stand for a NAT giving each destination its own port.
    let (to_primary, to_alt) = (socket(), socket());
    let grant = register(&tracker, "symmetric", to_primary.local_addr().unwrap(), CONTENT).await;
    let token = token_of(&grant);
    send(&to_primary, primary, &Msg::Bind { txn: 7, token: &token });
    send(&to_alt, alt, &Msg::Bind { txn: 8, token: &token });
    let mapped = recv_until(&to_alt, |_, m| match m {
        Msg::Bound { txn: 8, mapped, .. } => Some(mapped),
        _ => None,
    });
    assert_eq!(mapped, to_alt.local_addr().unwrap());
    let answer = lookup_until(&tracker, CONTENT, |l| {
        reason_of(l, "symmetric").is_some_and(|r| r.contains("new port"))
    })
    .await;
    let reason = reason_of(&answer, "symmetric").unwrap();
    assert!(reason.contains("--advertise"), "{reason}");
    // The next keepalive's answer carries the verdict.
    send(&to_primary, primary, &Msg::Bind { txn: 9, token: &token });
    let status = recv_until(&to_primary, |_, m| match m {
        Msg::Bound { txn: 9, status, .. } => Some(status),
        _ => None,
    });
    assert_eq!(status, BindStatus::UnreachableSymmetric);

    // A BIND with a token nobody holds changes nothing and is told so.
    let spoof = socket();
    let mut wrong = token.clone();
    wrong[0] ^= 1;
    send(&spoof, primary, &Msg::Bind { txn: 3, token: &wrong });
    let status = recv_until(&spoof, |_, m| match m {
        Msg::Bound { txn: 3, status, .. } => Some(status),
        _ => None,
    });
    assert_eq!(status, BindStatus::UnknownToken);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_with_a_client_token_makes_a_natted_device_punch_towards_the_client() {
    let tracker = tracker().await;
    let (primary, alt) = tracker.udp_addrs().unwrap();
    // The registered address answers nothing (a private address behind a NAT); the device's
    // socket, seen by the tracker as its mapping, answers probes with the right proof.
    let private = socket();
    let device = socket();
    let grant = register(&tracker, "natted", private.local_addr().unwrap(), CONTENT).await;
    let token = token_of(&grant);
    send(&device, primary, &Msg::Bind { txn: 1, token: &token });
    send(&device, alt, &Msg::Bind { txn: 2, token: &token });
    let status = recv_until(&device, |from, m| match m {
        Msg::Probe { nonce } => {
            let proof = rdv::probe_proof(&token, nonce);
            send(&device, from, &Msg::ProbeAck { nonce, proof: &proof });
            None
        }
        Msg::Bound { txn: 0, status, .. } => Some(status),
        _ => None,
    });
    assert_eq!(status, BindStatus::ReachablePunch);
    let answer = lookup_until(&tracker, CONTENT, |l| listed(l, "natted").is_some()).await;
    let natted = listed(&answer, "natted").unwrap();
    assert_eq!(natted["addr"], device.local_addr().unwrap().to_string());
    assert_eq!(natted["punch"], true);

    // A client learns its mapping and a token, and looks up with it.
    let client = socket();
    send(&client, primary, &Msg::Bind { txn: 42, token: &[] });
    let (mapped, client_token) = recv_until(&client, |_, m| match m {
        Msg::Bound {
            txn: 42, mapped, token, ..
        } => Some((mapped, token.to_vec())),
        _ => None,
    });
    assert_eq!(mapped, client.local_addr().unwrap());
    assert_eq!(client_token.len(), 8);
    lookup(&tracker, CONTENT, Some(&hex::encode(&client_token))).await;
    let peer = recv_until(&device, |from, m| match m {
        Msg::PunchRequest { token: t, peer } if from == primary && t == token.as_slice() => Some(peer),
        _ => None,
    });
    assert_eq!(peer, client.local_addr().unwrap());

    // An unknown client token asks nobody to punch.
    lookup(&tracker, CONTENT, Some("0000000000000000")).await;
    device.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    tokio::task::block_in_place(|| {
        let mut buf = [0u8; 1500];
        while let Ok((n, _)) = device.recv_from(&mut buf) {
            assert!(
                !matches!(rdv::decode(&buf[..n]), Ok(Msg::PunchRequest { .. })),
                "a punch request for an unknown client token"
            );
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_through_a_tracker_with_rendezvous_completes() {
    let tracker = tracker().await;
    let lab = Lab::new(600_000, 1);
    let url = format!("http://{}", tracker.local_addr());
    let mut servers = Vec::new();
    for (store, origin) in [(&lab.origin_store, true), (&lab.edge_stores[0], false)] {
        let mut config = ServerConfig::new(store, "127.0.0.1:0".parse().unwrap());
        let (id, role) = if origin {
            ("rdv-origin", Role::Origin)
        } else {
            ("rdv-edge", Role::Edge)
        };
        config.tracker = Some(TrackerSettings {
            url: url.clone(),
            identity: enroll(id, role),
        });
        config.origin = origin;
        servers.push(spawn_server(config).await.unwrap());
    }
    let content = hex::encode(lab.id.0);
    lookup_until(&tracker, &content, |l| {
        l["servers"].as_array().is_some_and(|s| s.len() == 1) && l["origins"].as_array().is_some_and(|o| o.len() == 1)
    })
    .await;
    let output = lab.out_dir().join("fetched");
    let mut config = pcdn_net::FetchConfig::new(lab.id, &output);
    config.tracker = Some(url);
    config.timeout = Some(Duration::from_secs(120));
    let report = pcdn_net::fetch(config).await.unwrap();
    assert_eq!(std::fs::read(&output).unwrap(), lab.data);
    assert_eq!(report.paths.len(), 2);
    for server in servers {
        server.shutdown().await.unwrap();
    }
}
