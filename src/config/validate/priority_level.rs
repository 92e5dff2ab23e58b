//! Mirrors `validation.go`: `ValidatePriorityLevelConfiguration` and the functions it calls.

use super::{validate_meta, validate_status};
use crate::config::field::{BadValue, FieldError, FieldPath};
use crate::config::mandatory;
use crate::config::model::{CATCH_ALL, EXEMPT};
use crate::config::raw::*;

const SUPPORTED_TYPES: &[&str] = &["Exempt", "Limited"];
const SUPPORTED_LIMIT_RESPONSES: &[&str] = &["Queue", "Reject"];
/// `priorityLevelConfigurationQueuingMaxQueues`.
const MAX_QUEUES: i32 = 10_000_000;
/// `shufflesharding.MaxHashBits`.
const MAX_HASH_BITS: i64 = 60;

/// Every problem with a defaulted PriorityLevelConfiguration.
///
/// The concurrency-shares field is named as in the version the object was written in
/// (`assuredConcurrencyShares` before v1beta3), as the apiserver names it for the request's version.
pub(in crate::config) fn validate_priority_level(
    pl: &RawPriorityLevelConfiguration,
) -> Vec<FieldError> {
    let mut errs = validate_meta(&pl.meta);
    if pl.meta.annotations.contains_key(PRESERVE_ZERO_ANNOTATION) {
        errs.push(FieldError::forbidden(
            &FieldPath::new("metadata").child("annotations"),
            &format!("annotation '{PRESERVE_ZERO_ANNOTATION}' is forbidden"),
        ));
    }
    let spec_path = FieldPath::new("spec");
    errs.extend(validate_spec(pl, &spec_path));
    errs.extend(validate_mandatory(pl, &spec_path));
    errs.extend(validate_status(&pl.status));
    errs
}

fn validate_spec(pl: &RawPriorityLevelConfiguration, path: &FieldPath) -> Vec<FieldError> {
    let spec = &pl.spec;
    let mut errs = Vec::new();
    if (pl.meta.name == EXEMPT) != (spec.type_ == "Exempt") {
        errs.push(FieldError::invalid(
            &path.child("type"),
            BadValue::Str(spec.type_.clone()),
            "type must be 'Exempt' if and only if name is 'exempt'",
        ));
    }
    match spec.type_.as_str() {
        "Exempt" => {
            if spec.limited.is_some() {
                errs.push(FieldError::forbidden(
                    &path.child("limited"),
                    "must be nil if the type is not Limited",
                ));
            }
            if let Some(exempt) = &spec.exempt {
                errs.extend(validate_exempt(exempt, &path.child("exempt")));
            }
        }
        "Limited" => {
            if spec.exempt.is_some() {
                errs.push(FieldError::forbidden(
                    &path.child("exempt"),
                    "must be nil if the type is Limited",
                ));
            }
            match &spec.limited {
                None => errs.push(FieldError::required(
                    &path.child("limited"),
                    "must not be empty when type is Limited",
                )),
                Some(limited) => errs.extend(validate_limited(
                    limited,
                    pl.version,
                    &path.child("limited"),
                )),
            }
        }
        other => errs.push(FieldError::not_supported(
            &path.child("type"),
            BadValue::Str(other.to_string()),
            SUPPORTED_TYPES,
        )),
    }
    errs
}

fn percent_problem(path: &FieldPath, value: Option<i32>) -> Option<FieldError> {
    let v = value?;
    (!(0..=100).contains(&v)).then(|| {
        FieldError::invalid(
            path,
            BadValue::Int(v.into()),
            "must be between 0 and 100, inclusive",
        )
    })
}

fn validate_exempt(exempt: &RawExempt, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(n) = exempt.nominal_concurrency_shares.filter(|n| *n < 0) {
        errs.push(FieldError::invalid(
            &path.child("nominalConcurrencyShares"),
            BadValue::Int(n.into()),
            "must be a non-negative integer",
        ));
    }
    errs.extend(percent_problem(
        &path.child("lendablePercent"),
        exempt.lendable_percent,
    ));
    errs
}

