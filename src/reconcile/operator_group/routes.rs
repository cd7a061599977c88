//! Which keys a watch event queues (docs/operator-groups.md §1, §2; docs/operator-groups.md §10). Pure lookups in the
//! caches; no API calls.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::ResourceExt;
use kube::api::PartialObjectMeta;

use crate::api::keys::{OWNER_LABEL, OWNER_NAMESPACE_LABEL};
use crate::api::{ClusterServiceVersion, OperatorGroup};
use crate::operator_group::label_selector;
use crate::operator_group::namespace_labels::group_label_key;
use crate::operator_group::targets::TargetNamespaces;

use super::ObjectKey;
use super::cache::{Caches, CopyChange};
use crate::reconcile::work_queue::WorkQueue;

/// The loops' queues.
#[derive(Clone, Default)]
pub struct Queues {
    /// OperatorGroup syncs.
    pub groups: WorkQueue<ObjectKey>,
    /// Namespace label syncs.
    pub namespaces: WorkQueue<String>,
    /// Copy fan-out of one original CSV.
    pub copies: WorkQueue<ObjectKey>,
    /// The OLMConfig status.
    pub olm_config: WorkQueue<()>,
}

fn key_of<K: kube::Resource>(obj: &K) -> ObjectKey {
    ObjectKey::new(
        obj.meta().namespace.as_deref().unwrap_or_default(),
        &obj.name_any(),
    )
}

fn status_targets(og: &OperatorGroup) -> Option<TargetNamespaces> {
    og.status
        .as_ref()
        .and_then(|s| TargetNamespaces::from_status(s.namespaces.as_deref()).ok())
}

impl Queues {
    /// A group changed or went away: its siblings (the multiple-groups condition), the
    /// namespaces it labels or labelled, and the copies of its member CSVs.
    pub fn on_group(&self, caches: &Caches, og: &OperatorGroup) {
        let namespace = og.metadata.namespace.as_deref().unwrap_or_default();
        self.groups.add(key_of(og));
        self.groups.add_all(
            caches
                .groups_in(namespace)
                .iter()
                .map(|g| key_of(g.as_ref())),
        );
        let mut namespaces: BTreeSet<String> = BTreeSet::new();
        if let Some(TargetNamespaces::Named(set)) = status_targets(og) {
            namespaces.extend(set);
        }
        if let Some(uid) = og.metadata.uid.as_deref() {
            let label = group_label_key(uid);
            namespaces.extend(
                caches
                    .namespaces
                    .state_filter(|ns| ns.labels().contains_key(&label))
                    .iter()
                    .map(|ns| ns.name_any()),
            );
        }
        self.namespaces.add_all(namespaces);
        self.copies
            .add_all(caches.csvs_in(namespace).iter().map(|c| key_of(c.as_ref())));
    }

    /// An original CSV changed or went away: its copies, and its namespace's groups (provided
    /// APIs, member annotations).
    pub fn on_csv(&self, caches: &Caches, csv: &ClusterServiceVersion) {
        let namespace = csv.metadata.namespace.as_deref().unwrap_or_default();
        self.copies.add(key_of(csv));
        self.groups.add_all(
            caches
                .groups_in(namespace)
                .iter()
                .map(|g| key_of(g.as_ref())),
        );
    }

    /// A copy changed or went away: its original, when the copy is no longer what the
    /// original wants (or the original was never planned since start-up).
    pub fn on_copy(&self, caches: &Caches, change: CopyChange) {
        match change {
            CopyChange::Upserted(record) => {
                let original = ObjectKey::new(&record.copied_from, &record.name);
                let desired = caches
                    .desired_copies
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&original)
                    .copied();
                // A copy without status is one being created: its status write follows
                // and needs no new plan. Anything else that differs from what the original
                // wants (a hand edit, an original never planned since start-up) does.
                let stale = match desired {
                    None => true,
                    Some(want) => {
                        want.content != record.hashes.content
                            || (record.has_status && want.status != record.hashes.status)
                    }
                };
                if stale || !record.has_operator_namespace {
                    self.copies.add(original);
                }
            }
            CopyChange::Removed { original } => self.copies.add(original),
            CopyChange::Relisted(originals) => self.copies.add_all(originals),
        }
    }

    /// A namespace appeared, changed or went away: its labels; groups whose selection may
    /// change (every selector group — OLM waits for a resync here, §11 item 3); and the copies
    /// of operators that target it, so a new namespace gets its copies at once (README).
    pub fn on_namespace(&self, caches: &Caches, ns: &PartialObjectMeta<Namespace>, deleted: bool) {
        let name = ns.name_any();
        if !deleted {
            self.namespaces.add(name.clone());
        }
        for og in caches.groups.state() {
            let selects = og
                .spec
                .selector
                .as_ref()
                .is_some_and(|s| !label_selector::is_empty(s))
                && og.spec.target_namespaces.as_ref().is_none_or(Vec::is_empty);
            let targets = status_targets(&og);
            let covers = targets.as_ref().is_some_and(|t| t.contains(&name));
            if selects || covers {
                self.groups.add(key_of(og.as_ref()));
            }
            if covers {
                let group_ns = og.metadata.namespace.as_deref().unwrap_or_default();
                self.copies
                    .add_all(caches.csvs_in(group_ns).iter().map(|c| key_of(c.as_ref())));
            }
        }
    }

    /// The OLMConfig changed: every original (copies may be switched on or off).
    pub fn on_olm_config(&self, caches: &Caches) {
        self.olm_config.add(());
        self.copies
            .add_all(caches.csvs.state().iter().map(|c| key_of(c.as_ref())));
    }

    /// A group ClusterRole changed or went away: its group (recreate, or clean up after a
    /// deleted group).
    pub fn on_group_role(&self, role: &ClusterRole) {
        let labels = role.labels();
        if let (Some(name), Some(namespace)) =
            (labels.get(OWNER_LABEL), labels.get(OWNER_NAMESPACE_LABEL))
        {
            self.groups.add(ObjectKey::new(namespace, name));
        }
    }

    /// Everything, for the periodic resync.
    pub fn resync(&self, caches: &Caches) {
        self.groups
            .add_all(caches.groups.state().iter().map(|g| key_of(g.as_ref())));
        for role in caches.group_roles.state() {
            self.on_group_role(&role);
        }
        self.namespaces
            .add_all(caches.namespaces.state().iter().map(|n| n.name_any()));
        self.copies
            .add_all(caches.csvs.state().iter().map(|c| key_of(c.as_ref())));
        self.copies.add_all(caches.copies.originals());
        self.olm_config.add(());
    }
}
