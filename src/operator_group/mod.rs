//! OperatorGroup semantics, pure (docs/operator-groups.md, docs/operator-groups.md §10): target namespaces and their
//! encodings, membership annotations, provided APIs and intersecting groups, install-mode
//! support, the RBAC OLM generates for groups and members, namespace labels, and copied CSVs.
//!
//! Nothing here talks to a cluster or reads a clock; `reconcile::operator_group` and
//! `reconcile::operator_group::copied_csv` read the cluster, call these functions and write the results.

pub mod api_roles;
pub mod cluster_roles;
pub mod copied_csv;
pub mod copy_decision;
pub mod group_decision;
pub mod install_modes;
pub mod intersection;
pub mod label_selector;
pub mod member_rbac;
pub mod member_rbac_decision;
pub mod membership;
pub mod namespace_labels;
pub mod olm_config;
pub mod provided_apis;
pub mod status;
pub mod targets;

pub use install_modes::{InstallModeError, check_install_modes, check_install_modes_for};
pub use intersection::{ApiReconciliation, GroupApis, reconcile_provided_apis};
pub use membership::{MemberAnnotations, is_active_member, is_copied};
pub use provided_apis::{
    ApiKey, ApiSet, CrdNameWithoutGroup, csv_provided_apis, format_provided_apis,
    parse_provided_apis,
};
pub use targets::{TargetError, TargetNamespaces, groups_intersect, select_targets};
