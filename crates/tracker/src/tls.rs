//! HTTPS for the tracker: the certificate chain and private key (PEM files) loaded into a rustls
//! server configuration (TLS 1.2 and 1.3, HTTP/1.1 by ALPN, RFC 7301).

use anyhow::{Context, anyhow, bail};
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The PEM files of an HTTPS tracker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server's certificate chain, leaf first (PEM `CERTIFICATE` blocks).
    pub cert: PathBuf,
    /// The leaf certificate's private key (PEM `PRIVATE KEY`, `RSA PRIVATE KEY` or `EC PRIVATE KEY`).
    pub key: PathBuf,
}

/// The one crypto provider of the workspace: reqwest's default rustls backend uses aws-lc-rs too,
/// so only one is compiled.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn read(path: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read the TLS {what} file {}", path.display()))
}

/// The certificates of a PEM file; an error naming the file if it holds none.
fn certificates(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let text = read(path, "certificate")?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| anyhow!("TLS certificate file {} is not valid PEM: {error}", path.display()))?;
    if certs.is_empty() {
        bail!(
            "TLS certificate file {} holds no PEM CERTIFICATE block: expected the server's certificate chain, leaf first",
            path.display()
        );
    }
    Ok(certs)
}

fn private_key(path: &Path) -> anyhow::Result<PrivateKeyDer<'static>> {
    let text = read(path, "key")?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|error| match error {
        pem::Error::NoItemsFound => anyhow!(
            "TLS key file {} holds no PEM private key: expected a PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block",
            path.display()
        ),
        other => anyhow!(
            "TLS key file {} is not a valid PEM private key: {other}",
            path.display()
        ),
    })
}

/// The rustls configuration of `files`; errors name the file at fault, and a key that does not
/// belong to the certificate is refused here rather than at the first handshake.
pub(crate) fn server_config(files: &TlsFiles) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let certs = certificates(&files.cert)?;
    let key = private_key(&files.key)?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .context("the TLS provider supports no protocol version")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|error| {
            anyhow!(
                "TLS certificate {} and key {} cannot be used together: {error}",
                files.cert.display(),
                files.key.display()
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
