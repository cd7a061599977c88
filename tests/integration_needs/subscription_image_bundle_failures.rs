//! Bundle-image failures through the embedded API and a real registry: missing tag, wrong
//! credentials, registry down, malicious layer — each ends in its plain-words condition with
//! nothing applied, and recovers once fixed where it can; one bad bundle fails only the
//! Subscriptions that need it.

use crate::image_registry::{self as registry, RawEntry, Registry};
use crate::subscription_image_bundles::{
    image_env, image_env_with_policy, lookup_condition, nothing_applied, only_plan, widget_layer,
};
use crate::subscription_support as support;

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use support::*;

use olm_rs::api::InstallPlanPhase;

async fn a_missing_tag_fails_in_plain_words_then_installs_once_pushed() {
    let registry = Registry::start(false);
    let mut t = image_env(
        registry,
        "1.0.0",
        json!({"operatorframework.io/bundle-unpack-min-retry-interval": "30s"}),
    )
    .await;
    t.env.add_catalog("gadgets", gadget_catalog());
    let env = &t.env;
    env.subscribe_widget(json!({"startingCSV": "widget-operator.v1.0.0", "channel": "stable"}))
        .await;
    let created = env.sync_subscriptions().await.created_plans;
    let name = created[0].clone();
    env.sync_plan(&name).await;
    let (kind, reason, message) = lookup_condition(&env.plan(&name).await).unwrap();
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("BundleLookupFailed", "ImageNotFound")
    );
    assert!(message.contains("widget-bundle:v1.0.0"), "{message}");
    env.sync_subscriptions().await;
    let sub = env.subscription("widget").await;
    let failed = condition(&sub, "BundleUnpackFailed").expect("BundleUnpackFailed");
    assert_eq!(failed.reason.as_deref(), Some("BundleUnpackFailed"));
    assert!(
        failed
            .message
            .as_deref()
            .unwrap()
            .starts_with("Bundle unpacking failed - ImageNotFound: "),
        "{failed:?}"
    );
    assert!(condition(&sub, "BundleUnpacking").is_none());
    nothing_applied(env).await;

    // The bad bundle fails only the Subscription that needs it.
    env.subscribe("gadget", "gadget", "gadgets", json!({"channel": "stable"}))
        .await;
    let gadget_plan = env.sync_subscriptions().await.created_plans;
    assert_eq!(gadget_plan.len(), 1);
    assert_eq!(
        env.run_plan(&gadget_plan[0]).await.status.unwrap().phase,
        InstallPlanPhase::Complete
    );
    env.sync_subscriptions().await;
    let gadget = env.subscription("gadget").await;
    assert_eq!(
        gadget.status.as_ref().unwrap().installed_csv.as_deref(),
        Some("gadget.v1.0.0")
    );
    assert!(condition(&gadget, "BundleUnpackFailed").is_none());
    assert!(condition(&env.subscription("widget").await, "BundleUnpackFailed").is_some());

    t.registry
        .push("widget-bundle", "v1.0.0", widget_layer("1.0.0"))
        .await;
    env.sync_plan(&name).await;
    assert!(
        lookup_condition(&env.plan(&name).await).is_some(),
        "not before the retry interval"
    );
    env.advance(31);
    env.sync_plan(&name).await;
    assert!(
        env.plan(&name)
            .await
            .status
            .unwrap()
            .bundle_lookups
            .is_none()
    );
    env.converge().await;
    let sub = env.subscription("widget").await;
    assert_eq!(
        sub.status.as_ref().unwrap().installed_csv.as_deref(),
        Some("widget-operator.v1.0.0")
    );
    assert!(condition(&sub, "BundleUnpackFailed").is_none());
}

fn docker_config_secret(name: &str, host: &str, password: &str) -> Secret {
    let auth =
        base64::engine::general_purpose::STANDARD.encode(format!("{}:{password}", registry::USER));
    let config = json!({"auths": {host: {"auth": auth}}}).to_string();
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some("olm".into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some(BTreeMap::from([(
            ".dockerconfigjson".to_owned(),
            k8s_openapi::ByteString(config.into_bytes()),
        )])),
        ..Default::default()
    }
}

