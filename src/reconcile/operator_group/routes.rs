//! Which keys a watch event queues (docs/operator-groups.md). Pure lookups in the stores; no
//! API calls.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::PartialObjectMeta;

use super::stores::{is_csv_source_rbac, is_group_role};
use crate::api::keys::{OWNER_LABEL, OWNER_NAMESPACE_LABEL};
use crate::api::{ClusterServiceVersion, OperatorGroup};
use crate::operator_group::label_selector;
use crate::operator_group::namespace_labels::group_label_key;
use crate::operator_group::targets::TargetNamespaces;

use super::copy_index::CopyChange;
use super::namespaced_name::NamespacedName;
use super::stores::Stores;
use crate::reconcile::work_queue::WorkQueue;

/// The loops' queues.
#[derive(Clone, Default)]
pub struct Queues {
    /// OperatorGroup syncs.
    pub groups: WorkQueue<NamespacedName>,
    /// Namespace label syncs.
    pub namespaces: WorkQueue<String>,
    /// Copy fan-out of one original CSV.
    pub copies: WorkQueue<NamespacedName>,
    /// The OLMConfig status.
    pub olm_config: WorkQueue<TheOlmConfig>,
}

fn key_of<K: kube::Resource>(obj: &K) -> NamespacedName {
    NamespacedName::new(
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
    pub fn on_group(&self, stores: &Stores, og: &OperatorGroup) {
        let namespace = og.metadata.namespace.as_deref().unwrap_or_default();
        self.groups.add(key_of(og));
        self.groups.add_all(
            stores
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
                stores
                    .all_namespaces()
                    .iter()
                    .filter(|ns| ns.labels().contains_key(&label))
                    .map(|ns| ns.name_any()),
            );
        }
        self.namespaces.add_all(namespaces);
        self.copies
            .add_all(stores.csvs_in(namespace).iter().map(|c| key_of(c.as_ref())));
    }

    /// An original CSV changed or went away: its copies, and its namespace's groups (provided
    /// APIs, member annotations).
    pub fn on_csv(&self, stores: &Stores, csv: &ClusterServiceVersion) {
        let namespace = csv.metadata.namespace.as_deref().unwrap_or_default();
        self.copies.add(key_of(csv));
        self.groups.add_all(
            stores
                .groups_in(namespace)
                .iter()
                .map(|g| key_of(g.as_ref())),
        );
    }

    /// A copy changed or went away: its original, when the copy is no longer what the
    /// original wants (or the original was never planned since start-up).
    pub fn on_copy(&self, stores: &Stores, change: CopyChange) {
        match change {
            CopyChange::Upserted(record) => {
                let original = NamespacedName::new(&record.copied_from, &record.name);
                let desired = stores
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
    pub fn on_namespace(&self, stores: &Stores, ns: &PartialObjectMeta<Namespace>, deleted: bool) {
        let name = ns.name_any();
        if !deleted {
            self.namespaces.add(name.clone());
        }
        for og in stores.groups.all() {
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
                    .add_all(stores.csvs_in(group_ns).iter().map(|c| key_of(c.as_ref())));
            }
        }
    }

    /// A ServiceAccount changed or went away: the groups of its namespace that name it (it
    /// appeared, got its label, or went).
    pub fn on_service_account(&self, stores: &Stores, account: &NamespacedName) {
        let name = &account.name;
        self.groups.add_all(
            stores
                .groups_in(&account.namespace)
                .iter()
                .filter(|og| og.spec.service_account_name.as_deref() == Some(name.as_str()))
                .map(|og| key_of(og.as_ref())),
        );
    }

    /// The OLMConfig changed: every original (copies may be switched on or off).
    pub fn on_olm_config(&self, stores: &Stores) {
        self.olm_config.add(TheOlmConfig);
        self.copies
            .add_all(stores.csvs.all().iter().map(|c| key_of(c.as_ref())));
    }

    /// A group ClusterRole changed or went away: its group (recreate, or clean up after a
    /// deleted group).
    pub fn on_group_role(&self, role: &ClusterRole) {
        if !is_group_role(&role.metadata) {
            return;
        }
        let labels = role.labels();
        if let (Some(name), Some(namespace)) =
            (labels.get(OWNER_LABEL), labels.get(OWNER_NAMESPACE_LABEL))
        {
            self.groups.add(NamespacedName::new(namespace, name));
        }
    }

    /// A Role or RoleBinding a CSV owns changed or went: that CSV's copy run (its RBAC
    /// outside its namespace follows its sources).
    pub fn on_csv_rbac(&self, meta: &ObjectMeta) {
        if !is_csv_source_rbac(meta) {
            return;
        }
        let labels = meta.labels.as_ref();
        let get = |key: &str| labels.and_then(|l| l.get(key));
        if let (Some(name), Some(namespace)) = (get(OWNER_LABEL), get(OWNER_NAMESPACE_LABEL)) {
            self.copies.add(NamespacedName::new(namespace, name));
        }
    }

    /// Everything, for the periodic resync.
    pub fn resync(&self, stores: &Stores) {
        self.groups
            .add_all(stores.groups.all().iter().map(|g| key_of(g.as_ref())));
        for role in stores.group_roles() {
            self.on_group_role(&role);
        }
        self.namespaces
            .add_all(stores.all_namespaces().iter().map(|n| n.name_any()));
        self.copies
            .add_all(stores.csvs.all().iter().map(|c| key_of(c.as_ref())));
        self.copies.add_all(stores.copies.originals());
        self.olm_config.add(TheOlmConfig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::OperatorGroupSpec;
    use crate::api::keys::OWNER_KIND_LABEL;
    use kube_runtime::watcher::Event;

    fn group(name: &str, account: Option<&str>) -> OperatorGroup {
        let mut og = OperatorGroup::new(
            name,
            OperatorGroupSpec {
                service_account_name: account.map(str::to_owned),
                ..OperatorGroupSpec::default()
            },
        );
        og.metadata.namespace = Some("ops".into());
        og
    }

    #[tokio::test]
    async fn accounts_and_csv_rbac_queue_what_depends_on_them() {
        let (stores, mut groups) = Stores::for_tests();
        groups.apply_owned(Event::Init);
        groups.apply_owned(Event::InitApply(group("og", Some("scoped"))));
        groups.apply_owned(Event::InitApply(group("other", None)));
        groups.apply_owned(Event::InitDone);
        let queues = Queues::default();

        queues.on_service_account(&stores, &NamespacedName::new("ops", "default"));
        assert!(queues.groups.is_empty(), "no group names that account");
        queues.on_service_account(&stores, &NamespacedName::new("ops", "scoped"));
        assert_eq!(queues.groups.len(), 1);
        assert_eq!(queues.groups.next().await, NamespacedName::new("ops", "og"));

        let mut owned = ObjectMeta::default();
        queues.on_csv_rbac(&owned);
        assert!(queues.copies.is_empty(), "a Role without owner labels");
        owned.labels = Some(
            [
                (OWNER_LABEL, "op.v1"),
                (OWNER_NAMESPACE_LABEL, "ops"),
                (OWNER_KIND_LABEL, "ClusterServiceVersion"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        );
        queues.on_csv_rbac(&owned);
        assert_eq!(
            queues.copies.next().await,
            NamespacedName::new("ops", "op.v1")
        );
    }

    fn labels(pairs: &[(&str, &str)]) -> Option<std::collections::BTreeMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    /// The RBAC stores are the process's shared ones, holding everyone's objects: only an
    /// OperatorGroup's ClusterRoles route to groups, and only the Roles a CSV owns in its
    /// namespace (not a copy's) to its copy run.
    #[tokio::test]
    async fn only_owned_rbac_routes_from_the_shared_stores() {
        let queues = Queues::default();
        let owner = [(OWNER_LABEL, "op.v1"), (OWNER_NAMESPACE_LABEL, "ops")];

        let mut csv_role = ClusterRole::default();
        csv_role.metadata.labels = labels(&[
            owner[0],
            owner[1],
            (OWNER_KIND_LABEL, "ClusterServiceVersion"),
        ]);
        queues.on_group_role(&csv_role);
        assert!(
            queues.groups.is_empty(),
            "a CSV's ClusterRole is not a group's"
        );
        let mut group_role = ClusterRole::default();
        group_role.metadata.labels = labels(&[
            (OWNER_LABEL, "og"),
            (OWNER_NAMESPACE_LABEL, "ops"),
            (OWNER_KIND_LABEL, "OperatorGroup"),
        ]);
        queues.on_group_role(&group_role);
        assert_eq!(queues.groups.next().await, NamespacedName::new("ops", "og"));

        let copied = ObjectMeta {
            labels: labels(&[
                owner[0],
                owner[1],
                (OWNER_KIND_LABEL, "ClusterServiceVersion"),
                (crate::api::keys::COPIED_FROM_LABEL, "ops"),
            ]),
            ..ObjectMeta::default()
        };
        queues.on_csv_rbac(&copied);
        assert!(queues.copies.is_empty(), "a copy's Role is not a source");
        let by_group = ObjectMeta {
            labels: labels(&[owner[0], owner[1], (OWNER_KIND_LABEL, "OperatorGroup")]),
            ..ObjectMeta::default()
        };
        queues.on_csv_rbac(&by_group);
        assert!(queues.copies.is_empty(), "not a CSV's Role");
        assert!(!is_csv_source_rbac(&copied) && !is_csv_source_rbac(&by_group));
        assert!(is_group_role(&group_role.metadata) && !is_group_role(&csv_role.metadata));
    }
}

/// The key of the one cluster-wide OLMConfig (`cluster`) on its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TheOlmConfig;

impl std::fmt::Display for TheOlmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(crate::api::olm_config::OLM_CONFIG_NAME)
    }
}
