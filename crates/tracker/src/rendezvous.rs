//! The tracker's UDP rendezvous (docs/protocol.md §11): devices and clients learn their public
//! mapping (RFC 8489-style binding), the tracker tells NAT types apart with a second port
//! (RFC 4787 §4.1), probes the address it will give clients, and asks NATed devices to punch
//! towards a client that looks them up (RFC 5128 §3.3).
//!
//! The state is in memory and per tracker instance: a device binds to the instance it
//! registered with (docs/tracker.md, "NAT traversal").

use crate::error::ApiError;
use crate::model::{Device, Lookup, Registration};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use pcdn_core::wire::rendezvous::{self as rdv, BindStatus, Rendezvous as Msg};
use serde::Serialize;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;
use tokio::net::UdpSocket;
use tokio::sync::oneshot;

/// Length of a device's rendezvous token, bytes.
pub(crate) const DEVICE_TOKEN_LEN: usize = 16;
/// Length of a client token, bytes: short enough that the BOUND answering an 11-byte BIND is at
/// most 3× its size for IPv4 (RFC 9000 §8's anti-amplification factor).
pub(crate) const CLIENT_TOKEN_LEN: usize = 8;

/// Where the tracker listens for rendezvous datagrams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpConfig {
    /// The first port: bindings, probes and punch requests.
    pub listen: SocketAddr,
    /// The second port, only for comparing mappings (NAT-type detection).
    pub alt_listen: SocketAddr,
}

/// Timing of the rendezvous; each value with its reason.
#[derive(Clone, Debug)]
pub struct RendezvousTimings {
    /// A device whose last BIND is older than this is left out of lookups: three of its
    /// keepalives (20 s each, `pcdn_net::rendezvous::DeviceTimings`) lost in a row.
    pub binding_stale: Duration,
    /// PROBE attempts per address and the wait for each answer: a device on a loaded 2-core
    /// machine answers within milliseconds; 4 × 500 ms tolerates 3 losses and a busy host.
    pub probe_attempts: u32,
    pub probe_wait: Duration,
    /// How long a client token stays valid: long enough for the lookup that follows the
    /// binding (one HTTP round trip, plus retries).
    pub client_token_ttl: Duration,
    /// Most client tokens held at once; beyond it new client BINDs are not answered (memory bound
    /// against a flood of spoofed BINDs).
    pub max_clients: usize,
}

impl Default for RendezvousTimings {
    fn default() -> RendezvousTimings {
        RendezvousTimings {
            binding_stale: Duration::from_secs(65),
            probe_attempts: 4,
            probe_wait: Duration::from_millis(500),
            client_token_ttl: Duration::from_secs(60),
            max_clients: 100_000,
        }
    }
}

/// What a device's registration answer carries for its UDP side.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Grant {
    /// The device's token, hex; it echoes it in every BIND and PROBE_ACK.
    pub token: String,
    pub udp_port: u16,
    pub alt_port: u16,
}

/// One device's rendezvous state.
#[derive(Debug)]
struct DeviceState {
    token: [u8; DEVICE_TOKEN_LEN],
    registered: SocketAddr,
    mapped: Option<SocketAddr>,
    mapped_alt: Option<SocketAddr>,
    last_bind: Option<Instant>,
    status: BindStatus,
    /// The address lookups give, once a probe succeeded there.
    reach: Option<SocketAddr>,
    /// The (mapping, second-port mapping) pair the verdict is for; a new pair is judged again.
    judged: Option<(SocketAddr, SocketAddr)>,
}

#[derive(Default)]
struct State {
    devices: HashMap<String, DeviceState>,
    by_token: HashMap<[u8; DEVICE_TOKEN_LEN], String>,
    clients: HashMap<[u8; CLIENT_TOKEN_LEN], (SocketAddr, Instant)>,
    /// Probes in flight: nonce → (device id, probed address, wake-up).
    probes: HashMap<u64, (String, SocketAddr, oneshot::Sender<()>)>,
}

/// The rendezvous service: two UDP sockets and the state they share with the HTTP API.
pub(crate) struct Rendezvous {
    primary: Arc<UdpSocket>,
    alt: Arc<UdpSocket>,
    timings: RendezvousTimings,
    state: Mutex<State>,
}

/// A device a lookup left out, and why (`unreachable` in the lookup answer).
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Unreachable {
    pub id: String,
    pub reason: String,
}

