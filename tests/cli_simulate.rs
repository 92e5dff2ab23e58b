//! `simulate` run as the built binary: an audit log in, the tables, the JSON report, the
//! comparison, the exit codes, and the HTML report rendered by a real headless browser when the
//! set-up script installed one.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn run(args: &[&str], stdin: Option<&str>) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-apf-proxy"))
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.code(),
        String::from_utf8(out.stdout).expect("utf-8"),
        String::from_utf8(out.stderr).expect("utf-8"),
    )
}

fn audit_log() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/audit/kube-apiserver-audit.log")
        .display()
        .to_string()
}

/// One level of one seat (beside a big one that lends nothing) and no queue for everyone: a
/// small trace overloads it.
const ONE_SEAT: &str = "apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: big}
spec:
  type: Limited
  limited: {nominalConcurrencyShares: 599, lendablePercent: 0, limitResponse: {type: Reject}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: narrow}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: everyone}
spec:
  priorityLevelConfiguration: {name: narrow}
  matchingPrecedence: 100
  rules:
  - subjects: [{kind: Group, group: {name: system:authenticated}}]
    resourceRules: [{verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*'], clusterScope: true}]
";

fn config_dir(yaml: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("flowcontrol.yaml"), yaml).expect("write");
    let path = dir.path().to_path_buf();
    (dir, path)
}

/// Ten one-second GETs from alice, all at once.
fn burst() -> String {
    (0..10)
        .map(|_| {
            "{\"at\":0,\"durationMs\":1000,\"method\":\"GET\",\"url\":\"/api/v1/namespaces/a/pods/p\",\"user\":\"alice\"}\n"
        })
        .collect()
}

#[test]
fn an_audit_log_against_the_default_configuration_gives_the_tables() {
    let (code, out, err) = run(&["simulate", "--trace", &audit_log()], None);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("7 requests over 300.3 s"), "{out}");
    for heading in ["PRIORITY LEVEL", "FLOW SCHEMA", "WAIT-P99"] {
        assert!(out.contains(heading), "{heading}: {out}");
    }
    // The kubelet's GETs go to system (system-nodes), the controller's to workload-high.
    let line = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name}: {out}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(line("system-nodes")[2], "2", "{out}");
    assert_eq!(line("kube-system-service-accounts")[2], "3", "{out}");
}

