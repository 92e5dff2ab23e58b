//! URL → request attributes → classification against the bootstrap configuration.
//!
//! Input: the method, a newline, the request target (`/api/v1/...?query`), and optionally a
//! newline and a user name. Invariants: parsing never panics and is deterministic; a parsed
//! request classifies into a FlowSchema and priority level of the configuration.
#![no_main]

use std::sync::OnceLock;

use kube_apf_proxy::auth::Identity;
use kube_apf_proxy::classify::{classify, MatchIndex};
use kube_apf_proxy::config::{bootstrap, Config};
use kube_apf_proxy::request_info::{is_long_running, parse};
use libfuzzer_sys::fuzz_target;

fn config() -> &'static (Config, MatchIndex) {
    static CONFIG: OnceLock<(Config, MatchIndex)> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let config = bootstrap();
        let index = MatchIndex::of(&config);
        (config, index)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.splitn(3, '\n');
    let method = lines.next().unwrap_or_default();
    let target = lines.next().unwrap_or("/");
    let user = lines.next().unwrap_or("system:anonymous");
    let first = parse(method, target);
    let second = parse(method, target);
    assert_eq!(format!("{first:?}"), format!("{second:?}"), "deterministic");
    let Ok(info) = first else {
        return;
    };
    let _ = is_long_running(&info);
    let identity = Identity {
        user: user.to_string(),
        groups: vec!["system:authenticated".to_string()],
        ..Identity::default()
    };
    let (config, index) = config();
    let class = classify(index, &identity, &info);
    assert!(
        config
            .priority_level(&class.priority_level.name)
            .is_some(),
        "classified into an unknown level {:?}",
        class.priority_level.name
    );
});
