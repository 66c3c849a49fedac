//! Unit tests: the worked examples of `docs/protocol.md`, limits, and each error case.

use pcdn_wire::{
    Bye, CONTENT_ID_LEN, ContentId, DATA_HEADER_LEN, Data, DecodeError, EncodeError, HELLO_LEN, Hello, MAX_DATAGRAM,
    MAX_PAYLOAD, MAX_RANGES, MAX_TOKEN_LEN, Message, REJECT_LEN, Reason, Reject, SeqRange, VERSION, Welcome, decode,
    encode, encode_cancel, encode_data, encode_hello, encode_reject, encode_request, encode_welcome, kind,
    peek_conn_id,
};

/// The specification; its worked examples must match the encoder byte for byte.
const PROTOCOL_MD: &str = include_str!("../../../docs/protocol.md");

// The hex strings below appear verbatim in docs/protocol.md, "Worked example".
const HELLO_HEX: &str = "01010123456789abcdef000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const WELCOME_HEX: &str = "01810123456789abcdef00000000000028040400180000000005265c00c0c1c2c3c4c5c6c7c8c9cacbcccdcecf";
const REQUEST_HEX: &str = "01020123456789abcdef180000000005265c00c0c1c2c3c4c5c6c7c8c9cacbcccdcecf000000000000000702000000000000000000000004000000000000000a00000001";
const DATA_HEX: &str = "01820123456789abcdef0000000000000007000000000000000a7063646e";
const REJECT_HEX: &str = "01830123456789abcdef020000000000000007";

const CONN_ID: u64 = 0x0123_4567_89ab_cdef;

