//! `pcdn play`: downloads a content as `pcdn fetch` does and serves it, while it arrives, over a
//! local HTTP gateway that video players read with range requests (docs/play.md).
//!
//! The download hands its verified in-order bytes to a [`ContentBuffer`] (an anonymous
//! temporary file and a watch channel of how many bytes are in it). Every response streams from
//! the file and waits, chunk by chunk, until the download has delivered the bytes it needs, so
//! a player only ever receives bytes whose block passed its BLAKE3 check.
//!
//! Routes: `GET|HEAD /content/{id}` (the whole content, RFC 9110 §14 range requests),
//! `GET|HEAD /content/{id}/{file}` (a file of an HLS content's table), `GET /player/{id}` (an
//! HTML page with a `<video>`), `GET /status` (download progress as JSON).

use std::io::Write as _;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use pcdn_core::manifest::{Container, VideoInfo};
use pcdn_core::wire::ContentId;
use serde::Serialize;
use tokio::sync::watch;

use crate::fetch::{FetchConfig, FetchError};
use crate::store::content_id_hex;

/// Most bytes one body chunk carries.
const BODY_CHUNK: u64 = 256 << 10;

/// How far the download is, as the gateway's readers see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Progress {
    /// Verified in-order bytes in the buffer.
    delivered: u64,
    /// Why the download stopped short; readers waiting for more bytes get an error.
    failed: Option<String>,
}

/// The writing end: the download appends its verified in-order bytes here.
#[derive(Debug)]
pub struct ContentBuffer {
    file: std::fs::File,
    progress: watch::Sender<Progress>,
    length: u64,
}

impl ContentBuffer {
    /// A buffer for a content of `length` bytes in an anonymous temporary file (gone when the
    /// last handle closes), and the content the gateway serves from it.
    pub fn new(
        id: ContentId,
        length: u64,
        video: Option<VideoInfo>,
    ) -> std::io::Result<(ContentBuffer, GatewayContent)> {
        let file = tempfile::tempfile()?;
        let reader = file.try_clone()?;
        let (progress, watcher) = watch::channel(Progress::default());
        let content = GatewayContent {
            inner: Arc::new(Inner {
                id,
                id_hex: content_id_hex(&id),
                length,
                video,
                file: reader,
                progress: watcher,
                held: Arc::default(),
            }),
        };
        Ok((ContentBuffer { file, progress, length }, content))
    }

    /// Appends the next in-order bytes; readers waiting for them wake up.
    pub fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let delivered = self.progress.borrow().delivered;
        if delivered + bytes.len() as u64 > self.length {
            return Err(std::io::Error::other(format!(
                "{} bytes past the content's end ({} of {} delivered)",
                bytes.len(),
                delivered,
                self.length
            )));
        }
        // The file is written at its own cursor; readers use positioned reads, which do not move it.
        self.file.write_all(bytes)?;
        self.progress.send_modify(|p| p.delivered += bytes.len() as u64);
        Ok(())
    }

    /// Bytes appended so far.
    pub fn delivered(&self) -> u64 {
        self.progress.borrow().delivered
    }

    /// The download stopped short: readers waiting for bytes it will never deliver get an error.
    pub fn fail(&self, why: impl Into<String>) {
        let why = why.into();
        self.progress.send_modify(|p| p.failed = Some(why));
    }
}

#[derive(Debug)]
struct Inner {
    id: ContentId,
    id_hex: String,
    length: u64,
    video: Option<VideoInfo>,
    file: std::fs::File,
    progress: watch::Receiver<Progress>,
    /// What the gateway's readers hold, for `/status` and the tests that check it is freed.
    held: Arc<Held>,
}

/// What the response bodies hold: the bodies alive, and the bytes of their chunks that are
/// read from the file and not yet written to a socket (hyper's queue holds them meanwhile).
#[derive(Debug, Default)]
struct Held {
    bodies: AtomicU64,
    bytes: AtomicU64,
}

/// One body's share of [`Held`], given back when hyper drops the body (the response is done
/// or its connection is gone).
struct BodyGuard(Arc<Held>);

