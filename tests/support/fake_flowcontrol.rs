//! The fake apiserver's `flowcontrol.apiserver.k8s.io/v1` collections, for the proxy's
//! `--config-source cluster`: list with a resource version, watch from one (events pushed to
//! every open watch as objects change, and replayed to a watch that starts from an older
//! resource version), get, create (what `kubectl apply` sends for a new
//! object), replace and delete. The test drives it through [`FlowControlStore`] methods: change
//! objects, expire resource versions (410), end watches, fail lists.

use parking_lot::Mutex;
use std::collections::BTreeMap;

use bytes::Bytes;
use http::StatusCode;
use tokio::sync::mpsc;

/// The group-version path prefix.
pub const PREFIX: &str = "/apis/flowcontrol.apiserver.k8s.io/v1";

/// `(status, body)`, or an event stream for a watch.
pub enum Answer {
    /// A JSON answer.
    Json(StatusCode, serde_json::Value),
    /// A watch: newline-terminated JSON events.
    Watch(mpsc::UnboundedReceiver<Bytes>),
}

#[derive(Default)]
struct Inner {
    rv: u64,
    /// Watches started below this resource version get 410 (as after etcd compaction).
    oldest: u64,
    objects: BTreeMap<(String, String), serde_json::Value>,
    watchers: Vec<(String, mpsc::UnboundedSender<Bytes>)>,
    /// Every event so far, with its resource version: a watch from a version replays what came
    /// after it, as the apiserver's watch cache does.
    history: Vec<(u64, String, Bytes)>,
    lists_fail: bool,
    lists: usize,
    watches: usize,
}

/// The objects and the open watches.
#[derive(Default)]
pub struct FlowControlStore {
    inner: Mutex<Inner>,
}

fn kind_of(resource: &str) -> Option<&'static str> {
    match resource {
        "flowschemas" => Some("FlowSchema"),
        "prioritylevelconfigurations" => Some("PriorityLevelConfiguration"),
        _ => None,
    }
}

fn event(kind: &str, object: &serde_json::Value) -> Bytes {
    Bytes::from(format!(
        "{}\n",
        serde_json::json!({"type": kind, "object": object})
    ))
}

fn status(code: u16, reason: &str, message: &str) -> serde_json::Value {
    serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code})
}

