//! RBAC a member CSV gets outside its namespace (docs/operator-groups.md §9.2–§9.3): its Roles and
//! RoleBindings copied into explicit target namespaces (owned by the copied CSV there), or lifted
//! to ClusterRoles and ClusterRoleBindings for all-namespace groups.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::api::keys::{
    COPIED_FROM_LABEL, MANAGED_LABEL, MANAGED_LABEL_VALUE, OWNER_KIND_LABEL, OWNER_LABEL,
    OWNER_NAMESPACE_LABEL,
};

/// `olm.owner.kind` of objects owned by a CSV.
pub const CSV_OWNER_KIND: &str = "ClusterServiceVersion";

/// A CSV as an owner: where it lives and its uid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvOwner {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl CsvOwner {
    /// The owner labels OLM puts on objects it makes for this CSV.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (OWNER_LABEL.to_owned(), self.name.clone()),
            (OWNER_NAMESPACE_LABEL.to_owned(), self.namespace.clone()),
            (OWNER_KIND_LABEL.to_owned(), CSV_OWNER_KIND.to_owned()),
        ])
    }

    /// The label selector text matching [`Self::labels`].
    pub fn label_selector(&self) -> String {
        self.labels()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A non-blocking, non-controller ownerReference to this CSV.
    pub fn owner_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: "operators.coreos.com/v1alpha1".to_owned(),
            kind: CSV_OWNER_KIND.to_owned(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            block_owner_deletion: Some(false),
            controller: Some(false),
        }
    }

    /// Carries this CSV's owner labels.
    pub fn labels_own(&self, meta: &ObjectMeta) -> bool {
        let labels = meta.labels.as_ref();
        self.labels()
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
    }

    /// Carries the owner labels and an ownerReference to this CSV (docs/operator-groups.md §9.2: both are required
    /// before a Role is copied).
    pub fn owns(&self, meta: &ObjectMeta) -> bool {
        self.labels_own(meta)
            && meta
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.kind == CSV_OWNER_KIND && r.uid == self.uid)
    }
}

fn copied_meta(source: &ObjectMeta, copy: &CsvOwner, operator_namespace: &str) -> ObjectMeta {
    let mut labels = source.labels.clone().unwrap_or_default();
    labels.extend(copy.labels());
    labels.insert(COPIED_FROM_LABEL.to_owned(), operator_namespace.to_owned());
    labels.insert(MANAGED_LABEL.to_owned(), MANAGED_LABEL_VALUE.to_owned());
    ObjectMeta {
        name: source.name.clone(),
        namespace: Some(copy.namespace.clone()),
        labels: Some(labels),
        owner_references: Some(vec![copy.owner_reference()]),
        ..Default::default()
    }
}

/// docs/operator-groups.md §9.2: `source` (a Role of the original in `operator_namespace`) copied next to `copy` (the
/// copied CSV in a target namespace), owned by that copy.
pub fn copied_role(source: &Role, copy: &CsvOwner, operator_namespace: &str) -> Role {
    Role {
        metadata: copied_meta(&source.metadata, copy, operator_namespace),
        rules: source.rules.clone(),
    }
}

/// docs/operator-groups.md §9.2: the RoleBinding counterpart; subjects (the operator's ServiceAccount in the operator
/// namespace) are unchanged.
pub fn copied_role_binding(
    source: &RoleBinding,
    copy: &CsvOwner,
    operator_namespace: &str,
) -> RoleBinding {
    RoleBinding {
        metadata: copied_meta(&source.metadata, copy, operator_namespace),
        role_ref: source.role_ref.clone(),
        subjects: source.subjects.clone(),
    }
}

/// docs/operator-groups.md §9.3: a Role lifted to a ClusterRole of the same name and labels, plus read access to
/// namespaces.
pub fn lifted_cluster_role(role: &Role) -> ClusterRole {
    let mut rules = role.rules.clone().unwrap_or_default();
    rules.push(PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["namespaces".to_owned()]),
        verbs: vec!["get".to_owned(), "list".to_owned(), "watch".to_owned()],
        ..Default::default()
    });
    ClusterRole {
        metadata: ObjectMeta {
            name: role.metadata.name.clone(),
            labels: role.metadata.labels.clone(),
            ..Default::default()
        },
        aggregation_rule: None,
        rules: Some(rules),
    }
}

