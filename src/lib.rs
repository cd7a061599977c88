//! olm-rs: Operator Lifecycle Manager (OLM v0) re-built in Rust.
//!
//! The pure core (`api`, `catalog`, `resolve`, `plan`, `csv`, `certs`, `olm_hash`) never talks
//! to a cluster; the thin shell (`reconcile`, `controller`, `registry`, `sandbox`) reads, calls
//! the core and writes. docs/architecture.md shows how they fit.

// The library needs no unsafe code; the one `mallopt` call (memory tuning) lives in main.rs.
#![forbid(unsafe_code)]

pub mod access_review;
pub mod api;
pub mod backoff;
pub mod bundle_unpack;
pub mod catalog;
pub mod catalog_cache;
pub mod catalog_source;
pub mod certs;
pub mod controller;
pub mod csv;
pub mod dry_run;
pub mod error_chain;
pub mod go_duration;
pub mod health;
pub mod image_policy;
pub mod json_diff;
pub mod k8s;
pub mod leader_election;
pub mod metrics;
pub mod oci;
pub mod olm_hash;
pub mod operator_api;
pub mod operator_group;
pub mod package_manifest;
pub mod package_server;
pub mod plan;
pub mod quantity;
pub mod reconcile;
pub mod registry;
pub mod resolve;
// The embedded API server and `olm-rs sandbox`: on by default (tests and `cargo run -- sandbox`
// need them); the container image is built without them to stay small.
/// The embedded API server, its own crate (`crates/sandbox`); re-exported so tests and tools
/// keep writing `olm_rs::sandbox::ApiServer`.
#[cfg(feature = "sandbox")]
pub use olm_rs_sandbox as sandbox;
#[cfg(feature = "sandbox")]
pub mod sandbox_run;
pub mod startup;
pub mod telemetry;
