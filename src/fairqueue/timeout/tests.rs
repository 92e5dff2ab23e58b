use super::*;
use crate::request_info::RequestOptions;

/// The `?timeout=` of a query string, as the request's attributes carry it.
fn timeout_of(query: Option<&str>) -> Timeout {
    RequestOptions::from_query(query.unwrap_or_default())
        .timeout()
        .clone()
}

/// The attributes of a GET with this query string.
fn info_with(query: &str) -> RequestInfo {
    crate::request_info::parse("GET", &format!("/api/v1/namespaces/a/pods/b?{query}"))
        .expect("parses")
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
        (Some("timeout=1.5s"), Duration::from_millis(1500)),
        (Some("timeout=2us"), Duration::from_micros(2)),
        (Some("limit=500&resourceVersion=0"), max),
        (Some("timeoutSeconds=5"), max),
        (Some("timeoutSeconds=5&timeout=3s"), Duration::from_secs(3)),
        // Keys are unescaped as values are (`url.ParseQuery`).
        (Some("%74imeout=5s"), Duration::from_secs(5)),
        (Some("time%6Fut=4s&timeout=9s"), Duration::from_secs(4)),
        // Pieces Go skips: one holding a `;`, one whose value does not unescape; the next
        // `timeout` is the first.
        (Some("timeout=5s;x=1"), max),
        (Some("timeout=5s;&timeout=7s"), Duration::from_secs(7)),
        (Some("timeout=%zz&timeout=6s"), Duration::from_secs(6)),
        (Some("timeout=%&timeout=6s"), Duration::from_secs(6)),
    ];
    for (query, want) in cases {
        assert_eq!(
            effective_timeout(&timeout_of(*query), max).ok(),
            Some(*want),
            "{query:?}"
        );
    }
}

#[test]
fn invalid_query_timeout_has_the_apiservers_message() {
    for value in ["soon", "s", "1", "1x", "1.2.3s", "-", "10%20s"] {
        let got = effective_timeout(
            &timeout_of(Some(&format!("timeout={value}"))),
            Duration::from_secs(60),
        );
        let message = got.expect_err(value).to_string();
        assert!(
            message.starts_with("invalid timeout specified in the request URL - time: "),
            "{message}"
        );
    }
}

#[test]
fn long_running_requests_keep_the_full_timeout_and_every_wait_is_a_quarter() {
    let max = Duration::from_secs(60);
    for handling in [Handling::Watch, Handling::Bypass] {
        let d = deadlines(handling, &info_with("timeout=5s"), max).expect("valid");
        assert_eq!(d.timeout, max, "{handling:?}");
        assert_eq!(d.wait_limit, Duration::from_secs(15), "{handling:?}");
    }
    let d = deadlines(Handling::Ordinary, &info_with("timeout=8s"), max).expect("valid");
    assert_eq!(
        (d.timeout, d.wait_limit),
        (Duration::from_secs(8), Duration::from_secs(2))
    );
    assert_eq!(wait_limit(Duration::from_secs(600)), MAX_WAIT_LIMIT);
}

#[test]
fn a_query_over_go_s_parameter_limit_gives_no_timeout() {
    // `url.ParseQuery` refuses more than 10,000 parameters, and `URL.Query()` is then empty.
    let max = Duration::from_secs(60);
    let within = format!("timeout=5s{}", "&a=b".repeat(9_999));
    assert_eq!(
        effective_timeout(&timeout_of(Some(&within)), max),
        Ok(Duration::from_secs(5))
    );
    let over = format!("timeout=5s{}", "&a=b".repeat(10_000));
    assert_eq!(effective_timeout(&timeout_of(Some(&over)), max), Ok(max));
}
