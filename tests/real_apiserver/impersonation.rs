//! `kubectl --as` through the proxy against the real apiserver's RBAC: the proxy authorizes the
//! impersonation with SubjectAccessReviews for the caller, classifies the request as the
//! impersonated user (the same FlowSchema and priority level, by UID, as the apiserver), and
//! forwards it so that the upstream runs it as that user.

use std::time::Duration;

use crate::support::kube_apiserver::{kubectl, KubeApiserver, ADMIN_TOKEN, BOB_TOKEN};
use crate::{proxy_identity, Cred, Front};

/// The proxy in `mode` with the deploy RBAC's identity as its upstream credentials.
async fn front(api: &'static KubeApiserver, dir: &std::path::Path, flags: &[&str]) -> Front {
    let token_file = proxy_identity(api, dir).await;
    let mut all = vec![format!("--upstream-token-file={}", token_file.display())];
    all.extend(flags.iter().map(ToString::to_string));
    Front::start(api, &all).await
}

fn user_info(whoami: &str) -> serde_json::Value {
    serde_json::from_str(whoami).expect("userInfo")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_as_works_through_the_proxy_in_impersonate_mode() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let front = front(api, dir.path(), &["--identity-forwarding=impersonate"]).await;
    let admin = Cred::Token(ADMIN_TOKEN);
    let whoami = ["auth", "whoami", "-o", "jsonpath={.status.userInfo}"];

    let mut args = vec!["--as", "alice"];
    args.extend(whoami);
    let info = user_info(&front.ok(&admin, &args, None).await);
    assert_eq!(info["username"], "alice", "{info}");
    assert_eq!(
        info["groups"],
        serde_json::json!(["system:authenticated"]),
        "{info}"
    );

    let mut args = vec!["--as", "alice", "--as-group", "dev"];
    args.extend(whoami);
    let info = user_info(&front.ok(&admin, &args, None).await);
    assert_eq!(info["username"], "alice", "{info}");
    assert_eq!(
        info["groups"],
        serde_json::json!(["dev", "system:authenticated"]),
        "{info}"
    );

    let mut args = vec!["--as", "system:serviceaccount:default:default"];
    args.extend(whoami);
    let info = user_info(&front.ok(&admin, &args, None).await);
    assert_eq!(
        info["groups"],
        serde_json::json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ]),
        "{info}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_as_works_through_the_proxy_in_requestheader_and_passthrough_modes() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    // requestheader: the front-proxy certificate asserts identities; the SubjectAccessReviews
    // need a credential the apiserver authenticates as the proxy (the deploy RBAC's token).
    let cert = format!(
        "--upstream-client-cert-file={}",
        api.path("front-proxy-client.crt").display()
    );
    let key = format!(
        "--upstream-client-key-file={}",
        api.path("front-proxy-client.key").display()
    );
    let modes: [(&str, Vec<&str>); 2] = [
        (
            "requestheader",
            vec!["--identity-forwarding=requestheader", &cert, &key],
        ),
        (
            "passthrough",
            vec![
                "--identity-forwarding=passthrough",
                "--authentication-token-webhook",
            ],
        ),
    ];
    for (mode, flags) in modes {
        let front = front(api, dir.path(), &flags).await;
        let info = user_info(
            &front
                .ok(
                    &Cred::Token(ADMIN_TOKEN),
                    &[
                        "--as",
                        "alice",
                        "--as-group",
                        "dev",
                        "auth",
                        "whoami",
                        "-o",
                        "jsonpath={.status.userInfo}",
                    ],
                    None,
                )
                .await,
        );
        assert_eq!(info["username"], "alice", "{mode}: {info}");
        assert_eq!(
            info["groups"],
            serde_json::json!(["dev", "system:authenticated"]),
            "{mode}: {info}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_without_impersonate_is_refused_as_rbac_refuses_it() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let bob = Cred::Token(BOB_TOKEN);
    let args = [
        "--as",
        "alice",
        "get",
        "--raw",
        "/api/v1/namespaces/default/configmaps",
    ];
    let want = "users \"alice\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope";
    for mode in ["impersonate", "passthrough"] {
        let front = front(api, dir.path(), &[&format!("--identity-forwarding={mode}")]).await;
        let out = front.kubectl(&bob, &args, None).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{mode}");
        assert!(stderr.contains(want), "{mode}: {stderr}");
    }
    // The apiserver itself refuses the same request too (its wording may name the constrained
    // impersonation mode it tried first).
    let direct = kubectl(
        vec![
            format!("--server={}", api.server),
            format!("--certificate-authority={}", api.path("ca.crt").display()),
            format!("--token={BOB_TOKEN}"),
        ]
        .into_iter()
        .chain(args.iter().map(ToString::to_string))
        .collect(),
        None,
    )
    .await;
    let stderr = String::from_utf8_lossy(&direct.stderr);
    println!("the apiserver's own answer: {stderr}");
    assert!(!direct.status.success());
    assert!(
        stderr.contains("forbidden") && stderr.contains("cannot impersonate"),
        "{stderr}"
    );
}

/// The PF UID headers of the admin's list impersonating bob: every value (the proxy's first,
/// then the apiserver's).
async fn as_bob(front: &Front, name: &str) -> Vec<String> {
    let mut get = crate::support::app::request(
        "GET",
        "/api/v1/namespaces/default/configmaps",
        Some(ADMIN_TOKEN),
        bytes::Bytes::new(),
    );
    get.headers_mut()
        .insert("impersonate-user", "bob".parse().expect("value"));
    let response = front.app.client().send(get).await;
    let headers = response.headers().clone();
    // Bob may not list ConfigMaps: the apiserver's own 403 shows it ran as bob.
    let body = crate::support::read_body(response)
        .await
        .unwrap_or_default();
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains(r#"User \"bob\" cannot list"#), "{body}");
    headers
        .get_all(name)
        .iter()
        .map(|v| v.to_str().expect("ascii").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impersonated_request_is_classified_as_the_apiserver_classifies_it() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let exempt = api
        .admin_ok(
            &[
                "get",
                "flowschema",
                "exempt",
                "-o",
                "jsonpath={.metadata.uid}",
            ],
            None,
        )
        .await;
    for mode in ["impersonate", "passthrough"] {
        let front = front(
            api,
            dir.path(),
            &[
                "--config-source=cluster",
                &format!("--identity-forwarding={mode}"),
            ],
        )
        .await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !front
            .app
            .app
            .ready()
            .config_source
            .as_ref()
            .is_some_and(|flag| flag.is_ready())
        {
            assert!(tokio::time::Instant::now() < deadline, "{mode}: config");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        for name in [
            "x-kubernetes-pf-flowschema-uid",
            "x-kubernetes-pf-prioritylevel-uid",
        ] {
            let seen = as_bob(&front, name).await;
            assert_eq!(
                seen.len(),
                2,
                "{mode} {name}: the proxy's and the apiserver's"
            );
            assert_eq!(seen[0], seen[1], "{mode} {name}: the same object");
        }
        let schema = as_bob(&front, "x-kubernetes-pf-flowschema-uid").await;
        assert_ne!(
            schema[0], exempt,
            "{mode}: the admin impersonating bob is bob, not the exempt admin"
        );
    }
}
