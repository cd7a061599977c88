//! Copied CSVs (docs/operator-groups.md §10): the projection of an original CSV written into each target
//! namespace, the content hashes that tell whether a copy is up to date without keeping it, and
//! the plan of creates, updates and deletes for one original.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hasher;

use crate::api::keys::{
    COPIED_FROM_LABEL, LAST_APPLIED_ANNOTATION, OPERATOR_GROUP_ANNOTATION,
    OPERATOR_GROUP_NAMESPACE_ANNOTATION, TARGET_NAMESPACES_ANNOTATION,
};
use crate::api::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase, CsvReason};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::targets::TargetNamespaces;

/// Label prefix stripped from copies (the Operator API's component labels).
const STRIPPED_LABEL_PREFIX: &str = "operators.coreos.com/";

/// `status.message` of a copy.
pub fn copied_message(operator_namespace: &str) -> String {
    format!("The operator is running in {operator_namespace} but is managing this namespace")
}

/// docs/csv-phases.md §2: CSVs that are never copied — phase None, or failed for a group reason, or
/// themselves copies.
pub fn is_uncopiable(status: Option<&ClusterServiceVersionStatus>) -> bool {
    let Some(status) = status else { return true };
    if status.phase() == CsvPhase::None {
        return true;
    }
    matches!(
        status.reason,
        Some(
            CsvReason::Copied
                | CsvReason::InvalidInstallModes
                | CsvReason::NoTargetNamespaces
                | CsvReason::UnsupportedOperatorGroup
                | CsvReason::NoOperatorGroup
                | CsvReason::TooManyOperatorGroups
                | CsvReason::InterOperatorGroupOwnerConflict
                | CsvReason::CannotModifyStaticOperatorGroupProvidedApis
        )
    )
}

/// The copy of `original` without a namespace: the same body serves every target namespace.
/// Labels lose `operators.coreos.com/*` and gain `olm.copiedFrom`; annotations lose
/// `olm.targetNamespaces` and kubectl's last-applied configuration; the spec is the original's;
/// the status is the original's with reason `Copied`. No ownerReferences (cross-namespace).
pub fn copy_prototype(original: &ClusterServiceVersion) -> ClusterServiceVersion {
    let from = original.metadata.namespace.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = original
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| !k.starts_with(STRIPPED_LABEL_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    labels.insert(COPIED_FROM_LABEL.to_owned(), from.clone());
    let annotations: BTreeMap<String, String> = original
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| *k != TARGET_NAMESPACES_ANNOTATION && *k != LAST_APPLIED_ANNOTATION)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut status = original.status.clone().unwrap_or_default();
    status.reason = Some(CsvReason::Copied);
    status.message = Some(copied_message(&from));
    let mut copy = ClusterServiceVersion::new(
        original.metadata.name.as_deref().unwrap_or_default(),
        original.spec.clone(),
    );
    copy.metadata = ObjectMeta {
        name: original.metadata.name.clone(),
        labels: Some(labels),
        annotations: (!annotations.is_empty()).then_some(annotations),
        ..Default::default()
    };
    copy.status = Some(status);
    copy
}

/// Content hashes of a (copied) CSV: one over name, labels, annotations and spec, one over the
/// status — what OLM's copied-CSV cache keeps instead of the copies (docs/operator-groups.md §10 "Updates").
/// Only ever compared within one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyHashes {
    pub content: u64,
    pub status: u64,
}

struct HashWriter(std::collections::hash_map::DefaultHasher);

impl std::io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn hash_json(value: &impl serde::Serialize) -> u64 {
    let mut writer = HashWriter(std::collections::hash_map::DefaultHasher::new());
    // Serialising these plain data types into a writer that never fails cannot fail; should
    // it, the hash of the partial output still differs from any real copy's and the copy is
    // simply rewritten.
    let _ = serde_json::to_writer(&mut writer, value);
    writer.0.finish()
}

/// The hashes of `csv` as it stands (a copy read from the API, or a prototype).
pub fn copy_hashes(csv: &ClusterServiceVersion) -> CopyHashes {
    let content = hash_json(&(
        &csv.metadata.name,
        &csv.metadata.labels,
        &csv.metadata.annotations,
        &csv.spec,
    ));
    CopyHashes {
        content,
        status: hash_json(&csv.status),
    }
}

/// What the controller keeps per copy instead of the copy itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyRecord {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    /// `olm.copiedFrom`: the original's namespace.
    pub copied_from: String,
    /// Whether `olm.operatorNamespace` is set (copies without it are removed).
    pub has_operator_namespace: bool,
    /// `olm.operatorGroup`.
    pub operator_group: Option<String>,
    /// Whether the copy has a status yet (a create is followed by a status write).
    pub has_status: bool,
    pub hashes: CopyHashes,
}

/// The record of a copy; `None` for a CSV without `olm.copiedFrom`.
pub fn copy_record(copy: &ClusterServiceVersion) -> Option<CopyRecord> {
    let copied_from = copy
        .metadata
        .labels
        .as_ref()?
        .get(COPIED_FROM_LABEL)?
        .clone();
    let annotations = copy.metadata.annotations.as_ref();
    Some(CopyRecord {
        namespace: copy.metadata.namespace.clone().unwrap_or_default(),
        name: copy.metadata.name.clone().unwrap_or_default(),
        uid: copy.metadata.uid.clone().unwrap_or_default(),
        resource_version: copy.metadata.resource_version.clone().unwrap_or_default(),
        copied_from,
        has_operator_namespace: annotations
            .is_some_and(|a| a.contains_key(OPERATOR_GROUP_NAMESPACE_ANNOTATION)),
        operator_group: annotations
            .and_then(|a| a.get(OPERATOR_GROUP_ANNOTATION))
            .cloned(),
        has_status: copy.status.is_some(),
        hashes: copy_hashes(copy),
    })
}