impl BodyGuard {
    fn new(held: &Arc<Held>) -> BodyGuard {
        held.bodies.fetch_add(1, Ordering::Relaxed);
        BodyGuard(held.clone())
    }
}

impl Drop for BodyGuard {
    fn drop(&mut self) {
        self.0.bodies.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A chunk's bytes, counted in [`Held`] until the chunk is dropped: a read-only mapping of the
/// buffer file, so a reader's queued chunks are the file's cached pages (shared by every reader
/// of the same bytes), not heap the allocator keeps after the reader leaves, and unmapping on
/// drop gives them back.
struct CountedChunk {
    data: memmap2::Mmap,
    held: Arc<Held>,
}

impl CountedChunk {
    fn new(data: memmap2::Mmap, held: &Arc<Held>) -> CountedChunk {
        held.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
        CountedChunk {
            data,
            held: held.clone(),
        }
    }
}

impl AsRef<[u8]> for CountedChunk {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for CountedChunk {
    fn drop(&mut self) {
        self.held.bytes.fetch_sub(self.data.len() as u64, Ordering::Relaxed);
    }
}

/// The reading end: what the gateway serves (cheap to clone).
#[derive(Clone, Debug)]
pub struct GatewayContent {
    inner: Arc<Inner>,
}

impl GatewayContent {
    pub fn id(&self) -> ContentId {
        self.inner.id
    }

    /// The path of the content's player page on the gateway.
    pub fn player_path(&self) -> String {
        format!("/player/{}", self.inner.id_hex)
    }

    /// The path a player should open: the content, or an HLS content's playlist.
    pub fn media_path(&self) -> String {
        match self.inner.video.as_ref().and_then(VideoInfo::playlist) {
            Some(playlist) if self.inner.video.as_ref().is_some_and(|v| v.container == Container::Hls) => {
                format!("/content/{}/{}", self.inner.id_hex, playlist.name)
            }
            _ => format!("/content/{}", self.inner.id_hex),
        }
    }

    /// Waits until `end` bytes are delivered; an error if the download stopped before.
    async fn wait_for(&self, end: u64) -> Result<u64, String> {
        let mut watcher = self.inner.progress.clone();
        loop {
            let progress = watcher.borrow_and_update().clone();
            if progress.delivered >= end {
                return Ok(progress.delivered);
            }
            if let Some(why) = progress.failed {
                return Err(why);
            }
            if watcher.changed().await.is_err() {
                return Err("the download stopped".to_owned());
            }
        }
    }

    /// The bytes `range` of the content as a body stream: each chunk is sent once the download
    /// has delivered it.
    fn stream(&self, range: Range<u64>) -> Body {
        let guard = BodyGuard::new(&self.inner.held);
        let state = (self.clone(), range.start, range.end, guard);
        let stream = futures_util::stream::unfold(state, |(content, at, end, guard)| async move {
            if at >= end {
                return None;
            }
            let delivered = match content.wait_for(at + 1).await {
                Ok(delivered) => delivered,
                Err(why) => return Some((Err(std::io::Error::other(why)), (content, end, end, guard))),
            };
            let len = (delivered.min(end) - at).min(BODY_CHUNK) as usize;
            // SAFETY: the mapping covers delivered bytes of this gateway's own anonymous file,
            // which are never written again, and the file never shrinks: the mapped bytes
            // cannot change or vanish (no SIGBUS) while a chunk lives.
            let map = unsafe { memmap2::MmapOptions::new().offset(at).len(len).map(&content.inner.file) };
            match map {
                Ok(map) => {
                    let chunk = Bytes::from_owner(CountedChunk::new(map, &content.inner.held));
                    Some((Ok(chunk), (content, at + len as u64, end, guard)))
                }
                Err(e) => Some((Err(e), (content, end, end, guard))),
            }
        });
        Body::from_stream(stream)
    }
}

/// What a `Range` header asks of a representation of `length` bytes (RFC 9110 §14.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RangeRequest {
    /// No range, or one the server may ignore (another unit, bad syntax, several ranges):
    /// the whole representation, 200.
    Full,
    /// One satisfiable range, clipped to the length: 206.
    Partial(Range<u64>),
    /// No byte of the range exists: 416.
    Unsatisfiable,
}

/// Parses a `Range` header value for a representation of `length` bytes: `bytes=a-b`,
/// `bytes=a-` and the suffix form `bytes=-n` (RFC 9110 §14.1.2). Several ranges are served as
/// the whole representation, which §14.2 allows.
pub fn parse_range(value: &str, length: u64) -> RangeRequest {
    let Some((unit, set)) = value.split_once('=') else {
        return RangeRequest::Full;
    };
    if !unit.trim().eq_ignore_ascii_case("bytes") || set.contains(',') {
        return RangeRequest::Full;
    }
    let Some((first, last)) = set.trim().split_once('-') else {
        return RangeRequest::Full;
    };
    // Digits only; a number too large for u64 is past any end.
    let number = |s: &str| -> Option<u64> {
        let s = s.trim();
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().unwrap_or(u64::MAX))
    };
    match (first.trim().is_empty(), last.trim().is_empty()) {
        // bytes=-n: the last n bytes.
        (true, false) => match number(last) {
            None => RangeRequest::Full,
            Some(0) => RangeRequest::Unsatisfiable,
            Some(_) if length == 0 => RangeRequest::Unsatisfiable,
            Some(n) => RangeRequest::Partial(length.saturating_sub(n)..length),
        },
        // bytes=a-: from a to the end.
        (false, true) => match number(first) {
            None => RangeRequest::Full,
            Some(a) if a >= length => RangeRequest::Unsatisfiable,
            Some(a) => RangeRequest::Partial(a..length),
        },
        (false, false) => match (number(first), number(last)) {
            (Some(a), Some(b)) if a <= b => {
                if a >= length {
                    RangeRequest::Unsatisfiable
                } else {
                    RangeRequest::Partial(a..b.saturating_add(1).min(length))
                }
            }
            // A last position before the first is invalid syntax: ignored (§14.1.1).
            _ => RangeRequest::Full,
        },
        (true, true) => RangeRequest::Full,
    }
}

/// The content type of an HLS table's file, by its extension (RFC 8216 §4).
fn file_content_type(name: &str) -> &'static str {
    let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match extension.as_deref() {
        Some("m3u8") => "application/vnd.apple.mpegurl",
        Some("ts") => "video/mp2t",
        Some("m4s" | "mp4" | "m4v") => "video/mp4",
        Some("aac") => "audio/aac",
        Some("m4a") => "audio/mp4",
        Some("vtt") => "text/vtt",
        _ => "application/octet-stream",
    }
}

