//! `olm-rs.io/on-failed-upgrade: rollback` on the embedded API server (docs/upgrades.md §3):
//! an upgrade whose new CSV fails over a replaced CSV that had succeeded is rolled back by an
//! automatic plan (under Manual approval too) that restores the replaced bundle, then the failed
//! CSV is deleted, the failed version is remembered on the Subscription (across a controller
//! restart) and not tried again; a rollback the CRD rule forbids changes nothing and says why.
//!
//! The CSV controller does not run here: the CSV phases a failed upgrade leaves (the new CSV
//! `Failed`, the replaced one `Replacing`) are written as it would write them, so each step is
//! the Subscription and InstallPlan controllers' answer alone.

use crate::subscription_support as support;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

use olm_rs::api::{InstallPlan, OperatorGroup, Subscription};
use olm_rs::catalog::model::DeclarativeConfig;

const CSV: (&str, &str, &str) = (
    "operators.coreos.com/v1alpha1",
    "ClusterServiceVersion",
    "clusterserviceversions",
);
const POLICY: &str = "olm-rs.io/on-failed-upgrade";
const MARK: &str = "olm-rs.io/failed-upgrade";

fn csvs(env: &Env) -> Api<DynamicObject> {
    let gvk = kube::core::GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", CSV.1);
    Api::namespaced_with(
        env.client(),
        NS,
        &kube::core::ApiResource::from_gvk_with_plural(&gvk, CSV.2),
    )
}

/// Writes a CSV's status as the CSV controller would: `phases` is its history, the last one
/// current.
async fn set_phases(env: &Env, name: &str, phases: &[(&str, &str)]) {
    let history: Vec<Value> = phases
        .iter()
        .map(|(p, r)| json!({"phase": p, "reason": r, "message": "as written by the test",
                             "lastUpdateTime": "2027-01-01T00:00:00Z", "lastTransitionTime": "2027-01-01T00:00:00Z"}))
        .collect();
    let (phase, reason) = phases.last().copied().unwrap_or_default();
    let status = json!({"status": {"phase": phase, "reason": reason,
        "message": "deployment \"widget-operator\" exceeded its progress deadline", "conditions": history}});
    csvs(env)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("CSV status");
}

/// `widget` 1.0.0, then (`both`) 1.1.0 replacing it, in channel `stable`.
fn catalog(both: bool) -> DeclarativeConfig {
    let mut config = widget_catalog();
    config.channels.retain(|c| c.name == "stable");
    let keep = if both { 2 } else { 1 };
    config.channels[0].entries.truncate(keep);
    config.bundles.truncate(keep);
    config
}

/// Installs 1.0.0 (Succeeded), then upgrades to 1.1.0, which fails: the state a failed upgrade
/// leaves. `approve`: the Subscription is Manual and each plan is approved by a person.
async fn failed_upgrade(env: &mut Env, annotations: Value, approve: bool) {
    env.add_catalog("community", catalog(false));
    let approval = if approve { "Manual" } else { "Automatic" };
    let sub: Subscription = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "widget", "namespace": NS, "annotations": annotations},
        "spec": {"source": "community", "sourceNamespace": "olm", "name": "widget",
                 "channel": "stable", "installPlanApproval": approval}
    }))
    .unwrap();
    Api::<Subscription>::namespaced(env.client(), NS)
        .create(&Default::default(), &sub)
        .await
        .expect("subscription");
    for step in 0..2 {
        if step == 1 {
            env.add_catalog("community", catalog(true));
        }
        for _ in 0..3 {
            env.converge().await;
            if approve {
                for plan in env.plans().await {
                    if !plan.spec.approved {
                        let name = plan.metadata.name.clone().unwrap_or_default();
                        env.approve(&name).await;
                        env.run_plan(&name).await;
                    }
                }
            }
        }
        env.converge().await;
        if step == 0 {
            set_phases(env, "widget-operator.v1.0.0", &[SUCCEEDED]).await;
        }
    }
    set_phases(env, "widget-operator.v1.0.0", &[SUCCEEDED, REPLACING]).await;
    set_phases(env, "widget-operator.v1.1.0", &[INSTALLING, FAILED]).await;
}

const SUCCEEDED: (&str, &str) = ("Succeeded", "InstallSucceeded");
const REPLACING: (&str, &str) = ("Replacing", "BeingReplaced");
const INSTALLING: (&str, &str) = ("Installing", "InstallWaiting");
const FAILED: (&str, &str) = ("Failed", "InstallCheckFailed");

/// `olm-rs.io/on-failed-upgrade: rollback` on the namespace's OperatorGroup.
async fn annotate_group(env: &Env) {
    Api::<OperatorGroup>::namespaced(env.client(), NS)
        .patch(
            "og",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": {POLICY: "rollback"}}})),
        )
        .await
        .expect("annotate the group");
}

