//! "Go-JSON": the exact bytes Go's `encoding/json` writes for OLM's typed values
//! (docs/api-types.md §6.2), reproduced from untyped `serde_json::Value` input.
//!
//! The input is first read through the Go type's member table — unknown members dropped,
//! members re-ordered into Go declaration order, `omitempty` and pointer rules applied — then
//! written compactly with sorted map keys, Go string escaping, canonical quantities and
//! int-or-string values in their own JSON type.

mod encoder;
mod escape;
mod schema;
mod types_meta;
mod types_pod;
mod types_volume;

use serde_json::Value;

pub use crate::quantity::{QuantityError, canonical_quantity, canonical_quantity_number};
pub use escape::{go_quote, write_go_bytes, write_go_string};

use encoder::Path;
use schema::Ty;

/// A Go type whose JSON encoding olm-rs must reproduce byte for byte.
#[derive(Debug, Clone, Copy)]
pub struct GoType {
    name: &'static str,
    ty: &'static Ty,
}

impl GoType {
    /// apps/v1 DeploymentSpec (`olm.deployment-spec-hash`, docs/api-types.md §6.3).
    pub const DEPLOYMENT_SPEC: GoType = GoType {
        name: "DeploymentSpec",
        ty: &Ty::Struct(types_meta::DEPLOYMENT_SPEC),
    };
    /// core/v1 PodTemplateSpec.
    pub const POD_TEMPLATE_SPEC: GoType = GoType {
        name: "PodTemplateSpec",
        ty: &Ty::Struct(types_meta::POD_TEMPLATE_SPEC),
    };
    /// OLM's WebhookDescription (`olm.webhook-description-hash`).
    pub const WEBHOOK_DESCRIPTION: GoType = GoType {
        name: "WebhookDescription",
        ty: &Ty::Struct(types_meta::WEBHOOK_DESCRIPTION),
    };
    /// A list of rbac/v1 PolicyRule (`olm.permissions.hash` of a Role or ClusterRole).
    pub const POLICY_RULES: GoType = GoType {
        name: "[]PolicyRule",
        ty: &types_meta::POLICY_RULES,
    };
    /// `{"name","permission"}`: the input of install-plan Role/RoleBinding names (W_role).
    pub const ROLE_NAME_INPUT: GoType = GoType {
        name: "RoleNameInput",
        ty: &Ty::Struct(types_meta::ROLE_NAME_INPUT),
    };
    /// `{"name","namespace","permission"}`: input of ClusterRole/-Binding names (W_cluster).
    pub const CLUSTER_ROLE_NAME_INPUT: GoType = GoType {
        name: "ClusterRoleNameInput",
        ty: &Ty::Struct(types_meta::CLUSTER_ROLE_NAME_INPUT),
    };

    /// The Go type's name, used as the root of error paths.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// Input that Go's decoder would have refused; the path names the member, e.g.
/// `DeploymentSpec.template.spec.containers[0].resources.limits.cpu`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GoJsonError {
    #[error("{path}: expected {expected}, found {found}")]
    WrongType {
        path: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("{path}: {source}")]
    Quantity { path: String, source: QuantityError },
    #[error("{path}: {value:?} is not an RFC 3339 time: {reason}")]
    Time {
        path: String,
        value: String,
        reason: String,
    },
}

/// The Go-JSON text of `value` read as `ty` (no trailing newline).
pub fn encode(value: &Value, ty: GoType) -> Result<String, GoJsonError> {
    let mut out = String::with_capacity(256);
    let root = Some(value).filter(|v| !v.is_null());
    encoder::encode(&mut out, root, ty.ty, &Path::Root(ty.name))?;
    Ok(out)
}

/// What a Go `json.Encoder` stream writes: the text followed by exactly one `\n` (docs/api-types.md §6.2 rule 9).
pub fn encode_stream(value: &Value, ty: GoType) -> Result<String, GoJsonError> {
    let mut text = encode(value, ty)?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests;
