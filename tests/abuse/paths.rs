//! Path tricks aimed at a more privileged FlowSchema. The apiserver does not clean paths before
//! classifying (its RequestInfoFactory splits the decoded `URL.Path`; `.`/`..` are ordinary
//! segments, `%2F` splits), and the proxy forwards the request target byte for byte, so the
//! FlowSchema chosen is the one the apiserver would choose for the path it will serve.

use bytes::Bytes;
use http::Version;

use crate::support::app::{request, AppBuilder, STATIC_TOKEN};
use crate::support::fake_apiserver::FakeApiserver;
use crate::{flow_schema, LEVELS};

const LEADER: &str = "leader-election-fs-uid";
const TENANTS: &str = "tenants-fs-uid";

/// (path as sent, FlowSchema the apiserver's request info gives it).
const TRICKS: [(&str, &str); 15] = [
    // The real target and its privileged non-resource sibling.
    ("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x", LEADER),
    ("/healthz", LEADER),
    // Dot segments are segments: namespace `default`, resource `..`.
    ("/apis/coordination.k8s.io/v1/namespaces/default/../kube-system/leases/x", TENANTS),
    ("/apis/coordination.k8s.io/v1/namespaces/kube-system/%2E%2E/leases/x", TENANTS),
    ("/apis/coordination.k8s.io/v1/namespaces/kube-system/./leases/x", TENANTS),
    ("/api/v1/namespaces/kube-system/%2E%2E/../apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x", TENANTS),
    // Empty segments are segments too: `//apis//...` is not `/apis/...`.
    ("//apis//coordination.k8s.io//v1//namespaces//kube-system//leases//x", TENANTS),
    ("/apis/coordination.k8s.io/v1//namespaces/kube-system/leases/x", TENANTS),
    // Non-resource tricks. An entry `/healthz` also covers `/healthz/...` (rule.go:
    // matchPolicyRuleNonResourceURL), so these land where the apiserver puts them; the apiserver
    // then serves them from its non-go-restful mux, which has no such path (404), not as pods.
    ("/healthz/../api/v1/pods", LEADER),
    ("/healthz/", LEADER),
    ("/healthz%2F..%2Fapi", LEADER),
    ("/./healthz", TENANTS),
    ("//healthz", TENANTS),
    // `%2F` splits after decoding, as in the apiserver: this *is* a kube-system lease to it.
    ("/apis/coordination.k8s.io/v1/namespaces/kube-system%2Fleases%2Fx", LEADER),
    // ... and an encoded namespace separator inside a name cannot change the namespace.
    ("/apis/coordination.k8s.io/v1/namespaces/default/leases/..%2F..%2Fkube-system%2Fleases%2Fx", TENANTS),
];

#[tokio::test]
async fn path_tricks_land_where_the_apiserver_would_put_them_and_are_forwarded_verbatim() {
    let fake = FakeApiserver::start_plain().await;
    let app = AppBuilder::new(&fake.url)
        .token_file()
        .config(LEVELS)
        .start()
        .await;
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let client = app.client_with(None, version);
        for (path, want) in TRICKS {
            let get = request("GET", path, Some(STATIC_TOKEN), Bytes::new());
            let response = client.send(get).await;
            assert_eq!(flow_schema(&response), want, "{version:?} {path}");
            // What the upstream serves is exactly what was classified.
            let seen = fake.last_request();
            assert_eq!(seen.path, path, "{version:?}: forwarded path");
        }
    }
}
