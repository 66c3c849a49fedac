//! The fetch's output file: written beside the output and renamed into place when complete.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::{FetchError, setup};
use crate::store::random_suffix;

/// The output's temporary file: `OUT.pcdn-partial-<random>` beside it, deleted on drop unless
/// it was renamed into place.
pub(super) struct Output {
    final_path: PathBuf,
    temp_path: PathBuf,
    file: Option<File>,
    written: u64,
}

impl Output {
    pub(super) fn create(path: &Path) -> Result<Output, FetchError> {
        let name = path
            .file_name()
            .ok_or_else(|| setup(format!("-o {}: not a file name", path.display())))?;
        let mut temp_name = name.to_os_string();
        temp_name.push(format!(".pcdn-partial-{}", random_suffix()));
        let temp_path = path.with_file_name(temp_name);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp_path)
            .map_err(|source| FetchError::Io {
                path: temp_path.clone(),
                source,
            })?;
        Ok(Output {
            final_path: path.to_path_buf(),
            temp_path,
            file: Some(file),
            written: 0,
        })
    }

    pub(super) fn write(&mut self, bytes: &[u8]) -> Result<(), FetchError> {
        let file = self.file.as_mut().expect("open until finished");
        file.write_all(bytes).map_err(|source| FetchError::Io {
            path: self.temp_path.clone(),
            source,
        })?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Syncs the file and renames it to the output path.
    pub(super) fn finish(mut self) -> Result<(), FetchError> {
        let file = self.file.take().expect("finished once");
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| FetchError::Io { path, source }
        };
        file.sync_all().map_err(io(&self.temp_path))?;
        drop(file);
        std::fs::rename(&self.temp_path, &self.final_path).map_err(io(&self.final_path))?;
        #[cfg(unix)]
        if let Some(parent) = self.final_path.parent() {
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            File::open(parent).and_then(|d| d.sync_all()).map_err(io(parent))?;
        }
        // Renamed: nothing left to delete.
        self.temp_path.clear();
        Ok(())
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        self.file.take();
        if !self.temp_path.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.temp_path);
        }
    }
}
