//! Golden classifications of realistic requests against Kubernetes' bootstrap configuration.

use super::*;

#[test]
fn bootstrap_config_classifies_realistic_requests() {
    let anonymous = Identity::anonymous();
    let kubelet = user("system:node:worker-1", &["system:nodes"]);
    let kcm = user("system:kube-controller-manager", &[]);
    let scheduler = user("system:kube-scheduler", &[]);
    let kube_system_sa = user(
        "system:serviceaccount:kube-system:generic-garbage-collector",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
        ],
    );
    let app_sa = user(
        "system:serviceaccount:shop:checkout",
        &["system:serviceaccounts", "system:serviceaccounts:shop"],
    );
    let admin = user("kubernetes-admin", &["system:masters"]);
    let alice = user("alice", &["dev"]);
    let lease = |verb| resource(verb, "coordination.k8s.io", "kube-system", "leases", "");
    #[rustfmt::skip]
    let cases: Vec<(&str, &Identity, RequestInfo, &str, &str, &str)> = vec![
        ("kubelet node status", &kubelet, resource("patch", "", "", "nodes", "status"), "system-node-high", "node-high", "system:node:worker-1"),
        ("kubelet node get", &kubelet, resource("get", "", "", "nodes", ""), "system-node-high", "node-high", "system:node:worker-1"),
        ("kubelet lease", &kubelet, resource("update", "coordination.k8s.io", "kube-node-lease", "leases", ""), "system-node-high", "node-high", "system:node:worker-1"),
        ("kubelet pod watch", &kubelet, resource("watch", "", "", "pods", ""), "system-nodes", "system", "system:node:worker-1"),
        ("kubelet pod status", &kubelet, resource("patch", "", "shop", "pods", "status"), "system-nodes", "system", "system:node:worker-1"),
        ("kubelet healthz", &kubelet, non_resource("get", "/healthz"), "probes", "exempt", ""),
        ("kcm lease", &kcm, lease("update"), "system-leader-election", "leader-election", "system:kube-controller-manager"),
        ("kcm lease watch", &kcm, lease("watch"), "kube-controller-manager", "workload-high", "kube-system"),
        ("kcm list pods", &kcm, resource("list", "", "", "pods", ""), "kube-controller-manager", "workload-high", ""),
        ("kcm replicasets", &kcm, resource("create", "apps", "shop", "replicasets", ""), "kube-controller-manager", "workload-high", "shop"),
        ("scheduler lease", &scheduler, lease("get"), "system-leader-election", "leader-election", "system:kube-scheduler"),
        ("scheduler binding", &scheduler, resource("create", "", "shop", "pods", "binding"), "kube-scheduler", "workload-high", "shop"),
        ("kube-system SA lease", &kube_system_sa, lease("create"), "system-leader-election", "leader-election", "system:serviceaccount:kube-system:generic-garbage-collector"),
        ("kube-system SA lease delete", &kube_system_sa, lease("delete"), "kube-system-service-accounts", "workload-high", "kube-system"),
        ("kube-system SA cluster list", &kube_system_sa, resource("list", "", "", "namespaces", ""), "kube-system-service-accounts", "workload-high", ""),
        ("other SA", &app_sa, resource("get", "", "shop", "configmaps", ""), "service-accounts", "workload-low", "system:serviceaccount:shop:checkout"),
        ("other SA lease", &app_sa, resource("update", "coordination.k8s.io", "shop", "leases", ""), "service-accounts", "workload-low", "system:serviceaccount:shop:checkout"),
        ("anonymous healthz", &anonymous, non_resource("get", "/healthz"), "probes", "exempt", ""),
        ("anonymous readyz subpath", &anonymous, non_resource("get", "/readyz/etcd"), "probes", "exempt", ""),
        ("anonymous livez", &anonymous, non_resource("get", "/livez"), "probes", "exempt", ""),
        ("anonymous healthz post", &anonymous, non_resource("post", "/healthz"), "global-default", "global-default", "system:anonymous"),
        ("anonymous healthzx", &anonymous, non_resource("get", "/healthzx"), "global-default", "global-default", "system:anonymous"),
        ("anonymous version", &anonymous, non_resource("get", "/version"), "global-default", "global-default", "system:anonymous"),
        ("admin pods", &admin, resource("delete", "", "shop", "pods", ""), "exempt", "exempt", ""),
        ("admin metrics", &admin, non_resource("get", "/metrics"), "exempt", "exempt", ""),
        ("admin healthz", &admin, non_resource("get", "/healthz"), "exempt", "exempt", ""),
        ("user pods", &alice, resource("list", "", "shop", "pods", ""), "global-default", "global-default", "alice"),
        ("user crd", &alice, resource("get", "apiextensions.k8s.io", "", "customresourcedefinitions", ""), "global-default", "global-default", "alice"),
        ("user healthz", &alice, non_resource("get", "/healthz"), "probes", "exempt", ""),
    ];
    let config = bootstrap_config();
    for (name, identity, info, fs, pl, distinguisher) in cases {
        let got = classify(&MatchIndex::of(&config), identity, &info);
        assert_eq!(
            (
                got.flow_schema.name.as_str(),
                got.priority_level.name.as_str()
            ),
            (fs, pl),
            "{name}"
        );
        assert_eq!(&*got.flow_distinguisher, distinguisher, "{name}");
        assert_eq!(got.is_exempt(), pl == "exempt", "{name}");
        let linear = config
            .flow_schemas()
            .iter()
            .find(|f| matches(f, identity, &info))
            .map_or("catch-all", |f| f.name.as_str());
        assert_eq!(linear, fs, "{name}: linear scan");
    }
}

#[test]
fn bootstrap_config_resolves_in_the_apiservers_order() {
    let names: Vec<_> = bootstrap_config()
        .flow_schemas()
        .iter()
        .map(|fs| fs.name.clone())
        .collect();
    assert_eq!(
        names,
        [
            "exempt",
            "probes",
            "system-leader-election",
            "system-node-high",
            "system-nodes",
            "kube-controller-manager",
            "kube-scheduler",
            "kube-system-service-accounts",
            "service-accounts",
            "global-default",
            "catch-all",
        ]
    );
}
