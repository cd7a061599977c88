//! The ClusterServiceVersion reconciler: the thin shell around [`crate::csv`].
//!
//! Each reconcile observes (stores + a few live lookups), asks the pure core what to do,
//! performs it, writes the status and publishes events. Requeues follow the decision.

mod certs;
mod deletion;
mod execute;
mod observe;
mod operator_condition;
mod stores;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::{Client, ResourceExt};
use kube_runtime::controller::{Action as ControllerAction, Controller};
use kube_runtime::reflector::ObjectRef;
use kube_runtime::watcher;
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::api::{ClusterServiceVersion, CsvPhase, OperatorCondition, OperatorGroup, Subscription};
use crate::csv::cleanup::{cleanup, has_finalizer};
use crate::csv::identity::name;
use crate::csv::replacement::{replaced_csv, replacement_of};
use crate::csv::{Action, Requeue, after_install_with_certs, sync};
use crate::k8s::write::ApiError;
use crate::metrics::{CountedKind, Metrics};
use crate::operator_group::is_copied;

use super::Context;
use crate::k8s::indexed_store::IndexedStore;
use crate::k8s::slim::slim;
use execute::Executor;
use stores::{Stores, managed, reflect};

/// How often a CSV is re-synced without events (OLM: 5 minutes); the default of
/// [`crate::reconcile::ControllerOptions::csv_resync`].
pub const RESYNC: Duration = Duration::from_secs(5 * 60);

/// Why a reconcile failed; the CSV is retried with back-off.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("CSV {csv}: {reason}")]
    Backoff { csv: String, reason: String },
    #[error(transparent)]
    StoresStopped(#[from] crate::k8s::store::StoreStopped),
}

impl crate::k8s::errors::ReconcileFailure for ReconcileError {
    fn error_label(&self) -> &'static str {
        match self {
            ReconcileError::Api(e) => e.metric_label(),
            ReconcileError::Backoff { .. } => crate::k8s::errors::DECISION,
            ReconcileError::StoresStopped(_) => crate::k8s::errors::SHUTDOWN,
        }
    }
}

/// What each reconcile shares.
struct Shared {
    client: Client,
    ctx: Arc<Context>,
    stores: Stores,
    requeue: tokio::sync::mpsc::UnboundedSender<ClusterServiceVersion>,
    discovery: Arc<observe::DiscoveryCache>,
    /// Consecutive failures per CSV, for exponential back-off.
    failures: Mutex<HashMap<ObjectRef<ClusterServiceVersion>, u32>>,
}

