//! Reloads by polling, the one way `serve` (configuration, shadows, certificates, client CAs) and
//! the webhook (certificate, reference configuration) see their files change: every
//! [`POLL_INTERVAL`], a digest of the files' names and contents, so that any change, however
//! quick and whatever the file system (ConfigMap volumes swap a symlink), is seen.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

/// How often watched files are read again.
pub const POLL_INTERVAL: Duration = Duration::from_secs(2);

/// Ticks every [`POLL_INTERVAL`]; a tick missed while a reload ran is not made up.
pub fn poll_ticks() -> tokio::time::Interval {
    let mut ticks = tokio::time::interval(POLL_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks
}

/// A digest of the names and contents of a directory's visible files (symlinks followed), so any
/// change, however quick, is seen. Unreadable entries count as their error.
pub fn dir_digest(dir: &Path) -> [u8; 32] {
    let mut hasher = Sha256::new();
    let mut names: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(error) => {
            hasher.update(error.to_string());
            return hasher.finalize().into();
        }
    };
    names.sort();
    for path in names {
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if !hidden && path.is_file() {
            hash_file(&mut hasher, &path);
        }
    }
    hasher.finalize().into()
}

/// A digest of the names and contents of `files`.
pub fn files_digest(files: &[PathBuf]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    files.iter().for_each(|f| hash_file(&mut hasher, f));
    hasher.finalize().into()
}

fn hash_file(hasher: &mut Sha256, path: &Path) {
    hasher.update(path.as_os_str().as_encoded_bytes());
    match std::fs::read(path) {
        Ok(bytes) => hasher.update(&bytes),
        Err(error) => hasher.update(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_digest_sees_content_and_names_but_not_hidden_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path();
        std::fs::write(path.join("a.yaml"), "one").expect("write");
        let first = dir_digest(path);
        assert_eq!(dir_digest(path), first, "stable");
        std::fs::write(path.join("..data"), "hidden").expect("write");
        assert_eq!(dir_digest(path), first, "hidden entries do not count");
        std::fs::write(path.join("a.yaml"), "two").expect("write");
        let second = dir_digest(path);
        assert_ne!(second, first, "same length, other content");
        std::fs::rename(path.join("a.yaml"), path.join("b.yaml")).expect("rename");
        assert_ne!(dir_digest(path), second, "renamed");
        assert_ne!(dir_digest(&path.join("missing")), second);
    }

    #[test]
    fn files_digest_changes_with_any_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert, "cert").expect("write");
        std::fs::write(&key, "key").expect("write");
        let files = [cert.clone(), key.clone()];
        let before = files_digest(&files);
        std::fs::write(&key, "key2").expect("write");
        assert_ne!(files_digest(&files), before);
    }
}
