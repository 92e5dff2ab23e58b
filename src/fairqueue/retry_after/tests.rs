use super::*;

fn drop_n(tracker: &mut DroppedRequestsTracker, level: &str, second: i64, n: u32) -> u64 {
    for _ in 0..n {
        tracker.record_dropped(level, second);
    }
    tracker.retry_after(level)
}

#[test]
fn follows_the_reference_sequence() {
    // (second, drops, Retry-After afterwards), section (g) / dropped_requests_tracker_test.go.
    let steps = [
        (0, 5, 1),
        (1, 11, 2),
        (2, 1, 2),
        (3, 11, 4),
        (4, 1, 4),
        (7, 1, 8),
        (11, 1, 8),
        (15, 1, 7),
        (17, 1, 6),
        (21, 14, 5),
        (22, 1, 10),
    ];
    let mut tracker = DroppedRequestsTracker::new();
    for (second, drops, want) in steps {
        assert_eq!(
            drop_n(&mut tracker, "pl", second, drops),
            want,
            "after {drops} drops at second {second}"
        );
    }
}

#[test]
fn unknown_level_answers_one() {
    let mut tracker = DroppedRequestsTracker::new();
    assert_eq!(tracker.retry_after("never"), 1);
    drop_n(&mut tracker, "busy", 1000, 50);
    assert_eq!(tracker.retry_after("never"), 1);
}

#[test]
fn levels_are_tracked_independently() {
    let mut tracker = DroppedRequestsTracker::new();
    drop_n(&mut tracker, "a", 1000, 10);
    assert_eq!(drop_n(&mut tracker, "a", 1001, 1), 2);
    assert_eq!(drop_n(&mut tracker, "b", 1001, 1), 1);
}

#[test]
fn never_exceeds_thirty_two() {
    let mut tracker = DroppedRequestsTracker::new();
    let mut second = 1_700_000_000;
    for _ in 0..40 {
        drop_n(&mut tracker, "pl", second, 1000);
        second += tracker.retry_after("pl") as i64;
    }
    assert_eq!(tracker.retry_after("pl"), 32);
}

#[test]
fn decays_by_one_per_quiet_drop() {
    let mut tracker = DroppedRequestsTracker::new();
    drop_n(&mut tracker, "pl", 100, 10);
    assert_eq!(drop_n(&mut tracker, "pl", 101, 1), 2);
    assert_eq!(drop_n(&mut tracker, "pl", 200, 1), 1);
    assert_eq!(drop_n(&mut tracker, "pl", 300, 1), 1, "never below 1");
}

#[test]
fn history_stays_bounded() {
    let mut tracker = DroppedRequestsTracker::new();
    for second in 0..10_000 {
        tracker.record_dropped("pl", second);
    }
    let stats = &tracker.levels["pl"];
    assert!(stats.history.len() <= MAX_RETRY_AFTER as usize + 1);
}

#[test]
fn retain_forgets_removed_levels() {
    let mut tracker = DroppedRequestsTracker::new();
    drop_n(&mut tracker, "gone", 100, 10);
    drop_n(&mut tracker, "gone", 101, 1);
    tracker.retain(|name| name != "gone");
    assert_eq!(tracker.retry_after("gone"), 1);
}
