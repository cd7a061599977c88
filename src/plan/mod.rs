//! Plans (pure): a resolved bundle turned into the ordered steps of an InstallPlan, the RBAC
//! OLM derives from a CSV (with OLM's names), the CRD update safety check, which old plans to
//! delete, bundle lookups for image bundles, and everything the InstallPlan controller decides:
//! one sync of a plan (`decision`), the refusals before any write and what a pass reports
//! (`execution`), the writes of each stage of a pass (`pass`), the order steps are listed and applied in (`order`), the bundle lookups
//! (`lookups`, `unpack`). Nothing here talks to a cluster. docs/install-plans.md §5–§11.

pub mod alongside;
pub mod content;
pub mod crd_reader;
pub mod crd_safety;
pub mod decision;
pub mod downgrade_safety;
pub mod draft;
pub mod error;
pub mod execution;
pub mod gc;
pub mod image_bundle;
pub mod kinds;
pub mod lookups;
pub mod name;
pub mod object;
pub mod order;
pub mod pass;
pub mod phase;
pub mod prepare;
pub mod rbac;
pub mod scope;
pub mod scoped_refusal;
pub mod steps;
pub mod superseded;
pub mod unpack;

pub use content::{BundleSource, ContentError, bundle_content, bundle_source};
pub use crd_safety::{
    CrdUpdateCheck, CrdUpdateError, VersionToValidate, check_crd_update, versions_to_validate,
};
pub use draft::{
    PlanDraft, RESOLUTION_LABEL, ServedSubscription, next_generation, plan_reference, wire_step,
};
pub use error::PlanError;
pub use gc::{PlanForGc, plans_to_delete};
pub use image_bundle::{BundleReference, PulledObjects, bundle_lookup, image_bundle_steps};
pub use kinds::{Scope, StepKind};
pub use name::install_plan_name;
pub use object::StepObject;
pub use order::{ExecutionOrder, StepAction, execution_order, order_plan, step_action};
pub use rbac::rbac_manifests;
pub use steps::{BundleContent, PlannedStep, bundle_steps, catalog_source_names, csv_names};
