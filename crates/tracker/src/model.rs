//! The registry's data: devices, their load reports, content ids, validation and server ranking.

use pcdn_core::wire::{CONTENT_ID_LEN, ContentId};
use serde::Serialize;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};

/// Longest device id, in characters.
pub(crate) const MAX_DEVICE_ID_LEN: usize = 64;
/// Most servers a lookup may ask for (`n`).
pub(crate) const MAX_LOOKUP_N: usize = 64;
/// Servers a lookup returns when it does not say.
pub(crate) const DEFAULT_LOOKUP_N: usize = 8;
/// Most contents one device may announce in one list.
pub(crate) const MAX_ANNOUNCED: usize = 100_000;

/// Why a device id or content id was refused; the text says what was expected.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum IdError {
    #[error("expected a device id of 1..=64 characters from [A-Za-z0-9._-], not only dots, got {0:?}")]
    DeviceId(String),
    #[error("expected a content id of 64 hex characters, got {0:?}")]
    ContentId(String),
    #[error("expected an Ed25519 public key of 64 hex characters, got {0:?}")]
    PublicKey(String),
}

/// Checks a device id: 1..=64 characters of `[A-Za-z0-9._-]`, not made only of dots (`.` and
/// `..` would name the current or parent directory wherever an id becomes a path segment, in a
/// URL or a file name).
pub(crate) fn check_device_id(id: &str) -> Result<(), IdError> {
    let valid = !id.is_empty()
        && id.len() <= MAX_DEVICE_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && id.bytes().any(|b| b != b'.');
    if valid {
        Ok(())
    } else {
        Err(IdError::DeviceId(shorten(id)))
    }
}

/// Why a device's address cannot be one that clients reach; `None` if it can. Loopback is
/// allowed (a tracker and its devices on one host: tests, the demo). Refused: the unspecified
/// address, port 0, IPv4 broadcast, multicast (RFC 1112, RFC 4291 §2.7) and link-local
/// addresses (169.254/16, RFC 3927; fe80::/10, RFC 4291 §2.5.6), whose meaning depends on the
/// client's own link. IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry.
pub(crate) fn unreachable_addr_reason(addr: SocketAddr) -> Option<&'static str> {
    if addr.port() == 0 {
        return Some("port 0 is not a port clients can send to");
    }
    match addr.ip().to_canonical() {
        IpAddr::V4(ip) if ip.is_unspecified() => Some("0.0.0.0 is the unspecified address, not a device's"),
        IpAddr::V4(ip) if ip.is_broadcast() => Some("255.255.255.255 is the broadcast address"),
        IpAddr::V4(ip) if ip.is_multicast() => Some("224.0.0.0/4 is multicast"),
        IpAddr::V4(ip) if ip.is_link_local() => Some("169.254.0.0/16 is link-local"),
        IpAddr::V6(ip) if ip.is_unspecified() => Some(":: is the unspecified address, not a device's"),
        IpAddr::V6(ip) if ip.is_multicast() => Some("ff00::/8 is multicast"),
        IpAddr::V6(ip) if ip.is_unicast_link_local() => Some("fe80::/10 is link-local"),
        _ => None,
    }
}

/// Parses a content id written as 64 hex characters (either case; always written lowercase).
pub(crate) fn parse_content_id(text: &str) -> Result<ContentId, IdError> {
    parse_hex32(text)
        .map(ContentId)
        .ok_or_else(|| IdError::ContentId(shorten(text)))
}

/// Parses an Ed25519 public key written as 64 hex characters.
pub(crate) fn parse_public_key(text: &str) -> Result<[u8; 32], IdError> {
    parse_hex32(text).ok_or_else(|| IdError::PublicKey(shorten(text)))
}

fn parse_hex32(text: &str) -> Option<[u8; 32]> {
    let mut bytes = [0u8; CONTENT_ID_LEN];
    (text.len() == 2 * CONTENT_ID_LEN && hex::decode_to_slice(text, &mut bytes).is_ok()).then_some(bytes)
}

