//! Property tests: every message type round-trips, and decode rejects every broken datagram.

use pcdn_wire::{
    Bye, CONTENT_ID_LEN, ContentId, DATA_HEADER_LEN, Data, DecodeError, EncodeError, HELLO_LEN, Hello, MAX_DATAGRAM,
    MAX_PAYLOAD, MAX_RANGES, MAX_TOKEN_LEN, Message, RANGE_LEN, REJECT_LEN, Reason, Reject, SeqRange, VERSION, Welcome,
    decode, encode, encode_bye, encode_cancel, encode_data, encode_data_header, encode_hello, encode_reject,
    encode_request, encode_welcome, kind, peek_conn_id,
};
use proptest::collection::vec;
use proptest::prelude::*;

const KINDS: [u8; 7] = [
    kind::HELLO,
    kind::REQUEST,
    kind::CANCEL,
    kind::BYE,
    kind::WELCOME,
    kind::DATA,
    kind::REJECT,
];

const REASONS: [Reason; 7] = [
    Reason::UnknownContent,
    Reason::Overloaded,
    Reason::BadToken,
    Reason::UnsupportedVersion,
    Reason::Malformed,
    Reason::OutOfRange,
    Reason::UnknownConnection,
];

/// A u64 that hits the edges often.
fn any_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        1 => Just(0u64),
        1 => Just(u64::MAX),
        1 => 0u64..256,
        6 => any::<u64>(),
    ]
}

fn token() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => vec(any::<u8>(), MAX_TOKEN_LEN),
        1 => vec(any::<u8>(), 24),
        4 => vec(any::<u8>(), 0..=MAX_TOKEN_LEN),
    ]
}

/// A valid range: at least one sequence number, ending at or before 2^64 - 1.
fn range() -> impl Strategy<Value = SeqRange> {
    let len = prop_oneof![1 => Just(1u32), 1 => Just(u32::MAX), 4 => 1u32..=u32::MAX];
    let start = prop_oneof![1 => Just(u64::MAX - 1), 5 => any_u64()];
    (start, len).prop_map(|(start, len)| {
        let start = start.min(u64::MAX - 1);
        let len = u64::from(len).min(u64::MAX - start) as u32;
        SeqRange { start, len }
    })
}

/// A token and as many valid ranges as fit in one datagram next to `fixed + token` bytes.
fn token_and_ranges(fixed: usize) -> impl Strategy<Value = (Vec<u8>, Vec<SeqRange>)> {
    token().prop_flat_map(move |token| {
        let room = (MAX_DATAGRAM - fixed - token.len()) / RANGE_LEN;
        let max = room.min(MAX_RANGES);
        let ranges = prop_oneof![
            1 => vec(range(), max),
            1 => vec(range(), 1),
            4 => vec(range(), 1..=max),
        ];
        (Just(token), ranges)
    })
}

fn content_id() -> impl Strategy<Value = ContentId> {
    any::<[u8; CONTENT_ID_LEN]>().prop_map(ContentId)
}

fn packet_size() -> impl Strategy<Value = u16> {
    prop_oneof![
        1 => Just(1u16),
        1 => Just(MAX_PAYLOAD as u16),
        4 => 1..=MAX_PAYLOAD as u16,
    ]
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => vec(any::<u8>(), MAX_PAYLOAD),
        1 => Just(Vec::new()),
        4 => vec(any::<u8>(), 0..=MAX_PAYLOAD),
    ]
}

fn reason() -> impl Strategy<Value = Reason> {
    proptest::sample::select(&REASONS[..])
}