/// What the rendezvous did to a lookup: the devices left out and those clients must punch to.
#[derive(Debug, Default)]
pub(crate) struct Reach {
    pub unreachable: Vec<Unreachable>,
    pub punch: Vec<String>,
}

/// The lookup's `?punch=` (a client token, 16 hex characters), if given.
pub(crate) struct PunchToken(pub Option<[u8; CLIENT_TOKEN_LEN]>);

impl<S: Send + Sync> FromRequestParts<S> for PunchToken {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let query = crate::extract::query_parameters(parts, state).await?;
        let Some(text) = query.get("punch") else {
            return Ok(PunchToken(None));
        };
        let mut token = [0u8; CLIENT_TOKEN_LEN];
        hex::decode_to_slice(text, &mut token).map_err(|_| {
            crate::extract::invalid_query(format!(
                "query parameter `punch`: expected the client token of BOUND, {} hex characters, got {:?}",
                2 * CLIENT_TOKEN_LEN,
                text.chars().take(40).collect::<String>()
            ))
        })?;
        Ok(PunchToken(Some(token)))
    }
}

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("the OS has no randomness");
    bytes
}

impl Rendezvous {
    /// Binds both UDP ports.
    pub async fn bind(config: UdpConfig, timings: RendezvousTimings) -> anyhow::Result<Arc<Rendezvous>> {
        use anyhow::Context as _;
        let primary = UdpSocket::bind(config.listen)
            .await
            .with_context(|| format!("tracker cannot listen on UDP {} (--udp-listen)", config.listen))?;
        let alt = UdpSocket::bind(config.alt_listen)
            .await
            .with_context(|| format!("tracker cannot listen on UDP {} (--udp-alt-listen)", config.alt_listen))?;
        Ok(Arc::new(Rendezvous {
            primary: Arc::new(primary),
            alt: Arc::new(alt),
            timings,
            state: Mutex::new(State::default()),
        }))
    }

    /// The bound addresses of the two sockets.
    pub fn local_addrs(&self) -> (SocketAddr, SocketAddr) {
        let addr = |s: &UdpSocket| s.local_addr().expect("a bound socket has an address");
        (addr(&self.primary), addr(&self.alt))
    }

    /// Serves both sockets until the task is aborted.
    pub async fn run(self: Arc<Self>) {
        let mut cleanup = tokio::time::interval(Duration::from_secs(10));
        let mut a = vec![0u8; 2048];
        let mut b = vec![0u8; 2048];
        loop {
            tokio::select! {
                r = self.primary.recv_from(&mut a) => match r {
                    Ok((n, from)) => self.handle(false, from, &a[..n]),
                    Err(e) => tracing::debug!(error = %e, "rendezvous UDP receive"),
                },
                r = self.alt.recv_from(&mut b) => match r {
                    Ok((n, from)) => self.handle(true, from, &b[..n]),
                    Err(e) => tracing::debug!(error = %e, "rendezvous UDP receive"),
                },
                _ = cleanup.tick() => self.clean(),
            }
        }
    }

    /// A device registered: a fresh token and state (the old token stops working).
    pub fn grant(&self, registration: &Registration) -> Grant {
        let token = random::<DEVICE_TOKEN_LEN>();
        let mut state = self.state.lock().expect("rendezvous lock");
        if let Some(old) = state.devices.remove(&registration.id) {
            state.by_token.remove(&old.token);
        }
        state.by_token.insert(token, registration.id.clone());
        state.devices.insert(
            registration.id.clone(),
            DeviceState {
                token,
                registered: registration.addr,
                mapped: None,
                mapped_alt: None,
                last_bind: None,
                status: BindStatus::Bound,
                reach: None,
                judged: None,
            },
        );
        let (primary, alt) = self.local_addrs();
        Grant {
            token: hex::encode(token),
            udp_port: primary.port(),
            alt_port: alt.port(),
        }
    }

