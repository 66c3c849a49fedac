//! Signed tracker requests: the `Authorization` header a device (or the operator) sends, the
//! canonical string it signs, and its parsing and signature check.
//!
//! ```text
//! Authorization: PCDN-Device credential=<hex>, timestamp=<unix ms>, nonce=<32 hex>, signature=<128 hex>
//! Authorization: PCDN-Operator key=<64 hex>, timestamp=<unix ms>, nonce=<32 hex>, signature=<128 hex>
//! ```
//!
//! The signature is Ed25519 over [`canonical_string`]: the scheme, the method, the path and
//! query (relative to the API root, so a path-stripping proxy in front keeps it), the SHA-256
//! hash of the body (FIPS 180-4: every language's standard library has it, so any client can
//! sign), the timestamp and the nonce. The timestamp bounds how long a captured request
//! is worth anything; the nonce lets the tracker refuse a replay within that window.

use crate::credential::{Credential, CredentialError, DeviceIdentity, OperatorKey};
use ed25519_dalek::{Signature, VerifyingKey};
use sha2::{Digest, Sha256};

/// Scheme name of a device's signed request.
pub const DEVICE_SCHEME: &str = "PCDN-Device";
/// Scheme name of the operator's signed request.
pub const OPERATOR_SCHEME: &str = "PCDN-Operator";
/// Nonce length in bytes: 128 random bits never repeat by chance.
pub const NONCE_LEN: usize = 16;

/// Why an `Authorization` header was refused.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    #[error("malformed `Authorization` header: {0}")]
    Malformed(String),
    #[error(transparent)]
    Credential(#[from] CredentialError),
    #[error(
        "the request signature does not verify: the request was altered in transit, or signed with a key other than the credential's device key"
    )]
    BadSignature,
}

/// The string a request signature covers (one field per line).
pub fn canonical_string(
    scheme: &str,
    method: &str,
    path_and_query: &str,
    body: &[u8],
    timestamp_ms: u64,
    nonce: &[u8; NONCE_LEN],
) -> String {
    format!(
        "pcdn/request/v1\n{scheme}\n{method}\n{path_and_query}\n{}\n{timestamp_ms}\n{}",
        hex::encode(Sha256::digest(body)),
        hex::encode(nonce)
    )
}

/// A fresh random nonce.
pub fn random_nonce() -> Result<[u8; NONCE_LEN], String> {
    let mut nonce = [0u8; NONCE_LEN];
    getrandom::fill(&mut nonce).map_err(|e| format!("no randomness from the operating system: {e}"))?;
    Ok(nonce)
}

/// The `Authorization` header value of a device request.
pub fn device_authorization(
    device: &DeviceIdentity,
    method: &str,
    path_and_query: &str,
    body: &[u8],
    timestamp_ms: u64,
    nonce: [u8; NONCE_LEN],
) -> String {
    let signer = format!("credential={}", device.credential.to_hex());
    let request = (method, path_and_query, body, timestamp_ms, nonce);
    authorization(DEVICE_SCHEME, &signer, request, |message| device.sign(message))
}

/// The `Authorization` header value of an operator request.
pub fn operator_authorization(
    operator: &OperatorKey,
    method: &str,
    path_and_query: &str,
    body: &[u8],
    timestamp_ms: u64,
    nonce: [u8; NONCE_LEN],
) -> String {
    let signer = format!("key={}", hex::encode(operator.public().as_bytes()));
    let request = (method, path_and_query, body, timestamp_ms, nonce);
    authorization(OPERATOR_SCHEME, &signer, request, |message| operator.sign(message))
}

/// The header value of `scheme`: the signer's field, the timestamp, the nonce and `sign`'s
/// signature over the request's canonical string.
fn authorization(
    scheme: &str,
    signer: &str,
    (method, path_and_query, body, timestamp_ms, nonce): (&str, &str, &[u8], u64, [u8; NONCE_LEN]),
    sign: impl Fn(&[u8]) -> [u8; 64],
) -> String {
    let message = canonical_string(scheme, method, path_and_query, body, timestamp_ms, &nonce);
    format!(
        "{scheme} {signer}, timestamp={timestamp_ms}, nonce={}, signature={}",
        hex::encode(nonce),
        hex::encode(sign(message.as_bytes()))
    )
}

