//! Suite item 1: kubectl through the proxy in each identity-forwarding mode, against the real
//! apiserver's authentication and RBAC: get, create, `apply --server-side`, patch, delete,
//! `get -w`, `auth whoami` (the caller, never the proxy), `api-resources` and `explain`.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::support::kube_apiserver::{KubeApiserver, ALICE_TOKEN};
use crate::{both, Cred, Front};

/// A namespace where group `dev` may do anything to ConfigMaps and PodTemplates, and nothing else.
pub async fn dev_namespace(api: &KubeApiserver, ns: &str) {
    let yaml = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\n\
apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: configmap-editor, namespace: {ns}}}\n\
rules:\n- apiGroups: [\"\"]\n  resources: [configmaps, podtemplates]\n  verbs: [\"*\"]\n---\n\
apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: dev-configmap-editor, namespace: {ns}}}\n\
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: configmap-editor}}\n\
subjects:\n- {{apiGroup: rbac.authorization.k8s.io, kind: Group, name: dev}}\n"
    );
    api.admin_ok(&["apply", "-f", "-"], Some(&yaml)).await;
}

/// `kubectl ... get -w` running in the background, its stdout lines on a channel.
struct Watch {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Watch {
    fn start(front: &Front, cred: &Cred, args: &[&str]) -> Watch {
        let mut command = Command::new("kubectl");
        command
            .env("KUBECONFIG", "/dev/null")
            .arg(format!("--server={}", front.app.url()))
            .arg(format!("--certificate-authority={}", front.ca.display()))
            .arg(format!(
                "--cache-dir={}",
                front.app.path("kube-cache").display()
            ));
        match cred {
            Cred::Token(token) => {
                command.arg(format!("--token={token}"));
            }
            Cred::Cert(cert, key) => {
                command
                    .arg(format!("--client-certificate={}", cert.display()))
                    .arg(format!("--client-key={}", key.display()));
            }
        }
        let mut child = command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl get -w runs");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Watch { child, lines }
    }

    /// Waits (at most 30 s) for a line equal to `want`.
    async fn expect_line(&self, want: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let mut seen = Vec::new();
        while tokio::time::Instant::now() < deadline {
            while let Ok(line) = self.lines.try_recv() {
                if line.trim() == want {
                    return;
                }
                seen.push(line);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("kubectl get -w never printed {want:?}; it printed {seen:?}");
    }
}

/// The whole kubectl round through `front` as `cred`, who must be `user` in `groups` (and in
/// group `dev`) upstream.
async fn round(front: &Front, cred: &Cred, ns: &str, user: &str, groups: &[&str]) {
    dev_namespace(front.api, ns).await;

    let whoami = front
        .ok(cred, &["auth", "whoami", "-o", "json"], None)
        .await;
    let review: serde_json::Value = serde_json::from_str(&whoami).expect("whoami json");
    let info = &review["status"]["userInfo"];
    assert_eq!(
        info["username"], user,
        "the apiserver sees the caller: {review}"
    );
    let seen: Vec<&str> = info["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g.as_str())
        .collect();
    for group in groups {
        assert!(seen.contains(group), "group {group} upstream: {review}");
    }

    let watch = Watch::start(
        front,
        cred,
        &["-n", ns, "get", "configmaps", "-w", "-o", "name"],
    );

    front
        .ok(
            cred,
            &[
                "-n",
                ns,
                "create",
                "configmap",
                "created",
                "--from-literal=a=1",
            ],
            None,
        )
        .await;
    watch.expect_line("configmap/created").await;

    let got = front
        .ok(
            cred,
            &["-n", ns, "get", "configmap", "created", "-o", "json"],
            None,
        )
        .await;
    let object: serde_json::Value = serde_json::from_str(&got).expect("configmap json");
    assert_eq!(object["data"]["a"], "1");

    let applied = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: applied, namespace: {ns}}}\ndata: {{k: v}}\n"
    );
    let out = front
        .ok(
            cred,
            &[
                "apply",
                "--server-side",
                "--field-manager=real-e2e",
                "-f",
                "-",
            ],
            Some(&applied),
        )
        .await;
    assert!(out.contains("serverside-applied"), "{out}");
    watch.expect_line("configmap/applied").await;
    let managed = front
        .ok(
            cred,
            &[
                "-n",
                ns,
                "get",
                "configmap",
                "applied",
                "--show-managed-fields",
                "-o",
                "json",
            ],
            None,
        )
        .await;
    assert!(managed.contains("\"manager\": \"real-e2e\""), "{managed}");