fn validate_limited(
    limited: &RawLimited,
    version: ApiVersion,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let shares = limited.shares.unwrap_or(0);
    if shares < 0 {
        errs.push(FieldError::invalid(
            &path.child(version.shares_field()),
            BadValue::Int(shares.into()),
            "must be a non-negative integer",
        ));
    }
    errs.extend(validate_limit_response(
        &limited.limit_response,
        &path.child("limitResponse"),
    ));
    errs.extend(percent_problem(
        &path.child("lendablePercent"),
        limited.lendable_percent,
    ));
    if let Some(b) = limited.borrowing_limit_percent.filter(|b| *b < 0) {
        errs.push(FieldError::invalid(
            &path.child("borrowingLimitPercent"),
            BadValue::Int(b.into()),
            "if specified, must be a non-negative integer",
        ));
    }
    errs
}

fn validate_limit_response(lr: &RawLimitResponse, path: &FieldPath) -> Vec<FieldError> {
    match (lr.type_.as_str(), &lr.queuing) {
        ("Reject", Some(_)) => vec![FieldError::forbidden(
            &path.child("queuing"),
            "must be nil if limited.limitResponse.type is not Limited",
        )],
        ("Reject", None) => Vec::new(),
        ("Queue", None) => vec![FieldError::required(
            &path.child("queuing"),
            "must not be empty if limited.limitResponse.type is Limited",
        )],
        ("Queue", Some(q)) => validate_queuing(q, &path.child("queuing")),
        (other, _) => vec![FieldError::not_supported(
            &path.child("type"),
            BadValue::Str(other.to_string()),
            SUPPORTED_LIMIT_RESPONSES,
        )],
    }
}

/// `shufflesharding.RequiredEntropyBits`: `ceil(log2(deckSize) * handSize)`.
fn required_entropy_bits(deck_size: i32, hand_size: i32) -> i64 {
    // f64 arithmetic on purpose: the reference computes it the same way.
    (f64::from(deck_size).log2() * f64::from(hand_size)).ceil() as i64
}

fn validate_queuing(q: &RawQueuing, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let positive = |field: &str, v: i32| {
        FieldError::invalid(
            &path.child(field),
            BadValue::Int(v.into()),
            "must be positive",
        )
    };
    if q.queue_length_limit <= 0 {
        errs.push(positive("queueLengthLimit", q.queue_length_limit));
    }
    if q.queues <= 0 {
        errs.push(positive("queues", q.queues));
    } else if q.queues > MAX_QUEUES {
        errs.push(FieldError::invalid(
            &path.child("queues"),
            BadValue::Int(q.queues.into()),
            &format!("must not be greater than {MAX_QUEUES}"),
        ));
    }
    let hand = BadValue::Int(q.hand_size.into());
    if q.hand_size <= 0 {
        errs.push(positive("handSize", q.hand_size));
    } else if q.hand_size > q.queues {
        let msg = format!("should not be greater than queues ({})", q.queues);
        errs.push(FieldError::invalid(&path.child("handSize"), hand, &msg));
    } else if required_entropy_bits(q.queues, q.hand_size) > MAX_HASH_BITS {
        let msg = format!(
            "required entropy bits of deckSize {} and handSize {} should not be greater than {MAX_HASH_BITS}",
            q.queues, q.hand_size
        );
        errs.push(FieldError::invalid(&path.child("handSize"), hand, &msg));
    }
    errs
}

/// `ValidateIfMandatoryPriorityLevelConfigurationObject`.
fn validate_mandatory(pl: &RawPriorityLevelConfiguration, path: &FieldPath) -> Vec<FieldError> {
    let name = pl.meta.name.as_str();
    let want = match name {
        EXEMPT => mandatory::exempt_priority_level(),
        CATCH_ALL => mandatory::catch_all_priority_level(),
        _ => return Vec::new(),
    };
    let want = RawPriorityLevelConfiguration::from(&want).spec;
    let (have, msg) = if name == EXEMPT {
        // Only `spec.exempt` of the exempt level may be changed by the administrator.
        let mut have = pl.spec.clone();
        have.exempt.clone_from(&want.exempt);
        (
            have,
            format!("spec of '{name}' except the 'spec.exempt' field must equal the fixed value"),
        )
    } else {
        (
            pl.spec.clone(),
            format!("spec of '{name}' must equal the fixed value"),
        )
    };
    if have == want {
        Vec::new()
    } else {
        vec![FieldError::invalid(path, BadValue::Omitted, &msg)]
    }
}
