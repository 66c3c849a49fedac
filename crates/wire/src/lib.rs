//! pcdn wire protocol v1: every datagram's format, encoded and decoded without I/O.
//!
//! The byte-by-byte specification is `docs/protocol.md`. Every datagram starts with the
//! same two bytes, `version` and `type`. Decoding never panics: a malformed, truncated,
//! oversized or unknown-version datagram yields a [`DecodeError`], from which the receiver
//! decides to answer with a [`Reject`] or to drop it.
//!
//! ```
//! use pcdn_wire::{Message, SeqRange, decode, encode_request};
//!
//! let mut datagram = Vec::new();
//! let ranges = [SeqRange { start: 0, len: 4 }, SeqRange { start: 10, len: 1 }];
//! encode_request(&mut datagram, 0x0123_4567_89ab_cdef, b"token", 7, &ranges).unwrap();
//! let Ok(Message::Request(request)) = decode(&datagram) else { unreachable!() };
//! assert_eq!(request.request_id, 7);
//! assert_eq!(request.ranges.iter().collect::<Vec<_>>(), ranges);
//! assert_eq!(request.ranges.seq_count(), 5);
//! ```

mod codec;
pub mod rendezvous;

use codec::{Reader, check_token, put_token};

/// The protocol version this crate speaks.
pub const VERSION: u8 = 1;
/// Largest datagram either side sends or accepts, in bytes.
pub const MAX_DATAGRAM: usize = 1500;
/// Length of a content id (a BLAKE3 hash), in bytes.
pub const CONTENT_ID_LEN: usize = 32;
/// Largest address-validation token, in bytes.
pub const MAX_TOKEN_LEN: usize = 64;

/// A content's identity: the BLAKE3 hash of its bytes (or of its manifest).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct ContentId(pub [u8; CONTENT_ID_LEN]);

/// A half-open range of sequence numbers `[start, start + len)`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SeqRange {
    pub start: u64,
    pub len: u32,
}

/// Why a server refused a datagram.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Reason {
    UnknownContent = 1,
    Overloaded = 2,
    BadToken = 3,
    UnsupportedVersion = 4,
    Malformed = 5,
    /// The requested sequence number is past the end of the content.
    OutOfRange = 6,
    /// The server does not know this connection (expired or never opened).
    UnknownConnection = 7,
}

impl Reason {
    /// The reason for a code read off the wire, if the code is known.
    pub fn from_code(code: u8) -> Option<Reason> {
        Some(match code {
            1 => Reason::UnknownContent,
            2 => Reason::Overloaded,
            3 => Reason::BadToken,
            4 => Reason::UnsupportedVersion,
            5 => Reason::Malformed,
            6 => Reason::OutOfRange,
            7 => Reason::UnknownConnection,
            _ => return None,
        })
    }
}

/// Datagram type codes. Client-to-server types have the high bit clear.
pub mod kind {
    pub const HELLO: u8 = 0x01;
    pub const REQUEST: u8 = 0x02;
    pub const CANCEL: u8 = 0x03;
    pub const BYE: u8 = 0x04;
    pub const WELCOME: u8 = 0x81;
    pub const DATA: u8 = 0x82;
    pub const REJECT: u8 = 0x83;
}

/// Bytes before the payload of a DATA datagram.
pub const DATA_HEADER_LEN: usize = 2 + 8 + 8 + 8;
/// Largest DATA payload that fits in [`MAX_DATAGRAM`].
pub const MAX_PAYLOAD: usize = MAX_DATAGRAM - DATA_HEADER_LEN;
/// Bytes one sequence range takes in a REQUEST or CANCEL.
pub const RANGE_LEN: usize = 12;
/// Most sequence ranges one REQUEST or CANCEL carries (its count field is one byte); the
/// [`MAX_DATAGRAM`] limit may allow fewer.
pub const MAX_RANGES: usize = 255;
/// Length of a HELLO datagram, in bytes (it has no variable part).
pub const HELLO_LEN: usize = 2 + 8 + CONTENT_ID_LEN;
/// Length of a REJECT datagram, in bytes (it has no variable part). A receiver answers an
/// undecodable datagram with a REJECT only if the datagram is at least this long.
pub const REJECT_LEN: usize = 2 + 8 + 1 + 8;

