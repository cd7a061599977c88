//! Subscriptions whose bundles exist only as images in a real local registry (docker-registry,
//! started by the test): install and upgrade, an 8 MiB bundle, the sandbox, the run flags. The
//! failures are in `subscription_image_bundle_failures`.

use crate::image_registry::{self as registry, Registry};
use crate::subscription_support as support;

use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

use olm_rs::api::{InstallPlan, InstallPlanPhase, SubscriptionState};
use olm_rs::catalog::model::DeclarativeConfig;
use olm_rs::plan::BundleReference;
use olm_rs::reconcile::ControllerOptions;
use olm_rs::reconcile::bundle_images::BundleImageOptions;

/// The bundle image of widget `version`: its CSV, its CRD and a ConfigMap.
pub fn widget_layer(version: &str) -> Vec<u8> {
    registry::bundle_layer(
        "widget",
        "stable",
        &[
            (
                "widget.clusterserviceversion.yaml".into(),
                widget_csv(version),
            ),
            (
                "widgets.example.com.crd.yaml".into(),
                widget_crd(&[("v1", true)], "integer"),
            ),
            (
                "widget-defaults.configmap.yaml".into(),
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "widget-defaults"}, "data": {"size": "3"}}),
            ),
        ],
    )
}

/// `widget_catalog` with every bundle's manifests removed and its image in `registry` (tag
/// `v<version>`), as production catalogs are; channel `stable` ends at `last`.
pub fn image_catalog(registry: &Registry, last: &str) -> DeclarativeConfig {
    let mut catalog = widget_catalog();
    for channel in &mut catalog.channels {
        if let Some(end) = channel
            .entries
            .iter()
            .position(|e| e.name == format!("widget-operator.v{last}"))
        {
            channel.entries.truncate(end + 1);
        }
    }
    for bundle in &mut catalog.bundles {
        let version = bundle
            .name
            .trim_start_matches("widget-operator.v")
            .to_owned();
        bundle.objects.clear();
        bundle.image = format!("{}/widget-bundle:v{version}", registry.host());
    }
    catalog
}

pub struct ImageEnv {
    pub env: Env,
    pub registry: Registry,
    _dir: tempfile::TempDir,
}

/// An environment whose controller reaches `registry` over plain HTTP (registries.conf), with
/// the catalog `community` of [`image_catalog`] (stable up to `last`) and the OperatorGroup
/// annotations given.
pub async fn image_env(registry: Registry, last: &str, og_annotations: Value) -> ImageEnv {
    image_env_with_policy(registry, last, og_annotations, Default::default()).await
}

/// [`image_env`] whose pulls obey `image_policy` (docs/image-signatures.md).
pub async fn image_env_with_policy(
    registry: Registry,
    last: &str,
    og_annotations: Value,
    image_policy: std::sync::Arc<olm_rs::image_policy::ImagePolicy>,
) -> ImageEnv {
    let dir = tempfile::tempdir().unwrap();
    let options = ControllerOptions {
        bundle_images: BundleImageOptions {
            registries_config: Some(registry.registries_conf(dir.path())),
            cache_dir: Some(dir.path().join("cache")),
            image_policy,
            ..BundleImageOptions::default()
        },
        ..ControllerOptions::default()
    };
    let mut env = Env::with_options(options).await;
    env.add_catalog("community", image_catalog(&registry, last));
    if og_annotations.is_object() {
        Api::<olm_rs::api::OperatorGroup>::namespaced(env.client(), NS)
            .patch(
                "og",
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"annotations": og_annotations}})),
            )
            .await
            .unwrap();
    }
    ImageEnv {
        env,
        registry,
        _dir: dir,
    }
}

pub async fn only_plan(env: &Env) -> InstallPlan {
    let plans = env.plans().await;
    assert_eq!(plans.len(), 1, "one plan");
    plans.into_iter().next().unwrap()
}