/// Runs the CSV controller until the process stops.
pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    // The CSVs are the process's shared store (the OperatorGroup side and resolution read them
    // too): copies are never driven (docs/csv-phases.md §1) and not in it. Each change of one
    // schedules its sync; the controller reads the object from the store when it runs (not
    // before the first list is in it), and skips a deleted one.
    let (csvs, csv_changes) = ctx.watches.csvs();
    let controller = Controller::for_stream(
        futures::stream::pending::<Result<ClusterServiceVersion, watcher::Error>>(),
        csvs.reader().clone(),
    )
    .reconcile_on(csv_changes.map(|csv| ObjectRef::from_obj(csv.as_ref())));

    // The kinds other controllers read too are the process's shared watches (`k8s::shared`).
    let shared = &ctx.watches;
    let (operator_groups, og_trigger) = stores::trigger_of(shared.operator_groups());
    let (subscriptions, sub_trigger) = stores::trigger_of(shared.subscriptions());
    let (crds, crd_trigger) = stores::trigger_of(shared.crds());
    let (api_services, api_trigger) = stores::trigger_of(shared.api_services());
    let (service_accounts, sa_trigger) = stores::trigger_of(shared.service_accounts());
    let (roles, role_trigger) = stores::trigger_of(shared.roles());
    let (role_bindings, rb_trigger) = stores::trigger_of(shared.role_bindings());
    let (cluster_roles, cr_trigger) = stores::trigger_of(shared.cluster_roles());
    let (services, service_trigger) = stores::trigger_of(shared.managed_services());
    let (deployments, dep_trigger) = reflect(&client, Some(&managed()), slim);
    let (cluster_role_bindings, crb_trigger) = reflect(&client, None, slim);
    let (secrets, secret_trigger) = reflect::<Secret>(&client, Some(&managed()), slim);
    let (validating_webhooks, vwc_trigger) =
        reflect::<ValidatingWebhookConfiguration>(&client, Some(&managed()), slim);
    let (mutating_webhooks, mwc_trigger) =
        reflect::<MutatingWebhookConfiguration>(&client, Some(&managed()), slim);
    let (operator_conditions, oc_trigger) = reflect::<OperatorCondition>(&client, None, slim);
    let stores = Stores {
        csvs: csvs.clone(),
        operator_groups,
        subscriptions,
        crds,
        api_services,
        deployments,
        service_accounts,
        roles,
        role_bindings,
        cluster_roles,
        cluster_role_bindings,
        secrets,
        services,
        validating_webhooks,
        mutating_webhooks,
        operator_conditions,
    };
    let discovery = Arc::new(observe::DiscoveryCache::default());
    let (requeue, requeued) = tokio::sync::mpsc::unbounded_channel();
    let requeued = UnboundedReceiverStream::new(requeued).map(Ok::<_, watcher::Error>);

    let controller = controller
        .watches_stream(requeued, |csv: ClusterServiceVersion| {
            Some(ObjectRef::from_obj(&csv))
        })
        .watches_stream(og_trigger, {
            let csvs = csvs.clone();
            move |og: OperatorGroup| stores::csvs_concerned_by_group(&csvs, &og)
        })
        .watches_stream(sub_trigger, |sub: Subscription| {
            stores::csv_of_subscription(&sub)
        })
        .watches_stream(crd_trigger.inspect(forget_discovery(&discovery)), {
            let csvs = csvs.clone();
            move |crd: CustomResourceDefinition| stores::csvs_using_crd(&csvs, &crd.name_any())
        })
        .watches_stream(api_trigger.inspect(forget_discovery(&discovery)), {
            let csvs = csvs.clone();
            move |api: APIService| stores::csvs_using_api_service(&csvs, &api)
        })
        .watches_stream(dep_trigger, |dep: Deployment| stores::owners(&dep))
        .watches_stream(sa_trigger, by_namespace::<ServiceAccount>(csvs.clone()))
        .watches_stream(role_trigger, by_namespace::<Role>(csvs.clone()))
        .watches_stream(rb_trigger, by_namespace::<RoleBinding>(csvs.clone()))
        .watches_stream(cr_trigger, |role: ClusterRole| stores::owners(&role))
        .watches_stream(crb_trigger, {
            let csvs = csvs.clone();
            move |binding: ClusterRoleBinding| stores::csvs_for_cluster_binding(&csvs, &binding)
        })
        .watches_stream(secret_trigger, |s: Secret| stores::owners(&s))
        .watches_stream(service_trigger, |s: Service| stores::owners(&s))
        .watches_stream(vwc_trigger, |w: ValidatingWebhookConfiguration| {
            stores::owners(&w)
        })
        .watches_stream(mwc_trigger, |w: MutatingWebhookConfiguration| {
            stores::owners(&w)
        })
        .watches_stream(oc_trigger, {
            let csvs = csvs.clone();
            move |oc: OperatorCondition| stores::csvs_of_operator_condition(&csvs, &oc)
        });

    let shared = Arc::new(Shared {
        client,
        ctx,
        stores,
        requeue,
        discovery,
        failures: Mutex::new(HashMap::new()),
    });
    controller
        .run(reconcile, error_policy, shared)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(%err, "CSV reconcile ended with an error");
            }
        })
        .await;
}

/// Clears the discovery cache on any CRD or APIService event: they change what is served.
fn forget_discovery<T>(cache: &Arc<observe::DiscoveryCache>) -> impl FnMut(&T) + Send + 'static {
    let cache = Arc::clone(cache);
    move |_| cache.invalidate()
}

/// Maps an object to every CSV of its namespace (RBAC, ServiceAccounts, OperatorGroups).
fn by_namespace<K: kube::Resource>(
    csvs: IndexedStore<ClusterServiceVersion>,
) -> impl Fn(K) -> Vec<ObjectRef<ClusterServiceVersion>> + Send + Sync + 'static {
    move |obj| stores::csvs_in(&csvs, obj.meta().namespace.as_deref().unwrap_or_default())
}

