//! The `pcdn` binary's command line.

use assert_cmd::Command;

fn pcdn() -> Command {
    Command::cargo_bin("pcdn").expect("binary built")
}

#[test]
fn help_explains_the_commands() {
    let out = pcdn().arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("several servers") || text.contains("many edge servers"));
    assert!(text.contains("bench"));
    assert!(text.contains("list"));
}

#[test]
fn version_prints_the_crate_version() {
    let out = pcdn().arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!("pcdn {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn list_names_every_registered_scheduler_and_controller() {
    let out = pcdn().arg("list").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for (name, _) in pcdn_core::scheduler::SCHEDULERS
        .iter()
        .chain(pcdn_core::cc::CONTROLLERS)
    {
        assert!(text.contains(name), "{name} missing from `pcdn list`");
    }
}

#[test]
fn a_bad_size_is_a_clear_error() {
    let out = pcdn().args(["bench", "core", "--size", "lots"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("--size") && err.contains("200M"), "{err}");
}

#[test]
fn the_core_bench_runs_and_reports() {
    let out = pcdn()
        .args(["bench", "core", "--size", "2M", "--runs", "1", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["packets"], 2_000_000u64.div_ceil(1400));
    assert!(v["packets_per_cpu_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn the_core_bench_takes_a_scheduler_and_a_control_and_names_a_wrong_one() {
    let out = pcdn()
        .args([
            "bench",
            "core",
            "--size",
            "2M",
            "--runs",
            "1",
            "--json",
            "--scheduler",
            "weave",
            "--cc",
            "weft",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["scheduler"].as_str(), v["cc"].as_str()),
        (Some("weave"), Some("weft"))
    );
    assert_eq!(v["packets"], 2_000_000u64.div_ceil(1400));
    let out = pcdn().args(["bench", "core", "--scheduler", "nope"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("--scheduler") && err.contains("nope"), "{err}");
}

/// `pcdn serve --config FILE` runs from a TOML file of its options, and its log lines carry no
/// terminal colour codes when stderr is a file.
#[test]
fn serve_runs_from_a_config_file_and_logs_plain_text_to_a_file() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("edge.toml");
    let store = dir.path().join("store");
    std::fs::write(
        &config,
        format!(
            "# an edge with no tracker\nstore = {:?}\nlisten = \"127.0.0.1:0\"\nmax_sessions = 16\n",
            store
        ),
    )
    .unwrap();
    let log = dir.path().join("serve.log");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("pcdn"))
        .args(["serve", "--config"])
        .arg(&config)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut text = String::new();
    while std::time::Instant::now() < deadline {
        text.clear();
        std::fs::File::open(&log).unwrap().read_to_string(&mut text).unwrap();
        if text.contains("127.0.0.1") || child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        text.contains("127.0.0.1"),
        "pcdn serve did not start from {}: {text}",
        config.display()
    );
    assert!(store.is_dir(), "the store of the config file is used");
    assert!(
        !text.contains('\u{1b}'),
        "ANSI escape codes in a log written to a file: {text:?}"
    );

    std::fs::write(&config, format!("store = {:?}\nmax_sessions = \"many\"\n", store)).unwrap();
    let out = pcdn().args(["serve", "--config"]).arg(&config).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("edge.toml") && err.contains("line 2") && err.contains("key `max_sessions`"),
        "{err}"
    );
}

/// A published HLS file name with markup (stored XSS on the player page) is refused where it
/// enters: `pcdn add --video` will not import it, and `pcdn play` will not serve a manifest
/// that carries it (signed by a trusted key, its id right), naming the field.
#[test]
fn markup_in_an_hls_file_name_is_refused_at_import_and_at_play() {
    use pcdn_core::ed25519_dalek::SigningKey;
    use pcdn_core::manifest::{Container, VideoFile, VideoInfo};
    use pcdn_core::{Manifest, SignedManifest};

    let evil = "\"><img src=x onerror=alert(1)>.ts";
    let dir = tempfile::tempdir().unwrap();
    let hls = dir.path().join("hls");
    std::fs::create_dir(&hls).unwrap();
    std::fs::write(hls.join("index.m3u8"), format!("#EXTM3U\n#EXTINF:2,\n{evil}\n")).unwrap();
    std::fs::write(hls.join(evil), [0u8; 100]).unwrap();
    let out = pcdn()
        .args(["add", "--video"])
        .arg(&hls)
        .arg("--store")
        .arg(dir.path().join("store"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "imported: {stderr}");
    assert!(
        stderr.contains("index.m3u8") && stderr.contains("unreserved"),
        "{stderr}"
    );

    let playlist = b"#EXTM3U\n#EXTINF:2,\nseg.ts\n".to_vec();
    let mut data = playlist.clone();
    data.extend_from_slice(&[0u8; 100]);
    let mut manifest = Manifest::from_bytes(&data, 1024, 65536).unwrap();
    manifest.video = Some(VideoInfo {
        bitrate_bps: 1000,
        duration_ms: 2000,
        container: Container::Hls,
        files: vec![
            VideoFile {
                name: format!("{evil}.m3u8"),
                offset: 0,
                length: playlist.len() as u64,
            },
            VideoFile {
                name: "seg.ts".to_owned(),
                offset: playlist.len() as u64,
                length: 100,
            },
        ],
    });
    let key = SigningKey::from_bytes(&[7; 32]);
    let signed = SignedManifest::sign(manifest, &key);
    let file = dir.path().join("manifest");
    std::fs::write(&file, signed.encode()).unwrap();
    let out = pcdn()
        .arg("play")
        .arg(to_hex(&signed.content_id().0))
        .arg("--manifest")
        .arg(&file)
        .args(["--origin-server", "127.0.0.1:9", "--origin-key"])
        .arg(to_hex(&key.verifying_key().to_bytes()))
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && !stdout.contains("http://"),
        "served: {stdout}{stderr}"
    );
    assert!(
        stderr.contains("files[0].name") && stderr.contains("unreserved"),
        "{stderr}"
    );
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