    front
        .ok(
            cred,
            &[
                "-n",
                ns,
                "patch",
                "configmap",
                "created",
                "--type=merge",
                "-p",
                r#"{"data":{"b":"2"}}"#,
            ],
            None,
        )
        .await;
    let got = front
        .ok(
            cred,
            &[
                "-n",
                ns,
                "get",
                "configmap",
                "created",
                "-o",
                "jsonpath={.data.b}",
            ],
            None,
        )
        .await;
    assert_eq!(got, "2");

    front
        .ok(
            cred,
            &["-n", ns, "delete", "configmap", "created", "applied"],
            None,
        )
        .await;
    let out = front
        .kubectl(cred, &["-n", ns, "get", "configmap", "created"], None)
        .await;
    assert!(!out.status.success());
    assert!(both(&out).contains("NotFound"), "{}", both(&out));

    // RBAC is the apiserver's, on the caller: nothing outside the namespace's ConfigMaps.
    let out = front
        .kubectl(cred, &["-n", ns, "get", "secrets"], None)
        .await;
    assert!(!out.status.success(), "{}", both(&out));
    assert!(
        both(&out).contains(&format!("User \"{user}\" cannot list resource \"secrets\"")),
        "{}",
        both(&out)
    );
    drop(watch);

    // Discovery and OpenAPI v3 through the proxy.
    let resources = front.ok(cred, &["api-resources", "-o", "name"], None).await;
    for resource in [
        "configmaps",
        "flowschemas.flowcontrol.apiserver.k8s.io",
        "leases.coordination.k8s.io",
    ] {
        assert!(
            resources.lines().any(|l| l == resource),
            "api-resources lists {resource}: {resources}"
        );
    }
    let explained = front.ok(cred, &["explain", "configmap.data"], None).await;
    assert!(explained.contains("FIELD: data"), "{explained}");
    let explained = front
        .ok(
            cred,
            &["explain", "flowschemas.spec.distinguisherMethod"],
            None,
        )
        .await;
    assert!(explained.contains("ByUser"), "{explained}");
}

fn flags(flags: &[&str]) -> Vec<String> {
    flags.iter().map(ToString::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passthrough_with_a_token_is_the_caller_upstream() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    let front = Front::start(api, &flags(&["--identity-forwarding=passthrough"])).await;
    round(
        &front,
        &Cred::Token(ALICE_TOKEN),
        "rt-passthrough",
        "alice",
        &["dev", "system:authenticated"],
    )
    .await;
}

/// A client certificate ends at the proxy (it has no key to present it again): in passthrough
/// mode the proxy classifies by the token that travels, and refuses a certificate alone (the
/// apiserver would serve it as anonymous). The probe: a `system:masters` certificate beside
/// alice's token is alice, both at the proxy (never exempt) and at the apiserver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passthrough_classifies_a_certificate_caller_by_its_token_and_refuses_the_certificate_alone(
) {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    let front = Front::start(api, &flags(&["--identity-forwarding=passthrough"])).await;
    let (cert, key) = api.client_cert(front.app.dir.path(), "admin", "admin", &["system:masters"]);
    let out = front
        .kubectl(
            &Cred::Cert(cert.clone(), key.clone()),
            // --raw: kubectl's discovery would be refused first.
            &["get", "--raw", "/api/v1/namespaces/default/configmaps"],
            None,
        )
        .await;
    assert!(!out.status.success(), "{}", both(&out));
    assert!(
        both(&out).contains("a client certificate authenticates to this proxy only"),
        "{}",
        both(&out)
    );

    let admin = crate::support::pki::Issued::from_files(&cert, &key);
    let exempt = kube_apf_proxy::config::model::derived_uid("FlowSchema", "exempt");
    for version in [http::Version::HTTP_11, http::Version::HTTP_2] {
        let review = crate::support::app::request(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            Some(ALICE_TOKEN),
            bytes::Bytes::from_static(
                br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#,
            ),
        );
        let mut review = review;
        review.headers_mut().insert(
            "content-type",
            http::HeaderValue::from_static("application/json"),
        );
        let response = front
            .app
            .client_with(Some(&admin), version)
            .send(review)
            .await;
        assert_eq!(response.status(), http::StatusCode::CREATED, "{version:?}");
        let proxy_schema = response
            .headers()
            .get("x-kubernetes-pf-flowschema-uid")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = crate::support::read_body(response).await.expect("body");
        let review: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(
            review["status"]["userInfo"]["username"], "alice",
            "{version:?}: the apiserver runs the request as alice"
        );
        assert!(
            proxy_schema.is_some() && proxy_schema.as_deref() != Some(exempt.as_str()),
            "{version:?}: the proxy classifies alice, not the certificate: {proxy_schema:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonate_with_deploy_rbac_is_the_caller_upstream_and_the_proxy_may_only_impersonate() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = crate::proxy_identity(api, dir.path()).await;
    let token = std::fs::read_to_string(&token_file).expect("read token");

    // The proxy's own identity can impersonate, and do nothing with the data itself.
    let direct = |verb: &'static str, resource: &'static str| {
        let token = token.clone();
        async move {
            let out = crate::support::kube_apiserver::kubectl(
                vec![
                    format!("--server={}", api.server),
                    format!("--certificate-authority={}", api.path("ca.crt").display()),
                    format!("--token={token}"),
                    "auth".into(),
                    "can-i".into(),
                    verb.into(),
                    resource.into(),
                    "-A".into(),
                ],
                None,
            )
            .await;
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        }
    };
    assert_eq!(direct("impersonate", "users").await, "yes");
    assert_eq!(direct("list", "configmaps").await, "no");
    assert_eq!(direct("create", "configmaps").await, "no");

    let front = Front::start(
        api,
        &[
            "--identity-forwarding=impersonate".to_string(),
            format!("--upstream-token-file={}", token_file.display()),
        ],
    )
    .await;
    round(
        &front,
        &Cred::Token(ALICE_TOKEN),
        "rt-impersonate",
        "alice",
        &["dev", "system:authenticated"],
    )
    .await;

    // A client-certificate caller works too: the proxy impersonates what the certificate says.
    let (cert, key) = api.client_cert(front.app.dir.path(), "carol", "carol", &["dev", "ops"]);
    let whoami = front
        .ok(
            &Cred::Cert(cert, key),
            &["auth", "whoami", "-o", "jsonpath={.status.userInfo}"],
            None,
        )
        .await;
    let info: serde_json::Value = serde_json::from_str(&whoami).expect("userInfo");
    assert_eq!(info["username"], "carol", "{info}");
    assert_eq!(
        info["groups"],
        serde_json::json!(["dev", "ops", "system:authenticated"]),
        "{info}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requestheader_with_the_front_proxy_certificate_is_the_caller_upstream() {
    let Some(api) = KubeApiserver::shared() else {
        return;
    };
    let front = Front::start(
        api,
        &[
            "--identity-forwarding=requestheader".to_string(),
            format!(
                "--upstream-client-cert-file={}",
                api.path("front-proxy-client.crt").display()
            ),
            format!(
                "--upstream-client-key-file={}",
                api.path("front-proxy-client.key").display()
            ),
        ],
    )
    .await;
    let (cert, key) = api.client_cert(front.app.dir.path(), "dave", "dave", &["dev"]);
    round(
        &front,
        &Cred::Cert(cert, key),
        "rt-requestheader",
        "dave",
        &["dev", "system:authenticated"],
    )
    .await;
    let whoami = front
        .ok(
            &Cred::Token(ALICE_TOKEN),
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}",
            ],
            None,
        )
        .await;
    assert_eq!(whoami, "alice");
}
