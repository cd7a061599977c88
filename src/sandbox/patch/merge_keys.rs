//! Which API groups are built in, and the patch strategies of their list fields.

/// API groups served by kube-apiserver itself (not by CRDs), for which strategic merge
/// patch is supported.
const BUILTIN_GROUPS: &[&str] = &[
    "",
    "apps",
    "batch",
    "autoscaling",
    "policy",
    "rbac.authorization.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "admissionregistration.k8s.io",
    "coordination.k8s.io",
    "events.k8s.io",
    "networking.k8s.io",
    "storage.k8s.io",
    "scheduling.k8s.io",
    "node.k8s.io",
    "discovery.k8s.io",
    "certificates.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "resource.k8s.io",
];

/// Whether `group` is served natively by kube-apiserver.
pub fn is_builtin_group(group: &str) -> bool {
    BUILTIN_GROUPS.contains(&group)
}
