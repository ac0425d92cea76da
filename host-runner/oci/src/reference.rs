//! `oci://registry[:port]/repository[:tag][@sha256:<hex>]`: how a connector names a component in
//! an OCI registry. The registry is always named (no implicit Docker Hub); a digest pins the
//! manifest (the tag beside it is then only a reminder); a tag alone is resolved to a digest when
//! the connector is read. Digests (`sha256:<hex>`) are computed here too.

use std::fmt;

use anyhow::{Result, bail};

/// Hex SHA-256 of `bytes`: the `<hex>` of a `sha256:<hex>` digest.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A parsed reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `host[:port]` as written (lower case).
    pub registry: String,
    /// The repository path.
    pub repository: String,
    /// The tag, if named.
    pub tag: Option<String>,
    /// The manifest's hex SHA-256, if named.
    pub digest: Option<String>,
}

/// What a reference looks like, for errors.
pub const FORM: &str = "oci://<registry>[:<port>]/<repository>[:<tag>][@sha256:<64 hex>]";

impl Reference {
    /// Parses `text`, with or without the `oci://` prefix when `prefix_optional`.
    pub fn parse_with(text: &str, prefix_optional: bool) -> Result<Self> {
        let trimmed = text.trim();
        let rest = match trimmed.strip_prefix("oci://") {
            Some(rest) => rest,
            None if prefix_optional => trimmed,
            None => bail!("{text:?} is not an OCI reference: {FORM}"),
        };
        let bad = |why: &str| anyhow::anyhow!("{text:?} is not an OCI reference ({why}): {FORM}");
        let (name, digest) = match rest.split_once('@') {
            Some((name, digest)) => {
                let hex = digest.strip_prefix("sha256:").ok_or_else(|| bad("the digest must be sha256:<64 hex>"))?;
                if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(bad("the digest must be sha256:<64 hex>"));
                }
                (name, Some(hex.to_ascii_lowercase()))
            }
            None => (rest, None),
        };
        let (registry, path) = name.split_once('/').ok_or_else(|| bad("no repository after the registry"))?;
        if registry.is_empty() || !registry.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b)) {
            return Err(bad("the registry must be host[:port]"));
        }
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repository, tag)) if !tag.contains('/') => (repository, Some(tag)),
            _ => (path, None),
        };
        if !valid_repository(repository) {
            return Err(bad("the repository must be lower-case path components of letters, digits and . _ -"));
        }
        if let Some(tag) = tag
            && !valid_tag(tag)
        {
            return Err(bad("a tag is 1 to 128 letters, digits, _ . - and starts with a letter, digit or _"));
        }
        if tag.is_none() && digest.is_none() {
            return Err(bad("name a tag (:1.2.0) or a digest (@sha256:…)"));
        }
        Ok(Self { registry: registry.to_ascii_lowercase(), repository: repository.to_string(), tag: tag.map(str::to_string), digest })
    }

    /// Parses a connector's `oci://…` value.
    pub fn parse(text: &str) -> Result<Self> {
        Self::parse_with(text, false)
    }

    /// What to ask the registry's manifest endpoint for: the digest when pinned, else the tag.
    pub fn manifest_ref(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(hex), _) => format!("sha256:{hex}"),
            (None, Some(tag)) => tag.clone(),
            (None, None) => unreachable!("parse requires a tag or a digest"),
        }
    }

    /// This reference pinned to the manifest `hex` (the tag kept as a reminder).
    pub fn pinned(&self, hex: &str) -> Self {
        Self { digest: Some(hex.to_string()), ..self.clone() }
    }

    /// `registry/repository[:tag]`: what a tag's pin is keyed by.
    pub fn tagged_name(&self) -> String {
        match &self.tag {
            Some(tag) => format!("{}/{}:{tag}", self.registry, self.repository),
            None => format!("{}/{}", self.registry, self.repository),
        }
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}", self.tagged_name())?;
        if let Some(hex) = &self.digest {
            write!(f, "@sha256:{hex}")?;
        }
        Ok(())
    }
}

fn valid_repository(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= 255
        && path.split('/').all(|part| {
            !part.is_empty()
                && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
                && part.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
                && part.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
        })
}

fn valid_tag(tag: &str) -> bool {
    (1..=128).contains(&tag.len())
        && tag.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_registry_repository_and_a_tag_or_digest() {
        let hex = "ab".repeat(32);
        let r = Reference::parse(&format!("oci://127.0.0.1:5000/snow/source:1.2.0@sha256:{hex}")).unwrap();
        assert_eq!((r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()), ("127.0.0.1:5000", "snow/source", Some("1.2.0")));
        assert_eq!(r.digest.as_deref(), Some(hex.as_str()));
        assert_eq!(r.manifest_ref(), format!("sha256:{hex}"));
        assert_eq!(r.to_string(), format!("oci://127.0.0.1:5000/snow/source:1.2.0@sha256:{hex}"));
        let tagged = Reference::parse("oci://ghcr.io/acme/sink:latest").unwrap();
        assert_eq!((tagged.manifest_ref().as_str(), tagged.digest.as_deref()), ("latest", None));
        assert_eq!(tagged.pinned(&hex).to_string(), format!("oci://ghcr.io/acme/sink:latest@sha256:{hex}"));
        assert!(Reference::parse_with("localhost:5000/a:b", true).is_ok());
    }

    #[test]
    fn malformed_references_say_what_one_looks_like() {
        for bad in [
            "ghcr.io/acme/sink:1",
            "oci://ghcr.io",
            "oci://ghcr.io/acme/sink",
            "oci://ghcr.io/Acme/sink:1",
            "oci://ghcr.io/acme/sink:-x",
            "oci://ghcr.io/acme/sink@sha256:abc",
            "oci://ghcr.io/acme//sink:1",
            "oci://gh cr.io/acme/sink:1",
        ] {
            let e = Reference::parse(bad).unwrap_err().to_string();
            assert!(e.contains(FORM), "{bad}: {e}");
        }
    }
}
