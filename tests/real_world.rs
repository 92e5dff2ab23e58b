//! FlowSchemas, priority levels and audit logs as other projects publish them
//! (`tests/fixtures/real-world/`, each file naming the project and path whose shape it reproduces),
//! run through `check`, `lint`, `classify`, `config dump` and `simulate` as the built binary.
//!
//! Classification is checked twice: for the directory alone (what the proxy runs on: the fixture
//! and the implied mandatory objects) and for the cluster the fixture was written for (the
//! Kubernetes default objects of `config/`, the fixture's objects replacing those of the same
//! name): the schema and level kube-apiserver would pick there.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kube_apf_proxy::auth::Identity;
use kube_apf_proxy::config::load::{load_with_overrides, read_dir};
use kube_apf_proxy::config::{Config, PriorityLevelSpec};

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str], stdin: Option<&str>) -> Run {
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
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(input.as_bytes()).expect("write stdin");
    }
    let out = child.wait_with_output().expect("output");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("utf-8"),
        stderr: String::from_utf8(out.stderr).expect("utf-8"),
    }
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn config_dir(name: &str) -> PathBuf {
    root().join("tests/fixtures/real-world/configs").join(name)
}

/// One request and where it goes: `(FlowSchema, priority level)` for the directory alone and
/// in the cluster.
struct Request {
    method: &'static str,
    url: &'static str,
    /// `None`: anonymous.
    user: Option<&'static str>,
    groups: &'static [&'static str],
    alone: (&'static str, &'static str),
    cluster: (&'static str, &'static str),
}

struct Case {
    dir: &'static str,
    /// `check`'s summary after `OK: DIR: `, or `None` when the directory is invalid.
    summary: Option<&'static str>,
    /// The lint codes found, sorted and without repeats.
    lint: &'static [&'static str],
    requests: &'static [Request],
}

const SA_GROUPS: &[&str] = &["system:serviceaccounts"];
const ALICE: &[&str] = &["dev"];

