//! A native transport for benchmarks and tools: HTTP/1.1 over `std::net::TcpStream`, one
//! keep-alive connection per transport, `http://` only (tests and the fake). Answers with a
//! `Content-Length` or `Transfer-Encoding: chunked` body.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::transport::{Request, Response, Transport, TransportError, TransportErrorKind};

/// HTTP/1.1 with keep-alive, reconnecting after a failure.
#[derive(Default)]
pub struct NativeTransport {
    connection: Option<(String, BufReader<TcpStream>)>,
}

impl NativeTransport {
    fn connect(&mut self, authority: &str, request: &Request) -> Result<&mut BufReader<TcpStream>, TransportError> {
        if self.connection.as_ref().is_none_or(|(a, _)| a != authority) {
            let stream = TcpStream::connect(authority)
                .map_err(|e| TransportError::new(TransportErrorKind::Connect, format!("connecting to {authority}: {e}")))?;
            let _ = stream.set_nodelay(true);
            let _ = stream.set_read_timeout(Some(Duration::from_millis(u64::from(request.timeouts.first_byte_ms.max(1)))));
            self.connection = Some((authority.to_string(), BufReader::with_capacity(256 * 1024, stream)));
        }
        Ok(&mut self.connection.as_mut().expect("just connected").1)
    }

    fn exchange(&mut self, request: &Request) -> Result<Response, TransportError> {
        let rest = request
            .url
            .strip_prefix("http://")
            .ok_or_else(|| TransportError::new(TransportErrorKind::Invalid, "the native transport speaks http:// only"))?;
        let split = rest.find('/').unwrap_or(rest.len());
        let (authority, path) = (&rest[..split], if split == rest.len() { "/" } else { &rest[split..] });
        let mut head = format!("{} {path} HTTP/1.1\r\nhost: {authority}\r\ncontent-length: {}\r\n", request.method, request.body.len());
        for (k, v) in &request.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let after = |e: std::io::Error| TransportError::new(TransportErrorKind::AfterSend, e.to_string());
        let reader = self.connect(authority, request)?;
        let stream = reader.get_mut();
        stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&request.body)).map_err(after)?;
        let mut line = String::new();
        reader.read_line(&mut line).map_err(after)?;
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| TransportError::new(TransportErrorKind::AfterSend, format!("bad status line {line:?}")))?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            reader.read_line(&mut line).map_err(after)?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let find = |name: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
        let mut body = Vec::new();
        if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            loop {
                line.clear();
                reader.read_line(&mut line).map_err(after)?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
                if size == 0 {
                    line.clear();
                    reader.read_line(&mut line).map_err(after)?;
                    break;
                }
                let at = body.len();
                body.resize(at + size, 0);
                reader.read_exact(&mut body[at..]).map_err(after)?;
                let mut crlf = [0u8; 2];
                reader.read_exact(&mut crlf).map_err(after)?;
            }
        } else {
            let len: usize = find("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
            if len > request.max_response_bytes {
                return Err(TransportError::new(
                    TransportErrorKind::TooLarge,
                    format!("response body exceeds {} bytes", request.max_response_bytes),
                ));
            }
            body.resize(len, 0);
            reader.read_exact(&mut body).map_err(after)?;
        }
        if find("connection").is_some_and(|v| v.eq_ignore_ascii_case("close")) {
            self.connection = None;
        }
        Ok(Response { status, headers, body })
    }
}

impl Transport for NativeTransport {
    fn send(&mut self, request: &Request) -> Result<Response, TransportError> {
        let result = self.exchange(request);
        if result.is_err() {
            self.connection = None;
        }
        result
    }
}
