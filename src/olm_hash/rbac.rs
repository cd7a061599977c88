//! Names and content hashes of the RBAC an InstallPlan creates from a CSV's `permissions` and
//! `clusterPermissions` (docs/install-plans.md §8).

use serde_json::{Map, Value};

use super::go_json::{self, GoJsonError, GoType, write_go_string};
use super::{sha224_base62, truncate_bytes};

/// Label holding H(rules) on Roles/ClusterRoles and H(binding) on bindings.
pub const PERMISSIONS_HASH_LABEL: &str = "olm.permissions.hash";

const NAME_LIMIT: usize = 63;

/// The kind a binding's roleRef points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleRefKind {
    Role,
    ClusterRole,
}

impl RoleRefKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RoleRefKind::Role => "Role",
            RoleRefKind::ClusterRole => "ClusterRole",
        }
    }
}

/// `base-hash`, where base is cut to `62 - len(hash)` characters when `len(base) + len(hash)`
/// exceeds 63. The test leaves out the joining `-`, so a name can be 64 characters long.
pub fn generate_name(base: &str, hash: &str) -> String {
    let base = if base.len() + hash.len() > NAME_LIMIT {
        truncate_bytes(base, (NAME_LIMIT - 1).saturating_sub(hash.len()))
    } else {
        base
    };
    format!("{base}-{hash}")
}

/// Role and RoleBinding name for one `permissions` entry (`{"serviceAccountName","rules"}`):
/// `<csv>-<sa>-<hash of W_role>`; the namespace plays no part.
pub fn role_name(csv_name: &str, permission: &Value) -> Result<String, GoJsonError> {
    let wrapper = wrap(&[("name", csv_name)], permission);
    let hash = stream_hash(&wrapper, GoType::ROLE_NAME_INPUT)?;
    let base = format!("{csv_name}-{}", service_account(permission));
    Ok(generate_name(&base, &hash))
}

/// ClusterRole and ClusterRoleBinding name for one `clusterPermissions` entry:
/// `<csv>-<hash of W_cluster>`.
pub fn cluster_role_name(
    csv_name: &str,
    csv_namespace: &str,
    permission: &Value,
) -> Result<String, GoJsonError> {
    let wrapper = wrap(
        &[("name", csv_name), ("namespace", csv_namespace)],
        permission,
    );
    let hash = stream_hash(&wrapper, GoType::CLUSTER_ROLE_NAME_INPUT)?;
    Ok(generate_name(csv_name, &hash))
}

/// H(rules): base 62 SHA-224 of the Go-JSON of a rules list, no trailing newline.
pub fn rules_hash(rules: &Value) -> Result<String, GoJsonError> {
    Ok(sha224_base62(
        go_json::encode(rules, GoType::POLICY_RULES)?.as_bytes(),
    ))
}

