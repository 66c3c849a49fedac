//! A content's manifest: its length, packet and block sizes and the BLAKE3 hash of every block,
//! optionally video metadata (bitrate, duration, container, HLS file table), optionally signed
//! with Ed25519 by its publisher (format: docs/protocol.md section 10).
//!
//! The manifest lets a client check every block it downloads from untrusted servers before the
//! block is delivered. Its content id is the BLAKE3 hash of its canonical body, so the same file
//! cut the same way gets the same id on every machine, whoever signed it.

use crate::wire::{self, ContentId};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use std::ops::Range;

/// Payload bytes per packet unless the publisher chooses otherwise.
pub const DEFAULT_PACKET_SIZE: u32 = 1024;
/// Bytes per verified block unless the publisher chooses otherwise (64 packets of 1024 bytes).
pub const DEFAULT_BLOCK_SIZE: u32 = 65536;
/// First 8 bytes of an encoded manifest without video metadata (format version 1).
pub const MAGIC: [u8; 8] = *b"PCDNMAN1";
/// First 8 bytes of an encoded manifest with video metadata (format version 2: version 1's
/// layout followed by the video section, docs/protocol.md section 10.2).
pub const MAGIC_V2: [u8; 8] = *b"PCDNMAN2";
/// Bytes of the video section before its file table: container, bitrate, duration, file count.
pub const VIDEO_HEADER_LEN: usize = 1 + 8 + 8 + 4;
/// Bytes of one file-table entry besides its name: name length, offset, length.
pub const VIDEO_FILE_FIXED_LEN: usize = 2 + 8 + 8;
/// Longest file name in an HLS file table, in bytes.
pub const MAX_VIDEO_FILE_NAME: usize = 255;
/// Bytes before the block hashes: magic, length, packet size, block size, hash count.
pub const HEADER_LEN: usize = 8 + 8 + 4 + 4 + 8;
/// Bytes of one block hash (BLAKE3).
pub const HASH_LEN: usize = 32;
/// Bytes the signed form appends to the body: the signer's public key and the signature.
pub const SIGNATURE_TRAILER_LEN: usize = 32 + 64;
/// What is signed is this prefix followed by the body, so that a manifest signature can never be
/// taken for the signature of some other pcdn message.
pub const SIGNING_CONTEXT: &[u8] = b"pcdn manifest v1\0";

/// Why a manifest was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("packet_size {packet_size} is out of range: expected 1..={max}", max = wire::MAX_PAYLOAD)]
    BadPacketSize { packet_size: u32 },
    #[error("block_size {block_size} is not a positive multiple of packet_size {packet_size}")]
    BadBlockSize { block_size: u32, packet_size: u32 },
    #[error("manifest too short: {needed} bytes needed, {got} given")]
    Truncated { needed: u64, got: usize },
    #[error("not a pcdn manifest: the first 8 bytes are neither \"PCDNMAN1\" nor \"PCDNMAN2\"")]
    BadMagic,
    #[error("manifest lists {found} block hashes, but length {length} in blocks of {block_size} needs {expected}")]
    HashCount {
        found: u64,
        expected: u64,
        length: u64,
        block_size: u32,
    },
    #[error("{extra} bytes after the end of the signed manifest")]
    TrailingBytes { extra: usize },
    #[error("the signer key is not a valid Ed25519 public key")]
    BadSignerKey,
    #[error("the Ed25519 signature does not match the manifest and signer key")]
    BadSignature,
    #[error("video metadata: {0}")]
    BadVideo(String),
}

/// How a video content is packaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Container {
    /// One MP4 file (progressive download).
    Mp4,
    /// An HLS folder: a playlist and its segments, stored back to back as one content.
    Hls,
}

impl Container {
    fn code(self) -> u8 {
        match self {
            Container::Mp4 => 1,
            Container::Hls => 2,
        }
    }

    fn from_code(code: u8) -> Option<Container> {
        match code {
            1 => Some(Container::Mp4),
            2 => Some(Container::Hls),
            _ => None,
        }
    }

    /// "mp4" or "hls".
    pub fn name(self) -> &'static str {
        match self {
            Container::Mp4 => "mp4",
            Container::Hls => "hls",
        }
    }
}

/// One file of an HLS content: bytes `[offset, offset + length)` of the content.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VideoFile {
    /// The file's name in its folder (no path separators), e.g. `index.m3u8`, `index0.ts`.
    pub name: String,
    pub offset: u64,
    pub length: u64,
}