/// The content id as the API writes it: 64 lowercase hex characters.
pub(crate) fn content_hex(id: &ContentId) -> String {
    hex::encode(id.0)
}

/// Error texts quote what they were given, cut short so that a huge input cannot make a huge error.
fn shorten(text: &str) -> String {
    const KEEP: usize = 80;
    match text.char_indices().nth(KEEP) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

/// What a device says about itself when it registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Registration {
    pub id: String,
    pub addr: SocketAddr,
    pub origin: bool,
    pub upload_capacity_bps: u64,
    pub public_key: Option<[u8; 32]>,
}

/// A device's latest load report (`POST /v1/devices/{id}/heartbeat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Load {
    pub sessions: u32,
    pub upload_bps: u64,
    pub healthy: bool,
}

impl Load {
    /// The load of a device that has just registered and not yet reported.
    pub const FRESH: Load = Load {
        sessions: 0,
        upload_bps: 0,
        healthy: true,
    };
}

/// A live device as lookups show it. Its lookup JSON is rendered on first use and kept: a
/// device is read by many lookups between two of its heartbeats, so lookups only copy bytes.
#[derive(Clone, Debug)]
pub(crate) struct Device {
    pub registration: Registration,
    pub load: Load,
    json: OnceLock<Box<str>>,
}

impl PartialEq for Device {
    fn eq(&self, other: &Device) -> bool {
        self.registration == other.registration && self.load == other.load
    }
}

impl Eq for Device {}

/// A device's entry in a lookup's `servers` or `origins` (docs/tracker.md).
#[derive(Serialize)]
struct DeviceJson<'a> {
    id: &'a str,
    addr: SocketAddr,
    origin: bool,
    upload_capacity_bps: u64,
    upload_bps: u64,
    free_upload_bps: u64,
    sessions: u32,
    healthy: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    public_key: Option<String>,
}

impl Device {
    pub fn new(registration: Registration, load: Load) -> Device {
        Device {
            registration,
            load,
            json: OnceLock::new(),
        }
    }

    /// The device as a JSON object of the lookup answer.
    pub fn json(&self) -> &str {
        self.json.get_or_init(|| {
            let registration = &self.registration;
            serde_json::to_string(&DeviceJson {
                id: &registration.id,
                addr: registration.addr,
                origin: registration.origin,
                upload_capacity_bps: registration.upload_capacity_bps,
                upload_bps: self.load.upload_bps,
                free_upload_bps: self.free_upload_bps(),
                sessions: self.load.sessions,
                healthy: self.load.healthy,
                public_key: registration.public_key.map(hex::encode),
            })
            .expect("a device serialises to JSON")
            .into_boxed_str()
        })
    }

    /// Upload capacity not in use: capacity − upload rate, saturating at zero.
    pub fn free_upload_bps(&self) -> u64 {
        self.registration
            .upload_capacity_bps
            .saturating_sub(self.load.upload_bps)
    }

    /// Whether a lookup may list this device among the `servers` of a content it announced.
    pub fn can_serve(&self) -> bool {
        self.load.healthy && !self.registration.origin
    }
}

/// Ranks of devices at their cap sit around this mark (`rank_load`); the Redis store's scores
/// are the same numbers (store/redis/scripts.rs `CAP`). 2^52: doubles hold every integer up to
/// 2^53, so a Redis score keeps the exact rank as long as free capacities stay below 2^52 and
/// pending charges below 2^50 bit/s (`rank_load` clamps them).
pub(crate) const CAP_MARK: i64 = 1 << 52;
/// Largest pending charge a rank counts, bit/s (1 Pbit/s).
const MAX_PENDING: u64 = 1 << 50;

