//! Timing-ratio histograms: a gauge of `numerator / denominator` exposed as a Prometheus histogram
//! of the ratio's value "at the end of every nanosecond".
//!
//! Mirrors `pkg/util/flowcontrol/metrics/timing_ratio_histogram.go` over component-base's
//! `prometheusextension/{timing_histogram.go,weighted_histogram.go}`: whenever the ratio changes at
//! time `t`, the previous ratio is observed with a weight of the nanoseconds since the last change.
//! Each bucket counts nanoseconds, `_count` is the total nanoseconds observed, and `_sum` is the
//! integral of the ratio over time (ratio × nanoseconds). A scrape first accounts for the time up to
//! the scrape (`Write` calls `Add(0)` in the reference), which [`TimingRatioHistogramVec::flush`]
//! does here. Time is passed in as [`tokio::time::Instant`] so paused-time tests drive it.
//!
//! Differences: the reference sums `_sum` in two `float64`s (hot and cold) to limit rounding; one
//! `f64` is used here, whose relative rounding error stays below 1e-7 even after a billion changes.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{Bucket, Histogram, LabelPair, Metric, MetricFamily, MetricType};
use tokio::time::Instant;

/// The help prefix component-base's timing histograms put before the (stability-annotated) help.
const HELP_PREFIX: &str = "EXPERIMENTAL: ";

/// A family of timing-ratio histograms that differ only in their label values.
///
/// Mirrors `TimingRatioHistogramVec`. Cloning shares the family (the registry holds one clone).
#[derive(Clone)]
pub struct TimingRatioHistogramVec {
    inner: Arc<VecInner>,
}

struct VecInner {
    desc: Desc,
    label_names: Vec<String>,
    const_labels: Vec<(String, String)>,
    buckets: Vec<f64>,
    members: Mutex<BTreeMap<Vec<String>, Arc<Mutex<Member>>>>,
}

/// One vector member: the weighted histogram of the ratio plus the numerator and denominator.
#[derive(Debug)]
struct Member {
    numerator: f64,
    denominator: f64,
    /// The ratio currently in force (observed when it next changes).
    value: f64,
    last_set: Instant,
    /// Nanoseconds per bucket; one longer than the bounds (the last is `+Inf`'s own).
    bucket_nanos: Vec<u64>,
    /// Σ ratio × nanoseconds.
    sum: f64,
}

impl Member {
    /// Mirrors `timingHistogram.update`: observe the old value for the time since the last
    /// change (only if time moved forward), then take the new value.
    fn update(&mut self, now: Instant, bounds: &[f64], new_value: f64) {
        self.advance(now, bounds);
        self.value = new_value;
    }

    fn advance(&mut self, now: Instant, bounds: &[f64]) {
        let nanos = now
            .checked_duration_since(self.last_set)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        if nanos == 0 {
            return;
        }
        let idx = bucket_index(bounds, self.value);
        self.bucket_nanos[idx] = self.bucket_nanos[idx].saturating_add(nanos);
        // u64 → f64 is exact up to 2^53 ns (104 days) per observation, plenty between changes.
        self.sum += nanos as f64 * self.value;
        self.last_set = now;
    }

    fn ratio(&self) -> f64 {
        self.numerator / self.denominator
    }
}

/// The index of the first bound `>= value`, or `bounds.len()` (the `+Inf` bucket); NaN lands
/// there too. Mirrors Go's `sort.SearchFloat64s`, whose predicate is `bound >= value`.
fn bucket_index(bounds: &[f64], value: f64) -> usize {
    bounds.partition_point(|&bound| bound < value || value.is_nan())
}

impl TimingRatioHistogramVec {
    /// A family named `fq_name` with `help` (already annotated with the stability level; the
    /// `EXPERIMENTAL: ` prefix is added here), variable `label_names`, `const_labels` and the
    /// bucket upper bounds (strictly increasing, without `+Inf`).
    ///
    /// Returns an error for an invalid name, label or bucket list.
    pub fn new(
        fq_name: &str,
        help: &str,
        label_names: &[&str],
        const_labels: &[(&str, &str)],
        buckets: &[f64],
    ) -> prometheus::Result<Self> {
        if buckets.windows(2).any(|w| w[0] >= w[1]) || buckets.iter().any(|b| b.is_nan()) {
            return Err(prometheus::Error::Msg(format!(
                "{fq_name}: histogram buckets must be in increasing order"
            )));
        }
        let const_map: HashMap<String, String> = const_labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let desc = Desc::new(
            fq_name.to_owned(),
            format!("{HELP_PREFIX}{help}"),
            label_names.iter().map(|n| (*n).to_owned()).collect(),
            const_map,
        )?;
        Ok(Self {
            inner: Arc::new(VecInner {
                desc,
                label_names: label_names.iter().map(|n| (*n).to_owned()).collect(),
                const_labels: const_labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                buckets: buckets.to_vec(),
                members: Mutex::new(BTreeMap::new()),
            }),
        })
    }

