//! Reading one namespace for the Subscription sync, from the shared stores.
//!
//! The one live read: a plan a Subscription references that the store does not hold. The store
//! may simply not have seen it yet (each kind is watched on its own), and taking it for deleted
//! would release the Subscription and plan again; so the API server is asked, and only a plan
//! it does not have counts as gone.

use kube::Client;
use kube::api::Api;

use super::stores::{EXCLUDE_GLOBAL, SubscriptionStores, cluster_crd, installed_view};
use crate::api::{InstallPlan, InstallPlanStatus, Step, StepResource, Subscription};
use crate::k8s::read;
use crate::k8s::write::ApiError;
use crate::plan::downgrade_safety::ClusterCrd;
use crate::resolve::rollback::{CsvFacts, ON_FAILED_UPGRADE};
use crate::resolve::subscription::RollbackInput;
use crate::resolve::version_request::ALLOW_DOWNGRADE_ANNOTATION;
use crate::resolve::{InstalledCsv, OperatorGroups, installed_csv};

/// One namespace as the stores (and, for referenced plans they miss, the API server) show it.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub subscriptions: Vec<Subscription>,
    pub plans: Vec<InstallPlan>,
    /// Plans referenced by a Subscription that the API server does not have.
    pub gone_plans: Vec<String>,
    pub installed: Vec<InstalledCsv>,
    pub operator_groups: OperatorGroups,
    pub namespace_uid: Option<String>,
    /// The cluster's CRDs, read only when a Subscription allows a downgrade or a rollback.
    pub crds: Vec<ClusterCrd>,
    /// What the rollback of a failed upgrade reads (docs/upgrades.md §3).
    pub rollback: RollbackInput,
}

pub async fn observe(
    client: &Client,
    stores: &SubscriptionStores,
    namespace: &str,
) -> Result<Observed, ApiError> {
    let subscriptions: Vec<Subscription> = stores
        .subscriptions
        .in_namespace(namespace)
        .iter()
        .map(|s| Subscription::clone(s))
        .collect();
    if subscriptions.is_empty() {
        // Nothing to resolve: the last Subscription went (its deletion queued this sync).
        return Ok(Observed::default());
    }
    let mut plans: Vec<InstallPlan> = stores
        .plans
        .in_namespace(namespace)
        .iter()
        .map(|p| without_manifests(p))
        .collect();
    let mut gone_plans = Vec::new();
    let api: Api<InstallPlan> = Api::namespaced(client.clone(), namespace);
    for name in referenced_plans(&subscriptions) {
        if plans
            .iter()
            .any(|p| p.metadata.name.as_ref() == Some(&name))
            || gone_plans.contains(&name)
        {
            continue;
        }
        match read::get(&api, &name).await? {
            Some(plan) => plans.push(without_manifests(&plan)),
            None => gone_plans.push(name),
        }
    }
    let installed = stores
        .csvs
        .in_namespace(namespace)
        .iter()
        .filter_map(|c| installed_csv(&installed_view(c)))
        .collect();
    let groups = stores.operator_groups.in_namespace(namespace);
    // The store holds them ordered by name.
    let names: Vec<String> = groups
        .iter()
        .filter_map(|g| g.metadata.name.clone())
        .collect();
    let exclude_global_catalogs = matches!(groups.as_slice(), [one] if one
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXCLUDE_GLOBAL))
        .is_some_and(|v| v == "true"));
    let namespace_uid = stores
        .namespaces
        .get("", namespace)
        .and_then(|n| n.metadata.uid.clone());
    let annotated = |key: &str| {
        subscriptions.iter().any(|s| {
            s.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(key))
        })
    };
    let group_policy = match groups.as_slice() {
        [one] => one
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ON_FAILED_UPGRADE))
            .map(|v| (one.metadata.name.clone().unwrap_or_default(), v.clone())),
        _ => None,
    };
    let rolling_back = group_policy.is_some() || annotated(ON_FAILED_UPGRADE);
    let rollback = RollbackInput {
        csvs: if rolling_back {
            stores
                .csvs
                .in_namespace(namespace)
                .iter()
                .map(|c| CsvFacts::of(c))
                .collect()
        } else {
            Vec::new()
        },
        group_policy,
    };
    let crds = if annotated(ALLOW_DOWNGRADE_ANNOTATION) || rolling_back {
        stores
            .crds
            .in_namespace("")
            .iter()
            .map(|c| cluster_crd(c))
            .collect()
    } else {
        Vec::new()
    };
    Ok(Observed {
        crds,
        rollback,
        subscriptions,
        plans,
        gone_plans,
        installed,
        operator_groups: OperatorGroups {
            names,
            exclude_global_catalogs,
        },
        namespace_uid,
    })
}

/// A plan as a Subscription decision reads it: everything but its steps' manifests, most of
/// a plan's size (the decision reads which steps there are, never what they create).
fn without_manifests(plan: &InstallPlan) -> InstallPlan {
    let status = plan.status.as_ref().map(|status| InstallPlanStatus {
        phase: status.phase.clone(),
        conditions: status.conditions.clone(),
        catalog_sources: status.catalog_sources.clone(),
        plan: status.plan.as_ref().map(|steps| {
            steps
                .iter()
                .map(|step| Step {
                    resolving: step.resolving.clone(),
                    resource: StepResource {
                        source_name: step.resource.source_name.clone(),
                        source_namespace: step.resource.source_namespace.clone(),
                        group: step.resource.group.clone(),
                        version: step.resource.version.clone(),
                        kind: step.resource.kind.clone(),
                        name: step.resource.name.clone(),
                        manifest: None,
                    },
                    optional: step.optional,
                    status: step.status.clone(),
                })
                .collect()
        }),
        bundle_lookups: status.bundle_lookups.clone(),
        attenuated_service_account_ref: status.attenuated_service_account_ref.clone(),
        start_time: status.start_time.clone(),
        message: status.message.clone(),
    });
    InstallPlan {
        metadata: plan.metadata.clone(),
        spec: plan.spec.clone(),
        status,
    }
}

fn referenced_plans(subscriptions: &[Subscription]) -> Vec<String> {
    subscriptions
        .iter()
        .filter_map(|s| s.status.as_ref())
        .flat_map(|st| {
            let by_ref = st.install_plan_ref.as_ref().and_then(|r| r.name.clone());
            let by_name = st.install_plan.as_ref().map(|r| r.name.clone());
            by_ref.into_iter().chain(by_name)
        })
        .filter(|n| !n.is_empty())
        .collect()
}
