//! Request parsing + classification, through the public API.
//!
//! Against Kubernetes' bootstrap configuration (loaded by `config::bootstrap()`), and against
//! generated configurations of 10, 100 and 1000 FlowSchemas where most do not match the request
//! — a third by user, a third by group, a third match the caller's group but not the request —
//! and the match comes just before `catch-all`. The `linear` variants run the apiserver's
//! first-match scan over `classify::matches` (plus the flow hash) for comparison with the index. The
//! `bootstrap-parsed` group times classification alone.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use kube_apf_proxy::auth::Identity;
use kube_apf_proxy::classify::{classify, flow_hash, matches, MatchIndex};
use kube_apf_proxy::config::{
    self, Config, DistinguisherMethod, FlowSchema, LimitResponse, LimitedPriorityLevel,
    NonResourcePolicyRule, PolicyRulesWithSubjects, PriorityLevel, PriorityLevelSpec, Queuing,
    ResourcePolicyRule, Subject,
};
use kube_apf_proxy::request_info::parse;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn resource_rule(api_group: &str, resource: &str) -> ResourcePolicyRule {
    ResourcePolicyRule {
        verbs: strings(&["get", "list", "watch"]),
        api_groups: strings(&[api_group]),
        resources: strings(&[resource]),
        cluster_scope: false,
        namespaces: strings(&["*"]),
    }
}

fn generated_flow_schema(i: usize) -> FlowSchema {
    let (subject, rule) = match i % 3 {
        0 => (
            Subject::User {
                name: format!("user-{i}"),
            },
            resource_rule("*", "*"),
        ),
        1 => (
            Subject::Group {
                name: format!("team-{i}"),
            },
            resource_rule("*", "*"),
        ),
        _ => (
            Subject::Group {
                name: "system:authenticated".into(),
            },
            resource_rule(&format!("example-{i}.io"), &format!("widgets-{i}")),
        ),
    };
    FlowSchema {
        name: format!("generated-{i:04}"),
        uid: String::new(),
        matching_precedence: 100 + i as i32,
        priority_level: "generated".into(),
        distinguisher_method: Some(DistinguisherMethod::ByUser),
        rules: vec![PolicyRulesWithSubjects {
            subjects: vec![subject],
            resource_rules: vec![rule],
            non_resource_rules: vec![NonResourcePolicyRule {
                verbs: strings(&["get"]),
                non_resource_urls: vec![format!("/generated-{i}")],
            }],
        }],
    }
}

/// `n` FlowSchemas: `n - 1` that do not match the benchmark request, then the one that does.
fn generated_config(n: usize) -> Config {
    let mut flow_schemas: Vec<FlowSchema> = (0..n - 1).map(generated_flow_schema).collect();
    flow_schemas.push(FlowSchema {
        name: "target".into(),
        matching_precedence: 9000,
        rules: vec![PolicyRulesWithSubjects {
            subjects: vec![Subject::Group { name: "dev".into() }],
            resource_rules: vec![resource_rule("", "pods")],
            non_resource_rules: vec![],
        }],
        ..generated_flow_schema(0)
    });
    let level = PriorityLevel {
        name: "generated".into(),
        uid: String::new(),
        spec: PriorityLevelSpec::Limited(LimitedPriorityLevel {
            nominal_concurrency_shares: 30,
            lendable_percent: 0,
            borrowing_limit_percent: None,
            limit_response: LimitResponse::Queue(Queuing {
                queues: 64,
                hand_size: 6,
                queue_length_limit: 50,
            }),
        }),
    };
    Config::resolve(flow_schemas, vec![level])
}

fn bootstrap(c: &mut Criterion) {
    let config = config::bootstrap();
    let kubelet = Identity::authenticated("system:node:worker-1", "", strings(&["system:nodes"]));
    let alice = Identity::authenticated("alice", "", strings(&["dev"]));
    let sa = Identity::authenticated(
        "system:serviceaccount:shop:checkout",
        "",
        strings(&["system:serviceaccounts", "system:serviceaccounts:shop"]),
    );
    let anonymous = Identity::anonymous();
    let cases = [
        (
            "kubelet-lease",
            &kubelet,
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/worker-1",
        ),
        (
            "user-list-pods",
            &alice,
            "GET",
            "/api/v1/namespaces/shop/pods?limit=500",
        ),
        (
            "sa-get-configmap",
            &sa,
            "GET",
            "/api/v1/namespaces/shop/configmaps/settings",
        ),
        ("anonymous-healthz", &anonymous, "GET", "/healthz"),
    ];
    let index = MatchIndex::of(&config);
    let mut group = c.benchmark_group("classify/bootstrap");
    for (name, identity, method, url) in cases {
        group.bench_function(name, |b| {
            b.iter(|| {
                let info =
                    parse(black_box(method), black_box(url)).expect("benchmark requests are valid");
                classify(&index, black_box(identity), &info)
            })
        });
    }
    group.finish();
    // Classification alone, the request already parsed.
    let mut group = c.benchmark_group("classify/bootstrap-parsed");
    for (name, identity, method, url) in cases {
        let info = parse(method, url).expect("benchmark requests are valid");
        group.bench_function(name, |b| {
            b.iter(|| classify(&index, black_box(identity), black_box(&info)))
        });
    }
    group.finish();
}

fn generated(c: &mut Criterion) {
    let alice = Identity::authenticated("alice", "", strings(&["dev"]));
    let (method, url) = ("GET", "/api/v1/namespaces/shop/pods/web-0");
    let mut group = c.benchmark_group("classify/generated");
    for n in [10, 100, 1000] {
        let config = generated_config(n);
        let info = parse(method, url).expect("benchmark requests are valid");
        let index = MatchIndex::of(&config);
        assert_eq!(classify(&index, &alice, &info).flow_schema.name, "target");
        group.bench_with_input(BenchmarkId::new("index", n), &index, |b, index| {
            b.iter(|| {
                let info =
                    parse(black_box(method), black_box(url)).expect("benchmark requests are valid");
                classify(index, black_box(&alice), &info)
            })
        });
        group.bench_with_input(BenchmarkId::new("linear", n), &config, |b, config| {
            b.iter(|| {
                let info =
                    parse(black_box(method), black_box(url)).expect("benchmark requests are valid");
                let identity = black_box(&alice);
                let fs = config
                    .flow_schemas()
                    .iter()
                    .find(|fs| matches(fs, identity, &info))
                    .unwrap_or(config.catch_all());
                // The rest of what `classify` does for this ByUser FlowSchema.
                let distinguisher = identity.user.clone();
                (
                    fs.clone(),
                    flow_hash(&fs.name, &distinguisher),
                    distinguisher,
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bootstrap, generated);
criterion_main!(benches);
