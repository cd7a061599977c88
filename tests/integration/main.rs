//! Every integration test in one binary: one link instead of fifty (debug test binaries are
//! about 120 MB each, and linking them was much of CI's time and disk). Each module is the file
//! of the same name; `cargo test --test integration <module>` runs one of them.
//!
//! The e2e journeys on the embedded API stay in their own target (tests/e2e_embedded.rs): their
//! modules are shared with e2e/main.rs and address each other from the crate root.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or bench: a panic is the report

// Support shared by several test modules.
mod apiserver_common;
mod catalog_source_common;
mod common;
// The images the real node runs (tests/real_control_plane/images.rs), tested in testop_images.
mod csv_support;
mod image_registry;
#[allow(dead_code)]
#[path = "../real_control_plane/images.rs"]
mod images;
mod og_support;
mod registry_support;
mod subscription_support;

mod apiserver_catalog_crds;
mod apiserver_crd;
mod apiserver_crud;
mod apiserver_deletion;
mod apiserver_kubectl;
mod apiserver_list;
mod apiserver_patch;
mod apiserver_simulator;
mod apiserver_watch;
mod bundle_image_pull;
mod catalog_bad_input;
mod catalog_cli;
mod catalog_real_data;
mod catalog_source_address;
mod catalog_source_configmap;
mod catalog_source_image;
mod catalog_yaml_fast;
mod catimg_in_process;
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
mod examples_catalog;
mod fidelity;
mod install_plan_controller;
mod install_plan_crd_updates;
mod install_plan_execution;
mod leader_election;
mod manifests;
mod metrics_endpoint;
mod operator_api;
mod operator_group_rbac;
mod operator_group_sync;
mod package_manifests_expected;
mod package_manifests_sandbox;
mod package_manifests_serving_pod;
mod registry_bad_input;
mod registry_rpc_agreement;
mod registry_server;
mod resolve_cli;
mod resolve_dependencies_real;
mod run_preflight;
mod samples;
mod sandbox_cli;
mod shared_watches;
mod subscription_controller;
mod subscription_dependencies;
mod subscription_failures;
mod subscription_image_bundle_failures;
mod subscription_image_bundles;
mod subscription_image_bundles_running;
mod subscription_install;
mod subscription_stale_store;
mod subscription_upgrade;
mod subscription_waiting_plan;
mod testop_catalog;
mod testop_images;
mod testop_install;
mod testop_operator;
mod typed_errors;
mod write_path;