impl FlowControlStore {
    fn lock(&self) -> parking_lot::MutexGuard<'_, Inner> {
        self.inner.lock()
    }

    /// Creates or replaces `object` (a FlowSchema or PriorityLevelConfiguration as JSON) and tells
    /// the watches (ADDED or MODIFIED).
    pub fn put(&self, mut object: serde_json::Value) -> serde_json::Value {
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let resource = match kind.as_str() {
            "FlowSchema" => "flowschemas",
            _ => "prioritylevelconfigurations",
        };
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut inner = self.lock();
        inner.rv += 1;
        object["apiVersion"] = "flowcontrol.apiserver.k8s.io/v1".into();
        object["metadata"]["resourceVersion"] = inner.rv.to_string().into();
        object["metadata"]["uid"] = format!("uid-{name}").into();
        let key = (resource.to_string(), name);
        let type_ = if inner.objects.contains_key(&key) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        inner.objects.insert(key, object.clone());
        inner.notify(resource, event(type_, &object));
        object
    }

    /// Deletes an object and tells the watches.
    pub fn delete(&self, resource: &str, name: &str) {
        let mut inner = self.lock();
        inner.rv += 1;
        let key = (resource.to_string(), name.to_string());
        if let Some(mut object) = inner.objects.remove(&key) {
            object["metadata"]["resourceVersion"] = inner.rv.to_string().into();
            inner.notify(resource, event("DELETED", &object));
        }
    }

    /// Every resource version so far is compacted: open watches get an ERROR event with 410 and
    /// end; watches from an old version get the same.
    pub fn expire(&self) {
        let mut inner = self.lock();
        inner.rv += 1;
        inner.oldest = inner.rv;
        let gone = event("ERROR", &status(410, "Expired", "too old resource version"));
        for (_, watcher) in inner.watchers.drain(..) {
            let _ = watcher.send(gone.clone());
        }
    }

    /// Ends every open watch (as the apiserver does at its timeout or on restart).
    pub fn end_watches(&self) {
        self.lock().watchers.clear();
    }

    /// Makes lists fail with 503 (`true`) or answer again.
    pub fn fail_lists(&self, fail: bool) {
        self.lock().lists_fail = fail;
    }

    /// `(lists, watches)` answered so far.
    pub fn requests(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.lists, inner.watches)
    }

    /// Watches open now.
    pub fn open_watches(&self) -> usize {
        let mut inner = self.lock();
        inner.watchers.retain(|(_, w)| !w.is_closed());
        inner.watchers.len()
    }

    /// Answers `method` on `resource` (and `name`), with the request's query and body.
    pub fn answer(
        &self,
        method: &http::Method,
        resource: &str,
        name: Option<&str>,
        query: &str,
        body: &[u8],
    ) -> Answer {
        let Some(kind) = kind_of(resource) else {
            return Answer::Json(
                StatusCode::NOT_FOUND,
                status(404, "NotFound", "no such resource"),
            );
        };
        let param = |key: &str| {
            query
                .split('&')
                .find_map(|p| p.strip_prefix(key)?.strip_prefix('='))
                .map(str::to_string)
        };
        let watch = matches!(param("watch").as_deref(), Some("1" | "true"));
        match (method.as_str(), name) {
            ("GET", None) if watch => self.watch(resource, param("resourceVersion")),
            ("GET", None) => self.list(resource, kind),
            ("GET", Some(name)) => {
                let key = (resource.to_string(), name.to_string());
                match self.lock().objects.get(&key) {
                    Some(object) => Answer::Json(StatusCode::OK, object.clone()),
                    None => Answer::Json(
                        StatusCode::NOT_FOUND,
                        status(404, "NotFound", &format!("{resource} \"{name}\" not found")),
                    ),
                }
            }
            ("POST", None) | ("PUT", Some(_)) => {
                let Ok(object) = serde_json::from_slice::<serde_json::Value>(body) else {
                    return Answer::Json(
                        StatusCode::BAD_REQUEST,
                        status(400, "BadRequest", "not JSON"),
                    );
                };
                Answer::Json(StatusCode::CREATED, self.put(object))
            }
            ("DELETE", Some(name)) => {
                self.delete(resource, name);
                Answer::Json(StatusCode::OK, status(200, "", ""))
            }
            _ => Answer::Json(
                StatusCode::METHOD_NOT_ALLOWED,
                status(405, "MethodNotAllowed", "not supported by the fake"),
            ),
        }
    }

    fn list(&self, resource: &str, kind: &str) -> Answer {
        let mut inner = self.lock();
        if inner.lists_fail {
            return Answer::Json(
                StatusCode::SERVICE_UNAVAILABLE,
                status(503, "ServiceUnavailable", "lists fail"),
            );
        }
        inner.lists += 1;
        let items: Vec<_> = inner
            .objects
            .iter()
            .filter(|((r, _), _)| r == resource)
            .map(|(_, o)| o.clone())
            .collect();
        Answer::Json(
            StatusCode::OK,
            serde_json::json!({"kind": format!("{kind}List"),
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                "metadata": {"resourceVersion": inner.rv.to_string()}, "items": items}),
        )
    }

    fn watch(&self, resource: &str, from: Option<String>) -> Answer {
        let mut inner = self.lock();
        inner.watches += 1;
        let (tx, rx) = mpsc::unbounded_channel();
        let from: u64 = from.and_then(|v| v.parse().ok()).unwrap_or(0);
        if from < inner.oldest {
            let _ = tx.send(event(
                "ERROR",
                &status(410, "Expired", "too old resource version"),
            ));
            return Answer::Watch(rx);
        }
        for (_, _, event) in inner
            .history
            .iter()
            .filter(|(rv, r, _)| *rv > from && r == resource)
        {
            let _ = tx.send(event.clone());
        }
        inner.watchers.push((resource.to_string(), tx));
        Answer::Watch(rx)
    }
}

impl Inner {
    fn notify(&mut self, resource: &str, event: Bytes) {
        self.watchers
            .retain(|(r, w)| r != resource || w.send(event.clone()).is_ok());
        self.history.push((self.rv, resource.to_string(), event));
    }
}
