//! A one-shot, many-listener shutdown signal.

use tokio::sync::watch;

/// Triggers shutdown for every [`ShutdownSignal`] made from it. Dropping it also triggers them, so
/// a listener never outlives whoever owns its lifetime.
#[derive(Debug)]
pub struct ShutdownTrigger {
    tx: watch::Sender<bool>,
}

/// Completes once shutdown is triggered; cheap to clone, one per task.
#[derive(Debug, Clone)]
pub struct ShutdownSignal {
    rx: watch::Receiver<bool>,
}

/// A new trigger and its first signal.
pub fn shutdown_channel() -> (ShutdownTrigger, ShutdownSignal) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger { tx }, ShutdownSignal { rx })
}

impl ShutdownTrigger {
    /// Starts shutdown; idempotent.
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }

    /// Another signal of this trigger.
    pub fn signal(&self) -> ShutdownSignal {
        ShutdownSignal {
            rx: self.tx.subscribe(),
        }
    }
}

impl ShutdownSignal {
    /// Waits until shutdown is triggered (or the trigger is dropped).
    pub async fn triggered(&mut self) {
        // An Err means the trigger is gone, which counts as shutdown.
        let _ = self.rx.wait_for(|stop| *stop).await;
    }

    /// Whether shutdown has been triggered, without waiting.
    pub fn is_triggered(&self) -> bool {
        *self.rx.borrow() || self.rx.has_changed().is_err()
    }
}
