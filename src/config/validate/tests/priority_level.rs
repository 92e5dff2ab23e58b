//! One case per row of the PriorityLevelConfiguration validation table.

use super::s;
use crate::config::defaults::default_priority_level;
use crate::config::raw::*;
use crate::config::validate::validate_priority_level;

fn pl_base() -> RawPriorityLevelConfiguration {
    RawPriorityLevelConfiguration {
        version: ApiVersion::V1,
        meta: RawMeta {
            name: "test".into(),
            ..RawMeta::default()
        },
        spec: RawPriorityLevelSpec {
            type_: "Limited".into(),
            limited: Some(RawLimited {
                shares: Some(10),
                lendable_percent: Some(0),
                borrowing_limit_percent: None,
                limit_response: RawLimitResponse {
                    type_: "Queue".into(),
                    queuing: Some(RawQueuing {
                        queues: 64,
                        hand_size: 8,
                        queue_length_limit: 50,
                    }),
                },
            }),
            exempt: None,
        },
        status: RawStatus::default(),
    }
}

fn pl_errors(edit: impl FnOnce(&mut RawPriorityLevelConfiguration)) -> Vec<String> {
    let mut pl = pl_base();
    edit(&mut pl);
    default_priority_level(&mut pl);
    validate_priority_level(&pl)
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn limited(pl: &mut RawPriorityLevelConfiguration) -> &mut RawLimited {
    pl.spec.limited.as_mut().unwrap()
}

fn queuing(pl: &mut RawPriorityLevelConfiguration) -> &mut RawQueuing {
    limited(pl).limit_response.queuing.as_mut().unwrap()
}

type PlCase = (
    &'static str,
    Box<dyn FnOnce(&mut RawPriorityLevelConfiguration)>,
    Vec<String>,
);

#[test]
fn priority_level_validation_matches_the_apiserver() {
    let lim = "spec.limited";
    let q = "spec.limited.limitResponse.queuing";
    let cases: Vec<PlCase> = vec![
        ("base is valid", Box::new(|_| {}), vec![]),
        (
            "preserve-zero annotation outside v1beta3",
            Box::new(|pl| {
                pl.meta
                    .annotations
                    .insert(PRESERVE_ZERO_ANNOTATION.into(), String::new());
            }),
            s(&["metadata.annotations: Forbidden: annotation 'flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares' is forbidden"]),
        ),
        (
            "exempt type on another name",
            Box::new(|pl| {
                pl.spec.type_ = "Exempt".into();
                pl.spec.limited = None;
            }),
            s(&["spec.type: Invalid value: \"Exempt\": type must be 'Exempt' if and only if name is 'exempt'"]),
        ),
        (
            "exempt type with limited section and bad exempt numbers",
            Box::new(|pl| {
                pl.meta.name = "exempt".into();
                pl.spec.type_ = "Exempt".into();
                pl.spec.exempt = Some(RawExempt {
                    nominal_concurrency_shares: Some(-1),
                    lendable_percent: Some(101),
                });
            }),
            s(&[
                "spec.limited: Forbidden: must be nil if the type is not Limited",
                "spec.exempt.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer",
                "spec.exempt.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive",
                "spec: Invalid value: spec of 'exempt' except the 'spec.exempt' field must equal the fixed value",
            ]),
        ),
        (
            "exempt level may change its exempt section",
            Box::new(|pl| {
                pl.meta.name = "exempt".into();
                pl.spec.type_ = "Exempt".into();
                pl.spec.limited = None;
                pl.spec.exempt = Some(RawExempt {
                    nominal_concurrency_shares: Some(10),
                    lendable_percent: Some(10),
                });
            }),
            vec![],
        ),
        (
            "limited with exempt section",
            Box::new(|pl| pl.spec.exempt = Some(RawExempt::default())),
            s(&["spec.exempt: Forbidden: must be nil if the type is Limited"]),
        ),
        (
            "limited without limited section",
            Box::new(|pl| pl.spec.limited = None),
            s(&["spec.limited: Required value: must not be empty when type is Limited"]),
        ),
        (
            "unknown type",
            Box::new(|pl| pl.spec.type_ = "Unlimited".into()),
            s(&["spec.type: Unsupported value: \"Unlimited\": supported values: \"Exempt\", \"Limited\""]),
        ),
        (
            "negative shares (v1 name)",
            Box::new(|pl| limited(pl).shares = Some(-1)),
            vec![format!("{lim}.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer")],
        ),
        (
            "negative shares (v1beta2 name)",
            Box::new(|pl| {
                pl.version = ApiVersion::V1beta2;
                limited(pl).shares = Some(-1);
            }),
            vec![format!("{lim}.assuredConcurrencyShares: Invalid value: -1: must be a non-negative integer")],
        ),
        ("zero shares in v1 are kept and valid", Box::new(|pl| limited(pl).shares = Some(0)), vec![]),
        (
            "lendable and borrowing percent out of range",
            Box::new(|pl| {
                limited(pl).lendable_percent = Some(-1);
                limited(pl).borrowing_limit_percent = Some(-1);
            }),
            vec![
                format!("{lim}.lendablePercent: Invalid value: -1: must be between 0 and 100, inclusive"),
                format!("{lim}.borrowingLimitPercent: Invalid value: -1: if specified, must be a non-negative integer"),
            ],
        ),
        (
            "borrowing above 100 is fine",
            Box::new(|pl| limited(pl).borrowing_limit_percent = Some(500)),
            vec![],
        ),
        (
            "reject with queuing",
            Box::new(|pl| limited(pl).limit_response.type_ = "Reject".into()),
            vec![format!("{q}: Forbidden: must be nil if limited.limitResponse.type is not Limited")],
        ),
        (
            "queue without queuing",
            Box::new(|pl| limited(pl).limit_response.queuing = None),
            vec![format!("{q}: Required value: must not be empty if limited.limitResponse.type is Limited")],
        ),
        (
            "unknown limit response",
            Box::new(|pl| limited(pl).limit_response.type_ = "Drop".into()),
            s(&["spec.limited.limitResponse.type: Unsupported value: \"Drop\": supported values: \"Queue\", \"Reject\""]),
        ),
        (
            "negative queuing numbers",
            Box::new(|pl| {
                *queuing(pl) = RawQueuing {
                    queues: -1,
                    hand_size: -1,
                    queue_length_limit: -1,
                }
            }),
            vec![
                format!("{q}.queueLengthLimit: Invalid value: -1: must be positive"),
                format!("{q}.queues: Invalid value: -1: must be positive"),
                format!("{q}.handSize: Invalid value: -1: must be positive"),
            ],
        ),
        (
            "too many queues and too much entropy",
            Box::new(|pl| {
                queuing(pl).queues = i32::MAX;
                queuing(pl).hand_size = 3;
            }),
            vec![
                format!("{q}.queues: Invalid value: 2147483647: must not be greater than 10000000"),
                format!("{q}.handSize: Invalid value: 3: required entropy bits of deckSize 2147483647 and handSize 3 should not be greater than 60"),
            ],
        ),
        (
            "hand larger than deck",
            Box::new(|pl| {
                queuing(pl).queues = 7;
                queuing(pl).hand_size = 8;
            }),
            vec![format!("{q}.handSize: Invalid value: 8: should not be greater than queues (7)")],
        ),
        (
            "entropy over 60 bits",
            Box::new(|pl| {
                queuing(pl).queues = 512;
                queuing(pl).hand_size = 8;
            }),
            vec![format!("{q}.handSize: Invalid value: 8: required entropy bits of deckSize 512 and handSize 8 should not be greater than 60")],
        ),
        (
            "10^7 queues with hand 2 is valid",
            Box::new(|pl| {
                queuing(pl).queues = 10_000_000;
                queuing(pl).hand_size = 2;
            }),
            vec![],
        ),
        (
            "catch-all changed",
            Box::new(|pl| pl.meta.name = "catch-all".into()),
            s(&["spec: Invalid value: spec of 'catch-all' must equal the fixed value"]),
        ),
        (
            "condition types",
            Box::new(|pl| pl.status.condition_types = s(&["", "a", "a"])),
            s(&[
                "status.conditions[0].type: Required value: must not be empty",
                "status.conditions[2].type: Duplicate value: \"a\"",
            ]),
        ),
    ];
    for (name, edit, want) in cases {
        assert_eq!(pl_errors(edit), want, "case: {name}");
    }
}
