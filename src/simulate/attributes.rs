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
}

type Targets = HashMap<Box<str>, Arc<RequestInfo>, WordBuildHasher>;

impl Attributes {
    /// Targets kept (a few MiB at most).
    pub(super) const CAPACITY: usize = 8192;

    /// The attributes of `method` on `target`, as [`request_info::parse`] derives them.
    pub(super) fn of(
        &mut self,
        method: &http::Method,
        target: &str,
    ) -> Result<Arc<RequestInfo>, RequestInfoError> {
        let at = match self.by_method.iter().position(|(m, _)| m == method) {
            Some(at) => at,
            None => {
                self.by_method.push((method.clone(), Targets::default()));
                self.by_method.len() - 1
            }
        };
        if let Some(info) = self.by_method[at].1.get(target) {
            return Ok(Arc::clone(info));
        }
        let info = Arc::new(request_info::parse(method.as_str(), target)?);
        if self.kept >= Self::CAPACITY {
            for (_, targets) in &mut self.by_method {
                targets.clear();
            }
            self.kept = 0;
        }
        self.by_method[at].1.insert(target.into(), Arc::clone(&info));
        self.kept += 1;
        Ok(info)
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
        assert_eq!(*get, request_info::parse("GET", target).unwrap());
        assert!(Arc::ptr_eq(&get, &memo.of(&http::Method::GET, target).unwrap()));
        let delete = memo.of(&http::Method::DELETE, target).unwrap();
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
            let info = memo.of(&http::Method::GET, &target).unwrap();
            assert_eq!(info.name, format!("p{i}"));
        }
        assert_eq!(memo.kept, 10);
        let kept: usize = memo.by_method.iter().map(|(_, t)| t.len()).sum();
        assert_eq!(kept, 10);
    }
}