/// The example token: expiry 86 400 000 ms, then 16 placeholder MAC bytes c0..cf.
fn example_token() -> Vec<u8> {
    let mut token = 86_400_000u64.to_be_bytes().to_vec();
    token.extend(0xc0..=0xcf);
    token
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks that `bytes` is the documented `expected` hex, that the doc holds it, and that it
/// decodes to `message`.
fn check_example(bytes: &[u8], expected: &str, message: Message<'_>) {
    assert_eq!(hex(bytes), expected);
    assert!(
        PROTOCOL_MD.contains(expected),
        "docs/protocol.md lacks the example {expected}"
    );
    assert_eq!(decode(bytes), Ok(message));
}

#[test]
fn example_hello() {
    let content = ContentId(std::array::from_fn(|i| i as u8));
    let hello = Hello {
        conn_id: CONN_ID,
        content,
    };
    let mut out = Vec::new();
    encode_hello(&mut out, &hello);
    check_example(&out, HELLO_HEX, Message::Hello(hello));
}

#[test]
fn example_welcome() {
    let token = example_token();
    let welcome = Welcome {
        conn_id: CONN_ID,
        content_length: 10_244,
        packet_size: 1024,
        token: &token,
    };
    let mut out = Vec::new();
    encode_welcome(&mut out, &welcome).unwrap();
    check_example(&out, WELCOME_HEX, Message::Welcome(welcome));
}

#[test]
fn example_request() {
    let token = example_token();
    let ranges = [SeqRange { start: 0, len: 4 }, SeqRange { start: 10, len: 1 }];
    let mut out = Vec::new();
    encode_request(&mut out, CONN_ID, &token, 7, &ranges).unwrap();
    assert_eq!(hex(&out), REQUEST_HEX);
    assert!(PROTOCOL_MD.contains(REQUEST_HEX));
    let Ok(Message::Request(r)) = decode(&out) else {
        panic!("not a REQUEST");
    };
    assert_eq!((r.conn_id, r.token, r.request_id), (CONN_ID, &token[..], 7));
    assert_eq!(r.ranges.iter().collect::<Vec<_>>(), ranges);
    assert_eq!(r.ranges.seq_count(), 5);
}

#[test]
fn example_data() {
    let data = Data {
        conn_id: CONN_ID,
        request_id: 7,
        seq: 10,
        payload: b"pcdn",
    };
    let mut out = Vec::new();
    encode_data(&mut out, &data).unwrap();
    check_example(&out, DATA_HEX, Message::Data(data));
}

#[test]
fn example_reject() {
    let reject = Reject {
        conn_id: CONN_ID,
        reason: Reason::Overloaded,
        request_id: 7,
    };
    let mut out = Vec::new();
    encode_reject(&mut out, &reject);
    check_example(&out, REJECT_HEX, Message::Reject(reject));
}

#[test]
fn fixed_lengths() {
    assert_eq!(HELLO_LEN, 42);
    assert_eq!(REJECT_LEN, 19);
    assert_eq!(DATA_HEADER_LEN, 26);
    assert_eq!(MAX_PAYLOAD, 1474);
    assert_eq!(CONTENT_ID_LEN, 32);
}

#[test]
fn short_datagrams_are_truncated() {
    assert_eq!(decode(&[]), Err(DecodeError::Truncated));
    assert_eq!(decode(&[VERSION]), Err(DecodeError::Truncated));
    for t in [
        kind::HELLO,
        kind::REQUEST,
        kind::CANCEL,
        kind::BYE,
        kind::WELCOME,
        kind::DATA,
        kind::REJECT,
    ] {
        assert_eq!(decode(&[VERSION, t]), Err(DecodeError::Truncated));
    }
}

/// A REQUEST header with `token`, request id 1 and a range count byte of `count`.
fn request_head(token: &[u8], count: u8) -> Vec<u8> {
    let mut bytes = vec![VERSION, kind::REQUEST];
    bytes.extend_from_slice(&9u64.to_be_bytes());
    bytes.push(token.len() as u8);
    bytes.extend_from_slice(token);
    bytes.extend_from_slice(&1u64.to_be_bytes());
    bytes.push(count);
    bytes
}

fn push_range(bytes: &mut Vec<u8>, start: u64, len: u32) {
    bytes.extend_from_slice(&start.to_be_bytes());
    bytes.extend_from_slice(&len.to_be_bytes());
}

#[test]
fn zero_ranges_are_malformed() {
    let bytes = request_head(&[], 0);
    assert_eq!(decode(&bytes), Err(DecodeError::Malformed("no sequence ranges")));
    let mut cancel = vec![VERSION, kind::CANCEL];
    cancel.extend_from_slice(&9u64.to_be_bytes());
    cancel.extend_from_slice(&[0, 0]); // empty token, zero ranges
    assert_eq!(decode(&cancel), Err(DecodeError::Malformed("no sequence ranges")));
}

#[test]
fn empty_range_is_malformed() {
    let mut bytes = request_head(&[1, 2], 2);
    push_range(&mut bytes, 5, 1);
    push_range(&mut bytes, 6, 0);
    assert_eq!(decode(&bytes), Err(DecodeError::Malformed("empty sequence range")));
}

#[test]
fn overflowing_range_is_malformed() {
    let mut bytes = request_head(&[], 1);
    push_range(&mut bytes, u64::MAX, 1);
    assert_eq!(decode(&bytes), Err(DecodeError::Malformed("sequence range overflows")));
    let mut bytes = request_head(&[], 1);
    push_range(&mut bytes, u64::MAX - 1, 1);
    let Ok(Message::Request(r)) = decode(&bytes) else {
        panic!("the last sequence number u64::MAX - 1 is valid");
    };
    assert_eq!(
        r.ranges.iter().next(),
        Some(SeqRange {
            start: u64::MAX - 1,
            len: 1
        })
    );
}

#[test]
fn missing_ranges_are_truncated() {
    let mut bytes = request_head(&[], 3);
    push_range(&mut bytes, 0, 1);
    push_range(&mut bytes, 1, 1);
    assert_eq!(decode(&bytes), Err(DecodeError::Truncated));
}

#[test]
fn missing_token_bytes_are_truncated() {
    let mut bytes = vec![VERSION, kind::BYE];
    bytes.extend_from_slice(&9u64.to_be_bytes());
    bytes.push(24);
    bytes.extend_from_slice(&[0; 23]);
    assert_eq!(decode(&bytes), Err(DecodeError::Truncated));
    bytes.push(0);
    assert!(matches!(decode(&bytes), Ok(Message::Bye(_))));
}

#[test]
fn token_of_64_is_the_limit() {
    let token = [0x5a; MAX_TOKEN_LEN];
    let mut out = Vec::new();
    encode(
        &mut out,
        &Message::Bye(Bye {
            conn_id: 1,
            token: &token,
        }),
    )
    .unwrap();
    assert_eq!(
        decode(&out),
        Ok(Message::Bye(Bye {
            conn_id: 1,
            token: &token
        }))
    );
    out[10] = 65;
    out.push(0);
    assert_eq!(decode(&out), Err(DecodeError::Malformed("token longer than 64 bytes")));
}

#[test]
fn largest_request_fits_exactly() {
    let token = [3u8; MAX_TOKEN_LEN];
    // 2 + 8 + 1 + 64 + 8 + 1 = 84 bytes, then 118 ranges of 12 = 1500.
    let ranges: Vec<SeqRange> = (0..118).map(|i| SeqRange { start: i * 10, len: 3 }).collect();
    let mut out = Vec::new();
    encode_request(&mut out, 1, &token, 2, &ranges).unwrap();
    assert_eq!(out.len(), MAX_DATAGRAM);
    let Ok(Message::Request(r)) = decode(&out) else {
        panic!("a 1500-byte REQUEST decodes");
    };
    assert_eq!(r.ranges.len(), 118);

    let mut more = ranges.clone();
    more.push(SeqRange { start: 5000, len: 1 });
    let mut out = Vec::new();
    assert_eq!(
        encode_request(&mut out, 1, &token, 2, &more),
        Err(EncodeError::Oversized(1512))
    );
    assert!(out.is_empty());
}

#[test]
fn range_count_limits_on_encode() {
    let mut out = Vec::new();
    assert_eq!(
        encode_request(&mut out, 1, &[], 2, &[]),
        Err(EncodeError::RangeCount(0))
    );
    assert_eq!(encode_cancel(&mut out, 1, &[], &[]), Err(EncodeError::RangeCount(0)));
    let too_many = vec![SeqRange { start: 0, len: 1 }; MAX_RANGES + 1];
    assert_eq!(
        encode_request(&mut out, 1, &[], 2, &too_many),
        Err(EncodeError::RangeCount(256))
    );
    assert_eq!(
        encode_cancel(&mut out, 1, &[], &too_many),
        Err(EncodeError::RangeCount(256))
    );
    // 255 ranges are allowed by the count byte but need 12 + 3060 bytes as a CANCEL.
    let most = vec![SeqRange { start: 0, len: 1 }; MAX_RANGES];
    assert_eq!(
        encode_cancel(&mut out, 1, &[], &most),
        Err(EncodeError::Oversized(12 + 255 * 12))
    );
    assert!(out.is_empty());
}

#[test]
fn range_errors_on_encode() {
    let mut out = Vec::new();
    let empty = [SeqRange { start: 1, len: 1 }, SeqRange { start: 2, len: 0 }];
    assert_eq!(
        encode_request(&mut out, 1, &[], 2, &empty),
        Err(EncodeError::EmptyRange)
    );
    let overflow = [SeqRange {
        start: u64::MAX,
        len: 1,
    }];
    assert_eq!(
        encode_cancel(&mut out, 1, &[], &overflow),
        Err(EncodeError::RangeOverflow)
    );
    let last = [SeqRange {
        start: u64::MAX - 1,
        len: 1,
    }];
    assert_eq!(encode_cancel(&mut out, 1, &[], &last), Ok(()));
}

#[test]
fn data_payload_limits() {
    let payload = vec![0xee; MAX_PAYLOAD + 1];
    let mut out = Vec::new();
    let data = Data {
        conn_id: 1,
        request_id: 2,
        seq: 3,
        payload: &payload[..MAX_PAYLOAD],
    };
    encode_data(&mut out, &data).unwrap();
    assert_eq!(out.len(), MAX_DATAGRAM);
    assert_eq!(decode(&out), Ok(Message::Data(data)));

    let mut out = Vec::new();
    let data = Data {
        payload: &payload,
        ..data
    };
    assert_eq!(
        encode_data(&mut out, &data),
        Err(EncodeError::Oversized(MAX_DATAGRAM + 1))
    );
    assert!(out.is_empty());

    // An empty payload is well-formed; whether it is the right length is the receiver's call.
    let empty = Data { payload: &[], ..data };
    encode_data(&mut out, &empty).unwrap();
    assert_eq!(decode(&out), Ok(Message::Data(empty)));
}

#[test]
fn packet_size_limits() {
    for size in [1, MAX_PAYLOAD as u16] {
        let welcome = Welcome {
            conn_id: 1,
            content_length: 0,
            packet_size: size,
            token: &[],
        };
        let mut out = Vec::new();
        encode_welcome(&mut out, &welcome).unwrap();
        assert_eq!(decode(&out), Ok(Message::Welcome(welcome)));
    }
}

#[test]
fn oversized_wins_over_other_errors() {
    let bytes = vec![0xff; MAX_DATAGRAM + 1];
    assert_eq!(decode(&bytes), Err(DecodeError::Oversized(MAX_DATAGRAM + 1)));
    let mut data = vec![VERSION, kind::DATA];
    data.resize(MAX_DATAGRAM, 0);
    assert!(matches!(decode(&data), Ok(Message::Data(_))));
    data.push(0);
    assert_eq!(decode(&data), Err(DecodeError::Oversized(MAX_DATAGRAM + 1)));
}

#[test]
fn reason_codes_round_trip() {
    for code in 0..=u8::MAX {
        match Reason::from_code(code) {
            Some(reason) => {
                assert!((1..=7).contains(&code));
                assert_eq!(reason as u8, code);
            }
            None => assert!(code == 0 || code > 7),
        }
    }
}

#[test]
fn decode_errors_map_to_reject_reasons() {
    assert_eq!(DecodeError::UnsupportedVersion(2).reason(), Reason::UnsupportedVersion);
    for e in [
        DecodeError::Truncated,
        DecodeError::Oversized(1501),
        DecodeError::UnknownType(9),
        DecodeError::Malformed("x"),
    ] {
        assert_eq!(e.reason(), Reason::Malformed);
    }
}

#[test]
fn peek_conn_id_cases() {
    let bytes = hex_bytes(REQUEST_HEX);
    assert_eq!(peek_conn_id(&bytes), Some(CONN_ID));
    assert_eq!(peek_conn_id(&bytes[..10]), Some(CONN_ID));
    assert_eq!(peek_conn_id(&bytes[..9]), None);
    let mut other_version = bytes.clone();
    other_version[0] = 2;
    assert_eq!(peek_conn_id(&other_version), None);
    let mut unknown_type = bytes;
    unknown_type[1] = 0x7f;
    assert_eq!(peek_conn_id(&unknown_type), None);
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn documented_examples_decode() {
    for h in [HELLO_HEX, WELCOME_HEX, REQUEST_HEX, DATA_HEX, REJECT_HEX] {
        let bytes = hex_bytes(h);
        let message = decode(&bytes).unwrap();
        let mut out = Vec::new();
        encode(&mut out, &message).unwrap();
        assert_eq!(out, bytes);
    }
}

#[test]
fn errors_display() {
    assert_eq!(
        DecodeError::Oversized(1600).to_string(),
        "datagram of 1600 bytes exceeds the 1500-byte limit"
    );
    assert_eq!(DecodeError::UnknownType(0x7f).to_string(), "unknown datagram type 0x7f");
    assert_eq!(
        EncodeError::PacketSize(0).to_string(),
        "packet size 0 is outside 1..=1474"
    );
    assert_eq!(
        EncodeError::TokenTooLong(65).to_string(),
        "token of 65 bytes exceeds 64"
    );
}
