//! Fair queuing: what happens to a classified request before it may go upstream.
//!
//! Mirrors `k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing` and the limit computations of
//! `apf_controller.go`. The queue set and the allocations are sans-I/O (time is passed in); the
//! async admission wraps them for tokio.

pub mod shuffle_sharding;
