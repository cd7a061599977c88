//! Writes that refer to the answer of an earlier write (`k8s::effects::Write::StatusAfter`,
//! `execute_answered`), against the embedded API server: a created object's status, and another
//! object's status naming it by the uid and resourceVersion the server gave it, carried out from
//! one decision's value (docs/subscription-plans.md, "One sync").

use kube::api::{Api, PostParams};
use olm_rs::api::{InstallPlan, InstallPlanPhase, InstallPlanStatus, Subscription};
use olm_rs::k8s::effects::{
    Answered, Answers, Body, Effects, Fill, Write, execute, execute_answered,
};
use olm_rs::k8s::events::EventPublisher;
use olm_rs::k8s::write::ObjectKey;
use olm_rs::sandbox::{ApiServer, ApiServerOptions};
use serde_json::json;

async fn server_with_a_subscription() -> (ApiServer, kube::Client, Subscription) {
    let server = ApiServer::with_options(ApiServerOptions {
        simulate_workloads: false,
        ..Default::default()
    });
    let client = server.client();
    crate::subscription_support::install_olm_crds(&client).await;
    let subs: Api<Subscription> = Api::namespaced(client.clone(), "default");
    let sub = subs
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "Subscription",
                "metadata": {"name": "etcd", "namespace": "default"},
                "spec": {"name": "etcd", "source": "c", "sourceNamespace": "olm"},
            }))
            .unwrap(),
        )
        .await
        .expect("subscription");
    (server, client, sub)
}

fn plan_key() -> ObjectKey {
    ObjectKey::new::<InstallPlan>(Some("default"), "install-a")
}

/// The writes of a decision that creates plan `install-a` for `sub`, in two parts: the plan's
/// create and first status, then the Subscription's fence and its reference to the plan.
fn create_and_attach(sub: &Subscription) -> (Effects, Effects) {
    let plan = Effects {
        writes: vec![
            Write::Create {
                key: plan_key(),
                object: Body::new(json!({
                    "apiVersion": "operators.coreos.com/v1alpha1",
                    "kind": "InstallPlan",
                    "metadata": {"name": "install-a", "namespace": "default"},
                    "spec": {"clusterServiceVersionNames": ["etcd.v1"], "approval": "Automatic",
                             "approved": true},
                })),
            },
            Write::StatusAfter {
                key: plan_key(),
                status: Body::new(InstallPlanStatus {
                    phase: InstallPlanPhase::Installing,
                    ..InstallPlanStatus::default()
                }),
                fills: Vec::new(),
            },
        ],
        ..Effects::default()
    };
    let fill = |field, at| Fill {
        from: plan_key(),
        field,
        at,
    };
    let reference = Effects {
        writes: vec![
            Write::status(
                sub,
                json!({"state": "UpgradePending", "lastUpdated": "2026-01-01T00:00:00Z"}),
            )
            .expect("read from the server"),
            Write::StatusAfter {
                key: ObjectKey::of(sub),
                status: Body::new(json!({
                    "state": "UpgradePending", "lastUpdated": "2026-01-01T00:00:00Z",
                    "installPlanRef": {"kind": "InstallPlan", "name": "install-a",
                                       "namespace": "default"},
                })),
                fills: vec![
                    fill(Answered::Uid, "/installPlanRef/uid"),
                    fill(Answered::ResourceVersion, "/installPlanRef/resourceVersion"),
                ],
            },
        ],
        ..Effects::default()
    };
    (plan, reference)
}

#[tokio::test]
async fn a_status_after_is_written_at_the_answered_version_with_the_answered_uid() {
    let (_server, client, sub) = server_with_a_subscription().await;
    let events = EventPublisher::new(client.clone(), None);
    let (plan_part, reference_part) = create_and_attach(&sub);
    let mut answers = Answers::default();
    execute_answered(&client, &events, &plan_part, &mut answers)
        .await
        .expect("the plan and its status");
    let executed = execute_answered(&client, &events, &reference_part, &mut answers)
        .await
        .expect("the fence and the reference");
    assert_eq!(executed.written.len(), 2);

    let plan = Api::<InstallPlan>::namespaced(client.clone(), "default")
        .get("install-a")
        .await
        .unwrap();
    assert_eq!(
        plan.status.map(|s| s.phase),
        Some(InstallPlanPhase::Installing),
        "the status written right after the create"
    );
    let written = Api::<Subscription>::namespaced(client, "default")
        .get("etcd")
        .await
        .unwrap();
    let reference = written.status.unwrap().install_plan_ref.unwrap();
    assert_eq!(reference.name.as_deref(), Some("install-a"));
    assert_eq!(reference.uid, plan.metadata.uid);
    assert_eq!(
        reference.resource_version, plan.metadata.resource_version,
        "the plan's last answer: after its status"
    );
}

#[tokio::test]
async fn a_status_after_without_its_earlier_answer_is_a_conflict_and_is_not_sent() {
    let (_server, client, sub) = server_with_a_subscription().await;
    let events = EventPublisher::new(client.clone(), None);
    let (_, reference_part) = create_and_attach(&sub);
    // Only the reference, without the plan's part: its uid has no answer to come from.
    let error = execute(&client, &events, &reference_part)
        .await
        .expect_err("nothing to refer to");
    assert!(error.is_conflict(), "{error}");
    let written = Api::<Subscription>::namespaced(client.clone(), "default")
        .get("etcd")
        .await
        .unwrap();
    assert!(
        written.status.is_some_and(|s| s.install_plan_ref.is_none()),
        "the fence is written, the reference is not sent"
    );

    // A status after alone (no earlier write of its own object) is refused the same way.
    let alone = Effects {
        writes: vec![reference_part.writes[1].clone()],
        ..Effects::default()
    };
    let error = execute(&client, &events, &alone).await.expect_err("alone");
    assert!(error.is_conflict(), "{error}");
}
