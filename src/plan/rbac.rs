//! ServiceAccounts, Roles, RoleBindings, ClusterRoles and ClusterRoleBindings built from a CSV's
//! deployment install strategy, with the names and labels OLM gives them
//! (docs/install-plans.md §8) so objects created by OLM are adopted, not duplicated.

use serde_json::{Map, Value, json};

use super::error::PlanError;
use crate::olm_hash::{self, RoleRefKind};

pub const OWNER_LABEL: &str = "olm.owner";
pub const OWNER_NAMESPACE_LABEL: &str = "olm.owner.namespace";
pub const OWNER_KIND_LABEL: &str = "olm.owner.kind";
pub const CSV_KIND: &str = "ClusterServiceVersion";
const RBAC_API_VERSION: &str = "rbac.authorization.k8s.io/v1";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// One `permissions` / `clusterPermissions` entry as written in the CSV.
struct Permission<'a> {
    service_account: &'a str,
    raw: &'a Value,
}

/// What one service account gets, in OLM's step order.
#[derive(Default)]
struct ForServiceAccount {
    roles: Vec<Value>,
    role_bindings: Vec<Value>,
    cluster_roles: Vec<Value>,
    cluster_role_bindings: Vec<Value>,
}

/// The RBAC manifests of `csv` (already placed in `namespace`): per service account, in order
/// of first appearance, the ServiceAccount (not `default`), its Roles, RoleBindings,
/// ClusterRoles and ClusterRoleBindings. OLM iterates a Go map here, so its SA order varies
/// between plans; a fixed order changes nothing on the cluster.
pub fn rbac_manifests(
    csv: &Value,
    csv_name: &str,
    namespace: &str,
) -> Result<Vec<Value>, PlanError> {
    let spec = csv.pointer("/spec/install/spec");
    let permissions = entries(spec, "permissions", csv_name)?;
    let cluster_permissions = entries(spec, "clusterPermissions", csv_name)?;
    let mut by_sa: Vec<(&str, ForServiceAccount)> = Vec::new();
    let labels = owner_labels(csv_name, namespace);
    for (i, p) in permissions.iter().enumerate() {
        let field = format!("spec.install.spec.permissions[{i}]");
        let name = olm_hash::role_name(csv_name, p.raw)
            .map_err(|source| hash_error(csv_name, &field, source))?;
        let rules = typed_rules(p.raw, csv_name, &field)?;
        let rules_hash =
            olm_hash::rules_hash(&rules).map_err(|source| hash_error(csv_name, &field, source))?;
        let binding_hash =
            olm_hash::binding_hash(RoleRefKind::Role, &name, p.service_account, namespace);
        let s = slot(&mut by_sa, p.service_account);
        s.roles.push(json!({
            "apiVersion": RBAC_API_VERSION,
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace, "labels": with_hash(&labels, &rules_hash)},
            "rules": rules,
        }));
        s.role_bindings.push(binding(
            "RoleBinding",
            RoleRefKind::Role,
            &name,
            Some(namespace),
            p.service_account,
            namespace,
            with_hash(&labels, &binding_hash),
        ));
    }
    for (i, p) in cluster_permissions.iter().enumerate() {
        let field = format!("spec.install.spec.clusterPermissions[{i}]");
        let name = olm_hash::cluster_role_name(csv_name, namespace, p.raw)
            .map_err(|source| hash_error(csv_name, &field, source))?;
        let rules = typed_rules(p.raw, csv_name, &field)?;
        let rules_hash =
            olm_hash::rules_hash(&rules).map_err(|source| hash_error(csv_name, &field, source))?;
        let binding_hash = olm_hash::binding_hash(
            RoleRefKind::ClusterRole,
            &name,
            p.service_account,
            namespace,
        );
        let s = slot(&mut by_sa, p.service_account);
        s.cluster_roles.push(json!({
            "apiVersion": RBAC_API_VERSION,
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": with_hash(&labels, &rules_hash)},
            "rules": rules,
        }));
        s.cluster_role_bindings.push(binding(
            "ClusterRoleBinding",
            RoleRefKind::ClusterRole,
            &name,
            None,
            p.service_account,
            namespace,
            with_hash(&labels, &binding_hash),
        ));
    }
    let mut out = Vec::new();
    for (sa, objects) in by_sa {
        if sa != "default" {
            out.push(json!({
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": sa, "namespace": namespace},
            }));
        }
        out.extend(objects.roles);
        out.extend(objects.role_bindings);
        out.extend(objects.cluster_roles);
        out.extend(objects.cluster_role_bindings);
    }
    dedup_by_identity(&mut out);
    Ok(out)
}

