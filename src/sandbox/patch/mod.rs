//! Kubernetes PATCH semantics on `serde_json::Value`: JSON merge patch (RFC 7386), JSON patch
//! (RFC 6902), strategic merge patch, and server-side apply with `metadata.managedFields`.
//!
//! Pure: no clock reads (timestamps come in as arguments), no I/O.

mod apply;
mod error;
mod fields_v1;
mod json;
mod managed_fields;
mod merge;
mod merge_keys;
mod strategic;
mod typed;

#[cfg(test)]
mod tests;

pub use apply::{
    record_status_update, record_update, server_side_apply, server_side_apply_status, strip_status,
};
pub use error::{FieldConflict, PatchError};
pub use json::apply_json_patch;
pub use merge::{apply_merge_patch, diff_merge_patch};
pub use strategic::{UNSUPPORTED_FOR_CUSTOM_RESOURCES, apply_strategic_merge_patch};

/// The group, version and kind of the object being patched; decides the list strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupVersionKindRef<'a> {
    /// API group, `""` for the core group.
    pub group: &'a str,
    /// API version within the group, e.g. `v1`.
    pub version: &'a str,
    /// Kind, e.g. `Deployment`.
    pub kind: &'a str,
}
