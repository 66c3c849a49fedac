//! The rendezvous datagrams (docs/protocol.md §11): worked examples, round trips, errors.

use std::net::SocketAddr;

use pcdn_wire::rendezvous::{self, BindStatus, Rendezvous, is_rendezvous};
use pcdn_wire::{DecodeError, EncodeError, MAX_TOKEN_LEN, decode as decode_content};
use proptest::prelude::*;

const PROTOCOL_MD: &str = include_str!("../../../docs/protocol.md");

// These hex strings appear verbatim in docs/protocol.md §11.4.
const BIND_HEX: &str = "01100123456789abcdef04a0a1a2a3";
const BOUND_HEX: &str = "01900123456789abcdef0204fb01ea12d54300";
const PUNCH_REQUEST_HEX: &str = "019204a0a1a2a3043dbae721c045";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn encoded(message: &Rendezvous<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    rendezvous::encode(&mut out, message).unwrap();
    out
}

fn check_example(message: Rendezvous<'_>, expected: &str) {
    let bytes = encoded(&message);
    assert_eq!(hex(&bytes), expected);
    assert!(
        PROTOCOL_MD.contains(expected),
        "docs/protocol.md lacks the example {expected}"
    );
    assert_eq!(rendezvous::decode(&bytes), Ok(message));
    assert!(is_rendezvous(&bytes));
    // The content protocol's decoder refuses it, so a server never mistakes it for its own.
    assert!(matches!(decode_content(&bytes), Err(DecodeError::UnknownType(_))));
}

#[test]
fn worked_examples_match_the_spec() {
    let token = [0xa0, 0xa1, 0xa2, 0xa3];
    check_example(
        Rendezvous::Bind {
            txn: 0x0123_4567_89ab_cdef,
            token: &token,
        },
        BIND_HEX,
    );
    check_example(
        Rendezvous::Bound {
            txn: 0x0123_4567_89ab_cdef,
            status: BindStatus::ReachablePunch,
            mapped: "203.0.113.1:55827".parse().unwrap(),
            token: &[],
        },
        BOUND_HEX,
    );
    check_example(
        Rendezvous::PunchRequest {
            token: &token,
            peer: "198.51.100.7:7336".parse().unwrap(),
        },
        PUNCH_REQUEST_HEX,
    );
}

#[test]
fn probe_proofs_depend_on_token_and_nonce() {
    let a = rendezvous::probe_proof(b"token one", 1);
    assert_eq!(a, rendezvous::probe_proof(b"token one", 1));
    assert_ne!(a, rendezvous::probe_proof(b"token two", 1));
    assert_ne!(a, rendezvous::probe_proof(b"token one", 2));
}

#[test]
fn the_mapped_address_is_xored_with_the_cookie() {
    // An ALG rewriting 203.0.113.1 in payloads must not find it in the datagram.
    let bytes = encoded(&Rendezvous::Bound {
        txn: 1,
        status: BindStatus::Bound,
        mapped: "203.0.113.1:7800".parse().unwrap(),
        token: &[],
    });
    assert!(!bytes.windows(4).any(|w| w == [203, 0, 113, 1]));
    assert!(!bytes.windows(2).any(|w| w == 7800u16.to_be_bytes()));
}

#[test]
fn errors_are_named() {
    assert_eq!(rendezvous::decode(&[]), Err(DecodeError::Truncated));
    assert_eq!(rendezvous::decode(&[2, 0x10]), Err(DecodeError::UnsupportedVersion(2)));
    assert_eq!(rendezvous::decode(&[1, 0x01]), Err(DecodeError::UnknownType(0x01)));
    assert_eq!(rendezvous::decode(&[1, 0x12, 0, 0, 0]), Err(DecodeError::Truncated));
    let mut punch = encoded(&Rendezvous::Punch { nonce: 9 });
    punch.push(0);
    assert_eq!(
        rendezvous::decode(&punch),
        Err(DecodeError::Malformed("trailing bytes"))
    );
    let mut bound = hex_bytes(BOUND_HEX);
    bound[10] = 77;
    assert_eq!(
        rendezvous::decode(&bound),
        Err(DecodeError::Malformed("unknown bind status"))
    );
    let mut bound = hex_bytes(BOUND_HEX);
    bound[11] = 5;
    assert_eq!(
        rendezvous::decode(&bound),
        Err(DecodeError::Malformed("address family is neither 4 nor 6"))
    );
    let mut bind = vec![1, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 65];
    bind.extend([0; 65]);
    assert_eq!(
        rendezvous::decode(&bind),
        Err(DecodeError::Malformed("token longer than 64 bytes"))
    );
    assert_eq!(rendezvous::decode(&[1; 1501]), Err(DecodeError::Oversized(1501)));
    let long = [0u8; MAX_TOKEN_LEN + 1];
    let mut out = Vec::new();
    assert_eq!(
        rendezvous::encode(&mut out, &Rendezvous::Bind { txn: 0, token: &long }),
        Err(EncodeError::TokenTooLong(65))
    );
    assert!(out.is_empty());
    assert!(!is_rendezvous(&hex_bytes("01010123")));
    assert!(!is_rendezvous(&[1]));
}

fn hex_bytes(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

fn any_addr() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::from((ip, port))),
        (any::<[u8; 16]>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::from((ip, port))),
    ]
}

proptest! {
    #[test]
    fn every_message_round_trips(
        txn in any::<u64>(),
        token in proptest::collection::vec(any::<u8>(), 0..=MAX_TOKEN_LEN),
        addr in any_addr(),
        status in 0u8..=5,
        which in 0usize..6,
    ) {
        let status = BindStatus::from_code(status).unwrap();
        let message = match which {
            0 => Rendezvous::Bind { txn, token: &token },
            1 => Rendezvous::ProbeAck { nonce: txn, proof: &token },
            2 => Rendezvous::Punch { nonce: txn },
            3 => Rendezvous::Bound { txn, status, mapped: addr, token: &token },
            4 => Rendezvous::Probe { nonce: txn },
            _ => Rendezvous::PunchRequest { token: &token, peer: addr },
        };
        let bytes = encoded(&message);
        prop_assert!(is_rendezvous(&bytes));
        prop_assert_eq!(rendezvous::decode(&bytes), Ok(message));
        // Every strict prefix is refused.
        for cut in 0..bytes.len() {
            prop_assert!(rendezvous::decode(&bytes[..cut]).is_err());
        }
    }

    #[test]
    fn decoding_never_panics_and_accepted_input_re_encodes(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        if let Ok(message) = rendezvous::decode(&bytes) {
            prop_assert_eq!(encoded(&message), bytes);
        }
    }
}
