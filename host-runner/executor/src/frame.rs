//! The executor's framing on stdin/stdout (ADR 0037): each frame is a 4-byte big-endian length
//! (of what follows it), a 1-byte kind and the body. Requests come one at a time from the plugin;
//! each gets exactly one answer. Binary bodies ([`Writer`]) use the same big-endian primitives:
//! strings as a 4-byte length and UTF-8, nullable byte strings with length -1 for null.

use std::io::{self, Read, Write};

/// The largest frame either side accepts (a source batch of 64 MiB attachments fits).
pub const MAX_FRAME: usize = 256 << 20;

/// Request kinds (plugin → executor).
pub mod request {
    /// Validate a connector configuration and plan its tasks (JSON).
    pub const PLAN: u8 = b'P';
    /// Open a source task's units at the offsets Connect holds (JSON).
    pub const OPEN_SOURCE: u8 = b'O';
    /// The next source batch, waiting a little for one (empty body).
    pub const NEXT: u8 = b'N';
    /// Open a sink task (JSON).
    pub const OPEN_SINK: u8 = b'K';
    /// Write a sink batch (binary: `executor::sink`).
    pub const PUT: u8 = b'W';
    /// Stop: answer, then end (empty body).
    pub const STOP: u8 = b'S';
}

/// Answer kinds (executor → plugin).
pub mod answer {
    /// A JSON answer.
    pub const JSON: u8 = b'J';
    /// A source batch (binary).
    pub const BATCH: u8 = b'B';
    /// No batch was ready in time (empty body).
    pub const EMPTY: u8 = b'E';
    /// A sink batch's outcomes (binary: a count, then a status byte and a message per record).
    pub const OUTCOMES: u8 = b'R';
    /// The request failed for good: JSON `{"message": …, "errors": [{"key", "message"}]}`.
    pub const FAILED: u8 = b'F';
}

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// What the frame is ([`request`], [`answer`]).
    pub kind: u8,
    /// Its body.
    pub body: Vec<u8>,
}

/// Reads one frame; `None` at a clean end of input (the plugin closed the pipe).
pub fn read(input: &mut impl Read) -> io::Result<Option<Frame>> {
    let mut length = [0u8; 4];
    match input.read_exact(&mut length) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let length = u32::from_be_bytes(length) as usize;
    if length == 0 || length > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("a frame of {length} bytes (1 to {MAX_FRAME} allowed)")));
    }
    let mut kind = [0u8; 1];
    input.read_exact(&mut kind)?;
    let mut body = vec![0u8; length - 1];
    input.read_exact(&mut body)?;
    Ok(Some(Frame { kind: kind[0], body }))
}

/// Writes one frame and flushes.
pub fn write(output: &mut impl Write, kind: u8, body: &[u8]) -> io::Result<()> {
    let length = u32::try_from(body.len() + 1).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "a frame over 4 GiB"))?;
    output.write_all(&length.to_be_bytes())?;
    output.write_all(&[kind])?;
    output.write_all(body)?;
    output.flush()
}

/// A binary body being built.
#[derive(Default)]
pub struct Writer {
    /// The body so far.
    pub bytes: Vec<u8>,
}

impl Writer {
    /// A 2-byte number.
    pub fn u16(&mut self, v: u16) {
        self.bytes.extend_from_slice(&v.to_be_bytes());
    }
    /// A 4-byte number.
    pub fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_be_bytes());
    }
    /// An 8-byte signed number.
    pub fn i64(&mut self, v: i64) {
        self.bytes.extend_from_slice(&v.to_be_bytes());
    }
    /// A string: its length, then its UTF-8.
    pub fn str(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.bytes.extend_from_slice(s.as_bytes());
    }
    /// Nullable bytes: -1 for null, else the length then the bytes.
    pub fn opt(&mut self, b: Option<&[u8]>) {
        match b {
            None => self.bytes.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(b) => {
                self.u32(b.len() as u32);
                self.bytes.extend_from_slice(b);
            }
        }
    }
}

/// A binary body being read; every read says what was cut short.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// Reads `bytes` from their start.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|end| *end <= self.bytes.len());
        let end = end.ok_or_else(|| format!("the frame ends inside {what} (at byte {} of {})", self.at, self.bytes.len()))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    /// A 4-byte number (`what` names it in an error).
    pub fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(u32::from_be_bytes(self.take(4, what)?.try_into().expect("4 bytes")))
    }

    /// An 8-byte signed number.
    pub fn i64(&mut self, what: &str) -> Result<i64, String> {
        Ok(i64::from_be_bytes(self.take(8, what)?.try_into().expect("8 bytes")))
    }

    /// A 2-byte number.
    pub fn u16(&mut self, what: &str) -> Result<u16, String> {
        Ok(u16::from_be_bytes(self.take(2, what)?.try_into().expect("2 bytes")))
    }

    /// A string.
    pub fn str(&mut self, what: &str) -> Result<&'a str, String> {
        let n = self.u32(what)? as usize;
        std::str::from_utf8(self.take(n, what)?).map_err(|_| format!("{what} is not UTF-8"))
    }

    /// Nullable bytes.
    pub fn opt(&mut self, what: &str) -> Result<Option<&'a [u8]>, String> {
        let n = self.u32(what)? as i32;
        if n < 0 { Ok(None) } else { self.take(n as usize, what).map(Some) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_and_bodies_round_trip_and_a_cut_frame_is_named() {
        let mut out = Vec::new();
        write(&mut out, request::NEXT, b"").unwrap();
        let mut w = Writer::default();
        w.str("incident");
        w.opt(None);
        w.opt(Some(b"{}"));
        w.i64(-1);
        w.u16(2);
        write(&mut out, answer::BATCH, &w.bytes).unwrap();
        let mut input = &out[..];
        assert_eq!(read(&mut input).unwrap(), Some(Frame { kind: b'N', body: vec![] }));
        let batch = read(&mut input).unwrap().unwrap();
        assert_eq!(read(&mut input).unwrap(), None, "a clean end");
        let mut r = Reader::new(&batch.body);
        assert_eq!(r.str("topic").unwrap(), "incident");
        assert_eq!(r.opt("key").unwrap(), None);
        assert_eq!(r.opt("value").unwrap(), Some(&b"{}"[..]));
        assert_eq!((r.i64("ts").unwrap(), r.u16("n").unwrap()), (-1, 2));
        assert!(r.u32("the record count").unwrap_err().contains("the record count"));
        let cut = &out[..out.len() - 1];
        let mut input = &cut[5..];
        assert!(read(&mut input).is_err(), "a frame cut short is an error, not an end");
    }
}