/// Who signed a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signer {
    /// A device, by its credential (not yet checked against the operator key).
    Device(Box<Credential>),
    /// The operator, by the public key it claims.
    Operator(VerifyingKey),
}

/// A parsed `Authorization` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authorization {
    pub signer: Signer,
    pub timestamp_ms: u64,
    pub nonce: [u8; NONCE_LEN],
    signature: [u8; 64],
}

fn hex_array<const N: usize>(field: &str, text: &str) -> Result<[u8; N], RequestError> {
    let mut bytes = [0u8; N];
    if text.len() != 2 * N || hex::decode_to_slice(text, &mut bytes).is_err() {
        return Err(RequestError::Malformed(format!(
            "`{field}` must be {} hex characters",
            2 * N
        )));
    }
    Ok(bytes)
}

impl Authorization {
    /// Parses a header value strictly: a known scheme, then exactly its four `name=value`
    /// fields, in order, separated by `, `.
    pub fn parse(header: &str) -> Result<Authorization, RequestError> {
        let malformed = |what: &str| RequestError::Malformed(what.to_owned());
        let (scheme, fields) = header.split_once(' ').ok_or_else(|| {
            malformed("expected `PCDN-Device credential=..., timestamp=..., nonce=..., signature=...`")
        })?;
        let first = match scheme {
            DEVICE_SCHEME => "credential",
            OPERATOR_SCHEME => "key",
            _ => {
                return Err(RequestError::Malformed(format!(
                    "scheme must be {DEVICE_SCHEME} (a device) or {OPERATOR_SCHEME} (the operator), not {:?}",
                    scheme.chars().take(40).collect::<String>()
                )));
            }
        };
        let mut values = Vec::with_capacity(4);
        let names = [first, "timestamp", "nonce", "signature"];
        let parts: Vec<&str> = fields.split(", ").collect();
        if parts.len() != names.len() {
            return Err(RequestError::Malformed(format!(
                "expected the fields {} separated by \", \"",
                names.join(", ")
            )));
        }
        for (part, name) in parts.iter().zip(names) {
            match part.split_once('=') {
                Some((key, value)) if key == name => values.push(value),
                _ => {
                    return Err(RequestError::Malformed(format!(
                        "expected field `{name}=` in {:?}",
                        part.chars().take(40).collect::<String>()
                    )));
                }
            }
        }
        let timestamp_ms = values[1]
            .parse()
            .map_err(|_| malformed("`timestamp` must be Unix milliseconds"))?;
        let nonce = hex_array::<NONCE_LEN>("nonce", values[2])?;
        let signature = hex_array::<64>("signature", values[3])?;
        let signer = if scheme == DEVICE_SCHEME {
            Signer::Device(Box::new(Credential::from_hex(values[0])?))
        } else {
            let key = hex_array::<32>("key", values[0])?;
            Signer::Operator(VerifyingKey::from_bytes(&key).map_err(|_| malformed("`key` is not an Ed25519 key"))?)
        };
        Ok(Authorization {
            signer,
            timestamp_ms,
            nonce,
            signature,
        })
    }

    /// The key the request claims to be signed with.
    pub fn signing_key(&self) -> &VerifyingKey {
        match &self.signer {
            Signer::Device(credential) => &credential.device_key,
            Signer::Operator(key) => key,
        }
    }

    /// Checks the request signature over this method, path and body (not the credential, the
    /// timestamp window or replays: the tracker does those).
    pub fn verify_signature(&self, method: &str, path_and_query: &str, body: &[u8]) -> Result<(), RequestError> {
        let scheme = match self.signer {
            Signer::Device(_) => DEVICE_SCHEME,
            Signer::Operator(_) => OPERATOR_SCHEME,
        };
        let message = canonical_string(scheme, method, path_and_query, body, self.timestamp_ms, &self.nonce);
        self.signing_key()
            .verify_strict(message.as_bytes(), &Signature::from_bytes(&self.signature))
            .map_err(|_| RequestError::BadSignature)
    }

