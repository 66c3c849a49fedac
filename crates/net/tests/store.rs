//! The content store: imports are deterministic, atomic and idempotent; the key is private;
//! the content source serves what was imported, including contents added after it started.

mod common;

use std::fs;
use std::path::Path;

use common::random_bytes;
use pcdn_core::ContentSource;
use pcdn_core::manifest::{DEFAULT_BLOCK_SIZE, DEFAULT_PACKET_SIZE};
use pcdn_net::store::{CONTENTS_DIR, KEY_FILE, Store, StoreError, content_id_hex};

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_same_file_gets_the_same_id_in_any_store() {
    let tmp = tempfile::tempdir().unwrap();
    // Three blocks and a bit, so the last block and the last packet are short.
    let data = random_bytes(3 * DEFAULT_BLOCK_SIZE as usize + 1000, 1);
    let file = tmp.path().join("video.bin");
    fs::write(&file, &data).unwrap();

    let a = Store::open(tmp.path().join("a")).unwrap();
    let b = Store::open(tmp.path().join("b")).unwrap();
    let id_a = a.add(&file).unwrap();
    let id_b = b.add(&file).unwrap();
    assert_eq!(id_a, id_b);
    assert_ne!(a.public_key(), b.public_key(), "each store has its own key");

    let expected = pcdn_core::Manifest::from_bytes(&data, DEFAULT_PACKET_SIZE, DEFAULT_BLOCK_SIZE).unwrap();
    assert_eq!(id_a, expected.content_id());
    for store in [&a, &b] {
        assert_eq!(fs::read(store.data_path(&id_a)).unwrap(), data);
        let signed = store.manifest(&id_a).unwrap();
        assert_eq!(signed.manifest, expected);
        assert_eq!(signed.signer, store.public_key());
        signed.verify().unwrap();
        assert_eq!(store.list().unwrap(), vec![id_a]);
    }

    // Importing again changes nothing.
    let manifest_before = a.manifest_bytes(&id_a).unwrap();
    assert_eq!(a.add(&file).unwrap(), id_a);
    assert_eq!(a.list().unwrap(), vec![id_a]);
    assert_eq!(a.manifest_bytes(&id_a).unwrap(), manifest_before);
    assert_eq!(entries(&a.dir().join(CONTENTS_DIR)), vec![content_id_hex(&id_a)]);
}

#[test]
fn an_empty_file_is_a_content_too() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("empty");
    fs::write(&file, b"").unwrap();
    let store = Store::open(tmp.path().join("s")).unwrap();
    let id = store.add(&file).unwrap();
    assert_eq!(store.manifest(&id).unwrap().manifest.length, 0);
    let source = store.source(DEFAULT_PACKET_SIZE);
    assert_eq!(source.info(&id).map(|i| i.length), Some(0));
}

#[test]
fn a_failed_import_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path().join("s")).unwrap();
    // A directory opens as a file but fails on the first read, after the import has begun.
    let not_a_file = tmp.path().join("dir");
    fs::create_dir(&not_a_file).unwrap();
    let e = store.add(&not_a_file).unwrap_err();
    assert!(matches!(e, StoreError::Io { .. }), "{e}");
    assert!(e.to_string().contains("dir"), "the error names the file: {e}");
    assert!(entries(&store.dir().join(CONTENTS_DIR)).is_empty());
    assert!(store.list().unwrap().is_empty());

    let missing = store.add(tmp.path().join("missing")).unwrap_err();
    assert!(missing.to_string().contains("missing"), "{missing}");
    assert!(entries(&store.dir().join(CONTENTS_DIR)).is_empty());
}

#[test]
fn an_interrupted_import_is_invisible_and_cleaned_up_when_stale() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let store = Store::open(&dir).unwrap();
    let data = random_bytes(200_000, 2);
    let file = tmp.path().join("f");
    fs::write(&file, &data).unwrap();
    let id = store.add(&file).unwrap();

    // What a crash between writing and renaming leaves: a complete-looking staging directory.
    let contents = dir.join(CONTENTS_DIR);
    let crashed = contents.join(".import-0123456789abcdef");
    fs::create_dir(&crashed).unwrap();
    fs::copy(store.data_path(&id), crashed.join("data")).unwrap();
    assert_eq!(store.list().unwrap(), vec![id], "staging directories are not contents");

    // Fresh leftovers may be an import in progress in another process: kept.
    drop(Store::open(&dir).unwrap());
    assert!(crashed.exists());
    // A day-old one is a crash's: removed.
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 24 * 3600);
    fs::File::open(&crashed)
        .unwrap()
        .set_times(fs::FileTimes::new().set_modified(old))
        .unwrap();
    drop(Store::open(&dir).unwrap());
    assert!(!crashed.exists());
    assert_eq!(Store::open(&dir).unwrap().list().unwrap(), vec![id]);
}

#[test]
fn concurrent_imports_of_one_file_agree() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("f");
    fs::write(&file, random_bytes(3_000_000, 3)).unwrap();
    let store = Store::open(tmp.path().join("s")).unwrap();
    let ids: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4).map(|_| scope.spawn(|| store.add(&file).unwrap())).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(ids.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(entries(&store.dir().join(CONTENTS_DIR)), vec![content_id_hex(&ids[0])]);
}

#[test]
fn the_key_is_private_stable_and_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let first = Store::open(&dir).unwrap().public_key();
    assert_eq!(Store::open(&dir).unwrap().public_key(), first);
    let key = dir.join(KEY_FILE);
    assert_eq!(fs::read(&key).unwrap().len(), 32);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    }
    fs::write(&key, b"too short").unwrap();
    let e = Store::open(&dir).unwrap_err();
    assert!(matches!(e, StoreError::BadKey { len: 9, .. }), "{e}");
    assert!(e.to_string().contains("key"), "{e}");
}

#[test]
fn the_source_serves_contents_added_after_it_was_made() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path().join("s")).unwrap();
    let source = store.source(DEFAULT_PACKET_SIZE);
    let data = random_bytes(100_000, 4);
    let file = tmp.path().join("f");
    fs::write(&file, &data).unwrap();
    let id = pcdn_core::Manifest::from_bytes(&data, DEFAULT_PACKET_SIZE, DEFAULT_BLOCK_SIZE)
        .unwrap()
        .content_id();
    assert_eq!(source.info(&id), None);

    assert_eq!(store.add(&file).unwrap(), id);
    assert_eq!(source.info(&id).map(|i| i.length), Some(100_000));
    let mut buf = vec![0u8; 1024];
    assert!(source.read(&id, 1024, &mut buf));
    assert_eq!(buf, data[1024..2048]);
    let tail = data.len() - 97 * 1024;
    assert!(source.read(&id, 97 * 1024, &mut buf[..tail]));
    assert_eq!(buf[..tail], data[97 * 1024..]);
    assert!(!source.read(&id, 97 * 1024, &mut buf), "past the end");

    // A server with another packet size does not serve it (its sequence numbers would differ).
    assert_eq!(store.source(1400).info(&id), None);
}