const CASES: &[Case] = &[
    Case {
        dir: "k8s-docs-health-for-strangers",
        summary: Some("2 priority levels, 3 FlowSchemas in use"),
        lint: &["broad-subject-privileged-level"],
        requests: &[
            Request {
                method: "POST",
                url: "/healthz",
                user: None,
                groups: &[],
                alone: ("health-for-strangers", "exempt"),
                cluster: ("health-for-strangers", "exempt"),
            },
            // In a cluster the suggested `probes` (precedence 2) takes GETs first.
            Request {
                method: "GET",
                url: "/readyz",
                user: None,
                groups: &[],
                alone: ("health-for-strangers", "exempt"),
                cluster: ("probes", "exempt"),
            },
        ],
    },
    Case {
        dir: "k8s-docs-list-events",
        summary: Some("2 priority levels, 3 FlowSchemas in use"),
        lint: &[],
        requests: &[Request {
            method: "GET",
            url: "/api/v1/namespaces/default/events",
            user: Some("system:serviceaccount:default:default"),
            groups: SA_GROUPS,
            alone: ("list-events-default-service-account", "catch-all"),
            cluster: ("list-events-default-service-account", "catch-all"),
        }],
    },
    Case {
        dir: "openshift-control-plane-operators",
        summary: Some("3 priority levels, 3 FlowSchemas in use"),
        lint: &["api-version-removed"],
        requests: &[Request {
            method: "PATCH",
            url: "/apis/apps/v1/namespaces/openshift-kube-apiserver/deployments/x",
            user: Some(
                "system:serviceaccount:openshift-kube-apiserver-operator:kube-apiserver-operator",
            ),
            groups: SA_GROUPS,
            alone: (
                "openshift-kube-apiserver-operator",
                "openshift-control-plane-operators",
            ),
            cluster: (
                "openshift-kube-apiserver-operator",
                "openshift-control-plane-operators",
            ),
        }],
    },
    Case {
        dir: "openshift-monitoring-metrics-exempt",
        summary: Some("2 priority levels, 3 FlowSchemas in use"),
        lint: &["api-version-removed"],
        requests: &[Request {
            method: "GET",
            url: "/metrics",
            user: Some("system:serviceaccount:openshift-monitoring:prometheus-k8s"),
            groups: SA_GROUPS,
            alone: ("openshift-monitoring-metrics", "exempt"),
            cluster: ("openshift-monitoring-metrics", "exempt"),
        }],
    },
    Case {
        dir: "openshift-monitoring-metrics-workload-high",
        summary: Some(
            "2 priority levels, 2 FlowSchemas in use, 1 more FlowSchema skipped (dangling)",
        ),
        lint: &["api-version-removed", "flowschema-dangling"],
        requests: &[Request {
            method: "GET",
            url: "/metrics",
            user: Some("system:serviceaccount:openshift-monitoring:prometheus-k8s"),
            groups: SA_GROUPS,
            alone: ("catch-all", "catch-all"),
            cluster: ("openshift-monitoring-metrics", "workload-high"),
        }],
    },
    Case {
        dir: "openshift-probes",
        summary: Some("2 priority levels, 3 FlowSchemas in use"),
        lint: &["api-version-removed"],
        requests: &[Request {
            method: "GET",
            url: "/livez",
            user: Some("alice"),
            groups: ALICE,
            alone: ("probes", "exempt"),
            cluster: ("probes", "exempt"),
        }],
    },
    Case {
        dir: "openshift-sdn-v1alpha1",
        summary: Some(
            "2 priority levels, 2 FlowSchemas in use, 1 more FlowSchema skipped (dangling)",
        ),
        lint: &["api-version-removed", "flowschema-dangling"],
        requests: &[Request {
            method: "GET",
            url: "/api/v1/nodes",
            user: Some("system:serviceaccount:openshift-sdn:sdn"),
            groups: SA_GROUPS,
            alone: ("catch-all", "catch-all"),
            cluster: ("openshift-sdn", "system"),
        }],
    },
    Case {
        dir: "openshift-sdn-v1beta2",
        summary: Some(
            "2 priority levels, 2 FlowSchemas in use, 1 more FlowSchema skipped (dangling)",
        ),
        lint: &["api-version-removed", "flowschema-dangling"],
        requests: &[Request {
            method: "WATCH_IS_GET",
            url: "/api/v1/namespaces/openshift-sdn/pods?watch=true",
            user: Some("system:serviceaccount:openshift-sdn:sdn-controller"),
            groups: SA_GROUPS,
            alone: ("catch-all", "catch-all"),
            cluster: ("openshift-sdn", "system"),
        }],
    },
    Case {
        dir: "openshift-ovn-kubernetes-v1",
        summary: Some(
            "2 priority levels, 2 FlowSchemas in use, 1 more FlowSchema skipped (dangling)",
        ),
        lint: &["flowschema-dangling"],
        requests: &[Request {
            method: "GET",
            url: "/api/v1/nodes",
            user: Some(
                "system:serviceaccount:openshift-ovn-kubernetes:ovn-kubernetes-control-plane",
            ),
            groups: SA_GROUPS,
            alone: ("catch-all", "catch-all"),
            cluster: ("openshift-ovn-kubernetes", "system"),
        }],
    },
    Case {
        dir: "kyverno-v1beta3",
        summary: Some("3 priority levels, 3 FlowSchemas in use"),
        lint: &["api-version-removed"],
        requests: KYVERNO,
    },
    Case {
        dir: "kyverno-v1",
        summary: Some("3 priority levels, 3 FlowSchemas in use"),
        lint: &[],
        requests: KYVERNO,
    },
    Case {
        dir: "kyverno-v1alpha1",
        summary: Some("3 priority levels, 3 FlowSchemas in use"),
        lint: &["api-version-removed"],
        requests: KYVERNO,
    },
    Case {
        dir: "karpenter-v1",
        summary: Some(
            "2 priority levels, 2 FlowSchemas in use, 2 more FlowSchemas skipped (dangling)",
        ),
        lint: &["flowschema-dangling"],
        requests: KARPENTER,
    },
    Case {
        dir: "karpenter-v1beta3",
        summary: Some(
            "2 priority levels, 2 FlowSchemas in use, 2 more FlowSchemas skipped (dangling)",
        ),
        lint: &["api-version-removed", "flowschema-dangling"],
        requests: KARPENTER,
    },
    Case {
        dir: "deckhouse-namespaced",
        summary: Some("3 priority levels, 3 FlowSchemas in use"),
        lint: &["api-version-removed"],
        requests: &[Request {
            method: "GET",
            url: "/api/v1/pods",
            user: Some("system:serviceaccount:d8-cloud-provider:cloud-controller-manager"),
            groups: &[
                "system:serviceaccounts",
                "system:serviceaccounts:d8-cloud-provider",
            ],
            alone: ("cloud-provider-flowschema", "cluster-low"),
            cluster: ("cloud-provider-flowschema", "cluster-low"),
        }],
    },
    Case {
        dir: "appscode-editor-v1alpha1",
        summary: Some("3 priority levels, 2 FlowSchemas in use"),
        lint: &["api-version-removed", "priority-level-unused"],
        requests: &[Request {
            method: "GET",
            url: "/api/v1/pods",
            user: Some("alice"),
            groups: ALICE,
            alone: ("catch-all", "catch-all"),
            cluster: ("global-default", "global-default"),
        }],
    },
    Case {
        dir: "terraform-v1beta2-invalid",
        summary: None,
        lint: &[],
        requests: &[],
    },
    Case {
        dir: "kubectl-list-autoupdate",
        summary: Some("3 priority levels, 3 FlowSchemas in use"),
        lint: &[],
        requests: GLOBAL_DEFAULT,
    },
    Case {
        dir: "kubectl-list-edited",
        summary: Some("3 priority levels, 3 FlowSchemas in use"),
        lint: &[],
        requests: GLOBAL_DEFAULT,
    },
    Case {
        dir: "v1beta3-preserve-zero",
        summary: Some("3 priority levels, 3 FlowSchemas in use"),
        lint: &[
            "api-version-removed",
            "borrowing-contradiction",
            "nominal-concurrency-tiny",
        ],
        requests: &[Request {
            method: "POST",
            url: "/apis/batch/v1/namespaces/ci/jobs",
            user: Some("bob"),
            groups: &["batch-runners"],
            alone: ("batch-jobs", "borrow-only"),
            cluster: ("batch-jobs", "borrow-only"),
        }],
    },
];

