//! A content's manifest: its length, packet and block sizes and the BLAKE3 hash of every block,
//! optionally signed with Ed25519 by its publisher (format: docs/protocol.md section 10).
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
/// First 8 bytes of every encoded manifest.
pub const MAGIC: [u8; 8] = *b"PCDNMAN1";
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
    #[error("not a pcdn manifest: the first 8 bytes are not \"PCDNMAN1\"")]
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
        };
        manifest.validate()?;
        Ok(manifest)
    }

    /// Checks a manifest built by hand: sizes in range and one hash per block.
    pub fn validate(&self) -> Result<(), ManifestError> {
        check_sizes(self.packet_size, self.block_size)?;
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
        header[0..8].copy_from_slice(&MAGIC);
        header[8..16].copy_from_slice(&self.length.to_be_bytes());
        header[16..20].copy_from_slice(&self.packet_size.to_be_bytes());
        header[20..24].copy_from_slice(&self.block_size.to_be_bytes());
        header[24..32].copy_from_slice(&(self.block_hashes.len() as u64).to_be_bytes());
        header
    }

    /// The canonical encoding: header (magic, length, packet_size, block_size, hash count, all
    /// big-endian) followed by the block hashes. One manifest has exactly one encoding.
    pub fn encode_body(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + HASH_LEN * self.block_hashes.len());
        out.extend_from_slice(&self.header());
        for hash in &self.block_hashes {
            out.extend_from_slice(hash);
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
        ContentId(*hasher.finalize().as_bytes())
    }

    /// Decodes a body (as `encode_body` writes it) at the front of `bytes`, strictly; returns
    /// the manifest and the number of bytes it took.
    fn decode_body(bytes: &[u8]) -> Result<(Manifest, usize), ManifestError> {
        if bytes.len() < HEADER_LEN {
            // The magic is checked first when there is enough of it to tell.
            if bytes.len() >= MAGIC.len() && bytes[..MAGIC.len()] != MAGIC {
                return Err(ManifestError::BadMagic);
            }
            return Err(ManifestError::Truncated {
                needed: HEADER_LEN as u64,
                got: bytes.len(),
            });
        }
        if bytes[0..8] != MAGIC {
            return Err(ManifestError::BadMagic);
        }
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
        Ok((
            Manifest {
                length,
                packet_size,
                block_size,
                block_hashes,
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