#[test]
fn json_and_a_comparison_from_standard_input() {
    let (_keep, narrow) = config_dir(ONE_SEAT);
    let narrow = narrow.display().to_string();
    let args = [
        "simulate",
        "--trace",
        "-",
        "--compare-config-dir",
        &narrow,
        "--output",
        "json",
    ];
    let (code, out, err) = run(&args, Some(&burst()));
    assert_eq!(code, Some(0), "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("one JSON object");
    let level = |run: &str, name: &str| {
        report[run]["priorityLevels"]
            .as_array()
            .expect("levels")
            .iter()
            .find(|l| l["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{run}/{name}: {out}"))
    };
    assert_eq!(report["baseline"]["requests"], 10);
    assert_eq!(level("baseline", "global-default")["dispatched"], 10);
    let narrow = level("candidate", "narrow");
    assert_eq!(narrow["arrivals"], 10);
    assert_eq!(narrow["dispatched"], 1);
    assert_eq!(narrow["rejected"]["concurrency-limit"], 9);
    assert_eq!(narrow["topFlows"][0]["flowSchema"], "everyone");
    let schemas = report["candidate"]["flowSchemas"]
        .as_array()
        .expect("schemas");
    assert!(schemas
        .iter()
        .any(|s| s["name"] == "everyone" && s["rejected"]["concurrency-limit"] == 9));
    // The text form ends with the differences.
    let text_args = ["simulate", "--trace", "-", "--compare-config-dir", args[4]];
    let (code, out, _) = run(&text_args, Some(&burst()));
    assert_eq!(code, Some(0));
    assert!(out.contains("== baseline → candidate"), "{out}");
}

#[test]
fn malformed_lines_are_skipped_with_their_number_or_fatal_under_strict() {
    let trace = format!("{}not json\n", burst());
    let (code, out, err) = run(
        &["simulate", "--trace", "-", "--output", "json"],
        Some(&trace),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("line 11"), "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(report["skipped"], 1);
    assert_eq!(report["requests"], 10);
    let (code, _, err) = run(&["simulate", "--trace", "-", "--strict"], Some(&trace));
    assert_eq!(code, Some(1), "{err}");
    let (code, _, err) = run(&["simulate", "--trace", "/nonexistent/trace.log"], None);
    assert_eq!(code, Some(2));
    assert!(err.contains("/nonexistent/trace.log"), "{err}");
}

#[test]
fn the_html_report_is_written_and_renders() {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = dir.path().join("report.html");
    let report_arg = report.display().to_string();
    let args = ["simulate", "--trace", &audit_log(), "--report", &report_arg];
    let (code, _, err) = run(&args, None);
    assert_eq!(code, Some(0), "{err}");
    let html = std::fs::read_to_string(&report).expect("the report");
    assert!(html.contains("<svg"), "charts");
    // An audit log is stamped by the wall clock: the page reads UTC.
    assert!(html.contains(" UTC"), "wall-clock time");
    assert!(html.contains("time (UTC), from "), "the time axis");
    assert!(html.contains("<h2>Summary</h2>"));
    render(&report, &html, dir.path());
}

/// Renders the page in a real headless browser, when one is installed: the browser parses it
/// and its inline SVG, and takes a screenshot (kept at `$SIMULATE_SCREENSHOT_DIR` if set).
fn render(report: &Path, html: &str, dir: &Path) {
    let Some(browser) = ["chromium-headless-shell", "chromium", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
    else {
        eprintln!("no headless browser installed (scripts/install-test-deps.sh installs one): not rendered");
        return;
    };
    let dom = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("file://{}", report.display()))
        .output()
        .expect("the browser runs");
    let dom = String::from_utf8_lossy(&dom.stdout);
    // The browser parsed the page and its inline SVG: the charts are in its DOM.
    assert!(dom.contains("What flow control would have done"), "{dom}");
    assert_eq!(dom.matches("<svg").count(), html.matches("<svg").count());
    let name = report
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("report");
    let screenshot = match std::env::var_os("SIMULATE_SCREENSHOT_DIR") {
        Some(keep) => PathBuf::from(keep).join(format!("{name}.png")),
        None => dir.join(format!("{name}.png")),
    };
    let shot = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1280,2400",
        ])
        .arg(format!("--screenshot={}", screenshot.display()))
        .arg(format!("file://{}", report.display()))
        .output()
        .expect("the browser runs");
    assert!(
        shot.status.success(),
        "{}",
        String::from_utf8_lossy(&shot.stderr)
    );
    assert!(std::fs::metadata(&screenshot).expect("a screenshot").len() > 10_000);
}

fn temp_trace(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trace.log");
    std::fs::write(&path, text).expect("write");
    let path = path.display().to_string();
    (dir, path)
}