impl VideoFile {
    /// The file's byte range in the content.
    pub fn range(&self) -> Range<u64> {
        self.offset..self.offset + self.length
    }
}

/// What a player and a scheduler need to know about a video content: its average bitrate (of
/// the content's bytes, so that byte `b` plays at `b·8/bitrate_bps` seconds), its duration, its
/// container and, for HLS, the table of its files.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VideoInfo {
    pub bitrate_bps: u64,
    pub duration_ms: u64,
    pub container: Container,
    /// Empty for MP4; for HLS every file in content order, covering the content exactly.
    pub files: Vec<VideoFile>,
}

impl VideoInfo {
    /// Checks the metadata against a content of `length` bytes; the error names the field.
    pub fn validate(&self, length: u64) -> Result<(), ManifestError> {
        let bad = |message: String| Err(ManifestError::BadVideo(message));
        if self.bitrate_bps == 0 {
            return bad("bitrate_bps must be greater than zero".to_owned());
        }
        if self.duration_ms == 0 {
            return bad("duration_ms must be greater than zero".to_owned());
        }
        match self.container {
            Container::Mp4 if !self.files.is_empty() => {
                return bad(format!(
                    "an mp4 video has no file table, found {} files",
                    self.files.len()
                ));
            }
            Container::Mp4 => return Ok(()),
            Container::Hls if self.files.is_empty() => return bad("an hls video needs a file table".to_owned()),
            Container::Hls => {}
        }
        let mut expected_offset = 0u64;
        let mut names = std::collections::HashSet::new();
        for (index, file) in self.files.iter().enumerate() {
            check_file_name(&file.name).or_else(|why| bad(format!("files[{index}].name {:?}: {why}", file.name)))?;
            if !names.insert(file.name.as_str()) {
                return bad(format!("files[{index}].name {:?} appears twice", file.name));
            }
            if file.offset != expected_offset {
                return bad(format!(
                    "files[{index}] ({}) starts at {}, expected {expected_offset} (files are back to back)",
                    file.name, file.offset
                ));
            }
            expected_offset = match file.offset.checked_add(file.length) {
                Some(end) => end,
                None => return bad(format!("files[{index}] ({}) ends past u64::MAX", file.name)),
            };
        }
        if expected_offset != length {
            return bad(format!(
                "the files cover {expected_offset} bytes, but the content has {length}"
            ));
        }
        if !self.files.iter().any(|f| f.name.ends_with(".m3u8")) {
            return bad("an hls video needs a playlist (a file named *.m3u8)".to_owned());
        }
        Ok(())
    }

    /// The file called `name` (HLS only).
    pub fn file(&self, name: &str) -> Option<&VideoFile> {
        self.files.iter().find(|f| f.name == name)
    }

    /// The HLS playlist: the first `*.m3u8` file of the table.
    pub fn playlist(&self) -> Option<&VideoFile> {
        self.files.iter().find(|f| f.name.ends_with(".m3u8"))
    }

    /// The video as the player model sees it ([`crate::player::VideoSpec::new`]'s defaults for
    /// segments, GOP, start-up and resume).
    pub fn spec(&self) -> crate::player::VideoSpec {
        crate::player::VideoSpec::new(self.bitrate_bps, crate::time::Duration::from_millis(self.duration_ms))
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(self.container.code());
        out.extend_from_slice(&self.bitrate_bps.to_be_bytes());
        out.extend_from_slice(&self.duration_ms.to_be_bytes());
        out.extend_from_slice(&(self.files.len() as u32).to_be_bytes());
        for file in &self.files {
            out.extend_from_slice(&(file.name.len() as u16).to_be_bytes());
            out.extend_from_slice(file.name.as_bytes());
            out.extend_from_slice(&file.offset.to_be_bytes());
            out.extend_from_slice(&file.length.to_be_bytes());
        }
    }

    fn encoded_len(&self) -> usize {
        VIDEO_HEADER_LEN
            + self
                .files
                .iter()
                .map(|f| VIDEO_FILE_FIXED_LEN + f.name.len())
                .sum::<usize>()
    }

