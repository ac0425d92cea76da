//! Response bodies handed to guests in large frames: frames that have already arrived are merged
//! (up to [`MAX_FRAME`]) so a page reaches the guest in a few reads instead of one read per network
//! chunk. Nothing waits: a frame goes out as soon as the network has nothing more ready.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use hyper::body::{Body, Frame, SizeHint};

/// The largest merged frame.
pub const MAX_FRAME: usize = 1024 * 1024;

/// A body whose ready data frames are merged.
pub struct Coalesce<B> {
    inner: B,
    buffer: BytesMut,
    pending_trailers: Option<Frame<Bytes>>,
    done: bool,
}

impl<B> Coalesce<B> {
    /// Wraps `inner`.
    pub fn new(inner: B) -> Self {
        Self { inner, buffer: BytesMut::new(), pending_trailers: None, done: false }
    }
}

impl<B> Body for Coalesce<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Some(trailers) = this.pending_trailers.take().filter(|_| this.buffer.is_empty()) {
            return Poll::Ready(Some(Ok(trailers)));
        }
        while !this.done && this.pending_trailers.is_none() && this.buffer.len() < MAX_FRAME {
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) if this.buffer.is_empty() && data.len() >= MAX_FRAME => return Poll::Ready(Some(Ok(Frame::data(data)))),
                    Ok(data) => this.buffer.extend_from_slice(&data),
                    Err(other) => this.pending_trailers = Some(other),
                },
                Poll::Ready(Some(Err(e))) => {
                    // A broken body is broken: the error goes out at once, the partial data is dropped.
                    this.buffer.clear();
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(None) => this.done = true,
                Poll::Pending if this.buffer.is_empty() => return Poll::Pending,
                Poll::Pending => break,
            }
        }
        if !this.buffer.is_empty() {
            return Poll::Ready(Some(Ok(Frame::data(this.buffer.split().freeze()))));
        }
        Poll::Ready(this.pending_trailers.take().map(Ok))
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.buffer.is_empty() && self.pending_trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        let mut hint = self.inner.size_hint();
        let buffered = self.buffer.len() as u64;
        hint.set_lower(hint.lower() + buffered);
        if let Some(upper) = hint.upper() {
            hint.set_upper(upper + buffered);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::convert::Infallible;

    use http_body_util::BodyExt;

    use super::*;

    /// Yields its frames, all ready, then ends.
    struct Ready(VecDeque<Bytes>);

    impl Body for Ready {
        type Data = Bytes;
        type Error = Infallible;
        fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
        }
    }

    async fn frames(mut body: impl Body<Data = Bytes, Error = Infallible> + Unpin) -> Vec<Bytes> {
        let mut out = Vec::new();
        while let Some(Ok(frame)) = body.frame().await {
            out.extend(frame.into_data().ok());
        }
        out
    }

    #[tokio::test]
    async fn ready_frames_are_merged_in_order_up_to_the_limit() {
        let small = Ready((0..100).map(|i| Bytes::from(vec![i as u8; 1000])).collect());
        let merged = frames(Coalesce::new(small)).await;
        assert_eq!(merged.len(), 1, "a hundred ready frames became one");
        assert!(merged[0].chunks(1000).enumerate().all(|(i, c)| c.len() == 1000 && c.iter().all(|b| *b == i as u8)), "order kept");

        let big = Ready((0..3).map(|_| Bytes::from(vec![7u8; 700 * 1024])).collect());
        let merged = frames(Coalesce::new(big)).await;
        assert!(merged.iter().all(|f| f.len() <= MAX_FRAME + 700 * 1024));
        assert_eq!(merged.iter().map(Bytes::len).sum::<usize>(), 3 * 700 * 1024);
    }
}
