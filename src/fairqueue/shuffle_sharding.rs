//! Shuffle sharding: the hand of queues a flow is dealt.
//!
//! Mirrors `k8s.io/apiserver/pkg/util/shufflesharding/shufflesharding.go`.