    /// Decodes a video section at the front of `bytes` (`at` is its offset in the manifest, for
    /// errors); returns it and the bytes it took. Checked with `validate` by the caller.
    fn decode(bytes: &[u8], at: usize) -> Result<(VideoInfo, usize), ManifestError> {
        let truncated = |needed: usize| ManifestError::Truncated {
            needed: (at + needed) as u64,
            got: at + bytes.len(),
        };
        if bytes.len() < VIDEO_HEADER_LEN {
            return Err(truncated(VIDEO_HEADER_LEN));
        }
        let be_u64 = |b: &[u8], i: usize| u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let container = Container::from_code(bytes[0]).ok_or_else(|| {
            ManifestError::BadVideo(format!(
                "container code {} is unknown: expected 1 (mp4) or 2 (hls)",
                bytes[0]
            ))
        })?;
        let (bitrate_bps, duration_ms) = (be_u64(bytes, 1), be_u64(bytes, 9));
        let count = u32::from_be_bytes(bytes[17..21].try_into().expect("4 bytes")) as usize;
        // Checked before allocating: a forged count cannot reserve memory the input does not back.
        if count.saturating_mul(VIDEO_FILE_FIXED_LEN) > bytes.len() - VIDEO_HEADER_LEN {
            return Err(truncated(
                VIDEO_HEADER_LEN.saturating_add(count.saturating_mul(VIDEO_FILE_FIXED_LEN)),
            ));
        }
        let mut files = Vec::with_capacity(count);
        let mut pos = VIDEO_HEADER_LEN;
        for index in 0..count {
            if bytes.len() < pos + 2 {
                return Err(truncated(pos + 2));
            }
            let name_len = usize::from(u16::from_be_bytes([bytes[pos], bytes[pos + 1]]));
            let end = pos + VIDEO_FILE_FIXED_LEN + name_len;
            if bytes.len() < end {
                return Err(truncated(end));
            }
            let name = std::str::from_utf8(&bytes[pos + 2..pos + 2 + name_len])
                .map_err(|_| ManifestError::BadVideo(format!("files[{index}].name is not UTF-8")))?
                .to_owned();
            let fixed = pos + 2 + name_len;
            files.push(VideoFile {
                name,
                offset: be_u64(bytes, fixed),
                length: be_u64(bytes, fixed + 8),
            });
            pos = end;
        }
        Ok((
            VideoInfo {
                bitrate_bps,
                duration_ms,
                container,
                files,
            },
            pos,
        ))
    }
}

/// A file-table name must be a plain file name that a URL path segment carries as it is and
/// that means nothing in HTML, JavaScript, a shell or a file system: the unreserved
/// characters of RFC 3986 §2.3 (letters, digits, `-`, `.`, `_`, `~`), not starting with a dot
/// (so no `.`, `..` or hidden file). A publisher's name reaches players' pages and URLs.
pub fn check_file_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > MAX_VIDEO_FILE_NAME {
        return Err("expected 1 to 255 bytes");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
    {
        return Err("expected only letters, digits, '-', '.', '_' and '~' (RFC 3986 unreserved characters)");
    }
    if name.starts_with('.') {
        return Err("expected a name not starting with '.'");
    }
    Ok(())
}

/// A content's length, packet size, block size and block hashes.
///
/// Block `i` is bytes `[i·block_size, min((i+1)·block_size, length))`; every block but possibly
/// the last is full, and a block is a whole number of packets (only the content's last packet
/// may be short).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// Content length in bytes.
    pub length: u64,
    /// Payload bytes per packet (the `packet_size` of WELCOME).
    pub packet_size: u32,
    /// Bytes per block, a positive multiple of `packet_size`.
    pub block_size: u32,
    /// BLAKE3 of every block, in order; `block_count()` of them.
    pub block_hashes: Vec<[u8; 32]>,
    /// Video metadata (format version 2); `None`: a plain content (version 1).
    pub video: Option<VideoInfo>,
}

fn check_sizes(packet_size: u32, block_size: u32) -> Result<(), ManifestError> {
    if packet_size == 0 || packet_size as usize > wire::MAX_PAYLOAD {
        return Err(ManifestError::BadPacketSize { packet_size });
    }
    if block_size == 0 || block_size % packet_size != 0 {
        return Err(ManifestError::BadBlockSize {
            block_size,
            packet_size,
        });
    }
    Ok(())
}

