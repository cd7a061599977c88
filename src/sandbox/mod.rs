//! The in-process Kubernetes API server used by tests and `olm-rs sandbox`.

pub mod patch;
