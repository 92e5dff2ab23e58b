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

use kube_apf_proxy::cli::ServeOptions;
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

fn strings(value: &Value) -> Vec<String> {
    value
        .as_sequence()
        .expect("a list")
        .iter()
        .map(|v| v.as_str().expect("a string").to_owned())
        .collect()
}

fn repo_yaml(path: &str) -> Value {
    serde_yaml::from_str(&std::fs::read_to_string(root().join(path)).expect(path)).expect(path)
}

/// One rendering of the chart: its objects, and the proxy container's `serve` flags parsed as
/// the binary parses them.
struct Render {
    shape: &'static str,
    namespace: &'static str,
    docs: Vec<Value>,
    args: Vec<String>,
    opts: ServeOptions,
}

// === impl Render ===

impl Render {
    fn new(shape: &'static str, namespace: &'static str, text: &str) -> Self {
        let docs = documents(text);
        let proxy = Self::component_in(&docs, "Deployment", "proxy");
        let args = strings(&proxy["spec"]["template"]["spec"]["containers"][0]["args"]);
        assert_eq!(args[0], "serve", "{shape}");
        let opts = ServeOptions::try_parse_from(&args[1..])
            .unwrap_or_else(|e| panic!("{shape}: the chart's flags {args:?} do not parse: {e}"));
        Render {
            shape,
            namespace,
            docs,
            args,
            opts,
        }
    }

    fn component_in<'a>(docs: &'a [Value], kind: &str, component: &str) -> &'a Value {
        docs.iter()
            .find(|d| {
                d["kind"] == kind
                    && d["metadata"]["labels"]["app.kubernetes.io/component"] == component
            })
            .unwrap_or_else(|| panic!("no {kind} of component {component}"))
    }

    /// The object of `kind` whose `app.kubernetes.io/component` label is `component`.
    fn component(&self, kind: &str, component: &str) -> &Value {
        Self::component_in(&self.docs, kind, component)
    }

    fn has(&self, kind: &str) -> bool {
        self.docs.iter().any(|d| d["kind"] == kind)
    }

    fn kinds(&self) -> Vec<&str> {
        self.docs
            .iter()
            .filter_map(|d| d["kind"].as_str())
            .collect()
    }

    /// The proxy's pod spec.
    fn pod(&self) -> &Value {
        &self.component("Deployment", "proxy")["spec"]["template"]["spec"]
    }

    fn rules(&self) -> Vec<&Value> {
        let role = self.component("ClusterRole", "proxy");
        role["rules"].as_sequence().expect("rules").iter().collect()
    }

    fn grants_verb(&self, verb: &str) -> bool {
        self.rules()
            .iter()
            .any(|r| strings(&r["verbs"]).iter().any(|v| v == verb))
    }

    fn grants_group(&self, group: &str) -> bool {
        self.rules().iter().any(|r| r["apiGroups"][0] == group)
    }

    fn grants_resource(&self, resource: &str) -> bool {
        self.rules().iter().any(|r| r["resources"][0] == resource)
    }

    fn has_flag(&self, flag: &str) -> bool {
        self.args.iter().any(|a| a == flag)
    }

    /// What every shape keeps: the app.kubernetes.io labels, a locked-down container with HTTPS
    /// probes and resources, the secure admin listener, the in-cluster upstream, the replicas
    /// spread and their Service and PodDisruptionBudget selecting them.
    fn assert_conventions(&self) {
        let shape = self.shape;
        for doc in &self.docs {
            for key in [
                "app.kubernetes.io/name",
                "app.kubernetes.io/instance",
                "app.kubernetes.io/version",
                "app.kubernetes.io/managed-by",
                "helm.sh/chart",
            ] {
                let labels = &doc["metadata"]["labels"];
                assert!(
                    labels[key].is_string(),
                    "{shape}: {:?} lacks {key}",
                    doc["kind"]
                );
            }
        }
        let container = &self.pod()["containers"][0];
        let security = &container["securityContext"];
        assert_eq!(security["runAsNonRoot"], true, "{shape}");
        assert_eq!(security["readOnlyRootFilesystem"], true, "{shape}");
        assert_eq!(security["allowPrivilegeEscalation"], false, "{shape}");
        for probe in ["livenessProbe", "readinessProbe"] {
            let get = &container[probe]["httpGet"];
            assert_eq!(get["scheme"], "HTTPS", "{shape}: {probe}");
            assert_eq!(get["port"], "metrics", "{shape}: {probe}");
        }
        assert!(container["resources"]["requests"].is_mapping(), "{shape}");
        assert!(
            self.opts.admin_secure(),
            "{shape}: the admin listener is secure"
        );
        assert!(
            self.opts.upstream.is_none(),
            "{shape}: the in-cluster apiserver"
        );
        let selector = &self.component("Deployment", "proxy")["spec"]["selector"]["matchLabels"];
        let spread = &self.pod()["topologySpreadConstraints"][0];
        assert_eq!(&spread["labelSelector"]["matchLabels"], selector, "{shape}");
        if self.has("PodDisruptionBudget") {
            let pdb = self.component("PodDisruptionBudget", "proxy");
            assert_eq!(&pdb["spec"]["selector"]["matchLabels"], selector, "{shape}");
        }
        let service = self.component("Service", "proxy");
        assert_eq!(&service["spec"]["selector"], selector, "{shape}");
    }
}

