//! `pcdn bench video`: which frames of a real video each scheduler makes playable on time, and
//! the PSNR the viewer sees, a late frame showing as the last good frame repeated (MPRD,
//! Srinivasan and Aryafar, ICDCS 2025, §V, Fig. 8(b)).
//!
//! The video is a real H.264 MP4 (made with ffmpeg's lavfi test source unless one is given).
//! ffprobe gives each frame's byte range and presentation time; the simulator delivers the file's
//! bytes over the scenario's paths and records when each byte count arrived in order. Playback
//! starts once the first `--startup` seconds of frames are in, then runs on the wall clock of the
//! video without stalling: a frame whose bytes are not all in order by its presentation time is
//! not shown. ffmpeg decodes the original, the frames that missed their deadline are replaced by
//! the last frame that made it, and ffmpeg's `psnr` filter compares that stream to the original.

use anyhow::{Context, bail, ensure};
use clap::Args;
use pcdn_core::time::{Duration, Instant};
use pcdn_sim::scenario::Scenario;
use pcdn_sim::world::World;
use serde::Deserialize;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The world of MPRD's Fig. 8: a 10 Mbit/s CDN origin and a 4 Mbit/s edge at 10% loss (the
/// one-way delays are our choice; the paper does not give them).
const FIG8_WORLD: &str = r#"
name = "MPRD Fig. 8: CDN 10 Mbit/s + edge 4 Mbit/s at 10% loss"
seed = 1
duration = "600s"

[content]
size = "1MB"
packet_size = 1400

[client]
schedulers = ["default", "mprd", "pscheduler", "minrtt"]
cc = ["cubic"]
reorder_buffer = "4MB"

[[server]]
name = "cdn"
origin = true
link = { rate = "10mbit", delay = "10ms" }

[[server]]
name = "edge"
link = { rate = "4mbit", delay = "20ms", loss = 0.10 }
"#;

