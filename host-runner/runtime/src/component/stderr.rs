//! Guest stderr forwarded to the host's log, line by line and redacted like every other log line,
//! never blocking and never trapping the guest (a memory pipe traps it once full).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

/// Longest line kept; longer output is logged in pieces of this size.
const MAX_LINE: usize = 8 * 1024;

/// A stderr for one guest instance, labelled with the unit it runs.
#[derive(Clone)]
pub struct GuestStderr {
    unit: Arc<str>,
}

impl GuestStderr {
    /// Stderr of the guest running `unit`.
    pub fn new(unit: &str) -> Self {
        Self { unit: unit.into() }
    }
}

impl IsTerminal for GuestStderr {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestStderr {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(LineLogger { unit: self.unit.clone(), line: Vec::new() })
    }
}

struct LineLogger {
    unit: Arc<str>,
    line: Vec<u8>,
}

impl LineLogger {
    fn emit(&mut self) {
        if !self.line.is_empty() {
            let line = crate::redact::clean(String::from_utf8_lossy(&self.line).trim_end());
            tracing::warn!(unit = %self.unit, "guest stderr: {line}");
            self.line.clear();
        }
    }
}

impl AsyncWrite for LineLogger {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        for &b in buf {
            if b == b'\n' {
                this.emit();
            } else {
                this.line.push(b);
                if this.line.len() >= MAX_LINE {
                    this.emit();
                }
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().emit();
        Poll::Ready(Ok(()))
    }
}
