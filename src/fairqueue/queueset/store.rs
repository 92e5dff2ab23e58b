//! Request storage for the queue set: a generational slab whose waiting entries are linked into
//! per-queue FIFOs, so enqueue, dequeue and removal from the middle (cancellation) are O(1).
//!
//! Mirrors `fifo_list.go` (a `container/list` per queue with running sums); the slab replaces
//! Go's garbage-collected pointers.

use tokio::time::Instant;

use super::{FlowMeta, RequestId};
use crate::fairqueue::seat_seconds::SeatSeconds;
use crate::fairqueue::WorkEstimate;

/// "No link".
pub(super) const NIL: u32 = u32::MAX;

/// Where a request is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// In its queue's FIFO.
    Waiting {
        prev: u32,
        next: u32,
        arrival_r: SeatSeconds,
        deadline: Option<Instant>,
    },
    /// Dispatched and running.
    Executing { start: Instant },
    /// Finished, still holding its final seats for `additional_latency`.
    Lingering { start: Instant },
}

/// One request known to the queue set.
#[derive(Debug)]
pub(super) struct Entry<W> {
    /// The estimate; `final_seats`/`additional_latency` may be clamped at dispatch.
    pub estimate: WorkEstimate,
    /// MaxSeats as counted in the waiting sums (the estimate before any clamp).
    pub waiting_seats: u32,
    /// `initialWork + finalWork`, fixed at arrival.
    pub total_work: SeatSeconds,
    /// `finalWork`, fixed at arrival.
    pub final_work: SeatSeconds,
    /// Index of its queue; `None` for requests that never queue (exempt and `Reject` levels).
    pub queue: Option<u32>,
    pub phase: Phase,
    pub arrival: Instant,
    pub flow: FlowMeta,
    pub waiter: Option<W>,
}

impl<W> Entry<W> {
    /// The seats the request holds while executing or lingering.
    pub fn max_seats(&self) -> u32 {
        self.estimate.max_seats()
    }
}

/// Running sums over a queue's waiting requests (`queueSum`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueSum {
    /// Σ InitialSeats.
    pub initial_seats: u64,
    /// Σ MaxSeats.
    pub max_seats: u64,
    /// Σ totalWork.
    pub total_work: SeatSeconds,
}

/// One fair queue.
#[derive(Debug, Clone)]
pub(super) struct Queue {
    pub head: u32,
    pub tail: u32,
    pub len: u32,
    pub sum: QueueSum,
    /// The R reading at which the next request is dispatched in the virtual world.
    pub next_dispatch_r: SeatSeconds,
    /// Requests executing (not lingering) from this queue.
    pub executing: u32,
    /// Seats held by this queue's executing and lingering requests.
    pub seats_in_use: u64,
    /// This queue's key in the dispatch index, while it has waiting requests.
    pub finish_key: Option<SeatSeconds>,
}

impl Queue {
    pub fn new() -> Queue {
        Queue {
            head: NIL,
            tail: NIL,
            len: 0,
            sum: QueueSum::default(),
            next_dispatch_r: SeatSeconds::ZERO,
            executing: 0,
            seats_in_use: 0,
            finish_key: None,
        }
    }

    /// Waiting or executing requests: what makes a queue count in the virtual-time rate.
    pub fn is_active(&self) -> bool {
        self.len > 0 || self.executing > 0
    }
}

struct Slot<W> {
    generation: u32,
    entry: Option<Entry<W>>,
}

/// The slab of requests.
pub(super) struct Store<W> {
    slots: Vec<Slot<W>>,
    free: Vec<u32>,
}

