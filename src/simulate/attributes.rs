//! Request attributes of the requests a replay has seen lately, derived once per distinct
//! method and request target.
//!
//! A trace repeats its targets (every lease renewal, every node's status, every list of a
//! controller): [`request_info::parse`] is a pure function of the method and the target, so its
//! result is kept and shared. At most [`Attributes::CAPACITY`] targets are kept; the memo starts
//! over when full. Every configuration compared in one run shares the same attributes.
//!
//! Each derivation also names the attributes classification reads ([`Derived::class`]): the verb,
//! the API group, the resource and subresource, the namespace, and for a non-resource request
//! its path — not the object's name, which no FlowSchema rule can name. The GETs of many pods of
//! one namespace share one class, so `simulate` classifies them once per user and groups.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Arc;

use crate::classify::WordBuildHasher;
use crate::request_info::{self, RequestInfo, RequestInfoError};

/// Attributes by method (a trace has a handful: found by a scan), then by request target.
#[derive(Debug, Default)]
pub(super) struct Attributes {
    by_method: Vec<(http::Method, Targets)>,
    kept: usize,
    /// Classes by what classification reads, and the id of the last class named.
    classes: HashMap<ClassKey, u64, WordBuildHasher>,
    last_class: u64,
}

/// What classification reads of a request's attributes: hashed and compared on those fields
/// only, so the attributes are shared rather than copied.
#[derive(Debug)]
struct ClassKey(Arc<RequestInfo>);

impl ClassKey {
    /// The fields classification reads (a non-resource request's path; for a resource request,
    /// the object's name and path are left out).
    fn fields(&self) -> (bool, &str, &str, &str, &str, &str, &str) {
        let info = &*self.0;
        let path = if info.is_resource_request {
            ""
        } else {
            info.path.as_str()
        };
        (
            info.is_resource_request,
            &info.verb,
            &info.api_group,
            &info.resource,
            &info.subresource,
            &info.namespace,
            path,
        )
    }
}

impl PartialEq for ClassKey {
    fn eq(&self, other: &Self) -> bool {
        self.fields() == other.fields()
    }
}

impl Eq for ClassKey {}

impl std::hash::Hash for ClassKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.fields().hash(state);
    }
}

type Targets = HashMap<Box<str>, Derived, WordBuildHasher>;

/// A request's attributes, with the class of what classification reads of them.
#[derive(Debug, Clone)]
pub(super) struct Derived {
    /// The same for every request whose attributes classification reads are the same (and
    /// never reused for others in the same run).
    pub(super) class: u64,
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
        if self.kept >= Self::CAPACITY {
            for (_, targets) in &mut self.by_method {
                targets.clear();
            }
            self.classes.clear();
            self.kept = 0;
        }
        let class = match self.classes.entry(ClassKey(Arc::clone(&info))) {
            Entry::Occupied(class) => *class.get(),
            Entry::Vacant(new) => {
                self.last_class += 1;
                *new.insert(self.last_class)
            }
        };
        let derived = Derived { class, info };
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
        assert_eq!(get.class, again.class);
        let delete = memo.of(&http::Method::DELETE, target).unwrap();
        assert_ne!(delete.class, get.class);
        // Another pod's name, the same class; another namespace, another class.
        let other = memo
            .of(&http::Method::GET, "/api/v1/namespaces/ns/pods/web-2")
            .unwrap();
        let same = memo
            .of(
                &http::Method::GET,
                "/api/v1/namespaces/ns/pods/web-3?pretty=1",
            )
            .unwrap();
        let elsewhere = memo
            .of(&http::Method::GET, "/api/v1/namespaces/other/pods/web-2")
            .unwrap();
        assert_eq!(other.class, same.class);
        assert!(!Arc::ptr_eq(&other.info, &same.info));
        assert_ne!(other.class, elsewhere.class);
        // Non-resource requests: the path is what classification reads.
        let healthz = memo.of(&http::Method::GET, "/healthz").unwrap();
        let livez = memo.of(&http::Method::GET, "/livez").unwrap();
        assert_ne!(healthz.class, livez.class);
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
        }
        assert_eq!(memo.kept, 10);
        assert_eq!(memo.classes.len(), 1, "one class, whatever the pods' names");
        let kept: usize = memo.by_method.iter().map(|(_, t)| t.len()).sum();
        assert_eq!(kept, 10);
    }
}