async fn reconcile(
    csv: Arc<ClusterServiceVersion>,
    shared: Arc<Shared>,
) -> Result<ControllerAction, ReconcileError> {
    let metrics = Arc::clone(&shared.ctx.metrics);
    // `csv_count` counts the CSVs this controller drives (copies are not watched).
    metrics.set_count(CountedKind::ClusterServiceVersion, shared.stores.csvs.len());
    let key = format!(
        "{}/{}",
        csv.metadata.namespace.as_deref().unwrap_or_default(),
        csv.name_any()
    );
    metrics
        .timed_reconcile("ClusterServiceVersion", &key, sync_one(csv, shared))
        .await
}

async fn sync_one(
    csv: Arc<ClusterServiceVersion>,
    shared: Arc<Shared>,
) -> Result<ControllerAction, ReconcileError> {
    shared.stores.ready().await?;
    let key = ObjectRef::from_obj(csv.as_ref());
    let seen = observe::observe(&shared.client, &shared.stores, &shared.discovery, &csv).await;
    let executor = Executor {
        client: &shared.client,
        events: &shared.ctx.events,
        requeue: &shared.requeue,
    };

    if csv.metadata.deletion_timestamp.is_some() {
        if is_copied(&csv) || !has_finalizer(&csv) {
            return Ok(ControllerAction::await_change());
        }
        let plan = cleanup(&csv, &seen);
        let done = deletion::finalize(&shared.client, &csv, &plan).await?;
        if done {
            shared
                .ctx
                .metrics
                .csv_deleted(csv.namespace().as_deref().unwrap_or_default(), name(&csv));
        }
        return Ok(if done {
            ControllerAction::await_change()
        } else {
            ControllerAction::requeue(Duration::from_secs(1))
        });
    }

    let now = shared.ctx.clock.now();
    let mut decision = sync(&csv, &seen, now);
    tracing::debug!(
        csv = %observe::key(&csv),
        phase = ?decision.phase(),
        actions = decision.actions.len(),
        requeue = ?decision.requeue,
        note = decision.note.as_deref().unwrap_or_default(),
        "CSV sync decided"
    );
    let (written, installed) = executor.run(&csv, &decision).await?;
    if let Some(outcome) = installed {
        if let Err(err) = &outcome {
            tracing::info!(csv = %observe::key(&csv), ?err, "install failed");
        }
        let certs = decision.actions.iter().find_map(|a| match a {
            Action::Install(plan) => plan.certs.as_ref(),
            _ => None,
        });
        decision = after_install_with_certs(&written, outcome, certs, now);
    }
    if let Some(status) = &decision.status {
        executor.write_status(&written, status).await?;
        count_upgrade(&shared.ctx.metrics, &written, status);
        // Phase changes matter to the CSVs on either side of an upgrade (docs/csv-phases.md §1.1).
        for other in [replaced_csv(&csv, &seen), replacement_of(&csv, &seen)]
            .into_iter()
            .flatten()
        {
            let _ = shared.requeue.send(other.clone());
        }
    }
    executor.publish(&csv, &decision.events).await;
    // The OperatorCondition is kept for every CSV this controller drives, whatever its phase
    // (OLM generates it in a controller of its own). A failed write is reported and retried at
    // the next sync; it does not hold up the CSV's own lifecycle.
    if !is_copied(&csv) {
        let writes = crate::csv::operator_condition::plan(&csv, &seen, now);
        if !writes.is_empty()
            && let Err(err) = operator_condition::write(
                &shared.client,
                crate::csv::identity::namespace(&csv),
                name(&csv),
                &writes,
            )
            .await
        {
            tracing::warn!(csv = %observe::key(&csv), %err, "OperatorCondition not written");
            executor
                .publish(
                    &csv,
                    &[crate::api::event::ObjectEvent::warning(
                        "OperatorConditionNotWritten",
                        err.to_string(),
                    )],
                )
                .await;
        }
    }
    // `csv_succeeded`/`csv_abnormal` after every sync, as OLM's EmitCSVMetric does.
    let mut synced = written;
    if let Some(status) = &decision.status {
        synced.status = Some(status.clone());
    }
    shared.ctx.metrics.csv_phase(&synced);

    let period = shared.ctx.options.csv_resync;
    let action = match decision.requeue {
        Requeue::Backoff(reason) => {
            return Err(ReconcileError::Backoff {
                csv: name(&csv).to_owned(),
                reason,
            });
        }
        // Our own status write brings the CSV back through the watch; an immediate requeue
        // would only race the cache.
        Requeue::After(d) if d.is_zero() && decision.status.is_some() => {
            ControllerAction::requeue(resync(period))
        }
        Requeue::After(d) if d >= period => ControllerAction::requeue(resync(period)),
        Requeue::After(d) => ControllerAction::requeue(d),
        Requeue::Resync => ControllerAction::requeue(resync(period)),
    };
    reset_failures(&shared, &key);
    Ok(action)
}

