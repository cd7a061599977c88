//! Reading one namespace for the Subscription sync. Live lists, not caches: the sync decides
//! whether to create InstallPlans, and a stale cache is how duplicate plans are born.

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};

use crate::api::keys::COPIED_FROM_LABEL;
use crate::api::{InstallPlan, OperatorGroup, Subscription};
use crate::resolve::{InstalledCsv, OperatorGroups, installed_csv};

const EXCLUDE_GLOBAL: &str = "olm.operatorframework.io/exclude-global-namespace-resolution";

/// Everything the sync reads from the API server.
pub struct Observed {
    pub subscriptions: Vec<Subscription>,
    pub plans: Vec<InstallPlan>,
    pub installed: Vec<InstalledCsv>,
    pub operator_groups: OperatorGroups,
}

pub fn csv_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", "ClusterServiceVersion"),
        "clusterserviceversions",
    )
}

pub async fn observe(client: &Client, namespace: &str) -> Result<Observed, kube::Error> {
    let lp = ListParams::default();
    let subscriptions = Api::<Subscription>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await?
        .items;
    if subscriptions.is_empty() {
        // Nothing to resolve: the last Subscription went (its deletion queued this sync).
        return Ok(Observed {
            subscriptions,
            plans: Vec::new(),
            installed: Vec::new(),
            operator_groups: OperatorGroups::default(),
        });
    }
    let plans = Api::<InstallPlan>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await?
        .items;
    // Copies are not installed here (docs/resolution.md §3); the selector spares their transfer and
    // `installed_csv` still drops a copy that lost its label.
    let not_copies = ListParams::default().labels(&format!("!{COPIED_FROM_LABEL}"));
    let csvs = Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &csv_resource())
        .list(&not_copies)
        .await?
        .items;
    let groups = Api::<OperatorGroup>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await?
        .items;
    let installed = csvs
        .iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .filter_map(|v| installed_csv(&v))
        .collect();
    let mut names: Vec<String> = groups
        .iter()
        .filter_map(|g| g.metadata.name.clone())
        .collect();
    names.sort();
    let exclude_global_catalogs = matches!(groups.as_slice(), [one] if one
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXCLUDE_GLOBAL))
        .is_some_and(|v| v == "true"));
    Ok(Observed {
        subscriptions,
        plans,
        installed,
        operator_groups: OperatorGroups {
            names,
            exclude_global_catalogs,
        },
    })
}
