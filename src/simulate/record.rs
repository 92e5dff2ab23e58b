//! What a simulation counts: per priority level and FlowSchema, the outcome of every request,
//! queue-wait percentiles, the flows rejected most, and (for the HTML report) a timeline.
//!
//! Memory grows with the number of levels, schemas, flows and timeline samples, never with the
//! number of requests: waits go into fixed-size histograms.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::report::{
    ClientReport, FlowRejections, FlowWait, LevelReport, Rejected, Sample, SchemaReport, SimReport,
    WaitSeconds, WaitsTakenOut,
};
use crate::classify::WordBuildHasher;
use crate::fairqueue::queueset::RejectReason;

/// How many flows `topFlows` lists per level.
pub const TOP_FLOWS: usize = 5;

/// Queue waits are recorded in microseconds up to this (more than the 60 s wait cap).
const MAX_WAIT_MICROS: u64 = 120_000_000;

/// Counts one workload client's calls while a simulation runs.
#[derive(Debug)]
pub struct ClientRecord {
    name: String,
    priority_level: String,
    flow_schema: String,
    calls: u64,
    dispatched: u64,
    rejected: u64,
    seat_nanos: u128,
    waits: Histogram<u64>,
    /// The longest wait, exactly (the histogram keeps two significant digits).
    max_wait: Duration,
}

/// Counts a rejection under its reason.
fn count_rejection(rejected: &mut Rejected, reason: RejectReason) {
    match reason {
        RejectReason::QueueFull => rejected.queue_full += 1,
        RejectReason::ConcurrencyLimit => rejected.concurrency_limit += 1,
        RejectReason::TimeOut => rejected.time_out += 1,
    }
}

// === impl ClientRecord ===

impl ClientRecord {
    /// A client nothing has happened to yet.
    pub fn new(name: &str) -> Self {
        ClientRecord {
            name: name.to_string(),
            priority_level: String::new(),
            flow_schema: String::new(),
            calls: 0,
            dispatched: 0,
            rejected: 0,
            seat_nanos: 0,
            // Two significant digits: a client's histogram is a few KiB, for thousands of them.
            waits: Histogram::new_with_bounds(1, MAX_WAIT_MICROS, 2)
                .expect("valid constant histogram bounds"),
            max_wait: Duration::ZERO,
        }
    }

    /// A call was made; `classified` names its level and FlowSchema when it reached flow control.
    pub fn called(&mut self, classified: Option<(&str, &str)>) {
        self.calls += 1;
        if let (Some((pl, fs)), true) = (classified, self.priority_level.is_empty()) {
            self.priority_level = pl.to_string();
            self.flow_schema = fs.to_string();
        }
    }

    /// A call was dispatched after `waited`; it holds `seats` for `executing` (the part of its
    /// execution within the simulated duration).
    pub fn dispatched(&mut self, waited: Duration, seats: u32, executing: Duration) {
        self.dispatched += 1;
        let _ = self.waits.record(micros(waited));
        self.max_wait = self.max_wait.max(waited);
        self.seat_nanos += u128::from(seats) * executing.as_nanos();
    }

    /// A call was refused.
    pub fn rejected(&mut self) {
        self.rejected += 1;
    }

    /// The client's totals over `duration`.
    pub fn report(&self, duration: Duration) -> ClientReport {
        let average_seats = if duration.is_zero() {
            0.0
        } else {
            self.seat_nanos as f64 / duration.as_nanos() as f64
        };
        ClientReport {
            name: self.name.clone(),
            priority_level: self.priority_level.clone(),
            flow_schema: self.flow_schema.clone(),
            calls: self.calls,
            dispatched: self.dispatched,
            rejected: self.rejected,
            average_seats,
            wait_seconds: self.wait_seconds(),
        }
    }

    /// The histogram's percentiles, none above the exact longest wait.
    fn wait_seconds(&self) -> WaitSeconds {
        let w = percentiles(&self.waits);
        if self.max_wait.is_zero() {
            return w;
        }
        let max = self.max_wait.as_secs_f64();
        WaitSeconds {
            p50: w.p50.min(max),
            p90: w.p90.min(max),
            p99: w.p99.min(max),
            max,
        }
    }
}