#[derive(Args, Debug)]
pub struct VideoArgs {
    /// An MP4 (H.264) to deliver. Without it, a test video is made with ffmpeg for each
    /// `--bitrates` value (lavfi testsrc2 with noise, 640x360, `--fps`, one-second GOPs).
    #[arg(long, value_name = "FILE")]
    video: Option<PathBuf>,
    /// Encoding rates of the generated videos, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1mbit,2mbit,4mbit,8mbit", value_parser = pcdn_sim::parse_rate)]
    bitrates: Vec<u64>,
    /// Length of the generated videos.
    #[arg(long, default_value = "20s", value_parser = pcdn_sim::parse_duration)]
    length: Duration,
    /// Frame rate of the generated videos (MPRD's are 60 fps with one keyframe per second).
    #[arg(long, default_value_t = 60)]
    fps: u32,
    /// A scenario file whose world (its first sweep point) delivers the video; its content size
    /// is replaced by the video's. Default: MPRD Fig. 8's CDN + lossy edge.
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Schedulers to compare, comma-separated (default: the scenario's).
    #[arg(long, value_delimiter = ',')]
    schedulers: Option<Vec<String>>,
    /// Congestion control (default: the scenario's first).
    #[arg(long)]
    cc: Option<String>,
    /// Simulation seed (default: the scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// Video that must be in order before the first frame is shown.
    #[arg(long, default_value = "1s", value_parser = pcdn_sim::parse_duration)]
    startup: Duration,
    /// Write one CSV line per frame and run (bitrate, scheduler, frame, pts, deadline, arrival,
    /// on_time) to this file.
    #[arg(long, value_name = "FILE")]
    frames_out: Option<PathBuf>,
    /// Keep the generated videos in this folder (default: a temporary folder, removed after).
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Print one JSON object per run instead of a table.
    #[arg(long)]
    json: bool,
}

/// One frame of the video, as ffprobe reports its packet.
#[derive(Clone, Copy, Debug)]
struct Frame {
    /// Presentation time from the first frame.
    pts: Duration,
    /// End (exclusive) of the frame's bytes in the file.
    end: u64,
}

/// What the bench needs to know of a video file.
#[derive(Debug)]
struct Video {
    path: PathBuf,
    length: u64,
    width: u32,
    height: u32,
    /// Frames in presentation order.
    frames: Vec<Frame>,
    /// Presentation time of the last frame plus one frame interval.
    duration: Duration,
}

/// The result of one scheduler on one video.
#[derive(Debug, serde::Serialize)]
struct Row {
    video: String,
    bitrate_bps: u64,
    scheduler: String,
    cc: String,
    seed: u64,
    completed: bool,
    download_s: Option<f64>,
    first_frame_s: Option<f64>,
    frames: usize,
    frames_late: usize,
    late_percentage: f64,
    /// Mean PSNR (dB) of the frames shown against the original; `None` when they are identical.
    psnr_db: Option<f64>,
}

pub fn run(args: VideoArgs) -> anyhow::Result<()> {
    for tool in ["ffmpeg", "ffprobe"] {
        let found = Command::new(tool)
            .arg("-version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        ensure!(
            found.is_ok_and(|s| s.success()),
            "`pcdn bench video` needs {tool} on the PATH (Debian: apt-get install ffmpeg)"
        );
    }
    let mut scenario = match &args.scenario {
        Some(path) => Scenario::load(path)?,
        None => Scenario::parse(FIG8_WORLD, "built-in MPRD Fig. 8 world", Path::new("."))?,
    };
    if let Some(seed) = args.seed {
        scenario.set_seed(seed);
    }
    let point = scenario.points.first().context("the scenario has no sweep point")?;
    let schedulers = args.schedulers.clone().unwrap_or_else(|| point.schedulers.clone());
    let cc = args.cc.clone().unwrap_or_else(|| point.ccs[0].clone());
    ensure!(!schedulers.is_empty(), "--schedulers: name at least one scheduler");

    let temp = tempfile::tempdir()?;
    let folder = match &args.keep {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("--keep {}: cannot create it", dir.display()))?;
            dir.clone()
        }
        None => temp.path().to_owned(),
    };
    let videos: Vec<PathBuf> = match &args.video {
        Some(path) => vec![path.clone()],
        None => args
            .bitrates
            .iter()
            .map(|&rate| make_test_video(&folder, rate, args.length, args.fps))
            .collect::<anyhow::Result<_>>()?,
    };

    let mut frames_out = match &args.frames_out {
        Some(path) => {
            let mut f = std::io::BufWriter::new(
                std::fs::File::create(path).with_context(|| format!("--frames-out {}", path.display()))?,
            );
            writeln!(f, "bitrate_bps,scheduler,frame,pts_s,deadline_s,arrival_s,on_time")?;
            Some(f)
        }
        None => None,
    };
    let bar = crate::progress::Progress::new(
        "bench video",
        (videos.len() * schedulers.len()) as u64,
        "deliveries",
        false,
    );
    let mut rows = Vec::new();
    for path in &videos {
        let video = probe(path)?;
        let bitrate_bps = (video.length as f64 * 8.0 / video.duration.as_secs_f64()).round() as u64;
        for scheduler in &schedulers {
            bar.set_message(format!("{} Mbit/s, {scheduler}", bitrate_bps as f64 / 1e6));
            let mut world = point.world.clone();
            world.content_length = video.length;
            let mut timeline: Vec<(Instant, u64)> = Vec::new();
            let outcome = World::new(&world, scheduler, &cc, point.seed)?
                .run_observing(|now, bytes| timeline.push((now, bytes)))?;
            let playback = Playback::replay(&video, &timeline, args.startup);
            if let Some(f) = frames_out.as_mut() {
                for (i, frame) in video.frames.iter().enumerate() {
                    let secs =
                        |t: Option<Instant>| t.map_or(String::new(), |t| format!("{:.6}", t.as_nanos() as f64 / 1e9));
                    writeln!(
                        f,
                        "{bitrate_bps},{scheduler},{i},{:.6},{},{},{}",
                        frame.pts.as_secs_f64(),
                        secs(playback.start.map(|s| s + frame.pts)),
                        secs(playback.arrival[i]),
                        playback.on_time[i]
                    )?;
                }
            }
            let late = playback.on_time.iter().filter(|&&ok| !ok).count();
            let psnr_db = psnr_as_shown(&video, &playback.on_time)?;
            let row = Row {
                video: path.display().to_string(),
                bitrate_bps,
                scheduler: scheduler.clone(),
                cc: cc.clone(),
                seed: point.seed,
                completed: outcome.completed,
                download_s: outcome.stats.finished.map(|t| t.as_nanos() as f64 / 1e9),
                first_frame_s: playback.start.map(|t| t.as_nanos() as f64 / 1e9),
                frames: video.frames.len(),
                frames_late: late,
                late_percentage: 100.0 * late as f64 / video.frames.len() as f64,
                psnr_db,
            };
            if args.json {
                println!("{}", serde_json::to_string(&row)?);
            }
            rows.push(row);
            bar.inc();
        }
    }
    bar.finish();
    if let Some(mut f) = frames_out {
        f.flush()?;
    }
    if !args.json {
        print_table(&scenario.name, &cc, &rows);
    }
    Ok(())
}

