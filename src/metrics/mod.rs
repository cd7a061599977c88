//! Prometheus metrics, served on the probe port at `/metrics`.
//!
//! Names, label sets and meanings are OLM's (`pkg/metrics/metrics.go`) wherever OLM has the
//! metric, so existing dashboards and alerts (`csv_abnormal{phase="Failed"}`) keep working;
//! olm-rs's own additions are prefixed `olm_rs_`. One [`Metrics`] lives in the reconcilers'
//! `Context`; nothing is global, so tests build their own and read [`Metrics::encode`].
//!
//! The exposition is OpenMetrics text (Prometheus scrapes it natively). Two consequences of that
//! format, both kept compatible with OLM's series names:
//! - counters are declared without the `_total` suffix and exposed with it
//!   (`subscription_sync_total`, `installplan_warnings_total`);
//! - `csv_upgrade_count` is a counter in OLM but has no `_total` suffix, which OpenMetrics
//!   forbids for counters: it is exposed as a gauge that only goes up, under OLM's exact name.
//! - OLM's `olm_resolution_duration_seconds` is a summary; here it is a histogram with the same
//!   name and `outcome` label, so its `_sum` and `_count` series are unchanged.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::header;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::api::cluster_service_version::ClusterServiceVersion;
use crate::api::csv_status::{CsvPhase, CsvReason};
use crate::api::subscription::Subscription;

/// `Content-Type` of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The kinds whose number of objects OLM reports (`csv_count`, `install_plan_count`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountedKind {
    ClusterServiceVersion,
    InstallPlan,
    Subscription,
    CatalogSource,
}

