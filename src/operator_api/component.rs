//! What the Operator decision sees of one object (docs/operator-api.md §2): its key, labels,
//! the CSVs that own it and its conditions, read the way OLM reads them.

use std::collections::BTreeMap;

use kube::{Resource, ResourceExt};
use serde_json::Value;

use crate::api::keys::{OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};
use crate::api::{ClusterServiceVersion, ComponentCondition, RichReference, Subscription};
use crate::csv::identity::CSV_KIND;
use crate::k8s::write::ObjectKey;

/// A CSV that owns an object: by an ownerReference (with its uid) or by OLM's owner labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvOwner {
    pub namespace: String,
    pub name: String,
    /// The uid of an ownerReference; `None` for owner labels, which carry none.
    pub uid: Option<String>,
}

/// One object that is, or may become, a component.
#[derive(Debug, Clone, PartialEq)]
pub struct Component {
    pub key: ObjectKey,
    pub labels: BTreeMap<String, String>,
    pub owners: Vec<CsvOwner>,
    /// Conditions as the Operator's refs show them (OLM: `.status.conditions`, or the phase of
    /// a CSV).
    pub conditions: Vec<ComponentCondition>,
}

impl Component {
    /// `obj`'s component view; `conditions` come from [`status_conditions`] or
    /// [`csv_conditions`].
    pub fn of<K: Resource<DynamicType = ()>>(obj: &K, conditions: Vec<ComponentCondition>) -> Self {
        Self {
            key: ObjectKey::of(obj),
            labels: obj.labels().clone(),
            owners: csv_owners(obj),
            conditions,
        }
    }

    pub fn has_label(&self, key: &str) -> bool {
        self.labels.contains_key(key)
    }

    /// Whether the CSV `ns/name` (uid `uid`) owns this object.
    pub fn owned_by(&self, namespace: &str, name: &str, uid: Option<&str>) -> bool {
        self.owners.iter().any(|o| {
            o.namespace == namespace
                && o.name == name
                && (o.uid.is_none() || uid.is_none() || o.uid.as_deref() == uid)
        })
    }

    /// The reference the Operator's status lists: kind, namespace, name, apiVersion and
    /// conditions (OLM leaves uid and resourceVersion out, so a component's every write does
    /// not rewrite the Operator).
    pub fn reference(&self) -> RichReference {
        RichReference {
            kind: Some(self.key.resource.kind.clone()),
            namespace: self.key.namespace.clone(),
            name: Some(self.key.name.clone()),
            api_version: Some(self.key.resource.api_version.clone()),
            conditions: (!self.conditions.is_empty()).then(|| self.conditions.clone()),
            ..RichReference::default()
        }
    }
}

/// The CSVs that own `obj`: its ClusterServiceVersion ownerReferences (same namespace), and
/// the CSV its `olm.owner*` labels name (cluster-scoped objects and cross-namespace RBAC).
pub fn csv_owners<K: Resource>(obj: &K) -> Vec<CsvOwner> {
    let labels = obj.labels();
    let mut out = Vec::new();
    if labels.get(OWNER_KIND_LABEL).map(String::as_str) == Some(CSV_KIND)
        && let (Some(name), Some(ns)) = (labels.get(OWNER_LABEL), labels.get(OWNER_NAMESPACE_LABEL))
    {
        out.push(CsvOwner {
            namespace: ns.clone(),
            name: name.clone(),
            uid: None,
        });
    }
    if let Some(ns) = obj.namespace() {
        for owner in obj.owner_references().iter().filter(|o| o.kind == CSV_KIND) {
            out.push(CsvOwner {
                namespace: ns.clone(),
                name: owner.name.clone(),
                uid: Some(owner.uid.clone()),
            });
        }
    }
    out
}