/// Encodes a test video at `rate_bps`: moving test pattern plus temporal noise (so the encoder
/// cannot reach its rate with near-empty frames), one keyframe per second, no B-frames.
fn make_test_video(folder: &Path, rate_bps: u64, length: Duration, fps: u32) -> anyhow::Result<PathBuf> {
    ensure!(fps > 0, "--fps must be at least 1");
    let out = folder.join(format!("testsrc-{}kbit-{fps}fps.mp4", rate_bps / 1000));
    let source = format!(
        "testsrc2=size=640x360:rate={fps}:duration={},noise=alls=20:allf=t+u",
        length.as_secs_f64()
    );
    let rate = rate_bps.to_string();
    let buffer = (rate_bps * 2).to_string();
    let gop = fps.to_string();
    let status = Command::new("ffmpeg")
        .args(["-v", "error", "-nostdin", "-y", "-f", "lavfi", "-i", &source])
        .args(["-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p"])
        .args(["-b:v", &rate, "-maxrate", &rate, "-bufsize", &buffer])
        .args(["-g", &gop, "-keyint_min", &gop, "-sc_threshold", "0", "-bf", "0"])
        .args(["-movflags", "+faststart"])
        .arg(&out)
        .status()
        .context("running ffmpeg")?;
    ensure!(
        status.success(),
        "ffmpeg could not make the test video {}",
        out.display()
    );
    Ok(out)
}

#[derive(Deserialize)]
struct ProbeOutput {
    #[serde(default)]
    streams: Vec<ProbeStream>,
    #[serde(default)]
    packets: Vec<ProbePacket>,
}

#[derive(Deserialize)]
struct ProbeStream {
    width: u32,
    height: u32,
}

#[derive(Deserialize)]
struct ProbePacket {
    pts_time: Option<String>,
    pos: Option<String>,
    size: Option<String>,
}

/// Reads the frame table of the first video stream with ffprobe.
fn probe(path: &Path) -> anyhow::Result<Video> {
    let output = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries"])
        .args(["stream=width,height:packet=pts_time,pos,size", "-of", "json"])
        .arg(path)
        .output()
        .context("running ffprobe")?;
    ensure!(
        output.status.success(),
        "{}: ffprobe cannot read it: {}",
        path.display(),
        String::from_utf8_lossy(&output.stderr).trim()
    );
    let parsed: ProbeOutput =
        serde_json::from_slice(&output.stdout).with_context(|| format!("{}: ffprobe's answer", path.display()))?;
    let stream = parsed
        .streams
        .first()
        .with_context(|| format!("{}: no video stream", path.display()))?;
    let field = |value: &Option<String>, what: &str, i: usize| -> anyhow::Result<f64> {
        value
            .as_deref()
            .and_then(|v| v.parse::<f64>().ok())
            .with_context(|| format!("{}: video packet {i} has no {what}", path.display()))
    };
    let mut frames = Vec::with_capacity(parsed.packets.len());
    for (i, p) in parsed.packets.iter().enumerate() {
        let pts = field(&p.pts_time, "presentation time", i)?;
        let end = field(&p.pos, "file position", i)? + field(&p.size, "size", i)?;
        frames.push((pts, end as u64));
    }
    if frames.is_empty() {
        bail!("{}: the video stream has no frames", path.display());
    }
    frames.sort_by(|a, b| a.0.total_cmp(&b.0));
    let first = frames[0].0;
    let interval = if frames.len() > 1 {
        (frames[frames.len() - 1].0 - first) / (frames.len() - 1) as f64
    } else {
        1.0 / 30.0
    };
    let length = std::fs::metadata(path)?.len();
    let to_duration = |secs: f64| Duration::from_nanos((secs.max(0.0) * 1e9).round() as u64);
    Ok(Video {
        path: path.to_owned(),
        length,
        width: stream.width,
        height: stream.height,
        duration: to_duration(frames[frames.len() - 1].0 - first + interval),
        frames: frames
            .into_iter()
            .map(|(pts, end)| Frame {
                pts: to_duration(pts - first),
                end,
            })
            .collect(),
    })
}

