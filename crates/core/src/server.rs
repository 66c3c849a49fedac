//! The server side of the protocol: one server's sessions with all its clients.
//!
//! A [`ServerSession`] has the shape of the client's `Download`: datagrams and time go in
//! ([`ServerSession::handle_datagram`], [`ServerSession::handle_timeout`]); datagrams and
//! wake-up times come out ([`ServerSession::poll_transmit`], [`ServerSession::poll_timeout`]).
//! Content comes from a [`ContentSource`], so a disk store and the simulator's synthetic
//! content are interchangeable.
//!
//! - HELLO is answered statelessly with a WELCOME whose token binds the client's address,
//!   connection id, content and an expiry (a keyed BLAKE3 hash), so a spoofed source costs
//!   the server no state.
//! - A session exists once a REQUEST shows a valid token; requests are answered in order of
//!   arrival, sessions served in turn.
//! - To an address that has not shown a valid token the server sends at most 3× the bytes it
//!   received from it (RFC 9000 §8): every such answer is checked against its trigger.
//! - Each session may queue at most `request_budget` sequence numbers; a server caps its
//!   sessions and, optionally, its upload rate (a token bucket), as an edge device must.

mod queue;
mod sessions;

use crate::time::{Duration, Instant};
use pcdn_wire as wire;
use queue::SeqQueue;
use sessions::{NoRoom, Session, SessionKey, Sessions};
use std::collections::VecDeque;
use std::net::SocketAddr;

/// What a server knows of one content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContentInfo {
    /// Length in bytes.
    pub length: u64,
}

/// Where a server's content comes from.
pub trait ContentSource {
    /// The content's length, if this source holds it.
    fn info(&self, id: &wire::ContentId) -> Option<ContentInfo>;
    /// Fills `buf` with the content's bytes from `offset`; returns false if it cannot.
    fn read(&self, id: &wire::ContentId, offset: u64, buf: &mut [u8]) -> bool;
}

/// A server's settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Payload bytes per DATA packet.
    pub packet_size: u16,
    /// Key of the address-validation tokens.
    pub token_key: [u8; 32],
    /// How long a token stays valid.
    pub token_lifetime: Duration,
    /// Most sessions at once.
    pub max_sessions: usize,
    /// Most sessions of one source (an IPv4 address or an IPv6 /64) at once.
    pub max_sessions_per_source: usize,
    /// A session with no REQUEST for this long gives way to a new one when its source or
    /// the table is at its cap.
    pub evict_idle_after: Duration,
    /// Most sequence numbers one session may have queued.
    pub request_budget: u64,
    /// Upload cap in bytes per second (whole datagrams); `None`: unlimited.
    pub upload_rate: Option<u64>,
    /// Bucket depth of the upload cap in bytes.
    pub upload_burst: u64,
    /// A session silent this long is dropped.
    pub idle_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            packet_size: 1400,
            token_key: [0; 32],
            token_lifetime: Duration::from_secs(3600),
            max_sessions: 1024,
            // A client opens one session per server per download: 16 covers a household's
            // players behind one NAT address, and leaves the 1,024 to at least 64 sources.
            max_sessions_per_source: 16,
            // The reference client asks every round trip while it downloads; a session silent
            // for 5 s has stopped, and an evicted one reopens on its next REQUEST (§7.5).
            evict_idle_after: Duration::from_secs(5),
            request_budget: 4096,
            upload_rate: None,
            upload_burst: 16 * 1500,
            idle_timeout: Duration::from_secs(30),
        }
    }
}

/// One datagram to send, written into the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerTransmit {
    pub to: SocketAddr,
    pub len: usize,
}

/// A server's counters.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ServerStats {
    pub datagrams_in: u64,
    pub bytes_in: u64,
    pub data_packets_out: u64,
    pub bytes_out: u64,
    pub rejects: u64,
    /// Datagrams dropped without an answer (answer would amplify, or nothing to say).
    pub dropped: u64,
    pub sessions_opened: u64,
    pub sessions_closed: u64,
    /// Sessions closed to make room for another ([`ServerConfig::max_sessions_per_source`],
    /// [`ServerConfig::evict_idle_after`]); also counted in `sessions_closed`.
    pub sessions_evicted: u64,
    /// Queue entries CANCELs looked at: the work they cost.
    pub cancel_visits: u64,
}