async fn csv_names(env: &Env) -> Vec<String> {
    env.names(CSV.0, CSV.1, CSV.2, true).await
}

fn annotation(sub: &Subscription, key: &str) -> Option<String> {
    sub.metadata.annotations.as_ref()?.get(key).cloned()
}

#[tokio::test]
async fn a_failed_upgrade_is_rolled_back_without_approval_and_not_tried_again() {
    let mut env = Env::new().await;
    failed_upgrade(&mut env, json!({POLICY: "rollback"}), true).await;
    assert_eq!(
        csv_names(&env).await,
        ["widget-operator.v1.0.0", "widget-operator.v1.1.0"]
    );
    let plans_before = env.plans().await.len();
    let uid_before = env
        .get(CSV.0, CSV.1, CSV.2, "widget-operator.v1.0.0", true)
        .await
        .expect("1.0.0")["metadata"]["uid"]
        .clone();

    // 1. The restore: an automatic plan of 1.0.0's bundle over the failed CSV.
    let created = env.converge().await;
    assert_eq!(created.len(), 1, "one rollback plan: {created:?}");
    let plan: InstallPlan = env.plan(&created[0]).await;
    assert_eq!(
        plan.spec.cluster_service_version_names,
        ["widget-operator.v1.0.0"]
    );
    assert!(plan.spec.approved, "a rollback needs no approval");
    // The replaced CSV stays the one object it was (a plan never edits an existing CSV); the
    // plan put back the rest of its bundle.
    let restored = env
        .get(CSV.0, CSV.1, CSV.2, "widget-operator.v1.0.0", true)
        .await
        .expect("1.0.0");
    assert_eq!(restored["metadata"]["uid"], uid_before);
    let sub = env.subscription("widget").await;
    assert_eq!(annotation(&sub, MARK).as_deref(), Some("1.1.0"));
    let rolled = condition(&sub, "RolledBack").expect("RolledBack");
    assert_eq!(rolled.status.as_str(), "True");
    assert_eq!(rolled.reason.as_deref(), Some("InstallCheckFailed"));
    let message = rolled.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("upgrade to widget-operator.v1.1.0 (version 1.1.0) failed (InstallCheckFailed: deployment \"widget-operator\" exceeded its progress deadline); rolled back to widget-operator.v1.0.0 (version 1.0.0)"),
        "{message}"
    );

    // 2. The plan ran: the failed CSV is deleted.
    assert_eq!(csv_names(&env).await, ["widget-operator.v1.0.0"]);
    let status = sub.status.clone().unwrap();
    assert_eq!(
        status.installed_csv.as_deref(),
        Some("widget-operator.v1.0.0")
    );

    // 3. No retry loop, across a restart: the mark holds it at 1.0.0.
    env.restart();
    set_phases(
        &env,
        "widget-operator.v1.0.0",
        &[SUCCEEDED, REPLACING, SUCCEEDED],
    )
    .await;
    env.converge().await;
    assert_eq!(env.plans().await.len(), plans_before + 1, "no plan again");
    assert_eq!(csv_names(&env).await, ["widget-operator.v1.0.0"]);
    let sub = env.subscription("widget").await;
    let held = condition(&sub, "VersionHeld").expect("held");
    assert_eq!(held.reason.as_deref(), Some("FailedVersionSkipped"));

    // 4. A person removes the mark: the upgrade is tried again, as OLM would.
    Api::<Subscription>::namespaced(env.client(), NS)
        .patch(
            "widget",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": {MARK: null}}})),
        )
        .await
        .expect("clear the mark");
    env.converge().await;
    let sub = env.subscription("widget").await;
    assert_eq!(
        sub.status.unwrap().current_csv.as_deref(),
        Some("widget-operator.v1.1.0")
    );
    assert!(condition(&env.subscription("widget").await, "RolledBack").is_none());
}

#[tokio::test]
async fn the_operator_groups_annotation_rolls_back_every_subscription_in_it() {
    let mut env = Env::new().await;
    annotate_group(&env).await;
    failed_upgrade(&mut env, json!({}), false).await;
    env.converge().await;
    assert_eq!(csv_names(&env).await, ["widget-operator.v1.0.0"]);
    let sub = env.subscription("widget").await;
    assert_eq!(annotation(&sub, MARK).as_deref(), Some("1.1.0"));
}

