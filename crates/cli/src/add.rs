//! `pcdn add`: imports a file (or, with `--video`, an MP4 or an HLS folder with its video
//! metadata) into a content store and prints its content id.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use pcdn_net::store::{Store, content_id_hex};

/// Files at least this large get a progress bar (when stderr is a terminal).
const PROGRESS_FROM_BYTES: u64 = 64 << 20;

/// `pcdn add`: import FILE into the store; the content id is the last line of stdout.
#[derive(clap::Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["file", "video"])))]
pub struct AddArgs {
    /// The file to import.
    pub file: Option<PathBuf>,
    /// Import a video with its bitrate and duration in the manifest (players and schedulers
    /// get its deadlines): an MP4 file, or an HLS folder (one .m3u8 playlist and its segments,
    /// stored as one content).
    #[arg(long, value_name = "FILE|DIR", conflicts_with = "file")]
    pub video: Option<PathBuf>,
    /// Content store directory (created if missing).
    #[arg(long, value_name = "DIR")]
    pub store: PathBuf,
}

/// Runs `pcdn add`.
pub fn run_add(args: AddArgs) -> anyhow::Result<()> {
    pcdn_net::init_logging("warn");
    let store = Store::open(&args.store).with_context(|| format!("opening the store {}", args.store.display()))?;
    let (input, import) = match (&args.file, &args.video) {
        (Some(file), None) => (file, None),
        (None, Some(video)) => (video, Some(pcdn_net::video::probe(video)?)),
        _ => anyhow::bail!("give either FILE or --video FILE|DIR"),
    };
    let (files, video) = match import {
        Some(import) => (import.files, Some(import.info)),
        None => (vec![input.clone()], None),
    };
    let mut length = 0u64;
    for file in &files {
        length += std::fs::metadata(file)
            .with_context(|| format!("{}", file.display()))?
            .len();
    }
    let bar = if length >= PROGRESS_FROM_BYTES && std::io::stderr().is_terminal() {
        let bar = ProgressBar::with_draw_target(Some(length), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("importing [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} (eta {eta})")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let files: Vec<&std::path::Path> = files.iter().map(PathBuf::as_path).collect();
    let id = store.add_files(&files, video, |done| bar.set_position(done))?;
    bar.finish_and_clear();
    let manifest = store.manifest(&id)?.manifest;
    println!(
        "{}: {} bytes, {} blocks of {} bytes, signed by {}",
        input.display(),
        manifest.length,
        manifest.block_count(),
        manifest.block_size,
        hex::encode(store.public_key())
    );
    if let Some(video) = &manifest.video {
        println!(
            "video: {}, {:.3} s, {} kbit/s{}",
            video.container.name(),
            video.duration_ms as f64 / 1000.0,
            pcdn_net::video::kbit_per_s(video.bitrate_bps),
            if video.files.is_empty() {
                String::new()
            } else {
                format!(", {} files", video.files.len())
            }
        );
    }
    println!("{}", content_id_hex(&id));
    Ok(())
}
