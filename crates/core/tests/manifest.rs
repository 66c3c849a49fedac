//! Manifests: block hashing, the canonical encoding, signatures and tamper detection.

use pcdn_core::ed25519_dalek::SigningKey;
use pcdn_core::manifest::{
    Container, DEFAULT_BLOCK_SIZE, DEFAULT_PACKET_SIZE, HEADER_LEN, MAGIC, MAGIC_V2, SIGNATURE_TRAILER_LEN, VideoFile,
    VideoInfo,
};
use pcdn_core::{Manifest, ManifestError, SignedManifest};
use proptest::prelude::*;

fn content(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

#[test]
fn blocks_cover_the_content_and_the_last_may_be_partial() {
    let data = content(10_000, 1);
    let m = Manifest::from_bytes(&data, 100, 4000).unwrap();
    assert_eq!(m.length, 10_000);
    assert_eq!(m.block_count(), 3);
    assert_eq!(m.block_hashes.len(), 3);
    assert_eq!(m.block_range(0), 0..4000);
    assert_eq!(m.block_range(2), 8000..10_000);
    assert_eq!(m.block_range(3), 10_000..10_000);
    assert_eq!(m.packets_per_block(), 40);
    assert_eq!(m.block_seqs(2), 80..100);
    assert_eq!(m.block_of_seq(79), 1);
    assert_eq!(m.block_hashes[2], *blake3::hash(&data[8000..]).as_bytes());
    for block in 0..3 {
        let r = m.block_range(block);
        assert!(m.verify_block(block, &data[r.start as usize..r.end as usize]));
    }
    // Wrong bytes, wrong length, wrong block, past the end.
    let mut bad = data[8000..].to_vec();
    bad[5] ^= 1;
    assert!(!m.verify_block(2, &bad));
    assert!(!m.verify_block(2, &data[8000..9999]));
    assert!(!m.verify_block(1, &data[8000..]));
    assert!(!m.verify_block(3, &[]));
}

#[test]
fn a_length_that_is_a_multiple_of_the_block_has_no_extra_block() {
    let data = content(8000, 2);
    let m = Manifest::from_bytes(&data, 100, 4000).unwrap();
    assert_eq!(m.block_count(), 2);
    assert_eq!(m.block_range(1), 4000..8000);
}

#[test]
fn empty_content_has_no_block_and_round_trips() {
    let m = Manifest::from_bytes(&[], DEFAULT_PACKET_SIZE, DEFAULT_BLOCK_SIZE).unwrap();
    assert_eq!(m.block_count(), 0);
    assert!(m.block_hashes.is_empty());
    assert_eq!(m.encode_body().len(), HEADER_LEN);
    assert!(!m.verify_block(0, &[]));
    let signed = SignedManifest::sign(m.clone(), &key(3));
    let decoded = SignedManifest::decode(&signed.encode()).unwrap();
    assert_eq!(decoded, signed);
    decoded.verify().unwrap();
    assert_eq!(decoded.content_id(), m.content_id());
}

#[test]
fn bad_sizes_are_refused() {
    assert_eq!(
        Manifest::builder(1024, 1000).unwrap_err(),
        ManifestError::BadBlockSize {
            block_size: 1000,
            packet_size: 1024
        }
    );
    assert!(matches!(
        Manifest::builder(1024, 0),
        Err(ManifestError::BadBlockSize { .. })
    ));
    assert!(matches!(
        Manifest::builder(0, 1024),
        Err(ManifestError::BadPacketSize { packet_size: 0 })
    ));
    assert!(matches!(
        Manifest::from_bytes(b"x", 1475, 1475),
        Err(ManifestError::BadPacketSize { .. })
    ));
    assert!(Manifest::builder(1474, 1474 * 3).is_ok());
    let err = Manifest::builder(1024, 1000).unwrap_err().to_string();
    assert!(
        err.contains("block_size 1000") && err.contains("packet_size 1024"),
        "{err}"
    );
    assert!(matches!(
        Manifest::new(5000, 100, 1000, vec![[0; 32]; 4]),
        Err(ManifestError::HashCount { .. })
    ));
    assert!(Manifest::new(5000, 100, 1000, vec![[0; 32]; 5]).is_ok());
}

#[test]
fn body_layout_is_as_documented() {
    let data = content(5000, 4);
    let m = Manifest::from_bytes(&data, 1000, 2000).unwrap();
    let body = m.encode_body();
    assert_eq!(&body[0..8], &MAGIC);
    assert_eq!(&body[8..16], &5000u64.to_be_bytes());
    assert_eq!(&body[16..20], &1000u32.to_be_bytes());
    assert_eq!(&body[20..24], &2000u32.to_be_bytes());
    assert_eq!(&body[24..32], &3u64.to_be_bytes());
    assert_eq!(&body[32..64], blake3::hash(&data[..2000]).as_bytes());
    assert_eq!(&body[96..128], blake3::hash(&data[4000..]).as_bytes());
    assert_eq!(body.len(), 128);
    assert_eq!(m.content_id().0, *blake3::hash(&body).as_bytes());
    let signed = SignedManifest::sign(m, &key(5));
    let encoded = signed.encode();
    assert_eq!(encoded.len(), 128 + SIGNATURE_TRAILER_LEN);
    assert_eq!(&encoded[..128], &body[..]);
    assert_eq!(&encoded[128..160], &key(5).verifying_key().to_bytes());
    // The signature is over the domain-separated body, not the bare body.
    let mut message = b"pcdn manifest v1\0".to_vec();
    message.extend_from_slice(&body);
    let signature = pcdn_core::ed25519_dalek::Signature::from_bytes(&signed.signature);
    key(5).verifying_key().verify_strict(&message, &signature).unwrap();
    assert!(key(5).verifying_key().verify_strict(&body, &signature).is_err());
}

#[test]
fn the_id_does_not_depend_on_the_signer_but_on_the_cut() {
    let data = content(3000, 6);
    let m = Manifest::from_bytes(&data, 100, 1000).unwrap();
    let a = SignedManifest::sign(m.clone(), &key(7));
    let b = SignedManifest::sign(m.clone(), &key(8));
    assert_ne!(a.encode(), b.encode());
    assert_eq!(a.content_id(), b.content_id());
    assert_ne!(
        Manifest::from_bytes(&data, 100, 500).unwrap().content_id(),
        m.content_id()
    );
    assert_ne!(
        Manifest::from_bytes(&data, 50, 1000).unwrap().content_id(),
        m.content_id()
    );
}

#[test]
fn a_signature_from_another_key_fails() {
    let m = Manifest::from_bytes(&content(3000, 9), 100, 1000).unwrap();
    let mut signed = SignedManifest::sign(m, &key(10));
    signed.signer = key(11).verifying_key().to_bytes();
    assert_eq!(signed.verify(), Err(ManifestError::BadSignature));
    // The identity point is a small-order (weak) key.
    let mut identity = [0u8; 32];
    identity[0] = 1;
    signed.signer = identity;
    assert_eq!(signed.verify(), Err(ManifestError::BadSignerKey));
}

#[test]
fn decoding_is_strict() {
    let m = Manifest::from_bytes(&content(3000, 12), 100, 1000).unwrap();
    let good = SignedManifest::sign(m, &key(13)).encode();
    let mut trailing = good.clone();
    trailing.push(0);
    assert_eq!(
        SignedManifest::decode(&trailing),
        Err(ManifestError::TrailingBytes { extra: 1 })
    );
    assert!(matches!(
        SignedManifest::decode(&good[..good.len() - 1]),
        Err(ManifestError::Truncated { .. })
    ));
    assert!(matches!(
        SignedManifest::decode(&good[..4]),
        Err(ManifestError::Truncated { .. })
    ));
    assert_eq!(
        SignedManifest::decode(b"PCDNMAN3-and-more-bytes-past-the-header"),
        Err(ManifestError::BadMagic)
    );
    // A hash count that disagrees with the length.
    let mut count = good.clone();
    count[31] = 2;
    assert!(matches!(
        SignedManifest::decode(&count),
        Err(ManifestError::HashCount {
            found: 2,
            expected: 3,
            ..
        })
    ));
    // A huge length with a matching huge count is refused as truncated, without allocating.
    let mut huge = good.clone();
    huge[8..16].copy_from_slice(&u64::MAX.to_be_bytes());
    huge[24..32].copy_from_slice(&u64::MAX.div_ceil(1000).to_be_bytes());
    assert!(matches!(
        SignedManifest::decode(&huge),
        Err(ManifestError::Truncated { .. })
    ));
    for len in 0..good.len() {
        assert!(
            SignedManifest::decode(&good[..len]).is_err(),
            "prefix of {len} bytes decoded"
        );
    }
}

proptest! {
    #[test]
    fn round_trip(len in 0usize..20_000, seed: u8, packet_size in 1u32..=1474, per_block in 1u32..40, key_seed: u8) {
        let data = content(len, seed);
        let m = Manifest::from_bytes(&data, packet_size, packet_size * per_block).unwrap();
        prop_assert_eq!(m.block_count(), m.block_hashes.len() as u64);
        let signed = SignedManifest::sign(m, &key(key_seed));
        let encoded = signed.encode();
        let decoded = SignedManifest::decode(&encoded).unwrap();
        prop_assert_eq!(&decoded, &signed);
        prop_assert_eq!(decoded.encode(), encoded);
        prop_assert!(decoded.verify().is_ok());
        for block in 0..decoded.manifest.block_count() {
            let r = decoded.manifest.block_range(block);
            prop_assert!(decoded.manifest.verify_block(block, &data[r.start as usize..r.end as usize]));
        }
    }

    #[test]
    fn any_flipped_bit_is_caught(len in 0usize..5000, seed: u8, at: prop::sample::Index, bit in 0u8..8) {
        let data = content(len, seed);
        let signed = SignedManifest::sign(Manifest::from_bytes(&data, 100, 700).unwrap(), &key(seed));
        let mut bytes = signed.encode();
        let i = at.index(bytes.len());
        bytes[i] ^= 1 << bit;
        match SignedManifest::decode(&bytes) {
            Err(_) => {}
            Ok(tampered) => prop_assert!(tampered.verify().is_err(), "flip at byte {} accepted", i),
        }
    }

    #[test]
    fn the_id_does_not_depend_on_chunking(
        len in 0usize..30_000,
        seed: u8,
        cuts in prop::collection::vec(0usize..30_000, 0..12),
    ) {
        let data = content(len, seed);
        let whole = Manifest::from_bytes(&data, 1024, 4096).unwrap();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(len)).collect();
        cuts.push(0);
        cuts.push(len);
        cuts.sort_unstable();
        let mut builder = Manifest::builder(1024, 4096).unwrap();
        for pair in cuts.windows(2) {
            builder.update(&data[pair[0]..pair[1]]);
        }
        let chunked = builder.finish();
        prop_assert_eq!(chunked.content_id(), whole.content_id());
        prop_assert_eq!(&chunked, &whole);
    }

    #[test]
    fn decoding_garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = SignedManifest::decode(&bytes);
        let mut with_magic = MAGIC.to_vec();
        with_magic.extend_from_slice(&bytes);
        let _ = SignedManifest::decode(&with_magic);
    }
}

