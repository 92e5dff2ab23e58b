use super::*;

const MS: u64 = 1_000_000;

/// A scenario and what k8s.io/apiserver v0.37.2's queue set did with it (the Go oracle's output,
/// recorded): an immediate dispatch, a request too wide for the limit that waits until nothing
/// executes, a context that ends in the queue, and queue-full rejections.
const SMALL: &str = r#"{"config":{"queues":4,"handSize":2,"queueLengthLimit":2,"concurrencyLimit":2,"requestWaitLimitNs":50000000},
 "requests":[
  {"arrivalNs":0,"flowHash":1,"initialSeats":1,"executionNs":10000000},
  {"arrivalNs":0,"flowHash":"18446744073709551615","initialSeats":2,"finalSeats":3,"additionalLatencyNs":5000000,"executionNs":10000000},
  {"arrivalNs":1,"flowHash":2,"initialSeats":1,"executionNs":10000000},
  {"arrivalNs":2,"flowHash":2,"initialSeats":1,"executionNs":10000000,"deadlineNs":3000000},
  {"arrivalNs":3,"flowHash":2,"initialSeats":1,"executionNs":10000000},
  {"arrivalNs":4,"flowHash":2,"initialSeats":1,"executionNs":10000000},
  {"arrivalNs":5,"flowHash":2,"initialSeats":1,"executionNs":10000000}
 ]}"#;

const SMALL_THEIRS: &str = r#"{"requests":[{"outcome":"dispatched","dispatchedAtNs":0,"dispatchSeq":0,"finishedAtNs":10000000},{"outcome":"dispatched","dispatchedAtNs":20000000,"dispatchSeq":3,"finishedAtNs":30000000},{"outcome":"dispatched","dispatchedAtNs":1,"dispatchSeq":1,"finishedAtNs":10000001},{"outcome":"rejected","reason":"cancelled","rejectedAtNs":3000000},{"outcome":"dispatched","dispatchedAtNs":10000000,"dispatchSeq":2,"finishedAtNs":20000000},{"outcome":"rejected","reason":"queue-full","rejectedAtNs":4},{"outcome":"rejected","reason":"queue-full","rejectedAtNs":5}]}"#;

#[test]
fn a_small_scenario_gives_what_the_apiservers_queue_set_gave() {
    let scenario = Scenario::parse(SMALL).expect("parses");
    let theirs: Outcomes = serde_json::from_str(SMALL_THEIRS).expect("parses");
    for behaviour in [Behaviour::Apiserver, Behaviour::AsShipped] {
        let ours = run(&scenario, behaviour).expect("runs");
        assert_eq!(compare(&ours, &theirs.requests), None, "{behaviour:?}");
        assert_eq!(ours, theirs.requests);
    }
}

