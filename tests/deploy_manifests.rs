//! The deployment files stay in step with the binary: the proxy flags in the static pod and the
//! Dockerfile's CMD parse as `serve` flags, and the ports and addresses the manifests wire together
//! agree. (`scripts/check-deploy.sh` checks the manifests with kubectl, promtool and hadolint.)

use std::path::Path;

use kube_apf_proxy::cli::ServeOptions;
use serde_yaml::Value;

fn repo_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

fn static_pod() -> Value {
    serde_yaml::from_str(&repo_file("deploy/static-pod/kube-apiserver.yaml")).expect("YAML")
}

fn container<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["spec"]["containers"]
        .as_sequence()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_sequence()
        .expect("a list")
        .iter()
        .map(|v| v.as_str().expect("a string").to_owned())
        .collect()
}

/// The value of `--name=value` in `args`.
fn flag<'a>(args: &'a [String], name: &str) -> &'a str {
    let prefix = format!("--{name}=");
    args.iter()
        .find_map(|a| a.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} in {args:?}"))
}

#[test]
fn static_pod_proxy_flags_parse_as_serve_flags() {
    let pod = static_pod();
    let args = strings(&container(&pod, "kube-apf-proxy")["args"]);
    assert_eq!(args[0], "serve");
    let opts = ServeOptions::try_parse_from(&args[1..]).expect("valid serve flags");
    assert!(opts.authentication_token_webhook);
    assert_eq!(opts.secure_port, 6443);
    assert_eq!(opts.server_concurrency_limit(), 600);
}

#[test]
fn proxy_takes_the_advertised_address_and_apiserver_the_loopback() {
    let pod = static_pod();
    let apiserver = strings(&container(&pod, "kube-apiserver")["command"]);
    let proxy = strings(&container(&pod, "kube-apf-proxy")["args"]);
    assert_eq!(flag(&apiserver, "bind-address"), "127.0.0.1");
    assert_eq!(
        flag(&proxy, "bind-address"),
        flag(&apiserver, "advertise-address")
    );
    assert_eq!(flag(&proxy, "secure-port"), flag(&apiserver, "secure-port"));
    let upstream = format!("https://127.0.0.1:{}", flag(&apiserver, "secure-port"));
    assert_eq!(flag(&proxy, "upstream"), upstream);
    // The front-proxy certificate the proxy forwards with is the one the apiserver trusts.
    assert_eq!(
        flag(&proxy, "upstream-client-cert-file"),
        flag(&apiserver, "proxy-client-cert-file")
    );
    assert_eq!(
        flag(&apiserver, "requestheader-allowed-names"),
        "front-proxy-client"
    );
}

#[test]
fn admin_port_matches_probes_service_and_scrape_config() {
    let pod = static_pod();
    let proxy = container(&pod, "kube-apf-proxy");
    let args = strings(&proxy["args"]);
    let admin: std::net::SocketAddr = flag(&args, "admin-address").parse().expect("address");
    let port = u64::from(admin.port());
    assert_eq!(proxy["ports"][0]["containerPort"].as_u64(), Some(port));
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(
            proxy[probe]["httpGet"]["port"].as_u64(),
            Some(port),
            "{probe}"
        );
    }
    let service: Value =
        serde_yaml::from_str(&repo_file("deploy/metrics-service.yaml")).expect("YAML");
    assert_eq!(
        service["spec"]["ports"][0]["targetPort"].as_u64(),
        Some(port)
    );
    assert_eq!(
        service["spec"]["selector"]["component"],
        pod["metadata"]["labels"]["component"]
    );
    let scrape = repo_file("deploy/prometheus/prometheus.yml");
    assert!(
        scrape.contains(&admin.to_string()),
        "prometheus.yml scrapes {admin}"
    );
}

#[test]
fn the_admin_listener_is_secure_and_probed_and_scraped_over_https() {
    let pod = static_pod();
    let proxy = container(&pod, "kube-apf-proxy");
    let args = strings(&proxy["args"]);
    let opts = ServeOptions::try_parse_from(&args[1..]).expect("valid serve flags");
    assert!(
        opts.admin_secure(),
        "the static pod's admin listener is secure"
    );
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(proxy[probe]["httpGet"]["scheme"], "HTTPS", "{probe}");
    }
    let scrape: Value =
        serde_yaml::from_str(&repo_file("deploy/prometheus/prometheus.yml")).expect("YAML");
    let job = &scrape["scrape_configs"][0];
    assert_eq!(job["scheme"], "https");
    assert!(job["authorization"]["credentials_file"].is_string());
    let monitor: Value =
        serde_yaml::from_str(&repo_file("deploy/servicemonitor.yaml")).expect("YAML");
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["scheme"], "https");
    assert!(endpoint["bearerTokenFile"].is_string());
    // The proxy may create the reviews the admin listener sends.
    let rbac = repo_file("deploy/rbac.yaml");
    assert!(
        rbac.contains("subjectaccessreviews"),
        "rbac.yaml grants SubjectAccessReviews"
    );
}

