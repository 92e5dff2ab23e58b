use std::time::Duration;

use super::{format_duration, parse_duration, DurationError};

const MS: u64 = 1_000_000;
const S: u64 = 1_000 * MS;

#[test]
fn parses_durations_as_go_does() {
    let cases: &[(&str, u64)] = &[
        ("0", 0),
        ("-0", 0),
        ("+0", 0),
        ("0s", 0),
        ("60s", 60 * S),
        ("1m30s", 90 * S),
        ("500ms", 500 * MS),
        ("2h", 7_200 * S),
        ("2m", 120 * S),
        ("1.5s", 1_500 * MS),
        (".5s", 500 * MS),
        ("1.s", S),
        ("1h2m3s4ms5us6ns", 3_723 * S + 4 * MS + 5_000 + 6),
        ("10µs", 10_000),
        ("10μs", 10_000),
        ("10us", 10_000),
        ("100ns", 100),
        ("+5s", 5 * S),
        ("1.0000000001s", S),
        ("0.1h", 360 * S),
        ("3m0.5s", 180 * S + 500 * MS),
        ("9223372036854775807ns", i64::MAX as u64),
    ];
    for (input, nanos) in cases {
        assert_eq!(
            parse_duration(input),
            Ok(Duration::from_nanos(*nanos)),
            "input {input:?}"
        );
    }
}

#[test]
fn rejects_what_go_rejects_and_negative_durations() {
    let invalid = |s: &str| DurationError::Invalid(s.to_owned());
    let missing = |s: &str| DurationError::MissingUnit(s.to_owned());
    let cases: Vec<(&str, DurationError)> = vec![
        ("", invalid("")),
        ("-", invalid("-")),
        ("s", invalid("s")),
        (".s", invalid(".s")),
        ("1", missing("1")),
        ("1h30", missing("1h30")),
        ("60", missing("60")),
        (
            "3x",
            DurationError::UnknownUnit {
                unit: "x".into(),
                input: "3x".into(),
            },
        ),
        (
            "1 s",
            DurationError::UnknownUnit {
                unit: " s".into(),
                input: "1 s".into(),
            },
        ),
        ("-1s", DurationError::Negative("-1s".into())),
        (
            "9223372036854775808ns",
            DurationError::Overflow("9223372036854775808ns".into()),
        ),
        ("3000000h", DurationError::Overflow("3000000h".into())),
    ];
    for (input, err) in cases {
        assert_eq!(parse_duration(input), Err(err), "input {input:?}");
    }
}

#[test]
fn formats_durations_as_go_does() {
    let cases: &[(u64, &str)] = &[
        (0, "0s"),
        (1, "1ns"),
        (1_500, "1.5µs"),
        (500 * MS, "500ms"),
        (S, "1s"),
        (60 * S, "1m0s"),
        (90 * S, "1m30s"),
        (1_500 * MS, "1.5s"),
        (7_200 * S, "2h0m0s"),
        (3_723 * S + 4 * MS, "1h2m3.004s"),
    ];
    for (nanos, text) in cases {
        assert_eq!(format_duration(Duration::from_nanos(*nanos)), *text);
    }
}

proptest::proptest! {
    #[test]
    fn formatting_then_parsing_round_trips(nanos in 0u64..=(i64::MAX as u64)) {
        let d = Duration::from_nanos(nanos);
        proptest::prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d));
    }
}