#[derive(Debug)]
struct LevelRecord {
    exempt: bool,
    nominal_limit: u32,
    arrivals: u64,
    dispatched: u64,
    rejected: Rejected,
    waits: Histogram<u64>,
    max_seats_in_use: u64,
    flows: HashMap<(Arc<str>, String), u64>,
    /// The longest queue wait of each flow that waited.
    flow_waits: HashMap<(Arc<str>, String), Duration>,
    interval_waits: Histogram<u64>,
    interval_rejected: u64,
    /// Most seats held at once since the last sample.
    interval_max_seats: u64,
    timeline: Vec<Sample>,
}

impl LevelRecord {
    /// A request got seats after waiting `waited`; the level then held `seats_in_use`.
    fn dispatch(&mut self, waited: Duration, seats_in_use: u64, without_timeline: bool) {
        self.dispatched += 1;
        let w = micros(waited);
        let _ = self.waits.record(w);
        if !without_timeline {
            let _ = self.interval_waits.record(w);
            self.interval_max_seats = self.interval_max_seats.max(seats_in_use);
        }
        self.max_seats_in_use = self.max_seats_in_use.max(seats_in_use);
    }
}

#[derive(Debug, Default)]
struct SchemaRecord {
    priority_level: String,
    arrivals: u64,
    dispatched: u64,
    rejected: Rejected,
}

/// Counts an arrival classified to a schema at `priority_level`, and `dispatched` of it at once.
fn schema_arrived(s: &mut SchemaRecord, priority_level: &str, dispatched: u64) {
    if s.priority_level.is_empty() {
        s.priority_level = priority_level.to_string();
    }
    s.arrivals += 1;
    s.dispatched += dispatched;
}

/// Slots of [`Recorder::recent`].
const RECENT: usize = 64;

/// The places of a level's and a schema's records, found by the shared names' addresses.
#[derive(Debug)]
struct Recent {
    /// The names, kept alive here: no other name can take their addresses.
    priority_level: Arc<str>,
    flow_schema: Arc<str>,
    level: Option<usize>,
    schema: usize,
}

/// Collects outcomes while a simulation runs.
///
/// Levels and schemas are looked up by name, by a fast hash (the names come from the
/// configuration), or for a request dispatched at once by the addresses of its shared names;
/// the report lists them by name.
#[derive(Debug, Default)]
pub struct Recorder {
    /// Levels by name: their places in `level_records`.
    levels: HashMap<String, usize, WordBuildHasher>,
    level_records: Vec<LevelRecord>,
    /// Schemas by name: their places in `schema_records`.
    schemas: HashMap<String, usize, WordBuildHasher>,
    schema_records: Vec<SchemaRecord>,
    /// For [`dispatched_at_once`](Self::dispatched_at_once), most requests: the places it found
    /// lately, in slots chosen by the names' addresses (no hash of the names, no comparison).
    recent: Vec<Option<Recent>>,
    requests: u64,
    bypassed: u64,
    late: u64,
    /// No timeline is sampled: the waits since the last sample are not kept.
    without_timeline: bool,
}

fn histogram() -> Histogram<u64> {
    // Three significant digits from 1 µs, grown as longer waits are recorded (up to 120 s, where
    // they are clamped): the buckets are those of a histogram made for the whole range at once,
    // but a level that only sees short waits holds 16 KiB, not the 144 KiB of the whole range,
    // which every replay (two histograms per level) would otherwise allocate and clear. The
    // bounds are constants that `new_with_bounds` accepts (low ≥ 1, high ≥ 2 × low, sigfig ≤ 5).
    let mut h = Histogram::new_with_bounds(1, 2, 3).expect("valid constant histogram bounds");
    h.auto(true);
    h
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros())
        .unwrap_or(u64::MAX)
        .clamp(1, MAX_WAIT_MICROS)
}

fn seconds(micros: u64) -> f64 {
    micros as f64 / 1e6
}

fn percentiles(h: &Histogram<u64>) -> WaitSeconds {
    if h.is_empty() {
        return WaitSeconds::default();
    }
    // Waits of zero are recorded as 1 µs; report them as 0.
    let at = |q: f64| {
        let v = h.value_at_quantile(q);
        if v <= 1 {
            0.0
        } else {
            seconds(v)
        }
    };
    WaitSeconds {
        p50: at(0.50),
        p90: at(0.90),
        p99: at(0.99),
        max: if h.max() <= 1 { 0.0 } else { seconds(h.max()) },
    }
}

