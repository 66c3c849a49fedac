//! The fetch's output: a resumable partial file `OUT.pcdn-partial` beside the output, whose
//! blocks are checked against the manifest when a fetch starts, filled in by the download, and
//! renamed to `OUT` once complete.
//!
//! No sidecar records what was fetched: every block of a partial file left by an earlier run is
//! hashed again and kept only if it matches the signed manifest, so a crash, a power cut, a
//! partial file of another content or bytes edited by hand cost at most a refetch, never a
//! wrong output.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::{FileExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use pcdn_core::Manifest;

use super::{FetchError, setup};

/// What a partial file is called beside its output: `OUT` + this.
pub const PARTIAL_SUFFIX: &str = ".pcdn-partial";

/// The partial file of `output`: `OUT.pcdn-partial` in the same directory (so the final rename
/// stays on one file system).
pub fn partial_path(output: &Path) -> Result<PathBuf, FetchError> {
    let name = output
        .file_name()
        .ok_or_else(|| setup(format!("-o {}: not a file name", output.display())))?;
    let mut partial = name.to_os_string();
    partial.push(PARTIAL_SUFFIX);
    Ok(output.with_file_name(partial))
}

/// The output's partial file, open and locked, and the byte ranges still to fetch.
#[derive(Debug)]
pub struct Output {
    final_path: PathBuf,
    partial_path: PathBuf,
    file: Option<File>,
    /// Block-aligned byte ranges the download fills, ascending.
    missing: Vec<Range<u64>>,
    /// Index into `missing` and the file offset of the next byte the download hands over.
    range: usize,
    at: u64,
    /// Bytes of verified blocks found in the partial file at the start.
    resumed: u64,
    /// Bytes written by this run.
    written: u64,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FetchError + '_ {
    move |source| FetchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Output {
    /// Opens (or creates) `output`'s partial file, takes an exclusive lock on it (a second
    /// fetch to the same output fails rather than interleave), sizes it to the content and
    /// keeps every block that matches `manifest`.
    pub fn open(output: &Path, manifest: &Manifest) -> Result<Output, FetchError> {
        let partial_path = partial_path(output)?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            // A symlink planted at the partial's name must not redirect the writes.
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&partial_path)
            .map_err(io(&partial_path))?;
        // SAFETY: flock on a descriptor this function owns; no memory is involved.
        if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(if e.kind() == std::io::ErrorKind::WouldBlock {
                setup(format!(
                    "{}: another pcdn fetch is writing this output",
                    partial_path.display()
                ))
            } else {
                FetchError::Io {
                    path: partial_path,
                    source: e,
                }
            });
        }
        let found = file.metadata().map_err(io(&partial_path))?.len();
        if found != manifest.length {
            file.set_len(manifest.length).map_err(io(&partial_path))?;
        }
        let verified = if found == 0 {
            Vec::new()
        } else {
            verified_blocks(&file, &partial_path, manifest, found.min(manifest.length))?
        };
        let mut missing: Vec<Range<u64>> = Vec::new();
        let mut resumed = 0;
        for block in 0..manifest.block_count() {
            let range = manifest.block_range(block);
            if verified.get(block as usize).copied().unwrap_or(false) {
                resumed += range.end - range.start;
                continue;
            }
            match missing.last_mut() {
                Some(last) if last.end == range.start => last.end = range.end,
                _ => missing.push(range),
            }
        }
        let at = missing.first().map_or(0, |r| r.start);
        Ok(Output {
            final_path: output.to_path_buf(),
            partial_path,
            file: Some(file),
            missing,
            range: 0,
            at,
            resumed,
            written: 0,
        })
    }

    /// The block-aligned byte ranges the download must fetch, ascending; empty: none.
    pub fn missing(&self) -> &[Range<u64>] {
        &self.missing
    }

    /// Bytes of verified blocks the partial file already held.
    pub fn resumed(&self) -> u64 {
        self.resumed
    }

    /// The partial file's path.
    pub fn partial_path(&self) -> &Path {
        &self.partial_path
    }

    /// Writes the download's next verified bytes, which fill `missing` in order.
    pub fn write(&mut self, mut bytes: &[u8]) -> Result<(), FetchError> {
        let file = self.file.as_ref().expect("open until finished");
        while !bytes.is_empty() {
            let Some(range) = self.missing.get(self.range) else {
                return Err(setup(format!(
                    "{}: {} bytes past the missing ranges",
                    self.partial_path.display(),
                    bytes.len()
                )));
            };
            let n = (range.end - self.at).min(bytes.len() as u64) as usize;
            file.write_all_at(&bytes[..n], self.at)
                .map_err(io(&self.partial_path))?;
            self.at += n as u64;
            self.written += n as u64;
            bytes = &bytes[n..];
            if self.at == range.end {
                self.range += 1;
                self.at = self.missing.get(self.range).map_or(self.at, |r| r.start);
            }
        }
        Ok(())
    }

    /// Syncs the file and renames it to the output path (the directory synced too).
    pub fn finish(mut self) -> Result<(), FetchError> {
        let file = self.file.take().expect("finished once");
        file.sync_all().map_err(io(&self.partial_path))?;
        std::fs::rename(&self.partial_path, &self.final_path).map_err(io(&self.final_path))?;
        // The lock goes with the descriptor, after the rename: no other fetch opens the
        // partial file in between and sees it vanish.
        drop(file);
        if let Some(parent) = self.final_path.parent() {
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            File::open(parent).and_then(|d| d.sync_all()).map_err(io(parent))?;
        }
        Ok(())
    }
}

