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

/// A test directory with an operator, and a tracker trusting it (its address and process).
fn operator_and_tracker() -> (tempfile::TempDir, std::net::SocketAddr, Proc) {
    let dir = tempfile::tempdir().unwrap();
    operator_init(dir.path());
    let tracker_addr = free_tcp();
    let tracker = start_tracker(dir.path(), tracker_addr);
    (dir, tracker_addr, tracker)
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
    let (dir, tracker_addr, _tracker) = operator_and_tracker();
    let sample = dir.path().join("sample.bin");
    std::fs::write(&sample, vec![7u8; 100_000]).unwrap();
    let mut devices = Vec::new();
    let mut content = String::new();
    for (id, role) in [("origin-1", "origin"), ("edge-1", "edge")] {
        let store = dir.path().join(id);
        content = common::add(&[sample.as_os_str()], &store);
        let credential = enroll(dir.path(), id, role);
        let mut command = serve_command(&store, &format!("http://{tracker_addr}"), &credential);
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

/// `pcdn serve --store STORE --tracker URL --credential FILE` on a free loopback port.
fn serve_command(store: &Path, url: &str, credential: &Path) -> std::process::Command {
    let mut command = pcdn();
    command
        .arg("serve")
        .arg("--store")
        .arg(store)
        .args(["--listen", &free_udp().to_string()])
        .args(["--tracker", url])
        .arg("--credential")
        .arg(credential);
    command
}

/// `serve_command` for a store `NAME-store` in `dir`, started.
fn serve(dir: &Path, name: &str, url: &str, credential: &Path) -> Proc {
    let store = dir.join(format!("{name}-store"));
    Proc::spawn(name, &mut serve_command(&store, url, credential))
}

/// Waits (at most 60 s) for `device` to exit; its exit code and stderr.
fn exit_of(device: &mut Proc) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = device.child.try_wait().unwrap() {
            return (status.code(), device.stderr_all());
        }
        assert!(
            Instant::now() < deadline,
            "{} still runs 60 s on: {}",
            device.name,
            device.stderr_tail()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A revoked device's `pcdn serve` ends with exit status 2 (which the systemd unit does not
/// restart on) and a message saying what to do, instead of retrying forever.
#[test]
fn a_revoked_device_stops_serving_with_status_2_and_says_what_to_do() {
    let (dir, tracker_addr, _tracker) = operator_and_tracker();
    let url = format!("http://{tracker_addr}");
    let credential = enroll(dir.path(), "edge-r", "edge");
    let mut device = serve(dir.path(), "edge-r", &url, &credential);
    wait_until("the edge registers", || device.stderr_all().contains("registered"));
    let output = pcdn()
        .args(["operator", "revoke"])
        .arg(operator_dir(dir.path()))
        .args(["--id", "edge-r", "--tracker", &url])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let (code, stderr) = exit_of(&mut device);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("the tracker refused this device's credential")
            && stderr.contains("403 revoked")
            && stderr.contains("pcdn operator enroll"),
        "{stderr}"
    );
}

/// An expired credential ends `pcdn serve` at its first request, with status 2 and a message.
#[test]
fn an_expired_credential_stops_serving_with_status_2() {
    let (dir, tracker_addr, _tracker) = operator_and_tracker();
    let credential = operator_dir(dir.path()).join("short.cred");
    let output = pcdn()
        .args(["operator", "enroll"])
        .arg(operator_dir(dir.path()))
        .args(["--id", "edge-x", "--role", "edge", "--expires", "1s", "-o"])
        .arg(&credential)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    // Past its expiry, which is in whole seconds.
    std::thread::sleep(Duration::from_millis(2_100));
    let mut device = serve(dir.path(), "edge-x", &format!("http://{tracker_addr}"), &credential);
    let (code, stderr) = exit_of(&mut device);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("expired_credential") && stderr.contains("Ask the operator for a new credential"),
        "{stderr}"
    );
}

/// A tracker that is down is a transient error: the device keeps serving and retrying.
#[test]
fn a_device_keeps_retrying_while_its_tracker_is_down() {
    let dir = tempfile::tempdir().unwrap();
    operator_init(dir.path());
    let credential = enroll(dir.path(), "edge-d", "edge");
    // Nothing listens there: connections are refused.
    let tracker_addr = free_tcp();
    let mut device = serve(dir.path(), "edge-d", &format!("http://{tracker_addr}"), &credential);
    wait_until("the edge has retried twice", || {
        device.stderr_all().matches("retry_in").count() >= 2
    });
    assert!(
        device.child.try_wait().unwrap().is_none(),
        "the edge exited: {}",
        device.stderr_all()
    );
    device.terminate();
}

/// An advertised address clients cannot reach (link-local) is refused by the tracker (400): the
/// device stops with status 2 and names the flag to fix.
#[test]
fn an_unreachable_advertised_address_stops_serving_with_status_2() {
    let (dir, tracker_addr, _tracker) = operator_and_tracker();
    let credential = enroll(dir.path(), "edge-l", "edge");
    let store = dir.path().join("edge-l-store");
    let mut command = serve_command(&store, &format!("http://{tracker_addr}"), &credential);
    command.args(["--advertise", "169.254.7.7:7801"]);
    let mut device = Proc::spawn("edge-l", &mut command);
    let (code, stderr) = exit_of(&mut device);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("refused this device's registration") && stderr.contains("--advertise"),
        "{stderr}"
    );
}

/// Three clients (127.0.0.1-3) report a device for corrupt data: it is quarantined;
/// `pcdn operator clear` ends the quarantine.
#[test]
fn the_operator_clears_a_quarantine() {
    let (dir, tracker_addr, _tracker) = operator_and_tracker();
    // A live edge holding a content: only a device a lookup lists can be reported.
    let credential = enroll(dir.path(), "edge-9", "edge");
    let file = dir.path().join("sample.bin");
    std::fs::write(&file, vec![9u8; 200_000]).unwrap();
    let store = dir.path().join("edge-9-store");
    let content = common::add(&[file.as_os_str()], &store);
    let mut edge = Proc::spawn(
        "edge-9",
        &mut serve_command(&store, &format!("http://{tracker_addr}"), &credential),
    );
    wait_until("the tracker lists edge-9", || {
        listed(tracker_addr, &content).contains(&"edge-9".to_owned())
    });
    let body = format!(r#"{{"device":"edge-9","content":"{content}","reason":"corrupt"}}"#);
    for last in 1..=3 {
        let (status, answer) = common::http_post_from([127, 0, 0, last].into(), tracker_addr, "/v1/reports", &body);
        assert_eq!(status, 200, "{answer}");
    }
    let quarantined = || http_get(tracker_addr, "/v1/quarantine").unwrap().1;
    assert!(quarantined().contains("edge-9"), "{}", quarantined());

    let output = pcdn()
        .args(["operator", "clear"])
        .arg(operator_dir(dir.path()))
        .args(["--id", "edge-9", "--tracker", &format!("http://{tracker_addr}")])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("cleared edge-9"),
        "{stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!quarantined().contains("edge-9"), "{}", quarantined());
    edge.terminate();
}
