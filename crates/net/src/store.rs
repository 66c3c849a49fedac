//! A device's content store: a directory of imported files with their signed manifests, and
//! the [`ContentSource`] the server reads packets from.
//!
//! Layout of `DIR` (docs/net.md):
//!
//! ```text
//! DIR/key                       the store's Ed25519 signing key: 32 random bytes, mode 0600
//! DIR/contents/<hex id>/data    the content's bytes
//! DIR/contents/<hex id>/manifest  its signed manifest (SignedManifest::encode)
//! DIR/contents/.import-<random>/  an import in progress (or left by a crash; ignored)
//! ```
//!
//! An import writes both files into a fresh `.import-*` directory, syncs them, and renames the
//! directory to its id in one step, so a content directory is either complete or absent.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
#[cfg(unix)]
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::RwLock;
use std::time::{Duration, SystemTime};

use pcdn_core::ed25519_dalek::SigningKey;
use pcdn_core::log_limit::LogLimiter;
use pcdn_core::manifest::{DEFAULT_BLOCK_SIZE, DEFAULT_PACKET_SIZE, VideoInfo};
use pcdn_core::wire::ContentId;
use pcdn_core::{ContentInfo, ContentSource, ManifestError, SignedManifest};

/// File name of the signing key inside the store.
pub const KEY_FILE: &str = "key";
/// Directory of the contents inside the store.
pub const CONTENTS_DIR: &str = "contents";
const DATA_FILE: &str = "data";
const MANIFEST_FILE: &str = "manifest";
const IMPORT_PREFIX: &str = ".import-";
/// A cache fill in progress (`contents/.fill-<hex id>/data.pcdn-partial`): one name per
/// content, so a fill stopped by a crash resumes from its verified blocks.
const FILL_PREFIX: &str = ".fill-";
/// A content being evicted: renamed away in one step, then deleted.
const EVICT_PREFIX: &str = ".evict-";
/// Import directories older than this are a crash's leftovers and are removed on open.
const STALE_IMPORT_AGE: Duration = Duration::from_secs(24 * 3600);
/// Bytes read and written per step of an import.
const IMPORT_CHUNK: usize = 1 << 20;
/// A content found unservable is looked at again after this long, not on every HELLO: a
/// HELLO flood for it then costs a map lookup, not a manifest read and decode. As long as
/// the server's store rescan, so a repaired content comes back as fast as a new one.
const RETRY_UNSERVABLE: Duration = Duration::from_secs(2);
/// The store's warnings are logged at most once per cause (content and fault) per minute,
/// with the count of those not logged: a fault stays visible at about 1 kB a minute.
const WARN_INTERVAL: Duration = Duration::from_secs(60);

/// Why a store operation failed; every variant names the file involved.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: expected a 32-byte Ed25519 signing key, found {len} bytes", path.display())]
    BadKey { path: PathBuf, len: u64 },
    #[error("{}: {source}", path.display())]
    Manifest {
        path: PathBuf,
        #[source]
        source: ManifestError,
    },
    #[error("{}: the manifest describes content {manifest}, not the directory's {directory}", path.display())]
    WrongId {
        path: PathBuf,
        manifest: String,
        directory: String,
    },
    #[error("content {0} is not in the store")]
    NotFound(String),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The 64 lowercase hex characters of a content id.
pub fn content_id_hex(id: &ContentId) -> String {
    hex::encode(id.0)
}

/// A content id from 64 hex characters.
pub fn parse_content_id(text: &str) -> Result<ContentId, String> {
    let text = text.trim();
    let mut id = [0u8; 32];
    if text.len() != 64 {
        return Err(format!(
            "expected a content id of 64 hex characters, got {} characters: \"{text}\"",
            text.len()
        ));
    }
    hex::decode_to_slice(text, &mut id)
        .map_err(|e| format!("expected a content id of 64 hex characters, got \"{text}\": {e}"))?;
    Ok(ContentId(id))
}

