//! The operator installed for its own namespace (issue #29): the test operator's package
//! `olm-rs-testop-own` (e2e/testop/bundles/olm-rs-testop-own/, catalog e2e/testop/catalog-own/)
//! — OwnNamespace, a validating webhook, an aggregated API, no conversion webhook — in
//! `tk-own`, with an OperatorGroup targeting only `tk-own`. Its objects are compared with the
//! others' (takeover.rs); here: the Subscription, what "installed" means for it, and the proof
//! that the API server still calls it — the webhook denies, the aggregator answers — after each
//! move.

use anyhow::{Context as _, bail, ensure};
use kube::api::{ListParams, PostParams};
use kube::core::DynamicObject;
use serde_json::{Value, json};

use crate::cluster::{self, Cluster, Progress, field, text};
use crate::fixtures;
use crate::journeys::wait_installed;
use crate::snapshot::Snapshot;

pub const NAMESPACE: &str = "tk-own";
/// The CatalogSource (in `olm`) serving e2e/testop/catalog-own/.
pub const CATALOG: &str = "testop-own";
const PACKAGE: &str = "olm-rs-testop-own";
const CSV: &str = "olm-rs-testop-own.v0.1.0";
const SUBSCRIPTION: &str = "testop-own";
/// The aggregated API's group and version (the CSV passes them to the operator as
/// `--api-group`, `--api-version`).
const API_GROUP_VERSION: &str = "api.own.testop.olm-rs.dev/v1alpha1";
const API_SERVICE: &str = "v1alpha1.api.own.testop.olm-rs.dev";
/// The webhook's name (the CSV's `generateName`), and what the operator answers to a denial.
const WEBHOOK: &str = "vgizmo.own.testop.olm-rs.dev";
const DENIAL: &str = "olm-rs-test-operator denies";

/// The Subscription: the package's `stable` channel from the global catalog namespace.
pub fn subscription() -> Value {
    let mut sub = fixtures::subscription(NAMESPACE, CATALOG, "stable", "Automatic", None);
    sub["metadata"]["name"] = json!(SUBSCRIPTION);
    sub["spec"]["name"] = json!(PACKAGE);
    sub["spec"]["sourceNamespace"] = json!("olm");
    sub
}

/// Installed: the CSV `Succeeded` (its Deployment available: the caller waits for every
/// Deployment), its webhook configuration present, pointing at `tk-own`'s Service with a CA,
/// and its APIService `Available`.
pub async fn wait_installed_by_olm(c: &Cluster) -> anyhow::Result<()> {
    wait_installed(c, NAMESPACE, SUBSCRIPTION, CSV).await?;
    let webhooks = cluster::core(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
    );
    c.wait_for(format!("the webhook configuration of {CSV}"), || async {
        let list = kube::Api::<DynamicObject>::all_with(c.client.clone(), &webhooks)
            .list(&ListParams::default().labels(&format!("olm.owner={CSV}")))
            .await?;
        let found = list.items.iter().find_map(|w| {
            field(w, "/webhooks")?
                .as_array()?
                .iter()
                .find(|h| h["name"] == WEBHOOK)
                .cloned()
        });
        Ok(match found {
            Some(hook)
                if hook["clientConfig"]["service"]["namespace"] == NAMESPACE
                    && hook["clientConfig"]["caBundle"]
                        .as_str()
                        .is_some_and(|ca| !ca.is_empty()) =>
            {
                Progress::Done(())
            }
            other => Progress::Pending(format!("webhook {WEBHOOK}: {other:?}")),
        })
    })
    .await?;
    let api_services = cluster::core("apiregistration.k8s.io", "v1", "APIService", "apiservices");
    c.wait_for(
        format!("APIService {API_SERVICE} to be Available"),
        || async {
            let Some(api) = c.get_cluster_scoped(&api_services, API_SERVICE).await? else {
                return Ok(Progress::Pending("absent".to_owned()));
            };
            let conditions = field(&api, "/status/conditions")
                .cloned()
                .unwrap_or_default();
            let available = conditions
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Available" && c["status"] == "True");
            Ok(
                if available && text(&api, "/spec/service/namespace") == NAMESPACE {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!("{conditions}"))
                },
            )
        },
    )
    .await
}

/// The objects OLM made for the operator's webhook and aggregated API are among those compared
/// (so that every check on the snapshot covers them): its Deployment, the Service and the
/// certificate Secret, the ValidatingWebhookConfiguration, the APIService, the auth-reader
/// RoleBinding in kube-system and the CRD.
pub fn ensure_compared(snapshot: &Snapshot) -> anyhow::Result<()> {
    let service = "olm-rs-testop-own-service";
    let wanted = [
        format!("Deployment {NAMESPACE}/olm-rs-testop-own"),
        format!("Service {NAMESPACE}/{service}"),
        format!("Secret {NAMESPACE}/{service}-cert"),
        format!("APIService {API_SERVICE}"),
        format!("RoleBinding kube-system/{service}-auth-reader"),
        "CustomResourceDefinition gizmos.own.testop.olm-rs.dev".to_owned(),
    ];
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|k| !snapshot.contains_key(*k))
        .collect();
    ensure!(
        missing.is_empty(),
        "not among the compared objects: {missing:?}"
    );
    // OLM names the configuration `<generateName>-<random>`.
    let webhook = snapshot.iter().any(|(key, seen)| {
        key.starts_with(&format!("ValidatingWebhookConfiguration {WEBHOOK}-"))
            && seen.content["webhooks"][0]["clientConfig"]["service"]["namespace"] == NAMESPACE
    });
    ensure!(
        webhook,
        "no ValidatingWebhookConfiguration of {CSV} among the compared objects"
    );
    Ok(())
}

/// The API server still calls the operator, over TLS with the CA in the webhook
/// configuration and the APIService: a Gizmo with `spec.deny` is denied with the operator's own
/// words (nothing is created), and a list of `reports` through the aggregator is answered by
/// the operator's pod. `when` names the moment in the output.
pub async fn calls_succeed(c: &Cluster, when: &str) -> anyhow::Result<()> {
    let gizmos = cluster::core("own.testop.olm-rs.dev", "v1", "Gizmo", "gizmos");
    let gizmo: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "own.testop.olm-rs.dev/v1", "kind": "Gizmo",
        "metadata": {"name": "denied"}, "spec": {"deny": true}}))?;
    let denied = c
        .api(&gizmos, NAMESPACE)
        .create(&PostParams::default(), &gizmo)
        .await;
    let message = match denied {
        Err(kube::Error::Api(status))
            if status.message.contains(WEBHOOK) && status.message.contains(DENIAL) =>
        {
            status.message
        }
        other => bail!("{when}: a Gizmo with spec.deny was not denied by {WEBHOOK}: {other:?}"),
    };
    let path = format!("/apis/{API_GROUP_VERSION}/reports");
    let request = http::Request::get(&path).body(Vec::new())?;
    let text = c
        .client
        .request_text(request)
        .await
        .with_context(|| format!("{when}: GET {path} through the aggregator"))?;
    let reports: Value = serde_json::from_str(&text)?;
    let served_by = reports["items"][0]["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    ensure!(
        served_by.starts_with("olm-rs-testop-own-")
            && reports["items"][0]["spec"]["operatorVersion"] == "0.1.0",
        "{when}: GET {path} through the aggregator: {reports}"
    );
    println!(
        "e2e-takeover:   {when}: the API server calls {NAMESPACE}'s operator: the webhook says \
         {message:?}; GET {path} answered by pod {served_by}"
    );
    Ok(())
}
