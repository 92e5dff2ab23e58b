//! [`Metrics`] as the queue sets' [`AdmissionObserver`]: the per-FlowSchema queue and seat
//! gauges, and the rejections nobody else sees (callers that go away while queued).
//!
//! Mirrors the `metrics.Add*`/`Observe*` calls in `queueset.go` (`enqueueToBoundLocked`,
//! `removeQueueIndexLocked`/`dispatchLocked`, `finishRequestLocked`) and the cancellation branch of
//! `apf_filter.go: Handle`, which the apiserver counts as a `time-out` rejection observed with
//! `execute="true"` (the request got a queue slot).

use std::time::Duration;

use super::labels::RejectReason;
use super::Metrics;
use crate::fairqueue::admission::AdmissionObserver;

impl AdmissionObserver for Metrics {
    fn enqueued(&self, priority_level: &str, flow_schema: &str, seats: u32, queue_length: usize) {
        self.add_inqueue(priority_level, flow_schema, 1, i64::from(seats));
        self.observe_queue_length(priority_level, flow_schema, queue_length);
    }

    fn dequeued(&self, priority_level: &str, flow_schema: &str, seats: u32, _dispatched: bool) {
        self.add_inqueue(priority_level, flow_schema, -1, -i64::from(seats));
    }

    fn cancelled(&self, priority_level: &str, flow_schema: &str, waited: Duration) {
        self.inc_rejected(priority_level, flow_schema, RejectReason::TimeOut);
        self.observe_wait(priority_level, flow_schema, true, waited);
    }

    fn seats_changed(&self, priority_level: &str, flow_schema: &str, delta: i64) {
        self.add_executing_seats(priority_level, flow_schema, delta);
    }
}
