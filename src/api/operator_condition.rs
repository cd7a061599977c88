//! OperatorCondition: `operators.coreos.com/v2` (storage) and `v1` (served). OLM makes one per
//! ClusterServiceVersion, of the same name; the operator reports through it (operator-lib
//! writes `spec.conditions` in v2, `status.conditions` in v1) and a cluster admin can override
//! what it says (`spec.overrides`). An `Upgradeable=False` condition holds the CSV that would
//! replace this operator's CSV.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::conditions::MetaCondition;
use super::resource::root_with_optional_spec;

/// The condition type that decides whether the operator's CSV may be replaced.
pub const CONDITION_UPGRADEABLE: &str = "Upgradeable";

root_with_optional_spec! {
    /// OperatorCondition is a Custom Resource of type `OperatorCondition` which is used to
    /// convey information to OLM about the state of an operator.
    pub struct OperatorCondition {
        spec: OperatorConditionSpec,
        status: OperatorConditionStatus,
    }
    group = "operators.coreos.com", version = "v2", kind = "OperatorCondition",
    plural = "operatorconditions", scope = ::kube::core::NamespaceResourceScope
}

/// OperatorConditionSpec allows an operator to report state to OLM and provides cluster admin
/// with the ability to manually override state reported by the operator.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorConditionSpec {
    /// ServiceAccounts of the operator (from its CSV's install strategy) allowed to update
    /// this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_accounts: Option<Vec<String>>,
    /// Deployments of the operator (from its CSV's install strategy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployments: Option<Vec<String>>,
    /// Conditions set by a cluster admin; they win over what the operator reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overrides: Option<Vec<MetaCondition>>,
    /// Conditions reported by the operator; OLM copies them to status with the generation
    /// it observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<MetaCondition>>,
}

/// OperatorConditionStatus allows OLM to convey which conditions have been observed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OperatorConditionStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<MetaCondition>>,
}

impl OperatorCondition {
    /// `spec.overrides[type]`, if set.
    pub fn override_of(&self, condition_type: &str) -> Option<&MetaCondition> {
        self.spec
            .overrides
            .iter()
            .flatten()
            .find(|c| c.type_ == condition_type)
    }

    /// `status.conditions[type]`, if set.
    pub fn status_condition(&self, condition_type: &str) -> Option<&MetaCondition> {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| c.type_ == condition_type)
    }
}

/// The `operators.coreos.com/v1` OperatorCondition: v2 without `spec.conditions` (the operator
/// wrote `status.conditions` itself). Served for old clients; olm-rs reads v2.
pub mod v1 {
    use super::*;

    root_with_optional_spec! {
        /// OperatorCondition is a Custom Resource of type `OperatorCondition` which is used to
        /// convey information to OLM about the state of an operator.
        pub struct OperatorCondition {
            spec: OperatorConditionSpec,
            status: OperatorConditionStatus,
        }
        group = "operators.coreos.com", version = "v1", kind = "OperatorCondition",
        plural = "operatorconditions", scope = ::kube::core::NamespaceResourceScope
    }

    /// OperatorConditionSpec allows a cluster admin to convey information about the state of
    /// an operator to OLM, potentially overriding state reported by the operator.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorConditionSpec {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub service_accounts: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub deployments: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub overrides: Option<Vec<MetaCondition>>,
    }

    /// OperatorConditionStatus allows an operator to convey information its state to OLM. The
    /// status may trail the actual state of a system.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    pub struct OperatorConditionStatus {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub conditions: Option<Vec<MetaCondition>>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An OperatorCondition as OLM and operator-lib write it round-trips losslessly.
    #[test]
    fn olms_operator_condition_round_trips() {
        let wire = serde_json::json!({
            "apiVersion": "operators.coreos.com/v2",
            "kind": "OperatorCondition",
            "metadata": {"name": "demo-operator.v0.3.0", "namespace": "demo", "generation": 2},
            "spec": {
                "serviceAccounts": ["demo-operator-controller-manager"],
                "deployments": ["demo-operator-controller-manager"],
                "overrides": [{"type": "Upgradeable", "status": "True", "reason": "Override",
                               "message": "admin says so", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "conditions": [{"type": "Upgradeable", "status": "False", "reason": "Migrating",
                                "message": "migration in progress", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
            },
            "status": {"conditions": [{"type": "Upgradeable", "status": "False", "reason": "Migrating",
                                       "message": "migration in progress", "observedGeneration": 2,
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        });
        let oc: OperatorCondition = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(serde_json::to_value(&oc).unwrap(), wire);
        assert_eq!(
            oc.override_of(CONDITION_UPGRADEABLE).unwrap().status,
            "True"
        );
        let seen = oc.status_condition(CONDITION_UPGRADEABLE).unwrap();
        assert_eq!(
            (seen.status.as_str(), seen.observed_generation),
            ("False", Some(2))
        );

        let bare: OperatorCondition = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
            "metadata": {"name": "x"}
        }))
        .unwrap();
        assert!(bare.override_of(CONDITION_UPGRADEABLE).is_none());
        assert!(bare.status_condition(CONDITION_UPGRADEABLE).is_none());
    }
}
