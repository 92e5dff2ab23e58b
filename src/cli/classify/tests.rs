use super::*;
use crate::auth::Identity;
use crate::classify::flow_hash;
use crate::classify::tests::support::bootstrap_config;

fn run_lines(input: &[u8]) -> (Vec<String>, Summary) {
    let mut out = Vec::new();
    let config = bootstrap_config();
    let offline = Offline::new(&config, DEFAULT_SERVER_CONCURRENCY_LIMIT).expect("valid limits");
    let summary = Classifier(offline)
        .classify_lines(input, &mut out, false)
        .expect("writing to a Vec cannot fail");
    let text = String::from_utf8(out).expect("output is UTF-8");
    (text.lines().map(String::from).collect(), summary)
}

#[test]
fn prints_the_documented_line_with_flow_hash_and_hand() {
    let user = "system:serviceaccount:ns:app";
    let input = format!(
        r#"{{"method":"GET","url":"/api/v1/namespaces/ns/pods?watch=true","user":"{user}","groups":["system:serviceaccounts"],"uid":"","extra":{{}}}}"#
    );
    let (lines, summary) = run_lines(input.as_bytes());
    let hash = flow_hash("service-accounts", user);
    let hand = crate::shuffle_sharding::Dealer::new(128, 6)
        .expect("workload-low's queues can be dealt")
        .deal(hash);
    let hand = serde_json::to_string(hand.as_slice()).expect("a hand serialises");
    let want = format!(
        concat!(
            r#"{{"requestInfo":{{"isResourceRequest":true,"path":"/api/v1/namespaces/ns/pods","verb":"watch","#,
            r#""apiPrefix":"api","apiGroup":"","apiVersion":"v1","namespace":"ns","resource":"pods","#,
            r#""subresource":"","name":"","parts":["pods"]}},"#,
            r#""flowSchema":"service-accounts","priorityLevel":"workload-low","flowDistinguisher":"{user}","#,
            r#""exempt":false,"seats":1,"flowHash":"{hash}","hand":{hand}}}"#
        ),
        user = user,
        hash = hash,
        hand = hand,
    );
    assert_eq!(lines, [want]);
    assert_eq!(
        summary,
        Summary {
            classified: 1,
            failed: 0
        }
    );
}

