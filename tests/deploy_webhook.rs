//! deploy/webhook/ stays in step with the binary: the Deployment's args parse as `webhook` flags,
//! the ValidatingWebhookConfiguration has the fields the apiserver needs and points at the
//! Service's port, and its ConfigMap selector is the label the webhook and the ConfigMap use.

use std::path::Path;

use clap::Parser;
use kube_apf_proxy::cli::WebhookOptions;
use serde_yaml::Value;

#[derive(Parser)]
struct Webhook {
    #[command(flatten)]
    options: WebhookOptions,
}

fn documents(path: &str) -> Vec<Value> {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let text = std::fs::read_to_string(&full).expect("read");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).expect("YAML"))
        .collect()
}

fn of_kind(docs: &[Value], kind: &str) -> Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .cloned()
        .unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
fn the_deployment_args_parse_and_the_service_reaches_them() {
    let docs = documents("deploy/webhook/deployment.yaml");
    let deployment = of_kind(&docs, "Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<String> = serde_yaml::from_value(container["args"].clone()).expect("args");
    assert_eq!(args[0], "webhook");
    let parsed = Webhook::try_parse_from(&args)
        .expect("valid webhook flags")
        .options;
    assert_eq!(
        container["ports"][0]["containerPort"].as_u64(),
        Some(u64::from(parsed.secure_port))
    );
    assert_eq!(
        parsed.configmap_label.0,
        "kube-apf-proxy.io/flowcontrol-config"
    );
    let service = of_kind(&docs, "Service");
    assert_eq!(
        service["spec"]["ports"][0]["targetPort"],
        container["ports"][0]["name"]
    );
    let hooks = of_kind(
        &documents("deploy/webhook/validatingwebhook.yaml"),
        "ValidatingWebhookConfiguration",
    );
    for hook in hooks["webhooks"].as_sequence().expect("webhooks") {
        let svc = &hook["clientConfig"]["service"];
        assert_eq!(svc["name"], service["metadata"]["name"]);
        assert_eq!(svc["port"], service["spec"]["ports"][0]["port"]);
        assert_eq!(svc["path"], "/validate");
        assert_eq!(hook["sideEffects"], "None");
        assert_eq!(
            hook["admissionReviewVersions"],
            serde_yaml::from_str::<Value>("[v1]").expect("yaml")
        );
        assert_eq!(hook["matchPolicy"], "Equivalent");
        assert!(["Fail", "Ignore"].contains(&hook["failurePolicy"].as_str().unwrap_or_default()));
        assert!(hook["timeoutSeconds"]
            .as_u64()
            .is_some_and(|t| (1..=30).contains(&t)));
    }
    let cm_hook = &hooks["webhooks"][1];
    let selector = &cm_hook["objectSelector"]["matchLabels"][parsed.configmap_label.0.as_str()];
    assert_eq!(selector.as_str(), Some(parsed.configmap_label.1.as_str()));
    let configmap = &documents("deploy/flowcontrol-configmap.yaml")[0];
    assert_eq!(
        configmap["metadata"]["labels"][parsed.configmap_label.0.as_str()],
        *selector
    );
}
