//! `--coordination-namespace`: replicas that share one budget. The budget
//! (`--max-requests-inflight` + `--max-mutating-requests-inflight`) is the total for every
//! replica; each keeps a `coordination.k8s.io/v1` Lease with its share and seat demand, watches
//! the others', and sets its own server concurrency limit to its share.
//!
//! - [`split`]: how a budget is split among live replicas (pure);
//! - [`protocol`]: one replica's side of the protocol that keeps the shares within the budget
//!   (pure, time as a value);
//!
//! `docs/scale-out.md` describes the protocol and its worst cases.

pub mod protocol;
pub mod split;
