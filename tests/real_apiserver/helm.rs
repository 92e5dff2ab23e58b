//! The Helm chart (`deploy/helm/kube-apf-proxy/`) and the plain manifests of `deploy/` against the
//! real kube-apiserver: `helm lint`, `helm template` of the default values and of each documented
//! shape, `kubectl apply --dry-run=server` of every rendered object and of every manifest in
//! `deploy/` (the apiserver's own validation, admission and RBAC object checks), a values typo
//! refused by `values.schema.json` with its path, and a real `helm install` whose ServiceAccount may
//! do exactly what the proxy needs and nothing else (`kubectl auth can-i --as`, against the
//! apiserver's RBAC authorizer).
//!
//! Helm is built from Go modules by `scripts/helm.sh` (cached in `target/helm/`). The objects
//! are created, but no pod runs: this apiserver has no kubelet, scheduler or controller manager, so
//! a Deployment never gets a ReplicaSet. The CRDs of prometheus-operator (ServiceMonitor,
//! PrometheusRule) and cert-manager (Issuer, Certificate) are not installed here: stand-ins with
//! the same group, version and kind, and a schema that keeps every field, let the apiserver accept
//! those objects (their own schemas are not checked).

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use kube_apf_proxy::server::ServeOptions;
use serde_yaml::Value;

use crate::both;
use crate::support::kube_apiserver::KubeApiserver;

const CHART: &str = "deploy/helm/kube-apf-proxy";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `scripts/helm.sh ARGS` off the runtime's threads (the first call builds Helm: minutes).
async fn helm(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(ToString::to_string).collect();
    let run = tokio::task::spawn_blocking(move || {
        Command::new(root().join("scripts/helm.sh"))
            .args(&args)
            .current_dir(root())
            .env("KUBECONFIG", "/dev/null")
            .stdin(Stdio::null())
            .output()
            .expect("scripts/helm.sh runs")
    });
    tokio::time::timeout(Duration::from_secs(900), run)
        .await
        .expect("helm finishes within 15 minutes (the first call builds it)")
        .expect("join")
}

/// Like [`helm`], panicking unless it exits 0; its stdout.
async fn helm_ok(args: &[&str]) -> String {
    let out = helm(args).await;
    assert!(out.status.success(), "helm {args:?}: {}", both(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The documents of a multi-document YAML text (empty ones dropped).
fn documents(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).expect("YAML document"))
        .filter(|doc| !doc.is_null())
        .collect()
}

fn kinds(docs: &[Value]) -> Vec<String> {
    let mut kinds: Vec<String> = docs
        .iter()
        .map(|d| d["kind"].as_str().expect("kind").to_string())
        .collect();
    kinds.sort();
    kinds
}

fn find<'a>(docs: &'a [Value], kind: &str, name_suffix: &str) -> &'a Value {
    docs.iter()
        .find(|d| {
            d["kind"] == kind
                && d["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with(name_suffix))
        })
        .unwrap_or_else(|| panic!("no {kind} named *{name_suffix} in {:?}", kinds(docs)))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_sequence()
        .expect("a list")
        .iter()
        .map(|v| v.as_str().expect("a string").to_owned())
        .collect()
}

/// The documented shapes of the values (values.yaml): name, `--set` values.
const SHAPES: &[(&str, &[&str])] = &[
    ("default", &[]),
    ("cluster-config", &["flowControl.source=cluster"]),
    (
        "passthrough",
        &[
            "identityForwarding=passthrough",
            "authentication.tokenWebhook=false",
        ],
    ),
    (
        "monitoring",
        &[
            "serviceMonitor.enabled=true",
            "prometheusRule.enabled=true",
            "grafanaDashboard.enabled=true",
        ],
    ),
    ("webhook-cert-manager", &["webhook.enabled=true"]),
    (
        "webhook-ca-bundle",
        &[
            "webhook.enabled=true",
            "webhook.certManager.enabled=false",
            "webhook.caBundle=Q0EgUEVN",
        ],
    ),
    (
        "overrides",
        &[
            "fullnameOverride=apf",
            "tls.secretName=apf-serving",
            "replicaCount=3",
            "extraArgs={--upstream-max-connections=64}",
            "flowControl.configMap.create=false",
            "flowControl.configMap.name=my-flowcontrol",
            "podDisruptionBudget.enabled=false",
        ],
    ),
];

