//! The text exposition, as Prometheus reads it.

use super::*;
use crate::k8s::errors::ReconcileFailure;

/// The sample lines (no comments) of `text` that start with `name`, in order.
fn samples<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| !l.starts_with('#') && l.starts_with(name))
        .collect()
}

fn csv(phase: &str, reason: &str) -> ClusterServiceVersion {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": "etcd.v0.9.4", "namespace": "operators"},
        "spec": {"version": "v0.9.4", "install": {"strategy": "deployment"}},
        "status": {"phase": phase, "reason": reason},
    }))
    .unwrap()
}

fn subscription(installed: Option<&str>) -> Subscription {
    let mut sub = serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": {"name": "etcd", "namespace": "operators"},
        "spec": {
            "name": "etcd",
            "channel": "alpha",
            "source": "operatorhubio-catalog",
            "sourceNamespace": "olm",
            "installPlanApproval": "Automatic",
        },
    });
    if let Some(installed) = installed {
        sub["status"] = serde_json::json!({
            "installedCSV": installed,
            "lastUpdated": "2026-01-01T00:00:00Z",
        });
    }
    serde_json::from_value(sub).unwrap()
}

#[test]
fn fresh_registry_exposes_unlabelled_metrics_at_zero_and_no_labelled_series() {
    let text = Metrics::new().encode();
    for line in [
        "csv_count 0",
        "install_plan_count 0",
        "subscription_count 0",
        "catalog_source_count 0",
        "csv_upgrade_count 0",
        "installplan_warnings_total 0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    // Like Go's client, a labelled metric without series prints nothing.
    assert!(!text.contains("csv_abnormal"), "{text}");
    assert!(text.ends_with("# EOF\n"), "{text}");
}

#[test]
fn the_image_policy_gauge_says_whether_pulls_are_checked() {
    let metrics = Metrics::new();
    assert!(
        metrics
            .encode()
            .lines()
            .any(|l| l == "olm_rs_image_policy_enforced 0")
    );
    metrics.set_image_policy_enforced(true);
    let text = metrics.encode();
    assert!(
        text.lines().any(|l| l == "olm_rs_image_policy_enforced 1"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE olm_rs_image_policy_enforced gauge"),
        "{text}"
    );
}

#[test]
fn every_metric_has_olm_name_and_type() {
    let metrics = Metrics::new();
    metrics.catalog_source_ready("olm", "c", true);
    metrics.catalog_source_snapshot("olm", "c");
    metrics.csv_phase(&csv("Failed", "ComponentUnhealthy"));
    metrics.subscription_synced(&subscription(None));
    metrics.resolution_duration(Outcome::Failed, 0.1);
    metrics.reconcile_duration("CatalogSource", Outcome::Succeeded, 0.1);
    metrics.set_leader("olm-rs-controller", true);
    let text = metrics.encode();
    for line in [
        "# TYPE csv_count gauge",
        "# TYPE install_plan_count gauge",
        "# TYPE subscription_count gauge",
        "# TYPE catalog_source_count gauge",
        "# TYPE catalogsource_ready gauge",
        "# TYPE csv_upgrade_count gauge",
        "# TYPE csv_succeeded gauge",
        "# TYPE csv_abnormal gauge",
        "# TYPE subscription_sync counter",
        "# TYPE installplan_warnings counter",
        "# TYPE catalog_source_snapshots counter",
        "# TYPE olm_resolution_duration_seconds histogram",
        "# TYPE olm_rs_reconcile_duration_seconds histogram",
        "# TYPE leader_election_master_status gauge",
        "# HELP csv_abnormal CSV is not installed.",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
}

#[test]
fn counts_follow_the_latest_value() {
    let metrics = Metrics::new();
    metrics.set_count(CountedKind::ClusterServiceVersion, 3);
    metrics.set_count(CountedKind::InstallPlan, 2);
    metrics.set_count(CountedKind::Subscription, 5);
    metrics.set_count(CountedKind::CatalogSource, 1);
    metrics.set_count(CountedKind::ClusterServiceVersion, 4);
    let text = metrics.encode();
    assert_eq!(samples(&text, "csv_count"), ["csv_count 4"]);
    assert_eq!(
        samples(&text, "install_plan_count"),
        ["install_plan_count 2"]
    );
    assert_eq!(
        samples(&text, "subscription_count"),
        ["subscription_count 5"]
    );
    assert_eq!(
        samples(&text, "catalog_source_count"),
        ["catalog_source_count 1"]
    );
}

#[test]
fn csv_phases_move_one_abnormal_series_and_end_succeeded() {
    let metrics = Metrics::new();
    metrics.csv_phase(&csv("Pending", "RequirementsUnknown"));
    let text = metrics.encode();
    assert_eq!(
        samples(&text, "csv_abnormal"),
        [
            r#"csv_abnormal{namespace="operators",name="etcd.v0.9.4",version="0.9.4",phase="Pending",reason="RequirementsUnknown"} 1"#
        ]
    );
    assert_eq!(
        samples(&text, "csv_succeeded"),
        [r#"csv_succeeded{namespace="operators",name="etcd.v0.9.4",version="0.9.4"} 0"#]
    );

    metrics.csv_phase(&csv("Installing", "InstallWaiting"));
    let text = metrics.encode();
    let abnormal = samples(&text, "csv_abnormal");
    assert_eq!(
        abnormal.len(),
        1,
        "the Pending series is replaced: {abnormal:?}"
    );
    assert!(abnormal[0].contains(r#"phase="Installing",reason="InstallWaiting""#));

    metrics.csv_phase(&csv("Succeeded", "InstallSucceeded"));
    let text = metrics.encode();
    assert!(samples(&text, "csv_abnormal").is_empty(), "{text}");
    assert_eq!(
        samples(&text, "csv_succeeded"),
        [r#"csv_succeeded{namespace="operators",name="etcd.v0.9.4",version="0.9.4"} 1"#]
    );

    metrics.csv_deleted("operators", "etcd.v0.9.4");
    let text = metrics.encode();
    assert!(samples(&text, "csv_succeeded").is_empty(), "{text}");
}

#[test]
fn version_label_is_canonical_semver_as_olm_prints_it() {
    let metrics = Metrics::new();
    let mut shortened = csv("Pending", "RequirementsUnknown");
    shortened.spec.version = Some("v1.2".to_owned());
    shortened.metadata.name = Some("a".to_owned());
    let mut absent = csv("Pending", "RequirementsUnknown");
    absent.spec.version = None;
    absent.metadata.name = Some("b".to_owned());
    metrics.csv_phase(&shortened);
    metrics.csv_phase(&absent);
    let text = metrics.encode();
    assert!(
        text.contains(r#"csv_succeeded{namespace="operators",name="a",version="1.2.0"} 0"#),
        "{text}"
    );
    assert!(
        text.contains(r#"csv_succeeded{namespace="operators",name="b",version="0.0.0"} 0"#),
        "{text}"
    );
}

#[test]
fn copied_csvs_are_not_counted() {
    let metrics = Metrics::new();
    metrics.csv_phase(&csv("Succeeded", "Copied"));
    let text = metrics.encode();
    assert!(samples(&text, "csv_succeeded").is_empty(), "{text}");
    assert!(samples(&text, "csv_abnormal").is_empty(), "{text}");
}

#[test]
fn subscription_syncs_count_under_current_labels_only() {
    let metrics = Metrics::new();
    metrics.subscription_synced(&subscription(None));
    metrics.subscription_synced(&subscription(None));
    let text = metrics.encode();
    assert_eq!(
        samples(&text, "subscription_sync_total"),
        [
            r#"subscription_sync_total{name="etcd",installed="",channel="alpha",package="etcd",approval="Automatic"} 2"#
        ]
    );
    metrics.subscription_synced(&subscription(Some("etcd.v0.9.4")));
    let text = metrics.encode();
    assert_eq!(
        samples(&text, "subscription_sync_total"),
        [
            r#"subscription_sync_total{name="etcd",installed="etcd.v0.9.4",channel="alpha",package="etcd",approval="Automatic"} 1"#
        ]
    );
}

#[test]
fn catalog_source_readiness_and_snapshots() {
    let metrics = Metrics::new();
    metrics.catalog_source_ready("olm", "operatorhubio-catalog", false);
    metrics.catalog_source_ready("olm", "operatorhubio-catalog", true);
    metrics.catalog_source_snapshot("olm", "operatorhubio-catalog");
    let text = metrics.encode();
    assert_eq!(
        samples(&text, "catalogsource_ready"),
        [r#"catalogsource_ready{namespace="olm",name="operatorhubio-catalog"} 1"#]
    );
    assert_eq!(
        samples(&text, "catalog_source_snapshots_total"),
        [r#"catalog_source_snapshots_total{namespace="olm",name="operatorhubio-catalog"} 1"#]
    );
    metrics.catalog_source_deleted("olm", "operatorhubio-catalog");
    let text = metrics.encode();
    assert!(samples(&text, "catalogsource_ready").is_empty(), "{text}");
    assert!(
        samples(&text, "catalog_source_snapshots_total").is_empty(),
        "{text}"
    );
}

#[test]
fn counters_and_upgrades_accumulate() {
    let metrics = Metrics::new();
    metrics.install_plan_warnings(2);
    metrics.install_plan_warnings(1);
    metrics.csv_upgraded();
    metrics.csv_upgraded();
    let text = metrics.encode();
    assert_eq!(
        samples(&text, "installplan_warnings_total"),
        ["installplan_warnings_total 3"]
    );
    assert_eq!(samples(&text, "csv_upgrade_count"), ["csv_upgrade_count 2"]);
}

#[test]
fn durations_land_in_buckets_by_kind_and_outcome() {
    let metrics = Metrics::new();
    metrics.reconcile_duration("Subscription", Outcome::Succeeded, 0.003);
    metrics.reconcile_duration("Subscription", Outcome::Failed, 0.5);
    metrics.resolution_duration(Outcome::Succeeded, 0.0015);
    let text = metrics.encode();
    assert!(text.contains(
        r#"olm_rs_reconcile_duration_seconds_bucket{le="0.004",kind="Subscription",outcome="succeeded"} 1"#
    ), "{text}");
    assert!(text.contains(
        r#"olm_rs_reconcile_duration_seconds_bucket{le="0.002",kind="Subscription",outcome="succeeded"} 0"#
    ), "{text}");
    assert!(
        text.contains(
            r#"olm_rs_reconcile_duration_seconds_count{kind="Subscription",outcome="failed"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"olm_resolution_duration_seconds_sum{outcome="succeeded"} 0.0015"#),
        "{text}"
    );
    assert!(
        text.contains(r#"olm_resolution_duration_seconds_bucket{le="+Inf",outcome="succeeded"} 1"#),
        "{text}"
    );
}

#[derive(Debug, PartialEq, thiserror::Error)]
#[error("boom")]
struct Boom;

impl ReconcileFailure for Boom {
    fn error_label(&self) -> &'static str {
        crate::k8s::errors::DECISION
    }
}

#[derive(Debug, thiserror::Error)]
#[error("write status: {source}")]
struct WriteFailed {
    source: kube::Error,
}

impl ReconcileFailure for WriteFailed {
    fn error_label(&self) -> &'static str {
        crate::k8s::errors::ApiFailure::of(&self.source).metric_label()
    }
}

#[tokio::test]
async fn timed_reconcile_records_each_outcome_and_passes_the_result_through() {
    let metrics = Metrics::new();
    let ok: Result<u8, Boom> = metrics
        .timed_reconcile("InstallPlan", "ns/a", async { Ok(7) })
        .await;
    assert_eq!(ok, Ok(7));
    let err: Result<u8, Boom> = metrics
        .timed_reconcile("InstallPlan", "ns/a", async { Err(Boom) })
        .await;
    assert_eq!(err, Err(Boom));
    let text = metrics.encode();
    for outcome in ["succeeded", "failed"] {
        let line = format!(
            r#"olm_rs_reconcile_duration_seconds_count{{kind="InstallPlan",outcome="{outcome}"}} 1"#
        );
        assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
    }
}

#[tokio::test]
async fn failed_reconciles_are_counted_by_the_kind_of_error() {
    let metrics = Metrics::new();
    let forbidden = || WriteFailed {
        source: kube::Error::Api(
            kube::core::Status::failure("forbidden", "Forbidden")
                .with_code(403)
                .boxed(),
        ),
    };
    for _ in 0..2 {
        let _: Result<(), WriteFailed> = metrics
            .timed_reconcile("ClusterServiceVersion", "ns/a", async { Err(forbidden()) })
            .await;
    }
    let _: Result<(), Boom> = metrics
        .timed_reconcile("Subscription", "ns", async { Err(Boom) })
        .await;
    let text = metrics.encode();
    assert!(
        text.lines()
            .any(|l| l == "# TYPE olm_rs_reconcile_errors counter"),
        "{text}"
    );
    for line in [
        r#"olm_rs_reconcile_errors_total{kind="ClusterServiceVersion",error="forbidden"} 2"#,
        r#"olm_rs_reconcile_errors_total{kind="Subscription",error="decision"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
    }
}

#[test]
fn leader_status_is_one_only_while_leading() {
    let metrics = Metrics::new();
    metrics.set_leader("olm-rs-controller", true);
    assert_eq!(
        samples(&metrics.encode(), "leader_election_master_status"),
        [r#"leader_election_master_status{name="olm-rs-controller"} 1"#]
    );
    metrics.set_leader("olm-rs-controller", false);
    assert_eq!(
        samples(&metrics.encode(), "leader_election_master_status"),
        [r#"leader_election_master_status{name="olm-rs-controller"} 0"#]
    );
}

#[test]
fn outcome_of_a_result() {
    assert_eq!(Outcome::of(&Ok::<(), ()>(())), Outcome::Succeeded);
    assert_eq!(Outcome::of(&Err::<(), ()>(())), Outcome::Failed);
}
