//! What makes an Operator sync again (docs/operator-api.md §5): a change of any component
//! kind queues the Operators its labels name, the Operators of the CSVs that own it, and, for
//! Subscriptions, CSVs, InstallPlans and CRDs, the Operators of the package they belong to.

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::{Resource, ResourceExt};

use crate::api::{ClusterServiceVersion, InstallPlan, Subscription};
use crate::k8s::indexed_store::IndexedStore;
use crate::k8s::shared::Changes;
use crate::k8s::store::NamespacedStore;
use crate::operator_api::component::csv_owners;
use crate::operator_api::{operator_name, operator_names};
use crate::reconcile::Context;
use crate::reconcile::work_queue::WorkQueue;

use super::observe::Stores;

/// Who a change concerns, read from the stores at the time of the change.
#[derive(Clone)]
struct Lookup {
    subscriptions: NamespacedStore<Subscription>,
    csvs: IndexedStore<ClusterServiceVersion>,
}

impl Lookup {
    /// The Operators of the CSV `ns/name`: its labels, and the package of each Subscription
    /// of the namespace that installed it (before the CSV is labelled).
    fn of_csv(&self, ns: &str, name: &str) -> Vec<String> {
        let mut out = self
            .csvs
            .get(ns, name)
            .map(|c| operator_names(c.metadata.labels.as_ref()))
            .unwrap_or_default();
        out.extend(
            self.subscriptions
                .in_namespace(ns)
                .iter()
                .filter(|s| {
                    s.status.as_ref().and_then(|st| st.installed_csv.as_deref()) == Some(name)
                })
                .map(|s| operator_name(&s.spec.name, ns)),
        );
        out
    }

    /// The Operators of an InstallPlan: those of the Subscriptions that point at it.
    fn of_plan(&self, plan: &InstallPlan) -> Vec<String> {
        let ns = plan.namespace().unwrap_or_default();
        let name = plan.name_any();
        self.subscriptions
            .in_namespace(&ns)
            .iter()
            .filter(|s| {
                s.status
                    .as_ref()
                    .and_then(|st| st.install_plan_ref.as_ref())
                    .and_then(|r| r.name.as_deref())
                    == Some(name.as_str())
            })
            .map(|s| operator_name(&s.spec.name, &ns))
            .collect()
    }

    /// The Operators of every CSV owning the CRD `name`.
    fn of_crd(&self, name: &str) -> Vec<String> {
        self.csvs
            .all()
            .iter()
            .filter(|c| {
                c.spec
                    .custom_resource_definitions
                    .iter()
                    .flat_map(|d| d.owned.iter().flatten())
                    .any(|d| d.name == name)
            })
            .flat_map(|c| self.of_csv(&c.namespace().unwrap_or_default(), &c.name_any()))
            .collect()
    }

    /// Any object: the Operators its labels name and those of the CSVs owning it.
    fn of_object<K: Resource>(&self, obj: &K) -> Vec<String> {
        let mut out = operator_names(obj.meta().labels.as_ref());
        for owner in csv_owners(obj) {
            out.extend(self.of_csv(&owner.namespace, &owner.name));
        }
        out
    }
}

/// The stores, and a task per watched kind that queues the Operators its changes concern.
pub fn watch(ctx: &Context, queue: &WorkQueue<String>) -> (Stores, Vec<BoxFuture<'static, ()>>) {
    let w = &ctx.watches;
    let (operators, operator_changes) = w.operators();
    let (subscriptions, sub_changes) = w.subscriptions();
    let (csvs, csv_changes) = w.csvs();
    let (install_plans, plan_changes) = w.install_plans();
    let (operator_conditions, oc_changes) = w.operator_conditions();
    let (crds, crd_changes) = w.crds();
    let (api_services, api_changes) = w.api_services();
    let (deployments, dep_changes) = w.managed_deployments();
    let (services, service_changes) = w.managed_services();
    let (secrets, secret_changes) = w.managed_secrets();
    let (service_accounts, sa_changes) = w.service_accounts();
    let (roles, role_changes) = w.roles();
    let (role_bindings, rb_changes) = w.role_bindings();
    let (cluster_roles, cr_changes) = w.cluster_roles();
    let (cluster_role_bindings, crb_changes) = w.cluster_role_bindings();
    let (namespaces, ns_changes) = w.namespaces();
    let (validating_webhooks, vwc_changes) = w.managed_validating_webhooks();
    let (mutating_webhooks, mwc_changes) = w.managed_mutating_webhooks();
    let lookup = Lookup {
        subscriptions: subscriptions.clone(),
        csvs: csvs.clone(),
    };
    let feeds = vec![
        feed(operator_changes, queue, &lookup, |_, op| {
            vec![op.name_any()]
        }),
        feed(sub_changes, queue, &lookup, |_, sub| {
            let mut out = operator_names(sub.metadata.labels.as_ref());
            out.push(operator_name(
                &sub.spec.name,
                &sub.namespace().unwrap_or_default(),
            ));
            out
        }),
        feed(csv_changes, queue, &lookup, |l, csv| {
            l.of_csv(&csv.namespace().unwrap_or_default(), &csv.name_any())
                .into_iter()
                .chain(operator_names(csv.metadata.labels.as_ref()))
                .collect()
        }),
        feed(plan_changes, queue, &lookup, |l, plan| {
            let mut out = l.of_object(plan);
            out.extend(l.of_plan(plan));
            out
        }),
        feed(crd_changes, queue, &lookup, |l, crd| {
            let mut out = l.of_object(crd);
            out.extend(l.of_crd(&crd.name_any()));
            out
        }),
        feed(oc_changes, queue, &lookup, |l, o| l.of_object(o)),
        feed(api_changes, queue, &lookup, |l, o| l.of_object(o)),
        feed(dep_changes, queue, &lookup, |l, o| l.of_object(o)),
        feed(service_changes, queue, &lookup, |l, o| l.of_object(o)),
        feed(secret_changes, queue, &lookup, |l, o| l.of_object(o)),
        feed(sa_changes, queue, &lookup, |l, o| l.of_object(o)),
        feed(role_changes, queue, &lookup, |l, o| l.of_object(o)),
        feed(rb_changes, queue, &lookup, |l, o| l.of_object(o)),
        feed(cr_changes, queue, &lookup, |l, o| l.of_object(o)),
        feed(crb_changes, queue, &lookup, |l, o| l.of_object(o)),
        feed(ns_changes, queue, &lookup, |l, o| l.of_object(o)),
        feed(vwc_changes, queue, &lookup, |l, o| l.of_object(o)),
        feed(mwc_changes, queue, &lookup, |l, o| l.of_object(o)),
    ];
    let stores = Stores {
        operators,
        subscriptions,
        csvs,
        install_plans,
        operator_conditions,
        crds,
        api_services,
        deployments,
        services,
        secrets,
        service_accounts,
        roles,
        role_bindings,
        cluster_roles,
        cluster_role_bindings,
        namespaces,
        validating_webhooks,
        mutating_webhooks,
    };
    (stores, feeds)
}

/// Drives `changes` and queues the Operators `concerned` names for each changed object.
fn feed<K: Send + Sync + 'static>(
    changes: Changes<K>,
    queue: &WorkQueue<String>,
    lookup: &Lookup,
    concerned: impl Fn(&Lookup, &K) -> Vec<String> + Send + 'static,
) -> BoxFuture<'static, ()> {
    let (queue, lookup) = (queue.clone(), lookup.clone());
    Box::pin(changes.for_each(move |changed: Arc<K>| {
        queue.add_all(concerned(&lookup, &changed));
        async {}
    }))
}