    /// Leaves out of `found` every device clients cannot reach, gives NATed devices their
    /// mapping, and with a client token asks those to punch towards the client.
    pub fn apply(&self, found: &mut Lookup, client: Option<[u8; CLIENT_TOKEN_LEN]>) -> Reach {
        let now = Instant::now();
        let mut reach = Reach::default();
        let mut punch_to = Vec::new();
        let state = self.state.lock().expect("rendezvous lock");
        let client_addr = client
            .and_then(|t| state.clients.get(&t))
            .filter(|(_, at)| now.duration_since(*at) < self.timings.client_token_ttl)
            .map(|(addr, _)| *addr);
        for list in [&mut found.servers, &mut found.origins] {
            list.retain_mut(|device| {
                let id = device.registration.id.clone();
                let id = &id;
                let verdict = match state.devices.get(id) {
                    None => Err("has not registered with this tracker instance since it started".to_owned()),
                    Some(d) => self.verdict(d, now),
                };
                match verdict {
                    Ok((addr, punch)) => {
                        if addr != device.registration.addr {
                            let registration = Registration {
                                addr,
                                ..device.registration.clone()
                            };
                            *device = Arc::new(Device::new(registration, device.load));
                        }
                        if punch {
                            reach.punch.push(id.clone());
                            if let (Some(peer), Some(d)) = (client_addr, state.devices.get(id)) {
                                punch_to.push((d.token, addr, peer));
                            }
                        }
                        true
                    }
                    Err(reason) => {
                        reach.unreachable.push(Unreachable { id: id.clone(), reason });
                        false
                    }
                }
            });
        }
        drop(state);
        for (token, device, peer) in punch_to {
            self.send(false, device, &Msg::PunchRequest { token: &token, peer });
        }
        reach
    }

    /// Where clients reach a device and whether they must punch, or why they cannot.
    fn verdict(&self, d: &DeviceState, now: Instant) -> Result<(SocketAddr, bool), String> {
        let stale = d
            .last_bind
            .is_none_or(|at| now.duration_since(at) > self.timings.binding_stale);
        match (d.status, d.reach) {
            _ if d.last_bind.is_none() => Err("has not sent its UDP binding to the tracker yet".to_owned()),
            _ if stale => Err(format!(
                "sent no UDP keepalive for {} s: its NAT mapping may be gone",
                self.timings.binding_stale.as_secs()
            )),
            (BindStatus::ReachableDirect, Some(addr)) => Ok((addr, false)),
            (BindStatus::ReachablePunch, Some(addr)) => Ok((addr, true)),
            (BindStatus::UnreachableSymmetric, _) => Err(format!(
                "is behind a NAT that maps each destination to a new port ({} and {} for the tracker's two ports): \
                 forward a UDP port to it and give that address with --advertise",
                fmt_opt(d.mapped),
                fmt_opt(d.mapped_alt)
            )),
            (BindStatus::UnreachableNoAnswer, _) => Err(format!(
                "did not answer the tracker's probes at {} or {}",
                d.registered,
                fmt_opt(d.mapped)
            )),
            _ => Err("is being probed by the tracker".to_owned()),
        }
    }

    fn send(&self, alt: bool, to: SocketAddr, message: &Msg<'_>) {
        let mut out = Vec::with_capacity(64);
        if rdv::encode(&mut out, message).is_err() {
            return;
        }
        let socket = if alt { &self.alt } else { &self.primary };
        if let Err(e) = socket.try_send_to(&out, to) {
            tracing::debug!(error = %e, %to, "rendezvous UDP send");
        }
    }

    fn handle(self: &Arc<Self>, alt: bool, from: SocketAddr, datagram: &[u8]) {
        let Ok(message) = rdv::decode(datagram) else {
            return;
        };
        match message {
            Msg::Bind { txn, token: [] } => {
                if alt {
                    return;
                }
                let now = Instant::now();
                let client = random::<CLIENT_TOKEN_LEN>();
                {
                    let mut state = self.state.lock().expect("rendezvous lock");
                    if state.clients.len() >= self.timings.max_clients {
                        return;
                    }
                    state.clients.insert(client, (from, now));
                }
                let answer = Msg::Bound {
                    txn,
                    status: BindStatus::Bound,
                    mapped: from,
                    token: &client,
                };
                self.send(false, from, &answer);
            }
            Msg::Bind { txn, token } => {
                let status = self.device_bind(alt, from, token);
                self.send(
                    alt,
                    from,
                    &Msg::Bound {
                        txn,
                        status,
                        mapped: from,
                        token: &[],
                    },
                );
            }
            Msg::ProbeAck { nonce, proof } => {
                let mut state = self.state.lock().expect("rendezvous lock");
                let matches = state.probes.get(&nonce).is_some_and(|(id, addr, _)| {
                    *addr == from
                        && state
                            .devices
                            .get(id)
                            .is_some_and(|d| bool::from(rdv::probe_proof(&d.token, nonce)[..].ct_eq(proof)))
                });
                if matches && let Some((_, _, wake)) = state.probes.remove(&nonce) {
                    let _ = wake.send(());
                }
            }
            _ => {}
        }
    }