async fn wrong_credentials_name_the_secret_tried_and_a_fixed_secret_recovers() {
    let registry = Registry::start(true);
    registry
        .push("widget-bundle", "v1.0.0", widget_layer("1.0.0"))
        .await;
    let host = registry.host();
    let t = image_env(
        registry,
        "1.0.0",
        json!({"operatorframework.io/bundle-unpack-min-retry-interval": "30s"}),
    )
    .await;
    let env = &t.env;
    let client = env.client();
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "olm"}})).unwrap(),
        )
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "olm");
    secrets
        .create(
            &PostParams::default(),
            &docker_config_secret("pull", &host, "wrong-password"),
        )
        .await
        .unwrap();
    let source: olm_rs::api::CatalogSource = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": "community", "namespace": "olm"},
        "spec": {"sourceType": "grpc", "address": "127.0.0.1:1", "secrets": ["pull"]}
    }))
    .unwrap();
    Api::<olm_rs::api::CatalogSource>::namespaced(client.clone(), "olm")
        .create(&PostParams::default(), &source)
        .await
        .unwrap();
    env.subscribe_widget(json!({"startingCSV": "widget-operator.v1.0.0"}))
        .await;
    env.sync_subscriptions().await;
    let name = only_plan(env).await.metadata.name.unwrap();
    env.sync_plan(&name).await;
    let (kind, reason, message) = lookup_condition(&env.plan(&name).await).unwrap();
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("BundleLookupFailed", "ImagePullUnauthorized")
    );
    assert!(
        message.contains("olm/pull"),
        "names the secret tried: {message}"
    );
    assert!(message.contains(&host), "names the registry: {message}");
    assert!(
        !message.contains("wrong-password"),
        "never the secret's content"
    );
    env.sync_subscriptions().await;
    assert!(condition(&env.subscription("widget").await, "BundleUnpackFailed").is_some());
    nothing_applied(env).await;

    secrets
        .replace(
            "pull",
            &PostParams::default(),
            &docker_config_secret("pull", &host, registry::PASSWORD),
        )
        .await
        .unwrap();
    env.advance(31);
    env.sync_plan(&name).await;
    assert!(
        env.plan(&name)
            .await
            .status
            .unwrap()
            .bundle_lookups
            .is_none(),
        "pulled with the fixed secret"
    );
    env.converge().await;
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

async fn a_registry_down_keeps_the_lookup_pending_and_retrying_until_it_is_back() {
    let registry = Registry::start(false);
    registry
        .push("widget-bundle", "v1.0.0", widget_layer("1.0.0"))
        .await;
    let mut t = image_env(registry, "1.0.0", Value::Null).await;
    t.registry.stop();
    let env = &t.env;
    env.subscribe_widget(json!({"startingCSV": "widget-operator.v1.0.0"}))
        .await;
    env.sync_subscriptions().await;
    let name = only_plan(env).await.metadata.name.unwrap();
    env.sync_plan(&name).await;
    let (kind, reason, message) = lookup_condition(&env.plan(&name).await).unwrap();
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("BundleLookupPending", "PullRetrying")
    );
    assert!(message.contains(&t.registry.host()), "{message}");
    env.sync_subscriptions().await;
    let sub = env.subscription("widget").await;
    let unpacking = condition(&sub, "BundleUnpacking").expect("still unpacking");
    assert!(
        unpacking
            .message
            .as_deref()
            .unwrap()
            .contains("cannot be reached")
            || unpacking
                .message
                .as_deref()
                .unwrap()
                .contains("did not answer"),
        "{unpacking:?}"
    );
    assert!(
        condition(&sub, "BundleUnpackFailed").is_none(),
        "transient: not failed"
    );
    nothing_applied(env).await;

    t.registry.restart();
    let env = &t.env;
    env.advance(2);
    env.sync_plan(&name).await;
    assert!(
        env.plan(&name)
            .await
            .status
            .unwrap()
            .bundle_lookups
            .is_none()
    );
    env.converge().await;
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

async fn a_malicious_layer_is_refused_naming_the_file_and_nothing_is_applied() {
    let registry = Registry::start(false);
    let good = |name: &str, object: Value| (name.to_owned(), serde_json::to_vec(&object).unwrap());
    let files = vec![
        good("manifests/widget.clusterserviceversion.yaml", widget_csv("1.0.0")),
        good("manifests/widgets.crd.yaml", widget_crd(&[("v1", true)], "integer")),
        (
            "metadata/annotations.yaml".to_owned(),
            b"annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  operators.operatorframework.io.bundle.package.v1: widget\n  operators.operatorframework.io.bundle.channels.v1: stable\n".to_vec(),
        ),
    ];
    let traversal = registry::layer(
        &files,
        &[RawEntry::File {
            path: "manifests/../../etc/evil.yaml".into(),
            data: b"kind: ConfigMap".to_vec(),
        }],
    );
    registry.push("widget-bundle", "v1.0.0", traversal).await;
    let symlink = registry::layer(
        &files,
        &[RawEntry::Symlink {
            path: "manifests/passwd.yaml".into(),
            target: "/etc/passwd".into(),
        }],
    );
    registry.push("widget-bundle", "v1.1.0", symlink).await;
    let t = image_env(registry, "1.0.0", Value::Null).await;
    let env = &t.env;
    env.subscribe_widget(json!({"startingCSV": "widget-operator.v1.0.0"}))
        .await;
    env.sync_subscriptions().await;
    let name = only_plan(env).await.metadata.name.unwrap();
    env.sync_plan(&name).await;
    let (kind, reason, message) = lookup_condition(&env.plan(&name).await).unwrap();
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("BundleLookupFailed", "InvalidBundleContent")
    );
    assert!(
        message.contains("widget-bundle:v1.0.0"),
        "names the image: {message}"
    );
    assert!(message.contains("evil.yaml"), "names the file: {message}");
    env.sync_subscriptions().await;
    let sub = env.subscription("widget").await;
    assert!(
        condition(&sub, "BundleUnpackFailed")
            .unwrap()
            .message
            .as_deref()
            .unwrap()
            .contains("InvalidBundleContent")
    );
    nothing_applied(env).await;
    // The symlink image is refused the same way (checked through the same path).
    let image = format!("{}/widget-bundle:v1.1.0", t.registry.host());
    let failure = t
        .env
        .ctx
        .bundle_images
        .pull(&image, &olm_rs::oci::Credentials::anonymous(), None)
        .await
        .expect_err("a symlink is refused");
    assert_eq!(failure.reason, "InvalidBundleContent");
    assert!(failure.message.contains("passwd.yaml"), "{failure:?}");
}

