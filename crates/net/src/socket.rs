//! A tokio UDP socket with batched I/O through quinn-udp: GSO sends and GRO/`recvmmsg`
//! receives, falling back to one datagram per system call where the kernel lacks them.
//!
//! Both the serving device and the fetching client move every datagram through a [`Socket`]:
//! [`Socket::recv`] fills a [`RecvBatch`] (up to `quinn_udp::BATCH_SIZE` buffers per system
//! call, each holding up to `gro_segments` coalesced datagrams of one sender), and
//! [`Socket::send`] empties a [`SendBatch`], whose datagrams of equal size to one destination
//! go out as one GSO super-datagram (the kernel cuts it into segments).

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;

use quinn_udp::{BATCH_SIZE, RecvMeta, UdpSockRef, UdpSocketState};
use tokio::io::Interest;

/// The largest datagram pcdn sends or accepts; receive buffers are cut to it.
pub const MAX_DATAGRAM: usize = pcdn_core::wire::MAX_DATAGRAM;

/// Socket buffer size asked for in both directions (the kernel caps it at `rmem_max` /
/// `wmem_max`): a burst of a whole request budget must not overflow a default 208 kB buffer.
const SOCKET_BUFFER_BYTES: usize = 4 << 20;

/// The most bytes one GSO send may carry: the payload of one maximal IPv4 UDP datagram
/// (65535 − 20 − 8), which the kernel's segmentation offload also requires.
const MAX_GSO_BYTES: usize = 65_507;

/// A UDP socket registered with tokio, with quinn-udp's batched send and receive.
#[derive(Debug)]
pub struct Socket {
    io: tokio::net::UdpSocket,
    state: UdpSocketState,
    /// Bound to an IPv6 address: IPv4 peers are sent to through mapped addresses.
    ipv6: bool,
}

impl Socket {
    /// Binds a socket to `addr` (port 0: any free port) and enlarges its buffers.
    pub fn bind(addr: SocketAddr) -> io::Result<Socket> {
        let std_socket = std::net::UdpSocket::bind(addr)?;
        Socket::from_std(std_socket)
    }

