//! Each requirement failure keeps a CSV Pending with a message naming what is missing, and the
//! CSV recovers once it appears; group membership and install modes likewise.

use crate::csv_support;

use csv_support::*;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::RoleBinding;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use olm_rs::api::{CsvPhase as P, CsvReason as R, Subscription};
use serde_json::json;

fn message(csv: &olm_rs::api::ClusterServiceVersion) -> String {
    csv.status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_missing_required_crd_blocks_until_it_is_created() {
    let h = Harness::start().await;
    h.operator_group(NS, "og", &[NS]).await;
    h.service_account_with_rbac().await;
    let mut c = csv("demo.v0.1.0", "op");
    c["spec"]["customresourcedefinitions"]["required"] =
        json!([{"name": "others.example.com", "version": "v1", "kind": "Other"}]);
    h.create_csv(c).await;
    let pending = h
        .wait_for("demo.v0.1.0", P::Pending, R::RequirementsNotMet)
        .await;
    assert_eq!(
        message(&pending),
        "one or more requirements couldn't be found: CRD others.example.com is not present"
    );
    let reqs = pending.status.unwrap().requirement_status.unwrap();
    let other = reqs
        .iter()
        .find(|r| r.name == "others.example.com")
        .unwrap();
    assert_eq!(
        (other.status.as_str(), other.message.as_str()),
        ("NotPresent", "CRD is not present")
    );

    let crds: Api<CustomResourceDefinition> = Api::all(h.client.clone());
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(demo_crd("others.example.com", "Other", "others")).unwrap(),
    )
    .await
    .unwrap();
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
}

#[tokio::test]
async fn a_missing_service_account_or_rule_is_named_and_recovers() {
    let h = Harness::start().await;
    h.operator_group(NS, "og", &[NS]).await;
    h.create_csv(csv("demo.v0.1.0", "op")).await;
    let pending = h
        .wait_for("demo.v0.1.0", P::Pending, R::RequirementsNotMet)
        .await;
    assert_eq!(
        message(&pending),
        "one or more requirements couldn't be found: ServiceAccount op-sa: Service account does not exist"
    );

    h.service_account("op-sa").await;
    let csvs = h.csvs();
    let no_rule = eventually("the missing rule named", || {
        let csvs = csvs.clone();
        async move {
            let m = message(&csvs.get("demo.v0.1.0").await.ok()?);
            m.contains("cannot get resource").then_some(m)
        }
    })
    .await;
    assert_eq!(
        no_rule,
        "one or more requirements couldn't be found: ServiceAccount op-sa cannot get resource \"configmaps\" in API group \"\" in namespace \"demo\""
    );
    let reqs = h
        .csvs()
        .get("demo.v0.1.0")
        .await
        .unwrap()
        .status
        .unwrap()
        .requirement_status
        .unwrap();
    let sa = reqs.iter().find(|r| r.kind == "ServiceAccount").unwrap();
    let dependent = &sa.dependents.as_ref().unwrap()[0];
    assert_eq!(dependent.status.as_str(), "NotSatisfied");
    assert_eq!(
        dependent.message.as_deref(),
        Some(
            r#"namespaced rule:{"verbs":["get","list","watch"],"apiGroups":[""],"resources":["configmaps"]}"#
        )
    );

    h.rbac_for("op-sa").await;
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
}

#[tokio::test]
async fn install_modes_must_allow_the_groups_targets() {
    let h = Harness::start().await;
    h.operator_group(NS, "og", &[""]).await;
    h.service_account_with_rbac().await;
    h.create_csv(csv("demo.v0.1.0", "op")).await;
    let failed = h
        .wait_for("demo.v0.1.0", P::Failed, R::UnsupportedOperatorGroup)
        .await;
    assert_eq!(
        message(&failed),
        "AllNamespaces InstallModeType not supported, cannot configure to watch all namespaces"
    );
    h.set_targets(NS, "og", &[NS]).await;
    // The new targets reach the CSV's annotation, then it goes back through Pending.
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    let annotations = h
        .csvs()
        .get("demo.v0.1.0")
        .await
        .unwrap()
        .metadata
        .annotations
        .unwrap();
    assert_eq!(annotations["olm.targetNamespaces"], NS);
}

#[tokio::test]
async fn no_operator_group_fails_until_one_exists() {
    let h = Harness::start().await;
    h.service_account_with_rbac().await;
    h.create_csv(csv("demo.v0.1.0", "op")).await;
    let failed = h
        .wait_for("demo.v0.1.0", P::Failed, R::NoOperatorGroup)
        .await;
    assert_eq!(message(&failed), "csv in namespace with no operatorgroups");
    h.operator_group(NS, "og", &[NS]).await;
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
}

