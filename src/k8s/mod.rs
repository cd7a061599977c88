//! The thin layer every reconciler writes through: one field manager, server-side apply,
//! an injectable clock and best-effort events.

pub mod clock;
pub mod connections;
pub mod discovery;
pub mod effects;
pub mod errors;
pub mod events;
pub mod impersonate;
pub mod indexed_store;
pub mod owned_set;
pub mod read;
pub mod shared;
pub mod slim;
pub mod store;
pub mod warnings;
pub mod watch_backoff;
pub mod write;

/// The one field manager of every olm-rs write (STYLE rule 2).
pub const MANAGER: &str = "olm-rs";

/// Parameters of a create or replace by olm-rs: the one field manager, so that managed fields
/// name olm-rs and a later apply (or a takeover from OLM) sees who owns what.
pub fn post_params() -> kube::api::PostParams {
    kube::api::PostParams {
        dry_run: false,
        field_manager: Some(MANAGER.to_owned()),
    }
}

/// Parameters of a merge or JSON patch by olm-rs, under the one field manager.
pub fn patch_params() -> kube::api::PatchParams {
    kube::api::PatchParams {
        dry_run: false,
        force: false,
        field_manager: Some(MANAGER.to_owned()),
        field_validation: None,
    }
}
