//! Reads a video's metadata for `pcdn add --video`: an MP4 file (mp4parse) or an HLS folder (a
//! media playlist and its segments, m3u8-rs), giving the manifest's `VideoInfo` and the files
//! to store back to back.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use pcdn_core::manifest::{Container, VideoFile, VideoInfo};

/// Why a video could not be imported; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum VideoError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not an MP4 file ({reason})", path.display())]
    NotMp4 { path: PathBuf, reason: String },
    #[error("{}: the MP4 has no track with a duration (fragmented MP4 is not supported)", path.display())]
    NoDuration { path: PathBuf },
    #[error("{}: no HLS playlist (a *.m3u8 file) in the folder", dir.display())]
    NoPlaylist { dir: PathBuf },
    #[error("{}: several playlists ({}); import a folder with one media playlist", dir.display(), names.join(", "))]
    SeveralPlaylists { dir: PathBuf, names: Vec<String> },
    #[error("{}: {reason}", path.display())]
    BadPlaylist { path: PathBuf, reason: String },
    #[error("{}: segment missing (listed in {})", segment.display(), playlist.display())]
    SegmentMissing { segment: PathBuf, playlist: PathBuf },
    #[error(
        "{}: the movie box (moov) comes after the media data (mdat), so a player could show nothing \
         before the whole file arrived; move it to the front with \
         `ffmpeg -i {} -c copy -movflags +faststart OUT.mp4` and import OUT.mp4",
        path.display(),
        path.display()
    )]
    MoovAtEnd { path: PathBuf },
}

/// A video ready to import: its metadata and the files whose bytes, back to back, are the content.
#[derive(Clone, Debug, PartialEq)]
pub struct VideoImport {
    pub info: VideoInfo,
    pub files: Vec<PathBuf>,
}