/// A content store directory (see the module documentation for its layout).
#[derive(Clone)]
pub struct Store {
    dir: PathBuf,
    contents: PathBuf,
    key: SigningKey,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Store").field("dir", &self.dir).finish()
    }
}

impl Store {
    /// Opens the store at `dir`, creating it and its signing key on first use.
    pub fn open(dir: impl AsRef<Path>) -> Result<Store, StoreError> {
        let dir = dir.as_ref().to_path_buf();
        let contents = dir.join(CONTENTS_DIR);
        fs::create_dir_all(&contents).map_err(io_err(&contents))?;
        let key = load_or_create_key(&dir.join(KEY_FILE))?;
        remove_stale_imports(&contents);
        Ok(Store { dir, contents, key })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The store's Ed25519 public key: the signer of every manifest it imports.
    pub fn public_key(&self) -> [u8; 32] {
        self.key.verifying_key().to_bytes()
    }

    /// The directory of content `id`.
    pub fn content_dir(&self, id: &ContentId) -> PathBuf {
        self.contents.join(content_id_hex(id))
    }

    /// The data file of content `id`.
    pub fn data_path(&self, id: &ContentId) -> PathBuf {
        self.content_dir(id).join(DATA_FILE)
    }

    /// The directory a cache fill of content `id` downloads into (never served).
    pub fn fill_dir(&self, id: &ContentId) -> PathBuf {
        self.contents.join(format!("{FILL_PREFIX}{}", content_id_hex(id)))
    }

    /// The length of content `id`'s data file, if the store holds it.
    pub fn data_length(&self, id: &ContentId) -> Option<u64> {
        fs::metadata(self.data_path(id)).ok().map(|m| m.len())
    }

    /// Makes a completed fill a content of the store: `staging` holds its verified `data`;
    /// `manifest` (the signed manifest's bytes, checked to describe `id`) is written beside it,
    /// both are synced, and the directory is renamed to the content's in one step, so the
    /// server never sees a part of it.
    pub fn install_fill(&self, staging: &Path, id: &ContentId, manifest: &[u8]) -> Result<(), StoreError> {
        let manifest_path = staging.join(MANIFEST_FILE);
        let signed = SignedManifest::decode(manifest).map_err(|source| StoreError::Manifest {
            path: manifest_path.clone(),
            source,
        })?;
        if signed.content_id() != *id {
            return Err(StoreError::WrongId {
                path: manifest_path,
                manifest: content_id_hex(&signed.content_id()),
                directory: content_id_hex(id),
            });
        }
        let data_path = staging.join(DATA_FILE);
        File::open(&data_path)
            .and_then(|f| f.sync_all())
            .map_err(io_err(&data_path))?;
        write_synced(&manifest_path, manifest)?;
        sync_dir(staging)?;
        let target = self.content_dir(id);
        match fs::rename(staging, &target) {
            Ok(()) => sync_dir(&self.contents),
            Err(_) if target.join(MANIFEST_FILE).is_file() => {
                let _ = fs::remove_dir_all(staging);
                Ok(())
            }
            Err(e) => Err(io_err(&target)(e)),
        }
    }

    /// Removes content `id`: its directory is renamed away in one step (the server stops
    /// finding it at once) and then deleted.
    pub fn remove(&self, id: &ContentId) -> Result<(), StoreError> {
        let dir = self.content_dir(id);
        let doomed = self.contents.join(format!("{EVICT_PREFIX}{}", random_suffix()));
        fs::rename(&dir, &doomed).map_err(io_err(&dir))?;
        sync_dir(&self.contents)?;
        fs::remove_dir_all(&doomed).map_err(io_err(&doomed))
    }

    /// The contents whose fill directory exists (a fill in progress or interrupted).
    pub fn fills(&self) -> Vec<ContentId> {
        let Ok(entries) = fs::read_dir(&self.contents) else {
            return Vec::new();
        };
        let mut ids: Vec<ContentId> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name();
                parse_content_id(name.to_str()?.strip_prefix(FILL_PREFIX)?).ok()
            })
            .collect();
        ids.sort();
        ids
    }

    /// Imports the file at `path`; see [`Store::add_with_progress`].
    pub fn add(&self, path: impl AsRef<Path>) -> Result<ContentId, StoreError> {
        self.add_with_progress(path, |_| {})
    }

    /// Imports the file at `path`, reading it once: its bytes are copied into the store while
    /// its manifest is built (`DEFAULT_PACKET_SIZE`, `DEFAULT_BLOCK_SIZE`) and signed with the
    /// store's key. `progress` is told the bytes done so far. The same file gets the same id
    /// in every store; importing a content the store holds already changes nothing.
    pub fn add_with_progress(
        &self,
        path: impl AsRef<Path>,
        progress: impl FnMut(u64),
    ) -> Result<ContentId, StoreError> {
        self.add_files(&[path.as_ref()], None, progress)
    }

    /// Imports `files` back to back as one content whose manifest carries `video` (an MP4: one
    /// file; HLS: the files of `video.files`, in that order, each of the length the table
    /// says). Otherwise as [`Store::add_with_progress`].
    pub fn add_files(
        &self,
        files: &[&Path],
        video: Option<VideoInfo>,
        mut progress: impl FnMut(u64),
    ) -> Result<ContentId, StoreError> {
        let staging = self.contents.join(format!("{IMPORT_PREFIX}{}", random_suffix()));
        fs::create_dir(&staging).map_err(io_err(&staging))?;
        let result = self.import(files, video, &staging, &mut progress);
        if result.is_err() {
            let _ = fs::remove_dir_all(&staging);
        }
        result
    }

    fn import(
        &self,
        files: &[&Path],
        video: Option<VideoInfo>,
        staging: &Path,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ContentId, StoreError> {
        let mut builder =
            pcdn_core::Manifest::builder(DEFAULT_PACKET_SIZE, DEFAULT_BLOCK_SIZE).expect("the default sizes are valid");
        let data_path = staging.join(DATA_FILE);
        let mut data = File::create(&data_path).map_err(io_err(&data_path))?;
        let mut chunk = vec![0u8; IMPORT_CHUNK];
        let mut done = 0u64;
        for (index, &path) in files.iter().enumerate() {
            let mut source = File::open(path).map_err(io_err(path))?;
            let start = done;
            loop {
                let n = match source.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(io_err(path)(e)),
                };
                builder.update(&chunk[..n]);
                data.write_all(&chunk[..n]).map_err(io_err(&data_path))?;
                done += n as u64;
                progress(done);
            }
            // The file table was measured before the import: a file that changed since would
            // give a table that no longer matches the bytes.
            let expected = video.as_ref().and_then(|v| v.files.get(index)).map(|f| f.length);
            if expected.is_some_and(|length| length != done - start) {
                return Err(io_err(path)(io::Error::other(format!(
                    "changed during the import: {} bytes read, {} expected",
                    done - start,
                    expected.unwrap_or_default()
                ))));
            }
        }
        data.sync_all().map_err(io_err(&data_path))?;
        drop(data);

        let mut manifest = builder.finish();
        if let Some(video) = video {
            let source_name = files.first().map_or_else(PathBuf::new, |p| p.to_path_buf());
            manifest = manifest.with_video(video).map_err(|source| StoreError::Manifest {
                path: source_name,
                source,
            })?;
        }
        let signed = SignedManifest::sign(manifest, &self.key);
        let id = signed.content_id();
        let manifest_path = staging.join(MANIFEST_FILE);
        write_synced(&manifest_path, &signed.encode())?;
        sync_dir(staging)?;

        let target = self.content_dir(&id);
        match fs::rename(staging, &target) {
            Ok(()) => sync_dir(&self.contents)?,
            // Another import of the same bytes won the race, or the content was there already:
            // the content directory is complete either way.
            Err(_) if target.join(MANIFEST_FILE).is_file() => {
                let _ = fs::remove_dir_all(staging);
            }
            Err(e) => return Err(io_err(&target)(e)),
        }
        Ok(id)
    }

    /// The ids of the contents in the store, sorted.
    pub fn list(&self) -> Result<Vec<ContentId>, StoreError> {
        let mut ids = Vec::new();
        for entry in fs::read_dir(&self.contents).map_err(io_err(&self.contents))? {
            let entry = entry.map_err(io_err(&self.contents))?;
            if let Some(id) = entry.file_name().to_str().and_then(|n| parse_content_id(n).ok()) {
                ids.push(id);
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// The encoded signed manifest of content `id`, as stored.
    pub fn manifest_bytes(&self, id: &ContentId) -> Result<Vec<u8>, StoreError> {
        let path = self.content_dir(id).join(MANIFEST_FILE);
        fs::read(&path).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                StoreError::NotFound(content_id_hex(id))
            } else {
                io_err(&path)(e)
            }
        })
    }

    /// The signed manifest of content `id`, decoded and checked to describe that id.
    pub fn manifest(&self, id: &ContentId) -> Result<SignedManifest, StoreError> {
        let path = self.content_dir(id).join(MANIFEST_FILE);
        let bytes = self.manifest_bytes(id)?;
        let signed = SignedManifest::decode(&bytes).map_err(|source| StoreError::Manifest {
            path: path.clone(),
            source,
        })?;
        if signed.content_id() != *id {
            return Err(StoreError::WrongId {
                path,
                manifest: content_id_hex(&signed.content_id()),
                directory: content_id_hex(id),
            });
        }
        Ok(signed)
    }

    /// A content source over this store for a server sending packets of `packet_size` bytes.
    pub fn source(&self, packet_size: u32) -> StoreSource {
        StoreSource {
            store: self.clone(),
            packet_size,
            open: Arc::new(RwLock::new(IdMap::default())),
            unservable: Arc::new(RwLock::new(IdMap::default())),
            served: Arc::new(RwLock::new(IdMap::default())),
            warnings: Arc::new(LogLimiter::new(WARN_INTERVAL)),
        }
    }
}