#[test]
fn dockerfile_cmd_parses_as_serve_flags() {
    let dockerfile = repo_file("Dockerfile");
    let cmd = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("CMD "))
        .expect("a CMD line");
    let cmd: Vec<String> = serde_json::from_str(cmd).expect("exec-form CMD");
    assert_eq!(cmd[0], "serve");
    let opts = ServeOptions::try_parse_from(&cmd[1..]).expect("valid serve flags");
    assert_eq!(
        opts.config_dir.as_deref(),
        Some(Path::new("/etc/kube-apf-proxy/config"))
    );
    assert!(dockerfile.contains("COPY config/ /etc/kube-apf-proxy/config/"));
}

#[test]
fn the_cluster_config_variant_reads_the_cluster_and_is_otherwise_the_sidecar() {
    use kube_apf_proxy::cli::ConfigSource;
    let variant: Value = serde_yaml::from_str(&repo_file(
        "deploy/static-pod-cluster-config/kube-apiserver.yaml",
    ))
    .expect("YAML");
    let args = strings(&container(&variant, "kube-apf-proxy")["args"]);
    assert_eq!(args[0], "serve");
    let opts = ServeOptions::try_parse_from(&args[1..]).expect("valid serve flags");
    assert_eq!(opts.config_source, ConfigSource::Cluster);
    assert_eq!(opts.config_dir, None);
    // Everything else is the sidecar's.
    let sidecar = static_pod();
    let sidecar_args = strings(&container(&sidecar, "kube-apf-proxy")["args"]);
    let differ: Vec<_> = args
        .iter()
        .filter(|a| !sidecar_args.contains(a))
        .chain(sidecar_args.iter().filter(|a| !args.contains(a)))
        .collect();
    assert_eq!(
        differ,
        [
            "--config-source=cluster",
            "--config-dir=/etc/kubernetes/apf-proxy/flowcontrol"
        ]
    );
    assert_eq!(variant["spec"]["volumes"], sidecar["spec"]["volumes"]);
    let rbac = repo_file("deploy/rbac.yaml");
    assert!(rbac.contains("prioritylevelconfigurations") && rbac.contains("\"watch\""));
}

/// The documents of a multi-document YAML file, by kind.
fn documents(path: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(&repo_file(path))
        .map(|doc| Value::deserialize(doc).expect("YAML document"))
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("a {kind}"))
}

#[test]
fn the_in_cluster_deployment_is_highly_available_secure_and_reachable() {
    use kube_apf_proxy::proxy::IdentityForwarding;
    let docs = documents("deploy/in-cluster/deployment.yaml");
    let deployment = of_kind(&docs, "Deployment");
    let spec = &deployment["spec"];
    assert!(spec["replicas"].as_u64() >= Some(2));
    let pod = &spec["template"];
    let proxy = &pod["spec"]["containers"][0];
    let args = strings(&proxy["args"]);
    assert_eq!(args[0], "serve");
    let opts = ServeOptions::try_parse_from(&args[1..]).expect("valid serve flags");
    assert_eq!(opts.identity_forwarding, IdentityForwarding::Impersonate);
    assert!(
        opts.admin_secure(),
        "the admin listener is secure off loopback"
    );
    assert!(
        opts.upstream.is_none(),
        "the in-cluster apiserver, from the environment"
    );
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(proxy[probe]["httpGet"]["scheme"], "HTTPS", "{probe}");
        assert_eq!(proxy[probe]["httpGet"]["port"], "metrics", "{probe}");
    }
    let ports = proxy["ports"].as_sequence().expect("ports");
    let port = |name: &str| {
        ports
            .iter()
            .find(|p| p["name"] == name)
            .and_then(|p| p["containerPort"].as_u64())
    };
    assert_eq!(port("https"), Some(u64::from(opts.secure_port)));
    assert_eq!(port("metrics"), Some(u64::from(opts.admin_address.port())));
    // The replicas share one budget through Leases, named after their pods, with a Role for
    // Leases in their own namespace only.
    let namespace = deployment["metadata"]["namespace"].as_str();
    assert_eq!(opts.coordination_namespace.as_deref(), namespace);
    let env = proxy["env"].as_sequence().expect("env");
    assert!(env
        .iter()
        .any(|e| e["name"] == "POD_NAME"
            && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"));
    let role = of_kind(&docs, "Role");
    assert_eq!(role["metadata"]["namespace"].as_str(), namespace);
    assert_eq!(role["rules"][0]["resources"][0], "leases");
    let binding = of_kind(&docs, "RoleBinding");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(
        binding["subjects"][0]["name"],
        pod["spec"]["serviceAccountName"]
    );
    let labels = &pod["metadata"]["labels"];
    let anti = &pod["spec"]["affinity"]["podAntiAffinity"];
    assert!(!anti.is_null(), "replicas are spread");
    let pdb = of_kind(&docs, "PodDisruptionBudget");
    assert_eq!(&pdb["spec"]["selector"]["matchLabels"], labels);
    let service = of_kind(&docs, "Service");
    assert_eq!(&service["spec"]["selector"], labels);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "https");
    assert_eq!(
        of_kind(&docs, "ClusterRoleBinding")["subjects"][0]["name"],
        pod["spec"]["serviceAccountName"]
    );
    // The client kubeconfig points at the Service.
    let kubeconfig = kube_apf_proxy::upstream::Kubeconfig::parse(&repo_file(
        "deploy/in-cluster/client.kubeconfig",
    ))
    .expect("kubeconfig")
    .current(std::path::Path::new("/etc/kube"))
    .expect("current context");
    let name = service["metadata"]["name"].as_str().expect("name");
    let namespace = service["metadata"]["namespace"]
        .as_str()
        .expect("namespace");
    assert_eq!(
        kubeconfig.server,
        format!("https://{name}.{namespace}.svc:443")
    );
}