/// The worked example of docs/protocol.md section 10.4; the hex strings must stay identical to it.
#[test]
fn worked_example_matches_the_spec() {
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let m = Manifest::from_bytes(b"pcdn manifest", 4, 8).unwrap();
    assert_eq!(
        hex(&m.encode_body()),
        "5043444e4d414e31000000000000000d00000004000000080000000000000002\
         d2f10104772fa2caf743f2b4763946c95a92b25955577fee1177086f21c32b80\
         21c96273534baed055fb4a51243e1ea732ae7740bd96ecb6da69e67b640e6c0e"
    );
    assert_eq!(
        hex(m.block_hashes[0].as_slice()),
        hex(blake3::hash(b"pcdn man").as_bytes())
    );
    assert_eq!(
        hex(m.block_hashes[1].as_slice()),
        hex(blake3::hash(b"ifest").as_bytes())
    );
    assert_eq!(
        hex(&m.content_id().0),
        "251238fe321f6e735d1bdabc243d3f5f6a478dbaa10689d56f1ae0e23c6bbda6"
    );
    let signed = SignedManifest::sign(m, &key(1));
    assert_eq!(
        hex(&signed.signer),
        "8a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c"
    );
    assert_eq!(
        hex(&signed.signature),
        "7e3f927a38fc7e79977d889d426d9f08fda5db6ac5980c95507cd6824908613f\
         c31434598ce85ade97fc57d4210321011a449568e6d0da65a4fe207b28ed7703"
    );
    signed.verify().unwrap();
}

