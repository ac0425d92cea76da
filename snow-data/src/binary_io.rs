//! What the binary encodings share (Avro's, Protobuf's): varints and zig-zag, and a reader over a
//! byte slice that checks every length against the bytes left before using it and names the byte
//! an error is at. Each encoding adds its own reads on top.

use crate::error::DataError;

/// Appends `n` as a varint (seven bits a byte, low first).
pub fn varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Zig-zag encoding of a signed 64-bit value.
pub fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

/// Zig-zag decoding.
pub fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

/// Reads a byte slice front to back.
pub struct ByteReader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// The encoding's name, for errors (`Avro`, `protobuf`).
    format: &'static str,
}

impl<'a> ByteReader<'a> {
    /// A reader at the start of `bytes` of the encoding called `format`.
    pub fn new(bytes: &'a [u8], format: &'static str) -> Self {
        Self { bytes, at: 0, format }
    }

    /// How many bytes have been read.
    pub fn at(&self) -> usize {
        self.at
    }

    /// How many bytes are left.
    pub fn left(&self) -> usize {
        self.bytes.len().saturating_sub(self.at)
    }

    /// True when every byte has been read.
    pub fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        &self.bytes[self.at.min(self.bytes.len())..]
    }

    /// An error at the current byte.
    pub fn err(&self, what: &str) -> DataError {
        DataError::new(format!("{} data broken at byte {}: {what}", self.format, self.at))
    }

    /// A varint.
    pub fn varint(&mut self) -> Result<u64, DataError> {
        let mut n: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = *self.bytes.get(self.at).ok_or_else(|| self.err("a number runs past the end"))?;
            self.at += 1;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(self.err("a number longer than 10 bytes"))
    }

    /// `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DataError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.bytes.len())
            .ok_or_else(|| self.err(&format!("{n} bytes announced, fewer left")))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_zigzag_and_lengths_are_checked() {
        let mut out = Vec::new();
        varint(300, &mut out);
        assert_eq!(out, [0xac, 0x02]);
        assert_eq!(ByteReader::new(&out, "x").varint().expect("read"), 300);
        assert_eq!((unzigzag(zigzag(-5)), zigzag(-1), zigzag(1)), (-5, 1, 2));
        let mut r = ByteReader::new(&[1, 2], "Avro");
        assert!(r.take(3).expect_err("short").to_string().starts_with("Avro data broken at byte 0: 3 bytes announced"));
        assert!(ByteReader::new(&[0xff; 11], "x").varint().is_err());
    }
}