#[test]
fn anonymous_probe_is_exempt_without_flow_hash_or_hand() {
    let (lines, _) = run_lines(br#"{"method":"GET","url":"/healthz","groups":["ignored"]}"#);
    let got: serde_json::Value = serde_json::from_str(&lines[0]).expect("a JSON line");
    assert_eq!(got["flowSchema"], "probes");
    assert_eq!(got["priorityLevel"], "exempt");
    assert_eq!(got["exempt"], true);
    assert_eq!(got["flowDistinguisher"], "");
    assert!(got.get("flowHash").is_none() && got.get("hand").is_none());
}

#[test]
fn bad_lines_give_error_lines_in_order_and_the_run_goes_on() {
    let long = format!(
        "{{\"method\":\"GET\",\"url\":\"/{}\"}}",
        "x".repeat(MAX_LINE_BYTES)
    );
    let mut input = Vec::new();
    for line in [
        r#"{"method":"GET","url":"/healthz","user":"alice"}"#,
        "not json",
        "",
        "   ",
        r#"{"method":"GET","url":"/healthz","colour":"blue"}"#,
        r#"{"method":"GET","url":"/api/v1/pods%zz"}"#,
        long.as_str(),
    ] {
        input.extend_from_slice(line.as_bytes());
        input.push(b'\n');
    }
    input.extend_from_slice(b"\xff\xfe\n");
    input.extend_from_slice(br#"{"method":"GET","url":"/healthz"}"#);
    let (lines, summary) = run_lines(&input);
    let errors: Vec<Option<String>> = lines
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("every line is JSON");
            v.get("error")
                .map(|e| e.as_str().expect("a string").to_string())
        })
        .collect();
    assert_eq!(errors.len(), 7, "{lines:?}");
    assert_eq!(errors[0], None);
    assert!(errors[1]
        .as_deref()
        .is_some_and(|e| e.starts_with("invalid request line")));
    assert!(errors[2]
        .as_deref()
        .is_some_and(|e| e.contains("unknown field `colour`")));
    assert_eq!(errors[3].as_deref(), Some(r#"invalid URL escape "%zz""#));
    assert!(errors[4]
        .as_deref()
        .is_some_and(|e| e.contains("longer than")));
    assert!(errors[5].as_deref().is_some_and(|e| e.contains("UTF-8")));
    assert_eq!(errors[6], None, "a last line without newline is read");
    assert_eq!(
        summary,
        Summary {
            classified: 2,
            failed: 5
        }
    );
}

#[test]
fn line_of_exactly_the_limit_is_read_whole() {
    let mut input = vec![b' '; MAX_LINE_BYTES];
    input.push(b'\n');
    input.extend_from_slice(b"next\r\n");
    let mut reader = input.as_slice();
    let mut buf = Vec::new();
    let first = read_bounded_line(&mut reader, &mut buf).expect("in memory");
    assert_eq!((first, buf.len()), (Some(true), MAX_LINE_BYTES));
    let second = read_bounded_line(&mut reader, &mut buf).expect("in memory");
    assert_eq!((second, buf.as_slice()), (Some(true), &b"next"[..]));
    assert_eq!(
        read_bounded_line(&mut reader, &mut buf).expect("in memory"),
        None
    );
}

#[test]
fn named_user_is_authenticated_and_keeps_uid_and_extra() {
    let input: ClassifyInput = serde_json::from_str(
        r#"{"method":"GET","url":"/","user":"alice","groups":["dev"],"uid":"42","extra":{"scopes":["a"]}}"#,
    )
    .expect("a valid line");
    let identity = input.identity();
    assert_eq!(identity.user, "alice");
    assert_eq!(identity.uid, "42");
    assert_eq!(identity.groups, ["dev", "system:authenticated"]);
    assert_eq!(identity.extra["scopes"], ["a"]);
    let anonymous = ClassifyInput::default().identity();
    assert_eq!(anonymous, Identity::anonymous());
}

#[test]
fn an_impersonating_line_is_classified_as_the_identity_it_runs_as() {
    // The admin (exempt by system:masters) impersonates a service account: classified as the
    // service account, with the groups the apiserver gives it, as the proxy classifies `--as`.
    let line = br#"{"method":"GET","url":"/api/v1/namespaces/ns/pods","user":"admin","groups":["system:masters"],"impersonate":{"user":"system:serviceaccount:ns:app"}}"#;
    let input: ClassifyInput = serde_json::from_slice(line).expect("a valid line");
    let identity = input.identity();
    assert_eq!(identity.user, "system:serviceaccount:ns:app");
    assert_eq!(
        identity.groups,
        [
            "system:serviceaccounts",
            "system:serviceaccounts:ns",
            "system:authenticated"
        ]
    );
    let impersonator = input.impersonator().expect("an impersonator");
    assert_eq!(impersonator.user, "admin");
    assert_eq!(
        impersonator.groups,
        ["system:masters", "system:authenticated"]
    );
    let (lines, _) = run_lines(line);
    let got: serde_json::Value = serde_json::from_str(&lines[0]).expect("a JSON line");
    assert_eq!(got["flowSchema"], "service-accounts", "{got}");
    assert_eq!(got["flowDistinguisher"], "system:serviceaccount:ns:app");
    // Without the impersonation, the admin's own request is exempt.
    let (lines, _) = run_lines(
        br#"{"method":"GET","url":"/api/v1/namespaces/ns/pods","user":"admin","groups":["system:masters"]}"#,
    );
    let got: serde_json::Value = serde_json::from_str(&lines[0]).expect("a JSON line");
    assert_eq!(got["flowSchema"], "exempt");
    assert!(ClassifyInput::default().impersonator().is_none());
}

#[test]
fn seats_come_from_the_work_estimator_capped_by_the_level() {
    // A list whose query does not decode costs the list cap, which global-default's maxSeats
    // (8 at a server limit of 600) lowers; a get costs 1.
    let (lines, _) = run_lines(
        concat!(
            r#"{"method":"GET","url":"/api/v1/pods?limit=abc","user":"alice"}"#,
            "\n",
            r#"{"method":"GET","url":"https://example.test/api/v1/namespaces/a/pods/p","user":"alice"}"#,
        )
        .as_bytes(),
    );
    let seats: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON")["seats"].clone())
        .collect();
    assert_eq!(seats, [8, 1]);
}