const KYVERNO: &[Request] = &[Request {
    method: "GET",
    url: "/api/v1/namespaces/kyverno/configmaps",
    user: Some("system:serviceaccount:kyverno:kyverno-admission-controller"),
    groups: SA_GROUPS,
    alone: (
        "kyverno-admission-controller",
        "kyverno-admission-controller",
    ),
    cluster: (
        "kyverno-admission-controller",
        "kyverno-admission-controller",
    ),
}];

const KARPENTER: &[Request] = &[
    Request {
        method: "PUT",
        url: "/apis/coordination.k8s.io/v1/namespaces/karpenter/leases/karpenter-leader-election",
        user: Some("system:serviceaccount:karpenter:karpenter"),
        groups: SA_GROUPS,
        alone: ("catch-all", "catch-all"),
        cluster: ("karpenter-leader-election", "leader-election"),
    },
    Request {
        method: "GET",
        url: "/api/v1/nodes",
        user: Some("system:serviceaccount:karpenter:karpenter"),
        groups: SA_GROUPS,
        alone: ("catch-all", "catch-all"),
        cluster: ("karpenter-workload", "workload-high"),
    },
];

const GLOBAL_DEFAULT: &[Request] = &[Request {
    method: "GET",
    url: "/api/v1/pods",
    user: Some("alice"),
    groups: ALICE,
    alone: ("global-default", "global-default"),
    cluster: ("global-default", "global-default"),
}];

