//! `pcdn play`: its command line; the gateway and the download are `pcdn_net::play`'s.

use std::net::SocketAddr;

use anyhow::Context as _;
use pcdn_net::fetch::FetchConfig;

use crate::fetch::SourceArgs;

/// `pcdn play`: download a content and serve it to video players while it arrives.
#[derive(clap::Args, Debug, Clone)]
pub struct PlayArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Address of the HTTP gateway (port 0: any free port; the URL is printed).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
}

impl PlayArgs {
    /// The download these arguments describe (reads the manifest file).
    pub fn config(&self) -> anyhow::Result<FetchConfig> {
        Ok(FetchConfig {
            play_video: true,
            ..self.source.config("(gateway)")?
        })
    }
}

/// Runs `pcdn play`: looks the content up, starts the gateway and prints its URLs, downloads,
/// and serves until SIGINT or SIGTERM.
pub fn run_play(args: PlayArgs) -> anyhow::Result<()> {
    pcdn_net::init_logging("warn");
    let config = args.config()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let result = runtime.block_on(async {
        tokio::select! {
            result = pcdn_net::play::play(config, args.listen) => result,
            signal = pcdn_net::serve::shutdown_signal() => signal,
        }
    });
    // Open responses are waiting for bytes or a slow reader: do not wait for them.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    result
}