    /// Records a device's BIND; starts judging it once both ports saw it.
    fn device_bind(self: &Arc<Self>, alt: bool, from: SocketAddr, token: &[u8]) -> BindStatus {
        let mut state = self.state.lock().expect("rendezvous lock");
        let Some(id) = <[u8; DEVICE_TOKEN_LEN]>::try_from(token)
            .ok()
            .and_then(|t| state.by_token.get(&t))
            .cloned()
        else {
            return BindStatus::UnknownToken;
        };
        let d = state.devices.get_mut(&id).expect("by_token and devices agree");
        if alt {
            d.mapped_alt = Some(from);
        } else {
            d.mapped = Some(from);
            d.last_bind = Some(Instant::now());
        }
        let (Some(mapped), Some(mapped_alt)) = (d.mapped, d.mapped_alt) else {
            return d.status;
        };
        if d.judged == Some((mapped, mapped_alt)) {
            return d.status;
        }
        d.judged = Some((mapped, mapped_alt));
        d.reach = None;
        if mapped != mapped_alt {
            d.status = BindStatus::UnreachableSymmetric;
            tracing::info!(device = %id, %mapped, %mapped_alt, "device behind an address-and-port-dependent NAT: unreachable");
            return d.status;
        }
        d.status = BindStatus::Bound;
        let registered = d.registered;
        drop(state);
        let this = Arc::clone(self);
        tokio::spawn(async move { this.judge(id, registered, mapped).await });
        BindStatus::Bound
    }

    /// Probes the registered address, then the mapping; records and sends the verdict.
    async fn judge(self: Arc<Self>, id: String, registered: SocketAddr, mapped: SocketAddr) {
        let mut verdict = (BindStatus::UnreachableNoAnswer, None);
        let candidates = [
            (registered, BindStatus::ReachableDirect),
            (mapped, BindStatus::ReachablePunch),
        ];
        for (addr, status) in candidates {
            if status == BindStatus::ReachablePunch && addr == registered {
                break;
            }
            if self.probe(&id, addr).await {
                verdict = (status, Some(addr));
                break;
            }
        }
        {
            let mut state = self.state.lock().expect("rendezvous lock");
            let Some(d) = state.devices.get_mut(&id) else { return };
            // A newer registration or mapping started its own judgement.
            if d.registered != registered || d.judged.map(|j| j.0) != Some(mapped) {
                return;
            }
            d.status = verdict.0;
            d.reach = verdict.1;
        }
        tracing::info!(device = %id, status = ?verdict.0, addr = ?verdict.1, "device judged");
        self.send(
            false,
            mapped,
            &Msg::Bound {
                txn: 0,
                status: verdict.0,
                mapped,
                token: &[],
            },
        );
    }

    /// Whether the device answers a PROBE at `addr` with its token.
    async fn probe(&self, id: &str, addr: SocketAddr) -> bool {
        for _ in 0..self.timings.probe_attempts {
            let nonce = u64::from_be_bytes(random());
            let (wake, woken) = oneshot::channel();
            self.state
                .lock()
                .expect("rendezvous lock")
                .probes
                .insert(nonce, (id.to_owned(), addr, wake));
            self.send(false, addr, &Msg::Probe { nonce });
            let answered = tokio::time::timeout(self.timings.probe_wait, woken).await;
            self.state.lock().expect("rendezvous lock").probes.remove(&nonce);
            if matches!(answered, Ok(Ok(()))) {
                return true;
            }
        }
        false
    }

    /// Forgets expired client tokens and long-silent devices.
    fn clean(&self) {
        let now = Instant::now();
        let mut state = self.state.lock().expect("rendezvous lock");
        let ttl = self.timings.client_token_ttl;
        state.clients.retain(|_, (_, at)| now.duration_since(*at) < ttl);
        let forget = self.timings.binding_stale * 10;
        let gone: Vec<String> = state
            .devices
            .iter()
            .filter(|(_, d)| d.last_bind.is_some_and(|at| now.duration_since(at) > forget))
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            if let Some(d) = state.devices.remove(&id) {
                state.by_token.remove(&d.token);
            }
        }
    }
}

fn fmt_opt(addr: Option<SocketAddr>) -> String {
    addr.map_or_else(|| "no mapping".to_owned(), |a| a.to_string())
}
