//! What resolution looks at: a snapshot of one namespace, taken by the shell from its stores.

use crate::api::CatalogRef;
use std::sync::Arc;

use crate::api::Subscription;
use crate::catalog::CatalogIndex;
use crate::catalog::model::Property;
use crate::catalog::properties::GvkValue;
use crate::catalog::semver_range::Version;

/// One catalog visible from the namespace.
#[derive(Debug, Clone)]
pub struct CatalogInput {
    pub key: CatalogRef,
    /// `spec.priority` (used when choosing dependency providers, a later issue).
    pub priority: i32,
    /// The CatalogSource's UID, for `status.catalogHealth` references.
    pub uid: Option<String>,
    /// Its content, when it could be read.
    pub content: CatalogContent,
    /// Healthy in the sense of docs/install-plans.md §3 (spec valid, serving).
    pub healthy: bool,
}

#[derive(Debug, Clone)]
pub enum CatalogContent {
    Ready(Arc<CatalogIndex>),
    /// Not readable (yet): the reason says why, in plain words.
    Unavailable(String),
    /// Not read yet: its first load (since the controller started, or since the CatalogSource
    /// was made again) is under way; the reason says so. Its health is not known yet either.
    Loading(String),
}

impl CatalogInput {
    pub fn index(&self) -> Option<&CatalogIndex> {
        match &self.content {
            CatalogContent::Ready(index) => Some(index),
            CatalogContent::Unavailable(_) | CatalogContent::Loading(_) => None,
        }
    }
}

/// A CSV installed in the namespace (copied CSVs are not installed here and never listed).
#[derive(Debug, Clone, PartialEq)]
pub struct InstalledCsv {
    pub name: String,
    /// `spec.version`, read tolerantly.
    pub version: Option<Version>,
    /// The package, from the `olm.package` entry of its `operatorframework.io/properties`.
    pub package: Option<String>,
    /// APIs it provides: `olm.gvk` properties, else owned CRDs and APIServices.
    pub provided: Vec<GvkValue>,
    /// `status.phase`.
    pub phase: String,
    /// Its properties (docs/resolution.md §3): the `operatorframework.io/properties` annotation,
    /// else `olm.gvk` for owned and `olm.gvk.required` for required CRDs and APIServices. Its
    /// requirements count: resolution never breaks an installed operator's dependency.
    pub properties: Vec<Property>,
}

/// The OperatorGroups of the namespace, as far as resolution cares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorGroups {
    /// Names, sorted.
    pub names: Vec<String>,
    /// `olm.operatorframework.io/exclude-global-namespace-resolution: "true"` on the single one.
    pub exclude_global_catalogs: bool,
}

/// One namespace, as resolution sees it.
#[derive(Debug, Clone, Copy)]
pub struct NamespaceInput<'a> {
    pub namespace: &'a str,
    /// Every Subscription of the namespace.
    pub subscriptions: &'a [Subscription],
    pub installed: &'a [InstalledCsv],
    /// Catalogs in the namespace and in the global catalog namespace.
    pub catalogs: &'a [CatalogInput],
    pub operator_groups: &'a OperatorGroups,
    pub global_catalog_namespace: &'a str,
}

impl<'a> NamespaceInput<'a> {
    /// Namespaces whose catalogs this namespace may use (docs/resolution.md §2).
    pub fn catalog_namespaces(&self) -> Vec<&str> {
        let mut out = vec![self.namespace];
        if !self.operator_groups.exclude_global_catalogs
            && self.global_catalog_namespace != self.namespace
        {
            out.push(self.global_catalog_namespace);
        }
        out
    }

    pub fn catalog(&self, key: &CatalogRef) -> Option<&'a CatalogInput> {
        self.catalogs.iter().find(|c| &c.key == key)
    }

    pub fn installed_csv(&self, name: &str) -> Option<&'a InstalledCsv> {
        self.installed.iter().find(|c| c.name == name)
    }
}