fn text_response(status: StatusCode, message: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message + "\n",
    )
        .into_response()
}

/// Answers a request for the bytes `span` of the content, with range support.
fn serve_span(
    content: &GatewayContent,
    method: &Method,
    headers: &HeaderMap,
    span: Range<u64>,
    kind: &str,
) -> Response {
    let length = span.end - span.start;
    let etag = format!("\"{}-{}-{}\"", content.inner.id_hex, span.start, length);
    // If-Range with another validator: the representation changed, so the whole one (§13.1.5).
    let if_range_ok = headers
        .get(header::IF_RANGE)
        .is_none_or(|v| v.to_str().is_ok_and(|v| v.trim() == etag));
    let range = match headers.get(header::RANGE).and_then(|v| v.to_str().ok()) {
        Some(value) if if_range_ok => parse_range(value, length),
        _ => RangeRequest::Full,
    };
    let mut builder = Response::builder()
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::ETAG, &etag)
        .header(header::CONTENT_TYPE, kind);
    let part = match range {
        RangeRequest::Unsatisfiable => {
            return builder
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header(header::CONTENT_RANGE, format!("bytes */{length}"))
                .header(header::CONTENT_LENGTH, "0")
                .body(Body::empty())
                .expect("a valid response");
        }
        RangeRequest::Full => {
            builder = builder.status(StatusCode::OK);
            0..length
        }
        RangeRequest::Partial(part) => {
            builder = builder.status(StatusCode::PARTIAL_CONTENT).header(
                header::CONTENT_RANGE,
                format!("bytes {}-{}/{length}", part.start, part.end - 1),
            );
            part
        }
    };
    builder = builder.header(header::CONTENT_LENGTH, part.end - part.start);
    let body = if *method == Method::HEAD {
        Body::empty()
    } else {
        content.stream(span.start + part.start..span.start + part.end)
    };
    builder.body(body).expect("a valid response")
}

