//! The PackageManifest API (`packages.operators.coreos.com/v1`), pure part: what OLM's package
//! server shows for each package of each CatalogSource, built from the catalog indexes olm-rs
//! already holds, with the list/get rules, selectors, Table rows and icon of that API.
//! The HTTP serving lives in `package_server` (docs/packagemanifests.md).

pub mod build;
pub mod icon;
pub mod selector;
pub mod store;
pub mod table;
pub mod types;

#[cfg(test)]
mod tests;

pub use build::{BuiltPackage, CatalogMeta, PackageIcon, build_catalog};
pub use selector::{LabelSelector, SelectorError, name_from_field_selector};
pub use store::{ManifestStore, Scope, SyncReport};
pub use types::PackageManifest;
