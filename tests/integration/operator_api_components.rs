//! The components that joined the Operator API last (docs/operator-api.md §2), with every
//! reconciler of `olm-rs run` on the embedded API server: the webhook configuration a CSV's
//! `webhookdefinitions` made, and the operands of the CRD it owns — labelled once, listed in
//! the Operator's refs, and dropped from them when they go.
//!
//! The embedded API server authorizes everyone, so the operator's account (which olm-rs acts
//! as for operands) is not judged here; a refused account is on the real API server
//! (docs/operator-api.md §5).

use crate::csv_support;

use std::collections::BTreeSet;
use std::time::Duration;

use csv_support::*;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use olm_rs::api::{CsvPhase as P, CsvReason as R, Operator};
use serde_json::{Value, json};

const OPERATOR: &str = "demo.demo";
const LABEL: &str = "operators.coreos.com/demo.demo";

fn demos(h: &Harness) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Demo"),
        "demos",
    );
    Api::namespaced_with(h.client.clone(), NS, &resource)
}

async fn operand(h: &Harness, name: &str) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Demo",
        "metadata": {"name": name, "namespace": NS}, "spec": {"size": 1}
    }))
    .expect("an operand");
    demos(h)
        .create(&PostParams::default(), &obj)
        .await
        .expect("create operand");
}

/// `kind name` of each ref of the Operator.
async fn refs(h: &Harness) -> BTreeSet<String> {
    let operators: Api<Operator> = Api::all(h.client.clone());
    let Ok(Some(op)) = operators.get_opt(OPERATOR).await else {
        return BTreeSet::new();
    };
    op.status
        .and_then(|s| s.components)
        .and_then(|c| c.refs)
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "{} {}",
                r.kind.unwrap_or_default(),
                r.name.unwrap_or_default()
            )
        })
        .collect()
}

fn labelled(obj: &DynamicObject) -> bool {
    obj.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(LABEL))
}

/// The CSV of csv_certs' webhook test, carrying the Operator's label (as a Subscription's
/// install would label it), owning `demos.example.com`; its account `op-sa` is the
/// Deployment's.
fn webhook_csv(name: &str) -> Value {
    let mut c = csv(name, "op");
    c["metadata"]["labels"] = json!({ LABEL: "" });
    c["spec"]["webhookdefinitions"] = json!([{
        "generateName": "vdemo.example.com", "type": "ValidatingAdmissionWebhook",
        "deploymentName": "op", "containerPort": 443, "targetPort": 9443,
        "sideEffects": "None", "admissionReviewVersions": ["v1"], "webhookPath": "/validate-demo",
        "failurePolicy": "Ignore",
        "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["demos"]}]
    }]);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_configurations_and_operands_are_labelled_once_and_listed() {
    let h = Harness::start_all_controllers().await;
    h.service_account_with_rbac().await;
    let group: olm_rs::api::OperatorGroup = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "og", "namespace": NS}, "spec": {"targetNamespaces": [NS]}
    }))
    .unwrap();
    h.groups(NS)
        .create(&PostParams::default(), &group)
        .await
        .unwrap();
    // One operand before the operator, one after: both join.
    operand(&h, "before").await;
    h.create_csv(webhook_csv("demo.v0.1.0")).await;
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    operand(&h, "after").await;

    let listed = eventually(
        "the Operator lists the webhook configuration and both operands",
        || async {
            let have = refs(&h).await;
            let webhook = have
                .iter()
                .any(|r| r.starts_with("ValidatingWebhookConfiguration vdemo.example.com-"));
            (webhook && have.contains("Demo before") && have.contains("Demo after")).then_some(have)
        },
    )
    .await;
    assert!(
        listed.contains("ClusterServiceVersion demo.v0.1.0"),
        "{listed:?}"
    );
    let configs: Api<DynamicObject> = Api::all_with(
        h.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingWebhookConfiguration",
            ),
            "validatingwebhookconfigurations",
        ),
    );
    let config = configs
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .pop()
        .expect("the webhook configuration");
    assert!(labelled(&config), "{:?}", config.metadata.labels);

    // Labelled once: more syncs of the Operator (a change of its CSV) write no operand again.
    let after = demos(&h).get("after").await.unwrap();
    assert!(labelled(&after), "{:?}", after.metadata.labels);
    for round in 0..3 {
        h.csvs()
            .patch(
                "demo.v0.1.0",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"annotations": {"test/round": round.to_string()}}}),
                ),
            )
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let again = demos(&h).get("after").await.unwrap();
    assert_eq!(
        again.metadata.resource_version, after.metadata.resource_version,
        "an operand labelled once is not written again"
    );

    // An operand deleted leaves the refs.
    demos(&h)
        .delete("before", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deleted operand leaves the refs", || async {
        let have = refs(&h).await;
        (!have.contains("Demo before") && have.contains("Demo after")).then_some(())
    })
    .await;

    // The CSV gone: its webhook configuration goes (finalizer), its operands' watch stops and
    // they leave the refs, though they stay in the cluster.
    h.csvs()
        .delete("demo.v0.1.0", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_gone("demo.v0.1.0").await;
    eventually(
        "the refs forget the CSV, its webhook and its operands",
        || async {
            let have = refs(&h).await;
            (!have.iter().any(|r| {
                r.starts_with("Demo ")
                    || r.starts_with("ValidatingWebhookConfiguration ")
                    || r.starts_with("ClusterServiceVersion ")
            }))
            .then_some(())
        },
    )
    .await;
    assert!(demos(&h).get_opt("after").await.unwrap().is_some());
}
