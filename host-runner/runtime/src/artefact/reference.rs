//! A component reference, `sha256:<64 hex>`: how a connector names a component by the digest of
//! its bytes (`component.ref`, `component.digest`), as `snow-connect component push` prints it.
//! Where the bytes of a reference are found is the fleet's component store's.

use anyhow::{Result, bail};

/// `sha256:<64 hex>` → the hex digest; an error says what a reference looks like.
pub fn parse_ref(reference: &str) -> Result<String> {
    let hex = reference.trim().strip_prefix("sha256:").unwrap_or_default();
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        bail!("{reference:?} is not a component reference: sha256:<64 hex digits>, as `snow-connect component push` prints it");
    }
    Ok(hex.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_sha256_digests() {
        let hex = "ab".repeat(32);
        assert_eq!(parse_ref(&format!("sha256:{hex}")).unwrap(), hex);
        assert!(parse_ref("sha256:abc").unwrap_err().to_string().contains("sha256:<64 hex digits>"));
        assert!(parse_ref(&hex).is_err(), "the algorithm is named");
    }
}
