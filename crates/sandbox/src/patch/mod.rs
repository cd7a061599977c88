//! Kubernetes PATCH semantics on `serde_json::Value`: JSON merge patch (RFC 7386), JSON patch
//! (RFC 6902), strategic merge patch, and server-side apply with `metadata.managedFields`.
//!
//! Pure: no clock reads (timestamps come in as `now`, RFC 3339), no I/O.
//!
//! How the API server shell uses it:
//! - `PATCH` with `application/merge-patch+json` → [`apply_merge_patch`];
//!   `application/json-patch+json` → [`apply_json_patch`];
//!   `application/strategic-merge-patch+json` → [`apply_strategic_merge_patch`] (415 for
//!   custom resources); then [`record_update`] (or [`record_status_update`] on `/status`).
//! - `application/apply-patch+yaml` → [`server_side_apply`] (or [`server_side_apply_status`]
//!   on `/status`); `force` is the `force=true` query parameter.
//! - create/update → [`record_update`] with the old object (`None` on create).
//! - For kinds with a status subresource, a main-resource write must keep the old `status`
//!   (e.g. via [`strip_status`] and copying the live one back) before [`record_update`].
//!
//! [`PatchError`] maps to HTTP: `Invalid` 422 (400 for undecodable bodies), `Conflict` 409,
//! `UnsupportedMediaType` 415.

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
