use super::*;

#[test]
fn parses_go_durations() {
    let cases: &[(&str, Option<Duration>)] = &[
        ("0", Some(Duration::ZERO)),
        ("1s", Some(Duration::from_secs(1))),
        ("300ms", Some(Duration::from_millis(300))),
        ("1m30s", Some(Duration::from_secs(90))),
        ("1.5h", Some(Duration::from_secs(5400))),
        ("2us", Some(Duration::from_micros(2))),
        ("-1s", None),
    ];
    for (input, want) in cases {
        assert_eq!(parse_go_duration(input), Ok(*want), "{input}");
    }
}

#[test]
fn rejects_invalid_go_durations() {
    for input in ["", "s", "1", "1x", "1.2.3s", "-", "10 s"] {
        assert!(parse_go_duration(input).is_err(), "{input}");
    }
}

#[test]
fn shorter_query_timeout_wins() {
    let max = Duration::from_secs(60);
    let cases: &[(Option<&str>, Duration)] = &[
        (None, max),
        (Some("watch=true"), max),
        (Some("timeout=5s"), Duration::from_secs(5)),
        (Some("a=b&timeout=1m"), Duration::from_secs(60)),
        (Some("timeout=2m"), max),
        (Some("timeout=0s"), max),
        (Some("timeout=-3s"), max),
        (Some("timeout="), max),
        (Some("timeout=1%6Ds"), Duration::from_millis(1)),
    ];
    for (query, want) in cases {
        assert_eq!(
            effective_timeout(*query, max).ok(),
            Some(*want),
            "{query:?}"
        );
    }
}

#[test]
fn invalid_query_timeout_is_a_bad_request() {
    let got = effective_timeout(Some("timeout=soon"), Duration::from_secs(60));
    assert!(
        matches!(&got, Err(ProxyError::BadRequest { message }) if message.starts_with(INVALID_TIMEOUT_IN_URL)),
        "{got:?}"
    );
}
