//! The last rejected requests of each priority level, kept so that an operator who sees a 429 can
//! find out why (`/debug/api_priority_and_fairness/rejected`, with each request's classification
//! explained against the configuration in force).
//!
//! Bounded: at most [`PER_LEVEL`] requests per level (the oldest go first); levels are named by
//! the configuration, never by callers. Rejections are rare next to requests, so one short mutex is enough.

use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::debug_dump::format_rfc3339_nano;

/// How many rejected requests are kept per priority level.
pub const PER_LEVEL: usize = 100;

/// One rejected request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RejectedRequest {
    /// When it was rejected (RFC 3339).
    pub time: String,
    /// Its priority level.
    pub priority_level: String,
    /// Its FlowSchema.
    pub flow_schema: String,
    /// Its flow distinguisher.
    pub flow_distinguisher: String,
    /// `queue-full`, `concurrency-limit` or `time-out`.
    pub reason: &'static str,
    /// How long it waited before it was rejected.
    pub waited_seconds: f64,
    /// The HTTP method.
    pub method: String,
    /// The path and query.
    pub url: String,
    /// The user.
    pub user: String,
    /// The user's groups.
    pub groups: Vec<String>,
    /// The caller who impersonated `user` (`kubectl --as`), as the apiserver's audit keeps
    /// `user` beside `impersonatedUser`; absent when the caller ran as itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonator: Option<String>,
}

/// The recent rejections of every level.
#[derive(Debug, Default)]
pub struct RecentRejections {
    levels: Mutex<BTreeMap<String, VecDeque<RejectedRequest>>>,
}

/// What [`RecentRejections::record`] needs about a request.
#[derive(Debug)]
pub struct Rejected<'a> {
    /// Its priority level.
    pub priority_level: &'a str,
    /// Its FlowSchema.
    pub flow_schema: &'a str,
    /// Its flow distinguisher.
    pub flow_distinguisher: &'a str,
    /// Why.
    pub reason: &'static str,
    /// How long it waited.
    pub waited: Duration,
    /// The HTTP method.
    pub method: &'a str,
    /// The path and query.
    pub url: &'a str,
    /// The user.
    pub user: &'a str,
    /// The user's groups.
    pub groups: &'a [String],
    /// Who impersonated the user, if anyone.
    pub impersonator: Option<&'a str>,
}

impl RecentRejections {
    /// Keeps one rejected request, dropping its level's oldest beyond [`PER_LEVEL`].
    pub fn record(&self, r: &Rejected<'_>) {
        let entry = RejectedRequest {
            time: format_rfc3339_nano(Some(SystemTime::now())),
            priority_level: r.priority_level.to_string(),
            flow_schema: r.flow_schema.to_string(),
            flow_distinguisher: r.flow_distinguisher.to_string(),
            reason: r.reason,
            waited_seconds: r.waited.as_secs_f64(),
            method: r.method.to_string(),
            url: r.url.to_string(),
            user: r.user.to_string(),
            groups: r.groups.to_vec(),
            impersonator: r.impersonator.map(str::to_string),
        };
        let mut levels = self.levels.lock();
        let queue = levels.entry(entry.priority_level.clone()).or_default();
        if queue.len() == PER_LEVEL {
            queue.pop_front();
        }
        queue.push_back(entry);
    }

    /// The last `limit` rejected requests of `priority_level` (of every level when `None`),
    /// newest first.
    pub fn recent(&self, priority_level: Option<&str>, limit: usize) -> Vec<RejectedRequest> {
        let levels = self.levels.lock();
        let mut out: Vec<RejectedRequest> = levels
            .iter()
            .filter(|(name, _)| priority_level.is_none_or(|p| p == name.as_str()))
            .flat_map(|(_, q)| q.iter().cloned())
            .collect();
        out.sort_by(|a, b| b.time.cmp(&a.time));
        out.truncate(limit);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(level: &str, user: &str) -> Rejected<'static> {
        let level: &'static str = Box::leak(level.to_string().into_boxed_str());
        let user: &'static str = Box::leak(user.to_string().into_boxed_str());
        Rejected {
            priority_level: level,
            flow_schema: "fs",
            flow_distinguisher: user,
            reason: "queue-full",
            waited: Duration::ZERO,
            method: "GET",
            url: "/api/v1/pods",
            user,
            groups: &[],
            impersonator: None,
        }
    }

    #[test]
    fn each_level_keeps_its_last_hundred_newest_first() {
        let recent = RecentRejections::default();
        for i in 0..150 {
            recent.record(&rejected("a", &format!("u{i:03}")));
        }
        recent.record(&rejected("b", "other"));
        let a = recent.recent(Some("a"), 1000);
        assert_eq!(a.len(), PER_LEVEL);
        assert!(a.iter().all(|r| r.priority_level == "a"));
        assert!(a.iter().any(|r| r.user == "u149"));
        assert!(!a.iter().any(|r| r.user == "u049"), "the oldest went first");
        assert_eq!(recent.recent(None, 5).len(), 5);
        assert_eq!(recent.recent(Some("b"), 10).len(), 1);
    }
}
