//! Links files: the committed example loads, errors name the file, relay and field, and relays
//! built from a file forward datagrams.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use pcdn_emulate::{load_config, parse_config, spawn_relay};
use pcdn_sim::{Blackout, GilbertElliott, Loss, QueueLimit, Rate};

fn example() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/links-example.toml")
}

#[test]
fn the_example_links_file_loads() {
    let relays = load_config(&example(), None).unwrap();
    assert_eq!(relays.len(), 3);
    let edge = &relays[1];
    assert_eq!(edge.listen, "127.0.0.1:7901".parse().unwrap());
    assert_eq!(edge.to, "127.0.0.1:7801".parse().unwrap());
    assert_eq!(edge.down.rate, Rate::Fixed(4_000_000));
    assert_eq!(edge.down.loss, Loss::Bernoulli(0.01));
    assert_eq!(edge.down.queue, QueueLimit::packets(50));
    assert_eq!(edge.up.rate, Rate::Fixed(1_000_000));
    assert_eq!(edge.seed, 2);
    let flaky = &relays[2];
    assert_eq!(
        flaky.down.loss,
        Loss::GilbertElliott(GilbertElliott::gilbert(0.01, 0.25))
    );
    let s = |secs| pcdn_core::time::Instant::ZERO + Duration::from_secs(secs);
    assert_eq!(flaky.down.blackouts, vec![Blackout::new(s(20), s(22))]);
    assert_eq!(flaky.down.changes[0].at, s(30));
    assert_eq!(flaky.idle_timeout, Duration::from_secs(30));
}

#[test]
fn errors_name_the_file_the_relay_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("links.toml");
    let good = std::fs::read_to_string(example()).unwrap();
    let bad = good.replacen("loss = 0.01", "loss = \"lots\"", 1);
    assert_ne!(good, bad);
    std::fs::write(&path, bad).unwrap();
    let e = load_config(&path, None).unwrap_err().to_string();
    let line = good.lines().position(|l| l == "loss = 0.01").unwrap() + 1;
    let want = format!("{}:{line}: relay.1.down.loss: ", path.display());
    assert!(e.starts_with(&want), "{e}\nshould start with {want}");

    std::fs::write(&path, good.replacen("rate = \"6mbit\"", "rate = \"6mbps\"", 1)).unwrap();
    let e = load_config(&path, None).unwrap_err().to_string();
    assert!(e.contains("relay.2.down.rate: ") && e.contains("ambiguous"), "{e}");

    let e = load_config(&dir.path().join("missing.toml"), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.toml") && e.contains("cannot read"), "{e}");
}

#[test]
fn trace_files_resolve_from_the_links_files_folder() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("edge.trace"), "1\n2\n").unwrap();
    let text = "[[relay]]\nlisten = \"127.0.0.1:0\"\nto = \"127.0.0.1:9\"\n\
                down = { rate = { trace_file = \"edge.trace\" } }\n";
    let relays = parse_config(text, "links.toml", dir.path(), None).unwrap();
    match &relays[0].down.rate {
        Rate::Trace(t) => assert_eq!(t.timestamps_ms(), &[1, 2]),
        other => panic!("trace not read: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_from_a_file_forward_to_their_own_servers() {
    let (first, second) = (Echo::start().await, Echo::start().await);
    let text = format!(
        "[[relay]]\nlisten = \"127.0.0.1:0\"\nto = \"{}\"\ndown = {{ rate = \"20mbit\", delay = \"5ms\" }}\n\
         [[relay]]\nlisten = \"127.0.0.1:0\"\nto = \"{}\"\ndown = {{ delay = \"1ms\", loss = 0 }}\n",
        first.addr, second.addr
    );
    let mut handles = Vec::new();
    for config in parse_config(&text, "links.toml", Path::new("."), None).unwrap() {
        handles.push(spawn_relay(config).await.unwrap());
    }
    let client = udp().await;
    for (i, h) in handles.iter().enumerate() {
        client.send_to(&[i as u8], h.local_addr()).await.unwrap();
        let mut buf = [0u8; 8];
        let (n, from) = tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf))
            .await
            .expect("an echo")
            .unwrap();
        assert_eq!((&buf[..n], from), (&[i as u8][..], h.local_addr()));
    }
    assert_eq!((first.total(), second.total()), (1, 1));
}
