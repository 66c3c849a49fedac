//! The server's Prometheus endpoint reports what the server did.

mod common;

use common::Lab;
use pcdn_net::{ServerConfig, fetch, spawn_server};

/// The value of the sample `name` whose labels contain `label`, in Prometheus text.
fn sample(text: &str, name: &str, label: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_endpoint_counts_traffic_sessions_and_rejects() {
    let lab = Lab::new(500_000, 0);
    let mut config = ServerConfig::new(&lab.origin_store, "127.0.0.1:0".parse().unwrap());
    config.origin = true;
    config.id = Some("origin-1".to_owned());
    config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let server = spawn_server(config).await.unwrap();
    let metrics_url = format!("http://{}/metrics", server.metrics_addr().unwrap());

    let output = lab.out_dir().join("x");
    fetch(lab.fetch_config(&output, &[], &[&server])).await.unwrap();
    // A HELLO for a content the server lacks earns a REJECT.
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut hello = Vec::new();
    pcdn_core::wire::encode_hello(
        &mut hello,
        &pcdn_core::wire::Hello {
            conn_id: 1,
            content: pcdn_core::wire::ContentId([9; 32]),
        },
    );
    socket.send_to(&hello, server.local_addr()).await.unwrap();
    let mut buf = [0u8; 64];
    tokio::time::timeout(std::time::Duration::from_secs(5), socket.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();

    let device = "device=\"origin-1\"";
    let mut text = String::new();
    for _ in 0..200 {
        text = reqwest::get(&metrics_url).await.unwrap().text().await.unwrap();
        if sample(&text, "pcdn_server_rejects_total", "unknown_content").is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let packets = sample(&text, "pcdn_server_data_packets_out_total", device).unwrap();
    assert!(packets >= (500_000f64 / 1024.0).ceil(), "{text}");
    assert!(sample(&text, "pcdn_server_bytes_out_total", device).unwrap() > 500_000.0);
    assert!(sample(&text, "pcdn_server_datagrams_in_total", device).unwrap() > 1.0);
    assert_eq!(sample(&text, "pcdn_server_sessions_opened_total", device), Some(1.0));
    assert_eq!(
        sample(&text, "pcdn_server_rejects_total", "reason=\"unknown_content\""),
        Some(1.0),
        "{text}"
    );
    assert!(text.contains("pcdn_server_upload_bps"));
    server.shutdown().await.unwrap();
    assert!(
        reqwest::get(&metrics_url).await.is_err(),
        "the endpoint stops with the server"
    );
}