/// The encoding of an arbitrary valid datagram of any type.
fn valid_datagram() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (any_u64(), content_id()).prop_map(|(conn_id, content)| {
            let mut out = Vec::new();
            encode_hello(&mut out, &Hello { conn_id, content });
            out
        }),
        (any_u64(), any_u64(), packet_size(), token()).prop_map(|(conn_id, content_length, packet_size, token)| {
            let mut out = Vec::new();
            let w = Welcome {
                conn_id,
                content_length,
                packet_size,
                token: &token,
            };
            encode_welcome(&mut out, &w).unwrap();
            out
        }),
        (any_u64(), any_u64(), token_and_ranges(20)).prop_map(|(conn_id, request_id, (token, ranges))| {
            let mut out = Vec::new();
            encode_request(&mut out, conn_id, &token, request_id, &ranges).unwrap();
            out
        }),
        (any_u64(), token_and_ranges(12)).prop_map(|(conn_id, (token, ranges))| {
            let mut out = Vec::new();
            encode_cancel(&mut out, conn_id, &token, &ranges).unwrap();
            out
        }),
        (any_u64(), token()).prop_map(|(conn_id, token)| {
            let mut out = Vec::new();
            encode_bye(&mut out, &Bye { conn_id, token: &token }).unwrap();
            out
        }),
        (any_u64(), any_u64(), any_u64(), payload()).prop_map(|(conn_id, request_id, seq, payload)| {
            let mut out = Vec::new();
            let d = Data {
                conn_id,
                request_id,
                seq,
                payload: &payload,
            };
            encode_data(&mut out, &d).unwrap();
            out
        }),
        (any_u64(), reason(), any_u64()).prop_map(|(conn_id, reason, request_id)| {
            let mut out = Vec::new();
            encode_reject(
                &mut out,
                &Reject {
                    conn_id,
                    reason,
                    request_id,
                },
            );
            out
        }),
    ]
}

/// Bytes that are often close to a valid datagram, so decode gets past the header.
fn datagram_like_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        2 => vec(any::<u8>(), 0..=MAX_DATAGRAM + 8),
        3 => (proptest::sample::select(&KINDS[..]), vec(any::<u8>(), 0..=200)).prop_map(
            |(t, rest)| {
                let mut out = vec![VERSION, t];
                out.extend(rest);
                out
            }
        ),
        3 => (valid_datagram(), any::<prop::sample::Index>(), any::<u8>()).prop_map(
            |(mut d, i, b)| {
                let i = i.index(d.len());
                d[i] = b;
                d
            }
        ),
    ]
}