/// A documented shape of the values (values.yaml): its `--set` values and what it must render.
struct Shape {
    name: &'static str,
    sets: &'static [&'static str],
    check: fn(&Render),
}

const SHAPES: &[Shape] = &[
    Shape {
        name: "default",
        sets: &[],
        check: check_default,
    },
    Shape {
        name: "cluster-config",
        sets: &["flowControl.source=cluster"],
        check: check_cluster_config,
    },
    Shape {
        name: "passthrough",
        sets: &[
            "identityForwarding=passthrough",
            "authentication.tokenWebhook=false",
        ],
        check: check_passthrough,
    },
    Shape {
        name: "monitoring",
        sets: &[
            "serviceMonitor.enabled=true",
            "prometheusRule.enabled=true",
            "grafanaDashboard.enabled=true",
        ],
        check: check_monitoring,
    },
    Shape {
        name: "webhook-cert-manager",
        sets: &["webhook.enabled=true"],
        check: check_webhook,
    },
    Shape {
        name: "webhook-ca-bundle",
        sets: &[
            "webhook.enabled=true",
            "webhook.certManager.enabled=false",
            "webhook.caBundle=Q0EgUEVN",
        ],
        check: check_webhook,
    },
    Shape {
        name: "coordination-off",
        sets: &["coordination.enabled=false"],
        check: check_coordination_off,
    },
    Shape {
        name: "overrides",
        sets: &[
            "fullnameOverride=apf",
            "tls.secretName=apf-serving",
            "replicaCount=3",
            "extraArgs={--upstream-max-connections=64}",
            "flowControl.configMap.create=false",
            "flowControl.configMap.name=my-flowcontrol",
            "podDisruptionBudget.enabled=false",
            "coordination.leaseDuration=30s",
        ],
        check: check_overrides,
    },
];

/// Nothing optional; impersonation, TokenReviews and the chart's own ConfigMap (labelled for the
/// webhook), no flow-control objects read.
fn check_default(render: &Render) {
    for absent in [
        "ServiceMonitor",
        "PrometheusRule",
        "ValidatingWebhookConfiguration",
    ] {
        assert!(!render.has(absent), "off by default: {absent}");
    }
    assert!(render.grants_verb("impersonate"));
    assert!(!render.grants_group("flowcontrol.apiserver.k8s.io"));
    assert!(render.opts.authentication_token_webhook);
    assert!(render.has_flag("--config-dir=/etc/kube-apf-proxy/flowcontrol"));
    let configmap = render.component("ConfigMap", "proxy");
    assert_eq!(
        configmap["metadata"]["labels"]["kube-apf-proxy.io/flowcontrol-config"],
        "true"
    );
    check_coordination_on(render, Duration::from_secs(15));
}

