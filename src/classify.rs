//! Classification: which FlowSchema a request matches, its priority level and its flow.
//!
//! Mirrors `k8s.io/apiserver/pkg/util/flowcontrol/rule.go` and the classification part of
//! `apf_controller.go`.