#[test]
fn a_log_that_begins_mid_line_is_read_whole() {
    let log = std::fs::read_to_string(audit_log()).expect("fixture");
    // A rotated file read from the middle of its first line.
    let cut = &log[log.find("\"stage\"").expect("a stage")..];
    let (_dir, path) = temp_trace(cut);
    let (code, out, err) = run(&["simulate", "--trace", &path, "--output", "json"], None);
    assert_eq!(code, Some(0), "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(report["requests"], 7, "{out}");
    assert_eq!(report["skipped"], 1);
    assert!(
        err.starts_with("simulate: line 1: not a JSON object"),
        "{err}"
    );
}

/// `--object-counts` takes a count alone (a list is then costed as if each object had the largest
/// size) or a count with the average object size, as the apiserver estimates it.
#[test]
fn object_counts_with_an_average_size_cost_a_list_by_its_bytes() {
    let (_trace_dir, trace) = temp_trace(
        r#"{"method":"GET","url":"/api/v1/namespaces/ns/pods","user":"someone","groups":["system:authenticated"],"at":0,"durationMs":1000}
"#,
    );
    let seats = |counts: &str| {
        let (_dir, path) = temp_trace(counts);
        let (code, out, err) = run(
            &[
                "simulate",
                "--trace",
                &trace,
                "--object-counts",
                &path,
                "--output",
                "json",
            ],
            None,
        );
        assert_eq!(code, Some(0), "{err}");
        let report: serde_json::Value = serde_json::from_str(&out).expect("json");
        let level = report["priorityLevels"]
            .as_array()
            .expect("levels")
            .iter()
            .find(|l| l["name"] == "global-default")
            .expect("global-default")
            .clone();
        level["maxSeatsInUse"].as_u64().expect("seats")
    };
    // 5,000 objects of unknown size: the level's most seats.
    assert!(seats("pods: 5000\n") > 2);
    // 5,000 × 40 bytes = 200,000 bytes: two seats of 100,000.
    assert_eq!(
        seats("pods: {count: 5000, averageObjectSizeBytes: 40}\n"),
        2
    );
}

#[test]
fn a_trace_with_no_usable_line_is_an_error_that_says_what_was_expected() {
    let cases = [
        ("", "it is empty"),
        ("garbage\nmore garbage\n", "2 lines read, 2 malformed"),
        (
            "{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"metadata\":{\"name\":\"x\"}}\n",
            "first problem: line 1: not a trace line",
        ),
    ];
    for (text, why) in cases {
        let (_dir, path) = temp_trace(text);
        let (code, out, err) = run(&["simulate", "--trace", &path], None);
        assert_eq!(code, Some(1), "{text:?}: {out}{err}");
        assert_eq!(out, "", "{text:?}");
        let last = err.lines().last().expect("a line");
        assert!(last.contains("no line could be replayed"), "{last}");
        assert!(last.contains(why), "{last}");
        assert!(
            last.contains("expected audit.k8s.io Event JSON lines"),
            "{last}"
        );
        assert_eq!(
            last.matches("expected audit.k8s.io").count(),
            1,
            "said once: {last}"
        );
        // --strict stops at the first bad line: no table of zeros either.
        let (code, out, err) = run(&["simulate", "--trace", &path, "--strict"], None);
        assert_eq!(code, Some(1), "{text:?}: {out}{err}");
        assert_eq!(out, "", "{text:?}");
    }
}

/// A README (prose, not JSON) as a trace: each line's problem said briefly, the formats
/// expected once, after the summary.
#[test]
fn prose_as_a_trace_says_the_formats_once_after_the_summary() {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let (code, out, err) = run(
        &["simulate", "--trace", readme.to_str().expect("utf-8")],
        None,
    );
    assert_eq!(code, Some(1), "{out}{err}");
    assert_eq!(err.matches("expected audit.k8s.io").count(), 1, "{err}");
    let last = err.lines().last().expect("a line");
    assert!(
        last.contains("no line could be replayed") && last.contains("expected audit.k8s.io"),
        "{err}"
    );
}

#[test]
fn a_workload_given_as_a_trace_says_use_workload() {
    let (_dir, path) = temp_trace(WORKLOAD);
    let (code, _, err) = run(&["simulate", "--trace", &path], None);
    assert_eq!(code, Some(1), "{err}");
    let last = err.lines().last().expect("a line");
    assert!(
        last.contains("this looks like a workload; use `--workload"),
        "{err}"
    );
}

#[test]
fn from_past_the_end_is_an_error_naming_the_span() {
    let (code, out, err) = run(&["simulate", "--trace", &audit_log(), "--from", "1h"], None);
    assert_eq!(code, Some(1), "{out}{err}");
    assert_eq!(out, "", "no table of zeros");
    assert!(
        err.contains("--from 1h0m0s is past the end of the trace: its ")
            && err.contains("requests arrived within"),
        "{err}"
    );
    let (code, _, err) = run(&["simulate", "--trace", &audit_log(), "--from", "0s"], None);
    assert_eq!(code, Some(0), "{err}");
}

/// Two closed-loop clients: a heavy one and a light one, as a capacity-planning question.
const WORKLOAD: &str = "duration: 30s
clients:
- name: heavy
  user: alice
  groups: [dev]
  threads: 8
  execution: 1s
  think: 500ms
- name: light
  user: bob
  url: /api/v1/namespaces/default/pods/p
  execution: 100ms
  think: 1s
";

#[test]
fn a_workload_gives_per_client_results_in_text_and_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let workload = dir.path().join("workload.yaml");
    std::fs::write(&workload, WORKLOAD).expect("write");
    let workload = workload.display().to_string();
    let (code, out, err) = run(&["simulate", "--workload", &workload], None);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("CLIENT"), "{out}");
    let heavy = out
        .lines()
        .find(|l| l.starts_with("heavy "))
        .unwrap_or_else(|| panic!("{out}"));
    // 8 threads, each 1 s of every 1.5 s: 5.33 seats on average, nothing in the way.
    assert!(heavy.contains(" 5.333 "), "{heavy}");
    assert!(
        out.contains("note: calls and replies happen at their exact instants"),
        "{out}"
    );
    let (_keep, narrow) = config_dir(ONE_SEAT);
    let narrow = narrow.display().to_string();
    let args = [
        "simulate",
        "--workload",
        &workload,
        "--compare-config-dir",
        &narrow,
        "--output",
        "json",
    ];
    let (code, out, err) = run(&args, None);
    assert_eq!(code, Some(0), "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("one JSON object");
    let client = |run: &str, i: usize| report[run]["clients"][i].clone();
    assert_eq!(client("baseline", 0)["name"], "heavy");
    assert_eq!(client("baseline", 0)["rejected"], 0);
    assert_eq!(client("candidate", 0)["priorityLevel"], "narrow");
    assert_eq!(client("candidate", 0)["flowSchema"], "everyone");
    // One seat for everyone and no queue: most calls are refused.
    let rejected = client("candidate", 0)["rejected"]
        .as_u64()
        .expect("rejected");
    assert!(rejected > 0, "{out}");
    let seats = client("candidate", 0)["averageSeats"]
        .as_f64()
        .expect("seats")
        + client("candidate", 1)["averageSeats"]
            .as_f64()
            .expect("seats");
    assert!(seats <= 1.0 + 1e-9, "one seat in all: {seats}");
    for key in ["calls", "dispatched", "waitSeconds"] {
        assert!(client("candidate", 1).get(key).is_some(), "{key}: {out}");
    }
}

