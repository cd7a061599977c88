//! OLM v0's hash and naming conventions, exact to the byte (docs/api-types.md §6,
//! docs/install-plans.md §8, docs/operator-groups.md §9.1).
//!
//! Names built from these hashes (OperatorGroup ClusterRoles, install-plan RBAC) and the
//! `olmcahash` annotation must equal OLM's, or a takeover duplicates objects instead of adopting
//! them; the label hashes must match to avoid one needless rewrite. Everything here is pure.

mod base62;
mod deployment;
mod fnv;
pub mod go_json;
mod operator_group;
mod rbac;
mod webhook;

pub use base62::{SHA224_BASE62_MAX_LEN, base62_encode, sha224_base62};
pub use deployment::{
    DEPLOYMENT_SPEC_HASH_LABEL, OPERATOR_CONDITION_NAME_ENV, deployment_spec_hash,
    merge_csv_annotations, set_operator_condition_name, set_revision_history_limit,
};
pub use fnv::{fnv1a_64, fnv1a_hex};
pub use go_json::{GoJsonError, GoType};
pub use operator_group::{
    OgRoleSuffix, aggregate_label_key, api_hash, api_label_key, crd_group,
    installed_alongside_annotation_key, og_cluster_role_name,
};
pub use rbac::{
    PERMISSIONS_HASH_LABEL, RoleRefKind, binding_hash, cluster_role_name, generate_name, role_name,
    rules_hash,
};
pub use webhook::{WEBHOOK_DESCRIPTION_HASH_LABEL, webhook_description_hash};

/// The first `max` bytes of `text`, backed off to a character boundary. Kubernetes names are
/// ASCII, where this is exactly Go's `s[:max]`.
pub(crate) fn truncate_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
