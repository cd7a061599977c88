//! The integration tests that need more than the Rust toolchain: the shared reference data
//! (`../shared` or `$OLM_RS_SHARED`), Debian's docker-registry, busybox-static or skopeo,
//! kubectl, or root. README, "What `cargo test` needs", lists them.
//!
//! A test calls `common::skip` (tests/real_control_plane/skip.rs) where it finds something
//! missing; this runner (`harness = false`, libtest's command line and output through
//! libtest-mimic) reports it `ignored, <reason>` and counts it in the summary — never `ok`. With
//! `CI` set a missing thing fails the test instead. The runner closes with the plain line
//! `integration_needs: N passed, N failed, N skipped`, then the reasons.
//!
//! Each module lists its tests at its end with `trials!`: a test function left out of it is
//! unused (a warning that fails the lint), and a `#[test]` attribute here would never run, which
//! the check `no_libtest_attributes` refuses.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or bench: a panic is the report

// Support shared with tests/integration: the same files.
#[allow(dead_code)]
#[path = "../integration/apiserver_common/mod.rs"]
mod apiserver_common;
#[allow(dead_code)]
#[path = "../integration/catalog_source_common/mod.rs"]
mod catalog_source_common;
#[path = "../integration/common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../integration/image_registry/mod.rs"]
mod image_registry;
// The images the real node runs (tests/real_control_plane/images.rs), tested in testop_images.
#[allow(dead_code)]
#[path = "../real_control_plane/images.rs"]
mod images;
#[allow(dead_code)]
#[path = "../integration/package_manifests_expected.rs"]
mod package_manifests_expected;
#[path = "../integration/registry_support/mod.rs"]
mod registry_support;
mod signature_support;
#[allow(dead_code)]
#[path = "../integration/subscription_support.rs"]
mod subscription_support;

mod runner;

mod apiserver_catalog_crds;
mod apiserver_kubectl;
mod bundle_image_pull;
mod catalog_cli;
mod catalog_real_data;
mod catalog_source_address;
mod catalog_source_image;
mod catalog_yaml_fast;
mod catimg_fallback;
mod catimg_in_process;
mod fidelity;
mod image_signatures;
mod package_manifests_sandbox;
mod registry_rpc_agreement;
mod registry_server;
mod resolve_cli;
mod resolve_dependencies_real;
mod subscription_image_bundle_failures;
mod subscription_image_bundles;
mod subscription_image_bundles_running;
mod subscription_upgrade;
mod testop_images;

fn main() -> std::process::ExitCode {
    runner::run(
        [
            runner::own_checks(),
            apiserver_catalog_crds::trials(),
            apiserver_kubectl::trials(),
            bundle_image_pull::trials(),
            catalog_cli::trials(),
            catalog_real_data::trials(),
            catalog_source_address::trials(),
            catalog_source_image::trials(),
            catalog_yaml_fast::trials(),
            catimg_fallback::trials(),
            catimg_in_process::trials(),
            fidelity::trials(),
            image_signatures::trials(),
            package_manifests_sandbox::trials(),
            registry_rpc_agreement::trials(),
            registry_server::trials(),
            resolve_cli::trials(),
            resolve_dependencies_real::trials(),
            subscription_image_bundle_failures::trials(),
            subscription_image_bundles::trials(),
            subscription_image_bundles_running::trials(),
            subscription_upgrade::trials(),
            testop_images::trials(),
        ]
        .into_iter()
        .flatten()
        .collect(),
    )
}
