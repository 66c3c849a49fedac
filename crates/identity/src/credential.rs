//! The operator key and the device credential: its canonical binary encoding (what the operator
//! signs and what a device sends), its strict decoding and its checks.

use crate::time::format_unix_secs;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use std::fmt;

/// The credential format this code writes and accepts.
pub const CREDENTIAL_VERSION: u8 = 1;
/// Prefix of the bytes the operator signs, so that a credential signature can never be taken for
/// a signature over anything else the same key signs (a request, a manifest).
const DOMAIN: &[u8] = b"pcdn/device-credential/v1\0";
/// Longest device id, in bytes (the tracker's rule).
const MAX_ID_LEN: usize = 64;
/// Encoded length before the id: version, role, id length.
const HEADER_LEN: usize = 3;
/// Encoded length after the id: device key, operator key, issued_ms, not_after, signature.
const TAIL_LEN: usize = 32 + 32 + 8 + 8 + 64;

/// What a device may do at the tracker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Serves contents it announced; cannot publish manifests.
    Edge,
    /// The CDN origin: serves everything and publishes the manifests it signs.
    Origin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Edge => "edge",
            Role::Origin => "origin",
        }
    }

    fn code(self) -> u8 {
        match self {
            Role::Edge => 0,
            Role::Origin => 1,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = String;

    fn from_str(text: &str) -> Result<Role, String> {
        match text {
            "edge" => Ok(Role::Edge),
            "origin" => Ok(Role::Origin),
            other => Err(format!("expected a role of `edge` or `origin`, got {other:?}")),
        }
    }
}

/// Why a credential was refused. Each message says what to do about it.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum CredentialError {
    #[error("malformed credential: {0}")]
    Malformed(String),
    #[error(
        "the credential of {id:?} is signed by operator key {found}, not by the operator key this tracker trusts ({expected}): enroll the device with the operator key the tracker was started with"
    )]
    UnknownOperator {
        id: String,
        found: String,
        expected: String,
    },
    #[error(
        "the credential of {id:?} does not carry a valid operator signature (it was altered after enrollment): enroll the device again with `pcdn operator enroll`"
    )]
    BadSignature { id: String },
    #[error(
        "the credential of {id:?} expired on {when}: enroll the device again with `pcdn operator enroll`",
        when = format_unix_secs(*not_after)
    )]
    Expired { id: String, not_after: u64 },
}

/// Checks a device id: 1..=64 characters of `[A-Za-z0-9._-]` (the tracker's rule).
pub fn check_device_id(id: &str) -> Result<(), String> {
    let valid = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if valid {
        Ok(())
    } else {
        let shown: String = id.chars().take(80).collect();
        Err(format!(
            "expected a device id of 1..=64 characters from [A-Za-z0-9._-], got {shown:?}"
        ))
    }
}

/// A device credential: the public part a device presents with every request.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    pub id: String,
    pub role: Role,
    /// The device's Ed25519 public key: requests are signed with its secret half.
    pub device_key: VerifyingKey,
    /// The operator key that signed this credential.
    pub operator_key: [u8; 32],
    /// When the operator enrolled the device (Unix milliseconds, the operator's clock); a
    /// revocation refuses every credential of the id issued before it.
    pub issued_ms: u64,
    /// Unix seconds after which the credential is refused.
    pub not_after: u64,
    signature: [u8; 64],
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("id", &self.id)
            .field("role", &self.role)
            .field("device_key", &hex::encode(self.device_key.as_bytes()))
            .field("not_after", &format_unix_secs(self.not_after))
            .finish_non_exhaustive()
    }
}

/// The signed fields, canonically encoded: version, role, id length, id, device key, operator
/// key, issued_ms (big-endian), not_after (big-endian).
fn signed_body(
    id: &str,
    role: Role,
    device_key: &VerifyingKey,
    operator_key: &[u8; 32],
    issued_ms: u64,
    not_after: u64,
) -> Vec<u8> {
    let mut body = Vec::with_capacity(HEADER_LEN + id.len() + TAIL_LEN);
    body.push(CREDENTIAL_VERSION);
    body.push(role.code());
    body.push(id.len() as u8);
    body.extend_from_slice(id.as_bytes());
    body.extend_from_slice(device_key.as_bytes());
    body.extend_from_slice(operator_key);
    body.extend_from_slice(&issued_ms.to_be_bytes());
    body.extend_from_slice(&not_after.to_be_bytes());
    body
}

fn signed_message(body: &[u8]) -> Vec<u8> {
    [DOMAIN, body].concat()
}

impl Credential {
    fn body(&self) -> Vec<u8> {
        signed_body(
            &self.id,
            self.role,
            &self.device_key,
            &self.operator_key,
            self.issued_ms,
            self.not_after,
        )
    }

