//! [`Metrics`] as the queue sets' [`LevelObserver`]: the per-FlowSchema queue and seat
//! gauges, and the rejections nobody else sees (callers that go away while queued).
//!
//! Mirrors the `metrics.Add*`/`Observe*` calls in `queueset.go` (`enqueueToBoundLocked`,
//! `removeQueueIndexLocked`/`dispatchLocked`, `finishRequestLocked`) and the cancellation branch of
//! `apf_filter.go: Handle`, which the apiserver counts as a `time-out` rejection observed with
//! `execute="true"` (the request got a queue slot).
//!
//! The queue set's own reports ([`Note`]: heads that did not fit, epoch advances) feed
//! `request_dispatch_no_accommodation_total` and `epoch_advance_total`, as its `metrics.*` calls
//! do in `queueset.go`.
//!
//! The same events move each level's timing-ratio gauges (`priority_level_request_utilization`
//! for waiting requests, `priority_level_seat_utilization`, `demand_seats`), as the queue set's
//! `reqsGaugePair`, `execSeatsGauge` and seat-demand gauge do.

use std::time::Duration;

use tokio::time::Instant;

use super::labels::{ExecutionType, Phase, RejectReason, RequestKind};
use super::{FlowMetrics, Metrics, PriorityLevelGauges};
use crate::fairqueue::level_queues::LevelObserver;
use crate::fairqueue::queueset::Note;

// === impl Metrics: per-level timing-ratio gauges ===

impl Metrics {
    /// The timing-ratio gauges of `priority_level`, made (at 0 / 1) on first use and kept, so
    /// their histograms go on across reconfigurations.
    pub fn level_gauges(&self, now: Instant, priority_level: &str) -> PriorityLevelGauges {
        let mut levels = self.level_gauges.lock();
        if let Some(gauges) = levels.get(priority_level) {
            return gauges.clone();
        }
        let gauges = self.priority_level_gauges(now, priority_level);
        levels.insert(priority_level.to_owned(), gauges.clone());
        gauges
    }

    /// A request of `kind` started executing for `flow` (`AddDispatch`,
    /// `AddRequestsExecuting`, `priority_level_request_utilization{phase="executing"}` and
    /// `read_vs_write_current_requests{phase="executing"}`). Returns when it started.
    pub fn execution_started(&self, flow: &FlowMetrics, kind: RequestKind) -> Instant {
        flow.dispatched().inc();
        self.add_executing(flow, kind, 1)
    }

    /// A request that started at `started` ended its execution (a watch: its initial stage):
    /// the gauges of [`Metrics::execution_started`] go back down and the duration is observed
    /// (`ObserveExecutionDuration`).
    pub fn execution_ended(
        &self,
        flow: &FlowMetrics,
        kind: RequestKind,
        execution: ExecutionType,
        started: Instant,
    ) {
        let now = self.add_executing(flow, kind, -1);
        flow.execution_seconds(execution)
            .observe(now.saturating_duration_since(started).as_secs_f64());
    }

    fn add_executing(&self, flow: &FlowMetrics, kind: RequestKind, delta: i64) -> Instant {
        flow.executing_requests().add(delta as f64);
        let now = Instant::now();
        flow.level.requests_executing.add(now, delta as f64);
        self.add_read_vs_write(now, Phase::Executing, kind, delta);
        now
    }
}

impl Metrics {
    /// One request (`direction` 1 or -1) of `seats` entered or left a queue of `flow`.
    fn add_waiting(&self, flow: &FlowMetrics, direction: i64, seats: u32) {
        let seats = direction * i64::from(seats);
        flow.inqueue_requests().add(direction as f64);
        flow.inqueue_seats().add(seats as f64);
        let now = Instant::now();
        flow.level.requests_waiting.add(now, direction as f64);
        flow.level.seat_demand.add(now, seats as f64);
    }
}

impl LevelObserver for Metrics {
    fn enqueued(&self, priority_level: &str, flow_schema: &str, seats: u32, queue_length: usize) {
        let flow = self.flow(priority_level, flow_schema);
        self.add_waiting(&flow, 1, seats);
        flow.queue_length().observe(queue_length as f64);
    }

    fn dequeued(&self, priority_level: &str, flow_schema: &str, seats: u32, _dispatched: bool) {
        // A dispatched request's seats come back through `seats_changed`.
        self.add_waiting(&self.flow(priority_level, flow_schema), -1, seats);
    }

    fn cancelled(&self, priority_level: &str, flow_schema: &str, waited: Duration) {
        self.inc_rejected(priority_level, flow_schema, RejectReason::TimeOut);
        self.observe_wait(priority_level, flow_schema, true, waited);
    }

    fn seats_changed(&self, priority_level: &str, flow_schema: &str, delta: i64) {
        let flow = self.flow(priority_level, flow_schema);
        flow.executing_seats().add(delta as f64);
        let now = Instant::now();
        flow.level.seats_executing.add(now, delta as f64);
        flow.level.seat_demand.add(now, delta as f64);
    }

