//! Fuzz target `decode`: decoding never panics, and every accepted datagram re-encodes to itself
//! (content datagrams and rendezvous datagrams alike).

#![no_main]

use libfuzzer_sys::fuzz_target;
use pcdn_wire::{decode, encode, peek_conn_id, rendezvous};

fuzz_target!(|datagram: &[u8]| {
    let _ = peek_conn_id(datagram);
    if let Ok(message) = decode(datagram) {
        let mut out = Vec::new();
        encode(&mut out, &message).expect("a decoded message encodes");
        assert_eq!(out, datagram, "re-encoding differs from the input");
        assert_eq!(decode(&out), Ok(message), "re-encoding decodes differently");
        assert_eq!(peek_conn_id(datagram).is_some(), datagram.len() >= 10);
    }
    if let Ok(message) = rendezvous::decode(datagram) {
        assert!(rendezvous::is_rendezvous(datagram));
        let mut out = Vec::new();
        rendezvous::encode(&mut out, &message).expect("a decoded rendezvous message encodes");
        assert_eq!(out, datagram, "re-encoding a rendezvous message differs from the input");
        assert_eq!(rendezvous::decode(&out), Ok(message));
        assert!(decode(datagram).is_err(), "a datagram decodes as both protocols");
    }
});