/// `promtool test rules deploy/prometheus/alerts_test.yaml`: every alert fires in one case and
/// stays quiet in another. Skipped with a line where promtool is missing (Debian's prometheus
/// package ships it; scripts/install-test-deps.sh), except under `CI=true`.
#[test]
fn the_alerts_fire_and_stay_quiet_as_their_unit_tests_say() {
    use std::process::Command;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus");
    let run = Command::new("promtool")
        .args(["test", "rules", "alerts_test.yaml"])
        .current_dir(&dir)
        .output();
    let Ok(out) = run else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true: promtool is required"
        );
        eprintln!("SKIPPED: promtool is not installed (scripts/install-test-deps.sh)");
        return;
    };
    assert!(
        out.status.success(),
        "promtool test rules:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Every alert has a firing and a quiet case, a summary, a description and a runbook section.
    let alerts: Value =
        serde_yaml::from_str(&repo_file("deploy/prometheus/alerts.yaml")).expect("alerts");
    let tests: Value =
        serde_yaml::from_str(&repo_file("deploy/prometheus/alerts_test.yaml")).expect("tests");
    let runbook = repo_file("docs/runbook.md");
    let cases: Vec<&Value> = tests["tests"]
        .as_sequence()
        .expect("tests")
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_sequence().expect("alert_rule_test"))
        .collect();
    for rule in alerts["groups"][0]["rules"].as_sequence().expect("rules") {
        let name = rule["alert"].as_str().expect("alert name");
        let of_alert = || cases.iter().filter(|c| c["alertname"] == name);
        let firing =
            of_alert().any(|c| c["exp_alerts"].as_sequence().is_some_and(|a| !a.is_empty()));
        let quiet = of_alert().any(|c| c["exp_alerts"].as_sequence().is_some_and(Vec::is_empty));
        assert!(
            firing && quiet,
            "{name}: a firing case {firing}, a quiet case {quiet}"
        );
        for key in ["summary", "description", "runbook_url"] {
            assert!(rule["annotations"][key].is_string(), "{name}: {key}");
        }
        let anchor = format!("docs/runbook.md#{}", name.to_lowercase());
        assert_eq!(
            rule["annotations"]["runbook_url"],
            anchor.as_str(),
            "{name}"
        );
        assert!(
            runbook.contains(&format!("\n## {name}\n")),
            "docs/runbook.md: ## {name}"
        );
    }
}

/// The Helm chart cannot read files outside its directory, so it carries copies of the alerts,
/// the dashboard and the flow-control configuration: they stay the same as the originals.
#[test]
fn the_chart_carries_the_same_alerts_dashboard_and_configuration() {
    let chart = "deploy/helm/kube-apf-proxy/files";
    assert_eq!(
        repo_file(&format!("{chart}/alerts.yaml")),
        repo_file("deploy/prometheus/alerts.yaml"),
        "cp deploy/prometheus/alerts.yaml {chart}/"
    );
    assert_eq!(
        repo_file(&format!("{chart}/kube-apf-proxy.json")),
        repo_file("deploy/grafana/kube-apf-proxy.json"),
        "cp deploy/grafana/kube-apf-proxy.json {chart}/"
    );
    let configmap: Value =
        serde_yaml::from_str(&repo_file("deploy/flowcontrol-configmap.yaml")).expect("ConfigMap");
    assert_eq!(
        repo_file(&format!("{chart}/bootstrap-config.yaml")),
        configmap["data"]["bootstrap-config.yaml"]
            .as_str()
            .expect("data"),
        "{chart}/bootstrap-config.yaml is deploy/flowcontrol-configmap.yaml's data"
    );
    let dashboard: serde_json::Value =
        serde_json::from_str(&repo_file("deploy/grafana/kube-apf-proxy.json")).expect("JSON");
    assert_eq!(dashboard["uid"], "kube-apf-proxy");
}