#[tokio::test]
async fn a_deleted_rolebinding_or_service_account_is_restored() {
    let h = Harness::start().await;
    h.operator_group(NS, "og", &[NS]).await;
    // As an InstallPlan would leave it: CSV labelled olm.managed, a Subscription that installed
    // it, and the install plan's ServiceAccount and RBAC.
    let mut c = csv("demo.v0.1.0", "op");
    c["metadata"]["labels"] = json!({"olm.managed": "true"});
    h.create_csv(c).await;
    let subs: Api<Subscription> = Api::namespaced(h.client.clone(), NS);
    let sub: Subscription = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "demo", "namespace": NS},
        "spec": {"source": "cat", "sourceNamespace": "olm", "name": "demo"}
    }))
    .unwrap();
    subs.create(&PostParams::default(), &sub).await.unwrap();
    subs.patch_status(
        "demo",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"installedCSV": "demo.v0.1.0", "currentCSV": "demo.v0.1.0",
                                        "lastUpdated": "2026-01-01T00:00:00Z"}}),
        ),
    )
    .await
    .unwrap();
    // Nothing granted yet: the controller restores the install plan's objects by itself.
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;

    let bindings: Api<RoleBinding> = Api::namespaced(h.client.clone(), NS);
    // Besides the OperatorCondition's own RoleBinding, named after the CSV.
    let restored: Vec<RoleBinding> = bindings
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|b| b.metadata.name.as_deref() != Some("demo.v0.1.0"))
        .collect();
    assert_eq!(restored.len(), 1);
    let binding_name = restored[0].metadata.name.clone().unwrap();
    assert!(
        binding_name.starts_with("demo.v0.1.0-op-sa-"),
        "{binding_name}"
    );

    bindings
        .delete(&binding_name, &DeleteParams::default())
        .await
        .unwrap();
    let name = binding_name.clone();
    eventually("RoleBinding restored", || {
        let bindings = bindings.clone();
        let name = name.clone();
        async move { bindings.get_opt(&name).await.ok()?.map(|_| ()) }
    })
    .await;
    let accounts: Api<ServiceAccount> = Api::namespaced(h.client.clone(), NS);
    accounts
        .delete("op-sa", &DeleteParams::default())
        .await
        .unwrap();
    eventually("ServiceAccount restored", || {
        let accounts = accounts.clone();
        async move { accounts.get_opt("op-sa").await.ok()?.map(|_| ()) }
    })
    .await;
    let csv = h
        .wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    let history = csv.status.unwrap().conditions.unwrap();
    assert!(
        history
            .iter()
            .all(|c| c.phase.as_ref().map(|p| p.as_str()) != Some("Failed")),
        "repairs happen without failing the CSV: {history:?}"
    );
}

#[tokio::test]
async fn a_scoped_group_without_rights_fails_without_retry_until_rbac_changes() {
    let h = Harness::start().await;
    h.operator_group(NS, "og", &[NS]).await;
    h.groups(NS)
        .patch(
            "og",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"serviceAccountName": "scoped"}})),
        )
        .await
        .unwrap();
    h.groups(NS)
        .patch_status(
            "og",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"serviceAccountRef": {"kind": "ServiceAccount", "namespace": NS, "name": "scoped"}}})),
        )
        .await
        .unwrap();
    h.service_account_with_rbac().await;
    h.create_csv(csv("demo.v0.1.0", "op")).await;
    let failed = h
        .wait_for("demo.v0.1.0", P::Failed, R::InstallComponentFailedNoRetry)
        .await;
    assert_eq!(
        message(&failed),
        "install strategy failed: deployments.apps \"op\" is forbidden: User \"system:serviceaccount:demo:scoped\" cannot create resource \"deployments\" in API group \"apps\" in the namespace \"demo\""
    );
    assert!(
        h.deployments().get_opt("op").await.unwrap().is_none(),
        "nothing was written for the scoped account"
    );

    // Granting the account its rights is an RBAC change: the CSV leaves the freeze.
    h.service_account("scoped").await;
    h.grant(
        "installer",
        "scoped",
        json!([{"verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
                "apiGroups": ["apps"], "resources": ["deployments"]}]),
    )
    .await;
    h.wait_for_history("demo.v0.1.0", P::Pending, R::DetectedClusterChange)
        .await;
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
}