/// Client → server: open a connection for one content.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Hello {
    pub conn_id: u64,
    pub content: ContentId,
}

/// Server → client: the connection is open; present `token` on every later datagram.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Welcome<'a> {
    pub conn_id: u64,
    pub content_length: u64,
    pub packet_size: u16,
    pub token: &'a [u8],
}

/// Client → server: send the DATA packets of these sequence numbers, in this order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Request<'a> {
    pub conn_id: u64,
    pub token: &'a [u8],
    pub request_id: u64,
    pub ranges: Ranges<'a>,
}

/// Client → server: forget these sequence numbers if they are still queued.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Cancel<'a> {
    pub conn_id: u64,
    pub token: &'a [u8],
    pub ranges: Ranges<'a>,
}

/// Client → server: close the connection.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Bye<'a> {
    pub conn_id: u64,
    pub token: &'a [u8],
}

/// Server → client: one packet of content, answering `request_id`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Data<'a> {
    pub conn_id: u64,
    pub request_id: u64,
    pub seq: u64,
    pub payload: &'a [u8],
}

/// Server → client: a datagram was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Reject {
    pub conn_id: u64,
    pub reason: Reason,
    /// The refused request, or 0 when the refusal is not about one request.
    pub request_id: u64,
}

/// One decoded datagram. Borrowed fields point into the datagram.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Message<'a> {
    Hello(Hello),
    Request(Request<'a>),
    Cancel(Cancel<'a>),
    Bye(Bye<'a>),
    Welcome(Welcome<'a>),
    Data(Data<'a>),
    Reject(Reject),
}

/// The sequence ranges of a decoded REQUEST or CANCEL, read lazily from the datagram.
/// Decoding has already checked that there are 1..=255 well-formed ranges.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Ranges<'a> {
    raw: &'a [u8],
}

impl<'a> Ranges<'a> {
    /// Number of ranges.
    pub fn len(&self) -> usize {
        self.raw.len() / RANGE_LEN
    }
    /// Always false for ranges from [`decode`], which requires at least one range.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }
    /// Total number of sequence numbers over all ranges.
    pub fn seq_count(&self) -> u64 {
        self.iter().map(|r| u64::from(r.len)).sum()
    }
    /// The ranges in datagram order.
    pub fn iter(&self) -> impl Iterator<Item = SeqRange> + Clone + 'a {
        self.raw.chunks_exact(RANGE_LEN).map(|c| SeqRange {
            start: u64::from_be_bytes(c[0..8].try_into().expect("8 bytes")),
            len: u32::from_be_bytes(c[8..12].try_into().expect("4 bytes")),
        })
    }
}

/// Why a datagram could not be decoded.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("datagram ends before its last field")]
    Truncated,
    #[error("datagram of {0} bytes exceeds the {MAX_DATAGRAM}-byte limit")]
    Oversized(usize),
    #[error("unsupported protocol version {0}")]
    UnsupportedVersion(u8),
    #[error("unknown datagram type {0:#04x}")]
    UnknownType(u8),
    #[error("malformed datagram: {0}")]
    Malformed(&'static str),
}

impl DecodeError {
    /// The reason a server gives when it answers this error with a REJECT.
    pub fn reason(&self) -> Reason {
        match self {
            DecodeError::UnsupportedVersion(_) => Reason::UnsupportedVersion,
            _ => Reason::Malformed,
        }
    }
}

/// Why a message could not be encoded.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("token of {0} bytes exceeds {MAX_TOKEN_LEN}")]
    TokenTooLong(usize),
    #[error("{0} ranges; a datagram carries 1 to 255")]
    RangeCount(usize),
    #[error("a range must ask for at least one sequence number")]
    EmptyRange,
    #[error("a range must end at or before sequence number 2^64 - 1")]
    RangeOverflow,
    #[error("packet size {0} is outside 1..={MAX_PAYLOAD}")]
    PacketSize(u16),
    #[error("encoded datagram would be {0} bytes, over {MAX_DATAGRAM}")]
    Oversized(usize),
}

/// Sequence ranges to put in a REQUEST or CANCEL being encoded.
pub type RangeList<'a> = &'a [SeqRange];

/// Appends a HELLO datagram to `out`.
pub fn encode_hello(out: &mut Vec<u8>, hello: &Hello) {
    out.extend_from_slice(&[VERSION, kind::HELLO]);
    out.extend_from_slice(&hello.conn_id.to_be_bytes());
    out.extend_from_slice(&hello.content.0);
}

/// Appends a WELCOME datagram to `out`.
pub fn encode_welcome(out: &mut Vec<u8>, welcome: &Welcome<'_>) -> Result<(), EncodeError> {
    check_token(welcome.token)?;
    if welcome.packet_size == 0 || usize::from(welcome.packet_size) > MAX_PAYLOAD {
        return Err(EncodeError::PacketSize(welcome.packet_size));
    }
    out.extend_from_slice(&[VERSION, kind::WELCOME]);
    out.extend_from_slice(&welcome.conn_id.to_be_bytes());
    out.extend_from_slice(&welcome.content_length.to_be_bytes());
    out.extend_from_slice(&welcome.packet_size.to_be_bytes());
    put_token(out, welcome.token);
    Ok(())
}

/// Appends a REQUEST datagram asking for `ranges` to `out`.
pub fn encode_request(
    out: &mut Vec<u8>,
    conn_id: u64,
    token: &[u8],
    request_id: u64,
    ranges: RangeList<'_>,
) -> Result<(), EncodeError> {
    put_request(out, conn_id, token, request_id, ranges.iter().copied())
}

/// Appends a CANCEL datagram for `ranges` to `out`.
pub fn encode_cancel(out: &mut Vec<u8>, conn_id: u64, token: &[u8], ranges: RangeList<'_>) -> Result<(), EncodeError> {
    put_cancel(out, conn_id, token, ranges.iter().copied())
}

/// Appends a BYE datagram to `out`.
pub fn encode_bye(out: &mut Vec<u8>, bye: &Bye<'_>) -> Result<(), EncodeError> {
    check_token(bye.token)?;
    out.extend_from_slice(&[VERSION, kind::BYE]);
    out.extend_from_slice(&bye.conn_id.to_be_bytes());
    put_token(out, bye.token);
    Ok(())
}

/// Appends the header of a DATA datagram to `out`; the caller appends the payload
/// (at most [`MAX_PAYLOAD`] bytes) right after, so content is copied once.
pub fn encode_data_header(out: &mut Vec<u8>, conn_id: u64, request_id: u64, seq: u64) {
    out.extend_from_slice(&[VERSION, kind::DATA]);
    out.extend_from_slice(&conn_id.to_be_bytes());
    out.extend_from_slice(&request_id.to_be_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
}

/// Appends a whole DATA datagram to `out`.
pub fn encode_data(out: &mut Vec<u8>, data: &Data<'_>) -> Result<(), EncodeError> {
    let len = DATA_HEADER_LEN + data.payload.len();
    if len > MAX_DATAGRAM {
        return Err(EncodeError::Oversized(len));
    }
    encode_data_header(out, data.conn_id, data.request_id, data.seq);
    out.extend_from_slice(data.payload);
    Ok(())
}

/// Appends a REJECT datagram to `out`.
pub fn encode_reject(out: &mut Vec<u8>, reject: &Reject) {
    out.extend_from_slice(&[VERSION, kind::REJECT]);
    out.extend_from_slice(&reject.conn_id.to_be_bytes());
    out.push(reject.reason as u8);
    out.extend_from_slice(&reject.request_id.to_be_bytes());
}

/// Encodes any message into `out` (appending). DATA goes through [`encode_data`].
pub fn encode(out: &mut Vec<u8>, message: &Message<'_>) -> Result<(), EncodeError> {
    match message {
        Message::Hello(m) => {
            encode_hello(out, m);
            Ok(())
        }
        Message::Welcome(m) => encode_welcome(out, m),
        Message::Request(m) => put_request(out, m.conn_id, m.token, m.request_id, m.ranges.iter()),
        Message::Cancel(m) => put_cancel(out, m.conn_id, m.token, m.ranges.iter()),
        Message::Bye(m) => encode_bye(out, m),
        Message::Data(m) => encode_data(out, m),
        Message::Reject(m) => {
            encode_reject(out, m);
            Ok(())
        }
    }
}

fn put_request<I>(out: &mut Vec<u8>, conn_id: u64, token: &[u8], request_id: u64, ranges: I) -> Result<(), EncodeError>
where
    I: Iterator<Item = SeqRange> + Clone,
{
    check_token(token)?;
    let count = check_ranges(ranges.clone(), 2 + 8 + 1 + token.len() + 8 + 1)?;
    out.extend_from_slice(&[VERSION, kind::REQUEST]);
    out.extend_from_slice(&conn_id.to_be_bytes());
    put_token(out, token);
    out.extend_from_slice(&request_id.to_be_bytes());
    put_ranges(out, count, ranges);
    Ok(())
}

fn put_cancel<I>(out: &mut Vec<u8>, conn_id: u64, token: &[u8], ranges: I) -> Result<(), EncodeError>
where
    I: Iterator<Item = SeqRange> + Clone,
{
    check_token(token)?;
    let count = check_ranges(ranges.clone(), 2 + 8 + 1 + token.len() + 1)?;
    out.extend_from_slice(&[VERSION, kind::CANCEL]);
    out.extend_from_slice(&conn_id.to_be_bytes());
    put_token(out, token);
    put_ranges(out, count, ranges);
    Ok(())
}

/// Checks what decoding will check, plus the datagram size; returns the range count.
/// `fixed` is the datagram length without the ranges.
fn check_ranges(ranges: impl Iterator<Item = SeqRange>, fixed: usize) -> Result<usize, EncodeError> {
    let mut count = 0;
    let mut empty = false;
    let mut overflow = false;
    for r in ranges {
        count += 1;
        empty |= r.len == 0;
        overflow |= r.start.checked_add(u64::from(r.len)).is_none();
    }
    if count == 0 || count > MAX_RANGES {
        return Err(EncodeError::RangeCount(count));
    }
    if empty {
        return Err(EncodeError::EmptyRange);
    }
    if overflow {
        return Err(EncodeError::RangeOverflow);
    }
    let len = fixed + count * RANGE_LEN;
    if len > MAX_DATAGRAM {
        return Err(EncodeError::Oversized(len));
    }
    Ok(count)
}

fn put_ranges(out: &mut Vec<u8>, count: usize, ranges: impl Iterator<Item = SeqRange>) {
    debug_assert!((1..=MAX_RANGES).contains(&count));
    out.push(count as u8);
    for r in ranges {
        out.extend_from_slice(&r.start.to_be_bytes());
        out.extend_from_slice(&r.len.to_be_bytes());
    }
}

/// The content protocol's own field: a count, then that many sequence ranges (§3).
impl<'a> Reader<'a> {
    fn ranges(&mut self) -> Result<Ranges<'a>, DecodeError> {
        let count = usize::from(self.u8()?);
        if count == 0 {
            return Err(DecodeError::Malformed("no sequence ranges"));
        }
        let raw = self.take(count * RANGE_LEN)?;
        let ranges = Ranges { raw };
        for r in ranges.iter() {
            if r.len == 0 {
                return Err(DecodeError::Malformed("empty sequence range"));
            }
            if r.start.checked_add(u64::from(r.len)).is_none() {
                return Err(DecodeError::Malformed("sequence range overflows"));
            }
        }
        Ok(ranges)
    }
}

/// The connection id of a datagram that may not decode, for the REJECT that answers it:
/// the `conn_id` field (bytes 2..10) when the datagram has version [`VERSION`], a known type
/// and at least 10 bytes, else `None` (answer with connection id 0).
pub fn peek_conn_id(datagram: &[u8]) -> Option<u64> {
    match datagram {
        [VERSION, t, id @ ..] if id.len() >= 8 && is_known_kind(*t) => {
            Some(u64::from_be_bytes(id[..8].try_into().expect("8 bytes")))
        }
        _ => None,
    }
}

fn is_known_kind(t: u8) -> bool {
    matches!(
        t,
        kind::HELLO | kind::REQUEST | kind::CANCEL | kind::BYE | kind::WELCOME | kind::DATA | kind::REJECT
    )
}

/// Decodes one datagram. Never panics, whatever the input.
///
/// Checks in this order: length over [`MAX_DATAGRAM`] ([`DecodeError::Oversized`]), version
/// byte, type byte, then fields front to back; bytes left after the last field are
/// [`DecodeError::Malformed`]. A DATA datagram's payload is everything after its header,
/// possibly empty.
pub fn decode(datagram: &[u8]) -> Result<Message<'_>, DecodeError> {
    if datagram.len() > MAX_DATAGRAM {
        return Err(DecodeError::Oversized(datagram.len()));
    }
    let mut r = Reader::new(datagram);
    let version = r.u8()?;
    if version != VERSION {
        return Err(DecodeError::UnsupportedVersion(version));
    }
    let message = match r.u8()? {
        kind::HELLO => {
            let conn_id = r.u64()?;
            let content = ContentId(r.take(CONTENT_ID_LEN)?.try_into().expect("32 bytes"));
            Message::Hello(Hello { conn_id, content })
        }
        kind::REQUEST => {
            let conn_id = r.u64()?;
            let token = r.token()?;
            let request_id = r.u64()?;
            let ranges = r.ranges()?;
            Message::Request(Request {
                conn_id,
                token,
                request_id,
                ranges,
            })
        }
        kind::CANCEL => {
            let conn_id = r.u64()?;
            let token = r.token()?;
            let ranges = r.ranges()?;
            Message::Cancel(Cancel { conn_id, token, ranges })
        }
        kind::BYE => {
            let conn_id = r.u64()?;
            let token = r.token()?;
            Message::Bye(Bye { conn_id, token })
        }
        kind::WELCOME => {
            let conn_id = r.u64()?;
            let content_length = r.u64()?;
            let packet_size = r.u16()?;
            if packet_size == 0 || usize::from(packet_size) > MAX_PAYLOAD {
                return Err(DecodeError::Malformed("packet size out of range"));
            }
            let token = r.token()?;
            Message::Welcome(Welcome {
                conn_id,
                content_length,
                packet_size,
                token,
            })
        }
        kind::DATA => {
            let conn_id = r.u64()?;
            let request_id = r.u64()?;
            let seq = r.u64()?;
            let payload = std::mem::take(&mut r.buf);
            Message::Data(Data {
                conn_id,
                request_id,
                seq,
                payload,
            })
        }
        kind::REJECT => {
            let conn_id = r.u64()?;
            let reason = Reason::from_code(r.u8()?).ok_or(DecodeError::Malformed("unknown reject reason"))?;
            let request_id = r.u64()?;
            Message::Reject(Reject {
                conn_id,
                reason,
                request_id,
            })
        }
        other => return Err(DecodeError::UnknownType(other)),
    };
    r.finish()?;
    Ok(message)
}
