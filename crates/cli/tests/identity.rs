//! The operator's commands and device credentials as real processes: `pcdn operator init /
//! enroll / revoke`, `pcdn tracker --operator-key`, `pcdn serve --credential`.

mod common;

use common::{Proc, enroll, free_tcp, free_udp, http_get, operator_dir, operator_init, pcdn, start_tracker};
use std::path::Path;
use std::time::{Duration, Instant};

fn stderr_of(args: &[&std::ffi::OsStr]) -> (bool, String) {
    let output = pcdn().args(args).output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn operator_init_and_enroll_write_private_files_and_refuse_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    operator_init(dir.path());
    let operator = operator_dir(dir.path());
    #[cfg(unix)]
    assert_eq!(mode(&operator.join("operator.key")), 0o600);
    let public = std::fs::read_to_string(operator.join("operator.pub")).unwrap();
    assert_eq!(public.trim().len(), 64);
    let (ok, stderr) = stderr_of(&["operator".as_ref(), "init".as_ref(), operator.as_os_str()]);
    assert!(!ok && stderr.contains("refusing to overwrite"), "{stderr}");

    let credential = enroll(dir.path(), "edge-1", "edge");
    #[cfg(unix)]
    assert_eq!(mode(&credential), 0o600);
    let text = std::fs::read_to_string(&credential).unwrap();
    assert!(
        text.contains("id = \"edge-1\"") && text.contains("role = \"edge\""),
        "{text}"
    );
    assert!(text.contains(public.trim()), "the credential names its operator key");
    let (ok, stderr) = stderr_of(&[
        "operator".as_ref(),
        "enroll".as_ref(),
        operator.as_os_str(),
        "--id".as_ref(),
        "edge-1".as_ref(),
        "--role".as_ref(),
        "edge".as_ref(),
        "-o".as_ref(),
        credential.as_os_str(),
    ]);
    assert!(!ok && stderr.contains("refusing to overwrite"), "{stderr}");
    for (flag, value, expected) in [
        ("--role", "admin", "edge` or `origin"),
        ("--expires", "1y", "365d"),
        ("--id", "a b", "device id"),
    ] {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "operator".as_ref(),
            "enroll".as_ref(),
            operator.as_os_str(),
            "-o".as_ref(),
            "other.cred".as_ref(),
        ];
        for (name, default) in [("--id", "x"), ("--role", "edge"), ("--expires", "1d")] {
            let chosen = if name == flag { value } else { default };
            args.push(std::ffi::OsStr::new(name));
            args.push(std::ffi::OsStr::new(chosen));
        }
        let (ok, stderr) = stderr_of(&args);
        assert!(!ok && stderr.contains(expected), "{flag} {value}: {stderr}");
    }
}

#[test]
fn serve_with_an_edge_credential_refuses_origin_naming_the_role() {
    let dir = tempfile::tempdir().unwrap();
    operator_init(dir.path());
    let credential = enroll(dir.path(), "edge-1", "edge");
    let store = dir.path().join("store");
    let (ok, stderr) = stderr_of(&[
        "serve".as_ref(),
        "--store".as_ref(),
        store.as_os_str(),
        "--tracker".as_ref(),
        "http://127.0.0.1:9".as_ref(),
        "--credential".as_ref(),
        credential.as_os_str(),
        "--origin".as_ref(),
    ]);
    assert!(!ok, "serve accepted --origin with an edge credential");
    assert!(
        stderr.contains("role edge") && stderr.contains("--role origin"),
        "{stderr}"
    );
    // A tracker needs a credential.
    let (ok, stderr) = stderr_of(&[
        "serve".as_ref(),
        "--store".as_ref(),
        store.as_os_str(),
        "--tracker".as_ref(),
        "http://127.0.0.1:9".as_ref(),
    ]);
    assert!(!ok && stderr.contains("--credential"), "{stderr}");
}

/// The ids the tracker lists for a content (servers and origins).
fn listed(tracker: std::net::SocketAddr, content: &str) -> Vec<String> {
    let Some((200, body)) = http_get(tracker, &format!("/v1/contents/{content}/servers")) else {
        return Vec::new();
    };
    let lookup: serde_json::Value = serde_json::from_str(&body).unwrap();
    ["servers", "origins"]
        .iter()
        .flat_map(|list| lookup[list].as_array().unwrap().clone())
        .map(|device| device["id"].as_str().unwrap().to_owned())
        .collect()
}

fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_device_revoked_by_the_operator_leaves_lookups() {
    let dir = tempfile::tempdir().unwrap();
    operator_init(dir.path());
    let tracker_addr = free_tcp();
    let _tracker = start_tracker(dir.path(), tracker_addr);
    let sample = dir.path().join("sample.bin");
    std::fs::write(&sample, vec![7u8; 100_000]).unwrap();
    let mut devices = Vec::new();
    let mut content = String::new();
    for (id, role) in [("origin-1", "origin"), ("edge-1", "edge")] {
        let store = dir.path().join(id);
        content = common::add(&[sample.as_os_str()], &store);
        let credential = enroll(dir.path(), id, role);
        let mut command = pcdn();
        command
            .arg("serve")
            .arg("--store")
            .arg(&store)
            .args(["--listen", &free_udp().to_string()])
            .args(["--tracker", &format!("http://{tracker_addr}")])
            .arg("--credential")
            .arg(&credential);
        devices.push(Proc::spawn(id, &mut command));
    }
    wait_until("both devices are listed", || listed(tracker_addr, &content).len() == 2);

    let output = pcdn()
        .args(["operator", "revoke"])
        .arg(operator_dir(dir.path()))
        .args(["--id", "edge-1", "--tracker", &format!("http://{tracker_addr}")])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("revoked edge-1"),
        "{stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(listed(tracker_addr, &content), ["origin-1"]);
    // It stays gone: its own next requests are refused.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(listed(tracker_addr, &content), ["origin-1"]);
}