/// Which frames were in order by their presentation time.
struct Playback {
    /// When the first frame was shown (virtual time).
    start: Option<Instant>,
    /// When each frame's bytes were all in order.
    arrival: Vec<Option<Instant>>,
    on_time: Vec<bool>,
}

impl Playback {
    /// `timeline` holds (time, bytes in order) with both increasing.
    fn replay(video: &Video, timeline: &[(Instant, u64)], startup: Duration) -> Playback {
        let arrived_by = |end: u64| {
            let i = timeline.partition_point(|&(_, bytes)| bytes < end);
            timeline.get(i).map(|&(t, _)| t)
        };
        let needed = video
            .frames
            .iter()
            .filter(|f| f.pts < startup)
            .map(|f| f.end)
            .max()
            .unwrap_or(video.frames[0].end);
        let start = arrived_by(needed);
        let arrival: Vec<Option<Instant>> = video.frames.iter().map(|f| arrived_by(f.end)).collect();
        let on_time = video
            .frames
            .iter()
            .zip(&arrival)
            .map(|(f, a)| matches!((start, a), (Some(s), Some(a)) if *a <= s + f.pts))
            .collect();
        Playback {
            start,
            arrival,
            on_time,
        }
    }
}

/// Decodes the original, repeats the last on-time frame in place of each late one, and returns
/// ffmpeg's mean PSNR of that stream against the original (`None` if they are identical).
fn psnr_as_shown(video: &Video, on_time: &[bool]) -> anyhow::Result<Option<f64>> {
    let frame_bytes = video.width as usize * video.height as usize * 3 / 2;
    let size = format!("{}x{}", video.width, video.height);
    let mut decoder = Command::new("ffmpeg")
        .args(["-v", "error", "-nostdin", "-i"])
        .arg(&video.path)
        .args([
            "-map",
            "0:v:0",
            "-fps_mode",
            "passthrough",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "yuv420p",
            "-",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .context("running ffmpeg to decode")?;
    let mut compare = Command::new("ffmpeg")
        .args([
            "-hide_banner",
            "-nostats",
            "-nostdin",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "yuv420p",
        ])
        // Frames are paired by index (setpts=N on one time base), so the raw stream's rate is moot.
        .args(["-s", &size, "-r", "30", "-i", "-", "-i"])
        .arg(&video.path)
        .args([
            "-lavfi",
            "[0:v]settb=1/30,setpts=N[shown];[1:v]settb=1/30,setpts=N[original];[shown][original]psnr",
        ])
        .args(["-f", "null", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running ffmpeg's psnr filter")?;
    let mut report = String::new();
    let mut stderr = compare.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let _ = stderr.read_to_string(&mut report);
        report
    });
    let mut decoded = decoder.stdout.take().expect("piped");
    let mut shown = compare.stdin.take().expect("piped");
    let mut frame = vec![0u8; frame_bytes];
    let mut last_good: Vec<u8> = Vec::with_capacity(frame_bytes);
    let mut count = 0;
    while count < on_time.len() {
        match decoded.read_exact(&mut frame) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e).context("reading decoded frames"),
        }
        // Nothing has been shown before the first frame, so the first frame is always shown.
        if on_time[count] || last_good.is_empty() {
            last_good.clear();
            last_good.extend_from_slice(&frame);
        }
        shown.write_all(&last_good).context("feeding ffmpeg's psnr filter")?;
        count += 1;
    }
    drop(shown);
    drop(decoded);
    let _ = decoder.wait();
    let status = compare.wait()?;
    let report = reader.join().expect("stderr reader");
    ensure!(status.success(), "ffmpeg's psnr filter failed: {}", report.trim());
    ensure!(
        count == on_time.len(),
        "{}: ffmpeg decoded {count} frames, ffprobe listed {}",
        video.path.display(),
        on_time.len()
    );
    parse_psnr_average(&report).with_context(|| format!("no PSNR in ffmpeg's report: {}", report.trim()))
}