pub fn lookup_condition(plan: &InstallPlan) -> Option<(String, String, String)> {
    let lookups = plan.status.as_ref()?.bundle_lookups.as_ref()?;
    let c = lookups[0].conditions.as_ref()?.first()?;
    Some((
        c.type_.as_str().to_owned(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

pub async fn nothing_applied(env: &Env) {
    assert!(
        env.names(
            "operators.coreos.com/v1alpha1",
            "ClusterServiceVersion",
            "clusterserviceversions",
            true
        )
        .await
        .is_empty(),
        "no CSV"
    );
    assert!(
        env.get(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            "widgets.example.com",
            false
        )
        .await
        .is_none(),
        "no CRD"
    );
}

async fn a_catalog_of_image_bundles_installs_then_upgrades() {
    let registry = Registry::start(false);
    for version in ["1.0.0", "1.1.0"] {
        registry
            .push(
                "widget-bundle",
                &format!("v{version}"),
                widget_layer(version),
            )
            .await;
    }
    let mut t = image_env(registry, "1.1.0", Value::Null).await;
    let env = &t.env;
    env.subscribe_widget(json!({"startingCSV": "widget-operator.v1.0.0"}))
        .await;
    let created = env.sync_subscriptions().await.created_plans;
    let plan = env.plan(&created[0]).await;
    let (kind, reason, _) = lookup_condition(&plan).expect("a pending lookup");
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("BundleLookupPending", "PullNotStarted")
    );
    assert_eq!(
        condition(&env.subscription("widget").await, "BundleUnpacking")
            .unwrap()
            .reason
            .as_deref(),
        Some("UnpackingInProgress")
    );

    // One plan sync pulls the image and appends its steps, each a reference by digest.
    env.sync_plan(&created[0]).await;
    let plan = env.plan(&created[0]).await;
    let status = plan.status.clone().unwrap();
    assert!(status.bundle_lookups.is_none(), "the lookup is removed");
    let steps = status.plan.unwrap();
    let kinds: Vec<&str> = steps.iter().map(|s| s.resource.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "ClusterServiceVersion",
            "CustomResourceDefinition",
            "ConfigMap",
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "ClusterRole",
            "ClusterRoleBinding"
        ],
        "§7.2 order"
    );
    for step in &steps {
        let reference = BundleReference::of_manifest(step.resource.manifest.as_deref().unwrap())
            .expect("image-bundle steps hold a reference");
        assert!(reference.digest.starts_with("sha256:"), "{reference:?}");
    }

    // The executor takes the objects from the puller's cache: no registry needed any more.
    t.registry.stop();
    let env = &t.env;
    let plan = env.run_plan(&created[0]).await;
    assert_eq!(plan.status.unwrap().phase, InstallPlanPhase::Complete);
    assert!(
        env.get(
            "operators.coreos.com/v1alpha1",
            "ClusterServiceVersion",
            "clusterserviceversions",
            "widget-operator.v1.0.0",
            true
        )
        .await
        .is_some()
    );
    t.registry.restart();
    let env = &t.env;

    env.converge().await;
    let sub = env.subscription("widget").await;
    let status = sub.status.unwrap();
    assert_eq!(status.state, Some(SubscriptionState::AtLatestKnown));
    assert_eq!(
        status.installed_csv.as_deref(),
        Some("widget-operator.v1.1.0"),
        "upgraded"
    );
    assert!(
        status
            .conditions
            .iter()
            .flatten()
            .all(|c| c.type_.as_str() != "BundleUnpacking"
                && c.type_.as_str() != "BundleUnpackFailed")
    );
    let csv = env
        .get(
            "operators.coreos.com/v1alpha1",
            "ClusterServiceVersion",
            "clusterserviceversions",
            "widget-operator.v1.1.0",
            true,
        )
        .await
        .expect("the upgraded CSV");
    assert_eq!(csv["spec"]["replaces"], "widget-operator.v1.0.0");
    assert!(
        env.get("v1", "ConfigMap", "configmaps", "widget-defaults", true)
            .await
            .is_some()
    );
}

/// A CRD of about `size` bytes (its schema's description is padding).
fn big_crd(index: usize, size: usize) -> Value {
    let plural = format!("bigs{index}");
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": format!("Big{index}"), "plural": plural, "singular": format!("big{index}"), "listKind": format!("Big{index}List")},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                     "type": "object", "description": "x".repeat(size)}}}]}
    })
}

