//! `pcdn operator`: the operator's key and the devices it enrolls and revokes
//! (docs/tracker.md, "Authentication").

use anyhow::Context;
use pcdn_identity::{Role, files, format_unix_secs, parse_duration, unix_millis};
use pcdn_net::tracker_client::TrackerClient;
use std::path::PathBuf;

/// Arguments of `pcdn operator`.
#[derive(clap::Args, Debug)]
pub struct OperatorArgs {
    #[command(subcommand)]
    command: OperatorCommand,
}

#[derive(clap::Subcommand, Debug)]
enum OperatorCommand {
    /// Create the operator key pair in DIR: operator.key (secret, mode 0600) and operator.pub
    /// (give it to `pcdn tracker --operator-key`). Refuses to overwrite.
    Init {
        /// The operator directory (created if missing).
        dir: PathBuf,
    },
    /// Enroll a device: write a credential file (its own new key, the id, the role and an
    /// expiry, signed by the operator key in DIR) for `pcdn serve --credential`.
    Enroll {
        /// The operator directory (from `pcdn operator init`).
        dir: PathBuf,
        /// The device id (1..=64 of A-Z a-z 0-9 . _ -).
        #[arg(long)]
        id: String,
        /// What the device may do: edge (serve) or origin (serve and publish manifests).
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// How long the credential is valid: e.g. 365d, 12h, 30m.
        #[arg(long, value_name = "DURATION", default_value = "365d", value_parser = parse_duration)]
        expires: u64,
        /// The credential file to write (mode 0600; refuses to overwrite).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
    },
    /// Revoke a device at the tracker: its credentials issued until now are refused from its
    /// next request, and it leaves lookups at once. Enroll it again to readmit it.
    Revoke {
        /// The operator directory (from `pcdn operator init`).
        dir: PathBuf,
        /// The device id to revoke.
        #[arg(long)]
        id: String,
        /// The tracker's base URL, e.g. http://127.0.0.1:7800.
        #[arg(long, value_name = "URL")]
        tracker: String,
    },
    /// End a device's quarantine at the tracker: forget every corrupt-data report of it, so
    /// that it is listed in lookups again.
    Clear {
        /// The operator directory (from `pcdn operator init`).
        dir: PathBuf,
        /// The quarantined device id.
        #[arg(long)]
        id: String,
        /// The tracker's base URL, e.g. http://127.0.0.1:7800.
        #[arg(long, value_name = "URL")]
        tracker: String,
    },
}

fn parse_role(text: &str) -> Result<Role, String> {
    text.parse()
}

/// Runs `pcdn operator`.
pub fn run(args: OperatorArgs) -> anyhow::Result<()> {
    match args.command {
        OperatorCommand::Init { dir } => {
            let key = files::init_operator(&dir)?;
            println!(
                "operator key {} in {}: keep {} private; start the tracker with --operator-key {}",
                hex::encode(key.public().as_bytes()),
                dir.display(),
                dir.join(files::OPERATOR_KEY_FILE).display(),
                dir.join(files::OPERATOR_PUB_FILE).display()
            );
            Ok(())
        }
        OperatorCommand::Enroll {
            dir,
            id,
            role,
            expires,
            output,
        } => {
            let operator = files::read_operator_key(&dir)?;
            let now_ms = unix_millis();
            let not_after = (now_ms / 1000).saturating_add(expires);
            let identity = operator
                .enroll(&id, role, now_ms, not_after)
                .map_err(anyhow::Error::msg)
                .context("--id")?;
            files::write_credential(&output, &identity)?;
            println!(
                "enrolled {id} as {role} until {} in {}",
                format_unix_secs(not_after),
                output.display()
            );
            Ok(())
        }
        OperatorCommand::Clear { dir, id, tracker } => {
            let (operator, client, runtime) = operator_request(&dir, &id, &tracker)?;
            let cleared = runtime.block_on(client.clear_quarantine(&operator, &id))?;
            if cleared {
                println!("cleared {id} at {tracker}: its reports are forgotten and it is listed again");
            } else {
                println!("{id} had no reports at {tracker}: nothing to clear");
            }
            Ok(())
        }
        OperatorCommand::Revoke { dir, id, tracker } => {
            let (operator, client, runtime) = operator_request(&dir, &id, &tracker)?;
            let revoked = runtime.block_on(client.revoke(&operator, &id))?;
            println!(
                "revoked {} at {}: its credentials issued before {} are refused{}",
                revoked.id,
                tracker,
                format_unix_secs(revoked.revoked_before_ms / 1000),
                if revoked.removed {
                    "; its registration was removed"
                } else {
                    ""
                }
            );
            Ok(())
        }
    }
}

/// What an operator's signed request to the tracker needs: the checked `--id`, the operator
/// key of `dir`, a client of `tracker` and a runtime to wait on it.
fn operator_request(
    dir: &std::path::Path,
    id: &str,
    tracker: &str,
) -> anyhow::Result<(pcdn_identity::OperatorKey, TrackerClient, tokio::runtime::Runtime)> {
    pcdn_identity::check_device_id(id)
        .map_err(anyhow::Error::msg)
        .context("--id")?;
    let operator = files::read_operator_key(dir)?;
    let client = TrackerClient::new(tracker, None)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    Ok((operator, client, runtime))
}
