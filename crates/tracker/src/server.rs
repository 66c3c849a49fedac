//! The tracker's HTTP(S) front: accepts TCP connections (TLS when configured), caps how many
//! are open, closes slow and idle ones, and serves the API router on each over HTTP/1.1 (hyper).

use crate::metrics::ConnectionMetrics;
use crate::tls::TlsFiles;
use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower_service::Service;

/// Limits on the connections one tracker process serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// Most connections open at once; a new connection beyond it closes the oldest one (which
    /// finishes a request in flight first), so a flood of idle connections cannot lock clients
    /// out. The open-file soft limit lowers it further (`FD_RESERVE` descriptors stay free).
    pub max_connections: usize,
    /// A connection must send a complete request header within this long of opening (including
    /// the TLS handshake) or of its previous answer; otherwise it is closed. This is both the
    /// slow-header (slowloris) and the idle keep-alive timeout.
    pub header_timeout: Duration,
    /// After a stop is asked, connections still open this long later are closed.
    pub shutdown_deadline: Duration,
}

impl Default for HttpLimits {
    fn default() -> HttpLimits {
        HttpLimits {
            // hyper keeps ~16 KiB of buffers per connection: 4,096 connections are ~64 MiB.
            max_connections: 4096,
            // A request header is < 1 KiB: 10 s is ample on any link; nginx allows 60 s.
            header_timeout: Duration::from_secs(10),
            // Requests take milliseconds; systemd's stop timeout (90 s) is far above.
            shutdown_deadline: Duration::from_secs(5),
        }
    }
}

impl HttpLimits {
    pub(crate) fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.max_connections >= 1, "max_connections must be at least 1");
        anyhow::ensure!(!self.header_timeout.is_zero(), "header_timeout must be positive");
        Ok(())
    }
}

/// File descriptors kept free beside connections: the store's files (SQLite's database, WAL and
/// shared memory for two connections, or a Redis socket), tokio's epoll and signal pipes, the
/// listener and logs — about 15 in practice.
const FD_RESERVE: u64 = 64;

/// How long an evicted connection may take to finish the request it is serving.
const EVICTION_GRACE: Duration = Duration::from_secs(1);

/// After an accept fails for lack of file descriptors, wait this long before the next one.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(20);

/// The open-file soft limit of this process, if known.
pub(crate) fn fd_soft_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and reads nothing else.
    let status = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (status == 0).then_some(limit.rlim_cur)
}

/// Raises the open-file soft limit to the hard limit (systemd's default soft limit of 1,024 is
/// far below its hard limit) and logs it. Returns the soft limit in force afterwards.
pub fn raise_fd_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and reads nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "cannot read the open-file limit");
        return None;
    }
    let before = limit.rlim_cur;
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the struct we pass; raising the soft limit up to the hard one
        // needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            tracing::info!(from = before, to = limit.rlim_max, "raised the open-file soft limit");
            return Some(limit.rlim_max);
        }
        tracing::warn!(error = %std::io::Error::last_os_error(), limit = before, "cannot raise the open-file soft limit");
    } else {
        tracing::info!(limit = before, "open-file limit");
    }
    Some(before)
}

/// The connection cap in force: the configured one, lowered to fit the open-file soft limit.
pub(crate) fn effective_max_connections(limits: &HttpLimits) -> usize {
    match fd_soft_limit() {
        Some(soft) => {
            let room = if soft > 2 * FD_RESERVE {
                soft - FD_RESERVE
            } else {
                soft / 2
            };
            limits
                .max_connections
                .min(usize::try_from(room).unwrap_or(usize::MAX))
                .max(1)
        }
        None => limits.max_connections,
    }
}

/// The TLS acceptor of `files`, if any (errors name the file).
pub(crate) fn tls_acceptor(files: Option<&TlsFiles>) -> anyhow::Result<Option<TlsAcceptor>> {
    files
        .map(|files| crate::tls::server_config(files).map(TlsAcceptor::from))
        .transpose()
}

/// The open connections, oldest first, each with the sender that asks it to close.
#[derive(Default)]
struct Open {
    next_id: u64,
    connections: BTreeMap<u64, oneshot::Sender<()>>,
}

/// Removes a connection from the table when its task ends, however it ends.
struct Registration {
    open: Arc<Mutex<Open>>,
    id: u64,
    metrics: ConnectionMetrics,
}

impl Drop for Registration {
    fn drop(&mut self) {
        lock(&self.open).connections.remove(&self.id);
        self.metrics.closed();
    }
}

fn lock(open: &Mutex<Open>) -> std::sync::MutexGuard<'_, Open> {
    // A panic while holding this lock leaves the table consistent (single map operations).
    open.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Everything one connection task needs.