impl Manifest {
    /// A builder that hashes the content as it streams past, in chunks of any size.
    pub fn builder(packet_size: u32, block_size: u32) -> Result<ManifestBuilder, ManifestError> {
        check_sizes(packet_size, block_size)?;
        Ok(ManifestBuilder {
            packet_size,
            block_size,
            length: 0,
            in_block: 0,
            hasher: blake3::Hasher::new(),
            block_hashes: Vec::new(),
        })
    }

    /// The manifest of `data`, cut into blocks of `block_size` bytes.
    pub fn from_bytes(data: &[u8], packet_size: u32, block_size: u32) -> Result<Manifest, ManifestError> {
        let mut builder = Manifest::builder(packet_size, block_size)?;
        builder.update(data);
        Ok(builder.finish())
    }

    /// A manifest from its fields, checked: sizes in range and one hash per block.
    pub fn new(
        length: u64,
        packet_size: u32,
        block_size: u32,
        block_hashes: Vec<[u8; 32]>,
    ) -> Result<Manifest, ManifestError> {
        let manifest = Manifest {
            length,
            packet_size,
            block_size,
            block_hashes,
            video: None,
        };
        manifest.validate()?;
        Ok(manifest)
    }

    /// This manifest with video metadata, checked against its length.
    pub fn with_video(self, video: VideoInfo) -> Result<Manifest, ManifestError> {
        video.validate(self.length)?;
        Ok(Manifest {
            video: Some(video),
            ..self
        })
    }

    /// Checks a manifest built by hand: sizes in range, one hash per block, and video metadata
    /// (if any) that fits the length.
    pub fn validate(&self) -> Result<(), ManifestError> {
        check_sizes(self.packet_size, self.block_size)?;
        if let Some(video) = &self.video {
            video.validate(self.length)?;
        }
        let expected = self.block_count();
        if self.block_hashes.len() as u64 != expected {
            return Err(ManifestError::HashCount {
                found: self.block_hashes.len() as u64,
                expected,
                length: self.length,
                block_size: self.block_size,
            });
        }
        Ok(())
    }

    /// Number of blocks: ⌈length / block_size⌉ (0 for empty content).
    pub fn block_count(&self) -> u64 {
        self.length.div_ceil(u64::from(self.block_size))
    }

    /// Packets in a full block.
    pub fn packets_per_block(&self) -> u32 {
        self.block_size / self.packet_size
    }

    /// Number of packets (sequence numbers) of the content: ⌈length / packet_size⌉.
    pub fn packet_count(&self) -> u64 {
        self.length.div_ceil(u64::from(self.packet_size))
    }

    /// The block holding sequence number `seq`.
    pub fn block_of_seq(&self, seq: u64) -> u64 {
        seq / u64::from(self.packets_per_block())
    }

    /// The byte range of `block`; empty for a block past the end.
    pub fn block_range(&self, block: u64) -> Range<u64> {
        let size = u64::from(self.block_size);
        let start = block.saturating_mul(size).min(self.length);
        let end = start.saturating_add(size).min(self.length);
        start..end
    }

    /// The sequence numbers of `block`'s packets; empty for a block past the end.
    pub fn block_seqs(&self, block: u64) -> Range<u64> {
        let per = u64::from(self.packets_per_block());
        let count = self.packet_count();
        let start = block.saturating_mul(per).min(count);
        start..start.saturating_add(per).min(count)
    }

    /// Whether `data` is exactly block `block`: the right length and BLAKE3(data) equal to the
    /// block's hash. False for a block past the end.
    pub fn verify_block(&self, block: u64, data: &[u8]) -> bool {
        let Some(expected) = usize::try_from(block).ok().and_then(|b| self.block_hashes.get(b)) else {
            return false;
        };
        let range = self.block_range(block);
        // blake3::Hash compares in constant time.
        data.len() as u64 == range.end - range.start && blake3::hash(data) == blake3::Hash::from_bytes(*expected)
    }

