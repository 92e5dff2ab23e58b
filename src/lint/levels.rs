//! Priority-level checks at given server limits: nominal concurrency, queue drain time,
//! shuffle sharding, and lending/borrowing settings.

use crate::config::{Config, PriorityLevel, PriorityLevelSpec};
use crate::fairqueue::limits::{compute_limits, LevelLimits};
use crate::fairqueue::timeout::wait_limit;

use super::{sharding, Code, Files, Finding, LintOptions};

const KIND: &str = "PriorityLevelConfiguration";

/// Every level finding, levels by name.
pub(super) fn lint_priority_levels(
    config: &Config,
    options: &LintOptions,
    files: &Files<'_>,
) -> Vec<Finding> {
    let levels: Vec<&PriorityLevel> = config.priority_levels().map(|pl| &**pl).collect();
    let limits = compute_limits(options.server_concurrency_limit(), &levels);
    let lendable_total: u32 = limits.iter().map(|l| l.lendable_cl).sum();
    let mut findings = Vec::new();
    for (pl, lim) in levels.iter().zip(&limits) {
        findings.extend(tiny(pl, lim, options, files));
        findings.extend(cannot_drain(pl, lim, options, files));
        findings.extend(sharding::lint_level(pl, options, files));
        let lent_by_others = lendable_total - lim.lendable_cl;
        findings.extend(borrowing(pl, lim, lent_by_others, files));
    }
    findings
}

fn shares_path(pl: &PriorityLevel, files: &Files<'_>) -> String {
    let field = files
        .version_of(KIND, &pl.name)
        .map_or("nominalConcurrencyShares", |v| v.shares_field());
    format!("spec.limited.{field}")
}

/// A limited level whose NominalCL is one seat or less: one slow request blocks it.
fn tiny(
    pl: &PriorityLevel,
    lim: &LevelLimits,
    o: &LintOptions,
    files: &Files<'_>,
) -> Option<Finding> {
    if pl.is_exempt() || lim.nominal_cl > 1 {
        return None;
    }
    let mut f = files.finding(
        Code::NominalConcurrencyTiny,
        KIND,
        &pl.name,
        &shares_path(pl, files),
    );
    f.message = format!(
        "nominal concurrency is {} seat(s) at a server limit of {} ({} shares); one long request \
         holds the whole level: raise the shares",
        lim.nominal_cl,
        o.server_concurrency_limit(),
        pl.nominal_concurrency_shares()
    );
    Some(f)
}

/// Full queues (`queues × queueLengthLimit` requests) that the level's nominal seats cannot
/// dispatch within the wait limit at `request_duration` per request: the last requests queued
/// time out after waiting instead of being rejected at once.
fn cannot_drain(
    pl: &PriorityLevel,
    lim: &LevelLimits,
    o: &LintOptions,
    files: &Files<'_>,
) -> Option<Finding> {
    let queuing = pl.queuing()?;
    let capacity = u64::from(queuing.queues) * u64::from(queuing.queue_length_limit);
    let wait = wait_limit(o.request_timeout);
    let per_request = o.request_duration.as_secs_f64();
    if per_request <= 0.0 {
        return None;
    }
    let drainable = (f64::from(lim.nominal_cl) * wait.as_secs_f64() / per_request).floor();
    if capacity as f64 <= drainable {
        return None;
    }
    let field = "spec.limited.limitResponse.queuing.queueLengthLimit";
    let mut f = files.finding(Code::QueuesCannotDrain, KIND, &pl.name, field);
    f.message = format!(
        "{} queues x {} = {capacity} queued requests, but {} seats dispatch only {drainable} in the \
         {}s wait limit at {}ms per request; lower queueLengthLimit or queues, or raise the shares",
        queuing.queues,
        queuing.queue_length_limit,
        lim.nominal_cl,
        wait.as_secs_f64(),
        o.request_duration.as_millis(),
    );
    Some(f)
}

/// Lending and borrowing settings that contradict each other.
fn borrowing(
    pl: &PriorityLevel,
    lim: &LevelLimits,
    lent_by_others: u32,
    files: &Files<'_>,
) -> Option<Finding> {
    let (field, message) = match &pl.spec {
        PriorityLevelSpec::Exempt {
            nominal_concurrency_shares: 0,
            lendable_percent,
        } if *lendable_percent > 0 => (
            "spec.exempt.lendablePercent",
            format!(
                "lendablePercent {lendable_percent} lends nothing: nominalConcurrencyShares is 0, so \
                 there are no seats to lend; set it to 0 or give the level shares"
            ),
        ),
        PriorityLevelSpec::Limited(l)
            if l.lendable_percent == 100 && l.borrowing_limit_percent == Some(0) =>
        (
            "spec.limited.borrowingLimitPercent",
            "lendablePercent 100 lets other levels take every seat (MinCL 0) and \
             borrowingLimitPercent 0 forbids borrowing any back: the level can be left with none"
                .to_string(),
        ),
        PriorityLevelSpec::Limited(l)
            if l.borrowing_limit_percent.is_some_and(|b| b > 0) && lent_by_others == 0 =>
        (
            "spec.limited.borrowingLimitPercent",
            format!(
                "borrowingLimitPercent {} allows borrowing {} seats, but no other level lends any \
                 (every lendablePercent is 0 or rounds to 0 seats)",
                l.borrowing_limit_percent.unwrap_or_default(),
                lim.borrowing_cl
            ),
        ),
        _ => return None,
    };
    let mut f = files.finding(Code::BorrowingContradiction, KIND, &pl.name, field);
    f.message = message;
    Some(f)
}
