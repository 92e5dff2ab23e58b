//! kube-apf-proxy: Kubernetes API Priority and Fairness enforced by a reverse proxy in front of
//! kube-apiserver.
//!
//! The request path is `server` → `auth` → `request_info` → `classify` → `fairqueue` → `proxy`.
//! `request_info`, `classify` and the queue core in `fairqueue` are sans-I/O: they take time as a
//! value and never touch a socket, so they are tested without a runtime.

pub mod admission;
pub mod app;
pub mod auth;
pub mod body;
pub mod classify;
pub mod cli;
pub mod config;
pub mod config_source;
pub mod debug_dump;
pub mod duration;
pub mod fairqueue;
#[doc(hidden)]
pub mod fuzzing;
pub mod lint;
pub mod metrics;
pub mod proxy;
pub mod request_info;
pub mod server;
pub mod shuffle_sharding;
pub mod simulate;
pub mod status;
pub mod upstream;