    /// The canonical binary encoding: the signed fields, then the 64-byte operator signature.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = self.body();
        bytes.extend_from_slice(&self.signature);
        bytes
    }

    /// The encoding in lowercase hex, as the `Authorization` header carries it.
    pub fn to_hex(&self) -> String {
        hex::encode(self.encode())
    }

    /// Decodes [`Credential::encode`]'s bytes strictly: every field checked, nothing left over.
    /// Does not check the signature or the expiry ([`Credential::verify`] does).
    pub fn decode(bytes: &[u8]) -> Result<Credential, CredentialError> {
        let malformed = |what: String| CredentialError::Malformed(what);
        let Some((&[version, role, id_len], rest)) = bytes.split_first_chunk::<HEADER_LEN>() else {
            return Err(malformed(format!("{} bytes is too short", bytes.len())));
        };
        if version != CREDENTIAL_VERSION {
            return Err(malformed(format!(
                "version {version}, but this build reads version {CREDENTIAL_VERSION}"
            )));
        }
        let role = match role {
            0 => Role::Edge,
            1 => Role::Origin,
            other => {
                return Err(malformed(format!(
                    "role code {other} is neither edge (0) nor origin (1)"
                )));
            }
        };
        let id_len = usize::from(id_len);
        if rest.len() != id_len + TAIL_LEN {
            return Err(malformed(format!(
                "{} bytes, expected {} for a {id_len}-byte id",
                bytes.len(),
                HEADER_LEN + id_len + TAIL_LEN
            )));
        }
        let (id, rest) = rest.split_at(id_len);
        let id = std::str::from_utf8(id)
            .map_err(|_| malformed("the device id is not UTF-8".into()))?
            .to_owned();
        check_device_id(&id).map_err(|e| malformed(format!("device id: {e}")))?;
        let take = |rest: &[u8], at: usize, n: usize| rest[at..at + n].to_vec();
        let device_key: [u8; 32] = take(rest, 0, 32).try_into().expect("32 bytes");
        let device_key = VerifyingKey::from_bytes(&device_key)
            .map_err(|_| malformed("the device key is not an Ed25519 key".into()))?;
        let operator_key: [u8; 32] = take(rest, 32, 32).try_into().expect("32 bytes");
        let issued_ms = u64::from_be_bytes(take(rest, 64, 8).try_into().expect("8 bytes"));
        let not_after = u64::from_be_bytes(take(rest, 72, 8).try_into().expect("8 bytes"));
        let signature: [u8; 64] = take(rest, 80, 64).try_into().expect("64 bytes");
        Ok(Credential {
            id,
            role,
            device_key,
            operator_key,
            issued_ms,
            not_after,
            signature,
        })
    }

    /// Decodes the hex form ([`Credential::to_hex`]).
    pub fn from_hex(text: &str) -> Result<Credential, CredentialError> {
        let bytes = hex::decode(text).map_err(|e| CredentialError::Malformed(format!("not hex: {e}")))?;
        Credential::decode(&bytes)
    }

    /// Checks that `operator` signed this credential and that it has not expired at `now_secs`
    /// (Unix seconds).
    pub fn verify(&self, operator: &VerifyingKey, now_secs: u64) -> Result<(), CredentialError> {
        if &self.operator_key != operator.as_bytes() {
            return Err(CredentialError::UnknownOperator {
                id: self.id.clone(),
                found: hex::encode(self.operator_key),
                expected: hex::encode(operator.as_bytes()),
            });
        }
        let signature = Signature::from_bytes(&self.signature);
        operator
            .verify_strict(&signed_message(&self.body()), &signature)
            .map_err(|_| CredentialError::BadSignature { id: self.id.clone() })?;
        if now_secs > self.not_after {
            return Err(CredentialError::Expired {
                id: self.id.clone(),
                not_after: self.not_after,
            });
        }
        Ok(())
    }

    pub(crate) fn signature(&self) -> &[u8; 64] {
        &self.signature
    }

    pub(crate) fn from_parts(
        id: String,
        role: Role,
        device_key: VerifyingKey,
        operator_key: [u8; 32],
        issued_ms: u64,
        not_after: u64,
        signature: [u8; 64],
    ) -> Credential {
        Credential {
            id,
            role,
            device_key,
            operator_key,
            issued_ms,
            not_after,
            signature,
        }
    }
}

/// Fresh secret key bytes from the operating system.
fn random_key() -> Result<SigningKey, String> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| format!("no randomness from the operating system: {e}"))?;
    Ok(SigningKey::from_bytes(&secret))
}

/// The operator's signing key: it enrolls devices and signs revocations.
pub struct OperatorKey {
    key: SigningKey,
}

impl fmt::Debug for OperatorKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OperatorKey")
            .field("public", &hex::encode(self.public().as_bytes()))
            .finish_non_exhaustive()
    }
}