fn hls_video(files: &[(&str, u64, u64)]) -> VideoInfo {
    VideoInfo {
        bitrate_bps: 1_500_000,
        duration_ms: 8000,
        container: Container::Hls,
        files: files
            .iter()
            .map(|&(name, offset, length)| VideoFile {
                name: name.to_owned(),
                offset,
                length,
            })
            .collect(),
    }
}

fn mp4_video() -> VideoInfo {
    VideoInfo {
        bitrate_bps: 500_000,
        duration_ms: 8000,
        container: Container::Mp4,
        files: Vec::new(),
    }
}

#[test]
fn a_manifest_without_video_keeps_the_version_1_encoding_and_id() {
    let data = content(70_000, 3);
    let plain = Manifest::from_bytes(&data, 1024, 65536).unwrap();
    assert!(plain.video.is_none());
    assert_eq!(plain.encode_body()[..8], MAGIC);
    let signed = SignedManifest::sign(plain.clone(), &key(2));
    let decoded = SignedManifest::decode(&signed.encode()).unwrap();
    assert_eq!(decoded, signed);
    assert!(decoded.manifest.video.is_none());
    // The same bytes with video metadata are another content: the metadata is signed and hashed.
    let video = plain.clone().with_video(mp4_video()).unwrap();
    assert_eq!(video.encode_body()[..8], MAGIC_V2);
    assert_ne!(video.content_id(), plain.content_id());
    assert_eq!(video.block_hashes, plain.block_hashes);
}

