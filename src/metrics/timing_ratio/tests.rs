use std::time::Duration;

use prometheus::core::Collector;
use prometheus::Encoder;

use super::*;

const SEC: u64 = 1_000_000_000;

fn vec_with(buckets: &[f64]) -> TimingRatioHistogramVec {
    TimingRatioHistogramVec::new("test_ratio", "[ALPHA] A ratio", &["pl"], &[], buckets)
        .expect("valid definition")
}

/// (cumulative counts per bound, +Inf count, sum) of the single member.
fn snapshot(vec: &TimingRatioHistogramVec) -> (Vec<u64>, u64, f64) {
    let families = vec.collect();
    let metric = &families[0].get_metric()[0];
    let h = metric.get_histogram();
    let counts = h
        .get_bucket()
        .iter()
        .map(|b| b.cumulative_count())
        .collect();
    (counts, h.get_sample_count(), h.get_sample_sum())
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn observations_are_weighted_by_the_time_each_ratio_was_in_force() {
    let vec = vec_with(&[0.0, 0.5, 1.0]);
    let t0 = Instant::now();
    let g = vec.member(&["a"], t0, 0.0, 2.0).expect("member");
    g.set(t0 + secs(1), 1.0); // 0 for 1 s, then 0.5
    g.add(t0 + secs(3), 1.0); // 0.5 for 2 s, then 1
    vec.flush(t0 + secs(4)); // 1 for 1 s

    let (counts, count, sum) = snapshot(&vec);
    assert_eq!(counts, vec![SEC, 3 * SEC, 4 * SEC]);
    assert_eq!(count, 4 * SEC);
    assert_eq!(sum, 0.5 * 2e9 + 1e9);
}

#[test]
fn denominator_changes_are_observed_like_numerator_changes() {
    let vec = vec_with(&[0.25, 0.5, 1.0]);
    let t0 = Instant::now();
    let g = vec.member(&["a"], t0, 1.0, 4.0).expect("member");
    g.set_denominator(t0 + secs(2), 2.0); // 0.25 for 2 s, then 0.5
    vec.flush(t0 + secs(3));

    let (counts, count, sum) = snapshot(&vec);
    assert_eq!(counts, vec![2 * SEC, 3 * SEC, 3 * SEC]);
    assert_eq!(count, 3 * SEC);
    assert_eq!(sum, 0.25 * 2e9 + 0.5 * 1e9);
    assert_eq!((g.numerator(), g.denominator()), (1.0, 2.0));
}

#[test]
fn buckets_are_upper_inclusive_and_overflow_counts_only_in_the_total() {
    // Table: ratio held for one second → (cumulative counts at [0, 1], total).
    let cases: &[(f64, f64, [u64; 2], u64)] = &[
        (0.0, 1.0, [SEC, SEC], SEC),
        (1.0, 1.0, [0, SEC], SEC),
        (3.0, 2.0, [0, 0], SEC),
        // 0/0 is NaN: Go's sort.SearchFloat64s puts it past every bound.
        (0.0, 0.0, [0, 0], SEC),
    ];
    for &(num, den, want, total) in cases {
        let vec = vec_with(&[0.0, 1.0]);
        let t0 = Instant::now();
        vec.member(&["a"], t0, num, den).expect("member");
        vec.flush(t0 + secs(1));
        let (counts, count, _) = snapshot(&vec);
        assert_eq!((counts, count), (want.to_vec(), total), "{num}/{den}");
    }
}

#[test]
fn no_time_passing_means_no_observation() {
    let vec = vec_with(&[1.0]);
    let t0 = Instant::now() + secs(10);
    let g = vec.member(&["a"], t0, 0.0, 1.0).expect("member");
    g.set(t0, 5.0);
    g.set(t0 - secs(1), 0.5); // an earlier time (a racing caller) is not observed backwards
    vec.flush(t0);
    assert_eq!(snapshot(&vec).1, 0);

    vec.flush(t0 + Duration::from_nanos(7));
    let (counts, count, sum) = snapshot(&vec);
    assert_eq!((counts, count, sum), (vec![7], 7, 3.5));
}

#[test]
fn member_again_continues_the_histogram_with_a_fresh_ratio() {
    let vec = vec_with(&[0.5, 1.0]);
    let t0 = Instant::now();
    vec.member(&["a"], t0, 1.0, 1.0).expect("member");
    let g = vec.member(&["a"], t0 + secs(1), 0.0, 4.0).expect("member");
    g.add(t0 + secs(2), 1.0);
    vec.flush(t0 + secs(2));
    // 1.0 for 1 s, 0.0 for 1 s, then 0.25 from t0+2s.
    let (counts, count, sum) = snapshot(&vec);
    assert_eq!((counts, count, sum), (vec![SEC, 2 * SEC], 2 * SEC, 1e9));
    assert_eq!(vec.collect()[0].get_metric().len(), 1);
}

#[test]
fn wrong_label_count_and_bad_buckets_are_refused() {
    let vec = vec_with(&[1.0]);
    assert!(vec.member(&[], Instant::now(), 0.0, 1.0).is_none());
    assert!(vec.member(&["a", "b"], Instant::now(), 0.0, 1.0).is_none());
    for buckets in [&[1.0, 1.0][..], &[2.0, 1.0], &[f64::NAN]] {
        assert!(TimingRatioHistogramVec::new("x", "h", &[], &[], buckets).is_err());
    }
}

#[test]
fn exposition_is_a_histogram_with_experimental_help_and_sorted_labels() {
    let vec = TimingRatioHistogramVec::new(
        "apiserver_flowcontrol_priority_level_seat_utilization",
        "[ALPHA] Seats",
        &["priority_level"],
        &[("phase", "executing")],
        &[0.5, 1.0],
    )
    .expect("valid");
    let registry = prometheus::Registry::new();
    registry.register(Box::new(vec.clone())).expect("register");
    let t0 = Instant::now();
    let g = vec.member(&["workload-low"], t0, 0.0, 4.0).expect("member");
    g.set(t0 + Duration::from_nanos(10), 3.0);
    vec.flush(t0 + Duration::from_nanos(14));

    let mut out = Vec::new();
    prometheus::TextEncoder::new()
        .encode(&registry.gather(), &mut out)
        .expect("encode");
    let name = "apiserver_flowcontrol_priority_level_seat_utilization";
    let labels = r#"phase="executing",priority_level="workload-low""#;
    let want = format!(
        "# HELP {name} EXPERIMENTAL: [ALPHA] Seats\n\
         # TYPE {name} histogram\n\
         {name}_bucket{{{labels},le=\"0.5\"}} 10\n\
         {name}_bucket{{{labels},le=\"1\"}} 14\n\
         {name}_bucket{{{labels},le=\"+Inf\"}} 14\n\
         {name}_sum{{{labels}}} 3\n\
         {name}_count{{{labels}}} 14\n"
    );
    assert_eq!(String::from_utf8(out).expect("utf-8"), want);
}
