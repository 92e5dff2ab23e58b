//! Admission reviews per second: one typical FlowSchema CREATE (a ServiceAccount's list/watch of
//! a few resources, ByUser, its own precedence) judged against Kubernetes' bootstrap
//! configuration, as `POST /validate` does it without the HTTP and TLS layers: parse the
//! AdmissionReview, load the object alone and with the reference configuration, lint, answer.
//! `review-only` skips the JSON parse and serialisation; `lint-bootstrap` times the lint of the
//! whole bootstrap configuration, which every review runs once.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kube_apf_proxy::admission::{
    parse_review, review_bytes, AdmissionMetrics, Reviewer, WebhookState,
};
use kube_apf_proxy::config::load::SourceFile;
use kube_apf_proxy::config::parse::Format;
use kube_apf_proxy::lint::{lint, LintOptions};

const REVIEW: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
 "uid":"705ab4f5-6393-11e8-b7cc-42010a800002",
 "kind":{"group":"flowcontrol.apiserver.k8s.io","version":"v1","kind":"FlowSchema"},
 "resource":{"group":"flowcontrol.apiserver.k8s.io","version":"v1","resource":"flowschemas"},
 "requestKind":{"group":"flowcontrol.apiserver.k8s.io","version":"v1","kind":"FlowSchema"},
 "requestResource":{"group":"flowcontrol.apiserver.k8s.io","version":"v1","resource":"flowschemas"},
 "name":"argo-controller","operation":"CREATE",
 "userInfo":{"username":"kubernetes-admin","groups":["system:masters","system:authenticated"]},
 "object":{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"FlowSchema",
  "metadata":{"name":"argo-controller"},
  "spec":{"matchingPrecedence":700,"priorityLevelConfiguration":{"name":"workload-low"},
   "distinguisherMethod":{"type":"ByUser"},
   "rules":[{"subjects":[{"kind":"ServiceAccount","serviceAccount":{"namespace":"argo","name":"argo-controller"}}],
    "resourceRules":[{"verbs":["get","list","watch"],"apiGroups":["argoproj.io"],"resources":["workflows","workflowtemplates"],"namespaces":["*"]},
     {"verbs":["get","list","watch"],"apiGroups":[""],"resources":["pods","configmaps"],"namespaces":["*"]}]}]}},
 "oldObject":null,"dryRun":false,
 "options":{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions"}}}"#;

fn reviewer() -> Reviewer {
    let base = vec![SourceFile {
        name: "bootstrap.yaml".to_string(),
        bytes: kube_apf_proxy::config::BOOTSTRAP_YAML.as_bytes().to_vec(),
        format: Format::Yaml,
    }];
    let label = (
        "kube-apf-proxy.io/flowcontrol-config".to_string(),
        "true".to_string(),
    );
    Reviewer::new(base, LintOptions::default(), label).expect("bootstrap loads")
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("admission");
    group.throughput(Throughput::Elements(1));
    let state = WebhookState::new(reviewer(), AdmissionMetrics::new());
    group.bench_function("review-bytes", |b| {
        b.iter(|| review_bytes(&state, black_box(REVIEW.as_bytes())))
    });
    let reviewer = reviewer();
    let request = parse_review(REVIEW.as_bytes()).expect("valid");
    assert!(reviewer.review(&request).warnings.is_empty());
    group.bench_function("review-only", |b| {
        b.iter(|| reviewer.review(black_box(&request)))
    });
    let loaded = kube_apf_proxy::config::load_bootstrap().expect("loads");
    let options = LintOptions::default();
    group.bench_function("lint-bootstrap", |b| {
        b.iter(|| lint(black_box(&loaded), &options))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
