//! Protobuf's wire format at the byte level (on [`crate::binary_io`]'s varints): field keys,
//! length-delimited fields, fixed-width numbers, skipping a field, and
//! Confluent's message indexes (the path to the record's message type that follows the schema
//! id: a zig-zag count then zig-zag indexes, with `[0]` written as the single byte `0`). Every
//! length is checked against the bytes left before it is used.

use crate::binary_io::{ByteReader, unzigzag, varint, zigzag};
use crate::error::DataError;

/// Appends the key of field `number` with `wire` type.
pub fn key(number: u32, wire: u8, out: &mut Vec<u8>) {
    varint((u64::from(number) << 3) | u64::from(wire), out);
}

/// Appends length-delimited `bytes` as field `number`.
pub fn delimited(number: u32, bytes: &[u8], out: &mut Vec<u8>) {
    key(number, 2, out);
    varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// Appends Confluent's message indexes for `path`.
pub fn write_indexes(path: &[i32], out: &mut Vec<u8>) {
    if path == [0] {
        out.push(0);
        return;
    }
    varint(zigzag(path.len() as i64), out);
    for i in path {
        varint(zigzag(i64::from(*i)), out);
    }
}

/// Longest message-index path read (a message nested this deep is not a real schema).
const MAX_INDEXES: usize = 64;

/// Reads Confluent's message indexes from the front of `payload`: the path and the message bytes.
pub fn read_indexes(payload: &[u8]) -> Result<(Vec<i32>, &[u8]), DataError> {
    let mut r = Reader::new(payload);
    let count = unzigzag(r.varint()?);
    if count == 0 {
        return Ok((vec![0], r.rest()));
    }
    let count = usize::try_from(count)
        .ok()
        .filter(|c| *c <= MAX_INDEXES)
        .ok_or_else(|| DataError::new(format!("message index count {count} is not a real schema's (at most {MAX_INDEXES})")))?;
    let mut path = Vec::with_capacity(count);
    for _ in 0..count {
        let i = unzigzag(r.varint()?);
        path.push(i32::try_from(i).map_err(|_| DataError::new(format!("message index {i} is out of range")))?);
    }
    Ok((path, r.rest()))
}

/// Reads protobuf's wire format from a byte slice (on [`ByteReader`]'s varints and counted runs).
pub struct Reader<'a>(ByteReader<'a>);

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self(ByteReader::new(bytes, "protobuf"))
    }

    /// True when every byte has been read.
    pub fn done(&self) -> bool {
        self.0.done()
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.0.rest()
    }

    fn err(&self, what: &str) -> DataError {
        self.0.err(what)
    }

    /// A varint.
    pub fn varint(&mut self) -> Result<u64, DataError> {
        self.0.varint()
    }

    /// `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DataError> {
        self.0.take(n)
    }

    /// A length-delimited run of bytes.
    pub fn delimited(&mut self) -> Result<&'a [u8], DataError> {
        let n = self.varint()?;
        let n = usize::try_from(n).map_err(|_| self.err("a length past the address space"))?;
        self.take(n)
    }

    /// 4 little-endian bytes.
    pub fn fixed32(&mut self) -> Result<u32, DataError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// 8 little-endian bytes.
    pub fn fixed64(&mut self) -> Result<u64, DataError> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }

    /// A field key: its number and wire type.
    pub fn key(&mut self) -> Result<(u32, u8), DataError> {
        let k = self.varint()?;
        let number =
            u32::try_from(k >> 3).ok().filter(|n| *n > 0).ok_or_else(|| self.err(&format!("field number {} is not valid", k >> 3)))?;
        Ok((number, (k & 7) as u8))
    }

    /// Skips a value of `wire` type.
    pub fn skip(&mut self, wire: u8) -> Result<(), DataError> {
        match wire {
            0 => self.varint().map(drop),
            1 => self.take(8).map(drop),
            2 => self.delimited().map(drop),
            5 => self.take(4).map(drop),
            other => Err(self.err(&format!("wire type {other} (groups are not read)"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_round_trip_with_confluents_short_form() {
        let mut out = Vec::new();
        write_indexes(&[0], &mut out);
        assert_eq!(out, [0]);
        assert_eq!(read_indexes(&[0, 9]).expect("read"), (vec![0], &[9u8][..]));
        out.clear();
        write_indexes(&[1, 2], &mut out);
        assert_eq!(out, [4, 2, 4], "a zig-zag count of 2, then 1 and 2");
        assert_eq!(read_indexes(&out).expect("read").0, [1, 2]);
        assert!(read_indexes(&[0xc8, 0x01]).expect_err("too many").to_string().contains("message index count 100"));
    }

    #[test]
    fn keys_and_skips_check_their_lengths() {
        let mut r = Reader::new(&[0x0a, 0x05, b'a']);
        assert_eq!(r.key().expect("key"), (1, 2));
        let err = r.skip(2).expect_err("short").to_string();
        assert!(err.starts_with("protobuf data broken at byte 2: 5 bytes announced"), "{err}");
    }
}
