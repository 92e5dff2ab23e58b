//! What the replay is fed: each event of a trace, in order, and for a request its attributes,
//! derived ahead of the replay.
//!
//! Deriving a request's attributes ([`Attributes::of`]) is a pure function of its method and
//! target; it depends on nothing the replay does. With a second CPU, [`on_a_thread`] takes the
//! events (and with them the trace reader's own work: its reorder window, its decoding) and
//! derives the attributes on a thread of its own, a few hundred events ahead of the replay,
//! whose thread is left to what depends on virtual time: the queues. [`inline`] does the same
//! on the caller's thread. Both feed the same events with the same attributes in the same
//! order, so the replay's results do not depend on which.

use std::sync::mpsc;
use std::time::Duration;

use super::attributes::{Attributes, Derived};
use super::trace::{TraceEvent, TraceRequest};
#[cfg(any(test, feature = "fuzzing"))]
use crate::request_info::RequestInfo;
use crate::request_info::RequestInfoError;

/// Events per message: enough that the channel costs little per event.
const EVENTS: usize = 256;
/// Messages in flight: how far ahead of the replay the thread may run.
const BATCHES: usize = 8;

/// An event as the replay takes it. Requests are nearly all of them: not boxed.
#[allow(clippy::large_enum_variant)]
pub(super) enum Fed {
    /// A request, with its attributes (or why the apiserver could not derive them).
    Request(TraceRequest, Result<Derived, RequestInfoError>),
    /// See [`TraceEvent::Ended`].
    Ended { key: String, at: Duration },
}

/// The events fed on the caller's thread, as it asks for them.
pub(super) fn inline(events: impl Iterator<Item = TraceEvent>) -> impl Iterator<Item = Fed> {
    let mut attributes = Attributes::default();
    events.map(move |event| fed(&mut attributes, event))
}

/// Runs `replay` on the caller's thread, fed from a thread of its own that takes `events` and
/// derives their attributes ahead of it; `replay`'s result. The thread stops at the end of
/// `events`, or once `replay` has returned (at its next batch). A panic on it is the caller's.
pub(super) fn on_a_thread<T>(
    events: impl Iterator<Item = TraceEvent> + Send,
    replay: impl FnOnce(Received) -> T,
) -> std::io::Result<T> {
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::sync_channel(BATCHES);
        let feeder = std::thread::Builder::new()
            .name("simulate-feed".into())
            .spawn_scoped(scope, move || feed(events, &tx))?;
        let result = replay(Received {
            batches: rx,
            batch: Vec::new().into_iter(),
        });
        if let Err(panic) = feeder.join() {
            std::panic::resume_unwind(panic);
        }
        Ok(result)
    })
}

/// The feeding thread: batches of fed events until the end of `events` or until the replay is
/// gone.
fn feed(events: impl Iterator<Item = TraceEvent>, tx: &mpsc::SyncSender<Vec<Fed>>) {
    let mut attributes = Attributes::default();
    let mut events = events.map(|event| fed(&mut attributes, event));
    loop {
        let batch: Vec<Fed> = events.by_ref().take(EVENTS).collect();
        let end = batch.len() < EVENTS;
        // Sending fails once the replay is gone: nothing more to feed.
        if (!batch.is_empty() && tx.send(batch).is_err()) || end {
            return;
        }
    }
}

fn fed(attributes: &mut Attributes, event: TraceEvent) -> Fed {
    match event {
        TraceEvent::Request(request) => {
            let derived = attributes.of(&request.method, &request.uri).cloned();
            Fed::Request(request, derived)
        }
        TraceEvent::Ended { key, at } => Fed::Ended { key, at },
    }
}

/// Whether `events` are fed the same on a thread of their own as on the caller's: the same
/// events, with the same attributes and classes, in the same order. `drive` is the same code
/// either way and takes nothing else from its feed (it never waits on the feed in virtual
/// time), so equal feeds make equal replays: the fuzzing harness checks this on every input and
/// replays once, where two replays would cost twice as much for nothing more.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn fed_alike(events: &[TraceEvent]) -> bool {
    // An event as fed, with a request's class and attributes (none for a watch's end).
    type Seen = (
        TraceEvent,
        Option<Result<(u64, RequestInfo), RequestInfoError>>,
    );
    fn seen(fed: Fed) -> Seen {
        match fed {
            Fed::Request(request, derived) => (
                TraceEvent::Request(request),
                Some(derived.map(|d| (d.class, RequestInfo::clone(&d.info)))),
            ),
            Fed::Ended { key, at } => (TraceEvent::Ended { key, at }, None),
        }
    }
    let inline: Vec<Seen> = inline(events.iter().cloned()).map(seen).collect();
    on_a_thread(events.iter().cloned(), |fed| {
        fed.map(seen).collect::<Vec<Seen>>()
    })
    .is_ok_and(|ahead| ahead == inline)
}

/// The replay's end of [`on_a_thread`]: the fed events, in order.
pub(super) struct Received {
    batches: mpsc::Receiver<Vec<Fed>>,
    batch: std::vec::IntoIter<Fed>,
}

impl Iterator for Received {
    type Item = Fed;

    fn next(&mut self) -> Option<Fed> {
        loop {
            if let Some(fed) = self.batch.next() {
                return Some(fed);
            }
            // The thread has ended after its last batch.
            self.batch = self.batches.recv().ok()?.into_iter();
        }
    }
}

#[cfg(test)]
mod tests;