/// Where a device ranks among a content's holders, lower first, from what its last heartbeat
/// said and what lookups charged it since (`pending_bps`, `Spread`): a device with room ranks
/// at `pending − free`, so a lookup that lists it moves it down until its next heartbeat
/// reports its real load; a device with less free upload than `min_free_bps` (at its cap,
/// `min_free_bps` ≤ 2^50) ranks at `CAP_MARK + pending − free`, after every device with room.
pub(crate) fn rank_load(device: &Device, pending_bps: u64, min_free_bps: u64) -> i64 {
    let free = device.free_upload_bps().min(CAP_MARK as u64 - 1) as i64;
    let pending = pending_bps.min(MAX_PENDING) as i64;
    if (free as u64) < min_free_bps {
        CAP_MARK + pending - free
    } else {
        pending - free
    }
}

/// A device's place in a ranking: unhealthy devices last (only origins stay ranked while
/// unhealthy), then by `rank_load`, then fewer sessions, then the id (so the order is total and
/// the same on every tracker instance). The stores keep rankings sorted by this key, so a
/// lookup reads the first `n` entries instead of every holder.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct RankKey {
    unhealthy: bool,
    pub load: i64,
    sessions: u32,
    pub id: String,
}

impl RankKey {
    /// The key of `device` charged `pending_bps` since its last heartbeat.
    pub fn of(device: &Device, pending_bps: u64, min_free_bps: u64) -> RankKey {
        RankKey::at(device, rank_load(device, pending_bps, min_free_bps))
    }

    /// The key of `device` at rank `load` (a Redis score: `rank_load` computed by the script).
    pub fn at(device: &Device, load: i64) -> RankKey {
        RankKey {
            unhealthy: !device.load.healthy,
            load,
            sessions: device.load.sessions,
            id: device.registration.id.clone(),
        }
    }

    /// Whether the device is at its cap (`rank_load`).
    pub fn at_cap(&self) -> bool {
        self.load >= CAP_MARK / 2
    }
}

