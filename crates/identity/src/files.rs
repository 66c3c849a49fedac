//! The key files: `operator.key` / `operator.pub` (64 hex characters each) and the device
//! credential file (TOML with hex fields, holding the device's secret key too). Secret files are
//! created with mode 0600 and never overwritten.

use crate::credential::{Credential, DeviceIdentity, OperatorKey, Role};
use crate::time::format_unix_secs;
use ed25519_dalek::{SigningKey, VerifyingKey};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The operator's secret key file in an operator directory.
pub const OPERATOR_KEY_FILE: &str = "operator.key";
/// The operator's public key file (what `pcdn tracker --operator-key` reads).
pub const OPERATOR_PUB_FILE: &str = "operator.pub";

/// A key file problem, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("{}: {why}", path.display())]
pub struct FileError {
    pub path: PathBuf,
    pub why: String,
}

fn error(path: &Path, why: impl Into<String>) -> FileError {
    FileError {
        path: path.to_owned(),
        why: why.into(),
    }
}

/// Creates `path` with `text`, mode 0600 (`secret`) or 0644; refuses to overwrite.
fn create(path: &Path, text: &str, secret: bool) -> Result<(), FileError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(if secret { 0o600 } else { 0o644 });
    }
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            error(path, "already exists; refusing to overwrite it (move it away first)")
        } else {
            error(path, format!("cannot create: {e}"))
        }
    })?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| error(path, format!("cannot write: {e}")))
}

fn read(path: &Path, what: &str) -> Result<String, FileError> {
    std::fs::read_to_string(path).map_err(|e| error(path, format!("cannot read the {what}: {e}")))
}

fn hex32(path: &Path, field: &str, text: &str) -> Result<[u8; 32], FileError> {
    let mut bytes = [0u8; 32];
    hex::decode_to_slice(text.trim(), &mut bytes)
        .map_err(|_| error(path, format!("{field}: expected 64 hex characters")))?;
    Ok(bytes)
}

/// Creates `operator.key` (0600) and `operator.pub` in `dir` (created if missing); refuses if
/// either exists.
pub fn init_operator(dir: &Path) -> Result<OperatorKey, FileError> {
    std::fs::create_dir_all(dir).map_err(|e| error(dir, format!("cannot create the directory: {e}")))?;
    let (key_path, pub_path) = (dir.join(OPERATOR_KEY_FILE), dir.join(OPERATOR_PUB_FILE));
    for path in [&key_path, &pub_path] {
        if path.exists() {
            return Err(error(path, "already exists; refusing to overwrite the operator key"));
        }
    }
    let key = OperatorKey::generate().map_err(|e| error(dir, e))?;
    create(&key_path, &format!("{}\n", hex::encode(key.secret())), true)?;
    create(&pub_path, &format!("{}\n", hex::encode(key.public().as_bytes())), false)?;
    Ok(key)
}

/// Reads `operator.key` from an operator directory.
pub fn read_operator_key(dir: &Path) -> Result<OperatorKey, FileError> {
    let path = dir.join(OPERATOR_KEY_FILE);
    let text = read(&path, "operator secret key")?;
    Ok(OperatorKey::from_secret(hex32(&path, "operator secret key", &text)?))
}

/// Reads an operator public key file (`operator.pub`).
pub fn read_operator_public(path: &Path) -> Result<VerifyingKey, FileError> {
    let text = read(path, "operator public key")?;
    let bytes = hex32(path, "operator public key", &text)?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| error(path, "not an Ed25519 public key"))
}

/// The credential file's fields.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CredentialFile {
    version: u8,
    id: String,
    role: String,
    issued_ms: u64,
    not_after: u64,
    device_public_key: String,
    operator_public_key: String,
    signature: String,
    device_secret_key: String,
}

/// The credential file text (TOML; the date comments are for people and not read back).
pub fn credential_text(identity: &DeviceIdentity) -> String {
    let credential = &identity.credential;
    format!(
        "# pcdn device credential, signed by the operator. Keep it private: it holds the device's\n\
         # secret key. Inspect or renew with `pcdn operator enroll`.\n\
         version = {}\n\
         id = \"{}\"\n\
         role = \"{}\"\n\
         issued_ms = {}  # {}\n\
         not_after = {}  # {}\n\
         device_public_key = \"{}\"\n\
         operator_public_key = \"{}\"\n\
         signature = \"{}\"\n\
         device_secret_key = \"{}\"\n",
        crate::CREDENTIAL_VERSION,
        credential.id,
        credential.role,
        credential.issued_ms,
        format_unix_secs(credential.issued_ms / 1000),
        credential.not_after,
        format_unix_secs(credential.not_after),
        hex::encode(credential.device_key.as_bytes()),
        hex::encode(credential.operator_key),
        hex::encode(credential.signature()),
        hex::encode(identity.secret()),
    )
}

