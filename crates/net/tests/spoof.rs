//! A real server socket never answers an address that has not shown a valid token with more
//! than 3× the bytes it received from that address (RFC 9000 §8), whatever it is sent.

use std::net::SocketAddr;
use std::time::Duration;

use pcdn_core::wire::{self, ContentId};
use pcdn_net::{ServerConfig, Store, spawn_server};
use tokio::net::UdpSocket;

/// Sends `datagrams` from a fresh socket, one at a time, and collects every answer until the
/// server has been quiet for a while. Returns (bytes sent, answers).
async fn send_and_count(server: SocketAddr, datagrams: &[Vec<u8>]) -> (usize, Vec<Vec<u8>>) {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut sent = 0;
    let mut answers = Vec::new();
    let mut buf = vec![0u8; 65536];
    for d in datagrams {
        socket.send_to(d, server).await.unwrap();
        sent += d.len();
        // Drain whatever came back so far; a lost answer only makes the count smaller.
        while let Ok(Ok((n, _))) = tokio::time::timeout(Duration::from_millis(20), socket.recv_from(&mut buf)).await {
            answers.push(buf[..n].to_vec());
        }
    }
    while let Ok(Ok((n, _))) = tokio::time::timeout(Duration::from_millis(300), socket.recv_from(&mut buf)).await {
        answers.push(buf[..n].to_vec());
    }
    (sent, answers)
}

fn hello(conn_id: u64, content: ContentId) -> Vec<u8> {
    let mut out = Vec::new();
    wire::encode_hello(&mut out, &wire::Hello { conn_id, content });
    out
}

fn request(conn_id: u64, token: &[u8], ranges: &[wire::SeqRange]) -> Vec<u8> {
    let mut out = Vec::new();
    wire::encode_request(&mut out, conn_id, token, 1, ranges).unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unvalidated_address_gets_at_most_three_times_what_it_sent() {
    let tmp = tempfile::tempdir().unwrap();
    let store_dir = tmp.path().join("store");
    let file = tmp.path().join("content");
    std::fs::write(&file, vec![0x5a; 300_000]).unwrap();
    let content = Store::open(&store_dir).unwrap().add(&file).unwrap();
    let server = spawn_server(ServerConfig::new(&store_dir, "127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let addr = server.local_addr();

    // Everything a spoofer can send without ever reading a WELCOME: HELLOs (which are
    // answered), REQUESTs and a BYE with forged tokens for the whole content, garbage of every
    // size, including one-byte datagrams whose smallest answer would be 19× larger.
    let everything = [wire::SeqRange { start: 0, len: 293 }];
    let forged_token = [0xabu8; 56];
    let mut datagrams = Vec::new();
    for conn_id in 0..20u64 {
        datagrams.push(hello(conn_id, content));
        datagrams.push(request(conn_id, &forged_token, &everything));
        datagrams.push(request(conn_id, &[], &everything));
    }
    datagrams.push(hello(99, ContentId([1; 32])));
    for len in [1usize, 2, 5, 10, 40, 100] {
        datagrams.push(vec![wire::VERSION; len]);
    }
    let mut bye = Vec::new();
    wire::encode_bye(
        &mut bye,
        &wire::Bye {
            conn_id: 3,
            token: &forged_token,
        },
    )
    .unwrap();
    datagrams.push(bye);

    let (sent, answers) = send_and_count(addr, &datagrams).await;
    let received: usize = answers.iter().map(Vec::len).sum();
    assert!(!answers.is_empty(), "HELLOs for a held content are answered");
    assert!(
        received <= 3 * sent,
        "the server sent {received} bytes to an address that sent {sent}"
    );
    for answer in &answers {
        assert_ne!(
            answer.get(1),
            Some(&wire::kind::DATA),
            "content went to an unvalidated address"
        );
    }

    // The same holds for each datagram on its own: a lone one-byte datagram gets nothing back.
    let (sent, answers) = send_and_count(addr, &[vec![wire::VERSION]]).await;
    assert_eq!(sent, 1);
    assert!(answers.is_empty(), "a 1-byte datagram was answered with {answers:?}");
    let stats = server.stats();
    assert!(stats.dropped >= 2, "answers withheld: {}", stats.dropped);
    assert_eq!(stats.sessions, 0);
    assert_eq!(stats.data_packets_out, 0);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validated_client_gets_its_data() {
    // The control for the test above: the same server does send content once the token is real.
    let tmp = tempfile::tempdir().unwrap();
    let store_dir = tmp.path().join("store");
    let file = tmp.path().join("content");
    let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&file, &data).unwrap();
    let content = Store::open(&store_dir).unwrap().add(&file).unwrap();
    let server = spawn_server(ServerConfig::new(&store_dir, "127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.send_to(&hello(7, content), server.local_addr()).await.unwrap();
    let mut buf = vec![0u8; 2048];
    let (n, _) = tokio::time::timeout(Duration::from_secs(5), socket.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let token = match wire::decode(&buf[..n]).unwrap() {
        wire::Message::Welcome(w) => {
            assert_eq!((w.content_length, w.packet_size), (5000, 1024));
            w.token.to_vec()
        }
        other => panic!("expected WELCOME, got {other:?}"),
    };
    socket
        .send_to(
            &request(7, &token, &[wire::SeqRange { start: 0, len: 5 }]),
            server.local_addr(),
        )
        .await
        .unwrap();
    let mut got = vec![None; 5];
    while got.iter().any(Option::is_none) {
        let (n, _) = tokio::time::timeout(Duration::from_secs(5), socket.recv_from(&mut buf))
            .await
            .unwrap()
            .unwrap();
        if let wire::Message::Data(d) = wire::decode(&buf[..n]).unwrap() {
            got[d.seq as usize] = Some(d.payload.to_vec());
        }
    }
    let joined: Vec<u8> = got.into_iter().flatten().flatten().collect();
    assert_eq!(joined, data);
    // The loop publishes its counters right after a send: wait for that, not for a time.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while server.stats().data_packets_out < 5 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(server.stats().data_packets_out, 5);
    server.shutdown().await.unwrap();
}