/// Replica coordination (on by default): Leases in the release's namespace, the replica named by
/// POD_NAME from the downward API, and a Role on Leases in that namespace only, bound to the
/// proxy's ServiceAccount; nothing about Leases in the ClusterRole.
fn check_coordination_on(render: &Render, lease_duration: Duration) {
    let shape = render.shape;
    assert_eq!(
        render.opts.coordination_namespace.as_deref(),
        Some(render.namespace),
        "{shape}"
    );
    assert_eq!(
        render.opts.coordination_lease_duration,
        Some(lease_duration),
        "{shape}"
    );
    assert!(render.opts.replica_id.is_none(), "{shape}: from POD_NAME");
    let env = render.pod()["containers"][0]["env"]
        .as_sequence()
        .expect("env");
    let pod_name = env
        .iter()
        .find(|e| e["name"] == "POD_NAME")
        .unwrap_or_else(|| panic!("{shape}: POD_NAME in {env:?}"));
    assert_eq!(
        pod_name["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    let role = render.component("Role", "proxy");
    assert_eq!(role["metadata"]["namespace"], render.namespace, "{shape}");
    let rules = role["rules"].as_sequence().expect("rules");
    assert_eq!(rules.len(), 1, "{shape}: {rules:?}");
    assert_eq!(strings(&rules[0]["apiGroups"]), ["coordination.k8s.io"]);
    assert_eq!(strings(&rules[0]["resources"]), ["leases"]);
    assert_eq!(
        strings(&rules[0]["verbs"]),
        ["get", "list", "watch", "create", "update", "patch", "delete"]
    );
    let binding = render.component("RoleBinding", "proxy");
    assert_eq!(binding["metadata"]["namespace"], render.namespace);
    assert_eq!(binding["roleRef"]["kind"], "Role");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    let subject = &binding["subjects"][0];
    assert_eq!(subject["kind"], "ServiceAccount");
    assert_eq!(
        subject["name"],
        render.pod()["serviceAccountName"],
        "{shape}"
    );
    assert_eq!(subject["namespace"], render.namespace);
    assert!(!render.grants_group("coordination.k8s.io"), "{shape}");
}

/// `coordination.enabled=false`: no coordination flags, no POD_NAME, no Role.
fn check_coordination_off(render: &Render) {
    assert!(render.opts.coordination_namespace.is_none());
    assert!(render.opts.coordination_lease_duration.is_none());
    assert!(render.pod()["containers"][0]["env"].is_null());
    assert!(!render.has("Role") && !render.has("RoleBinding"));
    assert!(!render.grants_group("coordination.k8s.io"));
}

fn check_cluster_config(render: &Render) {
    assert!(render.has_flag("--config-source=cluster"));
    assert!(render.opts.config_dir.is_none());
    assert!(
        !render.has("ConfigMap"),
        "no ConfigMap: {:?}",
        render.kinds()
    );
    assert!(render.grants_group("flowcontrol.apiserver.k8s.io"));
}

fn check_passthrough(render: &Render) {
    assert!(
        !render.grants_verb("impersonate"),
        "passthrough impersonates nobody"
    );
    assert!(!render.opts.authentication_token_webhook);
    assert!(!render.grants_resource("tokenreviews"));
}

/// The PrometheusRule is deploy/prometheus/alerts.yaml, the dashboard ConfigMap
/// deploy/grafana/kube-apf-proxy.json, and the ServiceMonitor selects the metrics Service.
fn check_monitoring(render: &Render) {
    let rule = render.component("PrometheusRule", "metrics");
    assert_eq!(
        rule["spec"]["groups"],
        repo_yaml("deploy/prometheus/alerts.yaml")["groups"]
    );
    let dashboard = render.component("ConfigMap", "metrics");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let data = dashboard["data"]["kube-apf-proxy.json"]
        .as_str()
        .expect("data");
    let json: serde_json::Value = serde_json::from_str(data).expect("dashboard JSON");
    let file = std::fs::read_to_string(root().join("deploy/grafana/kube-apf-proxy.json"));
    let file: serde_json::Value = serde_json::from_str(&file.expect("dashboard")).expect("JSON");
    assert_eq!(json, file);
    let monitor = render.component("ServiceMonitor", "metrics");
    let service = render.component("Service", "metrics");
    let selector = monitor["spec"]["selector"]["matchLabels"].as_mapping();
    for (key, value) in selector.expect("selector") {
        assert_eq!(
            &service["metadata"]["labels"][key], value,
            "the metrics Service is selected"
        );
    }
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
}

/// The webhook's Service selects its pods and both webhooks call that Service; cert-manager's
/// objects only in the cert-manager shape.
fn check_webhook(render: &Render) {
    let hook = render.component("ValidatingWebhookConfiguration", "admission-webhook");
    let webhook = render.component("Deployment", "admission-webhook");
    let service = render.component("Service", "admission-webhook");
    assert_eq!(
        &service["spec"]["selector"],
        &webhook["spec"]["selector"]["matchLabels"]
    );
    for entry in hook["webhooks"].as_sequence().expect("webhooks") {
        let called = &entry["clientConfig"]["service"];
        assert_eq!(called["name"], service["metadata"]["name"]);
        assert_eq!(called["namespace"], render.namespace);
    }
    assert_eq!(
        render.has("Certificate"),
        render.shape == "webhook-cert-manager"
    );
}

fn check_overrides(render: &Render) {
    let deployment = render.component("Deployment", "proxy");
    assert_eq!(deployment["metadata"]["name"], "apf");
    assert_eq!(deployment["spec"]["replicas"], 3);
    let last = render.args.last().map(String::as_str);
    assert_eq!(last, Some("--upstream-max-connections=64"));
    assert_eq!(render.opts.upstream_max_connections, 64);
    assert!(render.opts.tls_cert_file.is_some());
    assert!(!render.has("ConfigMap") && !render.has("PodDisruptionBudget"));
    assert_eq!(
        render.pod()["volumes"][1]["configMap"]["name"],
        "my-flowcontrol"
    );
    check_coordination_on(render, Duration::from_secs(30));
}

/// `helm template` as release `release` in `namespace` with `sets`.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_lints_renders_every_shape_and_the_apiserver_accepts_it() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    helm_ok(&["lint", "--strict", CHART]).await;
    stand_in_crds(api).await;
    let ns = "rt-helm-template";
    namespace(api, ns).await;

    for shape in SHAPES {
        let rendered = template("rt", ns, shape.sets).await;
        let render = Render::new(shape.name, ns, &rendered);
        render.assert_conventions();
        (shape.check)(&render);
        let what = format!("helm template ({})", shape.name);
        server_dry_run(api, &what, &rendered).await;
    }
    assert_typos_are_refused_with_their_path().await;
}

/// A typo in the values is refused by values.schema.json, naming the field's path.
async fn assert_typos_are_refused_with_their_path() {
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

/// What the proxy's ServiceAccount may do: (can-i arguments, allowed with the default values
/// (impersonate, ConfigMap), allowed with `flowControl.source=cluster` and
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

/// A release installed by the test: its name, namespace and `--set` values; `impersonates`,
/// `mounts_configmap` and `coordinates` say what its values ask for.
struct Release {
    name: &'static str,
    namespace: &'static str,
    sets: &'static [&'static str],
    impersonates: bool,
    mounts_configmap: bool,
    coordinates: bool,
}

/// What a ServiceAccount needs on `leases.coordination.k8s.io` to coordinate.
const LEASE_VERBS: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];