/// Probes `path`: a folder is HLS, a file is MP4.
pub fn probe(path: &Path) -> Result<VideoImport, VideoError> {
    let meta = std::fs::metadata(path).map_err(io_error(path))?;
    if meta.is_dir() {
        probe_hls(path)
    } else {
        probe_mp4(path)
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> VideoError + '_ {
    move |source| VideoError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The average bitrate of `bytes` played over `duration_ms`: the rate at which the player
/// consumes the content's bytes, container overhead included, so byte deadlines fall on the
/// content's own bytes. Rounded down, so the player model's video never outgrows the content.
fn average_bitrate(bytes: u64, duration_ms: u64) -> u64 {
    let bits = u128::from(bytes) * 8 * 1000;
    u64::try_from(bits / u128::from(duration_ms.max(1)))
        .unwrap_or(u64::MAX)
        .max(1)
}

/// A bitrate in kbit/s as every command prints it: rounded to the nearest.
pub fn kbit_per_s(bps: u64) -> u64 {
    bps.saturating_add(500) / 1000
}

/// An MP4 file: its duration is the longest track's (mdhd duration ÷ timescale, ISO/IEC
/// 14496-12 §8.4.2), its bitrate the file's bytes over that duration.
pub fn probe_mp4(path: &Path) -> Result<VideoImport, VideoError> {
    let mut file = File::open(path).map_err(io_error(path))?;
    let length = file.metadata().map_err(io_error(path))?.len();
    if first_of_moov_and_mdat(&mut file, length).map_err(io_error(path))? == Some(*b"mdat") {
        return Err(VideoError::MoovAtEnd {
            path: path.to_path_buf(),
        });
    }
    file.rewind().map_err(io_error(path))?;
    let context = mp4parse::read_mp4(&mut BufReader::with_capacity(1 << 16, file)).map_err(|e| match e {
        mp4parse::Error::Io(source) if source.kind() != std::io::ErrorKind::UnexpectedEof => VideoError::Io {
            path: path.to_path_buf(),
            source,
        },
        mp4parse::Error::MoovMissing => VideoError::NotMp4 {
            path: path.to_path_buf(),
            reason: "no movie box (moov)".to_owned(),
        },
        other => VideoError::NotMp4 {
            path: path.to_path_buf(),
            reason: format!("its ISO base media boxes do not parse: {other:?}"),
        },
    })?;
    let duration_ms = context
        .tracks
        .iter()
        .filter_map(|track| {
            let (duration, scale) = (track.duration?.0, track.timescale?.0);
            (scale > 0).then(|| (u128::from(duration) * 1000).div_ceil(u128::from(scale)))
        })
        .max()
        .filter(|&ms| ms > 0)
        .ok_or_else(|| VideoError::NoDuration {
            path: path.to_path_buf(),
        })?;
    let duration_ms = u64::try_from(duration_ms).unwrap_or(u64::MAX);
    Ok(VideoImport {
        info: VideoInfo {
            bitrate_bps: average_bitrate(length, duration_ms),
            duration_ms,
            container: Container::Mp4,
            files: Vec::new(),
        },
        files: vec![path.to_path_buf()],
    })
}

/// Which of `moov` and `mdat` comes first among the top-level boxes of an ISO base media file
/// (box headers per ISO/IEC 14496-12 §4.2: a 32-bit size, the type, a 64-bit size when the
/// first is 1, and 0 for "to the end of the file"); `None` if neither is found, or the boxes
/// stop parsing (mp4parse then says why).
fn first_of_moov_and_mdat(file: &mut (impl Read + Seek), length: u64) -> std::io::Result<Option<[u8; 4]>> {
    let mut at = 0u64;
    while at + 8 <= length {
        file.seek(SeekFrom::Start(at))?;
        let mut header = [0u8; 16];
        file.read_exact(&mut header[..8])?;
        let kind: [u8; 4] = header[4..8].try_into().expect("four bytes");
        if &kind == b"moov" || &kind == b"mdat" {
            return Ok(Some(kind));
        }
        let size = match u32::from_be_bytes(header[..4].try_into().expect("four bytes")) {
            0 => return Ok(None),
            1 if at + 16 <= length => {
                file.read_exact(&mut header[8..16])?;
                u64::from_be_bytes(header[8..16].try_into().expect("eight bytes"))
            }
            size => u64::from(size),
        };
        if size < 8 {
            return Ok(None);
        }
        at = at.saturating_add(size);
    }
    Ok(None)
}

/// An HLS folder: its one media playlist, then every file the playlist names (an
/// `EXT-X-MAP` initialisation section before the first segment that uses it), in playlist
/// order. The duration is the sum of the `EXTINF` durations (RFC 8216 §4.3.2.1).
pub fn probe_hls(dir: &Path) -> Result<VideoImport, VideoError> {
    let mut playlists = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".m3u8") && entry.path().is_file() {
            playlists.push(name);
        }
    }
    playlists.sort();
    let playlist_name = match playlists.as_slice() {
        [] => return Err(VideoError::NoPlaylist { dir: dir.to_path_buf() }),
        [one] => one.clone(),
        _ => {
            return Err(VideoError::SeveralPlaylists {
                dir: dir.to_path_buf(),
                names: playlists,
            });
        }
    };
    let playlist_path = dir.join(&playlist_name);
    let bad = |reason: String| VideoError::BadPlaylist {
        path: playlist_path.clone(),
        reason,
    };
    pcdn_core::manifest::check_file_name(&playlist_name)
        .map_err(|why| bad(format!("not a name a manifest may carry: {why}")))?;
    let text = std::fs::read(&playlist_path).map_err(io_error(&playlist_path))?;
    let media = match m3u8_rs::parse_playlist_res(&text) {
        Ok(m3u8_rs::Playlist::MediaPlaylist(media)) => media,
        Ok(m3u8_rs::Playlist::MasterPlaylist(_)) => {
            return Err(bad(
                "a master playlist (a bitrate ladder); import the folder of one media playlist".to_owned(),
            ));
        }
        Err(e) => return Err(bad(format!("not an HLS playlist: {e:?}"))),
    };
    if media.segments.is_empty() {
        return Err(bad("the playlist lists no segment".to_owned()));
    }
    let mut names: Vec<String> = vec![playlist_name.clone()];
    let mut seconds = 0f64;
    for segment in &media.segments {
        if let Some(map) = &segment.map {
            push_file(&mut names, &map.uri).map_err(&bad)?;
        }
        push_file(&mut names, &segment.uri).map_err(&bad)?;
        seconds += f64::from(segment.duration);
    }
    let duration_ms = (seconds * 1000.0).round() as u64;
    if duration_ms == 0 {
        return Err(bad("the segments' durations add up to zero".to_owned()));
    }
    let mut files = Vec::with_capacity(names.len());
    let mut table = Vec::with_capacity(names.len());
    let mut offset = 0u64;
    for name in names {
        let path = dir.join(&name);
        let length = match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => meta.len(),
            Ok(_) => {
                return Err(VideoError::SegmentMissing {
                    segment: path,
                    playlist: playlist_path,
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(VideoError::SegmentMissing {
                    segment: path,
                    playlist: playlist_path,
                });
            }
            Err(e) => return Err(io_error(&path)(e)),
        };
        table.push(VideoFile { name, offset, length });
        offset += length;
        files.push(path);
    }
    Ok(VideoImport {
        info: VideoInfo {
            bitrate_bps: average_bitrate(offset, duration_ms),
            duration_ms,
            container: Container::Hls,
            files: table,
        },
        files,
    })
}

/// Adds a playlist URI to the file list once; it must name a file in the playlist's folder,
/// in the characters a manifest's file table allows (they reach players' pages and URLs).
fn push_file(names: &mut Vec<String>, uri: &str) -> Result<(), String> {
    if let Err(why) = pcdn_core::manifest::check_file_name(uri) {
        return Err(format!(
            "segment URI {uri:?} is not a plain file name in the playlist's folder ({why}; absolute or nested URIs are not supported)"
        ));
    }
    if !names.iter().any(|n| n == uri) {
        names.push(uri.to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, bytes: &[u8]) {
        std::fs::write(dir.join(name), bytes).unwrap();
    }

    const PLAYLIST: &str = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0\n\
        #EXTINF:2.000000,\nseg0.ts\n#EXTINF:2.000000,\nseg1.ts\n#EXTINF:1.500000,\nseg2.ts\n#EXT-X-ENDLIST\n";

    #[test]
    fn an_hls_folder_becomes_one_table_in_playlist_order() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "index.m3u8", PLAYLIST.as_bytes());
        for (name, len) in [("seg0.ts", 1000), ("seg1.ts", 2000), ("seg2.ts", 500)] {
            write(dir.path(), name, &vec![7u8; len]);
        }
        write(dir.path(), "notes.txt", b"not listed, not stored");
        let import = probe(dir.path()).unwrap();
        let names: Vec<&str> = import.info.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["index.m3u8", "seg0.ts", "seg1.ts", "seg2.ts"]);
        assert_eq!(import.info.duration_ms, 5500);
        let total = PLAYLIST.len() as u64 + 3500;
        assert_eq!(import.info.files.last().unwrap().range().end, total);
        assert_eq!(import.info.bitrate_bps, total * 8 * 1000 / 5500);
        assert!(
            import.info.spec().total_bytes() <= total,
            "the player's video fits the content"
        );
        assert_eq!(import.files.len(), 4);
        import.info.validate(total).unwrap();
    }

    #[test]
    fn hls_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let e = probe(dir.path()).unwrap_err().to_string();
        assert!(e.contains("no HLS playlist"), "{e}");
        write(dir.path(), "index.m3u8", PLAYLIST.as_bytes());
        write(dir.path(), "seg0.ts", b"x");
        let e = probe(dir.path()).unwrap_err().to_string();
        assert!(e.contains("seg1.ts") && e.contains("segment missing"), "{e}");
        write(dir.path(), "other.m3u8", PLAYLIST.as_bytes());
        let e = probe(dir.path()).unwrap_err().to_string();
        assert!(e.contains("index.m3u8, other.m3u8"), "{e}");
        std::fs::remove_file(dir.path().join("other.m3u8")).unwrap();
        write(
            dir.path(),
            "index.m3u8",
            b"#EXTM3U\n#EXTINF:2,\nhttp://elsewhere/seg.ts\n",
        );
        let e = probe(dir.path()).unwrap_err().to_string();
        assert!(e.contains("index.m3u8") && e.contains("http://elsewhere/seg.ts"), "{e}");
        write(
            dir.path(),
            "index.m3u8",
            b"#EXTM3U\n#EXTINF:2,\n\"><img src=x onerror=alert(1)>.ts\n",
        );
        let e = probe(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("index.m3u8") && e.contains("<img") && e.contains("unreserved"),
            "{e}"
        );
        std::fs::rename(dir.path().join("index.m3u8"), dir.path().join("<b>.m3u8")).unwrap();
        let e = probe(dir.path()).unwrap_err().to_string();
        assert!(e.contains("<b>.m3u8") && e.contains("unreserved"), "{e}");
        std::fs::rename(dir.path().join("<b>.m3u8"), dir.path().join("index.m3u8")).unwrap();
        write(dir.path(), "index.m3u8", b"no playlist at all");
        let e = probe(dir.path()).unwrap_err().to_string();
        assert!(e.contains("index.m3u8") && e.contains("not an HLS playlist"), "{e}");
    }

    /// A top-level ISO BMFF box: a 32-bit size (or 1 and a 64-bit size), its type, `body` bytes.
    fn mp4_box(kind: &[u8; 4], body: usize, large: bool) -> Vec<u8> {
        let mut out = Vec::new();
        if large {
            out.extend(1u32.to_be_bytes());
            out.extend(kind);
            out.extend((16 + body as u64).to_be_bytes());
        } else {
            out.extend((8 + body as u32).to_be_bytes());
            out.extend(kind);
        }
        out.resize(out.len() + body, 0);
        out
    }

    #[test]
    fn an_mp4_whose_moov_follows_its_mdat_is_refused_with_the_command_that_fixes_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("slow.mp4");
        let late = [
            mp4_box(b"ftyp", 16, false),
            mp4_box(b"free", 8, true),
            mp4_box(b"mdat", 4096, false),
            mp4_box(b"moov", 64, false),
        ]
        .concat();
        std::fs::write(&path, &late).unwrap();
        let e = probe(&path).unwrap_err();
        assert!(matches!(e, VideoError::MoovAtEnd { .. }), "{e}");
        let text = e.to_string();
        assert!(
            text.contains("slow.mp4") && text.contains("-movflags +faststart"),
            "{text}"
        );

        let mut file = std::io::Cursor::new(&late);
        assert_eq!(
            first_of_moov_and_mdat(&mut file, late.len() as u64).unwrap(),
            Some(*b"mdat")
        );
        let early = [
            mp4_box(b"ftyp", 16, false),
            mp4_box(b"moov", 64, true),
            mp4_box(b"mdat", 4096, false),
        ]
        .concat();
        let mut file = std::io::Cursor::new(&early);
        assert_eq!(
            first_of_moov_and_mdat(&mut file, early.len() as u64).unwrap(),
            Some(*b"moov")
        );
        // Boxes that stop parsing are left to mp4parse's error.
        let broken = [mp4_box(b"ftyp", 16, false), vec![0, 0, 0, 3, b'x', b'x', b'x', b'x']].concat();
        let mut file = std::io::Cursor::new(&broken);
        assert_eq!(first_of_moov_and_mdat(&mut file, broken.len() as u64).unwrap(), None);
    }

    #[test]
    fn bitrates_print_rounded_to_the_nearest_kbit() {
        assert_eq!(
            (kbit_per_s(1_563_499), kbit_per_s(1_563_500), kbit_per_s(0)),
            (1563, 1564, 0)
        );
    }

    #[test]
    fn a_file_that_is_not_an_mp4_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("clip.mp4");
        std::fs::write(&path, b"this is plain text, not an ISO base media file at all").unwrap();
        let e = probe(&path).unwrap_err();
        assert!(matches!(e, VideoError::NotMp4 { .. }), "{e}");
        assert!(e.to_string().contains("clip.mp4: not an MP4 file"), "{e}");
        let e = probe(&dir.path().join("absent.mp4")).unwrap_err().to_string();
        assert!(e.contains("absent.mp4"), "{e}");
    }
}