impl Drop for Output {
    /// Not finished (failed, timed out, interrupted): the partial file stays for the next run
    /// if it holds a verified block, and goes otherwise, so a fetch that got nothing leaves
    /// nothing.
    fn drop(&mut self) {
        if self.file.take().is_some() && self.resumed == 0 && self.written == 0 {
            let _ = std::fs::remove_file(&self.partial_path);
        }
    }
}

/// Which of `manifest`'s blocks the first `len` bytes of `file` hold intact.
fn verified_blocks(file: &File, path: &Path, manifest: &Manifest, len: u64) -> Result<Vec<bool>, FetchError> {
    let mut verified = Vec::with_capacity(manifest.block_count() as usize);
    let mut buf = vec![0u8; manifest.block_size as usize];
    for block in 0..manifest.block_count() {
        let range = manifest.block_range(block);
        if range.end > len {
            break;
        }
        let data = &mut buf[..(range.end - range.start) as usize];
        file.read_exact_at(data, range.start).map_err(io(path))?;
        verified.push(manifest.verify_block(block, data));
    }
    Ok(verified)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        blake3::Hasher::new().update(b"output").finalize_xof().fill(&mut out);
        out
    }

    #[test]
    fn a_partial_file_resumes_from_its_verified_blocks_only() {
        let data = sample(10 * 4000 + 123);
        let manifest = Manifest::from_bytes(&data, 100, 4000).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.bin");
        let partial = dir.path().join("out.bin.pcdn-partial");
        // Blocks 0-2 intact, block 3 corrupt, block 4 intact, the rest never written.
        let mut bytes = data[..5 * 4000].to_vec();
        bytes[3 * 4000 + 17] ^= 1;
        std::fs::write(&partial, &bytes).unwrap();
        let mut output = Output::open(&out, &manifest).unwrap();
        assert_eq!(output.resumed(), 4 * 4000);
        assert_eq!(output.missing(), [3 * 4000..4 * 4000, 5 * 4000..data.len() as u64]);
        // A second fetch of the same output is refused while this one holds it.
        let e = Output::open(&out, &manifest).unwrap_err().to_string();
        assert!(e.contains("another pcdn fetch"), "{e}");
        // The download hands the missing bytes over in order, in chunks of any size.
        let mut rest = data[3 * 4000..4 * 4000].to_vec();
        rest.extend_from_slice(&data[5 * 4000..]);
        for chunk in rest.chunks(777) {
            output.write(chunk).unwrap();
        }
        assert!(output.write(b"x").is_err());
        output.finish().unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), data);
        assert!(!partial.exists());
    }

    #[test]
    fn a_fetch_that_got_nothing_leaves_nothing_and_one_that_got_a_block_keeps_it() {
        let data = sample(3 * 4000);
        let manifest = Manifest::from_bytes(&data, 100, 4000).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.bin");
        let partial = partial_path(&out).unwrap();
        drop(Output::open(&out, &manifest).unwrap());
        assert!(!partial.exists(), "nothing fetched, nothing left");
        let mut output = Output::open(&out, &manifest).unwrap();
        output.write(&data[..4000]).unwrap();
        drop(output);
        assert!(partial.exists(), "a verified block is kept for the next run");
        let output = Output::open(&out, &manifest).unwrap();
        assert_eq!(output.resumed(), 4000);
        assert!(!out.exists());
        // A partial file longer than the content (another content's) is cut to length.
        drop(output);
        let mut longer = data.clone();
        longer.extend_from_slice(&[9; 5000]);
        std::fs::write(&partial, &longer).unwrap();
        let output = Output::open(&out, &manifest).unwrap();
        assert_eq!((output.resumed(), output.missing().len()), (3 * 4000, 0));
        output.finish().unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), data);
    }

    #[test]
    fn a_symlink_at_the_partial_name_is_not_followed() {
        let data = sample(4000);
        let manifest = Manifest::from_bytes(&data, 100, 4000).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"keep me").unwrap();
        let out = dir.path().join("out.bin");
        std::os::unix::fs::symlink(&target, partial_path(&out).unwrap()).unwrap();
        assert!(Output::open(&out, &manifest).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    }
}