    /// The member for `label_values` (one value per label name, in order), created at `now` if
    /// new, with its ratio set to `initial_numerator / initial_denominator` at `now`.
    ///
    /// Mirrors `NewForLabelValuesSafe`: called once per member at the start of its life (e.g. when
    /// a priority level's queue set is created); calling it again for the same labels continues the
    /// same histogram with the new numerator and denominator, as the reference does.
    ///
    /// Returns `None` when the number of label values is wrong (the reference returns a no-op).
    pub fn member(
        &self,
        label_values: &[&str],
        now: Instant,
        initial_numerator: f64,
        initial_denominator: f64,
    ) -> Option<RatioedGauge> {
        if label_values.len() != self.inner.label_names.len() {
            return None;
        }
        let key: Vec<String> = label_values.iter().map(|v| (*v).to_owned()).collect();
        let buckets = &self.inner.buckets;
        let member = {
            let mut members = self.inner.members.lock();
            Arc::clone(members.entry(key).or_insert_with(|| {
                Arc::new(Mutex::new(Member {
                    numerator: initial_numerator,
                    denominator: initial_denominator,
                    value: initial_numerator / initial_denominator,
                    last_set: now,
                    bucket_nanos: vec![0; buckets.len() + 1],
                    sum: 0.0,
                }))
            }))
        };
        {
            let mut m = member.lock();
            m.numerator = initial_numerator;
            m.denominator = initial_denominator;
            let ratio = m.ratio();
            m.update(now, buckets, ratio);
        }
        Some(RatioedGauge {
            member,
            vec: Arc::clone(&self.inner),
        })
    }

    /// Accounts every member for the time up to `now` without changing its ratio; done before
    /// each scrape (the reference's `Write` does `Add(0)`).
    pub fn flush(&self, now: Instant) {
        let members: Vec<Arc<Mutex<Member>>> =
            self.inner.members.lock().values().cloned().collect();
        for member in members {
            member.lock().advance(now, &self.inner.buckets);
        }
    }

    /// The fully-qualified metric name.
    pub fn name(&self) -> &str {
        &self.inner.desc.fq_name
    }
}

impl std::fmt::Debug for TimingRatioHistogramVec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimingRatioHistogramVec")
            .field("name", &self.inner.desc.fq_name)
            .finish_non_exhaustive()
    }
}

impl Collector for TimingRatioHistogramVec {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.inner.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let members = self.inner.members.lock();
        let metrics = members
            .iter()
            .map(|(values, member)| self.inner.to_metric(values, &member.lock()))
            .collect();
        let mut family = MetricFamily::default();
        family.set_name(self.inner.desc.fq_name.clone());
        family.set_help(self.inner.desc.help.clone());
        family.set_field_type(MetricType::HISTOGRAM);
        family.set_metric(metrics);
        vec![family]
    }
}

impl VecInner {
    fn to_metric(&self, values: &[String], member: &Member) -> Metric {
        let mut labels: Vec<LabelPair> = self
            .label_names
            .iter()
            .zip(values)
            .chain(self.const_labels.iter().map(|(k, v)| (k, v)))
            .map(|(name, value)| {
                let mut pair = LabelPair::default();
                pair.set_name(name.clone());
                pair.set_value(value.clone());
                pair
            })
            .collect();
        labels.sort_by(|a, b| a.name().cmp(b.name()));

        let mut cumulative = 0u64;
        let buckets = self
            .buckets
            .iter()
            .zip(&member.bucket_nanos)
            .map(|(&bound, &nanos)| {
                cumulative = cumulative.saturating_add(nanos);
                let mut bucket = Bucket::default();
                bucket.set_upper_bound(bound);
                bucket.set_cumulative_count(cumulative);
                bucket
            })
            .collect();
        let overflow = member.bucket_nanos.last().copied().unwrap_or(0);
        let mut histogram = Histogram::default();
        histogram.set_bucket(buckets);
        histogram.set_sample_count(cumulative.saturating_add(overflow));
        histogram.set_sample_sum(member.sum);

        let mut metric = Metric::default();
        metric.set_label(labels);
        metric.set_histogram(histogram);
        metric
    }
}

/// A handle on one member: a gauge whose numerator and denominator are set independently.
///
/// Mirrors `RatioedGauge` (`timingRatioHistogramInner`). Every change takes the time it happens.
#[derive(Clone)]
pub struct RatioedGauge {
    member: Arc<Mutex<Member>>,
    vec: Arc<VecInner>,
}

impl std::fmt::Debug for RatioedGauge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.member.lock();
        f.debug_struct("RatioedGauge")
            .field("name", &self.vec.desc.fq_name)
            .field("numerator", &m.numerator)
            .field("denominator", &m.denominator)
            .finish()
    }
}

impl RatioedGauge {
    /// Sets the numerator at `now`.
    pub fn set(&self, now: Instant, numerator: f64) {
        self.change(now, |m| m.numerator = numerator);
    }

    /// Adds `delta` (may be negative) to the numerator at `now`.
    pub fn add(&self, now: Instant, delta: f64) {
        self.change(now, |m| m.numerator += delta);
    }

    /// Sets the denominator at `now` (kept until changed again).
    pub fn set_denominator(&self, now: Instant, denominator: f64) {
        self.change(now, |m| m.denominator = denominator);
    }

    /// The current numerator.
    pub fn numerator(&self) -> f64 {
        self.member.lock().numerator
    }

    /// The current denominator.
    pub fn denominator(&self) -> f64 {
        self.member.lock().denominator
    }

    fn change(&self, now: Instant, apply: impl FnOnce(&mut Member)) {
        let mut m = self.member.lock();
        apply(&mut m);
        let ratio = m.ratio();
        m.update(now, &self.vec.buckets, ratio);
    }
}

#[cfg(test)]
mod tests;
