//! Real video through the real stack: ffmpeg encodes H.264 test videos (two bitrates, and HLS),
//! `pcdn add --video` imports them into every store, an origin and two edges serve them behind
//! the emulator, and `pcdn play` serves them over its HTTP gateway while they download. Then
//! ffmpeg decodes every frame from the gateway, and headless Chromium plays them in the
//! gateway's player page. ffmpeg and Chromium are required (scripts/test.sh installs them).

mod common;

use std::cell::RefCell;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{Link, ONE_STACK_AT_A_TIME, Proc, http_get_bytes, pcdn};

const FPS: u32 = 24;
const SECONDS: u32 = 8;
const FRAMES: u64 = (FPS * SECONDS) as u64;

/// One lossy edge: 5% of its data is lost on the way.
const LOSSY_LINKS: [Link; 3] = [
    Link {
        name: "origin",
        origin: true,
        down: r#"{ rate = "10mbit", delay = "10ms" }"#,
    },
    Link {
        name: "edge-1",
        origin: false,
        down: r#"{ rate = "8mbit", delay = "20ms" }"#,
    },
    Link {
        name: "edge-2",
        origin: false,
        down: r#"{ rate = "8mbit", delay = "15ms", loss = 0.05 }"#,
    },
];

const HEALTHY_LINKS: [Link; 3] = [
    Link {
        name: "origin",
        origin: true,
        down: r#"{ rate = "10mbit", delay = "10ms" }"#,
    },
    Link {
        name: "edge-1",
        origin: false,
        down: r#"{ rate = "8mbit", delay = "20ms" }"#,
    },
    Link {
        name: "edge-2",
        origin: false,
        down: r#"{ rate = "8mbit", delay = "15ms" }"#,
    },
];

/// Runs a tool the test needs; its absence fails the test (scripts/test.sh installs it).
fn tool(name: &str) -> Command {
    let found = Command::new(name)
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    assert!(
        found.is_ok_and(|s| s.success()),
        "{name} is missing: scripts/test.sh installs it (apt-get install ffmpeg chromium)"
    );
    Command::new(name)
}

