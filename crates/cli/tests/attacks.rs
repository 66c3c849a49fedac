//! Attacks on `pcdn serve` as a process, watched through what it writes to stderr.

mod common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use common::{Proc, add, free_udp, pcdn};
use pcdn_core::wire::{self, ContentId, Message};

fn hello(conn_id: u64, content: ContentId) -> Vec<u8> {
    let mut out = Vec::new();
    wire::encode_hello(&mut out, &wire::Hello { conn_id, content });
    out
}

#[test]
fn ten_thousand_hellos_for_a_broken_content_log_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("content.bin");
    std::fs::write(&file, vec![7u8; 100_000]).unwrap();
    let id_hex = add(&[file.as_os_str()], &store);
    let id = ContentId(std::array::from_fn(|i| {
        u8::from_str_radix(&id_hex[2 * i..2 * i + 2], 16).unwrap()
    }));
    // A manifest that no longer decodes.
    std::fs::write(store.join("contents").join(&id_hex).join("manifest"), b"not a manifest").unwrap();

    let addr = free_udp();
    let mut serve = Proc::spawn(
        "pcdn serve",
        pcdn()
            .args(["serve", "--listen", &addr.to_string(), "--store"])
            .arg(&store),
    );
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut buf = [0u8; 2048];
    // Up once a HELLO is answered (REJECT UnknownContent: the content is not served).
    let start = Instant::now();
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "pcdn serve did not answer: {}",
            serve.stderr_tail()
        );
        socket.send_to(&hello(0, id), addr).unwrap();
        if let Ok(n) = socket.recv(&mut buf) {
            match wire::decode(&buf[..n]) {
                Ok(Message::Reject(r)) => assert_eq!(r.reason, wire::Reason::UnknownContent),
                other => panic!("expected REJECT UnknownContent, got {other:?}"),
            }
            break;
        }
    }
    socket.set_nonblocking(true).unwrap();
    let mut answers = 0;
    for conn_id in 1..=10_000u64 {
        socket.send_to(&hello(conn_id, id), addr).unwrap();
        if conn_id % 50 == 0 {
            // Paced a little, so the server's socket buffer keeps up on a loaded machine.
            std::thread::sleep(Duration::from_millis(1));
            while socket.recv(&mut buf).is_ok() {
                answers += 1;
            }
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    while socket.recv(&mut buf).is_ok() {
        answers += 1;
    }
    serve.terminate();
    let log = serve.stderr_all();
    let lines = log.lines().filter(|l| l.contains("content not served")).count();
    eprintln!(
        "{answers} REJECTs for 10,000 HELLOs; {lines} log lines about it, {} bytes of log in all",
        log.len()
    );
    assert!(answers >= 5_000, "the HELLOs reached the server: {answers} answers");
    assert!(lines >= 1, "the fault is logged: {log}");
    // The first occurrence, and at most one more if the flood crossed a minute.
    assert!(lines <= 2, "{lines} lines: {}", &log[..log.len().min(2000)]);
}
