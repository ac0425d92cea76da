//! A panic is never silent. The loops that run a source unit or a sink lane run under
//! [`supervised`]: a panic in one ends that loop only, marks its unit `Parked` (Kafka Connect's
//! `FAILED`) with what happened, and is logged; the process and the other units go on. The process's
//! panic hook ([`install_hook`]) writes every panic through the log, scrubbed of secrets, instead of
//! the default hook's raw text (which may quote a value it sliced).

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::status::{StatusBoard, UnitState};

/// `future`, with a panic while it is polled returned as an error instead of unwinding.
struct CatchUnwind<F>(Pin<Box<F>>);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Err(payload) => Poll::Ready(Err(payload)),
        }
    }
}

/// The text a panic carried.
pub fn panic_text(payload: &(dyn Any + Send)) -> String {
    let text = payload.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| payload.downcast_ref::<String>().cloned());
    crate::redact::clean(&text.unwrap_or_else(|| "no message".into())).chars().take(500).collect()
}

/// Spawns `task`, the loop of `connector`'s `unit`: if it panics, the unit is marked `Parked`
/// with the panic's text (redacted) and the panic is logged; it is not restarted (a panic is a
/// bug, and running into it again would hide it), so the unit waits for a restart of the connector.
pub fn supervised<F>(board: StatusBoard, connector: String, unit: String, task: F) -> tokio::task::JoinHandle<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        if let Err(payload) = CatchUnwind(Box::pin(task)).await {
            let message = format!(
                "stopped by an internal error of the host ({}); the connector must be restarted (please report this)",
                panic_text(payload.as_ref())
            );
            tracing::error!(connector, unit, "{message}");
            board.set(&connector, &unit, UnitState::Parked, Some(&message));
        }
    })
}

/// Replaces the default panic hook: a panic is logged as an error, its text scrubbed of secrets,
/// with where it happened.
pub fn install_hook() {
    std::panic::set_hook(Box::new(|info| {
        let text = panic_text(info.payload());
        let place = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        tracing::error!("panic at {place}: {text}");
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_unit_is_parked_with_its_message_and_the_others_go_on() {
        let board = StatusBoard::default();
        let failing = supervised(board.clone(), "c".into(), "incident".into(), async {
            let text = String::from("2024-01-0é");
            let _ = &text[..10];
        });
        let fine = supervised(board.clone(), "c".into(), "problem".into(), async {});
        failing.await.unwrap();
        fine.await.unwrap();
        let units = board.snapshot();
        let parked = units.iter().find(|u| u.unit == "incident").unwrap();
        assert_eq!(parked.state, UnitState::Parked);
        assert!(
            parked
                .message
                .as_deref()
                .unwrap()
                .contains("stopped by an internal error of the host (end byte index 10 is not a char boundary"),
            "{parked:?}"
        );
        assert!(!units.iter().any(|u| u.unit == "problem"), "the other unit was not touched");
    }
}
