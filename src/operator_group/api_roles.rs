//! The per-API ClusterRoles a member CSV ensures while `Succeeded` (docs/operator-groups.md §9.1,
//! second table): admin/edit/view (and, for CRDs, crdview) roles that aggregate into the
//! built-in roles and into the OperatorGroup roles through the `olm.opgroup.permissions/*`
//! labels.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::api::keys::{MANAGED_LABEL, MANAGED_LABEL_VALUE};
use crate::api::{ApiServiceDescription, CrdDescription};
use crate::olm_hash::{OgRoleSuffix, aggregate_label_key};

/// The object a per-API role is owned by (the CRD or the APIService), so deleting the API
/// deletes its roles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiOwner {
    pub name: String,
    pub uid: String,
}

fn verbs(suffix: OgRoleSuffix) -> Vec<String> {
    let verbs: &[&str] = match suffix {
        OgRoleSuffix::Admin => &["*"],
        OgRoleSuffix::Edit => &["create", "update", "patch", "delete"],
        OgRoleSuffix::View => &["get", "list", "watch"],
    };
    verbs.iter().map(|v| v.to_string()).collect()
}

fn labels(builtin: OgRoleSuffix, opgroup_key: String) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            format!(
                "rbac.authorization.k8s.io/aggregate-to-{}",
                builtin.as_str()
            ),
            "true".to_owned(),
        ),
        (opgroup_key, "true".to_owned()),
        (MANAGED_LABEL.to_owned(), MANAGED_LABEL_VALUE.to_owned()),
    ])
}

fn owner_reference(api_version: &str, kind: &str, owner: &ApiOwner) -> OwnerReference {
    // Non-blocking, non-controller, like OLM's; the kind is written in its proper case (OLM
    // writes it lower-case, docs/operator-groups.md §9.1 observed).
    OwnerReference {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        name: owner.name.clone(),
        uid: owner.uid.clone(),
        block_owner_deletion: Some(false),
        controller: Some(false),
    }
}

fn role(
    name: String,
    labels: BTreeMap<String, String>,
    owner: OwnerReference,
    rule: PolicyRule,
) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(labels),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        aggregation_rule: None,
        rules: Some(vec![rule]),
    }
}

/// The four roles of an owned CRD `<plural>.<group>` at its version: `<crd>-<V>-admin|edit|view`
/// on the resource and `<crd>-<V>-crdview` (read the CRD itself). `None` when the CRD name has
/// no group.
pub fn crd_cluster_roles(crd: &CrdDescription, owner: &ApiOwner) -> Option<Vec<ClusterRole>> {
    let (plural, group) = crd.plural_and_group()?;
    let owner_ref = owner_reference("apiextensions.k8s.io/v1", "CustomResourceDefinition", owner);
    let prefix = format!("{}-{}-", crd.name, crd.version);
    let mut roles: Vec<ClusterRole> = OgRoleSuffix::ALL
        .iter()
        .map(|&suffix| {
            role(
                format!("{prefix}{}", suffix.as_str()),
                labels(
                    suffix,
                    aggregate_label_key(&crd.kind, &crd.version, group, suffix),
                ),
                owner_ref.clone(),
                PolicyRule {
                    api_groups: Some(vec![group.to_owned()]),
                    resources: Some(vec![plural.to_owned()]),
                    verbs: verbs(suffix),
                    ..Default::default()
                },
            )
        })
        .collect();
    roles.push(role(
        format!("{prefix}crdview"),
        labels(
            OgRoleSuffix::View,
            aggregate_label_key(&crd.kind, &crd.version, group, OgRoleSuffix::View),
        ),
        owner_ref,
        PolicyRule {
            api_groups: Some(vec!["apiextensions.k8s.io".to_owned()]),
            resources: Some(vec!["customresourcedefinitions".to_owned()]),
            resource_names: Some(vec![crd.name.clone()]),
            verbs: vec!["get".to_owned()],
            ..Default::default()
        },
    ));
    Some(roles)
}