/// Token layout: expiry (8, ms since the server's epoch) ‖ content id (32) ‖ MAC (16).
pub(crate) const TOKEN_LEN: usize = 8 + wire::CONTENT_ID_LEN + 16;
/// The anti-amplification factor of RFC 9000 §8.
const AMPLIFICATION: usize = 3;

/// One server's protocol state for all its clients. See the module documentation.
pub struct ServerSession<S> {
    config: ServerConfig,
    source: S,
    sessions: Sessions,
    /// Sessions with queued requests, served in turn, with the slot each was in.
    ring: VecDeque<(SessionKey, usize)>,
    /// Answers that do not carry content (WELCOME, REJECT), in order.
    control: VecDeque<(SocketAddr, Vec<u8>)>,
    tokens: f64,
    tokens_at: Instant,
    next_expiry_check: Instant,
    stats: ServerStats,
}

impl<S: ContentSource> ServerSession<S> {
    pub fn new(config: ServerConfig, source: S) -> Self {
        let tokens = config.upload_burst as f64;
        let hasher = session_hasher(&config.token_key);
        ServerSession {
            config,
            source,
            sessions: Sessions::new(hasher),
            ring: VecDeque::new(),
            control: VecDeque::new(),
            tokens,
            tokens_at: Instant::ZERO,
            next_expiry_check: Instant::ZERO,
            stats: ServerStats::default(),
        }
    }

    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    pub fn source(&self) -> &S {
        &self.source
    }

    /// The content source, to change it in place (a test server that starts to misbehave).
    pub fn source_mut(&mut self) -> &mut S {
        &mut self.source
    }

    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Sequence numbers queued over all sessions.
    pub fn queued(&self) -> u64 {
        self.sessions.iter().map(|s| s.queue.queued()).sum()
    }

    /// Changes the upload cap (bytes per second), e.g. when the device's spare upload changes.
    pub fn set_upload_rate(&mut self, rate: Option<u64>) {
        self.config.upload_rate = rate;
    }