fn slot<'a, 'b>(
    by_sa: &'b mut Vec<(&'a str, ForServiceAccount)>,
    sa: &'a str,
) -> &'b mut ForServiceAccount {
    let i = match by_sa.iter().position(|(s, _)| *s == sa) {
        Some(i) => i,
        None => {
            by_sa.push((sa, ForServiceAccount::default()));
            by_sa.len() - 1
        }
    };
    &mut by_sa[i].1
}

/// `olm.owner`, `olm.owner.namespace`, `olm.owner.kind` for objects tied to a CSV.
pub fn owner_labels(csv_name: &str, namespace: &str) -> Map<String, Value> {
    let mut labels = Map::new();
    labels.insert(OWNER_LABEL.into(), csv_name.into());
    labels.insert(OWNER_NAMESPACE_LABEL.into(), namespace.into());
    labels.insert(OWNER_KIND_LABEL.into(), CSV_KIND.into());
    labels
}

fn with_hash(labels: &Map<String, Value>, hash: &str) -> Value {
    let mut labels = labels.clone();
    labels.insert(olm_hash::PERMISSIONS_HASH_LABEL.into(), hash.into());
    Value::Object(labels)
}

fn binding(
    kind: &str,
    role_kind: RoleRefKind,
    name: &str,
    namespace: Option<&str>,
    service_account: &str,
    sa_namespace: &str,
    labels: Value,
) -> Value {
    let mut metadata = json!({"name": name, "labels": labels});
    if let Some(ns) = namespace {
        metadata["namespace"] = ns.into();
    }
    json!({
        "apiVersion": RBAC_API_VERSION,
        "kind": kind,
        "metadata": metadata,
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind.as_str(), "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": sa_namespace}],
    })
}

fn entries<'a>(
    spec: Option<&'a Value>,
    key: &str,
    csv_name: &str,
) -> Result<Vec<Permission<'a>>, PlanError> {
    let Some(list) = spec.and_then(|s| s.get(key)).filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let items = list.as_array().ok_or_else(|| PlanError::BadField {
        bundle: csv_name.to_owned(),
        field: format!("spec.install.spec.{key}"),
        reason: "must be a list".into(),
    })?;
    items
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            let service_account = raw
                .get("serviceAccountName")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| PlanError::BadField {
                    bundle: csv_name.to_owned(),
                    field: format!("spec.install.spec.{key}[{i}].serviceAccountName"),
                    reason: "must name a service account".into(),
                })?;
            Ok(Permission {
                service_account,
                raw,
            })
        })
        .collect()
}

/// The entry's rules as OLM's typed model holds them (unknown members dropped, members in Go
/// order), which is both what the Role gets and what the hash label is computed over.
fn typed_rules(permission: &Value, csv_name: &str, field: &str) -> Result<Value, PlanError> {
    let rules = permission.get("rules").cloned().unwrap_or(Value::Null);
    let text = olm_hash::go_json::encode(&rules, olm_hash::GoType::POLICY_RULES)
        .map_err(|source| hash_error(csv_name, field, source))?;
    // The encoder writes valid JSON by construction; a failure here would be a bug in it.
    serde_json::from_str(&text).map_err(|e| PlanError::BadField {
        bundle: csv_name.to_owned(),
        field: format!("{field}.rules"),
        reason: e.to_string(),
    })
}

fn hash_error(csv_name: &str, field: &str, source: olm_hash::GoJsonError) -> PlanError {
    PlanError::Hash {
        bundle: csv_name.to_owned(),
        field: field.to_owned(),
        source,
    }
}

