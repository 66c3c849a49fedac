//! The example systemd units of `deploy/` pass `systemd-analyze verify` (every directive known
//! and well-formed, the sandboxing included), with `pcdn` standing where the units install it.

use std::path::Path;
use std::process::Command;

#[test]
fn the_example_units_verify() {
    assert!(
        Command::new("systemd-analyze").arg("--version").output().is_ok(),
        "systemd-analyze is missing: scripts/test.sh installs it (apt-get install systemd)"
    );
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let dir = tempfile::tempdir().unwrap();
    let mut units = Vec::new();
    for entry in std::fs::read_dir(&deploy).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "service") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.contains("ExecStart=/usr/local/bin/pcdn "), "{}", path.display());
            let copy = dir.path().join(path.file_name().unwrap());
            std::fs::write(&copy, text.replace("/usr/local/bin/pcdn", env!("CARGO_BIN_EXE_pcdn"))).unwrap();
            units.push(copy);
        }
    }
    assert_eq!(units.len(), 2, "deploy/ holds the tracker's and the device's unit");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .args(&units)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let about_ours: Vec<&str> = stderr
        .lines()
        .filter(|line| units.iter().any(|u| line.contains(u.to_str().unwrap())))
        .collect();
    assert!(
        out.status.success() && about_ours.is_empty(),
        "systemd-analyze verify:\n{stderr}"
    );
}