impl OperatorKey {
    /// A new random operator key.
    pub fn generate() -> Result<OperatorKey, String> {
        Ok(OperatorKey { key: random_key()? })
    }

    pub fn from_secret(secret: [u8; 32]) -> OperatorKey {
        OperatorKey {
            key: SigningKey::from_bytes(&secret),
        }
    }

    pub fn secret(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    pub fn public(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    pub(crate) fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.key.sign(message).to_bytes()
    }

    /// Enrolls a device with a fresh key: a credential for `id` and `role`, issued at `now_ms`
    /// (Unix ms), valid until `not_after` (Unix seconds).
    pub fn enroll(&self, id: &str, role: Role, now_ms: u64, not_after: u64) -> Result<DeviceIdentity, String> {
        self.enroll_key(id, role, random_key()?, now_ms, not_after)
    }

    /// Enrolls a device whose key is `device_key`.
    pub fn enroll_key(
        &self,
        id: &str,
        role: Role,
        device_key: SigningKey,
        now_ms: u64,
        not_after: u64,
    ) -> Result<DeviceIdentity, String> {
        check_device_id(id)?;
        let public = device_key.verifying_key();
        let operator = *self.public().as_bytes();
        let body = signed_body(id, role, &public, &operator, now_ms, not_after);
        let signature = self.sign(&signed_message(&body));
        Ok(DeviceIdentity {
            credential: Credential::from_parts(id.to_owned(), role, public, operator, now_ms, not_after, signature),
            key: device_key,
        })
    }
}

/// What a device holds: its credential and its secret key (the credential file).
#[derive(Clone)]
pub struct DeviceIdentity {
    pub credential: Credential,
    key: SigningKey,
}

impl fmt::Debug for DeviceIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceIdentity")
            .field("credential", &self.credential)
            .finish_non_exhaustive()
    }
}

impl DeviceIdentity {
    /// Pairs a credential with its device's secret key; an error if they do not match.
    pub fn new(credential: Credential, key: SigningKey) -> Result<DeviceIdentity, String> {
        if key.verifying_key() != credential.device_key {
            return Err("the device secret key does not match the credential's device public key".into());
        }
        Ok(DeviceIdentity { credential, key })
    }

    pub fn id(&self) -> &str {
        &self.credential.id
    }

    pub fn role(&self) -> Role {
        self.credential.role
    }

    pub fn secret(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    pub(crate) fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.key.sign(message).to_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operator(seed: u8) -> OperatorKey {
        OperatorKey::from_secret([seed; 32])
    }

    #[test]
    fn credentials_round_trip_and_verify() {
        let op = operator(1);
        let device = op.enroll("edge-1", Role::Edge, 5_000, 100).unwrap();
        let decoded = Credential::decode(&device.credential.encode()).unwrap();
        assert_eq!(decoded, device.credential);
        assert_eq!(Credential::from_hex(&decoded.to_hex()).unwrap(), decoded);
        decoded.verify(&op.public(), 100).unwrap();
    }

    #[test]
    fn wrong_operator_tampering_and_expiry_are_refused() {
        let op = operator(1);
        let device = op.enroll("edge-1", Role::Edge, 5_000, 100).unwrap();
        let credential = &device.credential;
        let error = credential.verify(&operator(2).public(), 0).unwrap_err();
        assert!(matches!(error, CredentialError::UnknownOperator { .. }), "{error}");
        assert!(error.to_string().contains("operator key"), "{error}");

        // Flip the role byte (edge → origin): the operator signature no longer matches.
        let mut bytes = credential.encode();
        bytes[1] = 1;
        let tampered = Credential::decode(&bytes).unwrap();
        assert_eq!(tampered.role, Role::Origin);
        let error = tampered.verify(&op.public(), 0).unwrap_err();
        assert_eq!(error, CredentialError::BadSignature { id: "edge-1".into() });

        let error = credential.verify(&op.public(), 101).unwrap_err();
        assert!(
            error.to_string().contains("expired on 1970-01-01 00:01:40 UTC"),
            "{error}"
        );
    }

    #[test]
    fn decoding_is_strict() {
        let bytes = operator(1).enroll("e", Role::Origin, 0, 1).unwrap().credential.encode();
        for cut in [0, 2, 3, bytes.len() - 1] {
            assert!(Credential::decode(&bytes[..cut]).is_err(), "{cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Credential::decode(&longer).is_err());
        let mut version = bytes.clone();
        version[0] = 2;
        let error = Credential::decode(&version).unwrap_err().to_string();
        assert!(error.contains("version 2"), "{error}");
        let mut role = bytes.clone();
        role[1] = 7;
        assert!(Credential::decode(&role).is_err());
        let mut id = bytes;
        id[3] = b' ';
        assert!(Credential::decode(&id).unwrap_err().to_string().contains("device id"));
        assert!(operator(1).enroll("a b", Role::Edge, 0, 1).is_err());
    }
}