// === impl Recorder ===

impl Recorder {
    /// Makes sure a level is listed (levels nothing reached still appear, with zeros).
    pub fn level(&mut self, name: &str, exempt: bool, nominal_limit: u32) {
        let records = &mut self.level_records;
        let at = *self.levels.entry(name.to_string()).or_insert_with(|| {
            records.push(LevelRecord {
                exempt,
                nominal_limit,
                arrivals: 0,
                dispatched: 0,
                rejected: Rejected::default(),
                waits: histogram(),
                max_seats_in_use: 0,
                flows: HashMap::new(),
                flow_waits: HashMap::new(),
                interval_waits: histogram(),
                interval_rejected: 0,
                interval_max_seats: 0,
                timeline: Vec::new(),
            });
            records.len() - 1
        });
        // A place found before the level was listed (none) would be stale now.
        self.recent.clear();
        let entry = &mut self.level_records[at];
        entry.exempt = exempt;
        entry.nominal_limit = nominal_limit;
    }

    /// No timeline will be sampled ([`sample`](Self::sample) is not called): each dispatch then
    /// skips the figures kept for the next sample.
    pub fn without_timeline(&mut self) {
        self.without_timeline = true;
    }

    /// A request was replayed; `bypassed` when it bypasses flow control.
    pub fn request(&mut self, bypassed: bool, late: bool) {
        self.requests += 1;
        self.bypassed += u64::from(bypassed);
        self.late += u64::from(late);
    }

    /// A request was classified to `flow_schema` at `priority_level`.
    pub fn arrived(&mut self, priority_level: &str, flow_schema: &str) {
        if let Some(l) = self.level_mut(priority_level) {
            l.arrivals += 1;
        }
        let schema = self.schema_place(flow_schema);
        schema_arrived(&mut self.schema_records[schema], priority_level, 0);
    }

    fn level_mut(&mut self, name: &str) -> Option<&mut LevelRecord> {
        let at = *self.levels.get(name)?;
        Some(&mut self.level_records[at])
    }

    fn schema_mut(&mut self, name: &str) -> Option<&mut SchemaRecord> {
        let at = *self.schemas.get(name)?;
        Some(&mut self.schema_records[at])
    }

    /// The place of `name`'s record, listed now if it was not. Looked up before it is
    /// inserted: no allocation for a schema already counted.
    fn schema_place(&mut self, name: &str) -> usize {
        if let Some(&at) = self.schemas.get(name) {
            return at;
        }
        self.schema_records.push(SchemaRecord::default());
        let at = self.schema_records.len() - 1;
        self.schemas.insert(name.to_string(), at);
        at
    }

    /// A request ([`request`](Self::request)) classified to `flow_schema` at `priority_level`
    /// ([`arrived`](Self::arrived)) got seats at once ([`dispatched`](Self::dispatched)): the
    /// three in one, each record looked up once.
    pub fn dispatched_at_once(
        &mut self,
        late: bool,
        priority_level: &Arc<str>,
        flow_schema: &Arc<str>,
        waited: Duration,
        seats_in_use: u64,
    ) {
        self.request(false, late);
        let (level, schema) = self.places(priority_level, flow_schema);
        if let Some(at) = level {
            let l = &mut self.level_records[at];
            l.arrivals += 1;
            l.dispatch(waited, seats_in_use, self.without_timeline);
        }
        schema_arrived(&mut self.schema_records[schema], priority_level, 1);
    }

    /// The places of the level's and the schema's records, by the names' addresses when seen
    /// lately, else by name.
    fn places(
        &mut self,
        priority_level: &Arc<str>,
        flow_schema: &Arc<str>,
    ) -> (Option<usize>, usize) {
        if self.recent.is_empty() {
            self.recent.resize_with(RECENT, || None);
        }
        let address = |name: &Arc<str>| Arc::as_ptr(name).cast::<u8>() as usize;
        let slot = ((address(priority_level) ^ address(flow_schema)) >> 4) % RECENT;
        if let Some(recent) = &self.recent[slot] {
            if Arc::ptr_eq(&recent.priority_level, priority_level)
                && Arc::ptr_eq(&recent.flow_schema, flow_schema)
            {
                return (recent.level, recent.schema);
            }
        }
        let level = self.levels.get(&**priority_level).copied();
        let schema = self.schema_place(flow_schema);
        self.recent[slot] = Some(Recent {
            priority_level: Arc::clone(priority_level),
            flow_schema: Arc::clone(flow_schema),
            level,
            schema,
        });
        (level, schema)
    }

