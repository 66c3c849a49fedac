//! The rendezvous datagrams between devices, clients and the tracker's UDP port (NAT
//! traversal, docs/protocol.md §11): bindings that learn a public mapping (after RFC 8489's
//! Binding and XOR-MAPPED-ADDRESS), address probes, and hole-punch requests (RFC 5128 §3.3).
//!
//! They share the content protocol's header (version 1, then a type code) in their own range
//! of type codes, so one socket can carry both: [`is_rendezvous`] tells them apart.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::codec::{Reader, check_token, put_token};
use crate::{DecodeError, EncodeError, MAX_DATAGRAM, VERSION};

/// Rendezvous type codes. Towards the tracker or a peer: `0x1_`; from the tracker: `0x9_`.
pub mod kind {
    pub const BIND: u8 = 0x10;
    pub const PROBE_ACK: u8 = 0x11;
    pub const PUNCH: u8 = 0x12;
    pub const BOUND: u8 = 0x90;
    pub const PROBE: u8 = 0x91;
    pub const PUNCH_REQUEST: u8 = 0x92;
}

/// XORed into mapped addresses so that NATs rewriting addresses they find in payloads (ALGs)
/// leave them alone: RFC 8489's magic cookie (§14.2).
pub const MAGIC_COOKIE: u32 = 0x2112_A442;

/// What the tracker knows about the sender of a BIND.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum BindStatus {
    /// Mapping recorded; no verdict on reachability (yet). Always the answer to a client.
    Bound = 0,
    /// The device answered the tracker's probe at its registered address.
    ReachableDirect = 1,
    /// The device answered at its public mapping; clients reach it by hole punching.
    ReachablePunch = 2,
    /// The device's NAT maps each destination to a new port (address-and-port-dependent
    /// mapping, RFC 4787 §4.1): a client cannot reach the mapping the tracker sees.
    UnreachableSymmetric = 3,
    /// The device did not answer the tracker's probes at its registered address or mapping.
    UnreachableNoAnswer = 4,
    /// The token is not (or no longer) a registered device's: register again.
    UnknownToken = 5,
}

impl BindStatus {
    /// The status for a code read off the wire, if the code is known.
    pub fn from_code(code: u8) -> Option<BindStatus> {
        Some(match code {
            0 => BindStatus::Bound,
            1 => BindStatus::ReachableDirect,
            2 => BindStatus::ReachablePunch,
            3 => BindStatus::UnreachableSymmetric,
            4 => BindStatus::UnreachableNoAnswer,
            5 => BindStatus::UnknownToken,
            _ => return None,
        })
    }

    /// Clients are sent to the device.
    pub fn is_reachable(self) -> bool {
        matches!(self, BindStatus::ReachableDirect | BindStatus::ReachablePunch)
    }
}

