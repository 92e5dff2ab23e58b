//! Request attributes of the requests a replay has seen lately, derived once per distinct
//! method and request target.
//!
//! A trace repeats its targets (every lease renewal, every node's status, every list of a
//! controller): [`request_info::parse`] is a pure function of the method and the target, so its
//! result is kept and shared. At most [`Attributes::CAPACITY`] targets are kept; the memo starts
//! over when full. Every configuration compared in one run shares the same attributes.

use std::collections::HashMap;
use std::sync::Arc;

use crate::classify::WordBuildHasher;
use crate::request_info::{self, RequestInfo, RequestInfoError};

/// Attributes by method (a trace has a handful: found by a scan), then by request target.
#[derive(Debug, Default)]
pub(super) struct Attributes {
    by_method: Vec<(http::Method, Targets)>,
    kept: usize,
    /// The id of the last attributes derived.
    last: u64,
}

type Targets = HashMap<Box<str>, Derived, WordBuildHasher>;

/// A request's attributes, with an id that no other method and target in the same run gets
/// (not even after the memo started over), for memos keyed by them.
#[derive(Debug, Clone)]
pub(super) struct Derived {
    pub(super) id: u64,
    pub(super) info: Arc<RequestInfo>,
}

impl Attributes {
    /// Targets kept (a few MiB at most).
    pub(super) const CAPACITY: usize = 8192;

    /// The attributes of `method` on `target`, as [`request_info::parse`] derives them.
    pub(super) fn of(
        &mut self,
        method: &http::Method,
        target: &str,
    ) -> Result<Derived, RequestInfoError> {
        let at = match self.by_method.iter().position(|(m, _)| m == method) {
            Some(at) => at,
            None => {
                self.by_method.push((method.clone(), Targets::default()));
                self.by_method.len() - 1
            }
        };
        if let Some(derived) = self.by_method[at].1.get(target) {
            return Ok(derived.clone());
        }
        let info = Arc::new(request_info::parse(method.as_str(), target)?);
        self.last += 1;
        let derived = Derived {
            id: self.last,
            info,
        };
        if self.kept >= Self::CAPACITY {
            for (_, targets) in &mut self.by_method {
                targets.clear();
            }
            self.kept = 0;
        }
        self.by_method[at].1.insert(target.into(), derived.clone());
        self.kept += 1;
        Ok(derived)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attributes_are_those_parse_derives_and_are_shared_per_method_and_target() {
        let mut memo = Attributes::default();
        let target = "/api/v1/namespaces/ns/pods?watch=true&labelSelector=app%3Dweb";
        let get = memo.of(&http::Method::GET, target).unwrap();
        assert_eq!(*get.info, request_info::parse("GET", target).unwrap());
        let again = memo.of(&http::Method::GET, target).unwrap();
        assert!(Arc::ptr_eq(&get.info, &again.info));
        assert_eq!(get.id, again.id);
        let delete = memo.of(&http::Method::DELETE, target).unwrap();
        assert_ne!(delete.id, get.id);
        let (get, delete) = (get.info, delete.info);
        assert_eq!(delete.verb, "deletecollection");
        assert_eq!(get.verb, "watch");
        assert_eq!(
            memo.of(&http::Method::GET, "/api/v1/%zz").unwrap_err(),
            request_info::parse("GET", "/api/v1/%zz").unwrap_err()
        );
    }

    #[test]
    fn it_starts_over_when_full() {
        let mut memo = Attributes::default();
        for i in 0..Attributes::CAPACITY + 10 {
            let target = format!("/api/v1/namespaces/ns/pods/p{i}");
            let derived = memo.of(&http::Method::GET, &target).unwrap();
            assert_eq!(derived.info.name, format!("p{i}"));
            assert_eq!(derived.id, i as u64 + 1, "ids are never reused");
        }
        assert_eq!(memo.kept, 10);
        let kept: usize = memo.by_method.iter().map(|(_, t)| t.len()).sum();
        assert_eq!(kept, 10);
    }
}