/// An old CSV entering `Replacing` is one upgrade (`csv_upgrade_count`), counted once on that
/// transition. (`csv_succeeded`/`csv_abnormal` are emitted after every sync, below the write.)
fn count_upgrade(
    metrics: &Metrics,
    csv: &ClusterServiceVersion,
    status: &crate::api::ClusterServiceVersionStatus,
) {
    let before = csv.status.as_ref().and_then(|s| s.phase.clone());
    if status.phase == Some(CsvPhase::Replacing) && before != Some(CsvPhase::Replacing) {
        metrics.csv_upgraded();
    }
}

/// The resync period with OLM's ±20 % jitter, so CSVs synced together (e.g. after a restart)
/// do not all come back at the same moment.
fn resync(period: Duration) -> Duration {
    use rand::Rng;
    period.mul_f64(rand::rng().random_range(0.8..1.2))
}

fn reset_failures(shared: &Shared, key: &ObjectRef<ClusterServiceVersion>) {
    if let Ok(mut failures) = shared.failures.lock() {
        failures.remove(key);
    }
}

/// Exponential back-off per CSV: 1 s doubling to 5 minutes.
fn error_policy(
    csv: Arc<ClusterServiceVersion>,
    err: &ReconcileError,
    shared: Arc<Shared>,
) -> ControllerAction {
    // A write based on a cache older than the object is refused with 409; the watch is about
    // to deliver the newer object, so retry soon and without counting it as a failure.
    if let ReconcileError::Api(api) = err
        && api.is_conflict()
    {
        tracing::debug!(%err, "CSV changed while syncing; retrying");
        return ControllerAction::requeue(Duration::from_millis(200));
    }
    let key = ObjectRef::from_obj(csv.as_ref());
    let attempts = match shared.failures.lock() {
        Ok(mut failures) => {
            let n = failures.entry(key).or_insert(0);
            *n = n.saturating_add(1);
            *n
        }
        Err(_) => 1,
    };
    match err {
        ReconcileError::Backoff { .. } => tracing::debug!(%err, attempts, "CSV not ready"),
        _ => tracing::warn!(%err, attempts, "CSV sync failed"),
    }
    let delay = crate::backoff::delay(attempts, Duration::from_secs(1), RESYNC);
    ControllerAction::requeue(delay)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::errors::ReconcileFailure;
    use crate::k8s::write::{ObjectKey, Operation};

    #[test]
    fn failed_reconciles_are_labelled_by_their_kind_of_failure() {
        let conflict = ApiError::new(
            Operation::WriteStatus,
            ObjectKey::new::<ClusterServiceVersion>(Some("ns"), "a.v1"),
            kube::Error::Api(
                kube::core::Status::failure("the object has been modified", "Conflict")
                    .with_code(409)
                    .boxed(),
            ),
        );
        assert_eq!(ReconcileError::Api(conflict).error_label(), "conflict");
        let not_ready = ReconcileError::Backoff {
            csv: "a.v1".into(),
            reason: "waiting for deployment".into(),
        };
        assert_eq!(not_ready.error_label(), "decision");
        let stopped = ReconcileError::StoresStopped(crate::k8s::store::StoreStopped {
            kind: "ClusterServiceVersion".into(),
        });
        assert_eq!(stopped.error_label(), "shutdown");
    }
}