    /// It got seats after waiting `waited`; the level then held `seats_in_use`.
    pub fn dispatched(
        &mut self,
        priority_level: &str,
        flow_schema: &Arc<str>,
        flow_distinguisher: &str,
        waited: Duration,
        seats_in_use: u64,
    ) {
        let without_timeline = self.without_timeline;
        if let Some(l) = self.level_mut(priority_level) {
            l.dispatch(waited, seats_in_use, without_timeline);
            if !waited.is_zero() {
                let longest = l
                    .flow_waits
                    .entry((Arc::clone(flow_schema), flow_distinguisher.to_string()))
                    .or_default();
                *longest = (*longest).max(waited);
            }
        }
        if let Some(s) = self.schema_mut(flow_schema) {
            s.dispatched += 1;
        }
    }

    /// It was refused.
    pub fn rejected(
        &mut self,
        priority_level: &str,
        flow_schema: &Arc<str>,
        flow_distinguisher: &str,
        reason: RejectReason,
    ) {
        if let Some(l) = self.level_mut(priority_level) {
            count_rejection(&mut l.rejected, reason);
            l.interval_rejected += 1;
            *l.flows
                .entry((Arc::clone(flow_schema), flow_distinguisher.to_string()))
                .or_insert(0) += 1;
        }
        if let Some(s) = self.schema_mut(flow_schema) {
            count_rejection(&mut s.rejected, reason);
        }
    }

    /// A timeline sample of one level; counts since the previous sample start again.
    pub fn sample(&mut self, priority_level: &str, mut sample: Sample) {
        let Some(l) = self.level_mut(priority_level) else {
            return;
        };
        sample.dispatched = l.interval_waits.len();
        sample.rejected = l.interval_rejected;
        // Most intervals of a fine timeline dispatch nothing: no percentiles to read.
        if sample.dispatched > 0 {
            let interval = percentiles(&l.interval_waits);
            sample.wait_p50 = interval.p50;
            sample.wait_p99 = interval.p99;
            l.interval_waits.reset();
        }
        sample.max_seats_in_use = l.interval_max_seats.max(sample.seats_in_use);
        l.max_seats_in_use = l.max_seats_in_use.max(sample.max_seats_in_use);
        l.interval_rejected = 0;
        // The next interval starts with the seats held now.
        l.interval_max_seats = sample.seats_in_use;
        l.timeline.push(sample);
    }

    /// Halves every level's timeline: each pair of samples becomes one, at the later one's
    /// time, for a sampler that goes on at twice its interval. Counts add up, peaks and waits
    /// keep the larger (a merged p50 or p99 is the larger of the two, not recomputed), and
    /// what a sample reads at its instant is the later one's.
    pub fn halve_timelines(&mut self) {
        for l in &mut self.level_records {
            let merged: Vec<Sample> = l
                .timeline
                .chunks(2)
                .map(|pair| match pair {
                    [a, b] => Sample {
                        max_seats_in_use: a.max_seats_in_use.max(b.max_seats_in_use),
                        dispatched: a.dispatched + b.dispatched,
                        rejected: a.rejected + b.rejected,
                        wait_p50: a.wait_p50.max(b.wait_p50),
                        wait_p99: a.wait_p99.max(b.wait_p99),
                        ..*b
                    },
                    _ => pair[0],
                })
                .collect();
            l.timeline = merged;
        }
    }