#[test]
fn the_html_report_says_why_lines_were_skipped() {
    let log = std::fs::read_to_string(audit_log()).expect("fixture");
    let (_dir, path) = temp_trace(&format!("not json\n{log}"));
    let out_dir = tempfile::tempdir().expect("tempdir");
    let report = out_dir.path().join("r.html");
    let report = report.to_str().expect("utf-8");
    let (code, _, err) = run(&["simulate", "--trace", &path, "--report", report], None);
    assert_eq!(code, Some(0), "{err}");
    let html = std::fs::read_to_string(report).expect("report");
    assert!(html.contains("1 lines skipped"), "{html}");
    assert!(
        html.contains("<li>1 line(s), such as line 1: not a JSON object"),
        "{html}"
    );
}

#[test]
fn a_workload_file_with_mistakes_is_refused_with_its_field_paths() {
    let dir = tempfile::tempdir().expect("tempdir");
    let workload = dir.path().join("bad.yaml");
    std::fs::write(
        &workload,
        "duration: 1m\nclients:\n- {name: a, user: alice, execution: 1x, threads: 0}\n",
    )
    .expect("write");
    let workload = workload.display().to_string();
    let (code, out, err) = run(&["simulate", "--workload", &workload], None);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        err.contains(&format!("{workload}: clients[0].execution:")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{workload}: clients[0].threads: must be at least 1"
        )),
        "{err}"
    );
    let (code, _, err) = run(&["simulate", "--workload", &workload, "--trace", "-"], None);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn a_workload_comparison_report_reads_in_seconds_and_renders() {
    let dir = tempfile::tempdir().expect("tempdir");
    let workload = dir.path().join("workload.yaml");
    std::fs::write(&workload, WORKLOAD).expect("write");
    let (_keep, narrow) = config_dir(ONE_SEAT);
    let report = dir.path().join("workload-comparison.html");
    let args = [
        "simulate".to_string(),
        "--workload".to_string(),
        workload.display().to_string(),
        "--compare-config-dir".to_string(),
        narrow.display().to_string(),
        "--report".to_string(),
        report.display().to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err) = run(&args, None);
    assert_eq!(code, Some(0), "{err}");
    let html = std::fs::read_to_string(&report).expect("the report");
    assert!(html.contains("seconds since the start"));
    assert!(html.contains("What the candidate changes"));
    assert!(html.contains("<td>heavy</td>"));
    assert!(html.contains("stroke-dasharray"), "the candidate is dashed");
    render(&report, &html, dir.path());
}

