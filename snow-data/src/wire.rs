//! Confluent's wire format: a zero magic byte, the schema's registry id (4 bytes, big-endian),
//! then the encoded data (for Protobuf, the message indexes come first; see the protobuf module).

use crate::error::DataError;

/// The magic byte of every framed record.
pub const MAGIC: u8 = 0;

/// `payload` framed with schema `id`.
pub fn frame(id: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + payload.len());
    out.push(MAGIC);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The schema id and the payload of a framed record.
pub fn unframe(bytes: &[u8]) -> Result<(u32, &[u8]), DataError> {
    match bytes {
        [MAGIC, a, b, c, d, rest @ ..] => Ok((u32::from_be_bytes([*a, *b, *c, *d]), rest)),
        [MAGIC, ..] => Err(DataError::new(format!("{} bytes are too short for the schema registry's framing (5 bytes)", bytes.len()))),
        [] => Err(DataError::new("no bytes: expected the schema registry's framing (a zero byte, then a 4-byte schema id)")),
        [first, ..] => Err(DataError::new(format!(
            "unknown magic byte {first} (expected 0): the record was not written by a schema registry converter"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_frames_are_named() {
        let framed = frame(258, b"abc");
        assert_eq!(framed, [0, 0, 0, 1, 2, b'a', b'b', b'c']);
        assert_eq!(unframe(&framed).expect("framed"), (258, &b"abc"[..]));
        assert!(unframe(b"{\"a\":1}").expect_err("json").to_string().contains("unknown magic byte 123"));
        assert!(unframe(&[0, 0, 1]).expect_err("short").to_string().contains("too short"));
    }
}