/// Reads the key at `path`, or creates it from 32 bytes of OS randomness with mode 0600. The
/// key is written to a private temporary file and hard-linked into place, which fails if
/// another process got there first: nobody ever reads a half-written key.
fn load_or_create_key(path: &Path) -> Result<SigningKey, StoreError> {
    match fs::read(path) {
        Ok(bytes) => return key_from_bytes(path, &bytes),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(path)(e)),
    }
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| io_err(path)(io::Error::other(e)))?;
    let temp = path.with_file_name(format!(".key-{}", random_suffix()));
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&temp).and_then(|mut f| {
        f.write_all(&secret)?;
        f.sync_all()
    });
    let linked = written.and_then(|()| fs::hard_link(&temp, path));
    let _ = fs::remove_file(&temp);
    match linked {
        Ok(()) => {
            if let Some(parent) = path.parent() {
                sync_dir(parent)?;
            }
            Ok(SigningKey::from_bytes(&secret))
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let bytes = fs::read(path).map_err(io_err(path))?;
            key_from_bytes(path, &bytes)
        }
        Err(e) => Err(io_err(path)(e)),
    }
}

fn key_from_bytes(path: &Path, bytes: &[u8]) -> Result<SigningKey, StoreError> {
    let secret: [u8; 32] = bytes.try_into().map_err(|_| StoreError::BadKey {
        path: path.to_path_buf(),
        len: bytes.len() as u64,
    })?;
    #[cfg(unix)]
    if let Ok(meta) = fs::metadata(path) {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(path = %path.display(), "the store key is readable by other users; chmod 600 it");
        }
    }
    Ok(SigningKey::from_bytes(&secret))
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut file = File::create(path).map_err(io_err(path))?;
    file.write_all(bytes).map_err(io_err(path))?;
    file.sync_all().map_err(io_err(path))
}