fn run(command: &mut Command) -> String {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The test videos: H.264 with a one-second GOP, the moov box first, at two bitrates; and the
/// higher one cut into 2-second HLS segments.
struct Videos {
    low: PathBuf,
    high: PathBuf,
    hls: PathBuf,
}

fn make_videos(dir: &Path) -> Videos {
    let encode = |name: &str, bitrate: &str| {
        let out = dir.join(name);
        run(tool("ffmpeg")
            .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
            .arg(format!("testsrc2=duration={SECONDS}:size=640x360:rate={FPS}"))
            .args(["-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p"])
            .args([
                "-g",
                &FPS.to_string(),
                "-keyint_min",
                &FPS.to_string(),
                "-sc_threshold",
                "0",
            ])
            .args(["-b:v", bitrate, "-maxrate", bitrate, "-bufsize", bitrate])
            .args(["-movflags", "+faststart"])
            .arg(&out));
        out
    };
    let low = encode("low.mp4", "500k");
    let high = encode("high.mp4", "1500k");
    let hls = dir.join("hls");
    std::fs::create_dir(&hls).unwrap();
    run(tool("ffmpeg")
        .args(["-v", "error", "-y", "-i"])
        .arg(&high)
        .args(["-c", "copy", "-f", "hls", "-hls_time", "2", "-hls_list_size", "0"])
        .args(["-hls_playlist_type", "vod", "-hls_segment_filename"])
        .arg(hls.join("seg%d.ts"))
        .arg(hls.join("index.m3u8")));
    for video in [&low, &high] {
        assert_eq!(count_frames(&video.to_string_lossy()), FRAMES, "{}", video.display());
    }
    Videos { low, high, hls }
}

/// Frames of the first video stream, every one decoded (ffprobe -count_frames).
fn count_frames(input: &str) -> u64 {
    let out = run(tool("ffprobe")
        .args(["-v", "error", "-count_frames", "-select_streams", "v:0"])
        .args(["-show_entries", "stream=nb_read_frames", "-of", "csv=p=0"])
        .arg(input));
    out.trim()
        .parse()
        .unwrap_or_else(|e| panic!("ffprobe's frame count {out:?}: {e}"))
}

/// Decodes every frame of `url` with ffmpeg; any decoding error fails. Returns the frames
/// decoded, from `-progress`.
fn decode_every_frame(url: &str) -> u64 {
    let output = tool("ffmpeg")
        .args(["-v", "error", "-nostats", "-i", url, "-map", "0:v:0", "-f", "null"])
        .args(["-progress", "pipe:1", "-"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "ffmpeg -i {url}: {stderr}");
    assert!(
        stderr.trim().is_empty(),
        "ffmpeg reported errors decoding {url}: {stderr}"
    );
    let progress = String::from_utf8_lossy(&output.stdout);
    progress
        .lines()
        .filter_map(|l| l.strip_prefix("frame="))
        .next_back()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no frame count in ffmpeg's progress: {progress}"))
}

/// The stack with the three videos in every store; `content` is the low-bitrate MP4.
struct VideoStack {
    stack: common::Stack,
    videos: Videos,
    low: String,
    high: String,
    hls: String,
}

fn start_stack(links: &[Link]) -> VideoStack {
    let dir = tempfile::tempdir().unwrap();
    let videos = make_videos(dir.path());
    let ids = RefCell::new(Vec::new());
    let stack = common::Stack::start(dir, links, |store| {
        let mut added = Vec::new();
        for input in [&videos.low, &videos.high, &videos.hls] {
            added.push(common::add(&["--video".as_ref(), input.as_os_str()], store));
        }
        let first = added[0].clone();
        ids.replace(added);
        first
    });
    let ids = ids.into_inner();
    for id in &ids[1..] {
        stack.wait_for(id);
    }
    VideoStack {
        stack,
        videos,
        low: ids[0].clone(),
        high: ids[1].clone(),
        hls: ids[2].clone(),
    }
}

/// A running `pcdn play` and the URLs it printed.
struct Play {
    proc: Proc,
    addr: SocketAddr,
    /// The path a player opens (the content, or an HLS playlist).
    media: String,
    /// The path of the player page.
    page: String,
}

impl Play {
    fn start(stack: &common::Stack, id: &str) -> Play {
        let mut child = pcdn()
            .args(["play", id, "--tracker", &stack.tracker_url(), "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let proc = Proc::adopt("pcdn play", child);
        let mut lines = BufReader::new(stdout).lines();
        let mut next = || {
            lines
                .next()
                .unwrap_or_else(|| panic!("pcdn play {id} exited before printing its URLs"))
                .unwrap()
        };
        let summary = next();
        assert!(summary.starts_with(id), "{summary}");
        let page_url = next().strip_prefix("player page: ").map(str::to_owned).unwrap();
        let media_url = next();
        let (addr, media) = split_url(&media_url);
        let (_, page) = split_url(&page_url);
        Play {
            proc,
            addr,
            media,
            page,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn status(&self) -> serde_json::Value {
        let (code, _, body) = http_get_bytes(self.addr, "/status", "");
        assert_eq!(code, 200);
        serde_json::from_slice(&body).unwrap()
    }

    /// SIGINT (Ctrl-C): the gateway must exit 0.
    fn interrupt(mut self) {
        let pid = self.proc.child.id().to_string();
        assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
        let status = self.proc.child.wait().unwrap();
        assert!(status.success(), "pcdn play exited with {status} after Ctrl-C");
    }
}

fn split_url(url: &str) -> (SocketAddr, String) {
    let rest = url
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("not a URL: {url}"));
    let (addr, path) = rest.split_once('/').unwrap();
    (addr.parse().unwrap(), format!("/{path}"))
}

#[test]
fn ffmpeg_decodes_every_frame_from_the_gateway_at_two_bitrates_and_as_hls() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stack = start_stack(&LOSSY_LINKS);
    let mut bitrates = Vec::new();
    for (id, source) in [(&stack.low, &stack.videos.low), (&stack.high, &stack.videos.high)] {
        let play = Play::start(&stack.stack, id);
        assert_eq!(play.media, format!("/content/{id}"));
        // ffmpeg starts while the download runs: the gateway blocks its reads until the bytes
        // are verified and in order.
        assert_eq!(
            decode_every_frame(&play.url(&play.media)),
            FRAMES,
            "{}",
            source.display()
        );
        let original = std::fs::read(source).unwrap();
        let (code, head, body) = http_get_bytes(play.addr, &play.media, "");
        assert_eq!(code, 200, "{head}");
        assert!(head.to_ascii_lowercase().contains("content-type: video/mp4"), "{head}");
        assert!(body == original, "the gateway's bytes differ from {}", source.display());
        let (code, head, body) = http_get_bytes(play.addr, &play.media, "Range: bytes=-1000\r\n");
        assert_eq!(code, 206, "{head}");
        assert!(body == original[original.len() - 1000..]);
        let status = play.status();
        assert_eq!(status["done"], true, "{status}");
        let video = &status["video"];
        assert_eq!(video["container"], "mp4", "{status}");
        assert_eq!(video["duration_ms"], u64::from(SECONDS) * 1000, "{status}");
        let bitrate = video["bitrate_bps"].as_u64().unwrap();
        assert_eq!(bitrate, original.len() as u64 * 8 / u64::from(SECONDS), "{status}");
        bitrates.push(bitrate);
        play.interrupt();
    }
    assert!(bitrates[1] > 2 * bitrates[0], "two bitrates: {bitrates:?}");

    let play = Play::start(&stack.stack, &stack.hls);
    assert_eq!(play.media, format!("/content/{}/index.m3u8", stack.hls));
    assert_eq!(decode_every_frame(&play.url(&play.media)), FRAMES);
    let status = play.status();
    let files = status["video"]["files"].as_array().unwrap().clone();
    assert_eq!(files[0]["name"], "index.m3u8", "{status}");
    assert_eq!(files.len(), 5, "the playlist and four 2-second segments: {status}");
    let mut whole = Vec::new();
    for file in &files {
        let name = file["name"].as_str().unwrap();
        let original = std::fs::read(stack.videos.hls.join(name)).unwrap();
        let (code, head, body) = http_get_bytes(play.addr, &format!("/content/{}/{name}", stack.hls), "");
        assert_eq!(code, 200, "{name}: {head}");
        let kind = if name.ends_with(".m3u8") {
            "application/vnd.apple.mpegurl"
        } else {
            "video/mp2t"
        };
        assert!(head.to_ascii_lowercase().contains(kind), "{name}: {head}");
        assert!(body == original, "{name} differs from the source");
        whole.extend_from_slice(&original);
    }
    let (_, _, body) = http_get_bytes(play.addr, &format!("/content/{}", stack.hls), "");
    assert!(body == whole, "the content is the files back to back");
    let mut proc = play.proc;
    proc.terminate();
}

/// Receives the player page's report: one POST, its body as JSON.
fn report_server() -> (SocketAddr, mpsc::Receiver<serde_json::Value>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            let mut line = String::new();
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let _ = stream.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
            if let Ok(report) = serde_json::from_slice(&body) {
                let _ = tx.send(report);
            }
        }
    });
    (addr, rx)
}

/// Headless Chromium in its own process group, so that its helper processes die with it.
struct Browser(Proc);

impl Browser {
    fn open(url: &str, profile: &Path) -> Browser {
        let mut command = tool("chromium");
        command
            .args([
                "--headless=new",
                "--no-sandbox",
                "--autoplay-policy=no-user-gesture-required",
            ])
            .args(["--disable-gpu", "--no-first-run", "--mute-audio"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(url)
            .process_group(0);
        Browser(Proc::spawn("chromium", &mut command))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
    }
}

/// Plays `play`'s content in the player page; returns the page's report.
fn play_in_chromium(play: &Play, profile: &Path) -> serde_json::Value {
    let (report_addr, reports) = report_server();
    let url = format!("{}?report=http://{report_addr}/report", play.url(&play.page));
    let _browser = Browser::open(&url, profile);
    reports
        .recv_timeout(Duration::from_secs(120))
        .unwrap_or_else(|_| panic!("no report from the player page {url} within 120 s"))
}

#[test]
fn chromium_plays_mp4_and_hls_to_the_end_without_a_stall() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stack = start_stack(&HEALTHY_LINKS);
    for (id, hls) in [(&stack.high, false), (&stack.hls, true)] {
        let play = Play::start(&stack.stack, id);
        let profile = stack.stack.dir.path().join(format!("chromium-{id}"));
        let report = play_in_chromium(&play, &profile);
        assert_eq!(report["ended"], true, "{report}");
        assert!(report["error"].is_null(), "{report}");
        assert!(report["first_frame_ms"].is_u64(), "{report}");
        assert_eq!(report["waiting_after_first_frame"], 0, "stalled: {report}");
        let duration = report["duration"].as_f64().unwrap();
        assert!((duration - f64::from(SECONDS)).abs() < 0.1, "{report}");
        assert!(report["current_time"].as_f64().unwrap() >= duration - 0.05, "{report}");
        assert_eq!(report["frames"], FRAMES, "{report}");
        if !hls {
            // Chromium's native HLS raises `stalled` while it idles between segment fetches
            // with the video still playing, so only the MP4 is held to it.
            assert_eq!(report["stalled_after_first_frame"], 0, "{report}");
        }
        play.interrupt();
    }
}

#[test]
fn add_video_refuses_bad_input_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let refuse = |input: &Path| {
        let output = pcdn()
            .args(["add", "--video"])
            .arg(input)
            .arg("--store")
            .arg(&store)
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        assert!(!output.status.success(), "{} was accepted", input.display());
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let text = dir.path().join("notes.mp4");
    std::fs::write(&text, "plain text, not an ISO base media file").unwrap();
    let e = refuse(&text);
    assert!(e.contains("notes.mp4: not an MP4 file"), "{e}");

    let hls = dir.path().join("hls");
    std::fs::create_dir(&hls).unwrap();
    let e = refuse(&hls);
    assert!(e.contains("no HLS playlist"), "{e}");
    std::fs::write(
        hls.join("index.m3u8"),
        "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\nseg0.ts\n#EXTINF:2.0,\nseg1.ts\n#EXT-X-ENDLIST\n",
    )
    .unwrap();
    std::fs::write(hls.join("seg0.ts"), [0x47u8; 188]).unwrap();
    let e = refuse(&hls);
    assert!(e.contains("seg1.ts: segment missing"), "{e}");
    // Nothing was imported, and nothing is left half-imported.
    let leftovers: Vec<_> = std::fs::read_dir(store.join("contents")).unwrap().collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