/// `.status.conditions` of an object given as JSON, each reduced to the fields of OLM's
/// component condition (type, status, reason, message and the two times); anything else in
/// an entry (`observedGeneration`, `lastHeartbeatTime`) is dropped, as OLM drops it.
pub fn status_conditions(object: &Value) -> Vec<ComponentCondition> {
    let Some(items) = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    items
        .iter()
        .map(|c| {
            let text = |field: &str| c.get(field).and_then(Value::as_str);
            let time = |field: &str| {
                c.get(field)
                    .and_then(|v| serde_json::from_value(v.clone()).ok())
            };
            ComponentCondition {
                type_: text("type").unwrap_or_default().to_owned(),
                status: text("status").unwrap_or_default().to_owned(),
                reason: text("reason").filter(|s| !s.is_empty()).map(str::to_owned),
                message: text("message").filter(|s| !s.is_empty()).map(str::to_owned),
                last_update_time: time("lastUpdateTime"),
                last_transition_time: time("lastTransitionTime"),
            }
        })
        .collect()
}

/// A CSV's one condition: its phase as the type, status `True`, with the status's reason,
/// message and times (OLM's Operator controller reads CSVs so, docs/operator-api.md §3).
/// None while the CSV has no status.
pub fn csv_conditions(csv: &ClusterServiceVersion) -> Vec<ComponentCondition> {
    let Some(status) = &csv.status else {
        return Vec::new();
    };
    let json = serde_json::to_value(status).unwrap_or_default();
    let text = |field: &str| {
        json.get(field)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    vec![ComponentCondition {
        type_: text("phase").unwrap_or_default(),
        status: "True".to_owned(),
        reason: text("reason"),
        message: text("message"),
        last_update_time: status.last_update_time.clone(),
        last_transition_time: status.last_transition_time.clone(),
    }]
}

/// What the decision reads of a Subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionView {
    pub component: Component,
    pub package: String,
    pub installed_csv: Option<String>,
    /// `status.installPlanRef`: the latest InstallPlan (namespace, name).
    pub install_plan: Option<(String, String)>,
}

impl SubscriptionView {
    pub fn of(sub: &Subscription) -> Self {
        let json = serde_json::to_value(sub).unwrap_or_default();
        let status = sub.status.as_ref();
        Self {
            component: Component::of(sub, status_conditions(&json)),
            package: sub.spec.name.clone(),
            installed_csv: status
                .and_then(|s| s.installed_csv.clone())
                .filter(|s| !s.is_empty()),
            install_plan: status.and_then(|s| s.install_plan_ref.as_ref()).map(|r| {
                (
                    r.namespace.clone().unwrap_or_default(),
                    r.name.clone().unwrap_or_default(),
                )
            }),
        }
    }

    pub fn namespace(&self) -> &str {
        self.component.key.namespace.as_deref().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use serde_json::json;

    #[test]
    fn conditions_keep_olms_fields_only() {
        let dep = json!({"status": {"conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
             "message": "ok", "lastUpdateTime": "2026-11-29T04:00:00Z",
             "lastTransitionTime": "2026-11-29T03:00:00Z", "observedGeneration": 3}
        ]}});
        let got = status_conditions(&dep);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].type_, "Available");
        assert_eq!(got[0].reason.as_deref(), Some("MinimumReplicasAvailable"));
        assert!(got[0].last_update_time.is_some() && got[0].last_transition_time.is_some());
        let back = serde_json::to_value(&got[0]).unwrap();
        assert!(back.get("observedGeneration").is_none(), "{back}");
        assert!(status_conditions(&json!({"metadata": {}})).is_empty());
    }

    #[test]
    fn owners_come_from_owner_references_and_owner_labels() {
        let dep: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "op", "namespace": "demo",
                "labels": {"olm.owner": "etcd.v1", "olm.owner.namespace": "demo",
                           "olm.owner.kind": "ClusterServiceVersion"},
                "ownerReferences": [{"apiVersion": "operators.coreos.com/v1alpha1",
                    "kind": "ClusterServiceVersion", "name": "etcd.v1", "uid": "u1"}]}
        }))
        .unwrap();
        let c = Component::of(&dep, Vec::new());
        assert_eq!(c.owners.len(), 2);
        assert!(c.owned_by("demo", "etcd.v1", Some("u1")));
        assert!(!c.owned_by("other", "etcd.v1", Some("u1")));
        let r = c.reference();
        assert_eq!(r.kind.as_deref(), Some("Deployment"));
        assert_eq!(r.api_version.as_deref(), Some("apps/v1"));
        assert_eq!(r.conditions, None);
    }
}
