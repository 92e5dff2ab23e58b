//! A future that is polled only when it asked to be: on its first poll and after its own waker
//! fired. Other wake-ups of the task skip it.
//!
//! A connection's task races the connection itself against its shutdown signal and idle timer. The
//! task wakes on every read and write of the connection, and `select!` polls every branch at each
//! wake-up. The shutdown signal's poll takes a lock (tokio's `Notified`), which cost a few hundred
//! instructions per request in profiles of the request path. Gated, those branches cost an atomic
//! swap per wake-up until they have something to say.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

pin_project_lite::pin_project! {
    /// See the module documentation.
    pub(super) struct Gated<F> {
        #[pin]
        inner: F,
        gate: Arc<Gate>,
        // `gate` as a waker, made once.
        waker: Waker,
    }
}

/// Set when the inner future's waker fires; forwards the wake-up to the task.
struct Gate {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Gate {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl<F: Future> Gated<F> {
    pub(super) fn new(inner: F) -> Self {
        let gate = Arc::new(Gate {
            // The first poll goes through: the inner future has not registered its waker yet.
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        Gated {
            inner,
            waker: Waker::from(Arc::clone(&gate)),
            gate,
        }
    }
}

impl<F: Future> Future for Gated<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        // Registered before the flag is read, so a wake-up between the two is not lost.
        this.gate.task.register(cx.waker());
        if !this.gate.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        this.inner.poll(&mut Context::from_waker(this.waker))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// Counts its polls; ready once `ready` is set, then wakes whoever polled it last.
    struct Probe {
        polls: Arc<AtomicUsize>,
        ready: Arc<AtomicBool>,
        waker: Arc<parking_lot::Mutex<Option<Waker>>>,
    }

    impl Future for Probe {
        type Output = ();

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::SeqCst);
            if self.ready.load(Ordering::SeqCst) {
                return Poll::Ready(());
            }
            *self.waker.lock() = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    #[tokio::test]
    async fn polls_the_inner_future_only_after_its_own_wake_up() {
        let polls = Arc::new(AtomicUsize::new(0));
        let ready = Arc::new(AtomicBool::new(false));
        let inner_waker = Arc::new(parking_lot::Mutex::new(None::<Waker>));
        let gated = Gated::new(Probe {
            polls: Arc::clone(&polls),
            ready: Arc::clone(&ready),
            waker: Arc::clone(&inner_waker),
        });
        let mut gated = std::pin::pin!(gated);
        let task_wakes = Arc::new(CountingWaker::default());
        let task_waker = Waker::from(Arc::clone(&task_wakes));
        let mut cx = Context::from_waker(&task_waker);

        // The first poll reaches the inner future; later task wake-ups do not.
        assert!(gated.as_mut().poll(&mut cx).is_pending());
        for _ in 0..5 {
            assert!(gated.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(polls.load(Ordering::SeqCst), 1);

        // The inner future's own wake-up wakes the task and lets the next poll through.
        ready.store(true, Ordering::SeqCst);
        let waker = inner_waker.lock().take().expect("registered");
        waker.wake();
        assert_eq!(task_wakes.0.load(Ordering::SeqCst), 1);
        assert!(gated.as_mut().poll(&mut cx).is_ready());
        assert_eq!(polls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_gated_timer_and_signal_still_fire_inside_select() {
        let (trigger, mut signal) = crate::server::shutdown::shutdown_channel();
        let sleep = Gated::new(tokio::time::sleep(std::time::Duration::from_secs(5)));
        tokio::pin!(sleep);
        tokio::select! {
            () = &mut sleep => {}
            () = std::future::pending::<()>() => unreachable!(),
        }
        let shutdown = Gated::new(signal.triggered());
        tokio::pin!(shutdown);
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            trigger.trigger();
        });
        tokio::select! {
            () = &mut shutdown => {}
            () = tokio::time::sleep(std::time::Duration::from_secs(60)) => panic!("not woken"),
        }
    }

    #[derive(Default)]
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}
