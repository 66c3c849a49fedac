//! The manifest's checks (content id, signature, signer) and, when no live server can serve a
//! content, the error that says why and what to do.

use pcdn_core::wire::ContentId;
use pcdn_core::{Manifest, SignedManifest};

use super::{FetchError, setup};
use crate::store::content_id_hex;
use crate::tracker_client::Lookup;

/// Where the fetch's servers and trust come from, for the errors' hints.
pub(super) struct Sources<'a> {
    pub lookup: Option<&'a Lookup>,
    pub tracker_url: Option<&'a str>,
    /// Servers given on the command line (`--server`, `--origin-server`).
    pub given_servers: bool,
}

impl Sources<'_> {
    /// No live edge announced the content and no server was given: only an origin could serve.
    fn no_edge(&self) -> bool {
        !self.given_servers && self.lookup.is_none_or(|l| l.servers.is_empty())
    }

    /// "; live origins: a (key …), b (key …); left out as unreachable: c (why)": what the
    /// tracker listed, so a reader sees which servers are up and which are down.
    fn listed(&self) -> String {
        let Some(l) = self.lookup else {
            return String::new();
        };
        let mut out = String::new();
        if !l.origins.is_empty() {
            let origins: Vec<String> = l
                .origins
                .iter()
                .map(|o| match &o.public_key {
                    Some(k) => format!("{} (key {})", o.id, short_key(k)),
                    None => o.id.clone(),
                })
                .collect();
            out.push_str(&format!("; live origins: {}", origins.join(", ")));
        }
        if !l.unreachable.is_empty() {
            let down: Vec<String> = l
                .unreachable
                .iter()
                .map(|d| format!("{} ({})", d.id, d.reason))
                .collect();
            out.push_str(&format!("; left out as unreachable: {}", down.join(", ")));
        }
        out
    }

    fn tracker(&self) -> &str {
        self.tracker_url.unwrap_or("URL")
    }
}

/// The first 8 hex digits of a key: enough to tell keys apart in a message.
fn short_key(hex: &str) -> String {
    let head: String = hex.chars().take(8).collect();
    format!("{head}…")
}

/// What to do when no live server holds a content.
fn start_a_holder(tracker: &str) -> String {
    format!(
        "To serve it, start the origin whose store holds it (`pcdn serve --store DIR --tracker {tracker} \
         --credential ORIGIN.cred`) or an edge that holds it, then fetch again; check the content id too \
         (the last line `pcdn add` printed)"
    )
}

/// The tracker has no manifest for `id`: either edges hold it and no origin published it, or
/// nobody holds it.
pub(super) fn no_manifest(id: &ContentId, sources: &Sources) -> FetchError {
    let id_hex = content_id_hex(id);
    let tracker = sources.tracker();
    let holders: Vec<&str> = sources
        .lookup
        .map(|l| l.servers.iter().map(|d| d.id.as_str()).collect())
        .unwrap_or_default();
    if holders.is_empty() {
        return setup(format!(
            "no live server holds {id_hex}, and the tracker {tracker} has no manifest for it: no live edge \
             announced it and no origin published it{}.\n{}",
            sources.listed(),
            start_a_holder(tracker)
        ));
    }
    setup(format!(
        "the tracker {tracker} has no manifest for {id_hex}: {} {} it, but only an origin publishes \
         manifests and none has published this one{}.\nImport the file into the origin's store \
         (`pcdn add FILE --store ORIGIN_DIR`): its running `pcdn serve` (with an origin credential) \
         publishes the manifest within seconds; then fetch again",
        holders.join(", "),
        if holders.len() == 1 { "holds" } else { "hold" },
        sources.listed()
    ))
}

/// Decodes the signed manifest and checks it: its content id is the one asked for, its
/// signature holds, and its signer is `origin_key` or one of the tracker's origins.
pub(super) fn check_manifest(
    id: &ContentId,
    bytes: &[u8],
    origin_key: Option<[u8; 32]>,
    sources: &Sources,
) -> Result<Manifest, FetchError> {
    let id_hex = content_id_hex(id);
    let signed = SignedManifest::decode(bytes).map_err(|e| setup(format!("the manifest of {id_hex}: {e}")))?;
    if signed.content_id() != *id {
        return Err(setup(format!(
            "the manifest given for {id_hex} describes another content ({})",
            content_id_hex(&signed.content_id())
        )));
    }
    signed
        .verify()
        .map_err(|e| setup(format!("the manifest of {id_hex}: {e}")))?;
    let signer = hex::encode(signed.signer);
    let trusted: Vec<[u8; 32]> = match (origin_key, sources.lookup) {
        (Some(key), _) => vec![key],
        (None, Some(l)) => l
            .origins
            .iter()
            .filter_map(|o| o.public_key.as_deref())
            .filter_map(|k| parse_key(k).ok())
            .collect(),
        // The id is the hash of the manifest's body, so the bytes are the ones asked for;
        // who signed them cannot be checked without a key.
        (None, None) => {
            tracing::info!(%signer, "manifest signer not checked: no --origin-key");
            return Ok(signed.manifest);
        }
    };
    if trusted.contains(&signed.signer) {
        return Ok(signed.manifest);
    }
    if origin_key.is_some() {
        return Err(setup(format!(
            "the manifest of {id_hex} is signed by {signer}, not by the --origin-key given ({})",
            hex::encode(trusted[0])
        )));
    }
    // The signer is the key of the origin that published the manifest: that origin is not
    // live. Without a live edge either, nobody can serve the content, and that is the news.
    if sources.no_edge() {
        return Err(setup(format!(
            "no live server holds {id_hex}: no live edge announced it, and the origin that published it \
             (key {}) is not live{}.\n{}",
            short_key(&signer),
            sources.listed(),
            start_a_holder(sources.tracker())
        )));
    }
    Err(setup(format!(
        "the manifest of {id_hex} is signed by {signer}, and no live origin has that key{}: the origin \
         that published it is gone, so the edges' copies cannot be vouched for.\nStart that origin, or \
         pass --origin-key {signer} if you trust that key",
        sources.listed()
    )))
}

/// An Ed25519 public key from 64 hex characters.
pub fn parse_key(text: &str) -> Result<[u8; 32], String> {
    let mut key = [0u8; 32];
    hex::decode_to_slice(text.trim(), &mut key)
        .map_err(|e| format!("expected an Ed25519 public key of 64 hex characters, got \"{text}\": {e}"))?;
    Ok(key)
}

/// The tracker lists no server at all for a content whose manifest was given.
pub(super) fn no_server(id: &ContentId, sources: &Sources) -> FetchError {
    setup(format!(
        "no live server holds {}: the tracker lists no edge that announced it and no live origin{}.\n{}",
        content_id_hex(id),
        sources.listed(),
        start_a_holder(sources.tracker())
    ))
}
