//! `pcdn add`: imports a file into a content store and prints its content id.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::store::{Store, content_id_hex};

/// Files at least this large get a progress bar (when stderr is a terminal).
const PROGRESS_FROM_BYTES: u64 = 64 << 20;

/// `pcdn add`: import FILE into the store; the content id is the last line of stdout.
#[derive(clap::Args, Debug, Clone)]
pub struct AddArgs {
    /// The file to import.
    pub file: PathBuf,
    /// Content store directory (created if missing).
    #[arg(long, value_name = "DIR")]
    pub store: PathBuf,
}

/// Runs `pcdn add`.
pub fn run_add(args: AddArgs) -> anyhow::Result<()> {
    crate::init_logging("warn");
    let store = Store::open(&args.store).with_context(|| format!("opening the store {}", args.store.display()))?;
    let length = std::fs::metadata(&args.file)
        .with_context(|| format!("{}", args.file.display()))?
        .len();
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
    let id = store.add_with_progress(&args.file, |done| bar.set_position(done))?;
    bar.finish_and_clear();
    let manifest = store.manifest(&id)?.manifest;
    println!(
        "{}: {} bytes, {} blocks of {} bytes, signed by {}",
        args.file.display(),
        manifest.length,
        manifest.block_count(),
        manifest.block_size,
        hex::encode(store.public_key())
    );
    println!("{}", content_id_hex(&id));
    Ok(())
}