const RELEASES: [Release; 2] = [
    Release {
        name: "rt-default",
        namespace: "rt-helm-default",
        sets: &[],
        impersonates: true,
        mounts_configmap: true,
        coordinates: true,
    },
    Release {
        name: "rt-cluster",
        namespace: "rt-helm-cluster",
        sets: &[
            "flowControl.source=cluster",
            "identityForwarding=passthrough",
            "coordination.enabled=false",
        ],
        impersonates: false,
        mounts_configmap: false,
        coordinates: false,
    },
];

// === impl Release ===

impl Release {
    fn fullname(&self) -> String {
        format!("{}-kube-apf-proxy", self.name)
    }

    fn account(&self) -> String {
        format!(
            "system:serviceaccount:{}:{}",
            self.namespace,
            self.fullname()
        )
    }

    /// `helm ARGS --namespace NS --kubeconfig ADMIN`.
    async fn helm(&self, api: &KubeApiserver, args: &[&str]) -> String {
        let kubeconfig = api.path("admin.kubeconfig");
        let mut all = args.to_vec();
        all.extend(["--namespace", self.namespace]);
        all.extend(["--kubeconfig", kubeconfig.to_str().expect("UTF-8 path")]);
        helm_ok(&all).await
    }

    async fn install(&self, api: &KubeApiserver) {
        let mut args = vec![
            "install",
            self.name,
            CHART,
            "--create-namespace",
            "--timeout=120s",
        ];
        for set in self.sets {
            args.extend(["--set", set]);
        }
        self.helm(api, &args).await;
        let status = self.helm(api, &["status", self.name]).await;
        assert!(status.contains("STATUS: deployed"), "{status}");
    }