impl Request {
    fn method(&self) -> &'static str {
        match self.method {
            "WATCH_IS_GET" => "GET",
            m => m,
        }
    }

    fn identity(&self) -> Identity {
        match self.user {
            None => Identity::anonymous(),
            Some(user) => {
                let groups = self.groups.iter().map(ToString::to_string).collect();
                Identity::authenticated(user, "", groups)
            }
        }
    }

    fn classify_args<'a>(&'a self, dir: &'a str) -> Vec<&'a str> {
        let mut args = vec![
            "classify",
            "--config-dir",
            dir,
            "--method",
            self.method(),
            "--url",
            self.url,
        ];
        if let Some(user) = self.user {
            args.extend(["--user", user]);
            for g in self.groups {
                args.extend(["--group", g]);
            }
        }
        args
    }

    /// A plain trace line for `simulate`.
    fn trace_line(&self) -> String {
        let mut line = serde_json::json!({
            "at": 0, "durationMs": 5, "method": self.method(), "url": self.url,
        });
        if let Some(user) = self.user {
            line["user"] = user.into();
            line["groups"] = self.groups.into();
        }
        format!("{line}\n")
    }
}

/// The cluster the fixture was written for: Kubernetes' default objects with the fixture's
/// objects replacing those of the same kind and name.
fn cluster_config(dir: &Path) -> Config {
    let defaults = read_dir(&root().join("config")).expect("config/ reads");
    let fixture = read_dir(dir).expect("the fixture reads");
    load_with_overrides(&defaults, &fixture)
        .unwrap_or_else(|e| panic!("{}: {e:?}", dir.display()))
        .config
}

#[test]
fn the_corpus_spans_twenty_configurations_of_eight_projects() {
    let mut projects = std::collections::BTreeSet::new();
    for case in CASES {
        let dir = config_dir(case.dir);
        for entry in std::fs::read_dir(&dir).expect("fixture dir") {
            let text = std::fs::read_to_string(entry.expect("entry").path()).expect("text");
            let first = text.lines().next().unwrap_or_default();
            assert!(first.starts_with("# Shape "), "{}: {first}", case.dir);
            let project = text
                .split_whitespace()
                .find(|w| w.contains('/') && !w.contains('.') && !w.starts_with('`'))
                .expect("a project named");
            projects.insert(project.split('/').take(2).collect::<Vec<_>>().join("/"));
        }
    }
    assert!(CASES.len() >= 20, "{}", CASES.len());
    assert!(projects.len() >= 8, "{projects:?}");
}

#[test]
fn check_reads_every_configuration_as_the_apiserver_would() {
    for case in CASES {
        let dir = config_dir(case.dir);
        let dir = dir.to_str().expect("utf-8");
        let r = run(&["check", "--config-dir", dir], None);
        match case.summary {
            Some(summary) => {
                assert_eq!(r.code, Some(0), "{}: {}{}", case.dir, r.stdout, r.stderr);
                // The OK, then a warning per dangling FlowSchema beside it.
                let mut lines = r.stdout.lines();
                assert_eq!(
                    lines.next(),
                    Some(format!("OK: {dir}: {summary}").as_str()),
                    "{}",
                    case.dir
                );
                assert!(
                    lines.all(|l| l.starts_with("warning: ") && l.contains("FlowSchema/")),
                    "{}: {}",
                    case.dir,
                    r.stdout
                );
            }
            None => {
                assert_eq!(r.code, Some(1), "{}: {}", case.dir, r.stdout);
                assert!(r.stdout.starts_with(dir), "{}: {}", case.dir, r.stdout);
                assert!(r.stdout.contains("Unsupported value"), "{}", r.stdout);
            }
        }
        // A namespace (Helm's, Deckhouse's, the editor's) is cleared, never a problem.
        let said = format!("{}{}", r.stdout, r.stderr).replace(dir, "");
        assert!(!said.contains("namespace"), "{}: {said}", case.dir);
    }
}

#[test]
fn lint_finds_what_each_configuration_has() {
    for case in CASES {
        let dir = config_dir(case.dir);
        let dir = dir.to_str().expect("utf-8");
        let r = run(&["lint", "--config-dir", dir, "--output", "json"], None);
        let report: serde_json::Value = serde_json::from_str(&r.stdout).expect("json");
        let mut codes: Vec<&str> = report["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter_map(|f| f["code"].as_str())
            .collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes, case.lint, "{}: {}", case.dir, r.stdout);
        let want = match (case.summary, case.lint) {
            (None, _) => 1,
            (Some(_), []) => 0,
            (Some(_), _) => 3,
        };
        assert_eq!(r.code, Some(want), "{}: {}{}", case.dir, r.stdout, r.stderr);
    }
}

