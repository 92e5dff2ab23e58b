//! `simulate`: replay a recorded workload, or run a synthetic one, through flow control in
//! virtual time.
//!
//! [`trace`] reads a recorded workload (audit events, the proxy's access log, trace lines),
//! [`engine`] drives it through the classifier, the work estimator and the queue sets that
//! enforce — on a paused tokio clock — and [`record`] counts what happened. [`workload`] reads
//! synthetic closed-loop clients, which [`closed_loop`] runs over the same engine.
//! [`replay_trace`] returns a trace's reports whole (with the lines skipped and when the trace
//! started), and [`report`] holds what is reported and its text, JSON and HTML renderings.

mod attributes;
mod classifications;
pub mod closed_loop;
pub mod engine;
mod feed;
pub mod object_counts;
#[doc(hidden)]
pub mod queueset_scenario;
pub mod record;
mod replay;
pub mod report;
pub mod trace;
pub mod workload;

pub use closed_loop::simulate_workload;
pub use engine::{simulate, simulate_on_this_thread, SimError, SimOptions};
#[cfg(feature = "fuzzing")]
pub(crate) use feed::fed_alike;
pub use replay::{replay_trace, ReplayError, Replayed};
pub use report::SimReport;