#[test]
fn a_malformed_scenario_names_the_field() {
    let good_request = r#"{"arrivalNs":0,"flowHash":1,"initialSeats":1,"executionNs":1}"#;
    let config = r#"{"queues":4,"handSize":2,"queueLengthLimit":2,"concurrencyLimit":2}"#;
    let cases: &[(String, &str)] = &[
        ("[]".into(), "not a JSON object"),
        ("{".into(), "not a JSON object"),
        (r#"{"requests":[]}"#.into(), "config: missing"),
        (format!(r#"{{"config":{config}}}"#), "requests: missing"),
        (
            format!(r#"{{"config":{config},"requests":[],"extra":1}}"#),
            "extra: unknown field",
        ),
        (
            r#"{"config":{"queues":4,"handSize":5,"queueLengthLimit":2,"concurrencyLimit":2},"requests":[]}"#.into(),
            "config.handSize: must not exceed config.queues",
        ),
        (
            r#"{"config":{"queues":4,"handSize":2,"queueLengthLimit":2,"concurrencyLimit":0},"requests":[]}"#.into(),
            "config.concurrencyLimit: must be between 1 and 1048576",
        ),
        (
            r#"{"config":{"queues":4,"handSize":2,"queueLengthLimit":2},"requests":[]}"#.into(),
            "config.concurrencyLimit: missing",
        ),
        (
            format!(r#"{{"config":{config},"requests":[{good_request},{{"arrivalNs":0,"flowHash":-1,"initialSeats":1,"executionNs":1}}]}}"#),
            "requests[1].flowHash: not an unsigned 64-bit integer",
        ),
        (
            format!(r#"{{"config":{config},"requests":[{{"arrivalNs":0,"flowHash":1,"initialSeats":1.5,"executionNs":1}}]}}"#),
            "requests[0].initialSeats: not an integer",
        ),
        (
            format!(r#"{{"config":{config},"requests":[{{"arrivalNs":"0","flowHash":1,"initialSeats":1,"executionNs":1}}]}}"#),
            "requests[0].arrivalNs: not a number",
        ),
        (
            format!(r#"{{"config":{config},"requests":[{{"arrivalNs":5,"flowHash":1,"initialSeats":1,"executionNs":1,"deadlineNs":5}}]}}"#),
            "requests[0].deadlineNs: must be after arrivalNs",
        ),
        (
            format!(r#"{{"config":{config},"requests":[{{"arrivalNs":5,"flowHash":1,"initialSeats":1,"executionNs":1,"seats":5}}]}}"#),
            "requests[0].seats: unknown field",
        ),
    ];
    for (text, want) in cases {
        let err = Scenario::parse(text).expect_err(text);
        assert_eq!(err.to_string(), *want, "{text}");
    }
}

#[test]
fn generated_scenarios_are_reproducible_and_read_back() {
    for seed in 0..50 {
        let scenario = generate(seed);
        assert_eq!(scenario, generate(seed));
        assert_eq!(Scenario::parse(&scenario.to_json()), Ok(scenario.clone()));
        assert!(!scenario.requests.is_empty());
        let outcomes = run(&scenario, Behaviour::Apiserver).expect("runs");
        assert_eq!(outcomes.len(), scenario.requests.len());
        assert!(
            outcomes.iter().all(|o| !o.outcome.is_empty()),
            "seed {seed}"
        );
    }
}

#[test]
fn the_first_difference_is_the_earliest() {
    let dispatched = |at: u64, seq: u64| Outcome {
        outcome: "dispatched".into(),
        dispatched_at_ns: Some(at),
        dispatch_seq: Some(seq),
        finished_at_ns: Some(at + MS),
        ..Outcome::default()
    };
    let theirs = vec![dispatched(5, 1), dispatched(1, 0)];
    assert_eq!(compare(&theirs, &theirs), None);
    let ours = vec![dispatched(6, 1), dispatched(2, 0)];
    let d = compare(&ours, &theirs).expect("differs");
    assert_eq!(
        d.to_string(),
        "request 1 dispatchedAtNs: ours 2 theirs 1",
        "the request settled first, not the lowest index"
    );
    let ours = vec![dispatched(5, 1), rejected("time-out", 1)];
    assert_eq!(
        compare(&ours, &theirs).map(|d| d.to_string()),
        Some("request 1 outcome: ours rejected theirs dispatched".into())
    );
}

/// A wide request at the head of the line times out: the apiserver dispatches what it held up
/// only at the next arrival or completion; we (as shipped) at once.
#[test]
fn a_request_leaving_dispatches_at_once_only_as_shipped() {
    let text = r#"{"config":{"queues":1,"handSize":1,"queueLengthLimit":10,"concurrencyLimit":2,"requestWaitLimitNs":5000000},
     "requests":[
      {"arrivalNs":0,"flowHash":7,"initialSeats":1,"executionNs":20000000},
      {"arrivalNs":1,"flowHash":7,"initialSeats":2,"executionNs":1000000},
      {"arrivalNs":4000000,"flowHash":7,"initialSeats":1,"executionNs":1000000}
     ]}"#;
    let scenario = Scenario::parse(text).expect("parses");
    let apiserver = run(&scenario, Behaviour::Apiserver).expect("runs");
    assert_eq!(apiserver[1], rejected("time-out", 5 * MS + 1));
    assert_eq!(apiserver[2], rejected("time-out", 9 * MS), "held up");
    let shipped = run(&scenario, Behaviour::AsShipped).expect("runs");
    assert_eq!(shipped[1], rejected("time-out", 5 * MS + 1));
    assert_eq!(shipped[2].dispatched_at_ns, Some(5 * MS + 1));
}