    /// A datagram arrived from `from`.
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        self.stats.datagrams_in += 1;
        self.stats.bytes_in += datagram.len() as u64;
        let message = match wire::decode(datagram) {
            Ok(m) => m,
            // §7.7: answered only when the REJECT is no larger than the datagram.
            Err(e) if datagram.len() >= wire::REJECT_LEN => {
                let conn_id = wire::peek_conn_id(datagram).unwrap_or(0);
                self.reply_reject(from, datagram.len(), conn_id, e.reason(), 0);
                return;
            }
            Err(_) => {
                self.stats.dropped += 1;
                return;
            }
        };
        match message {
            wire::Message::Hello(h) => self.on_hello(now, from, datagram.len(), &h),
            wire::Message::Request(r) => self.on_request(now, from, datagram.len(), &r),
            wire::Message::Cancel(c) => self.on_cancel(now, from, &c),
            wire::Message::Bye(b) => {
                let key = (from, b.conn_id);
                if self.validate(now, key, self.sessions.find(&key), b.token).is_some() {
                    self.close(key);
                }
            }
            // Server-to-client types arriving here are dropped, never answered.
            _ => self.stats.dropped += 1,
        }
    }

    fn on_hello(&mut self, now: Instant, from: SocketAddr, received: usize, hello: &wire::Hello) {
        let Some(info) = self.source.info(&hello.content) else {
            self.reply_reject(from, received, hello.conn_id, wire::Reason::UnknownContent, 0);
            return;
        };
        let token = self.make_token(now, from, hello.conn_id, &hello.content);
        let mut buf = Vec::with_capacity(64);
        let welcome = wire::Welcome {
            conn_id: hello.conn_id,
            content_length: info.length,
            packet_size: self.config.packet_size,
            token: &token,
        };
        if wire::encode_welcome(&mut buf, &welcome).is_ok() {
            self.send_unvalidated(from, received, buf);
        }
    }

    fn on_request(&mut self, now: Instant, from: SocketAddr, received: usize, request: &wire::Request<'_>) {
        let key = (from, request.conn_id);
        let found = self.sessions.find(&key);
        let Some(content) = self.validate(now, key, found, request.token) else {
            self.reply_reject(
                from,
                received,
                request.conn_id,
                wire::Reason::BadToken,
                request.request_id,
            );
            return;
        };
        let slot = match found {
            Some(slot) => slot,
            None => {
                let Some(info) = self.source.info(&content) else {
                    self.reply_reject(
                        from,
                        received,
                        request.conn_id,
                        wire::Reason::UnknownContent,
                        request.request_id,
                    );
                    return;
                };
                let room = self.sessions.make_room(
                    now,
                    from,
                    self.config.max_sessions,
                    self.config.max_sessions_per_source,
                    self.config.evict_idle_after,
                );
                match room {
                    Ok(None) => {}
                    Ok(Some(victim)) => {
                        self.stats.sessions_evicted += 1;
                        self.close(victim);
                    }
                    Err(NoRoom) => {
                        self.reply_reject(
                            from,
                            received,
                            request.conn_id,
                            wire::Reason::Overloaded,
                            request.request_id,
                        );
                        return;
                    }
                }
                self.stats.sessions_opened += 1;
                let mut token = [0u8; TOKEN_LEN];
                token.copy_from_slice(request.token);
                self.sessions.insert(Session {
                    key,
                    content,
                    length: info.length,
                    token,
                    queue: SeqQueue::default(),
                    last_request: now,
                    active: false,
                })
            }
        };
        let packet_size = u64::from(self.config.packet_size);
        let budget = self.config.request_budget;
        let session = self.sessions.get_mut(slot);
        session.last_request = now;
        let total_seqs = session.length.div_ceil(packet_size);
        let count = request.ranges.seq_count();
        if request.ranges.iter().any(|r| r.start + u64::from(r.len) > total_seqs) {
            self.reply(from, request.conn_id, wire::Reason::OutOfRange, request.request_id);
            return;
        }
        if session.queue.queued() + count > budget {
            self.reply(from, request.conn_id, wire::Reason::Overloaded, request.request_id);
            return;
        }
        for r in request.ranges.iter() {
            session.queue.push(request.request_id, r);
        }
        if !session.active {
            session.active = true;
            self.ring.push_back((key, slot));
        }
    }

    fn on_cancel(&mut self, now: Instant, from: SocketAddr, cancel: &wire::Cancel<'_>) {
        let key = (from, cancel.conn_id);
        let found = self.sessions.find(&key);
        if self.validate(now, key, found, cancel.token).is_none() {
            return;
        }
        let Some(slot) = found else {
            return;
        };
        // Proportional to what it cancels (queue.rs); it does not count as activity.
        let visits = self.sessions.get_mut(slot).queue.cancel(cancel.ranges.iter());
        self.stats.cancel_visits += visits;
    }

    fn close(&mut self, key: SessionKey) {
        if self.sessions.remove(&key) {
            self.stats.sessions_closed += 1;
        }
    }

    fn make_token(&self, now: Instant, from: SocketAddr, conn_id: u64, content: &wire::ContentId) -> [u8; TOKEN_LEN] {
        let expiry = (now + self.config.token_lifetime).as_nanos() / 1_000_000;
        let mut token = [0u8; TOKEN_LEN];
        token[..8].copy_from_slice(&expiry.to_be_bytes());
        token[8..40].copy_from_slice(&content.0);
        let mac = self.mac(from, conn_id, &token[..40]);
        token[40..].copy_from_slice(&mac);
        token
    }

    fn mac(&self, from: SocketAddr, conn_id: u64, expiry_and_content: &[u8]) -> [u8; 16] {
        let mut h = blake3::Hasher::new_keyed(&self.config.token_key);
        match from {
            SocketAddr::V4(a) => {
                h.update(&[4]);
                h.update(&a.ip().octets());
            }
            SocketAddr::V6(a) => {
                h.update(&[6]);
                h.update(&a.ip().octets());
            }
        }
        h.update(&from.port().to_be_bytes());
        h.update(&conn_id.to_be_bytes());
        h.update(expiry_and_content);
        let mut mac = [0u8; 16];
        mac.copy_from_slice(&h.finalize().as_bytes()[..16]);
        mac
    }

    /// The content `token` grants to `key`, whose session is in slot `found` if it has one: a
    /// session's own token is checked by comparison (and expiry), anything else by its MAC.
    fn validate(&self, now: Instant, key: SessionKey, found: Option<usize>, token: &[u8]) -> Option<wire::ContentId> {
        if let Some(session) = found.map(|slot| self.sessions.get(slot)) {
            if token.len() == TOKEN_LEN && constant_time_eq(&session.token, token) {
                let expiry = u64::from_be_bytes(token[..8].try_into().expect("8 bytes"));
                return (expiry >= now.as_nanos() / 1_000_000).then_some(session.content);
            }
        }
        self.check_token(now, key.0, key.1, token)
    }

    /// The content a token grants, if it is this server's, for this address and connection,
    /// and not expired.
    fn check_token(&self, now: Instant, from: SocketAddr, conn_id: u64, token: &[u8]) -> Option<wire::ContentId> {
        if token.len() != TOKEN_LEN {
            return None;
        }
        let expiry = u64::from_be_bytes(token[..8].try_into().expect("8 bytes"));
        if expiry < now.as_nanos() / 1_000_000 {
            return None;
        }
        let mac = self.mac(from, conn_id, &token[..40]);
        // Compared in constant time: the MAC is a secret until it is right.
        constant_time_eq(&mac, &token[40..]).then(|| wire::ContentId(token[8..40].try_into().expect("32 bytes")))
    }

    /// Answers a validated session with a REJECT.
    fn reply(&mut self, to: SocketAddr, conn_id: u64, reason: wire::Reason, request_id: u64) {
        let mut buf = Vec::with_capacity(24);
        wire::encode_reject(
            &mut buf,
            &wire::Reject {
                conn_id,
                reason,
                request_id,
            },
        );
        self.stats.rejects += 1;
        self.control.push_back((to, buf));
    }

    /// Answers an unvalidated address with a REJECT, if that does not amplify.
    fn reply_reject(&mut self, to: SocketAddr, received: usize, conn_id: u64, reason: wire::Reason, request_id: u64) {
        let mut buf = Vec::with_capacity(24);
        wire::encode_reject(
            &mut buf,
            &wire::Reject {
                conn_id,
                reason,
                request_id,
            },
        );
        if self.send_unvalidated(to, received, buf) {
            self.stats.rejects += 1;
        }
    }

    /// RFC 9000 §8: an answer to an unvalidated address is at most 3× what it answers.
    fn send_unvalidated(&mut self, to: SocketAddr, received: usize, datagram: Vec<u8>) -> bool {
        if datagram.len() > AMPLIFICATION * received {
            self.stats.dropped += 1;
            return false;
        }
        self.control.push_back((to, datagram));
        true
    }

    fn refill(&mut self, now: Instant) {
        if let Some(rate) = self.config.upload_rate {
            let elapsed = (now - self.tokens_at).as_secs_f64();
            self.tokens = (self.tokens + elapsed * rate as f64).min(self.config.upload_burst as f64);
        }
        self.tokens_at = now;
    }

    /// The next datagram to send, written into `buf` (cleared first). Call until `None`.
    #[inline]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<ServerTransmit> {
        buf.clear();
        // The last poll after a burst finds nothing to send: say so without the full call.
        // (With an upload cap a poll also refills the bucket, so it takes the long way.)
        if self.control.is_empty() && self.ring.is_empty() && self.config.upload_rate.is_none() {
            return None;
        }
        self.poll_transmit_any(now, buf)
    }

    fn poll_transmit_any(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<ServerTransmit> {
        if let Some((to, datagram)) = self.control.pop_front() {
            buf.extend_from_slice(&datagram);
            self.stats.bytes_out += buf.len() as u64;
            return Some(ServerTransmit { to, len: buf.len() });
        }
        let packet_size = u64::from(self.config.packet_size);
        let datagram_len = (wire::DATA_HEADER_LEN as u64 + packet_size) as f64;
        if self.config.upload_rate.is_some() {
            self.refill(now);
            if self.tokens < datagram_len && !self.ring.is_empty() {
                return None;
            }
        }
        while let Some((key, slot)) = self.ring.pop_front() {
            let Some(slot) = self.sessions.find_from(&key, slot) else {
                continue;
            };
            let session = self.sessions.get_mut(slot);
            let Some((request_id, seq)) = session.queue.pop() else {
                session.active = false;
                continue;
            };
            if session.queue.queued() > 0 {
                self.ring.push_back((key, slot));
            } else {
                session.active = false;
            }
            let offset = seq * packet_size;
            let len = session.length.saturating_sub(offset).min(packet_size) as usize;
            wire::encode_data_header(buf, key.1, request_id, seq);
            let header = buf.len();
            buf.resize(header + len, 0);
            if !self.source.read(&session.content, offset, &mut buf[header..]) {
                // The content vanished under us; tell the client rather than send garbage.
                buf.clear();
                self.reply(key.0, key.1, wire::Reason::UnknownContent, request_id);
                self.close(key);
                return self.poll_transmit_any(now, buf);
            }
            if self.config.upload_rate.is_some() {
                self.tokens -= buf.len() as f64;
            }
            self.stats.data_packets_out += 1;
            self.stats.bytes_out += buf.len() as u64;
            return Some(ServerTransmit {
                to: key.0,
                len: buf.len(),
            });
        }
        None
    }

    /// When [`ServerSession::handle_timeout`] or [`ServerSession::poll_transmit`] next has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut earliest = (!self.sessions.is_empty()).then_some(self.next_expiry_check);
        if let (Some(rate), false) = (self.config.upload_rate, self.ring.is_empty()) {
            let need = (wire::DATA_HEADER_LEN as f64 + f64::from(self.config.packet_size)) - self.tokens;
            if need > 0.0 && rate > 0 {
                let wait = Duration::from_nanos((need * 1e9 / rate as f64).ceil() as u64);
                let t = self.tokens_at + wait;
                earliest = Some(earliest.map_or(t, |e| e.min(t)));
            }
        }
        earliest
    }

    /// Drops sessions that have been idle too long.
    pub fn handle_timeout(&mut self, now: Instant) {
        if now < self.next_expiry_check {
            return;
        }
        let idle = self.config.idle_timeout;
        let closed = self.sessions.retain(|s| now - s.last_request < idle);
        self.stats.sessions_closed += closed as u64;
        self.next_expiry_check = now + idle / 4;
    }
}

/// Equality whose time does not depend on where the inputs differ. Eight bytes at a time:
/// every REQUEST's token is compared.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().expect("8 bytes"));
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail = a8
        .remainder()
        .iter()
        .zip(b8.remainder())
        .fold(0u8, |d, (x, y)| d | (x ^ y));
    let words = a8.zip(b8).fold(0u64, |d, (x, y)| d | (word(x) ^ word(y)));
    (words | u64::from(tail)) == 0
}

/// The session table's hasher, seeded from (a hash of) the token key.
fn session_hasher(token_key: &[u8; 32]) -> ahash::RandomState {
    let seed = blake3::derive_key("pcdn server session table", token_key);
    let word = |i: usize| u64::from_le_bytes(seed[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    ahash::RandomState::with_seeds(word(0), word(1), word(2), word(3))
}