    /// Like [`Manifest::verify_block`] for a block held in pieces (its packets, in order),
    /// gathered into `scratch` first (cleared; pass the same buffer every time to reuse its
    /// allocation): BLAKE3 hashes one long input several 1 KiB chunks at a time with SIMD, but
    /// packet-sized updates one chunk at a time, about 3x slower.
    pub fn verify_block_parts<'a>(
        &self,
        block: u64,
        parts: impl IntoIterator<Item = &'a [u8]>,
        scratch: &mut Vec<u8>,
    ) -> bool {
        let range = self.block_range(block);
        let len = (range.end - range.start) as usize;
        scratch.clear();
        for part in parts {
            if scratch.len() + part.len() > len {
                return false;
            }
            scratch.extend_from_slice(part);
        }
        self.verify_block(block, scratch)
    }

    fn header(&self) -> [u8; HEADER_LEN] {
        let mut header = [0u8; HEADER_LEN];
        header[0..8].copy_from_slice(if self.video.is_some() { &MAGIC_V2 } else { &MAGIC });
        header[8..16].copy_from_slice(&self.length.to_be_bytes());
        header[16..20].copy_from_slice(&self.packet_size.to_be_bytes());
        header[20..24].copy_from_slice(&self.block_size.to_be_bytes());
        header[24..32].copy_from_slice(&(self.block_hashes.len() as u64).to_be_bytes());
        header
    }

    /// The canonical encoding: header (magic, length, packet_size, block_size, hash count, all
    /// big-endian) followed by the block hashes, then (version 2 only) the video section. One
    /// manifest has exactly one encoding.
    pub fn encode_body(&self) -> Vec<u8> {
        let video_len = self.video.as_ref().map_or(0, VideoInfo::encoded_len);
        let mut out = Vec::with_capacity(HEADER_LEN + HASH_LEN * self.block_hashes.len() + video_len);
        out.extend_from_slice(&self.header());
        for hash in &self.block_hashes {
            out.extend_from_slice(hash);
        }
        if let Some(video) = &self.video {
            video.encode_into(&mut out);
        }
        out
    }

    /// The content id: BLAKE3(`encode_body()`). It depends only on the bytes and the sizes
    /// they are cut into, never on who signed the manifest.
    pub fn content_id(&self) -> ContentId {
        // Hashed piecewise: the same bytes as encode_body() without building them.
        let mut hasher = blake3::Hasher::new();
        hasher.update(&self.header());
        for hash in &self.block_hashes {
            hasher.update(hash);
        }
        if let Some(video) = &self.video {
            let mut section = Vec::with_capacity(video.encoded_len());
            video.encode_into(&mut section);
            hasher.update(&section);
        }
        ContentId(*hasher.finalize().as_bytes())
    }

    /// Decodes a body (as `encode_body` writes it) at the front of `bytes`, strictly; returns
    /// the manifest and the number of bytes it took.
    fn decode_body(bytes: &[u8]) -> Result<(Manifest, usize), ManifestError> {
        let known_magic = |b: &[u8]| b == MAGIC || b == MAGIC_V2;
        if bytes.len() < HEADER_LEN {
            // The magic is checked first when there is enough of it to tell.
            if bytes.len() >= MAGIC.len() && !known_magic(&bytes[..MAGIC.len()]) {
                return Err(ManifestError::BadMagic);
            }
            return Err(ManifestError::Truncated {
                needed: HEADER_LEN as u64,
                got: bytes.len(),
            });
        }
        if !known_magic(&bytes[0..8]) {
            return Err(ManifestError::BadMagic);
        }
        let has_video = bytes[0..8] == MAGIC_V2;
        let be_u64 = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let be_u32 = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let (length, packet_size, block_size, found) = (be_u64(8), be_u32(16), be_u32(20), be_u64(24));
        check_sizes(packet_size, block_size)?;
        let expected = length.div_ceil(u64::from(block_size));
        if found != expected {
            return Err(ManifestError::HashCount {
                found,
                expected,
                length,
                block_size,
            });
        }
        // Checked before allocating: a forged count cannot make the decoder reserve memory the
        // input does not back.
        let needed = (HASH_LEN as u64)
            .checked_mul(found)
            .and_then(|h| h.checked_add(HEADER_LEN as u64));
        let body_len = match needed {
            Some(n) if n <= bytes.len() as u64 => n as usize,
            _ => {
                return Err(ManifestError::Truncated {
                    needed: needed.unwrap_or(u64::MAX),
                    got: bytes.len(),
                });
            }
        };
        let block_hashes = bytes[HEADER_LEN..body_len]
            .chunks_exact(HASH_LEN)
            .map(|h| h.try_into().expect("32 bytes"))
            .collect();
        let (video, body_len) = if has_video {
            let (video, taken) = VideoInfo::decode(&bytes[body_len..], body_len)?;
            video.validate(length)?;
            (Some(video), body_len + taken)
        } else {
            (None, body_len)
        };
        Ok((
            Manifest {
                length,
                packet_size,
                block_size,
                block_hashes,
                video,
            },
            body_len,
        ))
    }

    fn signed_message(&self) -> Vec<u8> {
        let body = self.encode_body();
        let mut message = Vec::with_capacity(SIGNING_CONTEXT.len() + body.len());
        message.extend_from_slice(SIGNING_CONTEXT);
        message.extend_from_slice(&body);
        message
    }
}

