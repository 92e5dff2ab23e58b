//! Properties: loading never panics, and `config dump` output loads back to the same config.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::super::load::{load_sources, SourceFile};
use super::super::parse::Format;
use super::super::*;

fn limit_response() -> impl Strategy<Value = LimitResponse> {
    prop_oneof![
        Just(LimitResponse::Reject),
        (1..=128u32, 1..=6u32, 1..=1000u32).prop_map(|(queues, hand, len)| {
            LimitResponse::Queue(Queuing {
                queues,
                hand_size: hand.min(queues),
                queue_length_limit: len,
            })
        }),
    ]
}

fn level() -> impl Strategy<Value = PriorityLevel> {
    (
        "pl-[a-z0-9]{1,6}",
        0..1000u32,
        0..=100u32,
        proptest::option::of(0..500u32),
        limit_response(),
    )
        .prop_map(
            |(name, shares, lendable, borrowing, limit_response)| PriorityLevel {
                name,
                uid: String::new(),
                spec: PriorityLevelSpec::Limited(LimitedPriorityLevel {
                    nominal_concurrency_shares: shares,
                    lendable_percent: lendable,
                    borrowing_limit_percent: borrowing,
                    limit_response,
                }),
            },
        )
}

fn schema(levels: Vec<String>) -> impl Strategy<Value = FlowSchema> {
    (
        "fs-[a-z0-9]{1,6}",
        2..10000i32,
        proptest::sample::select(levels),
        proptest::option::of(prop_oneof![
            Just(DistinguisherMethod::ByUser),
            Just(DistinguisherMethod::ByNamespace)
        ]),
        "[a-z:]{1,10}",
    )
        .prop_map(|(name, precedence, level, dm, user)| FlowSchema {
            name,
            uid: String::new(),
            matching_precedence: precedence,
            priority_level: level,
            distinguisher_method: dm,
            rules: vec![PolicyRulesWithSubjects {
                subjects: vec![Subject::User { name: user }],
                resource_rules: vec![ResourcePolicyRule {
                    verbs: vec!["get".into(), "list".into()],
                    api_groups: vec![String::new()],
                    resources: vec!["pods".into()],
                    cluster_scope: false,
                    namespaces: vec!["*".into()],
                }],
                non_resource_rules: vec![],
            }],
        })
}

fn config() -> impl Strategy<Value = Config> {
    proptest::collection::vec(level(), 1..5).prop_flat_map(|levels| {
        let names: Vec<String> = levels.iter().map(|l| l.name.clone()).collect();
        proptest::collection::vec(schema(names), 0..6).prop_map(move |schemas| {
            // Names are unique per kind in a valid configuration.
            let levels: BTreeMap<_, _> =
                levels.iter().map(|l| (l.name.clone(), l.clone())).collect();
            let schemas: BTreeMap<_, _> =
                schemas.into_iter().map(|s| (s.name.clone(), s)).collect();
            Config::resolve(
                schemas.into_values().collect(),
                levels.into_values().collect(),
            )
        })
    })
}

fn load_text(text: &str, format: Format) -> Result<Loaded, ConfigError> {
    load_sources(&[SourceFile {
        name: "p.yaml".into(),
        bytes: text.as_bytes().to_vec(),
        format,
    }])
}

proptest! {
    #[test]
    fn dump_loads_back_to_the_same_configuration(config in config()) {
        let text = to_yaml(&config);
        let loaded = load_text(&text, Format::Yaml).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert!(loaded.warnings.is_empty());
        prop_assert_eq!(to_yaml(&loaded.config), text);
        let schemas = |c: &Config| c.flow_schemas().iter().map(|f| (**f).clone()).collect::<Vec<_>>();
        let levels = |c: &Config| c.priority_levels().map(|l| (**l).clone()).collect::<Vec<_>>();
        prop_assert_eq!(schemas(&loaded.config), schemas(&config));
        prop_assert_eq!(levels(&loaded.config), levels(&config));
    }

    #[test]
    fn loading_arbitrary_text_never_panics(text in "[a-zA-Z0-9:{}\\[\\],\\-\n *'\"#&!|>.]{0,300}") {
        let _ = load_text(&text, Format::Yaml);
        let _ = load_text(&text, Format::Json);
    }

    #[test]
    fn loading_mutated_bootstrap_never_panics(cut in 0..BOOTSTRAP_YAML.len(), junk in "[a-z: \\-\n\\[{]{0,8}") {
        let mut text = BOOTSTRAP_YAML.as_bytes()[..cut].to_vec();
        text.extend_from_slice(junk.as_bytes());
        text.extend_from_slice(&BOOTSTRAP_YAML.as_bytes()[cut..]);
        let text = String::from_utf8_lossy(&text);
        let _ = load_text(&text, Format::Yaml);
    }
}
