//! Who sent a notification and when: `X-Snow-Push-Signature: v1=<HMAC-SHA256(secret,
//! "<timestamp>.<body>")>` (hex, or base64 as ServiceNow's `GlideCertificateEncryption.generateMac`
//! returns it) and `X-Snow-Push-Timestamp: <Unix seconds>` within the replay window of the host's
//! clock. The comparison takes the same time whatever bytes differ.

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::Refusal;

/// The signature's scheme prefix.
pub const SCHEME: &str = "v1=";

/// HMAC-SHA256 of `message` with `key` (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(message).finalize();
    Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize().into()
}

/// The header value a sender writes for `body` at `timestamp` (hex).
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let mac = hmac_sha256(secret, &signed_bytes(timestamp, body));
    format!("{SCHEME}{}", mac.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

fn signed_bytes(timestamp: i64, body: &[u8]) -> Vec<u8> {
    let mut bytes = format!("{timestamp}.").into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Checks a request's `timestamp` and `signature` headers against `body`, the `secret` and the
/// host clock `now` (Unix seconds), allowing `max_skew` seconds either way.
pub fn verify(
    secret: &[u8],
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
    max_skew: i64,
) -> Result<(), Refusal> {
    let timestamp: i64 = timestamp.and_then(|t| t.trim().parse().ok()).ok_or(Refusal::Unsigned)?;
    let given = signature.and_then(|s| s.trim().strip_prefix(SCHEME)).and_then(decode).ok_or(Refusal::Unsigned)?;
    let expected = hmac_sha256(secret, &signed_bytes(timestamp, body));
    if !same(&given, &expected) {
        return Err(Refusal::BadSignature);
    }
    // Checked after the signature, so an unsigned sender learns nothing about the window.
    if (now - timestamp).abs() > max_skew {
        return Err(Refusal::Stale);
    }
    Ok(())
}

/// A MAC written as 64 hex digits or as base64.
fn decode(text: &str) -> Option<Vec<u8>> {
    if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return (0..64).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect();
    }
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

/// Equal, in a time that does not depend on where the bytes differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // RFC 4231, test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        // Test case 6: a key longer than the block.
        let mac = hmac_sha256(&[0xaa; 131], b"Test Using Larger Than Block-Size Key - Hash Key First");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    }

    #[test]
    fn a_signed_fresh_body_passes_and_everything_else_is_refused_with_its_reason() {
        let (secret, body, now) = (b"s3cret".as_slice(), br#"{"table":"incident"}"#.as_slice(), 1_700_000_000);
        let signature = sign(secret, now, body);
        let check = |ts: Option<&str>, sig: Option<&str>, body: &[u8]| verify(secret, ts, sig, body, now, 300);
        let ts = now.to_string();
        assert_eq!(check(Some(&ts), Some(&signature), body), Ok(()));
        let base64 = format!("{SCHEME}{}", base64::engine::general_purpose::STANDARD.encode(hmac_sha256(secret, &signed_bytes(now, body))));
        assert_eq!(check(Some(&ts), Some(&base64), body), Ok(()), "base64, as ServiceNow's generateMac writes it");
        assert_eq!(check(Some(&ts), Some(&signature), br#"{"table":"problem"}"#), Err(Refusal::BadSignature), "another body");
        assert_eq!(verify(b"other", Some(&ts), Some(&signature), body, now, 300), Err(Refusal::BadSignature), "another secret");
        assert_eq!(check(None, Some(&signature), body), Err(Refusal::Unsigned));
        assert_eq!(check(Some(&ts), None, body), Err(Refusal::Unsigned));
        assert_eq!(check(Some(&ts), Some("v2=00"), body), Err(Refusal::Unsigned));
        let old = now - 301;
        assert_eq!(verify(secret, Some(&old.to_string()), Some(&sign(secret, old, body)), body, now, 300), Err(Refusal::Stale), "a replay");
        let future = now + 301;
        assert_eq!(verify(secret, Some(&future.to_string()), Some(&sign(secret, future, body)), body, now, 300), Err(Refusal::Stale));
        let moved = (now - 1).to_string();
        assert_eq!(check(Some(&moved), Some(&signature), body), Err(Refusal::BadSignature), "the timestamp is signed");
    }
}
