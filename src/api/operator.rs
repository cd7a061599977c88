//! Operator (`operators.coreos.com/v1`, cluster-scoped): one installed operator seen as a
//! whole. OLM names one `<package>.<namespace>` per installed package, and lists in its status
//! every object carrying the component label `operators.coreos.com/<name>`
//! (docs/operator-api.md). kubectl-operator, the console and `kubectl get operators` read it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::resource::root_with_optional_spec;

root_with_optional_spec! {
    /// Operator represents a cluster operator.
    pub struct Operator {
        spec: OperatorSpec,
        status: OperatorStatus,
    }
    group = "operators.coreos.com", version = "v1", kind = "Operator",
    plural = "operators", scope = ::kube::core::ClusterResourceScope
}

/// OperatorSpec defines the desired state of Operator (it has no fields).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OperatorSpec {}

/// OperatorStatus defines the observed state of an Operator and its components.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OperatorStatus {
    /// Components describes resources that compose the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Components>,
}

/// The objects that make up an operator.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Components {
    /// LabelSelector is a label query over a set of resources used to select the operator's
    /// components.
    #[serde(default)]
    pub label_selector: LabelSelector,
    /// Refs are a set of references to the operator's component resources, selected with
    /// LabelSelector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refs: Option<Vec<RichReference>>,
}

/// RichReference is a reference to a resource, enriched with its status conditions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct RichReference {
    /// Kind of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Namespace of the referent (none for a cluster-scoped one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// UID of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// API version of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Specific resourceVersion to which this reference is made, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// A piece of the referent, as a JSON/Go field access statement, if not the whole object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_path: Option<String>,
    /// Conditions represents the latest state of the component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<ComponentCondition>>,
}

/// Condition represent the latest available observations of an component's state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentCondition {
    /// Status of the condition, one of True, False, Unknown.
    #[serde(default)]
    pub status: String,
    /// Type of condition.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// The reason for the condition's last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human readable message indicating details about the transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Last time the condition was probed
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Last time the condition transitioned from one status to another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Operator as OLM v0.31 writes it, read and written back unchanged.
    #[test]
    fn olms_operator_round_trips() {
        let olm = serde_json::json!({
            "apiVersion": "operators.coreos.com/v1",
            "kind": "Operator",
            "metadata": {"name": "etcd.demo"},
            "spec": {},
            "status": {"components": {
                "labelSelector": {"matchExpressions": [
                    {"key": "operators.coreos.com/etcd.demo", "operator": "Exists"}
                ]},
                "refs": [
                    {"kind": "ClusterServiceVersion", "namespace": "demo", "name": "etcd.v0.9.4",
                     "apiVersion": "operators.coreos.com/v1alpha1",
                     "conditions": [{"type": "Succeeded", "status": "True",
                                     "reason": "InstallSucceeded", "message": "install strategy completed with no errors",
                                     "lastUpdateTime": "2026-11-29T04:00:00Z",
                                     "lastTransitionTime": "2026-11-29T04:00:00Z"}]},
                    {"kind": "ServiceAccount", "namespace": "demo", "name": "etcd-operator", "apiVersion": "v1"}
                ]
            }}
        });
        let op: Operator = serde_json::from_value(olm.clone()).unwrap();
        let refs = op.status.as_ref().unwrap().components.as_ref().unwrap();
        assert_eq!(refs.refs.as_ref().unwrap().len(), 2);
        assert_eq!(serde_json::to_value(&op).unwrap(), olm);
    }

    #[test]
    fn an_operator_made_by_hand_reads_without_spec_or_status() {
        let op: Operator = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "Operator",
            "metadata": {"name": "mine"}
        }))
        .unwrap();
        assert!(op.status.is_none());
        assert_eq!(
            serde_json::to_value(&op).unwrap()["spec"],
            serde_json::json!({})
        );
    }
}