/// A P-256 public key nobody here signs with.
const UNUSED_KEY: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEnXRbv7R/TwSX4a66M+wG4Odf4Ag6
zCDvcWziRZA7j0RIQwyNb4AMYTBeWo3FSsGwxmAKFaVziO32oMJFf+94tA==
-----END PUBLIC KEY-----
";

async fn an_unsigned_bundle_under_a_signature_policy_waits_with_the_scope_and_why() {
    let registry = Registry::start(false);
    registry
        .push("widget-bundle", "v1.0.0", widget_layer("1.0.0"))
        .await;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key.pub");
    std::fs::write(&key, UNUSED_KEY).unwrap();
    let policy = dir.path().join("policy.json");
    let scope = format!("{}/widget-bundle", registry.host());
    std::fs::write(
        &policy,
        json!({"default": [{"type": "reject"}],
               "transports": {"docker": {scope.clone(): [{"type": "sigstoreSigned", "keyPath": key}]}}})
        .to_string(),
    )
    .unwrap();
    let registries_d = dir.path().join("registries.d");
    std::fs::create_dir_all(&registries_d).unwrap();
    std::fs::write(
        registries_d.join("all.yaml"),
        "default-docker:\n  use-sigstore-attachments: true\n",
    )
    .unwrap();
    let image_policy = olm_rs::oci::load_image_policy(Some(&policy), Some(&registries_d)).unwrap();
    let t = image_env_with_policy(
        registry,
        "1.0.0",
        Value::Null,
        std::sync::Arc::new(image_policy),
    )
    .await;
    let env = &t.env;
    env.subscribe_widget(json!({"startingCSV": "widget-operator.v1.0.0"}))
        .await;
    env.sync_subscriptions().await;
    let name = only_plan(env).await.metadata.name.unwrap();
    env.sync_plan(&name).await;
    let plan = env.plan(&name).await;
    assert_ne!(
        plan.status.as_ref().map(|s| &s.phase),
        Some(&InstallPlanPhase::Complete)
    );
    let (kind, reason, message) = lookup_condition(&plan).unwrap();
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("BundleLookupFailed", "ImagePolicyRefused")
    );
    assert!(
        message.starts_with("bundle unpacking failed: image ")
            && message.contains("widget-bundle:v1.0.0")
            && message.contains(&format!("transports.docker.{scope:?}"))
            && message.contains("no signature"),
        "{message}"
    );
    // An event on the plan says it too, naming the image, the scope and why.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(env.client(), NS);
    let started = std::time::Instant::now();
    let note = loop {
        let found = events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("BundleUnpackFailed")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str())
            })
            .and_then(|e| e.note);
        if let Some(note) = found {
            break note;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "no BundleUnpackFailed event on the plan {name}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(
        note.contains("ImagePolicyRefused")
            && note.contains("widget-bundle:v1.0.0")
            && note.contains(&format!("transports.docker.{scope:?}"))
            && note.contains("no signature"),
        "{note}"
    );
    env.sync_subscriptions().await;
    let sub = env.subscription("widget").await;
    assert!(
        condition(&sub, "BundleUnpackFailed")
            .unwrap()
            .message
            .as_deref()
            .unwrap()
            .contains("ImagePolicyRefused")
    );
    nothing_applied(env).await;
}

crate::trials! {
    current a_missing_tag_fails_in_plain_words_then_installs_once_pushed,
    current wrong_credentials_name_the_secret_tried_and_a_fixed_secret_recovers,
    current a_registry_down_keeps_the_lookup_pending_and_retrying_until_it_is_back,
    current a_malicious_layer_is_refused_naming_the_file_and_nothing_is_applied,
    current an_unsigned_bundle_under_a_signature_policy_waits_with_the_scope_and_why,
}
