//! Child processes the benchmarks start: on free loopback ports, stopped when dropped.

use anyhow::Context;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::ops::{Deref, DerefMut};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// How long a child has after SIGTERM to exit cleanly (flush its log, close its store) before
/// it is killed: the servers and trackers the benchmarks start stop within a second.
const GRACE: Duration = Duration::from_secs(5);

/// A child process sent SIGTERM when dropped, and killed if it has not exited `GRACE` later.
pub(super) struct StopOnDrop(Child);

impl StopOnDrop {
    pub(super) fn new(child: Child) -> StopOnDrop {
        StopOnDrop(child)
    }
}

impl Deref for StopOnDrop {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for StopOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status();
        let deadline = Instant::now() + GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback address free for UDP and, if the kernel allows, for TCP on the same port. The
/// kernel picks it and the child binds it a moment later: another process may take it in
/// between, which callers that must be sure retry on another.
pub(super) fn free_addr() -> anyhow::Result<SocketAddr> {
    let socket = UdpSocket::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(match TcpListener::bind(socket.local_addr()?) {
        Ok(listener) => listener.local_addr()?,
        Err(_) => socket.local_addr()?,
    })
}
