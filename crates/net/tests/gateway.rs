//! `pcdn play`'s HTTP gateway over a real TCP socket: range requests (RFC 9110 §14), HEAD, 416,
//! HLS files, and readers that wait for bytes the download has not delivered yet.

use pcdn_core::manifest::{Container, VideoFile, VideoInfo};
use pcdn_core::wire::ContentId;
use pcdn_net::play::{ContentBuffer, GatewayContent, router};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT_RANGES, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, ETAG, IF_RANGE, RANGE};

const ID: ContentId = ContentId([0xab; 32]);

fn sample(len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    blake3::Hasher::new().update(b"gateway").finalize_xof().fill(&mut out);
    out
}

/// Serves `content` on 127.0.0.1; returns the base URL.
async fn start(content: GatewayContent) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router(content)).await.unwrap() });
    format!("http://{addr}")
}

fn content_url(base: &str) -> String {
    format!("{base}/content/{}", hex::encode(ID.0))
}

async fn get(url: &str, range: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new().get(url);
    if let Some(range) = range {
        request = request.header(RANGE, range);
    }
    request.send().await.unwrap()
}

fn header(response: &reqwest::Response, name: reqwest::header::HeaderName) -> String {
    response
        .headers()
        .get(&name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn ranges_of_a_delivered_content() {
    let data = sample(100_000);
    let (mut buffer, content) = ContentBuffer::new(ID, data.len() as u64, None).unwrap();
    buffer.append(&data).unwrap();
    let base = start(content).await;
    let url = content_url(&base);

    let whole = get(&url, None).await;
    assert_eq!(whole.status(), StatusCode::OK);
    assert_eq!(header(&whole, ACCEPT_RANGES), "bytes");
    assert_eq!(header(&whole, CONTENT_TYPE), "application/octet-stream");
    assert_eq!(header(&whole, CONTENT_LENGTH), "100000");
    let etag = header(&whole, ETAG);
    assert_eq!(whole.bytes().await.unwrap(), data);

    let from_zero = get(&url, Some("bytes=0-")).await;
    assert_eq!(from_zero.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(header(&from_zero, CONTENT_RANGE), "bytes 0-99999/100000");
    assert_eq!(from_zero.bytes().await.unwrap(), data);

    let middle = get(&url, Some("bytes=1000-1999")).await;
    assert_eq!(middle.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(header(&middle, CONTENT_RANGE), "bytes 1000-1999/100000");
    assert_eq!(header(&middle, CONTENT_LENGTH), "1000");
    assert_eq!(middle.bytes().await.unwrap(), data[1000..2000]);

    let suffix = get(&url, Some("bytes=-500")).await;
    assert_eq!(suffix.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(header(&suffix, CONTENT_RANGE), "bytes 99500-99999/100000");
    assert_eq!(suffix.bytes().await.unwrap(), data[99_500..]);

    let clipped = get(&url, Some("bytes=99990-200000")).await;
    assert_eq!(header(&clipped, CONTENT_RANGE), "bytes 99990-99999/100000");
    assert_eq!(clipped.bytes().await.unwrap(), data[99_990..]);

    for past_end in ["bytes=100000-", "bytes=200000-300000", "bytes=-0"] {
        let refused = get(&url, Some(past_end)).await;
        assert_eq!(refused.status(), StatusCode::RANGE_NOT_SATISFIABLE, "{past_end}");
        assert_eq!(header(&refused, CONTENT_RANGE), "bytes */100000", "{past_end}");
        assert!(refused.bytes().await.unwrap().is_empty());
    }

    // Several ranges, or a range whose If-Range names another version: the whole content.
    let several = get(&url, Some("bytes=0-1,5-6")).await;
    assert_eq!(several.status(), StatusCode::OK);
    let stale = reqwest::Client::new()
        .get(&url)
        .header(RANGE, "bytes=10-19")
        .header(IF_RANGE, "\"another-version\"")
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), StatusCode::OK);
    let current = reqwest::Client::new()
        .get(&url)
        .header(RANGE, "bytes=10-19")
        .header(IF_RANGE, &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(current.status(), StatusCode::PARTIAL_CONTENT);

    let head = reqwest::Client::new()
        .head(&url)
        .header(RANGE, "bytes=10-19")
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(header(&head, CONTENT_LENGTH), "10");
    assert_eq!(header(&head, CONTENT_RANGE), "bytes 10-19/100000");
    assert!(head.bytes().await.unwrap().is_empty());

    let other = get(&format!("{base}/content/{}", "cd".repeat(32)), None).await;
    assert_eq!(other.status(), StatusCode::NOT_FOUND);
    assert!(other.text().await.unwrap().contains(&hex::encode(ID.0)));
}

#[tokio::test]
async fn concurrent_readers_wait_for_the_bytes_they_need() {
    let data = sample(1_000_000);
    let (mut buffer, content) = ContentBuffer::new(ID, data.len() as u64, None).unwrap();
    let base = start(content).await;
    let url = content_url(&base);
    let ranges = [
        None,
        Some((0u64, 999_999u64)),
        Some((500_000, 500_099)),
        Some((999_000, 999_999)),
        Some((123_456, 654_321)),
        Some((0, 0)),
    ];
    let readers: Vec<_> = ranges
        .iter()
        .map(|range| {
            let url = url.clone();
            let range = range.map(|(a, b)| format!("bytes={a}-{b}"));
            tokio::spawn(async move {
                let response = get(&url, range.as_deref()).await;
                response.bytes().await.unwrap().to_vec()
            })
        })
        .collect();
    // The download delivers in uneven pieces; nobody can finish before its last byte exists.
    let mut at = 0;
    for piece in [1, 4095, 100_000, 300_000, 95_904, 400_000, 99_000, 1000] {
        tokio::task::yield_now().await;
        assert!(
            !readers[3].is_finished(),
            "the reader of the last 1000 bytes finished with {at} bytes delivered"
        );
        buffer.append(&data[at..at + piece]).unwrap();
        at += piece;
    }
    assert_eq!(at, data.len());
    for (reader, range) in readers.into_iter().zip(ranges) {
        let body = reader.await.unwrap();
        let (a, b) = range.map_or((0, data.len() - 1), |(a, b)| (a as usize, b as usize));
        assert!(body == data[a..=b], "range {range:?}: {} bytes differ", body.len());
    }
}

#[tokio::test]
async fn a_failed_download_fails_the_readers_waiting_for_more() {
    let data = sample(10_000);
    let (mut buffer, content) = ContentBuffer::new(ID, data.len() as u64, None).unwrap();
    let base = start(content).await;
    let url = content_url(&base);
    buffer.append(&data[..4000]).unwrap();
    // Bytes that arrived stay servable.
    assert_eq!(
        get(&url, Some("bytes=0-3999")).await.bytes().await.unwrap(),
        data[..4000]
    );
    let waiting = tokio::spawn({
        let url = url.clone();
        // The failure may cut the response before or after its head: an error either way.
        async move {
            match reqwest::get(&url).await {
                Ok(response) => response.bytes().await.map(|b| b.len()),
                Err(e) => Err(e),
            }
        }
    });
    tokio::task::yield_now().await;
    buffer.fail("every server failed");
    assert!(
        waiting.await.unwrap().is_err(),
        "a body cut short must not look complete"
    );
}

#[tokio::test]
async fn hls_files_are_served_from_the_table_with_their_types() {
    let playlist = b"#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\nseg0.ts\n#EXTINF:2.0,\nseg1.ts\n#EXT-X-ENDLIST\n";
    let seg0 = sample(5000);
    let seg1 = sample(7000);
    let mut data = playlist.to_vec();
    data.extend_from_slice(&seg0);
    data.extend_from_slice(&seg1);
    let p = playlist.len() as u64;
    let video = VideoInfo {
        bitrate_bps: 48_000,
        duration_ms: 4000,
        container: Container::Hls,
        files: vec![
            VideoFile {
                name: "index.m3u8".to_owned(),
                offset: 0,
                length: p,
            },
            VideoFile {
                name: "seg0.ts".to_owned(),
                offset: p,
                length: 5000,
            },
            VideoFile {
                name: "seg1.ts".to_owned(),
                offset: p + 5000,
                length: 7000,
            },
        ],
    };
    video.validate(data.len() as u64).unwrap();
    let (mut buffer, content) = ContentBuffer::new(ID, data.len() as u64, Some(video)).unwrap();
    assert_eq!(
        content.media_path(),
        format!("/content/{}/index.m3u8", hex::encode(ID.0))
    );
    let base = start(content).await;
    let url = content_url(&base);
    let seg1_reader = tokio::spawn({
        let url = format!("{url}/seg1.ts");
        async move {
            let response = get(&url, Some("bytes=6000-")).await;
            let range = header(&response, CONTENT_RANGE);
            (range, response.bytes().await.unwrap())
        }
    });
    buffer.append(&data).unwrap();

    let list = get(&format!("{url}/index.m3u8"), None).await;
    assert_eq!(list.status(), StatusCode::OK);
    assert_eq!(header(&list, CONTENT_TYPE), "application/vnd.apple.mpegurl");
    assert_eq!(list.bytes().await.unwrap(), playlist.as_slice());
    let segment = get(&format!("{url}/seg0.ts"), None).await;
    assert_eq!(header(&segment, CONTENT_TYPE), "video/mp2t");
    assert_eq!(segment.bytes().await.unwrap(), seg0);
    let (range, tail) = seg1_reader.await.unwrap();
    assert_eq!(range, "bytes 6000-6999/7000");
    assert_eq!(tail, seg1[6000..]);
    let past = get(&format!("{url}/seg1.ts"), Some("bytes=7000-")).await;
    assert_eq!(past.status(), StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(header(&past, CONTENT_RANGE), "bytes */7000");
    assert_eq!(
        get(&format!("{url}/seg9.ts"), None).await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get(&format!("{url}/..%2Fkey"), None).await.status(),
        StatusCode::NOT_FOUND
    );

    let page = get(&format!("{base}/player/{}", hex::encode(ID.0)), None).await;
    assert_eq!(page.status(), StatusCode::OK);
    let page = page.text().await.unwrap();
    assert!(page.contains("<video") && page.contains("index.m3u8"), "{page}");
    let status: serde_json::Value = get(&format!("{base}/status"), None).await.json().await.unwrap();
    assert_eq!(status["done"], true);
    assert_eq!(status["delivered"], data.len());
}

/// A publisher's file name is text, never markup: the player page escapes it, its script runs
/// only with the page's nonce, and no answer may be sniffed into HTML. (The manifest decoder
/// refuses such a name; this is the page's own defence, for a table that got past it.)
#[tokio::test]
async fn a_markup_file_name_is_inert_on_the_player_page() {
    let evil = "\"><img src=x onerror=alert(1)><script>alert(2)</script>.m3u8";
    let playlist = b"#EXTM3U\n#EXTINF:2.0,\nseg0.ts\n#EXT-X-ENDLIST\n";
    let p = playlist.len() as u64;
    let video = VideoInfo {
        bitrate_bps: 48_000,
        duration_ms: 2000,
        container: Container::Hls,
        files: vec![
            VideoFile {
                name: evil.to_owned(),
                offset: 0,
                length: p,
            },
            VideoFile {
                name: "seg0.ts".to_owned(),
                offset: p,
                length: 100,
            },
        ],
    };
    assert!(video.validate(p + 100).is_err(), "the decoder's rule refuses the name");
    let (_buffer, content) = ContentBuffer::new(ID, p + 100, Some(video)).unwrap();
    let base = start(content).await;
    let page = get(&format!("{base}/player/{}", hex::encode(ID.0)), None).await;
    assert_eq!(page.status(), StatusCode::OK);
    let policy = header(&page, reqwest::header::CONTENT_SECURITY_POLICY);
    assert_eq!(header(&page, reqwest::header::X_CONTENT_TYPE_OPTIONS), "nosniff");
    let html = page.text().await.unwrap();
    assert!(
        !html.contains("<img") && !html.contains("alert(2)</script>"),
        "markup from the manifest reached the page:\n{html}"
    );
    assert!(
        html.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(2)&lt;/script&gt;.m3u8"),
        "the name is shown escaped:\n{html}"
    );
    // One script element, carrying the nonce the policy names; no inline script runs otherwise.
    let nonce = policy
        .split("'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .unwrap_or_else(|| panic!("no script nonce in {policy}"));
    assert!(nonce.len() >= 22, "{policy}");
    assert!(policy.contains(&format!("script-src 'nonce-{nonce}'")), "{policy}");
    assert_eq!(html.matches("<script").count(), 1, "{html}");
    assert!(html.contains(&format!("<script nonce=\"{nonce}\">")), "{html}");
    let again = get(&format!("{base}/player/{}", hex::encode(ID.0)), None).await;
    assert_ne!(
        header(&again, reqwest::header::CONTENT_SECURITY_POLICY),
        policy,
        "a fresh nonce per page"
    );
    let bytes = get(&content_url(&base), None).await;
    assert_eq!(header(&bytes, reqwest::header::X_CONTENT_TYPE_OPTIONS), "nosniff");
}
