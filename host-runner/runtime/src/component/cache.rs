#![allow(unsafe_code)] // deserializing compiled code: see `Cached::load` for why it is sound here
//! The compile cache: a component compiled once is kept as wasmtime's serialized native code, keyed
//! by the SHA-256 of the `.wasm` bytes and a digest of the engine's compile settings, so a later
//! start skips Cranelift.
//!
//! Serialized code is native code that wasmtime runs as it is, so nothing in the cache is trusted
//! by virtue of being there:
//! * the directory must belong to the user running the host and be writable by nobody else (it is
//!   created with mode 0700); otherwise the cache is not used, with a warning;
//! * every entry carries the SHA-256 of its bytes in a sidecar written with it; an entry whose
//!   bytes do not match it, or that wasmtime refuses (another wasmtime version or engine setting),
//!   is ignored, compiled again and replaced;
//! * entries are written to a temporary file and renamed, so a reader never sees half of one.
//!
//! What identifies the component is the digest of the `.wasm` as read (the bytes a signature, when
//! one is required, is checked against), never the cache.

use std::hash::{Hash, Hasher};

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where a component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Compiled now (and stored, when a cache is in use).
    Compiled,
    /// Loaded from the cache.
    Cached,
}

/// A compile cache directory the host alone writes.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: PathBuf,
}

impl CompileCache {
    /// `$SNOW_COMPONENT_CACHE`, else `$XDG_CACHE_HOME/snow-connect/components`, else
    /// `$HOME/.cache/snow-connect/components`; none when set to `off`.
    pub fn default_dir() -> Option<PathBuf> {
        match std::env::var_os("SNOW_COMPONENT_CACHE") {
            Some(v) if v == "off" => None,
            Some(v) if !v.is_empty() => Some(PathBuf::from(v)),
            _ => std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .map(|base| base.join("snow-connect").join("components")),
        }
    }

    /// The cache in `dir`, created with mode 0700 when missing. Refused when the directory belongs
    /// to another user or others may write it.
    pub fn open(dir: &Path) -> Result<Self> {
        crate::files::private_dir(dir, "the compile cache")?;
        Ok(Self { dir: dir.to_path_buf() })
    }

    /// The component of `wasm` (read from `path`): from the cache when a sound entry exists,
    /// otherwise compiled and stored.
    pub fn component(&self, engine: &Engine, wasm: &[u8], path: &Path) -> Result<(Component, Source)> {
        let key = format!("{}-{}", hex(&Sha256::digest(wasm)), engine_digest(engine));
        let (code, sidecar) = (self.dir.join(format!("{key}.cwasm")), self.dir.join(format!("{key}.sha256")));
        match Cached::load(engine, &code, &sidecar) {
            Ok(Some(component)) => return Ok((component, Source::Cached)),
            Ok(None) => {}
            Err(e) => tracing::warn!("ignoring the compile cache entry {}: {e:#}", code.display()),
        }
        let component = Component::new(engine, wasm).map_err(|e| anyhow!("compiling component {}: {e:#}", path.display()))?;
        if let Err(e) = self.store(&component, &code, &sidecar) {
            tracing::warn!("could not store {} in the compile cache: {e:#}", path.display());
        }
        Ok((component, Source::Compiled))
    }

    fn store(&self, component: &Component, code: &Path, sidecar: &Path) -> Result<()> {
        let bytes = component.serialize().map_err(|e| anyhow!("serializing: {e}"))?;
        crate::files::write_atomically(code, &bytes)?;
        crate::files::write_atomically(sidecar, hex(&Sha256::digest(&bytes)).as_bytes())
    }
}

/// A cache entry, checked before it is trusted.
struct Cached;

impl Cached {
    /// The entry's component; none when there is no entry; an error when it is not sound.
    fn load(engine: &Engine, code: &Path, sidecar: &Path) -> Result<Option<Component>> {
        let bytes = match std::fs::read(code) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).context("reading"),
        };
        let recorded = std::fs::read_to_string(sidecar).context("reading its digest")?;
        if recorded.trim() != hex(&Sha256::digest(&bytes)) {
            bail!("its bytes do not match the digest stored with them");
        }
        // SAFETY: `Component::deserialize` runs the bytes as native code without checking them.
        // These bytes were written by this host (the directory is this user's alone, mode 0700,
        // checked in `open`), match the digest stored with them, and are checked by wasmtime for
        // its own version and this engine's settings, which refuses anything else.
        let component = unsafe { Component::deserialize(engine, &bytes) }.map_err(|e| anyhow!("wasmtime refused it: {e}"))?;
        Ok(Some(component))
    }
}

/// A digest of everything in the engine that decides whether compiled code fits it.
fn engine_digest(engine: &Engine) -> String {
    struct Sha(Sha256);
    impl Hasher for Sha {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut hasher = Sha(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hex(&hasher.0.finalize()[..8])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn engine_with(epochs: bool) -> Engine {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(epochs);
        Engine::new(&config).unwrap()
    }

    fn fresh(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("snow-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_component_is_compiled_once_and_a_bad_entry_is_never_trusted() {
        let wasm = std::fs::read(guest_artifacts::GUEST_SINK).unwrap();
        let path = Path::new(guest_artifacts::GUEST_SINK);
        let dir = fresh("entries");
        let cache = CompileCache::open(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        let engine = engine_with(true);
        assert_eq!(cache.component(&engine, &wasm, path).unwrap().1, Source::Compiled);
        assert_eq!(cache.component(&engine, &wasm, path).unwrap().1, Source::Cached);
        // One byte flipped in the stored code: ignored, compiled again, and the entry repaired.
        let code = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension() == Some("cwasm".as_ref())).unwrap();
        let mut bytes = std::fs::read(&code).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 1;
        std::fs::write(&code, &bytes).unwrap();
        assert_eq!(cache.component(&engine, &wasm, path).unwrap().1, Source::Compiled);
        assert_eq!(cache.component(&engine, &wasm, path).unwrap().1, Source::Cached);
        // Code compiled for other engine settings, under this engine's name and with a matching
        // digest: wasmtime refuses it, so it is compiled again.
        let other = Component::new(&engine_with(false), &wasm).unwrap().serialize().unwrap();
        std::fs::write(&code, &other).unwrap();
        std::fs::write(code.with_extension("sha256"), hex(&Sha256::digest(&other))).unwrap();
        assert_eq!(cache.component(&engine, &wasm, path).unwrap().1, Source::Compiled);
        // Another engine setting is another key: both live side by side.
        assert_eq!(cache.component(&engine_with(false), &wasm, path).unwrap().1, Source::Compiled);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 4);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_others_may_write_is_refused() {
        let dir = fresh("open");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = CompileCache::open(&dir).unwrap_err().to_string();
        assert!(err.contains("may be written by other users (mode 777)"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