/// Makes a directory's entries (a new file, a rename) durable.
fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    #[cfg(unix)]
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_err(dir))?;
    Ok(())
}

fn remove_stale_imports(contents: &Path) {
    let Ok(entries) = fs::read_dir(contents) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // An eviction interrupted by a crash: the content was gone from the store already.
        if name.starts_with(EVICT_PREFIX) {
            let _ = fs::remove_dir_all(entry.path());
            continue;
        }
        let stale = name.starts_with(IMPORT_PREFIX)
            && entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| SystemTime::now().duration_since(t).unwrap_or_default() > STALE_IMPORT_AGE);
        if stale {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// 16 hex characters of OS randomness for temporary names.
pub(crate) fn random_suffix() -> String {
    let mut bytes = [0u8; 8];
    // A clock-derived name would do where the OS has no randomness; collisions only fail an import.
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        bytes = (nanos as u64 ^ u64::from(std::process::id())).to_le_bytes();
    }
    hex::encode(bytes)
}

/// Hashes a content id by its first eight bytes: ids are BLAKE3 outputs, uniform already,
/// and the map is looked up once per packet sent, where SipHash showed in profiles. Only the
/// store's own contents are ever inserted, so peers cannot choose colliding keys.
#[derive(Clone, Copy, Debug, Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // The id's bytes arrive in one write (after the slice's length, which is mixed in).
        let mut word = [0u8; 8];
        let n = bytes.len().min(8);
        word[..n].copy_from_slice(&bytes[..n]);
        self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(word);
    }
}