/// docs/operator-groups.md §9.3: a RoleBinding lifted to a ClusterRoleBinding of the same name, labels and subjects,
/// bound to the lifted ClusterRole.
pub fn lifted_cluster_role_binding(binding: &RoleBinding) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: binding.metadata.name.clone(),
            labels: binding.metadata.labels.clone(),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: binding.role_ref.api_group.clone(),
            kind: "ClusterRole".to_owned(),
            name: binding.role_ref.name.clone(),
        },
        subjects: binding.subjects.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::rbac::v1::Subject;

    fn owner() -> CsvOwner {
        CsvOwner {
            namespace: "ops".into(),
            name: "op.v1".into(),
            uid: "orig".into(),
        }
    }

    fn role() -> Role {
        let o = owner();
        let mut labels = o.labels();
        labels.insert("olm.managed".into(), "true".into());
        labels.insert("extra".into(), "kept".into());
        Role {
            metadata: ObjectMeta {
                name: Some("op.v1-sa-abc".into()),
                namespace: Some("ops".into()),
                labels: Some(labels),
                owner_references: Some(vec![o.owner_reference()]),
                ..Default::default()
            },
            rules: Some(vec![PolicyRule {
                api_groups: Some(vec!["".into()]),
                resources: Some(vec!["configmaps".into()]),
                verbs: vec!["get".into()],
                ..Default::default()
            }]),
        }
    }

    fn binding() -> RoleBinding {
        let r = role();
        RoleBinding {
            metadata: r.metadata.clone(),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "Role".into(),
                name: "op.v1-sa-abc".into(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: "sa".into(),
                namespace: Some("ops".into()),
                ..Default::default()
            }]),
        }
    }

    #[test]
    fn ownership_needs_labels_and_reference() {
        let o = owner();
        let r = role();
        assert!(o.owns(&r.metadata));
        let mut unreferenced = r.clone();
        unreferenced.metadata.owner_references = None;
        assert!(!o.owns(&unreferenced.metadata));
        assert!(o.labels_own(&unreferenced.metadata));
        assert_eq!(
            o.label_selector(),
            "olm.owner=op.v1,olm.owner.kind=ClusterServiceVersion,olm.owner.namespace=ops"
        );
    }

    #[test]
    fn copies_point_at_the_copied_csv() {
        let copy = CsvOwner {
            namespace: "t1".into(),
            name: "op.v1".into(),
            uid: "copy-uid".into(),
        };
        let r = copied_role(&role(), &copy, "ops");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["metadata"]["namespace"], "t1");
        assert_eq!(v["metadata"]["labels"]["olm.owner.namespace"], "t1");
        assert_eq!(v["metadata"]["labels"]["olm.copiedFrom"], "ops");
        assert_eq!(v["metadata"]["labels"]["extra"], "kept");
        assert_eq!(v["metadata"]["ownerReferences"][0]["uid"], "copy-uid");
        assert_eq!(v["rules"], serde_json::to_value(role().rules).unwrap());
        let b = copied_role_binding(&binding(), &copy, "ops");
        assert_eq!(b.subjects.unwrap()[0].namespace.as_deref(), Some("ops"));
        assert_eq!(b.metadata.namespace.as_deref(), Some("t1"));
    }

    #[test]
    fn lifting_adds_namespace_read_and_binds_the_cluster_role() {
        let cr = lifted_cluster_role(&role());
        let rules = cr.rules.unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(
            rules[1].resources.as_deref(),
            Some(&["namespaces".to_string()][..])
        );
        assert_eq!(cr.metadata.name.as_deref(), Some("op.v1-sa-abc"));
        assert!(cr.metadata.namespace.is_none());
        let crb = lifted_cluster_role_binding(&binding());
        assert_eq!(crb.role_ref.kind, "ClusterRole");
        assert_eq!(crb.role_ref.name, "op.v1-sa-abc");
        assert_eq!(crb.subjects.unwrap()[0].name, "sa");
    }
}