/// A 404 naming the content this gateway serves, when `id` is another.
fn wrong_id(content: &GatewayContent, id: &str) -> Option<Response> {
    (id != content.inner.id_hex).then(|| {
        text_response(
            StatusCode::NOT_FOUND,
            format!("this gateway serves content {}, not {id}", content.inner.id_hex),
        )
    })
}

async fn whole_content(
    State(content): State<GatewayContent>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if let Some(response) = wrong_id(&content, &id) {
        return response;
    }
    let kind = match content.inner.video.as_ref().map(|v| v.container) {
        Some(Container::Mp4) => "video/mp4",
        _ => "application/octet-stream",
    };
    serve_span(&content, &method, &headers, 0..content.inner.length, kind)
}

async fn one_file(
    State(content): State<GatewayContent>,
    Path((id, name)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if let Some(response) = wrong_id(&content, &id) {
        return response;
    }
    let video = content.inner.video.as_ref().filter(|v| v.container == Container::Hls);
    let Some(file) = video.and_then(|v| v.file(&name)) else {
        return text_response(
            StatusCode::NOT_FOUND,
            format!("content {id} has no file {name:?} (only HLS contents have files)"),
        );
    };
    serve_span(&content, &method, &headers, file.range(), file_content_type(&file.name))
}

/// The download's progress, for people and tests.
#[derive(Serialize)]
struct Status {
    content: String,
    length: u64,
    delivered: u64,
    done: bool,
    failed: Option<String>,
    video: Option<VideoInfo>,
    media: String,
    /// Response bodies alive (readers being served or waiting for bytes).
    readers: u64,
    /// Bytes read for readers and not yet written to their sockets.
    reader_buffered_bytes: u64,
}

async fn status(State(content): State<GatewayContent>) -> Response {
    let progress = content.inner.progress.borrow().clone();
    let status = Status {
        content: content.inner.id_hex.clone(),
        length: content.inner.length,
        delivered: progress.delivered,
        done: progress.delivered == content.inner.length,
        failed: progress.failed,
        video: content.inner.video.clone(),
        media: content.media_path(),
        readers: content.inner.held.bodies.load(Ordering::Relaxed),
        reader_buffered_bytes: content.inner.held.bytes.load(Ordering::Relaxed),
    };
    axum::Json(status).into_response()
}

/// The built-in player page: a native `<video>` and a log of its events. With `?report=URL`
/// it POSTs the log as JSON to URL when playback ends or fails (for automated tests).
const PLAYER_PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>pcdn play {ID}</title>
<style nonce="{NONCE}">body{font-family:sans-serif;margin:1em}video{max-width:100%;background:#000}pre{font-size:12px}</style>
</head><body>
<h1>pcdn play</h1>
<p>content <code>{ID}</code>: <a href="{MEDIA}">{MEDIA}</a></p>
<video id="video" controls autoplay muted playsinline preload="auto" src="{MEDIA}"></video>
<p id="note"></p>
<pre id="log"></pre>
<script nonce="{NONCE}">
"use strict";
const video = document.getElementById("video");
const report = new URLSearchParams(location.search).get("report");
const started = performance.now();
const log = { events: [], first_frame_ms: null, waiting_after_first_frame: 0, stalled_after_first_frame: 0,
              ended: false, error: null, current_time: 0, duration: null, frames: null };
const since = () => Math.round(performance.now() - started);
let sent = false;
function show() { document.getElementById("log").textContent = JSON.stringify(log, null, 1); }
function send() {
  if (sent || !report) return;
  sent = true;
  fetch(report, { method: "POST", mode: "no-cors", body: JSON.stringify(log) });
}
if ({HLS} && video.canPlayType("application/vnd.apple.mpegurl") === "") {
  document.getElementById("note").textContent =
    "This browser does not play HLS natively: open the playlist with ffplay, mpv or VLC.";
}
for (const name of ["loadedmetadata", "canplay", "playing", "waiting", "stalled", "pause", "seeking", "ended", "error"]) {
  video.addEventListener(name, () => {
    log.events.push([name, since(), Math.round(video.currentTime * 1000) / 1000]);
    log.current_time = video.currentTime;
    log.duration = isFinite(video.duration) ? video.duration : null;
    if (name === "playing" && log.first_frame_ms === null) log.first_frame_ms = since();
    if (name === "waiting" && log.first_frame_ms !== null) log.waiting_after_first_frame++;
    if (name === "stalled" && log.first_frame_ms !== null) log.stalled_after_first_frame++;
    if (name === "ended") log.ended = true;
    if (name === "error") log.error = video.error ? (video.error.code + " " + video.error.message) : "unknown";
    if (video.getVideoPlaybackQuality) log.frames = video.getVideoPlaybackQuality().totalVideoFrames;
    show();
    if (name === "ended" || name === "error") send();
  });
}
show();
</script>
</body></html>
"#;

async fn player_page(State(content): State<GatewayContent>, Path(id): Path<String>) -> Response {
    if let Some(response) = wrong_id(&content, &id) {
        return response;
    }
    let hls = content
        .inner
        .video
        .as_ref()
        .is_some_and(|v| v.container == Container::Hls);
    // Every value is escaped for HTML (the manifest's file names are a publisher's text), and
    // the page's own script and style carry a fresh nonce the policy requires, so markup that
    // got in anyway could run no script (CSP Level 3, W3C, §6.1.11 nonces).
    let mut nonce = [0u8; 16];
    if let Err(e) = getrandom::fill(&mut nonce) {
        return text_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("no randomness for a nonce: {e}"),
        );
    }
    let nonce = hex::encode(nonce);
    let page = PLAYER_PAGE
        .replace("{NONCE}", &nonce)
        .replace("{ID}", &html_escape(&content.inner.id_hex))
        .replace("{MEDIA}", &html_escape(&content.media_path()))
        .replace("{HLS}", if hls { "true" } else { "false" });
    let policy = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; media-src 'self'; \
         connect-src *; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    );
    let mut response = axum::response::Html(page).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_str(&policy).expect("a policy of ASCII"),
    );
    response
}