/// What a lookup found: the ranked servers and the best live origins (`origin_order`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Lookup {
    pub servers: Vec<Arc<Device>>,
    pub origins: Vec<Arc<Device>>,
    /// Device records the lookup read: its work, bounded by `n` and the store limits rather
    /// than by the number of holders or origins (`pcdn_tracker_lookup_records_total`).
    pub records_read: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(id: &str, capacity: u64, upload: u64, sessions: u32) -> Arc<Device> {
        let registration = Registration {
            id: id.into(),
            addr: "127.0.0.1:1".parse().unwrap(),
            origin: false,
            upload_capacity_bps: capacity,
            public_key: None,
        };
        let load = Load {
            sessions,
            upload_bps: upload,
            healthy: true,
        };
        Arc::new(Device::new(registration, load))
    }

    #[test]
    fn device_ids() {
        for good in ["a", "edge-1", "A.b_c-9", &"x".repeat(64)] {
            assert_eq!(check_device_id(good), Ok(()), "{good}");
        }
        for good in [".a", "a..", "-", "_", "..-"] {
            assert_eq!(check_device_id(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "a b",
            "é",
            "a/b",
            &"x".repeat(65),
            "a\0",
            ".",
            "..",
            "...",
            &".".repeat(64),
        ] {
            assert!(check_device_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn device_addresses() {
        for good in [
            "127.0.0.1:1",
            "[::1]:7801",
            "10.0.0.1:7801",
            "192.0.2.1:65535",
            "[2001:db8::1]:1",
        ] {
            assert_eq!(unreachable_addr_reason(good.parse().unwrap()), None, "{good}");
        }
        for bad in [
            "127.0.0.1:0",
            "0.0.0.0:1",
            "[::]:1",
            "255.255.255.255:1",
            "224.0.0.1:1",
            "239.255.255.250:1",
            "[ff02::1]:1",
            "169.254.1.1:1",
            "[fe80::1]:1",
            "[febf::1]:1",
            "[::ffff:255.255.255.255]:1",
            "[::ffff:169.254.0.1]:1",
        ] {
            assert!(unreachable_addr_reason(bad.parse().unwrap()).is_some(), "{bad}");
        }
    }

    #[test]
    fn content_ids_round_trip_and_refuse_bad_text() {
        let id = ContentId([0xab; 32]);
        assert_eq!(parse_content_id(&content_hex(&id)), Ok(id));
        assert_eq!(parse_content_id(&content_hex(&id).to_uppercase()), Ok(id));
        assert!(parse_content_id(&"a".repeat(63)).is_err());
        assert!(parse_content_id(&"g".repeat(64)).is_err());
        assert!(parse_content_id(&"é".repeat(32)).is_err());
    }

    #[test]
    fn long_inputs_are_cut_in_error_texts() {
        let message = check_device_id(&"é".repeat(1000)).unwrap_err().to_string();
        assert!(message.len() < 300, "{message}");
        assert!(message.ends_with("...\""), "{message}");
    }

    fn order(devices: &[(Arc<Device>, u64)], min_free: u64) -> Vec<String> {
        let mut keys: Vec<RankKey> = devices
            .iter()
            .map(|(device, pending)| RankKey::of(device, *pending, min_free))
            .collect();
        keys.sort();
        keys.into_iter().map(|key| key.id).collect()
    }

    #[test]
    fn ranking_by_free_capacity_then_sessions_then_id() {
        let devices = [
            (device("busy", 10_000, 9_000, 0), 0), // free 1000
            (device("b", 5_000, 0, 2), 0),         // free 5000, 2 sessions
            (device("a", 5_000, 0, 2), 0),         // free 5000, 2 sessions, id a < b
            (device("idle", 5_000, 0, 1), 0),      // free 5000, 1 session
            (device("over", 1_000, 7_000, 0), 0),  // free 0 (saturating)
            (device("big", 20_000, 1_000, 9), 0),  // free 19000
        ];
        assert_eq!(order(&devices, 0), ["big", "idle", "a", "b", "busy", "over"]);
        assert_eq!(order(&devices, 1), ["big", "idle", "a", "b", "busy", "over"]);
    }

    #[test]
    fn pending_charges_move_a_device_down_but_never_below_a_device_at_its_cap() {
        let devices = [
            (device("big", 20_000, 0, 0), 16_000), // free 20000, charged 16000: ranks at -4000
            (device("mid", 5_000, 0, 0), 0),       // -5000
            (device("low", 2_000, 0, 0), 0),       // -2000
            (device("capped", 10_000, 9_950, 0), 0), // free 50: at its cap below 100
            (device("full", 10_000, 10_000, 0), 0), // free 0
        ];
        assert_eq!(order(&devices, 100), ["mid", "big", "low", "capped", "full"]);
        // Charged far beyond its capacity, a device with room still ranks before those at cap.
        let mut charged = devices.clone();
        charged[1].1 = 1 << 40;
        assert_eq!(order(&charged, 100), ["big", "low", "mid", "capped", "full"]);
        assert!(RankKey::of(&devices[3].0, 0, 100).at_cap());
        assert!(!RankKey::of(&devices[3].0, 0, 50).at_cap());
        // Among devices at their cap, by free upload less pending charges.
        let mut both = devices.clone();
        both[3].1 = 100;
        assert_eq!(order(&both, 100), ["mid", "big", "low", "full", "capped"]);
    }

    #[test]
    fn lookup_json_of_a_device() {
        let mut registration = device("edge-1", 4_000_000, 0, 0).registration.clone();
        registration.public_key = Some([0xab; 32]);
        let load = Load {
            sessions: 3,
            upload_bps: 1_200_000,
            healthy: true,
        };
        let json: serde_json::Value = serde_json::from_str(Device::new(registration, load).json()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"id": "edge-1", "addr": "127.0.0.1:1", "origin": false,
                "upload_capacity_bps": 4_000_000, "upload_bps": 1_200_000, "free_upload_bps": 2_800_000,
                "sessions": 3, "healthy": true, "public_key": "ab".repeat(32)})
        );
    }
}