/// H(binding): base 62 SHA-224 of
/// `{"RoleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":…,"name":…},"Subjects":[{"kind":"ServiceAccount","name":…,"namespace":…}]}`.
/// The subject's empty `apiGroup` is left out, as is an empty namespace.
pub fn binding_hash(
    kind: RoleRefKind,
    role_name: &str,
    service_account: &str,
    namespace: &str,
) -> String {
    let mut out = String::from(r#"{"RoleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"#);
    write_go_string(&mut out, kind.as_str());
    out.push_str(r#","name":"#);
    write_go_string(&mut out, role_name);
    out.push_str(r#"},"Subjects":[{"kind":"ServiceAccount","name":"#);
    write_go_string(&mut out, service_account);
    if !namespace.is_empty() {
        out.push_str(r#","namespace":"#);
        write_go_string(&mut out, namespace);
    }
    out.push_str("}]}");
    sha224_base62(out.as_bytes())
}

fn wrap(members: &[(&str, &str)], permission: &Value) -> Value {
    let mut map = Map::new();
    for (key, value) in members {
        map.insert((*key).to_owned(), Value::String((*value).to_owned()));
    }
    map.insert("permission".to_owned(), permission.clone());
    Value::Object(map)
}

fn stream_hash(value: &Value, ty: GoType) -> Result<String, GoJsonError> {
    Ok(sha224_base62(go_json::encode_stream(value, ty)?.as_bytes()))
}

/// The entry's service account as Go decodes it (key matched case-insensitively, last wins);
/// a missing or non-string value is reported by the encoder, so `""` is fine here.
fn service_account(permission: &Value) -> &str {
    permission
        .as_object()
        .and_then(|map| {
            map.iter()
                .rev()
                .find(|(k, _)| k.eq_ignore_ascii_case("serviceAccountName"))
        })
        .and_then(|(_, v)| v.as_str())
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn demo_permission() -> Value {
        // The bundle's namespaced permissions, members in the order a YAML author might use.
        json!({
            "rules": [
                {"resources": ["demos", "demos/status", "demos/finalizers"], "apiGroups": ["example.com"],
                 "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
                {"apiGroups": [""], "resources": ["configmaps", "pods", "events"],
                 "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
                {"verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
                 "apiGroups": ["coordination.k8s.io"], "resources": ["leases"]}
            ],
            "serviceAccountName": "demo-operator-controller-manager"
        })
    }

    fn demo_cluster_permission() -> Value {
        json!({
            "serviceAccountName": "demo-operator-controller-manager",
            "rules": [
                {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}
            ]
        })
    }

    #[test]
    fn w_role_bytes_match_the_spec() {
        let wrapper = wrap(&[("name", "demo-operator.v0.3.0")], &demo_permission());
        let text = go_json::encode(&wrapper, GoType::ROLE_NAME_INPUT).expect("encodes");
        assert_eq!(
            text,
            concat!(
                r#"{"name":"demo-operator.v0.3.0","permission":{"serviceAccountName":"demo-operator-controller-manager","rules":["#,
                r#"{"verbs":["create","delete","get","list","patch","update","watch"],"apiGroups":["example.com"],"resources":["demos","demos/status","demos/finalizers"]},"#,
                r#"{"verbs":["create","delete","get","list","patch","update","watch"],"apiGroups":[""],"resources":["configmaps","pods","events"]},"#,
                r#"{"verbs":["get","list","watch","create","update","patch","delete"],"apiGroups":["coordination.k8s.io"],"resources":["leases"]}]}}"#
            )
        );
    }

    #[test]
    fn worked_names_and_hashes_v0_3_0() {
        // docs/install-plans.md §8
        let role = role_name("demo-operator.v0.3.0", &demo_permission()).expect("name");
        assert_eq!(
            role,
            "demo-operator.v0.3.0-dem-a57MOF8EYhXjYsEdrdahVK46X73ULrLOfrvWBQ"
        );
        assert_eq!(role.len(), 63);
        let cluster = cluster_role_name("demo-operator.v0.3.0", "demo", &demo_cluster_permission())
            .expect("name");
        assert_eq!(
            cluster,
            "demo-operator.v0.3.0-3z8UHO67B5CUqJSOeNoiQwBWEOUhSOEsRCrA1W"
        );
        assert_eq!(
            rules_hash(&demo_permission()["rules"]).expect("hash"),
            "4r8LBfXv6O4zkBdVXyvrnBSVmdXe3WaNbamfTJ"
        );
        assert_eq!(
            rules_hash(&demo_cluster_permission()["rules"]).expect("hash"),
            "8ONh59JpUFErMqDQ7GhvrP8d05vhfFKrcTwjb9"
        );
        let sa = "demo-operator-controller-manager";
        assert_eq!(
            binding_hash(RoleRefKind::Role, &role, sa, "demo"),
            "7XlCdfYiGHCxNL8gmazO5s0ymFow0yzL6ZYDGf"
        );
        assert_eq!(
            binding_hash(RoleRefKind::ClusterRole, &cluster, sa, "demo"),
            "5zdDqX5E7RPjONGUImyZyszePnsx4P8ghwkgQr"
        );
    }

    #[test]
    fn worked_names_and_hashes_v0_3_1() {
        let role = role_name("demo-operator.v0.3.1", &demo_permission()).expect("name");
        assert_eq!(
            role,
            "demo-operator.v0.3.1-dem-65oUFqKJPsiDhHv33YaMSqC1Fv14ESVgGFoDvp"
        );
        let cluster = cluster_role_name("demo-operator.v0.3.1", "demo", &demo_cluster_permission())
            .expect("name");
        assert_eq!(
            cluster,
            "demo-operator.v0.3.1-3WMZpqrXfECZQbEtwulAF4Rpw5h6vW7E4SJbii"
        );
        let sa = "demo-operator-controller-manager";
        assert_eq!(
            binding_hash(RoleRefKind::Role, &role, sa, "demo"),
            "4ivrxMp0M2HGhdqMlFokDubZ5muHiAT1qFoAt9"
        );
        assert_eq!(
            binding_hash(RoleRefKind::ClusterRole, &cluster, sa, "demo"),
            "6EvlcJk9iRH4vujko16HyqK1QJrPAwxp1wdks5"
        );
    }

    #[test]
    fn role_names_do_not_depend_on_the_namespace_but_cluster_names_do() {
        let a = cluster_role_name("c", "ns-a", &demo_cluster_permission()).expect("name");
        let b = cluster_role_name("c", "ns-b", &demo_cluster_permission()).expect("name");
        assert_ne!(a, b);
    }

    #[test]
    fn truncation_rule_leaves_out_the_joining_dash() {
        let h38 = "h".repeat(38);
        // 25 + 38 = 63: kept whole, name is 64 long.
        assert_eq!(generate_name(&"b".repeat(25), &h38).len(), 64);
        // 26 + 38 > 63: cut to 24, name is 63 long.
        let cut = generate_name(&"b".repeat(26), &h38);
        assert_eq!(cut, format!("{}-{h38}", "b".repeat(24)));
        // A 37-character hash leaves room for one more base character.
        let h37 = "h".repeat(37);
        assert_eq!(
            generate_name(&"b".repeat(40), &h37),
            format!("{}-{h37}", "b".repeat(25))
        );
        // Short bases are untouched.
        assert_eq!(generate_name("csv", "abc"), "csv-abc");
    }

    #[test]
    fn empty_rules_and_null_rules_hash_differently() {
        let empty = rules_hash(&json!([])).expect("hash");
        let null = rules_hash(&Value::Null).expect("hash");
        assert_eq!(null, sha224_base62(b"null"));
        assert_eq!(empty, sha224_base62(b"[]"));
    }
}
