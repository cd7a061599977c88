//! What one Operator sync reads, from the process's shared stores: the Operator, the
//! Subscriptions of its package and namespace, and every object the decision wants
//! (`operator_api::decision::Interest`).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::PartialObjectMeta;
use kube::{Resource, ResourceExt};
use serde::Serialize;

use crate::api::{ClusterServiceVersion, InstallPlan, Operator, OperatorCondition, Subscription};
use crate::k8s::effects::{Effects, Write};
use crate::k8s::indexed_store::IndexedStore;
use crate::k8s::store::{NamespacedStore, StoreStopped};
use crate::operator_api::component::{Component, csv_conditions, status_conditions};
use crate::operator_api::decision::{Interest, Observed};
use crate::operator_api::operands::{Operand, OperandWatch, operand_labels, operand_watches};
use crate::operator_api::{SubscriptionView, decide, operator_name};

/// The stores the controller reads: OLM's component kinds (docs/operator-api.md §2).
pub struct Stores {
    pub operators: NamespacedStore<Operator>,
    pub subscriptions: NamespacedStore<Subscription>,
    pub csvs: IndexedStore<ClusterServiceVersion>,
    pub install_plans: IndexedStore<InstallPlan>,
    pub operator_conditions: NamespacedStore<OperatorCondition>,
    pub crds: NamespacedStore<CustomResourceDefinition>,
    pub api_services: NamespacedStore<APIService>,
    pub deployments: NamespacedStore<Deployment>,
    pub services: NamespacedStore<Service>,
    pub secrets: NamespacedStore<Secret>,
    pub service_accounts: NamespacedStore<ServiceAccount>,
    pub roles: NamespacedStore<Role>,
    pub role_bindings: NamespacedStore<RoleBinding>,
    pub cluster_roles: NamespacedStore<ClusterRole>,
    pub cluster_role_bindings: NamespacedStore<ClusterRoleBinding>,
    pub namespaces: NamespacedStore<PartialObjectMeta<Namespace>>,
    /// `olm.managed` webhook configurations (those CSVs' webhook definitions made).
    pub validating_webhooks: NamespacedStore<ValidatingWebhookConfiguration>,
    pub mutating_webhooks: NamespacedStore<MutatingWebhookConfiguration>,
}

impl Stores {
    /// Waits until every store has listed once: a sync on a half-filled cache would find
    /// components missing and write a status that lists too few.
    pub async fn ready(&self) -> Result<(), StoreStopped> {
        self.operators.wait_until_ready().await?;
        self.subscriptions.wait_until_ready().await?;
        self.csvs.wait_until_ready().await?;
        self.install_plans.wait_until_ready().await?;
        self.operator_conditions.wait_until_ready().await?;
        self.crds.wait_until_ready().await?;
        self.api_services.wait_until_ready().await?;
        self.deployments.wait_until_ready().await?;
        self.services.wait_until_ready().await?;
        self.secrets.wait_until_ready().await?;
        self.service_accounts.wait_until_ready().await?;
        self.roles.wait_until_ready().await?;
        self.role_bindings.wait_until_ready().await?;
        self.cluster_roles.wait_until_ready().await?;
        self.cluster_role_bindings.wait_until_ready().await?;
        self.namespaces.wait_until_ready().await?;
        self.validating_webhooks.wait_until_ready().await?;
        self.mutating_webhooks.wait_until_ready().await?;
        Ok(())
    }
}

/// One sync's observation, owned.
pub struct Observation {
    operator: Option<Arc<Operator>>,
    subscriptions: Vec<SubscriptionView>,
    interest: Interest,
    components: Vec<Component>,
}

impl Observation {
    /// The operand watches the Operator `name` needs (docs/operator-api.md §2).
    pub fn operand_watches(
        &self,
        name: &str,
        crds: &NamespacedStore<CustomResourceDefinition>,
    ) -> BTreeSet<OperandWatch> {
        let sources: Vec<_> = self
            .interest
            .csvs
            .iter()
            .map(|c| c.operands.clone())
            .collect();
        operand_watches(name, &sources, |crd| crds.get("", crd))
    }

