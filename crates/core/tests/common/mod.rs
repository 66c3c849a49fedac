//! Helpers the core's integration tests share: driving a `Download` by hand and reading what
//! it sends.

use pcdn_core::wire::{self, Message};
use pcdn_core::{Download, Instant, PathId};

/// Every datagram the download sends at `now`, with its path.
pub fn transmits(d: &mut Download, now: Instant) -> Vec<(PathId, Vec<u8>)> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(t) = d.poll_transmit(now, &mut buf) {
        out.push((t.path, buf[..t.len].to_vec()));
    }
    out
}

/// The sequence numbers the REQUESTs among `out` ask for, in order.
pub fn requested<'a>(out: impl IntoIterator<Item = &'a (PathId, Vec<u8>)>) -> Vec<u64> {
    out.into_iter()
        .flat_map(|(_, b)| match wire::decode(b).unwrap() {
            Message::Request(r) => r
                .ranges
                .iter()
                .flat_map(|r| r.start..r.start + u64::from(r.len))
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// A DATA datagram for `seq` on connection `conn_id`, its payload `len` bytes of `seq as u8`.
pub fn data_of_len(conn_id: u64, seq: u64, len: usize) -> Vec<u8> {
    data_answering(conn_id, 0, seq, len)
}

/// A DATA for packet `seq` (of `len` bytes) answering the REQUEST whose id is `request_id`.
pub fn data_answering(conn_id: u64, request_id: u64, seq: u64, len: usize) -> Vec<u8> {
    let mut b = Vec::new();
    wire::encode_data(
        &mut b,
        &wire::Data {
            conn_id,
            request_id,
            seq,
            payload: &vec![seq as u8; len],
        },
    )
    .unwrap();
    b
}