/// The `outcome` label of the duration histograms (OLM's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Failed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
        }
    }

    /// `Succeeded` for `Ok`, `Failed` for `Err`.
    pub fn of<T, E>(result: &Result<T, E>) -> Self {
        if result.is_ok() {
            Self::Succeeded
        } else {
            Self::Failed
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NamespacedLabels {
    namespace: String,
    name: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CsvLabels {
    namespace: String,
    name: String,
    version: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CsvAbnormalLabels {
    namespace: String,
    name: String,
    version: String,
    phase: String,
    reason: String,
}

/// OLM's label set: no namespace (two Subscriptions of the same name in different namespaces
/// share a series in OLM too).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SubscriptionLabels {
    name: String,
    installed: String,
    channel: String,
    package: String,
    approval: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    kind: String,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileErrorLabels {
    kind: String,
    error: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaderLabels {
    name: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// The series last written for each object, so a change of label values (a new phase, a new
/// installed CSV) replaces the old series instead of leaving it behind — what OLM does with
/// its `DeleteLabelValues` calls.
#[derive(Default)]
struct LastSeries {
    csv_succeeded: HashMap<(String, String), CsvLabels>,
    csv_abnormal: HashMap<(String, String), CsvAbnormalLabels>,
    subscriptions: HashMap<(String, String), SubscriptionLabels>,
}

/// Every metric of the process.
pub struct Metrics {
    registry: Registry,
    csv_count: Gauge,
    install_plan_count: Gauge,
    subscription_count: Gauge,
    catalog_source_count: Gauge,
    catalogsource_ready: Family<NamespacedLabels, Gauge>,
    catalog_source_snapshots: Family<NamespacedLabels, Counter>,
    csv_upgrade_count: Gauge,
    csv_succeeded: Family<CsvLabels, Gauge>,
    csv_abnormal: Family<CsvAbnormalLabels, Gauge>,
    subscription_sync: Family<SubscriptionLabels, Counter>,
    installplan_warnings: Counter,
    resolution_duration: HistogramFamily<OutcomeLabels>,
    reconcile_duration: HistogramFamily<ReconcileLabels>,
    reconcile_errors: Family<ReconcileErrorLabels, Counter>,
    leader: Family<LeaderLabels, Gauge>,
    image_policy_enforced: Gauge,
    last: Mutex<LastSeries>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// 1 ms to ~33 s, doubling: a reconcile or a resolution is usually milliseconds, and anything
/// beyond half a minute is a problem whatever its exact length.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let csv_count = Gauge::default();
        let install_plan_count = Gauge::default();
        let subscription_count = Gauge::default();
        let catalog_source_count = Gauge::default();
        let catalogsource_ready = Family::default();
        let catalog_source_snapshots = Family::default();
        let csv_upgrade_count = Gauge::default();
        let csv_succeeded = Family::default();
        let csv_abnormal = Family::default();
        let subscription_sync = Family::default();
        let installplan_warnings = Counter::default();
        let resolution_duration: HistogramFamily<OutcomeLabels> =
            Family::new_with_constructor(duration_histogram);
        let reconcile_duration: HistogramFamily<ReconcileLabels> =
            Family::new_with_constructor(duration_histogram);
        let reconcile_errors = Family::default();
        let leader = Family::default();
        let image_policy_enforced = Gauge::default();

        // Help texts are OLM's where the metric is OLM's.
        registry.register(
            "csv_count",
            "Number of CSVs successfully registered",
            csv_count.clone(),
        );
        registry.register(
            "install_plan_count",
            "Number of install plans",
            install_plan_count.clone(),
        );
        registry.register(
            "subscription_count",
            "Number of subscriptions",
            subscription_count.clone(),
        );
        registry.register(
            "catalog_source_count",
            "Number of catalog sources",
            catalog_source_count.clone(),
        );
        registry.register(
            "catalogsource_ready",
            "State of a CatalogSource. 1 indicates that the CatalogSource is in a READY state. \
             0 indicates CatalogSource is in a Non READY state.",
            catalogsource_ready.clone(),
        );
        registry.register(
            "catalog_source_snapshots",
            "The number of times the catalog operator has requested a snapshot of data from a \
             catalog source",
            catalog_source_snapshots.clone(),
        );
        registry.register(
            "csv_upgrade_count",
            "Monotonic count of CSV upgrades",
            csv_upgrade_count.clone(),
        );
        registry.register(
            "csv_succeeded",
            "Successful CSV install",
            csv_succeeded.clone(),
        );
        registry.register("csv_abnormal", "CSV is not installed", csv_abnormal.clone());
        registry.register(
            "subscription_sync",
            "Monotonic count of subscription syncs",
            subscription_sync.clone(),
        );
        registry.register(
            "installplan_warnings",
            "monotonic count of resources that generated warnings when applied as part of an \
             InstallPlan (for example, due to deprecation)",
            installplan_warnings.clone(),
        );
        registry.register(
            "olm_resolution_duration_seconds",
            "The duration of a dependency resolution attempt",
            resolution_duration.clone(),
        );
        registry.register(
            "olm_rs_reconcile_duration_seconds",
            "The duration of one reconcile of one object, by kind and outcome",
            reconcile_duration.clone(),
        );
        registry.register(
            "olm_rs_reconcile_errors",
            "Failed reconciles, by kind of object and kind of error (not_found, conflict, \
             forbidden, unauthorized, invalid, server_error, unreachable, other, decision)",
            reconcile_errors.clone(),
        );
        // client-go's and controller-runtime's name, so existing alerts on it apply.
        registry.register(
            "leader_election_master_status",
            "1 while this replica holds the leader Lease, 0 while it stands by",
            leader.clone(),
        );
        registry.register(
            "olm_rs_image_policy_enforced",
            "1 while in-process image pulls obey an image policy (--image-policy), 0 while \
             every image is accepted as OLM does",
            image_policy_enforced.clone(),
        );

        Self {
            registry,
            csv_count,
            install_plan_count,
            subscription_count,
            catalog_source_count,
            catalogsource_ready,
            catalog_source_snapshots,
            csv_upgrade_count,
            csv_succeeded,
            csv_abnormal,
            subscription_sync,
            installplan_warnings,
            resolution_duration,
            reconcile_duration,
            reconcile_errors,
            leader,
            image_policy_enforced,
            last: Mutex::new(LastSeries::default()),
        }
    }

    /// `olm_rs_image_policy_enforced`: set once at start (docs/image-signatures.md §7).
    pub fn set_image_policy_enforced(&self, enforced: bool) {
        self.image_policy_enforced.set(i64::from(enforced));
    }

    /// The OpenMetrics text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail, and every registered metric encodes.
        if let Err(err) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::error!(%err, "cannot encode metrics");
        }
        text
    }

    /// `csv_count`, `install_plan_count`, `subscription_count`, `catalog_source_count`: the
    /// number of such objects in the cluster (reconcilers set it from their reflector store).
    pub fn set_count(&self, kind: CountedKind, count: usize) {
        let gauge = match kind {
            CountedKind::ClusterServiceVersion => &self.csv_count,
            CountedKind::InstallPlan => &self.install_plan_count,
            CountedKind::Subscription => &self.subscription_count,
            CountedKind::CatalogSource => &self.catalog_source_count,
        };
        gauge.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// After each CSV sync (OLM's `EmitCSVMetric`): `csv_succeeded` is 1 in phase Succeeded and
    /// 0 otherwise; `csv_abnormal{phase,reason}` is 1 while the CSV is not Succeeded, with one
    /// series per CSV (the previous phase's series is removed). Copied CSVs are not counted.
    pub fn csv_phase(&self, csv: &ClusterServiceVersion) {
        let status = csv.status.clone().unwrap_or_default();
        let reason = status.reason.unwrap_or_default();
        if reason == CsvReason::Copied {
            return;
        }
        let phase = status.phase.unwrap_or_default();
        let namespace = csv.metadata.namespace.clone().unwrap_or_default();
        let name = csv.metadata.name.clone().unwrap_or_default();
        let version = version_label(csv);
        let key = (namespace.clone(), name.clone());
        let succeeded = CsvLabels {
            namespace: namespace.clone(),
            name: name.clone(),
            version: version.clone(),
        };
        let mut last = self.lock_last();
        if let Some(previous) = last.csv_abnormal.remove(&key) {
            self.csv_abnormal.remove(&previous);
        }
        if let Some(previous) = last.csv_succeeded.insert(key.clone(), succeeded.clone())
            && previous != succeeded
        {
            self.csv_succeeded.remove(&previous);
        }
        if phase == CsvPhase::Succeeded {
            self.csv_succeeded.get_or_create(&succeeded).set(1);
        } else {
            self.csv_succeeded.get_or_create(&succeeded).set(0);
            let abnormal = CsvAbnormalLabels {
                namespace,
                name,
                version,
                phase: phase.as_str().to_owned(),
                reason: reason.as_str().to_owned(),
            };
            self.csv_abnormal.get_or_create(&abnormal).set(1);
            last.csv_abnormal.insert(key, abnormal);
        }
    }

    /// A CSV is gone: its series disappear (OLM's `DeleteCSVMetric`).
    pub fn csv_deleted(&self, namespace: &str, name: &str) {
        let key = (namespace.to_owned(), name.to_owned());
        let mut last = self.lock_last();
        if let Some(previous) = last.csv_abnormal.remove(&key) {
            self.csv_abnormal.remove(&previous);
        }
        if let Some(previous) = last.csv_succeeded.remove(&key) {
            self.csv_succeeded.remove(&previous);
        }
    }

    /// One CSV replaced another (`csv_upgrade_count`).
    pub fn csv_upgraded(&self) {
        self.csv_upgrade_count.inc();
    }

    /// After each Subscription sync (OLM's `EmitSubMetric` + `UpdateSubsSyncCounterStorage`):
    /// counts the sync under the Subscription's current labels; when they changed (new
    /// installed CSV, channel, package or approval) the series of the old labels is removed.
    /// Label values are the raw fields, as OLM writes them (an unset approval is `""`).
    pub fn subscription_synced(&self, sub: &Subscription) {
        let namespace = sub.metadata.namespace.clone().unwrap_or_default();
        let name = sub.metadata.name.clone().unwrap_or_default();
        let installed = sub
            .status
            .as_ref()
            .and_then(|status| status.installed_csv.clone())
            .unwrap_or_default();
        let labels = SubscriptionLabels {
            name: name.clone(),
            installed,
            channel: sub.spec.channel.clone().unwrap_or_default(),
            package: sub.spec.name.clone(),
            approval: sub
                .spec
                .install_plan_approval
                .as_ref()
                .map(|approval| approval.as_str().to_owned())
                .unwrap_or_default(),
        };
        let mut last = self.lock_last();
        if let Some(previous) = last.subscriptions.insert((namespace, name), labels.clone())
            && previous != labels
        {
            self.subscription_sync.remove(&previous);
        }
        self.subscription_sync.get_or_create(&labels).inc();
    }

    /// After listing `namespace`'s Subscriptions: series of the ones no longer there go away
    /// (a namespace sync never sees a deleted Subscription itself).
    pub fn forget_subscriptions_except(&self, namespace: &str, present: &[String]) {
        let mut last = self.lock_last();
        let gone: Vec<(String, String)> = last
            .subscriptions
            .keys()
            .filter(|(ns, name)| ns == namespace && !present.contains(name))
            .cloned()
            .collect();
        for key in gone {
            if let Some(previous) = last.subscriptions.remove(&key) {
                self.subscription_sync.remove(&previous);
            }
        }
    }

    /// `catalogsource_ready{namespace,name}`: 1 when the catalog's connection is READY.
    pub fn catalog_source_ready(&self, namespace: &str, name: &str, ready: bool) {
        self.catalogsource_ready
            .get_or_create(&namespaced(namespace, name))
            .set(i64::from(ready));
    }

    /// A CatalogSource is gone: its series disappear.
    pub fn catalog_source_deleted(&self, namespace: &str, name: &str) {
        let labels = namespaced(namespace, name);
        self.catalogsource_ready.remove(&labels);
        self.catalog_source_snapshots.remove(&labels);
    }

    /// The catalog's content was read in full (`catalog_source_snapshots_total`).
    pub fn catalog_source_snapshot(&self, namespace: &str, name: &str) {
        self.catalog_source_snapshots
            .get_or_create(&namespaced(namespace, name))
            .inc();
    }

    /// `count` resources of an InstallPlan drew API warnings when applied (for example a
    /// deprecated API version) — `installplan_warnings_total`.
    pub fn install_plan_warnings(&self, count: u64) {
        self.installplan_warnings.inc_by(count);
    }

    /// One resolution attempt took `seconds` (`olm_resolution_duration_seconds{outcome}`).
    pub fn resolution_duration(&self, outcome: Outcome, seconds: f64) {
        self.resolution_duration
            .get_or_create(&OutcomeLabels {
                outcome: outcome.as_str(),
            })
            .observe(seconds);
    }

    /// One reconcile of one object of `kind` (`ClusterServiceVersion`, `Subscription`, …) took
    /// `seconds` (`olm_rs_reconcile_duration_seconds{kind,outcome}`).
    pub fn reconcile_duration(&self, kind: &str, outcome: Outcome, seconds: f64) {
        self.reconcile_duration
            .get_or_create(&ReconcileLabels {
                kind: kind.to_owned(),
                outcome: outcome.as_str(),
            })
            .observe(seconds);
    }

    /// Runs one reconcile of the object `object` (`namespace/name`) of `kind` inside a tracing
    /// span naming both, and records how long it took, whether it failed and with which kind of
    /// error (`olm_rs_reconcile_errors_total{kind,error}`):
    /// `ctx.metrics.timed_reconcile("Subscription", &key, reconcile(sub, ctx)).await`.
    pub async fn timed_reconcile<T, E>(
        &self,
        kind: &str,
        object: &str,
        reconcile: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E>
    where
        E: crate::k8s::errors::ReconcileFailure,
    {
        use tracing::Instrument as _;
        let span = tracing::debug_span!("reconcile", kind, object);
        let started = std::time::Instant::now();
        let result = reconcile.instrument(span).await;
        self.reconcile_duration(kind, Outcome::of(&result), started.elapsed().as_secs_f64());
        if let Err(err) = &result {
            self.reconcile_error(kind, err.error_label());
        }
        result
    }

    /// One failed reconcile of `kind`, with `error` the label of its kind of failure.
    pub fn reconcile_error(&self, kind: &str, error: &'static str) {
        self.reconcile_errors
            .get_or_create(&ReconcileErrorLabels {
                kind: kind.to_owned(),
                error,
            })
            .inc();
    }

    /// `leader_election_master_status{name}`: whether this replica holds the Lease `lease`.
    pub fn set_leader(&self, lease: &str, leading: bool) {
        self.leader
            .get_or_create(&LeaderLabels {
                name: lease.to_owned(),
            })
            .set(i64::from(leading));
    }

    fn lock_last(&self) -> std::sync::MutexGuard<'_, LastSeries> {
        // A panic while holding the lock leaves the maps usable (each update is one insert or
        // remove); keep serving metrics.
        self.last
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// OLM prints `spec.version` as canonical semver (`v1.2` → `1.2.0`; absent → Go's zero value
/// `0.0.0`); text that does not parse is kept as written.
fn version_label(csv: &ClusterServiceVersion) -> String {
    match csv.spec.operator_version() {
        None => "0.0.0".to_owned(),
        Some(Ok(version)) => version.to_string(),
        Some(Err(_)) => csv.spec.version.clone().unwrap_or_default(),
    }
}

fn namespaced(namespace: &str, name: &str) -> NamespacedLabels {
    NamespacedLabels {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    }
}

/// `GET /metrics`; merged into the probe router by `controller::run`.
pub fn router(metrics: Arc<Metrics>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let metrics = Arc::clone(&metrics);
            async move { ([(header::CONTENT_TYPE, CONTENT_TYPE)], metrics.encode()) }
        }),
    )
}

#[cfg(test)]
mod tests;
