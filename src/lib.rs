//! kube-apf-proxy: Kubernetes API Priority and Fairness enforced by a reverse proxy in front of
//! kube-apiserver.
//!
//! The request path is `server` → `auth` → `request_info` → `classify` → `fairqueue` → `proxy`
//! → `upstream`. `request_info`, `classify` and the queue core in `fairqueue` are sans-I/O: they
//! take time as a value and never touch a socket, so they are tested without a runtime.
//!
//! Imports run one way, down (a room never imports one above it; where it must call up, it takes
//! a trait or a closure from its caller):
//! - the binary and `cli` (thin shells over the rooms below, writing to standard output; the
//!   flags, with their one mapping onto the rooms' plain configs: no room below knows clap);
//! - `app`: the assembly of a running proxy (each room's config, configuration, reloads, admin
//!   routes);
//! - the features: `proxy` (the request pipeline and the one error-to-response function),
//!   `admission` (the webhook), `simulate` (virtual-time replay), `coordination` (replicas that
//!   share one budget through Leases; it reads watch streams with `config_source`'s decoder),
//!   `config_source` (the cluster as configuration); then `metrics`, the registry they all
//!   report to;
//! - the core: `lint` (analysis, and described requests judged), `fairqueue` (queue sets, limits,
//!   borrowing, work estimation, level queues, shadows), `classify`;
//! - the ground: `config`, `request_info`, `auth`, `server`, `upstream`;
//! - leaves every room may use: `backoff`, `body`, `causes`, `status`, `debug_dump`, `duration`,
//!   `file_watch`, `read_tap`, `shuffle_sharding`, `yaml`.

pub mod admission;
pub mod app;
pub mod auth;
pub mod backoff;
pub mod body;
pub mod causes;
pub mod classify;
pub mod cli;
pub mod config;
pub mod config_source;
pub mod coordination;
pub mod debug_dump;
pub mod duration;
pub mod fairqueue;
pub mod file_watch;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod lint;
pub mod metrics;
pub mod proxy;
pub mod read_tap;
pub mod request_info;
pub mod server;
pub mod shuffle_sharding;
pub mod simulate;
pub mod status;
pub mod upstream;
pub mod yaml;