/// Writes a credential file (mode 0600); refuses to overwrite.
pub fn write_credential(path: &Path, identity: &DeviceIdentity) -> Result<(), FileError> {
    create(path, &credential_text(identity), true)
}

/// Reads and checks a credential file: every field present and well formed, nothing unknown,
/// the secret key matching the public key. Does not check the operator signature or the expiry
/// (only the tracker knows which operator it trusts; its answer says).
pub fn read_credential(path: &Path) -> Result<DeviceIdentity, FileError> {
    let text = read(path, "device credential")?;
    parse_credential(path, &text)
}

/// Parses credential file text ([`read_credential`]); errors name `path`.
pub fn parse_credential(path: &Path, text: &str) -> Result<DeviceIdentity, FileError> {
    let file: CredentialFile = toml::from_str(text).map_err(|e| error(path, format!("not a credential file: {e}")))?;
    if file.version != crate::CREDENTIAL_VERSION {
        return Err(error(
            path,
            format!(
                "version: {}, but this build reads version {}",
                file.version,
                crate::CREDENTIAL_VERSION
            ),
        ));
    }
    crate::check_device_id(&file.id).map_err(|e| error(path, format!("id: {e}")))?;
    let role: Role = file.role.parse().map_err(|e| error(path, format!("role: {e}")))?;
    let device_key = VerifyingKey::from_bytes(&hex32(path, "device_public_key", &file.device_public_key)?)
        .map_err(|_| error(path, "device_public_key: not an Ed25519 public key"))?;
    let operator_key = hex32(path, "operator_public_key", &file.operator_public_key)?;
    let mut signature = [0u8; 64];
    hex::decode_to_slice(file.signature.trim(), &mut signature)
        .map_err(|_| error(path, "signature: expected 128 hex characters"))?;
    let secret = SigningKey::from_bytes(&hex32(path, "device_secret_key", &file.device_secret_key)?);
    let credential = Credential::from_parts(
        file.id,
        role,
        device_key,
        operator_key,
        file.issued_ms,
        file.not_after,
        signature,
    );
    DeviceIdentity::new(credential, secret).map_err(|e| error(path, format!("device_secret_key: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_and_credential_files_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let operator = init_operator(dir.path()).unwrap();
        let error = init_operator(dir.path()).unwrap_err().to_string();
        assert!(error.contains("refusing to overwrite"), "{error}");
        assert_eq!(read_operator_key(dir.path()).unwrap().secret(), operator.secret());
        let public = read_operator_public(&dir.path().join(OPERATOR_PUB_FILE)).unwrap();
        assert_eq!(public, operator.public());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(OPERATOR_KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }

        let identity = operator.enroll("origin-1", Role::Origin, 1_000, 2_000).unwrap();
        let path = dir.path().join("origin-1.cred");
        write_credential(&path, &identity).unwrap();
        assert!(write_credential(&path, &identity).is_err());
        let read = read_credential(&path).unwrap();
        assert_eq!(read.credential, identity.credential);
        read.credential.verify(&public, 2_000).unwrap();
    }

    #[test]
    fn credential_file_errors_name_file_and_field() {
        let identity = OperatorKey::from_secret([3; 32]).enroll("e", Role::Edge, 0, 1).unwrap();
        let text = credential_text(&identity);
        let path = Path::new("dev.cred");
        for (edit, field) in [
            (text.replace("role = \"edge\"", "role = \"admin\""), "role"),
            (text.replace("id = \"e\"", "id = \"a b\""), "id"),
            (text.replace("version = 1", "version = 9"), "version"),
            (format!("{text}extra = 1\n"), "extra"),
            (
                text.replace("device_secret_key = \"", "device_secret_key = \"ab"),
                "device_secret_key",
            ),
        ] {
            let error = parse_credential(path, &edit).unwrap_err().to_string();
            assert!(
                error.starts_with("dev.cred: ") && error.contains(field),
                "{field}: {error}"
            );
        }
        // A secret key from another credential does not pair with this one.
        let other = OperatorKey::from_secret([3; 32]).enroll("e", Role::Edge, 0, 1).unwrap();
        let swapped = text.replace(&hex::encode(identity.secret()), &hex::encode(other.secret()));
        let error = parse_credential(path, &swapped).unwrap_err().to_string();
        assert!(error.contains("does not match"), "{error}");
    }
}
