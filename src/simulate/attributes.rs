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

use std::collections::HashMap;
use std::sync::Arc;

use crate::classify::WordBuildHasher;
use crate::request_info::{self, RequestInfo, RequestInfoError};

/// Attributes by method (a trace has a handful: found by a scan), then by request target.
#[derive(Debug, Default)]
pub(super) struct Attributes {
    by_method: Vec<(http::Method, Targets)>,
    /// The attributes kept, in the order derived; the maps hold their places.
    kept: Vec<Derived>,
    /// Classes by what classification reads ([`class_key`]), and the id of the last class named.
    classes: HashMap<Box<[u8]>, u64, WordBuildHasher>,
    last_class: u64,
    /// The key of the class being looked up, reused.
    key: Vec<u8>,
}

/// What classification reads of a request's attributes, as one string of bytes: each field
/// its length, then its bytes. Looked up with one hash and one comparison of contiguous bytes,
/// not seven fields of a shared `RequestInfo`; copied only for a new class.
fn class_key(info: &RequestInfo, key: &mut Vec<u8>) {
    // A non-resource request's path; for a resource request, the object's name and path are
    // left out.
    let path = if info.is_resource_request {
        ""
    } else {
        info.path.as_str()
    };
    key.clear();
    key.push(u8::from(info.is_resource_request));
    for field in [
        info.verb.as_str(),
        &info.api_group,
        &info.resource,
        &info.subresource,
        &info.namespace,
        path,
    ] {
        key.extend_from_slice(&field.len().to_le_bytes());
        key.extend_from_slice(field.as_bytes());
    }
}

type Targets = HashMap<Box<str>, usize, WordBuildHasher>;

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

    /// The attributes of `method` on `target`, as [`request_info::parse`] derives them; kept
    /// until the next call (a reference: no count of the shared attributes taken per request).
    pub(super) fn of(
        &mut self,
        method: &http::Method,
        target: &str,
    ) -> Result<&Derived, RequestInfoError> {
        let at = match self.by_method.iter().position(|(m, _)| m == method) {
            Some(at) => at,
            None => {
                self.by_method.push((method.clone(), Targets::default()));
                self.by_method.len() - 1
            }
        };
        if let Some(&place) = self.by_method[at].1.get(target) {
            return Ok(&self.kept[place]);
        }
        let info = request_info::parse(method.as_str(), target)?;
        if self.kept.len() >= Self::CAPACITY {
            for (_, targets) in &mut self.by_method {
                targets.clear();
            }
            self.classes.clear();
            self.kept.clear();
        }
        class_key(&info, &mut self.key);
        let class = match self.classes.get(&self.key[..]) {
            Some(class) => *class,
            None => {
                self.last_class += 1;
                self.classes.insert(self.key[..].into(), self.last_class);
                self.last_class
            }
        };
        let derived = Derived {
            class,
            info: Arc::new(info),
        };
        self.by_method[at].1.insert(target.into(), self.kept.len());
        self.kept.push(derived);
        Ok(&self.kept[self.kept.len() - 1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attributes_are_those_parse_derives_and_are_shared_per_method_and_target() {
        let mut memo = Attributes::default();
        let target = "/api/v1/namespaces/ns/pods?watch=true&labelSelector=app%3Dweb";
        let get = memo.of(&http::Method::GET, target).unwrap().clone();
        assert_eq!(*get.info, request_info::parse("GET", target).unwrap());
        let again = memo.of(&http::Method::GET, target).unwrap().clone();
        assert!(Arc::ptr_eq(&get.info, &again.info));
        assert_eq!(get.class, again.class);
        let delete = memo.of(&http::Method::DELETE, target).unwrap().clone();
        assert_ne!(delete.class, get.class);
        // Another pod's name, the same class; another namespace, another class.
        let other = memo
            .of(&http::Method::GET, "/api/v1/namespaces/ns/pods/web-2")
            .unwrap()
            .clone();
        let same = memo
            .of(
                &http::Method::GET,
                "/api/v1/namespaces/ns/pods/web-3?pretty=1",
            )
            .unwrap()
            .clone();
        let elsewhere = memo
            .of(&http::Method::GET, "/api/v1/namespaces/other/pods/web-2")
            .unwrap()
            .clone();
        assert_eq!(other.class, same.class);
        assert!(!Arc::ptr_eq(&other.info, &same.info));
        assert_ne!(other.class, elsewhere.class);
        // Non-resource requests: the path is what classification reads.
        let healthz = memo.of(&http::Method::GET, "/healthz").unwrap().clone();
        let livez = memo.of(&http::Method::GET, "/livez").unwrap().clone();
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
        assert_eq!(memo.kept.len(), 10);
        assert_eq!(memo.classes.len(), 1, "one class, whatever the pods' names");
        let kept: usize = memo.by_method.iter().map(|(_, t)| t.len()).sum();
        assert_eq!(kept, 10);
    }
}
