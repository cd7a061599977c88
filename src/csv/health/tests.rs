use k8s_openapi::api::apps::v1::DeploymentCondition;

use super::*;
use crate::csv::fixtures::*;
use crate::csv::install_strategy::desired_deployments;

fn one(c: &crate::api::ClusterServiceVersion, tweak: impl FnOnce(&mut Deployment)) -> Health {
    let desired = desired_deployments(c, None).unwrap();
    let mut dep = rolled_out(desired[0].clone(), true);
    tweak(&mut dep);
    evaluate(c, &desired, &[Arc::new(dep)])
}

#[test]
fn availability_not_replica_count_decides() {
    let c = csv("a.v1");
    assert_eq!(one(&c, |_| {}), Health::Healthy);
    // 2 replicas, maxUnavailable 1, one ready: Available stays True, so healthy.
    let within_budget = one(&c, |d| {
        d.spec.as_mut().unwrap().replicas = Some(2);
        let st = d.status.as_mut().unwrap();
        st.replicas = Some(2);
        st.updated_replicas = Some(2);
        st.ready_replicas = Some(1);
        st.available_replicas = Some(1);
    });
    assert_eq!(within_budget, Health::Healthy);
}

#[test]
fn rollout_states_in_olms_order() {
    let c = csv("a.v1");
    let unobserved = one(&c, |d| d.metadata.generation = Some(2));
    assert!(matches!(unobserved, Health::NotReady(m) if m.contains("spec update to be observed")));
    let old_replicas = one(&c, |d| d.status.as_mut().unwrap().replicas = Some(3));
    assert!(
        matches!(old_replicas, Health::NotReady(m) if m.contains("2 old replicas are pending termination"))
    );
    let deadline = one(&c, |d| {
        d.status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()
            .push(DeploymentCondition {
                type_: "Progressing".into(),
                status: "False".into(),
                reason: Some("ProgressDeadlineExceeded".into()),
                ..Default::default()
            })
    });
    assert!(matches!(deadline, Health::Unrecoverable(_)));
    let unlabelled = one(&c, |d| {
        d.metadata.labels.as_mut().unwrap().remove("olm.owner");
    });
    assert_eq!(
        unlabelled,
        Health::NotReady("missing deployment with name=op".into())
    );
    let no_hash = one(&c, |d| {
        d.metadata
            .labels
            .as_mut()
            .unwrap()
            .remove("olm.deployment-spec-hash");
    });
    assert_eq!(
        no_hash,
        Health::Changed("deployment doesn't have a spec hash, update it".into())
    );
}

#[test]
fn drift_names_the_deployment_and_field() {
    let c = csv("a.v1");
    let desired = desired_deployments(&c, None).unwrap();
    let mut dep = rolled_out(desired[0].clone(), true);
    assert!(drifted(&desired, &[Arc::new(dep.clone())]).is_empty());
    dep.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .image = Some("evil:latest".into());
    let drift = drifted(&desired, &[Arc::new(dep)]);
    assert_eq!(drift[0].1, "spec.template.spec.containers[0].image");
}