/// The three roles of an owned APIService entry: `<plural>-<V>-admin|edit|view`, owned by the
/// APIService `<V>.<group>`. (The group is not in the name: two operators serving the same
/// plural and version in different groups collide, as in OLM — docs/operator-groups.md §9.1 observed.)
pub fn api_service_cluster_roles(
    desc: &ApiServiceDescription,
    owner: &ApiOwner,
) -> Vec<ClusterRole> {
    let owner_ref = owner_reference("apiregistration.k8s.io/v1", "APIService", owner);
    OgRoleSuffix::ALL
        .iter()
        .map(|&suffix| {
            role(
                format!("{}-{}-{}", desc.name, desc.version, suffix.as_str()),
                labels(
                    suffix,
                    aggregate_label_key(&desc.kind, &desc.version, &desc.group, suffix),
                ),
                owner_ref.clone(),
                PolicyRule {
                    api_groups: Some(vec![desc.group.clone()]),
                    resources: Some(vec![desc.name.clone()]),
                    verbs: verbs(suffix),
                    ..Default::default()
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> ApiOwner {
        ApiOwner {
            name: "demos.example.com".into(),
            uid: "u-1".into(),
        }
    }

    #[test]
    fn crd_roles_have_olms_names_verbs_and_labels() {
        let crd = CrdDescription {
            name: "demos.example.com".into(),
            version: "v1alpha1".into(),
            kind: "Demo".into(),
            ..Default::default()
        };
        let roles = crd_cluster_roles(&crd, &owner()).unwrap();
        let names: Vec<_> = roles
            .iter()
            .map(|r| r.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "demos.example.com-v1alpha1-admin",
                "demos.example.com-v1alpha1-edit",
                "demos.example.com-v1alpha1-view",
                "demos.example.com-v1alpha1-crdview",
            ]
        );
        let edit = serde_json::to_value(&roles[1]).unwrap();
        assert_eq!(
            edit["rules"],
            serde_json::json!([{"apiGroups": ["example.com"], "resources": ["demos"],
                "verbs": ["create", "update", "patch", "delete"]}])
        );
        assert_eq!(
            edit["metadata"]["labels"],
            serde_json::json!({
                "olm.managed": "true",
                "olm.opgroup.permissions/aggregate-to-7f1c1bed79b097e1-edit": "true",
                "rbac.authorization.k8s.io/aggregate-to-edit": "true",
            })
        );
        assert_eq!(
            edit["metadata"]["ownerReferences"][0],
            serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition", "name": "demos.example.com", "uid": "u-1",
                "blockOwnerDeletion": false, "controller": false})
        );
        let crdview = serde_json::to_value(&roles[3]).unwrap();
        assert_eq!(
            crdview["rules"][0]["resourceNames"],
            serde_json::json!(["demos.example.com"])
        );
        assert_eq!(
            crdview["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"],
            "true"
        );
        let admin = serde_json::to_value(&roles[0]).unwrap();
        assert_eq!(admin["rules"][0]["verbs"], serde_json::json!(["*"]));
    }

    #[test]
    fn crd_without_group_gets_no_roles() {
        let crd = CrdDescription {
            name: "nodot".into(),
            version: "v1".into(),
            kind: "X".into(),
            ..Default::default()
        };
        assert!(crd_cluster_roles(&crd, &owner()).is_none());
    }

    #[test]
    fn api_service_roles_are_named_by_plural_and_version() {
        let desc = ApiServiceDescription {
            name: "things".into(),
            group: "things.example.com".into(),
            version: "v1".into(),
            kind: "Thing".into(),
            ..Default::default()
        };
        let roles = api_service_cluster_roles(
            &desc,
            &ApiOwner {
                name: "v1.things.example.com".into(),
                uid: "u".into(),
            },
        );
        let names: Vec<_> = roles
            .iter()
            .map(|r| r.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(
            names,
            ["things-v1-admin", "things-v1-edit", "things-v1-view"]
        );
        assert_eq!(
            roles[2].metadata.owner_references.as_ref().unwrap()[0].kind,
            "APIService"
        );
    }
}