/// The `average:` value of the psnr filter's summary line; `Some(None)` for "inf".
fn parse_psnr_average(report: &str) -> Option<Option<f64>> {
    let line = report
        .lines()
        .rev()
        .find(|l| l.contains("PSNR ") && l.contains("average:"))?;
    let value = line.split("average:").nth(1)?.split_whitespace().next()?;
    if value == "inf" {
        Some(None)
    } else {
        value.parse().ok().map(Some)
    }
}

fn print_table(name: &str, cc: &str, rows: &[Row]) {
    println!("{name} (cc {cc})");
    println!(
        "{:>9}  {:<12} {:>10} {:>12} {:>12} {:>8}",
        "Mbit/s", "scheduler", "download s", "first frame", "late frames", "PSNR dB"
    );
    for r in rows {
        let secs = |v: Option<f64>| v.map_or("-".to_owned(), |s| format!("{s:.2}"));
        println!(
            "{:>9.2}  {:<12} {:>10} {:>12} {:>6} {:>4.1}% {:>8}",
            r.bitrate_bps as f64 / 1e6,
            r.scheduler,
            secs(r.download_s),
            secs(r.first_frame_s),
            r.frames_late,
            r.late_percentage,
            r.psnr_db.map_or("inf".to_owned(), |p| format!("{p:.2}"))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn video(ends: &[u64]) -> Video {
        Video {
            path: PathBuf::from("v.mp4"),
            length: *ends.last().unwrap(),
            width: 2,
            height: 2,
            frames: ends
                .iter()
                .enumerate()
                .map(|(i, &end)| Frame {
                    pts: Duration::from_millis(100 * i as u64),
                    end,
                })
                .collect(),
            duration: Duration::from_millis(100 * ends.len() as u64),
        }
    }

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn a_frame_is_late_when_its_bytes_come_after_its_presentation_time() {
        let v = video(&[10, 20, 30, 40]);
        // Startup needs the frames before 150 ms: bytes 0..20, in at 50 ms.
        let timeline = [(at(10), 10), (at(50), 20), (at(200), 30), (at(400), 40)];
        let p = Playback::replay(&v, &timeline, Duration::from_millis(150));
        assert_eq!(p.start, Some(at(50)));
        // Deadlines 50, 150, 250, 350 ms; arrivals 10, 50, 200, 400 ms.
        assert_eq!(p.on_time, [true, true, true, false]);
    }

    #[test]
    fn frames_never_delivered_are_late_and_playback_may_never_start() {
        let v = video(&[10, 20, 30]);
        let p = Playback::replay(&v, &[(at(5), 15)], Duration::from_millis(50));
        assert_eq!(p.start, Some(at(5)));
        assert_eq!(p.on_time, [true, false, false]);
        let none = Playback::replay(&v, &[], Duration::from_millis(50));
        assert_eq!(none.start, None);
        assert!(none.on_time.iter().all(|&ok| !ok));
    }

    #[test]
    fn the_psnr_summary_line_is_read() {
        let report = "[Parsed_psnr_2 @ 0x1] PSNR y:31.20 u:40.00 v:41.00 average:33.47 min:20.1 max:inf\n";
        assert_eq!(parse_psnr_average(report), Some(Some(33.47)));
        let same = "[Parsed_psnr_2 @ 0x1] PSNR y:inf u:inf v:inf average:inf min:inf max:inf\n";
        assert_eq!(parse_psnr_average(same), Some(None));
        assert_eq!(parse_psnr_average("nothing here"), None);
    }
}
