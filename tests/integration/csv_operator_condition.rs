//! OperatorConditions on the embedded API (issue #18 item 6): every CSV gets one of its name,
//! owned by it, with its Role and RoleBinding; what the operator reports is copied to status;
//! `Upgradeable=False` holds the replacing CSV in Pending until an admin override releases it;
//! all of it goes with the CSV.

use crate::csv_support;

use std::time::Duration;

use csv_support::*;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use olm_rs::api::{CsvPhase as P, CsvReason as R, OperatorCondition};
use olm_rs::csv::rbac_eval::{RbacIndex, Request, Scope, ServiceAccountUser};
use serde_json::{Value, json};

fn conditions(h: &Harness) -> Api<OperatorCondition> {
    Api::namespaced(h.client.clone(), NS)
}

async fn wait_condition(h: &Harness, name: &str) -> OperatorCondition {
    let api = conditions(h);
    eventually(&format!("OperatorCondition {name}"), || {
        let api = api.clone();
        async move { api.get_opt(name).await.ok()? }
    })
    .await
}

async fn wait_rbac(h: &Harness, name: &str) -> (Role, RoleBinding) {
    let roles: Api<Role> = Api::namespaced(h.client.clone(), NS);
    let bindings: Api<RoleBinding> = Api::namespaced(h.client.clone(), NS);
    eventually(&format!("Role and RoleBinding {name}"), || {
        let (roles, bindings) = (roles.clone(), bindings.clone());
        async move {
            Some((
                roles.get_opt(name).await.ok()??,
                bindings.get_opt(name).await.ok()??,
            ))
        }
    })
    .await
}

/// `condition` as operator-lib writes it into `spec.conditions` (v2).
fn reported(status: &str, message: &str) -> Value {
    json!({"type": "Upgradeable", "status": status, "reason": "Migration", "message": message,
           "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

async fn patch_spec(h: &Harness, name: &str, spec: Value) {
    conditions(h)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": spec })),
        )
        .await
        .expect("patch OperatorCondition spec");
}

/// Waits until the operator's `Upgradeable` report is in status, observed at the current
/// generation.
async fn wait_observed(h: &Harness, name: &str, status: &str) {
    let api = conditions(h);
    eventually(&format!("Upgradeable={status} observed on {name}"), || {
        let api = api.clone();
        async move {
            let oc = api.get(name).await.ok()?;
            let seen = oc.status_condition("Upgradeable")?;
            (seen.status == status && seen.observed_generation == oc.metadata.generation)
                .then_some(())
        }
    })
    .await;
}

/// A CSV whose Deployment has two containers and an init container.
fn two_container_csv(name: &str) -> Value {
    let mut c = csv(name, "op");
    let pod = &mut c["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"];
    pod["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "sidecar", "image": "example.com/side:v1",
                     "env": [{"name": "OPERATOR_CONDITION_NAME", "value": "stale"}]}));
    pod["initContainers"] = json!([{"name": "init", "image": "example.com/init:v1"}]);
    c
}

#[tokio::test]
async fn every_csv_gets_an_operator_condition_with_its_rbac_and_loses_it_with_the_csv() {
    let h = Harness::start().await;
    h.service_account_with_rbac().await;
    h.operator_group(NS, "og", &[NS]).await;
    h.create_csv(two_container_csv("demo.v0.1.0")).await;
    let csv = h
        .wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;

    let oc = wait_condition(&h, "demo.v0.1.0").await;
    assert_eq!(oc.spec.service_accounts, Some(vec!["op-sa".to_owned()]));
    assert_eq!(oc.spec.deployments, Some(vec!["op".to_owned()]));
    let owners = oc.metadata.owner_references.clone().unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (
            owners[0].kind.as_str(),
            owners[0].name.as_str(),
            owners[0].controller
        ),
        ("ClusterServiceVersion", "demo.v0.1.0", Some(true))
    );
    assert_eq!(Some(&owners[0].uid), csv.metadata.uid.as_ref());

    // The Role and RoleBinding OLM names after the CSV let the operator's account get, update
    // and patch its own OperatorCondition, and nothing else.
    let (role, binding) = wait_rbac(&h, "demo.v0.1.0").await;
    let owner = &role.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), Some(&owner.uid)),
        ("OperatorCondition", oc.metadata.uid.as_ref())
    );
    let rbac = RbacIndex::new([&role], [&binding], [], []);
    let grants = rbac.grants_for(&ServiceAccountUser::new(NS, "op-sa"), Scope::Namespace(NS));
    let on = |verb: &str, name: &str| Request::Resource {
        verb: verb.into(),
        group: "operators.coreos.com".into(),
        resource: "operatorconditions".into(),
        subresource: String::new(),
        name: name.into(),
    };
    for verb in ["get", "update", "patch"] {
        assert!(grants.allows(&on(verb, "demo.v0.1.0")), "{verb}");
    }
    assert!(!grants.allows(&on("delete", "demo.v0.1.0")));
    assert!(!grants.allows(&on("get", "other.v1")));

    // OPERATOR_CONDITION_NAME in every container, not in init containers.
    let pod = h
        .deployments()
        .get("op")
        .await
        .unwrap()
        .spec
        .unwrap()
        .template
        .spec
        .unwrap();
    for container in &pod.containers {
        let env = container.env.clone().unwrap_or_default();
        let named: Vec<_> = env
            .iter()
            .filter(|e| e.name == "OPERATOR_CONDITION_NAME")
            .collect();
        assert_eq!(named.len(), 1, "{}", container.name);
        assert_eq!(named[0].value.as_deref(), Some("demo.v0.1.0"));
    }
    assert!(pod.init_containers.unwrap()[0].env.is_none());

    // What the operator reports in spec.conditions reaches status at the observed generation.
    patch_spec(
        &h,
        "demo.v0.1.0",
        json!({"conditions": [reported("False", "migrating")]}),
    )
    .await;
    wait_observed(&h, "demo.v0.1.0", "False").await;
    let oc_uid = oc.metadata.uid.clone();

    // Deleted by hand: made again, with its RBAC owned by the new object.
    conditions(&h)
        .delete("demo.v0.1.0", &DeleteParams::default())
        .await
        .unwrap();
    let again = eventually("the OperatorCondition re-created", || async {
        let oc = conditions(&h).get_opt("demo.v0.1.0").await.ok()??;
        (oc.metadata.uid != oc_uid).then_some(oc)
    })
    .await;
    let roles: Api<Role> = Api::namespaced(h.client.clone(), NS);
    eventually("the Role owned by the new OperatorCondition", || async {
        let role = roles.get_opt("demo.v0.1.0").await.ok()??;
        let owners = role.metadata.owner_references?;
        owners
            .iter()
            .any(|o| Some(&o.uid) == again.metadata.uid.as_ref())
            .then_some(())
    })
    .await;

    // Removed with the CSV, RBAC included.
    h.csvs()
        .delete("demo.v0.1.0", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_gone("demo.v0.1.0").await;
    let bindings: Api<RoleBinding> = Api::namespaced(h.client.clone(), NS);
    eventually("the OperatorCondition and its RBAC removed", || async {
        let gone = conditions(&h).get_opt("demo.v0.1.0").await.ok()?.is_none()
            && roles.get_opt("demo.v0.1.0").await.ok()?.is_none()
            && bindings.get_opt("demo.v0.1.0").await.ok()?.is_none();
        gone.then_some(())
    })
    .await;
}

