use super::*;

#[test]
fn a_full_client_is_read_with_defaults_filled_in() {
    let w = parse_workload(
        "duration: 60s\nclients:\n- name: heavy\n  user: alice\n  groups: [dev]\n  threads: 8\n  \
         calls: 20\n  execution: 1s\n  think: 999ms\n  seats: 2\n  finalSeats: 1\n  \
         finalDuration: 500ms\n- {name: light, user: bob, execution: 10ms, method: POST, \
         url: /api/v1/namespaces/a/configmaps, start: 1m}\n",
    )
    .expect("valid");
    assert_eq!(w.duration, Duration::from_secs(60));
    let heavy = &w.clients[0];
    assert_eq!(heavy.identity.groups, ["dev", "system:authenticated"]);
    assert_eq!(heavy.url, DEFAULT_URL);
    assert_eq!(heavy.method, http::Method::GET);
    assert_eq!((heavy.threads, heavy.calls), (8, Some(20)));
    assert_eq!(heavy.think, Duration::from_millis(999));
    assert_eq!(heavy.seats, Some(2));
    assert_eq!(heavy.final_seats, Some((1, Duration::from_millis(500))));
    let light = &w.clients[1];
    assert_eq!((light.threads, light.calls), (1, None));
    assert_eq!(light.start, Duration::from_secs(60));
    assert_eq!(light.method, http::Method::POST);
}

#[test]
fn threads_are_staggered_as_the_apiservers_queue_set_tests_do() {
    let w = parse_workload(
        "duration: 1s\nclients:\n- {name: a, user: a, execution: 1s}\n\
         - {name: b, user: b, execution: 1s, threads: 3, start: 2s}\n",
    )
    .expect("valid");
    assert_eq!(w.clients[0].first_call(0, 0), Duration::ZERO);
    assert_eq!(
        w.clients[1].first_call(1, 2),
        Duration::from_secs(2) + Duration::from_nanos(90 * 2 + 20)
    );
}

#[test]
fn every_problem_is_reported_with_its_field_path() {
    let err = parse_workload(
        "clients:\n- {name: a, user: a, execution: 1x, threads: 0}\n\
         - {name: a, user: '', execution: 1s, url: nope, finalSeats: 2}\n\
         - {name: c, user: c, execution: 0s}\n",
    )
    .expect_err("invalid");
    let expected = [
        "duration: required",
        "clients[0].execution:",
        "clients[0].threads: must be at least 1",
        "clients[1].user: required",
        "clients[1].url: \"nope\" must start with /",
        "clients[1].finalDuration: required with finalSeats",
        "clients[2].execution: execution and think are both 0s",
    ];
    for e in expected {
        assert!(
            err.problems.iter().any(|p| p.starts_with(e)),
            "{e}: {:?}",
            err.problems
        );
    }
}

#[test]
fn a_name_used_twice_and_unknown_fields_are_refused() {
    let err = parse_workload(
        "duration: 1s\nclients:\n- {name: a, user: a, execution: 1s}\n\
         - {name: a, user: b, execution: 1s}\n",
    )
    .expect_err("twice");
    assert_eq!(err.problems, ["clients[1].name: \"a\" is used twice"]);
    let err = parse_workload("duration: 1s\nclients:\n- {name: a, user: a, exec: 1s}\n")
        .expect_err("unknown field");
    assert!(err.problems[0].contains("unknown field `exec`"), "{err}");
}

#[test]
fn a_negative_think_overlaps_the_next_call_with_the_reply() {
    let w = parse_workload(
        "duration: 1s\nclients:\n- {name: a, user: a, execution: 1s, think: -1ns}\n",
    )
    .expect("valid");
    assert_eq!(
        (w.clients[0].think, w.clients[0].overlap),
        (Duration::ZERO, Duration::from_nanos(1))
    );
    let err =
        parse_workload("duration: 1s\nclients:\n- {name: a, user: a, execution: 1s, think: -2s}\n")
            .expect_err("longer than the execution");
    assert_eq!(
        err.problems,
        ["clients[0].think: a negative think must be shorter than the execution"]
    );
}
