//! Cooperative shutdown: one trigger, many watchers that can wait or sleep interruptibly.

use std::time::Duration;

use tokio::sync::watch;

/// Fires the shutdown.
pub struct ShutdownTrigger(watch::Sender<bool>);

/// Watches for the shutdown.
#[derive(Clone)]
pub struct Shutdown(watch::Receiver<bool>);

/// A new trigger and its first watcher.
pub fn channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger(tx), Shutdown(rx))
}

/// A new trigger whose watchers also stop when any of `parents` does (a unit stopped by itself,
/// by its slot or by the process). Needs a Tokio runtime.
pub fn linked(parents: &[Shutdown]) -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    for parent in parents {
        let (mut parent, tx) = (parent.clone(), tx.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = parent.wait() => { let _ = tx.send(true); }
                () = tx.closed() => {}
            }
        });
    }
    (ShutdownTrigger(tx), Shutdown(rx))
}

impl ShutdownTrigger {
    /// Asks everything watching to stop.
    pub fn fire(&self) {
        let _ = self.0.send(true);
    }
}

impl Shutdown {
    /// True once shutdown was asked for.
    pub fn is_stopping(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves when shutdown is asked for.
    pub async fn wait(&mut self) {
        let _ = self.0.wait_for(|stop| *stop).await;
    }

    /// Sleeps for `duration` unless shutdown comes first; true if the whole time passed.
    pub async fn sleep(&mut self, duration: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(duration) => true,
            _ = self.wait() => false,
        }
    }
}
