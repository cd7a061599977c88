//! Every integration test that needs only the Rust toolchain, in one binary: one link instead of
//! fifty (debug test binaries are about 120 MB each, and linking them was much of CI's time and
//! disk). Each module is the file of the same name; `cargo test --test integration <module>` runs
//! one of them. The tests that need more (the shared reference data, docker-registry, busybox,
//! skopeo, kubectl, root) are in tests/integration_needs/, whose runner reports each one that
//! cannot run here as ignored with the reason.
//!
//! The e2e journeys on the embedded API stay in their own target (tests/e2e_embedded.rs): their
//! modules are shared with e2e/main.rs and address each other from the crate root.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or bench: a panic is the report

// Support shared by several test modules.
mod apiserver_common;
#[allow(dead_code)] // shared with tests/integration_needs, which uses the rest
mod catalog_source_common;
mod common;
mod csv_support;
#[path = "../injected_faults/mod.rs"]
mod injected_faults;
mod og_support;
mod subscription_support;

mod apiserver_crd;
mod apiserver_crud;
mod apiserver_deletion;
mod apiserver_list;
mod apiserver_patch;
mod apiserver_simulator;
mod apiserver_watch;
mod architecture_doc;
mod bundle_unpack_cli;
mod catalog_bad_input;
mod catalog_source_configmap;
mod certs_issue;
mod certs_olm_hash_api;
mod certs_rotation;
mod copied_csv_lifecycle;
mod crds_up_to_date;
mod csv_certs;
mod csv_install;
mod csv_operator_condition;
mod csv_requirements;
mod csv_upgrade;
mod csv_webhook_validation;
mod csv_with_operator_groups;
mod effects_answered;
mod effects_noted;
mod examples_catalog;
/// The fault suite's history check (tests/e2e_faults/audit.rs), its table tests run here: the
/// fault suite itself runs without a test harness.
#[allow(dead_code)]
#[path = "../e2e_faults/audit.rs"]
mod fault_audit;
mod install_plan_controller;
mod install_plan_crd_updates;
mod install_plan_execution;
mod install_plan_lost_writes;
mod leader_election;
mod lost_writes;
mod manifests;
mod metrics_endpoint;
mod module_layers;
mod operator_api;
mod operator_api_components;
mod operator_group_rbac;
mod operator_group_sync;
mod package_manifests_fresh;
mod package_manifests_serving_pod;
mod registry_bad_input;
mod run_preflight;
mod samples;
mod sandbox_cli;
mod shared_watches;
mod subscription_co_upgrade;
mod subscription_controller;
mod subscription_dependencies;
mod subscription_failures;
mod subscription_faults;
mod subscription_install;
mod subscription_one_decision;
mod subscription_rollback;
mod subscription_stale_store;
mod subscription_versions;
mod subscription_waiting_plan;
mod testop_catalog;
mod testop_install;
mod testop_operator;
mod typed_errors;
mod watch_expiry;
mod write_path;