/// Checks that a decoded message re-encodes to exactly `bytes`.
fn assert_reencodes(bytes: &[u8], message: &Message<'_>) {
    let mut out = Vec::new();
    encode(&mut out, message).expect("a decoded message encodes");
    assert_eq!(out, bytes);
    assert_eq!(decode(&out).as_ref(), Ok(message));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn hello_round_trips(conn_id in any_u64(), content in content_id()) {
        let hello = Hello { conn_id, content };
        let mut out = Vec::new();
        encode_hello(&mut out, &hello);
        prop_assert_eq!(out.len(), HELLO_LEN);
        prop_assert_eq!(&out[..2], &[VERSION, kind::HELLO]);
        prop_assert_eq!(decode(&out), Ok(Message::Hello(hello)));
        assert_reencodes(&out, &Message::Hello(hello));
    }

    #[test]
    fn welcome_round_trips(
        conn_id in any_u64(),
        content_length in any_u64(),
        packet_size in packet_size(),
        token in token(),
    ) {
        let welcome = Welcome { conn_id, content_length, packet_size, token: &token };
        let mut out = Vec::new();
        encode_welcome(&mut out, &welcome).unwrap();
        prop_assert_eq!(out.len(), 2 + 8 + 8 + 2 + 1 + token.len());
        prop_assert_eq!(&out[..2], &[VERSION, kind::WELCOME]);
        prop_assert_eq!(decode(&out), Ok(Message::Welcome(welcome)));
        assert_reencodes(&out, &Message::Welcome(welcome));
    }

    #[test]
    fn request_round_trips(
        conn_id in any_u64(),
        request_id in any_u64(),
        (token, ranges) in token_and_ranges(2 + 8 + 1 + 8 + 1),
    ) {
        let mut out = Vec::new();
        encode_request(&mut out, conn_id, &token, request_id, &ranges).unwrap();
        prop_assert_eq!(out.len(), 2 + 8 + 1 + token.len() + 8 + 1 + RANGE_LEN * ranges.len());
        prop_assert!(out.len() <= MAX_DATAGRAM);
        prop_assert_eq!(&out[..2], &[VERSION, kind::REQUEST]);
        let message = decode(&out).unwrap();
        let Message::Request(r) = message else {
            panic!("decoded {message:?}");
        };
        prop_assert_eq!(r.conn_id, conn_id);
        prop_assert_eq!(r.token, &token[..]);
        prop_assert_eq!(r.request_id, request_id);
        prop_assert_eq!(r.ranges.len(), ranges.len());
        prop_assert!(!r.ranges.is_empty());
        prop_assert_eq!(r.ranges.iter().collect::<Vec<_>>(), ranges.clone());
        let count: u64 = ranges.iter().map(|r| u64::from(r.len)).sum();
        prop_assert_eq!(r.ranges.seq_count(), count);
        assert_reencodes(&out, &message);
    }

    #[test]
    fn cancel_round_trips(
        conn_id in any_u64(),
        (token, ranges) in token_and_ranges(2 + 8 + 1 + 1),
    ) {
        let mut out = Vec::new();
        encode_cancel(&mut out, conn_id, &token, &ranges).unwrap();
        prop_assert_eq!(out.len(), 2 + 8 + 1 + token.len() + 1 + RANGE_LEN * ranges.len());
        prop_assert!(out.len() <= MAX_DATAGRAM);
        prop_assert_eq!(&out[..2], &[VERSION, kind::CANCEL]);
        let message = decode(&out).unwrap();
        let Message::Cancel(c) = message else {
            panic!("decoded {message:?}");
        };
        prop_assert_eq!(c.conn_id, conn_id);
        prop_assert_eq!(c.token, &token[..]);
        prop_assert_eq!(c.ranges.iter().collect::<Vec<_>>(), ranges);
        assert_reencodes(&out, &message);
    }

    #[test]
    fn bye_round_trips(conn_id in any_u64(), token in token()) {
        let bye = Bye { conn_id, token: &token };
        let mut out = Vec::new();
        encode_bye(&mut out, &bye).unwrap();
        prop_assert_eq!(out.len(), 2 + 8 + 1 + token.len());
        prop_assert_eq!(&out[..2], &[VERSION, kind::BYE]);
        prop_assert_eq!(decode(&out), Ok(Message::Bye(bye)));
        assert_reencodes(&out, &Message::Bye(bye));
    }

    #[test]
    fn data_round_trips(
        conn_id in any_u64(),
        request_id in any_u64(),
        seq in any_u64(),
        payload in payload(),
    ) {
        let data = Data { conn_id, request_id, seq, payload: &payload };
        let mut out = Vec::new();
        encode_data(&mut out, &data).unwrap();
        prop_assert_eq!(out.len(), DATA_HEADER_LEN + payload.len());
        prop_assert_eq!(&out[..2], &[VERSION, kind::DATA]);
        prop_assert_eq!(decode(&out), Ok(Message::Data(data)));
        assert_reencodes(&out, &Message::Data(data));

        // Header then payload by hand gives the same bytes.
        let mut split = Vec::new();
        encode_data_header(&mut split, conn_id, request_id, seq);
        prop_assert_eq!(split.len(), DATA_HEADER_LEN);
        split.extend_from_slice(&payload);
        prop_assert_eq!(split, out);
    }

    #[test]
    fn reject_round_trips(conn_id in any_u64(), reason in reason(), request_id in any_u64()) {
        let reject = Reject { conn_id, reason, request_id };
        let mut out = Vec::new();
        encode_reject(&mut out, &reject);
        prop_assert_eq!(out.len(), REJECT_LEN);
        prop_assert_eq!(&out[..2], &[VERSION, kind::REJECT]);
        prop_assert_eq!(decode(&out), Ok(Message::Reject(reject)));
        assert_reencodes(&out, &Message::Reject(reject));
    }

    /// Encoding appends: bytes already in the buffer stay, and the new bytes are the datagram.
    #[test]
    fn encode_appends(prefix in vec(any::<u8>(), 0..64), datagram in valid_datagram()) {
        let message = decode(&datagram).unwrap();
        let mut out = prefix.clone();
        encode(&mut out, &message).unwrap();
        prop_assert_eq!(&out[..prefix.len()], &prefix[..]);
        prop_assert_eq!(&out[prefix.len()..], &datagram[..]);
    }

    /// Decode never panics, and whatever it accepts re-encodes to the same bytes.
    #[test]
    fn decode_never_panics(bytes in datagram_like_bytes()) {
        if let Ok(message) = decode(&bytes) {
            assert_reencodes(&bytes, &message);
        }
        let _ = peek_conn_id(&bytes);
    }

    /// Every strict prefix of a valid datagram is `Truncated`, except a DATA prefix that
    /// still holds the whole header: that is a valid DATA with a shorter payload.
    #[test]
    fn truncation_is_rejected(datagram in valid_datagram()) {
        let full = decode(&datagram).unwrap();
        for len in 0..datagram.len() {
            let prefix = &datagram[..len];
            match (full, decode(prefix)) {
                (Message::Data(d), Ok(Message::Data(p))) if len >= DATA_HEADER_LEN => {
                    prop_assert_eq!(p.conn_id, d.conn_id);
                    prop_assert_eq!(p.request_id, d.request_id);
                    prop_assert_eq!(p.seq, d.seq);
                    prop_assert_eq!(p.payload, &d.payload[..len - DATA_HEADER_LEN]);
                }
                (_, got) => prop_assert_eq!(got, Err(DecodeError::Truncated), "prefix {}", len),
            }
        }
    }

    /// Any first byte other than 1 is `UnsupportedVersion`, whatever follows.
    #[test]
    fn wrong_version_is_rejected(datagram in valid_datagram(), version in any::<u8>()) {
        prop_assume!(version != VERSION);
        let mut bytes = datagram;
        bytes[0] = version;
        prop_assert_eq!(decode(&bytes), Err(DecodeError::UnsupportedVersion(version)));
        prop_assert_eq!(peek_conn_id(&bytes), None);
        let one = [version];
        prop_assert_eq!(decode(&one), Err(DecodeError::UnsupportedVersion(version)));
    }

    /// Any type byte outside the seven known codes is `UnknownType`, whatever follows.
    #[test]
    fn unknown_type_is_rejected(datagram in valid_datagram(), t in any::<u8>()) {
        prop_assume!(!KINDS.contains(&t));
        let mut bytes = datagram;
        bytes[1] = t;
        prop_assert_eq!(decode(&bytes), Err(DecodeError::UnknownType(t)));
        let header = [VERSION, t];
        prop_assert_eq!(decode(&header), Err(DecodeError::UnknownType(t)));
        prop_assert_eq!(peek_conn_id(&bytes), None);
    }

    /// More than MAX_DATAGRAM bytes is `Oversized`, checked before anything else.
    #[test]
    fn oversized_is_rejected(
        datagram in valid_datagram(),
        extra in vec(any::<u8>(), 1..=2 * MAX_DATAGRAM),
    ) {
        let mut bytes = datagram;
        bytes.extend_from_slice(&extra);
        prop_assume!(bytes.len() > MAX_DATAGRAM);
        prop_assert_eq!(decode(&bytes), Err(DecodeError::Oversized(bytes.len())));
        let padding = vec![0u8; MAX_DATAGRAM + 1];
        prop_assert_eq!(decode(&padding), Err(DecodeError::Oversized(MAX_DATAGRAM + 1)));
    }

    /// Bytes after the last field are `Malformed`, except after DATA, whose payload runs to
    /// the end of the datagram.
    #[test]
    fn trailing_bytes_are_rejected(
        datagram in valid_datagram(),
        extra in vec(any::<u8>(), 1..=64),
    ) {
        let full = decode(&datagram).unwrap();
        let mut bytes = datagram.clone();
        bytes.extend_from_slice(&extra);
        let got = decode(&bytes);
        if bytes.len() > MAX_DATAGRAM {
            prop_assert_eq!(got, Err(DecodeError::Oversized(bytes.len())));
        } else if let Message::Data(d) = full {
            let Ok(Message::Data(p)) = got else {
                panic!("decoded {got:?}");
            };
            prop_assert_eq!(&p.payload[..d.payload.len()], d.payload);
            prop_assert_eq!(&p.payload[d.payload.len()..], &extra[..]);
        } else {
            prop_assert_eq!(got, Err(DecodeError::Malformed("trailing bytes")));
        }
    }

    /// The connection id a REJECT would carry is the datagram's own, even when it is broken.
    #[test]
    fn peek_conn_id_reads_the_header(datagram in valid_datagram(), cut in 0usize..=64) {
        let conn_id = u64::from_be_bytes(datagram[2..10].try_into().unwrap());
        prop_assert_eq!(peek_conn_id(&datagram), Some(conn_id));
        let len = datagram.len().saturating_sub(cut);
        let expected = if len >= 10 { Some(conn_id) } else { None };
        prop_assert_eq!(peek_conn_id(&datagram[..len]), expected);
    }

    /// A token-length byte over 64 is `Malformed`, in every message that carries a token.
    #[test]
    fn long_token_is_rejected(len in (MAX_TOKEN_LEN as u8 + 1)..=u8::MAX, conn_id in any_u64()) {
        let mut tail = vec![len];
        tail.extend(std::iter::repeat_n(0xaa, usize::from(len)));
        tail.extend_from_slice(&[0; 8]); // request id
        tail.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]); // one range
        let welcome_head = [&0u64.to_be_bytes()[..], &100u16.to_be_bytes()[..]].concat();
        for (t, head) in [
            (kind::REQUEST, &[][..]),
            (kind::CANCEL, &[][..]),
            (kind::BYE, &[][..]),
            (kind::WELCOME, &welcome_head[..]),
        ] {
            let mut bytes = vec![VERSION, t];
            bytes.extend_from_slice(&conn_id.to_be_bytes());
            bytes.extend_from_slice(head);
            bytes.extend_from_slice(&tail);
            prop_assert_eq!(
                decode(&bytes),
                Err(DecodeError::Malformed("token longer than 64 bytes"))
            );
        }
    }

    /// Encoders refuse a token over 64 bytes and leave the buffer untouched.
    #[test]
    fn long_token_is_not_encoded(len in MAX_TOKEN_LEN + 1..=300, range in range()) {
        let token = vec![7u8; len];
        let err = Err(EncodeError::TokenTooLong(len));
        let mut out = vec![9u8];
        let w = Welcome { conn_id: 1, content_length: 2, packet_size: 3, token: &token };
        prop_assert_eq!(encode_welcome(&mut out, &w), err);
        prop_assert_eq!(encode_request(&mut out, 1, &token, 2, &[range]), err);
        prop_assert_eq!(encode_cancel(&mut out, 1, &token, &[range]), err);
        prop_assert_eq!(encode_bye(&mut out, &Bye { conn_id: 1, token: &token }), err);
        prop_assert_eq!(out, vec![9u8]);
    }

    /// Encoders refuse ranges that decode would refuse, and leave the buffer untouched.
    #[test]
    fn bad_ranges_are_not_encoded(
        good in vec(range(), 0..=20),
        start in any_u64(),
        at in any::<prop::sample::Index>(),
    ) {
        let token = [1u8; 24];
        let mut out = Vec::new();

        let mut empty = good.clone();
        empty.insert(at.index(good.len() + 1), SeqRange { start, len: 0 });
        prop_assert_eq!(encode_request(&mut out, 1, &token, 2, &empty), Err(EncodeError::EmptyRange));
        prop_assert_eq!(encode_cancel(&mut out, 1, &token, &empty), Err(EncodeError::EmptyRange));

        let start = start.max(u64::MAX - u64::from(u32::MAX) + 1);
        let len = (u64::MAX - start + 1).min(u64::from(u32::MAX)) as u32;
        let mut overflow = good.clone();
        overflow.insert(at.index(good.len() + 1), SeqRange { start, len });
        prop_assert_eq!(
            encode_request(&mut out, 1, &token, 2, &overflow),
            Err(EncodeError::RangeOverflow)
        );
        prop_assert_eq!(encode_cancel(&mut out, 1, &token, &overflow), Err(EncodeError::RangeOverflow));
        prop_assert!(out.is_empty());
    }

    /// WELCOME's packet size must be 1..=MAX_PAYLOAD, on both sides.
    #[test]
    fn bad_packet_size_is_rejected(size in prop_oneof![Just(0u16), MAX_PAYLOAD as u16 + 1..=u16::MAX]) {
        let mut out = Vec::new();
        let w = Welcome { conn_id: 1, content_length: 2, packet_size: size, token: &[] };
        prop_assert_eq!(encode_welcome(&mut out, &w), Err(EncodeError::PacketSize(size)));
        prop_assert!(out.is_empty());

        let mut bytes = vec![VERSION, kind::WELCOME];
        bytes.extend_from_slice(&1u64.to_be_bytes());
        bytes.extend_from_slice(&2u64.to_be_bytes());
        bytes.extend_from_slice(&size.to_be_bytes());
        bytes.push(0);
        prop_assert_eq!(decode(&bytes), Err(DecodeError::Malformed("packet size out of range")));
    }

    /// A REJECT reason code outside 1..=7 is `Malformed`.
    #[test]
    fn unknown_reason_is_rejected(code in prop_oneof![Just(0u8), 8u8..=u8::MAX]) {
        prop_assert_eq!(Reason::from_code(code), None);
        let mut bytes = vec![VERSION, kind::REJECT];
        bytes.extend_from_slice(&5u64.to_be_bytes());
        bytes.push(code);
        bytes.extend_from_slice(&6u64.to_be_bytes());
        prop_assert_eq!(decode(&bytes), Err(DecodeError::Malformed("unknown reject reason")));
    }
}