#[test]
fn classify_picks_the_schema_and_level_of_the_directory_and_of_the_cluster() {
    for case in CASES {
        let dir = config_dir(case.dir);
        let dir_str = dir.to_str().expect("utf-8");
        if case.summary.is_none() {
            let r = run(
                &[
                    "classify",
                    "--config-dir",
                    dir_str,
                    "--method",
                    "GET",
                    "--url",
                    "/",
                ],
                None,
            );
            assert_ne!(
                r.code,
                Some(0),
                "{}: an invalid directory classifies nothing",
                case.dir
            );
            continue;
        }
        let cluster = cluster_config(&dir);
        for request in case.requests {
            let r = run(&request.classify_args(dir_str), None);
            assert_eq!(r.code, Some(0), "{}: {}", case.dir, r.stderr);
            let v: serde_json::Value = serde_json::from_str(&r.stdout).expect("json");
            let got = (v["flowSchema"].as_str(), v["priorityLevel"].as_str());
            let want = (Some(request.alone.0), Some(request.alone.1));
            assert_eq!(
                got, want,
                "{} alone: {} {}",
                case.dir, request.method, request.url
            );

            let target = request.url;
            let info =
                kube_apf_proxy::request_info::parse(request.method(), target).expect("a request");
            let class = kube_apf_proxy::classify::classify(
                &kube_apf_proxy::classify::MatchIndex::of(&cluster),
                &request.identity(),
                &info,
            );
            let got = (
                class.flow_schema.name.as_str(),
                class.priority_level.name.as_str(),
            );
            assert_eq!(
                got, request.cluster,
                "{} in a cluster: {}",
                case.dir, request.url
            );
        }
    }
}

#[test]
fn simulate_replays_each_configurations_requests_where_classify_sends_them() {
    for case in CASES {
        let dir = config_dir(case.dir);
        let dir = dir.to_str().expect("utf-8");
        if case.summary.is_none() {
            let r = run(&["simulate", "--config-dir", dir, "--trace", "-"], Some(""));
            assert_eq!(r.code, Some(1), "{}: {}", case.dir, r.stderr);
            continue;
        }
        let trace: String = case.requests.iter().map(Request::trace_line).collect();
        let args = [
            "simulate",
            "--config-dir",
            dir,
            "--trace",
            "-",
            "--output",
            "json",
        ];
        let r = run(&args, Some(&trace));
        assert_eq!(r.code, Some(0), "{}: {}", case.dir, r.stderr);
        let report: serde_json::Value = serde_json::from_str(&r.stdout).expect("json");
        assert_eq!(report["requests"], case.requests.len(), "{}", case.dir);
        for request in case.requests {
            let (fs, level) = request.alone;
            let schema = report["flowSchemas"]
                .as_array()
                .and_then(|s| s.iter().find(|s| s["name"] == fs))
                .unwrap_or_else(|| panic!("{}: {fs} in {}", case.dir, r.stdout));
            assert_eq!(schema["priorityLevel"], level, "{}", case.dir);
            assert!(schema["arrivals"].as_u64() >= Some(1), "{}", case.dir);
        }
    }
}

#[test]
fn config_dump_of_each_configuration_loads_back_the_same() {
    for case in CASES {
        let Some(summary) = case.summary else {
            continue;
        };
        let dir = config_dir(case.dir);
        let dump = run(
            &[
                "config",
                "dump",
                "--config-dir",
                dir.to_str().expect("utf-8"),
            ],
            None,
        );
        assert_eq!(dump.code, Some(0), "{}: {}", case.dir, dump.stderr);
        let again = tempfile::tempdir().expect("tempdir");
        std::fs::write(again.path().join("dump.yaml"), &dump.stdout).expect("write");
        let again = again.path().to_str().expect("utf-8").to_string();
        let r = run(&["check", "--config-dir", &again], None);
        assert_eq!(
            r.stdout.lines().next(),
            Some(format!("OK: {again}: {summary}").as_str()),
            "{}",
            case.dir
        );
    }
}