/// Hashes a content block by block as its bytes stream past (`Manifest::builder`).
#[derive(Clone, Debug)]
pub struct ManifestBuilder {
    packet_size: u32,
    block_size: u32,
    length: u64,
    /// Bytes of the current, unfinished block hashed so far.
    in_block: u32,
    hasher: blake3::Hasher,
    block_hashes: Vec<[u8; 32]>,
}

impl ManifestBuilder {
    /// Adds the next bytes of the content.
    pub fn update(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let room = (self.block_size - self.in_block) as usize;
            let take = room.min(bytes.len());
            self.hasher.update(&bytes[..take]);
            self.in_block += take as u32;
            self.length += take as u64;
            bytes = &bytes[take..];
            if self.in_block == self.block_size {
                self.block_hashes.push(*self.hasher.finalize().as_bytes());
                self.hasher.reset();
                self.in_block = 0;
            }
        }
    }

    /// The manifest of every byte given so far (the last block may be partial).
    pub fn finish(mut self) -> Manifest {
        if self.in_block > 0 {
            self.block_hashes.push(*self.hasher.finalize().as_bytes());
        }
        Manifest {
            length: self.length,
            packet_size: self.packet_size,
            block_size: self.block_size,
            block_hashes: self.block_hashes,
            video: None,
        }
    }
}

/// A manifest with its publisher's Ed25519 public key and signature (RFC 8032).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedManifest {
    pub manifest: Manifest,
    /// The signer's Ed25519 public key.
    pub signer: [u8; 32],
    /// Ed25519 signature of `SIGNING_CONTEXT ‖ manifest.encode_body()`.
    pub signature: [u8; 64],
}

impl SignedManifest {
    /// Signs `manifest` with `key`.
    pub fn sign(manifest: Manifest, key: &SigningKey) -> SignedManifest {
        let signature = key.sign(&manifest.signed_message()).to_bytes();
        SignedManifest {
            manifest,
            signer: key.verifying_key().to_bytes(),
            signature,
        }
    }

    /// Body ‖ signer (32 bytes) ‖ signature (64 bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.manifest.encode_body();
        out.reserve_exact(SIGNATURE_TRAILER_LEN);
        out.extend_from_slice(&self.signer);
        out.extend_from_slice(&self.signature);
        out
    }

    /// Decodes the signed form strictly: magic, sizes in range, one hash per block, the signer
    /// and signature present and nothing after them. Does not check the signature (`verify`).
    pub fn decode(bytes: &[u8]) -> Result<SignedManifest, ManifestError> {
        let (manifest, body_len) = Manifest::decode_body(bytes)?;
        let end = body_len + SIGNATURE_TRAILER_LEN;
        if bytes.len() < end {
            return Err(ManifestError::Truncated {
                needed: end as u64,
                got: bytes.len(),
            });
        }
        if bytes.len() > end {
            return Err(ManifestError::TrailingBytes {
                extra: bytes.len() - end,
            });
        }
        Ok(SignedManifest {
            manifest,
            signer: bytes[body_len..body_len + 32].try_into().expect("32 bytes"),
            signature: bytes[body_len + 32..end].try_into().expect("64 bytes"),
        })
    }

    /// Checks the signature against `signer`. Uses the strict verification of ed25519-dalek,
    /// which also refuses small-order keys and non-canonical signature encodings, so one manifest
    /// has exactly one valid signed encoding per signature.
    pub fn verify(&self) -> Result<(), ManifestError> {
        let key = VerifyingKey::from_bytes(&self.signer).map_err(|_| ManifestError::BadSignerKey)?;
        if key.is_weak() {
            return Err(ManifestError::BadSignerKey);
        }
        let signature = Signature::from_bytes(&self.signature);
        key.verify_strict(&self.manifest.signed_message(), &signature)
            .map_err(|_| ManifestError::BadSignature)
    }

    /// The content id of the manifest (the signature is not part of it).
    pub fn content_id(&self) -> ContentId {
        self.manifest.content_id()
    }
}
