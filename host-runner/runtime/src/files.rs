//! Files the host writes for itself (compiled components, components resolved from a fleet's
//! topic), in one place: directories only this user may write, checked before use; new
//! directories under the system's temporary directory with unpredictable names; writes that never
//! follow a link planted where a file is about to be written (`create_new` refuses an existing
//! path, links included), made atomic and durable by a rename and syncs (the offsets file, a
//! signature bundle, compiled and resolved components all go through [`write_atomically`]).

use std::fs::{DirBuilder, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// `dir` as a directory only this user may write: created with mode 0700 when missing (its
/// parents as the system makes them); refused when it is a link, belongs to another user, or
/// others may write it. `what` names it in errors.
pub fn private_dir(dir: &Path, what: &str) -> Result<()> {
    if std::fs::symlink_metadata(dir).is_err() {
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {what} {}", dir.display()))?;
        }
        match DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("creating {what} {}", dir.display())),
        }
    }
    let meta = std::fs::symlink_metadata(dir).with_context(|| format!("reading {what} {}", dir.display()))?;
    if !meta.file_type().is_dir() {
        bail!("{what} {} is not a directory (a link or a file is in its place)", dir.display());
    }
    // This process's (effective) user: what the kernel checks writes against. A system call, so
    // it holds where no /proc is mounted (an empty root, a minimal image).
    let uid = rustix::process::geteuid().as_raw();
    if meta.uid() != uid {
        bail!("{what} {} belongs to user {}, not to this user ({uid})", dir.display(), meta.uid());
    }
    if meta.permissions().mode() & 0o022 != 0 {
        bail!("{what} {} may be written by other users (mode {:o}); make it 0700", dir.display(), meta.permissions().mode() & 0o777);
    }
    Ok(())
}

/// A new directory, mode 0700, under the system's temporary directory, named `<label>-<random>`
/// (a name nobody could have prepared).
pub fn private_temp_dir(label: &str) -> Result<PathBuf> {
    for _ in 0..16 {
        let dir = std::env::temp_dir().join(format!("{label}-{}", random_hex()?));
        match DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    }
    bail!("could not create a private directory for {label} under {}", std::env::temp_dir().display())
}

/// Writes `bytes` to `path` atomically: a new temporary file beside it (a link in its place is
/// never followed), synced, renamed over it, and the directory synced, so a crash leaves either the
/// old or the new file. The file gets the process's default mode (a private directory keeps it
/// private).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", random_hex()?));
    let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    drop(file);
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", tmp.display()));
    }
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))?;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("syncing {}", dir.display()))
}

/// 16 random hex digits from the kernel's random source (getrandom(2): no /dev needed, so it
/// holds in an empty root).
fn random_hex() -> Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("reading random bytes (getrandom): {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_directory_refuses_links_and_others_writes() {
        let base = private_temp_dir("snow-files-test").unwrap();
        assert_eq!(std::fs::metadata(&base).unwrap().permissions().mode() & 0o777, 0o700);
        let dir = base.join("cache");
        private_dir(&dir, "the test directory").unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        let link = base.join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(private_dir(&link, "the test directory").unwrap_err().to_string().contains("is not a directory"));
        let open = base.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(private_dir(&open, "the test directory").unwrap_err().to_string().contains("may be written by other users"));
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn an_atomic_write_replaces_the_file_and_never_writes_through_a_planted_link() {
        let base = private_temp_dir("snow-files-test").unwrap();
        let target = base.join("victim");
        std::fs::write(&target, b"untouched").unwrap();
        let path = base.join("component.wasm");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        write_atomically(&path, b"new bytes").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"untouched", "the link was replaced, not followed");
        assert_eq!(std::fs::read(&path).unwrap(), b"new bytes");
        assert!(!std::fs::symlink_metadata(&path).unwrap().file_type().is_symlink());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
