//! The admission webhook's input: an `admission.k8s.io/v1` `AdmissionReview` body, judged against
//! the bootstrap configuration.
//!
//! Invariants: parsing and reviewing never panic; the answer echoes the request's uid; a denial
//! carries a 422 `Invalid` status; no warning is longer than `MAX_WARNING_CHARS` (256, where the
//! apiserver would cut it); the answer serialises.
#![no_main]

use std::sync::OnceLock;

use kube_apf_proxy::admission::{parse_review, ReviewResponse, Reviewer, MAX_WARNING_CHARS};
use kube_apf_proxy::config::load::SourceFile;
use kube_apf_proxy::config::parse::Format;
use libfuzzer_sys::fuzz_target;

fn reviewer() -> &'static Reviewer {
    static REVIEWER: OnceLock<Reviewer> = OnceLock::new();
    REVIEWER.get_or_init(|| {
        let base = vec![SourceFile {
            name: "bootstrap.yaml".to_string(),
            bytes: kube_apf_proxy::config::BOOTSTRAP_YAML.as_bytes().to_vec(),
            format: Format::Yaml,
        }];
        let label = ("kube-apf-proxy.io/flowcontrol-config".to_string(), "true".to_string());
        Reviewer::new(base, Default::default(), label).expect("the bootstrap configuration loads")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(request) = parse_review(data) else {
        return;
    };
    let answer = reviewer().review(&request);
    assert_eq!(answer.uid, request.uid);
    if !answer.allowed {
        let status = answer.status.as_ref().expect("a denial has a status");
        assert_eq!(status.code, Some(422));
    }
    for w in &answer.warnings {
        assert!(w.chars().count() <= MAX_WARNING_CHARS, "{w}");
    }
    serde_json::to_vec(&ReviewResponse::from(answer)).expect("the answer serialises");
});