/// `helm template` of `shape` as release `release` in `namespace`.
async fn template(release: &str, namespace: &str, sets: &[&str]) -> String {
    let mut args = vec!["template", release, CHART, "--namespace", namespace];
    for set in sets {
        args.push("--set");
        args.push(set);
    }
    helm_ok(&args).await
}

/// Stand-ins for the CRDs of prometheus-operator and cert-manager (all four served as `v1`),
/// created once: any spec is kept.
async fn stand_in_crds(api: &KubeApiserver) {
    static CRDS: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    CRDS.get_or_init(|| async {
        let crds = [
            ("ServiceMonitor", "servicemonitors", "monitoring.coreos.com"),
            ("PrometheusRule", "prometheusrules", "monitoring.coreos.com"),
            ("Issuer", "issuers", "cert-manager.io"),
            ("Certificate", "certificates", "cert-manager.io"),
        ];
        let mut yaml = String::new();
        for (kind, plural, group) in crds {
            yaml.push_str(&format!(
                "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
                 metadata: {{name: {plural}.{group}}}\nspec:\n  group: {group}\n  scope: Namespaced\n  \
                 names: {{kind: {kind}, plural: {plural}, singular: {singular}, listKind: {kind}List}}\n  \
                 versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      \
                 openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}\n",
                singular = kind.to_lowercase(),
            ));
        }
        api.admin_ok(&["apply", "-f", "-"], Some(&yaml)).await;
        for (_, plural, group) in crds {
            api.admin_ok(
                &[
                    "wait",
                    "--for=condition=Established",
                    &format!("crd/{plural}.{group}"),
                    "--timeout=60s",
                ],
                None,
            )
            .await;
        }
    })
    .await;
}

/// Creates `namespace` unless it exists.
async fn namespace(api: &KubeApiserver, name: &str) {
    let yaml = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}}}\n");
    api.admin_ok(&["apply", "-f", "-"], Some(&yaml)).await;
}

/// `kubectl apply --dry-run=server` of `yaml` as the admin; panics with kubectl's words unless
/// the apiserver accepts every object.
async fn server_dry_run(api: &KubeApiserver, what: &str, yaml: &str) {
    let out = api
        .admin_kubectl(&["apply", "--dry-run=server", "-f", "-"], Some(yaml))
        .await;
    assert!(
        out.status.success(),
        "kubectl apply --dry-run=server of {what}: {}",
        both(&out)
    );
}

/// The proxy container's `serve` flags, parsed as the binary parses them.
fn serve_options(deployment: &Value) -> (Vec<String>, ServeOptions) {
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args = strings(&container["args"]);
    assert_eq!(args[0], "serve");
    let opts = ServeOptions::try_parse_from(&args[1..])
        .unwrap_or_else(|e| panic!("the chart's flags {args:?} do not parse: {e}"));
    (args, opts)
}

fn cluster_role_rules(docs: &[Value]) -> Vec<&Value> {
    find(docs, "ClusterRole", "")["rules"]
        .as_sequence()
        .expect("rules")
        .iter()
        .collect()
}

