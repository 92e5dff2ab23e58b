//! Request-attribute parsing (`request_info::parse`) on realistic requests.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use kube_apf_proxy::request_info::parse;

/// `(name, method, target)`.
const REQUESTS: &[(&str, &str, &str)] = &[
    (
        "pod_get",
        "GET",
        "/api/v1/namespaces/default/pods/nginx-7c5ddbdf54-x2k9p",
    ),
    (
        "namespaced_list_with_selectors",
        "GET",
        "/api/v1/namespaces/kube-system/pods?labelSelector=app%3Dnginx%2Ctier+in+%28web%2Capi%29\
         &fieldSelector=status.phase%3DRunning%2Cmetadata.name%3Dweb-0&limit=500",
    ),
    (
        "watch",
        "GET",
        "/api/v1/namespaces/default/configmaps?allowWatchBookmarks=true&resourceVersion=123456\
         &timeoutSeconds=342&watch=true",
    ),
    ("non_resource_healthz", "GET", "/healthz"),
    (
        "long_crd_path",
        "PATCH",
        "/apis/monitoring.coreos.com/v1/namespaces/monitoring/prometheusrules/\
         kube-prometheus-stack-kubernetes-system-controller-manager/status",
    ),
];

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("request_info_parse");
    for &(name, method, target) in REQUESTS {
        group.bench_function(name, |b| {
            b.iter(|| parse(black_box(method), black_box(target)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