/// Every `simulate` example of the README and the docs, with `--report`: the page renders in a
/// headless browser (when one is installed), and every level that saw requests has a seats chart
/// whose drawn peak is the table's "peak in use" (read from the points the page keeps beside its
/// charts), so that no chart is empty where its table says seats were held.
#[test]
fn every_documented_example_report_draws_the_peaks_its_tables_state() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut documents = vec![root.join("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    documents.extend(pages);
    let commands: Vec<String> = documents
        .iter()
        .flat_map(|doc| {
            std::fs::read_to_string(doc)
                .expect("a document")
                .lines()
                .filter_map(|l| l.strip_prefix("$ kube-apf-proxy simulate "))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(commands.len() >= 2, "{commands:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, command) in commands.iter().enumerate() {
        let report = dir.path().join(format!("example-{i}.html"));
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "\"$BIN\" simulate {command} --report {}",
                report.display()
            ))
            .env("BIN", env!("CARGO_BIN_EXE_kube-apf-proxy"))
            .current_dir(root)
            .output()
            .expect("sh runs");
        assert!(
            out.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let html = std::fs::read_to_string(&report).expect("the report");
        let start = html
            .find("<script type=\"application/json\" id=\"plotted-seats\">")
            .expect("the plotted points");
        let json = &html[start..];
        let json = &json[json.find('>').expect(">") + 1..json.find("</script>").expect("end")];
        let plotted: serde_json::Value = serde_json::from_str(json).expect("JSON");
        let plotted = plotted.as_array().expect("a list");
        assert!(!plotted.is_empty(), "{command}: charts drawn");
        for level in plotted {
            let peak = level["peakInUse"].as_f64().expect("peak");
            let points: Vec<f64> = level["mostInUse"]
                .as_array()
                .expect("points")
                .iter()
                .map(|p| p[1].as_f64().expect("a value"))
                .collect();
            let drawn = points.iter().copied().fold(0.0, f64::max);
            assert_eq!(
                drawn, peak,
                "{command}: {} ({}): the chart's peak is the table's",
                level["level"], level["run"]
            );
            if peak > 0.0 {
                assert!(
                    points.iter().filter(|v| **v > 0.0).count() >= 1 && points.len() > 1,
                    "{command}: {}: a visible series",
                    level["level"]
                );
            }
        }
        render(&report, &html, dir.path());
    }
}

/// An audit event of alice's GET at `received_ms`, recorded as taking `took_ms`, of which
/// `wait` (a Go duration) was the apiserver's APF queue wait.
fn audit_get(id: &str, received_ms: u64, took_ms: u64, wait: Option<&str>) -> String {
    let stamp = |ms: u64| format!("2026-11-24T10:00:{:02}.{:03}000Z", ms / 1000, ms % 1000);
    let annotations = wait.map_or(String::new(), |w| {
        format!(
            r#","annotations":{{"apiserver.latency.k8s.io/apf-queue-wait":"{w}","apiserver.latency.k8s.io/total":"{took_ms}ms"}}"#
        )
    });
    format!(
        r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"{id}","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/a/pods/p","verb":"get","user":{{"username":"alice","groups":["system:authenticated"]}},"requestReceivedTimestamp":"{}","stageTimestamp":"{}","responseStatus":{{"code":200}}{annotations}}}"#,
        stamp(received_ms),
        stamp(received_ms + took_ms)
    ) + "\n"
}