async fn a_bundle_with_8_mib_of_crds_installs_and_the_plan_stays_small() {
    let registry = Registry::start(false);
    let mut manifests = vec![(
        "widget.clusterserviceversion.yaml".to_owned(),
        widget_csv("1.0.0"),
    )];
    // Six CRDs of 1.4 MB: each under the API server's 1.5 MiB object limit, 8.4 MB in all.
    for i in 0..6 {
        manifests.push((format!("big{i}.crd.yaml"), big_crd(i, 1_400_000)));
    }
    manifests.push((
        "widgets.example.com.crd.yaml".into(),
        widget_crd(&[("v1", true)], "integer"),
    ));
    registry
        .push(
            "widget-bundle",
            "v1.0.0",
            registry::bundle_layer("widget", "stable", &manifests),
        )
        .await;
    let t = image_env(registry, "1.0.0", Value::Null).await;
    let env = &t.env;
    env.subscribe_widget(json!({"startingCSV": "widget-operator.v1.0.0"}))
        .await;
    env.converge().await;
    let plan = only_plan(env).await;
    assert_eq!(
        plan.status.as_ref().unwrap().phase,
        InstallPlanPhase::Complete
    );
    let stored = serde_json::to_vec(&plan).unwrap().len();
    assert!(
        stored < 64 * 1024,
        "the plan holds references, not the bundle: {stored} bytes"
    );
    for i in 0..6 {
        let crd = env
            .get(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                "customresourcedefinitions",
                &format!("bigs{i}.example.com"),
                false,
            )
            .await
            .expect("the big CRD is installed");
        assert_eq!(
            crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"]
                .as_str()
                .map(str::len),
            Some(1_400_000)
        );
    }
    assert_eq!(
        env.subscription("widget")
            .await
            .status
            .unwrap()
            .installed_csv
            .as_deref(),
        Some("widget-operator.v1.0.0")
    );
}

async fn the_sandbox_installs_from_a_catalog_whose_bundles_are_images() {
    let registry = Registry::start(false);
    let image = registry
        .push("widget-bundle", "v1.0.0", widget_layer("1.0.0"))
        .await;
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog");
    std::fs::create_dir(&catalog).unwrap();
    let documents = [
        json!({"schema": "olm.package", "name": "widget", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "widget", "name": "stable",
               "entries": [{"name": "widget-operator.v1.0.0"}]}),
        json!({"schema": "olm.bundle", "name": "widget-operator.v1.0.0", "package": "widget", "image": image,
               "properties": [{"type": "olm.package", "value": {"packageName": "widget", "version": "1.0.0"}},
                              {"type": "olm.gvk", "value": {"group": "example.com", "kind": "Widget", "version": "v1"}}]}),
    ];
    let text: Vec<String> = documents.iter().map(Value::to_string).collect();
    std::fs::write(catalog.join("catalog.json"), text.join("\n")).unwrap();
    let conf = registry.registries_conf(dir.path());
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_olm-rs"))
        .arg("sandbox")
        .arg("--catalog")
        .arg(&catalog)
        .arg("--registries-config")
        .arg(&conf)
        .args(["--exit-when-settled", "--timeout", "60s"])
        .kill_on_drop(true)
        .output()
        .await
        .expect("olm-rs runs");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.lines().any(|l| l
            .starts_with("settled: widget-operator.v1.0.0 Succeeded, Subscription AtLatestKnown")),
        "{text}"
    );
}

fn bad_bundle_image_flags_stop_olm_rs_run_before_it_connects() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_olm-rs"))
            .arg("run")
            .args(args)
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .output()
            .expect("olm-rs runs");
        assert!(!out.status.success(), "{args:?} accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run(&["--pull-secret", "quay-pull"]);
    assert!(err.contains("NAMESPACE/NAME"), "{err}");
    let err = run(&["--bundle-unpack-timeout", "soon"]);
    assert!(err.contains("invalid duration"), "{err}");
    let err = run(&["--registries-config", "/nonexistent/registries.conf"]);
    assert!(err.contains("/nonexistent/registries.conf"), "{err}");
    let err = run(&["--registry-ca-file", "/nonexistent/ca.pem"]);
    assert!(err.contains("/nonexistent/ca.pem"), "{err}");
}

crate::trials! {
    current a_catalog_of_image_bundles_installs_then_upgrades,
    current a_bundle_with_8_mib_of_crds_installs_and_the_plan_stays_small,
    current the_sandbox_installs_from_a_catalog_whose_bundles_are_images,
    sync bad_bundle_image_flags_stop_olm_rs_run_before_it_connects,
}
