//! OLM's API types, exactly as they appear on the wire, and the CRDs that serve them.
//!
//! One file per kind; [`conditions`] holds the shared condition helper, [`keys`] the OLM
//! annotation and label keys, [`crd`] the CustomResourceDefinitions olm-rs installs.
//! Enum-like fields use open string enums (see `string_enum.rs` for why).
//!
//! Field shapes follow OLM's Go types, so objects read and write as OLM's do:
//! * a field Go always writes (no `omitempty`) is a plain value with `#[serde(default)]`: an
//!   absent one reads as the zero value (as in Go), it is always written, and the CRD schema
//!   requires it;
//! * a field Go omits when empty is an `Option`, never sent when `None` — so a server-side
//!   apply never touches a field we did not set.
//!
//! Read untrusted documents with [`decode`], whose errors name the object and the field.

mod string_enum;

pub mod catalog_source;
pub mod cluster_service_version;
pub mod conditions;
pub mod crd;
pub mod csv_definitions;
pub mod csv_status;
pub mod decode;
pub mod error;
pub mod event;
pub mod install_plan;
pub mod keys;
pub mod olm_config;
pub mod operator;
pub mod operator_condition;
pub mod operator_group;
mod resource;
pub mod subscription;

pub use catalog_source::*;
pub use cluster_service_version::*;
pub use conditions::{
    ConditionStatus, MetaCondition, StatusCondition, find_condition, meta_condition,
    remove_condition, set_condition,
};
pub use csv_definitions::*;
pub use csv_status::*;
pub use decode::{DecodeError, decode};
pub use error::ApiError;
pub use install_plan::*;
pub use olm_config::*;
pub use operator::{
    ComponentCondition, Components, Operator, OperatorSpec, OperatorStatus, RichReference,
};
pub use operator_condition::{
    CONDITION_UPGRADEABLE, OperatorCondition, OperatorConditionSpec, OperatorConditionStatus,
};
pub use operator_group::{OperatorGroup, OperatorGroupSpec, OperatorGroupStatus, UpgradeStrategy};
pub use subscription::*;

/// API group of every OLM kind.
pub const GROUP: &str = "operators.coreos.com";
/// `apiVersion` of ClusterServiceVersion, Subscription, InstallPlan and CatalogSource.
pub const V1ALPHA1: &str = "operators.coreos.com/v1alpha1";
/// `apiVersion` of OperatorGroup (storage version), OLMConfig and Operator.
pub const V1: &str = "operators.coreos.com/v1";
/// `apiVersion` of OperatorCondition (storage version).
pub const V2: &str = "operators.coreos.com/v2";
/// `apiVersion` of the deprecated OperatorGroup version.
pub const V1ALPHA2: &str = "operators.coreos.com/v1alpha2";
/// Finalizer OLM puts on every CSV so it can clean up what the CSV installed.
pub const CSV_FINALIZER: &str = "operators.coreos.com/csv-cleanup";
/// Category every OLM CRD is listed in (`kubectl get olm`).
pub const CATEGORY: &str = "olm";