    /// A key naming this request among all others for replay detection: the signer's key and
    /// the nonce, hashed.
    pub fn replay_key(&self) -> [u8; 32] {
        let mut hasher = blake3::Hasher::new();
        hasher.update(self.signing_key().as_bytes());
        hasher.update(&self.nonce);
        *hasher.finalize().as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;

    #[test]
    fn signed_requests_verify_only_unchanged() {
        let operator = OperatorKey::from_secret([1; 32]);
        let device = operator.enroll("edge-1", Role::Edge, 0, u64::MAX).unwrap();
        let header = device_authorization(&device, "PUT", "/v1/devices/edge-1/contents", b"{}", 1_000, [9; 16]);
        let parsed = Authorization::parse(&header).unwrap();
        assert_eq!(parsed.timestamp_ms, 1_000);
        parsed
            .verify_signature("PUT", "/v1/devices/edge-1/contents", b"{}")
            .unwrap();
        for (method, path, body) in [
            ("POST", "/v1/devices/edge-1/contents", &b"{}"[..]),
            ("PUT", "/v1/devices/edge-2/contents", b"{}"),
            ("PUT", "/v1/devices/edge-1/contents", b"{ }"),
        ] {
            assert_eq!(
                parsed.verify_signature(method, path, body),
                Err(RequestError::BadSignature)
            );
        }
        // Another device cannot sign with this credential.
        let other = operator.enroll("edge-1", Role::Edge, 0, u64::MAX).unwrap();
        let forged = device_authorization(&other, "GET", "/x", b"", 1, [0; 16]);
        let forged = forged.replacen(&other.credential.to_hex(), &device.credential.to_hex(), 1);
        let forged = Authorization::parse(&forged).unwrap();
        assert_eq!(
            forged.verify_signature("GET", "/x", b""),
            Err(RequestError::BadSignature)
        );

        let header = operator_authorization(&operator, "POST", "/v1/revocations", b"x", 5, [1; 16]);
        let parsed = Authorization::parse(&header).unwrap();
        assert_eq!(parsed.signer, Signer::Operator(operator.public()));
        parsed.verify_signature("POST", "/v1/revocations", b"x").unwrap();
        assert_ne!(
            parsed.replay_key(),
            Authorization::parse(&operator_authorization(
                &operator,
                "POST",
                "/v1/revocations",
                b"x",
                5,
                [2; 16]
            ))
            .unwrap()
            .replay_key()
        );
    }

    #[test]
    fn the_canonical_string_hashes_the_body_with_sha256() {
        let text = canonical_string(DEVICE_SCHEME, "PUT", "/v1/x?n=1", b"abc", 7, &[0xab; 16]);
        assert_eq!(
            text,
            format!(
                "pcdn/request/v1\nPCDN-Device\nPUT\n/v1/x?n=1\n\
                 ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n7\n{}",
                "ab".repeat(16)
            )
        );
    }

    #[test]
    fn malformed_headers_say_what_is_wrong() {
        let operator = OperatorKey::from_secret([1; 32]);
        let good = operator_authorization(&operator, "GET", "/", b"", 5, [1; 16]);
        for (bad, expected) in [
            ("Bearer x", "scheme must be"),
            ("PCDN-Device", "expected `PCDN-Device"),
            (&good.replace(", timestamp=5", ""), "expected the fields"),
            (&good.replace("timestamp=5", "timestamp=x"), "`timestamp`"),
            (&good.replace("timestamp=5", "time=5"), "`timestamp=`"),
            (&good.replace("nonce=", "nonce=ab"), "`nonce`"),
            (
                &format!(
                    "PCDN-Device credential=00, timestamp=1, nonce={}, signature={}",
                    "0".repeat(32),
                    "0".repeat(128)
                ),
                "credential",
            ),
        ] {
            let error = Authorization::parse(bad).unwrap_err().to_string();
            assert!(error.contains(expected), "{bad}: {error}");
        }
    }
}
