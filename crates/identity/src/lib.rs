//! pcdn device identity (docs/identity.md): the operator's Ed25519 key, the device credentials
//! it signs (id, role, device key, expiry), and the signed requests by which a device (or the
//! operator) proves to the tracker who it is. Pure code: no I/O beyond the key files of
//! [`files`].
//!
//! ```
//! use pcdn_identity::{OperatorKey, Role, request};
//! let operator = OperatorKey::generate().unwrap();
//! let now_ms = 1_800_000_000_000;
//! let device = operator.enroll("edge-1", Role::Edge, now_ms, 1_900_000_000).unwrap();
//! let header = request::device_authorization(&device, "POST", "/v1/devices", b"{}", now_ms, [7; 16]);
//! let parsed = request::Authorization::parse(&header).unwrap();
//! parsed.verify_signature("POST", "/v1/devices", b"{}").unwrap();
//! ```

mod credential;
pub mod files;
pub mod request;
mod time;

pub use credential::{
    CREDENTIAL_VERSION, Credential, CredentialError, DeviceIdentity, OperatorKey, Role, check_device_id,
};
pub use ed25519_dalek;
pub use time::{format_unix_secs, parse_duration, unix_millis};