#[test]
fn video_metadata_round_trips_signed() {
    let data = content(10_000, 4);
    for video in [
        mp4_video(),
        hls_video(&[("index.m3u8", 0, 300), ("index0.ts", 300, 9700)]),
    ] {
        let m = Manifest::from_bytes(&data, 1024, 4096)
            .unwrap()
            .with_video(video.clone())
            .unwrap();
        let body = m.encode_body();
        assert_eq!(m.content_id().0, *blake3::hash(&body).as_bytes());
        let signed = SignedManifest::sign(m, &key(5));
        let bytes = signed.encode();
        let decoded = SignedManifest::decode(&bytes).unwrap();
        decoded.verify().unwrap();
        assert_eq!(decoded.manifest.video.as_ref(), Some(&video));
        assert_eq!(decoded.encode(), bytes, "one encoding per manifest");
        // Tampering with the video section breaks the signature.
        let mut tampered = bytes.clone();
        let bitrate_at = HEADER_LEN + 32 * 3 + 1 + 7;
        tampered[bitrate_at] ^= 1;
        let tampered = SignedManifest::decode(&tampered).unwrap();
        assert_ne!(tampered.content_id(), decoded.content_id());
        assert_eq!(tampered.verify(), Err(ManifestError::BadSignature));
        // Cut anywhere inside the video section or trailer: truncated, never a panic.
        for cut in body.len() - video_section_len(&video)..bytes.len() {
            assert!(
                matches!(
                    SignedManifest::decode(&bytes[..cut]),
                    Err(ManifestError::Truncated { .. })
                ),
                "cut at {cut}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            SignedManifest::decode(&longer),
            Err(ManifestError::TrailingBytes { extra: 1 })
        );
    }
}

fn video_section_len(video: &VideoInfo) -> usize {
    21 + video.files.iter().map(|f| 18 + f.name.len()).sum::<usize>()
}

#[test]
fn bad_video_metadata_is_refused_naming_the_field() {
    let m = Manifest::from_bytes(&content(1000, 1), 100, 200).unwrap();
    let message = |video: VideoInfo| match m.clone().with_video(video) {
        Err(ManifestError::BadVideo(message)) => message,
        other => panic!("expected BadVideo, got {other:?}"),
    };
    let mut zero = mp4_video();
    zero.bitrate_bps = 0;
    assert!(message(zero).contains("bitrate_bps"));
    let mut zero = mp4_video();
    zero.duration_ms = 0;
    assert!(message(zero).contains("duration_ms"));
    let mut mp4_with_files = hls_video(&[("a.m3u8", 0, 1000)]);
    mp4_with_files.container = Container::Mp4;
    assert!(message(mp4_with_files).contains("no file table"));
    assert!(message(hls_video(&[])).contains("file table"));
    assert!(message(hls_video(&[("a.m3u8", 0, 100), ("b.ts", 200, 800)])).contains("files[1]"));
    assert!(message(hls_video(&[("a.m3u8", 0, 100), ("b.ts", 100, 800)])).contains("cover 900 bytes"));
    assert!(message(hls_video(&[("a.ts", 0, 100), ("b.ts", 100, 900)])).contains("playlist"));
    assert!(message(hls_video(&[("a.m3u8", 0, 100), ("a.m3u8", 100, 900)])).contains("twice"));
    assert!(message(hls_video(&[("a.m3u8", 0, 100), ("../b.ts", 100, 900)])).contains("files[1].name"));
    assert!(message(hls_video(&[("a.m3u8", 0, 100), ("", 100, 900)])).contains("files[1].name"));
    // Names reach HTML pages and URLs: only RFC 3986's unreserved characters, no leading dot.
    for name in [
        "\"><img src=x onerror=alert(1)>.ts",
        "a b.ts",
        "a%2Fb.ts",
        "a&b.ts",
        "é.ts",
        ".hidden.ts",
        "..",
    ] {
        let text = message(hls_video(&[("a.m3u8", 0, 100), (name, 100, 900)]));
        assert!(text.contains("files[1].name"), "{name}: {text}");
    }
    assert!(
        m.clone()
            .with_video(hls_video(&[("seg_0-1~v2.m3u8", 0, 100), ("SEG.0.ts", 100, 900)]))
            .is_ok()
    );
    assert!(
        m.clone()
            .with_video(hls_video(&[("a.m3u8", 0, 100), ("b.ts", 100, 900)]))
            .is_ok()
    );
}

#[test]
fn a_forged_video_section_is_refused_when_decoding() {
    let m = Manifest::from_bytes(&content(1000, 1), 100, 200)
        .unwrap()
        .with_video(hls_video(&[("a.m3u8", 0, 100), ("b.ts", 100, 900)]))
        .unwrap();
    let bytes = SignedManifest::sign(m, &key(1)).encode();
    let section = HEADER_LEN + 32 * 5;
    // An unknown container code.
    let mut forged = bytes.clone();
    forged[section] = 9;
    assert!(
        matches!(SignedManifest::decode(&forged), Err(ManifestError::BadVideo(m)) if m.contains("container code 9"))
    );
    // A file count the input cannot back is refused before allocating.
    let mut forged = bytes.clone();
    forged[section + 17..section + 21].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(matches!(
        SignedManifest::decode(&forged),
        Err(ManifestError::Truncated { .. })
    ));
    // A file table that no longer covers the content (the second file's length, last 8 bytes).
    let mut forged = bytes.clone();
    let at = bytes.len() - SIGNATURE_TRAILER_LEN - 1;
    forged[at] ^= 1;
    assert!(matches!(SignedManifest::decode(&forged), Err(ManifestError::BadVideo(m)) if m.contains("cover")));
}

/// The version 2 worked example of docs/protocol.md section 10.4; the hex must stay identical.
#[test]
fn video_worked_example_matches_the_spec() {
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let video = VideoInfo {
        bitrate_bps: 8000,
        duration_ms: 13,
        container: Container::Hls,
        files: vec![
            VideoFile {
                name: "a.m3u8".to_owned(),
                offset: 0,
                length: 5,
            },
            VideoFile {
                name: "b.ts".to_owned(),
                offset: 5,
                length: 8,
            },
        ],
    };
    let m = Manifest::from_bytes(b"pcdn manifest", 4, 8)
        .unwrap()
        .with_video(video)
        .unwrap();
    let body = m.encode_body();
    let v1 = Manifest::from_bytes(b"pcdn manifest", 4, 8).unwrap().encode_body();
    assert_eq!(body[..8], *b"PCDNMAN2");
    assert_eq!(
        body[8..v1.len()],
        v1[8..],
        "version 1's fields follow the magic unchanged"
    );
    assert_eq!(
        hex(&body[v1.len()..]),
        "02\
         0000000000001f40\
         000000000000000d\
         00000002\
         0006612e6d337538\
         0000000000000000\
         0000000000000005\
         0004622e7473\
         0000000000000005\
         0000000000000008"
    );
    assert_eq!(
        hex(&m.content_id().0),
        "6f5e701205ed8ee1ff495c9a7c0f969c9abef71858ed15b8811ced8662f2d85c"
    );
}