    /// Adds the operands found: labelled ones join the status; the label patches of the others
    /// are returned, each with the watch whose account writes it.
    pub fn add_operands<'a>(&mut self, operands: &'a [Operand]) -> Vec<(&'a OperandWatch, Write)> {
        self.components
            .extend(operands.iter().map(|o| o.component.clone()));
        operand_labels(&self.interest.label_key, operands)
    }

    pub fn decide(&self, name: &str) -> Effects {
        decide(&Observed {
            name,
            operator: self.operator.as_deref(),
            subscriptions: &self.subscriptions,
            interest: &self.interest,
            components: &self.components,
        })
    }
}

/// Reads what the Operator `name` is made of; `None` when the name makes no label key.
pub fn observe(stores: &Stores, name: &str) -> Option<Observation> {
    let subs = stores.subscriptions.all();
    let ours: Vec<&Arc<Subscription>> = subs
        .iter()
        .filter(|s| operator_name(&s.spec.name, &s.namespace().unwrap_or_default()) == name)
        .collect();
    let subscriptions: Vec<SubscriptionView> =
        ours.iter().map(|s| SubscriptionView::of(s)).collect();
    let csvs = stores.csvs.all();
    let interest = Interest::new(name, &subscriptions, csvs.iter().map(|c| c.as_ref()))?;

    let mut components: Vec<Component> =
        subscriptions.iter().map(|s| s.component.clone()).collect();
    let mut add = |c: Component| components.push(c);
    for sub in subs
        .iter()
        .filter(|s| !ours.iter().any(|o| Arc::ptr_eq(o, s)))
    {
        if interest.wants(sub.as_ref()) {
            add(SubscriptionView::of(sub).component);
        }
    }
    for csv in csvs.iter().filter(|c| interest.wants(c.as_ref())) {
        add(Component::of(csv.as_ref(), csv_conditions(csv)));
    }
    with_conditions(&interest, stores.install_plans.all(), &mut add);
    with_conditions(&interest, stores.operator_conditions.all(), &mut add);
    with_conditions(&interest, stores.crds.all(), &mut add);
    with_conditions(&interest, stores.api_services.all(), &mut add);
    with_conditions(&interest, stores.deployments.all(), &mut add);
    with_conditions(&interest, stores.services.all(), &mut add);
    // Kinds without conditions: OLM reads only their metadata.
    metadata_only(&interest, stores.secrets.all(), &mut add);
    metadata_only(&interest, stores.service_accounts.all(), &mut add);
    metadata_only(&interest, stores.roles.all(), &mut add);
    metadata_only(&interest, stores.role_bindings.all(), &mut add);
    metadata_only(&interest, stores.cluster_roles.all(), &mut add);
    metadata_only(&interest, stores.cluster_role_bindings.all(), &mut add);
    metadata_only(&interest, stores.namespaces.all(), &mut add);
    metadata_only(&interest, stores.validating_webhooks.all(), &mut add);
    metadata_only(&interest, stores.mutating_webhooks.all(), &mut add);

    Some(Observation {
        operator: stores.operators.get("", name),
        subscriptions,
        interest,
        components,
    })
}

fn with_conditions<K>(interest: &Interest, objects: Vec<Arc<K>>, add: &mut impl FnMut(Component))
where
    K: Resource<DynamicType = ()> + Serialize,
{
    for obj in objects.iter().filter(|o| interest.wants(o.as_ref())) {
        let json = serde_json::to_value(obj.as_ref()).unwrap_or_default();
        add(Component::of(obj.as_ref(), status_conditions(&json)));
    }
}

fn metadata_only<K>(interest: &Interest, objects: Vec<Arc<K>>, add: &mut impl FnMut(Component))
where
    K: Resource<DynamicType = ()>,
{
    for obj in objects.iter().filter(|o| interest.wants(o.as_ref())) {
        add(Component::of(obj.as_ref(), Vec::new()));
    }
}