type IdMap<V> = HashMap<ContentId, V, std::hash::BuildHasherDefault<IdHasher>>;

/// One content open for reading.
struct Opened {
    file: File,
    length: u64,
}

/// The server's [`ContentSource`] over a [`Store`]: each content's data file is opened on
/// first use and read with positioned reads (`pread`), and a content imported after the server
/// started is found on its first miss (one directory lookup).
///
/// A data file truncated under the server (by hand, outside pcdn) makes the reads past its
/// new end fail: the content is dropped (its clients get REJECT UnknownContent, its next HELLO
/// finds the length wrong) and every other content is served on. A memory map would turn the
/// same reads into SIGBUS, which kills the process.
#[derive(Clone)]
pub struct StoreSource {
    store: Store,
    packet_size: u32,
    open: Arc<RwLock<IdMap<Arc<Opened>>>>,
    /// Contents found unservable, and when; looked at again after [`RETRY_UNSERVABLE`].
    unservable: Arc<RwLock<IdMap<std::time::Instant>>>,
    /// When each content was last asked for (a HELLO), for a cache's least-recently-served
    /// eviction.
    served: Arc<RwLock<IdMap<SystemTime>>>,
    warnings: Arc<LogLimiter>,
}

impl std::fmt::Debug for StoreSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreSource")
            .field("store", &self.store)
            .field("packet_size", &self.packet_size)
            .finish()
    }
}

impl StoreSource {
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// When each content was last asked for since the server started.
    pub fn last_served(&self) -> Vec<(ContentId, SystemTime)> {
        let served = self.served.read().expect("store map lock");
        served.iter().map(|(id, at)| (*id, *at)).collect()
    }

    /// Closes content `id` (removed from the store): its sessions get no more bytes and its
    /// file's disk space is freed.
    pub fn forget(&self, id: &ContentId) {
        self.open.write().expect("store map lock").remove(id);
        self.served.write().expect("store map lock").remove(id);
    }