#[test]
fn an_edited_suggested_level_is_put_back_only_when_marked_for_auto_update() {
    // (fixture, the level's shares in force, a warning about it)
    let cases = [
        ("kubectl-list-autoupdate", 20, true),
        ("kubectl-list-edited", 100, false),
    ];
    for (name, shares, warned) in cases {
        let dir = config_dir(name);
        let loaded = kube_apf_proxy::config::load_dir(&dir).expect("valid");
        let level = loaded
            .config
            .priority_level("global-default")
            .expect("level");
        let PriorityLevelSpec::Limited(limited) = &level.spec else {
            panic!("limited")
        };
        assert_eq!(limited.nominal_concurrency_shares, shares, "{name}");
        let warning = loaded
            .warnings
            .iter()
            .any(|w| w.object == "PriorityLevelConfiguration/global-default");
        assert_eq!(warning, warned, "{name}: {:?}", loaded.warnings);
        // The FlowSchema is as built in: nothing to say about it.
        assert!(
            !loaded
                .warnings
                .iter()
                .any(|w| w.object == "FlowSchema/global-default"),
            "{name}: {:?}",
            loaded.warnings
        );
    }
}

/// An audit-log shape: `(fixture, requests replayed, lines skipped, a note on standard error,
/// (FlowSchema, priority level, arrivals) under the embedded default configuration)`.
type AuditCase = (
    &'static str,
    u64,
    u64,
    Option<&'static str>,
    &'static [(&'static str, &'static str, u64)],
);

const AUDIT: &[AuditCase] = &[
    // kube-apiserver's --audit-log-path file, rotated mid-line: the fragment is skipped.
    (
        "kube-apiserver-rotated.log",
        3,
        1,
        Some("line 1: not a JSON object"),
        &[
            ("kube-system-service-accounts", "workload-high", 2),
            ("system-nodes", "system", 1),
        ],
    ),
    // falco's trace files: no apiVersion.
    (
        "falco-k8s-audit.json",
        1,
        0,
        None,
        &[("exempt", "exempt", 1)],
    ),
    // audit2rbac's demo log: audit.k8s.io/v1beta1 with only `timestamp`.
    (
        "audit2rbac-v1beta1.log",
        2,
        0,
        Some("2 audit events have only the old `timestamp`"),
        &[
            ("exempt", "exempt", 1),
            ("global-default", "global-default", 1),
        ],
    ),
    // The webhook backend's EventList, items without kind or apiVersion.
    (
        "webhook-eventlist.json",
        2,
        0,
        None,
        &[
            ("kube-system-service-accounts", "workload-high", 1),
            ("probes", "exempt", 1),
        ],
    ),
];

#[test]
fn simulate_reads_every_audit_log_shape() {
    for (name, requests, skipped, note, schemas) in AUDIT {
        let path = root().join("tests/fixtures/real-world/audit").join(name);
        let path = path.to_str().expect("utf-8");
        let text = std::fs::read_to_string(path).expect("fixture");
        let first = text.lines().next().unwrap_or_default();
        let r = run(&["simulate", "--trace", path, "--output", "json"], None);
        assert_eq!(r.code, Some(0), "{name}: {}", r.stderr);
        let report: serde_json::Value = serde_json::from_str(&r.stdout).expect("json");
        assert_eq!(report["requests"], *requests, "{name}: {}", r.stdout);
        assert_eq!(report["skipped"], *skipped, "{name}: {}", r.stderr);
        match note {
            Some(note) => assert!(r.stderr.contains(note), "{name}: {}", r.stderr),
            None => assert_eq!(r.stderr, "", "{name}"),
        }
        let got: Vec<(&str, &str, u64)> = report["flowSchemas"]
            .as_array()
            .expect("schemas")
            .iter()
            .map(|s| {
                let name = s["name"].as_str().unwrap_or_default();
                let level = s["priorityLevel"].as_str().unwrap_or_default();
                (name, level, s["arrivals"].as_u64().unwrap_or_default())
            })
            .collect();
        assert_eq!(got, *schemas, "{name} (first line {first:.40})");
    }
}
