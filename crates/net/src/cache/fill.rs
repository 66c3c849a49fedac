//! The cache's fill task: downloads each assigned content the store lacks with the client
//! core of `pcdn fetch` (from the origin and the other edges the tracker lists, every block
//! verified, at most `--fill-rate`), then makes it a content of the store in one rename.
//!
//! A fill downloads into `contents/.fill-<id>/`, which the server never serves; a fill stopped
//! halfway (shutdown, crash) leaves its partial file there, and the next fill of the content
//! resumes from its verified blocks (`fetch`'s resume). One content is filled at a time, so
//! the fill rate bounds the device's fill traffic as a whole.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pcdn_core::SignedManifest;
use pcdn_core::wire::ContentId;
use tokio::sync::watch;

use super::Cache;
use crate::fetch::{FetchConfig, fetch};
use crate::store::content_id_hex;
use crate::tracker_client::TrackerClient;

/// Where fills look contents up.
#[derive(Clone, Debug)]
pub struct FillSource {
    /// Tracker base URL.
    pub tracker: String,
    /// CA file for an https tracker.
    pub tracker_ca: Option<PathBuf>,
}

/// How long a fill may take at the fill rate, times this, before it is abandoned (and retried
/// later, resuming): 4, so a fill slowed by loss or busy servers still finishes, while one
/// stuck on a dead path does not block the queue forever.
const FILL_TIMEOUT_FACTOR: u64 = 4;
/// The least timeout of a fill: a small content still gets time for lookups and handshakes.
const FILL_TIMEOUT_MIN: Duration = Duration::from_secs(60);

/// Runs until `stop`: fills the assignment, one content at a time, retrying failures after
/// `retry_after`, and writes the last-served times to the index every `index_every`.
pub async fn run(cache: Arc<Cache>, source: FillSource, mut stop: watch::Receiver<bool>) {
    let mut assignments = cache.assignment();
    let mut failed: HashMap<ContentId, Instant> = HashMap::new();
    let mut index_written = Instant::now();
    let tracker = match TrackerClient::new(&source.tracker, None).and_then(|c| match &source.tracker_ca {
        Some(ca) => c.with_tracker_ca(ca),
        None => Ok(c),
    }) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(error = %e, "the cache cannot fill: no tracker client");
            return;
        }
    };
    loop {
        if *stop.borrow() {
            return;
        }
        if index_written.elapsed() >= cache.config.index_every {
            index_written = Instant::now();
            if cache.note_served()
                && let Err(e) = cache.save()
            {
                tracing::warn!(error = %e, "cache index");
            }
        }
        let assignment = assignments.borrow_and_update().clone();
        if let Some(assigned) = assignment {
            drop_unassigned_fills(&cache, &assigned);
            failed.retain(|_, at| at.elapsed() < cache.config.retry_after);
            let wanted: HashSet<ContentId> = assigned.iter().copied().collect();
            for id in &assigned {
                if *stop.borrow() || assignments.has_changed().unwrap_or(false) {
                    break;
                }
                if cache.store.content_dir(id).is_dir() || failed.contains_key(id) {
                    continue;
                }
                let filled = tokio::select! {
                    filled = fill_one(&cache, &source, &tracker, id, &wanted) => filled,
                    _ = stop.wait_for(|s| *s) => return,
                };
                match filled {
                    Ok(length) => {
                        tracing::info!(content = %content_id_hex(id), bytes = length, "filled")
                    }
                    Err(e) => {
                        tracing::warn!(content = %content_id_hex(id), error = %e, retry_in = ?cache.config.retry_after, "fill failed");
                        failed.insert(*id, Instant::now());
                    }
                }
            }
        }
        let wait = cache.config.retry_after.min(cache.config.index_every);
        tokio::select! {
            _ = assignments.changed() => {}
            () = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Fills one content; returns its length.
async fn fill_one(
    cache: &Cache,
    source: &FillSource,
    tracker: &TrackerClient,
    id: &ContentId,
    assigned: &HashSet<ContentId>,
) -> anyhow::Result<u64> {
    let id_hex = content_id_hex(id);
    let manifest = tracker
        .get_manifest(id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("the tracker {} has no manifest for {id_hex}", tracker.url()))?;
    let length = SignedManifest::decode(&manifest)
        .map_err(|e| anyhow::anyhow!("the manifest of {id_hex}: {e}"))?
        .manifest
        .length;
    // Room for the whole content, minus what an earlier fill of it holds already.
    let used = cache.used_bytes().saturating_sub(cache.fill_bytes(id));
    let need = (used + length).saturating_sub(cache.config.cache_bytes);
    if !cache.make_room(need, assigned)? {
        anyhow::bail!(
            "{length} bytes do not fit: {used} of the cache's {} bytes are used by pinned or assigned contents",
            cache.config.cache_bytes
        );
    }
    let dir = cache.store.fill_dir(id);
    std::fs::create_dir_all(&dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    let expected = Duration::from_secs(length.saturating_mul(8) / cache.config.fill_rate_bps.max(1));
    let config = FetchConfig {
        tracker: Some(source.tracker.clone()),
        tracker_ca: source.tracker_ca.clone(),
        manifest: Some(manifest.clone()),
        rate_limit_bps: Some(cache.config.fill_rate_bps),
        timeout: Some((expected * FILL_TIMEOUT_FACTOR as u32).max(FILL_TIMEOUT_MIN)),
        ..FetchConfig::new(*id, dir.join("data"))
    };
    let report = fetch(config).await?;
    cache.store.install_fill(&dir, id, &manifest)?;
    cache.insert(*id, length)?;
    let bytes = report.paths.iter().map(|p| p.bytes).sum();
    let origin_bytes = report.paths.iter().filter(|p| p.origin).map(|p| p.bytes).sum();
    cache.count_fill(bytes, origin_bytes);
    tracing::debug!(content = %id_hex, cdn_share = report.cdn_share, resumed = report.resumed_bytes, "fill report");
    Ok(length)
}

/// Deletes the fill directories of contents no longer assigned: their bytes would hold disk
/// the assigned contents need.
fn drop_unassigned_fills(cache: &Cache, assigned: &[ContentId]) {
    for id in cache.store.fills() {
        if !assigned.contains(&id) {
            let dir = cache.store.fill_dir(&id);
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => {
                    tracing::info!(content = %content_id_hex(&id), "dropped the fill of a content no longer assigned")
                }
                Err(e) => tracing::warn!(error = %e, "removing {}", dir.display()),
            }
        }
    }
}