/// `text` as HTML text or a quoted attribute value: the five characters with a meaning in
/// markup become character references (HTML Living Standard §13.1.4, OWASP XSS cheat sheet).
pub fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Tells browsers never to guess a type (`X-Content-Type-Options: nosniff`, Fetch standard
/// §3.5.3): a content or HLS file whose bytes look like HTML stays a download, not a page
/// running script on the gateway's origin.
async fn no_sniff(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// The gateway's routes over `content`.
pub fn router(content: GatewayContent) -> axum::Router {
    axum::Router::new()
        .route("/content/{id}", get(whole_content))
        .route("/content/{id}/{file}", get(one_file))
        .route("/player/{id}", get(player_page))
        .route("/status", get(status))
        .layer(axum::middleware::map_response(no_sniff))
        .with_state(content)
}

/// Looks the content up, starts the gateway on `listen` and prints its URLs, downloads, then
/// serves what arrived until the task is dropped (`pcdn play`).
pub async fn play(config: FetchConfig, listen: SocketAddr) -> anyhow::Result<()> {
    let prepared = crate::fetch::prepare(&config).await?;
    let manifest = prepared.manifest();
    let (mut buffer, content) = ContentBuffer::new(config.content, manifest.length, manifest.video.clone())
        .context("creating the gateway's temporary file")?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("--listen {listen}"))?;
    let addr = listener.local_addr().context("the gateway's address")?;
    let base = format!("http://{addr}");
    match &manifest.video {
        Some(video) => println!(
            "{}: {} bytes, {} video, {:.1} s, {} kbit/s",
            content_id_hex(&config.content),
            manifest.length,
            video.container.name(),
            video.duration_ms as f64 / 1000.0,
            crate::video::kbit_per_s(video.bitrate_bps)
        ),
        None => println!(
            "{}: {} bytes (no video metadata)",
            content_id_hex(&config.content),
            manifest.length
        ),
    }
    println!("player page: {base}{}", content.player_path());
    println!("{base}{}", content.media_path());
    let _ = std::io::stdout().flush();
    let server = axum::serve(listener, router(content));
    let gateway = tokio::spawn(async move { server.await });

    let outcome = crate::fetch::download(&config, prepared, |bytes| {
        buffer.append(bytes).map_err(|source| FetchError::Io {
            path: PathBuf::from("(the gateway's temporary file)"),
            source,
        })
    })
    .await;
    match outcome {
        Ok(report) => eprintln!(
            "downloaded {} bytes in {:.2} s ({:.2} Mbit/s); serving until Ctrl-C",
            report.bytes, report.elapsed_s, report.goodput_mbps
        ),
        Err(e) => {
            // The bytes delivered so far stay playable; later ones fail their requests.
            buffer.fail(e.to_string());
            eprintln!(
                "download stopped after {} bytes: {e}; serving what arrived until Ctrl-C",
                buffer.delivered()
            );
        }
    }
    gateway
        .await
        .context("the gateway task")?
        .context("the gateway stopped")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_follow_rfc_9110() {
        use RangeRequest::*;
        assert_eq!(parse_range("bytes=0-", 100), Partial(0..100));
        assert_eq!(parse_range("bytes=0-0", 100), Partial(0..1));
        assert_eq!(parse_range("bytes=10-19", 100), Partial(10..20));
        assert_eq!(parse_range("bytes=90-200", 100), Partial(90..100));
        assert_eq!(parse_range("bytes=99-", 100), Partial(99..100));
        assert_eq!(parse_range("bytes=-10", 100), Partial(90..100));
        assert_eq!(parse_range("bytes=-500", 100), Partial(0..100));
        assert_eq!(parse_range(" Bytes = 5 - 6 ", 100), Partial(5..7));
        assert_eq!(parse_range("bytes=100-", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=150-160", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=-0", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=-5", 0), Unsatisfiable);
        assert_eq!(parse_range("bytes=0-", 0), Unsatisfiable);
        // Ignored: bad syntax, another unit, several ranges.
        assert_eq!(parse_range("bytes=20-10", 100), Full);
        assert_eq!(parse_range("bytes=a-b", 100), Full);
        assert_eq!(parse_range("bytes=-", 100), Full);
        assert_eq!(parse_range("bytes=+1-2", 100), Full);
        assert_eq!(parse_range("items=0-1", 100), Full);
        assert_eq!(parse_range("bytes=0-1,5-6", 100), Full);
        assert_eq!(parse_range("0-1", 100), Full);
        assert_eq!(parse_range("bytes=99999999999999999999999-", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=-99999999999999999999999", 100), Partial(0..100));
    }

    #[test]
    fn hls_files_get_their_content_types() {
        assert_eq!(file_content_type("index.m3u8"), "application/vnd.apple.mpegurl");
        assert_eq!(file_content_type("index0.TS"), "video/mp2t");
        assert_eq!(file_content_type("init.mp4"), "video/mp4");
        assert_eq!(file_content_type("README"), "application/octet-stream");
    }

    #[test]
    fn the_buffer_refuses_bytes_past_the_end() {
        let (mut buffer, _content) = ContentBuffer::new(ContentId([1; 32]), 4, None).unwrap();
        buffer.append(b"abc").unwrap();
        assert!(buffer.append(b"de").is_err());
        buffer.append(b"d").unwrap();
        assert_eq!(buffer.delivered(), 4);
    }
}
