//! Offsets in a local JSON file, replaced atomically: write a temporary file beside it, fsync it,
//! rename it over the old one, fsync the directory. A crash leaves either the old or the new file.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::OffsetStore;

#[derive(Serialize, Deserialize, Default)]
struct FileContents {
    version: u32,
    /// connector → partition → position.
    offsets: BTreeMap<String, BTreeMap<String, String>>,
}

/// A file of offsets shared by every connector configured with the same path.
pub struct FileOffsetStore {
    path: PathBuf,
    contents: Mutex<FileContents>,
}

impl FileOffsetStore {
    /// Opens `path`, reading it if it exists. An unreadable file is an error, never overwritten.
    pub fn open(path: &Path) -> Result<Self> {
        let contents = match fs::read(path) {
            Ok(bytes) => {
                let contents: FileContents = serde_json::from_slice(&bytes)
                    .with_context(|| format!("offset file {} is not readable; move it away to start over", path.display()))?;
                if contents.version != 1 {
                    bail!("offset file {} has version {}, this runner reads version 1", path.display(), contents.version);
                }
                contents
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileContents { version: 1, offsets: BTreeMap::new() },
            Err(e) => return Err(e).with_context(|| format!("reading offset file {}", path.display())),
        };
        Ok(Self { path: path.to_path_buf(), contents: Mutex::new(contents) })
    }

    fn write(&self, contents: &FileContents) -> Result<()> {
        let dir = self.path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        crate::files::write_atomically(&self.path, &serde_json::to_vec_pretty(contents)?)
    }
}

/// The one path of the file `path` names, however it is spelled: relative paths resolved against
/// the working directory, `.`, `..` and symbolic links resolved (the file itself when it exists,
/// else its directory), so two spellings of one file give one store.
pub fn canonical_path(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map(|d| d.join(path)).unwrap_or_else(|_| path.to_path_buf())
    };
    if let Ok(real) = fs::canonicalize(&absolute) {
        return real;
    }
    let name = absolute.file_name().map(std::ffi::OsStr::to_os_string);
    let dir = absolute.parent().map(Path::to_path_buf).unwrap_or_default();
    let dir = fs::canonicalize(&dir).unwrap_or_else(|_| {
        let normal = lexically_normal(&dir);
        fs::canonicalize(&normal).unwrap_or(normal)
    });
    match name {
        Some(name) => dir.join(name),
        None => dir,
    }
}

/// `path` with `.` removed and `..` applied to the part before it, without touching the disk.
fn lexically_normal(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

impl FileOffsetStore {
    /// Every `(connector, partition, position)` in the file.
    pub fn entries(&self) -> Vec<(String, String, String)> {
        let contents = self.contents.lock().unwrap_or_else(|e| e.into_inner());
        contents.offsets.iter().flat_map(|(c, m)| m.iter().map(move |(p, v)| (c.clone(), p.clone(), v.clone()))).collect()
    }

    /// Removes the offsets of `connector` whose partition passes `matches`; returns how many.
    pub fn remove(&self, connector: &str, matches: impl Fn(&str) -> bool) -> Result<usize> {
        let mut contents = self.contents.lock().unwrap_or_else(|e| e.into_inner());
        let Some(partitions) = contents.offsets.get_mut(connector) else { return Ok(0) };
        let before = partitions.len();
        partitions.retain(|p, _| !matches(p));
        let removed = before - partitions.len();
        if partitions.is_empty() {
            contents.offsets.remove(connector);
        }
        if removed > 0 {
            self.write(&contents)?;
        }
        Ok(removed)
    }
}

impl OffsetStore for FileOffsetStore {
    fn load(&self, connector: &str) -> Vec<(String, String)> {
        let contents = self.contents.lock().unwrap_or_else(|e| e.into_inner());
        contents.offsets.get(connector).map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default()
    }

    fn commit(&self, connector: &str, partition: &str, position: &str) -> Result<()> {
        let mut contents = self.contents.lock().unwrap_or_else(|e| e.into_inner());
        contents.offsets.entry(connector.to_string()).or_default().insert(partition.to_string(), position.to_string());
        self.write(&contents).with_context(|| format!("storing the offset of {connector} in {}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_has_one_canonical_path_however_it_is_spelled() {
        let dir = std::env::temp_dir().join(format!("snow-canonical-{}", std::process::id()));
        fs::create_dir_all(dir.join("sub")).unwrap();
        let plain = canonical_path(&dir.join("o.json"));
        assert_eq!(canonical_path(&dir.join("sub/../o.json")), plain, "before the file exists");
        assert_eq!(canonical_path(&dir.join("./nope/../o.json")), plain, "through a directory that does not exist");
        fs::write(dir.join("o.json"), "{}").unwrap();
        assert_eq!(canonical_path(&dir.join("sub/./../o.json")), plain, "once it exists");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn commits_survive_reopening_and_corruption_is_refused() {
        let dir = std::env::temp_dir().join(format!("snow-offsets-{}", std::process::id()));
        let path = dir.join("o.json");
        let _ = fs::remove_dir_all(&dir);
        let store = FileOffsetStore::open(&path).unwrap();
        store.commit("c", "p1", "a").unwrap();
        store.commit("c", "p1", "b").unwrap();
        store.commit("d", "p2", "x").unwrap();
        store.commit("d", "p3", "y").unwrap();
        assert_eq!(store.remove("d", |p| p == "p3").unwrap(), 1);
        let again = FileOffsetStore::open(&path).unwrap();
        assert_eq!(again.load("c"), vec![("p1".to_string(), "b".to_string())]);
        assert!(again.load("none").is_empty());
        fs::write(&path, b"{not json").unwrap();
        assert!(FileOffsetStore::open(&path).err().unwrap().to_string().contains("not readable"));
        let _ = fs::remove_dir_all(&dir);
    }
}
