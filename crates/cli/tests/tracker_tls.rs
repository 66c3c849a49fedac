//! `pcdn tracker --tls-cert/--tls-key` and `pcdn fetch --tracker https://... --tracker-ca` as
//! processes, with a CA and certificate made by the `openssl` command line: the fetch reaches
//! the tracker over HTTPS (and is told it has no manifest), fails clearly without the CA, and a
//! missing key file stops the tracker naming it.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Proc, free_tcp, pcdn};

fn openssl(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("the openssl command (apt-get install openssl)");
    assert!(status.success(), "openssl {args:?}");
}

/// ca.crt, and tracker.crt/tracker.key for DNS name localhost signed by it.
fn make_pki(dir: &Path) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-days",
        "2",
        "-subj",
        "/CN=pcdn-test-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    ]);
    openssl(dir, &ca);
    let mut csr = vec!["req"];
    csr.extend(ec);
    csr.extend([
        "-subj",
        "/CN=localhost",
        "-keyout",
        "tracker.key",
        "-out",
        "tracker.csr",
    ]);
    openssl(dir, &csr);
    std::fs::write(dir.join("san.ext"), "subjectAltName=DNS:localhost\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "tracker.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "tracker.crt",
        ],
    );
}

#[test]
fn fetch_reaches_an_https_tracker_with_its_ca_and_fails_clearly_without() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_pki(d);
    common::operator_init(d);
    let addr = free_tcp();
    let mut tracker = Proc::spawn(
        "tracker",
        pcdn()
            .arg("tracker")
            .args(["--listen", &addr.to_string(), "--store", "sqlite::memory:"])
            .arg("--operator-key")
            .arg(common::operator_dir(d).join("operator.pub"))
            .arg("--tls-cert")
            .arg(d.join("tracker.crt"))
            .arg("--tls-key")
            .arg(d.join("tracker.key")),
    );
    let url = format!("https://localhost:{}", addr.port());
    let id = "ab".repeat(32);
    let fetch = |ca: Option<&Path>| {
        let mut command = pcdn();
        command
            .args(["fetch", &id, "--tracker", &url, "-o"])
            .arg(d.join("out.bin"))
            .args(["--timeout", "20s"]);
        if let Some(ca) = ca {
            command.arg("--tracker-ca").arg(ca);
        }
        let output = command.output().unwrap();
        assert!(!output.status.success());
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    // With the CA: the tracker answers over HTTPS (it has no manifest for this id).
    let deadline = Instant::now() + Duration::from_secs(30);
    let with_ca = loop {
        let stderr = fetch(Some(&d.join("ca.crt")));
        if !stderr.contains("Connect") || Instant::now() > deadline {
            break stderr;
        }
        std::thread::sleep(Duration::from_millis(200)); // the tracker is still starting
    };
    assert!(
        with_ca.contains("has no manifest") && with_ca.contains(&url),
        "{with_ca}\n{}",
        tracker.stderr_tail()
    );
    // Without it the system's roots do not know the CA.
    let without = fetch(None);
    assert!(without.contains("--tracker-ca"), "{without}");
    tracker.terminate();

    // A tracker whose key file is missing does not start, and says which file.
    let output = pcdn()
        .arg("tracker")
        .args(["--listen", &free_tcp().to_string(), "--store", "sqlite::memory:"])
        .arg("--operator-key")
        .arg(common::operator_dir(d).join("operator.pub"))
        .arg("--tls-cert")
        .arg(d.join("tracker.crt"))
        .arg("--tls-key")
        .arg(d.join("missing.key"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("missing.key") && stderr.contains("TLS key file"),
        "{stderr}"
    );
}