/// 1.0.0 owns Widgets at `v1alpha1` only; 1.1.0's CRD stores `v1` and no longer serves
/// `v1alpha1`.
fn retired_version_catalog(both: bool) -> DeclarativeConfig {
    let mut config = catalog(both);
    let mut old = widget_bundle("1.0.0", widget_crd(&[("v1alpha1", true)], "integer"));
    let mut csv = widget_csv("1.0.0");
    csv["spec"]["customresourcedefinitions"]["owned"][0]["version"] = json!("v1alpha1");
    old.objects[0] = serde_json::value::to_raw_value(&csv).unwrap();
    config.bundles[0] = old;
    if both {
        let mut crd = widget_crd(&[("v1alpha1", false), ("v1", true)], "integer");
        crd["spec"]["versions"][0]["served"] = json!(false);
        config.bundles[1] = widget_bundle("1.1.0", crd);
    }
    config
}

#[tokio::test]
async fn a_rollback_the_crd_rule_forbids_changes_nothing_and_says_why() {
    let mut env = Env::new().await;
    env.add_catalog("community", retired_version_catalog(false));
    subscribe_with(&env, json!({POLICY: "rollback"})).await;
    env.converge().await;
    set_phases(&env, "widget-operator.v1.0.0", &[SUCCEEDED]).await;
    env.add_catalog("community", retired_version_catalog(true));
    env.converge().await;
    set_phases(&env, "widget-operator.v1.0.0", &[SUCCEEDED, REPLACING]).await;
    set_phases(&env, "widget-operator.v1.1.0", &[INSTALLING, FAILED]).await;
    let plans_before = env.plans().await.len();

    env.converge().await;
    assert_eq!(env.plans().await.len(), plans_before, "no plan");
    assert_eq!(
        csv_names(&env).await,
        ["widget-operator.v1.0.0", "widget-operator.v1.1.0"]
    );
    let sub = env.subscription("widget").await;
    assert_eq!(annotation(&sub, MARK), None);
    let refused = condition(&sub, "RolledBack").expect("RolledBack");
    assert_eq!(
        (refused.status.as_str(), refused.reason.as_deref()),
        ("False", Some("RollbackRefused"))
    );
    let message = refused.message.clone().unwrap_or_default();
    assert!(
        message.ends_with("rollback to widget-operator.v1.0.0 (version 1.0.0) refused: downgrade to widget-operator.v1.0.0 refused: it owns CRD widgets.example.com at version v1alpha1, which the cluster's CRD no longer serves (served: v1); nothing was changed"),
        "{message}"
    );
}

async fn subscribe_with(env: &Env, annotations: Value) {
    let sub: Subscription = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "widget", "namespace": NS, "annotations": annotations},
        "spec": {"source": "community", "sourceNamespace": "olm", "name": "widget", "channel": "stable"}
    }))
    .unwrap();
    Api::<Subscription>::namespaced(env.client(), NS)
        .create(&Default::default(), &sub)
        .await
        .expect("subscription");
}

/// A co-upgrade moved `base` to 2.0.0 with `app` 2.0.0, and `app` 2.0.0 failed: `app` 1.0.0
/// needs `base` below 2.0.0, so restoring it alone would break that requirement. The rollback
/// is refused, naming `base.v2.0.0`, and nothing is changed (docs/upgrades.md §3).
#[tokio::test]
async fn a_rollback_a_co_upgrade_moved_a_dependency_from_is_refused_with_nothing_changed() {
    let mut env = Env::new().await;
    annotate_group(&env).await;
    env.add_catalog("community", crate::subscription_co_upgrade::catalog());
    crate::subscription_co_upgrade::subscribe_app(&env).await;
    env.converge().await;
    assert_eq!(
        csv_names(&env).await,
        ["app.v1.0.0", "app.v2.0.0", "base.v1.1.0", "base.v2.0.0"]
    );
    set_phases(&env, "app.v1.0.0", &[SUCCEEDED, REPLACING]).await;
    set_phases(&env, "app.v2.0.0", &[INSTALLING, FAILED]).await;
    set_phases(&env, "base.v2.0.0", &[INSTALLING, SUCCEEDED]).await;
    let plans_before = env.plans().await.len();

    let created = env.converge().await;
    assert!(created.is_empty(), "no restore plan: {created:?}");
    assert_eq!(env.plans().await.len(), plans_before);
    assert_eq!(
        csv_names(&env).await,
        ["app.v1.0.0", "app.v2.0.0", "base.v1.1.0", "base.v2.0.0"],
        "nothing deleted"
    );
    let sub = env.subscription("app").await;
    assert_eq!(annotation(&sub, MARK), None, "no mark");
    let status = sub.status.expect("status");
    let rolled_back = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_.as_str() == "RolledBack")
        .expect("a RolledBack condition");
    assert_eq!(rolled_back.status.as_str(), "False");
    assert_eq!(rolled_back.reason.as_deref(), Some("RollbackRefused"));
    let message = rolled_back.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("app.v1.0.0 requires package \"base\"")
            && message.contains("base.v2.0.0 (version 2.0.0) is installed"),
        "{message}"
    );
}
