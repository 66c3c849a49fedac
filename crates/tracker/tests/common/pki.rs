//! A throwaway certificate authority for the HTTPS tests (rcgen): a CA and server certificates
//! it signs, written as PEM files.

#![allow(dead_code)] // Each test binary uses a different subset.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use std::path::{Path, PathBuf};

/// A CA whose certificate is in `cert` (PEM).
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
    pub cert: PathBuf,
}

/// A server's certificate chain and key files.
pub struct ServerFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Ca {
    /// A new CA named `name`, its certificate written to `dir/<name>.pem`.
    pub fn new(dir: &Path, name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let cert = dir.join(format!("{name}.pem"));
        std::fs::write(&cert, issuer.pem()).unwrap();
        Ca { issuer, cert }
    }

    /// A server certificate for `names` (DNS names or IP literals), signed by this CA, written
    /// to `dir/<file>.crt` and `dir/<file>.key`.
    pub fn server(&self, dir: &Path, file: &str, names: &[&str]) -> ServerFiles {
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let files = ServerFiles {
            cert: dir.join(format!("{file}.crt")),
            key: dir.join(format!("{file}.key")),
        };
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        files
    }
}
