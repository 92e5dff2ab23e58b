//! `simulate`: replay a recorded workload through flow control in virtual time.
//!
//! [`trace`] reads the workload (audit events, the proxy's access log, trace lines), [`engine`]
//! drives it through the classifier, the work estimator and the queue sets that enforce — on a
//! paused tokio clock — and [`record`] counts what happened.

pub mod engine;
pub mod html;
pub mod record;
pub mod trace;

pub use engine::{simulate, SimError, SimOptions};
pub use record::SimReport;
