//! A CSV with an invalid webhook definition reaches `Failed` / `InvalidWebhookDescription` and
//! stays there through a minute of real resyncs of the running reconciler (short resync period,
//! manual clock moved a second at a time), until the CSV is changed (issue #18 item 5). OLM
//! v0.31 flaps such a CSV `Failed → Pending/NeedsCertRotation → Failed` instead.

use crate::csv_support;

use std::time::Duration;

use csv_support::*;
use jiff::SignedDuration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams};
use olm_rs::api::{CsvPhase as P, CsvReason as R};
use olm_rs::reconcile::ControllerOptions;
use serde_json::{Value, json};

/// The reconciler's resync period in this test: 60 resyncs take about three seconds.
const RESYNC: Duration = Duration::from_millis(50);

fn webhook_csv(name: &str, api_groups: &[&str]) -> Value {
    let mut c = csv(name, "op");
    c["spec"]["webhookdefinitions"] = json!([{
        "generateName": "vdemo.example.com", "type": "ValidatingAdmissionWebhook",
        "deploymentName": "op", "containerPort": 443, "targetPort": 9443,
        "sideEffects": "None", "admissionReviewVersions": ["v1"], "webhookPath": "/validate-demo",
        "rules": [{"apiGroups": api_groups, "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["demos"]}]
    }]);
    c
}

/// How many CSV reconciles have finished, from the process's own metrics.
fn csv_reconciles(h: &Harness) -> u64 {
    h.ctx()
        .metrics
        .encode()
        .lines()
        .filter(|l| {
            l.starts_with("olm_rs_reconcile_duration_seconds_count{")
                && l.contains("kind=\"ClusterServiceVersion\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

async fn invalid_webhook_events(h: &Harness) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(h.client.clone(), NS);
    events
        .list(&Default::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("InvalidWebhookDescription"))
        .collect()
}

#[tokio::test]
async fn an_invalid_webhook_description_stays_failed_through_a_minute_of_resyncs() {
    let h = Harness::start_with(ControllerOptions {
        csv_resync: RESYNC,
        ..ControllerOptions::default()
    })
    .await;
    h.service_account_with_rbac().await;
    h.operator_group(NS, "og", &[NS]).await;
    h.create_csv(webhook_csv("demo.v0.1.0", &["operators.coreos.com"]))
        .await;

    let failed = h
        .wait_for("demo.v0.1.0", P::Failed, R::InvalidWebhookDescription)
        .await;
    let status = failed.status.clone().unwrap();
    assert_eq!(
        status.message.as_deref(),
        Some("webhook rules cannot include the OLM group")
    );
    let since = status.last_transition_time.clone();

    // A minute on the controller's clock, a second per resync period, and at least sixty real
    // resyncs (however slow a loaded machine makes them).
    let before = csv_reconciles(&h);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut seconds = 0;
    while seconds < 60 || csv_reconciles(&h) - before < 60 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} resyncs in 30 s",
            csv_reconciles(&h) - before
        );
        h.clock.advance(SignedDuration::from_secs(1));
        seconds += 1;
        tokio::time::sleep(RESYNC).await;
        let csv = h.csvs().get("demo.v0.1.0").await.unwrap();
        let status = csv.status.unwrap();
        assert_eq!(
            (status.phase(), status.reason.clone()),
            (P::Failed, Some(R::InvalidWebhookDescription)),
            "after {seconds} s: {:?}",
            status.message
        );
    }

    let csv = h.csvs().get("demo.v0.1.0").await.unwrap();
    let status = csv.status.unwrap();
    assert_eq!(
        status.last_transition_time, since,
        "the phase never left Failed"
    );
    let history: Vec<(P, R)> = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.phase.unwrap(), c.reason.unwrap()))
        .collect();
    assert_eq!(
        history,
        [
            (P::Pending, R::RequirementsUnknown),
            (P::Failed, R::InvalidWebhookDescription)
        ],
        "no NeedsCertRotation or other detour"
    );
    // Nothing was installed for it, and it was reported once.
    assert!(h.deployments().get_opt("op").await.unwrap().is_none());
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), NS);
    assert!(secrets.get_opt("op-service-cert").await.unwrap().is_none());
    let events = invalid_webhook_events(&h).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0].series.is_none(),
        "the event repeated: {:?}",
        events[0].series
    );

    // The CSV changes: a valid rule. It installs.
    let fixed = json!({"spec": {"webhookdefinitions": webhook_csv("demo.v0.1.0", &["example.com"])["spec"]["webhookdefinitions"]}});
    h.csvs()
        .patch(
            "demo.v0.1.0",
            &PatchParams::default(),
            &Patch::Merge(&fixed),
        )
        .await
        .unwrap();
    h.wait_for("demo.v0.1.0", P::Succeeded, R::InstallSucceeded)
        .await;
}
