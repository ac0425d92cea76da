//! A native transport for benchmarks and tools: HTTP/1.1 over `std::net::TcpStream`, one
//! keep-alive connection per transport, `http://` only (tests and the fake). Answers with a
//! `Content-Length` or `Transfer-Encoding: chunked` body. A started request ([`Transport::start`])
//! is written at once and its answer read by the next `send` of the same request; it holds one
//! started request at a time (another `send` first drops the connection it is on).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::transport::{Request, Response, Transport, TransportError, TransportErrorKind};

/// HTTP/1.1 with keep-alive, reconnecting after a failure.
#[derive(Default)]
pub struct NativeTransport {
    connection: Option<(String, BufReader<TcpStream>)>,
    /// The request written on the connection whose answer was not read yet.
    ahead: Option<Request>,
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

    /// Writes `request` on the connection (opening it if needed).
    fn write(&mut self, request: &Request) -> Result<(), TransportError> {
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
        let stream = self.connect(authority, request)?.get_mut();
        stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&request.body)).map_err(after)
    }

    /// Reads the answer to the request written last.
    fn read(&mut self, request: &Request) -> Result<Response, TransportError> {
        let reader = &mut self.connection.as_mut().ok_or_else(|| TransportError::new(TransportErrorKind::AfterSend, "connection lost"))?.1;
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
                if at.saturating_add(size) > request.max_response_bytes {
                    return Err(TransportError::new(
                        TransportErrorKind::TooLarge,
                        format!("the answer exceeds {} bytes", request.max_response_bytes),
                    ));
                }
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

fn after(e: std::io::Error) -> TransportError {
    TransportError::new(TransportErrorKind::AfterSend, e.to_string())
}

impl Transport for NativeTransport {
    fn send(&mut self, request: &Request) -> Result<Response, TransportError> {
        let result = match self.ahead.take() {
            Some(ahead) if ahead == *request => self.read(request),
            ahead => {
                if ahead.is_some() {
                    // Another request's answer is on its way on this connection: start afresh.
                    self.connection = None;
                }
                self.write(request).and_then(|()| self.read(request))
            }
        };
        if result.is_err() {
            self.connection = None;
        }
        result
    }

    fn start(&mut self, request: &Request) {
        // One connection holds one answer on its way: a second start is ignored (its `send`
        // makes the request then).
        if self.ahead.is_some() {
            return;
        }
        match self.write(request) {
            Ok(()) => self.ahead = Some(request.clone()),
            Err(_) => self.connection = None,
        }
    }

    fn abandon(&mut self, request: &Request) {
        if self.ahead.as_ref() == Some(request) {
            self.ahead = None;
            self.connection = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::http::transport::{Method, Timeouts};

    /// A keep-alive HTTP/1.1 server on a free port answering each GET with its path; counts connections.
    fn server() -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let authority = listener.local_addr().unwrap().to_string();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                counted.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut writer = stream;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let path = line.split(' ').nth(1).unwrap_or("").to_string();
                        while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                            line.clear();
                        }
                        let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{path}", path.len());
                        if writer.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (authority, connections)
    }

    fn get(authority: &str, path: &str) -> Request {
        Request {
            method: Method::Get,
            url: format!("http://{authority}{path}"),
            headers: vec![],
            body: vec![],
            timeouts: Timeouts { connect_ms: 5_000, first_byte_ms: 5_000, body_ms: 5_000 },
            max_response_bytes: 1 << 20,
        }
    }

    #[test]
    fn a_started_request_is_answered_by_the_next_send_of_it_and_abandoned_by_any_other() {
        let (authority, connections) = server();
        let mut t = NativeTransport::default();
        assert_eq!(t.send(&get(&authority, "/one")).unwrap().body, b"/one");
        t.start(&get(&authority, "/two"));
        assert_eq!(t.send(&get(&authority, "/two")).unwrap().body, b"/two", "the started request's answer");
        assert_eq!(connections.load(Ordering::SeqCst), 1, "one keep-alive connection so far");
        t.start(&get(&authority, "/three"));
        assert_eq!(t.send(&get(&authority, "/four")).unwrap().body, b"/four", "not the abandoned request's answer");
        assert_eq!(connections.load(Ordering::SeqCst), 2, "abandoning a started request replaces the connection");
        assert_eq!(t.send(&get(&authority, "/five")).unwrap().body, b"/five");
    }
}