    /// The release's objects exist (their pods never run here: no kubelet, no controller manager).
    async fn assert_objects(&self, api: &KubeApiserver) {
        let selector = format!("app.kubernetes.io/instance={}", self.name);
        let kinds = "deployments,services,serviceaccounts,configmaps,poddisruptionbudgets";
        let args = [
            "get",
            kinds,
            "-n",
            self.namespace,
            "-l",
            &selector,
            "-o",
            "name",
        ];
        let objects = api.admin_ok(&args, None).await;
        let fullname = self.fullname();
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
        let configmap = format!("configmap/{fullname}-flowcontrol");
        let has_configmap = objects.lines().any(|l| l == configmap);
        assert_eq!(has_configmap, self.mounts_configmap, "{objects}");
        api.admin_ok(&["get", "clusterrole", &fullname], None).await;
        let leases = format!("{fullname}-leases");
        for kind in ["role", "rolebinding"] {
            let args = ["get", kind, &leases, "-n", self.namespace];
            let out = api.admin_kubectl(&args, None).await;
            assert_eq!(out.status.success(), self.coordinates, "{kind} {leases}");
        }
    }

    /// The ServiceAccount may do what [`PERMISSIONS`] says for its mode, and impersonate UIDs
    /// and extras (the extra's key is the subresource) only in impersonate mode.
    async fn assert_permissions(&self, api: &KubeApiserver) {
        let account = self.account();
        for (permission, default, cluster) in PERMISSIONS {
            let want = if self.mounts_configmap {
                *default
            } else {
                *cluster
            };
            let got = can_i(api, &account, permission).await;
            assert_eq!(got, want, "{}: can {account} {permission:?}?", self.name);
        }
        for (resource, subresource) in [
            ("uids", ""),
            ("userextras", "scopes"),
            ("userextras", "authentication.kubernetes.io/credential-id"),
        ] {
            let got = may_impersonate(api, &account, self.namespace, resource, subresource).await;
            let what = format!("{resource}/{subresource}");
            assert_eq!(
                got, self.impersonates,
                "{}: may {account} impersonate {what}?",
                self.name
            );
        }
        // Leases: every verb coordination needs in its own namespace (only when on), none in
        // another namespace (the other release's, or kube-system).
        for verb in LEASE_VERBS {
            for (namespace, want) in [
                (self.namespace, self.coordinates),
                ("kube-system", false),
                ("default", false),
            ] {
                let args = [verb, "leases.coordination.k8s.io", "-n", namespace];
                let got = can_i(api, &account, &args).await;
                assert_eq!(got, want, "{}: can {account} {args:?}?", self.name);
            }
        }
    }

    /// `helm uninstall` removes the cluster-wide objects too.
    async fn uninstall(&self, api: &KubeApiserver) {
        self.helm(api, &["uninstall", self.name]).await;
        let out = api
            .admin_kubectl(&["get", "clusterrole", &self.fullname()], None)
            .await;
        assert!(
            !out.status.success(),
            "uninstall removes the ClusterRole of {}",
            self.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_grants_the_proxy_exactly_what_it_needs() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    for release in &RELEASES {
        release.install(api).await;
        release.assert_objects(api).await;
        release.assert_permissions(api).await;
    }
    for release in &RELEASES {
        release.uninstall(api).await;
    }
}