    fn noted(&self, priority_level: &str, note: &Note) {
        match note {
            Note::NoAccommodation { flow_schema } => {
                self.inc_dispatch_no_accommodation(priority_level, flow_schema);
            }
            Note::EpochAdvanced { success } => self.inc_epoch_advance(priority_level, *success),
        }
    }

    fn waiting_changed(&self, mutating: bool, delta: i64) {
        let kind = if mutating {
            RequestKind::Mutating
        } else {
            RequestKind::ReadOnly
        };
        self.add_read_vs_write(Instant::now(), Phase::Waiting, kind, delta);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::fairqueue::level_queues::LevelObserver;
    use crate::metrics::Metrics;

    fn value(text: &str, prefix: &str) -> Option<f64> {
        let line = text.lines().find(|l| l.starts_with(prefix))?;
        line.rsplit(' ').next()?.parse().ok()
    }

    const PL_FS: &str = r#"{flow_schema="fs",priority_level="pl"}"#;

    #[tokio::test(start_paused = true)]
    async fn queue_and_seat_events_move_the_flow_schema_gauges() {
        let metrics = Metrics::new();
        let observer: &dyn LevelObserver = metrics.as_ref();
        observer.enqueued("pl", "fs", 2, 3);
        let text = metrics.encode();
        let fc = "apiserver_flowcontrol_";
        let inqueue = format!("{fc}current_inqueue_requests{PL_FS}");
        let inqueue_seats = format!("{fc}current_inqueue_seats{PL_FS}");
        assert_eq!(value(&text, &inqueue), Some(1.0));
        assert_eq!(value(&text, &inqueue_seats), Some(2.0));
        let lengths = format!("{fc}request_queue_length_after_enqueue_sum{PL_FS}");
        assert_eq!(value(&text, &lengths), Some(3.0));

        observer.dequeued("pl", "fs", 2, true);
        observer.seats_changed("pl", "fs", 2);
        let text = metrics.encode();
        assert_eq!(value(&text, &inqueue), Some(0.0));
        assert_eq!(value(&text, &inqueue_seats), Some(0.0));
        let seats = format!("{fc}current_executing_seats{PL_FS}");
        assert_eq!(value(&text, &seats), Some(2.0));
        observer.seats_changed("pl", "fs", -2);
        assert_eq!(value(&metrics.encode(), &seats), Some(0.0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_waiter_is_a_time_out_rejection_that_got_a_queue_slot() {
        let metrics = Metrics::new();
        let observer: &dyn LevelObserver = metrics.as_ref();
        observer.enqueued("pl", "fs", 1, 1);
        observer.dequeued("pl", "fs", 1, false);
        observer.cancelled("pl", "fs", Duration::from_millis(300));
        let text = metrics.encode();
        let rejected = r#"apiserver_flowcontrol_rejected_requests_total{flow_schema="fs",priority_level="pl",reason="time-out"}"#;
        assert_eq!(value(&text, rejected), Some(1.0));
        let waited = r#"apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="fs",priority_level="pl"}"#;
        assert_eq!(value(&text, waited), Some(0.3));
    }

    #[test]
    fn queue_set_notes_feed_the_epoch_and_no_accommodation_counters() {
        use crate::fairqueue::queueset::Note;
        let metrics = Metrics::new();
        let observer: &dyn LevelObserver = metrics.as_ref();
        let fs = std::sync::Arc::from("fs");
        observer.noted("pl", &Note::NoAccommodation { flow_schema: fs });
        observer.noted("pl", &Note::EpochAdvanced { success: true });
        observer.noted("pl", &Note::EpochAdvanced { success: true });
        let text = metrics.encode();
        let fc = "apiserver_flowcontrol_";
        let no_accommodation = format!("{fc}request_dispatch_no_accommodation_total{PL_FS}");
        assert_eq!(value(&text, &no_accommodation), Some(1.0), "{text}");
        let epochs = format!(r#"{fc}epoch_advance_total{{priority_level="pl",success="true"}}"#);
        assert_eq!(value(&text, &epochs), Some(2.0), "{text}");
    }

    #[tokio::test(start_paused = true)]
    async fn queued_requests_feed_the_waiting_read_vs_write_gauge() {
        let metrics = Metrics::new();
        let t0 = tokio::time::Instant::now();
        metrics.set_read_vs_write_denominators(t0, 10, 600);
        let observer: &dyn LevelObserver = metrics.as_ref();
        observer.waiting_changed(true, 1);
        tokio::time::advance(Duration::from_secs(2)).await;
        observer.waiting_changed(true, -1);
        let text = metrics.encode_at(tokio::time::Instant::now());
        // One mutating request of a limit of ten waited two seconds: 0.1 × 2e9 ns (timing
        // histograms weigh each value by the nanoseconds it was in force).
        let sum = r#"apiserver_flowcontrol_read_vs_write_current_requests_sum{phase="waiting",request_kind="mutating"}"#;
        let got = value(&text, sum).expect("the waiting member exists");
        assert!((got - 2e8).abs() < 1.0, "{got}");
        let read_only = r#"apiserver_flowcontrol_read_vs_write_current_requests_sum{phase="waiting",request_kind="readOnly"}"#;
        assert_eq!(value(&text, read_only).unwrap_or(0.0), 0.0);
    }
}