#[test]
fn recorded_queue_waits_are_taken_out_unless_kept_and_the_report_counts_them() {
    let (_config, narrow) = config_dir(ONE_SEAT);
    let narrow = narrow.display().to_string();
    // On one seat: a1 took 2 s as written, 1.9 s of it waiting in the recording apiserver's
    // queue; a2 arrives 0.5 s after it. Executing 0.1 s, a1 leaves the seat to a2.
    let log = audit_get("a1", 0, 2000, Some("1.9s")) + &audit_get("a2", 500, 100, None);
    let (_trace, trace) = temp_trace(&log);
    let json = |extra: &[&str]| {
        let mut args = vec!["simulate", "--trace", &trace, "--config-dir", &narrow];
        args.extend(["--output", "json"]);
        args.extend(extra);
        let (code, out, err) = run(&args, None);
        assert_eq!(code, Some(0), "{err}");
        let report: serde_json::Value = serde_json::from_str(&out).expect("json");
        let level = report["priorityLevels"]
            .as_array()
            .expect("levels")
            .iter()
            .find(|l| l["name"] == "narrow")
            .expect("narrow")
            .clone();
        (level, report["recordedWaitsTakenOut"].clone(), err)
    };
    let (level, taken_out, err) = json(&[]);
    assert_eq!(
        (
            level["dispatched"].as_u64(),
            level["rejected"]["concurrency-limit"].as_u64()
        ),
        (Some(2), Some(0))
    );
    assert_eq!(
        taken_out,
        serde_json::json!({"requests": 1, "seconds": 1.9})
    );
    assert!(err.is_empty(), "{err}");
    let (level, taken_out, err) = json(&["--keep-recorded-waits"]);
    assert_eq!(
        (
            level["dispatched"].as_u64(),
            level["rejected"]["concurrency-limit"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert_eq!(
        taken_out,
        serde_json::json!({"requests": 0, "seconds": 0.0})
    );
    assert!(
        err.contains("1 requests have a recorded queue wait (1.9 s in all), replayed as part of their execution (--keep-recorded-waits)"),
        "{err}"
    );
    // The text and the HTML report say it beside the lines skipped.
    let dir = tempfile::tempdir().expect("tempdir");
    let html = dir.path().join("report.html");
    let html_arg = html.display().to_string();
    let args = [
        "simulate",
        "--trace",
        &trace,
        "--config-dir",
        &narrow,
        "--report",
        &html_arg,
    ];
    let (code, out, err) = run(&args, None);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with("2 requests over 0.6 s (0 bypassing flow control, 0 arrived late, 0 lines skipped, 1 recorded queue waits taken out (1.9 s)); "),
        "{out}"
    );
    let page = std::fs::read_to_string(&html).expect("the report");
    assert!(
        page.contains("0 lines skipped, 1 recorded queue waits taken out (1.9 s)"),
        "{page}"
    );
    // Nothing to keep in a workload.
    let (code, _, err) = run(
        &["simulate", "--workload", &trace, "--keep-recorded-waits"],
        None,
    );
    assert_eq!(code, Some(2), "{err}");
    let (code, out, _) = run(&["simulate", "--help"], None);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("--keep-recorded-waits") && out.contains("Exit codes"),
        "{out}"
    );
}