#[derive(Clone)]
pub(crate) struct Front {
    pub router: Router,
    pub tls: Option<TlsAcceptor>,
    pub limits: HttpLimits,
    pub max_connections: usize,
    pub metrics: ConnectionMetrics,
}

/// Accepts and serves connections until `stopped` says stop, then closes them: gracefully
/// (requests in flight finish) up to the shutdown deadline, then by force.
pub(crate) async fn serve(listener: TcpListener, front: Front, mut stopped: watch::Receiver<bool>) {
    let open = Arc::new(Mutex::new(Open::default()));
    let (close_all, closing) = watch::channel(false);
    let mut tasks = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            // An error means the sender is gone: the RunningTracker was dropped, so stop too.
            _ = stopped.wait_for(|stop| *stop) => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) if is_per_connection(&error) => continue,
            Err(error) => {
                // Out of file descriptors (EMFILE/ENFILE) or memory: free one by closing the
                // oldest connection, and do not spin.
                tracing::warn!(%error, "accepting a connection failed");
                evict_oldest(&open, &front.metrics);
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let (evict, evicted) = oneshot::channel();
        let registration = {
            let mut table = lock(&open);
            if table.connections.len() >= front.max_connections {
                if let Some((_, oldest)) = table.connections.pop_first() {
                    let _ = oldest.send(());
                    front.metrics.evicted();
                }
            }
            let id = table.next_id;
            table.next_id += 1;
            table.connections.insert(id, evict);
            front.metrics.opened();
            Registration {
                open: Arc::clone(&open),
                id,
                metrics: front.metrics.clone(),
            }
        };
        tasks.spawn(connection(
            stream,
            peer,
            front.clone(),
            evicted,
            closing.clone(),
            registration,
        ));
    }
    drop(listener);
    let _ = close_all.send(true);
    let deadline = front.limits.shutdown_deadline;
    let drained = tokio::time::timeout(deadline, async { while tasks.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            open = tasks.len(),
            ?deadline,
            "connections still open at the shutdown deadline: closing them"
        );
        tasks.shutdown().await;
    }
}

/// Accept errors that concern one connection only (it was reset before we took it).
fn is_per_connection(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        error.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted
    )
}

fn evict_oldest(open: &Mutex<Open>, metrics: &ConnectionMetrics) {
    if let Some((_, evict)) = lock(open).connections.pop_first() {
        let _ = evict.send(());
        metrics.evicted();
    }
}

/// Completes when a stop of the whole server is asked (or its sender is gone).
async fn closing_now(mut closing: watch::Receiver<bool>) {
    let _ = closing.wait_for(|close| *close).await;
}

/// Serves one connection until the client closes it, it times out, it is evicted or the
/// server stops.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    front: Front,
    mut evicted: oneshot::Receiver<()>,
    closing: watch::Receiver<bool>,
    _registration: Registration,
) {
    let _ = stream.set_nodelay(true);
    let Some(acceptor) = front.tls.clone() else {
        return http(TokioIo::new(stream), peer, front, evicted, closing).await;
    };
    let handshake = async {
        let mut first = [0u8; 1];
        // A TLS connection starts with a handshake record (content type 22, RFC 8446 §5.1).
        if matches!(stream.peek(&mut first).await, Ok(1) if first[0] != 22) {
            refuse_plain_http(stream).await;
            return None;
        }
        match acceptor.accept(stream).await {
            Ok(tls) => Some(tls),
            Err(error) => {
                tracing::debug!(%peer, %error, "TLS handshake failed");
                None
            }
        }
    };
    let tls = tokio::select! {
        tls = tokio::time::timeout(front.limits.header_timeout, handshake) => match tls {
            Ok(Some(tls)) => tls,
            Ok(None) => return,
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                return;
            }
        },
        _ = &mut evicted => return,
        () = closing_now(closing.clone()) => return,
    };
    http(TokioIo::new(tls), peer, front, evicted, closing).await;
}

/// Answers a plain-HTTP request on the HTTPS port with a JSON 400 saying so, then closes.
async fn refuse_plain_http(mut stream: TcpStream) {
    let body = r#"{"error":"https_required","message":"this tracker serves HTTPS only: use an https:// URL"}"#;
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
}

async fn http<I>(
    io: TokioIo<I>,
    peer: SocketAddr,
    front: Front,
    mut evicted: oneshot::Receiver<()>,
    closing: watch::Receiver<bool>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let router = front.router;
    let service = service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        router.clone().call(request)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(front.limits.header_timeout);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let grace = tokio::select! {
        result = connection.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
            return;
        }
        _ = &mut evicted => EVICTION_GRACE,
        () = closing_now(closing) => front.limits.shutdown_deadline,
    };
    // Closes at once when idle; otherwise after the answer in flight.
    connection.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(grace, connection).await;
}