    /// Wraps an already bound socket (it is made non-blocking). Must run inside a tokio runtime.
    pub fn from_std(std_socket: std::net::UdpSocket) -> io::Result<Socket> {
        let state = UdpSocketState::new(UdpSockRef::from(&std_socket))?;
        // Best effort: a kernel that refuses keeps its default, which only costs bursts.
        let _ = state.set_recv_buffer_size(UdpSockRef::from(&std_socket), SOCKET_BUFFER_BYTES);
        let _ = state.set_send_buffer_size(UdpSockRef::from(&std_socket), SOCKET_BUFFER_BYTES);
        let ipv6 = std_socket.local_addr()?.is_ipv6();
        let io = tokio::net::UdpSocket::from_std(std_socket)?;
        Ok(Socket { io, state, ipv6 })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// Datagrams one send may carry (1 without GSO, or once the kernel refused it).
    pub fn max_gso_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    /// Datagrams the kernel may coalesce into one receive buffer (1 without GRO).
    pub fn gro_segments(&self) -> usize {
        self.state.gro_segments()
    }

    /// Waits for datagrams and fills `batch` with as many as one system call returns.
    pub async fn recv(&self, batch: &mut RecvBatch) -> io::Result<()> {
        loop {
            let result = self
                .io
                .async_io(Interest::READABLE, || recv_into(&self.io, &self.state, batch))
                .await;
            match result {
                Ok(()) => return Ok(()),
                Err(e) if is_transient(&e) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Fills `batch` with the datagrams already waiting, without blocking; false if none were.
    pub fn try_recv(&self, batch: &mut RecvBatch) -> io::Result<bool> {
        loop {
            match self
                .io
                .try_io(Interest::READABLE, || recv_into(&self.io, &self.state, batch))
            {
                Ok(()) => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    batch.clear();
                    return Ok(false);
                }
                Err(e) if is_transient(&e) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends every datagram of `batch`, waiting while the socket's buffer is full, and clears
    /// it. Returns how many datagrams were dropped: as in quinn, a send the kernel refuses
    /// (unreachable, no buffers, too big) is logged and dropped rather than returned, since UDP
    /// promises no delivery and the protocol recovers from loss anyway.
    pub async fn send(&self, batch: &mut SendBatch) -> usize {
        let mut dropped = 0;
        for group in &batch.groups {
            let to = self.destination(group.to);
            let contents = &group.buf[..];
            let segments = contents.len().div_ceil(group.segment_size);
            if segments > 1 && segments <= self.state.max_gso_segments() {
                match self.send_one(to, contents, Some(group.segment_size)).await {
                    Ok(()) => continue,
                    // The kernel turned GSO down (quinn-udp has noted it): send one by one.
                    Err(e) if self.state.max_gso_segments() == 1 => {
                        tracing::debug!(error = %e, "segmentation offload refused; sending datagrams singly");
                    }
                    Err(e) => {
                        tracing::debug!(%to, error = %e, datagrams = segments, "send failed; dropped");
                        dropped += segments;
                        continue;
                    }
                }
            }
            for datagram in contents.chunks(group.segment_size) {
                if let Err(e) = self.send_one(to, datagram, None).await {
                    tracing::debug!(%to, error = %e, "send failed; dropped");
                    dropped += 1;
                }
            }
        }
        batch.clear();
        dropped
    }

    /// An IPv6 socket reaches IPv4 peers through their mapped addresses (`::ffff:a.b.c.d`).
    fn destination(&self, to: SocketAddr) -> SocketAddr {
        match to {
            SocketAddr::V4(v4) if self.ipv6 => SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port()),
            other => other,
        }
    }

    async fn send_one(&self, to: SocketAddr, contents: &[u8], segment_size: Option<usize>) -> io::Result<()> {
        let transmit = quinn_udp::Transmit {
            destination: to,
            ecn: None,
            contents,
            segment_size,
            src_ip: None,
        };
        loop {
            let sent = self
                .io
                .async_io(Interest::WRITABLE, || {
                    self.state.try_send(UdpSockRef::from(&self.io), &transmit)
                })
                .await;
            match sent {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => return other,
            }
        }
    }
}

/// One `recvmmsg` (or `recvmsg`) into `batch`'s buffers.
fn recv_into(io: &tokio::net::UdpSocket, state: &UdpSocketState, batch: &mut RecvBatch) -> io::Result<()> {
    batch.count = 0;
    let mut chunks = batch.buf.chunks_mut(batch.slot_len);
    let mut slices: [IoSliceMut<'_>; BATCH_SIZE] =
        std::array::from_fn(|_| IoSliceMut::new(chunks.next().expect("BATCH_SIZE slots")));
    let n = state.recv(UdpSockRef::from(io), &mut slices, &mut batch.meta)?;
    batch.count = n;
    Ok(())
}

/// Receive errors after which the socket is still fine: an ICMP error reported for an earlier
/// datagram, or an interrupted call.
fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted
    )
}

/// Buffers for one batched receive: `quinn_udp::BATCH_SIZE` slots, each large enough for the
/// most datagrams GRO may coalesce.
pub struct RecvBatch {
    buf: Vec<u8>,
    slot_len: usize,
    meta: Vec<RecvMeta>,
    count: usize,
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("slots", &self.meta.len())
            .field("slot_len", &self.slot_len)
            .field("filled", &self.count)
            .finish()
    }
}

impl RecvBatch {
    /// Buffers sized for `socket`'s GRO.
    pub fn new(socket: &Socket) -> RecvBatch {
        let slots = BATCH_SIZE;
        let slot_len = MAX_DATAGRAM * socket.gro_segments().max(1);
        RecvBatch {
            buf: vec![0; slots * slot_len],
            slot_len,
            meta: vec![RecvMeta::default(); slots],
            count: 0,
        }
    }

    /// The datagrams of the last receive, each with its sender, GRO bundles cut apart. An
    /// IPv4 sender reaching an IPv6 socket is given by its IPv4 address.
    pub fn datagrams(&self) -> impl Iterator<Item = (SocketAddr, &[u8])> + '_ {
        self.meta[..self.count]
            .iter()
            .zip(self.buf.chunks(self.slot_len))
            .flat_map(|(meta, slot)| {
                let stride = meta.stride.max(1);
                let from = SocketAddr::new(meta.addr.ip().to_canonical(), meta.addr.port());
                slot[..meta.len.min(slot.len())]
                    .chunks(stride)
                    .map(move |datagram| (from, datagram))
            })
    }

    /// Buffers filled by the last receive (a GRO buffer counts once).
    pub fn buffers(&self) -> usize {
        self.count
    }

    fn clear(&mut self) {
        self.count = 0;
    }
}

/// Datagrams waiting to be sent, grouped for GSO: datagrams to one destination of one size
/// (the last may be shorter) share a group, wherever they were pushed in the batch. A server
/// serving its sessions in turn pushes its datagrams to alternating clients; grouping them by
/// destination keeps one system call (and one wake-up of the receiver on loopback) per group,
/// not per datagram. Each destination's datagrams keep their order; datagrams to different
/// destinations may leave in another order than pushed, which no receiver can tell.
#[derive(Debug, Default)]
pub struct SendBatch {
    groups: Vec<Group>,
    /// Buffers of sent groups, reused.
    spare: Vec<Vec<u8>>,
    datagrams: usize,
    bytes: usize,
}

#[derive(Debug)]
struct Group {
    to: SocketAddr,
    buf: Vec<u8>,
    segment_size: usize,
    /// A shorter datagram ended the group: GSO allows only the last segment to be short.
    closed: bool,
}

impl SendBatch {
    pub fn new() -> SendBatch {
        SendBatch::default()
    }

    /// Queues one datagram to `to`. `max_segments` (the socket's `max_gso_segments`) bounds a
    /// group.
    pub fn push(&mut self, to: SocketAddr, datagram: &[u8], max_segments: usize) {
        debug_assert!(!datagram.is_empty());
        let len = datagram.len();
        self.datagrams += 1;
        self.bytes += len;
        // The destination's latest group: a datagram joins it or starts the next one, so the
        // destination's datagrams stay in order. Searched from the end: a batch holds at most
        // a few hundred datagrams.
        if let Some(group) = self.groups.iter_mut().rev().find(|g| g.to == to) {
            let fits = !group.closed
                && len <= group.segment_size
                && group.buf.len() / group.segment_size < max_segments
                && group.buf.len() + len <= MAX_GSO_BYTES;
            if fits {
                group.buf.extend_from_slice(datagram);
                group.closed = len < group.segment_size;
                return;
            }
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.extend_from_slice(datagram);
        self.groups.push(Group {
            to,
            buf,
            segment_size: len,
            closed: false,
        });
    }

    /// Datagrams queued.
    pub fn len(&self) -> usize {
        self.datagrams
    }

    pub fn is_empty(&self) -> bool {
        self.datagrams == 0
    }

    /// Bytes queued.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// System calls the batch will take with GSO (one per group).
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    pub fn clear(&mut self) {
        for mut group in self.groups.drain(..) {
            group.buf.clear();
            self.spare.push(group.buf);
        }
        self.datagrams = 0;
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn equal_datagrams_to_one_destination_share_a_group() {
        let mut batch = SendBatch::new();
        for _ in 0..5 {
            batch.push(addr(1), &[7; 100], 64);
        }
        assert_eq!((batch.len(), batch.groups(), batch.bytes()), (5, 1, 500));
    }

    #[test]
    fn a_short_datagram_closes_its_group() {
        let mut batch = SendBatch::new();
        batch.push(addr(1), &[1; 100], 64);
        batch.push(addr(1), &[1; 40], 64);
        batch.push(addr(1), &[1; 40], 64);
        assert_eq!(batch.groups(), 2);
    }

    #[test]
    fn datagrams_to_alternating_destinations_are_grouped_per_destination_in_order() {
        // A server serving three sessions in turn: one group per destination, not per datagram.
        let mut batch = SendBatch::new();
        for i in 0..30u8 {
            batch.push(addr(1 + u16::from(i % 3)), &[i; 100], 64);
        }
        assert_eq!((batch.len(), batch.groups(), batch.bytes()), (30, 3, 3000));
        for (k, group) in batch.groups.iter().enumerate() {
            assert_eq!(group.to, addr(1 + k as u16));
            let firsts: Vec<u8> = group.buf.chunks(100).map(|d| d[0]).collect();
            let expected: Vec<u8> = (0..30u8).filter(|i| usize::from(i % 3) == k).collect();
            assert_eq!(firsts, expected, "destination {k}'s datagrams in push order");
        }
    }

    #[test]
    fn a_longer_datagram_or_another_destination_starts_a_group() {
        let mut batch = SendBatch::new();
        batch.push(addr(1), &[1; 100], 64);
        batch.push(addr(1), &[1; 200], 64);
        batch.push(addr(2), &[1; 200], 64);
        assert_eq!(batch.groups(), 3);
    }

    #[test]
    fn groups_respect_the_segment_and_byte_limits() {
        let mut batch = SendBatch::new();
        for _ in 0..10 {
            batch.push(addr(1), &[1; 100], 4);
        }
        assert_eq!(batch.groups(), 3);
        let mut big = SendBatch::new();
        for _ in 0..100 {
            big.push(addr(1), &[1; 1500], 64);
        }
        // 43 datagrams of 1500 bytes fit in 65507.
        assert_eq!(big.groups(), 3);
    }

    #[tokio::test]
    async fn a_batch_crosses_loopback_intact() {
        let a = Socket::bind(addr(0)).unwrap();
        let b = Socket::bind(addr(0)).unwrap();
        let to = b.local_addr().unwrap();
        let mut batch = SendBatch::new();
        let mut sent = Vec::new();
        for i in 0..50u8 {
            let len = if i == 49 { 300 } else { 1200 };
            let datagram = vec![i; len];
            batch.push(to, &datagram, a.max_gso_segments());
            sent.push(datagram);
        }
        assert_eq!(a.send(&mut batch).await, 0);
        assert!(batch.is_empty());
        let mut received = Vec::new();
        let mut rb = RecvBatch::new(&b);
        while received.len() < sent.len() {
            b.recv(&mut rb).await.unwrap();
            for (from, d) in rb.datagrams() {
                assert_eq!(from, a.local_addr().unwrap());
                received.push(d.to_vec());
            }
        }
        assert_eq!(received, sent);
    }

    #[tokio::test]
    async fn interleaved_datagrams_reach_each_destination_intact_and_in_order() {
        let a = Socket::bind(addr(0)).unwrap();
        let receivers: Vec<Socket> = (0..3).map(|_| Socket::bind(addr(0)).unwrap()).collect();
        let mut batch = SendBatch::new();
        let mut sent = vec![Vec::new(); 3];
        for i in 0..60u8 {
            let k = usize::from(i % 3);
            let datagram = vec![i; 1200];
            batch.push(receivers[k].local_addr().unwrap(), &datagram, a.max_gso_segments());
            sent[k].push(datagram);
        }
        assert_eq!(a.send(&mut batch).await, 0);
        assert!(batch.is_empty() && batch.bytes() == 0);
        for (k, b) in receivers.iter().enumerate() {
            let mut received = Vec::new();
            let mut rb = RecvBatch::new(b);
            while received.len() < sent[k].len() {
                b.recv(&mut rb).await.unwrap();
                received.extend(rb.datagrams().map(|(_, d)| d.to_vec()));
            }
            assert_eq!(received, sent[k], "receiver {k}");
        }
    }
}

#[cfg(test)]
mod dual_stack_tests {
    use super::*;

    #[tokio::test]
    async fn an_ipv6_socket_talks_to_an_ipv4_peer_by_its_ipv4_address() {
        let Ok(v6) = Socket::bind("[::]:0".parse().unwrap()) else {
            return; // No IPv6 on this machine: nothing to check.
        };
        let v4 = Socket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let v4_addr = v4.local_addr().unwrap();
        let mut batch = SendBatch::new();
        batch.push(v4_addr, b"ping", 1);
        assert_eq!(v6.send(&mut batch).await, 0);
        let mut rb = RecvBatch::new(&v4);
        v4.recv(&mut rb).await.unwrap();
        let (from, datagram) = rb.datagrams().next().unwrap();
        assert_eq!(datagram, b"ping");
        batch.push(from, b"pong", 1);
        assert_eq!(v4.send(&mut batch).await, 0);
        let mut rb = RecvBatch::new(&v6);
        v6.recv(&mut rb).await.unwrap();
        let (from, datagram) = rb.datagrams().next().unwrap();
        assert_eq!((from, datagram), (v4_addr, &b"pong"[..]));
    }
}