    fn get(&self, id: &ContentId) -> Option<Arc<Opened>> {
        if let Some(m) = self.open.read().expect("store map lock").get(id) {
            return Some(m.clone());
        }
        if let Some(since) = self.unservable.read().expect("store map lock").get(id) {
            if since.elapsed() < RETRY_UNSERVABLE {
                return None;
            }
        }
        let dir = self.store.content_dir(id);
        // The cheap check first: a miss for a content the store lacks costs one failed lookup.
        if !dir.is_dir() {
            return None;
        }
        match self.load(id, &dir) {
            Ok(opened) => {
                let opened = Arc::new(opened);
                self.unservable.write().expect("store map lock").remove(id);
                self.open.write().expect("store map lock").insert(*id, opened.clone());
                Some(opened)
            }
            Err((cause, message)) => {
                // Only contents of the store get here, so the map is as bounded as the store.
                self.unservable
                    .write()
                    .expect("store map lock")
                    .insert(*id, std::time::Instant::now());
                self.warn(id, cause, &message);
                None
            }
        }
    }

    /// Logs `message` about content `id`, rate-limited per content and `cause`.
    fn warn(&self, id: &ContentId, cause: &str, message: &str) {
        let content = content_id_hex(id);
        if let Some(suppressed) = self.warnings.allow(&format!("{content} {cause}")) {
            tracing::warn!(%content, suppressed, "content not served: {message}");
        }
    }

    /// Opens content `id` if the store holds it, complete and cut to this server's packet
    /// size; otherwise the cause (a short fixed name) and what is wrong.
    fn load(&self, id: &ContentId, dir: &Path) -> Result<Opened, (&'static str, String)> {
        let manifest = self
            .store
            .manifest(id)
            .map_err(|e| ("manifest", e.to_string()))?
            .manifest;
        if manifest.packet_size != self.packet_size {
            return Err((
                "packet size",
                format!(
                    "its packet size {} differs from the server's {}",
                    manifest.packet_size, self.packet_size
                ),
            ));
        }
        let path = dir.join(DATA_FILE);
        let file = File::open(&path).map_err(|e| ("data", format!("{}: {e}", path.display())))?;
        let length = file
            .metadata()
            .map_err(|e| ("data", format!("{}: {e}", path.display())))?
            .len();
        if length != manifest.length {
            return Err((
                "length",
                format!(
                    "{}: {length} bytes, the manifest says {}",
                    path.display(),
                    manifest.length
                ),
            ));
        }
        Ok(Opened { file, length })
    }

    /// Reads `buf.len()` bytes at `offset`, all or nothing.
    fn read_at(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        #[cfg(unix)]
        return file.read_exact_at(buf, offset);
        #[cfg(not(unix))]
        {
            use std::io::Seek;
            let mut f = file;
            f.seek(io::SeekFrom::Start(offset))?;
            f.read_exact(buf)
        }
    }
}

impl ContentSource for StoreSource {
    fn info(&self, id: &ContentId) -> Option<ContentInfo> {
        let opened = self.get(id)?;
        // Once per HELLO, not per packet: a lock per session start costs nothing measurable.
        self.served
            .write()
            .expect("store map lock")
            .insert(*id, SystemTime::now());
        Some(ContentInfo { length: opened.length })
    }

    fn read(&self, id: &ContentId, offset: u64, buf: &mut [u8]) -> bool {
        // `info` opened the content before any session could ask for its bytes.
        let Some(opened) = self.open.read().expect("store map lock").get(id).cloned() else {
            return false;
        };
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|end| end > opened.length)
        {
            return false;
        }
        match Self::read_at(&opened.file, offset, buf) {
            Ok(()) => true,
            Err(e) => {
                // Truncated or failing under us: drop it, so the next HELLO looks again.
                self.open.write().expect("store map lock").remove(id);
                let path = self.store.data_path(id);
                self.warn(
                    id,
                    "read",
                    &format!("{}: reading {} bytes at {offset}: {e}", path.display(), buf.len()),
                );
                false
            }
        }
    }
}
