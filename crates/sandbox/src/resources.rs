//! What the sandbox serves: one [`ResourceInfo`] per (group, version, resource), from the
//! built-in table below or from a CustomResourceDefinition (see `crd_registry`).

use std::sync::Arc;

use serde_json::Value;

/// The storage identity of a resource: all served versions of one CRD share it, so an object is
/// stored once and its `apiVersion` is rewritten on read.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

/// A column of server-side `Table` output (`kubectl get`).
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    /// JSON type name as in `additionalPrinterColumns[].type` (string, integer, date, ...).
    pub type_: String,
    pub json_path: String,
    pub description: String,
    pub priority: i64,
}

/// Everything the server needs to know about one served resource version.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceInfo {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    /// Has a `/status` subresource: main writes keep the old status, status writes keep the rest.
    pub status_subresource: bool,
    /// `metadata.generation` is maintained (bumped when anything but metadata/status changes).
    pub tracks_generation: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Extra `kubectl get` columns (besides NAME and AGE).
    pub columns: Vec<PrinterColumn>,
    /// The CRD version's `openAPIV3Schema`, used to prune unknown fields and apply defaults.
    pub schema: Option<Arc<Value>>,
    /// Served from a CustomResourceDefinition (strategic merge patch is refused for these).
    pub custom: bool,
    /// A CRD version marked `deprecated`: every request for it gets this text back as an
    /// HTTP `Warning: 299` header, as the real API server does.
    pub deprecation_warning: Option<String>,
}

impl ResourceInfo {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Where objects of this resource are stored (shared by all versions, and by
    /// `events.k8s.io` Events with `v1` Events; see `conversion`).
    pub fn group_resource(&self) -> GroupResource {
        storage_key(&self.group, &self.plural)
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }
}

/// Flags of a built-in entry; keeps the table below readable.
const NS: u8 = 1;
const STATUS: u8 = 2;
const GEN: u8 = 4;
/// In kubectl's `all` category.
const ALL: u8 = 8;

struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    flags: u8,
    short_names: &'static [&'static str],
    /// (name, type, jsonPath) extra columns for `kubectl get`.
    columns: &'static [(&'static str, &'static str, &'static str)],
}

const fn b(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    flags: u8,
    short_names: &'static [&'static str],
    columns: &'static [(&'static str, &'static str, &'static str)],
) -> Builtin {
    Builtin {
        group,
        version,
        kind,
        plural,
        flags,
        short_names,
        columns,
    }
}

/// The built-in kinds OLM reads or writes (plus the kinds a bundle may carry).
#[rustfmt::skip]
const BUILTINS: &[Builtin] = &[
    b("", "v1", "Namespace", "namespaces", STATUS, &["ns"], &[("Status", "string", ".status.phase")]),
    b("", "v1", "ServiceAccount", "serviceaccounts", NS, &["sa"], &[]),
    b("", "v1", "Secret", "secrets", NS, &[], &[("Type", "string", ".type")]),
    b("", "v1", "ConfigMap", "configmaps", NS, &["cm"], &[]),
    b("", "v1", "Service", "services", NS | STATUS | ALL, &["svc"],
      &[("Type", "string", ".spec.type"), ("Cluster-IP", "string", ".spec.clusterIP")]),
    b("", "v1", "Pod", "pods", NS | STATUS | ALL, &["po"], &[("Status", "string", ".status.phase")]),
    b("", "v1", "Event", "events", NS, &["ev"],
      &[("Type", "string", ".type"), ("Reason", "string", ".reason"), ("Message", "string", ".message")]),
    b("apps", "v1", "Deployment", "deployments", NS | STATUS | GEN | ALL, &["deploy"],
      &[("Up-to-date", "integer", ".status.updatedReplicas"), ("Available", "integer", ".status.availableReplicas")]),
    b("apps", "v1", "ReplicaSet", "replicasets", NS | STATUS | GEN | ALL, &["rs"], &[]),
    b("rbac.authorization.k8s.io", "v1", "Role", "roles", NS, &[], &[]),
    b("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", NS, &[], &[]),
    b("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", 0, &[], &[]),
    b("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", 0, &[], &[]),
    b("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", STATUS | GEN, &["crd", "crds"], &[]),
    b("apiregistration.k8s.io", "v1", "APIService", "apiservices", STATUS | GEN, &[],
      &[("Service", "string", ".spec.service.name"), ("Available", "string", ".status.conditions[?(@.type==\"Available\")].status")]),
    b("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", GEN, &[], &[]),
    b("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", GEN, &[], &[]),
    b("coordination.k8s.io", "v1", "Lease", "leases", NS, &[], &[("Holder", "string", ".spec.holderIdentity")]),
    b("events.k8s.io", "v1", "Event", "events", NS, &["ev"],
      &[("Type", "string", ".type"), ("Reason", "string", ".reason"), ("Note", "string", ".note")]),
    b("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", NS | STATUS | GEN, &["pdb"], &[]),
    b("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", 0, &["pc"], &[("Value", "integer", ".value")]),
];