/// The OLMConfig switch and the namespaces it spares (`--protectedCopiedCSVNamespaces`).
#[derive(Debug, Clone, Default)]
pub struct CopySettings {
    /// `spec.features.disableCopiedCSVs` of OLMConfig `cluster`.
    pub disabled: bool,
    pub protected_namespaces: BTreeSet<String>,
}

/// The original as the planner sees it.
#[derive(Debug, Clone, Copy)]
pub struct Original<'a> {
    pub csv: &'a ClusterServiceVersion,
    /// Copies may be created and updated: the CSV is an active member of its group, not
    /// uncopiable, and the group targets more than its own namespace (docs/csv-phases.md §2, docs/operator-groups.md §10).
    pub copyable: bool,
    /// Hashes of [`copy_prototype`] of this CSV.
    pub desired: CopyHashes,
}

/// One write of a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyWrite {
    /// No copy in this namespace yet: create it, then write its status.
    Create { namespace: String },
    /// The copy differs: replace what differs (`content`: metadata and spec; `status`).
    Update {
        namespace: String,
        resource_version: String,
        content: bool,
        status: bool,
    },
}

/// Why a copy is removed (docs/operator-groups.md §10 "Removal").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovalReason {
    OriginalGone,
    OriginalInConflict,
    NotATarget,
    NoOperatorNamespace,
    InOriginalNamespace,
    CopiesDisabled,
}

/// A copy to delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyDelete {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub reason: RemovalReason,
}

/// Everything to do for one original.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyPlan {
    pub writes: Vec<CopyWrite>,
    pub deletes: Vec<CopyDelete>,
    /// Namespaces whose copy is already up to date.
    pub up_to_date: usize,
}

impl CopyPlan {
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.deletes.is_empty()
    }
}

/// Plans the copies of one original. `copies` are the records of this original's copies
/// (same name, `olm.copiedFrom` = its namespace); `namespaces` are the existing namespaces
/// that are not being deleted. With `original: None` every copy goes.
pub fn plan_copies<'n>(
    original: Option<Original<'_>>,
    copies: &[&CopyRecord],
    namespaces: impl IntoIterator<Item = &'n str>,
    settings: &CopySettings,
) -> CopyPlan {
    let mut plan = CopyPlan::default();
    let delete = |copy: &CopyRecord, reason| CopyDelete {
        namespace: copy.namespace.clone(),
        name: copy.name.clone(),
        uid: copy.uid.clone(),
        reason,
    };
    let Some(original) = original else {
        plan.deletes = copies
            .iter()
            .map(|c| delete(c, RemovalReason::OriginalGone))
            .collect();
        return plan;
    };
    let csv = original.csv;
    let home = csv.metadata.namespace.as_deref().unwrap_or_default();
    let in_conflict = csv.status.as_ref().is_some_and(|s| {
        s.phase() == CsvPhase::Failed
            && s.reason == Some(CsvReason::InterOperatorGroupOwnerConflict)
    });
    let targets = csv
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TARGET_NAMESPACES_ANNOTATION))
        .and_then(|value| TargetNamespaces::from_annotation(value).ok())
        .unwrap_or(TargetNamespaces::Named(BTreeSet::new()));
    // docs/operator-groups.md §10 "Disabling": only all-namespace operators lose their copies, and the
    // protected namespaces keep theirs.
    let allowed = |ns: &str| {
        targets.contains(ns)
            && ns != home
            && !(settings.disabled
                && targets.is_all()
                && !settings.protected_namespaces.contains(ns))
    };

    let mut existing: BTreeMap<&str, &CopyRecord> = BTreeMap::new();
    for copy in copies {
        let reason = if in_conflict {
            Some(RemovalReason::OriginalInConflict)
        } else if copy.namespace == home {
            Some(RemovalReason::InOriginalNamespace)
        } else if !copy.has_operator_namespace {
            Some(RemovalReason::NoOperatorNamespace)
        } else if !targets.contains(&copy.namespace) {
            Some(RemovalReason::NotATarget)
        } else if !allowed(&copy.namespace) {
            Some(RemovalReason::CopiesDisabled)
        } else {
            None
        };
        match reason {
            Some(reason) => plan.deletes.push(delete(copy, reason)),
            None => {
                existing.insert(copy.namespace.as_str(), copy);
            }
        }
    }
    if !original.copyable || in_conflict {
        return plan;
    }
    for ns in namespaces.into_iter().filter(|ns| allowed(ns)) {
        match existing.get(ns) {
            None => plan.writes.push(CopyWrite::Create {
                namespace: ns.to_owned(),
            }),
            Some(copy) => {
                let content = copy.hashes.content != original.desired.content;
                let status = copy.hashes.status != original.desired.status;
                if content || status {
                    plan.writes.push(CopyWrite::Update {
                        namespace: ns.to_owned(),
                        resource_version: copy.resource_version.clone(),
                        content,
                        status,
                    });
                } else {
                    plan.up_to_date += 1;
                }
            }
        }
    }
    plan
}

#[cfg(test)]
mod tests;