#[tokio::test]
async fn upgradeable_false_holds_the_replacing_csv_until_an_override_releases_it() {
    let h = Harness::start().await;
    h.service_account_with_rbac().await;
    h.operator_group(NS, "og", &[NS]).await;
    h.create_csv(csv("demo.v0.1.0", "op")).await;
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    wait_condition(&h, "demo.v0.1.0").await;
    patch_spec(
        &h,
        "demo.v0.1.0",
        json!({"conditions": [reported("False", "migration in progress")]}),
    )
    .await;
    wait_observed(&h, "demo.v0.1.0", "False").await;

    h.create_csv(replacing(csv("demo.v0.2.0", "op"), "demo.v0.1.0"))
        .await;
    let held = h
        .wait_for(
            "demo.v0.2.0",
            P::Pending,
            R::OperatorConditionNotUpgradeable,
        )
        .await;
    assert_eq!(
        held.status.unwrap().message.as_deref(),
        Some("operator is not upgradeable: The operator is not upgradeable: migration in progress")
    );
    // It holds: the new CSV waits, the old one keeps running.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let still = h.csvs().get("demo.v0.2.0").await.unwrap().status.unwrap();
    assert_eq!(still.reason, Some(R::OperatorConditionNotUpgradeable));
    assert!(h.csvs().get_opt("demo.v0.1.0").await.unwrap().is_some());
    assert_eq!(
        h.deployments()
            .get("op")
            .await
            .unwrap()
            .metadata
            .labels
            .unwrap()["olm.owner"],
        "demo.v0.1.0"
    );

    // The admin overrides what the operator says.
    patch_spec(
        &h,
        "demo.v0.1.0",
        json!({"overrides": [{"type": "Upgradeable", "status": "True", "reason": "Admin",
                              "message": "backup taken", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
    )
    .await;
    h.wait_for("demo.v0.2.0", P::Succeeded, R::InstallSucceeded)
        .await;
    h.wait_gone("demo.v0.1.0").await;
    eventually("the old OperatorCondition removed", || async {
        conditions(&h)
            .get_opt("demo.v0.1.0")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let new = wait_condition(&h, "demo.v0.2.0").await;
    assert_eq!(
        new.metadata.owner_references.unwrap()[0].name,
        "demo.v0.2.0"
    );
}

#[tokio::test]
async fn a_failed_operator_condition_write_is_reported_and_does_not_hold_up_the_csv() {
    use k8s_openapi::api::events::v1::Event;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

    let h = Harness::start().await;
    h.service_account_with_rbac().await;
    h.operator_group(NS, "og", &[NS]).await;
    // The OperatorCondition kind disappears once the controller runs (its cache has listed:
    // a first CSV got its OperatorCondition).
    h.create_csv(csv("probe.v0.1.0", "op")).await;
    wait_condition(&h, "probe.v0.1.0").await;
    h.csvs()
        .delete("probe.v0.1.0", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_gone("probe.v0.1.0").await;
    let crds: Api<CustomResourceDefinition> = Api::all(h.client.clone());
    crds.delete(
        "operatorconditions.operators.coreos.com",
        &DeleteParams::default(),
    )
    .await
    .unwrap();
    eventually("the OperatorCondition CRD gone", || async {
        crds.get_opt("operatorconditions.operators.coreos.com")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;

    h.create_csv(csv("demo.v0.1.0", "op")).await;
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
    let events: Api<Event> = Api::namespaced(h.client.clone(), NS);
    let warning = eventually("an OperatorConditionNotWritten event", || async {
        events
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("OperatorConditionNotWritten"))
    })
    .await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    let note = warning.note.unwrap_or_default();
    assert!(
        note.contains("apply OperatorCondition demo/demo.v0.1.0"),
        "{note}"
    );
}