fn grants(docs: &[Value], verb: &str) -> bool {
    cluster_role_rules(docs)
        .iter()
        .any(|r| strings(&r["verbs"]).iter().any(|v| v == verb))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_lints_renders_every_shape_and_the_apiserver_accepts_it() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    helm_ok(&["lint", "--strict", CHART]).await;
    stand_in_crds(api).await;
    let ns = "rt-helm-template";
    namespace(api, ns).await;

    for (shape, sets) in SHAPES {
        let rendered = template("rt", ns, sets).await;
        let docs = documents(&rendered);
        let kinds = kinds(&docs);
        for doc in &docs {
            let labels = &doc["metadata"]["labels"];
            for key in [
                "app.kubernetes.io/name",
                "app.kubernetes.io/instance",
                "app.kubernetes.io/version",
                "app.kubernetes.io/managed-by",
                "helm.sh/chart",
            ] {
                assert!(
                    labels[key].is_string(),
                    "{shape}: {:?} lacks {key}",
                    doc["kind"]
                );
            }
        }
        let deployment = find(
            &docs,
            "Deployment",
            if *shape == "overrides" {
                "apf"
            } else {
                "rt-kube-apf-proxy"
            },
        );
        let (args, opts) = serve_options(deployment);
        let pod = &deployment["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        let security = &container["securityContext"];
        assert_eq!(security["runAsNonRoot"], true, "{shape}");
        assert_eq!(security["readOnlyRootFilesystem"], true, "{shape}");
        assert_eq!(security["allowPrivilegeEscalation"], false, "{shape}");
        for probe in ["livenessProbe", "readinessProbe"] {
            assert_eq!(
                container[probe]["httpGet"]["scheme"], "HTTPS",
                "{shape}: {probe}"
            );
            assert_eq!(
                container[probe]["httpGet"]["port"], "metrics",
                "{shape}: {probe}"
            );
        }
        assert!(container["resources"]["requests"].is_mapping(), "{shape}");
        assert!(
            opts.admin_secure(),
            "{shape}: the admin listener is secure off loopback"
        );
        assert!(opts.upstream.is_none(), "{shape}: the in-cluster apiserver");
        let selector = &deployment["spec"]["selector"]["matchLabels"];
        let spread = &pod["topologySpreadConstraints"][0];
        assert_eq!(&spread["labelSelector"]["matchLabels"], selector, "{shape}");
        if let Some(pdb) = docs.iter().find(|d| {
            d["kind"] == "PodDisruptionBudget"
                && !d["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .ends_with("-webhook")
        }) {
            assert_eq!(&pdb["spec"]["selector"]["matchLabels"], selector, "{shape}");
        }
        let service = find(
            &docs,
            "Service",
            if *shape == "overrides" {
                "apf"
            } else {
                "rt-kube-apf-proxy"
            },
        );
        assert_eq!(&service["spec"]["selector"], selector, "{shape}");

        match *shape {
            "default" => {
                for absent in [
                    "ServiceMonitor",
                    "PrometheusRule",
                    "ValidatingWebhookConfiguration",
                ] {
                    assert!(
                        !kinds.iter().any(|k| k == absent),
                        "off by default: {absent}"
                    );
                }
                assert!(grants(&docs, "impersonate"), "impersonate mode");
                assert!(!cluster_role_rules(&docs)
                    .iter()
                    .any(|r| r["apiGroups"][0] == "flowcontrol.apiserver.k8s.io"));
                assert!(opts.authentication_token_webhook);
                assert!(args
                    .iter()
                    .any(|a| a == "--config-dir=/etc/kube-apf-proxy/flowcontrol"));
                let configmap = find(&docs, "ConfigMap", "-flowcontrol");
                assert_eq!(
                    configmap["metadata"]["labels"]["kube-apf-proxy.io/flowcontrol-config"],
                    "true"
                );
            }
            "cluster-config" => {
                assert!(args.iter().any(|a| a == "--config-source=cluster"));
                assert!(opts.config_dir.is_none());
                assert!(
                    !kinds.iter().any(|k| k == "ConfigMap"),
                    "no ConfigMap: {kinds:?}"
                );
                assert!(cluster_role_rules(&docs)
                    .iter()
                    .any(|r| r["apiGroups"][0] == "flowcontrol.apiserver.k8s.io"));
            }
            "passthrough" => {
                assert!(
                    !grants(&docs, "impersonate"),
                    "passthrough impersonates nobody"
                );
                assert!(!opts.authentication_token_webhook);
                assert!(!cluster_role_rules(&docs)
                    .iter()
                    .any(|r| r["resources"][0] == "tokenreviews"));
            }
            "monitoring" => {
                let rule = find(&docs, "PrometheusRule", "rt-kube-apf-proxy");
                let alerts: Value = serde_yaml::from_str(
                    &std::fs::read_to_string(root().join("deploy/prometheus/alerts.yaml"))
                        .expect("alerts"),
                )
                .expect("alerts YAML");
                assert_eq!(rule["spec"]["groups"], alerts["groups"]);
                let dashboard = find(&docs, "ConfigMap", "-dashboard");
                assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
                let json: serde_json::Value = serde_json::from_str(
                    dashboard["data"]["kube-apf-proxy.json"]
                        .as_str()
                        .expect("dashboard data"),
                )
                .expect("dashboard JSON");
                let file: serde_json::Value = serde_json::from_str(
                    &std::fs::read_to_string(root().join("deploy/grafana/kube-apf-proxy.json"))
                        .expect("dashboard"),
                )
                .expect("JSON");
                assert_eq!(json, file);
                let monitor = find(&docs, "ServiceMonitor", "rt-kube-apf-proxy");
                let metrics = find(&docs, "Service", "-metrics");
                for (key, value) in monitor["spec"]["selector"]["matchLabels"]
                    .as_mapping()
                    .expect("selector")
                {
                    assert_eq!(
                        &metrics["metadata"]["labels"][key], value,
                        "the ServiceMonitor selects the metrics Service"
                    );
                }
                assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
            }
            "webhook-cert-manager" | "webhook-ca-bundle" => {
                let hook = find(&docs, "ValidatingWebhookConfiguration", "rt-kube-apf-proxy");
                let webhook = find(&docs, "Deployment", "-webhook");
                let service = find(&docs, "Service", "-webhook");
                assert_eq!(
                    &service["spec"]["selector"],
                    &webhook["spec"]["selector"]["matchLabels"]
                );
                for entry in hook["webhooks"].as_sequence().expect("webhooks") {
                    assert_eq!(
                        entry["clientConfig"]["service"]["name"],
                        service["metadata"]["name"]
                    );
                    assert_eq!(entry["clientConfig"]["service"]["namespace"], ns);
                }
                let cert_manager = kinds.iter().any(|k| k == "Certificate");
                assert_eq!(cert_manager, *shape == "webhook-cert-manager");
            }
            "overrides" => {
                assert_eq!(deployment["spec"]["replicas"], 3);
                assert_eq!(
                    args.last().map(String::as_str),
                    Some("--upstream-max-connections=64")
                );
                assert_eq!(opts.upstream_max_connections, 64);
                assert!(opts.tls_cert_file.is_some());
                assert!(
                    !kinds
                        .iter()
                        .any(|k| k == "ConfigMap" || k == "PodDisruptionBudget"),
                    "{kinds:?}"
                );
                assert_eq!(pod["volumes"][1]["configMap"]["name"], "my-flowcontrol");
            }
            other => panic!("untested shape {other}"),
        }
        server_dry_run(api, &format!("helm template ({shape})"), &rendered).await;
    }

    // A typo in the values is refused with its path.
    for (set, path, field) in [
        ("serviceMonitr.enabled=true", "at ''", "'serviceMonitr'"),
        (
            "flowControl.requestTimout=5s",
            "at '/flowControl'",
            "'requestTimout'",
        ),
    ] {
        let out = helm(&["template", "rt", CHART, "--set", set]).await;
        let text = both(&out);
        assert!(!out.status.success(), "{set} is refused");
        assert!(
            text.contains(path) && text.contains(field) && text.contains("not allowed"),
            "{set}: {text}"
        );
    }
    let out = helm(&[
        "template",
        "rt",
        CHART,
        "--set",
        "flowControl.requestTimeout=soon",
    ])
    .await;
    assert!(
        both(&out).contains("at '/flowControl/requestTimeout'"),
        "{}",
        both(&out)
    );
}

/// Every manifest of `deploy/` outside the chart (the kubeconfig and Prometheus files are not
/// Kubernetes objects) passes `kubectl apply --dry-run=server`. The static pods are Pods the
/// kubelet runs from its manifest directory; the apiserver validates them all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_manifest_in_deploy_passes_a_server_side_dry_run() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    // The webhook test registers deploy/webhook/'s ValidatingWebhookConfiguration (failurePolicy
    // Fail for the flow-control ConfigMap in kube-system) while it holds this lock.
    let _serial = crate::FLOWCONTROL.lock().await;
    stand_in_crds(api).await;
    // A Pod needs its ServiceAccount to exist (admission); the controller manager that creates
    // each namespace's `default` is not running here.
    api.admin_ok(
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: default, namespace: kube-system}\n"),
    )
    .await;
    let mut files = Vec::new();
    let mut dirs = vec![root().join("deploy")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read deploy/") {
            let path = entry.expect("entry").path();
            let relative = path
                .strip_prefix(root())
                .expect("in the repository")
                .to_path_buf();
            if path.is_dir() {
                // The chart's templates are not manifests; its rendering is checked above.
                if !relative.starts_with(CHART) {
                    dirs.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "yaml")
                && !relative.starts_with("deploy/prometheus")
            {
                files.push(relative);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 11, "{files:?}");
    for file in &files {
        let text = std::fs::read_to_string(root().join(file)).expect("read manifest");
        server_dry_run(api, &file.display().to_string(), &text).await;
    }
}

/// `kubectl auth can-i VERB RESOURCE --as system:serviceaccount:NS:NAME`: the apiserver's RBAC
/// authorizer's answer.
async fn can_i(api: &KubeApiserver, account: &str, args: &[&str]) -> bool {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let who = format!("--as={account}");
    all.push(&who);
    let out = api.admin_kubectl(&all, None).await;
    let answer = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        answer == "yes" || answer == "no",
        "kubectl auth can-i {args:?}: {}",
        both(&out)
    );
    answer == "yes"
}

/// What the proxy's ServiceAccount may do in each mode: (can-i arguments, allowed in the default
/// values (impersonate, ConfigMap), allowed with `flowControl.source=cluster` and
/// `identityForwarding=passthrough`).
const PERMISSIONS: &[(&[&str], bool, bool)] = &[
    (
        &["create", "tokenreviews.authentication.k8s.io"],
        true,
        true,
    ),
    (
        &["create", "subjectaccessreviews.authorization.k8s.io"],
        true,
        true,
    ),
    (&["get", "/metrics"], true, true),
    (&["impersonate", "users"], true, false),
    (&["impersonate", "groups"], true, false),
    (&["impersonate", "serviceaccounts", "-A"], true, false),
    (
        &["list", "flowschemas.flowcontrol.apiserver.k8s.io"],
        false,
        true,
    ),
    (
        &["watch", "flowschemas.flowcontrol.apiserver.k8s.io"],
        false,
        true,
    ),
    (
        &[
            "list",
            "prioritylevelconfigurations.flowcontrol.apiserver.k8s.io",
        ],
        false,
        true,
    ),
    (
        &[
            "watch",
            "prioritylevelconfigurations.flowcontrol.apiserver.k8s.io",
        ],
        false,
        true,
    ),
    // Never: writing the flow-control objects, reading secrets or anything else.
    (
        &["create", "flowschemas.flowcontrol.apiserver.k8s.io"],
        false,
        false,
    ),
    (
        &[
            "update",
            "prioritylevelconfigurations.flowcontrol.apiserver.k8s.io",
        ],
        false,
        false,
    ),
    (&["list", "secrets", "-A"], false, false),
    (&["get", "secrets", "-n", "kube-system"], false, false),
    (&["list", "configmaps", "-A"], false, false),
    (&["create", "pods", "-A"], false, false),
    (
        &["create", "leases.coordination.k8s.io", "-A"],
        false,
        false,
    ),
    (
        &["get", "/debug/api_priority_and_fairness/dump_requests"],
        false,
        false,
    ),
    (
        &["create", "clusterrolebindings.rbac.authorization.k8s.io"],
        false,
        false,
    ),
];

/// The apiserver's RBAC answer for `account` (a ServiceAccount, with its groups) to impersonate
/// `resource` (and `subresource`) of `authentication.k8s.io`, by a SubjectAccessReview: `kubectl
/// auth can-i` cannot ask it, as it sends a resource missing from discovery (uids, userextras)
/// with the group `*`.
async fn may_impersonate(
    api: &KubeApiserver,
    account: &str,
    namespace: &str,
    resource: &str,
    subresource: &str,
) -> bool {
    let review = serde_json::json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": account,
            "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{namespace}"), "system:authenticated"],
            "resourceAttributes": {
                "verb": "impersonate",
                "group": "authentication.k8s.io",
                "resource": resource,
                "subresource": subresource,
            },
        },
    });
    let allowed = api
        .admin_ok(
            &["create", "-f", "-", "-o", "jsonpath={.status.allowed}"],
            Some(&review.to_string()),
        )
        .await;
    allowed.trim() == "true"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_grants_the_proxy_exactly_what_it_needs() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    let kubeconfig = api.path("admin.kubeconfig");
    let kubeconfig = kubeconfig.to_str().expect("UTF-8 path");
    let releases: [(&str, &str, &[&str]); 2] = [
        ("rt-default", "rt-helm-default", &[]),
        (
            "rt-cluster",
            "rt-helm-cluster",
            &[
                "--set",
                "flowControl.source=cluster",
                "--set",
                "identityForwarding=passthrough",
            ],
        ),
    ];
    for (index, (release, ns, sets)) in releases.iter().enumerate() {
        let mut args = vec![
            "install",
            release,
            CHART,
            "--namespace",
            ns,
            "--create-namespace",
            "--kubeconfig",
            kubeconfig,
            "--timeout=120s",
        ];
        args.extend_from_slice(sets);
        helm_ok(&args).await;
        let status = helm_ok(&[
            "status",
            release,
            "--namespace",
            ns,
            "--kubeconfig",
            kubeconfig,
        ])
        .await;
        assert!(status.contains("STATUS: deployed"), "{status}");

        // The objects exist (their pods never run here: no kubelet, no controller manager).
        let selector = format!("app.kubernetes.io/instance={release}");
        let objects = api
            .admin_ok(
                &[
                    "get",
                    "deployments,services,serviceaccounts,configmaps,poddisruptionbudgets",
                    "-n",
                    ns,
                    "-l",
                    &selector,
                    "-o",
                    "name",
                ],
                None,
            )
            .await;
        let fullname = format!("{release}-kube-apf-proxy");
        for object in [
            format!("deployment.apps/{fullname}"),
            format!("service/{fullname}"),
            format!("service/{fullname}-metrics"),
            format!("serviceaccount/{fullname}"),
            format!("poddisruptionbudget.policy/{fullname}"),
        ] {
            assert!(
                objects.lines().any(|l| l == object),
                "{object} in {objects}"
            );
        }
        assert_eq!(
            objects
                .lines()
                .any(|l| l == format!("configmap/{fullname}-flowcontrol")),
            index == 0,
            "the ConfigMap only with flowControl.source=configMap: {objects}"
        );
        api.admin_ok(&["get", "clusterrole", &fullname], None).await;

        let account = format!("system:serviceaccount:{ns}:{fullname}");
        for (permission, default, cluster) in PERMISSIONS {
            let want = if index == 0 { *default } else { *cluster };
            assert_eq!(
                can_i(api, &account, permission).await,
                want,
                "{release}: can {account} {permission:?}?"
            );
        }
        // The caller's UID and an extra (its key is the subresource) go as Impersonate-Uid and
        // Impersonate-Extra-KEY, in impersonate mode only.
        for (resource, subresource) in [
            ("uids", ""),
            ("userextras", "scopes"),
            ("userextras", "authentication.kubernetes.io/credential-id"),
        ] {
            assert_eq!(
                may_impersonate(api, &account, ns, resource, subresource).await,
                index == 0,
                "{release}: may {account} impersonate {resource}/{subresource}?"
            );
        }
    }

    for (release, ns, _) in releases {
        helm_ok(&[
            "uninstall",
            release,
            "--namespace",
            ns,
            "--kubeconfig",
            kubeconfig,
        ])
        .await;
        let fullname = format!("{release}-kube-apf-proxy");
        let out = api
            .admin_kubectl(&["get", "clusterrole", &fullname], None)
            .await;
        assert!(
            !out.status.success(),
            "uninstall removes the ClusterRole {fullname}"
        );
    }
}