impl<W> Store<W> {
    pub fn new() -> Self {
        Store {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    pub fn insert(&mut self, entry: Entry<W>) -> RequestId {
        if let Some(index) = self.free.pop() {
            let slot = &mut self.slots[index as usize];
            slot.entry = Some(entry);
            return RequestId {
                index,
                generation: slot.generation,
            };
        }
        let index = u32::try_from(self.slots.len()).expect("invariant: fewer than 2^32 requests");
        self.slots.push(Slot {
            generation: 0,
            entry: Some(entry),
        });
        RequestId {
            index,
            generation: 0,
        }
    }

    pub fn remove(&mut self, id: RequestId) -> Option<Entry<W>> {
        let slot = self.slots.get_mut(id.index as usize)?;
        if slot.generation != id.generation {
            return None;
        }
        let entry = slot.entry.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(id.index);
        Some(entry)
    }

    /// [`remove`](Self::remove) for a caller that needs only what `read` takes from the entry:
    /// the entry is dropped where it lies instead of being moved out.
    pub fn discard<R>(&mut self, id: RequestId, read: impl FnOnce(&Entry<W>) -> R) -> Option<R> {
        let slot = self.slots.get_mut(id.index as usize)?;
        if slot.generation != id.generation {
            return None;
        }
        let taken = read(slot.entry.as_ref()?);
        slot.entry = None;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(id.index);
        Some(taken)
    }

    pub fn get(&self, id: RequestId) -> Option<&Entry<W>> {
        let slot = self.slots.get(id.index as usize)?;
        (slot.generation == id.generation)
            .then_some(slot.entry.as_ref())
            .flatten()
    }

    pub fn get_mut(&mut self, id: RequestId) -> Option<&mut Entry<W>> {
        let slot = self.slots.get_mut(id.index as usize)?;
        (slot.generation == id.generation)
            .then_some(slot.entry.as_mut())
            .flatten()
    }

    /// The live entry at a raw index (a FIFO link).
    pub fn at(&self, index: u32) -> &Entry<W> {
        self.slots[index as usize]
            .entry
            .as_ref()
            .expect("invariant: FIFO links point at live entries")
    }

    pub fn at_mut(&mut self, index: u32) -> &mut Entry<W> {
        self.slots[index as usize]
            .entry
            .as_mut()
            .expect("invariant: FIFO links point at live entries")
    }

    pub fn id_at(&self, index: u32) -> RequestId {
        RequestId {
            index,
            generation: self.slots[index as usize].generation,
        }
    }

    /// Every live entry (debug dumps and rare maintenance only).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Entry<W>> {
        self.slots.iter_mut().filter_map(|s| s.entry.as_mut())
    }

    /// Every live entry with its id.
    pub fn iter(&self) -> impl Iterator<Item = (RequestId, &Entry<W>)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            s.entry.as_ref().map(|e| {
                (
                    RequestId {
                        index: i as u32,
                        generation: s.generation,
                    },
                    e,
                )
            })
        })
    }

    /// Appends the waiting entry at `index` to `queue`'s FIFO.
    pub fn push_back(&mut self, queue: &mut Queue, index: u32) {
        let tail = queue.tail;
        let e = self.at_mut(index);
        if let Phase::Waiting { prev, next, .. } = &mut e.phase {
            *prev = tail;
            *next = NIL;
        }
        add_to_sum(&mut queue.sum, e);
        if tail == NIL {
            queue.head = index;
        } else {
            set_next(self.at_mut(tail), index);
        }
        queue.tail = index;
        queue.len += 1;
    }

    /// Unlinks the waiting entry at `index` from `queue`'s FIFO.
    pub fn unlink(&mut self, queue: &mut Queue, index: u32) {
        let e = self.at(index);
        let Phase::Waiting { prev, next, .. } = e.phase else {
            return;
        };
        deduct_from_sum(&mut queue.sum, e);
        if prev == NIL {
            queue.head = next;
        } else {
            set_next(self.at_mut(prev), next);
        }
        if next == NIL {
            queue.tail = prev;
        } else if let Phase::Waiting { prev: p, .. } = &mut self.at_mut(next).phase {
            *p = prev;
        }
        queue.len -= 1;
    }

    /// The waiting entries of a queue, oldest first.
    pub fn fifo<'a>(&'a self, queue: &Queue) -> impl Iterator<Item = u32> + 'a {
        let mut cur = queue.head;
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let this = cur;
            cur = match self.at(this).phase {
                Phase::Waiting { next, .. } => next,
                _ => NIL,
            };
            Some(this)
        })
    }
}

fn set_next<W>(e: &mut Entry<W>, to: u32) {
    if let Phase::Waiting { next, .. } = &mut e.phase {
        *next = to;
    }
}

fn add_to_sum<W>(sum: &mut QueueSum, e: &Entry<W>) {
    sum.initial_seats += u64::from(e.estimate.initial_seats);
    sum.max_seats += u64::from(e.waiting_seats);
    sum.total_work += e.total_work;
}

fn deduct_from_sum<W>(sum: &mut QueueSum, e: &Entry<W>) {
    sum.initial_seats -= u64::from(e.estimate.initial_seats);
    sum.max_seats -= u64::from(e.waiting_seats);
    sum.total_work -= e.total_work;
}