    /// The report; `duration` is the trace time replayed.
    pub fn report(&self, duration: Duration, server_concurrency_limit: u32) -> SimReport {
        let mut levels: Vec<_> = self
            .levels
            .iter()
            .map(|(name, &at)| (name, &self.level_records[at]))
            .collect();
        levels.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut schemas: Vec<_> = self
            .schemas
            .iter()
            .map(|(name, &at)| (name, &self.schema_records[at]))
            .collect();
        schemas.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let priority_levels = levels
            .into_iter()
            .map(|(name, l)| {
                let mut flows: Vec<_> = l.flows.iter().collect();
                flows.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
                let mut waits: Vec<_> = l.flow_waits.iter().collect();
                waits.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
                LevelReport {
                    name: name.clone(),
                    exempt: l.exempt,
                    nominal_limit: l.nominal_limit,
                    arrivals: l.arrivals,
                    dispatched: l.dispatched,
                    rejected: l.rejected,
                    wait_seconds: percentiles(&l.waits),
                    max_seats_in_use: l.max_seats_in_use,
                    top_flows: flows
                        .into_iter()
                        .take(TOP_FLOWS)
                        .map(|((fs, d), n)| FlowRejections {
                            flow_schema: fs.to_string(),
                            flow_distinguisher: d.clone(),
                            rejected: *n,
                        })
                        .collect(),
                    longest_waits: waits
                        .into_iter()
                        .take(TOP_FLOWS)
                        .map(|((fs, d), waited)| FlowWait {
                            flow_schema: fs.to_string(),
                            flow_distinguisher: d.clone(),
                            wait_seconds: waited.as_secs_f64(),
                        })
                        .collect(),
                    timeline: l.timeline.clone(),
                }
            })
            .collect();
        let flow_schemas = schemas
            .into_iter()
            .map(|(name, s)| SchemaReport {
                name: name.clone(),
                priority_level: s.priority_level.clone(),
                arrivals: s.arrivals,
                dispatched: s.dispatched,
                rejected: s.rejected,
            })
            .collect();
        SimReport {
            requests: self.requests,
            skipped: 0,
            skip_reasons: Vec::new(),
            recorded_waits_taken_out: WaitsTakenOut::default(),
            bypassed: self.bypassed,
            late: self.late,
            duration_seconds: duration.as_secs_f64(),
            server_concurrency_limit,
            priority_levels,
            flow_schemas,
            clients: Vec::new(),
            notes: Vec::new(),
            start_unix_seconds: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_dispatched_at_once_is_counted_as_by_name_whatever_its_names_addresses() {
        let mut recorder = Recorder::default();
        let (level, schema) = (Arc::<str>::from("workload-low"), Arc::<str>::from("sa"));
        // Before its level is listed: the schema counts it, no level does.
        recorder.dispatched_at_once(false, &level, &schema, Duration::ZERO, 1);
        recorder.level("workload-low", false, 10);
        recorder.dispatched_at_once(false, &level, &schema, Duration::ZERO, 2);
        // The same names at other addresses.
        let (again, other) = (Arc::<str>::from("workload-low"), Arc::<str>::from("sa"));
        recorder.dispatched_at_once(true, &again, &other, Duration::ZERO, 3);
        let report = recorder.report(Duration::from_secs(1), 600);
        let l = &report.priority_levels[0];
        assert_eq!((l.arrivals, l.dispatched, l.max_seats_in_use), (2, 2, 3));
        let s = &report.flow_schemas[0];
        assert_eq!((s.arrivals, s.dispatched), (3, 3));
        assert_eq!(s.priority_level, "workload-low");
        assert_eq!((report.requests, report.late), (3, 1));
    }

    #[test]
    fn a_histogram_grown_as_waits_come_reads_as_one_made_for_the_whole_range() {
        let mut whole = Histogram::<u64>::new_with_bounds(1, MAX_WAIT_MICROS, 3).expect("bounds");
        let mut grown = histogram();
        let mut value = 1u64;
        for i in 0..5_000u64 {
            // 1 µs to 120 s, spread over every magnitude, in no order.
            value = (value * 48_271 + i) % MAX_WAIT_MICROS + 1;
            let w = micros(Duration::from_micros(value >> (i % 27)));
            whole.record(w).expect("in range");
            grown.record(w).expect("grows");
        }
        grown.record(MAX_WAIT_MICROS).expect("grows");
        whole.record(MAX_WAIT_MICROS).expect("in range");
        assert_eq!(grown.len(), whole.len());
        assert_eq!(percentiles(&grown), percentiles(&whole));
        for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(
                grown.value_at_quantile(q),
                whole.value_at_quantile(q),
                "{q}"
            );
        }
    }
}