/// Two identical `permissions` entries give the same names; one object of each is enough.
fn dedup_by_identity(objects: &mut Vec<Value>) {
    let mut seen = std::collections::HashSet::new();
    objects.retain(|o| seen.insert((o["kind"].to_string(), o["metadata"]["name"].to_string())));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demo_csv() -> Value {
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "demo-operator.v0.3.0", "namespace": "demo"},
            "spec": {"install": {"strategy": "deployment", "spec": {
                "permissions": [{
                    "serviceAccountName": "demo-operator-controller-manager",
                    "rules": [
                        {"apiGroups": ["example.com"], "resources": ["demos", "demos/status", "demos/finalizers"],
                         "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
                        {"apiGroups": [""], "resources": ["configmaps", "pods", "events"],
                         "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
                        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"], "x-unknown": 1}
                    ]
                }],
                "clusterPermissions": [{
                    "serviceAccountName": "demo-operator-controller-manager",
                    "rules": [
                        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
                        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}
                    ]
                }, {
                    "serviceAccountName": "default",
                    "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
                }],
                "deployments": []
            }}}
        })
    }

    #[test]
    fn names_labels_and_order_match_olm() {
        // Worked values: docs/install-plans.md §8 (real OLM v0.31.0).
        let objects = rbac_manifests(&demo_csv(), "demo-operator.v0.3.0", "demo").unwrap();
        let ids: Vec<(String, String)> = objects
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap().into(),
                    o["metadata"]["name"].as_str().unwrap().into(),
                )
            })
            .collect();
        let role = "demo-operator.v0.3.0-dem-a57MOF8EYhXjYsEdrdahVK46X73ULrLOfrvWBQ";
        let cluster = "demo-operator.v0.3.0-3z8UHO67B5CUqJSOeNoiQwBWEOUhSOEsRCrA1W";
        assert_eq!(
            &ids[..5],
            &[
                (
                    "ServiceAccount".into(),
                    "demo-operator-controller-manager".into()
                ),
                ("Role".into(), role.into()),
                ("RoleBinding".into(), role.into()),
                ("ClusterRole".into(), cluster.into()),
                ("ClusterRoleBinding".into(), cluster.into()),
            ]
        );
        assert_eq!(
            ids.len(),
            7,
            "default SA gets no ServiceAccount object: {ids:?}"
        );
        assert_eq!(ids[5].0, "ClusterRole");
        let hash = |i: usize| {
            objects[i]["metadata"]["labels"]["olm.permissions.hash"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(hash(1), "4r8LBfXv6O4zkBdVXyvrnBSVmdXe3WaNbamfTJ");
        assert_eq!(hash(2), "7XlCdfYiGHCxNL8gmazO5s0ymFow0yzL6ZYDGf");
        assert_eq!(hash(3), "8ONh59JpUFErMqDQ7GhvrP8d05vhfFKrcTwjb9");
        assert_eq!(hash(4), "5zdDqX5E7RPjONGUImyZyszePnsx4P8ghwkgQr");
        assert_eq!(
            objects[1]["metadata"]["labels"]["olm.owner"],
            "demo-operator.v0.3.0"
        );
        assert_eq!(
            objects[1]["metadata"]["labels"]["olm.owner.kind"],
            "ClusterServiceVersion"
        );
        assert!(
            objects[1]["rules"][2].get("x-unknown").is_none(),
            "unknown rule members dropped"
        );
        assert_eq!(objects[2]["subjects"][0]["namespace"], "demo");
        assert_eq!(objects[4]["roleRef"]["kind"], "ClusterRole");
        assert!(objects[3]["metadata"].get("namespace").is_none());
    }

    #[test]
    fn an_entry_without_service_account_is_named() {
        let mut csv = demo_csv();
        csv["spec"]["install"]["spec"]["permissions"][0]["serviceAccountName"] = json!("");
        let err = rbac_manifests(&csv, "demo-operator.v0.3.0", "demo").unwrap_err();
        assert_eq!(
            err.to_string(),
            "bundle demo-operator.v0.3.0: spec.install.spec.permissions[0].serviceAccountName: must name a service account"
        );
    }
}