/// The built-in resources, in discovery order.
pub fn builtins() -> Vec<Arc<ResourceInfo>> {
    BUILTINS
        .iter()
        .map(|e| {
            Arc::new(ResourceInfo {
                group: e.group.into(),
                version: e.version.into(),
                kind: e.kind.into(),
                plural: e.plural.into(),
                singular: e.kind.to_ascii_lowercase(),
                namespaced: e.flags & NS != 0,
                status_subresource: e.flags & STATUS != 0,
                tracks_generation: e.flags & GEN != 0,
                short_names: e.short_names.iter().map(|s| s.to_string()).collect(),
                categories: if e.flags & ALL != 0 {
                    vec!["all".to_string()]
                } else {
                    Vec::new()
                },
                columns: e
                    .columns
                    .iter()
                    .map(|(name, ty, path)| PrinterColumn {
                        name: name.to_string(),
                        type_: ty.to_string(),
                        json_path: path.to_string(),
                        description: String::new(),
                        priority: 0,
                    })
                    .collect(),
                schema: None,
                custom: false,
                deprecation_warning: None,
            })
        })
        .collect()
}

/// Orders API versions the way Kubernetes does: GA before beta before alpha, higher numbers
/// first, and anything not shaped like `v<N>[alpha|beta<M>]` last, alphabetically.
pub fn version_priority(a: &str, b: &str) -> std::cmp::Ordering {
    fn key(v: &str) -> (u8, i64, i64, String) {
        let parsed = v.strip_prefix('v').and_then(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let major: i64 = digits.parse().ok()?;
            let tail = &rest[digits.len()..];
            let (class, minor_str) = if tail.is_empty() {
                (0, "0")
            } else if let Some(m) = tail.strip_prefix("beta") {
                (1, m)
            } else if let Some(m) = tail.strip_prefix("alpha") {
                (2, m)
            } else {
                return None;
            };
            let minor: i64 = minor_str.parse().ok()?;
            Some((class, major, minor))
        });
        match parsed {
            Some((class, major, minor)) => (class, -major, -minor, String::new()),
            None => (3, 0, 0, v.to_string()),
        }
    }
    key(a).cmp(&key(b))
}

/// The storage key of a served resource.
pub fn storage_key(group: &str, plural: &str) -> GroupResource {
    let group = if is_events_v1(group, plural) {
        ""
    } else {
        group
    };
    GroupResource {
        group: group.to_string(),
        resource: plural.to_string(),
    }
}

/// `events.k8s.io/v1` Events, stored as `v1` Events (module `conversion`).
pub(crate) fn is_events_v1(group: &str, plural: &str) -> bool {
    group == "events.k8s.io" && plural == "events"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_ga_beta_alpha_then_other() {
        let mut v = vec!["v1alpha1", "foo", "v1beta1", "v2", "v1", "v1beta2", "v10"];
        v.sort_by(|a, b| version_priority(a, b));
        assert_eq!(
            v,
            ["v10", "v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]
        );
    }

    #[test]
    fn builtin_table_has_the_kinds_olm_touches() {
        let all = builtins();
        for kind in [
            "Namespace",
            "Deployment",
            "CustomResourceDefinition",
            "APIService",
            "Lease",
            "Event",
        ] {
            assert!(all.iter().any(|r| r.kind == kind), "{kind} missing");
        }
        let deploy = all.iter().find(|r| r.kind == "Deployment").unwrap();
        assert_eq!(deploy.api_version(), "apps/v1");
        assert!(deploy.namespaced && deploy.status_subresource && deploy.tracks_generation);
    }
}
