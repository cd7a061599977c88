//! What makes a CSV sync again (docs/csv-phases.md §1.1), as feeds of the controller's queue:
//! every watched kind keeps its store current and adds the keys of the CSVs a change concerns.

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::ResourceExt;

use crate::api::{OperatorCondition, OperatorGroup, Subscription};
use crate::reconcile::Context;
use crate::reconcile::keys::NamespacedName;
use crate::reconcile::work_queue::WorkQueue;

use super::stores::{self, Stores, Trigger, trigger_of};
use crate::k8s::discovery::ServedApis;

/// The stores, and a task per watched kind that queues the CSVs its changes concern.
pub fn watch(
    ctx: &Context,
    queue: &WorkQueue<NamespacedName>,
) -> (Stores, Vec<BoxFuture<'static, ()>>) {
    let discovery = &ctx.served_apis;
    // The CSVs are the process's shared store (the OperatorGroup side and resolution read them
    // too): copies are never driven (docs/csv-phases.md §1) and not in it.
    let (csvs, csv_changes) = ctx.watches.csvs();
    let shared = &ctx.watches;
    let (operator_groups, og_trigger) = trigger_of(shared.operator_groups());
    let (subscriptions, sub_trigger) = trigger_of(shared.subscriptions());
    let (crds, crd_trigger) = trigger_of(shared.crds());
    let (api_services, api_trigger) = trigger_of(shared.api_services());
    let (service_accounts, sa_trigger) = trigger_of(shared.service_accounts());
    let (roles, role_trigger) = trigger_of(shared.roles());
    let (role_bindings, rb_trigger) = trigger_of(shared.role_bindings());
    let (cluster_roles, cr_trigger) = trigger_of(shared.cluster_roles());
    let (services, service_trigger) = trigger_of(shared.managed_services());
    // Shared with the Operator controller (docs/operator-api.md §5), as are the webhooks'.
    let (deployments, dep_trigger) = trigger_of(shared.managed_deployments());
    let (cluster_role_bindings, crb_trigger) = trigger_of(shared.cluster_role_bindings());
    let (secrets, secret_trigger) = trigger_of(shared.managed_secrets());
    let (validating_webhooks, vwc_trigger) = trigger_of(shared.managed_validating_webhooks());
    let (mutating_webhooks, mwc_trigger) = trigger_of(shared.managed_mutating_webhooks());
    let (operator_conditions, oc_trigger) = trigger_of(shared.operator_conditions());

    let by_namespace = |csvs: &crate::k8s::indexed_store::IndexedStore<_>| {
        let csvs = csvs.clone();
        move |ns: Option<String>| stores::csvs_in(&csvs, ns.as_deref().unwrap_or_default())
    };
    let feeds = vec![
        // Each change of a CSV schedules its sync; the sync reads it from the store.
        {
            let queue = queue.clone();
            Box::pin(csv_changes.for_each(move |csv| {
                queue.add(stores::key_of(&csv));
                async {}
            }))
        },
        feed(og_trigger, queue, {
            let csvs = csvs.clone();
            move |og: OperatorGroup| stores::csvs_concerned_by_group(&csvs, &og)
        }),
        feed(sub_trigger, queue, |sub: Subscription| {
            stores::csv_of_subscription(&sub)
        }),
        // A CRD or an APIService changes what the server serves: discovery is asked again.
        feed(forgetting(crd_trigger, discovery), queue, {
            let csvs = csvs.clone();
            move |crd: CustomResourceDefinition| stores::csvs_using_crd(&csvs, &crd.name_any())
        }),
        feed(forgetting(api_trigger, discovery), queue, {
            let csvs = csvs.clone();
            move |api: APIService| stores::csvs_using_api_service(&csvs, &api)
        }),
        feed(dep_trigger, queue, |dep: Deployment| stores::owners(&dep)),
        feed(sa_trigger, queue, {
            let of = by_namespace(&csvs);
            move |sa: ServiceAccount| of(sa.namespace())
        }),
        feed(role_trigger, queue, {
            let of = by_namespace(&csvs);
            move |role: Role| of(role.namespace())
        }),
        feed(rb_trigger, queue, {
            let of = by_namespace(&csvs);
            move |binding: RoleBinding| of(binding.namespace())
        }),
        feed(cr_trigger, queue, |role: ClusterRole| stores::owners(&role)),
        feed(crb_trigger, queue, {
            let csvs = csvs.clone();
            move |binding: ClusterRoleBinding| stores::csvs_for_cluster_binding(&csvs, &binding)
        }),
        feed(secret_trigger, queue, |s: Secret| stores::owners(&s)),
        feed(service_trigger, queue, |s: Service| stores::owners(&s)),
        feed(vwc_trigger, queue, |w: ValidatingWebhookConfiguration| {
            stores::owners(&w)
        }),
        feed(mwc_trigger, queue, |w: MutatingWebhookConfiguration| {
            stores::owners(&w)
        }),
        feed(oc_trigger, queue, {
            let csvs = csvs.clone();
            move |oc: OperatorCondition| stores::csvs_of_operator_condition(&csvs, &oc)
        }),
    ];
    let stores = Stores {
        csvs,
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
    (stores, feeds)
}

/// Drives `trigger` (which keeps its store current) and queues the keys `concerned` maps each
/// changed object to. A watch error is the watcher's to retry; it queues nothing.
fn feed<K: Send + 'static>(
    trigger: Trigger<K>,
    queue: &WorkQueue<NamespacedName>,
    concerned: impl Fn(K) -> Vec<NamespacedName> + Send + 'static,
) -> BoxFuture<'static, ()> {
    let queue = queue.clone();
    Box::pin(trigger.for_each(move |changed| {
        if let Ok(obj) = changed {
            queue.add_all(concerned(obj));
        }
        async {}
    }))
}

/// `trigger`, clearing the process's discovery cache (`k8s::discovery`) on every change.
fn forgetting<K: Send + 'static>(trigger: Trigger<K>, cache: &Arc<ServedApis>) -> Trigger<K> {
    let cache = Arc::clone(cache);
    trigger.inspect(move |_| cache.invalidate()).boxed()
}