/// One decoded rendezvous datagram. Tokens point into the datagram.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Rendezvous<'a> {
    /// → tracker: "what address do you see me at?" A device sends its rendezvous token; a
    /// client sends an empty token and gets one in the answer.
    Bind { txn: u64, token: &'a [u8] },
    /// Device → tracker: the answer to a PROBE; `proof` is [`probe_proof`] of the device's
    /// token and the nonce, so answering probes never reveals the token.
    ProbeAck { nonce: u64, proof: &'a [u8] },
    /// Peer → peer: opens the sender's NAT towards the receiver; never answered.
    Punch { nonce: u64 },
    /// Tracker → sender of a BIND: the address it came from, and the verdict on the device (or,
    /// to a client, the client token to look up with).
    Bound {
        txn: u64,
        status: BindStatus,
        mapped: SocketAddr,
        token: &'a [u8],
    },
    /// Tracker → device: answer with a PROBE_ACK carrying your token.
    Probe { nonce: u64 },
    /// Tracker → device: send a PUNCH to `peer`. `token` is the device's token.
    PunchRequest { token: &'a [u8], peer: SocketAddr },
}

/// Length of a PROBE_ACK's proof, bytes.
pub const PROBE_PROOF_LEN: usize = 16;

/// The proof a device answers a PROBE with: the first 16 bytes of BLAKE3 keyed with
/// BLAKE3(token), over the nonce (big-endian).
pub fn probe_proof(token: &[u8], nonce: u64) -> [u8; PROBE_PROOF_LEN] {
    let key = blake3::hash(token);
    let mac = blake3::keyed_hash(key.as_bytes(), &nonce.to_be_bytes());
    let mut proof = [0u8; PROBE_PROOF_LEN];
    proof.copy_from_slice(&mac.as_bytes()[..PROBE_PROOF_LEN]);
    proof
}

/// Whether a datagram is a rendezvous datagram (version 1 and a rendezvous type), to be
/// decoded with [`decode`] rather than [`crate::decode`].
pub fn is_rendezvous(datagram: &[u8]) -> bool {
    matches!(
        datagram,
        [
            VERSION,
            kind::BIND | kind::PROBE_ACK | kind::PUNCH | kind::BOUND | kind::PROBE | kind::PUNCH_REQUEST,
            ..
        ]
    )
}

/// Appends `message` to `out`.
pub fn encode(out: &mut Vec<u8>, message: &Rendezvous<'_>) -> Result<(), EncodeError> {
    match *message {
        Rendezvous::Bind { txn, token } => {
            check_token(token)?;
            out.extend_from_slice(&[VERSION, kind::BIND]);
            out.extend_from_slice(&txn.to_be_bytes());
            put_token(out, token);
        }
        Rendezvous::ProbeAck { nonce, proof } => {
            check_token(proof)?;
            out.extend_from_slice(&[VERSION, kind::PROBE_ACK]);
            out.extend_from_slice(&nonce.to_be_bytes());
            put_token(out, proof);
        }
        Rendezvous::Punch { nonce } => {
            out.extend_from_slice(&[VERSION, kind::PUNCH]);
            out.extend_from_slice(&nonce.to_be_bytes());
        }
        Rendezvous::Bound {
            txn,
            status,
            mapped,
            token,
        } => {
            check_token(token)?;
            out.extend_from_slice(&[VERSION, kind::BOUND]);
            out.extend_from_slice(&txn.to_be_bytes());
            out.push(status as u8);
            put_addr(out, mapped);
            put_token(out, token);
        }
        Rendezvous::Probe { nonce } => {
            out.extend_from_slice(&[VERSION, kind::PROBE]);
            out.extend_from_slice(&nonce.to_be_bytes());
        }
        Rendezvous::PunchRequest { token, peer } => {
            check_token(token)?;
            out.extend_from_slice(&[VERSION, kind::PUNCH_REQUEST]);
            put_token(out, token);
            put_addr(out, peer);
        }
    }
    Ok(())
}

/// Decodes one rendezvous datagram. Never panics, whatever the input; a content-protocol
/// datagram is [`DecodeError::UnknownType`].
pub fn decode(datagram: &[u8]) -> Result<Rendezvous<'_>, DecodeError> {
    if datagram.len() > MAX_DATAGRAM {
        return Err(DecodeError::Oversized(datagram.len()));
    }
    let mut r = Reader::new(datagram);
    let version = r.u8()?;
    if version != VERSION {
        return Err(DecodeError::UnsupportedVersion(version));
    }
    let message = match r.u8()? {
        kind::BIND => {
            let txn = r.u64()?;
            Rendezvous::Bind { txn, token: r.token()? }
        }
        kind::PROBE_ACK => {
            let nonce = r.u64()?;
            Rendezvous::ProbeAck {
                nonce,
                proof: r.token()?,
            }
        }
        kind::PUNCH => Rendezvous::Punch { nonce: r.u64()? },
        kind::BOUND => {
            let txn = r.u64()?;
            let status = BindStatus::from_code(r.u8()?).ok_or(DecodeError::Malformed("unknown bind status"))?;
            let mapped = r.addr()?;
            Rendezvous::Bound {
                txn,
                status,
                mapped,
                token: r.token()?,
            }
        }
        kind::PROBE => Rendezvous::Probe { nonce: r.u64()? },
        kind::PUNCH_REQUEST => {
            let token = r.token()?;
            Rendezvous::PunchRequest { token, peer: r.addr()? }
        }
        other => return Err(DecodeError::UnknownType(other)),
    };
    r.finish()?;
    Ok(message)
}

/// The cookie's bytes repeated over `n` bytes (4 for IPv4, 16 for IPv6).
fn cookie_mask(n: usize) -> impl Iterator<Item = u8> {
    MAGIC_COOKIE.to_be_bytes().into_iter().cycle().take(n)
}

/// family (4 or 6), port XOR the cookie's high 16 bits, address XOR the cookie repeated.
fn put_addr(out: &mut Vec<u8>, addr: SocketAddr) {
    let port = addr.port() ^ (MAGIC_COOKIE >> 16) as u16;
    match addr.ip() {
        IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&port.to_be_bytes());
            out.extend(ip.octets().iter().zip(cookie_mask(4)).map(|(a, m)| a ^ m));
        }
        IpAddr::V6(ip) => {
            out.push(6);
            out.extend_from_slice(&port.to_be_bytes());
            out.extend(ip.octets().iter().zip(cookie_mask(16)).map(|(a, m)| a ^ m));
        }
    }
}

impl Reader<'_> {
    /// An address written by [`put_addr`].
    fn addr(&mut self) -> Result<SocketAddr, DecodeError> {
        let family = self.u8()?;
        let port = u16::from_be_bytes(self.take(2)?.try_into().expect("2 bytes")) ^ (MAGIC_COOKIE >> 16) as u16;
        let ip = match family {
            4 => {
                let mut octets = [0u8; 4];
                for ((o, a), m) in octets.iter_mut().zip(self.take(4)?).zip(cookie_mask(4)) {
                    *o = a ^ m;
                }
                IpAddr::V4(Ipv4Addr::from(octets))
            }
            6 => {
                let mut octets = [0u8; 16];
                for ((o, a), m) in octets.iter_mut().zip(self.take(16)?).zip(cookie_mask(16)) {
                    *o = a ^ m;
                }
                IpAddr::V6(Ipv6Addr::from(octets))
            }
            _ => return Err(DecodeError::Malformed("address family is neither 4 nor 6")),
        };
        Ok(SocketAddr::new(ip, port))
    }
}
