//! A lab of real servers on 127.0.0.1 for the fetch tests: one origin and some edges, each
//! with its own store holding the same file.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use pcdn_core::wire::ContentId;
use pcdn_net::{FetchConfig, ServerConfig, ServerHandle, Store, spawn_server};

/// Deterministic pseudo-random bytes (BLAKE3 in counter mode).
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 32);
    let mut counter = 0u64;
    while out.len() < len {
        let mut h = blake3::Hasher::new();
        h.update(&seed.to_le_bytes());
        h.update(&counter.to_le_bytes());
        out.extend_from_slice(h.finalize().as_bytes());
        counter += 1;
    }
    out.truncate(len);
    out
}

pub struct Lab {
    pub dir: tempfile::TempDir,
    pub data: Vec<u8>,
    pub id: ContentId,
    pub origin_store: PathBuf,
    pub edge_stores: Vec<PathBuf>,
}

impl Lab {
    /// Imports `len` random bytes into an origin store and `edges` edge stores.
    pub fn new(len: usize, edges: usize) -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let data = random_bytes(len, len as u64);
        let file = dir.path().join("content.bin");
        std::fs::write(&file, &data).unwrap();
        let origin_store = dir.path().join("origin");
        let id = Store::open(&origin_store).unwrap().add(&file).unwrap();
        let mut edge_stores = Vec::new();
        for i in 0..edges {
            let store = dir.path().join(format!("edge{i}"));
            assert_eq!(Store::open(&store).unwrap().add(&file).unwrap(), id);
            edge_stores.push(store);
        }
        Lab {
            dir,
            data,
            id,
            origin_store,
            edge_stores,
        }
    }

    pub fn out_dir(&self) -> PathBuf {
        let out = self.dir.path().join("out");
        std::fs::create_dir_all(&out).unwrap();
        out
    }

    /// Starts a server of `store`, optionally capped at `limit_bps`.
    pub async fn serve(&self, store: &Path, origin: bool, limit_bps: Option<u64>) -> ServerHandle {
        let mut config = ServerConfig::new(store, "127.0.0.1:0".parse().unwrap());
        config.origin = origin;
        config.upload_limit_bps = limit_bps;
        spawn_server(config).await.unwrap()
    }

    /// A fetch of the lab's content from these servers, no tracker.
    pub fn fetch_config(&self, output: &Path, edges: &[&ServerHandle], origins: &[&ServerHandle]) -> FetchConfig {
        let origin = Store::open(&self.origin_store).unwrap();
        let mut config = FetchConfig::new(self.id, output);
        config.manifest = Some(origin.manifest_bytes(&self.id).unwrap());
        config.origin_key = Some(origin.public_key());
        config.edges = Some(edges.iter().map(|s| s.local_addr()).collect());
        config.origins = origins.iter().map(|s| s.local_addr()).collect();
        config
    }
}

/// The names of the files in `dir`.
pub fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

pub fn addr_name(addr: SocketAddr) -> String {
    addr.to_string()
}
